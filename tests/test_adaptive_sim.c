/* Adaptive limits in the simulator: every scenario, every contender,
 * asserted against pass bands (the style of Vector's adaptive-concurrency
 * scenario tests). A band is checked on the second half of one phase: the
 * time-weighted mean limit, the goodput (calls answered in time, per
 * second) and the P99 latency callers saw. The library's default must
 * behave in every scenario; the published algorithms' bands record how
 * each of them behaves, failures included, so a scenario that stopped
 * showing the failure it is about would fail too.
 *
 * BH_SIM_PRINT=1 prints what every run measured; BH_SIM_ONLY=<scenario>
 * runs one; BH_SIM_TRACE=<scenario>:<contender>:<from_s>:<to_s> prints that
 * run's windows. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "adaptive_scenarios.h"

#define ANY -1.0

struct band {
	double lo, hi; /* ANY: unbounded on that side */
};

struct expect {
	int phase; /* -1 ends the list */
	struct band limit, goodput, p99_ms;
};

#define X(ph, llo, lhi, glo, ghi, plo, phi) \
	{ ph, { llo, lhi }, { glo, ghi }, { plo, phi } }
#define END { -1, { 0, 0 }, { 0, 0 }, { 0, 0 } }
#define MAXX 4

/* expectations[scenario][contender]: the evidence, in numbers. The
 * dependency's capacity is knee / service time: 4000/s at knee 40 and
 * 10 ms (drift: 1000/s; capacity-step after the step: 1000/s;
 * slow-not-overloaded after the slowdown: 800/s). */
