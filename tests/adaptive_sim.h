/* A deterministic simulator for adaptive limits: virtual time, a real
 * bulkhead (asynchronous acquisition, so one thread plays every caller),
 * a real controller on the virtual clock, and a simulated dependency with a
 * concurrency knee: `knee` servers, a FIFO queue in front of them, so
 * latency is flat up to knee calls in flight and grows linearly beyond.
 * Callers arrive as a Poisson process, wait for a permit at most
 * queue_timeout, for the answer at most timeout (then the call counts as
 * dropped and its permit goes back; the dependency still does the work, as
 * real ones do). Phases change the load, the capacity, the latency, the
 * errors. Used by tests/test_adaptive_sim.c (pass bands) and
 * bench/bench_adaptive.c (the comparison table). */
#ifndef BH_ADAPTIVE_SIM_H
#define BH_ADAPTIVE_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "bulkhead/adaptive.h"

#define SIM_PHASES 8

struct sim_phase {
	double at_s;       /* starts at (the first at 0) */
	double rate;       /* arrivals per second */
	uint32_t knee;     /* calls the dependency serves at once */
	double service_ms; /* unloaded latency, median */
	double sigma;      /* lognormal spread of it (0: none) */
	double err_prob;   /* share of calls refused at once as overloaded (dropped) */
	double err_ms;     /* how fast such a refusal comes */
	bool blackhole;    /* no answers at all: every call times out */
};

enum sim_mode { SIM_STATIC, SIM_ADAPTIVE };

struct sim_config {
	const char *name;
	struct sim_phase phase[SIM_PHASES];
	unsigned nphases;
	double duration_s;
	uint32_t start_limit;    /* the bulkhead's limit at creation */
	uint32_t queue;          /* its queue capacity */
	double queue_timeout_ms; /* callers wait this long for a permit */
	double timeout_ms;       /* and this long for the answer */
	uint32_t lucky_first;    /* the first n calls answer in lucky_ms */
	double lucky_ms;
	bool sample_after_release;
	uint64_t seed;
	double trace_from_s, trace_to_s; /* print every window closed in between */
	enum sim_mode mode;
	struct bh_adaptive_config acfg; /* SIM_ADAPTIVE */
};

struct sim_stats {
	double goodput;    /* calls answered in time, per second */
	double p50_ms, p99_ms; /* their latency as callers saw it (queue + call) */
	double limit_mean, limit_min, limit_max; /* time-weighted / extremes */
	double rejected;   /* per second: no permit (queue full or queue timeout) */
	double dropped;    /* per second: timed out or refused by the dependency */
	uint64_t ok;
};

struct sim_result {
	struct sim_stats phase[SIM_PHASES]; /* over the second half of each phase */
	struct sim_stats all;               /* the whole run */
	uint64_t samples;                   /* samples given to the controller */
	struct bh_adaptive_stats ctl;       /* the controller at the end */
};

/* Run one scenario. 0, or a negative errno (setup failed). */
int sim_run(const struct sim_config *cfg, struct sim_result *out);

/* The static limit `bulkhead-size` computes for the scenario's first phase:
 * rate x P99 x 1.3 (P99 of the lognormal service time). */
uint32_t sim_static_limit(const struct sim_config *cfg);

#endif /* BH_ADAPTIVE_SIM_H */
