package main

import "runtime/debug"

func init() { version = buildVersion(version, debug.ReadBuildInfo) }

// buildVersion is iotap's version: the one -ldflags "-X main.version=..." set, else the
// main module's version as the go command stamped it (a release tag, or a pseudo-version
// of the commit built from), else the commit itself ("devel+<12 hex digits>", "-dirty" when
// the checkout had changes), else set.
func buildVersion(set string, read func() (*debug.BuildInfo, bool)) string {
	if set != "dev" {
		return set
	}
	bi, ok := read()
	if !ok || bi == nil {
		return set
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	if rev == "" {
		return set
	}
	v := "devel+" + rev[:min(len(rev), 12)]
	if dirty {
		v += "-dirty"
	}
	return v
}
