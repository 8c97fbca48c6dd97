package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/s3req"
	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/report"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// reportCommands returns the report subcommand.
func reportCommands() []*command {
	return []*command{
		{
			name:    "report",
			summary: "report latency percentiles per operation, processes, files, intervals and access patterns of traces",
			usage:   "[flags] TRACE|DIR|GLOB...",
			setup:   withOptions(runReport),
		},
	}
}

type reportOptions struct {
	Format   string
	Output   string
	Top      int
	By       string
	Table    string
	Interval time.Duration
	Prices   string
	traceStore
}

func (o *reportOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Format, "format", "text", "output `format`: text, json, csv or html")
	fs.StringVarP(&o.Output, "output", "o", "", "write the report to `file` instead of standard output")
	fs.IntVar(&o.Top, "top", 10, "rows in the top-N tables (processes, files, directories)")
	fs.StringVar(&o.By, "by", "", "also split the figures by `key`: host, label:KEY (a label's value), comm or exe (the program each process ran last), uid (the caller's user); one view per value")
	fs.StringVar(&o.Table, "table", "ops", "with --format csv, the `table` to write: "+strings.Join(report.CSVTables, ", "))
	fs.StringVar(&o.Prices, "s3-prices", "", "for replays on s3:// targets, estimate request cost from `prices`: TYPE=PRICE per request, or TYPE=PRICE/N per N requests, TYPE an S3 operation (GetObject, PutObject, ...) or a billing class (GET: reads; PUT: writes, copies, lists, multipart calls; DELETE), e.g. GET=0.0004/1000,PUT=0.005/1000")
	fs.DurationVar(&o.Interval, "interval", 0, "width of the per-interval series; 0: 1s, finer for traces shorter than 20s (the width doubles for very long traces)")
	o.addStoreFlags(fs)
}

