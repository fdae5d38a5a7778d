/* Thread pools on top of the core limiter. docs/pool.md explains the
 * protocol: admission, placement, hand-off, the task state word, and why
 * every task is reported exactly once. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np */
#endif
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pool_internal.h"
#include "core/sample_hook.h"
#include "lib/compiler.h"

/* The pool worker running on this thread, if any. */
static __thread struct bhp_worker *bhp_self;

/* ---- real wait/wake/clock/create ---------------------------------------- */

/* The core's futex wait: absolute CLOCK_MONOTONIC deadline, errno kept,
 * and cancellable (bh_pool_call is a cancellation point). */
static int real_wait(void *ctx, enum bhp_wait_kind kind, _Atomic uint32_t *word,
		     uint32_t expect, uint64_t deadline_ns)
{
	(void)kind;
	return bhi_futex_ops.wait(ctx, word, expect, deadline_ns);
}

static void real_wake(void *ctx, _Atomic uint32_t *word, bool all)
{
	int saved = errno;

	(void)ctx;
	syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, all ? INT_MAX : 1);
	errno = saved;
}

static uint64_t real_now(void *ctx)
{
	(void)ctx;
	return bh_now_ns();
}

static int real_create(void *ctx, pthread_t *tid, const pthread_attr_t *attr,
		       void *(*fn)(void *), void *arg)
{
	int saved = errno, r;

	(void)ctx;
	r = pthread_create(tid, attr, fn, arg);
	errno = saved;
	return -r;
}

const struct bhp_ops bhp_real_ops = {
	.wait = real_wait,
	.wake = real_wake,
	.now = real_now,
	.create = real_create,
};

static void point(const struct bh_pool *p, enum bhp_point where, struct bh_task *t)
{
	if (p->ops->point)
		p->ops->point(p->ops->ctx, where, t);
}

/* ---- the task's state word ----------------------------------------------- */

/* bh_task_private.state is a plain uint32_t so that the public header stays
 * valid C++; an _Atomic uint32_t has the same size and alignment. */
_Static_assert(sizeof(_Atomic uint32_t) == sizeof(uint32_t) &&
		       _Alignof(_Atomic uint32_t) == _Alignof(uint32_t),
	       "the task state word must be usable as an atomic");

static inline _Atomic uint32_t *tstate(const struct bh_task *t)
{
	return (_Atomic uint32_t *)&((struct bh_task *)t)->priv.state;
}

static inline uint32_t phase(uint32_t s)
{
	return s & T_PHASE;
}

/* Move a call to a later phase; the flags ride along (its caller may set
 * TF_SLEEPING meanwhile, hence the read-modify-write). Relaxed: these moves
 * happen under the pool lock and publish nothing to the caller (T_DONE and
 * T_DROPPED, which do, are published with acq_rel elsewhere). A plain task's
 * phase is read by nobody: it is not kept, which saves two locked
 * instructions per task. */
static inline void advance(struct bh_task *t, enum bhp_phase from, enum bhp_phase to)
{
	if (atomic_load_explicit(tstate(t), memory_order_relaxed) & TF_CALL)
		atomic_fetch_add_explicit(tstate(t), (uint32_t)(to - from), memory_order_relaxed);
}

static void prepare(struct bh_pool *p, struct bh_task *t, uint32_t flags)
{
	t->priv.next = t->priv.prev = NULL;
	t->priv.pool = p;
	atomic_store_explicit(tstate(t), T_IDLE | flags, memory_order_relaxed);
}

static inline bool is_call(const struct bh_task *t)
{
	return atomic_load_explicit(tstate(t), memory_order_relaxed) & TF_CALL;
}

/* ---- lists (under the pool lock) ------------------------------------------ */

static void lock(struct bh_pool *p)
{
	pthread_mutex_lock(&p->lock);
}

static void unlock(struct bh_pool *p)
{
	pthread_mutex_unlock(&p->lock);
}

static void q_append(struct bh_pool *p, struct bh_task *t)
{
	t->priv.next = NULL;
	t->priv.prev = p->qtail;
	if (p->qtail)
		p->qtail->priv.next = t;
	else
		p->qhead = t;
	p->qtail = t;
	p->queued++;
}

static void q_remove(struct bh_pool *p, struct bh_task *t)
{
	if (t->priv.prev)
		t->priv.prev->priv.next = t->priv.next;
	else
		p->qhead = t->priv.next;
	if (t->priv.next)
		t->priv.next->priv.prev = t->priv.prev;
	else
		p->qtail = t->priv.prev;
	t->priv.next = t->priv.prev = NULL;
	p->queued--;
}

static void w_push(struct bhp_worker **head, struct bhp_worker *w)
{
	w->prev = NULL;
	w->next = *head;
	if (*head)
		(*head)->prev = w;
	*head = w;
}

static void w_remove(struct bhp_worker **head, struct bhp_worker *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		*head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->next = w->prev = NULL;
}

