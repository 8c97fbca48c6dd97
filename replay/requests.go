package replay

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/iotap/iotap/internal/private"
)

// RequestCounter is implemented by backends that turn filesystem calls into requests of
// their own (S3), counted by phase (see Backend.BeginPhase). The engine does not need it:
// the replay command takes the tallies after each run and writes them next to the replay
// trace (WriteRequests); `iotap report` prints them.
type RequestCounter interface {
	// TakeRequests returns the tallies of the phases begun since the previous call, oldest
	// first, so that each phase is taken once (with --repeat, each run's sidecar holds that
	// run's phases).
	TakeRequests() []RequestStats
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
	Op     string // backend call: lstat, open, read, write, readdir, close, rename, ...; "-": none (probes, cleanup)
	Count  uint64 // calls
	Errors uint64 // calls that returned an error (including Refused)
	// Refused counts calls the backend's client cannot do: they failed the way that client
	// fails (e.g. rename on Mountpoint: EPERM) without a request.
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

// requestsSchema names the format of a request sidecar.
const requestsSchema = "iotap.requests/v1"

// WriteRequests writes request tallies to path as JSON (schema "iotap.requests/v1"): the
// sidecar of a replay trace (base + ".requests.json").
func WriteRequests(path string, phases []RequestStats) error {
	doc := struct {
		Schema string
		Phases []RequestStats
	}{requestsSchema, phases}
	js, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("replay: encode request counts: %w", err)
	}
	if err := private.WriteFile(path, append(js, '\n')); err != nil {
		return fmt.Errorf("replay: write request counts: %w", err)
	}
	return nil
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
	if doc.Schema != requestsSchema {
		return nil, fmt.Errorf("replay: read request counts %s: schema %q, want %s", path, doc.Schema, requestsSchema)
	}
	return doc.Phases, nil
}
