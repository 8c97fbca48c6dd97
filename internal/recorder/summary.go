// What a recording prints: the live stats line and the end-of-run summary.

package recorder

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/memlimit"
	"github.com/iotap/iotap/internal/tally"
	"github.com/iotap/iotap/trace"
)

// startLive starts printing a stats line every --stats-interval, and one at once on
// SIGUSR1 (the line then covers the time since the last one), until stop is closed. The
// signal is caught before startLive returns, so a SIGUSR1 sent after that cannot kill iotap.
func (s *session) startLive(stop <-chan struct{}) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go s.live(stop, usr1)
}

func (s *session) live(stop <-chan struct{}, usr1 chan os.Signal) {
	defer signal.Stop(usr1)
	var tick <-chan time.Time
	if s.spec.StatsInterval > 0 {
		t := time.NewTicker(s.spec.StatsInterval)
		defer t.Stop()
		tick = t.C
	}
	prev := s.tally.Snapshot()
	for {
		select {
		case <-stop:
			return
		case <-tick:
		case <-usr1:
		}
		cur := s.tally.Snapshot()
		st := newLiveStats(cur.Sub(prev), cur.At.Sub(prev.At), s.w.Stats().Dropped)
		_, _ = fmt.Fprintln(s.e.Stderr, st.line(s.spec.StatsFormat))
		prev = cur
	}
}

// liveStats is one live line: the activity since the previous line (or since the mount).
// Its JSON form (--stats-format json) is one object per line with these field names, listed
// in docs/manual.md; keep the two in step.
type liveStats struct {
	Time             string  `json:"time"`             // when the line was taken: RFC 3339, UTC, milliseconds
	IntervalSeconds  float64 `json:"interval_seconds"` // the time it covers
	Ops              uint64  `json:"ops"`              // requests in that time, failed ones included
	Errors           uint64  `json:"errors"`           // of which failed
	OpsPerSecond     float64 `json:"ops_per_second"`
	ReadBytes        uint64  `json:"read_bytes"`    // read by read requests
	WrittenBytes     uint64  `json:"written_bytes"` // written by write and copy_file_range requests
	ReadMBPerSecond  float64 `json:"read_mb_per_second"`
	WriteMBPerSecond float64 `json:"write_mb_per_second"`
	P99Seconds       float64 `json:"p99_seconds"`   // 99th percentile of the requests' time (within 12.5 %)
	DroppedTotal     uint64  `json:"dropped_total"` // events dropped since the start

	p99 time.Duration
}

// liveTime is the live line's time format: RFC 3339 in UTC with milliseconds.
const liveTime = "2006-01-02T15:04:05.000Z07:00"

func newLiveStats(d tally.Snapshot, dt time.Duration, dropped uint64) liveStats {
	ops, errs, rd, wr := d.Totals()
	sec := dt.Seconds()
	if sec <= 0 {
		sec = 1
	}
	return liveStats{
		Time: d.At.UTC().Format(liveTime), IntervalSeconds: dt.Seconds(),
		Ops: ops, Errors: errs, OpsPerSecond: float64(ops) / sec,
		ReadBytes: rd, WrittenBytes: wr, ReadMBPerSecond: float64(rd) / sec / 1e6, WriteMBPerSecond: float64(wr) / sec / 1e6,
		P99Seconds: d.Quantile(0.99).Seconds(), DroppedTotal: dropped, p99: d.Quantile(0.99),
	}
}

// line renders the stats as text or as one JSON object.
func (st liveStats) line(how string) string {
	if how == "json" {
		b, err := json.Marshal(st)
		if err != nil { // a struct of numbers and a string: cannot happen
			return fmt.Sprintf(`{"error":%q}`, err.Error())
		}
		return string(b)
	}
	line := fmt.Sprintf("%s iotap: %8.0f ops/s  read %7.1f MB/s  write %7.1f MB/s  p99 %s",
		st.Time, st.OpsPerSecond, st.ReadMBPerSecond, st.WriteMBPerSecond, format.Dur(int64(st.p99)))
	if st.Errors > 0 {
		line += fmt.Sprintf("  errors %d", st.Errors)
	}
	if st.DroppedTotal > 0 {
		line += fmt.Sprintf("  dropped %d", st.DroppedTotal)
	}
	return line
}

// recordEnd is what the end-of-run summary tells: how the run ended and after how long,
// what the layer counted, what the trace writer wrote, and what recording cost.
type recordEnd struct {
	outcome string
	elapsed time.Duration
	snap    tally.Snapshot
	ws      trace.WriterStats
	cost    trace.LayerCost
	path    string // the trace
}

