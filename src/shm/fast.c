/* Ledgers and the fast paths of a host-wide bulkhead.
 *
 * Every thread that uses the bulkhead owns one slot in the segment (its
 * ledger words and its counters), found through the process's thread map.
 * The ledgers are the truth about what the process holds: the shared word
 * is a cache that a recovery can rebuild from the ledgers of the living. A
 * fast path opens a window (S_PEND in one of the slot's words), CASes the
 * word, and closes the window with the new count in the same store, so a
 * process that dies anywhere leaves either closed ledgers that are exact or
 * an open window, which makes its recovery rebuild the word instead of
 * trusting those ledgers (reclaim.c). A single permit, the common case,
 * goes through the slot's in or out word, whose counts are also the
 * acquires and releases the fast path made: it stores nothing else.
 *
 * A permit taken on one thread may be released on another of the same
 * process: a release that finds too few permits in its own ledger moves
 * the difference from its siblings' ledgers (transfer()). The siblings'
 * ledgers are theirs alone to write, so a transfer debits them through a
 * separate word (debit) that only transfers write; held = ledger + in -
 * out - debit (seg.h).
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/layer.h" /* bhi_tindex */
#include "core/sample_hook.h"
#include "seg.h"
#include "shm/dispatch.h"

/* A window that changes a ledger without a CAS on the word (a claim, a
 * transfer) has no failed CAS to tell it a recovery froze the word: it
 * checks the word itself, Dekker-style, seq_cst on both sides (the freeze
 * is a seq_cst RMW followed by seq_cst loads of the ledgers). False: frozen,
 * the window is closed again, wait for the recovery and retry. */
static bool win_open_checked(struct bhs_att *a, struct bhs_slot *s, uint64_t *l)
{
	*l = atomic_load_explicit(&s->ledger, memory_order_relaxed);
	atomic_exchange_explicit(&s->ledger, *l | S_PEND, memory_order_seq_cst);
	if (!(atomic_load_explicit(&a->seg->word, memory_order_seq_cst) & S_FROZEN))
		return true;
	win_close(s, *l);
	return false;
}

/* ---- this thread's slot ----------------------------------------------------- */

static inline struct bhs_slot *my_slot(const struct bhs_att *a)
{
	uint32_t i = bhi_tindex - 1u;

	return BHI_LIKELY(i < BHS_TMAP) ? a->tmap[i] : NULL;
}

/* The handle this thread used last, by id, and its slot there. After a
 * locked RMW every load waits for it, so the chain of loads that finds the
 * slot is paid in full on every take and give: the thread index, then the
 * attachment's map (which needs the attachment), three deep with the
 * thread-local variable's offset; here two, and the attachment is not
 * needed at all (with the segment's word in the handle: docs/performance.md
 * has the figures). Ids are never reused, so a handle freed and another
 * allocated at its address never matches. The slot of a thread's index is
 * fixed for the attachment's life in a process, but not the thread's index:
 * a thread gives it back at exit (src/core/tindex.c) and may still call
 * after that, from another key's destructor, while a new thread has the
 * index and so the slot; it forgets the pair then (bhs_forget_last), and
 * so does a fork child's only thread, as the child drops the parent's
 * slots.
 * UINT64_MAX: none (ids count up from 0 and never get there). */
struct bhs_last {
	uint64_t id;
	struct bhs_slot *s;
};

static __thread struct bhs_last last __attribute__((tls_model("initial-exec"))) = { UINT64_MAX,
										      NULL };

static inline bool last_was(const bulkhead_t *bh)
{
	return BHI_LIKELY(last.id == bhi_id_of(bh));
}

/* my_slot(), remembered for bh's next calls. */
static inline struct bhs_slot *my_slot_kept(const bulkhead_t *bh, const struct bhs_att *a)
{
	struct bhs_slot *s = my_slot(a);

	if (s) {
		last.id = bhi_id_of(bh);
		last.s = s;
	}
	return s;
}

void bhs_forget_last(void)
{
	last.id = UINT64_MAX;
	last.s = NULL;
}

/* Take a free slot for this process: lock-free, the owner word decides.
 * acquire: pairs with the release that freed it (reclaim.c), so the
 * counters we continue are the last ones written. */
static struct bhs_slot *take_slot(struct bhs_att *a)
{
	uint32_t me = a->pidx + 1u;

