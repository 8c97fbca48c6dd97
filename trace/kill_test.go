package trace

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

const killChildEnv = "IOTAP_TRACE_KILL_CHILD"

// TestMain lets the kill test re-execute this test binary as the writing child.
func TestMain(m *testing.M) {
	if p := os.Getenv(killChildEnv); p != "" {
		killChild(p)
		return
	}
	os.Exit(m.Run())
}

// killChild appends events with increasing Offset to a trace at p, flushing every 10 ms,
// and prints the number of events known to be written each time it grows. It runs until
// it is killed.
func killChild(p string) {
	w, err := Create(p, Header{Kind: "record"}, WriterOptions{FlushInterval: 10 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir := w.Path(RootPath, "dir")
	w.AddProcess(Process{Tid: 1, Pid: 1, Comm: "child"})
	var reported uint64
	for i := 0; ; i++ {
		w.Append(&Event{Op: OpWrite, Start: Now() - w.Origin(), Tid: 1, Path: dir, Offset: int64(i), Size: 4096, Ret: 4096})
		if i%64 == 0 {
			time.Sleep(100 * time.Microsecond)
			if n := w.Stats().Written; n > reported {
				reported = n
				fmt.Println(n)
			}
		}
	}
}

// TestKill9 kills a writing child with SIGKILL and checks that the reader returns every
// event the child knew had been written, reports the truncation, and does not fail.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the kill -9 test (re-executes the test binary)")
	}
	p := filepath.Join(t.TempDir(), "killed.iotap")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+p)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var flushed uint64
	reports := 0
	for sc.Scan() {
		n, err := strconv.ParseUint(sc.Text(), 10, 64)
		if err != nil {
			t.Fatalf("child said %q", sc.Text())
		}
		flushed = n
		if reports++; reports == 5 {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() { // reports printed before the kill landed
		if n, err := strconv.ParseUint(sc.Text(), 10, 64); err == nil {
			flushed = n
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL", err)
	}
	if reports < 5 {
		t.Fatalf("child reported %d flushes before it died", reports)
	}

	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	evs := readAll(t, r)
	if uint64(len(evs)) < flushed {
		t.Errorf("read %d events, child had flushed %d", len(evs), flushed)
	}
	for i, e := range evs {
		if e.Offset != int64(i) {
			t.Fatalf("event %d has offset %d", i, e.Offset)
		}
	}
	if name := r.PathName(evs[0].Path); name != "dir" {
		t.Errorf("path %q", name)
	}
	if _, ok := r.Process(1); !ok {
		t.Error("no process record")
	}
	if _, ok := r.Footer(); ok {
		t.Error("killed writer left a footer")
	}
	d := r.Damage()
	if len(d) == 0 || !errors.Is(d[len(d)-1], ErrNoFooter) {
		t.Errorf("damage %v, want ErrNoFooter last", d)
	}
	t.Logf("child flushed %d events before SIGKILL; read %d; damage %v", flushed, len(evs), d)
}
