package loopback

import (
	"runtime"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// killPriv serves the kernel's FUSE_HANDLE_KILLPRIV_V2 protocol: the file system, not the
// kernel, drops set-user-ID and set-group-ID bits where a write, a truncation or an O_TRUNC
// open by a caller without CAP_FSETID must drop them. The kernel flags those requests
// (WRITE_KILL_SUIDGID, FATTR_KILL_SUIDGID, OPEN_KILL_SUIDGID) and marks the super block
// SB_NOSEC.
//
// Why iotap asks for it:
//   - --cache kernel: without it the kernel asks for security.capability before every
//     write(2) through the page cache (whether the write must drop file capabilities): one
//     GETXATTR round trip per write call, ENODATA on nearly every file. A genomics job sent
//     4,030 of them among its 5,400 requests, and dd of 100 blocks of 4 KiB sent 100. With
//     SB_NOSEC an inode is asked once.
//   - --cache none: without it the kernel left the bits to the server without saying when,
//     and a root server kept them, where natively a write by an unprivileged user to a
//     set-user-ID file clears the bit.
//
// The backing file system drops the bits itself when the writer lacks CAP_FSETID and, for a
// set-group-ID file without group execute, is not in the file's group; the server, running
// as root, has CAP_FSETID and is in group 0. So a flagged request runs on a thread of its
// own with the caller's groups (its file-system gid and the supplementary groups of its
// /proc status) and without CAP_FSETID, and the backing file system applies its rules as
// for the caller. Capabilities, file-system ids and groups are per thread in Linux, and
// the thread exits with its goroutine. File capabilities (security.capability) are dropped
// by the backing file system on any write. A server without CAP_FSETID (not root) needs
// none of this: its own writes drop the bits, and Mount does not wrap it.
type killPriv struct{ fuse.RawFileSystem }

func (k killPriv) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (n uint32, st fuse.Status) {
	if !k.mustKill(cancel, in) {
		return k.RawFileSystem.Write(cancel, in, data)
	}
	asCaller(&in.Caller, func() { n, st = k.RawFileSystem.Write(cancel, in, data) })
	return n, st
}

func (k killPriv) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (n uint32, st fuse.Status) {
	if !k.mustKill(cancel, in) {
		return k.RawFileSystem.Writev(cancel, in, data)
	}
	asCaller(&in.Caller, func() { n, st = k.RawFileSystem.Writev(cancel, in, data) })
	return n, st
}

// mustKill reports whether a write is flagged and its file has a set-user-ID or
// set-group-ID bit. With direct I/O (--cache none) the kernel flags every write of a caller
// without CAP_FSETID, so the file's mode is asked first (one fstat): most files have
// neither bit and take the plain path.
func (k killPriv) mustKill(cancel <-chan struct{}, in *fuse.WriteIn) bool {
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID == 0 {
		return false
	}
	ga := fuse.GetAttrIn{InHeader: in.InHeader, Flags_: fuse.FUSE_GETATTR_FH, Fh_: in.Fh}
	var out fuse.AttrOut
	if k.GetAttr(cancel, &ga, &out) != fuse.OK {
		return true // let the backing file system decide on the caller's terms
	}
	return out.Mode&(unix.S_ISUID|unix.S_ISGID) != 0
}

// hasFsetid reports whether this process may keep set-user-ID and set-group-ID bits on
// writing (CAP_FSETID in its effective set): only then does the server need killPriv.
func hasFsetid() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capget(&hdr, &data[0]) == nil && data[0].Effective&(1<<unix.CAP_FSETID) != 0
}

func (k killPriv) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) (st fuse.Status) {
	if in.Valid&fuse.FATTR_KILL_SUIDGID == 0 {
		return k.RawFileSystem.SetAttr(cancel, in, out)
	}
	asCaller(&in.Caller, func() { st = k.RawFileSystem.SetAttr(cancel, in, out) })
	return st
}

func (k killPriv) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) (st fuse.Status) {
	if in.Mode&fuse.OPEN_KILL_SUIDGID == 0 { // OpenIn.Mode holds the open_flags
		return k.RawFileSystem.Open(cancel, in, out)
	}
	asCaller(&in.Caller, func() { st = k.RawFileSystem.Open(cancel, in, out) })
	return st
}

func (k killPriv) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) (st fuse.Status) {
	if in.OpenFlags&fuse.OPEN_KILL_SUIDGID == 0 {
		return k.RawFileSystem.Create(cancel, in, name, out)
	}
	asCaller(&in.Caller, func() { st = k.RawFileSystem.Create(cancel, in, name, out) })
	return st
}

// asCaller runs f on a new thread with the caller's groups and without CAP_FSETID, and
// waits. The goroutine stays locked to its thread, so the thread exits with it and no other
// goroutine runs with its identity. A step that fails is skipped (a server that is not root
// has no CAP_FSETID and cannot change its groups: the backing file system then applies its
// rules to the server's own identity, as any unprivileged loopback would).
func asCaller(c *fuse.Caller, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: see above
		if groups, _, err := callerCreds(c.Pid); err == nil {
			var p *uint32
			if len(groups) > 0 {
				p = &groups[0]
			}
			// The raw system calls change this thread only (the libc and Go wrappers
			// change every thread of the process).
			_, _, _ = unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(p)), 0)
			_, _, _ = unix.RawSyscall(unix.SYS_SETFSGID, uintptr(c.Gid), 0, 0)
		}
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if unix.Capget(&hdr, &data[0]) == nil {
			data[0].Effective &^= 1 << unix.CAP_FSETID
			_ = unix.Capset(&hdr, &data[0])
		}
		f()
	}()
	<-done
}