static uint64_t deadline_after(uint64_t now, uint64_t ns)
{
	return ns >= BH_FOREVER - now ? BH_FOREVER : now + ns;
}

/* The worker goes idle: it polls if polling pays and the pool has fewer than
 * max_pollers polling, else it will sleep (and, above core, may wait only
 * keep_alive). The deadlines themselves are read from the clock by the
 * worker after the unlock: no clock read inside a critical section. */
static void idle_push(struct bh_pool *p, struct bhp_worker *w)
{
	bool poll = p->spin_ns && p->npollers < p->max_pollers &&
		    atomic_load_explicit(&p->spin_on, memory_order_relaxed);

	w->idle = true;
	w->above_core = p->alive > p->core;
	if (poll) {
		w_push(&p->pollers, w);
		p->npollers++;
	} else {
		w_push(&p->sleepers, w);
	}
	atomic_store_explicit(&w->park, poll ? P_POLL : P_IDLE, memory_order_relaxed);
}

/* A poller stops polling (it goes to sleep, or takes a task). */
static void unpoll(struct bh_pool *p, struct bhp_worker *w)
{
	w_remove(&p->pollers, w);
	p->npollers--;
}

/* A polling worker takes a task without a syscall on either side; else the
 * most recently idle sleeper, whose cache is warm (the coldest time out). */
static struct bhp_worker *idle_pick(struct bh_pool *p)
{
	return p->pollers ? p->pollers : p->sleepers;
}

/* Take w off its list and give it t (NULL: leave). Under the lock, so a
 * worker whose keep-alive expires, or a poller that stops, sees either P_GO
 * or itself still listed. The exchange releases w->task to the worker's
 * acquire load and says whether the worker sleeps, i.e. needs a wake. */
static bool hand(struct bh_pool *p, struct bhp_worker *w, struct bh_task *t)
{
	if (atomic_load_explicit(&w->park, memory_order_relaxed) == P_POLL)
		unpoll(p, w);
	else
		w_remove(&p->sleepers, w);
	w->idle = false;
	w->task = t;
	return atomic_exchange_explicit(&w->park, P_GO, memory_order_acq_rel) == P_SLEEP;
}

static void enqueue(struct bh_pool *p, struct bh_task *t)
{
	advance(t, T_IDLE, T_QUEUED);
	q_append(p, t);
}

static struct bh_task *dequeue(struct bh_pool *p)
{
	struct bh_task *t = p->qhead;

	q_remove(p, t);
	advance(t, T_QUEUED, T_RUNNING);
	p->active++;
	return t;
}

/* The worker is gone from the pool's point of view; its thread is joined
 * when the slot is reused or at shutdown. */
