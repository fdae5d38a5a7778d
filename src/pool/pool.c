/* A pool's life: the real ops, create, shutdown, destroy,
 * stats, name, and the sizing rule. The protocols themselves are in the
 * other files (pool_internal.h lists them); docs/pool.md explains them. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/futex.h"
#include "lib/sizing.h"
#include "pool_internal.h"
#include "task.h"

/* ---- the real ops ------------------------------------------------------- */

static int real_create(void *ctx, pthread_t *tid, const pthread_attr_t *attr,
		       void *(*fn)(void *), void *arg)
{
	int saved = errno, r;

	(void)ctx;
	r = pthread_create(tid, attr, fn, arg);
	errno = saved;
	return -r;
}

/* The futex waits are cancellable: bh_pool_call is a cancellation point. */
const struct bhp_ops bhp_real_ops = {
	.sync = &bhi_futex_ops,
	.create = real_create,
	.spin_ns = BHI_SPIN_NS,
};

BHI_COLD void bhp_sample_run(struct bh_pool *p, uint64_t t0)
{
	bhk_emit(p->adm, BHK_POOL, pool_now(p) - t0, BHK_OK);
}

/* ---- shutdown ------------------------------------------------------------ */

/* Under the lock: take every queued task off. Calls are told at once (a
 * rare path: the wakes happen under the lock); plain tasks go on plain,
 * for done after the unlock. */
static void drop_queue_locked(struct bh_pool *p, struct bhp_tasks *plain, uint32_t *n)
{
	struct bh_task *t;

	*n = 0;
	while ((t = bhp_tasks_first(&p->queue)) != NULL) {
		_Atomic uint32_t *wake;

		tq_remove(p, t);
		(*n)++;
		if (!task_is_call(t)) {
			bhp_tasks_add_tail(plain, t);
			task_drop_queued_locked(p, t);
			continue;
		}
		wake = task_drop_queued_locked(p, t);
		if (wake)
			bhi_sync_wake(p->ops->sync, wake, false);
	}
}

/* Close admission, send idle workers away; now: also drop the queue and
 * flag running tasks cancelled. Returns how many tasks were dropped. */
static int close_pool(struct bh_pool *p, bool now)
{
	struct bhp_tasks plain = { NULL, NULL };
	struct bh_task *t, *next;
	uint32_t n = 0, gen;
	int cs;

	pool_lock(p);
	if (!p->closing) {
		p->closing = true;
		bh_close(p->adm);
	}
	if (now) {
		/* relaxed: a flag bh_task_cancelled polls */
		atomic_store_explicit(&p->stop_now, true, memory_order_relaxed);
		drop_queue_locked(p, &plain, &n);
	}
	bhp_dismiss_idle_locked(p);
	pool_unlock(p);
	/* The dropped tasks' permits go back before their done callbacks run:
	 * these run on the caller's thread, not a pool thread, so one may
	 * destroy the pool, after which p is not touched again. */
	if (n)
		bh_release(p->adm, n);
	/* Not a cancellation point: a request acted on in one task's done
	 * would leave the tasks after it unreported. Deferred: it stays
	 * pending for the next cancellation point. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	gen = bhk_fork_generation();
	bhi_list_for_each_safe(t, next, &plain, bhp_tasks) {
		/* A done that forked: in the child, the rest are the parent's
		 * to report (read apart from p, which a done may have freed). */
		if (bhk_fork_generation() != gen)
			break;
		if (t->done)
			t->done(t, -ECANCELED);
	}
	pthread_setcancelstate(cs, NULL);
	return (int)n;
}

/* Under the lock: pool threads still in a done callback (user code), which
 * may have left the pool's count (alive) already. After the acquire load of
 * exits: a thread that cleared its flag bumps exits later (release). */
static uint32_t reporting_locked(const struct bh_pool *p)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->max; i++)
		n += atomic_load_explicit(&p->workers[i].reporting, memory_order_relaxed);
	return n;
}

/* Wait until every thread has left. Once no task is left and no done runs,
 * the threads only have to exit (no user code), so that is waited for past
 * the deadline. Returns 0, or the tasks still running or queued (at least 1
 * while a done runs) when the deadline passed. */
