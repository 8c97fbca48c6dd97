package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/private"
	"github.com/iotap/iotap/internal/quantile"
	"github.com/iotap/iotap/internal/s3req"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// Replaying N copies of a job at once (Spec.Copies).
//
// Each copy replays onto its own part of the target, copy1 ... copyN: a subdirectory of a
// directory target, a key prefix under a remote one, each prepared with its own starting
// state. The copies run as one run (replay.RunCopies: one start, shared processors), each
// writing its own replay trace and summary (PREFIX.tT.rR.cK.*), and the run's figures go
// to PREFIX.tT.rR.copies.json: aggregate MB/s, IOPS and files/s over the run's span, and
// each copy's rates and latency percentiles.

// Labels of the replay trace of a copy: which copy (from 1), and of how many.
const (
	LabelCopy   = "replay.copy"
	LabelCopies = "replay.copies"
)

// prepareCopies makes the starting state in each copy of t, unless Prepare "skip".
func (c *Campaign) prepareCopies(ctx context.Context, t target, st *replay.State) error {
	if c.spec.Prepare == "skip" {
		return nil
	}
	for _, cp := range t.copies {
		if err := replay.PrepareTarget(ctx, cp.b, st, c.engine.FillRandom); err != nil {
			return err
		}
	}
	return nil
}

// runCopies replays the copies of run r and prints the run's figures.
func (c *Campaign) runCopies(ctx context.Context, rs *runs, r run) error {
	sums, err := c.replayCopies(ctx, rs.st, r)
	for k, sum := range sums {
		if sum != nil {
			rs.traces[r.i] = append(rs.traces[r.i], fmt.Sprintf("%s.c%d.iotap", r.base, k+1))
			rs.diverged += sum.Divergences
			rs.n++
		}
	}
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted: the result traces and summaries above cover the ops replayed until then")
	}
	return err
}

// replayCopies replays the copies of run r's target as one run, writing base.cK.{iotap,json}
// per copy and base.copies.json, and prints the run's figures. It returns the copies'
// summaries.
func (c *Campaign) replayCopies(ctx context.Context, st *replay.State, r run) ([]*replay.Summary, error) {
	n := len(r.t.copies)
	copies := make([]replay.Copy, n)
	writers := make([]*trace.Writer, n)
	defer func() {
		for _, cp := range copies {
			if tr, ok := cp.Source.(*trace.Reader); ok {
				_ = tr.Close()
			}
		}
	}()
	for k := range n {
		tr, err := openTrace(c.spec.Trace)
		if err != nil {
			return nil, err
		}
		copies[k] = replay.Copy{Source: tr, Backend: r.t.copies[k].b}
		h := c.replayHeader(tr.Header(), r.t.copies[k].b, r.rep)
		h.Labels = append(h.Labels, trace.Label{Key: LabelCopy, Value: strconv.Itoa(k + 1)},
			trace.Label{Key: LabelCopies, Value: strconv.Itoa(n)})
		w, err := trace.Create(fmt.Sprintf("%s.c%d.iotap", r.base, k+1), h, trace.WriterOptions{Logger: c.env.Log})
		if err != nil {
			return nil, fmt.Errorf("replay: create result: %w", err)
		}
		writers[k], copies[k].Sink = w, w
	}
	ro := c.engine
	var done atomic.Uint64
	ro.Progress = &done
	stop := startProgress(c.env.Stderr, c.spec.Progress, int64(st.Ops)*int64(n), fmt.Sprintf("%s run %d, %d copies", r.t.b.Target().Path, r.rep+1, n), &done)
	t0 := time.Now()
	sums, runErr := replay.RunCopies(ctx, copies, ro)
	wall := time.Since(t0)
	stop()
	var files []string
	for k, w := range writers {
		name := fmt.Sprintf("%s.c%d", r.base, k+1)
		files = append(files, name+".iotap")
		if err := w.Close(); err != nil && runErr == nil {
			runErr = fmt.Errorf("replay: write result: %w", err)
		}
		if sums[k] != nil {
			if err := writeReplaySummary(name+".json", sums[k]); err != nil && runErr == nil {
				runErr = err
			}
		}
		if rc := r.t.copies[k].requests; rc != nil {
			if err := s3req.Write(name+".requests.json", rc.TakeRequests()); err != nil && runErr == nil {
				runErr = err
			}
		}
	}
	if countNil(sums) == n {
		return nil, runErr
	}
	cs, err := c.copiesFigures(ctx, files, sums, wall)
	if err != nil && runErr == nil {
		runErr = err
	}
	if cs != nil {
		if js, err := json.MarshalIndent(cs, "", "  "); err == nil {
			if err := private.WriteFile(r.base+".copies.json", append(js, '\n')); err != nil && runErr == nil {
				runErr = fmt.Errorf("replay: write copies summary: %w", err)
			}
		}
		var out strings.Builder // under the run's header (printRunHeader)
		cs.print(&out, sums)
		_, _ = io.WriteString(c.env.Stdout, termsafe.Text(out.String()))
	}
	return sums, runErr
}

