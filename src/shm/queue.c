/* The queue of a host-wide bulkhead: the core's protocol (src/core/bulkhead.c,
 * docs/design.md) on queue nodes in the segment, linked by index, under the
 * segment's lock. One FIFO for the host, direct handoff, strict head of
 * line, BH_FAIR or barging with eventual fairness, exactly as in the core.
 *
 * What differs: a grant made here may be for a waiter in another process,
 * so it is a state in the node (GRANTED: the permits are the owner's) that
 * the owner moves into one of its ledgers itself (bhs_claim_on); waiters
 * sleep on process-shared futex words, never longer than a poll interval,
 * and look for dead processes when a poll ends, so a death is found even
 * when nobody else calls the library (reclaim.c).
 *
 * This file holds the queue under the lock (the list, its nodes, the
 * grants and the notifications to waiters), the slow paths of try and
 * release, and close, resize and stats; the blocking waiters' side (sleep,
 * spin, leave, cancellation) is wait.c. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "lib/futex.h"
#include "seg.h"
#include "shm/dispatch.h"

/* ---- wakes, issued after the lock is dropped --------------------------------- */

#define WB_MAX 16
static __thread struct {
	unsigned n;
	struct {
		_Atomic uint32_t *word;
		bool raw;
	} e[WB_MAX];
} wb;

static void raw_wake(_Atomic uint32_t *word)
{
	bhi_futex_wake(word, INT_MAX, BHI_FUTEX_SHARED);
}

/* A wake that lands after its waiter already returned is a spurious wakeup
 * on a word that stays mapped: harmless. raw: an agent's word, woken for
 * real even when tests replace the waiters' sync ops. */
void bhs_flush_wakes(struct bhs_att *a)
{
	for (unsigned i = 0; i < wb.n; i++) {
		if (wb.e[i].raw)
			raw_wake(wb.e[i].word);
		else
			bhi_sync_wake(a->sync, wb.e[i].word, false);
	}
	wb.n = 0;
}

void bhs_wake_later(struct bhs_att *a, _Atomic uint32_t *word, bool raw)
{
	if (wb.n == WB_MAX)
		bhs_flush_wakes(a); /* rare: wake under the lock rather than lose one */
	wb.e[wb.n].word = word;
	wb.e[wb.n].raw = raw;
	wb.n++;
}

/* ---- the list (under the lock) --------------------------------------------------- */

static void q_append(struct bhs_att *a, uint32_t qi)
{
	struct bhs_seg *g = a->seg;
	struct bhs_qnode *q = qnode_at(a, qi);
	uint32_t t = qref(a, &g->qtail);

	qset(&q->next, BHS_NONE);
	qset(&q->prev, t);
	if (t != BHS_NONE)
		qset(&qnode_at(a, t)->next, qi);
	else
		qset(&g->qhead, qi);
	qset(&g->qtail, qi);
	atomic_store_explicit(&q->linked, 1, memory_order_relaxed);
	atomic_store_explicit(&q->ticket,
			      atomic_fetch_add_explicit(&g->ticket, 1, memory_order_relaxed),
			      memory_order_relaxed);
}

void bhs_q_remove_locked(struct bhs_att *a, uint32_t qi)
{
	struct bhs_seg *g = a->seg;
	struct bhs_qnode *q = qnode_at(a, qi);
	uint32_t p = qref(a, &q->prev), n = qref(a, &q->next);

	if (!atomic_load_explicit(&q->linked, memory_order_relaxed))
		return;
	if (p != BHS_NONE)
		qset(&qnode_at(a, p)->next, n);
	else
		qset(&g->qhead, n);
	if (n != BHS_NONE)
		qset(&qnode_at(a, n)->prev, p);
	else
		qset(&g->qtail, p);
	qset(&q->next, BHS_NONE);
	qset(&q->prev, BHS_NONE);
	atomic_store_explicit(&q->linked, 0, memory_order_relaxed);
}

/* ---- extra nodes: async waiters, and waiters on a shared slot ------------------------ */

