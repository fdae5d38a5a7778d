/* io_uring: permits held until the kernel posts an operation's final CQE.
 * This file is the submission side (taking SQEs, tracking) and the
 * completion side (reap); grants from other threads come through grant.c.
 * docs/uring.md explains the design; include/bulkhead/uring.h the rules. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bulkhead/uring.h"
#include "core/sample_hook.h"
#include "lib/compiler.h"

#include "tracker.h"

#define REL_SLOTS 4 /* bulkheads whose releases one reap batch coalesces */
#define CHUNK 64    /* CQEs per reap batch */


struct rel_batch {
	unsigned used;
	bulkhead_t *bh[REL_SLOTS];
	uint32_t n[REL_SLOTS];
};

/* ---- the submission queue -------------------------------------------- */

static inline struct io_uring_sqe *sqe_at(const bh_uring_t *t, unsigned idx)
{
	return &t->ring->sq.sqes[(idx & t->ring->sq.ring_mask) << t->sqe_shift];
}


int bh_uring_create(struct io_uring *ring, unsigned flags, bh_uring_t **out)
{
	bh_uring_t *t;

	if (!ring || !out || flags)
		return -EINVAL;
	t = bhi_zalloc_aligned(sizeof(*t), BHI_CACHELINE);
	if (!t)
		return -ENOMEM;
	t->ring = ring;
	t->sqe_shift = (ring->flags & IORING_SETUP_SQE128) ? 1 : 0;
	t->armed_idx = malloc(sizeof(*t->armed_idx) * ring->sq.ring_entries);
	if (!t->armed_idx) {
		bhi_free_aligned(t);
		return -ENOMEM;
	}
	/* Slot s says a lap before any SQE pending now or later (until the
	 * 32-bit index wraps): no pending SQE matches it. */
	for (unsigned s = 0; s < ring->sq.ring_entries; s++)
		t->armed_idx[s] = ring->sq.sqe_tail - 2 * ring->sq.ring_entries + s -
				  (ring->sq.sqe_tail & ring->sq.ring_mask);
	t->efd = -1; /* made by the first wait that queues */
	t->fork_gen = bhk_fork_watch();
	t->pid = getpid();
	atomic_init(&t->granted, NULL);
	atomic_init(&t->granting, 0);
	*out = t;
	return 0;
}

bool bhu_not_ours(const bh_uring_t *t)
{
	return bhu_inherited(t) || t->pid != getpid();
}

static void free_tracker(bh_uring_t *t)
{
	if (t->efd >= 0)
		close(t->efd);
	free(t->armed_idx);
	bhi_free_aligned(t);
}

/* A fork child's copy: the ring, the ops in flight on it and their permits
 * are the parent's, so only the copy's memory goes. No permit goes back
 * and no bulkhead is called: a host-wide one's permits are the parent
 * process's, and a thread of the parent may have held a process-local
 * one's lock at the fork, which then stays held in the child's copy. Nor
 * is granting waited for: it counts threads of the parent, which the
 * child does not have. */
static int forget_copy(bh_uring_t *t)
{
	bhu_orphan_waiters(t);
	free_tracker(t);
	return 0;
}

int bh_uring_destroy(bh_uring_t *t)
{
	if (!t)
		return 0;
	/* From a reap's or drain's callback (or a grant callback they or
	 * bh_uring_complete run): the caller goes on using t when it returns,
	 * and at a batch's last DONE nothing else is left to refuse it. */
	if (t->reaping)
		return -EINVAL;
	if (bhu_not_ours(t))
		return forget_copy(t);
	/* acquire: pairs with on_grant's release push, like collect(), so
	 * an op pushed before this load is seen and keeps t alive */
	if (t->ops || t->helpers || t->waitq.count || t->heldq.count || t->ready_head ||
	    atomic_load_explicit(&t->granted, memory_order_acquire))
		return -EBUSY;
	/* A grant callback may still be about to write the eventfd after its
	 * op was delivered; acquire pairs with its release decrement. */
	while (atomic_load_explicit(&t->granting, memory_order_acquire))
		bhi_cpu_relax();
	free_tracker(t);
	return 0;
}


/* ---- taking SQEs ----------------------------------------------------- */

/* When an adaptive controller listens to bh, the time ops take their SQEs:
 * their latency runs from there to their final CQE. 0: nobody listens. */
static inline uint64_t sample_start(bulkhead_t *bh)
{
	return BHI_UNLIKELY(bhk_attached(bh)) ? bh_now_ns() : 0;
}

static bool op_usable(const struct bh_uring_op *op)
{
	return ud_encodable(op) && (op->state == OP_IDLE || op->state == OP_HELD);
}

/* When an op took its SQEs, for an adaptive limit's samples. struct
 * bh_uring_op is frozen (callers embed it), so the time lives in the room
 * its union leaves after the deadline: the async member, far larger, is
 * unused once the op has its SQEs. Bytes, not a new member, so the
 * released layout stays exactly as it was. */
#define FLIGHT_START_OFF sizeof(struct __kernel_timespec)
_Static_assert(FLIGHT_START_OFF + sizeof(uint64_t) <= sizeof(((struct bh_uring_op *)0)->u),
	       "the union has room after ts");

static inline void flight_start_set(struct bh_uring_op *op, uint64_t ns)
{
	memcpy((char *)&op->u + FLIGHT_START_OFF, &ns, sizeof(ns));
}

static inline uint64_t flight_start(const struct bh_uring_op *op)
{
	uint64_t ns;

	memcpy(&ns, (const char *)&op->u + FLIGHT_START_OFF, sizeof(ns));
	return ns;
}

/* The SQ as the fast check reads it: fields loaded once per call. */
struct sq_view {
	const struct io_uring_sqe *sqes;
	uint32_t *armed_idx; /* the tracker's */
	unsigned mask, entry, head, tail; /* entry: 1, or 2 for SQE128 */
};

static inline struct sq_view sq_view(const bh_uring_t *t)
{
	const struct io_uring_sq *sq = &t->ring->sq;

	return (struct sq_view){ sq->sqes, t->armed_idx, sq->ring_mask, 1u << t->sqe_shift,
				 sq->sqe_head, sq->sqe_tail };
}

/* A multiply, not a shift by a variable count (three micro-ops on many
 * x86 cores): this runs for every SQE of every batch. GCC turns it back
 * into such a shift where it sees that entry is 1 << sqe_shift (sq_view),
 * so the commonest loop gets a copy where entry is the constant 1
 * (arm_singles). */
static inline struct io_uring_sqe *sqe_in(const struct sq_view *v, unsigned idx)
{
	return (struct io_uring_sqe *)&v->sqes[(idx & v->mask) * v->entry];
}

