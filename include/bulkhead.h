/*
 * libbulkhead - keep one slow dependency from sinking a whole server.
 *
 * OVERVIEW. A bulkhead caps how many calls to one dependency are in flight
 * at once (max_concurrent permits), lets a bounded number more wait in a
 * FIFO queue (queue_capacity), and rejects the rest at once with -EBUSY.
 *
 * Permits, the number of queued waiters and the flag bits live in one 64-bit
 * atomic word. Fast paths (a free permit, a release nobody waits for) are one
 * atomic read-modify-write: no lock, no syscall, no allocation. Waiters sleep
 * on their own futex word in an explicit FIFO queue; a release hands permits
 * to the head waiter(s) and wakes exactly those.
 *
 * EXAMPLE.
 *
 *   bulkhead_t *pay;
 *   struct bh_config cfg = { .max_concurrent = 16, .queue_capacity = 32 };
 *   if (bh_create(&cfg, &pay) < 0) ...
 *   int r = bh_acquire(pay, 1, bh_now_ns() + 10 * BH_MSEC);
 *   if (r == 0) { call_payment(); bh_release(pay, 1); }
 *   else if (r == -EBUSY || r == -ETIMEDOUT) shed_load();
 *
 * OWNERSHIP. bh_create allocates the bulkhead (the name is copied: cfg may
 * go once it returns); bh_destroy frees it, when nobody is queued on it and
 * no other call on it is running (bh_close first fails every waiter;
 * permits still held are simply forgotten). Permits are
 * counted, not owned: any thread may release what another acquired, and a
 * release of more than is held fails with -EOVERFLOW and changes nothing.
 * An async node (struct bh_async) is the caller's memory; the bulkhead
 * uses it from bh_acquire_async returning 1 until its callback has run or
 * bh_cancel_async returned 1.
 *
 * MEMORY ORDERING. An acquire that succeeds synchronizes with the release
 * that freed its permits, whether it took them itself or had them handed
 * over: what the previous holder wrote before bh_release is visible to the
 * new holder, as with a semaphore. An async node's callback with 0 comes
 * after that release the same way. Statistics (bh_stats and the metrics)
 * are counters and carry no ordering.
 *
 * THREADS, SIGNALS, CANCELLATION. Every function but bh_destroy may be
 * called on one bulkhead from any number of threads at once. A waiting
 * bh_acquire is never cut short by a signal (no -EINTR: the wait resumes
 * with the same absolute deadline). bh_acquire is a cancellation point only
 * while it waits: a cancelled waiter leaves the queue holding nothing (a
 * grant that raced the cancellation goes to the next waiter); a call that
 * takes its permits or fails at once leaves a pending request to the next
 * cancellation point. No function is async-signal-safe (the slow paths take
 * a mutex). An async node's callback runs on the thread that granted or
 * failed it, under the bulkhead's internal lock: it must be short and must
 * not call into the same bulkhead.
 *
 * ERRORS. Every function returns 0 (or a count) on success and a negative
 * errno value on failure. The library never prints, never sets errno and
 * never aborts on bad input: a NULL handle or required pointer is -EINVAL
 * (NULL from a function that returns a pointer; ignored by bh_destroy),
 * except on the per-call hot paths (bh_try_acquire, bh_acquire, bh_release,
 * bh_record_hold, bh_hist_record), where a valid handle is a precondition,
 * so that the uncontended acquire and release stay one compare-and-swap
 * each. When more than one error applies, the first in this order is
 * returned: invalid arguments (-EINVAL), closed (-ESHUTDOWN), n above the
 * current limit (-EINVAL), no room (-EBUSY). See bulkhead(7) and
 * docs/design.md.
 */
#ifndef BULKHEAD_H
#define BULKHEAD_H

#include <stdint.h>

#include <bulkhead/version.h> /* BH_VERSION_*, written by configure */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define BH_API __attribute__((visibility("default")))
#else
#define BH_API
#endif

typedef struct bulkhead bulkhead_t; /* opaque */

/* ABI: read by bh_create; grows only at the end, with a new symbol version
 * of bh_create that reads the old size for old programs (abi/README.md). */
struct bh_config {
	uint32_t max_concurrent; /* permits, 1 ... BH_LIMIT_MAX */
	uint32_t queue_capacity; /* waiters allowed; 0 = never wait; BH_QUEUE_UNBOUNDED
	                          * (values above BH_QUEUE_MAX mean BH_QUEUE_MAX) */
	uint32_t flags;          /* BH_FAIR, BH_TRACK_HOLD, BH_NO_STATS */
	const char *name;        /* optional, copied; used in exports. NULL: "bulkhead-<id>" */
};

/* Strict FIFO: while anyone is queued, nobody new takes a permit ahead of
 * them (bh_try_acquire included). Without it a newcomer may take a free
 * permit, queued waiters are still served FIFO among themselves, and a head
 * waiter that has waited more than about a millisecond is served by direct
 * handoff (eventual fairness). */
#define BH_FAIR (1u << 0)

