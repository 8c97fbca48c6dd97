//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// The kernel's view of a FUSE mount's requests and of the system calls that sent them.
//
// For every request of one FUSE connection this program emits, when the kernel completes
// it, a REQ record: when the kernel queued it (raw tracepoint fuse_request_send), when it
// completed it (fuse_request_end), the thread that sent it, and the entry time and
// number of the system call that thread was in. For every system call that sent at least
// one request it emits, when the call returns, a CALL record: the thread, the entry and
// return times, the call's number and the last request it sent. Times are bpf_ktime_get_ns
// (CLOCK_MONOTONIC). Records go to a ring buffer without waking the reader: user space
// drains it on a timer.
//
// All are raw tracepoints: they read the kernel's structures (struct fuse_req, struct
// task_struct) at offsets user space finds in the kernel's BTF and sets below, and they
// detach at once (a perf-event tracepoint waits for an RCU grace period when it detaches).
// System call entry and exit fire for every task on the host; a task the program does not
// follow (one that never sent a request to the connection) costs one hash lookup.
//
// For each call it also gives the time its thread spent runnable but waiting for a CPU
// since its previous call that sent requests returned: the scheduler's run_delay of the
// task (struct sched_info), read at the offset user space finds in the kernel's BTF
// (run_delay_off), so that a replay can tell the application's own time between calls
// from time it lost to other tasks while it was recorded.
//
// And it says who ended the thread's wait when it had one between two calls: the last
// wake-up of the thread (raw tracepoint sched_waking) after its previous call that sent
// requests returned, by a thread the program follows (one that sent requests itself), or
// by anything else. A thread blocked in pthread_join, wait4 or on a pipe is woken by the
// thread or process it waited for: a replay makes it wait for that thread's progress, not
// for the recorded time, which held the other thread's FUSE round trips.
//
// Build: see gen.go (clang -target bpf); the object is committed.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef int s32;

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// Offsets in the kernel's structures (0: unknown). fuse_req.in.h.unique, .in.h.opcode,
// .out.h.error, .fm; fuse_mount.fc; fuse_conn.dev; task_struct.pid.
volatile const u32 req_unique_off = 0;
volatile const u32 req_opcode_off = 0;
volatile const u32 req_error_off = 0;
volatile const u32 req_fm_off = 0;
volatile const u32 fm_fc_off = 0;
volatile const u32 fc_dev_off = 0;
volatile const u32 task_pid_off = 0;

// req_fields reads a request's id, opcode and connection.
static __always_inline void req_fields(void *req, u64 *unique, u32 *opcode, u32 *conn)
{
	void *fm = 0, *fc = 0;
	bpf_probe_read_kernel(unique, sizeof(*unique), req + req_unique_off);
	bpf_probe_read_kernel(opcode, sizeof(*opcode), req + req_opcode_off);
	bpf_probe_read_kernel(&fm, sizeof(fm), req + req_fm_off);
	if (fm)
		bpf_probe_read_kernel(&fc, sizeof(fc), fm + fm_fc_off);
	if (fc)
		bpf_probe_read_kernel(conn, sizeof(*conn), fc + fc_dev_off);
}

struct config {
	u32 connection; // 0: not yet mounted, ignore everything
	u32 daemon;     // thread group id of the FUSE server: its threads are not callers
};

struct task {
	u64 enter;       // entry time of the system call in progress (0: unknown)
	u64 last_unique; // the last request it sent
	u64 rd_exit;     // run_delay when its last call that sent requests returned (0: unknown)
	u64 think_rd;    // run_delay since then, as of the first request of the call in progress, plus 1 (0: unknown)
	u64 woken;       // the last wake-up since its last call that sent requests returned (0: none)
	u32 waker;       // the followed thread that woke it then (0: none, or something else)
	u32 nr;          // its number
	u32 nreq;        // requests it sent so far
	u32 in_call;     // between sys_enter and sys_exit
	u32 pad;
};

