// Package legs measures, in the kernel, what a recording layer does not see itself: the
// legs of each FUSE request outside its server, and the reads and writes that kernel FUSE
// passthrough serves without the server.
//
// # Legs of requests
//
// For each request of the traced mount: when the kernel queued it and when it completed
// it, and the system call of the application that sent it, from its entry to its return,
// with the thread's run delay and who woke it since its previous call. A recording stores
// them in each event (trace.Event's Queued, Done, CallStart, CallEnd, CallNr, RunDelay,
// WokenAt, Waker), so that a replay can tell what the application spent outside the file
// system from what FUSE added (a request sent in a call that names no file, or in a read or
// write of a file outside the mount, has no known entry: the program does not read the
// clock there; see bpf/legs.bpf.c). The trace writer's encoder fills them in (Fill) on events
// that have waited trace.DefaultLegHold since they were appended.
//
// # Calls served by kernel passthrough
//
// A file the server opens with FOPEN_PASSTHROUGH is read and written by the kernel on its
// backing file, in the application's own thread, at native speed: no request reaches the
// server. With Options.DataCalls, the program times every read, write, pread64, pwrite64,
// readv, writev, preadv, pwritev, preadv2 and pwritev2 on such a file of the mount from
// the system call's entry to its return, and libaio's and io_uring's reads and writes from
// submission to completion, and the Tracer hands each as a trace.Event (Passthrough set)
// to the DataSink given to Watch: the layer, which names its path and process as for its
// own events and appends it to the trace. See bpf/legs.bpf.c for what each record holds.
//
// # Mapped files
//
// The kernel maps such a file from its backing file: the job's loads and stores through
// the map are page faults on the backing file's page cache. With Options.DataCalls, the
// program notes each mmap of a passthrough file the job makes after Watch, and turns the
// faults on it into events handed to the same DataSink: a read (trace.OpRead) of the pages
// a fault brought into the job's memory (the page it faulted on, or the window of cached
// pages the kernel maps around it), a write of the page a store through a shared map made
// dirty, each with trace.MapFault, no system call and no duration (no tracepoint marks a
// fault's end). Stats counts the mmaps followed, the faults recorded and the mmaps the
// program's table of mapped files had no room for. Mappings made before Watch or by
// execve are not followed; see bpf/legs.bpf.c for what else is not.
//
// # Requirements
//
// The program (bpf/legs.bpf.c, compiled by bpf2go into the committed objects
// legs_<arch>_bpfel.o, see gen.go) attaches to BTF-enabled raw tracepoints (tp_btf):
// fuse_request_send, fuse_request_end, sched_waking, sys_enter, sys_exit,
// io_uring_submit_req and io_uring_complete, and, to follow mapped files, mm_filemap_fault,
// mm_filemap_map_pages and writeback_dirty_folio. It needs root (CAP_BPF and CAP_PERFMON),
// the kernel's BTF (/sys/kernel/btf/vmlinux) and those tracepoints (Linux 6.1 and later
// have the FUSE ones, 6.11 and later the filemap ones); the loader relocates the program's
// reads of kernel structures with the kernel's BTF (CO-RE), so no offset is fixed at build
// time. Open reads the kernel's BTF once, while it makes the maps, and has the kernel verify
// the programs on every CPU at once (load.go): the verifier is most of a recording's
// start-up. It loads only the programs its options use. Open says which requirement is
// missing; a recorder then falls back to its round-trip probe, and serves data calls
// itself. A kernel without the filemap tracepoints loads the program without the part that
// follows mapped files (Tracer.MapsUnfollowed says so).
//
// # Records to events
//
// The program writes records to a ring buffer; a goroutine drains it every drain interval
// (sooner when the program says the ring is filling). Request and call records go into a
// table indexed by the request's unique id, which Fill reads; the table holds the last
// TableSlots requests, so an event encoded later than that after its request completed
// finds its slot reused and is counted as missing. Data records become events at once.
// Records the ring had no room for are counted (Stats.Lost): a recording reports them as
// dropped events.
package legs
