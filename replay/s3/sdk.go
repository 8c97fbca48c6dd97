package s3

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"syscall"
)

// sdk is the profile of an application that uses the SDK directly:
//
//   - stat = HeadObject (ListObjectsV2 if that misses, for directories);
//   - each read one ranged GET;
//   - writes streamed as the SDK upload manager does: one PutObject below 5 MiB,
//     otherwise 5 MiB parts;
//   - unlink = DeleteObject, without a lookup; mkdir = PutObject of name/;
//   - rename = CopyObject + DeleteObject;
//   - no metadata, links or in-place updates (ENOTSUP; hard links and special files EPERM).
type sdk struct {
	b           *Backend
	partSize    int64 // multipart part size
	singlePut   int64 // objects smaller than this are uploaded with one PutObject
	concurrency int   // parts in flight
	noXattrs
}

// newSDK makes the profile with its settings: part_size (the upload manager's part size
// and single-PUT threshold, 5 MiB) and concurrency (parts in flight, 5).
func newSDK(b *Backend, p *params) (*sdk, error) {
	part, err := p.size("part_size", 5*mib, 5*mib)
	if err != nil {
		return nil, err
	}
	conc, err := p.count("concurrency", 5)
	if err != nil {
		return nil, err
	}
	return &sdk{b: b, partSize: part, singlePut: part, concurrency: conc, noXattrs: noXattrs{b}}, nil
}

func (p *sdk) name() string { return "sdk" }

func (p *sdk) lookup(ctx context.Context, name string) (entry, error) {
	b := p.b
	e, _, err := b.head(ctx, b.key(name))
	if errors.Is(err, fs.ErrNotExist) {
		return b.implicitDir(ctx, name, 1)
	}
	return e, err
}

func (p *sdk) forget(string) {}
func (p *sdk) reset()        {}

func (p *sdk) mkdir(ctx context.Context, name string, perm uint32) error {
	return p.b.put(ctx, p.b.dirKey(name), bytes.NewReader(nil), 0, nil)
}

func (p *sdk) mknod(ctx context.Context, name string, mode uint32) error {
	return p.b.refuse("mknod", syscall.EPERM, "no special files")
}

func (p *sdk) remove(ctx context.Context, name string) error {
	return p.b.del(ctx, p.b.key(name))
}

func (p *sdk) rename(ctx context.Context, from, to string, flags uint32) error {
	return p.b.renameByCopy(ctx, from, to, flags)
}

func (p *sdk) link(ctx context.Context, existing, name string) error {
	return p.b.refuse("link", syscall.EPERM, "no hard links")
}

func (p *sdk) symlink(ctx context.Context, target, name string) error {
	return p.b.refuse("symlink", syscall.EPERM, "no symbolic links")
}

func (p *sdk) readlink(ctx context.Context, name string, buf []byte) (int, error) {
	return 0, p.b.refuse("readlink", syscall.ENOTSUP, "no symbolic links")
}

func (p *sdk) truncate(ctx context.Context, name string, size int64) error {
	return p.b.refuse("truncate", syscall.ENOTSUP, "no in-place updates")
}

func (p *sdk) setMeta(ctx context.Context, op, name string, mode uint32, setMode bool) error {
	if p.b.preparing.Load() {
		return nil
	}
	return p.b.refuse(op, syscall.ENOTSUP, "no metadata mapping")
}

func (p *sdk) open(ctx context.Context, h *file, e entry, exists bool, flags int) (*file, error) {
	if flags&accMode == syscall.O_RDONLY {
		return h, nil
	}
	if exists && flags&syscall.O_TRUNC == 0 {
		return nil, p.b.refuse("open", syscall.ENOTSUP, "no in-place updates")
	}
	return p.b.startStream(h, p.partSize, p.singlePut, p.concurrency), nil
}

func (p *sdk) read(ctx context.Context, f *file, buf []byte, off, stop int64) (int, error) {
	got, err := p.b.get(ctx, f.key, off, stop-off, buf)
	if err != nil {
		return 0, err
	}
	return int(min(got, stop-off)), nil
}

func (p *sdk) readdir(ctx context.Context, f *file, ents []dirent) {}

func (p *sdk) fsync(ctx context.Context, f *file) error { return nil }

func (p *sdk) release(ctx context.Context, f *file) error { return f.finishUpload(ctx) }

func (p *sdk) resize() error {
	return p.b.refuse("ftruncate", syscall.ENOTSUP, "no in-place updates")
}