func runReport(ctx context.Context, e *env, o *reportOptions, args []string) error {
	if len(args) == 0 {
		return usageErrorf("no trace given")
	}
	switch o.Format {
	case "text", "json", "csv", "html":
	default:
		return usageErrorf("--format %q: want text, json, csv or html", o.Format)
	}
	if o.Top <= 0 {
		return usageErrorf("--top %d: want a positive number", o.Top)
	}
	if o.Interval < 0 {
		return usageErrorf("--interval %v: want a positive duration (or 0 for automatic)", o.Interval)
	}
	if o.Format == "csv" && !contains(report.CSVTables, o.Table) {
		return usageErrorf("--table %q: want one of %s", o.Table, strings.Join(report.CSVTables, ", "))
	}
	if _, err := report.GroupKey(o.By, &trace.Header{}); err != nil && !report.ByEvent(o.By) {
		return usageErrorf("--by %q: want host, label:KEY, comm, exe or uid", o.By)
	}
	var prices report.Prices
	if o.Prices != "" {
		p, err := report.ParsePrices(o.Prices)
		if err != nil {
			return usageErrorf("--s3-prices: %v", err)
		}
		prices = p
	}
	if err := o.usedBy(args...); err != nil {
		return err
	}
	args, err := traceInputs(ctx, e, args) // s3://bucket/prefix/ lists the traces below it
	if err != nil {
		return err
	}
	files, err := expandTraces(args)
	if err != nil {
		return err
	}
	if err := checkOutputNotInput(o.Output, files); err != nil {
		return err
	}
	if report.ByProgram(o.By) && slices.Contains(files, "-") {
		return usageErrorf("--by %s reads each trace twice (its process records first): it cannot read standard input", o.By)
	}
	out, err := openOutput(o.Output)
	if err != nil {
		return err
	}
	defer out.abandon()
	per, damaged, err := loadTracesBy(ctx, e, files, stats.Options{Interval: o.Interval}, o.By)
	if err != nil {
		return err
	}
	r, err := report.Build(per, report.Options{Top: o.Top, By: o.By})
	if err != nil {
		return err
	}
	var sb strings.Builder
	if !report.ByEvent(o.By) { // programs and users are not nodes: none is a straggler
		if err := writeStragglers(&sb, r.Groups); err != nil {
			return err
		}
	}
	for l := range strings.Lines(sb.String()) {
		r.Stragglers = append(r.Stragglers, strings.TrimRight(l, "\n"))
	}
	var buf bytes.Buffer
	switch o.Format {
	case "text":
		err = report.WriteText(&buf, r)
		if err == nil {
			err = writeRequestSidecars(&buf, files, prices, nil)
		}
	case "json":
		err = report.WriteJSON(&buf, r)
	case "csv":
		err = report.WriteCSV(&buf, r, o.Table)
	case "html":
		err = report.WriteHTML(&buf, r)
	}
	if err != nil {
		return err
	}
	if err := out.write(e, buf.Bytes()); err != nil {
		return err
	}
	return errors.Join(damageError(damaged), droppedError(droppedNotes(files, per)))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// damageError returns an errDamaged error naming the damaged traces, or nil.
func damageError(damaged []string) error {
	if len(damaged) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (the report covers the readable part)", errDamaged, strings.Join(damaged, ", "))
}

// expandTraces turns arguments into trace files: a file as is, a directory into the
// *.iotap files directly inside it (sorted), a glob pattern into its matches. "-" is
// standard input.
func expandTraces(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if a == "-" || s3store.IsURL(a) {
			out = append(out, a)
			continue
		}
		st, err := os.Stat(a)
		switch {
		case err == nil && st.IsDir():
			m, err := filepath.Glob(filepath.Join(a, "*.iotap"))
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", a, err)
			}
			if len(m) == 0 {
				return nil, fmt.Errorf("no *.iotap trace in directory %s", a)
			}
			sort.Strings(m)
			out = append(out, m...)
		case err == nil:
			out = append(out, a)
		case errors.Is(err, fs.ErrNotExist) && strings.ContainsAny(a, "*?["):
			m, gerr := filepath.Glob(a)
			if gerr != nil {
				return nil, usageErrorf("bad pattern %q: %v", a, gerr)
			}
			if len(m) == 0 {
				return nil, fmt.Errorf("no trace matches %s", a)
			}
			sort.Strings(m)
			out = append(out, m...)
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("trace %s does not exist", a)
		default:
			return nil, fmt.Errorf("open trace: %w", err)
		}
	}
	return out, nil
}

// loadTraces aggregates each trace file into its own Stats, several at a time. It returns
// the names of damaged traces (still aggregated) separately from hard errors.
func loadTraces(ctx context.Context, e *env, files []string, so stats.Options) ([]*stats.Stats, []string, error) {
	return loadTracesBy(ctx, e, files, so, "")
}

