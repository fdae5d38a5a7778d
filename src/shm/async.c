/* Async waiters of a host-wide bulkhead.
 *
 * A grant may be made by any process, but the callback is the owner's code
 * and must run in the owner. Each process that queues an async node gets
 * one agent thread per bulkhead, started then: granters set the node's
 * state and bump the owner's agent word (a process-shared futex), and the
 * agent claims the permits into its own ledger and runs the callback. So a
 * host-wide bulkhead's callbacks run on the owner process's agent thread,
 * never under the internal lock (which other processes wait on), one at a
 * time; the rule is the core's: keep them short, never call back into the
 * same bulkhead from them except bh_cancel_async.
 *
 * The agent also sleeps with a timeout and looks for dead processes when it
 * wakes, so a process with async waiters finds deaths by itself.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include "lib/futex.h"
#include "seg.h"
#include "shm/dispatch.h"

#define NONE UINT32_MAX
#define KIND_HOST 0x5348u /* node->link.kind while queued on a host-wide bulkhead */

static __thread struct bhs_att *agent_self; /* the agent thread's own attachment */

static uint32_t node_qi(const struct bh_async *node)
{
	return (uint32_t)(uintptr_t)node->link.next - 1u;
}

static int result_of(uint32_t st)
{
	return st == QS_GRANTED ? 0 : st == QS_SHUTDOWN ? -ESHUTDOWN : -EINVAL;
}

/* A relative timeout, as before: the agent sleeps at most ns per round. */
static void agent_wait(_Atomic uint32_t *word, uint32_t v, uint64_t ns)
{
	bhi_futex_wait_for(word, v, ns, BHI_FUTEX_SHARED);
}

static void count_on_slot(struct bhs_att *a, enum bhi_counter c)
{
	bool shared;
	struct bhs_slot *s = bhs_slot_for(a, &shared);

	if (!s)
		return;
	if (shared)
		bhs_lock(a);
	bhs_slot_count(a, s, c);
	if (shared)
		bhs_unlock(a);
}

/* The callback forked, and this is the child, whose only thread is a copy
 * of the agent's: the node is the parent's (its agent frees it), fork_child
 * made the child nobody, and the agent's word and loop are the parent's.
 * Gone on, this copy would take the internal lock under the parent's name
 * and free the parent's node a second time, then serve the parent's agent
 * word for good. It ends here instead, as a thread that returns from the
 * callback and exits: the child exits with it unless it made threads of
 * its own. */
static void forked_in_callback(void)
{
	pthread_exit(NULL);
}

/* Deliver node i's final state (the agent, or the agent thread itself in
 * bh_cancel_async): claim it (a grant goes into our ledger in the same
 * window), run the callback, then free the node. Only agent threads
 * deliver, so a node is never freed under another deliverer. */
static void deliver(struct bhs_att *a, uint32_t i, uint32_t st)
{
	uint32_t qi = a->nslots + i;
	bool shared, ok;
	struct bhs_slot *s = bhs_slot_for(a, &shared);
	struct bh_async *node;

	if (!s)
		return;
	/* Under the lock, and only while anode[i] is set: the caller's look
	 * at anode[i] came before its look at the state, and in between the
	 * node may have been cancelled, freed and taken by another process
	 * (or by a blocking waiter of ours), whose grant is not ours to
	 * claim. anode[i] is set only under the lock (queue_async) and is
	 * cleared before every free of the node (bhs_cancel_async, below),
	 * so set under the lock means the node is an async node of ours. */
	bhs_lock(a);
	ok = atomic_load_explicit(&a->anode[i], memory_order_relaxed) != NULL &&
	     bhs_claim_on(a, s, qi, st, QS_DELIVERING, true);
	bhs_unlock(a);
	if (!ok)
		return;
	/* Whose state this is, read only now: the caller's look at anode[i]
	 * came before its look at the state, and in between the node it saw
	 * may have been cancelled (freed while WAITING) and the slot taken by
	 * a new async acquire, granted since. A claimed node is neither
	 * cancelled nor freed, so anode[i] now names the right caller.
	 * acquire: pairs with queue_async()'s release store. */
	node = atomic_load_explicit(&a->anode[i], memory_order_acquire);
	if (st == QS_GRANTED)
		count_on_slot(a, BHI_ACQUIRED);
	/* The node is the caller's: we only read it (fn, data, set before it
	 * was published in anode). Its delivery is recorded in anode[i],
	 * which bh_cancel_async reads; the callback may free the node. */
	node->fn(node, result_of(st));
	/* relaxed: stored before the agent was created (pthread_create
	 * orders it); a fork child's copy of the agent reads the copy */
	if (BHI_UNLIKELY(getpid() != atomic_load_explicit(&a->agent_pid, memory_order_relaxed)))
		forked_in_callback();
	pthread_mutex_lock(&a->mu);
	/* release: the callback's effects before the NULL; pairs with
	 * bhs_cancel_async()'s acquire loads of anode[i] */
	atomic_store_explicit(&a->anode[i], NULL, memory_order_release);
	pthread_cond_broadcast(&a->delivered);
	pthread_mutex_unlock(&a->mu);
	bhs_lock(a);
	bhs_extra_free_locked(a, qi);
	bhs_unlock(a);
}

