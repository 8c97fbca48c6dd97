package replay

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/iotap/iotap/trace"
)

// Call describes one Backend or File method call to a Middleware.
type Call struct {
	Method     string // "Lstat", "Open", "File.ReadAt", ...
	Name       string // the path, if the method takes one
	Idempotent bool   // safe to retry (see the Backend documentation)
}

// Middleware wraps one call: it must call next at most once per attempt and return its
// error (or its own). Middlewares add behaviour around a Backend without changing it:
// see Limit, Retry and Log. They cost a closure per call: the replay engine uses an
// undecorated backend unless asked.
type Middleware func(ctx context.Context, c Call, next func(context.Context) error) error

// Decorate returns b with every Backend and File method passed through mw.
func Decorate(b Backend, mw Middleware) Backend { return &decorated{b: b, mw: mw} }

type decorated struct {
	b  Backend
	mw Middleware
}

func (d *decorated) call(ctx context.Context, m, name string, idem bool, fn func(context.Context) error) error {
	return d.mw(ctx, Call{Method: m, Name: name, Idempotent: idem}, fn)
}

func (d *decorated) Target() trace.Target { return d.b.Target() }
func (d *decorated) Close() error         { return d.b.Close() }

var _ SpaceReporter = (*decorated)(nil)

// Space passes the question to the decorated backend: it is not a call to decorate.
func (d *decorated) Space(ctx context.Context) (Space, error) {
	if s, ok := d.b.(SpaceReporter); ok {
		return s.Space(ctx)
	}
	return Space{}, ErrUnsupported
}

// BeginPhase passes the phase to the decorated backend: it is not a call to decorate.
func (d *decorated) BeginPhase(phase string) { d.b.BeginPhase(phase) }
func (d *decorated) IsEmpty(ctx context.Context) (bool, error) {
	var ok bool
	err := d.call(ctx, "IsEmpty", "", true, func(ctx context.Context) (err error) { ok, err = d.b.IsEmpty(ctx); return })
	return ok, err
}
func (d *decorated) Reset(ctx context.Context) error {
	return d.call(ctx, "Reset", "", true, d.b.Reset)
}
func (d *decorated) Lstat(ctx context.Context, name string) (Attr, error) {
	var a Attr
	err := d.call(ctx, "Lstat", name, true, func(ctx context.Context) (err error) { a, err = d.b.Lstat(ctx, name); return })
	return a, err
}
func (d *decorated) Access(ctx context.Context, name string, mask uint32) error {
	return d.call(ctx, "Access", name, true, func(ctx context.Context) error { return d.b.Access(ctx, name, mask) })
}
func (d *decorated) Statfs(ctx context.Context) error {
	return d.call(ctx, "Statfs", "", true, d.b.Statfs)
}
func (d *decorated) Open(ctx context.Context, name string, flags int, perm uint32) (File, error) {
	var f File
	idem := flags&(oCreat|oTrunc) == 0
	err := d.call(ctx, "Open", name, idem, func(ctx context.Context) (err error) { f, err = d.b.Open(ctx, name, flags, perm); return })
	if err != nil {
		return nil, err
	}
	return &decoratedFile{f: f, d: d, name: name}, nil
}
func (d *decorated) Mkdir(ctx context.Context, name string, perm uint32) error {
	return d.call(ctx, "Mkdir", name, false, func(ctx context.Context) error { return d.b.Mkdir(ctx, name, perm) })
}
func (d *decorated) Mknod(ctx context.Context, name string, mode uint32) error {
	return d.call(ctx, "Mknod", name, false, func(ctx context.Context) error { return d.b.Mknod(ctx, name, mode) })
}
func (d *decorated) Remove(ctx context.Context, name string) error {
	return d.call(ctx, "Remove", name, false, func(ctx context.Context) error { return d.b.Remove(ctx, name) })
}
func (d *decorated) Rmdir(ctx context.Context, name string) error {
	return d.call(ctx, "Rmdir", name, false, func(ctx context.Context) error { return d.b.Rmdir(ctx, name) })
}
func (d *decorated) Rename(ctx context.Context, from, to string, flags uint32) error {
	return d.call(ctx, "Rename", from, false, func(ctx context.Context) error { return d.b.Rename(ctx, from, to, flags) })
}
func (d *decorated) Link(ctx context.Context, existing, name string) error {
	return d.call(ctx, "Link", name, false, func(ctx context.Context) error { return d.b.Link(ctx, existing, name) })
}
func (d *decorated) Symlink(ctx context.Context, target, name string) error {
	return d.call(ctx, "Symlink", name, false, func(ctx context.Context) error { return d.b.Symlink(ctx, target, name) })
}
func (d *decorated) Readlink(ctx context.Context, name string, buf []byte) (int, error) {
	var n int
	err := d.call(ctx, "Readlink", name, true, func(ctx context.Context) (err error) { n, err = d.b.Readlink(ctx, name, buf); return })
	return n, err
}
func (d *decorated) Truncate(ctx context.Context, name string, size int64) error {
	return d.call(ctx, "Truncate", name, true, func(ctx context.Context) error { return d.b.Truncate(ctx, name, size) })
}
func (d *decorated) Chmod(ctx context.Context, name string, perm uint32) error {
	return d.call(ctx, "Chmod", name, true, func(ctx context.Context) error { return d.b.Chmod(ctx, name, perm) })
}
func (d *decorated) Chown(ctx context.Context, name string) error {
	return d.call(ctx, "Chown", name, true, func(ctx context.Context) error { return d.b.Chown(ctx, name) })
}
func (d *decorated) Utimes(ctx context.Context, name string) error {
	return d.call(ctx, "Utimes", name, true, func(ctx context.Context) error { return d.b.Utimes(ctx, name) })
}
func (d *decorated) Getxattr(ctx context.Context, name, attr string, buf []byte) (int, error) {
	var n int
	err := d.call(ctx, "Getxattr", name, true, func(ctx context.Context) (err error) { n, err = d.b.Getxattr(ctx, name, attr, buf); return })
	return n, err
}
func (d *decorated) Listxattr(ctx context.Context, name string, buf []byte) (int, error) {
	var n int
	err := d.call(ctx, "Listxattr", name, true, func(ctx context.Context) (err error) { n, err = d.b.Listxattr(ctx, name, buf); return })
	return n, err
}
func (d *decorated) Setxattr(ctx context.Context, name, attr string, value []byte, flags int) error {
	return d.call(ctx, "Setxattr", name, true, func(ctx context.Context) error { return d.b.Setxattr(ctx, name, attr, value, flags) })
}
func (d *decorated) Removexattr(ctx context.Context, name, attr string) error {
	return d.call(ctx, "Removexattr", name, false, func(ctx context.Context) error { return d.b.Removexattr(ctx, name, attr) })
}

