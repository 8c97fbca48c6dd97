package replay

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"sync"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// s3File is an open file or directory of an S3 backend.
type s3File struct {
	s    *S3
	name string
	key  string

	mu sync.Mutex // guards everything below: a handle may be shared by several workers

	dir   bool
	write bool // opened for writing (a write handle of the profile)
	read  bool // may be read
	size  int64
	done  bool // mountpoint: the upload completed (fsync); further writes fail

	// directories
	ents   []s3Dirent
	pos    int
	listed bool

	// mountpoint reads
	cur   s3Span
	ahead *s3Fetch
	next  int64

	// s3fs reads of an unmodified object: byte ranges already fetched, sorted, disjoint
	loaded []s3Span

	// s3fs writes: the local copy
	tmp   *os.File
	dirty bool

	// mountpoint and sdk writes: a streamed upload
	up *s3Upload
}

type s3Span struct{ start, end int64 }

type s3Fetch struct {
	s3Span
	done chan struct{}
	err  error
}

const (
	s3AccMode   = syscall.O_ACCMODE
	s3SeekAhead = 16 * s3MiB // mountpoint keeps its stream across forward seeks this long
	s3SeekBack  = 1 * s3MiB  // and backward seeks this long
)

// Open implements Backend.
func (s *S3) Open(ctx context.Context, name string, flags int, perm uint32) (f File, err error) {
	ctx, end := s.begin(ctx, "open")
	defer func() { end(err) }()
	if err = CheckName(name); err != nil {
		return nil, err
	}
	wantWrite := flags&s3AccMode != syscall.O_RDONLY
	e, lerr := s.lookup(ctx, name)
	exists := lerr == nil
	if lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
		return nil, lerr
	}
	if exists && flags&syscall.O_CREAT != 0 && flags&syscall.O_EXCL != 0 {
		return nil, syscall.EEXIST
	}
	if !exists && flags&syscall.O_CREAT == 0 {
		return nil, lerr
	}
	if !exists {
		if err := s.checkParent(ctx, name); err != nil {
			return nil, err
		}
	}
	if exists && e.isDir() {
		if wantWrite {
			return nil, syscall.EISDIR
		}
		return &s3File{s: s, name: name, key: s.dirKey(name), dir: true, read: true}, nil
	}
	if flags&syscall.O_DIRECTORY != 0 {
		return nil, syscall.ENOTDIR
	}
	h := &s3File{s: s, name: name, key: s.key(name), size: e.size, read: flags&s3AccMode != syscall.O_WRONLY}
	trunc := flags&syscall.O_TRUNC != 0
	switch s.prof.name {
	case "mountpoint":
		if !wantWrite {
			h.next = s.prof.readInit
			return h, nil
		}
		if exists && !trunc {
			if flags&s3AccMode == syscall.O_RDWR {
				h.read = true // Mountpoint opens it for reading; writes then fail
				h.next = s.prof.readInit
				return h, nil
			}
			return nil, s.refuse("open", syscall.EPERM, "an existing object can only be overwritten with O_TRUNC")
		}
		if flags&syscall.O_APPEND != 0 {
			return nil, s.refuse("open", syscall.EPERM, "no appends")
		}
		return s.startStream(h), nil
	case "sdk":
		if !wantWrite {
			return h, nil
		}
		if exists && !trunc {
			return nil, s.refuse("open", syscall.ENOTSUP, "no in-place updates")
		}
		return s.startStream(h), nil
	}
	// s3fs
	if !wantWrite {
		return h, nil
	}
	tmp, err := os.CreateTemp(s.tmpDir, "iotap-s3fs-*")
	if err != nil {
		return nil, fmt.Errorf("replay: s3fs local copy: %w", err)
	}
	_ = os.Remove(tmp.Name())
	h.tmp, h.write = tmp, true
	switch {
	case !exists:
		// s3fs creates the object at once, empty.
		if err := s.put(ctx, h.key, bytes.NewReader(nil), 0, nil); err != nil {
			_ = tmp.Close()
			return nil, err
		}
		h.size = 0
		s.cacheStat(name, s3Entry{mode: syscall.S_IFREG | 0o644})
	case trunc:
		h.size, h.dirty = 0, true
	case e.size > 0:
		// Modifying an object: s3fs downloads it first.
		if _, err := s.get(ctx, h.key, 0, e.size, nil); err != nil {
			_ = tmp.Close()
			return nil, err
		}
		if err := tmp.Truncate(e.size); err != nil {
			_ = tmp.Close()
			return nil, fmt.Errorf("replay: s3fs local copy: %w", err)
		}
	}
	return h, nil
}

