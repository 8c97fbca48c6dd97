// locks: exercises POSIX record locks (fcntl, lockf), OFD locks and flock(2) with several
// descriptors and processes on files in the directory given as argument, and prints what
// each step returned. Process ids are printed as the role of the process that holds a lock
// ("parent", "child", ...), so that the output of a run on a native directory and of a run
// on a FUSE mount of another directory are equal when the mount keeps the semantics.
//
// Every blocking call is guarded by a 5 s alarm: a call that would hang prints EINTR
// (instead of the native result) and the program goes on.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *dir;
static pid_t rolepid[16];
static const char *rolename[16];
static int nroles;

static void role(pid_t p, const char *name) {
	rolepid[nroles] = p;
	rolename[nroles++] = name;
}

static void unrole(void) { nroles--; }

static const char *who(pid_t p) {
	static char buf[32];
	for (int i = 0; i < nroles; i++)
		if (rolepid[i] == p)
			return rolename[i];
	if (p <= 0) {
		snprintf(buf, sizeof buf, "%d", (int)p);
		return buf;
	}
	return "other";
}

static void say(const char *fmt, ...) {
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	if (write(1, line, n) != n)
		exit(3);
}

static const char *en(int e) { return e ? strerrorname_np(e) : "ok"; }

static int open_file(const char *name, int flags) {
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	int fd = open(p, flags | O_CREAT, 0644);
	if (fd < 0) {
		perror(p);
		exit(2);
	}
	return fd;
}

static volatile sig_atomic_t alarmed;
static void on_alarm(int sig) {
	(void)sig;
	alarmed = 1;
}

// guard arms a one-shot timer of ms milliseconds whose signal interrupts (does not
// restart) the call in progress.
static void guard(int ms) {
	struct sigaction sa = {0};
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarmed = 0;
	struct itimerval it = {{0, 0}, {ms / 1000, (ms % 1000) * 1000}};
	setitimer(ITIMER_REAL, &it, NULL);
}

static void unguard(void) {
	struct itimerval it = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &it, NULL);
}

static int lk(int fd, int cmd, short type, off_t start, off_t len) {
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
	int blocking = cmd == F_SETLKW || cmd == F_OFD_SETLKW;
	if (blocking)
		guard(5000);
	int r = fcntl(fd, cmd, &fl);
	int e = r < 0 ? errno : 0;
	if (blocking)
		unguard();
	return e;
}

static const char *tname(short t) {
	switch (t) {
	case F_RDLCK:
		return "R";
	case F_WRLCK:
		return "W";
	case F_UNLCK:
		return "U";
	}
	return "?";
}

// getlk prints what F_GETLK (or F_OFD_GETLK) reports for a lock of type type on [start, start+len).
static void getlk(const char *what, int fd, int cmd, short type, off_t start, off_t len) {
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
	if (fcntl(fd, cmd, &fl) < 0) {
		say("%s: %s", what, en(errno));
		return;
	}
	if (fl.l_type == F_UNLCK) {
		say("%s: U", what);
		return;
	}
	say("%s: %s start=%lld len=%lld pid=%s", what, tname(fl.l_type), (long long)fl.l_start,
	    (long long)fl.l_len, who(fl.l_pid));
}

// A pipe pair between a parent and one child.
struct chan {
	int down[2], up[2];
};

static void chan_open(struct chan *c) {
	if (pipe(c->down) || pipe(c->up))
		exit(2);
}

static void post(int fd) {
	if (write(fd, "x", 1) != 1)
		exit(2);
}

static void await(int fd) {
	char b;
	if (read(fd, &b, 1) != 1)
		exit(2);
}

// fork starts a child running fn with the channel's child ends; the parent gets the pid.
static pid_t spawn(struct chan *c, void (*fn)(struct chan *)) {
	pid_t p = fork();
	if (p < 0)
		exit(2);
	if (p == 0) {
		fn(c);
		_exit(0);
	}
	return p;
}

static void reap(pid_t p) {
	int st;
	guard(10000);
	pid_t r = waitpid(p, &st, 0);
	unguard();
	if (r != p)
		say("  waitpid: %s", en(errno));
}

