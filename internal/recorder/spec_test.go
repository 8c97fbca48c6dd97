package recorder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// outcome classes of Record's errors, as the command maps them to exit codes.
const (
	outUsage = -2 // wraps ErrUsage
	outError = -1 // any other error
)

// outcomeOf classifies err: outUsage, outError, or the code of an *ExitError.
func outcomeOf(err error) int {
	var ee *ExitError
	switch {
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, ErrUsage):
		return outUsage
	}
	return outError
}

// TestRecordErrors runs the checks Record makes before anything is mounted.
func TestRecordErrors(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "data")
	file := filepath.Join(dir, "file")
	mnt := filepath.Join(dir, "mnt")
	for _, d := range []string{target, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "t.iotap")
	spec := func(f func(*Spec)) Spec {
		s := Spec{Target: target, Output: out, Argv: []string{"true"}}
		f(&s)
		return s
	}
	tests := []struct {
		name    string
		spec    Spec
		fuseErr error
		euid    int
		want    int // outUsage, outError or an exit code
		msg     string
	}{
		{name: "target missing", spec: spec(func(s *Spec) { s.Target = filepath.Join(dir, "nope") }), want: outUsage, msg: "does not exist"},
		{name: "target not a directory", spec: spec(func(s *Spec) { s.Target = file }), want: outUsage, msg: "is not a directory"},
		{name: "no command", spec: spec(func(s *Spec) { s.Argv = nil }), want: outUsage, msg: "missing the command"},
		{name: "bad cache mode", spec: spec(func(s *Spec) { s.Cache = "some" }), want: outUsage, msg: "--cache"},
		{name: "bad glob", spec: spec(func(s *Spec) { s.Exclude = []string{"[a"} }), want: outUsage, msg: "bad glob"},
		{name: "bad label", spec: spec(func(s *Spec) { s.Labels = []string{"x"} }), want: outUsage, msg: "key=value"},
		{name: "stats interval too short", spec: spec(func(s *Spec) { s.StatsInterval = 1 }), want: outUsage, msg: "--stats-interval 1ns: want at least 10ms"},
		{name: "bad stats format", spec: spec(func(s *Spec) { s.StatsFormat = "xml" }), want: outUsage, msg: "--stats-format"},
		{name: "bad legs", spec: spec(func(s *Spec) { s.Legs = "bpf" }), want: outUsage, msg: "--legs"},
		{name: "sample interval too short", spec: spec(func(s *Spec) { s.Sample.Interval = time.Microsecond }), want: outUsage, msg: "--sample-interval 1µs"},
		{name: "negative native runtime", spec: spec(func(s *Spec) { s.NativeRuntime = -1 }), want: outUsage, msg: "--native-runtime"},
		{name: "native runtime twice", spec: spec(func(s *Spec) { s.NativeRuntime, s.NativeFirst = 1, true }), want: outUsage, msg: "give it or --native-runtime, not both"},
		{name: "negative server procs", spec: spec(func(s *Spec) { s.ServerProcs = -1 }), want: outUsage, msg: "--server-procs"},
		{name: "output inside target", spec: spec(func(s *Spec) { s.Output = filepath.Join(target, "sub", "..", "t.iotap") }), want: outUsage, msg: "inside the traced tree"},
		{name: "output dir under a file", spec: spec(func(s *Spec) { s.Output = filepath.Join(file, "sub", "t.iotap") }), want: outUsage, msg: "not a directory"},
		{name: "missing output dir inside target", spec: spec(func(s *Spec) { s.Output = filepath.Join(target, "new", "%j", "t.iotap") }), want: outUsage, msg: "inside the traced tree"},
		{name: "output unwritable", spec: spec(func(s *Spec) { s.Output = filepath.Join(file, "t.iotap") }), want: outUsage, msg: "not a directory"},
		{name: "output is a directory", spec: spec(func(s *Spec) { s.Output = mnt }), want: outUsage, msg: "is a directory"},
		{name: "fuse unavailable", spec: spec(func(*Spec) {}), fuseErr: errors.New("cannot open /dev/fuse: permission denied"), want: outError, msg: "FUSE is not available: cannot open /dev/fuse"},
		{name: "not root in place", spec: spec(func(*Spec) {}), euid: 1000, want: outError, msg: "needs root"},
		{name: "command not found", spec: spec(func(s *Spec) { s.Argv = []string{"iotap-no-such-command"} }), want: 127, msg: "iotap-no-such-command: command not found"},
		{name: "mount point not a directory", spec: spec(func(s *Spec) { s.MountAt = file }), want: outUsage, msg: "mount point " + file + " is not a directory"},
		{name: "mount point missing", spec: spec(func(s *Spec) { s.MountAt = filepath.Join(dir, "nope") }), want: outUsage, msg: "does not exist"},
		{name: "mount point busy", spec: spec(func(s *Spec) { s.MountAt = "/proc" }), want: outError, msg: "is busy"},
		{name: "mount point inside target", spec: spec(func(s *Spec) {
			s.Target, s.MountAt, s.Output = dir, mnt, filepath.Join(t.TempDir(), "t.iotap")
		}), want: outError, msg: "must not contain each other"},
		{name: "output inside mount point", spec: spec(func(s *Spec) { s.MountAt, s.Output = mnt, filepath.Join(mnt, "t.iotap") }), want: outUsage, msg: "inside the mount point"},
	}
	defer func(f func() error, g func() int) { fuseAvailable, geteuid = f, g }(fuseAvailable, geteuid)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fuseAvailable = func() error { return tt.fuseErr }
			euid := tt.euid
			geteuid = func() int { return euid }
			err := Record(context.Background(), tt.spec, Env{})
			if got := outcomeOf(err); got != tt.want || err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Record: %v (outcome %d); want outcome %d and %q", err, got, tt.want, tt.msg)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a failed check left %s behind", out)
				_ = os.Remove(out)
			}
		})
	}
}

