package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/iotap/iotap/internal/s3store"
)

// TargetOptions configure OpenTarget. The S3 fields are ignored for a directory.
type TargetOptions struct {
	// Profile maps filesystem calls to S3 requests: mountpoint (default), s3fs or sdk.
	Profile string
	// Region, AWSProfile and Endpoint select the account and server (standard AWS chain
	// when empty); an Endpoint (default $IOTAP_S3_ENDPOINT or $AWS_ENDPOINT_URL_S3) turns
	// on path-style addressing.
	Region     string
	AWSProfile string
	Endpoint   string
	// Keep leaves the objects the replay created in place at Close.
	Keep bool
	// ProbeTimeout bounds the check that the bucket is reachable (default 15s).
	ProbeTimeout time.Duration
	// MaxAttempts per S3 request, including the first (default 3).
	MaxAttempts int
	// TempDir holds s3fs-profile local copies (default os.TempDir()).
	TempDir string
	// Credentials, if set, replace the standard chain (tests).
	Credentials aws.CredentialsProvider
	Log         *slog.Logger
}

// OpenTarget opens a replay target: a directory path, or s3://bucket/prefix for the S3
// backend. For S3 it checks, within ProbeTimeout, that the bucket can be listed, and
// returns a clear error otherwise (missing bucket, access denied, unreachable endpoint).
func OpenTarget(ctx context.Context, spec string, o TargetOptions) (Backend, error) {
	if s3store.IsURL(spec) {
		return OpenS3(ctx, spec, o)
	}
	fi, err := os.Stat(spec)
	if err != nil {
		return nil, fmt.Errorf("replay: target %s: %w", spec, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("replay: target %s: not a directory", spec)
	}
	return OpenDir(spec)
}

// TargetPath returns how a backend names its root: the directory or the s3:// URL.
func TargetPath(b Backend) string {
	if p, ok := b.(interface{ Path() string }); ok {
		return p.Path()
	}
	return b.Target().Path
}

// OpenS3 opens s3://bucket/prefix as a replay target. The prefix must be non-empty (the
// replay deletes what is below it) and free of "." and ".." components.
func OpenS3(ctx context.Context, spec string, o TargetOptions) (*S3, error) {
	bucket, prefix, err := s3store.ParseURL(spec)
	if err != nil {
		return nil, fmt.Errorf("replay: target: %w", err)
	}
	if strings.Trim(prefix, "/") == "" {
		return nil, fmt.Errorf("replay: target %s: %w: give a key prefix (s3://%s/some/prefix): the replay deletes what is below it", spec, s3store.ErrBadURL, bucket)
	}
	prof, err := s3ProfileByName(o.Profile)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 15 * time.Second
	}
	if o.Endpoint == "" {
		o.Endpoint = s3store.EndpointFromEnv()
	}
	s := &S3{
		bucket: bucket, prefix: prefix, url: "s3://" + bucket + "/" + prefix,
		endpoint: o.Endpoint, prof: prof, keep: o.Keep, log: o.Log, tmpDir: o.TempDir,
		created: map[string]struct{}{}, uploads: map[string]string{}, localDirs: map[string]struct{}{},
		pending: map[string]int64{}, statCache: map[string]s3StatEntry{}, xattrs: map[string]map[string]string{},
	}
	s.BeginPhase("open") // the probe below; PrepareTarget and Run start their own phases
	client, err := s3store.NewClient(ctx, s3store.ClientOptions{
		Region: o.Region, Profile: o.AWSProfile, Endpoint: o.Endpoint, Credentials: o.Credentials,
		MaxAttempts: o.MaxAttempts, ConnectTimeout: min(5*time.Second, o.ProbeTimeout),
		APIOptions: []func(*middleware.Stack) error{s3CountingMiddleware(s.cur.Load)},
	})
	if err != nil {
		return nil, fmt.Errorf("replay: target %s: %w", spec, err)
	}
	s.client = client
	pctx, cancel := context.WithTimeout(ctx, o.ProbeTimeout)
	defer cancel()
	_, err = client.ListObjectsV2(pctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, MaxKeys: aws.Int32(1)})
	if err != nil {
		c := s3store.Classify(err)
		if why := s3store.Explain(c); why != "" {
			return nil, fmt.Errorf("replay: target %s: %s: %w", spec, why, c)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("replay: target %s: no answer within %v: %w", spec, o.ProbeTimeout, c)
		}
		return nil, fmt.Errorf("replay: target %s: %w", spec, c)
	}
	return s, nil
}

// PrepareTarget builds the starting state on b: it empties the root, runs Prepare, and,
// for a backend that counts requests, tallies them as the "prepare" phase and starts the
// "replay" phase afterwards.
func PrepareTarget(ctx context.Context, b Backend, st *State, fillRandom bool) error {
	BeginPhase(b, "prepare")
	defer BeginPhase(b, "replay")
	if err := b.Reset(ctx); err != nil {
		return err
	}
	return Prepare(ctx, b, st, fillRandom)
}
