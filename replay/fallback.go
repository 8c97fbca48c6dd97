package replay

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace/fold"
)

// Falling back as applications do.
//
// Some calls a job made on its storage are refused by a target that lacks the feature, and
// the application, had it run there, would have carried on another way. Replay does what
// the application does, so that what follows runs as it would have and the cost of the
// substitute is measured in the refused call's time:
//
//   - renameat2(RENAME_NOREPLACE) refused with EINVAL: a plain rename, after checking that
//     the destination is absent (EEXIST otherwise), as coreutils mv and gnulib's renameatu
//     do.
//   - renameat2(RENAME_EXCHANGE) refused with EINVAL: the swap as three plain renames
//     through a temporary name in the source's directory (not atomic, as any user-space
//     substitute).
//   - fallocate refused with EOPNOTSUPP: mode 0 continues as glibc's posix_fallocate does,
//     writing zeros over the part of the range beyond the end of the file (the range
//     within it keeps its data); FALLOC_FL_ZERO_RANGE writes zeros over the range; a
//     call that only reserves space or punches a hole (FALLOC_FL_KEEP_SIZE,
//     FALLOC_FL_PUNCH_HOLE) is skipped, as an application that gets EOPNOTSUPP for it
//     goes on without it. Collapsing or inserting a range has no substitute.
//
//   - link refused (EPERM, ENOTSUP, ENOSYS, EXDEV, EMLINK, or the EIO of rclone's mount,
//     none of which the recording saw): a rename of the existing file to the new name, as
//     git does when it cannot hard-link a finished object or pack into place; the job
//     then removed the old name, which is gone already: that unlink is counted as done.
//
// A fallback is taken only where the recorded call did not fail the same way. The op then counts as a
// backend difference (OpSummary.Fallbacks), not a divergence, and the summary says what
// was done instead (Summary.BackendExamples).

// linkFallback is what an application does when link(2) of existing to name was refused
// (err) where the recorded one succeeded: git renames existing to name instead. It
// returns the substitute's error and what was done, or ("", err) when there is none.
func (w *worker) linkFallback(ctx context.Context, b Backend, existing, name string, err error) (string, error) {
	switch Errno(err) {
	case syscall.EPERM, syscall.ENOTSUP, syscall.ENOSYS, syscall.EXDEV, syscall.EMLINK, syscall.EIO:
	default:
		return "", err
	}
	what := fmt.Sprintf("link refused (%v): renamed to the new name instead, as git does", Errno(err))
	if rerr := b.Rename(ctx, existing, name, 0); rerr != nil {
		return what, rerr
	}
	w.e.linkedAway.Store(existing, struct{}{})
	return what, nil
}

// unlinkFallback is an unlink of name refused (err) where the recorded one succeeded:
// done already when a link fallback renamed name away.
func (w *worker) unlinkFallback(name string, err error) (string, error) {
	if Errno(err) != syscall.ENOENT {
		return "", err
	}
	if _, ok := w.e.linkedAway.LoadAndDelete(name); !ok {
		return "", err
	}
	return "the name a link fallback renamed away is gone already", nil
}

// maxZeroFill bounds the zeros a fallocate fallback writes (a job's fallocate of a huge
// sparse range would otherwise fill the target).
const maxZeroFill = 1 << 30

// renameFallback is the rename an application does when renameat2 with flags is refused
// with EINVAL (err): it returns the substitute's error and what was done, or ("", err)
// when there is none.
func renameFallback(ctx context.Context, b Backend, from, to string, flags uint32, err error) (string, error) {
	if Errno(err) != syscall.EINVAL {
		return "", err
	}
	switch flags {
	case unix.RENAME_NOREPLACE:
		if _, lerr := b.Lstat(ctx, to); lerr == nil {
			return "RENAME_NOREPLACE refused (EINVAL): destination exists (EEXIST)", syscall.EEXIST
		} else if Errno(lerr) != syscall.ENOENT {
			return "", err
		}
		return "RENAME_NOREPLACE refused (EINVAL): plain rename to the absent destination, as mv does",
			b.Rename(ctx, from, to, 0)
	case unix.RENAME_EXCHANGE:
		dir, base := fold.SplitName(from)
		tmp := ".iotap-exchange-" + base
		if dir != "" {
			tmp = dir + "/" + tmp
		}
		if err := b.Rename(ctx, from, tmp, 0); err != nil {
			return "RENAME_EXCHANGE refused (EINVAL): swap through a temporary name", err
		}
		if err := b.Rename(ctx, to, from, 0); err != nil {
			_ = b.Rename(ctx, tmp, from, 0)
			return "RENAME_EXCHANGE refused (EINVAL): swap through a temporary name", err
		}
		return "RENAME_EXCHANGE refused (EINVAL): swap as three plain renames through a temporary name",
			b.Rename(ctx, tmp, to, 0)
	}
	return "", err
}

