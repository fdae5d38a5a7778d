/* Private to the host-wide layer: the shared segment's layout, the shared
 * word, and the process-local attachment. docs/design.md ("Host-wide
 * bulkheads") explains the protocol and the recovery argument. */
#ifndef BH_SHM_SEG_H
#define BH_SHM_SEG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bulkhead/shm.h"
#include "core/backend.h"
#include "lib/compiler.h"
#include "lib/hold.h"

/* ---- the shared word ---------------------------------------------------
 *
 *   bits  0..20  W_BIAS - avail  as in the core
 *   bits 21..40  held            as in the core
 *   bits 41..56  queued          waiters, host-wide (at most BHS_QUEUE_MAX)
 *   bit  57      S_EPOCH         flips at the commit of every logged
 *                                recovery (reclaim.c: the recovery log)
 *   bit  58      S_GRANT         flips in the CAS of every handoff to a
 *                                queued waiter (queue.c: the grant log)
 *   bit  60      S_FROZEN        a recovery is rebuilding the word: every
 *                                fast-path CAS fails and goes slow
 *   bit  61      W_STARVING      as in the core
 *   bit  62      W_WOKEN         as in the core
 *   bit  63      W_CLOSED        as in the core
 */
#define S_NQ_MASK (0xffffull << W_NQ_SHIFT)
#define S_EPOCH (1ull << 57)
#define S_GRANT (1ull << 58)
#define GLOG_PRE (1u << 31) /* in the grant log: S_GRANT before the CAS */
#define S_FROZEN (1ull << 60)
#define BHS_QUEUE_MAX 0xffffu
/* The core's W_TAKE1_BLOCK, and frozen. */
#define S_TAKE1_BLOCK (W_CLOSED | W_STARVING | S_FROZEN | S_NQ_MASK | W_BIAS)

static inline uint32_t s_nq(uint64_t w)
{
	return (uint32_t)((w & S_NQ_MASK) >> W_NQ_SHIFT);
}

/* ---- the ledger --------------------------------------------------------
 *
 * What a thread slot holds is kept in three words, each with S_PEND set
 * while its owner is inside a window on it: between announcing an
 * operation and recording its effect. A window stores PEND, changes the
 * shared word, then stores the new value (which clears PEND) in one store:
 * the record and the end of the window are one write.
 *   ledger  permits moved by every other path (n > 1, queue grants,
 *           transfers in), counted in the slot's counters as calls
 *   in      single permits taken on the fast path: only ever grows
 *   out     single permits given back on the fast path: only ever grows
 * held = ledger + in - out - debit, modulo 2^63 (a ledger runs "below
 * zero" when permits taken through in go back through it). in and out are the fast
 * path's counts of acquires and releases too, so it stores nothing else
 * (bhs_stats adds them to the counters); they are never reset, not even
 * when the slot passes to another process (free_slot() zeroes the held
 * count through the ledger).
 */
#define S_PEND (1ull << 63)
#define S_HELD_MASK (S_PEND - 1)

/* ---- geometry ------------------------------------------------------------ */

#define BHS_PROCS 1024  /* processes attached at once */
#define BHS_SLOTS 4096  /* thread ledgers, host-wide */
#define BHS_EXTRA 4096  /* extra queue nodes: async waiters, and blocking
			 * waiters of threads that share their process's slot */
#define BHS_TMAP 4096  /* thread indices (src/core/tindex.c) */
#define BHS_HOLDS 8     /* hold-time histogram shards */
#define BHS_LOCK_BASE ((off_t)1 << 40) /* byte BASE + i: process i's liveness lock */

#define BHS_MAGIC 0x314d48536b6c7562ull /* "bulkSHM1", little-endian */
#define BHS_LAYOUT 6u

/* Offsets in the segment are cache-line aligned. */
static inline size_t bhs_align_up(size_t v)
{
	return (v + BHI_CACHELINE - 1) & ~(size_t)(BHI_CACHELINE - 1);
}

