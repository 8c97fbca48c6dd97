//go:build linux

// Command fuseuring measures what FUSE over io_uring saves per request against the classic
// read/write transport on /dev/fuse. It is a prototype, not part of iotap: a minimal FUSE
// server (a root directory holding one 4 KiB file, "file"; LOOKUP, GETATTR, OPEN, READ,
// FLUSH, RELEASE, STATFS, INIT, DESTROY and FORGET) with two transports, and a benchmark
// that drives it from a child process.
//
//	fuseuring serve -mnt DIR [-transport dev|uring] [-readers N] [-depth D] [-payload-size B]
//	                [-pin=false] [-defer-taskrun] [-direct-io=false]
//	fuseuring drive -path FILE -op stat|pread [-n N]
//	fuseuring bench -work DIR [-targets native,dev,dev:N,uring,uring:nopin,uring:defer] [-rounds 5] [-n 20000] [-driver-cpu C] [-jobs J]
//
// serve mounts with mount(2) on an open /dev/fuse (root only) and answers INIT there, as the
// protocol requires. With -transport dev, N threads read requests from /dev/fuse and write
// replies to it: two system calls per request. With -transport uring, it asks for
// FUSE_OVER_IO_URING at INIT, then makes one io_uring (128-byte SQEs) per possible CPU, each
// served by a thread pinned to that CPU, and registers D entries per queue with
// FUSE_IO_URING_CMD_REGISTER (IORING_OP_URING_CMD): a header page and a payload buffer the
// kernel copies a request into. A reply is written into the same buffers and handed back with
// FUSE_IO_URING_CMD_COMMIT_AND_FETCH, which also waits for the next request: one
// io_uring_enter per request. The kernel queues a request on the queue of the CPU the caller
// runs on; FORGET and INTERRUPT still come through /dev/fuse. The kernel must have
// /sys/module/fuse/parameters/enable_uring set to Y; a failed registration is reported with
// its errno and meaning.
//
// drive times N stat(2) calls on FILE, or N 4 KiB pread(2) calls on it (opened without
// O_DIRECT; the server opens it with FOPEN_DIRECT_IO so every read reaches it), and prints one
// JSON line: median and p99 latency, ops/s, and its own CPU time over the timed calls.
//
// bench alternates the targets over rounds (rotating their order): native is a tmpfs file,
// dev[:N] and uring are this server. Each phase runs in J child drive processes at once (their
// rates add up; the latency is the median of their medians). The server's request counts and
// CPU time, asked for on its stdin, give the requests and server CPU per operation and the
// share that came through io_uring. It prints a Markdown table of medians over rounds.
// bench/uring.sh runs it with enable_uring switched on and restores the setting afterwards.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fuseuring serve|drive|bench ... (-h for flags)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "drive":
		err = drive(os.Args[2:], os.Stdout)
	case "bench":
		err = bench(ctx, os.Args[2:], os.Stdout)
	default:
		err = fmt.Errorf("unknown subcommand %q (serve, drive or bench)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fuseuring:", err)
		stop()
		os.Exit(1)
	}
}
