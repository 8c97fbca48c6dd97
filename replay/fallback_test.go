package replay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// refusing is a directory that refuses what a target without the features refuses:
// renameat2 with flags (EINVAL, as s3fs), fallocate (EOPNOTSUPP, as s3fs and FUSE file
// systems without it), and opening one name (EACCES).
type refusing struct {
	Backend
	open    string
	linkErr syscall.Errno // link(2) fails with it (0: links)
}

func (r refusing) Link(ctx context.Context, existing, name string) error {
	if r.linkErr != 0 {
		return r.linkErr
	}
	return r.Backend.Link(ctx, existing, name)
}

func (r refusing) Rename(ctx context.Context, from, to string, flags uint32) error {
	if flags != 0 {
		return syscall.EINVAL
	}
	return r.Backend.Rename(ctx, from, to, 0)
}

func (r refusing) Open(ctx context.Context, name string, flags int, perm uint32) (File, error) {
	if name == r.open {
		return nil, syscall.EACCES
	}
	f, err := r.Backend.Open(ctx, name, flags, perm)
	if err != nil {
		return nil, err
	}
	return noAllocate{f}, nil
}

type noAllocate struct{ File }

func (noAllocate) Allocate(context.Context, uint32, int64, int64) error { return syscall.EOPNOTSUPP }

// TestRenameFallback: a target that refuses renameat2's flags with EINVAL gets the plain
// rename(s) the application does instead; a fallback, not a divergence. NOREPLACE onto an
// existing name still fails with EEXIST, as it would have.
func TestRenameFallback(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flags     uint32
		recorded  syscall.Errno
		bExists   bool
		fallbacks uint64
		diverged  uint64
		want      map[string]string // file -> content after the replay
	}{
		{"noreplace", unix.RENAME_NOREPLACE, 0, false, 1, 0, map[string]string{"b": "a"}},
		{"exchange", unix.RENAME_EXCHANGE, 0, true, 1, 0, map[string]string{"a": "bb", "b": "a"}},
		{"noreplace onto an existing name", unix.RENAME_NOREPLACE, syscall.EEXIST, true, 1, 0, map[string]string{"a": "a", "b": "bb"}},
		{"noreplace recorded ok onto an existing name", unix.RENAME_NOREPLACE, 0, true, 0, 1, map[string]string{"a": "a", "b": "bb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tracetest.New(t)
			b.W.AddFile(trace.File{Path: b.Path("a"), Type: trace.TypeFile, Mode: 0o644, Size: 1})
			if tc.bExists {
				b.W.AddFile(trace.File{Path: b.Path("b"), Type: trace.TypeFile, Mode: 0o644, Size: 2})
			}
			b.Ev(1, trace.OpRename, "a", 20_000, 1000, func(e *trace.Event) {
				e.Path2, e.Flags, e.Errno = b.Path("b"), tc.flags, uint16(tc.recorded)
			})
			data := b.Bytes()
			root, d := target(t, "")
			st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
			must(t, err)
			must(t, Prepare(context.Background(), d, st, false))
			// Contents tell the files apart (the starting state is zeros).
			must(t, os.WriteFile(filepath.Join(root, "a"), []byte("a"), 0o644))
			if tc.bExists {
				must(t, os.WriteFile(filepath.Join(root, "b"), []byte("bb"), 0o644))
			}
			sum, err := Run(context.Background(), tracetest.Reader(t, data), refusing{Backend: d}, nil, Options{Timing: TimingAFAP})
			must(t, err)
			if sum.Fallbacks != tc.fallbacks || sum.Divergences != tc.diverged || sum.BackendDifferences != tc.fallbacks {
				t.Errorf("fallbacks %d, divergences %d, backend differences %d; want %d, %d, %d (%v %v)", sum.Fallbacks,
					sum.Divergences, sum.BackendDifferences, tc.fallbacks, tc.diverged, tc.fallbacks, sum.BackendExamples, sum.Examples)
			}
			for name, want := range tc.want {
				if got, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(got) != want {
					t.Errorf("%s: %q %v, want %q", name, got, err, want)
				}
			}
			ents, err := os.ReadDir(root)
			must(t, err)
			if len(ents) != len(tc.want) {
				t.Errorf("%d entries under the root, want %d (a temporary name left?)", len(ents), len(tc.want))
			}
		})
	}
}

