package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/iotap/iotap/internal/private"
)

// RequestCounter is implemented by backends that turn filesystem calls into requests of
// their own (S3). The engine does not need it; the replay command fetches the tally after
// a run and writes it next to the replay trace (see WriteRequests).
type RequestCounter interface {
	// BeginPhase closes the current tally and starts a new one named phase ("prepare",
	// "replay"). A backend may behave differently while preparing (see S3).
	BeginPhase(phase string)
	// Requests returns a copy of the tallies of all phases so far, oldest first.
	Requests() []RequestStats
}

// RequestStats is what one phase of a run cost in backend requests, per filesystem call.
type RequestStats struct {
	Phase   string
	Profile string     // how filesystem calls were mapped to requests
	Ops     []OpTally  // by filesystem call, sorted by name
	Total   []ReqTally // all requests of the phase by request type, sorted by type
	// Retries counts attempts beyond the first; Throttled counts responses that were
	// 503 SlowDown (or another throttling code). Neither is hidden in the totals: a
	// request retried twice counts once in Count and twice in Retries.
	Retries, Throttled uint64
}

// OpTally is one filesystem call's count, time and requests.
type OpTally struct {
	Op     string // backend call: lstat, open, read, write, readdir, close, rename, ...
	Count  uint64 // calls
	Errors uint64 // calls that returned an error (including Refused)
	// Refused counts calls the profile cannot do: they failed the way that client fails
	// (e.g. rename on Mountpoint: EPERM) without a request.
	Refused  uint64
	Time     time.Duration // summed latency of the calls, requests included
	Requests []ReqTally    // by request type, sorted
}

// ReqTally counts one request type.
type ReqTally struct {
	Type      string // S3 operation: GetObject, HeadObject, ListObjectsV2, PutObject, UploadPart, ...
	Count     uint64 // operations issued (retries not included)
	Bytes     int64  // payload bytes sent (PUT, UploadPart) or received (GET)
	Retries   uint64
	Throttled uint64
}

// Cost estimates the price of the phase's requests from a price table (see ParsePrices).
func (r *RequestStats) Cost(p Prices) float64 {
	var c float64
	for _, t := range r.Total {
		c += float64(t.Count) * p.price(t.Type)
	}
	return c
}

// Prices is a per-request price table, keyed by S3 operation name or by the billing
// classes GET (GetObject, HeadObject and other reads), PUT (PutObject, CopyObject,
// ListObjectsV2, multipart calls) and DELETE.
type Prices map[string]float64

// ParsePrices parses "GET=0.0004/1000,PUT=0.005/1000,DELETE=0" (a price per request, or
// per N requests with "/N").
func ParsePrices(s string) (Prices, error) {
	p := Prices{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("replay: price %q: want TYPE=PRICE[/N]", kv)
		}
		num, den, hasDen := strings.Cut(v, "/")
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f < 0 {
			return nil, fmt.Errorf("replay: price %q: bad price %q", kv, num)
		}
		if hasDen {
			d, err := strconv.ParseFloat(den, 64)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("replay: price %q: bad divisor %q", kv, den)
			}
			f /= d
		}
		p[k] = f
	}
	return p, nil
}

func (p Prices) price(typ string) float64 {
	if v, ok := p[typ]; ok {
		return v
	}
	switch typ {
	case "DeleteObject", "DeleteObjects", "AbortMultipartUpload":
		return p["DELETE"]
	case "PutObject", "CopyObject", "ListObjectsV2", "ListObjects", "CreateMultipartUpload",
		"UploadPart", "UploadPartCopy", "CompleteMultipartUpload", "ListMultipartUploads":
		return p["PUT"]
	}
	return p["GET"]
}

// WriteRequests writes the request tallies of b, if it counts requests, to path as JSON
// (schema "iotap.requests/v1"): the sidecar of a replay trace (base + ".requests.json").
// It holds the phases since the previous WriteRequests on b (with --repeat, each run's
// sidecar has that run's prepare and replay phases; the first also has "open"). It does
// nothing and returns nil for a backend without requests.
func WriteRequests(b Backend, path string) error {
	rc := counterOf(b)
	if rc == nil {
		return nil
	}
	var phases []RequestStats
	if t, ok := rc.(interface{ takeRequests() []RequestStats }); ok {
		phases = t.takeRequests()
	} else {
		phases = rc.Requests()
	}
	doc := struct {
		Schema string
		Phases []RequestStats
	}{"iotap.requests/v1", phases}
	js, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("replay: encode request counts: %w", err)
	}
	if err := private.WriteFile(path, append(js, '\n')); err != nil {
		return fmt.Errorf("replay: write request counts: %w", err)
	}
	return nil
}

