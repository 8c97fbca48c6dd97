package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Payload encoding primitives (doc.go, "Payload primitives"): uvarint is
// binary.AppendUvarint, varint is zigzag (binary.AppendVarint), a string is a uvarint
// length followed by that many bytes.

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// dec reads payload primitives from a byte slice. The first error sticks: later reads
// return zero values, so decoding functions check err once at the end.
type dec struct {
	b   []byte
	err error
}

var errShort = errors.New("payload ends early")

func (d *dec) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *dec) uvarint() uint64 {
	if len(d.b) > 0 && d.b[0] < 0x80 {
		v := uint64(d.b[0])
		d.b = d.b[1:]
		return v
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		if n == 0 {
			d.fail(errShort)
		} else {
			d.fail(errors.New("varint overflows 64 bits"))
		}
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *dec) u32() uint32 {
	v := d.uvarint()
	if v > 1<<32-1 {
		d.fail(fmt.Errorf("value %d overflows 32 bits", v))
		return 0
	}
	return uint32(v)
}

func (d *dec) byte1() byte {
	if len(d.b) == 0 {
		d.fail(errShort)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) str() string { return d.strMax(1<<63 - 1) }

// strMax reads a string of at most limit bytes: a longer one fails before it is copied.
func (d *dec) strMax(limit uint64) string {
	n := d.uvarint()
	if n > limit {
		d.fail(fmt.Errorf("string of %d bytes exceeds the limit of %d", n, limit))
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail(fmt.Errorf("string length %d exceeds the %d bytes left", n, len(d.b)))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// count reads an element count and checks that at least min bytes per element remain, so
// a corrupt count never makes a reader allocate more than the payload justifies.
func (d *dec) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail(fmt.Errorf("count %d exceeds what %d bytes can hold", n, len(d.b)))
		return 0
	}
	return int(n)
}

func appendTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return binary.AppendVarint(dst, 0)
	}
	return binary.AppendVarint(dst, t.UnixNano())
}