func (s *S3) startStream(h *s3File) *s3File {
	h.write, h.size = true, 0
	h.up = &s3Upload{s: s, key: h.key, partSize: s.prof.partSize, singlePut: s.prof.singlePut}
	s.mu.Lock()
	s.pending[h.name] = 0
	s.mu.Unlock()
	return h
}

// ReadAt implements File.
func (f *s3File) ReadAt(ctx context.Context, p []byte, off int64) (n int, err error) {
	ctx, end := f.s.begin(ctx, "read")
	defer func() { end(err) }()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dir {
		return 0, syscall.EISDIR
	}
	if f.up != nil {
		return 0, f.s.refuse("read", syscall.EBADF, "a file being uploaded cannot be read")
	}
	if !f.read {
		return 0, syscall.EBADF
	}
	if off < 0 {
		return 0, syscall.EINVAL
	}
	if f.tmp != nil {
		n, err = f.tmp.ReadAt(p, off)
		if err == io.EOF {
			err = nil
		}
		return n, err
	}
	if off >= f.size || len(p) == 0 {
		return 0, nil
	}
	stop := min(off+int64(len(p)), f.size)
	switch f.s.prof.name {
	case "mountpoint":
		err = f.readWindowed(ctx, off, stop)
		clear(p[:stop-off]) // the prefetched bytes are not kept: replay checks sizes, not data
	case "s3fs":
		err = f.readLoaded(ctx, p, off, stop)
	default:
		var got int64
		got, err = f.s.get(ctx, f.key, off, stop-off, p)
		stop = off + min(got, stop-off)
	}
	if err != nil {
		return 0, err
	}
	return int(stop - off), nil
}

// readWindowed is Mountpoint's prefetcher: the window cur has been fetched; once a read
// reaches its second half the next window (twice as large, up to readMax) is fetched
// ahead from cur.end; a read past cur waits for it. A random reader thus costs one
// initial window per seek, a sequential one keeps a request in flight.
func (f *s3File) readWindowed(ctx context.Context, pos, stop int64) error {
	for pos < stop {
		have := f.cur.end > f.cur.start
		if have && pos >= f.cur.start-s3SeekBack && pos < f.cur.end {
			pos = min(stop, f.cur.end)
			if f.ahead == nil && f.cur.end < f.size && pos >= f.cur.start+(f.cur.end-f.cur.start)/2 {
				f.ahead = f.startFetch(ctx, f.cur.end)
			}
			continue
		}
		if have && pos >= f.cur.end && pos-f.cur.end <= s3SeekAhead && f.cur.end < f.size {
			if f.ahead == nil {
				f.ahead = f.startFetch(ctx, f.cur.end)
			}
			if err := f.waitAhead(); err != nil {
				return err
			}
			continue
		}
		// First read or a seek the stream cannot follow: start over at the first window.
		if f.ahead != nil {
			<-f.ahead.done
			f.ahead = nil
		}
		f.next = f.s.prof.readInit
		f.ahead = f.startFetch(ctx, pos)
		if err := f.waitAhead(); err != nil {
			return err
		}
	}
	return nil
}

// waitAhead waits for the fetch in flight and makes it the current window.
func (f *s3File) waitAhead() error {
	a := f.ahead
	<-a.done
	f.ahead = nil
	if a.err != nil {
		f.cur = s3Span{}
		return a.err
	}
	f.cur = a.s3Span
	return nil
}

// startFetch starts a ranged GET of the next window from start.
func (f *s3File) startFetch(ctx context.Context, start int64) *s3Fetch {
	n := min(f.next, f.size-start)
	a := &s3Fetch{s3Span: s3Span{start, start + n}, done: make(chan struct{})}
	f.next = min(f.next*2, f.s.prof.readMax)
	if n <= 0 {
		close(a.done)
		return a
	}
	go func() {
		_, a.err = f.s.get(ctx, f.key, start, n, nil)
		close(a.done)
	}()
	return a
}

