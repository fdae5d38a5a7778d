/*
 * OVERVIEW. libbulkhead for io_uring: a permit follows the operation, not the caller.
 *
 * A permit taken for an io_uring operation goes back when the kernel posts
 * that operation's final CQE - the first CQE for it without IORING_CQE_F_MORE
 * - and nowhere else: not when the caller stops waiting, not when a cancel or
 * a linked timeout reports, not at the first CQE of a multishot or zero-copy
 * operation. So a bulkhead's in_flight is exactly the number of tracked
 * operations the kernel has not finished, and callers that gave up on a slow
 * dependency cannot hide it.
 *
 * One tracker (bh_uring_t) per ring, used by the thread that owns the ring.
 * An operation is an intrusive record (struct bh_uring_op) embedded in the
 * caller's request; nothing is allocated per operation.
 *
 * EXAMPLE.
 *
 *   struct req { struct bh_uring_op op; char buf[512]; };   // zeroed
 *
 *   struct io_uring_sqe *sqe;
 *   int r = bh_uring_get_sqe(t, &req->op, db, 1, &sqe);
 *   if (r < 0)                       // -EBUSY: full; nothing taken, no SQE used
 *           return shed(req, r);
 *   io_uring_prep_recv(sqe, fd, req->buf, sizeof(req->buf), 0);
 *   req->op.data = req;
 *   bh_uring_track(t, &req->op, deadline_ns);  // the kernel ends it by then
 *   io_uring_submit(ring);
 *   ...
 *   bh_uring_reap(t, on_cqe, loop);  // all CQEs; permits back at final CQEs
 *
 * OWNERSHIP. An operation record is the caller's memory; the tracker uses
 * it from the call that queues or tracks it until it is idle again
 * (bh_uring_op_busy false: its final CQE was reaped, or it never got its
 * permits), and only then may it be reused or freed. An all-zero record is
 * idle. The tracker owns every CQE whose user_data has BH_URING_UD_TAG in its top
 * byte (bh_uring_owns): its operations' and its helper SQEs' (kernel cancels,
 * linked timeouts, the wake-up poll), which never release anything. Give
 * your own SQEs any other user_data, and hand every CQE to the tracker
 * (bh_uring_reap, or bh_uring_complete from your own loop).
 *
 * MEMORY ORDERING. The permits' ordering is the bulkhead's (bulkhead.h):
 * the release at an operation's final CQE synchronizes with the next
 * acquire of those permits. A grant made on another thread reaches the
 * owner through the lock-free list (a release push paired with the
 * owner's acquire exchange), so the grant callback sees what the granter
 * saw.
 *
 * Never blocking the loop: bh_uring_wait queues an operation for permits in
 * the bulkhead's FIFO - the same queue and fairness as blocking waiters.
 * When a permit is released on any thread, the grant is pushed onto a
 * lock-free list and an eventfd that the ring polls is written; the owner
 * wakes with a CQE and runs the operation's grant callback on its own
 * thread, where it may submit. Only the owner ever submits, so
 * IORING_SETUP_SINGLE_ISSUER and DEFER_TASKRUN rings work. The poll's SQE
 * (taken by a wait that queues, or re-armed by a reap) goes to the kernel
 * with the owner's next submit: submit before waiting for CQEs.
 *
 * Rules the kernel imposes (docs/uring.md has the details):
 *  - IOSQE_CQE_SKIP_SUCCESS would hide the final CQE: bh_uring_track refuses
 *    it on the operation and on any pending SQE linked into it (-ECANCELED).
 *  - A zero-copy send that a link cancels before it starts posts -ECANCELED
 *    without IORING_CQE_F_MORE and then its notification: bh_uring_track
 *    refuses SEND_ZC and SENDMSG_ZC after a chain's first member, and as the
 *    first SQE of an op that a pending SQE links into (-ECANCELED).
 *  - A linked chain of SQEs (bh_uring_get_sqes) is one operation holding one
 *    set of permits, given back at its last member's final CQE.
 *  - io_uring_queue_exit with operations in flight loses their CQEs:
 *    bh_uring_drain cancels everything and reaps until nothing of the
 *    tracker's is in flight, flushing CQ overflow as it goes.
 *
 * Cost: bh_uring_get_batch (or bh_uring_get_chains, for chains such as a
 * write linked to a read), bh_uring_track_batch and bh_uring_reap update a
 * bulkhead once per batch, not once per operation.
 *
 * Build with: cc app.c $(pkg-config --cflags --libs bulkhead-uring)
 * (this header needs liburing; add --static for a static link).
 *
 * THREADS, SIGNALS, CANCELLATION. Trackers are not thread-safe: every call
 * on a tracker, and every submission to its ring, belongs to the thread
 * that owns the ring; only grants cross threads (a permit may be released
 * on any thread), and the library carries those itself. No function
 * blocks, except bh_uring_drain, which waits for the kernel (until its
 * deadline: -ETIMEDOUT, and calling again goes on waiting), and, on an
 * SQPOLL ring, a reap, complete or track that re-arms the wake-up poll
 * with the SQ full: it submits, then waits for the kernel's SQ thread to
 * take the SQEs (io_uring_sqring_wait). A tracker serves its ring as
 * created: resizing the ring's queues afterwards is not supported.
 *
 * FORK. A fork child's copy of a tracker sees the parent's ring (io_uring
 * maps its queues shared), whose SQEs, CQEs and permits are the parent's:
 * every call that would take or write an SQE, consume or book a CQE, queue
 * or withdraw an op or give permits back returns -EPERM there (after its
 * -EINVAL checks) and does nothing, and bh_uring_destroy frees the copy
 * (0) without giving anything back. A call whose callback forked goes no
 * further in the child than the callback. Cost: one relaxed load per call
 * (per reap, not per CQE). docs/uring.md, "In a fork child".
 *
 * ERRORS. Every function returns 0 (or a count) or a negative errno and
 * never sets errno. See bh_uring_track(3). NULL: a NULL tracker or
 * required pointer is -EINVAL (bh_uring_destroy: ignored; bh_uring_stats:
 * zeroes *out). The per-op paths check too - the check shares a branch
 * with the op's state checks and costs nothing measurable - except the
 * inline bh_uring_owns and bh_uring_op_busy, whose argument must be valid
 * (a precondition, not checked).
 */
