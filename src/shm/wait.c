/* The blocking waiters of a host-wide bulkhead (bhs_acquire_slow): a waiter
 * queues a node under the segment's lock (queue.c), then sleeps on the
 * node's process-shared futex word until its state is final (granted,
 * timed out, closed), never longer than a poll interval, looking for dead
 * processes when a poll ends (reclaim.c). The head spins a little first;
 * a waiter that gives up or is cancelled leaves the queue itself, and a
 * grant that raced with its leaving is handed on, never lost. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/spin.h"
#include "seg.h"
#include "shm/dispatch.h"


struct waiter {
	struct bhs_att *a;
	struct bhs_slot *s;
	uint32_t qi;
	bool shared; /* s is the shared slot; qi an extra node */
	uint64_t enqueued_ns;
};

static bool state_final(uint32_t st)
{
	return st >= QS_GRANTED && st <= QS_INVALID;
}

static int state_result(uint32_t st)
{
	return st == QS_GRANTED ? 0 : st == QS_SHUTDOWN ? -ESHUTDOWN : -EINVAL;
}

/* Whatever ended the wait: a grant goes into our ledger (under the lock
 * when the slot is shared), a failure clears the node. The claim cannot
 * fail, so its result is not looked at: a synchronous waiter's node is its
 * own thread's, and nothing else moves a node out of GRANTED (a recovery
 * counts a live process's granted node, and leaves it as it is). */
static int settle(struct waiter *wt, uint32_t st)
{
	struct bhs_att *a = wt->a;
	uint32_t final = wt->shared ? QS_DONE : QS_IDLE;

	if (st != QS_GRANTED) {
		atomic_store_explicit(&qnode_at(a, wt->qi)->state, final, memory_order_relaxed);
		return state_result(st);
	}
	BHS_POINT(BP_GRANTED);
	if (!wt->shared) {
		bhs_claim_on(a, wt->s, wt->qi, QS_GRANTED, final, false);
		return 0;
	}
	bhs_lock(a);
	bhs_claim_on(a, wt->s, wt->qi, QS_GRANTED, final, true);
	bhs_unlock(a);
	return 0;
}

static bool starving(struct bhs_att *a, struct bhs_qnode *q, uint64_t now)
{
	struct bhs_seg *g = a->seg;

	return now - atomic_load_explicit(&q->enqueued_ns, memory_order_relaxed) >=
		       atomic_load_explicit(&g->starve_ns, memory_order_relaxed) &&
	       now >= atomic_load_explicit(&g->fair_after_ns, memory_order_relaxed);
}

/* The woken head of an unfair bulkhead races newcomers for the permits, in
 * its ledger's window (a death here leaves the lock held and the window
 * open: the recovery rebuilds). */
static bool compete(struct waiter *wt)
{
	struct bhs_att *a = wt->a;
	struct bhs_qnode *q = qnode_at(a, wt->qi);
	uint32_t n = atomic_load_explicit(&q->n, memory_order_relaxed);
	uint64_t w, nw, now, l;
	bool won;

	bhs_lock(a);
	if (atomic_load_explicit(&q->state, memory_order_relaxed) != QS_WOKEN) {
		bhs_unlock(a);
		return false;
	}
	now = bhi_sync_now(a->sync);
	l = win_open(wt->s);
	w = load_sword(a);
	do {
		won = w_avail(w) >= (int64_t)n;
		nw = won ? w_take(w, n) - W_NQ_ONE : w;
		nw &= ~(W_WOKEN | W_STARVING);
		if (!won && starving(a, q, now))
			nw |= W_STARVING;
	} while (!cas_sword(a, &w, nw));
	if (won) {
		win_close(wt->s, l + n); /* counted by the caller, as every queued grant */
		bhs_q_remove_locked(a, wt->qi);
		atomic_store_explicit(&q->state, wt->shared ? QS_DONE : QS_IDLE,
				      memory_order_relaxed);
		bhs_dispatch_locked(a);
	} else {
		win_close(wt->s, l);
		if (nw & W_STARVING)
			atomic_store_explicit(&a->seg->fair_after_ns,
					      now + atomic_load_explicit(&a->seg->starve_ns,
									 memory_order_relaxed),
					      memory_order_relaxed);
		atomic_store_explicit(&q->state, QS_WAITING, memory_order_relaxed);
	}
	bhs_unlock(a);
	return won;
}

