/* Private to libbulkhead's adaptive limits: the window a closer hands to an
 * algorithm, the algorithms' state, the controller object and the hidden
 * hooks the tests and the simulator use. docs/adaptive.md explains it. */
#ifndef BH_ADAPTIVE_BHA_H
#define BH_ADAPTIVE_BHA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "bulkhead/adaptive.h"

/* The longest latency a sample counts as (about 18 minutes): a window's
 * sums of at most 2^23 samples cannot wrap. Longer ones count as this. */
#define BHA_RTT_MAX (1ull << 40)

/* ---- what the controller moves ------------------------------------------ */

/* The one place a controller touches what it controls: a bulkhead today,
 * a host-wide or cluster-wide one later. in_flight is read on every sample
 * and must be one cheap load; set_limit runs once per window at most. */
struct bha_target {
	int (*set_limit)(void *ctx, uint32_t limit);
	uint32_t (*limit)(void *ctx);
	uint32_t (*in_flight)(void *ctx);
	void *ctx;
	/* NULL, or whether another controller moves the limit now (a
	 * host-wide bulkhead's follower); once per window at most. */
	bool (*follows)(void *ctx);
};

/* ---- one closed window ----------------------------------------------------- */

struct bha_window {
	uint64_t start_ns, end_ns;
	uint64_t ok, dropped;          /* samples */
	uint64_t ok_sum_ns, drop_sum_ns;
	uint64_t pct_ns;               /* the configured percentile (0: no sample) */
	uint64_t hist_n;               /* samples in the percentile's histogram */
	uint32_t peak;                 /* most in flight seen at a sample */
	uint32_t limit;                /* the limit in force while it was open */
	bool probe;                    /* a probe window: samples from after its start only */
};

/* What an algorithm decides at the end of a window. */
struct bha_verdict {
	uint32_t limit;         /* the limit from now on */
	uint32_t reason;        /* enum bh_adaptive_reason, when limit changed */
	/* The next window: it may close at window_ns with min_samples, must
	 * close at max_samples (approximately) or, with any sample, at
	 * window_max_ns. probe_samples != 0 makes it a probe window that
	 * closes at that many samples from requests started after it opened. */
	uint64_t window_ns, window_max_ns;
	uint32_t min_samples, max_samples, probe_samples;
};

/* ---- the algorithms (algo.c): pure, single-threaded, deterministic -------- */

struct bha_aimd {
	uint32_t limit;
};

struct bha_vegas {
	double est;
	uint64_t rtt_noload;
	uint32_t probe_count;
	double probe_jitter;
};

struct bha_gradient2 {
	double est;
	double long_rtt, long_sum; /* ExpAvgMeasurement(600, 10) */
	uint32_t long_count;
};

struct bha_envoy {
	uint32_t limit, deferred;
	uint64_t min_rtt, sample_rtt;
	uint64_t next_min_rtt_ns; /* when the next minRTT window starts */
	uint32_t consecutive_min;
	bool in_min_rtt;
};

struct bha_own {
	uint32_t limit, last_good;
	uint64_t base, rtt_est;      /* baseline; latest latency sample */
	uint64_t confirmed_ns;       /* a window last agreed with the baseline */
	uint64_t probe_due_ns;
	uint32_t restore;            /* the limit to go back to after a probe */
	bool in_probe;
	bool check;                  /* a cut waits to show whether latency follows */
	uint32_t check_limit;        /* the limit before that cut */
	uint64_t check_pct;          /* and the latency then */
	bool dcheck;                 /* the same for drops */
	uint32_t dcheck_limit;
	double dcheck_f, background; /* drop shares: at that cut; not ours to fix */
	uint32_t probe_fails;        /* probes in a row that learnt nothing */
	uint32_t floor_high;         /* windows at the floor with latency high */
};