// TestLinkFallback: a target that refuses link(2) as object-store clients do (s3fs ENOTSUP,
// rclone EIO) gets what git does instead: the finished file renamed into place; the job's
// unlink of the temporary name that followed is done already. Two fallbacks, no
// divergence, and the tree ends as the job's did. Another error stays a divergence.
func TestLinkFallback(t *testing.T) {
	for _, tc := range []struct {
		name                string
		err                 syscall.Errno
		fallbacks, diverged uint64
		want                map[string]string
	}{
		{"ENOTSUP", syscall.ENOTSUP, 2, 0, map[string]string{"pack": "data"}},
		{"EIO", syscall.EIO, 2, 0, map[string]string{"pack": "data"}},
		{"EEXIST", syscall.EEXIST, 0, 1, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tracetest.New(t)
			b.W.AddFile(trace.File{Path: b.Path("tmp"), Type: trace.TypeFile, Mode: 0o644, Size: 4})
			b.Ev(1, trace.OpLink, "pack", 20_000, 1000, func(e *trace.Event) { e.Path2 = b.Path("tmp") })
			b.Ev(1, trace.OpUnlink, "tmp", 20_000, 1000, nil)
			data := b.Bytes()
			root, d := target(t, "")
			st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
			must(t, err)
			must(t, Prepare(context.Background(), d, st, false))
			must(t, os.WriteFile(filepath.Join(root, "tmp"), []byte("data"), 0o644))
			sum, err := Run(context.Background(), tracetest.Reader(t, data), refusing{Backend: d, linkErr: tc.err}, nil, Options{Timing: TimingAFAP})
			must(t, err)
			if sum.Fallbacks != tc.fallbacks || sum.Divergences != tc.diverged {
				t.Errorf("fallbacks %d, divergences %d; want %d, %d (%v %v)", sum.Fallbacks, sum.Divergences, tc.fallbacks, tc.diverged, sum.BackendExamples, sum.Examples)
			}
			ents, err := os.ReadDir(root)
			must(t, err)
			got := map[string]string{}
			for _, e := range ents {
				b, err := os.ReadFile(filepath.Join(root, e.Name()))
				must(t, err)
				got[e.Name()] = string(b)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("tree %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAllocateFallback: a target that refuses fallocate with EOPNOTSUPP gets what the
// application does instead: posix_fallocate's zeros beyond the end of the file for mode
// 0, zeros over the range for ZERO_RANGE, nothing for KEEP_SIZE and PUNCH_HOLE; a collapse
// has no substitute (a backend difference). The writes that follow succeed.
func TestAllocateFallback(t *testing.T) {
	for _, tc := range []struct {
		name        string
		mode        uint32
		size        int64 // of the file after the replay
		fallbacks   uint64
		unsupported uint64
	}{
		{"posix_fallocate", 0, 8192, 1, 0},
		{"keep size", unix.FALLOC_FL_KEEP_SIZE, 300, 1, 0},
		{"punch hole", unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, 300, 1, 0},
		{"zero range", unix.FALLOC_FL_ZERO_RANGE, 8192, 1, 0},
		{"collapse range", unix.FALLOC_FL_COLLAPSE_RANGE, 300, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tracetest.New(t)
			fh := b.CreateFlags(1, "f", unix.O_RDWR|unix.O_CREAT)
			b.RW(1, trace.OpWrite, "f", fh, 0, 100, 100)
			b.Ev(1, trace.OpFallocate, "f", 5000, 1000, func(e *trace.Event) {
				e.Handle, e.Offset, e.Size, e.Flags = fh, 0, 8192, tc.mode
			})
			for i := int64(0); i < 5; i++ {
				b.RW(1, trace.OpWrite, "f", fh, 200+i*20, 20, 20)
			}
			b.Close(1, "f", fh)
			root, d := target(t, "")
			sum := replayOnto(t, b.Bytes(), refusing{Backend: d}, nil, Options{Timing: TimingAFAP, FillRandom: true})
			if sum.Divergences != 0 || sum.Fallbacks != tc.fallbacks || sum.BackendDifferences != tc.fallbacks+tc.unsupported {
				t.Errorf("divergences %d, fallbacks %d, backend differences %d; want 0, %d, %d (%v %v)", sum.Divergences,
					sum.Fallbacks, sum.BackendDifferences, tc.fallbacks, tc.fallbacks+tc.unsupported, sum.Examples, sum.BackendExamples)
			}
			got, err := os.ReadFile(filepath.Join(root, "f"))
			must(t, err)
			if int64(len(got)) != tc.size {
				t.Fatalf("f: %d bytes, want %d", len(got), tc.size)
			}
			// The first 100 bytes are the job's (random fill), not the fallback's zeros,
			// except where the job asked for zeros.
			if tc.mode != unix.FALLOC_FL_ZERO_RANGE && strings.Count(string(got[:100]), "\x00") > 10 {
				t.Errorf("the fallback overwrote the file's data: %q", got[:100])
			}
		})
	}
}

// TestRootCauseFirst: a create the target refuses makes every later call on its handle
// fail with EBADF; the summary names the create as the cause and counts the rest after
// it, instead of listing EBADF writes.
func TestRootCauseFirst(t *testing.T) {
	b := tracetest.New(t)
	fh := b.Create(1, "f")
	for i := int64(0); i < 6; i++ {
		b.RW(1, trace.OpWrite, "f", fh, i*100, 100, 100)
	}
	b.Close(1, "f", fh)
	fg := b.Create(1, "g")
	b.RW(1, trace.OpWrite, "g", fg, 0, 100, 100)
	b.Close(1, "g", fg)
	_, d := target(t, "")
	sum := replayOnto(t, b.Bytes(), refusing{Backend: d, open: "f"}, nil, Options{Timing: TimingAFAP, OnDiverge: DivergeIgnore})
	if sum.Divergences != 8 {
		t.Errorf("divergences %d, want 8 (create, 6 writes, flush): %v", sum.Divergences, sum.Examples)
	}
	if len(sum.Causes) != 1 || !strings.HasPrefix(sum.Causes[0].What, `create open "f"`) || sum.Causes[0].Then != 7 || sum.Causes[0].Backend {
		t.Fatalf("causes %+v, want the create of f then 7", sum.Causes)
	}
	if len(sum.Examples) != 1 {
		t.Errorf("examples %q, want the create only", sum.Examples)
	}
	var out strings.Builder
	sum.Print(&out)
	if !strings.Contains(out.String(), "cause "+sum.Causes[0].What+"; then 7 later op(s) on the same file diverged") {
		t.Errorf("summary does not name the cause:\n%s", out.String())
	}
}
