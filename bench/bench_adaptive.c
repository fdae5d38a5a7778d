/* Adaptive limits, two benchmarks:
 *
 *   bench_adaptive cost [--seconds S] [--rounds R]
 *     samples per second (all threads together) of bh_adaptive_sample at
 *     1, 2 and 8 threads, against a sampler
 *     written the way the published controllers are (one mutex around the
 *     window: add the sample to a histogram, check whether the window is
 *     due, close it under the lock), with the same histogram, clock and
 *     window rules. Prints the median of the rounds (interleaved) and the
 *     ratio lock-free / mutex.
 *
 *   bench_adaptive quality
 *     the simulator's scenarios (tests/adaptive_scenarios.h), every
 *     contender: goodput and P99 over the whole run, as the Markdown table
 *     in docs/adaptive.md.
 *
 * A benchmark, not a test: it never fails. Machines here are noisy: read
 * the ratios, not the absolutes. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adaptive/bha.h"
#include "adaptive_scenarios.h"
#include "bulkhead/adaptive.h"
#include "machine.h"

/* ---- the mutex sampler ----------------------------------------------------------- */

struct mutex_sampler {
	pthread_mutex_t m;
	uint32_t buckets[BHA_NB];
	uint64_t n, sum, drops, windows, deadline;
	uint64_t window_ns;
	uint32_t (*in_flight)(void);
	uint32_t peak;
};

static uint64_t coarse_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * BH_SEC + (uint64_t)ts.tv_nsec;
}

static uint32_t no_in_flight(void)
{
	return 3;
}

static void mutex_sample(struct mutex_sampler *s, uint64_t rtt, enum bh_outcome o,
			 unsigned *mine)
{
	/* the clock every 4th sample of a thread, as bh_adaptive_sample does */
	uint64_t now = ++*mine % 4 == 1 ? coarse_now() : 0;
	uint32_t in = s->in_flight();

	pthread_mutex_lock(&s->m);
	if (o == BH_OK) {
		s->buckets[bha_bucket(rtt)]++;
		s->sum += rtt;
		s->n++;
	} else if (o == BH_DROPPED) {
		s->drops++;
	}
	s->peak = in > s->peak ? in : s->peak;
	if (now && now >= s->deadline) {
		/* what a closer does: a percentile, a decision, a new window */
		volatile uint64_t p = bha_percentile(s->buckets, s->n, 50);

		(void)p;
		memset(s->buckets, 0, sizeof(s->buckets));
		s->n = s->sum = s->drops = s->peak = 0;
		s->windows++;
		s->deadline = now + s->window_ns;
	}
	pthread_mutex_unlock(&s->m);
}

/* ---- the lock-free one, over a target that costs what a bulkhead's does -------- */

static int t_set(void *ctx, uint32_t l)
{
	(void)ctx;
	(void)l;
	return 0;
}

static uint32_t t_limit(void *ctx)
{
	(void)ctx;
	return 100;
}

static _Atomic uint64_t fake_word;

static uint32_t t_in_flight(void *ctx)
{
	(void)ctx;
	return (uint32_t)atomic_load_explicit(&fake_word, memory_order_relaxed);
}

/* ---- the runs ---------------------------------------------------------------------- */

struct run {
	bh_adaptive_t *a;
	struct mutex_sampler *m;
	unsigned iters;
	_Atomic unsigned *go;
};

static void *worker(void *arg)
{
	struct run *r = arg;
	uint64_t x = (uint64_t)(uintptr_t)r | 1;
	unsigned mine = 0;

	while (!atomic_load(r->go))
		;
	for (unsigned i = 0; i < r->iters; i++) {
		uint64_t rtt;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		rtt = 1000000 + (x & 0xfffff);
		if (r->a)
			bh_adaptive_sample(r->a, rtt, BH_OK);
		else
			mutex_sample(r->m, rtt, BH_OK, &mine);
	}
	return NULL;
}

/* Samples per second over all the threads of one timed run (threads
 * outnumber cores here: per-thread times would count the waits). */
