package s3store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/trace"
)

func server(t *testing.T) (*s3test.Server, Options) {
	t.Helper()
	srv, err := s3test.Start(s3test.Options{Buckets: []string{"traces"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, Options{
		Client: ClientOptions{
			Endpoint: srv.URL, Region: "us-east-1", ConnectTimeout: 2 * time.Second,
			Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKey, s3test.SecretKey, ""),
		},
		FlushInterval: 20 * time.Millisecond,
		PartSize:      minPart,
	}
}

func randBytes(n int) []byte {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func readBack(t *testing.T, url string, o Options) []byte {
	t.Helper()
	r, err := OpenWith(context.Background(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestWriteRead(t *testing.T) {
	_, o := server(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		size int
	}{
		{"small", 1000},
		{"one part", minPart - 1},
		{"several parts", 3*minPart + 12345},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url := "s3://traces/job/" + strings.ReplaceAll(tt.name, " ", "-") + ".iotap"
			w, err := Create(ctx, url, o)
			if err != nil {
				t.Fatal(err)
			}
			want := randBytes(tt.size)
			for p := want; len(p) > 0; {
				n := min(len(p), 100000+rand.IntN(200000))
				if _, err := w.Write(p[:n]); err != nil {
					t.Fatal(err)
				}
				p = p[n:]
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got := readBack(t, url, o); !bytes.Equal(got, want) {
				t.Fatalf("read back %d bytes, want %d (equal prefix: %v)", len(got), len(want), bytes.HasPrefix(want, got))
			}
			// No segment is left behind.
			c, _ := NewClient(ctx, o.Client)
			if segs, _ := listKeys(ctx, c, "traces", strings.TrimPrefix(url, "s3://traces/")+segSuffix); len(segs) != 0 {
				t.Errorf("segments left: %v", segs)
			}
		})
	}
}

// TestCrash abandons a writer without Close: Open reads what was flushed, which is
// everything written up to one flush interval before the crash.
func TestCrash(t *testing.T) {
	_, o := server(t)
	ctx := context.Background()
	url := "s3://traces/crash/host1.iotap"
	wc, err := Create(ctx, url, o)
	if err != nil {
		t.Fatal(err)
	}
	w := wc.(*Writer)
	want := randBytes(2*minPart + 777)
	if _, err := w.Write(want); err != nil {
		t.Fatal(err)
	}
	// Wait for the sealed segments and a flush of the open one.
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		ok := len(w.sealed) == 0 && w.flushed == len(w.cur)
		w.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("segments not uploaded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Crash: the process dies here, Close is never called.
	if got := readBack(t, url, o); !bytes.Equal(got, want) {
		t.Fatalf("after a crash read %d bytes, want %d", len(got), len(want))
	}
	urls, err := ListWith(ctx, "s3://traces/crash/", o)
	if err != nil || len(urls) != 1 || urls[0] != url {
		t.Fatalf("list after crash: %v %v", urls, err)
	}
}

func TestList(t *testing.T) {
	_, o := server(t)
	ctx := context.Background()
	var want []string
	for _, k := range []string{"job-1/a.iotap", "job-1/b.iotap", "job-1/sub/c.iotap", "job-1/notes.txt", "job-2/x.iotap"} {
		url := "s3://traces/" + k
		w, err := Create(ctx, url, o)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte("data"))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(k, "job-1/") && strings.HasSuffix(k, ".iotap") {
			want = append(want, url)
		}
	}
	for _, p := range []string{"s3://traces/job-1/", "s3://traces/job-1"} {
		got, err := ListWith(ctx, p, o)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("List(%s) = %v, want %v", p, got, want)
		}
	}
}

func TestBadInput(t *testing.T) {
	srv, o := server(t)
	ctx := context.Background()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := o
	dead.Client.Endpoint = "http://" + ln.Addr().String()
	_ = ln.Close()
	_ = srv
	for _, tt := range []struct {
		name string
		url  string
		o    Options
		want error
	}{
		{"dotdot", "s3://traces/a/../b.iotap", o, ErrBadURL},
		{"prefix", "s3://traces/dir/", o, ErrBadURL},
		{"no bucket", "s3:///x.iotap", o, ErrBadURL},
		{"missing bucket", "s3://nosuch/x.iotap", o, ErrNoBucket},
		{"unreachable", "s3://traces/x.iotap", dead, ErrUnreachable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			w, err := Create(ctx, tt.url, tt.o)
			if err == nil {
				_ = w.Close()
				t.Fatal("Create succeeded")
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("Create: %v, want %v", err, tt.want)
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
		})
	}
	if _, err := OpenWith(ctx, "s3://traces/missing.iotap", o); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open missing: %v", err)
	}
	if !IsURL("s3://b/k") || IsURL("/tmp/x.iotap") {
		t.Error("IsURL")
	}
}

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		code string
		want error
	}{
		{"AccessDenied", fs.ErrPermission},
		{"NoSuchBucket", ErrNoBucket},
		{"NoSuchKey", fs.ErrNotExist},
		{"SlowDown", ErrThrottled},
	} {
		err := Classify(&smithy.GenericAPIError{Code: tt.code})
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v does not wrap %v", tt.code, err, tt.want)
		}
		if Explain(err) == "" && tt.want != fs.ErrNotExist {
			t.Errorf("%s: no explanation", tt.code)
		}
	}
	if Classify(nil) != nil {
		t.Error("Classify(nil)")
	}
}

// TestCrashTrace records events through trace.Writer into an S3 writer that is never
// closed (the recorder was killed): the events flushed more than one flush interval
// before the crash are all readable, and the reader reports the missing footer.
func TestCrashTrace(t *testing.T) {
	_, o := server(t)
	ctx := context.Background()
	url := "s3://traces/crash/trace.iotap"
	up, err := Create(ctx, url, o)
	if err != nil {
		t.Fatal(err)
	}
	w, err := trace.NewWriter(up, trace.Header{Kind: "record"}, trace.WriterOptions{FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50000
	for i := 0; i < n; i++ {
		w.Append(&trace.Event{Start: int64(i), Dur: 1, Op: trace.OpRead, Size: 4096, Ret: 4096})
	}
	// The process dies some flush intervals later; read what S3 holds (polling, since a
	// loaded machine may run the flushes late).
	deadline := time.Now().Add(20 * time.Second)
	for {
		time.Sleep(10*time.Millisecond + 2*o.FlushInterval)
		got, footer, damage := countEvents(t, url, o)
		if got == n || time.Now().After(deadline) {
			if got != n {
				t.Errorf("read %d events of %d after the crash", got, n)
			}
			if footer {
				t.Error("a footer in a trace that was never closed")
			}
			t.Logf("after the crash: %d events, damage %v", got, damage)
			return
		}
	}
}

func countEvents(t *testing.T, url string, o Options) (int, bool, []error) {
	t.Helper()
	r, err := OpenWith(context.Background(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	tr, err := trace.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		_, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got++
	}
	_, ok := tr.Footer()
	return got, ok, tr.Damage()
}
