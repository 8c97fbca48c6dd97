package main

import (
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	info := func(v string, settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Version: v}, Settings: settings}, true
		}
	}
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "0123456789abcdef0123"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	for _, tc := range []struct {
		name, set string
		read      func() (*debug.BuildInfo, bool)
		want      string
	}{
		{"ldflags", "1.2.3", info("v9"), "1.2.3"},
		{"release", "dev", info("v1.4.0", rev), "v1.4.0"},
		{"pseudo-version", "dev", info("v0.0.0-20261203110000-0123456789ab+dirty", rev, dirty), "v0.0.0-20261203110000-0123456789ab+dirty"},
		{"checkout", "dev", info("(devel)", rev), "devel+0123456789ab"},
		{"checkout with changes", "dev", info("(devel)", rev, dirty), "devel+0123456789ab-dirty"},
		{"nothing known", "dev", info("(devel)"), "dev"},
		{"no build info", "dev", func() (*debug.BuildInfo, bool) { return nil, false }, "dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := buildVersion(tc.set, tc.read); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestVersionOfBuild: the test's own build of iotap (go build in this checkout) names a
// version from the build, not "dev".
func TestVersionOfBuild(t *testing.T) {
	if iotapBin == "" {
		t.Fatal("the iotap binary could not be built (see TestMain output)")
	}
	out, err := exec.Command(iotapBin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if v := strings.TrimSpace(string(out)); v == "iotap dev" || !strings.HasPrefix(v, "iotap ") {
		t.Errorf("--version: %q", v)
	}
}
