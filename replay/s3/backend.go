package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/iotap/iotap/internal/s3req"
	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// Options configure Open.
type Options struct {
	// Profile maps filesystem calls to S3 requests: mountpoint (default), s3fs or sdk.
	Profile string
	// Region, AWSProfile and Endpoint select the account and server (standard AWS chain
	// when empty); an Endpoint (default $IOTAP_S3_ENDPOINT or $AWS_ENDPOINT_URL_S3) turns
	// on path-style addressing.
	Region     string
	AWSProfile string
	Endpoint   string
	// Keep leaves the objects the replay created in place at Close.
	Keep bool
	// Params are the profile's settings, key=value (see SettingsHelp); the query of the
	// target URL (s3://bucket/prefix?prefetch_max=64MiB) adds to them and wins, and may
	// name the profile (profile=s3fs).
	Params map[string]string
	// ProbeTimeout bounds the check that the bucket is reachable (default 15s).
	ProbeTimeout time.Duration
	// MaxAttempts per S3 request, including the first (default 3).
	MaxAttempts int
	// TempDir holds s3fs-profile local copies (default os.TempDir()).
	TempDir string
	// Credentials, if set, replace the standard chain (tests).
	Credentials aws.CredentialsProvider
	Log         *slog.Logger
}

// Backend is the replay.Backend for a key prefix of an S3 bucket, its calls mapped to
// requests by a profile (see the package documentation).
type Backend struct {
	client   *awss3.Client
	bucket   string
	prefix   string // ends with "/"
	url      string
	endpoint string
	prof     profile
	params   *params // the profile's settings
	keep     bool
	log      *slog.Logger
	tmpDir   string

	preparing atomic.Bool
	cur       atomic.Pointer[tally]

	tmu    sync.Mutex // guards phases and taken
	phases []*tally
	taken  int // phases[:taken] were returned by TakeRequests

	mu        sync.Mutex          // guards the maps below
	created   map[string]struct{} // keys this backend wrote and has not deleted
	uploads   map[string]string   // multipart upload id -> key, not yet completed
	localDirs map[string]struct{} // directories a profile made without a request
	pending   map[string]int64    // files being uploaded as they are written -> bytes so far

	locks lockTable
}

var (
	_ replay.Backend        = (*Backend)(nil)
	_ replay.RequestCounter = (*Backend)(nil)
)

// entry is what a lookup found.
type entry struct {
	mode uint32 // S_IFMT bits and permissions
	size int64
}

func (e entry) isDir() bool  { return e.mode&syscall.S_IFMT == syscall.S_IFDIR }
func (e entry) isLink() bool { return e.mode&syscall.S_IFMT == syscall.S_IFLNK }

// dirEntry is what a lookup of a directory without a marker object finds.
var dirEntry = entry{mode: syscall.S_IFDIR | 0o755}

const (
	mib = 1 << 20
	kib = 1 << 10
)

// Open opens s3://bucket/prefix as a replay target. The prefix must be non-empty (the
// replay deletes what is below it) and free of "." and ".." components. Open checks,
// within ProbeTimeout, that the bucket can be listed, and returns a clear error otherwise
// (missing bucket, access denied, unreachable endpoint).
func Open(ctx context.Context, spec string, o Options) (*Backend, error) {
	spec, settings, err := splitSpec(spec, o.Params)
	if err != nil {
		return nil, err
	}
	if v, ok := settings["profile"]; ok {
		o.Profile = v
	}
	bucket, prefix, err := s3store.ParseURL(spec)
	if err != nil {
		return nil, fmt.Errorf("replay: target: %w", err)
	}
	if strings.Trim(prefix, "/") == "" {
		return nil, fmt.Errorf("replay: target %s: %w: give a key prefix (s3://%s/some/prefix): the replay deletes what is below it", spec, s3store.ErrBadURL, bucket)
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 15 * time.Second
	}
	if o.Endpoint == "" {
		o.Endpoint = s3store.EndpointFromEnv()
	}
	b := &Backend{
		bucket: bucket, prefix: prefix, url: "s3://" + bucket + "/" + prefix,
		endpoint: o.Endpoint, keep: o.Keep, log: o.Log, tmpDir: o.TempDir,
		created: map[string]struct{}{}, uploads: map[string]string{}, localDirs: map[string]struct{}{},
		pending: map[string]int64{},
	}
	b.params = newParams(settings)
	if b.prof, err = newProfile(o.Profile, b, b.params); err != nil {
		return nil, settingError{fmt.Errorf("%w (target %s)", err, spec)}
	}
	b.BeginPhase("open") // the probe below; PrepareTarget and Run start their own phases
	client, err := s3store.NewClient(ctx, s3store.ClientOptions{
		Region: o.Region, Profile: o.AWSProfile, Endpoint: o.Endpoint, Credentials: o.Credentials,
		MaxAttempts: o.MaxAttempts, ConnectTimeout: min(5*time.Second, o.ProbeTimeout),
		APIOptions: []func(*middleware.Stack) error{countingMiddleware(b.cur.Load)},
	})
	if err != nil {
		return nil, fmt.Errorf("replay: target %s: %w", spec, err)
	}
	b.client = client
	pctx, cancel := context.WithTimeout(ctx, o.ProbeTimeout)
	defer cancel()
	_, err = client.ListObjectsV2(pctx, &awss3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, MaxKeys: aws.Int32(1)})
	if err != nil {
		c := s3store.Classify(err)
		if why := s3store.Explain(c); why != "" {
			return nil, fmt.Errorf("replay: target %s: %s: %w", spec, why, c)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("replay: target %s: no answer within %v: %w", spec, o.ProbeTimeout, c)
		}
		return nil, fmt.Errorf("replay: target %s: %w", spec, c)
	}
	return b, nil
}

