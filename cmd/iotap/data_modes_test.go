package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/testenv"
)

// TestDataModesSameCalls records real programs twice, with kernel passthrough (--data
// kernel: reads and writes timed by the kernel in the application's thread) and through the
// layer (--data layer), from the same starting files, and checks with a computation of its
// own over `iotap export --view syscalls` that both recordings hold the same system calls:
// the count of each kind, their errors, the bytes each call kind moved, the bytes read and
// written per file, and how many bytes of the reads were first accesses. Only the times
// may differ, and with them the lookups and privilege probes that did not fold into their
// call because the call came later than the fold window (a loaded machine): those are
// found in each trace as TestSyscallsMatchStrace finds them (notFolded) and set apart.
func TestDataModesSameCalls(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "dd", "cp", "samtools", "sqlite3", "python3", "fio", "awk")
	workload, err := filepath.Abs(filepath.Join("..", "..", "scripts", "workload-genomics.sh"))
	if err != nil {
		t.Fatal(err)
	}
	jobs := []struct{ name, setup, script string }{
		{"dd", "", "dd if=/dev/zero of=a bs=4k count=2000 status=none && dd if=a of=/dev/null bs=4k status=none && " +
			"dd if=/dev/zero of=b bs=1M count=16 status=none && dd if=b of=/dev/null bs=1M status=none"},
		{"cp", "head -c 3000000 /dev/urandom > src", "cp src dst && cat dst > /dev/null && cp dst dst2"},
		{"samtools-sqlite", "", "WORKLOAD_READS=3000 sh " + workload + " >/dev/null"},
		{"python-threads", "head -c 1048576 /dev/urandom > shared.bin", `python3 -c '
import threading
def work(i):
    with open("out%d" % i, "wb") as f:
        for k in range(16):
            f.write(bytes([i]) * 65536)
    for rep in range(2):
        with open("shared.bin", "rb", buffering=0) as f:
            while f.read(131072):
                pass
ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]'`},
		{"fio-libaio", "head -c 4194304 /dev/urandom > f",
			"fio --name=qd --filename=f --rw=randread --bs=4k --size=4m --direct=1 --iodepth=16 --ioengine=libaio --randseed=7 --output=/dev/null"},
	}
	for _, job := range jobs {
		t.Run(job.name, func(t *testing.T) {
			got := map[string]dataModeCalls{}
			for _, mode := range []string{"kernel", "layer"} {
				dir := filepath.Join(t.TempDir(), "job")
				mustDo(t, os.Mkdir(dir, 0o755))
				if job.setup != "" {
					if out, err := exec.Command("sh", "-c", "cd "+dir+" && "+job.setup).CombinedOutput(); err != nil {
						t.Fatalf("setup: %v\n%s", err, out)
					}
				}
				tr := filepath.Join(filepath.Dir(dir), mode+".iotap")
				cmd := exec.Command(iotapBin, "record", "--data", mode, "-o", tr, "--", "sh", "-c", job.script)
				cmd.Dir = dir
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("record --data %s: %v\n%s", mode, err, stderr.String())
				}
				if want := map[string]string{"kernel": "kernel passthrough", "layer": "through the layer"}[mode]; !strings.Contains(stderr.String(), "reads and writes: "+want) {
					t.Fatalf("record --data %s: the summary does not say %q:\n%s", mode, want, stderr.String())
				}
				got[mode] = dataModeExport(t, tr)
			}
			k, l := got["kernel"], got["layer"]
			if k.passthrough == 0 || l.passthrough != 0 {
				t.Errorf("passed-through calls: %d with --data kernel (want some), %d with --data layer (want none)", k.passthrough, l.passthrough)
			}
			for _, d := range dataModeDiff(k, l) {
				t.Error(d)
			}
			t.Logf("%d calls of %d kinds, %d bytes read, %d written; %d passed through", k.total, len(k.count), k.read, k.written, k.passthrough)
		})
	}
}

