package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// TestMetricsBadAddress: a --metrics address that cannot be one is a usage error, found
// before anything else is checked.
func TestMetricsBadAddress(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"mount", "--target", dir, "--mount-at", dir, "--metrics", "127.0.0.1:99999"},
		{"record", "--target", dir, "--metrics", "localhost", "--", "true"},
	} {
		t.Run(args[0], func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), args, nil, &stderr, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), "--metrics") {
				t.Errorf("exit %d, stderr %q; want %d naming --metrics", code, stderr.String(), exitUsage)
			}
		})
	}
}

// TestMetricsPortInUse: an address another program listens on is a usage error (exit 2)
// before anything is mounted or run.
func TestMetricsPortInUse(t *testing.T) {
	requireRecord(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	busy := ln.Addr().String()
	target, mnt, out := mountDirs(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"mount", []string{"mount", "--target", target, "--mount-at", mnt, "-o", out, "--metrics", busy}},
		{"record", []string{"record", "--target", target, "--mount-at", mnt, "-o", out, "--metrics", busy, "--",
			"sh", "-c", "echo ran > " + filepath.Join(target, "ran")}},
		{"record --native-first", []string{"record", "--target", target, "-o", out, "--native-first", "--metrics", busy, "--",
			"sh", "-c", "echo ran > " + filepath.Join(target, "ran")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(iotapBin, tc.args...)
			stderr, err := cmd.CombinedOutput()
			code := cmd.ProcessState.ExitCode()
			if code != exitUsage || !strings.Contains(string(stderr), "--metrics "+busy+": cannot listen: the address is already in use") {
				t.Errorf("exit %d (%v), stderr %q; want %d and the address in use", code, err, stderr, exitUsage)
			}
			if _, ok, _ := sysinfo.IsMountPoint(mnt); ok {
				t.Errorf("%s was mounted", mnt)
			}
			if _, err := os.Stat(filepath.Join(target, "ran")); err == nil {
				t.Errorf("the job ran")
			}
		})
	}
}

// TestRecordMetrics: `record --metrics` serves from the recorder, in its mount namespace,
// while the job runs: the job itself scrapes it (bash's /dev/tcp), and the metrics name
// the recording and count the job's first requests. It runs where fusectl is not mounted,
// as on a fresh machine.
func TestRecordMetrics(t *testing.T) {
	requireRecord(t)
	if !testenv.InFreshMounts(t) {
		return
	}
	testenv.Programs(t, testenv.FUSE, "bash")
	port := freePort(t)
	dir, outside := t.TempDir(), t.TempDir()
	out := filepath.Join(outside, "t.iotap")
	scrapeFile := filepath.Join(outside, "scrape")
	// The job creates a file, scrapes until the metrics count that create (the encoder
	// takes events every 10 ms with --stats-interval 10ms) and show the recorder's memory
	// (the sampler hands its samples over once a second), and keeps the last scrape outside
	// the traced directory.
	script := `echo x > f
for i in $(seq 1000); do
  exec 3<>/dev/tcp/127.0.0.1/` + port + `
  printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3
  cat <&3 > "$1"
  exec 3<&-
  grep -q '^iotap_requests_total{op="create"} 1$' "$1" && grep -q '^iotap_process_resident_memory_bytes{comm="iotap"' "$1" && exit 0
  sleep 0.01
done
exit 1`
	cmd := exec.Command(iotapBin, "record", "-o", out, "--metrics", port, "--stats-interval", "10ms", "--", "bash", "-c", script, "bash", scrapeFile)
	cmd.Dir = dir
	stderr, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("record: %v\n%s", err, stderr)
	}
	if !strings.Contains(string(stderr), "iotap: metrics at http://127.0.0.1:"+port+"/metrics\n") {
		t.Errorf("no metrics URL on stderr:\n%s", stderr)
	}
	body, err := os.ReadFile(scrapeFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`iotap_info{cache="none",kind="record",mount_point="` + dir + `",target="` + dir + `",trace="` + out + `",version=`,
		`iotap_requests_in_flight `,
		`iotap_process_resident_memory_bytes{comm="iotap",pid=`,
		`iotap_trace_events_total `,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the job's scrape lacks %q:\n%s", want, body)
		}
	}
}

