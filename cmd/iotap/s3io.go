package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/trace"
)

// traceStore is the S3 account, region and endpoint of s3:// traces: the flags of every
// command that reads or writes traces (replay's same flags serve its trace and its s3://
// targets). Unset, each comes from the environment as the AWS SDK reads it.
type traceStore struct {
	Endpoint   string `json:",omitempty"`
	Region     string `json:",omitempty"`
	AWSProfile string `json:",omitempty"`
}

func (s *traceStore) addStoreFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.Endpoint, "s3-endpoint", "", "for s3:// traces: S3 endpoint `url`, addressed path-style "+
		"(default $IOTAP_S3_ENDPOINT, else $AWS_ENDPOINT_URL_S3, else AWS)")
	fs.StringVar(&s.Region, "s3-region", "", "for s3:// traces: AWS `region` (default $AWS_REGION, else the profile's, else us-east-1)")
	fs.StringVar(&s.AWSProfile, "aws-profile", "", "for s3:// traces: AWS shared-config `profile` (default $AWS_PROFILE, else default)")
}

// traceStoreUser is the options struct of a command that reads or writes s3:// traces: it
// embeds traceStore, and withOptions makes its settings the command's (env.traces).
type traceStoreUser interface{ store() traceStore }

// store returns the settings (traceStoreUser).
func (s *traceStore) store() traceStore { return *s }

// usedBy refuses the flags when no trace the command names is in S3: they would be
// ignored without a word.
func (s traceStore) usedBy(names ...string) error {
	if s == (traceStore{}) || slices.ContainsFunc(names, s3store.IsURL) {
		return nil
	}
	flag := "--s3-endpoint"
	switch {
	case s.Region != "":
		flag = "--s3-region"
	case s.AWSProfile != "":
		flag = "--aws-profile"
	}
	return usageErrorf("%s applies to s3:// traces, and none is named", flag)
}

func (s traceStore) options() s3store.Options {
	return s3store.Options{Client: s3store.ClientOptions{Endpoint: s.Endpoint, Region: s.Region, Profile: s.AWSProfile}}
}

// traceInputs expands trace arguments: an s3://bucket/prefix/ (ending in "/") becomes the
// traces below it; everything else is kept as it is.
func traceInputs(ctx context.Context, e *env, args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if !s3store.IsURL(a) || !strings.HasSuffix(a, "/") {
			out = append(out, a)
			continue
		}
		urls, err := s3store.ListWith(ctx, a, e.traces.options())
		if err != nil {
			return nil, err
		}
		if len(urls) == 0 {
			return nil, fmt.Errorf("no traces (*.iotap) below %s", a)
		}
		out = append(out, urls...)
	}
	return out, nil
}

// openTraceAny opens a trace from a file, "-" (stdin), or an s3:// URL. Finish with the
// returned close function (it closes the reader and, for S3, the object's body).
func openTraceAny(ctx context.Context, e *env, name string) (*trace.Reader, func() error, error) {
	if !s3store.IsURL(name) {
		var r *trace.Reader
		var err error
		if name == "-" {
			r, err = trace.NewReader(e.stdin)
		} else {
			r, err = trace.Open(name)
		}
		if err != nil {
			return nil, nil, err
		}
		return r, r.Close, nil
	}
	rc, err := s3store.OpenWith(ctx, name, e.traces.options())
	if err != nil {
		return nil, nil, err
	}
	r, err := trace.NewReader(rc)
	if err != nil {
		_ = rc.Close()
		return nil, nil, err
	}
	return r, func() error { return errors.Join(r.Close(), rc.Close()) }, nil
}
