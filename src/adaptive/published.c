/* The published limit algorithms, each following its source's update rule
 * and defaults (cited in docs/adaptive.md): Netflix concurrency-limits'
 * AIMDLimit, VegasLimit and Gradient2Limit, and Envoy's adaptive
 * concurrency filter (its gradient controller). Pure and single-threaded:
 * only the closer runs them. */
#include <math.h>
#include <string.h>

#include "algo.h"

/* ---- Netflix AIMDLimit ----------------------------------------------------------
 * drop or rtt > timeout (5 s): L = (int)(L x 0.9); else if inflight x 2 >= L:
 * L + 1; then clamp [min 20, max 200]. WindowedLimit feeds it the window's
 * mean latency, its most in flight and whether anything dropped, for windows
 * of at least 10 samples. */

#define NF_WINDOW_READY 10
#define NF_WINDOW_NS SEC

void bha_aimd_window(struct bha_algo *g, const struct bha_window *w, struct bha_verdict *v)
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

void bha_vegas_window(struct bha_algo *g, const struct bha_window *w, struct bha_verdict *v)
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

void bha_g2_window(struct bha_algo *g, const struct bha_window *w, struct bha_verdict *v)
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
#define ENVOY_MIN_RTT_SAMPLES 50
#define ENVOY_MIN_RTT_MAX_NS (10 * SEC)

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
	/* Not in Envoy (whose pin always drains): here the epoch waits for in
	 * flight to reach the pin, which may never happen (holders that are
	 * not sampled, a host-wide follower); give up after a while. */
	v->window_max_ns = ENVOY_MIN_RTT_MAX_NS;
	v->probe_samples = ENVOY_MIN_RTT_SAMPLES;
}

static uint64_t envoy_jittered(struct bha_algo *g)
{
	uint64_t ms = g->probe_interval_ns / MS;
	uint64_t range = (uint64_t)ceil((double)ms * 0.15);

	ms += range ? rng_next(&g->rng) % range : 0;
	return ms > NEVER / MS ? NEVER : ms * MS;
}

void bha_envoy_window(struct bha_algo *g, const struct bha_window *w, uint64_t now,
		      struct bha_verdict *v)
{
	struct bha_envoy *s = &g->u.envoy;

	fixed_window(g, ENVOY_WINDOW_NS, v);
	v->min_samples = 1;
	if (s->in_min_rtt) {
		/* A window that ended on its deadline with fewer samples keeps
		 * the minRTT it had (a p50 of a few is noise), unless there is
		 * none yet: the few are better than 0. */
		if (w->hist_n >= ENVOY_MIN_RTT_SAMPLES || (s->min_rtt == 0 && w->hist_n > 0))
			s->min_rtt = w->pct_ns;
		envoy_set(g, s->deferred, v, BH_ADAPTIVE_RESTORE); /* still in the window */
		s->in_min_rtt = false;
		s->next_min_rtt_ns = sat_add_ns(now, envoy_jittered(g));
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


/* ---- the first verdicts ----------------------------------------------------------- */

void bha_aimd_start(struct bha_algo *g, uint32_t start, struct bha_verdict *v)
{
	g->u.aimd.limit = start;
	fixed_window(g, NF_WINDOW_NS, v);
}

void bha_vegas_start(struct bha_algo *g, uint32_t start, struct bha_verdict *v)
{
	g->u.vegas.est = start;
	vegas_jitter(g);
	fixed_window(g, NF_WINDOW_NS, v);
}

void bha_g2_start(struct bha_algo *g, uint32_t start, struct bha_verdict *v)
{
	g->u.g2.est = start;
	fixed_window(g, NF_WINDOW_NS, v);
}

void bha_envoy_start(struct bha_algo *g, uint32_t start, struct bha_verdict *v)
{
	g->u.envoy.limit = start;
	fixed_window(g, ENVOY_WINDOW_NS, v);
	envoy_enter_min_rtt(g, v); /* Envoy measures minRTT first */
}