uint32_t bhs_extra_alloc_locked(struct bhs_att *a)
{
	struct bhs_seg *g = a->seg;
	uint32_t qi = qref(a, &g->free_extra);
	struct bhs_qnode *q;

	if (qi == BHS_NONE || qi < a->nslots)
		return BHS_NONE;
	q = qnode_at(a, qi);
	atomic_store_explicit(&g->free_extra, qget(&q->next), memory_order_relaxed);
	BHS_POINT(BP_EXTRA_TAKEN);
	qset(&q->next, BHS_NONE);
	atomic_store_explicit(&q->owner, a->pidx + 1u, memory_order_relaxed);
	return qi;
}

void bhs_extra_free_locked(struct bhs_att *a, uint32_t qi)
{
	struct bhs_seg *g = a->seg;
	struct bhs_qnode *q = qnode_at(a, qi);

	atomic_store_explicit(&q->kind, QK_NONE, memory_order_relaxed);
	atomic_store_explicit(&q->owner, 0, memory_order_relaxed);
	atomic_store_explicit(&q->state, QS_IDLE, memory_order_relaxed);
	atomic_store_explicit(&q->next, qget(&g->free_extra), memory_order_relaxed);
	qset(&g->free_extra, qi);
}

/* ---- telling waiters ------------------------------------------------------------------ */

/* Publish a node's new state. A blocking waiter is woken only if it went to
 * sleep (the exchange tells us in the same step). An async node's owner
 * process is told through its agent's word. release (acq_rel): pairs with
 * the owner's acquire load of the state, so a grantee sees the permits'
 * history. */
void bhs_notify_locked(struct bhs_att *a, uint32_t qi, uint32_t state)
{
	struct bhs_qnode *q = qnode_at(a, qi);
	uint32_t owner = atomic_load_explicit(&q->owner, memory_order_relaxed) - 1u;

	if (atomic_load_explicit(&q->kind, memory_order_relaxed) == QK_ASYNC) {
		atomic_store_explicit(&q->state, state, memory_order_release);
		if (owner < a->nprocs) {
			/* release: the agent's acquire load sees the state */
			atomic_fetch_add_explicit(&a->procs[owner].agent, 1, memory_order_release);
			bhs_wake_later(a, &a->procs[owner].agent, true);
		}
		return;
	}
	if (atomic_exchange_explicit(&q->state, state, memory_order_acq_rel) == QS_SLEEPING)
		bhs_wake_later(a, &q->state, false);
}

void bhs_record_wait(struct bhs_att *a, uint64_t enqueued_ns, int result)
{
	uint64_t ns = bhi_sync_now(a->sync) - enqueued_ns;

	bhi_hist_add(result == 0 ? &a->seg->wait : &a->seg->wait_failed, ns);
}

static void finish(struct bhs_att *a, uint32_t qi, uint32_t state)
{
	struct bhs_qnode *q = qnode_at(a, qi);

	if (atomic_load_explicit(&q->kind, memory_order_relaxed) == QK_ASYNC)
		bhs_record_wait(a, atomic_load_explicit(&q->enqueued_ns, memory_order_relaxed),
				state == QS_GRANTED ? 0 : -1);
	bhs_notify_locked(a, qi, state);
}

/* Remove node qi from the queue and the word's count; a leaving head takes
 * the competing/starving marks with it. */
void bhs_unqueue_locked(struct bhs_att *a, uint32_t qi)
{
	uint64_t w = load_sword(a), nw;
	bool was_head = head_of(a) == qi;

	do {
		nw = s_nq(w) ? w - W_NQ_ONE : w; /* 0 only in a damaged segment */
		if (was_head)
			nw &= ~(W_WOKEN | W_STARVING);
	} while (!cas_sword(a, &w, nw));
	bhs_q_remove_locked(a, qi);
}

/* ---- serving --------------------------------------------------------------------------- */

static bool must_handoff(const struct bhs_att *a, uint64_t w, const struct bhs_qnode *q)
{
	return (a->flags & BH_FAIR) || (w & W_STARVING) ||
	       atomic_load_explicit(&q->kind, memory_order_relaxed) == QK_ASYNC;
}

/* Spin policy as in the core: with short holds, wake the new head at once
 * so that it is spinning when its turn comes. */
void bhs_note_release_locked(struct bhs_att *a)
{
	uint64_t now = bhi_sync_now(a->sync);
	uint64_t last = atomic_load_explicit(&a->seg->last_grant_ns, memory_order_relaxed);

	atomic_store_explicit(&a->seg->short_holds, a->spin_iters && now - last < a->spin_ns,
			      memory_order_relaxed);
}

