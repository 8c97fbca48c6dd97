package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
)

// s3Options are the flags of commands that reach S3: replay --target s3://bucket/prefix
// (and, through the environment, s3:// trace inputs and outputs).
type s3Options struct {
	Profile    string
	Endpoint   string
	Region     string
	AWSProfile string
	Keep       bool
	Prices     string
}

func (o *s3Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Profile, "s3-profile", "mountpoint", "on an s3:// target, map filesystem calls to S3 requests as `client` does: mountpoint, s3fs or sdk")
	fs.StringVar(&o.Endpoint, "s3-endpoint", "", "S3-compatible endpoint `url`, path-style addressing (default $IOTAP_S3_ENDPOINT or $AWS_ENDPOINT_URL_S3)")
	fs.StringVar(&o.Region, "s3-region", "", "AWS `region` (default from the environment or config; us-east-1 if none)")
	fs.StringVar(&o.AWSProfile, "aws-profile", "", "shared-config `profile` for credentials and region (default $AWS_PROFILE)")
	fs.BoolVar(&o.Keep, "keep", false, "leave the objects a replay on s3:// created in place (default: delete them at the end)")
	fs.StringVar(&o.Prices, "s3-prices", "", "per-request `prices` for a cost estimate of an s3:// replay, e.g. GET=0.0004/1000,PUT=0.005/1000")
}

// targetOptions converts the flags for replay.OpenTarget.
func (o *s3Options) targetOptions(e *env) (replay.TargetOptions, replay.Prices, error) {
	to := replay.TargetOptions{
		Profile: o.Profile, Endpoint: o.Endpoint, Region: o.Region, AWSProfile: o.AWSProfile, Keep: o.Keep, Log: e.log,
	}
	if to.Endpoint == "" {
		to.Endpoint = s3store.EndpointFromEnv()
	}
	okProfile := false
	for _, p := range replay.Profiles {
		okProfile = okProfile || p == o.Profile
	}
	if !okProfile {
		return to, nil, usageErrorf("--s3-profile %q: want one of %s", o.Profile, strings.Join(replay.Profiles, ", "))
	}
	var prices replay.Prices
	if o.Prices != "" {
		p, err := replay.ParsePrices(o.Prices)
		if err != nil {
			return to, nil, usageErrorf("--s3-prices: %v", err)
		}
		prices = p
	}
	return to, prices, nil
}

// reportS3Requests writes the request tallies of an S3 target next to a replay result
// (base + ".requests.json") and prints the replay phase's table. It does nothing for a
// directory target.
func reportS3Requests(e *env, b replay.Backend, base string, prices replay.Prices) error {
	rc, ok := b.(replay.RequestCounter)
	if !ok {
		return nil
	}
	if err := replay.WriteRequests(b, base+".requests.json"); err != nil {
		return err
	}
	phases := rc.Requests()
	if len(phases) > 0 {
		replay.PrintRequests(e.stdout, phases[len(phases)-1], prices)
	}
	return nil
}

// traceInputs expands trace arguments: an s3://bucket/prefix/ (ending in "/") becomes the
// traces below it; everything else is kept as it is.
func traceInputs(ctx context.Context, args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if !s3store.IsURL(a) || !strings.HasSuffix(a, "/") {
			out = append(out, a)
			continue
		}
		urls, err := s3store.List(ctx, a)
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
	rc, err := s3store.Open(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	r, err := trace.NewReader(rc)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return r, func() error { return errors.Join(r.Close(), rc.Close()) }, nil
}

// createTraceAny creates a trace file, or an s3:// object uploaded as it is written (a
// crash loses at most the last flush interval: see internal/s3store). Finish with the
// returned close function instead of w.Close: for S3 it also completes the upload.
func createTraceAny(ctx context.Context, name string, h trace.Header, o trace.WriterOptions) (w *trace.Writer, closeTrace func() error, err error) {
	if !s3store.IsURL(name) {
		w, err := trace.Create(name, h, o)
		if err != nil {
			return nil, nil, err
		}
		return w, w.Close, nil
	}
	up, err := s3store.Create(ctx, name, s3store.Options{Log: o.Logger})
	if err != nil {
		return nil, nil, err
	}
	w, err = trace.NewWriter(up, h, o)
	if err != nil {
		up.Close()
		return nil, nil, err
	}
	return w, func() error { return errors.Join(w.Close(), up.Close()) }, nil
}
