/* Finding dead processes and taking back what they held.
 *
 * A process is dead when its slot is taken but its liveness lock is gone
 * (lock.c). What it held is in its ledgers and in the queue nodes granted
 * to it. Two ways to take it back, both under the lock:
 *
 *  - reclaim(): every ledger of the dead is closed, so each is exact: add
 *    their sum back to the word, take its waiters out of the queue, serve.
 *    No other process is disturbed.
 *  - rebuild(): a ledger of the dead is open (it died inside a window, so
 *    whether its CAS happened is unknown), or it died holding the lock (so
 *    the word, the queue and the nodes may be half-updated). Freeze the
 *    word (every fast-path CAS then fails and goes slow, to the lock we
 *    hold), wait until no window of a living process is open, and compute
 *    the word again from the ledgers and nodes of the living alone: the
 *    dead's ambiguous windows need no answer, their share is simply what
 *    is not accounted to anyone alive. The queue is relinked in arrival
 *    order from the living nodes' tickets.
 *
 * Windows that change a ledger without a CAS on the word (claims,
 * transfers) check for the freeze themselves (fast.c, win_open_checked).
 *
 * Either can die half-way, and the next lock holder then rebuilds: the
 * permits come out right from the ledgers of the living. The counts of
 * what was reclaimed and of the deaths would not, so every recovery of the
 * dead keeps a log (below) that the next lock holder finishes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_TMPFILE, F_OFD_*, secure_getenv, qsort_r */
#endif
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hooks.h"
#include "seg.h"

#define NONE UINT32_MAX
#define SCAN_NS (100 * BH_MSEC)      /* at most one scan this often, host-wide */
#define PATIENCE_NS (50 * BH_MSEC)   /* a window that stays open longer makes a
				      * rebuild that can wait give up for now */

static uint32_t owner_of(const struct bhs_att *a, _Atomic uint32_t *owner)
{
	uint32_t o = atomic_load_explicit(owner, memory_order_relaxed) - 1u;

	return o < a->nprocs ? o : NONE;
}

/* What process pidx holds: its ledgers and the nodes granted to it; *open
 * when one of its ledgers is inside a window. */
uint64_t bhs_proc_holdings(struct bhs_att *a, uint32_t pidx, bool *open)
{
	uint64_t held = 0;

	*open = false;
	for (uint32_t i = 0; i < a->nslots; i++) {
		struct bhs_slot *s = slot_at(a, i);

		if (owner_of(a, &s->owner) != pidx)
			continue;
		*open |= slot_open(s);
		held += held_of(s, atomic_load_explicit(&s->ledger, memory_order_relaxed));
	}
	for (uint32_t i = 0; i < nqnodes(a); i++) {
		struct bhs_qnode *q = qnode_at(a, i);

		/* acquire: pairs with bhs_notify_locked()'s release of the
		 * state, as the owner's own load does */
		if (owner_of(a, &q->owner) == pidx &&
		    atomic_load_explicit(&q->state, memory_order_acquire) == QS_GRANTED)
			held += atomic_load_explicit(&q->n, memory_order_relaxed);
	}
	return held;
}

/* ---- the recovery log ------------------------------------------------------
 *
 * A recovery of the dead gives their permits back (a change of the word),
 * clears their process slots and counts them in reclaimed and deaths.
 * Killed between the first and the last, its recoverer would leave the
 * counts off by what it was giving back: counted twice, or not at all.
 * So it first writes down what the counters will read once it is through
 * (log_open), then commits by flipping the word's S_EPOCH: reclaim() in the
 * same CAS that gives the permits back; a rebuild, whose word is frozen, in
 * a store of the frozen word, after which it counts and then thaws to the
 * word it logged. The dead it cleared wait as PS_RECLAIMED (nobody takes
 * them, every census counts them dead) until log_close frees them.
 *
 * Whoever takes the lock over from a dead holder replays an open log first
 * (replay): committed -- the word's epoch is the log's -- it finishes: the
 * thaw if the word is still frozen (nothing can have changed it: only the
 * lock holder freezes), the counts, the frees. Not committed, it drops the
 * log: the permits are still off the word and the dead still taken or
 * reclaimed, so the rebuild that follows counts them all afresh, and the
 * dead recoverer with them. Every step of the finish can be done again, so
 * a death in the replay leaves the same log to the next holder.
 */

