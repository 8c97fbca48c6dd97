package legs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/testenv"
)

// requireLoad skips (or fails) a test where the program cannot be loaded with o.
func requireLoad(t *testing.T, o Options) {
	t.Helper()
	testenv.Root(t, testenv.FUSE, "loading the kernel's program needs root")
	if err := Available(o); err != nil {
		testenv.Skip(t, testenv.FUSE, "the kernel's view cannot be measured here: %v", err)
	}
}

// bpfFds counts this process's descriptors of BPF objects: programs, maps, links, BTF.
func bpfFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil &&
			(strings.HasPrefix(l, "anon_inode:bpf") || strings.HasPrefix(l, "anon_inode:btf")) {
			n++
		}
	}
	return n
}

// TestOpenLoadsWhatItAttaches: Open loads the programs its options use, each attached, and
// no other (the kernel verifies nothing unused); Detach frees all it made.
func TestOpenLoadsWhatItAttaches(t *testing.T) {
	requireLoad(t, Options{DataCalls: true, JobOnly: true})
	for _, o := range []Options{{}, {JobOnly: true}, {DataCalls: true}, {DataCalls: true, JobOnly: true}} {
		before := bpfFds(t)
		tr, err := Open(o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		want := map[*ebpf.Program]bool{}
		for _, p := range tr.objs.programs(o, tr.maps) {
			if *p.p == nil {
				t.Errorf("%+v: program %s not loaded", o, p.name)
			}
			want[*p.p] = true
		}
		for _, p := range tr.objs.programs(Options{DataCalls: true, JobOnly: true}, "") {
			if *p.p != nil && !want[*p.p] {
				t.Errorf("%+v: program %s loaded, not used", o, p.name)
			}
		}
		n := 0
		for _, l := range tr.links {
			if l == nil {
				t.Errorf("%+v: a program is not attached", o)
				continue
			}
			n++
		}
		if n != len(want) {
			t.Errorf("%+v: %d programs attached, want %d", o, n, len(want))
		}
		tr.Detach()
		if after := bpfFds(t); after != before {
			t.Errorf("%+v: %d BPF descriptors open after Detach, %d before Open", o, after, before)
		}
	}
}

// TestLoadFailureFreesAll: when one program of the parallel load fails (refused by the
// verifier, or its attach point missing), the load says which, and leaves nothing loaded
// or attached: the programs loaded beside it, their links and the maps are freed.
func TestLoadFailureFreesAll(t *testing.T) {
	o := Options{DataCalls: true, JobOnly: true}
	requireLoad(t, o)
	for _, tc := range []struct {
		name   string
		breaks func(*ebpf.CollectionSpec)
		want   string
	}{
		{"verifier", func(s *ebpf.CollectionSpec) {
			// Returns without setting R0: the verifier refuses it.
			s.Programs[legsProgSysExit].Instructions = asm.Instructions{asm.Return()}
		}, "program sys_exit"},
		{"attach point", func(s *ebpf.CollectionSpec) {
			s.Programs[legsProgSchedWaking].AttachTo = "no_such_tracepoint"
		}, "program sched_waking"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := bpfFds(t)
			spec, err := loadLegs()
			if err != nil {
				t.Fatal(err)
			}
			tc.breaks(spec)
			tr := &Tracer{}
			err = tr.load(spec, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "legs: load program into the kernel: ") {
				t.Fatalf("load: %v; want an error naming %s", err, tc.want)
			}
			t.Log(err)
			if after := bpfFds(t); after != before {
				t.Errorf("%d BPF descriptors open after the failed load, %d before", after, before)
			}
		})
	}
}

// TestOpenUnreadableBTF: when the kernel's BTF cannot be read, which Open reads while it
// makes the maps, Open says so and frees the maps (the BTF is replaced by an empty file in a
// mount namespace of the test's own).
func TestOpenUnreadableBTF(t *testing.T) {
	requireLoad(t, Options{})
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
	for _, o := range []Options{{}, {DataCalls: true}} {
		before := bpfFds(t)
		tr, err := Open(o)
		if err == nil {
			tr.Detach()
			t.Fatalf("%+v: Open with the kernel's BTF empty succeeded", o)
		}
		if !strings.HasPrefix(err.Error(), "legs: the kernel's BTF: ") {
			t.Errorf("%+v: %v; want it to name the kernel's BTF", o, err)
		}
		if after := bpfFds(t); after != before {
			t.Errorf("%+v: %d BPF descriptors open after the failed Open, %d before", o, after, before)
		}
	}
}

// TestCloseWakesDrain: Close takes the last records at once, not when the drain goroutine's
// wait for the next record or interval ends (here an interval far longer than the test).
func TestCloseWakesDrain(t *testing.T) {
	requireLoad(t, Options{})
	tr, err := Open(Options{DrainInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // let the drain goroutine reach its wait
	done := make(chan struct{})
	go func() { _ = tr.Close(); close(done) }()
	select {
	case <-done:
		tr.Detach()
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited for the drain interval") // the Tracer is left to the test's end
	}
}

// BenchmarkOpen loads and attaches the program as a default recording does (data calls, the
// job alone), and frees it untimed: a recording's start-up in the kernel
// (go test -run '^$' -bench Open ./internal/legs; root).
func BenchmarkOpen(b *testing.B) {
	o := Options{DataCalls: true, JobOnly: true}
	testenv.Root(b, testenv.FUSE, "loading the kernel's program needs root")
	if err := Available(o); err != nil {
		testenv.Skip(b, testenv.FUSE, "the kernel's view cannot be measured here: %v", err)
	}
	for b.Loop() {
		tr, err := Open(o)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		tr.Detach()
		b.StartTimer()
	}
}
