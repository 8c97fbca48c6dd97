package trace

import (
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/klauspost/compress/zstd"
)

// WriterOptions tune a Writer. The zero value gives the defaults.
type WriterOptions struct {
	FlushInterval time.Duration // default 1s: a chunk is written at least this often when events are pending
	ChunkEvents   int           // events per chunk before a flush (default 16384, at most MaxChunkEvents)
	BufferEvents  int           // total in-memory buffer capacity in events (default 1<<18)
	DropWhenFull  bool          // default false: Append waits for space and the wait is accounted
	// PathIndexSlots bounds the path index once a keep function is set (KeepPaths): from
	// this many slots of 16 bytes (default 1<<20, 16 MiB) a full index forgets the paths no
	// longer in use instead of doubling.
	PathIndexSlots int
	Logger         *slog.Logger // may be nil

	// Observe, if set, sees every event the writer will write, a batch at a time, on the
	// encoder goroutine (so off the producers' path) and in each producer's order, within
	// FlushInterval (plus LegHold) of its Append. It must not keep the slice.
	Observe func([]Event)

	// Legs, if set, fills the kernel's view of each event before it is encoded (and
	// observed), once the event has waited LegHold (default 50 ms) since the encoder took
	// its batch: time for the kernel's records of its request and system call to arrive.
	Legs    LegFiller
	LegHold time.Duration

	// Ordered writes events in the order of their Appends, whatever their threads: every
	// Append hands its event to the encoder at once instead of batching it by thread. For
	// a writer that copies a trace from one goroutine (iotap anonymize), so that the copy
	// lists events as the original did; a recording leaves it off.
	Ordered bool
}

// Default writer settings.
const (
	DefaultFlushInterval  = time.Second
	DefaultChunkEvents    = 16384
	DefaultBufferEvents   = 1 << 18
	DefaultPathIndexSlots = 1 << 20
	DefaultLegHold        = 50 * time.Millisecond

	orderedBatches = 4096 // at most this many events in flight with Ordered
)

// WriterStats are running totals of a Writer.
type WriterStats struct {
	Events  uint64        // events accepted by Append
	Dropped uint64        // events dropped (buffer full in drop mode, appended after Close, or Lost)
	Lost    uint64        // of which lost because a write of the trace failed (Footer.Lost)
	Blocked time.Duration // time Append spent waiting for buffer space
	Chunks  uint64        // chunks written, all types
	Bytes   uint64        // bytes written, preamble and frames included
	Written uint64        // events written to the file (in complete chunks)
	// EncodeCPU is the CPU time the encoder used (encoding, compression, writes, Observe);
	// known once Close returns, 0 before.
	EncodeCPU time.Duration
	// The path index: times it forgot the paths no longer in use, ids it forgot, and its
	// size in slots (16 bytes each).
	PathCompactions, PathsForgotten uint64
	PathIndexSlots                  int
}

