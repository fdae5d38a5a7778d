/* What the fast paths (word.c) call in the queue (queue.c): the slow halves
 * of acquire and release, entered when the word says no. Private to the
 * core's files. */
#ifndef BH_CORE_QUEUE_H
#define BH_CORE_QUEUE_H

#include "internal.h"

/* What a queued node is (struct bh_qlink's kind). KIND_NONE: not queued. */
enum { KIND_NONE, KIND_SYNC, KIND_ASYNC };

/* bh_acquire once the permits could not be taken at once. */
BHI_COLD int bhi_acquire_slow(struct bulkhead *bh, uint32_t n, uint64_t deadline);
/* bh_acquire_async once the permits could not be taken at once: queue node
 * (its fn and data are set), or refuse it. */
int bhi_acquire_async_slow(struct bulkhead *bh, struct bh_async *node, uint32_t n);
/* bh_release when someone queued needs a grant or a wake. */
BHI_COLD int bhi_release_slow(struct bulkhead *bh, uint32_t n);

#endif /* BH_CORE_QUEUE_H */
