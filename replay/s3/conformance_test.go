package s3_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/replay/backendtest"
	"github.com/iotap/iotap/replay/s3"
)

// TestS3Conformance runs the backend suite on the s3fs profile, the one that maps every
// call the suite makes (the mountpoint and sdk profiles refuse reads of a file being
// written and in-place changes by design; their own tests in backend_test.go check them).
func TestS3Conformance(t *testing.T) {
	srv, err := s3test.Start(s3test.Options{Buckets: []string{"data"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	var n atomic.Int32
	backendtest.Run(t, backendtest.Caps{Symlinks: true, Rename: true, Locks: true, Modes: true}, func(t *testing.T) replay.Backend {
		b, err := s3.Open(context.Background(), fmt.Sprintf("s3://data/conf-%d", n.Add(1)), s3.Options{
			Profile: "s3fs", Endpoint: srv.URL, Region: "us-east-1", ProbeTimeout: 5 * time.Second,
			Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKey, s3test.SecretKey, ""),
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// TestS3ConformanceReal runs the suite against a real bucket when IOTAP_S3_TEST_URL
// (s3://bucket/prefix) and AWS credentials are set; IOTAP_S3_TEST_ENDPOINT selects an
// S3-compatible server.
func TestS3ConformanceReal(t *testing.T) {
	base := os.Getenv("IOTAP_S3_TEST_URL")
	if base == "" {
		t.Skip("set IOTAP_S3_TEST_URL=s3://bucket/prefix and AWS credentials to run against real S3")
	}
	var n atomic.Int32
	run := time.Now().UTC().Format("20060102T150405")
	backendtest.Run(t, backendtest.Caps{Symlinks: true, Rename: true, Locks: true, Modes: true}, func(t *testing.T) replay.Backend {
		b, err := s3.Open(context.Background(), fmt.Sprintf("%s/iotap-test-%s-%d", strings.TrimSuffix(base, "/"), run, n.Add(1)),
			s3.Options{Profile: "s3fs", Endpoint: os.Getenv("IOTAP_S3_TEST_ENDPOINT")})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
