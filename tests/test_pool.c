/* The thread pool's rules, one test each. Keep-alive and deadlines run on a
 * virtual clock (struct vsync): a wait ends exactly when the test moves time
 * past its deadline. Races between a caller's timeout and its task's end are
 * played at exact points through scripted waits and hook points. Tests wait
 * for observable states (stats, flags), never for time to pass. */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "pool/pool_internal.h"
#include "adaptive/bha.h"
#include "bulkhead/adaptive.h"
#include "sizing.h" /* tools/: the sizing the tools print */

/* ---- a virtual clock and scripted waits ------------------------------------ */

/* The waits and the clock are the tests' one fake (testutil.h); the pool
 * adds thread creation that can fail and its hook points. */
struct vsync {
	struct fake_sync f;
	struct bhp_ops ops;
	int fail_create; /* so many thread creations fail with -EAGAIN */
	/* Set: a thread creation waits for it to open, with the pool's lock
	 * held (creations happen under it), in_create set meanwhile. */
	struct gate *create_gate;
	_Atomic int in_create;
	_Atomic unsigned poll_starts; /* pollers that have set their window */
	void (*point)(struct vsync *v, enum bhp_point p, struct bh_task *t);
	void *user;
};

static void gate_pass(struct gate *g);

static int vs_create(void *ctx, pthread_t *tid, const pthread_attr_t *attr, void *(*fn)(void *),
		     void *arg)
{
	struct vsync *v = ctx;

	if (v->create_gate) {
		atomic_store(&v->in_create, 1);
		gate_pass(v->create_gate);
	}
	if (v->fail_create > 0) {
		v->fail_create--;
		return -EAGAIN;
	}
	return -pthread_create(tid, attr, fn, arg);
}

static void vs_point(void *ctx, enum bhp_point p, struct bh_task *t)
{
	struct vsync *v = ctx;

	if (p == BHP_POLL_START)
		atomic_fetch_add(&v->poll_starts, 1);
	if (v->point)
		v->point(v, p, t);
}

/* Every wait blocks on the virtual clock until vs_script_calls. */
static void vs_init(struct vsync *v)
{
	memset(v, 0, sizeof(*v));
	fake_init(&v->f, 1000 * BH_SEC, NULL);
	v->ops = (struct bhp_ops){ .sync = &v->f.ops, .create = vs_create, .point = vs_point,
				   .ctx = v };
}

/* From now on the callers' waits (bh_pool_call) are scripted by hook, on
 * the caller's own thread, counting from call 0; the workers' still block. */
static void vs_script_calls(struct vsync *v, int (*hook)(struct fake_sync *f, unsigned n))
{
	v->f.hook = hook;
	v->f.hook_kinds = 1u << BHI_WAIT_CALL;
	v->f.waits = 0;
}

/* ---- tasks ----------------------------------------------------------------- */

struct gate {
	pthread_mutex_t m;
	pthread_cond_t c;
	bool open;
};

static void gate_init(struct gate *g)
{
	pthread_mutex_init(&g->m, NULL);
	pthread_cond_init(&g->c, NULL);
	g->open = false;
}

static void gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->m);
	g->open = true;
	pthread_cond_broadcast(&g->c);
	pthread_mutex_unlock(&g->m);
}

static void gate_pass(struct gate *g)
{
	pthread_mutex_lock(&g->m);
	while (!g->open)
		pthread_cond_wait(&g->c, &g->m);
	pthread_mutex_unlock(&g->m);
}

static _Atomic int start_seq;

/* Pool threads never assert (cmocka cannot fail from them): they record,
 * and the test thread checks. */
struct ttask {
	struct bh_task task;
	struct gate *gate;
	_Atomic int started, runs, dones, status, start_order;
	_Atomic bool cancelled_seen;
	pthread_t ran_on;
	char thread_name[16];
	bool sigs_blocked;
	int value;
	void (*extra)(struct ttask *tt);
};

static void tt_run(struct bh_task *t)
{
	struct ttask *tt = (struct ttask *)t;
	sigset_t cur;

	tt->ran_on = pthread_self();
	pthread_getname_np(pthread_self(), tt->thread_name, sizeof(tt->thread_name));
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	tt->sigs_blocked = sigismember(&cur, SIGUSR1) && sigismember(&cur, SIGINT) &&
			   sigismember(&cur, SIGTERM);
	atomic_store(&tt->start_order, atomic_fetch_add(&start_seq, 1));
	atomic_store(&tt->started, 1);
	if (tt->gate)
		gate_pass(tt->gate);
	if (bh_task_cancelled(t))
		atomic_store(&tt->cancelled_seen, true);
	if (tt->extra)
		tt->extra(tt);
	tt->value = 42;
	atomic_fetch_add(&tt->runs, 1);
}

static void tt_done(struct bh_task *t, int status)
{
	struct ttask *tt = (struct ttask *)t;

	atomic_store(&tt->status, status);
	atomic_fetch_add(&tt->dones, 1);
}

static void tt_init(struct ttask *tt, struct gate *g)
{
	memset(tt, 0, sizeof(*tt));
	tt->task.run = tt_run;
	tt->task.done = tt_done;
	tt->gate = g;
	atomic_store(&tt->status, 12345);
	atomic_store(&tt->start_order, -1);
}

#define AWAIT(cond)                                                      \
	do {                                                             \
		uint64_t end_ = bh_now_ns() + 10 * BH_SEC;               \
		while (!(cond)) {                                        \
			assert_true(bh_now_ns() < end_);                 \
			sched_yield();                                   \
		}                                                        \
	} while (0)

static struct bh_pool_stats pstats(bh_pool_t *p)
{
	struct bh_pool_stats st;

	bh_pool_stats(p, &st);
	/* every snapshot balances (pool.h) */
	assert_int_equal(st.submitted, st.queued + st.active - st.abandoned_running + st.completed +
						st.abandoned + st.discarded + st.caller_ran);
	assert_true(st.alive <= st.max_threads);
	assert_true(st.queued <= st.queue_capacity);
	assert_true(st.active <= st.alive);
	assert_true(!st.queued || st.active == st.alive); /* none waits while one idles */
	assert_true(st.largest <= st.max_threads);
	return st;
}

static bh_pool_t *make_pool(uint32_t core, uint32_t max, uint32_t cap, enum bh_pool_policy pol,
			    struct vsync *v)
{
	struct bh_pool_config cfg = { .name = "tp", .core_threads = core, .max_threads = max,
				      .queue_capacity = cap, .policy = pol,
				      .keep_alive_ns = 10 * BH_SEC };
	bh_pool_t *p = NULL;

	if (v)
		assert_int_equal(bhp_create(&cfg, &v->ops, &p), 0);
	else
		assert_int_equal(bh_pool_create(&cfg, &p), 0);
	assert_non_null(p);
	return p;
}

/* Threads of this process whose name starts with prefix: independent of the
 * pool's own counters. The kernel lets pthread_join return (the tid clear
 * on exit) a moment before the thread leaves /proc, so "none left" is
 * awaited, not asserted at once. */
static int count_threads(const char *prefix)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		char path[300], name[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue; /* gone meanwhile */
		if (fgets(name, sizeof(name), f) && strncmp(name, prefix, strlen(prefix)) == 0)
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

static uint32_t npollers(bh_pool_t *p)
{
	uint32_t n;

	pthread_mutex_lock(&p->lock);
	n = p->npollers;
	pthread_mutex_unlock(&p->lock);
	return n;
}

/* Admission permits held by tasks: the bulkhead's count less the pool's
 * cache of spare ones. */
static uint64_t held_permits(bh_pool_t *p)
{
	uint64_t n;

	pthread_mutex_lock(&p->lock);
	n = stats_of(p->adm).in_flight - p->cached;
	pthread_mutex_unlock(&p->lock);
	return n;
}

static uint32_t task_phase(const struct ttask *tt)
{
	return atomic_load((_Atomic uint32_t *)&tt->task.priv.state) & T_PHASE;
}

/* ---- configuration ---------------------------------------------------------- */

static void test_create_rejects_bad_config(void **state)
{
	struct bh_pool_config ok = { .max_threads = 2, .queue_capacity = 4 }, c;
	bh_pool_t *p = (bh_pool_t *)&ok;

	(void)state;
	assert_int_equal(bh_pool_create(NULL, &p), -EINVAL);
	assert_int_equal(bh_pool_create(&ok, NULL), -EINVAL);
	c = ok, c.max_threads = 0;
	assert_int_equal(bh_pool_create(&c, &p), -EINVAL);
	c = ok, c.core_threads = 3; /* max < core */
	assert_int_equal(bh_pool_create(&c, &p), -EINVAL);
	c = ok, c.max_threads = BH_POOL_THREADS_MAX + 1;
	assert_int_equal(bh_pool_create(&c, &p), -EINVAL);
	c = ok, c.queue_capacity = BH_QUEUE_UNBOUNDED; /* there is no unbounded queue */
	assert_int_equal(bh_pool_create(&c, &p), -EINVAL);
	c = ok, c.queue_capacity = BH_LIMIT_MAX - 1; /* 2 + that > BH_LIMIT_MAX */
	assert_int_equal(bh_pool_create(&c, &p), -EINVAL);
	c = ok, c.policy = (enum bh_pool_policy)7;
	assert_int_equal(bh_pool_create(&c, &p), -EINVAL);
	c = ok, c.flags = 1u << 9;
	assert_int_equal(bh_pool_create(&c, &p), -EINVAL);
	c = ok, c.stack_size = 1; /* below PTHREAD_STACK_MIN */
	assert_int_equal(bh_pool_create(&c, &p), -EINVAL);
	assert_ptr_equal(p, (bh_pool_t *)&ok); /* untouched on failure */

	/* a zero queue with ABORT is allowed: hand-off only */
	c = ok, c.core_threads = 1, c.max_threads = 1, c.queue_capacity = 0;
	assert_int_equal(bh_pool_create(&c, &p), 0);
	/* unnamed pools are numbered: no two share their metrics series */
	assert_memory_equal(bh_pool_name(p), "bhpool-", 7);
	{
		bh_pool_t *q;

		assert_int_equal(bh_pool_create(&c, &q), 0);
		assert_memory_equal(bh_pool_name(q), "bhpool-", 7);
		assert_string_not_equal(bh_pool_name(p), bh_pool_name(q));
		assert_int_equal(bh_pool_destroy(q), 0);
	}
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.alive, 0); /* threads start on demand */
	assert_int_equal(st.max_threads, 1);
	assert_int_equal(st.queue_capacity, 0);
	assert_int_equal(bh_pool_destroy(p), 0);
	c = ok, c.max_threads = BH_POOL_THREADS_MAX, c.queue_capacity = BH_LIMIT_MAX - BH_POOL_THREADS_MAX;
	assert_int_equal(bh_pool_create(&c, &p), 0);
	assert_int_equal(bh_pool_destroy(p), 0);
	assert_int_equal(bh_pool_destroy(NULL), 0);
}

static void test_bad_arguments(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 1, BH_POOL_ABORT, NULL);
	struct ttask tt;

	(void)state;
	tt_init(&tt, NULL);
	assert_int_equal(bh_pool_submit(NULL, &tt.task), -EINVAL);
	assert_int_equal(bh_pool_submit(p, NULL), -EINVAL);
	assert_int_equal(bh_pool_call(NULL, &tt.task, BH_FOREVER), -EINVAL);
	assert_int_equal(bh_pool_call(p, NULL, BH_FOREVER), -EINVAL);
	tt.task.run = NULL;
	assert_int_equal(bh_pool_submit(p, &tt.task), -EINVAL);
	assert_int_equal(bh_pool_call(p, &tt.task, BH_FOREVER), -EINVAL);
	assert_int_equal(bh_pool_shutdown(NULL, 0), -EINVAL);
	assert_int_equal(bh_pool_shutdown_now(NULL), -EINVAL);
	assert_null(bh_pool_name(NULL));
	assert_false(bh_task_cancelled(NULL));
	struct bh_pool_stats none;
	assert_int_equal(bh_pool_stats(NULL, &none), -EINVAL);
	assert_int_equal(bh_pool_stats(p, NULL), -EINVAL);
	assert_int_equal(bh_pool_stats(p, &none), 0);
	assert_int_equal(tt.dones, 0);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.submitted, 0);
	assert_int_equal(st.rejected, 0); /* bad input is not a rejection */
	bh_pool_destroy(p);
}

static void test_errno_untouched(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 0, BH_POOL_ABORT, NULL);
	struct gate g;
	struct ttask a, b;

	(void)state;
	gate_init(&g);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	errno = 1234;
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	assert_int_equal(bh_pool_submit(p, &b.task), -EBUSY);
	assert_int_equal(bh_pool_call(p, &b.task, BH_FOREVER), -EBUSY);
	gate_open(&g);
	assert_int_equal(bh_pool_shutdown(p, BH_FOREVER), 0);
	assert_int_equal(bh_pool_submit(p, &b.task), -ESHUTDOWN);
	assert_int_equal(errno, 1234);
	bh_pool_destroy(p);
}

/* ---- the executor's order -------------------------------------------------------- */

/* Below core: a new thread; then the queue; when it is full: grow to max;
 * then reject. Queued tasks wait while a later, grown-for task runs. */
static void test_submission_order(void **state)
{
	enum { N = 7 };
	bh_pool_t *p = make_pool(2, 4, 2, BH_POOL_ABORT, NULL);
	struct ttask t[N];
	struct gate g;
	struct bh_pool_stats st;
	static const struct { uint64_t alive, active, queued; } expect[N - 1] = {
		{ 1, 1, 0 }, { 2, 2, 0 }, /* core threads */
		{ 2, 2, 1 }, { 2, 2, 2 }, /* queue */
		{ 3, 3, 2 }, { 4, 4, 2 }, /* grow to max */
	};

	(void)state;
	gate_init(&g);
	for (int i = 0; i < N; i++)
		tt_init(&t[i], &g);
	for (int i = 0; i < N - 1; i++) {
		assert_int_equal(bh_pool_submit(p, &t[i].task), 0);
		st = pstats(p);
		assert_int_equal(st.alive, expect[i].alive);
		assert_int_equal(st.active, expect[i].active);
		assert_int_equal(st.queued, expect[i].queued);
	}
	assert_int_equal(bh_pool_submit(p, &t[N - 1].task), -EBUSY);
	st = pstats(p);
	assert_int_equal(st.rejected, 1);
	assert_int_equal(st.largest, 4);
	assert_int_equal(st.submitted, N - 1);
	AWAIT(t[4].started && t[5].started); /* grown-for tasks run first */
	assert_int_equal(t[2].started, 0);
	assert_int_equal(t[3].started, 0);
	gate_open(&g);
	AWAIT(pstats(p).completed == N - 1);
	for (int i = 0; i < N - 1; i++) {
		/* a task is counted completed just before its done runs */
		AWAIT(t[i].dones == 1);
		assert_int_equal(t[i].runs, 1);
		assert_int_equal(t[i].status, 0);
		assert_true(t[i].sigs_blocked);
	}
	assert_int_equal(t[N - 1].runs + t[N - 1].dones, 0); /* rejected: never touched */
	bh_pool_destroy(p);
}

/* Below core a task gets a new thread even when one is idle (as in Java). */
static void test_core_thread_started_despite_idle(void **state)
{
	bh_pool_t *p = make_pool(2, 2, 4, BH_POOL_ABORT, NULL);
	struct ttask a, b;

	(void)state;
	tt_init(&a, NULL);
	tt_init(&b, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(pstats(p).completed == 1);
	assert_int_equal(pstats(p).alive, 1);
	assert_int_equal(bh_pool_submit(p, &b.task), 0);
	assert_int_equal(pstats(p).alive, 2);
	AWAIT(b.dones == 1);
	bh_pool_destroy(p);
}

/* Queue capacity 0: hand-off only. No idle thread: grow; at max: reject;
 * an idle thread takes the next task without a new thread. */
static void test_zero_queue_is_handoff(void **state)
{
	bh_pool_t *p = make_pool(1, 2, 0, BH_POOL_ABORT, NULL);
	struct ttask t[4];
	struct gate g;

	(void)state;
	gate_init(&g);
	for (int i = 0; i < 4; i++)
		tt_init(&t[i], i < 3 ? &g : NULL);
	assert_int_equal(bh_pool_submit(p, &t[0].task), 0);
	assert_int_equal(bh_pool_submit(p, &t[1].task), 0);
	assert_int_equal(pstats(p).alive, 2);
	assert_int_equal(bh_pool_submit(p, &t[2].task), -EBUSY);
	gate_open(&g);
	AWAIT(pstats(p).completed == 2 && pstats(p).active == 0);
	assert_int_equal(bh_pool_submit(p, &t[3].task), 0);
	AWAIT(t[3].dones == 1);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.largest, 2);
	assert_int_equal(st.alive, 2);
	assert_int_equal(st.queued, 0);
	bh_pool_destroy(p);
}

