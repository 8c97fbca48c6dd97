package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/trace"
)

// S3 is the Backend for a key prefix of an S3 bucket. Filesystem calls become S3
// requests through a profile that copies how one S3 client maps them:
//
//   - "mountpoint" (Mountpoint for Amazon S3): lookup/stat = HeadObject and
//     ListObjectsV2(prefix=name/, delimiter=/, max-keys=1) issued together; readdir =
//     ListObjectsV2 with delimiter, paginated; sequential reads = ranged GETs of a
//     prefetch window that starts at 1 MiB + 128 KiB and doubles up to 8 MiB parts, the
//     next window fetched ahead once reads reach the second half of the current one (a
//     forward seek of up to 16 MiB or a backward seek of up to 1 MiB keeps the stream;
//     anything else restarts it at the initial window); writes = sequential only, a multipart upload of 8 MiB
//     parts, the object visible at close or fsync; opening an existing file for writing
//     needs O_TRUNC; mkdir is local until a file is written below; rename, link, symlink,
//     chmod, chown, truncate and xattrs fail as Mountpoint fails them (EPERM/ENOTSUP),
//     out-of-order writes fail with EINVAL.
//   - "s3fs": stat = HeadObject of name, then name/, then a ListObjectsV2, results kept
//     in a stat cache (900 s, s3fs's default); readdir = ListObjectsV2 + one HeadObject per
//     entry (10 at a time); creating a file PUTs an empty object at once; writes go to a
//     local temporary file (an existing object is downloaded first unless O_TRUNC) and
//     are uploaded on fsync and close: one PutObject below 10 MiB, otherwise a multipart
//     upload of 10 MiB parts; reads are ranged GETs of the bytes not read before; rename =
//     CopyObject + DeleteObject (per object for a directory); chmod, chown, utimes and
//     xattrs = CopyObject onto itself with new metadata; mkdir = PutObject of name/;
//     symlinks are objects holding the target.
//   - "sdk" (an application using the SDK directly): stat = HeadObject (ListObjectsV2 if
//     that misses, for directories); each read one ranged GET; writes streamed as the
//     SDK upload manager does: one PutObject below 5 MiB, otherwise 5 MiB parts; rename =
//     CopyObject + DeleteObject; no metadata, links or in-place updates (ENOTSUP).
//
// Calls a profile cannot do return a *RefusedError (counted as refused) that unwraps to
// the errno that client returns. Locks are kept locally, conflicting between open files,
// as the kernel keeps them for a FUSE client without a lock handler; statfs and fstat
// issue no request. Read data served from Mountpoint's prefetch window is zeros (the
// replay checks sizes, not contents).
//
// # Requests
//
// Every call is timed and its requests counted by S3 operation (with payload bytes,
// retries and 503 SlowDown responses) through a middleware on the SDK client; see
// RequestCounter, WriteRequests and PrintRequests.
//
// While preparing (BeginPhase("prepare")), directories are made as name/ marker objects
// and symlinks as objects holding their target for every profile, and chmod is accepted
// without a request, so that any profile can start from the same state.
//
// Every key is the prefix plus a name checked with CheckName: nothing outside the prefix
// is read or written. Close deletes the objects this backend created unless Keep was set,
// and aborts multipart uploads left open.
type S3 struct {
	client   *s3.Client
	bucket   string
	prefix   string // "" or ends with "/"
	url      string
	endpoint string
	prof     s3Profile
	keep     bool
	log      *slog.Logger
	tmpDir   string

	preparing atomic.Bool
	cur       atomic.Pointer[reqTallyAcc]

	tmu    sync.Mutex // guards phases and taken
	phases []*reqTallyAcc
	taken  int // phases[:taken] were written by WriteRequests

	mu        sync.Mutex             // guards the maps below
	created   map[string]struct{}    // keys this backend wrote and has not deleted
	uploads   map[string]string      // multipart upload id -> key, not yet completed
	localDirs map[string]struct{}    // mountpoint: directories made by mkdir, held locally
	pending   map[string]int64       // mountpoint/sdk: names being written -> bytes so far
	statCache map[string]s3StatEntry // s3fs: stat cache by name
	xattrs    map[string]map[string]string

	locks s3LockTable
}

var (
	_ Backend        = (*S3)(nil)
	_ RequestCounter = (*S3)(nil)
)

type s3StatEntry struct {
	e  s3Entry
	at time.Time
}

// s3Entry is what a lookup found.
type s3Entry struct {
	mode uint32 // S_IFMT bits and permissions
	size int64
}