struct bha_algo {
	enum bh_adaptive_algo kind;
	uint32_t min, max, pct;
	uint64_t window_ns;          /* fixed window length, or 0 */
	uint64_t probe_interval_ns;
	uint64_t rng;
	uint64_t baseline_ns, sample_ns; /* for the stats */
	union {
		struct bha_aimd aimd;
		struct bha_vegas vegas;
		struct bha_gradient2 g2;
		struct bha_envoy envoy;
		struct bha_own own;
	} u;
};

/* Fill g from a checked config and the starting limit; *v is the first
 * window (and possibly a probe). */
void bha_algo_init(struct bha_algo *g, const struct bh_adaptive_config *cfg, uint32_t start,
		   uint64_t now, struct bha_verdict *v);
/* One closed window in, the next limit and window out. */
void bha_algo_window(struct bha_algo *g, const struct bha_window *w, uint64_t now,
		     struct bha_verdict *v);
/* Continue from a limit another process's controller set. */
void bha_algo_follow(struct bha_algo *g, uint32_t limit);
/* Defaults of a config field left 0, per algorithm. */
uint32_t bha_default_min(enum bh_adaptive_algo a);
uint32_t bha_default_max(enum bh_adaptive_algo a, uint32_t start);
/* Samples under this are discarded (Netflix's WindowedLimit: 100 us). */
uint64_t bha_min_rtt(enum bh_adaptive_algo a);
/* Whether dropped calls' latencies go into the percentile (Envoy). */
bool bha_hist_drops(enum bh_adaptive_algo a);

/* ---- the window histogram: 8 buckets per power of two -------------------- */

#define BHA_SUB_BITS 3
#define BHA_MIN_SHIFT 10 /* 1.024 us */
#define BHA_MAX_SHIFT 36 /* 68.7 s */
#define BHA_NB (2 + (BHA_MAX_SHIFT - BHA_MIN_SHIFT) * (1 << BHA_SUB_BITS))

static inline unsigned bha_bucket(uint64_t ns)
{
	unsigned octave;

	if (ns < (1ull << BHA_MIN_SHIFT))
		return 0;
	if (ns >= (1ull << BHA_MAX_SHIFT))
		return BHA_NB - 1;
	octave = 63u - (unsigned)__builtin_clzll(ns);
	return 1 + (octave - BHA_MIN_SHIFT) * (1u << BHA_SUB_BITS) +
	       (unsigned)((ns >> (octave - BHA_SUB_BITS)) & ((1u << BHA_SUB_BITS) - 1));
}

/* The q-th percentile (0...100) of counts[] (n in all), interpolated
 * within its bucket (a bucket is 12.5% wide); 0 when n == 0. */
uint64_t bha_percentile(const uint32_t *counts, uint64_t n, unsigned q);

/* ---- the controller ------------------------------------------------------- */

#define BHA_SHARDS 32 /* exclusive ones, by thread index; one more is shared */

struct bha_shard {
	/* The owning thread writes with plain load+store; the shared shard
	 * (threads beyond BHA_SHARDS) with fetch_add. All relaxed: a closer
	 * reads them as statistics, never to synchronise. */
	_Alignas(64) _Atomic uint64_t n_ok, n_drop, n_ign, n_disc;
	_Atomic uint64_t ok_sum, drop_sum;
	_Atomic uint32_t peak, peak_epoch; /* most in flight in window peak_epoch */
	_Atomic uint32_t dirty;            /* added to since a closer last read it */
	_Atomic uint32_t buckets[BHA_NB];
};

/* What a closer last read of one shard. */
struct bha_seen {
	uint64_t ok, drop, ok_sum, drop_sum;
	uint32_t buckets[BHA_NB];
};

#include "core/layer.h"

