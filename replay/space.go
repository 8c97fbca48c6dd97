package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/trace"
)

// Need returns the space and the inodes the starting state takes on a file system whose
// allocation unit is block: each file's data (less its holes), each directory, and each
// symlink whose target does not fit in its inode (60 bytes on ext4), rounded up to whole
// blocks; one inode per entry.
func (st *State) Need(block int64) (bytes, inodes uint64) {
	block = max(block, 1)
	blocks := func(n int64) uint64 { return uint64((n + block - 1) / block) }
	for i := range st.Entries {
		e := &st.Entries[i]
		inodes++
		switch e.Type {
		case trace.TypeDir:
			bytes += uint64(block)
		case trace.TypeSymlink:
			if len(e.Target) > 60 {
				bytes += blocks(int64(len(e.Target))) * uint64(block)
			}
		default:
			bytes += blocks(dataBytes(e)) * uint64(block)
		}
	}
	return bytes, inodes
}

// dataBytes returns the bytes of e that Prepare writes: its size less its holes.
func dataBytes(e *Entry) int64 {
	if len(e.Holes) == 0 || e.Size <= 0 {
		return max(e.Size, 0)
	}
	hs := slices.Clone(e.Holes)
	for i := range hs {
		if hs[i].End < 0 || hs[i].End > e.Size {
			hs[i].End = e.Size
		}
	}
	slices.SortFunc(hs, func(a, b Hole) int { return cmp.Compare(a.Off, b.Off) })
	var holes, reach int64
	for _, h := range hs {
		from := max(h.Off, reach)
		if h.End > from {
			holes += h.End - from
			reach = h.End
		}
	}
	return max(e.Size-holes, 0)
}

// NoSpaceError says that the starting state does not fit in the target: Prepare refuses
// it before it creates any of it. It wraps ENOSPC.
type NoSpaceError struct {
	Target               string
	NeedBytes, FreeBytes uint64
	NeedFiles, FreeFiles uint64 // FreeFiles: 0 when the target does not count inodes
	Files, Dirs          int    // of the starting state
}

func (e *NoSpaceError) Error() string {
	what := fmt.Sprintf("%s (files: %d, directories: %d)", format.Bytes(e.NeedBytes), e.Files, e.Dirs)
	if e.NeedBytes <= e.FreeBytes {
		return fmt.Sprintf("replay: the starting state needs %d inodes (%s), %s has %d free: replay onto a file system with more inodes",
			e.NeedFiles, what, e.Target, e.FreeFiles)
	}
	return fmt.Sprintf("replay: the starting state needs %s, %s has %s free: make room, or replay onto a larger file system",
		what, e.Target, format.Bytes(e.FreeBytes))
}

func (e *NoSpaceError) Unwrap() error { return syscall.ENOSPC }

// checkSpace returns a *NoSpaceError when b says it has less room than st takes; nil when
// st fits or b cannot tell.
func checkSpace(ctx context.Context, b Backend, st *State) error {
	sr, ok := b.(SpaceReporter)
	if !ok {
		return nil
	}
	sp, err := sr.Space(ctx)
	if errors.Is(err, ErrUnsupported) {
		return nil
	}
	if err != nil {
		return err
	}
	need, inodes := st.Need(sp.BlockSize)
	if need <= sp.FreeBytes && (sp.Files == 0 || inodes <= sp.FreeFiles) {
		return nil
	}
	return &NoSpaceError{Target: b.Target().Path, NeedBytes: need, FreeBytes: sp.FreeBytes,
		NeedFiles: inodes, FreeFiles: sp.FreeFiles, Files: st.Files, Dirs: st.Dirs}
}