/* core 0: the first task starts a thread; then tasks queue until full. */
static void test_core_zero(void **state)
{
	struct vsync v;
	bh_pool_t *p;
	struct ttask t[4];
	struct gate g;

	(void)state;
	vs_init(&v);
	p = make_pool(0, 2, 2, BH_POOL_ABORT, &v);
	gate_init(&g);
	for (int i = 0; i < 4; i++)
		tt_init(&t[i], &g);
	assert_int_equal(bh_pool_submit(p, &t[0].task), 0);
	assert_int_equal(pstats(p).alive, 1);
	assert_int_equal(bh_pool_submit(p, &t[1].task), 0);
	assert_int_equal(bh_pool_submit(p, &t[2].task), 0);
	assert_int_equal(pstats(p).queued, 2);
	assert_int_equal(pstats(p).alive, 1);
	assert_int_equal(bh_pool_submit(p, &t[3].task), 0);
	assert_int_equal(pstats(p).alive, 2);
	gate_open(&g);
	AWAIT(pstats(p).completed == 4);
	fake_await(&v.f, BHI_WAIT_PARK, 2);
	fake_advance(&v.f, 10 * BH_SEC); /* every thread is above core 0 */
	AWAIT(pstats(p).alive == 0);
	tt_init(&t[0], NULL);
	assert_int_equal(bh_pool_submit(p, &t[0].task), 0); /* starts one again */
	AWAIT(t[0].dones == 1);
	bh_pool_destroy(p);
}

/* A prestarted thread is idle from the start, even before it runs: a
 * hand-off-only pool accepts as many tasks as it has threads at once. */
static void test_prestart(void **state)
{
	struct bh_pool_config cfg = { .name = "pre", .core_threads = 2, .max_threads = 2,
				      .flags = BH_POOL_PRESTART };
	bh_pool_t *p;
	struct ttask t[3];
	struct gate g;

	(void)state;
	gate_init(&g);
	assert_int_equal(bh_pool_create(&cfg, &p), 0);
	assert_int_equal(pstats(p).alive, 2);
	for (int i = 0; i < 3; i++)
		tt_init(&t[i], &g);
	assert_int_equal(bh_pool_submit(p, &t[0].task), 0);
	assert_int_equal(bh_pool_submit(p, &t[1].task), 0);
	assert_int_equal(bh_pool_submit(p, &t[2].task), -EBUSY);
	assert_int_equal(pstats(p).largest, 2);
	gate_open(&g);
	AWAIT(pstats(p).completed == 2);
	bh_pool_destroy(p);
}

static void test_fifo_order(void **state)
{
	enum { N = 16 };
	bh_pool_t *p = make_pool(1, 1, N, BH_POOL_ABORT, NULL);
	struct ttask first, t[N];
	struct gate g;

	(void)state;
	gate_init(&g);
	tt_init(&first, &g);
	assert_int_equal(bh_pool_submit(p, &first.task), 0);
	for (int i = 0; i < N; i++) {
		tt_init(&t[i], NULL);
		assert_int_equal(bh_pool_submit(p, &t[i].task), 0);
	}
	gate_open(&g);
	AWAIT(pstats(p).completed == N + 1);
	for (int i = 1; i < N; i++)
		assert_true(t[i - 1].start_order < t[i].start_order);
	bh_pool_destroy(p);
}

/* ---- policies --------------------------------------------------------------- */

static void test_abort_policy(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 1, BH_POOL_ABORT, NULL);
	struct ttask a, b, c;
	struct gate g;

	(void)state;
	gate_init(&g);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&c, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	assert_int_equal(bh_pool_submit(p, &b.task), 0);
	assert_int_equal(bh_pool_submit(p, &c.task), -EBUSY);
	assert_int_equal(bh_pool_call(p, &c.task, BH_FOREVER), -EBUSY);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.rejected, 2);
	assert_int_equal(st.submitted, 2);
	assert_int_equal(c.runs + c.dones, 0);
	gate_open(&g);
	AWAIT(pstats(p).completed == 2);
	bh_pool_destroy(p);
}

static void test_caller_runs_policy(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 0, BH_POOL_CALLER_RUNS, NULL);
	struct ttask a, b, c;
	struct gate g;

	(void)state;
	gate_init(&g);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&c, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	assert_int_equal(bh_pool_submit(p, &b.task), BH_POOL_CALLER_RAN);
	assert_true(pthread_equal(b.ran_on, pthread_self()));
	assert_int_equal(b.runs, 1);
	assert_int_equal(b.dones, 1);
	assert_int_equal(b.status, 0);
	/* a call run by its caller: 0, and done is not called (it is the caller's) */
	assert_int_equal(bh_pool_call(p, &c.task, BH_FOREVER), 0);
	assert_true(pthread_equal(c.ran_on, pthread_self()));
	assert_int_equal(c.runs, 1);
	assert_int_equal(c.dones, 0);
	assert_int_equal(c.value, 42);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.caller_ran, 2);
	assert_int_equal(st.rejected, 2);
	assert_int_equal(st.completed, 0);
	gate_open(&g);
	AWAIT(pstats(p).completed == 1);
	bh_pool_destroy(p);
}

static void test_discard_policy(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 1, BH_POOL_DISCARD, NULL);
	struct ttask a, b, c, d;
	struct gate g;

	(void)state;
	gate_init(&g);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&c, NULL);
	tt_init(&d, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	assert_int_equal(bh_pool_submit(p, &b.task), 0);
	assert_int_equal(bh_pool_submit(p, &c.task), BH_POOL_DISCARDED);
	assert_int_equal(c.runs, 0);
	assert_int_equal(c.dones, 1);
	assert_int_equal(c.status, -ECANCELED);
	/* a caller is told directly, not dropped behind its back */
	assert_int_equal(bh_pool_call(p, &d.task, BH_FOREVER), -EBUSY);
	assert_int_equal(d.runs + d.dones, 0);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.discarded, 1);
	assert_int_equal(st.rejected, 2);
	gate_open(&g);
	AWAIT(pstats(p).completed == 2 && b.dones == 1);
	assert_int_equal(b.status, 0);
	bh_pool_destroy(p);
}

struct caller_arg {
	bh_pool_t *pool;
	struct ttask *tt;
	uint64_t deadline;
	int result;
	_Atomic bool returned;
};

static void *caller_main(void *arg)
{
	struct caller_arg *c = arg;

	c->result = bh_pool_call(c->pool, &c->tt->task, c->deadline);
	atomic_store(&c->returned, true);
	return NULL;
}

static void test_discard_oldest_policy(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 2, BH_POOL_DISCARD_OLDEST, NULL);
	struct ttask a, b, c, d, e;
	struct caller_arg ca;
	struct gate g;
	pthread_t th;

	(void)state;
	gate_init(&g);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&c, NULL);
	tt_init(&d, NULL);
	tt_init(&e, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	assert_int_equal(bh_pool_submit(p, &b.task), 0);
	/* c is a call, waiting in the queue behind b */
	ca = (struct caller_arg){ .pool = p, .tt = &c, .deadline = BH_FOREVER };
	assert_int_equal(pthread_create(&th, NULL, caller_main, &ca), 0);
	AWAIT(pstats(p).queued == 2);
	assert_int_equal(bh_pool_submit(p, &d.task), 0); /* drops b, the oldest */
	assert_int_equal(b.dones, 1);
	assert_int_equal(b.status, -ECANCELED);
	assert_int_equal(b.runs, 0);
	assert_int_equal(bh_pool_submit(p, &e.task), 0); /* drops the call c */
	pthread_join(th, NULL);
	assert_int_equal(ca.result, -ECANCELED);
	assert_int_equal(c.runs + c.dones, 0); /* the caller's again, untouched */
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.discarded, 2);
	assert_int_equal(st.queued, 2);
	assert_int_equal(st.rejected, 2); /* d and e found the pool full */
	gate_open(&g);
	AWAIT(pstats(p).completed == 3);
	assert_true(d.start_order < e.start_order);
	bh_pool_destroy(p);

	/* nothing queued to drop: the newcomer itself is the oldest */
	p = make_pool(1, 1, 0, BH_POOL_DISCARD_OLDEST, NULL);
	gate_init(&g);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&c, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	assert_int_equal(bh_pool_submit(p, &b.task), BH_POOL_DISCARDED);
	assert_int_equal(b.status, -ECANCELED);
	assert_int_equal(bh_pool_call(p, &c.task, BH_FOREVER), -EBUSY);
	assert_int_equal(pstats(p).rejected, 2);
	gate_open(&g);
	bh_pool_destroy(p);
}

/* ---- rejections are counted once, where the pool decides -------------------- */

static bh_pool_t *hook_pool;
static struct gate *hook_gate;
static _Atomic int hook_hits;

/* At the first refusal by the admission bulkhead: the running task ends and
 * its permit goes to the pool's cache before the submitter looks there. */
static void point_finish_on_refusal(struct vsync *v, enum bhp_point p, struct bh_task *t)
{
	(void)v;
	(void)t;
	if (p != BHP_ADMIT_BUSY || atomic_fetch_add(&hook_hits, 1) != 0)
		return;
	gate_open(hook_gate);
	AWAIT(atomic_load(&hook_pool->cached_hint) == 1);
}

/* Refused by the bulkhead, then served from the cache: an accepted task,
 * and no rejection. */
static void test_refusal_then_cache_is_no_rejection(void **state)
{
	struct vsync v;
	struct ttask a, b;
	struct gate g;

	(void)state;
	vs_init(&v);
	gate_init(&g);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	hook_pool = make_pool(1, 1, 0, BH_POOL_ABORT, &v);
	hook_gate = &g;
	atomic_store(&hook_hits, 0);
	v.point = point_finish_on_refusal;
	assert_int_equal(bh_pool_submit(hook_pool, &a.task), 0); /* the cached permit */
	assert_int_equal(bh_pool_submit(hook_pool, &b.task), 0);
	assert_int_equal(atomic_load(&hook_hits), 1);
	AWAIT(b.dones == 1);
	struct bh_pool_stats st = pstats(hook_pool);
	assert_int_equal(st.submitted, 2);
	assert_int_equal(st.rejected, 0);
	assert_int_equal(bh_pool_destroy(hook_pool), 0);
}

/* At the first refusal: the pool is shut down before the policy acts. */
static void point_close_on_refusal(struct vsync *v, enum bhp_point p, struct bh_task *t)
{
	(void)v;
	(void)t;
	if (p == BHP_ADMIT_BUSY && atomic_fetch_add(&hook_hits, 1) == 0)
		assert_int_equal(bh_pool_shutdown_now(hook_pool), 0);
}

/* A full pool closes while a submission is refused: the policy finds it
 * closed (-ESHUTDOWN, nothing counted), while a refusal already decided
 * (-EBUSY) is counted. Either way rejected equals what the callers saw. */
static void test_close_races_refusal(void **state)
{
	static const struct {
		enum bh_pool_policy policy;
		bool call;
		int want;
	} cases[] = {
		{ BH_POOL_ABORT, false, -EBUSY },
		{ BH_POOL_ABORT, true, -EBUSY },
		{ BH_POOL_CALLER_RUNS, false, -ESHUTDOWN },
		{ BH_POOL_CALLER_RUNS, true, -ESHUTDOWN },
		{ BH_POOL_DISCARD, false, -ESHUTDOWN },
		{ BH_POOL_DISCARD, true, -EBUSY },
		{ BH_POOL_DISCARD_OLDEST, false, -ESHUTDOWN },
		{ BH_POOL_DISCARD_OLDEST, true, -ESHUTDOWN },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct vsync v;
		struct ttask a, b;
		struct gate g;
		int r;

		vs_init(&v);
		gate_init(&g);
		tt_init(&a, &g);
		tt_init(&b, NULL);
		hook_pool = make_pool(1, 1, 0, cases[i].policy, &v);
		atomic_store(&hook_hits, 0);
		assert_int_equal(bh_pool_submit(hook_pool, &a.task), 0);
		v.point = point_close_on_refusal;
		r = cases[i].call ? bh_pool_call(hook_pool, &b.task, BH_FOREVER)
				  : bh_pool_submit(hook_pool, &b.task);
		assert_int_equal(r, cases[i].want);
		assert_int_equal(atomic_load(&hook_hits), 1);
		assert_int_equal(b.runs + b.dones, 0);
		struct bh_pool_stats st = pstats(hook_pool);
		assert_int_equal(st.rejected, r == -EBUSY);
		assert_int_equal(st.submitted, 1);
		gate_open(&g);
		assert_int_equal(bh_pool_destroy(hook_pool), 0);
	}
}

/* Many submitters against a one-thread pool without a queue: every -EBUSY
 * is one rejection, and every submission is either taken or rejected. */
enum { FLOOD_SUBMITS = 300000 };

static void run_nothing(struct bh_task *t)
{
	(void)t;
}

struct flood {
	bh_pool_t *pool;
	struct bh_task *tasks;
	long ok, busy, other;
};

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	size_t next = 0;

	for (int i = 0; i < FLOOD_SUBMITS; i++) {
		/* a refused task is the caller's again: reuse it */
		int r = bh_pool_submit(f->pool, &f->tasks[next]);

		if (r == 0) {
			f->ok++;
			next++;
		} else if (r == -EBUSY) {
			f->busy++;
		} else {
			f->other++;
		}
	}
	return NULL;
}

static void test_rejections_exact_under_contention(void **state)
{
	enum { T = 2 };
	struct flood f[T];
	pthread_t th[T];
	long ok = 0, busy = 0, other = 0;
	bh_pool_t *p = make_pool(1, 1, 0, BH_POOL_ABORT, NULL);

	(void)state;
	for (int i = 0; i < T; i++) {
		f[i] = (struct flood){ .pool = p, .tasks = calloc(FLOOD_SUBMITS, sizeof(struct bh_task)) };
		assert_non_null(f[i].tasks);
		for (int k = 0; k < FLOOD_SUBMITS; k++)
			f[i].tasks[k].run = run_nothing;
		assert_int_equal(pthread_create(&th[i], NULL, flood_main, &f[i]), 0);
	}
	for (int i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		ok += f[i].ok, busy += f[i].busy, other += f[i].other;
	}
	assert_int_equal(bh_pool_shutdown(p, BH_FOREVER), 0);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(other, 0);
	assert_int_equal(ok + busy, T * FLOOD_SUBMITS);
	assert_int_equal(st.submitted, ok);
	assert_int_equal(st.completed, ok);
	assert_int_equal(st.rejected, busy);
	assert_int_equal(st.submitted + st.rejected, T * FLOOD_SUBMITS);
	assert_int_equal(bh_pool_destroy(p), 0);
	for (int i = 0; i < T; i++)
		free(f[i].tasks);
}

/* ---- keep-alive ------------------------------------------------------------------ */

static void test_keepalive_shrinks_to_core(void **state)
{
	struct vsync v;
	struct bh_pool_config cfg = { .name = "ka", .core_threads = 1, .max_threads = 3,
				      .keep_alive_ns = 10 * BH_SEC };
	bh_pool_t *p;
	struct ttask t[3];
	struct gate g;

	(void)state;
	vs_init(&v);
	gate_init(&g);
	assert_int_equal(bhp_create(&cfg, &v.ops, &p), 0);
	for (int i = 0; i < 3; i++) {
		tt_init(&t[i], &g);
		assert_int_equal(bh_pool_submit(p, &t[i].task), 0);
	}
	assert_int_equal(pstats(p).alive, 3);
	gate_open(&g);
	AWAIT(pstats(p).completed == 3);
	fake_await(&v.f, BHI_WAIT_PARK, 3);
	assert_int_equal(count_threads("ka-"), 3);
	fake_advance(&v.f, 10 * BH_SEC - 1); /* not yet */
	fake_await(&v.f, BHI_WAIT_PARK, 3);
	assert_int_equal(pstats(p).alive, 3);
	fake_advance(&v.f, 1); /* now: two of three leave, one stays as core */
	AWAIT(pstats(p).alive == 1);
	fake_await(&v.f, BHI_WAIT_PARK, 1);
	AWAIT(count_threads("ka-") == 1); /* the threads are really gone */
	fake_advance(&v.f, 1000 * BH_SEC); /* the core thread never times out */
	fake_await(&v.f, BHI_WAIT_PARK, 1);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.alive, 1);
	assert_int_equal(st.largest, 3);
	/* it grows again, reusing the slots of the threads that left */
	for (int i = 0; i < 3; i++) {
		tt_init(&t[i], NULL);
		assert_int_equal(bh_pool_submit(p, &t[i].task), 0);
	}
	AWAIT(pstats(p).completed == 6);
	bh_pool_destroy(p);
	AWAIT(count_threads("ka-") == 0);
}

/* The keep-alive expires at the very moment a task is handed over: the task
 * runs on that thread, nothing is lost, no second thread starts. */
static struct ttask handed;
static bh_pool_t *handed_pool;
static _Atomic int handed_r = 99;

static void point_submit_on_timeout(struct vsync *v, enum bhp_point where, struct bh_task *t)
{
	(void)t;
	if (where == BHP_PARK_TIMEOUT && atomic_load(&handed_r) == 99) {
		v->point = NULL;
		atomic_store(&handed_r, bh_pool_submit(handed_pool, &handed.task));
	}
}

static void test_keepalive_races_handoff(void **state)
{
	struct vsync v;
	struct ttask first;

	(void)state;
	vs_init(&v);
	handed_pool = make_pool(0, 1, 0, BH_POOL_ABORT, &v);
	tt_init(&first, NULL);
	tt_init(&handed, NULL);
	assert_int_equal(bh_pool_submit(handed_pool, &first.task), 0);
	AWAIT(first.dones == 1);
	fake_await(&v.f, BHI_WAIT_PARK, 1);
	v.point = point_submit_on_timeout;
	fake_advance(&v.f, 10 * BH_SEC);
	AWAIT(handed.dones == 1);
	assert_int_equal(atomic_load(&handed_r), 0);
	assert_true(pthread_equal(handed.ran_on, first.ran_on));
	struct bh_pool_stats st = pstats(handed_pool);
	assert_int_equal(st.largest, 1);
	assert_int_equal(st.completed, 2);
	fake_await(&v.f, BHI_WAIT_PARK, 1); /* idle again, with a fresh keep-alive */
	assert_int_equal(st.alive, 1);
	fake_advance(&v.f, 10 * BH_SEC);
	AWAIT(pstats(handed_pool).alive == 0);
	bh_pool_destroy(handed_pool);
}

