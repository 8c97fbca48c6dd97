package s3

import (
	"bytes"
	"context"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// upload uploads an object from sequential writes: parts of partSize as they fill,
// completed at finish; below singlePut bytes in all, one PutObject instead.
type upload struct {
	b         *Backend
	key       string
	partSize  int64
	singlePut int64
	buf       []byte
	id        *string
	parts     []types.CompletedPart
}

func (u *upload) write(ctx context.Context, p []byte) error {
	u.buf = append(u.buf, p...)
	for int64(len(u.buf)) >= u.partSize {
		if err := u.part(ctx, bytes.NewReader(u.buf[:u.partSize]), u.partSize); err != nil {
			return err
		}
		u.buf = append(u.buf[:0], u.buf[u.partSize:]...)
	}
	return nil
}

func (u *upload) part(ctx context.Context, body io.ReadSeeker, n int64) error {
	b := u.b
	if u.id == nil {
		out, err := b.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &b.bucket, Key: &u.key})
		if err != nil {
			return b.cls("start upload of "+u.key, err)
		}
		u.id = out.UploadId
		b.mu.Lock()
		b.uploads[aws.ToString(u.id)] = u.key
		b.mu.Unlock()
	}
	num := int32(len(u.parts) + 1)
	out, err := b.client.UploadPart(ctx, &awss3.UploadPartInput{
		Bucket: &b.bucket, Key: &u.key, UploadId: u.id, PartNumber: aws.Int32(num), Body: body, ContentLength: aws.Int64(n),
	})
	if err != nil {
		return b.cls("upload part of "+u.key, err)
	}
	addBytes(ctx, "UploadPart", n)
	u.parts = append(u.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
	return nil
}

func (u *upload) finish(ctx context.Context) error {
	b := u.b
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

// abort leaves the upload to Close, which aborts every upload not completed.
func (u *upload) abort() {}