#define LOG_OPEN 1u
#define LOG_EPOCH 2u /* the word's S_EPOCH is set once the recovery commits */

/* thaw: a rebuild's word after it (S_EPOCH flipped), 0 for reclaim(). */
static void log_open(struct bhs_att *a, uint32_t pidx, uint64_t reclaimed, uint64_t deaths,
		     uint64_t w, uint64_t thaw)
{
	struct bhs_seg *g = a->seg;
	uint32_t gen = pidx == NONE ? 0
				    : atomic_load_explicit(&a->procs[pidx].gen, memory_order_relaxed);

	atomic_store_explicit(&g->rlog.pidx, pidx, memory_order_relaxed);
	atomic_store_explicit(&g->rlog.gen, gen, memory_order_relaxed);
	atomic_store_explicit(&g->rlog.reclaimed,
			      atomic_load_explicit(&g->reclaimed, memory_order_relaxed) + reclaimed,
			      memory_order_relaxed);
	atomic_store_explicit(&g->rlog.deaths,
			      atomic_load_explicit(&g->deaths, memory_order_relaxed) + deaths,
			      memory_order_relaxed);
	atomic_store_explicit(&g->rlog.thaw, thaw, memory_order_relaxed);
	/* release: a replay that sees the log open (acquire) sees its
	 * contents. The commit flips the epoch w has now. */
	atomic_store_explicit(&g->rlog.open, LOG_OPEN | ((w & S_EPOCH) ? 0 : LOG_EPOCH),
			      memory_order_release);
}

/* Whether word w is past the commit of the recovery whose log reads open. */
static bool committed(uint32_t open, uint64_t w)
{
	return (w & S_EPOCH) == ((open & LOG_EPOCH) ? S_EPOCH : 0);
}

/* The counts, after what they count is committed. The deaths are counted
 * after what they gave back: a reader that sees deaths move (acquire load)
 * then finds their permits in reclaimed; counted first, it could read
 * reclaimed between the two and miss them. */
static void log_count(struct bhs_seg *g)
{
	atomic_store_explicit(&g->reclaimed,
			      atomic_load_explicit(&g->rlog.reclaimed, memory_order_relaxed),
			      memory_order_relaxed);
	/* release: for a reader that loads deaths with acquire (tests and
	 * stress_shm do, then read reclaimed) */
	atomic_store_explicit(&g->deaths, atomic_load_explicit(&g->rlog.deaths, memory_order_relaxed),
			      memory_order_release);
}

static void free_proc(struct bhs_att *a, uint32_t pidx);

/* The dead slots the recovery cleared are free, and the log is closed.
 * pidx: a reclaim()'s process; NONE: a rebuild's, which counted every
 * reclaimed slot (its census finds each taken and not living). */
static void log_close(struct bhs_att *a, uint32_t pidx)
{
	for (uint32_t i = 0; i < a->nprocs; i++)
		if ((pidx == NONE || i == pidx) &&
		    atomic_load_explicit(&a->procs[i].state, memory_order_relaxed) == PS_RECLAIMED)
			free_proc(a, i);
	/* relaxed: read only by a later holder of the lock, which orders it */
	atomic_store_explicit(&a->seg->rlog.open, 0, memory_order_relaxed);
}

static void clear_proc(struct bhs_att *a, uint32_t pidx);

/* The lock was taken over from a dead holder: finish or drop its log.
 * The dead holder never unlocked, so no release of its pairs with an
 * acquire of ours: its stores are seen because it is dead (its exit, which
 * the liveness probe and the takeover's CAS come after, drained them). */