func (d *dec) time() time.Time {
	ns := d.varint()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// Header payload.

const (
	fuseDirectIO    = 1 << 0
	fusePassthrough = 1 << 1
	fuseWriteback   = 1 << 2
)

func appendHeader(dst []byte, h *Header) []byte {
	dst = appendString(dst, h.Kind)
	dst = appendTime(dst, h.WallStart)
	dst = binary.AppendVarint(dst, h.Origin)
	dst = appendString(dst, h.Hostname)
	dst = appendString(dst, h.IotapVersion)
	dst = appendString(dst, h.Kernel)
	dst = appendString(dst, h.Target.Path)
	dst = appendString(dst, h.Target.FSType)
	dst = appendString(dst, h.Target.Source)
	dst = appendString(dst, h.Target.Mount)
	dst = appendString(dst, h.FUSE.Cache)
	dst = binary.AppendUvarint(dst, uint64(h.FUSE.MaxRead))
	dst = binary.AppendUvarint(dst, uint64(h.FUSE.MaxWrite))
	dst = binary.AppendVarint(dst, int64(h.FUSE.EntryTimeout))
	dst = binary.AppendVarint(dst, int64(h.FUSE.AttrTimeout))
	var fl byte
	if h.FUSE.DirectIO {
		fl |= fuseDirectIO
	}
	if h.FUSE.Passthrough {
		fl |= fusePassthrough
	}
	if h.FUSE.Writeback {
		fl |= fuseWriteback
	}
	dst = append(dst, fl)
	dst = binary.AppendUvarint(dst, uint64(len(h.Command)))
	for _, a := range h.Command {
		dst = appendString(dst, a)
	}
	dst = binary.AppendUvarint(dst, uint64(len(h.Labels)))
	for _, l := range h.Labels {
		dst = appendString(dst, l.Key)
		dst = appendString(dst, l.Value)
	}
	dst = appendString(dst, h.Legs)
	dst = appendString(dst, h.LegsNote)
	dst = appendString(dst, h.Data)
	dst = appendString(dst, h.DataNote)
	return dst
}

func decodeHeader(b []byte, h *Header) error {
	d := dec{b: b}
	h.Kind = d.str()
	h.WallStart = d.time()
	h.Origin = d.varint()
	h.Hostname = d.str()
	h.IotapVersion = d.str()
	h.Kernel = d.str()
	h.Target.Path = d.str()
	h.Target.FSType = d.str()
	h.Target.Source = d.str()
	h.Target.Mount = d.str()
	h.FUSE.Cache = d.str()
	h.FUSE.MaxRead = d.u32()
	h.FUSE.MaxWrite = d.u32()
	h.FUSE.EntryTimeout = time.Duration(d.varint())
	h.FUSE.AttrTimeout = time.Duration(d.varint())
	fl := d.byte1()
	h.FUSE.DirectIO = fl&fuseDirectIO != 0
	h.FUSE.Passthrough = fl&fusePassthrough != 0
	h.FUSE.Writeback = fl&fuseWriteback != 0
	if n := d.count(1); n > 0 {
		h.Command = make([]string, n)
		for i := range h.Command {
			h.Command[i] = d.str()
		}
	}
	if n := d.count(2); n > 0 {
		h.Labels = make([]Label, n)
		for i := range h.Labels {
			h.Labels[i] = Label{Key: d.str(), Value: d.str()}
		}
	}
	if len(d.b) > 0 { // version 4
		h.Legs = d.strMax(MaxName)
		h.LegsNote = d.strMax(MaxName)
	}
	if len(d.b) > 0 { // version 5
		h.Data = d.strMax(MaxName)
		h.DataNote = d.strMax(MaxName)
	}
	// Trailing bytes are fields added by later writers of the same version: ignored.
	return d.err
}

// Footer payload.

func appendFooter(dst []byte, f *Footer) []byte {
	dst = binary.AppendUvarint(dst, f.Events)
	dst = binary.AppendUvarint(dst, f.Dropped)
	dst = binary.AppendVarint(dst, int64(f.Blocked))
	dst = binary.AppendUvarint(dst, f.Chunks)
	dst = binary.AppendVarint(dst, f.End)
	dst = binary.AppendUvarint(dst, f.Errors)
	dst = appendTime(dst, f.WallClose)
	dst = binary.AppendUvarint(dst, uint64(len(f.OpCounts)))
	for _, c := range f.OpCounts {
		dst = binary.AppendUvarint(dst, c)
	}
	dst = binary.AppendVarint(dst, int64(f.EncodeCPU))
	dst = binary.AppendUvarint(dst, f.Layer.Requests)
	dst = binary.AppendVarint(dst, int64(f.Layer.InLayer))
	dst = binary.AppendVarint(dst, int64(f.Layer.Self))
	dst = binary.AppendUvarint(dst, f.Layer.Threads)
	dst = binary.AppendVarint(dst, int64(f.Layer.Resolve))
	rt := f.RoundTrip != RoundTrip{}
	pt := f.Passthrough != PassthroughStats{}
	pred := f.Prediction != Prediction{} || pt
	legs := f.Legs != LegStats{} || pred
	attr := f.Layer.Connector || f.Layer.Late != 0 || f.Layer.Missing != 0 || legs
	if f.Lost != 0 || f.WriteError != "" || rt || attr {
		dst = binary.AppendUvarint(dst, f.Lost)
		dst = appendString(dst, f.WriteError)
	}
	if rt || attr {
		dst = binary.AppendVarint(dst, int64(f.RoundTrip.Start))
		dst = binary.AppendVarint(dst, int64(f.RoundTrip.Run))
		dst = binary.AppendUvarint(dst, f.RoundTrip.Samples)
	}
	if attr {
		var flags uint64
		if f.Layer.Connector {
			flags |= 1
		}
		dst = binary.AppendUvarint(dst, flags)
		dst = binary.AppendUvarint(dst, f.Layer.Late)
		dst = binary.AppendUvarint(dst, f.Layer.Missing)
	}
	if legs {
		dst = binary.AppendUvarint(dst, f.Legs.Filled)
		dst = binary.AppendUvarint(dst, f.Legs.Missing)
		dst = binary.AppendUvarint(dst, f.Legs.Lost)
	}
	if pred {
		p := &f.Prediction
		for _, v := range [...]int64{p.Runtime, p.RuntimeLow, p.RuntimeHigh, p.IO, p.IOLow, p.IOHigh, p.Native, p.Anchored, p.AnchoredLow, p.AnchoredHigh} {
			dst = binary.AppendVarint(dst, v)
		}
	}
	if pt {
		p := &f.Passthrough
		for _, v := range [...]uint64{p.Opens, p.LayerOpens, p.Calls, p.Async, p.Unseen, p.Lost} {
			dst = binary.AppendUvarint(dst, v)
		}
		dst = appendString(dst, p.Refused)
		if p.Maps != 0 || p.Faults != 0 || p.MapsFull != 0 {
			for _, v := range [...]uint64{p.Maps, p.Faults, p.MapsFull} {
				dst = binary.AppendUvarint(dst, v)
			}
		}
	}
	return dst
}

func decodeFooter(b []byte, f *Footer) error {
	d := dec{b: b}
	f.Events = d.uvarint()
	f.Dropped = d.uvarint()
	f.Blocked = time.Duration(d.varint())
	f.Chunks = d.uvarint()
	f.End = d.varint()
	f.Errors = d.uvarint()
	f.WallClose = d.time()
	n := d.count(1)
	f.OpCounts = make([]uint64, n)
	for i := range f.OpCounts {
		f.OpCounts[i] = d.uvarint()
	}
	if len(d.b) > 0 { // the cost fields, absent from older footers
		f.EncodeCPU = time.Duration(d.varint())
		f.Layer.Requests = d.uvarint()
		f.Layer.InLayer = time.Duration(d.varint())
		f.Layer.Self = time.Duration(d.varint())
		f.Layer.Threads = d.uvarint()
		f.Layer.Resolve = time.Duration(d.varint())
	}
	if len(d.b) > 0 { // a failed write, absent from older footers and clean traces
		f.Lost = d.uvarint()
		f.WriteError = d.str()
	}
	if len(d.b) > 0 { // the measured round trip, absent from older footers
		f.RoundTrip.Start = time.Duration(d.varint())
		f.RoundTrip.Run = time.Duration(d.varint())
		f.RoundTrip.Samples = d.uvarint()
	}
	if len(d.b) > 0 { // how threads were attributed, absent from older footers
		f.Layer.Connector = d.uvarint()&1 != 0
		f.Layer.Late = d.uvarint()
		f.Layer.Missing = d.uvarint()
	}
	if len(d.b) > 0 { // how the kernel's legs were matched, absent from older footers
		f.Legs.Filled = d.uvarint()
		f.Legs.Missing = d.uvarint()
		f.Legs.Lost = d.uvarint()
	}
	if len(d.b) > 0 { // a replay's prediction, absent from recordings and older footers
		p := &f.Prediction
		for _, v := range [...]*int64{&p.Runtime, &p.RuntimeLow, &p.RuntimeHigh, &p.IO, &p.IOLow, &p.IOHigh, &p.Native, &p.Anchored, &p.AnchoredLow, &p.AnchoredHigh} {
			*v = d.varint()
		}
	}
	if len(d.b) > 0 { // kernel passthrough, absent from traces that did not use it
		p := &f.Passthrough
		for _, v := range [...]*uint64{&p.Opens, &p.LayerOpens, &p.Calls, &p.Async, &p.Unseen, &p.Lost} {
			*v = d.uvarint()
		}
		p.Refused = d.strMax(MaxName)
		if len(d.b) > 0 { // mapped files, absent when none was followed
			for _, v := range [...]*uint64{&p.Maps, &p.Faults, &p.MapsFull} {
				*v = d.uvarint()
			}
		}
	}
	return d.err
}

// Side tables.

func appendPaths(dst []byte, recs []PathRecord) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	for _, r := range recs {
		dst = binary.AppendUvarint(dst, uint64(r.ID))
		dst = binary.AppendUvarint(dst, uint64(r.Parent))
		dst = appendString(dst, r.Name)
	}
	return dst
}