static pid_t parent;

// wait_blocked returns once /proc/locks shows a request blocked on inode ino (or after 10 s).
static void wait_blocked(ino_t ino) {
	char want[32];
	snprintf(want, sizeof want, ":%lu ", (unsigned long)ino);
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen("/proc/locks", "r");
		char line[256];
		int found = 0;
		while (f && fgets(line, sizeof line, f))
			if (strstr(line, "->") && strstr(line, want))
				found = 1;
		if (f)
			fclose(f);
		if (found)
			return;
		usleep(10 * 1000);
	}
	say("  no blocked request showed up");
}

// --- 1. A process's locks belong to the process, whatever descriptor it uses.

static int c1fd;
static void child1(struct chan *c) {
	int fd = open_file("f1", O_RDWR);
	await(c->down[0]);
	say("1 child W[0,10) while parent holds it: %s", en(lk(fd, F_SETLK, F_WRLCK, 0, 10)));
	getlk("1 child GETLK W[0,10)", fd, F_GETLK, F_WRLCK, 0, 10);
	getlk("1 child GETLK R[20,30)", fd, F_GETLK, F_RDLCK, 20, 10);
	getlk("1 child GETLK W whole file", fd, F_GETLK, F_WRLCK, 0, 0);
	post(c->up[1]);
	await(c->down[0]); // the parent closed one descriptor
	say("1 child W[0,10) after the parent closed fd2: %s", en(lk(fd, F_SETLK, F_WRLCK, 0, 10)));
	post(c->up[1]);
	await(c->down[0]);
	say("1 child unlocks: %s", en(lk(fd, F_SETLK, F_UNLCK, 0, 10)));
	post(c->up[1]);
	(void)c1fd;
}

static void section1(void) {
	int fd1 = open_file("f1", O_RDWR), fd2 = open_file("f1", O_RDWR);
	say("1 parent W[0,10) on fd1: %s", en(lk(fd1, F_SETLK, F_WRLCK, 0, 10)));
	say("1 parent W[0,10) on fd2: %s", en(lk(fd2, F_SETLK, F_WRLCK, 0, 10)));
	say("1 parent W[5,15) on fd2, blocking: %s", en(lk(fd2, F_SETLKW, F_WRLCK, 5, 10)));
	say("1 parent R[0,3) on fd1, blocking: %s", en(lk(fd1, F_SETLKW, F_RDLCK, 0, 3)));
	getlk("1 parent GETLK W[0,100) on fd1 (own locks)", fd1, F_GETLK, F_WRLCK, 0, 100);
	struct chan c;
	chan_open(&c);
	pid_t p = spawn(&c, child1);
	role(p, "child");
	post(c.down[1]);
	await(c.up[0]);
	close(fd2);
	post(c.down[1]);
	await(c.up[0]);
	say("1 parent W[0,10) on fd1 after closing fd2: %s", en(lk(fd1, F_SETLK, F_WRLCK, 0, 10)));
	getlk("1 parent GETLK W[0,10)", fd1, F_GETLK, F_WRLCK, 0, 10);
	post(c.down[1]);
	await(c.up[0]);
	say("1 parent W[0,10) after the child unlocked: %s", en(lk(fd1, F_SETLK, F_WRLCK, 0, 10)));
	reap(p);
	unrole();
	close(fd1);
}

// --- 2. A blocking lock waits for another process and gets the lock when it is released.

static void child2(struct chan *c) {
	int fd = open_file("f2", O_RDWR);
	say("2 child W[0,1): %s", en(lk(fd, F_SETLK, F_WRLCK, 0, 1)));
	post(c->up[1]);
	usleep(300 * 1000);
	say("2 child unlocks");
	lk(fd, F_SETLK, F_UNLCK, 0, 1);
	await(c->down[0]);
}

static void section2(void) {
	int fd = open_file("f2", O_RDWR);
	struct chan c;
	chan_open(&c);
	pid_t p = spawn(&c, child2);
	role(p, "child");
	await(c.up[0]);
	say("2 parent W[0,1), blocking: %s", en(lk(fd, F_SETLKW, F_WRLCK, 0, 1)));
	post(c.down[1]);
	reap(p);
	unrole();
	close(fd);
}

