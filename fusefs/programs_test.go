package fusefs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
)

func need(t *testing.T, prog string) {
	t.Helper()
	testenv.Programs(t, testenv.FUSE, prog)
}

// sh runs a shell script in a child process and returns its stdout.
func sh(t *testing.T, script string, env ...string) []byte {
	t.Helper()
	cmd := exec.Command("sh", "-ec", script)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, errb.String())
	}
	return out.Bytes()
}

// makeTree writes a small tree with files of several sizes, a symlink and a hard link.
func makeTree(t *testing.T, dir string) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 40 {
		d := filepath.Join(dir, fmt.Sprintf("d%d", i%5), fmt.Sprintf("e%d", i%3))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, r.IntN(300_000))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", i)), b, 0o640+os.FileMode(i%2)*0o100); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("d0/e0/f0", filepath.Join(dir, "sym")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "d1/e1/f1"), filepath.Join(dir, "hard")); err != nil {
		t.Fatal(err)
	}
}

// canonTar is a byte-comparable archive of dir.
const canonTar = "tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -cf - -C "

// mountBoth returns a traced mount and a native directory for the same workload.
func mountBoth(t *testing.T, mode fusefs.Options) (mnt, native string, rec *fusetest.MemRecorder) {
	rec = fusetest.NewMemRecorder(0)
	c := fusetest.Mount(t, rec, mode)
	if mode.Passthrough {
		// Before the unmount: every regular file the program opened was passed through.
		t.Cleanup(func() {
			if st := c.Server.Passthrough(); st.LayerOpens != 0 {
				t.Errorf("opens through the layer in passthrough mode: %+v", st)
			}
		})
	}
	native = filepath.Join(filepath.Dir(c.Orig), "native")
	if err := os.Mkdir(native, 0o755); err != nil {
		t.Fatal(err)
	}
	return c.Mnt, native, rec
}

// forModes runs fn in each way the layer serves files: both cache modes, and kernel
// passthrough (whose reads and writes the layer does not see: a recorder times them in the
// kernel, so the layer's recorder here holds no read or write of a passed-through file).
func forModes(t *testing.T, fn func(t *testing.T, mode fusefs.Options)) {
	for _, o := range []fusefs.Options{{Cache: fusefs.CacheNone}, {Cache: fusefs.CacheKernel}, {Cache: fusefs.CacheNone, Passthrough: true}} {
		name := string(o.Cache)
		if o.Passthrough {
			name = "passthrough"
		}
		t.Run(name, func(t *testing.T) { fn(t, o) })
	}
}

func TestProgramTar(t *testing.T) {
	need(t, "tar")
	forModes(t, func(t *testing.T, mode fusefs.Options) {
		mnt, native, rec := mountBoth(t, mode)
		src := t.TempDir()
		makeTree(t, src)
		for _, d := range []string{mnt, native} {
			sh(t, "tar -C "+src+" -cf "+d+"/a.tar . && mkdir "+d+"/x && tar -C "+d+"/x -xf "+d+"/a.tar")
		}
		if a, b := sh(t, "cat "+mnt+"/a.tar"), sh(t, "cat "+native+"/a.tar"); !bytes.Equal(a, b) {
			t.Errorf("archives written through the mount and natively differ (%d vs %d bytes)", len(a), len(b))
		}
		if a, b := sh(t, canonTar+mnt+"/x ."), sh(t, canonTar+native+"/x ."); !bytes.Equal(a, b) {
			t.Errorf("extracted trees differ (%d vs %d bytes of canonical tar)", len(a), len(b))
		}
		if len(rec.Events()) == 0 {
			t.Error("nothing recorded")
		}
	})
}

func TestProgramGit(t *testing.T) {
	need(t, "git")
	forModes(t, func(t *testing.T, mode fusefs.Options) {
		mnt, native, _ := mountBoth(t, mode)
		src := t.TempDir()
		makeTree(t, src)
		env := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e",
			"GIT_AUTHOR_DATE=2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2020-01-01T00:00:00Z", "HOME=" + src}
		sh(t, "cd "+src+" && git init -q && git add -A && git commit -qm one && echo more >> d0/e0/f0 && git commit -qam two && git gc -q", env...)
		for _, d := range []string{mnt, native} {
			sh(t, "git clone -q "+src+" "+d+"/clone && cd "+d+"/clone && git fsck --full 2>&1 && git checkout -q HEAD~1 && git checkout -q -", env...)
		}
		if a, b := sh(t, canonTar+mnt+"/clone --exclude=.git ."), sh(t, canonTar+native+"/clone --exclude=.git ."); !bytes.Equal(a, b) {
			t.Errorf("checked-out trees differ")
		}
		q := "git log --format=%H%n%T && git ls-files -s && git status --porcelain"
		if a, b := sh(t, "cd "+mnt+"/clone && "+q), sh(t, "cd "+native+"/clone && "+q); !bytes.Equal(a, b) {
			t.Errorf("git state differs:\n%s\nvs\n%s", a, b)
		}
	})
}