/* bh_pool_submit never waits and is not a cancellation point, but a new
 * thread may reuse the slot of one whose keep-alive expired and which is
 * still on its way out: the pthread_join there, under the pool's lock, must
 * not act on a pending cancellation request, or the submitter unwinds
 * holding the lock and every later call on the pool hangs. */
static struct gate exit_gate;
static _Atomic int exit_blocked;

static void point_block_exit(struct vsync *v, enum bhp_point where, struct bh_task *t)
{
	(void)v;
	(void)t;
	if (where == BHP_WORKER_EXIT && !atomic_exchange(&exit_blocked, 1))
		gate_pass(&exit_gate); /* the first worker to leave stays a zombie */
}

struct submit_arg {
	bh_pool_t *pool;
	struct ttask *tt;
	int result;
	_Atomic bool returned;
};

static void *cancelled_submit_main(void *arg)
{
	struct submit_arg *s = arg;

	pthread_cancel(pthread_self()); /* deferred: pending */
	s->result = bh_pool_submit(s->pool, &s->tt->task);
	atomic_store(&s->returned, true);
	return NULL;
}

static void test_submit_join_not_cancellation_point(void **state)
{
	struct vsync v;
	bh_pool_t *p;
	struct ttask a, b;
	struct submit_arg sa;
	struct timespec ts;
	pthread_t th;
	void *ret = NULL;
	int joined;

	(void)state;
	vs_init(&v);
	gate_init(&exit_gate);
	atomic_store(&exit_blocked, 0);
	p = make_pool(0, 1, 0, BH_POOL_ABORT, &v);
	tt_init(&a, NULL);
	tt_init(&b, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(a.dones == 1);
	fake_await(&v.f, BHI_WAIT_PARK, 1);
	v.point = point_block_exit;
	fake_advance(&v.f, 10 * BH_SEC); /* it leaves, and stops on its way out */
	AWAIT(atomic_load(&exit_blocked) && pstats(p).alive == 0);
	sa = (struct submit_arg){ .pool = p, .tt = &b, .result = 99 };
	assert_int_equal(pthread_create(&th, NULL, cancelled_submit_main, &sa), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1;
	joined = pthread_timedjoin_np(th, &ret, &ts); /* the fix: still joining */
	gate_open(&exit_gate);
	if (joined != 0)
		pthread_join(th, &ret);
	assert_ptr_equal(ret, NULL); /* not cancelled (with the pool's lock held) */
	assert_true(atomic_load(&sa.returned));
	assert_int_equal(sa.result, 0);
	AWAIT(b.dones == 1);
	assert_int_equal(bh_pool_destroy(p), 0);
}

/* ---- polling idle workers ----------------------------------------------------------- */

/* An idle worker polls (on the virtual clock here): a task handed to it is
 * taken with no wake at all. When polling stops paying (spin_ns passes with
 * nothing), it sleeps and polling is off; a task handed to a sleeper soon
 * after it fell asleep turns polling back on. */
static void test_poller_takes_work_without_wake(void **state)
{
	struct vsync v;
	bh_pool_t *p;
	struct ttask t[4];
	unsigned wakes;

	(void)state;
	vs_init(&v);
	p = make_pool(1, 1, 2, BH_POOL_ABORT, &v);
	bhp_set_spin_ns(p, BH_SEC);
	for (int i = 0; i < 4; i++)
		tt_init(&t[i], NULL);
	assert_int_equal(bh_pool_submit(p, &t[0].task), 0);
	AWAIT(t[0].dones == 1 && npollers(p) == 1);
	wakes = fake_wakes(&v.f);
	assert_int_equal(bh_pool_submit(p, &t[1].task), 0); /* handed to the poller */
	AWAIT(t[1].dones == 1 && npollers(p) == 1);
	assert_int_equal(fake_wakes(&v.f), wakes); /* nobody was woken */
	assert_true(pthread_equal(t[1].ran_on, t[0].ran_on));
	AWAIT(atomic_load(&v.poll_starts) == 2); /* polling again, window set */
	fake_advance(&v.f, BH_SEC); /* polling stops paying: sleep */
	fake_await(&v.f, BHI_WAIT_PARK, 1);
	assert_int_equal(npollers(p), 0);
	assert_false(atomic_load(&p->spin_on));
	assert_int_equal(bh_pool_submit(p, &t[2].task), 0); /* handed over, woken */
	AWAIT(t[2].dones == 1);
	assert_true(fake_wakes(&v.f) > wakes);
	assert_true(atomic_load(&p->spin_on)); /* it came at once: poll again */
	AWAIT(npollers(p) == 1);
	assert_int_equal(bh_pool_submit(p, &t[3].task), 0);
	AWAIT(t[3].dones == 1);
	assert_int_equal(pstats(p).completed, 4);
	bh_pool_destroy(p);
}

/* One poller, one sleeper: two tasks arriving together run at once, on two
 * threads; the second does not wait for the poller to be free again. */
static void test_backlog_goes_to_sleepers(void **state)
{
	struct vsync v;
	bh_pool_t *p;
	struct ttask a, b, g1, g2;
	struct gate g;

	(void)state;
	vs_init(&v);
	gate_init(&g);
	p = make_pool(2, 2, 4, BH_POOL_ABORT, &v);
	bhp_set_spin_ns(p, BH_SEC);
	p->max_pollers = 1;
	tt_init(&a, NULL);
	tt_init(&b, NULL);
	tt_init(&g1, &g);
	tt_init(&g2, &g);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	assert_int_equal(bh_pool_submit(p, &b.task), 0);
	AWAIT(a.dones == 1 && b.dones == 1);
	fake_await(&v.f, BHI_WAIT_PARK, 1);
	AWAIT(npollers(p) == 1);
	assert_int_equal(bh_pool_submit(p, &g1.task), 0); /* to the poller */
	assert_int_equal(bh_pool_submit(p, &g2.task), 0); /* to the sleeper */
	assert_int_equal(pstats(p).queued, 0);
	AWAIT(g1.started && g2.started); /* both run while the gate is shut */
	assert_false(pthread_equal(g1.ran_on, g2.ran_on));
	gate_open(&g);
	AWAIT(pstats(p).completed == 4);
	bh_pool_destroy(p);
}

/* ---- calls and deadlines ----------------------------------------------------------- */

static void test_call_completes(void **state)
{
	bh_pool_t *p = make_pool(1, 2, 2, BH_POOL_ABORT, NULL);
	struct ttask t;

	(void)state;
	for (int i = 0; i < 50; i++) {
		tt_init(&t, NULL);
		assert_int_equal(bh_pool_call(p, &t.task, BH_FOREVER), 0);
		assert_int_equal(t.value, 42); /* run's writes are the caller's */
		assert_int_equal(t.runs, 1);
		assert_int_equal(t.dones, 0); /* the caller took it back */
		assert_false(pthread_equal(t.ran_on, pthread_self()));
		assert_int_equal(pstats(p).completed, (uint64_t)i + 1); /* counted already */
	}
	tt_init(&t, NULL);
	assert_int_equal(bh_pool_call(p, &t.task, bh_now_ns() + 60 * BH_SEC), 0);
	AWAIT(pstats(p).completed == 51);
	bh_pool_destroy(p);
}

/* The deadline ends the wait, not the work: the task keeps its thread and
 * its slot (a new task is refused), sees it was abandoned, and is reported
 * once, to done, when it really finishes. */
static void test_deadline_keeps_slot(void **state)
{
	struct vsync v;
	bh_pool_t *p;
	struct ttask t, other;
	struct caller_arg ca;
	struct gate g;
	pthread_t th;

	(void)state;
	vs_init(&v);
	gate_init(&g);
	p = make_pool(1, 1, 0, BH_POOL_ABORT, &v);
	tt_init(&t, &g);
	tt_init(&other, NULL);
	ca = (struct caller_arg){ .pool = p, .tt = &t, .deadline = v.f.now + BH_SEC };
	assert_int_equal(pthread_create(&th, NULL, caller_main, &ca), 0);
	AWAIT(t.started);
	fake_await(&v.f, BHI_WAIT_CALL, 1);
	assert_false(bh_task_cancelled(&t.task));
	fake_advance(&v.f, BH_SEC);
	pthread_join(th, NULL);
	assert_int_equal(ca.result, -ETIMEDOUT);
	assert_true(bh_task_cancelled(&t.task)); /* the task may stop early */
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.active, 1);
	assert_int_equal(st.abandoned, 1);
	assert_int_equal(st.abandoned_running, 1);
	assert_int_equal(bh_pool_submit(p, &other.task), -EBUSY); /* the slot is held */
	gate_open(&g);
	AWAIT(t.dones == 1);
	assert_int_equal(t.status, -ETIMEDOUT); /* ran, nobody waited */
	assert_int_equal(t.runs, 1);
	assert_true(t.cancelled_seen);
	AWAIT(pstats(p).active == 0);
	st = pstats(p);
	assert_int_equal(st.completed, 0); /* abandoned, never also completed */
	assert_int_equal(st.abandoned_running, 0);
	assert_int_equal(bh_pool_submit(p, &other.task), 0);
	AWAIT(other.dones == 1);
	bh_pool_destroy(p);
}

/* Timeout against completion, at exact points, many rounds each. */
enum race { COMPLETION_FIRST, ABANDON_FIRST, ABANDON_AFTER_RUN };
static enum race race_kind;
static struct ttask race_t;
static struct gate race_gate;
static _Atomic int at_after_run, after_run_go;

static int hook_race(struct fake_sync *f, unsigned n)
{
	(void)f;
	if (n > 0)
		return -ETIMEDOUT; /* the deadline has passed for good */
	switch (race_kind) {
	case COMPLETION_FIRST:
		gate_open(&race_gate);
		while (task_phase(&race_t) != T_DONE)
			sched_yield(); /* published, not yet seen by the caller */
		break;
	case ABANDON_FIRST:
		break; /* still inside run */
	case ABANDON_AFTER_RUN:
		gate_open(&race_gate);
		while (!atomic_load(&at_after_run))
			sched_yield(); /* run returned, T_DONE not yet published */
		break;
	}
	return -ETIMEDOUT;
}

static void point_hold_after_run(struct vsync *v, enum bhp_point where, struct bh_task *t)
{
	(void)v;
	if (where != BHP_AFTER_RUN || t != &race_t.task)
		return;
	atomic_store(&at_after_run, 1);
	while (!atomic_load(&after_run_go))
		sched_yield();
}

static void test_timeout_vs_completion(void **state)
{
	(void)state;
	for (int round = 0; round < 300; round++) {
		struct vsync v;
		bh_pool_t *p;
		int r;

		race_kind = (enum race)(round % 3);
		vs_init(&v);
		vs_script_calls(&v, hook_race);
		v.point = point_hold_after_run;
		atomic_store(&at_after_run, 0);
		atomic_store(&after_run_go, race_kind != ABANDON_AFTER_RUN);
		gate_init(&race_gate);
		tt_init(&race_t, &race_gate);
		p = make_pool(1, 1, 0, BH_POOL_ABORT, &v);
		r = bh_pool_call(p, &race_t.task, v.f.now + BH_SEC);
		if (race_kind == ABANDON_FIRST)
			gate_open(&race_gate);
		atomic_store(&after_run_go, 1);
		AWAIT(pstats(p).active == 0);
		struct bh_pool_stats st = pstats(p);
		assert_int_equal(race_t.runs, 1);
		if (race_kind == COMPLETION_FIRST) {
			assert_int_equal(r, 0);
			assert_int_equal(race_t.value, 42);
			assert_int_equal(race_t.dones, 0);
			assert_int_equal(st.completed, 1);
			assert_int_equal(st.abandoned, 0);
		} else {
			assert_int_equal(r, -ETIMEDOUT);
			AWAIT(race_t.dones == 1);
			assert_int_equal(race_t.status, -ETIMEDOUT);
			assert_int_equal(st.completed, 0);
			assert_int_equal(st.abandoned, 1);
		}
		assert_int_equal(bh_pool_destroy(p), 0);
		assert_int_equal(race_t.dones, race_kind == COMPLETION_FIRST ? 0 : 1); /* once */
	}
}

static struct gate *queued_first_gate;
static struct ttask *queued_next;
static int hook_pop_then_timeout(struct fake_sync *f, unsigned n)
{
	(void)f;
	if (n == 0) {
		gate_open(queued_first_gate);   /* the worker pops our task... */
		while (!atomic_load(&queued_next->started))
			sched_yield(); /* ...and starts it */
	}
	return -ETIMEDOUT;
}

static int hook_timeout_at_once(struct fake_sync *f, unsigned n)
{
	(void)f;
	(void)n;
	return -ETIMEDOUT;
}

/* Timed out while still queued: it never runs, its done gets -ECANCELED
 * before the call returns, and its queue slot is free at once. Timed out
 * just as a worker took it off the queue: it runs, abandoned. */
static void test_timeout_while_queued(void **state)
{
	struct vsync v;
	bh_pool_t *p;
	struct ttask a, b, c;
	struct gate g, g2, g3;

	(void)state;
	vs_init(&v);
	gate_init(&g);
	gate_init(&g2);
	gate_init(&g3);
	p = make_pool(1, 1, 1, BH_POOL_ABORT, &v);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&c, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	vs_script_calls(&v, hook_timeout_at_once);
	assert_int_equal(bh_pool_call(p, &b.task, v.f.now + BH_SEC), -ETIMEDOUT);
	assert_int_equal(b.dones, 1);
	assert_int_equal(b.status, -ECANCELED);
	assert_int_equal(b.runs, 0);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.abandoned, 1);
	assert_int_equal(st.abandoned_running, 0);
	assert_int_equal(bh_pool_submit(p, &c.task), 0); /* the slot is free */
	assert_int_equal(pstats(p).queued, 1);
	gate_open(&g);
	AWAIT(pstats(p).completed == 2);

	/* popped and started between the timeout and the giving up */
	tt_init(&a, &g2);
	tt_init(&b, &g3);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(a.started);
	queued_first_gate = &g2;
	queued_next = &b;
	vs_script_calls(&v, hook_pop_then_timeout);
	assert_int_equal(bh_pool_call(p, &b.task, v.f.now + BH_SEC), -ETIMEDOUT);
	st = pstats(p);
	assert_int_equal(st.abandoned_running, 1);
	assert_true(bh_task_cancelled(&b.task));
	gate_open(&g3);
	AWAIT(b.dones == 1);
	assert_int_equal(b.status, -ETIMEDOUT);
	assert_int_equal(b.runs, 1);
	bh_pool_destroy(p);
}

/* A deadline already past: nothing runs, done gets -ECANCELED, -ETIMEDOUT. */
static void test_past_deadline(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 1, BH_POOL_CALLER_RUNS, NULL);
	struct ttask t;

	(void)state;
	tt_init(&t, NULL);
	assert_int_equal(bh_pool_call(p, &t.task, 0), -ETIMEDOUT);
	assert_int_equal(t.runs, 0);
	assert_int_equal(t.dones, 1);
	assert_int_equal(t.status, -ECANCELED);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.alive, 0);
	assert_int_equal(st.abandoned, 1);
	bh_pool_destroy(p);
}

/* The pool's order of errors: invalid arguments, then shut down, then a
 * deadline already past (-ETIMEDOUT), then full (-EBUSY or the policy). */
static void test_error_precedence(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 0, BH_POOL_ABORT, NULL);
	struct ttask a, b;
	struct gate g;

	(void)state;
	gate_init(&g);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(a.started);
	assert_int_equal(bh_pool_submit(p, &b.task), -EBUSY);
	assert_int_equal(bh_pool_call(p, &b.task, BH_FOREVER), -EBUSY);
	assert_int_equal(bh_pool_call(p, &b.task, 0), -ETIMEDOUT); /* full, but given up */
	assert_int_equal(b.dones, 1);
	assert_int_equal(b.status, -ECANCELED);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.submitted, 2);
	assert_int_equal(st.abandoned, 1);
	assert_int_equal(st.rejected, 2);
	assert_int_equal(bh_pool_shutdown_now(p), 0);
	tt_init(&b, NULL);
	assert_int_equal(bh_pool_submit(NULL, &b.task), -EINVAL);
	assert_int_equal(bh_pool_submit(p, NULL), -EINVAL);
	assert_int_equal(bh_pool_call(p, NULL, 0), -EINVAL);
	b.task.run = NULL;
	assert_int_equal(bh_pool_submit(p, &b.task), -EINVAL);
	assert_int_equal(bh_pool_call(p, &b.task, 0), -EINVAL);
	b.task.run = tt_run;
	assert_int_equal(bh_pool_submit(p, &b.task), -ESHUTDOWN);
	assert_int_equal(bh_pool_call(p, &b.task, 0), -ESHUTDOWN); /* not -ETIMEDOUT */
	assert_int_equal(bh_pool_call(p, &b.task, bh_now_ns() + BH_SEC), -ESHUTDOWN);
	assert_int_equal(bh_pool_call(p, &b.task, BH_FOREVER), -ESHUTDOWN);
	assert_int_equal(b.runs + b.dones, 0); /* the caller's, untouched */
	st = pstats(p);
	assert_int_equal(st.submitted, 2);
	assert_int_equal(st.abandoned, 1);
	assert_int_equal(st.rejected, 2);
	gate_open(&g);
	assert_int_equal(bh_pool_destroy(p), 0);
}

