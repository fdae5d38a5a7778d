/*
 * The task state machine: every read and write of a task's state word
 * (bh_task.priv.state) is in this file, so the rule that every task is
 * reported exactly once can be checked here alone. docs/pool.md tells the
 * protocol; in short:
 *
 * - A phase (the low bits) only moves forward, by fetch_add, so the flags
 *   above it (TF_SLEEPING, TF_ABANDONED), set concurrently, are never lost.
 * - A plain task (bh_pool_submit) keeps no phase: nobody reads it. It is
 *   reported once because exactly one path holds it when it leaves the
 *   pool: the worker that ran it (task_report), or the path that took it
 *   off the queue unrun (task_drop_queued_locked and its callers).
 * - A call (bh_pool_call, TF_CALL) ends in one of three ways, and the word
 *   decides which: T_DONE (the worker's fetch_add in task_finish_locked),
 *   TF_ABANDONED (the caller's CAS in task_give_up, only from T_RUNNING) or
 *   T_DROPPED (task_drop_queued_locked, only from T_QUEUED, under the lock).
 *   Whichever lands first wins; the loser sees it and reports nothing.
 *
 * Static inline: the submit and worker fast paths (in two files) inline
 * these moves, which are a load or two each.
 */
#ifndef BH_POOL_TASK_H
#define BH_POOL_TASK_H

#include <errno.h>

#include "pool_internal.h"

/* bh_task_private.state is a plain uint32_t so that the public header stays
 * valid C++; an _Atomic uint32_t has the same size and alignment. */
_Static_assert(sizeof(_Atomic uint32_t) == sizeof(uint32_t) &&
		       _Alignof(_Atomic uint32_t) == _Alignof(uint32_t),
	       "the task state word must be usable as an atomic");

/* The word itself: only to wait on it and wake its waiter. */
static inline _Atomic uint32_t *task_word(const struct bh_task *t)
{
	return (_Atomic uint32_t *)&((struct bh_task *)t)->priv.state;
}

static inline uint32_t task_phase(uint32_t s)
{
	return s & T_PHASE;
}

static inline void task_prepare(struct bh_pool *p, struct bh_task *t, uint32_t flags)
{
	t->priv.next = t->priv.prev = NULL;
	t->priv.pool = p;
	atomic_store_explicit(task_word(t), T_IDLE | flags, memory_order_relaxed);
}

/* Relaxed: TF_CALL is written before the task is shared and never changes. */
static inline bool task_is_call(const struct bh_task *t)
{
	return atomic_load_explicit(task_word(t), memory_order_relaxed) & TF_CALL;
}

/* Move a call to a later phase; the flags ride along (its caller may set
 * TF_SLEEPING meanwhile, hence the read-modify-write). Relaxed: these moves
 * happen under the pool lock and publish nothing to the caller (T_DONE and
 * T_DROPPED, which do, are published with acq_rel below). A plain task's
 * phase is read by nobody: it is not kept, which saves two locked
 * instructions per task. */
static inline void task_advance(struct bh_task *t, enum bhp_phase from, enum bhp_phase to)
{
	if (task_is_call(t))
		atomic_fetch_add_explicit(task_word(t), (uint32_t)(to - from), memory_order_relaxed);
}

/* A thread could not be started for t: back to T_IDLE, under the lock. */
static inline void task_unstart(struct bh_task *t)
{
	if (task_is_call(t))
		atomic_fetch_sub_explicit(task_word(t), T_RUNNING - T_IDLE, memory_order_relaxed);
}

/* What the worker keeps of a task once run returns: a plain task without
 * done may have freed itself, so it is not touched again. */
struct bhp_ran {
	bh_task_done_fn *done;
	uint32_t flags; /* a call's state flags when T_DONE was published */
	bool call;
};

/* Run t on its worker. false: run forked and this is the child, whose copy
 * of the task is the parent's to report; nothing more is done with it here
 * (not even the latency sample: the parent's copy of this thread sends it). */
static inline bool task_run(struct bh_pool *p, struct bh_task *t, struct bhp_ran *r)
{
	uint64_t t0 = sample_start(p);

	r->done = t->done;
	r->call = task_is_call(t);
	t->run(t);
	if (pool_inherited(p))
		return false;
	if (BHI_UNLIKELY(t0))
		bhp_sample_run(p, t0);
	pool_point(p, BHP_AFTER_RUN, t);
	return true;
}

/* Under the lock: the task is over; it counts as completed or abandoned in
 * the same critical section, so a caller released by T_DONE, or a done
 * callback, always finds itself counted. A call publishes T_DONE: acq_rel,
 * the release pairing with the caller's acquire load in task_await (it sees
 * what run wrote), the acquire with its TF_ABANDONED CAS in task_give_up.
 * Exactly one of the two lands first. */
