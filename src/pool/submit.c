/* Submission: the admission permit (the cache in pool_internal.h), placement
 * in the executor's order, the four policies for a full pool, and calls
 * that wait with a deadline. docs/pool.md explains it. */
#include <errno.h>
#include <pthread.h>

#include "pool_internal.h"
#include "task.h"

/* ---- permits ------------------------------------------------------------- */

/*
 * Neither permit function counts a refusal: the bulkhead's refusal may be
 * followed by a permit from the cache, or by a second refusal, and the
 * submission's fate is decided later still (a policy, a close). A refusal
 * is counted once, where that fate is decided: reject_full() for -EBUSY,
 * and policy_took under the lock for a task a policy took instead.
 */

/* With an adaptive controller attached the admission limit moves: cached
 * permits the bulkhead is now over its limit by go back to it, so that the
 * new limit bounds what runs. */
BHI_COLD void bhp_cache_fit_locked(struct bh_pool *p)
{
	int64_t over = bhi_over_limit(p->adm);
	uint32_t n;

	if (over <= 0 || !p->cached)
		return;
	n = over < p->cached ? (uint32_t)over : p->cached;
	cache_set_locked(p, p->cached - n);
	bh_release(p->adm, n); /* one CAS: nobody ever waits on adm */
}

/* Under the lock: a permit from the cache, else from the bulkhead. 0,
 * -EBUSY (full) or -ESHUTDOWN. */
static int permit_locked(struct bh_pool *p)
{
	if (BHI_UNLIKELY(bhk_attached(p->adm)))
		bhp_cache_fit_locked(p);
	if (cache_take_locked(p))
		return 0;
	return bhi_try_take(p->adm, 1);
}

/* Before the lock: with nothing cached, take the bulkhead's permit now, so
 * a full pool refuses in one atomic operation. 1: a permit is held; 0: try
 * the cache under the lock; -EBUSY or -ESHUTDOWN. The hint is read again
 * after a refusal: a permit cached meanwhile means there may be room, which
 * the lock then settles (relaxed: a hint; the cache is read under the lock). */
static int permit_fast(struct bh_pool *p)
{
	int r;

	if (atomic_load_explicit(&p->cached_hint, memory_order_relaxed))
		return 0;
	r = bhi_try_take(p->adm, 1);
	if (r == 0)
		return 1;
	if (r == -EBUSY) {
		pool_point(p, BHP_ADMIT_BUSY, NULL);
		if (atomic_load_explicit(&p->cached_hint, memory_order_relaxed))
			return 0;
	}
	return r;
}

/* The pool was full and the caller gets -EBUSY: one rejection, counted
 * without the lock in the admission bulkhead's per-thread slots. */
static int reject_full(struct bh_pool *p)
{
	bhi_count_rejected(p->adm);
	return -EBUSY;
}

/* ---- placement ----------------------------------------------------------- */

/* Under the lock, below core with tasks queued (an earlier thread start
 * failed): the new thread takes the queue's head and t joins the tail, so
 * that tasks still start in the order they came. */
static int start_for_queue_locked(struct bh_pool *p, struct bh_task *t, struct bhp_worker **wake)
{
	struct bhp_worker *w;
	struct bh_task *h;
	int r = bhp_start_worker_locked(p, NULL);

	if (r < 0)
		return r;
	w = bhp_workers_first(&p->sleepers); /* the new one, listed idle */
	h = bhp_tasks_first(&p->queue);
	tq_remove(p, h);
	task_advance(h, T_QUEUED, T_RUNNING);
	p->active++;
	if (hand_off(p, w, h))
		*wake = w;
	task_advance(t, T_IDLE, T_QUEUED);
	tq_append(p, t);
	return 0;
}

/* Under the lock, holding t's permit: the executor's order. Start a thread
 * below core; else hand it to an idle thread (a poller first: no wake) or
 * queue it; else grow to max. The permit guarantees one of them has room
 * (docs/pool.md). A call made from a pool thread's done goes only to an
 * idle thread not in done (its own would wait for itself, two dones for
 * each other); else it runs on the caller, in the slot the caller's
 * finished task freed (*here). Returns 0, or the error of a thread that
 * could not be created. */