/* pthread_cancel of a waiting caller abandons the call like a timeout. */
static void test_cancel_waiting_caller(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 0, BH_POOL_ABORT, NULL);
	struct ttask t;
	struct caller_arg ca;
	struct gate g;
	pthread_t th;
	void *ret;

	(void)state;
	gate_init(&g);
	tt_init(&t, &g);
	ca = (struct caller_arg){ .pool = p, .tt = &t, .deadline = BH_FOREVER, .result = 99 };
	assert_int_equal(pthread_create(&th, NULL, caller_main, &ca), 0);
	AWAIT(t.started && (atomic_load((_Atomic uint32_t *)&t.task.priv.state) & TF_SLEEPING));
	assert_int_equal(pthread_cancel(th), 0);
	pthread_join(th, &ret);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	assert_int_equal(ca.result, 99);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.abandoned, 1);
	assert_int_equal(st.abandoned_running, 1);
	gate_open(&g);
	AWAIT(t.dones == 1);
	assert_int_equal(t.status, -ETIMEDOUT);
	bh_pool_destroy(p);
}

/* A cancellation already pending is acted on only if the call waits: a call
 * run by its caller returns 0; a queued one gives up as on a timeout. */
struct pending_call {
	bh_pool_t *pool;
	struct ttask *tt;
	int cancel, result;
	_Atomic int stage; /* 1: bh_pool_call returned */
};

static void *pending_call_main(void *arg)
{
	struct pending_call *c = arg;

	c->cancel = pthread_cancel(pthread_self()); /* deferred: pending */
	c->result = bh_pool_call(c->pool, &c->tt->task, BH_FOREVER);
	atomic_store(&c->stage, 1);
	pthread_testcancel();
	return NULL;
}

static void test_pending_cancel_only_when_waiting(void **state)
{
	struct ttask a, b;
	struct gate g;
	struct pending_call c;
	pthread_t th;
	void *ret;

	(void)state;
	for (int queue = 0; queue <= 1; queue++) {
		bh_pool_t *p = make_pool(1, 1, (uint32_t)queue, BH_POOL_CALLER_RUNS, NULL);

		gate_init(&g);
		tt_init(&a, &g);
		tt_init(&b, NULL);
		assert_int_equal(bh_pool_submit(p, &a.task), 0);
		AWAIT(a.started);
		c = (struct pending_call){ .pool = p, .tt = &b, .result = 99 };
		assert_int_equal(pthread_create(&th, NULL, pending_call_main, &c), 0);
		pthread_join(th, &ret);
		assert_ptr_equal(ret, PTHREAD_CANCELED);
		assert_int_equal(c.cancel, 0);
		struct bh_pool_stats st = pstats(p);
		if (queue == 0) { /* full: run by the caller, no wait */
			assert_int_equal(c.result, 0);
			assert_int_equal(atomic_load(&c.stage), 1);
			assert_int_equal(b.runs, 1);
			assert_int_equal(st.caller_ran, 1);
		} else { /* queued: cancelled in its wait, taken off the queue */
			assert_int_equal(c.result, 99);
			assert_int_equal(atomic_load(&c.stage), 0);
			assert_int_equal(b.runs, 0);
			assert_int_equal(b.dones, 1);
			assert_int_equal(b.status, -ECANCELED);
			assert_int_equal(st.abandoned, 1);
			assert_int_equal(st.queued, 0);
		}
		gate_open(&g);
		assert_int_equal(bh_pool_destroy(p), 0);
	}
}

/* A cancellation request that arrives after the caller's wait timed out,
 * while it gives up its queued call, is acted on at the first cancellation
 * point in done(task, -ECANCELED). The call has been given up already: the
 * cleanup handler must not give it up a second time (done twice, the permit
 * released twice, the task unlinked twice, which empties the queue). */
static int hook_cancel_then_timeout(struct fake_sync *f, unsigned n)
{
	struct vsync *v = (struct vsync *)f; /* f is its first member */
	struct ttask *q = v->user;

	(void)n;
	/* q queues behind the waiting call (no assert off the test thread) */
	q->value = bh_pool_submit(q->task.priv.pool, &q->task);
	pthread_cancel(pthread_self()); /* deferred: pending from here */
	return -ETIMEDOUT;
}

static void done_then_cancellation_point(struct bh_task *t, int status)
{
	tt_done(t, status);
	pthread_testcancel(); /* any write(), close(), printf() would do */
}

static void *caller_then_testcancel_main(void *arg)
{
	caller_main(arg);
	pthread_testcancel(); /* the request left pending, if any */
	return NULL;
}

static void test_cancel_during_give_up_done(void **state)
{
	struct vsync v;
	bh_pool_t *p;
	struct ttask a, b, q;
	struct caller_arg ca;
	struct gate g;
	pthread_t th;
	void *ret;

	(void)state;
	vs_init(&v);
	gate_init(&g);
	p = make_pool(1, 1, 2, BH_POOL_ABORT, &v);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&q, NULL);
	b.task.done = done_then_cancellation_point;
	q.task.priv.pool = p; /* for the hook */
	q.value = 99;
	v.user = &q;
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(a.started);
	vs_script_calls(&v, hook_cancel_then_timeout);
	ca = (struct caller_arg){ .pool = p, .tt = &b, .deadline = v.f.now + BH_SEC, .result = 99 };
	/* b is queued first, then q behind it; b's wait "times out" at once */
	assert_int_equal(pthread_create(&th, NULL, caller_then_testcancel_main, &ca), 0);
	pthread_join(th, &ret);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	assert_int_equal(ca.result, -ETIMEDOUT); /* the wait had ended: a timeout */
	assert_int_equal(b.runs, 0);
	assert_int_equal(b.dones, 1); /* reported once */
	assert_int_equal(b.status, -ECANCELED);
	assert_int_equal(q.value, 0); /* q was queued behind b */
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.abandoned, 1);
	assert_int_equal(st.queued, 1); /* q is still queued */
	gate_open(&g);
	AWAIT(q.dones == 1); /* q still runs */
	assert_int_equal(q.runs, 1);
	assert_int_equal(bh_pool_destroy(p), 0);
}

/* ---- a pending cancellation acted on inside another task's done ---- */

/* DISCARD_OLDEST: a call swaps out the oldest queued task, whose done runs
 * on the caller's thread before the caller waits. A cancellation pending on
 * the caller must be acted on in its wait (the call given up: its task off
 * the queue, done(task, -ECANCELED)), not inside the dropped task's done,
 * which would leave the call queued with nobody waiting and never report
 * it. */
struct pending_swap {
	bh_pool_t *pool;
	struct ttask *tt;
	int result;
};

static void *pending_swap_call_main(void *arg)
{
	struct pending_swap *c = arg;

	pthread_cancel(pthread_self()); /* deferred: pending */
	c->result = bh_pool_call(c->pool, &c->tt->task, BH_FOREVER);
	pthread_testcancel();
	return NULL;
}

static void test_cancel_in_swapped_done(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 1, BH_POOL_DISCARD_OLDEST, NULL);
	struct ttask a, b, c;
	struct pending_swap ps;
	struct gate g;
	pthread_t th;
	void *ret;

	(void)state;
	gate_init(&g);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&c, NULL);
	b.task.done = done_then_cancellation_point;
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(a.started);
	assert_int_equal(bh_pool_submit(p, &b.task), 0); /* queued */
	ps = (struct pending_swap){ .pool = p, .tt = &c, .result = 99 };
	assert_int_equal(pthread_create(&th, NULL, pending_swap_call_main, &ps), 0);
	pthread_join(th, &ret);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	assert_int_equal(b.dones, 1);
	assert_int_equal(b.status, -ECANCELED);
	gate_open(&g);
	assert_int_equal(bh_pool_destroy(p), 0);
	/* the cancelled call is reported exactly once: given up unrun */
	assert_int_equal(c.dones, 1);
	assert_int_equal(c.runs, 0);
	assert_int_equal(c.status, -ECANCELED);
}

/* DISCARD_OLDEST drops a queued call whose caller sleeps: the caller is
 * told at once (a wake on its task's word), not at its deadline. The fake's
 * waits end on any change of the word, so the wakes are counted by word. */
static _Atomic(void *) watched_word;
static _Atomic unsigned watched_wakes;

static void wake_watched(void *ctx, _Atomic uint32_t *word, bool all)
{
	if ((void *)word == atomic_load(&watched_word))
		atomic_fetch_add(&watched_wakes, 1);
	fake_wake(ctx, word, all);
}

struct sleeping_call {
	bh_pool_t *pool;
	struct ttask *tt;
	int result;
};

static void *sleeping_call_main(void *arg)
{
	struct sleeping_call *c = arg;

	c->result = bh_pool_call(c->pool, &c->tt->task, BH_FOREVER);
	return NULL;
}

static void test_dropped_call_woken(void **state)
{
	struct vsync v;
	bh_pool_t *p;
	struct ttask a, b, c;
	struct sleeping_call sc;
	struct gate g;
	pthread_t th;
	unsigned wakes;

	(void)state;
	vs_init(&v);
	v.f.ops.wake = wake_watched;
	gate_init(&g);
	p = make_pool(1, 1, 1, BH_POOL_DISCARD_OLDEST, &v);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&c, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(a.started);
	atomic_store(&watched_word, (void *)&b.task.priv.state);
	atomic_store(&watched_wakes, 0);
	sc = (struct sleeping_call){ .pool = p, .tt = &b, .result = 99 };
	assert_int_equal(pthread_create(&th, NULL, sleeping_call_main, &sc), 0);
	fake_await(&v.f, BHI_WAIT_CALL, 1); /* queued, its caller asleep */
	assert_int_equal(bh_pool_submit(p, &c.task), 0); /* swaps b out */
	wakes = atomic_load(&watched_wakes); /* checked once all is torn down */
	fake_advance(&v.f, 0); /* a lost wake would leave the fake caller asleep */
	assert_int_equal(pthread_join(th, NULL), 0);
	gate_open(&g);
	AWAIT(pstats(p).completed == 2);
	atomic_store(&watched_word, NULL);
	assert_int_equal(bh_pool_destroy(p), 0);
	assert_int_equal(sc.result, -ECANCELED);
	assert_int_equal(b.runs, 0);
	assert_int_equal(wakes, 1);
}

/* bh_pool_shutdown_now is not a cancellation point: a request pending on
 * its thread, acted on in the done of the first dropped task, must not cut
 * it short, leaving the other dropped tasks unreported and their permits
 * held. */
struct pending_shutdown {
	bh_pool_t *pool;
	int result;
};

static void *pending_shutdown_now_main(void *arg)
{
	struct pending_shutdown *s = arg;

	pthread_cancel(pthread_self()); /* deferred: pending */
	s->result = bh_pool_shutdown_now(s->pool);
	pthread_testcancel();
	return NULL;
}

static void test_cancel_in_shutdown_now_done(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 2, BH_POOL_ABORT, NULL);
	struct ttask a, b, c;
	struct pending_shutdown ps = { .result = 99 };
	struct gate g;
	pthread_t th;
	void *ret;

	(void)state;
	gate_init(&g);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&c, NULL);
	b.task.done = done_then_cancellation_point;
	c.task.done = done_then_cancellation_point;
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(a.started);
	assert_int_equal(bh_pool_submit(p, &b.task), 0);
	assert_int_equal(bh_pool_submit(p, &c.task), 0);
	ps.pool = p;
	assert_int_equal(pthread_create(&th, NULL, pending_shutdown_now_main, &ps), 0);
	pthread_join(th, &ret);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	assert_int_equal(ps.result, 2); /* it returned: both dropped */
	assert_int_equal(b.dones, 1);
	assert_int_equal(c.dones, 1); /* each dropped task reported */
	assert_int_equal(c.status, -ECANCELED);
	gate_open(&g);
	assert_int_equal(bh_pool_shutdown(p, BH_FOREVER), 0);
	assert_int_equal(held_permits(p), 0); /* the dropped tasks' permits went back */
	assert_int_equal(bh_pool_destroy(p), 0);
}

/* bh_pool_shutdown waits until its deadline, no longer: a done still
 * running on a pool thread when the deadline passes is user code the pool
 * cannot hurry. The shutdown returns then, nonzero (a thread has not left),
 * rather than blocking in pthread_join until done returns. */
static struct gate slow_done_gate;
static _Atomic int slow_done_in;

static void slow_done(struct bh_task *t, int status)
{
	atomic_store(&slow_done_in, 1);
	gate_pass(&slow_done_gate);
	tt_done(t, status);
}

struct shutdown_arg {
	bh_pool_t *pool;
	uint64_t deadline;
	int result;
	_Atomic bool returned;
};

static void *shutdown_main(void *arg)
{
	struct shutdown_arg *s = arg;

	s->result = bh_pool_shutdown(s->pool, s->deadline);
	atomic_store(&s->returned, true);
	return NULL;
}

static void test_shutdown_deadline_while_done_runs(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 0, BH_POOL_ABORT, NULL);
	struct ttask t;
	struct shutdown_arg sa;
	struct timespec ts;
	pthread_t th;
	int joined;

	(void)state;
	gate_init(&slow_done_gate);
	atomic_store(&slow_done_in, 0);
	tt_init(&t, NULL);
	t.task.done = slow_done;
	assert_int_equal(bh_pool_submit(p, &t.task), 0);
	AWAIT(atomic_load(&slow_done_in));
	sa = (struct shutdown_arg){ .pool = p, .deadline = bh_now_ns() + 50 * BH_MSEC,
				    .result = 99 };
	assert_int_equal(pthread_create(&th, NULL, shutdown_main, &sa), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 3;
	joined = pthread_timedjoin_np(th, NULL, &ts);
	gate_open(&slow_done_gate);
	if (joined != 0)
		pthread_join(th, NULL);
	assert_int_equal(joined, 0);   /* it returned at its deadline */
	assert_true(sa.result >= 1);   /* not 0: a thread was still in done */
	AWAIT(t.dones == 1);
	assert_int_equal(bh_pool_shutdown(p, BH_FOREVER), 0);
	assert_int_equal(bh_pool_destroy(p), 0);
}

/* A call given up while queued leaves the queue: its slot is free at once,
 * also for its own done(task, -ECANCELED), which may submit a retry or a
 * fallback: the pool is not full then, so no -EBUSY. */
static struct ttask gu_retry;
static bh_pool_t *gu_pool;
static _Atomic int gu_retry_r = 99;

static void done_submits_retry(struct bh_task *t, int status)
{
	atomic_store(&gu_retry_r, bh_pool_submit(gu_pool, &gu_retry.task));
	tt_done(t, status);
}

static void test_given_up_slot_free_in_done(void **state)
{
	struct vsync v;
	struct ttask a, b;
	struct gate g;

	(void)state;
	vs_init(&v);
	gate_init(&g);
	gu_pool = make_pool(1, 1, 1, BH_POOL_ABORT, &v);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&gu_retry, NULL);
	atomic_store(&gu_retry_r, 99);
	b.task.done = done_submits_retry;
	assert_int_equal(bh_pool_submit(gu_pool, &a.task), 0);
	vs_script_calls(&v, hook_timeout_at_once);
	assert_int_equal(bh_pool_call(gu_pool, &b.task, v.f.now + BH_SEC), -ETIMEDOUT);
	assert_int_equal(b.dones, 1);
	assert_int_equal(b.status, -ECANCELED);
	assert_int_equal(atomic_load(&gu_retry_r), 0); /* the freed slot took it */
	struct bh_pool_stats st = pstats(gu_pool);
	assert_int_equal(st.queued, 1);
	assert_int_equal(st.rejected, 0);
	gate_open(&g);
	AWAIT(gu_retry.dones == 1);
	assert_int_equal(bh_pool_shutdown(gu_pool, BH_FOREVER), 0);
	assert_int_equal(held_permits(gu_pool), 0);
	assert_int_equal(bh_pool_destroy(gu_pool), 0);
}

/* ---- shutdown -------------------------------------------------------------------- */

static void test_graceful_shutdown(void **state)
{
	bh_pool_t *p;
	struct bh_pool_config cfg = { .name = "gs", .core_threads = 1, .max_threads = 1,
				      .queue_capacity = 2 };
	struct ttask t[3], late;
	struct gate g;

	(void)state;
	gate_init(&g);
	assert_int_equal(bh_pool_create(&cfg, &p), 0);
	for (int i = 0; i < 3; i++) {
		tt_init(&t[i], i == 0 ? &g : NULL);
		assert_int_equal(bh_pool_submit(p, &t[i].task), 0);
	}
	tt_init(&late, NULL);
	assert_int_equal(bh_pool_shutdown(p, 0), 3); /* 1 running + 2 queued */
	assert_int_equal(bh_pool_submit(p, &late.task), -ESHUTDOWN);
	assert_int_equal(bh_pool_call(p, &late.task, BH_FOREVER), -ESHUTDOWN);
	assert_int_equal(bh_pool_shutdown(p, bh_now_ns() + BH_MSEC), 3);
	assert_false(bh_task_cancelled(&t[0].task)); /* graceful: not cancelled */
	gate_open(&g);
	assert_int_equal(bh_pool_shutdown(p, BH_FOREVER), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(t[i].status, 0);
	assert_int_equal(late.runs + late.dones, 0);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.alive, 0);
	assert_int_equal(st.completed, 3);
	AWAIT(count_threads("gs-") == 0); /* joined: none left behind */
	assert_int_equal(bh_pool_shutdown(p, 0), 0); /* again: still done */
	bh_pool_destroy(p);
}