// decodePaths calls fn for each record of a paths payload, and stops at the first error,
// its own or fn's. Names longer than MaxName are errors.
func decodePaths(b []byte, fn func(PathRecord) error) error {
	d := dec{b: b}
	n := d.count(3)
	for i := 0; i < n && d.err == nil; i++ {
		r := PathRecord{ID: d.u32(), Parent: d.u32(), Name: d.strMax(MaxName)}
		if d.err == nil {
			if r.ID == 0 {
				return errors.New("path record with id 0")
			}
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return d.err
}

func appendProcesses(dst []byte, ps []Process) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ps)))
	for _, p := range ps {
		dst = binary.AppendUvarint(dst, uint64(p.Tid))
		dst = binary.AppendUvarint(dst, uint64(p.Pid))
		dst = binary.AppendUvarint(dst, uint64(p.PPid))
		dst = binary.AppendVarint(dst, p.FirstSeen)
		dst = appendString(dst, p.Comm)
		dst = appendString(dst, p.Exe)
	}
	// The command lines follow the records, where a reader that does not know them stops.
	for _, p := range ps {
		args := CutCmdline(p.Cmdline)
		dst = binary.AppendUvarint(dst, uint64(len(args)))
		for _, a := range args {
			dst = appendString(dst, a)
		}
	}
	return dst
}

// CutCmdline returns the arguments of a command line that fit in MaxCmdline bytes: args
// itself when they all do, else the first ones, the last of them cut short.
func CutCmdline(args []string) []string {
	n := 0
	for i, a := range args {
		if n+len(a) > MaxCmdline {
			out := append([]string(nil), args[:i]...)
			return append(out, a[:MaxCmdline-n])
		}
		n += len(a)
	}
	return args
}

