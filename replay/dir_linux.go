package replay

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// Dir is the Backend for a mounted directory: each method is the one system call an
// application would make, issued relative to the root directory's file descriptor.
//
// Confinement: the root is held open; parent directories are resolved with
// openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS) relative to it and cached; the final
// component is then used with the *at call and AT_SYMLINK_NOFOLLOW (or an equivalent
// check) so that no symlink, "..", or absolute path can reach outside the root. Opens
// resolve the whole name with openat2(RESOLVE_BENEATH), so a symlink is followed only
// while it stays below the root; one that leaves it fails with an error wrapping
// ErrEscape.
type Dir struct {
	*dirCore
	// start is where calls on names below it begin their path walk (see From); "" is the
	// root.
	start string
}

// dirCore is the state shared by a Dir and its views.
type dirCore struct {
	path   string
	rootFD int
	target trace.Target
	// uid and gid are the replaying user's (Chown), read once: reading them per call would
	// add two system calls to the timed one.
	uid, gid int
	// noFchmodat2 is set once the kernel answered ENOSYS to fchmodat2 (before Linux 6.6):
	// Chmod then checks for a symlink with a call of its own first.
	noFchmodat2 atomic.Bool

	// walk orders calls that walk a name from the root (shared) against the calls that
	// can make a name resolve somewhere else: rename, link, symlink (exclusive). It closes
	// the window between the parent check in at and the call.
	walk sync.RWMutex

	mu sync.RWMutex // guards dirs and dead; taken after walk, never before it
	// dirs caches O_PATH descriptors of directories below the root, by name.
	dirs map[string]int
	// dead holds descriptors dropped from dirs (rename, rmdir) that a concurrent call may
	// still be using; they are closed by Close.
	dead []int
}

var (
	_ Backend = (*Dir)(nil)
	_ Walker  = (*Dir)(nil)
)

// From implements Walker: the view issues calls on names below dir relative to dir.
func (d *Dir) From(dir string) Backend {
	if dir == d.start {
		return d
	}
	return &Dir{dirCore: d.dirCore, start: dir}
}

// OpenDir opens the directory at path as a replay target. The directory must exist.
func OpenDir(path string) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("replay: target %q: %w", path, err)
	}
	fd, err := unix.Open(abs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("replay: open target %q: %w", abs, err)
	}
	d := &Dir{dirCore: &dirCore{path: abs, rootFD: fd, dirs: map[string]int{}, uid: os.Geteuid(), gid: os.Getegid()}}
	d.target = trace.Target{Path: abs}
	if m, err := sysinfo.MountOf(abs); err == nil {
		d.target.FSType = m.FSType
		d.target.Source = m.Source
		d.target.Mount = m.MountPoint
	}
	return d, nil
}

// Target implements Backend.
func (d *Dir) Target() trace.Target { return d.target }

// BeginPhase implements Backend: a directory prepares and replays alike.
func (d *Dir) BeginPhase(string) {}

