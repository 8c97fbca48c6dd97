// The kernel's measurement of the FUSE legs outside the layer (package legs): the one file
// of the recorder that knows it, behind kernelLegs.

package recorder

import (
	"fmt"
	"io"

	"github.com/iotap/iotap/internal/legs"
	"github.com/iotap/iotap/trace"
)

// kernelLegs measures, from the kernel's tracepoints, what each request and system call
// spends outside the layer; the trace writer fills the events with it (WriterOptions.Legs).
type kernelLegs interface {
	// watch follows the requests of the FUSE mount at mountPoint, served by process pid.
	watch(mountPoint string, pid int) error
	// summary says what was measured, for the summary's "legs outside the layer" line: taken
	// once the writer has closed, before detach.
	summary() string
	// detach stops measuring, after the trace writer has closed.
	detach()
}

// openLegs starts measuring the legs from the kernel when --legs asks for it and the kernel
// allows it, and names the source in the header h: it sets wo.Legs and returns the
// measurement, or nil and why the kernel does not measure them (for the summary). Only
// --legs kernel makes a kernel that refuses an error. probe says whether the recording
// runs the round-trip probe (record does; mount does not).
func openLegs(p *plan, log logger, h *trace.Header, wo *trace.WriterOptions, probe bool) (kernelLegs, string, error) {
	notMeasured := func(why string) (kernelLegs, string, error) {
		if probe {
			h.Legs = trace.LegsProbe
		}
		h.LegsNote = why
		return nil, why, nil
	}
	if p.Legs == "probe" {
		return notMeasured("--legs probe")
	}
	t, err := legs.Open(legs.Options{Origin: h.Origin})
	if err != nil {
		if p.Legs == "kernel" {
			return nil, "", fmt.Errorf("--legs kernel: %w", err)
		}
		log.Debug("the kernel's legs are not measured", "err", err)
		return notMeasured(err.Error())
	}
	h.Legs = trace.LegsKernel
	wo.Legs = t
	return tracerLegs{t}, "", nil
}

// logger is the part of *slog.Logger openLegs uses.
type logger interface {
	Debug(msg string, args ...any)
}

// tracerLegs is kernelLegs measured by a legs.Tracer.
type tracerLegs struct{ t *legs.Tracer }

func (l tracerLegs) watch(mountPoint string, pid int) error { return l.t.Watch(mountPoint, pid, nil) }
func (l tracerLegs) detach()                                { l.t.Detach() }
func (l tracerLegs) summary() string {
	st := l.t.Stats()
	return fmt.Sprintf("measured by the kernel for %d events (%d without, %d kernel records lost)", st.Filled, st.Missing, st.Lost)
}

// writeLegsSummary prints the summary's line on the legs: what the kernel measured
// (kernelLegs.summary), or why it measured nothing and what replays do instead (rt: the
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