static double timed(unsigned threads, bool lockfree, unsigned iters)
{
	struct bha_target tgt = { t_set, t_limit, t_in_flight, NULL, NULL };
	struct bh_adaptive_config c = { .window_ns = 10 * BH_MSEC, .seed = 1 };
	struct mutex_sampler ms = { .m = PTHREAD_MUTEX_INITIALIZER, .window_ns = 10 * BH_MSEC,
				    .in_flight = no_in_flight };
	struct run r[8];
	pthread_t tid[8];
	_Atomic unsigned go = 0;
	bh_adaptive_t *a = NULL;
	uint64_t t0;

	if (lockfree) {
		if (bha_create(&c, &tgt, 100, &a) < 0)
			return -1;
		bha_start(a);
	}
	for (unsigned i = 0; i < threads; i++) {
		r[i] = (struct run){ .a = a, .m = &ms, .iters = iters, .go = &go };
		pthread_create(&tid[i], NULL, worker, &r[i]);
	}
	t0 = bh_now_ns();
	atomic_store(&go, 1);
	for (unsigned i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	t0 = bh_now_ns() - t0;
	if (a)
		bha_destroy(a);
	return (double)iters * threads / ((double)t0 / 1e9);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int cost(double seconds, unsigned rounds)
{
	static const unsigned threads[] = { 1, 2, 8 };
	/* iterations for about `seconds` per run at ~20 ns a sample */
	unsigned iters = (unsigned)(seconds * 5e7);

	printf("bh_adaptive_sample vs a mutex-protected sampler (median of %u rounds, %u samples "
	       "per thread per run)\n",
	       rounds, iters);
	printf("%8s %16s %16s %8s\n", "threads", "lock-free M/s", "mutex M/s", "ratio");
	for (unsigned k = 0; k < 3; k++) {
		double lf[16], mx[16], rr[16];

		for (unsigned i = 0; i < rounds; i++) { /* interleaved: same noise for both */
			lf[i] = timed(threads[k], true, iters);
			mx[i] = timed(threads[k], false, iters);
			rr[i] = lf[i] / mx[i]; /* the ratio: the median of the per-round ones */
		}
		qsort(lf, rounds, sizeof(double), cmp_d);
		qsort(mx, rounds, sizeof(double), cmp_d);
		qsort(rr, rounds, sizeof(double), cmp_d);
		printf("%8u %16.1f %16.1f %7.2fx\n", threads[k], lf[rounds / 2] / 1e6,
		       mx[rounds / 2] / 1e6, rr[rounds / 2]);
	}
	return 0;
}

/* ---- control quality ----------------------------------------------------------------- */

static int quality(void)
{
	printf("| scenario |");
	for (int k = 0; k < C_COUNT; k++)
		printf(" %s |", contender_name[k]);
	printf("\n|---|");
	for (int k = 0; k < C_COUNT; k++)
		printf("---|");
	printf("\n");
	for (int sc = 0; sc < SC_COUNT; sc++) {
		printf("| %s |", scenario_name[sc]);
		for (int k = 0; k < C_COUNT; k++) {
			struct sim_config c;
			struct sim_result r;

			scenario_config(sc, &c);
			contender_config(k, &c);
			if (sim_run(&c, &r) < 0)
				return 1;
			printf(" %.0f/s, %.0f ms |", r.all.goodput, r.all.p99_ms);
		}
		printf("\n");
	}
	printf("\nEach cell: goodput (calls answered within the caller's 1 s, per second) and "
	       "P99 latency of those calls as callers saw them (queue wait included), over the "
	       "whole run. static: the limit bulkhead-size computes for the first phase "
	       "(rate x P99 x 1.3).\n");
	return 0;
}

int main(int argc, char **argv)
{
	double seconds = 0.2;
	unsigned rounds = 3;

	if (argc < 2) {
		fprintf(stderr, "usage: %s cost [--seconds S] [--rounds R] | quality\n", argv[0]);
		return 2;
	}
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = (unsigned)atoi(argv[i + 1]);
	}
	rounds = rounds < 1 ? 1 : rounds > 15 ? 15 : rounds;
	bench_print_machine(stdout);
	if (!strcmp(argv[1], "cost"))
		return cost(seconds, rounds);
	if (!strcmp(argv[1], "quality"))
		return quality();
	fprintf(stderr, "unknown benchmark %s\n", argv[1]);
	return 2;
}
