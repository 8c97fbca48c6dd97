package main

import (
	"os"
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

// TestVersionOfBuild: the test's own build of iotap (go build in this checkout) names the
// version its build info holds, read back with go version -m; in a clone (a .git
// directory) that is the commit's, not "dev".
func TestVersionOfBuild(t *testing.T) {
	if iotapBin == "" {
		t.Fatal("the iotap binary could not be built (see TestMain output)")
	}
	out, err := exec.Command(iotapBin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(string(out))
	info, err := exec.Command("go", "version", "-m", iotapBin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var mod, rev string
	var dirty bool
	for _, l := range strings.Split(string(info), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[0] == "mod":
			mod = f[2]
		case len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			rev = strings.TrimPrefix(f[1], "vcs.revision=")
		case len(f) == 2 && f[0] == "build" && f[1] == "vcs.modified=true":
			dirty = true
		}
	}
	want := "dev"
	switch {
	case mod != "" && mod != "(devel)":
		want = mod
	case len(rev) >= 12:
		want = "devel+" + rev[:12]
		if dirty {
			want += "-dirty"
		}
	}
	if got != "iotap "+want {
		t.Errorf("--version: %q, want %q (go version -m:\n%s)", got, "iotap "+want, info)
	}
	if st, err := os.Stat("../../.git"); err == nil && st.IsDir() && rev == "" {
		t.Errorf("a build in a clone carries no commit (go version -m:\n%s)", info)
	}
}