static void note_grant(struct bhs_att *a)
{
	if (a->spin_iters)
		atomic_store_explicit(&a->seg->last_grant_ns, bhi_sync_now(a->sync),
				      memory_order_relaxed);
}

static void prewake_head(struct bhs_att *a)
{
	uint32_t h = head_of(a);
	struct bhs_qnode *q;
	uint32_t expect = QS_SLEEPING;

	if (h == BHS_NONE || !atomic_load_explicit(&a->seg->short_holds, memory_order_relaxed))
		return;
	q = qnode_at(a, h);
	/* acq_rel: pairs with the owner's acq_rel CAS to SLEEPING in
	 * wait_loop(), like bhs_notify_locked()'s exchange; it publishes no permits. */
	if (atomic_load_explicit(&q->kind, memory_order_relaxed) == QK_SYNC &&
	    atomic_compare_exchange_strong_explicit(&q->state, &expect, QS_WAITING,
						    memory_order_acq_rel, memory_order_relaxed))
		bhs_wake_later(a, &q->state, false);
}

/* ---- the grant log ------------------------------------------------------------------
 *
 * A handoff takes the permits off the word in one CAS, then unlinks the
 * node and marks it GRANTED. A granter that dies between the two leaves
 * permits that are off the word and in no node; the rebuild after its
 * takeover would find the node still queued, serve it afresh (the word it
 * computes is right) and count the permits of the first grant as what the
 * dead granter held: reclaimed would grow by permits it never held. So a
 * handoff writes its node down before its CAS, and the CAS flips S_GRANT;
 * the lock's next taker finishes a logged grant whose CAS happened before
 * it rebuilds (bhs_grant_replay_locked), and the permits are the waiter's.
 * Only a lock holder flips S_GRANT, so its value before the CAS is the one
 * the CAS sees, however often the CAS retries.
 */
static void grant_log(struct bhs_att *a, uint32_t qi, uint64_t w)
{
	/* relaxed: the handoff's CAS (a release) comes after it; a replay that
	 * acquires the word that CAS wrote sees the log */
	atomic_store_explicit(&a->seg->glog, (qi + 1u) | ((w & S_GRANT) ? GLOG_PRE : 0),
			      memory_order_relaxed);
}

static void grant_log_close(struct bhs_att *a)
{
	/* relaxed: read only by a later holder of the lock, which orders it */
	atomic_store_explicit(&a->seg->glog, 0, memory_order_relaxed);
}

/* The lock was taken (over): a handoff whose granter died after its CAS is
 * finished, one that died before it is forgotten. The node is still queued
 * if the grant was not finished: only a lock holder links, unlinks or
 * grants, and only the owner's claim moves a GRANTED node on. Doing it
 * again changes nothing. */
void bhs_grant_replay_locked(struct bhs_att *a)
{
	/* acquire: pairs with the handoff's CAS, so a flipped S_GRANT comes
	 * with the log written before it */
	uint64_t w = atomic_load_explicit(&a->seg->word, memory_order_acquire);
	uint32_t log = atomic_load_explicit(&a->seg->glog, memory_order_relaxed);
	uint32_t qi = (log & ~GLOG_PRE) - 1u;
	bool pre = (log & GLOG_PRE) != 0;

	if (qi < nqnodes(a) && ((w & S_GRANT) != 0) != pre &&
	    queued_state(atomic_load_explicit(&qnode_at(a, qi)->state, memory_order_relaxed))) {
		bhs_q_remove_locked(a, qi); /* it may have been unlinked already */
		finish(a, qi, QS_GRANTED);
	}
	grant_log_close(a);
}

/* Serve from the head while permits suffice (strict head of line): fair
 * mode, a starving head and async nodes get the permits handed over; an
 * unfair head is woken to compete for them. */
