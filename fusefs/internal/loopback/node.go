package loopback

import (
	"context"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs/internal/servicetime"
)

// Options say how the file system answers opens and where its backend calls report their
// time.
type Options struct {
	// OpenFlags are the FOPEN_* flags of every open and create reply.
	OpenFlags uint32
	// Writeback: the kernel caches writes (FUSE write-back caching) and may read pages of a
	// file the application opened write-only (to fill a partly written page), so such
	// files are opened read-write on the backend.
	Writeback bool
	// ServiceTimes is where each request's backend call reports its time (nil: untraced).
	ServiceTimes *servicetime.Table
	// Passthrough, when set, lets the kernel serve the reads and writes of open files from
	// their backing files (passthrough.go); fs.Options.ServerCallbacks must be unset. The
	// mount must negotiate FUSE passthrough without write-back caching.
	Passthrough *Passthrough
}

// New returns the file system of the directory rootFd, an O_PATH descriptor that path names
// too (the caller keeps it open while the file system is served, and closes it), as
// go-fuse's raw protocol: go-fuse's bridge (fs.NewNodeFS with fo) over the node tree, with
// an owner's POSIX locks released as it closes a file (posixFlush) and, for a server that
// may keep set-user-ID and set-group-ID bits, those bits dropped where the kernel says so
// (killPriv: the mount must ask for FUSE_HANDLE_KILLPRIV_V2).
func New(path string, rootFd int, o Options, fo *fs.Options) (fuse.RawFileSystem, error) {
	root, err := newRoot(path, rootFd, o)
	if err != nil {
		return nil, err
	}
	if o.Passthrough != nil {
		fo.ServerCallbacks = o.Passthrough
	}
	raw := fs.NewNodeFS(root, fo)
	if o.Passthrough != nil {
		raw = passthroughFS{raw, o.Passthrough}
	}
	raw = posixFlush{raw, root.b.locks}
	if hasFsetid() {
		raw = killPriv{raw}
	}
	return raw, nil
}

// backing is shared by all nodes of one mount.
type backing struct {
	root         *node              // the root node: paths are relative to it
	rootPath     string             // a path naming the backend root (/proc/self/fd/N of rootFd)
	rootDev      uint64             // the backend root's device: inode numbers are mixed with it
	rootFd       int                // O_PATH descriptor of the backend root, opened before the mount
	openFlag     uint32             // FOPEN_* flags for every open/create reply
	serviceTimes *servicetime.Table // where backend calls report their time (nil when untraced)
	writeback    bool               // Options.Writeback
	id           identity           // what the server creates as (creds_linux.go)
	locks        *lockTable         // the owners of POSIX locks (locks_linux.go)
	releasing    releasing          // inodes whose files the layer is closing (releasing.go)
	// passthrough is Options.Passthrough: open files offer their descriptor as the
	// backing file (nil: never).
	passthrough *Passthrough
}

// backendFlags returns the open flags to use on the backend for an application's flags.
func (b *backing) backendFlags(flags uint32) uint32 {
	flags &^= syscall.O_APPEND | fuse.FMODE_EXEC // the kernel positions appends
	if b.writeback && flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		flags = flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	return flags
}

// node is one object of the backend directory, as go-fuse's node API sees it. It embeds
// fs.Inode, which declares no operation: each operation the node serves is a method of its
// own, declared with a `var _ fs.NodeXxxer` check beside it, that reaches the backend through
// the root descriptor (nodeat.go) and gives the go-fuse loopback's replies. Open, Create and
// Tmpfile return our file handle ([file]), so reads are eager and kernel passthrough is never
// offered. The tracer (package fusefs) times the requests one level up, at the raw protocol.
type node struct {
	fs.Inode
	b *backing
	// tmp is 1 + a descriptor of a file made by TMPFILE, kept until the file is linked or
	// forgotten (0: none).
	tmp atomic.Int32
}

// newRoot builds the root node of the backend directory rootFd, which path names too.
func newRoot(path string, rootFd int, o Options) (*node, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(rootFd, &st); err != nil {
		return nil, err
	}
	b := &backing{rootPath: path, rootDev: uint64(st.Dev), rootFd: rootFd, openFlag: o.OpenFlags,
		serviceTimes: o.ServiceTimes, writeback: o.Writeback, id: selfIdentity(), locks: newLockTable(),
		passthrough: o.Passthrough}
	b.root = &node{b: b}
	return b.root, nil
}

