package replay

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// Entry is one object of the starting state.
type Entry struct {
	Name   string
	Type   trace.FileType
	Mode   uint32 // permission bits, 0 if unknown
	Size   int64  // regular files
	Target string // symlinks (the trace does not record it: a placeholder)
	// Holes are ranges the trace shows unallocated in the starting file (lseek SEEK_DATA
	// answers): Prepare leaves them sparse. End -1: to the end of the file.
	Holes []Hole
}

// Hole is a byte range [Off, End) of a file with no data.
type Hole struct{ Off, End int64 }

// State is what existed under the traced root before the trace began, as far as the
// trace shows: objects it found (File records), and objects its successful ops used
// without creating them.
type State struct {
	Entries               []Entry // parents before children
	Files, Dirs, Symlinks int
	Bytes                 int64
	Ops                   uint64 // replay ops the trace plans (for progress)
	Workers               int    // threads that issue ops (Options.Workers)
	// RoundTrip is the recording layer's estimated round trip per request (0: not a FUSE
	// recording, or too few samples), from RoundTripSamples path-walk gaps. Pass it to
	// Options.RoundTrip, or Measured when there is one.
	RoundTrip        time.Duration
	RoundTripSamples uint64
	// Measured is the round trip the recorder measured against its mount (the trace's
	// footer; zero when it was not measured, or the trace has no footer).
	Measured trace.RoundTrip
}

// Problem is an op whose recorded outcome the starting state cannot reproduce, or (Seq 0)
// Count ops the replay refuses or skips, for one reason.
type Problem struct {
	Seq   uint64
	Op    string
	Name  string
	What  string
	Count int // ops the problem stands for when Seq is 0
}

// Ops returns the number of ops p stands for.
func (p Problem) Ops() int { return max(1, p.Count) }

func (p Problem) String() string {
	if p.Seq == 0 {
		return p.What
	}
	return fmt.Sprintf("op %d %s %q: %s", p.Seq, p.Op, p.Name, p.What)
}

type mnode struct {
	typ      trace.FileType
	size     int64
	modified bool
	entry    *Entry // the starting-state entry this node came from, if any
}

// model simulates the namespace along the trace.
type model struct {
	nodes    map[string]*mnode
	children map[string]int
	touched  map[string]int64 // name -> recorded start of the first op that created or removed it
	initial  map[string]*Entry
	derive   bool // add missing objects to initial instead of reporting them
	problems []Problem
	nprob    int

	listings map[uint64]*listing // open directory listings, by handle
	listed   map[string]bool     // directories whose entry count was estimated
	pending  []pendingList       // complete listings of starting-state directories
}

// listing accumulates one directory handle's readdir replies.
type listing struct {
	dir       string
	bytes     int64
	plus      bool
	fromStart bool
}

func newModel(derive bool) *model {
	m := &model{nodes: map[string]*mnode{}, children: map[string]int{}, touched: map[string]int64{},
		initial: map[string]*Entry{}, derive: derive, listings: map[uint64]*listing{}, listed: map[string]bool{}}
	m.nodes[""] = &mnode{typ: trace.TypeDir}
	return m
}

func (m *model) add(name string, n *mnode) {
	if _, ok := m.nodes[name]; !ok && name != "" {
		m.children[fold.Parent(name)]++
	}
	m.nodes[name] = n
}

func (m *model) del(name string) {
	if _, ok := m.nodes[name]; ok && name != "" {
		delete(m.nodes, name)
		m.children[fold.Parent(name)]--
	}
}

func (m *model) touch(name string, t int64) {
	if _, ok := m.touched[name]; !ok {
		m.touched[name] = t
	}
}

func (m *model) problem(op *replayOp, format string, a ...any) {
	m.nprob++
	if len(m.problems) < 100 {
		m.problems = append(m.problems, Problem{Seq: op.Seq, Op: op.Rec.String(), Name: op.Name, What: fmt.Sprintf(format, a...)})
	}
}

