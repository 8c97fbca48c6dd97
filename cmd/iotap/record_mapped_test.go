package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/testenv"
)

// mapFault is trace.MapFault: bit 31 of a read's or write's flags.
const mapFault = 1 << 31

// TestRecordMappedFile records python3 going through two files of the target by mmap,
// with `iotap record --data kernel`: "m" mapped privately and read one byte a page over
// [100000, 700000) and at its last byte, "w" mapped shared, read and stored to at two
// offsets, both descriptors closed before the maps are used. From `iotap export` this test
// finds the trace naming both files with the pages the faults brought in, covering every
// byte the job touched, and the stores as writes of the pages they made dirty; the record
// summary, `iotap info` and `iotap report` count the faults the export holds; and a replay
// reads and writes those bytes again without a divergence.
func TestRecordMappedFile(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "python3")
	dir := filepath.Join(t.TempDir(), "job")
	mustDo(t, os.Mkdir(dir, 0o755))
	const mSize, wSize = 1<<20 + 1000, 64 << 10
	m := make([]byte, mSize)
	_, _ = rand.Read(m)
	mustDo(t, os.WriteFile(filepath.Join(dir, "m"), m, 0o644))
	mustDo(t, os.WriteFile(filepath.Join(dir, "w"), make([]byte, wSize), 0o644))
	for _, name := range []string{"m", "w"} { // clean pages: a store makes a page dirty once
		f, err := os.Open(filepath.Join(dir, name))
		mustDo(t, err)
		mustDo(t, f.Sync())
		mustDo(t, f.Close())
	}
	script := `
import mmap, os
fd = os.open("m", os.O_RDONLY)
m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
os.close(fd)
s = sum(m[off] for off in range(100000, 700000, 4096)) + m[len(m) - 1]
m.close()
fd = os.open("w", os.O_RDWR)
w = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
os.close(fd)
s += w[0]
w[5000] = 0x5a
w[40000] = 0x5a
w.flush()
w.close()
`
	tr := filepath.Join(filepath.Dir(dir), "t.iotap")
	cmd := exec.Command(iotapBin, "record", "--data", "kernel", "-o", tr, "--", "python3", "-c", script)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("record: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "mapped files: not followed") {
		testenv.Skip(t, testenv.FUSE, "mapped files are not followed here:\n%s", stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "w")); err != nil || b[5000] != 0x5a || b[40000] != 0x5a {
		t.Fatalf("the stores through the shared map did not reach the file (%v)", err)
	}
	summary := regexp.MustCompile(`mapped files: (\d+) mmaps followed, (\d+) page faults recorded`).FindStringSubmatch(stderr.String())
	if summary == nil {
		t.Fatalf("the summary does not count the mapped files:\n%s", stderr.String())
	}

	// The faults, from the requests the export lists.
	out, err := exec.Command(iotapBin, "export", "--view", "requests", tr).Output()
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	type request struct {
		Op          string `json:"op"`
		Path        string `json:"path"`
		Offset      int64  `json:"file_offset"`
		Size        int64  `json:"size"`
		Bytes       int64  `json:"bytes"`
		Dur         int64  `json:"dur_ns"`
		Flags       int64  `json:"flags"`
		CallStart   *int64 `json:"call_start_ns"`
		Passthrough bool   `json:"passthrough"`
	}
	covered := map[string][][2]int64{} // "read m" → byte ranges
	var faults, calls int
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r request
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Op != "read" && r.Op != "write" {
			continue
		}
		if r.Flags&mapFault == 0 {
			calls++
			continue
		}
		faults++
		if !r.Passthrough || r.Dur != 0 || r.CallStart != nil || r.Offset%4096 != 0 || r.Bytes <= 0 || r.Bytes > r.Size {
			t.Errorf("fault %+v", r)
		}
		key := r.Op + " " + r.Path
		covered[key] = append(covered[key], [2]int64{r.Offset, r.Offset + r.Bytes})
	}
	if calls != 0 {
		t.Errorf("%d read or write system calls: the job made none", calls)
	}
	for _, c := range []struct {
		what     string
		from, to int64
	}{
		{"read m", 100000, 700000}, {"read m", mSize - 1, mSize}, {"read w", 0, 1},
		{"write w", 5000, 5001}, {"write w", 40000, 40001},
	} {
		if !rangesCover(covered[c.what], c.from, c.to) {
			t.Errorf("%s: bytes %d..%d touched, the faults cover %v", c.what, c.from, c.to, covered[c.what])
		}
	}
	for key, rs := range covered {
		size := map[string]int64{"m": mSize, "w": wSize}[key[strings.IndexByte(key, ' ')+1:]]
		for _, r := range rs {
			if r[1] > size {
				t.Errorf("%s: bytes %d..%d beyond the file's %d", key, r[0], r[1], size)
			}
		}
	}
	if want := fmt.Sprint(faults); summary[1] != "2" || summary[2] != want {
		t.Errorf("the summary counts %s mmaps and %s faults; the export holds %s faults of 2 mmaps", summary[1], summary[2], want)
	}

	// info and report count the same faults.
	info, err := exec.Command(iotapBin, "info", tr).Output()
	if err != nil {
		t.Fatalf("info: %v", err)
	}
	if want := fmt.Sprintf("%d page faults of mapped files", faults); !strings.Contains(string(info), want) {
		t.Errorf("info does not say %q:\n%s", want, info)
	}
	report, err := exec.Command(iotapBin, "report", tr).Output()
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	if want := fmt.Sprintf("%d reads and writes are pages of mapped files", faults); !strings.Contains(string(report), want) {
		t.Errorf("report does not say %q:\n%s", want, report)
	}

	// A replay reads and writes the faulted bytes again, each fault a pread or pwrite.
	var read, written int64
	for key, rs := range covered {
		for _, r := range rs {
			if strings.HasPrefix(key, "read") {
				read += r[1] - r[0]
			} else {
				written += r[1] - r[0]
			}
		}
	}
	target := filepath.Join(t.TempDir(), "replay")
	mustDo(t, os.Mkdir(target, 0o755))
	rp, err := exec.Command(iotapBin, "replay", tr, "--target", target, "--scratch", "--timing", "afap",
		"-o", filepath.Join(t.TempDir(), "r")).CombinedOutput()
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, rp)
	}
	want := fmt.Sprintf("read %d of %d, written %d of %d", read, read, written, written)
	if !strings.Contains(string(rp), want) || !strings.Contains(string(rp), "divergences 0") {
		t.Errorf("replay does not say %q and no divergence:\n%s", want, rp)
	}
	t.Logf("%d faults; %v", faults, covered)
}

// rangesCover reports whether the ranges rs together hold [from, to).
func rangesCover(rs [][2]int64, from, to int64) bool {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	at := from // covered up to here
	for _, r := range rs {
		if r[0] > at {
			return false
		}
		at = max(at, r[1])
		if at >= to {
			return true
		}
	}
	return false
}