/* nr, cqes_left, state and flags, side by side in the record: written as
 * one 8-byte store (the compiler merges no stores of values it does not
 * know, and the record is written once per op on the submission path),
 * and read as one 8-byte load where the common op is one compare: a
 * one-SQE op with nothing to sample, in the state a call expects. */
_Static_assert(offsetof(struct bh_uring_op, cqes_left) == offsetof(struct bh_uring_op, nr) + 2 &&
		       offsetof(struct bh_uring_op, state) == offsetof(struct bh_uring_op, nr) + 4 &&
		       offsetof(struct bh_uring_op, flags) == offsetof(struct bh_uring_op, nr) + 6,
	       "nr, cqes_left, state, flags are adjacent");

static inline uint64_t counts_make(uint64_t nr, uint64_t left, uint64_t state, uint64_t flags)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return nr | left << 16 | state << 32 | flags << 48;
#else
	return nr << 48 | left << 32 | state << 16 | flags;
#endif
}

static inline uint64_t counts_of(const struct bh_uring_op *op)
{
	uint64_t c;

	memcpy(&c, (const char *)op + offsetof(struct bh_uring_op, nr), sizeof(c));
	return c;
}

static inline void counts_set(struct bh_uring_op *op, uint64_t c)
{
	memcpy((char *)op + offsetof(struct bh_uring_op, nr), &c, sizeof(c));
}

/* n and sqe_idx side by side, written as one 8-byte store: the loop that
 * arms a batch is bound by its stores (seven per op, six with this), and
 * the compiler merges no stores of values it does not know. */
_Static_assert(offsetof(struct bh_uring_op, sqe_idx) == offsetof(struct bh_uring_op, n) + 4,
	       "n, sqe_idx are adjacent");

static inline void n_idx_set(struct bh_uring_op *op, uint32_t n, uint32_t idx)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t c = n | (uint64_t)idx << 32;
#else
	uint64_t c = (uint64_t)n << 32 | idx;
#endif

	memcpy((char *)op + offsetof(struct bh_uring_op, n), &c, sizeof(c));
}

/* A one-SQE op, not sampled, in state s: the common op's counts. */
#define COUNTS_SINGLE(s) counts_make(1, 1, (s), 0)

/* Bind permits and the nr SQEs from idx on to op (the SQEs are v's). The SQ
 * has room (checked); the caller moves sqe_tail past them. */
static inline void arm(bh_uring_t *t, const struct sq_view *v, struct bh_uring_op *op,
		       bulkhead_t *bh, uint32_t n, unsigned nr, unsigned idx,
		       struct io_uring_sqe **sqes, uint64_t start)
{
	uint64_t ud = ud_make(op, TAG_OP);

	op->t = t;
	op->bh = bh;
	n_idx_set(op, n, idx);
	counts_set(op, counts_make(nr, nr, OP_ARMED, start ? OPF_TIMED : 0));
	if (start) /* read only with OPF_TIMED: no store to the union's line */
		flight_start_set(op, start);
	for (unsigned i = 0; i < nr; i++) {
		sqes[i] = sqe_in(v, idx + i);
		sqes[i]->user_data = ud; /* tracked from now on, even if submitted early */
		v->armed_idx[(idx + i) & v->mask] = idx + i;
	}
}

int bh_uring_get_sqes(bh_uring_t *t, struct bh_uring_op *op, bulkhead_t *bh, uint32_t n,
		      unsigned nr, struct io_uring_sqe **sqes)
{
	struct sq_view v;
	int r;

	if (!t || !op || !bh || !sqes || nr - 1u >= BH_URING_CHAIN_MAX || !op_usable(op))
		return -EINVAL;
	if (op->state == OP_HELD && (op->bh != bh || op->n != n || op->t != t))
		return -EINVAL;
	if (bhu_inherited(t))
		return -EPERM;
	if (t->closing)
		return -ESHUTDOWN;
	if (io_uring_sq_space_left(t->ring) < nr + 1)
		return -EAGAIN;
	if (op->state == OP_HELD) {
		list_del(&t->heldq, op);
	} else if ((r = bh_try_acquire(bh, n)) != 0) {
		if (r == -EBUSY)
			t->st.rejected++;
		return r;
	}
	v = sq_view(t);
	arm(t, &v, op, bh, n, nr, v.tail, sqes, sample_start(bh));
	t->ring->sq.sqe_tail += nr;
	t->ops++;
	return 0;
}

/* One update of the word for the whole batch when it fits; otherwise as
 * many single takes as succeed (the bulkhead counts a rejection for each
 * refused try). */
static int take_many(bulkhead_t *bh, uint32_t n, unsigned count)
{
	unsigned got = 0;
	int r = -EINVAL;

	if ((uint64_t)n * count <= BH_LIMIT_MAX && (r = bh_try_acquire(bh, n * count)) == 0)
		return (int)count;
	if (r == -ESHUTDOWN)
		return r;
	while (got < count && (r = bh_try_acquire(bh, n)) == 0)
		got++;
	return got ? (int)got : r;
}

/* Arm ops[0..got) from v's tail on, until a record in use: how many. */
static inline __attribute__((always_inline)) unsigned
arm_many(bh_uring_t *t, const struct sq_view *v, struct bh_uring_op **ops, unsigned got,
	 bulkhead_t *bh, uint32_t n, unsigned nr, struct io_uring_sqe **sqes, uint64_t start)
{
	unsigned armed;

	for (armed = 0; armed < got; armed++) {
		struct bh_uring_op *op = ops[armed];

		if (BHI_UNLIKELY(!op || !ud_encodable(op) || op->state != OP_IDLE))
			break; /* the batch ends before a record in use */
		arm(t, v, op, bh, n, nr, v->tail + armed * nr, &sqes[armed * nr], start);
	}
	return armed;
}

/* arm_many's common case, one-SQE ops with nothing to sample on a ring of
 * 64-byte SQEs, in a function of its own that calls nothing: inlined
 * between the take and the release that get_many calls, the loop's values
 * did not fit the registers those calls leave, and it loaded four of them
 * from the stack for every op. */
static __attribute__((noinline)) unsigned
arm_singles(bh_uring_t *t, struct sq_view v, struct bh_uring_op **ops, unsigned got,
	    bulkhead_t *bh, uint32_t n, struct io_uring_sqe **sqes)
{
	v.entry = 1;
	return arm_many(t, &v, ops, got, bh, n, 1, sqes, 0);
}

/* arm_many for chains on a ring of 64-byte SQEs, nothing to sample: a
 * function of its own for arm_singles' reason, and with the pair (a write
 * linked to a read, the commonest chain) a copy whose inner loop is gone
 * (callgrind: 42 instructions a pair, against 67 in get_many's own loop,
 * where nr and the SQE's size are unknown). */
