package stats

import (
	"runtime"
	"strconv"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// The per-system-call view folds requests into calls, a large share of what aggregating a
// recording costs, and needs nothing from the rest of the Accumulator but its events in
// start order. With Options.CallsAside and more than one CPU a callPipe runs it beside
// the Accumulator: it copies the events into batches and hands each full batch to a
// goroutine, one batch in flight at a time, so the view sees the same events in the same
// order as when it runs inline and its figures are the same.
//
// The folder resolves path ids while it folds, and the names come from the trace reader,
// which the Accumulator's caller advances meanwhile. So the callPipe resolves each path id
// through Options.Names when the Accumulator hands over the first event naming it, as the
// folder would inline, and passes the name along with the batch; an id the reader does
// not know yet is resolved again at each event that names it.

// callBatchLen is the number of events in a batch: two batches are held, one being filled
// and one in flight.
const callBatchLen = 4096

// callPipe feeds a callView from another goroutine. Only the Accumulator's goroutine calls
// its methods.
type callPipe struct {
	names   fold.Names    // the reader: used from the Accumulator's goroutine only
	known   []uint64      // path ids resolved to a name the reader knows (a bitset)
	fill    *callBatch    // being filled
	flight  *callBatch    // handed to the goroutine (or spare)
	done    chan struct{} // the batch in flight was counted (buffered: 1)
	worker  *callWorker
	started bool // a batch is in flight: done will be sent
}

// callBatch is events for the view with the path names resolved before each.
type callBatch struct {
	evs   []trace.Event
	names []batchName
}

// batchName is a path id's name, known from the batch's event at onwards.
type batchName struct {
	at   int
	id   uint32
	name string
}

// callWorker is the view's side: only the goroutine of the batch in flight uses it.
type callWorker struct {
	v     *callView
	names map[uint32]string // the names the callPipe resolved, as the folder's Names
}

// PathName returns the name the callPipe resolved for id.
func (w *callWorker) PathName(id uint32) string {
	if s, ok := w.names[id]; ok {
		return s
	}
	// Not reached: the callPipe names every path id of an event before the event. The
	// reader's spelling of an id without a record, should it be.
	return "?" + strconv.FormatUint(uint64(id), 10)
}

// newCallPipe returns a callPipe with a callView for a recording's trace, or nil when the
// view is better run inline: one CPU, a replay's trace (no folding), or no Names.
func newCallPipe(names fold.Names, h *trace.Header) *callPipe {
	if runtime.GOMAXPROCS(0) < 2 || names == nil || (h != nil && h.Kind == "replay") {
		return nil
	}
	w := &callWorker{names: map[uint32]string{}}
	w.v = newCallView(w, h)
	return &callPipe{
		names:  names,
		worker: w,
		fill:   &callBatch{evs: make([]trace.Event, 0, callBatchLen)},
		flight: &callBatch{evs: make([]trace.Event, 0, callBatchLen)},
		done:   make(chan struct{}, 1),
	}
}

// add copies ev into the batch being filled, handing the batch over when it is full.
func (p *callPipe) add(ev *trace.Event) {
	b := p.fill
	p.resolve(b, ev.Path)
	p.resolve(b, ev.Path2)
	b.evs = append(b.evs, *ev)
	if len(b.evs) == callBatchLen {
		p.handOver()
	}
}

// resolve adds id's name to b unless an earlier event resolved it to a name the reader knew.
func (p *callPipe) resolve(b *callBatch, id uint32) {
	if id == 0 {
		return
	}
	w, bit := int(id>>6), uint64(1)<<(id&63)
	if id < maxDensePath && w < len(p.known) && p.known[w]&bit != 0 {
		return
	}
	name := p.names.PathName(id)
	b.names = append(b.names, batchName{at: len(b.evs), id: id, name: name})
	if id >= maxDensePath || len(name) > 0 && name[0] == '?' {
		return // sparse ids (corrupt traces) and ids without a record: resolved each time
	}
	if w >= len(p.known) {
		p.known = append(p.known, make([]uint64, w+1-len(p.known))...)
	}
	p.known[w] |= bit
}

// handOver waits for the batch in flight and hands the filled one to a new goroutine.
func (p *callPipe) handOver() {
	p.wait()
	b := p.fill
	p.fill, p.flight = p.flight, b
	p.fill.evs, p.fill.names = p.fill.evs[:0], p.fill.names[:0]
	p.started = true
	go p.worker.run(b, p.done)
}

// wait returns when the batch in flight, if any, has been counted.
func (p *callPipe) wait() {
	if p.started {
		<-p.done
		p.started = false
	}
}

// view counts the events still held and returns the view, with no batch in flight.
func (p *callPipe) view() *callView {
	if len(p.fill.evs) > 0 {
		p.handOver()
	}
	p.wait()
	return p.worker.v
}

// run counts a batch's events, each after the names resolved before it, and sends on done.
func (w *callWorker) run(b *callBatch, done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	ni := 0
	for i := range b.evs {
		for ni < len(b.names) && b.names[ni].at <= i {
			w.names[b.names[ni].id] = b.names[ni].name
			ni++
		}
		w.v.add(&b.evs[i])
	}
}
