package campaign

import (
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// startProgress shows a progress bar of a run's total ops on w when it is a terminal
// (when "auto") or always ("always"); it returns the function that ends it.
func startProgress(w io.Writer, when string, total int64, desc string, done *atomic.Uint64) func() {
	show := when == "always"
	if when == "auto" {
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			show = true
		}
	}
	if !show || total <= 0 {
		return func() {}
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("ops"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	// The bar's clock starts now: left to start at its first update, it divides the ops
	// done by then by a few microseconds.
	bar.StartWithoutRender()
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				_ = bar.Set64(int64(done.Load()))
				_ = bar.Finish()
				return
			case <-t.C:
				_ = bar.Set64(int64(done.Load()))
			}
		}
	}()
	return func() { close(quit); <-finished }
}