// decodeProcesses calls fn for each record of a processes payload, and stops at the first
// error, its own or fn's. Strings longer than MaxName are errors, and so are command lines
// longer than MaxCmdline.
func decodeProcesses(b []byte, fn func(Process) error) error {
	d := dec{b: b}
	n := d.count(6)
	ps := make([]Process, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		p := Process{Tid: d.u32(), Pid: d.u32(), PPid: d.u32(), FirstSeen: d.varint(), Comm: d.strMax(MaxName), Exe: d.strMax(MaxName)}
		if d.err == nil {
			ps = append(ps, p)
		}
	}
	if d.err == nil && len(d.b) > 0 { // command lines, absent from older writers
		for i := range ps {
			ps[i].Cmdline = d.cmdline()
			if d.err != nil {
				ps = ps[:i]
				break
			}
		}
	}
	for _, p := range ps {
		if err := fn(p); err != nil {
			return err
		}
	}
	return d.err
}

// cmdline reads a command line: a count of arguments, then the arguments, at most
// MaxCmdline bytes in all.
func (d *dec) cmdline() []string {
	n := d.count(1)
	if n == 0 || d.err != nil {
		return nil
	}
	args := make([]string, 0, n)
	left := uint64(MaxCmdline)
	for range n {
		a := d.strMax(left)
		if d.err != nil {
			return nil
		}
		left -= uint64(len(a))
		args = append(args, a)
	}
	return args
}

func appendFiles(dst []byte, fs []File) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(fs)))
	for _, f := range fs {
		dst = binary.AppendUvarint(dst, uint64(f.Path))
		dst = append(dst, byte(f.Type))
		dst = binary.AppendUvarint(dst, uint64(f.Mode))
		dst = binary.AppendVarint(dst, f.Size)
		dst = binary.AppendVarint(dst, f.Seen)
		dst = binary.AppendUvarint(dst, uint64(f.Nlink))
	}
	return dst
}

// decodeFiles calls fn for each record of a files payload, and stops at the first error,
// its own or fn's.
func decodeFiles(b []byte, fn func(File) error) error {
	d := dec{b: b}
	n := d.count(6)
	for i := 0; i < n && d.err == nil; i++ {
		f := File{Path: d.u32(), Type: FileType(d.byte1()), Mode: d.u32(), Size: d.varint(), Seen: d.varint(), Nlink: d.u32()}
		if d.err == nil {
			if err := fn(f); err != nil {
				return err
			}
		}
	}
	return d.err
}

// Events: columnar encoding, see doc.go "Events chunk".

// eventColumns returns the number of columns in an events chunk of the given format
// version; every event takes at least one byte in each.
func eventColumns(version uint16) int {
	switch {
	case version >= Version4:
		return numColumns // the kernel's view after Offset2
	case version >= Version2:
		return 20 // Offset2 after Gid
	}
	return 19
}

// offsetPredictor guesses an event's Offset from the previous event with the same handle
// (its Offset+Ret: where a sequential reader or writer continues). It is a direct-mapped
// cache of predSlots entries reset at every chunk, so encoder and decoder agree exactly.
const predSlots = 64

type offsetPredictor struct {
	handle [predSlots]uint64
	next   [predSlots]int64
}

func (p *offsetPredictor) reset() { *p = offsetPredictor{} }

func (p *offsetPredictor) predict(h uint64) int64 {
	if h == 0 {
		return 0
	}
	i := h % predSlots
	if p.handle[i] == h {
		return p.next[i]
	}
	return 0
}

func (p *offsetPredictor) update(h uint64, off, ret int64) {
	if h == 0 {
		return
	}
	i := h % predSlots
	p.handle[i] = h
	p.next[i] = off + ret
}

// appendEvents appends an events payload of the given format version. A version-1 payload
// has no Offset2 column: the events' Offset2 values are not written.
func appendEvents(dst []byte, version uint16, evs []Event, pred *offsetPredictor) []byte {
	c := columnEncoder{version: version, pred: pred}
	c.reset()
	c.add(evs)
	return c.payload(dst)
}

// numColumns is the number of columns of a version-4 events payload.
const numColumns = 30

// Bits of the legs column (version 4).
const (
	legsQueued = 1 << 0 // Queued and Done
	legsCall   = 1 << 1 // CallStart and CallNr
	legsReturn = 1 << 2 // CallEnd
	legsDelay  = 1 << 3 // RunDelay
	legsWoken  = 1 << 4 // WokenAt and Waker
	legsKernel = 1 << 5 // Passthrough (version 5)
)

