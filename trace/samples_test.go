package trace

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// TestSamplesRoundTrip writes long resource series in many parts, interleaved with
// events, and reads them back as one series per role and pid, in order: a series longer
// than a record's limit is split over records and joined again.
func TestSamplesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(), WriterOptions{ChunkEvents: 64})
	if err != nil {
		t.Fatal(err)
	}
	want := []Samples{{Role: RoleClient, Pid: 7, Name: "mount-s3"}, {Role: RoleSelf, Pid: 8, Name: "iotap"}}
	n := MaxSamplesPerRecord + 1000
	for i := range n {
		for j := range want {
			p := Sample{T: int64(i) * 1e8, RSS: uint64((i*7919)%5000) << 12, User: time.Duration(i) * time.Millisecond,
				Sys: time.Duration(i/2) * time.Millisecond, ReadBytes: uint64(i) * 4096, WriteBytes: uint64(j), RChar: uint64(i) << 20, WChar: 1 << 40}
			want[j].Points = append(want[j].Points, p)
		}
	}
	for i := 0; i < n; i += 5000 {
		for _, s := range want {
			part := s
			part.Points = s.Points[i:min(i+5000, n)]
			w.AddSamples(part)
		}
		w.Append(&Event{Op: OpStatfs, Start: int64(i), Path: RootPath})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	readAll(t, r)
	if d := r.Damage(); len(d) != 0 {
		t.Fatalf("damage: %v", d)
	}
	if got := r.Samples(); !reflect.DeepEqual(got, want) {
		t.Errorf("samples differ: got %d series, want %d", len(got), len(want))
	}
	t.Logf("%d samples x 2 in %d bytes", n, buf.Len())
}

// TestSamplesDamage checks what no writer writes: a samples chunk in a version-2 file
// (the type is unknown there), a series of an unknown role, times going back, and more
// samples than the side-table limit allows. Each is a corrupt chunk; the rest of the
// trace still reads.
func TestSamplesDamage(t *testing.T) {
	h := testHeader()
	series := []Samples{{Role: RoleClient, Pid: 1, Name: "s3fs", Points: []Sample{{T: 1, RSS: 5}, {T: 2, RSS: 4}}}}
	back := []Samples{{Role: RoleClient, Pid: 1, Points: []Sample{{T: 5}, {T: 4}}}}
	role := []Samples{{Role: 9, Pid: 1, Points: []Sample{{T: 5}}}}
	// Many zero samples compress to a few bytes: the side-table limit stops them.
	many := make([]Samples, 0, 20)
	for pid := range 20 {
		many = append(many, Samples{Role: RoleClient, Pid: uint32(pid), Points: make([]Sample, MaxSamplesPerRecord)})
	}
	for _, tc := range []struct {
		name     string
		version  uint16
		payload  []byte
		compress bool
		reason   string
	}{
		{"version 2", Version2, appendSamples(nil, series), false, "unknown chunk type"},
		{"unknown role", Version3, appendSamples(nil, role), false, "unknown role"},
		{"time goes back", Version3, appendSamples(nil, back), false, "sample times go back"},
		{"over the limit", Version3, appendSamples(nil, many), true, "side tables would hold more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append(appendPreamble(nil, tc.version), rawChunk(ChunkHeader, appendHeader(nil, &h))...)
			if tc.compress {
				w := &Writer{}
				var err error
				if w.enc, err = newTestEncoder(); err != nil {
					t.Fatal(err)
				}
				b = w.appendChunk(b, ChunkSamples, tc.payload)
			} else {
				b = append(b, rawChunk(ChunkSamples, tc.payload)...)
			}
			b = append(b, rawChunk(ChunkEvents, appendEvents(nil, tc.version, []Event{{Op: OpStatfs, Path: RootPath}}, &offsetPredictor{}))...)
			r, err := NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = r.Close() }()
			if got := readAll(t, r); len(got) != 1 {
				t.Errorf("%d events after the bad chunk, want 1", len(got))
			}
			var ce *ChunkError
			d := r.Damage()
			if len(d) == 0 || !errors.As(d[0], &ce) || !errors.Is(d[0], ErrCorrupt) || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("damage %v, want a corrupt samples chunk: %s", d, tc.reason)
			}
			if len(r.Samples()) != 0 && tc.name != "over the limit" {
				t.Errorf("samples kept from a corrupt chunk: %+v", r.Samples())
			}
		})
	}
}

func newTestEncoder() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
}
