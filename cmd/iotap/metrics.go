// The --metrics endpoint of record and mount: its address, the listener bound before
// anything is mounted, and what it serves (package internal/metrics).

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/iotap/iotap/internal/metrics"
	"github.com/iotap/iotap/internal/procsample"
	"github.com/iotap/iotap/internal/sysinfo"
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

// listenMetrics binds the metrics address before anything is mounted: an address in use,
// or one this host cannot bind, is a usage error. Nil for no --metrics.
func listenMetrics(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
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

// fuseInFlight returns a reader of the requests in flight on the FUSE connection mounted at
// mountPoint (a real path): the kernel's count of requests queued for the server or being
// served, /sys/fs/fuse/connections/N/waiting (the fusectl file system). The layer keeps no
// such count itself: counting there would put two atomic adds on every request. It returns
// nil when the connection or fusectl cannot be found.
func fuseInFlight(mountPoint string) func() (float64, bool) {
	m, ok, err := sysinfo.IsMountPoint(mountPoint)
	if err != nil || !ok || m.Major != 0 {
		return nil // FUSE mounts get an anonymous device (major 0)
	}
	path := "/sys/fs/fuse/connections/" + strconv.FormatUint(uint64(m.Minor&0xff|(m.Minor&^0xff)<<12), 10) + "/waiting"
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	return func() (float64, bool) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, false // the connection is gone (unmounted)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return float64(n), err == nil
	}
}