/* Record how long permits are held in stats.hold. Costs two clock reads per
 * hold. A hold is a thread's: it runs from the acquire that takes the
 * thread's first permit of this bulkhead (it held none) to the release that
 * gives back its last, so nested acquires make one hold; a release of more
 * than the thread acquired (permits taken on another thread) measures
 * nothing. Record other holds with bh_record_hold. */
#define BH_TRACK_HOLD (1u << 1)

/* Do not count acquired/released/rejected at all, which saves the fast
 * paths their per-thread counting (the gauges, the waits' histograms and
 * the other counters remain). */
#define BH_NO_STATS (1u << 2)

#define BH_NAME_MAX 64 /* bytes in a name, with its NUL */

#define BH_QUEUE_UNBOUNDED UINT32_MAX
#define BH_FOREVER UINT64_MAX
#define BH_LIMIT_MAX 0xfffffu /* largest max_concurrent (1048575) */
#define BH_QUEUE_MAX 0xfffffu /* most waiters one bulkhead queues */

#define BH_USEC 1000ull
#define BH_MSEC 1000000ull
#define BH_SEC 1000000000ull

/*
 * A latency histogram: log-linear buckets, 16 per power of two, from 1.024 us
 * to 68.7 s (bucket 0 holds values under 1.024 us, the last one values from
 * 68.7 s up). A bucket's upper bound is at most 6.25% above its lower bound,
 * so a quantile estimate (the middle of its bucket) is within 3.2% of a value
 * actually observed at that rank. Histograms of the same layout add up
 * bucket by bucket (bh_hist_merge).
 */
#define BH_HIST_SUB_BITS 4
#define BH_HIST_MIN_SHIFT 10 /* 1024 ns */
#define BH_HIST_MAX_SHIFT 36 /* 68.7 s */
#define BH_HIST_BUCKETS \
	(2 + (BH_HIST_MAX_SHIFT - BH_HIST_MIN_SHIFT) * (1 << BH_HIST_SUB_BITS))

/* ABI: frozen (a part of struct bh_stats; callers keep their own). */
struct bh_hist {
	uint64_t count;  /* observations: the sum of buckets[] */
	uint64_t sum_ns; /* their total, in nanoseconds */
	uint64_t buckets[BH_HIST_BUCKETS];
};

/* A snapshot. limit, in_flight and queued are read at one instant (one load
 * of the state word); counters and histograms are read right after, each
 * exact and monotonic. ABI: the fields here stay; once a version is
 * released, the struct grows only at the end and only together with a new
 * symbol version of bh_stats, while the old version keeps filling the old
 * layout: a program built against an older header keeps getting it
 * (abi/README.md; the ABI gate in make check enforces it). */
struct bh_stats {
	uint64_t limit, in_flight, queued;
	uint64_t acquired;      /* successful acquires (calls, not permits) */
	uint64_t rejected;      /* -EBUSY: no permit and no queue room */
	uint64_t timed_out;     /* -ETIMEDOUT after queueing */
	uint64_t cancelled;     /* waiters removed by pthread_cancel or bh_cancel_async */
	uint64_t over_released; /* -EOVERFLOW from bh_release, and cancelled waiters'
	                         * permits found already given back (bh_acquire(3)) */
	uint64_t released;      /* successful releases (calls); derived from the
	                         * takes and the permits held, see bh_stats(3) */
	struct bh_hist wait;        /* queued acquires: enqueue to grant */
	struct bh_hist wait_failed; /* queued acquires: enqueue to timeout, close, cancel */
	struct bh_hist hold;        /* BH_TRACK_HOLD only: a thread's first acquire
	                             * to its last release, and bh_record_hold */
	/* Host-wide bulkheads (bulkhead/shm.h); 0 for a process-local one. */
	uint64_t reclaimed; /* permits taken back from processes that died holding them */
	uint64_t processes; /* processes attached now */
};

/* Create a bulkhead. Returns 0 and sets *out, or -EINVAL (cfg or out NULL,
 * max_concurrent out of range, an unknown flag), -ENAMETOOLONG (a name of
 * BH_NAME_MAX bytes or more), -ENOMEM. */
BH_API int bh_create(const struct bh_config *cfg, bulkhead_t **out);

/* Free a bulkhead. Nobody may be waiting on it or use it afterwards: close
 * it and let every waiter return first. NULL is ignored. */
BH_API void bh_destroy(bulkhead_t *bh);

/* Take n permits if they are free now; never waits. 0, or -EBUSY, -ESHUTDOWN,
 * -EINVAL (n == 0 or n > limit). bh must be valid (a hot path). */
BH_API int bh_try_acquire(bulkhead_t *bh, uint32_t n);

/* Take n permits, waiting in the FIFO queue until deadline_ns (absolute,
 * CLOCK_MONOTONIC, see bh_now_ns; BH_FOREVER waits forever; a deadline
 * already past behaves like bh_try_acquire). 0, or -EBUSY (queue full),
 * -ETIMEDOUT, -ESHUTDOWN, -EINVAL. A cancellation point only while it
 * sleeps in the queue (a call that succeeds or fails at once leaves a
 * pending cancellation pending). bh must be valid (a hot path). */