func countNil(s []*replay.Summary) int {
	n := 0
	for _, x := range s {
		if x == nil {
			n++
		}
	}
	return n
}

// writeReplaySummary writes a replay summary as JSON.
func writeReplaySummary(path string, sum *replay.Summary) error {
	js, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return fmt.Errorf("replay: encode summary: %w", err)
	}
	if err := private.WriteFile(path, append(js, '\n')); err != nil {
		return fmt.Errorf("replay: write summary: %w", err)
	}
	return nil
}

// copiesSchema names the JSON form of a CopiesSummary; docs/copies.md documents it.
const copiesSchema = "iotap.copies/v1"

// CopiesSummary is the JSON of a copies run (PREFIX.tT.rR.copies.json): the copies
// together, and each. Rates are over a span: the aggregate's from the common start to
// the end of the last copy, a copy's from the common start to its own end.
type CopiesSummary struct {
	Schema    string        `json:"schema"` // copiesSchema
	Copies    int           `json:"copies"`
	Aggregate CopyFigures   `json:"aggregate"`
	PerCopy   []CopyFigures `json:"per_copy"`
}

// CopyFigures are the rates and latencies of one copy, or of all of them together.
// IOPS counts reads and writes; files/s counts opens and creates of files; bytes are
// those read and written.
type CopyFigures struct {
	Copy     int     `json:"copy,omitempty"` // 1..N; 0 for the aggregate
	Trace    string  `json:"trace,omitempty"`
	SpanNs   int64   `json:"span_ns"`
	Ops      uint64  `json:"ops"`
	IOs      uint64  `json:"ios"`   // reads and writes
	Files    uint64  `json:"files"` // opens and creates of files
	Bytes    int64   `json:"bytes"` // read and written
	MBps     float64 `json:"mb_per_s"`
	IOPS     float64 `json:"iops"`
	FilesPS  float64 `json:"files_per_s"`
	OpsPS    float64 `json:"ops_per_s"`
	DataP50  int64   `json:"data_p50_ns"` // reads, writes, fsyncs, flushes, ... (trace.ClassData)
	DataP99  int64   `json:"data_p99_ns"`
	MetaP50  int64   `json:"meta_p50_ns"` // every other op
	MetaP99  int64   `json:"meta_p99_ns"`
	Diverged uint64  `json:"divergences"`
}

