package procsample

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/trace"
)

// TestParseStat reads a stat line whose command name holds spaces and parentheses.
func TestParseStat(t *testing.T) {
	line := "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 2183 0 0 0 250 130 0 0 20 0 9 0 1234 123456789 3000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	var s trace.Sample
	if err := parseStat([]byte(line), &s); err != nil {
		t.Fatal(err)
	}
	if s.User != 2500*time.Millisecond || s.Sys != 1300*time.Millisecond || s.RSS != 3000*pageSize {
		t.Errorf("got user %v sys %v rss %d", s.User, s.Sys, s.RSS)
	}
	if err := parseStat([]byte("4242 (x) S 1 2"), &s); err == nil {
		t.Error("a short line parsed")
	}
}

// TestReadSelf reads this process's counters: resident memory, and CPU time that grows
// while it computes as getrusage says it does (within two of /proc's 10 ms ticks).
func TestReadSelf(t *testing.T) {
	ru0 := rusage(t)
	a, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if a.RSS < 1<<20 {
		t.Errorf("RSS %d bytes", a.RSS)
	}
	spinCPU(t, 200*time.Millisecond)
	b, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ru := rusage(t) - ru0
	if cpu := (b.User + b.Sys) - (a.User + a.Sys); cpu < ru-30*time.Millisecond || cpu > ru+30*time.Millisecond {
		t.Errorf("CPU grew by %v in /proc, by %v in getrusage", cpu, ru)
	}
	if _, err := Read(1 << 30); !errors.Is(err, ErrGone) {
		t.Errorf("a pid that does not exist: %v", err)
	}
}

// rusage returns the CPU time (user and system) of this process.
func rusage(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// spinCPU computes until this process has used d more CPU time, whatever the load.
func spinCPU(t *testing.T, d time.Duration) {
	t.Helper()
	end := rusage(t) + d
	x := 0
	for rusage(t) < end {
		for i := range 10000 {
			x += i
		}
	}
	_ = x
}

// TestSamplerWritesSeries samples this process and a child that exits halfway through
// into a real trace, and reads the series back: the child's series ends when it exits,
// this process's covers the whole run at the interval asked for.
func TestSamplerWritesSeries(t *testing.T) {
	child := exec.Command("sleep", "0.3")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Header{Kind: "record"}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s := Start(w, w.Origin(), 20*time.Millisecond, []Process{
		{Role: trace.RoleClient, Pid: child.Process.Pid},
		{Role: trace.RoleSelf, Pid: os.Getpid()},
	}, nil)
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	ru0 := rusage(t)
	spinCPU(t, 300*time.Millisecond)
	for time.Since(start) < 1200*time.Millisecond {
		spinCPU(t, 10*time.Millisecond)
	}
	ru := rusage(t) - ru0
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sum := s.Stop()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !sum[0].Gone || sum[0].Name != "sleep" || sum[1].Gone {
		t.Errorf("summaries %+v", sum)
	}
	if cpu := sum[1].User + sum[1].Sys; cpu < ru-30*time.Millisecond || sum[1].PeakRSS < sum[1].MeanRSS || sum[1].MeanRSS == 0 {
		t.Errorf("self: %+v", sum[1])
	}
	r, err := trace.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := r.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	ss := r.Samples()
	if len(ss) != 2 || ss[0].Role != trace.RoleClient || ss[1].Role != trace.RoleSelf || ss[0].Name != "sleep" {
		t.Fatalf("series %+v", ss)
	}
	if len(ss[0].Points) != sum[0].Samples || len(ss[1].Points) != sum[1].Samples {
		t.Errorf("%d and %d points in the trace, %d and %d sampled", len(ss[0].Points), len(ss[1].Points), sum[0].Samples, sum[1].Samples)
	}
	self := ss[1].Points
	// 1.2 s at 20 ms: 60 samples if the machine keeps up; at least a third of them on a
	// loaded one.
	if len(self) < 20 || len(ss[0].Points) >= len(self) {
		t.Errorf("%d samples of the child, %d of this process", len(ss[0].Points), len(self))
	}
	if last := self[len(self)-1]; last.T < int64(time.Second) || last.User+last.Sys <= self[0].User+self[0].Sys {
		t.Errorf("self series from %+v to %+v", self[0], last)
	}
}

// TestFindClient finds the process serving a FUSE mount (this test process serves its
// own), and none for a local directory.
func TestFindClient(t *testing.T) {
	c := fusetest.Mount(t, nil, fusefs.Options{})
	got, err := FindClient(c.Mnt)
	if err != nil {
		t.Fatal(err)
	}
	if got.Pid != os.Getpid() || got.FSType != "fuse.iotap" || got.Mount != c.Mnt || got.Name == "" {
		t.Errorf("client %+v, want pid %d on fuse.iotap at %s", got, os.Getpid(), c.Mnt)
	}
	if _, err := FindClient(c.Orig); !errors.Is(err, ErrNoClient) {
		t.Errorf("local directory: %v", err)
	}
}

// BenchmarkReadSelf measures one reading of a process (its stat and io files), what a
// Sampler costs per process and interval.
func BenchmarkReadSelf(b *testing.B) {
	r, err := newReader(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	defer r.close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.read(); err != nil {
			b.Fatal(err)
		}
	}
}
