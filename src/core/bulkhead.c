/* The core limiter: one state word, an explicit FIFO queue, direct handoff.
 * docs/design.md explains the protocol and why no wakeup is lost. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "sample_hook.h"
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

enum { KIND_NONE, KIND_SYNC, KIND_ASYNC };

struct sync_waiter {
	struct bh_qlink link;
	_Atomic uint32_t state;
};

#define WB_MAX 16
struct wake_batch {
	const struct bhi_sync_ops *ops;
	unsigned n;
	_Atomic uint32_t *words[WB_MAX];
};

static inline struct sync_waiter *as_sync(struct bh_qlink *l)
{
	return bhi_container_of(l, struct sync_waiter, link);
}

/* ---- the word --------------------------------------------------------- */

/* A newcomer may take permits unless: closed; an unfair head is starving;
 * or waiters are queued and the head is not out competing (fair mode never
 * sets W_WOKEN, so there any queued waiter blocks newcomers). The last rule
 * also keeps a small newcomer from passing a larger head. */
static inline bool may_take(uint64_t w, uint32_t n)
{
	if (w & (W_CLOSED | W_STARVING))
		return false;
	if ((w & W_NQ_MASK) && !(w & W_WOKEN))
		return false;
	return w_avail(w) >= (int64_t)n;
}

/* A release must take the lock when someone queued needs a grant or a wake:
 * waiters exist and no head is already awake to see the new permits. */
static inline bool release_needs_lock(uint64_t w)
{
	return (w & W_NQ_MASK) && !(w & W_WOKEN);
}

static inline bool cas_word(struct bulkhead *bh, uint64_t *w, uint64_t nw)
{
	/* acq_rel: a taker must see what the previous holder wrote (pairs
	 * with the releasing CAS); the failure load needs nothing more. */
	return atomic_compare_exchange_weak_explicit(&bh->word, w, nw, memory_order_acq_rel,
						     memory_order_relaxed);
}

static inline uint64_t load_word(const struct bulkhead *bh)
{
	return atomic_load_explicit(&((struct bulkhead *)bh)->word, memory_order_relaxed);
}

/* A layer's gate (src/core/layer.h): shut once the coarse clock reaches it. */
static inline bool gate_reached(const struct bulkhead *bh)
{
	return bhi_coarse_ns() >= atomic_load_explicit(&((struct bulkhead *)bh)->gate_ns,
						      memory_order_relaxed);
}

static inline bool gate_shut(const struct bulkhead *bh)
{
	return BHI_UNLIKELY(bh->flags & BHI_GATED) && gate_reached(bh);
}

static inline bool n_valid(uint32_t n)
{
	/* n == 0 wraps to UINT32_MAX, so one compare rejects both ends. */
	return n - 1u < BH_LIMIT_MAX;
}

/* ---- create / destroy / hooks ------------------------------------------ */

static uint32_t slot_count(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_CONF);
	uint32_t n = 16;

	while (n < 4 * (uint32_t)(cpus > 0 ? cpus : 1) && n < 1024)
		n *= 2;
	return n;
}

/* Polls that fit in ns, from the measured cost of one pause (it ranges
 * from ~1 to ~40 ns across x86 generations). */
static uint32_t spin_iters_for(uint64_t ns)
{
	static _Atomic uint32_t pause_ps; /* picoseconds per poll, 0 = unknown */
	uint32_t ps = atomic_load_explicit(&pause_ps, memory_order_relaxed);

	if (ps == 0) {
		uint64_t t0 = bh_now_ns();

		for (int i = 0; i < 2000; i++)
			bhi_cpu_relax();
		ps = (uint32_t)((bh_now_ns() - t0) * 1000 / 2000);
		ps = ps < 500 ? 500 : ps;
		atomic_store_explicit(&pause_ps, ps, memory_order_relaxed);
	}
	return (uint32_t)(ns * 1000 / ps);
}