static __attribute__((noinline)) unsigned
arm_chains(bh_uring_t *t, struct sq_view v, struct bh_uring_op **ops, unsigned got,
	   bulkhead_t *bh, uint32_t n, unsigned nr, struct io_uring_sqe **sqes)
{
	v.entry = 1;
	if (nr == 2)
		return arm_many(t, &v, ops, got, bh, n, 2, sqes, 0);
	return arm_many(t, &v, ops, got, bh, n, nr, sqes, 0);
}

/* Up to count idle ops, nr SQEs each (op i's are sqes[i * nr] on): one
 * update of bh when all fit. The batch ends before a record in use, and
 * the permits of the ops it could not arm go back. Inlined into each
 * caller, so that bh_uring_get_batch's nr is the constant 1 and its loop
 * pays nothing for chains. */
static inline __attribute__((always_inline)) int
get_many(bh_uring_t *t, struct bh_uring_op **ops, unsigned count, bulkhead_t *bh, uint32_t n,
	 unsigned nr, struct io_uring_sqe **sqes)
{
	struct sq_view v;
	unsigned space, idx, armed;
	uint64_t start;
	int got;

	if (!t || !ops || !bh || !sqes || count == 0 || nr - 1u >= BH_URING_CHAIN_MAX)
		return -EINVAL;
	if (bhu_inherited(t))
		return -EPERM;
	if (t->closing)
		return -ESHUTDOWN;
	space = io_uring_sq_space_left(t->ring);
	if (space < nr + 1)
		return -EAGAIN;
	if (count > (space - 1) / nr) /* one SQE left over, as bh_uring_get_sqes leaves */
		count = (space - 1) / nr;
	got = take_many(bh, n, count);
	if (got < 0) {
		if (got == -EBUSY)
			t->st.rejected += count;
		return got;
	}
	t->st.rejected += count - (unsigned)got;
	v = sq_view(t); /* once: the records' stores could alias the ring's fields */
	idx = v.tail;
	start = sample_start(bh);
	if (BHI_UNLIKELY(start))
		armed = arm_many(t, &v, ops, (unsigned)got, bh, n, nr, sqes, start);
	else if (BHI_LIKELY(nr == 1 && v.entry == 1))
		armed = arm_singles(t, v, ops, (unsigned)got, bh, n, sqes);
	else if (v.entry == 1)
		armed = arm_chains(t, v, ops, (unsigned)got, bh, n, nr, sqes);
	else /* a copy of the loop with no sampling in it */
		armed = arm_many(t, &v, ops, (unsigned)got, bh, n, nr, sqes, 0);
	if (armed < (unsigned)got)
		bh_release(bh, n * ((unsigned)got - armed));
	t->ring->sq.sqe_tail = idx + armed * nr;
	t->ops += armed;
	return armed ? (int)armed : -EINVAL;
}

int bh_uring_get_batch(bh_uring_t *t, struct bh_uring_op **ops, unsigned count, bulkhead_t *bh,
		       uint32_t n, struct io_uring_sqe **sqes)
{
	return get_many(t, ops, count, bh, n, 1, sqes);
}

int bh_uring_get_chains(bh_uring_t *t, struct bh_uring_op **ops, unsigned count, bulkhead_t *bh,
			uint32_t n, unsigned nr, struct io_uring_sqe **sqes)
{
	return get_many(t, ops, count, bh, n, nr, sqes);
}

/* ---- tracking -------------------------------------------------------- */

static void rearm_wake_now(bh_uring_t *t);

/* After a reap, complete or track: the cheap test first (no op waits, the
 * common case), then arm a wake-up poll that is owed (rearm_wake_now). */
static inline void rearm_if_owed(bh_uring_t *t)
{
	if (BHI_UNLIKELY(t->waitq.count) && !t->wake_armed)
		rearm_wake_now(t);
}

/* A refused op: its SQEs become NOPs whose CQEs the tracker swallows, and its
 * permits go back. Nothing of it reaches the kernel. */
static bool chain_into_skips(const bh_uring_t *t, const struct bh_uring_op *op);

void bhu_neutralise(bh_uring_t *t, struct bh_uring_op *op)
{
	/* A pending chain with CQE_SKIP_SUCCESS linked into the NOPs would
	 * post nothing for them if it failed, and the helpers would never
	 * come back: end that chain before them. */
	if (chain_into_skips(t, op))
		sqe_at(t, op->sqe_idx - 1)->flags &= (__u8)~(IOSQE_IO_LINK | IOSQE_IO_HARDLINK);
	for (unsigned i = 0; i < op->nr; i++) {
		struct io_uring_sqe *sqe = sqe_at(t, op->sqe_idx + i);

		io_uring_prep_nop(sqe);
		sqe->user_data = ud_make(t, TAG_NOP);
	}
	t->helpers += op->nr;
	t->ops--;
	op->state = OP_IDLE;
	bh_release(op->bh, op->n);
}

/* The pending SQEs linked into op's first one: one with CQE_SKIP_SUCCESS
 * that fails makes the kernel post nothing for the rest of the chain. */
static bool chain_into_skips(const bh_uring_t *t, const struct bh_uring_op *op)
{
	unsigned idx = op->sqe_idx;

	while (idx != t->ring->sq.sqe_head) {
		const struct io_uring_sqe *prev = sqe_at(t, --idx);

		if (!(prev->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK)))
			return false;
		if (prev->flags & IOSQE_CQE_SKIP_SUCCESS)
			return true;
	}
	return false;
}

/* A zero-copy send that a link may cancel before it starts: the kernel
 * then posts -ECANCELED without IORING_CQE_F_MORE, and its notification
 * after that. That first CQE would look final, the permits would go back,
 * and the notification would come as a stray, or as the final CQE of the
 * record's next op. So one is tracked only where nothing links into it:
 * first in its op, and not linked into from a pending SQE. */
_Static_assert(IORING_OP_SENDMSG_ZC == IORING_OP_SEND_ZC + 1, "the zero-copy sends are adjacent");

static inline bool zc_opcode(uint8_t opcode)
{
	return (uint8_t)(opcode - IORING_OP_SEND_ZC) < 2; /* one compare for both */
}

/* Whether op's prepared SQEs can be tracked as one chain ending in a final
 * CQE per member, and linked to a timeout when asked. */
static bool sqes_trackable(const bh_uring_t *t, const struct bh_uring_op *op, bool deadline)
{
	uint64_t ud = ud_make(op, TAG_OP);
	const struct io_uring_sqe *last = sqe_at(t, op->sqe_idx + op->nr - 1u);

	for (unsigned i = 0; i < op->nr; i++) {
		const struct io_uring_sqe *sqe = sqe_at(t, op->sqe_idx + i);

		if (sqe->user_data != ud || (sqe->flags & IOSQE_CQE_SKIP_SUCCESS) ||
		    (i && zc_opcode(sqe->opcode)))
			return false;
	}
	/* a ring made with IORING_SETUP_IOPOLL refuses timeouts: the op
	 * would fail with -ECANCELED behind a LINK_TIMEOUT that cannot start */
	if (deadline && ((last->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK)) ||
			 t->ring->sq.sqe_tail != op->sqe_idx + op->nr ||
			 (t->ring->flags & IORING_SETUP_IOPOLL)))
		return false;
	if (op->sqe_idx != t->ring->sq.sqe_head && zc_opcode(sqe_at(t, op->sqe_idx)->opcode) &&
	    (sqe_at(t, op->sqe_idx - 1)->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK)))
		return false;
	return !chain_into_skips(t, op);
}

