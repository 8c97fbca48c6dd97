package s3

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"syscall"
)

// mountpoint is the profile of Mountpoint for Amazon S3:
//
//   - lookup/stat = HeadObject and ListObjectsV2(prefix=name/, delimiter=/, max-keys=1)
//     issued together; a directory shadows a file of the same name;
//   - readdir = ListObjectsV2 with delimiter, paginated;
//   - sequential reads = ranged GETs of a prefetch window that starts at 1 MiB + 128 KiB
//     and doubles up to 8 MiB, the next window fetched ahead once reads reach the second
//     half of the current one (a forward seek of up to 16 MiB or a backward seek of up to
//     1 MiB keeps the stream; anything else restarts it at the initial window); a window
//     is fetched as GETs of at most read_part_size, concurrency of them at once, and held
//     in memory until the reads pass it, all files' windows within memory_limit (a
//     window that does not fit shrinks to what is free, at least the initial window);
//   - writes = sequential only, a multipart upload of 8 MiB parts, the object visible at
//     close or fsync (after which the handle takes no more writes); opening an existing
//     file for writing needs O_TRUNC; out-of-order writes fail with EINVAL;
//   - mkdir is local until a file is written below;
//   - rename, link, symlink, chmod, chown, truncate and xattrs fail as Mountpoint fails
//     them (EPERM/ENOTSUP); utimes is accepted and not stored.
type mountpoint struct {
	b           *Backend
	readInit    int64 // first prefetch window
	readMax     int64 // largest window
	readPart    int64 // largest GET within a window
	concurrency int   // GETs of a window, and part uploads, in flight at once
	partSize    int64 // multipart part size
	mem         *memBudget
	noXattrs
}

// newMountpoint makes the profile with its settings (SettingsHelp): prefetch_initial,
// prefetch_max, read_part_size, concurrency, memory_limit and part_size.
func newMountpoint(b *Backend, p *params) (*mountpoint, error) {
	m := &mountpoint{b: b, noXattrs: noXattrs{b}}
	var err error
	for _, s := range []struct {
		dst      *int64
		key      string
		def, min int64
	}{
		{&m.readInit, "prefetch_initial", mib + 128*kib, 4 * kib},
		{&m.readMax, "prefetch_max", 8 * mib, 4 * kib},
		{&m.readPart, "read_part_size", 8 * mib, 4 * kib},
		{&m.partSize, "part_size", 8 * mib, 5 * mib},
	} {
		if *s.dst, err = p.size(s.key, s.def, s.min); err != nil {
			return nil, err
		}
	}
	if m.readMax < m.readInit {
		return nil, fmt.Errorf("replay: s3 settings: prefetch_max %d is below prefetch_initial %d", m.readMax, m.readInit)
	}
	if m.concurrency, err = p.count("concurrency", 16); err != nil {
		return nil, err
	}
	limit, err := p.size("memory_limit", 0, 0)
	if err != nil {
		return nil, err
	}
	m.mem = &memBudget{limit: limit}
	return m, nil
}

// memBudget counts the prefetched bytes all files hold, against a limit (0: none).
type memBudget struct {
	limit int64
	mu    sync.Mutex // guards used and peak
	used  int64
	peak  int64
}

// take reserves up to n bytes and returns how many: all of them without a limit, else
// what is free, but at least floor (reads must go on), never more than n.
func (m *memBudget) take(n, floor int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.limit > 0 {
		n = min(n, max(m.limit-m.used, floor))
	}
	m.used += n
	m.peak = max(m.peak, m.used)
	return n
}

func (m *memBudget) give(n int64) {
	m.mu.Lock()
	m.used -= n
	m.mu.Unlock()
}

const (
	mpSeekAhead = 16 * mib // Mountpoint keeps its stream across forward seeks this long
	mpSeekBack  = 1 * mib  // and backward seeks this long
)

func (p *mountpoint) name() string { return "mountpoint" }

