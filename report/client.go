package report

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// ProcUse is what a sampled process used while a trace was made (trace format version 3,
// samples chunks): the storage client serving the target (a FUSE daemon such as s3fs or
// mfsmount), or iotap itself, the recorder or the replayer.
type ProcUse struct {
	Name string `json:"name"`
	Pid  uint32 `json:"pid"`
	// Role is "client", "recorder" or "replayer" (on an s3:// target the replayer is the
	// S3 client).
	Role       string  `json:"role"`
	Samples    int     `json:"samples"`
	IntervalNs int64   `json:"interval_ns"` // median time between samples
	PeakRSS    uint64  `json:"peak_rss_bytes"`
	MeanRSS    uint64  `json:"mean_rss_bytes"`
	CPUUser    float64 `json:"cpu_user_s"` // CPU time used from the first sample to the last
	CPUSys     float64 `json:"cpu_sys_s"`
	// CPUPerGB is (cpu_user_s + cpu_sys_s) per 10^9 bytes the trace's reads and writes
	// moved (moved_bytes); 0 when they moved none.
	CPUPerGB   float64 `json:"cpu_s_per_gb"`
	MovedBytes uint64  `json:"moved_bytes"`
	// Storage bytes the process read and wrote (/proc/PID/io read_bytes, write_bytes),
	// and bytes through its read- and write-like calls, sockets included (rchar, wchar:
	// for a network client, its traffic), from the first sample to the last.
	ReadBytes  uint64     `json:"storage_read_bytes"`
	WriteBytes uint64     `json:"storage_write_bytes"`
	RChar      uint64     `json:"rchar_bytes"`
	WChar      uint64     `json:"wchar_bytes"`
	Exited     bool       `json:"exited,omitempty"` // sampling ended before the trace did: the process exited
	Series     []UsePoint `json:"series"`

	span int64 // the trace's first op start to last op end, ns: what its bytes moved over
}

// UsePoint is one sample of a ProcUse series.
type UsePoint struct {
	T       float64 `json:"t"` // seconds since the trace's wall_start
	RSS     uint64  `json:"rss_bytes"`
	CPUUser float64 `json:"cpu_user_s"` // since the first sample
	CPUSys  float64 `json:"cpu_sys_s"`
	CPUs    float64 `json:"cpus"` // CPUs busy from the previous point to this one: (Δuser + Δsys) / Δt
}

// maxUsePoints bounds a series in the report: longer ones keep every k-th sample (and the
// last), with peaks taken over all of them.
const maxUsePoints = 1000

// traceUse returns the client and iotap series of a trace (nil when it has none), and the
// further clients when several were sampled.
func traceUse(s *stats.Source) (client, self *ProcUse, others []*ProcUse) {
	for i := range s.Samples {
		ss := &s.Samples[i]
		u := procUse(ss, s)
		switch ss.Role {
		case trace.RoleSelf:
			if self == nil {
				self = u
			}
		case trace.RoleClient:
			if client == nil {
				client = u
			} else {
				others = append(others, u)
			}
		}
	}
	return client, self, others
}

func procUse(ss *trace.Samples, src *stats.Source) *ProcUse {
	pts := ss.Points
	if len(pts) == 0 {
		return nil
	}
	u := &ProcUse{Name: ss.Name, Pid: ss.Pid, Role: roleName(ss.Role, src.Header.Kind), Samples: len(pts), MovedBytes: src.Moved,
		span: max(src.LastNs-src.FirstNs, 0)}
	first, last := pts[0], pts[len(pts)-1]
	var rss float64
	gaps := make([]int64, 0, len(pts))
	for i, p := range pts {
		u.PeakRSS = max(u.PeakRSS, p.RSS)
		rss += float64(p.RSS)
		if i > 0 {
			gaps = append(gaps, p.T-pts[i-1].T)
		}
	}
	u.MeanRSS = uint64(rss / float64(len(pts)))
	if len(gaps) > 0 {
		sort.Slice(gaps, func(a, b int) bool { return gaps[a] < gaps[b] })
		u.IntervalNs = gaps[len(gaps)/2]
	}
	u.CPUUser = round6((last.User - first.User).Seconds())
	u.CPUSys = round6((last.Sys - first.Sys).Seconds())
	if src.Moved > 0 {
		u.CPUPerGB = round6((u.CPUUser + u.CPUSys) / (float64(src.Moved) / 1e9))
	}
	u.ReadBytes, u.WriteBytes = last.ReadBytes-first.ReadBytes, last.WriteBytes-first.WriteBytes
	u.RChar, u.WChar = last.RChar-first.RChar, last.WChar-first.WChar
	// A series that ends well before the trace's last event: the process exited.
	if src.LastNs > 0 && last.T+3*max(u.IntervalNs, int64(100*time.Millisecond)) < src.LastNs {
		u.Exited = true
	}
	step := (len(pts) + maxUsePoints - 1) / maxUsePoints
	prev := first
	for i := 0; i < len(pts); i += step {
		u.Series = append(u.Series, usePoint(first, prev, pts[i]))
		prev = pts[i]
		if i+step >= len(pts) && i != len(pts)-1 {
			u.Series = append(u.Series, usePoint(first, prev, last))
		}
	}
	return u
}

