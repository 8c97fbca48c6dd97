package export

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracecraft"
	"github.com/iotap/iotap/trace/tracetest"
)

// execTrace returns a trace in which thread 7 makes two lookups as "sh", then, once its
// record says it exec'd cat (a second process record, read after those events), reads a
// file: the chunks of two traces built alike but for the record, joined in that order.
func execTrace(t *testing.T) string {
	t.Helper()
	build := func(comm, exe string, events func(b *tracetest.Builder)) []tracecraft.Chunk {
		b := tracetest.New(t)
		b.Path("a")
		b.Path("data")
		b.AddProcess(trace.Process{Tid: 7, Pid: 7, PPid: 1, Comm: comm, Exe: exe})
		events(b)
		if err := b.W.Close(); err != nil {
			t.Fatal(err)
		}
		_, chunks, err := tracecraft.Split(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return chunks
	}
	sh := build("sh", "/bin/sh", func(b *tracetest.Builder) {
		b.Lookup(7, "a", 0, 0o100644, 10)
		b.Lookup(7, "data", 0, 0o100644, 4096)
	})
	cat := build("cat", "/bin/cat", func(b *tracetest.Builder) {
		b.At(7, 2e9)
		fh := b.Open(7, "data", 0)
		b.RW(7, trace.OpRead, "data", fh, 0, 4096, 4096)
		b.Close(7, "data", fh)
	})
	var out []tracecraft.Chunk
	for _, c := range sh {
		if c.Type != trace.ChunkFooter {
			out = append(out, c)
		}
	}
	for _, c := range cat {
		if c.Type == trace.ChunkProcesses || c.Type == trace.ChunkEvents || c.Type == trace.ChunkFooter {
			out = append(out, c)
		}
	}
	path := filepath.Join(t.TempDir(), "exec.iotap")
	if err := os.WriteFile(path, tracecraft.Join(trace.Version5, out), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExportNamesExec: a thread's events are named by its process record as read so far,
// so a program that exec'd another has its next requests and calls named after the new
// one, in JSON lines and in Parquet.
func TestExportNamesExec(t *testing.T) {
	path := execTrace(t)
	for _, view := range []string{ViewRequests, ViewSyscalls} {
		r, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if _, err := Write(context.Background(), r, &out, Options{Format: "jsonl", View: view}); err != nil {
			t.Fatal(err)
		}
		_ = r.Close()               // read-only
		seen := map[string]string{} // op: comm
		for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
			var rec struct{ Op, Comm, Exe string }
			if err := json.Unmarshal(line, &rec); err != nil {
				t.Fatal(err)
			}
			if _, ok := seen[rec.Op]; !ok {
				seen[rec.Op] = rec.Comm + " " + rec.Exe // the first lookup is sh's
			}
		}
		// A call is named when it is folded, a window of requests after its own: only
		// the requests view names the lookups before the record sh's.
		if view == ViewRequests && seen["lookup"] != "sh /bin/sh" || seen["read"] != "cat /bin/cat" {
			t.Errorf("%s: %v, want the first lookup sh's, the read cat's", view, seen)
		}
		rows, file := viewRows(t, path, view)
		checkParquet(t, file, Columns(view), rows)
	}
}
