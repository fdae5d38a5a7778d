/*
 * OVERVIEW. libbulkhead thread pools: isolate a dependency that only offers a blocking
 * API (an old database driver, getaddrinfo, a vendor SDK) on its own small
 * set of threads, so that when it slows down it ties up those threads only.
 *
 * Admission is a bulkhead: at most max_threads tasks run and at most
 * queue_capacity wait, in FIFO order. There is no unbounded queue. A task
 * that finds the pool full meets the pool's policy at once. Submission
 * follows the executor of java.util.concurrent:
 *
 *   1. fewer than core_threads threads are alive: start one for the task;
 *   2. else hand the task to an idle thread, or queue it;
 *   3. the queue is full: start another thread, up to max_threads;
 *   4. else apply the policy: BH_POOL_ABORT (-EBUSY), BH_POOL_CALLER_RUNS,
 *      BH_POOL_DISCARD or BH_POOL_DISCARD_OLDEST.
 *
 * Threads above core_threads exit after keep_alive_ns without work.
 *
 * EXAMPLE. Tasks are nodes the caller owns, usually embedded in its own
 * struct, so submitting allocates nothing:
 *
 *   struct lookup { struct bh_task task; const char *host; int err; };
 *
 *   static void lookup_run(struct bh_task *t)
 *   {
 *           struct lookup *l = (struct lookup *)t;  (task is the first member)
 *           l->err = slow_blocking_lookup(l->host, &l->addr);
 *   }
 *
 *   l->task = (struct bh_task){ .run = lookup_run, .done = lookup_free };
 *   r = bh_pool_call(pool, &l->task, bh_now_ns() + 300 * BH_MSEC);
 *   if (r == 0)                  use(l), lookup_free(&l->task, 0);
 *   else if (r == -ETIMEDOUT)    ;  the pool calls lookup_free later
 *   else                         lookup_free(&l->task, r);  never ran
 *
 * OWNERSHIP. The pool holds a task from the moment it accepts it until it
 * reports it, exactly once, and never touches it afterwards:
 *
 *   - bh_pool_submit returned 0: the pool reports with done(task, status)
 *     once run has returned (status 0), or instead of running it when the
 *     task is dropped unrun (status -ECANCELED). With done == NULL, the
 *     return of run is the report, so run may free its task.
 *   - bh_pool_submit returned BH_POOL_CALLER_RAN or BH_POOL_DISCARDED: run
 *     and done(task, 0), or done(task, -ECANCELED), have already happened.
 *   - bh_pool_call returned 0: run has returned, the task is the caller's
 *     again, done is not called. -ETIMEDOUT: the caller gave up, the task
 *     stays the pool's, which calls done(task, -ETIMEDOUT) when run returns
 *     or done(task, -ECANCELED) if it never started (possibly before
 *     bh_pool_call returns). Any other result: the task never ran, it is the
 *     caller's, done is not called.
 *   - Any other negative result: the pool never took the task.
 *
 * So done's status says whether run ran: 0 (ran, completed), -ETIMEDOUT
 * (ran, but its caller had given up), -ECANCELED (never ran). A call is
 * reported either completed (0) or abandoned (-ETIMEDOUT), never both.
 *
 * DEADLINES end the wait, not the work: a call that times out returns at
 * once, but its task keeps its thread and its slot until run really
 * returns, so the pool's limits always count real work. The task sees that
 * nobody waits any more through bh_task_cancelled() and may stop early.
 *
 * MEMORY ORDERING. Everything a task's submitter wrote before submitting
 * happens before run; everything run wrote happens before done, and before
 * bh_pool_call returns 0.
 *
 * THREADS, SIGNALS, CANCELLATION. Every function may be called from any
 * thread, on one pool from many at once, except bh_pool_destroy (last, and
 * never from a pool thread: -EDEADLK). Run and done are never called with a
 * library lock held: they may submit to the same pool. A bh_pool_call from
 * done goes to an idle thread not itself in done, or else runs on the
 * calling thread (in the slot its finished task freed, or with none:
 * counted in caller_ran); from run it needs
 * another thread, and waits for its deadline on a pool whose threads are
 * all busy. Pool threads block every signal. Signals
 * do not cut bh_pool_call's wait short (the wait resumes against the same
 * absolute deadline). bh_pool_call is a cancellation point while it waits:
 * a cancelled caller gives up as on a timeout (and if the task had already
 * completed, done(task, 0) is called so that its resources are freed); a
 * call that does not wait leaves a pending request to the next cancellation
 * point. bh_task_cancelled tells a running task that nobody waits for it.
 *
 * FORK. fork() copies only the calling thread: a child's copy of a pool has
 * no threads, the parent's queued tasks, and maybe a lock a parent thread
 * held at the fork. It acts as a pool shut down that needs no waiting:
 * submit and call return -ESHUTDOWN, both shutdowns return 0 at once,
 * destroy frees the copy and returns 0, stats reads it as it was at the
 * fork; none takes its lock, and the parent's tasks neither run nor are
 * reported in the child. A task or done that forks: when it returns in the
 * child, that thread (a pool thread's copy) ends, and so does the child, as
 * by exit(0). See docs/pool.md, "In a fork child".
 *
 * ERRORS. Negative errno values, never errno, in the order of bulkhead.h:
 * -EINVAL (a NULL pool, task or run; a bad configuration), -ESHUTDOWN (the
 * pool is shutting down, or is a fork child's copy), -ETIMEDOUT
 * (bh_pool_call: a deadline already past, or the wait ended), then -EBUSY
 * (full, BH_POOL_ABORT; or what the policy does) and -EAGAIN (a thread was
 * needed and could not be created). bh_pool_call also returns -ECANCELED (dropped while queued),
 * bh_pool_create -ENOMEM, bh_pool_destroy -EDEADLK. See bh_pool_create(3)
 * and docs/pool.md.
 */
