//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// What the kernel sees of a traced job that the recording layer does not: the legs of each
// FUSE request outside the server, and the reads and writes that kernel passthrough serves
// without the server. Times are bpf_ktime_get_ns (CLOCK_MONOTONIC). Records go to a ring
// buffer without waking the reader, which drains it on a timer, unless the ring is filling.
//
// # Legs of FUSE requests (REC_REQ, REC_CALL)
//
// For every request of one FUSE connection this program emits, when the kernel completes
// it, a REQ record: when the kernel queued it (fuse_request_send), when it completed it
// (fuse_request_end), the thread that sent it, and the entry time and number of the system
// call that thread was in. For every system call that sent at least one request it emits,
// when the call returns, a CALL record, unless the call's last request is still in flight
// (a release the kernel sends without waiting): that request's record then carries the
// return. The entry time is not read for calls that name no file (futex, nanosleep,
// clock_nanosleep, clock_gettime, sched_yield, getpid, getppid, gettid, rt_sigprocmask,
// io_getevents, io_pgetevents), nor for reads and writes of files outside the mount: a request one of them sends (a page
// fault, while it copies its buffer, on a mapped file of the mount that the server serves)
// has no known entry.
//
// For each call it also gives the time its thread spent runnable but waiting for a CPU
// since its previous call that reached the mount returned (the scheduler's run_delay), so
// that a replay can tell the application's own time between calls from time it lost to
// other tasks; and who ended the thread's wait when it had one between two calls: the last
// wake-up (sched_waking) by a thread the program follows while in a system call, or by
// anything else (0). A thread blocked in pthread_join, wait4 or on a pipe is woken by the
// thread or process it waited for.
//
// # Calls that kernel passthrough serves (REC_DATA, REC_ASYNC)
//
// A file the server opened with FOPEN_PASSTHROUGH is read and written by the kernel on the
// backing file, in the application's thread: the server never sees those calls. For the
// system calls read, write, pread64, pwrite64, readv, writev, preadv, pwritev, preadv2 and
// pwritev2 on such a file of the traced mount (the descriptor resolved through the task's
// file table: its super block is the mount's, its struct fuse_file has a backing file),
// and sendfile and splice with such a file on either side, the program emits a DATA record
// when the call returns: entry and return, the file's handle and node id, offset, size
// asked and result (a sendfile or splice between two such files: a copy, with both). Asynchronous reads and writes are
// timed from submission to completion: libaio's io_submit to the io_getevents or
// io_pgetevents call that reaps the event (as fio times them), io_uring's submission to
// the completion the kernel posts (io_uring_submit_req, io_uring_complete). Each becomes an
// ASYNC record. Submissions whose completion cannot be matched (io_uring's registered
// files, more iocbs in one call than MAX_IOCBS) are counted, not timed.
//
// A data call takes part in the legs' accounting as a call that reached the mount: it
// follows its thread, and it carries the run delay and wake-up since the thread's previous
// such call.
//
// # Mapped files (REC_FAULT)
//
// A passthrough file mapped into memory is read and written by page faults, which the
// kernel serves on the backing file (its mmap hands the mapping over to the backing file):
// no system call and no request names them. At the return of an mmap system call that
// mapped such a file of the mount, the program notes the backing file's page cache (its
// struct address_space) in the table of mapped files, with the file's handle and node id.
// Then each of these, on a noted page cache, becomes a FAULT record (a data record: the
// pages, the handle, the faulting thread, no system call, start = end, as no tracepoint
// marks a fault's end):
//
//   - mm_filemap_fault: a fault that went to the page cache for its page (fault-around had
//     not mapped it), reading it from the file when the page cache did not hold it: a read
//     of the folio that holds the page, which the kernel maps whole where it can. When the
//     page cache does not hold it yet, the fault reads it in; the record waits for the
//     thread's next entry into the kernel (a system call, or another fault), when the
//     folio is there, and keeps the fault's time;
//   - mm_filemap_map_pages: fault-around, which maps the pages of a window around the
//     faulting address that the page cache holds, and a large folio at either end of the
//     window whole where it can: a read of the window widened to those folios (pages of it
//     the page cache did not hold are in it but were not mapped);
//   - writeback_dirty_folio in a thread that entered the kernel by a page fault (not a
//     system call, not a kernel thread): a store through a shared mapping made a clean
//     folio dirty; a write of the folio. Stores to a folio already dirty fault no more
//     until writeback cleans it, and a system call that writes into a mapped buffer
//     (read(2) into it) is not taken for a store through the map.
//
// Of two consecutive read ranges of one thread on one file, the second leaves out the part
// at its start or end that the first covered (a fault-around window after the fault that
// read its first page, a retried fault). Offsets are the pages' (the kernel's page size),
// ranges stop at the file's last page and the bytes done at its size. A backing file
// system that serves its own faults and keeps no dirty-page accounting (tmpfs: shmem_fault,
// no dirty_folio) shows its fault-around only. A mapping made before the program watched
// the mount, or by execve (a program's image), was not seen: its faults are not recorded.
// The table holds MAX_MAPPED page caches; it keeps each until the table is full, when an
// mmap clears the entries of files no longer mapped anywhere (their page cache has no
// mapping left) or whose inode is gone; an mmap that still finds it full is counted
// (CNT_MAPS_FULL) and its faults not recorded. A page cache is its backing file's: faults
// on it by a task that mapped the backing file directly, outside the mount, are taken for
// the mount's (with job_only, only the job's tasks count). A file mapped through several
// opens has the handle of the latest mmap.
//
// # Cost
//
// sys_enter and sys_exit run for every system call of the host. A task that has no BPF
// task storage (when only the job can reach the mount, as in a recorder's private mount
// namespace: every task outside the job) costs one load per call; a job task's call, one
// task-storage lookup at each end, and a read of the clock at its entry once the thread
// has reached the mount, except for the calls that name no file; a job task's read or
// write costs the descriptor's resolution (a few direct loads); only calls on the mount's
// files read the clock at their return, and only those on its passthrough files store and
// emit anything (one ring-buffer record). An mmap of a file (not anonymous memory) costs
// the same resolution. sched_waking runs for every wake-up of the host: it loads a field
// of the woken task, and looks its state up when it has task storage. The fault tracepoints run for every page fault on a file of the host, and
// writeback_dirty_folio for every page any task makes dirty: they test one global until
// a passthrough file has been mapped, and from then on also look the page cache up in the
// table of mapped files.
//
// Build: see ../gen.go (bpf2go); the objects are committed.

#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// System call numbers, per architecture.
#if defined(__TARGET_ARCH_x86)
#define NR_READ 0
#define NR_WRITE 1
#define NR_PREAD64 17
#define NR_PWRITE64 18
#define NR_READV 19
#define NR_WRITEV 20
#define NR_PREADV 295
#define NR_PWRITEV 296
#define NR_PREADV2 327
#define NR_PWRITEV2 328
#define NR_SENDFILE 40
#define NR_SPLICE 275
#define NR_IO_SUBMIT 209
#define NR_IO_GETEVENTS 208
#define NR_IO_PGETEVENTS 333
#define NR_MMAP 9
#define NR_FUTEX 202
#define NR_NANOSLEEP 35
#define NR_CLOCK_NANOSLEEP 230
#define NR_CLOCK_GETTIME 228
#define NR_SCHED_YIELD 24
#define NR_GETPID 39
#define NR_GETPPID 110
#define NR_GETTID 186
#define NR_RT_SIGPROCMASK 14
#elif defined(__TARGET_ARCH_arm64)
#define NR_READ 63
#define NR_WRITE 64
#define NR_READV 65
#define NR_WRITEV 66
#define NR_PREAD64 67
#define NR_PWRITE64 68
#define NR_PREADV 69
#define NR_PWRITEV 70
#define NR_PREADV2 286
#define NR_PWRITEV2 287
#define NR_SENDFILE 71
#define NR_SPLICE 76
#define NR_IO_SUBMIT 2
#define NR_IO_GETEVENTS 4
#define NR_IO_PGETEVENTS 292
#define NR_MMAP 222
#define NR_FUTEX 98
#define NR_NANOSLEEP 101
#define NR_CLOCK_NANOSLEEP 115
#define NR_CLOCK_GETTIME 113
#define NR_SCHED_YIELD 124
#define NR_GETPID 172
#define NR_GETPPID 173
#define NR_GETTID 178
#define NR_RT_SIGPROCMASK 135
#endif