// legBits returns the legs column's value for e.
func legBits(e *Event) uint64 {
	var b uint64
	if e.Queued != 0 && e.Done != 0 {
		b |= legsQueued
		if e.CallStart != 0 {
			b |= legsCall
		}
		if e.CallEnd != 0 {
			b |= legsReturn
		}
		if e.CallStart != 0 && e.RunDelay > 0 {
			b |= legsDelay
		}
		if e.CallStart != 0 && e.WokenAt != 0 {
			b |= legsWoken
		}
		if e.Passthrough {
			b |= legsKernel
		}
	}
	return b
}

// columnEncoder builds one events payload from blocks of events: each block's values are
// appended to their column's buffer, and payload joins the columns. The trace writer feeds
// it each batch as it comes, in blocks that stay in the CPU's first-level cache for the
// twenty passes. Staging a whole chunk instead (1.8 MB for 16384 events) and passing over
// that twenty times would stream the stage through the caches the FUSE requests need.
type columnEncoder struct {
	version uint16
	n       int    // events added since reset
	prev    int64  // the last event's Start
	prevU   uint64 // the last event's Unique
	pred    *offsetPredictor
	cols    [numColumns][]byte
}

// reset starts a new payload.
func (c *columnEncoder) reset() {
	c.n, c.prev, c.prevU = 0, 0, 0
	c.pred.reset()
	for i := range c.cols {
		c.cols[i] = c.cols[i][:0]
	}
}

// add appends evs to the payload.
func (c *columnEncoder) add(evs []Event) {
	c.n += len(evs)
	col := &c.cols
	for i := range evs {
		col[0] = append(col[0], byte(evs[i].Op))
	}
	prev := c.prev
	for i := range evs {
		col[1] = binary.AppendVarint(col[1], evs[i].Start-prev)
		prev = evs[i].Start
	}
	c.prev = prev
	for i := range evs {
		col[2] = binary.AppendVarint(col[2], evs[i].Dur)
	}
	for i := range evs {
		col[3] = binary.AppendUvarint(col[3], uint64(evs[i].Errno))
	}
	for i := range evs {
		col[4] = binary.AppendUvarint(col[4], uint64(evs[i].Path))
	}
	for i := range evs {
		col[5] = binary.AppendUvarint(col[5], uint64(evs[i].Path2))
	}
	for i := range evs {
		col[6] = binary.AppendUvarint(col[6], evs[i].Node)
	}
	for i := range evs {
		col[7] = binary.AppendUvarint(col[7], evs[i].Node2)
	}
	for i := range evs {
		col[8] = binary.AppendUvarint(col[8], evs[i].Handle)
	}
	for i := range evs {
		col[9] = binary.AppendUvarint(col[9], evs[i].Handle2)
	}
	for i := range evs {
		e := &evs[i]
		col[10] = binary.AppendVarint(col[10], e.Offset-c.pred.predict(e.Handle))
		c.pred.update(e.Handle, e.Offset, e.Ret)
	}
	for i := range evs {
		col[11] = binary.AppendUvarint(col[11], uint64(evs[i].Size))
	}
	for i := range evs {
		col[12] = binary.AppendVarint(col[12], evs[i].Ret-int64(evs[i].Size))
	}
	for i := range evs {
		col[13] = binary.AppendUvarint(col[13], uint64(evs[i].Flags))
	}
	for i := range evs {
		col[14] = binary.AppendUvarint(col[14], uint64(evs[i].Mode))
	}
	for i := range evs {
		col[15] = binary.AppendUvarint(col[15], uint64(evs[i].Tid))
	}
	for i := range evs {
		col[16] = binary.AppendUvarint(col[16], uint64(evs[i].Pid))
	}
	for i := range evs {
		col[17] = binary.AppendUvarint(col[17], uint64(evs[i].Uid))
	}
	for i := range evs {
		col[18] = binary.AppendUvarint(col[18], uint64(evs[i].Gid))
	}
	if c.version >= Version2 {
		for i := range evs {
			col[19] = binary.AppendVarint(col[19], evs[i].Offset2)
		}
	}
	if c.version >= Version4 {
		c.addLegs(evs)
	}
}