static void link_chain(bh_uring_t *t, struct bh_uring_op *op)
{
	for (unsigned i = 0; i + 1u < op->nr; i++) {
		struct io_uring_sqe *sqe = sqe_at(t, op->sqe_idx + i);

		if (!(sqe->flags & IOSQE_IO_HARDLINK))
			sqe->flags |= IOSQE_IO_LINK;
	}
}

/* The kernel's deadline for the op: a LINK_TIMEOUT right after its last SQE
 * (sqes_trackable made sure it is the newest, and get kept room for it).
 * Its CQE never releases anything. */
static bool link_deadline(bh_uring_t *t, struct bh_uring_op *op, uint64_t deadline_ns)
{
	struct io_uring_sqe *last = sqe_at(t, op->sqe_idx + op->nr - 1u);
	struct io_uring_sqe *lt = helper_sqe(t, op, TAG_TIMEOUT);

	if (!lt)
		return false;
	op->u.ts.tv_sec = (long long)(deadline_ns / BH_SEC);
	op->u.ts.tv_nsec = (long long)(deadline_ns % BH_SEC);
	last->flags |= IOSQE_IO_LINK;
	io_uring_prep_link_timeout(lt, &op->u.ts, IORING_TIMEOUT_ABS);
	return true;
}

/* bh_uring_track's outcomes, each its own code so that the caller knows
 * the op's state from the return value alone: 0 (tracked), -EALREADY
 * (tracked, unchecked), -ECANCELED (refused: idle), -EINVAL (misuse:
 * unchanged). */
static int decline_track(bh_uring_t *t, struct bh_uring_op *op)
{
	bhu_neutralise(t, op);
	t->st.refused++;
	return -ECANCELED;
}

static BHI_COLD int track_slow(bh_uring_t *t, struct bh_uring_op *op, uint64_t deadline_ns)
{
	bool deadline = deadline_ns != BH_FOREVER;

	if (!sqe_pending(t, op->sqe_idx)) {
		/* Submitted before it was sealed: its user_data still tracks
		 * it, but nothing can be checked or linked any more. */
		op->state = OP_INFLIGHT;
		t->st.started++;
		t->st.refused++;
		return -EALREADY;
	}
	if (!sqes_trackable(t, op, deadline))
		return decline_track(t, op);
	link_chain(t, op);
	if (deadline && !link_deadline(t, op, deadline_ns))
		return decline_track(t, op);
	op->state = OP_INFLIGHT;
	t->st.started++;
	return 0;
}

/* op's nr SQEs from idx (its first) on still carry its user_data, none
 * has CQE_SKIP_SUCCESS (its final CQE must come), no member after the
 * first is a zero-copy send (zc_opcode), and the last links into nothing.
 * The last test, on the byte the loop just read, keeps the batch's
 * shortcut sound: an op right after the last SQE sealed here is linked
 * into by nothing, so the zero-copy send that may start it needs no look.
 * An op whose last SQE links on is sealed by the slow path, which looks at
 * what it links into. (Callgrind: the one-SQE op pays nothing for it; a
 * variant that peeled the first member or chose the mask per member took
 * one more register, saved and restored by every bh_uring_track.) */
static inline __attribute__((always_inline)) bool
sqes_intact(const struct sq_view *v, const struct bh_uring_op *op, unsigned idx, unsigned nr)
{
	uint64_t ud = ud_make(op, TAG_OP);
	const struct io_uring_sqe *sqe = NULL;

	for (unsigned i = 0; i < nr; i++) {
		sqe = sqe_in(v, idx + i);
		if (sqe->user_data != ud || (sqe->flags & IOSQE_CQE_SKIP_SUCCESS) ||
		    (i && zc_opcode(sqe->opcode)))
			return false;
	}
	/* the last SQE, which the loop just read (nr >= 1) */
	return !(sqe->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK));
}

/* Link a chain's nr members from idx on (a hard link stays hard). */
static inline __attribute__((always_inline)) void
link_members(const struct sq_view *v, unsigned idx, unsigned nr)
{
	for (unsigned i = 0; i + 1u < nr; i++) {
		struct io_uring_sqe *sqe = sqe_in(v, idx + i);

		if (!(sqe->flags & IOSQE_IO_HARDLINK))
			sqe->flags |= IOSQE_IO_LINK;
	}
}

/* The common case in a few loads, for an op without a deadline: its SQEs
 * still pending (the first is: the rest follow it), intact, and the first
 * not linked into from the SQE before it, unless that one is sealed (the
 * last SQE of the op just tracked by this call, which sqes_intact saw link
 * into nothing; none: v->head - 1). Then a chain's members are linked. */
static inline __attribute__((always_inline)) bool
fast_trackable(const struct sq_view *v, const struct bh_uring_op *op, unsigned nr, unsigned sealed)
{
	unsigned idx = op->sqe_idx;

	if (idx - v->head >= v->tail - v->head || !sqes_intact(v, op, idx, nr))
		return false;
	if (idx != v->head && idx - 1 != sealed &&
	    (sqe_in(v, idx - 1)->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK)))
		return false;
	link_members(v, idx, nr);
	return true;
}

/* fast_trackable with op's own nr, the one-SQE op (the common case) with
 * its loops gone. */
static inline __attribute__((always_inline)) bool
op_fast_trackable(const struct sq_view *v, const struct bh_uring_op *op, unsigned sealed)
{
	return BHI_LIKELY(op->nr == 1) ? fast_trackable(v, op, 1, sealed)
				       : fast_trackable(v, op, op->nr, sealed);
}

/* fast_trackable for one op, nothing sealed before it. */
static inline bool track_fast(const bh_uring_t *t, const struct bh_uring_op *op)
{
	struct sq_view v = sq_view(t);

	return op_fast_trackable(&v, op, v.head - 1);
}

int bh_uring_track(bh_uring_t *t, struct bh_uring_op *op, uint64_t deadline_ns)
{
	int r;

	if (BHI_UNLIKELY(!t || !op || op->t != t || op->state != OP_ARMED))
		return -EINVAL;
	if (bhu_inherited(t))
		return -EPERM;
	if (BHI_LIKELY(deadline_ns == BH_FOREVER && track_fast(t, op))) {
		op->state = OP_INFLIGHT;
		t->st.started++;
		rearm_if_owed(t); /* after the op: it may have been the poll's last obstacle */
		return 0;
	}
	r = track_slow(t, op, deadline_ns);
	rearm_if_owed(t); /* behind the op's LINK_TIMEOUT, if it has one */
	return r;
}

