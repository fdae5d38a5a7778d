/* Host-wide bulkheads: the queue across processes (FIFO, no barging with
 * BH_FAIR, weighted head of line, deadlines, close, resize both ways, async
 * grants made by another process, cancellation), and the races of the
 * queue played deterministically through the fake wait hook. */
#include <pthread.h>

#include "shmutil.h"

/* ---- children that wait ------------------------------------------------- */

struct waiter_arg {
	const char *name;
	int id;
	uint32_t n;
	uint64_t budget_ns; /* BH_FOREVER: no deadline */
	int order_fd;       /* where to write the id when granted */
	bool hold;          /* keep the permits until told */
};

/* Wait for n permits; on a grant write our id to order_fd, then release
 * (or hold until told). Reports the result and the time it took. */
static int waiter(void *arg, int out, int in)
{
	struct waiter_arg *w = arg;
	bulkhead_t *bh;
	uint64_t t0, deadline;
	int r;

	if (bh_shm_open(w->name, NULL, 0, &bh) != 0)
		return 1;
	say(out, 1); /* attached */
	t0 = bh_now_ns();
	deadline = w->budget_ns == BH_FOREVER ? BH_FOREVER : t0 + w->budget_ns;
	r = bh_acquire(bh, w->n, deadline);
	if (r == 0 && w->order_fd >= 0)
		say(w->order_fd, w->id);
	say(out, r);
	say(out, (int)((bh_now_ns() - t0) / BH_MSEC));
	if (r == 0 && w->hold)
		hear(in);
	if (r == 0)
		r = bh_release(bh, w->n);
	bh_destroy(bh);
	return r == 0 ? 0 : 3;
}

static struct child start_waiter(bulkhead_t *bh, struct waiter_arg *w, uint64_t queued_after)
{
	struct child c = spawn(waiter, w);

	assert_int_equal(hear(c.rd), 1);
	await_queued(bh, queued_after);
	return c;
}

static void fifo_across_processes(uint32_t flags)
{
	const char *name = uniq("fifo");
	bulkhead_t *bh = shm_make(name, 1, 8, flags);
	struct waiter_arg w[4];
	struct child c[4];
	int order[2];

	assert_int_equal(pipe(order), 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct waiter_arg){ name, i, 1, BH_FOREVER, order[1], false };
		c[i] = start_waiter(bh, &w[i], (uint64_t)i + 1);
	}
	assert_int_equal(bh_release(bh, 1), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(hear(order[0]), i);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(hear(c[i].rd), 0);
		assert_int_equal(reap(&c[i]), 0);
	}
	assert_int_equal(stats_of(bh).in_flight, 0);
	assert_int_equal(stats_of(bh).acquired, 5);
	assert_int_equal(stats_of(bh).released, 5);
	close(order[0]);
	close(order[1]);
	shm_done(bh, name);
}

static void test_fifo_fair(void **state)
{
	(void)state;
	fifo_across_processes(BH_FAIR);
}

static void test_fifo_unfair(void **state)
{
	(void)state;
	fifo_across_processes(0);
}

static int try_on_cue(void *arg, int out, int in)
{
	bulkhead_t *bh;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0)
		return 1;
	say(out, 1);
	while (hear(in) == 0) {
		int r = bh_try_acquire(bh, 1);

		if (r == 0)
			bh_release(bh, 1);
		say(out, r);
	}
	bh_destroy(bh);
	return 0;
}

/* With BH_FAIR nobody takes a permit while anyone is queued: not another
 * process while the head waits for more than is free, and a release hands
 * the permits over before it returns, so no window is left to barge in. */
static void test_no_barging_when_fair(void **state)
{
	const char *name = uniq("nobarge");
	bulkhead_t *bh = shm_make(name, 2, 4, BH_FAIR);
	struct waiter_arg w = { name, 0, 2, BH_FOREVER, -1, true };
	struct child c, other = spawn(try_on_cue, (void *)name);

	(void)state;
	assert_int_equal(hear(other.rd), 1);
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	c = start_waiter(bh, &w, 1);
	assert_int_equal(bh_release(bh, 1), 0); /* one free, the head wants two */
	say(other.wr, 0);
	assert_int_equal(hear(other.rd), -EBUSY);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(stats_of(bh).queued, 0); /* handed over already */
	assert_int_equal(stats_of(bh).in_flight, 2);
	say(other.wr, 0);
	assert_int_equal(hear(other.rd), -EBUSY);
	assert_int_equal(hear(c.rd), 0);
	say(c.wr, 0);
	hear(c.rd);
	assert_int_equal(reap(&c), 0);
	say(other.wr, 0);
	assert_int_equal(hear(other.rd), 0); /* nobody queued: free for all */
	say(other.wr, 1);
	assert_int_equal(reap(&other), 0);
	shm_done(bh, name);
}

/* A small request never passes a larger one at the head, across processes. */
static void test_weighted_head_of_line(void **state)
{
	const char *name = uniq("weights");
	bulkhead_t *bh = shm_make(name, 4, 4, 0);
	struct waiter_arg big = { name, 1, 2, BH_FOREVER, -1, true };
	struct waiter_arg small = { name, 2, 1, BH_FOREVER, -1, true };
	struct child cb, cs;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 3), 0); /* one free */
	cb = start_waiter(bh, &big, 1);
	cs = start_waiter(bh, &small, 2); /* queues although one is free */
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(stats_of(bh).in_flight, 3);
	assert_int_equal(bh_release(bh, 1), 0); /* two free: the head's */
	assert_int_equal(hear(cb.rd), 0);
	assert_int_equal(stats_of(bh).queued, 1);
	assert_int_equal(stats_of(bh).in_flight, 4);
	assert_int_equal(bh_release(bh, 2), 0);
	assert_int_equal(hear(cs.rd), 0);
	say(cb.wr, 0);
	say(cs.wr, 0);
	hear(cb.rd);
	hear(cs.rd);
	assert_int_equal(reap(&cb), 0);
	assert_int_equal(reap(&cs), 0);
	assert_int_equal(stats_of(bh).in_flight, 0);
	shm_done(bh, name);
}