// BeginPhase starts a new request tally on b if it counts requests.
func BeginPhase(b Backend, phase string) {
	if rc := counterOf(b); rc != nil {
		rc.BeginPhase(phase)
	}
}

// counterOf returns b's RequestCounter, looking through decorators, or nil.
func counterOf(b Backend) RequestCounter {
	for {
		if rc, ok := b.(RequestCounter); ok {
			return rc
		}
		d, ok := b.(*decorated)
		if !ok {
			return nil
		}
		b = d.b
	}
}

// reqTallyAcc accumulates one phase. mu guards everything in it.
type reqTallyAcc struct {
	mu                 sync.Mutex
	phase              string
	ops                map[string]*s3OpAcc
	retries, throttled uint64
}

type s3OpAcc struct {
	count, errors, refused uint64
	time                   time.Duration
	s3Reqs                 map[string]*ReqTally
}

func newReqTally(phase string) *reqTallyAcc {
	return &reqTallyAcc{phase: phase, ops: map[string]*s3OpAcc{}}
}

// s3OpKey is the context key of the filesystem call a request belongs to.
type s3OpKey struct{}

// s3OpRef names the call and the tally it is counted in.
type s3OpRef struct {
	t  *reqTallyAcc
	op string
}

func (t *reqTallyAcc) acc(op string) *s3OpAcc {
	a := t.ops[op]
	if a == nil {
		a = &s3OpAcc{s3Reqs: map[string]*ReqTally{}}
		t.ops[op] = a
	}
	return a
}

func (a *s3OpAcc) req(typ string) *ReqTally {
	r := a.s3Reqs[typ]
	if r == nil {
		r = &ReqTally{Type: typ}
		a.s3Reqs[typ] = r
	}
	return r
}

// end records a finished call.
func (t *reqTallyAcc) end(op string, d time.Duration, err error) {
	t.mu.Lock()
	a := t.acc(op)
	a.count++
	a.time += d
	if err != nil {
		a.errors++
		var r *RefusedError
		if errors.As(err, &r) {
			a.refused++
		}
	}
	t.mu.Unlock()
}

// s3AddBytes adds payload bytes to the request type typ of the call in ctx.
func s3AddBytes(ctx context.Context, typ string, n int64) {
	ref, ok := ctx.Value(s3OpKey{}).(s3OpRef)
	if !ok || n == 0 {
		return
	}
	ref.t.mu.Lock()
	ref.t.acc(ref.op).req(typ).Bytes += n
	ref.t.mu.Unlock()
}

func (t *reqTallyAcc) snapshot(s3Profile string) RequestStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := RequestStats{Phase: t.phase, Profile: s3Profile, Retries: t.retries, Throttled: t.throttled}
	total := map[string]*ReqTally{}
	for name, a := range t.ops {
		ot := OpTally{Op: name, Count: a.count, Errors: a.errors, Refused: a.refused, Time: a.time}
		for _, r := range a.s3Reqs {
			ot.Requests = append(ot.Requests, *r)
			tt := total[r.Type]
			if tt == nil {
				tt = &ReqTally{Type: r.Type}
				total[r.Type] = tt
			}
			tt.Count += r.Count
			tt.Bytes += r.Bytes
			tt.Retries += r.Retries
			tt.Throttled += r.Throttled
		}
		sort.Slice(ot.Requests, func(i, j int) bool { return ot.Requests[i].Type < ot.Requests[j].Type })
		rs.Ops = append(rs.Ops, ot)
	}
	for _, tt := range total {
		rs.Total = append(rs.Total, *tt)
	}
	sort.Slice(rs.Ops, func(i, j int) bool { return rs.Ops[i].Op < rs.Ops[j].Op })
	sort.Slice(rs.Total, func(i, j int) bool { return rs.Total[i].Type < rs.Total[j].Type })
	return rs
}

