package fold

import (
	"io"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
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
		{Read, trace.OpRead, 2, 10000 + 10000, 0, 1 << 20, "a/b", "a/b/c"}, // the 1000 ns between the pieces is not in the storage
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

// TestPiecesOfOneCall: where the kernel's legs name each request's system call, the
// page-aligned pieces of one pread64 are one call, with the time of all its pieces, while
// the pieces of two reads, and the reads of one io_submit, stay apart.
func TestPiecesOfOneCall(t *testing.T) {
	const piece = 128 << 10
	b := tracetest.New(t)
	fh := b.Open(1, "f", unix.O_RDONLY)
	read := func(off int64, entry int64, nr uint16, last bool) {
		b.Ev(1, trace.OpRead, "f", 10000, 1000, func(e *trace.Event) {
			e.Handle, e.Offset, e.Size, e.Ret = fh, off, piece, piece
			e.Queued, e.Done = e.Start-300, e.Start+e.Dur+300
			e.CallStart, e.CallNr = entry, nr
			if last {
				e.CallEnd = e.Start + e.Dur + 2000
			}
		})
	}
	// One pread64 of 512 KiB: four pieces, one entry.
	b.At(1, 2e9)
	for i := range 4 {
		read(int64(i)*piece, 2e9-500, unix.SYS_PREAD64, i == 3)
	}
	// Two reads of 128 KiB that follow on: two calls.
	b.At(1, 3e9)
	read(4*piece, 3e9-500, unix.SYS_READ, true)
	b.At(1, 4e9)
	read(5*piece, 4e9-500, unix.SYS_READ, true)
	// One io_submit of two sequential reads: two calls.
	b.At(1, 5e9)
	read(6*piece, 5e9-500, unix.SYS_IO_SUBMIT, false)
	read(7*piece, 5e9-500, unix.SYS_IO_SUBMIT, true)
	// One read whose second piece comes 5 ms after the first, far beyond MergeGap, while
	// another thread works: one call.
	b.At(1, 6e9)
	read(8*piece, 6e9-500, unix.SYS_READ, false)
	fh2 := b.At(2, 6e9+100e3).Create(2, "g")
	for i := range 20 {
		b.RW(2, trace.OpWrite, "g", fh2, int64(i)*4096, 4096, 4096)
	}
	b.At(1, 6e9+5e6)
	read(9*piece, 6e9-500, unix.SYS_READ, true)
	b.Close(1, "f", fh)
	got, f := calls(t, b.Bytes(), Options{})
	var sizes []int64
	var first *Call
	for i := range got {
		if got[i].Kind == Read && got[i].Tid == 1 {
			sizes = append(sizes, got[i].Ret)
			if first == nil {
				first = &got[i]
			}
		}
	}
	if want := []int64{4 * piece, piece, piece, piece, piece, 2 * piece}; !slices.Equal(sizes, want) {
		t.Fatalf("reads of %v bytes, want %v", sizes, want)
	}
	// Its time in the storage is the pieces' (the 1000 ns between them is not), its span
	// all of them.
	if first.Events != 4 || first.Time() != 4*10000 || first.Dur != 3*11000+10000 || first.CallStart != 2e9-500 || first.CallEnd != 2e9+4*11000-1000+2000 {
		t.Errorf("the pread64: %d requests, time %d over %d, call %d..%d", first.Events, first.Time(), first.Dur, first.CallStart, first.CallEnd)
	}
	if f.Stats.Merged != 4 {
		t.Errorf("%d pieces merged, want 4", f.Stats.Merged)
	}
}

// TestRWCall: the read and write calls of this machine's architecture are recognised; its
// aio and io_uring submissions are not.
func TestRWCall(t *testing.T) {
	for _, nr := range []uint16{unix.SYS_READ, unix.SYS_WRITE, unix.SYS_PREAD64, unix.SYS_PWRITE64, unix.SYS_READV,
		unix.SYS_WRITEV, unix.SYS_PREADV, unix.SYS_PWRITEV, unix.SYS_PREADV2, unix.SYS_PWRITEV2} {
		if !rwCall(nr) {
			t.Errorf("system call %d is a read or write", nr)
		}
	}
	for _, nr := range []uint16{unix.SYS_IO_SUBMIT, unix.SYS_IO_URING_ENTER, unix.SYS_SENDFILE, unix.SYS_COPY_FILE_RANGE, unix.SYS_SPLICE} {
		if rwCall(nr) {
			t.Errorf("system call %d is not one read or write", nr)
		}
	}
}

// TestPassthroughCallsStayWhole: reads kernel passthrough served are whole system calls:
// an unaligned large read followed at once by the next on the same handle, which a split
// request would look like, stays two calls, each with its own call times.
func TestPassthroughCallsStayWhole(t *testing.T) {
	b := tracetest.New(t)
	fh := b.Open(1, "f", unix.O_RDONLY)
	b.At(1, 2e9)
	for i := range 3 {
		b.Ev(1, trace.OpRead, "f", 10000, 100, func(e *trace.Event) {
			e.Handle, e.Offset, e.Size, e.Ret = fh, int64(i)*100000, 100000, 100000
			e.Passthrough, e.Unique = true, 0
			e.Queued, e.Done, e.CallStart, e.CallEnd, e.CallNr = e.Start, e.End(), e.Start, e.End(), unix.SYS_READ
		})
	}
	b.Close(1, "f", fh)
	got, f := calls(t, b.Bytes(), Options{})
	var reads int
	for _, c := range got {
		if c.Kind == Read {
			reads++
			if c.Ret != 100000 || c.Events != 1 || c.CallStart != c.Start || c.CallEnd != c.Start+c.Dur {
				t.Errorf("read %+v", c)
			}
		}
	}
	if reads != 3 || f.Stats.Merged != 0 {
		t.Errorf("%d reads, %d merged: want 3 reads, none merged", reads, f.Stats.Merged)
	}
}

// TestProbeInPassthroughWrite: the kernel's privilege probe sent from within a write kernel
// passthrough served (a getxattr of security.capability, after the write's entry) is part
// of that write: its round trip is FUSE's, its backend time the storage's. A probe of
// another call stays a getxattr.
func TestProbeInPassthroughWrite(t *testing.T) {
	b := tracetest.New(t)
	// An earlier file, whose close's release the kernel sends in the middle of the write.
	fg := b.Open(1, "g", unix.O_RDONLY)
	b.At(1, 1.5e9)
	b.Ev(1, trace.OpFlush, "g", 2000, 100, func(e *trace.Event) { e.Handle = fg })
	fh := b.Create(1, "f")
	var entry int64
	b.At(1, 2e9)
	b.Ev(1, trace.OpWrite, "f", 50000, 100, func(e *trace.Event) {
		e.Handle, e.Size, e.Ret = fh, 4096, 4096
		e.Passthrough, e.Unique = true, 0
		e.Queued, e.Done, e.CallStart, e.CallEnd, e.CallNr = e.Start, e.End(), e.Start, e.End(), unix.SYS_WRITE
		entry = e.Start
	})
	b.At(1, entry+2000)
	b.Ev(1, trace.OpRelease, "g", 1000, 100, func(e *trace.Event) { e.Handle = fg })
	// The probe: queued 5 µs into the write, served in 3 µs, completed 20 µs later.
	b.At(1, entry+10000)
	b.Ev(1, trace.OpGetxattr, "f", 3000, 100, func(e *trace.Event) {
		e.Errno = uint16(unix.ENODATA)
		e.Queued, e.Done, e.CallStart, e.CallNr = entry+5000, entry+25000, entry, unix.SYS_WRITE
	})
	// A probe of a later chown: its own call.
	b.At(1, 3e9)
	b.Ev(1, trace.OpGetxattr, "f", 3000, 100, func(e *trace.Event) {
		e.Errno = uint16(unix.ENODATA)
		e.Queued, e.Done, e.CallStart, e.CallNr = e.Start-1000, e.End()+1000, e.Start-2000, unix.SYS_FCHOWN
	})
	b.Close(1, "f", fh)
	got, _ := calls(t, b.Bytes(), Options{})
	var writes, getxattrs, closes int
	for _, c := range got {
		switch c.Kind {
		case Close:
			closes++
		case Write:
			writes++
			if c.Reqs != 2 || c.Time() != 50000-20000+3000 || c.CallEnd-c.CallStart != 50000 {
				t.Errorf("write: %d requests, time %d, call %d", c.Reqs, c.Time(), c.CallEnd-c.CallStart)
			}
		case Getxattr:
			getxattrs++
		}
	}
	if writes != 1 || getxattrs != 1 || closes != 2 {
		t.Errorf("%d writes, %d getxattrs, %d closes; want 1, the chown's probe, and both files' closes", writes, getxattrs, closes)
	}
}

// TestMappedFileFaults: pages of a mapped file that page faults brought in or made dirty
// are reads and writes of their own: two adjacent ranges stay two calls, and a held lookup
// of the file does not fold into one. A mapping outlives its descriptor: faults after the
// release of the handle the file was mapped through (whose number another file's open may
// have taken since) use one implicit open of the file, made at the first of them.
func TestMappedFileFaults(t *testing.T) {
	b := tracetest.New(t)
	open := func(name string, node uint64) uint64 {
		b.Lookup(1, name, 0, unix.S_IFREG|0o644, 1<<20)
		b.FH = 0 // go-fuse reuses the numbers of released handles
		b.FH++
		fh := b.FH
		b.Ev(1, trace.OpOpen, name, 5000, 2000, func(e *trace.Event) { e.Handle, e.Node = fh, node })
		return fh
	}
	fault := func(op trace.Op, name string, fh, node uint64, off int64) {
		b.Ev(1, op, name, 0, 500, func(e *trace.Event) {
			e.Handle, e.Node, e.Offset, e.Size, e.Ret = fh, node, off, 65536, 65536
			e.Passthrough, e.Flags, e.Queued, e.Done = true, trace.MapFault, e.Start, e.Start
		})
	}
	fm := open("m", 10)
	b.Close(1, "m", fm)
	fault(trace.OpRead, "m", fm, 10, 0)
	fault(trace.OpRead, "m", fm, 10, 65536)
	fw := open("w", 11) // the same handle number as m's
	fault(trace.OpWrite, "w", fw, 11, 0)
	b.Lookup(1, "w", 0, unix.S_IFREG|0o644, 1<<20)
	fault(trace.OpRead, "w", fw, 11, 65536)
	fault(trace.OpRead, "m", fm, 10, 131072)
	b.Close(1, "w", fw)
	got, f := calls(t, b.Bytes(), Options{})
	type want struct {
		kind     Kind
		name     string
		implicit bool
		off      int64
	}
	wants := []want{
		{Open, "m", false, 0}, {Close, "m", false, 0},
		{Open, "m", true, 0}, {Read, "m", false, 0}, {Read, "m", false, 65536},
		{Open, "w", false, 0}, {Write, "w", false, 0}, {Stat, "w", false, 0}, {Read, "w", false, 65536},
		{Read, "m", false, 131072}, {Close, "w", false, 0},
	}
	if len(got) != len(wants) {
		t.Fatalf("%d calls, want %d: %+v", len(got), len(wants), got)
	}
	slots := map[string]int32{}
	for i, w := range wants {
		c := &got[i]
		if c.Kind != w.kind || c.Name != w.name || c.Implicit != w.implicit || c.Offset != w.off {
			t.Errorf("call %d: %s %q implicit %v offset %d, want %+v", i, c.Kind, c.Name, c.Implicit, c.Offset, w)
		}
		switch {
		case c.Kind == Open && (c.Implicit || w.name == "w"):
			slots[w.name] = c.Slot
		case c.Kind == Read || c.Kind == Write:
			if c.Slot != slots[w.name] || c.Events != 1 || c.Reqs != 1 || !c.Passthrough || c.Dur != 0 {
				t.Errorf("call %d: %+v, want one fault on the slot of %s's open (%d)", i, c, w.name, slots[w.name])
			}
		}
	}
	if f.Stats.Implicit != 1 || f.Stats.Merged != 0 {
		t.Errorf("stats %+v: want one implicit open, nothing merged", f.Stats)
	}
}
