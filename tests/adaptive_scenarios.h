/* The simulator's scenarios, shared by the pass-band test and the
 * comparison benchmark. One per documented failure mode of the published
 * controllers, plus the plain knee. Every dependency here serves `knee`
 * calls at once in service_ms (capacity knee / service_ms calls a second);
 * callers wait 50 ms for a permit and 1 s for an answer. */
#ifndef BH_ADAPTIVE_SCENARIOS_H
#define BH_ADAPTIVE_SCENARIOS_H

#include "adaptive_sim.h"

enum scenario_id {
	SC_KNEE,        /* overload at a fixed knee, with noise */
	SC_LUCKY,       /* the first answers are much faster than the rest */
	SC_DRIFT,       /* sustained overload for a long time */
	SC_CAPACITY,    /* capacity halves and latency doubles (stale baseline) */
	SC_ALL_DROP,    /* every call refused for a while */
	SC_APP_LIMITED, /* little traffic, then a load step */
	SC_OUTAGE,      /* no answers at all for a while, then recovery */
	SC_SLOW,        /* latency up 5x, capacity (the knee) unchanged */
	SC_ERRORS,      /* a burst of overload errors */
	SC_COUNT
};

static const char *const scenario_name[SC_COUNT] = {
	"knee", "lucky-first", "drift", "capacity-step", "all-drop",
	"app-limited", "outage", "slow-not-overloaded", "error-burst",
};

#define SC_PHASE(at, rate_, knee_, ms, sig) \
	{ .at_s = (at), .rate = (rate_), .knee = (knee_), .service_ms = (ms), .sigma = (sig) }

static inline void scenario_config(enum scenario_id id, struct sim_config *c)
{
	struct sim_config base = {
		.name = scenario_name[id],
		.start_limit = 20,
		.queue = 64,
		.queue_timeout_ms = 50,
		.timeout_ms = 1000,
		.seed = 42 + (uint64_t)id,
	};

	*c = base;
	switch (id) {
	case SC_KNEE: /* 40 at once, 10 ms: 4000/s; offered 6000/s */
		c->phase[0] = (struct sim_phase)SC_PHASE(0, 6000, 40, 10, 0.3);
		c->nphases = 1;
		c->duration_s = 40;
		break;
	case SC_LUCKY: /* a cache answers the first 2000 calls in 1 ms */
		c->phase[0] = (struct sim_phase)SC_PHASE(0, 6000, 40, 10, 0.2);
		c->nphases = 1;
		c->duration_s = 40;
		c->lucky_first = 2000;
		c->lucky_ms = 1;
		break;
	case SC_DRIFT: /* 10 at once, 10 ms: 1000/s; offered 1500/s for 15 min */
		c->phase[0] = (struct sim_phase)SC_PHASE(0, 1500, 10, 10, 0.2);
		c->nphases = 1;
		c->duration_s = 900;
		c->start_limit = 10;
		break;
	case SC_CAPACITY: /* failover to a replica half the size, twice as far */
		c->phase[0] = (struct sim_phase)SC_PHASE(0, 6000, 40, 10, 0.2);
		c->phase[1] = (struct sim_phase)SC_PHASE(30, 6000, 20, 20, 0.2);
		c->nphases = 2;
		c->duration_s = 90;
		break;
	case SC_ALL_DROP: /* the dependency refuses everything for 20 s */
		c->phase[0] = (struct sim_phase)SC_PHASE(0, 6000, 40, 10, 0.2);
		c->phase[1] = (struct sim_phase)SC_PHASE(20, 6000, 40, 10, 0.2);
		c->phase[1].err_prob = 1.0;
		c->phase[1].err_ms = 1;
		c->phase[2] = (struct sim_phase)SC_PHASE(40, 6000, 40, 10, 0.2);
		c->nphases = 3;
		c->duration_s = 60;
		break;
	case SC_APP_LIMITED: /* 1000/s need about 10 at once; then 6000/s */
		c->phase[0] = (struct sim_phase)SC_PHASE(0, 1000, 40, 10, 0.2);
		c->phase[1] = (struct sim_phase)SC_PHASE(60, 6000, 40, 10, 0.2);
		c->nphases = 2;
		c->duration_s = 90;
		break;
	case SC_OUTAGE: /* nothing answers for 10 s (every call times out) */
		c->phase[0] = (struct sim_phase)SC_PHASE(0, 6000, 40, 10, 0.2);
		c->phase[1] = (struct sim_phase)SC_PHASE(20, 6000, 40, 10, 0.2);
		c->phase[1].blackhole = true;
		c->phase[2] = (struct sim_phase)SC_PHASE(30, 6000, 40, 10, 0.2);
		c->phase[3] = (struct sim_phase)SC_PHASE(32, 6000, 40, 10, 0.2);
		c->nphases = 4;
		c->duration_s = 50;
		break;
	case SC_SLOW: /* its own dependency slows down: 10 -> 50 ms, still 40 at
		       * once; phase 1 is the 6 s right after it */
		c->phase[0] = (struct sim_phase)SC_PHASE(0, 6000, 40, 10, 0.2);
		c->phase[1] = (struct sim_phase)SC_PHASE(30, 6000, 40, 50, 0.2);
		c->phase[2] = (struct sim_phase)SC_PHASE(36, 6000, 40, 50, 0.2);
		c->nphases = 3;
		c->duration_s = 90;
		break;
	case SC_ERRORS: /* 30% overload errors for 10 s */
		c->phase[0] = (struct sim_phase)SC_PHASE(0, 6000, 40, 10, 0.2);
		c->phase[1] = (struct sim_phase)SC_PHASE(20, 6000, 40, 10, 0.2);
		c->phase[1].err_prob = 0.3;
		c->phase[1].err_ms = 2;
		c->phase[2] = (struct sim_phase)SC_PHASE(30, 6000, 40, 10, 0.2);
		c->nphases = 3;
		c->duration_s = 60;
		break;
	default:
		break;
	}
}

/* The contenders of the comparison: the static limit bulkhead-size
 * computes, then every algorithm with its own defaults. */
enum contender { C_STATIC, C_DEFAULT, C_AIMD, C_VEGAS, C_GRADIENT2, C_ENVOY, C_COUNT };

static const char *const contender_name[C_COUNT] = {
	"static", "default", "aimd", "vegas", "gradient2", "envoy",
};

static inline void contender_config(enum contender k, struct sim_config *c)
{
	if (k == C_STATIC) {
		c->mode = SIM_STATIC;
		c->start_limit = sim_static_limit(c);
		return;
	}
	c->mode = SIM_ADAPTIVE;
	c->acfg.algo = k == C_DEFAULT ? BH_ADAPTIVE_DEFAULT
		       : k == C_AIMD  ? BH_ADAPTIVE_AIMD
		       : k == C_VEGAS ? BH_ADAPTIVE_VEGAS
		       : k == C_GRADIENT2 ? BH_ADAPTIVE_GRADIENT2
					  : BH_ADAPTIVE_ENVOY;
}

#endif /* BH_ADAPTIVE_SCENARIOS_H */
