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
#include <stdbool.h>
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

/* What a wait is for. The real ops ignore it; a fake clock in a test uses
 * it to tell the waits apart (to play a caller's timeout and leave a
 * worker's keep-alive alone, or to count the threads parked). */
enum bhi_wait_kind {
	BHI_WAIT_GRANT, /* an acquirer queued for permits (core or host-wide) */
	BHI_WAIT_PARK,  /* an idle pool worker; deadline = its keep-alive */
	BHI_WAIT_CALL,  /* bh_pool_call's caller; deadline = the caller's */
	BHI_WAIT_DRAIN, /* bh_pool_shutdown, for the threads to exit */
	BHI_WAIT_KINDS
};

/*
 * Wait, wake and clock: one table for every layer that sleeps (the core's
 * queue, the host-wide queue, the pool), injectable so that tests drive
 * every interleaving on one virtual clock (tests/testutil.h).
 *   wait: sleep while *word == expect, until deadline_ns (absolute, on the
 *         clock of now(); BH_FOREVER = none). 0 (woken, maybe spuriously),
 *         -EINTR, -EAGAIN (word != expect) or -ETIMEDOUT. A cancellation
 *         point in the real tables.
 *   wake: one waiter of word, or all of them.
 *   now:  the clock deadlines are on.
 */
struct bhi_sync_ops {
	int (*wait)(void *ctx, enum bhi_wait_kind kind, _Atomic uint32_t *word,
		    uint32_t expect, uint64_t deadline_ns);
	void (*wake)(void *ctx, _Atomic uint32_t *word, bool all);
	uint64_t (*now)(void *ctx);
	void *ctx;
};

/* The real tables: process-private futexes, and process-shared ones for
 * words in a MAP_SHARED segment that other processes wait on or wake. */
extern const struct bhi_sync_ops bhi_futex_ops;
extern const struct bhi_sync_ops bhi_futex_shared_ops;

static inline int bhi_sync_wait(const struct bhi_sync_ops *s, enum bhi_wait_kind kind,
				_Atomic uint32_t *word, uint32_t expect, uint64_t deadline_ns)
{
	return s->wait(s->ctx, kind, word, expect, deadline_ns);
}

static inline void bhi_sync_wake(const struct bhi_sync_ops *s, _Atomic uint32_t *word, bool all)
{
	s->wake(s->ctx, word, all);
}

static inline uint64_t bhi_sync_now(const struct bhi_sync_ops *s)
{
	return s->now(s->ctx);
}

#endif /* BHI_FUTEX_H */
