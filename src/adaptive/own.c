/* The library's own limit algorithm (BH_ADAPTIVE_DEFAULT): a latency
 * percentile against a probed baseline, with a dead band, fast recovery and
 * a check that a cut helped (the rules are below and in docs/adaptive.md).
 * Pure and single-threaded: only the closer runs it. */
#include <math.h>
#include <string.h>

#include "algo.h"

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

#define OWN_PROBE_LIMIT 4
#define OWN_PROBE_SAMPLES 16
#define OWN_PROBE_OK 4 /* fewer OK samples and the probe taught nothing */
#define OWN_MIN_SAMPLES 8
#define OWN_MAX_SAMPLES 1000
#define OWN_LOW 1.10
#define OWN_HIGH 1.30
#define OWN_TARGET 1.15

/* The next probe: the interval, at least 200 round trips (a probe costs a
 * few), jittered by a quarter either way. */
static uint64_t own_jittered(struct bha_algo *g)
{
	double h = (double)g->probe_interval_ns, rtt = 200.0 * (double)g->u.own.rtt_est;

	return ns_of((h > rtt ? h : rtt) * rng_uniform(&g->rng, 0.75, 1.25));
}

static void own_window_rules(const struct bha_algo *g, struct bha_verdict *v)
{
	uint64_t rtt = g->u.own.rtt_est ? g->u.own.rtt_est : 10 * MS;
	uint64_t len = rtt * 4;

	/* the bounds are for the length found; a configured one is kept */
	len = g->window_ns ? g->window_ns : len < 2 * MS ? 2 * MS : len > SEC ? SEC : len;
	v->window_ns = len;
	v->window_max_ns = len > NEVER / 6 ? NEVER : 6 * len;
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
	s->probe_due_ns = sat_add_ns(now, w->ok >= OWN_PROBE_OK ? own_jittered(g)
								 : sat_shl_ns(v->window_ns, 2 + s->probe_fails));
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

void bha_own_window(struct bha_algo *g, const struct bha_window *w, uint64_t now,
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
		uint64_t next = sat_add_ns(s->confirmed_ns, own_jittered(g));

		if (s->base && next > now)
			s->probe_due_ns = next; /* confirmed meanwhile */
		else
			own_start_probe(g, v);
	}
	s->limit = v->limit;
}


void bha_own_start(struct bha_algo *g, uint32_t start, struct bha_verdict *v)
{
	g->u.own.limit = start;
	g->u.own.last_good = g->max; /* slow start until the first sign of queueing */
	own_window_rules(g, v);
	own_start_probe(g, v);
	g->u.own.limit = v->limit;
}