// copiesFigures computes the run's figures from the copies' summaries and replay traces.
func (c *Campaign) copiesFigures(ctx context.Context, files []string, sums []*replay.Summary, wall time.Duration) (*CopiesSummary, error) {
	per, err := c.env.Load(ctx, files)
	if err != nil {
		return nil, err
	}
	cs := &CopiesSummary{Schema: copiesSchema, Copies: len(sums)}
	all := stats.New()
	for k, s := range per {
		sum := sums[k]
		if sum == nil {
			continue
		}
		all.Merge(s)
		f := figures(s, sum, sum.ReplaySpan)
		f.Copy, f.Trace = k+1, files[k]
		cs.PerCopy = append(cs.PerCopy, f)
		cs.Aggregate.SpanNs = max(cs.Aggregate.SpanNs, int64(sum.ReplaySpan))
	}
	agg := cs.Aggregate.SpanNs
	if agg == 0 {
		agg = int64(wall)
	}
	cs.Aggregate = figures(all, nil, time.Duration(agg))
	for _, f := range cs.PerCopy {
		cs.Aggregate.Diverged += f.Diverged
	}
	return cs, nil
}

// figures are the rates over span and latency percentiles of the ops in s; sum adds the
// divergences of one copy.
func figures(s *stats.Stats, sum *replay.Summary, span time.Duration) CopyFigures {
	f := CopyFigures{SpanNs: int64(span)}
	data, meta := stats.NewHist(), stats.NewHist()
	for i := range s.Ops {
		o := &s.Ops[i]
		op := trace.Op(i)
		f.Ops += o.Count
		switch op {
		case trace.OpRead, trace.OpWrite:
			f.IOs += o.Count
			f.Bytes += int64(o.Bytes)
		case trace.OpOpen, trace.OpCreate, trace.OpTmpfile:
			f.Files += o.Count
		}
		if o.Hist == nil {
			continue
		}
		if op.Class() == trace.ClassData {
			data.Merge(o.Hist)
		} else {
			meta.Merge(o.Hist)
		}
	}
	f.DataP50, f.DataP99 = pct(data, 50), pct(data, 99)
	f.MetaP50, f.MetaP99 = pct(meta, 50), pct(meta, 99)
	if sec := span.Seconds(); sec > 0 {
		f.MBps = float64(f.Bytes) / 1e6 / sec
		f.IOPS = float64(f.IOs) / sec
		f.FilesPS = float64(f.Files) / sec
		f.OpsPS = float64(f.Ops) / sec
	}
	if sum != nil {
		f.Diverged = sum.Divergences
	}
	return f
}

// pct is the p-th percentile of h in ns (0 when empty; rank ⌈p/100·n⌉, package
// internal/quantile).
func pct(h quantile.Hist, p float64) int64 { return quantile.Value(h, p) }

// print writes the copies' table and the aggregate.
func (cs *CopiesSummary) print(w io.Writer, sums []*replay.Summary) {
	var div, diffs uint64
	var lagP99 time.Duration
	for _, s := range sums {
		if s != nil {
			div += s.Divergences
			diffs += s.BackendDifferences
			lagP99 = max(lagP99, s.LagP99)
		}
	}
	_, _ = fmt.Fprintf(w, "  divergences %d, backend differences %d, worst issue lag p99 %v (per copy: PREFIX.cK.json)\n", div, diffs, lagP99)
	_, _ = fmt.Fprintf(w, "  %-9s %10s %10s %10s %10s %10s %10s %10s %10s %10s\n", "copy", "span", "MB/s", "IOPS", "files/s", "ops/s", "data p50", "data p99", "meta p50", "meta p99")
	row := func(name string, f CopyFigures) {
		_, _ = fmt.Fprintf(w, "  %-9s %10s %10.1f %10.0f %10.1f %10.0f %10s %10s %10s %10s\n", name,
			time.Duration(f.SpanNs).Round(time.Millisecond), f.MBps, f.IOPS, f.FilesPS, f.OpsPS,
			orDashDur(f.DataP50), orDashDur(f.DataP99), orDashDur(f.MetaP50), orDashDur(f.MetaP99))
	}
	for _, f := range cs.PerCopy {
		row(strconv.Itoa(f.Copy), f)
	}
	row("all", cs.Aggregate)
}

func orDashDur(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return format.Dur(ns)
}
