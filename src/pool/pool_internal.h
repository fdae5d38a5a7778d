/* Private to libbulkhead's thread pools: the pool object, the task states
 * and the hooks that tests and the stress suite use to drive the waits and
 * the clock, and what the pool's files share. docs/pool.md explains the
 * protocol. The files, one protocol each:
 *   task.h    the task's state word: every read and write of it, and so
 *             every rule of exactly-once reporting;
 *   worker.c  the workers: parking, hand-off, pollers, keep-alive;
 *   submit.c  submission and calls: the permit cache, placement, the four
 *             policies, the caller's wait;
 *   pool.c    create, shutdown, destroy, stats, name, sizing.
 * What two of them run on a fast path is here, static inline, so that the
 * split costs no call: the lists, the hand-off's submitter side, the
 * permit cache. */
#ifndef BH_POOL_INTERNAL_H
#define BH_POOL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "bulkhead/pool.h"
#include "core/layer.h"       /* the admission bulkhead: bhi_try_take, ... */
#include "core/sample_hook.h" /* bhk_attached, bhk_emit: run times to a sink */
#include "lib/compiler.h"
#include "lib/futex.h"
#include "lib/list.h"
#include "lib/spin.h"

/*
 * A task's state word (bh_task.priv.state): a phase in the low bits, flags
 * above. Phases only move forward, by fetch_add, so a flag set concurrently
 * is never lost.
 */
enum bhp_phase {
	T_IDLE,    /* not in the pool */
	T_QUEUED,  /* on the queue (changes only under the pool lock) */
	T_RUNNING, /* on a thread */
	T_DONE,    /* run returned (calls: the caller may return 0) */
	T_DROPPED, /* calls only: dropped unrun, the caller returns -ECANCELED */
};
#define T_PHASE 7u
#define TF_CALL 8u       /* a caller waits in bh_pool_call */
#define TF_SLEEPING 16u  /* ...in the kernel: a final phase needs a wake */
#define TF_ABANDONED 32u /* the caller gave up */

/* A worker's futex word. P_BUSY -> P_POLL/P_IDLE and P_POLL -> P_IDLE/P_BUSY
 * happen under the pool lock, and so does every move to P_GO; the worker
 * alone moves P_IDLE -> P_SLEEP and P_GO -> P_BUSY. */
enum bhp_park {
	P_BUSY,  /* running, or about to */
	P_POLL,  /* idle, on the pollers list, polling for work */
	P_IDLE,  /* idle, on the sleepers list, about to sleep */
	P_SLEEP, /* idle, on the sleepers list, in or entering the kernel */
	P_GO,    /* taken off its list: w->task to run, or NULL to leave */
};

/* Points where a test can act on the thread that reaches them. */
enum bhp_point {
	BHP_AFTER_RUN,     /* a worker: run returned, the outcome not yet published */
	BHP_PARK_TIMEOUT,  /* a worker: its keep-alive wait timed out */
	BHP_ABANDON,       /* a caller: its wait timed out, about to give up */
	BHP_WORKER_EXIT,   /* a worker: about to leave the pool */
	BHP_POLL_START,    /* a poller: its poll window has just been set */
	BHP_ADMIT_BUSY,    /* a submitter: the admission bulkhead refused its permit,
	                    * before it looks at the pool's cache of permits again */
};

/* Thread creation and the waits, injectable so tests can drive keep-alive
 * expiry and deadline races deterministically on one virtual clock. */
struct bhp_ops {
	/* Wait, wake and the clock (lib/futex.h); the real table is
	 * bhi_futex_ops. Waits say what they are for: BHI_WAIT_PARK,
	 * BHI_WAIT_CALL, BHI_WAIT_DRAIN. */
	const struct bhi_sync_ops *sync;
	/* pthread_create; a negative errno on failure. */
	int (*create)(void *ctx, pthread_t *tid, const pthread_attr_t *attr,
		      void *(*fn)(void *), void *arg);
	void (*point)(void *ctx, enum bhp_point p, struct bh_task *t); /* NULL: none */
	/* How long an idle worker polls before it sleeps: BHI_SPIN_NS with the
	 * real ops, 0 (never) for a fake clock, whose time a poll cannot see
	 * pass. Fixed at creation: prestarted workers read it at once. */
	uint64_t spin_ns;
	void *ctx; /* of create and point */
};