/* How much an outcome asks of the caller: a batch returns the one that asks
 * most of any of its ops (misuse, then a refusal, then an unchecked op). */
static int outcome_rank(int r)
{
	return r == -EINVAL ? 3 : r == -ECANCELED ? 2 : r == -EALREADY ? 1 : 0;
}

static int worse(int a, int b)
{
	return outcome_rank(b) > outcome_rank(a) ? b : a;
}

/* The batch's common op (its counts say armed, nothing to sample): right
 * after the SQE last sealed (or the first pending one), so nothing links
 * into it unchecked, and its nr SQEs all pending (sealed is pending, or
 * just before head: tail - idx is how many SQEs from idx on are), intact;
 * then a chain's members are linked. Inlined with nr the constant 1 for
 * one-SQE ops. */
static inline __attribute__((always_inline)) bool
next_op(const struct sq_view *v, struct bh_uring_op *op, unsigned nr, unsigned sealed)
{
	unsigned idx = op->sqe_idx;

	if (idx - 1u != sealed || v->tail - idx < nr || !sqes_intact(v, op, idx, nr))
		return false;
	link_members(v, idx, nr);
	return true;
}

/* Counts that say armed, nr SQEs (nr < 2^16: the fields do not carry),
 * nothing to sample. */
static inline uint64_t counts_armed(unsigned nr)
{
	return nr * counts_make(1, 1, 0, 0) + counts_make(0, 0, OP_ARMED, 0);
}

/* next_op for an op of nr SQEs, then tracked, and its last SQE sealed. */
static inline __attribute__((always_inline)) bool
seal_next(const struct sq_view *v, struct bh_uring_op *op, unsigned nr, unsigned *sealed)
{
	if (!next_op(v, op, nr, *sealed))
		return false;
	op->state = OP_INFLIGHT;
	*sealed = op->sqe_idx + nr - 1u; /* its last SQE */
	return true;
}

/* The batch's common op: armed with nothing to sample, right after the SQE
 * last sealed (next_op). A one-SQE op is the commonest, then a pair (a
 * write linked to a read): each has a copy with its loops gone. */
static inline __attribute__((always_inline)) bool
track_next(const bh_uring_t *t, const struct sq_view *v, struct bh_uring_op *op,
	   unsigned *sealed)
{
	uint64_t c;

	if (!op || op->t != t)
		return false;
	c = counts_of(op);
	if (c == counts_armed(1))
		return seal_next(v, op, 1, sealed);
	if (c == counts_armed(2))
		return seal_next(v, op, 2, sealed);
	return c == counts_armed(op->nr) && seal_next(v, op, op->nr, sealed);
}

/* Track ops[0..count) while they are such ops: how many. */
static inline __attribute__((always_inline)) unsigned
track_many(const bh_uring_t *t, struct sq_view v, struct bh_uring_op **ops, unsigned count,
	   unsigned *sealed)
{
	unsigned last = *sealed, i;

	for (i = 0; i < count && track_next(t, &v, ops[i], &last); i++)
		;
	*sealed = last;
	return i;
}

/* track_many in a function of its own that calls nothing, so that the
 * loop's values stay in registers; on a ring of 64-byte SQEs (the common
 * one) a copy where the SQE's size is a constant, as arm_singles does. */
static __attribute__((noinline)) unsigned
track_run(const bh_uring_t *t, const struct sq_view *v, struct bh_uring_op **ops,
	  unsigned count, unsigned *sealed)
{
	struct sq_view w = *v;

	if (BHI_LIKELY(w.entry == 1)) {
		w.entry = 1;
		return track_many(t, w, ops, count, sealed);
	}
	return track_many(t, w, ops, count, sealed);
}

/* An op track_run stopped at: misuse, an op whose SQEs are not next to the
 * last sealed, or one that needs the slow path. Updates *sealed and *fast;
 * returns the batch's outcome so far, r, made worse if need be. */
static BHI_COLD int track_other(bh_uring_t *t, const struct sq_view *v, struct bh_uring_op *op,
				unsigned *sealed, unsigned *fast, int r)
{
	if (!op || op->t != t || op->state != OP_ARMED)
		return -EINVAL;
	if (!op_fast_trackable(v, op, *sealed))
		return worse(r, track_slow(t, op, BH_FOREVER));
	op->state = OP_INFLIGHT;
	*sealed = op->sqe_idx + op->nr - 1u; /* its last SQE */
	(*fast)++;
	return r;
}

/* The fast check for many ops, with the ring's fields read once: the slow
 * path (never a deadline here) takes no SQE, so they stay valid. An op
 * right after one just sealed (a bh_uring_get_batch) needs no look at the
 * SQE before it. */
int bh_uring_track_batch(bh_uring_t *t, struct bh_uring_op **ops, unsigned count)
{
	struct sq_view v;
	unsigned sealed, i = 0, fast = 0;
	int r = 0;

	if (!t || !ops)
		return -EINVAL;
	if (bhu_inherited(t))
		return -EPERM;
	v = sq_view(t);
	sealed = v.head - 1; /* no SQE: the one before head is not pending */
	while (i < count) {
		unsigned run = track_run(t, &v, ops + i, count - i, &sealed);

		fast += run;
		i += run;
		if (i < count) {
			r = track_other(t, &v, ops[i], &sealed, &fast, r);
			i++;
		}
	}
	t->st.started += fast;
	rearm_if_owed(t);
	return r;
}

/* ---- completions ----------------------------------------------------- */

static void rel_flush(struct rel_batch *rb)
{
	for (unsigned i = 0; i < rb->used; i++)
		bh_release(rb->bh[i], rb->n[i]);
	rb->used = 0;
}

/* Give back n permits of bh with the rest of the batch. */
static void rel_add(struct rel_batch *rb, bulkhead_t *bh, uint32_t n)
{
	unsigned i;

	for (i = 0; i < rb->used; i++) {
		if (rb->bh[i] == bh) {
			rb->n[i] += n;
			return;
		}
	}
	if (rb->used == REL_SLOTS)
		rel_flush(rb);
	rb->bh[rb->used] = bh;
	rb->n[rb->used++] = n;
}

static BHI_COLD int stray(bh_uring_t *t)
{
	t->st.strays++;
	return -EINVAL;
}

/* The op's latency to the adaptive controller: dropped when the kernel
 * cancelled it (its deadline, bh_uring_cancel) or it timed out, ignored when
 * it failed on its own. *now is read once per batch. */
