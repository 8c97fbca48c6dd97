package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/trace/tracecraft"
)

// TestReplayHostileSizesAndTimes: crafted traces of a few hundred bytes whose sizes or
// times no real job produces. Under a 512 MiB data limit, each replay ends within a
// minute, without a runtime failure, and bounds or refuses what it was asked: a read or
// write of 4 GiB − 1 is clamped (and said so) and done through bounded buffers; a starting
// file of 1 PiB is refused before anything is created, naming what it needs and what is
// free; a system call entering 146 years after its request was queued is damage (exit 3),
// and with --force the replay of the rest finishes.
func TestReplayHostileSizesAndTimes(t *testing.T) {
	if iotapBin == "" {
		t.Fatal("no iotap binary (see TestMain)")
	}
	bombs, err := tracecraft.ReplayBombs()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		extra  []string
		code   int
		stdout string
		stderr string
	}{
		{name: "read-4g", code: exitOK, stdout: "clamped  1 reads, writes or copies"},
		{name: "write-4g", code: exitOK, stdout: "clamped  1 reads, writes or copies"},
		{name: "file-1p", code: exitError, stderr: "the starting state needs 1.00PiB (files: 1, directories: 0)"},
		{name: "late-call", code: exitDamaged, stderr: "after its request was queued"},
		{name: "late-call", extra: []string{"--force"}, code: exitDamaged, stdout: "replay onto"},
	} {
		t.Run(tc.name+strings.Join(tc.extra, ""), func(t *testing.T) {
			tr := filepath.Join(dir, tc.name+".iotap")
			if err := os.WriteFile(tr, bombs[tc.name], 0o600); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d bytes", tc.name, len(bombs[tc.name]))
			tgt := t.TempDir()
			out := filepath.Join(t.TempDir(), "r")
			args := append([]string{"replay", tr, "--target", tgt, "-o", out, "--sample-interval", "0"}, tc.extra...)
			code, stdout, stderr := runLimitedFor(t, time.Minute, args...)
			if code != tc.code || strings.Contains(stderr, "fatal error") || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, want %d with %q in stdout and %q in stderr; stdout:\n%.3000s\nstderr:\n%.3000s",
					code, tc.code, tc.stdout, tc.stderr, stdout, stderr)
			}
			if tc.name == "file-1p" {
				if ents, _ := os.ReadDir(tgt); len(ents) != 0 {
					t.Errorf("the target holds %d entries after the refusal", len(ents))
				}
			}
		})
	}
}

// runLimitedFor is runLimited with a deadline: a run that has not ended by then is killed,
// and the test fails.
func runLimitedFor(t *testing.T, d time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `ulimit -d "$0" && exec "$@"`, strconv.Itoa(memLimitKiB), iotapBin}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("iotap %s did not end within %v; stdout:\n%.2000s\nstderr:\n%.2000s", strings.Join(args, " "), d, o.String(), e.String())
	}
	if cmd.ProcessState == nil {
		t.Fatalf("run iotap: %v", err)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}
