package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// ObjectPartSize is the size of the parts an ObjectWriter uploads (S3's smallest part is
// 5 MiB): its memory.
const ObjectPartSize = 8 << 20

// ObjectWriter writes one object (an export, not a trace: no segments) as an S3 multipart
// upload, a part as soon as it is full, so that it holds one part in memory whatever the
// object's size. Close completes the upload (an object smaller than a part is one PUT);
// Abort drops it, leaving no object.
type ObjectWriter struct {
	ctx         context.Context
	client      *s3.Client
	bucket, key string
	url         string
	buf         []byte
	uploadID    *string
	parts       []types.CompletedPart
	err         error
	closed      bool
	aborted     bool
}

// CreateObject starts writing the object at url (s3://bucket/key, not a prefix).
func CreateObject(ctx context.Context, url string, o Options) (*ObjectWriter, error) {
	o.defaults()
	bucket, key, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	if key == "" || strings.HasSuffix(key, "/") {
		return nil, fmt.Errorf("%w %q: give an object key, not a prefix", ErrBadURL, url)
	}
	client, err := NewClient(ctx, o.Client)
	if err != nil {
		return nil, err
	}
	return &ObjectWriter{ctx: ctx, client: client, bucket: bucket, key: key, url: url}, nil
}

// Write buffers p, uploading each part as it fills.
func (w *ObjectWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n := len(p)
	for len(p) > 0 {
		k := min(ObjectPartSize-len(w.buf), len(p))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == ObjectPartSize {
			if err := w.upload(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

func (w *ObjectWriter) fail(what string, err error) error {
	w.err = explained(what+" "+w.url, Classify(err))
	return w.err
}

// upload sends the buffer as the next part.
func (w *ObjectWriter) upload() error {
	if w.uploadID == nil {
		out, err := w.client.CreateMultipartUpload(w.ctx, &s3.CreateMultipartUploadInput{Bucket: &w.bucket, Key: &w.key})
		if err != nil {
			return w.fail("create", err)
		}
		w.uploadID = out.UploadId
	}
	n := int32(len(w.parts) + 1)
	out, err := w.client.UploadPart(w.ctx, &s3.UploadPartInput{
		Bucket: &w.bucket, Key: &w.key, UploadId: w.uploadID, PartNumber: &n,
		Body: bytes.NewReader(w.buf), ContentLength: aws.Int64(int64(len(w.buf))),
	})
	if err != nil {
		return w.fail("upload part of", err)
	}
	w.parts = append(w.parts, types.CompletedPart{ETag: out.ETag, PartNumber: &n})
	w.buf = w.buf[:0]
	return nil
}

// Close uploads what is left and completes the object.
func (w *ObjectWriter) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		w.abort()
		return w.err
	}
	if w.uploadID == nil {
		_, err := w.client.PutObject(w.ctx, &s3.PutObjectInput{
			Bucket: &w.bucket, Key: &w.key, Body: bytes.NewReader(w.buf), ContentLength: aws.Int64(int64(len(w.buf))),
		})
		if err != nil {
			return w.fail("write", err)
		}
		return nil
	}
	if len(w.buf) > 0 {
		if err := w.upload(); err != nil {
			w.abort()
			return err
		}
	}
	_, err := w.client.CompleteMultipartUpload(w.ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &w.bucket, Key: &w.key, UploadId: w.uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts},
	})
	if err != nil {
		w.abort()
		return w.fail("complete", err)
	}
	return nil
}

// Abort drops the object being written: nothing is left at its key.
func (w *ObjectWriter) Abort() {
	if !w.closed {
		w.closed = true
		if w.err == nil {
			w.err = errors.New("s3: object aborted")
		}
	}
	w.abort()
}

func (w *ObjectWriter) abort() {
	if w.uploadID != nil && !w.aborted {
		w.aborted = true
		_, _ = w.client.AbortMultipartUpload(context.WithoutCancel(w.ctx), &s3.AbortMultipartUploadInput{
			Bucket: &w.bucket, Key: &w.key, UploadId: w.uploadID,
		}) // best effort: the upload is what failed
	}
}

// Empty reports whether no object lies below prefixURL (s3://bucket/prefix/).
func Empty(ctx context.Context, prefixURL string, o Options) (bool, error) {
	o.defaults()
	bucket, prefix, err := ParseURL(prefixURL)
	if err != nil {
		return false, err
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	client, err := NewClient(ctx, o.Client)
	if err != nil {
		return false, err
	}
	out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, MaxKeys: aws.Int32(1)})
	if err != nil {
		return false, explained("list "+prefixURL, Classify(err))
	}
	return len(out.Contents) == 0, nil
}
