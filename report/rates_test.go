package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
	"github.com/iotap/iotap/trace/tracetest"
)

// statsOf aggregates a trace made with tracetest, with the per-system-call view.
func statsOf(t testing.TB, name string, data []byte) *stats.Stats {
	t.Helper()
	r := tracetest.Reader(t, data)
	a := stats.NewAccumulator(name, r.Header(), stats.Options{Names: r})
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a.Add(ev)
	}
	f, _ := r.Footer()
	return a.Finish(r, f, r.Damage())
}

// ratesTrace: 4 creates of 0.5 s each back to back (2 s), 1 s idle, two 1 MB writes of
// 0.5 s each, then a read of 4 KiB and the same read again.
func ratesTrace(t testing.TB) []byte {
	b := tracetest.NewFUSE(t)
	b.At(1, 1e9)
	var fh [4]uint64
	for i := range fh {
		b.FH++
		fh[i] = b.FH
		h := fh[i]
		b.Ev(1, trace.OpCreate, fmt.Sprintf("f%d", i), 5e8, 0, func(e *trace.Event) {
			e.Handle, e.Flags, e.Mode = h, unix.O_RDWR|unix.O_CREAT, unix.S_IFREG|0o644
		})
	}
	b.At(1, 4e9)
	for i := range 2 {
		b.Ev(1, trace.OpWrite, "f0", 5e8, 0, func(e *trace.Event) {
			e.Handle, e.Offset, e.Size, e.Ret = fh[0], int64(i)*2e6, 1e6, 1e6
		})
	}
	for range 2 {
		b.Ev(1, trace.OpRead, "f0", 1e6, 0, func(e *trace.Event) { e.Handle, e.Size, e.Ret = fh[0], 4096, 4096 })
	}
	return b.Bytes()
}

// TestRates: each op's rate is over its own busy time (4 creates in 2 s: 2 files/s), the
// job's over its wall and I/O-active time; text and JSON carry them.
func TestRates(t *testing.T) {
	s := statsOf(t, "rates.iotap", ratesTrace(t))
	r, err := Build([]*stats.Stats{s}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := r.Total
	row := func(op string) *OpRow {
		for _, o := range v.Ops {
			if o.Op == op {
				return o
			}
		}
		t.Fatalf("no %s row", op)
		return nil
	}
	if c := row("create"); c.OpsPerS != 2 || c.BusyNs != 2e9 || c.MBps != 0 {
		t.Errorf("create: %v/s over %d ns, %v MB/s; want 2 files/s over 2 s", c.OpsPerS, c.BusyNs, c.MBps)
	}
	if w := row("write"); w.OpsPerS != 2 || w.MBps != 2 {
		t.Errorf("write: %v/s, %v MB/s; want 2/s, 2 MB/s", w.OpsPerS, w.MBps)
	}
	var open *CallRow
	for _, c := range v.Syscalls {
		if c.Call == "open" {
			open = c
		}
	}
	if open == nil || open.Count != 4 || open.OpsPerS != 2 {
		t.Fatalf("open calls: %+v", open)
	}
	// Wall: 1 s to 5.002 s; active: 2 s of creates, 1 s of writes, 2 ms of reads.
	j := v.Job
	if j.View != ViewSyscalls || j.WriteBytes != 2e6 || j.ReadBytes != 8192 || j.DataOps != 4 || j.MetaOps != 4 ||
		j.WallNs != 4002e6 || j.ActiveNs != 3002e6 {
		t.Fatalf("job %+v", j)
	}
	if j.Active.WriteMBps != 0.666 || j.Wall.WriteMBps != 0.5 || j.Active.MetaOps != 1.332 {
		t.Errorf("job rates: wall %+v, active %+v", j.Wall, j.Active)
	}
	var txt, js bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{" 2 files/s", "over its I/O-active time (at least one op in flight) 3.00s: 0.7 MB/s (read 0.0, write 0.7), 1.33 IOPS, 1.33 metadata calls/s"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Total struct {
			Ops []struct {
				Op          string  `json:"op"`
				OpsPerS     float64 `json:"ops_per_s"`
				MBps        float64 `json:"mb_per_s"`
				FirstAccess *struct {
					Count uint64 `json:"count"`
					Bytes uint64 `json:"bytes"`
					P50   int64  `json:"p50_ns"`
				} `json:"first_access"`
				Reaccess *struct {
					Count uint64 `json:"count"`
				} `json:"reaccess"`
			} `json:"ops"`
			Job struct {
				Active struct {
					IOPS float64 `json:"iops"`
				} `json:"active"`
			} `json:"job"`
		} `json:"total"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, o := range doc.Total.Ops {
		switch o.Op {
		case "write":
			if o.MBps != 2 || o.OpsPerS != 2 {
				t.Errorf("json write: %+v", o)
			}
		case "read":
			if o.FirstAccess == nil || o.FirstAccess.Count != 1 || o.FirstAccess.Bytes != 4096 || o.Reaccess == nil || o.Reaccess.Count != 1 ||
				o.FirstAccess.P50 < 1e6 || o.FirstAccess.P50 > 1002e3 {
				t.Errorf("json read split: first %+v, re %+v", o.FirstAccess, o.Reaccess)
			}
		}
	}
	if doc.Total.Job.Active.IOPS != 1.332 {
		t.Errorf("json job active IOPS %v", doc.Total.Job.Active.IOPS)
	}
}