struct send {
	u64 queued;
	u64 enter;    // entry time of the sender's system call (0: unknown, or sent outside one)
	u64 think_rd; // the call's task.think_rd
	u64 call_end; // the sender's call returned before the request completed (an asynchronous request)
	u64 woken;    // the sender's last wake-up before its call (task.woken)
	u32 waker;    // and who woke it (task.waker)
	u32 pad2;
	u32 tid;   // the sending thread (0: the FUSE server's own, or the kernel's)
	u32 nr;
	u32 opcode;
	u32 pad;
};

enum { REC_REQ = 1, REC_CALL = 2 };

struct rec {
	u16 kind;
	u16 nr;     // system call number (REQ: of the call that sent it; valid when t2 != 0)
	u32 tid;    // REQ: sender (0 none); CALL: the caller
	u64 unique; // REQ: the request; CALL: the last request the call sent
	u64 t0;     // REQ: queued; CALL: entry (0: unknown)
	u64 t1;     // REQ: completed; CALL: return
	u64 t2;     // REQ: entry of the sender's call (0: unknown); CALL: requests it sent
	s32 error;  // REQ: the reply's error
	u32 opcode; // REQ: FUSE opcode
	u64 t3;     // REQ: the sender's run delay before its call, plus 1 (0: unknown)
	u64 t4;     // REQ: the sender's call returned, when that was before the request completed (0: not)
	u64 t5;     // REQ: the sender's last wake-up before its call (0: none)
	u32 waker;  // REQ: the followed thread that woke it then (0: none or another)
	u32 pad;
};

enum { CNT_LOST = 0, CNT_UNMATCHED = 1, CNT_REQS = 2, CNT_CALLS = 3, CNT_MAX = 4 };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct config);
} config SEC(".maps");

// Offset of sched_info.run_delay in struct task_struct (0: not known, not read).
volatile const u32 run_delay_off = 0;

static __always_inline u64 run_delay(void)
{
	u64 rd = 0;
	if (run_delay_off == 0)
		return 0;
	void *task = (void *)bpf_get_current_task();
	bpf_probe_read_kernel(&rd, sizeof(rd), task + run_delay_off);
	return rd;
}

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, u32);
	__type(value, struct task);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, struct send);
} sends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

static __always_inline void count(u32 i)
{
	u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		(*c)++;
}

static __always_inline struct config *cfg(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&config, &zero);
}

// FUSE opcodes without a reply, and interrupts (odd ids) are not followed.
#define FUSE_FORGET 2
#define FUSE_BATCH_FORGET 42

SEC("raw_tracepoint/fuse_request_send")
int request_send(struct bpf_raw_tracepoint_args *ctx)
{
	struct config *c = cfg();
	if (!c || c->connection == 0)
		return 0;
	u64 unique = 0;
	u32 opcode = 0, conn = 0;
	req_fields((void *)ctx->args[0], &unique, &opcode, &conn);
	if (conn != c->connection)
		return 0;
	if (opcode == FUSE_FORGET || opcode == FUSE_BATCH_FORGET || (unique & 1))
		return 0;
	u64 now = bpf_ktime_get_ns();
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id, tgid = id >> 32;
	struct send s = { .queued = now, .opcode = opcode };
	if (tgid != c->daemon && tid != 0) {
		s.tid = tid;
		struct task *t = bpf_map_lookup_elem(&tasks, &tid);
		if (!t) {
			// The thread's first request: follow it from now on. The call in
			// progress is one whose entry was not seen; its return will be.
			struct task nt = { .in_call = 1 };
			bpf_map_update_elem(&tasks, &tid, &nt, BPF_NOEXIST);
			t = bpf_map_lookup_elem(&tasks, &tid);
		}
		if (t && t->in_call) {
			if (t->nreq == 0) {
				t->think_rd = 0;
				if (t->rd_exit != 0 && run_delay_off != 0)
					t->think_rd = run_delay() - t->rd_exit + 1;
			}
			s.enter = t->enter;
			s.nr = t->nr;
			s.think_rd = t->think_rd;
			s.woken = t->woken;
			s.waker = t->waker;
			t->last_unique = unique;
			t->nreq++;
		}
	}
	bpf_map_update_elem(&sends, &unique, &s, BPF_ANY);
	return 0;
}

