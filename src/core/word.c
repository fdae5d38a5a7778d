/* The word's fast paths: one CAS on the state word takes or gives back
 * permits when nobody is queued; everything else goes to the queue
 * (queue.c). docs/design.md explains the protocol. */
#include <errno.h>
#include <time.h>

#include "internal.h"
#include "lib/vdso.h"
#include "word.h"
#include "queue.h"
#include "observe.h"
#include "sample_hook.h"
#include "shm/dispatch.h"

/* ---- the gate's clock (src/core/layer.h) --------------------------------- */

/* The clock behind a layer's gate (word.h): the vDSO's clock_gettime,
 * looked up here on first use; where there is none (valgrind) it is glibc's
 * clock_gettime. Only on x86-64, whose vDSO function takes the same struct
 * timespec as glibc's: 32-bit ABIs with a 64-bit time_t need another symbol
 * (__vdso_clock_gettime64), and other architectures name it otherwise, so
 * they keep glibc's. */
bhi_clock_fn *_Atomic bhi_coarse_fn;

bhi_clock_fn *bhi_coarse_lookup(void)
{
#if defined(__x86_64__) && !defined(__ILP32__)
	bhi_clock_fn *f = (bhi_clock_fn *)bhi_vdso_sym("__vdso_clock_gettime");
#else
	bhi_clock_fn *f = NULL;
#endif

	if (!f)
		f = clock_gettime;
	atomic_store_explicit(&bhi_coarse_fn, f, memory_order_relaxed);
	return f;
}