static void replay(struct bhs_att *a)
{
	struct bhs_seg *g = a->seg;
	/* acquire: with log_open()'s release, the log's contents before its
	 * open mark, for whatever the exit leaves unordered */
	uint32_t open = atomic_load_explicit(&g->rlog.open, memory_order_acquire);
	uint64_t w = atomic_load_explicit(&g->word, memory_order_acquire);
	uint32_t pidx, gen;

	if (!open)
		return;
	if (!committed(open, w)) {
		/* relaxed: as in log_close() */
		atomic_store_explicit(&g->rlog.open, 0, memory_order_relaxed);
		return; /* the rebuild that follows counts it all */
	}
	pidx = atomic_load_explicit(&g->rlog.pidx, memory_order_relaxed);
	gen = atomic_load_explicit(&g->rlog.gen, memory_order_relaxed);
	/* A reclaim() that committed and had not cleared its process yet, or
	 * not through: the generation moves last, and only there. */
	if (pidx < a->nprocs &&
	    atomic_load_explicit(&a->procs[pidx].gen, memory_order_relaxed) == gen &&
	    atomic_load_explicit(&a->procs[pidx].state, memory_order_relaxed) != PS_FREE)
		clear_proc(a, pidx);
	log_count(g);
	BHS_POINT(BP_REPLAYED);
	if (pidx == NONE && (w & S_FROZEN)) /* a rebuild that committed and did not thaw */
		/* release (seq_cst): the thaw, as in rebuild() */
		atomic_store_explicit(&g->word, atomic_load_explicit(&g->rlog.thaw, memory_order_relaxed),
				      memory_order_seq_cst);
	log_close(a, pidx);
}

/* The slot holds nothing from here on. Its in and out words stay (closed):
 * they are the acquires and releases its threads made, and the next owner
 * goes on counting from them; the ledger takes up the difference. */
static void free_slot(struct bhs_slot *s)
{
	uint64_t in = atomic_load_explicit(&s->in, memory_order_relaxed) & S_HELD_MASK;
	uint64_t out = atomic_load_explicit(&s->out, memory_order_relaxed) & S_HELD_MASK;

	atomic_store_explicit(&s->in, in, memory_order_relaxed);
	atomic_store_explicit(&s->out, out, memory_order_relaxed);
	atomic_store_explicit(&s->ledger, (out - in) & S_HELD_MASK, memory_order_relaxed);
	atomic_store_explicit(&s->debit, 0, memory_order_relaxed);
	/* held_of() is 0 again: ledger + in - out - 0 */
	/* release: the next owner's acquire CAS sees the zeroed holdings and
	 * the counts it continues */
	atomic_store_explicit(&s->owner, 0, memory_order_release);
}

static void clear_node(struct bhs_att *a, uint32_t qi)
{
	struct bhs_qnode *q = qnode_at(a, qi);

	if (qi >= a->nslots) {
		bhs_extra_free_locked(a, qi);
		return;
	}
	atomic_store_explicit(&q->kind, QK_NONE, memory_order_relaxed);
	atomic_store_explicit(&q->owner, 0, memory_order_relaxed);
	atomic_store_explicit(&q->state, QS_IDLE, memory_order_relaxed);
}

/* The controller role goes with the slot of its holder (role.c): left in
 * the role word, the holder's value (slot and a 15-bit generation) would
 * come back to life in the slot's process 32768 generations later, and
 * nobody could take the role. Under the lock, as every write of it. */
static void drop_role(struct bhs_att *a, uint32_t pidx)
{
	uint32_t v = atomic_load_explicit(&a->seg->role, memory_order_relaxed);

	if (v != 0 && (v & 0xffffu) == pidx + 1u)
		atomic_store_explicit(&a->seg->role, 0, memory_order_relaxed);
}

/* Clear process pidx's ledgers and nodes: nothing it held is counted
 * anywhere any more (the caller has put it back), and it holds no role.
 * Doing it again changes nothing. */