var _ fs.NodeOpener = (*node)(nil)

// Open opens the backend file relative to the root descriptor without following symlinks in
// any component (the go-fuse loopback does the same with two more syscalls).
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	flags = n.b.backendFlags(flags)
	dir, rel, err := n.b.at(n.rel())
	if err != nil {
		return nil, 0, errnoOf(err)
	}
	how := unix.OpenHow{Flags: uint64(flags) | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	t0 := n.b.serviceTimes.Clock()
	fd, err := unix.Openat2(dir, rel, &how)
	if err == unix.ENOSYS {
		t0 = n.b.serviceTimes.Clock()
		fd, err = unix.Openat(dir, rel, int(flags)|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	n.b.serviceTimes.Measured(ctx, t0)
	n.b.done(dir)
	if err != nil {
		return nil, 0, errnoOf(err)
	}
	return n.b.newFile(fd, flags, n.StableAttr().Ino), n.b.openFlag, 0
}

// rel returns the node's path relative to the backend root ("." for the root).
func (n *node) rel() string {
	rel := n.Path(n.b.root.EmbeddedInode())
	if rel == "" {
		rel = "."
	}
	return rel
}

var _ fs.NodeCreater = (*node)(nil)

// Create is open(O_CREAT) relative to the root descriptor, as the caller (creds_linux.go),
// with our file handle. The time it reports is the open(O_CREAT) alone: the fstat for the
// reply is FUSE's work, not the application's (package servicetime).
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	flags = n.b.backendFlags(flags)
	dir, rel, err := n.b.at(n.child(name))
	if err != nil {
		return nil, nil, 0, errnoOf(err)
	}
	oflags := int(flags) | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_CLOEXEC
	var fd int
	err = n.create(ctx, func() (err error) {
		t0 := n.b.serviceTimes.Clock()
		fd, err = unix.Openat(dir, rel, oflags, mode)
		n.b.serviceTimes.Measured(ctx, t0)
		return err
	})
	n.b.done(dir)
	if err != nil {
		return nil, nil, 0, errnoOf(err)
	}
	return n.newFileEntry(ctx, fd, flags, mode, false, out)
}

// newFileEntry replies with the entry and the handle of the regular file just made through
// fd (CREATE, TMPFILE) with mode: its attributes, once the permission bits of mode that the
// server's umask cleared are set again, its inode, and our file handle on fd. A file made by
// TMPFILE that may be linked later (keepTmp) keeps a descriptor in its node.
func (n *node) newFileEntry(ctx context.Context, fd int, flags, mode uint32, keepTmp bool, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	var st syscall.Stat_t
	var x unix.Statx_t
	if err := n.b.fstatNew(fd, false, unix.S_IFREG, mode, &st, &x); err != nil {
		_ = unix.Close(fd)
		return nil, nil, 0, errnoOf(err)
	}
	child := &node{b: n.b}
	if keepTmp {
		if d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err == nil {
			child.tmp.Store(int32(d) + 1)
		}
	}
	ch := n.NewInode(ctx, child, n.b.stableAttr(&st, &x))
	out.FromStat(&st)
	return ch, n.b.newFile(fd, flags, ch.StableAttr().Ino), n.b.openFlag, 0
}

// fstatNew reads the attributes of an object of type typ just created through fd (O_PATH
// when opath), after setting the permission bits of mode that the server's umask cleared.
func (b *backing) fstatNew(fd int, opath bool, typ, mode uint32, st *syscall.Stat_t, x *unix.Statx_t) error {
	for again := true; ; again = false {
		if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS|unix.STATX_BTIME, x); err != nil {
			return err
		}
		if !again {
			break
		}
		changed, err := b.restoreMode(fd, opath, uint32(x.Mode), typ, mode)
		if err != nil {
			return err
		}
		if !changed {
			break
		}
	}
	statFromStatx(x, st)
	return nil
}

var _ fs.NodeTmpfiler = (*node)(nil)

var _ fs.NodeOnForgetter = (*node)(nil)

// OnForget closes the descriptor of a file made by TMPFILE that was never linked.
func (n *node) OnForget() { n.dropTmp() }

