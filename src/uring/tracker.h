/* The tracker's private header: its state, the user_data tags and the owner's
 * lists, shared by the submission and completion side (uring.c) and the
 * bridge that brings grants from other threads to the owner (grant.c). */
#ifndef BH_URING_TRACKER_H
#define BH_URING_TRACKER_H

#include <sys/types.h>

#include "bulkhead/uring.h"
#include "core/layer.h"
#include "lib/compiler.h"
#include "lib/list.h"

/* Where an op is. Only the owner thread reads or writes it. */
enum op_state {
	OP_IDLE = 0, /* an all-zero record is idle */
	OP_WAITING,  /* queued in a bulkhead (or granted, not yet told) */
	OP_HELD,     /* granted permits, no SQE yet */
	OP_ARMED,    /* permits and SQEs taken, not yet tracked */
	OP_INFLIGHT, /* tracked: permits go back at the final CQE */
};

enum {
	OPF_CANCELLED = 1, /* a kernel cancel was prepared for it */
	OPF_TIMED = 2,     /* start_ns holds when it took its SQE: sample its end */
};

/* The low bits of user_data say which of the tracker's SQEs a CQE is for:
 * records are 8-aligned, so the pointer keeps the rest. */
enum ud_tag {
	TAG_OP = 0,      /* a tracked op (pointer: the op) */
	TAG_CANCEL = 1,  /* its ASYNC_CANCEL (pointer: the op, never read) */
	TAG_TIMEOUT = 2, /* its LINK_TIMEOUT (pointer: the op, never read) */
	TAG_NOP = 3,     /* a refused op's SQE, neutralised (pointer: tracker) */
	TAG_WAKE = 4,    /* the eventfd poll that wakes the owner (tracker) */
	TAG_DRAIN = 5,   /* drain's cancel-everything (tracker) */
};
#define UD_TAG_MASK 7ull
#define UD_PTR_MASK (((1ull << 56) - 1) & ~UD_TAG_MASK)
#define UD_MAGIC ((uint64_t)BH_URING_UD_TAG << 56)

/* Ops the owner keeps in order, linked through next/prev (lib/list.h); an
 * op is on one list at most (waiting or holding permits). The count is
 * what bh_uring_stats reports. */
BHI_LIST_DEFINE(bhu_ops, struct bh_uring_op, next, prev)

struct op_list {
	struct bhu_ops ops;
	uint32_t count;
};

struct bh_uring {
	struct io_uring *ring;
	unsigned sqe_shift; /* 1 for SQE128 rings */
	uint32_t fork_gen;  /* bhk_fork_generation() in the process that made it */
	bool closing;
	bool wake_armed;  /* the eventfd poll is in the ring (or in its SQ) */
	bool reaping;
	bool no_cancel_any; /* the kernel refused IORING_ASYNC_CANCEL_ANY */
	bool woken;       /* the wake-up poll's CQE was booked: deliver grants */
	uint32_t ops;     /* ARMED + INFLIGHT */
	/* Per SQ slot, the SQ index at which a get last armed it: tells a
	 * pending SQE of ours from a stale one (a caller's, taken and not
	 * prepared, still holding a past lap's user_data) without following
	 * the stale pointer. */
	uint32_t *armed_idx;
	uint32_t helpers; /* helper SQEs whose last CQE is due */
	struct op_list waitq; /* OP_WAITING, FIFO */
	struct op_list heldq; /* OP_HELD: drain gives their permits back */
	struct bh_uring_op *ready_head, *ready_tail; /* granted, collected, via gnext */
	int efd;
	pid_t pid; /* the process that made it (bhu_not_ours) */
	struct bh_uring_stats st;

	/* Written by granting threads: its own line. */
	_Alignas(BHI_CACHELINE) _Atomic(struct bh_uring_op *) granted; /* LIFO */
	_Atomic uint32_t granting; /* grant callbacks still touching this tracker */
};

/* ---- fork ------------------------------------------------------------ */

/* Whether t is a fork child's copy. io_uring maps a ring's queues shared,
 * so the copy's ring is the parent's: its SQEs, its CQEs and the permits
 * its ops hold are not the child's to take. One relaxed load of the count
 * a pthread_atfork child handler keeps (bh_uring_create starts it), paid
 * once by each call that touches the ring, never per op or CQE; also
 * after a callback, which may have forked. */
static inline bool bhu_inherited(const bh_uring_t *t)
{
	return BHI_UNLIKELY(bhk_fork_generation() != t->fork_gen);
}

/* bhu_inherited, or a child that no atfork handler ran for (_Fork, a raw
 * clone): a getpid too, for drain and destroy, which can afford it. */
bool bhu_not_ours(const bh_uring_t *t);

/* ---- user_data ------------------------------------------------------- */

static inline uint64_t ud_make(const void *p, enum ud_tag tag)
{
	return UD_MAGIC | (uint64_t)(uintptr_t)p | tag;
}

