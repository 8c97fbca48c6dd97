// Package procsample measures what storage costs in memory and CPU outside the job: it
// finds the process that serves a mount (the FUSE daemon holding the mount's connection,
// such as s3fs, mount-s3, rclone, gcsfuse, bindfs or mfsmount) and samples the resident
// memory, CPU time and I/O counters of processes from /proc while a trace is made, handing
// the series to the trace writer (trace.Samples).
//
// # Finding the client
//
// FindClient stats the path to learn the device of its file system, and for a FUSE file
// system looks for the processes holding an open /dev/fuse whose fdinfo names that
// connection ("fuse_connection: N", N being the device number as /sys/fs/fuse/connections
// names it). Kernels without that fdinfo line fall back to the /dev/fuse holders whose
// command line names the mount point. A network file system served by the kernel (nfs,
// cifs, ceph, lustre, ...) has no process: ErrKernelClient. A local file system has no
// client: ErrNoClient.
//
// # Sampling
//
// A Sampler reads /proc/PID/stat (user and system CPU time, in the kernel's USER_HZ ticks
// of 10 ms, and the resident set size) and /proc/PID/io (storage and system-call byte
// counts; root, or the process's owner, may read it) of each process every interval (100 ms
// by default), on one goroutine, and hands the readings to its sink about once a second and
// when it stops. A process that exits stops being sampled. BenchmarkReadSelf measures a
// reading of both files: tens of microseconds per process and interval.
package procsample

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/iotap/iotap/trace"
)

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on every Linux
// architecture whatever the kernel's tick rate).
const userHZ = 100

var pageSize = uint64(os.Getpagesize())

// ErrGone is returned by Read for a process that no longer exists.
var ErrGone = errors.New("procsample: process is gone")

// errESRCH is what reading an open /proc/PID file returns once the process has exited.
const errESRCH = syscall.ESRCH

// reader reads one process's counters, keeping its /proc files open.
type reader struct {
	pid      int
	stat, io *os.File
	buf      []byte
	noIO     bool // /proc/PID/io cannot be read (not permitted): its counters stay 0
}

func newReader(pid int) (*reader, error) {
	st, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: pid %d", ErrGone, pid)
		}
		return nil, fmt.Errorf("procsample: %w", err)
	}
	r := &reader{pid: pid, stat: st, buf: make([]byte, 0, 1024)}
	if f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/io"); err == nil {
		r.io = f
	} else {
		r.noIO = true
	}
	return r, nil
}

func (r *reader) close() {
	_ = r.stat.Close() // read-only
	if r.io != nil {
		_ = r.io.Close()
	}
}

// readFile reads f whole from offset 0 into r.buf.
func (r *reader) readFile(f *os.File) ([]byte, error) {
	b := r.buf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.ReadAt(b[len(b):cap(b)], int64(len(b)))
		b = b[:len(b)+n]
		if err == io.EOF {
			r.buf = b
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// read returns the process's counters (T left 0).
func (r *reader) read() (trace.Sample, error) {
	var s trace.Sample
	b, err := r.readFile(r.stat)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, errESRCH) {
			return s, fmt.Errorf("%w: pid %d", ErrGone, r.pid)
		}
		return s, fmt.Errorf("procsample: read stat of %d: %w", r.pid, err)
	}
	if len(b) == 0 {
		return s, fmt.Errorf("%w: pid %d", ErrGone, r.pid)
	}
	if err := parseStat(b, &s); err != nil {
		return s, fmt.Errorf("procsample: stat of %d: %w", r.pid, err)
	}
	if r.io != nil {
		b, err := r.readFile(r.io)
		if err == nil {
			parseIO(b, &s)
		}
	}
	return s, nil
}

// Read returns the counters of process pid now (T left 0).
func Read(pid int) (trace.Sample, error) {
	r, err := newReader(pid)
	if err != nil {
		return trace.Sample{}, err
	}
	defer r.close()
	return r.read()
}

// parseStat takes utime, stime and rss from /proc/PID/stat (proc(5): fields 14, 15 and
// 24). The command name (field 2) is in parentheses and may hold spaces and parentheses:
// fields are counted after its last ')'.
func parseStat(b []byte, s *trace.Sample) error {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return errors.New("no command name")
	}
	f := strings.Fields(string(b[i+1:])) // field 3 (state) is f[0]
	if len(f) < 22 {
		return fmt.Errorf("%d fields after the command name, want at least 22", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	rss, err3 := strconv.ParseInt(f[21], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	s.User = time.Duration(ut) * (time.Second / userHZ)
	s.Sys = time.Duration(st) * (time.Second / userHZ)
	s.RSS = uint64(max(rss, 0)) * pageSize
	return nil
}

// parseIO takes the byte counters of /proc/PID/io.
func parseIO(b []byte, s *trace.Sample) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "rchar":
			s.RChar = n
		case "wchar":
			s.WChar = n
		case "read_bytes":
			s.ReadBytes = n
		case "write_bytes":
			s.WriteBytes = n
		}
	}
}

// Comm returns the command name of process pid ("" if it cannot be read).
func Comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
