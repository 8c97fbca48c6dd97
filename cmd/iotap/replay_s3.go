package main

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/replay"
	replays3 "github.com/iotap/iotap/replay/s3"
	"github.com/iotap/iotap/trace"
)

// s3Places are replay's s3://bucket/prefix places (placeSchemes): the S3 backend
// (replay/s3), which also counts its requests, opened with the S3 flags' options. The
// account's flags (--s3-endpoint, --s3-region, --aws-profile) also serve an s3:// trace.
type s3Places struct {
	opts     replays3.Options
	settings []string // --s3-opt key=value
}

func (p *s3Places) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&p.opts.Profile, "s3-profile", "mountpoint", "for s3:// targets: `profile` of S3 requests per file call: mountpoint, s3fs or sdk")
	fs.StringVar(&p.opts.Endpoint, "s3-endpoint", "", "for s3:// targets and an s3:// trace: S3 endpoint `url`, addressed path-style "+
		"(default $IOTAP_S3_ENDPOINT, else $AWS_ENDPOINT_URL_S3, else AWS)")
	fs.StringVar(&p.opts.Region, "s3-region", "", "for s3:// targets and an s3:// trace: AWS `region` (default $AWS_REGION, else the profile's, else us-east-1)")
	fs.StringVar(&p.opts.AWSProfile, "aws-profile", "", "for s3:// targets and an s3:// trace: AWS shared-config `profile` (default $AWS_PROFILE, else default)")
	fs.BoolVar(&p.opts.Keep, "keep", false, "for s3:// targets: leave the replay's objects in the bucket")
	fs.StringArrayVar(&p.settings, "s3-opt", nil, "for s3:// targets: set a client `key=value` of the profile (repeatable; a target's own "+
		"s3://bucket/prefix?key=value&key=value wins, and may set profile=NAME). "+replays3.SettingsHelp)
}

func (p *s3Places) setup(log *slog.Logger) error {
	if !slices.Contains(replays3.Profiles, p.opts.Profile) {
		return usageErrorf("--s3-profile %q: want %s", p.opts.Profile, strings.Join(replays3.Profiles, ", "))
	}
	if len(p.settings) > 0 {
		p.opts.Params = map[string]string{}
		for _, kv := range p.settings {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || v == "" {
				return usageErrorf("--s3-opt %q: want key=value", kv)
			}
			p.opts.Params[k] = v
		}
	}
	p.opts.Log = log
	return nil
}

func (p *s3Places) onlyFlag(traceHere bool) string {
	account := !traceHere
	switch {
	case len(p.settings) > 0:
		return "--s3-opt"
	case p.opts.Profile != "mountpoint":
		return "--s3-profile"
	case account && p.opts.Endpoint != "":
		return "--s3-endpoint"
	case account && p.opts.Region != "":
		return "--s3-region"
	case account && p.opts.AWSProfile != "":
		return "--aws-profile"
	case p.opts.Keep:
		return "--keep"
	}
	return ""
}

// check checks a target or store without reaching S3: its URL (a bucket and a key prefix,
// which replay empties) and the profile and settings it is replayed with.
func (p *s3Places) check(flag, spec string) error {
	u, _, _ := strings.Cut(spec, "?")
	_, prefix, err := s3store.ParseURL(u)
	if err != nil {
		return usageErrorf("%s: %v", flag, err)
	}
	if strings.Trim(prefix, "/") == "" {
		return usageErrorf("%s %s: give a key prefix (s3://bucket/some/prefix): replay deletes what is below it", flag, spec)
	}
	if err := replays3.CheckSettings(spec, p.opts); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

func (p *s3Places) open(ctx context.Context, spec string) (replay.Backend, error) {
	b, err := replays3.Open(ctx, spec, p.opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// labels are the settings an S3 backend was given.
func (p *s3Places) labels(b replay.Backend) []trace.Label {
	if sb, ok := b.(*replays3.Backend); ok && sb.Given() != "" {
		return []trace.Label{{Key: "replay.s3_options", Value: sb.Given()}}
	}
	return nil
}

func (p *s3Places) openTrace(ctx context.Context, url string) (io.ReadCloser, error) {
	store := traceStore{Endpoint: p.opts.Endpoint, Region: p.opts.Region, AWSProfile: p.opts.AWSProfile}
	return s3store.OpenWith(ctx, url, store.options())
}
