/* Private to libbulkhead's thread pools: the pool object, the task states
 * and the hooks that tests and the stress suite use to drive the waits and
 * the clock. docs/pool.md explains the protocol. */
#ifndef BH_POOL_INTERNAL_H
#define BH_POOL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "bulkhead/pool.h"
#include "core/internal.h"
#include "lib/compiler.h"

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

/* What a wait is for, so a fake can tell them apart. */
enum bhp_wait_kind {
	BHP_WAIT_PARK,  /* an idle worker; deadline = keep-alive */
	BHP_WAIT_CALL,  /* bh_pool_call; deadline = the caller's */
	BHP_WAIT_DRAIN, /* bh_pool_shutdown waiting for threads to exit */
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

/* Wait, wake, clock and thread creation, injectable so tests can drive
 * keep-alive expiry and deadline races deterministically. */
struct bhp_ops {
	/* Sleep while *word == expect, until deadline_ns (absolute, on the
	 * clock of now(); BH_FOREVER = none). 0 (woken, maybe spuriously),
	 * -EINTR, -EAGAIN or -ETIMEDOUT. */
	int (*wait)(void *ctx, enum bhp_wait_kind kind, _Atomic uint32_t *word,
		    uint32_t expect, uint64_t deadline_ns);
	void (*wake)(void *ctx, _Atomic uint32_t *word, bool all);
	uint64_t (*now)(void *ctx);
	/* pthread_create; a negative errno on failure. */
	int (*create)(void *ctx, pthread_t *tid, const pthread_attr_t *attr,
		      void *(*fn)(void *), void *arg);
	void (*point)(void *ctx, enum bhp_point p, struct bh_task *t); /* NULL: none */
	void *ctx;
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
};

enum { S_FREE, S_LIVE, S_ZOMBIE };

struct bh_pool {
	/* Read-mostly. */
	bulkhead_t *adm; /* admission: max_threads + queue_capacity permits */
	const struct bhp_ops *ops;
	uint32_t core, max, cap;
	enum bh_pool_policy policy;
	uint64_t keep_alive_ns;
	uint64_t spin_ns;     /* how long an idle worker polls before sleeping */
	uint32_t max_pollers; /* idle workers polling at once, at most */
	pthread_attr_t attr; /* stack size */
	char name[16];
	_Atomic bool stop_now;                   /* bh_pool_shutdown_now: tasks cancelled */
	_Atomic bool spin_on;                    /* polling has been paying off */
	_Atomic uint32_t exits;                  /* futex: bumped when a worker leaves */
	_Atomic uint32_t cached_hint;            /* = cached, read before the lock */

	/* Everything below is under lock. */
	_Alignas(BHI_CACHELINE) pthread_mutex_t lock;
	struct bh_task *qhead, *qtail; /* FIFO */
	struct bhp_worker *pollers;    /* idle and polling: handed tasks first */
	struct bhp_worker *sleepers;   /* idle, LIFO: the warmest first, the coldest time out */
	struct bhp_worker *spare;      /* free and zombie (exited, unjoined) slots */
	bool closing;
	uint32_t alive, active, queued, largest, abandoned_running, nthreads, npollers;
	uint32_t cached; /* admission permits kept for the next tasks */
	uint64_t submitted, completed, abandoned, discarded, caller_ran, no_thread;
	uint64_t policy_took; /* full, and the policy took the task: ran, dropped, swapped */

	struct bhp_worker workers[];
};

/* Create with other ops (tests); bh_pool_create uses bhp_real_ops. */
int bhp_create(const struct bh_pool_config *cfg, const struct bhp_ops *ops, bh_pool_t **out);
void bhp_set_spin_ns(bh_pool_t *pool, uint64_t ns);

#endif /* BH_POOL_INTERNAL_H */
