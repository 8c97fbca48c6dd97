// Package sysinfo answers questions about the machine a trace is made on: which mount holds
// a path (file system type, source, mount point, from /proc/self/mountinfo), the host name
// and the kernel release.
package sysinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mount is one line of /proc/<pid>/mountinfo (see proc(5)).
type Mount struct {
	ID         int    // mount id
	Parent     int    // parent mount id
	Major      uint32 // the file system's device number (st_dev), major
	Minor      uint32 // and minor
	Root       string // root of the mount within its file system
	MountPoint string // where it is mounted, relative to the process root
	Options    string // per-mount options
	FSType     string // e.g. "ext4", "fuse.s3fs"
	Source     string // e.g. "/dev/sda1", "s3fs"
	SuperOpts  string // per-superblock options
}

// ErrNotFound is returned when no mount holds a path.
var ErrNotFound = errors.New("sysinfo: no mount holds the path")

// ParseMountinfo reads mountinfo lines. Malformed lines are skipped.
func ParseMountinfo(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		m, ok := parseLine(sc.Text())
		if ok {
			out = append(out, m)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sysinfo: read mountinfo: %w", err)
	}
	return out, nil
}

func parseLine(line string) (Mount, bool) {
	// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return Mount{}, false
	}
	f := strings.Fields(pre)
	g := strings.Fields(post)
	if len(f) < 6 || len(g) < 2 {
		return Mount{}, false
	}
	id, err1 := strconv.Atoi(f[0])
	parent, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return Mount{}, false
	}
	major, minor, _ := strings.Cut(f[2], ":")
	maj, _ := strconv.ParseUint(major, 10, 32)
	mnr, _ := strconv.ParseUint(minor, 10, 32)
	m := Mount{
		ID:         id,
		Parent:     parent,
		Major:      uint32(maj),
		Minor:      uint32(mnr),
		Root:       unescape(f[3]),
		MountPoint: unescape(f[4]),
		Options:    f[5],
		FSType:     unescape(g[0]),
		Source:     unescape(g[1]),
	}
	if len(g) > 2 {
		m.SuperOpts = g[2]
	}
	return m, true
}

// unescape decodes the octal escapes (\040 for a space) the kernel uses in mountinfo.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Mounts returns the mount table of the calling process.
func Mounts() ([]Mount, error) {
	return MountsOf("self")
}

// MountsOf returns the mount table seen by process pid ("self" for the caller).
func MountsOf(pid string) ([]Mount, error) {
	f, err := os.Open("/proc/" + pid + "/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("sysinfo: %w", err)
	}
	defer func() { _ = f.Close() }()
	return ParseMountinfo(f)
}

// MountOf returns the mount that holds path (which must exist), as the calling process sees
// it. It asks the kernel for the mount id (statx STATX_MNT_ID) and falls back to the
// longest mount point that prefixes the resolved path.
func MountOf(path string) (Mount, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Mount{}, fmt.Errorf("sysinfo: %w", err)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	mounts, err := Mounts()
	if err != nil {
		return Mount{}, err
	}
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, abs, 0, unix.STATX_MNT_ID, &stx); err == nil && stx.Mask&unix.STATX_MNT_ID != 0 {
		for _, m := range mounts {
			if uint64(m.ID) == stx.Mnt_id {
				return m, nil
			}
		}
	}
	return longestPrefix(mounts, abs)
}

// longestPrefix picks the mount whose mount point is the longest prefix of abs; among
// equal mount points the last one (the one on top) wins.
func longestPrefix(mounts []Mount, abs string) (Mount, error) {
	best := -1
	for i, m := range mounts {
		if !within(abs, m.MountPoint) {
			continue
		}
		if best < 0 || len(m.MountPoint) >= len(mounts[best].MountPoint) {
			best = i
		}
	}
	if best < 0 {
		return Mount{}, fmt.Errorf("%w: %s", ErrNotFound, abs)
	}
	return mounts[best], nil
}

// IsMountPoint reports whether path is the mount point of a mount (the top one is
// returned).
func IsMountPoint(path string) (Mount, bool, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Mount{}, false, fmt.Errorf("sysinfo: %w", err)
	}
	mounts, err := Mounts()
	if err != nil {
		return Mount{}, false, err
	}
	var top Mount
	found := false
	for _, m := range mounts {
		if m.MountPoint == abs {
			top, found = m, true
		}
	}
	return top, found, nil
}

// within reports whether p equals dir or lies below it. Both must be clean absolute paths.
func within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// Within reports whether path p equals dir or lies below it, after cleaning both.
func Within(p, dir string) bool {
	return within(filepath.Clean(p), filepath.Clean(dir))
}

// Hostname returns the host name, or "" if it cannot be read.
func Hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// KernelRelease returns the running kernel's release (uname -r), or "".
func KernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return string(bytes.TrimRight(u.Release[:], "\x00"))
}