static BHI_COLD void sample_done(const struct bh_uring_op *op, int32_t res, uint64_t *now)
{
	int o = res == -ECANCELED || res == -ETIME || res == -ETIMEDOUT ? BHK_DROPPED
		: res < 0					       ? BHK_IGNORE
								       : BHK_OK;

	if (!*now)
		*now = bh_now_ns();
	bhk_emit(op->bh, BHK_URING, *now - flight_start(op), o);
}

/* counts' fields, as counts_make lays them out. */
#define COUNTS_LEFT_ONE counts_make(0, 1, 0, 0)
#define COUNTS_LEFT_MASK counts_make(0, 0xffff, 0, 0)
#define COUNTS_STATE_MASK counts_make(0, 0, 0xffff, 0)

/* op_cqe's common cases, which look at nothing but the op's counts and the
 * CQE's flags: a CQE of an op armed or in flight with nothing to sample,
 * that is not past its last. MORE, or DONE (the op idle); -1 for the rest,
 * and nothing written then. */
static inline __attribute__((always_inline)) int
op_cqe_plain(struct bh_uring_op *op, const struct io_uring_cqe *cqe)
{
	uint64_t c = counts_of(op);

	/* The common op's one CQE: the final one, nothing to sample. */
	if (BHI_LIKELY(c == COUNTS_SINGLE(OP_INFLIGHT) && !(cqe->flags & IORING_CQE_F_MORE))) {
		counts_set(op, counts_make(1, 0, OP_IDLE, 0));
		return BH_URING_DONE;
	}
	if (op->state < OP_ARMED || (op->flags & OPF_TIMED) || op->cqes_left == 0)
		return -1;
	if (cqe->flags & IORING_CQE_F_MORE)
		return BH_URING_MORE;
	if (op->cqes_left > 1) {
		counts_set(op, c - COUNTS_LEFT_ONE);
		return BH_URING_MORE;
	}
	/* The final CQE: no CQE left, idle (its nr and flags stay). */
	counts_set(op, c & ~(COUNTS_LEFT_MASK | COUNTS_STATE_MASK));
	return BH_URING_DONE;
}

/* A tracked op's CQE: MORE, or DONE at the final CQE of its last chain
 * member. On DONE the caller gives op->n permits of op->bh back (the op is
 * idle, but nobody else can reuse it before the caller's fn sees it) and
 * counts. */
static inline int op_cqe(bh_uring_t *t, const struct io_uring_cqe *cqe, struct bh_uring_op *op,
			 uint64_t *now)
{
	int kd;

	if (BHI_UNLIKELY(op->t != t))
		return stray(t);
	kd = op_cqe_plain(op, cqe);
	if (BHI_LIKELY(kd >= 0))
		return kd;
	if (BHI_UNLIKELY(op->state < OP_ARMED))
		return stray(t);
	if ((cqe->flags & IORING_CQE_F_MORE) || --op->cqes_left)
		return BH_URING_MORE;
	/* The final CQE: the kernel is done with the op. */
	op->state = OP_IDLE;
	if (BHI_UNLIKELY(op->flags & OPF_TIMED))
		sample_done(op, cqe->res, now);
	return BH_URING_DONE;
}

static BHI_COLD int helper_cqe(bh_uring_t *t, const struct io_uring_cqe *cqe, enum ud_tag tag)
{
	if (!(cqe->flags & IORING_CQE_F_MORE))
		t->helpers--;
	if (tag == TAG_WAKE) {
		bhu_on_wake(t, cqe);
		t->woken = true; /* the caller delivers the grants */
	} else if (tag == TAG_DRAIN && cqe->res == -EINVAL) {
		t->no_cancel_any = true; /* before 5.19: nothing would end them */
	}
	return BH_URING_HELPER;
}

/* Classify one CQE and update the books (the caller gives a DONE op's
 * permits back). */
static inline int classify(bh_uring_t *t, const struct io_uring_cqe *cqe, struct bh_uring_op **opp,
			   uint64_t *now)
{
	uint64_t ud = cqe->user_data;

	if (BHI_UNLIKELY((ud & ~UD_PTR_MASK) != UD_MAGIC)) { /* not a tracked op */
		*opp = NULL;
		if ((ud >> 56) != BH_URING_UD_TAG)
			return BH_URING_FOREIGN;
		return helper_cqe(t, cqe, (enum ud_tag)(ud & UD_TAG_MASK));
	}
	*opp = ud_ptr(ud);
	return op_cqe(t, cqe, *opp, now);
}

/* Grants to hand out: the wake-up poll fired (helper_cqe said so), or some
 * were collected earlier and not yet told. */
static inline void deliver_due(bh_uring_t *t)
{
	if (t->woken || t->ready_head) {
		t->woken = false;
		bhu_deliver(t);
	}
}

/* The op whose pending SQE sits at idx, if it is one taken and not yet
 * tracked. The pointer is followed only for an SQE a get of this tracker
 * armed at this very index (armed_idx), still pending and still carrying
 * an op's user_data: such an op cannot have finished, so it is alive (a
 * refused or cancelled one's SQEs were rewritten as NOPs). A stale
 * user_data left in a slot the caller took is never followed. */
static struct bh_uring_op *armed_at(const bh_uring_t *t, unsigned idx)
{
	uint64_t ud = sqe_at(t, idx)->user_data;
	struct bh_uring_op *op;

	if ((ud & ~UD_PTR_MASK) != (UD_MAGIC | TAG_OP) ||
	    t->armed_idx[idx & t->ring->sq.ring_mask] != idx)
		return NULL;
	op = ud_ptr(ud);
	return op->t == t && op->state == OP_ARMED ? op : NULL;
}

bool bhu_armed_pending(const bh_uring_t *t)
{
	const struct io_uring_sq *sq = &t->ring->sq;

	for (unsigned i = sq->sqe_head; i != sq->sqe_tail; i++)
		if (armed_at(t, i))
			return true;
	return false;
}

/* Neutralising an op rewrites its SQEs' user_data, so a chain's later
 * members are not found again. */
void bhu_withdraw_armed(bh_uring_t *t)
{
	const struct io_uring_sq *sq = &t->ring->sq;

	for (unsigned i = sq->sqe_head; i != sq->sqe_tail; i++) {
		struct bh_uring_op *op = armed_at(t, i);

		if (op)
			bhu_neutralise(t, op);
	}
}

/* After a reap, complete, track or cancel, while ops wait and the wake-up
 * poll ended: arm it (rearm_wake). When the caller's own SQEs fill the SQ,
 * the submit that follows would go without the poll and a grant would wake
 * nobody, so the owner's prepared SQEs go first (this is the owner thread:
 * a SINGLE_ISSUER ring allows it) and the poll is armed behind them. Not
 * while an op of ours is taken and not yet tracked, whose SQEs may not be
 * prepared yet: then the track or cancel that ends the last such op tries
 * again. */
