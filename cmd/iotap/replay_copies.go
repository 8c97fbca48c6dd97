package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/private"
	"github.com/iotap/iotap/internal/s3req"
	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// Replaying N copies of a job at once (--copies N).
//
// Each copy replays onto its own part of the target, copy1 ... copyN: a subdirectory of a
// directory target, a key prefix under an s3:// target, each prepared with its own
// starting state. The copies run as one run (replay.RunCopies: one start, shared
// processors), each writing its own replay trace and summary (PREFIX.tT.rR.cK.*), and the
// run's figures go to PREFIX.tT.rR.copies.json: aggregate MB/s, IOPS and files/s over
// the run's span, and each copy's rates and latency percentiles.

// maxCopies bounds --copies: each copy is a goroutine team per traced thread, an open
// trace and a target of its own.
const maxCopies = 1024

// copySpec names copy k (from 1) of target spec: a subdirectory or a key prefix.
func copySpec(spec string, k int) string {
	name := "copy" + strconv.Itoa(k)
	if s3store.IsURL(spec) {
		return strings.TrimRight(spec, "/") + "/" + name
	}
	return filepath.Join(spec, name)
}

// openCopies opens the copies of target spec (creating their directories) and checks that
// each is empty unless --scratch or --prepare=skip.
func openCopies(ctx context.Context, e *env, o *replayOptions, spec string) ([]replayTarget, error) {
	var out []replayTarget
	s3o := o.S3
	s3o.Log = e.log
	for k := 1; k <= o.Copies; k++ {
		cs := copySpec(spec, k)
		if !s3store.IsURL(cs) {
			if err := os.Mkdir(cs, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return out, fmt.Errorf("replay: copy %d: %w", k, err)
			}
			if fi, err := os.Lstat(cs); err != nil || !fi.IsDir() {
				return out, usageErrorf("--copies: %s exists and is not a directory", cs)
			}
		}
		b, rc, err := openTarget(ctx, cs, s3o)
		if err != nil {
			return out, err
		}
		out = append(out, replayTarget{b: b, requests: rc})
		if o.Prepare == "skip" {
			continue
		}
		empty, err := b.IsEmpty(ctx)
		if err != nil {
			return out, fmt.Errorf("replay: target %s: %w", cs, err)
		}
		if !empty && !o.Scratch {
			return out, usageErrorf("--target %s is not empty: replay deletes what is there before each run; pass --scratch if it is a scratch area", cs)
		}
	}
	return out, nil
}

// prepareCopies makes the starting state in each copy of t, unless --prepare skip.
func prepareCopies(ctx context.Context, o *replayOptions, t replayTarget, st *replay.State, ro replay.Options) error {
	if o.Prepare == "skip" {
		return nil
	}
	for _, c := range t.copies {
		if err := replay.PrepareTarget(ctx, c.b, st, ro.FillRandom); err != nil {
			return err
		}
	}
	return nil
}