// TestMetricsInFlightUnavailable: where the kernel's count of requests in flight cannot be
// read (here fusectl is not mounted and its mount point is hidden, in a private mount
// namespace), iotap says so on stderr and serves the other metrics.
func TestMetricsInFlightUnavailable(t *testing.T) {
	requireRecord(t)
	if !testenv.InFreshMounts(t) {
		return
	}
	if err := unix.Mount("none", "/sys/fs/fuse", "tmpfs", 0, ""); err != nil {
		t.Fatalf("hide /sys/fs/fuse/connections: %v", err)
	}
	target, mnt, out := mountDirs(t)
	cmd := exec.Command(iotapBin, "mount", "--target", target, "--mount-at", mnt, "-o", out, "--ready-fd", "3", "--metrics", "127.0.0.1:0")
	// A file, written by iotap itself: what it said before its ready line is there.
	stderrFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stderrFile.Close() }()
	cmd.Stderr = stderrFile
	var stderr strings.Builder
	line, err := startReady(cmd)
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = waitTimeout(cmd, 20*time.Second) }()
	if b, rerr := os.ReadFile(stderrFile.Name()); rerr == nil {
		stderr.Write(b)
	}
	if err != nil || line != "ready\n" {
		t.Fatalf("iotap mount did not report ready (read %q, %v); stderr:\n%s", line, err, stderr.String())
	}
	const want = "iotap: metrics: iotap_requests_in_flight is not served: fusectl: the connection's control file cannot be opened: " +
		"fusectl (/sys/fs/fuse/connections) is not mounted, and mounting it privately failed: mount fusectl: no such file or directory\n"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	m := regexp.MustCompile(`(?m)^iotap: metrics at (http://127\.0\.0\.1:\d+/metrics)$`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no metrics URL on stderr:\n%s", stderr.String())
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "iotap_trace_events_total ") || strings.Contains(string(body), "iotap_requests_in_flight") {
		t.Errorf("the scrape should have the trace's events and no requests in flight:\n%s", body)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestMetricsPrometheus: a real Prometheus server scrapes `iotap mount --metrics` while a
// job runs on the mount, and its HTTP API answers with the request count the trace holds.
// It runs where fusectl is not mounted, as on a fresh machine.
//
// Prometheus scrapes a proxy the test puts in front of iotap, which reads each scrape as it
// passes. Once the job has ended and a scrape shows every event the trace writer accepted
// counted and no request in flight, the mount is quiet: that scrape's figures are the
// trace's. The scrape after it means Prometheus has committed it (a target's scrapes follow
// one another: scrape, append, commit, wait), so a query at its time returns its values.
func TestMetricsPrometheus(t *testing.T) {
	requireRecord(t)
	if !testenv.InFreshMounts(t) {
		return
	}
	testenv.Programs(t, testenv.FUSE, "prometheus", "seq", "cp", "cat", "mv", "ls", "rm", "mkdir")
	const interval = 100 * time.Millisecond
	proxy := newScrapeProxy(t)
	prom := startPrometheus(t, proxy.addr(), interval)

	target, mnt, out := mountDirs(t)
	stderrPath := filepath.Join(t.TempDir(), "stderr")
	stderrFile, err := os.Create(stderrPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stderrFile.Close() }()
	iotapLog := func() string { b, _ := os.ReadFile(stderrPath); return string(b) }
	cmd := exec.Command(iotapBin, "mount", "--target", target, "--mount-at", mnt, "-o", out, "--ready-fd", "3",
		"--metrics", "127.0.0.1:0", "--stats-interval", "100ms", "--stats-format", "json")
	cmd.Stderr = stderrFile
	line, err := startReady(cmd)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
	if err != nil || line != "ready\n" {
		t.Fatalf("iotap mount did not report ready (read %q, %v); stderr:\n%s", line, err, iotapLog())
	}
	m := regexp.MustCompile(`(?m)^iotap: metrics at (http://127\.0\.0\.1:\d+/metrics)$`).FindStringSubmatch(iotapLog())
	if m == nil {
		t.Fatalf("no metrics URL on stderr:\n%s", iotapLog())
	}
	proxy.setUpstream(m[1])
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\n--- iotap's stderr:\n%s\n--- Prometheus's log (tail):\n%s", append(args, iotapLog(), prom.logTail())...)
	}
	// Prometheus scrapes iotap through the proxy before the job starts.
	proxy.next(t, 30*time.Second, func(s scrape) bool { return s.err == nil }, fail)

	// The job: a real program on the mount, with data, metadata and a failing lookup.
	job := exec.Command("sh", "-c", `set -e; cd "$1"
seq 1 100000 > a
cp a b
cat a b > /dev/null
mkdir d
mv b d/c
ls -l d > /dev/null
cat missing 2>/dev/null || true
rm -r d a`, "sh", mnt)
	if out, err := job.CombinedOutput(); err != nil {
		fail("job: %v\n%s", err, out)
	}
	jobEnd := time.Now()
	quiet := proxy.next(t, 30*time.Second, func(s scrape) bool {
		return s.err == nil && s.at.After(jobEnd) && s.requests > 0 && s.requests == s.accepted && s.inFlight == 0
	}, fail)
	proxy.next(t, 10*time.Second, func(s scrape) bool { return s.seq > quiet.seq }, fail)
	// The quiet scrape's sample is stamped when Prometheus started it (or at its scheduled
	// time, when within 2 ms of it), before the proxy received it; the next one's is about
	// an interval later.
	at := quiet.at.Add(10 * time.Millisecond)
	t.Logf("quiet scrape %d at %s: %v requests, %v events accepted, %v in flight (content type %s)",
		quiet.seq, quiet.at.Format(time.RFC3339Nano), quiet.requests, quiet.accepted, quiet.inFlight, quiet.contentType)

	names := []string{"requests", "histogram", "writes", "enoent", "written", "in flight"}
	queries := map[string]string{
		"requests":  `sum(iotap_requests_total)`,
		"histogram": `histogram_count(sum(iotap_request_duration_seconds))`,
		"writes":    `histogram_count(iotap_request_duration_seconds{op="write"})`,
		"enoent":    `sum(iotap_request_errors_total{errno="ENOENT"})`,
		"written":   `sum(iotap_data_bytes_total{op=~"write|copy_file_range"})`,
		"in flight": `iotap_requests_in_flight`,
	}
	got := map[string]float64{}
	for _, name := range names {
		q := queries[name]
		v, err := prom.query(q, at)
		if err != nil {
			fail("query %s: %v", q, err)
		}
		got[name] = v
		t.Logf("Prometheus: %s = %v", q, v)
	}

	// Unmount: the trace is closed with every event the metrics counted.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitTimeout(cmd, 20*time.Second); err != nil {
		fail("iotap mount: %v", err)
	}
	tc := readTrace(t, out)
	if !tc.footer {
		t.Errorf("the trace has no footer")
	}
	var enoent, written float64
	for _, e := range tc.events {
		switch {
		case e.Errno == uint16(syscall.ENOENT):
			enoent++
		case (e.Op == trace.OpWrite || e.Op == trace.OpCopyFileRange) && e.Errno == 0:
			written += float64(e.Ret)
		}
	}
	want := map[string]float64{
		"requests": float64(len(tc.events)), "histogram": float64(len(tc.events)), "writes": float64(tc.count(trace.OpWrite)),
		"enoent": enoent, "written": written, "in flight": 0,
	}
	t.Logf("trace %s: %d events, %d writes, %d copy_file_range (%v bytes written), %v ENOENT",
		out, len(tc.events), tc.count(trace.OpWrite), tc.count(trace.OpCopyFileRange), written, enoent)
	for _, name := range names {
		if w := want[name]; got[name] != w {
			t.Errorf("%s: Prometheus says %v (%s), the trace %v", name, got[name], queries[name], w)
		}
	}
	// seq 1 100000 writes 588,895 bytes, and cp copies them (with copy_file_range, or
	// read and write).
	if written != 2*588895 || enoent < 1 {
		t.Errorf("the trace has %v bytes written, want %d, and %v failed lookups, want at least 1", written, 2*588895, enoent)
	}
	checkJSONLiveLines(t, iotapLog())
}

