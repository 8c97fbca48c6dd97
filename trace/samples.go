package trace

import (
	"encoding/binary"
	"fmt"
	"time"
)

// SampleRole says which process a series of resource samples is about.
type SampleRole uint8

// Roles of sampled processes. The values are part of the on-disk format.
const (
	// RoleClient is the storage client serving the traced or replayed-onto directory: the
	// FUSE daemon of its mount (s3fs, mount-s3, rclone, mfsmount, ...), or a process named
	// with --client-pid.
	RoleClient SampleRole = 1
	// RoleSelf is the iotap process that wrote the trace: the recorder serving the tracing
	// layer, or the replayer (which, on an s3:// target, is the S3 client itself).
	RoleSelf SampleRole = 2
)

func (r SampleRole) String() string {
	switch r {
	case RoleClient:
		return "client"
	case RoleSelf:
		return "self"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Samples is a time series of one process's resource use, sampled while the trace was
// made (format version 3, "Samples payload" in doc.go).
type Samples struct {
	Role SampleRole
	Pid  uint32
	Name string // the process's command name (comm), e.g. "s3fs"
	// Points are in time order. Their counters are cumulative over the process's life, as
	// /proc shows them, not since the first sample.
	Points []Sample
}

// Sample is one reading of a process's resource use.
type Sample struct {
	T    int64  // ns since the header's Origin
	RSS  uint64 // resident set size, bytes
	User time.Duration
	Sys  time.Duration
	// Bytes the process read from and wrote to storage (/proc/PID/io read_bytes and
	// write_bytes), and bytes it passed through read- and write-like system calls, sockets
	// included (rchar, wchar): for a network client, its traffic.
	ReadBytes, WriteBytes uint64
	RChar, WChar          uint64
}

// sampleFields is the number of values a sample takes in a samples payload; each takes at
// least one byte.
const sampleFields = 8

// MaxSamplesPerRecord bounds the points of one series record in a samples chunk.
const MaxSamplesPerRecord = 1 << 16

func appendSamples(dst []byte, ss []Samples) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ss)))
	for _, s := range ss {
		dst = append(dst, byte(s.Role))
		dst = binary.AppendUvarint(dst, uint64(s.Pid))
		dst = appendString(dst, s.Name)
		dst = binary.AppendUvarint(dst, uint64(len(s.Points)))
		var prev Sample
		for _, p := range s.Points {
			dst = binary.AppendVarint(dst, p.T-prev.T)
			dst = binary.AppendVarint(dst, int64(p.RSS-prev.RSS))
			dst = binary.AppendVarint(dst, int64(p.User-prev.User))
			dst = binary.AppendVarint(dst, int64(p.Sys-prev.Sys))
			dst = binary.AppendVarint(dst, int64(p.ReadBytes-prev.ReadBytes))
			dst = binary.AppendVarint(dst, int64(p.WriteBytes-prev.WriteBytes))
			dst = binary.AppendVarint(dst, int64(p.RChar-prev.RChar))
			dst = binary.AppendVarint(dst, int64(p.WChar-prev.WChar))
			prev = p
		}
	}
	return dst
}

// decodeSamples decodes a samples payload, calling fn per series record; the record's
// points are only valid during the call.
func decodeSamples(b []byte, pts []Sample, fn func(Samples) error) ([]Sample, error) {
	d := dec{b: b}
	n := d.count(4) // role, pid, name length, point count
	for i := 0; i < n && d.err == nil; i++ {
		s := Samples{Role: SampleRole(d.byte1()), Pid: d.u32(), Name: d.strMax(MaxName)}
		if d.err == nil && s.Role != RoleClient && s.Role != RoleSelf {
			return pts, fmt.Errorf("series of unknown role %d", uint8(s.Role))
		}
		k := d.count(sampleFields)
		if k > MaxSamplesPerRecord {
			return pts, fmt.Errorf("series of %d samples, more than the limit of %d", k, MaxSamplesPerRecord)
		}
		pts = pts[:0]
		var p Sample
		for j := 0; j < k && d.err == nil; j++ {
			p.T += d.varint()
			p.RSS += uint64(d.varint())
			p.User += time.Duration(d.varint())
			p.Sys += time.Duration(d.varint())
			p.ReadBytes += uint64(d.varint())
			p.WriteBytes += uint64(d.varint())
			p.RChar += uint64(d.varint())
			p.WChar += uint64(d.varint())
			if j > 0 && p.T < pts[j-1].T {
				d.fail(fmt.Errorf("sample times go back (%d after %d)", p.T, pts[j-1].T))
			}
			pts = append(pts, p)
		}
		if d.err != nil {
			break
		}
		s.Points = pts
		if err := fn(s); err != nil {
			return pts, err
		}
	}
	return pts, d.err
}
