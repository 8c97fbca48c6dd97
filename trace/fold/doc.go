// Package fold turns the FUSE requests of a recorded trace back into the system calls the
// application made. Replay issues the calls it finds (package replay); the report shows
// their latency per call kind (the per-system-call view of package trace/stats). Both use
// this one implementation, so the calls a report counts are the calls a replay issues.
//
// # From requests to calls
//
// The kernel turns one system call into one or more requests, and sends requests of its
// own. A Folder reads a trace's events, restores start-time order within a bounded window
// (Options.Window events), and folds:
//
//	recorded request(s)                               call (Kind)
//	lookup* of a path's components, then a request    the request's call; the lookups are
//	  of the same thread on that path (within           folded into it (Call.Reqs, FoldDur,
//	  Options.FoldWindow)                               Walk)
//	lookup standing alone                             Stat: a stat, or an open, access or
//	                                                    exec of a name that does not exist
//	getattr, statx                                    Stat, or Fstat when the thread holds the
//	                                                    path open
//	getxattr(size 0) [+ getattr] right before a       folded into the setattr or write: the
//	  setattr or write of the same path                 kernel's privilege probe
//	open, create, opendir, tmpfile                    Open
//	read / write                                      Read / Write; contiguous pieces of one
//	                                                    thread and handle are one call (a buffer
//	                                                    the kernel split) when the kernel's legs
//	                                                    name one read or write system call for
//	                                                    them, or else when they follow within
//	                                                    MergeGap and the first is ≥ 64 KiB and
//	                                                    not page aligned; the call's time is
//	                                                    the pieces' (Call.Idle: between them)
//	read / write of a mapped file's pages that        Read / Write of its own: no system call,
//	  page faults brought in or made dirty              so nothing folds into it and it merges
//	  (trace.Event.Mapped)                              with nothing; on the handle the file was
//	                                                    mapped through, or once that is released,
//	                                                    on an implicit open of the file made at
//	                                                    its first such fault and kept to the end
//	flush ... release, releasedir                     Close, in the thread that opened the
//	                                                    file; its start and time are the
//	                                                    flush's (the application's close waits
//	                                                    for the flush only; the kernel sends
//	                                                    the release after it returned)
//	readdir, readdirplus                              Readdir
//	setattr                                           by the attributes it sets: Truncate
//	                                                    (Ftruncate when the thread holds the file
//	                                                    open), Chmod, Utimes, Chown; Skip for
//	                                                    bits no call sets alone
//	mkdir, mknod, unlink, rmdir, symlink, link,       the call of the same name
//	  rename, readlink, statfs, access, the xattr
//	  requests, fallocate, lseek, copy_file_range
//	fsync, fsyncdir                                   Fsync (the datasync flag marks fdatasync)
//	getlk, setlk, setlkw                              Lock
//	forget                                            dropped: the kernel evicting an inode
//	ioctl, poll, bmap                                 Skip
//
// A handle the trace uses but never opened (opened before recording began) gets an
// implicit Open (Call.Implicit), which stands for no request.
//
// Calls keep each thread's program order. A thread holds lookups (and a read or write
// that a next piece may extend) back until its next request shows whether they fold; they
// are released before a later call that would otherwise overtake them on their name or
// handle: the flush or release of their handle from any thread, an op of another thread
// that creates, removes or renames their name, or when they are older than FoldWindow or
// MergeGap (a piece of a read or write whose system call has not returned waits up to 1 s
// for the next). At most 1024 threads hold calls back at once (the one holding longest
// releases its calls when another starts to): no real job comes near.
//
// # What the calls cannot show
//
// A folder sees only requests that reached the tracing layer. A call the kernel answered
// itself leaves no trace: reads and writes served by the page cache and stats answered
// from the attribute cache when the trace was recorded with --cache kernel, lseek other
// than SEEK_DATA/SEEK_HOLE, fcntl other than locks, and calls on file descriptors of
// pipes or files outside the traced tree. With --cache kernel the reads and writes left
// are the kernel's readahead and write-back, not the application's calls. A close of a
// descriptor that dup or fork copied sends a flush per copy; the folder makes one Close
// per open file (the last flush). An open, access or exec of a missing name sends only
// its lookup, which becomes a Stat.
//
// # Memory
//
// A Folder keeps the sort window, the names of the paths it has seen, the state of the
// handles open at once and of the threads holding calls back — never state per event.
package fold