static void clear_holdings(struct bhs_att *a, uint32_t pidx)
{
	struct bhs_proc *p = &a->procs[pidx];

	drop_role(a, pidx);
	for (uint32_t i = 0; i < nqnodes(a); i++)
		if (owner_of(a, &qnode_at(a, i)->owner) == pidx)
			clear_node(a, i);
	for (uint32_t i = 0; i < a->nslots; i++)
		if (owner_of(a, &slot_at(a, i)->owner) == pidx)
			free_slot(slot_at(a, i));
	atomic_store_explicit(&p->pid, 0, memory_order_relaxed);
	atomic_store_explicit(&p->shared, 0, memory_order_relaxed);
}

/* A dead process cleared, its slot left PS_RECLAIMED for the recovery to
 * free once it has counted it. The state moves before the generation: a
 * replay that finds the logged generation clears it again, whatever the
 * state, and no slot is ever left taken (PS_LIVE) under a new generation,
 * where the next scan would find a second death. */
static void clear_proc(struct bhs_att *a, uint32_t pidx)
{
	struct bhs_proc *p = &a->procs[pidx];

	clear_holdings(a, pidx);
	atomic_store_explicit(&p->state, PS_RECLAIMED, memory_order_relaxed);
	BHS_POINT(BP_CLEARED);
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_relaxed);
}

/* Slot pidx is free for the next process. */
static void free_proc(struct bhs_att *a, uint32_t pidx)
{
	/* release: the clearing before PS_FREE; pairs with claim_proc()'s
	 * acquire CAS, so the next owner starts from it */
	atomic_store_explicit(&a->procs[pidx].state, PS_FREE, memory_order_release);
}

/* Give held permits back to the word; a recovery's commit flips its epoch
 * too (flip: S_EPOCH or 0). */
static void give_back(struct bhs_att *a, uint64_t held, uint64_t flip)
{
	uint64_t w = atomic_load_explicit(&a->seg->word, memory_order_relaxed);

	/* acq_rel: gives the permits back like any change of the word
	 * (cas_sword()); pairs with the next taker's acquire */
	while (!atomic_compare_exchange_weak_explicit(&a->seg->word, &w, s_give(w, held) ^ flip,
						      memory_order_acq_rel, memory_order_relaxed))
		;
}

static void unqueue_proc(struct bhs_att *a, uint32_t pidx)
{
	for (uint32_t i = 0; i < nqnodes(a); i++) {
		struct bhs_qnode *q = qnode_at(a, i);

		if (owner_of(a, &q->owner) == pidx &&
		    atomic_load_explicit(&q->linked, memory_order_relaxed) &&
		    queued_state(atomic_load_explicit(&q->state, memory_order_relaxed)))
			bhs_unqueue_locked(a, i);
	}
}

/* Every ledger of dead process pidx is closed: its holdings are exact. */
static void reclaim(struct bhs_att *a, uint32_t pidx, uint64_t held)
{
	unqueue_proc(a, pidx);
	log_open(a, pidx, held, 1, atomic_load_explicit(&a->seg->word, memory_order_relaxed), 0);
	BHS_POINT(BP_LOGGED);
	give_back(a, held, S_EPOCH); /* the commit */
	BHS_POINT(BP_COMMITTED);
	clear_proc(a, pidx);
	log_count(a->seg);
	BHS_POINT(BP_COUNTED);
	log_close(a, pidx);
	bhs_dispatch_locked(a);
}

/* This process detaches: what it still holds goes back, as at its death,
 * and the queue is served. Its process slot stays taken, with the lock
 * word naming it, until bhs_release_self() after the unlock: a slot freed
 * (its generation moved) under the lock would let a waiter for the lock
 * take it over from us as from a dead owner. */
void bhs_reclaim_self_locked(struct bhs_att *a)
{
	bool open;
	uint64_t held = bhs_proc_holdings(a, a->pidx, &open);

	unqueue_proc(a, a->pidx);
	give_back(a, held, 0);
	clear_holdings(a, a->pidx);
	bhs_dispatch_locked(a);
}

