/* io_uring: permits held until the kernel posts an operation's final CQE,
 * and non-blocking acquisition that wakes the ring's owner. docs/uring.md
 * explains the design; include/bulkhead/uring.h the rules. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bulkhead/uring.h"
#include "core/sample_hook.h"
#include "lib/compiler.h"

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

#define REL_SLOTS 4 /* bulkheads whose releases one reap batch coalesces */
#define CHUNK 64    /* CQEs per reap batch */

/* Ops the owner keeps in order, linked through next/prev; an op is on one
 * list at most (waiting or holding permits). */
struct op_list {
	struct bh_uring_op *head, *tail;
	uint32_t count;
};

struct rel_batch {
	unsigned used;
	bulkhead_t *bh[REL_SLOTS];
	uint32_t n[REL_SLOTS];
};

struct bh_uring {
	struct io_uring *ring;
	unsigned sqe_shift; /* 1 for SQE128 rings */
	bool closing;
	bool wake_armed;  /* the eventfd poll is in the ring (or in its SQ) */
	bool reaping;
	bool no_cancel_any; /* the kernel refused IORING_ASYNC_CANCEL_ANY */
	uint32_t ops;     /* ARMED + INFLIGHT */
	uint32_t helpers; /* helper SQEs whose last CQE is due */
	struct op_list waitq; /* OP_WAITING, FIFO */
	struct op_list heldq; /* OP_HELD: drain gives their permits back */
	struct bh_uring_op *ready_head, *ready_tail; /* granted, collected, via gnext */
	int efd;
	struct bh_uring_stats st;

	/* Written by granting threads: its own line. */
	_Alignas(BHI_CACHELINE) _Atomic(struct bh_uring_op *) granted; /* LIFO */
	_Atomic uint32_t granting; /* grant callbacks still touching this tracker */
};

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

/* ---- the submission queue -------------------------------------------- */

static inline struct io_uring_sqe *sqe_at(const bh_uring_t *t, unsigned idx)
{
	return &t->ring->sq.sqes[(idx & t->ring->sq.ring_mask) << t->sqe_shift];
}

/* The SQE at idx is still ours to edit: taken, not yet handed to the kernel. */
static inline bool sqe_pending(const bh_uring_t *t, unsigned idx)
{
	const struct io_uring_sq *sq = &t->ring->sq;

	return idx - sq->sqe_head < sq->sqe_tail - sq->sqe_head;
}

/* A helper SQE tagged with (p, tag), or NULL when the SQ is full. liburing's
 * prep functions never touch user_data, so it may be set first. */
static struct io_uring_sqe *helper_sqe(bh_uring_t *t, const void *p, enum ud_tag tag)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(t->ring);

	if (sqe) {
		sqe->user_data = ud_make(p, tag);
		t->helpers++;
	}
	return sqe;
}

/* ---- create / destroy ------------------------------------------------ */

int bh_uring_create(struct io_uring *ring, unsigned flags, bh_uring_t **out)
{
	bh_uring_t *t;
	int saved = errno;

	if (!ring || !out || flags)
		return -EINVAL;
	t = aligned_alloc(BHI_CACHELINE, sizeof(*t)); /* a multiple of its alignment */
	errno = saved;
	if (!t)
		return -ENOMEM;
	memset(t, 0, sizeof(*t));
	t->ring = ring;
	t->sqe_shift = (ring->flags & IORING_SETUP_SQE128) ? 1 : 0;
	t->efd = -1; /* made by the first wait that queues */
	atomic_init(&t->granted, NULL);
	atomic_init(&t->granting, 0);
	*out = t;
	return 0;
}

int bh_uring_destroy(bh_uring_t *t)
{
	if (!t)
		return 0;
	if (t->ops || t->helpers || t->waitq.count || t->heldq.count || t->ready_head ||
	    atomic_load_explicit(&t->granted, memory_order_acquire))
		return -EBUSY;
	/* A grant callback may still be about to write the eventfd after its
	 * op was delivered; acquire pairs with its release decrement. */
	while (atomic_load_explicit(&t->granting, memory_order_acquire))
		bhi_cpu_relax();
	if (t->efd >= 0)
		close(t->efd);
	free(t);
	return 0;
}

/* ---- permits --------------------------------------------------------- */

static void rel_flush(struct rel_batch *rb)
{
	for (unsigned i = 0; i < rb->used; i++)
		bh_release(rb->bh[i], rb->n[i]);
	rb->used = 0;
}

