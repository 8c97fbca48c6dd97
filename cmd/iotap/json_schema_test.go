package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestJSONSchemasDocumented: on a recorded job, its replay and their comparison, every key
// that `report --format json`, `compare --format json`, replay's .json and a --copies
// run's .copies.json emit is named in the schema documentation (report/doc.go,
// replay/doc.go, docs/copies.md), and every top-level key the documentation promises
// unconditionally is emitted, none of them null.
func TestJSONSchemasDocumented(t *testing.T) {
	requireRecord(t)
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	mustDo(t, os.MkdirAll(work, 0o755))
	tr := filepath.Join(dir, "t.iotap")
	job := "seq 100000 > a && cat a > b && cat b a > /dev/null && mv b c && ls > /dev/null && rm a && mkdir d && rmdir d"
	cmd := exec.Command(iotapBin, "record", "--target", work, "-o", tr, "--", "sh", "-c", job)
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	target := filepath.Join(dir, "target")
	mustDo(t, os.Mkdir(target, 0o755))
	prefix := filepath.Join(dir, "rp")
	if code, _, stderr := runIotap(t, nil, "replay", tr, "--target", target, "-o", prefix); code != exitOK {
		t.Fatalf("replay: exit %d\n%s", code, stderr)
	}
	copiesTarget := filepath.Join(dir, "copies")
	mustDo(t, os.Mkdir(copiesTarget, 0o755))
	if code, _, stderr := runIotap(t, nil, "replay", tr, "--target", copiesTarget, "--copies", "2", "-o", prefix+"-c"); code != exitOK {
		t.Fatalf("replay --copies: exit %d\n%s", code, stderr)
	}
	reportDoc := readDoc(t, "../../report/doc.go")
	replayDoc := readDoc(t, "../../replay/doc.go")
	copiesDoc := readDoc(t, "../../docs/copies.md")

	for _, tc := range []struct {
		name string
		json func(t *testing.T) []byte
		doc  string
		top  []string // documented top-level keys that are always present
	}{
		{"report", func(t *testing.T) []byte {
			return cliJSON(t, "report", "--format", "json", tr, prefix+".t1.r1.iotap")
		}, reportDoc, []string{"schema", "verdict", "traces", "total"}},
		{"report-by-host", func(t *testing.T) []byte {
			return cliJSON(t, "report", "--format", "json", "--by", "host", tr)
		}, reportDoc, []string{"schema", "verdict", "traces", "by", "total", "groups", "group_rows"}},
		{"report-by-comm", func(t *testing.T) []byte {
			return cliJSON(t, "report", "--format", "json", "--by", "comm", tr, prefix+".t1.r1.iotap")
		}, reportDoc, []string{"schema", "verdict", "traces", "by", "total", "groups", "group_rows"}},
		{"compare", func(t *testing.T) []byte {
			return cliJSON(t, "compare", "--format", "json", tr, prefix+".t1.r1.iotap")
		}, reportDoc, []string{"schema", "tolerance", "verdict", "verdict_figures", "view", "sides", "syscalls", "ops", "slower", "faster"}},
		{"compare-requests", func(t *testing.T) []byte {
			return cliJSON(t, "compare", "--format", "json", "--view", "requests", "--force", tr, prefix+".t1.r1.iotap")
		}, reportDoc, []string{"schema", "verdict", "view", "sides", "ops"}},
		{"replay", func(t *testing.T) []byte {
			b, err := os.ReadFile(prefix + ".t1.r1.json")
			mustDo(t, err)
			return b
		}, replayDoc, []string{"schema", "target", "timing", "speed", "threads", "fold", "ops", "recorded_ops", "replayed_ops",
			"divergences", "round_trip_ns", "replay_span_ns", "replayer_cpu_ns", "cpus", "overlapped", "max_queue_depth"}},
		{"copies", func(t *testing.T) []byte {
			b, err := os.ReadFile(prefix + "-c.t1.r1.copies.json")
			mustDo(t, err)
			return b
		}, copiesDoc, []string{"schema", "copies", "aggregate", "per_copy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal(tc.json(t), &v); err != nil {
				t.Fatal(err)
			}
			top, _ := v.(map[string]any)
			for _, k := range tc.top {
				if _, ok := top[k]; !ok {
					t.Errorf("documented key %q missing from the output", k)
				}
			}
			for k, c := range top {
				if c == nil {
					t.Errorf("key %q is null: documented as an array or object", k)
				}
			}
			keys := map[string]bool{}
			jsonKeys(v, keys)
			var undocumented []string
			for k := range keys {
				if !regexp.MustCompile(`\b` + regexp.QuoteMeta(k) + `\b`).MatchString(tc.doc) {
					undocumented = append(undocumented, k)
				}
			}
			sort.Strings(undocumented)
			if len(undocumented) > 0 {
				t.Errorf("keys emitted but not documented: %s", strings.Join(undocumented, ", "))
			}
		})
	}
}

// cliJSON runs iotap and returns its standard output, failing on a non-zero exit.
func cliJSON(t *testing.T, args ...string) []byte {
	t.Helper()
	code, stdout, stderr := runIotap(t, nil, args...)
	if code != exitOK {
		t.Fatalf("iotap %v: exit %d\n%s", args, code, stderr)
	}
	return []byte(stdout)
}

// readDoc returns the text of a doc.go file.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	mustDo(t, err)
	return string(b)
}

// jsonKeys collects the object keys of v, at every depth, but not those of maps keyed by
// data (errnos by errno name, labels by label key).
func jsonKeys(v any, keys map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			keys[k] = true
			if k == "errnos" || k == "labels" {
				continue
			}
			jsonKeys(c, keys)
		}
	case []any:
		for _, c := range x {
			jsonKeys(c, keys)
		}
	}
}