static int drain(struct bh_pool *p, uint64_t deadline)
{
	bool expired = false;

	for (;;) {
		uint32_t alive, left, seq;

		pool_lock(p);
		/* acquire: pairs with signal_exit's release, so a flag read
		 * below as set was not cleared before this count was read */
		seq = atomic_load_explicit(&p->exits, memory_order_acquire);
		alive = p->alive;
		left = p->active + p->queued;
		if (!left)
			left = reporting_locked(p);
		pool_unlock(p);
		if (alive == 0 && left == 0)
			return 0;
		if (left && expired)
			return (int)left;
		expired = bhi_sync_wait(p->ops->sync, BHI_WAIT_DRAIN, &p->exits, seq,
				       left ? deadline : BH_FOREVER) == -ETIMEDOUT;
	}
}

/* pool_inherited, or a child that no atfork handler ran for (_Fork, a raw
 * clone). A system call: only for the shutdowns and destroy, which would
 * otherwise wake, wait for and join threads that do not exist. */
static bool not_ours(const struct bh_pool *p)
{
	return pool_inherited(p) || p->pid != getpid();
}

/* In a fork child, the copy has no thread to wait for (the parent's do not
 * exist there) and holds no task of the child's: the queued ones are the
 * parent's, which runs and reports them. So nothing is left to finish. */
