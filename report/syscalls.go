package report

import (
	"fmt"
	"strings"

	"gonum.org/v1/plot/vg"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
	"github.com/iotap/iotap/trace/stats"
)

// CallRow is one kind of system call in the per-system-call view: the calls the
// application made, folded from the FUSE requests as replay folds them (package
// trace/fold). Latencies are the calls' time in the storage: the summed durations of the
// requests each call stands for. Beside what every row has, it splits the time between
// metadata and data requests, counts the requests per call, and says what the
// application waited.
type CallRow struct {
	Call string `json:"call"`
	Totals
	// MetaNs and DataNs split TotalNs between the calls' metadata requests (lookup,
	// getattr, open, create, flush, release, readdir, setattr, ...) and data requests
	// (read, write, fsync, fallocate, copy_file_range); MetaShare is MetaNs / TotalNs.
	MetaNs    int64   `json:"meta_ns"`
	DataNs    int64   `json:"data_ns"`
	MetaShare float64 `json:"meta_share"`
	Latency
	// Requests are the FUSE requests the calls stand for (0 for a replay's calls, which
	// reached no FUSE layer); PerCall their mean per call, MaxRequests the most for one.
	Requests    uint64  `json:"requests"`
	PerCall     float64 `json:"requests_per_call"`
	MaxRequests uint64  `json:"max_requests"`
	Pace
	// Waited is what the application waited for the calls whose system call entry and
	// return the kernel measured (recordings with --legs kernel); nil when none were.
	Waited *WaitRow `json:"waited,omitempty"`
}

func (r *CallRow) name() string { return r.Call }

// newCallRow is the CallRow of kind k of s, but for what every row has.
func newCallRow(s *stats.Stats, k int) *CallRow {
	c := &s.Calls[k]
	return &CallRow{
		Call: fold.Syscall(k).String(), MetaNs: c.MetaNs, DataNs: c.DataNs, MetaShare: share(c.MetaNs, c.TotalNs),
		Requests: c.Requests, MaxRequests: c.MaxRequests, PerCall: round3(float64(c.Requests) / float64(c.Count)),
		Waited: waitRow(c),
	}
}

// WaitRow is what the application waited for calls of one kind, from the kernel's view:
// each call's entry to its return (Latency), and how that splits between the calls' time
// in the storage and what the FUSE layer's round trips added.
type WaitRow struct {
	Latency
	TotalNs   int64   `json:"total_ns"`
	StorageNs int64   `json:"storage_ns"`
	FUSENs    int64   `json:"fuse_ns"`
	FUSEShare float64 `json:"fuse_share"` // FUSENs / TotalNs
}

// waitRow makes the WaitRow of c, nil when no call was measured.
func waitRow(c *stats.CallStats) *WaitRow {
	w := &c.Waited
	if w.Count == 0 {
		return nil
	}
	fuse := max(w.TotalNs-c.WaitedStorageNs, 0)
	return &WaitRow{
		Latency: latency(w.Hist, w.Count, w.TotalNs, w.MaxNs), TotalNs: w.TotalNs,
		StorageNs: c.WaitedStorageNs, FUSENs: fuse, FUSEShare: share(fuse, w.TotalNs),
	}
}

// callView fills in v's per-system-call view from s.
func callView(v *View, s *stats.Stats) {
	if !s.HasCalls() {
		return
	}
	v.CallNs = s.CallTotalNs()
	v.Syscalls = append([]*CallRow{}, callRows.build(s)...)
	v.CallNotes = callNotes(s)
}