extern const struct bhp_ops bhp_real_ops;

struct bhp_worker {
	/* Alone on its line: a poller spins on it, and list operations on
	 * the fields below (under the pool lock) must not fight it. */
	_Alignas(BHI_CACHELINE) _Atomic uint32_t park; /* enum bhp_park */
	_Alignas(BHI_CACHELINE) struct bh_task *task; /* handed over with P_GO (NULL: exit) */
	struct bhp_worker *next, *prev;      /* pollers, sleepers or spare list */
	struct bh_pool *pool;
	pthread_t tid;
	uint32_t slot;                       /* S_FREE, S_LIVE, S_ZOMBIE */
	uint32_t num;                        /* for the thread name */
	bool idle;                           /* on pollers or sleepers */
	bool start_idle;                     /* started without a task (PRESTART) */
	bool above_core;                     /* went idle above core: keep-alive applies */
	bool spinner;                        /* counted by bhi_spin_begin (lib/spin.h) */
	/* In done (user code) after the task was counted: set under the lock,
	 * cleared by the worker alone, before it bumps exits (drain()). */
	_Atomic bool reporting;
};

enum { S_FREE, S_LIVE, S_ZOMBIE };

/* The task queue and the worker lists (lib/list.h). */
BHI_LIST_DEFINE(bhp_tasks, struct bh_task, priv.next, priv.prev)
BHI_LIST_DEFINE(bhp_workers, struct bhp_worker, next, prev)

struct bh_pool {
	/* Read-mostly. */
	bulkhead_t *adm; /* admission: max_threads + queue_capacity permits */
	const struct bhp_ops *ops;
	uint32_t core, max, cap;
	enum bh_pool_policy policy;
	uint64_t keep_alive_ns;
	uint64_t spin_ns;     /* how long an idle worker polls before sleeping */
	uint32_t max_pollers; /* idle workers polling at once, at most */
	uint32_t fork_gen;    /* bhk_fork_generation() in the process that made it */
	pid_t pid;            /* and its id (pool.c: not_ours) */
	pthread_attr_t attr; /* stack size */
	char name[16];
	_Atomic bool stop_now;                   /* bh_pool_shutdown_now: tasks cancelled */
	_Atomic bool spin_on;                    /* polling has been paying off */
	_Atomic uint32_t exits;                  /* futex: bumped when a worker leaves */

	/* Everything below is under lock. */
	_Alignas(BHI_CACHELINE) pthread_mutex_t lock;
	/* = cached, read before the lock. On the lock's line: it changes with
	 * every task, and the submitter that reads it takes the lock next, so
	 * on the read-mostly line above it would cost both sides a miss on
	 * every field there. */
	_Atomic uint32_t cached_hint;
	struct bhp_tasks queue;      /* FIFO */
	struct bhp_workers pollers;  /* idle and polling: handed tasks first */
	struct bhp_workers sleepers; /* idle, LIFO: the warmest first, the coldest time out */
	struct bhp_workers spare;    /* free and zombie (exited, unjoined) slots */
	bool closing;
	uint32_t alive, active, queued, largest, abandoned_running, nthreads, npollers;
	uint32_t cached; /* admission permits kept for the next tasks */
	uint64_t submitted, completed, abandoned, discarded, caller_ran, no_thread;
	uint64_t policy_took; /* full, and the policy took the task: ran, dropped, swapped */

	struct bhp_worker workers[];
};

/* Create with other ops (tests); bh_pool_create uses bhp_real_ops. */
int bhp_create(const struct bh_pool_config *cfg, const struct bhp_ops *ops, bh_pool_t **out);
/* Before any worker runs: not with BH_POOL_PRESTART (ops->spin_ns is for that). */
void bhp_set_spin_ns(bh_pool_t *pool, uint64_t ns);

/* ---- between the pool's files -------------------------------------------- */