#define S_IFMT 00170000
#define S_IFREG 0100000

// A system call's arguments, from the registers the system call entry tracepoint gives: on
// x86 a direct load from the tracepoint's (trusted) pointer, elsewhere a CO-RE read.
#if defined(__TARGET_ARCH_x86)
#define ARG1(r) ((r)->di)
#define ARG2(r) ((r)->si)
#define ARG3(r) ((r)->dx)
#define ARG4(r) ((r)->r10)
#define ARG5(r) ((r)->r8)
#else
#define ARG1(r) PT_REGS_PARM1_CORE_SYSCALL(r)
#define ARG2(r) PT_REGS_PARM2_CORE_SYSCALL(r)
#define ARG3(r) PT_REGS_PARM3_CORE_SYSCALL(r)
#define ARG4(r) PT_REGS_PARM4_CORE_SYSCALL(r)
#define ARG5(r) PT_REGS_PARM5_CORE_SYSCALL(r)
#endif

// Kinds of records.
enum rec_kind { REC_REQ = 1, REC_CALL = 2, REC_DATA = 3, REC_ASYNC = 4, REC_FAULT = 5 };

// Directions of a data call.
enum data_op { DATA_READ = 1, DATA_WRITE = 2, DATA_COPY = 3 };

// Counters (per CPU).
enum counter {
	CNT_LOST = 0,      // records the ring had no room for
	CNT_UNMATCHED = 1, // completions of requests whose queueing was not seen
	CNT_REQS = 2,      // request records
	CNT_CALLS = 3,     // calls that sent requests
	CNT_DATA = 4,      // data calls on passthrough files, synchronous
	CNT_ASYNC = 5,     // asynchronous ones completed
	CNT_UNSEEN = 6,    // asynchronous submissions on passthrough files not timed
	CNT_LOST_DATA = 7, // of the lost records, data calls' and faults'
	CNT_MAPS = 8,      // mmaps of passthrough files noted in the table of mapped files
	CNT_FAULTS = 9,    // fault records of mapped files
	CNT_MAPS_FULL = 10, // mmaps of passthrough files the full table could not take
	CNT_MAX = 11,
};

// Set by user space once the mount exists (0: measure nothing).
volatile u32 target_dev = 0;  // the FUSE connection: its super block's s_dev (major<<20|minor)
volatile u32 daemon_tgid = 0; // the server's thread group: its own requests are not callers'
volatile u32 data_calls = 0;  // time passthrough reads and writes (1) or not (0)
volatile u64 ring_wake = 4 << 20; // bytes in the ring above which a record wakes the reader
volatile u32 job_only = 0;    // only the job reaches the mount: tasks the server's process
                              // starts, and their descendants (job tasks, task.job)
volatile u32 page_shift = 12; // log2 of the kernel's page size
volatile u32 maps_noted = 0;  // set by the program once a mapped file is in the table

// A REQ record: one request the kernel completed.
struct req_rec {
	u16 kind;
	u16 nr;          // the sender's system call (valid when enter != 0)
	u32 tid;         // the sending thread (0: the server's own, or the kernel's)
	u64 unique;      // the request
	u64 queued;      // fuse_request_send
	u64 done;        // fuse_request_end
	u64 enter;       // entry of the sender's system call (0: unknown, or none)
	u64 think_rd;    // the sender's run delay since its previous call, plus 1 (0: unknown)
	u64 call_end;    // the sender's call returned before the request completed (0: not)
	u64 woken;       // the sender's last wake-up before its call (0: none)
	u32 waker;       // the followed thread that woke it then (0: none, or another)
	s32 error;       // the reply's error
	u32 opcode;      // FUSE opcode
	u32 pad;
};

// A CALL record: a system call that sent requests returned.
struct call_rec {
	u16 kind;
	u16 nr;
	u32 tid;
	u64 unique; // the last request the call sent
	u64 enter;  // entry (0: unknown)
	u64 exit;   // return
	u64 nreq;   // requests it sent
};

// A DATA or ASYNC record: a read or write kernel passthrough served; a FAULT record: pages
// of a mapped file faulted in (op DATA_READ) or made dirty (DATA_WRITE), nr 0.
struct data_rec {
	u16 kind;
	u16 nr;       // the system call (io_submit, io_uring_enter for ASYNC)
	u32 tid;      // the calling (submitting) thread
	u32 pid;      // its thread group
	u32 uid;
	u32 gid;
	u32 op;       // enum data_op (a copy: from fh to fh2, sendfile or splice between two such files)
	u64 fh;       // the FUSE file handle the server gave the open
	u64 node;     // the FUSE node id
	s64 pos;      // file offset
	u64 fh2;      // DATA_COPY: the file written
	u64 node2;
	s64 pos2;
	u64 size;     // bytes asked
	s64 ret;      // bytes done, or -errno
	u64 start;    // entry (submission)
	u64 end;      // return (completion)
	u64 call_end; // ASYNC: the submitting call's return (0: unknown)
	u64 think_rd; // run delay since the thread's previous call that reached the mount, plus 1
	u64 woken;    // the thread's last wake-up before the call (0: none)
	u32 waker;    // who woke it (see req_rec)
	u32 pad;
};

// Per-thread state, in task-local storage.
struct task {
	// Legs.
	u64 enter;       // entry time of the system call in progress
	u64 last_unique; // the last request it sent
	u64 rd_exit;     // run_delay when its last call that reached the mount returned (0: unknown)
	u64 think_rd;    // run delay since then as of the call in progress, plus 1 (0: unknown)
	u64 woken;       // the last wake-up since that call (0: none)
	u32 waker;       // who woke it then
	u32 nr;          // the call in progress
	u32 nreq;        // requests it sent so far
	u8 followed;     // it reached the mount (a request or a data call)
	u8 in_call;      // between sys_enter and sys_exit
	u8 think_taken;  // think_rd is set for the call in progress
	u8 data;         // the call in progress is a data call on a passthrough file (d_* below)
	u8 job;          // a task of the job (job_only)
	u8 reached;      // sys_exit: the call reached the mount (kept here, not in a register, so
	                 // that the verifier does not tell apart the paths that set it)
	// The data call in progress: the file read or written (a copy: read), and for a copy
	// the file written.
	u64 d_file; // struct file *
	u64 d_fh;
	u64 d_node;
	s64 d_pos;  // offset given (-1: the file position)
	u64 d_file2;
	u64 d_fh2;
	u64 d_node2;
	s64 d_pos2;
	u64 d_size;
	u32 d_op;
	u8 d_fpos;  // the call moves d_file's position (no offset given)
	u8 d_fpos2; // and d_file2's
	u16 pad;
	// io_submit in progress: its iocb array, to date the submissions' return.
	u64 aio_iocbs;
	u64 aio_nr;
	// io_getevents in progress: its event array.
	u64 aio_events;
	// mmap in progress of a passthrough file: the backing file's page cache (struct
	// address_space *), the file's handle and node.
	u64 m_mapping;
	u64 m_fh;
	u64 m_node;
	// The pages of the thread's last read fault on a noted page cache.
	u64 f_mapping;
	u64 f_lo;
	u64 f_hi;
	// A fault on a page the page cache did not hold yet (mm_filemap_fault): its page cache,
	// page and time, for the thread's next entry into the kernel, when the folio the fault
	// read in and mapped is there.
	u64 p_mapping;
	u64 p_index;
	u64 p_time;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task);
} tasks SEC(".maps");