// Writer writes a trace. Append, Path, Raw, AddProcess, AddFile and CountError are safe
// for concurrent use; one background goroutine encodes, compresses and writes.
//
// Events go into per-shard batches (a shard is chosen from the event's Tid, so one thread
// always uses the same shard and threads rarely contend); a full batch is handed to the
// encoder over a channel and the shard takes a free one. The encoder also takes partly
// filled batches every FlushInterval.
//
// Free batches are a stack: a producer takes the batch the encoder returned last, which
// is still in cache, and a light load touches only a few batches of the store.
//
// Lock order: shard.mu, then freeMu; paths.mu, then nothing; sideMu, then nothing. The
// encoder takes paths.mu and sideMu one at a time, never while holding a shard lock.
type Writer struct {
	opts   WriterOptions
	origin int64
	log    *slog.Logger
	out    io.Writer
	file   *os.File // set when Create opened the file

	shards    []shard
	shardBits uint
	freeMu    sync.Mutex    // guards freeStk
	freeStk   []*batch      // batches ready for producers, last returned on top
	avail     chan struct{} // one token per batch on freeStk: receive one, then popFree
	full      chan *batch   // batches ready for the encoder
	closing   chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	release   func() // unmaps the event store of the batches (after the encoder stopped)

	paths *pathIndex

	sideMu      sync.Mutex // guards pendProcs, pendFiles, pendSamples, layer, roundTrip, predict, passthrough, copied, noFooter
	layer       LayerCost
	roundTrip   RoundTrip
	predict     Prediction
	passthrough PassthroughStats
	copied      *Footer      // CopyFooter's footer
	noFooter    bool         // CopyFooter(nil): Close writes no footer
	encodeCPU   atomic.Int64 // ns, set with the footer
	pendProcs   []Process
	pendFiles   []File
	pendSamp    []Samples

	dropped atomic.Uint64
	blocked atomic.Int64
	errors  atomic.Uint64
	chunks  atomic.Uint64
	bytes   atomic.Uint64
	written atomic.Uint64
	lost    atomic.Uint64 // events dropped because a write failed (part of dropped)

	// Owned by the encoder goroutine.
	held     []heldBatch // batches waiting for their kernel legs (opts.Legs), oldest first
	holdT    *time.Timer
	flushDue bool // a flush interval ended while batches were held: flush once they are encoded
	enc      *zstd.Encoder
	cols     columnEncoder // the events of the chunk being built
	raw      []byte
	buf      []byte
	pred     offsetPredictor
	opCounts [NumOps]uint64 // events per op in the chunks written
	pendOps  [NumOps]uint64 // events per op taken since the last write
	pending  uint64         // chunks appended to buf since the last write
	good     int64          // bytes written by whole writes: the end of the last complete chunk
	err      error          // first write error; later chunks are discarded
	cut      bool           // after err, the file was cut back to good: a footer may still go there
}

type batch struct {
	ev []Event
	n  int
}

// heldBatch is a batch the encoder took at time at, to encode once LegHold has passed.
type heldBatch struct {
	b  *batch
	at time.Time
}

type shard struct {
	mu     sync.Mutex // guards the rest
	cur    *batch     // the batch being filled, nil when none
	buf    []Event    // cur.ev, and cur's count: an append touches this line and the slot
	n      int
	events uint64
	closed bool
	_      [64]byte // pad to 128 bytes: shards never share a cache line (or an adjacent-line prefetch pair)
}

// install makes the free batch b the shard's current one.
func (s *shard) install(b *batch) { s.cur, s.buf, s.n = b, b.ev, b.n }

// add appends ev to the current batch and returns the batch if that filled it.
func (s *shard) add(ev *Event) *batch {
	s.buf[s.n] = *ev
	s.n++
	s.events++
	if s.n < len(s.buf) {
		// The next event's slot, fetched now, is in cache when the next request of this
		// shard's thread comes (microseconds later in a mount). Stored to cold, it filled
		// the CPU's store buffer: the next stores of the request stalled on it.
		prefetchEvent(unsafe.Pointer(&s.buf[s.n]))
		return nil
	}
	return s.detach()
}

// detach takes the current batch, with its count, out of the shard.
func (s *shard) detach() *batch {
	b := s.cur
	b.n = s.n
	s.cur, s.buf, s.n = nil, nil, 0
	return b
}

// Create creates (or truncates) the file at path with mode 0600 (an existing file gets
// 0600 too: a trace names every path of the job) and returns a Writer on it. Close closes
// the file.
func Create(path string, h Header, o WriterOptions) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("trace: create: %w", err)
	}
	if err := makePrivate(f); err != nil {
		_ = f.Close() // nothing written yet
		return nil, fmt.Errorf("trace: create: %w", err)
	}
	w, err := newWriter(f, f, h, o)
	if err != nil {
		_ = f.Close() // the header write already failed: report that
		return nil, err
	}
	return w, nil
}