static const struct expect expectations[SC_COUNT][C_COUNT][MAXX] = {
	[SC_KNEE] = {
		/* the knee is 40: a limit near it serves all the dependency can,
		 * with less latency than the static 157 */
		[C_DEFAULT] = { X(0, 40, 60, 3700, ANY, ANY, 45), END },
		[C_STATIC] = { X(0, 156, 158, 3700, ANY, 60, ANY), END },
		[C_AIMD] = { X(0, 40, 60, 3700, ANY, ANY, 45), END },
		[C_VEGAS] = { X(0, 40, 50, 3700, ANY, ANY, 45), END },
		[C_GRADIENT2] = { X(0, 38, 50, 3700, ANY, ANY, 45), END },
		[C_ENVOY] = { X(0, 48, 60, 3700, ANY, ANY, 45), END },
	},
	[SC_LUCKY] = {
		/* Vegas keeps the lucky minimum and strangles itself */
		[C_DEFAULT] = { X(0, 40, 60, 3700, ANY, ANY, 40), END },
		[C_STATIC] = { X(0, 124, 126, 3700, ANY, 45, ANY), END },
		[C_AIMD] = { X(0, 40, 60, 3700, ANY, ANY, 40), END },
		[C_VEGAS] = { X(0, ANY, 15, ANY, 1500, ANY, ANY), END },
		[C_GRADIENT2] = { X(0, 38, 50, 3700, ANY, ANY, 40), END },
		[C_ENVOY] = { X(0, 50, 62, 3700, ANY, ANY, 40), END },
	},
	[SC_DRIFT] = {
		/* 15 minutes over capacity at a knee of 10: Gradient2's long
		 * average catches up and its limit climbs; AIMD, blind to
		 * latency, sits at its maximum; both pay in P99 */
		[C_DEFAULT] = { X(0, 10, 15, 950, ANY, ANY, 75), END },
		[C_STATIC] = { X(0, 31, 33, 950, ANY, 80, ANY), END },
		[C_AIMD] = { X(0, 190, 201, 950, ANY, 200, ANY), END },
		[C_VEGAS] = { X(0, 15, 30, 950, ANY, ANY, 90), END },
		[C_GRADIENT2] = { X(0, 80, ANY, 950, ANY, 150, ANY), END },
		[C_ENVOY] = { X(0, 10, 20, 950, ANY, ANY, 75), END },
	},
	[SC_CAPACITY] = {
		/* knee 40 -> 20 and 10 -> 20 ms: the old baseline says
		 * "queueing" at any limit; Vegas believes it and starves,
		 * AIMD does not look and queues */
		[C_DEFAULT] = { X(0, 40, 60, 3700, ANY, ANY, 40), X(1, 20, 30, 950, ANY, ANY, 100), END },
		[C_STATIC] = { X(1, 124, 126, 950, ANY, 150, ANY), END },
		[C_AIMD] = { X(1, 70, ANY, 950, ANY, 140, ANY), END },
		[C_VEGAS] = { X(1, ANY, 16, ANY, 700, ANY, ANY), END },
		[C_GRADIENT2] = { X(1, 20, 30, 950, ANY, ANY, 100), END },
		[C_ENVOY] = { X(1, 20, 35, 950, ANY, ANY, 100), END },
	},
	[SC_ALL_DROP] = {
		/* every call refused in 1 ms for 20 s: back off to the floor,
		 * come back after. Envoy reads the fast refusals as a fast
		 * dependency and opens up to its maximum; Vegas and Gradient2
		 * come out of it slowly */
		[C_DEFAULT] = { X(1, 2, 4, ANY, ANY, ANY, ANY), X(2, 40, 60, 3700, ANY, ANY, 40), END },
		[C_STATIC] = { X(1, 124, 126, 0, 0, ANY, ANY), X(2, 124, 126, 3700, ANY, ANY, ANY), END },
		[C_AIMD] = { X(1, 19, 21, 0, 0, ANY, ANY), X(2, 25, 45, 3000, ANY, ANY, ANY), END },
		[C_VEGAS] = { X(2, ANY, 20, ANY, 2000, ANY, ANY), END },
		[C_GRADIENT2] = { X(2, ANY, 25, ANY, 2500, ANY, ANY), END },
		[C_ENVOY] = { X(1, 900, ANY, 0, 0, ANY, ANY), X(2, 45, 65, 3700, ANY, ANY, ANY), END },
	},
	[SC_APP_LIMITED] = {
		/* 1000/s need about 10 at once: no growth without use (Envoy
		 * has no such guard and runs to 1000); then 6000/s */
		[C_DEFAULT] = { X(0, 10, 100, 990, ANY, ANY, 20), X(1, 40, 60, 3700, ANY, ANY, 40), END },
		[C_STATIC] = { X(1, 20, 22, ANY, 2500, ANY, ANY), END },
		[C_AIMD] = { X(0, ANY, 60, 990, ANY, ANY, 20), X(1, 60, 90, 3700, ANY, ANY, 50), END },
		[C_VEGAS] = { X(0, ANY, 60, 990, ANY, ANY, 20), X(1, 40, 50, 3700, ANY, ANY, 40), END },
		[C_GRADIENT2] = { X(0, ANY, 60, 990, ANY, ANY, 20), X(1, 55, 75, 3700, ANY, ANY, 45), END },
		[C_ENVOY] = { X(0, 900, ANY, 990, ANY, ANY, 20), X(1, 48, 62, 3700, ANY, ANY, 40), END },
	},
	[SC_OUTAGE] = {
		/* no answers for 10 s, then the first 2 s after it (phase 2):
		 * back to full goodput at once; AIMD and Gradient2 sit at their
		 * floor of 20 and serve half */
		[C_DEFAULT] = { X(1, ANY, 6, 0, 0, ANY, ANY), X(2, ANY, ANY, 3500, ANY, ANY, 60),
				X(3, 40, 60, 3700, ANY, ANY, 40), END },
		[C_STATIC] = { X(2, 124, 126, 3700, ANY, ANY, ANY), END },
		[C_AIMD] = { X(2, 19, 21, ANY, 2200, ANY, ANY), END },
		[C_VEGAS] = { X(2, 25, 40, 3000, ANY, ANY, ANY), END },
		[C_GRADIENT2] = { X(2, 19, 21, ANY, 2200, ANY, ANY), END },
		[C_ENVOY] = { X(2, 45, 60, 3700, ANY, ANY, ANY), END },
	},
	[SC_SLOW] = {
		/* 10 -> 50 ms with the knee still 40 (capacity 800/s): the
		 * right limit stays near 40, also in the seconds right after
		 * the change (phase 1); Vegas and Gradient2 read the slowdown
		 * as queueing and cut to a fraction of capacity */
		[C_DEFAULT] = { X(0, 40, 60, 3700, ANY, ANY, 40), X(1, 36, 60, 750, ANY, ANY, 160),
				X(2, 36, 60, 750, ANY, ANY, 160), END },
		[C_STATIC] = { X(2, 124, 126, 750, ANY, 200, ANY), END },
		[C_AIMD] = { X(2, 70, ANY, 750, ANY, 180, ANY), END },
		[C_VEGAS] = { X(2, ANY, 16, ANY, 300, ANY, ANY), END },
		[C_GRADIENT2] = { X(2, ANY, 25, ANY, 500, ANY, ANY), END },
		[C_ENVOY] = { X(2, 40, 70, 750, ANY, ANY, 170), END },
	},
	[SC_ERRORS] = {
		/* 30% of calls refused for 10 s whatever the load: backing
		 * off would not reduce them. AIMD halves its goodput; Vegas's
		 * -1 per window leaves it low after the burst */
		[C_DEFAULT] = { X(1, 36, 60, 3400, ANY, ANY, 40), X(2, 40, 60, 3700, ANY, ANY, 40), END },
		[C_STATIC] = { X(1, 124, 126, 3700, ANY, ANY, ANY), END },
		[C_AIMD] = { X(1, 20, 22, ANY, 2000, ANY, ANY), END },
		[C_VEGAS] = { X(2, ANY, 30, ANY, 2600, ANY, ANY), END },
		[C_GRADIENT2] = { X(1, 35, 50, 3400, ANY, ANY, ANY), END },
		[C_ENVOY] = { X(1, 55, 75, 3700, ANY, ANY, ANY), END },
	},
};