func (n *node) dropTmp() {
	if fd := n.tmp.Swap(0); fd != 0 {
		_ = unix.Close(int(fd - 1))
	}
}

// Tmpfile is open(O_TMPFILE) in the directory, as the caller, with our file handle. The node
// keeps a descriptor of the file until it gets a name (LINK) or is forgotten: that is how a
// later linkat of /proc/self/fd/N reaches it.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	flags = n.b.backendFlags(flags)
	dir, rel, err := n.b.at(n.rel())
	if err != nil {
		return nil, nil, 0, errnoOf(err)
	}
	oflags := int(flags) | unix.O_TMPFILE | unix.O_CLOEXEC
	var fd int
	err = n.create(ctx, func() (err error) {
		fd, err = unix.Openat(dir, rel, oflags, mode)
		return err
	})
	n.b.done(dir)
	if err != nil {
		return nil, nil, 0, errnoOf(err)
	}
	// O_EXCL: the file can never be linked.
	return n.newFileEntry(ctx, fd, flags, mode, flags&unix.O_EXCL == 0, out)
}

// newFile wraps a backend descriptor this package opened, of the inode numbered ino.
func (b *backing) newFile(fd int, flags uint32, ino uint64) fs.FileHandle {
	f := newFile(fd, flags)
	f.serviceTimes = b.serviceTimes
	f.locks, f.ino, f.releasing = b.locks, ino, &b.releasing
	if b.passthrough != nil {
		pf := &ptFile{file: f, p: b.passthrough}
		pf.backing.Store(-1)
		return pf
	}
	return f
}

// stableAttr is the inode identity of st as the go-fuse loopback computes it
// (LoopbackRoot.idFromStat: the device mixed into the inode number, the generation from the
// birth time), so a later LOOKUP of the same file finds the inode Create made.
func (b *backing) stableAttr(st *syscall.Stat_t, x *unix.Statx_t) fs.StableAttr {
	gen := uint64(1)
	if x.Mask&unix.STATX_BTIME != 0 && (x.Btime.Sec != 0 || x.Btime.Nsec != 0) {
		gen = uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
	}
	swapped := (st.Dev << 32) | (st.Dev >> 32)
	swappedRoot := (b.rootDev << 32) | (b.rootDev >> 32)
	return fs.StableAttr{Mode: st.Mode, Gen: gen, Ino: (swapped ^ swappedRoot) ^ st.Ino}
}

// conv converts v to the type of its first argument.
func conv[T, V ~int32 | ~int64 | ~uint32 | ~uint64](_ T, v V) T { return T(v) }

// statFromStatx fills st from x like the go-fuse loopback does.
func statFromStatx(x *unix.Statx_t, st *syscall.Stat_t) {
	// Field types differ between architectures (Nlink and Blksize): convert to each.
	*st = syscall.Stat_t{
		Dev:  unix.Mkdev(x.Dev_major, x.Dev_minor),
		Ino:  x.Ino,
		Mode: uint32(x.Mode),
		Uid:  x.Uid,
		Gid:  x.Gid,
		Rdev: unix.Mkdev(x.Rdev_major, x.Rdev_minor),
		Size: int64(x.Size),
		Atim: syscall.Timespec{Sec: x.Atime.Sec, Nsec: int64(x.Atime.Nsec)},
		Mtim: syscall.Timespec{Sec: x.Mtime.Sec, Nsec: int64(x.Mtime.Nsec)},
		Ctim: syscall.Timespec{Sec: x.Ctime.Sec, Nsec: int64(x.Ctime.Nsec)},
	}
	st.Nlink = conv(st.Nlink, x.Nlink)
	st.Blksize = conv(st.Blksize, x.Blksize)
	st.Blocks = int64(x.Blocks)
}

var _ fs.NodeCopyFileRanger = (*node)(nil)

// CopyFileRange copies between two of our handles (the loopback's version only knows its own
// handle type).
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode,
	fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	in, ok := asFile(fhIn)
	if !ok {
		return 0, unix.ENOTSUP
	}
	o, ok := asFile(fhOut)
	if !ok {
		return 0, unix.ENOTSUP
	}
	i64, o64 := int64(offIn), int64(offOut)
	c, err := unix.CopyFileRange(in.fd, &i64, o.fd, &o64, int(length), int(flags))
	if err != nil {
		return 0, errnoOf(err)
	}
	return uint32(c), 0
}
