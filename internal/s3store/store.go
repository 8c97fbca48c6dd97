package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// Options configure Create, and the client of Open and List.
type Options struct {
	Client ClientOptions // endpoint defaults to EndpointFromEnv()
	// FlushInterval is how often the open segment is uploaded (default 5s).
	FlushInterval time.Duration
	// PartSize is the size at which a segment is sealed (default 8 MiB, minimum 5 MiB).
	PartSize int64
	// Backlog is how many sealed segments may wait for upload before Write blocks
	// (default 4).
	Backlog int
	Log     *slog.Logger
}

const minPart = 5 << 20

func (o *Options) defaults() {
	if o.FlushInterval <= 0 {
		o.FlushInterval = 5 * time.Second
	}
	if o.PartSize <= 0 {
		o.PartSize = 8 << 20
	}
	o.PartSize = max(o.PartSize, minPart)
	if o.Backlog <= 0 {
		o.Backlog = 4
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Client.Endpoint == "" {
		o.Client.Endpoint = EndpointFromEnv()
	}
}

// segSuffix is appended to a trace key to name its segments.
const segSuffix = ".seg/"

func segKey(key string, n int) string { return fmt.Sprintf("%s%s%06d", key, segSuffix, n) }

// Writer uploads a trace as it is written (see "Traces written to S3").
type Writer struct {
	client *s3.Client
	bucket string
	key    string
	url    string
	o      Options

	mu      sync.Mutex // guards the fields below; cond waits on it
	cond    *sync.Cond
	cur     []byte // the open segment
	seq     int    // number of the open segment (from 1)
	flushed int    // bytes of cur uploaded
	sealed  []segment
	err     error // first upload error; Write and Close return it
	closing bool

	done chan struct{} // closed when the uploader goroutine ends
}

type segment struct {
	n    int
	data []byte
}

// Create starts writing a trace to url (s3://bucket/key; not a prefix). It checks the
// bucket is reachable and writable by uploading the (empty) first segment.
func Create(ctx context.Context, url string, o Options) (io.WriteCloser, error) {
	o.defaults()
	bucket, key, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	if key == "" || strings.HasSuffix(key, "/") {
		return nil, fmt.Errorf("%w %q: give an object key, not a prefix", ErrBadURL, url)
	}
	client, err := NewClient(ctx, o.Client)
	if err != nil {
		return nil, err
	}
	w := &Writer{client: client, bucket: bucket, key: key, url: url, o: o, seq: 1, done: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	if err := w.put(ctx, segKey(key, 1), nil); err != nil {
		return nil, fmt.Errorf("s3: create trace %s: %w", url, err)
	}
	go w.uploader()
	return w, nil
}

func (w *Writer) put(ctx context.Context, key string, data []byte) error {
	_, err := w.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &w.bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		err = Classify(err)
		if why := Explain(err); why != "" {
			return fmt.Errorf("%s: %w", why, err)
		}
		return err
	}
	return nil
}

// Write implements io.Writer. It copies p and returns at once unless Backlog sealed
// segments are still waiting for upload.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if w.closing {
		return 0, fmt.Errorf("s3: write trace %s: %w", w.url, fs.ErrClosed)
	}
	n := len(p)
	for len(p) > 0 {
		room := int(w.o.PartSize) - len(w.cur)
		k := min(room, len(p))
		w.cur = append(w.cur, p[:k]...)
		p = p[k:]
		if len(w.cur) >= int(w.o.PartSize) {
			w.sealed = append(w.sealed, segment{n: w.seq, data: w.cur})
			w.seq++
			w.cur, w.flushed = nil, 0
			w.cond.Broadcast()
			for len(w.sealed) > w.o.Backlog && w.err == nil {
				w.cond.Wait()
			}
			if w.err != nil {
				return n - len(p), w.err
			}
		}
	}
	return n, nil
}

// uploader uploads sealed segments as they come and the open one every FlushInterval.
func (w *Writer) uploader() {
	defer close(w.done)
	tick := time.NewTicker(w.o.FlushInterval)
	defer tick.Stop()
	wake := make(chan struct{}, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-tick.C:
				select {
				case wake <- struct{}{}:
				default:
				}
				w.mu.Lock()
				w.cond.Broadcast()
				w.mu.Unlock()
			case <-stop:
				return
			}
		}
	}()
	ctx := context.Background()
	for {
		w.mu.Lock()
		for len(w.sealed) == 0 && !w.closing && len(wake) == 0 {
			w.cond.Wait()
		}
		if len(w.sealed) > 0 {
			s := w.sealed[0]
			w.mu.Unlock()
			err := w.put(ctx, segKey(w.key, s.n), s.data)
			w.mu.Lock()
			if err != nil && w.err == nil {
				w.err = fmt.Errorf("s3: upload trace segment %d of %s: %w", s.n, w.url, err)
			}
			w.sealed = w.sealed[1:]
			w.cond.Broadcast()
			failed := w.err != nil
			w.mu.Unlock()
			if failed {
				return
			}
			continue
		}
		if w.closing {
			w.mu.Unlock()
			return
		}
		<-wake
		if len(w.cur) == w.flushed {
			w.mu.Unlock()
			continue
		}
		n, data := w.seq, append([]byte(nil), w.cur...)
		w.mu.Unlock()
		err := w.put(ctx, segKey(w.key, n), data)
		w.mu.Lock()
		if err != nil && w.err == nil {
			w.err = fmt.Errorf("s3: upload trace segment %d of %s: %w", n, w.url, err)
		}
		if w.seq == n {
			w.flushed = len(data)
		}
		w.mu.Unlock()
	}
}

