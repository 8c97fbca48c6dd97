// Package fusefs serves a directory through a passthrough FUSE filesystem and records every
// request it serves as a trace.Event.
//
// # The file system and the tracer
//
// The layer is two things that meet at one point. What the job sees is the file system
// itself, package loopback (fusefs/internal/loopback): a go-fuse node tree that carries out
// each request on the backend directory and answers as the directory's own file system
// would. What is recorded is this package's tracer ([tracer] and the tables it keeps): a
// fuse.RawFileSystem over that tree that times every request, names its path and caller, and
// hands the event to a [Recorder]. The two meet in package servicetime
// (fusefs/internal/servicetime), where the node code leaves the time of the backend call
// that served a request for the tracer to record.
//
// The tracer stays in this package with the mount because what callers ask of fusefs,
// beyond mounting, is the tracer's: what to record (the filters of [Options]), where
// ([Recorder]) and what recording cost ([Server.Cost]). Of the file system they need only
// that it be mounted, so it sits below, behind one constructor, and imports neither this
// package nor trace (a depguard rule in .golangci.yml): recording cannot change what the job
// sees.
//
// # Timing
//
// [tracer] implements every method of fuse.RawFileSystem itself (no embedding: a test fails
// when go-fuse adds a method) and wraps the file system's fs.NewNodeFS bridge. Each method
// takes the clock, calls the bridge, takes the clock again and appends one event; where the
// node code measured the backend call (package servicetime), the event's times are that call's. The
// raw level sees every request, including the ones the bridge answers on its own (FORGET,
// directory-stream buffering, Lseek and Statx defaults), and v2.12's WRITE→Writev dispatch.
//
// # In-place tracing
//
// Mount opens the target with O_PATH before mounting, and the file system reaches the
// backend only through that descriptor: mounted over the target itself (rootDir equal to the
// mount point), the layer reads the directory it covers, and files written through the mount
// land in the real directory.
//
// # Unmounting
//
// If a process unshared its mount namespace while the layer was mounted, a copy of the mount
// lives on there after umount and go-fuse's serving loops never see the connection end.
// Server.Unmount then aborts the connection through fusectl (package fusectl mounts it
// where only one thread of this process sees it, if needed), so neither iotap nor that copy
// hangs, and nothing is left mounted.
//
// # Paths
//
// FUSE requests carry node ids, not paths. The tracer keeps node id → path id (interned by the
// Recorder as parent path id + name) from the replies of LOOKUP, CREATE, MKDIR, MKNOD, SYMLINK,
// LINK and READDIRPLUS (the kernel may use those node ids without a LOOKUP), drops it when the
// kernel forgets the node, and moves it on RENAME. Each node also remembers its parent node
// and name; renaming a directory starts a new generation, and a node whose path is from an
// older generation recomputes it (parent path + name) on its next use, so the children of a
// renamed directory are recorded under their new paths.
//
// The table is built for a mount's cold caches, where every cache line a request touches
// costs a miss and often a page walk: a node's path, directory, name hash and lock-free
// reference count sit in one line of a direct-mapped cache (a repeated LOOKUP, every stat
// with 0 s entry timeouts, touches only that line), and the authoritative entries are
// open-addressed tables of one-line entries in locked shards ([nodeMap]).
//
// # The layer's cost
//
// The layer times its own work (entry to the end of recording, less the bridge and the
// backend call) on one request in 8, chosen by the kernel's request id, and scales the sums
// to all requests; /proc reads in requests' paths are timed on every request. Options.CostByOp
// (benchmarks) times every request and keeps a median per operation.
//
// # Attribution
//
// The caller's pid in a FUSE request is a thread id. When the kernel's proc connector can be
// subscribed to (root, initial namespaces), package procconn keeps thread → process, parent,
// comm and exe from fork, exec, comm and exit events, and a request reads that table: new
// threads and forked children cost no /proc read, a rename (prctl PR_SET_NAME) is seen at
// once, and exited threads leave the table. The kernel does not send an exec'd program's name
// and executable: the resolver's goroutine reads them (comm and the exe link) as the program
// starts, when it descends from iotap or from a thread that used the mount; a program whose
// first request comes before that has them read in that request. Threads that existed before
// the mount are read from /proc by
// the resolver's goroutine after their first request ("late"; the event's pid is the thread's
// own when it is a process's main thread, else 0 until the record arrives), but for a name
// filter (Options.Comms), which reads such a thread whole in its first request: every kept
// event follows its thread's record. A request the kernel sends for a thread after its exit
// (a RELEASE, when the thread's exit closed the file) is attributed as the thread was. Each
// record's FirstSeen is the start of the thread's first event. The summary says how many
// records were late or missing. Without the connector, the tracer resolves each
// thread from /proc in its first request and re-reads comm at most every 50 ms. RELEASE and
// RELEASEDIR (pid 0) are attributed to the thread that opened the handle.
//
// # Errors
//
// Recording never changes what the caller sees: a recording failure is counted with
// Recorder.CountError. The errno of a request is the file system's (package loopback).
//
// # Locks
//
// LOCK ORDERING: the tracer's shard locks (nodeTable, handle table, process table, seen set,
// filter cache, the path → node map) are leaves: no code holds one while taking another,
// calling the inner file system, or calling the Recorder. The one lock taken around them is
// the trace writer's path-index lock: a compaction of the index, inside Recorder.Path, takes
// the path → node map's lock (liveSet) and the filter's shard locks (forget).
// The proc resolver's lock (package procconn) is held around Recorder.AddProcess, which
// takes the trace writer's locks; the writer never calls the resolver.
package fusefs