#ifndef BULKHEAD_URING_H
#define BULKHEAD_URING_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>

#include <bulkhead.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bh_uring bh_uring_t; /* opaque; one per ring */

struct bh_uring_op;

/* Runs on the ring owner's thread, from bh_uring_reap or bh_uring_complete,
 * once for each bh_uring_wait that returned 1 (unless bh_uring_cancel took
 * the op back): 0 (the op holds its permits: take its SQE), -ESHUTDOWN (the
 * bulkhead closed), -EINVAL (its limit shrank below n) or -ECANCELED
 * (bh_uring_drain). No lock is held; it may call the tracker and submit,
 * but not bh_uring_reap or bh_uring_drain (-EINVAL). */
typedef void bh_uring_grant_fn(struct bh_uring_op *op, int result);

/* The per-operation record. Zero it before first use: an all-zero record is
 * idle. It is idle again once its final CQE was handed to the tracker (or a
 * cancel or refusal said so), and may then be reused or freed. ABI: frozen,
 * size and layout (callers embed it; the inline functions read it). */
struct bh_uring_op {
	void *data; /* the caller's; the library never touches it */

	/* Private to the library. */
	bh_uring_t *t;
	bulkhead_t *bh;
	uint32_t n;         /* permits held or asked for */
	uint32_t sqe_idx;   /* the ring's sqe_tail when its first SQE was taken */
	uint16_t nr;        /* SQEs in its chain */
	uint16_t cqes_left; /* chain members whose final CQE is still due */
	uint16_t state;     /* not a char: stores to it must not alias the ring */
	uint16_t flags;
	int32_t result;     /* the grant's result, written by the granting thread */
	struct bh_uring_op *next, *prev, *gnext;
	bh_uring_grant_fn *fn;
	union {
		struct bh_async async;       /* while waiting for permits */
		struct __kernel_timespec ts; /* while in flight with a deadline */
	} u;
};