static void test_shutdown_now(void **state)
{
	bh_pool_t *p;
	struct bh_pool_config cfg = { .name = "sn", .core_threads = 2, .max_threads = 2,
				      .queue_capacity = 3, .flags = BH_POOL_PRESTART };
	struct ttask run, q1, q2, qc, late;
	struct caller_arg ca;
	struct gate g;
	pthread_t th;

	(void)state;
	gate_init(&g);
	assert_int_equal(bh_pool_create(&cfg, &p), 0);
	tt_init(&run, &g);
	tt_init(&q1, NULL);
	tt_init(&q2, NULL);
	tt_init(&qc, NULL);
	tt_init(&late, NULL);
	struct ttask run2;
	tt_init(&run2, &g);
	assert_int_equal(bh_pool_submit(p, &run.task), 0);
	assert_int_equal(bh_pool_submit(p, &run2.task), 0);
	assert_int_equal(bh_pool_submit(p, &q1.task), 0);
	ca = (struct caller_arg){ .pool = p, .tt = &qc, .deadline = BH_FOREVER };
	assert_int_equal(pthread_create(&th, NULL, caller_main, &ca), 0);
	AWAIT(pstats(p).queued == 2);
	assert_int_equal(bh_pool_submit(p, &q2.task), 0);
	AWAIT(run.started && run2.started);
	assert_int_equal(bh_pool_shutdown_now(p), 3);
	pthread_join(th, NULL);
	assert_int_equal(ca.result, -ECANCELED);
	assert_int_equal(qc.runs + qc.dones, 0);
	assert_int_equal(q1.dones, 1);
	assert_int_equal(q1.status, -ECANCELED);
	assert_int_equal(q2.status, -ECANCELED);
	assert_int_equal(q1.runs + q2.runs, 0);
	assert_true(bh_task_cancelled(&run.task)); /* running ones are flagged */
	assert_int_equal(bh_pool_submit(p, &late.task), -ESHUTDOWN);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.discarded, 3);
	assert_int_equal(st.queued, 0);
	assert_int_equal(bh_pool_shutdown_now(p), 0); /* nothing more to drop */
	gate_open(&g);
	assert_int_equal(bh_pool_shutdown(p, BH_FOREVER), 0);
	assert_int_equal(run.dones, 1);
	assert_true(run.cancelled_seen);
	AWAIT(count_threads("sn-") == 0);
	bh_pool_destroy(p);
}

/* A dropped task's done runs on the thread that called
 * bh_pool_shutdown_now, not on a pool thread, so it may destroy the pool:
 * the dropped tasks' permits are back before the first done runs, and the
 * pool is not touched after them. */
static bh_pool_t *dd_pool;
static struct gate dd_gate;
static uint64_t dd_in_flight = 12345;
static int dd_destroyed = 12345;

static void dd_done_destroys(struct bh_task *t, int status)
{
	tt_done(t, status);
	dd_in_flight = stats_of(dd_pool->adm).in_flight;
	gate_open(&dd_gate); /* the running task may finish now */
	dd_destroyed = bh_pool_destroy(dd_pool);
}

static void test_destroy_from_dropped_done(void **state)
{
	struct bh_pool_config cfg = { .name = "dd", .core_threads = 1, .max_threads = 1,
				      .queue_capacity = 2, .flags = BH_POOL_PRESTART };
	struct ttask run, dropped;
	uint64_t before;

	(void)state;
	gate_init(&dd_gate);
	assert_int_equal(bh_pool_create(&cfg, &dd_pool), 0);
	tt_init(&run, &dd_gate);
	tt_init(&dropped, NULL);
	dropped.task.done = dd_done_destroys;
	assert_int_equal(bh_pool_submit(dd_pool, &run.task), 0);
	AWAIT(run.started);
	assert_int_equal(bh_pool_submit(dd_pool, &dropped.task), 0);
	before = stats_of(dd_pool->adm).in_flight;
	assert_int_equal(bh_pool_shutdown_now(dd_pool), 1);
	assert_int_equal(dropped.status, -ECANCELED);
	assert_int_equal(dd_in_flight, before - 1); /* the dropped task's permit is back */
	assert_int_equal(dd_destroyed, 0);
	assert_int_equal(run.runs, 1);
	assert_int_equal(dropped.runs, 0);
}

/* An idle pool shuts down at once: idle threads are sent away. */
static void test_shutdown_idle_pool(void **state)
{
	struct bh_pool_config cfg = { .name = "si", .core_threads = 3, .max_threads = 3,
				      .flags = BH_POOL_PRESTART };
	bh_pool_t *p;

	(void)state;
	assert_int_equal(bh_pool_create(&cfg, &p), 0);
	AWAIT(count_threads("si-") == 3);
	assert_int_equal(bh_pool_shutdown(p, BH_FOREVER), 0);
	AWAIT(count_threads("si-") == 0);
	bh_pool_destroy(p);
}

static _Atomic int own_destroy = 1, own_shutdown = -1;
static bh_pool_t *own_pool;
static void own_thread_extra(struct ttask *tt)
{
	(void)tt;
	atomic_store(&own_destroy, bh_pool_destroy(own_pool));
	atomic_store(&own_shutdown, bh_pool_shutdown(own_pool, BH_FOREVER));
}

/* From its own thread the pool can neither be destroyed nor waited for. */
static void test_own_thread_cannot_wait(void **state)
{
	struct ttask t;

	(void)state;
	own_pool = make_pool(1, 1, 1, BH_POOL_ABORT, NULL);
	tt_init(&t, NULL);
	t.extra = own_thread_extra;
	assert_int_equal(bh_pool_submit(own_pool, &t.task), 0);
	AWAIT(t.dones == 1);
	assert_int_equal(atomic_load(&own_destroy), -EDEADLK);
	assert_int_equal(atomic_load(&own_shutdown), 1); /* itself, still running */
	assert_int_equal(bh_pool_destroy(own_pool), 0);
}

/* ...nor from done, which a pool thread runs after the task is counted: the
 * thread is still there, so the result is never 0 ("every thread has left"). */
static _Atomic int own_done_shutdown = -1;
static void own_thread_done(struct bh_task *t, int status)
{
	atomic_store(&own_done_shutdown, bh_pool_shutdown(own_pool, BH_FOREVER));
	tt_done(t, status);
}

static void test_own_thread_shutdown_from_done(void **state)
{
	struct ttask t;

	(void)state;
	own_pool = make_pool(1, 1, 1, BH_POOL_ABORT, NULL);
	tt_init(&t, NULL);
	t.task.done = own_thread_done;
	assert_int_equal(bh_pool_submit(own_pool, &t.task), 0);
	AWAIT(t.dones == 1);
	assert_true(atomic_load(&own_done_shutdown) >= 1); /* pool.h: at least 1 */
	assert_int_equal(bh_pool_destroy(own_pool), 0);
}

/* bh_pool_destroy is not a cancellation point (only bh_pool_call's wait is,
 * pool.h): a pending request must not cut it short, leaving the pool closed,
 * its threads unjoined and its memory unfreed, with no way to tell. */
struct destroy_arg {
	bh_pool_t *pool;
	int result;
	_Atomic bool returned;
};

static void *destroy_main(void *arg)
{
	struct destroy_arg *d = arg;

	pthread_cancel(pthread_self()); /* deferred: pending */
	d->result = bh_pool_destroy(d->pool);
	atomic_store(&d->returned, true);
	return NULL;
}

static void test_destroy_not_cancellation_point(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 0, BH_POOL_ABORT, NULL);
	struct destroy_arg d = { .pool = p, .result = 99 };
	struct ttask t;
	struct gate g;
	pthread_t th;
	void *ret;

	(void)state;
	gate_init(&g);
	tt_init(&t, &g);
	assert_int_equal(bh_pool_submit(p, &t.task), 0);
	AWAIT(t.started);
	assert_int_equal(pthread_create(&th, NULL, destroy_main, &d), 0);
	/* closed at once; then it must wait for t (cut short: it ends now) */
	struct ttask probe;
	tt_init(&probe, NULL);
	AWAIT(bh_pool_submit(p, &probe.task) == -ESHUTDOWN);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1;
	int joined = pthread_timedjoin_np(th, &ret, &ts);
	gate_open(&g);
	if (joined != 0)
		pthread_join(th, &ret);
	if (!atomic_load(&d.returned))
		assert_int_equal(bh_pool_destroy(p), 0); /* clean up what it left */
	assert_ptr_equal(ret, NULL);
	assert_true(atomic_load(&d.returned));
	assert_int_equal(d.result, 0);
}

/* destroy without shutdown: queued tasks still run. */
static void test_destroy_runs_queued(void **state)
{
	bh_pool_t *p = make_pool(1, 1, 8, BH_POOL_ABORT, NULL);
	struct ttask t[8];

	(void)state;
	for (int i = 0; i < 8; i++) {
		tt_init(&t[i], NULL);
		assert_int_equal(bh_pool_submit(p, &t[i].task), 0);
	}
	assert_int_equal(bh_pool_destroy(p), 0);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(t[i].runs, 1);
		assert_int_equal(t[i].status, 0);
	}
}

/* done runs with no lock held: it may submit again (a chain). */
static bh_pool_t *chain_pool;
static _Atomic int chain_left = 100;
static struct bh_task chain_task;
static void chain_run(struct bh_task *t)
{
	(void)t;
}
static void chain_done(struct bh_task *t, int status)
{
	(void)status;
	if (atomic_fetch_sub(&chain_left, 1) > 1)
		bh_pool_submit(chain_pool, t);
}

static void test_done_may_resubmit(void **state)
{
	(void)state;
	chain_pool = make_pool(1, 1, 1, BH_POOL_ABORT, NULL);
	chain_task = (struct bh_task){ .run = chain_run, .done = chain_done };
	assert_int_equal(bh_pool_submit(chain_pool, &chain_task), 0);
	AWAIT(atomic_load(&chain_left) == 0);
	AWAIT(pstats(chain_pool).completed == 100);
	bh_pool_destroy(chain_pool);
}

/* When done runs, the snapshot already counts its task. */
static bh_pool_t *counted_pool;
static _Atomic uint64_t counted_seen[8];
static void counted_done(struct bh_task *t, int status)
{
	struct bh_pool_stats st;

	(void)status;
	bh_pool_stats(counted_pool, &st);
	atomic_store(&counted_seen[(intptr_t)t->data], st.completed);
}

static void test_done_sees_itself_counted(void **state)
{
	struct bh_task t[8];

	(void)state;
	counted_pool = make_pool(1, 1, 8, BH_POOL_ABORT, NULL);
	for (int i = 0; i < 8; i++) {
		t[i] = (struct bh_task){ .run = chain_run, .done = counted_done,
					 .data = (void *)(intptr_t)i };
		assert_int_equal(bh_pool_submit(counted_pool, &t[i]), 0);
	}
	AWAIT(pstats(counted_pool).completed == 8);
	bh_pool_destroy(counted_pool);
	for (int i = 0; i < 8; i++)
		assert_int_equal(atomic_load(&counted_seen[i]), (uint64_t)i + 1);
}

/* Without done, run is the last touch: it may free its task. */
static _Atomic int freed;
static void free_self(struct bh_task *t)
{
	free(t);
	atomic_fetch_add(&freed, 1);
}

static void test_run_may_free_without_done(void **state)
{
	bh_pool_t *p = make_pool(2, 2, 64, BH_POOL_ABORT, NULL);

	(void)state;
	for (int i = 0; i < 64; i++) {
		struct bh_task *t = calloc(1, sizeof(*t));

		assert_non_null(t);
		t->run = free_self;
		assert_int_equal(bh_pool_submit(p, t), 0);
	}
	bh_pool_destroy(p); /* ASan reports any touch after run */
	assert_int_equal(atomic_load(&freed), 64);
}

/* ---- thread creation, names ----------------------------------------------------------- */

static void test_thread_creation_fails(void **state)
{
	struct vsync v;
	bh_pool_t *p;
	struct ttask a, b, c, d;
	struct gate g;

	(void)state;
	vs_init(&v);
	gate_init(&g);
	p = make_pool(1, 2, 1, BH_POOL_ABORT, &v);
	tt_init(&a, NULL);
	tt_init(&b, &g);
	tt_init(&c, NULL);
	tt_init(&d, NULL);
	v.fail_create = 2; /* below core, then growing: both fail */
	assert_int_equal(bh_pool_submit(p, &a.task), -EAGAIN);
	assert_int_equal(a.runs + a.dones, 0);
	struct bh_pool_stats st = pstats(p);
	assert_int_equal(st.alive, 0);
	assert_int_equal(st.submitted, 0);
	assert_int_equal(st.rejected, 1);
	assert_int_equal(held_permits(p), 0); /* the permit went back */
	assert_int_equal(bh_pool_submit(p, &b.task), 0);
	assert_int_equal(bh_pool_submit(p, &c.task), 0); /* queued */
	v.fail_create = 1;
	assert_int_equal(bh_pool_submit(p, &d.task), -EAGAIN); /* could not grow */
	assert_int_equal(held_permits(p), 2);
	gate_open(&g);
	AWAIT(pstats(p).completed == 2);
	bh_pool_destroy(p);
}

/* A core thread that could not be started leaves its task queued; the
 * thread started for the next task takes the queued one first, so tasks
 * still start in the order they came. */
static void test_core_start_after_failure_keeps_fifo(void **state)
{
	struct vsync v;
	bh_pool_t *p;
	struct ttask a, b, c;
	struct gate g;

	(void)state;
	vs_init(&v);
	p = make_pool(2, 2, 4, BH_POOL_ABORT, &v);
	gate_init(&g);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&c, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(atomic_load(&a.started) == 1);
	v.fail_create = 1;
	assert_int_equal(bh_pool_submit(p, &b.task), 0); /* no thread: queued */
	assert_int_equal(pstats(p).queued, 1);
	assert_int_equal(bh_pool_submit(p, &c.task), 0); /* a thread: for b */
	AWAIT(atomic_load(&b.dones) == 1 && atomic_load(&c.dones) == 1);
	assert_true(atomic_load(&b.start_order) < atomic_load(&c.start_order));
	gate_open(&g);
	AWAIT(pstats(p).active == 0);
	assert_int_equal(pstats(p).completed, 3);
	assert_int_equal(bh_pool_destroy(p), 0);
}

/* ---- calls and submissions from a task's done ------------------------------ */

/* A done that calls the same pool. Its worker is listed idle while done
 * runs (the finished task's slot is free), but a call is never handed to
 * the calling thread itself, which would then wait for itself: another
 * idle thread takes it, else it runs on the caller, in that free slot. */
static bh_pool_t *done_pool;
static struct ttask done_inner;
static _Atomic int done_call_result = 12345;

static void call_from_done(struct bh_task *t, int status)
{
	tt_done(t, status);
	atomic_store(&done_call_result,
		     bh_pool_call(done_pool, &done_inner.task, bh_now_ns() + 5 * BH_SEC));
}

static void check_call_from_done(uint32_t core, uint32_t max, bool elsewhere)
{
	struct ttask outer, warm[2];
	struct bh_pool_stats st;
	struct gate g;

	done_pool = make_pool(core, max, 4, BH_POOL_ABORT, NULL);
	gate_init(&g);
	for (uint32_t i = 0; i < core; i++) { /* every core thread started, then idle */
		tt_init(&warm[i], &g);
		assert_int_equal(bh_pool_submit(done_pool, &warm[i].task), 0);
	}
	AWAIT(pstats(done_pool).alive == core);
	gate_open(&g);
	AWAIT(pstats(done_pool).active == 0 && pstats(done_pool).completed == core);
	tt_init(&outer, NULL);
	tt_init(&done_inner, NULL);
	outer.task.done = call_from_done;
	atomic_store(&done_call_result, 12345);
	assert_int_equal(bh_pool_submit(done_pool, &outer.task), 0);
	AWAIT(atomic_load(&done_call_result) != 12345);
	assert_int_equal(atomic_load(&done_call_result), 0);
	assert_int_equal(atomic_load(&done_inner.runs), 1);
	assert_int_equal(atomic_load(&done_inner.dones), 0); /* a call's: not on success */
	assert_int_equal(pthread_equal(done_inner.ran_on, outer.ran_on) == 0, elsewhere);
	AWAIT(pstats(done_pool).active == 0);
	st = pstats(done_pool);
	assert_int_equal(st.submitted, core + 2);
	assert_int_equal(st.completed, core + 2);
	assert_int_equal(st.alive, core); /* nothing grew */
	assert_int_equal(st.caller_ran, 0);
	assert_int_equal(held_permits(done_pool), 0);
	assert_int_equal(bh_pool_destroy(done_pool), 0);
}

static void test_call_from_done_runs_on_caller(void **state)
{
	(void)state;
	check_call_from_done(1, 2, false); /* the only thread: runs here */
}

static void test_call_from_done_goes_to_idle_thread(void **state)
{
	(void)state;
	check_call_from_done(2, 2, true); /* core 2: the other thread idles */
}

/* While a call runs on its caller's thread (in that thread's done), the
 * thread is busy, not idle: a new task is not handed to it but queued, and
 * the next thread to finish takes it; the stats stay balanced (pstats). */
static struct gate inline_gate;
static struct ttask inline_inner;
static _Atomic int inline_result = 12345;

static void inner_blocks(struct ttask *tt)
{
	(void)tt;
	gate_pass(&inline_gate);
}

static void call_blocking_from_done(struct bh_task *t, int status)
{
	tt_done(t, status);
	atomic_store(&inline_result, bh_pool_call(done_pool, &inline_inner.task, BH_FOREVER));
}

