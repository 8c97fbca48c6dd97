// Package replay re-drives a recorded trace on other storage and measures it.
//
// A trace holds the FUSE requests a job's system calls became. Replay turns them back into
// system calls (or, for a Backend that is not a directory, into that backend's requests),
// issues them against a target with the recorded per-thread order, cross-thread ordering
// and timing, checks every result against the trace, and writes what it measured as a new
// trace (Kind "replay") that `iotap report` and `iotap compare` read like a recording.
//
// # Pipeline
//
//  1. DeriveState reads the whole trace once and returns the starting state: what existed
//     under the traced root before the job began (see "Starting state").
//  2. Prepare creates it under an empty (or scratch) target root. Check (--dry-run) plays
//     the trace on a model of that state and lists ops whose recorded outcome cannot be
//     reproduced.
//  3. Run streams the trace again: a planner restores start-time order within a bounded
//     window, folds kernel-generated requests, merges split reads and writes, maps
//     handles, and assigns ordering dependencies; one worker goroutine per traced thread
//     issues the resulting ops (with helpers for a thread that kept several in flight);
//     results are compared with the trace and written out.
//
// Memory is bounded by the sort window (PlanOptions.Window events), the per-worker queues
// (Options.QueueDepth) and read buffers (4 MiB at most: larger reads and writes are
// issued in 4 MiB pieces), and tables proportional to the number of distinct paths,
// handles open at once and threads — never by the number of events, nor by the sizes
// they name.
//
// # From FUSE requests to system calls
//
// A replay through a system call interface makes the kernel issue its own lookups,
// getattrs, flushes and releases, so the planner folds the recorded ones into the call they
// belong to (onedata's ioreplay does the same; research/replay-anchors.md §1.3). The
// folding is package trace/fold, which the report's per-system-call view uses too:
//
//	recorded FUSE request(s)                     replayed call (kind)          op code in the replay trace
//	lookup* of a path's components, then an op    the op only (walk folded)     the op's
//	lookup standing alone (stat, access of a       lstat(path)        fold.Stat  lookup
//	  missing name, a failed open's walk)
//	getattr                                      lstat(path), or fstat(fd)     getattr
//	                                             when this thread holds the
//	                                             path open             fold.Stat/fold.Fstat
//	getxattr(size 0) [+ getattr] right before a   folded: the kernel's privilege probe before chown/truncate/write
//	  setattr or write of the same path
//	open (flags as recorded)                     openat2(path, flags)  fold.Open open
//	create                                       openat2(path, flags|O_CREAT, mode)  create
//	opendir                                      openat2(path, O_RDONLY|O_DIRECTORY) opendir
//	read / write, offset and size as recorded     pread / pwrite        fold.Read/fold.Write read / write
//	  (more than 4 MiB: pieces of 4 MiB one after the other; more than one system
//	  call moves, 2 GiB less a page: clamped to it, counted in Summary.Clamped)
//	  two or more back-to-back contiguous pieces    one pread/pwrite of the sum (a buffer split by the kernel,
//	  of one thread and handle, the first ≥64 KiB   e.g. 1 MiB as 1048560+16 with an unaligned buffer)
//	  and not page aligned
//	flush ... release (any thread, even tid 0)    close(fd) in the opener's worker  flush (release if no flush)
//	releasedir                                   close(fd)             fold.Close releasedir
//	readdir / readdirplus                        getdents64(fd) (offset 0 rewinds) readdir
//	setattr size                                 ftruncate(fd) if this thread holds it open, else
//	                                             open+ftruncate+close  fold.Ftruncate/fold.Truncate setattr
//	setattr mode                                 fchmodat (refused on a symlink, like lchmod)   setattr
//	setattr atime/mtime                          utimensat(now, AT_SYMLINK_NOFOLLOW)  fold.Utimes setattr
//	setattr uid/gid                              lchown to the replaying user (the trace has no owner)
//	mkdir, mknod, unlink, rmdir, symlink,        mkdirat, mknodat, unlinkat, unlinkat(AT_REMOVEDIR),
//	  link, rename (flags), readlink              symlinkat, linkat, renameat2, readlinkat
//	fsync / fsyncdir (datasync bit)              fsync / fdatasync     fold.Fsync
//	fallocate, lseek                             fallocate, lseek(SEEK_DATA/HOLE)
//	getlk / setlk / setlkw                       fcntl(F_OFD_GETLK / F_OFD_SETLK) on the range; setlkw
//	                                             polls F_OFD_SETLK every 50 µs (cancellable)
//	statfs                                       fstatfs(root)
//	access                                       faccessat(mask, AT_SYMLINK_NOFOLLOW)
//	getxattr / listxattr / setxattr / removexattr  the l*xattr calls on "user.iotap.replay"
//	                                             (traces do not record attribute names)
//	copy_file_range(in, out)                     copy_file_range between the two replayed handles
//	                                             at the recorded offsets, or ReadAt+WriteAt where
//	                                             the backend cannot (RangeCopier)  fold.Copy copy_file_range
//	                                             (a version-1 trace has no output offset: the
//	                                             output handle's position is used, where its last
//	                                             write or copy ended, as cp and cat copy)
//	forget                                       dropped (kernel cache eviction)
//	ioctl, bmap, poll ...                        counted as skipped, never issued
//
// A handle the trace uses but never opened (opened before recording began) gets an
// implicit open (O_RDWR, falling back to O_RDONLY, O_WRONLY) in the worker that first uses
// it; implicit opens are counted, not compared, and not written to the replay trace.
//
// # Ordering
//
// Each traced thread (tid) becomes a worker that issues its ops in program order. An op
// that started while earlier ops of its thread were still running (an application's
// queue: io_uring, libaio, FUSE's asynchronous direct I/O) is issued once all but that
// many of them have completed, while those may still run: the replay keeps each thread's
// recorded queue depth, up to 256, and never exceeds it (overlap.go). Across
// threads, ops that touch a common resource keep their recorded order
// (resource-oriented ordering, as ARTC/ROOT): the resources of an op are its path, its
// second path (rename, link), the parent directory of any name it creates or removes, and
// the open-file slot of its handle. An op waits until every op on each of its resources
// that had *completed* before it started in the trace has completed in the replay (per
// resource completion counters and the number needed); ops that overlapped in the trace
// may overlap again. An open waits for every earlier op on its open-file slot, and a close
// for every op on its handle. Dependencies only point to earlier ops, so the replay cannot
// deadlock. A handle is opened and closed by the same worker.
//
// Ops a thread holds back for folding or merging (lookups, a read or write that a next
// piece may extend) are released before a later op that would otherwise overtake them on
// their resource: the flush or release of their handle, whichever thread it comes from (a
// shell opens "> file", the command it forks writes it, the shell closes it), and an op of
// another thread that creates, removes or renames their name.
//
// # Timing
//
//   - think (default, closed loop): an op is due when its predecessor in the same thread
//     completed, plus the think time, divided by the speed. In a recording that measured
//     the kernel's view of its requests (package internal/legs), the think time is the
//     application's own: from the return of the thread's previous system call to the
//     entry of this op's, less the time the thread waited for a CPU then (Options.
//     KeepRunDelay keeps it); parts of one system call follow each other at once; and an
//     op whose thread another thread of the job woke up in that gap (pthread_join, wait4,
//     a pipe) is due once the waker's last op before the wake-up has completed, plus the
//     recorded time from that op to this op's call, and no sooner than the thread's own
//     time after the wake-up (plan.go wakeEdge). Otherwise the think time is the recorded
//     gap (this op's start minus the predecessor's end), less what the recording layer
//     added to the gap: the requests folded into the op (path-walk lookups, probes) and
//     one round trip of the layer per request (Options.RoundTrip: the recorder's
//     measurement against its mount when the trace has one, else an estimate from the
//     trace's path walks; see roundtrip.go), because the target charges its own to the
//     replayed call. An op whose gap holds ops of a descendant process (a shell waiting
//     for its command) is due after that descendant's last such op completes, plus the
//     recorded time between them (children.go). A thread's first op is due at its
//     recorded offset moved by the replay's drift: how far ahead or behind the recording
//     the op that completed last ran. An op that overlapped earlier ops of its thread
//     counts its think time from the thread's last completion before it in the
//     recording, as a completion wakes an io_uring or libaio application to submit the
//     next request; or, when none came between its predecessor's start and its own (a
//     batch of submissions), from its predecessor's issue, with the recorded gap
//     between the two starts.
//     With Options.ThinkSpin (--think-cpu spin) a thread spins through its think time
//     instead of sleeping, as the job's computing kept a CPU busy, so the target is
//     measured under the CPU contention the recording had.
//   - original (open loop): an op is due at origin + (recorded start − first start)/speed,
//     against one absolute origin; errors never accumulate.
//   - afap: no waits beyond the ordering dependencies and each thread's queue depth.
//
// Workers sleep with nanosleep on a locked thread with 1 ns timer slack until a margin
// before the due time, then spin (yielding the CPU until the last 50 µs); the margin
// follows the observed
// overshoot of the sleeps. Timed workers and all helpers get a P each (GOMAXPROCS is
// raised to their number plus 2 for the run, at most 128), so a worker whose sleep ends,
// or a helper whose call returns, never waits
// for one. The
// issue lag (issue time minus the latest of: due time, completion of the op's
// dependencies, return of the thread's previous op) is measured for every op and
// summarised; waiting for the thread's previous op is not lag, and an op that waited more
// than 1 ms for it (a target slower than the recording, in original timing) is counted as
// "behind". The time during which at least one op was late (the union of the lag
// intervals: lagspan.go) is what the prediction allows for the replayer's delays. A p99 lag
// above 5 ms, or more than 5% of ops over 1 ms late, is reported as the replayer being the
// bottleneck.
//
// Caveat: what remains of a think time still holds any other cost of the recording: on a
// small machine the daemon's CPU slows the job's own computing. A think-mode replay of a
// recorded job onto a local file system therefore predicts a runtime between the recorded
// one and the job's native one.
//
// # Starting state
//
// An object belongs to the starting state when the trace shows it before creating it: a
// File record (the recording layer's first lookup of it, unless the trace created it
// earlier), or any successful op that needs it to exist (lookup, open without O_CREAT,
// read, unlink, readdir, rename source, EEXIST from a create...). Types come from the
// recorded modes, sizes from File records, lookup replies and the furthest byte read before
// the file was modified. Parents are directories. File data is zeros or incompressible
// bytes. A starting-state directory the trace lists in full gets empty placeholder files
// for the entries it never names, as many as the recorded listing's size implies (FUSE
// dirent sizes, names as long as the known ones). Symlink targets are not recorded: a
// dangling placeholder of the recorded readlink length stands in. Not reproduced: holes,
// owners, xattrs.
//
// # Confinement
//
// Every trace path is relative to the target root. CheckName refuses absolute names, "",
// "." and ".." components. The Dir backend opens with openat2(RESOLVE_BENEATH|
// RESOLVE_NO_MAGICLINKS). Other calls first resolve the parent directory the same way
// (descriptors cached; rename and rmdir drop them), then issue the *at call relative to
// the root with the whole name and AT_SYMLINK_NOFOLLOW on the last component, so that the
// kernel walks the path inside the timed call as it did for the application; rename, link
// and symlink, the calls that can redirect a name, exclude the others while they run. A
// symlink that leads outside the root (planted in the tree or created by the trace) is
// refused with ErrEscape. Refused ops are counted. Nothing outside the root is touched.
//
// # Checking
//
// Each op's errno, and the byte count of reads, writes, copy_file_range, readlink and
// lseek, are compared with the trace. Divergences are counted per recorded op;
// DivergeWarn logs the first ten, DivergeAbort stops the run with an error wrapping
// ErrDiverged. ENOTSUP or ENOSYS on one side only (the recording or the replay) says
// that storage lacks the feature (s3fs and extended attributes): the op is counted as a
// backend difference (OpSummary.Unsupported), not as a divergence. A call the target
// refuses where the application has a way around it (renameat2 flags refused with
// EINVAL, fallocate with EOPNOTSUPP) is done that way instead and counted as a fallback
// (OpSummary.Fallbacks, a backend difference; fallback.go). Divergences are reported by
// cause: the first failure on each file (a refused call, a failed open) is named, and the
// divergences on the same handle or path after it are counted against it (Summary.Causes).
//
// # Fidelity summary JSON
//
// `iotap replay` writes each run's Summary as PREFIX.tN.rM.json, schema "iotap.replay/v1".
// Keys are snake_case; durations are integer nanoseconds (*_ns); bytes are *_bytes.
//
//	schema        "iotap.replay/v1"
//	target        {path, fs_type, source, mount}: the storage replayed onto
//	timing, speed, threads   the schedule: think, original or afap; its speed; threads run
//	fold          what planning did with the recorded events: {events, by_op[] {op,
//	              events (recorded), folded (of which folded into another call or dropped
//	              as kernel traffic)}, merged (read/write pieces merged), implicit_opens,
//	              unknown_paths, escapes, unordered}; by_op lists the ops that had events
//	ops[]         per recorded op: {op, recorded, replayed, skipped, diverged, unsupported
//	              (ENOTSUP/ENOSYS on one side only), fallbacks}; only ops recorded or replayed
//	recorded_ops, replayed_ops, skipped_ops, divergences, backend_differences, fallbacks
//	recorded_read_bytes, recorded_write_bytes, replayed_read_bytes, replayed_write_bytes
//	implicit_opens, implicit_open_failures, escapes, interrupted
//	clamped       reads, writes and copies that asked for more than one system call
//	              moves (2 GiB less a page), replayed with that many
//	lag_p50_ns, lag_p99_ns, lag_max_ns, lag_total_ns, late_over_1ms, lag_samples: issue
//	              lag, the actual issue time less the time the op became due
//	lag_union_ns  the time during which at least one op was late (the union of the ops'
//	              lag intervals; lag_total_ns sums them, counting ops late together
//	              once each)
//	dep_wait_ns   time threads waited for other threads' ops
//	round_trip_ns, think_cut_ns, think_wait_ns: think mode's recording round trip per
//	              request, the recorded think time not waited for, the think time waited
//	round_trip_source  where round_trip_ns came from: the recorder's measurement (while
//	              the job ran, or before it), the path-walk estimate, or --round-trip
//	think_measured, think_estimated: ops whose think time is the application's time
//	              between its system calls as the kernel measured it while recording
//	              (--legs kernel), and ops whose think time is the recorded gap less the
//	              round trips (round_trip_ns)
//	run_delay_cut_ns  of the measured think times, the time the recorded threads waited
//	              for a CPU, not waited for again (unless --keep-run-delay)
//	woken_ops     ops due after the progress of the thread that woke theirs
//	prediction    (think timing) what the run predicts for the job on the target, each
//	              figure with the interval it is sure of (predict.go): {runtime_ns,
//	              runtime_low_ns, runtime_high_ns, io_ns, io_low_ns, io_high_ns, runs,
//	              estimated_think_ns (the think time estimated, not measured, as half a
//	              round trip per request: part of the interval), and, when the job's
//	              native runtime is known, native_runtime_ns, recorded_io_ns,
//	              anchored_runtime_ns, anchored_runtime_low_ns, anchored_runtime_high_ns}
//	idle_ns, think_share  the part of replay_span_ns with none of the job's calls in
//	              flight on any thread (the job's own time between calls: in think mode,
//	              recorded think time carried over unchanged), and its share of the span
//	no_prediction (think timing) why the run predicts nothing, in place of prediction:
//	              it was interrupted
//	behind        ops due more than 1 ms before their thread's previous op returned
//	recorded_span_ns, replay_span_ns, recorded_io_ns, replay_io_ns: first op start to last
//	              op end, and summed op latencies, on each side
//	replayer_cpu_ns, replayer_cpu_share, cpus: CPU time the replaying process used, its
//	              share of one CPU over replay_span_ns, and the machine's CPUs
//	examples[], backend_examples[]   the first divergences and backend differences
//	causes[]      root causes of divergence cascades: the first failure on each file and
//	              the divergences after it: {what, backend (a backend difference),
//	              then (divergences after it)}
//	bottleneck    set when the replayer, not the target, limited the replay
//	overlapped, max_queue_depth   ops issued while others of their thread ran, and the
//	              most in flight at once on one thread
package replay
