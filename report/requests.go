package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/s3req"
)

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
			return nil, fmt.Errorf("report: price %q: want TYPE=PRICE[/N]", kv)
		}
		num, den, hasDen := strings.Cut(v, "/")
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f < 0 {
			return nil, fmt.Errorf("report: price %q: bad price %q", kv, num)
		}
		if hasDen {
			d, err := strconv.ParseFloat(den, 64)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("report: price %q: bad divisor %q", kv, den)
			}
			f /= d
		}
		p[k] = f
	}
	return p, nil
}

// price returns the price of one request of type typ.
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

// Cost estimates the price of a phase's requests.
func (p Prices) Cost(rs *s3req.Phase) float64 {
	var c float64
	for _, t := range rs.Total {
		c += float64(t.Count) * p.price(t.Type)
	}
	return c
}

// WriteRequests writes a phase's request tally as a table: per filesystem call, its count,
// mean latency and the requests it issued; then totals, retries and throttles, and the
// estimated cost if prices is non-nil.
func WriteRequests(w io.Writer, rs s3req.Phase, prices Prices) {
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
				p += " (" + format.Bytes(uint64(r.Bytes)) + ")"
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
		_, _ = fmt.Fprintf(w, "  est. cost    $%.6f\n", prices.Cost(&rs))
	}
}

// WriteRequestUse writes, under a phase's request table, the bytes its requests moved
// against the bytes the job's calls used: GET bytes fetched for readBytes read, PUT and
// UploadPart bytes sent for writeBytes written, and the ratio of the two.
func WriteRequestUse(w io.Writer, rs s3req.Phase, readBytes, writeBytes uint64) {
	var got, sent int64
	for _, t := range rs.Total {
		switch t.Type {
		case "GetObject":
			got += t.Bytes
		case "PutObject", "UploadPart":
			sent += t.Bytes
		}
	}
	use := func(moved int64, used uint64) string {
		if used == 0 {
			return format.Bytes(uint64(moved)) + " for none used"
		}
		return fmt.Sprintf("%s for %s used (%.2f×)", format.Bytes(uint64(moved)), format.Bytes(used), float64(moved)/float64(used))
	}
	_, _ = fmt.Fprintf(w, "  bytes        fetched by GET %s; sent by PUT and UploadPart %s\n", use(got, readBytes), use(sent, writeBytes))
}
