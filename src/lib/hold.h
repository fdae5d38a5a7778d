/* BH_TRACK_HOLD's rules for one thread's hold of one bulkhead's permits,
 * shared by the core (src/core/observe.c) and the host-wide layer
 * (src/shm/fast.c), each of which keeps a struct bhi_hold per thread
 * index. Private (bhi_); include it as "lib/hold.h".
 *
 * A hold runs from the take that gives a thread its first permit of the
 * bulkhead to the give that takes back its last, so nested takes make one
 * hold. Permits are not tied to threads: a give on another thread than the
 * take's measures nothing, and leaves the taker's own count too high, so
 * that it would never reach 0 again. The taker finds out at its next take:
 * its count and the take together cannot be more than the bulkhead has in
 * flight, which the caller reads after the take (our own permits stay in
 * flight until we give them back, so only a give elsewhere makes the test
 * fail). It then starts afresh. */
#ifndef BHI_HOLD_H
#define BHI_HOLD_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/futex.h"

struct bhi_hold {
	uint64_t held;  /* the permits this thread took and has not given back */
	uint64_t start; /* when it went from none to some; 0: nothing to measure */
	uint64_t gen;   /* which owner of the thread index wrote this */
};

/* h as the record of the thread whose index owner is gen (bhi_tgen): what
 * a previous owner of the index left is dropped. */
static inline struct bhi_hold *bhi_hold_mine(struct bhi_hold *h, uint64_t gen)
{
	if (h->gen != gen) {
		h->held = 0;
		h->start = 0;
		h->gen = gen;
	}
	return h;
}

/* After a take of n permits; in_flight: the bulkhead's permits taken now,
 * read after the take. */
static inline void bhi_hold_take(struct bhi_hold *h, uint32_t n, uint64_t in_flight,
				 const struct bhi_sync_ops *sync)
{
	if (h->held + n > in_flight) /* some of ours were given back on another thread */
		h->held = 0;
	if (h->held == 0)
		h->start = bhi_sync_now(sync);
	h->held += n;
}

/* After a give of n permits: true, with the hold's length in *ns, when
 * this thread's hold ends. */
static inline bool bhi_hold_give(struct bhi_hold *h, uint32_t n, const struct bhi_sync_ops *sync,
				 uint64_t *ns)
{
	if (n > h->held) { /* permits taken on another thread */
		h->held = 0;
		h->start = 0;
		return false;
	}
	h->held -= n;
	if (h->held != 0 || h->start == 0)
		return false;
	*ns = bhi_sync_now(sync) - h->start;
	h->start = 0;
	return true;
}

#endif /* BHI_HOLD_H */