static void serve(struct bhs_att *a)
{
	uint32_t h, guard = nqnodes(a);

	while ((h = head_of(a)) != BHS_NONE && guard--) {
		struct bhs_qnode *q = qnode_at(a, h);
		uint32_t n = atomic_load_explicit(&q->n, memory_order_relaxed);
		uint64_t w = load_sword(a), nw;
		bool handoff;

		grant_log(a, h, w);
		BHS_POINT(BP_GRANTING);
		do {
			if (w_avail(w) < (int64_t)n || !s_nq(w))
				goto out;
			handoff = must_handoff(a, w, q);
			if (!handoff && (w & W_WOKEN))
				goto out; /* the head is already on its way */
			nw = handoff ? ((w_take(w, n) - W_NQ_ONE) & ~(W_WOKEN | W_STARVING)) ^ S_GRANT
				     : w | W_WOKEN;
		} while (!cas_sword(a, &w, nw));
		if (!handoff) {
			grant_log_close(a);
			bhs_notify_locked(a, h, QS_WOKEN);
			BHS_POINT(BP_WOKE_HEAD);
			return;
		}
		BHS_POINT(BP_LOCKED);
		bhs_q_remove_locked(a, h);
		finish(a, h, QS_GRANTED);
		BHS_POINT(BP_HANDED);
		grant_log_close(a);
		note_grant(a);
	}
	return;
out:
	grant_log_close(a);
}

void bhs_dispatch_locked(struct bhs_att *a)
{
	serve(a);
	prewake_head(a);
}

/* Take the permits into slot s or queue node qi, atomically with respect to
 * every release: both decide on the same word (see the core's admit()).
 * 0: taken; 1: queued; or -errno. The node is made WAITING only once its
 * CAS has queued it, with the list: a rebuild queues again every living
 * node in a queued state (census_nodes(), reclaim.c), so a node marked
 * before a CAS that failed, the retry taking or refusing, would be a
 * waiter nobody is. */
int bhs_admit_locked(struct bhs_att *a, struct bhs_slot *s, uint32_t qi, uint32_t n,
		     uint32_t kind)
{
	struct bhs_qnode *q = qnode_at(a, qi);
	uint64_t l = win_open(s), w = load_sword(a), nw;
	bool take;

	do {
		if (w & W_CLOSED) {
			win_close(s, l);
			return -ESHUTDOWN;
		}
		if (n > w_limit(w)) {
			win_close(s, l);
			return -EINVAL;
		}
		take = may_take(w, n);
		if (!take && s_nq(w) >= a->seg->hdr.queue_cap) {
			win_close(s, l);
			return -EBUSY;
		}
		nw = take ? w_take(w, n) : w + W_NQ_ONE;
		BHS_POINT(BP_ADMIT);
	} while (!cas_sword(a, &w, nw));
	if (take) {
		win_close(s, l + n);
		bhs_slot_count(a, s, BHI_ACQUIRED);
		return 0;
	}
	win_close(s, l);
	atomic_store_explicit(&q->n, n, memory_order_relaxed);
	atomic_store_explicit(&q->kind, kind, memory_order_relaxed);
	atomic_store_explicit(&q->owner, a->pidx + 1u, memory_order_relaxed);
	atomic_store_explicit(&q->state, QS_WAITING, memory_order_relaxed);
	q_append(a, qi);
	return 1;
}

/* ---- try and release ------------------------------------------------------------------- */

static int refusal(struct bhs_att *a, uint32_t n)
{
	uint64_t w = load_sword(a);

	if (w & W_CLOSED)
		return -ESHUTDOWN;
	if (n > w_limit(w))
		return -EINVAL;
	return (w & S_FROZEN) ? -EAGAIN : -EBUSY;
}

static bool take_maybe_locked(struct bhs_att *a, struct bhs_slot *s, bool shared, uint32_t n)
{
	bool ok;

	if (!shared)
		return bhs_take_on(a, s, n);
	bhs_lock(a);
	ok = bhs_take_on(a, s, n);
	bhs_unlock(a);
	return ok;
}

void bhs_count_maybe_locked(struct bhs_att *a, struct bhs_slot *s, bool shared,
			       enum bhi_counter c)
{
	if (!shared) {
		bhs_slot_count(a, s, c);
		return;
	}
	bhs_lock(a);
	bhs_slot_count(a, s, c);
	bhs_unlock(a);
}

/* Order of the answers: bad n, closed, n above the limit, no room. A
 * refusal first looks for dead processes holding what we need (at most
 * once per scan interval, host-wide) and tries again if it found some. */
