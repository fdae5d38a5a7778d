/*
 * OVERVIEW. libbulkhead adaptive limits: the bulkhead finds its own size from the
 * latency it measures.
 *
 * A static limit is right only for the conditions it was computed under.
 * A controller attached to a bulkhead watches how long calls take and
 * moves the bulkhead's limit (bh_set_limit: growing grants queued waiters,
 * shrinking never blocks and drains) between a floor and a ceiling.
 *
 * EXAMPLE.
 *
 *   bh_adaptive_t *ctl;
 *   if (bh_adaptive_attach(pay, NULL, &ctl) < 0) ...     // the defaults
 *   ...
 *   uint64_t t0 = bh_now_ns();
 *   int r = call_payment();
 *   bh_adaptive_sample(ctl, bh_now_ns() - t0,
 *                      r == 0 ? BH_OK : r == -ETIMEDOUT ? BH_DROPPED : BH_IGNORE);
 *   bh_release(pay, 1);
 *   ...
 *   bh_adaptive_detach(ctl);
 *
 * SAMPLES. Where the library already sees the end of the work it samples
 * by itself: a BH_TRACK_HOLD bulkhead's grant-to-release times, an
 * io_uring tracker's operations (SQE taken to final CQE; a final CQE with
 * -ECANCELED, -ETIME or -ETIMEDOUT counts as dropped, other errors are
 * ignored), and a thread pool's task run times (bh_adaptive_attach_pool).
 * bh_adaptive_sample is for everything else: BH_OK with the call's latency
 * (from grant, not from enqueue), BH_DROPPED for a sign of overload (a
 * timeout, a rejection or overload error from the dependency), BH_IGNORE
 * for a call that says nothing about the dependency's load (it failed
 * before any useful work: a bad request, a cancelled call). It may be
 * called before or after the matching bh_release.
 *
 * WINDOWS. Samples accumulate in a window; the limit is recomputed once per
 * window, by whichever sampling thread closes it (windows close after a
 * few round trips or a number of samples, whichever comes first). The
 * sampling path takes no lock and allocates nothing: each thread adds to
 * its own shard; a closer reads every shard and keeps what it read, so a
 * sample that races a close simply lands in the next window. Only the
 * closer calls bh_set_limit, so limit changes never race each other; that
 * closer takes the bulkhead's queue lock for the change, like any slow
 * path, so bh_adaptive_sample must not be called from a bh_async callback.
 *
 * KINDS OF BULKHEAD. Process-local bulkheads, pools and io_uring trackers;
 * host-wide ones (bh_shm_open), where each process may attach a controller
 * to its own handle, the first one moves the host's limit and the others
 * follow it until the mover detaches or dies; cluster bulkheads
 * (bh_cluster_open), where it moves the cap on this instance's share and
 * the global limit stays.
 *
 * THE APP-LIMITED GUARD uses the in-flight count read at sample time (the
 * peak over the window): a limit grows only when at least half of it was
 * in use.
 *
 * ALGORITHMS. The default (BH_ADAPTIVE_DEFAULT) is the library's own; the
 * published ones (Netflix AIMD, Vegas, Gradient2; Envoy's gradient
 * controller) are there to compare with and for those who want them. See
 * bh_adaptive_attach(3) and docs/adaptive.md.
 *
 * OWNERSHIP. bh_adaptive_attach allocates the controller (about 60 KB)
 * and sets the starting limit before it returns; bh_adaptive_detach frees
 * it (NULL is ignored) and leaves the limit where it is. Detach before
 * bh_destroy of the bulkhead, and let nobody call bh_adaptive_sample on the
 * controller during or after the detach. While a controller is attached,
 * only it should change the limit: a bh_set_limit from elsewhere is
 * overwritten at the next change.
 *
 * MEMORY ORDERING. None is promised to callers: a sample is a number, the
 * limit it leads to is published through bh_set_limit, and a sample that
 * races a window's close is counted in the next window. The limit's own
 * effect on waiters is the bulkhead's (bulkhead.h).
 *
 * THREADS, SIGNALS, CANCELLATION. bh_adaptive_sample may be called from
 * any number of threads at once (see WINDOWS), but not from a bh_async
 * callback, and is not async-signal-safe. No function is a cancellation
 * point; bh_adaptive_attach takes the bulkhead's lock once, and
 * bh_adaptive_detach may wait (yielding) for a sample in progress on
 * another thread.
 *
 * ERRORS. Every function that returns int returns 0 or a negative errno.
 * bh_adaptive_attach: -EINVAL (NULL bh or out, a bad configuration),
 * -EBUSY (a controller is attached already), -ENOMEM, -ENOSPC (a host-wide
 * bulkhead with every process slot taken). NULL handles: -EINVAL where a
 * function returns int; bh_adaptive_sample takes a valid handle (hot
 * path); bh_adaptive_detach ignores NULL.
 */
