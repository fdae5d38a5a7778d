/* The pool's workers: starting and joining threads, the worker loop, and
 * the park word's worker side (polling, sleeping, keep-alive); hand_off()
 * in pool_internal.h is its submitter side. docs/pool.md explains it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np */
#endif
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>

#include "pool_internal.h"
#include "task.h"

/* The pool worker running on this thread, if any. */
static __thread struct bhp_worker *bhp_self;

bool bhp_on_own_thread(const struct bh_pool *p)
{
	return bhp_self && bhp_self->pool == p;
}

struct bhp_worker *bhp_own_worker(const struct bh_pool *p)
{
	return bhp_on_own_thread(p) ? bhp_self : NULL;
}

/* ---- going idle, leaving ---------------------------------------------------- */

/* The worker goes idle: it polls if polling pays, the pool has fewer than
 * max_pollers polling and a CPU is free for it (lib/spin.h: asked last, as
 * it counts the worker as a spinner until end_spin), else it will sleep
 * (and, above core, may wait only keep_alive). The deadlines themselves are
 * read from the clock by the worker after the unlock: no clock read inside
 * a critical section. */
static void idle_push_locked(struct bh_pool *p, struct bhp_worker *w)
{
	bool poll = p->spin_ns && p->npollers < p->max_pollers &&
		    atomic_load_explicit(&p->spin_on, memory_order_relaxed) && bhi_spin_begin();

	w->spinner = poll;
	w->idle = true;
	w->above_core = p->alive > p->core;
	if (poll) {
		bhp_workers_add_head(&p->pollers, w);
		p->npollers++;
	} else {
		bhp_workers_add_head(&p->sleepers, w);
	}
	atomic_store_explicit(&w->park, poll ? P_POLL : P_IDLE, memory_order_relaxed);
}

static struct bh_task *dequeue_locked(struct bh_pool *p)
{
	struct bh_task *t = bhp_tasks_first(&p->queue);

	tq_remove(p, t);
	task_advance(t, T_QUEUED, T_RUNNING);
	p->active++;
	return t;
}

/* The worker is gone from the pool's point of view; its thread is joined
 * when the slot is reused or at shutdown. */
static void leave_locked(struct bh_pool *p, struct bhp_worker *w)
{
	p->alive--;
	w->slot = S_ZOMBIE;
	bhp_workers_add_head(&p->spare, w);
}

/* Under the lock: send every idle worker away (the queue is empty whenever
 * one is idle). They are counted out now; their threads are joined later. */
void bhp_dismiss_idle_locked(struct bh_pool *p)
{
	struct bhp_worker *w;

	while ((w = idle_pick(p)) != NULL) {
		bool sleeps = hand_off(p, w, NULL);

		leave_locked(p, w);
		if (sleeps) /* rare: shutdown only */
			bhi_sync_wake(p->ops->sync, &w->park, false);
	}
}

/* ---- threads --------------------------------------------------------------- */

static void *worker_main(void *arg);

/* "pay" and thread 12 make "pay-12": the prefix is cut, never the number. */
static void name_thread(const struct bh_pool *p, uint32_t num)
{
	char digits[12], name[16];
	size_t nd = 0, keep, i;

	do {
		digits[nd++] = (char)('0' + num % 10);
		num /= 10;
	} while (num);
	keep = strlen(p->name);
	if (keep > 15 - 1 - nd)
		keep = 15 - 1 - nd;
	memcpy(name, p->name, keep);
	name[keep] = '-';
	for (i = 0; i < nd; i++)
		name[keep + 1 + i] = digits[nd - 1 - i];
	name[keep + 1 + nd] = '\0';
	pthread_setname_np(pthread_self(), name);
}

/* Take a spare slot and set up what its thread reads at start, before the
 * thread exists. A thread started without a task is listed idle at once
 * (by the caller), so no submitter ever sees a thread that is neither busy
 * nor idle. */
static struct bhp_worker *slot_take_locked(struct bh_pool *p, struct bh_task *t)
{
	struct bhp_worker *w = bhp_workers_first(&p->spare);

