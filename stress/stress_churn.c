/* Churn: the mixed load, weighted up to 8 permits, while a resizer thread per
 * bulkhead moves the limit up and down (shrinks fail oversized waiters with
 * -EINVAL and take effect as holders release), and a final phase closes each
 * bulkhead mid-run while work is in flight. Runs in rounds, each on fresh
 * bulkheads, so every run closes several times. The in-flight ceiling and
 * the -EINVAL/-ESHUTDOWN rules follow the resize and close protocols in
 * common.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NBH 2
#define MAX_N 8
#define MAX_LIMIT 12

struct worker {
	pthread_t th;
	unsigned id;
	struct st_rng rng;
};

struct resizer {
	pthread_t th;
	struct st_bh *sb;
	struct st_rng rng;
	uint64_t close_at;
	uint64_t resizes;
};

static struct st_bh bhs[NBH];
static struct st_bh *sbs[NBH];
static _Atomic uint64_t round_end;

static bool round_running(void)
{
	return bh_now_ns() < atomic_load(&round_end);
}

static uint64_t pick_deadline(struct st_rng *r)
{
	uint64_t now = bh_now_ns();

	switch (st_below(r, 3)) {
	case 0:
		return now;
	case 1:
		return now + st_below(r, 500) * BH_USEC;
	default:
		return now + (1 + st_below(r, 10)) * BH_MSEC;
	}
}

static void pick_op(struct st_rng *r, struct st_op *op)
{
	uint32_t x = st_below(r, 100);

	op->n = st_chance(r, 600) ? 1 : 1 + st_below(r, MAX_N);
	op->deadline = 0;
	if (x < 20) {
		op->kind = SK_TRY;
	} else if (x < 60) {
		op->kind = SK_TIMED;
		op->deadline = pick_deadline(r);
	} else if (x < 85) {
		op->kind = SK_FOREVER;
	} else {
		op->kind = SK_ASYNC;
		op->deadline = st_chance(r, 500) ? BH_FOREVER : pick_deadline(r);
	}
}

static void *worker_main(void *p)
{
	struct worker *w = p;

	while (round_running()) {
		struct st_bh *sb = sbs[st_below(&w->rng, NBH)];
		struct st_op op;
		int r;

		pick_op(&w->rng, &op);
		r = st_acquire(sb, &op, &w->rng);
		if (r == 0) {
			st_hold(&w->rng, 100);
			st_release(sb, &op);
		} else if (r == -ESHUTDOWN) {
			sched_yield();
		}
	}
	return NULL;
}

/* Resize up and down at random; close once, mid-run, and keep resizing
 * the closed bulkhead while its holders drain. */
static void *resizer_main(void *p)
{
	struct resizer *z = p;

	while (round_running()) {
		if (z->close_at && bh_now_ns() >= z->close_at) {
			st_close(z->sb);
			z->close_at = 0;
		}
		st_resize(z->sb, 1 + st_below(&z->rng, MAX_LIMIT));
		z->resizes++;
		st_sleep_ns(st_below(&z->rng, 500) * BH_USEC);
	}
	return NULL;
}

static void setup(struct st_rng *r, unsigned round)
{
	for (int i = 0; i < NBH; i++) {
		bool fair = i == 0, bounded = st_chance(r, 500);
		struct bh_config cfg = {
			.max_concurrent = 1 + st_below(r, MAX_LIMIT),
			.queue_capacity = bounded ? 1 + st_below(r, 12) : BH_QUEUE_UNBOUNDED,
			.flags = fair ? BH_FAIR : 0,
		};
		char label[32];

		snprintf(label, sizeof(label), "r%u/%s/%s", round, fair ? "fair" : "unfair",
			 bounded ? "bounded" : "unbounded");
		st_bh_init(&bhs[i], label, &cfg, NULL, st_chance(r, 500) ? BHI_SPIN_NS : 0,
			   st_chance(r, 500) ? 0 : (20 + st_below(r, 200)) * BH_USEC);
		bhs[i].exclusive = false; /* resized */
		sbs[i] = &bhs[i];
	}
}

/* Totals over every round: the bulkheads are fresh each round. */
static struct st_bh total;

static void add_totals(void)
{
	for (int i = 0; i < NBH; i++) {
		for (int k = 0; k < SO_N; k++)
			total.outcome[k] += atomic_load(&sbs[i]->outcome[k]);
		for (int k = 0; k < SC_N; k++)
			total.checks[k] += atomic_load(&sbs[i]->checks[k]);
		total.queued_ops += atomic_load(&sbs[i]->queued_ops);
		total.async_ops += atomic_load(&sbs[i]->async_ops);
		if (atomic_load(&sbs[i]->late_max_ns) > total.late_max_ns)
			total.late_max_ns = atomic_load(&sbs[i]->late_max_ns);
		if (sbs[i]->wake_max_ns > total.wake_max_ns)
			total.wake_max_ns = sbs[i]->wake_max_ns;
	}
}

static uint64_t run_round(struct st_rng *r, unsigned round, unsigned nthreads, uint64_t len)
{
	struct worker *w = calloc(nthreads, sizeof(*w));
	struct resizer z[NBH];
	uint64_t start = bh_now_ns(), resizes = 0;

	if (!w)
		st_fail("out of memory");
	setup(r, round);
	atomic_store(&round_end, start + len);
	st_watchdog_start(sbs, NBH);
	for (unsigned i = 0; i < nthreads; i++) {
		w[i].id = i;
		st_rng_init(&w[i].rng, (uint64_t)round << 32 | (i + 1));
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0)
			st_fail("pthread_create failed");
	}
	for (int i = 0; i < NBH; i++) {
		z[i] = (struct resizer){ .sb = sbs[i] };
		st_rng_init(&z[i].rng, (uint64_t)round << 32 | 0xc0ffee00u | (unsigned)i);
		/* close in the last 40% of the round, while work is in flight */
		z[i].close_at = start + len * (60 + st_below(r, 35)) / 100;
		if (pthread_create(&z[i].th, NULL, resizer_main, &z[i]) != 0)
			st_fail("pthread_create failed");
	}
	while (round_running())
		st_sleep_ns(5 * BH_MSEC);
	st_watchdog_stopping();
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(w[i].th, NULL);
	for (int i = 0; i < NBH; i++) {
		pthread_join(z[i].th, NULL);
		if (z[i].close_at) /* the round ended before its close: close now */
			st_close(sbs[i]);
		resizes += z[i].resizes;
	}
	st_watchdog_stop();
	for (int i = 0; i < NBH; i++)
		st_bh_finish(sbs[i]);
	add_totals();
	free(w);
	return resizes;
}

int main(void)
{
	struct st_rng r;
	unsigned nthreads, rounds;
	uint64_t len, resizes = 0;
	struct st_bh *tp = &total;
	char outcomes[256], checks[256];

	st_init("stress_churn");
	st_rng_init(&r, 0);
	nthreads = st.threads ? st.threads : 4 + st_below(&r, 21);
	rounds = (unsigned)(st.seconds / 0.5);
	rounds = rounds ? rounds : 1;
	len = (uint64_t)(st.seconds * 1e9) / rounds;
	for (unsigned i = 0; i < rounds; i++)
		resizes += run_round(&r, i, nthreads, len);
	st_outcomes(&tp, 1, outcomes, sizeof(outcomes));
	st_checks(&tp, 1, checks, sizeof(checks));
	st_pass("threads=%u rounds=%u closes=%u resizes=%" PRIu64 " | %s | %s", nthreads, rounds,
		rounds * NBH, resizes, outcomes, checks);
	return 0;
}
