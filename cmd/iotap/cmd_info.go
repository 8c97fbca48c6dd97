package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// infoCommands returns the info subcommand.
func infoCommands() []*command {
	return []*command{
		{
			name:    "info",
			summary: "show a trace's header, operation counts, duration, drops and damage",
			usage:   "[flags] TRACE...",
			setup:   withOptions(runInfo),
		},
	}
}

type infoOptions struct {
	Strict bool
	traceStore
}

func (o *infoOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Strict, "strict", false, "stop at the first corrupt chunk instead of skipping it")
	o.addStoreFlags(fs)
}

// runInfo reads each trace to the end and describes it. A damaged trace (truncated tail,
// skipped chunks, no footer) is described in full and makes the command return errDamaged.
func runInfo(ctx context.Context, e *env, o *infoOptions, args []string) error {
	if len(args) == 0 {
		return usageErrorf("no trace given")
	}
	if err := o.usedBy(args...); err != nil {
		return err
	}
	args, err := traceInputs(ctx, e, args) // s3://bucket/prefix/ lists the traces below it
	if err != nil {
		return err
	}
	var damaged, dropped []string
	var out bytes.Buffer
	for i, a := range args {
		out.Reset()
		if i > 0 {
			out.WriteByte('\n')
		}
		d, drop, err := infoOne(ctx, e, o, a, &out)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(e.stdout, termsafe.Text(out.String())); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		if d {
			damaged = append(damaged, a)
		}
		if drop != "" {
			dropped = append(dropped, drop)
		}
	}
	var derr error
	if len(damaged) > 0 {
		derr = fmt.Errorf("%w: %s (see damage above)", errDamaged, strings.Join(damaged, ", "))
	}
	return errors.Join(derr, droppedError(dropped))
}

// openTraceArg opens a trace named on the command line: a file, "-" (the command's
// standard input) or an s3:// URL. Errors say which trace and what is wrong with it. Finish
// with the returned close function.
func openTraceArg(ctx context.Context, e *env, name string) (*trace.Reader, func() error, error) {
	r, closeFn, err := openTraceAny(ctx, e, name)
	if err != nil {
		return nil, nil, describeOpenError(name, err)
	}
	return r, closeFn, nil
}

// traceSummary is what info gathers in one pass over the events.
type traceSummary struct {
	events     uint64
	counts     [trace.NumOps]uint64
	errors     [trace.NumOps]uint64
	bytes      [trace.NumOps]int64 // Ret of successful reads/writes/copies
	first, end int64
	tids       map[uint32]struct{}
	legs       stats.Legs
}

func (s *traceSummary) add(ev *trace.Event) {
	if s.events == 0 || ev.Start < s.first {
		s.first = ev.Start
	}
	if s.events == 0 || ev.End() > s.end {
		s.end = ev.End()
	}
	s.events++
	op := ev.Op
	if op >= trace.NumOps {
		op = trace.OpInvalid
	}
	s.counts[op]++
	if ev.Errno != 0 {
		s.errors[op]++
	} else if op.Class() == trace.ClassData && ev.Ret > 0 && op != trace.OpLseek {
		s.bytes[op] += ev.Ret
	}
	s.tids[ev.Tid] = struct{}{}
	s.legs.Add(ev)
}

// infoOne describes one trace into out. It says whether the trace is damaged, and what its
// recorder dropped (droppedNote).
func infoOne(ctx context.Context, e *env, o *infoOptions, name string, out *bytes.Buffer) (damaged bool, dropped string, err error) {
	r, closeTrace, err := openTraceArg(ctx, e, name)
	if err != nil {
		return false, "", err
	}
	defer func() { _ = closeTrace() }() // read-only
	r.SetStrict(o.Strict)
	s, stopErr, err := summarize(ctx, r, name, o.Strict)
	if err != nil {
		return false, "", err
	}
	if err := writeInfoFields(out, name, r, &s); err != nil {
		return false, "", err
	}
	if f, ok := r.Footer(); ok {
		dropped = droppedNote(name, f)
	}
	if s.events > 0 {
		out.WriteByte('\n')
		fmt.Fprintf(out, "%-16s %12s %10s %16s\n", "op", "count", "errors", "bytes")
		for op := range trace.NumOps {
			if s.counts[op] == 0 {
				continue
			}
			b := ""
			if s.bytes[op] > 0 {
				b = fmt.Sprint(s.bytes[op])
			}
			fmt.Fprintf(out, "%-16s %12d %10d %16s\n", trace.Op(op), s.counts[op], s.errors[op], b)
		}
	}

	dmg := r.Damage()
	if len(dmg) == 0 {
		out.WriteString("\ndamage: none\n")
		return false, dropped, nil
	}
	fmt.Fprintf(out, "\ndamage: %d problem(s)\n", len(dmg))
	for _, d := range dmg {
		fmt.Fprintf(out, "  %v\n", d)
	}
	if stopErr != nil {
		out.WriteString("  stopped at the first damaged chunk (--strict)\n")
	}
	return true, dropped, nil
}