/* The deadline passed: leave the queue, unless a grant beat us to the lock,
 * in which case the permits are ours. The node leaves its queued state
 * under the lock, with the list: a rebuild relinks every living node in a
 * queued state (census_nodes(), reclaim.c), so one left WAITING after the
 * unlock would be queued again, counted in the word, and later granted
 * permits that nobody claims. */
static int leave(struct waiter *wt)
{
	struct bhs_att *a = wt->a;
	struct bhs_qnode *q = qnode_at(a, wt->qi);
	uint32_t st;

	bhs_lock(a);
	/* acquire: pairs with bhs_notify_locked()'s exchange, as in wait_loop():
	 * a grant that beat us comes with its permits' history */
	st = atomic_load_explicit(&q->state, memory_order_acquire);
	if (!state_final(st)) {
		bhs_unqueue_locked(a, wt->qi);
		atomic_store_explicit(&q->state, wt->shared ? QS_DONE : QS_IDLE,
				      memory_order_relaxed);
		bhs_dispatch_locked(a);
	}
	bhs_unlock(a);
	BHS_POINT(BP_LEFT);
	if (!state_final(st)) {
		atomic_fetch_add_explicit(&a->seg->timed_out, 1, memory_order_relaxed);
		return -ETIMEDOUT;
	}
	return settle(wt, st);
}

/* pthread_cancel hit the waiter: it holds nothing when it unwinds. A grant
 * that raced the cancel is given back from the node, under the lock. */
static void on_cancel(void *arg)
{
	struct waiter *wt = arg;
	struct bhs_att *a = wt->a;
	struct bhs_qnode *q = qnode_at(a, wt->qi);
	uint32_t st;

	bhs_lock(a);
	/* acquire: pairs with bhs_notify_locked()'s exchange, as in leave() */
	st = atomic_load_explicit(&q->state, memory_order_acquire);
	if (st == QS_GRANTED) {
		/* acq_rel: gives the grant back like any change of the word
		 * (cas_sword()); pairs with the next taker's acquire */
		uint32_t n = atomic_load_explicit(&q->n, memory_order_relaxed);
		uint64_t w = load_sword(a);

		while (!cas_sword(a, &w, s_give(w, n)))
			;
		bhs_dispatch_locked(a);
	} else if (!state_final(st)) {
		bhs_unqueue_locked(a, wt->qi);
		bhs_dispatch_locked(a);
	}
	atomic_store_explicit(&q->state, wt->shared ? QS_DONE : QS_IDLE, memory_order_relaxed);
	if (wt->shared)
		bhs_extra_free_locked(a, wt->qi);
	bhs_unlock(a);
	atomic_fetch_add_explicit(&a->seg->cancelled, 1, memory_order_relaxed);
	bhs_record_wait(a, wt->enqueued_ns, -ECANCELED);
}

/* As the core's head waiter: only while a CPU is free (lib/spin.h). */
static void spin(struct bhs_att *a, struct bhs_qnode *q)
{
	bhi_spin_while(&q->state, QS_WAITING, a->spin_iters);
}

/* As the core's wait loop, but no sleep is longer than poll_ns: when one
 * ends before our deadline we look for dead processes (who may hold the
 * permits we wait for, or a grant meant for us), then sleep again. We look
 * at the deadline too, before leaving: a caller whose waits are all shorter
 * than poll_ns would otherwise never look, and a dead holder's permits
 * never come back to it. What a look gives back serves the queue: when it
 * found someone, we look at our node once more (a grant, or a wake-up to
 * compete for the permits in unfair mode) before we leave. Looks stay at
 * one per 100 ms host-wide. */