// Target implements replay.Backend.
func (b *Backend) Target() trace.Target {
	src := "aws"
	if b.endpoint != "" {
		src = b.endpoint
	}
	mount := "profile=" + b.prof.name()
	if s := b.Settings(); s != "" {
		mount += " " + s
	}
	return trace.Target{Path: b.url, FSType: "s3", Source: src, Mount: mount}
}

// Settings returns the profile's settings given (Options.Params and the URL's query, the
// profile itself left out), "key=value" sorted by key and separated by spaces; "" when
// none was given.
func (b *Backend) Settings() string {
	m := map[string]string{}
	for k, v := range b.params.m {
		if k != "profile" {
			m[k] = v
		}
	}
	return newParams(m).String()
}

// Given returns every setting given, the profile too when it was: "key=value" sorted by
// key, separated by spaces.
func (b *Backend) Given() string { return b.params.String() }

// BeginPhase implements replay.Backend: it starts a new request tally. Open starts a
// phase "open" (its probe); the first filesystem call made in it starts "replay" by
// itself, so a replay without a prepare step is tallied as such.
func (b *Backend) BeginPhase(phase string) {
	t := newTally(phase)
	b.tmu.Lock()
	b.phases = append(b.phases, t)
	b.tmu.Unlock()
	b.cur.Store(t)
	b.preparing.Store(phase == replay.PhasePrepare)
}

// Requests returns the tallies of all phases so far, oldest first.
func (b *Backend) Requests() []s3req.Phase {
	b.tmu.Lock()
	defer b.tmu.Unlock()
	out := make([]s3req.Phase, 0, len(b.phases))
	for _, t := range b.phases {
		out = append(out, t.snapshot(b.prof.name()))
	}
	return out
}

// TakeRequests implements replay.RequestCounter.
func (b *Backend) TakeRequests() []s3req.Phase {
	b.tmu.Lock()
	defer b.tmu.Unlock()
	var out []s3req.Phase
	for _, t := range b.phases[min(b.taken, len(b.phases)):] {
		out = append(out, t.snapshot(b.prof.name()))
	}
	b.taken = len(b.phases)
	return out
}

// begin starts a filesystem call: requests issued with the returned context are counted
// under op, and end records its latency and outcome.
func (b *Backend) begin(ctx context.Context, op string) (context.Context, func(err error)) {
	t := b.cur.Load()
	if t.phase == "open" {
		// The first filesystem call without a phase of its own: the replay has begun.
		b.tmu.Lock()
		if t = b.cur.Load(); t.phase == "open" {
			t = newTally(replay.PhaseReplay)
			b.phases = append(b.phases, t)
			b.cur.Store(t)
		}
		b.tmu.Unlock()
	}
	start := time.Now()
	return context.WithValue(ctx, opKey{}, opRef{t: t, op: op}), func(err error) { t.end(op, time.Since(start), err) }
}

