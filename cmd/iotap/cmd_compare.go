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

	"github.com/iotap/iotap/replay/campaign"
	"github.com/iotap/iotap/report"
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
	traceStore
}

func (o *compareOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Format, "format", "text", "output `format`: text, json or html")
	fs.StringVarP(&o.Output, "output", "o", "", "write the comparison to `file` instead of standard output")
	fs.BoolVar(&o.Force, "force", false, "compare even if the traces do not look like the same work")
	fs.Float64Var(&o.Tolerance, "tolerance", 0.05, "largest relative difference in op counts and bytes between sides doing the same work, as a `fraction`")
	fs.StringVar(&o.View, "view", report.ViewSyscalls, "`view` to compare by: syscalls (the application's system calls, folded from FUSE requests as replay folds them) or requests (the FUSE requests the storage saw)")
	o.addStoreFlags(fs)
}

func runCompare(ctx context.Context, e *env, o *compareOptions, args []string) error {
	if err := o.check(args); err != nil {
		return err
	}
	if err := o.usedBy(args...); err != nil {
		return err
	}
	dst, err := openOutput(o.Output)
	if err != nil {
		return err
	}
	defer dst.abandon()
	in, err := loadSides(ctx, e, o, args)
	if err != nil {
		return err
	}
	c := report.Compare(in.names, in.sides, o.Tolerance)
	if o.View == report.ViewSyscalls && !report.CompareCalls(c, in.sides) {
		c.Warnings = append(c.Warnings, "a side has no per-system-call view: compared per FUSE request")
	}
	if err := in.refuse(c, o); err != nil {
		return err
	}
	c.Forced = len(c.Mismatches) > 0
	out, err := in.render(c, o.Format)
	if err != nil {
		return fmt.Errorf("render comparison: %w", err)
	}
	if err := dst.write(e, out); err != nil {
		return err
	}
	return errors.Join(damageError(in.damaged), droppedError(in.dropped))
}

// check checks compare's flags and the number of its arguments.
func (o *compareOptions) check(args []string) error {
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
	return nil
}

// compareSides are the sides of a comparison, loaded from compare's arguments.
type compareSides struct {
	names            []string
	sides            []*stats.Stats
	files            []string       // every trace, in argument order
	sideOf           map[string]int // a side's only trace -> its index in sides
	damaged, dropped []string       // the damaged traces, and the notes of those whose recorder dropped events
}

// loadSides loads one side per argument (each a trace, a directory of traces, a glob or
// an s3:// prefix), or one per copy of a `replay --copies` run.
func loadSides(ctx context.Context, e *env, o *compareOptions, args []string) (*compareSides, error) {
	in := &compareSides{sideOf: map[string]int{}}
	argNames := sideNames(args)
	var targets []string // per side, the target of a side of replay traces (replayTarget)
	for i, a := range args {
		traces, err := traceInputs(ctx, e, []string{a}) // s3://bucket/prefix/ lists the traces below it
		if err != nil {
			return nil, err
		}
		files, err := expandTraces(traces)
		if err != nil {
			return nil, err
		}
		if err := checkOutputNotInput(o.Output, files); err != nil {
			return nil, err
		}
		per, dmg, err := loadTraces(ctx, e, files, stats.Options{})
		if err != nil {
			return nil, err
		}
		in.files = append(in.files, files...)
		in.damaged = append(in.damaged, dmg...)
		in.dropped = append(in.dropped, droppedNotes(files, per)...)
		// The copies of one `replay --copies` run are a side each; other traces of one
		// argument are merged.
		n, s := splitCopies(argNames[i], per)
		if len(files) == 1 && len(s) == 1 {
			in.sideOf[files[0]] = len(in.sides)
		}
		for range s {
			targets = append(targets, "")
		}
		if len(s) == 1 {
			targets[len(targets)-1] = replayTarget(per)
		}
		in.names, in.sides = append(in.names, n...), append(in.sides, s...)
	}
	in.names = nameReplaySides(in.names, targets, in.sides)
	return in, nil
}

// replayTarget names the target the traces of one side replayed onto, with the settings
// the replay was given for it (an S3 target's query: s3://bucket/prefix/?memory_limit=64MiB),
// or "" unless they are all replays onto one target with the same settings.
func replayTarget(per []*stats.Stats) string {
	name := ""
	for i, p := range per {
		for _, src := range p.Sources {
			h := &src.Header
			if h.Kind != "replay" || h.Target.Path == "" {
				return ""
			}
			n := h.Target.Path
			if opts := label(h, "replay.s3_options"); opts != "" {
				n += "?" + strings.Join(strings.Fields(opts), "&")
			}
			if i > 0 && n != name {
				return ""
			}
			name = n
		}
	}
	return name
}

// nameReplaySides names a side of replay traces by its target (targets[i], "" for other
// sides) rather than by its argument: a replay's file names (PREFIX.t1.r1) do not say
// what it replayed onto. Sides onto the same target are told apart by their run
// (replay.run); names that would still be the same keep the arguments' names.
func nameReplaySides(names, targets []string, sides []*stats.Stats) []string {
	out := append([]string(nil), names...)
	count := map[string]int{}
	for _, t := range targets {
		if t != "" {
			count[t]++
		}
	}
	for i, t := range targets {
		if t == "" {
			continue
		}
		out[i] = t
		if count[t] > 1 {
			if run := label(&sides[i].Sources[0].Header, "replay.run"); run != "" && len(sides[i].Sources) == 1 {
				out[i] = t + " run " + run
			}
		}
	}
	seen := map[string]bool{}
	for _, n := range out {
		if seen[n] {
			return names
		}
		seen[n] = true
	}
	return out
}

// refuse refuses a comparison of sides that are not the same work, unless --force, naming
// the likely cause: damage, dropped events, or the work itself.
func (in *compareSides) refuse(c *report.Comparison, o *compareOptions) error {
	if len(c.Mismatches) == 0 || o.Force {
		return nil
	}
	if len(in.damaged) > 0 {
		// The damage is the likely cause: a trace cut short lacks the end of the work.
		return fmt.Errorf("%w: %s, and the traces are not the same work (tolerance %g):\n  %s\nuse --force to compare the readable parts anyway",
			errDamaged, strings.Join(in.damaged, ", "), o.Tolerance, strings.Join(c.Mismatches, "\n  "))
	}
	if len(in.dropped) > 0 {
		// So are the events a recorder dropped.
		return fmt.Errorf("%w: %s, and the traces are not the same work (tolerance %g):\n  %s\nuse --force to compare the recorded events anyway",
			errDropped, strings.Join(in.dropped, "; "), o.Tolerance, strings.Join(c.Mismatches, "\n  "))
	}
	return usageErrorf("the traces are not the same work (tolerance %g):\n  %s\nuse --force to compare anyway",
		o.Tolerance, strings.Join(c.Mismatches, "\n  "))
}

// render writes the comparison in format; text adds what each S3 side cost in requests
// (replays onto s3:// targets).
func (in *compareSides) render(c *report.Comparison, format string) ([]byte, error) {
	var buf bytes.Buffer
	var err error
	switch format {
	case "text":
		err = report.WriteCompareText(&buf, c)
		if err == nil {
			err = writeRequestSidecars(&buf, in.files, nil, func(f string) (uint64, uint64, bool) {
				i, ok := in.sideOf[f]
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
	return buf.Bytes(), err
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
