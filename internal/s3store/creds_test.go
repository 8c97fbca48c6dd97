package s3store

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestNoCredentials: with no credentials anywhere (EC2 instance metadata turned off, so
// that nothing leaves this machine), a request fails as ErrNoCredentials, and the
// explanation says where credentials go rather than naming the last place the SDK looked.
func TestNoCredentials(t *testing.T) {
	srv, _ := server(t)
	dir := t.TempDir()
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		t.Setenv(v, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	ctx := context.Background()
	c, err := NewClient(ctx, ClientOptions{Endpoint: srv.URL, Region: "us-east-1", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("traces")})
	if err == nil {
		t.Fatal("a request without credentials succeeded")
	}
	err = Classify(err)
	why := Explain(err)
	if !errors.Is(err, ErrNoCredentials) || !strings.Contains(why, "AWS_ACCESS_KEY_ID") || !strings.Contains(why, "--aws-profile") {
		t.Errorf("error %v, explained %q", err, why)
	}
}
