package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracecraft"
)

// memLimitKiB is the data-segment limit (RLIMIT_DATA) the memory-bomb tests run iotap
// under. It bounds what the Go heap can map. RLIMIT_AS cannot be that low: the Go runtime
// reserves about 700 MiB of address space at start, before it allocates anything.
const memLimitKiB = 512 << 10

// readingCommands are the commands that read a whole trace, as argument lists before the
// trace's path.
var readingCommands = [][]string{
	{"info"}, {"report"}, {"report", "--format", "json"}, {"export"}, {"export", "--format", "csv"},
	{"replay", "--dry-run"},
}

// TestMemoryBombs: small crafted traces whose side tables would take gigabytes to hold (a
// 60 MiB name with 300 children; many paths chunks of 16 MiB each) are refused as damage
// (exit 3) by every reading command, which stays under a 512 MiB memory limit.
func TestMemoryBombs(t *testing.T) {
	if iotapBin == "" {
		t.Fatal("no iotap binary (see TestMain)")
	}
	dir := t.TempDir()
	long, err := tracecraft.LongName(60<<20, 300)
	if err != nil {
		t.Fatal(err)
	}
	many, err := tracecraft.ManyPaths(40, 16<<20, 4000)
	if err != nil {
		t.Fatal(err)
	}
	bombs := map[string][]byte{"long-name": long, "many-paths": many}
	for name, b := range bombs {
		p := filepath.Join(dir, name+".iotap")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes", name, len(b))
		for _, c := range append(readingCommands, []string{"compare", "--force", p}) {
			args := append(append([]string(nil), c...), p)
			t.Run(name+"/"+strings.Join(c, "_"), func(t *testing.T) {
				code, stderr := runLimited(t, args...)
				if code != exitDamaged || strings.Contains(stderr, "fatal error") || !strings.Contains(stderr, "damaged") {
					t.Errorf("exit %d, want %d (damaged); stderr:\n%.2000s", code, exitDamaged, stderr)
				}
			})
		}
	}
}

// runLimited runs the iotap binary with args under the memory limit and returns its exit
// code and standard error.
func runLimited(t *testing.T, args ...string) (code int, stderr string) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", `ulimit -d "$0" && exec "$@"`, strconv.Itoa(memLimitKiB), iotapBin}, args...)...)
	var e bytes.Buffer
	cmd.Stdout, cmd.Stderr = nil, &e
	err := cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("run iotap: %v", err)
	}
	return cmd.ProcessState.ExitCode(), e.String()
}

// TestChunkDamageEveryCommand: chunks with valid checksums whose contents no writer
// produces (a deleted paths chunk, a repeated events chunk, op 255, looping paths, a
// negative duration) make every reading command exit 3, naming the damage.
func TestChunkDamageEveryCommand(t *testing.T) {
	dir := t.TempDir()
	good, err := tracecraft.Recorded([]uint32{2, 3, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	good, err = tracecraft.WithPaths(good, tracecraft.Paths([]trace.PathRecord{{ID: 2, Parent: 1, Name: "a"}, {ID: 3, Parent: 2, Name: "b"}}))
	if err != nil {
		t.Fatal(err)
	}
	bad, err := tracecraft.Damaged(good)
	if err != nil {
		t.Fatal(err)
	}
	var neg bytes.Buffer
	w, err := trace.NewWriter(&neg, trace.Header{}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(&trace.Event{Op: trace.OpGetattr, Dur: -5, Path: trace.RootPath})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	bad["negative-duration"] = neg.Bytes()
	bad["good"] = good
	want := map[string]string{
		"good":              "",
		"paths-deleted":     "no record",
		"events-repeated":   "repeats the chunk",
		"op-255":            "op 255",
		"path-cycle":        "not an earlier id",
		"negative-duration": "negative duration",
	}
	for name, b := range bad {
		p := filepath.Join(dir, name+".iotap")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, c := range append(readingCommands, []string{"compare", "--force", p}) {
			t.Run(name+"/"+strings.Join(c, "_"), func(t *testing.T) {
				code, stdout, stderr := runIotap(t, nil, append(append([]string(nil), c...), p)...)
				if want[name] == "" {
					if code != exitOK {
						t.Errorf("exit %d on a good trace; stderr:\n%s", code, stderr)
					}
					return
				}
				if code != exitDamaged || !strings.Contains(stdout+stderr, want[name]) {
					t.Errorf("exit %d, want %d naming %q; stdout:\n%.1000s\nstderr:\n%.1000s", code, exitDamaged, want[name], stdout, stderr)
				}
			})
		}
	}
}