static void test_deadline_across_processes(void **state)
{
	const char *name = uniq("deadline");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct waiter_arg w = { name, 0, 1, 60 * BH_MSEC, -1, false };
	struct child c;
	int took;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	c = start_waiter(bh, &w, 1);
	assert_int_equal(hear(c.rd), -ETIMEDOUT);
	took = hear(c.rd);
	assert_true(took >= 60);
	assert_true(took < 60 + 2000); /* a loaded machine's slack */
	assert_int_equal(reap(&c), 3);
	assert_int_equal(stats_of(bh).timed_out, 1);
	assert_int_equal(stats_of(bh).queued, 0);
	assert_int_equal(stats_of(bh).wait_failed.count, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	shm_done(bh, name);
}

static void test_close_wakes_other_processes(void **state)
{
	const char *name = uniq("close");
	bulkhead_t *bh = shm_make(name, 1, 8, BH_FAIR);
	struct waiter_arg w[3];
	struct child c[3];

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	for (int i = 0; i < 3; i++) {
		w[i] = (struct waiter_arg){ name, i, 1, BH_FOREVER, -1, false };
		c[i] = start_waiter(bh, &w[i], (uint64_t)i + 1);
	}
	assert_int_equal(bh_close(bh), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(hear(c[i].rd), -ESHUTDOWN);
		hear(c[i].rd);
		assert_int_equal(reap(&c[i]), 3);
	}
	assert_int_equal(stats_of(bh).queued, 0);
	assert_int_equal(bh_try_acquire(bh, 1), -ESHUTDOWN);
	assert_int_equal(bh_release(bh, 1), 0); /* holders still drain */
	assert_int_equal(stats_of(bh).in_flight, 0);
	shm_done(bh, name);
}

static void test_grow_grants_other_processes(void **state)
{
	const char *name = uniq("grow");
	bulkhead_t *bh = shm_make(name, 1, 8, 0);
	struct waiter_arg w[2];
	struct child c[2];

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct waiter_arg){ name, i, 1, BH_FOREVER, -1, true };
		c[i] = start_waiter(bh, &w[i], (uint64_t)i + 1);
	}
	assert_int_equal(bh_set_limit(bh, 3), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(hear(c[i].rd), 0);
	assert_int_equal(stats_of(bh).in_flight, 3);
	assert_int_equal(stats_of(bh).limit, 3);
	for (int i = 0; i < 2; i++) {
		say(c[i].wr, 0);
		hear(c[i].rd);
		assert_int_equal(reap(&c[i]), 0);
	}
	assert_int_equal(bh_release(bh, 1), 0);
	shm_done(bh, name);
}

/* Shrinking fails the queued that can never fit, keeps the others, and
 * takes effect as holders release. */
static void test_shrink_across_processes(void **state)
{
	const char *name = uniq("shrink");
	bulkhead_t *bh = shm_make(name, 4, 8, 0);
	struct waiter_arg big = { name, 0, 3, BH_FOREVER, -1, false };
	struct waiter_arg small = { name, 1, 1, BH_FOREVER, -1, false };
	struct child cb, cs;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 4), 0);
	cb = start_waiter(bh, &big, 1);
	cs = start_waiter(bh, &small, 2);
	assert_int_equal(bh_set_limit(bh, 2), 0);
	assert_int_equal(hear(cb.rd), -EINVAL);
	hear(cb.rd);
	assert_int_equal(reap(&cb), 3);
	assert_int_equal(stats_of(bh).queued, 1);
	assert_int_equal(stats_of(bh).in_flight, 4); /* above the new limit */
	assert_int_equal(bh_release(bh, 2), 0);
	assert_int_equal(stats_of(bh).queued, 1);     /* 2 held, limit 2: none free */
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(hear(cs.rd), 0);
	hear(cs.rd);
	assert_int_equal(reap(&cs), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(stats_of(bh).in_flight, 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	shm_done(bh, name);
}

/* ---- async: granted by another process, delivered in ours ------------------ */

struct async_seen {
	pthread_mutex_t m;
	pthread_cond_t c;
	int result, runs;
	pthread_t thread;
};

static void async_cb(struct bh_async *node, int result)
{
	struct async_seen *s = node->data;

	pthread_mutex_lock(&s->m);
	s->result = result;
	s->runs++;
	s->thread = pthread_self();
	pthread_cond_signal(&s->c);
	pthread_mutex_unlock(&s->m);
}

static void await_runs(struct async_seen *s, int runs)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&s->m);
	while (s->runs < runs)
		assert_int_equal(pthread_cond_timedwait(&s->c, &s->m, &ts), 0);
	pthread_mutex_unlock(&s->m);
}

static int hold_release_on_cue(void *arg, int out, int in)
{
	bulkhead_t *bh;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 1) != 0)
		return 1;
	say(out, 1);
	hear(in);
	say(out, bh_release(bh, 1));
	bh_destroy(bh);
	return 0;
}