static int place_locked(struct bh_pool *p, struct bh_task *t, struct bhp_worker **wake,
			enum bhp_here *here)
{
	struct bhp_worker *self = task_is_call(t) ? bhp_own_worker(p) : NULL, *w;
	/* relaxed: the calling thread's own flag (finish_and_next) */
	bool in_done = self && atomic_load_explicit(&self->reporting, memory_order_relaxed);
	int r = -EBUSY;

	if (p->alive < p->core &&
	    (r = bhp_tasks_empty(&p->queue) ? bhp_start_worker_locked(p, t)
					    : start_for_queue_locked(p, t, wake)) == 0)
		return 0;
	w = idle_pick_for(p, self, in_done);
	if (w || (in_done && self->idle)) { /* an idle worker means an empty queue: FIFO holds */
		task_advance(t, T_IDLE, T_RUNNING);
		p->active++;
		if (!w) {
			bhp_unidle_self_locked(p, self);
			*here = HERE_SLOT;
		} else if (hand_off(p, w, t)) {
			*wake = w; /* after the unlock */
		}
		return 0;
	}
	if (in_done) { /* its thread has a task already: queued, it would wait for itself */
		*here = HERE_CALLER;
		return 0;
	}
	if (p->queued < p->cap && p->alive > 0) {
		task_advance(t, T_IDLE, T_QUEUED);
		tq_append(p, t);
		return 0;
	}
	if (p->alive < p->max)
		r = bhp_start_worker_locked(p, t);
	return r;
}

/* Admit t and place it. -EBUSY: the pool is full, the policy decides. A
 * permit that cannot be used (closing, no thread) goes back to the cache,
 * as does that of a call the caller runs with no slot (HERE_CALLER, counted
 * as run on the caller). *here: whether the caller runs t itself. */
static int admit_task(struct bh_pool *p, struct bh_task *t, enum bhp_here *here)
{
	struct bhp_worker *wake = NULL;
	uint32_t excess = 0;
	int have = permit_fast(p), r;

	if (have < 0)
		return have;
	pool_lock(p);
	r = have ? 0 : permit_locked(p);
	if (r == 0) {
		r = p->closing ? -ESHUTDOWN : place_locked(p, t, &wake, here);
		if (r == 0)
			p->submitted++;
		if (r == 0 && *here == HERE_CALLER)
			p->caller_ran++;
		if (r != 0 || *here == HERE_CALLER) {
			cache_put_locked(p);
			if (BHI_UNLIKELY(bhk_attached(p->adm)))
				bhp_cache_fit_locked(p);
			excess = cache_trim_locked(p);
		}
		if (r < 0 && r != -ESHUTDOWN)
			p->no_thread++; /* counted with the rejections */
	} else if (p->closing) {
		r = -ESHUTDOWN;
	}
	pool_unlock(p);
	if (excess)
		bh_release(p->adm, excess);
	if (wake)
		bhi_sync_wake(p->ops->sync, &wake->park, false);
	return r;
}

/* ---- the policies for a full pool ------------------------------------------ */

/* Under the lock: a policy takes a task the pool was full for. false: the
 * pool is closing and refuses it, as it refuses every task. */
static bool policy_takes_locked(struct bh_pool *p)
{
	if (p->closing)
		return false;
	p->submitted++;
	p->policy_took++;
	return true;
}

/* CALLER_RUNS: the submitting thread runs the task itself, which slows the
 * submitter down to the pool's pace (and stalls an event loop: never there). */
static int run_here(struct bh_pool *p, struct bh_task *t)
{
	bool took;

	pool_lock(p);
	took = policy_takes_locked(p);
	if (took)
		p->caller_ran++;
	pool_unlock(p);
	if (!took)
		return -ESHUTDOWN;
	task_run_here(p, t);
	return 0;
}

