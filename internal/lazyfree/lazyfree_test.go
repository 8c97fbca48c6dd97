package lazyfree

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// atStart is GODEBUG as the runtime read it when this process started.
var atStart, atStartSet = os.LookupEnv("GODEBUG")

const helperEnv = "LAZYFREE_TEST_HELPER"

// TestMain runs the helper when the test binary is started as one: it calls Reexec, then
// frees 64 MiB back to the runtime's page heap and has it returned to the kernel, and
// prints GODEBUG as it started, GODEBUG after Reexec, and the process's LazyFree bytes.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "" {
		os.Exit(m.Run())
	}
	Reexec()
	touch64MiB()
	runtime.GC()
	debug.FreeOSMemory()
	now, nowSet := os.LookupEnv("GODEBUG")
	fmt.Printf("start=%t:%s\nnow=%t:%s\nlazyfree=%d\n", atStartSet, atStart, nowSet, now, lazyFree())
	os.Exit(0)
}

// touch64MiB allocates 64 MiB, touches every page and drops it.
//
//go:noinline
func touch64MiB() {
	b := make([]byte, 64<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	runtime.KeepAlive(b)
}

// lazyFree returns the bytes of this process's memory freed with MADV_FREE and not yet
// reclaimed (-1 if unknown).
func lazyFree() int64 {
	f, err := os.Open("/proc/self/smaps_rollup")
	if err != nil {
		return -1
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "LazyFree:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

func TestReexec(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("MADV_FREE is Linux's")
	}
	if lazyFree() < 0 {
		t.Skip("no LazyFree in /proc/self/smaps_rollup")
	}
	for _, tc := range []struct {
		name      string
		env       []string // GODEBUG entries to set (none: unset)
		wantStart string   // GODEBUG the runtime started with
		wantNow   string   // GODEBUG the program sees after Reexec
		lazy      bool     // freed memory is lazily freed
	}{
		{"unset", nil, "true:madvdontneed=0", "false:", true},
		{"empty", []string{"GODEBUG="}, "true:madvdontneed=0", "true:", true},
		{"other setting kept", []string{"GODEBUG=gctrace=0"}, "true:gctrace=0,madvdontneed=0", "true:gctrace=0", true},
		{"user's choice respected", []string{"GODEBUG=madvdontneed=1"}, "true:madvdontneed=1", "true:madvdontneed=1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(withoutGODEBUG(os.Environ()), helperEnv+"=1")
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			got := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if k, v, ok := strings.Cut(l, "="); ok {
					got[k] = v
				}
			}
			if got["start"] != tc.wantStart || got["now"] != tc.wantNow {
				t.Errorf("GODEBUG at start %q, after Reexec %q; want %q and %q", got["start"], got["now"], tc.wantStart, tc.wantNow)
			}
			lazy, err := strconv.ParseInt(got["lazyfree"], 10, 64)
			if err != nil {
				t.Fatalf("helper output %q: %v", out, err)
			}
			if tc.lazy && lazy < 32<<20 {
				t.Errorf("LazyFree %d bytes after freeing 64 MiB; want at least 32 MiB (MADV_FREE)", lazy)
			}
			if !tc.lazy && lazy > 8<<20 {
				t.Errorf("LazyFree %d bytes with madvdontneed=1; want ~0", lazy)
			}
		})
	}
}

func withoutGODEBUG(env []string) []string {
	return slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "GODEBUG=") })
}
