package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/trace"
)

// Many traces at once (export to a dataset, summary): the arguments name traces, directories
// (the traces below them), globs (quoted, so that iotap expands them: the shell's limit on
// arguments does not apply) and s3://bucket/prefix/ (the traces below it). They are read
// concurrently, as many at once as there are CPUs; a trace that cannot be read is named with
// the reason, and the others go on.

// manyTraces reports whether args name more than one trace, or a set of them.
func manyTraces(args []string) bool {
	if len(args) != 1 {
		return true
	}
	a := args[0]
	if s3store.IsURL(a) {
		return strings.HasSuffix(a, "/")
	}
	if strings.ContainsAny(a, "*?[") {
		return true
	}
	st, err := os.Stat(a)
	return err == nil && st.IsDir()
}

// traceSet returns the traces args name, in order, each once: an s3:// prefix lists the
// traces below it, a directory the traces in it, a glob its matches (expandTraces).
func traceSet(ctx context.Context, e *env, args []string) ([]string, error) {
	for _, a := range args {
		if a == "-" {
			return nil, usageErrorf("standard input cannot be one of many traces")
		}
	}
	args, err := traceInputs(ctx, e, args)
	if err != nil {
		return nil, err
	}
	out, err := expandTraces(args)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	return slices.DeleteFunc(out, func(s string) bool {
		if seen[s] {
			return true
		}
		seen[s] = true
		return false
	}), nil
}

// errSameTrace is a trace given twice (a copy, or the same trace in another format
// version): its figures are in once.
var errSameTrace = errors.New("skipped: the same trace")

// traceFailure is a trace that could not be read, or only in part, and why.
type traceFailure struct {
	name    string
	err     error
	damaged bool // read in part: damaged chunks skipped
}

// eachTrace calls fn for each trace, with the trace open, as many at once as there are CPUs
// (at most workers, when it is above 0). It returns, in the traces' order, the traces that
// could not be opened or whose reading failed (fn's error), and those read with damage.
// ctx's end stops it.
func eachTrace(ctx context.Context, e *env, names []string, workers int, fn func(i int, name string, r *trace.Reader) error) []traceFailure {
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	fails := make([]*traceFailure, len(names))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fails[i] = readOne(ctx, e, i, names[i], fn)
			}
		}()
	}
	for i := range names {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	var out []traceFailure
	for _, f := range fails {
		if f != nil {
			out = append(out, *f)
		}
	}
	return out
}

func readOne(ctx context.Context, e *env, i int, name string, fn func(int, string, *trace.Reader) error) *traceFailure {
	r, closeTrace, err := openTraceArg(ctx, e, name)
	if err != nil {
		return &traceFailure{name: name, err: err}
	}
	defer func() { _ = closeTrace() }() // read-only
	if err := fn(i, name, r); err != nil {
		return &traceFailure{name: name, err: err}
	}
	if d := r.Damage(); len(d) > 0 {
		return &traceFailure{name: name, err: errors.Join(d...), damaged: true}
	}
	return nil
}

// traceOutcome says on stderr which traces could not be read and why, and whose recorders
// dropped events, and returns the command's error: exit 1 when a trace could not be read,
// 3 when traces were damaged (the output holds what could be read), 4 when recorders
// dropped events.
func traceOutcome(e *env, cmd string, total int, fails []traceFailure, dropped []string) error {
	var unread, damaged int
	var msg strings.Builder
	for _, f := range fails {
		what := "cannot be read"
		switch {
		case f.damaged:
			what = "damaged (its readable events are in)"
			damaged++
		case errors.Is(f.err, errSameTrace):
			what = "given twice"
		default:
			unread++
		}
		fmt.Fprintf(&msg, "iotap %s: %s: %s: %s\n", cmd, termsafe.Name(f.name), what, termsafe.Text(strings.ReplaceAll(f.err.Error(), "\n", "; ")))
	}
	for _, d := range dropped {
		fmt.Fprintf(&msg, "iotap %s: %s\n", cmd, termsafe.Text(d))
	}
	_, _ = fmt.Fprint(e.stderr, msg.String()) // diagnostics: the exit code says it too
	switch {
	case unread > 0:
		return fmt.Errorf("%d of %d traces could not be read (named above), %d damaged, %d with dropped events; the others are in", unread, total, damaged, len(dropped))
	case damaged > 0:
		return fmt.Errorf("%w: %d of %d traces (named above); their readable events are in", errDamaged, damaged, total)
	}
	return droppedError(dropped)
}