static void test_task_not_behind_inline_call(void **state)
{
	struct ttask x, a, c;
	struct gate gx;
	struct bh_pool_stats st;

	(void)state;
	done_pool = make_pool(2, 2, 4, BH_POOL_ABORT, NULL);
	gate_init(&gx);
	gate_init(&inline_gate);
	tt_init(&x, &gx);
	tt_init(&a, NULL);
	tt_init(&c, NULL);
	tt_init(&inline_inner, NULL);
	inline_inner.extra = inner_blocks;
	a.task.done = call_blocking_from_done;
	atomic_store(&inline_result, 12345);
	assert_int_equal(bh_pool_submit(done_pool, &x.task), 0);
	AWAIT(atomic_load(&x.started) == 1);
	assert_int_equal(bh_pool_submit(done_pool, &a.task), 0);
	AWAIT(atomic_load(&inline_inner.started) == 1); /* runs in a's done */
	assert_true(pthread_equal(inline_inner.ran_on, a.ran_on));
	assert_int_equal(bh_pool_submit(done_pool, &c.task), 0);
	st = pstats(done_pool); /* active <= alive among its checks */
	assert_int_equal(st.queued, 1);
	assert_int_equal(st.active, 2);
	gate_open(&gx); /* x's thread finishes and takes c */
	AWAIT(atomic_load(&c.runs) == 1);
	assert_int_equal(atomic_load(&inline_result), 12345); /* the call still runs */
	gate_open(&inline_gate);
	AWAIT(atomic_load(&inline_result) != 12345);
	assert_int_equal(atomic_load(&inline_result), 0);
	AWAIT(pstats(done_pool).active == 0);
	assert_int_equal(pstats(done_pool).completed, 4);
	assert_int_equal(held_permits(done_pool), 0);
	assert_int_equal(bh_pool_destroy(done_pool), 0);
}

/* Two tasks' dones, at once, each calling, and each called task running
 * until both have started: neither call is handed to the other thread
 * (both in done, each would wait for the other); each runs on its caller. */
static _Atomic int dones_in, inners_in;

static void until_both_inners(struct ttask *tt)
{
	uint64_t end = bh_now_ns() + 5 * BH_SEC;

	(void)tt;
	atomic_fetch_add(&inners_in, 1);
	while (atomic_load(&inners_in) < 2 && bh_now_ns() < end)
		sched_yield();
}

static struct ttask pair_outer[2], pair_inner[2];
static _Atomic int pair_result[2];

static void call_when_both_in_done(struct bh_task *t, int status)
{
	size_t i = (size_t)((struct ttask *)t - pair_outer);
	uint64_t end = bh_now_ns() + 5 * BH_SEC;

	tt_done(t, status);
	atomic_fetch_add(&dones_in, 1);
	while (atomic_load(&dones_in) < 2 && bh_now_ns() < end)
		sched_yield();
	atomic_store(&pair_result[i],
		     bh_pool_call(done_pool, &pair_inner[i].task, bh_now_ns() + 5 * BH_SEC));
}

static void test_calls_from_two_dones(void **state)
{
	struct ttask *t2 = pair_outer;

	(void)state;
	done_pool = make_pool(2, 2, 4, BH_POOL_ABORT, NULL);
	atomic_store(&dones_in, 0);
	atomic_store(&inners_in, 0);
	for (int i = 0; i < 2; i++) {
		tt_init(&t2[i], NULL);
		tt_init(&pair_inner[i], NULL);
		pair_inner[i].extra = until_both_inners;
		t2[i].task.done = call_when_both_in_done;
		atomic_store(&pair_result[i], 12345);
	}
	for (int i = 0; i < 2; i++)
		assert_int_equal(bh_pool_submit(done_pool, &t2[i].task), 0);
	AWAIT(atomic_load(&pair_result[0]) != 12345 && atomic_load(&pair_result[1]) != 12345);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(atomic_load(&pair_result[i]), 0);
		assert_true(pthread_equal(pair_inner[i].ran_on, t2[i].ran_on));
	}
	AWAIT(pstats(done_pool).active == 0);
	assert_int_equal(bh_pool_destroy(done_pool), 0);
}

/* ---- calls from a done whose thread is busy or no longer idle -------------- */

/* A done that waits on a gate, then calls the pool with a 1 s deadline. */
static struct gate cfd_gate, cfd_inner_gate;
static struct ttask cfd_inner, cfd_inner2;
static _Atomic int cfd_result = 12345, cfd_result2 = 12345;
static _Atomic bool cfd_in_done;

static void cfd_call_after_gate(struct bh_task *t, int status)
{
	tt_done(t, status);
	atomic_store(&cfd_in_done, true);
	gate_pass(&cfd_gate);
	atomic_store(&cfd_result,
		     bh_pool_call(done_pool, &cfd_inner.task, bh_now_ns() + BH_SEC));
}

/* The only thread, in a's done and listed idle, is handed task b by a
 * concurrent submitter; a's done then calls the pool. Queued, the call
 * would wait behind the very thread that waits for it: it runs on the
 * caller instead (no slot: counted as run on the caller). */
static void test_call_from_done_after_handoff(void **state)
{
	struct ttask a, b;

	(void)state;
	done_pool = make_pool(1, 1, 4, BH_POOL_ABORT, NULL);
	gate_init(&cfd_gate);
	tt_init(&a, NULL);
	tt_init(&b, NULL);
	tt_init(&cfd_inner, NULL);
	a.task.done = cfd_call_after_gate;
	atomic_store(&cfd_result, 12345);
	atomic_store(&cfd_in_done, false);
	assert_int_equal(bh_pool_submit(done_pool, &a.task), 0);
	AWAIT(atomic_load(&cfd_in_done));
	assert_int_equal(bh_pool_submit(done_pool, &b.task), 0); /* handed to a's thread */
	gate_open(&cfd_gate);
	AWAIT(atomic_load(&cfd_result) != 12345);
	AWAIT(atomic_load(&b.dones) == 1 && pstats(done_pool).active == 0);
	assert_int_equal(atomic_load(&cfd_result), 0);
	assert_int_equal(bh_pool_destroy(done_pool), 0);
}

/* Same, with the next task taken from the queue by the finish itself:
 * max 1, b queued while a runs; a's finish dequeues b, so a's done is not
 * idle; its call runs on the caller, before b. */
static struct fake_sync *cfd_clock; /* done_pool's clock when it is a fake */

static void cfd_call_now(struct bh_task *t, int status)
{
	/* A deadline on the pool's own clock: a fake one starts at 1000 s, so
	 * the real clock's now would be in its past on a machine up for less
	 * than that, and the call would time out at once. */
	uint64_t now = cfd_clock ? fake_now(cfd_clock) : bh_now_ns();

	tt_done(t, status);
	atomic_store(&cfd_result, bh_pool_call(done_pool, &cfd_inner.task, now + BH_SEC));
}

static void test_call_from_done_with_next_queued(void **state)
{
	struct ttask a, b;
	struct gate g;

	(void)state;
	done_pool = make_pool(1, 1, 4, BH_POOL_ABORT, NULL);
	gate_init(&g);
	tt_init(&a, &g);
	tt_init(&b, NULL);
	tt_init(&cfd_inner, NULL);
	a.task.done = cfd_call_now;
	atomic_store(&cfd_result, 12345);
	assert_int_equal(bh_pool_submit(done_pool, &a.task), 0);
	AWAIT(atomic_load(&a.started) == 1);
	assert_int_equal(bh_pool_submit(done_pool, &b.task), 0); /* queued */
	gate_open(&g);
	AWAIT(atomic_load(&cfd_result) != 12345);
	AWAIT(atomic_load(&b.dones) == 1 && pstats(done_pool).active == 0);
	assert_int_equal(atomic_load(&cfd_result), 0);
	assert_int_equal(bh_pool_destroy(done_pool), 0);
}

/* A second call from the same done after the first ran on the caller: a
 * task queued meanwhile is taken by bhp_reidle_self_locked (P_GO), so the
 * thread is no longer idle; the second call runs on the caller too. */
static void cfd_inner_blocks(struct ttask *tt)
{
	(void)tt;
	gate_pass(&cfd_inner_gate);
}

static void cfd_two_calls(struct bh_task *t, int status)
{
	tt_done(t, status);
	atomic_store(&cfd_result, bh_pool_call(done_pool, &cfd_inner.task, bh_now_ns() + BH_SEC));
	atomic_store(&cfd_result2,
		     bh_pool_call(done_pool, &cfd_inner2.task, bh_now_ns() + BH_SEC));
}

static void test_second_call_from_done(void **state)
{
	struct ttask a, b;

	(void)state;
	done_pool = make_pool(1, 1, 4, BH_POOL_ABORT, NULL);
	gate_init(&cfd_inner_gate);
	tt_init(&a, NULL);
	tt_init(&b, NULL);
	tt_init(&cfd_inner, NULL);
	tt_init(&cfd_inner2, NULL);
	cfd_inner.extra = cfd_inner_blocks;
	a.task.done = cfd_two_calls;
	atomic_store(&cfd_result, 12345);
	atomic_store(&cfd_result2, 12345);
	assert_int_equal(bh_pool_submit(done_pool, &a.task), 0);
	AWAIT(atomic_load(&cfd_inner.started) == 1); /* inline, on a's thread */
	assert_int_equal(bh_pool_submit(done_pool, &b.task), 0); /* queued */
	assert_int_equal(pstats(done_pool).queued, 1);
	gate_open(&cfd_inner_gate);
	AWAIT(atomic_load(&cfd_result2) != 12345);
	AWAIT(atomic_load(&b.dones) == 1 && pstats(done_pool).active == 0);
	assert_int_equal(atomic_load(&cfd_result), 0);
	assert_int_equal(atomic_load(&cfd_result2), 0);
	assert_int_equal(bh_pool_destroy(done_pool), 0);
}

/* Shutdown while a call runs on its caller in a done: the caller's thread
 * leaves after done (reidle: leave_locked, P_GO NULL), drain waits for
 * done, the counts balance. */
static void test_shutdown_during_call_from_done(void **state)
{
	struct ttask a;
	struct bh_pool_stats st;

	(void)state;
	done_pool = make_pool(1, 1, 4, BH_POOL_ABORT, NULL);
	gate_init(&cfd_inner_gate);
	tt_init(&a, NULL);
	tt_init(&cfd_inner, NULL);
	tt_init(&cfd_inner2, NULL);
	cfd_inner.extra = cfd_inner_blocks;
	a.task.done = cfd_two_calls;
	atomic_store(&cfd_result, 12345);
	atomic_store(&cfd_result2, 12345);
	assert_int_equal(bh_pool_submit(done_pool, &a.task), 0);
	AWAIT(atomic_load(&cfd_inner.started) == 1);
	assert_int_equal(bh_pool_shutdown(done_pool, bh_now_ns() + 50 * BH_MSEC), 1);
	st = pstats(done_pool);
	assert_int_equal(st.alive, 1);
	assert_int_equal(st.active, 1);
	gate_open(&cfd_inner_gate);
	assert_int_equal(bh_pool_shutdown(done_pool, BH_FOREVER), 0);
	assert_int_equal(atomic_load(&cfd_result), 0);
	assert_int_equal(atomic_load(&cfd_result2), -ESHUTDOWN);
	st = pstats(done_pool);
	assert_int_equal(st.alive, 0);
	assert_int_equal(st.completed, 2);
	assert_int_equal(held_permits(done_pool), 0);
	assert_int_equal(bh_pool_destroy(done_pool), 0);
}

/* Spinner accounting and keep-alive around a call run on its caller. */
static _Atomic int cfd_seen_pollers = -1, cfd_seen_spin = -1;

static void cfd_inner_records(struct ttask *tt)
{
	(void)tt;
	atomic_store(&cfd_seen_pollers, (int)npollers(done_pool));
	atomic_store(&cfd_seen_spin, (int)bhi_spin_count());
}

static void test_call_from_done_spinner_and_keepalive(void **state)
{
	struct vsync v;
	struct ttask a;

	(void)state;
	vs_init(&v);
	done_pool = make_pool(0, 1, 4, BH_POOL_ABORT, &v); /* above core: keep-alive */
	cfd_clock = &v.f;
	bhp_set_spin_ns(done_pool, BH_SEC);
	tt_init(&a, NULL);
	tt_init(&cfd_inner, NULL);
	cfd_inner.extra = cfd_inner_records;
	a.task.done = cfd_call_now;
	atomic_store(&cfd_result, 12345);
	assert_int_equal(bh_pool_submit(done_pool, &a.task), 0);
	AWAIT(atomic_load(&cfd_result) != 12345);
	assert_int_equal(atomic_load(&cfd_result), 0);
	assert_true(pthread_equal(cfd_inner.ran_on, a.ran_on));
	assert_int_equal(atomic_load(&cfd_seen_pollers), 0); /* unpolled for the call */
	assert_int_equal(atomic_load(&cfd_seen_spin), 0);    /* no spinner counted */
	AWAIT(npollers(done_pool) == 1); /* back to polling after the call */
	AWAIT(atomic_load(&v.poll_starts) >= 1);
	fake_advance(&v.f, BH_SEC); /* poll window over: sleep */
	fake_await(&v.f, BHI_WAIT_PARK, 1);
	assert_int_equal(npollers(done_pool), 0);
	AWAIT(bhi_spin_count() == 0);
	fake_advance(&v.f, 11 * BH_SEC); /* keep-alive passes: the thread leaves */
	AWAIT(pstats(done_pool).alive == 0);
	assert_int_equal(pstats(done_pool).completed, 2);
	assert_int_equal(held_permits(done_pool), 0);
	assert_int_equal(bh_pool_destroy(done_pool), 0);
	cfd_clock = NULL;
}

/* The most natural form: a done that submits a follow-up task, then makes
 * a call. The submit is handed to the done's own thread (listed idle, the
 * only one), so the thread is no longer idle; the call runs on the caller. */
static struct ttask cfd_follow;

static void cfd_submit_then_call(struct bh_task *t, int status)
{
	tt_done(t, status);
	bh_pool_submit(done_pool, &cfd_follow.task);
	atomic_store(&cfd_result, bh_pool_call(done_pool, &cfd_inner.task, bh_now_ns() + BH_SEC));
}

static void test_submit_then_call_from_done(void **state)
{
	struct ttask a;

	(void)state;
	done_pool = make_pool(1, 1, 4, BH_POOL_ABORT, NULL);
	tt_init(&a, NULL);
	tt_init(&cfd_follow, NULL);
	tt_init(&cfd_inner, NULL);
	a.task.done = cfd_submit_then_call;
	atomic_store(&cfd_result, 12345);
	assert_int_equal(bh_pool_submit(done_pool, &a.task), 0);
	AWAIT(atomic_load(&cfd_result) != 12345);
	AWAIT(atomic_load(&cfd_follow.dones) == 1 && pstats(done_pool).active == 0);
	assert_int_equal(atomic_load(&cfd_result), 0);
	assert_int_equal(pstats(done_pool).caller_ran, 1); /* no slot: run on its caller */
	assert_int_equal(pstats(done_pool).completed, 2);
	assert_int_equal(held_permits(done_pool), 0);
	assert_int_equal(bh_pool_destroy(done_pool), 0);
}

static struct ttask full_c, full_d, full_inner;
static struct gate full_gate;
static _Atomic int full_result = 12345, full_sub_c = 12345, full_sub_d = 12345;
static _Atomic bool full_inner_running;

/* A's done fills the pool (C handed to its own thread, D queued), then
 * calls the pool with a 300 ms deadline. */
static void full_fill_then_call(struct bh_task *t, int status)
{
	tt_done(t, status);
	atomic_store(&full_sub_c, bh_pool_submit(done_pool, &full_c.task));
	atomic_store(&full_sub_d, bh_pool_submit(done_pool, &full_d.task));
	atomic_store(&full_result,
		     bh_pool_call(done_pool, &full_inner.task, bh_now_ns() + 300 * BH_MSEC));
}

/* max 1, cap 1, DISCARD_OLDEST: the call from done finds the pool full.
 * Swapped for D into the queue, behind the only thread, which is the
 * caller itself waiting in done, it would wait for itself: it runs on its
 * caller, and D stays queued. */
static void test_call_from_done_full_discard_oldest(void **state)
{
	struct ttask a;
	struct bh_pool_stats st;

	(void)state;
	done_pool = make_pool(1, 1, 1, BH_POOL_DISCARD_OLDEST, NULL);
	tt_init(&a, NULL);
	tt_init(&full_c, NULL);
	tt_init(&full_d, NULL);
	tt_init(&full_inner, NULL);
	a.task.done = full_fill_then_call;
	atomic_store(&full_result, 12345);
	assert_int_equal(bh_pool_submit(done_pool, &a.task), 0);
	AWAIT(atomic_load(&full_result) != 12345);
	assert_int_equal(atomic_load(&full_sub_c), 0);
	assert_int_equal(atomic_load(&full_sub_d), 0);
	assert_int_equal(atomic_load(&full_result), 0);
	assert_int_equal(atomic_load(&full_inner.runs), 1);
	AWAIT(atomic_load(&full_c.dones) == 1 && atomic_load(&full_d.dones) == 1 &&
	      pstats(done_pool).active == 0);
	assert_int_equal(atomic_load(&full_d.status), 0); /* ran, not dropped */
	st = pstats(done_pool);
	assert_int_equal(st.caller_ran, 1);
	assert_int_equal(st.discarded, 0);
	assert_int_equal(held_permits(done_pool), 0);
	assert_int_equal(bh_pool_destroy(done_pool), 0);
}

