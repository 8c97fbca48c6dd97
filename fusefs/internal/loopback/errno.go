package loopback

import (
	"errors"
	iofs "io/fs"
	"syscall"
)

// errnoOf returns the errno of a syscall error unchanged, and maps anything else with
// toErrno (without logging).
func errnoOf(err error) syscall.Errno {
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	e, _ := toErrno(err)
	return e
}

// toErrno is the single mapping from a Go error to the errno the caller sees: a wrapped
// syscall.Errno first, then the io/fs sentinels, else EIO (known is then false). go-fuse's fs.ToErrno is not used: it returns ENOSYS for wrapped
// errors.
func toErrno(err error) (e syscall.Errno, known bool) {
	if err == nil {
		return 0, true
	}
	if errors.As(err, &e) {
		return e, true
	}
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return syscall.ENOENT, true
	case errors.Is(err, iofs.ErrExist):
		return syscall.EEXIST, true
	case errors.Is(err, iofs.ErrPermission):
		return syscall.EACCES, true
	case errors.Is(err, iofs.ErrClosed):
		return syscall.EBADF, true
	case errors.Is(err, iofs.ErrInvalid):
		return syscall.EINVAL, true
	}
	return syscall.EIO, false
}
