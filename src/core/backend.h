/* Private to libbulkhead: what the core shares with a second implementation
 * of its state that it dispatches to, the host-wide segment (src/shm/). The
 * core's files include it through internal.h; src/shm/ includes it instead
 * of internal.h, and nothing else does (an optional layer includes
 * layer.h: docs/design.md, "What a layer may include").
 *
 * The segment keeps the core's word, so the encoding has one home, here:
 * the layout, its accessors and BHI_WORD_EXT. With it the pieces both sides
 * use: the counters' names and the histograms' recording side (the waits
 * are lib/futex.h's). struct bulkhead stays out: the backend builds, reads and
 * frees its handles through the functions at the end, and reads the
 * attachment at an offset the core asserts (internal.h), so its fast paths
 * pay what they paid when they saw the struct; its automatic samples go
 * through sample_hook.h, as a layer's do. */
#ifndef BH_CORE_BACKEND_H
#define BH_CORE_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "bulkhead.h"
#include "lib/compiler.h"
#include "lib/futex.h" /* struct bhi_sync_ops: the waits both sides sleep with */

/*
 * The state word (see docs/design.md):
 *
 *   bits  0..20  W_BIAS - avail   permits free now, counted down from W_BIAS
 *                                 (avail may be negative after a shrink)
 *   bits 21..40  held             permits held now (in_flight)
 *   bits 41..60  queued           waiters in the FIFO queue
 *   bit  61      W_STARVING       unfair mode: the head waited too long, the
 *                                 next release hands off to it
 *   bit  62      W_WOKEN          unfair mode: the head was woken to compete
 *   bit  63      W_CLOSED
 *
 * limit = avail + held. Everything a decision needs is in one load, and the
 * fast paths decide with single tests of it: a take of one permit may go
 * ahead when none of W_TAKE1_BLOCK is set (bit 20 of the low field is clear
 * exactly when avail >= 1), a give of one when nobody is queued and some
 * bit of W_HELD_MASK is set (the exact over-release check). A take adds n * W_TAKE_ONE to the word, a
 * give subtracts it; neither field ever carries into the next: avail stays
 * within [-BH_LIMIT_MAX, BH_LIMIT_MAX] and held within [0, BH_LIMIT_MAX].
 */
#define W_AVAIL_BITS 21
#define W_AVAIL_MASK ((1ull << W_AVAIL_BITS) - 1)
#define W_BIAS (1ull << 20)
#define W_HELD_SHIFT 21
#define W_HELD_ONE (1ull << W_HELD_SHIFT)
#define W_HELD_MASK (0xfffffull << W_HELD_SHIFT)
#define W_NQ_SHIFT 41
#define W_NQ_ONE (1ull << W_NQ_SHIFT)
#define W_NQ_MASK (0xfffffull << W_NQ_SHIFT)
#define W_STARVING (1ull << 61)
#define W_WOKEN (1ull << 62)
#define W_CLOSED (1ull << 63)

/* What taking one permit adds to the word: one less free, one more held. */
#define W_TAKE_ONE (1ull + W_HELD_ONE)
/* Any of these set and a take of one permit goes to the full check:
 * closed, starving, someone queued, or no permit free (W_BIAS). */
#define W_TAKE1_BLOCK (W_CLOSED | W_STARVING | W_NQ_MASK | W_BIAS)

/* The word of a host-wide handle: closed, one waiter queued and nothing
 * free or held (limit 0), so no fast path takes, and a release goes to
 * release_slow (see struct bulkhead). */
#define BHI_WORD_EXT (W_CLOSED | W_NQ_ONE | W_BIAS)