// makePrivate gives a regular file mode 0600 (O_CREAT's mode applies to a new file only).
// Other files (a pipe, /dev/null) keep theirs.
func makePrivate(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm() == 0o600 {
		return nil
	}
	return f.Chmod(0o600)
}

// NewWriter returns a Writer on out. It writes the preamble and the header chunk
// immediately. Close does not close out.
//
// h.Version is set to Version5. If h.WallStart is zero, NewWriter sets WallStart and
// Origin to the current time; a caller that sets WallStart itself should set Origin to
// Now() read at the same moment (if Origin is zero, NewWriter sets it).
func NewWriter(out io.Writer, h Header, o WriterOptions) (*Writer, error) {
	return newWriter(out, nil, h, o)
}

// newWriter returns a Writer on out; file is out when it is a file Create opened (a failed
// write is then cut back, see write).
func newWriter(out io.Writer, file *os.File, h Header, o WriterOptions) (*Writer, error) {
	CalibrateClock()
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.ChunkEvents <= 0 {
		o.ChunkEvents = DefaultChunkEvents
	}
	o.ChunkEvents = min(o.ChunkEvents, MaxChunkEvents)
	if o.BufferEvents <= 0 {
		o.BufferEvents = DefaultBufferEvents
	}
	if o.PathIndexSlots <= 0 {
		o.PathIndexSlots = DefaultPathIndexSlots
	}
	if o.LegHold <= 0 {
		o.LegHold = DefaultLegHold
	}
	w := &Writer{
		opts:    o,
		log:     o.Logger,
		out:     out,
		file:    file,
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		paths:   newPathIndex(),
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}

	// Shards: twice the processors, rounded up to a power of two, at most 64.
	w.shardBits = uint(bits.Len(uint(2*runtime.GOMAXPROCS(0) - 1)))
	w.shardBits = min(w.shardBits, 6)
	ns := 1 << w.shardBits
	w.shards = make([]shard, ns)
	bs := max(1, min(o.BufferEvents/(4*ns), 4096, o.ChunkEvents))
	nb := max(1, o.BufferEvents/bs)
	if o.Ordered {
		// A batch of one is full at once: batches reach the encoder in Append order. A
		// few thousand in flight keep the encoder busy.
		bs, nb = 1, min(o.BufferEvents, orderedBatches)
	}
	w.freeStk = make([]*batch, 0, nb)
	w.avail = make(chan struct{}, nb)
	w.full = make(chan *batch, nb)
	// One store for the batches, outside the Go heap.
	store, release := newEventStore(nb * bs)
	w.release = release
	w.cols = columnEncoder{version: writeVersion, pred: &w.pred}
	for i := range nb {
		w.putFree(&batch{ev: store[(nb-1-i)*bs : (nb-i)*bs : (nb-i)*bs]}) // the start of the store on top
	}

	// No zstd content checksum: every chunk's frame carries a CRC32C of its stored bytes,
	// and the xxhash64 of the raw bytes was a third of the compressor's time.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false))
	if err != nil {
		release()
		return nil, fmt.Errorf("trace: zstd encoder: %w", err)
	}
	w.enc = enc

	h.Version = writeVersion
	if h.WallStart.IsZero() {
		h.WallStart = time.Now().UTC()
		h.Origin = Now()
	} else if h.Origin == 0 {
		h.Origin = Now()
	}
	w.origin = h.Origin
	w.buf = appendPreamble(w.buf[:0], writeVersion)
	w.raw = appendHeader(w.raw[:0], &h)
	w.buf = w.appendChunk(w.buf, ChunkHeader, w.raw)
	if err := w.write(w.buf); err != nil {
		release()
		return nil, err
	}
	go w.run()
	return w, nil
}

// Origin returns the monotonic clock reading (Now) that event Start times count from.
func (w *Writer) Origin() int64 { return w.origin }

