// Package loopback is the file system a job sees through iotap's FUSE layer: a go-fuse node
// tree over a backend directory that carries out every request there and answers as the
// directory's own file system would. Package fusefs mounts it below its tracer, which
// records the requests. This package knows nothing of the trace: all it tells the tracer is
// the time of the backend call that served a request (package servicetime), and a depguard
// rule keeps it from importing trace, so that recording cannot change what the job sees.
//
// # Nodes and files
//
// A node embeds fs.Inode, which declares no operation, and declares each operation it serves
// itself, with a `var _ fs.NodeXxxer` check beside it; the replies are the go-fuse
// loopback's. Open, Create and Tmpfile return our file handle ([file]). It does its reads
// eagerly (pread into the kernel's buffer, so the time of the real I/O is inside the
// request) and never offers kernel passthrough, so every read and write reaches the daemon.
// Read replies offer go-fuse's Slices, so the server writes them with a single writev. (With
// fuse.ReadResultData, go-fuse v2.12 tries splice first: it writes the reply header into a
// pipe, finds no descriptor to splice from, and drains the pipe again, costing four syscalls
// per READ and, for 1 MiB reads, a log line each.)
//
// # The root descriptor
//
// Every operation reaches the backend through a descriptor of its root that fusefs opens
// (O_PATH) before mounting, with *at system calls: Open is openat2 with RESOLVE_NO_SYMLINKS,
// one syscall where the go-fuse loopback needs three. The system calls that take no
// directory descriptor (truncate, statfs, the *xattr calls) name the object as
// /proc/self/fd/N/path. So mounted over the target itself, the layer reaches the directory
// underneath the mount, and mounted elsewhere, it serves the directory it opened whatever
// becomes of the target's path. (The go-fuse loopback names files by absolute path: mounted
// in place, that path starts at /proc/self/fd/N, and every lookup would walk procfs first,
// an lstat costing about 4 µs instead of 1.5 µs.)
//
// # Long paths
//
// A path handed to a system call is at most PATH_MAX bytes with its NUL. The kernel names
// files to the layer by node, not by path, so a job can reach files deeper below the root
// than one path can name (it works relative to a deep directory, as natively). A path
// relative to the root descriptor that is too long is walked in pieces: the directories on
// the way are opened (O_PATH) and the operation runs relative to the last one.
//
// # As the caller
//
// Objects are created as the caller's own system call makes them natively (creds_linux.go);
// writes, truncations and O_TRUNC opens drop set-user-ID and set-group-ID bits as the
// backing file system would for the caller (killpriv_linux.go); POSIX, OFD and flock(2)
// locks are taken on the backing file, with the owners and semantics the job expects
// (locks_linux.go).
//
// # Errors
//
// Passthrough operations return the errno of their own syscall unchanged. Anything else goes
// through [toErrno].
package loopback
