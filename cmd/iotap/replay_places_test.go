package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
)

// memPlaces is a kind of place added by a test as a backend would be (a placeScheme and a
// line in placeSchemes): mem://NAME is the directory NAME below --mem-root, opened as a
// directory backend, and so is a trace mem://NAME.
type memPlaces struct {
	root   string
	tag    string
	opened []string
}

func (p *memPlaces) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&p.root, "mem-root", "", "for mem:// places: the `dir` they are in")
	fs.StringVar(&p.tag, "mem-tag", "", "for mem:// targets: a `label` of their replays")
}

func (p *memPlaces) setup(*slog.Logger) error {
	if p.root == "" {
		return usageErrorf("--mem-root: want a directory")
	}
	return nil
}

func (p *memPlaces) onlyFlag(bool) string {
	if p.tag != "" {
		return "--mem-tag"
	}
	return ""
}

func (p *memPlaces) path(spec string) string {
	return filepath.Join(p.root, strings.TrimPrefix(spec, "mem://"))
}

func (p *memPlaces) check(flag, spec string) error {
	if strings.Contains(spec, "..") {
		return usageErrorf("%s %s: no ..", flag, spec)
	}
	return nil
}

func (p *memPlaces) open(_ context.Context, spec string) (replay.Backend, error) {
	p.opened = append(p.opened, spec)
	if err := os.MkdirAll(p.path(spec), 0o755); err != nil {
		return nil, err
	}
	return replay.OpenDir(p.path(spec))
}

func (p *memPlaces) labels(replay.Backend) []trace.Label {
	if p.tag == "" {
		return nil
	}
	return []trace.Label{{Key: "replay.mem_tag", Value: p.tag}}
}

func (p *memPlaces) openTrace(_ context.Context, url string) (io.ReadCloser, error) {
	return os.Open(p.path(url))
}

// TestReplayPlaceSchemes: a kind of place added to placeSchemes is what replay opens its
// targets, their copies and its trace with, checks them with, and whose flags it takes and
// refuses where no place of the kind is named; a scheme that is not in the table names a
// directory.
func TestReplayPlaceSchemes(t *testing.T) {
	var mem *memPlaces
	placeSchemes = append(slices.Clone(placeSchemes), placeKind{"mem", func() placeScheme {
		mem = new(memPlaces)
		return mem
	}})
	t.Cleanup(func() { placeSchemes = placeSchemes[:len(placeSchemes)-1] })

	root := t.TempDir()
	writeSmallTrace(t, filepath.Join(root, "small.iotap"))
	prefix := filepath.Join(t.TempDir(), "res")
	code, out, errs := runReplayCLI(t, "replay", "mem://small.iotap", "--mem-root", root, "--mem-tag", "x",
		"--target", "mem://cand", "--copies", "2", "-o", prefix, "--timing", "afap", "--progress", "never")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if want := []string{"mem://cand", "mem://cand/copy1", "mem://cand/copy2"}; !slices.Equal(mem.opened, want) {
		t.Errorf("opened %q, want %q", mem.opened, want)
	}
	for _, c := range []string{"copy1", "copy2"} {
		if b, err := os.ReadFile(filepath.Join(root, "cand", c, "out.dat")); err != nil || len(b) != 8192 {
			t.Errorf("%s: out.dat %d bytes, %v", c, len(b), err)
		}
	}
	r, err := trace.Open(prefix + ".t1.r1.c1.iotap")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	if !slices.Contains(r.Header().Labels, trace.Label{Key: "replay.mem_tag", Value: "x"}) {
		t.Errorf("labels %v lack replay.mem_tag=x", r.Header().Labels)
	}

	dir := t.TempDir()
	tr := filepath.Join(dir, "small.iotap")
	writeSmallTrace(t, tr)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"flag without a place", []string{"--target", filepath.Join(dir, "d"), "--mem-root", root, "--mem-tag", "x"},
			"--mem-tag applies to mem:// targets, and none is given"},
		{"flags checked", []string{"--target", "mem://a"}, "--mem-root: want a directory"},
		{"place checked", []string{"--target", "mem://a/../b", "--mem-root", root}, "--target mem://a/../b: no .."},
		{"store checked", []string{"--target", "mem://a", "--prepare-via", "mem://../s", "--mem-root", root}, "--prepare-via mem://../s: no .."},
		{"other scheme is a directory", []string{"--target", "gs://b/p", "--mem-root", root}, "--target gs://b/p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runReplayCLI(t, append([]string{"replay", tr, "-o", filepath.Join(dir, "r"), "--progress", "never"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errs, exitUsage, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(root, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused replay opened mem://a: %v", err)
	}
}
