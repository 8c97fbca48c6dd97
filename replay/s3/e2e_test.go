package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/s3req"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/report"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// TestS3EndToEnd replays one synthetic trace (the workload of the replay package's TestAA)
// through the engine onto a local directory and onto S3 with the mountpoint, s3fs and sdk
// profiles. The directory replays without divergence; on S3 every divergence is a call
// the profile refused, counted as such, and the request tallies are written as a sidecar.
func TestS3EndToEnd(t *testing.T) {
	b := tracetest.New(t)
	tracetest.Workload(b, 8)
	data := b.Bytes()
	srv := s3Server(t)
	ctx := context.Background()

	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := replay.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dir.Close() }()
	backends := []replay.Backend{dir}
	for _, p := range Profiles {
		s, err := Open(ctx, "s3://data/e2e-"+p, s3Opts(srv.URL, p))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		backends = append(backends, s)
	}
	out := t.TempDir()
	for i, be := range backends {
		path := be.Target().Path
		st, err := replay.DeriveState(tracetest.Reader(t, data), replay.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := replay.PrepareTarget(ctx, be, st, false); err != nil {
			t.Fatalf("%s: prepare: %v", path, err)
		}
		var rt bytes.Buffer
		w, err := trace.NewWriter(&rt, trace.Header{Kind: "replay", Target: be.Target()}, trace.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := replay.Run(ctx, tracetest.Reader(t, data), be, w, replay.Options{Timing: replay.TimingAFAP, OnDiverge: replay.DivergeIgnore})
		if cerr := w.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var sb bytes.Buffer
		sum.Print(&sb)
		t.Logf("target %d:\n%s", i, sb.String())
		if sum.ReplayedOps != sum.RecordedOps {
			t.Errorf("%s: replayed %d of %d ops", path, sum.ReplayedOps, sum.RecordedOps)
		}
		s3b, ok := be.(*Backend)
		if !ok {
			if sum.Divergences != 0 {
				t.Errorf("directory: %d divergences: %v", sum.Divergences, sum.Examples)
			}
			continue
		}
		checkS3Replay(t, s3b, sum, out)
	}
}

// checkS3Replay checks what one replay on S3 counted: requests were issued, every
// divergence comes from a call the profile refused, and the tallies make a sidecar.
func checkS3Replay(t *testing.T, s3b *Backend, sum *replay.Summary, out string) {
	t.Helper()
	prof := s3b.prof.name()
	phases := s3b.Requests()
	last := phases[len(phases)-1]
	if last.Phase != replay.PhaseReplay {
		t.Fatalf("last phase %q", last.Phase)
	}
	var refused, s3Reqs uint64
	for _, o := range last.Ops {
		refused += o.Refused
		for _, r := range o.Requests {
			s3Reqs += r.Count
		}
	}
	var sb bytes.Buffer
	prices, _ := report.ParsePrices("GET=0.0004/1000,PUT=0.005/1000")
	report.WriteRequests(&sb, last, prices)
	t.Logf("%s", sb.String())
	if s3Reqs == 0 {
		t.Errorf("%s: no requests counted", prof)
	}
	// Every divergence on S3 comes from a refused call or from an op whose recorded
	// outcome depended on one (a chmod'ed mode, a symlink that was not made).
	if sum.Divergences > 0 && refused == 0 {
		t.Errorf("%s: %d divergences but no refused calls: %v", prof, sum.Divergences, sum.Examples)
	}
	switch prof {
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
	side := filepath.Join(out, prof+".requests.json")
	if err := s3req.Write(side, s3b.TakeRequests()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema string
		Phases []s3req.Phase
	}
	js, _ := os.ReadFile(side)
	if err := json.Unmarshal(js, &doc); err != nil || doc.Schema != "iotap.requests/v1" || len(doc.Phases) < 2 {
		t.Errorf("sidecar: %v %+v", err, doc)
	}
	for _, key := range []string{`"schema"`, `"phases"`, `"ops"`, `"time_ns"`, `"requests"`, `"type"`} {
		if !strings.Contains(string(js), key) {
			t.Errorf("sidecar has no key %s (snake_case keys)", key)
		}
	}
}
