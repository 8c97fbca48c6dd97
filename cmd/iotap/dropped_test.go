package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iotap/iotap/trace"
)

// heldWriter is a trace's file whose writes wait while it is held: the writer's encoder
// stops there, its buffer fills, and a writer in drop mode drops what comes next.
type heldWriter struct {
	mu   sync.Mutex
	cond *sync.Cond
	held bool
	buf  bytes.Buffer
}

func (h *heldWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.held {
		h.cond.Wait()
	}
	return h.buf.Write(p)
}

func (h *heldWriter) hold(held bool) {
	h.mu.Lock()
	h.held = held
	h.mu.Unlock()
	h.cond.Broadcast()
}

// writeDroppedTrace writes a trace of a job that creates and writes files, whose writer
// dropped events (a full buffer in drop mode), and returns how many it dropped.
func writeDroppedTrace(t *testing.T, path string) uint64 {
	t.Helper()
	h := &heldWriter{}
	h.cond = sync.NewCond(&h.mu)
	w, err := trace.NewWriter(h, trace.Header{Kind: "record", Target: trace.Target{Path: "/x", FSType: "ext4"}},
		trace.WriterOptions{DropWhenFull: true, ChunkEvents: 16, BufferEvents: 64, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h.hold(true)
	for i := 0; w.Stats().Dropped < 10; i++ {
		if i == 10000 {
			t.Fatalf("no event dropped after %d files: %+v", i, w.Stats())
		}
		id := w.Path(trace.RootPath, fmt.Sprintf("f%d", i))
		s, fh := int64(i)*int64(time.Millisecond), uint64(i+1)
		w.Append(&trace.Event{Op: trace.OpCreate, Start: s, Dur: 1000, Path: id, Handle: fh, Mode: syscall.S_IFREG | 0o644, Flags: syscall.O_WRONLY | syscall.O_CREAT, Tid: 5, Pid: 5})
		w.Append(&trace.Event{Op: trace.OpWrite, Start: s + 2000, Dur: 1000, Path: id, Handle: fh, Size: 100, Ret: 100, Tid: 5, Pid: 5})
		w.Append(&trace.Event{Op: trace.OpRelease, Start: s + 4000, Dur: 1000, Path: id, Handle: fh, Tid: 5, Pid: 5})
	}
	h.hold(false)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, h.buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return w.Stats().Dropped
}

// TestDroppedEventsExitCode: every command that reads a trace whose recorder dropped events
// does its work and exits 4 saying so; a trace that is damaged as well gives 3.
func TestDroppedEventsExitCode(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "dropped.iotap")
	n := writeDroppedTrace(t, tr)
	whole := filepath.Join(dir, "whole.iotap")
	writeCreates(t, whole, 20, time.Millisecond)
	// Damaged too: a byte of its first events chunk flipped, the footer intact.
	b, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	offs := chunkStarts(b)
	b[offs[1]+22] ^= 0x55
	damaged := filepath.Join(dir, "damaged.iotap")
	if err := os.WriteFile(damaged, b, 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	note := fmt.Sprintf("lacks %d of its", n)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // in what the command wrote
	}{
		{"info", []string{"info", tr}, exitDropped, "dropped, "},
		{"report", []string{"report", tr}, exitDropped, "create"},
		{"report json", []string{"report", "--format", "json", tr}, exitDropped, `"dropped": ` + fmt.Sprint(n)},
		{"export", []string{"export", tr}, exitDropped, `"op":"create"`},
		{"compare", []string{"compare", tr, tr}, exitDropped, "open"},
		{"compare other work", []string{"compare", whole, tr}, exitDropped, ""},
		{"replay", []string{"replay", "--timing", "afap", "--target", target, "-o", filepath.Join(dir, "res"), tr}, exitDropped, "run 1/1"},
		{"replay dry run", []string{"replay", "--dry-run", "--target", target, tr}, exitDropped, "starting state"},
		{"info whole", []string{"info", whole}, exitOK, "0 dropped"},
		{"info damaged and dropped", []string{"info", damaged, tr}, exitDamaged, "dropped, "},
		{"report damaged and dropped", []string{"report", damaged}, exitDamaged, "create"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runIotap(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) {
				t.Errorf("exit %d, want %d; stdout (want %q in it):\n%s\nstderr:\n%s", code, tc.code, tc.stdout, stdout, stderr)
			}
			if tc.code != exitOK && !strings.Contains(stderr, note) {
				t.Errorf("stderr lacks %q:\n%s", note, stderr)
			}
		})
	}
}
