package loopback

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// at returns a directory descriptor and a path relative to it that together name rel (a
// path relative to the root descriptor). The caller releases the descriptor with done.
func (b *backing) at(rel string) (int, string, error) {
	if len(rel) < unix.PathMax {
		return b.rootFd, rel, nil
	}
	return b.walk(rel, unix.PathMax-1)
}

// walk opens the directories along rel until the rest of it is at most limit bytes.
func (b *backing) walk(rel string, limit int) (int, string, error) {
	dir := b.rootFd
	for len(rel) > limit {
		cut := strings.LastIndexByte(rel[:limit+1], '/') // whole components, at most limit bytes
		if cut <= 0 {
			b.done(dir)
			return -1, "", syscall.ENAMETOOLONG
		}
		fd, err := unix.Openat(dir, rel[:cut], unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		b.done(dir)
		if err != nil {
			return -1, "", err
		}
		dir, rel = fd, rel[cut+1:]
	}
	return dir, rel, nil
}

// done releases a descriptor from at, walk or procPath.
func (b *backing) done(fd int) {
	if fd >= 0 && fd != b.rootFd {
		_ = unix.Close(fd)
	}
}

// procPath names rel for the system calls that take no directory descriptor (truncate,
// statfs, the *xattr calls): /proc/self/fd/N/rel, N the root descriptor, so the call
// reaches the object the view shows whatever has become of the target's path; or
// /proc/self/fd/M/rest through a directory on the way when that is too long. The last
// component is looked up as in the call itself (lgetxattr does not follow a symlink there).
// The caller releases fd with done.
func (b *backing) procPath(rel string) (p string, fd int, err error) {
	if base := b.rootPath; len(base)+1+len(rel) < unix.PathMax {
		return base + "/" + rel, -1, nil // rel "." names the root itself
	}
	const prefix = len("/proc/self/fd/") + 11 // and a descriptor number and a slash
	dir, rest, err := b.walk(rel, unix.PathMax-1-prefix)
	if err != nil {
		return "", -1, err
	}
	return "/proc/self/fd/" + strconv.Itoa(dir) + "/" + rest, dir, nil
}

// child returns the backend path of name in directory n, relative to the root descriptor.
func (n *node) child(name string) string {
	rel := n.Path(n.b.root.EmbeddedInode())
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

// statAt is lstat relative to the root descriptor, with the birth time (the loopback's
// inode generation), for a LOOKUP or the entry a MKDIR, MKNOD, SYMLINK or LINK returns.
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
	dir, rel, err := b.at(p)
	if err != nil {
		return err
	}
	err = unix.Statx(dir, rel, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_BASIC_STATS|unix.STATX_BTIME, x)
	b.done(dir)
	if err != nil {
		return err
	}
	statFromStatx(x, st)
	return nil
}

// statNew is statAt of an object just made with mode (of type typ), after setting the
// permission bits of mode that the server's umask cleared (creds_linux.go).
func (b *backing) statNew(p string, typ, mode uint32, st *syscall.Stat_t, x *unix.Statx_t) error {
	if err := b.statAt(p, st, x); err != nil || mode&0o777&b.id.umask&^uint32(x.Mode) == 0 {
		return err
	}
	dir, rel, err := b.at(p)
	if err != nil {
		return err
	}
	fd, err := unix.Openat(dir, rel, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	b.done(dir)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	return b.fstatNew(fd, true, typ, mode, st, x)
}

// newChild makes the inode for name, which the backend call just made or found.
func (n *node) newChild(ctx context.Context, st *syscall.Stat_t, x *unix.Statx_t) *fs.Inode {
	child := &node{b: n.b}
	return n.NewInode(ctx, child, n.b.stableAttr(st, x))
}

// create runs mk (which makes a new object, timed) as the caller of ctx (creds_linux.go).
func (n *node) create(ctx context.Context, mk func() error) error {
	c, ok := n.b.foreign(ctx)
	if !ok {
		return mk()
	}
	var err error
	if e := n.b.runAs(c, func() { err = mk() }); e != nil {
		return e
	}
	return err
}

var _ fs.NodeLookuper = (*node)(nil)

// Lookup is lstat of the child.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var st syscall.Stat_t
	var x unix.Statx_t
	t0 := n.b.serviceTimes.Clock()
	err := n.b.statAt(n.child(name), &st, &x)
	n.b.serviceTimes.Measured(ctx, t0)
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
		t0 := n.b.serviceTimes.Clock()
		errno := f.Getattr(ctx, out)
		n.b.serviceTimes.Measured(ctx, t0)
		return errno
	}
	var st unix.Stat_t
	rel := n.rel()
	if rel == "." {
		t0 := n.b.serviceTimes.Clock()
		err := unix.Fstat(n.b.rootFd, &st)
		n.b.serviceTimes.Measured(ctx, t0)
		if err != nil {
			return errnoOf(err)
		}
	} else {
		dir, p, err := n.b.at(rel)
		if err != nil {
			return errnoOf(err)
		}
		t0 := n.b.serviceTimes.Clock()
		err = unix.Fstatat(dir, p, &st, unix.AT_SYMLINK_NOFOLLOW)
		n.b.serviceTimes.Measured(ctx, t0)
		n.b.done(dir)
		if err != nil {
			return errnoOf(err)
		}
	}
	out.FromStat((*syscall.Stat_t)(unsafe.Pointer(&st)))
	return 0
}