/* Everything here is written once, by the creator, before the file is
 * linked into place; attach checks it field by field and by checksum. */
struct bhs_hdr {
	uint64_t magic;
	uint32_t layout;
	uint32_t hdr_size;
	uint64_t seg_size;
	uint32_t nprocs, nslots, nextra, nholds;
	uint64_t off_procs, off_slots, off_qnodes;
	uint32_t max_concurrent; /* the creation settings a cfg must match */
	uint32_t queue_cap;      /* normalised: at most BHS_QUEUE_MAX */
	uint32_t flags;
	uint32_t mode;
	uint64_t created_ns; /* CLOCK_REALTIME, for operators */
	int32_t creator_pid;
	uint32_t pad;
	char name[BH_NAME_MAX];
	uint64_t checksum; /* FNV-1a 64 of every byte before it */
};

/* A process slot: free, taken, or reclaimed -- its holdings given back
 * and cleared by a recovery that is not through yet (it frees the slot
 * once it has counted it; reclaim.c, the recovery log). Nobody takes a
 * reclaimed slot, and every census counts it as dead. Leaving: its process
 * gave everything back and is freeing it (bhs_leave_proc); dead if its
 * liveness lock is gone while it still reads leaving. */
enum { PS_FREE, PS_LIVE, PS_RECLAIMED, PS_LEAVING };

struct bhs_proc {
	_Alignas(BHI_CACHELINE) _Atomic uint32_t state; /* under the lock */
	_Atomic uint32_t gen;    /* bumped each time the slot is taken */
	_Atomic int32_t pid;     /* for operators and dumps only */
	_Atomic uint32_t agent;  /* the process's agent sleeps on this */
	_Atomic uint32_t shared; /* its shared thread slot, index + 1 */
	_Atomic uint64_t attached_ns;
};

struct bhs_slot {
	_Alignas(BHI_CACHELINE) _Atomic uint64_t ledger; /* S_PEND | moved */
	_Atomic uint64_t in;    /* S_PEND | single fast takes */
	_Atomic uint64_t out;   /* S_PEND | single fast gives */
	_Atomic uint64_t c[BHI_NCOUNTERS];
	_Atomic uint64_t debit; /* taken by transfers; subtracted from held */
	_Atomic uint32_t owner; /* process index + 1; 0 = free */
};

/* Queue node states. WAITING, SLEEPING and WOKEN are queued. GRANTED,
 * SHUTDOWN and INVALID are set under the lock by whoever dequeued the node;
 * a GRANTED node's n permits belong to its owner until the owner claims
 * them into a ledger (inside a window), which makes it DONE (extra nodes) or
 * IDLE (a thread slot's own node). */
enum {
	QS_IDLE,
	QS_WAITING,
	QS_SLEEPING,
	QS_WOKEN,
	QS_GRANTED,
	QS_SHUTDOWN,
	QS_INVALID,
	QS_DONE,
	QS_DELIVERING, /* async: the owner process is running the callback */
};

static inline bool queued_state(uint32_t st)
{
	return st == QS_WAITING || st == QS_SLEEPING || st == QS_WOKEN;
}

enum { QK_NONE, QK_SYNC, QK_ASYNC };

struct bhs_qnode {
	_Alignas(BHI_CACHELINE) _Atomic uint32_t state; /* the futex word */
	_Atomic uint32_t n;
	_Atomic uint32_t next, prev; /* index + 1, under the lock */
	_Atomic uint32_t owner;      /* process index + 1, under the lock */
	_Atomic uint32_t kind;       /* QK_*, under the lock */
	_Atomic uint32_t linked;     /* in the queue list, under the lock */
	_Atomic uint32_t pad;
	_Atomic uint64_t ticket;     /* arrival order, for rebuilding */
	_Atomic uint64_t enqueued_ns;
};

/* The segment: header, then the shared state, then the arrays at the
 * header's offsets. Nothing in it is a pointer. */