	for (uint32_t i = 0; i < a->nslots; i++) {
		struct bhs_slot *s = slot_at(a, i);
		uint32_t free = 0;

		if (atomic_load_explicit(&s->owner, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong_explicit(&s->owner, &free, me,
							    memory_order_acquire,
							    memory_order_relaxed))
			return s;
	}
	return NULL;
}

/* This thread's slot, mapping one on first use (registering the process
 * first if needed: first use, or first use since fork). When no slot of its
 * own is free the thread uses the process's shared slot, and *shared says
 * that every window on it must be opened holding the internal lock. NULL:
 * the process could not register. */
struct bhs_slot *bhs_slot_for(struct bhs_att *a, bool *shared)
{
	uint32_t t = bhi_tindex ? bhi_tindex : bhi_tindex_assign();
	struct bhs_slot *s;

	*shared = false;
	if (!att_proc(a) && bhs_register(a) < 0)
		return NULL;
	if (t - 1u < BHS_TMAP) {
		if ((s = a->tmap[t - 1u]) != NULL)
			return s;
		if ((s = take_slot(a)) != NULL) {
			a->tmap[t - 1u] = s; /* only this thread reads its entry */
			return s;
		}
	}
	*shared = true;
	return a->shared;
}

/* ---- counters and hold times ------------------------------------------------- */

static inline void slot_add(struct bhs_slot *s, enum bhi_counter c)
{
	/* Sole writer (the thread, or the lock holder for the shared slot). */
	atomic_store_explicit(&s->c[c], atomic_load_explicit(&s->c[c], memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

void bhs_slot_count(struct bhs_att *a, struct bhs_slot *s, enum bhi_counter c)
{
	if (BHI_LIKELY(!(a->flags & BH_NO_STATS)))
		slot_add(s, c);
}

/* Whether the fast halves below count: the entry points test BH_NO_STATS
 * before they start (plain(), quiet()), so their copies need no look. */
static inline bool counts(const struct bhs_att *a)
{
	return !(a->flags & BH_NO_STATS);
}

_Static_assert(BHS_TMAP >= BHI_TINDEX_MAX, "a hold record for every thread index");

static struct bhi_hold *hold_slot(struct bhs_att *a)
{
	uint32_t i = bhi_tindex - 1u;

	if (!a->hold || i >= BHS_TMAP)
		return NULL;
	return bhi_hold_mine(&a->hold[i], bhi_tgen);
}

/* BH_TRACK_HOLD: as in the core (lib/hold.h), a thread's hold runs from
 * holding none of the bulkhead's permits to holding none again; per
 * process and thread. What the host has in flight bounds the thread's
 * count. */
void bhs_hold_begin(struct bhs_att *a, uint32_t n)
{
	struct bhi_hold *h = hold_slot(a);
	uint64_t w;

	if (!h)
		return;
	w = atomic_load_explicit(&a->seg->word, memory_order_relaxed);
	bhi_hold_take(h, n, (uint64_t)w_held(w), a->sync);
}

bool bhs_hold_end(struct bhs_att *a, uint32_t n, uint64_t *ns)
{
	struct bhi_hold *h = hold_slot(a);

	if (!h || !bhi_hold_give(h, n, a->sync, ns))
		return false;
	bhi_hist_add(&a->seg->hold[bhi_tindex % BHS_HOLDS], *ns);
	return true;
}

void bhs_record_hold(bulkhead_t *bh, uint64_t ns)
{
	struct bhs_att *a = att_of(bh);

	if (a->flags & BH_TRACK_HOLD)
		bhi_hist_add(&a->seg->hold[bhi_tindex % BHS_HOLDS], ns);
}

/* ---- take and give on one slot ------------------------------------------------ */

/* Take n permits into slot s if the word allows it now. The word is
 * loaded, not guessed from the slot (docs/design.md, "Fast paths"). An
 * acquire window needs no look at a->xfer: it only adds to its ledger (or
 * to in, take1_on), and a transfer only writes the debit. */
static inline __attribute__((always_inline)) bool take_on(struct bhs_att *a,
							  struct bhs_slot *s, uint32_t n,
							  bool count)
{
	_Atomic uint64_t *word = &a->seg->word;
	uint64_t l = win_open(s);
	uint64_t w = atomic_load_explicit(word, memory_order_relaxed);

	while (may_take(w, n)) {
		/* acq_rel: see cas_sword */
		if (atomic_compare_exchange_weak_explicit(word, &w, w_take(w, n), memory_order_acq_rel,
							  memory_order_acquire)) {
			BHS_POINT(BP_ACQ_CAS);
			win_close(s, l + n);
			if (count)
				slot_add(s, BHI_ACQUIRED);
			return true;
		}
	}
	win_close(s, l);
	return false;
}

bool bhs_take_on(struct bhs_att *a, struct bhs_slot *s, uint32_t n)
{
	return take_on(a, s, n, counts(a));
}

/* acq_rel: see cas_sword */
static inline bool cas_fast(_Atomic uint64_t *word, uint64_t *w, uint64_t nw)
{
	return atomic_compare_exchange_weak_explicit(word, w, nw, memory_order_acq_rel,
						     memory_order_acquire);
}

/* take1_on()'s CAS after a first try failed: the full look (may_take()). */
static __attribute__((noinline)) bool take1_retry(_Atomic uint64_t *word, uint64_t w)
{
	do {
		if (!may_take(w, 1))
			return false;
	} while (!cas_fast(word, &w, w_take(w, 1)));
	return true;
}

/* take_on() for one permit, through the slot's in word: its count is the
 * record and the count of the acquire in one store. The first try decides
 * with one test, as the core's (src/core/word.c, may_take_fast()). */
static inline __attribute__((always_inline)) bool take1_on(_Atomic uint64_t *word,
							   struct bhs_slot *s)
{
	uint64_t in = win_open_on(&s->in);
	uint64_t w = atomic_load_explicit(word, memory_order_relaxed);

	if (BHI_UNLIKELY((w & S_TAKE1_BLOCK) || !cas_fast(word, &w, w_take(w, 1))) &&
	    !take1_retry(word, w)) {
		win_close_on(&s->in, in);
		return false;
	}
	BHS_POINT(BP_ACQ_CAS);
	win_close_on(&s->in, in + 1);
	return true;
}

/* Is a transfer running? The look comes after the window's mark, with a
 * barrier between them: a compiler barrier when the transferer issues a
 * membarrier, a real fence when the kernel has none (XFER_FENCED, a
 * standing bit, so the common case is one load). acquire: pairs with the
 * transferer's clearing store, so the debit read after it is current. */
static inline bool xfer_running(struct bhs_att *a)
{
	uint32_t x;

	atomic_signal_fence(memory_order_seq_cst);
	x = atomic_load_explicit(&a->xfer, memory_order_acquire);
	if (BHI_LIKELY(!x))
		return false;
	if (x == XFER_FENCED) {
		/* pairs with membarrier_all()'s fence: either we see XFER_RUNNING
		 * or the transferer's wait_closed() sees our PEND mark */
		atomic_thread_fence(memory_order_seq_cst);
		x = atomic_load_explicit(&a->xfer, memory_order_acquire) & ~XFER_FENCED;
	}
	return x != 0;
}

/* Give n permits back from slot s if its ledger holds them and nobody
 * queued needs serving. */
static inline __attribute__((always_inline)) int give_on(struct bhs_att *a, struct bhs_slot *s,
							 uint32_t n, bool count)
{
	_Atomic uint64_t *word = &a->seg->word;
	uint64_t l = win_open(s);
	uint64_t w;

	if (BHI_UNLIKELY(xfer_running(a))) {
		win_close(s, l);
		return GIVE_XFER;
	}
	if (BHI_UNLIKELY(held_of(s, l) < n)) {
		win_close(s, l);
		return GIVE_SHORT;
	}
	w = atomic_load_explicit(word, memory_order_relaxed);
	while (may_give(w, n)) {
		/* acq_rel: see cas_sword */
		if (atomic_compare_exchange_weak_explicit(word, &w, w_give(w, n), memory_order_acq_rel,
							  memory_order_acquire)) {
			BHS_POINT(BP_REL_CAS);
			win_close(s, l - n);
			if (count)
				slot_add(s, BHI_RELEASED);
			return GIVE_OK;
		}
	}
	win_close(s, l);
	return GIVE_LOCK;
}

int bhs_give_on(struct bhs_att *a, struct bhs_slot *s, uint32_t n)
{
	return give_on(a, s, n, counts(a));
}

/* held_of() in the owner's window on out, whose value it has. */
static inline uint64_t held1_of(struct bhs_slot *s, uint64_t out)
{
	return (atomic_load_explicit(&s->ledger, memory_order_relaxed) +
		atomic_load_explicit(&s->in, memory_order_relaxed) - out -
		atomic_load_explicit(&s->debit, memory_order_relaxed)) &
	       S_HELD_MASK;
}

/* give_on() for one permit, through the slot's out word. */
static inline __attribute__((always_inline)) int give1_on(struct bhs_att *a, struct bhs_slot *s,
							  _Atomic uint64_t *word)
{
	uint64_t out = win_open_on(&s->out);
	uint64_t w;

	if (BHI_UNLIKELY(xfer_running(a))) {
		win_close_on(&s->out, out);
		return GIVE_XFER;
	}
	if (BHI_UNLIKELY(held1_of(s, out) == 0)) {
		win_close_on(&s->out, out);
		return GIVE_SHORT;
	}
	/* single tests first, as the core's give_word() */
	w = atomic_load_explicit(word, memory_order_relaxed);
	if (BHI_LIKELY(!(w & (S_NQ_MASK | S_FROZEN))) && BHI_LIKELY(w & W_HELD_MASK) &&
	    BHI_LIKELY(cas_fast(word, &w, w_give(w, 1))))
		goto given;
	while (may_give(w, 1))
		if (cas_fast(word, &w, w_give(w, 1)))
			goto given;
	win_close_on(&s->out, out);
	return GIVE_LOCK;
given:
	BHS_POINT(BP_REL_CAS);
	win_close_on(&s->out, out + 1);
	return GIVE_OK;
}

/* The same under the lock, serving the queue (the caller dispatches): the
 * word is not frozen while we hold the lock, so only the ledger and a
 * transfer can say no. */
int bhs_give_locked(struct bhs_att *a, struct bhs_slot *s, uint32_t n)
{
	uint64_t l = win_open(s), w;

	if (xfer_running(a)) {
		win_close(s, l);
		return GIVE_XFER;
	}
	if (held_of(s, l) < n) {
		win_close(s, l);
		return GIVE_SHORT;
	}
	w = load_sword(a);
	while (!cas_sword(a, &w, s_give(w, n)))
		;
	BHS_POINT(BP_REL_CAS);
	win_close(s, l - n);
	bhs_slot_count(a, s, BHI_RELEASED);
	return GIVE_OK;
}

/* ---- transfers between the slots of one process -------------------------------- */

static void membarrier_all(struct bhs_att *a)
{
	int saved = errno;

	if (atomic_load_explicit(&a->xfer, memory_order_relaxed) & XFER_FENCED)
		/* pairs with xfer_running()'s fence: either a window sees
		 * XFER_RUNNING or our wait_closed() sees its PEND mark */
		atomic_thread_fence(memory_order_seq_cst);
	else
		syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
	errno = saved;
}

static uint64_t wait_closed(struct bhs_slot *s)
{
	/* acquire (seq_cst): pairs with the windows' close: the counts and
	 * the debit read after it are current */
	while (slot_open(s))
		sched_yield();
	return atomic_load_explicit(&s->ledger, memory_order_relaxed);
}

static bool sibling(const struct bhs_att *a, const struct bhs_slot *s, const struct bhs_slot *t)
{
	return s != t && atomic_load_explicit(&s->owner, memory_order_relaxed) == a->pidx + 1u;
}

/* Inside t's window: debit need permits from this process's other slots,
 * which hold at least that many; returns what they gave (need). */
static uint64_t debit_siblings(struct bhs_att *a, struct bhs_slot *t, uint64_t need)
{
	uint64_t moved = 0;

	for (uint32_t i = 0; i < a->nslots && need; i++) {
		struct bhs_slot *s = slot_at(a, i);
		uint64_t h, k;

		if (!sibling(a, s, t))
			continue;
		h = held_of(s, wait_closed(s));
		k = h < need ? h : need;
		if (!k)
			continue;
		atomic_store_explicit(&s->debit,
				      atomic_load_explicit(&s->debit, memory_order_relaxed) + k,
				      memory_order_relaxed);
		BHS_POINT(BP_XFER);
		need -= k;
		moved += k;
	}
	return moved;
}

/* Make slot t hold at least n permits by debiting this process's other
 * slots, or find that the process holds fewer than n: -EOVERFLOW, nothing
 * changed. While it runs no other release window of the process changes a
 * ledger: xfer makes them step aside, and the membarrier orders that flag
 * before each thread's next PEND store, or that store before our look at
 * it; acquire windows only add, so a sum that misses one is merely older.
 * The credit to t is made inside t's window, so a death half-way leaves
 * an open window (reclaim.c). -EAGAIN: a recovery froze the word, retry. */
int bhs_transfer(struct bhs_att *a, struct bhs_slot *t, uint32_t n)
{
	uint64_t lt, have, sum;
	int r = 0;

	pthread_mutex_lock(&a->xmu);
	atomic_fetch_or_explicit(&a->xfer, XFER_RUNNING, memory_order_relaxed);
	membarrier_all(a);
	if (!win_open_checked(a, t, &lt)) {
		r = -EAGAIN;
		goto out;
	}
	have = held_of(t, lt);
	if (have >= n) { /* the shared slot: another thread of ours added meanwhile */
		win_close(t, lt);
		goto out;
	}
	sum = have;
	for (uint32_t i = 0; i < a->nslots && sum < n; i++)
		if (sibling(a, slot_at(a, i), t))
			sum += held_of(slot_at(a, i), wait_closed(slot_at(a, i)));
	if (sum < n) {
		win_close(t, lt);
		r = -EOVERFLOW;
		goto out;
	}
	lt += debit_siblings(a, t, n - have);
	win_close(t, lt);
out:
	/* release: a window that sees xfer clear sees every debit above */
	atomic_fetch_and_explicit(&a->xfer, ~XFER_RUNNING, memory_order_release);
	pthread_mutex_unlock(&a->xmu);
	return r;
}

/* Wait for a recovery that froze the word: it holds the lock. */
void bhs_wait_thaw(struct bhs_att *a)
{
	bhs_lock(a);
	bhs_unlock(a);
}

/* ---- claims: permits granted to a queue node go into a ledger --------------------- */

/* Move queue node qi from state expect to final in slot s's window; when
 * expect is GRANTED its permits go into the ledger in the same window, so
 * they are counted once whatever instant the process dies at. False when
 * the node was not in state expect (another thread of ours claimed it).
 * locked: the caller holds the lock (no freeze can be in force). */
bool bhs_claim_on(struct bhs_att *a, struct bhs_slot *s, uint32_t qi, uint32_t expect,
		  uint32_t final, bool locked)
{
	struct bhs_qnode *q = qnode_at(a, qi);
	uint32_t n = atomic_load_explicit(&q->n, memory_order_relaxed);
	uint64_t l;
	bool ok, grant = expect == QS_GRANTED;

	if (locked)
		l = win_open(s);
	else
		while (!win_open_checked(a, s, &l))
			bhs_wait_thaw(a);
	/* acquire: pairs with the granter's release of the state */
	ok = atomic_compare_exchange_strong_explicit(&q->state, &expect, final,
						     memory_order_acq_rel, memory_order_acquire);
	if (ok && grant)
		BHS_POINT(BP_CLAIM);
	win_close(s, ok && grant ? l + n : l);
	return ok;
}

/* ---- the entry points' fast halves -------------------------------------------------- */

/* From the core's take_word, for the paths that do not hand a host-wide
 * handle over whole (bhi_try_take, bh_acquire_async); false: the core goes
 * on to its slow path, which lands in this layer too. */
bool bhs_take_fast(bulkhead_t *bh, uint32_t n)
{
	struct bhs_att *a = att_of(bh);
	struct bhs_slot *s = my_slot(a);

	if (BHI_LIKELY(s != NULL) &&
	    (n == 1 ? take1_on(bhi_ext_word(bh), s) : take_on(a, s, n, counts(a)))) {
		if (BHI_UNLIKELY(a->flags & BH_TRACK_HOLD))
			bhs_hold_begin(a, n);
		return true;
	}
	return false;
}

/* The entry points the core hands a host-wide handle to whole (as tail
 * calls from its entry points): the fast take or give of one permit first,
 * on the slot this thread used last with this handle, and everything else
 * by tail call, so the common path calls nothing and saves no register
 * (the shape of the core's own fast path, src/core/word.c). Each loads only
 * the handle's first line and the thread's own: the id, the flags and the
 * segment's word are the handle's (backend.h). One permit's in and out
 * words count whatever the flags, and bhs_stats() reads them only without
 * BH_NO_STATS; n > 1 of BH_NO_STATS has its own copy (quiet()), and
 * BH_TRACK_HOLD goes the slow way. */
static inline bool plain(const bulkhead_t *bh, uint32_t n)
{
	return BHI_LIKELY(n == 1) && BHI_LIKELY(!(bhi_flags_of(bh) & BH_TRACK_HOLD));
}

static inline bool quiet(const struct bhs_att *a, const struct bhs_slot *s, uint32_t n)
{
	return s != NULL && n != 1 && n_valid(n) && /* one permit: plain() tried it */
	       (a->flags & (BH_TRACK_HOLD | BH_NO_STATS)) == BH_NO_STATS;
}

/* Not the thread's last handle, or not one plain permit, or no permit free:
 * find the slot the long way (and keep it), the plain take if the entry
 * point could not try it, then the rest. */
static __attribute__((noinline)) int try_rest(bulkhead_t *bh, uint32_t n)
{
	struct bhs_att *a = att_of(bh);
	bool missed = !last_was(bh); /* else the entry point tried plain() */
	struct bhs_slot *s = my_slot_kept(bh, a);

	if (missed && s && plain(bh, n) && take1_on(bhi_ext_word(bh), s))
		return 0;
	if (quiet(a, s, n) && take_on(a, s, n, false))
		return 0;
	return bhs_try_slow(a, n);
}

BHI_HOT_ENTRY int bhs_try_acquire(bulkhead_t *bh, uint32_t n)
{
	if (last_was(bh) && plain(bh, n) && take1_on(bhi_ext_word(bh), last.s))
		return 0;
	return try_rest(bh, n);
}

static __attribute__((noinline)) int acquire_rest(bulkhead_t *bh, uint32_t n,
						  uint64_t deadline_ns)
{
	struct bhs_att *a = att_of(bh);
	bool missed = !last_was(bh); /* else the entry point tried plain() */
	struct bhs_slot *s = my_slot_kept(bh, a);

	if (missed && s && plain(bh, n) && take1_on(bhi_ext_word(bh), s))
		return 0;
	if (quiet(a, s, n) && take_on(a, s, n, false))
		return 0;
	return bhs_acquire_slow(a, n, deadline_ns);
}

BHI_HOT_ENTRY int bhs_acquire(bulkhead_t *bh, uint32_t n, uint64_t deadline_ns)
{
	if (last_was(bh) && plain(bh, n) && take1_on(bhi_ext_word(bh), last.s))
		return 0;
	return acquire_rest(bh, n, deadline_ns);
}

/* Everything but a plain give on the thread's last handle: the plain give
 * found the long way, the quiet copy, the slow path (which tries the fast
 * give first), and the hold that ended. */
static __attribute__((noinline)) int release_rest(bulkhead_t *bh, uint64_t n)
{
	struct bhs_att *a = att_of(bh);
	bool missed = !last_was(bh); /* else the entry point tried plain() */
	struct bhs_slot *s = my_slot_kept(bh, a);
	uint64_t ns;
	int r;

	if (missed && s && plain(bh, (uint32_t)n) && give1_on(a, s, bhi_ext_word(bh)) == GIVE_OK)
		return 0;
	if (quiet(a, s, (uint32_t)n) && give_on(a, s, (uint32_t)n, false) == GIVE_OK)
		return 0;
	r = bhs_release_slow(a, (uint32_t)n);
	/* A hold that ended is also an adaptive sample, if a controller listens. */
	if (r == 0 && BHI_UNLIKELY(a->flags & BH_TRACK_HOLD) && bhs_hold_end(a, (uint32_t)n, &ns))
		bhk_emit(bh, BHK_HOLD, ns, BHK_OK);
	return r;
}

BHI_HOT_ENTRY int bhs_release(bulkhead_t *bh, uint32_t n32)
{
	uint64_t n = n32; /* one register for the give's sums and the tail call */

	if (last_was(bh) && plain(bh, n32) &&
	    BHI_LIKELY(give1_on(att_of(bh), last.s, bhi_ext_word(bh)) == GIVE_OK))
		return 0;
	return release_rest(bh, n);
}