static inline bool ud_encodable(const void *p)
{
	return ((uint64_t)(uintptr_t)p & ~UD_PTR_MASK) == 0;
}

static inline void *ud_ptr(uint64_t ud)
{
	return (void *)(uintptr_t)(ud & UD_PTR_MASK);
}

/* A helper SQE tagged with (p, tag), or NULL when the SQ is full. liburing's
 * prep functions never touch user_data, so it may be set first. */
static inline struct io_uring_sqe *helper_sqe(bh_uring_t *t, const void *p, enum ud_tag tag)
{
	struct io_uring_sq *sq = &t->ring->sq;
	unsigned prev = sq->sqe_tail - 1;
	bool prev_pending = sq->sqe_tail != sq->sqe_head;
	struct io_uring_sqe *sqe = io_uring_get_sqe(t->ring);

	if (sqe) {
		/* A pending SQE still flagged to link into the next one (the
		 * caller's chain being built) must not chain the helper behind
		 * it: the helper would wait for that op, or post nothing if a
		 * CQE_SKIP_SUCCESS member failed. */
		if (prev_pending)
			sq->sqes[(prev & sq->ring_mask) << t->sqe_shift].flags &=
				(__u8)~(IOSQE_IO_LINK | IOSQE_IO_HARDLINK);
		sqe->user_data = ud_make(p, tag);
		t->helpers++;
	}
	return sqe;
}

/* ---- the owner's lists ---------------------------------------------- */

static inline void list_add(struct op_list *l, struct bh_uring_op *op)
{
	bhu_ops_add_tail(&l->ops, op);
	l->count++;
}

static inline void list_del(struct op_list *l, struct bh_uring_op *op)
{
	bhu_ops_del(&l->ops, op);
	l->count--;
}

static inline struct bh_uring_op *list_first(const struct op_list *l)
{
	return bhu_ops_first(&l->ops);
}

/* The SQE at idx is still ours to edit: taken, not yet handed to the kernel. */
static inline bool sqe_pending(const bh_uring_t *t, unsigned idx)
{
	const struct io_uring_sq *sq = &t->ring->sq;

	return idx - sq->sqe_head < sq->sqe_tail - sq->sqe_head;
}

/* A refused or withdrawn op's SQEs become NOPs whose CQEs the tracker
 * swallows, and its permits go back (uring.c). */
void bhu_neutralise(bh_uring_t *t, struct bh_uring_op *op);

/* Whether a pending SQE is an op's that was taken and not yet tracked: its
 * caller may not have prepared it yet, and may still link it, or give it
 * a deadline whose LINK_TIMEOUT must come right after it (uring.c). */
bool bhu_armed_pending(const bh_uring_t *t);
/* Withdraw every such op as bh_uring_cancel would: NOPs, permits back,
 * idle (uring.c). */
void bhu_withdraw_armed(bh_uring_t *t);
/* On an SQPOLL ring, after a submit from a full SQ: return once the SQ has
 * room, as io_uring_sq_space_left sees it (uring.c). Other rings: at once. */
void bhu_sq_room_wait(struct io_uring *ring);

/* ---- the grant bridge (grant.c) ------------------------------------ */

/* Hand the grants other threads pushed to their callbacks, oldest first;
 * in a fork child that a callback made, no more. */
void bhu_deliver(bh_uring_t *t);
/* For a fork child's copy that is going away: the ops it had queued stay
 * in the child's copies of their bulkheads' queues, and a grant there
 * must not reach the freed tracker. */
void bhu_orphan_waiters(bh_uring_t *t);
/* Take a waiting op out of its bulkhead's queue; it is idle after. */
void bhu_withdraw(bh_uring_t *t, struct bh_uring_op *op);
/* Put the eventfd poll that wakes the owner into the SQ, unless it is
 * there: 0, or -EAGAIN when the SQ is full. */
int bhu_arm_wake(bh_uring_t *t);

/* A poll that ended (cancelled, or CQ overflow) is owed again while ops
 * wait. A grant made while none is armed is not lost: its write stays in
 * the counter, and a poll armed on a readable eventfd fires at once. */
static inline bool rearm_owed(const bh_uring_t *t)
{
	return !t->wake_armed && t->waitq.count && !t->closing;
}

/* Arm an owed poll, at once: the caller's next submit must carry it,
 * whatever the caller does with an op taken and not yet tracked (a poll
 * left for that op's track would be lost if the caller submitted the op
 * first). SQ full: the next reap, complete, track or cancel retries. */
static inline void rearm_wake(bh_uring_t *t)
{
	if (rearm_owed(t))
		bhu_arm_wake(t);
}

/* The eventfd poll's CQE. */
void bhu_on_wake(bh_uring_t *t, const struct io_uring_cqe *cqe);

#endif /* BH_URING_TRACKER_H */
