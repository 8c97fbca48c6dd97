package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/testenv"
)

// recordExportJob records a real job in place: the genomics workload of the demo
// (samtools, tar, sqlite3, cp) after a few calls on input files that existed before it, one
// with a space in its name, renamed, hard-linked and symlinked. It returns the trace.
func recordExportJob(t *testing.T, dir string) string {
	t.Helper()
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "fio", "samtools", "sqlite3", "tar", "awk", "cut", "ln", "readlink")
	script, err := filepath.Abs("../../scripts/workload-genomics.sh")
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	mustDo(t, os.MkdirAll(filepath.Join(work, "inputs"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(work, "inputs", "ref data.txt"), []byte(strings.Repeat("ACGT", 16<<10)), 0o644))
	mustDo(t, os.WriteFile(filepath.Join(work, "inputs", "notes.txt"), []byte(strings.Repeat("n", 10000)), 0o644))
	mustDo(t, os.Symlink("notes.txt", filepath.Join(work, "inputs", "link")))
	tr := filepath.Join(dir, "job.iotap")
	job := `cat "inputs/ref data.txt" > copy.txt && mv copy.txt moved.txt && cat moved.txt inputs/link > /dev/null &&
ln moved.txt hard.txt && cat hard.txt > /dev/null && readlink inputs/link > /dev/null &&
ln -s moved.txt sym && readlink sym > /dev/null && sh "$1"`
	cmd := exec.Command(iotapBin, "record", "--target", work, "-o", tr, "--", "sh", "-c", job, "job", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "WORKLOAD_READS=3000")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	return tr
}

// traceIO sums, from an export of a trace in JSON lines, what fio's replay of its iolog
// must do: the reads and writes that moved bytes (copy_file_range both) and the file
// syncs that succeeded.
func traceIO(t *testing.T, jsonl string) (reads, readBytes, writes, writeBytes, syncs int64) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(jsonl))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Op    string
			Errno int
			Ret   int64
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Errno != 0 {
			continue
		}
		switch {
		case ev.Op == "fsync":
			syncs++
		case ev.Ret <= 0:
		case ev.Op == "read":
			reads, readBytes = reads+1, readBytes+ev.Ret
		case ev.Op == "write":
			writes, writeBytes = writes+1, writeBytes+ev.Ret
		case ev.Op == "copy_file_range":
			reads, readBytes = reads+1, readBytes+ev.Ret
			writes, writeBytes = writes+1, writeBytes+ev.Ret
		}
	}
	return
}

