/*
 * Private to libbulkhead: how the core hands the latencies it measures
 * anyway (BH_TRACK_HOLD's grant-to-release, the io_uring tracker's SQE to
 * final CQE, a pool's task run times) to whatever is attached to a
 * bulkhead - the adaptive controller (src/adaptive/).
 *
 * A bulkhead has one sink pointer. Every hook starts with one relaxed load
 * of it, which is NULL unless a controller is attached, so a bulkhead
 * without one pays a predictable branch on a line the call has just
 * touched; everything else is out of line.
 *
 * Detaching must not free a sink a hook is still calling. A hook marks its
 * thread's slot busy (seq_cst), then reloads the pointer (seq_cst); detach
 * clears the pointer (seq_cst), then waits for every slot to be idle. In
 * the single order of those four operations either the hook sees NULL or
 * detach sees the slot busy, so no call starts after detach looked, and
 * the release that ends a call pairs with detach's load of the slot.
 */
#ifndef BH_SAMPLE_HOOK_H
#define BH_SAMPLE_HOOK_H

#include <errno.h>
#include <sched.h>

#include "internal.h"
#include "layer.h" /* struct bhk_sink, bhk_attach, bhk_detach */

/* Whether anything is attached (to decide whether to read a clock). */
static inline bool bhk_attached(const struct bulkhead *bh)
{
	return atomic_load_explicit(&((struct bulkhead *)bh)->sink, memory_order_relaxed) != NULL;
}

/* The calling thread's slot, or the shared one. */
static inline _Atomic uint32_t *bhk_busy_word(struct bulkhead *bh)
{
	uint32_t t = bhi_tindex ? bhi_tindex : bhi_tindex_assign();

	return &bh->slots[t - 1u < bh->nslots ? t - 1u : bh->nslots].in_sink;
}

static BHI_COLD __attribute__((unused)) void bhk_emit_slow(struct bulkhead *bh, unsigned src,
							 uint64_t ns, int outcome)
{
	_Atomic uint32_t *busy = bhk_busy_word(bh);
	struct bhk_sink *k;

	atomic_fetch_add_explicit(busy, 1, memory_order_seq_cst);
	k = atomic_load_explicit(&bh->sink, memory_order_seq_cst);
	if (k && (k->sources & src))
		k->fn(k, ns, outcome);
	/* release: our last use of k happens before detach's load sees 0 */
	atomic_fetch_sub_explicit(busy, 1, memory_order_release);
}

/* One automatic sample of ns from source src. */
static inline void bhk_emit(struct bulkhead *bh, unsigned src, uint64_t ns, int outcome)
{
	if (BHI_UNLIKELY(bhk_attached(bh)))
		bhk_emit_slow(bh, src, ns, outcome);
}

#endif /* BH_SAMPLE_HOOK_H */