// --- 3. Split, merged and converted ranges as another process sees them.

static void child3(struct chan *c) {
	int fd = open_file("f3", O_RDWR);
	await(c->down[0]);
	static const off_t at[][2] = {{0, 5}, {5, 10}, {10, 5}, {12, 30}, {20, 20}, {40, 10}, {45, 100}, {95, 10}, {200, 0}};
	for (unsigned i = 0; i < sizeof at / sizeof at[0]; i++) {
		char what[96];
		snprintf(what, sizeof what, "3 child GETLK W[%lld,+%lld)", (long long)at[i][0], (long long)at[i][1]);
		getlk(what, fd, F_GETLK, F_WRLCK, at[i][0], at[i][1]);
		snprintf(what, sizeof what, "3 child GETLK R[%lld,+%lld)", (long long)at[i][0], (long long)at[i][1]);
		getlk(what, fd, F_GETLK, F_RDLCK, at[i][0], at[i][1]);
	}
	say("3 child R[0,10): %s", en(lk(fd, F_SETLK, F_RDLCK, 0, 10)));
	say("3 child R[10,20): %s", en(lk(fd, F_SETLK, F_RDLCK, 10, 10)));
	say("3 child W[200,+inf): %s", en(lk(fd, F_SETLK, F_WRLCK, 200, 0)));
	post(c->up[1]);
	await(c->down[0]);
}

static void section3(void) {
	int fd = open_file("f3", O_RDWR);
	lk(fd, F_SETLK, F_RDLCK, 0, 100);  // R[0,100)
	lk(fd, F_SETLK, F_WRLCK, 10, 10);  // W[10,20) inside: R[0,10) W[10,20) R[20,100)
	lk(fd, F_SETLK, F_UNLCK, 40, 10);  // hole [40,50)
	lk(fd, F_SETLK, F_WRLCK, 100, 50); // W[100,150) after R[..100)
	lk(fd, F_SETLK, F_WRLCK, 150, 0);  // W[150,EOF) merges with W[100,150)
	lk(fd, F_SETLK, F_RDLCK, 20, 10);  // no change
	struct chan c;
	chan_open(&c);
	pid_t p = spawn(&c, child3);
	role(p, "child");
	post(c.down[1]);
	await(c.up[0]);
	getlk("3 parent GETLK W[0,10) (child's read lock)", fd, F_GETLK, F_WRLCK, 0, 10);
	post(c.down[1]);
	reap(p);
	unrole();
	close(fd);
}

// --- 4. lockf.

static void child4(struct chan *c) {
	int fd = open_file("f4", O_RDWR);
	await(c->down[0]);
	lseek(fd, 0, SEEK_SET);
	say("4 child lockf F_TEST 10: %s", en(lockf(fd, F_TEST, 10) ? errno : 0));
	say("4 child lockf F_TLOCK 10: %s", en(lockf(fd, F_TLOCK, 10) ? errno : 0));
	lseek(fd, 10, SEEK_SET);
	say("4 child lockf F_TLOCK 10 at 10: %s", en(lockf(fd, F_TLOCK, 10) ? errno : 0));
	post(c->up[1]);
	await(c->down[0]);
	lseek(fd, 0, SEEK_SET);
	guard(5000);
	int e = lockf(fd, F_LOCK, 10) ? errno : 0;
	unguard();
	say("4 child lockf F_LOCK 10 after parent's F_ULOCK: %s", en(e));
	post(c->up[1]);
	await(c->down[0]);
}

static void section4(void) {
	int fd = open_file("f4", O_RDWR);
	say("4 parent lockf F_LOCK 10: %s", en(lockf(fd, F_LOCK, 10) ? errno : 0));
	struct chan c;
	chan_open(&c);
	pid_t p = spawn(&c, child4);
	role(p, "child");
	post(c.down[1]);
	await(c.up[0]);
	lseek(fd, 10, SEEK_SET);
	say("4 parent lockf F_TEST 10 at 10: %s", en(lockf(fd, F_TEST, 10) ? errno : 0));
	lseek(fd, 0, SEEK_SET);
	say("4 parent lockf F_ULOCK 10: %s", en(lockf(fd, F_ULOCK, 10) ? errno : 0));
	post(c.down[1]);
	await(c.up[0]);
	say("4 parent lockf F_TEST 10: %s", en(lockf(fd, F_TEST, 10) ? errno : 0));
	post(c.down[1]);
	reap(p);
	unrole();
	close(fd);
}

