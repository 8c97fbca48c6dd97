// Package format writes numbers for people, the same way in every report and summary
// iotap prints: durations and byte counts with three significant digits and binary units,
// shares as percentages, counts with thousands separators.
package format

import (
	"fmt"
	"math"
	"strings"
)

// Dur formats nanoseconds for people: 812ns, 15.2µs, 1.30ms, 2.10s, 3m05s.
func Dur(ns int64) string {
	f := float64(ns)
	switch {
	case ns == math.MinInt64:
		return "-" + Dur(math.MaxInt64)
	case ns < 0:
		return "-" + Dur(-ns)
	case ns == 0:
		return "0"
	case ns < 1_000:
		return fmt.Sprintf("%dns", ns)
	case ns < 1_000_000:
		return sig3(f/1e3) + "µs"
	case ns < 1_000_000_000:
		return sig3(f/1e6) + "ms"
	case ns < 60_000_000_000:
		return sig3(f/1e9) + "s"
	case ns < 3_600_000_000_000:
		s := ns / 1e9
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	s := ns / 1e9
	return fmt.Sprintf("%dh%02dm", s/3600, (s/60)%60)
}

// sig3 prints f (>= 1, < 1000) with three significant digits.
func sig3(f float64) string {
	switch {
	case f < 10:
		return fmt.Sprintf("%.2f", f)
	case f < 100:
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprintf("%.0f", f)
}

// Bytes formats a byte count with binary units: 512B, 4.00KiB, 1.25GiB.
func Bytes(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	f := float64(n) / 1024
	i := 0
	for f >= 1000 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return sig3(f) + units[i]
}

// Pct formats a share (0..1) as a percentage.
func Pct(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	p := f * 100
	if p > 0 && p < 0.1 {
		return "<0.1%"
	}
	return fmt.Sprintf("%.1f%%", p)
}

// Count formats an integer with thousands separators.
func Count(n uint64) string {
	s := fmt.Sprintf("%d", n)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}
