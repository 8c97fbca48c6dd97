package s3

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"sync"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/iotap/iotap/internal/s3req"
)

// tally accumulates one phase. mu guards everything in it.
type tally struct {
	mu                 sync.Mutex
	phase              string
	ops                map[string]*opAcc
	retries, throttled uint64
}

type opAcc struct {
	count, errors, refused uint64
	time                   time.Duration
	reqs                   map[string]*s3req.ReqTally
}

func newTally(phase string) *tally {
	return &tally{phase: phase, ops: map[string]*opAcc{}}
}

// opKey is the context key of the filesystem call a request belongs to.
type opKey struct{}

// opRef names the call and the tally it is counted in.
type opRef struct {
	t  *tally
	op string
}

func (t *tally) acc(op string) *opAcc {
	a := t.ops[op]
	if a == nil {
		a = &opAcc{reqs: map[string]*s3req.ReqTally{}}
		t.ops[op] = a
	}
	return a
}

func (a *opAcc) req(typ string) *s3req.ReqTally {
	r := a.reqs[typ]
	if r == nil {
		r = &s3req.ReqTally{Type: typ}
		a.reqs[typ] = r
	}
	return r
}

// end records a finished call.
func (t *tally) end(op string, d time.Duration, err error) {
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

// addBytes adds payload bytes to the request type typ of the call in ctx.
func addBytes(ctx context.Context, typ string, n int64) {
	ref, ok := ctx.Value(opKey{}).(opRef)
	if !ok || n == 0 {
		return
	}
	ref.t.mu.Lock()
	ref.t.acc(ref.op).req(typ).Bytes += n
	ref.t.mu.Unlock()
}

func (t *tally) snapshot(profile string) s3req.Phase {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := s3req.Phase{Phase: t.phase, Profile: profile, Retries: t.retries, Throttled: t.throttled}
	total := map[string]*s3req.ReqTally{}
	for name, a := range t.ops {
		ot := s3req.OpTally{Op: name, Count: a.count, Errors: a.errors, Refused: a.refused, Time: a.time}
		for _, r := range a.reqs {
			ot.Requests = append(ot.Requests, *r)
			tt := total[r.Type]
			if tt == nil {
				tt = &s3req.ReqTally{Type: r.Type}
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

// countingMiddleware counts every S3 operation once (initialize step) and every attempt
// after the first as a retry, and throttling responses (finalize step, after the SDK's
// retry middleware, so it sees each attempt). Requests without a call in their context
// (probes, cleanup) are counted under the op "-".
func countingMiddleware(cur func() *tally) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		type attemptKey struct{}
		init := middleware.InitializeMiddlewareFunc("iotapCountRequest", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			ref, ok := ctx.Value(opKey{}).(opRef)
			if !ok {
				ref = opRef{t: cur(), op: "-"}
				ctx = context.WithValue(ctx, opKey{}, ref)
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
			ref, ok := ctx.Value(opKey{}).(opRef)
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