// shardFor picks the shard of a thread. Events without a thread (the kernel's own: FORGET)
// all go to one shard: spread round-robin, each landed in a shard whose batch was cold,
// which cost a FORGET 1.8 µs of recording in a mount instead of the 0.3 µs of any other.
func (w *Writer) shardFor(tid uint32) *shard {
	return &w.shards[(tid*0x9E3779B1)>>(32-w.shardBits)&(1<<w.shardBits-1)]
}

// Append records a copy of *ev. It does not allocate. When the buffer is full it waits for
// space (the wait is counted in Stats().Blocked and the footer), or with DropWhenFull it
// drops the event and counts it. Events appended after Close are dropped and counted.
func (w *Writer) Append(ev *Event) {
	s := w.shardFor(ev.Tid)
	s.mu.Lock()
	if s.cur != nil && !s.closed {
		if b := s.add(ev); b != nil {
			w.full <- b // never blocks: the channel holds every batch
		}
		s.mu.Unlock()
		return
	}
	closed := s.closed
	s.mu.Unlock()
	if closed {
		w.dropped.Add(1)
		return
	}
	w.appendSlow(s, ev)
}

// appendSlow gets a free batch for s, waiting if needed, and appends ev.
func (w *Writer) appendSlow(s *shard, ev *Event) {
	var b *batch
	var waited int64
	select {
	case <-w.avail:
		b = w.popFree()
	default:
		if w.opts.DropWhenFull {
			w.dropped.Add(1)
			return
		}
		t0 := Now()
		select {
		case <-w.avail:
			b = w.popFree()
		case <-w.done:
		}
		waited = Now() - t0
		w.blocked.Add(waited)
	}
	s.mu.Lock()
	if s.closed || b == nil {
		s.mu.Unlock()
		if b != nil {
			w.putFree(b)
		}
		w.dropped.Add(1)
		return
	}
	if s.cur != nil {
		// Another producer installed a batch meanwhile: use it, give ours back.
		w.putFree(b)
	} else {
		s.install(b)
	}
	if b := s.add(ev); b != nil {
		w.full <- b
	}
	s.mu.Unlock()
}

// Path interns the path named name in directory parent and returns its id. The first call
// for a pair queues a PathRecord that is written before any event appended after Path
// returns. A hit does not allocate.
func (w *Writer) Path(parent uint32, name string) uint32 { return w.paths.id(parent, name) }

// KeepPaths bounds the path index (WriterOptions.PathIndexSlots): from then on a full index
// keeps the ids that keep's predicate reports (keep is called once per compaction; with the
// root and the ids assigned last) and forgets the others; a forgotten path named again gets
// a new id, which readers resolve to the first. forgot, if not nil, is given the ids
// forgotten, after each compaction. Both are called with the index locked, from whichever
// goroutine interns a path: they must be safe for concurrent use and must not call Path or
// Raw.
func (w *Writer) KeepPaths(keep func() func(id uint32) bool, forgot func(ids []uint32)) {
	w.paths.setLimit(w.opts.PathIndexSlots, keep, forgot)
}

// Raw interns a raw string (a symlink target) as a path record with Parent 0.
func (w *Writer) Raw(s string) uint32 { return w.Path(0, s) }

// AddProcess queues a process record; it is written before any event appended after
// AddProcess returns.
func (w *Writer) AddProcess(p Process) {
	w.sideMu.Lock()
	w.pendProcs = append(w.pendProcs, p)
	w.sideMu.Unlock()
}

// AddFile queues a file record; it is written before any event appended after AddFile
// returns.
func (w *Writer) AddFile(f File) {
	w.sideMu.Lock()
	w.pendFiles = append(w.pendFiles, f)
	w.sideMu.Unlock()
}

// AddSamples queues resource samples of a process, written with the next chunks. The
// writer keeps s.Points: the caller must not change them afterwards. A series may come in
// several calls (each with the points since the last); points of one role and pid form one
// series for readers.
func (w *Writer) AddSamples(s Samples) {
	if len(s.Points) == 0 {
		return
	}
	w.sideMu.Lock()
	w.pendSamp = append(w.pendSamp, s)
	w.sideMu.Unlock()
}

