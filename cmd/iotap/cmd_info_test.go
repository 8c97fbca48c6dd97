package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/trace"
)

// goldenTrace is the committed version-1 trace (see trace/golden_test.go).
var goldenTrace = filepath.Join("..", "..", "testdata", "trace", "v1-small.iotap")

// traceFixtures writes the traces the info and export tests share into dir and returns
// their paths by name.
func traceFixtures(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	good, err := os.ReadFile(goldenTrace)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"good":      good,
		"truncated": good[:len(good)-40],
		"empty":     nil,
		"text":      []byte("op,start_ns\nread,1\n"),
		"v9":        append(append([]byte(nil), good[:8]...), append([]byte{9, 0}, good[10:]...)...),
		"corrupt":   corruptFirstEvents(t, good),
	}
	out := map[string]string{"missing": filepath.Join(dir, "missing.iotap")}
	for name, b := range files {
		p := filepath.Join(dir, name+".iotap")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	return out
}

// corruptFirstEvents flips a payload byte of the first events chunk of a trace.
func corruptFirstEvents(t *testing.T, good []byte) []byte {
	t.Helper()
	b := bytes.Clone(good)
	for off := 12; off+20 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[off:]))
		if crc32.Checksum(b[off:off+16], crc32.MakeTable(crc32.Castagnoli)) != binary.LittleEndian.Uint32(b[off+16:]) {
			t.Fatal("fixture: bad frame")
		}
		if trace.ChunkType(b[off+4]) == trace.ChunkEvents {
			b[off+20+n/2] ^= 0xff
			return b
		}
		off += 20 + n
	}
	t.Fatal("fixture: no events chunk")
	return nil
}

func runIotap(t *testing.T, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var o, e bytes.Buffer
	code = run(context.Background(), args, stdin, &o, &e)
	return code, o.String(), e.String()
}

func TestInfo(t *testing.T) {
	fx := traceFixtures(t)
	golden, err := os.ReadFile(fx["good"])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		stdin  []byte
		code   int
		stdout []string
		stderr string
	}{
		{name: "good", args: []string{fx["good"]}, code: exitOK, stdout: []string{
			"format version 1", "kind:", "record", "host:", "node17", "target:", "/data/job (fuse.s3fs from s3fs, mounted on /data)",
			"cache none", "direct I/O", "command:", "samtools sort in.bam", "labels:", "job=42 user=ann",
			"events:", "25", "duration:", "1.456ms", "footer:", "25 events written, 0 dropped, 0s blocked, 1 recording errors",
			"read                        4          0          3145728", "lookup                      3          1",
			"damage: none"}},
		{name: "stdin", args: []string{"-"}, stdin: golden, code: exitOK, stdout: []string{"trace:", "- (format version 1)", "damage: none"}},
		{name: "two", args: []string{fx["good"], fx["good"]}, code: exitOK, stdout: []string{"damage: none\n\ntrace:"}},
		{name: "truncated", args: []string{fx["truncated"]}, code: exitDamaged, stdout: []string{
			"footer:", "none (the writer did not close cleanly)", "damage: 2 problem(s)", "truncated at offset", "no footer"},
			stderr: "trace damaged"},
		{name: "corrupt", args: []string{fx["corrupt"]}, code: exitDamaged, stdout: []string{
			"events:", "9", "damage: 2 problem(s)", "corrupt chunk at offset", "(events): payload checksum mismatch", "footer counts 25 events, 9 were read"}},
		{name: "corrupt-strict", args: []string{"--strict", fx["corrupt"]}, code: exitDamaged, stdout: []string{
			"events:   0", "stopped at the first damaged chunk (--strict)"}},
		{name: "missing", args: []string{fx["missing"]}, code: exitError, stderr: "missing.iotap does not exist"},
		{name: "not-a-trace", args: []string{fx["text"]}, code: exitError, stderr: "text.iotap is not an iotap trace"},
		{name: "empty", args: []string{fx["empty"]}, code: exitError, stderr: "empty.iotap is empty or was cut short"},
		{name: "version", args: []string{fx["v9"]}, code: exitError, stderr: "unsupported format version 9"},
		{name: "no-args", args: nil, code: exitUsage, stderr: "no trace given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runIotap(t, bytes.NewReader(tc.stdin), append([]string{"info"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, stderr)
			}
		})
	}
}
