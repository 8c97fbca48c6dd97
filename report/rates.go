package report

import (
	"fmt"
	"strings"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/trace/stats"
)

// Rates.
//
// An operation's rate is over the time at least one of its requests (or calls) was in
// flight, its busy time: what the storage delivered while the job asked for that
// operation, whatever the job did between. The rate counts the ops that succeeded; those
// that failed have their own rate over the same time. MB are 10^6 bytes. A job's rates are over its
// wall time (first op's start to last op's end) and over its I/O-active time (the time
// at least one op of any kind was in flight).

// AccessRow is one side of the first-access split of reads: reads that returned bytes
// never read before from their file in the trace (first_access), or only bytes read
// before (reaccess).
type AccessRow struct {
	Bytes   uint64 `json:"bytes"`
	TotalNs int64  `json:"total_ns"`
	Latency
}

// AccessSplit splits a read row's reads into first access and re-access; both are nil on
// other rows.
type AccessSplit struct {
	FirstAccess *AccessRow `json:"first_access,omitempty"`
	Reaccess    *AccessRow `json:"reaccess,omitempty"`
}

// accessSplit is the AccessSplit of a row with figures in.
func accessSplit(in rowIn) AccessSplit {
	if in.first == nil {
		return AccessSplit{}
	}
	return AccessSplit{FirstAccess: accessRow(in.first), Reaccess: accessRow(in.again)}
}

func accessRow(a *stats.AccessStats) *AccessRow {
	if a.Count == 0 {
		return nil
	}
	return &AccessRow{Bytes: a.Bytes, TotalNs: a.TotalNs, Latency: latency(a.Hist, a.Count, a.TotalNs, a.MaxNs)}
}

// JobRates are the job's bytes and operation rates.
type JobRates struct {
	// View says what was counted: "syscalls" (the application's calls) or "requests".
	View       string `json:"view"`
	ReadBytes  uint64 `json:"read_bytes"`
	WriteBytes uint64 `json:"write_bytes"`
	// DataOps (reads, writes and copy_file_range) and MetaOps (every other op or call)
	// count those that succeeded, and the rates are of them; FailedOps are the others.
	DataOps   uint64 `json:"data_ops"`
	MetaOps   uint64 `json:"meta_ops"`
	FailedOps uint64 `json:"failed_ops"`
	WallNs    int64  `json:"wall_ns"`
	ActiveNs  int64  `json:"active_ns"` // I/O-active time: at least one op in flight
	// ActiveSummed says ActiveNs sums the I/O-active times of several traces (nodes).
	ActiveSummed bool    `json:"active_summed,omitempty"`
	Wall         JobRate `json:"wall"`
	Active       JobRate `json:"active"`
}

// JobRate are a job's rates over one span of time.
type JobRate struct {
	MBps      float64 `json:"mb_per_s"` // read and written
	ReadMBps  float64 `json:"read_mb_per_s"`
	WriteMBps float64 `json:"write_mb_per_s"`
	IOPS      float64 `json:"iops"` // data ops per second
	MetaOps   float64 `json:"meta_ops_per_s"`
}

func perSec(n float64, ns int64) float64 {
	if ns <= 0 {
		return 0
	}
	return round3(n / (float64(ns) / 1e9))
}

func jobRate(j *JobRates, ns int64) JobRate {
	return JobRate{
		MBps:      perSec(float64(j.ReadBytes+j.WriteBytes)/1e6, ns),
		ReadMBps:  perSec(float64(j.ReadBytes)/1e6, ns),
		WriteMBps: perSec(float64(j.WriteBytes)/1e6, ns),
		IOPS:      perSec(float64(j.DataOps), ns),
		MetaOps:   perSec(float64(j.MetaOps), ns),
	}
}

// data counts the data ops of o (successful ones read and wrote the given bytes).
func (j *JobRates) data(o *stats.OpStats, read, written uint64) {
	j.DataOps += o.Count - o.Errors
	j.FailedOps += o.Errors
	j.ReadBytes += read
	j.WriteBytes += written
}

// meta counts the metadata ops of o.
func (j *JobRates) meta(o *stats.OpStats) {
	j.MetaOps += o.Count - o.Errors
	j.FailedOps += o.Errors
}