var _ fs.NodeStatxer = (*node)(nil)

// atStatxSyncType are statx's AT_STATX_FORCE_SYNC and AT_STATX_DONT_SYNC bits.
const atStatxSyncType = 0x6000

// Statx is statx of the node itself (never of a symlink's target) relative to the root
// descriptor, or through an open handle.
func (n *node) Statx(ctx context.Context, fh fs.FileHandle, flags uint32, mask uint32, out *fuse.StatxOut) syscall.Errno {
	if f, ok := fh.(fs.FileStatxer); ok && fh != nil {
		return f.Statx(ctx, flags, mask, out)
	}
	dir, rel, err := n.b.at(n.rel())
	if err != nil {
		return errnoOf(err)
	}
	var x unix.Statx_t
	err = unix.Statx(dir, rel, unix.AT_SYMLINK_NOFOLLOW|int(flags&atStatxSyncType), int(mask), &x)
	n.b.done(dir)
	if err != nil {
		return errnoOf(err)
	}
	out.FromStatx(&x)
	out.Ino = n.StableAttr().Ino // the loopback's inode number (differs on a file system mounted below the root)
	return 0
}

var _ fs.NodeAccesser = (*node)(nil)

// Access is faccessat with the server's effective ids. The kernel asks only on mounts
// without default_permissions, which only the mounting user may enter.
func (n *node) Access(ctx context.Context, mask uint32) syscall.Errno {
	dir, rel, err := n.b.at(n.rel())
	if err != nil {
		return errnoOf(err)
	}
	err = unix.Faccessat(dir, rel, mask, unix.AT_EACCESS)
	n.b.done(dir)
	return errnoOf(err)
}

var _ fs.NodeUnlinker = (*node)(nil)

// Unlink is unlinkat.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.unlink(ctx, name, 0)
}

var _ fs.NodeRmdirer = (*node)(nil)

// Rmdir is unlinkat(AT_REMOVEDIR).
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.unlink(ctx, name, unix.AT_REMOVEDIR)
}

func (n *node) unlink(ctx context.Context, name string, flags int) syscall.Errno {
	n.closed(name)
	dir, rel, err := n.b.at(n.child(name))
	if err != nil {
		return errnoOf(err)
	}
	t0 := n.b.serviceTimes.Clock()
	err = unix.Unlinkat(dir, rel, flags)
	n.b.serviceTimes.Measured(ctx, t0)
	n.b.done(dir)
	return errnoOf(err)
}