	bhp_workers_del(&p->spare, w);
	if (w->slot == S_ZOMBIE) { /* it has left; its exit takes microseconds */
		int cs;

		/* pthread_join is a cancellation point: acted on here, a
		 * request would unwind the submitter with the lock held */
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
		pthread_join(w->tid, NULL);
		pthread_setcancelstate(cs, NULL);
	}
	w->slot = S_LIVE;
	w->task = t;
	w->idle = false;
	w->start_idle = !t;
	w->above_core = false; /* started below core (PRESTART) or with a task */
	w->spinner = false;
	w->num = ++p->nthreads;
	atomic_store_explicit(&w->park, t ? P_BUSY : P_IDLE, memory_order_relaxed);
	return w;
}

/* Start a thread for t (NULL: it goes idle). Under the lock: thread creation
 * is rare (at most max_threads per keep-alive period) and keeping it inside
 * lets nobody see a thread counted that does not exist. Pool threads block
 * every signal, so process signals go to threads that expect them. */
int bhp_start_worker_locked(struct bh_pool *p, struct bh_task *t)
{
	struct bhp_worker *w = slot_take_locked(p, t);
	sigset_t all, old;
	int r;

	if (t)
		task_advance(t, T_IDLE, T_RUNNING);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = p->ops->create(p->ops->ctx, &w->tid, &p->attr, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		if (t)
			task_unstart(t);
		w->slot = S_FREE;
		bhp_workers_add_head(&p->spare, w);
		return r;
	}
	p->alive++;
	if (p->alive > p->largest)
		p->largest = p->alive;
	if (t) {
		p->active++;
	} else {
		bhp_workers_add_head(&p->sleepers, w);
		w->idle = true;
	}
	return 0;
}

/* Join every thread that has left. Only after closing: no start reuses a
 * slot meanwhile. */
void bhp_join_exited(struct bh_pool *p)
{
	for (uint32_t i = 0; i < p->max; i++) {
		struct bhp_worker *w = &p->workers[i];
		bool zombie;

		pool_lock(p);
		zombie = w->slot == S_ZOMBIE;
		if (zombie)
			w->slot = S_FREE;
		pool_unlock(p);
		if (zombie)
			pthread_join(w->tid, NULL);
	}
}

static void signal_exit(struct bh_pool *p)
{
	/* release: a drainer that reads this count (acquire) sees this
	 * thread's reporting cleared; alive it reads under the lock */
	atomic_fetch_add_explicit(&p->exits, 1, memory_order_release);
	bhi_sync_wake(p->ops->sync, &p->exits, true);
}

/* ---- polling -------------------------------------------------------------- */

/* Idle workers poll, up to max_pollers at a time, when tasks come back to
 * back: a task handed to a poller is taken with no syscall on either side.
 * A poller pauses briefly, then polls with sched_yield until spin_ns is up:
 * a yielding poller gives its CPU to whoever shares it (often the
 * submitter) instead of competing with it.
 *
 * Polling only pays when tasks arrive within spin_ns of a worker going
 * idle; when they do not, it wastes CPU and, worse, makes the scheduler
 * treat the worker as a CPU hog, so its wake-ups lose their preemption. So
 * the pool learns: a poll that times out turns polling off; a sleeper that
 * was handed a task sooner than spin_ns after it fell asleep turns it on. */
#define POLL_PAUSES 64

/* true: handed a task (or dismissed): P_GO. Relaxed: a hint; park() reads
 * the word again with acquire. */
static bool poll_work(struct bh_pool *p, struct bhp_worker *w)
{
	uint64_t end = deadline_after(pool_now(p), p->spin_ns);

	pool_point(p, BHP_POLL_START, NULL);
	for (uint32_t i = 0;; i++) {
		if (atomic_load_explicit(&w->park, memory_order_relaxed) != P_POLL)
			return true;
		if (i < POLL_PAUSES) {
			bhi_cpu_relax();
			continue;
		}
		if (i % 8 == 0 && pool_now(p) >= end)
			return false;
		sched_yield();
	}
}

/* The poll window passed: join the sleepers, under the lock, so that a
 * submitter handing this worker a task sees it either still polling or
 * already a sleeper (and wakes it). */
