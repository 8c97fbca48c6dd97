package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/export"
	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// summaryCommands returns the summary subcommand.
func summaryCommands() []*command {
	return []*command{
		{
			name:    "summary",
			summary: "one row per trace or per job over many traces: runtime, I/O share, bytes, calls, p50/p99, top program and file",
			usage:   "[flags] TRACES... (files, directories, globs, s3://bucket/prefix/)",
			setup:   withOptions(runSummary),
		},
	}
}

type summaryOptions struct {
	Format string
	Output string
	By     string
	traceStore
}

func (o *summaryOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Format, "format", "table", "output `format`: table (for reading), csv, jsonl (one object per row) or parquet; "+
		"columns (schema docs/export.md): "+strings.Join(export.ColumnNames(export.SummaryColumns()), ","))
	fs.StringVarP(&o.Output, "output", "o", "", "write to `file` (or an s3:// object) instead of standard output")
	fs.StringVar(&o.By, "by", "trace", "a row per `trace`, or per job (its traces merged: the Slurm job id, SLURM_JOB_ID; a trace outside Slurm is a job of its own)")
	o.addStoreFlags(fs)
}

// runSummary reads the traces concurrently, as many at once as there are CPUs, each into its
// statistics, and writes a row per trace (or per job). A trace that cannot be read is named
// with the reason; the others are summed up.
func runSummary(ctx context.Context, e *env, o *summaryOptions, args []string) (err error) {
	if len(args) == 0 {
		return usageErrorf("want traces: files, directories, globs or s3://bucket/prefix/")
	}
	switch o.Format {
	case "table", "csv", "jsonl", "parquet":
	default:
		return usageErrorf("--format %q: want table, csv, jsonl or parquet", o.Format)
	}
	if o.By != "trace" && o.By != "job" {
		return usageErrorf("--by %q: want trace or job", o.By)
	}
	if err := o.usedBy(append([]string{o.Output}, args...)...); err != nil {
		return err
	}
	names, err := traceSet(ctx, e, args)
	if err != nil {
		return err
	}
	// --by job: the traces are read in the order of their jobs (their headers first), and a
	// job's statistics go once its last trace is in, so that those of a few jobs at a time
	// are held, not all.
	var keys []string // the job of each trace, by name's index
	var headerFails []traceFailure
	if o.By == "job" {
		names, keys, headerFails = jobOrder(ctx, e, names)
	}
	remaining := map[string]int{}
	for _, k := range keys {
		remaining[k]++
	}
	rows := make([][]export.Value, len(names)) // each trace's row (--by job: each job's, at its last trace)
	jobs := map[string]*export.Summary{}       // --by job: the jobs being read
	var mu sync.Mutex                          // guards rows, jobs, remaining, dropped
	var dropped []string
	fails := eachTrace(ctx, e, names, 0, func(i int, name string, r *trace.Reader) error {
		acc := stats.NewAccumulator(name, r.Header(), stats.Options{Names: r})
		for n := 0; ; n++ {
			if n&0xffff == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				mu.Lock()
				defer mu.Unlock()
				if keys != nil {
					remaining[keys[i]]-- // the job's row comes without it
					rows[i] = jobDone(jobs, remaining, keys[i])
				}
				return fmt.Errorf("read trace: %w", err)
			}
			acc.Add(ev)
		}
		footer, _ := r.Footer()
		s := export.NewSummary(name, r.Header(), acc.Finish(r, footer, r.Damage()), len(r.Damage()) > 0)
		mu.Lock()
		defer mu.Unlock()
		if n := droppedNote(name, footer); n != "" {
			dropped = append(dropped, n)
		}
		if keys == nil {
			rows[i] = s.Values() // the statistics go: a row per trace is what is kept
			return nil
		}
		key := keys[i]
		if job := s.Job(); job != "" {
			s.Name = "job " + job
		}
		if j := jobs[key]; j != nil {
			j.Merge(s)
		} else {
			jobs[key] = s
		}
		remaining[key]--
		rows[i] = jobDone(jobs, remaining, key)
		return nil
	})
	fails = append(headerFails, fails...)
	if err := ctx.Err(); err != nil {
		return err
	}
	rows = slices.DeleteFunc(rows, func(r []export.Value) bool { return r == nil })
	out := &exportOptions{Output: o.Output}
	w, end, err := out.output(ctx, e)
	if err != nil {
		return err
	}
	defer func() { err = end(err) }()
	if o.Format == "table" {
		if err := writeSummaryTable(w, rows); err != nil {
			return err
		}
	} else {
		sw, err := export.NewSummaryWriter(w, o.Format)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := sw.WriteValues(r); err != nil {
				return err
			}
		}
		if err := sw.Close(); err != nil {
			return err
		}
	}
	return traceOutcome(e, "summary", len(names)+len(headerFails), fails, dropped)
}

