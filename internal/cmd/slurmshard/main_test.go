package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"n10-2.iotap", "n1-0.iotap", "n2-1.iotap", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := func(procid, ntasks string) func(string) string {
		return func(k string) string {
			return map[string]string{"SLURM_PROCID": procid, "SLURM_NTASKS": ntasks, "SLURM_JOB_ID": "5", "SLURM_STEP_ID": "0"}[k]
		}
	}
	tests := []struct {
		name     string
		args     []string
		getenv   func(string) string
		wantCode int
		want     []string
	}{
		{"task 0 of 3", []string{dir}, env("0", "3"), 0, []string{"n1-0.iotap"}},
		{"task 2 of 3: natural order", []string{dir}, env("2", "3"), 0, []string{"n10-2.iotap"}},
		{"task 0 of 2 takes two", []string{dir}, env("0", "2"), 0, []string{"n1-0.iotap", "n10-2.iotap"}},
		{"idle task", []string{dir}, env("3", "4"), 0, nil},
		{"glob", []string{filepath.Join(dir, "n1*.iotap")}, env("1", "2"), 0, []string{"n10-2.iotap"}},
		{"outside a step", []string{dir}, func(string) string { return "" }, 2, nil},
		{"no traces", []string{t.TempDir()}, env("0", "1"), 1, nil},
		{"no args", nil, env("0", "1"), 2, nil},
		{"barrier of one", []string{"--barrier", t.TempDir()}, env("0", "1"), 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, tc.getenv, &out, &errb)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tc.wantCode, errb.String())
			}
			var got []string
			for _, l := range strings.Fields(out.String()) {
				got = append(got, filepath.Base(l))
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("printed %q, want %q", got, tc.want)
			}
		})
	}
}