static BHI_COLD void rearm_wake_now(bh_uring_t *t)
{
	/* A grant callback that bh_uring_complete ran may have forked: the
	 * child takes no SQE of the parent's ring. */
	if (!rearm_owed(t) || bhu_inherited(t))
		return;
	if (bhu_arm_wake(t) == -EAGAIN && !bhu_armed_pending(t) &&
	    io_uring_submit(t->ring) > 0) {
		bhu_sq_room_wait(t->ring);
		bhu_arm_wake(t);
	}
}

/* After a submit that took SQEs off a full SQ: an SQPOLL ring's SQ thread
 * frees their room only when it takes them (microseconds). One
 * IORING_ENTER_SQ_WAIT is not enough: the kernel returns once its own
 * private head has moved, which can be before it publishes the ring's head
 * that io_uring_sq_space_left reads (it does so after the whole batch), so
 * an SQ thread preempted in between leaves the ring full: wait again, and
 * yield the CPU that thread may be waiting for. It ends: the SQEs were
 * submitted, and the SQ thread publishes its head after each batch. */
BHI_COLD void bhu_sq_room_wait(struct io_uring *ring)
{
	if (!(ring->flags & IORING_SETUP_SQPOLL))
		return;
	while (io_uring_sq_space_left(ring) == 0) {
		int r = io_uring_sqring_wait(ring);

		if (r < 0 && r != -EINTR)
			return; /* the ring is unusable: the caller sees it next */
		if (io_uring_sq_space_left(ring) == 0)
			sched_yield();
	}
}


int bh_uring_complete(bh_uring_t *t, const struct io_uring_cqe *cqe, struct bh_uring_op **op)
{
	struct bh_uring_op *o;
	uint64_t now = 0;
	bool reaping;
	int kind;

	if (!t || !cqe)
		return -EINVAL;
	if (bhu_inherited(t))
		return -EPERM;
	kind = classify(t, cqe, &o, &now);
	if (op) /* a stray's record may be reused or freed by now */
		*op = kind >= 0 ? o : NULL;
	if (kind == BH_URING_DONE) {
		bh_release(o->bh, o->n);
		t->ops--;
		t->st.finished++;
	}
	/* The grant callbacks run while the caller's CQE is not yet consumed:
	 * a reap or drain from one would handle it twice (-EINVAL, as from a
	 * reap). Kept as found: a reap's fn may call this. */
	reaping = t->reaping;
	t->reaping = true;
	deliver_due(t);
	t->reaping = reaping;
	rearm_if_owed(t);
	return kind;
}

/* One batch of CQEs as booked: what each CQE was, by its place in the
 * batch. A byte each, not the CQE's and op's pointers: showing them to fn
 * reads both back from the CQ, which stays put until the batch is
 * advanced, and the booking loop's stores stay within one cache line. */
struct chunk {
	uint8_t kind[CHUNK]; /* enum bh_uring_kind, or KIND_STRAY */
	unsigned done;
	bool woken; /* the chunk had the wake-up poll's CQE */
};

/* A CQE that named an op of ours that is not in flight (bh_uring_stats
 * counts it); fn never sees it, nor a helper's. */
#define KIND_STRAY UINT8_MAX

/* A chunk's CQEs in the CQ array: n from first on, by stride (2 on CQE32
 * rings), the last wrap of them from the array's start. Two runs, each
 * walked by pointer with nothing to test per CQE for the array's end. */
struct cq_runs {
	struct io_uring_cqe *first, *start;
	unsigned stride, n, n_first; /* n_first: the CQEs before the array's end */
};

/* What the booking of a chunk adds up as it goes. A run of DONE ops of one
 * bulkhead (the common case) adds up in run_bh/run_n; rb takes a run only
 * when the bulkhead changes. */
struct booking {
	struct rel_batch rb;
	bulkhead_t *run_bh;
	uint32_t run_n; /* at most CHUNK ops of at most BH_LIMIT_MAX each */
	unsigned done;
	uint64_t now;
};

_Static_assert(TAG_OP == 0, "a tracked op's user_data is the magic and its pointer");

/* A CQE that op_cqe_plain books, of an op of ours, unless it would be the
 * final CQE of an op of another bulkhead than the run's (run_bh): booked,
 * and its kind returned; -1 for any other, which book_other books (nothing
 * is written then). A MORE may be any bulkhead's: a batch of chains can
 * bring every chain's first CQE before any chain's last. */
static inline __attribute__((always_inline)) int
book_fast(const bh_uring_t *t, const struct io_uring_cqe *cqe, const bulkhead_t *run_bh,
	  struct bh_uring_op **opp)
{
	/* A tracked op's user_data less the magic is the op's pointer, tag 0:
	 * one test of what is left over says both, and no mask makes the
	 * pointer (two loads, two masks and a compare before). */
	uint64_t p = cqe->user_data ^ UD_MAGIC;
	struct bh_uring_op *op = (struct bh_uring_op *)(uintptr_t)p;

	if ((p & ~UD_PTR_MASK) != 0 || op->t != t)
		return -1;
	if (op->bh != run_bh && op->cqes_left == 1 && !(cqe->flags & IORING_CQE_F_MORE))
		return -1;
	*opp = op;
	return op_cqe_plain(op, cqe);
}

/* Any other CQE: classify it; a DONE op of another bulkhead than the run's
 * puts the run so far into rb and starts its own. */
static BHI_COLD void book_other(bh_uring_t *t, const struct io_uring_cqe *cqe, uint8_t *kind,
				struct booking *b)
{
	struct bh_uring_op *op;
	int kd = classify(t, cqe, &op, &b->now);

	*kind = kd < 0 ? KIND_STRAY : (uint8_t)kd;
	if (kd != BH_URING_DONE)
		return;
	b->done++;
	if (op->bh != b->run_bh) {
		if (b->run_bh)
			rel_add(&b->rb, b->run_bh, b->run_n);
		b->run_bh = op->bh;
		b->run_n = 0;
	}
	b->run_n += op->n;
}

/* Book n CQEs side by side from cqe on into kind[] (the reap's hot loop).
 * Those book_fast books go through an inner loop that calls nothing, so
 * that its values stay in registers: with the calls of the other cases in
 * the same loop, GCC 12 kept the run and the count on the stack, a load and
 * a store per CQE, each load waiting for the store before it. Not inlined,
 * for the same reason. */
static __attribute__((noinline)) void
book_run(bh_uring_t *t, struct io_uring_cqe *cqe, unsigned stride, unsigned n, uint8_t *kind,
	 struct booking *b)
{
	uint8_t *k = kind, *end = kind + n;