// need makes sure name exists with type typ (TypeUnknown: any) for an op that succeeded.
func (m *model) need(op *replayOp, name string, typ trace.FileType) *mnode {
	if n, ok := m.nodes[name]; ok {
		if typ == trace.TypeDir && n.typ != trace.TypeDir && n.typ != trace.TypeUnknown {
			m.problem(op, "needs a directory, finds %s", typeName(n.typ))
		}
		if n.typ == trace.TypeUnknown {
			n.typ = typ
			if n.entry != nil {
				n.entry.Type = typ
			}
		}
		return n
	}
	if !m.derive {
		m.problem(op, "needs %s, which does not exist at this point", typeName(typ))
		return nil
	}
	if _, ok := m.touched[name]; ok {
		return nil // created or removed earlier in the trace: not starting state
	}
	if name != "" {
		if m.need(op, fold.Parent(name), trace.TypeDir) == nil {
			return nil
		}
	}
	e := &Entry{Name: name, Type: typ}
	m.initial[name] = e
	n := &mnode{typ: typ, entry: e}
	m.add(name, n)
	return n
}

func typeName(t trace.FileType) string {
	switch t {
	case trace.TypeFile:
		return "a file"
	case trace.TypeDir:
		return "a directory"
	case trace.TypeSymlink:
		return "a symlink"
	case trace.TypeOther:
		return "a special file"
	}
	return "an object"
}

// absent checks, in check mode, that name does not exist for an op that recorded ENOENT
// or a successful create.
func (m *model) absent(op *replayOp, name string) {
	if m.derive {
		return
	}
	if _, ok := m.nodes[name]; ok {
		m.problem(op, "expects no entry, but it exists at this point")
	}
}

func (m *model) grow(n *mnode, size int64, observedEOF bool) {
	if n == nil || n.modified || n.entry == nil {
		return
	}
	if size > n.entry.Size {
		n.entry.Size = size
	}
	n.size = n.entry.Size
}

// seekHole learns holes of a starting-state file from lseek(SEEK_DATA): data is found at
// the answer, so [offset, answer) is a hole; ENXIO means no data from offset to the end.
func (m *model) seekHole(op *replayOp) {
	if op.Flags != trace.SeekData || !m.derive {
		return
	}
	n := m.nodes[op.Name]
	if n == nil || n.entry == nil || n.modified || n.typ != trace.TypeFile {
		return
	}
	switch {
	case op.WantErrno == 0 && op.WantRet > op.Offset:
		n.entry.Holes = append(n.entry.Holes, Hole{Off: op.Offset, End: op.WantRet})
		m.grow(n, op.WantRet+1, false)
	case op.WantErrno == uint16(syscall.ENXIO):
		n.entry.Holes = append(n.entry.Holes, Hole{Off: op.Offset, End: -1})
	}
}

// apply plays one op's recorded outcome on the model.
func (m *model) apply(op *replayOp) {
	switch op.Kind {
	case fold.Close:
		m.endListing(op.Handle)
	case fold.Skip, fold.Statfs, fold.Fsync, fold.Lock:
	case fold.Lseek:
		m.seekHole(op)
	case fold.Stat, fold.Access, fold.Readlink, fold.Getxattr, fold.Listxattr, fold.Setxattr, fold.Removexattr, fold.Chmod, fold.Chown, fold.Utimes, fold.Fstat:
		m.applyLookup(op)
	case fold.Open:
		m.applyOpen(op)
	case fold.Truncate, fold.Ftruncate, fold.Read, fold.Copy, fold.Write, fold.Fallocate, fold.Readdir:
		if op.WantErrno == 0 {
			m.applyData(op)
		}
	case fold.Mkdir, fold.Mknod, fold.Symlink, fold.Link:
		m.applyCreate(op)
	case fold.Unlink, fold.Rmdir, fold.Rename:
		m.applyRemove(op)
	}
}

// applyLookup applies a call that needs name to exist (or, failed with ENOENT, not to).
func (m *model) applyLookup(op *replayOp) {
	name := op.Name
	switch {
	case op.WantErrno == uint16(syscall.ENOENT):
		m.absent(op, name)
	case op.WantErrno != 0:
	case op.Kind == fold.Stat:
		n := m.need(op, name, trace.TypeOfMode(op.Mode))
		if n != nil && n.typ == trace.TypeFile && (op.Rec == trace.OpLookup || op.Rec == trace.OpGetattr) {
			m.grow(n, op.WantRet, false)
		}
	case op.Kind == fold.Readlink:
		n := m.need(op, name, trace.TypeSymlink)
		if n != nil && n.entry != nil && !n.modified && n.entry.Target == "" && op.WantRet > 0 && op.WantRet < 4096 {
			// The target text is not recorded, its length is: a placeholder of that
			// length makes readlink return the recorded byte count.
			n.entry.Target = symlinkPlaceholder(int(op.WantRet))
		}
	default:
		m.need(op, name, trace.TypeUnknown)
	}
}

