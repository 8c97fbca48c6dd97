package recorder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// TestMain runs the hidden commands the recorder re-executes its program as: the test
// binary is /proc/self/exe to Record and to the round-trip probe.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == ChildCommand || os.Args[1] == ProbeCommand) {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		var err error
		if os.Args[1] == ChildCommand {
			err = RunChild(ctx, Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
				Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), Version: "test"})
		} else {
			err = RunProbe(ctx, os.Stdin, os.Stdout, os.Args[2:])
		}
		stop()
		var ee *ExitError
		switch {
		case errors.As(err, &ee):
			os.Exit(ee.Code)
		case err != nil:
			fmt.Fprintln(os.Stderr, err)
			os.Exit(exitError)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// requireRecord skips (or fails) a test that mounts the layer in place: FUSE and root.
func requireRecord(t *testing.T) {
	t.Helper()
	fusetest.Require(t)
	testenv.Root(t, testenv.FUSE, "in-place record makes a private mount namespace (CAP_SYS_ADMIN)")
}

// syncBuffer is a bytes.Buffer safe to write from the recorder's goroutines while a test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// recorded is one event of a trace, with its path's name.
type recorded struct {
	trace.Event
	path string
}

// readTrace returns the events of the trace at path, and whether it has its footer.
func readTrace(t *testing.T, path string) ([]recorded, *trace.Reader) {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatalf("open trace: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	var evs []recorded
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read trace: %v", err)
		}
		evs = append(evs, recorded{*ev, r.PathName(ev.Path)})
	}
	return evs, r
}

// count returns how many successful events of op on path evs hold.
func count(evs []recorded, op trace.Op, path string) int {
	n := 0
	for _, e := range evs {
		if e.Op == op && e.path == path && e.Errno == 0 {
			n++
		}
	}
	return n
}

// TestRecordLifecycle runs jobs through Record, in place: the recorder (this test binary,
// re-executed) mounts the layer over the target, runs the job, and takes everything down.
// The job's file lands in the real directory, its requests in the trace, its exit status
// is Record's outcome, and the summary names the job's end.
func TestRecordLifecycle(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "sh", "cat")
	for _, tc := range []struct {
		name string
		job  string
		code int // 0: Record returns nil
	}{
		{"success", `echo hi > f && cat f`, 0},
		{"failure", `echo hi > f && cat f && exit 3`, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(t.TempDir(), "t.iotap")
			var stdout, stderr syncBuffer
			wd, _ := os.Getwd()
			if err := os.Chdir(dir); err != nil {
				t.Fatal(err)
			}
			err := Record(context.Background(), Spec{Output: out, Argv: []string{"sh", "-c", tc.job}},
				Env{Stdout: &stdout, Stderr: &stderr, Version: "test"})
			_ = os.Chdir(wd)
			var ee *ExitError
			switch {
			case tc.code == 0 && err != nil:
				t.Fatalf("Record: %v\n%s", err, stderr.String())
			case tc.code != 0 && (!errors.As(err, &ee) || ee.Code != tc.code):
				t.Fatalf("Record: %v, want exit %d\n%s", err, tc.code, stderr.String())
			}
			if stdout.String() != "hi\n" {
				t.Errorf("the job printed %q", stdout.String())
			}
			if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "hi\n" {
				t.Errorf("the job's file in the real directory: %q, %v", b, err)
			}
			wantEnd := fmt.Sprintf("iotap: job exit %d after ", tc.code)
			if !strings.Contains(stderr.String(), "iotap: tracing "+dir+" in place") || !strings.Contains(stderr.String(), wantEnd) {
				t.Errorf("stderr lacks the start or %q:\n%s", wantEnd, stderr.String())
			}
			evs, r := readTrace(t, out)
			if _, ok := r.Footer(); !ok {
				t.Error("the trace has no footer")
			}
			if h := r.Header(); h.Kind != "record" || h.Target.Path != dir || h.IotapVersion != "test" || len(h.Command) != 3 {
				t.Errorf("header %+v", h)
			}
			if count(evs, trace.OpCreate, "f") != 1 || count(evs, trace.OpWrite, "f") != 1 || count(evs, trace.OpRead, "f") < 1 {
				t.Errorf("the trace lacks the job's create, write and read of f: %d events", len(evs))
			}
			// The summary counts what the trace holds.
			for _, want := range []string{fmt.Sprintf("\n  ops %d (", len(evs)), fmt.Sprintf("\n  events %d written, 0 dropped", len(evs))} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("the summary lacks %q (the trace has %d events):\n%s", want, len(evs), stderr.String())
				}
			}
		})
	}
}

// TestMountLifecycle serves a view with Mount in this process, while a child process
// works on it; cancelling the context takes the view down and closes the trace.
func TestMountLifecycle(t *testing.T) {
	fusetest.Require(t)
	testenv.Programs(t, testenv.FUSE, "sh")
	target, mnt := t.TempDir(), t.TempDir()
	out := filepath.Join(t.TempDir(), "t.iotap")
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Mount(ctx, Spec{Target: target, MountAt: mnt, Output: out, Sample: Sampling{}}, Env{Stderr: &stderr, Version: "test"},
			func() { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Mount: %v\n%s", err, stderr.String())
	}
	if b, err := runJob(`echo data > "$1/g" && cat "$1/g"`, mnt); err != nil || b != "data\n" {
		t.Fatalf("job on the view: %q, %v", b, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Mount: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "iotap: mount stopped by signal after ") {
		t.Errorf("no summary:\n%s", stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(target, "g")); err != nil || string(b) != "data\n" {
		t.Errorf("the file in the target: %q, %v", b, err)
	}
	evs, r := readTrace(t, out)
	if _, ok := r.Footer(); !ok {
		t.Error("the trace has no footer")
	}
	if count(evs, trace.OpCreate, "g") != 1 || count(evs, trace.OpWrite, "g") != 1 {
		t.Errorf("the trace lacks the job's create and write of g (%d events)", len(evs))
	}
}

// runJob runs a shell script with $1 = arg as a child process and returns its output.
func runJob(script, arg string) (string, error) {
	out, err := exec.Command("sh", "-c", script, "sh", arg).CombinedOutput()
	return string(out), err
}