/* Process slot pidx, ours and holding nothing, goes to the next process,
 * without the lock. Leaving first, then the new generation, then free: a
 * look that reads the new generation then reads leaving or later, never
 * the taken state of the generation that ends here (bhs_proc_look()), so a
 * newcomer in the slot is never taken for us. */
void bhs_leave_proc(struct bhs_att *a, uint32_t pidx)
{
	struct bhs_proc *p = &a->procs[pidx];

	atomic_store_explicit(&p->state, PS_LEAVING, memory_order_relaxed);
	/* release: leaving before the generation; pairs with bhs_proc_look()'s
	 * acquire load of the generation */
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	free_proc(a, pidx);
}

/* After bhs_reclaim_self_locked() and the unlock: our slot holds nothing
 * (a scan meanwhile found us alive) and goes to the next process. */
void bhs_release_self(struct bhs_att *a)
{
	bhs_leave_proc(a, a->pidx);
}

/* Whether a node's owner was told something it has to wake for: a grant,
 * a WOKEN mark, a failure. */
static bool told_state(uint32_t st)
{
	return st == QS_WOKEN || st == QS_GRANTED || st == QS_SHUTDOWN || st == QS_INVALID;
}

/*
 * A process that told a sleeping waiter something defers the wake to its
 * unlock (bhs_notify_locked, bhs_flush_wakes). Dead after it told and
 * before the wake went out -- under the lock or just after giving it up --
 * it leaves the waiter asleep until its own poll for the dead (POLL_NS),
 * and a recovery does not tell it again: a WOKEN head is "on its way" to
 * serve(), a GRANTED node is out of the queue. A recovery cannot tell such
 * a waiter from one that is awake, so it wakes every one that was told
 * something: a wake nobody needed costs one futex call, after a death.
 * Async nodes' owners are told through their agent words, once each.
 * woken: WOKEN nodes too; a rebuild that ran has woken them already (its
 * census sends every WOKEN node back to WAITING with a wake, and a mark
 * its dispatch makes then wakes as any mark does).
 */
static void rewake_told(struct bhs_att *a, bool woken)
{
	uint64_t agents[(BHS_PROCS + 63) / 64] = { 0 };

	for (uint32_t i = 0; i < nqnodes(a); i++) {
		struct bhs_qnode *q = qnode_at(a, i);
		uint32_t o = owner_of(a, &q->owner);
		uint32_t kind = atomic_load_explicit(&q->kind, memory_order_relaxed);
		uint32_t st = atomic_load_explicit(&q->state, memory_order_relaxed);

		if (o == NONE || kind == QK_NONE || !told_state(st) || (st == QS_WOKEN && !woken))
			continue;
		if (kind != QK_ASYNC)
			bhs_wake_later(a, &q->state, false);
		else if (!(agents[o / 64] & (1ull << (o % 64)))) {
			agents[o / 64] |= 1ull << (o % 64);
			bhs_wake_later(a, &a->procs[o].agent, true);
		}
	}
}

/* Reclaim every dead process; false when none was found. */
bool bhs_scan_locked(struct bhs_att *a)
{
	bool found = false, open, rebuild = false;

	for (uint32_t i = 0; i < a->nprocs; i++) {
		uint32_t gen, st;
		uint64_t held;

		if (bhs_proc_look(a, i, &gen) != WHO_DEAD)
			continue;
		/* Dead at generation gen: its slot moves only under the lock,
		 * which we hold, so what we read now is its. */
		st = atomic_load_explicit(&a->procs[i].state, memory_order_relaxed);
		found = true;
		held = bhs_proc_holdings(a, i, &open);
		/* A reclaimed slot under a lock taken normally is damage: the
		 * recovery that left it would have been replayed. A rebuild
		 * counts it as dead whatever it holds. */
		if (open || st == PS_RECLAIMED) {
			rebuild = true; /* rebuild() reclaims every dead process */
			continue;
		}
		reclaim(a, i, held);
	}
	if (rebuild)
		bhs_rebuild_locked(a, false); /* it wakes the told */
	else if (found)
		rewake_told(a, true);
	return found;
}