int bh_pool_shutdown(bh_pool_t *p, uint64_t deadline_ns)
{
	int left, cs;

	if (!p)
		return -EINVAL;
	if (not_ours(p))
		return 0;
	close_pool(p, false);
	if (bhp_on_own_thread(p)) { /* it cannot wait for itself */
		pool_lock(p);
		left = (int)(p->active + p->queued);
		pool_unlock(p);
		/* this thread has not left (in done, its task is no longer
		 * counted): never 0, which says every thread has left */
		return left ? left : 1;
	}
	/* Not a cancellation point (only bh_pool_call's wait is): the drain's
	 * futex wait, or pthread_join, would act on a request and leave the
	 * pool closed, its threads unjoined, and bh_pool_destroy half done. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	left = drain(p, deadline_ns);
	if (left == 0)
		bhp_join_exited(p);
	pthread_setcancelstate(cs, NULL);
	return left;
}

/* In a fork child, nothing is dropped: the queued tasks are the parent's. */
int bh_pool_shutdown_now(bh_pool_t *p)
{
	if (!p)
		return -EINVAL;
	if (not_ours(p))
		return 0;
	return close_pool(p, true);
}

/* A fork child's copy: only its memory goes. Its threads are the parent's
 * and do not exist here, so none is woken or joined; its queued tasks are
 * the parent's, so none is reported; a parent thread may have held its lock
 * at the fork, so the lock is neither taken nor destroyed (destroying a
 * held mutex is undefined; a Linux mutex owns nothing outside its bytes).
 * The admission bulkhead's copy gets a lock of its own before it goes, for
 * the same reason (its close or a limit change may have been under way). */
static int forget_copy(struct bh_pool *p)
{
	bhi_close_inherited(p->adm);
	bh_destroy(p->adm);
	pthread_attr_destroy(&p->attr);
	bhi_free_aligned(p);
	return 0;
}

int bh_pool_destroy(bh_pool_t *p)
{
	if (!p)
		return 0;
	/* first: in a child forked from a task, the thread that forked is a
	 * copy of a pool thread, and returns into the pool when run does */
	if (bhp_on_own_thread(p))
		return -EDEADLK;
	if (not_ours(p))
		return forget_copy(p);
	bh_pool_shutdown(p, BH_FOREVER);
	bh_destroy(p->adm);
	pthread_attr_destroy(&p->attr);
	pthread_mutex_destroy(&p->lock);
	bhi_free_aligned(p);
	return 0;
}

/* ---- create, stats, name -------------------------------------------------- */

static bool config_valid(const struct bh_pool_config *c)
{
	return c->max_threads >= 1 && c->max_threads <= BH_POOL_THREADS_MAX &&
	       c->core_threads <= c->max_threads &&
	       c->queue_capacity <= BH_LIMIT_MAX - c->max_threads &&
	       (uint32_t)c->policy <= BH_POOL_DISCARD_OLDEST && !(c->flags & ~BH_POOL_PRESTART);
}

static int init_sync(struct bh_pool *p, size_t stack_size)
{
	int r;

	if (pthread_attr_init(&p->attr) != 0)
		return -ENOMEM;
	if (stack_size && pthread_attr_setstacksize(&p->attr, stack_size) != 0) {
		pthread_attr_destroy(&p->attr);
		return -EINVAL;
	}
	/* A plain mutex: an adaptive one spins on contention, which cost up
	 * to half the throughput when the pool's threads outnumber the CPUs
	 * (measured); the critical sections are a few list operations. */
	r = pthread_mutex_init(&p->lock, NULL);
	if (r != 0) {
		pthread_attr_destroy(&p->attr);
		return -ENOMEM;
	}
	return 0;
}

static struct bh_pool *pool_alloc(uint32_t max)
{
	return bhi_zalloc_aligned(sizeof(struct bh_pool) + max * sizeof(struct bhp_worker),
				  BHI_CACHELINE);
}

/* Unnamed pools are numbered, as unnamed bulkheads are: two pools of one
 * name give duplicate series in the metrics export, which Prometheus
 * drops. */
static _Atomic uint64_t unnamed_pools;

static void set_name(struct bh_pool *p, const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (!name || !n) {
		/* relaxed: a counter that only has to be unique */
		uint64_t k = atomic_fetch_add_explicit(&unnamed_pools, 1, memory_order_relaxed) + 1;

		snprintf(p->name, sizeof(p->name), "bhpool-%llu", (unsigned long long)k);
		return;
	}
	if (n > sizeof(p->name) - 1) {
		n = sizeof(p->name) - 1;
		/* never half a UTF-8 character: the name goes into the exports */
		while (n > 0 && ((unsigned char)name[n] & 0xc0) == 0x80)
			n--;
	}
	memcpy(p->name, name, n);
	p->name[n] = '\0';
}

/* Polling takes a CPU: never more pollers than half the CPUs (as the Go
 * runtime caps its spinning threads), and two cover the moment when one is
 * busy with the task it just took. */
static uint32_t pollers_for_cpus(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	return cpus >= 4 ? 2 : 1;
}

/* Start with a few permits cached, so that a submitter running a task or
 * two ahead of the workers does not go to the bulkhead for each. */
static void prefill_cache(struct bh_pool *p, uint32_t limit)
{
	uint32_t n = limit < CACHE_MAX / 2 ? limit : CACHE_MAX / 2;

	if (bh_try_acquire(p->adm, n) == 0)
		cache_set_locked(p, n); /* nobody else sees p yet */
}

static int prestart(struct bh_pool *p)
{
	int r = 0;

	pool_lock(p);
	while (p->alive < p->core && (r = bhp_start_worker_locked(p, NULL)) == 0)
		;
	pool_unlock(p);
	return r;
}

/* Everything the configuration sets, and every slot spare. */
static void configure(struct bh_pool *p, const struct bh_pool_config *cfg,
		      const struct bhp_ops *ops)
{
	p->ops = ops;
	p->core = cfg->core_threads;
	p->max = cfg->max_threads;
	p->cap = cfg->queue_capacity;
	p->policy = cfg->policy;
	p->keep_alive_ns = cfg->keep_alive_ns;
	p->spin_ns = ops->spin_ns;
	atomic_init(&p->spin_on, true);
	p->max_pollers = pollers_for_cpus();
	p->fork_gen = bhk_fork_watch();
	p->pid = getpid();
	set_name(p, cfg->name);
	for (uint32_t i = p->max; i-- > 0;) {
		p->workers[i].pool = p;
		bhp_workers_add_head(&p->spare, &p->workers[i]);
	}
}

int bhp_create(const struct bh_pool_config *cfg, const struct bhp_ops *ops, bh_pool_t **out)
{
	struct bh_config acfg = { 0 };
	struct bh_pool *p;
	int r;

	if (!cfg || !ops || !ops->sync || !out || !config_valid(cfg))
		return -EINVAL;
	p = pool_alloc(cfg->max_threads);
	if (!p)
		return -ENOMEM;
	r = init_sync(p, cfg->stack_size);
	if (r < 0) {
		bhi_free_aligned(p);
		return r;
	}
	acfg.max_concurrent = cfg->max_threads + cfg->queue_capacity;
	r = bh_create(&acfg, &p->adm);
	if (r < 0) {
		pthread_attr_destroy(&p->attr);
		pthread_mutex_destroy(&p->lock);
		bhi_free_aligned(p);
		return r;
	}
	configure(p, cfg, ops);
	prefill_cache(p, acfg.max_concurrent);
	if ((cfg->flags & BH_POOL_PRESTART) && (r = prestart(p)) < 0) {
		bh_pool_destroy(p);
		return r;
	}
	*out = p;
	return 0;
}

int bh_pool_create(const struct bh_pool_config *cfg, bh_pool_t **out)
{
	return bhp_create(cfg, &bhp_real_ops, out);
}

void bhp_set_spin_ns(bh_pool_t *p, uint64_t ns)
{
	p->spin_ns = ns;
}

/* Under the lock, or in a fork child's copy, which no thread changes. */
static void copy_counters(const struct bh_pool *p, struct bh_pool_stats *out,
			  uint64_t refused_busy)
{
	out->alive = p->alive;
	out->active = p->active;
	out->queued = p->queued;
	out->largest = p->largest;
	out->submitted = p->submitted;
	out->completed = p->completed;
	out->abandoned = p->abandoned;
	out->abandoned_running = p->abandoned_running;
	out->discarded = p->discarded;
	out->caller_ran = p->caller_ran;
	out->rejected = refused_busy + p->policy_took + p->no_thread;
}

/* A fork child's copy is read without its lock, which a parent thread may
 * have held at the fork: what was so then. */
int bh_pool_stats(const bh_pool_t *cp, struct bh_pool_stats *out)
{
	struct bh_pool *p = (struct bh_pool *)cp;
	uint64_t refused_busy;

	if (!p || !out)
		return -EINVAL;
	refused_busy = bhi_rejected(p->adm);
	memset(out, 0, sizeof(*out));
	if (pool_inherited(p)) {
		copy_counters(p, out, refused_busy);
	} else {
		pool_lock(p);
		copy_counters(p, out, refused_busy);
		pool_unlock(p);
	}
	out->core_threads = p->core;
	out->max_threads = p->max;
	out->queue_capacity = p->cap;
	return 0;
}

const char *bh_pool_name(const bh_pool_t *p)
{
	return p ? p->name : NULL;
}

/* ---- sizing -------------------------------------------------------------- */

int bh_pool_size(const struct bh_pool_load *in, struct bh_pool_sizing *out)
{
	double safety, threads, wait_ns;

	if (!in || !out)
		return -EINVAL;
	safety = in->safety == 0 ? 1.3 : in->safety;
	if (!(in->peak_qps > 0) || !isfinite(in->peak_qps) || !(safety >= 1) || !isfinite(safety) ||
	    in->p99_ns == 0)
		return -EINVAL;
	threads = bhi_little_concurrency(in->peak_qps, (double)in->p99_ns / (double)BH_SEC, safety);
	if (!(threads <= BH_POOL_THREADS_MAX))
		return -ERANGE;
	memset(out, 0, sizeof(*out));
	out->max_threads = bhi_size_round_up(threads);
	out->core_threads = out->max_threads / 2 ? out->max_threads / 2 : 1;
	out->queue_capacity = 2 * out->max_threads;
	wait_ns = (double)out->queue_capacity * (double)BH_SEC / in->peak_qps;
	out->queue_wait_ns = wait_ns >= 0x1p63 ? UINT64_MAX : (uint64_t)(wait_ns + 0.5);
	out->fits = in->caller_timeout_ns == 0 || out->queue_wait_ns <= in->caller_timeout_ns;
	return 0;
}

/* For the adaptive controller (src/core/layer.h). */
bulkhead_t *bhi_pool_admission(const bh_pool_t *p, uint32_t *room)
{
	*room = p->max + p->cap;
	return p->adm;
}
