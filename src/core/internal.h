/* Private to libbulkhead: the bulkhead object, the state word, the hooks
 * that tests and the stress suite use to drive the slow path. */
#ifndef BH_INTERNAL_H
#define BH_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bulkhead.h"
#include "layer.h"
#include "lib/compiler.h"
#include "lib/list.h"
#include "lib/spin.h" /* BHI_SPIN_NS: a head waiter's spin budget */

/*
 * The state word (see docs/design.md):
 *
 *   bits  0..20  avail + W_BIAS   permits free now (may be negative after a
 *                                 shrink); biased so plain +/- never carries
 *   bits 21..40  limit            max_concurrent in force
 *   bits 41..60  queued           waiters in the FIFO queue
 *   bit  61      W_STARVING       unfair mode: the head waited too long, the
 *                                 next release hands off to it
 *   bit  62      W_WOKEN          unfair mode: the head was woken to compete
 *   bit  63      W_CLOSED
 *
 * in_flight = limit - avail. Everything a decision needs is in one load.
 */
#define W_AVAIL_BITS 21
#define W_AVAIL_MASK ((1ull << W_AVAIL_BITS) - 1)
#define W_BIAS (1ull << 20)
#define W_LIMIT_SHIFT 21
#define W_LIMIT_MASK (0xfffffull << W_LIMIT_SHIFT)
#define W_NQ_SHIFT 41
#define W_NQ_ONE (1ull << W_NQ_SHIFT)
#define W_NQ_MASK (0xfffffull << W_NQ_SHIFT)
#define W_STARVING (1ull << 61)
#define W_WOKEN (1ull << 62)
#define W_CLOSED (1ull << 63)

/* Internal flag (above the public BH_* flags): a layer's gate applies. */
#define BHI_GATED (1u << 31)
/* The word of a host-wide handle: closed and one waiter queued, so no fast
 * path takes, and a release goes to release_slow (see struct bulkhead). */
#define BHI_WORD_EXT (W_CLOSED | W_NQ_ONE)

static inline int64_t w_avail(uint64_t w)
{
	return (int64_t)(w & W_AVAIL_MASK) - (int64_t)W_BIAS;
}
static inline uint32_t w_limit(uint64_t w)
{
	return (uint32_t)((w & W_LIMIT_MASK) >> W_LIMIT_SHIFT);
}
static inline uint32_t w_nq(uint64_t w)
{
	return (uint32_t)((w & W_NQ_MASK) >> W_NQ_SHIFT);
}
static inline uint64_t w_make(int64_t avail, uint32_t limit, uint32_t nq)
{
	return (uint64_t)(avail + (int64_t)W_BIAS) |
	       ((uint64_t)limit << W_LIMIT_SHIFT) | ((uint64_t)nq << W_NQ_SHIFT);
}

/* Wait/wake/clock, injectable so tests can drive every interleaving. */
struct bhi_sync_ops {
	/* Sleep while *word == expect, until deadline_ns (absolute, on the
	 * clock of now(); BH_FOREVER = no deadline). Returns 0 (woken or
	 * spurious), -EINTR, -EAGAIN (word != expect) or -ETIMEDOUT. */
	int (*wait)(void *ctx, _Atomic uint32_t *word, uint32_t expect,
		    uint64_t deadline_ns);
	void (*wake)(void *ctx, _Atomic uint32_t *word);
	uint64_t (*now)(void *ctx);
	/* Optional observers, called under the queue lock (NULL: none), so a
	 * checker can keep an exact shadow of the FIFO: a node joined the
	 * queue; a node left it holding its permits (handoff or a won race). */
	void (*queued)(void *ctx, const struct bh_qlink *l);
	void (*granted)(void *ctx, const struct bh_qlink *l);
	void *ctx;
};

extern const struct bhi_sync_ops bhi_futex_ops;
extern const struct bhi_sync_ops bhi_futex_shared_ops;

/* Per-thread counters: slot i belongs to the live thread with index i, so a
 * plain load+store counts without a locked instruction. */
enum bhi_counter { BHI_ACQUIRED, BHI_RELEASED, BHI_REJECTED, BHI_NCOUNTERS };

struct bhi_slot {
	_Alignas(BHI_CACHELINE) _Atomic uint64_t c[BHI_NCOUNTERS];
	/* This thread's last view of the word: the fast path's CAS guesses
	 * it instead of loading the word first (a load of the line right
	 * before a locked RMW on it costs ~3 ns on x86). Only a CAS that
	 * succeeds, or a real load, ever decides anything. */
	_Atomic uint64_t hint;
	/* BH_TRACK_HOLD: permits this thread holds, and since when it went
	 * from holding none (0: no clean pair to measure). Owner-only; gen
	 * tells a recycled slot's new owner to start afresh. */
	uint64_t held, hold_start, hold_gen;
	/* Automatic samples this thread is handing to the bulkhead's sink
	 * now (src/core/sample_hook.h); detaching waits for 0. */
	_Atomic uint32_t in_sink;
};