// writeSummary prints the one-screen end-of-run summary.
func writeSummary(w io.Writer, end recordEnd) {
	ops, errs, rd, wr := end.snap.Totals()
	_, _ = fmt.Fprintf(w, "\niotap: %s after %s\n", end.outcome, end.elapsed.Round(time.Millisecond))
	_, _ = fmt.Fprintf(w, "  ops %d (%d failed), read %s, written %s\n", ops, errs, format.Bytes(rd), format.Bytes(wr))
	if by := end.snap.ByTime(); len(by) > 0 {
		_, _ = fmt.Fprintf(w, "  %-14s %10s %10s %10s %10s %10s\n", "op", "count", "total", "p50", "p99", "bytes")
		for i, o := range by {
			if i == 8 {
				_, _ = fmt.Fprintf(w, "  ... %d more ops\n", len(by)-i)
				break
			}
			b := ""
			if o.Bytes > 0 {
				b = format.Bytes(o.Bytes)
			}
			_, _ = fmt.Fprintf(w, "  %-14s %10d %10s %10s %10s %10s\n", o.Op, o.Count, format.Dur(int64(o.Dur)), format.Dur(int64(o.Quantile(0.5))), format.Dur(int64(o.Quantile(0.99))), b)
		}
	}
	_, _ = fmt.Fprintf(w, "  events %d written, %d dropped", end.ws.Written, end.ws.Dropped)
	if end.ws.Lost > 0 {
		_, _ = fmt.Fprintf(w, " (%d of them when a write of the trace failed)", end.ws.Lost)
	}
	if end.ws.Blocked > 0 {
		_, _ = fmt.Fprintf(w, ", job waited %s for trace buffer space", end.ws.Blocked.Round(time.Millisecond))
	}
	if line := costLine(end.cost, end.ws.EncodeCPU, end.ws.Written); line != "" {
		_, _ = fmt.Fprintf(w, "\n  %s", line)
	}
	if end.ws.PathCompactions > 0 {
		_, _ = fmt.Fprintf(w, "\n  path index: %d paths no longer in use forgotten in %d compactions, %s",
			end.ws.PathsForgotten, end.ws.PathCompactions, format.Bytes(uint64(16*end.ws.PathIndexSlots)))
	}
	_, _ = fmt.Fprintf(w, "\n  trace %s (%s)", end.path, format.Bytes(end.ws.Bytes))
	if rss := peakRSS(); rss > 0 {
		_, _ = fmt.Fprintf(w, ", recorder peak RSS %s", format.Bytes(rss))
	}
	if l := memlimit.Applied(); l.Bytes > 0 {
		_, _ = fmt.Fprintf(w, " (Go memory limit %s: %.0f%% of %s)", format.Bytes(uint64(l.Bytes)), 100*memlimit.Ratio, l.File)
	}
	_, _ = fmt.Fprintln(w)
}

// costLine says what recording cost, as the layer and the writer measured it: the layer's
// own work per request, against the time requests spent in the layer, and the encoder's
// CPU per event written. Empty when nothing was measured.
func costLine(c trace.LayerCost, encodeCPU time.Duration, events uint64) string {
	if c.Requests == 0 || c.InLayer <= 0 {
		return ""
	}
	n := time.Duration(c.Requests)
	line := fmt.Sprintf("recording cost: %s of the layer's own work per request, %.1f%% of the %s a request spent in it",
		format.Dur(int64(c.Self/n)), 100*float64(c.Self)/float64(c.InLayer), format.Dur(int64(c.InLayer/n)))
	switch {
	case c.Connector:
		line += "\n    " + attributionLine(c)
		if c.Resolve > 0 {
			line += fmt.Sprintf("; %s per request reading new programs' names from /proc", format.Dur(int64(c.Resolve/n)))
		}
	case c.Threads > 0:
		line += fmt.Sprintf("\n    (of which %s: looking up %d new threads in /proc, %s each)",
			format.Dur(int64(c.Resolve/n)), c.Threads, format.Dur(int64(c.Resolve/time.Duration(c.Threads))))
	}
	if encodeCPU > 0 && events > 0 {
		line += fmt.Sprintf("\n    trace encoder: %s of CPU per event", format.Dur(int64(encodeCPU/time.Duration(events))))
	}
	return line
}

// attributionLine says how the layer named the threads: from the proc connector, with
// how many records were written after the thread's first event (late) or lack its name or
// executable (missing).
func attributionLine(c trace.LayerCost) string {
	return fmt.Sprintf("threads: %d attributed from the kernel's proc connector, %d late, %d missing", c.Threads, c.Late, c.Missing)
}

// peakRSS returns this process's peak resident set size (VmHWM), or 0.
func peakRSS() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