// Close uploads what is left, composes the trace object and deletes the segments.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return fmt.Errorf("s3: close trace %s: %w", w.url, fs.ErrClosed)
	}
	w.closing = true
	w.cond.Broadcast()
	w.mu.Unlock()
	<-w.done
	if w.err != nil {
		return fmt.Errorf("%w (segments %s%s* hold what was uploaded)", w.err, w.key, segSuffix)
	}
	ctx := context.Background()
	if w.seq == 1 {
		if err := w.put(ctx, w.key, w.cur); err != nil {
			return fmt.Errorf("s3: write trace %s: %w (segment %s holds it up to the last flush)", w.url, err, segKey(w.key, 1))
		}
		return w.deleteSegments(ctx, 1)
	}
	if err := w.compose(ctx); err != nil {
		return fmt.Errorf("s3: compose trace %s: %w (segments %s%s* hold all of it)", w.url, err, w.key, segSuffix)
	}
	return w.deleteSegments(ctx, w.seq-1)
}

// compose writes KEY from the sealed segments 1..seq-1 and the open one in memory.
func (w *Writer) compose(ctx context.Context) error {
	out, err := w.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &w.bucket, Key: &w.key})
	if err != nil {
		return Classify(err)
	}
	id := out.UploadId
	abort := func(err error) error {
		_, _ = w.client.AbortMultipartUpload(context.Background(), &s3.AbortMultipartUploadInput{Bucket: &w.bucket, Key: &w.key, UploadId: id})
		return err
	}
	var parts []types.CompletedPart
	serverCopy := true
	for n := 1; n < w.seq; n++ {
		src := segKey(w.key, n)
		var etag *string
		if serverCopy {
			cp, err := w.client.UploadPartCopy(ctx, &s3.UploadPartCopyInput{
				Bucket: &w.bucket, Key: &w.key, UploadId: id, PartNumber: aws.Int32(int32(n)),
				CopySource: aws.String(w.bucket + "/" + escapeKey(src)),
			})
			if err == nil && cp.CopyPartResult != nil {
				etag = cp.CopyPartResult.ETag
			} else if err != nil && !copyUnsupported(err) {
				return abort(Classify(err))
			} else {
				serverCopy = false
				w.o.Log.Info("s3: server-side part copy unavailable; composing the trace by download and upload", "url", w.url)
			}
		}
		if etag == nil {
			g, err := w.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &w.bucket, Key: &src})
			if err != nil {
				return abort(Classify(err))
			}
			data, err := io.ReadAll(g.Body)
			_ = g.Body.Close()
			if err != nil {
				return abort(err)
			}
			up, err := w.client.UploadPart(ctx, &s3.UploadPartInput{
				Bucket: &w.bucket, Key: &w.key, UploadId: id, PartNumber: aws.Int32(int32(n)),
				Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
			})
			if err != nil {
				return abort(Classify(err))
			}
			etag = up.ETag
		}
		parts = append(parts, types.CompletedPart{ETag: etag, PartNumber: aws.Int32(int32(n))})
	}
	if len(w.cur) > 0 {
		up, err := w.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &w.bucket, Key: &w.key, UploadId: id, PartNumber: aws.Int32(int32(w.seq)),
			Body: bytes.NewReader(w.cur), ContentLength: aws.Int64(int64(len(w.cur))),
		})
		if err != nil {
			return abort(Classify(err))
		}
		parts = append(parts, types.CompletedPart{ETag: up.ETag, PartNumber: aws.Int32(int32(w.seq))})
	}
	_, err = w.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &w.bucket, Key: &w.key, UploadId: id, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return abort(Classify(err))
	}
	return nil
}

// copyUnsupported reports whether an UploadPartCopy failure means the server cannot copy
// parts (rather than a permission or a missing object).
func copyUnsupported(err error) bool {
	c := Classify(err)
	if errors.Is(c, fs.ErrPermission) || errors.Is(c, ErrNoBucket) || errors.Is(c, ErrUnreachable) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ae smithy.APIError
	return errors.As(err, &ae)
}