static void leave_locked(struct bh_pool *p, struct bhp_worker *w)
{
	p->alive--;
	w->slot = S_ZOMBIE;
	w_push(&p->spare, w);
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

/* Start a thread for t (NULL: it goes idle). Under the lock: thread creation
 * is rare (at most max_threads per keep-alive period) and keeping it inside
 * lets nobody see a thread counted that does not exist. Pool threads block
 * every signal, so process signals go to threads that expect them. */
static int spawn(struct bh_pool *p, struct bh_task *t)
{
	struct bhp_worker *w = p->spare;
	sigset_t all, old;
	int r;

	w_remove(&p->spare, w);
	if (w->slot == S_ZOMBIE) /* it has left; its exit takes microseconds */
		pthread_join(w->tid, NULL);
	/* What the thread reads at start is written before it exists. A
	 * thread started without a task is listed idle at once (below), so
	 * no submitter ever sees a thread that is neither busy nor idle. */
	w->slot = S_LIVE;
	w->task = t;
	w->idle = false;
	w->start_idle = !t;
	w->above_core = false; /* started below core (PRESTART) or with a task */
	w->num = ++p->nthreads;
	atomic_store_explicit(&w->park, t ? P_BUSY : P_IDLE, memory_order_relaxed);
	if (t)
		advance(t, T_IDLE, T_RUNNING);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = p->ops->create(p->ops->ctx, &w->tid, &p->attr, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		if (t && is_call(t))
			atomic_fetch_sub_explicit(tstate(t), T_RUNNING - T_IDLE, memory_order_relaxed);
		w->slot = S_FREE;
		w_push(&p->spare, w);
		return r;
	}
	p->alive++;
	if (p->alive > p->largest)
		p->largest = p->alive;
	if (t) {
		p->active++;
	} else {
		w_push(&p->sleepers, w);
		w->idle = true;
	}
	return 0;
}

/* Join every thread that has left. Only after closing: no spawn reuses a
 * slot meanwhile. */
static void reap(struct bh_pool *p)
{
	for (uint32_t i = 0; i < p->max; i++) {
		struct bhp_worker *w = &p->workers[i];
		bool zombie;

		lock(p);
		zombie = w->slot == S_ZOMBIE;
		if (zombie)
			w->slot = S_FREE;
		unlock(p);
		if (zombie)
			pthread_join(w->tid, NULL);
	}
}

static void signal_exit(struct bh_pool *p)
{
	/* release: a drainer that reads the new count also sees alive drop
	 * (it re-reads alive under the lock anyway) */
	atomic_fetch_add_explicit(&p->exits, 1, memory_order_release);
	p->ops->wake(p->ops->ctx, &p->exits, true);
}

/* ---- permits ------------------------------------------------------------- */

/*
 * Every admitted task holds one of the admission bulkhead's permits. Taking
 * and returning one per task would cost a cross-core cache-line transfer of
 * the bulkhead's word on each side (a quarter of the tiny-task throughput,
 * measured), so the pool keeps the permits of finished tasks in a small
 * cache under its lock, which the submitter and the worker hold anyway:
 * a worker puts its permit there in the critical section that makes room,
 * a submitter takes one from there in the critical section that places its
 * task. The bulkhead still bounds every permit, cached or held; it counts
 * at most CACHE_MAX more than the pool holds, and the pool's own counters
 * stay exact. A full bulkhead with an empty cache refuses without the lock.
 */
#define CACHE_MAX 32

static void cache_put_locked(struct bh_pool *p)
{
	p->cached++;
	atomic_store_explicit(&p->cached_hint, p->cached, memory_order_relaxed);
}

static bool cache_take_locked(struct bh_pool *p)
{
	if (!p->cached)
		return false;
	p->cached--;
	atomic_store_explicit(&p->cached_hint, p->cached, memory_order_relaxed);
	return true;
}

/* Permits above CACHE_MAX go back to the bulkhead (after the unlock). */
static uint32_t cache_trim_locked(struct bh_pool *p)
{
	uint32_t n = 0;

	if (p->cached > CACHE_MAX) {
		n = p->cached - CACHE_MAX / 2;
		p->cached -= n;
		atomic_store_explicit(&p->cached_hint, p->cached, memory_order_relaxed);
	}
	return n;
}

/*
 * Neither permit function counts a refusal: the bulkhead's refusal may be
 * followed by a permit from the cache, or by a second refusal, and the
 * submission's fate is decided later still (a policy, a close). A refusal
 * is counted once, where that fate is decided: refused() for -EBUSY, and
 * policy_took under the lock for a task a policy took instead.
 */
/* With an adaptive controller attached the admission limit moves: cached
 * permits the bulkhead is now over its limit by go back to it, so that the
 * new limit bounds what runs. */
static BHI_COLD void cache_fit_locked(struct bh_pool *p)
{
	int64_t over = -w_avail(atomic_load_explicit(&p->adm->word, memory_order_relaxed));
	uint32_t n;

	if (over <= 0 || !p->cached)
		return;
	n = over < p->cached ? (uint32_t)over : p->cached;
	p->cached -= n;
	atomic_store_explicit(&p->cached_hint, p->cached, memory_order_relaxed);
	bh_release(p->adm, n); /* one CAS: nobody ever waits on adm */
}

/* Under the lock: a permit from the cache, else from the bulkhead. 0,
 * -EBUSY (full) or -ESHUTDOWN. */
static int permit_locked(struct bh_pool *p)
{
	if (BHI_UNLIKELY(bhk_attached(p->adm)))
		cache_fit_locked(p);
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
		point(p, BHP_ADMIT_BUSY, NULL);
		if (atomic_load_explicit(&p->cached_hint, memory_order_relaxed))
			return 0;
	}
	return r;
}

/* The pool was full and the caller gets -EBUSY: one rejection, counted
 * without the lock in the admission bulkhead's per-thread slots. */
static int refused(struct bh_pool *p)
{
	bhi_count(p->adm, BHI_REJECTED);
	return -EBUSY;
}

/* ---- running a task -------------------------------------------------------- */

/* What the worker keeps of a task once run returns: a plain task without
 * done may have freed itself, so it is not touched again. */
struct ran {
	bh_task_done_fn *done;
	uint32_t flags; /* a call's state flags when T_DONE was published */
	bool call;
};

/* When an adaptive controller listens to the admission bulkhead, a task's
 * run time is its latency sample (0: nobody listens, no clock read). */
static inline uint64_t sample_start(struct bh_pool *p)
{
	return BHI_UNLIKELY(bhk_attached(p->adm)) ? p->ops->now(p->ops->ctx) : 0;
}

static BHI_COLD void sample_run(struct bh_pool *p, uint64_t t0)
{
	bhk_emit(p->adm, BHK_POOL, p->ops->now(p->ops->ctx) - t0, BHK_OK);
}

static void run_task(struct bh_pool *p, struct bh_task *t, struct ran *r)
{
	uint64_t t0 = sample_start(p);

	r->done = t->done;
	r->call = is_call(t);
	t->run(t);
	if (BHI_UNLIKELY(t0))
		sample_run(p, t0);
	point(p, BHP_AFTER_RUN, t);
}