// checkJSONLiveLines: with --stats-format json, the live lines on stderr are JSON objects
// that start with their time.
func checkJSONLiveLines(t *testing.T, stderr string) {
	t.Helper()
	n := 0
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		n++
		var st map[string]any
		if err := json.Unmarshal([]byte(l), &st); err != nil {
			t.Errorf("live line %q: %v", l, err)
			continue
		}
		ts, _ := st["time"].(string)
		if _, err := time.Parse("2006-01-02T15:04:05.000Z07:00", ts); err != nil || !strings.HasPrefix(l, `{"time":"`) || !strings.HasSuffix(ts, "Z") {
			t.Errorf("live line %q: time %q is not RFC 3339 UTC with milliseconds (%v)", l, ts, err)
		}
	}
	if n == 0 {
		t.Errorf("no JSON live line on stderr:\n%s", stderr)
	}
}

func waitTimeout(cmd *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("still running after %v", d)
	}
}

// scrape is what the proxy saw of one scrape.
type scrape struct {
	seq         int
	at          time.Time // when the proxy received it
	contentType string
	// The sums of iotap_requests_total, iotap_trace_events_total and
	// iotap_requests_in_flight (-1: absent).
	requests, accepted, inFlight float64
	err                          error
}

// scrapeProxy sits between Prometheus and iotap, and reports each scrape.
type scrapeProxy struct {
	srv      *httptest.Server
	upstream atomic.Pointer[string]
	scrapes  chan scrape
	seq      atomic.Int64
}

