package s3

import (
	"context"
	"fmt"
	"strings"
	"syscall"
)

// Profiles lists the request profiles of the S3 backend, the default first.
var Profiles = []string{"mountpoint", "s3fs", "sdk"}

// newProfile returns the profile named name ("" is the default) for b, with its settings.
func newProfile(name string, b *Backend, p *params) (profile, error) {
	var (
		prof  profile
		err   error
		known []string
	)
	switch name {
	case "mountpoint", "":
		name, known = "mountpoint", paramDocs["mountpoint"]
		prof, err = newMountpoint(b, p)
	case "s3fs":
		known = paramDocs["s3fs"]
		prof, err = newS3FS(b, p)
	case "sdk":
		known = paramDocs["sdk"]
		prof, err = newSDK(b, p)
	default:
		return nil, fmt.Errorf("replay: unknown S3 profile %q (want %s)", name, strings.Join(Profiles, ", "))
	}
	if err != nil {
		return nil, err
	}
	if err := p.unknown(name, known); err != nil {
		return nil, err
	}
	return prof, nil
}

// paramDocs lists each profile's settings (Options.Params), as `key`: what it sets.
var paramDocs = map[string][]string{
	"mountpoint": {"prefetch_initial", "prefetch_max", "read_part_size", "concurrency", "memory_limit", "part_size"},
	"s3fs":       {"multipart_size", "multipart_threshold", "parallel_count"},
	"sdk":        {"part_size", "concurrency"},
}

// SettingsHelp describes the settings of every profile, for --help.
const SettingsHelp = "mountpoint: prefetch_initial (first read window, 1152KiB), prefetch_max (largest window, 8MiB), " +
	"read_part_size (GET size within a window, 8MiB), concurrency (GETs and part uploads in flight per file, 16), " +
	"memory_limit (prefetched bytes held at once, all files; 0 = no limit), part_size (upload part, 8MiB); " +
	"s3fs: multipart_size (upload part, 10MiB), multipart_threshold (single PUT below it, 10MiB), parallel_count (part uploads in flight, 5); " +
	"sdk: part_size (upload part and single-PUT threshold, 5MiB), concurrency (part uploads in flight, 5)"

// profile maps filesystem calls to S3 requests the way one S3 client does. Each profile is
// a type in its own file whose methods are that client's mapping, call by call.
//
// The Backend calls a method after the steps every client shares: it has checked the
// names (replay.CheckName), started timing the call and counting its requests, and
// answered what needs no request (the root, a file being written, a directory held
// locally). While preparing, the Backend makes directories and symlinks as objects itself,
// whatever the profile. A method issues its requests through the Backend's helpers
// (head, listAny, listDir, get, put, copyObject, del; requests.go) and returns what the
// client's application would see: for a call the client cannot do, a *RefusedError made
// by Backend.refuse, issuing no request. The methods on a file are called with its mutex
// held; the others may be called concurrently.
type profile interface {
	// name is the profile's name in Options.Profile, request tallies and refusals.
	name() string

	// lookup finds a name that is neither the root nor held locally.
	lookup(ctx context.Context, name string) (entry, error)
	// forget drops what the client caches about name and everything below it, before a
	// call changes them; reset drops everything it keeps (Reset emptied the prefix).
	forget(name string)
	reset()

	// mkdir makes directory name, which does not exist and whose parent does.
	mkdir(ctx context.Context, name string, perm uint32) error
	// mknod makes a special file, or an empty regular file for S_IFREG (or no type).
	mknod(ctx context.Context, name string, mode uint32) error
	// remove unlinks name (not the root).
	remove(ctx context.Context, name string) error
	rename(ctx context.Context, from, to string, flags uint32) error
	link(ctx context.Context, existing, name string) error
	// symlink makes symlink name holding target (never called while preparing).
	symlink(ctx context.Context, target, name string) error
	readlink(ctx context.Context, name string, buf []byte) (int, error)
	truncate(ctx context.Context, name string, size int64) error
	// setMeta is chmod (setMode: the permission bits of mode replace the file's), chown,
	// utimes, and the metadata update of setxattr and removexattr; op names the call.
	setMeta(ctx context.Context, op, name string, mode uint32, setMode bool) error
	getxattr(ctx context.Context, name, attr string, buf []byte) (int, error)
	listxattr(ctx context.Context, name string, buf []byte) (int, error)
	// setxattr and removexattr get names that were not checked yet.
	setxattr(ctx context.Context, name, attr string, value []byte) error
	removexattr(ctx context.Context, name, attr string) error

	// open opens regular file h for flags. The Backend has looked it up (e; exists),
	// applied O_CREAT, O_EXCL and O_DIRECTORY, checked the parent of a new file, and set
	// h's name, key, size and whether it may be read.
	open(ctx context.Context, h *file, e entry, exists bool, flags int) (*file, error)
	// read reads [off, stop) of f into p (0 <= off < stop <= f.size; f has no local copy)
	// and returns the bytes read.
	read(ctx context.Context, f *file, p []byte, off, stop int64) (int, error)
	// readdir issues what the client requests for the entries of directory f, just listed
	// (ents, without "." and "..").
	readdir(ctx context.Context, f *file, ents []dirent)
	// fsync and release are fsync and the last close of f.
	fsync(ctx context.Context, f *file) error
	release(ctx context.Context, f *file) error
	// resize is the error of an ftruncate that would change the size of a file being
	// uploaded as it is written.
	resize() error
}

// noXattrs is the extended-attribute part of a profile whose client keeps none: every
// call fails with ENOTSUP.
type noXattrs struct{ b *Backend }

const noXattrsWhy = "no extended attributes"

func (x noXattrs) getxattr(ctx context.Context, name, attr string, buf []byte) (int, error) {
	return 0, x.b.refuse("getxattr", syscall.ENOTSUP, noXattrsWhy)
}

func (x noXattrs) listxattr(ctx context.Context, name string, buf []byte) (int, error) {
	return 0, x.b.refuse("listxattr", syscall.ENOTSUP, noXattrsWhy)
}

func (x noXattrs) setxattr(ctx context.Context, name, attr string, value []byte) error {
	return x.b.refuse("setxattr", syscall.ENOTSUP, noXattrsWhy)
}

func (x noXattrs) removexattr(ctx context.Context, name, attr string) error {
	return x.b.refuse("removexattr", syscall.ENOTSUP, noXattrsWhy)
}
