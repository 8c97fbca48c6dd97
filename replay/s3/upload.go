package s3

import (
	"bytes"
	"context"
	"io"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// upload uploads an object from sequential writes: parts of partSize as they fill,
// completed at finish; below singlePut bytes in all, one PutObject instead. With a
// concurrency above 1, up to that many parts are in flight while writing goes on, each
// held in memory until it is sent, as the clients' upload managers do.
type upload struct {
	b           *Backend
	key         string
	partSize    int64
	singlePut   int64
	concurrency int
	buf         []byte
	id          *string
	next        int32 // the next part's number less one

	sem   chan struct{} // a token per part in flight
	wg    sync.WaitGroup
	mu    sync.Mutex // guards parts and err, which parts in flight set
	parts []types.CompletedPart
	err   error
}

func (u *upload) write(ctx context.Context, p []byte) error {
	if err := u.failed(); err != nil {
		return err
	}
	u.buf = append(u.buf, p...)
	for int64(len(u.buf)) >= u.partSize {
		part := u.buf[:u.partSize:u.partSize]
		rest := u.buf[u.partSize:]
		if u.concurrency > 1 {
			// The part goes out on its own: the next bytes go into a new buffer.
			u.buf = append(make([]byte, 0, max(u.partSize, int64(len(rest)))), rest...)
		}
		if err := u.send(ctx, bytes.NewReader(part), u.partSize); err != nil {
			return err
		}
		if u.concurrency <= 1 {
			u.buf = append(u.buf[:0], rest...)
		}
	}
	return nil
}

// failed returns the error of a part sent earlier, if one failed.
func (u *upload) failed() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// send uploads the next part from body (n bytes): at once with a concurrency of 1, else in
// the background once fewer than concurrency parts are in flight. body must stay valid
// until the part is sent.
func (u *upload) send(ctx context.Context, body io.ReadSeeker, n int64) error {
	if err := u.start(ctx); err != nil {
		return err
	}
	u.next++
	num := u.next
	if u.concurrency <= 1 {
		return u.put(ctx, num, body, n)
	}
	if u.sem == nil {
		u.sem = make(chan struct{}, u.concurrency)
	}
	select {
	case u.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	u.wg.Add(1)
	go func() {
		defer func() { <-u.sem; u.wg.Done() }()
		if err := u.put(ctx, num, body, n); err != nil {
			u.mu.Lock()
			if u.err == nil {
				u.err = err
			}
			u.mu.Unlock()
		}
	}()
	return nil
}

// start creates the multipart upload, once.
func (u *upload) start(ctx context.Context) error {
	if u.id != nil {
		return nil
	}
	b := u.b
	out, err := b.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &b.bucket, Key: &u.key})
	if err != nil {
		return b.cls("start upload of "+u.key, err)
	}
	u.id = out.UploadId
	b.mu.Lock()
	b.uploads[aws.ToString(u.id)] = u.key
	b.mu.Unlock()
	return nil
}

// put uploads part num.
func (u *upload) put(ctx context.Context, num int32, body io.ReadSeeker, n int64) error {
	b := u.b
	out, err := b.client.UploadPart(ctx, &awss3.UploadPartInput{
		Bucket: &b.bucket, Key: &u.key, UploadId: u.id, PartNumber: aws.Int32(num), Body: body, ContentLength: aws.Int64(n),
	})
	if err != nil {
		return b.cls("upload part of "+u.key, err)
	}
	addBytes(ctx, "UploadPart", n)
	u.mu.Lock()
	u.parts = append(u.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
	u.mu.Unlock()
	return nil
}

// part uploads the next part from body at once (a client that sends its parts in turn).
func (u *upload) part(ctx context.Context, body io.ReadSeeker, n int64) error {
	if err := u.start(ctx); err != nil {
		return err
	}
	u.next++
	return u.put(ctx, u.next, body, n)
}

func (u *upload) finish(ctx context.Context) error {
	b := u.b
	u.wg.Wait()
	if err := u.failed(); err != nil {
		u.abort()
		return err
	}
	if u.id == nil && (u.singlePut > 0 || len(u.buf) == 0) {
		err := b.put(ctx, u.key, bytes.NewReader(u.buf), int64(len(u.buf)), nil)
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
	slices.SortFunc(u.parts, func(x, y types.CompletedPart) int { return int(aws.ToInt32(x.PartNumber) - aws.ToInt32(y.PartNumber)) })
	_, err := b.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
		Bucket: &b.bucket, Key: &u.key, UploadId: u.id, MultipartUpload: &types.CompletedMultipartUpload{Parts: u.parts},
	})
	if err != nil {
		u.abort()
		return b.cls("complete upload of "+u.key, err)
	}
	b.mu.Lock()
	delete(b.uploads, aws.ToString(u.id))
	b.created[u.key] = struct{}{}
	b.mu.Unlock()
	return nil
}

// abort waits for the parts in flight and leaves the upload to Close, which aborts every
// upload not completed.
func (u *upload) abort() { u.wg.Wait() }
