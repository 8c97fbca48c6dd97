// Package stats aggregates trace events into the figures iotap reports: per-operation latency
// distributions, per-process, per-file, per-directory and per-interval views, and access
// patterns.
//
// # Streaming and bounded memory
//
// An [Accumulator] is fed one trace's events in file order with [Accumulator.Add] and
// aggregates them in start order: a trace lists events per group of threads, not by start
// (trace/doc.go), and the figures that depend on order (first access against re-access,
// sequential against random, a handle's open before its reads) need start order. Add holds
// the latest [trace.DefaultSortWindow] events (65,536, each a trace.Event and a 16-byte key) in a
// [trace.Sorter] and aggregates the earliest whenever it is full; an event that arrives
// after the window passed its start is aggregated late and counted in Source.Unordered.
// Beyond the window its memory grows with the number of distinct paths (512 bytes each, and
// 64 more with the per-system-call view), processes and open handles the trace touched (a
// path's and a process's heat row adds at most
// [MaxHeatCells] cells of 24 bytes), and with the job's duration up to
// [Options.MaxIntervals] intervals of about 1 KiB (beyond that the interval width doubles
// and neighbouring intervals merge), and with the requests of each operation that started
// in the last [DepthWindow] (16 bytes each, at most 262,144 per operation), which the
// in-flight depth needs in start order. Add does not allocate in the steady state
// (TestAddDoesNotAllocate): per-operation state lives in arrays indexed by [trace.Op],
// per-file state in a slice indexed by path id (with the state of the file's open handle
// and of its current read range inside it, so that an event costs at most one cache miss
// when there are many files), and latency histograms are allocated once per operation the
// first time it is seen. BenchmarkStatsAdd measures about 10 million events per second on
// one core for a mixed workload; BenchmarkStatsAddManyFiles, 100,000 files touched in
// random order (every event a cache miss), about 3 million.
//
// With Options.Names the Accumulator also keeps the per-system-call view (calls.go): it folds
// the requests into the calls they belong to with package trace/fold, as replay does. The
// folder takes the events in the Accumulator's start order (it needs no window of its own)
// and holds the name of each path it has seen and
// the state of the handles open at once and of the threads holding requests back; an event
// still costs no allocation (TestAddWithCallsDoesNotAllocate), and about twice the CPU of
// the per-request figures alone (BenchmarkStatsAddCalls against BenchmarkStatsAdd).
//
// The per-system-call view also keeps the calls' time per kind of call and path
// (Stats.CallPaths: a path's entry holds the first six kinds of call it saw, a map the
// others), and counts the reads and
// writes that succeeded by the bytes each moved, in Darshan's access-size buckets
// (Stats.AccessSizes, [AccessSizeOf]).
//
// The per-interval series is 1 s wide by default. With Options.Interval zero, traces
// shorter than 20 s get finer intervals (down to 1/64 s) so that short jobs still show a
// time series.
//
// Each path and each process also keeps its heat (heat.go): its time in the storage and
// the bytes it moved, in cells of time from 1 ms wide that double when a row would need more
// than [MaxHeatCells], for the heat maps of a report.
//
// With Options.Group the Accumulator splits the events into groups (the programs or users
// of a report by program) and aggregates each group as a trace of its own besides the
// whole (Stats.Groups): one more Accumulator per group.
//
// [Accumulator.Finish] resolves path ids and thread ids to names (a process by its main thread's record,
// [ProcessNames]) and returns a [Stats],
// keyed by names rather than ids, so that Stats from several traces (one per node of a
// multi-node job) combine with [Stats.Merge]. Histograms merge exactly.
//
// # Latency
//
// Per-operation latencies are recorded in HDR histograms (github.com/HdrHistogram/hdrhistogram-go)
// in nanoseconds, covering 1 ns to 1 h with 3 significant digits. A percentile p is the
// order statistic of rank ⌈p/100·n⌉, the rule of SQL's percentile_disc and DuckDB's
// quantile_disc (package internal/quantile); the reported value is never below that order
// statistic and less than 1/1024 of it above (exact below 2048 ns). Each histogram is a fixed array of about 264 KiB. Values outside the
// range are clamped into it before recording (a negative duration counts as 0, anything
// longer than an hour as an hour). Means, totals and maxima are exact. While an
// Accumulator takes events, the latencies of operations, request sizes, system calls,
// first reads and re-reads count in tables of 16-bit counts laid out as the histograms'
// counts (66 KiB each, a quarter of the histogram, so that the part a trace touches stays
// in cache), which Finish adds to the histograms: the figures are those of histograms
// that recorded every value (TestHistBufSame).
//
// The per-interval p99 uses a smaller log-linear histogram ([LogHist]: 8 buckets per power
// of two of microseconds), so it is within 12.5 % from 8 µs up and within 1 µs below:
// enough to see stalls, cheap enough to keep one per interval.
//
// # In-flight depth
//
// [Stats.Inflight] holds, per operation, how many of its requests were in flight at once:
// the depth each request found when it started (itself included), its distribution, mean
// and maximum, the time-weighted mean while busy, and the mean and maximum per interval
// (see depth.go). It is the overlap of the events' [Start, End) intervals: for the requests
// the tracing layer serves with one backend call, the requests the backend was serving at
// once. Requests waiting in the kernel's queue for the layer are not in it, so a job whose
// requests the backend serves faster than the layer receives them shows a lower depth than
// the one it submits at.
//
// # Access patterns
//
// A read or write is sequential when it starts where the previous data op on the same
// handle ended (the first op on a handle is sequential when it starts at offset 0), and
// random otherwise. Re-read bytes are bytes read again from a range of the same file that
// was already read; they are tracked with a small sorted interval set per file (at most
// [MaxRanges] ranges; when it overflows the smallest range is forgotten, so the figure is a
// lower bound and FileStats.RereadApprox says so).
//
// The same interval set splits reads into first access, reads that returned bytes never
// read before from the file (at least one), and re-access, reads that returned only bytes
// read before (Stats.FirstReads and Stats.Rereads with their latency histograms, per file
// in FileStats, and per read system call in Stats.CallFirstReads and CallRereads, which the
// per-system-call view tracks in its own set per file). When a file's set overflowed, a
// read of a forgotten range counts as a first access. Time to first byte (Stats.TTFB) is
// each file's first read that returned data, its own latency.
//
// # Rates
//
// Source.BusyNs is the trace's I/O-active time: the length of the union of its events'
// [Start, End) intervals, kept streaming in a bounded sorted set of recent intervals
// (busy.go; 16 KiB, allocated once; adding never allocates). Per operation, the busy time
// is Inflight.Ops[op].BusyNs; per kind of system call, CallStats.BusyNs. Rates per second
// of busy time are what the storage served while the job asked for it.
package stats