/* worker.c */
int bhp_start_worker_locked(struct bh_pool *p, struct bh_task *t);
void bhp_dismiss_idle_locked(struct bh_pool *p);
void bhp_join_exited(struct bh_pool *p);
bool bhp_on_own_thread(const struct bh_pool *p);
/* This thread's worker if it is one of p's, else NULL. */
struct bhp_worker *bhp_own_worker(const struct bh_pool *p);
/* Under the lock: this thread's worker, idle in its task's done, runs a
 * call itself (submit.c): off the idle lists while it does, then back where
 * its own finish would have put it (the next queued task, idle, or leave). */
void bhp_unidle_self_locked(struct bh_pool *p, struct bhp_worker *w);
/* Where place_locked put a call made from done (submit.c). */
enum bhp_here {
	HERE_NOT,    /* placed as any task: the caller waits for it */
	HERE_SLOT,   /* runs on the caller, off the idle lists, in its free slot */
	HERE_CALLER, /* runs on the caller, busy with a task already: no slot, no permit */
};
void bhp_reidle_self_locked(struct bh_pool *p, struct bhp_worker *w);
/* submit.c */
BHI_COLD void bhp_cache_fit_locked(struct bh_pool *p);
/* pool.c: a run time to the controller listening (sample_start) */
BHI_COLD void bhp_sample_run(struct bh_pool *p, uint64_t t0);

static inline void pool_lock(struct bh_pool *p)
{
	pthread_mutex_lock(&p->lock);
}

static inline void pool_unlock(struct bh_pool *p)
{
	pthread_mutex_unlock(&p->lock);
}

/*
 * Whether p is a fork child's copy. fork() copies only the calling thread,
 * so the copy's workers do not exist, its queue holds the parent's tasks,
 * and its lock may have been held by a parent thread at the fork, for good
 * in the child. Such a copy is never locked, woken, joined or run from
 * (docs/pool.md, "In a fork child"). One relaxed load of the fork count
 * (src/core/layer.h; bhp_create starts it) and a compare, on the submit
 * and call paths and twice per task on a worker's: after run and after
 * done, which may have forked.
 */
static inline bool pool_inherited(const struct bh_pool *p)
{
	return BHI_UNLIKELY(bhk_fork_generation() != p->fork_gen);
}

static inline void pool_point(const struct bh_pool *p, enum bhp_point where, struct bh_task *t)
{
	if (p->ops->point)
		p->ops->point(p->ops->ctx, where, t);
}

static inline uint64_t pool_now(const struct bh_pool *p)
{
	return bhi_sync_now(p->ops->sync);
}

static inline uint64_t deadline_after(uint64_t now, uint64_t ns)
{
	return ns >= BH_FOREVER - now ? BH_FOREVER : now + ns;
}

/* When an adaptive controller listens to the admission bulkhead, a task's
 * run time is its latency sample (0: nobody listens, no clock read). */
static inline uint64_t sample_start(struct bh_pool *p)
{
	return BHI_UNLIKELY(bhk_attached(p->adm)) ? pool_now(p) : 0;
}


/* ---- the task queue and the worker lists (under the pool lock) ----------- */

static inline void tq_append(struct bh_pool *p, struct bh_task *t)
{
	bhp_tasks_add_tail(&p->queue, t);
	p->queued++;
}

static inline void tq_remove(struct bh_pool *p, struct bh_task *t)
{
	bhp_tasks_del(&p->queue, t);
	p->queued--;
}

/* ---- the hand-off, the submitter's side (park() in worker.c is the other) -- */

/* A poller stops polling (it goes to sleep, or takes a task). */
static inline void unpoll(struct bh_pool *p, struct bhp_worker *w)
{
	bhp_workers_del(&p->pollers, w);
	p->npollers--;
}

/* A polling worker takes a task without a syscall on either side; else the
 * most recently idle sleeper, whose cache is warm (the coldest time out). */
static inline struct bhp_worker *idle_pick(struct bh_pool *p)
{
	struct bhp_worker *w = bhp_workers_first(&p->pollers);

	return w ? w : bhp_workers_first(&p->sleepers);
}