// applyOpen applies an open: a create makes the file, O_TRUNC empties it.
func (m *model) applyOpen(op *replayOp) {
	name := op.Name
	ok := op.WantErrno == 0
	switch {
	case ok && op.Flags&unix.O_CREAT != 0 && op.Rec == trace.OpCreate:
		m.need(op, fold.Parent(name), trace.TypeDir)
		if _, had := m.nodes[name]; !had {
			m.touch(name, op.Start)
			m.add(name, &mnode{typ: trace.TypeFile, modified: true})
		}
	case ok:
		typ := trace.TypeFile
		if op.Flags&unix.O_DIRECTORY != 0 || op.Rec == trace.OpOpendir {
			typ = trace.TypeDir
		} else if op.Implicit {
			typ = trace.TypeUnknown
		}
		n := m.need(op, name, typ)
		if n != nil && op.Flags&unix.O_TRUNC != 0 {
			n.modified, n.size = true, 0
		}
	case op.WantErrno == uint16(syscall.EEXIST):
		m.need(op, name, trace.TypeUnknown)
	case op.WantErrno == uint16(syscall.ENOENT) && op.Flags&unix.O_CREAT == 0:
		m.absent(op, name)
	}
}

// applyData applies a successful call on a file's data or a directory's listing: what it
// read tells the file's size, what it wrote changes it.
func (m *model) applyData(op *replayOp) {
	name := op.Name
	switch op.Kind {
	case fold.Truncate, fold.Ftruncate:
		if n := m.need(op, name, trace.TypeFile); n != nil {
			n.modified, n.size = true, op.Size
		}
	case fold.Read:
		if n := m.need(op, name, trace.TypeFile); n != nil {
			m.grow(n, op.Offset+op.WantRet, op.WantRet < op.Size)
			if !m.derive && !n.modified && n.typ == trace.TypeFile && op.Offset+op.WantRet > n.size {
				m.problem(op, "reads to %d, file is %d bytes", op.Offset+op.WantRet, n.size)
			}
		}
	case fold.Copy:
		if n := m.need(op, name, trace.TypeFile); n != nil {
			m.grow(n, op.Offset+op.WantRet, op.WantRet < op.Size)
		}
		if n := m.need(op, op.Name2, trace.TypeFile); n != nil {
			n.modified = true
			n.size = max(n.size, op.Offset2+op.WantRet)
		}
	case fold.Write, fold.Fallocate:
		if n := m.need(op, name, trace.TypeFile); n != nil {
			n.modified = true
			n.size = max(n.size, op.Offset+op.Size)
		}
	case fold.Readdir:
		m.need(op, name, trace.TypeDir)
		l := m.listings[op.Handle]
		if l == nil {
			l = &listing{dir: name, plus: op.Rec == trace.OpReaddirplus, fromStart: op.Offset == 0}
			m.listings[op.Handle] = l
		}
		l.bytes += op.WantRet
		if op.WantRet == 0 {
			m.endListing(op.Handle)
		}
	}
}

// applyCreate applies mkdir, mknod, symlink and link: the name did not exist, its parent
// did; failed with EEXIST, the name existed.
func (m *model) applyCreate(op *replayOp) {
	name := op.Name
	if op.WantErrno == uint16(syscall.EEXIST) {
		m.need(op, name, trace.TypeUnknown)
		return
	}
	if op.WantErrno != 0 {
		return
	}
	var src *mnode
	if op.Kind == fold.Link {
		src = m.need(op, op.Name2, trace.TypeUnknown)
	}
	m.need(op, fold.Parent(name), trace.TypeDir)
	m.absent(op, name)
	m.touch(name, op.Start)
	n := &mnode{typ: trace.TypeDir, modified: true}
	switch op.Kind {
	case fold.Mknod:
		n.typ = trace.TypeOfMode(op.Mode)
	case fold.Symlink:
		n.typ = trace.TypeSymlink
	case fold.Link:
		n.typ = trace.TypeFile
		if src != nil {
			n.typ, n.size = src.typ, src.size
		}
	}
	m.add(name, n)
}