static inline int64_t w_avail(uint64_t w)
{
	return (int64_t)W_BIAS - (int64_t)(w & W_AVAIL_MASK);
}
/* Permits held now: in_flight. */
static inline int64_t w_held(uint64_t w)
{
	return (int64_t)((w & W_HELD_MASK) >> W_HELD_SHIFT);
}
static inline uint32_t w_limit(uint64_t w)
{
	return (uint32_t)(w_avail(w) + w_held(w));
}
static inline uint32_t w_nq(uint64_t w)
{
	return (uint32_t)((w & W_NQ_MASK) >> W_NQ_SHIFT);
}
static inline uint64_t w_make(int64_t avail, uint32_t limit, uint32_t nq)
{
	return (uint64_t)((int64_t)W_BIAS - avail) |
	       ((uint64_t)((int64_t)limit - avail) << W_HELD_SHIFT) |
	       ((uint64_t)nq << W_NQ_SHIFT);
}
/* n permits taken, or given back. */
static inline uint64_t w_take(uint64_t w, uint32_t n)
{
	return w + (uint64_t)n * W_TAKE_ONE;
}
static inline uint64_t w_give(uint64_t w, uint32_t n)
{
	return w - (uint64_t)n * W_TAKE_ONE;
}
/* The limit set to limit: the permits held stay, the free ones follow. */
static inline uint64_t w_with_limit(uint64_t w, uint32_t limit)
{
	return (w & ~W_AVAIL_MASK) | (uint64_t)((int64_t)W_BIAS - ((int64_t)limit - w_held(w)));
}

/* The counters of a thread slot (the core's struct bhi_slot, the segment's
 * struct bhs_slot), by index. */
enum bhi_counter { BHI_ACQUIRED, BHI_RELEASED, BHI_REJECTED, BHI_NCOUNTERS };

/* Lock-free recording side of struct bh_hist (see src/core/hist.c). */
struct bhi_hist {
	_Atomic uint64_t sum_ns;
	_Atomic uint64_t buckets[BH_HIST_BUCKETS];
};

void bhi_hist_add(struct bhi_hist *h, uint64_t ns);
void bhi_hist_read(const struct bhi_hist *h, struct bh_hist *out);

/* ---- a host-wide handle (src/core/bulkhead.c) -------------------------------
 *
 * A core handle whose calls all land in the backend: word BHI_WORD_EXT and
 * no slots, its attachment in ext (see struct bulkhead). */

struct bhs_att;

/* A zeroed handle, not yet bound (NULL: no memory). */
bulkhead_t *bhi_ext_alloc(void);
/* Bind it to attachment a, whose segment's word is word: the handle's own
 * word, no slots, the futex ops, the lock, the attachment's flags and name,
 * and a new id. Before the handle is shared. */
void bhi_ext_init(bulkhead_t *bh, struct bhs_att *a, _Atomic uint64_t *word, uint32_t flags,
		  const char *name);
/* Free a handle from bhi_ext_alloc, bound or not. */
void bhi_ext_free(bulkhead_t *bh);

/* Where struct bulkhead keeps its id, its flags, the attachment and the
 * segment's word, all in its first cache line, for the backend's fast paths
 * to load as the core does (internal.h asserts them; the sample sink's
 * place, BHI_SINK_OFFSET, is layer.h's). */
#define BHI_ID_OFFSET 8
#define BHI_FLAGS_OFFSET 16
#if UINTPTR_MAX > UINT32_MAX
#define BHI_EXT_OFFSET 48
#else
#define BHI_EXT_OFFSET 40
#endif
#define BHI_EXT_WORD_OFFSET (BHI_EXT_OFFSET + sizeof(void *))

/* A host-wide handle's attachment (written once, before it is shared). */
static inline struct bhs_att *bhi_ext_of(const bulkhead_t *bh)
{
	struct bhs_att *const *p = (const void *)((const char *)bh + BHI_EXT_OFFSET);

	return *p;
}

/* A host-wide handle's segment word: one load from the handle, where the
 * attachment's pointer to its segment would be two (written once, before
 * the handle is shared). */
static inline _Atomic uint64_t *bhi_ext_word(const bulkhead_t *bh)
{
	_Atomic uint64_t *const *p = (const void *)((const char *)bh + BHI_EXT_WORD_OFFSET);

	return *p;
}

/* The handle's id: no other handle, freed or alive, ever had it. */
static inline uint64_t bhi_id_of(const bulkhead_t *bh)
{
	return *(const uint64_t *)(const void *)((const char *)bh + BHI_ID_OFFSET);
}

/* The handle's BH_* flags (with the core's own bits). */
static inline uint32_t bhi_flags_of(const bulkhead_t *bh)
{
	return *(const uint32_t *)(const void *)((const char *)bh + BHI_FLAGS_OFFSET);
}

#endif /* BH_CORE_BACKEND_H */