struct bhs_seg {
	struct bhs_hdr hdr;
	_Alignas(BHI_CACHELINE) _Atomic uint64_t word;
	/* The internal lock: 0 free, else the owner's process index + 1 in
	 * bits 0..15 and its generation in 16..30; bit 31: waiters. */
	_Alignas(BHI_CACHELINE) _Atomic uint32_t lock;
	/* Everything down to the next line is under the lock. */
	_Atomic uint32_t qhead, qtail; /* index + 1 */
	_Atomic uint32_t free_extra;   /* free list of extra nodes, index + 1 */
	_Atomic uint64_t ticket;
	_Atomic uint64_t starve_ns, fair_after_ns, last_grant_ns;
	_Atomic uint32_t short_holds;
	_Atomic uint32_t nattached; /* live processes */
	/* The process whose adaptive controller moves the limit (role.c): 0,
	 * or its lock value (slot + 1, generation), which a death voids. */
	_Atomic uint32_t role;
	/* The grant log (queue.c): 0, or the node of the handoff under way
	 * + 1 with GLOG_PRE set if S_GRANT was set before the handoff's CAS. */
	_Atomic uint32_t glog;
	_Alignas(BHI_CACHELINE) _Atomic uint64_t scan_ns; /* last liveness scan */
	_Atomic uint64_t timed_out, cancelled, over_released, reclaimed, deaths;
	_Atomic uint64_t rebuilds, rebuild_waits; /* waits: gave up, a window stayed open */
	/* The recovery log (reclaim.c), under the lock: open while a
	 * recovery is under way, with what reclaimed and deaths will be
	 * once it is through. */
	_Alignas(BHI_CACHELINE) struct {
		_Atomic uint32_t open;  /* 0, or 1 | 2 if S_EPOCH is set once committed */
		_Atomic uint32_t pidx;  /* reclaim(): the process; UINT32_MAX: a rebuild */
		_Atomic uint32_t gen;   /* reclaim(): its generation */
		_Atomic uint64_t reclaimed, deaths;
		_Atomic uint64_t thaw;  /* a rebuild: the word it thaws to */
	} rlog;
	_Alignas(BHI_CACHELINE) struct bhi_hist wait, wait_failed;
	struct bhi_hist hold[BHS_HOLDS];
};

/* ---- the process-local attachment ----------------------------------------- */

struct bhs_att {
	/* Line 1: what the fast paths read. */
	_Alignas(BHI_CACHELINE) struct bhs_seg *seg;
	_Atomic uint32_t xfer;  /* XFER_RUNNING, XFER_FENCED */
	uint32_t flags;         /* the bulkhead's BH_* flags */

	_Alignas(BHI_CACHELINE) pthread_mutex_t mu; /* below, unless noted */
	pthread_mutex_t xmu;       /* one transfer at a time */
	pthread_mutex_t hmu;       /* our threads take the internal lock one at
				    * a time: held while it is held or awaited */
	struct bhs_proc *proc;     /* NULL: not registered (yet, or since fork) */
	uint32_t pidx;             /* index of proc */
	uint32_t lockval;          /* our value of the internal lock word */
	/* The handle whose controller holds the role while the role word names
	 * us (role.c): one mover per host, not one per handle. Its id + 1
	 * (bhi_id_of: never reused), 0 for none. */
	_Atomic uint64_t role_handle;
	struct bhs_slot *shared;   /* threads without a slot of their own use
				    * it holding the internal lock */
	struct bhs_slot *slots;    /* the segment's arrays */
	struct bhs_proc *procs;
	struct bhs_qnode *qnodes;
	uint32_t nprocs, nslots, nextra;
	int fd;                    /* our own open file description */
	dev_t dev;
	ino_t ino;
	size_t size;
	unsigned refs;             /* handles */
	struct bhs_att *next;      /* the registry (registry lock) */
	const struct bhi_sync_ops *sync;
	uint32_t spin_iters;
	uint64_t spin_ns;
	uint64_t poll_ns;          /* longest sleep before looking for the dead */
	struct bhi_hold *hold;     /* BH_TRACK_HOLD: per thread index (lib/hold.h) */
	/* Async: this process's queued nodes by extra-node index, and the
	 * agent thread that delivers their grants. */
	struct bh_async *_Atomic *anode;
	pthread_t agent;
	_Atomic pid_t agent_pid;   /* the process it delivers for */
	bool agent_on;             /* mu */
	_Atomic bool agent_stop;
	pthread_cond_t delivered;  /* with mu: an async delivery finished */
	uint32_t *order;           /* scratch for rebuild(), under the lock */
	char name[BH_NAME_MAX];
	/* bhi_tindex - 1 -> this thread's slot. In the attachment itself, not
	 * behind a pointer: after a locked RMW every load waits for it, so
	 * the fast paths' chain of dependent loads (handle, attachment, this
	 * entry, the slot) is paid in full on every call, and one link less
	 * is measurable. */
	struct bhs_slot *tmap[BHS_TMAP];
};

