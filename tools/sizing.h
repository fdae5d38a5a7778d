/* Sizing a bulkhead: the rules of thumb of the seeds (Little's law with a
 * P99 and a safety factor), the checks they imply, and an M/M/c/K queueing
 * model that says what the chosen sizes buy. Pure functions, no I/O: the
 * bulkhead-size command and the demo print, the tests check the numbers.
 *
 * Units: seconds and calls per second throughout. */
#ifndef BH_TOOLS_SIZING_H
#define BH_TOOLS_SIZING_H

#include <stdint.h>

/* max_concurrent before rounding: peak QPS x P99 x safety factor
 * (seed 002 section 2.3; 160 x 0.03 x 1.3 = 6.24). */
double bhs_concurrency_raw(double qps, double p99_s, double safety);

/* Round a size up, forgiving the last bits of floating-point noise, so that
 * 50 x 0.2 x 1.3 gives 13 and not 14. At least 1. */
uint32_t bhs_round_up(double x);

/* The rule of thumb for the queue: twice max_concurrent (seed 002). */
uint32_t bhs_queue_rule(uint32_t concurrency);

/* Expected wait of the last of `queue` waiters: they leave the queue as
 * `concurrency` permits turn over once per mean service time (seed 000:
 * 32 / 16 x 100 ms = 200 ms). */
double bhs_worst_queue_wait(uint32_t queue, uint32_t concurrency, double mean_s);

/* Seed 002's check: a full queue drained at the arrival rate, queue / QPS
 * (16 / 160 = 100 ms); it must not exceed the caller's timeout. */
double bhs_queue_over_qps(uint32_t queue, double qps);

/* The queue bulkhead-size recommends for c permits: twice c, cut to what
 * the timeout can use by both checks above (a waiter who cannot be served
 * before its caller gives up only holds the caller longer). */
uint32_t bhs_queue_recommend(double qps, double mean_s, double timeout_s, uint32_t c);

/* The longest queue whose last waiter still expects to be served within
 * timeout_s (inverts bhs_worst_queue_wait). */
uint32_t bhs_queue_fitting(double timeout_s, uint32_t concurrency, double mean_s);

/*
 * M/M/c/K: Poisson arrivals at lambda, exponential service with mean
 * mean_s, c servers (permits), room for k more (the queue), FIFO, callers
 * who never give up. Probabilities are of what an arriving call sees
 * (PASTA), so p_reject is the share of calls turned away at once.
 */
struct bhs_model {
	double lambda, mu;
	uint32_t c, k;
	double log_a, log_rho, log_tc, log_norm; /* private: p_n in log space */
};

struct bhs_result {
	/* Shares of all arrivals: p_reject + p_wait + served at once = 1. */
	double p_reject;       /* finds c + k calls: -EBUSY at once */
	double p_wait;         /* finds every permit taken, room to queue */
	double mean_wait_s;    /* mean queue wait of admitted calls */
	double mean_in_flight; /* mean permits held */
	double mean_queued;    /* mean waiters */
	double throughput;     /* calls admitted per second */
	double utilisation;    /* mean_in_flight / c */
};

/* 0, or -EINVAL when lambda or mean_s is not a positive finite number or
 * c is 0. */
int bhs_model_init(struct bhs_model *m, double lambda, double mean_s, uint32_t c, uint32_t k);

/* Probability that an arrival finds exactly n calls in the system. */
double bhs_model_pn(const struct bhs_model *m, uint32_t n);

void bhs_model_solve(const struct bhs_model *m, struct bhs_result *out);

/* P(queue wait > t) for an admitted call: one who finds n >= c calls waits
 * for n - c + 1 departures at rate c x mu, an Erlang distribution. */
double bhs_model_wait_tail(const struct bhs_model *m, double t_s);

/* The q-quantile of the queue wait of admitted calls (0 when at least a
 * fraction q does not wait at all). */
double bhs_model_wait_quantile(const struct bhs_model *m, double q);

#endif /* BH_TOOLS_SIZING_H */
