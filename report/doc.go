// Package report renders trace statistics ([stats.Stats]) as text, JSON, CSV and HTML, and
// compares traces of the same work made on different storage.
//
// [Build] turns per-trace Stats into a [Report]; every format renders that one model, so
// the formats never disagree. [Compare] builds a [Comparison] of sides, the first being
// the baseline.
//
// # Reading the numbers
//
// Every report opens with its verdict, one line that answers where the job's time went
// (ReportVerdict):
//
//	I/O 29.9% of 707ms; 43.8% of it fdatasync on db.sqlite-journal; p99 open 1.28ms
//
// The first part is the share of the job's wall time during which at least one request
// was in flight (its I/O-active time over its wall time, each summed over the traces,
// every trace from its first op's start to its last op's end; "summed over N traces" when
// there are several). The second is where the I/O time went: the kind of system call with
// the most time in the storage and its share of the calls' summed time (call_ns); when
// one path holds at least half of that kind's time, the share of that kind on that path
// ("43.8% of it fdatasync on db.sqlite-journal"), else the kind's share and over how many
// paths ("59.4% of it open (over 206 paths)"). The third is the worst tail of a frequent
// call: of the kinds of call made at least MinTailCount (100) times, the one with the
// highest p99. Ties go by name. A view without the per-system-call view uses its FUSE
// requests instead, without paths. Every group of --by has its own verdict.
//
// Then come the facts that change how its numbers must be read: the
// fidelity mode (cache "none": every application call reached the tracing layer at its own
// size; "kernel": the page cache absorbed part of the I/O and the trace shows what reached
// the storage), the target file system type, host, command, labels, dropped events and
// damage. Warnings repeat them when they matter.
//
// The first table is per system call: the calls the application made, found by folding the
// FUSE requests as replay does (package trace/fold: path-walk lookups into the call that
// walked, flush and release into close, the kernel's privilege probes into the setattr
// or write, split reads and writes into one). A call's time is its time in the storage:
// the summed durations of its requests. The view cannot show calls that sent no request
// (lseek, fcntl other than locks, page-cache hits and attribute-cache stats with cache
// "kernel"); an open of a missing name sends only its lookup and counts as a stat; a
// descriptor that dup or fork copied is closed once per open file. The per-request tables
// that follow show what the storage saw.
//
// Latencies are durations of filesystem operations as the tracing layer timed them.
// Percentiles come from HDR histograms with 3 significant digits: pN is the highest value
// equivalent to the order statistic of rank ⌈N/100 × count⌉ (at least 1: the rule of SQL's
// percentile_disc and DuckDB's quantile_disc, package internal/quantile), capped at the
// exact maximum, so it is never below the exact order statistic and less than 1/1024
// (0.1 %) of it above, from 1 ns up (values below 2048 ns are exact).
// Mean, total and max are exact. "Job I/O time" is the sum of all op durations: concurrent
// ops add up, so it can exceed the wall-clock duration.
//
// # JSON schema iotap.report/v1
//
// The document is one object. All durations are integer nanoseconds (fields end in _ns),
// byte counts are integers, shares are fractions in [0, 1], times are RFC 3339 UTC.
// Fields may be added within v1; a field changing meaning or disappearing makes v2.
//
//	schema       "iotap.report/v1"
//	verdict      the report's answer in one line: the total view's verdict_figures.text
//	traces[]     one per input trace, in input order:
//	  file, kind ("record"|"replay"), host, kernel, iotap_version, wall_start,
//	  target {path, fs_type, fs_name (as reports show it: "fuse (mfs)" for a FUSE mount
//	  whose source names its daemon, "s3 (mountpoint)" for an s3:// replay), source,
//	  mount}, cache ("none"|"kernel"|""), passthrough (kernel passthrough served files'
//	  data), data ("kernel": those reads and writes timed by the kernel in the
//	  application's thread; "layer" or "": through the layer) and data_note (why not
//	  "kernel"), passthrough_files (a "kernel" recording: opens the kernel passed through,
//	  layer_opens whose data went through the layer, refused (the kernel's first reason),
//	  lost (calls timed but not recorded)),
//	  writeback, fuse {max_read, max_write, entry_timeout_ns, attr_timeout_ns, direct_io},
//	  command[], labels{key: value}, events (aggregated), dropped (recorder
//	  drops, from the footer), lost (of the dropped, events lost when a write of the trace
//	  failed) and write_error (that failure), blocked_ns (time the job waited for the
//	  recorder's buffer), recorded (events the footer counts), complete (a footer was
//	  present), damage[] (reader messages), recording_cost (when the footer has it:
//	  requests, in_layer_ns, self_ns, self_ns_per_request, self_share (self_ns /
//	  in_layer_ns), encode_cpu_ns, threads, resolve_ns; with the kernel's proc connector,
//	  proc_connector (true), late_attributions (threads whose process record came after
//	  their first event) and missing_attributions (threads whose name or executable could
//	  not be learnt); see trace.LayerCost),
//	  client, iotap (traces of format version 3 made with sampling on): what the storage
//	  client serving the target (the FUSE daemon: s3fs, mount-s3, mfsmount, ...) and iotap
//	  itself (the recorder, or the replayer: on an s3:// target the S3 client) used while
//	  the trace was made, sampled from /proc (see "Resources" below); other_clients[] when
//	  several client processes were sampled (--client-pid repeated); native_runtime_ns
//	  (a recording that keeps the job's runtime without the layer: record --native-first
//	  or --native-runtime); prediction (a think-mode replay's trace: what the replay
//	  predicted for the job on its target, replay.Prediction: {runtime_ns,
//	  runtime_low_ns, runtime_high_ns, io_ns, io_low_ns, io_high_ns, and when anchored
//	  native_runtime_ns, anchored_runtime_ns, anchored_runtime_low_ns,
//	  anchored_runtime_high_ns})
//	warnings[]   human-readable caveats (drops, damage, cache mode, cache=none mixed with
//	             cache=kernel)
//	by           "" | "host" | "label:KEY" | "comm" | "exe" | "uid"
//	total        a view of all traces
//	groups[]     with --by: one view per group, sorted by name: "host=NODE",
//	             "KEY=VALUE", "comm=NAME", "exe=PATH", "uid=N". host and label group
//	             whole traces; comm and exe group processes by what they ran (each process
//	             named as in processes[], so one that exec'd another program is in the
//	             group of the last; "(kernel)" for the requests the kernel makes on its
//	             own, pid 0; "(unknown)" without a record or an executable); uid groups
//	             requests by their caller's user. A group's dropped events and damage are
//	             its traces'.
//	group_rows[] with --by: one row per group that made calls (requests without the
//	             per-system-call view), by total_ns descending, over all of them: {group,
//	             processes (how many it has), count, errors, errnos, bytes (read and
//	             written: its job's read_bytes + write_bytes), total_ns, share (of the
//	             groups' summed time), mean_ns, p50_ns, p90_ns, p99_ns, p99_9_ns, max_ns,
//	             busy_ns (its I/O-active time), ops_per_s, failures_per_s, mb_per_s (bytes
//	             over busy_ns), cdf[], hist[] (as in ops[]), wall_ns (the group's wall
//	             time, its view's duration_ns), wall (its rates over wall_ns, as the
//	             view's job.wall: mb_per_s, read_mb_per_s, write_mb_per_s, iops,
//	             meta_ops_per_s; the text and HTML tables show iops, meta_ops_per_s and
//	             mb_per_s)}
//	stragglers[] with --by host or label:KEY: lines naming groups whose I/O time, wall
//	             time or an op's p99 stands out from the other groups (rule in
//	             docs/slurm.md)
//
// A view:
//
//	name, traces[] (indexes into traces), events, dropped, start (first op),
//	duration_ns (wall time from the first op's start to the last op's end of each trace;
//	with several traces, the time at least one of them covers: runs made one after another
//	add their own durations, without the time between them), total_ns (job I/O time)
//	job          the job's bytes and rates: {view ("syscalls" when every trace has the
//	             per-system-call view, else "requests": what the counts count),
//	             read_bytes, write_bytes, data_ops (reads, writes, copy_file_range that
//	             succeeded), meta_ops (every other call or request but forget that
//	             succeeded), failed_ops (the calls or requests that failed), wall_ns (=
//	             duration_ns), active_ns (I/O-active time: at least one op in flight;
//	             summed over traces, active_summed, when there are several), wall and active {mb_per_s, read_mb_per_s,
//	             write_mb_per_s, iops (data_ops per second), meta_ops_per_s (meta_ops per
//	             second)}: over wall_ns and over active_ns}
//	verdict_figures  the view's verdict in figures (see "Reading the numbers"): {text,
//	             view ("syscalls" or "requests": what the rows are), traces (those with
//	             events), wall_ns (each trace's first op's start to its last op's end,
//	             summed), active_ns (job.active_ns), io_share (active_ns / wall_ns),
//	             io_ns (call_ns, or total_ns in the requests view), top (the kind with
//	             the most time), top_ns, top_share (top_ns / io_ns), top_paths (the
//	             paths calls of top were on), top_path, top_path_ns, top_path_share
//	             (top_path_ns / io_ns; only when one path holds at least half of top_ns),
//	             tail (the kind of at least 100 calls with the highest p99), tail_count,
//	             tail_p99_ns}; shares are rounded to 3 decimals, and keys without a
//	             value are left out
//	syscalls[]   the per-system-call view, one per kind of call seen, by total_ns
//	             descending (absent when a trace was read without it):
//	  call ("open" (also creat and opendir), "stat" (stat, lstat, fstat, statx, and a
//	  lookup standing alone), "access", "close", "read", "write", "getdents",
//	  "readlink", "mkdir", "mknod", "unlink", "rmdir", "rename", "link", "symlink",
//	  "chmod", "chown", "truncate", "utimes", "setattr" (attributes no single call
//	  sets), "fsync", "fdatasync", "getxattr", "listxattr", "setxattr", "removexattr",
//	  "lock", "copy_file_range", "fallocate", "lseek", "statfs", "other" (ioctl, poll)),
//	  count, errors, errnos{"ENOENT": n}, bytes (read, write, copy_file_range,
//	  getdents, readlink, getxattr, listxattr), total_ns (summed time in the storage),
//	  share (of call_ns), meta_ns and data_ns (total_ns split between the calls'
//	  metadata requests: lookup, getattr, open, create, flush, release, readdir,
//	  setattr, ...; and data requests: read, write, fsync, fallocate,
//	  copy_file_range), meta_share (meta_ns / total_ns), mean_ns, p50_ns, p90_ns,
//	  p99_ns, p99_9_ns, max_ns, requests
//	  (FUSE requests the calls stand for; 0 in a replay's trace, whose events are the
//	  calls it issued), requests_per_call (mean), max_requests, busy_ns, ops_per_s,
//	  failures_per_s, mb_per_s, first_access, reaccess, cdf[], hist[] (as in ops[]), and
//	  waited (recordings with --legs kernel, for the calls whose system call entry and
//	  return the kernel measured): {count, mean_ns, p50_ns, p90_ns, p99_ns, p99_9_ns,
//	  max_ns of what the application waited for each call, total_ns, storage_ns (those
//	  calls' time in the storage), fuse_ns (total_ns less storage_ns: what the layer's
//	  round trips added), fuse_share (fuse_ns / total_ns)}
//	call_ns      the calls' summed time
//	syscall_notes[] what the per-system-call view cannot show, for these traces
//	ops[]        one per operation (FUSE request) seen, by total_ns descending:
//	  op, class ("meta"|"data"|"open"|"dir"), count, errors, errnos{"ENOENT": n},
//	  bytes (bytes done: read, write, copy_file_range, readdir*, *xattr, readlink),
//	  total_ns, share (of the view's total_ns), mean_ns, p50_ns, p90_ns, p99_ns,
//	  p99_9_ns, max_ns,
//	  busy_ns (time at least one request of the op was in flight, failed ones
//	  included), ops_per_s (the requests that succeeded), failures_per_s (those that
//	  failed; absent when none did) and mb_per_s (read, write, copy_file_range; MB =
//	  10^6 B) over busy_ns: the rate the storage served the op at while the job asked
//	  for it,
//	  first_access, reaccess (read only): the reads that returned bytes never read
//	  before from their file in the trace (at least one), and the reads that returned
//	  only bytes read before: {count, bytes, total_ns, mean_ns, p50_ns, p90_ns, p99_ns,
//	  p99_9_ns, max_ns}; reads that failed or returned nothing are in neither. Each file
//	  keeps at most 32 ranges of bytes read; beyond that the smallest is forgotten and a
//	  read of it counts as a first access (patterns.reread_lower_bound says so),
//	  cdf[] {p (percent), ns} at p = 0 1 5 10 20 25 30 40 50 60 70 75 80 90 95 99 99.5
//	  99.9 99.99 100,
//	  hist[] {lo_ns, hi_ns, count}: non-empty bins, 4 per power of two from 1 µs,
//	  inflight     in-flight depth: how many requests of the op were being served at
//	               once, counted by each request at its start, itself included (1 for a
//	               job that waits for each request before the next): {max, mean, busy_mean
//	               (time-weighted, over the time at least one was in flight), p50, p90, p99,
//	               lower_bound (some requests reached the trace too late to be placed
//	               exactly), hist[] {depth, count}}
//	classes[]    {class, count, total_ns, share} for meta, data, open, dir
//	read_by_size[], write_by_size[]: latency by requested size bucket
//	  {bucket ("<=4K" … "<=1M", ">1M"), max_bytes (0 = open-ended), bytes, count,
//	  mean_ns, p50_ns, p90_ns, p99_ns, p99_9_ns, max_ns}
//	ttfb         time to first byte: the latency of each file's first read that returned
//	             data (the read's own time; the application's time between its open and
//	             its read is not in it): {count (files), mean_ns, p50_ns, p90_ns, p99_ns,
//	             p99_9_ns, max_ns}
//	patterns     {seq_read_share, seq_write_share (by bytes), seq_reads, rand_reads,
//	             seq_writes, rand_writes (ops), read_bytes, write_bytes, reread_bytes,
//	             reread_lower_bound, read_sizes[]/write_sizes[] {bucket, count},
//	             meta_share, data_share (of job I/O time; meta = every class but data)}
//	processes[]  top N by total_ns: {host, pid, comm ("(kernel)" for the requests the kernel
//	             makes on its own, pid 0; "(unknown)" for a process without a record or a
//	             name), exe, cmdline[] (its command line, at
//	             most its first 4 KiB; absent when the trace has none), ops, errors,
//	             total_ns, share, meta_ns, data_ns, read_bytes, write_bytes
//	             (copy_file_range's bytes count as read and as written)}. A process is
//	             named after its main thread's last record (the thread whose id is the
//	             process's), else after the first of its threads that has a record
//	commands[]   the command lines the view's processes ran, top N by their processes'
//	             total_ns: {comm, cmdline[], processes, total_ns}; commands_total the
//	             number of distinct ones
//	access_sizes[] the read and write calls that succeeded, by the bytes each moved, in
//	             Darshan's ten buckets (DARSHAN_BUCKET_INC: "0-100", "100-1K", "1K-10K",
//	             "10K-100K", "100K-1M", "1M-4M", "4M-10M", "10M-100M", "100M-1G", "1G+";
//	             upper bounds inclusive, K = 1024): {bucket, max_bytes (0 for "1G+"),
//	             reads, read_bytes, read_ns, writes, write_bytes, write_ns (their time in
//	             the storage)}; every bucket, absent when there were no such calls (and
//	             without the per-system-call view)
//	files_by_time[], files_by_bytes[], dirs_by_time[], dirs_by_bytes[]: top N
//	             {path ("." is the traced root), ops, errors, total_ns, share, meta_ns,
//	             data_ns, read_ops, write_ops, read_bytes, write_bytes (with the bytes
//	             copy_file_range copied from and to the file), seq_share (of data
//	             ops), reread_bytes, reread_lower_bound, opens, unused_opens (handles
//	             closed without a read, write or copy_file_range), first_access_reads,
//	             first_access_bytes, first_access_ns, reaccess_reads, reaccess_bytes,
//	             reaccess_ns (the file's reads split as in ops[].first_access), first_byte_ns
//	             (files only: the latency of its first read that returned data; the
//	             quickest node's when traces of several nodes read it), extent (largest
//	             offset+length), size (files: the larger of extent and the largest size a
//	             lookup, getattr or create reply or a truncate gave; 0 in dirs_*), top_size
//	             (most common request-size bucket), read_sizes[], write_sizes[] {bucket,
//	             count}: the file's request size distribution. A name that was a file and
//	             later a directory (or the reverse) is a file row for the operations of its
//	             file life and a directory row for the others.}
//	opened_unused {count, paths[] (at most N)}: files opened but never read or written
//	intervals    {start (the trace origin), width_ns, points[] {t (s since start), ops,
//	             errors, ops_per_s, read_mb_s, write_mb_s (MB = 10^6 B), p99_ns
//	             (the upper bound of a log bucket: at most 12.5 % above from 8 µs up,
//	             1 µs below), max_ns (exact), busy_ns}}; ops are placed by start time
//	inflight_intervals  the in-flight depth over time of up to 4 operations that overlapped
//	             (max at least 2), on the view's intervals: {start, width_ns, ops[] {op,
//	             mean[] (time-weighted mean depth per interval), max[]}}; absent when no
//	             two requests of an operation overlapped
//	offsets[]    total view only: sampled offset-vs-time of the busiest files {host, path,
//	             bytes, stride (every stride-th op kept), points[] [t s since the view's
//	             start, offset, length, 1 if write else 0]}
//	heat_files, heat_programs  total view only: heat maps, the time in the storage and the
//	             bytes read and written over time of the busiest files (the first 12 of
//	             files_by_time) and programs (processes by comm, by total_ns, at most 12):
//	             {by ("file" or "program"), start (intervals.start), width_ns, columns,
//	             rows[] {name, total_ns, bytes, ns[], bytes_per_column[] (one per
//	             column)}}. Every request counts in the column its start falls in, with
//	             its duration and the bytes it read or wrote (copy_file_range's: read from
//	             its input file and written to its output; for a program, both). Columns
//	             are 1 ms times a power of two wide, as narrow as keeps them to about 100
//	             and as each row kept its own (a row keeps at most 128 cells of 1 ms times
//	             a power of two); with several traces a trace's cells go to the column
//	             their start falls in
//
// # Resources
//
// client, iotap and other_clients[] of a trace are each:
//
//	name         command name ("s3fs", "mfsmount", "iotap")
//	pid          process id while the trace was made
//	role         "client", "recorder" or "replayer"
//	samples      readings taken; interval_ns the median time between them (100 ms by
//	             default, --sample-interval)
//	peak_rss_bytes, mean_rss_bytes   resident set size: largest and mean over the samples
//	cpu_user_s, cpu_sys_s   CPU time used from the first sample to the last (USER_HZ
//	             ticks of 10 ms)
//	cpu_s_per_gb (cpu_user_s + cpu_sys_s) per 10^9 bytes the trace's reads, writes and
//	             copy_file_range moved (moved_bytes); 0 when they moved none
//	storage_read_bytes, storage_write_bytes   bytes the process read from and wrote to
//	             block storage (/proc/PID/io read_bytes, write_bytes)
//	rchar_bytes, wchar_bytes   bytes through its read- and write-like calls, sockets
//	             included: for a network client, about its traffic
//	exited       sampling ended well before the trace did: the process exited
//	series[]     {t (s since the trace's wall_start), rss_bytes, cpu_user_s, cpu_sys_s
//	             (since the first sample), cpus (CPUs busy from the previous point to this
//	             one)}; at most 1000 points (every k-th sample of a longer series, peaks
//	             taken over all)
//
// files_by_* list non-directories (paths that are not known to be directories: names that
// failed to resolve count as files). A directory's figures are those of the entries
// directly in it plus the ops addressed to the directory itself. A data op is sequential when it starts where the previous one on
// the same handle ended (the first at offset 0 counts as sequential).
//
// # JSON schema iotap.compare/v1
//
//	schema "iotap.compare/v1", tolerance, forced, mismatches[], warnings[]
//	verdict[] the answer, one line per side but the baseline: "s3fs: 19.2× the baseline's
//	          I/O time (+8.20s), runtime 3.10×: write +2.20s (27.0%), open +1.90s (23.2%),
//	          close +1.00s (12.2%)": the side's I/O time (call time in the syscalls view,
//	          job I/O time in the requests view) and runtime (duration_ns) as ratios to the
//	          baseline's, and the three rows whose time moved most in the same direction,
//	          with their share of the time all rows moving that way moved. A side whose
//	          calls differ from the baseline's in kind or outcome (success or failure) by
//	          more than 1 % (MaxWorkDiff) did other work and gets no ratio: "broken: no
//	          ratio, not the same work: 8,266 of 20,062 (41.2%) differ from the baseline's
//	          in kind or outcome: open +2,050 failed, −2,050 succeeded; ...", and a warning
//	verdict_figures[] the same in figures: {side, text, io_ns, baseline_io_ns, io_ratio,
//	          delta_ns, runtime_ns, baseline_runtime_ns, runtime_ratio, top[] {name,
//	          delta_ns, share}, differing (calls with no counterpart of the same kind and
//	          outcome on the baseline: per kind and outcome, the larger of the side's
//	          excess and its shortfall, summed over the rows the same-work check counts),
//	          compared (the larger side's calls over those rows), differing_rows[] (when
//	          there is no ratio: up to three rows that differ most, {name, succeeded,
//	          failed}: the side's count minus the baseline's); io_ratio, runtime_ratio are
//	          0 and top[] empty when there is no ratio; runtime_source and
//	          baseline_runtime_source say what each runtime is: "anchored prediction"
//	          (replays' predictions anchored on the native runtime, summed over the
//	          side's runs), "prediction" (replays' predictions), "native" (the recording's
//	          runtime without the layer, which a side anchored on it is measured against),
//	          "recorded" (the wall time as recorded or replayed); runtime_ratio_low,
//	          runtime_ratio_high, io_ratio_low, io_ratio_high: where the sides'
//	          prediction intervals put the ratios (a side's low against the baseline's
//	          high and the other way; the ratio itself when neither is a prediction)}
//	view      "syscalls" (the default: per system call) or "requests" (--view
//	          requests: per FUSE request): the view that leads and that the same-work
//	          check uses
//	excluded_ops[], excluded_why: what the same-work check left out, and why
//	sides[]   {name, traces[] (as in a report), events, duration_ns, total_ns,
//	          total_ratio (to the baseline), work_ns (time of the ops the same-work check
//	          counts: all but lookup, forget, release, releasedir and flush, which depend on
//	          the kernel and on replay folding), work_ratio, data_share,
//	          resources (when the side's traces were sampled): {moved_bytes, mb_per_s
//	          (moved bytes per second of the side's duration), client (names),
//	          client_peak_rss_bytes (the largest of its traces), client_cpu_s,
//	          client_cpu_s_per_gb, iotap_peak_rss_bytes, iotap_cpu_s, iotap_cpu_s_per_gb,
//	          settings (the S3 client options a replay used, label replay.s3_options)},
//	          call_ns (the calls' summed time; syscalls view), call_ratio (0, as
//	          total_ratio and work_ratio in the requests view, for a side that is not the
//	          same work: see verdict),
//	          job (the side's bytes and rates as in a report's view, counted in the
//	          comparison's view)}
//	syscalls[] syscalls view: by the baseline's total time: {call, sides[] (as in ops[])}
//	ops[]     by the baseline's total time: {op, sides[] {count, errors, errnos{"EACCES":
//	          n}, bytes, mean_ns, p50_ns, p99_ns (over the ops that succeeded), total_ns
//	          (all ops), busy_ns, ops_per_s, failures_per_s, mb_per_s (as in a report's
//	          ops[]),
//	          first_access, reaccess (read rows, as in a report), flags[] ("≠count": the
//	          count differs from the baseline's; "≠bytes": the bytes differ; "no data": a
//	          data op that moved no bytes on one of the two sides, not ratioed; "all failed":
//	          no op succeeded on one of the two, not ratioed), ratio {count, p50, p99, mean
//	          (over the ops that succeeded on both sides; 0 when not given), total (only
//	          when the counts differ)} (absent on the baseline), hist[]}}
//	slower[], faster[]: up to 5 ops that lost or gained the most total time, among those
//	          carrying at least 1 % of the baseline's or the side's time {side, op,
//	          baseline_total_ns, total_ns, delta_ns, mean_ratio, p99_ratio, flags[]}
//	slower_calls[], faster_calls[]: syscalls view: the same for kinds of call (op names
//	          the call)
//
// The same-work check compares, per system call, the count of every kind of call and the
// bytes read and written (a recording against a replay leaves out "other" and "setattr",
// which replay does not issue); per request, the counts of every op but those five
// (readdir and readdirplus together), bytes read and bytes written. A difference of one
// call or op is ignored; anything beyond the tolerance (a fraction of the larger value)
// refuses the comparison unless forced.
//
// # CSV
//
// WriteCSV writes one table (ops, syscalls, sizes, procs, files, dirs or intervals) with a header
// row; every row starts with the view name ("all", or "host=node1" with --by). Units as in
// JSON. The procs table ends with each process's command line, its arguments quoted as a
// shell needs them.
//
// # HTML
//
// WriteHTML writes one self-contained file: inline CSS and SVG plots made with
// gonum.org/v1/plot, no scripts and no network access. It opens with the verdict. Plots:
// latency CDF per system call and per operation, the latency tail per operation, MB/s,
// under it the resident memory and CPUs busy of the storage client and iotap over the same
// time axis (sampled traces), ops/s, p99 and max per interval, in-flight depth per
// interval, with --by the busiest operations' CDFs by group, a latency histogram per
// operation, and sampled offset-vs-time for the busiest files. Then the heat maps (time in
// the storage and bytes over time, by file and by program, on a log colour scale from a pale
// to a dark blue; a map leaves out its rows with nothing to show), the access sizes (table
// and bars), and with --by the table of groups and the latency CDF of each group's calls.
// WriteCompareHTML puts a chart of the time each side lost (or gained) per kind of call
// against the baseline beside the verdict: the rows of the leading view whose total time
// moved most on any side, at most 10.
package report