#define XFER_RUNNING 1u /* a transfer between this process's slots runs */
#define XFER_FENCED 2u  /* no membarrier(2): release windows fence themselves */

static inline struct bhs_att *att_of(const bulkhead_t *bh)
{
	return bhi_ext_of(bh);
}

/* This process's slot, NULL while it is not registered (first use since
 * fork). acquire: pairs with bhs_register()'s release store, so pidx,
 * lockval and shared read after a non-NULL answer are the ones stored with
 * it: a fork child's threads may register at their first calls at once,
 * and one that finds another's registration reads them without the mutex. */
static inline struct bhs_proc *att_proc(struct bhs_att *a)
{
	return atomic_load_explicit((_Atomic(struct bhs_proc *) *)&a->proc, memory_order_acquire);
}

static inline struct bhs_slot *slot_at(const struct bhs_att *a, uint32_t i)
{
	return &a->slots[i];
}

static inline uint32_t slot_index(const struct bhs_att *a, const struct bhs_slot *s)
{
	return (uint32_t)(s - a->slots);
}

static inline struct bhs_qnode *qnode_at(const struct bhs_att *a, uint32_t i)
{
	return &a->qnodes[i];
}

static inline uint32_t nqnodes(const struct bhs_att *a)
{
	return a->nslots + a->nextra;
}

/* No queue node: the null of the queue's links, which the segment stores
 * as index + 1 (0: none). */
#define BHS_NONE UINT32_MAX

/* An index from the segment, checked: damage never sends us out of it. */
static inline uint32_t qref(const struct bhs_att *a, _Atomic uint32_t *p)
{
	uint32_t v = atomic_load_explicit(p, memory_order_relaxed) - 1u;

	return v < nqnodes(a) ? v : BHS_NONE;
}

static inline void qset(_Atomic uint32_t *p, uint32_t qi)
{
	atomic_store_explicit(p, qi == BHS_NONE ? 0 : qi + 1u, memory_order_relaxed);
}

static inline uint32_t qget(_Atomic uint32_t *p)
{
	return atomic_load_explicit(p, memory_order_relaxed);
}

/* The queue's head (under the lock). */
static inline uint32_t head_of(const struct bhs_att *a)
{
	return qref(a, &a->seg->qhead);
}

static inline uint64_t load_sword(const struct bhs_att *a)
{
	return atomic_load_explicit(&a->seg->word, memory_order_relaxed);
}

static inline bool cas_sword(struct bhs_att *a, uint64_t *w, uint64_t nw)
{
	/* acq_rel: a taker sees what the previous holder wrote (pairs with the
	 * releasing CAS), and a window's PEND store is ordered before it
	 * (pairs with the freeze in rebuild()); a failure hands back the real
	 * word, acquired so the retry reads fresh ledgers. */
	return atomic_compare_exchange_weak_explicit(&a->seg->word, w, nw, memory_order_acq_rel,
						     memory_order_acquire);
}

/* ---- the word and the ledgers, for every file of the layer ---------------------- */

