/* Private to libbulkhead: the bulkhead object, the state word (its layout
 * is in backend.h, which the host-wide segment shares), the hooks that tests
 * and the stress suite use to drive the slow path. */
#ifndef BH_INTERNAL_H
#define BH_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "bulkhead.h"
#include "layer.h"
#include "lib/compiler.h"
#include "lib/futex.h" /* struct bhi_sync_ops */
#include "lib/list.h"
#include "lib/spin.h" /* BHI_SPIN_NS: a head waiter's spin budget */

/* The word's layout and accessors, BHI_WORD_EXT, the sync ops, the counter
 * names and the histograms' recording side are in backend.h: the host-wide
 * segment (src/shm/) shares them. */

/* Internal flag (above the public BH_* flags): a layer's gate applies. */
#define BHI_GATED (1u << 31)
/* Internal flag: a host-wide handle (ext below), so that a give's one test
 * of the flags sends it away too. */
#define BHI_EXT (1u << 30)
/* Optional observers of the queue, called under its lock, so a checker can
 * keep an exact shadow of the FIFO: a node joined the queue; a node left it
 * holding its permits (handoff or a won race). The waits and the clock are
 * bh->sync (lib/futex.h). */
struct bhi_queue_obs {
	void (*queued)(void *ctx, const struct bh_qlink *l);
	void (*granted)(void *ctx, const struct bh_qlink *l);
	void *ctx;
};

/* The core counts no release: a store between the two locked instructions
 * of a take+release pair costs the pair about 7% (AMD EPYC, Zen 3), so
 * bh_stats derives the releases from the takes and the permits held now
 * (bhi_released, observe.c). For that, a slot also keeps what calls of
 * n > 1 permits took or gave beyond one permit each; the gives are kept
 * where the segment's slots (src/shm/) keep their releases. */
#define BHI_GIVEN_EXTRA BHI_RELEASED  /* gives of n > 1: n - 1 each */
#define BHI_TAKEN_EXTRA BHI_NCOUNTERS /* takes of n > 1: n - 1 each */
#define BHI_SLOT_COUNTERS (BHI_NCOUNTERS + 1)

/* Per-thread counters: slot i belongs to the live thread with index i, so a
 * plain load+store counts without a locked instruction. */
struct bhi_slot {
	_Alignas(BHI_CACHELINE) _Atomic uint64_t c[BHI_SLOT_COUNTERS];
	/* Automatic samples handed to the bulkhead's sink now, by this slot's
	 * threads (src/core/sample_hook.h): the fork generation
	 * (bhk_fork_generation) in the high half, the count in the low.
	 * Detaching waits for a count of 0 in its own generation; a mark
	 * left by a parent's thread, which does not exist in a fork child,
	 * is of an older one, and the child's first mark replaces it. One
	 * word, because the shared slot's threads mark it together. */
	_Atomic uint64_t sink_mark;
};

#define BHI_HOLD_SHARDS 8 /* threads spread hold recordings over these */

struct bhk_sink;

/* The waiter queue: struct bhi_qlist and bhi_qlist_*() (lib/list.h). */
BHI_LIST_DEFINE(bhi_qlist, struct bh_qlink, next, prev)

struct bulkhead {
	/* Line 1: what every fast path reads. */
	_Alignas(BHI_CACHELINE) _Atomic uint64_t word;
	uint64_t id; /* unique: no two handles ever share one */
	uint32_t flags;
	uint32_t queue_cap;
	uint32_t nslots; /* exclusive slots; slots[nslots] is shared */
	_Atomic(struct bhk_sink *) sink; /* automatic samples go here (sample_hook.h) */
	_Atomic uint64_t gate_ns; /* BHI_GATED: admit while coarse clock < this */
	/* A host-wide handle (src/shm/): its state is in shared memory, this
	 * is the attachment, word is BHI_WORD_EXT and nslots is 0, so every
	 * fast path fails on values it loads anyway and the cold paths hand
	 * the call over. NULL for a process-local bulkhead. */
	struct bhs_att *ext;
	_Atomic uint64_t *ext_word; /* its segment's word, for the fast paths' CAS */

	/* Line 2: the slow path. */
	_Alignas(BHI_CACHELINE) pthread_mutex_t lock;
	struct bhi_qlist queue; /* FIFO, under lock */
	const struct bhi_sync_ops *sync;
	const struct bhi_queue_obs *obs; /* NULL: none */
	uint64_t starve_ns;     /* unfair mode: at most one fair handoff per */
	uint64_t fair_after_ns; /* when the next one may happen */
	uint64_t spin_ns;       /* how long a head waiter polls before sleeping */
	uint32_t spin_iters;    /* the same in polls */
	bool short_holds;       /* releases come sooner than spin_ns after grants */
	uint64_t last_grant_ns; /* when the last handoff happened */
	_Atomic uint64_t timed_out, cancelled, over_released;
	/* Permits handed to queued threads; those of them their waiters came
	 * back with (and counted as taken); those of cancelled ones put back.
	 * bhi_released (observe.c) needs them: a grant is a take nobody has
	 * counted yet. */
	_Atomic uint64_t granted, grants_claimed, grants_returned;
	/* The highest count of releases bh_stats has reported (observe.c). */
	_Atomic uint64_t released_seen;

