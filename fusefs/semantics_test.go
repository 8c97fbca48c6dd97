package fusefs_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
)

// TestNativeSemantics: each operation, run by a real process as an unprivileged user (or as
// root) through an allow_other mount in both cache modes, returns what it returns natively
// on a directory of the same file system, and leaves the same object behind (mode, owner,
// group, size, links, device). Cases: modes with set-user-ID, set-group-ID and no
// permission at all on create, mkdir, mknod and O_TMPFILE under umask 0 and 022; set-group-ID
// directories; supplementary groups; another user's 0000 file; sticky directories; chmod,
// chown, truncate and utimes by a non-owner; hard links under protected_hardlinks;
// set-user-ID programs and device nodes as the directory's mount allows them; attributes
// of symlinks through stat and statx; extended attributes; and link, mknod,
// symlink, truncate, rename and friends on paths of 4,000+ bytes made of 255-byte
// components and below a directory deeper than PATH_MAX. With -v the test prints the table
// (operation, case, cache mode, native result, result through the mount).
func TestNativeSemantics(t *testing.T) { asOtherUser(t, nativeSemantics) }

const (
	nobody   = 65534
	other    = 65533
	auxGroup = 4242 // a group nobody is in, unless a case gives it
)

// longComp is a 255-byte path component (NAME_MAX) ending in c.
func longComp(c byte) string { return strings.Repeat("x", 254) + string(c) }

// longDir is a chain of 15 such components (3,840 bytes): with the prefix and a long file
// name, paths below it are 4,000+ bytes, under PATH_MAX only relative to the mount root.
var longDir = func() string {
	var parts []string
	for i := range 15 {
		parts = append(parts, longComp(byte('a'+i)))
	}
	return "w/" + strings.Join(parts, "/")
}()

// deepDir is a chain of 20 such components (5,120 bytes): deeper than one path can name
// from the mount root. Cases below it change into it first, one component at a time.
var deepDir = func() string {
	var parts []string
	for i := range 20 {
		parts = append(parts, longComp(byte('a'+i)))
	}
	return "w/" + strings.Join(parts, "/")
}()

// semCase is one operation run as one user.
type semCase struct {
	op, name string
	uid      uint32   // the process's uid and gid
	groups   []uint32 // its supplementary groups
	umask    int
	setup    func(root string, i int) error // as root, on the native and the backing directory (i: the case number)
	cd       string                         // directory (relative to the root) to change into first, component by component
	args     []string                       // the operation and its arguments (relative to cd)
	result   string                         // what to describe afterwards (relative to the root; "" = none)
}

func nativeSemantics(t *testing.T, cache fusefs.CacheMode) {
	native, c := otherUserCase(t, cache, fusetest.NewMemRecorder(0))
	bin := exportBinary(t, filepath.Dir(native))
	for _, root := range []string{native, c.Orig} {
		if err := semBase(root); err != nil {
			t.Fatal(err)
		}
	}
	for i, tc := range semCases() {
		t.Run(tc.op+"/"+tc.name, func(t *testing.T) {
			var got [2]string
			for j, side := range []struct{ view, back string }{{native, native}, {c.Mnt, c.Orig}} {
				if tc.setup != nil {
					if err := tc.setup(side.back, i); err != nil {
						t.Fatalf("setup in %s: %v", side.back, err)
					}
				}
				out := runSemOp(t, bin, side.view, tc, i)
				back := "-"
				if tc.result != "" {
					back = describeAt(side.back, expand(tc.result, i))
				}
				got[j] = out + " | backing: " + back
			}
			t.Logf("TABLE\t%s\t%s\t%s\t%s\t%s", tc.op, tc.name, cache, short(got[0]), short(got[1]))
			if got[0] != got[1] {
				t.Errorf("natively: %s\nthrough the mount: %s", short(got[0]), short(got[1]))
			}
		})
	}
}

