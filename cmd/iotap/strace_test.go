package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/iotap/iotap/trace/fold"
)

// An strace log (strace -f -qq -y) read back: the system calls a job made on a directory
// tree, by the kind of call iotap's per-system-call view counts them as, with the facts
// that decide which of them FUSE sees.

// straceKinds maps a system call to the kind of call iotap counts it as (fold.Syscall
// names). Calls not listed never reach a FUSE file system as a call of their own.
var straceKinds = map[string]string{}

func init() {
	for kind, names := range map[string]string{
		"open": "open openat openat2 creat", "stat": "stat lstat fstat newfstatat statx fstatat64",
		"access": "access faccessat faccessat2", "close": "close",
		"read": "read pread64 readv preadv preadv2", "write": "write pwrite64 writev pwritev pwritev2",
		"getdents": "getdents64 getdents", "readlink": "readlink readlinkat", "mkdir": "mkdir mkdirat",
		"mknod": "mknod mknodat", "unlink": "unlink unlinkat", "rmdir": "rmdir",
		"rename": "rename renameat renameat2", "link": "link linkat", "symlink": "symlink symlinkat",
		"chmod": "chmod fchmod fchmodat fchmodat2", "chown": "chown fchown lchown fchownat",
		"truncate": "truncate ftruncate", "utimes": "utimensat utime utimes futimesat",
		"fsync": "fsync", "fdatasync": "fdatasync",
		"getxattr": "getxattr lgetxattr fgetxattr", "listxattr": "listxattr llistxattr flistxattr",
		"setxattr": "setxattr lsetxattr fsetxattr", "removexattr": "removexattr lremovexattr fremovexattr",
		"lock": "flock fcntl", "copy_file_range": "copy_file_range", "fallocate": "fallocate",
		"lseek": "lseek", "statfs": "statfs fstatfs", "other": "ioctl",
		// Not counted by iotap, but they move descriptors and directories.
		"-chdir": "chdir fchdir", "-dup": "dup dup2 dup3", "-fork": "clone clone3 fork vfork", "-exec": "execve execveat",
	} {
		for _, n := range strings.Fields(names) {
			straceKinds[n] = kind
		}
	}
}

// vfsIoctls are the ioctls the kernel answers itself, before any file system sees them.
var vfsIoctls = regexp.MustCompile(`\b(FIOCLEX|FIONCLEX|FIONBIO|FIOASYNC|FIOQSIZE|FIFREEZE|FITHAW|FS_IOC_FIEMAP|FIGETBSZ|FICLONE|FICLONERANGE|FIDEDUPERANGE|FIONREAD)\b`)

// straceCall is one completed system call of the log.
type straceCall struct {
	pid     int
	name    string
	args    string
	ret     int64
	errno   string // "ENOENT" when the call failed
	retPath string // the path strace -y shows for a returned descriptor
}

var (
	straceLine = regexp.MustCompile(`^(\d+)\s+(.*)$`)
	straceRet  = regexp.MustCompile(`^\)\s+= (-?\d+|\?|0x[0-9a-f]+)(?:<(.*?)>)?(?: (E[A-Z0-9]+) \(.*\))?(?: \(.*\))?$`)
	straceName = regexp.MustCompile(`^(\w+)\((.*)$`)
)