int bhs_try_slow(struct bhs_att *a, uint32_t n)
{
	struct bhs_slot *s;
	bool shared, scanned = false;
	int r;

	if (!n_valid(n))
		return -EINVAL;
	if ((s = bhs_slot_for(a, &shared)) == NULL)
		return -ENOSPC;
	for (;;) {
		if (take_maybe_locked(a, s, shared, n)) {
			if (a->flags & BH_TRACK_HOLD)
				bhs_hold_begin(a, n);
			return 0;
		}
		r = refusal(a, n);
		if (r == -EAGAIN) {
			bhs_wait_thaw(a);
			continue;
		}
		if (r == -EBUSY && !scanned) {
			scanned = true;
			if (bhs_maybe_scan(a))
				continue;
		}
		if (r == -EBUSY)
			bhs_count_maybe_locked(a, s, shared, BHI_REJECTED);
		return r;
	}
}

static BHI_COLD int over_release(struct bhs_att *a)
{
	atomic_fetch_add_explicit(&a->seg->over_released, 1, memory_order_relaxed);
	return -EOVERFLOW;
}

/* Under the lock: give back from slot s and serve the queue. */
static int give_and_serve(struct bhs_att *a, struct bhs_slot *s, uint32_t n)
{
	int r;

	bhs_lock(a);
	r = bhs_give_locked(a, s, n);
	if (r == GIVE_OK) {
		bhs_note_release_locked(a);
		bhs_dispatch_locked(a);
	}
	bhs_unlock(a);
	return r;
}

static int transfer_maybe_locked(struct bhs_att *a, struct bhs_slot *s, bool shared, uint32_t n)
{
	int r;

	if (!shared)
		return bhs_transfer(a, s, n);
	bhs_lock(a);
	r = bhs_transfer(a, s, n);
	bhs_unlock(a);
	return r;
}

/* A release the fast path could not finish: waiters to serve (the lock), a
 * transfer running in this process (wait for it), too few permits on this
 * thread's ledger (move them from its siblings, or -EOVERFLOW). */
int bhs_release_slow(struct bhs_att *a, uint32_t n)
{
	struct bhs_slot *s;
	bool shared;
	int r;

	if (!n_valid(n))
		return -EINVAL;
	if ((s = bhs_slot_for(a, &shared)) == NULL)
		return over_release(a); /* never registered: holds nothing */
	for (;;) {
		r = shared ? GIVE_LOCK : bhs_give_on(a, s, n);
		if (r == GIVE_LOCK)
			r = give_and_serve(a, s, n);
		if (r == GIVE_OK)
			return 0;
		if (r == GIVE_XFER) {
			pthread_mutex_lock(&a->xmu); /* wait for it to finish */
			pthread_mutex_unlock(&a->xmu);
			continue;
		}
		r = transfer_maybe_locked(a, s, shared, n);
		if (r == -EOVERFLOW)
			return over_release(a);
		if (r == -EAGAIN)
			bhs_wait_thaw(a);
	}
}

/* ---- close, resize, stats -------------------------------------------------------------- */

/* Fail every queued waiter asking for more than above_n. */
static void fail_waiters(struct bhs_att *a, uint32_t above_n, uint32_t state)
{
	uint32_t qi = head_of(a), guard = nqnodes(a);

	while (qi != BHS_NONE && guard--) {
		struct bhs_qnode *q = qnode_at(a, qi);
		uint32_t next = qref(a, &q->next);

		if (atomic_load_explicit(&q->n, memory_order_relaxed) > above_n) {
			bhs_unqueue_locked(a, qi);
			finish(a, qi, state);
		}
		qi = next;
	}
}

/* Fail every queued waiter the word rules out: all of them once closed,
 * else those asking for more than the limit. A close or a limit change
 * does this itself under the lock; one that died between its change of
 * the word and this leaves them queued, for the rebuild that follows the
 * takeover to fail (reclaim.c). */
void bhs_fail_ruled_out_locked(struct bhs_att *a)
{
	uint64_t w = load_sword(a);

	if (w & W_CLOSED)
		fail_waiters(a, 0, QS_SHUTDOWN);
	else
		fail_waiters(a, w_limit(w), QS_INVALID);
}