	while (k < end) {
		const bulkhead_t *run_bh = b->run_bh;
		uint32_t run_n = 0;
		unsigned more = 0;
		uint8_t *first = k;
		struct bh_uring_op *op;
		int kd;

		for (; k < end && (kd = book_fast(t, cqe, run_bh, &op)) >= 0; k++, cqe += stride) {
			*k = (uint8_t)kd;
			if (kd == BH_URING_DONE)
				run_n += op->n;
			else
				more++;
		}
		b->run_n += run_n;
		b->done += (unsigned)(k - first) - more;
		if (k < end) {
			book_other(t, cqe, k, b);
			k++;
			cqe += stride;
		}
	}
}

/* Book the chunk's CQEs into k and give their permits back in one batch. */
static inline void book_chunk(bh_uring_t *t, const struct cq_runs *c, struct chunk *k)
{
	struct booking b = { .run_bh = NULL };

	b.rb.used = 0;
	book_run(t, c->first, c->stride, c->n_first, k->kind, &b);
	if (BHI_UNLIKELY(c->n > c->n_first))
		book_run(t, c->start, c->stride, c->n - c->n_first, k->kind + c->n_first, &b);
	if (b.run_bh)
		rel_add(&b.rb, b.run_bh, b.run_n);
	rel_flush(&b.rb);
	k->done = b.done;
	/* The chunk's own: grants wait until fn has seen the whole chunk, even
	 * if fn hands the tracker a CQE of its own (bh_uring_complete). */
	k->woken = t->woken;
	t->woken = false;
}

/* Show n booked CQEs side by side from cqe on to fn, in order: the CQ still
 * holds them (nothing is advanced yet), so each CQE and its op are read
 * back from it. */
static inline __attribute__((always_inline)) void
show_run(struct io_uring_cqe *cqe, unsigned stride, unsigned n, const uint8_t *kind,
	 bh_uring_cqe_fn *fn, void *ctx)
{
	for (unsigned i = 0; i < n; i++, cqe += stride)
		if (kind[i] < BH_URING_HELPER) /* FOREIGN, MORE, DONE */
			fn(ctx, cqe, kind[i], kind[i] ? ud_ptr(cqe->user_data) : NULL);
}

/* show_run for a run whose CQEs are all DONE: no kind to read or test, and
 * each op's pointer is its user_data less the magic (tag 0). */
static inline __attribute__((always_inline)) void
show_done_run(struct io_uring_cqe *cqe, unsigned stride, unsigned n, bh_uring_cqe_fn *fn,
	      void *ctx)
{
	for (unsigned i = 0; i < n; i++, cqe += stride)
		fn(ctx, cqe, BH_URING_DONE,
		   (struct bh_uring_op *)(uintptr_t)(cqe->user_data ^ UD_MAGIC));
}

/* A chunk whose every CQE was an op's final one (done counts DONE only;
 * the common batch of one-SQE ops) takes the copy that reads no kinds. */
static inline void show_chunk(const struct cq_runs *c, const struct chunk *k,
			      bh_uring_cqe_fn *fn, void *ctx)
{
	if (BHI_LIKELY(k->done == c->n)) {
		show_done_run(c->first, c->stride, c->n_first, fn, ctx);
		if (BHI_UNLIKELY(c->n > c->n_first))
			show_done_run(c->start, c->stride, c->n - c->n_first, fn, ctx);
		return;
	}
	show_run(c->first, c->stride, c->n_first, k->kind, fn, ctx);
	if (BHI_UNLIKELY(c->n > c->n_first))
		show_run(c->start, c->stride, c->n - c->n_first, k->kind + c->n_first, fn, ctx);
}

/* One batch: book up to CHUNK CQEs, give the permits back, then show them to
 * fn - so a callback that starts a new op finds the permits free - and
 * advance the CQ. Returns how many CQEs it consumed, or -EPERM in a fork
 * child that a callback made and then returned into the parent's reap:
 * the CQ is the parent's, so the child moves its head no further (fn saw
 * the rest of the batch; the CQEs stay for the parent) and books no more
 * (a grant callback runs after the advance). Checked once a batch, and
 * only after callbacks. */
static int reap_chunk(bh_uring_t *t, bh_uring_cqe_fn *fn, void *ctx)
{
	struct io_uring *ring = t->ring;
	struct io_uring_cq *cq = &ring->cq;
	/* acquire: the CQEs are written before the kernel moves the tail */
	unsigned head = *cq->khead, n = io_uring_smp_load_acquire(cq->ktail) - head;
	unsigned shift = io_uring_cqe_shift(ring), at = head & cq->ring_mask;
	struct cq_runs c;
	struct chunk k;

	if (n == 0)
		return 0;
	c.first = &cq->cqes[at << shift];
	c.start = cq->cqes;
	c.stride = 1u << shift;
	c.n = n < CHUNK ? n : CHUNK;
	c.n_first = c.n < cq->ring_entries - at ? c.n : cq->ring_entries - at;
	book_chunk(t, &c, &k);
	t->ops -= k.done;
	t->st.finished += k.done;
	if (fn) {
		show_chunk(&c, &k, fn, ctx);
		if (bhu_inherited(t))
			return -EPERM;
	}
	io_uring_cq_advance(ring, c.n);
	if (k.woken || t->ready_head) {
		bhu_deliver(t);
		if (bhu_inherited(t))
			return -EPERM;
	}
	return (int)c.n;
}

/* The kernel parks CQEs it had no room for; iterating the CQ never brings
 * them back, entering the kernel does. */
static int flush_overflow(bh_uring_t *t)
{
	int r = io_uring_get_events(t->ring);

	return r < 0 && r != -EBUSY && r != -EINTR && r != -EAGAIN ? r : 0;
}

int bh_uring_reap(bh_uring_t *t, bh_uring_cqe_fn *fn, void *ctx)
{
	unsigned budget, total = 0;
	int n, r = 0;

	if (!t || t->reaping) /* reaping: a callback called us */
		return -EINVAL;
	if (bhu_inherited(t))
		return -EPERM;
	t->reaping = true;
	budget = 16 * t->ring->cq.ring_entries; /* callbacks may keep adding CQEs */
	while (total < budget) {
		n = reap_chunk(t, fn, ctx);
		if (BHI_LIKELY(n > 0)) {
			total += (unsigned)n;
			continue;
		}
		if (n < 0) { /* a callback forked, and this is the child */
			t->reaping = false;
			return n;
		}
		if (!io_uring_cq_has_overflow(t->ring) || (r = flush_overflow(t)) < 0)
			break;
	}
	rearm_if_owed(t);
	t->reaping = false;
	return total || r == 0 ? (int)total : r;
}

void bh_uring_stats(const bh_uring_t *t, struct bh_uring_stats *out)
{
	if (!out)
		return;
	if (!t) {
		memset(out, 0, sizeof(*out)); /* a tracker with nothing in it */
		return;
	}
	*out = t->st;
	out->in_flight = t->ops;
	out->held = t->heldq.count;
	out->waiting = t->waitq.count;
	out->helpers = t->helpers;
}