type decoratedFile struct {
	f    File
	d    *decorated
	name string
}

func (f *decoratedFile) call(ctx context.Context, m string, idem bool, fn func(context.Context) error) error {
	return f.d.mw(ctx, Call{Method: m, Name: f.name, Idempotent: idem}, fn)
}
func (f *decoratedFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	var n int
	err := f.call(ctx, "File.ReadAt", true, func(ctx context.Context) (err error) { n, err = f.f.ReadAt(ctx, p, off); return })
	return n, err
}
func (f *decoratedFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	var n int
	err := f.call(ctx, "File.WriteAt", true, func(ctx context.Context) (err error) { n, err = f.f.WriteAt(ctx, p, off); return })
	return n, err
}
func (f *decoratedFile) ReadDir(ctx context.Context, buf []byte, off int64) (int, error) {
	var n int
	err := f.call(ctx, "File.ReadDir", true, func(ctx context.Context) (err error) { n, err = f.f.ReadDir(ctx, buf, off); return })
	return n, err
}
func (f *decoratedFile) Sync(ctx context.Context, datasync bool) error {
	return f.call(ctx, "File.Sync", true, func(ctx context.Context) error { return f.f.Sync(ctx, datasync) })
}
func (f *decoratedFile) Truncate(ctx context.Context, size int64) error {
	return f.call(ctx, "File.Truncate", true, func(ctx context.Context) error { return f.f.Truncate(ctx, size) })
}
func (f *decoratedFile) Stat(ctx context.Context) (Attr, error) {
	var a Attr
	err := f.call(ctx, "File.Stat", true, func(ctx context.Context) (err error) { a, err = f.f.Stat(ctx); return })
	return a, err
}
func (f *decoratedFile) Allocate(ctx context.Context, mode uint32, off, length int64) error {
	return f.call(ctx, "File.Allocate", true, func(ctx context.Context) error { return f.f.Allocate(ctx, mode, off, length) })
}
func (f *decoratedFile) Seek(ctx context.Context, off int64, whence int) (int64, error) {
	var n int64
	err := f.call(ctx, "File.Seek", true, func(ctx context.Context) (err error) { n, err = f.f.Seek(ctx, off, whence); return })
	return n, err
}
func (f *decoratedFile) Lock(ctx context.Context, cmd LockCmd, typ int16, start, length int64) error {
	return f.call(ctx, "File.Lock", false, func(ctx context.Context) error { return f.f.Lock(ctx, cmd, typ, start, length) })
}

