/* struct bh_stats as libbulkhead 0.1 released it, frozen: what
 * bh_stats@LIBBULKHEAD_0.1 fills for programs built against 0.1. The
 * struct keeps its released name, so that the ABI gate compares this
 * layout with the baseline's. Never edit this file. */
#ifndef BH_COMPAT_STATS_0_1_H
#define BH_COMPAT_STATS_0_1_H
#include <stdint.h>

#define BH_HIST_BUCKETS_0_1 (2 + (36 - 10) * (1 << 4)) /* 418, as 0.1 computed it */

struct bh_hist {
	uint64_t count;  /* observations: the sum of buckets[] */
	uint64_t sum_ns; /* their total, in nanoseconds */
	uint64_t buckets[BH_HIST_BUCKETS_0_1];
};

struct bh_stats {
	uint64_t limit, in_flight, queued;
	uint64_t acquired;      /* successful acquires (calls, not permits) */
	uint64_t rejected;      /* -EBUSY: no permit and no queue room */
	uint64_t timed_out;     /* -ETIMEDOUT after queueing */
	uint64_t cancelled;     /* waiters removed by pthread_cancel or bh_cancel_async */
	uint64_t over_released; /* -EOVERFLOW from bh_release */
	uint64_t released;      /* successful releases (calls) */
	struct bh_hist wait;        /* queued acquires: enqueue to grant */
	struct bh_hist wait_failed; /* queued acquires: enqueue to timeout, close, cancel */
	struct bh_hist hold;        /* a thread's first acquire to its last release
	                             * (BH_TRACK_HOLD), and bh_record_hold */
};

#endif /* BH_COMPAT_STATS_0_1_H */