	char name[BH_NAME_MAX];
	struct bhi_hist wait, wait_failed;
	struct bhi_hist *hold; /* BHI_HOLD_SHARDS of them with BH_TRACK_HOLD */
	/* BH_TRACK_HOLD: each thread's hold (lib/hold.h), by thread index, for
	 * every index, not only those with a slot: a hold needs the thread's
	 * own count, which the shared slot cannot keep. */
	struct bhi_hold *holds;
	struct bhi_layer *layer; /* src/core/layer.h; NULL for a plain bulkhead */

	struct bhi_slot slots[];
};

/* What a backend's fast paths load without seeing this struct (backend.h). */
_Static_assert(offsetof(struct bulkhead, ext) == BHI_EXT_OFFSET, "BHI_EXT_OFFSET");
_Static_assert(offsetof(struct bulkhead, sink) == BHI_SINK_OFFSET, "BHI_SINK_OFFSET");
_Static_assert(offsetof(struct bulkhead, id) == BHI_ID_OFFSET, "BHI_ID_OFFSET");
_Static_assert(offsetof(struct bulkhead, flags) == BHI_FLAGS_OFFSET, "BHI_FLAGS_OFFSET");
_Static_assert(offsetof(struct bulkhead, ext_word) == BHI_EXT_WORD_OFFSET, "BHI_EXT_WORD_OFFSET");
_Static_assert(offsetof(struct bulkhead, ext_word) + sizeof(void *) <= BHI_CACHELINE,
	       "a host-wide fast path reads line 1 only");

/* Internal hooks (hidden symbols; tests and stress link the static core). */
void bhi_set_sync_ops(bulkhead_t *bh, const struct bhi_sync_ops *ops);
void bhi_set_queue_obs(bulkhead_t *bh, const struct bhi_queue_obs *obs);
void bhi_set_spin_ns(bulkhead_t *bh, uint64_t ns);
void bhi_set_starve_ns(bulkhead_t *bh, uint64_t ns);
uint64_t bhi_word(const bulkhead_t *bh);
/* bh_stats into the first size bytes of an older layout (src/core/compat_0_1.c). */
int bhi_stats_prefix(const bulkhead_t *bh, void *out, size_t size);

/* The thread index (bhi_tindex) is declared in layer.h. */

BHI_COLD void bhi_count_slow(struct bulkhead *bh, unsigned c, uint64_t v);
/* A counter summed over every slot (acquire: see bhi_released). */
uint64_t bhi_counter(const struct bulkhead *bh, unsigned c);
/* bhi_try_take, bhi_count_rejected, bhi_rejected, bhi_over_limit: the
 * pool's, in layer.h. */

/* The calling thread's own slot, or NULL when it has none yet (or more
 * threads are alive than the bulkhead has slots). */
static inline struct bhi_slot *bhi_my_slot(struct bulkhead *bh)
{
	uint32_t i = bhi_tindex - 1u;

	return BHI_LIKELY(i < bh->nslots) ? &bh->slots[i] : NULL;
}

/* Sole writer of its slot: a load and a store, no RMW. release: a reader
 * that sees the count also sees the change of the word it follows (pairs
 * with the acquire loads of bhi_released); on x86 a plain store. */
static inline void bhi_slot_add(_Atomic uint64_t *p, uint64_t v)
{
	atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + v,
			      memory_order_release);
}

static inline void bhi_count_n(struct bulkhead *bh, unsigned c, uint64_t v)
{
	struct bhi_slot *s = bhi_my_slot(bh);

	if (s && !(bh->flags & BH_NO_STATS))
		bhi_slot_add(&s->c[c], v);
	else if (!s)
		bhi_count_slow(bh, c, v);
}

static inline void bhi_count(struct bulkhead *bh, enum bhi_counter c)
{
	bhi_count_n(bh, c, 1);
}

/* A successful take of n permits, after the change of the word that took
 * them (bhi_released reads the counts before the word). */
static inline void bhi_count_taken(struct bulkhead *bh, uint32_t n)
{
	bhi_count(bh, BHI_ACQUIRED);
	if (n != 1)
		bhi_count_n(bh, BHI_TAKEN_EXTRA, n - 1u);
}

#endif /* BH_INTERNAL_H */