// readLoaded is s3fs's read of an unmodified object: GET the ranges not fetched before.
func (f *s3File) readLoaded(ctx context.Context, p []byte, off, stop int64) error {
	pos := off
	for _, w := range append(append([]s3Span(nil), f.loaded...), s3Span{stop, stop}) {
		if w.end <= pos {
			continue
		}
		if w.start > pos {
			gapEnd := min(w.start, stop)
			if _, err := f.s.get(ctx, f.key, pos, gapEnd-pos, p[pos-off:gapEnd-off]); err != nil {
				return err
			}
			f.addLoaded(s3Span{pos, gapEnd})
		}
		pos = max(pos, min(w.end, stop))
		if pos >= stop {
			break
		}
	}
	return nil
}

func (f *s3File) addLoaded(w s3Span) {
	f.loaded = append(f.loaded, w)
	sort.Slice(f.loaded, func(i, j int) bool { return f.loaded[i].start < f.loaded[j].start })
	out := f.loaded[:1]
	for _, x := range f.loaded[1:] {
		last := &out[len(out)-1]
		if x.start <= last.end {
			last.end = max(last.end, x.end)
		} else {
			out = append(out, x)
		}
	}
	f.loaded = out
}

// WriteAt implements File.
func (f *s3File) WriteAt(ctx context.Context, p []byte, off int64) (n int, err error) {
	ctx, end := f.s.begin(ctx, "write")
	defer func() { end(err) }()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dir || !f.write || f.done {
		return 0, syscall.EBADF
	}
	if f.tmp != nil {
		n, err = f.tmp.WriteAt(p, off)
		if n > 0 {
			f.dirty = true
			f.size = max(f.size, off+int64(n))
		}
		return n, err
	}
	if off != f.size {
		return 0, f.s.refuse("write", syscall.EINVAL, fmt.Sprintf("out-of-order write at %d, next sequential offset %d", off, f.size))
	}
	if err := f.up.write(ctx, p); err != nil {
		return 0, err
	}
	f.size += int64(len(p))
	f.s.mu.Lock()
	f.s.pending[f.name] = f.size
	f.s.mu.Unlock()
	return len(p), nil
}

// ReadDir implements File.
func (f *s3File) ReadDir(ctx context.Context, buf []byte, off int64) (n int, err error) {
	ctx, end := f.s.begin(ctx, "readdir")
	defer func() { end(err) }()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dir {
		return 0, syscall.ENOTDIR
	}
	if off == 0 || !f.listed {
		if err := f.list(ctx); err != nil {
			return 0, err
		}
	}
	for f.pos < len(f.ents) {
		e := f.ents[f.pos]
		rec := (19 + len(e.name) + 1 + 7) &^ 7
		if n+rec > len(buf) {
			if n == 0 {
				return 0, syscall.EINVAL
			}
			break
		}
		typ := byte(syscall.DT_REG)
		if e.dir {
			typ = syscall.DT_DIR
		}
		b := buf[n : n+rec]
		clear(b)
		binary.LittleEndian.PutUint64(b[0:], uint64(f.pos+1))
		binary.LittleEndian.PutUint64(b[8:], uint64(f.pos+1))
		binary.LittleEndian.PutUint16(b[16:], uint16(rec))
		b[18] = typ
		copy(b[19:], e.name)
		n += rec
		f.pos++
	}
	return n, nil
}