/* Under the lock: the task is over; it counts as completed or abandoned in
 * the same critical section, so a caller released by T_DONE, or a done
 * callback, always finds itself counted. A call publishes T_DONE: acq_rel,
 * release pairing with the caller's acquire load (it sees what run wrote),
 * acquire with its TF_ABANDONED CAS. Exactly one of the two lands first. */
static void finish_locked(struct bh_pool *p, struct bh_task *t, struct ran *r)
{
	p->active--;
	if (r->call) {
		r->flags = atomic_fetch_add_explicit(tstate(t), T_DONE - T_RUNNING,
						     memory_order_acq_rel);
		if (r->flags & TF_ABANDONED) {
			p->abandoned_running--;
			return;
		}
	}
	p->completed++;
}

/* After the unlock: report the task. A caller that gave up left it to done;
 * a sleeping caller is woken, by address only: once T_DONE is out it may
 * have returned and freed the task, and a wake on a reused address is a
 * spurious wake for its new owner. */
static void report(struct bh_pool *p, struct bh_task *t, const struct ran *r)
{
	if (!r->call) {
		if (r->done)
			r->done(t, 0);
	} else if (r->flags & TF_ABANDONED) {
		if (r->done)
			r->done(t, -ETIMEDOUT);
	} else if (r->flags & TF_SLEEPING) {
		p->ops->wake(p->ops->ctx, tstate(t), false);
	}
}

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
	uint64_t end = deadline_after(p->ops->now(p->ops->ctx), p->spin_ns);

	point(p, BHP_POLL_START, NULL);
	for (uint32_t i = 0;; i++) {
		if (atomic_load_explicit(&w->park, memory_order_relaxed) != P_POLL)
			return true;
		if (i < POLL_PAUSES) {
			bhi_cpu_relax();
			continue;
		}
		if (i % 8 == 0 && p->ops->now(p->ops->ctx) >= end)
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
	lock(p);
	if (atomic_load_explicit(&w->park, memory_order_relaxed) == P_POLL) {
		unpoll(p, w);
		w_push(&p->sleepers, w);
		atomic_store_explicit(&w->park, P_IDLE, memory_order_relaxed);
	}
	unlock(p);
}

/* Handed a task after sleeping: had it come within spin_ns, polling would
 * have caught it without the wake-up. */
static void learn(struct bh_pool *p, uint64_t slept_at)
{
	if (slept_at && p->ops->now(p->ops->ctx) - slept_at < p->spin_ns)
		atomic_store_explicit(&p->spin_on, true, memory_order_relaxed);
}

/* The keep-alive wait timed out. Leave when the pool has more than core
 * threads (or is closing), unless a task was handed over meanwhile; the
 * decision and alive-- share one critical section, so exactly alive - core
 * threads leave. Returns false when the worker left. */
static bool keep(struct bh_pool *p, struct bhp_worker *w)
{
	bool stay = true;

	point(p, BHP_PARK_TIMEOUT, NULL);
	lock(p);
	if (w->idle) {
		if (p->alive > p->core || p->closing) {
			w_remove(&p->sleepers, w);
			w->idle = false;
			leave_locked(p, w);
			stay = false;
		} else {
			w->above_core = false; /* a core thread now: no more keep-alive */
		}
	}
	unlock(p);
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

	for (;;) {
		uint32_t s;

		if (atomic_load_explicit(&w->park, memory_order_relaxed) == P_POLL &&
		    !poll_work(p, w))
			stop_polling(p, w);
		/* acquire: pairs with hand()'s exchange, w->task is visible */
		s = atomic_load_explicit(&w->park, memory_order_acquire);
		if (s == P_GO) {
			atomic_store_explicit(&w->park, P_BUSY, memory_order_relaxed);
			learn(p, slept_at);
			return w->task;
		}
		if (s == P_IDLE &&
		    !atomic_compare_exchange_strong_explicit(&w->park, &s, P_SLEEP, memory_order_acq_rel,
							     memory_order_acquire))
			continue;
		if (!slept_at && (p->spin_ns || w->above_core))
			slept_at = p->ops->now(p->ops->ctx);
		if (p->ops->wait(p->ops->ctx, BHP_WAIT_PARK, &w->park, P_SLEEP, keep_until(p, w, slept_at)) ==
			    -ETIMEDOUT &&
		    atomic_load_explicit(&w->park, memory_order_acquire) != P_GO && !keep(p, w))
			return NULL;
	}
}

/* Under the lock: the next queued task, or go idle, or (closing, nothing
 * queued) leave. A worker goes idle only when nothing is queued, and a task
 * is queued only when no worker is idle: no task waits while a thread
 * idles. */
static struct bh_task *next_locked(struct bh_pool *p, struct bhp_worker *w, bool *idle)
{
	struct bh_task *t = NULL;

	*idle = false;
	if (p->qhead) {
		t = dequeue(p);
	} else if (p->closing) {
		leave_locked(p, w);
	} else {
		idle_push(p, w);
		*idle = true;
	}
	return t;
}