// applyRemove applies unlink, rmdir and rename: the name existed (or, failed with
// ENOENT, did not) and is gone or moved.
func (m *model) applyRemove(op *replayOp) {
	name := op.Name
	if op.WantErrno == uint16(syscall.ENOENT) {
		m.absent(op, name)
		return
	}
	if op.WantErrno != 0 {
		return
	}
	switch op.Kind {
	case fold.Unlink:
		m.need(op, name, trace.TypeUnknown)
		m.touch(name, op.Start)
		m.del(name)
	case fold.Rmdir:
		m.need(op, name, trace.TypeDir)
		if !m.derive && m.children[name] > 0 {
			m.problem(op, "directory is not empty at this point (%d entries)", m.children[name])
		}
		m.touch(name, op.Start)
		m.delTree(name)
	case fold.Rename:
		n := m.need(op, name, trace.TypeUnknown)
		m.need(op, fold.Parent(op.Name2), trace.TypeDir)
		m.touch(name, op.Start)
		m.touch(op.Name2, op.Start)
		if n != nil {
			m.move(name, op.Name2)
		}
	}
}

func (m *model) delTree(name string) {
	for k := range m.nodes {
		if k != "" && fold.IsUnder(k, name) {
			m.del(k)
		}
	}
}

func (m *model) move(from, to string) {
	type kv struct {
		k string
		n *mnode
	}
	var moved []kv
	for k, n := range m.nodes {
		if k != "" && fold.IsUnder(k, from) {
			moved = append(moved, kv{k, n})
		}
	}
	m.delTree(to)
	for _, e := range moved {
		m.del(e.k)
	}
	for _, e := range moved {
		nk := to + e.k[len(from):]
		m.touch(nk, 0)
		m.add(nk, e.n)
	}
}

// DeriveState reads the whole trace and returns the starting state it implies.
func DeriveState(src Source, po PlanOptions) (*State, error) {
	p := newPlanner(src, po)
	m := newModel(true)
	var ops uint64
	workers := map[uint32]struct{}{}
	for {
		op, err := p.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("replay: read trace: %w", err)
		}
		m.apply(op)
		ops++
		workers[op.Worker] = struct{}{}
	}
	rtt, rttN := p.rtt.estimate()
	// Objects the recording layer saw before the job changed them.
	for _, f := range src.Files() {
		name := src.PathName(f.Path)
		if name == "" || name[0] == '?' || CheckName(name) != nil {
			continue
		}
		if t, ok := m.touched[name]; ok && t <= f.Seen {
			continue // created by the job before the layer first saw it
		}
		e := m.initial[name]
		if e == nil {
			if m.need(&replayOp{Name: name}, fold.Parent(name), trace.TypeDir) == nil && fold.Parent(name) != "" {
				continue
			}
			e = &Entry{Name: name, Type: f.Type}
			m.initial[name] = e
		}
		if e.Type == trace.TypeUnknown {
			e.Type = f.Type
		}
		e.Mode = f.Mode & 0o7777
		if f.Type == trace.TypeFile && f.Size > e.Size {
			e.Size = f.Size
		}
	}
	known := make(map[string]bool, len(m.initial))
	for name := range m.initial {
		known[name] = true
	}
	m.estimateListings(known)
	st := &State{Ops: ops, Workers: len(workers), RoundTrip: rtt, RoundTripSamples: rttN}
	if fs, ok := src.(interface{ Footer() (*trace.Footer, bool) }); ok && recordedThroughFUSE(src.Header()) {
		if f, ok := fs.Footer(); ok {
			st.Measured = f.RoundTrip
		}
	}
	for _, e := range m.initial {
		if e.Name == "" {
			continue
		}
		if e.Type == trace.TypeUnknown {
			e.Type = trace.TypeFile
		}
		if e.Type == trace.TypeSymlink && e.Target == "" {
			e.Target = symlinkPlaceholder(28)
		}
		st.Entries = append(st.Entries, *e)
		switch e.Type {
		case trace.TypeDir:
			st.Dirs++
		case trace.TypeSymlink:
			st.Symlinks++
		default:
			st.Files++
			st.Bytes += e.Size
		}
	}
	sort.Slice(st.Entries, func(i, j int) bool {
		a, b := st.Entries[i].Name, st.Entries[j].Name
		da, db := strings.Count(a, "/"), strings.Count(b, "/")
		if da != db {
			return da < db
		}
		return a < b
	})
	return st, nil
}