// summarize reads every event of r (trace name). With strict, a damaged chunk stops the
// reading: it is returned as stopErr, with what was read before it.
func summarize(ctx context.Context, r *trace.Reader, name string, strict bool) (s traceSummary, stopErr, err error) {
	s = traceSummary{tids: map[uint32]struct{}{}}
	for n := 0; ; n++ {
		if n&0xffff == 0 && ctx.Err() != nil {
			return s, nil, ctx.Err()
		}
		ev, err := r.Next()
		if err == io.EOF {
			return s, nil, nil
		}
		if err != nil {
			if !strict || (!errors.Is(err, trace.ErrCorrupt) && !errors.Is(err, trace.ErrTruncated)) {
				return s, nil, fmt.Errorf("read trace %s: %w", name, err)
			}
			return s, err, nil
		}
		s.add(ev)
	}
}

// writeInfoFields writes the header, the events' span and the footer of trace name, one
// aligned "field: value" line each.
func writeInfoFields(out *bytes.Buffer, name string, r *trace.Reader, s *traceSummary) error {
	h := r.Header()
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	// Writes to w fail only through Flush (it writes to a bytes.Buffer), checked below.
	line := func(k, format string, a ...any) { _, _ = fmt.Fprintf(w, "%s:\t%s\n", k, fmt.Sprintf(format, a...)) }
	q := termsafe.Name
	line("trace", "%s (format version %d)", q(name), h.Version)
	line("kind", "%s", orDash(q(h.Kind)))
	line("host", "%s", orDash(q(h.Hostname)))
	line("kernel", "%s", orDash(q(h.Kernel)))
	line("iotap", "%s", orDash(q(h.IotapVersion)))
	if !h.WallStart.IsZero() {
		line("started", "%s", h.WallStart.UTC().Format(time.RFC3339Nano))
	}
	t := h.Target
	if t.Path != "" || t.FSType != "" {
		line("target", "%s (%s from %s, mounted on %s)", orDash(q(t.Path)), orDash(q(t.FSType)), orDash(q(t.Source)), orDash(q(t.Mount)))
	}
	if f := describeFUSE(h.FUSE, h.Data); f != "" {
		line("fuse", "%s", f)
	}
	footer, ok := r.Footer()
	writeDataInfo(line, h, footer, &s.legs)
	if len(h.Command) > 0 {
		c := make([]string, len(h.Command))
		for i, a := range h.Command {
			c[i] = q(a)
		}
		line("command", "%s", strings.Join(c, " "))
	}
	if len(h.Labels) > 0 {
		ls := make([]string, len(h.Labels))
		for i, l := range h.Labels {
			ls[i] = q(l.Key) + "=" + q(l.Value)
		}
		line("labels", "%s", strings.Join(ls, " "))
	}
	line("events", "%d", s.events)
	if s.events > 0 {
		line("duration", "%s (first event start to last event end)", time.Duration(s.end-s.first))
		if !h.WallStart.IsZero() {
			line("span", "%s .. %s", h.WallStart.Add(time.Duration(s.first)).UTC().Format(time.RFC3339Nano),
				h.WallStart.Add(time.Duration(s.end)).UTC().Format(time.RFC3339Nano))
		}
	}
	line("threads", "%d seen in events, %d process records", len(s.tids), len(r.Processes()))
	line("files", "%d first-seen file records", len(r.Files()))
	for _, ss := range r.Samples() {
		line("samples", "%s %s (pid %d): %d resource samples", ss.Role, termsafe.Name(ss.Name), ss.Pid, len(ss.Points))
	}
	if ok {
		line("footer", "%d events written, %d dropped, %s blocked, %d recording errors, %d chunks",
			footer.Events, footer.Dropped, footer.Blocked, footer.Errors, footer.Chunks)
		if rt := footer.RoundTrip; rt.Start > 0 || rt.Run > 0 {
			run := "none sampled while the job ran"
			if rt.Samples > 0 {
				run = fmt.Sprintf("%v while it ran (median of %d samples)", rt.Run, rt.Samples)
			}
			line("round trip", "recording layer %v per request before the job, %s", rt.Start, run)
		}
		writeLegsInfo(line, h, *footer, &s.legs)
		if footer.Lost > 0 || footer.WriteError != "" {
			line("write error", "%s: the last %d events were lost (counted in dropped); the trace ends, closed, before them",
				q(footer.WriteError), footer.Lost)
		}
	} else {
		line("footer", "none (the writer did not close cleanly)")
	}
	return w.Flush()
}

