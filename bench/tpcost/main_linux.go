//go:build linux

// Command tpcost measures what attaching BPF programs to system calls costs a command, for
// the two ways a program can see system calls: the raw tracepoints raw_syscalls sys_enter
// and sys_exit, which run it for every system call of the host, and the per-call
// tracepoints syscalls:sys_enter_NAME and sys_exit_NAME (BPF_PROG_TYPE_TRACEPOINT, through
// perf_event_open), which run it only for the calls named. The programs are empty (they
// return at once), so what is measured is the cost of being attached, the floor of any
// program attached that way; with -ktime N each reads the clock (bpf_ktime_get_ns) N times
// first, which tells what a clock read costs on this machine. It is a lab program, not
// part of iotap: bench/tpcost.sh runs it.
//
//	tpcost -attach none|raw|syscalls [-syscalls pread64,...] [-ktime N] [-stats] -- COMMAND [ARG...]
//
// It attaches, runs the command (its output passes through), and with -stats (the kernel's
// accounting of BPF programs, kernel.bpf_stats_enabled, on while the command runs) prints
// to stderr one line per program: "tpcost: PROGRAM RUNS NS_PER_RUN".
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tpcost:", err)
		os.Exit(1)
	}
}

// attached is one program and where it is attached.
type attached struct {
	name string
	prog *ebpf.Program
}

func run() error {
	attach := flag.String("attach", "raw", "where the empty programs go: `none`, raw (raw_syscalls sys_enter and sys_exit) or syscalls (syscalls:sys_enter_NAME and sys_exit_NAME of -syscalls)")
	names := flag.String("syscalls", "read,write,pread64,pwrite64", "the system calls of -attach syscalls, comma-separated `names`")
	stats := flag.Bool("stats", false, "count the programs' runs and run time while the command runs")
	ktime := flag.Int("ktime", 0, "read the clock `N` times in each program run")
	flag.Parse()
	if flag.NArg() == 0 {
		return errors.New("no command given")
	}
	var progs []attached
	var links []link.Link
	defer func() {
		for _, l := range links {
			_ = l.Close()
		}
		for _, p := range progs {
			_ = p.prog.Close()
		}
	}()
	load := func(typ ebpf.ProgramType, name string) (*ebpf.Program, error) {
		var insns asm.Instructions
		for range *ktime {
			insns = append(insns, asm.FnKtimeGetNs.Call())
		}
		insns = append(insns, asm.Mov.Imm(asm.R0, 0), asm.Return())
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: typ, License: "GPL", Instructions: insns})
		if err != nil {
			return nil, fmt.Errorf("load a program for %s: %w", name, err)
		}
		progs = append(progs, attached{name, p})
		return p, nil
	}
	switch *attach {
	case "none":
	case "raw":
		for _, tp := range []string{"sys_enter", "sys_exit"} {
			p, err := load(ebpf.RawTracepoint, tp)
			if err != nil {
				return err
			}
			l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: tp, Program: p})
			if err != nil {
				return fmt.Errorf("attach to %s: %w", tp, err)
			}
			links = append(links, l)
		}
	case "syscalls":
		for _, n := range strings.Split(*names, ",") {
			for _, tp := range []string{"sys_enter_" + n, "sys_exit_" + n} {
				p, err := load(ebpf.TracePoint, tp)
				if err != nil {
					return err
				}
				l, err := link.Tracepoint("syscalls", tp, p, nil)
				if err != nil {
					return fmt.Errorf("attach to syscalls:%s: %w", tp, err)
				}
				links = append(links, l)
			}
		}
	default:
		return fmt.Errorf("-attach %q: none, raw or syscalls", *attach)
	}
	if *stats {
		c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			return fmt.Errorf("turn the kernel's accounting of BPF programs on: %w", err)
		}
		defer func() { _ = c.Close() }()
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", flag.Arg(0), err)
	}
	if *stats {
		for _, p := range progs {
			st, err := p.prog.Stats()
			if err != nil {
				return fmt.Errorf("statistics of %s: %w", p.name, err)
			}
			ns := 0.0
			if st.RunCount > 0 {
				ns = float64(st.Runtime.Nanoseconds()) / float64(st.RunCount)
			}
			fmt.Fprintf(os.Stderr, "tpcost: %s %d %.1f\n", p.name, st.RunCount, ns)
		}
	}
	return nil
}