// Check replays the trace on a model of the starting state (no I/O) and returns the ops
// whose recorded outcome cannot be reproduced from it, with the total count. Events the
// replay refuses (a path that leaves the root, or a path id without a record) count too,
// as one Problem each kind, Seq 0.
func Check(src Source, st *State, po PlanOptions) ([]Problem, int, error) {
	p := newPlanner(src, po)
	m := newModel(false)
	for i := range st.Entries {
		e := st.Entries[i]
		m.add(e.Name, &mnode{typ: e.Type, size: e.Size})
	}
	var clamped int
	for {
		op, err := p.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return m.problems, m.nprob, fmt.Errorf("replay: read trace: %w", err)
		}
		m.apply(op)
		if (op.Kind == fold.Read || op.Kind == fold.Write || op.Kind == fold.Copy) && op.Size > maxRW {
			clamped++
		}
	}
	n := m.nprob
	if clamped > 0 {
		m.problems = append([]Problem{{Op: "any", Count: clamped, What: fmt.Sprintf("%d reads, writes or copies ask for more bytes than one system call moves: the replay clamps them to %d", clamped, maxRW)}}, m.problems...)
		n += clamped
	}
	if e := p.Stats.Escapes; e > 0 {
		m.problems = append([]Problem{{Op: "any", Count: int(e), What: fmt.Sprintf("%d ops name a path that leaves the root (absolute, \"..\"): the replay refuses them", e)}}, m.problems...)
		n += int(e)
	}
	if u := p.Stats.Unknown; u > 0 {
		m.problems = append([]Problem{{Op: "any", Count: int(u), What: fmt.Sprintf("%d ops name a path the trace has no record of: the replay skips them", u)}}, m.problems...)
		n += int(u)
	}
	return m.problems, n, nil
}

// Prepare creates the starting state under b's root, which must be empty. Written data
// is zeros, or incompressible bytes with fillRandom. A backend that tells its free space
// (SpaceReporter) too small for the state gets a *NoSpaceError before anything is created.
func Prepare(ctx context.Context, b Backend, st *State, fillRandom bool) error {
	if err := checkSpace(ctx, b, st); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	if fillRandom {
		r := rand.New(rand.NewPCG(7, 11))
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
	}
	for _, e := range st.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		switch e.Type {
		case trace.TypeDir:
			err = b.Mkdir(ctx, e.Name, 0o755)
		case trace.TypeSymlink:
			err = b.Symlink(ctx, e.Target, e.Name)
		default:
			err = writeFile(ctx, b, e.Name, e.Size, e.Holes, buf)
		}
		if err != nil && Errno(err) != syscall.EEXIST {
			return fmt.Errorf("replay: prepare %q: %w", e.Name, err)
		}
	}
	// Permissions last, deepest first, so a read-only directory does not block its
	// children.
	for i := len(st.Entries) - 1; i >= 0; i-- {
		e := st.Entries[i]
		if e.Mode != 0 && e.Type != trace.TypeSymlink && e.Mode&0o7777 != 0o755 && e.Mode&0o7777 != 0o644 {
			if err := b.Chmod(ctx, e.Name, e.Mode); err != nil {
				return fmt.Errorf("replay: prepare %q: chmod: %w", e.Name, err)
			}
		}
	}
	return nil
}