func usePoint(first, prev, p trace.Sample) UsePoint {
	pt := UsePoint{T: round6(float64(p.T) / 1e9), RSS: p.RSS,
		CPUUser: round6((p.User - first.User).Seconds()), CPUSys: round6((p.Sys - first.Sys).Seconds())}
	if dt := p.T - prev.T; dt > 0 {
		pt.CPUs = round3(float64((p.User-prev.User)+(p.Sys-prev.Sys)) / float64(dt))
	}
	return pt
}

// roleName names a series' role for a trace of the given kind.
func roleName(r trace.SampleRole, kind string) string {
	if r == trace.RoleClient {
		return "client"
	}
	if kind == "replay" {
		return "replayer"
	}
	return "recorder"
}

// usageLine says what a process used, in one line.
func (u *ProcUse) usageLine() string {
	who := "storage client " + u.Name
	if u.Role != "client" {
		who = "iotap " + u.Role
	}
	s := fmt.Sprintf("%s (pid %d): peak RSS %s, mean %s; CPU %.2fs user + %.2fs sys", who, u.Pid,
		format.Bytes(u.PeakRSS), format.Bytes(u.MeanRSS), u.CPUUser, u.CPUSys)
	if u.CPUPerGB > 0 {
		s += fmt.Sprintf(" = %.2f CPU-s per GB moved", u.CPUPerGB)
	}
	if u.RChar+u.WChar > 0 {
		s += fmt.Sprintf("; %s in, %s out through its calls", format.Bytes(u.RChar), format.Bytes(u.WChar))
	}
	if u.Exited {
		s += " (it exited before the trace ended)"
	}
	return s
}

// writeUsage prints, per trace with samples, what its storage client and iotap used.
func writeUsage(b *strings.Builder, r *Report) {
	any := false
	for _, tr := range r.Traces {
		for _, u := range tr.usages() {
			if !any {
				b.WriteString("Resources (sampled while the trace was made):\n")
				any = true
			}
			fmt.Fprintf(b, "  %s: %s\n", tr.File, u.usageLine())
		}
	}
	if any {
		b.WriteString("\n")
	}
}

// usages returns the trace's sampled processes: the clients, then iotap.
func (t *Trace) usages() []*ProcUse {
	var out []*ProcUse
	if t.Client != nil {
		out = append(out, t.Client)
	}
	out = append(out, t.OtherClients...)
	if t.Iotap != nil {
		out = append(out, t.Iotap)
	}
	return out
}

// SideUse sums what a comparison side's storage client and iotap used: the side's moved
// bytes and throughput beside peak memory and CPU per GB.
type SideUse struct {
	MovedBytes uint64  `json:"moved_bytes"`
	MBps       float64 `json:"mb_per_s"` // moved_bytes / 10^6 per second of its traces' durations (summed)
	// Client names the storage clients sampled ("" when none); the figures sum the
	// traces' clients (peaks: the largest).
	Client         string  `json:"client,omitempty"`
	ClientPeakRSS  uint64  `json:"client_peak_rss_bytes,omitempty"`
	ClientCPU      float64 `json:"client_cpu_s,omitempty"`
	ClientCPUPerGB float64 `json:"client_cpu_s_per_gb,omitempty"`
	IotapPeakRSS   uint64  `json:"iotap_peak_rss_bytes,omitempty"`
	IotapCPU       float64 `json:"iotap_cpu_s,omitempty"`
	IotapCPUPerGB  float64 `json:"iotap_cpu_s_per_gb,omitempty"`
	// Settings are the S3 client settings the side was replayed with (label
	// replay.s3_options), for a sweep.
	Settings string `json:"settings,omitempty"`
}

// sideUse sums a side's resources; nil when no trace of the side has samples and it moved
// nothing.
func sideUse(cs *CompareSide) *SideUse {
	u := &SideUse{}
	var names, settings []string
	sampled := false
	for _, t := range cs.Traces {
		for _, p := range t.usages() {
			sampled = true
			if p.Role == "client" {
				names = append(names, p.Name)
				u.ClientPeakRSS = max(u.ClientPeakRSS, p.PeakRSS)
				u.ClientCPU += p.CPUUser + p.CPUSys
			} else {
				u.IotapPeakRSS = max(u.IotapPeakRSS, p.PeakRSS)
				u.IotapCPU += p.CPUUser + p.CPUSys
			}
		}
		if v := t.Labels["replay.s3_options"]; v != "" {
			settings = append(settings, v)
		}
	}
	if !sampled {
		return nil
	}
	// Bytes and time per trace, summed: repeated runs of a side are apart in time.
	var moved uint64
	var span int64
	for _, t := range cs.Traces {
		if us := t.usages(); len(us) > 0 {
			moved += us[0].MovedBytes
			span += us[0].span
		}
	}
	u.MovedBytes = moved
	if span > 0 {
		u.MBps = round3(float64(moved) / 1e6 / (float64(span) / 1e9))
	}
	gb := float64(moved) / 1e9
	if gb > 0 {
		u.ClientCPUPerGB = round6(u.ClientCPU / gb)
		u.IotapCPUPerGB = round6(u.IotapCPU / gb)
	}
	u.ClientCPU, u.IotapCPU = round6(u.ClientCPU), round6(u.IotapCPU)
	u.Client = strings.Join(dedup(names), ",")
	u.Settings = strings.Join(dedup(settings), " | ")
	return u
}