int bhs_close(bulkhead_t *bh)
{
	struct bhs_att *a = att_of(bh);
	uint64_t old;

	if (!att_proc(a) && bhs_register(a) < 0)
		return -ENOSPC;
	bhs_lock(a);
	/* acq_rel: a change of the word like cas_sword(); pairs with the
	 * acquire of every later CAS or load that sees W_CLOSED. */
	old = atomic_fetch_or_explicit(&a->seg->word, W_CLOSED, memory_order_acq_rel);
	BHS_POINT(BP_CLOSING);
	if (!(old & W_CLOSED))
		fail_waiters(a, 0, QS_SHUTDOWN);
	bhs_unlock(a);
	return old & W_CLOSED ? -EALREADY : 0;
}

int bhs_set_limit(bulkhead_t *bh, uint32_t max_concurrent)
{
	struct bhs_att *a = att_of(bh);
	uint64_t w, nw;

	if (!att_proc(a) && bhs_register(a) < 0)
		return -ENOSPC;
	bhs_lock(a);
	w = load_sword(a);
	do
		nw = w_with_limit(w, max_concurrent);
	while (!cas_sword(a, &w, nw));
	BHS_POINT(BP_LIMITED);
	fail_waiters(a, max_concurrent, QS_INVALID);
	bhs_dispatch_locked(a);
	bhs_unlock(a);
	return 0;
}

/* The three gauges at one instant, for the core's bh_gauges. */
void bhs_gauges(const bulkhead_t *bh, uint64_t *limit, uint64_t *in_flight,
		uint64_t *queued)
{
	/* acquire: pairs with the acq_rel CAS that last changed the word
	 * (cas_sword()), as in the core's gauges_now() */
	uint64_t w = atomic_load_explicit(&att_of(bh)->seg->word, memory_order_acquire);

	*limit = w_limit(w);
	*in_flight = (uint64_t)w_held(w);
	*queued = s_nq(w);
}

void bhs_stats(const bulkhead_t *bh, struct bh_stats *out)
{
	struct bhs_att *a = att_of(bh);
	struct bhs_seg *g = a->seg;
	uint64_t sum[BHI_NCOUNTERS] = { 0 }, w;
	uint32_t live = 0;

	if (att_proc(a))
		bhs_maybe_scan(a); /* the dead's permits are not in flight */
	/* acquire: as in bhs_gauges() */
	w = atomic_load_explicit(&g->word, memory_order_acquire);
	for (uint32_t i = 0; i < a->nslots; i++) {
		struct bhs_slot *s = &a->slots[i];

		for (int c = 0; c < BHI_NCOUNTERS; c++)
			sum[c] += atomic_load_explicit(&s->c[c], memory_order_relaxed);
		/* the fast path's single permits (seg.h, "the ledger"): out
		 * before in, so a thread's pair that lands between the two
		 * loads never shows as more releases than acquires (acquire:
		 * pairs with the close of out, which follows the close of in) */
		if (!(a->flags & BH_NO_STATS)) {
			sum[BHI_RELEASED] +=
				atomic_load_explicit(&s->out, memory_order_acquire) & S_HELD_MASK;
			sum[BHI_ACQUIRED] +=
				atomic_load_explicit(&s->in, memory_order_relaxed) & S_HELD_MASK;
		}
	}
	for (uint32_t i = 0; i < a->nprocs; i++)
		live += atomic_load_explicit(&a->procs[i].state, memory_order_relaxed) == PS_LIVE;
	memset(out, 0, sizeof(*out));
	out->limit = w_limit(w);
	out->in_flight = (uint64_t)w_held(w);
	out->queued = s_nq(w);
	out->acquired = sum[BHI_ACQUIRED];
	out->released = sum[BHI_RELEASED];
	out->rejected = sum[BHI_REJECTED];
	out->timed_out = atomic_load_explicit(&g->timed_out, memory_order_relaxed);
	out->cancelled = atomic_load_explicit(&g->cancelled, memory_order_relaxed);
	out->over_released = atomic_load_explicit(&g->over_released, memory_order_relaxed);
	out->reclaimed = atomic_load_explicit(&g->reclaimed, memory_order_relaxed);
	out->processes = live;
	bhi_hist_read(&g->wait, &out->wait);
	bhi_hist_read(&g->wait_failed, &out->wait_failed);
	for (unsigned i = 0; (a->flags & BH_TRACK_HOLD) && i < BHS_HOLDS; i++) {
		struct bh_hist shard;

		bhi_hist_read(&g->hold[i], &shard);
		bh_hist_merge(&out->hold, &shard);
	}
}
