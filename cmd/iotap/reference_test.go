package main

// A second, deliberately simple implementation of the figures `iotap record` (its
// end-of-run summary), `iotap report` and `iotap compare` print, recomputed from
// `iotap export` of real recorded jobs. It shares
// no code with the aggregation (trace/stats) or the rendering (report): plain
// loops over the exported events, exact percentiles from sorted durations, byte ranges
// kept as a plain list per file.
//
// Percentiles are the one figure that may differ: the report's come from HDR histograms
// with three significant digits from 1 ns, which give the highest value equivalent to the
// order statistic of rank ⌈p/100 × n⌉ (at least 1; SQL's percentile_disc), capped at the maximum. So a
// reported pN is never below the exact order statistic v and at most v/1024 above it
// (values below 2048 ns are exact). Means are rounded to 0.1 ns and rates to 0.001/s in
// the JSON; everything else must be equal. The per-interval p99 and the record summary's
// percentiles come from coarser log histograms, and the summary prints three significant
// digits: those are checked within the bounds their functions state.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/testenv"
)

// refEvent is one exported event (iotap export --help names the fields).
type refEvent struct {
	Op        string `json:"op"`
	Start     int64  `json:"start_ns"`
	Dur       int64  `json:"dur_ns"`
	Path      string `json:"path"`
	Path2     string `json:"path2"`
	Handle    uint64 `json:"handle"`
	Offset    int64  `json:"file_offset"`
	Size      uint32 `json:"size"`
	Ret       int64  `json:"ret"`
	Errno     int    `json:"errno"`
	ErrnoName string `json:"errno_name"`
	Tid       uint32 `json:"tid"`
	Pid       uint32 `json:"pid"`
	Comm      string `json:"comm"`
	CallStart int64  `json:"call_start_ns"`
	CallEnd   int64  `json:"call_end_ns"`
	CallNr    int64  `json:"call_nr"`
	Queued    int64  `json:"queued_ns"`
	Done      int64  `json:"done_ns"`
	// Passthrough: a read or write the kernel served and timed itself: the whole call.
	Passthrough bool `json:"passthrough"`
}

func (e *refEvent) ok() bool { return e.Errno == 0 }

// refMovesBytes are the ops whose ret counts bytes done (the report's doc: read, write,
// copy_file_range, readdir*, *xattr, readlink).
var refMovesBytes = map[string]bool{"read": true, "write": true, "copy_file_range": true, "readdir": true,
	"readdirplus": true, "getxattr": true, "listxattr": true, "readlink": true}

// refDataOps are the ops and calls whose MB/s is given.
var refDataOps = map[string]bool{"read": true, "write": true, "copy_file_range": true}

// refReplayCalls names the system call a replay's event is, for the kinds this test
// checks (a replay's trace records the calls it issued, one event each).
var refReplayCalls = map[string]string{"read": "read", "write": "write", "copy_file_range": "copy_file_range",
	"open": "open", "create": "open", "opendir": "open", "lookup": "stat", "getattr": "stat", "statx": "stat",
	"flush": "close", "release": "close", "releasedir": "close", "unlink": "unlink", "mkdir": "mkdir",
	"rmdir": "rmdir", "readdir": "getdents", "readdirplus": "getdents", "statfs": "statfs"}