static void print_result(enum scenario_id sc, enum contender k, const struct sim_config *c,
			 const struct sim_result *r)
{
	printf("%-20s %-10s", scenario_name[sc], contender_name[k]);
	for (unsigned i = 0; i < c->nphases; i++)
		printf(" | ph%u L %.0f [%.0f-%.0f] gp %.0f p99 %.1f rej %.0f drop %.0f", i,
		       r->phase[i].limit_mean, r->phase[i].limit_min, r->phase[i].limit_max,
		       r->phase[i].goodput, r->phase[i].p99_ms, r->phase[i].rejected,
		       r->phase[i].dropped);
	printf(" | probes %llu windows %llu\n", (unsigned long long)r->ctl.probes,
	       (unsigned long long)r->ctl.windows);
}

/* BH_SIM_TRACE=scenario:contender:from:to prints that run's windows. */
static void trace_config(enum scenario_id sc, enum contender k, struct sim_config *c)
{
	const char *t = getenv("BH_SIM_TRACE");
	char sn[64], cn[64];
	double from, to;

	if (t && sscanf(t, "%63[^:]:%63[^:]:%lf:%lf", sn, cn, &from, &to) == 4 &&
	    !strcmp(sn, scenario_name[sc]) && !strcmp(cn, contender_name[k])) {
		c->trace_from_s = from;
		c->trace_to_s = to;
	}
}

static int in_band(double x, struct band b)
{
	return (b.lo == ANY || x >= b.lo) && (b.hi == ANY || x <= b.hi);
}

static int check_band(enum scenario_id sc, enum contender k, int ph, const char *what, double x,
		      struct band b)
{
	if (in_band(x, b))
		return 0;
	print_message("%s/%s phase %d: %s %.1f outside [%g, %g] (-1: open)\n",
		      scenario_name[sc], contender_name[k], ph, what, x, b.lo, b.hi);
	return 1;
}

static int run_one(enum scenario_id sc, enum contender k)
{
	struct sim_config c;
	struct sim_result r;
	int bad = 0;

	scenario_config(sc, &c);
	contender_config(k, &c);
	trace_config(sc, k, &c);
	assert_int_equal(sim_run(&c, &r), 0);
	if (getenv("BH_SIM_PRINT"))
		print_result(sc, k, &c, &r);
	/* The controller saw every call that got a permit, exactly once. */
	if (c.mode == SIM_ADAPTIVE)
		assert_int_equal(r.ctl.ok + r.ctl.dropped + r.ctl.ignored + r.ctl.discarded,
				 r.samples);
	for (const struct expect *e = expectations[sc][k]; e->phase >= 0; e++) {
		const struct sim_stats *p = &r.phase[e->phase];

		bad += check_band(sc, k, e->phase, "limit", p->limit_mean, e->limit);
		bad += check_band(sc, k, e->phase, "goodput", p->goodput, e->goodput);
		bad += check_band(sc, k, e->phase, "p99 ms", p->p99_ms, e->p99_ms);
	}
	return bad;
}

static void scenario(void **state)
{
	enum scenario_id sc = (enum scenario_id)(uintptr_t)*state;
	int bad = 0;

	for (int k = 0; k < C_COUNT; k++)
		bad += run_one(sc, k);
	assert_int_equal(bad, 0);
}

/* The same run twice gives the same numbers: the bands are exact tests. */
static void deterministic(void **state)
{
	struct sim_config c;
	struct sim_result a, b;

	(void)state;
	scenario_config(SC_CAPACITY, &c);
	contender_config(C_DEFAULT, &c);
	assert_int_equal(sim_run(&c, &a), 0);
	assert_int_equal(sim_run(&c, &b), 0);
	assert_memory_equal(&a.phase, &b.phase, sizeof(a.phase));
	assert_true(a.ctl.windows == b.ctl.windows && a.ctl.changes == b.ctl.changes);
}

/* Sampling after the release instead of before changes the in-flight
 * figure the guard sees by one; the default still finds the knee. */
static void sample_after_release(void **state)
{
	struct sim_config c;
	struct sim_result r;

	(void)state;
	scenario_config(SC_KNEE, &c);
	contender_config(C_DEFAULT, &c);
	c.sample_after_release = true;
	assert_int_equal(sim_run(&c, &r), 0);
	assert_true(in_band(r.phase[0].limit_mean, (struct band){ 40, 60 }));
	assert_true(r.phase[0].goodput >= 3700);
}

#define SCENARIO(id) cmocka_unit_test_prestate(scenario, (void *)(uintptr_t)(id))

int main(void)
{
	const char *only = getenv("BH_SIM_ONLY");
	struct CMUnitTest tests[SC_COUNT + 2];
	size_t n = 0;

	for (int sc = 0; sc < SC_COUNT; sc++) {
		if (only && strcmp(only, scenario_name[sc]))
			continue;
		tests[n] = (struct CMUnitTest)SCENARIO(sc);
		tests[n++].name = scenario_name[sc];
	}
	if (!only) {
		tests[n++] = (struct CMUnitTest)cmocka_unit_test(deterministic);
		tests[n++] = (struct CMUnitTest)cmocka_unit_test(sample_after_release);
	}
	return _cmocka_run_group_tests("adaptive_sim", tests, n, NULL, NULL);
}
