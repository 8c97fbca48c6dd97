package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/iotap/iotap/trace"
)

// evilName is a file name a job could create: it sets the terminal's title, rings the bell,
// returns the cursor, starts a new row and holds bytes that are not UTF-8.
const evilName = "evil\x1b]0;pwned\a\rX\nrow\xff\xfe"

// writeEvilTrace writes a trace whose paths, command, labels and host name hold terminal
// control sequences, with reads and writes on them so that reports list them.
func writeEvilTrace(t *testing.T, path string) {
	t.Helper()
	w, err := trace.Create(path, trace.Header{
		Kind: "record", Hostname: "host\x1b[31m", Command: []string{"cat", evilName},
		Labels: []trace.Label{{Key: "job\x07", Value: "v\x1b[2J"}},
	}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := w.Path(trace.RootPath, "dir\x1b[1m")
	f := w.Path(dir, evilName)
	for i := range 20 {
		s := int64(i) * 10_000
		w.Append(&trace.Event{Op: trace.OpLookup, Start: s, Dur: 100, Path: f, Tid: 9, Pid: 9})
		w.Append(&trace.Event{Op: trace.OpOpen, Start: s + 1000, Dur: 100, Path: f, Handle: uint64(i + 1), Tid: 9, Pid: 9})
		w.Append(&trace.Event{Op: trace.OpRead, Start: s + 2000, Dur: 100, Path: f, Handle: uint64(i + 1), Size: 4096, Ret: 4096, Tid: 9, Pid: 9})
		w.Append(&trace.Event{Op: trace.OpRelease, Start: s + 3000, Dur: 100, Path: f, Handle: uint64(i + 1), Tid: 9, Pid: 9})
	}
	w.AddProcess(trace.Process{Tid: 9, Pid: 9, Comm: "c\x1b[0m", Exe: "/bin/" + evilName})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// terminalSafe fails if out holds a control byte other than newline, or invalid UTF-8.
func terminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: invalid UTF-8 in output:\n%q", what, out)
	}
	for i := 0; i < len(out); i++ {
		if c := out[i]; (c < 0x20 && c != '\n') || c == 0x7f {
			t.Errorf("%s: control byte %#x at %d: %q", what, c, i, out[max(0, i-40):min(len(out), i+40)])
			return
		}
	}
}

// TestTextOutputEscapesNames: names from the traced job are escaped (as ls -b does) in every
// text output: report, compare, info, replay summaries and dry runs, warnings and errors.
func TestTextOutputEscapesNames(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "evil.iotap")
	writeEvilTrace(t, tr)
	tgt := filepath.Join(dir, "target")
	if err := os.Mkdir(tgt, 0o755); err != nil {
		t.Fatal(err)
	}
	// A damaged copy, whose warnings name it (the trace's own file name may be hostile too).
	b, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "cut\x1b[5m.iotap")
	if err := os.WriteFile(bad, b[:len(b)-10], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"report", tr},
		{"report", "--top", "3", tr, bad},
		{"compare", tr, tr},
		{"info", tr, bad},
		{"replay", "--dry-run", tr},
		{"replay", "--target", tgt, "-o", filepath.Join(dir, "out"), tr},
		{"export", "--format", "jsonl", tr},
		{"report", filepath.Join(dir, "missing\x1b[5m.iotap")},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, stdout, stderr := runIotap(t, nil, args...)
			t.Logf("%q: exit %d", args, code)
			terminalSafe(t, "stdout", stdout)
			terminalSafe(t, "stderr", stderr)
			if args[0] == "report" && args[1] == tr && !strings.Contains(stdout, `evil\033]0;pwned\a\rX\nrow\377\376`) {
				t.Errorf("escaped name missing from the report:\n%s", stdout)
			}
		})
	}
}