#define BH_ALL_FLAGS (BH_FAIR | BH_TRACK_HOLD | BH_NO_STATS)

static int check_config(const struct bh_config *cfg)
{
	if (cfg->max_concurrent == 0 || cfg->max_concurrent > BH_LIMIT_MAX ||
	    (cfg->flags & ~BH_ALL_FLAGS))
		return -EINVAL;
	if (cfg->name && strnlen(cfg->name, BH_NAME_MAX) == BH_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

static void set_name(struct bulkhead *bh, const char *name)
{
	static _Atomic uint64_t next_id;

	bh->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
	if (name)
		memcpy(bh->name, name, strlen(name) + 1);
	else
		snprintf(bh->name, sizeof(bh->name), "bulkhead-%llu", (unsigned long long)bh->id);
}

static struct bulkhead *alloc_bulkhead(size_t size, bool hold)
{
	int saved = errno; /* the library never sets errno, even on ENOMEM */
	struct bulkhead *bh =
		aligned_alloc(BHI_CACHELINE, (size + BHI_CACHELINE - 1) & ~(size_t)(BHI_CACHELINE - 1));

	if (bh) {
		memset(bh, 0, size);
		if (hold && !(bh->hold = calloc(BHI_HOLD_SHARDS, sizeof(*bh->hold)))) {
			free(bh);
			bh = NULL;
		}
	}
	errno = saved;
	return bh;
}

int bh_create(const struct bh_config *cfg, bulkhead_t **out)
{
	struct bulkhead *bh;
	uint32_t nslots = slot_count();
	size_t size = sizeof(*bh) + (nslots + 1) * sizeof(struct bhi_slot);
	int r;

	if (!cfg || !out)
		return -EINVAL;
	if ((r = check_config(cfg)) < 0)
		return r;
	bh = alloc_bulkhead(size, cfg->flags & BH_TRACK_HOLD);
	if (!bh)
		return -ENOMEM;
	if (pthread_mutex_init(&bh->lock, NULL) != 0) {
		free(bh->hold);
		free(bh);
		return -ENOMEM;
	}
	set_name(bh, cfg->name);
	atomic_init(&bh->word, w_make(cfg->max_concurrent, cfg->max_concurrent, 0));
	bh->flags = cfg->flags;
	bh->queue_cap = cfg->queue_capacity > BH_QUEUE_MAX ? BH_QUEUE_MAX : cfg->queue_capacity;
	bh->nslots = nslots;
	bh->ops = &bhi_futex_ops;
	bh->starve_ns = BH_MSEC;
	bh->spin_ns = BHI_SPIN_NS;
	bh->spin_iters = spin_iters_for(bh->spin_ns);
	*out = bh;
	return 0;
}

void bh_destroy(bulkhead_t *bh)
{
	if (!bh)
		return;
	if (bh->layer)
		bh->layer->destroy(bh->layer);
	if (bh->ext) {
		bhs_destroy(bh);
		return;
	}
	pthread_mutex_destroy(&bh->lock);
	free(bh->hold);
	free(bh);
}

const char *bh_name(const bulkhead_t *bh)
{
	return bh ? bh->name : NULL;
}

/* Fake clocks do not advance while a waiter spins: tests get no spinning. */
void bhi_set_sync_ops(bulkhead_t *bh, const struct bhi_sync_ops *ops)
{
	bh->ops = ops ? ops : &bhi_futex_ops;
	if (ops)
		bhi_set_spin_ns(bh, 0);
}

void bhi_set_spin_ns(bulkhead_t *bh, uint64_t ns)
{
	bh->spin_ns = ns;
	bh->spin_iters = ns ? spin_iters_for(ns) : 0;
}

void bhi_set_starve_ns(bulkhead_t *bh, uint64_t ns)
{
	bh->starve_ns = ns;
}

uint64_t bhi_word(const bulkhead_t *bh)
{
	return atomic_load_explicit(&((struct bulkhead *)bh)->word, memory_order_acquire);
}

uint64_t bhi_counter(const struct bulkhead *bh, enum bhi_counter c)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i <= bh->nslots; i++)
		sum += atomic_load_explicit(&((struct bulkhead *)bh)->slots[i].c[c],
					    memory_order_relaxed);
	return sum;
}

