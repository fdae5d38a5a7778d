/* Timeout vs grant: pairs of threads on one-permit bulkheads (fair and
 * unfair). Each round the holder takes the permit; the waiter picks a
 * deadline a few microseconds ahead, publishes it and queues with it (a timed
 * acquire, or an async one it cancels at the deadline); the holder releases
 * within microseconds of that deadline, before or after. Whatever wins,
 * exactly one of them ends up with the permit: the next round's holder must
 * find it free (no permit lost), the in-flight count never exceeds 1 (none
 * created), the waiter never times out before its deadline, and the
 * observers agree with every result. */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define MAX_PAIRS 8

enum { R_BEFORE, R_AFTER, R_TIMEDOUT, R_CANCELLED, R_MISSED, R_N };

struct pair {
	struct st_bh sb[2]; /* fair, unfair: round k uses sb[k & 1] */
	pthread_t holder, waiter;
	struct st_rng hrng, wrng;
	_Atomic uint64_t round; /* the holder holds the permit for round k */
	_Atomic uint64_t armed; /* the waiter published round k's deadline */
	_Atomic uint64_t deadline;
	_Atomic uint64_t done;  /* the waiter finished round k */
	_Atomic bool stop;
	/* The waiter's last round: its kind and result, read by the holder
	 * once done says the round is over. */
	_Atomic int wkind, wresult;
	uint64_t rounds, res[R_N];
	/* Timed rounds whose permit came back LATE_NS or more after the
	 * deadline, and how many of those timed out. */
	uint64_t late_rounds, late_timeouts;
};

/* A permit given back this long after a timed waiter's deadline finds it
 * gone in most rounds: a timeout that fires late shows as none at all. */
#define LATE_NS (100 * BH_USEC)
/* At least this many such rounds before the share of timeouts is judged. */
#define LATE_MIN 200

static struct pair pairs[MAX_PAIRS];
static struct st_bh *sbs[2 * MAX_PAIRS];

/* Spin briefly, then yield: the two threads of a pair hand rounds back and
 * forth, and there may be fewer cores than threads. */
static bool await_value(_Atomic uint64_t *v, uint64_t want, _Atomic bool *stop)
{
	for (unsigned i = 0; atomic_load_explicit(v, memory_order_acquire) < want; i++) {
		if (atomic_load_explicit(stop, memory_order_relaxed))
			return false;
		if (i < 2000)
			bhi_cpu_relax();
		else
			sched_yield();
	}
	return true;
}

/* Around the deadline: often within 2 us either side, sometimes 20 us, and
 * sometimes late enough for the timeout to win even after the wake-up
 * latency of a timed-out futex. */
static int64_t pick_offset(struct st_rng *r)
{
	uint32_t x = st_below(r, 100);

	if (x < 50)
		return (int64_t)st_below(r, 4001) - 2000;
	if (x < 80)
		return (int64_t)st_below(r, 40001) - 20000;
	return (int64_t)st_below(r, 150000);
}

static void *holder_main(void *arg)
{
	struct pair *p = arg;
	struct st_op op = { .kind = SK_TRY, .n = 1 };

	st_sharp_timers();
	for (uint64_t k = 1; st_running(); k++) {
		uint64_t d;
		int64_t off;

		struct st_bh *sb = &p->sb[k & 1];

		if (st_acquire(sb, &op, &p->hrng) != 0)
			st_fail("[%s] round %" PRIu64 ": the permit is not free at the start of the "
				"round: lost", sb->label, k);
		atomic_store_explicit(&p->round, k, memory_order_release);
		if (!await_value(&p->armed, k, &p->stop)) {
			st_release(sb, &op);
			break;
		}
		/* acquire (via armed): the deadline of this round */
		d = atomic_load_explicit(&p->deadline, memory_order_relaxed);
		off = pick_offset(&p->hrng);
		st_spin_until((uint64_t)((int64_t)d + off));
		st_release(sb, &op);
		if (!await_value(&p->done, k, &p->stop))
			break;
		/* acquire (via done): the waiter's kind and result */
		if (off >= (int64_t)LATE_NS &&
		    atomic_load_explicit(&p->wkind, memory_order_relaxed) == SK_TIMED) {
			p->late_rounds++;
			p->late_timeouts +=
				atomic_load_explicit(&p->wresult, memory_order_relaxed) == -ETIMEDOUT;
		}
		p->rounds = k;
	}
	atomic_store(&p->stop, true);
	return NULL;
}

static void classify(struct pair *p, struct st_op *op, uint64_t ret_ns)
{
	if (op->result == 0)
		p->res[!op->queued ? R_MISSED : ret_ns > op->deadline ? R_AFTER : R_BEFORE]++;
	else if (op->result == -ETIMEDOUT)
		p->res[R_TIMEDOUT]++;
	else if (op->result == -ECANCELED)
		p->res[R_CANCELLED]++;
	else
		p->res[R_MISSED]++; /* the deadline passed before the call: -EBUSY */
}

