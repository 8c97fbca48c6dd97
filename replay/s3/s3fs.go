package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace/fold"
)

// s3fs is the profile of s3fs-fuse:
//
//   - stat = HeadObject of name, then name/, then a ListObjectsV2, results kept in a stat
//     cache (900 s, s3fs's default);
//   - readdir = ListObjectsV2 + one HeadObject per entry (10 at a time);
//   - creating a file PUTs an empty object at once; writes go to a local temporary file
//     (an existing object is downloaded first unless O_TRUNC) and are uploaded on fsync
//     and close: one PutObject below 10 MiB, otherwise a multipart upload of 10 MiB parts;
//   - reads are ranged GETs of the bytes not read before;
//   - rename = CopyObject + DeleteObject (per object for a directory);
//   - chmod, chown, utimes and xattrs = CopyObject onto itself with new metadata;
//   - mkdir = PutObject of name/; symlinks are objects holding the target;
//   - no hard links (ENOTSUP) and no special files (EPERM).
type s3fs struct {
	b          *Backend
	partSize   int64 // multipart part size
	singlePut  int64 // objects smaller than this are uploaded with one PutObject
	statTTL    time.Duration
	headsPerLS int // concurrent HEADs during readdir
	parallel   int // part uploads in flight (parallel_count)

	mu     sync.Mutex                   // guards stats and xattrs
	stats  map[string]statEntry         // the stat cache, by name
	xattrs map[string]map[string]string // extended attributes by name, stored in metadata
}

type statEntry struct {
	e  entry
	at time.Time
}

// newS3FS makes the profile with its settings: multipart_size (part size, 10 MiB),
// multipart_threshold (one PutObject below it, 10 MiB) and parallel_count (part uploads
// in flight, 5), as s3fs's options of those names.
func newS3FS(b *Backend, p *params) (*s3fs, error) {
	part, err := p.size("multipart_size", 10*mib, 5*mib)
	if err != nil {
		return nil, err
	}
	single, err := p.size("multipart_threshold", 10*mib, 0)
	if err != nil {
		return nil, err
	}
	par, err := p.count("parallel_count", 5)
	if err != nil {
		return nil, err
	}
	return &s3fs{
		b: b, partSize: part, singlePut: single, statTTL: 900 * time.Second, headsPerLS: 10, parallel: par,
		stats: map[string]statEntry{}, xattrs: map[string]map[string]string{},
	}, nil
}

// truncateMax bounds the size a truncate rewrites (held in memory).
const truncateMax = 256 << 20

func (p *s3fs) name() string { return "s3fs" }

func (p *s3fs) lookup(ctx context.Context, name string) (entry, error) {
	p.mu.Lock()
	if c, ok := p.stats[name]; ok && time.Since(c.at) < p.statTTL {
		p.mu.Unlock()
		return c.e, nil
	}
	p.mu.Unlock()
	b := p.b
	e, _, err := b.head(ctx, b.key(name))
	if errors.Is(err, fs.ErrNotExist) {
		// The directory's marker object (which carries its mode), then an implicit
		// directory (keys below it, no marker).
		e, _, err = b.head(ctx, b.dirKey(name))
		if errors.Is(err, fs.ErrNotExist) {
			e, err = b.implicitDir(ctx, name, 2)
		}
	}
	if err != nil {
		return entry{}, err
	}
	p.cache(name, e)
	return e, nil
}

func (p *s3fs) cache(name string, e entry) {
	p.mu.Lock()
	p.stats[name] = statEntry{e: e, at: time.Now()}
	p.mu.Unlock()
}

func (p *s3fs) forget(name string) {
	p.mu.Lock()
	for k := range p.stats {
		if fold.IsUnder(k, name) {
			delete(p.stats, k)
		}
	}
	p.mu.Unlock()
}

func (p *s3fs) reset() {
	p.mu.Lock()
	p.stats = map[string]statEntry{}
	p.xattrs = map[string]map[string]string{}
	p.mu.Unlock()
}

func (p *s3fs) mkdir(ctx context.Context, name string, perm uint32) error {
	b := p.b
	err := b.put(ctx, b.dirKey(name), bytes.NewReader(nil), 0, map[string]string{metaMode: strconv.Itoa(syscall.S_IFDIR | int(perm&0o7777))})
	if err == nil {
		p.cache(name, entry{mode: syscall.S_IFDIR | perm&0o7777})
	}
	return err
}

func (p *s3fs) mknod(ctx context.Context, name string, mode uint32) error {
	b := p.b
	if mode&syscall.S_IFMT != syscall.S_IFREG && mode&syscall.S_IFMT != 0 {
		return b.refuse("mknod", syscall.EPERM, "no special files")
	}
	if _, err := b.lookup(ctx, name); err == nil {
		return syscall.EEXIST
	}
	return b.put(ctx, b.key(name), bytes.NewReader(nil), 0, nil)
}