// RefusedError is a call the backend's profile cannot do: it fails as that client fails
// (Errno) and is counted as refused.
type RefusedError struct {
	Profile string
	Op      string
	Errno   error // a syscall.Errno
	Why     string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("replay: %s profile: %s: %s (%v)", e.Profile, e.Op, e.Why, e.Errno)
}

// Unwrap returns the errno the application sees.
func (e *RefusedError) Unwrap() error { return e.Errno }

// refuse returns the error of a call the profile cannot do.
func (b *Backend) refuse(op string, errno syscall.Errno, why string) error {
	return &RefusedError{Profile: b.prof.name(), Op: op, Errno: errno, Why: why}
}

// lookup finds name: the root, a file being written and a directory held locally without
// a request, anything else the way the profile's client does.
func (b *Backend) lookup(ctx context.Context, name string) (entry, error) {
	if name == "" {
		return dirEntry, nil
	}
	b.mu.Lock()
	if n, ok := b.pending[name]; ok {
		b.mu.Unlock()
		return entry{mode: syscall.S_IFREG | 0o644, size: n}, nil
	}
	if _, ok := b.localDirs[name]; ok {
		b.mu.Unlock()
		return dirEntry, nil
	}
	b.mu.Unlock()
	return b.prof.lookup(ctx, name)
}

// checkParent returns ENOENT or ENOTDIR unless name's parent is a directory (the kernel's
// lookup of the parent before a create). Nothing is checked while preparing.
func (b *Backend) checkParent(ctx context.Context, name string) error {
	p, _ := fold.SplitName(name)
	if p == "" || b.preparing.Load() {
		return nil
	}
	e, err := b.lookup(ctx, p)
	if err != nil {
		return err
	}
	if !e.isDir() {
		return syscall.ENOTDIR
	}
	return nil
}

// IsEmpty implements replay.Backend: no key below the prefix but the prefix's own
// directory marker (the object "prefix/" that s3fs and other clients make for a directory
// made through them: the directory itself, not an entry of it).
func (b *Backend) IsEmpty(ctx context.Context) (bool, error) {
	out, err := b.client.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: &b.prefix, MaxKeys: aws.Int32(2)})
	if err != nil {
		return false, b.cls("list "+b.url, err)
	}
	for _, o := range out.Contents {
		if aws.ToString(o.Key) != b.prefix {
			return false, nil
		}
	}
	return true, nil
}

// Reset implements replay.Backend: it deletes every object below the prefix but the
// prefix's own directory marker (see IsEmpty), without which a client that shows
// directories by their markers would lose the directory the target is.
func (b *Backend) Reset(ctx context.Context) error {
	keys, err := b.listAll(ctx, b.prefix)
	if err != nil {
		return err
	}
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == b.prefix })
	if err := b.deleteKeys(ctx, keys); err != nil {
		return err
	}
	b.mu.Lock()
	b.localDirs = map[string]struct{}{}
	b.mu.Unlock()
	b.prof.reset()
	return nil
}

// Close implements replay.Backend: it aborts unfinished uploads and, unless Keep was set,
// deletes the objects this backend created.
func (b *Backend) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b.mu.Lock()
	uploads := b.uploads
	b.uploads = map[string]string{}
	var keys []string
	if !b.keep {
		for k := range b.created {
			keys = append(keys, k)
		}
	}
	b.mu.Unlock()
	var errs []error
	for id, key := range uploads {
		if _, err := b.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &b.bucket, Key: aws.String(key), UploadId: aws.String(id)}); err != nil {
			errs = append(errs, b.cls("abort upload of "+key, err))
		}
	}
	if len(keys) > 0 {
		if err := b.deleteKeys(ctx, keys); err != nil {
			errs = append(errs, fmt.Errorf("replay: s3 cleanup of %s (%d objects left): %w", b.url, len(keys), err))
		}
	}
	return errors.Join(errs...)
}

// Lstat implements replay.Backend.
func (b *Backend) Lstat(ctx context.Context, name string) (a replay.Attr, err error) {
	ctx, end := b.begin(ctx, "lstat")
	defer func() { end(err) }()
	if err = replay.CheckName(name); err != nil {
		return replay.Attr{}, err
	}
	e, err := b.lookup(ctx, name)
	return replay.Attr{Mode: e.mode, Size: e.size}, err
}

// Access implements replay.Backend.
func (b *Backend) Access(ctx context.Context, name string, mask uint32) (err error) {
	ctx, end := b.begin(ctx, "access")
	defer func() { end(err) }()
	if err = replay.CheckName(name); err != nil {
		return err
	}
	_, err = b.lookup(ctx, name)
	return err
}

