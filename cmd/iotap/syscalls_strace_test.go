package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// TestSyscallsMatchStrace records real jobs with --cache none under strace and checks that
// the per-system-call view of `iotap report` counts, kind by kind, the calls strace saw on
// the traced tree, within what FUSE can see. It is long because every difference has a
// named cause, and the test adds each one up from the strace log or the trace before
// comparing:
//
//   - a path call that fails with ENOENT or EEXIST sends only its lookup: iotap counts a
//     stat (an open of a missing name, a mkdir of an existing one), unless the thread's
//     next call is on the same path, into which the lookup folds (a stat of a missing
//     name, then its create);
//   - lseek(SEEK_END) makes the kernel refresh the size: a getattr, a stat; other lseeks,
//     fcntl other than locks, ioctls the kernel answers itself (FICLONE) and
//     copy_file_range at the end of its input send nothing;
//   - chdir and fchdir into the tree ask the file system for permission: an access;
//   - an open with O_PATH sends only its path walk, which folds into the next call on the
//     path; its close sends nothing;
//   - iotap counts one close per open file (the release): strace counts the close() calls,
//     one more for each extra descriptor of the file (dup2 in a shell redirection, a
//     fork) and one fewer for each file closed at exit or by exec (O_CLOEXEC). The test
//     follows descriptors through the log to add these up;
//   - the job's start (record changes into the directory before strace runs) makes a
//     stat and an access by a process strace never saw;
//   - the kernel's privilege probe before a copy_file_range (a getxattr of
//     security.capability) is not folded: a getxattr;
//   - on a loaded machine, a request of a call may come more than the fold window
//     (fold.DefaultFoldWindow, 2 ms) after the lookup or privilege probe before it, or the
//     release of the thread's previous file may come in between (the folding then issues
//     what the thread holds): the lookup counts as a stat of its own and the probe as a
//     getxattr. The test finds them in the trace (a lookup or probe whose thread's next
//     request, on the same path or below, came later than the window or after such a
//     release) and logs each one.
//
// With IOTAP_STRACE_KEEP=DIR a failing job leaves its trace and strace log in DIR.
//
// Run with -v to see the table of counts, which is the cross-check's evidence.
func TestSyscallsMatchStrace(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "strace", "samtools", "tar", "sqlite3", "awk")
	workload, err := filepath.Abs(filepath.Join("..", "..", "scripts", "workload-genomics.sh"))
	if err != nil {
		t.Fatal(err)
	}
	jobs := []struct {
		name   string
		setup  func(t *testing.T, dir string)
		script string
	}{
		// The demo's job: a samtools pipeline (view, sort, index, flagstat, idxstats, a
		// region count), tar create and extract, and sqlite3.
		{"genomics", nil, "WORKLOAD_READS=5000 sh " + workload + " >/dev/null"},
		// A tar extract of a tree with a symlink, a hard link and nested directories.
		{"tar-extract", makeArchive, "tar -xf archive.tar -C extract"},
	}
	for _, job := range jobs {
		t.Run(job.name, func(t *testing.T) {
			tmp := t.TempDir()
			dir := filepath.Join(tmp, "job")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if job.setup != nil {
				job.setup(t, dir)
			}
			out, log := filepath.Join(tmp, "job.iotap"), filepath.Join(tmp, "strace.log")
			cmd := exec.Command(iotapBin, "record", "--cache", "none", "-o", out, "--",
				"strace", "-f", "-qq", "-y", "-o", log, "sh", "-c", job.script)
			cmd.Dir = dir
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("record: %v\n%s", err, b)
			}
			checkAgainstStrace(t, dir, out, log)
			if keep := os.Getenv("IOTAP_STRACE_KEEP"); keep != "" && t.Failed() {
				// For a look at a failure: the trace, the strace log, and where the job ran.
				for _, f := range []string{out, log} {
					if b, err := os.ReadFile(f); err == nil {
						_ = os.WriteFile(filepath.Join(keep, job.name+"-"+filepath.Base(f)), b, 0o600)
					}
				}
				_ = os.WriteFile(filepath.Join(keep, job.name+"-dir"), []byte(dir), 0o600)
			}
		})
	}
}

