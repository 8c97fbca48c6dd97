package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/export"
	"github.com/iotap/iotap/internal/private"
	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/trace"
)

// exportCommands returns the export subcommand.
func exportCommands() []*command {
	return []*command{
		{
			name:    "export",
			summary: "export a trace as JSON lines, CSV or Parquet (a versioned schema), a fio iolog or Perfetto JSON",
			usage:   "[flags] TRACE | TRACES... -o DATASET",
			setup:   withOptions(runExport),
		},
	}
}

type exportOptions struct {
	Format    string
	Output    string
	Strict    bool
	View      string
	FioSetup  string
	Anonymize bool
	Key       anonymizeKeyOptions
	traceStore
}

func (o *exportOptions) AddFlags(fs *pflag.FlagSet) {
	var formats []string
	for _, f := range export.Formats {
		formats = append(formats, f.Name+" ("+f.About+")")
	}
	fs.StringVar(&o.Format, "format", "jsonl", "output `format`: "+strings.Join(formats, ", ")+
		"; "+export.RowFormatNames("and")+" columns (schema "+strconv.Itoa(export.SchemaVersion)+", docs/export.md), in order: "+
		strings.Join(export.ColumnNames(export.Columns(export.ViewRequests)), ",")+
		"; with --view syscalls: "+strings.Join(export.ColumnNames(export.Columns(export.ViewSyscalls)), ","))
	fs.StringVarP(&o.Output, "output", "o", "", "write to `file` (or an s3:// object) instead of standard output; with many traces, the dataset's directory or s3://bucket/prefix/")
	fs.BoolVar(&o.Strict, "strict", false, "stop at the first corrupt chunk instead of skipping it")
	names, abouts := export.Views()
	var views []string
	for i, v := range names {
		views = append(views, v+" ("+abouts[i]+")")
	}
	fs.StringVar(&o.View, "view", export.ViewRequests, "what a record is: "+strings.Join(views, ", "))
	fs.StringVar(&o.FioSetup, "fio-setup", "", "with --format fio, also write to `file` a shell script that prepares a directory for the iolog: it makes the directories of its files (fio makes files only) and links the names it changed")
	fs.BoolVar(&o.Anonymize, "anonymize", false, "replace names by keyed tokens as iotap anonymize does (without --key-file, with a random key that is not kept)")
	o.Key.AddFlags(fs)
	o.addStoreFlags(fs)
}

// runExport: flags → check → open → write → outcome.
func runExport(ctx context.Context, e *env, o *exportOptions, args []string) (err error) {
	if err := o.check(args); err != nil {
		return err
	}
	if err := o.usedBy(append([]string{o.Output}, args...)...); err != nil {
		return err
	}
	var key []byte
	if o.Anonymize {
		if key, _, err = o.Key.load(e, ""); err != nil {
			return err
		}
	}
	if manyTraces(args) {
		return o.dataset(ctx, e, args, key)
	}
	r, closeTrace, err := openTraceArg(ctx, e, args[0])
	if err != nil {
		return err
	}
	defer func() { _ = closeTrace() }() // read-only
	r.SetStrict(o.Strict)
	out, end, err := o.output(ctx, e)
	if err != nil {
		return err
	}
	defer func() { err = end(err) }()
	src := r
	var cause func() error // with --anonymize: why the stream of the copy ended early
	if o.Anonymize {
		// The events come from the trace's anonymised copy, made as they are read.
		if src, cause, err = anonymizedStream(ctx, r, key, o.Key.NoExtensions); err != nil {
			return err
		}
		defer func() { _ = cause() }() // after an early return: ends the copy
	}
	res, err := export.Write(ctx, src, out, export.Options{Format: o.Format, View: o.View, FioSetup: o.FioSetup != ""})
	stopped, err := o.readError(err, cause, args[0])
	if err != nil {
		return err
	}
	if o.FioSetup != "" {
		if err := private.WriteFile(o.FioSetup, []byte(res.FioSetup)); err != nil {
			return fmt.Errorf("write --fio-setup: %w", err)
		}
	}
	if res.Note != "" {
		_, _ = io.WriteString(e.stderr, termsafe.Text("iotap export: "+res.Note)) // a summary; the export is the output
	}
	return exportOutcome(e, r, args[0], stopped)
}

