package fusefs_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/iotap/iotap/trace"
)

// workloadEnv selects a workload when the test binary is re-executed as a child process
// (mount tests never drive load from the goroutines serving the mount).
const workloadEnv = "IOTAP_FUSEFS_WORKLOAD"

var workloads = map[string]func(dir string) error{
	"known": knownWorkload,
	"rw":    rwWorkload,
	"churn": churnWorkload,
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

// rwWorkload does IOTAP_RW_COUNT preads or pwrites of IOTAP_RW_BS bytes on dir/rw
// (IOTAP_RW_OP = write, read or randread), wrapping around at rwFileSize.
func rwWorkload(dir string) error {
	op := os.Getenv("IOTAP_RW_OP")
	bs, _ := strconv.Atoi(os.Getenv("IOTAP_RW_BS"))
	count, _ := strconv.Atoi(os.Getenv("IOTAP_RW_COUNT"))
	flags := os.O_RDONLY
	if op == "write" {
		flags = os.O_WRONLY | os.O_CREATE
	}
	f, err := os.OpenFile(filepath.Join(dir, "rw"), flags, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, bs)
	blocks := int64(rwFileSize / bs)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range int64(count) {
		off := (i % blocks) * int64(bs)
		if op == "randread" {
			off = r.Int64N(blocks) * int64(bs)
		}
		var n int
		if op == "write" {
			n, err = f.WriteAt(buf, off)
		} else {
			n, err = f.ReadAt(buf, off)
		}
		if err != nil || n != bs {
			return fmt.Errorf("%s at %d: %d, %v", op, off, n, err)
		}
	}
	return nil
}

const rwFileSize = 64 << 20

// readTraceFile reads the trace at path to its end. It returns the reader (for its path
// table, files and footer; closed when the test ends) and every event.
func readTraceFile(t *testing.T, path string) (*trace.Reader, []trace.Event) {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatalf("open trace: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	var evs []trace.Event
	for {
		e, err := r.Next()
		if err == io.EOF {
			return r, evs
		}
		if err != nil {
			t.Fatalf("read trace %s: %v", path, err)
		}
		evs = append(evs, *e)
	}
}
