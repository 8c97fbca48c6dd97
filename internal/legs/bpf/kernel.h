/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * The few kernel types legs.bpf.c reads, declared with only the members it uses and marked
 * preserve_access_index: the loader relocates each access to the running kernel's layout,
 * found in its BTF (CO-RE), so no offset is written here or copied by hand. Also the BPF
 * constants the program uses, so that it needs no kernel or libc headers of the build
 * machine's architecture (only libbpf's bpf_helpers.h, bpf_tracing.h, bpf_core_read.h).
 */
#ifndef IOTAP_KERNEL_H
#define IOTAP_KERNEL_H

/* bpf_tracing.h names the kernel's own register fields when this is set. */
#define __VMLINUX_H__

typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u8 u8;
typedef __s16 s16;
typedef __u16 u16;
typedef __s32 s32;
typedef __u32 u32;
typedef __s64 s64;
typedef __u64 u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
enum { false = 0, true = 1 };

/* BPF uapi constants (include/uapi/linux/bpf.h). */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
	BPF_MAP_TYPE_RINGBUF = 27,
};
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};
enum {
	BPF_F_NO_PREALLOC = 1U << 0,
};
enum {
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1ULL << 0,
};
enum {
	BPF_RB_NO_WAKEUP = 1ULL << 0,
	BPF_RB_FORCE_WAKEUP = 1ULL << 1,
};
enum {
	BPF_RB_AVAIL_DATA = 0,
	BPF_RB_RING_SIZE = 1,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

#if defined(__TARGET_ARCH_x86)
struct pt_regs {
	unsigned long r10;
	unsigned long r8;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
};
#elif defined(__TARGET_ARCH_arm64)
struct user_pt_regs {
	u64 regs[31];
	u64 sp;
	u64 pc;
	u64 pstate;
};
struct pt_regs {
	u64 orig_x0;
	s32 syscallno;
};
#else
#error "legs.bpf.c is built for x86 and arm64 (__TARGET_ARCH_x86 or __TARGET_ARCH_arm64)"
#endif

struct super_block {
	u32 s_dev;
};

struct inode {
	u16 i_mode;
	struct super_block *i_sb;
	unsigned long i_ino;
	s64 i_size;
};

struct rb_node;

struct rb_root {
	struct rb_node *rb_node;
};

struct rb_root_cached {
	struct rb_root rb_root;
};

/* The page cache's index of folios (include/linux/xarray.h). */
struct xarray {
	void *xa_head;
};

struct xa_node {
	unsigned char shift;
	void *slots[64];
};

/* A file's page cache. i_mmap holds the memory mappings of the file (empty: not mapped). */
struct address_space {
	struct inode *host;
	struct xarray i_pages;
	struct rb_root_cached i_mmap;
};

struct file {
	struct inode *f_inode;
	struct address_space *f_mapping;
	void *private_data;
	s64 f_pos;
};

/* A folio's first word is the page flags (read whole, as the kernel's type of it differs
 * between versions); _nr_pages is its size when it is large (PG_head set). */
struct folio {
	unsigned long index;
	unsigned int _nr_pages;
};

enum pageflags {
	PG_head = 6,
};

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
};

struct files_struct {
	struct fdtable *fdt;
};

struct sched_info {
	unsigned long long run_delay;
};

/* Credentials: kuid_t and kgid_t hold the ids as the initial user namespace sees them. */
typedef struct {
	u32 val;
} kuid_t;
typedef struct {
	u32 val;
} kgid_t;

struct cred {
	kuid_t uid;
	kgid_t gid;
};

/* bpf_storage: the task's BPF task-local storage of every map (NULL: it has none). */
struct task_struct {
	unsigned int flags;
	int pid;
	int tgid;
	struct files_struct *files;
	struct sched_info sched_info;
	const struct cred *cred;
	void *bpf_storage;
};

struct fuse_in_header {
	u64 unique;
	u32 opcode;
};

struct fuse_out_header {
	s32 error;
};

struct fuse_conn {
	u32 dev;
};

struct fuse_mount {
	struct fuse_conn *fc;
};

struct fuse_req {
	struct {
		struct fuse_in_header h;
	} in;
	struct {
		struct fuse_out_header h;
	} out;
	struct fuse_mount *fm;
};

struct fuse_file {
	u64 fh;
	u64 nodeid;
	struct file *passthrough;
};

struct kiocb {
	s64 ki_pos;
};

struct io_rw {
	struct kiocb kiocb;
	u64 addr;
	u32 len;
};

struct io_cqe {
	u64 user_data;
	s32 res;
	union {
		u32 flags;
		int fd;
	};
};

struct io_cmd_data {
	struct file *file;
	u8 data[56];
};

struct io_kiocb {
	union {
		struct file *file;
		struct io_cmd_data cmd;
	};
	u8 opcode;
	u64 flags;
	struct io_cqe cqe;
};

struct io_uring_cqe {
	u64 user_data;
	s32 res;
};

struct io_ring_ctx;

#pragma clang attribute pop

/* A kfunc (Linux 6.2 and later): obj as a pointer to the kernel type btf_id, whose fields the
 * program may load directly (untrusted: a load that faults reads 0). */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __attribute__((section(".ksyms")));

/* User-space structures the program reads with bpf_probe_read_user (uapi, fixed layout). */
struct iovec {
	void *iov_base;
	u64 iov_len;
};

struct iocb {
	u64 aio_data;
	u32 aio_key;
	u32 aio_rw_flags;
	u16 aio_lio_opcode;
	s16 aio_reqprio;
	u32 aio_fildes;
	u64 aio_buf;
	u64 aio_nbytes;
	s64 aio_offset;
	u64 aio_reserved2;
	u32 aio_flags;
	u32 aio_resfd;
};

struct io_event {
	u64 data;
	u64 obj;
	s64 res;
	s64 res2;
};

#endif