/* Give back n permits of bh, now (rb NULL) or with the rest of the batch. */
static inline void give_back(struct rel_batch *rb, bulkhead_t *bh, uint32_t n)
{
	unsigned i;

	if (!rb) {
		bh_release(bh, n);
		return;
	}
	if (BHI_LIKELY(rb->used && rb->bh[rb->used - 1] == bh)) {
		rb->n[rb->used - 1] += n;
		return;
	}
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

/* ---- the owner's lists ---------------------------------------------- */

static void list_add(struct op_list *l, struct bh_uring_op *op)
{
	op->next = NULL;
	op->prev = l->tail;
	if (l->tail)
		l->tail->next = op;
	else
		l->head = op;
	l->tail = op;
	l->count++;
}

static void list_del(struct op_list *l, struct bh_uring_op *op)
{
	if (op->prev)
		op->prev->next = op->next;
	else
		l->head = op->next;
	if (op->next)
		op->next->prev = op->prev;
	else
		l->tail = op->prev;
	op->next = op->prev = NULL;
	l->count--;
}

/* op holds permits granted to it, no SQE yet. */
static void hold(bh_uring_t *t, struct bh_uring_op *op)
{
	op->state = OP_HELD;
	list_add(&t->heldq, op);
}

/* A held op's permits go back; it is idle. */
static void unhold(bh_uring_t *t, struct bh_uring_op *op)
{
	list_del(&t->heldq, op);
	op->state = OP_IDLE;
	bh_release(op->bh, op->n);
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

/* Bind permits and the nr SQEs from the ring's tail on to op. The SQ has
 * room (checked); the caller moves sqe_tail past them. */
static inline void arm(bh_uring_t *t, struct bh_uring_op *op, bulkhead_t *bh, uint32_t n,
		       unsigned nr, unsigned idx, struct io_uring_sqe **sqes, uint64_t start)
{
	uint64_t ud = ud_make(op, TAG_OP);

	op->t = t;
	op->bh = bh;
	op->n = n;
	op->sqe_idx = idx;
	op->nr = (uint16_t)nr;
	op->cqes_left = (uint16_t)nr;
	op->state = OP_ARMED;
	op->flags = start ? OPF_TIMED : 0;
	flight_start_set(op, start);
	for (unsigned i = 0; i < nr; i++) {
		sqes[i] = sqe_at(t, idx + i);
		sqes[i]->user_data = ud; /* tracked from now on, even if submitted early */
	}
}

int bh_uring_get_sqes(bh_uring_t *t, struct bh_uring_op *op, bulkhead_t *bh, uint32_t n,
		      unsigned nr, struct io_uring_sqe **sqes)
{
	int r;

	if (!t || !op || !bh || !sqes || nr - 1u >= BH_URING_CHAIN_MAX || !op_usable(op))
		return -EINVAL;
	if (op->state == OP_HELD && (op->bh != bh || op->n != n || op->t != t))
		return -EINVAL;
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
	arm(t, op, bh, n, nr, t->ring->sq.sqe_tail, sqes, sample_start(bh));
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

int bh_uring_get_batch(bh_uring_t *t, struct bh_uring_op **ops, unsigned count, bulkhead_t *bh,
		       uint32_t n, struct io_uring_sqe **sqes)
{
	unsigned space, idx, armed = 0;
	uint64_t start;
	int got;

	if (!t || !ops || !bh || !sqes || count == 0)
		return -EINVAL;
	if (t->closing)
		return -ESHUTDOWN;
	space = io_uring_sq_space_left(t->ring);
	if (space < 2)
		return -EAGAIN;
	if (count > space - 1)
		count = space - 1;
	got = take_many(bh, n, count);
	if (got < 0) {
		if (got == -EBUSY)
			t->st.rejected += count;
		return got;
	}
	t->st.rejected += count - (unsigned)got;
	idx = t->ring->sq.sqe_tail;
	start = sample_start(bh);
	for (; armed < (unsigned)got; armed++) {
		struct bh_uring_op *op = ops[armed];

		if (BHI_UNLIKELY(!op || !ud_encodable(op) || op->state != OP_IDLE))
			break; /* the batch ends before a record in use */
		arm(t, op, bh, n, 1, idx + armed, &sqes[armed], start);
	}
	if (armed < (unsigned)got)
		bh_release(bh, n * ((unsigned)got - armed));
	t->ring->sq.sqe_tail = idx + armed;
	t->ops += armed;
	return armed ? (int)armed : -EINVAL;
}

/* ---- tracking -------------------------------------------------------- */

/* A refused op: its SQEs become NOPs whose CQEs the tracker swallows, and its
 * permits go back. Nothing of it reaches the kernel. */
static void neutralise(bh_uring_t *t, struct bh_uring_op *op)
{
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

/* Whether op's prepared SQEs can be tracked as one chain ending in a final
 * CQE per member, and linked to a timeout when asked. */
static bool sqes_trackable(const bh_uring_t *t, const struct bh_uring_op *op, bool deadline)
{
	uint64_t ud = ud_make(op, TAG_OP);
	const struct io_uring_sqe *last = sqe_at(t, op->sqe_idx + op->nr - 1u);

	for (unsigned i = 0; i < op->nr; i++) {
		const struct io_uring_sqe *sqe = sqe_at(t, op->sqe_idx + i);

		if (sqe->user_data != ud || (sqe->flags & IOSQE_CQE_SKIP_SUCCESS))
			return false;
	}
	if (deadline && ((last->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK)) ||
			 t->ring->sq.sqe_tail != op->sqe_idx + op->nr))
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
static int refuse(bh_uring_t *t, struct bh_uring_op *op)
{
	neutralise(t, op);
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
		return refuse(t, op);
	link_chain(t, op);
	if (deadline && !link_deadline(t, op, deadline_ns))
		return refuse(t, op);
	op->state = OP_INFLIGHT;
	t->st.started++;
	return 0;
}

/* The common case in a few loads: one SQE, no deadline, still pending,
 * user_data intact, no CQE_SKIP_SUCCESS, not linked into from before. */
static inline bool track_fast(bh_uring_t *t, struct bh_uring_op *op)
{
	const struct io_uring_sq *sq = &t->ring->sq;
	unsigned idx = op->sqe_idx;
	const struct io_uring_sqe *sqe = sqe_at(t, idx);

	if (idx - sq->sqe_head >= sq->sqe_tail - sq->sqe_head)
		return false;
	if (sqe->user_data != ud_make(op, TAG_OP) || (sqe->flags & IOSQE_CQE_SKIP_SUCCESS))
		return false;
	return idx == sq->sqe_head ||
	       !(sqe_at(t, idx - 1)->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK));
}

int bh_uring_track(bh_uring_t *t, struct bh_uring_op *op, uint64_t deadline_ns)
{
	if (BHI_UNLIKELY(!t || !op || op->t != t || op->state != OP_ARMED))
		return -EINVAL;
	if (BHI_LIKELY(op->nr == 1 && deadline_ns == BH_FOREVER && track_fast(t, op))) {
		op->state = OP_INFLIGHT;
		t->st.started++;
		return 0;
	}
	return track_slow(t, op, deadline_ns);
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

/* track_fast for many ops, with the ring's fields read once: the slow path
 * (never a deadline here) takes no SQE, so they stay valid. An op right
 * after one just sealed (a bh_uring_get_batch) needs no look at the SQE
 * before it: that one has no CQE_SKIP_SUCCESS, and neither has anything
 * linked into it. */
int bh_uring_track_batch(bh_uring_t *t, struct bh_uring_op **ops, unsigned count)
{
	const struct io_uring_sq *sq;
	const struct io_uring_sqe *sqes;
	unsigned mask, shift, head, pending, sealed, fast = 0;
	int r = 0;

	if (!t || !ops)
		return -EINVAL;
	sq = &t->ring->sq;
	sqes = sq->sqes;
	mask = sq->ring_mask;
	shift = t->sqe_shift;
	head = sq->sqe_head;
	pending = sq->sqe_tail - head;
	sealed = head - 1; /* no SQE: the one before head is not pending */
	for (unsigned i = 0; i < count; i++) {
		struct bh_uring_op *op = ops[i];
		unsigned idx;
		const struct io_uring_sqe *sqe;

		if (BHI_UNLIKELY(!op || op->t != t || op->state != OP_ARMED)) {
			r = -EINVAL;
			continue;
		}
		idx = op->sqe_idx;
		sqe = &sqes[(idx & mask) << shift];
		if (BHI_LIKELY(op->nr == 1 && idx - head < pending &&
			      sqe->user_data == ud_make(op, TAG_OP) &&
			      !(sqe->flags & IOSQE_CQE_SKIP_SUCCESS) &&
			      (idx == head || idx - 1 == sealed ||
			       !(sqes[((idx - 1) & mask) << shift].flags &
				 (IOSQE_IO_LINK | IOSQE_IO_HARDLINK))))) {
			op->state = OP_INFLIGHT;
			sealed = idx;
			fast++;
		} else {
			r = worse(r, track_slow(t, op, BH_FOREVER));
		}
	}
	t->st.started += fast;
	return r;
}

/* ---- grants from other threads --------------------------------------- */

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
	/* release: our last use of t happens before destroy frees it */
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
 * every list before its callback runs, so a callback may do anything. */
static void deliver(bh_uring_t *t)
{
	struct bh_uring_op *op;

	collect(t);
	while ((op = t->ready_head) != NULL) {
		t->ready_head = op->gnext;
		if (!t->ready_head)
			t->ready_tail = NULL;
		op->gnext = NULL;
		op->fn(op, settle(t, op));
	}
}

/* Take op out of the bulkhead's queue. A grant that raced us has already
 * pushed it (bh_cancel_async returns 0 only after the callback ran, under
 * the bulkhead's lock): unpush it, and give its permits back. */
static void withdraw(bh_uring_t *t, struct bh_uring_op *op)
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
static int arm_wake(bh_uring_t *t)
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

/* A poll that ended (cancelled, or CQ overflow) is armed again while ops
 * wait. A grant made while none is armed is not lost: its write stays in
 * the counter, and a poll armed on a readable eventfd fires at once. */
static void rearm_wake(bh_uring_t *t)
{
	if (!t->wake_armed && t->waitq.count && !t->closing)
		arm_wake(t); /* SQ full: the next reap or complete retries */
}

static void on_wake(bh_uring_t *t, const struct io_uring_cqe *cqe)
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

int bh_uring_wait(bh_uring_t *t, struct bh_uring_op *op, bulkhead_t *bh, uint32_t n,
		  bh_uring_grant_fn *fn)
{
	int r;

	if (!t || !op || !bh || !fn || !ud_encodable(op) || op->state != OP_IDLE)
		return -EINVAL;
	if (t->closing)
		return -ESHUTDOWN;
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
		 * the eventfd, and the poll fires at once. */
		arm_wake(t);
		return 1;
	}
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

/* ---- completions ----------------------------------------------------- */

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

/* A tracked op's CQE: MORE, or DONE at the final CQE of its last chain
 * member, when its permits go to rb (or back at once). The caller counts. */
static inline int op_cqe(bh_uring_t *t, const struct io_uring_cqe *cqe, struct bh_uring_op *op,
			 struct rel_batch *rb, uint64_t *now)
{
	if (BHI_UNLIKELY(op->t != t || op->state < OP_ARMED))
		return stray(t);
	if ((cqe->flags & IORING_CQE_F_MORE) || --op->cqes_left)
		return BH_URING_MORE;
	/* The final CQE: the kernel is done with the op. */
	op->state = OP_IDLE;
	if (BHI_UNLIKELY(op->flags & OPF_TIMED))
		sample_done(op, cqe->res, now);
	give_back(rb, op->bh, op->n);
	return BH_URING_DONE;
}

static BHI_COLD int helper_cqe(bh_uring_t *t, const struct io_uring_cqe *cqe, enum ud_tag tag)
{
	if (!(cqe->flags & IORING_CQE_F_MORE))
		t->helpers--;
	if (tag == TAG_WAKE)
		on_wake(t, cqe);
	else if (tag == TAG_DRAIN && cqe->res == -EINVAL)
		t->no_cancel_any = true; /* before 5.19: nothing would end them */
	return BH_URING_HELPER;
}

/* Classify one CQE and update the books; releases go to rb (or out now). */
static inline int classify(bh_uring_t *t, const struct io_uring_cqe *cqe, struct bh_uring_op **opp,
			   struct rel_batch *rb, uint64_t *now)
{
	uint64_t ud = cqe->user_data;

	if (BHI_UNLIKELY((ud & ~UD_PTR_MASK) != UD_MAGIC)) { /* not a tracked op */
		*opp = NULL;
		if ((ud >> 56) != BH_URING_UD_TAG)
			return BH_URING_FOREIGN;
		return helper_cqe(t, cqe, (enum ud_tag)(ud & UD_TAG_MASK));
	}
	*opp = ud_ptr(ud);
	return op_cqe(t, cqe, *opp, rb, now);
}

static inline bool is_wake(const struct io_uring_cqe *cqe)
{
	return (cqe->user_data & ~UD_PTR_MASK) == (UD_MAGIC | TAG_WAKE);
}

int bh_uring_complete(bh_uring_t *t, const struct io_uring_cqe *cqe, struct bh_uring_op **op)
{
	struct bh_uring_op *dummy;
	uint64_t now = 0;
	int kind;

	if (!t || !cqe)
		return -EINVAL;
	kind = classify(t, cqe, op ? op : &dummy, NULL, &now);
	if (kind == BH_URING_DONE) {
		t->ops--;
		t->st.finished++;
	}
	if (is_wake(cqe) || t->ready_head)
		deliver(t);
	rearm_wake(t);
	return kind;
}

/* One batch: book up to CHUNK CQEs, give the permits back, then show them to
 * fn - so a callback that starts a new op finds the permits free - and
 * advance the CQ. Returns how many CQEs it consumed. */
static unsigned reap_chunk(bh_uring_t *t, bh_uring_cqe_fn *fn, void *ctx)
{
	struct io_uring *ring = t->ring;
	struct io_uring_cq *cq = &ring->cq;
	struct io_uring_cqe *cqes = cq->cqes;
	unsigned mask = cq->ring_mask, shift = io_uring_cqe_shift(ring);
	/* acquire: the CQEs are written before the kernel moves the tail */
	unsigned head = *cq->khead, n = io_uring_smp_load_acquire(cq->ktail) - head;
	struct {
		struct io_uring_cqe *cqe;
		struct bh_uring_op *op;
		int kind;
	} b[CHUNK];
	struct rel_batch rb;
	unsigned done = 0;
	uint64_t now = 0;
	bool woken = false;

	if (n == 0)
		return 0;
	if (n > CHUNK)
		n = CHUNK;
	rb.used = 0;
	for (unsigned i = 0; i < n; i++) {
		struct io_uring_cqe *cqe = &cqes[((head + i) & mask) << shift];
		int kind = classify(t, cqe, &b[i].op, &rb, &now);

		b[i].cqe = cqe;
		b[i].kind = kind;
		done += kind == BH_URING_DONE;
		woken |= kind == BH_URING_HELPER && is_wake(cqe);
	}
	rel_flush(&rb);
	t->ops -= done;
	t->st.finished += done;
	for (unsigned i = 0; fn && i < n; i++)
		if (b[i].kind != BH_URING_HELPER && b[i].kind >= 0)
			fn(ctx, b[i].cqe, b[i].kind, b[i].op);
	io_uring_cq_advance(ring, n);
	if (woken || t->ready_head)
		deliver(t);
	return n;
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
	unsigned budget, total = 0, n;
	int r = 0;

	if (!t || t->reaping) /* reaping: a callback called us */
		return -EINVAL;
	t->reaping = true;
	budget = 16 * t->ring->cq.ring_entries; /* callbacks may keep adding CQEs */
	while (total < budget) {
		n = reap_chunk(t, fn, ctx);
		total += n;
		if (n)
			continue;
		if (!io_uring_cq_has_overflow(t->ring) || (r = flush_overflow(t)) < 0)
			break;
	}
	rearm_wake(t);
	t->reaping = false;
	return total || r == 0 ? (int)total : r;
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
	if (op->state == OP_IDLE)
		return -ENOENT;
	if (op->t != t)
		return -EINVAL;
	switch (op->state) {
	case OP_WAITING:
		withdraw(t, op);
		return 0;
	case OP_HELD:
		unhold(t, op);
		return 0;
	case OP_ARMED:
		if (sqe_pending(t, op->sqe_idx)) {
			neutralise(t, op);
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
			io_uring_sqring_wait(t->ring);
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
	t->closing = true;
	while (t->waitq.head) {
		struct bh_uring_op *op = t->waitq.head;

		withdraw(t, op);
		op->fn(op, -ECANCELED);
	}
	/* Granted permits no SQE will ever use (gets fail from here on). */
	while (t->heldq.head)
		unhold(t, t->heldq.head);
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
		r = wait_cqe_until(t, deadline_ns);
		if (r == -ETIMEDOUT)
			return r;
		if (r < 0 && r != -ETIME && r != -EINTR && r != -EAGAIN && r != -EBUSY)
			return r;
	}
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
