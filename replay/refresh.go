package replay

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// RefreshStats counts what RefreshTarget did.
type RefreshStats struct {
	Kept, Made, Removed int
}

// RefreshTarget brings b back to the starting state st while keeping what a run left as it
// was: entries of the starting state with the same type and size (and symlink target) stay
// untouched, entries the starting state lacks are removed, the rest is made again as
// Prepare makes it. A storage client that caches what it read through b's files (s3fs,
// an HSM, a remote cache) keeps its cache of the files kept: the next run starts warm. It
// runs as the phase PhasePrepare, then begins PhaseReplay.
func RefreshTarget(ctx context.Context, b Backend, st *State, fillRandom bool) (RefreshStats, error) {
	b.BeginPhase(PhasePrepare)
	defer b.BeginPhase(PhaseReplay)
	var rs RefreshStats
	want := make(map[string]*Entry, len(st.Entries))
	for i := range st.Entries {
		want[st.Entries[i].Name] = &st.Entries[i]
	}
	have := map[string]Attr{}
	if err := walkTree(ctx, b, "", func(name string, a Attr) { have[name] = a }); err != nil {
		return rs, fmt.Errorf("replay: refresh: list the target: %w", err)
	}
	// Remove what differs, deepest first: a directory is emptied before it goes.
	var gone []string
	for name, a := range have {
		if e, ok := want[name]; !ok || !sameEntry(ctx, b, e, a) {
			gone = append(gone, name)
		}
	}
	// Only the top of a removed tree: removeTree takes what is below it.
	goneSet := make(map[string]bool, len(gone))
	for _, name := range gone {
		goneSet[name] = true
	}
	gone = slices.DeleteFunc(gone, func(name string) bool {
		for p, _ := fold.SplitName(name); p != ""; p, _ = fold.SplitName(p) {
			if goneSet[p] {
				return true
			}
		}
		return false
	})
	for _, name := range gone {
		var err error
		if have[name].Mode&syscall.S_IFMT == syscall.S_IFDIR {
			err = removeTree(ctx, b, name)
		} else {
			err = b.Remove(ctx, name)
		}
		if err != nil && Errno(err) != syscall.ENOENT {
			return rs, fmt.Errorf("replay: refresh: remove %q: %w", name, err)
		}
		delete(have, name)
		rs.Removed++
	}
	// Make what is missing, parents first (st.Entries' order).
	missing := &State{}
	for _, e := range st.Entries {
		if _, ok := have[e.Name]; ok {
			rs.Kept++
			continue
		}
		missing.Entries = append(missing.Entries, e)
	}
	rs.Made = len(missing.Entries)
	if err := Prepare(ctx, b, missing, fillRandom); err != nil {
		return rs, err
	}
	return rs, nil
}

// sameEntry reports whether what the target holds (a) is the starting entry e: same type,
// the same size for a file, the same target for a symlink.
func sameEntry(ctx context.Context, b Backend, e *Entry, a Attr) bool {
	switch e.Type {
	case trace.TypeDir:
		return a.Mode&syscall.S_IFMT == syscall.S_IFDIR
	case trace.TypeSymlink:
		if a.Mode&syscall.S_IFMT != syscall.S_IFLNK {
			return false
		}
		buf := make([]byte, len(e.Target)+1)
		n, err := b.Readlink(ctx, e.Name, buf)
		return err == nil && string(buf[:n]) == e.Target
	}
	return a.Mode&syscall.S_IFMT == syscall.S_IFREG && a.Size == e.Size
}

// removeTree removes directory name and everything below it.
func removeTree(ctx context.Context, b Backend, name string) error {
	var below []string
	kinds := map[string]uint32{}
	if err := walkTree(ctx, b, name, func(n string, a Attr) {
		below = append(below, n)
		kinds[n] = a.Mode & syscall.S_IFMT
	}); err != nil {
		return err
	}
	slices.SortFunc(below, func(x, y string) int { return strings.Count(y, "/") - strings.Count(x, "/") })
	for _, n := range below {
		var err error
		if kinds[n] == syscall.S_IFDIR {
			err = b.Rmdir(ctx, n)
		} else {
			err = b.Remove(ctx, n)
		}
		if err != nil && Errno(err) != syscall.ENOENT {
			return err
		}
	}
	return b.Rmdir(ctx, name)
}

// walkTree calls fn for every entry below directory dir ("" is the root), parents before
// their children.
func walkTree(ctx context.Context, b Backend, dir string, fn func(name string, a Attr)) error {
	names, err := listDir(ctx, b, dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		name := n
		if dir != "" {
			name = dir + "/" + n
		}
		a, err := b.Lstat(ctx, name)
		if err != nil {
			if Errno(err) == syscall.ENOENT {
				continue
			}
			return err
		}
		fn(name, a)
		if a.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			if err := walkTree(ctx, b, name, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// listDir returns the names in directory dir, without "." and "..".
func listDir(ctx context.Context, b Backend, dir string) ([]string, error) {
	f, err := b.Open(ctx, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close(ctx) }()
	buf := make([]byte, 64<<10)
	var names []string
	for off := int64(0); ; off = 1 {
		n, err := f.ReadDir(ctx, buf, off)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