func (e s3Entry) isDir() bool  { return e.mode&syscall.S_IFMT == syscall.S_IFDIR }
func (e s3Entry) isLink() bool { return e.mode&syscall.S_IFMT == syscall.S_IFLNK }

// s3Profile holds the numbers and switches of one client mapping.
type s3Profile struct {
	name       string
	readInit   int64 // mountpoint: first prefetch window
	readMax    int64 // mountpoint: largest request
	partSize   int64 // multipart part size
	singlePut  int64 // objects smaller than this are uploaded with one PutObject (0: never)
	statTTL    time.Duration
	headsPerLS int // s3fs: concurrent HEADs during readdir
}

// Profiles lists the request profiles of the S3 backend.
var Profiles = []string{"mountpoint", "s3fs", "sdk"}

// s3TruncateMax bounds the size an s3fs-profile truncate rewrites (held in memory).
const s3TruncateMax = 256 << 20

const (
	s3MiB = 1 << 20
	s3KiB = 1 << 10
)

func s3ProfileByName(name string) (s3Profile, error) {
	switch name {
	case "mountpoint", "":
		return s3Profile{name: "mountpoint", readInit: s3MiB + 128*s3KiB, readMax: 8 * s3MiB, partSize: 8 * s3MiB}, nil
	case "s3fs":
		return s3Profile{name: "s3fs", partSize: 10 * s3MiB, singlePut: 10 * s3MiB, statTTL: 900 * time.Second, headsPerLS: 10}, nil
	case "sdk":
		return s3Profile{name: "sdk", partSize: 5 * s3MiB, singlePut: 5 * s3MiB}, nil
	}
	return s3Profile{}, fmt.Errorf("replay: unknown S3 profile %q (want %s)", name, strings.Join(Profiles, ", "))
}

// Target implements Backend.
func (s *S3) Target() trace.Target {
	src := "aws"
	if s.endpoint != "" {
		src = s.endpoint
	}
	return trace.Target{Path: s.url, FSType: "s3", Source: src, Mount: "profile=" + s.prof.name}
}

// Path returns the s3:// URL of the root.
func (s *S3) Path() string { return s.url }

// Profile returns the name of the request profile.
func (s *S3) Profile() string { return s.prof.name }

// BeginPhase implements RequestCounter. OpenS3 starts a phase "open" (its probe); the
// first filesystem call made in it starts "replay" by itself, so a replay without a
// prepare step is tallied as such.
func (s *S3) BeginPhase(phase string) {
	t := newReqTally(phase)
	s.tmu.Lock()
	s.phases = append(s.phases, t)
	s.tmu.Unlock()
	s.cur.Store(t)
	s.preparing.Store(phase == "prepare")
}

// Requests implements RequestCounter.
func (s *S3) Requests() []RequestStats {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	out := make([]RequestStats, 0, len(s.phases))
	for _, t := range s.phases {
		out = append(out, t.snapshot(s.prof.name))
	}
	return out
}

// takeRequests returns the phases started since the previous call (for WriteRequests).
func (s *S3) takeRequests() []RequestStats {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	var out []RequestStats
	for _, t := range s.phases[min(s.taken, len(s.phases)):] {
		out = append(out, t.snapshot(s.prof.name))
	}
	s.taken = len(s.phases)
	return out
}

// begin starts a filesystem call: requests issued with the returned context are counted
// under op, and end records its latency and outcome.
func (s *S3) begin(ctx context.Context, op string) (context.Context, func(err error)) {
	t := s.cur.Load()
	if t.phase == "open" {
		// The first filesystem call without a phase of its own: the replay has begun.
		s.tmu.Lock()
		if t = s.cur.Load(); t.phase == "open" {
			t = newReqTally("replay")
			s.phases = append(s.phases, t)
			s.cur.Store(t)
		}
		s.tmu.Unlock()
	}
	start := time.Now()
	return context.WithValue(ctx, s3OpKey{}, s3OpRef{t: t, op: op}), func(err error) { t.end(op, time.Since(start), err) }
}

// refuse returns the error of a call the profile cannot do.
func (s *S3) refuse(op string, errno syscall.Errno, why string) error {
	return &RefusedError{Profile: s.prof.name, Op: op, Errno: errno, Why: why}
}

