package anonymize

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func newTest(t *testing.T, o Options) *Anonymizer {
	t.Helper()
	if o.Key == nil {
		o.Key = testKey
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestTokens(t *testing.T) {
	a := newTest(t, Options{})
	b := newTest(t, Options{Key: []byte("another key of 32 bytes, or so..")})
	noExt := newTest(t, Options{NoExtensions: true})
	long := strings.Repeat("n", 300)
	for _, tc := range []struct {
		name string
		got  string
		want func(string) bool
		what string
	}{
		{name: "same-name", got: a.Name("reads.bam"), want: func(s string) bool { return s == a.Name("reads.bam") }, what: "the same token twice"},
		{name: "extension", got: a.Name("reads.sorted.bam"), want: func(s string) bool { return strings.HasSuffix(s, ".bam") && len(s) == TokenDigits+4 }, what: "16 digits and .bam"},
		{name: "stem-differs", got: a.Name("reads.bai"), want: func(s string) bool { return s[:TokenDigits] != a.Name("reads.bam")[:TokenDigits] }, what: "a token unlike reads.bam's"},
		{name: "other-key", got: b.Name("reads.bam"), want: func(s string) bool { return s != a.Name("reads.bam") }, what: "another token"},
		{name: "no-extensions", got: noExt.Name("reads.bam"), want: func(s string) bool { return len(s) == TokenDigits && !strings.Contains(s, ".") }, what: "16 digits"},
		{name: "dotfile", got: a.Name(".bashrc"), want: func(s string) bool { return len(s) == TokenDigits }, what: "no extension"},
		{name: "long-extension", got: a.Name("x.verylongext"), want: func(s string) bool { return len(s) == TokenDigits }, what: "no extension"},
		{name: "journal", got: a.Name("db.sqlite-journal"), want: func(s string) bool { return len(s) == TokenDigits }, what: "no extension (15 bytes)"},
		{name: "too-long", got: a.Name(long), want: func(s string) bool { return len(s) == len(long) && s != long }, what: "a token as long as the name"},
		{name: "dot-dot", got: a.Path("../a/./b"), want: func(s string) bool {
			p := strings.Split(s, "/")
			return len(p) == 4 && p[0] == ".." && p[1] == a.Name("a") && p[2] == "." && p[3] == a.Name("b")
		}, what: "components replaced, . and .. kept"},
		{name: "absolute", got: a.Path("/usr/bin/samtools"), want: func(s string) bool {
			return s == "/"+a.Name("usr")+"/"+a.Name("bin")+"/"+a.Name("samtools")
		}, what: "each component's token"},
		{name: "word", got: a.Word("node17.cluster.org"), want: func(s string) bool { return len(s) == TokenDigits }, what: "no extension"},
		{name: "link-target", got: a.LinkTarget("../data/x.bin"), want: func(s string) bool {
			return len(s) == len("../data/x.bin") && strings.HasPrefix(s, "../") && s[7] == '/' && s != "../data/x.bin"
		}, what: "the same length and shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.want(tc.got) {
				t.Errorf("got %q, want %s", tc.got, tc.what)
			}
		})
	}
	if a.Name("") != "" || a.Word("") != "" {
		t.Error("empty names must stay empty")
	}
	if a.Word("x.bam") == a.Name("x.bam") {
		t.Error("a word and a name with an extension got one token")
	}
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Key: []byte("short")}); err == nil {
		t.Error("a 5-byte key was accepted")
	}
}

func TestIDs(t *testing.T) {
	a := newTest(t, Options{})
	for _, tc := range []struct{ in, want uint32 }{{1000, 1}, {0, 0}, {1001, 2}, {1000, 1}, {65534, 3}} {
		if got := a.UID(tc.in); got != tc.want {
			t.Errorf("uid %d → %d, want %d", tc.in, got, tc.want)
		}
	}
	if got := a.GID(1000); got != 1 {
		t.Errorf("gid 1000 → %d, want 1 (groups are numbered apart)", got)
	}
}

func TestCollision(t *testing.T) {
	a := newTest(t, Options{})
	tok := a.Name("one")
	a.tokens = map[string]string{} // as if "two" had been hashed to "one"'s token
	a.names[tok] = "two"
	a.Name("one")
	if err := a.Err(); !errors.Is(err, ErrCollision) {
		t.Fatalf("err %v, want ErrCollision", err)
	}
}

