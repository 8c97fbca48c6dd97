package fusefs_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/trace"
)

// serveWorkload mounts IOTAP_SERVE_ORIG on the workload dir, traced into IOTAP_SERVE_TRACE,
// prints "ready" and serves until killed.
func serveWorkload(mnt string) error {
	o := fusefs.Options{}
	w, err := trace.Create(os.Getenv("IOTAP_SERVE_TRACE"), trace.Header{Kind: "record", FUSE: o.TraceOptions()},
		trace.WriterOptions{FlushInterval: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	if _, err := fusefs.Mount(mnt, os.Getenv("IOTAP_SERVE_ORIG"), w, o); err != nil {
		return err
	}
	_, _ = os.Stdout.WriteString("ready\n")
	select {}
}

func init() { workloads["serve"] = serveWorkload }

// TestKill9 kills the serving process during a job: the job gets an error (ENOTCONN), not a
// hang, and the trace is readable up to the last flush.
func TestKill9(t *testing.T) {
	fusetest.Require(t)
	dir := t.TempDir()
	orig, mnt, file := filepath.Join(dir, "orig"), filepath.Join(dir, "mnt"), filepath.Join(dir, "t.trace")
	for _, err := range []error{
		os.Mkdir(orig, 0o755),
		os.Mkdir(mnt, 0o755),
		os.WriteFile(filepath.Join(orig, "f"), make([]byte, 64<<10), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}

	srv := workloadCmd("serve", mnt, "IOTAP_SERVE_ORIG="+orig, "IOTAP_SERVE_TRACE="+file)
	srv.Stdout = nil
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
		_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("server: %q %v", line, err)
	}

	job := exec.Command("sh", "-c", "while cat "+mnt+"/f >/dev/null; do :; done; exit 3")
	var jobErr bytes.Buffer
	job.Stderr = &jobErr
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- job.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		// A request in flight when the daemon dies fails with ECONNABORTED, later ones with
		// ENOTCONN: either is the error the job must get instead of a hang.
		msg := strings.ToLower(jobErr.String()) // strerror text, as cat prints it
		gone := strings.Contains(msg, syscall.ENOTCONN.Error()) || strings.Contains(msg, syscall.ECONNABORTED.Error())
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || !gone {
			t.Errorf("job: %v, stderr %q; want exit 3 after ENOTCONN or ECONNABORTED", err, jobErr.String())
		}
	case <-time.After(10 * time.Second):
		_ = job.Process.Kill()
		t.Fatal("job hung after the server was killed")
	}

	r, evs := readTraceFile(t, file)
	reads := 0
	for _, e := range evs {
		if e.Op == trace.OpRead {
			reads++
		}
	}
	if _, ok := r.Footer(); ok {
		t.Error("a killed writer left a footer")
	}
	if reads == 0 {
		t.Errorf("no reads in the trace of a killed server (damage %v)", r.Damage())
	}
	t.Logf("%d reads readable after kill -9; damage: %v", reads, r.Damage())
}
