/* The word's fast paths: one CAS on the state word takes or gives back
 * permits when nobody is queued; everything else goes to the queue
 * (queue.c). docs/design.md explains the protocol. */
#include <errno.h>
#include <time.h>

#include "internal.h"
#include "word.h"
#include "queue.h"
#include "observe.h"
#include "sample_hook.h"
#include "shm/dispatch.h"

/* ---- the gate's clock (src/core/layer.h) --------------------------------- */

/* Here, next to the fast paths, so that gate_reached() inlines it into
 * take_gated(). */
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

/* ---- take / release ---------------------------------------------------- */

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

/* After a take or a give: the thread's guess of the word and its counter.
 * flags is bh->flags, read once by the caller (the stores here could alias
 * it, and a second load would stand on the fast path). */
static inline __attribute__((always_inline)) void remember(struct bulkhead *bh,
							    struct bhi_slot *s, uint32_t flags,
							    uint64_t w, enum bhi_counter c)
{
	if (BHI_LIKELY(s != NULL)) {
		atomic_store_explicit(&s->hint, w, memory_order_relaxed);
		if (BHI_LIKELY(!(flags & BH_NO_STATS)))
			bhi_slot_add(&s->c[c]);
	} else {
		bhi_count(bh, c);
	}
}

/* The fast path: one CAS when the permits are free. A guess that says "no"
 * is checked against the real word before anyone is refused. Inlined into
 * every entry point: a call here costs the uncontended pair a few percent. */
static inline __attribute__((always_inline)) bool take_word(struct bulkhead *bh, uint32_t n)
{
	struct bhi_slot *s = bhi_my_slot(bh);
	uint32_t flags = bh->flags;
	uint64_t w;

	if (BHI_UNLIKELY(!s) && bh->ext) /* a host-wide handle has no slots */
		return bhs_take_fast(bh, n);
	w = first_look(bh, s);
	if (BHI_UNLIKELY(!may_take(w, n))) {
		w = load_word(bh);
		if (!may_take(w, n))
			return false;
	}
	for (;;) {
		if (BHI_LIKELY(cas_word(bh, &w, w - n))) {
			remember(bh, s, flags, w - n, BHI_ACQUIRED);
			if (BHI_UNLIKELY(flags & BH_TRACK_HOLD))
				bhi_hold_begin(bh, n);
			return true;
		}
		if (!may_take(w, n)) /* a failed CAS hands back the real word */
			return false;
	}
}

/* A gated bulkhead reads the clock first; out of line, so that the plain
 * fast path keeps its registers and pays one flag test. */
static __attribute__((noinline)) bool take_gated(struct bulkhead *bh, uint32_t n)
{
	return !gate_reached(bh) && take_word(bh, n);
}

static inline __attribute__((always_inline)) bool take_fast(struct bulkhead *bh, uint32_t n)
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

int bh_acquire(bulkhead_t *bh, uint32_t n, uint64_t deadline_ns)
{
	if (BHI_LIKELY(n_valid(n)) && take_fast(bh, n))
		return 0;
	return bhi_acquire_slow(bh, n, deadline_ns);
}

int bh_acquire_async(bulkhead_t *bh, struct bh_async *node, uint32_t n, bh_async_fn *fn,
		     void *data)
{
	if (!bh || !node || !fn)
		return -EINVAL;
	node->link.kind = KIND_NONE;
	node->fn = fn;
	node->data = data;
	if (BHI_LIKELY(n_valid(n)) && take_fast(bh, n))
		return 0;
	return bhi_acquire_async_slow(bh, node, n);
}

static inline bool release_fits(uint64_t w, uint32_t n)
{
	/* The limit is in the same word: the check is exact. */
	return w_avail(w) + n <= (int64_t)w_limit(w);
}

static inline bool release_fast_ok(uint64_t w, uint32_t n)
{
	return !release_needs_lock(w) && release_fits(w, n);
}

int bh_release(bulkhead_t *bh, uint32_t n)
{
	struct bhi_slot *s = bhi_my_slot(bh);
	uint32_t flags = bh->flags;
	uint64_t w;

	if (BHI_UNLIKELY(!s) && bh->ext) /* a host-wide handle has no slots */
		return bhs_release(bh, n);
	if (BHI_UNLIKELY(!n_valid(n)))
		return -EINVAL;
	w = first_look(bh, s);
	if (BHI_UNLIKELY(!release_fast_ok(w, n)))
		w = load_word(bh); /* the guess may be stale: only the word refuses */
	do {
		if (BHI_UNLIKELY(!release_fast_ok(w, n)))
			return release_needs_lock(w) ? bhi_release_slow(bh, n) : bhi_over_release(bh);
	} while (BHI_UNLIKELY(!cas_word(bh, &w, w + n))); /* a failed CAS hands back the real word */
	remember(bh, s, flags, w + n, BHI_RELEASED);
	if (BHI_UNLIKELY(flags & BH_TRACK_HOLD))
		bhi_hold_end(bh, n);
	return 0;
}
