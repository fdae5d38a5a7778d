/* Adaptive limits: lock-free sampling into per-thread shards, one closer
 * per window, and the limit moved through the controller's target;
 * creating a controller and reading it. What a controller is attached to
 * (the targets, the sample sources, attach/detach) is attach.c.
 * docs/adaptive.md explains why no sample is lost and no change races. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bha.h"
#include "lib/compiler.h"

#define NEVER UINT64_MAX
#define BATCH 16 /* a shard adds to the shared count this many at a time */
#define CHECK 4  /* a thread looks at the clock once per this many samples */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > NEVER - b ? NEVER : a + b;
}

/* ---- clocks ------------------------------------------------------------------ */

static uint64_t real_clock(void *ctx)
{
	(void)ctx;
	return bh_now_ns();
}

/* The per-sample deadline check: CLOCK_MONOTONIC_COARSE is a few ns (no
 * hardware counter read) and at most a tick behind, which only makes a
 * window close up to a tick late. */
static uint64_t coarse_clock(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * BH_SEC + (uint64_t)ts.tv_nsec;
}

/* ---- shards ------------------------------------------------------------------- */

static inline struct bha_shard *my_shard(bh_adaptive_t *a, bool *shared)
{
	uint32_t t = bhi_tindex;

	if (BHI_UNLIKELY(t == 0))
		t = bhi_tindex_assign();
	*shared = !(t - 1u < BHA_SHARDS);
	return &a->shards[*shared ? BHA_SHARDS : t - 1u];
}

/* Add v, return the new value. The owner of an exclusive shard is its only
 * writer: a relaxed load and store, no locked instruction. */
static inline uint64_t add64(_Atomic uint64_t *p, uint64_t v, bool shared)
{
	uint64_t n;

	if (BHI_UNLIKELY(shared))
		return atomic_fetch_add_explicit(p, v, memory_order_relaxed) + v;
	n = atomic_load_explicit(p, memory_order_relaxed) + v;
	atomic_store_explicit(p, n, memory_order_relaxed);
	return n;
}

static inline void add32(_Atomic uint32_t *p, bool shared)
{
	if (BHI_UNLIKELY(shared))
		atomic_fetch_add_explicit(p, 1, memory_order_relaxed);
	else
		atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + 1,
				      memory_order_relaxed);
}

/* The most in flight this window. An exclusive shard tags its figure with
 * the window it belongs to; the shared one is a CAS maximum the closer
 * resets. */
static inline void note_peak(bh_adaptive_t *a, struct bha_shard *s, bool shared)
{
	uint32_t in = a->tgt.in_flight(a->tgt.ctx);
	uint32_t e = atomic_load_explicit(&a->epoch, memory_order_relaxed);
	uint32_t old;

	if (BHI_UNLIKELY(shared)) {
		old = atomic_load_explicit(&s->peak, memory_order_relaxed);
		while (in > old && !atomic_compare_exchange_weak_explicit(
					   &s->peak, &old, in, memory_order_relaxed,
					   memory_order_relaxed))
			;
		return;
	}
	if (atomic_load_explicit(&s->peak_epoch, memory_order_relaxed) != e) {
		atomic_store_explicit(&s->peak, in, memory_order_relaxed);
		atomic_store_explicit(&s->peak_epoch, e, memory_order_relaxed);
	} else if (in > atomic_load_explicit(&s->peak, memory_order_relaxed)) {
		atomic_store_explicit(&s->peak, in, memory_order_relaxed);
	}
}

/* ---- closing a window --------------------------------------------------------- */

/* Inside publish's seqlock: the change just made, into the history. */
static void publish_change(bh_adaptive_t *a, uint64_t now, uint32_t reason)
{
	unsigned i = (unsigned)(a->h_count++ % BH_ADAPTIVE_HISTORY);

	atomic_store_explicit(&a->h_t[i], now, memory_order_relaxed);
	atomic_store_explicit(&a->h_limit[i], a->limit, memory_order_relaxed);
	atomic_store_explicit(&a->h_reason[i], reason, memory_order_relaxed);
	atomic_store_explicit(&a->s_changed_ns, now, memory_order_relaxed);
	atomic_store_explicit(&a->s_reason, reason, memory_order_relaxed);
	atomic_store_explicit(&a->s_changes, a->h_count, memory_order_relaxed);
	if (reason < BH_ADAPTIVE_NREASONS)
		atomic_store_explicit(
			&a->s_by_reason[reason],
			atomic_load_explicit(&a->s_by_reason[reason], memory_order_relaxed) + 1,
			memory_order_relaxed);
}