static void test_async_granted_by_other_process(void **state)
{
	const char *name = uniq("async");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct async_seen seen = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 99, 0, 0 };
	struct bh_async node, other;
	struct child c = spawn(hold_release_on_cue, (void *)name);

	(void)state;
	assert_int_equal(hear(c.rd), 1);
	assert_int_equal(bh_acquire_async(bh, &node, 1, async_cb, &seen), 1);
	assert_int_equal(bh_acquire_async(bh, &other, 1, async_cb, &seen), 1);
	assert_int_equal(bh_cancel_async(bh, &other), 1); /* still queued */
	assert_int_equal(stats_of(bh).queued, 1);
	say(c.wr, 0);
	assert_int_equal(hear(c.rd), 0);
	await_runs(&seen, 1);
	assert_int_equal(seen.result, 0);
	assert_false(pthread_equal(seen.thread, pthread_self())); /* the agent */
	assert_int_equal(reap(&c), 0);
	assert_int_equal(bh_cancel_async(bh, &node), 0); /* ran already */
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(bh_release(bh, 1), 0);       /* the permit is ours */
	assert_int_equal(stats_of(bh).cancelled, 1);
	assert_int_equal(stats_of(bh).acquired, 2);
	assert_int_equal(seen.runs, 1);
	shm_done(bh, name);
}

static void test_async_closed_and_shrunk(void **state)
{
	const char *name = uniq("async-close");
	bulkhead_t *bh = shm_make(name, 2, 4, 0);
	struct async_seen seen = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 99, 0, 0 };
	struct bh_async a, b;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(bh_acquire_async(bh, &a, 2, async_cb, &seen), 1);
	assert_int_equal(bh_set_limit(bh, 1), 0);
	await_runs(&seen, 1);
	assert_int_equal(seen.result, -EINVAL);
	assert_int_equal(bh_acquire_async(bh, &b, 1, async_cb, &seen), 1);
	assert_int_equal(bh_close(bh), 0);
	await_runs(&seen, 2);
	assert_int_equal(seen.result, -ESHUTDOWN);
	assert_int_equal(bh_cancel_async(bh, &b), 0);
	assert_int_equal(bh_release(bh, 2), 0);
	shm_done(bh, name);
}

/* bh_close fails every async waiter; a bh_destroy right after it (what
 * bh_destroy(3) prescribes) must not drop those callbacks: the agent
 * delivers what it was told before it stops. */
static void test_close_then_destroy_delivers(void **state)
{
	struct async_seen seen = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 99, 0, 0 };
	struct bh_async nodes[8];

	(void)state;
	for (int round = 0; round < 20; round++) {
		const char *name = uniq("close-destroy");
		bulkhead_t *bh = shm_make(name, 1, 16, 0);

		assert_int_equal(bh_try_acquire(bh, 1), 0);
		for (int i = 0; i < 8; i++)
			assert_int_equal(bh_acquire_async(bh, &nodes[i], 1, async_cb, &seen), 1);
		assert_int_equal(bh_close(bh), 0);
		shm_done(bh, name);
		assert_int_equal(seen.runs, 8 * (round + 1));
		assert_int_equal(seen.result, -ESHUTDOWN);
	}
}

/* ---- cancellation ---------------------------------------------------------- */

static void *cancellable_waiter(void *arg)
{
	bh_acquire(arg, 1, BH_FOREVER);
	return NULL;
}

static void test_pthread_cancel_waiter(void **state)
{
	const char *name = uniq("cancel");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	pthread_t t;
	void *ret;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, cancellable_waiter, bh), 0);
	await_queued(bh, 1);
	assert_int_equal(pthread_cancel(t), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	assert_int_equal(stats_of(bh).queued, 0);
	assert_int_equal(stats_of(bh).cancelled, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(stats_of(bh).in_flight, 0);
	shm_done(bh, name);
}

/* ---- deterministic races through the fake wait hook ------------------------- */

static struct fake_sync *fake_shm(struct fake_sync *f, bulkhead_t *bh,
				  int (*hook)(struct fake_sync *, unsigned))
{
	fake_init(f, 1000, hook);
	f->bh = bh;
	bhs_set_sync_ops(bh, &f->ops);
	return f;
}

/* The deadline passes in the same instant the permit is handed over: the
 * waiter returns 0 and owns it. */
static int release_then_timeout(struct fake_sync *f, unsigned call)
{
	(void)call;
	assert_int_equal(bh_release(f->bh, 1), 0);
	f->now += 10 * BH_MSEC;
	return -ETIMEDOUT;
}

static void test_timeout_racing_grant_keeps_permit(void **state)
{
	const char *name = uniq("race-grant");
	bulkhead_t *bh = shm_make(name, 1, 4, BH_FAIR);
	struct fake_sync f;

	(void)state;
	fake_shm(&f, bh, release_then_timeout);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, f.now + 5 * BH_MSEC), 0);
	assert_int_equal(f.waits, 1);
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(stats_of(bh).timed_out, 0);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	bhs_set_sync_ops(bh, NULL);
	shm_done(bh, name);
}

static int just_timeout(struct fake_sync *f, unsigned call)
{
	(void)call;
	f->now += 10 * BH_MSEC;
	return -ETIMEDOUT;
}

static void test_timeout_leaves_queue(void **state)
{
	const char *name = uniq("timeout");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct fake_sync f;

	(void)state;
	fake_shm(&f, bh, just_timeout);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, f.now + 5 * BH_MSEC), -ETIMEDOUT);
	assert_int_equal(stats_of(bh).queued, 0);
	assert_int_equal(stats_of(bh).timed_out, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0); /* the permit went to the pool */
	assert_int_equal(bh_release(bh, 1), 0);
	bhs_set_sync_ops(bh, NULL);
	shm_done(bh, name);
}

/* EINTR and spurious wakeups re-check and wait again, with the same
 * deadline; a poll that ends before the deadline is not a timeout. */
static int interrupt_then_grant(struct fake_sync *f, unsigned call)
{
	if (call < 3)
		return -EINTR;
	if (call < 5)
		return 0; /* spurious */
	if (call < 7)
		return -ETIMEDOUT; /* polls: the deadline is BH_FOREVER */
	assert_int_equal(bh_release(f->bh, 1), 0);
	return 0;
}

