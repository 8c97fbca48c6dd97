// Command slurmshard is the stand-in for `iotap replay --shard auto` until replay has it:
// run as a task of a Slurm step, it prints the traces this task replays under the rule of
// package internal/slurm (natural order, trace k to task k mod SLURM_NTASKS), one per line:
//
//	slurmshard TRACE|DIR|GLOB...     (a directory means the *.iotap files directly in it)
//	slurmshard --barrier DIR         (wait until every task of the step has arrived)
//
// A task that gets no trace prints nothing and exits 0. Outside a step it exits 2. A wrapper
// script uses it like this (docs/slurm.md):
//
//	for t in $(slurmshard traces/$JOB/); do iotap replay "$t" --target /scratch/cand ...; done
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/slurm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("slurmshard", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	barrier := fs.String("barrier", "", "wait until every task of the step has arrived, using files in the shared `dir`")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up waiting at the barrier after `duration`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	task, err := slurm.TaskFromEnv(getenv)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "slurmshard:", err)
		return 2
	}
	if *barrier != "" {
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		if _, err := slurm.Barrier(ctx, *barrier, task, 0); err != nil {
			_, _ = fmt.Fprintln(stderr, "slurmshard:", err)
			return 1
		}
		return 0
	}
	if fs.NArg() == 0 {
		_, _ = fmt.Fprintln(stderr, "usage: slurmshard TRACE|DIR|GLOB... | slurmshard --barrier DIR")
		return 2
	}
	files, err := expand(fs.Args())
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "slurmshard:", err)
		return 1
	}
	for _, f := range slurm.Shard(files, task.ProcID, task.NTasks) {
		if _, err := fmt.Fprintln(stdout, f); err != nil {
			_, _ = fmt.Fprintln(stderr, "slurmshard:", err)
			return 1
		}
	}
	return 0
}

// expand turns arguments into trace files the way `iotap report` does: a directory into
// the *.iotap files directly in it, a pattern into its matches, a file as is.
func expand(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		switch {
		case err == nil && st.IsDir():
			m, _ := filepath.Glob(filepath.Join(a, "*.iotap"))
			if len(m) == 0 {
				return nil, fmt.Errorf("no *.iotap trace in directory %s", a)
			}
			out = append(out, m...)
		case err == nil:
			out = append(out, a)
		case errors.Is(err, os.ErrNotExist) && strings.ContainsAny(a, "*?["):
			m, gerr := filepath.Glob(a)
			if gerr != nil || len(m) == 0 {
				return nil, fmt.Errorf("no trace matches %s", a)
			}
			sort.Strings(m)
			out = append(out, m...)
		default:
			return nil, fmt.Errorf("trace %s: %w", a, err)
		}
	}
	return out, nil
}
