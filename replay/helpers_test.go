package replay

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// target returns an empty directory and its backend.
func target(t testing.TB, base string) (string, *Dir) {
	dir := t.TempDir()
	if base != "" {
		d, err := os.MkdirTemp(base, "iotap-replay-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(d) })
		dir = d
	}
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return root, d
}

// replayOnto derives the starting state, prepares it on b, and replays.
func replayOnto(t testing.TB, data []byte, b Backend, sink Sink, o Options) *Summary {
	t.Helper()
	return replaySource(t, func() Source { return tracetest.Reader(t, data) }, b, sink, o)
}

// replaySource is replayOnto for a trace that open returns (twice: to derive the
// starting state, and to replay).
func replaySource(t testing.TB, open func() Source, b Backend, sink Sink, o Options) *Summary {
	t.Helper()
	st, err := DeriveState(open(), o.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if err := Prepare(context.Background(), b, st, o.FillRandom); err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), open(), b, sink, o)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// version1 reads a trace as a format-version-1 file of the same events reads: the
// header says version 1 and no event has an Offset2 (copy_file_range's output offset).
type version1 struct {
	*trace.Reader
	h trace.Header
}

func asVersion1(r *trace.Reader) *version1 {
	v := &version1{Reader: r, h: *r.Header()}
	v.h.Version = trace.Version1
	return v
}

func (v *version1) Header() *trace.Header { return &v.h }

func (v *version1) Next() (*trace.Event, error) {
	e, err := v.Reader.Next()
	if e != nil {
		e.Offset2 = 0
	}
	return e, err
}
