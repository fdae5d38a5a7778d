/* The grant bridge: bh_uring_wait queues an op in a bulkhead; a release on
 * any thread grants it, and the grant reaches the ring's owner through a
 * lock-free list and an eventfd its ring polls. Only the owner thread runs
 * anything here but on_grant. docs/uring.md explains the design. */
#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tracker.h"

/* op holds permits granted to it, no SQE yet. */
static void hold(bh_uring_t *t, struct bh_uring_op *op)
{
	op->state = OP_HELD;
	list_add(&t->heldq, op);
}

/* Wake the owner: its ring polls the eventfd. errno is the caller's. */
static void wake_owner(bh_uring_t *t)
{
	uint64_t one = 1;
	int saved = errno;

	if (write(t->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, a wake is pending anyway */
	}
	errno = saved;
}

/* The core's async callback: runs on the granting thread under the
 * bulkhead's lock. Push the op for the owner and wake it; touch nothing
 * else of the op, which the owner may reuse as soon as it is pushed. */
static void on_grant(struct bh_async *a, int result)
{
	struct bh_uring_op *op = bhi_container_of(a, struct bh_uring_op, u.async);
	bh_uring_t *t = op->t;
	struct bh_uring_op *head;

	/* relaxed: the release CAS below publishes it (destroy's acquire of
	 * the list or of this counter sees it before it can free t) */
	atomic_fetch_add_explicit(&t->granting, 1, memory_order_relaxed);
	op->result = result;
	head = atomic_load_explicit(&t->granted, memory_order_relaxed);
	/* release: pairs with collect()'s acquire exchange (op->result and
	 * gnext) and with bh_uring_destroy's acquire load of the list */
	do {
		op->gnext = head;
	} while (!atomic_compare_exchange_weak_explicit(&t->granted, &head, op,
							memory_order_release,
							memory_order_relaxed));
	/* Only the push onto an empty list wakes: the owner takes the whole
	 * list after each wake-up, and reads the eventfd before taking it, so
	 * a push it misses always finds the list empty and wakes again. */
	if (!head)
		wake_owner(t);
	/* release: pairs with bh_uring_destroy's acquire loads of this
	 * counter: our last use of t happens before it frees t */
	atomic_fetch_sub_explicit(&t->granting, 1, memory_order_release);
}

/* Move the pushed grants, oldest first, onto the owner's ready list. */
static void collect(bh_uring_t *t)
{
	/* acquire: pairs with on_grant's release push (op->result, gnext) */
	struct bh_uring_op *op = atomic_exchange_explicit(&t->granted, NULL, memory_order_acquire);
	struct bh_uring_op *fifo = NULL, *last = op;

	while (op) {
		struct bh_uring_op *next = op->gnext;

		op->gnext = fifo;
		fifo = op;
		op = next;
	}
	if (!fifo)
		return;
	if (t->ready_tail)
		t->ready_tail->gnext = fifo;
	else
		t->ready_head = fifo;
	t->ready_tail = last;
}

static void ready_unlink(bh_uring_t *t, struct bh_uring_op *op)
{
	struct bh_uring_op **pp = &t->ready_head, *prev = NULL;

	while (*pp && *pp != op) {
		prev = *pp;
		pp = &(*pp)->gnext;
	}
	if (!*pp)
		return;
	*pp = op->gnext;
	if (t->ready_tail == op)
		t->ready_tail = prev;
}

/* The op left the queue, granted (held) or failed (idle). */
static int settle(bh_uring_t *t, struct bh_uring_op *op)
{
	int result = op->result;

	list_del(&t->waitq, op);
	if (result == 0) {
		hold(t, op);
	} else {
		op->state = OP_IDLE;
	}
	return result;
}

/* Tell the owner's callbacks about the grants, oldest first. Each op is off
 * every list before its callback runs, so a callback may do anything. One
 * that forked leaves the child with the rest undelivered: they are grants
 * of the parent's ops. */
void bhu_deliver(bh_uring_t *t)
{
	struct bh_uring_op *op;

	collect(t);
	while ((op = t->ready_head) != NULL) {
		t->ready_head = op->gnext;
		if (!t->ready_head)
			t->ready_tail = NULL;
		op->gnext = NULL;
		op->fn(op, settle(t, op));
		if (bhu_inherited(t))
			return;
	}
}

/* What a grant calls instead of on_grant once the fork child's copy of the
 * tracker that queued the op is gone: the child's copy of the bulkhead
 * still queues the op, and may grant it; the permits stay with the op. */
static void on_orphan_grant(struct bh_async *a, int result)
{
	(void)a;
	(void)result;
}

/* In the child, on the thread that forked, before the copy is freed. A
 * grant reads fn under the bulkhead's lock, which this does not take (a
 * thread of the parent may have held it at the fork): only a thread the
 * child made since, granting from the inherited queue meanwhile, could
 * race it. A host-wide bulkhead never grants the parent's nodes in the
 * child. */
void bhu_orphan_waiters(bh_uring_t *t)
{
	struct bh_uring_op *op;

	bhi_list_for_each(op, &t->waitq.ops, bhu_ops)
		op->u.async.fn = on_orphan_grant;
}

/* Take op out of the bulkhead's queue. A grant that raced us has already
 * pushed it (bh_cancel_async returns 0 only after the callback ran, under
 * the bulkhead's lock): unpush it, and give its permits back. */
void bhu_withdraw(bh_uring_t *t, struct bh_uring_op *op)
{
	if (bh_cancel_async(op->bh, &op->u.async) == 0) {
		collect(t);
		ready_unlink(t, op);
		if (op->result == 0)
			bh_release(op->bh, op->n);
	}
	list_del(&t->waitq, op);
	op->state = OP_IDLE;
}

/* The eventfd that grants write, made on first use: trackers that never
 * wait need none. */
static int make_wake_fd(bh_uring_t *t)
{
	int saved = errno, r = 0;

	if (t->efd >= 0)
		return 0;
	t->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->efd < 0)
		r = -errno;
	errno = saved;
	return r;
}

