/* Sizing a bulkhead: the usual rules of thumb of service isolation
 * (Little's law on the P99 with a safety factor, a queue of twice the
 * permits that a caller's timeout can absorb), the checks they imply, and
 * an M/M/c/K queueing model that says what the chosen sizes buy. Pure
 * functions, no I/O: the bulkhead-size command and the demo print, the
 * tests check the numbers. docs/sizing.md derives each rule.
 *
 * Units: seconds and calls per second throughout. */
#ifndef BH_TOOLS_SIZING_H
#define BH_TOOLS_SIZING_H

#include <stdbool.h>
#include <stdint.h>

/* max_concurrent before rounding: peak QPS x P99 x safety factor, Little's
 * law applied to the tail (160/s x 0.03 s x 1.3 = 6.24). */
double bhz_concurrency_raw(double qps, double p99_s, double safety);

/* Round a size up, forgiving the last bits of floating-point noise, so that
 * 50 x 0.2 x 1.3 gives 13 and not 14: up to 1e-9 above a whole number is
 * that number, as in bh_pool_size (both use lib/sizing.h). At least 1. */
uint32_t bhz_round_up(double x);

/* The rule of thumb for the queue: twice max_concurrent. */
uint32_t bhz_queue_rule(uint32_t concurrency);

/* Expected wait of the last of `queue` waiters: they leave the queue as
 * `concurrency` permits turn over once per mean service time
 * (32 waiters / 16 permits x 100 ms = 200 ms). */
double bhz_worst_queue_wait(uint32_t queue, uint32_t concurrency, double mean_s);

/* A full queue drained at the arrival rate, queue / QPS (16 / 160/s =
 * 100 ms); the usual rule is that it must not exceed the caller's timeout. */
double bhz_queue_over_qps(uint32_t queue, double qps);

/* What bounds a recommended queue. */
enum bhz_queue_bound {
	BHZ_QUEUE_RULE,    /* nothing cut it: 2 x max_concurrent */
	BHZ_QUEUE_DRAIN,   /* a longer one, drained at the arrival rate, outlasts the timeout */
	BHZ_QUEUE_WAIT,    /* its last waiter, served by the permits, would wait past it */
	BHZ_QUEUE_THREADS, /* queued callers hold threads: permits + queue <= threads */
};

/* The queue recommended for c permits: twice c, cut to what the timeout
 * can use by both checks above (a waiter who cannot be served before its
 * caller gives up only holds the caller longer) and, when threads is not 0,
 * to threads - c (each queued caller blocks a thread, and the dependency
 * may hold at most `threads`). *bound, when not NULL, says which of these
 * set the result: the smallest; on a tie the hard limit (threads) first,
 * then the drain, then the wait. */
uint32_t bhz_queue_recommend(double qps, double mean_s, double timeout_s, uint32_t c,
			     uint32_t threads, enum bhz_queue_bound *bound);

/* The longest queue whose last waiter still expects to be served within
 * timeout_s (inverts bhz_worst_queue_wait). */
uint32_t bhz_queue_fitting(double timeout_s, uint32_t concurrency, double mean_s);

/* Whether a fault latency is a slowdown past the P99 the permits are sized
 * for (strictly above it). A "fault" at or below the P99 is latency the
 * bulkhead already carries; bulkhead-size and bulkhead-demo both refuse it
 * (cli_check_fault). */
bool bhz_fault_exceeds_p99(double fault_s, double p99_s);

/*
 * M/M/c/K: Poisson arrivals at lambda, exponential service with mean
 * mean_s, c servers (permits), room for k more (the queue), FIFO, callers
 * who never give up. Probabilities are of what an arriving call sees
 * (PASTA), so p_reject is the share of calls turned away at once.
 */
struct bhz_model {
	double lambda, mu;
	uint32_t c, k;
	double log_a, log_rho, log_tc, log_norm; /* private: p_n in log space */
};

struct bhz_result {
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
int bhz_model_init(struct bhz_model *m, double lambda, double mean_s, uint32_t c, uint32_t k);

/* Probability that an arrival finds exactly n calls in the system. */
double bhz_model_pn(const struct bhz_model *m, uint32_t n);

void bhz_model_solve(const struct bhz_model *m, struct bhz_result *out);

/* P(queue wait > t) for an admitted call: one who finds n >= c calls waits
 * for n - c + 1 departures at rate c x mu, an Erlang distribution. */
double bhz_model_wait_tail(const struct bhz_model *m, double t_s);

/* The q-quantile of the queue wait of admitted calls (0 when at least a
 * fraction q does not wait at all). */
double bhz_model_wait_quantile(const struct bhz_model *m, double q);

#endif /* BH_TOOLS_SIZING_H */
