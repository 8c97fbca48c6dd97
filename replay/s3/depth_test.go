package s3

import (
	"context"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// TestS3QueueDepth replays a thread that kept 8 reads in flight, 4 files each read at
// random offsets, onto every profile: the reads are issued concurrently (serialised per
// open file by the backend) and every one returns what was recorded.
func TestS3QueueDepth(t *testing.T) {
	const depth, n, dur = 8, 96, int64(2e6)
	b := tracetest.New(t)
	var fh [4]uint64
	for i := range fh {
		name := fmt.Sprintf("f%d", i)
		b.W.AddFile(trace.File{Path: b.Path(name), Type: trace.TypeFile, Mode: 0o644, Size: 1 << 20})
		fh[i] = b.Open(1, name, unix.O_RDONLY)
	}
	t0 := b.Clock[1] + 1000
	at := make([]int64, n)
	for k := range at {
		at[k] = t0 + int64(k)*1000
		if k >= depth {
			at[k] = at[k-depth] + dur + 500
		}
		f := k % len(fh)
		b.At(1, at[k]).Ev(1, trace.OpRead, fmt.Sprintf("f%d", f), dur, 0, func(e *trace.Event) {
			e.Handle, e.Offset, e.Size, e.Ret = fh[f], int64((k*37)%250)*4096, 4096, 4096
		})
	}
	b.At(1, at[n-1]+dur+1000)
	for i := range fh {
		b.Close(1, fmt.Sprintf("f%d", i), fh[i])
	}
	data := b.Bytes()
	srv := s3Server(t)
	ctx := context.Background()
	for _, p := range Profiles {
		t.Run(p, func(t *testing.T) {
			be := openS3(t, srv.URL, p, "depth-"+p)
			st, err := replay.DeriveState(tracetest.Reader(t, data), replay.PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := replay.PrepareTarget(ctx, be, st, false); err != nil {
				t.Fatal(err)
			}
			sum, err := replay.Run(ctx, tracetest.Reader(t, data), be, nil, replay.Options{Timing: replay.TimingAFAP})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Divergences != 0 || sum.ReplayedRead != sum.RecordedRead {
				t.Errorf("%d divergences (%v); read %d of %d bytes", sum.Divergences, sum.Examples, sum.ReplayedRead, sum.RecordedRead)
			}
			if sum.MaxQueueDepth != depth || sum.Overlapped != n-1 {
				t.Errorf("queue depth %d, %d overlapped ops; want %d, %d", sum.MaxQueueDepth, sum.Overlapped, depth, n-1)
			}
		})
	}
}