// closed waits until the layer's closes of child name's files, if any are in progress or
// due, are done in the backend (releasing.go): an unlink or a rename of it, or over it,
// reaches the backend after.
func (n *node) closed(name string) {
	if ch := n.GetChild(name); ch != nil {
		n.b.releasing.wait(ch.StableAttr().Ino)
	}
}

var _ fs.NodeMkdirer = (*node)(nil)

// Mkdir is mkdirat as the caller; the reply has the new directory's attributes.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.make(ctx, name, unix.S_IFDIR, mode, out, func(dir int, rel string) error {
		return unix.Mkdirat(dir, rel, mode)
	})
}

var _ fs.NodeMknoder = (*node)(nil)

// Mknod is mknodat as the caller.
func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.make(ctx, name, mode&unix.S_IFMT, mode, out, func(dir int, rel string) error {
		return unix.Mknodat(dir, rel, mode, int(rdev))
	})
}

var _ fs.NodeSymlinker = (*node)(nil)

// Symlink is symlinkat as the caller.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	// A symlink's permission bits are not its creator's to choose: nothing to restore.
	return n.make(ctx, name, unix.S_IFLNK, 0, out, func(dir int, rel string) error {
		return unix.Symlinkat(target, dir, rel)
	})
}

// make makes name, an object of type typ with mode, in directory n: mk makes it at dir/rel
// (one backend call, timed, as the caller), and the reply is its entry (newEntry).
func (n *node) make(ctx context.Context, name string, typ, mode uint32, out *fuse.EntryOut, mk func(dir int, rel string) error) (*fs.Inode, syscall.Errno) {
	p := n.child(name)
	dir, rel, err := n.b.at(p)
	if err != nil {
		return nil, errnoOf(err)
	}
	defer n.b.done(dir)
	err = n.create(ctx, func() error {
		t0 := n.b.serviceTimes.Clock()
		err := mk(dir, rel)
		n.b.serviceTimes.Measured(ctx, t0)
		return err
	})
	if err != nil {
		return nil, errnoOf(err)
	}
	return n.newEntry(ctx, p, dir, rel, typ, mode, out)
}

// newEntry replies with the entry of the object just made at p (dir/rel, relative to the
// root descriptor) of type typ with mode: its attributes, once the permission bits of mode
// that the server's umask cleared are set again (statNew; mode 0 asks for none), and its
// inode. If the attributes cannot be read, the object is removed again and the call fails.
func (n *node) newEntry(ctx context.Context, p string, dir int, rel string, typ, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var st syscall.Stat_t
	var x unix.Statx_t
	if err := n.b.statNew(p, typ, mode, &st, &x); err != nil {
		flags := 0
		if typ == unix.S_IFDIR {
			flags = unix.AT_REMOVEDIR
		}
		_ = unix.Unlinkat(dir, rel, flags)
		return nil, errnoOf(err)
	}
	out.FromStat(&st)
	return n.newChild(ctx, &st, &x), 0
}

var _ fs.NodeLinker = (*node)(nil)

// Link is linkat. A file made by TMPFILE has no name yet: it is linked from the descriptor
// its node keeps, as linkat of /proc/self/fd/N does natively.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok || t.b != n.b {
		return nil, syscall.EXDEV
	}
	p := n.child(name)
	dir, rel, err := n.b.at(p)
	if err != nil {
		return nil, errnoOf(err)
	}
	defer n.b.done(dir)
	tmp := t.tmp.Load()
	if _, parent := t.Parent(); parent == nil && !t.IsRoot() {
		if tmp == 0 {
			return nil, syscall.ENOENT // no name and no descriptor: the file is gone
		}
		t0 := n.b.serviceTimes.Clock()
		err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(tmp-1)), dir, rel, unix.AT_SYMLINK_FOLLOW)
		n.b.serviceTimes.Measured(ctx, t0)
	} else {
		fdir, frel, err2 := n.b.at(t.rel())
		if err2 != nil {
			return nil, errnoOf(err2)
		}
		t0 := n.b.serviceTimes.Clock()
		err = unix.Linkat(fdir, frel, dir, rel, 0)
		n.b.serviceTimes.Measured(ctx, t0)
		n.b.done(fdir)
	}
	if err != nil {
		return nil, errnoOf(err)
	}
	t.dropTmp() // it has a name now
	// A new name of an existing object: no mode to restore.
	return n.newEntry(ctx, p, dir, rel, 0, 0, out)
}

