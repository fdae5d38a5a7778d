/* Shared by the cmocka tests: includes, a scripted fake wait/wake/clock, and
 * helpers to wait (without sleeping blindly) for threads to queue. */
#ifndef BH_TESTUTIL_H
#define BH_TESTUTIL_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "bulkhead.h"
#include "core/internal.h"

/*
 * One fake wait/wake/clock (struct bhi_sync_ops, lib/futex.h) for every
 * layer's tests: the core's, the host-wide layer's and the pool's. Time is
 * virtual (f->now). A wait is one of two kinds of thing:
 *  - scripted, when a hook is set for the wait's kind (hook_kinds): the
 *    wait calls the hook on the waiter's own thread with the call number;
 *    the hook plays whatever "other thread" does at that instant (release,
 *    close, resize, a newcomer, a timeout...) and returns what the kernel
 *    would have: 0, -EINTR, -EAGAIN or -ETIMEDOUT. No threads, no sleeping:
 *    every interleaving is exact and repeatable;
 *  - blocking, otherwise: the waiter sleeps until the word changes, a wake,
 *    or the virtual clock reaches its deadline (fake_advance), and returns
 *    what the futex would. fake_await waits until so many wait.
 */
struct fake_sync {
	struct bhi_sync_ops ops;
	pthread_mutex_t m;
	pthread_cond_t c;
	uint64_t now;
	unsigned waits; /* scripted waits so far */
	unsigned wakes; /* wake calls, all words */
	unsigned waiting[BHI_WAIT_KINDS]; /* blocked now, by kind */
	int (*hook)(struct fake_sync *f, unsigned call);
	unsigned hook_kinds; /* 1u << kind for each kind the hook plays */
	bulkhead_t *bh;
	void *user;
};

#define FAKE_ALL_KINDS ((1u << BHI_WAIT_KINDS) - 1)

static void fake_unlock(void *m)
{
	pthread_mutex_unlock(m);
}

static inline int fake_block(struct fake_sync *f, enum bhi_wait_kind kind,
			     _Atomic uint32_t *word, uint32_t expect, uint64_t deadline)
{
	int r;

	pthread_mutex_lock(&f->m);
	pthread_cleanup_push(fake_unlock, &f->m);
	f->waiting[kind]++;
	pthread_cond_broadcast(&f->c);
	while (atomic_load(word) == expect && f->now < deadline)
		pthread_cond_wait(&f->c, &f->m); /* a cancellation point, like the futex */
	f->waiting[kind]--;
	pthread_cond_broadcast(&f->c);
	r = atomic_load(word) != expect ? -EAGAIN : f->now >= deadline ? -ETIMEDOUT : 0;
	pthread_cleanup_pop(1);
	return r;
}

static int fake_wait(void *ctx, enum bhi_wait_kind kind, _Atomic uint32_t *word,
		     uint32_t expect, uint64_t deadline)
{
	struct fake_sync *f = ctx;

	if (f->hook && (f->hook_kinds & (1u << kind)))
		return f->hook(f, f->waits++);
	return fake_block(f, kind, word, expect, deadline);
}

static void fake_wake(void *ctx, _Atomic uint32_t *word, bool all)
{
	struct fake_sync *f = ctx;

	(void)word;
	(void)all;
	pthread_mutex_lock(&f->m);
	f->wakes++;
	pthread_cond_broadcast(&f->c);
	pthread_mutex_unlock(&f->m);
}

/* Under the lock, for blocking fakes: fake_advance moves time from the
 * test's thread. A scripted test moves f->now from its hooks, on the
 * waiter's own thread. */
static uint64_t fake_now(void *ctx)
{
	struct fake_sync *f = ctx;
	uint64_t now;

	pthread_mutex_lock(&f->m);
	now = f->now;
	pthread_mutex_unlock(&f->m);
	return now;
}

/* A fake at time now, not installed anywhere, with hook (may be NULL)
 * playing every kind of wait. */
static inline void fake_init(struct fake_sync *f, uint64_t now,
			     int (*hook)(struct fake_sync *, unsigned))
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->m, NULL);
	pthread_cond_init(&f->c, NULL);
	f->ops.wait = fake_wait;
	f->ops.wake = fake_wake;
	f->ops.now = fake_now;
	f->ops.ctx = f;
	f->now = now;
	f->hook = hook;
	f->hook_kinds = FAKE_ALL_KINDS;
}

