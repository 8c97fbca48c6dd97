package recorder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// TestLegsKernelRefused: with --legs kernel on a kernel that cannot measure the legs (here
// its BTF hidden, in a mount namespace of the test's own), the recording fails saying why,
// before the job runs, and leaves no trace file behind.
func TestLegsKernelRefused(t *testing.T) {
	requireRecord(t)
	if !testenv.InFreshMounts(t) {
		return
	}
	if err := unix.Mount("none", "/sys/kernel/btf", "tmpfs", 0, ""); err != nil {
		t.Fatalf("hide the kernel's BTF: %v", err)
	}
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "t.iotap")
	var stderr syncBuffer
	err := Record(context.Background(), Spec{Target: dir, Output: out, Legs: "kernel", Argv: []string{"sh", "-c", "echo ran > ran"}},
		Env{Stderr: &stderr})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != exitError || !strings.Contains(stderr.String(), "iotap record: --legs kernel: ") {
		t.Errorf("Record: %v; want exit %d naming --legs kernel; stderr:\n%s", err, exitError, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the job ran")
	}
	t.Logf("stderr:\n%s", stderr.String())
	if st, err := os.Stat(out); err == nil {
		t.Errorf("the failed recording left %s behind (%d bytes)", out, st.Size())
	}
}

// TestKernelUnreadableFallsBack: where the kernel's program cannot be loaded (here the
// kernel's BTF is an empty file, in a mount namespace of the test's own), a default
// recording still runs the job: its reads and writes go through the layer and its legs are
// left to the round-trip probe; the trace's header and the summary say why, and the
// probe, whose process starts while the program loads, still measured the round trip.
func TestKernelUnreadableFallsBack(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "sh", "cat")
	if !testenv.InFreshMounts(t) {
		return
	}
	empty := filepath.Join(t.TempDir(), "vmlinux")
	if err := os.WriteFile(empty, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(empty, "/sys/kernel/btf/vmlinux", "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("hide the kernel's BTF: %v", err)
	}
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "t.iotap")
	var stdout, stderr syncBuffer
	if err := os.Chdir(dir); err != nil { // this process's own: InFreshMounts runs the test alone in it
		t.Fatal(err)
	}
	err := Record(context.Background(), Spec{Output: out, Argv: []string{"sh", "-c", "echo hi > f && cat f"}},
		Env{Stdout: &stdout, Stderr: &stderr, Version: "test"})
	if err != nil {
		t.Fatalf("Record: %v\n%s", err, stderr.String())
	}
	t.Logf("stderr:\n%s", stderr.String())
	const why = "legs: the kernel's BTF: "
	for _, want := range []string{
		"\n  reads and writes: through the layer (" + why,
		"\n  legs outside the layer: not measured by the kernel (" + why,
		"\n  layer round trip ",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the summary lacks %q", want)
		}
	}
	evs, r := readTrace(t, out)
	h := r.Header()
	if h.Data != trace.DataLayer || !strings.HasPrefix(h.DataNote, why) {
		t.Errorf("header: data %q (%s), want %q saying %q", h.Data, h.DataNote, trace.DataLayer, why)
	}
	if h.Legs != trace.LegsProbe || !strings.HasPrefix(h.LegsNote, why) {
		t.Errorf("header: legs %q (%s), want %q saying %q", h.Legs, h.LegsNote, trace.LegsProbe, why)
	}
	if f, ok := r.Footer(); !ok || f.RoundTrip.Start <= 0 {
		t.Errorf("the footer has no round trip measured before the job: %+v", f.RoundTrip)
	}
	if count(evs, trace.OpWrite, "f") != 1 || count(evs, trace.OpRead, "f") < 1 {
		t.Errorf("the trace lacks the job's write and read of f: %d events", len(evs))
	}
	for _, e := range evs {
		if e.Passthrough || e.HasLegs() {
			t.Errorf("an event measured by the kernel: %+v", e.Event)
		}
	}
}