var _ fs.NodeRenamer = (*node)(nil)

// Rename is renameat2 between two directories of this mount.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok || np.b != n.b {
		return syscall.EXDEV
	}
	odir, orel, err := n.b.at(n.child(name))
	if err != nil {
		return errnoOf(err)
	}
	defer n.b.done(odir)
	ndir, nrel, err := n.b.at(np.child(newName))
	if err != nil {
		return errnoOf(err)
	}
	defer n.b.done(ndir)
	n.closed(name)
	np.closed(newName)
	t0 := n.b.serviceTimes.Clock()
	err = unix.Renameat2(odir, orel, ndir, nrel, uint(flags))
	n.b.serviceTimes.Measured(ctx, t0)
	return errnoOf(err)
}

var _ fs.NodeReadlinker = (*node)(nil)

// Readlink is readlinkat.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	dir, rel, err := n.b.at(n.rel())
	if err != nil {
		return nil, errnoOf(err)
	}
	defer n.b.done(dir)
	for l := 256; ; l *= 2 {
		buf := make([]byte, l)
		t0 := n.b.serviceTimes.Clock()
		sz, err := unix.Readlinkat(dir, rel, buf)
		n.b.serviceTimes.Measured(ctx, t0)
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
	ds, errno := n.opendir(ctx)
	return ds, 0, errno
}

var _ fs.NodeReaddirer = (*node)(nil)

// Readdir is a directory stream opened through the root descriptor (the bridge uses
// OpendirHandle; this is for callers of the node API).
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) { return n.opendir(ctx) }

func (n *node) opendir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	dir, rel, err := n.b.at(n.rel())
	if err != nil {
		return nil, errnoOf(err)
	}
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	t0 := n.b.serviceTimes.Clock()
	fd, err := unix.Openat2(dir, rel, &how)
	if err == unix.ENOSYS {
		t0 = n.b.serviceTimes.Clock()
		fd, err = unix.Openat(dir, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	n.b.serviceTimes.Measured(ctx, t0)
	n.b.done(dir)
	if err != nil {
		return nil, errnoOf(err)
	}
	ds, errno := fs.NewLoopbackDirStreamFd(fd)
	if errno != 0 {
		_ = unix.Close(fd)
		return nil, errno
	}
	return ds, 0
}

var _ fs.NodeStatfser = (*node)(nil)

// Statfs is statfs of the node's backend file (a file system mounted below the root
// answers for itself).
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	p, fd, err := n.b.procPath(n.rel())
	if err != nil {
		return errnoOf(err)
	}
	var s syscall.Statfs_t
	err = syscall.Statfs(p, &s)
	n.b.done(fd)
	if err != nil {
		return errnoOf(err)
	}
	out.FromStatfsT(&s)
	return 0
}

var _ fs.NodeGetxattrer = (*node)(nil)

// Getxattr is lgetxattr by name.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	p, fd, err := n.b.procPath(n.rel())
	if err != nil {
		return 0, errnoOf(err)
	}
	sz, err := unix.Lgetxattr(p, attr, dest)
	n.b.done(fd)
	return uint32(max(sz, 0)), errnoOf(err)
}

var _ fs.NodeSetxattrer = (*node)(nil)

// Setxattr is lsetxattr by name.
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	p, fd, err := n.b.procPath(n.rel())
	if err != nil {
		return errnoOf(err)
	}
	err = unix.Lsetxattr(p, attr, data, int(flags))
	n.b.done(fd)
	return errnoOf(err)
}

