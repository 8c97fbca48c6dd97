package procsample

import (
	"fmt"
	"io"
	"time"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/trace"
)

// WriteSummaries prints one line per sampled process: peak and mean resident memory, CPU
// time, and CPU seconds per GB moved when moved (the job's bytes read and written) is
// known. self names iotap's role ("recorder" or "replayer").
func WriteSummaries(w io.Writer, sums []Summary, moved uint64, self string) {
	for _, s := range sums {
		who := "storage client " + s.Name
		if s.Role == trace.RoleSelf {
			who = "iotap " + self
		}
		if s.Samples == 0 {
			_, _ = fmt.Fprintf(w, "  %s (pid %d): not sampled: %v\n", termsafe.Name(who), s.Pid, s.Err)
			continue
		}
		cpu := s.User + s.Sys
		line := fmt.Sprintf("  %s (pid %d): peak RSS %s, mean %s; CPU %s user + %s sys", who, s.Pid,
			format.Bytes(s.PeakRSS), format.Bytes(s.MeanRSS), secs(s.User), secs(s.Sys))
		if moved > 0 {
			line += fmt.Sprintf(" = %.2f CPU-s per GB moved", cpu.Seconds()/(float64(moved)/1e9))
		}
		if s.Gone {
			line += " (it exited during the run)"
		}
		_, _ = fmt.Fprintln(w, termsafe.Text(line))
	}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