// cls classifies an SDK error for the Backend contract.
func (s *S3) cls(what string, err error) error {
	if err == nil {
		return nil
	}
	c := s3store.Classify(err)
	if errors.Is(c, s3store.ErrThrottled) || errors.Is(c, s3store.ErrUnreachable) {
		return fmt.Errorf("replay: s3 %s: %w: %w", what, ErrTransient, c)
	}
	return fmt.Errorf("replay: s3 %s: %w", what, c)
}

// key returns the object key of a checked name; dirKey the key prefix of its children.
func (s *S3) key(name string) string { return s.prefix + name }
func (s *S3) dirKey(name string) string {
	if name == "" {
		return s.prefix
	}
	return s.prefix + name + "/"
}

// --- requests -------------------------------------------------------------------------

const s3MetaMode = "mode" // x-amz-meta-mode, as s3fs stores it (decimal)

func (s *S3) head(ctx context.Context, key string) (s3Entry, map[string]string, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return s3Entry{}, nil, s.cls("head "+key, err)
	}
	e := s3Entry{mode: syscall.S_IFREG | 0o644, size: aws.ToInt64(out.ContentLength)}
	if strings.HasSuffix(key, "/") {
		e.mode = syscall.S_IFDIR | 0o755
	}
	if m, ok := out.Metadata[s3MetaMode]; ok {
		if v, err := strconv.ParseUint(m, 10, 32); err == nil && v&syscall.S_IFMT != 0 {
			e.mode = uint32(v)
		}
	}
	return e, out.Metadata, nil
}

// listAny reports whether any key starts with dir (max-keys n).
func (s *S3) listAny(ctx context.Context, dir string, n int32) (bool, error) {
	out, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
		Bucket: &s.bucket, Prefix: &dir, Delimiter: aws.String("/"), MaxKeys: aws.Int32(n),
	})
	if err != nil {
		return false, s.cls("list "+dir, err)
	}
	return len(out.Contents) > 0 || len(out.CommonPrefixes) > 0, nil
}

type s3Dirent struct {
	name string
	dir  bool
	size int64
}

// listDir lists the children of dir (a key prefix), paginated.
func (s *S3) listDir(ctx context.Context, dir string) ([]s3Dirent, error) {
	var ents []s3Dirent
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &dir, Delimiter: aws.String("/")}
	for {
		out, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, s.cls("list "+dir, err)
		}
		for _, o := range out.Contents {
			k := aws.ToString(o.Key)
			if k == dir {
				continue // the directory's own marker
			}
			ents = append(ents, s3Dirent{name: strings.TrimPrefix(k, dir), size: aws.ToInt64(o.Size)})
		}
		for _, p := range out.CommonPrefixes {
			ents = append(ents, s3Dirent{name: strings.TrimSuffix(strings.TrimPrefix(aws.ToString(p.Prefix), dir), "/"), dir: true})
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			break
		}
		in.ContinuationToken = out.NextContinuationToken
	}
	return ents, nil
}

// listAll returns every key below dir (no delimiter).
func (s *S3) listAll(ctx context.Context, dir string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &dir})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.cls("list "+dir, err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

// get reads [off, off+n) of key: the first len(dst) bytes into dst, the rest discarded.
func (s *S3) get(ctx context.Context, key string, off, n int64, dst []byte) (int64, error) {
	rng := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key, Range: &rng})
	if err != nil {
		var re interface{ HTTPStatusCode() int }
		if errors.As(err, &re) && re.HTTPStatusCode() == 416 {
			return 0, nil // range beyond the end: an empty read
		}
		return 0, s.cls("get "+key, err)
	}
	defer func() { _ = out.Body.Close() }()
	var got int64
	if len(dst) > 0 {
		m, err := io.ReadFull(out.Body, dst[:min(int64(len(dst)), n)])
		got += int64(m)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			s3AddBytes(ctx, "GetObject", got)
			return got, s.cls("get "+key, err)
		}
	}
	m, err := io.Copy(io.Discard, out.Body)
	got += m
	s3AddBytes(ctx, "GetObject", got)
	if err != nil {
		return got, s.cls("get "+key, err)
	}
	return got, nil
}

func (s *S3) put(ctx context.Context, key string, body io.ReadSeeker, size int64, meta map[string]string) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: body, ContentLength: aws.Int64(size), Metadata: meta,
	})
	if err != nil {
		return s.cls("put "+key, err)
	}
	s3AddBytes(ctx, "PutObject", size)
	s.markCreated(key)
	return nil
}