/* What a CQE was, for the tracker. */
enum bh_uring_kind {
	BH_URING_FOREIGN = 0, /* not the tracker's: yours to handle */
	BH_URING_MORE = 1,    /* a tracked op's CQE, more to come: permits still held */
	BH_URING_DONE = 2,    /* a tracked op's final CQE: permits given back, op idle */
	BH_URING_HELPER = 3,  /* the tracker's own helper CQE: nothing to do */
};

/* For bh_uring_reap and bh_uring_drain: called for every CQE except the
 * tracker's helpers, with op set for MORE and DONE (NULL for FOREIGN). */
typedef void bh_uring_cqe_fn(void *ctx, struct io_uring_cqe *cqe, int kind,
			     struct bh_uring_op *op);

#define BH_URING_UD_TAG 0xb4u /* top byte of every user_data the tracker owns */
#define BH_URING_CHAIN_MAX 64 /* most SQEs one op may chain */

/* ABI: these fields stay; grows only at the end, with a new symbol version
 * of bh_uring_stats (abi/README.md). */
struct bh_uring_stats {
	uint64_t in_flight; /* ops holding permits and SQEs, final CQE not yet seen */
	uint64_t held;      /* ops holding granted permits, SQE not yet taken */
	uint64_t waiting;   /* ops queued in a bulkhead (or granted, not yet told) */
	uint64_t helpers;   /* helper SQEs whose last CQE is not yet seen */
	uint64_t started;   /* ops tracked */
	uint64_t finished;  /* final CQEs seen */
	uint64_t rejected;  /* ops refused permits (-EBUSY) */
	uint64_t refused;   /* ops bh_uring_track refused (-ECANCELED) or found
			     * submitted before sealing (-EALREADY) */
	uint64_t cancels;   /* kernel cancels prepared for ops */
	uint64_t strays;    /* CQEs tagged as the tracker's, for no op it tracks */
};

/* Whether a CQE belongs to the tracker (its ops or its helpers). cqe must
 * not be NULL (not checked). */
static inline bool bh_uring_owns(const struct io_uring_cqe *cqe)
{
	return (cqe->user_data >> 56) == BH_URING_UD_TAG;
}

/* Whether op is in use (waiting, holding permits or in flight). op must not
 * be NULL (not checked). */
static inline bool bh_uring_op_busy(const struct bh_uring_op *op)
{
	return op->state != 0;
}

/* A tracker for ring. flags: 0. 0, -EINVAL or -ENOMEM. */
BH_API int bh_uring_create(struct io_uring *ring, unsigned flags, bh_uring_t **out);

/* Free a tracker. -EBUSY (nothing freed) while anything it tracks may still
 * post a CQE or be granted, or an op holds permits granted through it:
 * bh_uring_drain first. -EINVAL (nothing freed) from a callback of
 * bh_uring_reap or bh_uring_drain, or a grant callback: the caller still
 * uses the tracker. NULL: 0. In a fork child of the process that created
 * t: frees the child's copy, whatever the parent has in flight, and gives
 * no permit back (0). */
BH_API int bh_uring_destroy(bh_uring_t *t);

/* Take n permits of bh for op without blocking, and nr consecutive SQEs
 * for it (a chain, linked by bh_uring_track). Leaves one more SQE free, for
 * a linked timeout. An op holding permits from a grant uses those (bh and n
 * must match). Prepare the SQEs - not their user_data, which is the
 * tracker's and must stay as set until they are submitted (the op's CQEs
 * and drain find it by it) - then call bh_uring_track before taking
 * another SQE.
 * 0; -EBUSY (no permits: no SQE used, nothing taken); -EAGAIN (fewer than
 * nr + 1 SQEs free: nothing taken); -ESHUTDOWN; -EINVAL. */
BH_API int bh_uring_get_sqes(bh_uring_t *t, struct bh_uring_op *op, bulkhead_t *bh,
			     uint32_t n, unsigned nr, struct io_uring_sqe **sqes);