// TestMountErrors: Mount needs both directories, and checks the spec as Record does.
func TestMountErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		spec Spec
		msg  string
	}{
		{"no mount point", Spec{Target: dir}, "--target and --mount-at are both required"},
		{"no target", Spec{MountAt: dir}, "--target and --mount-at are both required"},
		{"bad cache", Spec{Target: dir, MountAt: t.TempDir(), Cache: "x"}, "--cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Mount(context.Background(), tc.spec, Env{}, func() { t.Error("ready called") })
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Mount: %v; want a usage error with %q", err, tc.msg)
			}
		})
	}
}

func TestExpandOutput(t *testing.T) {
	env := map[string]string{"SLURM_JOB_ID": "77", "SLURM_PROCID": "3", "SLURMD_NODENAME": "n01"}
	get := func(k string) string { return env[k] }
	tests := []struct {
		name, in, want string
		getenv         func(string) string
	}{
		{name: "plain", in: "a.iotap", want: "a.iotap", getenv: get},
		{name: "slurm", in: "run-%j-%n-%t.iotap", want: "run-77-n01-3.iotap", getenv: get},
		{name: "host and pid", in: "%h.%p.%%.%x", want: "node.example.org.42.%.%x", getenv: get},
		{name: "no slurm", in: "%j-%n-%t", want: "nojob-node-0", getenv: func(string) string { return "" }},
		{name: "trailing percent", in: "a%", want: "a%", getenv: get},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := expandOutput(tt.in, tt.getenv, "node.example.org", 42); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if l := slurmLabels(get); len(l) != 3 || l[0].Key != "SLURM_JOB_ID" || l[0].Value != "77" {
		t.Errorf("slurm labels %+v", l)
	}
}

func TestDefaultOutputOutsideTarget(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "data")
	if err := os.MkdirAll(filepath.Join(target, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func(f func() time.Time) { nowUTC = f }(nowUTC)
	nowUTC = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	wd, _ := os.Getwd()
	defer func() { _ = os.Chdir(wd) }()
	tests := []struct{ name, cwd, want string }{
		{name: "cwd inside target", cwd: filepath.Join(target, "sub"), want: filepath.Join(dir, "iotap-20260102T030405Z.iotap")},
		{name: "cwd outside target", cwd: t.TempDir(), want: "iotap-20260102T030405Z.iotap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.Chdir(tt.cwd); err != nil {
				t.Fatal(err)
			}
			got, err := resolveOutput("", realOrSelf(target), "")
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if !filepath.IsAbs(want) {
				want = filepath.Join(realOrSelf(tt.cwd), want)
			}
			if realOrSelf(filepath.Dir(got)) != realOrSelf(filepath.Dir(want)) || filepath.Base(got) != filepath.Base(want) {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}
