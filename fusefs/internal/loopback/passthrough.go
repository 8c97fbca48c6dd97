package loopback

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Kernel passthrough (Options.Passthrough): the kernel reads and writes an open file's
// backing file itself, in the caller's thread, instead of sending READ and WRITE requests.
// go-fuse's bridge registers the backing file of an inode's first open (FilePassthroughFder
// on the handle; one backing file per inode, shared by its later opens) and replies with
// FOPEN_PASSTHROUGH. This file adds what a recording needs on top:
//
//   - A refusal stays with its file. The bridge turns passthrough off for the whole mount
//     after one failed registration; here the registration goes through Passthrough,
//     which counts a refusal, remembers its reason and tells the bridge "no backing file"
//     for that open only, which the layer then serves itself.
//   - An open the kernel passes through does not also ask for direct I/O, which would
//     take precedence over passthrough; an open served by the layer keeps it, so that
//     its inode never enters the kernel's cached I/O mode that passthrough opens of the
//     same inode would conflict with.
//   - A set-user-ID or set-group-ID file is never passed through: the kernel writes a
//     backing file with the server's credentials, which would keep the bits where a
//     write by the application drops them.

// PassthroughStats counts the opens of regular files in passthrough mode.
type PassthroughStats struct {
	Opens      uint64 // the kernel serves their reads and writes
	LayerOpens uint64 // the layer does
	// Refused is the kernel's first reason for refusing a backing file ("" if none).
	Refused string
}

// Passthrough turns kernel passthrough on for a mount (Options.Passthrough): it registers
// backing files for the bridge (it is the bridge's fs.ServerCallbacks) and counts the
// outcome of each open. Its zero value is ready to use.
type Passthrough struct {
	srv        atomic.Pointer[fuse.Server]
	opens      atomic.Uint64
	layerOpens atomic.Uint64

	mu      sync.Mutex // guards refused
	refused string
}

var _ fs.ServerCallbacks = (*Passthrough)(nil)

func (p *Passthrough) DeleteNotify(parent uint64, child uint64, name string) fuse.Status {
	return p.srv.Load().DeleteNotify(parent, child, name)
}

func (p *Passthrough) EntryNotify(parent uint64, name string) fuse.Status {
	return p.srv.Load().EntryNotify(parent, name)
}

func (p *Passthrough) InodeNotify(node uint64, off int64, length int64) fuse.Status {
	return p.srv.Load().InodeNotify(node, off, length)
}

func (p *Passthrough) InodeRetrieveCache(node uint64, offset int64, dest []byte) (int, fuse.Status) {
	return p.srv.Load().InodeRetrieveCache(node, offset, dest)
}

func (p *Passthrough) InodeNotifyStoreCache(node uint64, offset int64, data []byte) fuse.Status {
	return p.srv.Load().InodeNotifyStoreCache(node, offset, data)
}

// RegisterBackingFd registers m's descriptor with the kernel. A refusal is counted and
// reported to the bridge as "no backing file" (id 0, no error), so that it serves this
// open without passthrough and keeps trying for the next ones.
func (p *Passthrough) RegisterBackingFd(m *fuse.BackingMap) (int32, syscall.Errno) {
	id, errno := p.srv.Load().RegisterBackingFd(m)
	if errno != 0 {
		p.refuse(refusal(errno))
		return 0, 0
	}
	return id, 0
}

// UnregisterBackingFd releases a backing file the kernel no longer uses for any open.
func (p *Passthrough) UnregisterBackingFd(id int32) syscall.Errno {
	return p.srv.Load().UnregisterBackingFd(id)
}

func (p *Passthrough) refuse(why string) {
	p.mu.Lock()
	if p.refused == "" {
		p.refused = why
	}
	p.mu.Unlock()
}

