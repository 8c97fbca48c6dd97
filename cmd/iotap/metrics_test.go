package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/internal/testenv"
)

func TestMetricsAddr(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{name: "none", in: "", want: ""},
		{name: "port alone", in: "9464", want: "127.0.0.1:9464"},
		{name: "empty host", in: ":9464", want: "127.0.0.1:9464"},
		{name: "loopback", in: "127.0.0.1:9464", want: "127.0.0.1:9464"},
		{name: "every interface", in: "0.0.0.0:9464", want: "0.0.0.0:9464"},
		{name: "IPv6", in: "[::1]:9464", want: "[::1]:9464"},
		{name: "host name", in: "localhost:9464", want: "localhost:9464"},
		{name: "port 0 picks one", in: "0", want: "127.0.0.1:0"},
		{name: "leading zeros", in: ":09464", want: "127.0.0.1:9464"},
		{name: "host without port", in: "10.0.0.1", err: "no port"},
		{name: "word", in: "abc", err: "no port"},
		{name: "port too large", in: ":70000", err: "the port must be a number from 0 to 65535"},
		{name: "port not a number", in: "127.0.0.1:http", err: "the port must be a number"},
		{name: "a URL", in: "http://127.0.0.1:9464", err: "too many colons"},
		{name: "space in host", in: "a b:9464", err: "not a host name or address"},
		{name: "path", in: "127.0.0.1/metrics:9464", err: "not a host name or address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := metricsAddr(tc.in)
			switch {
			case tc.err != "" && (err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("metricsAddr(%q) = %q, %v; want a usage error with %q", tc.in, got, err, tc.err)
			case tc.err == "" && (err != nil || got != tc.want):
				t.Errorf("metricsAddr(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

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
// the recording and count the job's first requests.
func TestRecordMetrics(t *testing.T) {
	requireRecord(t)
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
