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

/* Who is in process slot i: nobody, a living process, or a dead one.
 *
 * A slot changes hands without the internal lock: its process detaches
 * (bhs_leave_proc) and another registers (claim_proc), both while we look.
 * A probe that finds the liveness lock free says only that whoever held it
 * is gone, not that the slot's process is dead: a detacher drops its lock
 * too, and the newcomer that takes the slot a moment later is alive. So the
 * slot is read before the probe and again after it, and it is dead only if
 * the same process (the same generation, still taken the same way) is
 * there on both sides of an unlocked probe. The generation is read first
 * (acquire): a detacher marks its slot PS_LEAVING before it moves the
 * generation (release), so a new generation read here comes with a state
 * past PS_LIVE, and a PS_LIVE read after it is the newcomer's. Had the
 * state been read first, the detacher's PS_LIVE could come with its new
 * generation, which the newcomer then shows too. *gen: the generation the
 * answer is about. This process is alive by definition. */
int bhs_proc_look(struct bhs_att *a, uint32_t i, uint32_t *gen)
{
	uint32_t g, st;
	bool locked;

	if (i > a->nprocs) /* nprocs itself: the recovery slot (open.c) */
		return WHO_NONE;
	/* acquire: pairs with bhs_leave_proc()'s release of the generation */
	g = atomic_load_explicit(&a->procs[i].gen, memory_order_acquire);
	/* acquire: pairs with claim_proc()'s CAS and free_proc()'s release */
	st = atomic_load_explicit(&a->procs[i].state, memory_order_acquire);
	*gen = g;
	if (att_proc(a) && i == a->pidx)
		return WHO_ALIVE;
	if (st == PS_FREE)
		return WHO_NONE;
	if (st == PS_RECLAIMED) /* cleared by a recovery not yet through */
		return WHO_DEAD;
	BHS_POINT(BP_PROBE);
	locked = slot_locked(a, i);
	BHS_POINT(BP_PROBED);
	if (locked)
		return WHO_ALIVE;
	/* The lock was free: of the same process only if nothing moved. The
	 * probe is a system call after the holder's close, which came after
	 * its stores to the slot. */
	if (atomic_load_explicit(&a->procs[i].state, memory_order_acquire) != st ||
	    atomic_load_explicit(&a->procs[i].gen, memory_order_relaxed) != g)
		return WHO_NONE; /* it changed hands: not ours to judge now */
	return WHO_DEAD;
}

bool bhs_proc_alive(struct bhs_att *a, uint32_t pidx)
{
	uint32_t gen;

	return bhs_proc_look(a, pidx, &gen) == WHO_ALIVE;
}

/* The owner a lock word names is gone when its slot changed hands (another
 * generation), or it is not alive. A word naming this process is damage:
 * our threads take the lock one at a time (a->hmu), and we are that one. */
bool bhs_owner_gone(struct bhs_att *a, uint32_t v)
{
	uint32_t idx = (v & 0xffffu) - 1u;
	uint32_t gen = (v >> 16) & 0x7fffu;

	if (idx > a->nprocs || (att_proc(a) && idx == a->pidx))
		return true; /* idx == nprocs: a recovering attacher (open.c) */
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
	BHS_POINT(BP_UNLOCKED);
	bhs_flush_wakes(a);
}