// check checks export's flags and its argument, one trace that is not the output.
func (o *exportOptions) check(args []string) error {
	if len(args) == 0 {
		return usageErrorf("want a trace (or several, a directory, a glob or an s3:// prefix for a dataset)")
	}
	if err := export.Check(o.Format, o.View); err != nil {
		return usageErrorf("%v", err)
	}
	if manyTraces(args) {
		if f, _ := export.FormatNamed(o.Format); f.Rows == nil {
			return usageErrorf("--format %s takes one trace; many traces make a dataset of %s files", o.Format, export.RowFormatNames("or"))
		}
		if o.Output == "" || o.Output == "-" {
			return usageErrorf("many traces make a dataset: give its directory or s3://bucket/prefix/ with -o")
		}
		return nil
	}
	if o.FioSetup != "" && o.Format != "fio" {
		return usageErrorf("--fio-setup goes with --format fio")
	}
	if !o.Anonymize && (o.Key.File != "" || o.Key.NoExtensions) {
		return usageErrorf("--key-file and --no-extensions go with --anonymize")
	}
	for _, f := range []string{o.Output, o.FioSetup} {
		if f != "" && f != "-" && args[0] != "-" {
			in, ierr := os.Stat(args[0])
			out, oerr := os.Stat(f)
			if ierr == nil && oerr == nil && os.SameFile(in, out) {
				return usageErrorf("%s is the trace itself", f)
			}
		}
	}
	return nil
}

// output returns where the export goes, --output (a file, or an s3:// object uploaded as it
// is written) or standard output, and end, which ends it given the export's error and
// returns the command's: a file is closed (a failure to close is the error if there was
// none), an object completed (or dropped after an error), and a closed pipe on standard
// output is no error.
func (o *exportOptions) output(ctx context.Context, e *env) (out io.Writer, end func(error) error, err error) {
	if s3store.IsURL(o.Output) {
		w, err := s3store.CreateObject(ctx, o.Output, e.traces.options())
		if err != nil {
			return nil, nil, err
		}
		return w, func(err error) error {
			if err != nil {
				w.Abort() // no partial object
				return err
			}
			return w.Close()
		}, nil
	}
	if o.Output != "" && o.Output != "-" {
		file, err := private.OpenFile(o.Output, os.O_WRONLY|os.O_TRUNC)
		if err != nil {
			return nil, nil, usageErrorf("create output: %v", err)
		}
		return file, func(err error) error {
			if cerr := file.Close(); cerr != nil && err == nil {
				return fmt.Errorf("write output: %w", cerr)
			}
			return err
		}, nil
	}
	// A reader that stops early (iotap export T | head) closes the pipe: with SIGPIPE
	// caught, the write fails with EPIPE instead of killing the process, and the export
	// ends quietly with exit status 0. Caught, not ignored: a caught signal is back to its
	// default in the programs other commands start.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	return e.stdout, func(err error) error {
		signal.Stop(sigpipe)
		if errors.Is(err, syscall.EPIPE) {
			return nil
		}
		return err
	}, nil
}

// readError sorts out an error of the export of trace name: an error reading the trace is
// the command's error, except, under --strict, damage, which the export stopped at
// (stopped) and the outcome reports. cause, with --anonymize, says why the stream of the
// anonymised copy ended, which is what to report.
func (o *exportOptions) readError(err error, cause func() error, name string) (stopped, _ error) {
	var re *export.ReadError
	if !errors.As(err, &re) {
		return nil, err
	}
	why := re.Err
	if cause != nil {
		if c := cause(); c != nil {
			why = c
		}
	}
	if !o.Strict || (!errors.Is(why, trace.ErrCorrupt) && !errors.Is(why, trace.ErrTruncated)) {
		return nil, fmt.Errorf("read trace %s: %w", name, why)
	}
	return why, nil
}

// exportOutcome is what export leaves out of the trace r (named name): the events its
// recorder dropped, and its damage, said on stderr too (stopped: the damage --strict
// stopped at).
func exportOutcome(e *env, r *trace.Reader, name string, stopped error) error {
	var dropped error
	if f, ok := r.Footer(); ok {
		dropped = droppedError(nonEmpty(droppedNote(name, f)))
	}
	d := r.Damage()
	if len(d) == 0 {
		return dropped
	}
	var msg strings.Builder
	for _, x := range d {
		fmt.Fprintf(&msg, "iotap export: %s: damaged: %s\n", termsafe.Name(name), termsafe.Text(x.Error()))
	}
	_, _ = io.WriteString(e.stderr, msg.String()) // diagnostics: the exit code says it too
	if stopped != nil {
		return errors.Join(fmt.Errorf("%w: %s: stopped at the first damaged chunk (--strict)", errDamaged, name), dropped)
	}
	return errors.Join(fmt.Errorf("%w: %s (the export holds every readable event)", errDamaged, name), dropped)
}

