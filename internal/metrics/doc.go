// Package metrics serves what a recording sees as Prometheus metrics, for `iotap mount` and
// `iotap record` with --metrics: the FUSE requests' latencies, counts, bytes and errors, the
// requests in flight, the trace writer's events, and the resources of the recorder and of
// the storage client.
//
// # Where the figures come from
//
// The request metrics are fed by the trace writer's encoder (trace.WriterOptions.Observe),
// a batch of events at a time, on the encoder's goroutine: the requests' own path does
// nothing for them, as for the live line and the end-of-run summary (package tally). A
// request therefore shows in the metrics once the encoder has taken it, within the writer's
// flush interval. The other figures are read when a scrape asks for them: the writer's
// totals (trace.Writer.Stats), the requests in flight (a function the caller gives, reading
// the kernel's count of the FUSE connection, fusectl's waiting file; absent when the caller
// cannot read it), and the last resource samples the recorder
// took (procsample, handed over about once a second).
//
// # Cost
//
// Collector.Observe takes no lock and, once each operation, errno and native bucket has
// been seen, allocates nothing (TestObserveDoesNotAllocate). Per event it makes one
// histogram observation (client_golang: a few atomic adds, a classic bucket search over
// 22 bounds, and a native bucket found in a lock-free sync.Map); the counts and bytes are
// summed over the batch and added once per operation. A failed event adds one to its
// (op, errno) counter, found in a map owned by the encoder's goroutine. The histogram takes
// its own lock only when its native buckets exceed NativeHistogramMaxBucketNumber, to halve
// its resolution or reset. A scrape reads the writer's totals, which holds each writer
// shard's lock for a moment, as the live line does: once per scrape, not per request.
//
// # Metrics
//
// Names are in base units. op is the FUSE request as the trace names it (trace.Op.String:
// lookup, getattr, read, write, ...); errno its symbolic name (trace.ErrnoName: ENOENT).
// A series appears with its first request.
//
//	iotap_request_duration_seconds{op}      histogram  the request's time, as the trace records it (Event.Dur)
//	iotap_requests_total{op}                counter    requests, failed ones included
//	iotap_request_errors_total{op,errno}    counter    requests that returned an error
//	iotap_data_bytes_total{op}              counter    bytes moved by successful read, write and copy_file_range requests
//	iotap_requests_in_flight                gauge      requests the kernel has queued for the layer or sent to it, not yet answered
//	iotap_trace_events_total                counter    events the trace writer accepted
//	iotap_trace_events_written_total        counter    events written to the trace in complete chunks
//	iotap_trace_events_dropped_total        counter    events dropped (buffer full with --drop-when-full, or a failed write)
//	iotap_trace_written_bytes_total         counter    bytes written to the trace
//	iotap_trace_blocked_seconds_total       counter    time requests waited for trace buffer space
//	iotap_process_resident_memory_bytes{role,comm,pid}  gauge    resident set size at the last sample
//	iotap_process_cpu_seconds_total{role,comm,pid,mode} counter  CPU time (mode user or system) at the last sample
//	iotap_info{version,kind,target,mount_point,trace,cache}  gauge  1, naming the recording
//
// The latency histogram has classic buckets from 1 µs to 10 s (1, 2.5 and 5 per decade) and
// native-histogram settings (bucket factor 1.1, at most 160 buckets): a Prometheus that
// scrapes native histograms gets those, others the classic buckets. role is recorder (the
// process serving the layer) or client (the storage client serving the target:
// --client-pid, or the FUSE daemon of the target's mount).
package metrics
