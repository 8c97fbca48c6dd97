package fusefs_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
)

// chownKeepWorkload changes the owner of dir/path, dir/fd and dir/link (a symlink) to -1,-1
// by path, through a descriptor and without following the link, and prints each one's
// ctime as seen through dir afterwards.
func chownKeepWorkload(dir string) error {
	calls := []struct {
		name  string
		chown func(p string) error
	}{
		{"path", func(p string) error { return unix.Chown(p, -1, -1) }},
		{"fd", func(p string) error {
			fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer func() { _ = unix.Close(fd) }()
			return unix.Fchown(fd, -1, -1)
		}},
		{"link", func(p string) error { return unix.Lchown(p, -1, -1) }},
		{"suid", func(p string) error { return unix.Chown(p, -1, -1) }},
	}
	for _, c := range calls {
		p := filepath.Join(dir, c.name)
		if err := c.chown(p); err != nil {
			return fmt.Errorf("chown %s -1 -1: %w", c.name, err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		fmt.Printf("%s %d %o\n", c.name, st.Ctim.Nano(), st.Mode&0o7777)
	}
	return nil
}

func init() { workloads["chownkeep"] = chownKeepWorkload }

// TestChownKeepIDsCtime: chown(f, -1, -1) changes no owner, but natively the file system
// sets the file's ctime to now and drops a set-user-ID bit. Through the layer the backing
// file must change so too, and the view must show a new ctime (the backing file's with
// direct I/O; with the kernel cache, the kernel's own, which it keeps for a cached inode)
// and the mode the backing file has.
func TestChownKeepIDsCtime(t *testing.T) {
	for _, cache := range []fusefs.CacheMode{fusefs.CacheNone, fusefs.CacheKernel} {
		t.Run(string(cache), func(t *testing.T) {
			c := fusetest.Mount(t, nil, fusefs.Options{Cache: cache})
			names := []string{"native", "path", "fd", "native-suid", "suid"}
			for _, n := range names {
				if err := os.WriteFile(filepath.Join(c.Orig, n), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
				if strings.HasSuffix(n, "suid") {
					if err := unix.Chmod(filepath.Join(c.Orig, n), 0o4755); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := os.Symlink("path", filepath.Join(c.Orig, "link")); err != nil {
				t.Fatal(err)
			}
			names = append(names, "link")
			before := map[string]int64{}
			for _, n := range names {
				before[n] = ctime(t, filepath.Join(c.Orig, n))
			}
			time.Sleep(50 * time.Millisecond) // a few ticks of the clock file systems take ctime from

			for _, n := range []string{"native", "native-suid"} {
				if err := unix.Chown(filepath.Join(c.Orig, n), -1, -1); err != nil {
					t.Fatal(err)
				}
			}
			native := ctime(t, filepath.Join(c.Orig, "native")) != before["native"]
			nativeMode := mode(t, filepath.Join(c.Orig, "native-suid"))
			cmd := workloadCmd("chownkeep", c.Mnt)
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("chown through the view: %v", err)
			}
			view, viewMode := map[string]int64{}, map[string]uint32{}
			sc := bufio.NewScanner(&out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) == 3 {
					view[f[0]], _ = strconv.ParseInt(f[1], 10, 64)
					m, _ := strconv.ParseUint(f[2], 8, 32)
					viewMode[f[0]] = uint32(m)
				}
			}
			if m := mode(t, filepath.Join(c.Orig, "suid")); m != nativeMode || viewMode["suid"] != nativeMode {
				t.Errorf("set-user-ID file after chown -1 -1: mode %o in the view, %o behind it, natively %o", viewMode["suid"], m, nativeMode)
			}
			for _, n := range []string{"path", "fd", "link", "suid"} {
				back := ctime(t, filepath.Join(c.Orig, n))
				if changed := back != before[n]; changed != native {
					t.Errorf("%s: backing ctime changed %v, natively %v", n, changed, native)
				}
				if changed := view[n] != before[n]; changed != native {
					t.Errorf("%s: ctime in the view changed %v, natively %v", n, changed, native)
				}
				if cache == fusefs.CacheNone && view[n] != back {
					t.Errorf("%s: ctime in the view %d, backing file %d", n, view[n], back)
				}
			}
		})
	}
}

func ctime(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ctim.Nano()
}

func mode(t *testing.T, p string) uint32 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777
}