/* Look for the dead, at most once per SCAN_NS host-wide. The probes run
 * without the lock; the lock is taken only when someone is found. */
bool bhs_maybe_scan(struct bhs_att *a)
{
	uint64_t now = bh_now_ns();
	uint64_t last = atomic_load_explicit(&a->seg->scan_ns, memory_order_relaxed);
	bool any = false, found;

	if (now - last < SCAN_NS && last <= now)
		return false;
	if (!atomic_compare_exchange_strong_explicit(&a->seg->scan_ns, &last, now,
						     memory_order_relaxed, memory_order_relaxed))
		return false;
	for (uint32_t i = 0; i < a->nprocs && !any; i++) {
		uint32_t gen;

		any = bhs_proc_look(a, i, &gen) == WHO_DEAD;
	}
	if (!any || (!att_proc(a) && bhs_register(a) < 0))
		return false;
	bhs_lock(a);
	found = bhs_scan_locked(a);
	bhs_unlock(a);
	return found;
}

/* ---- rebuild ---------------------------------------------------------------- */

struct census {
	uint64_t live[(BHS_PROCS + 63) / 64];
	uint64_t taken[(BHS_PROCS + 63) / 64]; /* not free at the census */
	uint32_t gen[BHS_PROCS];               /* of the taken, at the census */
	uint64_t held;
	uint32_t nq;
};

static bool is_live(const struct census *c, uint32_t o)
{
	return o != NONE && (c->live[o / 64] >> (o % 64) & 1);
}

/* Wait until no living process has a window open. A process that dies
 * meanwhile stops counting as living. false: a window stayed open past
 * PATIENCE_NS and the caller may give up. */
static bool windows_closed(struct bhs_att *a, struct census *c, bool must)
{
	uint64_t start = bh_now_ns();

	for (uint32_t i = 0; i < a->nslots; i++) {
		struct bhs_slot *s = slot_at(a, i);
		uint32_t o = owner_of(a, &s->owner);

		/* seq_cst: after the freeze, as claims' Dekker check needs */
		while (is_live(c, o) && slot_open(s)) {
			if (bh_now_ns() - start > PATIENCE_NS) {
				if (!bhs_proc_alive(a, o)) {
					c->live[o / 64] &= ~(1ull << (o % 64));
					break;
				}
				if (!must)
					return false;
				start = bh_now_ns();
			}
			sched_yield();
		}
	}
	return true;
}

static int by_ticket(const void *x, const void *y, void *arg)
{
	struct bhs_att *a = arg;
	uint64_t tx = atomic_load_explicit(&qnode_at(a, *(const uint32_t *)x)->ticket,
					   memory_order_relaxed);
	uint64_t ty = atomic_load_explicit(&qnode_at(a, *(const uint32_t *)y)->ticket,
					   memory_order_relaxed);

	return tx < ty ? -1 : tx > ty;
}

/* The living's queue nodes: held permits of granted ones, queued ones
 * relinked in arrival order (into a->order), woken heads sent back to
 * waiting (the head is served afresh below); the dead's are dropped. */
