package fusefs

import (
	"context"
	"os"
	"path"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The go-fuse loopback names backend files by absolute path. When the layer is mounted in
// place, that path is /proc/self/fd/N/..., and every lookup walks procfs first: an lstat
// costs about 4 µs instead of 1.5 µs. The hot name operations below go through the root
// descriptor with *at system calls instead, with the loopback's semantics and replies.

// child returns the backend path of name in directory n, relative to the root descriptor.
func (n *node) child(name string) string {
	rel := n.Path(n.b.root.RootNode.EmbeddedInode())
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

// statAt is lstat relative to the root descriptor, with the birth time (the loopback's
// inode generation), for a LOOKUP or the entry a MKDIR returns.
//
// It does not make a network file system revalidate the attributes (AT_STATX_DONT_SYNC):
// the path walk itself revalidates each name as the kernel sees fit (a FUSE backend with a
// 0 s entry timeout is asked again on every walk), which is all a native path walk costs.
// A synchronised statx would add a GETATTR the application never made, and a client that
// caches GETATTR replies (MooseFS's mfsmount keeps them about a second) would then answer
// the application's own later stat from that cache: a directory's size, which MooseFS
// updates as files below it are written, would lag by up to a second where natively it
// does not (tar then reports "file changed as we read it"). The application's own stat
// arrives as a GETATTR and is synchronised (Getattr).
func (b *backing) statAt(p string, st *syscall.Stat_t, x *unix.Statx_t) error {
	if err := unix.Statx(b.rootFd, p, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_BASIC_STATS|unix.STATX_BTIME, x); err != nil {
		return err
	}
	statFromStatx(x, st)
	return nil
}

// newChild makes the inode for name, which the backend call just made or found.
func (n *node) newChild(ctx context.Context, st *syscall.Stat_t, x *unix.Statx_t) *fs.Inode {
	child := &node{LoopbackNode: &fs.LoopbackNode{RootData: n.b.root}, b: n.b}
	return n.NewInode(ctx, child, n.b.stableAttr(st, x))
}

// preserveOwner gives p to the caller when the daemon runs as root, like the loopback.
func (n *node) preserveOwner(ctx context.Context, p string) {
	if os.Getuid() != 0 {
		return
	}
	if caller, ok := fuse.FromContext(ctx); ok {
		_ = unix.Fchownat(n.b.rootFd, p, int(caller.Uid), int(caller.Gid), unix.AT_SYMLINK_NOFOLLOW)
	}
}

var _ fs.NodeLookuper = (*node)(nil)

// Lookup is lstat of the child.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var st syscall.Stat_t
	var x unix.Statx_t
	t0 := n.b.svc.clock()
	err := n.b.statAt(n.child(name), &st, &x)
	n.b.svc.measured(ctx, t0)
	if err != nil {
		return nil, errnoOf(err)
	}
	out.FromStat(&st)
	return n.newChild(ctx, &st, &x), 0
}

var _ fs.NodeGetattrer = (*node)(nil)

// Getattr is fstat through an open handle, else lstat (stat for the root).
func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if f, ok := fh.(fs.FileGetattrer); ok && fh != nil {
		t0 := n.b.svc.clock()
		errno := f.Getattr(ctx, out)
		n.b.svc.measured(ctx, t0)
		return errno
	}
	var st unix.Stat_t
	var err error
	rel := n.rel()
	t0 := n.b.svc.clock()
	if rel == "." {
		err = unix.Fstat(n.b.rootFd, &st)
	} else {
		err = unix.Fstatat(n.b.rootFd, rel, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	n.b.svc.measured(ctx, t0)
	if err != nil {
		return errnoOf(err)
	}
	out.FromStat((*syscall.Stat_t)(unsafe.Pointer(&st)))
	return 0
}

var _ fs.NodeUnlinker = (*node)(nil)

// Unlink is unlinkat.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	t0 := n.b.svc.clock()
	err := unix.Unlinkat(n.b.rootFd, n.child(name), 0)
	n.b.svc.measured(ctx, t0)
	return errnoOf(err)
}

var _ fs.NodeRmdirer = (*node)(nil)

// Rmdir is unlinkat(AT_REMOVEDIR).
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	t0 := n.b.svc.clock()
	err := unix.Unlinkat(n.b.rootFd, n.child(name), unix.AT_REMOVEDIR)
	n.b.svc.measured(ctx, t0)
	return errnoOf(err)
}

var _ fs.NodeMkdirer = (*node)(nil)

// Mkdir is mkdirat; the directory belongs to the caller, and the reply has its attributes.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := n.child(name)
	t0 := n.b.svc.clock()
	err := unix.Mkdirat(n.b.rootFd, p, mode)
	n.b.svc.measured(ctx, t0)
	if err != nil {
		return nil, errnoOf(err)
	}
	n.preserveOwner(ctx, p)
	var st syscall.Stat_t
	var x unix.Statx_t
	if err := n.b.statAt(p, &st, &x); err != nil {
		_ = unix.Unlinkat(n.b.rootFd, p, unix.AT_REMOVEDIR)
		return nil, errnoOf(err)
	}
	out.FromStat(&st)
	return n.newChild(ctx, &st, &x), 0
}

var _ fs.NodeRenamer = (*node)(nil)

// Rename is renameat2 between two directories of this mount.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok || np.b != n.b {
		return syscall.EXDEV
	}
	t0 := n.b.svc.clock()
	err := unix.Renameat2(n.b.rootFd, n.child(name), n.b.rootFd, np.child(newName), uint(flags))
	n.b.svc.measured(ctx, t0)
	return errnoOf(err)
}

var _ fs.NodeReadlinker = (*node)(nil)