func (p *s3fs) remove(ctx context.Context, name string) error {
	return p.b.removeLooked(ctx, name)
}

func (p *s3fs) rename(ctx context.Context, from, to string, flags uint32) error {
	return p.b.renameByCopy(ctx, from, to, flags)
}

func (p *s3fs) link(ctx context.Context, existing, name string) error {
	return p.b.refuse("link", syscall.ENOTSUP, "no hard links")
}

func (p *s3fs) symlink(ctx context.Context, target, name string) error {
	b := p.b
	if _, err := b.lookup(ctx, name); err == nil {
		return syscall.EEXIST
	}
	err := b.put(ctx, b.key(name), strings.NewReader(target), int64(len(target)), symlinkMeta())
	if err == nil {
		p.cache(name, entry{mode: syscall.S_IFLNK | 0o777, size: int64(len(target))})
	}
	return err
}

func (p *s3fs) readlink(ctx context.Context, name string, buf []byte) (int, error) {
	b := p.b
	e, err := b.lookup(ctx, name)
	if err != nil {
		return 0, err
	}
	if !e.isLink() {
		return 0, syscall.EINVAL
	}
	got, err := b.get(ctx, b.key(name), 0, max(e.size, 1), buf)
	return int(min(got, int64(len(buf)))), err
}

// truncate downloads what is kept and uploads the object again at its new size.
func (p *s3fs) truncate(ctx context.Context, name string, size int64) error {
	b := p.b
	e, err := b.lookup(ctx, name)
	if err != nil {
		return err
	}
	if e.isDir() {
		return syscall.EISDIR
	}
	if size > truncateMax {
		return b.refuse("truncate", syscall.EFBIG, fmt.Sprintf("truncating to more than %d MiB is not modelled", truncateMax>>20))
	}
	data := make([]byte, size)
	if size > 0 && e.size > 0 {
		if _, err := b.get(ctx, b.key(name), 0, min(size, e.size), data); err != nil {
			return err
		}
	}
	p.forget(name)
	return b.put(ctx, b.key(name), bytes.NewReader(data), size, nil)
}

// setMeta copies the object onto itself with the new metadata (the mode and the
// extended attributes); an implicit directory gets a marker object instead.
func (p *s3fs) setMeta(ctx context.Context, op, name string, mode uint32, setMode bool) error {
	b := p.b
	e, err := b.lookup(ctx, name)
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
	key := b.key(name)
	if e.isDir() {
		key = b.dirKey(name)
		// An implicit directory has no object to copy: s3fs creates the marker.
		if _, _, err := b.head(ctx, key); errors.Is(err, fs.ErrNotExist) {
			return b.put(ctx, key, bytes.NewReader(nil), 0, map[string]string{metaMode: strconv.Itoa(int(mode))})
		}
	}
	meta := map[string]string{metaMode: strconv.Itoa(int(mode))}
	p.mu.Lock()
	for k, v := range p.xattrs[name] {
		meta["xattr-"+k] = v
	}
	p.mu.Unlock()
	if err := b.copyObject(ctx, key, key, meta); err != nil {
		return err
	}
	e.mode = mode
	p.cache(name, e)
	return nil
}