// makeArchive writes archive.tar of a tree (50 small files, a copy of a larger one, a
// symlink, a hard link) into dir, and an empty extract/ to unpack it in.
func makeArchive(t *testing.T, dir string) {
	src := filepath.Join(t.TempDir(), "tree")
	for _, d := range []string{"a", "b/c"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 50; i++ {
		if err := os.WriteFile(filepath.Join(src, "a", fmt.Sprintf("f%d", i)), fmt.Appendf(nil, "file %d\n", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "b", "c", "big"), make([]byte, 3<<20+123), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../a/f1", filepath.Join(src, "b", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(src, "a", "f2"), filepath.Join(src, "b", "hard")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("tar", "--sort=name", "-cf", filepath.Join(dir, "archive.tar"), "-C", filepath.Dir(src), "tree")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, b)
	}
	if err := os.Mkdir(filepath.Join(dir, "extract"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// callTally counts calls by kind, and the failed ones.
type callTally struct{ n, errs map[string]int }

func newCallTally() callTally { return callTally{map[string]int{}, map[string]int{}} }

func (t callTally) add(kind string, n int, failed bool) {
	t.n[kind] += n
	if failed {
		t.errs[kind] += n
	}
}

func (t callTally) addCall(c *fold.Call) {
	s, _ := c.Syscall()
	t.add(s.String(), 1, c.Errno != 0)
}

// crossCheck compares a trace's calls with an strace log of the same run.
type crossCheck struct {
	facts *straceFacts
	calls []fold.Call
	evs   []namedEvent
	got   callTally // the report's view
	// before are the calls of processes strace never saw; unfolded are the lookups and
	// probes that did not fold (their tally, and their indexes into calls).
	before, unfolded callTally
	unfoldedIdx      map[int]bool
	// lookups are the lookup-only calls of the log that are stat calls of their own;
	// merged those whose lookups folded into the thread's next call; used the standalone
	// lookups they were matched with.
	lookups           callTally
	merged, notFolded int
	lookupWhy         []string
	used              map[int]bool
}

// checkAgainstStrace compares the per-system-call view of the trace with the strace log,
// adding up each cause of difference (see TestSyscallsMatchStrace), and logs the table.
func checkAgainstStrace(t *testing.T, dir, tracePath, log string) {
	x := &crossCheck{facts: countStrace(readStrace(t, log), dir), before: newCallTally(), lookups: newCallTally(), used: map[int]bool{}}
	x.got = reportedCalls(t, tracePath)
	x.calls, x.evs = foldTrace(t, tracePath)
	// The report's view is the folding's.
	folded := newCallTally()
	for i := range x.calls {
		if _, ok := x.calls[i].Syscall(); ok {
			folded.addCall(&x.calls[i])
		}
	}
	if !maps.Equal(folded.n, x.got.n) || !maps.Equal(folded.errs, x.got.errs) {
		t.Fatalf("report %v (errors %v), folding %v (errors %v)", x.got.n, x.got.errs, folded.n, folded.errs)
	}
	for i := range x.calls {
		if c := &x.calls[i]; c.Pid != 0 && !x.facts.pids[int(c.Pid)] {
			x.before.addCall(c)
		}
	}
	var why []string
	x.unfolded, x.unfoldedIdx, why = notFolded(x.calls, x.evs)
	for _, w := range why {
		t.Logf("not folded: %s", w)
	}
	x.matchLookups()
	// The strace log accounts for every open file: closed by a last close(), or without
	// one (exit, exec, dup2).
	if f := x.facts; f.closes-f.extraCloses+f.implicitRel != f.opened {
		t.Errorf("descriptors: %d closes - %d closes of extra descriptors + %d files released without close != %d files opened",
			f.closes, f.extraCloses, f.implicitRel, f.opened)
	}
	table, ok := x.table()
	if !ok {
		t.Errorf("per-system-call counts differ from strace's (errors: iotap/expected):\n%s", table)
	} else {
		t.Logf("per-system-call counts against strace (errors: iotap/expected):\n%s", table)
	}
}

// matchLookups pairs the log's lookup-only calls with the trace's standalone lookups
// (those not counted as unfolded): each is a stat call of its own, unless it folded into the
// thread's next call on the same path.
func (x *crossCheck) matchLookups() {
	alone := map[lookupKey][]int{} // standalone lookups, in start order
	for i := range x.calls {
		if c := &x.calls[i]; c.Rec == trace.OpLookup && !x.unfoldedIdx[i] {
			k := lookupKey{int(c.Tid), c.Name, c.Errno == 0}
			alone[k] = append(alone[k], i)
		}
	}
	for _, l := range x.facts.lookupOnly {
		k := lookupKey{l.tid, l.name, l.found}
		if q := alone[k]; len(q) > 0 {
			x.used[q[0]] = true
			alone[k] = q[1:]
			x.lookups.add("stat", 1, !l.found)
			x.lookupWhy = append(x.lookupWhy, l.why)
			continue
		}
		if l.nextUnder {
			x.merged++ // its lookups folded into the thread's next call
		} else {
			x.notFolded++ // its lookup counts among the ones that did not fold
		}
	}
}

// expected returns the counts the view should show: strace's, moved by each cause.
func (x *crossCheck) expected() callTally {
	f := x.facts
	want := newCallTally()
	for k, n := range f.calls {
		want.add(k, n, false)
	}
	for k, m := range f.errnos {
		for _, n := range m {
			want.errs[k] += n
		}
	}
	want.add("stat", f.seekEnd, false)
	want.add("access", f.asAccess, false)
	want.n["close"] = f.opened
	for _, t := range []callTally{x.lookups, x.before, x.unfolded} {
		for k, n := range t.n {
			want.n[k] += n
		}
		for k, n := range t.errs {
			want.errs[k] += n
		}
	}
	clear0(want.n)
	clear0(want.errs)
	return want
}

// table lays out the counts and their causes, and reports whether they all match.
func (x *crossCheck) table() (string, bool) {
	f, want := x.facts, x.expected()
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %7s %9s %7s %8s %9s %7s %7s\n", "call", "strace", "seen as", "before", "unfolded", "expected", "iotap", "errors")
	ok := true
	for _, k := range slices.Sorted(maps.Keys(union(want.n, x.got.n, f.calls))) {
		sn, as := f.calls[k], ""
		switch k {
		case "stat":
			as = fmt.Sprintf("+%d", f.seekEnd+x.lookups.n["stat"])
		case "access":
			as = fmt.Sprintf("+%d", f.asAccess)
		case "close":
			sn, as = f.closes, fmt.Sprintf("%+d", f.opened-f.closes)
		}
		mark := ""
		if want.n[k] != x.got.n[k] || want.errs[k] != x.got.errs[k] {
			mark, ok = "  <-- differs", false
		}
		fmt.Fprintf(&b, "%-16s %7d %9s %7d %8d %9d %7d %3d/%-3d%s\n", k, sn, as, x.before.n[k], x.unfolded.n[k], want.n[k], x.got.n[k], x.got.errs[k], want.errs[k], mark)
	}
	fmt.Fprintf(&b, "stat from other calls: lseek(SEEK_END) %d, lookups alone: %s; %d calls' lookups folded into the thread's next call on the path, %d counted as not folded\n",
		f.seekEnd, strings.Join(countWords(x.lookupWhy), ", "), x.merged, x.notFolded)
	fmt.Fprintf(&b, "close: %d files opened (%d with O_PATH, not counted); strace counts %d close() calls, %d of them of an extra descriptor of a file, and %d files closed without close() (exit, exec, dup2)\n",
		f.opened, f.opathOpens, f.closes, f.extraCloses, f.implicitRel)
	var unseen []string
	for _, k := range slices.Sorted(maps.Keys(f.unseen)) {
		unseen = append(unseen, fmt.Sprintf("%s %d", k, f.unseen[k]))
	}
	fmt.Fprintf(&b, "calls FUSE never sees: %s\n", strings.Join(unseen, ", "))
	if !ok {
		b.WriteString("lookups alone that nothing above explains, and the requests after them:\n")
		for i := range x.calls {
			if c := &x.calls[i]; c.Rec == trace.OpLookup && !x.used[i] && !x.unfoldedIdx[i] {
				fmt.Fprintf(&b, "  %s\n", nextRequest(c, x.evs))
			}
		}
	}
	return b.String(), ok
}

// reportedCalls returns the counts and errors per call of `iotap report --format json`.
func reportedCalls(t *testing.T, tracePath string) callTally {
	out, err := exec.Command(iotapBin, "report", "--format", "json", tracePath).Output()
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	var doc struct {
		Total struct {
			Syscalls []struct {
				Call   string `json:"call"`
				Count  int    `json:"count"`
				Errors int    `json:"errors"`
			} `json:"syscalls"`
		} `json:"total"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	got := newCallTally()
	for _, c := range doc.Total.Syscalls {
		got.n[c.Call] = c.Count
		if c.Errors > 0 {
			got.errs[c.Call] = c.Errors
		}
	}
	return got
}

// lookupKey identifies a standalone lookup call.
type lookupKey struct {
	tid   int
	name  string
	found bool
}

// namedEvent is a recorded request with its path's name.
type namedEvent struct {
	trace.Event
	name, name2 string
}

// foldTrace returns the calls the trace folds into and its events, in start order.
func foldTrace(t *testing.T, path string) ([]fold.Call, []namedEvent) {
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() //nolint:errcheck // read only
	f := fold.New(r, r.Header(), fold.Options{})
	var calls []fold.Call
	var evs []namedEvent
	for {
		if c, ok := f.Next(); ok {
			calls = append(calls, *c)
			continue
		}
		if f.Ended() {
			break
		}
		ev, err := r.Next()
		if err == io.EOF {
			f.End()
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		f.Add(ev)
		ne := namedEvent{Event: *ev, name: r.PathName(ev.Path)}
		if ev.Path2 != 0 {
			ne.name2 = r.PathName(ev.Path2)
		}
		evs = append(evs, ne)
	}
	slices.SortStableFunc(evs, func(a, b namedEvent) int { return int(min(max(a.Start-b.Start, -1), 1)) })
	return calls, evs
}

// notFolded finds the calls that are a lookup, or a privilege probe (getxattr of
// size 0), whose thread's next request (past the lookups of other paths: a link's or
// rename's other operand) is on the same path or below it, yet which did not
// fold into that request's call: it started more than the fold window after the call
// ended, or the flush or release of a file came in between (the folding then issues what
// the thread holds, to keep the close after it), or the thread held an older call that
// the window let go, and its calls went with it. It also finds the probes before a
// copy_file_range, which the folding leaves alone. It counts them by kind, with their
// errors, and returns their indexes.
func notFolded(calls []fold.Call, evs []namedEvent) (n callTally, idx map[int]bool, why []string) {
	n, idx = newCallTally(), map[int]bool{}
	for i := range calls {
		c := &calls[i]
		if c.Rec != trace.OpLookup && (c.Rec != trace.OpGetxattr || c.Size != 0) {
			continue
		}
		end := c.Start + c.Dur
		j, _ := slices.BinarySearchFunc(evs, end, func(e namedEvent, t int64) int { return int(min(max(e.Start-t, -1), 1)) })
		closed := ""
		for ; j < len(evs); j++ {
			e := &evs[j]
			if e.Start >= end && (e.Op == trace.OpRelease || e.Op == trace.OpReleasedir || e.Op == trace.OpFlush) {
				closed = e.name // the close of an earlier call, from any thread
				continue
			}
			if e.Tid != c.Tid || e.Start < end {
				continue
			}
			gap := e.Start - end
			split := fold.IsUnder(e.name, c.Name) || (e.name2 != "" && fold.IsUnder(e.name2, c.Name))
			probe := c.Rec == trace.OpGetxattr && e.Op == trace.OpCopyFileRange && e.name2 == c.Name
			if !split && c.Rec == trace.OpLookup && e.Op == trace.OpLookup {
				continue // the walk of another operand of the call (link, rename)
			}
			if split || probe {
				idx[i] = true
				n.addCall(c)
				w := fmt.Sprintf("%s %q then %s %q %.1f ms later (fold window %.0f ms)", c.Rec, c.Name, e.Op, e.name, float64(gap)/1e6, fold.DefaultFoldWindow/1e6)
				switch {
				case c.Rec == trace.OpLookup && e.Op == trace.OpLookup && e.name == c.Name:
					w = fmt.Sprintf("lookup %q, then the same lookup again %.1f ms later: the next call on the name", c.Name, float64(gap)/1e6)
				case gap > fold.DefaultFoldWindow:
				case closed != "":
					w = fmt.Sprintf("%s %q then %s %q, with the close of %q in between", c.Rec, c.Name, e.Op, e.name, closed)
				default:
					w = fmt.Sprintf("%s %q then %s %q %.1f ms later, issued with an older call the thread held", c.Rec, c.Name, e.Op, e.name, float64(gap)/1e6)
				}
				if probe {
					w = fmt.Sprintf("%s %q: the kernel's privilege probe before a copy_file_range, which the folding keeps", c.Rec, c.Name)
				}
				why = append(why, w)
			}
			break
		}
	}
	return n, idx, why
}

// nextRequest describes call c and the next requests after it, of any thread.
func nextRequest(c *fold.Call, evs []namedEvent) string {
	end := c.Start + c.Dur
	s := fmt.Sprintf("tid %d %s %q errno %d at %d:", c.Tid, c.Rec, c.Name, c.Errno, c.Start)
	n := 0
	for j := range evs {
		if e := &evs[j]; e.Start >= end && n < 6 {
			s += fmt.Sprintf(" [tid %d %s %q +%.2fms]", e.Tid, e.Op, e.name, float64(e.Start-end)/1e6)
			n++
		}
	}
	return s
}

func union(ms ...map[string]int) map[string]int {
	u := map[string]int{}
	for _, m := range ms {
		for k := range m {
			u[k] = 0
		}
	}
	return u
}

func clear0(m map[string]int) {
	maps.DeleteFunc(m, func(_ string, n int) bool { return n == 0 })
}

// countWords counts equal strings: "lseek(SEEK_END) 5, openat ENOENT 2".
func countWords(ss []string) []string {
	n := map[string]int{}
	for _, s := range ss {
		n[s]++
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		out = append(out, fmt.Sprintf("%s %d", k, n[k]))
	}
	return out
}