// writeLegsInfo writes how the FUSE legs outside the layer were measured and, for the
// kernel's measurement, the median and 99th percentile of each leg.
func writeLegsInfo(line func(k, format string, a ...any), h *trace.Header, f trace.Footer, l *stats.Legs) {
	switch h.Legs {
	case trace.LegsKernel:
		line("legs", "kernel tracepoints: %d of %d events measured (%d from a system call, %d calls seen whole); %d missing, %d kernel records lost",
			l.Measured, l.Events, l.InCall, l.Calls, f.Legs.Missing, f.Legs.Lost)
		q := func(hh *hdrhistogram.Histogram) string {
			if hh == nil {
				return "-"
			}
			return fmt.Sprintf("p50 %v p99 %v", time.Duration(stats.LegQuantile(hh, 50)), time.Duration(stats.LegQuantile(hh, 99)))
		}
		line("  per request", "queue %s; reply %s", q(l.Queue), q(l.Reply))
		line("  per call", "entry %s; return %s; FUSE's share of the call %s", q(l.Entry), q(l.Return), q(l.Call))
		if l.ThinkCalls > 0 {
			line("  between calls", "%v over %d gaps (the application's own time), of which %v waiting for a CPU (over %d gaps measured)",
				time.Duration(l.Think), l.ThinkCalls, time.Duration(l.ThinkRunDelay), l.ThinkDelayed)
		}
	case trace.LegsProbe:
		note := ""
		if h.LegsNote != "" {
			note = " (kernel's not measured: " + termsafe.Name(h.LegsNote) + ")"
		}
		line("legs", "round-trip probe%s", note)
	case "":
		if h.LegsNote != "" {
			line("legs", "not measured: %s", termsafe.Name(h.LegsNote))
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeDataInfo writes how the reads and writes were recorded: through kernel
// passthrough, timed by the kernel, or through the layer, and why.
func writeDataInfo(line func(k, format string, a ...any), h *trace.Header, f *trace.Footer, l *stats.Legs) {
	switch h.Data {
	case trace.DataKernel:
		line("data", "kernel passthrough: %d reads and writes timed by the kernel in the application's thread", l.Passthrough)
		if f != nil {
			p := f.Passthrough
			files := fmt.Sprintf("%d opens through passthrough, %d through the layer", p.Opens, p.LayerOpens)
			if p.Refused != "" {
				files += " (" + termsafe.Name(p.Refused) + ")"
			}
			line("  files", "%s", files)
			line("  kernel", "%d synchronous and %d asynchronous calls timed, %d asynchronous submissions not timed, %d lost",
				p.Calls, p.Async, p.Unseen, p.Lost)
		}
		if l.Faults > 0 || (f != nil && f.Passthrough.Maps+f.Passthrough.MapsFull > 0) {
			maps := fmt.Sprintf("%d page faults of mapped files (reads and writes without a system call)", l.Faults)
			if f != nil {
				maps += fmt.Sprintf("; %d mmaps followed, %d not (the kernel's table was full)", f.Passthrough.Maps, f.Passthrough.MapsFull)
			}
			line("  mapped", "%s", maps)
		}
	case trace.DataLayer:
		note := ""
		if h.DataNote != "" {
			note = " (not kernel passthrough: " + termsafe.Name(h.DataNote) + ")"
		}
		line("data", "through the layer%s", note)
	}
}

func describeFUSE(f trace.FUSEOptions, data string) string {
	var parts []string
	if f.Cache != "" {
		parts = append(parts, "cache "+f.Cache)
	}
	if f.MaxRead != 0 {
		parts = append(parts, fmt.Sprintf("max read %d", f.MaxRead))
	}
	if f.MaxWrite != 0 {
		parts = append(parts, fmt.Sprintf("max write %d", f.MaxWrite))
	}
	if f.Cache != "" || f.EntryTimeout != 0 || f.AttrTimeout != 0 {
		parts = append(parts, fmt.Sprintf("entry timeout %s, attr timeout %s", f.EntryTimeout, f.AttrTimeout))
	}
	if f.DirectIO {
		parts = append(parts, "direct I/O")
	}
	if f.Writeback {
		parts = append(parts, "writeback cache")
	}
	switch {
	case f.Passthrough && data == trace.DataKernel:
		parts = append(parts, "kernel passthrough")
	case f.Passthrough:
		parts = append(parts, "PASSTHROUGH (reads and writes not seen)")
	}
	return strings.Join(parts, ", ")
}
