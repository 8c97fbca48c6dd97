package s3store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// ClientOptions select the account, region and endpoint of a client. The zero value uses
// the standard AWS chain (environment, shared config and credentials files, SSO, IMDS).
type ClientOptions struct {
	Region   string // default: from the environment or config; us-east-1 if none is set
	Profile  string // shared-config profile (AWS_PROFILE when empty)
	Endpoint string // S3-compatible endpoint URL (e.g. http://127.0.0.1:9000)
	// PathStyle addresses buckets as endpoint/bucket/key (required by most S3-compatible
	// servers); it is turned on whenever Endpoint is set.
	PathStyle bool
	// Credentials, if set, replace the standard chain (tests).
	Credentials aws.CredentialsProvider
	// ConnectTimeout bounds connection set-up (default 5s); ResponseTimeout bounds the wait
	// for response headers (default 60s). Neither limits how long a body may stream.
	ConnectTimeout  time.Duration
	ResponseTimeout time.Duration
	// MaxAttempts per request, including the first (default 3, the SDK default). The
	// retryer is the SDK's standard one (exponential backoff with jitter, at most 20 s)
	// without the client-side retry quota.
	MaxAttempts int
	// APIOptions are added to every operation's middleware stack (request counting).
	APIOptions []func(*middleware.Stack) error
}

// EndpointFromEnv returns IOTAP_S3_ENDPOINT or AWS_ENDPOINT_URL_S3, so that the commands
// that read or write s3:// traces need no flag for an S3-compatible server.
func EndpointFromEnv() string {
	if v := os.Getenv("IOTAP_S3_ENDPOINT"); v != "" {
		return v
	}
	return os.Getenv("AWS_ENDPOINT_URL_S3")
}

// NewClient builds an S3 client. The HTTP client is the SDK's buildable client, so the
// SDK still applies AWS_CA_BUNDLE and proxy settings to it.
func NewClient(ctx context.Context, o ClientOptions) (*s3.Client, error) {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.ResponseTimeout <= 0 {
		o.ResponseTimeout = 60 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	hc := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = o.ConnectTimeout }).
		WithTransportOptions(func(t *http.Transport) {
			t.ResponseHeaderTimeout = o.ResponseTimeout
			t.MaxIdleConnsPerHost = 64
		})
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(hc),
		// The SDK's standard retryer, without its client-side retry quota: a replay wants
		// to see the server's throttling (and counts it), not have the client give up
		// early on its own.
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = o.MaxAttempts
				so.RateLimiter = ratelimit.None
			})
		}),
	}
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	if o.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(o.Profile))
	}
	if o.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(o.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
			so.UsePathStyle = true
			// S3-compatible servers often reject the aws-chunked trailing checksums the SDK
			// sends by default; send and check checksums only where S3 requires them.
			so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
		if o.PathStyle {
			so.UsePathStyle = true
		}
		so.APIOptions = append(so.APIOptions, o.APIOptions...)
	}), nil
}

// ErrBadURL marks an s3:// URL iotap refuses.
var ErrBadURL = errors.New("bad s3:// URL")

// IsURL reports whether s names an S3 location.
func IsURL(s string) bool { return strings.HasPrefix(s, "s3://") }

// ParseURL splits s3://bucket/key into bucket and key, refusing anything that could
// address keys outside the given one (see the package documentation).
func ParseURL(s string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%w %q: want s3://bucket/key", ErrBadURL, s)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%w %q: empty bucket name", ErrBadURL, s)
	}
	if strings.ContainsAny(bucket, "?#\\") {
		return "", "", fmt.Errorf("%w %q: bad bucket name %q", ErrBadURL, s, bucket)
	}
	trimmed := strings.TrimSuffix(key, "/")
	if trimmed != "" {
		for _, c := range strings.Split(trimmed, "/") {
			switch c {
			case "":
				return "", "", fmt.Errorf("%w %q: empty path component in key", ErrBadURL, s)
			case ".", "..":
				return "", "", fmt.Errorf("%w %q: key component %q is not allowed", ErrBadURL, s, c)
			}
		}
	}
	return bucket, key, nil
}