static inline bool n_valid(uint32_t n)
{
	return n - 1u < BH_LIMIT_MAX;
}

/* A newcomer may take n permits: as in the core, plus not while frozen. */
static inline bool may_take(uint64_t w, uint32_t n)
{
	if (w & (W_CLOSED | W_STARVING | S_FROZEN))
		return false;
	if ((w & S_NQ_MASK) && !(w & W_WOKEN))
		return false;
	return w_avail(w) >= (int64_t)n;
}

/* A release may skip the lock: nobody queued needs serving, not frozen,
 * and (a check the ledgers make redundant) the word holds the permits. */
static inline bool may_give(uint64_t w, uint32_t n)
{
	if (w & S_FROZEN)
		return false;
	if ((w & S_NQ_MASK) && !(w & W_WOKEN))
		return false;
	return w_held(w) >= (int64_t)n;
}

/* n permits given back by a path that trusts the ledgers or a granted node
 * rather than the word (a locked give, a reclaim, a cancelled grant): at
 * most what the word holds. The two agree in every state the library
 * leaves, crashes included; in a segment damaged by something else, a give
 * of more would borrow from the queued count and the flags above it. */
static inline uint64_t s_give(uint64_t w, uint64_t n)
{
	uint64_t held = (uint64_t)w_held(w);

	return w_give(w, (uint32_t)(n < held ? n : held));
}

/* What slot s holds, given its ledger's value l (the words must be closed,
 * or in the caller's own window). */
static inline uint64_t held_of(struct bhs_slot *s, uint64_t l)
{
	uint64_t in = atomic_load_explicit(&s->in, memory_order_relaxed);
	uint64_t out = atomic_load_explicit(&s->out, memory_order_relaxed);
	uint64_t d = atomic_load_explicit(&s->debit, memory_order_relaxed);

	/* modulo 2^63, the ledger's range: a ledger goes "below zero" when a
	 * permit taken through in goes back through it */
	return (l + in - out - d) & S_HELD_MASK;
}

/* Is a window open on any of s's words? seq_cst: callers load after a
 * freeze or a membarrier and pair with the windows' PEND stores; acquire:
 * pairs with the close (win_close's release), so what is read after a
 * closed answer is current. */
static inline bool slot_open(struct bhs_slot *s)
{
	return ((atomic_load_explicit(&s->ledger, memory_order_seq_cst) |
		 atomic_load_explicit(&s->in, memory_order_seq_cst) |
		 atomic_load_explicit(&s->out, memory_order_seq_cst)) &
		S_PEND) != 0;
}

/* ---- windows ------------------------------------------------------------- */

/* Open a window on one of a slot's words: mark it, before the CAS. No
 * fence against recoveries: a CAS that succeeds after the store is a
 * release that the freeze acquires. (A release window also orders the mark
 * before its look at a->xfer: see give_on.) */
static inline uint64_t win_open_on(_Atomic uint64_t *v)
{
	uint64_t l = atomic_load_explicit(v, memory_order_relaxed);

	atomic_store_explicit(v, l | S_PEND, memory_order_relaxed);
	return l;
}

/* Close it with the new value. release: pairs with a recovery's or a
 * transferer's acquire load of the word without PEND. */
static inline void win_close_on(_Atomic uint64_t *v, uint64_t l)
{
	atomic_store_explicit(v, l & S_HELD_MASK, memory_order_release);
}

static inline uint64_t win_open(struct bhs_slot *s)
{
	return win_open_on(&s->ledger);
}

static inline void win_close(struct bhs_slot *s, uint64_t l)
{
	win_close_on(&s->ledger, l);
}

/* ---- build-time crash points (tests only) ------------------------------------ */

