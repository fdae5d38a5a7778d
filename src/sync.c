/* The real wait/wake/clock: private futexes with absolute CLOCK_MONOTONIC
 * deadlines. errno is saved and restored: the library never sets it. */
#include <errno.h>
#include <linux/futex.h>
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

/* Deferred cancellation cannot interrupt a raw futex wait, so, as glibc does
 * around its own cancellable syscalls, the wait alone runs with asynchronous
 * cancellation. Nothing is locked or half-updated inside that window; the
 * caller's cleanup handler unlinks the waiter. */
static int futex_wait(void *ctx, _Atomic uint32_t *word, uint32_t expect,
		      uint64_t deadline_ns)
{
	struct timespec ts, *tp = NULL;
	int saved = errno, oldtype, r;
	long rc;

	(void)ctx;
	if (deadline_ns != BH_FOREVER) {
		ts.tv_sec = (time_t)(deadline_ns / BH_SEC);
		ts.tv_nsec = (long)(deadline_ns % BH_SEC);
		tp = &ts;
	}
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &oldtype);
	rc = syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
		     expect, tp, NULL, FUTEX_BITSET_MATCH_ANY);
	r = rc < 0 ? -errno : 0;
	pthread_setcanceltype(oldtype, NULL);
	errno = saved;
	return r;
}

static void futex_wake(void *ctx, _Atomic uint32_t *word)
{
	int saved = errno;

	(void)ctx;
	syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1);
	errno = saved;
}

const struct bhi_sync_ops bhi_futex_ops = {
	.wait = futex_wait,
	.wake = futex_wake,
	.now = futex_now,
	.ctx = NULL,
};
