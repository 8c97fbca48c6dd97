package job

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Subreaper makes this process the reaper of orphans among its descendants
// (PR_SET_CHILD_SUBREAPER): a process whose parent exits is handed to this process instead
// of to init, so that what a job leaves behind stays among this process's descendants,
// where KillDescendants finds it.
func Subreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// KillDescendants sends SIGKILL to every process below this one, again and again until a
// pass over the process table finds none alive (a process may fork while it is killed; with
// Subreaper its orphans come back below this process) or wait has passed. It returns how
// many processes it signalled. The dead stay zombies until their parent reaps them.
func KillDescendants(wait time.Duration) int {
	killed := map[int]bool{}
	deadline := time.Now().Add(wait)
	for {
		live := descendants(os.Getpid())
		if len(live) == 0 {
			return len(killed)
		}
		for _, pid := range live {
			if unix.Kill(pid, syscall.SIGKILL) == nil {
				killed[pid] = true
			}
		}
		if time.Now().After(deadline) {
			return len(killed)
		}
		time.Sleep(5 * time.Millisecond) // SIGKILL takes effect as each one next runs
	}
}

// descendants returns the processes below pid that have not exited, from /proc.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	alive := map[int]bool{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state, ok := procStat(p)
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], p)
		alive[p] = state != 'Z' && state != 'X'
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if alive[c] {
				out = append(out, c)
			}
			queue = append(queue, c) // a zombie's children are orphans on their way here
		}
	}
	return out
}

// procStat returns the parent and the state of process pid (/proc/PID/stat).
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// PID (COMM) STATE PPID ...: the name may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(f[1]))
	return ppid, f[0][0], err == nil
}