// allocateFallback continues a fallocate of mode over [off, off+n) on f that was refused
// with EOPNOTSUPP (err) as the application does: it returns the substitute's error and
// what was done, or ("", err) when there is none.
func (w *worker) allocateFallback(ctx context.Context, f File, mode uint32, off, n int64, err error) (string, error) {
	if Errno(err) != syscall.EOPNOTSUPP {
		return "", err
	}
	const keep, punch, zero = unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_PUNCH_HOLE, unix.FALLOC_FL_ZERO_RANGE
	switch {
	case mode&^(keep|punch|zero) != 0:
		return "", err // collapse, insert, unshare: no substitute
	case mode&punch != 0:
		return "fallocate(PUNCH_HOLE) refused (EOPNOTSUPP): skipped, as the application goes on without it", nil
	case mode == keep:
		return "fallocate(KEEP_SIZE) refused (EOPNOTSUPP): skipped, as the application goes on without it", nil
	}
	a, serr := f.Stat(ctx)
	if serr != nil {
		return "", err
	}
	from, to := off, off+n
	what := "fallocate(ZERO_RANGE) refused (EOPNOTSUPP): zeros written over the range"
	if mode == 0 {
		from = max(from, a.Size)
		what = "fallocate refused (EOPNOTSUPP): zeros written beyond the end of the file, as posix_fallocate does"
	}
	if mode&keep != 0 {
		to = min(to, a.Size)
	}
	if to-from > maxZeroFill {
		return "", err
	}
	zeros := w.zeros()
	for from < to {
		c := min(to-from, int64(len(zeros)))
		m, werr := f.WriteAt(ctx, zeros[:c], from)
		if werr != nil {
			return what, werr
		}
		from += int64(m)
	}
	return what, nil
}

// zeros returns 1 MiB of zeros (the write data is not, with --fill random).
func (w *worker) zeros() []byte {
	if w.zbuf == nil {
		w.zbuf = make([]byte, 1<<20)
	}
	return w.zbuf
}

// Root causes.
//
// One refused or failed call often makes later ones fail: a failed open leaves its handle
// unusable (EBADF for every call on it), a refused fallocate leaves a file shorter than
// the job's writes expect. A report that lists the later failures first hides the cause.
// The engine therefore remembers the first failure on each open-file slot (a divergence,
// or a backend difference: a refused call, a fallback) and on each path (a divergence),
// and counts each later divergence on the same slot or path against it instead of as an
// example of its own. A successful open gives the slot to a new file.

// Cause is a failed or refused call and the divergences that followed it on the same
// file.
type Cause struct {
	// What is the call and its outcome, recorded and replayed.
	What string `json:"what"`
	// Backend is set when the call is a backend difference (the target lacks a feature),
	// not itself a divergence.
	Backend bool `json:"backend,omitempty"`
	// Then counts later divergences on the same handle or path.
	Then uint64 `json:"then"`
}

// maxCauses bounds the causes a run keeps; later failures with a new cause still count as
// divergences.
const maxCauses = 64

type causeTable struct {
	any    atomic.Bool // a cause was noted: opens must clear their slot's (see reopened)
	mu     sync.Mutex  // guards the fields below
	bySlot map[int32]*Cause
	byName map[string]*Cause
	list   []*Cause
}

// note records a failure of op (a divergence, or a backend difference when backend): it
// returns false when it follows an earlier cause on the op's slot or path (and counts it
// there), true when it is a cause of its own.
func (t *causeTable) note(op *replayOp, what string, backend bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.find(op); c != nil {
		if !backend {
			c.Then++
		}
		return false
	}
	if len(t.list) >= maxCauses {
		return true
	}
	if t.bySlot == nil {
		t.bySlot, t.byName = map[int32]*Cause{}, map[string]*Cause{}
	}
	t.any.Store(true)
	c := &Cause{What: what, Backend: backend}
	t.list = append(t.list, c)
	if op.Slot >= 0 {
		t.bySlot[op.Slot] = c
	}
	if op.Slot2 >= 0 && op.Kind == fold.Copy {
		t.bySlot[op.Slot2] = c
	}
	if op.Name != "" && !backend {
		t.byName[op.Name] = c
	}
	return true
}

// reopened forgets the cause on slot, which a successful open gave to a new file.
func (t *causeTable) reopened(slot int32) {
	if slot < 0 || !t.any.Load() {
		return
	}
	t.mu.Lock()
	delete(t.bySlot, slot)
	t.mu.Unlock()
}

func (t *causeTable) find(op *replayOp) *Cause {
	if op.Slot >= 0 {
		if c := t.bySlot[op.Slot]; c != nil {
			return c
		}
	}
	if op.Kind == fold.Copy && op.Slot2 >= 0 {
		if c := t.bySlot[op.Slot2]; c != nil {
			return c
		}
	}
	if op.Name != "" {
		return t.byName[op.Name]
	}
	return nil
}

// causes returns the causes that something followed first (most followers first), then
// the others in the order they happened.
func (t *causeTable) causes() []Cause {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Cause, 0, len(t.list))
	for _, c := range t.list {
		out = append(out, *c)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Then > out[j].Then })
	return out
}

// String describes c in the text summary.
func (c Cause) String() string {
	s := c.What
	if c.Backend {
		s += " (backend difference)"
	}
	if c.Then > 0 {
		s += fmt.Sprintf("; then %d later op(s) on the same file diverged", c.Then)
	}
	return s
}