func (p *s3fs) getxattr(ctx context.Context, name, attr string, buf []byte) (int, error) {
	if _, err := p.b.lookup(ctx, name); err != nil {
		return 0, err
	}
	p.mu.Lock()
	v, ok := p.xattrs[name][attr]
	p.mu.Unlock()
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

func (p *s3fs) listxattr(ctx context.Context, name string, buf []byte) (int, error) {
	if _, err := p.b.lookup(ctx, name); err != nil {
		return 0, err
	}
	var list []byte
	p.mu.Lock()
	for k := range p.xattrs[name] {
		list = append(append(list, k...), 0)
	}
	p.mu.Unlock()
	if len(buf) == 0 {
		return len(list), nil
	}
	if len(buf) < len(list) {
		return 0, syscall.ERANGE
	}
	return copy(buf, list), nil
}

func (p *s3fs) setxattr(ctx context.Context, name, attr string, value []byte) error {
	p.mu.Lock()
	if p.xattrs[name] == nil {
		p.xattrs[name] = map[string]string{}
	}
	old, had := p.xattrs[name][attr]
	p.xattrs[name][attr] = string(value)
	p.mu.Unlock()
	err := p.b.setMeta(ctx, "setxattr", name, 0, false)
	if err != nil {
		p.mu.Lock()
		if had {
			p.xattrs[name][attr] = old
		} else {
			delete(p.xattrs[name], attr)
		}
		p.mu.Unlock()
	}
	return err
}

func (p *s3fs) removexattr(ctx context.Context, name, attr string) error {
	p.mu.Lock()
	_, had := p.xattrs[name][attr]
	delete(p.xattrs[name], attr)
	p.mu.Unlock()
	if !had {
		if err := replay.CheckName(name); err != nil {
			return err
		}
		if _, err := p.b.lookup(ctx, name); err != nil {
			return err
		}
		return syscall.ENODATA
	}
	return p.b.setMeta(ctx, "removexattr", name, 0, false)
}

// open of a file for writing makes its local copy: an empty object is created at once;
// an existing object is downloaded unless O_TRUNC.
func (p *s3fs) open(ctx context.Context, h *file, e entry, exists bool, flags int) (*file, error) {
	b := p.b
	if flags&accMode == syscall.O_RDONLY {
		return h, nil
	}
	tmp, err := os.CreateTemp(b.tmpDir, "iotap-s3fs-*")
	if err != nil {
		return nil, fmt.Errorf("replay: s3fs local copy: %w", err)
	}
	_ = os.Remove(tmp.Name())
	h.tmp, h.write = tmp, true
	switch {
	case !exists:
		// s3fs creates the object at once, empty.
		if err := b.put(ctx, h.key, bytes.NewReader(nil), 0, nil); err != nil {
			_ = tmp.Close()
			return nil, err
		}
		h.size = 0
		p.cache(h.name, entry{mode: syscall.S_IFREG | 0o644})
	case flags&syscall.O_TRUNC != 0:
		h.size, h.dirty = 0, true
	case e.size > 0:
		// Modifying an object: s3fs downloads it first.
		if _, err := b.get(ctx, h.key, 0, e.size, nil); err != nil {
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

// read GETs the ranges of [off, stop) not fetched before.
func (p *s3fs) read(ctx context.Context, f *file, buf []byte, off, stop int64) (int, error) {
	pos := off
	for _, w := range append(append([]span(nil), f.loaded...), span{stop, stop}) {
		if w.end <= pos {
			continue
		}
		if w.start > pos {
			gapEnd := min(w.start, stop)
			if _, err := p.b.get(ctx, f.key, pos, gapEnd-pos, buf[pos-off:gapEnd-off]); err != nil {
				return 0, err
			}
			f.addLoaded(span{pos, gapEnd})
		}
		pos = max(pos, min(w.end, stop))
		if pos >= stop {
			break
		}
	}
	return int(stop - off), nil
}

// addLoaded adds w to the ranges of f already fetched, merging them.
func (f *file) addLoaded(w span) {
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

// readdir is s3fs's readdir_multi_head: one HeadObject per entry, a few at a time; the
// results fill the stat cache.
func (p *s3fs) readdir(ctx context.Context, f *file, ents []dirent) {
	b := p.b
	sem := make(chan struct{}, max(p.headsPerLS, 1))
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
			key := b.key(child)
			if e.dir {
				key = b.dirKey(child)
			}
			got, _, err := b.head(ctx, key)
			if e.dir {
				got = dirEntry
			}
			if err == nil || e.dir {
				p.cache(child, got)
			}
		}()
	}
	wg.Wait()
}

func (p *s3fs) fsync(ctx context.Context, f *file) error {
	if f.tmp != nil {
		return p.flush(ctx, f)
	}
	return nil
}

func (p *s3fs) release(ctx context.Context, f *file) error {
	if f.tmp == nil {
		return nil
	}
	err := p.flush(ctx, f)
	_ = f.tmp.Close()
	f.tmp = nil
	return err
}

// flush uploads the local copy of f if it changed.
func (p *s3fs) flush(ctx context.Context, f *file) error {
	if !f.dirty {
		return nil
	}
	b := p.b
	size := f.size
	var err error
	if size < p.singlePut {
		err = b.put(ctx, f.key, io.NewSectionReader(f.tmp, 0, size), size, nil)
	} else {
		up := &upload{b: b, key: f.key, partSize: p.partSize, concurrency: p.parallel}
		for off := int64(0); off < size && err == nil; off += p.partSize {
			n := min(p.partSize, size-off)
			err = up.send(ctx, io.NewSectionReader(f.tmp, off, n), n)
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
	p.cache(f.name, entry{mode: syscall.S_IFREG | 0o644, size: size})
	return nil
}

// resize is never reached: every s3fs write handle has a local copy.
func (p *s3fs) resize() error {
	return p.b.refuse("ftruncate", syscall.ENOTSUP, "no in-place updates")
}
