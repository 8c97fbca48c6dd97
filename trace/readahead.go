package trace

import (
	"runtime"
	"sync"
)

// ReadAhead reads a Reader's chunks in a goroutine, one events chunk ahead of its caller:
// reading, decompressing and decoding chunk N+1 overlaps the caller's work on the events
// of chunk N. It hands out the same events in the same order as the Reader's Next, and
// holds two chunks' events (the caller's and the one decoded meanwhile). With one CPU it
// reads in the caller's goroutine.
//
// While it runs, the Reader's PathName answers as it would for a Reader read without a
// ReadAhead: from the path records before the chunk of the last event Next returned. The
// Reader's other methods may be called once Next has returned an error (io.EOF at the
// end) or after Close.
type ReadAhead struct {
	r     *Reader
	out   chan aheadChunk
	free  chan []Event // the caller's spent events, for the goroutine to decode into
	stop  chan struct{}
	done  chan struct{} // closed when the goroutine returns
	cur   aheadChunk
	next  int
	err   error
	close sync.Once
}

// aheadChunk is one events chunk as the goroutine decoded it: its events, the path
// records read before it, or the error that ended the stream.
type aheadChunk struct {
	evs   []Event
	paths uint32
	err   error
}

// NewReadAhead starts reading r's events ahead. r must not have been read from with Next.
// Close stops it.
func NewReadAhead(r *Reader) *ReadAhead {
	a := &ReadAhead{r: r}
	if runtime.GOMAXPROCS(0) < 2 {
		return a
	}
	a.out = make(chan aheadChunk)
	// Two buffers: the caller's chunk and the one decoded meanwhile (the goroutine holds
	// it until the caller takes it).
	a.free = make(chan []Event, 2)
	a.free <- nil
	a.free <- nil
	a.stop = make(chan struct{})
	a.done = make(chan struct{})
	r.visible = r.nPaths
	r.ahead.Store(true) // before the goroutine starts
	go a.run()
	return a
}

// run decodes chunks and sends them until the end, an error or stop.
func (a *ReadAhead) run() {
	defer close(a.done)
	r := a.r
	for {
		select {
		case r.events = <-a.free:
		case <-a.stop:
			return
		}
		err := r.advance()
		c := aheadChunk{evs: r.events, paths: r.nPaths, err: err}
		r.events = nil
		select {
		case a.out <- c:
		case <-a.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// Next returns the next event in file order, valid until the next call; at the end,
// io.EOF (see Reader.Next).
func (a *ReadAhead) Next() (*Event, error) {
	if a.out == nil {
		return a.r.Next()
	}
	for a.next >= len(a.cur.evs) {
		if a.err != nil {
			return nil, a.err
		}
		if a.cur.evs != nil {
			a.free <- a.cur.evs[:0] // never blocks: the goroutine holds the other buffer
		}
		a.cur, a.next = <-a.out, 0
		a.r.nameMu.Lock()
		a.r.visible = a.cur.paths
		a.r.nameMu.Unlock()
		if a.cur.err != nil {
			a.err = a.cur.err
			a.finish()
		}
	}
	e := &a.cur.evs[a.next]
	a.next++
	return e, nil
}

// finish waits for the goroutine to return and lets PathName see every record.
func (a *ReadAhead) finish() {
	a.close.Do(func() {
		close(a.stop)
		<-a.done
		a.r.ahead.Store(false) // after the goroutine returned
	})
}

// Close stops reading ahead and waits for the goroutine; it does not close the Reader.
func (a *ReadAhead) Close() {
	if a.out != nil {
		a.finish()
	}
}
