package procsample

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/iotap/iotap/trace"
)

// DefaultInterval is the sampling interval when none is given.
const DefaultInterval = 100 * time.Millisecond

// handEvery is how often a Sampler hands its readings to the sink.
const handEvery = time.Second

// Process is a process to sample.
type Process struct {
	Role trace.SampleRole
	Pid  int
	Name string // command name; Comm(Pid) when empty
}

// Sink takes resource series as they are sampled: a *trace.Writer.
type Sink interface {
	AddSamples(trace.Samples)
}

// Summary is what a Sampler saw of one process.
type Summary struct {
	Process
	Samples   int
	PeakRSS   uint64
	MeanRSS   uint64
	User, Sys time.Duration // CPU time used between the first and the last sample
	Gone      bool          // the process exited (or could not be read) before the end
	Err       error         // why sampling it stopped early, or could not start
}

// Sampler samples processes on one goroutine until Stop.
type Sampler struct {
	sink     Sink
	origin   int64
	interval time.Duration
	log      *slog.Logger

	stop chan struct{}
	done chan struct{}
	once sync.Once

	// Owned by the sampling goroutine until done is closed.
	procs []*tracked
}

type tracked struct {
	Summary
	r       *reader
	first   trace.Sample
	last    trace.Sample
	rssSum  float64
	pending []trace.Sample
}

// Start samples procs every interval (DefaultInterval if not positive), with sample times
// in ns since origin (a trace.Now reading: the trace's Origin), and hands the readings to
// sink. The first reading is taken before Start returns. A process that cannot be read is
// reported by Stop and not sampled.
func Start(sink Sink, origin int64, interval time.Duration, procs []Process, log *slog.Logger) *Sampler {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sampler{sink: sink, origin: origin, interval: interval, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	for _, p := range procs {
		if p.Name == "" {
			p.Name = Comm(p.Pid)
		}
		t := &tracked{Summary: Summary{Process: p}}
		r, err := newReader(p.Pid)
		if err != nil {
			t.Gone, t.Err = true, err
		} else {
			t.r = r
		}
		s.procs = append(s.procs, t)
	}
	s.sample()
	go s.run()
	return s
}

func (s *Sampler) run() {
	defer close(s.done)
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	hand := time.NewTicker(handEvery)
	defer hand.Stop()
	for {
		select {
		case <-tick.C:
			s.sample()
		case <-hand.C:
			s.hand()
		case <-s.stop:
			s.sample()
			s.hand()
			for _, t := range s.procs {
				if t.r != nil {
					t.r.close()
					t.r = nil
				}
			}
			return
		}
	}
}

// sample reads every process still there once.
func (s *Sampler) sample() {
	now := trace.Now() - s.origin
	for _, t := range s.procs {
		if t.r == nil {
			continue
		}
		p, err := t.r.read()
		if err != nil {
			t.r.close()
			t.r = nil
			t.Gone, t.Err = true, err
			if !errors.Is(err, ErrGone) {
				s.log.Warn("procsample: stop sampling", "pid", t.Pid, "err", err)
			}
			continue
		}
		p.T = now
		if t.Samples == 0 {
			t.first = p
		}
		t.last = p
		t.Samples++
		t.PeakRSS = max(t.PeakRSS, p.RSS)
		t.rssSum += float64(p.RSS)
		t.pending = append(t.pending, p)
	}
}

// hand gives the readings taken since the last hand-over to the sink.
func (s *Sampler) hand() {
	for _, t := range s.procs {
		if len(t.pending) == 0 {
			continue
		}
		s.sink.AddSamples(trace.Samples{Role: t.Role, Pid: uint32(t.Pid), Name: t.Name, Points: t.pending})
		t.pending = nil // the sink keeps the slice
	}
}

// Stop takes a last reading, hands everything to the sink and returns what was seen of
// each process, in the order given to Start. It may be called more than once.
func (s *Sampler) Stop() []Summary {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	out := make([]Summary, len(s.procs))
	for i, t := range s.procs {
		out[i] = t.Summary
		if t.Samples > 0 {
			out[i].MeanRSS = uint64(t.rssSum / float64(t.Samples))
			out[i].User = t.last.User - t.first.User
			out[i].Sys = t.last.Sys - t.first.Sys
		}
	}
	return out
}