// list fetches the directory's entries the way the profile's client does.
func (f *s3File) list(ctx context.Context) error {
	s := f.s
	ents, err := s.listDir(ctx, f.key)
	if err != nil {
		return err
	}
	s.mu.Lock()
	seen := map[string]bool{}
	for _, e := range ents {
		seen[e.name] = true
	}
	for k := range s.localDirs {
		if parentOf(k) == f.name && k != f.name {
			_, b := splitName(k)
			if !seen[b] {
				ents = append(ents, s3Dirent{name: b, dir: true})
				seen[b] = true
			}
		}
	}
	for k := range s.pending {
		if parentOf(k) == f.name {
			_, b := splitName(k)
			if !seen[b] {
				ents = append(ents, s3Dirent{name: b})
			}
		}
	}
	s.mu.Unlock()
	if s.prof.name == "s3fs" {
		// readdir_multi_head: one HeadObject per entry, a few at a time; results fill the
		// stat cache.
		sem := make(chan struct{}, max(s.prof.headsPerLS, 1))
		var wg sync.WaitGroup
		for _, e := range ents {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				child := e.name
				if f.name != "" {
					child = f.name + "/" + e.name
				}
				key := s.key(child)
				if e.dir {
					key = s.dirKey(child)
				}
				got, _, err := s.head(ctx, key)
				if e.dir {
					got = s3Entry{mode: syscall.S_IFDIR | 0o755}
				}
				if err == nil || e.dir {
					s.cacheStat(child, got)
				}
			}()
		}
		wg.Wait()
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	f.ents = append([]s3Dirent{{name: ".", dir: true}, {name: "..", dir: true}}, ents...)
	f.pos, f.listed = 0, true
	return nil
}

// Sync implements File.
func (f *s3File) Sync(ctx context.Context, datasync bool) (err error) {
	ctx, end := f.s.begin(ctx, "fsync")
	defer func() { end(err) }()
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.tmp != nil:
		return f.flushLocal(ctx)
	case f.up != nil && f.s.prof.name == "mountpoint" && !f.done:
		// fsync completes the upload: the object is visible and the handle is done.
		f.done = true
		return f.finishStream(ctx)
	}
	return nil
}

// Truncate implements File.
func (f *s3File) Truncate(ctx context.Context, size int64) (err error) {
	_, end := f.s.begin(ctx, "ftruncate")
	defer func() { end(err) }()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tmp != nil {
		if err := f.tmp.Truncate(size); err != nil {
			return err
		}
		f.size, f.dirty = size, true
		return nil
	}
	if !f.write {
		return syscall.EBADF
	}
	if size == f.size {
		return nil
	}
	if f.s.prof.name == "mountpoint" {
		return f.s.refuse("ftruncate", syscall.EPERM, "only a new file's current size")
	}
	return f.s.refuse("ftruncate", syscall.ENOTSUP, "no in-place updates")
}

// Stat implements File: answered from the handle, no request.
func (f *s3File) Stat(ctx context.Context) (a Attr, err error) {
	_, end := f.s.begin(ctx, "fstat")
	defer func() { end(nil) }()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dir {
		return Attr{Mode: syscall.S_IFDIR | 0o755}, nil
	}
	return Attr{Mode: syscall.S_IFREG | 0o644, Size: f.size}, nil
}

// Allocate implements File.
func (f *s3File) Allocate(ctx context.Context, mode uint32, off, length int64) (err error) {
	_, end := f.s.begin(ctx, "fallocate")
	defer func() { end(err) }()
	return f.s.refuse("fallocate", syscall.EOPNOTSUPP, "no preallocation")
}

// Seek implements File.
func (f *s3File) Seek(ctx context.Context, off int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch whence {
	case io.SeekStart, io.SeekCurrent:
		return off, nil
	case io.SeekEnd:
		return f.size + off, nil
	case 3: // SEEK_DATA
		if off >= f.size {
			return 0, syscall.ENXIO
		}
		return off, nil
	case 4: // SEEK_HOLE
		if off >= f.size {
			return 0, syscall.ENXIO
		}
		return f.size, nil
	}
	return 0, syscall.EINVAL
}

// Lock implements File: FUSE clients leave POSIX locks to the kernel, which keeps them
// locally (conflicting between open files); no request.
func (f *s3File) Lock(ctx context.Context, cmd LockCmd, typ int16, start, length int64) (err error) {
	ctx, end := f.s.begin(ctx, "lock")
	defer func() { end(err) }()
	return f.s.locks.lock(ctx, f, cmd, typ, start, length)
}