func (w *Writer) deleteSegments(ctx context.Context, last int) error {
	for start := 1; start <= last; start += 1000 {
		var objs []types.ObjectIdentifier
		for n := start; n <= last && n < start+1000; n++ {
			objs = append(objs, types.ObjectIdentifier{Key: aws.String(segKey(w.key, n))})
		}
		if _, err := w.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &w.bucket, Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)}}); err != nil {
			return fmt.Errorf("s3: delete trace segments %s%s*: %w", w.key, segSuffix, Classify(err))
		}
	}
	return nil
}

// escapeKey escapes a key for x-amz-copy-source, keeping the slashes.
func escapeKey(k string) string {
	parts := strings.Split(k, "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "%", "%25"), "+", "%2B")
	}
	return strings.Join(parts, "/")
}

// Open opens the trace at url (s3://bucket/key) for reading, with the client settings from
// the environment (AWS chain, IOTAP_S3_ENDPOINT).
func Open(ctx context.Context, url string) (io.ReadCloser, error) {
	return OpenWith(ctx, url, Options{})
}

// OpenWith is Open with explicit options. A trace whose writer crashed (no KEY, only
// segments) is read as the concatenation of its segments.
func OpenWith(ctx context.Context, url string, o Options) (io.ReadCloser, error) {
	o.defaults()
	bucket, key, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	if key == "" || strings.HasSuffix(key, "/") {
		return nil, fmt.Errorf("%w %q: give an object key, not a prefix (use List)", ErrBadURL, url)
	}
	client, err := NewClient(ctx, o.Client)
	if err != nil {
		return nil, err
	}
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err == nil {
		return out.Body, nil
	}
	c := Classify(err)
	if !errors.Is(c, fs.ErrNotExist) {
		return nil, explained("open trace "+url, c)
	}
	segs, lerr := listKeys(ctx, client, bucket, key+segSuffix)
	if lerr != nil || len(segs) == 0 {
		return nil, explained("open trace "+url, c)
	}
	o.Log.Warn("s3: trace was not closed; reading its segments", "url", url, "segments", len(segs))
	return &segReader{ctx: ctx, client: client, bucket: bucket, keys: segs}, nil
}

func explained(what string, err error) error {
	if why := Explain(err); why != "" {
		return fmt.Errorf("s3: %s: %s: %w", what, why, err)
	}
	return fmt.Errorf("s3: %s: %w", what, err)
}

// segReader reads segment objects one after the other.
type segReader struct {
	ctx    context.Context
	client *s3.Client
	bucket string
	keys   []string
	body   io.ReadCloser
}

func (r *segReader) Read(p []byte) (int, error) {
	for {
		if r.body == nil {
			if len(r.keys) == 0 {
				return 0, io.EOF
			}
			out, err := r.client.GetObject(r.ctx, &s3.GetObjectInput{Bucket: &r.bucket, Key: &r.keys[0]})
			if err != nil {
				return 0, explained("read trace segment "+r.keys[0], Classify(err))
			}
			r.body, r.keys = out.Body, r.keys[1:]
		}
		n, err := r.body.Read(p)
		if err == io.EOF {
			_ = r.body.Close()
			r.body = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (r *segReader) Close() error {
	if r.body != nil {
		return r.body.Close()
	}
	return nil
}

func listKeys(ctx context.Context, client *s3.Client, bucket, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, Classify(err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// List returns the s3:// URLs of the traces (*.iotap) below prefixURL, sorted, including
// traces whose writer crashed (segments only; Open reads them).
func List(ctx context.Context, prefixURL string) ([]string, error) {
	return ListWith(ctx, prefixURL, Options{})
}

// ListWith is List with explicit options.
func ListWith(ctx context.Context, prefixURL string, o Options) ([]string, error) {
	o.defaults()
	bucket, prefix, err := ParseURL(prefixURL)
	if err != nil {
		return nil, err
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	client, err := NewClient(ctx, o.Client)
	if err != nil {
		return nil, err
	}
	keys, err := listKeys(ctx, client, bucket, prefix)
	if err != nil {
		return nil, explained("list traces "+prefixURL, err)
	}
	seen := map[string]bool{}
	var urls []string
	for _, k := range keys {
		if i := strings.LastIndex(k, segSuffix); i >= 0 {
			k = k[:i] // a crashed trace: its name
		}
		if !strings.HasSuffix(k, ".iotap") || seen[k] {
			continue
		}
		seen[k] = true
		urls = append(urls, "s3://"+bucket+"/"+k)
	}
	sort.Strings(urls)
	return urls, nil
}