// semBase makes the directories every case uses, in root: w (everyone may create),
// g (set-group-ID, group auxGroup), grp (0770, group auxGroup), sticky (01777), and the
// long and deep chains below w.
func semBase(root string) error {
	for _, d := range []struct {
		name string
		mode os.FileMode
		gid  int
	}{{"w", 0o777, 0}, {"g", 0o777 | os.ModeSetgid, auxGroup}, {"grp", 0o770, auxGroup}, {"sticky", 0o777 | os.ModeSticky, 0}} {
		p := filepath.Join(root, d.name)
		if err := os.Mkdir(p, 0); err != nil {
			return err
		}
		if err := os.Chown(p, 0, d.gid); err != nil {
			return err
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return err
		}
	}
	for _, chain := range []string{longDir, deepDir} {
		if err := mkdirChain(root, chain); err != nil {
			return err
		}
	}
	return nil
}

// mkdirChain makes the directories of rel (relative to root), each 0777, walking with
// descriptors so that the path may exceed PATH_MAX.
func mkdirChain(root, rel string) error {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	for comp := range strings.SplitSeq(rel, "/") {
		if err := unix.Mkdirat(dir, comp, 0o777); err != nil && err != unix.EEXIST {
			_ = unix.Close(dir)
			return fmt.Errorf("mkdir %.20s…: %w", comp, err)
		}
		if err := unix.Fchmodat(dir, comp, 0o777, 0); err != nil {
			_ = unix.Close(dir)
			return err
		}
		next, err := unix.Openat(dir, comp, unix.O_PATH|unix.O_DIRECTORY, 0)
		_ = unix.Close(dir)
		if err != nil {
			return err
		}
		dir = next
	}
	return unix.Close(dir)
}

// openParent returns a descriptor of the directory holding rel (below root) and rel's last
// component, walking component by component.
func openParent(root, rel string) (int, string, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, "", err
	}
	parts := strings.Split(rel, "/")
	for _, comp := range parts[:len(parts)-1] {
		next, err := unix.Openat(dir, comp, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		_ = unix.Close(dir)
		if err != nil {
			return -1, "", err
		}
		dir = next
	}
	return dir, parts[len(parts)-1], nil
}

// describeAt describes the object at rel below root as root sees it.
func describeAt(root, rel string) string {
	dir, name, err := openParent(root, rel)
	if err != nil {
		return "parent " + errName(err)
	}
	defer func() { _ = unix.Close(dir) }()
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return errName(err)
	}
	return describe(&st)
}