// SetLayerCost hands the writer the recording layer's measurement of its own cost, for
// the footer. The last call before Close wins.
func (w *Writer) SetLayerCost(c LayerCost) {
	w.sideMu.Lock()
	w.layer = c
	w.sideMu.Unlock()
}

// SetRoundTrip records the recording layer's measured round trip for the footer. Call it
// before Close.
func (w *Writer) SetRoundTrip(rt RoundTrip) {
	w.sideMu.Lock()
	w.roundTrip = rt
	w.sideMu.Unlock()
}

// SetPrediction sets a replay's prediction for the footer (Footer.Prediction). Call it
// before Close.
func (w *Writer) SetPrediction(p Prediction) {
	w.sideMu.Lock()
	w.predict = p
	w.sideMu.Unlock()
}

// SetPassthrough records, for the footer, how kernel passthrough served the recording's
// files (Footer.Passthrough). Its Lost calls count as dropped events. Call it once, before
// Close.
func (w *Writer) SetPassthrough(p PassthroughStats) {
	w.sideMu.Lock()
	w.passthrough = p
	w.sideMu.Unlock()
	w.dropped.Add(p.Lost)
}

// CopyFooter makes the footer Close writes carry the figures of f, the footer of a trace
// this writer copies: the recording's drops, waits, errors, end, cost, round trip, legs and
// prediction. Events, Chunks and OpCounts stay this writer's own (they describe the file it
// writes), and its own drops and errors add to f's. With a nil f, Close writes no footer, as the copied
// trace had none (it was cut short). Call it before Close.
func (w *Writer) CopyFooter(f *Footer) {
	w.sideMu.Lock()
	if f == nil {
		w.copied, w.noFooter = nil, true
	} else {
		c := *f
		w.copied, w.noFooter = &c, false
	}
	w.sideMu.Unlock()
}

// CountError counts a recording failure other than a drop; the footer reports it.
func (w *Writer) CountError() { w.errors.Add(1) }

// Stats returns running totals.
func (w *Writer) Stats() WriterStats {
	var ev uint64
	for i := range w.shards {
		s := &w.shards[i]
		s.mu.Lock()
		ev += s.events
		s.mu.Unlock()
	}
	pc, pf, slots := w.paths.counts()
	return WriterStats{
		Events:  ev,
		Dropped: w.dropped.Load(),
		Lost:    w.lost.Load(),
		Blocked: time.Duration(w.blocked.Load()),
		Chunks:  w.chunks.Load(),
		Bytes:   w.bytes.Load(),
		Written: w.written.Load(),

		EncodeCPU: time.Duration(w.encodeCPU.Load()),

		PathCompactions: pc, PathsForgotten: pf, PathIndexSlots: slots,
	}
}

// Close flushes buffered events and side tables, writes the footer and, if Create opened
// the file, syncs and closes it. It returns the first write error. Appends racing with or
// following Close are dropped and counted.
//
// After a failed write (a full disk) no more events are written; they are counted as
// dropped and lost (WriterStats.Lost). A file from Create is cut back to the end of its
// last whole chunk, and Close still writes the footer there, with Lost and the error: the
// trace then reads without damage and says what it misses. If even the footer does not
// fit, the trace ends at that chunk without one.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() {
		close(w.closing)
		<-w.done
		// The shards are closed: no producer writes into a batch any more (a late Append
		// sees closed under the shard lock and drops), and the encoder has stopped.
		w.release()
		if w.file != nil {
			if err := w.file.Sync(); err != nil && w.err == nil {
				w.err = fmt.Errorf("trace: sync: %w", err)
			}
			if err := w.file.Close(); err != nil && w.err == nil {
				w.err = fmt.Errorf("trace: close: %w", err)
			}
		}
		_ = w.enc.Close() // only EncodeAll was used: nothing is buffered
	})
	return w.err
}