static void test_eintr_and_polls_are_retried(void **state)
{
	const char *name = uniq("eintr");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct fake_sync f;

	(void)state;
	fake_shm(&f, bh, interrupt_then_grant);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
	assert_int_equal(f.waits, 8);
	assert_int_equal(stats_of(bh).timed_out, 0);
	assert_int_equal(bh_release(bh, 1), 0);
	bhs_set_sync_ops(bh, NULL);
	shm_done(bh, name);
}

/* Unfair mode: a woken head that keeps losing to newcomers marks itself
 * starving after starve_ns, and the next release hands off to it. */
static int barge_then_starve(struct fake_sync *f, unsigned call)
{
	if (call == 0) {
		f->now += 2 * BH_MSEC; /* waited past starve_ns */
		assert_int_equal(bh_release(f->bh, 1), 0); /* head woken to compete */
		assert_int_equal(bh_try_acquire(f->bh, 1), 0); /* a newcomer wins */
		return 0;
	}
	assert_int_equal(call, 1);
	assert_true(bhs_word(f->bh) & W_STARVING);
	assert_int_equal(bh_release(f->bh, 1), 0);        /* handed off */
	assert_int_equal(bh_try_acquire(f->bh, 1), -EBUSY); /* no barging now */
	return 0;
}

static void test_unfair_starvation_guard(void **state)
{
	const char *name = uniq("starve");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct fake_sync f;

	(void)state;
	fake_shm(&f, bh, barge_then_starve);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
	assert_int_equal(f.waits, 2);
	assert_false(bhs_word(bh) & (W_STARVING | W_WOKEN));
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	bhs_set_sync_ops(bh, NULL);
	shm_done(bh, name);
}

/* Unfair mode: a head woken to compete that times out before it does
 * takes the word's WOKEN mark with it, so the next head is woken when its
 * turn comes; a mark left behind reads as "the head is on its way", and
 * every later release would leave the new head asleep. */
static int woken_head_times_out_then_next(struct fake_sync *f, unsigned call)
{
	unsigned before;

	if (call == 0) {
		assert_int_equal(bh_release(f->bh, 1), 0); /* head woken to compete */
		f->now += 10 * BH_MSEC;                     /* ...past its deadline */
		return -ETIMEDOUT;
	}
	assert_int_equal(call, 1);
	before = fake_wakes(f);
	assert_int_equal(bh_release(f->bh, 1), 0); /* the new head is woken */
	assert_int_equal(fake_wakes(f), before + 1);
	return 0;
}

static void test_woken_head_leaving_clears_mark(void **state)
{
	const char *name = uniq("woken-leaves");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct fake_sync f;

	(void)state;
	fake_shm(&f, bh, woken_head_times_out_then_next);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, f.now + 5 * BH_MSEC), -ETIMEDOUT);
	assert_false(bhs_word(bh) & (W_STARVING | W_WOKEN));
	assert_int_equal(stats_of(bh).timed_out, 1);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
	assert_int_equal(f.waits, 2);
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	bhs_set_sync_ops(bh, NULL);
	shm_done(bh, name);
}

/* A limit lowered to exactly what a queued waiter asks for leaves it
 * queued: only requests above the new limit can never be granted. */
static int shrink_to_request(struct fake_sync *f, unsigned call)
{
	assert_int_equal(call, 0);
	assert_int_equal(bh_set_limit(f->bh, 2), 0);
	assert_int_equal(stats_of(f->bh).queued, 1);
	assert_int_equal(bh_release(f->bh, 4), 0); /* now the 2 fit */
	return 0;
}

static void test_shrink_to_request_keeps_waiter(void **state)
{
	const char *name = uniq("shrink-exact");
	bulkhead_t *bh = shm_make(name, 4, 4, BH_FAIR);
	struct fake_sync f;

	(void)state;
	fake_shm(&f, bh, shrink_to_request);
	assert_int_equal(bh_try_acquire(bh, 4), 0);
	assert_int_equal(bh_acquire(bh, 2, BH_FOREVER), 0);
	assert_int_equal(f.waits, 1);
	assert_int_equal(stats_of(bh).in_flight, 2);
	assert_int_equal(bh_release(bh, 2), 0);
	bhs_set_sync_ops(bh, NULL);
	shm_done(bh, name);
}

/* A grant to a waiter that went to sleep must wake it: its sleep is
 * otherwise only ended by its next look for the dead (poll_ns, 100 ms) or
 * its deadline. The release is made while the waiter sleeps; the wake it
 * owes is issued before the release returns. */
static int grant_while_sleeping(struct fake_sync *f, unsigned call)
{
	unsigned before = fake_wakes(f);

	assert_int_equal(call, 0);
	assert_int_equal(bh_release(f->bh, 1), 0); /* handed to the sleeper */
	assert_int_equal(fake_wakes(f), before + 1);
	return 0;
}

static void test_grant_wakes_sleeper(void **state)
{
	const char *name = uniq("wake");
	bulkhead_t *bh = shm_make(name, 1, 4, BH_FAIR);
	struct fake_sync f;

	(void)state;
	fake_shm(&f, bh, grant_while_sleeping);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
	assert_int_equal(f.waits, 1);
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	bhs_set_sync_ops(bh, NULL);
	shm_done(bh, name);
}

/* A waiter granted its permit and cancelled before it saw the grant: the
 * cleanup gives the permit back, so nothing stays taken in the word. */
static int grant_then_cancel(struct fake_sync *f, unsigned call)
{
	(void)call;
	assert_int_equal(bh_release(f->bh, 1), 0); /* handed to us */
	pthread_cancel(pthread_self());
	pthread_testcancel();
	fail_msg("not cancelled");
	return 0;
}