func describe(st *unix.Stat_t) string {
	s := fmt.Sprintf("mode=%07o uid=%d gid=%d nlink=%d", st.Mode, st.Uid, st.Gid, st.Nlink)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG, unix.S_IFLNK:
		s += fmt.Sprintf(" size=%d", st.Size)
	case unix.S_IFCHR, unix.S_IFBLK:
		s += fmt.Sprintf(" rdev=%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	return s
}

func errName(err error) string {
	if e, ok := err.(syscall.Errno); ok {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

// short abbreviates the long path components in s.
func short(s string) string { return strings.ReplaceAll(s, strings.Repeat("x", 254), "…") }

// expand replaces %d in s with the case number (so that each case has names of its own).
func expand(s string, i int) string { return strings.ReplaceAll(s, "%d", strconv.Itoa(i)) }

// mkfile is a setup step: a file at rel (below root) with data, owner, group and mode.
func mkfile(rel, data string, uid, gid int, mode os.FileMode) func(root string, i int) error {
	return func(root string, i int) error {
		dir, name, err := openParent(root, expand(rel, i))
		if err != nil {
			return err
		}
		defer func() { _ = unix.Close(dir) }()
		fd, err := unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer func() { _ = unix.Close(fd) }()
		if _, err := unix.Write(fd, []byte(data)); err != nil {
			return err
		}
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return err
		}
		return unix.Fchmod(fd, uint32(mode.Perm())|modeBits(mode))
	}
}

// mkdirAs is a setup step: a directory at rel (below root) with owner, group and mode.
func mkdirAs(rel string, uid, gid int, mode os.FileMode) func(root string, i int) error {
	return func(root string, i int) error {
		p := filepath.Join(root, expand(rel, i))
		if err := os.Mkdir(p, 0); err != nil {
			return err
		}
		if err := os.Chown(p, uid, gid); err != nil {
			return err
		}
		return unix.Chmod(p, uint32(mode.Perm())|modeBits(mode))
	}
}

// mknodAs is a setup step: a device node at rel (below root) owned by root.
func mknodAs(rel string, mode uint32, dev uint64) func(root string, i int) error {
	return func(root string, i int) error {
		p := filepath.Join(root, expand(rel, i))
		if err := unix.Mknod(p, mode, int(dev)); err != nil {
			return err
		}
		return unix.Chmod(p, mode&0o7777)
	}
}

func modeBits(m os.FileMode) uint32 {
	var b uint32
	if m&os.ModeSetuid != 0 {
		b |= unix.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		b |= unix.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		b |= unix.S_ISVTX
	}
	return b
}

func semCases() []semCase {
	var cs []semCase
	add := func(c semCase) { cs = append(cs, c) }
	// Modes on create, mkdir, mknod and O_TMPFILE, by an unprivileged user and by root.
	for _, who := range []uint32{nobody, 0} {
		for _, umask := range []int{0, 0o22} {
			for _, mode := range []string{"0000", "0620", "0642", "04777", "02777", "0666", "01777"} {
				name := fmt.Sprintf("uid %d umask %03o mode %s", who, umask, mode)
				add(semCase{op: "create", name: name, uid: who, umask: umask, args: []string{"create", "w/c%d", mode}, result: "w/c%d"})
				add(semCase{op: "mkdir", name: name, uid: who, umask: umask, args: []string{"mkdir", "w/d%d", mode}, result: "w/d%d"})
			}
			name := fmt.Sprintf("uid %d umask %03o", who, umask)
			add(semCase{op: "mknod fifo", name: name + " mode 0666", uid: who, umask: umask, args: []string{"mknod", "w/p%d", "fifo", "0666"}, result: "w/p%d"})
			add(semCase{op: "mknod char", name: name + " 1:3", uid: who, umask: umask, args: []string{"mknod", "w/ch%d", "char", "0666", "1", "3"}, result: "w/ch%d"})
			add(semCase{op: "mknod block", name: name + " 7:0", uid: who, umask: umask, args: []string{"mknod", "w/bl%d", "block", "0660", "7", "0"}, result: "w/bl%d"})
			add(semCase{op: "tmpfile+link", name: name + " mode 0664", uid: who, umask: umask, args: []string{"tmpfile", "w", "0664", "w/t%d"}, result: "w/t%d"})
			add(semCase{op: "symlink", name: name, uid: who, umask: umask, args: []string{"symlink", "target", "w/s%d"}, result: "w/s%d"})
		}
	}
	// Set-group-ID directories and supplementary groups.
	for _, c := range []struct {
		name   string
		groups []uint32
	}{{"not in the group", nil}, {"in the group", []uint32{auxGroup}}} {
		add(semCase{op: "create", name: "in set-group-ID dir, 02777, " + c.name, uid: nobody, groups: c.groups, args: []string{"create", "g/c%d", "02777"}, result: "g/c%d"})
		add(semCase{op: "mkdir", name: "in set-group-ID dir, 0755, " + c.name, uid: nobody, groups: c.groups, args: []string{"mkdir", "g/d%d", "0755"}, result: "g/d%d"})
		add(semCase{op: "mknod fifo", name: "in set-group-ID dir, " + c.name, uid: nobody, groups: c.groups, args: []string{"mknod", "g/p%d", "fifo", "0666"}, result: "g/p%d"})
		add(semCase{op: "create", name: "in a 0770 dir of the group, " + c.name, uid: other, groups: c.groups, args: []string{"create", "grp/c%d", "0644"}, result: "grp/c%d"})
		add(semCase{op: "chmod g+s", name: "own file of the group, " + c.name, uid: nobody, groups: c.groups,
			setup: mkfile("w/m%d", "x", nobody, auxGroup, 0o644), args: []string{"chmod", "w/m%d", "02755"}, result: "w/m%d"})
	}
	// Another user's files.
	for _, who := range []uint32{other, nobody, 0} {
		name := fmt.Sprintf("mode 0000 owned by %d, opened by %d", nobody, who)
		add(semCase{op: "open O_RDONLY", name: name, uid: who, setup: mkfile("w/z%d", "secret", nobody, nobody, 0), args: []string{"open", "w/z%d", "r"}, result: "w/z%d"})
		add(semCase{op: "open O_WRONLY", name: name, uid: who, setup: mkfile("w/z%d", "secret", nobody, nobody, 0), args: []string{"open", "w/z%d", "w"}, result: "w/z%d"})
		add(semCase{op: "opendir", name: fmt.Sprintf("dir mode 0000 owned by %d, by %d", nobody, who), uid: who, setup: mkdirAs("w/zd%d", nobody, nobody, 0), args: []string{"list", "w/zd%d"}, result: "w/zd%d"})
	}
	add(semCase{op: "open O_RDONLY", name: "0640 file of auxGroup, by a member", uid: other, groups: []uint32{auxGroup},
		setup: mkfile("w/r%d", "x", 0, auxGroup, 0o640), args: []string{"open", "w/r%d", "r"}, result: "w/r%d"})
	add(semCase{op: "unlink", name: "another user's file in a sticky dir", uid: other, setup: mkfile("sticky/u%d", "x", nobody, nobody, 0o666), args: []string{"unlink", "sticky/u%d"}, result: "sticky/u%d"})
	add(semCase{op: "unlink", name: "own file in a sticky dir", uid: nobody, setup: mkfile("sticky/u%d", "x", nobody, nobody, 0o600), args: []string{"unlink", "sticky/u%d"}, result: "sticky/u%d"})
	add(semCase{op: "rename", name: "another user's file in a sticky dir", uid: other, setup: mkfile("sticky/v%d", "x", nobody, nobody, 0o666), args: []string{"rename", "sticky/v%d", "sticky/v%d.new"}, result: "sticky/v%d"})
	add(semCase{op: "chmod", name: "by a non-owner", uid: other, setup: mkfile("w/n%d", "x", nobody, nobody, 0o666), args: []string{"chmod", "w/n%d", "0777"}, result: "w/n%d"})
	add(semCase{op: "chown", name: "by the owner to root", uid: nobody, setup: mkfile("w/o%d", "x", nobody, nobody, 0o644), args: []string{"chown", "w/o%d", "0", "-1"}, result: "w/o%d"})
	add(semCase{op: "chown", name: "by root, setuid file", uid: 0, setup: mkfile("w/o%d", "x", nobody, nobody, 0o4755), args: []string{"chown", "w/o%d", strconv.Itoa(other), "-1"}, result: "w/o%d"})
	add(semCase{op: "truncate", name: "by a non-owner without write permission", uid: other, setup: mkfile("w/q%d", "0123456789", nobody, nobody, 0o644), args: []string{"truncate", "w/q%d", "3"}, result: "w/q%d"})
	add(semCase{op: "truncate", name: "by a non-owner with write permission", uid: other, setup: mkfile("w/q%d", "0123456789", nobody, nobody, 0o666), args: []string{"truncate", "w/q%d", "3"}, result: "w/q%d"})
	add(semCase{op: "utimes now", name: "by a non-owner with write permission", uid: other, setup: mkfile("w/y%d", "x", nobody, nobody, 0o666), args: []string{"utimes", "w/y%d", "now"}, result: "w/y%d"})
	add(semCase{op: "utimes explicit", name: "by a non-owner with write permission", uid: other, setup: mkfile("w/y%d", "x", nobody, nobody, 0o666), args: []string{"utimes", "w/y%d", "1000"}, result: "w/y%d"})
	add(semCase{op: "link", name: "root's 0600 file, protected_hardlinks", uid: nobody, setup: mkfile("w/h%d", "x", 0, 0, 0o600), args: []string{"link", "w/h%d", "w/h%d.link"}, result: "w/h%d"})
	add(semCase{op: "link", name: "own file", uid: nobody, setup: mkfile("w/h%d", "x", nobody, nobody, 0o600), args: []string{"link", "w/h%d", "w/h%d.link"}, result: "w/h%d"})
	// What the mount lets through: set-user-ID programs and device nodes, as the
	// directory's own mount does.
	if id, err := os.ReadFile("/usr/bin/id"); err == nil {
		add(semCase{op: "exec", name: "set-user-ID root program, by another user", uid: nobody,
			setup: mkfile("w/id%d", string(id), 0, 0, 0o755|os.ModeSetuid), args: []string{"run", "./w/id%d", "-u"}, result: "w/id%d"})
	}
	add(semCase{op: "open O_WRONLY", name: "char device 1:3", uid: nobody, setup: mknodAs("w/null%d", unix.S_IFCHR|0o666, unix.Mkdev(1, 3)),
		args: []string{"write", "w/null%d"}, result: "w/null%d"})
	// Attributes of a symlink (stat with and without the birth time) and of an open file.
	add(semCase{op: "lstat", name: "symlink", uid: 0, setup: mkfile("w/lt%d", "0123456789", 0, 0, 0o640), args: []string{"symlink", "lt%d", "w/ls%d", "then", "lstat", "w/ls%d"}, result: "w/ls%d"})
	add(semCase{op: "statx btime", name: "symlink", uid: 0, setup: mkfile("w/lt%d", "0123456789", 0, 0, 0o640), args: []string{"symlink", "lt%d", "w/ls%d", "then", "statx", "w/ls%d"}, result: "w/ls%d"})
	add(semCase{op: "statx btime", name: "open file (fstatx)", uid: 0, setup: mkfile("w/lf%d", "0123456789", 0, 0, 0o640), args: []string{"fstatx", "w/lf%d"}, result: "w/lf%d"})
	add(semCase{op: "xattr", name: "user.* on own file", uid: nobody, setup: mkfile("w/x%d", "x", nobody, nobody, 0o644), args: []string{"xattr", "w/x%d"}, result: "w/x%d"})
	add(semCase{op: "xattr", name: "user.* on another's file", uid: other, setup: mkfile("w/x%d", "x", nobody, nobody, 0o644), args: []string{"xattr", "w/x%d"}, result: "w/x%d"})
	// Long paths: 4,000+ bytes relative to the root (each component 255 bytes).
	L := longDir + "/" + longComp('L')[:240] // with the suffixes below, 4,086-4,088 bytes
	add(semCase{op: "create", name: "4,000+-byte path", uid: nobody, umask: 0o22, args: []string{"create", L + "c%d", "0640"}, result: L + "c%d"})
	add(semCase{op: "mkdir", name: "4,000+-byte path", uid: nobody, args: []string{"mkdir", L + "d%d", "0750"}, result: L + "d%d"})
	add(semCase{op: "mknod fifo", name: "4,000+-byte path", uid: nobody, args: []string{"mknod", L + "p%d", "fifo", "0600"}, result: L + "p%d"})
	add(semCase{op: "mknod char", name: "4,000+-byte path", uid: 0, args: []string{"mknod", L + "ch%d", "char", "0600", "1", "3"}, result: L + "ch%d"})
	add(semCase{op: "mknod block", name: "4,000+-byte path", uid: 0, args: []string{"mknod", L + "bl%d", "block", "0600", "7", "0"}, result: L + "bl%d"})
	add(semCase{op: "symlink", name: "4,000+-byte path", uid: nobody, args: []string{"symlink", "t", L + "s%d", "then", "readlink", L + "s%d"}, result: L + "s%d"})
	add(semCase{op: "link", name: "4,000+-byte paths", uid: nobody, setup: mkfile(L+"h%d", "x", nobody, nobody, 0o644), args: []string{"link", L + "h%d", L + "h%d.l"}, result: L + "h%d.l"})
	add(semCase{op: "rename", name: "4,000+-byte paths", uid: nobody, setup: mkfile(L+"r%d", "x", nobody, nobody, 0o644), args: []string{"rename", L + "r%d", L + "r%d.n"}, result: L + "r%d.n"})
	add(semCase{op: "truncate", name: "4,000+-byte path", uid: nobody, setup: mkfile(L+"q%d", "0123456789", nobody, nobody, 0o644), args: []string{"truncate", L + "q%d", "4"}, result: L + "q%d"})
	add(semCase{op: "chmod", name: "4,000+-byte path", uid: nobody, setup: mkfile(L+"m%d", "x", nobody, nobody, 0o644), args: []string{"chmod", L + "m%d", "0600"}, result: L + "m%d"})
	add(semCase{op: "utimes explicit", name: "4,000+-byte path", uid: nobody, setup: mkfile(L+"y%d", "x", nobody, nobody, 0o644), args: []string{"utimes", L + "y%d", "1000"}, result: L + "y%d"})
	add(semCase{op: "xattr", name: "4,000+-byte path", uid: nobody, setup: mkfile(L+"x%d", "x", nobody, nobody, 0o644), args: []string{"xattr", L + "x%d"}, result: L + "x%d"})
	add(semCase{op: "statx btime", name: "4,000+-byte path", uid: nobody, setup: mkfile(L+"t%d", "0123", nobody, nobody, 0o644), args: []string{"statx", L + "t%d"}, result: L + "t%d"})
	add(semCase{op: "open O_RDONLY", name: "4,000+-byte path", uid: nobody, setup: mkfile(L+"o%d", "0123", nobody, nobody, 0o644), args: []string{"open", L + "o%d", "r"}, result: L + "o%d"})
	add(semCase{op: "unlink", name: "4,000+-byte path", uid: nobody, setup: mkfile(L+"u%d", "x", nobody, nobody, 0o644), args: []string{"unlink", L + "u%d"}, result: L + "u%d"})
	add(semCase{op: "tmpfile+link", name: "4,000+-byte path", uid: nobody, args: []string{"tmpfile", longDir, "0600", L + "tl%d"}, result: L + "tl%d"})
	// Below a directory deeper than PATH_MAX: the process works relative to it.
	D := deepDir + "/"
	for _, c := range []semCase{
		{op: "create", args: []string{"create", "c%d", "0644"}, result: "c%d"},
		{op: "mkdir", args: []string{"mkdir", "d%d", "0755"}, result: "d%d"},
		{op: "mknod fifo", args: []string{"mknod", "p%d", "fifo", "0644"}, result: "p%d"},
		{op: "symlink", args: []string{"symlink", "t", "s%d", "then", "readlink", "s%d"}, result: "s%d"},
		{op: "link", setup: mkfile(D+"h%d", "x", nobody, nobody, 0o644), args: []string{"link", "h%d", "h%d.l"}, result: "h%d.l"},
		{op: "rename", setup: mkfile(D+"r%d", "x", nobody, nobody, 0o644), args: []string{"rename", "r%d", "r%d.n"}, result: "r%d.n"},
		{op: "truncate", setup: mkfile(D+"q%d", "0123456789", nobody, nobody, 0o644), args: []string{"truncate", "q%d", "2"}, result: "q%d"},
		{op: "xattr", setup: mkfile(D+"x%d", "x", nobody, nobody, 0o644), args: []string{"xattr", "x%d"}, result: "x%d"},
		{op: "statx btime", setup: mkfile(D+"t%d", "0123", nobody, nobody, 0o644), args: []string{"statx", "t%d"}, result: "t%d"},
		{op: "statfs", args: []string{"statfs", "."}, result: ""},
		{op: "unlink", setup: mkfile(D+"u%d", "x", nobody, nobody, 0o644), args: []string{"unlink", "u%d"}, result: "u%d"},
		{op: "tmpfile+link", args: []string{"tmpfile", ".", "0640", "tl%d"}, result: "tl%d"},
	} {
		c.name, c.uid, c.cd = "below a 5,120-byte directory", nobody, deepDir
		if c.result != "" {
			c.result = D + c.result
		}
		add(c)
	}
	return cs
}

// exportBinary copies the test binary into dir, where other users may run it (the go
// tool's build directory is root's alone).
func exportBinary(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "fusefs.test")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// runSemOp runs case tc (number i) in a child process (the test binary bin) in root and
// returns what it printed.
func runSemOp(t *testing.T, bin, root string, tc semCase, i int) string {
	t.Helper()
	args := make([]string, len(tc.args))
	for k, a := range tc.args {
		args[k] = expand(a, i)
	}
	// The child changes into root itself (semOpWorkload), not through cmd.Dir: a chdir
	// between fork and exec would send a request to this process's own mount while the
	// forking thread holds its P, and a garbage collection starting then could not stop it.
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), workloadEnv+"=semop", workloadEnv+"_DIR="+root,
		"IOTAP_SEM_UMASK="+strconv.Itoa(tc.umask), "IOTAP_SEM_CD="+tc.cd, "IOTAP_SEM_ARGS="+strings.Join(args, "\x1f"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tc.uid, Gid: tc.uid, Groups: tc.groups}}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s in %s: %v: %s", short(strings.Join(args, " ")), root, err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

func init() { workloads["semop"] = semOpWorkload }

// semOpWorkload runs one operation (IOTAP_SEM_ARGS, NUL-separated; "then" starts a second
// one; unit separators between arguments) in the current directory after changing into IOTAP_SEM_CD, under umask
// IOTAP_SEM_UMASK, and prints each operation's result.
func semOpWorkload(root string) error {
	if err := os.Chdir(root); err != nil {
		return err
	}
	umask, _ := strconv.Atoi(os.Getenv("IOTAP_SEM_UMASK"))
	syscall.Umask(umask)
	if cd := os.Getenv("IOTAP_SEM_CD"); cd != "" {
		for comp := range strings.SplitSeq(cd, "/") {
			if err := os.Chdir(comp); err != nil {
				return err
			}
		}
	}
	args := strings.Split(os.Getenv("IOTAP_SEM_ARGS"), "\x1f")
	var res []string
	for len(args) > 0 {
		n := len(args)
		for k, a := range args {
			if a == "then" {
				n = k
				break
			}
		}
		res = append(res, semOp(args[:n]))
		args = args[min(n+1, len(args)):]
	}
	fmt.Println(strings.Join(res, "; "))
	return nil
}

func semOp(a []string) string {
	mode := func(s string) uint32 {
		m, _ := strconv.ParseUint(s, 8, 32)
		return uint32(m)
	}
	errs := func(err error) string {
		if err != nil {
			return errName(err)
		}
		return "ok"
	}
	switch a[0] {
	case "create":
		fd, err := unix.Open(a[1], unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, mode(a[2]))
		if err == nil {
			var st unix.Stat_t
			err = unix.Fstat(fd, &st)
			_ = unix.Close(fd)
			if err == nil {
				return "ok fstat " + describe(&st)
			}
		}
		return errs(err)
	case "mkdir":
		return errs(unix.Mkdir(a[1], mode(a[2])))
	case "mknod":
		typ := map[string]uint32{"fifo": unix.S_IFIFO, "char": unix.S_IFCHR, "block": unix.S_IFBLK}[a[2]]
		var dev int
		if len(a) > 4 {
			ma, _ := strconv.Atoi(a[4])
			mi, _ := strconv.Atoi(a[5])
			dev = int(unix.Mkdev(uint32(ma), uint32(mi)))
		}
		return errs(unix.Mknod(a[1], typ|mode(a[3]), dev))
	case "symlink":
		return errs(unix.Symlink(a[1], a[2]))
	case "readlink":
		buf := make([]byte, 256)
		n, err := unix.Readlink(a[1], buf)
		if err != nil {
			return errs(err)
		}
		return "ok " + string(buf[:n])
	case "link":
		return errs(unix.Link(a[1], a[2]))
	case "rename":
		return errs(unix.Rename(a[1], a[2]))
	case "unlink":
		return errs(unix.Unlink(a[1]))
	case "truncate":
		n, _ := strconv.ParseInt(a[2], 10, 64)
		return errs(unix.Truncate(a[1], n))
	case "chmod":
		return errs(unix.Chmod(a[1], mode(a[2])))
	case "chown":
		u, _ := strconv.Atoi(a[2])
		g, _ := strconv.Atoi(a[3])
		return errs(unix.Chown(a[1], u, g))
	case "utimes":
		if a[2] == "now" {
			return errs(unix.UtimesNanoAt(unix.AT_FDCWD, a[1], nil, 0))
		}
		s, _ := strconv.ParseInt(a[2], 10, 64)
		ts := []unix.Timespec{{Sec: s}, {Sec: s}}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, a[1], ts, 0); err != nil {
			return errs(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(a[1], &st); err != nil {
			return errs(err)
		}
		return fmt.Sprintf("ok mtime=%d", st.Mtim.Sec)
	case "open":
		fl := unix.O_RDONLY
		if a[2] == "w" {
			fl = unix.O_WRONLY
		}
		fd, err := unix.Open(a[1], fl, 0)
		if err != nil {
			return errs(err)
		}
		buf := make([]byte, 64)
		n, err := unix.Read(fd, buf)
		_ = unix.Close(fd)
		if err != nil {
			return "open ok, read " + errs(err)
		}
		return "ok read " + string(buf[:n])
	case "list":
		ents, err := os.ReadDir(a[1])
		if err != nil {
			return errs(err.(*os.PathError).Err)
		}
		return fmt.Sprintf("ok %d entries", len(ents))
	case "lstat":
		var st unix.Stat_t
		if err := unix.Lstat(a[1], &st); err != nil {
			return errs(err)
		}
		return "ok " + describe(&st)
	case "statx", "fstatx":
		var x unix.Statx_t
		var err error
		if a[0] == "statx" {
			err = unix.Statx(unix.AT_FDCWD, a[1], unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x)
		} else {
			fd, oerr := unix.Open(a[1], unix.O_RDONLY, 0)
			if oerr != nil {
				return errs(oerr)
			}
			err = unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x)
			_ = unix.Close(fd)
		}
		if err != nil {
			return errs(err)
		}
		return fmt.Sprintf("ok mode=%07o uid=%d gid=%d size=%d nlink=%d btime=%v", x.Mode, x.Uid, x.Gid, x.Size, x.Nlink, x.Mask&unix.STATX_BTIME != 0)
	case "xattr":
		set := errs(unix.Setxattr(a[1], "user.iotap", []byte("value"), 0))
		buf := make([]byte, 64)
		n, err := unix.Getxattr(a[1], "user.iotap", buf)
		get := errs(err)
		if err == nil {
			get = "ok " + string(buf[:n])
		}
		ln, err := unix.Listxattr(a[1], buf)
		list := errs(err)
		if err == nil {
			list = fmt.Sprintf("ok %q", buf[:ln])
		}
		rm := errs(unix.Removexattr(a[1], "user.iotap"))
		return "set " + set + ", get " + get + ", list " + list + ", remove " + rm
	case "tmpfile":
		fd, err := unix.Open(a[1], unix.O_TMPFILE|unix.O_RDWR, mode(a[2]))
		if err != nil {
			return errs(err)
		}
		defer func() { _ = unix.Close(fd) }()
		if _, err := unix.Write(fd, []byte("tmp")); err != nil {
			return "write " + errs(err)
		}
		return errs(unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, a[3], unix.AT_SYMLINK_FOLLOW))
	case "run":
		out, err := exec.Command(a[1], a[2:]...).Output()
		if err != nil {
			return "run: " + err.Error()
		}
		return "ok " + strings.TrimSpace(string(out))
	case "write":
		fd, err := unix.Open(a[1], unix.O_WRONLY, 0)
		if err != nil {
			return errs(err)
		}
		_, err = unix.Write(fd, []byte("x"))
		_ = unix.Close(fd)
		return "open ok, write " + errs(err)
	case "statfs":
		var s unix.Statfs_t
		if err := unix.Statfs(a[1], &s); err != nil {
			return errs(err)
		}
		return fmt.Sprintf("ok bsize=%d namelen=%d", s.Bsize, s.Namelen)
	}
	return "unknown op " + a[0]
}