// run is the encoder goroutine. It keeps its own OS thread, whose CPU time is then the
// encoder's alone, for the footer (the thread is woken once per batch or flush interval).
func (w *Writer) run() {
	runtime.LockOSThread()
	defer close(w.done)
	t := time.NewTicker(w.opts.FlushInterval)
	defer t.Stop()
	w.holdT = time.NewTimer(time.Hour)
	w.holdT.Stop()
	defer w.holdT.Stop()
	for {
		select {
		case b := <-w.full:
			w.accept(b)
		case <-w.holdT.C:
			w.releaseHeld(false)
			if w.flushDue && len(w.held) == 0 {
				w.flushDue = false
				w.flush()
			}
		case <-t.C:
			w.stealPartial(false)
			w.drain()
			w.releaseHeld(false)
			w.flushDue = len(w.held) > 0
			w.flush()
		case <-w.closing:
			w.stealPartial(true)
			w.drain()
			w.releaseHeld(true)
			w.flush()
			w.writeFooter()
			return
		}
	}
}

// accept takes a batch from a producer: at once, or after LegHold when the kernel's legs
// are to be filled in.
func (w *Writer) accept(b *batch) {
	if w.opts.Legs == nil {
		w.take(b)
		return
	}
	w.held = append(w.held, heldBatch{b: b, at: time.Now()})
	if len(w.held) == 1 {
		w.holdT.Reset(w.opts.LegHold)
	}
}

// releaseHeld fills and encodes the held batches that have waited LegHold, or all of them.
func (w *Writer) releaseHeld(all bool) {
	now := time.Now()
	i := 0
	for ; i < len(w.held); i++ {
		h := w.held[i]
		if !all && now.Sub(h.at) < w.opts.LegHold {
			break
		}
		w.opts.Legs.Fill(h.b.ev[:h.b.n])
		w.take(h.b)
	}
	if i == 0 {
		return
	}
	n := copy(w.held, w.held[i:])
	clear(w.held[n:])
	w.held = w.held[:n]
	if n > 0 {
		w.holdT.Reset(w.opts.LegHold - now.Sub(w.held[0].at))
	}
}

// stealPartial queues the partly filled batch of every shard on w.full, behind the shard's
// full batches, so events of one shard stay in order. With close it also marks the shards
// closed so no later Append lands in them.
func (w *Writer) stealPartial(close bool) {
	for i := range w.shards {
		s := &w.shards[i]
		s.mu.Lock()
		if s.cur != nil && s.n > 0 {
			w.full <- s.detach() // never blocks: the channel holds every batch
		}
		if close {
			s.closed = true
			if s.cur != nil {
				w.putFree(s.detach())
			}
		}
		s.mu.Unlock()
	}
}

// drain takes the batches queued on w.full, at most as many as exist.
func (w *Writer) drain() {
	for range cap(w.full) {
		select {
		case b := <-w.full:
			w.accept(b)
		default:
			return
		}
	}
}

// encodeBlock is the number of events the encoder takes at a time (28 KiB of events).
const encodeBlock = 256

// take encodes a batch's events into the chunk being built, writing chunks as they fill,
// and frees b.
func (w *Writer) take(b *batch) {
	if w.opts.Observe != nil {
		w.opts.Observe(b.ev[:b.n])
	}
	ev := b.ev[:b.n]
	for len(ev) > 0 {
		k := min(len(ev), encodeBlock, w.opts.ChunkEvents-w.cols.n)
		for i := range ev[:k] {
			if op := ev[i].Op; op < NumOps {
				w.pendOps[op]++
			}
		}
		w.cols.add(ev[:k])
		ev = ev[k:]
		if w.cols.n == w.opts.ChunkEvents {
			w.flush()
		}
	}
	b.n = 0
	w.putFree(b)
}