#ifndef BULKHEAD_POOL_H
#define BULKHEAD_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bulkhead.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bh_pool bh_pool_t; /* opaque */

/* What a full pool does with a new task. */
enum bh_pool_policy {
	BH_POOL_ABORT = 0,      /* refuse it: -EBUSY, the caller keeps it */
	BH_POOL_CALLER_RUNS,    /* run it on the submitting thread; never on an event loop */
	BH_POOL_DISCARD,        /* drop it: its done gets -ECANCELED */
	BH_POOL_DISCARD_OLDEST, /* drop the oldest queued task instead, queue this one */
};

/* Start core_threads threads at creation instead of on demand. */
#define BH_POOL_PRESTART (1u << 0)

#define BH_POOL_THREADS_MAX 4096u /* largest max_threads */

/* ABI: read by bh_pool_create; grows only at the end, with a new symbol
 * version of bh_pool_create (abi/README.md). */
struct bh_pool_config {
	const char *name;            /* thread-name prefix: "pay" names pay-1, pay-2...
	                              * (cut to fit 15 bytes; NULL: "bhpool-N",
	                              * N counting the unnamed pools) */
	uint32_t core_threads;       /* kept alive even when idle (0 allowed) */
	uint32_t max_threads;        /* 1 ... BH_POOL_THREADS_MAX, >= core_threads */
	uint32_t queue_capacity;     /* tasks that may wait; 0 = hand-off only;
	                              * max_threads + queue_capacity <= BH_LIMIT_MAX */
	enum bh_pool_policy policy;  /* BH_POOL_ABORT unless set */
	uint64_t keep_alive_ns;      /* idle time before a thread above core exits */
	size_t stack_size;           /* per thread; 0 = the system default */
	uint32_t flags;              /* BH_POOL_PRESTART */
};

struct bh_task;
typedef void bh_task_run_fn(struct bh_task *task);
typedef void bh_task_done_fn(struct bh_task *task, int status);

/* ABI: frozen, like struct bh_task: callers embed the node. */
struct bh_task_private { /* private to the library */
	struct bh_task *next, *prev;
	void *pool;
	uint32_t state;
	uint32_t reserved;
};

struct bh_task {
	bh_task_run_fn *run;   /* the work, on a pool thread (required) */
	bh_task_done_fn *done; /* the report: 0, -ETIMEDOUT or -ECANCELED (may be NULL) */
	void *data;            /* the caller's */
	struct bh_task_private priv;
};

/* bh_pool_submit's results when the pool was full (both >= 0: handled). */
#define BH_POOL_CALLER_RAN 1 /* CALLER_RUNS: run and done ran on the caller */
#define BH_POOL_DISCARDED 2  /* DISCARD(_OLDEST): done(task, -ECANCELED) ran */

/*
 * A snapshot, all read at one instant, so that always
 *
 *   submitted == queued + active - abandoned_running
 *                + completed + abandoned + discarded + caller_ran
 *
 * (rejected and largest stand apart). ABI: these fields stay; the struct
 * grows only at the end, with a new symbol version of bh_pool_stats that
 * fills the new layout (the old one keeps filling the old; abi/README.md).
 */
struct bh_pool_stats {
	uint64_t alive;             /* threads alive */
	uint64_t active;            /* threads running a task */
	uint64_t queued;            /* tasks waiting */
	uint64_t largest;           /* most threads alive at once, ever */
	uint64_t submitted;         /* tasks taken: accepted, run by the caller or dropped */
	uint64_t completed;         /* ran on the pool and were reported completed */
	uint64_t abandoned;         /* calls whose caller gave up (deadline, cancellation) */
	uint64_t abandoned_running; /* of those, still running: threads tied up by work
	                             * nobody waits for */
	uint64_t discarded;         /* dropped unrun: DISCARD(_OLDEST), bh_pool_shutdown_now */
	uint64_t caller_ran;        /* run on the submitting thread (CALLER_RUNS; a
	                             * call from done whose thread had a task, or
	                             * that found the pool full: bh_pool_call(3)) */
	uint64_t rejected;          /* submissions the full pool refused (-EBUSY) or
	                             * gave to its policy (CALLER_RAN, DISCARDED, a
	                             * DISCARD_OLDEST swap), and those that could not
	                             * get a thread (-EAGAIN): each counted once */
	uint64_t core_threads, max_threads, queue_capacity; /* the configuration */
};