static void census_nodes(struct bhs_att *a, struct census *c)
{
	struct bhs_seg *g = a->seg;
	uint32_t n = 0;

	for (uint32_t i = 0; i < nqnodes(a); i++) {
		struct bhs_qnode *q = qnode_at(a, i);
		uint32_t o = owner_of(a, &q->owner);
		/* acquire: pairs with bhs_notify_locked()'s release of the state */
		uint32_t st = atomic_load_explicit(&q->state, memory_order_acquire);

		atomic_store_explicit(&q->linked, 0, memory_order_relaxed);
		if (!is_live(c, o) || atomic_load_explicit(&q->kind, memory_order_relaxed) == QK_NONE)
			continue;
		if (st == QS_GRANTED)
			c->held += atomic_load_explicit(&q->n, memory_order_relaxed);
		else if (queued_state(st))
			a->order[n++] = i;
	}
	qsort_r(a->order, n, sizeof(a->order[0]), by_ticket, a);
	atomic_store_explicit(&g->qhead, 0, memory_order_relaxed);
	atomic_store_explicit(&g->qtail, 0, memory_order_relaxed);
	for (uint32_t k = 0; k < n; k++) {
		struct bhs_qnode *q = qnode_at(a, a->order[k]);
		uint32_t expect = QS_WOKEN;

		atomic_store_explicit(&q->prev, k ? a->order[k - 1] + 1 : 0, memory_order_relaxed);
		atomic_store_explicit(&q->next, k + 1 < n ? a->order[k + 1] + 1 : 0,
				      memory_order_relaxed);
		atomic_store_explicit(&q->linked, 1, memory_order_relaxed);
		/* acq_rel: like prewake_head()'s CAS, pairs with the owner's
		 * acquire load of the state in wait_loop(); it publishes no permits */
		if (atomic_compare_exchange_strong_explicit(&q->state, &expect, QS_WAITING,
							    memory_order_acq_rel,
							    memory_order_relaxed))
			bhs_wake_later(a, &q->state, false);
	}
	if (n) {
		atomic_store_explicit(&g->qhead, a->order[0] + 1, memory_order_relaxed);
		atomic_store_explicit(&g->qtail, a->order[n - 1] + 1, memory_order_relaxed);
	}
	c->nq = n;
}

/* The free list of extra nodes, from the nodes themselves. */
static void relist_extra(struct bhs_att *a)
{
	atomic_store_explicit(&a->seg->free_extra, 0, memory_order_relaxed);
	for (uint32_t i = nqnodes(a); i-- > a->nslots;)
		if (atomic_load_explicit(&qnode_at(a, i)->kind, memory_order_relaxed) == QK_NONE)
			bhs_extra_free_locked(a, i);
}

/* Which processes are taken, and which of those are alive now (their
 * liveness lock is held). A slot that changed hands while we looked
 * (bhs_proc_look()) counts as free: its detacher gave everything back
 * under the lock before, and its newcomer registered after the freeze. */
static void find_live(struct bhs_att *a, struct census *c)
{
	for (uint32_t i = 0; i < a->nprocs; i++) {
		int who = bhs_proc_look(a, i, &c->gen[i]);

		if (who == WHO_NONE)
			continue;
		c->taken[i / 64] |= 1ull << (i % 64);
		if (who == WHO_ALIVE)
			c->live[i / 64] |= 1ull << (i % 64);
	}
}

/* Clear the processes that were taken at the census but are not counted
 * among the living: their share was left out of the sums, so they must
 * go. A slot that was free at the census and is taken now registered
 * after it (registering takes no lock): it holds nothing, since nothing is
 * taken or claimed while the word is frozen, so leaving it out of the sums
 * was right, but it is not dead. The choice is made from the census, not
 * from a second look at liveness: a dead process can look alive for an
 * instant (a registrant that saw its slot free before it was taken holds
 * the slot's liveness lock until its CAS fails), and one kept for that
 * would have its ledgers reclaimed again by the next scan. A process dead
 * at the census stays dead: its slot is taken again only after it is
 * freed, under the lock we hold. */
static bool is_dead(const struct census *c, uint32_t i)
{
	return (c->taken[i / 64] >> (i % 64) & 1) && !is_live(c, i);
}

/* Only the process the census found dead is cleared, never a slot that
 * went on to another generation since (the lock keeps a dead one's slot
 * from moving, so this only guards the rule). */
static bool same_proc(struct bhs_att *a, const struct census *c, uint32_t i)
{
	return atomic_load_explicit(&a->procs[i].gen, memory_order_relaxed) == c->gen[i];
}

static void clear_dead(struct bhs_att *a, const struct census *c)
{
	for (uint32_t i = 0; i < a->nprocs; i++)
		if (is_dead(c, i) && same_proc(a, c, i))
			clear_proc(a, i);
}