static void *cancelled_grantee(void *arg)
{
	bh_acquire(arg, 1, BH_FOREVER);
	return NULL; /* not reached: cancelled inside */
}

static void test_cancel_after_grant_gives_back(void **state)
{
	const char *name = uniq("cancel-grant");
	bulkhead_t *bh = shm_make(name, 1, 4, BH_FAIR); /* fair: a handoff */
	struct fake_sync f;
	struct bh_stats st;
	pthread_t t;
	void *ret;

	(void)state;
	fake_shm(&f, bh, grant_then_cancel);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, cancelled_grantee, bh), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	st = stats_of(bh);
	assert_int_equal(st.cancelled, 1);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0); /* the permit is back */
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	bhs_set_sync_ops(bh, NULL);
	shm_done(bh, name);
}

/* The grant the cancelled waiter gives back serves the queue: a waiter
 * behind it (another process) is granted in the same critical section,
 * not left queued beside a free permit that nobody hands over. The other
 * process is forked before the fake is installed (its handle waits on
 * real futexes) and queues when told. */
static int waiter_on_cue(void *arg, int out, int in)
{
	bulkhead_t *bh;
	int r;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0)
		return 1;
	say(out, 1); /* attached */
	hear(in);    /* queue now */
	r = bh_acquire(bh, 1, BH_FOREVER);
	say(out, r);
	hear(in); /* release now */
	if (r == 0)
		r = bh_release(bh, 1);
	bh_destroy(bh);
	return r == 0 ? 0 : 3;
}

static struct child behind;

static int queue_behind_then_grant_then_cancel(struct fake_sync *f, unsigned call)
{
	say(behind.wr, 1);
	await_queued(f->bh, 2);
	return grant_then_cancel(f, call);
}

static void test_cancel_after_grant_serves_next(void **state)
{
	const char *name = uniq("cancel-next");
	bulkhead_t *bh = shm_make(name, 1, 4, BH_FAIR);
	struct fake_sync f;
	struct bh_stats st;
	pthread_t t;
	void *ret;

	(void)state;
	behind = spawn(waiter_on_cue, (void *)name);
	assert_int_equal(hear(behind.rd), 1);
	fake_shm(&f, bh, queue_behind_then_grant_then_cancel);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, cancelled_grantee, bh), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	st = stats_of(bh);
	assert_int_equal(st.cancelled, 1);
	assert_int_equal(st.queued, 0);    /* the one behind was served... */
	assert_int_equal(st.in_flight, 1); /* ...with the permit given back */
	assert_int_equal(hear(behind.rd), 0);
	say(behind.wr, 1);
	assert_int_equal(reap(&behind), 0);
	assert_int_equal(stats_of(bh).in_flight, 0);
	bhs_set_sync_ops(bh, NULL);
	shm_done(bh, name);
}

/* The queue is bounded host-wide: a full queue rejects at once. */
static void test_queue_full_rejects(void **state)
{
	const char *name = uniq("full");
	bulkhead_t *bh = shm_make(name, 1, 1, 0);
	struct waiter_arg w = { name, 0, 1, BH_FOREVER, -1, false };
	struct child c;
	struct bh_async node;
	struct async_seen seen = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 99, 0, 0 };

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	c = start_waiter(bh, &w, 1);
	assert_int_equal(bh_acquire(bh, 1, bh_now_ns() + 10 * BH_SEC), -EBUSY);
	assert_int_equal(bh_acquire_async(bh, &node, 1, async_cb, &seen), -EBUSY);
	assert_int_equal(stats_of(bh).rejected, 2);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(hear(c.rd), 0);
	hear(c.rd);
	assert_int_equal(reap(&c), 0);
	shm_done(bh, name);
}

/* The child: registered (a pair taken and given back), holding nothing,
 * until it is killed. */
static int register_and_hang(void *arg, int out, int in)
{
	bulkhead_t *bh;

	(void)in;
	if (bh_shm_open(arg, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 1) != 0 ||
	    bh_release(bh, 1) != 0)
		return 1;
	say(out, 1);
	pause();
	return 0;
}

/* A full queue makes an async acquire look for the dead first. When the
 * look reclaims one that held nothing, the queue is still full and the
 * retry is rejected: that rejection counts like any other. The queue is
 * held by our own async node, and our polls are too long to scan before
 * the call does, so the call's own scan is the one that finds the dead. */
static void test_async_rejected_after_reclaim_counts(void **state)
{
	const char *name = uniq("full-dead");
	bulkhead_t *bh = shm_make(name, 1, 1, 0);
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct async_seen seen = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 99, 0, 0 };
	struct bh_async queued, rejected;
	struct child c = spawn(register_and_hang, (void *)name);
	struct bh_stats st;

	(void)state;
	assert_int_equal(hear(c.rd), 1);
	bhs_set_poll_ns(bh, 3600 * BH_SEC);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire_async(bh, &queued, 1, async_cb, &seen), 1);
	kill_reap(&c);
	atomic_store(&g->scan_ns, 0); /* the next look is due now */
	assert_int_equal(bh_acquire_async(bh, &rejected, 1, async_cb, &seen), -EBUSY);
	assert_int_equal(atomic_load(&g->deaths), 1); /* the call's scan found it */
	st = stats_of(bh);
	assert_int_equal(st.rejected, 1);
	assert_int_equal(st.queued, 1);
	assert_int_equal(st.reclaimed, 0);
	assert_int_equal(bh_release(bh, 1), 0); /* grants the queued node */
	await_runs(&seen, 1);
	assert_int_equal(seen.result, 0);
	assert_int_equal(bh_release(bh, 1), 0);
	st = stats_of(bh);
	assert_int_equal(st.rejected, 1);
	assert_int_equal(st.in_flight, 0);
	shm_done(bh, name);
}

