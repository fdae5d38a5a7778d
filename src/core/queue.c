/* The queue: an explicit FIFO under bh->lock, direct handoff to its head,
 * and the waits of blocking and async waiters. Entered from the fast paths
 * (word.c) only when the word says no. docs/design.md explains the protocol
 * and why no wakeup is lost. */
#include <errno.h>

#include "internal.h"
#include "word.h"
#include "queue.h"
#include "observe.h"
#include "layer.h"
#include "shm/dispatch.h"

/* States of a blocking waiter's futex word. WAITING and SLEEPING are the
 * queued states (SLEEPING: the owner is or is about to be in the kernel, so a
 * state change must be followed by a wake). The rest are set under the lock
 * by whoever dequeues the waiter, and are final. */
enum {
	WS_WAITING,
	WS_SLEEPING,
	WS_WOKEN, /* unfair mode: head, asked to compete for the free permits */
	WS_GRANTED,
	WS_SHUTDOWN,
	WS_INVALID,
};


struct sync_waiter {
	struct bh_qlink link;
	_Atomic uint32_t state;
};

#define WB_MAX 16
struct wake_batch {
	const struct bhi_sync_ops *sync;
	unsigned n;
	_Atomic uint32_t *words[WB_MAX];
};

static inline struct sync_waiter *as_sync(struct bh_qlink *l)
{
	return bhi_container_of(l, struct sync_waiter, link);
}

/* ---- the queue and waking (all under bh->lock) --------------------------- */

static void wb_flush(struct wake_batch *wb)
{
	for (unsigned i = 0; i < wb->n; i++)
		bhi_sync_wake(wb->sync, wb->words[i], false);
	wb->n = 0;
}

static void wb_add(struct wake_batch *wb, _Atomic uint32_t *word)
{
	if (wb->n == WB_MAX)
		wb_flush(wb); /* rare: wake under the lock rather than lose one */
	wb->words[wb->n++] = word;
}

static void lock(struct bulkhead *bh, struct wake_batch *wb)
{
	pthread_mutex_lock(&bh->lock);
	wb->sync = bh->sync;
	wb->n = 0;
}

/* Wakes happen after the lock is dropped; a waiter that already saw its new
 * state and returned gets at worst a wake on a dead address, which every
 * futex user tolerates as spurious. */
static void unlock(struct bulkhead *bh, struct wake_batch *wb)
{
	pthread_mutex_unlock(&bh->lock);
	wb_flush(wb);
}

/* Tell a queued blocking waiter its new state. The exchange reads whether the
 * owner went to sleep in the same step that publishes the state, so the node
 * is never touched again after the owner may have returned. Release order
 * pairs with the owner's acquire load: a grantee sees the permits' history. */
static uint32_t notify(struct bh_qlink *l, uint32_t state, struct wake_batch *wb)
{
	struct sync_waiter *sw = as_sync(l);
	uint32_t old = atomic_exchange_explicit(&sw->state, state, memory_order_acq_rel);

	if (old == WS_SLEEPING)
		wb_add(wb, &sw->state);
	return old;
}