// syntheticTrace returns a trace with names, a symlink, files, processes, samples,
// labels and a footer with figures of a recording.
func syntheticTrace(t *testing.T) []byte {
	t.Helper()
	b := tracetest.NewWithHeader(t, trace.Header{
		Kind: "record", Hostname: "node17", Target: trace.Target{Path: "/home/ann/job", FSType: "ext4", Source: "/dev/sda1", Mount: "/home"},
		FUSE: trace.FUSEOptions{Cache: "none"}, Command: []string{"/home/ann/run.sh", "--in", "data/in.bam"},
		Labels: []trace.Label{{Key: "SLURM_JOB_ID", Value: "4242"}},
	})
	b.AddProcess(trace.Process{Tid: 10, Pid: 10, PPid: 1, Comm: "tar", Exe: "/usr/bin/tar"})
	b.AddProcess(trace.Process{Tid: 11, Pid: 11, PPid: 1, Comm: "sqlite3", Exe: "/usr/bin/sqlite3", Cmdline: []string{"sqlite3", "/home/ann/db.sqlite", "select secret from t;"}})
	b.AddProcess(trace.Process{Tid: 12, Pid: 12, PPid: 1, Comm: "ls", Exe: "/usr/bin/ls"})
	tracetest.Workload(b, 6)
	b.Ev(10, trace.OpReadlink, "out/link", 2000, 1000, func(e *trace.Event) { e.Ret = int64(len("d0/f0")); e.Size = 4096; e.Uid, e.Gid = 1000, 100 })
	b.AddProcess(trace.Process{Tid: 10, Pid: 10, PPid: 1, Comm: "gzip", Exe: "/usr/bin/gzip", Cmdline: []string{"gzip", "in/archive.tar"}}) // an exec
	b.Ev(10, trace.OpGetattr, "in/archive.tar", 2000, 1000, nil)
	b.W.AddSamples(trace.Samples{Role: trace.RoleSelf, Pid: 7, Name: "iotap", Points: []trace.Sample{{T: 1e9, RSS: 1 << 20}, {T: 2e9, RSS: 2 << 20}}})
	b.W.SetRoundTrip(trace.RoundTrip{Start: 20 * time.Microsecond, Run: 25 * time.Microsecond, Samples: 3})
	return b.Bytes()
}

func readEvents(t *testing.T, r *trace.Reader) []trace.Event {
	t.Helper()
	var out []trace.Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *ev)
	}
}

// pathName returns the name of path id, "" for none.
func pathName(r *trace.Reader, id uint32) string {
	if id == 0 {
		return ""
	}
	return r.PathName(id)
}

