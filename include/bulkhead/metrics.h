/*
 * OVERVIEW. libbulkhead metrics export: the Prometheus text exposition format (0.0.4)
 * and a compact JSON form, for one or many bulkheads.
 *
 * EXAMPLE.
 *
 *   bulkhead_t *all[] = { payment, inventory };
 *   struct bh_metric_set set = { .bulkheads = all, .n_bulkheads = 2 };
 *   char buf[64 * 1024];
 *   ssize_t n = bh_metrics_prometheus(&set, buf, sizeof(buf));
 *   if (n >= (ssize_t)sizeof(buf)) ... grow and call again
 *
 * Families (label name="<bulkhead name>"): bulkhead_limit, bulkhead_in_flight,
 * bulkhead_queued (gauges); bulkhead_{acquired,released,rejected,timed_out,
 * cancelled,over_released}_total (counters); bulkhead_wait_seconds (queued
 * acquires, enqueue to grant), bulkhead_wait_failed_seconds (enqueue to
 * timeout, close or cancel) and, with BH_TRACK_HOLD, bulkhead_hold_seconds
 * (histograms, one bucket boundary per power of two: le="0.000001023" ...
 * le="68.719476735", each 2^k - 1 ns exactly, since observations are whole
 * nanoseconds and a bucket holds those below 2^k).
 * Host-wide bulkheads (bulkhead/shm.h) add bulkhead_reclaimed_total (permits
 * taken back from processes that died) and bulkhead_processes (a gauge).
 *
 * Pools (label name="<pool name>"): bulkhead_pool_threads, _active_threads,
 * _queued, _largest_threads, _abandoned_running, _core_threads, _max_threads,
 * _queue_capacity (gauges); bulkhead_pool_{submitted,completed,abandoned,
 * discarded,caller_ran,rejected}_total (counters).
 *
 * OWNERSHIP. The set and the bulkheads and pools it names stay the
 * caller's; the functions only read them, and write into the caller's
 * buffer or stream (the text is cut to fit a buffer, NUL-terminated when
 * len > 0). Each call allocates one snapshot per bulkhead (about 10 KB) and
 * frees it before returning.
 *
 * MEMORY ORDERING. None is promised between the export and the bulkheads'
 * users: each bulkhead is read with bh_stats, its gauges at one instant,
 * its counters and histograms right after, so the figures of one bulkhead
 * are consistent with each other, not with what another thread did a
 * moment before.
 *
 * THREADS, SIGNALS, CANCELLATION. Safe from any thread while the bulkheads
 * and pools are in use (not while they are destroyed). Not
 * async-signal-safe (it allocates). The _file variants write with stdio,
 * whose calls may be cancellation points; the others are not.
 *
 * ERRORS. bh_metrics_prometheus and bh_metrics_json return the length of
 * the whole text (>= len: it was cut; call again with the returned length
 * + 1, and check again: the text may have grown in between, a counter
 * gaining a digit, so grow and retry in a loop, or leave some room).
 * Errors are negative errno values: -EINVAL (a NULL set, a NULL array
 * with a count above 0 or a NULL entry, a NULL buf with len > 0),
 * -ENOMEM, and -EIO from the _file variants when a write fails.
 */
#ifndef BULKHEAD_METRICS_H
#define BULKHEAD_METRICS_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include <bulkhead.h>
#include <bulkhead/pool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI: read by the exporters; grows only at the end, with new symbol
 * versions of the four functions below (abi/README.md). */
struct bh_metric_set {
	bulkhead_t *const *bulkheads;
	size_t n_bulkheads;
	bh_pool_t *const *pools; /* thread-pool bulkheads (bulkhead/pool.h) */
	size_t n_pools;
};

/* Write the text into buf (at most len bytes, NUL-terminated when len > 0).
 * Returns the length of the whole text, not counting the NUL — when it is
 * >= len the text was cut: call again with a larger buffer, in a loop, as
 * the text may grow between calls — or -EINVAL
 * (set NULL, a NULL entry in bulkheads or pools, buf NULL with len > 0),
 * -ENOMEM. */
BH_API ssize_t bh_metrics_prometheus(const struct bh_metric_set *set, char *buf, size_t len);
BH_API ssize_t bh_metrics_json(const struct bh_metric_set *set, char *buf, size_t len);

/* The same into a stream. 0, or -EINVAL, -ENOMEM, -EIO. */
BH_API int bh_metrics_prometheus_file(const struct bh_metric_set *set, FILE *f);
BH_API int bh_metrics_json_file(const struct bh_metric_set *set, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* BULKHEAD_METRICS_H */