uint64_t bhi_coarse_ns(void)
{
	return coarse_now();
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

/* The flags that add work to a take or a give. */
#define BHI_RARE_FLAGS (BHI_GATED | BH_NO_STATS | BH_TRACK_HOLD)

/* The common case: this thread has a slot and the bulkhead none of the rare
 * flags. Every entry point tests this once and sends the rest, whole and
 * as a tail call, to a copy of the same code that handles everything; so
 * nothing on the common path lives across a call, it saves no register,
 * and it tests no flag after its CAS. A host-wide handle has no slots: the
 * entry points send it, also whole and as a tail call, to its layer's own
 * fast path (src/shm/fast.c), before any copy here has pushed a register
 * (a push is a store, and a locked RMW waits for every store before it). */
static inline struct bhi_slot *plain_slot(struct bulkhead *bh)
{
	struct bhi_slot *s = bhi_my_slot(bh);

	return BHI_LIKELY(s != NULL && !(bh->flags & BHI_RARE_FLAGS)) ? s : NULL;
}

/* A layer's gate and none of the other rare flags (a cluster handle): the
 * gate, then the common path's take. Its own copy, so that a gated take
 * pays for the clock and nothing else of the rare paths. */
static inline bool gated_only(uint32_t flags)
{
	return (flags & BHI_RARE_FLAGS) == BHI_GATED;
}

/* BH_NO_STATS and none of the other rare flags: nothing to count, so no
 * slot to find. Its own copy of the fast path, as a tail call from the
 * entry points. */
static inline bool quiet(uint32_t flags)
{
	return (flags & BHI_RARE_FLAGS) == BH_NO_STATS;
}

/* After a take: the thread's counters, and hold tracking. flags is
 * bh->flags, read once by the caller (the counter's store could alias it);
 * the common path passes 0. */
static inline __attribute__((always_inline)) void tally_take(struct bulkhead *bh,
							      struct bhi_slot *s, uint32_t flags,
							      uint32_t n)
{
	if (flags & BH_NO_STATS)
		; /* nothing to count */
	else if (BHI_LIKELY(s != NULL)) {
		bhi_slot_add(&s->c[BHI_ACQUIRED], 1);
		if (BHI_UNLIKELY(n != 1))
			bhi_slot_add(&s->c[BHI_TAKEN_EXTRA], n - 1u);
	} else {
		bhi_count_slow(bh, BHI_ACQUIRED, 1); /* gives a new thread its index */
		if (n != 1)
			bhi_count_slow(bh, BHI_TAKEN_EXTRA, n - 1u);
	}
	if (BHI_UNLIKELY(flags & BH_TRACK_HOLD))
		bhi_hold_begin(bh, n);
}

/* The fast path: one load and one CAS when the permits are free. Inlined
 * into every entry point: a call here costs the uncontended pair a few
 * percent. The word is loaded, not guessed: a per-thread guess of it saved
 * the load but put a chain of dependent loads (the thread's index, then
 * its slot) before the CAS, which cost more than the load (docs/design.md,
 * "The fast path"). */
static inline __attribute__((always_inline)) bool take_word(struct bulkhead *bh,
							     struct bhi_slot *s, uint32_t flags,
							     uint32_t n)
{
	uint64_t w;

	if (BHI_UNLIKELY(!s) && bh->ext) /* a host-wide handle has no slots */
		return bhs_take_fast(bh, n);
	w = load_word(bh);
	do {
		if (BHI_UNLIKELY(!may_take(w, n)))
			return false;
	} while (BHI_UNLIKELY(!cas_word(bh, &w, w_take(w, n)))); /* a failed CAS hands back the word */
	tally_take(bh, s, flags, n);
	return true;
}

/* The common path's take (plain_slot() gave s). */
static inline __attribute__((always_inline)) bool take_plain(struct bulkhead *bh,
							      struct bhi_slot *s, uint32_t n)
{
	return BHI_LIKELY(n_valid(n)) && take_word(bh, s, 0, n);
}

/* The common path's take of one permit: one load, one test, one CAS and
 * the count. The test (backend.h, W_TAKE1_BLOCK) depends on nothing but
 * the load, and a locked RMW starts only once every branch before it is
 * resolved: the full look (may_take(): extract the field, subtract,
 * compare) put a longer chain between the load and the CAS, which cost the
 * pair 2-3% on an Intel Xeon (Emerald Rapids). false: the test said no or
 * the CAS failed, and the caller takes the full look (a woken head's
 * rivals, W_WOKEN, take it too). */
static inline __attribute__((always_inline)) bool take1_plain(struct bulkhead *bh,
							       struct bhi_slot *s)
{
	uint64_t w = load_word(bh);

	if (BHI_UNLIKELY(w & W_TAKE1_BLOCK) || BHI_UNLIKELY(!cas_word(bh, &w, w_take(w, 1))))
		return false;
	bhi_slot_add(&s->c[BHI_ACQUIRED], 1);
	return true;
}

/* Everything else: no slot, a host-wide handle, a gated bulkhead (it reads
 * the clock first), or counters and hold tracking to keep. */
static __attribute__((noinline)) bool take_rare(struct bulkhead *bh, uint32_t n)
{
	uint32_t flags = bh->flags;

	if (quiet(flags))
		return n_valid(n) && take_word(bh, NULL, BH_NO_STATS, n);
	if (!n_valid(n) || (flags & BHI_GATED && gate_reached(bh)))
		return false;
	return take_word(bh, bhi_my_slot(bh), flags, n);
}

static __attribute__((noinline)) int try_rare(struct bulkhead *bh, uint32_t n)
{
	return take_rare(bh, n) ? 0 : refuse(bh, load_word(bh), n);
}

static __attribute__((noinline)) BHI_HOT_ENTRY int try_gated(struct bulkhead *bh, uint32_t n)
{
	struct bhi_slot *s;

	if (gate_reached(bh))
		return refuse(bh, load_word(bh), n);
	s = bhi_my_slot(bh);
	if (BHI_UNLIKELY(!s)) /* a new thread: the rare path gives it its index */
		return try_rare(bh, n);
	if (take_plain(bh, s, n))
		return 0;
	return refuse(bh, load_word(bh), n);
}

static __attribute__((noinline)) int try_quiet(struct bulkhead *bh, uint32_t n)
{
	if (BHI_LIKELY(n_valid(n)) && take_word(bh, NULL, BH_NO_STATS, n))
		return 0;
	return refuse(bh, load_word(bh), n);
}

/* The common path past its one-permit try: n > 1, or the try said no. */
static __attribute__((noinline)) int try_plain(struct bulkhead *bh, struct bhi_slot *s,
					       uint32_t n)
{
	if (take_plain(bh, s, n))
		return 0;
	return refuse(bh, load_word(bh), n);
}

BHI_HOT_ENTRY int bh_try_acquire(bulkhead_t *bh, uint32_t n)
{
	struct bhi_slot *s = plain_slot(bh);

	if (BHI_UNLIKELY(!s)) /* no slot, a rare flag, or a host-wide handle */
		return bh->ext ? bhs_try_acquire(bh, n)
		       : quiet(bh->flags) ? try_quiet(bh, n)
		       : gated_only(bh->flags) ? try_gated(bh, n) : try_rare(bh, n);
	if (BHI_LIKELY(n == 1) && take1_plain(bh, s))
		return 0;
	return try_plain(bh, s, n);
}

int bhi_try_take(bulkhead_t *bh, uint32_t n)
{
	struct bhi_slot *s = plain_slot(bh);

	if (s ? take_plain(bh, s, n) : take_rare(bh, n))
		return 0;
	return refusal(load_word(bh), n);
}

static __attribute__((noinline)) int acquire_rare(struct bulkhead *bh, uint32_t n,
						  uint64_t deadline_ns)
{
	return take_rare(bh, n) ? 0 : bhi_acquire_slow(bh, n, deadline_ns);
}

static __attribute__((noinline)) BHI_HOT_ENTRY int acquire_gated(struct bulkhead *bh, uint32_t n,
								 uint64_t deadline_ns)
{
	struct bhi_slot *s;

	if (gate_reached(bh)) /* the slow path knows what a shut gate means */
		return bhi_acquire_slow(bh, n, deadline_ns);
	s = bhi_my_slot(bh);
	if (BHI_UNLIKELY(!s))
		return acquire_rare(bh, n, deadline_ns);
	if (take_plain(bh, s, n))
		return 0;
	return bhi_acquire_slow(bh, n, deadline_ns);
}

static __attribute__((noinline)) int acquire_quiet(struct bulkhead *bh, uint32_t n,
						   uint64_t deadline_ns)
{
	if (BHI_LIKELY(n_valid(n)) && take_word(bh, NULL, BH_NO_STATS, n))
		return 0;
	return bhi_acquire_slow(bh, n, deadline_ns);
}

/* The common path past its one-permit try (see try_plain()). */
static __attribute__((noinline)) int acquire_plain(struct bulkhead *bh, struct bhi_slot *s,
						   uint32_t n, uint64_t deadline_ns)
{
	if (take_plain(bh, s, n))
		return 0;
	return bhi_acquire_slow(bh, n, deadline_ns);
}

BHI_HOT_ENTRY int bh_acquire(bulkhead_t *bh, uint32_t n, uint64_t deadline_ns)
{
	struct bhi_slot *s = plain_slot(bh);

	if (BHI_UNLIKELY(!s)) /* no slot, a rare flag, or a host-wide handle */
		return bh->ext ? bhs_acquire(bh, n, deadline_ns)
		       : quiet(bh->flags) ? acquire_quiet(bh, n, deadline_ns)
		       : gated_only(bh->flags) ? acquire_gated(bh, n, deadline_ns)
					       : acquire_rare(bh, n, deadline_ns);
	if (BHI_LIKELY(n == 1) && take1_plain(bh, s))
		return 0;
	return acquire_plain(bh, s, n, deadline_ns);
}

int bh_acquire_async(bulkhead_t *bh, struct bh_async *node, uint32_t n, bh_async_fn *fn,
		     void *data)
{
	struct bhi_slot *s;

	if (node) /* not queued, whatever its memory held: bh_cancel_async says 0 */
		node->link.kind = KIND_NONE;
	if (!bh || !node || !fn)
		return -EINVAL;
	node->fn = fn;
	node->data = data;
	s = plain_slot(bh);
	if (s ? take_plain(bh, s, n) : take_rare(bh, n))
		return 0;
	return bhi_acquire_async_slow(bh, node, n);
}

/* A release may skip the lock: nobody queued needs a grant or a wake, and
 * the permits are held (exact: held is in the word). */
static inline bool release_fast_ok(uint64_t w, uint32_t n)
{
	return !release_needs_lock(w) && w_held(w) >= (int64_t)n;
}

/* held >= n; for one permit a single test, on the word as loaded. */
static inline bool held_at_least(uint64_t w, uint32_t n)
{
	return n == 1 ? (w & W_HELD_MASK) != 0 : w_held(w) >= (int64_t)n;
}

/* After the fast try failed: the full look at a fresh word, the lock when
 * a queued waiter needs serving. */
static __attribute__((noinline)) int give_retry(struct bulkhead *bh, uint64_t w, uint32_t n)
{
	w = load_word(bh);
	do {
		if (!release_fast_ok(w, n))
			return release_needs_lock(w) ? bhi_release_slow(bh, n) : bhi_over_release(bh);
	} while (!cas_word(bh, &w, w_give(w, n))); /* a failed CAS hands back the word */
	return 0;
}

/* The give: one load and one CAS when nobody is queued. It counts nothing
 * (bhi_released derives the releases). For one permit its checks are two
 * tests of the word it loaded: nobody queued, and a permit held (the exact
 * over-release check; see take1_plain() for why single tests). A woken
 * head's rivals, and everything else, take the full look in give_retry().
 * (A CAS that expects the word with no waiter counted, in place of the
 * first test, was no faster uncontended and cost a failed locked RMW per
 * release while a woken head competes: 2 threads on 1 permit, unfair,
 * lost a quarter of their throughput.) */
static inline __attribute__((always_inline)) int give_word(struct bulkhead *bh, uint32_t n)
{
	uint64_t w = load_word(bh);

	if (BHI_LIKELY(!(w & W_NQ_MASK)) && BHI_LIKELY(held_at_least(w, n)) &&
	    BHI_LIKELY(cas_word(bh, &w, w_give(w, n))))
		return 0;
	return give_retry(bh, w, n);
}

/* The flags that send a give of one permit off the common path: a
 * host-wide handle (sent to its layer), hold tracking. */
#define BHI_RARE_GIVE (BHI_EXT | BH_TRACK_HOLD)

/* A give of n > 1 counts its extra permits before its CAS, and takes the
 * count back if the give fails: a reader that sees the give in the word
 * sees its count (bhi_released reads these after the word). */
static __attribute__((noinline)) int release_rare(struct bulkhead *bh, uint32_t n)
{
	uint32_t flags = bh->flags;
	bool extra = n != 1 && !(flags & BH_NO_STATS);
	int r;

	if (BHI_UNLIKELY(!n_valid(n)))
		return -EINVAL;
	if (extra)
		bhi_count_n(bh, BHI_GIVEN_EXTRA, n - 1u);
	r = give_word(bh, n);
	if (r != 0 && extra)
		bhi_count_n(bh, BHI_GIVEN_EXTRA, -(uint64_t)(n - 1u)); /* wraps back */
	else if (r == 0 && (flags & BH_TRACK_HOLD))
		bhi_hold_end(bh, n);
	return r;
}

BHI_HOT_ENTRY int bh_release(bulkhead_t *bh, uint32_t n)
{
	uint32_t flags = bh->flags;

	if (BHI_UNLIKELY(n != 1 || (flags & BHI_RARE_GIVE)))
		return flags & BHI_EXT ? bhs_release(bh, n) : release_rare(bh, n);
	return give_word(bh, 1);
}