BH_API int bh_acquire(bulkhead_t *bh, uint32_t n, uint64_t deadline_ns);

/* Give back n permits. -EOVERFLOW (and nothing changes) when that would
 * return more permits than are held; -EINVAL when n == 0 or > BH_LIMIT_MAX.
 * bh must be valid (a hot path). */
BH_API int bh_release(bulkhead_t *bh, uint32_t n);

/* Fail every queued waiter and every later acquire with -ESHUTDOWN; releases
 * keep working so holders drain. -EALREADY when already closed. */
BH_API int bh_close(bulkhead_t *bh);

/* Change max_concurrent. Growing grants queued waiters at once; shrinking
 * never blocks and takes effect as holders release. Queued waiters asking
 * for more than the new limit fail with -EINVAL. */
BH_API int bh_set_limit(bulkhead_t *bh, uint32_t max_concurrent);

/* Fill *out (about 10 KB: three histograms). 0, or -EINVAL (bh or out is
 * NULL). */
BH_API int bh_stats(const bulkhead_t *bh, struct bh_stats *out);

/* The three gauges alone, read at one instant (one load of the state word):
 * cheap enough for every turn of an event loop, small enough for any stack.
 * The struct never grows. */
struct bh_gauges {
	uint64_t limit, in_flight, queued; /* as in struct bh_stats */
};

/* Fill *out. 0, or -EINVAL (bh or out is NULL). Lock-free, no syscall. */
BH_API int bh_gauges(const bulkhead_t *bh, struct bh_gauges *out);

/* The bulkhead's name (valid until bh_destroy; NULL only for a NULL bh). */
BH_API const char *bh_name(const bulkhead_t *bh);

/* Add a hold time measured by the caller (e.g. from submission to final
 * completion of an asynchronous operation) to stats.hold, which only a
 * BH_TRACK_HOLD bulkhead keeps (without it the time goes only to an
 * attached adaptive controller). bh must be valid (a hot path). */
BH_API void bh_record_hold(bulkhead_t *bh, uint64_t ns);

/* Histograms. record and merge are not atomic (use them on private copies;
 * the library records its own lock-free). record: h must be valid (a hot
 * path). merge: 0, or -EINVAL (a NULL histogram). quantile: q in [0, 1],
 * returns ns (0 for an empty or NULL histogram, or a NaN q). bounds: the
 * bucket's [lower, upper) in ns (either pointer may be NULL). */
BH_API void bh_hist_record(struct bh_hist *h, uint64_t ns);
BH_API int bh_hist_merge(struct bh_hist *dst, const struct bh_hist *src);
BH_API uint64_t bh_hist_quantile(const struct bh_hist *h, double q);
BH_API unsigned bh_hist_bucket(uint64_t ns);
BH_API void bh_hist_bounds(unsigned bucket, uint64_t *lower_ns, uint64_t *upper_ns);

/* CLOCK_MONOTONIC in nanoseconds: the clock of every deadline. */
BH_API uint64_t bh_now_ns(void);

/*
 * Non-blocking acquisition for event loops. The caller owns the node and
 * keeps it alive until its callback has run or bh_cancel_async returned 1.
 *
 * bh_acquire_async returns 0 when the permits were taken at once (the
 * callback is not called), 1 when the node was queued, or -EBUSY,
 * -ESHUTDOWN, -EINVAL. A queued node's callback later runs exactly once,
 * with 0 (the permits are now the caller's), -ESHUTDOWN (closed) or -EINVAL
 * (the limit shrank below n). The callback runs on whichever thread granted
 * it, under the bulkhead's internal lock: it must be short and must not call
 * into the same bulkhead (write an eventfd, push onto a queue).
 */
struct bh_async;
typedef void bh_async_fn(struct bh_async *node, int result);

/* ABI: frozen, like struct bh_async: callers embed the node. */
struct bh_qlink { /* private to the library */
	struct bh_qlink *next, *prev;
	uint64_t enqueued_ns;
	uint32_t n;
	uint32_t kind;
};

struct bh_async {
	struct bh_qlink link; /* private */
	bh_async_fn *fn;
	void *data; /* the caller's */
};

BH_API int bh_acquire_async(bulkhead_t *bh, struct bh_async *node, uint32_t n,
			    bh_async_fn *fn, void *data);

/* Take a queued node back. 1: it was still queued, its callback will never
 * run. 0: it was not queued (already granted or failed; the callback has
 * run, and if it got 0 the caller owns the permits). node must have been
 * passed to bh_acquire_async with this bh, or be zeroed: a node queued on
 * another bulkhead is undefined behaviour. */
BH_API int bh_cancel_async(bulkhead_t *bh, struct bh_async *node);

#ifdef __cplusplus
}
#endif
#endif /* BULKHEAD_H */
