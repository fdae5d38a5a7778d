/* The thread pool side by side with its anchor, in one run: a plain bounded
 * pool built the textbook way for this benchmark (fixed threads, a ring, one
 * mutex, one condvar; try-submit fails when full; a call waits on its own
 * mutex+condvar). Both run the same tiny tasks:
 *
 *   handoff    submit to an idle pool, time until the task starts (back to
 *              back: the next submit follows the previous task's end)
 *   slept      the same with a 200 us pause between tasks, so idle threads
 *              have gone to sleep
 *   call       bh_pool_call round trip: submit, run, wake the caller
 *   tput       S submitters push N empty tasks (retrying when full), tasks/s
 *
 * libbulkhead runs twice: as shipped, and with its idle-worker polling off
 * (to show what polling buys). Rounds interleave the contenders so that
 * drift hits all alike; medians, and each ratio the median of the per-round
 * ratios. Waits yield rather than spin, so a busy-waiting benchmark thread
 * never keeps a woken worker off its CPU. A benchmark, not a test: it
 * never fails; on shared machines read the ratios, not the absolutes.
 *
 *   bench_pool [-t threads] [-s submitters] [-q queue] [-r rounds]
 *              [-i latency samples] [-n tasks] [-m hsct] [-k mask]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bulkhead/pool.h"
#include "pool/pool_internal.h" /* bhp_create, for the no-polling variant */
#include "machine.h"
#include "stats.h"

static unsigned opt_threads = 2, opt_submitters = 1, opt_queue = 1024, opt_rounds = 5;
static unsigned opt_iters = 20000, opt_tasks = 400000;
static const char *opt_only = "hsct"; /* metrics to run: handoff, slept, call, tput */
static unsigned opt_impls = 7;        /* bit per contender (profiling one at a time) */

static uint64_t now_ns(void)
{
	return bh_now_ns();
}

/* ---- the anchor: a plain mutex+condvar bounded pool ------------------------ */

struct mc_item {
	void (*fn)(void *);
	void *arg;
};

struct mc_pool {
	pthread_mutex_t m;
	pthread_cond_t not_empty;
	struct mc_item *ring;
	unsigned cap, head, count;
	bool stop;
	pthread_t *tids;
	unsigned nthreads;
};

static void *mc_worker(void *arg)
{
	struct mc_pool *p = arg;

	for (;;) {
		struct mc_item it;

		pthread_mutex_lock(&p->m);
		while (!p->count && !p->stop)
			pthread_cond_wait(&p->not_empty, &p->m);
		if (!p->count) {
			pthread_mutex_unlock(&p->m);
			return NULL;
		}
		it = p->ring[p->head];
		p->head = (p->head + 1) % p->cap;
		p->count--;
		pthread_mutex_unlock(&p->m);
		it.fn(it.arg);
	}
}

static struct mc_pool *mc_create(unsigned threads, unsigned cap)
{
	struct mc_pool *p = calloc(1, sizeof(*p));

	pthread_mutex_init(&p->m, NULL);
	pthread_cond_init(&p->not_empty, NULL);
	p->cap = cap ? cap : 1;
	p->ring = calloc(p->cap, sizeof(*p->ring));
	p->tids = calloc(threads, sizeof(*p->tids));
	p->nthreads = threads;
	for (unsigned i = 0; i < threads; i++)
		pthread_create(&p->tids[i], NULL, mc_worker, p);
	return p;
}

static int mc_submit(struct mc_pool *p, void (*fn)(void *), void *arg)
{
	pthread_mutex_lock(&p->m);
	if (p->count == p->cap) {
		pthread_mutex_unlock(&p->m);
		return -EBUSY;
	}
	p->ring[(p->head + p->count) % p->cap] = (struct mc_item){ fn, arg };
	p->count++;
	pthread_cond_signal(&p->not_empty);
	pthread_mutex_unlock(&p->m);
	return 0;
}

struct mc_call {
	pthread_mutex_t m;
	pthread_cond_t c;
	bool done;
	void (*fn)(void *);
	void *arg;
};

