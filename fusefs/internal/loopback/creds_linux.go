package loopback

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Creating as the caller.
//
// An object the layer creates (CREATE, MKDIR, MKNOD, SYMLINK, TMPFILE) must come out as the
// caller's own system call makes it natively: owned by the caller's file-system user id, in
// the caller's file-system group or in the directory's (set-group-ID directories), with
// the mode bits the kernel sent, set-user-ID and set-group-ID included. A server running as
// root cannot get there by creating the object itself and giving it away: chown clears
// set-user-ID and set-group-ID bits, and it would move the object out of the group a
// set-group-ID directory gave it. So when the caller's ids differ from the server's and the
// server may take on others' (CAP_SETUID and CAP_SETGID), the system call runs on a thread
// of its own with the caller's file-system ids, supplementary groups and effective
// capabilities (from /proc/<tid>/status), and the backing file system applies its rules as
// for the caller. Credentials are per thread in Linux: the thread takes the server's back
// afterwards and only then returns to the Go scheduler; if that fails it exits with its
// goroutine.
//
// The server's umask is not the caller's either: the kernel applied the caller's umask to
// the mode it sends (the mount does not ask for FUSE_DONT_MASK), and the backing file
// system applies the server's on top. Where the server's would clear bits the caller asked
// for, a chmod of the new object sets them again: one more system call, only then.

// identity is what the server creates as, read when the layer is mounted.
type identity struct {
	uid, gid uint32
	groups   []uint32
	caps     [2]unix.CapUserData // effective and permitted capabilities
	switchOK bool                // CAP_SETUID and CAP_SETGID are effective: runAs works
	umask    uint32              // the process umask (it applies to every thread)
}

func selfIdentity() identity {
	id := identity{uid: uint32(os.Geteuid()), gid: uint32(os.Getegid())}
	if gs, err := unix.Getgroups(); err == nil {
		for _, g := range gs {
			id.groups = append(id.groups, uint32(g))
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if unix.Capget(&hdr, &id.caps[0]) == nil {
		const need = 1<<unix.CAP_SETUID | 1<<unix.CAP_SETGID
		id.switchOK = id.caps[0].Effective&need == need
	}
	id.umask = 0o022
	if st, err := os.ReadFile("/proc/self/status"); err == nil {
		if v, ok := statusLine(string(st), "Umask:"); ok {
			if m, err := strconv.ParseUint(v, 8, 32); err == nil {
				id.umask = uint32(m)
			}
		}
	}
	return id
}

// statusLine returns the value of the line of a /proc status file that starts with key.
func statusLine(status, key string) (string, bool) {
	for line := range strings.SplitSeq(status, "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

// foreign returns the caller of ctx when it creates as someone other than the server, and
// the server can take on its identity.
func (b *backing) foreign(ctx context.Context) (*fuse.Caller, bool) {
	if !b.id.switchOK {
		return nil, false
	}
	c, ok := fuse.FromContext(ctx)
	if !ok || c.Uid == b.id.uid && c.Gid == b.id.gid {
		return nil, false
	}
	return c, true
}

// errNotAsCaller is returned when a thread could not take on the caller's identity.
var errNotAsCaller = errors.New("cannot act as the caller")

// runAs runs f on a thread of its own with c's file-system ids, groups and effective
// capabilities, and waits. A caller whose status cannot be read (it exited) gets no
// supplementary groups and no capabilities.
func (b *backing) runAs(c *fuse.Caller, f func()) error {
	groups, capEff, err := callerCreds(c.Pid)
	if err != nil {
		groups, capEff = nil, 0
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := b.id.become(c.Uid, c.Gid, groups, capEff); err != nil {
			if b.id.restore() {
				runtime.UnlockOSThread()
			}
			done <- err
			return
		}
		f()
		if b.id.restore() {
			runtime.UnlockOSThread()
		} // else the thread exits with this goroutine
		done <- nil
	}()
	return <-done
}

// become gives the current thread the file-system ids uid and gid, the supplementary
// groups and the effective capabilities capEff (as far as the server's permitted set
// allows). The raw system calls change this thread only (the libc and Go wrappers change
// every thread of the process).
func (id *identity) become(uid, gid uint32, groups []uint32, capEff uint64) error {
	if err := setgroups(groups); err != nil {
		return err
	}
	if setfsgid(gid); setfsgid(^uint32(0)) != gid {
		return errNotAsCaller
	}
	if setfsuid(uid); setfsuid(^uint32(0)) != uid {
		return errNotAsCaller
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := id.caps
	data[0].Effective = uint32(capEff) & data[0].Permitted
	data[1].Effective = uint32(capEff>>32) & data[1].Permitted
	return unix.Capset(&hdr, &data[0])
}

// restore gives the current thread the server's identity back and reports whether it has it.
func (id *identity) restore() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := id.caps
	if unix.Capset(&hdr, &data[0]) != nil {
		return false
	}
	setfsuid(id.uid)
	setfsgid(id.gid)
	if setfsuid(^uint32(0)) != id.uid || setfsgid(^uint32(0)) != id.gid {
		return false
	}
	return setgroups(id.groups) == nil
}

// setfsuid sets the thread's file-system user id and returns the previous one; an invalid
// id (all ones) changes nothing and so reads the current one.
func setfsuid(uid uint32) uint32 {
	r, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, uintptr(uid), 0, 0)
	return uint32(r)
}

func setfsgid(gid uint32) uint32 {
	r, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, uintptr(gid), 0, 0)
	return uint32(r)
}

func setgroups(groups []uint32) error {
	var p *uint32
	if len(groups) > 0 {
		p = &groups[0]
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(p)), 0); e != 0 {
		return e
	}
	return nil
}

// callerCreds returns the supplementary groups and the effective capabilities of thread
// tid (the "Groups:" and "CapEff:" lines of its /proc status).
func callerCreds(tid uint32) (groups []uint32, capEff uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/status")
	if err != nil {
		return nil, 0, err
	}
	st := string(b)
	gl, ok := statusLine(st, "Groups:")
	if !ok {
		return nil, 0, errors.New("no Groups line")
	}
	for _, f := range strings.Fields(gl) {
		g, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, 0, err
		}
		groups = append(groups, uint32(g))
	}
	if cl, ok := statusLine(st, "CapEff:"); ok {
		capEff, err = strconv.ParseUint(cl, 16, 64)
		if err != nil {
			return nil, 0, err
		}
	}
	return groups, capEff, nil
}

// restoreMode sets the bits of want (permission bits the caller asked for) that the
// server's umask cleared on the new object of type typ, through fd (an open descriptor of
// it, or O_PATH). cur is the object's mode now; an object of another type (replaced since)
// is left alone. It reports whether it changed anything.
func (b *backing) restoreMode(fd int, opath bool, cur, typ, want uint32) (bool, error) {
	lost := want & 0o777 & b.id.umask &^ cur
	if lost == 0 || cur&unix.S_IFMT != typ {
		return false, nil
	}
	mode := cur&0o7777 | lost
	if opath { // fchmod does not take O_PATH descriptors; the magic link names the same inode
		return true, syscall.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
	}
	return true, syscall.Fchmod(fd, mode)
}
