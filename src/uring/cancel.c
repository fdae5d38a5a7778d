/* How ops end early: bh_uring_cancel for one op, bh_uring_drain for all of
 * them when the ring's owner stops. Both give back exactly what the op
 * holds, whichever state it is in. */
#include <errno.h>

#include "tracker.h"

/* A held op's permits go back; it is idle. */
static void unhold(bh_uring_t *t, struct bh_uring_op *op)
{
	list_del(&t->heldq, op);
	op->state = OP_IDLE;
	bh_release(op->bh, op->n);
}

/* ---- cancel ---------------------------------------------------------- */

static int cancel_inflight(bh_uring_t *t, struct bh_uring_op *op)
{
	struct io_uring_sqe *sqe;

	if (op->flags & OPF_CANCELLED)
		return -EALREADY;
	sqe = helper_sqe(t, op, TAG_CANCEL);
	if (!sqe)
		return -EAGAIN;
	/* By user_data: unique to the op until its final CQE. The result
	 * (0, -ENOENT, -EALREADY) decides nothing: the op's own final CQE
	 * gives the permits back. */
	io_uring_prep_cancel64(sqe, ud_make(op, TAG_OP), 0);
	op->flags |= OPF_CANCELLED;
	t->st.cancels++;
	return 0;
}

int bh_uring_cancel(bh_uring_t *t, struct bh_uring_op *op)
{
	if (!t || !op)
		return -EINVAL;
	if (bhu_inherited(t))
		return -EPERM;
	if (op->state == OP_IDLE)
		return -ENOENT;
	if (op->t != t)
		return -EINVAL;
	switch (op->state) {
	case OP_WAITING:
		bhu_withdraw(t, op);
		return 0;
	case OP_HELD:
		unhold(t, op);
		return 0;
	case OP_ARMED:
		if (sqe_pending(t, op->sqe_idx)) {
			bhu_neutralise(t, op);
			rearm_wake(t); /* it may have kept an owed poll out */
			return 0;
		}
		return cancel_inflight(t, op);
	default:
		return cancel_inflight(t, op);
	}
}

/* ---- drain ----------------------------------------------------------- */

static bool tracker_busy(const bh_uring_t *t)
{
	return t->ops || t->helpers;
}

static bool submit_failed(int r)
{
	return r < 0 && r != -EBUSY && r != -EAGAIN && r != -EINTR;
}

/* One ASYNC_CANCEL for everything on the ring, queued behind whatever is
 * still unsubmitted so that it sees those too. */
static int cancel_everything(bh_uring_t *t, uint64_t deadline_ns, bh_uring_cqe_fn *fn,
			     void *ctx)
{
	struct io_uring_sqe *sqe;
	int r;

	while ((sqe = helper_sqe(t, t, TAG_DRAIN)) == NULL) {
		r = io_uring_submit(t->ring);
		if (submit_failed(r))
			return r;
		if (t->ring->flags & IORING_SETUP_SQPOLL)
			bhu_sq_room_wait(t->ring);
		else if (r <= 0 && (r = bh_uring_reap(t, fn, ctx)) < 0)
			return r; /* the CQ is full: make room */
		if (deadline_ns != BH_FOREVER && bh_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
	}
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
	r = io_uring_submit(t->ring);
	return submit_failed(r) ? r : 0;
}

/* Block until a CQE is ready or the deadline passes. */
static int wait_cqe_until(bh_uring_t *t, uint64_t deadline_ns)
{
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts;
	uint64_t now, left;

	if (deadline_ns == BH_FOREVER)
		return io_uring_wait_cqe(t->ring, &cqe);
	now = bh_now_ns();
	if (now >= deadline_ns)
		return -ETIMEDOUT;
	left = deadline_ns - now;
	ts.tv_sec = (long long)(left / BH_SEC);
	ts.tv_nsec = (long long)(left % BH_SEC);
	return io_uring_wait_cqe_timeout(t->ring, &cqe, &ts);
}

int bh_uring_drain(bh_uring_t *t, uint64_t deadline_ns, bh_uring_cqe_fn *fn, void *ctx)
{
	int r;

	if (!t || t->reaping)
		return -EINVAL;
	/* A fork child's copy: the ring's queues are mapped shared, so a
	 * cancel-everything would end the parent's ops and a reap would take
	 * their CQEs from the parent's CQ, whose permits would then never
	 * come back. Nothing here is the child's to end. */
	if (bhu_not_ours(t))
		return -EPERM;
	t->closing = true;
	while (list_first(&t->waitq)) {
		struct bh_uring_op *op = list_first(&t->waitq);

		bhu_withdraw(t, op);
		t->reaping = true; /* the callback may not reap or drain */
		op->fn(op, -ECANCELED);
		t->reaping = false;
		if (bhu_inherited(t)) /* it forked: the same, from here on */
			return -EPERM;
	}
	/* Granted permits no SQE will ever use (gets fail from here on). */
	while (list_first(&t->heldq))
		unhold(t, list_first(&t->heldq));
	/* Ops whose SQEs were taken and not tracked: their caller may not have
	 * prepared them, and the submits below would send whatever the SQEs
	 * held from the ring's last lap. They become NOPs, permits back. */
	bhu_withdraw_armed(t);
	if (tracker_busy(t) && (r = cancel_everything(t, deadline_ns, fn, ctx)) < 0)
		return r;
	for (;;) {
		r = bh_uring_reap(t, fn, ctx);
		if (r < 0)
			return r;
		if (!tracker_busy(t))
			return 0;
		if (t->no_cancel_any)
			return -EOPNOTSUPP;
		/* A cancel fn prepared while we reaped (bh_uring_cancel on an op
		 * still in flight) is a helper we wait for: it must reach the
		 * kernel, or its CQE never comes. */
		if (t->ring->sq.sqe_tail != t->ring->sq.sqe_head &&
		    submit_failed(r = io_uring_submit(t->ring)))
			return r;
		r = wait_cqe_until(t, deadline_ns);
		if (r == -ETIMEDOUT)
			return r;
		if (r < 0 && r != -ETIME && r != -EINTR && r != -EAGAIN && r != -EBUSY)
			return r;
	}
}
