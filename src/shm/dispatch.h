/* What the core calls for a host-wide handle (bh->ext != NULL). The core's
 * fast paths never get here for a process-local bulkhead: a host-wide
 * handle's word and slot count make them fail on values they load anyway,
 * and only their cold continuations test bh->ext (see struct bulkhead). */
#ifndef BH_SHM_DISPATCH_H
#define BH_SHM_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "bulkhead.h"

bool bhs_take_fast(bulkhead_t *bh, uint32_t n);
int bhs_try_acquire(bulkhead_t *bh, uint32_t n);
int bhs_acquire(bulkhead_t *bh, uint32_t n, uint64_t deadline_ns);
int bhs_release(bulkhead_t *bh, uint32_t n);
int bhs_acquire_async(bulkhead_t *bh, struct bh_async *node, uint32_t n,
		      bh_async_fn *fn, void *data);
int bhs_cancel_async(bulkhead_t *bh, struct bh_async *node);
int bhs_close(bulkhead_t *bh);
int bhs_set_limit(bulkhead_t *bh, uint32_t max_concurrent);
void bhs_stats(const bulkhead_t *bh, struct bh_stats *out);
void bhs_gauges(const bulkhead_t *bh, uint64_t *limit, uint64_t *in_flight,
		uint64_t *queued);
void bhs_record_hold(bulkhead_t *bh, uint64_t ns);
void bhs_destroy(bulkhead_t *bh);
/* This thread forgets the handle and slot the fast paths used last
 * (fast.c): its thread index was given back (src/core/tindex.c), and with
 * it the slot, which the index's next owner uses; or it is a fork child's
 * only thread, whose process dropped the parent's slots. */
void bhs_forget_last(void);

#endif /* BH_SHM_DISPATCH_H */