// Statfs implements replay.Backend: no request (FUSE clients answer it locally).
func (b *Backend) Statfs(ctx context.Context) (err error) {
	_, end := b.begin(ctx, "statfs")
	end(nil)
	return nil
}

// Mkdir implements replay.Backend.
func (b *Backend) Mkdir(ctx context.Context, name string, perm uint32) (err error) {
	ctx, end := b.begin(ctx, "mkdir")
	defer func() { end(err) }()
	if err = replay.CheckName(name); err != nil {
		return err
	}
	if b.preparing.Load() {
		return b.put(ctx, b.dirKey(name), bytes.NewReader(nil), 0, nil)
	}
	if _, err := b.lookup(ctx, name); err == nil {
		return syscall.EEXIST
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := b.checkParent(ctx, name); err != nil {
		return err
	}
	return b.prof.mkdir(ctx, name, perm)
}

// Mknod implements replay.Backend.
func (b *Backend) Mknod(ctx context.Context, name string, mode uint32) (err error) {
	ctx, end := b.begin(ctx, "mknod")
	defer func() { end(err) }()
	if err = replay.CheckName(name); err != nil {
		return err
	}
	return b.prof.mknod(ctx, name, mode)
}

// Remove implements replay.Backend (unlink).
func (b *Backend) Remove(ctx context.Context, name string) (err error) {
	ctx, end := b.begin(ctx, "unlink")
	defer func() { end(err) }()
	if err = replay.CheckName(name); err != nil || name == "" {
		return errors.Join(err, syscall.EISDIR)
	}
	return b.prof.remove(ctx, name)
}

// removeLooked is unlink as a client that looks the name up first does: a directory
// fails with EISDIR.
func (b *Backend) removeLooked(ctx context.Context, name string) error {
	e, err := b.lookup(ctx, name)
	if err != nil {
		return err
	}
	if e.isDir() {
		return syscall.EISDIR
	}
	b.prof.forget(name)
	return b.del(ctx, b.key(name))
}

// Rmdir implements replay.Backend.
func (b *Backend) Rmdir(ctx context.Context, name string) (err error) {
	ctx, end := b.begin(ctx, "rmdir")
	defer func() { end(err) }()
	if err = replay.CheckName(name); err != nil {
		return err
	}
	if name == "" {
		return syscall.EBUSY
	}
	e, err := b.lookup(ctx, name)
	if err != nil {
		return err
	}
	if !e.isDir() {
		return syscall.ENOTDIR
	}
	ents, err := b.listDir(ctx, b.dirKey(name))
	if err != nil {
		return err
	}
	b.mu.Lock()
	for k := range b.localDirs {
		if p, _ := fold.SplitName(k); p == name {
			ents = append(ents, dirent{name: k})
		}
	}
	b.mu.Unlock()
	if len(ents) > 0 {
		return syscall.ENOTEMPTY
	}
	b.mu.Lock()
	_, local := b.localDirs[name]
	delete(b.localDirs, name)
	b.mu.Unlock()
	b.prof.forget(name)
	if local {
		return nil
	}
	return b.del(ctx, b.dirKey(name))
}

// Rename implements replay.Backend.
func (b *Backend) Rename(ctx context.Context, from, to string, flags uint32) (err error) {
	ctx, end := b.begin(ctx, "rename")
	defer func() { end(err) }()
	if err = errors.Join(replay.CheckName(from), replay.CheckName(to)); err != nil {
		return err
	}
	return b.prof.rename(ctx, from, to, flags)
}

// renameByCopy is rename as CopyObject + DeleteObject, per object for a directory.
func (b *Backend) renameByCopy(ctx context.Context, from, to string, flags uint32) error {
	if flags != 0 {
		return b.refuse("rename", syscall.EINVAL, "rename flags")
	}
	e, err := b.lookup(ctx, from)
	if err != nil {
		return err
	}
	b.prof.forget(from)
	b.prof.forget(to)
	if !e.isDir() {
		if err := b.copyObject(ctx, b.key(from), b.key(to), nil); err != nil {
			return err
		}
		return b.del(ctx, b.key(from))
	}
	keys, err := b.listAll(ctx, b.dirKey(from))
	if err != nil {
		return err
	}
	for _, k := range keys {
		dst := b.dirKey(to) + strings.TrimPrefix(k, b.dirKey(from))
		if err := b.copyObject(ctx, k, dst, nil); err != nil {
			return err
		}
		if err := b.del(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// Link implements replay.Backend: no S3 client makes hard links.
func (b *Backend) Link(ctx context.Context, existing, name string) (err error) {
	ctx, end := b.begin(ctx, "link")
	defer func() { end(err) }()
	return b.prof.link(ctx, existing, name)
}

// Symlink implements replay.Backend.
func (b *Backend) Symlink(ctx context.Context, target, name string) (err error) {
	ctx, end := b.begin(ctx, "symlink")
	defer func() { end(err) }()
	if err = replay.CheckName(name); err != nil {
		return err
	}
	if b.preparing.Load() {
		return b.put(ctx, b.key(name), strings.NewReader(target), int64(len(target)), symlinkMeta())
	}
	return b.prof.symlink(ctx, target, name)
}

// metaMode is the user metadata key of a mode (x-amz-meta-mode, decimal), as s3fs stores it.
const metaMode = "mode"

// symlinkMeta is the metadata of a symlink object.
func symlinkMeta() map[string]string {
	return map[string]string{metaMode: strconv.Itoa(syscall.S_IFLNK | 0o777)}
}

// Readlink implements replay.Backend.
func (b *Backend) Readlink(ctx context.Context, name string, buf []byte) (n int, err error) {
	ctx, end := b.begin(ctx, "readlink")
	defer func() { end(err) }()
	if err = replay.CheckName(name); err != nil {
		return 0, err
	}
	return b.prof.readlink(ctx, name, buf)
}

// Truncate implements replay.Backend.
func (b *Backend) Truncate(ctx context.Context, name string, size int64) (err error) {
	ctx, end := b.begin(ctx, "truncate")
	defer func() { end(err) }()
	if err = replay.CheckName(name); err != nil {
		return err
	}
	return b.prof.truncate(ctx, name, size)
}

// setMeta is chmod, chown, utimes and the xattr calls' metadata update.
func (b *Backend) setMeta(ctx context.Context, op, name string, mode uint32, setMode bool) error {
	if err := replay.CheckName(name); err != nil {
		return err
	}
	return b.prof.setMeta(ctx, op, name, mode, setMode)
}

// Chmod implements replay.Backend.
func (b *Backend) Chmod(ctx context.Context, name string, perm uint32) (err error) {
	ctx, end := b.begin(ctx, "chmod")
	defer func() { end(err) }()
	return b.setMeta(ctx, "chmod", name, perm, true)
}

// Chown implements replay.Backend.
func (b *Backend) Chown(ctx context.Context, name string) (err error) {
	ctx, end := b.begin(ctx, "chown")
	defer func() { end(err) }()
	return b.setMeta(ctx, "chown", name, 0, false)
}

// Utimes implements replay.Backend.
func (b *Backend) Utimes(ctx context.Context, name string) (err error) {
	ctx, end := b.begin(ctx, "utimes")
	defer func() { end(err) }()
	return b.setMeta(ctx, "utimes", name, 0, false)
}

// Getxattr implements replay.Backend.
func (b *Backend) Getxattr(ctx context.Context, name, attr string, buf []byte) (n int, err error) {
	ctx, end := b.begin(ctx, "getxattr")
	defer func() { end(err) }()
	if err = replay.CheckName(name); err != nil {
		return 0, err
	}
	return b.prof.getxattr(ctx, name, attr, buf)
}

// Listxattr implements replay.Backend.
func (b *Backend) Listxattr(ctx context.Context, name string, buf []byte) (n int, err error) {
	ctx, end := b.begin(ctx, "listxattr")
	defer func() { end(err) }()
	if err = replay.CheckName(name); err != nil {
		return 0, err
	}
	return b.prof.listxattr(ctx, name, buf)
}

// Setxattr implements replay.Backend.
func (b *Backend) Setxattr(ctx context.Context, name, attr string, value []byte, flags int) (err error) {
	ctx, end := b.begin(ctx, "setxattr")
	defer func() { end(err) }()
	return b.prof.setxattr(ctx, name, attr, value)
}

// Removexattr implements replay.Backend.
func (b *Backend) Removexattr(ctx context.Context, name, attr string) (err error) {
	ctx, end := b.begin(ctx, "removexattr")
	defer func() { end(err) }()
	return b.prof.removexattr(ctx, name, attr)
}