// readStrace returns the completed calls of an strace -f log in log order, joining the
// halves strace splits when threads interleave ("<unfinished ...>", "<... resumed>").
func readStrace(t *testing.T, path string) []straceCall {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() //nolint:errcheck // read only
	pending := map[int]string{}
	var out []straceCall
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := straceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		rest := m[2]
		if strings.HasSuffix(rest, "<unfinished ...>") {
			pending[pid] = strings.TrimSuffix(rest, "<unfinished ...>")
			continue
		}
		if strings.HasPrefix(rest, "<... ") {
			i := strings.Index(rest, " resumed>")
			head, ok := pending[pid]
			if i < 0 || !ok {
				continue
			}
			delete(pending, pid)
			rest = head + rest[i+len(" resumed>"):]
		}
		if c, ok := parseStraceCall(pid, rest); ok {
			out = append(out, c)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// parseStraceCall parses "name(args) = ret" (the return is found from the end: data in
// the arguments may hold anything).
func parseStraceCall(pid int, s string) (straceCall, bool) {
	nm := straceName.FindStringSubmatch(s)
	if nm == nil {
		return straceCall{}, false
	}
	body := nm[2]
	for i := strings.LastIndex(body, ")"); i >= 0; i = strings.LastIndex(body[:i], ")") {
		r := straceRet.FindStringSubmatch(body[i:])
		if r == nil {
			continue
		}
		c := straceCall{pid: pid, name: nm[1], args: body[:i], retPath: r[2], errno: r[3]}
		c.ret, _ = strconv.ParseInt(r[1], 0, 64)
		if r[1] == "?" {
			c.ret = 0
		}
		return c, true
	}
	return straceCall{}, false
}

var (
	straceDirPath = regexp.MustCompile(`(AT_FDCWD|-?\d+)<([^>]*)>, "((?:[^"\\]|\\.)*)"`)
	straceFD      = regexp.MustCompile(`(?:^|, )(\d+)<([^>]*)>`)
	straceString  = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	procSelfFD    = regexp.MustCompile(`^/proc/self/fd/(\d+)$`)
	quoted        = regexp.MustCompile(`"(?:[^"\\]|\\.)*"(?:\.\.\.)?`)
	lockCmd       = regexp.MustCompile(`F_(OFD_)?(SETLKW?|GETLK)`)
	dupCmd        = regexp.MustCompile(`F_DUPFD`)
)

// paths returns the paths a call names: "dirfd<dir>, \"name\"" pairs joined (for the *at
// calls), descriptor arguments, and otherwise its path strings resolved against cwd (a
// symlink's target, its first string, is no path of the tree).
func (c *straceCall) paths(cwd string, fds *fdTable) []string {
	var out []string
	if strings.HasSuffix(c.name, "at") || strings.HasSuffix(c.name, "at2") || c.name == "statx" {
		for _, m := range straceDirPath.FindAllStringSubmatch(c.args, -1) {
			out = append(out, joinPath(m[2], m[3]))
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, m := range straceFD.FindAllStringSubmatch(quoted.ReplaceAllString(c.args, `""`), -1) {
		out = append(out, m[2])
	}
	if len(out) > 0 {
		return out
	}
	strs := straceString.FindAllStringSubmatch(c.args, -1)
	if c.name == "symlink" && len(strs) > 0 {
		strs = strs[1:]
	}
	for _, m := range strs {
		p := m[1]
		if fm := procSelfFD.FindStringSubmatch(p); fm != nil {
			n, _ := strconv.Atoi(fm[1])
			if d := fds.fds[n]; d != nil {
				p = d.desc.path
			}
		}
		out = append(out, joinPath(cwd, p))
	}
	return out
}

// seenByFUSE reports whether a call on the tree reaches FUSE (see countStrace).
func seenByFUSE(c *straceCall, kind string) bool {
	switch {
	case strings.HasPrefix(kind, "-"):
		return kind == "-chdir"
	case kind == "lock" && c.name == "fcntl":
		return lockCmd.MatchString(c.args)
	case kind == "lseek":
		return !strings.Contains(c.args, "SEEK_SET") && !strings.Contains(c.args, "SEEK_CUR")
	case kind == "copy_file_range":
		return c.errno != "" || c.ret != 0
	case kind == "other":
		return !vfsIoctls.MatchString(c.args)
	}
	return true
}

// relPath is path relative to root ("" for root itself).
func relPath(path, root string) string {
	if path == root {
		return ""
	}
	return strings.TrimPrefix(path, root+"/")
}

// firstUnder returns the first of paths under root.
func firstUnder(paths []string, root string) string {
	for _, p := range paths {
		if under(p, root) {
			return p
		}
	}
	return root
}

func joinPath(dir, p string) string {
	if p == "" {
		return dir
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// under reports whether path is root or below it.
func under(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}

// A descriptor table of one process (threads share one), holding the descriptors of
// files under the tree only.
type fdTable struct {
	fds map[int]*fdEntry
}

type fdEntry struct {
	desc    *openFile
	cloexec bool
}

// openFile is an open file description: FUSE releases it when its last descriptor goes.
type openFile struct {
	path  string
	refs  int
	opath bool // opened with O_PATH: the kernel only walked the path
}

// straceFacts is what a log says about the calls on a tree.
type straceFacts struct {
	calls  map[string]int            // by kind, calls FUSE can see (see countStrace)
	errnos map[string]map[string]int // by kind, failed calls by errno
	// Calls FUSE sees only as their path walk (lookups): a path call that failed with
	// ENOENT or EEXIST (a stat of a missing name too), an open with O_PATH. Each is a stat, unless the thread's next
	// call on the tree is on the same path or below and the lookups fold into it.
	lookupOnly []lookupOnly
	// Calls FUSE sees as another kind: lseek(SEEK_END) refreshes the size (a getattr: a
	// stat); chdir and fchdir ask for permission (an access).
	seekEnd, asAccess int
	// Calls FUSE does not see, by reason.
	unseen map[string]int
	// Open files: one release each, whatever the closes.
	opened, opathOpens, opathCloses int
	closes                          int // close() of tree descriptors (not O_PATH)
	extraCloses                     int // closes of one of several descriptors of a file: a flush, no release
	implicitRel                     int // files released without a close(): at exit, at exec (O_CLOEXEC), by dup2
	pids                            map[int]bool
}

// lookupOnly is a call FUSE sees as lookups only.
type lookupOnly struct {
	tid       int
	name      string // relative to the tree
	found     bool   // the lookup found the name (EEXIST, O_PATH)
	why       string // "openat ENOENT", "open O_PATH"
	nextUnder bool   // the thread's next call on the tree is on name or below
}

// straceCounter goes through a log's calls in order, following descriptors and working
// directories per process.
type straceCounter struct {
	f       *straceFacts
	root    string
	tables  map[int]*fdTable // by pid: threads share one
	cwds    map[int]*string  // by pid: CLONE_FS shares one
	pending map[int]int      // by tid: the index of the lookup-only call just before
}

// countStrace returns what the calls say about the tree at root.
func countStrace(calls []straceCall, root string) *straceFacts {
	sc := &straceCounter{
		f:    &straceFacts{calls: map[string]int{}, errnos: map[string]map[string]int{}, unseen: map[string]int{}, pids: map[int]bool{}},
		root: root, tables: map[int]*fdTable{}, cwds: map[int]*string{}, pending: map[int]int{},
	}
	for i := range calls {
		sc.call(&calls[i])
	}
	// Processes end: their descriptors close without a close().
	seen := map[*fdTable]bool{}
	for _, tb := range sc.tables {
		if !seen[tb] {
			seen[tb] = true
			for _, e := range tb.fds {
				sc.drop(e, false)
			}
		}
	}
	return sc.f
}

func (sc *straceCounter) table(pid int) *fdTable {
	if sc.tables[pid] == nil {
		sc.tables[pid] = &fdTable{fds: map[int]*fdEntry{}}
	}
	return sc.tables[pid]
}

func (sc *straceCounter) cwd(pid int) *string {
	if sc.cwds[pid] == nil {
		r := sc.root
		sc.cwds[pid] = &r
	}
	return sc.cwds[pid]
}

// drop lets go of a descriptor: a close() (explicit) or an exit, exec or dup2.
func (sc *straceCounter) drop(e *fdEntry, explicit bool) {
	e.desc.refs--
	switch {
	case e.desc.opath:
	case e.desc.refs > 0 && explicit:
		sc.f.extraCloses++
	case e.desc.refs == 0 && !explicit:
		sc.f.implicitRel++
	}
}

// dup makes descriptor to (of the call's process) another descriptor of from's file.
func (sc *straceCounter) dup(fds *fdTable, from, to int, cloexec bool) {
	e := fds.fds[from]
	if e == nil {
		return
	}
	if prev := fds.fds[to]; prev != nil && to != from {
		sc.drop(prev, false) // dup2 onto an open descriptor closes it
	}
	e.desc.refs++
	fds.fds[to] = &fdEntry{desc: e.desc, cloexec: cloexec}
}

// call takes one call.
func (sc *straceCounter) call(c *straceCall) {
	sc.f.pids[c.pid] = true
	kind, ok := straceKinds[c.name]
	if !ok {
		return
	}
	fds := sc.table(c.pid)
	ps := c.paths(*sc.cwd(c.pid), fds)
	if strings.HasPrefix(kind, "-") {
		sc.process(c, kind, fds, ps)
		return
	}
	onTree := c.retPath != "" && under(c.retPath, sc.root)
	for _, p := range ps {
		onTree = onTree || under(p, sc.root)
	}
	if !onTree {
		return
	}
	if i, ok := sc.pending[c.pid]; ok && seenByFUSE(c, kind) {
		l := &sc.f.lookupOnly[i]
		for _, p := range ps {
			l.nextUnder = l.nextUnder || (under(p, sc.root) && fold.IsUnder(relPath(p, sc.root), l.name))
		}
		delete(sc.pending, c.pid)
	}
	if c.name == "unlinkat" && strings.Contains(c.args, "AT_REMOVEDIR") {
		kind = "rmdir"
	}
	if sc.onTree(c, kind, fds, ps) {
		sc.f.calls[kind]++
		if c.errno != "" {
			if sc.f.errnos[kind] == nil {
				sc.f.errnos[kind] = map[string]int{}
			}
			sc.f.errnos[kind][c.errno]++
		}
	}
}

// process follows the calls that change a process's descriptors or directory.
func (sc *straceCounter) process(c *straceCall, kind string, fds *fdTable, ps []string) {
	switch {
	case c.errno != "":
	case kind == "-fork" && c.ret > 0:
		child := int(c.ret)
		if strings.Contains(c.args, "CLONE_FILES") {
			sc.tables[child] = fds
		} else {
			cp := &fdTable{fds: map[int]*fdEntry{}}
			for n, e := range fds.fds {
				e.desc.refs++
				cp.fds[n] = &fdEntry{desc: e.desc, cloexec: e.cloexec}
			}
			sc.tables[child] = cp
		}
		d := *sc.cwd(c.pid)
		sc.cwds[child] = &d
		if strings.Contains(c.args, "CLONE_FS") {
			sc.cwds[child] = sc.cwd(c.pid)
		}
	case kind == "-exec":
		for n, e := range fds.fds {
			if e.cloexec {
				sc.drop(e, false)
				delete(fds.fds, n)
			}
		}
	case kind == "-dup" && len(ps) > 0 && under(ps[0], sc.root):
		n, _ := strconv.Atoi(straceFD.FindStringSubmatch(c.args)[1])
		sc.dup(fds, n, int(c.ret), strings.Contains(c.args, "O_CLOEXEC"))
	case kind == "-chdir" && len(ps) > 0:
		*sc.cwd(c.pid) = ps[0]
		if under(ps[0], sc.root) {
			sc.f.asAccess++
		}
	}
}

// onTree takes a call on the tree, and reports whether FUSE sees it as a call of its kind.
func (sc *straceCounter) onTree(c *straceCall, kind string, fds *fdTable, ps []string) bool {
	f := sc.f
	switch {
	case kind == "lock" && c.name == "fcntl" && !lockCmd.MatchString(c.args):
		if dupCmd.MatchString(c.args) && c.errno == "" {
			n, _ := strconv.Atoi(straceFD.FindStringSubmatch(c.args)[1])
			sc.dup(fds, n, int(c.ret), strings.Contains(c.args, "CLOEXEC"))
		}
		f.unseen["fcntl (not a lock)"]++
		return false
	case c.errno == "ENOENT" || c.errno == "EEXIST",
		kind == "open" && strings.Contains(c.args, "O_PATH") && c.errno == "":
		l := lookupOnly{tid: c.pid, name: relPath(firstUnder(ps, sc.root), sc.root), found: c.errno != "ENOENT", why: c.name + " " + c.errno}
		if c.errno == "" {
			l.why = c.name + " O_PATH"
			f.opathOpens++
			fds.fds[int(c.ret)] = &fdEntry{desc: &openFile{path: c.retPath, refs: 1, opath: true}, cloexec: strings.Contains(c.args, "O_CLOEXEC")}
		}
		f.lookupOnly = append(f.lookupOnly, l)
		sc.pending[c.pid] = len(f.lookupOnly) - 1
		return false
	case kind == "open" && c.errno == "":
		f.opened++
		fds.fds[int(c.ret)] = &fdEntry{desc: &openFile{path: c.retPath, refs: 1}, cloexec: strings.Contains(c.args, "O_CLOEXEC")}
	case kind == "close":
		n, _ := strconv.Atoi(straceFD.FindStringSubmatch(c.args)[1])
		if e := fds.fds[n]; e != nil {
			delete(fds.fds, n)
			if e.desc.opath {
				f.opathCloses++
			} else {
				f.closes++
			}
			sc.drop(e, true)
		}
		return false // counted by open files
	case kind == "lseek" && strings.Contains(c.args, "SEEK_END"):
		f.seekEnd++
		return false
	case kind == "lseek" && !strings.Contains(c.args, "SEEK_DATA") && !strings.Contains(c.args, "SEEK_HOLE"):
		f.unseen["lseek (SEEK_SET, SEEK_CUR)"]++
		return false
	case kind == "copy_file_range" && c.errno == "" && c.ret == 0:
		f.unseen["copy_file_range at the end of the input"]++
		return false
	case kind == "other" && vfsIoctls.MatchString(c.args):
		f.unseen["ioctl the kernel answers itself (FICLONE, FIONREAD...)"]++
		return false
	}
	return true
}
