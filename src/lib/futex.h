/* The futex wait/wake and the clock every layer sleeps with. Private: the
 * prefix is bhi_; include it as "lib/futex.h". No protocol lives here: the
 * callers own their words and re-check them after every return (spurious
 * wakeups, EINTR and EAGAIN are theirs to loop on).
 *
 * errno is saved and restored once, inside these wrappers (as liburing's
 * __sys_* helpers do): the library never changes errno, and no call site
 * needs its own saved/restored pair. Results are negative errno values. */
#ifndef BHI_FUTEX_H
#define BHI_FUTEX_H

#include <stdatomic.h>
#include <stdint.h>

/* The word is in memory other processes map (MAP_SHARED): the futex is
 * keyed by the page, so no FUTEX_PRIVATE_FLAG. Without it, private. */
#define BHI_FUTEX_SHARED 0x1u
/* The wait is a cancellation point: it runs with asynchronous cancellation
 * while cancellation is enabled (see futex.c). Without it, a
 * pthread_cancel waits for the next real cancellation point. */
#define BHI_FUTEX_CANCEL 0x2u

/* CLOCK_MONOTONIC in nanoseconds: the clock of every deadline. */
uint64_t bhi_now_ns(void);

/* Sleep while *word == expect, until deadline_ns (absolute CLOCK_MONOTONIC;
 * UINT64_MAX, BH_FOREVER, for none). 0 when woken (or spuriously),
 * -EAGAIN when *word != expect already, -EINTR on a signal, -ETIMEDOUT
 * at the deadline. A retry with the same deadline never extends it. */
int bhi_futex_wait(_Atomic uint32_t *word, uint32_t expect, uint64_t deadline_ns,
		   unsigned flags);

/* The same with a relative timeout of timeout_ns (FUTEX_WAIT: the kernel
 * starts the interval when the call enters it), for the polls that sleep
 * "at most this long" and read no clock themselves. */
int bhi_futex_wait_for(_Atomic uint32_t *word, uint32_t expect, uint64_t timeout_ns,
		       unsigned flags);

/* Wake up to n waiters of word (INT_MAX: all). */
void bhi_futex_wake(_Atomic uint32_t *word, int n, unsigned flags);

#endif /* BHI_FUTEX_H */