/* Inside publish's seqlock: the window just closed. */
static void publish_window(bh_adaptive_t *a, const struct bha_window *w)
{
	atomic_store_explicit(&a->s_wok, w->ok, memory_order_relaxed);
	atomic_store_explicit(&a->s_wdrop, w->dropped, memory_order_relaxed);
	atomic_store_explicit(&a->s_peak, w->peak, memory_order_relaxed);
	atomic_store_explicit(&a->s_windows,
			      atomic_load_explicit(&a->s_windows, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_store_explicit(&a->s_windowed,
			      atomic_load_explicit(&a->s_windowed, memory_order_relaxed) + w->ok +
				      w->dropped,
			      memory_order_relaxed);
}

static void publish(bh_adaptive_t *a, const struct bha_window *w, bool changed, uint64_t now,
		    uint32_t reason)
{
	uint32_t seq = atomic_load_explicit(&a->seq, memory_order_relaxed);

	/* Odd only when a fork cut a parent's closer short mid-publish (this
	 * is a child taking its role over): go on from the next even. */
	seq += seq & 1;
	/* A seqlock: readers retry while seq is odd or moved. The release
	 * fence orders the odd seq before the fields, the final release
	 * store the fields before the even one (pairs with the reader's
	 * acquire load of seq and its acquire fence). The odd store is a
	 * release too: a reader that sees it (read_begin()'s acquire load)
	 * sees our mark in closing, so it never takes us for a writer that a
	 * fork cut short. */
	atomic_store_explicit(&a->seq, seq + 1, memory_order_release);
	atomic_thread_fence(memory_order_release);
	if (changed)
		publish_change(a, now, reason);
	atomic_store_explicit(&a->s_limit, a->limit, memory_order_relaxed);
	atomic_store_explicit(&a->s_baseline, a->algo.baseline_ns, memory_order_relaxed);
	atomic_store_explicit(&a->s_sample, a->algo.sample_ns, memory_order_relaxed);
	if (a->v.probe_samples && !atomic_load_explicit(&a->s_probing, memory_order_relaxed))
		atomic_store_explicit(&a->s_probes,
				      atomic_load_explicit(&a->s_probes, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	atomic_store_explicit(&a->s_probing, a->v.probe_samples != 0, memory_order_relaxed);
	if (w)
		publish_window(a, w);
	atomic_store_explicit(&a->seq, seq + 2, memory_order_release);
}

/* Move the limit; only the closer (or attach, before anyone samples) does. */
static bool apply(bh_adaptive_t *a, const struct bha_verdict *v)
{
	int r;

	if (v->limit == a->limit)
		return false;
	if ((r = a->tgt.set_limit(a->tgt.ctx, v->limit)) != 0) {
		if (r == -EAGAIN) { /* another process's controller moves it: follow */
			a->limit = a->tgt.limit(a->tgt.ctx);
			bha_algo_follow(&a->algo, a->limit);
		}
		return false;
	}
	a->limit = v->limit;
	return true;
}

/* Open the next window under v's rules. The probe epoch is read after the
 * pin took effect: only calls that started under it count. */
static void open_window(bh_adaptive_t *a, const struct bha_verdict *v, uint64_t now)
{
	uint64_t g = atomic_load_explicit(&a->gcount, memory_order_relaxed);

	a->v = *v;
	a->open_ns = now;
	a->open_gcount = g;
	atomic_store_explicit(&a->quota, v->max_samples ? sat_add(g, v->max_samples) : NEVER,
			      memory_order_relaxed);
	atomic_store_explicit(&a->epoch, atomic_load_explicit(&a->epoch, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	if (v->probe_samples) {
		/* The epoch starts once in flight has drained to the pin (see
		 * accept_slow); until then every sample is from before. */
		atomic_store_explicit(&a->probe_count, 0, memory_order_relaxed);
		atomic_store_explicit(&a->probe_epoch_ns, NEVER, memory_order_relaxed);
		atomic_store_explicit(&a->probe_pin, v->limit, memory_order_relaxed);
		atomic_store_explicit(&a->probe_target, v->probe_samples, memory_order_relaxed);
	}
	/* release: a sampler that sees probing set (acquire) sees the epoch */
	atomic_store_explicit(&a->probing, v->probe_samples != 0, memory_order_release);
	atomic_store_explicit(&a->deadline_ns,
			      v->probe_samples ? sat_add(now, v->window_max_ns)
					       : sat_add(now, v->window_ns < v->window_max_ns
								      ? v->window_ns
								      : v->window_max_ns),
			      memory_order_relaxed);
}

struct totals {
	uint64_t ok, drop, ok_sum, drop_sum;
};

static void read_totals(const bh_adaptive_t *a, struct totals *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; i <= BHA_SHARDS; i++) {
		const struct bha_shard *s = &a->shards[i];

		t->ok += atomic_load_explicit(&s->n_ok, memory_order_relaxed);
		t->drop += atomic_load_explicit(&s->n_drop, memory_order_relaxed);
		t->ok_sum += atomic_load_explicit(&s->ok_sum, memory_order_relaxed);
		t->drop_sum += atomic_load_explicit(&s->drop_sum, memory_order_relaxed);
	}
}

/* What one shard gained since the closer last read it. */
static void take_shard(bh_adaptive_t *a, unsigned i, struct bha_window *w)
{
	const struct bha_shard *s = &a->shards[i];
	struct bha_seen *seen = &a->seen[i];
	uint64_t ok = atomic_load_explicit(&s->n_ok, memory_order_relaxed);
	uint64_t drop = atomic_load_explicit(&s->n_drop, memory_order_relaxed);
	uint64_t ok_sum = atomic_load_explicit(&s->ok_sum, memory_order_relaxed);
	uint64_t drop_sum = atomic_load_explicit(&s->drop_sum, memory_order_relaxed);

	w->ok += ok - seen->ok;
	w->dropped += drop - seen->drop;
	w->ok_sum_ns += ok_sum - seen->ok_sum;
	w->drop_sum_ns += drop_sum - seen->drop_sum;
	a->prev_ok += ok - seen->ok;
	a->prev_drop += drop - seen->drop;
	seen->ok = ok;
	seen->drop = drop;
	seen->ok_sum = ok_sum;
	seen->drop_sum = drop_sum;
	for (unsigned b = 0; b < BHA_NB; b++) {
		uint32_t c = atomic_load_explicit(&s->buckets[b], memory_order_relaxed);

		a->scratch[b] += c - seen->buckets[b]; /* mod 2^32, like the counters */
		w->hist_n += c - seen->buckets[b];
		seen->buckets[b] = c;
	}
}

/* What the shards gained since the last close. Every increment is seen by
 * exactly one such difference (the first read after it), so a sample that
 * races the close lands in the next window instead. Only shards added to
 * since are read: a sampler sets dirty after its adds (release), the
 * closer clears it before reading (acquire), so adds it misses set it
 * again for the next close. */
static void take_window(bh_adaptive_t *a, struct bha_window *w)
{
	uint32_t e = atomic_load_explicit(&a->epoch, memory_order_relaxed);

	memset(a->scratch, 0, sizeof(a->scratch));
	for (unsigned i = 0; i <= BHA_SHARDS; i++)
		if (atomic_exchange_explicit(&a->shards[i].dirty, 0, memory_order_acquire))
			take_shard(a, i, w);
	for (unsigned i = 0; i < BHA_SHARDS; i++) {
		const struct bha_shard *s = &a->shards[i];

		if (atomic_load_explicit(&s->peak_epoch, memory_order_relaxed) == e) {
			uint32_t p = atomic_load_explicit(&s->peak, memory_order_relaxed);

			w->peak = p > w->peak ? p : w->peak;
		}
	}
	e = atomic_exchange_explicit(&a->shards[BHA_SHARDS].peak, 0, memory_order_relaxed);
	w->peak = e > w->peak ? e : w->peak;
}

/* A follower's windows that asked for no change never learnt of the
 * mover's changes (apply() follows only a refused change): before each
 * window it goes on from the limit in force, so that when the role comes
 * to it, its first change starts from that limit, not from a stale one of
 * its own. */
static void follow_limit(bh_adaptive_t *a)
{
	uint32_t cur;

	if (!a->tgt.follows || !a->tgt.follows(a->tgt.ctx))
		return;
	cur = a->tgt.limit(a->tgt.ctx);
	if (cur != a->limit) {
		a->limit = cur;
		bha_algo_follow(&a->algo, cur);
	}
}

static void close_window(bh_adaptive_t *a, uint64_t now)
{
	struct bha_window w = { .start_ns = a->open_ns, .end_ns = now,
				.probe = a->v.probe_samples != 0 };
	struct bha_verdict v = a->v;
	bool changed;

	follow_limit(a);
	w.limit = a->limit;
	take_window(a, &w);
	w.pct_ns = bha_percentile(a->scratch, w.hist_n, a->algo.pct);
	v.limit = a->limit;
	v.reason = BH_ADAPTIVE_START;
	bha_algo_window(&a->algo, &w, now, &v);
	changed = apply(a, &v);
	if (changed && v.probe_samples)
		now = a->clock(a->clock_ctx); /* the pin is in force from here */
	open_window(a, &v, now);
	if (a->window_hook)
		a->window_hook(a->window_hook_ctx, &w, &v);
	publish(a, &w, changed, now, v.reason);
}

static bool window_due(const bh_adaptive_t *a, uint64_t now)
{
	const struct bha_verdict *v = &a->v;
	struct totals t;
	uint64_t n;

	if (v->probe_samples)
		return atomic_load_explicit(&a->probe_count, memory_order_relaxed) >=
			       v->probe_samples ||
		       now >= sat_add(a->open_ns, v->window_max_ns);
	read_totals(a, &t);
	n = t.ok - a->prev_ok + t.drop - a->prev_drop;
	if (v->max_samples && n >= v->max_samples)
		return true;
	if (now >= sat_add(a->open_ns, v->window_ns) && n >= v->min_samples)
		return true;
	return n >= 1 && now >= sat_add(a->open_ns, v->window_max_ns);
}

/* What a closer writes in closing: odd (never 0), and different in a fork
 * child, where a mark left by a closer of the parent's (a thread that does
 * not exist there, cut short by the fork) is taken over, not waited for. */
static uint32_t closer_mark(void)
{
	return bhk_fork_generation() << 1 | 1u;
}

/* Whoever finds the window due tries to close it; one wins, the others go
 * on at once (the sampling path never waits). acquire: the winner sees
 * everything the previous closer wrote (pairs with the release below).
 * Writing our own mark over a live closer's changes nothing. */
static BHI_COLD void try_close(bh_adaptive_t *a)
{
	uint32_t me = closer_mark();

	if (atomic_exchange_explicit(&a->closing, me, memory_order_acquire) == me)
		return;
	uint64_t now = a->clock(a->clock_ctx);

	if (window_due(a, now))
		close_window(a, now);
	atomic_store_explicit(&a->closing, 0, memory_order_release);
}

void bha_become_closer(bh_adaptive_t *a)
{
	/* acquire: pairs with the previous closer's release store of closing
	 * (try_close(), bha_flush()), so we see everything it wrote */
	uint32_t me = closer_mark();

	while (atomic_exchange_explicit(&a->closing, me, memory_order_acquire) == me)
		sched_yield();
}

void bha_flush(bh_adaptive_t *a)
{
	bha_become_closer(a);
	close_window(a, a->clock(a->clock_ctx));
	/* release: pairs with the next closer's acquire exchange of closing
	 * (try_close(), bha_become_closer()) */
	atomic_store_explicit(&a->closing, 0, memory_order_release);
}

/* ---- sampling ------------------------------------------------------------------ */

/* Netflix's minimum, and during a probe only calls that started after it
 * began: after in flight first drained to the pin (so that nothing of ours
 * still queues downstream), which the first sampler to see it marks.
 * Returns whether to keep the sample; *full when the probe has enough. */
static BHI_COLD bool accept_slow(bh_adaptive_t *a, uint64_t rtt, bool *full)
{
	uint64_t now, epoch, n;

	if (rtt < a->min_rtt_ns)
		return false;
	/* acquire: pairs with open_window's release store (pin, epoch) */
	if (!atomic_load_explicit(&a->probing, memory_order_acquire))
		return true;
	now = a->clock(a->clock_ctx);
	epoch = atomic_load_explicit(&a->probe_epoch_ns, memory_order_relaxed);
	if (epoch == NEVER) {
		if (a->tgt.in_flight(a->tgt.ctx) <=
		    atomic_load_explicit(&a->probe_pin, memory_order_relaxed))
			atomic_compare_exchange_strong_explicit(&a->probe_epoch_ns, &epoch, now,
								memory_order_relaxed,
								memory_order_relaxed);
		return false;
	}
	if (now < rtt || now - rtt < epoch)
		return false;
	n = atomic_fetch_add_explicit(&a->probe_count, 1, memory_order_relaxed) + 1;
	*full = n >= atomic_load_explicit(&a->probe_target, memory_order_relaxed);
	return true;
}

void bh_adaptive_sample(bh_adaptive_t *a, uint64_t rtt_ns, enum bh_outcome outcome)
{
	bool shared, full = false;
	struct bha_shard *s = my_shard(a, &shared);
	uint64_t n;

	if (BHI_UNLIKELY(outcome != BH_OK && outcome != BH_DROPPED)) {
		add64(&s->n_ign, 1, shared); /* BH_IGNORE, or anything else */
		return;
	}
	if (BHI_UNLIKELY(rtt_ns > BHA_RTT_MAX)) {
		/* A start after its end (clocks mixed up) is a negative
		 * duration as a signed latency would show it: below every
		 * minimum, discarded. A real one counts as BHA_RTT_MAX. */
		if (rtt_ns > (uint64_t)INT64_MAX) {
			add64(&s->n_disc, 1, shared);
			return;
		}
		rtt_ns = BHA_RTT_MAX;
	}
	if (BHI_UNLIKELY(rtt_ns < a->min_rtt_ns ||
			atomic_load_explicit(&a->probing, memory_order_relaxed)) &&
	    !accept_slow(a, rtt_ns, &full)) {
		/* A probe whose pin does not drain in flight discards every
		 * sample: its deadline (window_max_ns) must still end it. */
		n = add64(&s->n_disc, 1, shared);
		if (n % CHECK == 1 % CHECK &&
		    a->coarse(a->clock_ctx) >=
			    atomic_load_explicit(&a->deadline_ns, memory_order_relaxed))
			try_close(a);
		return;
	}
	if (outcome == BH_OK || a->hist_drops)
		add32(&s->buckets[bha_bucket(rtt_ns)], shared);
	if (outcome == BH_OK) {
		add64(&s->ok_sum, rtt_ns, shared);
		n = add64(&s->n_ok, 1, shared);
	} else {
		add64(&s->drop_sum, rtt_ns, shared);
		n = add64(&s->n_drop, 1, shared);
	}
	note_peak(a, s, shared);
	/* release: the adds above before the flag (take_window's acquire) */
	atomic_store_explicit(&s->dirty, 1, memory_order_release);
	if (BHI_UNLIKELY(n % BATCH == 0) &&
	    atomic_fetch_add_explicit(&a->gcount, BATCH, memory_order_relaxed) + BATCH >=
		    atomic_load_explicit(&a->quota, memory_order_relaxed))
		full = true;
	/* The clock every CHECK-th sample of a thread: a window needs several
	 * samples anyway, and even the coarse clock is 5 to 20 ns. */
	if (BHI_UNLIKELY(full) ||
	    (n % CHECK == 1 % CHECK &&
	     a->coarse(a->clock_ctx) >= atomic_load_explicit(&a->deadline_ns, memory_order_relaxed)))
		try_close(a);
}

/* ---- create / destroy ------------------------------------------------------------- */

int bha_check_config(const struct bh_adaptive_config *cfg)
{
	if (!cfg)
		return 0;
	if ((unsigned)cfg->algo > BH_ADAPTIVE_ENVOY || cfg->min_limit > BH_LIMIT_MAX ||
	    cfg->max_limit > BH_LIMIT_MAX || cfg->initial_limit > BH_LIMIT_MAX ||
	    cfg->percentile > 100 ||
	    (cfg->max_limit && cfg->min_limit > cfg->max_limit))
		return -EINVAL;
	if (cfg->sources & ~(BH_ADAPTIVE_SRC_HOLD | BH_ADAPTIVE_SRC_URING | BH_ADAPTIVE_SRC_POOL |
			     BH_ADAPTIVE_SRC_MANUAL))
		return -EINVAL;
	return 0;
}

int bha_create(const struct bh_adaptive_config *cfg, const struct bha_target *tgt,
	       uint32_t start, bh_adaptive_t **out)
{
	static const struct bh_adaptive_config zero;
	struct bha_verdict v;
	bh_adaptive_t *a;

	if (!tgt || !out || bha_check_config(cfg) < 0)
		return -EINVAL;
	cfg = cfg ? cfg : &zero;
	a = bhi_zalloc_aligned(sizeof(*a), BHI_CACHELINE);
	if (!a)
		return -ENOMEM;
	a->tgt = *tgt;
	a->clock = real_clock;
	a->coarse = coarse_clock;
	a->min_rtt_ns = bha_min_rtt(cfg->algo);
	a->hist_drops = bha_hist_drops(cfg->algo);
	a->limit = start;
	if (cfg->seed == 0) {
		struct bh_adaptive_config c = *cfg;

		c.seed = (uint64_t)(uintptr_t)a ^ bh_now_ns();
		bha_algo_init(&a->algo, &c, start, 0, &v);
	} else {
		bha_algo_init(&a->algo, cfg, start, 0, &v);
	}
	a->v = v; /* the first window's rules; start() applies its limit */
	*out = a;
	return 0;
}

/* Apply the first verdict and open the first window. */
void bha_start(bh_adaptive_t *a)
{
	struct bha_verdict v = a->v;
	uint64_t now = a->clock(a->clock_ctx);

	publish(a, NULL, true, now, BH_ADAPTIVE_START); /* the limit found at attach */
	if (apply(a, &v)) {
		now = a->clock(a->clock_ctx);
		publish(a, NULL, true, now, v.reason);
	}
	open_window(a, &v, now);
}

void bha_destroy(bh_adaptive_t *a)
{
	bhi_free_aligned(a);
}

void bha_set_clock(bh_adaptive_t *a, uint64_t (*now)(void *ctx), void *ctx)
{
	a->clock = now ? now : real_clock;
	a->coarse = now ? now : coarse_clock;
	a->clock_ctx = ctx;
	open_window(a, &a->v, a->clock(ctx));
}

void bha_set_window_hook(bh_adaptive_t *a,
			 void (*fn)(void *ctx, const struct bha_window *w,
				    const struct bha_verdict *v),
			 void *ctx)
{
	a->window_hook = fn;
	a->window_hook_ctx = ctx;
}

/* ---- reading -------------------------------------------------------------------- */

/* A reader's first look at seq: even, or odd for good. In a fork child an
 * odd seq may be a parent's closer cut short mid-publish: the closing role
 * still holds that thread's mark, of another generation (closer_mark()),
 * and nobody here will finish its write. Then what it left is read as it
 * is; a closer of this process that takes the role over moves seq on, and
 * the reader's re-check retries. */
static uint32_t read_begin(bh_adaptive_t *m)
{
	uint32_t s, c;

	/* acquire: pairs with publish()'s release stores of seq, the odd one
	 * included (after it, closing holds that closer's mark) */
	while ((s = atomic_load_explicit(&m->seq, memory_order_acquire)) & 1) {
		c = atomic_load_explicit(&m->closing, memory_order_relaxed);
		if (c != 0 && c != closer_mark())
			break;
		sched_yield();
	}
	return s;
}

static void shard_counts(const bh_adaptive_t *a, struct bh_adaptive_stats *out)
{
	for (unsigned i = 0; i <= BHA_SHARDS; i++) {
		const struct bha_shard *s = &a->shards[i];

		out->ok += atomic_load_explicit(&s->n_ok, memory_order_relaxed);
		out->dropped += atomic_load_explicit(&s->n_drop, memory_order_relaxed);
		out->ignored += atomic_load_explicit(&s->n_ign, memory_order_relaxed);
		out->discarded += atomic_load_explicit(&s->n_disc, memory_order_relaxed);
	}
}

int bh_adaptive_stats(const bh_adaptive_t *a, struct bh_adaptive_stats *out)
{
	bh_adaptive_t *m = (bh_adaptive_t *)a;
	uint32_t s1, s2;

	if (!a || !out)
		return -EINVAL;
	do {
		s1 = read_begin(m);
		memset(out, 0, sizeof(*out));
		out->limit = atomic_load_explicit(&m->s_limit, memory_order_relaxed);
		out->reason = atomic_load_explicit(&m->s_reason, memory_order_relaxed);
		out->changed_ns = atomic_load_explicit(&m->s_changed_ns, memory_order_relaxed);
		out->baseline_ns = atomic_load_explicit(&m->s_baseline, memory_order_relaxed);
		out->sample_ns = atomic_load_explicit(&m->s_sample, memory_order_relaxed);
		out->window_ok = atomic_load_explicit(&m->s_wok, memory_order_relaxed);
		out->window_dropped = atomic_load_explicit(&m->s_wdrop, memory_order_relaxed);
		out->window_peak = atomic_load_explicit(&m->s_peak, memory_order_relaxed);
		out->probing = atomic_load_explicit(&m->s_probing, memory_order_relaxed);
		out->windows = atomic_load_explicit(&m->s_windows, memory_order_relaxed);
		out->changes = atomic_load_explicit(&m->s_changes, memory_order_relaxed);
		out->windowed = atomic_load_explicit(&m->s_windowed, memory_order_relaxed);
		out->probes = atomic_load_explicit(&m->s_probes, memory_order_relaxed);
		/* acquire fence: the loads above happen before the re-check;
		 * pairs with publish()'s release fence after the odd seq */
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&m->seq, memory_order_relaxed);
	} while (s1 != s2);
	out->min_limit = a->algo.min;
	out->max_limit = a->algo.max;
	shard_counts(a, out);
	return 0;
}

int bh_adaptive_history(const bh_adaptive_t *a, struct bh_adaptive_change *out, unsigned max)
{
	bh_adaptive_t *m = (bh_adaptive_t *)a;
	uint32_t s1, s2;
	uint64_t n, first;
	unsigned k;

	if (!a || (!out && max))
		return -EINVAL;
	do {
		s1 = read_begin(m);
		n = atomic_load_explicit(&m->s_changes, memory_order_relaxed);
		first = n > BH_ADAPTIVE_HISTORY ? n - BH_ADAPTIVE_HISTORY : 0;
		if (n - first > max)
			first = n - max;
		for (k = 0; first + k < n; k++) {
			unsigned i = (unsigned)((first + k) % BH_ADAPTIVE_HISTORY);

			out[k].t_ns = atomic_load_explicit(&m->h_t[i], memory_order_relaxed);
			out[k].limit = atomic_load_explicit(&m->h_limit[i], memory_order_relaxed);
			out[k].reason = atomic_load_explicit(&m->h_reason[i], memory_order_relaxed);
		}
		/* acquire fence: as in bh_adaptive_stats(), pairs with
		 * publish()'s release fence after the odd seq */
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&m->seq, memory_order_relaxed);
	} while (s1 != s2);
	return (int)k;
}

const char *bh_adaptive_reason_name(unsigned reason)
{
	static const char *const names[BH_ADAPTIVE_NREASONS] = {
		[BH_ADAPTIVE_START] = "start",       [BH_ADAPTIVE_GROW] = "grow",
		[BH_ADAPTIVE_RECOVER] = "recover",   [BH_ADAPTIVE_QUEUEING] = "queueing",
		[BH_ADAPTIVE_DROPS] = "drops",       [BH_ADAPTIVE_PROBE] = "probe",
		[BH_ADAPTIVE_RESTORE] = "restore",   [BH_ADAPTIVE_BASELINE] = "baseline",
	};

	return reason < BH_ADAPTIVE_NREASONS ? names[reason] : NULL;
}