struct send {
	u64 queued;
	u64 enter;
	u64 think_rd;
	u64 call_end;
	u64 woken;
	u32 waker;
	u32 tid;
	u32 nr;
	u32 opcode;
};

// Hash maps allocate their entries as they are used (an LRU map fills all of them when it
// is made, a cost every recording would pay at its start); a full one refuses the newest
// entry, whose completion then counts as unmatched.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, struct send);
} sends SEC(".maps");

// An asynchronous submission in flight: libaio's keyed by (thread group, iocb address),
// io_uring's by the kernel's request.
struct async_key {
	u64 id;  // iocb address (libaio) or struct io_kiocb address (io_uring)
	u32 tgid;
	u32 pad;
};

struct async {
	u64 start;
	u64 call_end;
	u64 fh;
	u64 node;
	s64 pos;
	u64 size;
	u64 think_rd;
	u64 woken;
	u32 waker;
	u32 tid;
	u32 pid;
	u32 uid;
	u32 gid;
	u32 op;
	u32 nr;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct async_key);
	__type(value, struct async);
} asyncs SEC(".maps");

// A mapped passthrough file, by the page cache of its backing file. The inode and its
// number tell a page cache of the same address that a later inode took apart.
struct mapped {
	u64 fh;
	u64 node;
	u64 host; // struct inode *
	u64 ino;
};

#define MAX_MAPPED 16384

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_MAPPED);
	__type(key, u64); // struct address_space *
	__type(value, struct mapped);
} mapped SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

// Force the types into the object's BTF for bpf2go (-type).
const struct req_rec *unused_req_rec __attribute__((unused));
const struct call_rec *unused_call_rec __attribute__((unused));
const struct data_rec *unused_data_rec __attribute__((unused));
const enum rec_kind *unused_rec_kind __attribute__((unused));
const enum data_op *unused_data_op __attribute__((unused));
const enum counter *unused_counter __attribute__((unused));

static __always_inline void count(u32 i)
{
	u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		(*c)++;
}

// reserve takes room for a record in the ring, or counts it lost (data: a data call's).
static __always_inline void *reserve(u64 size, bool data)
{
	void *r = bpf_ringbuf_reserve(&ring, size, 0);
	if (!r) {
		count(CNT_LOST);
		if (data)
			count(CNT_LOST_DATA);
	}
	return r;
}

// submit hands a record to user space. The reader drains the ring on a timer; it is woken
// only when the ring is a quarter full.
static __always_inline void submit(void *r)
{
	u64 flags = BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_query(&ring, BPF_RB_AVAIL_DATA) > ring_wake)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(r, flags);
}

// task_of returns task's state, or 0. A task with no BPF task storage at all (most tasks of
// the host: they never reached the mount, nor took part in the job) is told by one load,
// without the lookup's helper call.
static __always_inline struct task *task_of(struct task_struct *task)
{
	if (!task->bpf_storage)
		return 0;
	return bpf_task_storage_get(&tasks, task, 0, 0);
}

static __always_inline u64 run_delay(struct task_struct *task)
{
	return task->sched_info.run_delay;
}

// think sets the run delay since the thread's previous call that reached the mount, once
// per call, as of its first request or its data call.
static __always_inline void think(struct task *t, struct task_struct *task)
{
	if (t->think_taken)
		return;
	t->think_taken = 1;
	t->think_rd = 0;
	if (t->rd_exit != 0)
		t->think_rd = run_delay(task) - t->rd_exit + 1;
}

// --- Legs of FUSE requests ---

// FUSE opcodes without a reply; interrupts (odd ids) are not followed either.
#define FUSE_FORGET 2
#define FUSE_BATCH_FORGET 42

static __always_inline u32 req_conn(const struct fuse_req *req)
{
	struct fuse_mount *fm = req->fm;
	if (!fm)
		return 0;
	struct fuse_conn *fc = fm->fc;
	if (!fc)
		return 0;
	return fc->dev;
}

