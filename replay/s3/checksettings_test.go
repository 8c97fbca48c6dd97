package s3

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCheckSettings: CheckSettings finds, without reaching S3, the settings errors Open
// returns, and both mark them ErrSetting; good settings pass.
func TestCheckSettings(t *testing.T) {
	for _, tc := range []struct {
		name, spec, profile string
		params              map[string]string
		want                string // "" for no error
	}{
		{"good", "s3://b/p?prefetch_max=64MiB", "", map[string]string{"concurrency": "4"}, ""},
		{"good-query-profile", "s3://b/p?profile=s3fs&parallel_count=2", "mountpoint", nil, ""},
		{"unknown-key", "s3://b/p", "", map[string]string{"bogus": "1"}, `s3 setting "bogus" is not one of the mountpoint profile's`},
		{"key-of-other-profile", "s3://b/p?profile=sdk&prefetch_max=1MiB", "", nil, `"prefetch_max" is not one of the sdk profile's`},
		{"bad-size", "s3://b/p", "", map[string]string{"prefetch_max": "abc"}, "prefetch_max=abc"},
		{"bad-count", "s3://b/p?concurrency=0", "", nil, "concurrency=0: want a count"},
		{"unknown-profile", "s3://b/p", "nope", nil, `unknown S3 profile "nope"`},
		{"two-values", "s3://b/p?concurrency=1&concurrency=2", "", nil, "wants one value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSettings(tc.spec, Options{Profile: tc.profile, Params: tc.params})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.want != "" && (err == nil || !errors.Is(err, ErrSetting) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v; want ErrSetting with %q", err, tc.want)
			}
		})
	}
	srv := s3Server(t)
	o := s3Opts(srv.URL, "")
	o.Params = map[string]string{"bogus": "1"}
	if _, err := Open(context.Background(), "s3://data/p", o); !errors.Is(err, ErrSetting) {
		t.Errorf("Open with an unknown setting: %v, want ErrSetting", err)
	}
}