static void deliver_all(struct bhs_att *a)
{
	for (uint32_t i = 0; i < a->nextra; i++) {
		/* acquire: pairs with the store in bhs_acquire_async */
		struct bh_async *node = atomic_load_explicit(&a->anode[i], memory_order_acquire);
		uint32_t st;

		if (!node)
			continue;
		BHS_POINT(BP_AGENT_SEEN);
		/* acquire: pairs with the granter's release of the state */
		st = atomic_load_explicit(&qnode_at(a, a->nslots + i)->state, memory_order_acquire);
		if (st >= QS_GRANTED && st <= QS_INVALID)
			deliver(a, i, st);
	}
}

static void *agent_main(void *arg)
{
	struct bhs_att *a = arg;
	struct bhs_proc *p = a->proc;

	agent_self = a;
	while (!atomic_load_explicit(&a->agent_stop, memory_order_acquire)) {
		/* acquire: pairs with the granter's increment */
		uint32_t v = atomic_load_explicit(&p->agent, memory_order_acquire);

		deliver_all(a);
		bhs_maybe_scan(a);
		if (!atomic_load_explicit(&a->agent_stop, memory_order_acquire))
			agent_wait(&p->agent, v, a->poll_ns);
	}
	/* Stopped (the last handle's bh_destroy): deliver what was decided
	 * before the stop, such as bh_close's failures, which bh_destroy(3)
	 * tells the caller to make just before it; a grant delivered here is
	 * held until the detach gives it back, as any permit still held.
	 * acquire (agent_stop, above): the states stored before the stop. */
	deliver_all(a);
	return NULL;
}

/* Start the agent if it is not running; it blocks every signal (signals
 * are the application's business, not our thread's). */
static int agent_start(struct bhs_att *a)
{
	sigset_t all, old;
	int r = 0;

	pthread_mutex_lock(&a->mu);
	if (!a->agent_on) {
		atomic_store_explicit(&a->agent_stop, false, memory_order_relaxed);
		/* relaxed: the agent reads it after pthread_create, which orders it */
		atomic_store_explicit(&a->agent_pid, getpid(), memory_order_relaxed);
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		r = -pthread_create(&a->agent, NULL, agent_main, a);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		a->agent_on = r == 0;
	}
	pthread_mutex_unlock(&a->mu);
	return r;
}

void bhs_agent_stop(struct bhs_att *a)
{
	pthread_mutex_lock(&a->mu);
	if (!a->agent_on) {
		pthread_mutex_unlock(&a->mu);
		return;
	}
	a->agent_on = false;
	pthread_mutex_unlock(&a->mu);
	atomic_store_explicit(&a->agent_stop, true, memory_order_release);
	/* release: agent_stop before the increment; pairs with agent_main()'s
	 * acquire load of the word, so an agent woken by it sees agent_stop */
	atomic_fetch_add_explicit(&a->proc->agent, 1, memory_order_release);
	bhi_futex_wake(&a->proc->agent, INT_MAX, BHI_FUTEX_SHARED);
	pthread_join(a->agent, NULL);
}

static int queue_async(struct bhs_att *a, struct bhs_slot *s, struct bh_async *node,
		       uint32_t n)
{
	uint32_t qi = bhs_extra_alloc_locked(a);
	int r;

	if (qi == NONE)
		return -EBUSY; /* no queue node left in the segment */
	atomic_store_explicit(&qnode_at(a, qi)->enqueued_ns, bhi_sync_now(a->sync),
			      memory_order_relaxed);
	r = bhs_admit_locked(a, s, qi, n, QK_ASYNC);
	if (r != 1) {
		bhs_extra_free_locked(a, qi);
		return r;
	}
	node->link.n = n;
	node->link.next = (struct bh_qlink *)(uintptr_t)(qi + 1u);
	node->link.kind = KIND_HOST;
	/* release: the agent reads the node's fields after loading it; no
	 * grant can be made before we unlock */
	atomic_store_explicit(&a->anode[qi - a->nslots], node, memory_order_release);
	return 1;
}