func (s *S3) copyObject(ctx context.Context, src, dst string, meta map[string]string) error {
	in := &s3.CopyObjectInput{Bucket: &s.bucket, Key: &dst, CopySource: aws.String(s.bucket + "/" + s3EscapeKey(src))}
	if meta != nil {
		in.Metadata = meta
		in.MetadataDirective = types.MetadataDirectiveReplace
	}
	if _, err := s.client.CopyObject(ctx, in); err != nil {
		return s.cls("copy "+src+" to "+dst, err)
	}
	s.markCreated(dst)
	return nil
}

// s3EscapeKey escapes a key for x-amz-copy-source, keeping the slashes.
func s3EscapeKey(k string) string {
	parts := strings.Split(k, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

func (s *S3) del(ctx context.Context, key string) error {
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key}); err != nil {
		return s.cls("delete "+key, err)
	}
	s.mu.Lock()
	delete(s.created, key)
	s.mu.Unlock()
	return nil
}

func (s *S3) markCreated(key string) {
	s.mu.Lock()
	s.created[key] = struct{}{}
	s.mu.Unlock()
}

// --- lookups --------------------------------------------------------------------------

var s3ErrNotExist = fs.ErrNotExist

// lookup finds name the way the profile's client does.
func (s *S3) lookup(ctx context.Context, name string) (s3Entry, error) {
	if name == "" {
		return s3Entry{mode: syscall.S_IFDIR | 0o755}, nil
	}
	s.mu.Lock()
	if n, ok := s.pending[name]; ok {
		s.mu.Unlock()
		return s3Entry{mode: syscall.S_IFREG | 0o644, size: n}, nil
	}
	if _, ok := s.localDirs[name]; ok {
		s.mu.Unlock()
		return s3Entry{mode: syscall.S_IFDIR | 0o755}, nil
	}
	if c, ok := s.statCache[name]; ok && time.Since(c.at) < s.prof.statTTL {
		s.mu.Unlock()
		return c.e, nil
	}
	s.mu.Unlock()
	switch s.prof.name {
	case "mountpoint":
		// HeadObject and ListObjectsV2 together; a directory shadows a file of the same name.
		var (
			wg        sync.WaitGroup
			hEnt      s3Entry
			hErr, lEr error
			isDir     bool
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			hEnt, _, hErr = s.head(ctx, s.key(name))
		}()
		isDir, lEr = s.listAny(ctx, s.dirKey(name), 1)
		wg.Wait()
		if lEr != nil {
			return s3Entry{}, lEr
		}
		if isDir {
			return s3Entry{mode: syscall.S_IFDIR | 0o755}, nil
		}
		if hErr != nil {
			return s3Entry{}, hErr
		}
		return hEnt, nil
	case "s3fs":
		e, _, err := s.head(ctx, s.key(name))
		if errors.Is(err, fs.ErrNotExist) {
			// The directory's marker object (which carries its mode), then an implicit
			// directory (keys below it, no marker).
			e, _, err = s.head(ctx, s.dirKey(name))
			if errors.Is(err, fs.ErrNotExist) {
				var any bool
				any, err = s.listAny(ctx, s.dirKey(name), 2)
				if err == nil && !any {
					err = fmt.Errorf("replay: s3 lookup %q: %w", name, s3ErrNotExist)
				}
				e = s3Entry{mode: syscall.S_IFDIR | 0o755}
			}
		}
		if err != nil {
			return s3Entry{}, err
		}
		s.cacheStat(name, e)
		return e, nil
	default: // sdk
		e, _, err := s.head(ctx, s.key(name))
		if errors.Is(err, fs.ErrNotExist) {
			var any bool
			any, err = s.listAny(ctx, s.dirKey(name), 1)
			if err == nil && !any {
				err = fmt.Errorf("replay: s3 lookup %q: %w", name, s3ErrNotExist)
			}
			e = s3Entry{mode: syscall.S_IFDIR | 0o755}
		}
		return e, err
	}
}

// checkParent returns ENOENT or ENOTDIR unless name's parent is a directory (the kernel's
// lookup of the parent before a create). Nothing is checked while preparing.
func (s *S3) checkParent(ctx context.Context, name string) error {
	p := parentOf(name)
	if p == "" || s.preparing.Load() {
		return nil
	}
	e, err := s.lookup(ctx, p)
	if err != nil {
		return err
	}
	if !e.isDir() {
		return syscall.ENOTDIR
	}
	return nil
}

func (s *S3) cacheStat(name string, e s3Entry) {
	if s.prof.statTTL <= 0 {
		return
	}
	s.mu.Lock()
	s.statCache[name] = s3StatEntry{e: e, at: time.Now()}
	s.mu.Unlock()
}