static void *waiter_main(void *arg)
{
	struct pair *p = arg;

	st_sharp_timers();
	for (uint64_t k = 1;; k++) {
		struct st_bh *sb = &p->sb[k & 1];
		struct st_op op = { .n = 1 };

		if (!await_value(&p->round, k, &p->stop))
			break;
		op.kind = st_chance(&p->wrng, 800) ? SK_TIMED : SK_ASYNC;
		op.deadline = bh_now_ns() + (2 + st_below(&p->wrng, 40)) * BH_USEC;
		atomic_store_explicit(&p->deadline, op.deadline, memory_order_relaxed);
		/* release: the deadline is visible before the round is armed */
		atomic_store_explicit(&p->armed, k, memory_order_release);
		op.result = st_acquire(sb, &op, &p->wrng);
		classify(p, &op, bh_now_ns());
		if (op.result == 0)
			st_release(sb, &op);
		atomic_store_explicit(&p->wkind, (int)op.kind, memory_order_relaxed);
		atomic_store_explicit(&p->wresult, op.result, memory_order_relaxed);
		atomic_store_explicit(&p->done, k, memory_order_release);
	}
	return NULL;
}

int main(void)
{
	struct st_rng r;
	unsigned npairs;
	uint64_t rounds = 0, res[R_N] = { 0 }, late_rounds = 0, late_timeouts = 0;
	char outcomes[256], checks[256];

	st_init("stress_deadline");
	st_rng_init(&r, 0);
	npairs = (unsigned)sysconf(_SC_NPROCESSORS_ONLN) / 2;
	npairs = st.threads ? (st.threads + 1) / 2 : npairs ? npairs : 1;
	npairs = npairs > MAX_PAIRS ? MAX_PAIRS : npairs;
	for (unsigned i = 0; i < npairs; i++) {
		struct pair *p = &pairs[i];

		for (int f = 0; f < 2; f++) {
			struct bh_config cfg = { .max_concurrent = 1,
						 .queue_capacity = BH_QUEUE_UNBOUNDED,
						 .flags = f ? 0 : BH_FAIR };

			st_bh_init(&p->sb[f], f ? "unfair" : "fair", &cfg, NULL,
				   st_chance(&r, 500) ? BHI_SPIN_NS : 0, 0);
			sbs[2 * i + f] = &p->sb[f];
		}
		st_rng_init(&p->hrng, 2 * i + 1);
		st_rng_init(&p->wrng, 2 * i + 2);
	}
	st_watchdog_start(sbs, 2 * npairs);
	for (unsigned i = 0; i < npairs; i++) {
		if (pthread_create(&pairs[i].holder, NULL, holder_main, &pairs[i]) != 0 ||
		    pthread_create(&pairs[i].waiter, NULL, waiter_main, &pairs[i]) != 0)
			st_fail("pthread_create failed");
	}
	while (st_running())
		st_sleep_ns(10 * BH_MSEC);
	st_watchdog_stopping();
	for (unsigned i = 0; i < npairs; i++) {
		pthread_join(pairs[i].holder, NULL);
		pthread_join(pairs[i].waiter, NULL);
		rounds += pairs[i].rounds;
		late_rounds += pairs[i].late_rounds;
		late_timeouts += pairs[i].late_timeouts;
		for (int k = 0; k < R_N; k++)
			res[k] += pairs[i].res[k];
	}
	st_watchdog_stop();
	st_outcomes(sbs, 2 * npairs, outcomes, sizeof(outcomes));
	/* Timeouts fire on time: not one per-call bound (the slack allows for
	 * a loaded machine) but the share of the rounds the permit came back
	 * well after the deadline that the timeout won (most of them when
	 * idle, a tenth or more on a loaded machine or under a sanitizer). */
	if (late_rounds >= LATE_MIN && late_timeouts * 50 < late_rounds)
		st_fail("timeouts fire late: in %" PRIu64 " timed rounds the permit came back "
			"%.0f us or more after the deadline, and only %" PRIu64 " timed out",
			late_rounds, (double)LATE_NS / 1e3, late_timeouts);
	for (unsigned i = 0; i < 2 * npairs; i++)
		st_bh_finish(sbs[i]);
	st_checks(sbs, 2 * npairs, checks, sizeof(checks));
	st_pass("pairs=%u rounds=%" PRIu64 " granted_before=%" PRIu64 " granted_after=%" PRIu64
		" timedout=%" PRIu64 " async_cancelled=%" PRIu64 " not_queued=%" PRIu64
		" late_release_timedout=%" PRIu64 "/%" PRIu64 " | %s | %s",
		npairs, rounds, res[R_BEFORE], res[R_AFTER], res[R_TIMEDOUT], res[R_CANCELLED],
		res[R_MISSED], late_timeouts, late_rounds, outcomes, checks);
	return 0;
}