// callNotes says what the per-system-call view of s cannot show.
func callNotes(s *stats.Stats) []string {
	var folded, replayed, kernel int
	var rest, forgets, flushes uint64
	for i := range s.Sources {
		src := &s.Sources[i]
		switch src.Calls {
		case stats.CallsReplay:
			replayed++
			continue
		case stats.CallsFolded:
			folded++
		}
		if src.Header.FUSE.Cache == "kernel" {
			kernel++
		}
		if src.Fold != nil {
			forgets += src.Fold.Folded[trace.OpForget]
		}
		flushes += src.ExtraFlushes
	}
	var reqs uint64
	for i := range s.Calls {
		reqs += s.Calls[i].Requests
	}
	for i := range s.Sources {
		if s.Sources[i].Calls == stats.CallsFolded {
			rest += s.Sources[i].Events
		}
	}
	rest -= min(rest, reqs+forgets+flushes)
	var notes []string
	if folded > 0 {
		notes = append(notes, "system calls as the application made them, folded from the FUSE requests as replay folds them; a call's time is its requests' time in the storage, path-walk lookups included")
		notes = append(notes, "not seen: calls the kernel answers without a request (lseek, fcntl other than locks, calls on pipes or on files outside the traced tree); an open, access or exec of a missing name sends only a lookup and counts as stat; a descriptor copied by dup or fork is closed once per open file")
		if kernel > 0 {
			notes = append(notes, "cache=kernel: reads and writes served by the page cache and stats answered from the attribute cache send no request: counts are lower than the application's calls, and the reads and writes shown are readahead and write-back as they reached the storage")
		}
		var parts []string
		for _, p := range []struct {
			n    uint64
			what string
		}{
			{flushes, "flush of a file's other descriptors (closed after dup or fork)"},
			{forgets, "forget (the kernel dropping inodes)"},
			{rest, "other (requests on paths without a record, releases of files opened before the trace)"},
		} {
			if p.n > 0 {
				parts = append(parts, format.Count(p.n)+" "+p.what)
			}
		}
		if len(parts) > 0 {
			notes = append(notes, "requests in no call: "+strings.Join(parts, ", "))
		}
	}
	if replayed > 0 {
		notes = append(notes, "replay traces: each event is a call the replay issued; it reached no FUSE layer, so requests per call are 0")
	}
	return notes
}

// writeCallTable writes the per-system-call view of v, the text report's first table.
func writeCallTable(b *strings.Builder, v *View) {
	if v.Syscalls == nil {
		return
	}
	b.WriteString("system calls (as the application made them; time in the storage per call)\n")
	t := callRows.table(v.Syscalls, false)
	if len(v.Syscalls) == 0 {
		b.WriteString("(no calls)\n")
	} else {
		b.WriteString(t.String())
	}
	for _, n := range v.CallNotes {
		fmt.Fprintf(b, "  %s\n", n)
	}
	b.WriteString("  meta and data: the calls' time in metadata requests (lookup, getattr, open, create, flush, release, readdir, ...) and in data requests (read, write, fsync, ...)\n")
	b.WriteString("  rate (of the calls that succeeded) and MB/s: per second of the time at least one call of the kind was in flight (MB = 10^6 B)\n")
	for _, a := range t.Access {
		fmt.Fprintf(b, "  %s\n", a)
	}
	writeWaitTable(b, v)
	b.WriteString("\nFUSE requests (what the storage saw)\n")
}

// writeWaitTable writes what the application waited for each kind of call, where the
// kernel measured it, beside the calls' time in the storage.
func writeWaitTable(b *strings.Builder, v *View) {
	t := newTable("call", "measured", "waited", "in storage", "FUSE added", "FUSE share", "mean", "p50", "p90", "p99", "max")
	n := 0
	for _, c := range v.Syscalls {
		w := c.Waited
		if w == nil {
			continue
		}
		n++
		t.add(c.Call, format.Count(w.Count), format.Dur(w.TotalNs), format.Dur(w.StorageNs), format.Dur(w.FUSENs), format.Pct(w.FUSEShare),
			format.Dur(int64(w.MeanNs)), format.Dur(w.P50), format.Dur(w.P90), format.Dur(w.P99), format.Dur(w.MaxNs))
	}
	if n == 0 {
		return
	}
	b.WriteString("\nwhat the application waited under the layer (system call entry to return, measured by the kernel)\n")
	b.WriteString(t.String())
	b.WriteString("  FUSE added: the waits less the calls' time in the storage: the layer's round trips, which the storage behind it would not charge\n")
}

// syscalls adds the latency CDF of the busiest kinds of system call.
func (s *figureSet) syscalls(v *View) {
	names, bins := plotted(v.Syscalls)
	if len(names) == 0 {
		return
	}
	p, err := cdfPlot("Latency CDF per system call (time in the storage)", names, bins, false)
	s.add(p, err, 16*vg.Centimeter, 10*vg.Centimeter)
}
