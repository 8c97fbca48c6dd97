package fusefs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
)

// TestTraceFlagValues checks that the flag values trace names are the ones the layer
// records: the FUSE protocol's and the system calls'.
func TestTraceFlagValues(t *testing.T) {
	for _, tt := range []struct {
		name        string
		trace, want uint32
	}{
		{"SetattrMode", trace.SetattrMode, fuse.FATTR_MODE},
		{"SetattrUID", trace.SetattrUID, fuse.FATTR_UID},
		{"SetattrGID", trace.SetattrGID, fuse.FATTR_GID},
		{"SetattrSize", trace.SetattrSize, fuse.FATTR_SIZE},
		{"SetattrAtime", trace.SetattrAtime, fuse.FATTR_ATIME},
		{"SetattrMtime", trace.SetattrMtime, fuse.FATTR_MTIME},
		{"SetattrFH", trace.SetattrFH, fuse.FATTR_FH},
		{"SetattrAtimeNow", trace.SetattrAtimeNow, fuse.FATTR_ATIME_NOW},
		{"SetattrMtimeNow", trace.SetattrMtimeNow, fuse.FATTR_MTIME_NOW},
		{"SetattrLockOwner", trace.SetattrLockOwner, fuse.FATTR_LOCKOWNER},
		{"SetattrCtime", trace.SetattrCtime, fuse.FATTR_CTIME},
		{"SetattrKillSUIDGID", trace.SetattrKillSUIDGID, fuse.FATTR_KILL_SUIDGID},
		{"FsyncDatasync", trace.FsyncDatasync, 1}, // FUSE_FSYNC_FDATASYNC (fuse_kernel.h; go-fuse has no name for it)
		{"RenameNoReplace", trace.RenameNoReplace, unix.RENAME_NOREPLACE},
		{"RenameExchange", trace.RenameExchange, unix.RENAME_EXCHANGE},
		{"RenameWhiteout", trace.RenameWhiteout, unix.RENAME_WHITEOUT},
		{"SeekData", trace.SeekData, unix.SEEK_DATA},
		{"SeekHole", trace.SeekHole, unix.SEEK_HOLE},
	} {
		if tt.trace != tt.want {
			t.Errorf("trace.%s = %#x, want %#x", tt.name, tt.trace, tt.want)
		}
	}
}