// loadTracesBy is loadTraces with each trace's events split into the groups of report
// --by by when it splits events (comm, exe, uid: report.EventGroup).
func loadTracesBy(ctx context.Context, e *env, files []string, so stats.Options, by string) ([]*stats.Stats, []string, error) {
	per := make([]*stats.Stats, len(files))
	errs := make([]error, len(files))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	// Fewer traces than CPUs leave CPUs free: each trace's reading and folding run beside
	// its aggregation.
	so.CallsAside = len(files) < runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for i, f := range files {
		if f == "-" {
			per[i], errs[i] = loadTrace(ctx, e, f, so, by) // standard input: read it here, once
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			per[i], errs[i] = loadTrace(ctx, e, f, so, by)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	var damaged []string
	for i, s := range per {
		if d := s.Sources[0].Damage; len(d) > 0 {
			damaged = append(damaged, files[i])
			for _, x := range d {
				_, _ = fmt.Fprintf(e.stderr, "iotap: %s: damaged: %s\n", termsafe.Name(files[i]), termsafe.Text(x))
			}
		}
	}
	return per, damaged, nil
}

func loadTrace(ctx context.Context, e *env, file string, so stats.Options, by string) (*stats.Stats, error) {
	if report.ByEvent(by) {
		var procs []trace.Process
		if report.ByProgram(by) {
			var err error
			if procs, err = processRecords(ctx, e, file); err != nil {
				return nil, err
			}
		}
		so.Group = report.EventGroup(by, procs)
	}
	r, closeTrace, err := openTraceAny(ctx, e, file)
	if err != nil {
		return nil, describeOpenError(file, err)
	}
	defer closeTrace() //nolint:errcheck // read only: nothing to lose on close
	// The per-system-call view folds requests by their paths.
	so.Names = r
	acc := stats.NewAccumulator(file, r.Header(), so)
	next := r.Next
	if so.CallsAside {
		// The next chunk is read and decoded while the Accumulator takes this one's events.
		ra := trace.NewReadAhead(r)
		defer ra.Close()
		next = ra.Next
	}
	for n := 0; ; n++ {
		if n&0xffff == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		ev, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read trace %s: %w", file, err)
		}
		acc.Add(ev)
	}
	footer, _ := r.Footer()
	return acc.Finish(r, footer, r.Damage()), nil
}

// processRecords reads a trace through for its process records (the last of each
// thread), which name the groups of report --by comm and exe before the events are
// aggregated.
func processRecords(ctx context.Context, e *env, file string) ([]trace.Process, error) {
	r, closeTrace, err := openTraceAny(ctx, e, file)
	if err != nil {
		return nil, describeOpenError(file, err)
	}
	defer closeTrace() //nolint:errcheck // read only: nothing to lose on close
	for n := 0; ; n++ {
		if n&0xffff == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if _, err := r.Next(); err == io.EOF {
			return r.Processes(), nil
		} else if err != nil {
			return nil, fmt.Errorf("read trace %s: %w", file, err)
		}
	}
}

func describeOpenError(file string, err error) error {
	if file == "-" {
		file = "standard input"
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("trace %s does not exist", file)
	case errors.Is(err, trace.ErrNotTrace):
		return fmt.Errorf("%s is not an iotap trace (wrong magic bytes)", file)
	case errors.Is(err, trace.ErrVersion):
		return fmt.Errorf("%s: %w", file, err)
	case errors.Is(err, trace.ErrEmpty):
		return fmt.Errorf("%s is empty or was cut short before its header: %w", file, err)
	case errors.Is(err, trace.ErrCorrupt):
		return fmt.Errorf("%s: corrupt header: %w", file, err)
	}
	return fmt.Errorf("open trace %s: %w", file, err)
}

// writeRequestSidecars appends, for each replay trace with a request sidecar next to it
// (PREFIX.tN.rM.requests.json, written by replays on s3:// targets), the S3 requests each
// filesystem call issued in the replay phase, with retries, throttles and an optional cost.
//
// used, when not nil, gives the bytes the calls of a trace's side read and wrote, shown
// against the bytes the requests moved.
func writeRequestSidecars(w io.Writer, files []string, prices report.Prices, used func(file string) (read, written uint64, ok bool)) error {
	for _, f := range files {
		if f == "-" || s3store.IsURL(f) {
			continue
		}
		side := strings.TrimSuffix(f, ".iotap") + ".requests.json"
		if _, err := os.Stat(side); err != nil {
			continue
		}
		phases, err := s3req.Read(side)
		if err != nil {
			return err
		}
		for _, ph := range phases {
			if ph.Phase != "replay" {
				continue
			}
			if _, err := fmt.Fprintf(w, "\n%s\n", filepath.Base(f)); err != nil {
				return err
			}
			report.WriteRequests(w, ph, prices)
			if used != nil {
				if r, wr, ok := used(f); ok {
					report.WriteRequestUse(w, ph, r, wr)
				}
			}
		}
	}
	return nil
}