// Close implements Backend. Closing a view (see From) does nothing.
func (d *Dir) Close() error {
	if d.start != "" {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, fd := range d.dirs {
		_ = unix.Close(fd)
	}
	for _, fd := range d.dead {
		_ = unix.Close(fd)
	}
	d.dirs, d.dead = map[string]int{}, nil
	if d.rootFD >= 0 {
		_ = unix.Close(d.rootFD)
		d.rootFD = -1
	}
	return nil
}

func escapeErr(name string, err error) error {
	if err == unix.EXDEV || err == unix.ELOOP {
		return fmt.Errorf("replay: %q: %w", name, ErrEscape)
	}
	return err
}

// dirFD returns an O_PATH descriptor of directory name (checked) below the root.
func (d *Dir) dirFD(name string) (int, error) {
	if name == "" {
		return d.rootFD, nil
	}
	d.mu.RLock()
	fd, ok := d.dirs[name]
	d.mu.RUnlock()
	if ok {
		return fd, nil
	}
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := unix.Openat2(d.rootFD, name, &how)
	if err != nil {
		if err == unix.EXDEV {
			return -1, escapeErr(name, err)
		}
		return -1, err
	}
	d.mu.Lock()
	if old, ok := d.dirs[name]; ok {
		d.mu.Unlock()
		_ = unix.Close(fd)
		return old, nil
	}
	d.dirs[name] = fd
	d.mu.Unlock()
	return fd, nil
}

// forget drops cached descriptors of name and everything below it.
func (d *Dir) forget(name string) {
	d.mu.Lock()
	for k, fd := range d.dirs {
		if fold.IsUnder(k, name) {
			delete(d.dirs, k)
			d.dead = append(d.dead, fd)
		}
	}
	d.mu.Unlock()
}

// at checks name and returns the descriptor and name to issue a call with.
//
// The call itself is then issued relative to the root with the whole name, so that the
// kernel walks every component inside the timed call as it did for the application (on
// a FUSE target: the same lookups). The parent's cached descriptor, resolved with
// RESOLVE_BENEATH, proves that walk stays below the root: a directory in the cache can
// only be replaced through rmdir or rename, which drop it from the cache.
func (d *Dir) at(name string) (int, string, error) {
	if err := CheckName(name); err != nil {
		return -1, "", err
	}
	dir := fold.Parent(name)
	pfd, err := d.dirFD(dir)
	if err != nil {
		return -1, "", err
	}
	if s := d.start; s != "" && len(name) > len(s) && name[len(s)] == '/' && name[:len(s)] == s {
		if s == dir {
			return pfd, name[len(s)+1:], nil
		}
		if fd, err := d.dirFD(s); err == nil {
			return fd, name[len(s)+1:], nil
		}
	}
	return d.rootFD, name, nil
}

// parentAt resolves name to (parent descriptor, last component).
func (d *Dir) parentAt(name string) (int, string, error) {
	if err := CheckName(name); err != nil {
		return -1, "", err
	}
	dir, base := fold.SplitName(name)
	fd, err := d.dirFD(dir)
	return fd, base, err
}

// IsEmpty implements Backend.
func (d *Dir) IsEmpty(ctx context.Context) (bool, error) {
	f, err := os.Open(d.path)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	names, err := f.Readdirnames(1)
	switch {
	case len(names) > 0:
		return false, nil
	case err == io.EOF:
		return true, nil
	case err != nil:
		return false, fmt.Errorf("replay: list target: %w", err)
	}
	return true, nil
}

// Reset implements Backend. It removes entries without following symlinks.
func (d *Dir) Reset(ctx context.Context) error {
	d.mu.Lock()
	for k, fd := range d.dirs {
		delete(d.dirs, k)
		d.dead = append(d.dead, fd)
	}
	d.mu.Unlock()
	f, err := os.Open(d.path)
	if err != nil {
		return fmt.Errorf("replay: reset target: %w", err)
	}
	names, err := f.Readdirnames(-1)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("replay: reset target: %w", err)
	}
	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(d.path, n)); err != nil {
			return fmt.Errorf("replay: reset target: %w", err)
		}
	}
	return nil
}

// Lstat implements Backend.
func (d *Dir) Lstat(ctx context.Context, name string) (Attr, error) {
	d.walk.RLock()
	defer d.walk.RUnlock()
	var st unix.Stat_t
	var err error
	if name == "" {
		err = unix.Fstat(d.rootFD, &st)
	} else {
		fd, base, err2 := d.at(name)
		if err2 != nil {
			return Attr{}, err2
		}
		err = unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return Attr{}, err
	}
	return Attr{Mode: st.Mode, Size: st.Size}, nil
}

// Access implements Backend.
func (d *Dir) Access(ctx context.Context, name string, mask uint32) error {
	d.walk.RLock()
	defer d.walk.RUnlock()
	if name == "" {
		return unix.Faccessat(d.rootFD, ".", mask, 0)
	}
	fd, base, err := d.at(name)
	if err != nil {
		return err
	}
	return unix.Faccessat(fd, base, mask, unix.AT_SYMLINK_NOFOLLOW)
}

var _ SpaceReporter = (*Dir)(nil)

// Space implements SpaceReporter.
func (d *Dir) Space(ctx context.Context) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(d.rootFD, &st); err != nil {
		return Space{}, fmt.Errorf("replay: statfs %q: %w", d.path, err)
	}
	return Space{FreeBytes: st.Bavail * uint64(st.Bsize), FreeFiles: st.Ffree, Files: st.Files, BlockSize: st.Bsize}, nil
}