// writeSideUse prints the sides' throughput (bytes, MB/s and op rates over wall and
// I/O-active time) beside, for sampled sides, their clients' and iotap's memory and CPU:
// for a sweep of client settings, the throughput-against-memory table.
func writeSideUse(b *strings.Builder, c *Comparison) {
	sampled, settings := false, false
	for i := range c.Sides {
		if u := c.Sides[i].Use; u != nil {
			sampled = true
			settings = settings || u.Settings != ""
		}
	}
	head := []string{"side"}
	if settings {
		head = append(head, "settings")
	}
	what := "calls"
	if c.View == ViewRequests {
		what = "requests"
	}
	head = append(head, "read", "written", "MB/s", "active MB/s", "IOPS", "active IOPS", "meta/s", "active meta/s")
	if sampled {
		head = append(head, "client", "client peak RSS", "client CPU-s/GB", "iotap peak RSS", "iotap CPU-s/GB")
	}
	t := newTable(head...)
	rows := 0
	for i := range c.Sides {
		s := &c.Sides[i]
		j, u := s.Job, s.Use
		if j == nil {
			continue
		}
		rows++
		cells := []string{s.Name}
		if settings {
			set := ""
			if u != nil {
				set = u.Settings
			}
			cells = append(cells, orDash(set))
		}
		cells = append(cells, format.Bytes(j.ReadBytes), format.Bytes(j.WriteBytes), fmt.Sprintf("%.1f", j.Wall.MBps), fmt.Sprintf("%.1f", j.Active.MBps),
			rateText(j.Wall.IOPS), rateText(j.Active.IOPS), rateText(j.Wall.MetaOps), rateText(j.Active.MetaOps))
		if sampled {
			client, crss, ccpu, irss, icpu := "-", "-", "-", "-", "-"
			if u != nil {
				if u.Client != "" {
					client, crss, ccpu = u.Client, format.Bytes(u.ClientPeakRSS), perGB(u.ClientCPUPerGB)
				}
				irss, icpu = format.Bytes(u.IotapPeakRSS), perGB(u.IotapCPUPerGB)
			}
			cells = append(cells, client, crss, ccpu, irss, icpu)
		}
		t.add(cells...)
	}
	if rows == 0 {
		return
	}
	fmt.Fprintf(b, "\nthroughput (over each side's wall time, and \"active\": over its I/O-active time, when at least one op was in flight; IOPS: reads and writes; meta/s: other %s; MB = 10^6 B", what)
	if sampled {
		b.WriteString("; peak resident memory and CPU seconds per GB moved")
	}
	b.WriteString(")\n")
	b.WriteString(t.String())
}

func perGB(v float64) string {
	if v == 0 || math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// usage adds the plots of resident memory and CPUs busy over time of the view's sampled
// processes, on the throughput plot's time axis (seconds since the view's start, to end).
func (s *figureSet) usage(v *View, end float64) {
	start := v.Intervals.Start
	if start.IsZero() {
		start = v.Start
	}
	var names []string
	var rss, cpu []plotter.XYs
	for _, ti := range v.Traces {
		if ti < 0 || ti >= len(s.traces) {
			continue
		}
		tr := &s.traces[ti]
		off := tr.WallStart.Sub(start).Seconds()
		for _, u := range tr.usages() {
			var r, c plotter.XYs
			for i, p := range u.Series {
				x := p.T + off
				if x < 0 || x > end {
					continue
				}
				r = append(r, plotter.XY{X: x, Y: float64(p.RSS)})
				if i > 0 { // a point's CPUs are those of the interval it ends: a step from the one before
					c = append(c, plotter.XY{X: max(u.Series[i-1].T+off, 0), Y: p.CPUs})
				}
			}
			if len(r) == 0 {
				continue
			}
			name := u.Name + " (" + u.Role + ")"
			if len(v.Traces) > 1 {
				name += " " + tr.File
			}
			names = append(names, name)
			rss, cpu = append(rss, r), append(cpu, c)
		}
	}
	if len(names) == 0 {
		return
	}
	p, err := seriesPlot("Resident memory over time: storage client and iotap", "RSS", names, rss)
	if err == nil {
		p.X.Min, p.X.Max = 0, end
		p.Y.Tick.Marker = bytesTicks{}
	}
	s.add(p, err, 16*vg.Centimeter, 8*vg.Centimeter)
	p, err = seriesPlot("CPU over time: CPUs busy (user + system)", "CPUs", names, cpu)
	if err == nil {
		p.X.Min, p.X.Max = 0, end
	}
	s.add(p, err, 16*vg.Centimeter, 8*vg.Centimeter)
}