/* The same under CALLER_RUNS: runs on the caller (control). */
static void test_call_from_done_full_caller_runs(void **state)
{
	struct ttask a;

	(void)state;
	done_pool = make_pool(1, 1, 1, BH_POOL_CALLER_RUNS, NULL);
	tt_init(&a, NULL);
	tt_init(&full_c, NULL);
	tt_init(&full_d, NULL);
	tt_init(&full_inner, NULL);
	a.task.done = full_fill_then_call;
	atomic_store(&full_result, 12345);
	assert_int_equal(bh_pool_submit(done_pool, &a.task), 0);
	AWAIT(atomic_load(&full_result) != 12345);
	assert_int_equal(atomic_load(&full_result), 0);
	AWAIT(atomic_load(&full_d.dones) == 1 && pstats(done_pool).active == 0);
	assert_int_equal(pstats(done_pool).caller_ran, 1);
	assert_int_equal(held_permits(done_pool), 0);
	assert_int_equal(bh_pool_destroy(done_pool), 0);
}

/* HERE_CALLER with an adaptive controller attached, while shutdown_now
 * drops the queued task: every snapshot balances, every permit comes back,
 * every run is one sample. cap 4 so the call is admitted. */
static void full_inner_gated(struct ttask *tt)
{
	(void)tt;
	atomic_store(&full_inner_running, true);
	gate_pass(&full_gate);
}

static void full_fill_then_call_forever(struct bh_task *t, int status)
{
	tt_done(t, status);
	atomic_store(&full_sub_c, bh_pool_submit(done_pool, &full_c.task));
	atomic_store(&full_sub_d, bh_pool_submit(done_pool, &full_d.task));
	atomic_store(&full_result, bh_pool_call(done_pool, &full_inner.task, BH_FOREVER));
}

static void test_call_from_done_adaptive_shutdown_now(void **state)
{
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD, .min_limit = 1,
					.window_ns = 3600 * BH_SEC };
	struct bh_adaptive_stats as;
	bh_adaptive_t *ad = NULL;
	struct ttask a;
	struct bh_pool_stats st;

	(void)state;
	done_pool = make_pool(1, 1, 4, BH_POOL_ABORT, NULL);
	assert_int_equal(bh_adaptive_attach_pool(done_pool, &c, &ad), 0);
	gate_init(&full_gate);
	tt_init(&a, NULL);
	tt_init(&full_c, NULL);
	tt_init(&full_d, NULL);
	tt_init(&full_inner, NULL);
	full_inner.extra = full_inner_gated;
	a.task.done = full_fill_then_call_forever;
	atomic_store(&full_result, 12345);
	atomic_store(&full_inner_running, false);
	assert_int_equal(bh_pool_submit(done_pool, &a.task), 0);
	AWAIT(atomic_load(&full_inner_running));
	st = pstats(done_pool);
	assert_int_equal(st.caller_ran, 1);
	assert_int_equal(st.queued, 1);  /* D */
	assert_int_equal(st.active, 1);  /* C, handed to the caller's thread */
	assert_int_equal(held_permits(done_pool), 2); /* C and D: the call holds none */
	assert_int_equal(bh_pool_shutdown_now(done_pool), 1); /* D */
	assert_int_equal(atomic_load(&full_d.dones), 1);
	assert_int_equal(atomic_load(&full_d.status), -ECANCELED);
	st = pstats(done_pool);
	assert_int_equal(st.discarded, 1);
	gate_open(&full_gate);
	assert_int_equal(bh_pool_shutdown(done_pool, BH_FOREVER), 0);
	assert_int_equal(atomic_load(&full_result), 0);
	assert_int_equal(atomic_load(&full_c.runs), 1);
	st = pstats(done_pool);
	assert_int_equal(st.submitted, 4);
	assert_int_equal(st.completed, 2);
	assert_int_equal(st.caller_ran, 1);
	assert_int_equal(held_permits(done_pool), 0);
	bha_flush(ad);
	assert_int_equal(bh_adaptive_stats(ad, &as), 0);
	print_message("adaptive ok=%llu dropped=%llu ignored=%llu discarded=%llu\n",
		      (unsigned long long)as.ok, (unsigned long long)as.dropped,
		      (unsigned long long)as.ignored, (unsigned long long)as.discarded);
	assert_int_equal(as.ok + as.discarded, 3); /* A, inner, C */
	bh_adaptive_detach(ad);
	assert_int_equal(bh_pool_destroy(done_pool), 0);
}

/* A worker in its last task's done counts as idle, but a new task goes to a
 * thread that really idles first: b ran on one thread, which idles; a's
 * done blocks on the other; c must not wait for a's done. */
static struct gate done_gate;

static void blocking_done(struct bh_task *t, int status)
{
	tt_done(t, status);
	gate_pass(&done_gate);
}

static void test_task_skips_thread_in_done(void **state)
{
	bh_pool_t *p = make_pool(2, 2, 0, BH_POOL_ABORT, NULL);
	struct ttask a, b, c;

	(void)state;
	bhp_set_spin_ns(p, 0); /* both idle threads sleepers: no poller goes first */
	gate_init(&done_gate);
	tt_init(&a, NULL);
	tt_init(&b, NULL);
	tt_init(&c, NULL);
	a.task.done = blocking_done;
	assert_int_equal(bh_pool_submit(p, &b.task), 0);
	AWAIT(atomic_load(&b.dones) == 1 && pstats(p).active == 0);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(atomic_load(&a.dones) == 1); /* a's done now blocks */
	assert_int_equal(bh_pool_submit(p, &c.task), 0);
	AWAIT(atomic_load(&c.runs) == 1); /* before a's done returns */
	assert_false(pthread_equal(c.ran_on, a.ran_on));
	gate_open(&done_gate);
	AWAIT(pstats(p).active == 0 && atomic_load(&c.dones) == 1);
	assert_int_equal(bh_pool_destroy(p), 0);
}

static void test_thread_names(void **state)
{
	struct bh_pool_config cfg = { .name = "pay", .max_threads = 1 };
	bh_pool_t *p;
	struct ttask t;

	(void)state;
	assert_int_equal(bh_pool_create(&cfg, &p), 0);
	assert_string_equal(bh_pool_name(p), "pay");
	tt_init(&t, NULL);
	assert_int_equal(bh_pool_call(p, &t.task, BH_FOREVER), 0);
	assert_string_equal(t.thread_name, "pay-1");
	bh_pool_destroy(p);

	cfg.name = "inventory-service"; /* 17: cut to the kernel's 15 */
	assert_int_equal(bh_pool_create(&cfg, &p), 0);
	assert_string_equal(bh_pool_name(p), "inventory-servi");
	tt_init(&t, NULL);
	assert_int_equal(bh_pool_call(p, &t.task, BH_FOREVER), 0);
	assert_string_equal(t.thread_name, "inventory-ser-1"); /* the number survives */
	bh_pool_destroy(p);
}

/* ---- sizing ---------------------------------------------------------------------- */

static void test_sizing(void **state)
{
	struct bh_pool_load load = { .peak_qps = 50, .p99_ns = 200 * BH_MSEC, .safety = 1.3,
				     .caller_timeout_ns = 2 * BH_SEC };
	struct bh_pool_sizing s;

	(void)state;
	/* the 50 qps example in docs/sizing.md: 50 qps, P99 200 ms, 1.3 -> 13; 26 queued wait 0.52 s */
	assert_int_equal(bh_pool_size(&load, &s), 0);
	assert_int_equal(s.max_threads, 13);
	assert_int_equal(s.core_threads, 6);
	assert_int_equal(s.queue_capacity, 26);
	assert_int_equal(s.queue_wait_ns, 520 * BH_MSEC);
	assert_true(s.fits);
	/* section 7.2.1: 160 qps, 30 ms, 1.3 -> 6.24 -> 7; 14 / 160 = 87.5 ms < 1 s */
	load = (struct bh_pool_load){ .peak_qps = 160, .p99_ns = 30 * BH_MSEC, .safety = 1.3,
				      .caller_timeout_ns = BH_SEC };
	assert_int_equal(bh_pool_size(&load, &s), 0);
	assert_int_equal(s.max_threads, 7);
	assert_int_equal(s.core_threads, 3);
	assert_int_equal(s.queue_capacity, 14);
	assert_int_equal(s.queue_wait_ns, 87500 * BH_USEC);
	assert_true(s.fits);
	/* a slow dependency at low rate: the queue outlasts the caller */
	load = (struct bh_pool_load){ .peak_qps = 10, .p99_ns = BH_SEC, .safety = 1.5,
				      .caller_timeout_ns = BH_SEC };
	assert_int_equal(bh_pool_size(&load, &s), 0);
	assert_int_equal(s.max_threads, 15);
	assert_int_equal(s.queue_capacity, 30);
	assert_int_equal(s.queue_wait_ns, 3 * BH_SEC);
	assert_false(s.fits);
	load.caller_timeout_ns = 0; /* no check asked */
	assert_int_equal(bh_pool_size(&load, &s), 0);
	assert_true(s.fits);
	/* defaults and floors: safety 0 means 1.3; at least one thread */
	load = (struct bh_pool_load){ .peak_qps = 1, .p99_ns = BH_MSEC };
	assert_int_equal(bh_pool_size(&load, &s), 0);
	assert_int_equal(s.max_threads, 1);
	assert_int_equal(s.core_threads, 1);
	assert_int_equal(s.queue_capacity, 2);
	/* bad input */
	assert_int_equal(bh_pool_size(NULL, &s), -EINVAL);
	assert_int_equal(bh_pool_size(&load, NULL), -EINVAL);
	load.peak_qps = 0;
	assert_int_equal(bh_pool_size(&load, &s), -EINVAL);
	load.peak_qps = -1;
	assert_int_equal(bh_pool_size(&load, &s), -EINVAL);
	load.peak_qps = 0.0 / 0.0;
	assert_int_equal(bh_pool_size(&load, &s), -EINVAL);
	load.peak_qps = 1.0 / 0.0;
	assert_int_equal(bh_pool_size(&load, &s), -EINVAL);
	load.peak_qps = 10, load.safety = 0.5;
	assert_int_equal(bh_pool_size(&load, &s), -EINVAL);
	load.safety = 1.2, load.p99_ns = 0;
	assert_int_equal(bh_pool_size(&load, &s), -EINVAL);
	load = (struct bh_pool_load){ .peak_qps = 100000, .p99_ns = BH_SEC };
	assert_int_equal(bh_pool_size(&load, &s), -ERANGE);
}

/* bulkhead-size and bulkhead-demo size with the tools' bhz_* functions:
 * they must give the library's answer, also where the rounding of noise
 * above a whole number decides (4000.000001 threads is 4001, not 4000). */
static void test_sizing_matches_tools(void **state)
{
	static const struct {
		double qps, safety;
		uint64_t p99_ns;
	} cases[] = {
		{ 50, 1.3, 200 * BH_MSEC },        { 160, 1.3, 30 * BH_MSEC },
		{ 10, 1.5, BH_SEC },               { 1, 1.3, BH_MSEC },
		{ 4000000.001, 1.0, BH_MSEC },     { 3000.0000001, 1.0, BH_SEC },
		{ 2000, 1.0, BH_MSEC + 1 },        { 1e6, 1.3, 3 * BH_MSEC },
		{ 333.3, 2.0, 7 * BH_MSEC },       { 4096, 1.0, BH_SEC },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct bh_pool_load load = { .peak_qps = cases[i].qps, .p99_ns = cases[i].p99_ns,
					     .safety = cases[i].safety };
		double p99_s = (double)cases[i].p99_ns / (double)BH_SEC;
		struct bh_pool_sizing s;

		assert_int_equal(bh_pool_size(&load, &s), 0);
		assert_int_equal(s.max_threads, bhz_round_up(bhz_concurrency_raw(cases[i].qps, p99_s,
										    cases[i].safety)));
		assert_int_equal(s.queue_capacity, bhz_queue_rule(s.max_threads));
	}
	struct bh_pool_load odd = { .peak_qps = 4000000.001, .p99_ns = BH_MSEC, .safety = 1.0 };
	struct bh_pool_sizing s;

	assert_int_equal(bh_pool_size(&odd, &s), 0);
	assert_int_equal(s.max_threads, 4001);
}

/* ---- fork children ------------------------------------------------------------- */

/* What tasks did in a fork child and in its parent, in a page both share:
 * a child reports through it and through its exit status (an assert there
 * would unwind the child's copy of the test), and the parent asserts. */
enum { FK_TASKS = 4 };
struct fork_page {
	pid_t parent;
	_Atomic int runs[FK_TASKS][2]; /* [task][0: in the parent, 1: in a child] */
	_Atomic int dones[FK_TASKS][2];
	_Atomic int done_status[FK_TASKS];
	_Atomic pid_t child;  /* forked from a task or a done: its pid (-1: failed) */
	_Atomic int at;       /* the forking child got to its end */
	_Atomic int ended;    /* ...and then its thread ended */
	int r[4];             /* what a child's calls returned */
	_Atomic int parent_cancelled; /* bh_task_cancelled in the parent's run */
};

static struct fork_page *fpage;

static void fork_page_new(void)
{
	void *m = mmap(NULL, sizeof(*fpage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);

	assert_true(m != MAP_FAILED);
	fpage = m; /* zeroed */
	fpage->parent = getpid();
}

static void fork_page_free(void)
{
	munmap(fpage, sizeof(*fpage));
	fpage = NULL;
}

static int in_child(void)
{
	return getpid() != fpage->parent;
}

/* A child that hangs dies of SIGALRM instead, which the parent sees. A
 * child forked from a pool thread has the thread's mask (every signal
 * blocked), so SIGALRM is unblocked first. */
static void child_alarm(void)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	alarm(10);
}

/* A child that ends by exit() (returning from a pool thread) would print
 * the parent's buffered output again. */
static pid_t fork_flushed(void)
{
	fflush(stdout);
	fflush(stderr);
	return fork();
}

/* Its exit status, or 128 + the signal that killed it (142: SIGALRM, hung). */
static int reap(pid_t pid)
{
	int st;

	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct ftask {
	struct bh_task task;
	int id;               /* its row in fpage */
	struct gate *gate;    /* run waits for it to open (NULL: no wait) */
	void (*run_extra)(struct ftask *ft), (*done_extra)(struct ftask *ft);
};

static void ft_run(struct bh_task *t)
{
	struct ftask *ft = (struct ftask *)t;

	atomic_fetch_add(&fpage->runs[ft->id][in_child()], 1);
	if (ft->gate)
		gate_pass(ft->gate);
	if (ft->run_extra)
		ft->run_extra(ft);
}

static void ft_done(struct bh_task *t, int status)
{
	struct ftask *ft = (struct ftask *)t;

	atomic_store(&fpage->done_status[ft->id], status);
	atomic_fetch_add(&fpage->dones[ft->id][in_child()], 1);
	if (ft->done_extra)
		ft->done_extra(ft);
}

static void ft_init(struct ftask *ft, int id, struct gate *g)
{
	memset(ft, 0, sizeof(*ft));
	ft->task.run = ft_run;
	ft->task.done = ft_done;
	ft->id = id;
	ft->gate = g;
}

/* Task id ran and was reported n times in the parent, never in a child. */
static void ran_in_parent_only(int id, int n)
{
	assert_int_equal(atomic_load(&fpage->runs[id][0]), n);
	assert_int_equal(atomic_load(&fpage->dones[id][0]), n);
	assert_int_equal(atomic_load(&fpage->runs[id][1]), 0);
	assert_int_equal(atomic_load(&fpage->dones[id][1]), 0);
}

/* In the child of a pool whose one thread runs a and has b queued: the copy
 * takes nothing (-ESHUTDOWN, even past a deadline, the task untouched),
 * reads as it stood, drops nothing and frees itself at once. */
static int child_of_busy_pool(bh_pool_t *p, struct ftask *c)
{
	struct bh_pool_stats st;

	child_alarm();
	if (bh_pool_submit(p, &c->task) != -ESHUTDOWN)
		return 1;
	if (bh_pool_call(p, &c->task, BH_FOREVER) != -ESHUTDOWN)
		return 2;
	if (bh_pool_call(p, &c->task, 0) != -ESHUTDOWN)
		return 3;
	if (c->task.priv.pool != NULL)
		return 4;
	if (bh_pool_stats(p, &st) != 0 || st.alive != 1 || st.active != 1 || st.queued != 1 ||
	    st.submitted != 2)
		return 5;
	if (strcmp(bh_pool_name(p), "tp") != 0)
		return 6;
	if (bh_pool_shutdown_now(p) != 0) /* b is the parent's */
		return 7;
	if (bh_pool_shutdown(p, BH_FOREVER) != 0) /* no thread to wait for */
		return 8;
	if (bh_pool_destroy(p) != 0)
		return 9;
	return atomic_load(&fpage->dones[1][1]) == 0 ? 0 : 10;
}

/* A pool whose thread runs a task and has another queued is copied into a
 * fork child: there, no thread exists to run anything. The copy refuses
 * as a shut pool does and frees itself without waiting; the parent's pool
 * runs both tasks, each once, the queued one included. */
static void test_fork_child_pool_is_shut(void **state)
{
	struct ftask a, b, c;
	struct gate g;
	bh_pool_t *p;
	pid_t pid;

	(void)state;
	fork_page_new();
	gate_init(&g);
	ft_init(&a, 0, &g);
	ft_init(&b, 1, NULL);
	ft_init(&c, 2, NULL);
	p = make_pool(1, 1, 2, BH_POOL_ABORT, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(atomic_load(&fpage->runs[0][0]) == 1);
	assert_int_equal(bh_pool_submit(p, &b.task), 0); /* queued at the fork */
	pid = fork_flushed();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_of_busy_pool(p, &c));
	assert_int_equal(reap(pid), 0);
	gate_open(&g);
	assert_int_equal(bh_pool_destroy(p), 0);
	ran_in_parent_only(0, 1);
	ran_in_parent_only(1, 1);
	ran_in_parent_only(2, 0);
	assert_int_equal(atomic_load(&fpage->done_status[1]), 0);
	fork_page_free();
}

struct fk_submit {
	bh_pool_t *pool;
	struct ftask *ft;
	int r;
};

static void *fk_submit_main(void *arg)
{
	struct fk_submit *s = arg;

	s->r = bh_pool_submit(s->pool, &s->ft->task);
	return NULL;
}

/* The child of a pool whose lock a parent thread held at the fork, for
 * good in the child: nothing of the copy may take it. */
static int child_of_locked_pool(bh_pool_t *p, struct ftask *c)
{
	struct bh_pool_stats st;

	child_alarm();
	if (bh_pool_stats(p, &st) != 0 || st.alive != 1 || st.submitted != 1)
		return 1;
	if (bh_pool_submit(p, &c->task) != -ESHUTDOWN)
		return 2;
	if (bh_pool_call(p, &c->task, BH_FOREVER) != -ESHUTDOWN)
		return 3;
	if (bh_pool_shutdown_now(p) != 0)
		return 4;
	if (bh_pool_shutdown(p, BH_FOREVER) != 0)
		return 5;
	return bh_pool_destroy(p) == 0 ? 0 : 6;
}

/* A parent thread is inside the pool's lock at the fork (starting a second
 * thread for a submission, which happens under it): the child's stats,
 * submit, call, shutdowns and destroy all return, none waits for the lock;
 * the parent's submission then completes and its task runs, in the parent. */
static void test_fork_child_lock_held(void **state)
{
	struct vsync v;
	struct gate g, cg;
	struct ftask a, b, c;
	struct fk_submit s;
	bh_pool_t *p;
	pthread_t th;
	pid_t pid;

	(void)state;
	fork_page_new();
	vs_init(&v);
	v.ops.sync = &bhi_futex_ops; /* the fake clock's lock is not the point */
	gate_init(&g);
	gate_init(&cg);
	ft_init(&a, 0, &g);
	ft_init(&b, 1, NULL);
	ft_init(&c, 2, NULL);
	p = make_pool(1, 2, 0, BH_POOL_ABORT, &v);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(atomic_load(&fpage->runs[0][0]) == 1);
	v.create_gate = &cg;
	s = (struct fk_submit){ .pool = p, .ft = &b, .r = 12345 };
	assert_int_equal(pthread_create(&th, NULL, fk_submit_main, &s), 0);
	AWAIT(atomic_load(&v.in_create)); /* b needs a second thread: the lock is held */
	pid = fork_flushed();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_of_locked_pool(p, &c));
	assert_int_equal(reap(pid), 0);
	gate_open(&cg);
	pthread_join(th, NULL);
	assert_int_equal(s.r, 0);
	gate_open(&g);
	assert_int_equal(bh_pool_destroy(p), 0);
	ran_in_parent_only(0, 1);
	ran_in_parent_only(1, 1);
	ran_in_parent_only(2, 0);
	fork_page_free();
}

