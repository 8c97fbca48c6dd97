// Package lazyfree makes a FUSE server's Go runtime release freed memory with MADV_FREE
// instead of MADV_DONTNEED.
//
// go-fuse allocates on every request, so the heap of a busy server turns over every few
// milliseconds. The runtime's background scavenger returns part of the freed pages to the
// kernel between collections, and the next allocations fault them back in, zeroed: in a
// traced mount about one page fault per small file (bench/pinned.sh, --cache kernel).
// With MADV_FREE the kernel takes those pages only under memory pressure, and until then
// touching them again costs nothing. The process's RSS then includes the lazily freed
// pages (about the heap's peak, which stays bounded), as it did with Go 1.12 to 1.15.
//
// The runtime reads this setting (GODEBUG=madvdontneed=0) only at startup, and a //go:debug
// directive cannot set it, so Reexec executes the program again with it, and a process
// that starts a child to serve a mount gives it ChildEnv. The job that iotap record starts
// must not inherit the setting: Reexec, first thing in the new process, restores GODEBUG
// as the user had it.
package lazyfree

import (
	"os"
	"runtime"
	"strings"
	"syscall"
)

// saved holds the user's GODEBUG across the exec: "1" and the value if it was set, "0" if
// it was not.
const saved = "IOTAP_SAVED_GODEBUG"

// Reexec re-executes the running program with GODEBUG=madvdontneed=0 added, unless this is
// the re-executed run, the user's GODEBUG already chooses madvdontneed, or the platform is
// not Linux. In the re-executed run it restores the user's GODEBUG and returns. It returns
// too if the exec fails; the program then runs with the runtime's default. Call it first
// thing in main, before any other goroutine starts, and only in commands that serve a
// mount.
func Reexec() {
	if v, ok := os.LookupEnv(saved); ok {
		restore(v)
		return
	}
	if runtime.GOOS != "linux" {
		return
	}
	env, changed := lazyEnv(os.Environ())
	if !changed {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	_ = syscall.Exec(exe, os.Args, env) // returns only on failure
}

// ChildEnv returns env (a program's environment, as os.Environ gives it) changed for a
// child process that serves a mount and calls Reexec first thing: the child starts with
// lazy freeing and restores env's GODEBUG without executing itself again. If env's
// GODEBUG already chooses madvdontneed, env is returned as is.
func ChildEnv(env []string) []string {
	env, _ = lazyEnv(env)
	return env
}

// lazyEnv returns env with madvdontneed=0 added to GODEBUG and the user's GODEBUG saved,
// and true; or env and false if its GODEBUG already chooses madvdontneed.
func lazyEnv(env []string) ([]string, bool) {
	user, had := "", false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			user, had = v, true
		}
	}
	if strings.Contains(user, "madvdontneed=") {
		return env, false
	}
	mark := "0"
	debug := "madvdontneed=0"
	if had {
		mark = "1" + user
		if user != "" {
			debug = user + "," + debug
		}
	}
	return append(setEnv(env, "GODEBUG", debug), saved+"="+mark), true
}

// restore puts back the GODEBUG that Reexec saved in mark. The runtime keeps
// madvdontneed as it read it at startup.
func restore(mark string) {
	_ = os.Unsetenv(saved)
	if v, ok := strings.CutPrefix(mark, "1"); ok {
		_ = os.Setenv("GODEBUG", v)
	} else {
		_ = os.Unsetenv("GODEBUG")
	}
}

// setEnv returns env with key set to value (replacing any earlier entries).
func setEnv(env []string, key, value string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}
