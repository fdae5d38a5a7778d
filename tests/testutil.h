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
#include <string.h>
#include <cmocka.h>

#include "bulkhead.h"
#include "core/internal.h"

/*
 * A fake sync layer. Every wait calls the test's hook, on the waiter's own
 * thread, with the call number; the hook plays whatever "other thread" does
 * at that instant (release, close, resize, a newcomer...) and returns what
 * the kernel would have: 0, -EINTR, -EAGAIN or -ETIMEDOUT. No threads, no
 * sleeping: every interleaving is exact and repeatable.
 */
struct fake_sync {
	struct bhi_sync_ops ops;
	bulkhead_t *bh;
	uint64_t now;
	unsigned waits, wakes;
	int (*hook)(struct fake_sync *f, unsigned call);
	void *user;
};

static int fake_wait(void *ctx, _Atomic uint32_t *word, uint32_t expect, uint64_t deadline)
{
	struct fake_sync *f = ctx;

	(void)word;
	(void)expect;
	(void)deadline;
	return f->hook(f, f->waits++);
}

static void fake_wake(void *ctx, _Atomic uint32_t *word)
{
	struct fake_sync *f = ctx;

	(void)word;
	f->wakes++;
}

static uint64_t fake_now(void *ctx)
{
	return ((struct fake_sync *)ctx)->now;
}

static inline void fake_install(struct fake_sync *f, bulkhead_t *bh,
				int (*hook)(struct fake_sync *, unsigned))
{
	memset(f, 0, sizeof(*f));
	f->ops.wait = fake_wait;
	f->ops.wake = fake_wake;
	f->ops.now = fake_now;
	f->ops.ctx = f;
	f->bh = bh;
	f->now = 1000;
	f->hook = hook;
	bhi_set_sync_ops(bh, &f->ops);
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

#endif /* BH_TESTUTIL_H */
