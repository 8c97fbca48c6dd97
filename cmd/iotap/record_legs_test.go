package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/legs"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// legsJob reads a file in 4 KiB pieces with a pause between the reads, then writes
// another: a real program (python3) whose system calls and think times are known.
const legsJob = `
import os, time
fd = os.open("in", os.O_RDONLY)
for i in range(8):
    os.pread(fd, 4096, i * 4096)
    time.sleep(0.02)
os.close(fd)
fd = os.open("out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range(4):
    os.write(fd, b"x" * 4096)
os.close(fd)
`

// recordPythonWithLegs records the python3 program job, run in a directory holding a
// 64 KiB file "in", with the kernel's legs measured (skipping where they cannot be), and
// returns the test's directory, the trace and record's output.
func recordPythonWithLegs(t *testing.T, job string) (dir, tr string, out []byte) {
	t.Helper()
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "python3")
	if err := legs.Available(legs.Options{}); err != nil {
		testenv.Skip(t, testenv.FUSE, "the kernel's legs cannot be measured here: %v", err)
	}
	dir = t.TempDir()
	work := filepath.Join(dir, "work")
	mustDo(t, os.MkdirAll(work, 0o755))
	mustDo(t, os.WriteFile(filepath.Join(work, "in"), make([]byte, 64<<10), 0o644))
	tr = filepath.Join(dir, "rec.iotap")
	cmd := exec.Command(iotapBin, "record", "--legs", "kernel", "--target", work, "-o", tr, "--", "python3", "-c", job)
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	return dir, tr, out
}

// TestRecordMeasuresLegs records a job with the kernel's view of its requests and checks
// it against what the job did: every read and write is stamped with the system call that
// sent it (pread64, write) whose entry and return enclose the request's queue and
// completion times, which enclose the layer's backend call; the time between two reads
// (the job's 20 ms sleeps) is what the kernel measured between the calls; and a replay
// of the trace waits that time, not the recorded gaps.
func TestRecordMeasuresLegs(t *testing.T) {
	dir, tr, out := recordPythonWithLegs(t, legsJob)
	if !strings.Contains(string(out), "legs outside the layer: measured by the kernel") {
		t.Errorf("the record summary does not say the kernel measured the legs:\n%s", out)
	}
	r, err := trace.Open(tr)
	mustDo(t, err)
	if h := r.Header(); h.Legs != trace.LegsKernel {
		t.Fatalf("header legs %q (%s), want kernel", h.Legs, h.LegsNote)
	}
	var reads, writes []trace.Event
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		switch name := r.PathName(ev.Path); {
		case ev.Op == trace.OpRead && name == "in":
			reads = append(reads, *ev)
		case ev.Op == trace.OpWrite && name == "out":
			writes = append(writes, *ev)
		}
	}
	f, ok := r.Footer()
	_ = r.Close()
	if !ok {
		t.Fatal("no footer")
	}
	t.Logf("footer legs %+v", f.Legs)
	if f.Legs.Filled == 0 || f.Legs.Lost != 0 {
		t.Errorf("footer legs %+v: want events filled and no record lost", f.Legs)
	}
	if len(reads) != 8 || len(writes) != 4 {
		t.Fatalf("%d reads and %d writes, want 8 and 4", len(reads), len(writes))
	}
	check := func(what string, evs []trace.Event, nr uint16) {
		for i, ev := range evs {
			if !ev.HasLegs() || ev.CallStart == 0 || ev.CallEnd == 0 {
				t.Errorf("%s %d: legs not measured: %+v", what, i, ev)
				continue
			}
			if ev.CallNr != nr {
				t.Errorf("%s %d: system call %d, want %d", what, i, ev.CallNr, nr)
			}
			// Kernel and layer clocks agree within a few µs (trace.Now).
			const skew = 20_000
			inOrder := ev.CallStart <= ev.Queued && ev.Queued <= ev.Start+skew && ev.End() <= ev.Done+skew && ev.Done <= ev.CallEnd
			if !inOrder {
				t.Errorf("%s %d: times out of order: call %d..%d, kernel %d..%d, layer %d..%d",
					what, i, ev.CallStart, ev.CallEnd, ev.Queued, ev.Done, ev.Start, ev.End())
			}
		}
	}
	check("read", reads, unix.SYS_PREAD64)
	check("write", writes, unix.SYS_WRITE)
	for i := 1; i < len(reads); i++ {
		think := time.Duration(reads[i].CallStart - reads[i-1].CallEnd)
		if think < 20*time.Millisecond || think > 40*time.Millisecond {
			t.Errorf("think time before read %d: %v, want the job's 20 ms sleep", i, think)
		}
	}

	// report says what the application waited for its reads: the same sum, computed here
	// from the events.
	var wantWait int64
	for _, ev := range reads {
		wantWait += ev.CallEnd - ev.CallStart
	}
	code, stdout, stderr := runIotap(t, nil, "report", "--format", "json", tr)
	if code != 0 {
		t.Fatalf("report exit %d: %s", code, stderr)
	}
	var rep struct {
		Total struct {
			Syscalls []struct {
				Call   string `json:"call"`
				Waited *struct {
					Count   uint64 `json:"count"`
					TotalNs int64  `json:"total_ns"`
					Storage int64  `json:"storage_ns"`
				} `json:"waited"`
			} `json:"syscalls"`
		} `json:"total"`
	}
	mustDo(t, json.Unmarshal([]byte(stdout), &rep))
	found := false
	for _, c := range rep.Total.Syscalls {
		if c.Call != "read" {
			continue
		}
		found = true
		if c.Waited == nil || c.Waited.Count != uint64(len(reads)) || c.Waited.TotalNs != wantWait {
			t.Errorf("report: read calls waited %+v, want %d calls, %d ns", c.Waited, len(reads), wantWait)
		}
	}
	if !found {
		t.Errorf("report has no read calls:\n%s", stdout)
	}

	// info names the source and the legs.
	code, stdout, stderr = runIotap(t, nil, "info", tr)
	if code != 0 || !strings.Contains(stdout, "legs:") || !strings.Contains(stdout, "kernel tracepoints") {
		t.Errorf("info (exit %d) does not show the legs:\n%s%s", code, stdout, stderr)
	}

	// A replay waits the measured think times.
	target := filepath.Join(dir, "replay")
	mustDo(t, os.MkdirAll(target, 0o755))
	res := filepath.Join(dir, "rp")
	code, stdout, stderr = runIotap(t, nil, "replay", tr, "--target", target, "-o", res, "--sample-interval", "0", "--no-compare")
	if code != 0 {
		t.Fatalf("replay exit %d:\n%s%s", code, stdout, stderr)
	}
	var sum struct {
		ThinkMeasured uint64 `json:"think_measured"`
		ThinkWait     int64  `json:"think_wait_ns"`
	}
	data, err := os.ReadFile(res + ".t1.r1.json")
	mustDo(t, err)
	mustDo(t, json.Unmarshal(data, &sum))
	if sum.ThinkMeasured == 0 {
		t.Errorf("replay measured no think time:\n%s", stdout)
	}
	if w := time.Duration(sum.ThinkWait); w < 7*20*time.Millisecond {
		t.Errorf("replay waited %v of think time, want at least the job's 7 sleeps of 20 ms", w)
	}
}