func TestCopy(t *testing.T) {
	in := syntheticTrace(t)
	a := newTest(t, Options{})
	var out bytes.Buffer
	res, err := Copy(context.Background(), tracetest.Reader(t, in), &out, a, KeyID(testKey))
	if err != nil {
		t.Fatal(err)
	}
	orig, anon := tracetest.Reader(t, in), tracetest.Reader(t, out.Bytes())
	oe, ae := readEvents(t, orig), readEvents(t, anon)
	if len(oe) != len(ae) || res.Events != uint64(len(oe)) {
		t.Fatalf("%d events copied (result %d), want %d", len(ae), res.Events, len(oe))
	}
	if d := anon.Damage(); len(d) > 0 {
		t.Fatalf("the copy is damaged: %v", d)
	}
	for i := range oe {
		o, c := oe[i], ae[i]
		if op, cp := pathName(orig, o.Path), pathName(anon, c.Path); cp != a.Path(op) {
			t.Errorf("event %d %s: path %q → %q, want %q", i, o.Op, op, cp, a.Path(op))
		}
		if o.Op == trace.OpSymlink {
			if tgt := anon.PathName(c.Path2); len(tgt) != len("d0/f0") || tgt == "d0/f0" {
				t.Errorf("symlink target %q: want another text of the same length", tgt)
			}
		} else if op2, cp2 := pathName(orig, o.Path2), pathName(anon, c.Path2); cp2 != a.Path(op2) {
			t.Errorf("event %d %s: path2 %q → %q", i, o.Op, op2, cp2)
		}
		if o.Uid != 0 && c.Uid == o.Uid || c.Uid != a.UID(o.Uid) || c.Gid != a.GID(o.Gid) {
			t.Errorf("event %d: uid %d gid %d → %d %d", i, o.Uid, o.Gid, c.Uid, c.Gid)
		}
		o.Path, o.Path2, o.Uid, o.Gid = c.Path, c.Path2, c.Uid, c.Gid
		if o != c {
			t.Errorf("event %d differs beyond names and ids:\n%+v\n%+v", i, oe[i], c)
		}
	}

	h, ah := orig.Header(), anon.Header()
	for _, s := range []string{ah.Hostname, ah.Target.Path, ah.Target.Source, ah.Target.Mount, strings.Join(ah.Command, " ")} {
		for _, name := range []string{"node17", "ann", "home", "job", "sda1", "run.sh", "in.bam"} {
			if strings.Contains(s, name) {
				t.Errorf("the header keeps %q in %q", name, s)
			}
		}
	}
	if ah.Target.FSType != h.Target.FSType || !ah.WallStart.Equal(h.WallStart) || ah.Origin != h.Origin ||
		ah.Target.Path != a.Path(h.Target.Path) || ah.Command[1] != "--in" && ah.Command[1] != a.Path("--in") {
		t.Errorf("header %+v", ah)
	}
	if v, _ := ah.Label("SLURM_JOB_ID"); v != a.Word("4242") {
		t.Errorf("label value %q", v)
	}
	if v, _ := ah.Label(Label); v != "hmac-sha256 key "+KeyID(testKey) {
		t.Errorf("label %s = %q", Label, v)
	}

	for _, p := range anon.Processes() {
		o, _ := orig.Process(p.Tid)
		if p.Comm != a.Name(o.Comm) || p.Exe != a.Path(o.Exe) || p.Pid != o.Pid || p.PPid != o.PPid || len(p.Cmdline) != len(o.Cmdline) {
			t.Errorf("process %+v from %+v", p, o)
		}
		for i, arg := range o.Cmdline {
			if p.Cmdline[i] != a.Path(arg) {
				t.Errorf("process %d: argument %q is %q, want its token %q", p.Tid, arg, p.Cmdline[i], a.Path(arg))
			}
		}
	}
	if p, _ := anon.Process(10); p.Comm != a.Name("gzip") || len(p.Cmdline) != 2 || p.Cmdline[1] != a.Path("in/archive.tar") {
		t.Errorf("thread 10 is %q, want the token of its latest name", p.Comm)
	}
	of, af := orig.Files(), anon.Files()
	if len(of) != len(af) || res.Files != len(of) {
		t.Fatalf("files %v → %v", of, af)
	}
	for i := range of {
		if anon.PathName(af[i].Path) != a.Path(orig.PathName(of[i].Path)) || af[i].Size != of[i].Size || af[i].Type != of[i].Type {
			t.Errorf("file %+v → %+v", of[i], af[i])
		}
	}
	if s := anon.Samples(); len(s) != 1 || s[0].Name != a.Name("iotap") || len(s[0].Points) != 2 || s[0].Points[1].RSS != 2<<20 {
		t.Errorf("samples %+v", s)
	}
	of2, ok1 := orig.Footer()
	af2, ok2 := anon.Footer()
	if !ok1 || !ok2 || af2.RoundTrip != of2.RoundTrip || af2.End != of2.End || af2.Events != of2.Events {
		t.Errorf("footer %+v, want %+v", af2, of2)
	}
}

// TestCopyCutShort: a trace cut short is copied as far as it reads, without a footer.
func TestCopyCutShort(t *testing.T) {
	in := syntheticTrace(t)
	in = in[:len(in)-30]
	a := newTest(t, Options{})
	var out bytes.Buffer
	r := tracetest.Reader(t, in)
	res, err := Copy(context.Background(), r, &out, a, KeyID(testKey))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Damage()) == 0 {
		t.Fatal("the input reads undamaged")
	}
	anon := tracetest.Reader(t, out.Bytes())
	if n := len(readEvents(t, anon)); uint64(n) != res.Events || n == 0 {
		t.Fatalf("%d events in the copy, %d copied", n, res.Events)
	}
	if _, ok := anon.Footer(); ok || !anon.CutShort() {
		t.Errorf("the copy of a trace cut short has a footer (damage %v)", anon.Damage())
	}
}