static void stop_polling(struct bh_pool *p, struct bhp_worker *w)
{
	atomic_store_explicit(&p->spin_on, false, memory_order_relaxed);
	pool_lock(p);
	if (atomic_load_explicit(&w->park, memory_order_relaxed) == P_POLL) {
		unpoll(p, w);
		bhp_workers_add_head(&p->sleepers, w);
		atomic_store_explicit(&w->park, P_IDLE, memory_order_relaxed);
	}
	pool_unlock(p);
}

/* The poll phase is over, whichever way it ended (a task handed over before
 * it began included): the worker no longer counts as a spinner. */
static void end_spin(struct bhp_worker *w)
{
	if (w->spinner) {
		w->spinner = false;
		bhi_spin_end();
	}
}

/* Handed a task after sleeping: had it come within spin_ns, polling would
 * have caught it without the wake-up. */
static void poll_learn(struct bh_pool *p, uint64_t slept_at)
{
	if (slept_at && pool_now(p) - slept_at < p->spin_ns)
		atomic_store_explicit(&p->spin_on, true, memory_order_relaxed);
}

/* ---- parking and keep-alive --------------------------------------------- */

/* The keep-alive wait timed out. Leave when the pool has more than core
 * threads (or is closing), unless a task was handed over meanwhile; the
 * decision and alive-- share one critical section, so exactly alive - core
 * threads leave. Returns false when the worker left. */
static bool keep_alive_expired(struct bh_pool *p, struct bhp_worker *w)
{
	bool stay = true;

	pool_point(p, BHP_PARK_TIMEOUT, NULL);
	pool_lock(p);
	if (w->idle) {
		if (p->alive > p->core || p->closing) {
			bhp_workers_del(&p->sleepers, w);
			w->idle = false;
			leave_locked(p, w);
			stay = false;
		} else {
			w->above_core = false; /* a core thread now: no more keep-alive */
		}
	}
	pool_unlock(p);
	return stay;
}

/* A thread above core sleeps at most keep_alive_ns, counted from when it
 * fell asleep. above_core is the worker's own (written in its critical
 * sections, or before it existed). */
static uint64_t keep_until(const struct bh_pool *p, const struct bhp_worker *w, uint64_t slept_at)
{
	return w->above_core ? deadline_after(slept_at, p->keep_alive_ns) : BH_FOREVER;
}

/* Idle: poll a little, then sleep on the park word until handed a task or
 * dismissed, or the keep-alive passes. NULL: the worker has left. */
static struct bh_task *park(struct bh_pool *p, struct bhp_worker *w)
{
	uint64_t slept_at = 0;
	int r;

	for (;;) {
		uint32_t s;

		if (atomic_load_explicit(&w->park, memory_order_relaxed) == P_POLL &&
		    !poll_work(p, w))
			stop_polling(p, w);
		end_spin(w);
		/* acquire: pairs with hand_off()'s exchange, w->task is visible */
		s = atomic_load_explicit(&w->park, memory_order_acquire);
		if (s == P_GO) {
			atomic_store_explicit(&w->park, P_BUSY, memory_order_relaxed);
			poll_learn(p, slept_at);
			return w->task;
		}
		/* acq_rel pairs with hand_off()'s exchange: P_GO fails the CAS
		 * (acquire: w->task), else the exchange sees P_SLEEP and wakes */
		if (s == P_IDLE &&
		    !atomic_compare_exchange_strong_explicit(&w->park, &s, P_SLEEP, memory_order_acq_rel,
							     memory_order_acquire))
			continue;
		if (!slept_at && (p->spin_ns || w->above_core))
			slept_at = pool_now(p);
		/* acquire after a timeout: pairs with hand_off()'s exchange */
		r = bhi_sync_wait(p->ops->sync, BHI_WAIT_PARK, &w->park, P_SLEEP,
				  keep_until(p, w, slept_at));
		if (r == -ETIMEDOUT &&
		    atomic_load_explicit(&w->park, memory_order_acquire) != P_GO &&
		    !keep_alive_expired(p, w))
			return NULL;
	}
}

/* ---- the worker loop -------------------------------------------------------- */

/* Under the lock: the next queued task, or go idle, or (closing, nothing
 * queued) leave. A worker goes idle only when nothing is queued, and a task
 * is queued only when no worker is idle: no task waits while a thread
 * idles. */
