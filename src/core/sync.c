/* The real wait/wake/clock: futexes with absolute CLOCK_MONOTONIC deadlines,
 * private (bhi_futex_ops) or process-shared for words in shared memory
 * (bhi_futex_shared_ops). errno is saved and restored: the library never
 * sets it. */
#include <errno.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

uint64_t bh_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * BH_SEC + (uint64_t)ts.tv_nsec;
}

static uint64_t futex_now(void *ctx)
{
	(void)ctx;
	return bh_now_ns();
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

/* Deferred cancellation cannot interrupt a raw futex wait, so, as glibc does
 * around its own cancellable syscalls, the wait alone runs with asynchronous
 * cancellation (only when cancellation is enabled at all). Nothing is locked
 * or half-updated inside that window; the caller's cleanup handler unlinks
 * the waiter. */
static int futex_wait_op(_Atomic uint32_t *word, uint32_t expect, uint64_t deadline_ns, int op)
{
	struct timespec ts, *tp = NULL;
	int saved = errno, oldtype = PTHREAD_CANCEL_ASYNCHRONOUS, r;
	bool cancellable = cancel_enabled();
	long rc;

	if (deadline_ns != BH_FOREVER) {
		ts.tv_sec = (time_t)(deadline_ns / BH_SEC);
		ts.tv_nsec = (long)(deadline_ns % BH_SEC);
		tp = &ts;
	}
	if (cancellable)
		pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &oldtype);
	rc = syscall(SYS_futex, word, op, expect, tp, NULL, FUTEX_BITSET_MATCH_ANY);
	r = rc < 0 ? -errno : 0;
	if (oldtype == PTHREAD_CANCEL_DEFERRED) {
		pthread_setcanceltype(oldtype, NULL);
		settle_cancel();
	}
	errno = saved;
	return r;
}

static int futex_wait(void *ctx, _Atomic uint32_t *word, uint32_t expect,
		      uint64_t deadline_ns)
{
	(void)ctx;
	return futex_wait_op(word, expect, deadline_ns, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG);
}

static int futex_wait_shared(void *ctx, _Atomic uint32_t *word, uint32_t expect,
			     uint64_t deadline_ns)
{
	(void)ctx;
	return futex_wait_op(word, expect, deadline_ns, FUTEX_WAIT_BITSET);
}

static void futex_wake_op(_Atomic uint32_t *word, int op)
{
	int saved = errno;

	syscall(SYS_futex, word, op, 1);
	errno = saved;
}

static void futex_wake(void *ctx, _Atomic uint32_t *word)
{
	(void)ctx;
	futex_wake_op(word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG);
}

static void futex_wake_shared(void *ctx, _Atomic uint32_t *word)
{
	(void)ctx;
	futex_wake_op(word, FUTEX_WAKE);
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
