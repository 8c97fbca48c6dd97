package campaign

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
	"github.com/iotap/iotap/trace/tracetest"
)

// writeJob writes a small recorded job: it reads in.dat (8 KiB, there before the trace
// began) and writes 4 KiB to out.dat, which it creates.
func writeJob(t *testing.T, path string) {
	t.Helper()
	b := tracetest.New(t)
	b.W.AddFile(trace.File{Path: b.Path("in.dat"), Type: trace.TypeFile, Mode: 0o644, Size: 8192})
	in := b.Open(1, "in.dat", unix.O_RDONLY)
	b.RW(1, trace.OpRead, "in.dat", in, 0, 8192, 8192)
	b.Close(1, "in.dat", in)
	out := b.Create(1, "out.dat")
	b.RW(1, trace.OpWrite, "out.dat", out, 0, 4096, 4096)
	b.Close(1, "out.dat", out)
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// memPlaces is a Places whose remote places, mem://NAME, are directories below root:
// the campaign reaches them only through Places, as it reaches S3.
type memPlaces struct{ root string }

func (p memPlaces) Remote(spec string) bool { return strings.HasPrefix(spec, "mem://") }

func (p memPlaces) CheckRemote(flag, spec string) error {
	if strings.Trim(strings.TrimPrefix(spec, "mem://"), "/") == "" {
		return usageErrorf("%s %s: give a name", flag, spec)
	}
	return nil
}

func (p memPlaces) Open(_ context.Context, spec string) (replay.Backend, error) {
	if name, ok := strings.CutPrefix(spec, "mem://"); ok {
		spec = filepath.Join(p.root, name)
		if err := os.MkdirAll(spec, 0o755); err != nil {
			return nil, err
		}
	}
	d, err := replay.OpenDir(spec)
	if err != nil {
		return nil, err
	}
	return d, nil
}

func (p memPlaces) Labels(replay.Backend) []trace.Label {
	return []trace.Label{{Key: "replay.mem", Value: "yes"}}
}

// load aggregates replay traces as the replay command does, without its damage notes.
func load(_ context.Context, files []string) ([]*stats.Stats, error) {
	var per []*stats.Stats
	for _, f := range files {
		r, err := trace.Open(f)
		if err != nil {
			return nil, err
		}
		acc := stats.NewAccumulator(f, r.Header(), stats.Options{Names: r})
		for {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				_ = r.Close()
				return nil, err
			}
			acc.Add(ev)
		}
		footer, _ := r.Footer()
		per = append(per, acc.Finish(r, footer, r.Damage()))
		_ = r.Close()
	}
	return per, nil
}