static void *worker_main(void *arg)
{
	struct bhp_worker *w = arg;
	struct bh_pool *p = w->pool;
	struct bh_task *t, *next;
	uint32_t excess;
	bool idle;

	bhp_self = w;
	/* A worker belongs to the pool: a stray pthread_cancel must not kill it
	 * mid-task, and its parking waits then skip the cancellation window. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	name_thread(p, w->num);
	/* Listed idle from the start: w->task belongs to hand() until P_GO. */
	t = w->start_idle ? park(p, w) : w->task;
	while (t) {
		struct ran r;

		run_task(p, t, &r);
		lock(p);
		finish_locked(p, t, &r);
		next = next_locked(p, w, &idle);
		/* The finished task's permit is cached in the critical section
		 * that made its room (an idle worker or a queue slot), so whoever
		 * gets the permit finds the room (docs/pool.md). */
		cache_put_locked(p);
		if (BHI_UNLIKELY(bhk_attached(p->adm)))
			cache_fit_locked(p);
		excess = cache_trim_locked(p);
		unlock(p);
		report(p, t, &r);
		if (excess)
			bh_release(p->adm, excess);
		t = next;
		if (!t && idle)
			t = park(p, w);
	}
	point(p, BHP_WORKER_EXIT, NULL);
	signal_exit(p);
	return NULL;
}

/* ---- placement ----------------------------------------------------------- */

/* Under the lock, holding t's permit: the executor's order. Start a thread
 * below core; else hand it to an idle thread (a poller first: no wake) or
 * queue it; else grow to max. The permit guarantees one of them has room
 * (docs/pool.md). Returns 0, or the error of a thread that could not be
 * created. */
static int place_locked(struct bh_pool *p, struct bh_task *t, struct bhp_worker **wake)
{
	struct bhp_worker *w;
	int r = -EBUSY;

	if (p->alive < p->core && (r = spawn(p, t)) == 0)
		return 0;
	w = idle_pick(p);
	if (w) { /* an idle worker means an empty queue: FIFO holds */
		advance(t, T_IDLE, T_RUNNING);
		p->active++;
		if (hand(p, w, t))
			*wake = w; /* after the unlock */
		return 0;
	}
	if (p->queued < p->cap && p->alive > 0) {
		enqueue(p, t);
		return 0;
	}
	if (p->alive < p->max)
		r = spawn(p, t);
	return r;
}

/* Admit t and place it. -EBUSY: the pool is full, the policy decides. A
 * permit that cannot be used (closing, no thread) goes back to the cache. */
static int accept(struct bh_pool *p, struct bh_task *t)
{
	struct bhp_worker *wake = NULL;
	int have = permit_fast(p), r;

	if (have < 0)
		return have;
	lock(p);
	r = have ? 0 : permit_locked(p);
	if (r == 0) {
		r = p->closing ? -ESHUTDOWN : place_locked(p, t, &wake);
		if (r == 0)
			p->submitted++;
		else
			cache_put_locked(p);
		if (r < 0 && r != -ESHUTDOWN)
			p->no_thread++; /* counted with the rejections */
	} else if (p->closing) {
		r = -ESHUTDOWN;
	}
	unlock(p);
	if (wake)
		p->ops->wake(p->ops->ctx, &wake->park, false);
	return r;
}

/* CALLER_RUNS: the submitting thread runs the task itself, which slows the
 * submitter down to the pool's pace (and stalls an event loop: never there). */
static int run_here(struct bh_pool *p, struct bh_task *t)
{
	bh_task_done_fn *done = t->done;
	bool call = is_call(t);
	uint64_t t0;

	lock(p);
	if (p->closing) {
		unlock(p);
		return -ESHUTDOWN;
	}
	p->submitted++;
	p->caller_ran++;
	p->policy_took++;
	unlock(p);
	advance(t, T_IDLE, T_RUNNING);
	t0 = sample_start(p);
	t->run(t);
	if (BHI_UNLIKELY(t0))
		sample_run(p, t0);
	if (call)
		advance(t, T_RUNNING, T_DONE);
	else if (done)
		done(t, 0);
	return 0;
}

/* DISCARD: drop the newcomer, counted, its done frees what it holds. A
 * pool closed meanwhile refuses it instead, as it refuses every task. */
static int drop_new(struct bh_pool *p, struct bh_task *t)
{
	lock(p);
	if (p->closing) {
		unlock(p);
		return -ESHUTDOWN;
	}
	p->submitted++;
	p->discarded++;
	p->policy_took++;
	unlock(p);
	if (t->done)
		t->done(t, -ECANCELED);
	return BH_POOL_DISCARDED;
}

/* Under the lock: drop a task just taken off the queue. A call's caller is
 * told with T_DROPPED (release: it owns the task again) and may free it at
 * once: returns the word to wake, if its caller sleeps. A plain task is left
 * for the caller of this to pass to done after the unlock. */
