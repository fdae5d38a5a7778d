/* The state word's operations, private to the core's files: the fast paths
 * (word.c), the queue (queue.c) and the observers (observe.c) decide on the
 * same word with the same predicates. The layout is in backend.h. */
#ifndef BH_CORE_WORD_H
#define BH_CORE_WORD_H

#include <time.h>

#include "internal.h"
#include "layer.h"

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

/* CLOCK_MONOTONIC_COARSE through the vDSO's clock_gettime, called
 * directly: glibc's wrapper around the same call costs about 2 ns (AMD
 * EPYC, Zen 3: 6.8 ns a read through glibc, 4.5 ns direct), and a gated
 * take reads the clock every time. The pointer is to code mapped before
 * main(), so a relaxed load of it is enough (word.c looks it up). */
typedef int bhi_clock_fn(clockid_t, struct timespec *);
extern bhi_clock_fn *_Atomic bhi_coarse_fn;
bhi_clock_fn *bhi_coarse_lookup(void);

static inline uint64_t coarse_now(void)
{
	bhi_clock_fn *f = atomic_load_explicit(&bhi_coarse_fn, memory_order_relaxed);
	struct timespec ts;

	if (BHI_UNLIKELY(!f))
		f = bhi_coarse_lookup();
	f(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * BH_SEC + (uint64_t)ts.tv_nsec;
}

/* A layer's gate (src/core/layer.h): shut once the coarse clock reaches it. */
static inline bool gate_reached(const struct bulkhead *bh)
{
	return coarse_now() >= atomic_load_explicit(&((struct bulkhead *)bh)->gate_ns,
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

#endif /* BH_CORE_WORD_H */
