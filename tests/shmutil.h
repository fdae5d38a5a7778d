/* Shared by the host-wide tests: a private segment directory per test
 * program (BH_SHM_DIR), unique names, and forked children that report back
 * over a pipe. */
#ifndef BH_SHMUTIL_H
#define BH_SHMUTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "shm/seg.h"
#include "bulkhead/shm.h"
#include "shm/hooks.h"

static char shm_dir[256];

static inline int shm_setup(void **state)
{
	(void)state;
	snprintf(shm_dir, sizeof(shm_dir), "/tmp/bh-shm-test.XXXXXX");
	if (!mkdtemp(shm_dir))
		return -1;
	setenv("BH_SHM_DIR", shm_dir, 1);
	return 0;
}

/* Files left in the directory (the tests expect none at the end). */
static inline int shm_files(void)
{
	DIR *d = opendir(shm_dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.' || (e->d_name[1] && strcmp(e->d_name, ".."));
	closedir(d);
	return n;
}

static inline int shm_teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", shm_dir);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *uniq(const char *base)
{
	static char buf[64];
	static unsigned seq;

	snprintf(buf, sizeof(buf), "%s-%u", base, seq++);
	return buf;
}

static inline void path_for(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/bulkhead.%s", shm_dir, name);
}

static bulkhead_t *shm_make(const char *name, uint32_t max, uint32_t queue, uint32_t flags)
{
	struct bh_config cfg = { .max_concurrent = max, .queue_capacity = queue, .flags = flags };
	bulkhead_t *bh = NULL;

	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE | BH_SHM_EXCL, &bh), 0);
	return bh;
}

static inline void shm_done(bulkhead_t *bh, const char *name)
{
	bh_destroy(bh);
	assert_int_equal(bh_shm_unlink(name), 0);
}

/* ---- threads asleep -------------------------------------------------------- */

/* Where a thread is blocked: the futex address of its system call, if that
 * call is futex(2) (/proc/self/task/TID/syscall); 0 otherwise. */
static inline uintptr_t futex_of(pid_t tid)
{
	char path[64], buf[256];
	unsigned long nr = 0, arg = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%lu %lx", &nr, &arg) != 2)
		arg = 0;
	fclose(f);
	return nr == SYS_futex ? (uintptr_t)arg : 0;
}

/* Wait (5 s at most) until a thread of this process sleeps in futex(2)
 * on word: true when one does. */
static inline bool await_futex_sleeper(const void *word)
{
	uint64_t t0 = bh_now_ns();

	while (bh_now_ns() - t0 < 5 * BH_SEC) {
		DIR *d = opendir("/proc/self/task");
		struct dirent *e;
		bool found = false;

		if (!d)
			return false;
		while (!found && (e = readdir(d)) != NULL)
			found = e->d_name[0] != '.' &&
				futex_of((pid_t)atoi(e->d_name)) == (uintptr_t)word;
		closedir(d);
		if (found)
			return true;
		usleep(1000);
	}
	return false;
}

/* ---- children ------------------------------------------------------------ */

struct child {
	pid_t pid;
	int rd; /* what the child writes */
	int wr; /* what the child reads */
};

/* Run fn(arg, to_parent, from_parent) in a child, which exits with its
 * return value (alarm: a child that hangs dies). */
static inline struct child spawn(int (*fn)(void *arg, int out, int in), void *arg)
{
	int up[2], down[2];
	struct child c;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	fflush(stdout);
	fflush(stderr);
	c.pid = fork();
	assert_true(c.pid >= 0);
	if (c.pid == 0) {
		close(up[0]);
		close(down[1]);
		alarm(60);
		_exit(fn(arg, up[1], down[0]));
	}
	close(up[1]);
	close(down[0]);
	c.rd = up[0];
	c.wr = down[1];
	return c;
}

static inline void say(int fd, int v)
{
	if (write(fd, &v, sizeof(v)) != sizeof(v))
		_exit(99);
}

static inline int hear(int fd)
{
	int v = -12345;

	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return -12345;
	return v;
}

/* The child's exit status, or 1000 + the signal that killed it. */
static inline int wait_child(struct child *c)
{
	int st;

	assert_int_equal(waitpid(c->pid, &st, 0), c->pid);
	close(c->rd);
	close(c->wr);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

/* The child's exit status; fails the test if it did not exit normally. */
static inline int reap(struct child *c)
{
	int st = wait_child(c);

	if (st >= 1000)
		fail_msg("child %d died of signal %d", (int)c->pid, st - 1000);
	return st;
}

static inline void kill_reap(struct child *c)
{
	kill(c->pid, SIGKILL);
	waitpid(c->pid, NULL, 0);
	close(c->rd);
	close(c->wr);
}

/* A forked child's argument: the bulkhead's name, and the test's handle the
 * child inherits, which it drops to attach afresh (mapped and checked). */
struct fresh {
	const char *name;
	bulkhead_t *inherited;
};

/* Wait (without sleeping blindly) until in_flight reaches n; fails after
 * limit_ns. Returns how long it took. */
static inline uint64_t await_in_flight(bulkhead_t *bh, uint64_t n, uint64_t limit_ns)
{
	uint64_t t0 = bh_now_ns();

	while (stats_of(bh).in_flight != n) {
		if (bh_now_ns() - t0 > limit_ns)
			fail_msg("in_flight stays %llu, want %llu",
				 (unsigned long long)stats_of(bh).in_flight, (unsigned long long)n);
		usleep(1000);
	}
	return bh_now_ns() - t0;
}

/* The segment's word as a damaged word's give must leave it: no flag set,
 * nobody queued or holding, the limit unchanged; and every permit can be
 * taken and given back. */
static inline void assert_word_clean(bulkhead_t *bh, uint32_t limit)
{
	struct bhs_seg *g = bhs_segment(bh, NULL);
	uint64_t w = atomic_load(&g->word);

	assert_false(w & (W_CLOSED | W_STARVING | W_WOKEN | S_FROZEN));
	assert_int_equal(s_nq(w), 0);
	assert_int_equal(w_held(w), 0);
	assert_int_equal(w_limit(w), limit);
	assert_int_equal(bh_try_acquire(bh, limit), 0);
	assert_int_equal(bh_release(bh, limit), 0);
}

#endif /* BH_SHMUTIL_H */