/* Lock-free recording side of struct bh_hist (see src/core/hist.c). */
struct bhi_hist {
	_Atomic uint64_t sum_ns;
	_Atomic uint64_t buckets[BH_HIST_BUCKETS];
};
#define BHI_HOLD_SHARDS 8 /* threads spread hold recordings over these */

void bhi_hist_add(struct bhi_hist *h, uint64_t ns);
void bhi_hist_read(const struct bhi_hist *h, struct bh_hist *out);

struct bhk_sink;

/* The waiter queue: struct bhi_qlist and bhi_qlist_*() (lib/list.h). */
BHI_LIST_DEFINE(bhi_qlist, struct bh_qlink, next, prev)

struct bulkhead {
	/* Line 1: what every fast path reads. */
	_Alignas(BHI_CACHELINE) _Atomic uint64_t word;
	uint64_t block_mask; /* word bits that stop a newcomer */
	uint32_t flags;
	uint32_t queue_cap;
	uint32_t nslots; /* exclusive slots; slots[nslots] is shared */
	_Atomic(struct bhk_sink *) sink; /* automatic samples go here (sample_hook.h) */
	_Atomic uint64_t gate_ns; /* BHI_GATED: admit while coarse clock < this */
	/* A host-wide handle (src/shm/): its state is in shared memory, this
	 * is the attachment, word is BHI_WORD_EXT and nslots is 0, so every
	 * fast path fails on values it loads anyway and the cold paths hand
	 * the call over. NULL for a process-local bulkhead. */
	struct bhs_att *ext;

	/* Line 2: the slow path. */
	_Alignas(BHI_CACHELINE) pthread_mutex_t lock;
	struct bhi_qlist queue; /* FIFO, under lock */
	const struct bhi_sync_ops *ops;
	uint64_t starve_ns;     /* unfair mode: at most one fair handoff per */
	uint64_t fair_after_ns; /* when the next one may happen */
	uint64_t spin_ns;       /* how long a head waiter polls before sleeping */
	uint32_t spin_iters;    /* the same in polls */
	bool short_holds;       /* releases come sooner than spin_ns after grants */
	uint64_t last_grant_ns; /* when the last handoff happened */
	_Atomic uint64_t timed_out, cancelled, over_released;

	uint64_t id;
	char name[BH_NAME_MAX];
	struct bhi_hist wait, wait_failed;
	struct bhi_hist *hold; /* BHI_HOLD_SHARDS of them with BH_TRACK_HOLD */
	struct bhi_layer *layer; /* src/core/layer.h; NULL for a plain bulkhead */

	struct bhi_slot slots[];
};

/* A layer loads the sink pointer at this offset (layer.h, sample_hook.h):
 * moving it means moving BHI_SINK_OFFSET with it. */
_Static_assert(offsetof(struct bulkhead, sink) == BHI_SINK_OFFSET,
	       "BHI_SINK_OFFSET (layer.h) must be where struct bulkhead keeps its sink");

/* Internal hooks (hidden symbols; tests and stress link the static core). */
void bhi_set_sync_ops(bulkhead_t *bh, const struct bhi_sync_ops *ops);
void bhi_set_spin_ns(bulkhead_t *bh, uint64_t ns);
void bhi_set_starve_ns(bulkhead_t *bh, uint64_t ns);
uint64_t bhi_word(const bulkhead_t *bh);
/* bh_stats into the first size bytes of an older layout (src/core/compat_0_1.c). */
int bhi_stats_prefix(const bulkhead_t *bh, void *out, size_t size);

/* The thread index (bhi_tindex) is declared in layer.h. */

BHI_COLD void bhi_count_slow(struct bulkhead *bh, enum bhi_counter c);
/* A counter summed over every slot (relaxed: statistics). */
uint64_t bhi_counter(const struct bulkhead *bh, enum bhi_counter c);
/* bhi_try_take, bhi_count_rejected, bhi_rejected, bhi_over_limit: the
 * pool's, in layer.h. */

/* The calling thread's own slot, or NULL when it has none yet (or more
 * threads are alive than the bulkhead has slots). */
static inline struct bhi_slot *bhi_my_slot(struct bulkhead *bh)
{
	uint32_t i = bhi_tindex - 1u;

	return BHI_LIKELY(i < bh->nslots) ? &bh->slots[i] : NULL;
}

/* Sole writer of its slot: relaxed load+store, no RMW. The reader sums
 * with relaxed loads; counters are statistics, not synchronisation. */
static inline void bhi_slot_add(_Atomic uint64_t *p)
{
	atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

static inline void bhi_count(struct bulkhead *bh, enum bhi_counter c)
{
	struct bhi_slot *s = bhi_my_slot(bh);

	if (s && !(bh->flags & BH_NO_STATS))
		bhi_slot_add(&s->c[c]);
	else if (!s)
		bhi_count_slow(bh, c);
}

#endif /* BH_INTERNAL_H */