func (p *mountpoint) lookup(ctx context.Context, name string) (entry, error) {
	b := p.b
	var (
		hEnt entry
		hErr error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		hEnt, _, hErr = b.head(ctx, b.key(name))
	}()
	isDir, lErr := b.listAny(ctx, b.dirKey(name), 1)
	<-done
	if lErr != nil {
		return entry{}, lErr
	}
	if isDir {
		return dirEntry, nil
	}
	if hErr != nil {
		return entry{}, hErr
	}
	return hEnt, nil
}

func (p *mountpoint) forget(string) {}
func (p *mountpoint) reset()        {}

// mkdir holds the directory locally: Mountpoint makes no request until a file is
// written below it.
func (p *mountpoint) mkdir(ctx context.Context, name string, perm uint32) error {
	p.b.mu.Lock()
	p.b.localDirs[name] = struct{}{}
	p.b.mu.Unlock()
	return nil
}

func (p *mountpoint) mknod(ctx context.Context, name string, mode uint32) error {
	return p.b.refuse("mknod", syscall.EPERM, "no special files")
}

func (p *mountpoint) remove(ctx context.Context, name string) error {
	return p.b.removeLooked(ctx, name)
}

func (p *mountpoint) rename(ctx context.Context, from, to string, flags uint32) error {
	return p.b.refuse("rename", syscall.EPERM, "rename is only supported on S3 Express One Zone")
}

func (p *mountpoint) link(ctx context.Context, existing, name string) error {
	return p.b.refuse("link", syscall.EPERM, "no hard links")
}

func (p *mountpoint) symlink(ctx context.Context, target, name string) error {
	return p.b.refuse("symlink", syscall.EPERM, "no symbolic links")
}

// readlink fails as on a file that is not a symlink: Mountpoint shows none.
func (p *mountpoint) readlink(ctx context.Context, name string, buf []byte) (int, error) {
	if _, err := p.b.lookup(ctx, name); err != nil {
		return 0, err
	}
	return 0, syscall.EINVAL
}

func (p *mountpoint) truncate(ctx context.Context, name string, size int64) error {
	return p.b.refuse("truncate", syscall.EPERM, "existing objects cannot be modified")
}

func (p *mountpoint) setMeta(ctx context.Context, op, name string, mode uint32, setMode bool) error {
	if p.b.preparing.Load() {
		return nil
	}
	if op == "utimes" {
		_, err := p.b.lookup(ctx, name)
		return err // accepted, not stored
	}
	return p.b.refuse(op, syscall.EPERM, "metadata cannot be changed")
}

func (p *mountpoint) open(ctx context.Context, h *file, e entry, exists bool, flags int) (*file, error) {
	if flags&accMode == syscall.O_RDONLY {
		h.next = p.readInit
		return h, nil
	}
	if exists && flags&syscall.O_TRUNC == 0 {
		if flags&accMode == syscall.O_RDWR {
			h.read = true // Mountpoint opens it for reading; writes then fail
			h.next = p.readInit
			return h, nil
		}
		return nil, p.b.refuse("open", syscall.EPERM, "an existing object can only be overwritten with O_TRUNC")
	}
	if flags&syscall.O_APPEND != 0 {
		return nil, p.b.refuse("open", syscall.EPERM, "no appends")
	}
	return p.b.startStream(h, p.partSize, 0, p.concurrency), nil
}

// read serves the read from the prefetch windows, copying what the last one holds of it
// (the replay checks sizes, not data: bytes of an earlier window read as zeros).
func (p *mountpoint) read(ctx context.Context, f *file, buf []byte, off, stop int64) (int, error) {
	if err := p.readWindowed(ctx, f, off, stop); err != nil {
		return 0, err
	}
	clear(buf[:stop-off])
	if h := f.held; h != nil {
		for pos := max(off, h.start); pos < min(stop, h.end); {
			part, at := h.at(pos)
			n := copy(buf[pos-off:stop-off], part[at:])
			if n == 0 {
				break
			}
			pos += int64(n)
		}
	}
	return int(stop - off), nil
}