/* ---- stress: exact stats and no wrong -EOVERFLOW across processes ---------- */

struct st_proc {
	bulkhead_t *bh;
	_Atomic uint64_t pool; /* permits held by the process, free for any thread */
	_Atomic int acq, rel, busy, tmo, ovf, other;
	unsigned seed;
	int iters;
};

static void *st_thread(void *arg)
{
	struct st_proc *p = arg;
	unsigned seed = p->seed ^ (unsigned)(uintptr_t)pthread_self();

	for (int i = 0; i < p->iters; i++) {
		uint32_t n = 1 + (rand_r(&seed) % 2);
		int op = rand_r(&seed) % 4, r;

		if (op == 0)
			r = bh_try_acquire(p->bh, n);
		else
			r = bh_acquire(p->bh, n, bh_now_ns() + (rand_r(&seed) % 3000) * BH_USEC);
		if (r == 0) {
			p->acq++;
			if (rand_r(&seed) % 3 == 0)
				usleep(rand_r(&seed) % 300);
			if (rand_r(&seed) % 2) {
				r = bh_release(p->bh, n);
				if (r == 0)
					p->rel++;
				else if (r == -EOVERFLOW)
					p->ovf++;
				else
					p->other++;
			} else {
				atomic_fetch_add(&p->pool, n);
			}
		} else if (r == -EBUSY)
			p->busy++;
		else if (r == -ETIMEDOUT)
			p->tmo++;
		else
			p->other++;
		/* release what some sibling took */
		uint64_t v = atomic_load(&p->pool);
		while (v > 0) {
			uint64_t m = v >= 2 && (rand_r(&seed) & 1) ? 2 : 1;
			if (atomic_compare_exchange_weak(&p->pool, &v, v - m)) {
				r = bh_release(p->bh, (uint32_t)m);
				if (r == 0)
					p->rel++;
				else if (r == -EOVERFLOW)
					p->ovf++;
				else
					p->other++;
				break;
			}
		}
	}
	return NULL;
}

static int st_child(void *arg, int out, int in)
{
	struct st_proc p = { 0 };
	pthread_t t[3];

	(void)in;
	if (bh_shm_open(arg, NULL, 0, &p.bh) != 0)
		return 1;
	p.seed = (unsigned)getpid();
	p.iters = 400;
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, st_thread, &p);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	for (uint64_t v = atomic_load(&p.pool); v; v--) {
		int r = bh_release(p.bh, 1);
		if (r == 0)
			p.rel++;
		else if (r == -EOVERFLOW)
			p.ovf++;
		else
			p.other++;
	}
	say(out, p.acq);
	say(out, p.rel);
	say(out, p.busy);
	say(out, p.tmo);
	say(out, p.ovf);
	say(out, p.other);
	bh_destroy(p.bh);
	return 0;
}

static void stress_across_processes(uint32_t flags)
{
	const char *name = uniq("stress");
	bulkhead_t *bh = shm_make(name, 3, 6, flags);
	struct child c[3];
	int tot[6] = { 0 };
	struct bh_stats st;

	for (int i = 0; i < 3; i++)
		c[i] = spawn(st_child, (void *)name);
	for (int i = 0; i < 3; i++) {
		for (int k = 0; k < 6; k++)
			tot[k] += hear(c[i].rd);
		assert_int_equal(reap(&c[i]), 0);
	}
	st = stats_of(bh);
	print_message("callers: acq %d rel %d busy %d tmo %d ovf %d other %d | stats: acq %llu"
		      " rel %llu rej %llu tmo %llu ovr %llu inflight %llu q %llu procs %llu\n",
		      tot[0], tot[1], tot[2], tot[3], tot[4], tot[5],
		      (unsigned long long)st.acquired, (unsigned long long)st.released,
		      (unsigned long long)st.rejected, (unsigned long long)st.timed_out,
		      (unsigned long long)st.over_released, (unsigned long long)st.in_flight,
		      (unsigned long long)st.queued, (unsigned long long)st.processes);
	assert_int_equal(tot[4], 0);
	assert_int_equal(tot[5], 0);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.acquired, (uint64_t)tot[0]);
	assert_int_equal(st.released, (uint64_t)tot[1]);
	assert_int_equal(st.rejected, (uint64_t)tot[2]);
	assert_int_equal(st.timed_out, (uint64_t)tot[3]);
	assert_int_equal(st.over_released, 0);
	shm_done(bh, name);
}

static void test_stress_fair(void **state)
{
	(void)state;
	stress_across_processes(BH_FAIR);
}

static void test_stress_unfair(void **state)
{
	(void)state;
	stress_across_processes(0);
}

/* ---- async stress: each callback exactly once, stats exact ------------------ */

#define AS_NODES 8
struct as_proc {
	bulkhead_t *bh;
	struct bh_async node[AS_NODES];
	_Atomic int runs[AS_NODES];
	_Atomic int granted_pending[AS_NODES]; /* permits to release */
	_Atomic int acq, rel, busy, cancelled, failed, twice, ovf, other;
};

static void as_cb(struct bh_async *node, int result)
{
	struct as_proc *p = node->data;
	int i = (int)(node - p->node);

	if (atomic_fetch_add(&p->runs[i], 1) != 0)
		p->twice++;
	if (result == 0) {
		p->acq++;
		atomic_store(&p->granted_pending[i], 1);
	} else {
		p->failed++;
	}
}