static _Atomic uint32_t *drop_queued_locked(struct bh_pool *p, struct bh_task *t)
{
	uint32_t old;

	p->discarded++;
	if (!is_call(t))
		return NULL;
	old = atomic_fetch_add_explicit(tstate(t), T_DROPPED - T_QUEUED, memory_order_acq_rel);
	return old & TF_SLEEPING ? tstate(t) : NULL;
}

/* DISCARD_OLDEST: the newcomer takes the queue slot, and the permit, of the
 * oldest queued task, which is dropped. -ENOENT when nothing is queued. */
static int swap_oldest(struct bh_pool *p, struct bh_task *t)
{
	struct bh_task *old;
	_Atomic uint32_t *wake = NULL;
	bool plain;

	lock(p);
	old = p->closing ? NULL : p->qhead;
	if (!old) {
		int r = p->closing ? -ESHUTDOWN : -ENOENT;

		unlock(p);
		return r;
	}
	q_remove(p, old);
	plain = !is_call(old);
	wake = drop_queued_locked(p, old);
	advance(t, T_IDLE, T_QUEUED);
	q_append(p, t);
	p->submitted++;
	p->policy_took++;
	unlock(p);
	if (wake)
		p->ops->wake(p->ops->ctx, wake, false);
	if (plain && old->done)
		old->done(old, -ECANCELED);
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
		return refused(p);
	}
}

int bh_pool_submit(bh_pool_t *p, struct bh_task *t)
{
	int r;

	if (BHI_UNLIKELY(!p || !t || !t->run))
		return -EINVAL;
	prepare(p, t, 0);
	r = accept(p, t);
	return r == -EBUSY ? submit_full(p, t) : r;
}

/* ---- calls with deadlines ------------------------------------------------- */

/* The caller gives up (deadline or cancellation). Still queued: the task is
 * taken off the queue and never runs; done gets -ECANCELED now. Running: it
 * is marked abandoned and keeps its thread and permit until run returns;
 * the worker then gives it to done. Already done or dropped: that outcome
 * won the race and is returned instead (0 or -ECANCELED). */
static int give_up(struct bh_pool *p, struct bh_task *t)
{
	_Atomic uint32_t *st = tstate(t);
	uint32_t s;
	bool queued;

	point(p, BHP_ABANDON, t);
	lock(p);
	s = atomic_load_explicit(st, memory_order_acquire);
	queued = phase(s) == T_QUEUED;
	if (queued) {
		q_remove(p, t);
		p->abandoned++;
	} else {
		/* acq_rel pairs with the worker's fetch_add: exactly one of
		 * T_DONE and TF_ABANDONED lands first */
		while (phase(s) == T_RUNNING &&
		       !atomic_compare_exchange_strong_explicit(st, &s, s | TF_ABANDONED,
								memory_order_acq_rel, memory_order_acquire))
			;
		if (phase(s) == T_RUNNING) {
			p->abandoned++;
			p->abandoned_running++;
		}
	}
	unlock(p);
	if (queued) {
		if (t->done)
			t->done(t, -ECANCELED);
		bh_release(p->adm, 1);
		return -ETIMEDOUT;
	}
	return phase(s) == T_RUNNING ? -ETIMEDOUT : phase(s) == T_DONE ? 0 : -ECANCELED;
}

static int wait_loop(struct bh_pool *p, struct bh_task *t, uint64_t deadline)
{
	_Atomic uint32_t *st = tstate(t);

	for (;;) {
		/* acquire: pairs with the worker's publication of T_DONE */
		uint32_t s = atomic_load_explicit(st, memory_order_acquire);

		if (phase(s) == T_DONE)
			return 0;
		if (phase(s) == T_DROPPED)
			return -ECANCELED;
		if (!(s & TF_SLEEPING)) {
			if (!atomic_compare_exchange_weak_explicit(st, &s, s | TF_SLEEPING,
								   memory_order_acq_rel,
								   memory_order_relaxed))
				continue;
			s |= TF_SLEEPING;
		}
		/* EINTR, EAGAIN and spurious wakeups re-check the word; the
		 * deadline is absolute, so retrying never extends it. */
		if (p->ops->wait(p->ops->ctx, BHP_WAIT_CALL, st, s, deadline) == -ETIMEDOUT)
			return give_up(p, t);
	}
}

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
	int r = give_up(c->pool, c->task);

	if (r != -ETIMEDOUT && c->task->done)
		c->task->done(c->task, r);
}

static int wait_call(struct bh_pool *p, struct bh_task *t, uint64_t deadline)
{
	struct call_ctx c = { p, t };
	int r;

	pthread_cleanup_push(call_cancelled, &c);
	r = wait_loop(p, t, deadline);
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

	lock(p);
	closing = p->closing;
	if (!closing) {
		p->submitted++;
		p->abandoned++;
	}
	unlock(p);
	if (closing)
		return -ESHUTDOWN;
	if (t->done)
		t->done(t, -ECANCELED);
	return -ETIMEDOUT;
}

/* A waiting caller is told directly: under ABORT and DISCARD a call fails
 * with -EBUSY rather than being dropped behind its back. */
