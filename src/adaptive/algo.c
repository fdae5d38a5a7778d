/* The limit algorithms' dispatch: one closed window in, the next limit out,
 * by the algorithm a controller was configured with (published.c holds
 * Netflix's and Envoy's, own.c the library's own), their defaults, and the
 * window histogram's percentile that they share. Pure and single-threaded
 * (only the closer runs them). */
#include <string.h>

#include "algo.h"

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

/* The algorithm's own state at the start, and its first window's rules. */
static void start_algo(struct bha_algo *g, uint32_t start, struct bha_verdict *v)
{
	switch (g->kind) {
	case BH_ADAPTIVE_AIMD:
		bha_aimd_start(g, start, v);
		break;
	case BH_ADAPTIVE_VEGAS:
		bha_vegas_start(g, start, v);
		break;
	case BH_ADAPTIVE_GRADIENT2:
		bha_g2_start(g, start, v);
		break;
	case BH_ADAPTIVE_ENVOY:
		bha_envoy_start(g, start, v);
		break;
	default:
		bha_own_start(g, start, v);
		break;
	}
}

void bha_algo_init(struct bha_algo *g, const struct bh_adaptive_config *cfg, uint32_t start,
		   uint64_t now, struct bha_verdict *v)
{
	memset(g, 0, sizeof(*g));
	memset(v, 0, sizeof(*v));
	g->kind = cfg->algo;
	g->min = cfg->min_limit ? cfg->min_limit : bha_default_min(g->kind);
	if (!cfg->min_limit && cfg->max_limit && g->min > cfg->max_limit)
		g->min = cfg->max_limit; /* a defaulted floor yields to an explicit ceiling */
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
	start_algo(g, start, v);
	(void)now;
}

void bha_algo_window(struct bha_algo *g, const struct bha_window *w, uint64_t now,
		     struct bha_verdict *v)
{
	switch (g->kind) {
	case BH_ADAPTIVE_AIMD:
		bha_aimd_window(g, w, v);
		break;
	case BH_ADAPTIVE_VEGAS:
		bha_vegas_window(g, w, v);
		break;
	case BH_ADAPTIVE_GRADIENT2:
		bha_g2_window(g, w, v);
		break;
	case BH_ADAPTIVE_ENVOY:
		bha_envoy_window(g, w, now, v);
		break;
	default:
		bha_own_window(g, w, now, v);
		g->baseline_ns = g->u.own.base;
		break;
	}
}

/* Another process's controller set the limit (the follower of a host-wide
 * bulkhead, src/shm/role.h): go on from it as if this algorithm had chosen
 * it, with no cut or probe of its own pending (Envoy's minRTT window is a
 * measure, not a cut: it goes on, and restores this limit). */
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
		/* a minRTT window goes on (its measure is still wanted), but
		 * what it restores is the limit in force */
		g->u.envoy.limit = limit;
		g->u.envoy.deferred = limit;
		break;
	default:
		g->u.own.limit = limit;
		g->u.own.in_probe = false;
		g->u.own.check = false;
		g->u.own.dcheck = false;
		break;
	}
}
