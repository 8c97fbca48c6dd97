package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/iotap/iotap/internal/tracetest"
	"github.com/iotap/iotap/trace"
)

// TestS3EndToEnd replays one synthetic trace (the workload of TestAA) through the engine
// onto a local directory and onto S3 with the mountpoint, s3fs and sdk profiles. The
// directory replays without divergence; on S3 every divergence is a call the profile
// refused, counted as such, and the request tallies are written as a sidecar.
func TestS3EndToEnd(t *testing.T) {
	b := tracetest.New(t)
	tracetest.Workload(b, 8)
	data := b.Bytes()
	srv := s3Server(t)
	ctx := context.Background()

	_, dir := target(t, "")
	backends := []Backend{dir}
	for _, p := range Profiles {
		s, err := OpenS3(ctx, "s3://data/e2e-"+p, s3Opts(srv.URL, p))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		backends = append(backends, s)
	}
	out := t.TempDir()
	for i, be := range backends {
		st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := PrepareTarget(ctx, be, st, false); err != nil {
			t.Fatalf("%s: prepare: %v", TargetPath(be), err)
		}
		var rt bytes.Buffer
		w, err := trace.NewWriter(&rt, trace.Header{Kind: "replay", Target: be.Target()}, trace.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := Run(ctx, tracetest.Reader(t, data), be, w, Options{Timing: TimingAFAP, OnDiverge: DivergeIgnore})
		must(t, w.Close())
		if err != nil {
			t.Fatalf("%s: %v", TargetPath(be), err)
		}
		var sb bytes.Buffer
		sum.Print(&sb)
		t.Logf("target %d:\n%s", i, sb.String())
		if sum.ReplayedOps != sum.RecordedOps {
			t.Errorf("%s: replayed %d of %d ops", TargetPath(be), sum.ReplayedOps, sum.RecordedOps)
		}
		s3b, ok := be.(*S3)
		if !ok {
			if sum.Divergences != 0 {
				t.Errorf("directory: %d divergences: %v", sum.Divergences, sum.Examples)
			}
			continue
		}
		phases := s3b.Requests()
		last := phases[len(phases)-1]
		if last.Phase != "replay" {
			t.Fatalf("last phase %q", last.Phase)
		}
		var refused, s3Reqs uint64
		for _, o := range last.Ops {
			refused += o.Refused
			for _, r := range o.Requests {
				s3Reqs += r.Count
			}
		}
		sb.Reset()
		prices, _ := ParsePrices("GET=0.0004/1000,PUT=0.005/1000")
		PrintRequests(&sb, last, prices)
		t.Logf("%s", sb.String())
		if s3Reqs == 0 {
			t.Errorf("%s: no requests counted", s3b.prof.name)
		}
		// Every divergence on S3 comes from a refused call or from an op whose recorded
		// outcome depended on one (a chmod'ed mode, a symlink that was not made).
		if sum.Divergences > 0 && refused == 0 {
			t.Errorf("%s: %d divergences but no refused calls: %v", s3b.prof.name, sum.Divergences, sum.Examples)
		}
		switch s3b.prof.name {
		case "s3fs":
			// s3fs does everything this workload does except the xattr read (ENODATA both).
			if refused != 0 {
				t.Errorf("s3fs refused %d calls", refused)
			}
		case "mountpoint":
			if refused == 0 {
				t.Errorf("mountpoint refused nothing (the workload renames, chmods and symlinks)")
			}
		}
		side := filepath.Join(out, s3b.prof.name+".requests.json")
		if err := WriteRequests(be, side); err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Schema string
			Phases []RequestStats
		}
		js, _ := os.ReadFile(side)
		if err := json.Unmarshal(js, &doc); err != nil || doc.Schema != "iotap.requests/v1" || len(doc.Phases) < 2 {
			t.Errorf("sidecar: %v %+v", err, doc)
		}
	}
	if err := WriteRequests(dir, filepath.Join(out, "dir.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "dir.json")); err == nil {
		t.Error("a directory backend wrote a request sidecar")
	}
	_ = syscall.ENOENT
}
