package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
)

// writeCreates writes a trace of a job that creates, writes and closes files f0..f(n-1),
// gap apart, one events chunk per file, and returns the offsets of its chunks.
func writeCreates(t *testing.T, path string, n int, gap time.Duration) {
	t.Helper()
	w, err := trace.Create(path, trace.Header{Kind: "record"}, trace.WriterOptions{ChunkEvents: 3, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id := w.Path(trace.RootPath, fmt.Sprintf("f%d", i))
		s := int64(i) * int64(gap)
		h := uint64(i + 1)
		w.Append(&trace.Event{Op: trace.OpCreate, Start: s, Dur: 1000, Path: id, Handle: h, Mode: syscall.S_IFREG | 0o644, Flags: syscall.O_WRONLY | syscall.O_CREAT, Tid: 5, Pid: 5})
		w.Append(&trace.Event{Op: trace.OpWrite, Start: s + 2000, Dur: 1000, Path: id, Handle: h, Size: 100, Ret: 100, Tid: 5, Pid: 5})
		w.Append(&trace.Event{Op: trace.OpRelease, Start: s + 4000, Dur: 1000, Path: id, Handle: h, Tid: 5, Pid: 5})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// chunkStarts returns the offsets of the chunks of a well-formed trace file.
func chunkStarts(b []byte) []int {
	var offs []int
	for off := 12; off+20 <= len(b); off += 20 + int(binary.LittleEndian.Uint32(b[off:])) {
		offs = append(offs, off)
	}
	return offs
}

// TestReplayDamagedTrace: a trace cut short (its writer killed mid-chunk) is replayed up to
// the cut by default, saying so and exiting 3; a corrupt one is refused before any target
// is touched, unless --force.
func TestReplayDamagedTrace(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.iotap")
	writeCreates(t, good, 20, time.Millisecond)
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	offs := chunkStarts(b)
	// Cut in the middle of the 12th chunk's payload; corrupt a byte of the 5th chunk's.
	cut := filepath.Join(dir, "cut.iotap")
	if err := os.WriteFile(cut, b[:offs[11]+25], 0o600); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(b)
	bad[offs[4]+22] ^= 0x55
	corrupt := filepath.Join(dir, "corrupt.iotap")
	if err := os.WriteFile(corrupt, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		trace    string
		force    bool
		replayed bool
		stderr   string
	}{
		{"cut-short", cut, false, true, "was cut short (no footer"},
		{"corrupt", corrupt, false, false, "replay refuses a corrupt trace: --force"},
		// How many problems the damage makes depends on what the 5th chunk holds (events,
		// or the paths later events name), which the writer's flushes decide.
		{"corrupt-forced", corrupt, true, true, "is corrupt ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tgt := filepath.Join(dir, tc.name)
			if err := os.Mkdir(tgt, 0o755); err != nil {
				t.Fatal(err)
			}
			prefix := filepath.Join(dir, tc.name+"-res")
			args := []string{"replay", "--target", tgt, "-o", prefix, tc.trace}
			if tc.force {
				args = append(args, "--force")
			}
			code, stdout, stderr := runIotap(t, nil, args...)
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			if code != exitDamaged || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, want %d with %q", code, exitDamaged, tc.stderr)
			}
			ents, _ := os.ReadDir(tgt)
			_, rerr := os.Stat(prefix + ".t1.r1.iotap")
			if !tc.replayed {
				if len(ents) != 0 || rerr == nil {
					t.Errorf("refused replay touched the target (%d entries) or wrote a result (%v)", len(ents), rerr)
				}
				return
			}
			if rerr != nil || !strings.Contains(stdout, "run 1/1") {
				t.Errorf("no replay: result %v", rerr)
			}
			// Files of the chunks before the cut (or around the corrupt chunk) were made.
			if _, err := os.Stat(filepath.Join(tgt, "f0")); err != nil {
				t.Errorf("f0 not replayed: %v", err)
			}
			if _, err := os.Stat(filepath.Join(tgt, "f19")); err == nil && tc.name == "cut-short" {
				t.Error("f19, after the cut, was replayed")
			}
		})
	}
}

// TestReplayBadNumbers: non-finite and out-of-range numbers are usage errors.
func TestReplayBadNumbers(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.iotap")
	writeCreates(t, tr, 1, time.Millisecond)
	for _, speed := range []string{"NaN", "nan", "Inf", "-Inf", "1e-300", "0", "-1", "1e300"} {
		code, _, stderr := runIotap(t, nil, "replay", "--speed", speed, "--target", dir, tr)
		if code != exitUsage || !strings.Contains(stderr, "--speed") {
			t.Errorf("--speed %s: exit %d, stderr %q", speed, code, stderr)
		}
	}
	for _, tol := range []string{"NaN", "-0.1", "1"} {
		code, _, stderr := runIotap(t, nil, "compare", "--tolerance", tol, tr, tr)
		if code != exitUsage || !strings.Contains(stderr, "--tolerance") {
			t.Errorf("--tolerance %s: exit %d, stderr %q", tol, code, stderr)
		}
	}
}

// TestReplayEndsOnSignal: a replay at --speed 0.01 whose thread waits out a long think time
// ends within a second of SIGINT or SIGTERM, with its result trace and summary up to then.
func TestReplayEndsOnSignal(t *testing.T) {
	if iotapBin == "" {
		t.Fatal("no iotap binary (see TestMain)")
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			tr := filepath.Join(dir, "t.iotap")
			writeCreates(t, tr, 2, 10*time.Second) // f1 is due 1000 s after f0 at --speed 0.01
			tgt := filepath.Join(dir, "target")
			if err := os.Mkdir(tgt, 0o755); err != nil {
				t.Fatal(err)
			}
			// The replay's first op creates f0: watch for it (inotify, no polling).
			fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = unix.Close(fd) }()
			if _, err := unix.InotifyAddWatch(fd, tgt, unix.IN_CREATE); err != nil {
				t.Fatal(err)
			}
			prefix := filepath.Join(dir, "res")
			cmd := exec.Command(iotapBin, "replay", "--speed", "0.01", "--target", tgt, "-o", prefix, tr)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			created := make(chan error, 1)
			go func() {
				var buf [4096]byte
				_, err := unix.Read(fd, buf[:])
				created <- err
			}()
			select {
			case err := <-created:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("the replay created nothing in 30 s; stderr: %s", &stderr)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			exited := make(chan struct{})
			go func() {
				_ = cmd.Wait() // the exit code is checked below
				close(exited)
			}()
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("the replay was still running 20 s after %v", sig)
			}
			took := time.Since(t0)
			t.Logf("ended %v after %v, exit %d; stdout:\n%s\nstderr:\n%s", took, sig, cmd.ProcessState.ExitCode(), &stdout, &stderr)
			if took > time.Second {
				t.Errorf("the replay ended %v after %v, want within 1 s", took, sig)
			}
			if code := cmd.ProcessState.ExitCode(); code != exitError || !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("exit %d, want %d saying it was interrupted", code, exitError)
			}
			if !strings.Contains(stdout.String(), "run 1/1") || !strings.Contains(stdout.String(), "INTERRUPTED") {
				t.Error("no summary saying the run was interrupted on stdout")
			}
			// The part of the job it ran predicts nothing of the whole.
			if strings.Contains(stdout.String(), "predicts runtime") || !strings.Contains(stdout.String(), "predicts nothing: the run was interrupted") {
				t.Error("the interrupted run's summary does not say it predicts nothing")
			}
			if js, err := os.ReadFile(prefix + ".t1.r1.json"); err != nil {
				t.Errorf("no summary file: %v", err)
			} else if bytes.Contains(js, []byte(`"prediction"`)) || !bytes.Contains(js, []byte(`"no_prediction": "the run was interrupted`)) {
				t.Errorf("the interrupted run's JSON summary predicts:\n%s", js)
			}
			r, err := trace.Open(prefix + ".t1.r1.iotap")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = r.Close() }()
			n := 0
			for {
				e, err := r.Next()
				if err != nil {
					break
				}
				if e.Op == trace.OpCreate {
					n++
				}
			}
			if f, ok := r.Footer(); ok && f.Prediction != (trace.Prediction{}) {
				t.Errorf("the interrupted run's trace keeps a prediction: %+v", f.Prediction)
			}
			if _, ok := r.Footer(); !ok || n != 1 || len(r.Damage()) != 0 {
				t.Errorf("result trace: %d creates (want 1), footer %v, damage %v", n, ok, r.Damage())
			}
		})
	}
}