// writeFile creates name with size bytes of buf's content, leaving holes unwritten (the
// file is sized first, so they stay sparse where the backend supports it).
func writeFile(ctx context.Context, b Backend, name string, size int64, holes []Hole, buf []byte) error {
	f, err := b.Open(ctx, name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if len(holes) > 0 {
		if err := f.Truncate(ctx, size); err != nil {
			_ = f.Close(ctx)
			return err
		}
	}
	for off := int64(0); off < size; {
		if h, ok := holeAt(holes, off, size); ok {
			off = h
			continue
		}
		n := min(int64(len(buf)), size-off, nextHole(holes, off, size)-off)
		if _, err := f.WriteAt(ctx, buf[:n], off); err != nil {
			_ = f.Close(ctx)
			return err
		}
		off += n
	}
	return f.Close(ctx)
}

// holeAt reports whether off lies in a hole, and where the hole ends.
func holeAt(holes []Hole, off, size int64) (int64, bool) {
	for _, h := range holes {
		end := h.End
		if end < 0 || end > size {
			end = size
		}
		if off >= h.Off && off < end {
			return end, true
		}
	}
	return 0, false
}

// nextHole returns where the first hole after off starts (size if none).
func nextHole(holes []Hole, off, size int64) int64 {
	next := size
	for _, h := range holes {
		if h.Off > off && h.Off < next {
			next = h.Off
		}
	}
	return next
}

// symlinkPlaceholder returns a dangling relative symlink target of n bytes.
func symlinkPlaceholder(n int) string {
	const p = "iotap-unknown-symlink-target"
	if n <= len(p) {
		return p[:n]
	}
	return p + strings.Repeat("-", n-len(p))
}

// FUSE dirent sizes: a fuse_dirent is 24 bytes plus the name, padded to 8; a
// fuse_direntplus adds a 128-byte fuse_entry_out.
func direntSize(nameLen int, plus bool) int64 {
	n := int64(24+nameLen+7) &^ 7
	if plus {
		n += 128
	}
	return n
}

// endListing records the first complete listing of each starting-state directory with
// the names known at that point; estimateListings turns it into placeholder entries.
func (m *model) endListing(h uint64) {
	l := m.listings[h]
	if l == nil {
		return
	}
	delete(m.listings, h)
	if !m.derive || !l.fromStart || m.listed[l.dir] {
		return
	}
	m.listed[l.dir] = true
	d := m.nodes[l.dir]
	if d == nil || (d.entry == nil && l.dir != "") {
		return // made by the trace: its entries are all known
	}
	pl := pendingList{listing: *l, names: map[string]bool{}}
	for k := range m.nodes {
		if k != "" && fold.Parent(k) == l.dir {
			_, base := fold.SplitName(k)
			pl.names[base] = true
		}
	}
	m.pending = append(m.pending, pl)
}

// pendingList is a complete listing of a starting-state directory and the names the trace
// had shown in it by then.
type pendingList struct {
	listing
	names map[string]bool
}

// estimateListings adds, for each recorded full listing of a starting-state directory,
// placeholder files for the entries the trace never names ("iotap-fill-NNNN" or "~NNN",
// as long as the names it knows, 16 bytes if none), so that a replayed listing returns
// about as many entries. Names known from File records count as known.
func (m *model) estimateListings(known map[string]bool) {
	for _, pl := range m.pending {
		for name := range known {
			if fold.Parent(name) == pl.dir {
				_, base := fold.SplitName(name)
				pl.names[base] = true
			}
		}
		known := direntSize(1, pl.plus) + direntSize(2, pl.plus) // "." and ".."
		nameLen := 0
		for base := range pl.names {
			known += direntSize(len(base), pl.plus)
			nameLen += len(base)
		}
		L := 16
		if len(pl.names) > 0 {
			L = max(nameLen/len(pl.names), 2)
		}
		pfx := "~"
		if L >= len("iotap-fill-")+4 {
			pfx = "iotap-fill-"
		}
		missing := (pl.bytes - known) / direntSize(L, pl.plus)
		for i := int64(0); i < missing && i < 1<<20; i++ {
			name := fmt.Sprintf("%s%0*d", pfx, L-len(pfx), i)
			if pl.dir != "" {
				name = pl.dir + "/" + name
			}
			if _, ok := m.initial[name]; ok {
				continue
			}
			m.initial[name] = &Entry{Name: name, Type: trace.TypeFile}
		}
	}
}
