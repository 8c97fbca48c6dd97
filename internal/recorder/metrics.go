// The --metrics endpoint: its address, the listener bound before anything is mounted, and
// what it serves (package internal/metrics).

package recorder

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/net/netutil"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs/fusectl"
	"github.com/iotap/iotap/internal/metrics"
	"github.com/iotap/iotap/internal/procsample"
	"github.com/iotap/iotap/trace"
)

// metricsAddr checks --metrics and gives it a host: a port alone ("9464") or an empty host
// (":9464") listens on 127.0.0.1 only, so that a recording's paths and rates are not
// served to the network unless a host is named ("0.0.0.0:9464" for every interface).
// Port 0 lets the kernel pick one (the URL printed names it).
func metricsAddr(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	bad := func(why string) error {
		return usageErrorf("--metrics %q: %s (want PORT, :PORT or HOST:PORT, e.g. 9464 or 127.0.0.1:9464)", s, why)
	}
	host, port := "", s
	if strings.Contains(s, ":") {
		var err error
		if host, port, err = net.SplitHostPort(s); err != nil {
			return "", bad(strings.TrimPrefix(err.Error(), "address "+s+": "))
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	switch {
	case err != nil && !strings.Contains(s, ":"):
		return "", bad("no port: a port alone is a number from 0 to 65535, a host takes :PORT")
	case err != nil:
		return "", bad("the port must be a number from 0 to 65535")
	}
	port = strconv.FormatUint(n, 10)
	if host == "" {
		host = "127.0.0.1"
	}
	if strings.ContainsAny(host, "/ ") {
		return "", bad("not a host name or address")
	}
	return net.JoinHostPort(host, port), nil
}

// metricsNetwork is the network to listen on for addr: exactly the address family of an IP
// address (0.0.0.0 is every IPv4 address, not the IPv6 ones too, as a dual-stack socket
// would make it); "tcp" for a host name, which listens on the address it resolves to.
func metricsNetwork(addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	switch ip := net.ParseIP(host); {
	case ip == nil:
		return "tcp"
	case ip.To4() != nil:
		return "tcp4"
	}
	return "tcp6"
}

// servedAt says where the metrics on ln are served: their URL, and for an unspecified
// address, what it stands for.
func servedAt(ln net.Listener) string {
	at := metrics.URL(ln)
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		if a.IP.To4() != nil {
			return at + " (on every IPv4 address of this host)"
		}
		return at + " (on every IPv6 address of this host)"
	}
	return at
}

// listenMetrics binds the metrics address before anything is mounted: an address in use,
// or one this host cannot bind, is a usage error. Nil for no --metrics.
func listenMetrics(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen(metricsNetwork(addr), addr)
	if err != nil {
		var why string
		switch {
		case errors.Is(err, syscall.EADDRINUSE):
			why = "the address is already in use (another program listens there: pick another port)"
		case errors.Is(err, syscall.EADDRNOTAVAIL):
			why = "no interface of this host has that address"
		case errors.Is(err, syscall.EACCES):
			why = "not permitted (ports below 1024 need root)"
		default:
			why = err.Error()
		}
		return nil, usageErrorf("--metrics %s: cannot listen: %s", addr, why)
	}
	return ln, nil
}

// maxMetricsConns bounds the metrics' connections open at once. Anyone who can reach the
// port can open connections, and each costs the recorder a descriptor and some memory:
// beyond the bound, connections wait in the kernel's accept queue (and past it, their
// connect waits) at no cost to the recorder, so that the descriptors the layer opens for
// the job never run out and memory stays bounded. Prometheus needs one.
const maxMetricsConns = 64

// limitMetrics bounds the connections ml hands out at once: maxMetricsConns, and at most
// one sixteenth of this process's descriptor limit.
func limitMetrics(ml net.Listener) net.Listener {
	n := maxMetricsConns
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur/16 < uint64(n) {
		n = max(int(lim.Cur/16), 1)
	}
	return netutil.LimitListener(ml, n)
}

// listenerFile returns a descriptor of ln to hand to the recorder, which serves it.
func listenerFile(ln net.Listener) (*os.File, error) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return nil, fmt.Errorf("metrics listener %T is not TCP", ln)
	}
	return tl.File()
}

// metricsSink hands resource samples to the trace writer and to the metrics.
type metricsSink struct {
	w *trace.Writer
	c *metrics.Collector
}

func (m metricsSink) AddSamples(s trace.Samples) {
	m.c.AddSamples(s) // before the writer, which keeps s.Points
	m.w.AddSamples(s)
}

var _ procsample.Sink = metricsSink{}

// registerMetrics gives the metrics their sources once the layer is mounted: the trace
// writer's totals, and the kernel's count of the requests in flight on the layer's FUSE
// connection (fusectl's waiting file, reached without leaving fusectl mounted). Where that
// cannot be read (fusectl not mounted and this process not allowed to mount it), the gauge
// is left out, and stderr says so.
func (s *session) registerMetrics() {
	src := metrics.Sources{WriterStats: s.w.Stats}
	if w, err := fusectl.OpenWaiting(s.srv.Conn()); err != nil {
		_, _ = fmt.Fprintf(s.e.Stderr, "iotap: metrics: iotap_requests_in_flight is not served: %v\n", err)
	} else {
		s.waiting = w
		src.InFlight = func() (float64, bool) {
			n, err := w.Read()
			return float64(n), err == nil
		}
	}
	s.metrics.Register(src)
}
