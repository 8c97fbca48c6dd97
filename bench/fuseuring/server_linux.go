//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	rootID     = 1
	fileID     = 2
	fileName   = "file"
	fileSize   = 4096
	maxWrite   = 128 << 10
	devBufSize = maxWrite + 4096
	// payloadSize is the default of each io_uring entry's payload buffer: the kernel requires
	// at least max(max_write, max_pages × page size), 128 KiB with the values negotiated here.
	payloadSize = 256 << 10
)

const (
	viaDev = iota
	viaURing
)

var opNames = map[uint32]string{
	opLookup: "LOOKUP", opForget: "FORGET", opGetattr: "GETATTR", opOpen: "OPEN", opRead: "READ",
	opStatfs: "STATFS", opRelease: "RELEASE", opFlush: "FLUSH", opInit: "INIT",
	opInterrupt: "INTERRUPT", opDestroy: "DESTROY", opBatchForget: "BATCH_FORGET",
}

// server serves the two-node file system on one FUSE connection.
type server struct {
	dev      int    // /dev/fuse
	data     []byte // the file's content
	directIO bool
	counts   [2][64]atomic.Uint64 // [viaDev|viaURing][opcode], opcodes ≥ 63 in the last slot
}

// request is one FUSE request split as io_uring delivers it: the operation's fixed header
// and its variable payload.
type request struct {
	h       inHeader
	op      []byte
	payload []byte
}

// handle serves req, writing the reply's arguments into out. It returns their size and a
// negative errno; reply is false for requests that take none.
func (s *server) handle(req request, out []byte) (n int, errno int32, reply bool) {
	switch req.h.Opcode {
	case opForget, opBatchForget, opInterrupt:
		return 0, 0, false
	case opLookup:
		name, _, _ := bytes.Cut(req.payload, []byte{0})
		if req.h.NodeID != rootID || string(name) != fileName {
			return 0, -int32(unix.ENOENT), true
		}
		putEntryOut(out, fileID, s.attr(fileID))
		return entryOutSize, 0, true
	case opGetattr:
		if req.h.NodeID != rootID && req.h.NodeID != fileID {
			return 0, -int32(unix.ENOENT), true
		}
		putAttrOut(out, s.attr(req.h.NodeID))
		return attrOutSize, 0, true
	case opOpen:
		if req.h.NodeID != fileID {
			return 0, -int32(unix.EISDIR), true
		}
		var fl uint32
		if s.directIO {
			fl = fopenDirectIO
		}
		putOpenOut(out, 1, fl)
		return openOutSize, 0, true
	case opRead:
		in, err := decodeReadIn(req.op)
		if err != nil || req.h.NodeID != fileID {
			return 0, -int32(unix.EINVAL), true
		}
		if in.Offset >= uint64(len(s.data)) {
			return 0, 0, true
		}
		return copy(out[:min(int(in.Size), len(out))], s.data[in.Offset:]), 0, true
	case opRelease, opFlush, opDestroy:
		return 0, 0, true
	case opStatfs:
		putStatfsOut(out)
		return statfsOutSize, 0, true
	}
	return 0, -int32(unix.ENOSYS), true
}

func (s *server) attr(id uint64) attr {
	if id == rootID {
		return attr{Ino: rootID, Mode: unix.S_IFDIR | 0o755, Nlink: 2, Blksize: 4096}
	}
	return attr{Ino: fileID, Size: uint64(len(s.data)), Blocks: uint64(len(s.data)+511) / 512,
		Mode: unix.S_IFREG | 0o644, Nlink: 1, Blksize: 4096}
}

func (s *server) count(via int, opcode uint32) {
	s.counts[via][min(opcode, 63)].Add(1)
}

// countsJSON is {"dev":{"LOOKUP":n,…},"uring":{…},"cpu":{"ns":n}}.
func (s *server) countsJSON() string {
	m := map[string]map[string]uint64{"dev": {}, "uring": {}}
	for via, name := range []string{"dev", "uring"} {
		for op := range s.counts[via] {
			if n := s.counts[via][op].Load(); n > 0 {
				label, ok := opNames[uint32(op)]
				if !ok {
					label = "OP" + strconv.Itoa(op)
				}
				m[name][label] = n
			}
		}
	}
	m["cpu"] = map[string]uint64{"ns": uint64(cpuTime())}
	b, _ := json.Marshal(m)
	return string(b)
}