static int call_full(struct bh_pool *p, struct bh_task *t, uint64_t deadline)
{
	int r;

	switch (p->policy) {
	case BH_POOL_CALLER_RUNS:
		return run_here(p, t);
	case BH_POOL_DISCARD_OLDEST:
		r = swap_oldest(p, t);
		if (r == 0)
			return wait_call(p, t, deadline);
		return r == -ENOENT ? refused(p) : r;
	default:
		return refused(p);
	}
}

int bh_pool_call(bh_pool_t *p, struct bh_task *t, uint64_t deadline_ns)
{
	int r;

	if (!p || !t || !t->run)
		return -EINVAL;
	prepare(p, t, TF_CALL);
	if (deadline_ns <= p->ops->now(p->ops->ctx))
		return give_up_early(p, t);
	r = accept(p, t);
	if (r == -EBUSY)
		return call_full(p, t, deadline_ns);
	return r < 0 ? r : wait_call(p, t, deadline_ns);
}

bool bh_task_cancelled(const struct bh_task *t)
{
	const struct bh_pool *p;

	if (!t)
		return false;
	p = t->priv.pool;
	/* relaxed: a flag polled by run, publishing nothing */
	return (atomic_load_explicit(tstate(t), memory_order_relaxed) & TF_ABANDONED) ||
	       (p && atomic_load_explicit(&((struct bh_pool *)p)->stop_now, memory_order_relaxed));
}

/* ---- shutdown ------------------------------------------------------------ */

/* Under the lock: send every idle worker away (the queue is empty whenever
 * one is idle). They are counted out now; their threads are joined later. */
static void dismiss_idle_locked(struct bh_pool *p)
{
	struct bhp_worker *w;

	while ((w = idle_pick(p)) != NULL) {
		bool sleeps = hand(p, w, NULL);

		leave_locked(p, w);
		if (sleeps) /* rare: shutdown only */
			p->ops->wake(p->ops->ctx, &w->park, false);
	}
}

/* Under the lock: take every queued task off. Calls are told at once (a
 * rare path: the wakes happen under the lock); plain tasks are returned as
 * a list for done after the unlock. */
static struct bh_task *drop_queue_locked(struct bh_pool *p, uint32_t *n)
{
	struct bh_task *plain = NULL, **tail = &plain, *t;

	*n = 0;
	while ((t = p->qhead) != NULL) {
		_Atomic uint32_t *wake;

		q_remove(p, t);
		(*n)++;
		if (!is_call(t)) {
			*tail = t;
			tail = &t->priv.next;
			drop_queued_locked(p, t);
			continue;
		}
		wake = drop_queued_locked(p, t);
		if (wake)
			p->ops->wake(p->ops->ctx, wake, false);
	}
	return plain;
}

/* Close admission, send idle workers away; now: also drop the queue and
 * flag running tasks cancelled. Returns how many tasks were dropped. */
static int close_pool(struct bh_pool *p, bool now)
{
	struct bh_task *plain = NULL, *t, *next;
	uint32_t n = 0;

	lock(p);
	if (!p->closing) {
		p->closing = true;
		bh_close(p->adm);
	}
	if (now) {
		/* relaxed: a flag bh_task_cancelled polls */
		atomic_store_explicit(&p->stop_now, true, memory_order_relaxed);
		plain = drop_queue_locked(p, &n);
	}
	dismiss_idle_locked(p);
	unlock(p);
	for (t = plain; t; t = next) {
		next = t->priv.next;
		if (t->done)
			t->done(t, -ECANCELED);
	}
	if (n)
		bh_release(p->adm, n);
	return (int)n;
}

/* Wait until every thread has left. Once no task is left, the threads only
 * have to exit (no user code), so that is waited for past the deadline.
 * Returns 0, or the tasks still running or queued when the deadline passed. */
static int drain(struct bh_pool *p, uint64_t deadline)
{
	bool expired = false;

	for (;;) {
		uint32_t alive, left, seq;

		lock(p);
		alive = p->alive;
		left = p->active + p->queued;
		seq = atomic_load_explicit(&p->exits, memory_order_relaxed);
		unlock(p);
		if (alive == 0)
			return 0;
		if (left && expired)
			return (int)left;
		expired = p->ops->wait(p->ops->ctx, BHP_WAIT_DRAIN, &p->exits, seq,
				       left ? deadline : BH_FOREVER) == -ETIMEDOUT;
	}
}

static bool on_own_thread(const struct bh_pool *p)
{
	return bhp_self && bhp_self->pool == p;
}

int bh_pool_shutdown(bh_pool_t *p, uint64_t deadline_ns)
{
	int left;

	if (!p)
		return -EINVAL;
	close_pool(p, false);
	if (on_own_thread(p)) { /* it cannot wait for itself */
		lock(p);
		left = (int)(p->active + p->queued);
		unlock(p);
		return left;
	}
	left = drain(p, deadline_ns);
	if (left == 0)
		reap(p);
	return left;
}