// replayCopies replays the copies of target t as one run, writing base.cK.{iotap,json}
// per copy and base.copies.json, and prints the run's figures. It returns the copies'
// summaries.
func replayCopies(ctx context.Context, e *env, o *replayOptions, tracePath, base string, t replayTarget, st *replay.State, ro replay.Options, rep int) ([]*replay.Summary, error) {
	n := len(t.copies)
	copies := make([]replay.Copy, n)
	writers := make([]*trace.Writer, n)
	defer func() {
		for _, c := range copies {
			if r, ok := c.Source.(*trace.Reader); ok {
				_ = r.Close()
			}
		}
	}()
	for k := range n {
		r, err := openTrace(tracePath)
		if err != nil {
			return nil, err
		}
		copies[k] = replay.Copy{Source: r, Backend: t.copies[k].b}
		h := replayHeader(r.Header(), t.copies[k].b, tracePath, ro, rep)
		h.Labels = append(h.Labels, trace.Label{Key: "replay.copy", Value: strconv.Itoa(k + 1)},
			trace.Label{Key: "replay.copies", Value: strconv.Itoa(n)})
		w, err := trace.Create(fmt.Sprintf("%s.c%d.iotap", base, k+1), h, trace.WriterOptions{Logger: e.log})
		if err != nil {
			return nil, fmt.Errorf("replay: create result: %w", err)
		}
		writers[k], copies[k].Sink = w, w
	}
	var done atomic.Uint64
	ro.Progress = &done
	stop := startProgress(e, o.Progress, int64(st.Ops)*int64(n), fmt.Sprintf("%s run %d, %d copies", t.b.Target().Path, rep+1, n), &done)
	t0 := time.Now()
	sums, runErr := replay.RunCopies(ctx, copies, ro)
	wall := time.Since(t0)
	stop()
	var files []string
	for k, w := range writers {
		name := fmt.Sprintf("%s.c%d", base, k+1)
		files = append(files, name+".iotap")
		if err := w.Close(); err != nil && runErr == nil {
			runErr = fmt.Errorf("replay: write result: %w", err)
		}
		if sums[k] != nil {
			if err := writeReplaySummary(name+".json", sums[k]); err != nil && runErr == nil {
				runErr = err
			}
		}
		if rc := t.copies[k].requests; rc != nil {
			if err := s3req.Write(name+".requests.json", rc.TakeRequests()); err != nil && runErr == nil {
				runErr = err
			}
		}
	}
	if countNil(sums) == n {
		return nil, runErr
	}
	cs, err := copiesFigures(ctx, e, files, sums, wall)
	if err != nil && runErr == nil {
		runErr = err
	}
	if cs != nil {
		if js, err := json.MarshalIndent(cs, "", "  "); err == nil {
			if err := private.WriteFile(base+".copies.json", append(js, '\n')); err != nil && runErr == nil {
				runErr = fmt.Errorf("replay: write copies summary: %w", err)
			}
		}
		var out strings.Builder // under the run's header (replayTargets)
		cs.print(&out, sums)
		_, _ = io.WriteString(e.stdout, termsafe.Text(out.String()))
	}
	if runErr != nil && errors.Is(runErr, replay.ErrDiverged) {
		return sums, &exitCodeError{code: exitError, err: runErr}
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

// CopiesSummary is the JSON of a --copies run (PREFIX.tT.rR.copies.json): the copies
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
func copiesFigures(ctx context.Context, e *env, files []string, sums []*replay.Summary, wall time.Duration) (*CopiesSummary, error) {
	per, _, err := loadTraces(ctx, e, files, stats.Options{})
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

// pct is the p-th percentile of h in ns (0 when empty).
func pct(h interface {
	TotalCount() int64
	ValueAtPercentile(float64) int64
}, p float64) int64 {
	if h.TotalCount() == 0 {
		return 0
	}
	return h.ValueAtPercentile(p)
}

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

// splitCopies returns the sides compare shows for one argument's traces (named name):
// one side per copy, named by its trace, when they are all the copies of one --copies run
// (labels replay.copy and replay.copies), in copy order; else the traces merged as one
// side.
func splitCopies(name string, per []*stats.Stats) (names []string, sides []*stats.Stats) {
	merged := func() ([]string, []*stats.Stats) {
		s := stats.New()
		for _, p := range per {
			s.Merge(p)
		}
		return []string{name}, []*stats.Stats{s}
	}
	if len(per) < 2 {
		return merged()
	}
	type copyOf struct {
		k int
		s *stats.Stats
	}
	var cs []copyOf
	var total string
	for _, p := range per {
		h := &p.Sources[0].Header
		k, err := strconv.Atoi(label(h, "replay.copy"))
		n := label(h, "replay.copies")
		if err != nil || n == "" || (total != "" && n != total) {
			return merged()
		}
		total = n
		cs = append(cs, copyOf{k, p})
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].k < cs[j].k })
	for i, c := range cs {
		if i > 0 && c.k == cs[i-1].k { // copies of different runs
			return merged()
		}
		names = append(names, strings.TrimSuffix(filepath.Base(c.s.Sources[0].Name), ".iotap"))
		sides = append(sides, c.s)
	}
	return names, sides
}

func label(h *trace.Header, key string) string {
	for _, l := range h.Labels {
		if l.Key == key {
			return l.Value
		}
	}
	return ""
}