// refusal explains why the kernel refused a backing file.
func refusal(errno syscall.Errno) string {
	switch errno {
	case syscall.EPERM:
		return "the kernel refused the backing file: not permitted (passthrough needs CAP_SYS_ADMIN) (EPERM)"
	case syscall.ELOOP:
		return "the kernel refused the backing file: its file system is stacked too deep (ELOOP)"
	case syscall.EOPNOTSUPP, syscall.ENOTTY, syscall.ENOSYS:
		return "the kernel refused the backing file: no passthrough on this connection (" + errno.Error() + ")"
	case syscall.EINVAL:
		return "the kernel refused the backing file: its file system cannot be passed through (EINVAL)"
	}
	return "the kernel refused the backing file: " + errno.Error()
}

// opened settles the flags of an open or create reply of a regular file and counts it.
func (p *Passthrough) opened(flags *uint32) {
	if *flags&fuse.FOPEN_PASSTHROUGH != 0 {
		*flags &^= fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES
		p.opens.Add(1)
		return
	}
	p.layerOpens.Add(1)
}

// Stats returns the counts so far.
func (p *Passthrough) Stats() PassthroughStats {
	p.mu.Lock()
	why := p.refused
	p.mu.Unlock()
	return PassthroughStats{Opens: p.opens.Load(), LayerOpens: p.layerOpens.Load(), Refused: why}
}

// passthroughFS is the bridge as the server sees it in passthrough mode.
type passthroughFS struct {
	fuse.RawFileSystem
	files *Passthrough
}

// Init hands the server to the registrations. It is not passed on: the bridge keeps
// files as its server callbacks (fs.Options.ServerCallbacks), which is how registrations
// reach passthroughFiles, and go-fuse's bridge does nothing else with the server.
func (p passthroughFS) Init(s *fuse.Server) { p.files.srv.Store(s) }

func (p passthroughFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := p.RawFileSystem.Open(cancel, in, out)
	if st == fuse.OK {
		p.files.opened(&out.OpenFlags)
	}
	return st
}

func (p passthroughFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	st := p.RawFileSystem.Create(cancel, in, name, out)
	if st == fuse.OK {
		p.files.opened(&out.OpenFlags)
	}
	return st
}

func (p passthroughFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	st := p.RawFileSystem.Tmpfile(cancel, in, out)
	if st == fuse.OK {
		p.files.opened(&out.OpenFlags)
	}
	return st
}

// ptFile is an open file whose reads and writes the kernel may serve from a backing file.
type ptFile struct {
	*file
	p *Passthrough
	// backing is the descriptor offered as the backing file, when this open offered one
	// (the kernel keeps its own reference to it; -1: none).
	backing atomic.Int32
}

var _ fs.FilePassthroughFder = (*ptFile)(nil)

// PassthroughFd offers an O_PATH descriptor of the backend file as the backing file, except
// for a set-ID file (see above). The kernel uses only its path: it opens a backing file of
// its own for each open of the application, closed with it. Not the open's own descriptor:
// the kernel keeps the registered file while any open of the inode uses it, until after
// the layer has answered the last release, and a flock(2) lock lives as long as its open
// file, so a lock an application takes through this open would outlive the application's
// close of it. An O_PATH descriptor is no open of the backend: a backend that tells open
// files apart (s3fs hides a file unlinked while open under a temporary name) sees no open
// that outlives the application's.
func (f *ptFile) PassthroughFd() (int, bool) {
	var st syscall.Stat_t
	if err := syscall.Fstat(f.fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, false
	}
	if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
		f.p.refuse("a set-user-ID or set-group-ID file is served by the layer")
		return 0, false
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(f.fd), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		f.p.refuse("the backing file could not be opened again: " + err.Error())
		return 0, false
	}
	if old := f.backing.Swap(int32(fd)); old >= 0 {
		_ = unix.Close(int(old))
	}
	return fd, true
}

// Release closes the backing descriptor this open offered (the kernel holds its own
// reference while it needs the file) and the open itself.
func (f *ptFile) Release(ctx context.Context) syscall.Errno {
	if fd := f.backing.Swap(-1); fd >= 0 {
		_ = unix.Close(int(fd))
	}
	return f.file.Release(ctx)
}