static void mc_call_run(void *arg)
{
	struct mc_call *c = arg;

	c->fn(c->arg);
	pthread_mutex_lock(&c->m);
	c->done = true;
	pthread_cond_signal(&c->c);
	pthread_mutex_unlock(&c->m);
}

static int mc_call(struct mc_pool *p, void (*fn)(void *), void *arg)
{
	struct mc_call c = { .fn = fn, .arg = arg };
	int r;

	pthread_mutex_init(&c.m, NULL);
	pthread_cond_init(&c.c, NULL);
	r = mc_submit(p, mc_call_run, &c);
	if (r == 0) {
		pthread_mutex_lock(&c.m);
		while (!c.done)
			pthread_cond_wait(&c.c, &c.m);
		pthread_mutex_unlock(&c.m);
	}
	pthread_cond_destroy(&c.c);
	pthread_mutex_destroy(&c.m);
	return r;
}

static void mc_destroy(struct mc_pool *p)
{
	pthread_mutex_lock(&p->m);
	p->stop = true;
	pthread_cond_broadcast(&p->not_empty);
	pthread_mutex_unlock(&p->m);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->tids[i], NULL);
	free(p->tids);
	free(p->ring);
	free(p);
}

/* ---- the contenders behind one interface ------------------------------------ */

enum impl { I_MC, I_BH, I_BH_NOSPIN, I_COUNT };
static const char *impl_name[I_COUNT] = { "mutex+condvar pool", "libbulkhead pool",
					  "libbulkhead, no polling" };

struct job { /* one task, usable by both */
	struct bh_task task;
	_Atomic uint64_t started_ns;
	_Atomic bool finished;
	_Atomic uint64_t *counter;
};

static void job_body(struct job *j)
{
	atomic_store_explicit(&j->started_ns, now_ns(), memory_order_relaxed);
	if (j->counter)
		atomic_fetch_add_explicit(j->counter, 1, memory_order_relaxed);
	atomic_store_explicit(&j->finished, true, memory_order_release);
}

static void job_run_bh(struct bh_task *t)
{
	job_body((struct job *)t);
}

static void job_run_mc(void *arg)
{
	job_body(arg);
}

struct pool {
	enum impl kind;
	struct mc_pool *mc;
	bh_pool_t *bh;
};

static void pool_open(struct pool *p, enum impl kind)
{
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	if (kind == I_MC) {
		p->mc = mc_create(opt_threads, opt_queue);
		return;
	}
	struct bh_pool_config cfg = { .name = "bench", .core_threads = opt_threads,
				      .max_threads = opt_threads, .queue_capacity = opt_queue,
				      .flags = BH_POOL_PRESTART };
	/* The real ops, but idle workers never poll: fixed at creation, as
	 * the prestarted workers read it at once. */
	static struct bhp_ops nospin;

	nospin = bhp_real_ops;
	nospin.spin_ns = 0;
	if (bhp_create(&cfg, kind == I_BH_NOSPIN ? &nospin : &bhp_real_ops, &p->bh) != 0) {
		fprintf(stderr, "bh_pool_create failed\n");
		exit(1);
	}
}

static void pool_close(struct pool *p)
{
	if (p->mc)
		mc_destroy(p->mc);
	else
		bh_pool_destroy(p->bh);
}

static int pool_submit(struct pool *p, struct job *j)
{
	j->task = (struct bh_task){ .run = job_run_bh };
	atomic_store_explicit(&j->finished, false, memory_order_relaxed);
	if (p->mc)
		return mc_submit(p->mc, job_run_mc, j);
	return bh_pool_submit(p->bh, &j->task);
}

static int pool_call(struct pool *p, struct job *j)
{
	j->task = (struct bh_task){ .run = job_run_bh };
	if (p->mc)
		return mc_call(p->mc, job_run_mc, j);
	return bh_pool_call(p->bh, &j->task, BH_FOREVER);
}

/* ---- measurements ---------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct lat {
	double p50, p99;
};

static struct lat percentiles(uint64_t *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return (struct lat){ (double)v[n / 2], (double)v[(size_t)n * 99 / 100] };
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	nanosleep(&ts, NULL);
}

/* Submit to an idle pool; time until the task starts. pause_ns between
 * tasks lets idle threads fall asleep. */