static inline int bh_uring_get_sqe(bh_uring_t *t, struct bh_uring_op *op, bulkhead_t *bh,
				   uint32_t n, struct io_uring_sqe **sqe)
{
	return bh_uring_get_sqes(t, op, bh, n, 1, sqe);
}

/* Up to count idle ops, one SQE each, n permits each: one update of bh when
 * all fit, else as many as fit. Stops before an op in use. Returns how many
 * ops got their SQE (sqes[i] for ops[i]), or -EBUSY, -EAGAIN, -ESHUTDOWN,
 * -EINVAL when none did. */
BH_API int bh_uring_get_batch(bh_uring_t *t, struct bh_uring_op **ops, unsigned count,
			      bulkhead_t *bh, uint32_t n, struct io_uring_sqe **sqes);

/* bh_uring_get_batch for chains: up to count idle ops, nr consecutive SQEs
 * each (ops[i]'s are sqes[i * nr] to sqes[i * nr + nr - 1]; sqes has room
 * for count * nr), n permits each, one update of bh when all fit, and one
 * SQE left free. Seal them with bh_uring_track_batch, which links each
 * op's chain. Returns how many ops got their SQEs, or -EBUSY, -EAGAIN,
 * -ESHUTDOWN, -EINVAL (also nr 0 or above BH_URING_CHAIN_MAX) when none
 * did. Since 0.3 (symbol version LIBBULKHEAD_0.3). */
BH_API int bh_uring_get_chains(bh_uring_t *t, struct bh_uring_op **ops, unsigned count,
			       bulkhead_t *bh, uint32_t n, unsigned nr,
			       struct io_uring_sqe **sqes);

/* Seal op's prepared SQEs: refuse IOSQE_CQE_SKIP_SUCCESS, link the chain,
 * and unless deadline_ns is BH_FOREVER append an IORING_OP_LINK_TIMEOUT that
 * ends the op's last SQE at deadline_ns (absolute, CLOCK_MONOTONIC as
 * bh_now_ns) - the real work's own deadline, shorter than the caller's.
 * From here on the permits go back only at the op's final CQE.
 * The return value alone says where the op is:
 *   0           tracked (in flight once submitted);
 *   -EALREADY   its SQEs were submitted before sealing: tracked by its CQEs
 *               as it is, but nothing was checked, linked or appended;
 *   -ECANCELED  refused: idle again, permits back, its SQEs turned into NOPs
 *               that the tracker reaps (CQE_SKIP_SUCCESS on them or on a
 *               pending SQE linked into them, a zero-copy send after the
 *               chain's first member or linked into from a pending SQE,
 *               their user_data changed, a
 *               link flag on the last or another SQE taken after it while a
 *               deadline was asked for);
 *   -EINVAL     misuse, nothing changed: t or op NULL, op not waiting to be
 *               sealed (no get, already tracked) or another tracker's. */
BH_API int bh_uring_track(bh_uring_t *t, struct bh_uring_op *op, uint64_t deadline_ns);

/* bh_uring_track(t, ops[i], BH_FOREVER) for count ops, in one call (the
 * partner of bh_uring_get_batch). Every op gets its own outcome; the return
 * value is the one of them that asks most of the caller: -EINVAL (some op
 * was misused: NULL, or not waiting to be sealed; those are unchanged),
 * else -ECANCELED (some were refused: those are idle), else -EALREADY (some
 * were submitted before sealing: tracked unchecked), else 0. After
 * -ECANCELED, bh_uring_op_busy tells the refused ops (idle) from the rest.
 * t or ops NULL: -EINVAL, nothing done. */
BH_API int bh_uring_track_batch(bh_uring_t *t, struct bh_uring_op **ops, unsigned count);

/* Hand the tracker one CQE, from your own loop over the CQ (advance it
 * yourself). Every CQE, different ops' in any order, one op's own in the
 * order the kernel posted them (its first without F_MORE ends it).
 * Returns its enum bh_uring_kind and, for MORE and DONE, the op in *op (op
 * may be NULL), NULL in *op otherwise (a stray included). On DONE the
 * permits are back before it returns. Runs due grant callbacks. -EINVAL
 * for a stray CQE (see strays). */