func newScrapeProxy(t *testing.T) *scrapeProxy {
	p := &scrapeProxy{scrapes: make(chan scrape, 10000)}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *scrapeProxy) addr() string         { return strings.TrimPrefix(p.srv.URL, "http://") }
func (p *scrapeProxy) setUpstream(u string) { p.upstream.Store(&u) }
func (p *scrapeProxy) report(s scrape)      { s.seq = int(p.seq.Add(1)); p.scrapes <- s }
func (p *scrapeProxy) failScrape(err error) { p.report(scrape{at: time.Now(), err: err}) }
func (p *scrapeProxy) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	up := p.upstream.Load()
	if up == nil {
		http.Error(w, "no upstream yet", http.StatusServiceUnavailable)
		p.failScrape(errors.New("no upstream yet"))
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, *up, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		p.failScrape(err)
		return
	}
	req.Header.Set("Accept", r.Header.Get("Accept")) // the format Prometheus asks for; no Accept-Encoding: Go's client unzips
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		p.failScrape(err)
		return
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		http.Error(w, fmt.Sprintf("upstream: %s %v", resp.Status, err), http.StatusBadGateway)
		p.failScrape(fmt.Errorf("upstream: %s %v", resp.Status, err))
		return
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	_, _ = w.Write(body)
	s := scrape{at: at, contentType: resp.Header.Get("Content-Type"), inFlight: -1}
	s.requests, s.accepted, s.inFlight, s.err = scrapeFigures(resp.Header, body)
	p.report(s)
}

// scrapeFigures decodes a scrape (protobuf or text) and sums the figures scrape keeps.
func scrapeFigures(h http.Header, body []byte) (requests, accepted, inFlight float64, err error) {
	inFlight = -1
	dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.ResponseFormat(h))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); errors.Is(err, io.EOF) {
			return requests, accepted, inFlight, nil
		} else if err != nil {
			return 0, 0, 0, fmt.Errorf("decode %s: %w", h.Get("Content-Type"), err)
		}
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "iotap_requests_total":
				requests += m.GetCounter().GetValue()
			case "iotap_trace_events_total":
				accepted = m.GetCounter().GetValue()
			case "iotap_requests_in_flight":
				inFlight = m.GetGauge().GetValue()
			}
		}
	}
}

// next waits for a scrape that ok accepts, for at most d.
func (p *scrapeProxy) next(t *testing.T, d time.Duration, ok func(scrape) bool, fail func(string, ...any)) scrape {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	var last scrape
	for {
		select {
		case s := <-p.scrapes:
			if ok(s) {
				return s
			}
			last = s
		case <-deadline.C:
			fail("no fitting scrape within %v; the last: %+v", d, last)
			return scrape{}
		}
	}
}

// promServer is a Prometheus server started by a test, on its own port and data directory.
type promServer struct {
	url string
	mu  sync.Mutex // guards log
	log []string
}

// startPrometheus starts Prometheus scraping target every interval, with native histograms
// on, and returns once it is ready to answer queries (it says so in its log).
func startPrometheus(t *testing.T, target string, interval time.Duration) *promServer {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	conf := fmt.Sprintf("global:\n  scrape_interval: %s\n  scrape_timeout: %s\nscrape_configs:\n  - job_name: iotap\n    static_configs:\n      - targets: ['%s']\n",
		interval, interval, target)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + freePort(t)
	p := &promServer{url: "http://" + addr}
	cmd := exec.Command("prometheus", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--enable-feature=native-histograms")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	ready, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			p.mu.Lock()
			p.log = append(p.log, sc.Text())
			p.mu.Unlock()
			if strings.Contains(sc.Text(), "Server is ready to receive web requests.") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = cmd.Wait()
	})
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("prometheus exited before it was ready:\n%s", p.logTail())
	case <-time.After(60 * time.Second):
		t.Fatalf("prometheus not ready after 60s:\n%s", p.logTail())
	}
	return p
}

// logTail returns the last lines Prometheus logged.
func (p *promServer) logTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log[max(0, len(p.log)-30):], "\n")
}

// query evaluates an instant PromQL query at time at and returns its one value.
func (p *promServer) query(q string, at time.Time) (float64, error) {
	v := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}}
	resp, err := http.Get(p.url + "/api/v1/query?" + v.Encode())
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s: %s", r.Status, r.Error)
	}
	if r.Data.ResultType != "vector" || len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("want one sample, got %s of %d: %+v", r.Data.ResultType, len(r.Data.Result), r.Data.Result)
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}