// jobDone returns the row of the job key once none of its traces remains to be read (and
// forgets its statistics), nil before.
func jobDone(jobs map[string]*export.Summary, remaining map[string]int, key string) []export.Value {
	if remaining[key] > 0 || jobs[key] == nil {
		return nil
	}
	row := jobs[key].Values()
	delete(jobs, key)
	return row
}

// jobOrder reads the traces' headers (as many at once as there are CPUs) and returns the
// traces that could be opened in the order of their jobs (the Slurm job id; a trace
// outside Slurm is a job of its own), each trace's job, and the traces that could not be
// opened.
func jobOrder(ctx context.Context, e *env, names []string) (ordered, keys []string, fails []traceFailure) {
	all := make([]string, len(names))
	fails = eachTrace(ctx, e, names, 0, func(i int, name string, r *trace.Reader) error {
		if job, ok := r.Header().Label("SLURM_JOB_ID"); ok && job != "" {
			all[i] = "job " + job
		} else {
			all[i] = "trace " + name
		}
		return nil
	})
	fails = slices.DeleteFunc(fails, func(f traceFailure) bool { return f.damaged }) // only the header was read
	idx := make([]int, 0, len(names))
	for i := range names {
		if all[i] != "" {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(all[a], all[b]) })
	for _, i := range idx {
		ordered, keys = append(ordered, names[i]), append(keys, all[i])
	}
	return ordered, keys, fails
}

// writeSummaryTable writes the rows for reading: the main columns, aligned.
func writeSummaryTable(w io.Writer, rows [][]export.Value) error {
	cols := export.SummaryColumns()
	idx := map[string]int{}
	for i, c := range cols {
		idx[c.Name] = i
	}
	get := func(r []export.Value, name string) export.Value { return r[idx[name]] }
	dur := func(r []export.Value, name string) string {
		if v := get(r, name); !v.Null {
			return format.Dur(v.Int)
		}
		return "-"
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "trace\thost\tjob\truntime\tI/O share\tread\twritten\tcalls\tmeta share\tp99 open\tp99 read\tp99 write\ttop program\ttop file\tdropped\t")
	for _, r := range rows {
		share := func(part, whole string) string {
			if w := get(r, whole).Int; w > 0 {
				return format.Pct(float64(get(r, part).Int) / float64(w))
			}
			return "-"
		}
		job := get(r, "job").Str
		if job == "" {
			job = "-"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n",
			termsafe.Name(get(r, "name").Str), termsafe.Name(get(r, "host").Str), termsafe.Name(job), dur(r, "runtime_ns"), share("io_ns", "node_ns"),
			format.Bytes(uint64(get(r, "read_bytes").Int)), format.Bytes(uint64(get(r, "write_bytes").Int)), get(r, "calls").Int,
			share("meta_ns", "dur_ns"), dur(r, "p99_open_ns"), dur(r, "p99_read_ns"), dur(r, "p99_write_ns"),
			termsafe.Name(orDash(get(r, "top_program").Str)), termsafe.Name(orDash(get(r, "top_file").Str)), get(r, "dropped").Int)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}
