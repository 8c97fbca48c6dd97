package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRecordTraceDiskFull records a job whose trace fills its file system (a 256 KiB tmpfs:
// the job's 100,000 events take about 480 KiB, 1.3 MiB with the kernel's legs, whose chunks
// of about 200 KiB still fit). The job must see nothing of it: same output, its own exit
// code when it fails. The trace must end cleanly at the last chunk written whole, with a
// footer saying how many events were lost and why, and the summary, the error and the
// report must say so too (the report exits 4, as every command reading a trace that lacks
// events). A job that succeeded makes iotap exit 1: the recording it asked for is
// incomplete.
func TestRecordTraceDiskFull(t *testing.T) {
	requireRecord(t)
	// One job succeeds, the other fails; one trace holds the kernel's legs where the kernel
	// gives them, the other never.
	for _, tc := range []struct {
		job, want int
		legs      string
	}{{0, 1, "auto"}, {3, 3, "probe"}} {
		t.Run("job exit "+strconv.Itoa(tc.job)+", legs "+tc.legs, func(t *testing.T) {
			dir := t.TempDir()
			target, full := filepath.Join(dir, "data"), filepath.Join(dir, "full")
			for _, d := range []string{target, full} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := unix.Mount("iotap-test", full, "tmpfs", 0, "size=256k"); err != nil {
				t.Fatalf("mount tmpfs: %v", err)
			}
			defer func() { _ = unix.Unmount(full, unix.MNT_DETACH) }()
			out := filepath.Join(full, "t.iotap")
			// Builtins only: about ten requests per round, no new processes to look up.
			script := `i=0; while [ $i -lt 6000 ]; do echo $i > f; read l < f; i=$((i+1)); done; echo "done $l"; exit ` + strconv.Itoa(tc.job)
			p := startIotap(t, target, "record", "-o", out, "--legs", tc.legs, "--", "sh", "-c", script)
			_ = p.stdin.Close()
			code, stdout := p.wait(t)
			stderr := p.stderr.String()
			if code != tc.want || stdout != "done 5999\n" {
				t.Fatalf("exit %d (want %d), stdout %q; stderr:\n%s", code, tc.want, stdout, stderr)
			}
			for _, want := range []string{"when a write of the trace failed", "trace incomplete", "no space left on device"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}

			got := readTrace(t, out)
			f, n := got.foot, uint64(len(got.events))
			if len(got.damage) != 0 || f == nil {
				t.Fatalf("damage %v, footer %v", got.damage, f != nil)
			}
			if f.Lost == 0 || f.Events != n || !strings.Contains(f.WriteError, "no space left on device") {
				t.Errorf("footer %+v after reading %d events", f, n)
			}
			if n < 1000 {
				t.Errorf("only %d events in the trace: the chunks written before the disk filled are missing", n)
			}

			// Every command that reads the trace says it lacks events, with its own exit code.
			rep := exec.Command(iotapBin, "report", out)
			b, err := rep.CombinedOutput()
			if rep.ProcessState == nil || rep.ProcessState.ExitCode() != exitDropped || !strings.Contains(string(b), "cut short") ||
				!strings.Contains(string(b), "could not write the trace to the end") || !strings.Contains(string(b), "a write of the trace failed: ") {
				t.Errorf("report: %v (want exit %d)\n%s", err, exitDropped, b)
			}
		})
	}
}