var _ fs.NodeRemovexattrer = (*node)(nil)

// Removexattr is lremovexattr by name.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	p, fd, err := n.b.procPath(n.rel())
	if err != nil {
		return errnoOf(err)
	}
	err = unix.Lremovexattr(p, attr)
	n.b.done(fd)
	return errnoOf(err)
}

var _ fs.NodeListxattrer = (*node)(nil)

// Listxattr is llistxattr by name.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	p, fd, err := n.b.procPath(n.rel())
	if err != nil {
		return 0, errnoOf(err)
	}
	sz, err := unix.Llistxattr(p, dest)
	n.b.done(fd)
	return uint32(max(sz, 0)), errnoOf(err)
}

var _ fs.NodeSetattrer = (*node)(nil)

// Setattr without a file handle (chmod, chown, truncate, utimes by name, and any change
// through a directory handle): the changes relative to the root descriptor, timed, then one
// lstat for the reply. With a file handle it is the file's Setattr.
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if f, ok := asFile(fh); ok {
		return f.Setattr(ctx, in, out)
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
	t0 := n.b.serviceTimes.Clock()
	errno := n.setattrAt(rel, in)
	n.b.serviceTimes.Measured(ctx, t0)
	if errno != 0 {
		return errno
	}
	dir, p, err := n.b.at(rel)
	if err != nil {
		return errnoOf(err)
	}
	var st unix.Stat_t
	err = unix.Fstatat(dir, p, &st, unix.AT_SYMLINK_NOFOLLOW)
	n.b.done(dir)
	if err != nil {
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
	dir, p, err := n.b.at(rel)
	if err != nil {
		return errnoOf(err)
	}
	defer n.b.done(dir)
	return applySetattr(in, pathAttrs{b: n.b, dir: dir, rel: p, full: rel})
}

// pathAttrs changes attributes by name, relative to a directory descriptor.
type pathAttrs struct {
	b    *backing
	dir  int
	rel  string // relative to dir
	full string // relative to the root descriptor
}

func (p pathAttrs) chmod(mode uint32) error { return unix.Fchmodat(p.dir, p.rel, mode, 0) }
func (p pathAttrs) chown(uid, gid int) error {
	return unix.Fchownat(p.dir, p.rel, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
}

// truncate names the file through procfs: there is no truncateat.
func (p pathAttrs) truncate(size int64) error {
	name, fd, err := p.b.procPath(p.full)
	if err != nil {
		return err
	}
	err = syscall.Truncate(name, size)
	p.b.done(fd)
	return err
}
func (p pathAttrs) utimes(ts *[2]unix.Timespec) error {
	return unix.UtimesNanoAt(p.dir, p.rel, ts[:], unix.AT_SYMLINK_NOFOLLOW)
}

// attrSetter carries out the changes of a SETATTR on one backend object.
type attrSetter interface {
	chmod(mode uint32) error
	chown(uid, gid int) error
	truncate(size int64) error
	utimes(ts *[2]unix.Timespec) error
}

// setattrChanges are the SETATTR bits that ask for a change other than ctime.
const setattrChanges = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_SIZE |
	fuse.FATTR_ATIME | fuse.FATTR_MTIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW

// applySetattr makes the changes in asks for, in the loopback's order: mode, owner, size,
// then times (so an explicit mtime is not clobbered by the truncate).
//
// A SETATTR that asks for none of them is chown(f, -1, -1) (or fchown, lchown): the kernel
// sends it to change ctime alone (with the kernel cache, it sets ctime to its own clock in
// the inode it caches and says so with FATTR_CTIME). The same call on the backing file
// has the backing file system do what it does natively: set ctime to now, and drop a
// set-user-ID bit.
func applySetattr(in *fuse.SetAttrIn, s attrSetter) syscall.Errno {
	if in.Valid&setattrChanges == 0 {
		return errnoOf(s.chown(-1, -1))
	}
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