// addLegs appends the version-4 columns: Unique as a difference to the previous event's,
// then the legs bits and the kernel's times, each as a difference to a time the event
// already holds (0 where the bits say it was not measured).
func (c *columnEncoder) addLegs(evs []Event) {
	col := &c.cols
	prevU := c.prevU
	for i := range evs {
		col[20] = binary.AppendVarint(col[20], int64(evs[i].Unique-prevU))
		prevU = evs[i].Unique
	}
	c.prevU = prevU
	for i := range evs {
		e := &evs[i]
		bits := legBits(e)
		col[21] = binary.AppendUvarint(col[21], bits)
		var q, d, cs, ce int64
		if bits&legsQueued != 0 {
			q, d = e.Start-e.Queued, e.Done-e.End()
		}
		if bits&legsCall != 0 {
			cs = e.Queued - e.CallStart
		}
		if bits&legsReturn != 0 {
			ce = e.CallEnd - e.Done
		}
		col[22] = binary.AppendVarint(col[22], q)
		col[23] = binary.AppendVarint(col[23], d)
		col[24] = binary.AppendVarint(col[24], cs)
		col[25] = binary.AppendVarint(col[25], ce)
		var nr uint64
		if bits&legsCall != 0 {
			nr = uint64(e.CallNr)
		}
		col[26] = binary.AppendUvarint(col[26], nr)
		var rd uint64
		if bits&legsDelay != 0 {
			rd = uint64(e.RunDelay - 1)
		}
		col[27] = binary.AppendUvarint(col[27], rd)
		var woken int64
		var waker uint64
		if bits&legsWoken != 0 {
			woken, waker = e.CallStart-e.WokenAt, uint64(e.Waker)
		}
		col[28] = binary.AppendVarint(col[28], woken)
		col[29] = binary.AppendUvarint(col[29], waker)
	}
}

// payload appends the payload of the events added since reset.
func (c *columnEncoder) payload(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(c.n))
	for i := range c.cols {
		dst = append(dst, c.cols[i]...)
	}
	return dst
}

// uvarints decodes len(out) uvarints from b into out and returns the rest of b.
func uvarints(b []byte, out []uint64) ([]byte, error) {
	for i := range out {
		// Fast paths for the common 1-, 2- and 3-byte values.
		if len(b) >= 3 {
			b0, b1, b2 := b[0], b[1], b[2]
			switch {
			case b0 < 0x80:
				out[i] = uint64(b0)
				b = b[1:]
				continue
			case b1 < 0x80:
				out[i] = uint64(b0&0x7f) | uint64(b1)<<7
				b = b[2:]
				continue
			case b2 < 0x80:
				out[i] = uint64(b0&0x7f) | uint64(b1&0x7f)<<7 | uint64(b2)<<14
				b = b[3:]
				continue
			}
		}
		v, n := binary.Uvarint(b)
		if n <= 0 {
			if n == 0 {
				return nil, errShort
			}
			return nil, errors.New("varint overflows 64 bits")
		}
		out[i] = v
		b = b[n:]
	}
	return b, nil
}

// skipColumn skips a column of len(c) uvarints whose values are not needed: at once when
// they are all 0 (a byte each), else by decoding them into c, which fails as uvarints does.
func skipColumn(b []byte, c []uint64) ([]byte, error) {
	n := len(c)
	if len(b) >= n {
		var or uint64
		i := 0
		for ; i+8 <= n; i += 8 {
			or |= binary.LittleEndian.Uint64(b[i:])
		}
		for ; i < n; i++ {
			or |= uint64(b[i])
		}
		if or == 0 {
			return b[n:], nil
		}
	}
	return uvarints(b, c)
}