/* The multishot poll on the eventfd that turns a grant into a CQE. It goes
 * into the SQ like any SQE: the owner's next submit carries it (the
 * library never submits for the owner, except in bh_uring_drain). */
int bhu_arm_wake(bh_uring_t *t)
{
	struct io_uring_sqe *sqe;

	if (t->wake_armed)
		return 0;
	sqe = helper_sqe(t, t, TAG_WAKE);
	if (!sqe)
		return -EAGAIN;
	io_uring_prep_poll_multishot(sqe, t->efd, POLLIN);
	t->wake_armed = true;
	return 0;
}

void bhu_on_wake(bh_uring_t *t, const struct io_uring_cqe *cqe)
{
	uint64_t v;
	int saved = errno;

	/* Reset the counter before taking the list (see on_grant). */
	if (read(t->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: a wake already consumed */
	}
	errno = saved;
	if (!(cqe->flags & IORING_CQE_F_MORE)) {
		t->wake_armed = false;
		rearm_wake(t);
	}
}

/* bh_acquire_async did not queue op: it holds its permits (r 0) or was
 * refused, and is off the wait list either way. */
static int not_queued(bh_uring_t *t, struct bh_uring_op *op, int r)
{
	list_del(&t->waitq, op);
	if (r == 0) {
		hold(t, op);
	} else {
		op->state = OP_IDLE;
		if (r == -EBUSY)
			t->st.rejected++;
	}
	return r;
}

int bh_uring_wait(bh_uring_t *t, struct bh_uring_op *op, bulkhead_t *bh, uint32_t n,
		  bh_uring_grant_fn *fn)
{
	int r;

	if (!t || !op || !bh || !fn || !ud_encodable(op) || op->state != OP_IDLE)
		return -EINVAL;
	if (bhu_inherited(t))
		return -EPERM;
	if (t->closing)
		return -ESHUTDOWN;
	/* The kernel refuses a poll on such a ring: no grant could wake the
	 * owner, whose loop would spin re-arming a poll that fails at once. */
	if (t->ring->flags & IORING_SETUP_IOPOLL)
		return -EOPNOTSUPP;
	/* Room for the wake-up poll is made sure of before queueing, but the
	 * SQE is taken only once the op is queued: permits that were free
	 * spend none. */
	if (!t->wake_armed && io_uring_sq_space_left(t->ring) == 0)
		return -EAGAIN;
	if ((r = make_wake_fd(t)) != 0)
		return r;
	op->t = t;
	op->bh = bh;
	op->n = n;
	op->fn = fn;
	op->gnext = NULL;
	op->state = OP_WAITING;
	list_add(&t->waitq, op); /* before it is queued: a grant may come at once */
	r = bh_acquire_async(bh, &op->u.async, n, on_grant, NULL);
	if (r == 1) {
		/* Cannot fail: room was checked, and only this thread takes
		 * SQEs. A grant that lands before the poll is armed stays in
		 * the eventfd, and the poll fires at once. Armed now even
		 * behind an op taken and not yet tracked (a reap would wait for
		 * its track): the caller took this SQE, and the caller's next
		 * submit must carry it, whatever it does with that op. */
		bhu_arm_wake(t);
		return 1;
	}
	return not_queued(t, op, r);
}