// --- 5. Deadlock: each process holds a byte and waits for the other's.

static void child5(struct chan *c) {
	int fd = open_file("f5", O_RDWR);
	lk(fd, F_SETLK, F_WRLCK, 1, 1);
	post(c->up[1]);
	await(c->down[0]);
	post(c->up[1]);
	int e = lk(fd, F_SETLKW, F_WRLCK, 0, 1); // blocks until the parent gives up byte 0
	say("5 child W[0,1), blocking: %s", en(e));
	await(c->down[0]);
}

static void section5(void) {
	int fd = open_file("f5", O_RDWR);
	lk(fd, F_SETLK, F_WRLCK, 0, 1);
	struct chan c;
	chan_open(&c);
	pid_t p = spawn(&c, child5);
	role(p, "child");
	await(c.up[0]);
	post(c.down[1]);
	await(c.up[0]);
	struct stat st;
	fstat(fd, &st);
	wait_blocked(st.st_ino); // the child waits for byte 0
	int e = lk(fd, F_SETLKW, F_WRLCK, 1, 1);
	say("5 parent W[1,2), blocking, while the child waits for byte 0: %s", en(e));
	lk(fd, F_SETLK, F_UNLCK, 0, 1);
	usleep(300 * 1000);
	post(c.down[1]);
	reap(p);
	unrole();
	close(fd);
}

// --- 6. A signal interrupts a blocking lock; a killed waiter leaves no lock behind.

static void child6(struct chan *c) {
	int fd = open_file("f6", O_RDWR);
	lk(fd, F_SETLK, F_WRLCK, 0, 10);
	post(c->up[1]);
	await(c->down[0]);
	lk(fd, F_SETLK, F_UNLCK, 0, 10);
	post(c->up[1]);
	await(c->down[0]);
}

static void waiter6(struct chan *c) {
	int fd = open_file("f6", O_RDWR);
	post(c->up[1]);
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10};
	fcntl(fd, F_SETLKW, &fl); // killed while waiting
	say("6 waiter got the lock: it was not killed");
}

static void section6(void) {
	int fd = open_file("f6", O_RDWR);
	struct chan c, w;
	chan_open(&c);
	chan_open(&w);
	pid_t p = spawn(&c, child6);
	role(p, "child");
	await(c.up[0]);
	struct sigaction sa = {0};
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarmed = 0;
	struct itimerval it = {{0, 0}, {0, 300 * 1000}};
	setitimer(ITIMER_REAL, &it, NULL);
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10};
	int e = fcntl(fd, F_SETLKW, &fl) ? errno : 0;
	say("6 parent W[0,10), blocking, interrupted by a signal: %s (alarm=%d)", en(e), (int)alarmed);
	getlk("6 parent GETLK W[0,10)", fd, F_GETLK, F_WRLCK, 0, 10);

	pid_t wp = spawn(&w, waiter6);
	role(wp, "waiter");
	await(w.up[0]);
	struct stat sb;
	fstat(fd, &sb);
	wait_blocked(sb.st_ino);
	kill(wp, SIGKILL);
	int st;
	guard(5000);
	pid_t r = waitpid(wp, &st, 0);
	unguard();
	say("6 waiter killed while waiting: %s", r == wp && WIFSIGNALED(st) ? "reaped" : "not reaped");
	post(c.down[1]); // the child unlocks
	await(c.up[0]);
	getlk("6 parent GETLK W[0,10) after the child unlocked", fd, F_GETLK, F_WRLCK, 0, 10);
	say("6 parent W[0,10): %s", en(lk(fd, F_SETLK, F_WRLCK, 0, 10)));
	post(c.down[1]);
	reap(p);
	unrole();
	unrole();
	close(fd);
}

// --- 7. Locks end with the process; a child does not inherit them.

