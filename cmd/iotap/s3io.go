package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/trace"
)

// traceInputs expands trace arguments: an s3://bucket/prefix/ (ending in "/") becomes the
// traces below it; everything else is kept as it is.
func traceInputs(ctx context.Context, args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if !s3store.IsURL(a) || !strings.HasSuffix(a, "/") {
			out = append(out, a)
			continue
		}
		urls, err := s3store.List(ctx, a)
		if err != nil {
			return nil, err
		}
		if len(urls) == 0 {
			return nil, fmt.Errorf("no traces (*.iotap) below %s", a)
		}
		out = append(out, urls...)
	}
	return out, nil
}

// openTraceAny opens a trace from a file, "-" (stdin), or an s3:// URL. Finish with the
// returned close function (it closes the reader and, for S3, the object's body).
func openTraceAny(ctx context.Context, e *env, name string) (*trace.Reader, func() error, error) {
	if !s3store.IsURL(name) {
		var r *trace.Reader
		var err error
		if name == "-" {
			r, err = trace.NewReader(e.stdin)
		} else {
			r, err = trace.Open(name)
		}
		if err != nil {
			return nil, nil, err
		}
		return r, r.Close, nil
	}
	rc, err := s3store.Open(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	r, err := trace.NewReader(rc)
	if err != nil {
		_ = rc.Close()
		return nil, nil, err
	}
	return r, func() error { return errors.Join(r.Close(), rc.Close()) }, nil
}

// createTraceAny creates a trace file, or an s3:// object uploaded as it is written (a
// crash loses at most the last flush interval: see internal/s3store). Finish with the
// returned close function instead of w.Close: for S3 it also completes the upload.
func createTraceAny(ctx context.Context, name string, h trace.Header, o trace.WriterOptions) (w *trace.Writer, closeTrace func() error, err error) {
	if !s3store.IsURL(name) {
		w, err := trace.Create(name, h, o)
		if err != nil {
			return nil, nil, err
		}
		return w, w.Close, nil
	}
	up, err := s3store.Create(ctx, name, s3store.Options{Log: o.Logger})
	if err != nil {
		return nil, nil, err
	}
	w, err = trace.NewWriter(up, h, o)
	if err != nil {
		_ = up.Close()
		return nil, nil, err
	}
	return w, func() error { return errors.Join(w.Close(), up.Close()) }, nil
}