// TestReplayPassesEndOnSignal: the passes over the trace that issue no I/O (the starting
// state, the dry run) end within a second of SIGINT too, on a trace that takes them long.
func TestReplayPassesEndOnSignal(t *testing.T) {
	if iotapBin == "" {
		t.Fatal("no iotap binary (see TestMain)")
	}
	tr := filepath.Join(t.TempDir(), "threads.iotap")
	w, err := trace.Create(tr, trace.Header{Kind: "record"}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2_000_000 { // one read each on two million threads: seconds of planning
		w.Append(&trace.Event{Op: trace.OpRead, Start: int64(i), Dur: 1, Path: trace.RootPath, Tid: uint32(i + 1), Pid: uint32(i + 1), Handle: uint64(i + 1), Size: 1, Ret: 1})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(iotapBin, "replay", "--dry-run", tr)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // inside pass 1: reading alone takes longer
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit code is checked below
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatal("the dry run was still running 20 s after SIGINT")
	}
	took := time.Since(t0)
	t.Logf("ended %v after SIGINT, exit %d: %s", took, cmd.ProcessState.ExitCode(), &stderr)
	if took > time.Second || cmd.ProcessState.ExitCode() != exitError || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("ended %v after SIGINT with exit %d, want within 1 s, exit %d, interrupted", took, cmd.ProcessState.ExitCode(), exitError)
	}
}