/* Install a scripted fake on a process-local bulkhead (spinning off). */
static inline void fake_install(struct fake_sync *f, bulkhead_t *bh,
				int (*hook)(struct fake_sync *, unsigned))
{
	fake_init(f, 1000, hook);
	f->bh = bh;
	bhi_set_sync_ops(bh, &f->ops);
}

static inline void fake_advance(struct fake_sync *f, uint64_t ns)
{
	pthread_mutex_lock(&f->m);
	f->now += ns;
	pthread_cond_broadcast(&f->c);
	pthread_mutex_unlock(&f->m);
}

static inline unsigned fake_wakes(struct fake_sync *f)
{
	unsigned n;

	pthread_mutex_lock(&f->m);
	n = f->wakes;
	pthread_mutex_unlock(&f->m);
	return n;
}

/* Wait (really, ~10 s at most) until exactly n threads block on kind. */
static inline void fake_await(struct fake_sync *f, enum bhi_wait_kind kind, unsigned n)
{
	struct timespec ts;
	uint64_t end = bh_now_ns() + 10 * BH_SEC;
	bool ok;

	pthread_mutex_lock(&f->m);
	while (f->waiting[kind] != n && bh_now_ns() < end) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&f->c, &f->m, &ts);
	}
	ok = f->waiting[kind] == n;
	pthread_mutex_unlock(&f->m);
	assert_true(ok);
}

static inline bulkhead_t *make_bh(uint32_t max, uint32_t queue, uint32_t flags)
{
	struct bh_config cfg = { .max_concurrent = max, .queue_capacity = queue, .flags = flags };
	bulkhead_t *bh = NULL;

	assert_int_equal(bh_create(&cfg, &bh), 0);
	assert_non_null(bh);
	return bh;
}

static inline struct bh_stats stats_of(bulkhead_t *bh)
{
	struct bh_stats st;

	bh_stats(bh, &st);
	return st;
}

/* n threads that each hold a thread index and wait, so that a thread
 * started while they live gets an index past theirs (the lowest free one
 * is handed out): with a bulkhead's nslots of them (and this thread), the
 * next thread has no slot of its own in it. */
struct parked_threads {
	unsigned n;
	pthread_t *t;
	pthread_barrier_t in, out;
};

static inline void *parked_main(void *p)
{
	struct parked_threads *k = p;

	assert_true(bhi_tindex_assign() != UINT32_MAX);
	pthread_barrier_wait(&k->in);
	pthread_barrier_wait(&k->out);
	return NULL;
}

static inline void park_threads(struct parked_threads *k, unsigned n)
{
	k->n = n;
	k->t = calloc(n, sizeof(*k->t));
	assert_non_null(k->t);
	pthread_barrier_init(&k->in, NULL, n + 1);
	pthread_barrier_init(&k->out, NULL, n + 1);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(pthread_create(&k->t[i], NULL, parked_main, k), 0);
	pthread_barrier_wait(&k->in); /* every one holds its index */
}

static inline void unpark_threads(struct parked_threads *k)
{
	pthread_barrier_wait(&k->out);
	for (unsigned i = 0; i < k->n; i++)
		assert_int_equal(pthread_join(k->t[i], NULL), 0);
	pthread_barrier_destroy(&k->in);
	pthread_barrier_destroy(&k->out);
	free(k->t);
}

/* Wait until `queued` reaches n: the outcome is deterministic, only the
 * moment the other thread gets there is not. Fails after ~10 s. */
static inline void await_queued(bulkhead_t *bh, uint64_t n)
{
	uint64_t end = bh_now_ns() + 10 * BH_SEC;

	while (stats_of(bh).queued != n) {
		assert_true(bh_now_ns() < end);
		sched_yield();
	}
}

/* A forked child that crashes must die of it. While a test runs, cmocka
 * catches the crash signals and jumps back to its runner; in a fork child
 * that runner is the child's copy of the parent's, which then goes on to
 * run the rest of the program's tests in the child, beside the parent's
 * own run: a crash in a child showed as a later test failing (in the
 * child), or not at all. With the signals' defaults back, the child dies
 * of the signal and the parent's wait sees it (shmutil.h: reap). */
static void child_crashes_die(void)
{
	static const int sigs[] = { SIGFPE, SIGILL, SIGSEGV, SIGBUS, SIGSYS };

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
}

__attribute__((constructor)) static void child_crashes_die_register(void)
{
	pthread_atfork(NULL, NULL, child_crashes_die);
}

#endif /* BH_TESTUTIL_H */