// TestRecordLegsProbe: --legs probe records without the kernel's view and says so.
func TestRecordLegsProbe(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "sh", "cat")
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	mustDo(t, os.MkdirAll(work, 0o755))
	tr := filepath.Join(dir, "rec.iotap")
	cmd := exec.Command(iotapBin, "record", "--legs", "probe", "--target", work, "-o", tr, "--", "sh", "-c", "echo a > f; cat f >/dev/null")
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "legs outside the layer: not measured by the kernel (--legs probe)") {
		t.Errorf("the record summary does not say the legs were not measured:\n%s", out)
	}
	r, err := trace.Open(tr)
	mustDo(t, err)
	defer func() { _ = r.Close() }()
	if h := r.Header(); h.Legs != trace.LegsProbe {
		t.Errorf("header legs %q, want probe", h.Legs)
	}
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		if ev.HasLegs() || ev.CallStart != 0 {
			t.Fatalf("an event has the kernel's view with --legs probe: %+v", ev)
		}
	}
}

// wakeJob's main thread starts a thread that reads a file, waits for it (join), then
// writes another file: the kernel sees the reader thread wake the main thread. The reader
// starts its work after the main thread is asleep in join (on a loaded machine it could
// otherwise finish before join, which then returns without a wake-up).
const wakeJob = `
import os, threading, time
def reader():
    main = threading.main_thread().native_id
    for _ in range(2000):
        with open("/proc/self/task/%d/stat" % main) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "S":
                break
        time.sleep(0.001)
    time.sleep(0.01)
    fd = os.open("in", os.O_RDONLY)
    for i in range(16):
        os.pread(fd, 4096, i * 4096)
    os.close(fd)
    with open("tid", "w") as f:
        f.write(str(threading.get_native_id()))
os.stat("in")
t = threading.Thread(target=reader)
t.start()
t.join()
fd = os.open("out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"done")
os.close(fd)
`

// TestRecordWakeUps records a job whose main thread waits for another thread and checks
// that the main thread's first call after the wait names that thread as its waker, and
// when it was woken: between the reader's last call and the main thread's call.
func TestRecordWakeUps(t *testing.T) {
	dir, tr, _ := recordPythonWithLegs(t, wakeJob)
	tidText, err := os.ReadFile(filepath.Join(dir, "work", "tid"))
	mustDo(t, err)
	var readerTid uint32
	_, err = fmt.Sscan(string(tidText), &readerTid)
	mustDo(t, err)
	r, err := trace.Open(tr)
	mustDo(t, err)
	defer func() { _ = r.Close() }()
	var readerLast int64
	var create *trace.Event
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		if ev.Tid == readerTid && ev.CallEnd > readerLast {
			readerLast = ev.CallEnd
		}
		if ev.Op == trace.OpCreate && r.PathName(ev.Path) == "out" {
			e := *ev
			create = &e
		}
	}
	if create == nil {
		t.Fatal("no create of out in the trace")
	}
	t.Logf("reader %d last call returned at %d; create of out: woken at %d by %d, call at %d",
		readerTid, readerLast, create.WokenAt, create.Waker, create.CallStart)
	if create.Waker != readerTid {
		t.Errorf("create of out: waker %d, want the reader thread %d", create.Waker, readerTid)
	}
	if between := readerLast <= create.WokenAt && create.WokenAt <= create.CallStart; !between {
		t.Errorf("woken at %d, not between the reader's last call (%d) and the create (%d)", create.WokenAt, readerLast, create.CallStart)
	}
}
