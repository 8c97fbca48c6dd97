package s3

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestS3RootMarker: a directory made through s3fs is a marker object ("sub/"); a store or
// target at that prefix holding only its marker is empty, and Reset keeps the marker (the
// directory would vanish from the mount without it) while it deletes the rest.
func TestS3RootMarker(t *testing.T) {
	srv := s3Server(t)
	ctx := context.Background()
	b := openS3(t, srv.URL, "s3fs", "sub")
	put := func(key string) {
		t.Helper()
		if _, err := b.client.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String(key), Body: bytes.NewReader(nil)}); err != nil {
			t.Fatal(err)
		}
	}
	empty := func() bool {
		t.Helper()
		ok, err := b.IsEmpty(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	put("sub/") // mkdir sub through s3fs
	if !empty() {
		t.Error("a prefix holding only its own directory marker is not empty")
	}
	put("sub/a")
	put("sub/d/")
	if empty() {
		t.Error("a prefix holding a file and a directory is empty")
	}
	if err := b.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := b.listAll(ctx, "sub/")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"sub/"}) || !empty() {
		t.Errorf("after Reset: keys %q, want the marker only", keys)
	}
}