/* DISCARD: drop the newcomer, counted, its done frees what it holds. */
static int drop_new(struct bh_pool *p, struct bh_task *t)
{
	bool took;

	pool_lock(p);
	took = policy_takes_locked(p);
	if (took)
		p->discarded++;
	pool_unlock(p);
	if (!took)
		return -ESHUTDOWN;
	if (t->done)
		t->done(t, -ECANCELED);
	return BH_POOL_DISCARDED;
}

/* DISCARD_OLDEST: the newcomer takes the queue slot, and the permit, of the
 * oldest queued task, which is dropped. -ENOENT when nothing is queued. */
static int swap_oldest(struct bh_pool *p, struct bh_task *t)
{
	struct bh_task *old;
	_Atomic uint32_t *wake;
	bool plain;

	pool_lock(p);
	old = p->closing ? NULL : bhp_tasks_first(&p->queue);
	if (!old) {
		int r = p->closing ? -ESHUTDOWN : -ENOENT;

		pool_unlock(p);
		return r;
	}
	tq_remove(p, old);
	plain = !task_is_call(old);
	wake = task_drop_queued_locked(p, old);
	task_advance(t, T_IDLE, T_QUEUED);
	tq_append(p, t);
	policy_takes_locked(p);
	pool_unlock(p);
	if (wake)
		bhi_sync_wake(p->ops->sync, wake, false);
	if (plain && old->done) {
		int cs;

		/* The newcomer is queued: a cancellation acted on in old's
		 * done would unwind bh_pool_submit after it took the task, or
		 * bh_pool_call before its wait (and its cleanup handler), the
		 * call left queued with nobody to report it to. Deferred: the
		 * request stays pending for the next cancellation point (the
		 * call's wait). */
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
		old->done(old, -ECANCELED);
		pthread_setcancelstate(cs, NULL);
	}
	return 0;
}

static int submit_full(struct bh_pool *p, struct bh_task *t)
{
	int r;

	switch (p->policy) {
	case BH_POOL_CALLER_RUNS:
		r = run_here(p, t);
		return r < 0 ? r : BH_POOL_CALLER_RAN;
	case BH_POOL_DISCARD_OLDEST:
		r = swap_oldest(p, t);
		if (r != -ENOENT)
			return r;
		/* nothing queued to drop: the newcomer is the oldest */
		/* fall through */
	case BH_POOL_DISCARD:
		return drop_new(p, t);
	default:
		return reject_full(p);
	}
}

int bh_pool_submit(bh_pool_t *p, struct bh_task *t)
{
	int r;
	enum bhp_here here = HERE_NOT; /* only calls run here */

	if (BHI_UNLIKELY(!p || !t || !t->run))
		return -EINVAL;
	if (pool_inherited(p)) /* a fork child's copy runs nothing: shut down */
		return -ESHUTDOWN;
	task_prepare(p, t, 0);
	r = admit_task(p, t, &here);
	return r == -EBUSY ? submit_full(p, t) : r;
}

/* ---- calls with deadlines ------------------------------------------------- */

struct call_ctx {
	struct bh_pool *pool;
	struct bh_task *task;
};

/* pthread_cancel hit a waiting caller: give up as on a timeout. If the task
 * had already finished (or been dropped) it was the caller's again, and the
 * caller is going away: done gets it so its resources are freed. */
static void call_cancelled(void *arg)
{
	struct call_ctx *c = arg;
	int r = task_give_up(c->pool, c->task);

	if (r != -ETIMEDOUT && c->task->done)
		c->task->done(c->task, r);
}

static int wait_call(struct bh_pool *p, struct bh_task *t, uint64_t deadline)
{
	struct call_ctx c = { p, t };
	int r;

	pthread_cleanup_push(call_cancelled, &c);
	r = task_await(p, t, deadline);
	pthread_cleanup_pop(0);
	return r;
}