// uncache drops name and everything below it from the stat cache.
func (s *S3) uncache(name string) {
	if s.prof.statTTL <= 0 {
		return
	}
	s.mu.Lock()
	for k := range s.statCache {
		if isUnder(k, name) {
			delete(s.statCache, k)
		}
	}
	s.mu.Unlock()
}

// --- Backend --------------------------------------------------------------------------

// IsEmpty implements Backend: no key below the prefix.
func (s *S3) IsEmpty(ctx context.Context) (bool, error) {
	out, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &s.prefix, MaxKeys: aws.Int32(1)})
	if err != nil {
		return false, s.cls("list "+s.url, err)
	}
	return len(out.Contents) == 0, nil
}

// Reset implements Backend: it deletes every object below the prefix.
func (s *S3) Reset(ctx context.Context) error {
	keys, err := s.listAll(ctx, s.prefix)
	if err != nil {
		return err
	}
	if err := s.deleteKeys(ctx, keys); err != nil {
		return err
	}
	s.mu.Lock()
	s.localDirs = map[string]struct{}{}
	s.statCache = map[string]s3StatEntry{}
	s.xattrs = map[string]map[string]string{}
	s.mu.Unlock()
	return nil
}

func (s *S3) deleteKeys(ctx context.Context, keys []string) error {
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		objs := make([]types.ObjectIdentifier, n)
		for i, k := range keys[:n] {
			if !strings.HasPrefix(k, s.prefix) {
				return fmt.Errorf("replay: s3 delete %q: outside %s: %w", k, s.url, ErrEscape)
			}
			objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &s.bucket, Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)}})
		if err != nil {
			return s.cls("delete objects", err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("replay: s3 delete %q: %s: %s", aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
		s.mu.Lock()
		for _, k := range keys[:n] {
			delete(s.created, k)
		}
		s.mu.Unlock()
		keys = keys[n:]
	}
	return nil
}

// Close implements Backend: it aborts unfinished uploads and, unless Keep was set,
// deletes the objects this backend created.
func (s *S3) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.mu.Lock()
	uploads := s.uploads
	s.uploads = map[string]string{}
	var keys []string
	if !s.keep {
		for k := range s.created {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	var errs []error
	for id, key := range uploads {
		if _, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(key), UploadId: aws.String(id)}); err != nil {
			errs = append(errs, s.cls("abort upload of "+key, err))
		}
	}
	if len(keys) > 0 {
		if err := s.deleteKeys(ctx, keys); err != nil {
			errs = append(errs, fmt.Errorf("replay: s3 cleanup of %s (%d objects left): %w", s.url, len(keys), err))
		}
	}
	return errors.Join(errs...)
}

// Lstat implements Backend.
func (s *S3) Lstat(ctx context.Context, name string) (a Attr, err error) {
	ctx, end := s.begin(ctx, "lstat")
	defer func() { end(err) }()
	if err = CheckName(name); err != nil {
		return Attr{}, err
	}
	e, err := s.lookup(ctx, name)
	return Attr{Mode: e.mode, Size: e.size}, err
}

// Access implements Backend.
func (s *S3) Access(ctx context.Context, name string, mask uint32) (err error) {
	ctx, end := s.begin(ctx, "access")
	defer func() { end(err) }()
	if err = CheckName(name); err != nil {
		return err
	}
	_, err = s.lookup(ctx, name)
	return err
}

// Statfs implements Backend: no request (FUSE clients answer it locally).
func (s *S3) Statfs(ctx context.Context) (err error) {
	_, end := s.begin(ctx, "statfs")
	end(nil)
	return nil
}