SEC("raw_tracepoint/fuse_request_end")
int request_end(struct bpf_raw_tracepoint_args *ctx)
{
	struct config *c = cfg();
	if (!c || c->connection == 0)
		return 0;
	u64 now = bpf_ktime_get_ns();
	void *req = (void *)ctx->args[0];
	u64 unique = 0;
	u32 opcode = 0, conn = 0;
	s32 error = 0;
	req_fields(req, &unique, &opcode, &conn);
	if (conn != c->connection)
		return 0;
	bpf_probe_read_kernel(&error, sizeof(error), req + req_error_off);
	struct send *s = bpf_map_lookup_elem(&sends, &unique);
	if (!s) {
		count(CNT_UNMATCHED);
		return 0;
	}
	struct rec *r = bpf_ringbuf_reserve(&ring, sizeof(*r), 0);
	if (!r) {
		count(CNT_LOST);
		bpf_map_delete_elem(&sends, &unique);
		return 0;
	}
	r->kind = REC_REQ;
	r->nr = s->nr;
	r->tid = s->tid;
	r->unique = unique;
	r->t0 = s->queued;
	r->t1 = now;
	r->t2 = s->enter;
	r->error = error;
	r->opcode = s->opcode;
	r->t3 = s->think_rd;
	r->t4 = s->call_end;
	r->t5 = s->woken;
	r->waker = s->waker;
	r->pad = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	bpf_map_delete_elem(&sends, &unique);
	count(CNT_REQS);
	return 0;
}

SEC("raw_tracepoint/sched_waking")
int sched_waking(struct bpf_raw_tracepoint_args *ctx)
{
	s32 pid = 0;
	bpf_probe_read_kernel(&pid, sizeof(pid), (void *)ctx->args[0] + task_pid_off);
	u32 wakee = (u32)pid;
	struct task *t = bpf_map_lookup_elem(&tasks, &wakee);
	if (!t || (t->in_call && t->nreq > 0))
		return 0; // not a thread the program follows, or in a call that sent requests (a FUSE reply)
	u64 id = bpf_get_current_pid_tgid();
	u32 waker = (u32)id;
	if (waker == wakee)
		return 0;
	t->woken = bpf_ktime_get_ns();
	t->waker = 0;
	// The waker is a followed thread in a system call (a futex wake, its exit, a pipe
	// write). A wake-up from an interrupt (a timer) is nobody's: whatever ran is current,
	// and a followed thread caught in user space is not taken for the waker.
	struct task *w = bpf_map_lookup_elem(&tasks, &waker);
	if (w && w->in_call) {
		struct config *c = cfg();
		if (c && (id >> 32) != c->daemon)
			t->waker = waker;
	}
	return 0;
}

SEC("raw_tracepoint/sys_enter")
int sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct task *t = bpf_map_lookup_elem(&tasks, &tid);
	if (!t)
		return 0;
	t->enter = bpf_ktime_get_ns();
	t->nr = (u32)ctx->args[1];
	t->nreq = 0;
	t->in_call = 1;
	return 0;
}

SEC("raw_tracepoint/sys_exit")
int sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct task *t = bpf_map_lookup_elem(&tasks, &tid);
	if (!t)
		return 0;
	u64 now = bpf_ktime_get_ns();
	if (t->in_call && t->nreq > 0) {
		// The call's last request may still be in flight (a release the kernel sends
		// without waiting): its record then carries the return.
		u64 last = t->last_unique;
		struct send *s = bpf_map_lookup_elem(&sends, &last);
		if (s) {
			s->call_end = now;
			count(CNT_CALLS);
		} else {
			struct rec *r = bpf_ringbuf_reserve(&ring, sizeof(*r), 0);
			if (r) {
				r->kind = REC_CALL;
				r->nr = (u16)t->nr;
				r->tid = tid;
				r->unique = last;
				r->t0 = t->enter;
				r->t1 = now;
				r->t2 = t->nreq;
				r->error = 0;
				r->opcode = 0;
				r->t3 = 0;
				r->t4 = 0;
				r->t5 = 0;
				r->waker = 0;
				r->pad = 0;
				bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
				count(CNT_CALLS);
			} else {
				count(CNT_LOST);
			}
		}
		t->rd_exit = run_delay();
		t->woken = 0;
		t->waker = 0;
	}
	t->in_call = 0;
	t->nreq = 0;
	return 0;
}