// dataset exports many traces (args: traces, directories, globs, s3:// prefixes) into a
// Hive-style partitioned dataset at --output, a directory or an s3://bucket/prefix/ that
// holds nothing yet: a file per trace, host=HOST/job=JOB/TRACE_ID.EXT
// (export.DatasetPath), written concurrently, as many at once as there are CPUs.
func (o *exportOptions) dataset(ctx context.Context, e *env, args []string, key []byte) error {
	names, err := traceSet(ctx, e, args)
	if err != nil {
		return err
	}
	create, err := o.datasetSink(ctx, e)
	if err != nil {
		return err
	}
	var mu sync.Mutex // guards files, dropped
	files := map[string]string{}
	var dropped []string
	fails := eachTrace(ctx, e, names, 0, func(_ int, name string, r *trace.Reader) error {
		r.SetStrict(o.Strict) // under --strict a damaged trace is not exported: it is named
		src := r
		if o.Anonymize {
			var cause func() error
			var err error
			if src, cause, err = anonymizedStream(ctx, r, key, o.Key.NoExtensions); err != nil {
				return err
			}
			defer func() { _ = cause() }() // ends the copy
		}
		rel := export.DatasetPath(src.Header(), export.Extension(o.Format))
		mu.Lock()
		if other, ok := files[rel]; ok {
			mu.Unlock()
			return fmt.Errorf("%w (%s) as %s", errSameTrace, path.Base(rel), other)
		}
		files[rel] = name
		mu.Unlock()
		w, end, err := create(rel)
		if err != nil {
			return err
		}
		_, err = export.Write(ctx, src, w, export.Options{Format: o.Format, View: o.View})
		if err = end(err); err != nil {
			return err
		}
		if f, ok := r.Footer(); ok {
			if n := droppedNote(name, f); n != "" {
				mu.Lock()
				dropped = append(dropped, n)
				mu.Unlock()
			}
		}
		return nil
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(e.stderr, "iotap export: %d of %d traces in %s (%s view, host=HOST/job=JOB/TRACE_ID.%s)\n",
		len(names)-countUnread(fails), len(names), termsafe.Name(o.Output), o.View, export.Extension(o.Format))
	return traceOutcome(e, "export", len(names), fails, dropped)
}

// countUnread counts the traces that could not be read at all.
func countUnread(fails []traceFailure) int {
	n := 0
	for _, f := range fails {
		if !f.damaged {
			n++
		}
	}
	return n
}

// datasetSink checks that --output holds nothing yet and returns the function that creates
// a file of the dataset (rel: its path below the dataset's root) and the one that ends it
// given the export's error: an export that failed leaves no file.
func (o *exportOptions) datasetSink(ctx context.Context, e *env) (func(rel string) (io.Writer, func(error) error, error), error) {
	if s3store.IsURL(o.Output) {
		prefix := strings.TrimSuffix(o.Output, "/") + "/"
		empty, err := s3store.Empty(ctx, prefix, e.traces.options())
		if err != nil {
			return nil, err
		}
		if !empty {
			return nil, usageErrorf("%s holds objects already: a dataset goes to an empty prefix", o.Output)
		}
		return func(rel string) (io.Writer, func(error) error, error) {
			w, err := s3store.CreateObject(ctx, prefix+rel, e.traces.options())
			if err != nil {
				return nil, nil, err
			}
			return w, func(err error) error {
				if err != nil {
					w.Abort()
					return err
				}
				return w.Close()
			}, nil
		}, nil
	}
	switch ents, err := os.ReadDir(o.Output); {
	case err == nil && len(ents) > 0:
		return nil, usageErrorf("%s is not empty: a dataset goes to a new or empty directory", o.Output)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, usageErrorf("dataset directory: %v", err)
	}
	if err := os.MkdirAll(o.Output, 0o755); err != nil {
		return nil, usageErrorf("create dataset directory: %v", err)
	}
	return func(rel string) (io.Writer, func(error) error, error) {
		p := filepath.Join(o.Output, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, nil, fmt.Errorf("write dataset: %w", err)
		}
		f, err := private.OpenFile(p, os.O_WRONLY|os.O_EXCL)
		if err != nil {
			return nil, nil, fmt.Errorf("write dataset: %w", err)
		}
		return f, func(err error) error {
			if cerr := f.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("write %s: %w", p, cerr)
			}
			if err != nil {
				_ = os.Remove(p) // no partial file
			}
			return err
		}, nil
	}, nil
}
