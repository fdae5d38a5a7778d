/* The segment's internal lock, and telling the living from the dead.
 *
 * The lock word names its owner (process slot and generation), so a waiter
 * can find out whether the owner is still alive. Waiters sleep with a
 * timeout: a waiter woken by an unlock that dies before taking the lock
 * cannot strand the others (they look again at the next timeout), and an
 * owner that died is found and its lock taken over, after which the taker
 * rebuilds everything the lock protects (reclaim.c). Lock waits are not
 * cancellation points: the futex wait is made without BHI_FUTEX_CANCEL. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_TMPFILE, F_OFD_*, secure_getenv, qsort_r */
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include "lib/futex.h"
#include "seg.h"

#define LOCK_WAITERS (1u << 31)
#define LOCK_POLL_NS (20 * BH_MSEC)

/* A relative poll interval, as before; not cancellable. */
static void lock_wait(_Atomic uint32_t *word, uint32_t expect)
{
	bhi_futex_wait_for(word, expect, LOCK_POLL_NS, BHI_FUTEX_SHARED);
}

static void lock_wake(_Atomic uint32_t *word)
{
	bhi_futex_wake(word, 1, BHI_FUTEX_SHARED);
}

/* Does anyone hold process slot i's liveness lock? The kernel drops it when
 * the last descriptor of the holder's open file description closes: at exit
 * (before the process is a zombie), at exec (O_CLOEXEC), or at detach. Our
 * own locks never conflict with our own probes, so slot a->pidx reads as
 * unlocked here: callers skip it. */
static bool slot_locked(struct bhs_att *a, uint32_t i)
{
	struct flock fl = {
		.l_type = F_WRLCK,
		.l_whence = SEEK_SET,
		.l_start = BHS_LOCK_BASE + (off_t)i,
		.l_len = 1,
	};
	int saved = errno, r;

	r = fcntl(a->fd, F_OFD_GETLK, &fl);
	errno = saved;
	return r < 0 || fl.l_type != F_UNLCK; /* a failed probe proves nothing */
}

/* A process slot is alive while it is taken (not free, not reclaimed) and
 * its liveness lock is held; this process is alive by definition. */
bool bhs_proc_alive(struct bhs_att *a, uint32_t pidx)
{
	if (pidx >= a->nprocs)
		return false;
	if (att_proc(a) && pidx == a->pidx)
		return true;
	if (atomic_load_explicit(&a->procs[pidx].state, memory_order_acquire) != PS_LIVE)
		return false;
	return slot_locked(a, pidx);
}

/* The owner a lock word names is gone when its slot changed hands (another
 * generation), or it is not alive. A word naming this process is damage:
 * our threads take the lock one at a time (a->hmu), and we are that one. */
bool bhs_owner_gone(struct bhs_att *a, uint32_t v)
{
	uint32_t idx = (v & 0xffffu) - 1u;
	uint32_t gen = (v >> 16) & 0x7fffu;

	if (idx >= a->nprocs || (att_proc(a) && idx == a->pidx))
		return true;
	if ((atomic_load_explicit(&a->procs[idx].gen, memory_order_acquire) & 0x7fffu) != gen)
		return true;
	return !bhs_proc_alive(a, idx);
}

/* Returns true when the lock was taken over from a dead owner. */
static bool lock_slow(struct bhs_att *a)
{
	_Atomic uint32_t *word = &a->seg->lock;
	uint32_t v;

	for (;;) {
		v = atomic_load_explicit(word, memory_order_relaxed);
		if (v == 0) {
			/* Take it marked contended: others may still sleep.
			 * acquire: pairs with bhs_unlock()'s release exchange. */
			if (atomic_compare_exchange_strong_explicit(word, &v, a->lockval | LOCK_WAITERS,
								    memory_order_acquire,
								    memory_order_relaxed))
				return false;
			continue;
		}
		if (!(v & LOCK_WAITERS) &&
		    !atomic_compare_exchange_strong_explicit(word, &v, v | LOCK_WAITERS,
							     memory_order_relaxed,
							     memory_order_relaxed))
			continue;
		lock_wait(word, v | LOCK_WAITERS);
		v = atomic_load_explicit(word, memory_order_relaxed);
		if (v != 0 && bhs_owner_gone(a, v & ~LOCK_WAITERS) &&
		    atomic_compare_exchange_strong_explicit(word, &v, a->lockval | LOCK_WAITERS,
							    memory_order_acquire,
							    memory_order_relaxed))
			return true;
	}
}

/* acquire/release: the lock orders everything it protects, across
 * processes as across threads. */
void bhs_lock(struct bhs_att *a)
{
	uint32_t v = 0;

	pthread_mutex_lock(&a->hmu);
	if (!atomic_compare_exchange_strong_explicit(&a->seg->lock, &v, a->lockval,
						     memory_order_acquire, memory_order_relaxed) &&
	    lock_slow(a))
		bhs_rebuild_locked(a, true); /* whatever the dead owner left half-done */
	else if (atomic_load_explicit(&a->seg->word, memory_order_relaxed) & S_FROZEN)
		/* Only a lock holder freezes, and it thaws before it unlocks (or
		 * dies holding the lock, which the branch above repairs): a
		 * frozen word under a lock we took from nobody is damage, and
		 * nobody else would ever thaw it. relaxed: the lock's acquire
		 * ordered the last holder's thaw before this load. */
		bhs_rebuild_locked(a, true);
	BHS_POINT(BP_HOLD_LOCK);
}

void bhs_unlock(struct bhs_att *a)
{
	/* release: pairs with the next holder's acquire CAS in bhs_lock() or lock_slow() */
	uint32_t v = atomic_exchange_explicit(&a->seg->lock, 0, memory_order_release);

	if (v & LOCK_WAITERS)
		lock_wake(&a->seg->lock);
	pthread_mutex_unlock(&a->hmu);
	bhs_flush_wakes(a);
}