static int wait_loop(struct waiter *wt, uint64_t deadline)
{
	struct bhs_att *a = wt->a;
	struct bhs_qnode *q = qnode_at(a, wt->qi);
	bool last = false; /* past the deadline, after a look that found the dead */

	for (;;) {
		/* acquire: pairs with bhs_notify_locked's exchange */
		uint32_t st = atomic_load_explicit(&q->state, memory_order_acquire);
		uint64_t until;
		bool poll;

		if (state_final(st))
			return settle(wt, st);
		if (st == QS_WOKEN) {
			if (compete(wt))
				return 0;
			continue;
		}
		if (last)
			return leave(wt);
		if (st == QS_WAITING) {
			uint32_t expect = QS_WAITING;

			spin(a, q);
			/* acq_rel, and acquire on failure: pairs with
			 * bhs_notify_locked()'s exchange (a failure reads the
			 * state it published) and with prewake_head()'s CAS. */
			if (!atomic_compare_exchange_strong_explicit(&q->state, &expect, QS_SLEEPING,
								     memory_order_acq_rel,
								     memory_order_acquire))
				continue;
		}
		until = bhi_sync_now(a->sync) + a->poll_ns;
		poll = until < deadline;
		if (bhi_sync_wait(a->sync, BHI_WAIT_GRANT, &q->state, QS_SLEEPING,
				  poll ? until : deadline) != -ETIMEDOUT)
			continue;
		last = bhs_maybe_scan(a) && !poll;
		if (!poll && !last)
			return leave(wt);
	}
}

static int wait_granted(struct waiter *wt, uint64_t deadline)
{
	int r;

	pthread_cleanup_push(on_cancel, wt);
	r = wait_loop(wt, deadline);
	pthread_cleanup_pop(0);
	return r;
}

/* Queue on this thread's own node (its slot's), or on an extra node when
 * the thread shares its process's slot. */
/* Queue wt's node for n permits under the lock: 1 queued, 0 granted at
 * once, or the refusal. */
static int enqueue(struct waiter *wt, uint32_t n, bool scanned)
{
	struct bhs_att *a = wt->a;
	int r;

	bhs_lock(a);
	wt->qi = wt->shared ? bhs_extra_alloc_locked(a) : slot_index(a, wt->s);
	if (wt->qi == BHS_NONE) {
		r = -EBUSY; /* no queue node left in the segment */
	} else {
		atomic_store_explicit(&qnode_at(a, wt->qi)->enqueued_ns, wt->enqueued_ns,
				      memory_order_relaxed);
		r = bhs_admit_locked(a, wt->s, wt->qi, n, QK_SYNC);
		if (r == 1 && head_of(a) != wt->qi) /* not next: no point spinning */
			atomic_store_explicit(&qnode_at(a, wt->qi)->state, QS_SLEEPING,
					      memory_order_relaxed);
		if (r != 1 && wt->shared)
			bhs_extra_free_locked(a, wt->qi);
	}
	if (r == -EBUSY && scanned)
		bhs_slot_count(a, wt->s, BHI_REJECTED); /* the lock covers a shared slot */
	bhs_unlock(a);
	return r;
}

/* Queued: wait for the grant, count it, give back a shared slot's node. */
static int await_grant(struct waiter *wt, uint64_t deadline)
{
	struct bhs_att *a = wt->a;
	int r;

	BHS_POINT(BP_QUEUED);
	r = wait_granted(wt, deadline);
	bhs_record_wait(a, wt->enqueued_ns, r);
	if (r == 0)
		bhs_count_maybe_locked(a, wt->s, wt->shared, BHI_ACQUIRED);
	if (wt->shared) {
		bhs_lock(a);
		bhs_extra_free_locked(a, wt->qi);
		bhs_unlock(a);
	}
	return r;
}

int bhs_acquire_slow(struct bhs_att *a, uint32_t n, uint64_t deadline)
{
	struct waiter wt = { .a = a };
	bool scanned = false;
	int r;

	if (!n_valid(n))
		return -EINVAL;
	if ((wt.s = bhs_slot_for(a, &wt.shared)) == NULL)
		return -ENOSPC;
	wt.enqueued_ns = bhi_sync_now(a->sync);
	if (deadline <= wt.enqueued_ns)
		return bhs_try_slow(a, n);
again:
	r = enqueue(&wt, n, scanned);
	if (r == -EBUSY && !scanned) {
		scanned = true;
		if (bhs_maybe_scan(a))
			goto again;
		bhs_lock(a);
		bhs_slot_count(a, wt.s, BHI_REJECTED);
		bhs_unlock(a);
	}
	if (r == 1)
		r = await_grant(&wt, deadline);
	if (r == 0 && (a->flags & BH_TRACK_HOLD))
		bhs_hold_begin(a, n);
	return r;
}