int bh_pool_shutdown_now(bh_pool_t *p)
{
	if (!p)
		return -EINVAL;
	return close_pool(p, true);
}

int bh_pool_destroy(bh_pool_t *p)
{
	if (!p)
		return 0;
	if (on_own_thread(p))
		return -EDEADLK;
	bh_pool_shutdown(p, BH_FOREVER);
	bh_destroy(p->adm);
	pthread_attr_destroy(&p->attr);
	pthread_mutex_destroy(&p->lock);
	free(p);
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
	size_t size = sizeof(struct bh_pool) + max * sizeof(struct bhp_worker);
	struct bh_pool *p;

	size = (size + BHI_CACHELINE - 1) & ~(size_t)(BHI_CACHELINE - 1);
	p = aligned_alloc(BHI_CACHELINE, size);
	if (p)
		memset(p, 0, size);
	return p;
}

static void set_name(struct bh_pool *p, const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (!name || !n) {
		name = "bhpool";
		n = strlen(name);
	}
	if (n > sizeof(p->name) - 1)
		n = sizeof(p->name) - 1;
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

	if (bh_try_acquire(p->adm, n) == 0) {
		p->cached = n;
		atomic_store_explicit(&p->cached_hint, n, memory_order_relaxed);
	}
}

static int prestart(struct bh_pool *p)
{
	int r = 0;

	lock(p);
	while (p->alive < p->core && (r = spawn(p, NULL)) == 0)
		;
	unlock(p);
	return r;
}

int bhp_create(const struct bh_pool_config *cfg, const struct bhp_ops *ops, bh_pool_t **out)
{
	struct bh_config acfg = { 0 };
	struct bh_pool *p;
	int r;

	if (!cfg || !ops || !out || !config_valid(cfg))
		return -EINVAL;
	p = pool_alloc(cfg->max_threads);
	if (!p)
		return -ENOMEM;
	r = init_sync(p, cfg->stack_size);
	if (r < 0) {
		free(p);
		return r;
	}
	acfg.max_concurrent = cfg->max_threads + cfg->queue_capacity;
	r = bh_create(&acfg, &p->adm);
	if (r < 0) {
		pthread_attr_destroy(&p->attr);
		pthread_mutex_destroy(&p->lock);
		free(p);
		return r;
	}
	p->ops = ops;
	p->core = cfg->core_threads;
	p->max = cfg->max_threads;
	p->cap = cfg->queue_capacity;
	p->policy = cfg->policy;
	p->keep_alive_ns = cfg->keep_alive_ns;
	p->spin_ns = ops == &bhp_real_ops ? BHI_SPIN_NS : 0; /* fake clocks never spin */
	atomic_init(&p->spin_on, true);
	p->max_pollers = pollers_for_cpus();
	set_name(p, cfg->name);
	for (uint32_t i = p->max; i-- > 0;) {
		p->workers[i].pool = p;
		w_push(&p->spare, &p->workers[i]);
	}
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


int bh_pool_stats(const bh_pool_t *cp, struct bh_pool_stats *out)
{
	struct bh_pool *p = (struct bh_pool *)cp;
	uint64_t refused_busy;

	if (!p || !out)
		return -EINVAL;
	refused_busy = bhi_counter(p->adm, BHI_REJECTED);
	memset(out, 0, sizeof(*out));
	lock(p);
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
	unlock(p);
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

/* ceil for the small positive values here, forgiving the last bits of
 * rounding (50 * 0.2 * 1.3 is 13.000000000000002, and means 13). */
static uint32_t ceil_u32(double x)
{
	uint32_t n = (uint32_t)x;

	return (double)n < x - 1e-9 ? n + 1 : n;
}

int bh_pool_size(const struct bh_pool_load *in, struct bh_pool_sizing *out)
{
	double safety, threads, wait_ns;

	if (!in || !out)
		return -EINVAL;
	safety = in->safety == 0 ? 1.3 : in->safety;
	if (!(in->peak_qps > 0) || !isfinite(in->peak_qps) || !(safety >= 1) || !isfinite(safety) ||
	    in->p99_ns == 0)
		return -EINVAL;
	threads = in->peak_qps * ((double)in->p99_ns / (double)BH_SEC) * safety;
	if (!(threads <= BH_POOL_THREADS_MAX))
		return -ERANGE;
	memset(out, 0, sizeof(*out));
	out->max_threads = ceil_u32(threads);
	if (out->max_threads == 0)
		out->max_threads = 1;
	out->core_threads = out->max_threads / 2 ? out->max_threads / 2 : 1;
	out->queue_capacity = 2 * out->max_threads;
	wait_ns = (double)out->queue_capacity * (double)BH_SEC / in->peak_qps;
	out->queue_wait_ns = wait_ns >= 0x1p63 ? UINT64_MAX : (uint64_t)(wait_ns + 0.5);
	out->fits = in->caller_timeout_ns == 0 || out->queue_wait_ns <= in->caller_timeout_ns;
	return 0;
}
