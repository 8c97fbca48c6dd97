package anonymize

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/iotap/iotap/trace"
)

// Result counts what Copy wrote.
type Result struct {
	Events    uint64 // events copied
	Paths     int    // path records named by the copy
	Processes int    // process records copied
	Files     int    // first-seen file records copied
	Unknown   uint64 // event paths with no record in the input (a damaged trace): written as unknown (0)
	UIDs      int    // distinct user ids, mapped to small numbers
	GIDs      int    // distinct group ids
}

// Copy reads every event of r and writes an anonymised copy of the trace to out: the
// header, the events in the order r gives them (with path ids renumbered, user and group
// ids mapped), the process, file and path records before the events that need them, the
// resource samples, and r's footer, or none when r has none (a trace cut short stays
// one). keyID names the key in the copy's header (KeyID).
//
// A damaged r is copied as far as it reads; the caller learns of the damage from r.Damage.
// The copy's footer counts the events it holds; its other figures are r's.
func Copy(ctx context.Context, r *trace.Reader, out io.Writer, a *Anonymizer, keyID string) (Result, error) {
	var res Result
	w, err := trace.NewWriter(out, a.Header(*r.Header(), keyID), trace.WriterOptions{Ordered: true})
	if err != nil {
		return res, fmt.Errorf("anonymize: %w", err)
	}
	c := &copier{r: r, w: w, a: a, ids: map[uint32]uint32{0: 0, trace.RootPath: trace.RootPath},
		last: make(map[uint32]trace.Process)}
	err = c.events(ctx, &res)
	if err == nil {
		c.finish(&res)
		err = a.Err()
	}
	if err != nil {
		w.CopyFooter(nil) // an incomplete copy must not look complete
		_ = w.Close()     // the error above is the one to report
		return res, err
	}
	if err := w.Close(); err != nil {
		return res, fmt.Errorf("anonymize: write: %w", err)
	}
	res.Paths = len(c.ids) - 2
	res.UIDs, res.GIDs = len(a.uids), len(a.gids)
	return res, nil
}

// copier holds Copy's state.
type copier struct {
	r     *trace.Reader
	w     *trace.Writer
	a     *Anonymizer
	ids   map[uint32]uint32        // input path id → output path id (0: unknown)
	last  map[uint32]trace.Process // by tid: the record last written
	procs int                      // r.Processes() written so far
}

// events copies the events, each after the side records that came before it in r.
func (c *copier) events(ctx context.Context, res *Result) error {
	for n := 0; ; n++ {
		if n&0xffff == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		ev, err := c.r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("anonymize: read: %w", err)
		}
		c.newProcesses(res)
		if p, ok := c.r.Process(ev.Tid); ok && !sameProcess(p, c.last[ev.Tid]) {
			c.process(p, res) // a later record replaced it (an exec)
		}
		out := *ev
		out.Path = c.id(ev.Path)
		out.Path2 = c.id(ev.Path2)
		if ev.Path != 0 && out.Path == 0 {
			res.Unknown++
		}
		out.Uid, out.Gid = c.a.UID(ev.Uid), c.a.GID(ev.Gid)
		c.w.Append(&out)
		res.Events++
	}
}

// newProcesses writes the process records r added since the last call.
func (c *copier) newProcesses(res *Result) {
	ps := c.r.Processes()
	for ; c.procs < len(ps); c.procs++ {
		c.process(ps[c.procs], res)
	}
}

// sameProcess reports whether two process records are the same.
func sameProcess(p, q trace.Process) bool {
	return p.Tid == q.Tid && p.Pid == q.Pid && p.PPid == q.PPid && p.FirstSeen == q.FirstSeen &&
		p.Comm == q.Comm && p.Exe == q.Exe && slices.Equal(p.Cmdline, q.Cmdline)
}

func (c *copier) process(p trace.Process, res *Result) {
	c.last[p.Tid] = p
	c.w.AddProcess(c.a.Process(p))
	res.Processes++
}

// finish writes what r holds after its last event: process records replaced since, the
// first-seen file records, the resource samples and the footer.
func (c *copier) finish(res *Result) {
	c.newProcesses(res)
	for _, p := range c.r.Processes() {
		if !sameProcess(p, c.last[p.Tid]) {
			c.process(p, res)
		}
	}
	for _, f := range c.r.Files() {
		if f.Path = c.id(f.Path); f.Path == 0 {
			continue
		}
		c.w.AddFile(f)
		res.Files++
	}
	for _, s := range c.r.Samples() {
		s.Name = c.a.Name(s.Name)
		c.w.AddSamples(s)
	}
	if f, ok := c.r.Footer(); ok {
		cf := *f
		cf.WriteError = WriteError(cf.WriteError)
		c.w.CopyFooter(&cf)
	} else {
		c.w.CopyFooter(nil)
	}
}

// id returns the output id of input path id, writing its record (and its parents') with
// anonymised names on first use; 0 for 0 and for an id the input has no record of.
func (c *copier) id(id uint32) uint32 {
	if out, ok := c.ids[id]; ok {
		return out
	}
	rec, ok := c.r.Path(id)
	var out uint32
	switch {
	case !ok:
	case rec.Parent == 0:
		if t := c.a.LinkTarget(rec.Name); t != "" {
			out = c.w.Raw(t)
		}
	default:
		if parent := c.id(rec.Parent); parent != 0 {
			out = c.w.Path(parent, c.a.Name(rec.Name))
		}
	}
	if ok {
		c.ids[id] = out // an unknown id may get its record later in a damaged trace
	}
	return out
}