static struct lat measure_handoff(enum impl kind, unsigned iters, uint64_t pause_ns)
{
	uint64_t *v = calloc(iters, sizeof(*v));
	struct job j = { 0 };
	struct pool p;
	struct lat l;

	pool_open(&p, kind);
	for (unsigned i = 0; i < iters; i++) {
		uint64_t t0;

		if (pause_ns)
			sleep_ns(pause_ns);
		atomic_store(&j.started_ns, 0);
		t0 = now_ns();
		while (pool_submit(&p, &j) != 0)
			sched_yield();
		/* yield, not spin: a busy-waiting submitter would keep a woken
		 * worker off its CPU and time the scheduler, not the pool */
		while (!atomic_load_explicit(&j.finished, memory_order_acquire))
			sched_yield();
		v[i] = atomic_load(&j.started_ns) - t0;
	}
	pool_close(&p);
	l = percentiles(v, iters);
	free(v);
	return l;
}

static struct lat measure_call(enum impl kind, unsigned iters)
{
	uint64_t *v = calloc(iters, sizeof(*v));
	struct job j = { 0 };
	struct pool p;
	struct lat l;

	pool_open(&p, kind);
	for (unsigned i = 0; i < iters; i++) {
		uint64_t t0 = now_ns();

		if (pool_call(&p, &j) != 0) {
			fprintf(stderr, "call failed\n");
			exit(1);
		}
		v[i] = now_ns() - t0;
	}
	pool_close(&p);
	l = percentiles(v, iters);
	free(v);
	return l;
}

struct tput_arg {
	struct pool *p;
	struct job *jobs;
	unsigned n;
	pthread_barrier_t *go;
};

static void *tput_submitter(void *arg)
{
	struct tput_arg *a = arg;

	pthread_barrier_wait(a->go);
	for (unsigned i = 0; i < a->n; i++)
		while (pool_submit(a->p, &a->jobs[i]) != 0)
			sched_yield(); /* full: let the workers run */
	return NULL;
}

/* Tiny tasks through a bounded queue, S submitters; tasks per second. */
static double measure_tput(enum impl kind, unsigned total, unsigned submitters)
{
	struct job *jobs = calloc(total, sizeof(*jobs));
	struct tput_arg *args = calloc(submitters, sizeof(*args));
	pthread_t *tids = calloc(submitters, sizeof(*tids));
	_Atomic uint64_t done = 0;
	pthread_barrier_t go;
	struct pool p;
	uint64_t t0, t1;
	unsigned per = total / submitters;

	for (unsigned i = 0; i < total; i++)
		jobs[i].counter = &done;
	pool_open(&p, kind);
	pthread_barrier_init(&go, NULL, submitters + 1);
	for (unsigned s = 0; s < submitters; s++) {
		args[s] = (struct tput_arg){ &p, jobs + (size_t)s * per, per, &go };
		pthread_create(&tids[s], NULL, tput_submitter, &args[s]);
	}
	pthread_barrier_wait(&go);
	t0 = now_ns();
	for (unsigned s = 0; s < submitters; s++)
		pthread_join(tids[s], NULL);
	while (atomic_load(&done) < (uint64_t)per * submitters)
		sched_yield();
	t1 = now_ns();
	pool_close(&p);
	pthread_barrier_destroy(&go);
	free(jobs);
	free(args);
	free(tids);
	return (double)per * submitters / ((double)(t1 - t0) / 1e9);
}

/* ---- driver ------------------------------------------------------------------ */

enum metric { M_HO50, M_HO99, M_HS50, M_HS99, M_CALL50, M_CALL99, M_TPUT, M_COUNT };

