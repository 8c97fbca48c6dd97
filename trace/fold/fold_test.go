package fold

import (
	"io"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/tracetest"
	"github.com/iotap/iotap/trace"
)

// calls folds a trace and returns its calls.
func calls(t *testing.T, data []byte, o Options) ([]Call, *Folder) {
	t.Helper()
	r := tracetest.Reader(t, data)
	f := New(r, r.Header(), o)
	var out []Call
	for {
		if c, ok := f.Next(); ok {
			out = append(out, *c)
			continue
		}
		if f.Ended() {
			return out, f
		}
		ev, err := r.Next()
		if err == io.EOF {
			f.End()
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		f.Add(ev)
	}
}

// TestCallsOfAFile: the walk, open, split read, flush and release of one file are three
// calls, with the requests and time they stand for.
func TestCallsOfAFile(t *testing.T) {
	b := tracetest.New(t)
	fh := b.Open(1, "a/b/c", unix.O_RDONLY) // lookups a, a/b, a/b/c, then open
	b.RW(1, trace.OpRead, "a/b/c", fh, 0, 1<<20-16, 1<<20-16)
	b.RW(1, trace.OpRead, "a/b/c", fh, 1<<20-16, 16, 16)
	b.Close(1, "a/b/c", fh)
	b.Lookup(1, "missing", syscall.ENOENT, 0, 0)
	got, f := calls(t, b.Bytes(), Options{})
	type want struct {
		kind       Kind
		rec        trace.Op
		reqs       int
		time       int64
		errno      uint16
		ret        int64
		walk, name string
	}
	wants := []want{
		{Open, trace.OpOpen, 4, 3*3000 + 5000, 0, 0, "", "a/b/c"},
		{Read, trace.OpRead, 2, 10000 + 1000 + 10000, 0, 1 << 20, "a/b", "a/b/c"},
		{Close, trace.OpFlush, 2, 2000, 0, 0, "a/b", "a/b/c"},
		{Stat, trace.OpLookup, 1, 3000, uint16(syscall.ENOENT), 0, "", "missing"},
	}
	if len(got) != len(wants) {
		t.Fatalf("%d calls, want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		c := &got[i]
		if c.Kind != w.kind || c.Rec != w.rec || c.Requests() != w.reqs || c.Time() != w.time || c.Errno != w.errno ||
			c.Ret != w.ret || c.Name != w.name || (w.kind == Open && c.Walk != w.walk) {
			t.Errorf("call %d: %s/%s reqs %d time %d errno %d ret %d walk %q name %q, want %+v",
				i, c.Kind, c.Rec, c.Requests(), c.Time(), c.Errno, c.Ret, c.Walk, c.Name, w)
		}
	}
	if f.Stats.Events != 9 || f.Stats.Merged != 1 || f.Stats.Folded[trace.OpLookup] != 3 {
		t.Errorf("stats %+v", f.Stats)
	}
}

// TestHoldingIsBounded: threads beyond maxHolding that each hold a lookup at the same
// instant make the longest-holding one release its calls; every call still comes out once.
func TestHoldingIsBounded(t *testing.T) {
	b := tracetest.New(t)
	const n = 3 * maxHolding
	for tid := uint32(1); tid <= n; tid++ {
		b.At(tid, 1000).Lookup(tid, "x", 0, unix.S_IFREG|0o644, 0)
	}
	r := tracetest.Reader(t, b.Bytes())
	f := New(r, r.Header(), Options{})
	var got, most int
	for {
		if _, ok := f.Next(); ok {
			got++
			continue
		}
		most = max(most, len(f.holding))
		if f.Ended() {
			break
		}
		ev, err := r.Next()
		if err == io.EOF {
			f.End()
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		f.Add(ev)
	}
	if got != n || most > maxHolding+1 {
		t.Fatalf("%d calls (want %d), at most %d threads holding (want <= %d)", got, n, most, maxHolding+1)
	}
	if len(f.threads) > maxHolding+1 {
		t.Errorf("%d thread states kept after the end", len(f.threads))
	}
}

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"root", "", true},
		{"plain", "a/b.txt", true},
		{"absolute", "/etc/passwd", false},
		{"dotdot", "a/../x", false},
		{"empty component", "a//b", false},
		{"trailing slash", "a/", false},
		{"nul", "a\x00b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckName(tt.in); (err == nil) != tt.ok {
				t.Fatalf("CheckName(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
		})
	}
}
