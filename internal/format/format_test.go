package format

import (
	"math"
	"testing"
)

func TestDur(t *testing.T) {
	tests := []struct {
		name string
		ns   int64
		want string
	}{
		{"zero", 0, "0"}, {"ns", 812, "812ns"}, {"us", 15_240, "15.2µs"}, {"ms", 1_300_000, "1.30ms"},
		{"s", 2_100_000_000, "2.10s"}, {"min", 185_000_000_000, "3m05s"}, {"h", 7_260_000_000_000, "2h01m"},
		{"neg", -1500, "-1.50µs"}, {"min int64", math.MinInt64, "-2562047h47m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Dur(tt.ns); got != tt.want {
				t.Errorf("Dur(%d) = %q, want %q", tt.ns, got, tt.want)
			}
		})
	}
}

func TestBytes(t *testing.T) {
	for _, tt := range []struct {
		n    uint64
		want string
	}{
		{0, "0B"}, {1023, "1023B"}, {1024, "1.00KiB"}, {1536, "1.50KiB"}, {999 << 10, "999KiB"},
		{1000 << 10, "0.98MiB"}, {3 << 20, "3.00MiB"}, {16 << 20, "16.0MiB"}, {5 << 30, "5.00GiB"},
	} {
		if got := Bytes(tt.n); got != tt.want {
			t.Errorf("Bytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