static int as_child(void *arg, int out, int in)
{
	struct as_proc *p = calloc(1, sizeof(*p));
	unsigned seed = (unsigned)getpid();
	bool busy[AS_NODES] = { false }; /* queued (callback pending) */

	(void)in;
	if (bh_shm_open(arg, NULL, 0, &p->bh) != 0)
		return 1;
	for (int it = 0; it < 1500; it++) {
		int i = rand_r(&seed) % AS_NODES, r;

		if (atomic_load(&p->granted_pending[i])) {
			atomic_store(&p->granted_pending[i], 0);
			r = bh_release(p->bh, 1);
			if (r == 0)
				p->rel++;
			else if (r == -EOVERFLOW)
				p->ovf++;
			else
				p->other++;
		}
		if (busy[i]) {
			if (atomic_load(&p->runs[i]) == 1) {
				busy[i] = false;
				continue;
			}
			if (rand_r(&seed) % 2)
				continue;
			r = bh_cancel_async(p->bh, &p->node[i]);
			if (r == 1)
				p->cancelled++;
			else if (atomic_load(&p->runs[i]) != 1)
				p->other++; /* 0 means the callback ran */
			busy[i] = false;
			if (atomic_load(&p->granted_pending[i])) {
				atomic_store(&p->granted_pending[i], 0);
				r = bh_release(p->bh, 1);
				if (r == 0)
					p->rel++;
				else
					p->ovf++;
			}
			continue;
		}
		atomic_store(&p->runs[i], 0);
		r = bh_acquire_async(p->bh, &p->node[i], 1, as_cb, p);
		if (r == 0) {
			p->acq++;
			usleep(rand_r(&seed) % 100);
			if (bh_release(p->bh, 1) == 0)
				p->rel++;
			else
				p->ovf++;
		} else if (r == 1) {
			busy[i] = true;
		} else if (r == -EBUSY) {
			p->busy++;
		} else {
			p->other++;
		}
		if (rand_r(&seed) % 4 == 0)
			usleep(50);
	}
	/* drain: wait for every queued node */
	for (int i = 0; i < AS_NODES; i++) {
		uint64_t end = bh_now_ns() + 10 * BH_SEC;

		while (busy[i] && atomic_load(&p->runs[i]) != 1 && bh_now_ns() < end) {
			/* release what others hold so the queue moves */
			for (int k = 0; k < AS_NODES; k++)
				if (atomic_exchange(&p->granted_pending[k], 0)) {
					if (bh_release(p->bh, 1) == 0)
						p->rel++;
					else
						p->ovf++;
				}
			usleep(100);
		}
		if (busy[i] && atomic_load(&p->runs[i]) != 1)
			p->other += 1000;
	}
	for (int k = 0; k < AS_NODES; k++)
		if (atomic_exchange(&p->granted_pending[k], 0)) {
			if (bh_release(p->bh, 1) == 0)
				p->rel++;
			else
				p->ovf++;
		}
	say(out, p->acq);
	say(out, p->rel);
	say(out, p->busy);
	say(out, p->cancelled);
	say(out, p->twice);
	say(out, p->ovf);
	say(out, p->other);
	hear(in); /* stay attached until the parent has read the stats */
	bh_destroy(p->bh);
	return 0;
}

static void test_async_stress(void **state)
{
	const char *name = uniq("astress");
	bulkhead_t *bh = shm_make(name, 2, 64, 0);
	struct child c[3];
	int tot[7] = { 0 };
	struct bh_stats st;

	(void)state;
	for (int i = 0; i < 3; i++)
		c[i] = spawn(as_child, (void *)name);
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 7; k++)
			tot[k] += hear(c[i].rd);
	st = stats_of(bh);
	for (int i = 0; i < 3; i++) {
		say(c[i].wr, 0);
		assert_int_equal(reap(&c[i]), 0);
	}
	print_message("callers: acq %d rel %d busy %d canc %d twice %d ovf %d other %d | stats:"
		      " acq %llu rel %llu rej %llu canc %llu inflight %llu q %llu\n",
		      tot[0], tot[1], tot[2], tot[3], tot[4], tot[5], tot[6],
		      (unsigned long long)st.acquired, (unsigned long long)st.released,
		      (unsigned long long)st.rejected, (unsigned long long)st.cancelled,
		      (unsigned long long)st.in_flight, (unsigned long long)st.queued);
	assert_int_equal(tot[4], 0);
	assert_int_equal(tot[5], 0);
	assert_int_equal(tot[6], 0);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.acquired, (uint64_t)tot[0]);
	assert_int_equal(st.released, (uint64_t)tot[1]);
	assert_int_equal(st.rejected, (uint64_t)tot[2]);
	assert_int_equal(st.cancelled, (uint64_t)tot[3]);
	shm_done(bh, name);
}

static bulkhead_t *self_bh;
static _Atomic int self_r = 99;
static void self_cb(struct bh_async *node, int result)
{
	(void)result;
	self_r = bh_cancel_async(self_bh, node); /* its own node, from its callback */
}

static int self_child(void *arg, int out, int in)
{
	struct bh_async node;
	(void)in;
	if (bh_shm_open(arg, NULL, 0, &self_bh) != 0 || bh_try_acquire(self_bh, 1) != 0)
		return 1;
	alarm(3);
	if (bh_acquire_async(self_bh, &node, 1, self_cb, NULL) != 1)
		return 2;
	bh_release(self_bh, 1);
	for (int i = 0; i < 200 && self_r == 99; i++)
		usleep(5000);
	say(out, self_r);
	return 0;
}

static void test_cancel_own_node_from_callback(void **state)
{
	const char *name = uniq("selfcancel");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct child c = spawn(self_child, (void *)name);

	(void)state;
	assert_int_equal(hear(c.rd), 0);
	assert_int_equal(wait_child(&c), 0);
	shm_done(bh, name);
}

