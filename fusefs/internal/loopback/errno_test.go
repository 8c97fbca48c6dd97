package loopback

import (
	"os"
	"syscall"
	"testing"
)

func TestToErrno(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"errno", syscall.ENOSPC, syscall.ENOSPC},
		{"wrapped errno", &os.PathError{Op: "open", Path: "x", Err: syscall.EROFS}, syscall.EROFS},
		{"not exist", os.ErrNotExist, syscall.ENOENT},
		{"other", os.ErrDeadlineExceeded, syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := toErrno(tc.err); got != tc.want {
				t.Errorf("toErrno(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
