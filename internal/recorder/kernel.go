// What the recorder measures in the kernel (package legs): the FUSE legs outside the layer
// and the reads and writes kernel passthrough serves. The one file of the recorder that
// knows package legs, behind kernelView.

package recorder

import (
	"fmt"
	"io"

	"github.com/iotap/iotap/internal/legs"
	"github.com/iotap/iotap/trace"
)

// kernelView is the kernel's measurement of a recording: each request's legs and system
// call, which the trace writer fills in (WriterOptions.Legs), and, with kernel passthrough,
// every read and write of the files it serves, handed to the layer (dataSink).
type kernelView interface {
	// watch follows the FUSE mount at mountPoint, served by process pid; sink takes the
	// calls passthrough served (nil without data calls).
	watch(mountPoint string, pid int, sink dataSink) error
	// finish stops measuring and hands the last data calls to the sink, before the trace
	// writer closes; it returns what the kernel counted of them.
	finish() dataCounts
	// summary says what was measured of the legs, for the summary's "legs outside the
	// layer" line: taken once the writer has closed, before detach.
	summary() string
	// detach frees the measurement, after the trace writer has closed.
	detach()
}

// dataSink takes the reads and writes kernel passthrough served (fusefs.Server).
type dataSink interface {
	KernelCall(ev *trace.Event)
}

// dataCounts are the kernel's counts of the data calls it timed, and of the mapped files
// it followed (mapsWhy: why it did not, "" when it did).
type dataCounts struct {
	calls, async, unseen, lost uint64
	maps, faults, mapsFull     uint64
	mapsWhy                    string
}

// kernelPlan is what openKernel settled: the measurement (nil: none), why the legs are not
// the kernel's, whether reads and writes go through kernel passthrough and why not.
type kernelPlan struct {
	view    kernelView
	legsWhy string
	data    bool
	dataWhy string
}

// openKernel starts measuring in the kernel what --legs and --data ask for and the kernel
// allows, and names the sources in the header h: it sets wo.Legs, h.Legs, h.LegsNote,
// h.Data and h.DataNote. Only --legs kernel and --data kernel make a kernel that refuses an
// error. probe says whether the recording runs the round-trip probe (record does; mount
// does not).
func openKernel(p *plan, log logger, h *trace.Header, wo *trace.WriterOptions, probe bool) (kernelPlan, error) {
	var k kernelPlan
	switch {
	case p.Data == "layer":
		k.dataWhy = "--data layer"
	case p.Cache != "none":
		k.dataWhy = "--cache " + p.Cache + ": the kernel caches writes, which passthrough excludes"
	case p.Legs == "probe":
		k.dataWhy = "--legs probe: nothing is measured in the kernel"
	}
	wantData := k.dataWhy == ""
	var t *legs.Tracer
	var err error
	if p.Legs != "probe" {
		// In place, in the recorder's private mount namespace, only the job reaches the mount.
		jobOnly := probe && p.InPlace
		t, err = legs.Open(legs.Options{Origin: h.Origin, DataCalls: wantData, JobOnly: jobOnly})
		if err != nil && wantData {
			log.Debug("reads and writes are not timed in the kernel", "err", err)
			k.dataWhy, wantData = err.Error(), false
			t, err = legs.Open(legs.Options{Origin: h.Origin})
		}
	}
	if p.Data == "kernel" && !wantData {
		if t != nil {
			t.Detach()
		}
		return k, fmt.Errorf("--data kernel: %s", k.dataWhy)
	}
	h.Data, h.DataNote = trace.DataLayer, k.dataWhy
	if wantData {
		h.Data, k.data = trace.DataKernel, true
	}
	switch {
	case p.Legs == "probe":
		k.legsWhy = "--legs probe"
	case err != nil && p.Legs == "kernel":
		return k, fmt.Errorf("--legs kernel: %w", err)
	case err != nil:
		log.Debug("the kernel's legs are not measured", "err", err)
		k.legsWhy = err.Error()
	}
	if t == nil {
		if probe {
			h.Legs = trace.LegsProbe
		}
		h.LegsNote = k.legsWhy
		return k, nil
	}
	h.Legs = trace.LegsKernel
	wo.Legs = t
	k.view = tracerView{t}
	return k, nil
}

// logger is the part of *slog.Logger openKernel uses.
type logger interface {
	Debug(msg string, args ...any)
}

// tracerView is kernelView measured by a legs.Tracer.
type tracerView struct{ t *legs.Tracer }

func (v tracerView) watch(mountPoint string, pid int, sink dataSink) error {
	var s legs.DataSink
	if sink != nil {
		s = sink
	}
	return v.t.Watch(mountPoint, pid, s)
}

func (v tracerView) finish() dataCounts {
	_ = v.t.Close()
	st := v.t.Stats()
	return dataCounts{calls: st.Data, async: st.Async, unseen: st.Unseen, lost: st.LostData,
		maps: st.Maps, faults: st.Faults, mapsFull: st.MapsFull, mapsWhy: v.t.MapsUnfollowed()}
}

func (v tracerView) detach() { v.t.Detach() }

func (v tracerView) summary() string {
	st := v.t.Stats()
	return fmt.Sprintf("measured by the kernel for %d events (%d without, %d kernel records lost)", st.Filled, st.Missing, st.Lost)
}

// writeLegsSummary prints the summary's line on the legs: what the kernel measured
// (kernelView.summary), or why it measured nothing and what replays do instead (rt: the
// round trip the probe measured).
func writeLegsSummary(w io.Writer, measured, why string, rt trace.RoundTrip) {
	if measured != "" {
		_, _ = fmt.Fprintf(w, "  legs outside the layer: %s\n", measured)
		return
	}
	how := "replays estimate think times from the trace's path walks"
	if rt.Start > 0 {
		how = "replays take the round trip below out of think times"
	}
	_, _ = fmt.Fprintf(w, "  legs outside the layer: not measured by the kernel (%s); %s\n", why, how)
}

// writeDataSummary prints the summary's line on how reads and writes were recorded: p is
// nil when they went through the layer, for the reason why. mapsWhy says why the faults of
// mapped files were not followed ("": they were).
func writeDataSummary(w io.Writer, p *trace.PassthroughStats, why, mapsWhy string) {
	if p == nil {
		_, _ = fmt.Fprintf(w, "  reads and writes: through the layer (%s)\n", why)
		return
	}
	_, _ = fmt.Fprintf(w, "  reads and writes: kernel passthrough, %d timed by the kernel in the application's thread (%d asynchronous)",
		p.Calls+p.Async, p.Async)
	if p.Unseen > 0 || p.Lost > 0 {
		_, _ = fmt.Fprintf(w, "; %d asynchronous submissions not timed, %d lost", p.Unseen, p.Lost)
	}
	_, _ = fmt.Fprintf(w, "\n    files: %d opens passed through, %d through the layer", p.Opens, p.LayerOpens)
	if p.Refused != "" {
		_, _ = fmt.Fprintf(w, " (%s)", p.Refused)
	}
	_, _ = fmt.Fprintln(w)
	if mapsWhy != "" {
		_, _ = fmt.Fprintf(w, "    mapped files: not followed (%s)\n", mapsWhy)
		return
	}
	_, _ = fmt.Fprintf(w, "    mapped files: %d mmaps followed, %d page faults recorded", p.Maps, p.Faults)
	if p.MapsFull > 0 {
		_, _ = fmt.Fprintf(w, "; %d mmaps not followed (the kernel's table of mapped files was full)", p.MapsFull)
	}
	_, _ = fmt.Fprintln(w)
}
