/* The limit algorithms: one closed window in, the next limit out. Pure and
 * single-threaded (only the closer runs them); the published ones follow
 * their sources' update rules and defaults, cited in docs/adaptive.md. */
#include <math.h>
#include <string.h>

#include "bha.h"

#define MS (1000ull * 1000ull)
#define SEC (1000ull * MS)
#define NEVER UINT64_MAX

/* ---- helpers ----------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: deterministic for a given seed, good enough for jitter */
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [lo, hi). */
static double rng_uniform(uint64_t *s, double lo, double hi)
{
	return lo + (hi - lo) * (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

static uint32_t clamp_u32(double x, uint32_t lo, uint32_t hi)
{
	if (!(x >= lo)) /* NaN goes low too */
		return lo;
	if (x >= hi)
		return hi;
	return (uint32_t)x;
}

static double clamp_d(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

static uint64_t mean_all(const struct bha_window *w)
{
	uint64_t n = w->ok + w->dropped;

	return n ? (w->ok_sum_ns + w->drop_sum_ns) / n : 0;
}

uint64_t bha_percentile(const uint32_t *counts, uint64_t n, unsigned q)
{
	uint64_t rank, seen = 0;

	if (n == 0)
		return 0;
	/* the value at rank ceil(n q / 100), placed within its bucket by rank */
	rank = (n * q + 99) / 100;
	if (rank == 0)
		rank = 1;
	for (unsigned i = 0; i < BHA_NB; i++) {
		uint64_t lo, width;

		if (seen + counts[i] < rank) {
			seen += counts[i];
			continue;
		}
		if (i == 0)
			return 1ull << (BHA_MIN_SHIFT - 1);
		if (i == BHA_NB - 1)
			return 1ull << BHA_MAX_SHIFT;
		lo = 1ull << (BHA_MIN_SHIFT + (i - 1) / (1u << BHA_SUB_BITS));
		width = lo >> BHA_SUB_BITS;
		lo += ((i - 1) % (1u << BHA_SUB_BITS)) * width;
		return lo + (uint64_t)((double)width * ((double)(rank - seen) - 0.5) / counts[i]);
	}
	return 1ull << BHA_MAX_SHIFT;
}

/* Windows of fixed length that close with any sample (Netflix, Envoy). */
static void fixed_window(const struct bha_algo *g, uint64_t len, struct bha_verdict *v)
{
	v->window_ns = g->window_ns ? g->window_ns : len;
	v->window_max_ns = v->window_ns;
	v->min_samples = 0;
	v->max_samples = 0;
	v->probe_samples = 0;
}

static void set_limit(struct bha_verdict *v, uint32_t limit, uint32_t reason)
{
	if (limit != v->limit) {
		v->limit = limit;
		v->reason = reason;
	}
}

/* ---- Netflix AIMDLimit ----------------------------------------------------------
 * drop or rtt > timeout (5 s): L = (int)(L x 0.9); else if inflight x 2 >= L:
 * L + 1; then clamp [min 20, max 200]. WindowedLimit feeds it the window's
 * mean latency, its most in flight and whether anything dropped, for windows
 * of at least 10 samples. */

#define NF_WINDOW_READY 10
#define NF_WINDOW_NS SEC

static void aimd_window(struct bha_algo *g, const struct bha_window *w, struct bha_verdict *v)
{
	struct bha_aimd *s = &g->u.aimd;
	uint64_t rtt = mean_all(w);
	uint32_t l = s->limit;

	fixed_window(g, NF_WINDOW_NS, v);
	if (w->ok + w->dropped < NF_WINDOW_READY)
		return;
	g->sample_ns = rtt;
	if (w->dropped || rtt > 5 * SEC)
		l = (uint32_t)(l * 0.9);
	else if ((uint64_t)w->peak * 2 >= l)
		l = l + 1;
	l = l < g->min ? g->min : l > g->max ? g->max : l;
	set_limit(v, l, l < s->limit ? BH_ADAPTIVE_DROPS : BH_ADAPTIVE_GROW);
	s->limit = l;
}

/* ---- Netflix VegasLimit -----------------------------------------------------------
 * f(L) = max(1, floor(log10 L)); alpha 3f, beta 6f, threshold f. The no-load
 * RTT is the smallest seen, except that every jitter x 30 x L updates
 * (jitter uniform in [0.5, 1)) the sample replaces it. queue = ceil(L x (1 -
 * noload / rtt)); drop: L - f; inflight x 2 < L: unchanged; queue <= f:
 * L + beta; queue < alpha: L + f; queue > beta: L - f; clamp [1, 1000];
 * smoothing 1. */

static int log10_root(int l)
{
	int r = l > 0 ? (int)log10((double)l) : 0;

	return r < 1 ? 1 : r;
}

static void vegas_jitter(struct bha_algo *g)
{
	g->u.vegas.probe_jitter = rng_uniform(&g->rng, 0.5, 1.0);
}

static void vegas_update(struct bha_algo *g, const struct bha_window *w, uint64_t rtt,
			 struct bha_verdict *v)
{
	struct bha_vegas *s = &g->u.vegas;
	double est = s->est, nl;
	int il = (int)est, f = log10_root(il);
	int queue = (int)ceil(est * (1.0 - (double)s->rtt_noload / (double)rtt));
	uint32_t reason;

	if (w->dropped) {
		nl = est - f;
		reason = BH_ADAPTIVE_DROPS;
	} else if ((double)w->peak * 2 < est) {
		return;
	} else if (queue <= f) {
		nl = est + 6 * f;
		reason = BH_ADAPTIVE_GROW;
	} else if (queue < 3 * f) {
		nl = est + f;
		reason = BH_ADAPTIVE_GROW;
	} else if (queue > 6 * f) {
		nl = est - f;
		reason = BH_ADAPTIVE_QUEUEING;
	} else {
		return;
	}
	nl = clamp_d(nl, g->min, g->max); /* smoothing 1.0: no blend */
	s->est = nl;
	set_limit(v, (uint32_t)nl, reason);
}

static void vegas_window(struct bha_algo *g, const struct bha_window *w, struct bha_verdict *v)
{
	struct bha_vegas *s = &g->u.vegas;
	uint64_t rtt = mean_all(w);

	fixed_window(g, NF_WINDOW_NS, v);
	if (w->ok + w->dropped < NF_WINDOW_READY || rtt == 0)
		return;
	g->sample_ns = rtt;
	s->probe_count++;
	if (s->probe_jitter * 30 * s->est <= s->probe_count) {
		vegas_jitter(g);
		s->probe_count = 0;
		s->rtt_noload = rtt; /* the "probe": the sample replaces the minimum */
	} else if (s->rtt_noload == 0 || rtt < s->rtt_noload) {
		s->rtt_noload = rtt;
	} else {
		vegas_update(g, w, rtt, v);
	}
	g->baseline_ns = s->rtt_noload;
}

/* ---- Netflix Gradient2Limit ---------------------------------------------------------
 * longRtt: EMA with factor 2 / 601 after a 10-sample mean warm-up; if
 * longRtt / shortRtt > 2, longRtt x 0.95; inflight < L / 2: unchanged;
 * gradient = clamp(1.5 x longRtt / shortRtt, 0.5, 1); L' = L x gradient + 4;
 * L = 0.8 L + 0.2 L'; clamp [20, 200]. Drops are not looked at. */

static double g2_long_add(struct bha_gradient2 *s, double x)
{
	if (s->long_count < 10) {
		s->long_count++;
		s->long_sum += x;
		s->long_rtt = s->long_sum / s->long_count;
	} else {
		double k = 2.0 / (600 + 1);

		s->long_rtt = s->long_rtt * (1 - k) + x * k;
	}
	return s->long_rtt;
}

static void g2_window(struct bha_algo *g, const struct bha_window *w, struct bha_verdict *v)
{
	struct bha_gradient2 *s = &g->u.g2;
	double short_rtt = (double)mean_all(w), long_rtt, grad, nl;

	fixed_window(g, NF_WINDOW_NS, v);
	if (w->ok + w->dropped < NF_WINDOW_READY || short_rtt <= 0)
		return;
	g->sample_ns = (uint64_t)short_rtt;
	long_rtt = g2_long_add(s, short_rtt);
	if (long_rtt / short_rtt > 2)
		s->long_rtt *= 0.95;
	g->baseline_ns = (uint64_t)s->long_rtt;
	if ((double)w->peak < s->est / 2)
		return;
	grad = clamp_d(1.5 * long_rtt / short_rtt, 0.5, 1.0);
	nl = s->est * grad + 4;
	nl = s->est * 0.8 + nl * 0.2;
	nl = clamp_d(nl, g->min, g->max);
	set_limit(v, (uint32_t)nl, nl < s->est ? BH_ADAPTIVE_QUEUEING : BH_ADAPTIVE_GROW);
	s->est = nl;
}

/* ---- Envoy's gradient controller -------------------------------------------------------
 * Every update interval: sampleRTT = the percentile (p50) of the window;
 * gradient = clamp(minRTT x 1.25 / sampleRTT, 0.5, 2); L' = L x gradient;
 * L = clamp(L' + sqrt(L'), 3, 1000). minRTT: pin L to min_concurrency (3),
 * take the percentile of the next 50 samples from requests started after
 * that, restore; again after interval + U[0, 15% of it), and at once after
 * 5 consecutive updates that leave L at the minimum. */

#define ENVOY_WINDOW_NS (100 * MS)
#define ENVOY_INTERVAL_NS (60 * SEC)
#define ENVOY_MIN_RTT_SAMPLES 50

static void envoy_set(struct bha_algo *g, uint32_t nl, struct bha_verdict *v, uint32_t reason)
{
	struct bha_envoy *s = &g->u.envoy;

	if (!s->in_min_rtt && s->limit == g->min && nl == g->min)
		s->consecutive_min++;
	else
		s->consecutive_min = 0;
	s->limit = nl;
	set_limit(v, nl, reason);
}

static void envoy_enter_min_rtt(struct bha_algo *g, struct bha_verdict *v)
{
	struct bha_envoy *s = &g->u.envoy;

	s->deferred = s->limit;
	s->in_min_rtt = true;
	envoy_set(g, g->min, v, BH_ADAPTIVE_PROBE);
	v->window_ns = NEVER;
	v->window_max_ns = NEVER;
	v->probe_samples = ENVOY_MIN_RTT_SAMPLES;
}

static uint64_t envoy_jittered(struct bha_algo *g)
{
	uint64_t ms = g->probe_interval_ns / MS;
	uint64_t range = (uint64_t)ceil((double)ms * 0.15);

	return (ms + (range ? rng_next(&g->rng) % range : 0)) * MS;
}

static void envoy_window(struct bha_algo *g, const struct bha_window *w, uint64_t now,
			 struct bha_verdict *v)
{
	struct bha_envoy *s = &g->u.envoy;

	fixed_window(g, ENVOY_WINDOW_NS, v);
	v->min_samples = 1;
	if (s->in_min_rtt) {
		if (w->hist_n > 0)
			s->min_rtt = w->pct_ns;
		envoy_set(g, s->deferred, v, BH_ADAPTIVE_RESTORE); /* still in the window */
		s->in_min_rtt = false;
		s->next_min_rtt_ns = now + envoy_jittered(g);
		g->baseline_ns = s->min_rtt;
		return;
	}
	if (w->hist_n > 0) { /* an unmeasured minRTT (0) gives gradient 0.5, as in Envoy */
		double grad = clamp_d((double)s->min_rtt * 1.25 / (double)w->pct_ns, 0.5, 2.0);
		double l = s->limit * grad;
		uint32_t nl = clamp_u32(l + sqrt(l), g->min, g->max);

		s->sample_rtt = w->pct_ns;
		g->sample_ns = w->pct_ns;
		envoy_set(g, nl, v, nl < s->limit ? BH_ADAPTIVE_QUEUEING : BH_ADAPTIVE_GROW);
	}
	if (s->consecutive_min >= 5 || now >= s->next_min_rtt_ns)
		envoy_enter_min_rtt(g, v);
}

/* ---- the library's own -------------------------------------------------------------------
 *
 * Latency is the window's percentile p of OK samples, compared with a
 * baseline B, the latency of the dependency when nothing queues:
 *   - drops in the window (a share f of its samples): L x max(0.5, 1 - f);
 *   - p > 1.3 B (calls queue downstream): L x clamp(1.15 B / p, 0.5, 0.9),
 *     the gradient step, which lands near the concurrency the dependency
 *     serves without queueing;
 *   - p <= 1.1 B and at least half of L in use: double back towards the
 *     last good limit (fast recovery, e.g. from the floor after an outage),
 *     above it grow by max(1, sqrt(L) / 2);
 *   - in between: hold (the dead band).
 * B is never an all-time minimum: it comes from a probe (the limit pinned
 * at 4 for 16 samples from calls started after the pin) at attach, and
 * again when no window has agreed with it (p <= 1.1 B) for a jittered
 * probe interval; windows below it pull it down a quarter of the way. A cut
 * that brought the limit down by a fifth without bringing latency down
 * (p still >= 85% of what it was) says the dependency got slower, not
 * busier: p becomes the baseline and the limit goes back. So does latency
 * that stays high at the floor for 3 windows. */

#define OWN_MIN 2
#define OWN_PROBE_LIMIT 4
#define OWN_PROBE_SAMPLES 16
#define OWN_PROBE_OK 4 /* fewer OK samples and the probe taught nothing */
#define OWN_MIN_SAMPLES 8
#define OWN_MAX_SAMPLES 1000
#define OWN_INTERVAL_NS (10 * SEC)
#define OWN_LOW 1.10
#define OWN_HIGH 1.30
#define OWN_TARGET 1.15

/* The next probe: the interval, at least 200 round trips (a probe costs a
 * few), jittered by a quarter either way. */
static uint64_t own_jittered(struct bha_algo *g)
{
	double h = (double)g->probe_interval_ns, rtt = 200.0 * (double)g->u.own.rtt_est;

	return (uint64_t)((h > rtt ? h : rtt) * rng_uniform(&g->rng, 0.75, 1.25));
}

static void own_window_rules(const struct bha_algo *g, struct bha_verdict *v)
{
	uint64_t rtt = g->u.own.rtt_est ? g->u.own.rtt_est : 10 * MS;
	uint64_t len = g->window_ns ? g->window_ns : rtt * 4;

	len = len < 2 * MS ? 2 * MS : len > SEC ? SEC : len;
	v->window_ns = len;
	v->window_max_ns = 6 * len;
	v->min_samples = OWN_MIN_SAMPLES;
	v->max_samples = OWN_MAX_SAMPLES;
	v->probe_samples = 0;
}

static void own_start_probe(struct bha_algo *g, struct bha_verdict *v)
{
	struct bha_own *s = &g->u.own;
	uint64_t rtt = s->rtt_est ? s->rtt_est : 100 * MS;
	uint32_t pin = s->limit < OWN_PROBE_LIMIT ? s->limit : OWN_PROBE_LIMIT;

	/* Knowing the baseline, a quarter of the limit queues nothing unless
	 * the limit is far off; the first probe knows nothing. */
	if (s->base && s->limit / 4 > pin)
		pin = s->limit / 4;
	s->restore = s->limit;
	s->in_probe = true;
	s->check = false;
	pin = pin < g->min ? g->min : pin;
	set_limit(v, pin, BH_ADAPTIVE_PROBE);
	v->window_ns = NEVER;
	v->window_max_ns = 8 * rtt > SEC ? 8 * rtt : SEC;
	v->probe_samples = OWN_PROBE_SAMPLES;
}

static void own_end_probe(struct bha_algo *g, const struct bha_window *w, uint64_t now,
			  struct bha_verdict *v)
{
	struct bha_own *s = &g->u.own;

	s->in_probe = false;
	if (w->ok >= OWN_PROBE_OK) {
		s->base = w->pct_ns; /* replaces it: up or down */
		s->rtt_est = w->pct_ns;
		s->confirmed_ns = now;
		s->probe_fails = 0;
	} else if (s->probe_fails < 6) {
		s->probe_fails++;
	}
	own_window_rules(g, v);
	/* Nothing learnt (an outage, too little traffic): try again after a
	 * few windows of normal operation, backing off. */
	s->probe_due_ns = now + (w->ok >= OWN_PROBE_OK ? own_jittered(g)
						      : (4 * v->window_ns) << s->probe_fails);
	set_limit(v, s->restore, BH_ADAPTIVE_RESTORE);
}

static uint32_t own_clamp(const struct bha_algo *g, double l)
{
	return clamp_u32(l, g->min, g->max);
}

/* Latency above the band: cut, unless the last cut showed that latency does
 * not follow the limit. */
static void own_high(struct bha_algo *g, const struct bha_window *w, uint64_t now, double r,
		     struct bha_verdict *v)
{
	struct bha_own *s = &g->u.own;

	if (s->check && (uint64_t)w->limit * 5 <= (uint64_t)s->check_limit * 4) {
		s->check = false;
		if (w->pct_ns * 20 >= s->check_pct * 17) {
			s->base = w->pct_ns;
			s->confirmed_ns = now;
			set_limit(v, s->check_limit, BH_ADAPTIVE_BASELINE);
			return;
		}
	}
	if (s->limit <= g->min) {
		if (++s->floor_high >= 3) {
			/* At the floor nothing queues: this is how fast it is. */
			s->base = w->pct_ns;
			s->confirmed_ns = now;
			s->floor_high = 0;
			v->reason = BH_ADAPTIVE_BASELINE;
		}
		return;
	}
	if (!s->check) {
		s->check = true;
		s->check_limit = s->limit;
		s->check_pct = w->pct_ns;
	}
	s->last_good = own_clamp(g, s->limit * clamp_d(OWN_TARGET / r, 0.5, 0.9));
	set_limit(v, s->last_good, BH_ADAPTIVE_QUEUEING);
}

static void own_low(struct bha_algo *g, const struct bha_window *w, uint64_t now,
		    struct bha_verdict *v)
{
	struct bha_own *s = &g->u.own;
	uint32_t l = s->limit;

	if (w->pct_ns < s->base)
		s->base -= (s->base - w->pct_ns) / 4;
	if ((uint64_t)w->peak * 2 < l) {
		/* App-limited: no growth unless the limit was in use. Little
		 * queues at this concurrency, so this also confirms the
		 * baseline (under sustained load only a probe can). */
		s->confirmed_ns = now;
		return;
	}
	if (l < s->last_good)
		set_limit(v, own_clamp(g, 2.0 * l > s->last_good ? s->last_good : 2.0 * l),
			  BH_ADAPTIVE_RECOVER);
	else
		set_limit(v, own_clamp(g, l + fmax(1.0, floor(sqrt(l) / 2))), BH_ADAPTIVE_GROW);
	if (v->limit > s->last_good)
		s->last_good = v->limit;
}

/* Drops: a share f of the window. Most calls failing always backs off;
 * fewer back off only while they follow the limit: when a cut by a fifth
 * left the share where it was, it is not our load that causes them, the
 * limit goes back and that share is background from then on (until a
 * window shows half of it). */
static void own_drops(struct bha_algo *g, const struct bha_window *w, double f,
		      struct bha_verdict *v)
{
	struct bha_own *s = &g->u.own;

	s->check = false;
	s->floor_high = 0;
	if (f < 0.5 && s->dcheck && (uint64_t)w->limit * 5 <= (uint64_t)s->dcheck_limit * 4) {
		s->dcheck = false;
		if (f * 20 >= s->dcheck_f * 17) {
			s->background = f;
			set_limit(v, s->dcheck_limit, BH_ADAPTIVE_BASELINE);
			return;
		}
	}
	if (f < 0.5 && !s->dcheck) {
		s->dcheck = true;
		s->dcheck_limit = s->limit;
		s->dcheck_f = f;
	}
	set_limit(v, own_clamp(g, s->limit * fmax(0.5, 1.0 - f)), BH_ADAPTIVE_DROPS);
}

static void own_latency(struct bha_algo *g, const struct bha_window *w, uint64_t now,
			struct bha_verdict *v)
{
	struct bha_own *s = &g->u.own;
	double r = (double)w->pct_ns / (double)s->base;

	if (r > OWN_HIGH) {
		own_high(g, w, now, r, v);
		return;
	}
	s->check = false;
	s->floor_high = 0;
	if (r <= OWN_LOW && !w->dropped) /* background drops: no growth */
		own_low(g, w, now, v);
}

static void own_window(struct bha_algo *g, const struct bha_window *w, uint64_t now,
		       struct bha_verdict *v)
{
	struct bha_own *s = &g->u.own;
	uint64_t n = w->ok + w->dropped;
	bool have_p = w->ok >= OWN_MIN_SAMPLES / 2;
	double f = n ? (double)w->dropped / (double)n : 0;

	if (s->in_probe) {
		own_end_probe(g, w, now, v);
		s->limit = v->limit;
		return;
	}
	if (have_p)
		s->rtt_est = w->pct_ns;
	else if (w->dropped && !s->rtt_est)
		s->rtt_est = w->drop_sum_ns / w->dropped;
	own_window_rules(g, v);
	if (n == 0)
		return;
	g->sample_ns = have_p ? w->pct_ns : 0;
	if (f < s->background / 2) {
		s->background = 0;
		s->dcheck = false;
	}
	if (w->dropped && f > s->background * 1.25 + 0.01)
		own_drops(g, w, f, v);
	else if (have_p && s->base)
		own_latency(g, w, now, v);
	s->limit = v->limit;
	if (now >= s->probe_due_ns) {
		uint64_t next = s->confirmed_ns + own_jittered(g);

		if (s->base && next > now)
			s->probe_due_ns = next; /* confirmed meanwhile */
		else
			own_start_probe(g, v);
	}
	s->limit = v->limit;
}

/* ---- dispatch --------------------------------------------------------------------- */

uint32_t bha_default_min(enum bh_adaptive_algo a)
{
	switch (a) {
	case BH_ADAPTIVE_AIMD:
	case BH_ADAPTIVE_GRADIENT2:
		return 20;
	case BH_ADAPTIVE_VEGAS:
		return 1;
	case BH_ADAPTIVE_ENVOY:
		return 3;
	default:
		return OWN_MIN;
	}
}

uint32_t bha_default_max(enum bh_adaptive_algo a, uint32_t start)
{
	uint64_t m;

	switch (a) {
	case BH_ADAPTIVE_AIMD:
	case BH_ADAPTIVE_GRADIENT2:
		return 200;
	case BH_ADAPTIVE_VEGAS:
	case BH_ADAPTIVE_ENVOY:
		return 1000;
	default:
		m = 4ull * start;
		m = m < 1000 ? 1000 : m;
		return m > BH_LIMIT_MAX ? BH_LIMIT_MAX : (uint32_t)m;
	}
}

uint64_t bha_min_rtt(enum bh_adaptive_algo a)
{
	return a == BH_ADAPTIVE_AIMD || a == BH_ADAPTIVE_VEGAS || a == BH_ADAPTIVE_GRADIENT2
		       ? 100 * 1000ull
		       : 0;
}

bool bha_hist_drops(enum bh_adaptive_algo a)
{
	return a == BH_ADAPTIVE_ENVOY;
}

void bha_algo_init(struct bha_algo *g, const struct bh_adaptive_config *cfg, uint32_t start,
		   uint64_t now, struct bha_verdict *v)
{
	memset(g, 0, sizeof(*g));
	memset(v, 0, sizeof(*v));
	g->kind = cfg->algo;
	g->min = cfg->min_limit ? cfg->min_limit : bha_default_min(g->kind);
	g->max = cfg->max_limit ? cfg->max_limit : bha_default_max(g->kind, start);
	g->max = g->max < g->min ? g->min : g->max;
	g->pct = cfg->percentile ? cfg->percentile : 50;
	g->window_ns = cfg->window_ns;
	g->probe_interval_ns = cfg->probe_interval_ns
				       ? cfg->probe_interval_ns
				       : g->kind == BH_ADAPTIVE_ENVOY ? ENVOY_INTERVAL_NS
								      : OWN_INTERVAL_NS;
	g->rng = cfg->seed ? cfg->seed : 0x9e3779b97f4a7c15ull;
	start = start < g->min ? g->min : start > g->max ? g->max : start;
	v->limit = start;
	v->reason = BH_ADAPTIVE_START;
	switch (g->kind) {
	case BH_ADAPTIVE_AIMD:
		g->u.aimd.limit = start;
		fixed_window(g, NF_WINDOW_NS, v);
		break;
	case BH_ADAPTIVE_VEGAS:
		g->u.vegas.est = start;
		vegas_jitter(g);
		fixed_window(g, NF_WINDOW_NS, v);
		break;
	case BH_ADAPTIVE_GRADIENT2:
		g->u.g2.est = start;
		fixed_window(g, NF_WINDOW_NS, v);
		break;
	case BH_ADAPTIVE_ENVOY:
		g->u.envoy.limit = start;
		fixed_window(g, ENVOY_WINDOW_NS, v);
		envoy_enter_min_rtt(g, v); /* Envoy measures minRTT first */
		break;
	default:
		g->u.own.limit = start;
		g->u.own.last_good = g->max; /* slow start until the first sign of queueing */
		own_window_rules(g, v);
		own_start_probe(g, v);
		g->u.own.limit = v->limit;
		break;
	}
	(void)now;
}

void bha_algo_window(struct bha_algo *g, const struct bha_window *w, uint64_t now,
		     struct bha_verdict *v)
{
	switch (g->kind) {
	case BH_ADAPTIVE_AIMD:
		aimd_window(g, w, v);
		break;
	case BH_ADAPTIVE_VEGAS:
		vegas_window(g, w, v);
		break;
	case BH_ADAPTIVE_GRADIENT2:
		g2_window(g, w, v);
		break;
	case BH_ADAPTIVE_ENVOY:
		envoy_window(g, w, now, v);
		break;
	default:
		own_window(g, w, now, v);
		g->baseline_ns = g->u.own.base;
		break;
	}
}

/* Another process's controller set the limit (the follower of a host-wide
 * bulkhead, src/shm/role.h): go on from it as if this algorithm had chosen
 * it, with no cut or probe of its own pending. */
void bha_algo_follow(struct bha_algo *g, uint32_t limit)
{
	switch (g->kind) {
	case BH_ADAPTIVE_AIMD:
		g->u.aimd.limit = limit;
		break;
	case BH_ADAPTIVE_VEGAS:
		g->u.vegas.est = limit;
		break;
	case BH_ADAPTIVE_GRADIENT2:
		g->u.g2.est = limit;
		break;
	case BH_ADAPTIVE_ENVOY:
		g->u.envoy.limit = limit;
		break;
	default:
		g->u.own.limit = limit;
		g->u.own.in_probe = false;
		g->u.own.check = false;
		g->u.own.dcheck = false;
		break;
	}
}
