//go:build linux

package main

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// io_uring ABI (include/uapi/linux/io_uring.h).
const (
	ioringSetupCQSize   = 1 << 3
	ioringSetupSQE128   = 1 << 10
	ioringSetupSingle   = 1 << 12 // IORING_SETUP_SINGLE_ISSUER
	ioringSetupDeferTR  = 1 << 13 // IORING_SETUP_DEFER_TASKRUN
	ioringEnterGetEvent = 1 << 0
	ioringFeatSingleMap = 1 << 0
	ioringOffSQRing     = 0
	ioringOffCQRing     = 0x8000000
	ioringOffSQEs       = 0x10000000
	ioringOpURingCmd    = 46
	sqe128Size          = 128
	cqeSize             = 16
	sqeCmdOffset        = 48 // the command area of IORING_OP_URING_CMD (80 bytes with SQE128)
)

// uringParams is struct io_uring_params.
type uringParams struct {
	SQEntries, CQEntries, Flags, SQThreadCPU, SQThreadIdle, Features, WQFd uint32
	Resv                                                                   [3]uint32
	SQOff                                                                  struct {
		Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
		UserAddr                                                        uint64
	}
	CQOff struct {
		Head, Tail, RingMask, RingEntries, Overflow, CQEs, Flags, Resv1 uint32
		UserAddr                                                        uint64
	}
}

// ring is one io_uring instance with 128-byte SQEs, used by one goroutine locked to its thread.
type ring struct {
	fd             int
	sqRing, cqRing []byte
	sqes           []byte
	sqHead, sqTail *uint32
	sqMask         uint32
	sqArray        []uint32
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []byte
	pending        uint32 // SQEs queued since the last enter
	sqEntries      uint32
	singleMap      bool
}

func u32at(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

// newRing makes a ring; with deferTaskrun, completions' task work (the kernel's copy of a FUSE
// request into the entry's buffers) runs only when this thread waits in io_uring_enter, not
// on a signal-like interruption (IORING_SETUP_SINGLE_ISSUER|IORING_SETUP_DEFER_TASKRUN: only
// the creating thread may submit).
func newRing(entries uint32, deferTaskrun bool) (*ring, error) {
	p := uringParams{Flags: ioringSetupSQE128 | ioringSetupCQSize, CQEntries: 2 * entries}
	if deferTaskrun {
		p.Flags |= ioringSetupSingle | ioringSetupDeferTR
	}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd), sqEntries: p.SQEntries, singleMap: p.Features&ioringFeatSingleMap != 0}
	sqLen := int(p.SQOff.Array + p.SQEntries*4)
	cqLen := int(p.CQOff.CQEs + p.CQEntries*cqeSize)
	if r.singleMap {
		sqLen = max(sqLen, cqLen)
	}
	var err error
	if r.sqRing, err = unix.Mmap(r.fd, ioringOffSQRing, sqLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		r.close()
		return nil, fmt.Errorf("mmap sq ring: %w", err)
	}
	r.cqRing = r.sqRing
	if !r.singleMap {
		if r.cqRing, err = unix.Mmap(r.fd, ioringOffCQRing, cqLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			r.close()
			return nil, fmt.Errorf("mmap cq ring: %w", err)
		}
	}
	if r.sqes, err = unix.Mmap(r.fd, ioringOffSQEs, int(p.SQEntries)*sqe128Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		r.close()
		return nil, fmt.Errorf("mmap sqes: %w", err)
	}
	r.sqHead, r.sqTail = u32at(r.sqRing, p.SQOff.Head), u32at(r.sqRing, p.SQOff.Tail)
	r.sqMask = *u32at(r.sqRing, p.SQOff.RingMask)
	r.sqArray = unsafe.Slice(u32at(r.sqRing, p.SQOff.Array), p.SQEntries)
	r.cqHead, r.cqTail = u32at(r.cqRing, p.CQOff.Head), u32at(r.cqRing, p.CQOff.Tail)
	r.cqMask = *u32at(r.cqRing, p.CQOff.RingMask)
	r.cqes = r.cqRing[p.CQOff.CQEs : int(p.CQOff.CQEs)+int(p.CQEntries)*cqeSize]
	return r, nil
}

func (r *ring) close() {
	if r.sqes != nil {
		_ = unix.Munmap(r.sqes)
	}
	if r.cqRing != nil && !r.singleMap {
		_ = unix.Munmap(r.cqRing)
	}
	if r.sqRing != nil {
		_ = unix.Munmap(r.sqRing)
	}
	_ = unix.Close(r.fd)
}

// getSQE returns the next free SQE, zeroed, or nil when the submission queue is full.
func (r *ring) getSQE() []byte {
	head := atomic.LoadUint32(r.sqHead)
	tail := *r.sqTail + r.pending
	if tail-head >= r.sqEntries {
		return nil
	}
	i := tail & r.sqMask
	r.sqArray[i] = i
	r.pending++
	sqe := r.sqes[int(i)*sqe128Size : int(i+1)*sqe128Size]
	clear(sqe)
	return sqe
}

// prepURingCmd fills sqe as IORING_OP_URING_CMD cmdOp on fd, with user data ud.
func prepURingCmd(sqe []byte, fd int, cmdOp uint32, ud uint64) {
	sqe[0] = ioringOpURingCmd
	putU32(sqe[4:], uint32(fd))
	putU32(sqe[8:], cmdOp)
	putU64(sqe[32:], ud)
}

// enter publishes the queued SQEs and, with wait, blocks until at least one completion.
func (r *ring) enter(wait bool) (int, error) {
	n := r.pending
	if n > 0 {
		atomic.StoreUint32(r.sqTail, *r.sqTail+n)
		r.pending = 0
	}
	var flags, minComplete uintptr
	if wait {
		flags, minComplete = ioringEnterGetEvent, 1
	}
	for {
		got, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), minComplete, flags, 0, 0)
		if errno == unix.EINTR {
			n = 0
			continue
		}
		if errno != 0 {
			return int(got), fmt.Errorf("io_uring_enter: %w", errno)
		}
		return int(got), nil
	}
}

// cqe is one completion: the user data of its SQE and the result (a negative errno on error).
type cqe struct {
	UserData uint64
	Res      int32
}

// reap appends the available completions to dst and consumes them.
func (r *ring) reap(dst []cqe) []cqe {
	head := *r.cqHead
	tail := atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		b := r.cqes[int(head&r.cqMask)*cqeSize:]
		dst = append(dst, cqe{UserData: getU64(b[0:]), Res: int32(getU32(b[8:]))})
	}
	atomic.StoreUint32(r.cqHead, head)
	return dst
}
