package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/report"
	"github.com/iotap/iotap/replay/campaign"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// compareCommands returns the compare subcommand.
func compareCommands() []*command {
	return []*command{
		{
			name:    "compare",
			summary: "compare traces of the same work on different storage, per operation, against the first",
			usage:   "[flags] BASELINE OTHER [OTHER...]  (each a trace, a directory of traces or a glob; the copies of a `replay --copies` run are a side each)",
			setup:   withOptions(runCompare),
		},
	}
}

type compareOptions struct {
	Format    string
	Output    string
	Force     bool
	Tolerance float64
	View      string
}

func (o *compareOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Format, "format", "text", "output `format`: text, json or html")
	fs.StringVarP(&o.Output, "output", "o", "", "write the comparison to `file` instead of standard output")
	fs.BoolVar(&o.Force, "force", false, "compare even if the traces do not look like the same work")
	fs.Float64Var(&o.Tolerance, "tolerance", 0.05, "largest relative difference in op counts and bytes between sides doing the same work, as a `fraction`")
	fs.StringVar(&o.View, "view", report.ViewSyscalls, "`view` to compare by: syscalls (the application's system calls, folded from FUSE requests as replay folds them) or requests (the FUSE requests the storage saw)")
}

func runCompare(ctx context.Context, e *env, o *compareOptions, args []string) error {
	if len(args) < 2 {
		return usageErrorf("compare needs at least two traces (the first is the baseline)")
	}
	switch o.Format {
	case "text", "json", "html":
	default:
		return usageErrorf("--format %q: want text, json or html", o.Format)
	}
	if o.View != report.ViewSyscalls && o.View != report.ViewRequests {
		return usageErrorf("--view %q: want syscalls or requests", o.View)
	}
	if !(o.Tolerance >= 0 && o.Tolerance < 1) { // NaN fails too
		return usageErrorf("--tolerance %g: want a fraction in [0, 1)", o.Tolerance)
	}
	var sides []*stats.Stats
	var names, damaged, dropped, all []string
	sideOf := map[string]int{} // a side's only trace -> its index in sides
	argNames := sideNames(args)
	for i, a := range args {
		in, err := traceInputs(ctx, []string{a}) // s3://bucket/prefix/ lists the traces below it
		if err != nil {
			return err
		}
		files, err := expandTraces(in)
		if err != nil {
			return err
		}
		if err := checkOutputNotInput(o.Output, files); err != nil {
			return err
		}
		per, dmg, err := loadTraces(ctx, e, files, stats.Options{})
		if err != nil {
			return err
		}
		all = append(all, files...)
		damaged = append(damaged, dmg...)
		dropped = append(dropped, droppedNotes(files, per)...)
		// The copies of one `replay --copies` run are a side each; other traces of one
		// argument are merged.
		n, s := splitCopies(argNames[i], per)
		if len(files) == 1 && len(s) == 1 {
			sideOf[files[0]] = len(sides)
		}
		names, sides = append(names, n...), append(sides, s...)
	}
	c := report.Compare(names, sides, o.Tolerance)
	if o.View == report.ViewSyscalls && !report.CompareCalls(c, sides) {
		c.Warnings = append(c.Warnings, "a side has no per-system-call view: compared per FUSE request")
	}
	if len(c.Mismatches) > 0 && !o.Force && len(damaged) > 0 {
		// The damage is the likely cause: a trace cut short lacks the end of the work.
		return fmt.Errorf("%w: %s, and the traces are not the same work (tolerance %g):\n  %s\nuse --force to compare the readable parts anyway",
			errDamaged, strings.Join(damaged, ", "), o.Tolerance, strings.Join(c.Mismatches, "\n  "))
	}
	if len(c.Mismatches) > 0 && !o.Force && len(dropped) > 0 {
		// So are the events a recorder dropped.
		return fmt.Errorf("%w: %s, and the traces are not the same work (tolerance %g):\n  %s\nuse --force to compare the recorded events anyway",
			errDropped, strings.Join(dropped, "; "), o.Tolerance, strings.Join(c.Mismatches, "\n  "))
	}
	if len(c.Mismatches) > 0 && !o.Force {
		return usageErrorf("the traces are not the same work (tolerance %g):\n  %s\nuse --force to compare anyway",
			o.Tolerance, strings.Join(c.Mismatches, "\n  "))
	}
	c.Forced = len(c.Mismatches) > 0
	var buf bytes.Buffer
	var err error
	switch o.Format {
	case "text":
		err = report.WriteCompareText(&buf, c)
		if err == nil { // what each S3 side cost in requests (replays onto s3:// targets)
			err = writeRequestSidecars(&buf, all, nil, func(f string) (uint64, uint64, bool) {
				i, ok := sideOf[f]
				if !ok || c.Sides[i].Job == nil {
					return 0, 0, false
				}
				return c.Sides[i].Job.ReadBytes, c.Sides[i].Job.WriteBytes, true
			})
		}
	case "json":
		err = report.WriteCompareJSON(&buf, c)
	case "html":
		err = report.WriteCompareHTML(&buf, c)
	}
	if err != nil {
		return fmt.Errorf("render comparison: %w", err)
	}
	if err := writeOutput(e, o.Output, buf.Bytes()); err != nil {
		return err
	}
	return errors.Join(damageError(damaged), droppedError(dropped))
}

// sideNames shortens the arguments to their base names without ".iotap" when those are
// unique, so that tables and legends stay readable.
func sideNames(args []string) []string {
	out := make([]string, len(args))
	seen := map[string]bool{}
	for i, a := range args {
		n := strings.TrimSuffix(filepath.Base(filepath.Clean(a)), ".iotap")
		if n == "" || n == "." || n == "/" || seen[n] {
			return args
		}
		seen[n] = true
		out[i] = n
	}
	return out
}

// splitCopies returns the sides compare shows for one argument's traces (named name):
// one side per copy, named by its trace, when they are all the copies of one --copies run
// (labels campaign.LabelCopy and LabelCopies), in copy order; else the traces merged as one
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
		k, err := strconv.Atoi(label(h, campaign.LabelCopy))
		n := label(h, campaign.LabelCopies)
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
