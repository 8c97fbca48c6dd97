package trace_test

import (
	"bytes"
	"fmt"
	"io"

	"github.com/iotap/iotap/trace"
)

// A producer interns paths, appends events and closes the writer; a consumer streams
// the events back and resolves their paths.
func Example() {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Header{Kind: "record"}, trace.WriterOptions{})
	if err != nil {
		panic(err)
	}
	dir := w.Path(trace.RootPath, "data")
	file := w.Path(dir, "in.bam")
	w.AddProcess(trace.Process{Tid: 42, Pid: 42, Comm: "samtools"})
	for i := range 3 {
		start := trace.Now() - w.Origin()
		// ... the operation runs ...
		w.Append(&trace.Event{Op: trace.OpRead, Start: start, Dur: trace.Now() - w.Origin() - start,
			Path: file, Handle: 1, Offset: int64(i) << 20, Size: 1 << 20, Ret: 1 << 20, Tid: 42, Pid: 42})
	}
	if err := w.Close(); err != nil {
		panic(err)
	}

	r, err := trace.NewReader(&buf)
	if err != nil {
		panic(err)
	}
	defer func() { _ = r.Close() }()
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		p, _ := r.Process(ev.Tid)
		fmt.Println(ev.Op, r.PathName(ev.Path), ev.Offset, ev.Ret, p.Comm)
	}
	f, _ := r.Footer()
	fmt.Println("events:", f.Events, "damage:", len(r.Damage()))
	// Output:
	// read data/in.bam 0 1048576 samtools
	// read data/in.bam 1048576 1048576 samtools
	// read data/in.bam 2097152 1048576 samtools
	// events: 3 damage: 0
}