static void child7(struct chan *c) {
	int fd = open_file("f7", O_RDWR);
	say("7 child W[0,10) (parent holds R[0,10)): %s", en(lk(fd, F_SETLK, F_WRLCK, 0, 10)));
	say("7 child W[10,20): %s", en(lk(fd, F_SETLK, F_WRLCK, 10, 10)));
	post(c->up[1]);
	await(c->down[0]);
	// exits holding W[10,20)
}

static void section7(void) {
	int fd = open_file("f7", O_RDWR);
	lk(fd, F_SETLK, F_RDLCK, 0, 10);
	struct chan c;
	chan_open(&c);
	pid_t p = spawn(&c, child7);
	role(p, "child");
	await(c.up[0]);
	getlk("7 parent GETLK W[10,20)", fd, F_GETLK, F_WRLCK, 10, 10);
	post(c.down[1]);
	reap(p);
	getlk("7 parent GETLK W[10,20) after the child exited", fd, F_GETLK, F_WRLCK, 10, 10);
	unrole();
	// A forked child shares the descriptor but not the lock; its close does not release it.
	pid_t q = fork();
	if (q == 0) {
		int fd2 = open_file("f7", O_RDWR);
		say("7 forked child W[0,10): %s", en(lk(fd2, F_SETLK, F_WRLCK, 0, 10)));
		close(fd);
		close(fd2);
		_exit(0);
	}
	role(q, "child");
	reap(q);
	unrole();
	int fd3 = open_file("f7", O_RDWR);
	pid_t q2 = fork();
	if (q2 == 0) {
		say("7 second child W[0,10) after the first closed its descriptors: %s", en(lk(fd3, F_SETLK, F_WRLCK, 0, 10)));
		_exit(0);
	}
	reap(q2);
	close(fd3); // releases the parent's R[0,10)
	pid_t q3 = fork();
	if (q3 == 0) {
		int fd4 = open_file("f7", O_RDWR);
		say("7 third child W[0,10) after the parent closed a descriptor: %s", en(lk(fd4, F_SETLK, F_WRLCK, 0, 10)));
		_exit(0);
	}
	reap(q3);
	close(fd);
}

// --- 8. Several holders: GETLK names the one whose lock comes first.

static void holder8(struct chan *c) {
	int fd = open_file("f8", O_RDWR);
	await(c->down[0]);
	int i;
	if (read(c->down[0], &i, sizeof i) != sizeof i)
		exit(2);
	lk(fd, F_SETLK, F_RDLCK, 10 * i, 5);
	post(c->up[1]);
	await(c->down[0]);
}

static void section8(void) {
	enum { N = 4 };
	struct chan c[N];
	pid_t p[N];
	static const char *names[N] = {"holder0", "holder1", "holder2", "holder3"};
	for (int i = 0; i < N; i++) {
		chan_open(&c[i]);
		p[i] = spawn(&c[i], holder8);
		role(p[i], names[i]);
	}
	for (int i = N - 1; i >= 0; i--) { // the last holder locks first
		post(c[i].down[1]);
		if (write(c[i].down[1], &i, sizeof i) != sizeof i)
			exit(2);
		await(c[i].up[0]);
	}
	int fd = open_file("f8", O_RDWR);
	getlk("8 parent GETLK W whole file", fd, F_GETLK, F_WRLCK, 0, 0);
	getlk("8 parent GETLK W[12,+100)", fd, F_GETLK, F_WRLCK, 12, 100);
	getlk("8 parent GETLK W[25,+3)", fd, F_GETLK, F_WRLCK, 25, 3);
	getlk("8 parent GETLK R whole file", fd, F_GETLK, F_RDLCK, 0, 0);
	for (int i = 0; i < N; i++) {
		post(c[i].down[1]);
		reap(p[i]);
	}
	for (int i = 0; i < N; i++)
		unrole();
	close(fd);
}

// --- 9. flock(2): locks belong to the open file description.