// dataModeCalls is what the test compares of a recording's system calls.
type dataModeCalls struct {
	count       map[string]int   // calls by kind
	errors      map[string]int   // failed calls by kind
	bytes       map[string]int64 // bytes moved by kind
	perFile     map[string]int64 // bytes read ("r path") and written ("w path") per file
	firstRead   int64            // bytes of reads no read of the same file had returned before
	read        int64
	written     int64
	total       int
	passthrough int
}

// dataModeExport reads the syscalls view of trace tr and adds it up.
func dataModeExport(t *testing.T, tr string) dataModeCalls {
	t.Helper()
	out, err := exec.Command(iotapBin, "export", "--view", "syscalls", tr).Output()
	if err != nil {
		t.Fatalf("export %s: %v", tr, err)
	}
	c := dataModeCalls{count: map[string]int{}, errors: map[string]int{}, bytes: map[string]int64{}, perFile: map[string]int64{}}
	type call struct {
		Syscall     string `json:"syscall"`
		Path        string `json:"path"`
		Offset      *int64 `json:"file_offset"`
		Bytes       *int64 `json:"bytes"`
		Errno       int    `json:"errno"`
		StartNs     int64  `json:"start_ns"`
		Passthrough bool   `json:"passthrough"`
	}
	var calls []call
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r call
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("export %s: %v", tr, err)
		}
		calls = append(calls, r)
	}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].StartNs < calls[j].StartNs })
	// The lookups and probes that did not fold, for want of time: apart.
	folded, evs := foldTrace(t, tr)
	unfolded, _, _ := notFolded(folded, evs)
	for kind, n := range unfolded.n {
		c.count[kind] -= n
	}
	for kind, n := range unfolded.errs {
		c.errors[kind] -= n
	}
	readRanges := map[string][][2]int64{} // per file, the byte ranges read so far
	for _, r := range calls {
		c.total++
		c.count[r.Syscall]++
		if r.Passthrough {
			c.passthrough++
		}
		if r.Errno != 0 {
			c.errors[r.Syscall]++
			continue
		}
		if r.Bytes == nil {
			continue
		}
		n := *r.Bytes
		c.bytes[r.Syscall] += n
		switch r.Syscall {
		case "read":
			c.read += n
			c.perFile["r "+r.Path] += n
			if r.Offset != nil && n > 0 {
				c.firstRead += dataModeNew(readRanges, r.Path, *r.Offset, *r.Offset+n)
			}
		case "write":
			c.written += n
			c.perFile["w "+r.Path] += n
		}
	}
	return c
}

// dataModeNew adds [from, to) to the ranges read of path and returns how many of its bytes
// were not among them.
func dataModeNew(ranges map[string][][2]int64, path string, from, to int64) int64 {
	fresh := to - from
	for _, s := range ranges[path] {
		lo, hi := max(s[0], from), min(s[1], to)
		if hi > lo {
			fresh -= hi - lo
		}
	}
	ranges[path] = append(ranges[path], [2]int64{from, to})
	return max(fresh, 0)
}

// dataModeDiff lists how two recordings' calls differ.
func dataModeDiff(k, l dataModeCalls) []string {
	var d []string
	cmpMap := func(what string, a, b map[string]int64) {
		keys := slices.Sorted(maps.Keys(a))
		for _, key := range slices.Sorted(maps.Keys(b)) {
			if _, ok := a[key]; !ok {
				keys = append(keys, key)
			}
		}
		for _, key := range keys {
			if a[key] != b[key] {
				d = append(d, fmt.Sprintf("%s %s: %d with kernel passthrough, %d through the layer", what, key, a[key], b[key]))
			}
		}
	}
	toInt64 := func(m map[string]int) map[string]int64 {
		o := map[string]int64{}
		for k, v := range m {
			o[k] = int64(v)
		}
		return o
	}
	cmpMap("calls", toInt64(k.count), toInt64(l.count))
	cmpMap("errors", toInt64(k.errors), toInt64(l.errors))
	cmpMap("bytes", k.bytes, l.bytes)
	cmpMap("file bytes", k.perFile, l.perFile)
	if k.firstRead != l.firstRead {
		d = append(d, fmt.Sprintf("first-access bytes read: %d with kernel passthrough, %d through the layer", k.firstRead, l.firstRead))
	}
	return d
}