/* Permits taken at once begin this thread's hold, as on every other path
 * that takes them (bhs_try_slow, bhs_acquire_slow, the fast path). */
static int taken_now(struct bhs_att *a, uint32_t n)
{
	if (a->flags & BH_TRACK_HOLD)
		bhs_hold_begin(a, n);
	return 0;
}

int bhs_acquire_async(bulkhead_t *bh, struct bh_async *node, uint32_t n, bh_async_fn *fn,
		      void *data)
{
	struct bhs_att *a = att_of(bh);
	struct bhs_slot *s;
	bool shared, scanned = false;
	int r;

	node->link.kind = 0;
	node->fn = fn;
	node->data = data;
	if (!n_valid(n))
		return -EINVAL;
	if ((s = bhs_slot_for(a, &shared)) == NULL)
		return -ENOSPC;
	if (!shared && bhs_take_on(a, s, n))
		return taken_now(a, n);
	if ((r = agent_start(a)) < 0)
		return r;
	for (;;) {
		bhs_lock(a);
		r = queue_async(a, s, node, n);
		if (r == -EBUSY && scanned)
			bhs_slot_count(a, s, BHI_REJECTED);
		bhs_unlock(a);
		if (r == 0)
			return taken_now(a, n);
		if (r != -EBUSY || scanned)
			return r;
		scanned = true;
		if (!bhs_maybe_scan(a)) {
			bhs_lock(a);
			bhs_slot_count(a, s, BHI_REJECTED);
			bhs_unlock(a);
			return r;
		}
	}
}

/* 1: still queued, taken back, its callback will never run. 0: it was not
 * queued, and its callback has run by the time we return (the agent may
 * be running it right now: wait for it; on the agent thread itself, as
 * from another node's callback, deliver it here). node->link is written
 * only by the threads that queue and cancel the node, never by the agent;
 * whether it is still waiting for delivery is anode[i] == node. */
int bhs_cancel_async(bulkhead_t *bh, struct bh_async *node)
{
	struct bhs_att *a = att_of(bh);
	uint32_t qi, i, st;
	struct bhs_qnode *q;
	int cs;

	/* Not registered (a fork child before its first use): no node is
	 * ours, and our lock value is still the parent's, which the parent
	 * would find in the lock word, read as damage and take over while we
	 * are inside. */
	if (node->link.kind != KIND_HOST || !att_proc(a))
		return 0;
	qi = node_qi(node);
	if (qi < a->nslots || qi >= nqnodes(a))
		return 0;
	i = qi - a->nslots;
	q = qnode_at(a, qi);
	bhs_lock(a);
	/* acquire: pairs with bhs_notify_locked()'s release store of the state,
	 * as in deliver_all() */
	st = atomic_load_explicit(&q->state, memory_order_acquire);
	if (st == QS_WAITING &&
	    atomic_load_explicit(&a->anode[i], memory_order_relaxed) == node) {
		uint64_t enqueued = atomic_load_explicit(&q->enqueued_ns, memory_order_relaxed);

		bhs_unqueue_locked(a, qi);
		bhs_dispatch_locked(a);
		atomic_store_explicit(&a->anode[i], NULL, memory_order_relaxed);
		bhs_extra_free_locked(a, qi);
		node->link.kind = 0;
		bhs_unlock(a);
		atomic_fetch_add_explicit(&a->seg->cancelled, 1, memory_order_relaxed);
		bhs_record_wait(a, enqueued, -ECANCELED);
		return 1;
	}
	bhs_unlock(a);
	/* acquire: pairs with queue_async()'s release store of anode[i] */
	if (agent_self == a && atomic_load_explicit(&a->anode[i], memory_order_acquire) == node) {
		/* On the agent thread: a final state is delivered here; a node
		 * being delivered is one whose callback this very thread is
		 * running (the agent runs one at a time), which called us:
		 * waiting for it to finish would wait for ourselves. */
		if (st >= QS_GRANTED && st <= QS_INVALID)
			deliver(a, i, st);
		return 0;
	}
	/* Not a cancellation point (<bulkhead.h>): cancelled in the wait, the
	 * thread would unwind holding a->mu, and the agent and bh_destroy
	 * would wait for it forever. A pending cancel acts at the caller's
	 * next cancellation point. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	pthread_mutex_lock(&a->mu);
	/* acquire: pairs with deliver()'s release store of NULL: the callback has run */
	while (a->agent_on && atomic_load_explicit(&a->anode[i], memory_order_acquire) == node)
		pthread_cond_wait(&a->delivered, &a->mu);
	pthread_mutex_unlock(&a->mu);
	pthread_setcancelstate(cs, NULL);
	return 0;
}