// jobRates counts the job's bytes and ops in the rows of ax: reads, writes and
// copy_file_range are data, forgets (the kernel dropping inodes) no operation of the job,
// anything else metadata.
func jobRates(s *stats.Stats, wallNs int64, ax *axis) *JobRates {
	j := &JobRates{View: ax.view, WallNs: wallNs, ActiveNs: s.BusyNs(), ActiveSummed: len(s.Sources) > 1}
	for k := range ax.kinds {
		o := ax.in(s, k).o
		switch ax.name(k) {
		case "read":
			j.data(o, o.Bytes, 0)
		case "write":
			j.data(o, 0, o.Bytes)
		case "copy_file_range":
			j.data(o, o.Bytes, o.Bytes)
		case "forget": // the kernel dropping inodes
		default:
			j.meta(o)
		}
	}
	j.Wall, j.Active = jobRate(j, j.WallNs), jobRate(j, j.ActiveNs)
	return j
}

// jobLine is the job's rates in two lines of text.
func jobLine(j *JobRates) string {
	if j == nil {
		return ""
	}
	what := "calls"
	if j.View == ViewRequests {
		what = "requests"
	}
	line := func(span string, ns int64, r JobRate) string {
		return fmt.Sprintf("  over its %s %s: %.1f MB/s (read %.1f, write %.1f), %s IOPS, %s metadata %s/s\n",
			span, format.Dur(ns), r.MBps, r.ReadMBps, r.WriteMBps, rateText(r.IOPS), rateText(r.MetaOps), what)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "job: read %s, wrote %s in %s data and %s metadata %s", format.Bytes(j.ReadBytes), format.Bytes(j.WriteBytes),
		format.Count(j.DataOps), format.Count(j.MetaOps), what)
	if j.FailedOps > 0 {
		fmt.Fprintf(&b, " that succeeded (and %s that failed)", format.Count(j.FailedOps))
	}
	b.WriteString("\n")
	b.WriteString(line("wall time", j.WallNs, j.Wall))
	active := "I/O-active time (at least one op in flight)"
	if j.ActiveSummed {
		active = "I/O-active time (at least one op in flight, summed over its traces)"
	}
	b.WriteString(line(active, j.ActiveNs, j.Active))
	return b.String()
}

// rateText formats a rate per second with three significant digits at most ("141k",
// "2.1k", "7.5").
func rateText(r float64) string {
	switch {
	case r == 0:
		return "0"
	case r >= 1e6:
		return fmt.Sprintf("%.3gM", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.3gk", r/1e3)
	case r >= 100:
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.3g", r)
}

// filesOp reports whether an op's or call's rate counts files (creates and unlinks).
func filesOp(name string) bool {
	return name == "create" || name == "unlink" || name == "mknod"
}

// dataOp reports whether an op or call moves data (its MB/s is shown).
func dataOp(name string) bool {
	return name == "read" || name == "write" || name == "copy_file_range"
}

// rateCell is an op's rate in a table: "141k files/s", "2.1k/s".
func rateCell(name string, opsPerS float64) string {
	if opsPerS == 0 {
		return "-"
	}
	if filesOp(name) {
		return rateText(opsPerS) + " files/s"
	}
	return rateText(opsPerS) + "/s"
}

// mbCell is an op's MB/s in a table, "-" for other than data ops.
func mbCell(name string, mbps float64) string {
	if !dataOp(name) || mbps == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", mbps)
}

// Rates are a row's rates over its busy time (BusyNs: at least one of its requests or
// calls in flight): OpsPerS of those that succeeded, FailsPerS of those that failed, and
// MBps of the bytes the successful ones moved (read, write, copy_file_range rows).
type Rates struct {
	BusyNs    int64   `json:"busy_ns"`
	OpsPerS   float64 `json:"ops_per_s"`
	FailsPerS float64 `json:"failures_per_s,omitempty"`
	MBps      float64 `json:"mb_per_s,omitempty"`
}

// rowRates are the Rates of a row named name with figures in.
func rowRates(name string, in rowIn) Rates {
	o := in.o
	r := Rates{BusyNs: in.busy, OpsPerS: perSec(float64(o.Count-min(o.Errors, o.Count)), in.busy), FailsPerS: perSec(float64(o.Errors), in.busy)}
	if dataOp(name) {
		r.MBps = perSec(float64(o.Bytes)/1e6, in.busy)
	}
	return r
}
