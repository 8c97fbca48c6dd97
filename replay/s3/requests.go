package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/replay"
)

// The requests every profile is made of. Each classifies its errors where they enter (cls)
// and counts its payload bytes; put and copyObject remember the keys they create, del
// forgets them.

// cls classifies an SDK error for the replay.Backend contract.
func (b *Backend) cls(what string, err error) error {
	if err == nil {
		return nil
	}
	c := s3store.Classify(err)
	if errors.Is(c, s3store.ErrThrottled) || errors.Is(c, s3store.ErrUnreachable) {
		return fmt.Errorf("replay: s3 %s: %w: %w", what, replay.ErrTransient, c)
	}
	return fmt.Errorf("replay: s3 %s: %w", what, c)
}

// key returns the object key of a checked name; dirKey the key prefix of its children.
func (b *Backend) key(name string) string { return b.prefix + name }
func (b *Backend) dirKey(name string) string {
	if name == "" {
		return b.prefix
	}
	return b.prefix + name + "/"
}

func (b *Backend) head(ctx context.Context, key string) (entry, map[string]string, error) {
	out, err := b.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		return entry{}, nil, b.cls("head "+key, err)
	}
	e := entry{mode: syscall.S_IFREG | 0o644, size: aws.ToInt64(out.ContentLength)}
	if strings.HasSuffix(key, "/") {
		e.mode = syscall.S_IFDIR | 0o755
	}
	if m, ok := out.Metadata[metaMode]; ok {
		if v, err := strconv.ParseUint(m, 10, 32); err == nil && v&syscall.S_IFMT != 0 {
			e.mode = uint32(v)
		}
	}
	return e, out.Metadata, nil
}

// listAny reports whether any key starts with dir (max-keys n).
func (b *Backend) listAny(ctx context.Context, dir string, n int32) (bool, error) {
	out, err := b.client.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{
		Bucket: &b.bucket, Prefix: &dir, Delimiter: aws.String("/"), MaxKeys: aws.Int32(n),
	})
	if err != nil {
		return false, b.cls("list "+dir, err)
	}
	return len(out.Contents) > 0 || len(out.CommonPrefixes) > 0, nil
}

// implicitDir looks name up as a directory without a marker object: keys below it (a
// listing of at most n keys), else it does not exist.
func (b *Backend) implicitDir(ctx context.Context, name string, n int32) (entry, error) {
	any, err := b.listAny(ctx, b.dirKey(name), n)
	if err == nil && !any {
		err = fmt.Errorf("replay: s3 lookup %q: %w", name, fs.ErrNotExist)
	}
	return dirEntry, err
}

// dirent is a directory entry as a listing shows it.
type dirent struct {
	name string
	dir  bool
	size int64
}

// listDir lists the children of dir (a key prefix), paginated.
func (b *Backend) listDir(ctx context.Context, dir string) ([]dirent, error) {
	var ents []dirent
	in := &awss3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: &dir, Delimiter: aws.String("/")}
	for {
		out, err := b.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, b.cls("list "+dir, err)
		}
		for _, o := range out.Contents {
			k := aws.ToString(o.Key)
			if k == dir {
				continue // the directory's own marker
			}
			ents = append(ents, dirent{name: strings.TrimPrefix(k, dir), size: aws.ToInt64(o.Size)})
		}
		for _, p := range out.CommonPrefixes {
			ents = append(ents, dirent{name: strings.TrimSuffix(strings.TrimPrefix(aws.ToString(p.Prefix), dir), "/"), dir: true})
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			break
		}
		in.ContinuationToken = out.NextContinuationToken
	}
	return ents, nil
}

// listAll returns every key below dir (no delimiter).
func (b *Backend) listAll(ctx context.Context, dir string) ([]string, error) {
	var keys []string
	p := awss3.NewListObjectsV2Paginator(b.client, &awss3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: &dir})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, b.cls("list "+dir, err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

// get reads [off, off+n) of key: the first len(dst) bytes into dst, the rest discarded.
func (b *Backend) get(ctx context.Context, key string, off, n int64, dst []byte) (int64, error) {
	rng := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	out, err := b.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &b.bucket, Key: &key, Range: &rng})
	if err != nil {
		var re interface{ HTTPStatusCode() int }
		if errors.As(err, &re) && re.HTTPStatusCode() == 416 {
			return 0, nil // range beyond the end: an empty read
		}
		return 0, b.cls("get "+key, err)
	}
	defer func() { _ = out.Body.Close() }()
	var got int64
	if len(dst) > 0 {
		m, err := io.ReadFull(out.Body, dst[:min(int64(len(dst)), n)])
		got += int64(m)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			addBytes(ctx, "GetObject", got)
			return got, b.cls("get "+key, err)
		}
	}
	m, err := io.Copy(io.Discard, out.Body)
	got += m
	addBytes(ctx, "GetObject", got)
	if err != nil {
		return got, b.cls("get "+key, err)
	}
	return got, nil
}

func (b *Backend) put(ctx context.Context, key string, body io.ReadSeeker, size int64, meta map[string]string) error {
	_, err := b.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket: &b.bucket, Key: &key, Body: body, ContentLength: aws.Int64(size), Metadata: meta,
	})
	if err != nil {
		return b.cls("put "+key, err)
	}
	addBytes(ctx, "PutObject", size)
	b.markCreated(key)
	return nil
}

func (b *Backend) copyObject(ctx context.Context, src, dst string, meta map[string]string) error {
	in := &awss3.CopyObjectInput{Bucket: &b.bucket, Key: &dst, CopySource: aws.String(b.bucket + "/" + escapeKey(src))}
	if meta != nil {
		in.Metadata = meta
		in.MetadataDirective = types.MetadataDirectiveReplace
	}
	if _, err := b.client.CopyObject(ctx, in); err != nil {
		return b.cls("copy "+src+" to "+dst, err)
	}
	b.markCreated(dst)
	return nil
}

// escapeKey escapes a key for x-amz-copy-source, keeping the slashes.
func escapeKey(k string) string {
	parts := strings.Split(k, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

func (b *Backend) del(ctx context.Context, key string) error {
	if _, err := b.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &b.bucket, Key: &key}); err != nil {
		return b.cls("delete "+key, err)
	}
	b.mu.Lock()
	delete(b.created, key)
	b.mu.Unlock()
	return nil
}

func (b *Backend) markCreated(key string) {
	b.mu.Lock()
	b.created[key] = struct{}{}
	b.mu.Unlock()
}

// deleteKeys deletes keys (all below the prefix) 1000 at a time.
func (b *Backend) deleteKeys(ctx context.Context, keys []string) error {
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		objs := make([]types.ObjectIdentifier, n)
		for i, k := range keys[:n] {
			if !strings.HasPrefix(k, b.prefix) {
				return fmt.Errorf("replay: s3 delete %q: outside %s: %w", k, b.url, replay.ErrEscape)
			}
			objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := b.client.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: &b.bucket, Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)}})
		if err != nil {
			return b.cls("delete objects", err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("replay: s3 delete %q: %s: %s", aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
		b.mu.Lock()
		for _, k := range keys[:n] {
			delete(b.created, k)
		}
		b.mu.Unlock()
		keys = keys[n:]
	}
	return nil
}
