package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClientFlagsRefused checks that bad sampling, cold-start and S3 settings flags are
// refused with a usage error (exit 2) naming the flag, before any target is touched.
func TestClientFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.iotap")
	writeSmallTrace(t, tr)
	tgt, tgt2, store := filepath.Join(dir, "t"), filepath.Join(dir, "t2"), filepath.Join(dir, "store")
	for _, d := range []string{tgt, tgt2, store} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(store, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"negative interval", []string{"--sample-interval", "-1s"}, "--sample-interval must not be negative"},
		{"no such client", []string{"--client-pid", "2147483647"}, "--client-pid 2147483647"},
		{"stores per target", []string{"--target", tgt2, "--prepare-via", store}, "--prepare-via given 1 times for 2 targets"},
		{"store with skip", []string{"--prepare-via", store, "--prepare", "skip"}, "does not go with --prepare skip"},
		{"store not empty", []string{"--prepare-via", store}, "is not empty"},
		{"bad s3-opt", []string{"--s3-opt", "prefetch_max"}, `--s3-opt "prefetch_max": want key=value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"replay", tr, "--target", tgt, "-o", out, "--progress", "never"}, tc.args...)
			code, _, stderr := runReplayCLI(t, args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(store, "keep")); err != nil || string(b) != "x" {
		t.Errorf("the store was touched: %q, %v", b, err)
	}
}
