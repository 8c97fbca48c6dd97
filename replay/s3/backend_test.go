package s3

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/iotap/iotap/internal/s3req"
	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/replay"
)

// s3Server starts a local S3 server with bucket "data" for the test.
func s3Server(t *testing.T) *s3test.Server {
	t.Helper()
	srv, err := s3test.Start(s3test.Options{Buckets: []string{"data"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func s3Opts(endpoint, s3Profile string) Options {
	return Options{
		Profile: s3Profile, Endpoint: endpoint, Region: "us-east-1", ProbeTimeout: 5 * time.Second,
		Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKey, s3test.SecretKey, ""),
	}
}

func openS3(t *testing.T, endpoint, s3Profile, prefix string) *Backend {
	t.Helper()
	b, err := Open(context.Background(), "s3://data/"+prefix, s3Opts(endpoint, s3Profile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// s3Reqs returns the request counts of op in the current phase ("Type" -> count), with
// "bytes:Type" for payload bytes and "refused" for refused calls.
func s3Reqs(b *Backend, op string) map[string]int64 {
	all := b.Requests()
	cur := all[len(all)-1]
	m := map[string]int64{}
	for _, o := range cur.Ops {
		if o.Op != op {
			continue
		}
		for _, r := range o.Requests {
			m[r.Type] = int64(r.Count)
			if r.Bytes != 0 {
				m["bytes:"+r.Type] = r.Bytes
			}
		}
		if o.Refused > 0 {
			m["refused"] = int64(o.Refused)
		}
	}
	return m
}

func s3WantReqs(t *testing.T, b *Backend, op string, want map[string]int64) {
	t.Helper()
	got := s3Reqs(b, op)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s profile, %s: %s = %d, want %d (all: %v)", b.prof.name(), op, k, got[k], v, got)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok && !strings.HasPrefix(k, "bytes:") {
			t.Errorf("%s profile, %s: unexpected %s = %d (all: %v)", b.prof.name(), op, k, v, got)
		}
	}
}

// s3WriteObj writes size bytes to name in writes of chunk bytes.
func s3WriteObj(t *testing.T, b replay.Backend, name string, size, chunk int64) {
	t.Helper()
	ctx := context.Background()
	f, err := b.Open(ctx, name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC, 0o644)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	buf := make([]byte, chunk)
	for off := int64(0); off < size; off += chunk {
		n := min(chunk, size-off)
		if _, err := f.WriteAt(ctx, buf[:n], off); err != nil {
			t.Fatalf("write %s at %d: %v", name, off, err)
		}
	}
	if err := f.Close(ctx); err != nil {
		t.Fatalf("close %s: %v", name, err)
	}
}

// s3ReadAll reads name sequentially in chunk-byte reads and returns the bytes read.
func s3ReadAll(t *testing.T, b replay.Backend, name string, chunk int) int64 {
	t.Helper()
	ctx := context.Background()
	f, err := b.Open(ctx, name, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	buf := make([]byte, chunk)
	var total int64
	for {
		n, err := f.ReadAt(ctx, buf, total)
		if err != nil {
			t.Fatalf("read %s at %d: %v", name, total, err)
		}
		if n == 0 {
			break
		}
		total += int64(n)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return total
}

// TestS3Mountpoint checks the requests of the mountpoint profile call by call: writes,
// sequential and seeking reads, stat, the calls Mountpoint refuses, and local mkdir. One
// backend goes through the phases in order (each begins a tally of its own) because the
// later ones read the objects the first wrote.
func TestS3Mountpoint(t *testing.T) {
	srv := s3Server(t)
	b := openS3(t, srv.URL, "mountpoint", "mp")
	ctx := context.Background()

	// Writes: one multipart upload of 8 MiB parts, completed at close.
	b.BeginPhase("write")
	s3WriteObj(t, b, "big", 20*mib, mib)
	s3WantReqs(t, b, "open", map[string]int64{"HeadObject": 1, "ListObjectsV2": 1})
	s3WantReqs(t, b, "write", map[string]int64{"CreateMultipartUpload": 1, "UploadPart": 2, "bytes:UploadPart": 16 * mib})
	s3WantReqs(t, b, "close", map[string]int64{"UploadPart": 1, "CompleteMultipartUpload": 1, "bytes:UploadPart": 4 * mib})

	// Sequential read of 20 MiB: windows of 1.125, 2.25, 4.5, 8 MiB, then the last 4.125.
	b.BeginPhase("read")
	if n := s3ReadAll(t, b, "big", 128*kib); n != 20*mib {
		t.Fatalf("read %d bytes, want %d", n, 20*mib)
	}
	s3WantReqs(t, b, "read", map[string]int64{"GetObject": 5, "bytes:GetObject": 20 * mib})

	// A far backward seek restarts the stream at the first window.
	b.BeginPhase("seek")
	f, err := b.Open(ctx, "big", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for _, off := range []int64{18 * mib, 0} {
		if n, err := f.ReadAt(ctx, buf, off); err != nil || n != len(buf) {
			t.Fatalf("read at %d: %d, %v", off, n, err)
		}
	}
	_ = f.Close(ctx)
	// Each start fetches the first window only (the reads stay in its first half).
	s3WantReqs(t, b, "read", map[string]int64{"GetObject": 2, "bytes:GetObject": 2 * (mib + 128*kib)})

	// A forward seek within 16 MiB reads through: windows 1.125, 2.25, 4.5 MiB.
	b.BeginPhase("forward")
	f, err = b.Open(ctx, "big", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 5 * mib} {
		if n, err := f.ReadAt(ctx, buf, off); err != nil || n != len(buf) {
			t.Fatalf("read at %d: %d, %v", off, n, err)
		}
	}
	_ = f.Close(ctx)
	s3WantReqs(t, b, "read", map[string]int64{"GetObject": 3, "bytes:GetObject": 7*mib + 7*128*kib})

	// Stat: HeadObject and ListObjectsV2(max-keys 1) per lookup.
	b.BeginPhase("stat")
	if a, err := b.Lstat(ctx, "big"); err != nil || a.Size != 20*mib || a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		t.Fatalf("lstat big: %+v %v", a, err)
	}
	if _, err := b.Lstat(ctx, "missing"); replay.Errno(err) != syscall.ENOENT {
		t.Fatalf("lstat missing: %v, want ENOENT", err)
	}
	s3WantReqs(t, b, "lstat", map[string]int64{"HeadObject": 2, "ListObjectsV2": 2})

	// What Mountpoint cannot do fails as Mountpoint fails, with no request.
	b.BeginPhase("refused")
	if err := b.Rename(ctx, "big", "big2", 0); replay.Errno(err) != syscall.EPERM {
		t.Errorf("rename: %v, want EPERM", err)
	}
	s3WantReqs(t, b, "rename", map[string]int64{"refused": 1})
	if _, err := b.Open(ctx, "big", syscall.O_WRONLY, 0); replay.Errno(err) != syscall.EPERM {
		t.Errorf("open existing for writing without O_TRUNC: %v, want EPERM", err)
	}
	w, err := b.Open(ctx, "new", syscall.O_WRONLY|syscall.O_CREAT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(ctx, buf, 100000); replay.Errno(err) != syscall.EINVAL {
		t.Errorf("out-of-order write: %v, want EINVAL", err)
	}
	// Visible (locally) while written, then as an object after close.
	if a, err := b.Lstat(ctx, "new"); err != nil || a.Size != 4096 {
		t.Errorf("lstat of a file being written: %+v %v", a, err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s3WantReqs(t, b, "write", map[string]int64{"refused": 1})
	s3WantReqs(t, b, "close", map[string]int64{"CreateMultipartUpload": 1, "UploadPart": 1, "CompleteMultipartUpload": 1})
	if err := b.Chmod(ctx, "big", 0o600); replay.Errno(err) != syscall.EPERM {
		t.Errorf("chmod: %v, want EPERM", err)
	}
	if err := b.Symlink(ctx, "big", "ln"); replay.Errno(err) != syscall.EPERM {
		t.Errorf("symlink: %v, want EPERM", err)
	}

	// mkdir is local; readdir merges it with the listing.
	b.BeginPhase("dirs")
	if err := b.Mkdir(ctx, "d", 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := b.Open(ctx, "", syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := s3ReadNames(t, d)
	if strings.Join(names, ",") != ".,..,big,d,new" {
		t.Errorf("readdir: %v", names)
	}
	s3WantReqs(t, b, "readdir", map[string]int64{"ListObjectsV2": 1})
	s3WantReqs(t, b, "mkdir", map[string]int64{"HeadObject": 1, "ListObjectsV2": 1})
}

func s3ReadNames(t *testing.T, d replay.File) []string {
	t.Helper()
	ctx := context.Background()
	buf := make([]byte, 4096)
	var names []string
	for off := int64(0); ; off++ {
		n, err := d.ReadDir(ctx, buf, off)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		for p := 0; p < n; {
			rec := int(buf[p+16]) | int(buf[p+17])<<8
			name := buf[p+19 : p+rec]
			if i := strings.IndexByte(string(name), 0); i >= 0 {
				name = name[:i]
			}
			names = append(names, string(name))
			p += rec
		}
	}
	_ = d.Close(ctx)
	return names
}

func TestS3S3FS(t *testing.T) {
	srv := s3Server(t)
	b := openS3(t, srv.URL, "s3fs", "fs")
	ctx := context.Background()

	b.BeginPhase("prepare")
	if err := b.Mkdir(ctx, "d", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c", "e", "f"} {
		s3WriteObj(t, b, "d/"+n, 1000, 1000)
	}

	// readdir = 1 List + 1 HEAD per entry; the stat cache then answers lstat.
	b.BeginPhase("readdir")
	d, err := b.Open(ctx, "d", syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s3ReadNames(t, d), ","); got != ".,..,a,b,c,e,f" {
		t.Errorf("readdir: %s", got)
	}
	s3WantReqs(t, b, "readdir", map[string]int64{"ListObjectsV2": 1, "HeadObject": 5})
	// Open of the directory: HEAD d (miss), HEAD d/ (the marker).
	s3WantReqs(t, b, "open", map[string]int64{"HeadObject": 2})
	if a, err := b.Lstat(ctx, "d/c"); err != nil || a.Size != 1000 {
		t.Fatalf("lstat d/c: %+v %v", a, err)
	}
	s3WantReqs(t, b, "lstat", map[string]int64{})

	// rename = copy + delete.
	b.BeginPhase("rename")
	if err := b.Rename(ctx, "d/a", "d/z", 0); err != nil {
		t.Fatal(err)
	}
	s3WantReqs(t, b, "rename", map[string]int64{"CopyObject": 1, "DeleteObject": 1})
	if _, err := b.Lstat(ctx, "d/a"); replay.Errno(err) != syscall.ENOENT {
		t.Errorf("lstat of the old name: %v, want ENOENT", err)
	}
	if a, err := b.Lstat(ctx, "d/z"); err != nil || a.Size != 1000 {
		t.Errorf("lstat of the new name: %+v %v", a, err)
	}

	// Writes: an empty object at create, the data at close; 10 MiB parts above 10 MiB.
	b.BeginPhase("write")
	s3WriteObj(t, b, "small", 3*mib, mib)
	s3WantReqs(t, b, "open", map[string]int64{"HeadObject": 2, "ListObjectsV2": 1, "PutObject": 1})
	s3WantReqs(t, b, "write", map[string]int64{})
	s3WantReqs(t, b, "close", map[string]int64{"PutObject": 1, "bytes:PutObject": 3 * mib})
	b.BeginPhase("write-big")
	s3WriteObj(t, b, "big", 25*mib, mib)
	s3WantReqs(t, b, "close", map[string]int64{"CreateMultipartUpload": 1, "UploadPart": 3, "CompleteMultipartUpload": 1, "bytes:UploadPart": 25 * mib})

	// Random writes into an existing object: download, then upload at close.
	b.BeginPhase("modify")
	f, err := b.Open(ctx, "small", syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, make([]byte, 10), 12345); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s3WantReqs(t, b, "open", map[string]int64{"GetObject": 1, "bytes:GetObject": 3 * mib})
	s3WantReqs(t, b, "close", map[string]int64{"PutObject": 1})

	// Reads fetch only what was not fetched before.
	b.BeginPhase("read")
	r, err := b.Open(ctx, "big", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, mib)
	for _, off := range []int64{0, mib, 0, mib / 2} {
		if n, err := r.ReadAt(ctx, buf, off); err != nil || n != mib {
			t.Fatalf("read at %d: %d %v", off, n, err)
		}
	}
	_ = r.Close(ctx)
	s3WantReqs(t, b, "read", map[string]int64{"GetObject": 2, "bytes:GetObject": 2 * mib})

	// chmod: CopyObject onto itself with the mode in metadata.
	b.BeginPhase("chmod")
	if err := b.Chmod(ctx, "small", 0o600); err != nil {
		t.Fatal(err)
	}
	s3WantReqs(t, b, "chmod", map[string]int64{"CopyObject": 1})
	if a, err := b.Lstat(ctx, "small"); err != nil || a.Mode != syscall.S_IFREG|0o600 {
		t.Errorf("mode after chmod: %o %v", a.Mode, err)
	}
	if err := b.Link(ctx, "small", "hard"); replay.Errno(err) != syscall.ENOTSUP {
		t.Errorf("link: %v, want ENOTSUP", err)
	}
}

func TestS3SDK(t *testing.T) {
	srv := s3Server(t)
	b := openS3(t, srv.URL, "sdk", "sdk")
	ctx := context.Background()

	b.BeginPhase("write")
	s3WriteObj(t, b, "small", 3*mib, mib)
	s3WantReqs(t, b, "close", map[string]int64{"PutObject": 1, "bytes:PutObject": 3 * mib})
	b.BeginPhase("write-big")
	s3WriteObj(t, b, "big", 12*mib, mib)
	s3WantReqs(t, b, "write", map[string]int64{"CreateMultipartUpload": 1, "UploadPart": 2, "bytes:UploadPart": 10 * mib})
	s3WantReqs(t, b, "close", map[string]int64{"UploadPart": 1, "CompleteMultipartUpload": 1, "bytes:UploadPart": 2 * mib})

	// One ranged GET per read.
	b.BeginPhase("read")
	if n := s3ReadAll(t, b, "big", mib); n != 12*mib {
		t.Fatalf("read %d bytes", n)
	}
	s3WantReqs(t, b, "read", map[string]int64{"GetObject": 12, "bytes:GetObject": 12 * mib})
	s3WantReqs(t, b, "open", map[string]int64{"HeadObject": 1})

	b.BeginPhase("rename")
	if err := b.Rename(ctx, "small", "moved", 0); err != nil {
		t.Fatal(err)
	}
	s3WantReqs(t, b, "rename", map[string]int64{"HeadObject": 1, "CopyObject": 1, "DeleteObject": 1})
	if err := b.Chmod(ctx, "moved", 0o600); replay.Errno(err) != syscall.ENOTSUP {
		t.Errorf("chmod: %v, want ENOTSUP", err)
	}
	s3WantReqs(t, b, "chmod", map[string]int64{"refused": 1})

	// Each sidecar holds the phases since the previous one.
	dir := t.TempDir()
	for i, want := range [][]string{{"open", "write", "write-big", "read", "rename"}, {"run2"}} {
		if i == 1 {
			replay.Decorate(b, replay.Chain()).BeginPhase("run2")
		}
		path := fmt.Sprintf("%s/%d.json", dir, i)
		if err := s3req.Write(path, b.TakeRequests()); err != nil {
			t.Fatal(err)
		}
		ph, err := s3req.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range ph {
			got = append(got, p.Phase)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("sidecar %d phases %v, want %v", i, got, want)
		}
	}
}

// TestS3Cleanup checks that Close deletes what the backend created, and Keep keeps it.
func TestS3Cleanup(t *testing.T) {
	srv := s3Server(t)
	ctx := context.Background()
	for _, keep := range []bool{false, true} {
		o := s3Opts(srv.URL, "sdk")
		o.Keep = keep
		prefix := "clean-" + map[bool]string{false: "delete", true: "keep"}[keep]
		b, err := Open(ctx, "s3://data/"+prefix, o)
		if err != nil {
			t.Fatal(err)
		}
		s3WriteObj(t, b, "x", 100, 100)
		if err := b.Mkdir(ctx, "dir", 0o755); err != nil {
			t.Fatal(err)
		}
		// An unfinished upload is aborted at Close.
		f, err := b.Open(ctx, "partial", syscall.O_WRONLY|syscall.O_CREAT, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(ctx, make([]byte, 6*mib), 0); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		check := openS3(t, srv.URL, "sdk", prefix)
		empty, err := check.IsEmpty(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if empty == keep {
			t.Errorf("keep=%v: prefix empty after close = %v", keep, empty)
		}
	}
}

func TestS3BadInput(t *testing.T) {
	srv := s3Server(t)
	ctx := context.Background()

	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	_ = ln.Close()

	for _, tt := range []struct {
		name, spec, endpoint string
		want                 error
		text                 string
	}{
		{name: "dotdot", spec: "s3://data/a/../b", endpoint: srv.URL, want: s3store.ErrBadURL, text: `".."`},
		{name: "dot", spec: "s3://data/./b", endpoint: srv.URL, want: s3store.ErrBadURL},
		{name: "empty bucket", spec: "s3:///prefix", endpoint: srv.URL, want: s3store.ErrBadURL, text: "empty bucket"},
		{name: "no prefix", spec: "s3://data/", endpoint: srv.URL, want: s3store.ErrBadURL, text: "key prefix"},
		{name: "missing bucket", spec: "s3://nosuch/p", endpoint: srv.URL, want: s3store.ErrNoBucket, text: "bucket does not exist"},
		{name: "unreachable", spec: "s3://data/p", endpoint: dead, want: s3store.ErrUnreachable, text: "could not be reached"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := s3Opts(tt.endpoint, "mountpoint")
			start := time.Now()
			b, err := Open(ctx, tt.spec, o)
			if err == nil {
				_ = b.Close()
				t.Fatalf("Open(%q) succeeded", tt.spec)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("error %v, want one wrapping %v", err, tt.want)
			}
			if tt.text != "" && !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %q does not say %q", err, tt.text)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
	if _, err := Open(ctx, "s3://data/p", Options{Profile: "goofys"}); err == nil || !strings.Contains(err.Error(), "unknown S3 profile") {
		t.Errorf("unknown profile: %v", err)
	}
	// Names that would leave the prefix are refused before any request.
	b := openS3(t, srv.URL, "s3fs", "esc")
	for _, n := range []string{"../x", "a/../../x", "/abs"} {
		if _, err := b.Lstat(ctx, n); !errors.Is(err, replay.ErrEscape) {
			t.Errorf("lstat %q: %v, want replay.ErrEscape", n, err)
		}
	}
}

// TestS3Classify checks the classification of SDK errors that the fake server cannot
// produce.
func TestS3Classify(t *testing.T) {
	for _, tt := range []struct {
		code  string
		want  error
		errno syscall.Errno
	}{
		{"AccessDenied", fs.ErrPermission, syscall.EACCES},
		{"NoSuchBucket", s3store.ErrNoBucket, syscall.EIO},
		{"NoSuchKey", fs.ErrNotExist, syscall.ENOENT},
		{"SlowDown", s3store.ErrThrottled, syscall.EIO},
	} {
		t.Run(tt.code, func(t *testing.T) {
			s := &Backend{}
			err := s.cls("get k", &smithy.GenericAPIError{Code: tt.code, Message: "m"})
			if !errors.Is(err, tt.want) {
				t.Errorf("%v does not wrap %v", err, tt.want)
			}
			if got := replay.Errno(err); got != tt.errno {
				t.Errorf("errno %v, want %v", got, tt.errno)
			}
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != tt.code {
				t.Errorf("the SDK error is lost: %v", err)
			}
		})
	}
	if err := (&Backend{}).cls("get", &smithy.GenericAPIError{Code: "SlowDown"}); !errors.Is(err, replay.ErrTransient) {
		t.Errorf("SlowDown is not transient: %v", err)
	}
}

// TestS3Throttling puts a proxy that answers every third request with 503 SlowDown in
// front of the server: the SDK retries, and the retries and throttles are counted.
func TestS3Throttling(t *testing.T) {
	srv := s3Server(t)
	u, _ := url.Parse(srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(u)
	var n atomic.Int64
	var slowed atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 == 0 {
			slowed.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer ts.Close()
	o := s3Opts(ts.URL, "sdk")
	o.MaxAttempts = 5
	b, err := Open(context.Background(), "s3://data/thr", o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	for i := 0; i < 4; i++ {
		s3WriteObj(t, b, "f"+string(rune('0'+i)), 1000, 1000)
	}
	st := b.Requests()
	var retries, throttled uint64
	for _, p := range st {
		retries += p.Retries
		throttled += p.Throttled
	}
	if throttled == 0 || retries == 0 {
		t.Fatalf("throttled %d, retries %d; the proxy slowed %d requests", throttled, retries, slowed.Load())
	}
	// The probe at open is counted under "-" in the first phase; everything was slowed
	// once at most, so every throttle was followed by a retry.
	if throttled != uint64(slowed.Load()) {
		t.Errorf("counted %d throttles, the proxy sent %d", throttled, slowed.Load())
	}
	t.Logf("requests %d, throttled %d, retries %d", n.Load(), throttled, retries)
}

// TestS3DeniedAndSilent checks the errors of Open for an endpoint that denies access
// (a proxy answering 403 AccessDenied) and one that accepts connections but never
// answers: both are clear, and the silent one does not hang past ProbeTimeout.
func TestS3DeniedAndSilent(t *testing.T) {
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
	}))
	defer denied.Close()
	ctx := context.Background()
	_, err := Open(ctx, "s3://data/p", s3Opts(denied.URL, "sdk"))
	if !errors.Is(err, fs.ErrPermission) || replay.Errno(err) != syscall.EACCES || !strings.Contains(err.Error(), "access denied") {
		t.Errorf("access denied: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer func() { _ = c.Close() }() // hold it open, say nothing
		}
	}()
	o := s3Opts("http://"+ln.Addr().String(), "sdk")
	o.ProbeTimeout = time.Second
	start := time.Now()
	_, err = Open(ctx, "s3://data/p", o)
	if err == nil {
		t.Fatal("a silent endpoint was accepted")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("silent endpoint: took %v", d)
	}
	t.Logf("silent endpoint after %v: %v", time.Since(start).Round(time.Millisecond), err)
}