void bhi_count_slow(struct bulkhead *bh, enum bhi_counter c)
{
	uint32_t t = bhi_tindex ? bhi_tindex : bhi_tindex_assign();

	if (bh->flags & BH_NO_STATS)
		return;
	if (t - 1u < bh->nslots) {
		bhi_count(bh, c);
		return;
	}
	/* More live threads than slots: share the last one, atomically. */
	atomic_fetch_add_explicit(&bh->slots[bh->nslots].c[c], 1, memory_order_relaxed);
}

/* ---- the queue and waking (all under bh->lock) --------------------------- */

static void q_append(struct bulkhead *bh, struct bh_qlink *l)
{
	l->next = NULL;
	l->prev = bh->tail;
	if (bh->tail)
		bh->tail->next = l;
	else
		bh->head = l;
	bh->tail = l;
}

static void q_remove(struct bulkhead *bh, struct bh_qlink *l)
{
	if (l->prev)
		l->prev->next = l->next;
	else
		bh->head = l->next;
	if (l->next)
		l->next->prev = l->prev;
	else
		bh->tail = l->prev;
	l->next = l->prev = NULL;
}

static void wb_flush(struct wake_batch *wb)
{
	for (unsigned i = 0; i < wb->n; i++)
		wb->ops->wake(wb->ops->ctx, wb->words[i]);
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
	wb->ops = bh->ops;
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

static void record_wait(struct bulkhead *bh, uint64_t enqueued_ns, int result);

/* Final word to a dequeued waiter: 0 (granted), -ESHUTDOWN or -EINVAL. */
static void finish(struct bulkhead *bh, struct bh_qlink *l, int result, struct wake_batch *wb)
{
	if (l->kind == KIND_SYNC) {
		notify(l, result == 0 ? WS_GRANTED : result == -ESHUTDOWN ? WS_SHUTDOWN : WS_INVALID,
		       wb);
		return;
	}
	struct bh_async *a = bhi_container_of(l, struct bh_async, link);

	l->kind = KIND_NONE; /* not queued any more: the callback may free it */
	if (result == 0)
		bhi_count(bh, BHI_ACQUIRED);
	record_wait(bh, l->enqueued_ns, result);
	a->fn(a, result);
}

/* Remove l from the queue and from the word's count. When the head leaves,
 * the competing/starving marks were about it and go with it. */
static void unqueue(struct bulkhead *bh, struct bh_qlink *l)
{
	uint64_t w = load_word(bh), nw;
	bool was_head = bh->head == l;

	do {
		nw = w - W_NQ_ONE;
		if (was_head)
			nw &= ~(W_WOKEN | W_STARVING);
	} while (!cas_word(bh, &w, nw));
	q_remove(bh, l);
}

static void observe_grant(struct bulkhead *bh, const struct bh_qlink *l)
{
	if (bh->ops->granted)
		bh->ops->granted(bh->ops->ctx, l);
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
	uint64_t now = bh->ops->now(bh->ops->ctx);

	bh->short_holds = bh->spin_iters && now - bh->last_grant_ns < bh->spin_ns;
}

static void note_grant(struct bulkhead *bh)
{
	if (bh->spin_iters)
		bh->last_grant_ns = bh->ops->now(bh->ops->ctx);
}

static void prewake_head(struct bulkhead *bh, struct wake_batch *wb)
{
	struct bh_qlink *h = bh->head;
	uint32_t expect = WS_SLEEPING;

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

	if (bh->head && gate_shut(bh))
		return;
	while ((h = bh->head) != NULL) {
		uint64_t w = load_word(bh), nw;
		bool handoff;

		do {
			if (w_avail(w) < (int64_t)h->n)
				return;
			handoff = must_handoff(bh, w, h);
			if (!handoff && (w & W_WOKEN))
				return; /* the head is already on its way */
			nw = handoff ? (w - h->n - W_NQ_ONE) & ~(W_WOKEN | W_STARVING) : w | W_WOKEN;
		} while (!cas_word(bh, &w, nw));
		if (!handoff) {
			notify(h, WS_WOKEN, wb);
			return;
		}
		q_remove(bh, h);
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
		nw = take ? w - l->n : w + W_NQ_ONE;
	} while (!cas_word(bh, &w, nw));
	if (take)
		return 0;
	q_append(bh, l);
	if (bh->ops->queued)
		bh->ops->queued(bh->ops->ctx, l);
	return 1;
}

/* Put a cancelled grantee's n permits back and serve the queue (caller
 * holds the lock). Releases are not tied to threads, so another call may
 * already have given some of them back (a caller's bug that bh_release
 * accepts while the total stays within the limit): only what fits goes
 * back, like bh_release, so free permits never exceed the limit, and the
 * excess counts as an over-release. */
static void give_back(struct bulkhead *bh, uint32_t n, struct wake_batch *wb)
{
	uint64_t w = load_word(bh);
	int64_t room;

	do
		room = (int64_t)w_limit(w) - w_avail(w);
	while (!cas_word(bh, &w, w + (room < n ? (uint64_t)room : n)));
	if (room < n)
		atomic_fetch_add_explicit(&bh->over_released, 1, memory_order_relaxed);
	dispatch(bh, wb);
}

/* ---- try / acquire / release -------------------------------------------- */

/* Why n permits cannot be taken now, in the order of errors every entry
 * point follows (admit() too): invalid n, closed, more than the limit, no
 * room. Closed comes before the limit because it is final and the limit
 * is not: a caller told -ESHUTDOWN stops, one told -EINVAL may retry after
 * bh_set_limit. */
static int refusal(uint64_t w, uint32_t n)
{
	if (!n_valid(n))
		return -EINVAL;
	if (w & W_CLOSED)
		return -ESHUTDOWN;
	if (n > w_limit(w))
		return -EINVAL;
	return -EBUSY;
}

static BHI_COLD int refuse(struct bulkhead *bh, uint64_t w, uint32_t n)
{
	int r;

	if (bh->ext) /* a host-wide handle's word always refuses: ask the segment */
		return bhs_try_acquire(bh, n);
	r = refusal(w, n);
	if (r == -EBUSY)
		bhi_count(bh, BHI_REJECTED);
	return r;
}

/* The thread's guess of the word (see struct bhi_slot), or the word. */
static inline uint64_t first_look(struct bulkhead *bh, struct bhi_slot *s)
{
	return s ? atomic_load_explicit(&s->hint, memory_order_relaxed) : load_word(bh);
}

static inline void remember(const struct bulkhead *bh, struct bhi_slot *s, uint64_t w,
			    enum bhi_counter c)
{
	atomic_store_explicit(&s->hint, w, memory_order_relaxed);
	if (BHI_LIKELY(!(bh->flags & BH_NO_STATS)))
		bhi_slot_add(&s->c[c]);
}

/* ---- hold times (BH_TRACK_HOLD) -------------------------------------------- */

static void hold_add(struct bulkhead *bh, unsigned shard, uint64_t ns)
{
	bhi_hist_add(&bh->hold[shard % BHI_HOLD_SHARDS], ns);
}

/* This thread's slot, cleared of what a previous owner of its index left. */
static struct bhi_slot *hold_slot(struct bulkhead *bh)
{
	struct bhi_slot *s = bhi_my_slot(bh);

	if (s && s->hold_gen != bhi_tgen) {
		s->held = 0;
		s->hold_start = 0;
		s->hold_gen = bhi_tgen;
	}
	return s;
}

/* A thread's holding begins when it goes from no permits to some. */
static BHI_COLD void hold_begin(struct bulkhead *bh, uint32_t n)
{
	struct bhi_slot *s = hold_slot(bh);

	if (!s)
		return;
	if (s->held == 0)
		s->hold_start = bh->ops->now(bh->ops->ctx);
	s->held += n;
}

/* ...and ends when it holds none again. A release of more than the thread
 * took (permits acquired on another thread) makes the pair unmeasurable. */
static BHI_COLD void hold_end(struct bulkhead *bh, uint32_t n)
{
	struct bhi_slot *s = hold_slot(bh);

	if (!s)
		return;
	if (n > s->held) {
		s->held = 0;
		s->hold_start = 0;
		return;
	}
	s->held -= n;
	if (s->held == 0 && s->hold_start) {
		uint64_t ns = bh->ops->now(bh->ops->ctx) - s->hold_start;

		hold_add(bh, (unsigned)(s - bh->slots), ns);
		s->hold_start = 0;
		bhk_emit(bh, BHK_HOLD, ns, BHK_OK); /* an adaptive sample, if one listens */
	}
}

void bh_record_hold(bulkhead_t *bh, uint64_t ns)
{
	if (bh->ext)
		bhs_record_hold(bh, ns);
	else if (bh->hold)
		hold_add(bh, bhi_tindex, ns);
	bhk_emit(bh, BHK_HOLD, ns, BHK_OK);
}

/* ---- waits --------------------------------------------------------------------- */

static void record_wait(struct bulkhead *bh, uint64_t enqueued_ns, int result)
{
	uint64_t ns = bh->ops->now(bh->ops->ctx) - enqueued_ns;

	bhi_hist_add(result == 0 ? &bh->wait : &bh->wait_failed, ns);
}

/* The fast path: one CAS when the permits are free. A guess that says "no"
 * is checked against the real word before anyone is refused. */
static inline bool take_word(struct bulkhead *bh, uint32_t n)
{
	struct bhi_slot *s = bhi_my_slot(bh);
	uint64_t w;

	if (BHI_UNLIKELY(!s) && bh->ext) /* a host-wide handle has no slots */
		return bhs_take_fast(bh, n);
	w = first_look(bh, s);

	if (!may_take(w, n))
		w = load_word(bh);
	while (may_take(w, n)) {
		if (cas_word(bh, &w, w - n)) {
			if (BHI_LIKELY(s != NULL))
				remember(bh, s, w - n, BHI_ACQUIRED);
			else
				bhi_count(bh, BHI_ACQUIRED);
			if (BHI_UNLIKELY(bh->flags & BH_TRACK_HOLD))
				hold_begin(bh, n);
			return true;
		}
	}
	return false;
}

/* A gated bulkhead reads the clock first; out of line, so that the plain
 * fast path keeps its registers and pays one flag test. */
static __attribute__((noinline)) bool take_gated(struct bulkhead *bh, uint32_t n)
{
	return !gate_reached(bh) && take_word(bh, n);
}

static inline bool take_fast(struct bulkhead *bh, uint32_t n)
{
	if (BHI_UNLIKELY(bh->flags & BHI_GATED))
		return take_gated(bh, n);
	return take_word(bh, n);
}

int bh_try_acquire(bulkhead_t *bh, uint32_t n)
{
	if (BHI_LIKELY(n_valid(n)) && take_fast(bh, n))
		return 0;
	return refuse(bh, load_word(bh), n);
}

int bhi_try_take(bulkhead_t *bh, uint32_t n)
{
	if (BHI_LIKELY(n_valid(n)) && take_fast(bh, n))
		return 0;
	return refusal(load_word(bh), n);
}

static int acquire_slow(struct bulkhead *bh, uint32_t n, uint64_t deadline);

int bh_acquire(bulkhead_t *bh, uint32_t n, uint64_t deadline_ns)
{
	if (BHI_LIKELY(n_valid(n)) && take_fast(bh, n))
		return 0;
	return acquire_slow(bh, n, deadline_ns);
}

static BHI_COLD int over_release(struct bulkhead *bh)
{
	atomic_fetch_add_explicit(&bh->over_released, 1, memory_order_relaxed);
	return -EOVERFLOW;
}

static BHI_COLD int release_slow(struct bulkhead *bh, uint32_t n)
{
	struct wake_batch wb;
	uint64_t w;

	if (bh->ext)
		return bhs_release(bh, n);
	lock(bh, &wb);
	w = load_word(bh);
	do {
		if (w_avail(w) + n > (int64_t)w_limit(w)) {
			unlock(bh, &wb);
			return over_release(bh);
		}
	} while (!cas_word(bh, &w, w + n));
	note_release(bh);
	dispatch(bh, &wb);
	unlock(bh, &wb);
	bhi_count(bh, BHI_RELEASED);
	if (bh->flags & BH_TRACK_HOLD)
		hold_end(bh, n);
	return 0;
}

static inline bool release_fits(uint64_t w, uint32_t n)
{
	/* The limit is in the same word: the check is exact. */
	return w_avail(w) + n <= (int64_t)w_limit(w);
}

int bh_release(bulkhead_t *bh, uint32_t n)
{
	struct bhi_slot *s = bhi_my_slot(bh);
	uint64_t w;
	bool guess = s != NULL;

	if (BHI_UNLIKELY(!s) && bh->ext) /* a host-wide handle has no slots */
		return bhs_release(bh, n);
	w = first_look(bh, s);

	if (BHI_UNLIKELY(!n_valid(n)))
		return -EINVAL;
	for (;;) {
		if (release_needs_lock(w) || !release_fits(w, n)) {
			if (guess) {
				w = load_word(bh);
				guess = false;
				continue;
			}
			return release_needs_lock(w) ? release_slow(bh, n) : over_release(bh);
		}
		if (cas_word(bh, &w, w + n))
			break;
		guess = false; /* a failed CAS hands back the real word */
	}
	if (BHI_LIKELY(s != NULL))
		remember(bh, s, w + n, BHI_RELEASED);
	else
		bhi_count(bh, BHI_RELEASED);
	if (BHI_UNLIKELY(bh->flags & BH_TRACK_HOLD))
		hold_end(bh, n);
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
	now = bh->ops->now(bh->ops->ctx);
	shut = gate_shut(bh);
	w = load_word(bh);
	do {
		won = !shut && w_avail(w) >= (int64_t)sw->link.n;
		nw = won ? w - sw->link.n - W_NQ_ONE : w;
		nw &= ~(W_WOKEN | W_STARVING);
		if (!won && starving(bh, sw, now))
			nw |= W_STARVING;
	} while (!cas_word(bh, &w, nw));
	if (won) {
		q_remove(bh, &sw->link);
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
	s = atomic_load_explicit(&cc->sw->state, memory_order_acquire);
	if (s == WS_GRANTED)
		give_back(bh, cc->sw->link.n, &wb);
	else if (!state_final(s)) {
		unqueue(bh, &cc->sw->link);
		dispatch(bh, &wb);
	}
	unlock(bh, &wb);
	atomic_fetch_add_explicit(&bh->cancelled, 1, memory_order_relaxed);
	record_wait(bh, cc->sw->link.enqueued_ns, -ECANCELED);
}

/* A head waiter polls its word a little before sleeping: with short holds
 * the permit arrives within microseconds and the handoff needs no syscall. */
static void spin(const struct bulkhead *bh, struct sync_waiter *sw)
{
	for (uint32_t i = 0; i < bh->spin_iters; i++) {
		if (atomic_load_explicit(&sw->state, memory_order_relaxed) != WS_WAITING)
			return;
		bhi_cpu_relax();
	}
}

static int wait_loop(struct bulkhead *bh, struct sync_waiter *sw, uint64_t deadline)
{
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
			if (!atomic_compare_exchange_strong_explicit(&sw->state, &expect, WS_SLEEPING,
								     memory_order_acq_rel,
								     memory_order_acquire))
				continue;
		}
		/* EINTR, EAGAIN and spurious returns just re-check the state;
		 * the deadline is absolute, so retrying never extends it. */
		if (bh->ops->wait(bh->ops->ctx, &sw->state, WS_SLEEPING, deadline) == -ETIMEDOUT)
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

static BHI_COLD int acquire_slow(struct bulkhead *bh, uint32_t n, uint64_t deadline)
{
	struct sync_waiter sw = { .link = { .n = n, .kind = KIND_SYNC } };
	struct wake_batch wb;
	int r;

	if (bh->ext)
		return bhs_acquire(bh, n, deadline);
	if (!n_valid(n))
		return -EINVAL;
	sw.link.enqueued_ns = bh->ops->now(bh->ops->ctx);
	if (deadline <= sw.link.enqueued_ns)
		return bh_try_acquire(bh, n);
	atomic_init(&sw.state, WS_WAITING);
	lock(bh, &wb);
	r = admit(bh, &sw.link);
	if (r == 1 && bh->head != &sw.link) /* not next: no point spinning */
		atomic_store_explicit(&sw.state, WS_SLEEPING, memory_order_relaxed);
	unlock(bh, &wb);
	if (r == 1) {
		r = wait_granted(bh, &sw, deadline);
		record_wait(bh, sw.link.enqueued_ns, r);
	}
	if (r == 0) {
		bhi_count(bh, BHI_ACQUIRED);
		if (bh->flags & BH_TRACK_HOLD)
			hold_begin(bh, n);
	} else if (r == -EBUSY) {
		bhi_count(bh, BHI_REJECTED);
	}
	return r;
}

/* ---- async waiters -------------------------------------------------------- */

int bh_acquire_async(bulkhead_t *bh, struct bh_async *node, uint32_t n, bh_async_fn *fn,
		     void *data)
{
	struct wake_batch wb;
	int r;

	if (!bh || !node || !fn)
		return -EINVAL;
	node->link.kind = KIND_NONE;
	node->fn = fn;
	node->data = data;
	if (BHI_LIKELY(n_valid(n)) && take_fast(bh, n))
		return 0;
	if (bh->ext)
		return bhs_acquire_async(bh, node, n, fn, data);
	if (!n_valid(n))
		return -EINVAL;
	node->link.n = n;
	node->link.kind = KIND_ASYNC;
	node->link.enqueued_ns = bh->ops->now(bh->ops->ctx);
	lock(bh, &wb);
	r = admit(bh, &node->link);
	unlock(bh, &wb);
	if (r != 1)
		node->link.kind = KIND_NONE;
	if (r == 0)
		bhi_count(bh, BHI_ACQUIRED);
	else if (r == -EBUSY)
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
		record_wait(bh, node->link.enqueued_ns, -ECANCELED);
	}
	return queued;
}

/* ---- close / resize / stats ---------------------------------------------- */

/* Fail every queued waiter whose request is unsatisfiable or moot. */
static void fail_waiters(struct bulkhead *bh, uint32_t above_n, int result, struct wake_batch *wb)
{
	struct bh_qlink *l = bh->head, *next;

	for (; l; l = next) {
		next = l->next;
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
	do {
		int64_t avail = w_avail(w) + (int64_t)max_concurrent - w_limit(w);

		nw = (w & ~(W_AVAIL_MASK | W_LIMIT_MASK)) |
		     (w_make(avail, max_concurrent, 0) & (W_AVAIL_MASK | W_LIMIT_MASK));
	} while (!cas_word(bh, &w, nw));
	fail_waiters(bh, max_concurrent, -EINVAL, &wb);
	dispatch(bh, &wb);
	unlock(bh, &wb);
	return 0;
}

/* The gauges from one load of the word. acquire: pairs with the acq_rel CAS
 * that last changed it, so whatever the caller does on seeing, say, nothing
 * in flight comes after the release that made it so. */
static struct bh_gauges gauges_now(const struct bulkhead *bh)
{
	uint64_t w = atomic_load_explicit(&((struct bulkhead *)bh)->word, memory_order_acquire);

	return (struct bh_gauges){
		.limit = w_limit(w),
		.in_flight = (uint64_t)((int64_t)w_limit(w) - w_avail(w)),
		.queued = w_nq(w),
	};
}

int bh_gauges(const bulkhead_t *bh, struct bh_gauges *out)
{
	if (!bh || !out)
		return -EINVAL;
	if (bh->ext) {
		bhs_gauges(bh, &out->limit, &out->in_flight, &out->queued);
		return 0;
	}
	*out = gauges_now(bh);
	return 0;
}

int bh_stats(const bulkhead_t *bh, struct bh_stats *out)
{
	struct bh_gauges g;

	if (!bh || !out)
		return -EINVAL;
	if (bh->ext) {
		bhs_stats(bh, out);
		return 0;
	}
	g = gauges_now(bh);
	memset(out, 0, sizeof(*out));
	out->limit = g.limit;
	out->in_flight = g.in_flight;
	out->queued = g.queued;
	out->acquired = bhi_counter(bh, BHI_ACQUIRED);
	out->released = bhi_counter(bh, BHI_RELEASED);
	out->rejected = bhi_counter(bh, BHI_REJECTED);
	out->timed_out = atomic_load_explicit(&bh->timed_out, memory_order_relaxed);
	out->cancelled = atomic_load_explicit(&bh->cancelled, memory_order_relaxed);
	out->over_released = atomic_load_explicit(&bh->over_released, memory_order_relaxed);
	bhi_hist_read(&bh->wait, &out->wait);
	bhi_hist_read(&bh->wait_failed, &out->wait_failed);
	for (unsigned i = 0; bh->hold && i < BHI_HOLD_SHARDS; i++) {
		struct bh_hist shard;

		bhi_hist_read(&bh->hold[i], &shard);
		bh_hist_merge(&out->hold, &shard);
	}
	return 0;
}

/* For bh_stats@LIBBULKHEAD_0.1 (src/core/compat_0_1.c): growth is append-only,
 * so an older layout is a prefix of the current one. */
int bhi_stats_prefix(const bulkhead_t *bh, void *out, size_t size)
{
	struct bh_stats st;
	int r = bh_stats(bh, &st);

	if (r == 0)
		memcpy(out, &st, size < sizeof(st) ? size : sizeof(st));
	return r;
}

/* ---- layers (src/core/layer.h) -------------------------------------------------- */

uint64_t bhi_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * BH_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t bhi_coarse_res_ns(void)
{
	struct timespec ts;

	if (clock_getres(CLOCK_MONOTONIC_COARSE, &ts) != 0)
		return 10 * BH_MSEC; /* HZ=100, the coarsest Linux tick */
	return (uint64_t)ts.tv_sec * BH_SEC + (uint64_t)ts.tv_nsec;
}

void bhi_layer_attach(bulkhead_t *bh, struct bhi_layer *l)
{
	bh->layer = l;
	atomic_store_explicit(&bh->gate_ns, 0, memory_order_relaxed);
	bh->flags |= BHI_GATED;
}

struct bhi_layer *bhi_layer_of(const bulkhead_t *bh)
{
	return bh->layer;
}

void bhi_gate_set(bulkhead_t *bh, uint64_t until_ns)
{
	struct wake_batch wb;

	atomic_store_explicit(&bh->gate_ns, until_ns, memory_order_relaxed);
	lock(bh, &wb);
	dispatch(bh, &wb); /* waiters queued while it was shut */
	unlock(bh, &wb);
}

bool bhi_tracks_hold(const bulkhead_t *bh)
{
	return bh->flags & BH_TRACK_HOLD;
}

bool bhi_is_host(const bulkhead_t *bh)
{
	return bh->ext != NULL;
}