static struct bh_task *next_locked(struct bh_pool *p, struct bhp_worker *w, bool *idle)
{
	struct bh_task *t = NULL;

	*idle = false;
	if (!bhp_tasks_empty(&p->queue)) {
		t = dequeue_locked(p);
	} else if (p->closing) {
		leave_locked(p, w);
	} else {
		idle_push_locked(p, w);
		*idle = true;
	}
	return t;
}

/* Report t, which has run, and take the next task (NULL: go idle if *idle,
 * else leave). The finished task's permit is cached in the critical section
 * that made its room (an idle worker or a queue slot), so whoever gets the
 * permit finds the room (docs/pool.md). */
static struct bh_task *finish_and_next(struct bh_pool *p, struct bhp_worker *w,
				       struct bh_task *t, struct bhp_ran *r, bool *idle)
{
	struct bh_task *next;
	uint32_t excess;
	bool user;

	pool_lock(p);
	task_finish_locked(p, t, r);
	/* done is user code: a drain must not count this thread as one that
	 * only has to exit until it returns (relaxed: read under the lock) */
	user = r->done && (!r->call || (r->flags & TF_ABANDONED));
	if (user)
		atomic_store_explicit(&w->reporting, true, memory_order_relaxed);
	next = next_locked(p, w, idle);
	cache_put_locked(p);
	if (BHI_UNLIKELY(bhk_attached(p->adm)))
		bhp_cache_fit_locked(p);
	excess = cache_trim_locked(p);
	pool_unlock(p);
	task_report(p, t, r);
	/* relaxed: ordered before this thread's exit by signal_exit's release */
	if (user)
		atomic_store_explicit(&w->reporting, false, memory_order_relaxed);
	if (excess)
		bh_release(p->adm, excess);
	return next;
}

void bhp_unidle_self_locked(struct bh_pool *p, struct bhp_worker *w)
{
	if (atomic_load_explicit(&w->park, memory_order_relaxed) == P_POLL)
		unpoll(p, w);
	else
		bhp_workers_del(&p->sleepers, w);
	w->idle = false;
	end_spin(w);
	atomic_store_explicit(&w->park, P_BUSY, memory_order_relaxed);
}

/* The worker's park() runs after done returns, on this same thread: it
 * finds P_GO (the next task, or none: leave) or the idle state that
 * next_locked set. Relaxed: nobody else touches an unlisted worker. */
void bhp_reidle_self_locked(struct bh_pool *p, struct bhp_worker *w)
{
	bool idle;
	struct bh_task *t = next_locked(p, w, &idle);

	if (!idle) {
		w->task = t;
		atomic_store_explicit(&w->park, P_GO, memory_order_relaxed);
	}
}

/*
 * A task's run or done that forks makes a child whose one thread is a copy
 * of this one, back in this loop when run or done returns. The pool there
 * is a copy (pool_inherited) whose lock may be held for good, and the task
 * just run and the next one taken for this thread belong to the parent,
 * whose copy of this thread reports and runs them. So the child's thread
 * leaves as soon as the user code returns, taking no lock and no task;
 * being the child's only thread, it ends the child as exit(0) would
 * (docs/pool.md, "In a fork child").
 */
static void *worker_main(void *arg)
{
	struct bhp_worker *w = arg;
	struct bh_pool *p = w->pool;
	struct bh_task *t;
	bool idle;

	bhp_self = w;
	/* A worker belongs to the pool: a stray pthread_cancel must not kill it
	 * mid-task, and its parking waits then skip the cancellation window. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	name_thread(p, w->num);
	/* Listed idle from the start: w->task belongs to hand_off() until P_GO. */
	t = w->start_idle ? park(p, w) : w->task;
	while (t) {
		struct bhp_ran r;

		if (!task_run(p, t, &r))
			return NULL; /* run forked: this is the child */
		t = finish_and_next(p, w, t, &r, &idle);
		if (pool_inherited(p))
			return NULL; /* done forked: t is the parent's */
		if (!t && idle)
			t = park(p, w);
	}
	pool_point(p, BHP_WORKER_EXIT, NULL);
	signal_exit(p);
	return NULL;
}
