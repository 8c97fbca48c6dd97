package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
)

// Replay's places: a target, a copy of one and a store (--prepare-via) are each a directory,
// or a URL SCHEME://... whose scheme names a backend in placeSchemes. The replay command and
// the campaign reach a backend only through its placeScheme, so that adding one (gs://, say)
// is a file with its placeScheme and a line in placeSchemes.

// placeSchemes maps a URL scheme to the kind of place it names, in the order their flags are
// listed in replay's --help.
var placeSchemes = []placeKind{
	{"s3", func() placeScheme { return new(s3Places) }}, // replay_s3.go
}

// placeKind is an entry of placeSchemes: a scheme, and the function that makes the
// placeScheme of a replay command.
type placeKind struct {
	scheme string
	new    func() placeScheme
}

// placeScheme is one kind of replay place that is not a directory: its flags, the check of
// its URLs, the opening of a place as a replay backend, and of a trace kept there.
type placeScheme interface {
	// addFlags adds the scheme's flags to replay's.
	addFlags(fs *pflag.FlagSet)
	// setup checks the flags' values and makes them the options places are opened with;
	// log is the command's. Each error is a usage error.
	setup(log *slog.Logger) error
	// onlyFlag names a flag given a value other than its default that applies only to
	// places of the scheme, or returns "". traceHere: the trace is one of the scheme's too
	// (the flags that serve it then apply).
	onlyFlag(traceHere bool) string
	// check checks a place's URL (spec), given with flag, without reaching it. Each error
	// is a usage error.
	check(flag, spec string) error
	// open opens a place as a replay backend.
	open(ctx context.Context, spec string) (replay.Backend, error)
	// labels are what a replay trace onto b keeps in its header about how b was opened
	// (nil for a backend the scheme did not open).
	labels(b replay.Backend) []trace.Label
	// openTrace opens the trace at url for reading.
	openTrace(ctx context.Context, url string) (io.ReadCloser, error)
}

// replayPlaces are the kinds of place of one replay command, a placeScheme per entry of
// placeSchemes (in its order), with their flags bound (addFlags). It implements
// campaign.Places.
type replayPlaces struct {
	places []placeScheme
}

func (p *replayPlaces) addFlags(fs *pflag.FlagSet) {
	for _, s := range placeSchemes {
		pl := s.new()
		pl.addFlags(fs)
		p.places = append(p.places, pl)
	}
}

// schemeOf returns the index in placeSchemes of the scheme spec names, or -1 for a
// directory.
func schemeOf(spec string) int {
	scheme, _, ok := strings.Cut(spec, "://")
	if !ok {
		return -1
	}
	return slices.IndexFunc(placeSchemes, func(k placeKind) bool { return k.scheme == scheme })
}

// of returns the kind of place spec names, or nil for a directory.
func (p *replayPlaces) of(spec string) placeScheme {
	if i := schemeOf(spec); i >= 0 && i < len(p.places) {
		return p.places[i]
	}
	return nil
}

// setup checks every scheme's flags (placeScheme.setup), and refuses a flag that applies only
// to places of a scheme none of which is named: it would be ignored without a word. tr is
// the trace, places the targets and stores, checkUse false for a dry run (which opens no
// place).
func (p *replayPlaces) setup(log *slog.Logger, tr string, places []string, checkUse bool) error {
	for i, pl := range p.places {
		if err := pl.setup(log); err != nil {
			return err
		}
		if !checkUse {
			continue
		}
		named := slices.ContainsFunc(places, func(spec string) bool { return schemeOf(spec) == i })
		if flag := pl.onlyFlag(schemeOf(tr) == i); flag != "" && !named {
			return usageErrorf("%s applies to %s:// targets, and none is given (a directory target is replayed through its file system, whatever serves it)", flag, placeSchemes[i].scheme)
		}
	}
	return nil
}

// Remote implements campaign.Places.
func (p *replayPlaces) Remote(spec string) bool { return p.of(spec) != nil }

// CheckRemote implements campaign.Places.
func (p *replayPlaces) CheckRemote(flag, spec string) error { return p.of(spec).check(flag, spec) }

// Open implements campaign.Places: a directory, or a place of a scheme.
func (p *replayPlaces) Open(ctx context.Context, spec string) (replay.Backend, error) {
	if pl := p.of(spec); pl != nil {
		return pl.open(ctx, spec)
	}
	d, err := replay.OpenDir(spec)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Labels implements campaign.Places.
func (p *replayPlaces) Labels(b replay.Backend) []trace.Label {
	var out []trace.Label
	for _, pl := range p.places {
		out = append(out, pl.labels(b)...)
	}
	return out
}

// downloadTrace copies the trace at url, a place of pl, to a temporary file: replay reads
// its trace twice (starting state, then the replay itself). cleanup removes the copy.
func downloadTrace(ctx context.Context, pl placeScheme, url string) (path string, cleanup func(), err error) {
	rc, err := pl.openTrace(ctx, url)
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = rc.Close() }()
	f, err := os.CreateTemp("", "iotap-replay-*.iotap")
	if err != nil {
		return "", nil, fmt.Errorf("replay: download %s: %w", url, err)
	}
	cleanup = func() { _ = os.Remove(f.Name()) }
	if _, err := io.Copy(f, rc); err != nil {
		_ = f.Close()
		cleanup()
		return "", nil, fmt.Errorf("replay: download %s: %w", url, err)
	}
	if err := f.Close(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("replay: download %s: %w", url, err)
	}
	return f.Name(), cleanup, nil
}
