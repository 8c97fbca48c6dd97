package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracecraft"
)

// Address-space limits (RLIMIT_AS, ulimit -v), as batch schedulers set them, in KiB:
// addrSchedulerKiB is one seen in the wild; addrMinKiB the minimum the manual states.
const (
	addrSchedulerKiB = 1_500_000
	addrMinKiB       = 1_000_000
)

// runAddrLimited runs the iotap binary with args in dir under an address-space limit of
// kib KiB, set in the child before it executes iotap, and returns its exit code and
// standard error.
func runAddrLimited(t *testing.T, dir string, kib int, args ...string) (code int, stderr string) {
	t.Helper()
	// A recorder that ran out of address space inside a call on its own mount would never
	// end: a bound makes that a failure, not a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `ulimit -v "$0" && exec "$@"`, strconv.Itoa(kib), iotapBin}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = dir
	var e bytes.Buffer
	cmd.Stderr = &e
	err := cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("run iotap: %v", err)
	}
	return cmd.ProcessState.ExitCode(), e.String()
}

// TestAddressSpaceLimit runs every reading command, replay onto a directory and (where
// FUSE is usable) record many times each under an address-space limit, at the limit a
// scheduler set and at the minimum the manual states: none may fail for want of address
// space. The runtime's threads and allocator decide how much address space a run reserves,
// and they vary from run to run, so one run proves little.
func TestAddressSpaceLimit(t *testing.T) {
	if iotapBin == "" {
		t.Fatal("no iotap binary (see TestMain)")
	}
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.iotap")
	writeSmallTrace(t, tr)
	small, err := os.ReadFile("../../testdata/trace/v4-small.iotap")
	if err != nil {
		t.Fatal(err)
	}
	v4 := filepath.Join(dir, "v4.iotap")
	mustDo(t, os.WriteFile(v4, small, 0o600))
	// A crafted trace of a few kilobytes whose name record decompresses to 64 MiB: refused
	// as damage (exit 3), not by the runtime running out of address space.
	rec, err := tracecraft.Recorded([]uint32{1})
	if err != nil {
		t.Fatal(err)
	}
	_, chunks, err := tracecraft.Split(rec)
	if err != nil {
		t.Fatal(err)
	}
	name := binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(nil, 1), 2), 1), 64<<20)
	name = append(name, bytes.Repeat([]byte("a"), 64<<20)...)
	file := append(tracecraft.Preamble(trace.Version4), tracecraft.Frame(chunks[0].Type, chunks[0].Payload, true)...)
	file = append(file, tracecraft.Frame(trace.ChunkPaths, name, true)...)
	for _, c := range chunks[1:] {
		file = append(file, tracecraft.Frame(c.Type, c.Payload, true)...)
	}
	bomb := filepath.Join(dir, "bomb.iotap")
	mustDo(t, os.WriteFile(bomb, file, 0o600))

	commands := []struct {
		args []string
		code int
	}{
		{[]string{"info", v4}, exitOK},
		{[]string{"report", v4}, exitOK},
		{[]string{"report", "--format", "json", tr}, exitOK},
		{[]string{"report", "--format", "html", "-o", filepath.Join(dir, "r.html"), tr}, exitOK},
		{[]string{"export", "--format", "perfetto", "-o", filepath.Join(dir, "p.json"), v4}, exitOK},
		{[]string{"export", "-o", filepath.Join(dir, "e.jsonl"), tr}, exitOK},
		{[]string{"compare", "--force", v4, tr}, exitOK},
		{[]string{"replay", "--dry-run", tr}, exitOK},
		{[]string{"info", bomb}, exitDamaged},
	}
	for _, lim := range []struct {
		kib, runs int
	}{{addrSchedulerKiB, 20}, {addrMinKiB, 5}} {
		for _, c := range commands {
			var words []string
			for _, a := range c.args {
				if !strings.Contains(a, "/") {
					words = append(words, a)
				}
			}
			words = append(words, filepath.Base(c.args[len(c.args)-1]))
			t.Run(strconv.Itoa(lim.kib)+"/"+strings.Join(words, "_"), func(t *testing.T) {
				for i := range lim.runs {
					code, stderr := runAddrLimited(t, dir, lim.kib, c.args...)
					if code != c.code || strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "fatal error") {
						t.Fatalf("run %d of %d: exit %d, want %d; stderr:\n%.3000s", i+1, lim.runs, code, c.code, stderr)
					}
				}
			})
		}
		t.Run(strconv.Itoa(lim.kib)+"/replay", func(t *testing.T) {
			for i := range max(lim.runs/4, 2) {
				tgt := filepath.Join(dir, "target"+strconv.Itoa(lim.kib)+"-"+strconv.Itoa(i))
				mustDo(t, os.Mkdir(tgt, 0o755))
				code, stderr := runAddrLimited(t, dir, lim.kib, "replay", tr, "--target", tgt, "-o", tgt+".res", "--sample-interval", "0")
				if code != exitOK {
					t.Fatalf("run %d: exit %d; stderr:\n%.3000s", i+1, code, stderr)
				}
			}
		})
	}
	t.Run("record", func(t *testing.T) {
		requireRecord(t)
		testenv.Programs(t, testenv.FUSE, "sh", "cat")
		for _, lim := range []struct{ kib, runs int }{{addrSchedulerKiB, 5}, {addrMinKiB, 3}} {
			for i := range lim.runs {
				work := filepath.Join(dir, "work"+strconv.Itoa(lim.kib)+"-"+strconv.Itoa(i))
				mustDo(t, os.Mkdir(work, 0o755))
				code, stderr := runAddrLimited(t, work, lim.kib, "record", "--target", work, "-o", work+".iotap", "--",
					"sh", "-c", "for i in 1 2 3 4 5 6 7 8; do echo $i > f$i; cat f$i > /dev/null; done")
				if code != exitOK {
					t.Fatalf("limit %d KiB, run %d: exit %d; stderr:\n%.3000s", lim.kib, i+1, code, stderr)
				}
			}
		}
	})
}