// refRun runs the iotap binary in dir and returns its standard output.
func refRun(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(iotapBin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("iotap %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// refExport returns the events of a trace in start order (file order among equal starts).
func refExport(t *testing.T, tracePath string) []refEvent {
	t.Helper()
	return refExportAs(t, tracePath, func(e *refEvent) int64 { return e.Start })
}

// refExportAs decodes each exported event of a trace into an E and returns them in start
// order (file order among equal starts).
func refExportAs[E any](t *testing.T, tracePath string, start func(*E) int64) []E {
	t.Helper()
	var evs []E
	sc := bufio.NewScanner(bytes.NewReader(refRun(t, "", "export", tracePath)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e E
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("export of %s: %v", tracePath, err)
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		t.Fatalf("export of %s: no events", tracePath)
	}
	sort.SliceStable(evs, func(i, j int) bool { return start(&evs[i]) < start(&evs[j]) })
	return evs
}

// refUnion returns the length of the union of the events' [start, start+dur).
func refUnion(evs []*refEvent) int64 {
	spans := make([][2]int64, 0, len(evs))
	for _, e := range evs {
		spans = append(spans, [2]int64{e.Start, e.Start + max(e.Dur, 0)})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	var total, end int64
	for i, s := range spans {
		switch {
		case i == 0 || s[0] > end:
			total += s[1] - s[0]
			end = s[1]
		case s[1] > end:
			total += s[1] - end
			end = s[1]
		}
	}
	return total
}

// refStorage is a call's time in the storage: the union of its requests' times, except in
// a call that kernel passthrough served, which is the time of the call itself: from it, a
// request the kernel sent from within it (the privilege probe before a write) takes its
// round trip as FUSE's (done less queued) and gives back its own time in the storage.
func refStorage(reqs []*refEvent) int64 {
	var pass *refEvent
	for _, r := range reqs {
		if r.Passthrough {
			pass = r
		}
	}
	if pass == nil {
		return refUnion(reqs)
	}
	storage := pass.Dur
	for _, r := range reqs {
		if r != pass && r.Queued > 0 && r.Done > r.Queued {
			storage += r.Dur - (r.Done - r.Queued)
		}
	}
	return storage
}

// refWaitCalls are the system calls the waited check covers, by the report's call kind:
// the kernel names each request's call by its number, so these kinds need no folding.
var refWaitCalls = map[int64]string{
	unix.SYS_READ: "read", unix.SYS_PREAD64: "read", unix.SYS_READV: "read", unix.SYS_PREADV: "read", unix.SYS_PREADV2: "read",
	unix.SYS_WRITE: "write", unix.SYS_PWRITE64: "write", unix.SYS_WRITEV: "write", unix.SYS_PWRITEV: "write", unix.SYS_PWRITEV2: "write",
}

// refWaited is what the application waited for the calls of one kind whose entry and
// return the kernel measured: each call's wait (return less entry) and its time in the
// storage (when at least one of its requests was in flight).
type refWaited struct {
	waits     []int64
	storageNs int64
}

// refWaits groups the requests of recordings into system calls: the requests a thread
// sent within one call share its entry time; the call's return is on its last request.
func refWaits(traces [][]refEvent) map[string]*refWaited {
	type key struct {
		tid   uint32
		entry int64
	}
	type call struct {
		kind string
		ret  int64
		reqs []*refEvent
	}
	out := map[string]*refWaited{}
	for _, evs := range traces {
		calls := map[key]*call{}
		var order []key
		for i := range evs {
			e := &evs[i]
			kind, ok := refWaitCalls[e.CallNr]
			if !ok || e.CallStart <= 0 {
				continue
			}
			k := key{e.Tid, e.CallStart}
			c := calls[k]
			if c == nil {
				c = &call{kind: kind}
				calls[k] = c
				order = append(order, k)
			}
			c.reqs = append(c.reqs, e)
			c.ret = max(c.ret, e.CallEnd)
		}
		for _, k := range order {
			c := calls[k]
			if c.ret <= 0 {
				continue
			}
			w := out[c.kind]
			if w == nil {
				w = &refWaited{}
				out[c.kind] = w
			}
			w.waits = append(w.waits, c.ret-k.entry)
			w.storageNs += refStorage(c.reqs)
		}
	}
	return out
}

// refPattern are the access patterns of reads and writes that succeeded: a read or write
// is sequential when it starts where the previous one on its handle ended, or at offset 0
// as the handle's first; re-read bytes are those a read returned from a range of its file
// read before. Sizes count every read and write by the size it asked for.
type refPattern struct {
	seqReads, randReads, seqWrites, randWrites     uint64
	seqReadBytes, readBytes, seqWriteBytes, writeB uint64
	rereadBytes                                    uint64
	readSizes, writeSizes                          map[string]uint64
}

// refSizeLabel is the size bucket of a request of n bytes: ≤ 4 KiB, then powers of two to
// 1 MiB, then more.
func refSizeLabel(n uint32) string {
	labels := []string{"<=4K", "<=8K", "<=16K", "<=32K", "<=64K", "<=128K", "<=256K", "<=512K", "<=1M"}
	for i, l := range labels {
		if int64(n) <= 4096<<i {
			return l
		}
	}
	return ">1M"
}

func refPatterns(traces [][]refEvent) *refPattern {
	p := &refPattern{readSizes: map[string]uint64{}, writeSizes: map[string]uint64{}}
	for _, evs := range traces {
		next := map[uint64]int64{} // handle: where its last read or write ended
		read := refRanges{}
		for i := range evs {
			e := &evs[i]
			switch e.Op {
			case "open", "create", "release":
				delete(next, e.Handle)
				continue
			case "read", "write":
			default:
				continue
			}
			write := e.Op == "write"
			if write {
				p.writeSizes[refSizeLabel(e.Size)]++
			} else {
				p.readSizes[refSizeLabel(e.Size)]++
			}
			if !e.ok() {
				continue
			}
			n := max(e.Ret, 0)
			end, seen := next[e.Handle]
			seq := (seen && e.Offset == end) || (!seen && e.Offset == 0)
			next[e.Handle] = e.Offset + n
			switch {
			case write && seq:
				p.seqWrites++
				p.seqWriteBytes += uint64(n)
			case write:
				p.randWrites++
			case seq:
				p.seqReads++
				p.seqReadBytes += uint64(n)
			default:
				p.randReads++
			}
			if write {
				p.writeB += uint64(n)
			} else {
				p.readBytes += uint64(n)
				if n > 0 {
					p.rereadBytes += uint64(n - read.add(e.Path, e.Offset, e.Offset+n))
				}
			}
		}
	}
	return p
}

// refDepths returns, per op, the in-flight depth each request found when it started,
// itself included: the requests of the op of the same trace that started before it, or at
// the same time and earlier in the export, and had not ended.
func refDepths(traces [][]refEvent) map[string][]int64 {
	out := map[string][]int64{}
	for _, evs := range traces {
		byOp := map[string][]*refEvent{}
		for i := range evs {
			byOp[evs[i].Op] = append(byOp[evs[i].Op], &evs[i])
		}
		for op, es := range byOp {
			for i, e := range es {
				d := int64(1)
				for _, o := range es[:i] {
					if o.Start+o.Dur > e.Start {
						d++
					}
				}
				out[op] = append(out[op], d)
			}
		}
	}
	return out
}

// refGroup are the figures of a set of events (an op, a call, a first-access split).
type refGroup struct {
	count, errors, bytes uint64
	errnos               map[string]uint64
	totalNs, busyNs      int64 // busy: summed over traces, each trace's union
	durs, okDurs         []int64
	okTotal              int64
}

func (g *refGroup) add(e *refEvent, withBytes bool) {
	g.count++
	g.totalNs += e.Dur
	g.durs = append(g.durs, e.Dur)
	if !e.ok() {
		g.errors++
		if g.errnos == nil {
			g.errnos = map[string]uint64{}
		}
		g.errnos[e.ErrnoName]++
		return
	}
	g.okDurs = append(g.okDurs, e.Dur)
	g.okTotal += e.Dur
	if withBytes && e.Ret > 0 {
		g.bytes += uint64(e.Ret)
	}
}

// refRanges are the byte ranges read so far, per file: sorted, disjoint [from, to).
type refRanges map[string][][2]int64

// add records [from, to) of path and returns how many of its bytes were not read before.
func (r refRanges) add(path string, from, to int64) int64 {
	old := r[path]
	covered := int64(0)
	for _, x := range old {
		if lo, hi := max(from, x[0]), min(to, x[1]); hi > lo {
			covered += hi - lo
		}
	}
	merged := [][2]int64{}
	cur := [2]int64{from, to}
	for _, x := range old {
		if x[1] < cur[0] || x[0] > cur[1] {
			merged = append(merged, x)
		} else {
			cur = [2]int64{min(cur[0], x[0]), max(cur[1], x[1])}
		}
	}
	merged = append(merged, cur)
	sort.Slice(merged, func(i, j int) bool { return merged[i][0] < merged[j][0] })
	r[path] = merged
	return (to - from) - covered
}

// refFile and refProc are a file's and a process's figures.
type refFile struct {
	ops, errors, readOps, writeOps, readBytes, writeBytes, opens uint64
	totalNs                                                      int64
	first, re                                                    refGroup
	readWrite                                                    bool // a read or write names it: a regular file
}

type refProc struct {
	ops, errors, readBytes, writeBytes uint64
	totalNs                            int64
	comms                              map[string]bool
}

// refFigures are what this test computes for one or more traces.
type refFigures struct {
	events             uint64
	spanNs, activeNs   int64 // summed over traces
	totalNs            int64
	readBytes          uint64 // read and copied
	writeBytes         uint64 // written and copied
	ops                map[string]*refGroup
	calls              map[string]*refGroup // replay traces only: the events are calls
	first, re          refGroup
	files              map[string]*refFile
	procs              map[uint32]*refProc
	callNs             int64 // replay traces: every event but forget is a call
	waited             map[string]*refWaited
	dataOK, metaOK, ko uint64
}

// refCompute recomputes the figures of traces (each trace's events in start order);
// replay says they are replays' traces, whose events are the calls.
func refCompute(traces [][]refEvent, replay bool) *refFigures {
	f := &refFigures{ops: map[string]*refGroup{}, calls: map[string]*refGroup{}, files: map[string]*refFile{}, procs: map[uint32]*refProc{},
		waited: refWaits(traces)}
	group := func(m map[string]*refGroup, k string) *refGroup {
		if m[k] == nil {
			m[k] = &refGroup{}
		}
		return m[k]
	}
	file := func(p string) *refFile {
		if f.files[p] == nil {
			f.files[p] = &refFile{}
		}
		return f.files[p]
	}
	for _, evs := range traces {
		all := make([]*refEvent, len(evs))
		byOp := map[string][]*refEvent{}
		byCall := map[string][]*refEvent{}
		ranges := refRanges{}
		first, last := evs[0].Start, evs[0].Start+evs[0].Dur
		for i := range evs {
			e := &evs[i]
			all[i] = e
			f.events++
			f.totalNs += e.Dur
			first, last = min(first, e.Start), max(last, e.Start+e.Dur)
			group(f.ops, e.Op).add(e, refMovesBytes[e.Op])
			byOp[e.Op] = append(byOp[e.Op], e)
			if replay && e.Op != "forget" {
				f.callNs += e.Dur
				if c, ok := refReplayCalls[e.Op]; ok {
					group(f.calls, c).add(e, refMovesBytes[e.Op])
					byCall[c] = append(byCall[c], e)
				}
				switch {
				case !e.ok():
					f.ko++
				case refDataOps[e.Op]:
					f.dataOK++
				default:
					f.metaOK++
				}
			}
			p := f.procs[e.Pid]
			if p == nil {
				p = &refProc{comms: map[string]bool{}}
				f.procs[e.Pid] = p
			}
			p.ops++
			p.totalNs += e.Dur
			p.comms[e.Comm] = true
			fl := file(e.Path)
			fl.ops++
			fl.totalNs += e.Dur
			if !e.ok() {
				p.errors++
				fl.errors++
			}
			var n uint64
			if e.ok() && e.Ret > 0 {
				n = uint64(e.Ret)
			}
			switch e.Op {
			case "read":
				fl.readOps++
				fl.readWrite = true
				fl.readBytes += n
				p.readBytes += n
				f.readBytes += n
				if n > 0 {
					if ranges.add(e.Path, e.Offset, e.Offset+e.Ret) > 0 {
						f.first.add(e, true)
						fl.first.add(e, true)
					} else {
						f.re.add(e, true)
						fl.re.add(e, true)
					}
				}
			case "write":
				fl.writeOps++
				fl.readWrite = true
				fl.writeBytes += n
				p.writeBytes += n
				f.writeBytes += n
			case "copy_file_range":
				fl.readBytes += n
				file(e.Path2).writeBytes += n
				p.readBytes += n
				p.writeBytes += n
				f.readBytes += n
				f.writeBytes += n
			case "open", "create":
				if e.ok() {
					fl.opens++
				}
			}
		}
		f.spanNs += last - first
		f.activeNs += refUnion(all)
		for op, es := range byOp {
			f.ops[op].busyNs += refUnion(es)
		}
		for c, es := range byCall {
			f.calls[c].busyNs += refUnion(es)
		}
	}
	return f
}

// JSON shapes of the report and the comparison, as documented (report/doc.go).
type refLatency struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_ns"`
	P50   int64   `json:"p50_ns"`
	P90   int64   `json:"p90_ns"`
	P99   int64   `json:"p99_ns"`
	P999  int64   `json:"p99_9_ns"`
	Max   int64   `json:"max_ns"`
}

type refAccessJSON struct {
	refLatency
	Bytes   uint64 `json:"bytes"`
	TotalNs int64  `json:"total_ns"`
}

type refRowJSON struct {
	Op     string            `json:"op"`
	Call   string            `json:"call"`
	Errors uint64            `json:"errors"`
	Errnos map[string]uint64 `json:"errnos"`
	Bytes  uint64            `json:"bytes"`
	Total  int64             `json:"total_ns"`
	refLatency
	Busy        int64          `json:"busy_ns"`
	OpsPerS     float64        `json:"ops_per_s"`
	FailsPerS   float64        `json:"failures_per_s"`
	MBps        float64        `json:"mb_per_s"`
	FirstAccess *refAccessJSON `json:"first_access"`
	Reaccess    *refAccessJSON `json:"reaccess"`
	Waited      *refWaitedJSON `json:"waited"`
	Inflight    *struct {
		Max  uint32  `json:"max"`
		Mean float64 `json:"mean"`
		P50  uint32  `json:"p50"`
		P90  uint32  `json:"p90"`
		P99  uint32  `json:"p99"`
	} `json:"inflight"`
}

// refPatternsJSON is the report's access patterns.
type refPatternsJSON struct {
	SeqReadShare  float64 `json:"seq_read_share"`
	SeqWriteShare float64 `json:"seq_write_share"`
	SeqReads      uint64  `json:"seq_reads"`
	RandReads     uint64  `json:"rand_reads"`
	SeqWrites     uint64  `json:"seq_writes"`
	RandWrites    uint64  `json:"rand_writes"`
	ReadBytes     uint64  `json:"read_bytes"`
	WriteBytes    uint64  `json:"write_bytes"`
	RereadBytes   uint64  `json:"reread_bytes"`
	ReadSizes     []struct {
		Bucket string `json:"bucket"`
		Count  uint64 `json:"count"`
	} `json:"read_sizes"`
	WriteSizes []struct {
		Bucket string `json:"bucket"`
		Count  uint64 `json:"count"`
	} `json:"write_sizes"`
}

// refWaitedJSON is a call row's "what the application waited under the layer".
type refWaitedJSON struct {
	refLatency
	TotalNs   int64   `json:"total_ns"`
	StorageNs int64   `json:"storage_ns"`
	FUSENs    int64   `json:"fuse_ns"`
	FUSEShare float64 `json:"fuse_share"`
}

type refJobJSON struct {
	View       string `json:"view"`
	ReadBytes  uint64 `json:"read_bytes"`
	WriteBytes uint64 `json:"write_bytes"`
	DataOps    uint64 `json:"data_ops"`
	MetaOps    uint64 `json:"meta_ops"`
	FailedOps  uint64 `json:"failed_ops"`
	WallNs     int64  `json:"wall_ns"`
	ActiveNs   int64  `json:"active_ns"`
	Wall       struct {
		MBps      float64 `json:"mb_per_s"`
		ReadMBps  float64 `json:"read_mb_per_s"`
		WriteMBps float64 `json:"write_mb_per_s"`
		IOPS      float64 `json:"iops"`
	} `json:"wall"`
	Active struct {
		MBps float64 `json:"mb_per_s"`
		IOPS float64 `json:"iops"`
	} `json:"active"`
}

type refReportJSON struct {
	Total struct {
		Events     uint64          `json:"events"`
		DurationNs int64           `json:"duration_ns"`
		TotalNs    int64           `json:"total_ns"`
		Job        refJobJSON      `json:"job"`
		Ops        []refRowJSON    `json:"ops"`
		Patterns   refPatternsJSON `json:"patterns"`
		Intervals  struct {
			WidthNs int64 `json:"width_ns"`
			Points  []struct {
				Ops       uint64  `json:"ops"`
				Errors    uint64  `json:"errors"`
				OpsPerS   float64 `json:"ops_per_s"`
				ReadMBps  float64 `json:"read_mb_s"`
				WriteMBps float64 `json:"write_mb_s"`
				P99       int64   `json:"p99_ns"`
				MaxNs     int64   `json:"max_ns"`
				BusyNs    int64   `json:"busy_ns"`
			} `json:"points"`
		} `json:"intervals"`
		Syscalls  []refRowJSON `json:"syscalls"`
		Processes []struct {
			Pid        uint32 `json:"pid"`
			Comm       string `json:"comm"`
			Ops        uint64 `json:"ops"`
			Errors     uint64 `json:"errors"`
			TotalNs    int64  `json:"total_ns"`
			ReadBytes  uint64 `json:"read_bytes"`
			WriteBytes uint64 `json:"write_bytes"`
		} `json:"processes"`
		Files []struct {
			Path        string `json:"path"`
			Ops         uint64 `json:"ops"`
			Errors      uint64 `json:"errors"`
			TotalNs     int64  `json:"total_ns"`
			ReadOps     uint64 `json:"read_ops"`
			WriteOps    uint64 `json:"write_ops"`
			ReadBytes   uint64 `json:"read_bytes"`
			WriteBytes  uint64 `json:"write_bytes"`
			Opens       uint64 `json:"opens"`
			FirstReads  uint64 `json:"first_access_reads"`
			FirstBytes  uint64 `json:"first_access_bytes"`
			FirstNs     int64  `json:"first_access_ns"`
			Rereads     uint64 `json:"reaccess_reads"`
			RereadBytes uint64 `json:"reaccess_bytes"`
			RereadNs    int64  `json:"reaccess_ns"`
		} `json:"files_by_time"`
	} `json:"total"`
}

// refChecker collects the differences between the figures and the report's.
type refChecker struct {
	t       *testing.T
	name    string
	n       int // differences
	checked int // figures compared
}

func (c *refChecker) errorf(format string, args ...any) {
	c.t.Helper()
	c.n++
	if c.n <= 40 {
		c.t.Errorf("%s: "+format, append([]any{c.name}, args...)...)
	}
}

func (c *refChecker) eq(what string, got, want any) {
	c.t.Helper()
	c.checked++
	if fmt.Sprint(got) != fmt.Sprint(want) {
		c.errorf("%s = %v, recomputed %v", what, got, want)
	}
}

// rate checks a rate rounded to 0.001 against count per second of ns.
func (c *refChecker) rate(what string, got float64, count float64, ns int64) {
	c.t.Helper()
	c.checked++
	want := 0.0
	if ns > 0 {
		want = count / (float64(ns) / 1e9)
	}
	if math.Abs(got-want) > 0.0006+want*1e-9 {
		c.errorf("%s = %v, recomputed %.4f", what, got, want)
	}
}

// refCheckIntervals checks the per-interval series of one trace: in each interval of
// width ns from the trace's origin, the events that started in it, their errors, rates,
// bytes read and written (a copy's both), longest and summed durations, and p99 (from a log histogram:
// not below the exact value, at most 12.5 % or 1 µs above it, never above the maximum).
// got returns interval i's figures in that order.
func refCheckIntervals(c *refChecker, evs []refEvent, width int64, n int, got func(int) [8]float64) {
	c.t.Helper()
	if width <= 0 {
		c.errorf("intervals: width %d ns", width)
		return
	}
	type slot struct {
		ops, errors   uint64
		readB, writeB int64
		maxNs, busyNs int64
		durs          []int64
	}
	slots := make([]slot, n)
	for i := range evs {
		e := &evs[i]
		k := int(e.Start / width)
		if k >= n {
			c.errorf("intervals: an event at %d ns is beyond the %d intervals of %d ns", e.Start, n, width)
			return
		}
		sl := &slots[k]
		sl.ops++
		if !e.ok() {
			sl.errors++
		} else if e.Ret > 0 {
			switch e.Op {
			case "read":
				sl.readB += e.Ret
			case "write":
				sl.writeB += e.Ret
			case "copy_file_range": // read and written
				sl.readB += e.Ret
				sl.writeB += e.Ret
			}
		}
		sl.maxNs = max(sl.maxNs, e.Dur)
		sl.busyNs += e.Dur
		sl.durs = append(sl.durs, e.Dur)
	}
	w := float64(width) / 1e9
	round3 := func(f float64) float64 { return math.Round(f*1000) / 1000 }
	for i := range slots {
		sl, g := &slots[i], got(i)
		what := fmt.Sprintf("interval %d", i)
		want := [8]float64{float64(sl.ops), float64(sl.errors), round3(float64(sl.ops) / w),
			round3(float64(sl.readB) / 1e6 / w), round3(float64(sl.writeB) / 1e6 / w), 0, float64(sl.maxNs), float64(sl.busyNs)}
		for j, name := range []string{"ops", "errors", "ops_per_s", "read_mb_s", "write_mb_s", "", "max_ns", "busy_ns"} {
			if name != "" {
				c.eq(what+" "+name, g[j], want[j])
			}
		}
		if len(sl.durs) > 0 {
			exact := refNearestRank(slices.Sorted(slices.Values(sl.durs)), 99)
			hi := min(max(exact+exact/8, exact+1000), sl.maxNs)
			c.checked++
			if p := int64(g[5]); p < min(exact, hi) || p > hi {
				c.errorf("%s p99 = %d ns, exact %d ns (the log histogram allows up to %d)", what, p, exact, hi)
			}
		}
	}
}

// refShare is part/whole, 0 without a whole.
func refShare(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// refNearestRank is the order statistic of rank ⌈p/100 × n⌉, at least 1 (the nearest-rank
// method, SQL's percentile_disc), in integers: p in thousandths of a percent.
func refNearestRank(sorted []int64, p float64) int64 {
	pm := int(math.Round(p * 1000))
	rank := (pm*len(sorted) + 99_999) / 100_000
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// latency checks count, mean, max and percentiles against the durations.
func (c *refChecker) latency(what string, got refLatency, durs []int64) {
	c.t.Helper()
	c.eq(what+" count", got.Count, len(durs))
	if len(durs) == 0 {
		return
	}
	sorted := slices.Sorted(slices.Values(durs))
	var sum int64
	for _, d := range sorted {
		sum += d
	}
	if want := float64(sum) / float64(len(sorted)); math.Abs(got.Mean-want) > 0.051 {
		c.errorf("%s mean = %v, recomputed %.2f", what, got.Mean, want)
	}
	maxNs := sorted[len(sorted)-1]
	if got.Max != 0 {
		c.eq(what+" max", got.Max, maxNs)
	}
	for _, p := range []struct {
		p   float64
		got int64
	}{{50, got.P50}, {90, got.P90}, {99, got.P99}, {99.9, got.P999}} {
		if p.got == 0 && (p.p == 90 || p.p == 99.9) {
			continue // not in every row's JSON
		}
		want := refNearestRank(sorted, p.p)
		c.checked++
		if p.got < want || p.got > min(want+want/1024, maxNs) {
			c.errorf("%s p%v = %d ns, exact %d ns (3 significant digits allow up to %d)", what, p.p, p.got, want, min(want+want/1024, maxNs))
		}
	}
}

// row checks an op's (or a replay call's) row against its recomputed group.
func (c *refChecker) row(what string, r refRowJSON, g *refGroup) {
	c.t.Helper()
	c.eq(what+" errors", r.Errors, g.errors)
	if len(r.Errnos) > 0 || len(g.errnos) > 0 {
		c.eq(what+" errnos", r.Errnos, g.errnos)
	}
	c.eq(what+" bytes", r.Bytes, g.bytes)
	c.eq(what+" total_ns", r.Total, g.totalNs)
	c.latency(what, r.refLatency, g.durs)
	c.eq(what+" busy_ns", r.Busy, g.busyNs)
	c.rate(what+" ops_per_s", r.OpsPerS, float64(g.count-g.errors), g.busyNs)
	c.rate(what+" failures_per_s", r.FailsPerS, float64(g.errors), g.busyNs)
	if refDataOps[r.Op+r.Call] {
		c.rate(what+" mb_per_s", r.MBps, float64(g.bytes)/1e6, g.busyNs)
	}
}

// access checks a first-access or re-access row.
func (c *refChecker) access(what string, got *refAccessJSON, g *refGroup) {
	c.t.Helper()
	if got == nil {
		if g.count > 0 {
			c.errorf("%s missing, recomputed %d reads", what, g.count)
		}
		return
	}
	c.eq(what+" bytes", got.Bytes, g.bytes)
	c.eq(what+" total_ns", got.TotalNs, g.totalNs)
	c.latency(what, got.refLatency, g.durs)
}

// refCheckReport compares `iotap report --format json` of traces with the figures this
// test recomputes from their exports; replay says they are replays' traces.
func refCheckReport(t *testing.T, name string, traces []string, replay bool) *refFigures {
	t.Helper()
	var evs [][]refEvent
	for _, tr := range traces {
		evs = append(evs, refExport(t, tr))
	}
	f := refCompute(evs, replay)
	var rep refReportJSON
	args := append([]string{"report", "--format", "json", "--top", "100000"}, traces...)
	if err := json.Unmarshal(refRun(t, "", args...), &rep); err != nil {
		t.Fatal(err)
	}
	c := &refChecker{t: t, name: name}
	v := &rep.Total
	c.eq("events", v.Events, f.events)
	c.eq("total_ns", v.TotalNs, f.totalNs)
	// One trace: its first op's start to its last op's end; runs one after another (the
	// repeats here): their spans added up.
	c.eq("duration_ns", v.DurationNs, f.spanNs)
	// Ops.
	seen := map[string]bool{}
	for _, r := range v.Ops {
		g := f.ops[r.Op]
		if g == nil {
			c.errorf("op %s in the report, not in the export", r.Op)
			continue
		}
		seen[r.Op] = true
		c.eq("op "+r.Op+" count", r.Count, g.count)
		c.row("op "+r.Op, r, g)
		if r.Op == "read" {
			c.access("read requests: first access", r.FirstAccess, &f.first)
			c.access("read requests: re-access", r.Reaccess, &f.re)
		}
	}
	for op := range f.ops {
		if !seen[op] {
			c.errorf("op %s exported, not in the report", op)
		}
	}
	// In-flight depth per op.
	depths := refDepths(evs)
	for _, r := range v.Ops {
		d := depths[r.Op]
		if r.Inflight == nil || len(d) == 0 {
			c.errorf("op %s: in-flight depth %v, recomputed over %d requests", r.Op, r.Inflight, len(d))
			continue
		}
		sorted := slices.Sorted(slices.Values(d))
		var sum int64
		for _, x := range sorted {
			sum += x
		}
		what := "op " + r.Op + " in flight"
		c.eq(what+" max", r.Inflight.Max, sorted[len(sorted)-1])
		c.eq(what+" p50", r.Inflight.P50, refNearestRank(sorted, 50))
		c.eq(what+" p90", r.Inflight.P90, refNearestRank(sorted, 90))
		c.eq(what+" p99", r.Inflight.P99, refNearestRank(sorted, 99))
		if want := float64(sum) / float64(len(sorted)); math.Abs(r.Inflight.Mean-want) > 0.0006 {
			c.errorf("%s mean = %v, recomputed %.4f", what, r.Inflight.Mean, want)
		}
	}
	// Per interval (one trace: its events placed by start time).
	if len(evs) == 1 {
		refCheckIntervals(c, evs[0], v.Intervals.WidthNs, len(v.Intervals.Points), func(i int) [8]float64 {
			p := &v.Intervals.Points[i]
			return [8]float64{float64(p.Ops), float64(p.Errors), p.OpsPerS, p.ReadMBps, p.WriteMBps, float64(p.P99), float64(p.MaxNs), float64(p.BusyNs)}
		})
	}
	// Access patterns.
	pt, pj := refPatterns(evs), &v.Patterns
	c.eq("patterns seq_reads", pj.SeqReads, pt.seqReads)
	c.eq("patterns rand_reads", pj.RandReads, pt.randReads)
	c.eq("patterns seq_writes", pj.SeqWrites, pt.seqWrites)
	c.eq("patterns rand_writes", pj.RandWrites, pt.randWrites)
	c.eq("patterns read_bytes", pj.ReadBytes, pt.readBytes)
	c.eq("patterns write_bytes", pj.WriteBytes, pt.writeB)
	c.eq("patterns reread_bytes", pj.RereadBytes, pt.rereadBytes)
	c.eq("patterns seq_read_share", pj.SeqReadShare, refShare(pt.seqReadBytes, pt.readBytes))
	c.eq("patterns seq_write_share", pj.SeqWriteShare, refShare(pt.seqWriteBytes, pt.writeB))
	sizes := func(what string, got []struct {
		Bucket string `json:"bucket"`
		Count  uint64 `json:"count"`
	}, want map[string]uint64) {
		m := map[string]uint64{}
		for _, b := range got {
			m[b.Bucket] = b.Count
		}
		c.eq(what, m, want)
	}
	sizes("patterns read_sizes", pj.ReadSizes, pt.readSizes)
	sizes("patterns write_sizes", pj.WriteSizes, pt.writeSizes)
	// A replay's calls are its events.
	if replay {
		for _, r := range v.Syscalls {
			if g := f.calls[r.Call]; g != nil {
				c.eq("call "+r.Call+" count", r.Count, g.count)
				c.row("call "+r.Call, r, g)
			}
		}
	}
	// What the application waited for its reads and writes (recordings with the kernel's
	// legs): the calls' waits and their time in the storage.
	if !replay {
		for _, r := range v.Syscalls {
			w, kind := f.waited[r.Call], r.Call
			if kind != "read" && kind != "write" {
				continue
			}
			switch {
			case r.Waited == nil && w != nil:
				c.errorf("call %s: no waited row, recomputed %d calls measured", kind, len(w.waits))
			case r.Waited != nil && w == nil:
				c.errorf("call %s: waited %d calls, recomputed none measured", kind, r.Waited.Count)
			case w != nil:
				var total int64
				for _, d := range w.waits {
					total += d
				}
				what := "call " + kind + " waited"
				c.eq(what+" total_ns", r.Waited.TotalNs, total)
				c.eq(what+" storage_ns", r.Waited.StorageNs, w.storageNs)
				c.eq(what+" fuse_ns", r.Waited.FUSENs, max(total-w.storageNs, 0))
				c.eq(what+" fuse_share", r.Waited.FUSEShare, float64(max(total-w.storageNs, 0))/float64(total))
				c.latency(what, r.Waited.refLatency, w.waits)
			}
		}
	}
	// The job.
	j := &v.Job
	c.eq("job read_bytes", j.ReadBytes, f.readBytes)
	c.eq("job write_bytes", j.WriteBytes, f.writeBytes)
	c.eq("job wall_ns", j.WallNs, f.spanNs)
	c.eq("job active_ns", j.ActiveNs, f.activeNs)
	c.rate("job wall mb_per_s", j.Wall.MBps, float64(f.readBytes+f.writeBytes)/1e6, f.spanNs)
	c.rate("job wall read_mb_per_s", j.Wall.ReadMBps, float64(f.readBytes)/1e6, f.spanNs)
	c.rate("job wall write_mb_per_s", j.Wall.WriteMBps, float64(f.writeBytes)/1e6, f.spanNs)
	c.rate("job active mb_per_s", j.Active.MBps, float64(f.readBytes+f.writeBytes)/1e6, f.activeNs)
	if replay {
		c.eq("job data_ops", j.DataOps, f.dataOK)
		c.eq("job meta_ops", j.MetaOps, f.metaOK)
		c.eq("job failed_ops", j.FailedOps, f.ko)
		c.rate("job wall iops", j.Wall.IOPS, float64(f.dataOK), f.spanNs)
		c.rate("job active iops", j.Active.IOPS, float64(f.dataOK), f.activeNs)
	}
	// Processes.
	if len(v.Processes) != len(f.procs) {
		c.errorf("%d processes, recomputed %d", len(v.Processes), len(f.procs))
	}
	for _, p := range v.Processes {
		rp := f.procs[p.Pid]
		if rp == nil {
			c.errorf("process %d in the report, not in the export", p.Pid)
			continue
		}
		what := fmt.Sprintf("process %d (%s)", p.Pid, p.Comm)
		c.eq(what+" ops", p.Ops, rp.ops)
		c.eq(what+" errors", p.Errors, rp.errors)
		c.eq(what+" total_ns", p.TotalNs, rp.totalNs)
		c.eq(what+" read_bytes", p.ReadBytes, rp.readBytes)
		c.eq(what+" write_bytes", p.WriteBytes, rp.writeBytes)
		// pid 0: the kernel's requests, "(kernel)"; a process without a name: "(unknown)".
		if p.Pid != 0 && len(rp.comms) == 1 && !rp.comms[p.Comm] && (p.Comm != "(unknown)" || !rp.comms[""]) {
			c.errorf("%s: the export names its threads %v", what, rp.comms)
		}
	}
	// Files that were read or written.
	rows := map[string]int{}
	for i, fr := range v.Files {
		rows[fr.Path] = i
	}
	for path, rf := range f.files {
		if !rf.readWrite {
			continue
		}
		i, ok := rows[path]
		if !ok {
			c.errorf("file %q read or written, not in the report", path)
			continue
		}
		fr := v.Files[i]
		what := "file " + path
		c.eq(what+" ops", fr.Ops, rf.ops)
		c.eq(what+" errors", fr.Errors, rf.errors)
		c.eq(what+" total_ns", fr.TotalNs, rf.totalNs)
		c.eq(what+" read_ops", fr.ReadOps, rf.readOps)
		c.eq(what+" write_ops", fr.WriteOps, rf.writeOps)
		c.eq(what+" read_bytes", fr.ReadBytes, rf.readBytes)
		c.eq(what+" write_bytes", fr.WriteBytes, rf.writeBytes)
		c.eq(what+" opens", fr.Opens, rf.opens)
		c.eq(what+" first access", []any{fr.FirstReads, fr.FirstBytes, fr.FirstNs}, []any{rf.first.count, rf.first.bytes, rf.first.totalNs})
		c.eq(what+" re-access", []any{fr.Rereads, fr.RereadBytes, fr.RereadNs}, []any{rf.re.count, rf.re.bytes, rf.re.totalNs})
	}
	t.Logf("%s: %d figures compared, %d differ", name, c.checked, c.n)
	return f
}

// refCheckCompare compares `iotap compare --format json` of a recording against a replay
// side made of several runs with the recomputed figures of that side.
func refCheckCompare(t *testing.T, base string, runs []string, glob string) {
	t.Helper()
	var evs [][]refEvent
	for _, r := range runs {
		evs = append(evs, refExport(t, r))
	}
	side := refCompute(evs, true)
	baseFig := refCompute([][]refEvent{refExport(t, base)}, false)
	var cmp struct {
		Sides []struct {
			Events     uint64 `json:"events"`
			DurationNs int64  `json:"duration_ns"`
			TotalNs    int64  `json:"total_ns"`
			CallNs     int64  `json:"call_ns"`
		} `json:"sides"`
		Syscalls []struct {
			Call  string `json:"call"`
			Sides []struct {
				Count  uint64            `json:"count"`
				Errors uint64            `json:"errors"`
				Errnos map[string]uint64 `json:"errnos"`
				Bytes  uint64            `json:"bytes"`
				Mean   float64           `json:"mean_ns"`
				P50    int64             `json:"p50_ns"`
				P99    int64             `json:"p99_ns"`
				Total  int64             `json:"total_ns"`
				Busy   int64             `json:"busy_ns"`
				Ops    float64           `json:"ops_per_s"`
				Fails  float64           `json:"failures_per_s"`
				MBps   float64           `json:"mb_per_s"`
			} `json:"sides"`
		} `json:"syscalls"`
		Verdicts []struct {
			IONs          int64   `json:"io_ns"`
			BaseIONs      int64   `json:"baseline_io_ns"`
			IORatio       float64 `json:"io_ratio"`
			RuntimeNs     int64   `json:"runtime_ns"`
			BaseRuntimeNs int64   `json:"baseline_runtime_ns"`
			RuntimeRatio  float64 `json:"runtime_ratio"`
			RatioLow      float64 `json:"runtime_ratio_low"`
			RatioHigh     float64 `json:"runtime_ratio_high"`
			Source        string  `json:"runtime_source"`
			Differing     uint64  `json:"differing"`
			Compared      uint64  `json:"compared"`
		} `json:"verdict_figures"`
	}
	if err := json.Unmarshal(refRun(t, "", "compare", "--format", "json", "--force", base, glob), &cmp); err != nil {
		t.Fatal(err)
	}
	c := &refChecker{t: t, name: "compare"}
	if len(cmp.Sides) != 2 || len(cmp.Verdicts) != 1 {
		t.Fatalf("compare: %d sides, %d verdicts; want the runs merged into one side", len(cmp.Sides), len(cmp.Verdicts))
	}
	b, s := cmp.Sides[0], cmp.Sides[1]
	c.eq("baseline events", b.Events, baseFig.events)
	c.eq("baseline duration_ns", b.DurationNs, baseFig.spanNs)
	c.eq("baseline total_ns", b.TotalNs, baseFig.totalNs)
	c.eq("side events", s.Events, side.events)
	c.eq("side duration_ns (the runs' spans added up)", s.DurationNs, side.spanNs)
	c.eq("side total_ns", s.TotalNs, side.totalNs)
	c.eq("side call_ns", s.CallNs, side.callNs)
	for _, row := range cmp.Syscalls {
		g := side.calls[row.Call]
		if g == nil {
			continue
		}
		o := row.Sides[1]
		what := "side's " + row.Call
		c.eq(what+" count", o.Count, g.count)
		c.eq(what+" errors", o.Errors, g.errors)
		if len(o.Errnos) > 0 || len(g.errnos) > 0 {
			c.eq(what+" errnos", o.Errnos, g.errnos)
		}
		c.eq(what+" bytes", o.Bytes, g.bytes)
		c.eq(what+" total_ns", o.Total, g.totalNs)
		c.eq(what+" busy_ns", o.Busy, g.busyNs)
		// Latencies over the calls that succeeded.
		c.latency(what+" (succeeded)", refLatency{Count: uint64(len(g.okDurs)), Mean: o.Mean, P50: o.P50, P99: o.P99}, g.okDurs)
		c.rate(what+" ops_per_s", o.Ops, float64(g.count-g.errors), g.busyNs)
		c.rate(what+" failures_per_s", o.Fails, float64(g.errors), g.busyNs)
		if refDataOps[row.Call] {
			c.rate(what+" mb_per_s", o.MBps, float64(g.bytes)/1e6, g.busyNs)
		}
	}
	defer func() { t.Logf("compare: %d figures compared, %d differ", c.checked, c.n) }()
	v := cmp.Verdicts[0]
	c.eq("verdict io_ns", v.IONs, side.callNs)
	c.eq("verdict baseline_io_ns", v.BaseIONs, b.CallNs)
	// A replay's runtime is what it predicted, as each run's summary says; a run without a
	// prediction counts its span.
	runtime, low, high, predicted := refPredicted(t, runs)
	if !predicted {
		runtime, low, high = side.spanNs, side.spanNs, side.spanNs
	}
	c.eq("verdict runtime_ns (the runs' predictions, from their summaries)", v.RuntimeNs, runtime)
	c.eq("verdict baseline_runtime_ns", v.BaseRuntimeNs, baseFig.spanNs)
	ratio := func(a, b int64) float64 { return math.Round(float64(a)/float64(b)*1000) / 1000 }
	if v.Differing*100 <= v.Compared {
		c.eq("verdict runtime_ratio_low", v.RatioLow, ratio(low, baseFig.spanNs))
		c.eq("verdict runtime_ratio_high", v.RatioHigh, ratio(high, baseFig.spanNs))
	}
	if v.Differing*100 > v.Compared { // more than 1 %: no ratio
		c.eq("verdict io_ratio (not the same work)", v.IORatio, 0)
	} else {
		c.eq("verdict io_ratio", v.IORatio, ratio(side.callNs, b.CallNs))
		c.eq("verdict runtime_ratio", v.RuntimeRatio, ratio(runtime, baseFig.spanNs))
	}
}

// refPredicted adds up the runtimes the replay runs predicted, with their intervals, from
// the runs' JSON summaries (next to their traces); false when a run predicted nothing.
func refPredicted(t *testing.T, runs []string) (runtime, low, high int64, ok bool) {
	t.Helper()
	for _, r := range runs {
		var sum struct {
			Prediction *struct {
				Runtime int64 `json:"runtime_ns"`
				Low     int64 `json:"runtime_low_ns"`
				High    int64 `json:"runtime_high_ns"`
			} `json:"prediction"`
		}
		b, err := os.ReadFile(strings.TrimSuffix(r, ".iotap") + ".json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Prediction == nil {
			return 0, 0, 0, false
		}
		runtime, low, high = runtime+sum.Prediction.Runtime, low+sum.Prediction.Low, high+sum.Prediction.High
	}
	return runtime, low, high, len(runs) > 0
}

// refRecord records job (sh -c) in dir into out.
// refRecord records job in dir into out and checks the summary record printed.
func refRecord(t *testing.T, dir, out string, job ...string) {
	t.Helper()
	cmd := exec.Command(iotapBin, append([]string{"record", "-o", out, "--"}, job...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("iotap record: %v\n%s", err, stderr.String())
	}
	refCheckSummary(t, filepath.Base(out), stderr.String(), refExport(t, out))
}

// refParseDur reads a duration as the summary prints it (3 significant digits: "34.8µs",
// "1.90ms", "850ns", "0").
func refParseDur(s string) (float64, bool) {
	for _, u := range []struct {
		suffix string
		ns     float64
	}{{"ns", 1}, {"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f * u.ns, err == nil
		}
	}
	return 0, s == "0"
}

// refParseBytes reads a size as the summary prints it ("52.1MiB", "512B").
func refParseBytes(s string) (float64, bool) {
	for _, u := range []struct {
		suffix string
		b      float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f * u.b, err == nil
		}
	}
	return 0, false
}

// refCheckSummary checks the summary `iotap record` printed at the end against the
// trace's exported events: the requests, failures and bytes, and each op row's count, total
// time, bytes (three significant digits) and p50 and p99 (the middle of a log bucket
// eight to a power of two: within 7 %, or 1 µs).
func refCheckSummary(t *testing.T, name, summary string, evs []refEvent) {
	t.Helper()
	c := &refChecker{t: t, name: name + " summary"}
	type opFig struct {
		durs        []int64
		total, byts int64
	}
	ops := map[string]*opFig{}
	var failed uint64
	var readB, writtenB int64
	for i := range evs {
		e := &evs[i]
		o := ops[e.Op]
		if o == nil {
			o = &opFig{}
			ops[e.Op] = o
		}
		o.durs = append(o.durs, e.Dur)
		o.total += e.Dur
		if !e.ok() {
			failed++
			continue
		}
		if e.Ret > 0 && refDataOps[e.Op] { // the summary's bytes are data: read, written, copied
			o.byts += e.Ret
		}
		switch {
		case e.Op == "read" && e.Ret > 0:
			readB += e.Ret
		case (e.Op == "write" || e.Op == "copy_file_range") && e.Ret > 0:
			writtenB += e.Ret
		}
	}
	near := func(what string, got, want, rel, abs float64) {
		c.checked++
		if math.Abs(got-want) > want*rel+abs {
			c.errorf("%s = %.0f, recomputed %.0f", what, got, want)
		}
	}
	lines := strings.Split(summary, "\n")
	rows, found := 0, false
	for i, l := range lines {
		var n, nf uint64
		var rd, wr string
		if _, err := fmt.Sscanf(l, "  ops %d (%d failed), read %s written %s", &n, &nf, &rd, &wr); err != nil {
			continue
		}
		found = true
		c.eq("ops", n, len(evs))
		c.eq("failed", nf, failed)
		if v, ok := refParseBytes(strings.TrimSuffix(rd, ",")); ok {
			near("read bytes", v, float64(readB), 0.005, 0)
		} else {
			c.errorf("read %q", rd)
		}
		if v, ok := refParseBytes(wr); ok {
			near("written bytes", v, float64(writtenB), 0.005, 0)
		} else {
			c.errorf("written %q", wr)
		}
		for _, row := range lines[i+2:] {
			f := strings.Fields(row)
			if len(f) < 5 || f[0] == "..." {
				break
			}
			o := ops[f[0]]
			if o == nil {
				c.errorf("op %s in the summary, not in the export", f[0])
				continue
			}
			rows++
			c.eq(f[0]+" count", f[1], strconv.Itoa(len(o.durs)))
			sorted := slices.Sorted(slices.Values(o.durs))
			for j, want := range []float64{float64(o.total), float64(refNearestRank(sorted, 50)), float64(refNearestRank(sorted, 99))} {
				got, ok := refParseDur(f[2+j])
				if !ok {
					c.errorf("%s: duration %q", f[0], f[2+j])
					continue
				}
				if j == 0 {
					near(f[0]+" total", got, want, 0.005, 1)
				} else {
					near(f[0]+[]string{"", " p50", " p99"}[j], got, want, 0.07, 1000)
				}
			}
			if len(f) > 5 {
				got, _ := refParseBytes(f[5])
				near(f[0]+" bytes", got, float64(o.byts), 0.005, 0)
			} else if o.byts != 0 {
				c.errorf("%s: no bytes, recomputed %d", f[0], o.byts)
			}
		}
		break
	}
	if !found || rows == 0 {
		c.errorf("no summary with op rows in:\n%s", summary)
	}
	t.Logf("%s: %d figures compared, %d differ", c.name, c.checked, c.n)
}

// TestReferenceFigures records real jobs (a multi-threaded Python program; coreutils cp,
// which copies with copy_file_range; a shell job replayed twice with --repeat 2) and
// checks every figure report and compare print against this file's own recomputation
// from the exported events.
func TestReferenceFigures(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "python3", "cp", "cat", "sh")
	root := t.TempDir()
	mkdir := func(name string) string {
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	write := func(path string, n int) {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + i/4096)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("threads", func(t *testing.T) {
		dir := mkdir("threads")
		write(filepath.Join(dir, "shared.bin"), 1<<20)
		out := filepath.Join(root, "threads.iotap")
		// Four threads write their own file, read a shared one twice (the second time all
		// re-access) and a range of it again, fail to open a missing file, and read their
		// file back; the main thread lists the directory and removes a file.
		refRecord(t, dir, out, "python3", "-c", `import os, threading
def work(i):
    with open("out%d" % i, "wb") as f:
        for k in range(16):
            f.write(bytes([i]) * 65536)
    for rep in range(2):
        with open("shared.bin", "rb", buffering=0) as f:
            while f.read(131072):
                pass
    with open("shared.bin", "rb", buffering=0) as f:
        f.seek(65536 * i + 1000)
        f.read(100000)
    try:
        open("missing%d" % i)
    except FileNotFoundError:
        pass
    with open("out%d" % i, "rb", buffering=0) as f:
        f.read(1 << 20)
ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
os.listdir(".")
os.unlink("out0")`)
		f := refCheckReport(t, "threads", []string{out}, false)
		// The threads are python3's: one process, named as its program.
		var threads map[uint32]bool
		for _, p := range f.procs {
			if p.comms["python3"] {
				threads = map[uint32]bool{}
			}
		}
		if threads == nil {
			t.Errorf("no process named python3: %v", f.procs)
		}
		for _, e := range refExport(t, out) {
			if strings.HasPrefix(e.Path, "out") && e.Op == "write" && e.Comm == "python3" {
				threads[e.Tid] = true
			}
		}
		if len(threads) != 4 {
			t.Errorf("writes by %d python3 threads, want 4", len(threads))
		}
	})

	t.Run("copy_file_range", func(t *testing.T) {
		dir := mkdir("copy")
		write(filepath.Join(dir, "big"), 6<<20+12345)
		out := filepath.Join(root, "copy.iotap")
		refRecord(t, dir, out, "sh", "-c", "cp big big2 && cat big2 > /dev/null && cat big > /dev/null && cat big > /dev/null; cat nothere 2>/dev/null; true")
		f := refCheckReport(t, "copy", []string{out}, false)
		if g := f.ops["copy_file_range"]; g == nil || g.bytes != 6<<20+12345 {
			t.Fatalf("cp did not copy with copy_file_range: %+v", g)
		}
	})

	t.Run("replay --repeat 2", func(t *testing.T) {
		dir := mkdir("job")
		out := filepath.Join(root, "job.iotap")
		refRecord(t, dir, out, "sh", "-c", `i=0; while [ $i -lt 40 ]; do echo "data $i" > f$i; cat f$i > /dev/null; i=$((i+1)); done
cat f1 f2 f3 > all; rm f1 f2 f3; cat f1 2>/dev/null; ls > /dev/null; true`)
		refCheckReport(t, "recording", []string{out}, false)
		target := mkdir("replay-target")
		prefix := filepath.Join(root, "rep")
		refRun(t, root, "replay", out, "--target", target, "--repeat", "2", "-o", prefix, "--no-compare")
		runs := []string{prefix + ".t1.r1.iotap", prefix + ".t1.r2.iotap"}
		for i, r := range runs {
			refCheckReport(t, fmt.Sprintf("replay run %d", i+1), []string{r}, true)
		}
		refCheckReport(t, "replay runs merged", runs, true)
		refCheckCompare(t, out, runs, prefix+".t1.r*.iotap")
	})
}
