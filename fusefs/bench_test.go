package fusefs_test

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/trace"
)

// BenchmarkFUSE compares a native directory, the untraced loopback (same options and node
// code) and the traced layer writing a real trace, with the load in a child process:
//
//	go test ./fusefs -run '^$' -bench FUSE -benchtime 2000x
//
// The child's start-up (~1 ms) is inside the timing; use -benchtime of a few thousand ops.
func BenchmarkFUSE(b *testing.B) {
	fusetest.Require(b)
	native := b.TempDir()
	untraced := fusetest.Mount(b, nil, fusefs.Options{})
	w, err := trace.NewWriter(io.Discard, trace.Header{Kind: "record"}, trace.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	traced := fusetest.Mount(b, w, fusefs.Options{})
	dirs := []struct{ name, dir string }{{"native", native}, {"untraced", untraced.Mnt}, {"traced", traced.Mnt}}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d.dir, "rw"), make([]byte, rwFileSize), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, op string
		bs       int
	}{{"seqwrite1M", "write", 1 << 20}, {"seqread1M", "read", 1 << 20}, {"randread4k", "randread", 4096}} {
		for _, d := range dirs {
			b.Run(c.name+"/"+d.name, func(b *testing.B) {
				b.SetBytes(int64(c.bs))
				runWorkload(b, "rw", d.dir, "IOTAP_RW_OP="+c.op, "IOTAP_RW_BS="+strconv.Itoa(c.bs),
					"IOTAP_RW_COUNT="+strconv.Itoa(b.N))
			})
		}
	}
}
