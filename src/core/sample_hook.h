/*
 * Private to libbulkhead: how the core hands the latencies it measures
 * anyway (BH_TRACK_HOLD's grant-to-release, the io_uring tracker's SQE to
 * final CQE, a pool's task run times) to whatever is attached to a
 * bulkhead - the adaptive controller (src/adaptive/).
 *
 * A bulkhead has one sink pointer. Every hook starts with one relaxed load
 * of it, which is NULL unless a controller is attached, so a bulkhead
 * without one pays a predictable branch on a line the call has just
 * touched; everything else is out of line (bhk_emit_slow, in
 * src/core/observe.c).
 *
 * Layers include this file (the thread pool, the io_uring tracker), so it
 * sees only layer.h, never struct bulkhead: the load goes through the
 * pointer's offset, BHI_SINK_OFFSET, which internal.h asserts.
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

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "layer.h" /* struct bhk_sink, bhk_attach, bhk_detach, BHI_SINK_OFFSET */
#include "lib/compiler.h"

/* Whether anything is attached (to decide whether to read a clock). A
 * relaxed load, pairing with nothing: a sink seen here is used only after
 * bhk_emit_slow's seq_cst reload of the same pointer. */
static inline bool bhk_attached(const bulkhead_t *bh)
{
	_Atomic(struct bhk_sink *) *sink =
		(_Atomic(struct bhk_sink *) *)((char *)(bulkhead_t *)bh + BHI_SINK_OFFSET);

	return atomic_load_explicit(sink, memory_order_relaxed) != NULL;
}

/* Hand ns to the sink, if one is attached and wants src (the protocol
 * above). */
BHI_COLD void bhk_emit_slow(bulkhead_t *bh, unsigned src, uint64_t ns, int outcome);

/* One automatic sample of ns from source src. */
static inline void bhk_emit(bulkhead_t *bh, unsigned src, uint64_t ns, int outcome)
{
	if (BHI_UNLIKELY(bhk_attached(bh)))
		bhk_emit_slow(bh, src, ns, outcome);
}

#endif /* BH_SAMPLE_HOOK_H */