BH_API int bh_uring_complete(bh_uring_t *t, const struct io_uring_cqe *cqe,
			     struct bh_uring_op **op);

/* Handle the CQEs the ring has ready, bringing back CQ overflow
 * (io_uring_get_events while io_uring_cq_has_overflow), and advance the CQ:
 * at most 16 times the CQ's size per call. In batches of up to 64 CQEs: the
 * permits of the ops a batch finishes go back (one update per bulkhead),
 * then fn (may be NULL) sees each CQE of the batch but the helpers', then
 * due grant callbacks run. Returns the number of CQEs consumed, or a
 * negative errno from io_uring_get_events. fn must not call it again.
 * If the wake-up poll ended while ops wait, a new one is put in the SQ
 * (also by bh_uring_complete; with the SQ full while an op's SQEs are taken
 * and not yet tracked, by the track or cancel that ends the last such op):
 * submit before waiting for CQEs. */
BH_API int bh_uring_reap(bh_uring_t *t, bh_uring_cqe_fn *fn, void *ctx);

/* Give up on op, whatever it is doing:
 *  - in flight: prepare an IORING_OP_ASYNC_CANCEL for it (submit it). The
 *    permits stay held until the op's own final CQE, whatever the cancel
 *    reports. -EALREADY if already asked; -EAGAIN if no SQE is free.
 *  - SQEs taken, not yet submitted: they become NOPs; permits given back.
 *  - waiting for permits: it leaves the queue and its grant callback will
 *    not run; if a grant raced the cancel, those permits are given back.
 *  - holding granted permits: they are given back.
 * 0, or -ENOENT when op is idle (its final CQE was already handled). */
BH_API int bh_uring_cancel(bh_uring_t *t, struct bh_uring_op *op);

/* Queue op for n permits of bh without blocking, in the bulkhead's FIFO.
 * 0: the permits were free, op holds them now (fn is not called, no SQE
 * used); 1: queued, fn runs later on this thread - and, unless one was
 * already armed, the tracker's wake-up poll is in the SQ: submit it, or no
 * grant can wake the ring. Between another op's get and its track, that
 * SQE is one taken after the op: a deadline for it is then refused. -EBUSY (queue full), -ESHUTDOWN, -EINVAL,
 * -EAGAIN (SQ full and no wake-up poll armed: nothing taken), -EMFILE/-ENFILE
 * (no fd for its eventfd, made on the first wait). */
BH_API int bh_uring_wait(bh_uring_t *t, struct bh_uring_op *op, bulkhead_t *bh, uint32_t n,
			 bh_uring_grant_fn *fn);

/* Shut the tracker down: later gets and waits fail with -ESHUTDOWN; waiting
 * ops are withdrawn (their grant callbacks get -ECANCELED); everything in
 * flight on the ring is cancelled (IORING_ASYNC_CANCEL_ANY: your own SQEs
 * too); then CQEs are reaped, through fn, until none of the tracker's ops
 * and helpers is in flight, or deadline_ns passes (BH_FOREVER: no limit).
 * Then io_uring_queue_exit is safe. Ops holding granted permits without an
 * SQE (a wait's) get nothing more: their permits are given back and they are
 * idle, no callback runs. Ops whose SQEs were taken and not yet tracked are
 * withdrawn as bh_uring_cancel does (their SQEs become NOPs, whatever was
 * prepared in them). 0, -ETIMEDOUT (still in flight), -EPERM (in a fork
 * child of the process that created t: the ring's queues are shared with
 * the parent, whose ops are not the child's to end; nothing is done), or
 * a negative errno from the ring (-EOPNOTSUPP: no IORING_ASYNC_CANCEL_ANY,
 * before 5.19). On the owner thread, not from fn. */
BH_API int bh_uring_drain(bh_uring_t *t, uint64_t deadline_ns, bh_uring_cqe_fn *fn, void *ctx);

/* The tracker's counts (owner thread). NULL t: *out zeroed; NULL out:
 * nothing written. */
BH_API void bh_uring_stats(const bh_uring_t *t, struct bh_uring_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* BULKHEAD_URING_H */