// Mkdir implements Backend.
func (s *S3) Mkdir(ctx context.Context, name string, perm uint32) (err error) {
	ctx, end := s.begin(ctx, "mkdir")
	defer func() { end(err) }()
	if err = CheckName(name); err != nil {
		return err
	}
	if s.preparing.Load() {
		return s.put(ctx, s.dirKey(name), bytes.NewReader(nil), 0, nil)
	}
	if _, err := s.lookup(ctx, name); err == nil {
		return syscall.EEXIST
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := s.checkParent(ctx, name); err != nil {
		return err
	}
	switch s.prof.name {
	case "mountpoint":
		s.mu.Lock()
		s.localDirs[name] = struct{}{}
		s.mu.Unlock()
		return nil
	case "s3fs":
		err = s.put(ctx, s.dirKey(name), bytes.NewReader(nil), 0, map[string]string{s3MetaMode: strconv.Itoa(syscall.S_IFDIR | int(perm&0o7777))})
		if err == nil {
			s.cacheStat(name, s3Entry{mode: syscall.S_IFDIR | perm&0o7777})
		}
		return err
	}
	return s.put(ctx, s.dirKey(name), bytes.NewReader(nil), 0, nil)
}

// Mknod implements Backend.
func (s *S3) Mknod(ctx context.Context, name string, mode uint32) (err error) {
	ctx, end := s.begin(ctx, "mknod")
	defer func() { end(err) }()
	if err = CheckName(name); err != nil {
		return err
	}
	if s.prof.name != "s3fs" || mode&syscall.S_IFMT != syscall.S_IFREG && mode&syscall.S_IFMT != 0 {
		return s.refuse("mknod", syscall.EPERM, "no special files")
	}
	if _, err := s.lookup(ctx, name); err == nil {
		return syscall.EEXIST
	}
	return s.put(ctx, s.key(name), bytes.NewReader(nil), 0, nil)
}

// Remove implements Backend (unlink).
func (s *S3) Remove(ctx context.Context, name string) (err error) {
	ctx, end := s.begin(ctx, "unlink")
	defer func() { end(err) }()
	if err = CheckName(name); err != nil || name == "" {
		return errors.Join(err, syscall.EISDIR)
	}
	if s.prof.name != "sdk" {
		e, err := s.lookup(ctx, name)
		if err != nil {
			return err
		}
		if e.isDir() {
			return syscall.EISDIR
		}
	}
	s.uncache(name)
	return s.del(ctx, s.key(name))
}

// Rmdir implements Backend.
func (s *S3) Rmdir(ctx context.Context, name string) (err error) {
	ctx, end := s.begin(ctx, "rmdir")
	defer func() { end(err) }()
	if err = CheckName(name); err != nil {
		return err
	}
	if name == "" {
		return syscall.EBUSY
	}
	e, err := s.lookup(ctx, name)
	if err != nil {
		return err
	}
	if !e.isDir() {
		return syscall.ENOTDIR
	}
	ents, err := s.listDir(ctx, s.dirKey(name))
	if err != nil {
		return err
	}
	s.mu.Lock()
	for k := range s.localDirs {
		if parentOf(k) == name {
			ents = append(ents, s3Dirent{name: k})
		}
	}
	s.mu.Unlock()
	if len(ents) > 0 {
		return syscall.ENOTEMPTY
	}
	s.mu.Lock()
	_, local := s.localDirs[name]
	delete(s.localDirs, name)
	s.mu.Unlock()
	s.uncache(name)
	if local {
		return nil
	}
	return s.del(ctx, s.dirKey(name))
}

// Rename implements Backend.
func (s *S3) Rename(ctx context.Context, from, to string, flags uint32) (err error) {
	ctx, end := s.begin(ctx, "rename")
	defer func() { end(err) }()
	if err = errors.Join(CheckName(from), CheckName(to)); err != nil {
		return err
	}
	if s.prof.name == "mountpoint" {
		return s.refuse("rename", syscall.EPERM, "rename is only supported on S3 Express One Zone")
	}
	if flags != 0 {
		return s.refuse("rename", syscall.EINVAL, "rename flags")
	}
	var e s3Entry
	if s.prof.name == "s3fs" {
		if e, err = s.lookup(ctx, from); err != nil {
			return err
		}
	} else if e, err = s.lookup(ctx, from); err != nil {
		return err
	}
	s.uncache(from)
	s.uncache(to)
	if !e.isDir() {
		if err := s.copyObject(ctx, s.key(from), s.key(to), nil); err != nil {
			return err
		}
		return s.del(ctx, s.key(from))
	}
	keys, err := s.listAll(ctx, s.dirKey(from))
	if err != nil {
		return err
	}
	for _, k := range keys {
		dst := s.dirKey(to) + strings.TrimPrefix(k, s.dirKey(from))
		if err := s.copyObject(ctx, k, dst, nil); err != nil {
			return err
		}
		if err := s.del(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// Link implements Backend: no S3 client makes hard links.
func (s *S3) Link(ctx context.Context, existing, name string) (err error) {
	_, end := s.begin(ctx, "link")
	defer func() { end(err) }()
	if s.prof.name == "s3fs" {
		return s.refuse("link", syscall.ENOTSUP, "no hard links")
	}
	return s.refuse("link", syscall.EPERM, "no hard links")
}

// Symlink implements Backend.
func (s *S3) Symlink(ctx context.Context, target, name string) (err error) {
	ctx, end := s.begin(ctx, "symlink")
	defer func() { end(err) }()
	if err = CheckName(name); err != nil {
		return err
	}
	meta := map[string]string{s3MetaMode: strconv.Itoa(syscall.S_IFLNK | 0o777)}
	if s.preparing.Load() {
		return s.put(ctx, s.key(name), strings.NewReader(target), int64(len(target)), meta)
	}
	if s.prof.name != "s3fs" {
		return s.refuse("symlink", syscall.EPERM, "no symbolic links")
	}
	if _, err := s.lookup(ctx, name); err == nil {
		return syscall.EEXIST
	}
	err = s.put(ctx, s.key(name), strings.NewReader(target), int64(len(target)), meta)
	if err == nil {
		s.cacheStat(name, s3Entry{mode: syscall.S_IFLNK | 0o777, size: int64(len(target))})
	}
	return err
}

// Readlink implements Backend.
func (s *S3) Readlink(ctx context.Context, name string, buf []byte) (n int, err error) {
	ctx, end := s.begin(ctx, "readlink")
	defer func() { end(err) }()
	if err = CheckName(name); err != nil {
		return 0, err
	}
	if s.prof.name == "sdk" {
		return 0, s.refuse("readlink", syscall.ENOTSUP, "no symbolic links")
	}
	e, err := s.lookup(ctx, name)
	if err != nil {
		return 0, err
	}
	if s.prof.name != "s3fs" || !e.isLink() {
		return 0, syscall.EINVAL
	}
	got, err := s.get(ctx, s.key(name), 0, max(e.size, 1), buf)
	return int(min(got, int64(len(buf)))), err
}

// Truncate implements Backend.
func (s *S3) Truncate(ctx context.Context, name string, size int64) (err error) {
	ctx, end := s.begin(ctx, "truncate")
	defer func() { end(err) }()
	if err = CheckName(name); err != nil {
		return err
	}
	switch s.prof.name {
	case "mountpoint":
		return s.refuse("truncate", syscall.EPERM, "existing objects cannot be modified")
	case "sdk":
		return s.refuse("truncate", syscall.ENOTSUP, "no in-place updates")
	}
	e, err := s.lookup(ctx, name)
	if err != nil {
		return err
	}
	if e.isDir() {
		return syscall.EISDIR
	}
	if size > s3TruncateMax {
		return s.refuse("truncate", syscall.EFBIG, fmt.Sprintf("truncating to more than %d MiB is not modelled", s3TruncateMax>>20))
	}
	data := make([]byte, size)
	if size > 0 && e.size > 0 {
		if _, err := s.get(ctx, s.key(name), 0, min(size, e.size), data); err != nil {
			return err
		}
	}
	s.uncache(name)
	return s.put(ctx, s.key(name), bytes.NewReader(data), size, nil)
}

// setMeta is chmod/chown/utimes/xattr on s3fs: CopyObject onto itself with new metadata.
func (s *S3) setMeta(ctx context.Context, op, name string, mode uint32, setMode bool) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if s.preparing.Load() && s.prof.name != "s3fs" {
		return nil
	}
	switch s.prof.name {
	case "mountpoint":
		if op == "utimes" {
			_, err := s.lookup(ctx, name)
			return err // accepted, not stored
		}
		return s.refuse(op, syscall.EPERM, "metadata cannot be changed")
	case "sdk":
		return s.refuse(op, syscall.ENOTSUP, "no metadata mapping")
	}
	e, err := s.lookup(ctx, name)
	if err != nil {
		return err
	}
	if name == "" {
		return nil // the mount root: s3fs keeps it locally
	}
	if !setMode {
		mode = e.mode
	} else {
		mode = e.mode&syscall.S_IFMT | mode&0o7777
	}
	key := s.key(name)
	if e.isDir() {
		key = s.dirKey(name)
		// An implicit directory has no object to copy: s3fs creates the marker.
		if _, _, err := s.head(ctx, key); errors.Is(err, fs.ErrNotExist) {
			return s.put(ctx, key, bytes.NewReader(nil), 0, map[string]string{s3MetaMode: strconv.Itoa(int(mode))})
		}
	}
	meta := map[string]string{s3MetaMode: strconv.Itoa(int(mode))}
	s.mu.Lock()
	for k, v := range s.xattrs[name] {
		meta["xattr-"+k] = v
	}
	s.mu.Unlock()
	if err := s.copyObject(ctx, key, key, meta); err != nil {
		return err
	}
	e.mode = mode
	s.cacheStat(name, e)
	return nil
}

// Chmod implements Backend.
func (s *S3) Chmod(ctx context.Context, name string, perm uint32) (err error) {
	ctx, end := s.begin(ctx, "chmod")
	defer func() { end(err) }()
	return s.setMeta(ctx, "chmod", name, perm, true)
}

// Chown implements Backend.
func (s *S3) Chown(ctx context.Context, name string) (err error) {
	ctx, end := s.begin(ctx, "chown")
	defer func() { end(err) }()
	return s.setMeta(ctx, "chown", name, 0, false)
}

// Utimes implements Backend.
func (s *S3) Utimes(ctx context.Context, name string) (err error) {
	ctx, end := s.begin(ctx, "utimes")
	defer func() { end(err) }()
	return s.setMeta(ctx, "utimes", name, 0, false)
}

// Getxattr implements Backend.
func (s *S3) Getxattr(ctx context.Context, name, attr string, buf []byte) (n int, err error) {
	ctx, end := s.begin(ctx, "getxattr")
	defer func() { end(err) }()
	if err = CheckName(name); err != nil {
		return 0, err
	}
	if s.prof.name != "s3fs" {
		return 0, s.refuse("getxattr", syscall.ENOTSUP, "no extended attributes")
	}
	if _, err := s.lookup(ctx, name); err != nil {
		return 0, err
	}
	s.mu.Lock()
	v, ok := s.xattrs[name][attr]
	s.mu.Unlock()
	if !ok {
		return 0, syscall.ENODATA
	}
	if len(buf) == 0 {
		return len(v), nil
	}
	if len(buf) < len(v) {
		return 0, syscall.ERANGE
	}
	return copy(buf, v), nil
}

// Listxattr implements Backend.
func (s *S3) Listxattr(ctx context.Context, name string, buf []byte) (n int, err error) {
	ctx, end := s.begin(ctx, "listxattr")
	defer func() { end(err) }()
	if err = CheckName(name); err != nil {
		return 0, err
	}
	if s.prof.name != "s3fs" {
		return 0, s.refuse("listxattr", syscall.ENOTSUP, "no extended attributes")
	}
	if _, err := s.lookup(ctx, name); err != nil {
		return 0, err
	}
	var list []byte
	s.mu.Lock()
	for k := range s.xattrs[name] {
		list = append(append(list, k...), 0)
	}
	s.mu.Unlock()
	if len(buf) == 0 {
		return len(list), nil
	}
	if len(buf) < len(list) {
		return 0, syscall.ERANGE
	}
	return copy(buf, list), nil
}

// Setxattr implements Backend.
func (s *S3) Setxattr(ctx context.Context, name, attr string, value []byte, flags int) (err error) {
	ctx, end := s.begin(ctx, "setxattr")
	defer func() { end(err) }()
	if s.prof.name != "s3fs" {
		return s.refuse("setxattr", syscall.ENOTSUP, "no extended attributes")
	}
	s.mu.Lock()
	if s.xattrs[name] == nil {
		s.xattrs[name] = map[string]string{}
	}
	old, had := s.xattrs[name][attr]
	s.xattrs[name][attr] = string(value)
	s.mu.Unlock()
	if err = s.setMeta(ctx, "setxattr", name, 0, false); err != nil {
		s.mu.Lock()
		if had {
			s.xattrs[name][attr] = old
		} else {
			delete(s.xattrs[name], attr)
		}
		s.mu.Unlock()
	}
	return err
}

// Removexattr implements Backend.
func (s *S3) Removexattr(ctx context.Context, name, attr string) (err error) {
	ctx, end := s.begin(ctx, "removexattr")
	defer func() { end(err) }()
	if s.prof.name != "s3fs" {
		return s.refuse("removexattr", syscall.ENOTSUP, "no extended attributes")
	}
	s.mu.Lock()
	_, had := s.xattrs[name][attr]
	delete(s.xattrs[name], attr)
	s.mu.Unlock()
	if !had {
		if err := CheckName(name); err != nil {
			return err
		}
		if _, err := s.lookup(ctx, name); err != nil {
			return err
		}
		return syscall.ENODATA
	}
	return s.setMeta(ctx, "removexattr", name, 0, false)
}
