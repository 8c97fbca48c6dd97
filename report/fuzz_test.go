package report

import (
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// FuzzRender feeds arbitrary events through stats and every renderer: nothing may panic,
// whatever the values (negative or huge durations, offsets, unknown ops, ids).
func FuzzRender(f *testing.F) {
	f.Add([]byte{14, 1, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3})
	f.Add(make([]byte, 200))
	f.Fuzz(fuzzOne)
}

func fuzzOne(t *testing.T, data []byte) {
	{
		const size = 1 + 8*4 + 4 + 2 + 4
		names := &stats.Names{Paths: map[uint32]string{trace.RootPath: "", 2: "a", 3: "a/b", 4: "c", 5: "/abs"}}
		a := stats.NewAccumulator("fuzz", &trace.Header{WallStart: time.Unix(1e9, 0)}, stats.Options{Names: names})
		for len(data) >= size {
			u64 := func(i int) int64 { return int64(binary.LittleEndian.Uint64(data[i:])) }
			ev := trace.Event{
				Op:     trace.Op(data[0] % (trace.NumOps + 2)),
				Start:  u64(1) % (1 << 40),
				Dur:    u64(9),
				Offset: u64(17),
				Ret:    u64(25) % (1 << 30),
				Path:   binary.LittleEndian.Uint32(data[33:]) % 8,
				Path2:  uint32(data[36] % 8),
				Flags:  uint32(data[35]),
				Errno:  binary.LittleEndian.Uint16(data[37:]),
				Handle: uint64(data[39] % 4),
				Size:   binary.LittleEndian.Uint32(data[39:]),
				Pid:    uint32(data[40] % 3),
				Tid:    uint32(data[41] % 4),
			}
			a.Add(&ev)
			data = data[size:]
		}
		s := a.Finish(names, nil, nil)
		r, err := Build([]*stats.Stats{s}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, fn := range []func(io.Writer, *Report) error{WriteText, WriteJSON, WriteHTML} {
			if err := fn(io.Discard, r); err != nil {
				t.Fatal(err)
			}
		}
		if err := WriteCSV(io.Discard, r, "intervals"); err != nil {
			t.Fatal(err)
		}
		c := Compare([]string{"a", "b"}, []*stats.Stats{s, s}, 0.05)
		if err := WriteCompareHTML(io.Discard, c); err != nil {
			t.Fatal(err)
		}
		if !CompareCalls(c, []*stats.Stats{s, s}) {
			t.Fatal("no per-system-call view")
		}
		if err := WriteCompareText(io.Discard, c); err != nil {
			t.Fatal(err)
		}
		if err := WriteCompareHTML(io.Discard, c); err != nil {
			t.Fatal(err)
		}
	}
}