var _ RangeCopier = (*decoratedFile)(nil)

// CopyRange copies in the decorated backend when both files are its own and its File can.
func (f *decoratedFile) CopyRange(ctx context.Context, dst File, offIn, offOut, n int64) (int64, error) {
	rc, ok := f.f.(RangeCopier)
	d, ok2 := dst.(*decoratedFile)
	if !ok || !ok2 {
		return 0, ErrUnsupported
	}
	var c int64
	err := f.call(ctx, "File.CopyRange", true, func(ctx context.Context) (err error) {
		c, err = rc.CopyRange(ctx, d.f, offIn, offOut, n)
		return
	})
	return c, err
}

func (f *decoratedFile) Close(ctx context.Context) error {
	return f.call(ctx, "File.Close", false, f.f.Close)
}

const (
	oCreat = 0x40
	oTrunc = 0x200
)

// Limit returns a Middleware that admits at most rate calls per second (0: no rate limit)
// and at most conc calls at once (0: no limit). Waiting is not part of the measured
// latency only if the caller times inside the backend; the replay engine times around
// the call, so a limit shows up as latency, as it would for an application.
func Limit(rate float64, conc int) Middleware {
	var sem chan struct{}
	if conc > 0 {
		sem = make(chan struct{}, conc)
	}
	var mu sync.Mutex // guards next
	var next time.Time
	var interval time.Duration
	if rate > 0 {
		interval = time.Duration(float64(time.Second) / rate)
	}
	return func(ctx context.Context, c Call, fn func(context.Context) error) error {
		if interval > 0 {
			mu.Lock()
			now := time.Now()
			if next.Before(now) {
				next = now
			}
			at := next
			next = next.Add(interval)
			mu.Unlock()
			if d := time.Until(at); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				}
			}
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return fn(ctx)
	}
}

// Retry returns a Middleware that retries idempotent calls failing with ErrTransient,
// up to attempts times in all, with exponential backoff from base.
func Retry(attempts int, base time.Duration) Middleware {
	return func(ctx context.Context, c Call, fn func(context.Context) error) error {
		var err error
		for i := 0; i < max(attempts, 1); i++ {
			if i > 0 {
				t := time.NewTimer(base << (i - 1))
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return err
				}
			}
			err = fn(ctx)
			if err == nil || !c.Idempotent || !errors.Is(err, ErrTransient) {
				return err
			}
		}
		return err
	}
}

// Log returns a Middleware that logs each call at debug level (the level is checked
// before any argument is built) and failures other than the errnos an application may
// expect (ENOENT, EEXIST, ENODATA...) at warn level, rate-limited to one a second.
func Log(l *slog.Logger) Middleware {
	var mu sync.Mutex // guards last
	var last time.Time
	return func(ctx context.Context, c Call, fn func(context.Context) error) error {
		debug := l.Enabled(ctx, slog.LevelDebug)
		var t0 time.Time
		if debug {
			t0 = time.Now()
		}
		err := fn(ctx)
		if debug {
			l.LogAttrs(ctx, slog.LevelDebug, "backend call", slog.String("method", c.Method), slog.String("name", c.Name),
				slog.Duration("took", time.Since(t0)), slog.Any("err", err))
		}
		if err != nil && (errors.Is(err, ErrTransient) || errors.Is(err, ErrEscape) || Errno(err) == 5) {
			mu.Lock()
			warn := time.Since(last) >= time.Second
			if warn {
				last = time.Now()
			}
			mu.Unlock()
			if warn {
				l.Warn("backend call failed", "method", c.Method, "name", c.Name, "err", err)
			}
		}
		return err
	}
}

// Chain combines middlewares; the first is outermost.
func Chain(mws ...Middleware) Middleware {
	return func(ctx context.Context, c Call, fn func(context.Context) error) error {
		next := fn
		for i := len(mws) - 1; i >= 0; i-- {
			mw, inner := mws[i], next
			next = func(ctx context.Context) error { return mw(ctx, c, inner) }
		}
		return next(ctx)
	}
}
