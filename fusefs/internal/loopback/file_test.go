package loopback

import (
	"reflect"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
)

// TestFileOffersEveryLoopbackFileOp checks that our file handle implements every fs.File*
// interface the go-fuse loopback file does, except kernel passthrough.
func TestFileOffersEveryLoopbackFileOp(t *testing.T) {
	ifaces := []reflect.Type{
		reflect.TypeFor[fs.FileReader](), reflect.TypeFor[fs.FileWriter](), reflect.TypeFor[fs.FileWritever](),
		reflect.TypeFor[fs.FileReleaser](), reflect.TypeFor[fs.FileFlusher](), reflect.TypeFor[fs.FileFsyncer](),
		reflect.TypeFor[fs.FileGetlker](), reflect.TypeFor[fs.FileSetlker](), reflect.TypeFor[fs.FileSetlkwer](),
		reflect.TypeFor[fs.FileSetattrer](), reflect.TypeFor[fs.FileGetattrer](), reflect.TypeFor[fs.FileStatxer](),
		reflect.TypeFor[fs.FileLseeker](), reflect.TypeFor[fs.FileAllocater](), reflect.TypeFor[fs.FileIoctler](),
		reflect.TypeFor[fs.FilePassthroughFder](), reflect.TypeFor[fs.FileReaddirenter](),
		reflect.TypeFor[fs.FileReleasedirer](), reflect.TypeFor[fs.FileSeekdirer](), reflect.TypeFor[fs.FileFsyncdirer](),
		reflect.TypeFor[fs.FileHandle](),
	}
	lf := reflect.TypeFor[*fs.LoopbackFile]()
	ours := reflect.TypeFor[*file]()
	pt := reflect.TypeFor[fs.FilePassthroughFder]()
	for _, it := range ifaces {
		switch {
		case it == pt:
			if ours.Implements(it) {
				t.Errorf("file implements %s: reads and writes would bypass the tracer", it)
			}
		case lf.Implements(it) && !ours.Implements(it):
			t.Errorf("LoopbackFile implements %s but our file does not", it)
		}
	}
}