/* Create a pool. 0 and *out, or -EINVAL, -ENOMEM, -EAGAIN (PRESTART). */
BH_API int bh_pool_create(const struct bh_pool_config *cfg, bh_pool_t **out);

/* Queue task or start it. 0, BH_POOL_CALLER_RAN, BH_POOL_DISCARDED, or
 * -EBUSY (full, ABORT), -ESHUTDOWN, -EAGAIN (no thread could be created),
 * -EINVAL. Never waits (except to run the task itself, CALLER_RUNS). */
BH_API int bh_pool_submit(bh_pool_t *pool, struct bh_task *task);

/* Submit task and wait until it has run or until deadline_ns (absolute,
 * CLOCK_MONOTONIC, see bh_now_ns; BH_FOREVER waits as long as it takes).
 * 0, or -ETIMEDOUT (abandoned; see OWNERSHIP above), -ECANCELED (dropped
 * unrun), -EBUSY, -ESHUTDOWN, -EAGAIN, -EINVAL; -ESHUTDOWN outranks a
 * deadline already past. A cancellation point while it waits. */
BH_API int bh_pool_call(bh_pool_t *pool, struct bh_task *task, uint64_t deadline_ns);

/* True once nobody waits for the task (its caller gave up) or the pool is
 * shutting down immediately: run may stop early. Only valid during run. */
BH_API bool bh_task_cancelled(const struct bh_task *task);

/* Graceful shutdown: refuse new tasks (-ESHUTDOWN), let the queued ones
 * run, and wait until deadline_ns for every thread to finish. 0 when all
 * tasks finished and all threads exited, else the number of tasks still
 * running or queued. May be called again, e.g. after bh_pool_shutdown_now. */
BH_API int bh_pool_shutdown(bh_pool_t *pool, uint64_t deadline_ns);

/* Immediate shutdown: refuse new tasks, drop every queued one (done gets
 * -ECANCELED, a waiting bh_pool_call returns -ECANCELED) and flag running
 * ones cancelled. Never waits. Returns how many queued tasks it dropped. */
BH_API int bh_pool_shutdown_now(bh_pool_t *pool);

/* Shut down gracefully (waiting as long as tasks run), join every thread
 * and free the pool. 0, or -EDEADLK (nothing done) when called from one of
 * the pool's own threads. NULL is ignored. */
BH_API int bh_pool_destroy(bh_pool_t *pool);

/* Fill *out. 0, or -EINVAL (pool or out is NULL). */
BH_API int bh_pool_stats(const bh_pool_t *pool, struct bh_pool_stats *out);

/* The name given at creation (thread-name prefix), for logs and metrics;
 * NULL for a NULL pool. */
BH_API const char *bh_pool_name(const bh_pool_t *pool);

/*
 * Sizing by Little's law, for one dependency at its peak:
 *
 *   max_threads    = ceil(peak_qps * p99 * safety)     (at least 1)
 *   core_threads   = max_threads / 2                   (at least 1)
 *   queue_capacity = 2 * max_threads
 *   queue_wait     = queue_capacity / peak_qps, fits = queue_wait <= caller_timeout
 *
 * The last line is the check that matters: a task that waits in the queue
 * longer than its caller waits runs for nobody.
 */
/* ABI: both grow only at the end, with a new symbol version of bh_pool_size. */
struct bh_pool_load {
	double peak_qps;            /* calls per second to the dependency at peak */
	uint64_t p99_ns;            /* the dependency's P99 latency */
	double safety;              /* 1.2 ... 1.5 (0 means 1.3) */
	uint64_t caller_timeout_ns; /* how long callers wait in all (0: skip the check) */
};

struct bh_pool_sizing {
	uint32_t max_threads, core_threads, queue_capacity;
	uint64_t queue_wait_ns; /* worst wait in a full queue at peak */
	bool fits;              /* queue_wait_ns <= caller_timeout_ns */
};

/* 0 and *out filled; -EINVAL (not finite, not positive, safety < 1) or
 * -ERANGE (more than BH_POOL_THREADS_MAX threads). */
BH_API int bh_pool_size(const struct bh_pool_load *load, struct bh_pool_sizing *out);

#ifdef __cplusplus
}
#endif
#endif /* BULKHEAD_POOL_H */