/* The deadline had passed before the call began: the caller has given up
 * before anything ran. Reported like any abandoned task that never started,
 * unless the pool is shut down: that outranks the deadline, as it does in
 * the core (bulkhead(7), the order of errors). */
static int give_up_early(struct bh_pool *p, struct bh_task *t)
{
	bool closing;

	pool_lock(p);
	closing = p->closing;
	if (!closing) {
		p->submitted++;
		p->abandoned++;
	}
	pool_unlock(p);
	if (closing)
		return -ESHUTDOWN;
	if (t->done)
		t->done(t, -ECANCELED);
	return -ETIMEDOUT;
}

/* A waiting caller is told directly: under ABORT and DISCARD a call fails
 * with -EBUSY rather than being dropped behind its back. A call from a
 * pool thread's done is not queued by DISCARD_OLDEST either: behind that
 * very thread, it would wait for itself; it runs on its caller. */
static int call_full(struct bh_pool *p, struct bh_task *t, uint64_t deadline)
{
	struct bhp_worker *self = bhp_own_worker(p);
	int r;

	/* relaxed: the calling thread's own flag (finish_and_next) */
	if (p->policy == BH_POOL_DISCARD_OLDEST && self &&
	    atomic_load_explicit(&self->reporting, memory_order_relaxed))
		return run_here(p, t);
	switch (p->policy) {
	case BH_POOL_CALLER_RUNS:
		return run_here(p, t);
	case BH_POOL_DISCARD_OLDEST:
		r = swap_oldest(p, t);
		if (r == 0)
			return wait_call(p, t, deadline);
		return r == -ENOENT ? reject_full(p) : r;
	default:
		return reject_full(p);
	}
}

/* A call placed on its caller (place_locked): run it here, in the slot the
 * caller's own finished task freed, and finish it as its worker would,
 * the worker then going back where its own finish put it. If run forked,
 * the child returns 0 (run has returned) without the lock: its done then
 * returns into the worker loop, which leaves (worker.c). */
static int call_here(struct bh_pool *p, struct bh_task *t)
{
	struct bhp_worker *self = bhp_own_worker(p);
	struct bhp_ran r;
	uint32_t excess;

	if (!task_run(p, t, &r))
		return 0;
	pool_lock(p);
	task_finish_locked(p, t, &r); /* nobody waits: never abandoned */
	bhp_reidle_self_locked(p, self);
	cache_put_locked(p);
	if (BHI_UNLIKELY(bhk_attached(p->adm)))
		bhp_cache_fit_locked(p);
	excess = cache_trim_locked(p);
	pool_unlock(p);
	if (excess)
		bh_release(p->adm, excess);
	return 0;
}

int bh_pool_call(bh_pool_t *p, struct bh_task *t, uint64_t deadline_ns)
{
	enum bhp_here here = HERE_NOT;
	int r;

	if (!p || !t || !t->run)
		return -EINVAL;
	if (pool_inherited(p)) /* as in bh_pool_submit; outranks the deadline */
		return -ESHUTDOWN;
	task_prepare(p, t, TF_CALL);
	if (deadline_ns <= pool_now(p))
		return give_up_early(p, t);
	r = admit_task(p, t, &here);
	if (r == -EBUSY)
		return call_full(p, t, deadline_ns);
	if (r < 0)
		return r;
	if (here == HERE_CALLER) {
		task_run_here(p, t);
		return 0;
	}
	return here == HERE_SLOT ? call_here(p, t) : wait_call(p, t, deadline_ns);
}

/* In a fork child made from run, nobody waits for the child's copy of the
 * task: its caller, its done and the pool's threads are the parent's. */
bool bh_task_cancelled(const struct bh_task *t)
{
	const struct bh_pool *p;

	if (!t)
		return false;
	p = t->priv.pool;
	/* relaxed: a flag polled by run, publishing nothing */
	return task_abandoned(t) ||
	       (p && (atomic_load_explicit(&((struct bh_pool *)p)->stop_now,
					   memory_order_relaxed) ||
		      pool_inherited(p)));
}