struct bh_adaptive {
	/* Read by every sample. */
	_Alignas(64) struct bha_target tgt;
	uint64_t (*clock)(void *ctx);  /* precise: window times, probe epochs */
	uint64_t (*coarse)(void *ctx); /* cheap: the per-sample deadline check */
	void *clock_ctx;
	uint64_t min_rtt_ns;
	bool hist_drops;
	const char *name;      /* for exports: the bulkhead's or the pool's */
	struct bhk_sink sink;  /* automatic samples (src/core/sample_hook.h) */
	_Atomic bool started;  /* attach applied the start: samples may come in */
	struct bulkhead *owner; /* hooked into; NULL for other targets */

	/* Written by the closer once per window, read by every sample. */
	_Alignas(64) _Atomic uint64_t deadline_ns;
	_Atomic uint32_t epoch;
	_Atomic uint32_t probing;
	_Atomic uint64_t probe_epoch_ns;
	_Atomic uint32_t probe_pin, probe_target; /* the pinned limit, samples wanted */
	_Atomic uint64_t quota; /* the batched count below at which to close */

	/* Batched sample count: each shard adds 16 at a time (its own line). */
	_Alignas(64) _Atomic uint64_t gcount;
	_Atomic uint64_t probe_count; /* exact, during probes only */

	/* The closer's: ordered by closing (acquire on taking, release on
	 * leaving), so successive closers on any threads see each other's
	 * writes to everything below. 0: free; else closer_mark() of the
	 * process the closer ran in (adaptive.c). */
	_Alignas(64) _Atomic uint32_t closing;
	struct bha_algo algo;
	struct bha_verdict v;          /* the open window's rules */
	uint64_t open_ns, open_gcount;
	uint32_t limit;                /* what we last set */
	uint64_t prev_ok, prev_drop;   /* the sums of seen[].ok, seen[].drop */
	uint32_t scratch[BHA_NB];
	void (*window_hook)(void *ctx, const struct bha_window *w, const struct bha_verdict *v);
	void *window_hook_ctx;

	/* Published for readers (seqlock: odd while the closer writes). */
	_Alignas(64) _Atomic uint32_t seq;
	_Atomic uint64_t s_changed_ns, s_baseline, s_sample, s_wok, s_wdrop, s_windows,
		s_changes, s_probes, s_windowed;
	_Atomic uint32_t s_limit, s_reason, s_peak, s_probing;
	_Atomic uint64_t s_by_reason[BH_ADAPTIVE_NREASONS]; /* changes, by reason */
	_Atomic uint64_t h_t[BH_ADAPTIVE_HISTORY];
	_Atomic uint32_t h_limit[BH_ADAPTIVE_HISTORY], h_reason[BH_ADAPTIVE_HISTORY];
	uint64_t h_count;

	struct bha_shard shards[BHA_SHARDS + 1];
	struct bha_seen seen[BHA_SHARDS + 1]; /* the closer's */
};

/* Hidden hooks (tests and the simulator link the static core). */

/* A controller over any target. cfg already checked or NULL. */
int bha_create(const struct bh_adaptive_config *cfg, const struct bha_target *tgt,
	       uint32_t start, bh_adaptive_t **out);
/* Apply its starting limit and open the first window (attach does). */
void bha_start(bh_adaptive_t *a);
void bha_destroy(bh_adaptive_t *a);
/* Replace both clocks (before any sample; NULL: the real ones). */
void bha_set_clock(bh_adaptive_t *a, uint64_t (*now)(void *ctx), void *ctx);
/* Called by the closer with every window and its verdict. */
void bha_set_window_hook(bh_adaptive_t *a,
			 void (*fn)(void *ctx, const struct bha_window *w,
				    const struct bha_verdict *v),
			 void *ctx);
/* Close the open window now, whatever its rules (waits for a closer). */
void bha_flush(bh_adaptive_t *a);
/* Take the closer's role even if someone holds it now (waits); detach
 * keeps it, so that no window closes any more. */
void bha_become_closer(bh_adaptive_t *a);
/* Check a config (0 or -EINVAL). */
int bha_check_config(const struct bh_adaptive_config *cfg);

#endif /* BH_ADAPTIVE_BHA_H */