// putFree returns a batch to the free stack.
func (w *Writer) putFree(b *batch) {
	w.freeMu.Lock()
	w.freeStk = append(w.freeStk, b) // within capacity: every batch fits
	w.freeMu.Unlock()
	w.avail <- struct{}{} // never blocks: the channel holds a token per batch
}

// popFree takes the top of the free stack; the caller has received a token from w.avail,
// so the stack is not empty.
func (w *Writer) popFree() *batch {
	w.freeMu.Lock()
	n := len(w.freeStk) - 1
	b := w.freeStk[n]
	w.freeStk[n] = nil
	w.freeStk = w.freeStk[:n]
	w.freeMu.Unlock()
	return b
}

// flush writes pending side-table records, then the encoded events. The side records are
// collected after the events left their batches, so every record an event refers to is
// written no later than the event.
func (w *Writer) flush() {
	paths := w.paths.take()
	w.sideMu.Lock()
	procs, files, samp := w.pendProcs, w.pendFiles, w.pendSamp
	w.pendProcs, w.pendFiles, w.pendSamp = nil, nil, nil
	w.sideMu.Unlock()

	if w.err != nil { // the file is broken: count the events as lost, skip the work
		w.lose(uint64(w.cols.n))
		w.cols.reset()
		return
	}
	w.buf = w.buf[:0]
	if len(paths) > 0 {
		w.raw = appendPaths(w.raw[:0], paths)
		w.buf = w.appendChunk(w.buf, ChunkPaths, w.raw)
	}
	if len(procs) > 0 {
		w.raw = appendProcesses(w.raw[:0], procs)
		w.buf = w.appendChunk(w.buf, ChunkProcesses, w.raw)
	}
	if len(files) > 0 {
		w.raw = appendFiles(w.raw[:0], files)
		w.buf = w.appendChunk(w.buf, ChunkFiles, w.raw)
	}
	for len(samp) > 0 {
		w.raw, samp = appendSampleChunk(w.raw[:0], samp)
		w.buf = w.appendChunk(w.buf, ChunkSamples, w.raw)
	}
	n := w.cols.n
	if n > 0 {
		w.raw = w.cols.payload(w.raw[:0])
		w.buf = w.appendChunk(w.buf, ChunkEvents, w.raw)
		w.cols.reset()
	}
	if len(w.buf) == 0 {
		return
	}
	if w.write(w.buf) == nil {
		w.written.Add(uint64(n))
	} else {
		w.lose(uint64(n))
	}
}

// lose counts n events that a failed write kept out of the trace.
func (w *Writer) lose(n uint64) {
	w.dropped.Add(n)
	w.lost.Add(n)
	w.pendOps = [NumOps]uint64{}
}