/* Final word to a dequeued waiter: 0 (granted), -ESHUTDOWN or -EINVAL. */
static void finish(struct bulkhead *bh, struct bh_qlink *l, int result, struct wake_batch *wb)
{
	if (l->kind == KIND_SYNC) {
		/* release: after the grant's CAS (bhi_released, observe.c) */
		if (result == 0)
			atomic_fetch_add_explicit(&bh->granted, l->n, memory_order_release);
		notify(l, result == 0 ? WS_GRANTED : result == -ESHUTDOWN ? WS_SHUTDOWN : WS_INVALID,
		       wb);
		return;
	}
	struct bh_async *a = bhi_container_of(l, struct bh_async, link);
	int cs;

	l->kind = KIND_NONE; /* not queued any more: the callback may free it */
	if (result == 0)
		bhi_count_taken(bh, l->n);
	bhi_record_wait(bh, l->enqueued_ns, result);
	/* The callback runs under bh->lock, and what it usually does (write an
	 * eventfd) is a cancellation point: acted on here, it would unwind
	 * this thread with the lock held, or run a waiter's cleanup handler,
	 * which takes the lock again. Calls that grant are no cancellation
	 * points; a pending request waits for the next real one. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	a->fn(a, result);
	pthread_setcancelstate(cs, NULL);
}

/* Remove l from the queue and from the word's count. When the head leaves,
 * the competing/starving marks were about it and go with it. */
static void unqueue(struct bulkhead *bh, struct bh_qlink *l)
{
	uint64_t w = load_word(bh), nw;
	bool was_head = bhi_qlist_first(&bh->queue) == l;

	do {
		nw = w - W_NQ_ONE;
		if (was_head)
			nw &= ~(W_WOKEN | W_STARVING);
	} while (!cas_word(bh, &w, nw));
	bhi_qlist_del(&bh->queue, l);
}

static void observe_grant(struct bulkhead *bh, const struct bh_qlink *l)
{
	if (bh->obs && bh->obs->granted)
		bh->obs->granted(bh->obs->ctx, l);
}

static bool must_handoff(const struct bulkhead *bh, uint64_t w, const struct bh_qlink *h)
{
	return (bh->flags & BH_FAIR) || (w & W_STARVING) || h->kind == KIND_ASYNC;
}

/* Short holds: a release under the lock came sooner after the last handoff
 * than a waiter would spin. Then the new head is woken at once, so that it
 * is spinning, not asleep, when its turn comes; the wake-up latency overlaps
 * the holder's work instead of following it. With long holds this stops by
 * itself, and nobody spins for nothing. */
static void note_release(struct bulkhead *bh)
{
	uint64_t now = bhi_sync_now(bh->sync);

	bh->short_holds = bh->spin_iters && now - bh->last_grant_ns < bh->spin_ns;
}

static void note_grant(struct bulkhead *bh)
{
	if (bh->spin_iters)
		bh->last_grant_ns = bhi_sync_now(bh->sync);
}

static void prewake_head(struct bulkhead *bh, struct wake_batch *wb)
{
	struct bh_qlink *h = bhi_qlist_first(&bh->queue);
	uint32_t expect = WS_SLEEPING;

	/* acq_rel: pairs with the owner's acq_rel CAS to SLEEPING in
	 * wait_loop(), like notify()'s exchange; it publishes no permits. */
	if (h && h->kind == KIND_SYNC && bh->short_holds &&
	    atomic_compare_exchange_strong_explicit(&as_sync(h)->state, &expect, WS_WAITING,
						    memory_order_acq_rel, memory_order_relaxed))
		wb_add(wb, &as_sync(h)->state);
}

static void serve(struct bulkhead *bh, struct wake_batch *wb);

/* Serve the queue, then make sure a short-hold head is spinning. */
static void dispatch(struct bulkhead *bh, struct wake_batch *wb)
{
	serve(bh, wb);
	prewake_head(bh, wb);
}

/* Serve the queue from the head while permits suffice (strict head-of-line):
 * fair mode, a starving head and async nodes get the permits handed over;
 * an unfair head is woken to compete for them. */
static void serve(struct bulkhead *bh, struct wake_batch *wb)
{
	struct bh_qlink *h;

	if (!bhi_qlist_empty(&bh->queue) && gate_shut(bh))
		return;
	while ((h = bhi_qlist_first(&bh->queue)) != NULL) {
		uint64_t w = load_word(bh), nw;
		bool handoff;

		do {
			if (w_avail(w) < (int64_t)h->n)
				return;
			handoff = must_handoff(bh, w, h);
			if (!handoff && (w & W_WOKEN))
				return; /* the head is already on its way */
			nw = handoff ? (w_take(w, h->n) - W_NQ_ONE) & ~(W_WOKEN | W_STARVING)
				     : w | W_WOKEN;
		} while (!cas_word(bh, &w, nw));
		if (!handoff) {
			notify(h, WS_WOKEN, wb);
			return;
		}
		bhi_qlist_del(&bh->queue, h);
		observe_grant(bh, h);
		finish(bh, h, 0, wb);
		note_grant(bh);
	}
}

/* Take the permits or join the queue, atomically with respect to every
 * release: both decide on the same word, so a release either leaves permits
 * this sees, or sees the waiter counted and takes the lock, which we hold
 * until the node is linked. Returns 0 (taken), 1 (queued) or -errno, in
 * refusal()'s order. */
static int admit(struct bulkhead *bh, struct bh_qlink *l)
{
	uint64_t w = load_word(bh), nw;
	bool shut = gate_shut(bh), take;

	do {
		if (w & W_CLOSED)
			return -ESHUTDOWN;
		if (l->n > w_limit(w))
			return -EINVAL;
		take = !shut && may_take(w, l->n);
		if (!take && w_nq(w) >= bh->queue_cap)
			return -EBUSY;
		nw = take ? w_take(w, l->n) : w + W_NQ_ONE;
	} while (!cas_word(bh, &w, nw));
	if (take)
		return 0;
	bhi_qlist_add_tail(&bh->queue, l);
	if (bh->obs && bh->obs->queued)
		bh->obs->queued(bh->obs->ctx, l);
	return 1;
}

/* Put a cancelled grantee's n permits back and serve the queue (caller
 * holds the lock). Releases are not tied to threads, so another call may
 * already have given some of them back (a caller's bug that bh_release
 * accepts while the total stays within the limit): only what fits goes
 * back, like bh_release, so free permits never exceed the limit, and the
 * excess counts as an over-release. */
static void return_grant(struct bulkhead *bh, uint32_t n, struct wake_batch *wb)
{
	uint64_t w = load_word(bh);
	int64_t room;

	/* Counted before the CAS (its release orders this first), corrected
	 * after it: bhi_released reads this after the word. */
	atomic_fetch_add_explicit(&bh->grants_returned, n, memory_order_relaxed);
	do
		room = w_held(w);
	while (!cas_word(bh, &w, w_give(w, room < n ? (uint32_t)room : n)));
	if (room < n) {
		atomic_fetch_add_explicit(&bh->over_released, 1, memory_order_relaxed);
		/* release: what did not go back, the over-release gave back */
		atomic_fetch_sub_explicit(&bh->grants_returned, n - (uint64_t)room,
					  memory_order_release);
	}
	dispatch(bh, wb);
}

/* ---- release ----------------------------------------------------------- */

int bhi_release_slow(struct bulkhead *bh, uint32_t n)
{
	struct wake_batch wb;
	uint64_t w;

	if (bh->ext)
		return bhs_release(bh, n);
	lock(bh, &wb);
	w = load_word(bh);
	do {
		if (w_held(w) < (int64_t)n) {
			unlock(bh, &wb);
			return bhi_over_release(bh);
		}
	} while (!cas_word(bh, &w, w_give(w, n)));
	note_release(bh);
	dispatch(bh, &wb);
	unlock(bh, &wb);
	return 0;
}

/* ---- blocking waiters ----------------------------------------------------- */

/* Starving: this head waited starve_ns, and no fair handoff happened for as
 * long (at most one per starve_ns keeps barging's throughput). */
static bool starving(const struct bulkhead *bh, const struct sync_waiter *sw, uint64_t now)
{
	return now - sw->link.enqueued_ns >= bh->starve_ns && now >= bh->fair_after_ns;
}

/* The woken head of an unfair bulkhead races newcomers for the permits. On a
 * loss it goes back to sleep, or, when starving, marks the word so the next
 * release hands off to it and newcomers queue. */
static bool compete(struct bulkhead *bh, struct sync_waiter *sw)
{
	struct wake_batch wb;
	uint64_t w, nw, now;
	bool won, shut;

	lock(bh, &wb);
	if (atomic_load_explicit(&sw->state, memory_order_relaxed) != WS_WOKEN) {
		unlock(bh, &wb); /* closed or invalidated meanwhile */
		return false;
	}
	now = bhi_sync_now(bh->sync);
	shut = gate_shut(bh);
	w = load_word(bh);
	do {
		won = !shut && w_avail(w) >= (int64_t)sw->link.n;
		nw = won ? w_take(w, sw->link.n) - W_NQ_ONE : w;
		nw &= ~(W_WOKEN | W_STARVING);
		if (!won && starving(bh, sw, now))
			nw |= W_STARVING;
	} while (!cas_word(bh, &w, nw));
	if (won) {
		bhi_qlist_del(&bh->queue, &sw->link);
		observe_grant(bh, &sw->link);
		dispatch(bh, &wb);
	} else {
		if (nw & W_STARVING)
			bh->fair_after_ns = now + bh->starve_ns;
		atomic_store_explicit(&sw->state, WS_WAITING, memory_order_relaxed);
	}
	unlock(bh, &wb);
	return won;
}

static int state_result(uint32_t s)
{
	return s == WS_GRANTED ? 0 : s == WS_SHUTDOWN ? -ESHUTDOWN : -EINVAL;
}

static bool state_final(uint32_t s)
{
	return s >= WS_GRANTED;
}

/* The deadline passed: leave the queue, unless a grant beat us to the lock,
 * in which case the permits are ours. */
static int leave(struct bulkhead *bh, struct sync_waiter *sw)
{
	struct wake_batch wb;
	uint32_t s;

	lock(bh, &wb);
	/* acquire: pairs with notify()'s exchange: a grant that beat us comes
	 * with the permits' history */
	s = atomic_load_explicit(&sw->state, memory_order_acquire);
	if (!state_final(s)) {
		unqueue(bh, &sw->link);
		dispatch(bh, &wb); /* followers may fit now the head is gone */
	}
	unlock(bh, &wb);
	if (!state_final(s)) {
		atomic_fetch_add_explicit(&bh->timed_out, 1, memory_order_relaxed);
		return -ETIMEDOUT;
	}
	return state_result(s);
}

struct cancel_ctx {
	struct bulkhead *bh;
	struct sync_waiter *sw;
};

/* pthread_cancel hit the waiter: it holds nothing when it unwinds. */
static void on_cancel(void *arg)
{
	struct cancel_ctx *cc = arg;
	struct bulkhead *bh = cc->bh;
	struct wake_batch wb;
	uint32_t s;

	lock(bh, &wb);
	/* acquire: pairs with notify()'s exchange, as in leave() */
	s = atomic_load_explicit(&cc->sw->state, memory_order_acquire);
	if (s == WS_GRANTED)
		return_grant(bh, cc->sw->link.n, &wb);
	else if (!state_final(s)) {
		unqueue(bh, &cc->sw->link);
		dispatch(bh, &wb);
	}
	unlock(bh, &wb);
	atomic_fetch_add_explicit(&bh->cancelled, 1, memory_order_relaxed);
	bhi_record_wait(bh, cc->sw->link.enqueued_ns, -ECANCELED);
}

/* A head waiter polls its word a little before sleeping: with short holds
 * the permit arrives within microseconds and the handoff needs no syscall.
 * Only while a CPU is free for the holder (lib/spin.h). */
static void spin(const struct bulkhead *bh, struct sync_waiter *sw)
{
	bhi_spin_while(&sw->state, WS_WAITING, bh->spin_iters);
}

static int wait_loop(struct bulkhead *bh, struct sync_waiter *sw, uint64_t deadline)
{
	int r;

	for (;;) {
		/* acquire: pairs with notify()'s exchange */
		uint32_t s = atomic_load_explicit(&sw->state, memory_order_acquire);

		if (state_final(s))
			return state_result(s);
		if (s == WS_WOKEN) {
			if (compete(bh, sw))
				return 0;
			continue;
		}
		if (s == WS_WAITING) {
			uint32_t expect = WS_WAITING;

			spin(bh, sw);
			/* acq_rel, and acquire on failure: pairs with
			 * notify()'s exchange (a failure reads the state it
			 * published) and with prewake_head()'s CAS. */
			if (!atomic_compare_exchange_strong_explicit(&sw->state, &expect, WS_SLEEPING,
								     memory_order_acq_rel,
								     memory_order_acquire))
				continue;
		}
		/* EINTR, EAGAIN and spurious returns just re-check the state;
		 * the deadline is absolute, so retrying never extends it. */
		r = bhi_sync_wait(bh->sync, BHI_WAIT_GRANT, &sw->state, WS_SLEEPING, deadline);
		if (r == -ETIMEDOUT)
			return leave(bh, sw);
	}
}

static int wait_granted(struct bulkhead *bh, struct sync_waiter *sw, uint64_t deadline)
{
	struct cancel_ctx cc = { bh, sw };
	int r;

	pthread_cleanup_push(on_cancel, &cc);
	r = wait_loop(bh, sw, deadline);
	pthread_cleanup_pop(0);
	return r;
}

int bhi_acquire_slow(struct bulkhead *bh, uint32_t n, uint64_t deadline)
{
	struct sync_waiter sw = { .link = { .n = n, .kind = KIND_SYNC } };
	struct wake_batch wb;
	int r;

	if (bh->ext)
		return bhs_acquire(bh, n, deadline);
	if (!n_valid(n))
		return -EINVAL;
	sw.link.enqueued_ns = bhi_sync_now(bh->sync);
	if (deadline <= sw.link.enqueued_ns)
		return bh_try_acquire(bh, n);
	atomic_init(&sw.state, WS_WAITING);
	lock(bh, &wb);
	r = admit(bh, &sw.link);
	if (r == 1 && bhi_qlist_first(&bh->queue) != &sw.link) /* not next: no point spinning */
		atomic_store_explicit(&sw.state, WS_SLEEPING, memory_order_relaxed);
	unlock(bh, &wb);
	if (r == 1) {
		r = wait_granted(bh, &sw, deadline);
		bhi_record_wait(bh, sw.link.enqueued_ns, r);
	}
	if (r == 0) {
		/* A grant handed over (not a race won): the granter counted it
		 * as granted; release, and before our count of the take, which
		 * bhi_released reads first. */
		if (atomic_load_explicit(&sw.state, memory_order_relaxed) == WS_GRANTED)
			atomic_fetch_add_explicit(&bh->grants_claimed, n, memory_order_release);
		bhi_count_taken(bh, n);
		if (bh->flags & BH_TRACK_HOLD)
			bhi_hold_begin(bh, n);
	} else if (r == -EBUSY) {
		bhi_count(bh, BHI_REJECTED);
	}
	return r;
}

/* ---- async waiters -------------------------------------------------------- */

int bhi_acquire_async_slow(struct bulkhead *bh, struct bh_async *node, uint32_t n)
{
	struct wake_batch wb;
	int r;

	if (bh->ext)
		return bhs_acquire_async(bh, node, n, node->fn, node->data);
	if (!n_valid(n))
		return -EINVAL;
	node->link.n = n;
	node->link.kind = KIND_ASYNC;
	node->link.enqueued_ns = bhi_sync_now(bh->sync);
	lock(bh, &wb);
	r = admit(bh, &node->link);
	unlock(bh, &wb);
	if (r != 1)
		node->link.kind = KIND_NONE;
	if (r == 0) {
		bhi_count_taken(bh, n);
		if (bh->flags & BH_TRACK_HOLD) /* as the fast path's take does */
			bhi_hold_begin(bh, n);
	} else if (r == -EBUSY)
		bhi_count(bh, BHI_REJECTED);
	return r;
}

int bh_cancel_async(bulkhead_t *bh, struct bh_async *node)
{
	struct wake_batch wb;
	bool queued;

	if (!bh || !node)
		return -EINVAL;
	if (bh->ext)
		return bhs_cancel_async(bh, node);
	lock(bh, &wb);
	queued = node->link.kind == KIND_ASYNC;
	if (queued) {
		node->link.kind = KIND_NONE;
		unqueue(bh, &node->link);
		dispatch(bh, &wb);
	}
	unlock(bh, &wb);
	if (queued) {
		atomic_fetch_add_explicit(&bh->cancelled, 1, memory_order_relaxed);
		bhi_record_wait(bh, node->link.enqueued_ns, -ECANCELED);
	}
	return queued;
}

/* ---- close / resize / gate ---------------------------------------------- */

/* Fail every queued waiter whose request is unsatisfiable or moot. */
static void fail_waiters(struct bulkhead *bh, uint32_t above_n, int result, struct wake_batch *wb)
{
	struct bh_qlink *l, *next;

	for (l = bhi_qlist_first(&bh->queue); l; l = next) {
		next = bhi_qlist_next(l);
		if (l->n > above_n) {
			unqueue(bh, l);
			finish(bh, l, result, wb);
		}
	}
}

int bh_close(bulkhead_t *bh)
{
	struct wake_batch wb;
	uint64_t old;

	if (!bh)
		return -EINVAL;
	if (bh->ext)
		return bhs_close(bh);
	lock(bh, &wb);
	/* acq_rel: a change of the word like cas_word(); pairs with the
	 * acquire of every later CAS or load that sees W_CLOSED. */
	old = atomic_fetch_or_explicit(&bh->word, W_CLOSED, memory_order_acq_rel);
	if (!(old & W_CLOSED))
		fail_waiters(bh, 0, -ESHUTDOWN, &wb);
	unlock(bh, &wb);
	return old & W_CLOSED ? -EALREADY : 0;
}

/* One CAS moves the limit and the free permits together, so no reader ever
 * sees one without the other and no release is judged against a stale limit. */
int bh_set_limit(bulkhead_t *bh, uint32_t max_concurrent)
{
	struct wake_batch wb;
	uint64_t w, nw;

	if (!bh || max_concurrent == 0 || max_concurrent > BH_LIMIT_MAX)
		return -EINVAL;
	if (bh->ext)
		return bhs_set_limit(bh, max_concurrent);
	lock(bh, &wb);
	w = load_word(bh);
	do
		nw = w_with_limit(w, max_concurrent);
	while (!cas_word(bh, &w, nw));
	fail_waiters(bh, max_concurrent, -EINVAL, &wb);
	dispatch(bh, &wb);
	unlock(bh, &wb);
	return 0;
}

/* For a fork child's atfork handler: no other thread came along, and the
 * lock may be held by one that did not, so the child gets a lock of its
 * own. What was queued is the parent's: its threads' waits, and the async
 * acquisitions the parent's event loop made (the child's copies of those
 * nodes stay where they are). Nothing is woken and no callback runs; the
 * queue and the word stop counting them, so that in the child a release
 * takes the fast path and bh_cancel_async() of such a node finds it not
 * queued. */
void bhi_close_inherited(bulkhead_t *bh)
{
	uint64_t w = load_word(bh);
	struct bh_qlink *l;

	pthread_mutex_init(&bh->lock, NULL);
	while ((l = bhi_qlist_first(&bh->queue)) != NULL) {
		bhi_qlist_del(&bh->queue, l);
		l->kind = KIND_NONE;
	}
	atomic_store_explicit(&bh->gate_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&bh->word, (w & ~(W_NQ_MASK | W_WOKEN | W_STARVING)) | W_CLOSED,
			      memory_order_relaxed);
}

void bhi_gate_set(bulkhead_t *bh, uint64_t until_ns)
{
	struct wake_batch wb;

	atomic_store_explicit(&bh->gate_ns, until_ns, memory_order_relaxed);
	lock(bh, &wb);
	dispatch(bh, &wb); /* waiters queued while it was shut */
	unlock(bh, &wb);
}
