package recorder

import (
	"errors"
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