int main(int argc, char **argv)
{
	static double res[I_COUNT][M_COUNT][64];
	double med[I_COUNT][M_COUNT];
	int opt;

	while ((opt = getopt(argc, argv, "t:s:q:r:i:n:m:k:")) != -1) {
		unsigned v = (unsigned)strtoul(optarg, NULL, 0);

		switch (opt) {
		case 'm': opt_only = optarg; break;
		case 'k': opt_impls = v ? v : 7; break;
		case 't': opt_threads = v ? v : 1; break;
		case 's': opt_submitters = v ? v : 1; break;
		case 'q': opt_queue = v ? v : 1; break;
		case 'r': opt_rounds = v && v <= 64 ? v : 5; break;
		case 'i': opt_iters = v ? v : 1; break;
		case 'n': opt_tasks = v ? v : 1; break;
		default:
			fprintf(stderr, "usage: %s [-t threads] [-s submitters] [-q queue] "
					"[-r rounds] [-i latency iterations] [-n tasks] [-m hsct] [-k mask]\n",
				argv[0]);
			return 2;
		}
	}
	bench_print_machine(stdout);
	printf("bench_pool: %u pool threads, %u submitters, queue %u, %u rounds (median), "
	       "%u latency samples, %u tasks\n",
	       opt_threads, opt_submitters, opt_queue, opt_rounds, opt_iters, opt_tasks);
	for (unsigned r = 0; r < opt_rounds; r++) {
		for (int k = 0; k < I_COUNT; k++) { /* interleaved: drift hits all alike */
			struct lat l = { 1, 1 };

			if (!(opt_impls & (1u << k))) {
				for (int m = 0; m < M_COUNT; m++)
					res[k][m][r] = 1;
				continue;
			}

			if (strchr(opt_only, 'h'))
				l = measure_handoff((enum impl)k, opt_iters, 0);
			res[k][M_HO50][r] = l.p50, res[k][M_HO99][r] = l.p99;
			l = (struct lat){ 1, 1 };
			if (strchr(opt_only, 's'))
				l = measure_handoff((enum impl)k, opt_iters / 20 + 1, 200 * 1000);
			res[k][M_HS50][r] = l.p50, res[k][M_HS99][r] = l.p99;
			l = (struct lat){ 1, 1 };
			if (strchr(opt_only, 'c'))
				l = measure_call((enum impl)k, opt_iters);
			res[k][M_CALL50][r] = l.p50, res[k][M_CALL99][r] = l.p99;
			res[k][M_TPUT][r] = strchr(opt_only, 't')
						    ? measure_tput((enum impl)k, opt_tasks, opt_submitters)
						    : 1;
		}
	}
	/* ratio[k][m]: the median of the per-round ratios to the mutex+condvar
	 * pool (>1: libbulkhead better), taken before the sorts below */
	double ratio[I_COUNT][M_COUNT], v[64];
	for (int k = I_BH; k < I_COUNT; k++)
		for (int m = 0; m < M_COUNT; m++) {
			for (unsigned r = 0; r < opt_rounds; r++)
				v[r] = m == M_TPUT ? res[k][m][r] / res[I_MC][m][r]
						   : res[I_MC][m][r] / res[k][m][r];
			ratio[k][m] = bench_median(v, opt_rounds);
		}
	for (int k = 0; k < I_COUNT; k++)
		for (int m = 0; m < M_COUNT; m++)
			med[k][m] = bench_median(res[k][m], opt_rounds);
	printf("%-26s %21s %21s %21s %12s\n", "", "handoff ns p50/p99", "handoff,slept p50/p99",
	       "call ns p50/p99", "tasks/s");
	for (int k = 0; k < I_COUNT; k++)
		printf("%-26s %10.0f/%-10.0f %10.0f/%-10.0f %10.0f/%-10.0f %12.0f\n", impl_name[k],
		       med[k][M_HO50], med[k][M_HO99], med[k][M_HS50], med[k][M_HS99],
		       med[k][M_CALL50], med[k][M_CALL99], med[k][M_TPUT]);
	printf("ratios, libbulkhead vs mutex+condvar (>1 means libbulkhead is better):\n");
	for (int k = I_BH; k < I_COUNT; k++)
		printf("  %-24s handoff p50 x%.2f  slept p50 x%.2f  call p50 x%.2f  call p99 x%.2f  "
		       "tput x%.2f\n",
		       impl_name[k], ratio[k][M_HO50], ratio[k][M_HS50], ratio[k][M_CALL50],
		       ratio[k][M_CALL99], ratio[k][M_TPUT]);
	return 0;
}