// TestExportsOfARecordedJob exports a recorded real job for the tools that read it: fio
// replays its iolog onto a fresh directory and does the trace's reads and writes; its
// Perfetto JSON follows the format's rules; its system calls are the report's; and its
// anonymised copy reports and replays as the original.
func TestExportsOfARecordedJob(t *testing.T) {
	dir := t.TempDir()
	tr := recordExportJob(t, dir)
	code, jsonl, stderr := runIotap(t, nil, "export", tr)
	if code != exitOK {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	events := strings.Count(jsonl, "\n")
	// Threads the trace names no command for (gone before the recorder could learn it).
	nameless := 0
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(jsonl), "\n") {
		var ev struct {
			Tid  json.Number
			Comm string
		}
		mustDo(t, json.Unmarshal([]byte(l), &ev))
		if ev.Tid != "0" && !seen[ev.Tid.String()] {
			seen[ev.Tid.String()] = true
			if ev.Comm == "" {
				nameless++
			}
		}
	}

	t.Run("fio", func(t *testing.T) {
		log, setup := filepath.Join(dir, "job.fio"), filepath.Join(dir, "job.fio.sh")
		code, _, stderr := runIotap(t, nil, "export", "--format", "fio", "--fio-setup", setup, "-o", log, tr)
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		t.Log(strings.TrimSpace(stderr))
		b, err := os.ReadFile(log)
		mustDo(t, err)
		n := checkIolog(t, string(b))
		// A fresh directory with the starting state (the files the job found), then the
		// directories the iolog's files are in and its names for names fio cannot read.
		target := filepath.Join(dir, "fio-target")
		mustDo(t, os.Mkdir(target, 0o755))
		if code, _, stderr := runIotap(t, nil, "replay", "--prepare", "only", "--target", target, tr); code != exitOK {
			t.Fatalf("replay --prepare only: exit %d\n%s", code, stderr)
		}
		sh := exec.Command("sh", setup)
		sh.Dir = target
		if b, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("setup script: %v\n%s", err, b)
		}
		out := filepath.Join(dir, "fio.json")
		fio := exec.Command("fio", "--name=job", "--read_iolog="+log, "--replay_no_stall=1", "--output-format=json", "--output="+out)
		fio.Dir = target // the iolog's names are relative to the traced directory
		if b, err := fio.CombinedOutput(); err != nil {
			t.Fatalf("fio: %v\n%s", err, b)
		}
		js, err := os.ReadFile(out)
		mustDo(t, err)
		var res struct {
			Jobs []struct {
				Error int
				Read  struct {
					IOBytes   int64 `json:"io_bytes"`
					TotalIOs  int64 `json:"total_ios"`
					ShortIOs  int64 `json:"short_ios"`
					DroppedIO int64 `json:"drop_ios"`
				}
				Write struct {
					IOBytes  int64 `json:"io_bytes"`
					TotalIOs int64 `json:"total_ios"`
				}
				Sync struct {
					Lat struct{ N int64 } `json:"lat_ns"`
				}
			}
		}
		if err := json.Unmarshal(js, &res); err != nil || len(res.Jobs) != 1 {
			t.Fatalf("fio's JSON: %v\n%s", err, js)
		}
		j := res.Jobs[0]
		reads, readBytes, writes, writeBytes, syncs := traceIO(t, jsonl)
		t.Logf("fio: read %d ios %d bytes, write %d ios %d bytes, %d syncs; the trace: read %d/%d, write %d/%d, %d fsync",
			j.Read.TotalIOs, j.Read.IOBytes, j.Write.TotalIOs, j.Write.IOBytes, j.Sync.Lat.N, reads, readBytes, writes, writeBytes, syncs)
		if j.Error != 0 || j.Read.TotalIOs != reads || j.Read.IOBytes != readBytes || j.Write.TotalIOs != writes ||
			j.Write.IOBytes != writeBytes || j.Sync.Lat.N != syncs || int64(n.reads) != reads || reads == 0 || writes == 0 {
			t.Errorf("fio did not replay the trace's I/O (error %d)", j.Error)
		}
	})

	t.Run("perfetto", func(t *testing.T) {
		out := filepath.Join(dir, "job.json")
		code, _, stderr := runIotap(t, nil, "export", "--format", "perfetto", "-o", out, tr)
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		b, err := os.ReadFile(out)
		mustDo(t, err)
		s := checkTraceEvents(t, b)
		t.Logf("perfetto: %d bytes, %d events in it: %d complete, %d async, %d counters, %d metadata; %.0f bytes per request of the trace's %d",
			len(b), s.events, s.complete, s.async, s.counters, s.metadata, float64(len(b))/float64(events), events)
		if s.complete+s.async != events || s.unnamedThreads > nameless {
			t.Errorf("%d slices for %d requests; %d threads without a name, %d without one in the trace",
				s.complete+s.async, events, s.unnamedThreads, nameless)
		}
		code, calls, stderr := runIotap(t, nil, "export", "--format", "perfetto", "--view", "syscalls", tr)
		if code != exitOK {
			t.Fatalf("--view syscalls: exit %d\n%s", code, stderr)
		}
		cs := checkTraceEvents(t, []byte(calls))
		t.Logf("perfetto --view syscalls: %d bytes, %d slices", len(calls), cs.complete+cs.async)
	})

	t.Run("syscalls", func(t *testing.T) {
		_, calls, _ := runIotap(t, nil, "export", "--view", "syscalls", tr)
		_, rep, _ := runIotap(t, nil, "report", "--format", "json", tr)
		want, _ := reportTotals(t, rep)
		for k, v := range callTotals(t, calls) {
			if want[k] != v {
				t.Errorf("%s: export %v, report %v", k, v, want[k])
			}
		}
	})

	t.Run("anonymize", func(t *testing.T) {
		anon := filepath.Join(dir, "anon.iotap")
		code, _, stderr := runIotap(t, nil, "anonymize", tr, "-o", anon)
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		compareReports(t, tr, anon)
		_, ajs, _ := runIotap(t, nil, "export", anon)
		for _, name := range []string{"reads.sam", "samtools", "sqlite3", "ref data", "moved.txt", "work"} {
			if strings.Contains(ajs, name) {
				t.Errorf("the anonymised trace names %q", name)
			}
		}
		// Each replayed onto a fresh directory: the same calls, bytes and outcomes.
		var sums [2]map[string]any
		for i, x := range []string{tr, anon} {
			target := filepath.Join(dir, "replay"+string(rune('a'+i)))
			mustDo(t, os.Mkdir(target, 0o755))
			prefix := filepath.Join(dir, "res"+string(rune('a'+i)))
			code, out, errs := runIotap(t, nil, "replay", x, "--target", target, "--timing", "afap", "-o", prefix)
			if code != exitOK {
				t.Fatalf("replay %s: exit %d\n%s\n%s", x, code, out, errs)
			}
			js, err := os.ReadFile(prefix + ".t1.r1.json")
			mustDo(t, err)
			mustDo(t, json.Unmarshal(js, &sums[i]))
		}
		for _, k := range []string{"recorded_ops", "replayed_ops", "skipped_ops", "divergences", "backend_differences",
			"recorded_read_bytes", "recorded_write_bytes", "replayed_read_bytes", "replayed_write_bytes", "implicit_opens"} {
			if sums[0][k] != sums[1][k] {
				t.Errorf("replay %s: original %v, anonymised %v", k, sums[0][k], sums[1][k])
			}
		}
		t.Logf("replays: original %v ops replayed, %v divergences, %v/%v bytes read/written; anonymised %v, %v, %v/%v",
			sums[0]["replayed_ops"], sums[0]["divergences"], sums[0]["replayed_read_bytes"], sums[0]["replayed_write_bytes"],
			sums[1]["replayed_ops"], sums[1]["divergences"], sums[1]["replayed_read_bytes"], sums[1]["replayed_write_bytes"])
	})
}