/* ---- a fork from a task or a done callback ---- */

static bh_pool_t *fk_pool;
static struct ftask fk_c; /* what a child tries to submit */

/* The end of a fork child's one thread, seen by its thread-specific data's
 * destructor. The return of the child's last thread would go on to exit(0);
 * the child ends here instead, with _exit: a leak checker's exit handler
 * would count the test's memory, which only the test's thread reached, and
 * that thread is not in the child (and ThreadSanitizer's handlers crash
 * in a process whose last thread has ended). */
static pthread_key_t child_end_key;

static void child_thread_ended(void *v)
{
	(void)v;
	atomic_store(&fpage->ended, 1);
	_exit(0);
}

/* Fork here, on a pool thread. The parent records the child and goes on;
 * the child records what the pool's calls say to it and returns into the
 * pool, which must end its thread at once. */
static void fork_from_pool_thread(struct ftask *ft)
{
	pid_t pid = fork_flushed();

	if (pid != 0) {
		atomic_store(&fpage->parent_cancelled, bh_task_cancelled(&ft->task));
		atomic_store(&fpage->child, pid < 0 ? -1 : pid);
		return;
	}
	child_alarm();
	fpage->r[0] = bh_task_cancelled(&ft->task);
	fpage->r[1] = bh_pool_submit(fk_pool, &fk_c.task);
	fpage->r[2] = bh_pool_destroy(fk_pool); /* this thread is a pool thread's copy */
	atomic_store(&fpage->at, 1);
	if (pthread_key_create(&child_end_key, child_thread_ended) == 0)
		pthread_setspecific(child_end_key, &child_end_key);
}

/* The one thread runs f, with q queued behind it at the fork; f's run, or
 * its done (by then q is that thread's next task), forks. The child's thread
 * leaves when the user code returns: f is not reported there and q does not
 * run there (in the done case it would next, in the run case f's done would
 * be next). Both are the parent's, which runs and reports each once. */
static void check_fork_from(bool from_run)
{
	struct ftask f, q;
	struct gate g;

	fork_page_new();
	gate_init(&g);
	ft_init(&f, 0, &g);
	ft_init(&q, 1, NULL);
	ft_init(&fk_c, 2, NULL);
	if (from_run)
		f.run_extra = fork_from_pool_thread;
	else
		f.done_extra = fork_from_pool_thread;
	fk_pool = make_pool(1, 1, 2, BH_POOL_ABORT, NULL);
	assert_int_equal(bh_pool_submit(fk_pool, &f.task), 0);
	AWAIT(atomic_load(&fpage->runs[0][0]) == 1);
	assert_int_equal(bh_pool_submit(fk_pool, &q.task), 0);
	gate_open(&g);
	AWAIT(atomic_load(&fpage->child) != 0);
	assert_true(atomic_load(&fpage->child) > 0);
	assert_int_equal(reap(atomic_load(&fpage->child)), 0);
	assert_int_equal(atomic_load(&fpage->at), 1);
	assert_int_equal(atomic_load(&fpage->ended), 1);
	if (from_run) {
		assert_true(fpage->r[0]);
		assert_false(atomic_load(&fpage->parent_cancelled));
	}
	assert_int_equal(fpage->r[1], -ESHUTDOWN);
	assert_int_equal(fpage->r[2], -EDEADLK);
	AWAIT(atomic_load(&fpage->dones[1][0]) == 1);
	assert_int_equal(bh_pool_destroy(fk_pool), 0);
	ran_in_parent_only(0, 1);
	ran_in_parent_only(1, 1);
	ran_in_parent_only(2, 0);
	fork_page_free();
}

static void test_fork_from_run(void **state)
{
	(void)state;
	check_fork_from(true);
}

static void test_fork_from_done(void **state)
{
	(void)state;
	check_fork_from(false);
}

/* A call made from done runs on its caller (no other thread idles), and its
 * run forks while a parent thread holds the pool's lock (starting a thread
 * for another submission). The child's copy of the call returns without
 * the lock it would finish the call under, and its thread then leaves. */
static struct ftask ch_i;
static _Atomic int ch_in_inner, ch_go, ch_call_r = 12345;

static void ch_done_calls(struct ftask *ft)
{
	(void)ft;
	atomic_store(&ch_call_r, bh_pool_call(fk_pool, &ch_i.task, BH_FOREVER));
}

static void ch_inner_forks(struct ftask *ft)
{
	uint64_t end = bh_now_ns() + 10 * BH_SEC;

	atomic_store(&ch_in_inner, 1);
	while (!atomic_load(&ch_go) && bh_now_ns() < end) /* the test asserts */
		sched_yield();
	fork_from_pool_thread(ft);
}

static void test_fork_from_call_run_on_caller(void **state)
{
	struct vsync v;
	struct gate cg;
	struct ftask f, h;
	struct fk_submit s;
	pthread_t th;

	(void)state;
	fork_page_new();
	vs_init(&v);
	v.ops.sync = &bhi_futex_ops;
	gate_init(&cg);
	ft_init(&f, 0, NULL);
	ft_init(&ch_i, 1, NULL);
	ft_init(&h, 3, NULL);
	ft_init(&fk_c, 2, NULL);
	f.done_extra = ch_done_calls;
	ch_i.run_extra = ch_inner_forks;
	atomic_store(&ch_in_inner, 0);
	atomic_store(&ch_go, 0);
	atomic_store(&ch_call_r, 12345);
	fk_pool = make_pool(1, 2, 0, BH_POOL_ABORT, &v);
	assert_int_equal(bh_pool_submit(fk_pool, &f.task), 0);
	AWAIT(atomic_load(&ch_in_inner));
	assert_int_equal(pstats(fk_pool).alive, 1); /* the call runs on f's thread */
	v.create_gate = &cg;
	s = (struct fk_submit){ .pool = fk_pool, .ft = &h, .r = 12345 };
	assert_int_equal(pthread_create(&th, NULL, fk_submit_main, &s), 0);
	AWAIT(atomic_load(&v.in_create)); /* h needs a second thread: the lock is held */
	atomic_store(&ch_go, 1);
	AWAIT(atomic_load(&fpage->child) != 0);
	assert_true(atomic_load(&fpage->child) > 0);
	assert_int_equal(reap(atomic_load(&fpage->child)), 0);
	assert_int_equal(atomic_load(&fpage->at), 1);
	assert_int_equal(atomic_load(&fpage->ended), 1);
	assert_int_equal(fpage->r[1], -ESHUTDOWN);
	gate_open(&cg);
	pthread_join(th, NULL);
	assert_int_equal(s.r, 0);
	AWAIT(atomic_load(&ch_call_r) == 0 && atomic_load(&fpage->dones[3][0]) == 1);
	assert_int_equal(bh_pool_destroy(fk_pool), 0);
	ran_in_parent_only(0, 1);
	ran_in_parent_only(3, 1);
	assert_int_equal(atomic_load(&fpage->runs[1][0]), 1); /* a call: no done */
	assert_int_equal(atomic_load(&fpage->runs[1][1]), 0);
	fork_page_free();
}

/* The first dropped task's done, run by bh_pool_shutdown_now, forks. The
 * child's copy of that shutdown reports none of the others: the parent
 * does, each once. */
static void fork_from_caller(struct ftask *ft)
{
	pid_t pid;

	(void)ft;
	pid = fork_flushed();
	if (pid == 0)
		child_alarm();
	else
		atomic_store(&fpage->child, pid < 0 ? -1 : pid);
}

static void test_fork_from_dropped_done(void **state)
{
	struct ftask a, d[3];
	struct gate g;
	bh_pool_t *p;
	int r;

	(void)state;
	fork_page_new();
	gate_init(&g);
	ft_init(&a, 0, &g);
	for (int i = 0; i < 3; i++)
		ft_init(&d[i], 1 + i, NULL);
	d[0].done_extra = fork_from_caller;
	p = make_pool(1, 1, 3, BH_POOL_ABORT, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(atomic_load(&fpage->runs[0][0]) == 1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(bh_pool_submit(p, &d[i].task), 0);
	r = bh_pool_shutdown_now(p);
	if (in_child())
		_exit(r == 3 && atomic_load(&fpage->dones[2][1]) + atomic_load(&fpage->dones[3][1]) == 0
			      ? 0
			      : 1);
	assert_int_equal(r, 3);
	assert_true(atomic_load(&fpage->child) > 0);
	assert_int_equal(reap(atomic_load(&fpage->child)), 0);
	gate_open(&g);
	assert_int_equal(bh_pool_destroy(p), 0);
	for (int i = 1; i < 4; i++) {
		assert_int_equal(atomic_load(&fpage->runs[i][0]), 0);
		assert_int_equal(atomic_load(&fpage->dones[i][0]), 1);
		assert_int_equal(atomic_load(&fpage->dones[i][1]), 0);
		assert_int_equal(atomic_load(&fpage->done_status[i]), -ECANCELED);
	}
	fork_page_free();
}

/* ThreadSanitizer intercepts fork, not _Fork: in a _Fork child it still
 * counts the parent's threads, and reports their last accesses to the pool
 * as races with the child's destroy. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

/* A child made without the atfork handlers (_Fork) is not told by the fork
 * count; destroy, which would otherwise join the parent's thread, tells it
 * by its process id. */
static void test_fork_without_handlers_destroy(void **state)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34)) && \
	!defined(UNDER_TSAN)
	struct ftask a;
	bh_pool_t *p;
	pid_t pid;

	(void)state;
	fork_page_new();
	ft_init(&a, 0, NULL);
	p = make_pool(1, 1, 0, BH_POOL_ABORT, NULL);
	assert_int_equal(bh_pool_submit(p, &a.task), 0);
	AWAIT(atomic_load(&fpage->dones[0][0]) == 1 && pstats(p).active == 0);
	fflush(stdout);
	fflush(stderr);
	pid = _Fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(10);
		_exit(bh_pool_destroy(p) == 0 ? 0 : 1);
	}
	assert_int_equal(reap(pid), 0);
	assert_int_equal(bh_pool_call(p, &a.task, BH_FOREVER), 0); /* the parent's still works */
	assert_int_equal(bh_pool_destroy(p), 0);
	fork_page_free();
#else
	(void)state;
	skip(); /* no _Fork, or ThreadSanitizer */
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_rejects_bad_config),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_errno_untouched),
		cmocka_unit_test(test_submission_order),
		cmocka_unit_test(test_core_thread_started_despite_idle),
		cmocka_unit_test(test_zero_queue_is_handoff),
		cmocka_unit_test(test_core_zero),
		cmocka_unit_test(test_prestart),
		cmocka_unit_test(test_fifo_order),
		cmocka_unit_test(test_abort_policy),
		cmocka_unit_test(test_caller_runs_policy),
		cmocka_unit_test(test_discard_policy),
		cmocka_unit_test(test_discard_oldest_policy),
		cmocka_unit_test(test_refusal_then_cache_is_no_rejection),
		cmocka_unit_test(test_close_races_refusal),
		cmocka_unit_test(test_rejections_exact_under_contention),
		cmocka_unit_test(test_keepalive_shrinks_to_core),
		cmocka_unit_test(test_keepalive_races_handoff),
		cmocka_unit_test(test_submit_join_not_cancellation_point),
		cmocka_unit_test(test_poller_takes_work_without_wake),
		cmocka_unit_test(test_backlog_goes_to_sleepers),
		cmocka_unit_test(test_call_completes),
		cmocka_unit_test(test_deadline_keeps_slot),
		cmocka_unit_test(test_timeout_vs_completion),
		cmocka_unit_test(test_timeout_while_queued),
		cmocka_unit_test(test_past_deadline),
		cmocka_unit_test(test_error_precedence),
		cmocka_unit_test(test_cancel_waiting_caller),
		cmocka_unit_test(test_pending_cancel_only_when_waiting),
		cmocka_unit_test(test_cancel_during_give_up_done),
		cmocka_unit_test(test_graceful_shutdown),
		cmocka_unit_test(test_shutdown_now),
		cmocka_unit_test(test_destroy_from_dropped_done),
		cmocka_unit_test(test_shutdown_idle_pool),
		cmocka_unit_test(test_own_thread_cannot_wait),
		cmocka_unit_test(test_own_thread_shutdown_from_done),
		cmocka_unit_test(test_destroy_not_cancellation_point),
		cmocka_unit_test(test_destroy_runs_queued),
		cmocka_unit_test(test_done_may_resubmit),
		cmocka_unit_test(test_done_sees_itself_counted),
		cmocka_unit_test(test_run_may_free_without_done),
		cmocka_unit_test(test_thread_creation_fails),
		cmocka_unit_test(test_thread_names),
		cmocka_unit_test(test_sizing),
		cmocka_unit_test(test_sizing_matches_tools),
		cmocka_unit_test(test_cancel_in_swapped_done),
		cmocka_unit_test(test_dropped_call_woken),
		cmocka_unit_test(test_cancel_in_shutdown_now_done),
		cmocka_unit_test(test_shutdown_deadline_while_done_runs),
		cmocka_unit_test(test_given_up_slot_free_in_done),
		cmocka_unit_test(test_core_start_after_failure_keeps_fifo),
		cmocka_unit_test(test_call_from_done_runs_on_caller),
		cmocka_unit_test(test_call_from_done_goes_to_idle_thread),
		cmocka_unit_test(test_task_skips_thread_in_done),
		cmocka_unit_test(test_task_not_behind_inline_call),
		cmocka_unit_test(test_calls_from_two_dones),
		cmocka_unit_test(test_call_from_done_full_discard_oldest),
		cmocka_unit_test(test_call_from_done_full_caller_runs),
		cmocka_unit_test(test_call_from_done_adaptive_shutdown_now),
		cmocka_unit_test(test_call_from_done_after_handoff),
		cmocka_unit_test(test_call_from_done_with_next_queued),
		cmocka_unit_test(test_second_call_from_done),
		cmocka_unit_test(test_shutdown_during_call_from_done),
		cmocka_unit_test(test_call_from_done_spinner_and_keepalive),
		cmocka_unit_test(test_submit_then_call_from_done),
		cmocka_unit_test(test_fork_child_pool_is_shut),
		cmocka_unit_test(test_fork_child_lock_held),
		cmocka_unit_test(test_fork_from_run),
		cmocka_unit_test(test_fork_from_done),
		cmocka_unit_test(test_fork_from_call_run_on_caller),
		cmocka_unit_test(test_fork_from_dropped_done),
		cmocka_unit_test(test_fork_without_handlers_destroy),
	};

	alarm(300); /* a lost wakeup must fail the run, not hang it */
	if (getenv("BH_TEST_FILTER")) /* one test: BH_TEST_FILTER=test_name */
		cmocka_set_test_filter(getenv("BH_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