static uint64_t count_dead(struct bhs_att *a, const struct census *c)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < a->nprocs; i++)
		n += is_dead(c, i);
	return n;
}

static bool rebuild(struct bhs_att *a, bool must)
{
	struct bhs_seg *g = a->seg;
	struct census c = { .held = 0 };
	uint64_t w, nw;
	int64_t before;

	/* seq_cst: the Dekker pair of win_open_checked; and it acquires every
	 * fast-path CAS before it, so their PEND stores are visible */
	w = atomic_fetch_or_explicit(&g->word, S_FROZEN, memory_order_seq_cst);
	BHS_POINT(BP_REBUILD);
	find_live(a, &c);
	BHS_POINT(BP_CENSUS);
	if (!windows_closed(a, &c, must)) {
		/* Nothing CASes a frozen word and we hold the lock: w is exact.
		 * release (seq_cst): the thaw, as at the end; fast paths acquire
		 * it with their CAS (cas_sword()). */
		atomic_store_explicit(&g->word, w & ~S_FROZEN, memory_order_seq_cst);
		atomic_fetch_add_explicit(&g->rebuild_waits, 1, memory_order_relaxed);
		return false;
	}
	for (uint32_t i = 0; i < a->nslots; i++) {
		struct bhs_slot *s = slot_at(a, i);

		/* windows_closed() loaded every word after the freeze and
		 * acquired their closes: these loads see those values */
		if (is_live(&c, owner_of(a, &s->owner)))
			c.held += held_of(s, atomic_load_explicit(&s->ledger, memory_order_relaxed));
	}
	census_nodes(a, &c);
	before = w_held(w);
	nw = w_make((int64_t)w_limit(w) - (int64_t)c.held, w_limit(w), 0) |
	     ((uint64_t)c.nq << W_NQ_SHIFT) | (w & (W_CLOSED | S_GRANT)) |
	     ((w & S_EPOCH) ^ S_EPOCH);
	log_open(a, NONE, before > (int64_t)c.held ? (uint64_t)before - c.held : 0,
		 count_dead(a, &c), w, nw);
	clear_dead(a, &c);
	BHS_POINT(BP_FREED);
	relist_extra(a);
	/* The commit: the frozen word's epoch flipped (nothing else changes a
	 * frozen word). seq_cst, as every store of a frozen word here: the
	 * fast paths' Dekker checks keep seeing it frozen. */
	atomic_store_explicit(&g->word, (w | S_FROZEN) ^ S_EPOCH, memory_order_seq_cst);
	BHS_POINT(BP_COMMITTED);
	log_count(g);
	/* release (seq_cst): the thaw; fast paths acquire it with their CAS */
	atomic_store_explicit(&g->word, nw, memory_order_seq_cst);
	BHS_POINT(BP_COUNTED);
	log_close(a, NONE);
	atomic_fetch_add_explicit(&g->rebuilds, 1, memory_order_relaxed);
	/* a close or a limit change that died half-way left waiters queued
	 * that it would have failed */
	bhs_fail_ruled_out_locked(a);
	bhs_dispatch_locked(a);
	return true;
}

/* must: we took the lock over from a dead owner, so whatever it left
 * half-done is repaired before anything else runs, however long a living
 * window takes to close. Otherwise (a scan found a death inside a window) a
 * window that stays open makes us give up for now: the word is thawed
 * unchanged and the next scan tries again. */
bool bhs_rebuild_locked(struct bhs_att *a, bool must)
{
	/* A log is found open only when its writer died holding the lock,
	 * and no handoff runs while a recovery log is open: at most one of
	 * the two is. */
	bool done;

	bhs_grant_replay_locked(a);
	replay(a);
	done = rebuild(a, must);
	rewake_told(a, !done);
	return done;
}

bool bhs_scan_now(bulkhead_t *bh)
{
	struct bhs_att *a = att_of(bh);

	atomic_store_explicit(&a->seg->scan_ns, 0, memory_order_relaxed);
	return bhs_maybe_scan(a);
}
