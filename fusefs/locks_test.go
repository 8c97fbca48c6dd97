package fusefs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/trace"
)

// lockKnown lists the lines of testdata/locks.c whose output through a FUSE mount cannot be
// the native one, with the reason; the test checks both versions, so it notices when either
// side changes.
var lockKnown = map[string]struct{ native, mount, why string }{
	"10 POSIX GETLK fd2": {
		"10 POSIX GETLK fd2: W start=0 len=10 pid=-1",
		"10 POSIX GETLK fd2: W start=0 len=10 pid=parent",
		"F_GETLK reports -1 for a lock held as an OFD lock; the kernel sends FUSE the holder's pid and has no way to receive -1",
	},
}

// TestLocks: POSIX record locks (fcntl, lockf), OFD locks and flock(2), taken by several
// processes through several descriptors (testdata/locks.c, compiled with gcc), behave
// through the traced mount as natively in both cache modes: a process's second lock on
// another descriptor succeeds, closing any descriptor releases the process's locks, a
// blocking lock waits for another process and never for the process itself, deadlocks
// fail with EDEADLK, a signal interrupts a waiting lock with EINTR, a killed waiter leaves
// no lock behind, F_GETLK names the holding process, and flock(2) locks belong to the open
// file. The program prints each step; its output through the mount must equal its native
// output.
func TestLocks(t *testing.T) {
	need(t, "gcc")
	bin := filepath.Join(t.TempDir(), "locks")
	if out, err := exec.Command("gcc", "-Wall", "-Werror", "-O1", "-o", bin, "testdata/locks.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	native := runLocks(t, bin, t.TempDir())
	if !strings.Contains(native, "EDEADLK") || !strings.Contains(native, "EINTR") {
		t.Fatalf("the native run lacks the deadlock or the interrupted wait:\n%s", native)
	}
	forModes(t, func(t *testing.T, mode fusefs.Options) {
		rec := fusetest.NewMemRecorder(0)
		c := fusetest.Mount(t, rec, mode)
		got := runLocks(t, bin, c.Mnt)
		nl, gl := strings.Split(native, "\n"), strings.Split(got, "\n")
		if len(nl) != len(gl) {
			t.Fatalf("natively %d lines, through the mount %d:\n%s", len(nl), len(gl), got)
		}
		for i := range nl {
			key, _, _ := strings.Cut(nl[i], ":")
			if k, ok := lockKnown[key]; ok {
				if nl[i] != k.native || gl[i] != k.mount {
					t.Errorf("known difference %q changed (%s): natively %q, through the mount %q", key, k.why, nl[i], gl[i])
				}
				continue
			}
			if nl[i] != gl[i] {
				t.Errorf("natively:           %s\nthrough the mount: %s", nl[i], gl[i])
			}
		}
		ops := map[trace.Op]int{}
		for _, e := range rec.Events() {
			ops[e.Op]++
		}
		if ops[trace.OpSetlk] == 0 || ops[trace.OpSetlkw] == 0 || ops[trace.OpGetlk] == 0 {
			t.Errorf("lock requests recorded: SETLK %d, SETLKW %d, GETLK %d", ops[trace.OpSetlk], ops[trace.OpSetlkw], ops[trace.OpGetlk])
		}
	})
}

func runLocks(t *testing.T, bin, dir string) string {
	t.Helper()
	cmd := exec.Command(bin, dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("locks %s: %v\n%s%s", dir, err, out.String(), errb.String())
	}
	return strings.TrimSpace(out.String())
}

// sqliteWriters writes 60 transactions from each of two sqlite3 processes at once into
// one database (journal mode $JM) and prints the integrity check and what each wrote.
const sqliteWriters = `cd "$1"
sqlite3 db "PRAGMA journal_mode=$JM; CREATE TABLE t(p INTEGER, i INTEGER, v TEXT, PRIMARY KEY(p, i));" >/dev/null
w() {
  i=0
  { echo ".timeout 60000"
    while [ $i -lt 60 ]; do
      i=$((i+1))
      echo "BEGIN IMMEDIATE; INSERT INTO t VALUES($1, $i, printf('%0100d', $i)); UPDATE t SET v = v || 'x' WHERE p = $1 AND i = $i / 2; COMMIT;"
    done; } | sqlite3 db
}
w 1 & a=$!
w 2 & b=$!
wait $a; wait $b
sqlite3 db "PRAGMA integrity_check; SELECT p, count(*), sum(length(v)) FROM t GROUP BY p;"
`

// sqliteConnections uses three connections of one process to one database (sqlite relies
// on POSIX lock semantics here: its connections share the process's locks, and closing one
// must not release another's).
const sqliteConnections = `import os, sqlite3, sys
p, jm = os.path.join(sys.argv[1], "db2"), sys.argv[2]
a = sqlite3.connect(p, timeout=2, isolation_level=None)
a.execute(f"PRAGMA journal_mode={jm}")
a.execute("CREATE TABLE t(c INTEGER, i INTEGER)")
b = sqlite3.connect(p, timeout=2, isolation_level=None)
out = []
for i in range(50):
    a.execute("BEGIN IMMEDIATE"); a.execute("INSERT INTO t VALUES(1, ?)", (i,)); a.execute("COMMIT")
    b.execute("BEGIN IMMEDIATE"); b.execute("INSERT INTO t VALUES(2, ?)", (i,)); b.execute("COMMIT")
a.execute("BEGIN"); n = a.execute("SELECT count(*) FROM t").fetchone()[0]
try:
    b.execute("BEGIN IMMEDIATE"); b.execute("INSERT INTO t VALUES(3, 0)"); b.execute("COMMIT")
    out.append("b wrote during a's read")
except sqlite3.OperationalError as e:
    out.append("b during a's read: " + str(e))
    if b.in_transaction:
        b.execute("ROLLBACK")
a.execute("COMMIT")
c = sqlite3.connect(p, timeout=2, isolation_level=None)
c.execute("SELECT count(*) FROM t").fetchone()
c.close()
a.execute("BEGIN IMMEDIATE")
try:
    b.execute("BEGIN IMMEDIATE")
    out.append("b got a write lock while a holds one")
    b.execute("ROLLBACK")
except sqlite3.OperationalError as e:
    out.append("b during a's write: " + str(e))
a.execute("INSERT INTO t VALUES(4, 0)"); a.execute("COMMIT")
out += [str(n), a.execute("PRAGMA integrity_check").fetchone()[0], str(a.execute("SELECT c, count(*) FROM t GROUP BY c").fetchall())]
print("\n".join(out))
`

// TestLocksSqlite: sqlite3 keeps its data and its answers through the traced mount in both
// cache modes, in rollback-journal and WAL mode, when two sqlite3 processes write one
// database at once, and when one process uses three connections to it. The output equals
// the native one.
func TestLocksSqlite(t *testing.T) {
	need(t, "sqlite3")
	need(t, "python3")
	script := filepath.Join(t.TempDir(), "conns.py")
	if err := os.WriteFile(script, []byte(sqliteConnections), 0o644); err != nil {
		t.Fatal(err)
	}
	forModes(t, func(t *testing.T, mode fusefs.Options) {
		for _, jm := range []string{"delete", "wal"} {
			t.Run(jm, func(t *testing.T) {
				mnt, native, _ := mountBoth(t, mode)
				var outs [2]string
				for i, d := range []string{native, mnt} {
					cmd := exec.Command("sh", "-ec", sqliteWriters, "sh", d)
					cmd.Env = append(os.Environ(), "JM="+jm)
					b, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("two writers in %s: %v\n%s", d, err, b)
					}
					c, err := exec.Command("python3", script, d, jm).CombinedOutput()
					if err != nil {
						t.Fatalf("three connections in %s: %v\n%s", d, err, c)
					}
					outs[i] = string(b) + string(c)
				}
				if outs[0] != outs[1] {
					t.Errorf("natively:\n%s\nthrough the mount:\n%s", outs[0], outs[1])
				}
				if !strings.HasPrefix(outs[0], "ok\n1|60|") {
					t.Errorf("native run: %s", outs[0])
				}
			})
		}
	})
}
