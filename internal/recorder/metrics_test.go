package recorder

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
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
			case tc.err != "" && (err == nil || !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("metricsAddr(%q) = %q, %v; want a usage error with %q", tc.in, got, err, tc.err)
			case tc.err == "" && (err != nil || got != tc.want):
				t.Errorf("metricsAddr(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestListenMetricsFamily: an IPv4 address is listened on over IPv4 only, an IPv6 one over
// IPv6 only, and an unspecified one is said to be every address of its family.
func TestListenMetricsFamily(t *testing.T) {
	for _, tc := range []struct {
		addr, reach, unreached, note string
	}{
		{"0.0.0.0:0", "127.0.0.1", "::1", " (on every IPv4 address of this host)"},
		{"[::]:0", "::1", "127.0.0.1", " (on every IPv6 address of this host)"},
		{"127.0.0.1:0", "127.0.0.1", "::1", ""},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			ln, err := listenMetrics(tc.addr)
			if err != nil && strings.Contains(tc.addr, "::") {
				t.Skipf("no IPv6 on this host: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = ln.Close() }()
			port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
			c, err := net.Dial("tcp", net.JoinHostPort(tc.reach, port))
			if err != nil {
				t.Errorf("%s does not answer on %s: %v", tc.addr, tc.reach, err)
			} else {
				_ = c.Close()
			}
			if c, err := net.Dial("tcp", net.JoinHostPort(tc.unreached, port)); err == nil {
				_ = c.Close()
				t.Errorf("listening on %s answers on %s too", tc.addr, tc.unreached)
			}
			if got, want := servedAt(ln), "http://"+ln.Addr().String()+"/metrics"+tc.note; got != want {
				t.Errorf("served at %q, want %q", got, want)
			}
		})
	}
}