// s3CountingMiddleware counts every S3 operation once (initialize step) and every attempt
// after the first as a retry, and throttling responses (finalize step, after the SDK's
// retry middleware, so it sees each attempt). Requests without a call in their context
// (probes, cleanup) are counted under the op "-".
func s3CountingMiddleware(cur func() *reqTallyAcc) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		type attemptKey struct{}
		init := middleware.InitializeMiddlewareFunc("iotapCountRequest", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			ref, ok := ctx.Value(s3OpKey{}).(s3OpRef)
			if !ok {
				ref = s3OpRef{t: cur(), op: "-"}
				ctx = context.WithValue(ctx, s3OpKey{}, ref)
			}
			typ := middleware.GetOperationName(ctx)
			ref.t.mu.Lock()
			ref.t.acc(ref.op).req(typ).Count++
			ref.t.mu.Unlock()
			return next.HandleInitialize(context.WithValue(ctx, attemptKey{}, new(int)), in)
		})
		if err := st.Initialize.Add(init, middleware.Before); err != nil {
			return err
		}
		fin := middleware.FinalizeMiddlewareFunc("iotapCountAttempt", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			ref, ok := ctx.Value(s3OpKey{}).(s3OpRef)
			n, _ := ctx.Value(attemptKey{}).(*int)
			if !ok || n == nil {
				return out, md, err
			}
			*n++
			typ := middleware.GetOperationName(ctx)
			throttled := false
			if resp, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok && resp.StatusCode == http.StatusServiceUnavailable {
				throttled = true
			}
			var ae smithy.APIError
			if errors.As(err, &ae) {
				switch ae.ErrorCode() {
				case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "ServiceUnavailable":
					throttled = true
				}
			}
			var re *smithyhttp.ResponseError
			if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusServiceUnavailable {
				throttled = true
			}
			ref.t.mu.Lock()
			r := ref.t.acc(ref.op).req(typ)
			if *n > 1 {
				r.Retries++
				ref.t.retries++
			}
			if throttled {
				r.Throttled++
				ref.t.throttled++
			}
			ref.t.mu.Unlock()
			return out, md, err
		})
		return st.Finalize.Insert(fin, "Retry", middleware.After)
	}
}

// RefusedError is a call the backend's profile cannot do: it fails as that client fails
// (Errno) and is counted as refused.
type RefusedError struct {
	Profile string
	Op      string
	Errno   error // a syscall.Errno
	Why     string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("replay: %s profile: %s: %s (%v)", e.Profile, e.Op, e.Why, e.Errno)
}

// Unwrap returns the errno the application sees.
func (e *RefusedError) Unwrap() error { return e.Errno }

// PrintRequests writes a phase's request tally as a table: per filesystem call, its count,
// mean latency and the requests it issued; then totals, retries and throttles, and the
// estimated cost if prices is non-nil.
func PrintRequests(w io.Writer, rs RequestStats, prices Prices) {
	_, _ = fmt.Fprintf(w, "S3 requests, %s phase (%s profile)\n", rs.Phase, rs.Profile)
	_, _ = fmt.Fprintf(w, "  %-12s %8s %8s %12s  %s\n", "call", "count", "refused", "mean", "requests (count, bytes)")
	for _, o := range rs.Ops {
		mean := time.Duration(0)
		if o.Count > 0 {
			mean = o.Time / time.Duration(o.Count)
		}
		var parts []string
		for _, r := range o.Requests {
			p := fmt.Sprintf("%s %d", r.Type, r.Count)
			if r.Bytes > 0 {
				p += " (" + s3HumanSize(r.Bytes) + ")"
			}
			if r.Retries > 0 || r.Throttled > 0 {
				p += fmt.Sprintf(" [%d retries, %d throttled]", r.Retries, r.Throttled)
			}
			parts = append(parts, p)
		}
		name := o.Op
		if name == "-" {
			name = "(backend)"
		}
		_, _ = fmt.Fprintf(w, "  %-12s %8d %8d %12v  %s\n", name, o.Count, o.Refused, mean.Round(time.Microsecond), strings.Join(parts, ", "))
	}
	var parts []string
	var n uint64
	for _, t := range rs.Total {
		parts = append(parts, fmt.Sprintf("%s %d", t.Type, t.Count))
		n += t.Count
	}
	_, _ = fmt.Fprintf(w, "  total        %d requests: %s\n", n, strings.Join(parts, ", "))
	_, _ = fmt.Fprintf(w, "  retries      %d, throttled (503 SlowDown) %d\n", rs.Retries, rs.Throttled)
	if prices != nil {
		_, _ = fmt.Fprintf(w, "  est. cost    $%.6f\n", rs.Cost(prices))
	}
}

func s3HumanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ReadRequests reads a request sidecar written by WriteRequests.
func ReadRequests(path string) ([]RequestStats, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("replay: read request counts: %w", err)
	}
	var doc struct {
		Schema string
		Phases []RequestStats
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("replay: read request counts %s: %w", path, err)
	}
	if doc.Schema != "iotap.requests/v1" {
		return nil, fmt.Errorf("replay: read request counts %s: schema %q, want iotap.requests/v1", path, doc.Schema)
	}
	return doc.Phases, nil
}
