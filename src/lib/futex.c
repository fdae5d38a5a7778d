/* The real futex wait/wake and the clock (lib/futex.h). errno is saved and
 * restored here, once per call: the library never sets it. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bulkhead.h>

#include "lib/futex.h"

_Static_assert(BH_FOREVER == UINT64_MAX, "bhi_futex_wait: no deadline is UINT64_MAX");

uint64_t bhi_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * BH_SEC + (uint64_t)ts.tv_nsec;
}

static bool cancel_enabled(void)
{
	int state;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
	pthread_setcancelstate(state, NULL);
	return state == PTHREAD_CANCEL_ENABLE;
}

/* A pthread_cancel that saw our asynchronous window may still have its
 * signal in flight when the window closes. Left alone it would land later,
 * anywhere — even inside a glibc call made with cancellation disabled, whose
 * handler then acts on the type alone. glibc's own cancellable calls wait for
 * such a signal on the way out of their window; pthread_setcanceltype does
 * not. So borrow one: close(-1) runs that wait, and any cancellation it
 * leaves pending is acted on right here, inside bh_acquire, where the
 * caller's cleanup handler gives back whatever was granted. */
static void settle_cancel(void)
{
	close(-1);
	pthread_testcancel();
}

static int private_bit(unsigned flags)
{
	return flags & BHI_FUTEX_SHARED ? 0 : FUTEX_PRIVATE_FLAG;
}

/* Deferred cancellation cannot interrupt a raw futex wait, so, as glibc does
 * around its own cancellable syscalls, the wait alone runs with asynchronous
 * cancellation (only when cancellation is enabled at all, and only for
 * BHI_FUTEX_CANCEL waits). Nothing is locked or half-updated inside that
 * window; the caller's cleanup handler unlinks the waiter. */
static int wait_op(_Atomic uint32_t *word, uint32_t expect, const struct timespec *tp, int op,
		   unsigned flags)
{
	int saved = errno, oldtype = PTHREAD_CANCEL_ASYNCHRONOUS, r;
	bool cancellable = (flags & BHI_FUTEX_CANCEL) && cancel_enabled();
	long rc;

	if (cancellable)
		pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &oldtype);
	rc = syscall(SYS_futex, word, op | private_bit(flags), expect, tp, NULL,
		     FUTEX_BITSET_MATCH_ANY);
	r = rc < 0 ? -errno : 0;
	if (oldtype == PTHREAD_CANCEL_DEFERRED) {
		pthread_setcanceltype(oldtype, NULL);
		settle_cancel();
	}
	errno = saved;
	return r;
}

static struct timespec to_timespec(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / BH_SEC), .tv_nsec = (long)(ns % BH_SEC) };
}

/* FUTEX_WAIT_BITSET: the timeout is an absolute CLOCK_MONOTONIC time. */
int bhi_futex_wait(_Atomic uint32_t *word, uint32_t expect, uint64_t deadline_ns, unsigned flags)
{
	struct timespec ts = to_timespec(deadline_ns);

	return wait_op(word, expect, deadline_ns == BH_FOREVER ? NULL : &ts, FUTEX_WAIT_BITSET,
		       flags);
}

/* FUTEX_WAIT: the timeout is relative (the bitset argument is ignored). */
int bhi_futex_wait_for(_Atomic uint32_t *word, uint32_t expect, uint64_t timeout_ns,
		       unsigned flags)
{
	struct timespec ts = to_timespec(timeout_ns);

	return wait_op(word, expect, timeout_ns == BH_FOREVER ? NULL : &ts, FUTEX_WAIT, flags);
}

void bhi_futex_wake(_Atomic uint32_t *word, int n, unsigned flags)
{
	int saved = errno;

	syscall(SYS_futex, word, FUTEX_WAKE | private_bit(flags), n);
	errno = saved;
}

/* ---- the real ops tables (lib/futex.h) ----------------------------------- */

static uint64_t ops_now(void *ctx)
{
	(void)ctx;
	return bhi_now_ns();
}

/* bh_acquire and bh_pool_call are cancellation points: the waits are. */
static int ops_wait(void *ctx, enum bhi_wait_kind kind, _Atomic uint32_t *word,
		    uint32_t expect, uint64_t deadline_ns)
{
	(void)ctx;
	(void)kind;
	return bhi_futex_wait(word, expect, deadline_ns, BHI_FUTEX_CANCEL);
}

static int ops_wait_shared(void *ctx, enum bhi_wait_kind kind, _Atomic uint32_t *word,
			   uint32_t expect, uint64_t deadline_ns)
{
	(void)ctx;
	(void)kind;
	return bhi_futex_wait(word, expect, deadline_ns, BHI_FUTEX_CANCEL | BHI_FUTEX_SHARED);
}

static void ops_wake(void *ctx, _Atomic uint32_t *word, bool all)
{
	(void)ctx;
	bhi_futex_wake(word, all ? INT_MAX : 1, 0);
}

static void ops_wake_shared(void *ctx, _Atomic uint32_t *word, bool all)
{
	(void)ctx;
	bhi_futex_wake(word, all ? INT_MAX : 1, BHI_FUTEX_SHARED);
}

const struct bhi_sync_ops bhi_futex_ops = {
	.wait = ops_wait,
	.wake = ops_wake,
	.now = ops_now,
	.ctx = NULL,
};

const struct bhi_sync_ops bhi_futex_shared_ops = {
	.wait = ops_wait_shared,
	.wake = ops_wake_shared,
	.now = ops_now,
	.ctx = NULL,
};