// cpuTime is the process's user and system time so far (getrusage, microsecond resolution).
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// splitDev splits a request read from /dev/fuse.
func splitDev(b []byte) (request, error) {
	h, err := decodeInHeader(b)
	if err != nil {
		return request{}, err
	}
	if int(h.Len) != len(b) {
		return request{}, fmt.Errorf("request length %d, read %d", h.Len, len(b))
	}
	rest := b[inHeaderSize:]
	k := min(opHeaderSize(h.Opcode), len(rest))
	return request{h: h, op: rest[:k], payload: rest[k:]}, nil
}

// serveDev reads and answers requests on /dev/fuse until the file system is unmounted.
func (s *server) serveDev() error {
	runtime.LockOSThread()
	buf := make([]byte, devBufSize)
	out := make([]byte, outHeaderSize+payloadSize)
	for {
		n, err := unix.Read(s.dev, buf)
		switch {
		case errors.Is(err, unix.ENODEV):
			return nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOENT):
			continue
		case err != nil:
			return fmt.Errorf("read /dev/fuse: %w", err)
		}
		req, err := splitDev(buf[:n])
		if err != nil {
			return fmt.Errorf("read /dev/fuse: %w", err)
		}
		s.count(viaDev, req.h.Opcode)
		k, errno, reply := s.handle(req, out[outHeaderSize:])
		if !reply {
			continue
		}
		putOutHeader(out, uint32(outHeaderSize+k), errno, req.h.Unique)
		if _, err := unix.Write(s.dev, out[:outHeaderSize+k]); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("write /dev/fuse: %w", err)
		}
	}
}

// mountAndInit mounts the connection on mnt and answers INIT, asking for FUSE over io_uring
// when uring is set.
func (s *server) mountAndInit(mnt string, uring bool) error {
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /dev/fuse: %w", err)
	}
	s.dev = fd
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd)
	if err := unix.Mount("fuseuring", mnt, "fuse.fuseuring", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount %s: %w", mnt, err)
	}
	buf := make([]byte, devBufSize)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return fmt.Errorf("read INIT: %w", err)
	}
	req, err := splitDev(buf[:n])
	if err != nil || req.h.Opcode != opInit {
		return fmt.Errorf("first request is not INIT (opcode %d): %v", req.h.Opcode, err)
	}
	s.count(viaDev, opInit)
	in, err := decodeInitIn(req.op)
	if err != nil {
		return err
	}
	o := initOut{Major: kernelMajor, Minor: min(in.Minor, kernelMinor), MaxReadahead: in.MaxReadahead,
		Flags: in.Flags & (initAsyncRead | initBigWrites | initExt), MaxBackground: 12, CongestionThreshold: 9,
		MaxWrite: maxWrite, TimeGran: 1}
	if uring {
		if in.Flags&initExt == 0 || in.Flags2&init2OverIOUring == 0 {
			return errors.New("kernel did not offer FUSE_OVER_IO_URING at INIT: " +
				"is /sys/module/fuse/parameters/enable_uring set to Y?")
		}
		o.Flags2 = init2OverIOUring
	}
	out := make([]byte, outHeaderSize+initOutSize)
	o.encode(out[outHeaderSize:])
	putOutHeader(out, uint32(len(out)), 0, req.h.Unique)
	if _, err := unix.Write(fd, out); err != nil {
		return fmt.Errorf("reply INIT: %w", err)
	}
	return nil
}

// possibleCPUs is the number of CPUs in /sys/devices/system/cpu/possible: the kernel makes
// one io_uring queue per possible CPU and uses the ring only once every queue has an entry.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("cpu list %q: %w", b, err)
		}
		z := a
		if isRange {
			if z, err = strconv.Atoi(hi); err != nil {
				return 0, fmt.Errorf("cpu list %q: %w", b, err)
			}
		}
		n += z - a + 1
	}
	return n, nil
}

// uringEntry is one registered request slot: a header page and a payload buffer the kernel
// copies requests into and replies out of.
type uringEntry struct {
	hdr, payload []byte
	iov          []unix.Iovec
	commitID     uint64
	lastCmd      uint32
}

// uringQueue serves one queue: its own ring, entries, and a thread pinned to its CPU.
type uringQueue struct {
	s     *server
	qid   int
	ring  *ring
	ents  []*uringEntry
	cqes  []cqe
	ready chan error
}

