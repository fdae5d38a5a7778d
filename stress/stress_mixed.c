/* Mixed load: more threads than cores doing try, timed, forever and async
 * acquires of random weights, holding for random short times, on four
 * bulkheads at once: fair and unfair, bounded and unbounded queues. Every
 * invariant of common.h is checked throughout and at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NBH 4

struct worker {
	pthread_t th;
	unsigned id;
	struct st_rng rng;
};

static struct st_bh bhs[NBH];
static struct st_bh *sbs[NBH];

/* Deadlines from "already past" to tens of milliseconds. */
static uint64_t pick_deadline(struct st_rng *r)
{
	uint64_t now = bh_now_ns();

	switch (st_below(r, 4)) {
	case 0:
		return now;
	case 1:
		return now + st_below(r, 100) * BH_USEC;
	case 2:
		return now + st_below(r, 2000) * BH_USEC;
	default:
		return now + (1 + st_below(r, 20)) * BH_MSEC;
	}
}

static void pick_op(struct st_rng *r, const struct st_bh *sb, struct st_op *op)
{
	uint32_t limit = sb->cfg.max_concurrent, x = st_below(r, 100);

	op->n = st_chance(r, 700) ? 1 : 1 + st_below(r, limit < 4 ? limit : 4);
	op->deadline = 0;
	if (x < 25) {
		op->kind = SK_TRY;
	} else if (x < 65) {
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

	if (w->id % 2)
		st_sharp_timers();
	while (st_running()) {
		struct st_bh *sb = sbs[st_below(&w->rng, NBH)];
		struct st_op op;

		pick_op(&w->rng, sb, &op);
		if (st_acquire(sb, &op, &w->rng) == 0) {
			st_hold(&w->rng, 50);
			st_release(sb, &op);
		}
	}
	return NULL;
}

static void setup(struct st_rng *r)
{
	for (int i = 0; i < NBH; i++) {
		bool fair = i < 2, bounded = i % 2 == 0;
		struct bh_config cfg = {
			.max_concurrent = 1 + st_below(r, bounded ? 4 : 8),
			.queue_capacity = bounded ? st_below(r, 9) : BH_QUEUE_UNBOUNDED,
			.flags = fair ? BH_FAIR : 0,
		};
		char label[32];

		snprintf(label, sizeof(label), "%s/%s", fair ? "fair" : "unfair",
			 bounded ? "bounded" : "unbounded");
		st_bh_init(&bhs[i], label, &cfg, NULL, st_chance(r, 500) ? BHI_SPIN_NS : 0,
			   st_chance(r, 500) ? 0 : (20 + st_below(r, 200)) * BH_USEC);
		sbs[i] = &bhs[i];
	}
}

int main(void)
{
	struct worker *w;
	struct st_rng r;
	unsigned nthreads;
	char cfg[512], outcomes[256], checks[256];
	size_t off = 0;

	st_init("stress_mixed");
	st_rng_init(&r, 0);
	nthreads = st.threads ? st.threads : 4 + st_below(&r, 29);
	setup(&r);
	for (int i = 0; i < NBH; i++) {
		st_bh_describe(sbs[i], cfg + off, sizeof(cfg) - off);
		off += strlen(cfg + off);
		if (off < sizeof(cfg) - 1)
			cfg[off++] = ' ', cfg[off] = 0;
	}
	w = calloc(nthreads, sizeof(*w));
	if (!w)
		st_fail("out of memory");
	st_watchdog_start(sbs, NBH);
	for (unsigned i = 0; i < nthreads; i++) {
		w[i].id = i;
		st_rng_init(&w[i].rng, i + 1);
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0)
			st_fail("pthread_create failed");
	}
	while (st_running())
		st_sleep_ns(10 * BH_MSEC);
	st_watchdog_stopping();
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(w[i].th, NULL);
	st_watchdog_stop();
	st_outcomes(sbs, NBH, outcomes, sizeof(outcomes));
	for (int i = 0; i < NBH; i++)
		st_bh_finish(sbs[i]);
	st_checks(sbs, NBH, checks, sizeof(checks));
	st_pass("threads=%u %s| %s | %s", nthreads, cfg, outcomes, checks);
	free(w);
	return 0;
}
