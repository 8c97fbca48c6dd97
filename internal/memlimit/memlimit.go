// Package memlimit sets the Go runtime's memory limit from the memory limit of the cgroup
// the process runs in. Without it the garbage collector lets the heap grow to twice the
// live data (GOGC=100) whatever the cgroup allows: a recorder on a large job under a
// Slurm or container memory limit could be killed by the kernel for memory the collector
// would have given back. With it, the collector works harder as the heap nears the limit.
//
// The cgroup's limit is the smallest of memory.max and memory.high (cgroup v2) or
// memory.limit_in_bytes (cgroup v1 memory controller) of the process's cgroup and of each
// cgroup above it. Go is given Ratio of it: the rest is headroom for memory the runtime
// does not count (the kernel's page cache charged to the cgroup, the trace being written)
// and for the other processes of the cgroup. An explicit GOMEMLIMIT is never overridden.
package memlimit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/iotap/iotap/internal/sysinfo"
)

// Ratio is the share of the cgroup's memory limit given to Go.
const Ratio = 0.9

// Limit is a cgroup's memory limit, in bytes, and the file it was read from.
type Limit struct {
	Bytes int64
	File  string
}

// applied is what Set did (guarded by mu).
var (
	mu      sync.Mutex
	applied Limit // Bytes: the Go memory limit set; File: the cgroup file it came from
)

// Set sets Go's memory limit to Ratio of this process's cgroup memory limit, unless
// GOMEMLIMIT is set or there is no limit. It returns the limit it set (zero Limit: none),
// and the errors of cgroup files it could not read (it sets the smallest limit of the
// others).
func Set() (Limit, error) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return Limit{}, nil
	}
	cg, err := Find(readSelf("/proc/self/cgroup"), readSelf("/proc/self/mountinfo"), os.ReadFile)
	if cg.Bytes == 0 {
		return Limit{}, err
	}
	l := Limit{Bytes: int64(float64(cg.Bytes) * Ratio), File: cg.File}
	debug.SetMemoryLimit(l.Bytes)
	mu.Lock()
	applied = l
	mu.Unlock()
	return l, err
}

// Applied returns the limit Set set (zero Limit: none).
func Applied() Limit {
	mu.Lock()
	defer mu.Unlock()
	return applied
}

func readSelf(name string) []byte {
	b, _ := os.ReadFile(name)
	return b
}

// Find returns the memory limit of the cgroup described by procCgroup and mountinfo (the
// contents of /proc/self/cgroup and /proc/self/mountinfo), reading the limit files with
// read: the smallest limit of the cgroup and of those above it, in every hierarchy that has
// the memory controller (zero Limit: no limit, or no such hierarchy mounted).
func Find(procCgroup, mountinfo []byte, read func(string) ([]byte, error)) (Limit, error) {
	var best Limit
	var errs []error
	for _, h := range hierarchies(procCgroup, mountinfo) {
		files := []string{"memory.limit_in_bytes"}
		if h.v2 {
			files = []string{"memory.max", "memory.high"}
		}
		for dir := h.dir; ; dir = filepath.Dir(dir) {
			for _, f := range files {
				p := filepath.Join(dir, f)
				b, err := read(p)
				if err != nil {
					if !errors.Is(err, fs.ErrNotExist) { // the root cgroup has none
						errs = append(errs, err)
					}
					continue
				}
				n, err := parseLimit(b)
				if err != nil {
					errs = append(errs, fmt.Errorf("memlimit: %s: %w", p, err))
					continue
				}
				if n > 0 && (best.Bytes == 0 || n < best.Bytes) {
					best = Limit{Bytes: n, File: p}
				}
			}
			if dir == h.mount || len(dir) <= len(h.mount) {
				break
			}
		}
	}
	return best, errors.Join(errs...)
}

// unlimited is where a cgroup v1 limit means none: the kernel shows "no limit" as the
// largest page-aligned value (9223372036854771712 with 4 KiB pages).
const unlimited = math.MaxInt64 / 2

// parseLimit reads a limit file: a byte count, or "max" (none, returned as 0).
func parseLimit(b []byte) (int64, error) {
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("not a limit: %q", s)
	case n >= unlimited:
		return 0, nil
	}
	return n, nil
}

// hierarchy is where this process's cgroup of one hierarchy with the memory controller is.
type hierarchy struct {
	dir   string // the cgroup's directory
	mount string // where the hierarchy is mounted (dir is at or below it)
	v2    bool
}

// hierarchies finds the directories of this process's cgroups that have the memory
// controller: the cgroup v2 one, and the v1 one of the memory controller.
func hierarchies(procCgroup, mountinfo []byte) []hierarchy {
	var v2Path, v1Path string
	var hasV2, hasV1 bool
	for l := range strings.Lines(string(procCgroup)) {
		f := strings.SplitN(strings.TrimSpace(l), ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2Path, hasV2 = f[2], true
		case hasController(f[1], "memory"):
			v1Path, hasV1 = f[2], true
		}
	}
	var out []hierarchy
	seen := map[string]bool{}
	mounts, _ := sysinfo.ParseMountinfo(bytes.NewReader(mountinfo)) // unreadable: no hierarchy, no limit
	for _, m := range mounts {
		root, mnt := m.Root, m.MountPoint
		var p string
		var v2 bool
		switch {
		case m.FSType == "cgroup2" && hasV2:
			p, v2 = v2Path, true
		case m.FSType == "cgroup" && hasV1 && hasController(m.SuperOpts, "memory"):
			p = v1Path
		default:
			continue
		}
		if seen[mnt] {
			continue
		}
		seen[mnt] = true
		rel, ok := within(p, root)
		if !ok {
			continue // the cgroup is not below what this mount shows
		}
		out = append(out, hierarchy{dir: filepath.Join(mnt, rel), mount: filepath.Clean(mnt), v2: v2})
	}
	return out
}

// within returns p relative to root, if p is root or below it.
func within(p, root string) (string, bool) {
	p, root = filepath.Clean("/"+p), filepath.Clean("/"+root)
	if root == "/" {
		return p, true
	}
	if p == root {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(p, root+"/"); ok {
		return "/" + rest, true
	}
	return "", false
}

// hasController reports whether the comma-separated list has name.
func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}