static void section9(void) {
	int fd1 = open_file("f9", O_RDWR), fd2 = open_file("f9", O_RDWR);
	say("9 flock fd1 LOCK_EX: %s", en(flock(fd1, LOCK_EX | LOCK_NB) ? errno : 0));
	say("9 flock fd2 LOCK_EX|LOCK_NB: %s", en(flock(fd2, LOCK_EX | LOCK_NB) ? errno : 0));
	int d = dup(fd1);
	say("9 flock dup(fd1) LOCK_SH|LOCK_NB: %s", en(flock(d, LOCK_SH | LOCK_NB) ? errno : 0));
	say("9 flock fd2 LOCK_SH|LOCK_NB: %s", en(flock(fd2, LOCK_SH | LOCK_NB) ? errno : 0));
	say("9 fcntl W[0,10) on fd2 beside flock: %s", en(lk(fd2, F_SETLK, F_WRLCK, 0, 10)));
	pid_t q = fork();
	if (q == 0) {
		say("9 child flock fd1 LOCK_EX|LOCK_NB (shared description): %s", en(flock(fd1, LOCK_EX | LOCK_NB) ? errno : 0));
		int fd3 = open_file("f9", O_RDWR);
		say("9 child flock fd3 LOCK_EX|LOCK_NB: %s", en(flock(fd3, LOCK_EX | LOCK_NB) ? errno : 0));
		say("9 child flock fd1 LOCK_UN: %s", en(flock(fd1, LOCK_UN) ? errno : 0));
		_exit(0);
	}
	reap(q);
	say("9 flock fd2 LOCK_EX|LOCK_NB after the child's LOCK_UN: %s", en(flock(fd2, LOCK_EX | LOCK_NB) ? errno : 0));
	close(fd2); // releases fd2's flock
	say("9 flock fd1 LOCK_EX|LOCK_NB after closing fd2: %s", en(flock(fd1, LOCK_EX | LOCK_NB) ? errno : 0));
	close(fd1); // d still refers to the description: the lock stays
	int fd4 = open_file("f9", O_RDWR);
	say("9 flock new descriptor LOCK_EX|LOCK_NB while dup holds: %s", en(flock(fd4, LOCK_EX | LOCK_NB) ? errno : 0));
	close(d);
	guard(5000);
	int e = flock(fd4, LOCK_EX) ? errno : 0;
	unguard();
	say("9 flock new descriptor LOCK_EX after the last close: %s", en(e));
	close(fd4);
}

// --- 10. OFD locks from the application.

static void section10(void) {
	int fd1 = open_file("f10", O_RDWR), fd2 = open_file("f10", O_RDWR);
	say("10 OFD W[0,10) fd1: %s", en(lk(fd1, F_OFD_SETLK, F_WRLCK, 0, 10)));
	say("10 OFD W[0,10) fd2: %s", en(lk(fd2, F_OFD_SETLK, F_WRLCK, 0, 10)));
	getlk("10 OFD GETLK fd2", fd2, F_OFD_GETLK, F_WRLCK, 0, 10);
	getlk("10 POSIX GETLK fd2", fd2, F_GETLK, F_WRLCK, 0, 10);
	say("10 POSIX W[0,10) fd2: %s", en(lk(fd2, F_SETLK, F_WRLCK, 0, 10)));
	close(fd2);
	int fd3 = open_file("f10", O_RDWR);
	say("10 OFD W[0,10) fd3 after closing fd2: %s", en(lk(fd3, F_OFD_SETLK, F_WRLCK, 0, 10)));
	close(fd1);
	say("10 OFD W[0,10) fd3 after closing fd1: %s", en(lk(fd3, F_OFD_SETLK, F_WRLCK, 0, 10)));
	close(fd3);
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: locks DIR [SECTION...]\n");
		return 2;
	}
	dir = argv[1];
	parent = getpid();
	role(parent, "parent");
	void (*sections[])(void) = {section1, section2, section3, section4, section5,
	                            section6, section7, section8, section9, section10};
	int n = sizeof sections / sizeof sections[0];
	if (argc == 2) {
		for (int i = 0; i < n; i++)
			sections[i]();
	} else {
		for (int a = 2; a < argc; a++) {
			int i = atoi(argv[a]);
			if (i >= 1 && i <= n)
				sections[i - 1]();
		}
	}
	return 0;
}