func TestProgramSqlite(t *testing.T) {
	need(t, "sqlite3")
	script := `PRAGMA journal_mode=%s;
CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, n INTEGER);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<20000)
INSERT INTO t(v, n) SELECT 'v' || printf('%%08d', x), x*7 %% 1000 FROM c;
CREATE INDEX tn ON t(n);
BEGIN; UPDATE t SET v = v || 'u' WHERE n < 300; DELETE FROM t WHERE n > 900; COMMIT;
PRAGMA integrity_check;
SELECT count(*), sum(n), max(length(v)) FROM t;
`
	forModes(t, func(t *testing.T, mode fusefs.Options) {
		for _, jm := range []string{"delete", "wal"} {
			t.Run(jm, func(t *testing.T) {
				mnt, native, _ := mountBoth(t, mode)
				var outs [2][]byte
				for i, d := range []string{mnt, native} {
					f := filepath.Join(d, "s.sql")
					if err := os.WriteFile(f, []byte(fmt.Sprintf(script, jm)), 0o644); err != nil {
						t.Fatal(err)
					}
					outs[i] = sh(t, "sqlite3 "+d+"/db < "+f+" && sqlite3 "+d+"/db .dump")
				}
				if !bytes.Equal(outs[0], outs[1]) {
					t.Errorf("sqlite output differs (%d vs %d bytes)", len(outs[0]), len(outs[1]))
				}
				if !strings.Contains(string(outs[0]), "\nok\n") {
					t.Errorf("integrity_check: %.300s", outs[0])
				}
			})
		}
	})
}

func TestProgramFioVerify(t *testing.T) {
	need(t, "fio")
	forModes(t, func(t *testing.T, mode fusefs.Options) {
		for _, direct := range []string{"0", "1"} {
			t.Run("direct="+direct, func(t *testing.T) {
				mnt, _, rec := mountBoth(t, mode)
				out := sh(t, "fio --name=verify --directory="+mnt+" --size=32m --rw=randwrite --bsrange=4k-256k "+
					"--ioengine=psync --direct="+direct+" --verify=crc32c --do_verify=1 --verify_fatal=1 --numjobs=2 "+
					"--verify_state_save=0 --group_reporting --output-format=terse --terse-version=3")
				fields := strings.Split(strings.TrimSpace(string(out)), ";")
				if len(fields) < 5 || fields[4] != "0" {
					t.Errorf("fio error field %q: %s", fields[4], out)
				}
				if len(rec.Events()) == 0 {
					t.Error("nothing recorded")
				}
			})
		}
	})
}

// TestProgramAttrs: chmod, truncate and utimes by name and through an open descriptor
// (ftruncate, futimens, fchmod: SETATTR with a handle) give the same result through the
// mount as directly.
func TestProgramAttrs(t *testing.T) {
	need(t, "python3")
	const script = `import os, sys
d = sys.argv[1]
p = os.path.join(d, "a")
with open(p, "wb") as f:
    f.write(b"x" * 10000)
os.truncate(p, 5000)
os.chmod(p, 0o640)
os.utime(p, (1000000, 2000000))
fd = os.open(os.path.join(d, "b"), os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"y" * 8192)
os.ftruncate(fd, 3000)
os.fchmod(fd, 0o600)
os.utime(fd, ns=(3000000123, 4000000456))
os.close(fd)
for n in ("a", "b"):
    st = os.stat(os.path.join(d, n))
    print(n, st.st_size, oct(st.st_mode), st.st_atime_ns, st.st_mtime_ns)
`
	forModes(t, func(t *testing.T, mode fusefs.Options) {
		mnt, native, _ := mountBoth(t, mode)
		got := sh(t, `python3 -c "$SCRIPT" "$DIR"`, "SCRIPT="+script, "DIR="+mnt)
		want := sh(t, `python3 -c "$SCRIPT" "$DIR"`, "SCRIPT="+script, "DIR="+native)
		if !bytes.Equal(got, want) {
			t.Errorf("through the mount:\n%s\ndirectly:\n%s", got, want)
		}
	})
}