// Statfs implements Backend.
func (d *Dir) Statfs(ctx context.Context) error {
	var st unix.Statfs_t
	return unix.Fstatfs(d.rootFD, &st)
}

// openFlags are the open(2) flags replay passes on; others (O_NOCTTY, O_CLOEXEC,
// FMODE bits the kernel adds) are dropped.
const openFlags = unix.O_ACCMODE | unix.O_APPEND | unix.O_CREAT | unix.O_EXCL | unix.O_TRUNC |
	unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_SYNC | unix.O_DSYNC | unix.O_DIRECT |
	unix.O_NONBLOCK | unix.O_LARGEFILE | unix.O_TMPFILE

// Open implements Backend.
func (d *Dir) Open(ctx context.Context, name string, flags int, perm uint32) (File, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	p := name
	if p == "" {
		p = "."
	}
	how := unix.OpenHow{
		Flags:   uint64(flags&openFlags) | unix.O_CLOEXEC,
		Mode:    uint64(perm & 0o7777),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 {
		how.Mode = 0
	}
	dirfd := d.rootFD
	if s := d.start; s != "" && len(name) > len(s) && name[len(s)] == '/' && name[:len(s)] == s {
		if fd, err := d.dirFD(s); err == nil {
			dirfd, p = fd, name[len(s)+1:]
		}
	}
	fd, err := unix.Openat2(dirfd, p, &how)
	if err == unix.EXDEV && dirfd != d.rootFD {
		// A symlink leaves the walk's start directory: resolve from the root, which is
		// the confinement that counts.
		fd, err = unix.Openat2(d.rootFD, name, &how)
	}
	if err != nil {
		return nil, escapeErr(name, err)
	}
	return &dirFile{fd: fd}, nil
}

// Mkdir implements Backend.
func (d *Dir) Mkdir(ctx context.Context, name string, perm uint32) error {
	d.walk.RLock()
	defer d.walk.RUnlock()
	fd, base, err := d.at(name)
	if err != nil {
		return err
	}
	return unix.Mkdirat(fd, base, perm&0o7777)
}

// Mknod implements Backend.
func (d *Dir) Mknod(ctx context.Context, name string, mode uint32) error {
	d.walk.RLock()
	defer d.walk.RUnlock()
	fd, base, err := d.at(name)
	if err != nil {
		return err
	}
	return unix.Mknodat(fd, base, mode, 0)
}

// Remove implements Backend.
func (d *Dir) Remove(ctx context.Context, name string) error {
	d.walk.RLock()
	defer d.walk.RUnlock()
	fd, base, err := d.at(name)
	if err != nil {
		return err
	}
	return unix.Unlinkat(fd, base, 0)
}

// Rmdir implements Backend.
func (d *Dir) Rmdir(ctx context.Context, name string) error {
	d.walk.RLock()
	defer d.walk.RUnlock()
	fd, base, err := d.at(name)
	if err != nil {
		return err
	}
	err = unix.Unlinkat(fd, base, unix.AT_REMOVEDIR)
	if err == nil {
		d.forget(name)
	}
	return err
}

// Rename implements Backend.
func (d *Dir) Rename(ctx context.Context, from, to string, flags uint32) error {
	d.walk.Lock()
	defer d.walk.Unlock()
	fd1, b1, err := d.at(from)
	if err != nil {
		return err
	}
	fd2, b2, err := d.at(to)
	if err != nil {
		return err
	}
	err = unix.Renameat2(fd1, b1, fd2, b2, uint(flags))
	if err == nil {
		d.forget(from)
		d.forget(to)
	}
	return err
}

// Link implements Backend.
func (d *Dir) Link(ctx context.Context, existing, name string) error {
	d.walk.Lock()
	defer d.walk.Unlock()
	fd1, b1, err := d.at(existing)
	if err != nil {
		return err
	}
	fd2, b2, err := d.at(name)
	if err != nil {
		return err
	}
	return unix.Linkat(fd1, b1, fd2, b2, 0)
}

// Symlink implements Backend. The target text is stored as recorded; it is never
// followed outside the root (see Open).
func (d *Dir) Symlink(ctx context.Context, target, name string) error {
	d.walk.Lock()
	defer d.walk.Unlock()
	fd, base, err := d.at(name)
	if err != nil {
		return err
	}
	return unix.Symlinkat(target, fd, base)
}

// Readlink implements Backend.
func (d *Dir) Readlink(ctx context.Context, name string, buf []byte) (int, error) {
	d.walk.RLock()
	defer d.walk.RUnlock()
	fd, base, err := d.at(name)
	if err != nil {
		return 0, err
	}
	return unix.Readlinkat(fd, base, buf)
}

// Truncate implements Backend: open for writing (confined), ftruncate, close.
func (d *Dir) Truncate(ctx context.Context, name string, size int64) error {
	f, err := d.Open(ctx, name, unix.O_WRONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	fd := f.(*dirFile).fd
	err = unix.Ftruncate(fd, size)
	_ = unix.Close(fd)
	return err
}

// Chmod implements Backend. Like lchmod, it refuses a symlink (EOPNOTSUPP).
func (d *Dir) Chmod(ctx context.Context, name string, perm uint32) error {
	d.walk.RLock()
	defer d.walk.RUnlock()
	fd, base, err := d.at(name)
	if err != nil {
		return err
	}
	if name == "" {
		return unix.Fchmodat(d.rootFD, ".", perm&0o7777, 0)
	}
	if !d.noFchmodat2.Load() {
		// One call, as the application's chmod: fchmodat2 refuses a symlink itself.
		err := fchmodat2(fd, base, perm&0o7777, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.ENOSYS {
			return err
		}
		d.noFchmodat2.Store(true)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.EOPNOTSUPP
	}
	return unix.Fchmodat(fd, base, perm&0o7777, 0)
}

// Chown implements Backend (lchown to the replaying user).
func (d *Dir) Chown(ctx context.Context, name string) error {
	d.walk.RLock()
	defer d.walk.RUnlock()
	if name == "" {
		return unix.Fchownat(d.rootFD, ".", d.uid, d.gid, 0)
	}
	fd, base, err := d.at(name)
	if err != nil {
		return err
	}
	return unix.Fchownat(fd, base, d.uid, d.gid, unix.AT_SYMLINK_NOFOLLOW)
}

// fchmodat2 is the system call (Linux 6.6): with AT_SYMLINK_NOFOLLOW it refuses a symlink
// with EOPNOTSUPP. (unix.Fchmodat answers EOPNOTSUPP for every name where the call is
// missing, which would hide ENOSYS.)
func fchmodat2(dirfd int, path string, mode uint32, flags int) error {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	_, _, e := unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(mode), uintptr(flags), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// Utimes implements Backend.
func (d *Dir) Utimes(ctx context.Context, name string) error {
	d.walk.RLock()
	defer d.walk.RUnlock()
	if name == "" {
		return unix.UtimesNanoAt(d.rootFD, ".", nil, 0)
	}
	fd, base, err := d.at(name)
	if err != nil {
		return err
	}
	return unix.UtimesNanoAt(fd, base, nil, unix.AT_SYMLINK_NOFOLLOW)
}

// procName names the entry through the parent's descriptor, for the xattr calls that
// have no *at form. The l* variants never follow the last component.
func (d *Dir) procName(name string) (string, error) {
	fd, base, err := d.parentAt(name)
	if err != nil {
		return "", err
	}
	if name == "" {
		return "/proc/self/fd/" + strconv.Itoa(d.rootFD), nil
	}
	return "/proc/self/fd/" + strconv.Itoa(fd) + "/" + base, nil
}

// Getxattr implements Backend.
func (d *Dir) Getxattr(ctx context.Context, name, attr string, buf []byte) (int, error) {
	p, err := d.procName(name)
	if err != nil {
		return 0, err
	}
	return unix.Lgetxattr(p, attr, buf)
}

// Listxattr implements Backend.
func (d *Dir) Listxattr(ctx context.Context, name string, buf []byte) (int, error) {
	p, err := d.procName(name)
	if err != nil {
		return 0, err
	}
	return unix.Llistxattr(p, buf)
}

// Setxattr implements Backend.
func (d *Dir) Setxattr(ctx context.Context, name, attr string, value []byte, flags int) error {
	p, err := d.procName(name)
	if err != nil {
		return err
	}
	return unix.Lsetxattr(p, attr, value, flags)
}

// Removexattr implements Backend.
func (d *Dir) Removexattr(ctx context.Context, name, attr string) error {
	p, err := d.procName(name)
	if err != nil {
		return err
	}
	return unix.Lremovexattr(p, attr)
}

// dirFile is an open file of a Dir.
type dirFile struct {
	fd     int
	listed bool // a ReadDir happened since the last rewind
}

func (f *dirFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := unix.Pread(f.fd, p, off)
	if n < 0 {
		n = 0
	}
	return n, err
}

func (f *dirFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := unix.Pwrite(f.fd, p, off)
	if n < 0 {
		n = 0
	}
	return n, err
}

var _ RangeCopier = (*dirFile)(nil)

// CopyRange issues copy_file_range(2) until n bytes are copied or the source ends. The
// kernel falls back to its own copy within a file system; across file systems, or where
// the call does not exist, the engine copies with ReadAt and WriteAt.
func (f *dirFile) CopyRange(ctx context.Context, dst File, offIn, offOut, n int64) (int64, error) {
	d, ok := dst.(*dirFile)
	if !ok {
		return 0, ErrUnsupported
	}
	var done int64
	for done < n {
		c, err := unix.CopyFileRange(f.fd, &offIn, d.fd, &offOut, int(min(n-done, 1<<30)), 0)
		if err != nil {
			if done == 0 && (err == unix.EXDEV || err == unix.ENOSYS || err == unix.EOPNOTSUPP || err == unix.EINVAL) {
				return 0, fmt.Errorf("copy_file_range: %w (%w)", ErrUnsupported, err)
			}
			return done, err
		}
		if c <= 0 {
			break
		}
		done += int64(c)
	}
	return done, nil
}

func (f *dirFile) ReadDir(ctx context.Context, buf []byte, off int64) (int, error) {
	if off == 0 && f.listed {
		if _, err := unix.Seek(f.fd, 0, 0); err != nil {
			return 0, err
		}
	}
	f.listed = true
	n, err := unix.Getdents(f.fd, buf)
	if n < 0 {
		n = 0
	}
	return n, err
}

func (f *dirFile) Sync(ctx context.Context, datasync bool) error {
	if datasync {
		return unix.Fdatasync(f.fd)
	}
	return unix.Fsync(f.fd)
}

func (f *dirFile) Truncate(ctx context.Context, size int64) error {
	return unix.Ftruncate(f.fd, size)
}

func (f *dirFile) Stat(ctx context.Context) (Attr, error) {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return Attr{}, err
	}
	return Attr{Mode: st.Mode, Size: st.Size}, nil
}

func (f *dirFile) Allocate(ctx context.Context, mode uint32, off, length int64) error {
	return unix.Fallocate(f.fd, mode, off, length)
}

func (f *dirFile) Seek(ctx context.Context, off int64, whence int) (int64, error) {
	return unix.Seek(f.fd, off, whence)
}

func (f *dirFile) Lock(ctx context.Context, cmd LockCmd, typ int16, start, length int64) error {
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: length}
	switch cmd {
	case LockGet:
		return unix.FcntlFlock(uintptr(f.fd), unix.F_OFD_GETLK, &lk)
	case LockWait:
		// Poll instead of F_OFD_SETLKW: a replay whose lock order differs from the
		// recording must stay cancellable rather than block in the kernel for ever.
		for {
			err := unix.FcntlFlock(uintptr(f.fd), unix.F_OFD_SETLK, &lk)
			if err != unix.EAGAIN && err != unix.EACCES {
				return err
			}
			if ctx.Err() != nil {
				return unix.EINTR
			}
			time.Sleep(50 * time.Microsecond)
			lk = unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: length}
		}
	}
	return unix.FcntlFlock(uintptr(f.fd), unix.F_OFD_SETLK, &lk)
}

func (f *dirFile) Close(ctx context.Context) error {
	err := unix.Close(f.fd)
	f.fd = -1
	return err
}