// Sentinel errors of Classify.
var (
	// ErrNoBucket marks a request to a bucket that does not exist.
	ErrNoBucket = errors.New("no such bucket")
	// ErrThrottled marks throttling (503 SlowDown) and other server-side failures a
	// retry may fix, after the SDK's own retries gave up.
	ErrThrottled = errors.New("throttled or unavailable")
	// ErrUnreachable marks an endpoint that could not be reached.
	ErrUnreachable = errors.New("endpoint unreachable")
	// ErrNoCredentials marks a request that could not be signed: the SDK found no
	// credentials (its chain ends in EC2 instance metadata), or the profile named does
	// not exist.
	ErrNoCredentials = errors.New("no credentials")
)

// Classify translates an SDK error into the io/fs sentinels and ours, keeping the original
// in the chain: the result satisfies errors.Is with fs.ErrNotExist, fs.ErrPermission,
// ErrNoBucket, ErrThrottled, ErrUnreachable or ErrNoCredentials where that applies, and
// errors.As still finds the SDK's types. nil stays nil.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	if noCredentials(err) { // first: a failed metadata request is no fault of the endpoint
		return &classified{kind: ErrNoCredentials, err: err}
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	var nsb *types.NoSuchBucket
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return &classified{kind: fs.ErrNotExist, err: err}
	}
	if errors.As(err, &nsb) {
		return &classified{kind: ErrNoBucket, err: err}
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden":
			return &classified{kind: fs.ErrPermission, err: err}
		case "NoSuchBucket":
			return &classified{kind: ErrNoBucket, err: err}
		case "NoSuchKey", "NotFound", "NoSuchUpload":
			return &classified{kind: fs.ErrNotExist, err: err}
		case "SlowDown", "ServiceUnavailable", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError":
			return &classified{kind: ErrThrottled, err: err}
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		switch code := re.HTTPStatusCode(); {
		case code == http.StatusNotFound:
			return &classified{kind: fs.ErrNotExist, err: err}
		case code == http.StatusForbidden:
			return &classified{kind: fs.ErrPermission, err: err}
		case code == http.StatusServiceUnavailable || code >= 500:
			return &classified{kind: ErrThrottled, err: err}
		}
	}
	var oe *net.OpError
	var dnse *net.DNSError
	if errors.As(err, &oe) || errors.As(err, &dnse) {
		return &classified{kind: ErrUnreachable, err: err}
	}
	return err
}

// noCredentials reports whether err says the SDK could not get credentials: a signing
// failure, a shared-config profile that does not exist, or a failed request to EC2
// instance metadata (the last link of the SDK's chain, reached when nothing else had
// credentials).
func noCredentials(err error) bool {
	var se *v4.SigningError
	var pe config.SharedConfigProfileNotExistError
	if errors.As(err, &se) || errors.As(err, &pe) {
		return true
	}
	var oe *smithy.OperationError
	for e := err; errors.As(e, &oe); e = oe.Err {
		if oe.Service() == "ec2imds" {
			return true
		}
	}
	return false
}

// classified is an SDK error with the sentinel it was classified as.
type classified struct {
	kind error
	err  error
}

func (c *classified) Error() string { return c.err.Error() }

// Unwrap returns both the sentinel and the SDK error.
func (c *classified) Unwrap() []error { return []error{c.kind, c.err} }

// Explain returns a one-line cause for a classified error meant for a person: what went
// wrong with the bucket or endpoint, or "" if err is none of those.
func Explain(err error) string {
	switch {
	case errors.Is(err, ErrNoBucket):
		return "the bucket does not exist (create it first, or check the name and region)"
	case errors.Is(err, fs.ErrPermission):
		return "access denied (check the credentials, profile and bucket policy)"
	case errors.Is(err, ErrUnreachable):
		return "the endpoint could not be reached (check --s3-endpoint and the network)"
	case errors.Is(err, ErrThrottled):
		return "the service kept throttling or failing after retries"
	case errors.Is(err, ErrNoCredentials):
		return "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (--aws-profile) " +
			"naming a profile of ~/.aws/config; the SDK looks in the environment, then the shared config and credentials files, then EC2 instance metadata"
	}
	return ""
}
