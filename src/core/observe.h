/* The observers the protocol reports to (observe.c): hold times, wait
 * times and the over-release count. They read and write only their own
 * fields, so they can change without touching word.c or queue.c. Private
 * to the core's files. */
#ifndef BH_CORE_OBSERVE_H
#define BH_CORE_OBSERVE_H

#include "internal.h"

/* BH_TRACK_HOLD: the calling thread took n permits / gave n back. Out of
 * line but not cold: GCC 12 takes a cold call in the fast paths' success
 * block, even behind an unlikely flag test, as a sign that the whole block
 * is rarely run, and moves the successful take and give into .text.cold
 * (a taken jump to another page on every uncontended pair). */
__attribute__((noinline)) void bhi_hold_begin(struct bulkhead *bh, uint32_t n);
__attribute__((noinline)) void bhi_hold_end(struct bulkhead *bh, uint32_t n);
/* A queued waiter's wait ended with result (0: granted). */
void bhi_record_wait(struct bulkhead *bh, uint64_t enqueued_ns, int result);
/* A release found no room for its permits: count it, return -EOVERFLOW. */
BHI_COLD int bhi_over_release(struct bulkhead *bh);

#endif /* BH_CORE_OBSERVE_H */