// Readlink is readlinkat.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	rel := n.rel()
	for l := 256; ; l *= 2 {
		buf := make([]byte, l)
		t0 := n.b.svc.clock()
		sz, err := unix.Readlinkat(n.b.rootFd, rel, buf)
		n.b.svc.measured(ctx, t0)
		if err != nil {
			return nil, errnoOf(err)
		}
		if sz < len(buf) {
			return buf[:sz], 0
		}
	}
}

var _ fs.NodeOpendirHandler = (*node)(nil)

// OpendirHandle opens the directory through the root descriptor.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	rel := n.rel()
	t0 := n.b.svc.clock()
	fd, err := unix.Openat2(n.b.rootFd, rel, &how)
	if err == unix.ENOSYS {
		t0 = n.b.svc.clock()
		fd, err = unix.Openat(n.b.rootFd, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	n.b.svc.measured(ctx, t0)
	if err != nil {
		return nil, 0, errnoOf(err)
	}
	ds, errno := fs.NewLoopbackDirStreamFd(fd)
	if errno != 0 {
		_ = unix.Close(fd)
		return nil, 0, errno
	}
	return ds, 0, 0
}

// Setattr without a handle (chmod, chown, truncate, utimes by name): the changes, timed,
// then one lstat for the reply. With a handle it is the file's Setattr.
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if f, ok := fh.(*file); ok {
		return f.Setattr(ctx, in, out)
	}
	if fh != nil {
		return n.LoopbackNode.Setattr(ctx, fh, in, out)
	}
	if orphanTimes(n, in) {
		// The kernel flushes the times of an inode it evicts, and with write-back caching
		// that can come after the job unlinked the file and closed every writable handle
		// (no handle in the request). On a kernel file system the orphan's times just
		// change; its name is gone here, so there is nothing left to change. The kernel
		// does not read the reply's attributes.
		out.Ino = n.StableAttr().Ino
		return 0
	}
	rel := n.rel()
	t0 := n.b.svc.clock()
	errno := n.setattrAt(rel, in)
	n.b.svc.measured(ctx, t0)
	if errno != 0 {
		return errno
	}
	var st unix.Stat_t
	if err := unix.Fstatat(n.b.rootFd, rel, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return errnoOf(err)
	}
	out.FromStat((*syscall.Stat_t)(unsafe.Pointer(&st)))
	return 0
}

// timesOnly are the SETATTR bits of a time update (FATTR_ATIME, MTIME, ATIME_NOW, MTIME_NOW,
// CTIME); FATTR_KILL_SUIDGID may come with them.
const timesOnly = fuse.FATTR_ATIME | fuse.FATTR_MTIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW | fuse.FATTR_CTIME | fuse.FATTR_KILL_SUIDGID

// orphanTimes reports whether in only sets times on a node that has no name left (unlinked
// through the mount).
func orphanTimes(n *node, in *fuse.SetAttrIn) bool {
	if in.Valid&^timesOnly != 0 || n.IsRoot() {
		return false
	}
	_, parent := n.Parent()
	return parent == nil
}

func (n *node) setattrAt(rel string, in *fuse.SetAttrIn) syscall.Errno {
	return applySetattr(in, pathAttrs{b: n.b, rel: rel})
}

// pathAttrs changes attributes by name, relative to the root descriptor.
type pathAttrs struct {
	b   *backing
	rel string
}

func (p pathAttrs) chmod(mode uint32) error { return unix.Fchmodat(p.b.rootFd, p.rel, mode, 0) }
func (p pathAttrs) chown(uid, gid int) error {
	return unix.Fchownat(p.b.rootFd, p.rel, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
}

// truncate names the file through the root descriptor: there is no truncateat.
func (p pathAttrs) truncate(size int64) error {
	return syscall.Truncate(path.Join(p.b.fdPath, p.rel), size)
}
func (p pathAttrs) utimes(ts *[2]unix.Timespec) error {
	return unix.UtimesNanoAt(p.b.rootFd, p.rel, ts[:], unix.AT_SYMLINK_NOFOLLOW)
}

// attrSetter carries out the changes of a SETATTR on one backend object.
type attrSetter interface {
	chmod(mode uint32) error
	chown(uid, gid int) error
	truncate(size int64) error
	utimes(ts *[2]unix.Timespec) error
}

// applySetattr makes the changes in asks for, in the loopback's order: mode, owner, size,
// then times (so an explicit mtime is not clobbered by the truncate).
func applySetattr(in *fuse.SetAttrIn, s attrSetter) syscall.Errno {
	if mode, ok := in.GetMode(); ok {
		if err := s.chmod(mode); err != nil {
			return errnoOf(err)
		}
	}
	uid32, uok := in.GetUID()
	gid32, gok := in.GetGID()
	if uok || gok {
		uid, gid := -1, -1
		if uok {
			uid = int(uid32)
		}
		if gok {
			gid = int(gid32)
		}
		if err := s.chown(uid, gid); err != nil {
			return errnoOf(err)
		}
	}
	if sz, ok := in.GetSize(); ok {
		if err := s.truncate(int64(sz)); err != nil {
			return errnoOf(err)
		}
	}
	mtime, mok := in.GetMTime()
	atime, aok := in.GetATime()
	if !mok && !aok {
		return 0
	}
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	var err error
	if aok {
		if ts[0], err = unix.TimeToTimespec(atime); err != nil {
			return errnoOf(err)
		}
	}
	if mok {
		if ts[1], err = unix.TimeToTimespec(mtime); err != nil {
			return errnoOf(err)
		}
	}
	if err := s.utimes(&ts); err != nil {
		return errnoOf(err)
	}
	return 0
}
