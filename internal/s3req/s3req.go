// Package s3req holds what a replay target's own requests cost (S3 requests of the
// replay/s3 backend): tallies per phase of a run and per filesystem call, which a
// replay.RequestCounter returns, and the sidecar file next to a replay trace
// (base.requests.json, schema "iotap.requests/v1", snake_case keys as the field tags say,
// durations in integer nanoseconds) they are written to. The replayer writes sidecars and
// reports read them; it is a leaf package so that reports read them without the replay
// engine.
package s3req

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/iotap/iotap/internal/private"
)

// Phase is what one phase of a run cost in backend requests, per filesystem call.
type Phase struct {
	Phase   string     `json:"phase"`
	Profile string     `json:"profile"` // how filesystem calls were mapped to requests
	Ops     []OpTally  `json:"ops"`     // by filesystem call, sorted by name
	Total   []ReqTally `json:"total"`   // all requests of the phase by request type, sorted by type
	// Retries counts attempts beyond the first; Throttled counts responses that were
	// 503 SlowDown (or another throttling code). Neither is hidden in the totals: a
	// request retried twice counts once in Count and twice in Retries.
	Retries   uint64 `json:"retries"`
	Throttled uint64 `json:"throttled"`
}

// OpTally is one filesystem call's count, time and requests.
type OpTally struct {
	Op     string `json:"op"`     // backend call: lstat, open, read, write, readdir, close, rename, ...; "-": none (probes, cleanup)
	Count  uint64 `json:"count"`  // calls
	Errors uint64 `json:"errors"` // calls that returned an error (including Refused)
	// Refused counts calls the backend's client cannot do: they failed the way that client
	// fails (e.g. rename on Mountpoint: EPERM) without a request.
	Refused  uint64        `json:"refused"`
	Time     time.Duration `json:"time_ns"`  // summed latency of the calls, requests included
	Requests []ReqTally    `json:"requests"` // by request type, sorted
}

// ReqTally counts one request type.
type ReqTally struct {
	Type      string `json:"type"`  // S3 operation: GetObject, HeadObject, ListObjectsV2, PutObject, UploadPart, ...
	Count     uint64 `json:"count"` // operations issued (retries not included)
	Bytes     int64  `json:"bytes"` // payload bytes sent (PUT, UploadPart) or received (GET)
	Retries   uint64 `json:"retries"`
	Throttled uint64 `json:"throttled"`
}

// schema names the format of a request sidecar.
const schema = "iotap.requests/v1"

// Write writes request tallies to path as JSON (schema "iotap.requests/v1"): the
// sidecar of a replay trace (base + ".requests.json").
func Write(path string, phases []Phase) error {
	doc := struct {
		Schema string  `json:"schema"`
		Phases []Phase `json:"phases"`
	}{schema, phases}
	js, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("replay: encode request counts: %w", err)
	}
	if err := private.WriteFile(path, append(js, '\n')); err != nil {
		return fmt.Errorf("replay: write request counts: %w", err)
	}
	return nil
}

// Read reads a request sidecar written by Write.
func Read(path string) ([]Phase, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("replay: read request counts: %w", err)
	}
	var doc struct {
		Schema string  `json:"schema"`
		Phases []Phase `json:"phases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("replay: read request counts %s: %w", path, err)
	}
	if doc.Schema != schema {
		return nil, fmt.Errorf("replay: read request counts %s: schema %q, want %s", path, doc.Schema, schema)
	}
	return doc.Phases, nil
}