/* How many idle workers a placement looks at, at most, for one not in done. */
#define IDLE_LOOK 4

/* idle_pick for a new task. A worker still running its last task's done is
 * listed idle (its slot is free) but starts nothing before done returns, so
 * one that is not comes first if any of the first few of a list is; and
 * never avoid (the calling thread's own worker). A call made from done
 * (only_free) takes no worker in done at all: two dones that call each
 * other's thread would wait for each other. NULL: none fits. */
static inline struct bhp_worker *idle_pick_for(struct bh_pool *p, const struct bhp_worker *avoid,
					       bool only_free)
{
	struct bhp_worker *lists[2] = { bhp_workers_first(&p->pollers),
					bhp_workers_first(&p->sleepers) };
	struct bhp_worker *later = NULL;

	for (int l = 0; l < 2; l++) {
		struct bhp_worker *w = lists[l];

		for (int i = 0; w && i < IDLE_LOOK; w = bhp_workers_next(w)) {
			if (w == avoid)
				continue;
			i++;
			/* relaxed: set under this lock before the worker was
			 * listed; a stale true only defers it */
			if (!atomic_load_explicit(&w->reporting, memory_order_relaxed))
				return w;
			if (!later && !only_free)
				later = w;
		}
	}
	return later;
}

/* Take w off its list and give it t (NULL: leave). Under the lock, so a
 * worker whose keep-alive expires, or a poller that stops, sees either P_GO
 * or itself still listed. The exchange says whether the worker sleeps, i.e.
 * needs a wake. acq_rel: the release pairs with park()'s acquire load of
 * P_GO (it publishes w->task); the acquire half pairs with park()'s CAS to
 * P_SLEEP, though the submitter reads nothing of the worker's after it
 * (the wake needs only the value). */
static inline bool hand_off(struct bh_pool *p, struct bhp_worker *w, struct bh_task *t)
{
	if (atomic_load_explicit(&w->park, memory_order_relaxed) == P_POLL)
		unpoll(p, w);
	else
		bhp_workers_del(&p->sleepers, w);
	w->idle = false;
	w->task = t;
	return atomic_exchange_explicit(&w->park, P_GO, memory_order_acq_rel) == P_SLEEP;
}

/* ---- the permit cache (under the pool lock) ------------------------------ */

/*
 * Every admitted task holds one of the admission bulkhead's permits. Taking
 * and returning one per task would cost a cross-core cache-line transfer of
 * the bulkhead's word on each side (a quarter of the tiny-task throughput,
 * measured), so the pool keeps the permits of finished tasks in a small
 * cache under its lock, which the submitter and the worker hold anyway:
 * a worker puts its permit there in the critical section that makes room
 * (worker.c), a submitter takes one from there in the critical section that
 * places its task (submit.c). The bulkhead still bounds every permit, cached
 * or held; it counts at most CACHE_MAX more than the pool holds, and the
 * pool's own counters stay exact. A full bulkhead with an empty cache
 * refuses without the lock. cached_hint mirrors cached for that look
 * before the lock (relaxed: a hint; the lock settles it).
 */
#define CACHE_MAX 32

static inline void cache_set_locked(struct bh_pool *p, uint32_t n)
{
	p->cached = n;
	atomic_store_explicit(&p->cached_hint, n, memory_order_relaxed);
}

static inline void cache_put_locked(struct bh_pool *p)
{
	cache_set_locked(p, p->cached + 1);
}

static inline bool cache_take_locked(struct bh_pool *p)
{
	if (!p->cached)
		return false;
	cache_set_locked(p, p->cached - 1);
	return true;
}

/* Permits above CACHE_MAX go back to the bulkhead (after the unlock). */
static inline uint32_t cache_trim_locked(struct bh_pool *p)
{
	uint32_t n = 0;

	if (p->cached > CACHE_MAX) {
		n = p->cached - CACHE_MAX / 2;
		cache_set_locked(p, p->cached - n);
	}
	return n;
}

#endif /* BH_POOL_INTERNAL_H */