static inline void task_finish_locked(struct bh_pool *p, struct bh_task *t, struct bhp_ran *r)
{
	p->active--;
	if (r->call) {
		r->flags = atomic_fetch_add_explicit(task_word(t), T_DONE - T_RUNNING,
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
static inline void task_report(struct bh_pool *p, struct bh_task *t, const struct bhp_ran *r)
{
	if (!r->call) {
		if (r->done)
			r->done(t, 0);
	} else if (r->flags & TF_ABANDONED) {
		if (r->done)
			r->done(t, -ETIMEDOUT);
	} else if (r->flags & TF_SLEEPING) {
		bhi_sync_wake(p->ops->sync, task_word(t), false);
	}
}

/* CALLER_RUNS, counted by the caller: run t on this thread and report it
 * (a call's caller is this thread: T_DONE needs no ordering). */
static inline void task_run_here(struct bh_pool *p, struct bh_task *t)
{
	bh_task_done_fn *done = t->done;
	bool call = task_is_call(t);
	uint64_t t0;

	task_advance(t, T_IDLE, T_RUNNING);
	t0 = sample_start(p);
	t->run(t);
	if (BHI_UNLIKELY(t0))
		bhp_sample_run(p, t0);
	if (call)
		task_advance(t, T_RUNNING, T_DONE);
	else if (done)
		done(t, 0);
}

/* Under the lock: drop a task just taken off the queue. A call's caller is
 * told with T_DROPPED (acq_rel: the release pairs with the caller's acquire
 * load in task_await, it owns the task again and may free it at once; the
 * acquire with its TF_SLEEPING CAS, so a sleeper is seen): returns the word
 * to wake, if its caller sleeps. A plain task is left for the caller of this
 * to pass to done after the unlock. */
static inline _Atomic uint32_t *task_drop_queued_locked(struct bh_pool *p, struct bh_task *t)
{
	uint32_t old;

	p->discarded++;
	if (!task_is_call(t))
		return NULL;
	old = atomic_fetch_add_explicit(task_word(t), T_DROPPED - T_QUEUED, memory_order_acq_rel);
	return old & TF_SLEEPING ? task_word(t) : NULL;
}

/* Under the lock: a running call is marked abandoned, unless T_DONE landed
 * first. acq_rel pairs with the worker's fetch_add in task_finish_locked:
 * exactly one of T_DONE and TF_ABANDONED lands first. Returns the word as
 * the CAS left it. */
static inline uint32_t task_abandon_locked(_Atomic uint32_t *st, uint32_t s)
{
	while (task_phase(s) == T_RUNNING &&
	       !atomic_compare_exchange_strong_explicit(st, &s, s | TF_ABANDONED,
							memory_order_acq_rel, memory_order_acquire))
		;
	return s;
}

/* The caller gives up (deadline or cancellation). Still queued: the task is
 * taken off the queue and never runs; done gets -ECANCELED now. Running: it
 * is marked abandoned and keeps its thread and permit until run returns;
 * the worker then gives it to done. Already done or dropped: that outcome
 * won the race and is returned instead (0 or -ECANCELED). */
static inline int task_give_up(struct bh_pool *p, struct bh_task *t)
{
	_Atomic uint32_t *st = task_word(t);
	uint32_t s, excess = 0;
	bool queued;

	pool_point(p, BHP_ABANDON, t);
	pool_lock(p);
	/* acquire: pairs with the acq_rel publication of T_DONE or T_DROPPED */
	s = atomic_load_explicit(st, memory_order_acquire);
	queued = task_phase(s) == T_QUEUED;
	if (queued) {
		tq_remove(p, t);
		p->abandoned++;
		/* its permit goes to the cache in the critical section that
		 * freed its queue slot, as a worker's does (docs/pool.md): the
		 * slot is free at once, done included */
		cache_put_locked(p);
		if (BHI_UNLIKELY(bhk_attached(p->adm)))
			bhp_cache_fit_locked(p);
		excess = cache_trim_locked(p);
	} else if (task_phase(s = task_abandon_locked(st, s)) == T_RUNNING) {
		p->abandoned++;
		p->abandoned_running++;
	}
	pool_unlock(p);
	if (queued) {
		int cs;

		if (excess)
			bh_release(p->adm, excess);
		/* Still inside bh_pool_call's cleanup region: a cancellation
		 * acted on at a cancellation point in done would run
		 * call_cancelled, which would give the call up again (done
		 * twice, the permit twice, the task unlinked twice). Deferred:
		 * the request stays pending for the next cancellation point. */
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
		if (t->done)
			t->done(t, -ECANCELED);
		pthread_setcancelstate(cs, NULL);
		return -ETIMEDOUT;
	}
	return task_phase(s) == T_RUNNING ? -ETIMEDOUT : task_phase(s) == T_DONE ? 0 : -ECANCELED;
}

/* The caller waits for its call's outcome until deadline: 0 (T_DONE),
 * -ECANCELED (T_DROPPED), or what task_give_up says once it passes. */
static inline int task_await(struct bh_pool *p, struct bh_task *t, uint64_t deadline)
{
	_Atomic uint32_t *st = task_word(t);

	for (;;) {
		/* acquire: pairs with the acq_rel publication of T_DONE
		 * (task_finish_locked) or T_DROPPED (task_drop_queued_locked) */
		uint32_t s = atomic_load_explicit(st, memory_order_acquire);

		if (task_phase(s) == T_DONE)
			return 0;
		if (task_phase(s) == T_DROPPED)
			return -ECANCELED;
		/* acq_rel pairs with those same fetch_adds: either they see
		 * TF_SLEEPING and wake, or this CAS fails and re-reads */
		if (!(s & TF_SLEEPING)) {
			if (!atomic_compare_exchange_weak_explicit(st, &s, s | TF_SLEEPING,
								   memory_order_acq_rel,
								   memory_order_relaxed))
				continue;
			s |= TF_SLEEPING;
		}
		/* EINTR, EAGAIN and spurious wakeups re-check the word; the
		 * deadline is absolute, so retrying never extends it. */
		if (bhi_sync_wait(p->ops->sync, BHI_WAIT_CALL, st, s, deadline) == -ETIMEDOUT)
			return task_give_up(p, t);
	}
}

/* Relaxed: a flag polled by run, publishing nothing. */
static inline bool task_abandoned(const struct bh_task *t)
{
	return atomic_load_explicit(task_word(t), memory_order_relaxed) & TF_ABANDONED;
}

#endif /* BH_POOL_TASK_H */