#ifndef BULKHEAD_ADAPTIVE_H
#define BULKHEAD_ADAPTIVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <bulkhead.h>
#include <bulkhead/pool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bh_adaptive bh_adaptive_t; /* opaque */

/* What a finished call says about the dependency. */
enum bh_outcome {
	BH_OK,      /* a latency sample */
	BH_DROPPED, /* overload: timeout, rejection, overload error; backs off */
	BH_IGNORE,  /* no sample (counted, nothing else) */
};

enum bh_adaptive_algo {
	BH_ADAPTIVE_DEFAULT = 0, /* the library's own: see bh_adaptive_attach(3) */
	BH_ADAPTIVE_AIMD,        /* Netflix AIMDLimit */
	BH_ADAPTIVE_VEGAS,       /* Netflix VegasLimit */
	BH_ADAPTIVE_GRADIENT2,   /* Netflix Gradient2Limit */
	BH_ADAPTIVE_ENVOY,       /* Envoy's adaptive concurrency gradient controller */
};

/* Automatic sample sources (bh_adaptive_config.sources). */
#define BH_ADAPTIVE_SRC_HOLD (1u << 0)  /* BH_TRACK_HOLD pairs and bh_record_hold */
#define BH_ADAPTIVE_SRC_URING (1u << 1) /* io_uring tracker: SQE taken to final CQE */
#define BH_ADAPTIVE_SRC_POOL (1u << 2)  /* thread pool: task run times */
#define BH_ADAPTIVE_SRC_MANUAL (1u << 31) /* none: only bh_adaptive_sample */

/*
 * Zero means "the default" in every field, so {0} (or a NULL config) is a
 * working setup: the library's algorithm, starting at the bulkhead's limit,
 * floor 2, ceiling max(1000, 4 x start) (at most BH_LIMIT_MAX), every
 * automatic source the bulkhead has. The struct grows only at its end,
 * together with a new symbol version of bh_adaptive_attach.
 */
struct bh_adaptive_config {
	enum bh_adaptive_algo algo;
	uint32_t min_limit;     /* floor; 0: 2 (AIMD 20, Vegas 1, Gradient2 20, Envoy 3),
	                         * or max_limit when that is set and lower */
	uint32_t max_limit;     /* ceiling; 0: see above (AIMD 200, Vegas 1000,
	                         * Gradient2 200, Envoy 1000) */
	uint32_t initial_limit; /* 0: the bulkhead's limit at attach */
	uint32_t sources;       /* BH_ADAPTIVE_SRC_*; 0: all the bulkhead has */
	uint32_t percentile;    /* window sample, % of OK latencies (Envoy: of
	                         * every sample); 0: 50; Netflix's: unused */
	uint64_t window_ns;     /* fixed window length; 0: the algorithm's (the
	                         * default: 4 round trips; Netflix 1 s; Envoy 100 ms) */
	uint64_t probe_interval_ns; /* baseline re-probe; 0: 10 s (Envoy 60 s),
	                             * jittered */
	uint64_t seed;          /* jitter; 0: chosen from the bulkhead */
};

/* Why the limit last changed (bh_adaptive_stats.reason). */
enum bh_adaptive_reason {
	BH_ADAPTIVE_START = 0, /* the starting limit */
	BH_ADAPTIVE_GROW,      /* latency at baseline and the limit in use */
	BH_ADAPTIVE_RECOVER,   /* doubling back towards the last good limit */
	BH_ADAPTIVE_QUEUEING,  /* latency above baseline: calls queue downstream */
	BH_ADAPTIVE_DROPS,     /* dropped calls in the window */
	BH_ADAPTIVE_PROBE,     /* pinned low to measure the unloaded latency */
	BH_ADAPTIVE_RESTORE,   /* probe over: the limit from before it */
	BH_ADAPTIVE_BASELINE,  /* latency did not follow the limit: new baseline */
	BH_ADAPTIVE_NREASONS
};