// registerErrno explains the errors FUSE_IO_URING_CMD_REGISTER returns (fs/fuse/dev_uring.c).
func registerErrno(e unix.Errno) string {
	switch e {
	case unix.EOPNOTSUPP:
		return "EOPNOTSUPP: fuse-io-uring is disabled (/sys/module/fuse/parameters/enable_uring is N)"
	case unix.EINVAL:
		return "EINVAL: not an SQE128 ring, a bad queue id, or a buffer smaller than the kernel's header or max payload"
	case unix.EAGAIN:
		return "EAGAIN: the connection is not initialized yet (INIT not answered)"
	case unix.ENOTCONN:
		return "ENOTCONN: the file descriptor is not a connected /dev/fuse"
	case unix.EALREADY:
		return "EALREADY: the ring is already set up"
	case unix.ENOMEM:
		return "ENOMEM: the kernel could not allocate the ring or queue"
	}
	return e.Error()
}

func mmapAnon(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
}

func (q *uringQueue) setup(depth, payloadSize int, deferTaskrun bool) error {
	r, err := newRing(uint32(depth), deferTaskrun)
	if err != nil {
		return err
	}
	q.ring = r
	for i := range depth {
		e := &uringEntry{}
		if e.hdr, err = mmapAnon(4096); err != nil {
			return err
		}
		if e.payload, err = mmapAnon(payloadSize); err != nil {
			return err
		}
		iovMem, err := mmapAnon(4096)
		if err != nil {
			return err
		}
		e.iov = unsafe.Slice((*unix.Iovec)(unsafe.Pointer(&iovMem[0])), 2)
		e.iov[0].Base, e.iov[0].Len = &e.hdr[0], uint64(len(e.hdr))
		e.iov[1].Base, e.iov[1].Len = &e.payload[0], uint64(len(e.payload))
		q.ents = append(q.ents, e)
		if err := q.submit(i, uringCmdRegister); err != nil {
			return err
		}
	}
	if _, err := q.ring.enter(false); err != nil {
		return err
	}
	// A failed REGISTER completes at once; a successful one stays queued until a request.
	for _, c := range q.ring.reap(q.cqes[:0]) {
		if c.Res < 0 {
			return fmt.Errorf("FUSE_IO_URING_CMD_REGISTER on queue %d: %s", q.qid, registerErrno(unix.Errno(-c.Res)))
		}
	}
	return nil
}

// submit queues entry i's next command: REGISTER hands the kernel its buffers, COMMIT_AND_FETCH
// returns the reply in them and asks for the next request.
func (q *uringQueue) submit(i int, cmd uint32) error {
	e := q.ents[i]
	e.lastCmd = cmd
	sqe := q.ring.getSQE()
	if sqe == nil {
		return fmt.Errorf("queue %d: submission queue full", q.qid)
	}
	prepURingCmd(sqe, q.s.dev, cmd, uint64(i))
	if cmd == uringCmdRegister {
		putU64(sqe[16:], uint64(uintptr(unsafe.Pointer(&e.iov[0]))))
		putU32(sqe[24:], 2)
		putUringCmdReq(sqe[sqeCmdOffset:], 0, uint16(q.qid))
		return nil
	}
	putUringCmdReq(sqe[sqeCmdOffset:], e.commitID, uint16(q.qid))
	return nil
}

// run sets the queue up on its own pinned thread, reports on q.ready, then serves until the
// connection goes away.
func (q *uringQueue) run(depth, payloadSize int, pin, deferTaskrun bool) error {
	runtime.LockOSThread()
	if pin {
		var set unix.CPUSet
		set.Set(q.qid)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			q.ready <- fmt.Errorf("pin queue %d: %w", q.qid, err)
			return nil
		}
	}
	q.cqes = make([]cqe, 0, 2*depth)
	err := q.setup(depth, payloadSize, deferTaskrun)
	q.ready <- err
	if err != nil {
		return nil
	}
	for {
		if _, err := q.ring.enter(true); err != nil {
			return err
		}
		for _, c := range q.ring.reap(q.cqes[:0]) {
			i := int(c.UserData)
			switch {
			case c.Res == -int32(unix.ENOTCONN), c.Res == -int32(unix.ECONNABORTED), c.Res == -int32(unix.ECANCELED):
				return nil // unmounted
			case c.Res == -int32(unix.EAGAIN), c.Res == -int32(unix.EINTR):
				if err := q.submit(i, q.ents[i].lastCmd); err != nil {
					return err
				}
				continue
			case c.Res < 0:
				return fmt.Errorf("queue %d: %w", q.qid, unix.Errno(-c.Res))
			}
			if err := q.serve(i); err != nil {
				return err
			}
		}
	}
}