enum bhs_point {
	BP_NONE,
	BP_ACQ_CAS,   /* acquire: the permits are taken, the ledger not written */
	BP_REL_CAS,   /* release: the permits are back, the ledger not written */
	BP_QUEUED,    /* a blocking waiter is queued, the lock dropped */
	BP_LOCKED,    /* a grant is half made: the permits are off the word,
		       * the waiter not yet told, the lock held */
	BP_GRANTED,   /* a waiter saw its grant, before claiming it */
	BP_XFER,      /* a transfer between slots is half made */
	BP_REBUILD,   /* a recovery has frozen the word */
	BP_CLAIM,     /* a grant claimed from its node, the ledger not yet written */
	BP_HOLD_LOCK, /* the internal lock was just taken */
	BP_CENSUS,    /* a rebuild knows who is alive, nothing rebuilt yet */
	BP_PROC_FREE, /* a registrant saw a process slot free, not yet locked */
	BP_PROC_LOCKED, /* it holds that slot's liveness lock, slot not taken */
	BP_FREED,     /* a rebuild freed the dead, deaths and reclaimed not moved */
	BP_LEFT,      /* a waiter that timed out left the queue, the lock dropped */
	BP_ADMIT,     /* a slow take under the lock, before its CAS (take or queue) */
	BP_AGENT_SEEN, /* the agent saw an async node, not yet its state */
	BP_LOGGED,    /* a reclaim wrote its log, the permits not yet back */
	BP_COMMITTED, /* a recovery committed (a rebuild's word still frozen),
		       * deaths and reclaimed not moved */
	BP_CLEARED,   /* a dead process's slot cleared and reclaimed, its
		       * generation not yet moved */
	BP_COUNTED,   /* a recovery counted (and thawed), its log still open */
	BP_REPLAYED,  /* a replay counted, not yet thawed or closed */
	BP_LIMITED,   /* a set_limit moved the limit, waiters above it not yet failed */
	BP_CLOSING,   /* a close set W_CLOSED, its waiters not yet failed */
	BP_GRANTING,  /* a handoff is logged, its CAS not yet made, the lock held */
	BP_HANDED,    /* a handoff is made and told, its log still open */
	BP_PROBE,     /* a look at a taken process slot, before its liveness probe */
	BP_PROBED,    /* the same look, after the probe */
	BP_DETACHED,  /* a detacher gave back and unlocked, its slot still taken */
	BP_DETACHING, /* a last handle's destroy, before its detach gives anything back */
	BP_EXTRA_TAKEN, /* an extra queue node is off the free list, owned by
			 * nobody yet: only a rebuild's relisting finds it */
	BP_WOKE_HEAD, /* an unfair head is marked WOKEN, its wake not yet
		       * sent (it goes out at the unlock), the lock held */
	BP_ATTACH_READ, /* an attacher read and checked the header through
			 * its descriptor, the segment not yet mapped */
	BP_UNLOCKED,  /* the internal lock given up, the wakes deferred
		       * under it not yet sent */
	BP_NPOINTS,
};

#ifdef BHS_CRASH_POINTS
void bhs_point(enum bhs_point p);
#define BHS_POINT(p) bhs_point(p)
#else
#define BHS_POINT(p) ((void)0)
#endif

/* ---- across the layer's files ------------------------------------------------- */

/* lock.c */
void bhs_lock(struct bhs_att *a);
/* Whether lock or role word v names a process that is gone (not us). */
bool bhs_owner_gone(struct bhs_att *a, uint32_t v);
void bhs_unlock(struct bhs_att *a);
enum { WHO_NONE, WHO_ALIVE, WHO_DEAD };
int bhs_proc_look(struct bhs_att *a, uint32_t i, uint32_t *gen);
bool bhs_proc_alive(struct bhs_att *a, uint32_t pidx);

/* fast.c */
enum { GIVE_OK, GIVE_SHORT, GIVE_LOCK, GIVE_XFER };
struct bhs_slot *bhs_slot_for(struct bhs_att *a, bool *shared);
void bhs_slot_count(struct bhs_att *a, struct bhs_slot *s, enum bhi_counter c);
bool bhs_take_on(struct bhs_att *a, struct bhs_slot *s, uint32_t n);
int bhs_give_on(struct bhs_att *a, struct bhs_slot *s, uint32_t n);
int bhs_give_locked(struct bhs_att *a, struct bhs_slot *s, uint32_t n);
int bhs_transfer(struct bhs_att *a, struct bhs_slot *t, uint32_t n);
void bhs_wait_thaw(struct bhs_att *a);
bool bhs_claim_on(struct bhs_att *a, struct bhs_slot *s, uint32_t qi, uint32_t expect,
		  uint32_t final, bool locked);
