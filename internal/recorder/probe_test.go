package recorder

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// cancelAfterLine is the probe's stdout: it keeps what the probe prints and ends the probe
// (cancel) after its first line.
type cancelAfterLine struct {
	mu     sync.Mutex
	b      strings.Builder
	cancel context.CancelFunc
}

func (w *cancelAfterLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), "\n") {
		w.cancel()
	}
	return len(p), nil
}

// TestProbeWaitsForMount: the probe process, started before the layer is mounted, times
// nothing until the recorder's line on its stdin says the layer is there, then prints its
// calibration; when stdin ends without that line, it ends without timing anything.
func TestProbeWaitsForMount(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	args := func(path string) []string { return []string{path, "20", "4", "1ms"} }

	// An existing path would make a timed lstat fail (the layer answers ENOENT): a probe
	// that timed before its line would return that error.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := &cancelAfterLine{cancel: cancel}
	if err := RunProbe(ctx, strings.NewReader(""), out, args(dir)); err != nil || out.b.Len() != 0 {
		t.Errorf("stdin ended without a line: %v, printed %q; want nothing timed", err, out.b.String())
	}

	// Once the line comes, it times the layer's probe name (ENOENT).
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out = &cancelAfterLine{cancel: cancel}
	if err := RunProbe(ctx, strings.NewReader("\n"), out, args(missing)); err != nil {
		t.Fatalf("RunProbe: %v", err)
	}
	line, _, _ := strings.Cut(out.b.String(), "\n")
	if ns, err := strconv.ParseInt(line, 10, 64); err != nil || ns <= 0 {
		t.Errorf("the calibration printed %q, want a median in ns", out.b.String())
	}
}