// serve answers the request in entry i and queues its commit.
func (q *uringQueue) serve(i int) error {
	e := q.ents[i]
	ent, _ := decodeUringEnt(e.hdr) // e.hdr is a page: never short
	h, _ := decodeInHeader(e.hdr)
	e.commitID = ent.CommitID
	k := opHeaderSize(h.Opcode)
	req := request{h: h, op: e.hdr[uringInOutSize : uringInOutSize+k], payload: e.payload[:min(int(ent.PayloadSz), len(e.payload))]}
	q.s.count(viaURing, h.Opcode)
	n, errno, _ := q.s.handle(req, e.payload)
	putOutHeader(e.hdr, uint32(outHeaderSize+n), errno, h.Unique)
	uringEnt{CommitID: ent.CommitID, PayloadSz: uint32(n)}.encode(e.hdr)
	return q.submit(i, uringCmdCommit)
}

// serve is the "serve" subcommand: mount, answer INIT, start the transport, print
// "ready …" on stdout, answer "counts" lines on stdin with the requests served so far, and
// exit once the file system is unmounted.
func serve(args []string) error {
	fl := flag.NewFlagSet("serve", flag.ContinueOnError)
	mnt := fl.String("mnt", "", "mount point `dir`")
	transport := fl.String("transport", "dev", "`dev` (read/write on /dev/fuse) or uring (FUSE over io_uring)")
	readers := fl.Int("readers", 1, "threads reading /dev/fuse (dev transport)")
	depth := fl.Int("depth", 8, "entries per io_uring queue")
	pin := fl.Bool("pin", true, "pin each io_uring queue's thread to its CPU")
	payload := fl.Int("payload-size", payloadSize, "`bytes` of each io_uring entry's payload buffer (the kernel requires 128 KiB here)")
	deferTaskrun := fl.Bool("defer-taskrun", false, "set up the rings with IORING_SETUP_SINGLE_ISSUER|IORING_SETUP_DEFER_TASKRUN")
	directIO := fl.Bool("direct-io", true, "open the file with FOPEN_DIRECT_IO, so every read reaches the server")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *mnt == "" {
		return errors.New("serve: -mnt is required")
	}
	if *transport != "dev" && *transport != "uring" {
		return fmt.Errorf("serve: unknown transport %q", *transport)
	}
	if *readers < 1 || *depth < 1 || *depth > 4096 || *payload < 4096 {
		return errors.New("serve: -readers and -depth must be at least 1 (depth at most 4096), -payload-size at least 4096")
	}
	s := &server{data: make([]byte, fileSize), directIO: *directIO}
	for i := range s.data {
		s.data[i] = byte('a' + i%26)
	}
	if err := s.mountAndInit(*mnt, *transport == "uring"); err != nil {
		_ = unix.Unmount(*mnt, unix.MNT_DETACH) // if mounted: no dead mount left behind
		return err
	}
	errs := make(chan error, 64)
	ready := "ready transport=dev readers=" + strconv.Itoa(*readers)
	if *transport == "uring" {
		nq, err := possibleCPUs()
		if err != nil {
			_ = unix.Unmount(*mnt, unix.MNT_DETACH)
			return err
		}
		for qid := range nq {
			q := &uringQueue{s: s, qid: qid, ready: make(chan error, 1)}
			go func() { errs <- q.run(*depth, *payload, *pin, *deferTaskrun) }()
			if err := <-q.ready; err != nil {
				_ = unix.Unmount(*mnt, unix.MNT_DETACH)
				return err
			}
		}
		ready = fmt.Sprintf("ready transport=uring queues=%d depth=%d", nq, *depth)
		*readers = 1 // FORGET and INTERRUPT still come through /dev/fuse
	}
	var devDone sync.WaitGroup
	for range *readers {
		devDone.Go(func() { errs <- s.serveDev() })
	}
	var outMu sync.Mutex // serialises lines on stdout
	say := func(line string) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Println(line)
	}
	say(ready)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "counts" {
				say("counts " + s.countsJSON())
			}
		}
	}()
	devDone.Wait()
	say("counts " + s.countsJSON())
	for {
		select {
		case err := <-errs:
			if err != nil {
				return err
			}
		default:
			return nil
		}
	}
}
