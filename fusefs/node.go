package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// backing is shared by all nodes of one mount.
type backing struct {
	root     *fs.LoopbackRoot
	rootFd   int    // O_PATH descriptor of the backend root, opened before the mount
	openFlag uint32 // FOPEN_* flags for every open/create reply
}

// node is a loopback node whose Open, Create and Tmpfile return our file handle, so reads
// are eager and kernel passthrough is never offered. Everything else is the go-fuse
// loopback, reached through the backend root path; timing happens in [tracer], one level up.
type node struct {
	*fs.LoopbackNode
	b *backing
}

var _ fs.NodeWrapChilder = (*node)(nil)

// WrapChild makes every node the loopback creates (lookup, create, mkdir, ...) one of ours.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	if lb, ok := ops.(*fs.LoopbackNode); ok {
		return &node{LoopbackNode: lb, b: n.b}
	}
	return ops
}

// newRoot builds the root node of a loopback on path (which resolves to the same directory as
// rootFd) with our node type for every child.
func newRoot(path string, rootFd int, cache CacheMode) (*node, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(rootFd, &st); err != nil {
		return nil, err
	}
	b := &backing{rootFd: rootFd}
	switch cache {
	case CacheNone:
		b.openFlag = fuse.FOPEN_DIRECT_IO
	case CacheKernel:
		// Like a kernel file system, a re-open keeps the cached pages; the kernel drops them
		// when it sees mtime or size change (CAP_AUTO_INVAL_DATA, on by default).
		b.openFlag = fuse.FOPEN_KEEP_CACHE
	}
	b.root = &fs.LoopbackRoot{Path: path, Dev: uint64(st.Dev)}
	root := &node{LoopbackNode: &fs.LoopbackNode{RootData: b.root}, b: b}
	b.root.RootNode = root
	return root, nil
}

var _ fs.NodeOpener = (*node)(nil)

// Open opens the backend file relative to the root descriptor without following symlinks in
// any component (the go-fuse loopback does the same with two more syscalls).
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	flags &^= syscall.O_APPEND | fuse.FMODE_EXEC
	rel := n.Path(n.b.root.RootNode.EmbeddedInode())
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{Flags: uint64(flags) | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	fd, err := unix.Openat2(n.b.rootFd, rel, &how)
	if err == unix.ENOSYS {
		fd, err = unix.Openat(n.b.rootFd, rel, int(flags)|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, 0, errnoOf(err)
	}
	return newFile(fd, flags), n.b.openFlag, 0
}

var _ fs.NodeCreater = (*node)(nil)

// Create is the loopback's create with our file handle.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, fh, _, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return ch, fh, 0, errno
	}
	return ch, n.b.adopt(fh, flags&^syscall.O_APPEND), n.b.openFlag, 0
}

var _ fs.NodeTmpfiler = (*node)(nil)

// Tmpfile is the loopback's O_TMPFILE create with our file handle.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, fh, _, errno := n.LoopbackNode.Tmpfile(ctx, flags, mode, out)
	if errno != 0 {
		return ch, fh, 0, errno
	}
	return ch, n.b.adopt(fh, flags&^syscall.O_APPEND), n.b.openFlag, 0
}

// adopt takes the descriptor of a loopback file handle into our file type.
func (b *backing) adopt(fh fs.FileHandle, flags uint32) fs.FileHandle {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return fh
	}
	fd, ok := lf.PassthroughFd() // only reads the descriptor number; nothing is registered
	if !ok {
		return fh
	}
	return &file{lf: lf, fd: fd, flags: flags}
}

var _ fs.NodeCopyFileRanger = (*node)(nil)

// CopyFileRange copies between two of our handles (the loopback's version only knows its own
// handle type).
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode,
	fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	in, ok := fhIn.(*file)
	if !ok {
		return 0, unix.ENOTSUP
	}
	o, ok := fhOut.(*file)
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