/* A callback runs on the library's agent thread: a fork() made in it
 * gives a child whose only thread is a copy of the agent, in the middle of
 * delivering the parent's node. If that child returns from the callback,
 * the copy must not go on as the parent's agent (taking the internal lock
 * under the parent's name, freeing the parent's queue node a second time,
 * serving the parent's agent word): it ends, and the child exits. */
struct fork_cb {
	_Atomic pid_t kid;
};

/* The child ends when its one thread does, through exit(): it leaves the
 * parent's memory, which it inherited, unfreed, and LeakSanitizer's check
 * at exit (the ASan build's) would count that. Registered after the
 * checker's, this handler runs first and ends the child quietly. Only
 * there: ThreadSanitizer ends a process through its own _exit, and with
 * nothing to report the child's exit is clean. */
#if defined(__SANITIZE_ADDRESS__)
#define BH_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BH_TEST_ASAN 1
#endif
#endif

#ifdef BH_TEST_ASAN
static void child_exit_quietly(void)
{
	_exit(0);
}
#endif

static void forking_cb(struct bh_async *node, int result)
{
	struct fork_cb *f = node->data;
	pid_t g;

	(void)result;
	g = fork();
	if (g == 0) {
		alarm(10);
#ifdef BH_TEST_ASAN
		atexit(child_exit_quietly);
#endif
		return; /* the child returns from the callback, into the library */
	}
	atomic_store(&f->kid, g);
}

static int forks_in_callback(void *arg, int out, int in)
{
	bulkhead_t *bh = arg;
	struct fork_cb f = { 0 };
	struct bh_async node = { 0 };
	uint64_t t0 = bh_now_ns();
	pid_t kid;
	int st = 0, r;

	(void)out;
	(void)in;
	if (bh_try_acquire(bh, 1) != 0 || bh_acquire_async(bh, &node, 1, forking_cb, &f) != 1)
		return 1;
	if (bh_release(bh, 1) != 0) /* handed to the node, on our agent */
		return 2;
	while ((kid = atomic_load(&f.kid)) == 0 && bh_now_ns() - t0 < 5 * BH_SEC)
		usleep(1000);
	if (kid <= 0)
		return 3;
	t0 = bh_now_ns();
	while ((r = waitpid(kid, &st, WNOHANG)) == 0 && bh_now_ns() - t0 < 2 * BH_SEC)
		usleep(10 * 1000);
	if (r == 0) { /* the copy went on inside the library */
		kill(kid, SIGKILL);
		waitpid(kid, NULL, 0);
		return 4;
	}
	if (bh_cancel_async(bh, &node) != 0 || bh_release(bh, 1) != 0) /* the grant is ours */
		return 5;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 6;
}

/* The free list of extra nodes holds each node at most once. */
static void assert_free_list_sound(bulkhead_t *bh)
{
	struct bhs_seg *g = bhs_segment(bh, NULL);
	const struct bhs_hdr *h = &g->hdr;
	struct bhs_qnode *q = (struct bhs_qnode *)((char *)g + h->off_qnodes);
	uint32_t nodes = h->nslots + h->nextra, n = 0;
	uint32_t i = atomic_load(&g->free_extra);

	while (i != 0) {
		assert_true(i - 1 >= h->nslots && i - 1 < nodes);
		assert_true(++n <= h->nextra); /* a node twice: a cycle */
		i = atomic_load(&q[i - 1].next);
	}
	assert_int_equal(n, h->nextra);
}

static void test_fork_in_callback_child_leaves(void **state)
{
	const char *name = uniq("async-fork");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct child c;

	(void)state;
	c = spawn(forks_in_callback, bh);
	assert_int_equal(reap(&c), 0);
	await_in_flight(bh, 0, BH_SEC);
	assert_free_list_sound(bh);
	assert_word_clean(bh, 1);
	shm_done(bh, name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo_fair),
		cmocka_unit_test(test_fifo_unfair),
		cmocka_unit_test(test_no_barging_when_fair),
		cmocka_unit_test(test_weighted_head_of_line),
		cmocka_unit_test(test_deadline_across_processes),
		cmocka_unit_test(test_close_wakes_other_processes),
		cmocka_unit_test(test_grow_grants_other_processes),
		cmocka_unit_test(test_shrink_across_processes),
		cmocka_unit_test(test_async_granted_by_other_process),
		cmocka_unit_test(test_async_closed_and_shrunk),
		cmocka_unit_test(test_close_then_destroy_delivers),
		cmocka_unit_test(test_pthread_cancel_waiter),
		cmocka_unit_test(test_timeout_racing_grant_keeps_permit),
		cmocka_unit_test(test_timeout_leaves_queue),
		cmocka_unit_test(test_eintr_and_polls_are_retried),
		cmocka_unit_test(test_unfair_starvation_guard),
		cmocka_unit_test(test_woken_head_leaving_clears_mark),
		cmocka_unit_test(test_shrink_to_request_keeps_waiter),
		cmocka_unit_test(test_grant_wakes_sleeper),
		cmocka_unit_test(test_cancel_after_grant_gives_back),
		cmocka_unit_test(test_cancel_after_grant_serves_next),
		cmocka_unit_test(test_queue_full_rejects),
		cmocka_unit_test(test_async_rejected_after_reclaim_counts),
		cmocka_unit_test(test_stress_fair),
		cmocka_unit_test(test_stress_unfair),
		cmocka_unit_test(test_async_stress),
		cmocka_unit_test(test_cancel_own_node_from_callback),
		cmocka_unit_test(test_fork_in_callback_child_leaves),
	};

	alarm(300);
	if (getenv("BH_TEST_FILTER")) /* one test: BH_TEST_FILTER=test_name */
		cmocka_set_test_filter(getenv("BH_TEST_FILTER"));
	return cmocka_run_group_tests(tests, shm_setup, shm_teardown);
}