func (w *Writer) writeFooter() {
	f := Footer{
		Events:    w.written.Load(),
		Dropped:   w.dropped.Load(),
		Blocked:   time.Duration(w.blocked.Load()),
		Chunks:    w.chunks.Load(),
		End:       Now() - w.origin,
		Errors:    w.errors.Load(),
		WallClose: time.Now().UTC(),
		EncodeCPU: threadCPU(),
		Lost:      w.lost.Load(),
	}
	w.encodeCPU.Store(int64(f.EncodeCPU))
	if w.err != nil {
		f.WriteError = w.err.Error()
		if !w.cut {
			return // nowhere to write it: the trace ends at its last complete chunk
		}
	}
	w.sideMu.Lock()
	f.Layer, f.RoundTrip, f.Prediction, f.Passthrough = w.layer, w.roundTrip, w.predict, w.passthrough
	copied, noFooter := w.copied, w.noFooter
	w.sideMu.Unlock()
	if w.opts.Legs != nil {
		f.Legs = w.opts.Legs.LegStats()
	}
	if noFooter {
		return
	}
	if c := copied; c != nil {
		f.Dropped += c.Dropped
		f.Lost += c.Lost
		f.Errors += c.Errors
		// The copy's own waits are not the recording's: the job waited c.Blocked.
		f.Blocked, f.End, f.WallClose, f.EncodeCPU = c.Blocked, c.End, c.WallClose, c.EncodeCPU
		f.Layer, f.RoundTrip, f.Legs, f.Prediction, f.Passthrough = c.Layer, c.RoundTrip, c.Legs, c.Prediction, c.Passthrough
		if f.WriteError == "" {
			f.WriteError = c.WriteError
		}
	}
	last := 0
	for i, c := range w.opCounts {
		if c != 0 {
			last = i + 1
		}
	}
	f.OpCounts = append([]uint64(nil), w.opCounts[:last]...)
	w.raw = appendFooter(w.raw[:0], &f)
	w.buf = w.appendChunk(w.buf[:0], ChunkFooter, w.raw)
	if w.err == nil {
		_ = w.write(w.buf) // an error stays in w.err for Close
		return
	}
	// After a failed write: the footer goes where the last complete chunk ended, in the
	// room the cut freed (a full disk usually has a partial block there at least). If it
	// does not fit, the trace ends at that chunk, without a footer, as before.
	if n, err := w.out.Write(w.buf); err != nil || n < len(w.buf) {
		_ = w.file.Truncate(w.good)
		w.log.Error("trace footer not written after the failed write", "err", err)
		return
	}
	w.log.Warn("trace closed after a failed write: it ends with the last chunk written whole",
		"lost_events", f.Lost, "bytes", w.good)
}

// appendChunk compresses payload and appends a framed chunk to dst.
func (w *Writer) appendChunk(dst []byte, t ChunkType, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, frameSize)...) // placeholder, filled below
	dst = w.enc.EncodeAll(payload, dst)
	stored := dst[start+frameSize:]
	var fr [frameSize]byte
	appendFrame(fr[:0], frame{
		payload: uint32(len(stored)),
		typ:     t,
		flags:   flagZstd,
		raw:     uint32(len(payload)),
		sum:     crc(stored),
	})
	copy(dst[start:], fr[:])
	w.pending++
	return dst
}

// write writes b, whole chunks, in one call. After the first error nothing more is
// written; a file Create opened is then cut back to the end of the last whole chunk, so
// that the trace stays readable to there and the footer can follow it (writeFooter).
func (w *Writer) write(b []byte) error {
	chunks := w.pending
	w.pending = 0
	if w.err != nil {
		return w.err
	}
	n, err := w.out.Write(b)
	w.bytes.Add(uint64(n))
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("trace: write: %w", err)
		w.log.Error("trace write failed; later events are dropped", "err", err)
		if w.file != nil && n > 0 {
			_, serr := w.file.Seek(w.good, io.SeekStart)
			w.cut = serr == nil && w.file.Truncate(w.good) == nil
		} else {
			w.cut = w.file != nil
		}
		return w.err
	}
	w.good += int64(n)
	w.chunks.Add(chunks)
	for op, c := range w.pendOps {
		w.opCounts[op] += c
	}
	w.pendOps = [NumOps]uint64{}
	return nil
}

// appendSampleChunk appends the payload of one samples chunk holding the first of ss, and
// returns what is left for the next: a record holds at most MaxSamplesPerRecord points, a
// chunk at most a few such records, so a payload stays far below MaxChunkRaw.
func appendSampleChunk(dst []byte, ss []Samples) ([]byte, []Samples) {
	const perChunk = 1 << 18 // points: at most 80 bytes each (8 varints), 20 MiB of payload at most
	var take []Samples
	n := 0
	for len(ss) > 0 && n < perChunk {
		s := ss[0]
		k := min(len(s.Points), MaxSamplesPerRecord, perChunk-n)
		part := s
		part.Points = s.Points[:k]
		take = append(take, part)
		n += k
		if k == len(s.Points) {
			ss = ss[1:]
		} else {
			s.Points = s.Points[k:]
			ss = append([]Samples{s}, ss[1:]...)
		}
	}
	return appendSamples(dst, take), ss
}