// Close implements File.
func (f *s3File) Close(ctx context.Context) (err error) {
	ctx, end := f.s.begin(ctx, "close")
	defer func() { end(err) }()
	f.s.locks.dropAll(f)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ahead != nil {
		<-f.ahead.done
		f.ahead = nil
	}
	switch {
	case f.tmp != nil:
		err = f.flushLocal(ctx)
		_ = f.tmp.Close()
		f.tmp = nil
	case f.up != nil && !f.done:
		f.done = true
		err = f.finishStream(ctx)
	}
	return err
}

// finishStream completes a streamed upload (f.mu held).
func (f *s3File) finishStream(ctx context.Context) error {
	err := f.up.finish(ctx)
	f.s.mu.Lock()
	delete(f.s.pending, f.name)
	f.s.mu.Unlock()
	return err
}

// flushLocal uploads s3fs's local copy if it changed (f.mu held).
func (f *s3File) flushLocal(ctx context.Context) error {
	if !f.dirty {
		return nil
	}
	s := f.s
	size := f.size
	var err error
	if size < s.prof.singlePut {
		err = s.put(ctx, f.key, io.NewSectionReader(f.tmp, 0, size), size, nil)
	} else {
		up := &s3Upload{s: s, key: f.key, partSize: s.prof.partSize}
		for off := int64(0); off < size && err == nil; off += s.prof.partSize {
			n := min(s.prof.partSize, size-off)
			err = up.part(ctx, io.NewSectionReader(f.tmp, off, n), n)
		}
		if err == nil {
			err = up.finish(ctx)
		} else {
			up.abort()
		}
	}
	if err != nil {
		return err
	}
	f.dirty = false
	s.cacheStat(f.name, s3Entry{mode: syscall.S_IFREG | 0o644, size: size})
	return nil
}

// s3Upload uploads an object from sequential writes: parts of partSize as they fill,
// completed at finish; below singlePut bytes in all, one PutObject instead.
type s3Upload struct {
	s         *S3
	key       string
	partSize  int64
	singlePut int64
	buf       []byte
	id        *string
	parts     []types.CompletedPart
}

func (u *s3Upload) write(ctx context.Context, p []byte) error {
	u.buf = append(u.buf, p...)
	for int64(len(u.buf)) >= u.partSize {
		if err := u.part(ctx, bytes.NewReader(u.buf[:u.partSize]), u.partSize); err != nil {
			return err
		}
		u.buf = append(u.buf[:0], u.buf[u.partSize:]...)
	}
	return nil
}

func (u *s3Upload) part(ctx context.Context, body io.ReadSeeker, n int64) error {
	s := u.s
	if u.id == nil {
		out, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &u.key})
		if err != nil {
			return s.cls("start upload of "+u.key, err)
		}
		u.id = out.UploadId
		s.mu.Lock()
		s.uploads[aws.ToString(u.id)] = u.key
		s.mu.Unlock()
	}
	num := int32(len(u.parts) + 1)
	out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &s.bucket, Key: &u.key, UploadId: u.id, PartNumber: aws.Int32(num), Body: body, ContentLength: aws.Int64(n),
	})
	if err != nil {
		return s.cls("upload part of "+u.key, err)
	}
	s3AddBytes(ctx, "UploadPart", n)
	u.parts = append(u.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
	return nil
}

func (u *s3Upload) finish(ctx context.Context) error {
	s := u.s
	if u.id == nil && (u.singlePut > 0 || len(u.buf) == 0) {
		err := s.put(ctx, u.key, bytes.NewReader(u.buf), int64(len(u.buf)), nil)
		u.buf = nil
		return err
	}
	if len(u.buf) > 0 || len(u.parts) == 0 {
		if err := u.part(ctx, bytes.NewReader(u.buf), int64(len(u.buf))); err != nil {
			u.abort()
			return err
		}
		u.buf = nil
	}
	_, err := s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: &u.key, UploadId: u.id, MultipartUpload: &types.CompletedMultipartUpload{Parts: u.parts},
	})
	if err != nil {
		u.abort()
		return s.cls("complete upload of "+u.key, err)
	}
	s.mu.Lock()
	delete(s.uploads, aws.ToString(u.id))
	s.created[u.key] = struct{}{}
	s.mu.Unlock()
	return nil
}

// abort leaves the upload to Close, which aborts every upload not completed.
func (u *s3Upload) abort() {}
