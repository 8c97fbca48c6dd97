package job

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// treeChildEnv makes the re-executed test binary the parent of a job tree (treeChild).
const treeChildEnv = "IOTAP_JOB_TREE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(treeChildEnv) != "" {
		if err := treeChild(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// treeChild becomes a subreaper and starts a job with a background child and an orphan (the
// child of a process that exited), then replacing itself with sleep. Once the job has
// printed its pid and theirs, it kills its descendants and prints the pids, how many it
// signalled and how many it then finds alive.
func treeChild() error {
	if err := Subreaper(); err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd, err := Start(Spec{Argv: []string{"sh", "-c", `sleep 1000 & a=$!; b=$(sh -c 'sleep 1000 >/dev/null & echo $!'); echo $$ $a $b; exec sleep 1000`}, Stdout: w})
	_ = w.Close()
	if err != nil {
		return err
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read the job's pids: %q %w", line, err)
	}
	n := KillDescendants(10 * time.Second)
	if _, err := Wait(cmd); err != nil {
		return err
	}
	fmt.Printf("%s %d %d\n", strings.TrimSpace(line), n, len(descendants(os.Getpid())))
	return nil
}

// TestKillDescendants: a subreaper kills every process of a job it started, the orphans
// among them included.
func TestKillDescendants(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), treeChildEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) != 5 {
		t.Fatalf("child printed %q, want the job's pids, the count killed and the count alive after", out)
	}
	if f[3] != "3" || f[4] != "0" {
		t.Errorf("killed %s processes, %s alive after; want 3 (the job, its background child and the orphan) and 0", f[3], f[4])
	}
	for _, p := range f[:3] {
		pid, _ := strconv.Atoi(p)
		if _, state, ok := procStat(pid); ok && state != 'Z' && state != 'X' {
			t.Errorf("pid %d is alive (state %c)", pid, state)
		}
	}
}