// setup returns a directory holding the job's trace, an empty results directory res and
// the spec of a campaign of it with the replay command's defaults and no target.
func setup(t *testing.T) (dir string, s Spec) {
	t.Helper()
	dir = t.TempDir()
	writeJob(t, filepath.Join(dir, "job.iotap"))
	mkdirs(t, filepath.Join(dir, "res"))
	return dir, Spec{
		Trace: filepath.Join(dir, "job.iotap"), Output: filepath.Join(dir, "res", "p"),
		Repeat: 1, Copies: 1, Prepare: "auto", Progress: "never",
		Timing: "afap", Speed: 1, RoundTrip: "auto", ThinkCPU: "sleep", OnDiverge: "warn", Fill: "zero",
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// runCampaign runs the campaign of s and returns its standard output and error.
func runCampaign(t *testing.T, root string, s Spec) (stdout, stderr string, res *Result, err error) {
	t.Helper()
	var out, errs bytes.Buffer
	c, err := New(s, Env{Places: memPlaces{root: root}, Load: load, Stdout: &out, Stderr: &errs, Version: "test"})
	if err != nil {
		return "", "", nil, err
	}
	res, err = c.Run(context.Background())
	return out.String(), errs.String(), res, err
}

// TestNewRefuses: every bad value and place is refused by New, with the replay command's
// flag named, as ErrUsage, and before anything is touched.
func TestNewRefuses(t *testing.T) {
	dir, base := setup(t)
	target := filepath.Join(dir, "target")
	mkdirs(t, filepath.Join(target, "sub"))
	if err := os.Symlink(target, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	base.Targets = []string{target}
	for _, tc := range []struct {
		name string
		mod  func(s *Spec)
		want string
	}{
		{"timing", func(s *Spec) { s.Timing = "fast" }, "--timing"},
		{"on-diverge", func(s *Spec) { s.OnDiverge = "panic" }, "--on-diverge"},
		{"speed", func(s *Spec) { s.Speed = 0 }, "--speed 0: want a factor"},
		{"think-cpu", func(s *Spec) { s.ThinkCPU = "nap" }, `--think-cpu "nap"`},
		{"round-trip", func(s *Spec) { s.RoundTrip = "-1us" }, `--round-trip "-1us"`},
		{"repeat", func(s *Spec) { s.Repeat = 0 }, "--repeat 0"},
		{"copies", func(s *Spec) { s.Copies = maxCopies + 1 }, "--copies 1025: want 1 to 1024"},
		{"copies with stores", func(s *Spec) { s.Copies, s.Stores = 2, []string{target} }, "does not go with --prepare-via"},
		{"prepare", func(s *Spec) { s.Prepare = "maybe" }, `--prepare "maybe"`},
		{"fill", func(s *Spec) { s.Fill = "ones" }, `--fill "ones"`},
		{"no target", func(s *Spec) { s.Targets = nil }, "at least one --target"},
		{"progress", func(s *Spec) { s.Progress = "sometimes" }, `--progress "sometimes"`},
		{"results directory", func(s *Spec) { s.Output = filepath.Join(dir, "nope", "p") }, "-o " + filepath.Join(dir, "nope", "p")},
		{"results over the trace", func(s *Spec) { s.Output = filepath.Join(dir, "job"); s.Trace = filepath.Join(dir, "job.t1.r1.iotap") }, "would overwrite the trace"},
		{"missing target", func(s *Spec) { s.Targets = []string{filepath.Join(dir, "nope")} }, "--target " + filepath.Join(dir, "nope")},
		{"symlink target", func(s *Spec) { s.Targets = []string{filepath.Join(dir, "link")} }, "is a symbolic link"},
		{"target holds the trace", func(s *Spec) { s.Targets = []string{dir} }, "holds the trace"},
		{"target in target", func(s *Spec) { s.Targets = []string{target, filepath.Join(target, "sub")} }, "one holds the other"},
		{"remote target", func(s *Spec) { s.Targets = []string{"mem://"} }, "--target mem://: give a name"},
		{"stores per target", func(s *Spec) { s.Stores = []string{target, target} }, "--prepare-via given 2 times for 1 targets"},
		{"store with prepare skip", func(s *Spec) { s.Stores, s.Prepare = []string{target}, "skip" }, "does not go with --prepare skip"},
		{"remote store", func(s *Spec) { s.Stores = []string{"mem://"} }, "--prepare-via mem://: give a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.mod(&s)
			_, err := New(s, Env{Places: memPlaces{root: dir}, Load: load})
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v; want ErrUsage with %q", err, tc.want)
			}
		})
	}
	if _, err := New(base, Env{Places: memPlaces{root: dir}, Load: load}); err != nil {
		t.Errorf("a good spec: %v", err)
	}
	if _, err := New(base, Env{Load: load}); err == nil || errors.Is(err, ErrUsage) {
		t.Errorf("no Places: %v", err)
	}
}

// TestRunTargetsRepeated: two targets, one a directory and one remote, replayed twice
// each, interleaved: every run's trace and summary under the prefix, the header's labels
// (Places.Labels among them), then the targets' comparison and each target's first run
// beside its second.
func TestRunTargetsRepeated(t *testing.T) {
	dir, s := setup(t)
	t1 := filepath.Join(dir, "t1")
	mkdirs(t, t1)
	s.Targets, s.Repeat = []string{t1, "mem://t2"}, 2
	out, errs, res, err := runCampaign(t, dir, s)
	if err != nil || res.Damage != nil {
		t.Fatalf("Run: %v, %+v\n%s\n%s", err, res, out, errs)
	}
	t.Log(out)
	for _, want := range []string{
		"starting state: 0 directories, 1 files (8.00KiB), 0 symlinks; 6 replay ops",
		"run 1/2, target 1 (" + t1 + "): " + s.Output + ".t1.r1.iotap\n",
		"run 1/2, target 2 (mem://t2): " + s.Output + ".t2.r1.iotap\n",
		"run 2/2, target 2 (mem://t2): " + s.Output + ".t2.r2.iotap\n",
		"replayed 6 of 6",
		"\nmem://t2: ", // the comparison's verdict, the first target the baseline
		"target 1 (" + t1 + "): run 1 against run 2, per operation",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, name := range []string{"t1.r1", "t1.r2", "t2.r1", "t2.r2"} {
		var sum replay.Summary
		readJSON(t, s.Output+"."+name+".json", &sum)
		if sum.Divergences != 0 || sum.ReplayedOps != 6 {
			t.Errorf("%s: %d of 6 ops replayed, %d divergences", name, sum.ReplayedOps, sum.Divergences)
		}
	}
	h := header(t, s.Output+".t2.r2.iotap")
	for _, want := range []string{"replay.run=2", "replay.timing=afap", "replay.mem=yes", "replay.of=" + s.Trace} {
		if !strings.Contains(h, want) {
			t.Errorf("header labels %s lack %s", h, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "t2", "out.dat")); err != nil || len(b) != 4096 {
		t.Errorf("the remote target's out.dat: %d bytes, %v", len(b), err)
	}
}

// TestRunStores: with a store behind the target (here the target itself), the first run
// starts cold and the second warm, after the store is restored; BetweenRuns runs before
// each, with the run and the store in its environment.
func TestRunStores(t *testing.T) {
	dir, s := setup(t)
	t1 := filepath.Join(dir, "t1")
	mkdirs(t, t1)
	log := filepath.Join(dir, "between")
	s.Targets, s.Stores, s.Repeat = []string{t1}, []string{t1}, 2
	s.BetweenRuns = `echo "$IOTAP_RUN/$IOTAP_REPEAT $IOTAP_TARGET_INDEX $IOTAP_STORE" >> ` + log
	out, errs, _, err := runCampaign(t, dir, s)
	if err != nil {
		t.Fatalf("Run: %v\n%s\n%s", err, out, errs)
	}
	for _, want := range []string{"restored the starting state in " + t1, "run 1 (cold) against run 2 (warm)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(log); string(b) != "1/2 1 "+t1+"\n2/2 1 "+t1+"\n" {
		t.Errorf("--between-runs saw %q", b)
	}
	for name, want := range map[string]string{"r1": "replay.start=cold", "r2": "replay.start=warm"} {
		if h := header(t, s.Output+".t1."+name+".iotap"); !strings.Contains(h, want) {
			t.Errorf("%s: labels %s lack %s", name, h, want)
		}
	}
}

// TestRunCopies: copies of the job replay at once, each in its own part of the target (a
// key prefix of a remote one), and the run's figures add up.
func TestRunCopies(t *testing.T) {
	dir, s := setup(t)
	s.Targets, s.Copies = []string{"mem://many"}, 3
	out, errs, _, err := runCampaign(t, dir, s)
	if err != nil {
		t.Fatalf("Run: %v\n%s\n%s", err, out, errs)
	}
	if !strings.Contains(out, "3 copies at once") || !strings.Contains(out, "\n  all ") {
		t.Errorf("output:\n%s", out)
	}
	var cs CopiesSummary
	readJSON(t, s.Output+".t1.r1.copies.json", &cs)
	if cs.Schema != copiesSchema || cs.Copies != 3 || len(cs.PerCopy) != 3 {
		t.Fatalf("copies %+v", cs)
	}
	for _, f := range cs.PerCopy {
		if f.Bytes != 8192+4096 || f.IOs != 2 || f.Files != 2 || f.Trace != s.Output+".t1.r1.c"+strconv.Itoa(f.Copy)+".iotap" {
			t.Errorf("copy %d: %+v", f.Copy, f)
		}
	}
	if a := cs.Aggregate; a.Bytes != 3*(8192+4096) || a.IOs != 6 || a.Files != 6 {
		t.Errorf("aggregate %+v", a)
	}
	for _, k := range []string{"1", "2", "3"} {
		if h := header(t, s.Output+".t1.r1.c"+k+".iotap"); !strings.Contains(h, LabelCopy+"="+k) || !strings.Contains(h, LabelCopies+"=3") {
			t.Errorf("copy %s: labels %s", k, h)
		}
		if _, err := os.Stat(filepath.Join(dir, "many", "copy"+k, "out.dat")); err != nil {
			t.Errorf("copy %s: %v", k, err)
		}
	}
}

// TestRunDamaged: a trace cut short is replayed up to the cut and the result says so; a
// corrupt one is refused unless Force.
func TestRunDamaged(t *testing.T) {
	dir, s := setup(t)
	whole, err := os.ReadFile(s.Trace)
	if err != nil {
		t.Fatal(err)
	}
	t1 := filepath.Join(dir, "t1")
	mkdirs(t, t1)
	s.Targets, s.Scratch = []string{t1}, true
	s.Trace = filepath.Join(dir, "cut.iotap")
	if err := os.WriteFile(s.Trace, whole[:len(whole)-40], 0o600); err != nil {
		t.Fatal(err)
	}
	_, errs, res, err := runCampaign(t, dir, s)
	if err != nil || !errors.Is(res.Damage, ErrDamaged) || !strings.Contains(errs, "was cut short") {
		t.Errorf("cut trace: %v, result %+v, stderr %q", err, res, errs)
	}

	corrupt := append([]byte(nil), whole...)
	corrupt[len(corrupt)/2] ^= 0xff
	s.Trace = filepath.Join(dir, "corrupt.iotap")
	if err := os.WriteFile(s.Trace, corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := runCampaign(t, dir, s); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "--force") {
		t.Errorf("corrupt trace: %v", err)
	}
}

// TestResultName: what a campaign appends to its prefix, and nothing else, is a result's
// name.
func TestResultName(t *testing.T) {
	for name, want := range map[string]bool{
		".t1.r1.iotap": true, ".t2.r10.json": true, ".t1.r1.c3.iotap": true, ".t1.r1.requests.json": true,
		".t1.r1.copies.json": true, ".iotap": false, ".t1.iotap": false, ".t1.r1.c.iotap": false, ".t1.r1.iotap.bak": false,
	} {
		if resultName.MatchString(name) != want {
			t.Errorf("%q: result name %v, want %v", name, !want, want)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// header returns the labels of a trace's header, "key=value" separated by spaces.
func header(t *testing.T, path string) string {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	var l []string
	for _, x := range r.Header().Labels {
		l = append(l, x.Key+"="+x.Value)
	}
	return strings.Join(l, " ")
}