SEC("tp_btf/fuse_request_send")
int BPF_PROG(request_send, const struct fuse_req *req)
{
	if (target_dev == 0 || req_conn(req) != target_dev)
		return 0;
	u64 unique = req->in.h.unique;
	u32 opcode = req->in.h.opcode;
	if (opcode == FUSE_FORGET || opcode == FUSE_BATCH_FORGET || (unique & 1))
		return 0;
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id, tgid = id >> 32;
	struct send s = { .queued = bpf_ktime_get_ns(), .opcode = opcode };
	if (tgid != daemon_tgid && tid != 0) {
		s.tid = tid;
		struct task_struct *task = bpf_get_current_task_btf();
		struct task *t = bpf_task_storage_get(&tasks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (t) {
			if (!t->followed) {
				// The thread's first request: follow it from now on. The call in
				// progress is one whose entry was not seen; its return will be.
				t->followed = 1;
				t->in_call = 1;
			}
			if (t->in_call) {
				think(t, task);
				s.enter = t->enter;
				s.nr = t->nr;
				s.think_rd = t->think_rd;
				s.woken = t->woken;
				s.waker = t->waker;
				t->last_unique = unique;
				t->nreq++;
			}
		}
	}
	bpf_map_update_elem(&sends, &unique, &s, BPF_ANY);
	return 0;
}

SEC("tp_btf/fuse_request_end")
int BPF_PROG(request_end, const struct fuse_req *req)
{
	if (target_dev == 0 || req_conn(req) != target_dev)
		return 0;
	u64 now = bpf_ktime_get_ns();
	u64 unique = req->in.h.unique;
	struct send *s = bpf_map_lookup_elem(&sends, &unique);
	if (!s) {
		count(CNT_UNMATCHED);
		return 0;
	}
	struct req_rec *r = reserve(sizeof(*r), false);
	if (r) {
		r->kind = REC_REQ;
		r->nr = s->nr;
		r->tid = s->tid;
		r->unique = unique;
		r->queued = s->queued;
		r->done = now;
		r->enter = s->enter;
		r->think_rd = s->think_rd;
		r->call_end = s->call_end;
		r->woken = s->woken;
		r->waker = s->waker;
		r->error = req->out.h.error;
		r->opcode = s->opcode;
		r->pad = 0;
		submit(r);
		count(CNT_REQS);
	}
	bpf_map_delete_elem(&sends, &unique);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking, struct task_struct *p)
{
	struct task *t = task_of(p);
	if (!t || !t->followed || (t->in_call && (t->nreq > 0 || t->data)))
		return 0; // not followed, or in a call that reached the mount (a FUSE reply)
	struct task_struct *cur = bpf_get_current_task_btf();
	u32 waker = cur->pid;
	if (waker == (u32)p->pid)
		return 0;
	t->woken = bpf_ktime_get_ns();
	t->waker = 0;
	// The waker is a followed thread in a system call (a futex wake, its exit, a pipe
	// write). A wake-up from an interrupt (a timer) is nobody's: whatever ran is current,
	// and a followed thread caught in user space is not taken for the waker.
	struct task *w = task_of(cur);
	if (w && w->followed && w->in_call && (u32)cur->tgid != daemon_tgid)
		t->waker = waker;
	return 0;
}

// --- Calls that kernel passthrough serves ---

// as_file and as_fuse_file turn an address read as a number into a pointer the program may
// load from directly (PROBE_MEM loads: a fault reads 0), cheaper than a helper call per field.
static __always_inline struct file *as_file(u64 p)
{
	return bpf_rdonly_cast((void *)p, bpf_core_type_id_kernel(struct file));
}

static __always_inline struct fuse_file *as_fuse_file(void *p)
{
	return bpf_rdonly_cast(p, bpf_core_type_id_kernel(struct fuse_file));
}

// fd_file returns the open file of descriptor fd of the current task, or 0.
static __always_inline struct file *fd_file(struct task_struct *task, u64 fd)
{
	struct files_struct *files = task->files;
	if (!files)
		return 0;
	struct fdtable *fdt = files->fdt;
	if (!fdt || fd >= fdt->max_fds)
		return 0;
	struct file **fds = fdt->fd;
	u64 f = 0;
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	if (!f)
		return 0;
	return as_file(f);
}

// mount_inode returns the inode of f when f is a file of the traced mount, else 0.
static __always_inline struct inode *mount_inode(struct file *f)
{
	if (!f)
		return 0;
	struct inode *ino = f->f_inode;
	if (!ino)
		return 0;
	struct super_block *sb = ino->i_sb;
	if (!sb || sb->s_dev != target_dev)
		return 0;
	return ino;
}

// passthrough_of returns the struct fuse_file of f, a file of the traced mount whose inode
// is ino, when kernel passthrough serves its reads and writes, else 0.
static __always_inline struct fuse_file *passthrough_of(struct file *f, struct inode *ino)
{
	// A FIFO or device node of the mount is not a struct fuse_file.
	if ((ino->i_mode & S_IFMT) != S_IFREG)
		return 0;
	void *priv = f->private_data;
	if (!priv)
		return 0;
	struct fuse_file *ff = as_fuse_file(priv);
	if (!ff->passthrough)
		return 0;
	return ff;
}

// passthrough returns the struct fuse_file of f when f is a file of the traced mount whose
// reads and writes kernel passthrough serves, else 0.
static __always_inline struct fuse_file *passthrough(struct file *f)
{
	struct inode *ino = mount_inode(f);
	if (!ino)
		return 0;
	return passthrough_of(f, ino);
}

#define MAX_IOVS 16

struct iov_ctx {
	u64 uiov; // user address of the array
	u64 n;    // its entries
	u64 sum;
};

static long iov_add(u64 i, void *data)
{
	struct iov_ctx *c = data;
	struct iovec iov;
	if (i >= c->n || bpf_probe_read_user(&iov, sizeof(iov), (void *)(c->uiov + i * sizeof(iov))) != 0)
		return 1;
	c->sum += iov.iov_len;
	return 0;
}

// iov_size returns the bytes an iovec array of n entries at uiov asks for, counting its
// first MAX_IOVS entries. A bpf_loop: the verifier checks one entry, not MAX_IOVS of them
// at every place the size is taken.
static __always_inline u64 iov_size(u64 uiov, u64 n)
{
	struct iov_ctx c = { .uiov = uiov, .n = n };
	bpf_loop(MAX_IOVS, iov_add, &c, 0);
	return c.sum;
}

// call_shape describes system call nr when it reads or writes a file: its direction,
// whether it takes an offset argument (4th), and whether it takes an iovec array. op 0:
// not such a call. sendfile and splice, which move data between two descriptors, are
// shaped in begin_move. nofile: a call that names no file and waits, or asks for ids,
// the time or the signal mask (futex, nanosleep, clock_nanosleep, clock_gettime,
// sched_yield, getpid, getppid, gettid, rt_sigprocmask, io_getevents, io_pgetevents).
struct call_shape {
	u8 op, offset, vec, nofile;
};

// shape_bits is shape's switch as a global function: the verifier checks it once, and its
// callers get a value it does not know, so that it checks what follows once for every data
// call rather than once for each system call of the switch. op, offset<<8, vec<<16,
// nofile<<24.
__noinline int shape_bits(long nr)
{
	switch (nr) {
	case NR_FUTEX: case NR_NANOSLEEP: case NR_CLOCK_NANOSLEEP: case NR_CLOCK_GETTIME:
	case NR_SCHED_YIELD: case NR_GETPID: case NR_GETPPID: case NR_GETTID: case NR_RT_SIGPROCMASK:
	case NR_IO_GETEVENTS: case NR_IO_PGETEVENTS:
		return 1 << 24;
	case NR_READ: return DATA_READ;
	case NR_WRITE: return DATA_WRITE;
	case NR_PREAD64: return DATA_READ | 1 << 8;
	case NR_PWRITE64: return DATA_WRITE | 1 << 8;
	case NR_READV: return DATA_READ | 1 << 16;
	case NR_WRITEV: return DATA_WRITE | 1 << 16;
	case NR_PREADV: case NR_PREADV2: return DATA_READ | 1 << 8 | 1 << 16;
	case NR_PWRITEV: case NR_PWRITEV2: return DATA_WRITE | 1 << 8 | 1 << 16;
	}
	return 0;
}

static __always_inline struct call_shape shape(long nr)
{
	int b = shape_bits(nr);
	struct call_shape s = { .op = b & 0xff, .offset = (b >> 8) & 1, .vec = (b >> 16) & 1, .nofile = (b >> 24) & 1 };
	return s;
}

// data_task readies the thread's state t (0: make it) for a data call nr, following the
// thread from now on.
static __always_inline struct task *data_task(struct task *t, struct task_struct *task, long nr)
{
	if (!t) {
		t = bpf_task_storage_get(&tasks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!t)
			return 0;
	}
	if (!t->followed) {
		t->followed = 1;
		t->enter = bpf_ktime_get_ns();
		t->nr = (u32)nr;
		t->nreq = 0;
		t->in_call = 1;
		t->think_taken = 0;
	}
	think(t, task);
	t->data = 1;
	t->d_fh2 = t->d_node2 = t->d_file2 = 0;
	t->d_pos2 = 0;
	t->d_fpos = t->d_fpos2 = 0;
	return t;
}

// begin_data notes a read or write on a passthrough file in the thread's state. A followed
// thread's call on a file of the mount gets its entry time here (see sys_enter).
static __always_inline void begin_data(struct task *t, struct task_struct *task, struct pt_regs *regs, long nr, struct call_shape cs)
{
	struct file *f = fd_file(task, ARG1(regs));
	struct inode *ino = mount_inode(f);
	if (!ino)
		return;
	if (t && t->followed)
		t->enter = bpf_ktime_get_ns();
	struct fuse_file *ff = passthrough_of(f, ino);
	if (!ff)
		return;
	t = data_task(t, task, nr);
	if (!t)
		return;
	t->d_file = (u64)f;
	t->d_fh = ff->fh;
	t->d_node = ff->nodeid;
	t->d_op = cs.op;
	t->d_pos = -1;
	if (cs.offset) {
		s64 off = (s64)ARG4(regs);
		if (off >= 0)
			t->d_pos = off; // preadv2/pwritev2 take -1 for the file position
	}
	if (t->d_pos < 0) {
		t->d_pos = f->f_pos;
		t->d_fpos = 1;
	}
	u64 n = ARG3(regs);
	t->d_size = cs.vec ? iov_size(ARG2(regs), n) : n;
}

// fd_addr returns the address of the open file of descriptor fd of task, or 0.
static __always_inline u64 fd_addr(struct task_struct *task, u64 fd)
{
	struct files_struct *files = task->files;
	if (!files)
		return 0;
	struct fdtable *fdt = files->fdt;
	if (!fdt || fd >= fdt->max_fds)
		return 0;
	struct file **fds = fdt->fd;
	u64 f = 0;
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f;
}

// passthrough_addr is passthrough for a file's address, with helper reads: sendfile and
// splice, rare beside reads and writes, keep to plain numbers, which the verifier follows
// through their two sides where it would refuse a mix of kernel pointers.
static __always_inline u64 passthrough_addr(u64 file)
{
	if (!file)
		return 0;
	struct file *f = (struct file *)file;
	struct inode *ino = BPF_CORE_READ(f, f_inode);
	if (!ino || BPF_CORE_READ(ino, i_sb, s_dev) != target_dev || (BPF_CORE_READ(ino, i_mode) & S_IFMT) != S_IFREG)
		return 0;
	struct fuse_file *ff = BPF_CORE_READ(f, private_data);
	if (!ff || !BPF_CORE_READ(ff, passthrough))
		return 0;
	return (u64)ff;
}

// side_pos returns where a transfer starts in the file at address file: at the offset the
// user's pointer uoff holds, or at the file position (fpos set) when uoff is 0.
static __always_inline s64 side_pos(u64 file, u64 uoff, u8 *fpos)
{
	s64 off = 0;
	if (uoff != 0 && bpf_probe_read_user(&off, sizeof(off), (void *)uoff) == 0)
		return off;
	*fpos = 1;
	struct file *f = (struct file *)file;
	return BPF_CORE_READ(f, f_pos);
}

// begin_move notes a sendfile or splice with a passthrough file on either side: a read of
// the input, a write of the output, or a copy when both are.
static __always_inline void begin_move(struct task *t, struct task_struct *task, struct pt_regs *regs, long nr)
{
	u64 in_fd, out_fd, in_off, out_off = 0, n;
	if (nr == NR_SENDFILE) {
		out_fd = ARG1(regs);
		in_fd = ARG2(regs);
		in_off = ARG3(regs);
		n = ARG4(regs);
	} else {
		in_fd = ARG1(regs);
		in_off = ARG2(regs);
		out_fd = ARG3(regs);
		out_off = ARG4(regs);
		n = ARG5(regs);
	}
	u64 fi = fd_addr(task, in_fd), fo = fd_addr(task, out_fd);
	u64 ffi = passthrough_addr(fi), ffo = passthrough_addr(fo);
	if (!ffi && !ffo)
		return;
	t = data_task(t, task, nr);
	if (!t)
		return;
	t->d_size = n;
	if (ffi && ffo) {
		t->d_op = DATA_COPY;
	} else if (ffi) {
		t->d_op = DATA_READ;
	} else {
		t->d_op = DATA_WRITE;
		// The written file is the only one: it takes the first side's place.
		ffi = ffo, fi = fo, in_off = out_off, ffo = 0;
	}
	struct fuse_file *a = (struct fuse_file *)ffi;
	t->d_file = fi;
	t->d_fh = BPF_CORE_READ(a, fh);
	t->d_node = BPF_CORE_READ(a, nodeid);
	t->d_pos = side_pos(fi, in_off, &t->d_fpos);
	if (ffo) {
		struct fuse_file *b = (struct fuse_file *)ffo;
		t->d_file2 = fo;
		t->d_fh2 = BPF_CORE_READ(b, fh);
		t->d_node2 = BPF_CORE_READ(b, nodeid);
		t->d_pos2 = side_pos(fo, out_off, &t->d_fpos2);
	}
}

// moved returns where a transfer of ret bytes that used the position of f started: its
// position after the transfer less ret (for appends too, which the entry's position would
// not show), else pos.
static __always_inline s64 moved(u64 file, s64 pos, s64 ret)
{
	if (ret <= 0)
		return pos;
	s64 p = as_file(file)->f_pos;
	return p >= ret ? p - ret : pos;
}

// end_data emits the data call in progress of task, which returned ret.
static __always_inline void end_data(struct task *t, struct task_struct *task, u64 now, s64 ret)
{
	struct data_rec *r = reserve(sizeof(*r), true);
	if (!r)
		return;
	// The ids bpf_get_current_pid_tgid and bpf_get_current_uid_gid give, loaded directly.
	const struct cred *cred = task->cred;
	r->kind = REC_DATA;
	r->nr = (u16)t->nr;
	r->tid = task->pid;
	r->pid = task->tgid;
	r->uid = cred->uid.val;
	r->gid = cred->gid.val;
	r->op = t->d_op;
	r->fh = t->d_fh;
	r->node = t->d_node;
	r->pos = t->d_fpos ? moved(t->d_file, t->d_pos, ret) : t->d_pos;
	r->fh2 = t->d_fh2;
	r->node2 = t->d_node2;
	r->pos2 = t->d_fpos2 ? moved(t->d_file2, t->d_pos2, ret) : t->d_pos2;
	r->size = t->d_size;
	r->ret = ret;
	r->start = t->enter;
	r->end = now;
	r->call_end = 0;
	r->think_rd = t->think_rd;
	r->woken = t->woken;
	r->waker = t->waker;
	r->pad = 0;
	submit(r);
	count(CNT_DATA);
}

// --- Mapped files ---

#define MAP_ANONYMOUS 0x20
#define PF_IO_WORKER 0x00000010
#define PF_KTHREAD 0x00200000

static __always_inline struct address_space *as_mapping(u64 p)
{
	return bpf_rdonly_cast((void *)p, bpf_core_type_id_kernel(struct address_space));
}

// begin_mmap notes an mmap of a passthrough file in the thread's state t (0: make it),
// for its return.
static __always_inline void begin_mmap(struct task *t, struct task_struct *task, struct pt_regs *regs)
{
	if (ARG4(regs) & MAP_ANONYMOUS)
		return;
	struct fuse_file *ff = passthrough(fd_file(task, ARG5(regs)));
	if (!ff)
		return;
	struct file *backing = ff->passthrough;
	struct address_space *as = backing->f_mapping;
	if (!as)
		return;
	if (!t) {
		t = bpf_task_storage_get(&tasks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!t)
			return;
	}
	t->m_mapping = (u64)as;
	t->m_fh = ff->fh;
	t->m_node = ff->nodeid;
}

struct sweep_ctx {
	u32 cleared; // 1: an entry was cleared
};

// sweep_one clears the entry of a file no longer mapped anywhere, or whose inode is gone.
static long sweep_one(void *map, u64 *key, struct mapped *m, struct sweep_ctx *c)
{
	struct address_space *as = as_mapping(*key);
	struct inode *host = as->host;
	if (host && (u64)host == m->host && host->i_ino == m->ino && as->i_mmap.rb_root.rb_node)
		return 0;
	bpf_map_delete_elem(&mapped, key);
	c->cleared = 1; // a constant: a count would keep the verifier from seeing the loop converge
	return 0;
}

// note_mapped puts the file with handle fh and node id node, whose backing file's page
// cache is mapping, in the table of mapped files, clearing the table of files no longer
// mapped when it is full.
static __always_inline void note_mapped(u64 mapping, u64 fh, u64 node)
{
	u64 key = mapping;
	struct inode *host = as_mapping(key)->host;
	if (!host)
		return;
	struct mapped m = { .fh = fh, .node = node, .host = (u64)host, .ino = host->i_ino };
	if (bpf_map_update_elem(&mapped, &key, &m, BPF_ANY) != 0) {
		struct sweep_ctx c = {};
		bpf_for_each_map_elem(&mapped, sweep_one, &c, 0);
		if (c.cleared == 0 || bpf_map_update_elem(&mapped, &key, &m, BPF_ANY) != 0) {
			count(CNT_MAPS_FULL);
			return;
		}
	}
	count(CNT_MAPS);
	maps_noted = 1;
}

#define XA_MAX_DEPTH 11 // a 64-bit index, 6 bits a level

struct xa_walk {
	u64 entry; // the entry reached: a node to go down, or the slot's content
	u64 index; // the page index looked up
	u64 mask;  // slots of a node less one
	u64 slots; // offset of a node's slots
};

// xa_step goes one level down the XArray, or ends the walk at an entry that is no node.
static long xa_step(u64 i, void *data)
{
	struct xa_walk *w = data;
	if ((w->entry & 3) != 2 || w->entry <= 4096)
		return 1; // not a node
	u64 node = w->entry - 2;
	u8 shift = BPF_CORE_READ((struct xa_node *)node, shift);
	u64 slot = (w->index >> (shift & 63)) & w->mask;
	u64 entry = 0;
	bpf_probe_read_kernel(&entry, sizeof(entry), (void *)(node + w->slots + slot * 8));
	if ((entry & 3) == 2 && (entry >> 2) < w->mask) {
		// A sibling of a multi-index entry (a large folio): the entry is in its first
		// slot.
		slot = entry >> 2;
		entry = 0;
		bpf_probe_read_kernel(&entry, sizeof(entry), (void *)(node + w->slots + slot * 8));
	}
	w->entry = entry;
	return 0;
}

// folio_at returns the address of the folio page cache as (an address) holds at page
// index, or 0 (none, or a shadow of an evicted one): a walk of its XArray, a bpf_loop of
// one level a step (the verifier checks a level once).
static __always_inline u64 folio_at(u64 as, u64 index)
{
	struct xa_walk w = {
		.entry = (u64)BPF_CORE_READ((struct address_space *)as, i_pages.xa_head),
		.index = index,
		.mask = bpf_core_field_size(((struct xa_node *)0)->slots) / sizeof(void *) - 1,
		.slots = bpf_core_field_offset(struct xa_node, slots),
	};
	bpf_loop(XA_MAX_DEPTH, xa_step, &w, 0);
	if ((w.entry & 3) != 0)
		return 0;
	return w.entry;
}

// folio_span sets lo..hi to the pages of the folio at address folio when it holds page
// index, and reports whether it does.
static __always_inline bool folio_span(u64 folio, u64 index, u64 *lo, u64 *hi)
{
	if (!folio)
		return false;
	struct folio *f = (struct folio *)folio;
	u64 first = BPF_CORE_READ(f, index);
	u64 n = 1;
	unsigned long flags = 0;
	bpf_probe_read_kernel(&flags, sizeof(flags), f); // the page flags: any folio's first word
	if ((flags & (1UL << bpf_core_enum_value(enum pageflags, PG_head))) && bpf_core_field_exists(f->_nr_pages))
		n = BPF_CORE_READ(f, _nr_pages);
	if (index < first || index >= first + n)
		return false;
	*lo = first;
	*hi = first + n - 1;
	return true;
}

// widen extends the pages lo..hi of page cache as to the whole folios at their ends: the
// kernel maps a large folio whole where it can.
static __always_inline void widen(u64 as, u64 *lo, u64 *hi)
{
	u64 flo, fhi;
	if (folio_span(folio_at(as, *lo), *lo, &flo, &fhi))
		*lo = flo;
	if (folio_span(folio_at(as, *hi), *hi, &flo, &fhi))
		*hi = fhi;
}

// emit_fault emits a FAULT record of pages lo..hi of the mapped file m, whose backing inode
// is host, at time at; a read's pages are left out where the thread's previous read fault
// on the file, in t, covered their start or end.
static __always_inline void emit_fault(struct task *t, u64 key, struct mapped *m, struct inode *host, u64 lo, u64 hi, u32 op, u64 at)
{
	u32 shift = page_shift & 31;
	s64 isize = host->i_size;
	if (isize <= 0)
		return;
	u64 last = (u64)(isize - 1) >> shift;
	if (hi > last)
		hi = last; // a folio past the end of the file is mapped up to it
	if (hi < lo)
		return;
	if (op == DATA_READ && t) {
		u64 plo = t->f_lo, phi = t->f_hi;
		bool same = t->f_mapping == key;
		if (same && lo >= plo && hi <= phi)
			return;
		t->f_mapping = key;
		t->f_lo = lo;
		t->f_hi = hi;
		if (same && lo >= plo && lo <= phi)
			lo = phi + 1;
		else if (same && hi >= plo && hi <= phi)
			hi = plo - 1;
	}
	struct data_rec *r = reserve(sizeof(*r), true);
	if (!r)
		return;
	u64 id = bpf_get_current_pid_tgid();
	u64 ug = bpf_get_current_uid_gid();
	s64 pos = (s64)(lo << shift);
	u64 size = (hi - lo + 1) << shift;
	s64 done = isize - pos;
	if (done > (s64)size)
		done = size;
	r->kind = REC_FAULT;
	r->nr = 0;
	r->tid = (u32)id;
	r->pid = id >> 32;
	r->uid = (u32)ug;
	r->gid = ug >> 32;
	r->op = op;
	r->fh = m->fh;
	r->node = m->node;
	r->pos = pos;
	r->fh2 = 0;
	r->node2 = 0;
	r->pos2 = 0;
	r->size = size;
	r->ret = done;
	r->start = at;
	r->end = at;
	r->call_end = 0;
	r->think_rd = 0;
	r->woken = 0;
	r->waker = 0;
	r->pad = 0;
	submit(r);
	count(CNT_FAULTS);
}

// mapped_file returns the table's entry of page cache key, whose inode is host, or 0,
// dropping an entry whose page cache is another inode's now.
static __always_inline struct mapped *mapped_file(u64 key, struct inode *host)
{
	struct mapped *m = bpf_map_lookup_elem(&mapped, &key);
	if (!m)
		return 0;
	if (!host || (u64)host != m->host || host->i_ino != m->ino) {
		bpf_map_delete_elem(&mapped, &key);
		return 0;
	}
	return m;
}

// settle emits the thread's fault that went to read its page in, now that the page cache
// holds the folio it read and mapped. A global function, verified on its own: sys_enter
// calls it.
__attribute__((noinline)) int settle(struct task *t)
{
	if (!t || !t->p_mapping)
		return 0;
	u64 key = t->p_mapping;
	t->p_mapping = 0;
	struct inode *host = as_mapping(key)->host;
	struct mapped *m = mapped_file(key, host);
	if (!m)
		return 0;
	u64 lo = t->p_index, hi = t->p_index;
	u64 flo, fhi;
	if (folio_span(folio_at(key, lo), lo, &flo, &fhi))
		lo = flo, hi = fhi;
	emit_fault(t, key, m, host, lo, hi, DATA_READ, t->p_time);
	return 0;
}

// fault_pages emits a FAULT record for pages lo..hi of page cache as, when it is a noted
// mapped file's and the current task counts: of a store (op DATA_WRITE), or of a read,
// widened to whole folios; a read fault (read_in) whose page is not in the page cache yet
// is settled at the thread's next entry into the kernel.
static __always_inline void fault_pages(struct address_space *as, u64 lo, u64 hi, u32 op, bool read_in)
{
	if (!as || hi < lo)
		return;
	u64 key = (u64)as;
	if (!bpf_map_lookup_elem(&mapped, &key))
		return;
	u64 id = bpf_get_current_pid_tgid();
	if ((u32)(id >> 32) == daemon_tgid)
		return;
	struct task_struct *task = bpf_get_current_task_btf();
	struct task *t = bpf_task_storage_get(&tasks, task, 0, job_only ? 0 : BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (job_only && (!t || !t->job))
		return;
	if (op == DATA_WRITE && (task->flags & (PF_KTHREAD | PF_IO_WORKER)))
		return;
	if (t && t->p_mapping)
		settle(t);
	struct inode *host = as->host;
	struct mapped *m = mapped_file(key, host);
	if (!m)
		return;
	u64 now = bpf_ktime_get_ns();
	if (read_in) {
		u64 flo, fhi;
		if (folio_span(folio_at(key, lo), lo, &flo, &fhi)) {
			lo = flo, hi = fhi;
		} else if (t) {
			t->p_mapping = key;
			t->p_index = lo;
			t->p_time = now;
			return;
		}
	} else if (op == DATA_READ) {
		widen(key, &lo, &hi);
	}
	emit_fault(t, key, m, host, lo, hi, op, now);
}

static __always_inline bool following_maps(void)
{
	return target_dev != 0 && data_calls && maps_noted;
}

SEC("tp_btf/mm_filemap_fault")
int BPF_PROG(filemap_fault, struct address_space *as, unsigned long index)
{
	if (following_maps())
		fault_pages(as, index, index, DATA_READ, true);
	return 0;
}

SEC("tp_btf/mm_filemap_map_pages")
int BPF_PROG(filemap_map_pages, struct address_space *as, unsigned long start, unsigned long last)
{
	if (following_maps())
		fault_pages(as, start, last, DATA_READ, false);
	return 0;
}

// in_user_fault reports whether the current task entered the kernel by a fault (or an
// interrupt) from user space rather than by a system call: its user registers name no
// system call.
static __always_inline bool in_user_fault(struct task_struct *task)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return false;
#if defined(__TARGET_ARCH_x86)
	return (s64)BPF_CORE_READ(regs, orig_ax) == -1;
#else
	return BPF_CORE_READ(regs, syscallno) == -1; // NO_SYSCALL
#endif
}

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(dirty_folio, struct folio *folio, struct address_space *as)
{
	if (!following_maps())
		return 0;
	u64 key = (u64)as;
	if (!bpf_map_lookup_elem(&mapped, &key))
		return 0; // the common case: another file's page
	if (!in_user_fault(bpf_get_current_task_btf()))
		return 0;
	u64 index = BPF_CORE_READ(folio, index), lo, hi;
	if (folio_span((u64)folio, index, &lo, &hi))
		fault_pages(as, lo, hi, DATA_WRITE, false);
	return 0;
}

// --- libaio ---

#define MAX_IOCBS 256

struct aio_ctx {
	struct task_struct *task;
	u64 iocbs; // user address of the iocb pointer array
	u64 now;
	u64 id;
	u64 ug;
	u32 nr;
	u32 done; // 1: io_submit returned: date the submissions' return instead
	u32 timed; // set to 1 when a submission is timed (a constant: see sweep_one)
	u64 think_rd;
	u64 woken;
	u32 waker;
};

static long aio_submit_one(u64 i, void *data)
{
	struct aio_ctx *c = data;
	u64 uiocb = 0;
	if (bpf_probe_read_user(&uiocb, sizeof(uiocb), (void *)(c->iocbs + i * 8)) != 0 || !uiocb)
		return 0;
	struct async_key k = { .id = uiocb, .tgid = c->id >> 32 };
	if (c->done) {
		struct async *a = bpf_map_lookup_elem(&asyncs, &k);
		if (a && a->call_end == 0)
			a->call_end = c->now;
		return 0;
	}
	struct iocb cb;
	if (bpf_probe_read_user(&cb, sizeof(cb), (void *)uiocb) != 0)
		return 0;
	u32 op;
	bool vec = false;
	switch (cb.aio_lio_opcode) {
	case 0: op = DATA_READ; break;             // IOCB_CMD_PREAD
	case 1: op = DATA_WRITE; break;            // IOCB_CMD_PWRITE
	case 7: op = DATA_READ; vec = true; break;  // IOCB_CMD_PREADV
	case 8: op = DATA_WRITE; vec = true; break; // IOCB_CMD_PWRITEV
	default: return 0;
	}
	struct file *f = fd_file(c->task, cb.aio_fildes);
	struct fuse_file *ff = passthrough(f);
	if (!ff)
		return 0;
	struct async a = {
		.start = c->now,
		.fh = ff->fh,
		.node = ff->nodeid,
		.pos = cb.aio_offset,
		.size = vec ? iov_size(cb.aio_buf, cb.aio_nbytes) : cb.aio_nbytes,
		.think_rd = c->think_rd,
		.woken = c->woken,
		.waker = c->waker,
		.tid = (u32)c->id,
		.pid = c->id >> 32,
		.uid = (u32)c->ug,
		.gid = c->ug >> 32,
		.op = op,
		.nr = c->nr,
	};
	bpf_map_update_elem(&asyncs, &k, &a, BPF_ANY);
	c->timed = 1;
	return 0;
}

struct reap_ctx {
	u64 events; // user address of the io_event array
	u64 now;
	u32 tgid;
};

// emit_async emits a completed asynchronous call.
static __always_inline void emit_async(struct async *a, u64 now, s64 res)
{
	struct data_rec *r = reserve(sizeof(*r), true);
	if (!r)
		return;
	r->kind = REC_ASYNC;
	r->nr = (u16)a->nr;
	r->tid = a->tid;
	r->pid = a->pid;
	r->uid = a->uid;
	r->gid = a->gid;
	r->op = a->op;
	r->fh = a->fh;
	r->node = a->node;
	r->pos = a->pos;
	r->fh2 = 0;
	r->node2 = 0;
	r->pos2 = 0;
	r->size = a->size;
	r->ret = res;
	r->start = a->start;
	r->end = now;
	r->call_end = a->call_end;
	r->think_rd = a->think_rd;
	r->woken = a->woken;
	r->waker = a->waker;
	r->pad = 0;
	submit(r);
	count(CNT_ASYNC);
}

static long aio_reap_one(u64 i, void *data)
{
	struct reap_ctx *c = data;
	struct io_event ev;
	if (bpf_probe_read_user(&ev, sizeof(ev), (void *)(c->events + i * sizeof(ev))) != 0)
		return 1;
	struct async_key k = { .id = ev.obj, .tgid = c->tgid };
	struct async *a = bpf_map_lookup_elem(&asyncs, &k);
	if (!a)
		return 0;
	emit_async(a, c->now, ev.res);
	bpf_map_delete_elem(&asyncs, &k);
	return 0;
}

// aio_submit times the iocbs of an io_submit on passthrough files (done 0, at its entry),
// or dates their submission's return (done 1, at its exit). It reports whether it timed
// any.
static __always_inline bool aio_submit(struct task *t, struct task_struct *task, u64 iocbs, u64 n, u32 done, u64 now)
{
	if (n > MAX_IOCBS) {
		count(CNT_UNSEEN);
		n = MAX_IOCBS;
	}
	struct aio_ctx c = {
		.task = task,
		.iocbs = iocbs,
		.now = now,
		.id = bpf_get_current_pid_tgid(),
		.ug = bpf_get_current_uid_gid(),
		.nr = NR_IO_SUBMIT,
		.done = done,
	};
	if (t) {
		c.think_rd = t->think_rd;
		c.woken = t->woken;
		c.waker = t->waker;
	}
	bpf_loop(n, aio_submit_one, &c, 0);
	return c.timed;
}

// --- io_uring ---

#define IORING_OP_READV 1
#define IORING_OP_WRITEV 2
#define IORING_OP_READ_FIXED 4
#define IORING_OP_WRITE_FIXED 5
#define IORING_OP_READ 22
#define IORING_OP_WRITE 23
#define REQ_F_FIXED_FILE (1ULL << 0)

SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(uring_submit, struct io_kiocb *req)
{
	if (target_dev == 0 || !data_calls)
		return 0;
	u8 opcode = req->opcode;
	u32 op;
	bool vec = false;
	switch (opcode) {
	case IORING_OP_READV: op = DATA_READ; vec = true; break;
	case IORING_OP_WRITEV: op = DATA_WRITE; vec = true; break;
	case IORING_OP_READ_FIXED: case IORING_OP_READ: op = DATA_READ; break;
	case IORING_OP_WRITE_FIXED: case IORING_OP_WRITE: op = DATA_WRITE; break;
	default: return 0;
	}
	struct task_struct *task = bpf_get_current_task_btf();
	if (job_only) {
		struct task *jt = bpf_task_storage_get(&tasks, task, 0, 0);
		if (!jt || !jt->job)
			return 0;
	}
	struct file *f = 0;
	if (req->flags & REQ_F_FIXED_FILE) {
		count(CNT_UNSEEN); // a registered file: not resolved here
		return 0;
	}
	f = fd_file(task, req->cqe.fd);
	struct fuse_file *ff = passthrough(f);
	if (!ff)
		return 0;
	struct io_rw *rw = (void *)&req->cmd;
	u64 id = bpf_get_current_pid_tgid();
	u64 ug = bpf_get_current_uid_gid();
	u64 len = BPF_CORE_READ(rw, len);
	struct async a = {
		.start = bpf_ktime_get_ns(),
		.fh = ff->fh,
		.node = ff->nodeid,
		.pos = BPF_CORE_READ(rw, kiocb.ki_pos),
		.size = vec ? iov_size(BPF_CORE_READ(rw, addr), len) : len,
		.tid = (u32)id,
		.pid = id >> 32,
		.uid = (u32)ug,
		.gid = ug >> 32,
		.op = op,
	};
	struct task *t = bpf_task_storage_get(&tasks, task, 0, 0);
	if (t && t->in_call) {
		a.nr = t->nr;
		think(t, task);
		a.think_rd = t->think_rd;
		a.woken = t->woken;
		a.waker = t->waker;
	}
	if (a.pos < 0)
		a.pos = f->f_pos;
	struct async_key k = { .id = (u64)req };
	bpf_map_update_elem(&asyncs, &k, &a, BPF_ANY);
	return 0;
}

SEC("tp_btf/io_uring_complete")
int BPF_PROG(uring_complete, struct io_ring_ctx *ring_ctx, void *req, struct io_uring_cqe *cqe)
{
	if (target_dev == 0 || !data_calls)
		return 0;
	struct async_key k = { .id = (u64)req };
	struct async *a = bpf_map_lookup_elem(&asyncs, &k);
	if (!a)
		return 0;
	emit_async(a, bpf_ktime_get_ns(), BPF_CORE_READ(cqe, res));
	bpf_map_delete_elem(&asyncs, &k);
	return 0;
}

// --- The job's tasks ---

// process_fork marks a new task of the job (job_only): a process the server's process
// starts (the job's first command), and any task a job task creates, thread or process.
SEC("tp_btf/sched_process_fork")
int BPF_PROG(process_fork, struct task_struct *parent, struct task_struct *child)
{
	if (target_dev == 0 || !job_only)
		return 0;
	bool job = (u32)parent->tgid == daemon_tgid && (u32)child->tgid != daemon_tgid;
	if (!job) {
		struct task *pt = bpf_task_storage_get(&tasks, parent, 0, 0);
		job = pt && pt->job;
	}
	if (!job)
		return 0;
	struct task *ct = bpf_task_storage_get(&tasks, child, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (ct)
		ct->job = 1;
	return 0;
}

// --- System call entry and exit ---

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long nr)
{
	if (target_dev == 0)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	struct task *t = task_of(task);
	if (t && t->p_mapping)
		settle(t);
	bool data = data_calls && !(job_only && (!t || !t->job));
	bool followed = t && t->followed;
	if (!data && !followed)
		return 0; // a task outside the job, or one that has not reached the mount
	struct call_shape cs = shape(nr);
	if (followed) {
		// The entry time of a followed thread's call, for the requests it may send. Not
		// read for a call that names no file (cs.nofile), nor here for a read or write
		// (begin_data reads it when the file is the mount's): a request such a call
		// sends (a page fault on a mapped file of the mount that the server serves) has
		// no known entry (0).
		t->enter = 0;
		if (!cs.nofile && !(data && cs.op))
			t->enter = bpf_ktime_get_ns();
		t->nr = (u32)nr;
		t->nreq = 0;
		t->in_call = 1;
		t->think_taken = 0;
		t->data = 0;
	}
	if (!data)
		return 0;
	if (cs.op) {
		begin_data(t, task, regs, nr, cs);
		return 0;
	}
	if (nr == NR_SENDFILE || nr == NR_SPLICE) {
		begin_move(t, task, regs, nr);
		return 0;
	}
	if (nr == NR_MMAP) {
		begin_mmap(t, task, regs);
		return 0;
	}
	if (nr == NR_IO_SUBMIT) {
		u64 n = ARG2(regs);
		u64 iocbs = ARG3(regs);
		if (followed)
			think(t, task);
		// The return is dated at sys_exit, which reads the iocbs again, only when one
		// of them was timed.
		if (aio_submit(t, task, iocbs, n, 0, followed ? t->enter : bpf_ktime_get_ns()) && followed) {
			t->aio_iocbs = iocbs;
			t->aio_nr = n;
		}
		return 0;
	}
	if (nr == NR_IO_GETEVENTS || nr == NR_IO_PGETEVENTS) {
		if (!t) {
			t = bpf_task_storage_get(&tasks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
			if (!t)
				return 0;
			t->nr = (u32)nr;
			t->in_call = 1;
		}
		t->aio_events = ARG4(regs);
	}
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task *t = task_of(task);
	// A call that did nothing this program follows (most calls of a followed thread) costs
	// these few loads: the clock is read only for what returns here.
	if (!t || !(t->in_call | t->m_mapping))
		return 0;
	if (!(t->data | t->nreq | t->m_mapping | t->aio_events | t->aio_iocbs)) {
		t->in_call = 0;
		return 0;
	}
	u64 now = bpf_ktime_get_ns();
	u64 id = (u64)task->tgid << 32 | (u32)task->pid;
	t->reached = 0;
	if (t->data) {
		end_data(t, task, now, ret);
		t->data = 0;
		t->reached = 1;
	}
	if (t->m_mapping) {
		if ((u64)ret < (u64)-4095) // an address, not -errno
			note_mapped(t->m_mapping, t->m_fh, t->m_node);
		t->m_mapping = 0;
	}
	if (t->aio_events) {
		if (ret > 0) {
			struct reap_ctx c = { .events = t->aio_events, .now = now, .tgid = id >> 32 };
			u64 n = ret > MAX_IOCBS ? MAX_IOCBS : ret;
			bpf_loop(n, aio_reap_one, &c, 0);
		}
		t->aio_events = 0;
	}
	if (t->aio_iocbs) {
		if (ret > 0)
			aio_submit(t, task, t->aio_iocbs, ret, 1, now);
		t->aio_iocbs = 0;
		t->aio_nr = 0;
	}
	if (t->in_call && t->nreq > 0) {
		// The call's last request may still be in flight (a release the kernel sends
		// without waiting): its record then carries the return.
		u64 last = t->last_unique;
		struct send *s = bpf_map_lookup_elem(&sends, &last);
		if (s) {
			s->call_end = now;
			count(CNT_CALLS);
		} else {
			struct call_rec *r = reserve(sizeof(*r), false);
			if (r) {
				r->kind = REC_CALL;
				r->nr = (u16)t->nr;
				r->tid = (u32)id;
				r->unique = last;
				r->enter = t->enter;
				r->exit = now;
				r->nreq = t->nreq;
				submit(r);
				count(CNT_CALLS);
			}
		}
		t->reached = 1;
	}
	if (t->reached) {
		t->rd_exit = run_delay(task);
		t->woken = 0;
		t->waker = 0;
	}
	t->in_call = 0;
	t->nreq = 0;
	return 0;
}