// readWindowed is Mountpoint's prefetcher: the window f.cur has been fetched; once a read
// reaches its second half the next window (twice as large, up to readMax) is fetched
// ahead from cur.end; a read past cur waits for it. A random reader thus costs one
// initial window per seek, a sequential one keeps a request in flight.
func (p *mountpoint) readWindowed(ctx context.Context, f *file, pos, stop int64) error {
	for pos < stop {
		have := f.cur.end > f.cur.start
		if have && pos >= f.cur.start-mpSeekBack && pos < f.cur.end {
			pos = min(stop, f.cur.end)
			if f.ahead == nil && f.cur.end < f.size && pos >= f.cur.start+(f.cur.end-f.cur.start)/2 {
				f.ahead = p.startFetch(ctx, f, f.cur.end)
			}
			continue
		}
		if have && pos >= f.cur.end && pos-f.cur.end <= mpSeekAhead && f.cur.end < f.size {
			if f.ahead == nil {
				f.ahead = p.startFetch(ctx, f, f.cur.end)
			}
			if err := f.waitAhead(); err != nil {
				return err
			}
			continue
		}
		// First read or a seek the stream cannot follow: start over at the first window.
		if f.ahead != nil {
			<-f.ahead.done
			f.ahead.drop()
			f.ahead = nil
		}
		f.next = p.readInit
		f.ahead = p.startFetch(ctx, f, pos)
		if err := f.waitAhead(); err != nil {
			return err
		}
	}
	return nil
}

// fetch is the ranged GETs of a prefetch window, in flight until done is closed. Its
// parts hold the window's bytes, reserved in the budget mem, until dropped.
type fetch struct {
	span
	done  chan struct{}
	err   error
	parts [][]byte
	part  int64 // the size of every part but the last
	mem   *memBudget
	taken int64
}

// at returns the part holding byte pos of the window and pos's index in it.
func (a *fetch) at(pos int64) ([]byte, int64) {
	i := (pos - a.start) / a.part
	if i >= int64(len(a.parts)) {
		return nil, 0
	}
	return a.parts[i], (pos - a.start) - i*a.part
}

// drop gives the window's memory back.
func (a *fetch) drop() {
	if a == nil || a.mem == nil {
		return
	}
	a.parts = nil
	a.mem.give(a.taken)
	a.mem = nil
}

// startFetch starts the GETs of the next window of f from start: parts of at most
// readPart, concurrency of them at once, as much as the memory budget grants.
func (p *mountpoint) startFetch(ctx context.Context, f *file, start int64) *fetch {
	n := min(f.next, f.size-start)
	f.next = min(f.next*2, p.readMax)
	a := &fetch{done: make(chan struct{}), part: p.readPart, mem: p.mem}
	if n > 0 {
		n = p.mem.take(n, min(n, p.readInit))
		a.taken = n
	}
	a.span = span{start, start + max(n, 0)}
	if n <= 0 {
		close(a.done)
		return a
	}
	for off := int64(0); off < n; off += p.readPart {
		a.parts = append(a.parts, make([]byte, min(p.readPart, n-off)))
	}
	go func() {
		defer close(a.done)
		sem := make(chan struct{}, p.concurrency)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i, part := range a.parts {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if _, err := p.b.get(ctx, f.key, start+int64(i)*p.readPart, int64(len(part)), part); err != nil {
					mu.Lock()
					a.err = cmp.Or(a.err, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}()
	return a
}

// waitAhead waits for the fetch in flight and makes it the current window, dropping the
// one before.
func (f *file) waitAhead() error {
	a := f.ahead
	<-a.done
	f.ahead = nil
	f.held.drop()
	f.held = nil
	if a.err != nil {
		a.drop()
		f.cur = span{}
		return a.err
	}
	f.cur, f.held = a.span, a
	return nil
}

func (p *mountpoint) readdir(ctx context.Context, f *file, ents []dirent) {}

// fsync completes the upload: the object is visible and the handle takes no more writes.
func (p *mountpoint) fsync(ctx context.Context, f *file) error {
	return f.finishUpload(ctx)
}

func (p *mountpoint) release(ctx context.Context, f *file) error {
	if f.ahead != nil {
		<-f.ahead.done
		f.ahead.drop()
		f.ahead = nil
	}
	f.held.drop()
	f.held, f.cur = nil, span{}
	return f.finishUpload(ctx)
}

func (p *mountpoint) resize() error {
	return p.b.refuse("ftruncate", syscall.EPERM, "only a new file's current size")
}