void bhs_hold_begin(struct bhs_att *a, uint32_t n);
/* True when the thread's hold ended: *ns is its length. */
bool bhs_hold_end(struct bhs_att *a, uint32_t n, uint64_t *ns);

/* wait.c */
int bhs_acquire_slow(struct bhs_att *a, uint32_t n, uint64_t deadline_ns);

/* queue.c */
int bhs_try_slow(struct bhs_att *a, uint32_t n);
/* Count c on s, under the lock when s is the shared slot. */
void bhs_count_maybe_locked(struct bhs_att *a, struct bhs_slot *s, bool shared,
			    enum bhi_counter c);
int bhs_release_slow(struct bhs_att *a, uint32_t n);
void bhs_wake_later(struct bhs_att *a, _Atomic uint32_t *word, bool raw);
void bhs_flush_wakes(struct bhs_att *a);
void bhs_dispatch_locked(struct bhs_att *a);
void bhs_fail_ruled_out_locked(struct bhs_att *a);
void bhs_unqueue_locked(struct bhs_att *a, uint32_t qi);
void bhs_q_remove_locked(struct bhs_att *a, uint32_t qi);
void bhs_notify_locked(struct bhs_att *a, uint32_t qi, uint32_t state);
uint32_t bhs_extra_alloc_locked(struct bhs_att *a);
void bhs_extra_free_locked(struct bhs_att *a, uint32_t qi);
int bhs_admit_locked(struct bhs_att *a, struct bhs_slot *s, uint32_t qi, uint32_t n,
		     uint32_t kind);
void bhs_record_wait(struct bhs_att *a, uint64_t enqueued_ns, int result);
void bhs_note_release_locked(struct bhs_att *a);
void bhs_grant_replay_locked(struct bhs_att *a);

/* async.c */
void bhs_agent_start(struct bhs_att *a);
void bhs_agent_stop(struct bhs_att *a);

/* reclaim.c */
bool bhs_maybe_scan(struct bhs_att *a);
bool bhs_scan_locked(struct bhs_att *a);
bool bhs_rebuild_locked(struct bhs_att *a, bool must);
void bhs_reclaim_self_locked(struct bhs_att *a);
void bhs_release_self(struct bhs_att *a);
void bhs_leave_proc(struct bhs_att *a, uint32_t pidx);
uint64_t bhs_proc_holdings(struct bhs_att *a, uint32_t pidx, bool *open_window);

/* segment.c */
#define BHS_CFG_FLAGS (BH_FAIR | BH_TRACK_HOLD | BH_NO_STATS)
int bhs_check_name(const char *name);
/* Another open file description of fd's file, read-write and close-on-exec
 * (-1 and errno if none): a reopen of /proc/self/fd/N, so the same file
 * whatever its name is now. */
int bhs_reopen(int fd);
/* The file of segment name: 0, or -ENAMETOOLONG. */
int bhs_path_of(const char *name, char *buf, size_t len);
int bhs_check_hdr(const struct bhs_hdr *h, const char *name, off_t file_size);
int bhs_check_state(const struct bhs_seg *g);
int bhs_check_cfg(const struct bh_config *cfg, const struct bhs_hdr *h, const char *name);
/* Create the segment complete, then link it at path. Returns its fd (our
 * own open file description), or -EEXIST when it appeared meanwhile. */
int bhs_create_seg(const char *name, const char *path, const struct bh_config *cfg,
		   unsigned mode);

/* open.c */
int bhs_register(struct bhs_att *a);

#endif /* BH_SHM_SEG_H */
