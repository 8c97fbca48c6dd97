package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Path is where the metrics are served.
const Path = "/metrics"

// Serve serves the metrics at Path on ln, on a goroutine of its own, until stop is called;
// stop closes ln. Other paths answer 404.
func (c *Collector) Serve(ln net.Listener, log *slog.Logger) (stop func()) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, c.Handler())
	// A connection that sends no request, or keeps one open without using it, is closed
	// before long: the caller bounds the connections open at once (a scraper needs one).
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       30 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics: serve", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return func() {
		// A scrape under way finishes; a stuck one does not hold iotap up.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		<-done
	}
}

// URL is the address of the metrics served on ln.
func URL(ln net.Listener) string { return "http://" + ln.Addr().String() + Path }