func unzig(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// decodeLegs decodes the version-4 columns into evs (whose Start and Dur are set), with c
// as scratch space, and returns the rest of b.
func decodeLegs(b []byte, version uint16, evs []Event, c []uint64) ([]byte, error) {
	var err error
	if b, err = uvarints(b, c); err != nil {
		return nil, err
	}
	var prevU uint64
	for i, v := range c {
		prevU += uint64(unzig(v))
		evs[i].Unique = prevU
	}
	if b, err = uvarints(b, c); err != nil {
		return nil, err
	}
	known := uint64(legsQueued | legsCall | legsReturn | legsDelay | legsWoken)
	if version >= Version5 {
		known |= legsKernel
	}
	var anyBits uint64
	for i, v := range c {
		if v&^known != 0 || v&(legsCall|legsReturn|legsKernel) != 0 && v&legsQueued == 0 ||
			v&(legsDelay|legsWoken) != 0 && v&legsCall == 0 {
			return nil, fmt.Errorf("event %d: legs bits %#x", i, v)
		}
		// Keep the bits in CallNr until the times are read.
		evs[i].CallNr = uint16(v)
		anyBits |= v
	}
	if anyBits == 0 {
		// No event of the chunk has a leg (a trace recorded without the kernel's view):
		// the eight columns left hold nothing the events take, and their fields stay 0.
		for range 8 {
			if b, err = skipColumn(b, c); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	for k := range 4 {
		if b, err = uvarints(b, c); err != nil {
			return nil, err
		}
		for i, v := range c {
			e := &evs[i]
			bits := e.CallNr
			d := unzig(v)
			switch {
			case k == 0 && bits&legsQueued != 0:
				e.Queued = e.Start - d
			case k == 1 && bits&legsQueued != 0:
				e.Done = e.End() + d
			case k == 2 && bits&legsCall != 0:
				e.CallStart = e.Queued - d
			case k == 3 && bits&legsReturn != 0:
				e.CallEnd = e.Done + d
			}
		}
	}
	// The call numbers (kept in RunDelay until the bits in CallNr are no longer needed),
	// then the run delays.
	if b, err = uvarints(b, c); err != nil {
		return nil, err
	}
	for i, v := range c {
		if evs[i].CallNr&legsCall == 0 {
			continue
		}
		if v > 1<<16-1 {
			return nil, fmt.Errorf("event %d: system call number %d overflows 16 bits", i, v)
		}
		evs[i].RunDelay = int64(v)
	}
	if b, err = uvarints(b, c); err != nil {
		return nil, err
	}
	for i, v := range c {
		e := &evs[i]
		bits, nr := e.CallNr, e.RunDelay
		// Keep the bits in CallNr for the wake-up columns, the number in Waker.
		e.RunDelay, e.Waker = 0, uint32(nr)
		if bits&legsDelay != 0 {
			if v >= 1<<62 {
				return nil, fmt.Errorf("event %d: run delay %d ns", i, v)
			}
			e.RunDelay = int64(v) + 1
		}
	}
	if b, err = uvarints(b, c); err != nil {
		return nil, err
	}
	for i, v := range c {
		if e := &evs[i]; e.CallNr&legsWoken != 0 {
			e.WokenAt = e.CallStart - unzig(v)
		}
	}
	if b, err = uvarints(b, c); err != nil {
		return nil, err
	}
	for i, v := range c {
		e := &evs[i]
		bits, nr := e.CallNr, e.Waker
		e.CallNr, e.Waker = 0, 0
		e.Passthrough = bits&legsKernel != 0
		if bits&legsCall != 0 {
			e.CallNr = uint16(nr)
		}
		if bits&legsWoken != 0 {
			if v > 1<<32-1 {
				return nil, fmt.Errorf("event %d: waker %d overflows 32 bits", i, v)
			}
			e.Waker = uint32(v)
		}
		if err := legsInOrder(e, bits); err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
	}
	return b, nil
}

// legSkew is how far one of the kernel's times may lie on the wrong side of the layer's
// (the clocks agree within microseconds: see Now) or of another of the kernel's; more is
// damage.
const legSkew = int64(time.Millisecond)

// legsInOrder checks that the kernel's times of e (bits: those measured) come in the order
// they happen, after the trace's origin: the system call enters, the request is queued,
// the layer serves it (Start..End), the kernel completes it; the call returns after it
// entered. A replay waits for the time between them: times out of order (a call that
// enters years after its request was queued) are damage, not a think time. (A wake-up
// recorded after the call's entry is not: the recorder can see a later one, and replay
// uses a wake-up only when it comes before.)
func legsInOrder(e *Event, bits uint16) error {
	if bits&legsQueued != 0 {
		switch {
		case e.Queued < 1 || e.Done < e.Queued:
			return fmt.Errorf("the kernel queued the request at %d ns and completed it at %d ns", e.Queued, e.Done)
		case e.Queued-legSkew > e.Start || e.Done+legSkew < e.End() && !endsUnanswered(e.Op):
			return fmt.Errorf("the kernel's request %d (%s, %d..%d ns) does not hold the layer's (%d..%d ns)", e.Unique, e.Op, e.Queued, e.Done, e.Start, e.End())
		}
	}
	if bits&legsCall != 0 && (e.CallStart < 1 || e.CallStart-legSkew > e.Queued) {
		return fmt.Errorf("its system call entered at %d ns, after its request was queued at %d ns", e.CallStart, e.Queued)
	}
	if bits&legsReturn != 0 && (e.CallEnd < 1 || bits&legsCall != 0 && e.CallEnd < e.CallStart) {
		return fmt.Errorf("its system call returned at %d ns, before it entered at %d ns", e.CallEnd, e.CallStart)
	}
	return nil
}

// endsUnanswered reports whether the kernel may complete a request of op as the server reads
// it, without waiting for the server's answer: a release (the file is gone for the
// application already) may end before the layer is done with it.
func endsUnanswered(op Op) bool { return op == OpRelease || op == OpReleasedir }

// decodeEvents decodes an events payload of the given format version into evs (reusing
// its storage) and returns it. col is scratch space for one column, reused across calls.
// Version-1 payloads have no Offset2 column: Offset2 is 0.
//
// It reads the columns in the order of the format (doc.go, "Events payload"), each
// with a loop of plain stores into one field: reading every trace goes through it
// (BenchmarkDecode), and a field chosen per column through a callback or an index would
// cost a call or a switch per value. Its length is the number of columns.
func decodeEvents(b []byte, version uint16, evs []Event, col *[]uint64, pred *offsetPredictor) ([]Event, error) {
	d := dec{b: b}
	n := d.count(eventColumns(version))
	if d.err != nil {
		return evs[:0], d.err
	}
	if n > MaxChunkEvents {
		return evs[:0], fmt.Errorf("%d events exceed the limit of %d per chunk", n, MaxChunkEvents)
	}
	if cap(evs) < n {
		evs = make([]Event, n)
	}
	evs = evs[:n]
	if cap(*col) < n {
		*col = make([]uint64, n)
	}
	c := (*col)[:n]
	b = d.b
	for i := range evs {
		op := Op(b[i])
		if !op.Valid() {
			return evs[:0], fmt.Errorf("event %d: op %d is not an operation", i, op)
		}
		evs[i] = Event{Op: op}
	}
	b = b[n:]
	var err error
	// column decodes the next column into c.
	column := func() bool {
		b, err = uvarints(b, c)
		return err == nil
	}
	// check32 fails if any value in c overflows 32 bits.
	check32 := func(what string) bool {
		var or uint64
		for _, v := range c {
			or |= v
		}
		if or>>32 != 0 {
			err = fmt.Errorf("%s overflows 32 bits", what)
			return false
		}
		return true
	}
	fail := func() ([]Event, error) { return evs[:0], err }

	if !column() {
		return fail()
	}
	var prev int64
	for i, v := range c {
		prev += unzig(v)
		evs[i].Start = prev
	}
	if !column() {
		return fail()
	}
	for i, v := range c {
		evs[i].Dur = unzig(v)
		if evs[i].Dur < 0 {
			return evs[:0], fmt.Errorf("event %d: negative duration %d ns", i, evs[i].Dur)
		}
	}
	if !column() {
		return fail()
	}
	for i, v := range c {
		if v > 1<<16-1 {
			return evs[:0], fmt.Errorf("errno %d overflows 16 bits", v)
		}
		evs[i].Errno = uint16(v)
	}
	if !column() || !check32("path") {
		return fail()
	}
	for i, v := range c {
		evs[i].Path = uint32(v)
	}
	if !column() || !check32("path2") {
		return fail()
	}
	for i, v := range c {
		evs[i].Path2 = uint32(v)
	}
	if !column() {
		return fail()
	}
	for i, v := range c {
		evs[i].Node = v
	}
	if !column() {
		return fail()
	}
	for i, v := range c {
		evs[i].Node2 = v
	}
	if !column() {
		return fail()
	}
	for i, v := range c {
		evs[i].Handle = v
	}
	if !column() {
		return fail()
	}
	for i, v := range c {
		evs[i].Handle2 = v
	}
	// Offset is predicted from Ret, which comes later: keep the raw column aside in the
	// Offset fields and resolve it after Ret.
	if !column() {
		return fail()
	}
	for i, v := range c {
		evs[i].Offset = int64(v)
	}
	if !column() || !check32("size") {
		return fail()
	}
	for i, v := range c {
		evs[i].Size = uint32(v)
	}
	if !column() {
		return fail()
	}
	for i, v := range c {
		evs[i].Ret = unzig(v) + int64(evs[i].Size)
	}
	if !column() || !check32("flags") {
		return fail()
	}
	for i, v := range c {
		evs[i].Flags = uint32(v)
	}
	if !column() || !check32("mode") {
		return fail()
	}
	for i, v := range c {
		evs[i].Mode = uint32(v)
	}
	if !column() || !check32("tid") {
		return fail()
	}
	for i, v := range c {
		evs[i].Tid = uint32(v)
	}
	if !column() || !check32("pid") {
		return fail()
	}
	for i, v := range c {
		evs[i].Pid = uint32(v)
	}
	if !column() || !check32("uid") {
		return fail()
	}
	for i, v := range c {
		evs[i].Uid = uint32(v)
	}
	if !column() || !check32("gid") {
		return fail()
	}
	for i, v := range c {
		evs[i].Gid = uint32(v)
	}
	if version >= Version2 {
		if !column() {
			return fail()
		}
		for i, v := range c {
			evs[i].Offset2 = unzig(v)
		}
	}
	if version >= Version4 {
		if b, err = decodeLegs(b, version, evs, c); err != nil {
			return fail()
		}
	}
	if len(b) != 0 {
		return evs[:0], fmt.Errorf("%d bytes after the last column", len(b))
	}
	pred.reset()
	for i := range evs {
		e := &evs[i]
		e.Offset = unzig(uint64(e.Offset)) + pred.predict(e.Handle)
		pred.update(e.Handle, e.Offset, e.Ret)
	}
	return evs, nil
}
