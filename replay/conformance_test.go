package replay_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/replay/backendtest"
)

func newDir(t *testing.T) replay.Backend {
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := replay.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDirConformance(t *testing.T) {
	backendtest.Run(t, backendtest.All, newDir)
}

func TestDecoratedConformance(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))
	backendtest.Run(t, backendtest.All, func(t *testing.T) replay.Backend {
		return replay.Decorate(newDir(t), replay.Chain(replay.Log(log), replay.Retry(3, time.Millisecond), replay.Limit(0, 4)))
	})
}

// flaky fails every call with ErrTransient until it has failed n times.
func TestRetry(t *testing.T) {
	var calls atomic.Int32
	mw := replay.Retry(4, time.Microsecond)
	fail := func(n int32) func(context.Context) error {
		return func(context.Context) error {
			if calls.Add(1) <= n {
				return replay.ErrTransient
			}
			return nil
		}
	}
	tests := []struct {
		name    string
		idem    bool
		failing int32
		wantErr bool
		calls   int32
	}{
		{"idempotent recovers", true, 2, false, 3},
		{"idempotent gives up", true, 10, true, 4},
		{"not idempotent is not retried", false, 1, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls.Store(0)
			err := mw(context.Background(), replay.Call{Method: "Lstat", Idempotent: tt.idem}, fail(tt.failing))
			if (err != nil) != tt.wantErr || calls.Load() != tt.calls {
				t.Fatalf("err=%v calls=%d, want err=%v calls=%d", err, calls.Load(), tt.wantErr, tt.calls)
			}
			if err != nil && !errors.Is(err, replay.ErrTransient) {
				t.Fatalf("error %v", err)
			}
		})
	}
}

func TestLimitRate(t *testing.T) {
	mw := replay.Limit(1000, 0)
	t0 := time.Now()
	for i := 0; i < 50; i++ {
		_ = mw(context.Background(), replay.Call{}, func(context.Context) error { return nil })
	}
	if d := time.Since(t0); d < 45*time.Millisecond {
		t.Fatalf("50 calls at 1000/s took %v", d)
	}
}