struct bh_adaptive_stats {
	uint32_t limit;           /* what the controller last set */
	uint32_t min_limit, max_limit;
	uint32_t reason;          /* enum bh_adaptive_reason of the last change */
	uint64_t changed_ns;      /* when (bh_now_ns clock) */
	uint64_t baseline_ns;     /* unloaded latency estimate (0: none yet) */
	uint64_t sample_ns;       /* last window's latency sample */
	uint64_t window_ok;       /* last window: OK samples */
	uint64_t window_dropped;  /* last window: dropped samples */
	uint32_t window_peak;     /* last window: most in flight seen */
	uint32_t probing;         /* 1 while the limit is pinned for a probe */
	uint64_t windows;         /* windows closed */
	uint64_t changes;         /* limit changes made */
	uint64_t probes;          /* probes started */
	/* Every call to bh_adaptive_sample (and every automatic sample) counts
	 * exactly once in one of these; windowed is how many OK and dropped
	 * samples the closed windows used, so ok + dropped - windowed are
	 * waiting in the open window. */
	uint64_t ok, dropped, ignored;
	uint64_t discarded;       /* below the algorithm's minimum, or from before a probe */
	uint64_t windowed;
};

/* One limit change (bh_adaptive_history). */
struct bh_adaptive_change {
	uint64_t t_ns;   /* bh_now_ns clock */
	uint32_t limit;
	uint32_t reason; /* enum bh_adaptive_reason */
};
#define BH_ADAPTIVE_HISTORY 64 /* changes remembered */

/* Attach a controller to bh (one per bulkhead). 0 and *out, or -EINVAL
 * (bad config, NULL), -EBUSY (one is attached already), -ENOMEM. */
BH_API int bh_adaptive_attach(bulkhead_t *bh, const struct bh_adaptive_config *cfg,
			      bh_adaptive_t **out);

/* The same for a thread pool: the controller moves the pool's admission
 * limit (running plus queued tasks; ceiling max_threads + queue_capacity)
 * from its tasks' run times. */
BH_API int bh_adaptive_attach_pool(bh_pool_t *pool, const struct bh_adaptive_config *cfg,
				   bh_adaptive_t **out);

/* One finished call: rtt_ns from grant to completion. Lock-free. */
BH_API void bh_adaptive_sample(bh_adaptive_t *a, uint64_t rtt_ns, enum bh_outcome outcome);

/* Stop adapting and free the controller; the limit stays where it is.
 * Waits for automatic samples in progress; nobody may call
 * bh_adaptive_sample on it any more. NULL is ignored. */
BH_API void bh_adaptive_detach(bh_adaptive_t *a);

/* A snapshot (one window's figures read together). 0 or -EINVAL. */
BH_API int bh_adaptive_stats(const bh_adaptive_t *a, struct bh_adaptive_stats *out);

/* The last changes, oldest first, at most max of them. Returns how many
 * were written (0 ... BH_ADAPTIVE_HISTORY), or -EINVAL. */
BH_API int bh_adaptive_history(const bh_adaptive_t *a, struct bh_adaptive_change *out,
			       unsigned max);

/* "grow", "queueing", ...; NULL for an unknown reason. */
BH_API const char *bh_adaptive_reason_name(unsigned reason);

/*
 * The controllers in the Prometheus text format (0.0.4), label
 * name="<bulkhead or pool name>": bulkhead_adaptive_limit,
 * _baseline_seconds, _sample_seconds, _window_peak, _probing,
 * _last_change_reason (1, with a reason label) (gauges);
 * bulkhead_adaptive_changes_total (reason label), _windows_total,
 * _samples_total (outcome label) (counters). Scraped, _limit is the limit
 * over time. Returns the length of the whole text (>= len: cut, call again
 * with more room), or -EINVAL, -ENOMEM.
 */
BH_API ssize_t bh_adaptive_metrics_prometheus(bh_adaptive_t *const *ctl, size_t n, char *buf,
					      size_t len);

#ifdef __cplusplus
}
#endif
#endif /* BULKHEAD_ADAPTIVE_H */
