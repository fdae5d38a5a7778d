/* The real wait/wake/clock of the ops tables: thin calls into lib/futex.c
 * (absolute CLOCK_MONOTONIC deadlines, cancellable waits, errno kept),
 * private (bhi_futex_ops) or process-shared for words in shared memory
 * (bhi_futex_shared_ops). */
#include "internal.h"
#include "lib/futex.h"

uint64_t bh_now_ns(void)
{
	return bhi_now_ns();
}

static uint64_t futex_now(void *ctx)
{
	(void)ctx;
	return bhi_now_ns();
}

/* bh_acquire is a cancellation point: the wait is cancellable. */
static int futex_wait(void *ctx, _Atomic uint32_t *word, uint32_t expect,
		      uint64_t deadline_ns)
{
	(void)ctx;
	return bhi_futex_wait(word, expect, deadline_ns, BHI_FUTEX_CANCEL);
}

static int futex_wait_shared(void *ctx, _Atomic uint32_t *word, uint32_t expect,
			     uint64_t deadline_ns)
{
	(void)ctx;
	return bhi_futex_wait(word, expect, deadline_ns, BHI_FUTEX_CANCEL | BHI_FUTEX_SHARED);
}

static void futex_wake(void *ctx, _Atomic uint32_t *word)
{
	(void)ctx;
	bhi_futex_wake(word, 1, 0);
}

static void futex_wake_shared(void *ctx, _Atomic uint32_t *word)
{
	(void)ctx;
	bhi_futex_wake(word, 1, BHI_FUTEX_SHARED);
}

const struct bhi_sync_ops bhi_futex_ops = {
	.wait = futex_wait,
	.wake = futex_wake,
	.now = futex_now,
	.ctx = NULL,
};

/* Words in a MAP_SHARED segment that other processes wait on or wake. */
const struct bhi_sync_ops bhi_futex_shared_ops = {
	.wait = futex_wait_shared,
	.wake = futex_wake_shared,
	.now = futex_now,
	.ctx = NULL,
};
