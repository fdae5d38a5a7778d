/* The io_uring tracker's rules, on a real ring. Every op used here stays in
 * flight until the test acts (a read on an empty pipe, a poll on an eventfd,
 * an hour-long timeout, a multishot accept), and CQEs are handed to the
 * tracker one at a time, so each step's permit count is exact. Exit 77 when
 * the kernel has no io_uring at all; single tests skip when a feature is
 * missing. */
#define _GNU_SOURCE /* pipe2 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "bulkhead/uring.h"

/* ---- fixtures ----------------------------------------------------------- */

struct fix {
	struct io_uring ring;
	bh_uring_t *t;
	bulkhead_t *bh;
};

static int ring_up(struct io_uring *ring, unsigned entries, unsigned cq, unsigned flags)
{
	struct io_uring_params p = { .flags = flags };

	if (cq) {
		p.flags |= IORING_SETUP_CQSIZE;
		p.cq_entries = cq;
	}
	return io_uring_queue_init_params(entries, ring, &p);
}

static struct fix *fix_new(unsigned entries, unsigned cq, uint32_t limit, uint32_t queue,
			   uint32_t bh_flags)
{
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(ring_up(&f->ring, entries, cq, 0), 0);
	assert_int_equal(bh_uring_create(&f->ring, 0, &f->t), 0);
	f->bh = make_bh(limit, queue, bh_flags);
	return f;
}

/* Tear down the way a user must: drain, then exit the ring. */
static void fix_free(struct fix *f)
{
	assert_int_equal(bh_uring_drain(f->t, BH_FOREVER, NULL, NULL), 0);
	assert_int_equal(bh_uring_destroy(f->t), 0);
	io_uring_queue_exit(&f->ring);
	assert_int_equal(stats_of(f->bh).in_flight, 0);
	bh_destroy(f->bh);
	free(f);
}

static uint64_t in_flight(bulkhead_t *bh)
{
	return stats_of(bh).in_flight;
}

static struct bh_uring_stats tstats(bh_uring_t *t)
{
	struct bh_uring_stats st;

	bh_uring_stats(t, &st);
	return st;
}

/* Wait for the next CQE, consume it, and return a copy: the test decides
 * when (and in which order) the tracker sees it. */
static void next_cqe(struct io_uring *ring, struct io_uring_cqe *copy)
{
	struct io_uring_cqe *cqe;

	assert_int_equal(io_uring_wait_cqe(ring, &cqe), 0);
	memcpy(copy, cqe, sizeof(*copy));
	io_uring_cqe_seen(ring, cqe);
}

static int feed(struct fix *f, const struct io_uring_cqe *cqe, struct bh_uring_op **op)
{
	return bh_uring_complete(f->t, cqe, op);
}

static int feed_next(struct fix *f, struct bh_uring_op **op)
{
	struct io_uring_cqe c;

	next_cqe(&f->ring, &c);
	return feed(f, &c, op);
}

static void make_pipe(int p[2])
{
	assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
}

static void close_pipe(int p[2])
{
	close(p[0]);
	close(p[1]);
}

/* A tracked read on an empty pipe: in flight until the test writes. */
static void track_read(struct fix *f, struct bh_uring_op *op, int fd, void *buf,
		       uint64_t deadline)
{
	struct io_uring_sqe *sqe;

	assert_int_equal(bh_uring_get_sqe(f->t, op, f->bh, 1, &sqe), 0);
	io_uring_prep_read(sqe, fd, buf, 1, 0);
	assert_int_equal(bh_uring_track(f->t, op, deadline), 0);
}

static void track_nop(struct fix *f, struct bh_uring_op *op)
{
	struct io_uring_sqe *sqe;

	assert_int_equal(bh_uring_get_sqe(f->t, op, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	assert_int_equal(bh_uring_track(f->t, op, BH_FOREVER), 0);
}

static void submit(struct fix *f, int expect)
{
	assert_int_equal(io_uring_submit(&f->ring), expect);
}

static bool opcode_supported(struct io_uring *ring, int opcode)
{
	struct io_uring_probe *p = io_uring_get_probe_ring(ring);
	bool ok = p && io_uring_opcode_supported(p, opcode);

	io_uring_free_probe(p);
	return ok;
}

/* ---- bad input ------------------------------------------------------------ */

static void never_granted(struct bh_uring_op *op, int result)
{
	(void)op;
	fail_msg("grant callback ran with %d", result);
}

static void test_bad_input(void **state)
{
	struct fix *f = fix_new(8, 0, 4, 4, 0);
	struct bh_uring_op op = { 0 }, *ops[1] = { &op };
	struct io_uring_sqe *sqe, *sqes[BH_URING_CHAIN_MAX + 1];
	bh_uring_t *t = (bh_uring_t *)&op;

	(void)state;
	errno = 4321;
	assert_int_equal(bh_uring_create(NULL, 0, &t), -EINVAL);
	assert_int_equal(bh_uring_create(&f->ring, 1, &t), -EINVAL);
	assert_int_equal(bh_uring_create(&f->ring, 0, NULL), -EINVAL);
	assert_ptr_equal(t, (bh_uring_t *)&op); /* untouched on failure */
	assert_int_equal(bh_uring_get_sqes(f->t, &op, f->bh, 1, 0, sqes), -EINVAL);
	assert_int_equal(bh_uring_get_sqes(f->t, &op, f->bh, 1, BH_URING_CHAIN_MAX + 1, sqes),
			 -EINVAL);
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 0, &sqe), -EINVAL);
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 5, &sqe), -EINVAL);
	assert_int_equal(bh_uring_get_sqe(NULL, &op, f->bh, 1, &sqe), -EINVAL);
	assert_int_equal(bh_uring_get_sqe(f->t, NULL, f->bh, 1, &sqe), -EINVAL);
	assert_int_equal(bh_uring_get_sqe(f->t, &op, NULL, 1, &sqe), -EINVAL);
	assert_int_equal(bh_uring_get_batch(f->t, ops, 0, f->bh, 1, sqes), -EINVAL);
	assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), -EINVAL); /* idle */
	assert_int_equal(bh_uring_cancel(f->t, &op), -ENOENT);
	assert_int_equal(bh_uring_cancel(f->t, NULL), -EINVAL);
	assert_int_equal(bh_uring_wait(f->t, &op, f->bh, 1, NULL), -EINVAL);
	assert_int_equal(bh_uring_complete(f->t, NULL, NULL), -EINVAL);
	assert_int_equal(bh_uring_reap(NULL, NULL, NULL), -EINVAL);
	assert_int_equal(bh_uring_destroy(NULL), 0);
	/* every NULL the rule checks: -EINVAL, nothing taken */
	struct io_uring_cqe cqe = { .user_data = 12345 }; /* not the tracker's */
	struct bh_uring_op *nulls[1] = { NULL };
	struct bh_uring_stats st;

	assert_int_equal(bh_uring_get_sqes(f->t, &op, f->bh, 1, 1, NULL), -EINVAL);
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, NULL), -EINVAL);
	assert_int_equal(bh_uring_get_batch(NULL, ops, 1, f->bh, 1, sqes), -EINVAL);
	assert_int_equal(bh_uring_get_batch(f->t, NULL, 1, f->bh, 1, sqes), -EINVAL);
	assert_int_equal(bh_uring_get_batch(f->t, ops, 1, NULL, 1, sqes), -EINVAL);
	assert_int_equal(bh_uring_get_batch(f->t, ops, 1, f->bh, 1, NULL), -EINVAL);
	assert_int_equal(bh_uring_get_batch(f->t, nulls, 1, f->bh, 1, sqes), -EINVAL);
	assert_int_equal(bh_uring_track(NULL, &op, BH_FOREVER), -EINVAL);
	assert_int_equal(bh_uring_track(f->t, NULL, BH_FOREVER), -EINVAL);
	assert_int_equal(bh_uring_track_batch(NULL, ops, 1), -EINVAL);
	assert_int_equal(bh_uring_track_batch(f->t, NULL, 1), -EINVAL);
	assert_int_equal(bh_uring_complete(NULL, &cqe, NULL), -EINVAL);
	assert_int_equal(bh_uring_complete(f->t, &cqe, NULL), BH_URING_FOREIGN); /* op may be NULL */
	assert_int_equal(bh_uring_cancel(NULL, &op), -EINVAL);
	assert_int_equal(bh_uring_wait(NULL, &op, f->bh, 1, never_granted), -EINVAL);
	assert_int_equal(bh_uring_wait(f->t, NULL, f->bh, 1, never_granted), -EINVAL);
	assert_int_equal(bh_uring_wait(f->t, &op, NULL, 1, never_granted), -EINVAL);
	assert_int_equal(bh_uring_drain(NULL, BH_FOREVER, NULL, NULL), -EINVAL);
	memset(&st, 0xff, sizeof(st));
	bh_uring_stats(NULL, &st); /* a NULL tracker reads as empty */
	assert_int_equal(st.in_flight + st.held + st.waiting + st.helpers + st.started +
				 st.finished + st.rejected + st.refused + st.cancels + st.strays,
			 0);
	bh_uring_stats(f->t, NULL); /* nothing written, no crash */
	assert_false(bh_uring_op_busy(&op));
	/* nothing taken, no SQE used */
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(io_uring_sq_ready(&f->ring), 0);
	assert_int_equal(stats_of(f->bh).rejected, 0);
	/* an op in use is refused, not clobbered */
	track_nop(f, &op);
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), -EINVAL);
	assert_int_equal(bh_uring_wait(f->t, &op, f->bh, 1, never_granted), -EINVAL);
	assert_int_equal(errno, 4321);
	fix_free(f);
}

/* ---- submission ---------------------------------------------------------- */

static void test_busy_consumes_no_sqe(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 0, 0);
	struct bh_uring_op a = { 0 }, b = { 0 };
	struct io_uring_sqe *sqe = NULL;

	(void)state;
	track_nop(f, &a);
	assert_int_equal(io_uring_sq_ready(&f->ring), 1);
	assert_int_equal(bh_uring_get_sqe(f->t, &b, f->bh, 1, &sqe), -EBUSY);
	assert_null(sqe);
	assert_int_equal(io_uring_sq_ready(&f->ring), 1); /* no SQE consumed */
	assert_int_equal(in_flight(f->bh), 1);
	assert_int_equal(tstats(f->t).rejected, 1);
	assert_int_equal(tstats(f->t).in_flight, 1);
	/* b is still idle and usable once the permit is back */
	submit(f, 1);
	assert_int_equal(feed_next(f, NULL), BH_URING_DONE);
	assert_int_equal(in_flight(f->bh), 0);
	track_nop(f, &b);
	fix_free(f);
}

static void test_full_sq_takes_no_permit(void **state)
{
	struct fix *f = fix_new(4, 0, 8, 0, 0);
	struct bh_uring_op op = { 0 };
	struct io_uring_sqe *sqe, *sqes[2];

	(void)state;
	for (int i = 0; i < 3; i++) { /* leave one SQE: not room for op + timeout */
		sqe = io_uring_get_sqe(&f->ring);
		io_uring_prep_nop(sqe);
		sqe->user_data = 77;
	}
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), -EAGAIN);
	assert_int_equal(bh_uring_get_sqes(f->t, &op, f->bh, 1, 2, sqes), -EAGAIN);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(stats_of(f->bh).acquired, 0);
	submit(f, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(feed_next(f, NULL), BH_URING_FOREIGN);
	fix_free(f);
}

/* ---- the final-CQE rule ---------------------------------------------------- */

static void test_pipe_reads_held_until_final_cqe(void **state)
{
	enum { N = 8 };
	struct fix *f = fix_new(32, 0, N, 0, 0);
	struct bh_uring_op ops[N] = { { 0 } }, *op;
	int p[N][2];
	char buf[N];

	(void)state;
	for (int i = 0; i < N; i++) {
		make_pipe(p[i]);
		track_read(f, &ops[i], p[i][0], &buf[i], BH_FOREVER);
		ops[i].data = &p[i];
	}
	submit(f, N);
	assert_int_equal(in_flight(f->bh), N);
	assert_int_equal(tstats(f->t).in_flight, N);
	for (int i = N - 1; i >= 0; i--) { /* finish them out of order */
		assert_int_equal(write(p[i][1], "x", 1), 1);
		assert_int_equal(feed_next(f, &op), BH_URING_DONE);
		assert_ptr_equal(op, &ops[i]);
		assert_ptr_equal(op->data, &p[i]);
		assert_int_equal(in_flight(f->bh), (uint64_t)i);
	}
	assert_int_equal(tstats(f->t).finished, N);
	assert_int_equal(stats_of(f->bh).over_released, 0);
	for (int i = 0; i < N; i++)
		close_pipe(p[i]);
	fix_free(f);
}

/* The permit survives the cancel's CQE and goes back at the target's, in
 * whichever order the two reach the tracker. */
static void test_cancel_holds_until_target_cqe(void **state)
{
	for (int reversed = 0; reversed <= 1; reversed++) {
		struct fix *f = fix_new(8, 0, 2, 0, 0);
		struct bh_uring_op op = { 0 }, *got;
		struct io_uring_cqe c[2], *target, *helper;
		int p[2];
		char b;

		(void)state;
		make_pipe(p);
		track_read(f, &op, p[0], &b, BH_FOREVER);
		submit(f, 1);
		assert_int_equal(bh_uring_cancel(f->t, &op), 0);
		assert_int_equal(bh_uring_cancel(f->t, &op), -EALREADY); /* one is enough */
		submit(f, 1);
		next_cqe(&f->ring, &c[0]);
		next_cqe(&f->ring, &c[1]);
		target = (c[0].user_data & 7) == 0 ? &c[0] : &c[1];
		helper = target == &c[0] ? &c[1] : &c[0];
		assert_true(bh_uring_owns(target) && bh_uring_owns(helper));
		assert_int_equal(target->res, -ECANCELED);
		assert_int_equal(helper->res, 0);
		if (reversed) {
			assert_int_equal(feed(f, target, &got), BH_URING_DONE);
			assert_int_equal(in_flight(f->bh), 0);
			assert_int_equal(feed(f, helper, &got), BH_URING_HELPER);
			assert_null(got);
		} else {
			assert_int_equal(feed(f, helper, &got), BH_URING_HELPER);
			assert_int_equal(in_flight(f->bh), 1); /* still held */
			assert_int_equal(feed(f, target, &got), BH_URING_DONE);
			assert_ptr_equal(got, &op);
		}
		assert_int_equal(in_flight(f->bh), 0);
		assert_int_equal(tstats(f->t).helpers, 0);
		assert_int_equal(tstats(f->t).cancels, 1);
		close_pipe(p);
		fix_free(f);
	}
}

/* The op finished in the kernel but its CQE is not reaped yet: the cancel
 * finds nothing (-ENOENT) and the permit goes back once. */
static void test_cancel_of_completed_op(void **state)
{
	struct fix *f = fix_new(8, 0, 2, 0, 0);
	struct bh_uring_op op = { 0 };
	struct io_uring_cqe *peek, c1, c2;
	int p[2];
	char b;

	(void)state;
	make_pipe(p);
	track_read(f, &op, p[0], &b, BH_FOREVER);
	submit(f, 1);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(io_uring_wait_cqe(&f->ring, &peek), 0); /* posted, not consumed */
	assert_int_equal(bh_uring_cancel(f->t, &op), 0);
	submit(f, 1);
	next_cqe(&f->ring, &c1);
	next_cqe(&f->ring, &c2);
	assert_int_equal(c1.res, 1);
	assert_int_equal(c2.res, -ENOENT);
	assert_int_equal(feed(f, &c2, NULL), BH_URING_HELPER);
	assert_int_equal(in_flight(f->bh), 1);
	assert_int_equal(feed(f, &c1, NULL), BH_URING_DONE);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(bh_uring_cancel(f->t, &op), -ENOENT); /* idle: no SQE */
	assert_int_equal(io_uring_sq_ready(&f->ring), 0);
	assert_int_equal(stats_of(f->bh).released, 1);
	assert_int_equal(stats_of(f->bh).over_released, 0);
	close_pipe(p);
	fix_free(f);
}

static void test_multishot_poll_held_until_last(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 0, 0);
	struct bh_uring_op op = { 0 }, *got;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe c;
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t v = 1;
	int helpers = 0, done = 0;

	(void)state;
	assert_true(efd >= 0);
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	io_uring_prep_poll_multishot(sqe, efd, POLLIN);
	assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), 0);
	submit(f, 1);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(write(efd, &v, sizeof(v)), sizeof(v));
		next_cqe(&f->ring, &c);
		assert_true(c.flags & IORING_CQE_F_MORE);
		assert_int_equal(feed(f, &c, &got), BH_URING_MORE);
		assert_ptr_equal(got, &op);
		assert_int_equal(in_flight(f->bh), 1);
		assert_int_equal(read(efd, &v, sizeof(v)), sizeof(v));
	}
	assert_int_equal(bh_uring_cancel(f->t, &op), 0);
	submit(f, 1);
	for (int i = 0; i < 2; i++) {
		next_cqe(&f->ring, &c);
		int k = feed(f, &c, &got);

		if (k == BH_URING_HELPER) {
			helpers++;
			assert_int_equal(in_flight(f->bh), (uint64_t)(1 - done));
		} else {
			assert_int_equal(k, BH_URING_DONE);
			assert_false(c.flags & IORING_CQE_F_MORE);
			assert_int_equal(c.res, -ECANCELED);
			done++;
			assert_int_equal(in_flight(f->bh), 0);
		}
	}
	assert_int_equal(helpers, 1);
	assert_int_equal(done, 1);
	close(efd);
	fix_free(f);
}

/* Whether TCP over 127.0.0.1 works (a build chroot may have its loopback
 * down): the tests that need it skip without. */
static bool have_loopback(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = ls >= 0 && c >= 0 && bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		  listen(ls, 1) == 0 && getsockname(ls, (struct sockaddr *)&a, &len) == 0 &&
		  connect(c, (struct sockaddr *)&a, sizeof(a)) == 0;

	if (c >= 0)
		close(c);
	if (ls >= 0)
		close(ls);
	return ok;
}

static int listener(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(s >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s, 64), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return s;
}

static int connect_to(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(s >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	return s;
}

static void test_multishot_accept(void **state)
{
	if (!have_loopback())
		skip();
	struct fix *f = fix_new(8, 0, 1, 0, 0);
	struct bh_uring_op op = { 0 }, *got;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe c;
	uint16_t port;
	int ls = listener(&port), cl[3];

	(void)state;
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	io_uring_prep_multishot_accept(sqe, ls, NULL, NULL, SOCK_CLOEXEC);
	assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), 0);
	submit(f, 1);
	for (int i = 0; i < 3; i++) {
		cl[i] = connect_to(port);
		next_cqe(&f->ring, &c);
		if (i == 0 && c.res == -EINVAL) {
			assert_int_equal(feed(f, &c, &got), BH_URING_DONE);
			close(cl[0]);
			close(ls);
			fix_free(f);
			skip(); /* no multishot accept */
		}
		assert_true(c.res >= 0);
		assert_true(c.flags & IORING_CQE_F_MORE);
		assert_int_equal(feed(f, &c, &got), BH_URING_MORE);
		assert_int_equal(in_flight(f->bh), 1);
		close(c.res);
	}
	assert_int_equal(bh_uring_cancel(f->t, &op), 0);
	submit(f, 1);
	for (int i = 0; i < 2; i++) {
		next_cqe(&f->ring, &c);
		if (feed(f, &c, &got) == BH_URING_DONE)
			assert_int_equal(c.res, -ECANCELED);
	}
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(tstats(f->t).finished, 1);
	for (int i = 0; i < 3; i++)
		close(cl[i]);
	close(ls);
	fix_free(f);
}

/* SEND_ZC posts its result with F_MORE, then a notification without it:
 * the buffer (and the permit) is the kernel's until the notification. */
static void test_send_zc_released_at_notification(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 0, 0);
	struct bh_uring_op op = { 0 }, *got;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe c;
	static char msg[4096];
	uint16_t port;
	int ls, cl, sv;

	(void)state;
	if (!opcode_supported(&f->ring, IORING_OP_SEND_ZC) || !have_loopback()) {
		fix_free(f);
		skip();
	}
	ls = listener(&port);
	cl = connect_to(port);
	sv = accept(ls, NULL, NULL);
	assert_true(sv >= 0);
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	io_uring_prep_send_zc(sqe, cl, msg, sizeof(msg), 0, 0);
	assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), 0);
	submit(f, 1);
	next_cqe(&f->ring, &c);
	assert_int_equal(c.res, (int)sizeof(msg));
	assert_true(c.flags & IORING_CQE_F_MORE);
	assert_int_equal(feed(f, &c, &got), BH_URING_MORE);
	assert_int_equal(in_flight(f->bh), 1); /* the buffer is still the kernel's */
	next_cqe(&f->ring, &c);
	assert_true(c.flags & IORING_CQE_F_NOTIF);
	assert_false(c.flags & IORING_CQE_F_MORE);
	assert_int_equal(feed(f, &c, &got), BH_URING_DONE);
	assert_ptr_equal(got, &op);
	assert_int_equal(in_flight(f->bh), 0);
	close(sv);
	close(cl);
	close(ls);
	fix_free(f);
}

/* Fill cl's send buffer (and sv's receive buffer behind it), both shrunk,
 * so that the next send waits for room. */
static void fill_socket(int cl, int sv)
{
	static char junk[65536];
	int small = 4096;

	assert_int_equal(setsockopt(cl, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	assert_int_equal(setsockopt(sv, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	while (send(cl, junk, sizeof(junk), MSG_DONTWAIT) > 0)
		;
}

/* A zero-copy send that its own deadline (the LINK_TIMEOUT behind it)
 * cancels while it waits for room, or that bh_uring_cancel cancels, posts
 * -ECANCELED with F_MORE and then its notification (6.18): the permit is
 * held until the notification, whatever order the deadline's CQE comes in. */
static void test_send_zc_cancelled_while_waiting(void **state)
{
	for (int by_cancel = 0; by_cancel <= 1; by_cancel++) {
		struct fix *f = fix_new(8, 0, 1, 0, 0);
		struct bh_uring_op op = { 0 }, *got;
		struct io_uring_sqe *sqe;
		struct io_uring_cqe c;
		static char msg[65536];
		uint16_t port;
		int ls, cl, sv, seen_more = 0, done = 0;

		(void)state;
		if (!opcode_supported(&f->ring, IORING_OP_SEND_ZC) || !have_loopback()) {
			fix_free(f);
			skip();
		}
		ls = listener(&port);
		cl = connect_to(port);
		sv = accept(ls, NULL, NULL);
		assert_true(sv >= 0);
		fill_socket(cl, sv);
		assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
		io_uring_prep_send_zc(sqe, cl, msg, sizeof(msg), 0, 0);
		assert_int_equal(bh_uring_track(f->t, &op,
						by_cancel ? BH_FOREVER : bh_now_ns() + 5 * BH_MSEC),
				 0);
		submit(f, by_cancel ? 1 : 2);
		if (by_cancel) { /* the send waits for room by now: submit issued it */
			assert_int_equal(bh_uring_cancel(f->t, &op), 0);
			submit(f, 1);
		}
		/* the deadline's or the cancel's own CQE, the send's result, its
		 * notification: the permit goes back at the last alone */
		for (int i = 0; i < 3; i++) {
			int kind;

			next_cqe(&f->ring, &c);
			kind = feed(f, &c, &got);
			if (kind == BH_URING_MORE) {
				assert_int_equal(c.res, -ECANCELED);
				seen_more++;
			} else if (kind == BH_URING_DONE) {
				assert_true(c.flags & IORING_CQE_F_NOTIF);
				assert_ptr_equal(got, &op);
				done++;
			} else {
				assert_int_equal(kind, BH_URING_HELPER);
			}
			assert_int_equal(in_flight(f->bh), done ? 0 : 1);
		}
		assert_int_equal(seen_more, 1);
		assert_int_equal(done, 1);
		assert_int_equal(tstats(f->t).finished, 1);
		assert_int_equal(tstats(f->t).strays, 0);
		close(sv);
		close(cl);
		close(ls);
		fix_free(f);
	}
}

/* ---- linked timeouts -------------------------------------------------------- */

/* The kernel's deadline fires: its CQE (-ETIME) is a helper's; the op's own
 * -ECANCELED gives the permit back. Both feeding orders. */
static void test_link_timeout_fires(void **state)
{
	for (int reversed = 0; reversed <= 1; reversed++) {
		struct fix *f = fix_new(8, 0, 1, 0, 0);
		struct bh_uring_op op = { 0 }, *got;
		struct io_uring_cqe c[2], *target, *lt;
		int p[2];
		char b;

		(void)state;
		make_pipe(p);
		track_read(f, &op, p[0], &b, bh_now_ns() + 5 * BH_MSEC);
		assert_int_equal(tstats(f->t).helpers, 1);
		submit(f, 2);
		next_cqe(&f->ring, &c[0]);
		next_cqe(&f->ring, &c[1]);
		target = (c[0].user_data & 7) == 0 ? &c[0] : &c[1];
		lt = target == &c[0] ? &c[1] : &c[0];
		assert_int_equal(lt->res, -ETIME);
		assert_int_equal(target->res, -ECANCELED);
		if (!reversed) { /* as they came (6.18: the timeout's first) */
			assert_int_equal(feed(f, lt, &got), BH_URING_HELPER);
			assert_int_equal(in_flight(f->bh), 1);
			assert_int_equal(feed(f, target, &got), BH_URING_DONE);
		} else {
			assert_int_equal(feed(f, target, &got), BH_URING_DONE);
			assert_int_equal(in_flight(f->bh), 0);
			assert_int_equal(feed(f, lt, &got), BH_URING_HELPER);
		}
		assert_int_equal(in_flight(f->bh), 0);
		assert_int_equal(tstats(f->t).helpers, 0);
		close_pipe(p);
		fix_free(f);
	}
}

/* The op wins: its CQE first, then the timeout's -ECANCELED. */
static void test_link_timeout_not_firing(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 0, 0);
	struct bh_uring_op op = { 0 }, *got;
	struct io_uring_cqe c;
	int p[2];
	char b;

	(void)state;
	make_pipe(p);
	track_read(f, &op, p[0], &b, bh_now_ns() + 3600 * BH_SEC);
	submit(f, 2);
	assert_int_equal(in_flight(f->bh), 1);
	assert_int_equal(write(p[1], "x", 1), 1);
	next_cqe(&f->ring, &c);
	assert_int_equal(c.res, 1);
	assert_int_equal(feed(f, &c, &got), BH_URING_DONE);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(tstats(f->t).helpers, 1);
	next_cqe(&f->ring, &c);
	assert_int_equal(c.res, -ECANCELED);
	assert_int_equal(feed(f, &c, &got), BH_URING_HELPER);
	assert_int_equal(tstats(f->t).helpers, 0);
	close_pipe(p);
	fix_free(f);
}

/* ---- what track refuses --------------------------------------------------- */

static void expect_refused_then_reaped(struct fix *f, struct bh_uring_op *op, unsigned sqes)
{
	assert_int_equal(in_flight(f->bh), 0); /* permits back at once */
	assert_int_equal(tstats(f->t).in_flight, 0);
	assert_int_equal(bh_uring_cancel(f->t, op), -ENOENT); /* idle */
	io_uring_submit(&f->ring);
	for (unsigned i = 0; i < sqes; i++) {
		struct io_uring_cqe c;

		next_cqe(&f->ring, &c);
		assert_true(bh_uring_owns(&c));
		assert_int_equal(feed(f, &c, NULL), BH_URING_HELPER);
	}
	assert_int_equal(tstats(f->t).helpers, 0);
}

static void test_skip_success_refused(void **state)
{
	struct fix *f = fix_new(8, 0, 2, 0, 0);
	struct bh_uring_op op = { 0 };
	struct io_uring_sqe *sqe, *own;

	(void)state;
	/* on the op itself */
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), -ECANCELED);
	assert_int_equal(sqe->opcode, IORING_OP_NOP); /* neutralised */
	assert_false(sqe->flags & IOSQE_CQE_SKIP_SUCCESS);
	expect_refused_then_reaped(f, &op, 1);

	/* on a pending SQE linked into it: if that one fails, the kernel posts
	 * nothing for the rest of the chain */
	own = io_uring_get_sqe(&f->ring);
	io_uring_prep_nop(own);
	own->user_data = 5;
	own->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), -ECANCELED);
	expect_refused_then_reaped(f, &op, 1); /* own NOP skips its CQE */
	assert_int_equal(tstats(f->t).refused, 2);
	fix_free(f);
}

/* the refused op's NOP is linked into from a pending SQE with
 * CQE_SKIP_SUCCESS that fails: the kernel posts nothing for the NOP, so the
 * helper it was counted as never comes back and drain cannot finish. */
static void test_refused_nop_after_failing_skip_link(void **state)
{
	struct fix *f = fix_new(8, 0, 2, 0, 0);
	struct bh_uring_op op = { 0 };
	struct io_uring_sqe *sqe, *own;
	struct io_uring_cqe c;
	char b;

	(void)state;
	own = io_uring_get_sqe(&f->ring);
	io_uring_prep_read(own, -1, &b, 1, 0); /* fails: -EBADF */
	own->user_data = 5;
	own->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), -ECANCELED);
	assert_int_equal(in_flight(f->bh), 0);
	submit(f, 2);
	next_cqe(&f->ring, &c); /* own read's failure */
	assert_int_equal(c.user_data, 5);
	assert_int_equal(c.res, -EBADF);
	assert_int_equal(feed(f, &c, NULL), BH_URING_FOREIGN);
	/* the tracker must not wait for a CQE the kernel never posts */
	assert_int_equal(bh_uring_drain(f->t, bh_now_ns() + BH_SEC / 5, NULL, NULL), 0);
	assert_int_equal(tstats(f->t).helpers, 0);
	fix_free(f);
}

/* drain's cancel-everything goes behind a pending SQE of the
 * caller's that still carries IOSQE_IO_LINK (a chain being built): it is
 * linked after that SQE and runs only when it ends, so nothing is
 * cancelled while a read on an idle pipe stays in flight. */
static void test_drain_behind_pending_link(void **state)
{
	struct fix *f = fix_new(8, 0, 2, 0, 0);
	struct bh_uring_op op = { 0 };
	struct io_uring_sqe *own;
	int p[2], q[2];
	char b, c;

	(void)state;
	make_pipe(p);
	make_pipe(q);
	track_read(f, &op, p[0], &b, BH_FOREVER);
	submit(f, 1);
	own = io_uring_get_sqe(&f->ring); /* first half of the caller's chain */
	io_uring_prep_read(own, q[0], &c, 1, 0);
	own->user_data = 7;
	own->flags |= IOSQE_IO_LINK;
	assert_int_equal(bh_uring_drain(f->t, bh_now_ns() + BH_SEC / 5, NULL, NULL), 0);
	assert_int_equal(in_flight(f->bh), 0);
	close_pipe(p);
	close_pipe(q);
	fix_free(f);
}

static void test_track_refuses_broken_contracts(void **state)
{
	struct fix *f = fix_new(8, 0, 2, 0, 0);
	struct bh_uring_op op = { 0 }, *got;
	struct io_uring_sqe *sqe, *other;
	struct io_uring_cqe c;

	(void)state;
	/* user_data overwritten: its CQE would be lost to the tracker */
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data64(sqe, 99);
	assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), -ECANCELED);
	expect_refused_then_reaped(f, &op, 1);

	/* a link flag on the last SQE while a deadline is asked for */
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	sqe->flags |= IOSQE_IO_LINK;
	assert_int_equal(bh_uring_track(f->t, &op, bh_now_ns() + BH_SEC), -ECANCELED);
	expect_refused_then_reaped(f, &op, 1);

	/* another SQE taken in between: the timeout could not follow the op */
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	other = io_uring_get_sqe(&f->ring);
	io_uring_prep_nop(other);
	other->user_data = 3;
	assert_int_equal(bh_uring_track(f->t, &op, bh_now_ns() + BH_SEC), -ECANCELED);
	assert_int_equal(in_flight(f->bh), 0);
	submit(f, 2);
	for (int i = 0; i < 2; i++) {
		next_cqe(&f->ring, &c);
		assert_int_equal(feed(f, &c, NULL), c.user_data == 3 ? BH_URING_FOREIGN : BH_URING_HELPER);
	}

	/* submitted before being sealed: refused, but still tracked */
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	submit(f, 1);
	assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), -EALREADY);
	assert_int_equal(in_flight(f->bh), 1);
	assert_int_equal(feed_next(f, &got), BH_URING_DONE);
	assert_ptr_equal(got, &op);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(stats_of(f->bh).over_released, 0);
	fix_free(f);
}

/* ---- chains ---------------------------------------------------------------- */

/* A write then a read, linked: one op, one set of permits, back at the
 * second member's CQE; a failing first member cancels the second, which
 * still posts the final CQE. */
static void test_chain_is_one_op(void **state)
{
	struct fix *f = fix_new(8, 0, 3, 0, 0);
	struct bh_uring_op op = { 0 }, *got;
	struct io_uring_sqe *s[2];
	struct io_uring_cqe c;
	int p[2];
	char b = 0;

	(void)state;
	make_pipe(p);
	assert_int_equal(bh_uring_get_sqes(f->t, &op, f->bh, 2, 2, s), 0);
	io_uring_prep_write(s[0], p[1], "y", 1, 0);
	io_uring_prep_read(s[1], p[0], &b, 1, 0);
	assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), 0);
	assert_true(s[0]->flags & IOSQE_IO_LINK);
	assert_int_equal(in_flight(f->bh), 2);
	submit(f, 2);
	next_cqe(&f->ring, &c);
	assert_int_equal(c.res, 1);
	assert_int_equal(feed(f, &c, &got), BH_URING_MORE);
	assert_int_equal(in_flight(f->bh), 2);
	next_cqe(&f->ring, &c);
	assert_int_equal(c.res, 1);
	assert_int_equal(feed(f, &c, &got), BH_URING_DONE);
	assert_int_equal(b, 'y');
	assert_int_equal(in_flight(f->bh), 0);

	assert_int_equal(bh_uring_get_sqes(f->t, &op, f->bh, 1, 2, s), 0);
	io_uring_prep_read(s[0], -1, &b, 1, 0); /* fails: EBADF */
	io_uring_prep_read(s[1], p[0], &b, 1, 0);
	assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), 0);
	submit(f, 2);
	next_cqe(&f->ring, &c);
	assert_int_equal(c.res, -EBADF);
	assert_int_equal(feed(f, &c, &got), BH_URING_MORE);
	assert_int_equal(in_flight(f->bh), 1);
	next_cqe(&f->ring, &c);
	assert_int_equal(c.res, -ECANCELED);
	assert_int_equal(feed(f, &c, &got), BH_URING_DONE);
	assert_int_equal(in_flight(f->bh), 0);
	close_pipe(p);
	fix_free(f);
}

/* ---- reaping, batching, overflow ---------------------------------------- */

struct tally {
	unsigned foreign, more, done;
	unsigned char seen[512];
	struct bh_uring_op *base;
	bulkhead_t *bh;
	uint64_t in_flight_at_done; /* checked inside the callback */
};

static void count_cqe(void *ctx, struct io_uring_cqe *cqe, int kind, struct bh_uring_op *op)
{
	struct tally *ty = ctx;

	(void)cqe;
	if (kind == BH_URING_FOREIGN) {
		assert_null(op);
		ty->foreign++;
	} else if (kind == BH_URING_MORE) {
		ty->more++;
	} else {
		assert_int_equal(kind, BH_URING_DONE);
		if (ty->base) {
			size_t i = (size_t)(op - ty->base);

			assert_true(i < sizeof(ty->seen));
			assert_int_equal(ty->seen[i]++, 0); /* exactly once */
		}
		if (ty->bh)
			ty->in_flight_at_done = in_flight(ty->bh);
		ty->done++;
	}
}

/* Reap until n DONE CQEs were seen, submitting as needed. */
static void reap_done(struct fix *f, struct tally *ty, unsigned n)
{
	while (ty->done < n) {
		assert_true(io_uring_submit_and_wait(&f->ring, 1) >= 0);
		assert_true(bh_uring_reap(f->t, count_cqe, ty) >= 0);
	}
	assert_int_equal(ty->done, n);
}

/* A chain is checked whole, member by member, alone and in a batch: a
 * later member's user_data or CQE_SKIP_SUCCESS, or a pending SQE linked
 * into the first that skips its CQE, refuses the op (its SQEs become NOPs
 * whose CQEs the tracker swallows); a hard link is kept, not softened. */
static void chain_refused(struct fix *f, struct bh_uring_op *op, bool batch)
{
	struct bh_uring_op *ops[1] = { op };

	if (batch)
		assert_int_equal(bh_uring_track_batch(f->t, ops, 1), -ECANCELED);
	else
		assert_int_equal(bh_uring_track(f->t, op, BH_FOREVER), -ECANCELED);
	expect_refused_then_reaped(f, op, 2);
}

static void test_chain_checked_whole(void **state)
{
	struct fix *f = fix_new(16, 0, 4, 0, 0);
	struct bh_uring_op op = { 0 }, op2 = { 0 }, *ops[2] = { &op, &op2 };
	struct io_uring_sqe *s[2], *first[2], *own;
	struct tally ty = { 0 };

	(void)state;
	for (int batch = 0; batch < 2; batch++) {
		assert_int_equal(bh_uring_get_sqes(f->t, &op, f->bh, 1, 2, s), 0);
		io_uring_prep_nop(s[0]);
		io_uring_prep_nop(s[1]);
		io_uring_sqe_set_data64(s[1], 7); /* its CQE would be lost */
		chain_refused(f, &op, batch);

		assert_int_equal(bh_uring_get_sqes(f->t, &op, f->bh, 1, 2, s), 0);
		io_uring_prep_nop(s[0]);
		io_uring_prep_nop(s[1]);
		s[1]->flags |= IOSQE_CQE_SKIP_SUCCESS;
		chain_refused(f, &op, batch);

		own = io_uring_get_sqe(&f->ring);
		io_uring_prep_nop(own);
		own->user_data = 5;
		own->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
		assert_int_equal(bh_uring_get_sqes(f->t, &op, f->bh, 1, 2, s), 0);
		io_uring_prep_nop(s[0]);
		io_uring_prep_nop(s[1]);
		chain_refused(f, &op, batch); /* own NOP skips its CQE */
	}
	assert_int_equal(tstats(f->t).refused, 6);

	/* two chains sealed in one batch, the first linked on into the second
	 * (a caller's choice, without a deadline) */
	assert_int_equal(bh_uring_get_sqes(f->t, &op, f->bh, 1, 2, first), 0);
	io_uring_prep_nop(first[0]);
	io_uring_prep_nop(first[1]);
	first[0]->flags |= IOSQE_IO_HARDLINK;
	first[1]->flags |= IOSQE_IO_LINK;
	assert_int_equal(bh_uring_get_sqes(f->t, &op2, f->bh, 2, 2, s), 0);
	io_uring_prep_nop(s[0]);
	io_uring_prep_nop(s[1]);
	assert_int_equal(bh_uring_track_batch(f->t, ops, 2), 0);
	assert_int_equal(first[0]->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK), IOSQE_IO_HARDLINK);
	assert_int_equal(first[1]->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK), IOSQE_IO_LINK);
	assert_int_equal(s[0]->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK), IOSQE_IO_LINK);
	assert_false(s[1]->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK));
	assert_int_equal(in_flight(f->bh), 3);
	submit(f, 4);
	while (ty.done + ty.more + ty.foreign < 4) {
		assert_true(io_uring_submit_and_wait(&f->ring, 1) >= 0);
		assert_true(bh_uring_reap(f->t, count_cqe, &ty) >= 0);
	}
	assert_int_equal(ty.foreign, 0);
	assert_int_equal(ty.more, 2);
	assert_int_equal(ty.done, 2);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(tstats(f->t).started, 2);
	fix_free(f);
}

/* A zero-copy send that a link cancels before it starts posts -ECANCELED
 * without F_MORE and then its notification (kernel 6.18): the first looks
 * final, so such a send is refused where a link could cancel it - after
 * the first member of a chain, or linked into from a pending SQE (a
 * caller's, or the last of an op sealed just before it in a batch). First
 * in its chain, with nothing linked into it, it is tracked. */
static void zc_chain_refused(struct fix *f, struct bh_uring_op *op, uint8_t opcode, bool batch)
{
	struct io_uring_sqe *s[2];
	static struct msghdr mh;
	static char msg[64];
	char b;

	assert_int_equal(bh_uring_get_sqes(f->t, op, f->bh, 1, 2, s), 0);
	io_uring_prep_read(s[0], -1, &b, 1, 0); /* would fail: -EBADF */
	if (opcode == IORING_OP_SEND_ZC)
		io_uring_prep_send_zc(s[1], -1, msg, sizeof(msg), 0, 0);
	else
		io_uring_prep_sendmsg_zc(s[1], -1, &mh, 0);
	chain_refused(f, op, batch);
}

static void test_send_zc_refused_where_a_link_may_cancel_it(void **state)
{
	struct fix *f = fix_new(16, 0, 4, 0, 0);
	struct bh_uring_op op = { 0 }, op2 = { 0 }, *ops[2] = { &op, &op2 }, *got;
	struct io_uring_sqe *s[2], *sqe, *own;
	static char msg[64];
	struct tally ty = { 0 };
	uint16_t port;
	int ls, cl, sv;
	char b;

	(void)state;
	for (int batch = 0; batch < 2; batch++) {
		zc_chain_refused(f, &op, IORING_OP_SEND_ZC, batch);
		zc_chain_refused(f, &op, IORING_OP_SENDMSG_ZC, batch);

		/* a caller's pending SQE linked into it */
		own = io_uring_get_sqe(&f->ring);
		io_uring_prep_read(own, -1, &b, 1, 0);
		own->user_data = 5;
		own->flags |= IOSQE_IO_LINK;
		assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
		io_uring_prep_send_zc(sqe, -1, msg, sizeof(msg), 0, 0);
		if (batch)
			assert_int_equal(bh_uring_track_batch(f->t, ops, 1), -ECANCELED);
		else
			assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), -ECANCELED);
		assert_int_equal(sqe->opcode, IORING_OP_NOP); /* neutralised */
		assert_int_equal(in_flight(f->bh), 0);
		submit(f, 2);
		next_cqe(&f->ring, &(struct io_uring_cqe){ 0 }); /* own read: -EBADF */
		assert_int_equal(feed_next(f, &got), BH_URING_HELPER);
		assert_int_equal(tstats(f->t).helpers, 0);
	}
	/* in one batch, the op before it linked on into it: the first is
	 * tracked, the send refused */
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	sqe->flags |= IOSQE_IO_LINK;
	assert_int_equal(bh_uring_get_sqe(f->t, &op2, f->bh, 1, &sqe), 0);
	io_uring_prep_send_zc(sqe, -1, msg, sizeof(msg), 0, 0);
	assert_int_equal(bh_uring_track_batch(f->t, ops, 2), -ECANCELED);
	assert_true(bh_uring_op_busy(&op));
	assert_false(bh_uring_op_busy(&op2));
	assert_int_equal(in_flight(f->bh), 1);
	submit(f, 2);
	ty.base = NULL;
	reap_done(f, &ty, 1);
	while (tstats(f->t).helpers) {
		assert_true(io_uring_submit_and_wait(&f->ring, 1) >= 0);
		assert_true(bh_uring_reap(f->t, count_cqe, &ty) >= 0);
	}
	assert_int_equal(tstats(f->t).refused, 7);

	/* first in its chain, nothing linked into it: tracked, held until its
	 * notification */
	if (opcode_supported(&f->ring, IORING_OP_SEND_ZC) && have_loopback()) {
		ls = listener(&port);
		cl = connect_to(port);
		sv = accept(ls, NULL, NULL);
		assert_true(sv >= 0);
		assert_int_equal(bh_uring_get_sqes(f->t, &op, f->bh, 1, 2, s), 0);
		io_uring_prep_send_zc(s[0], cl, msg, sizeof(msg), 0, 0);
		io_uring_prep_nop(s[1]);
		assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), 0);
		submit(f, 2);
		ty.done = 0;
		reap_done(f, &ty, 1);
		assert_int_equal(ty.more, 2); /* the send's result, the NOP */
		assert_int_equal(in_flight(f->bh), 0);
		close(sv);
		close(cl);
		close(ls);
	}
	assert_int_equal(tstats(f->t).strays, 0);
	fix_free(f);
}

/* Each of track's outcomes has its own code, and the op is where the code
 * says: 0 tracked, -EALREADY tracked unchecked, -ECANCELED idle with its
 * permits back, -EINVAL unchanged. A batch returns the outcome that asks
 * most of the caller, after giving each op its own. */
static void test_track_outcomes_distinct(void **state)
{
	struct fix *f = fix_new(16, 0, 8, 0, 0);
	struct bh_uring_op a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 }, *po[3];
	struct io_uring_sqe *sqe, *sqes[3];
	struct tally ty = { 0 };
	struct io_uring ring2;
	bh_uring_t *t2;

	(void)state;
	/* -EINVAL: an idle op, NULLs, another tracker's op: nothing changes */
	assert_int_equal(bh_uring_track(f->t, &a, BH_FOREVER), -EINVAL);
	assert_int_equal(bh_uring_track(f->t, NULL, BH_FOREVER), -EINVAL);
	assert_int_equal(bh_uring_track(NULL, &a, BH_FOREVER), -EINVAL);
	assert_false(bh_uring_op_busy(&a));
	assert_int_equal(ring_up(&ring2, 4, 0, 0), 0);
	assert_int_equal(bh_uring_create(&ring2, 0, &t2), 0);
	assert_int_equal(bh_uring_get_sqe(t2, &a, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	assert_int_equal(bh_uring_track(f->t, &a, BH_FOREVER), -EINVAL);
	assert_true(bh_uring_op_busy(&a)); /* still t2's, still waiting to be sealed */
	assert_int_equal(bh_uring_track(t2, &a, BH_FOREVER), 0);
	assert_int_equal(bh_uring_track(t2, &a, BH_FOREVER), -EINVAL); /* already */
	assert_int_equal(bh_uring_drain(t2, BH_FOREVER, NULL, NULL), 0);
	assert_int_equal(bh_uring_destroy(t2), 0);
	io_uring_queue_exit(&ring2);
	assert_int_equal(tstats(f->t).refused, 0);
	assert_int_equal(in_flight(f->bh), 0);

	/* -ECANCELED: idle, permits back */
	assert_int_equal(bh_uring_get_sqe(f->t, &b, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	assert_int_equal(bh_uring_track(f->t, &b, BH_FOREVER), -ECANCELED);
	assert_false(bh_uring_op_busy(&b));
	assert_int_equal(in_flight(f->bh), 0);

	/* -EALREADY: tracked as it is, permits held to its final CQE */
	assert_int_equal(bh_uring_get_sqe(f->t, &c, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	submit(f, 2); /* b's NOP too */
	assert_int_equal(bh_uring_track(f->t, &c, BH_FOREVER), -EALREADY);
	assert_true(bh_uring_op_busy(&c));
	assert_int_equal(in_flight(f->bh), 1);
	reap_done(f, &ty, 1);
	assert_false(bh_uring_op_busy(&c));
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(tstats(f->t).refused, 2);

	/* batches: [tracked, submitted early] -> -EALREADY */
	assert_int_equal(bh_uring_get_sqe(f->t, &c, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	submit(f, 1);
	assert_int_equal(bh_uring_get_sqe(f->t, &d, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	po[0] = &d;
	po[1] = &c;
	assert_int_equal(bh_uring_track_batch(f->t, po, 2), -EALREADY);
	assert_true(bh_uring_op_busy(&c) && bh_uring_op_busy(&d));
	reap_done(f, &ty, 3);

	/* [tracked, submitted early, refused] -> -ECANCELED */
	assert_int_equal(bh_uring_get_sqe(f->t, &c, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	submit(f, 1);
	po[0] = &a;
	po[1] = &b;
	assert_int_equal(bh_uring_get_batch(f->t, po, 2, f->bh, 1, sqes), 2);
	io_uring_prep_nop(sqes[0]);
	io_uring_prep_nop(sqes[1]);
	sqes[1]->flags |= IOSQE_CQE_SKIP_SUCCESS;
	po[1] = &c;
	po[2] = &b;
	assert_int_equal(bh_uring_track_batch(f->t, po, 3), -ECANCELED);
	assert_true(bh_uring_op_busy(&a) && bh_uring_op_busy(&c));
	assert_false(bh_uring_op_busy(&b));
	assert_int_equal(in_flight(f->bh), 2);
	reap_done(f, &ty, 5);

	/* [tracked, NULL, not armed, refused] -> -EINVAL, each op as alone */
	po[0] = &a;
	po[1] = &b;
	assert_int_equal(bh_uring_get_batch(f->t, po, 2, f->bh, 1, sqes), 2);
	io_uring_prep_nop(sqes[0]);
	io_uring_prep_nop(sqes[1]);
	io_uring_sqe_set_data64(sqes[1], 99);
	struct bh_uring_op *mixed[4] = { &a, NULL, &d, &b };

	assert_int_equal(bh_uring_track_batch(f->t, mixed, 4), -EINVAL);
	assert_true(bh_uring_op_busy(&a));
	assert_false(bh_uring_op_busy(&b) || bh_uring_op_busy(&d));
	assert_int_equal(in_flight(f->bh), 1);
	assert_int_equal(bh_uring_track_batch(NULL, mixed, 1), -EINVAL);
	assert_int_equal(bh_uring_track_batch(f->t, NULL, 1), -EINVAL);
	reap_done(f, &ty, 6);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(tstats(f->t).refused, 2 + 1 + 2 + 1);
	assert_int_equal(stats_of(f->bh).over_released, 0);
	fix_free(f);
}

/* bh_uring_get_batch takes the permits of many ops in one update, and
 * bh_uring_reap gives them back in one: the bulkhead counts one acquire and
 * one release, yet the permit count is exact after every step. */
static void test_batch_and_reap_coalesce(void **state)
{
	enum { N = 16 };
	struct fix *f = fix_new(64, 0, 100, 0, 0);
	struct bh_uring_op ops[N] = { { 0 } }, *po[N];
	struct io_uring_sqe *sqes[N];
	struct tally ty = { .base = ops, .bh = f->bh };

	(void)state;
	for (int i = 0; i < N; i++)
		po[i] = &ops[i];
	assert_int_equal(bh_uring_get_batch(f->t, po, N, f->bh, 1, sqes), N);
	for (int i = 0; i < N; i++)
		io_uring_prep_nop(sqes[i]);
	assert_int_equal(bh_uring_track_batch(f->t, po, N), 0);
	assert_int_equal(in_flight(f->bh), N);
	assert_int_equal(stats_of(f->bh).acquired, 1);
	assert_int_equal(tstats(f->t).started, N);
	assert_int_equal(bh_uring_track_batch(f->t, po, 1), -EINVAL); /* already tracked */
	assert_int_equal(io_uring_submit_and_wait(&f->ring, N), N);
	assert_int_equal(bh_uring_reap(f->t, count_cqe, &ty), N);
	assert_int_equal(ty.done, N);
	assert_int_equal(ty.in_flight_at_done, 0); /* back before the callbacks */
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(stats_of(f->bh).released, 1);
	for (int i = 0; i < N; i++)
		assert_false(bh_uring_op_busy(&ops[i]));

	/* one bad op in a batch is refused alone */
	assert_int_equal(bh_uring_get_batch(f->t, po, 3, f->bh, 1, sqes), 3);
	for (int i = 0; i < 3; i++)
		io_uring_prep_nop(sqes[i]);
	sqes[1]->flags |= IOSQE_CQE_SKIP_SUCCESS;
	assert_int_equal(bh_uring_track_batch(f->t, po, 3), -ECANCELED);
	assert_true(bh_uring_op_busy(&ops[0]) && bh_uring_op_busy(&ops[2]));
	assert_false(bh_uring_op_busy(&ops[1]));
	assert_int_equal(in_flight(f->bh), 2);
	assert_int_equal(io_uring_submit_and_wait(&f->ring, 3), 3);
	memset(&ty, 0, sizeof(ty));
	assert_int_equal(bh_uring_reap(f->t, count_cqe, &ty), 3);
	assert_int_equal(ty.done, 2); /* the NOP that replaced ops[1] is a helper */
	assert_int_equal(in_flight(f->bh), 0);

	/* a batch larger than the free permits gets what fits */
	bulkhead_t *small = make_bh(10, 0, 0);

	for (int i = 0; i < N; i++)
		memset(&ops[i], 0, sizeof(ops[i]));
	assert_int_equal(bh_uring_get_batch(f->t, po, N, small, 1, sqes), 10);
	assert_int_equal(stats_of(small).in_flight, 10);
	assert_int_equal(tstats(f->t).rejected, N - 10);
	for (int i = 0; i < 10; i++) {
		io_uring_prep_nop(sqes[i]);
		assert_int_equal(bh_uring_track(f->t, &ops[i], BH_FOREVER), 0);
	}
	assert_int_equal(bh_uring_get_batch(f->t, &po[10], 6, small, 1, sqes), -EBUSY);
	assert_int_equal(io_uring_submit_and_wait(&f->ring, 10), 10);
	memset(&ty, 0, sizeof(ty));
	assert_int_equal(bh_uring_reap(f->t, count_cqe, &ty), 10);
	assert_int_equal(ty.done, 10);
	assert_int_equal(stats_of(small).in_flight, 0);
	bh_destroy(small);
	fix_free(f);
}

/* One reap batch with the ops of six bulkheads interleaved (more than the
 * reap coalesces at once), one-SQE ops and chains of two, n from 1 to 3, and
 * a foreign CQE among them, four times over so that a batch wraps around
 * the CQ's end: every bulkhead gets back exactly what its ops held, before
 * any callback runs, and every op is told exactly once. */
static void test_reap_many_bulkheads(void **state)
{
	enum { NB = 6, N = 24, ROUNDS = 4 };
	struct fix *f = fix_new(64, 128, 8, 0, 0);
	bulkhead_t *b[NB];
	struct bh_uring_op ops[N] = { { 0 } };
	struct tally ty = { .base = ops };
	uint64_t want[NB];

	(void)state;
	for (int k = 0; k < NB; k++)
		b[k] = make_bh(64, 0, 0);
	for (int round = 0; round < ROUNDS; round++) {
		unsigned cqes = 0, chains = 0;

		memset(want, 0, sizeof(want));
		memset(&ty, 0, sizeof(ty));
		ty.base = ops;
		for (int i = 0; i < N; i++) {
			/* runs of one bulkhead and switches: 0 0 1 2 3 4 5 0 0 1 ... */
			int k = (i % 8) < 2 ? 0 : (i % 8) - 1 + round % 2;
			uint32_t n = 1 + (uint32_t)(i % 3);
			unsigned nr = i % 5 == 2 ? 2 : 1;
			struct io_uring_sqe *s[2];

			k %= NB;
			assert_int_equal(bh_uring_get_sqes(f->t, &ops[i], b[k], n, nr, s), 0);
			for (unsigned j = 0; j < nr; j++)
				io_uring_prep_nop(s[j]);
			assert_int_equal(bh_uring_track(f->t, &ops[i], BH_FOREVER), 0);
			want[k] += n;
			cqes += nr;
			chains += nr - 1;
			if (i == N / 2) { /* one of the caller's own */
				struct io_uring_sqe *own = io_uring_get_sqe(&f->ring);

				io_uring_prep_nop(own);
				io_uring_sqe_set_data64(own, 7);
				cqes++;
			}
		}
		for (int k = 0; k < NB; k++)
			assert_int_equal(in_flight(b[k]), want[k]);
		assert_int_equal(io_uring_submit_and_wait(&f->ring, cqes), cqes);
		assert_int_equal(bh_uring_reap(f->t, count_cqe, &ty), cqes);
		assert_int_equal(ty.done, N);
		assert_int_equal(ty.more, chains);
		assert_int_equal(ty.foreign, 1);
		for (int k = 0; k < NB; k++) {
			assert_int_equal(in_flight(b[k]), 0);
			assert_int_equal(stats_of(b[k]).over_released, 0);
		}
		assert_int_equal(tstats(f->t).in_flight, 0);
	}
	fix_free(f);
	for (int k = 0; k < NB; k++)
		bh_destroy(b[k]);
}

/* What in_order_cqe expects next: the ops' CQEs come in submission order. */
struct done_order {
	struct bh_uring_op *ops;
	unsigned next;
};

static void in_order_cqe(void *ctx, struct io_uring_cqe *cqe, int kind, struct bh_uring_op *op)
{
	struct done_order *o = ctx;

	assert_int_equal(kind, BH_URING_DONE);
	assert_int_equal(cqe->res, 0);
	assert_ptr_equal(op, &o->ops[o->next]);
	o->next++;
}

/* Batches whose every CQE is an op's final one (the reap shows them without
 * reading what each was), on a CQ of 32 entries that batches of 12 wrap
 * around: every op shown once, as DONE, with its own record, in order, and
 * its permit back before. */
static void test_reap_all_done_wraps(void **state)
{
	enum { N = 12, ROUNDS = 6 };
	struct fix *f = fix_new(16, 32, N, 0, 0);
	struct bh_uring_op rec[N] = { { 0 } };
	struct bh_uring_op *ops[N];
	struct io_uring_sqe *sqes[N];

	(void)state;
	for (int i = 0; i < N; i++)
		ops[i] = &rec[i];
	for (int round = 0; round < ROUNDS; round++) {
		struct done_order o = { .ops = rec };

		assert_int_equal(bh_uring_get_batch(f->t, ops, N, f->bh, 1, sqes), N);
		for (int i = 0; i < N; i++)
			io_uring_prep_nop(sqes[i]);
		assert_int_equal(bh_uring_track_batch(f->t, ops, N), 0);
		assert_int_equal(io_uring_submit_and_wait(&f->ring, N), N);
		assert_int_equal(bh_uring_reap(f->t, in_order_cqe, &o), N);
		assert_int_equal(o.next, N);
		assert_int_equal(in_flight(f->bh), 0);
		assert_int_equal(tstats(f->t).finished, (uint64_t)N * (round + 1u));
	}
	fix_free(f);
}

/* bh_uring_track_batch given two bulkheads' batches interleaved, with one op
 * whose SQE the caller retagged in the middle: the batch's fast run stops
 * at each op that does not follow the one last sealed and goes on after
 * it; every op but the retagged one is tracked and counted once, the
 * retagged one is refused alone. */
static void test_track_batch_resumes(void **state)
{
	enum { N = 8 };
	struct fix *f = fix_new(64, 0, 8, 0, 0);
	bulkhead_t *other = make_bh(2 * N, 0, 0);
	struct bh_uring_op ops[2 * N] = { { 0 } }, *po[2 * N], *order[2 * N];
	struct io_uring_sqe *sqes[2 * N];
	struct tally ty = { .base = ops };
	uint64_t started = tstats(f->t).started, refused = tstats(f->t).refused;

	(void)state;
	for (int i = 0; i < 2 * N; i++)
		po[i] = &ops[i];
	assert_int_equal(bh_uring_get_batch(f->t, po, N, f->bh, 1, sqes), N);
	assert_int_equal(bh_uring_get_batch(f->t, po + N, N, other, 2, sqes + N), N);
	for (int i = 0; i < 2 * N; i++)
		io_uring_prep_nop(sqes[i]);
	io_uring_sqe_set_data64(sqes[N + 5], 99); /* the caller's now */
	/* 0..3, 8..11, 4..7, 12..15: each half of a batch follows its own */
	for (int i = 0; i < N / 2; i++) {
		order[i] = po[i];
		order[N / 2 + i] = po[N + i];
		order[N + i] = po[N / 2 + i];
		order[N + N / 2 + i] = po[N + N / 2 + i];
	}
	assert_int_equal(bh_uring_track_batch(f->t, order, 2 * N), -ECANCELED);
	assert_int_equal(tstats(f->t).started - started, 2 * N - 1);
	assert_int_equal(tstats(f->t).refused - refused, 1);
	assert_false(bh_uring_op_busy(&ops[N + 5]));
	assert_int_equal(in_flight(f->bh), N);
	assert_int_equal(stats_of(other).in_flight, 2 * (N - 1));
	assert_int_equal(io_uring_submit_and_wait(&f->ring, 2 * N), 2 * N);
	assert_int_equal(bh_uring_reap(f->t, count_cqe, &ty), 2 * N);
	assert_int_equal(ty.done, 2 * N - 1); /* the refused op's NOP is a helper */
	assert_int_equal(ty.seen[N + 5], 0);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(stats_of(other).in_flight, 0);
	assert_int_equal(stats_of(other).over_released, 0);
	fix_free(f);
	bh_destroy(other);
}

/* bh_uring_get_chains: many chains in one update of the bulkhead, each op
 * its nr consecutive SQEs, sealed by bh_uring_track_batch (which links
 * each chain) and reaped in one release; real pipe writes and reads, so
 * the links are the kernel's to honour. A record in use ends the batch and
 * the permits of the ops it could not arm go back; the SQ's room bounds
 * the count (one SQE left free); bad input takes nothing. */
static void test_chains_in_one_update(void **state)
{
	enum { N = 6, NR = 2 };
	struct fix *f = fix_new(16, 0, 100, 0, 0);
	struct bh_uring_op ops[N + 2] = { { 0 } }, *po[N + 2];
	struct io_uring_sqe *sqes[(N + 2) * NR];
	struct tally ty = { .base = ops, .bh = f->bh };
	char in[N] = { 0 };
	int p[2];

	(void)state;
	make_pipe(p);
	for (int i = 0; i < N + 2; i++)
		po[i] = &ops[i];
	assert_int_equal(bh_uring_get_chains(f->t, po, N, f->bh, 3, NR, sqes), N);
	assert_int_equal(in_flight(f->bh), 3 * N);
	assert_int_equal(stats_of(f->bh).acquired, 1);
	for (int i = 0; i < N; i++) {
		io_uring_prep_write(sqes[i * NR], p[1], &"abcdef"[i], 1, 0);
		io_uring_prep_read(sqes[i * NR + 1], p[0], &in[i], 1, 0);
	}
	assert_int_equal(bh_uring_track_batch(f->t, po, N), 0);
	for (int i = 0; i < N; i++) {
		assert_true(sqes[i * NR]->flags & IOSQE_IO_LINK);
		assert_false(sqes[i * NR + 1]->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK));
	}
	assert_int_equal(tstats(f->t).started, N);
	assert_int_equal(io_uring_submit_and_wait(&f->ring, N * NR), N * NR);
	assert_int_equal(bh_uring_reap(f->t, count_cqe, &ty), N * NR);
	assert_int_equal(ty.more, N);
	assert_int_equal(ty.done, N);
	assert_int_equal(ty.in_flight_at_done, 0);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(stats_of(f->bh).released, 1);
	assert_memory_equal(in, "abcdef", N); /* each read after its own write */

	/* 16 SQEs, one kept free: 7 chains of 2 at most */
	for (int i = 0; i < N + 2; i++)
		memset(&ops[i], 0, sizeof(ops[i]));
	assert_int_equal(bh_uring_get_chains(f->t, po, N + 2, f->bh, 1, NR, sqes), 7);
	assert_int_equal(in_flight(f->bh), 7);
	assert_int_equal(io_uring_sq_space_left(&f->ring), 2);
	assert_int_equal(bh_uring_get_chains(f->t, &po[7], 1, f->bh, 1, 2, sqes), -EAGAIN);
	for (int i = 0; i < 7 * NR; i++)
		io_uring_prep_nop(sqes[i]);
	assert_int_equal(bh_uring_track_batch(f->t, po, 7), 0);
	memset(&ty, 0, sizeof(ty));
	reap_done(f, &ty, 7);
	assert_int_equal(in_flight(f->bh), 0);

	/* a record in use ends the batch; the permits taken for it go back
	 * (each call's SQEs prepared before the next call reuses sqes) */
	assert_int_equal(bh_uring_get_chains(f->t, &po[1], 1, f->bh, 1, 3, sqes), 1);
	for (int i = 0; i < 3; i++)
		io_uring_prep_nop(sqes[i]);
	assert_int_equal(bh_uring_get_chains(f->t, po, 3, f->bh, 1, 3, sqes), 1);
	assert_int_equal(in_flight(f->bh), 2);
	for (int i = 0; i < 3; i++)
		io_uring_prep_nop(sqes[i]);
	assert_int_equal(bh_uring_track_batch(f->t, po, 2), 0);
	assert_int_equal(tstats(f->t).refused, 0);
	assert_int_equal(io_uring_sq_space_left(&f->ring), 16 - 6);

	/* bad input: nothing taken */
	assert_int_equal(bh_uring_get_chains(f->t, &po[2], 1, f->bh, 1, 0, sqes), -EINVAL);
	assert_int_equal(bh_uring_get_chains(f->t, &po[2], 1, f->bh, 1, BH_URING_CHAIN_MAX + 1,
					     sqes), -EINVAL);
	assert_int_equal(bh_uring_get_chains(f->t, &po[2], 0, f->bh, 1, 2, sqes), -EINVAL);
	assert_int_equal(bh_uring_get_chains(NULL, &po[2], 1, f->bh, 1, 2, sqes), -EINVAL);
	assert_int_equal(bh_uring_get_chains(f->t, &po[2], 1, f->bh, 1, 2, NULL), -EINVAL);
	assert_int_equal(in_flight(f->bh), 2);
	memset(&ty, 0, sizeof(ty));
	reap_done(f, &ty, 2);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(stats_of(f->bh).over_released, 0);
	close_pipe(p);
	fix_free(f);
}

/* Chains across the end of the SQ ring, a bulkhead that admits fewer
 * chains than asked (one rejection counted per chain left out, the SQ
 * tail moved by the chains armed only), and chains submitted before they
 * were sealed (-EALREADY: tracked by their CQEs as they are). */
static void test_chains_wrap_and_partial(void **state)
{
	struct fix *f = fix_new(8, 0, 2, 0, 0);
	struct bh_uring_op ops[3] = { { 0 } }, *po[3] = { &ops[0], &ops[1], &ops[2] };
	struct io_uring_sqe *sqes[6];
	struct tally ty = { .base = ops, .bh = f->bh };
	unsigned tail;

	(void)state;
	for (int i = 0; i < 5; i++) { /* move the SQ on: the next chains wrap */
		struct io_uring_sqe *own = io_uring_get_sqe(&f->ring);

		io_uring_prep_nop(own);
		own->user_data = 9;
	}
	assert_int_equal(io_uring_submit_and_wait(&f->ring, 5), 5);
	assert_int_equal(bh_uring_reap(f->t, count_cqe, &ty), 5);
	assert_int_equal(ty.foreign, 5);
	tail = f->ring.sq.sqe_tail;

	assert_int_equal(bh_uring_get_chains(f->t, po, 3, f->bh, 1, 2, sqes), 2);
	assert_int_equal(tstats(f->t).rejected, 1);
	assert_int_equal(f->ring.sq.sqe_tail, tail + 4);
	assert_int_equal(in_flight(f->bh), 2);
	assert_false(bh_uring_op_busy(&ops[2]));
	assert_true(sqes[3] < sqes[2]); /* ops[1]'s second SQE is the ring's first */
	for (int i = 0; i < 4; i++)
		io_uring_prep_nop(sqes[i]);
	assert_int_equal(bh_uring_track_batch(f->t, po, 2), 0);
	assert_true(sqes[0]->flags & IOSQE_IO_LINK);
	assert_true(sqes[2]->flags & IOSQE_IO_LINK);
	assert_false(sqes[1]->flags & IOSQE_IO_LINK);
	assert_false(sqes[3]->flags & IOSQE_IO_LINK);
	memset(&ty, 0, sizeof(ty));
	ty.base = ops;
	reap_done(f, &ty, 2);
	assert_int_equal(ty.more, 2);
	assert_int_equal(in_flight(f->bh), 0);

	/* submitted before sealing: tracked unchecked, unlinked */
	assert_int_equal(bh_uring_get_chains(f->t, po, 1, f->bh, 1, 2, sqes), 1);
	io_uring_prep_nop(sqes[0]);
	io_uring_prep_nop(sqes[1]);
	submit(f, 2);
	assert_int_equal(bh_uring_track_batch(f->t, po, 1), -EALREADY);
	assert_true(bh_uring_op_busy(&ops[0]));
	assert_int_equal(in_flight(f->bh), 1);
	memset(&ty, 0, sizeof(ty));
	ty.base = ops;
	reap_done(f, &ty, 1);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(tstats(f->t).refused, 1);
	fix_free(f);
}

static void test_foreign_cqes_pass_through(void **state)
{
	struct fix *f = fix_new(8, 0, 2, 0, 0);
	struct bh_uring_op op = { 0 }, *got = &op;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&f->ring);
	struct tally ty = { 0 };

	(void)state;
	io_uring_prep_nop(sqe);
	sqe->user_data = 0xb3ull << 56; /* close to the tag, not it */
	submit(f, 1);
	assert_int_equal(feed_next(f, &got), BH_URING_FOREIGN);
	assert_null(got);
	sqe = io_uring_get_sqe(&f->ring);
	io_uring_prep_nop(sqe);
	sqe->user_data = 1;
	track_nop(f, &op);
	assert_int_equal(io_uring_submit_and_wait(&f->ring, 2), 2);
	assert_int_equal(bh_uring_reap(f->t, count_cqe, &ty), 2);
	assert_int_equal(ty.foreign, 1);
	assert_int_equal(ty.done, 1);
	fix_free(f);
}

/* Hundreds of polls on one eventfd on a ring whose CQ holds 8: one write
 * finishes them all, most CQEs land in the kernel's overflow list, and reap
 * brings every one back - each op exactly once, every permit returned. */
static void test_cq_overflow_many_in_flight(void **state)
{
	enum { N = 300 };
	struct fix *f = fix_new(8, 8, N, 0, 0);
	struct bh_uring_op *ops = calloc(N, sizeof(*ops));
	struct io_uring_sqe *sqe;
	struct tally ty = { .base = ops };
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t v = 1;

	(void)state;
	assert_non_null(ops);
	for (int i = 0; i < N; i++) {
		int r;

		while ((r = bh_uring_get_sqe(f->t, &ops[i], f->bh, 1, &sqe)) == -EAGAIN)
			assert_true(io_uring_submit(&f->ring) > 0);
		assert_int_equal(r, 0);
		io_uring_prep_poll_add(sqe, efd, POLLIN);
		assert_int_equal(bh_uring_track(f->t, &ops[i], BH_FOREVER), 0);
	}
	io_uring_submit(&f->ring);
	assert_int_equal(in_flight(f->bh), N);
	assert_int_equal(write(efd, &v, sizeof(v)), sizeof(v));
	/* all N completed at once: 8 fit, the rest overflowed */
	while (!io_uring_cq_has_overflow(&f->ring))
		sched_yield();
	while (ty.done < N) /* reap alone must bring the overflow back */
		assert_true(bh_uring_reap(f->t, count_cqe, &ty) > 0);
	assert_int_equal(ty.done, N);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(tstats(f->t).in_flight, 0);
	assert_false(io_uring_cq_has_overflow(&f->ring));
	close(efd);
	free(ops);
	fix_free(f);
}

/* ---- shutdown ------------------------------------------------------------- */

static int drain_grant_result = 1;
static void record_drain_grant(struct bh_uring_op *op, int result)
{
	(void)op;
	drain_grant_result = result;
}

/* Reads, a multishot poll, a deadline, an op of the caller's own, and an op
 * waiting for a permit: drain ends them all and reaps every CQE, handing the
 * caller's CQE and the tracked ops' CQEs to fn; then the ring may go. */
static void test_drain_at_shutdown(void **state)
{
	enum { N = 5 };
	struct fix *f = fix_new(32, 0, N + 2, 1, 0);
	struct bh_uring_op ops[N + 2] = { { 0 } }, waiter = { 0 };
	struct io_uring_sqe *sqe;
	struct tally ty = { .base = ops };
	int p[2], efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	char b[N + 2], own;

	(void)state;
	make_pipe(p);
	for (int i = 0; i < N; i++)
		track_read(f, &ops[i], p[0], &b[i], BH_FOREVER);
	assert_int_equal(bh_uring_get_sqe(f->t, &ops[N], f->bh, 1, &sqe), 0);
	io_uring_prep_poll_multishot(sqe, efd, POLLIN);
	assert_int_equal(bh_uring_track(f->t, &ops[N], BH_FOREVER), 0);
	track_read(f, &ops[N + 1], p[0], &b[N + 1], bh_now_ns() + 3600 * BH_SEC);
	sqe = io_uring_get_sqe(&f->ring);
	io_uring_prep_read(sqe, p[0], &own, 1, 0);
	sqe->user_data = 42;
	assert_int_equal(bh_uring_wait(f->t, &waiter, f->bh, 1, record_drain_grant), 1);
	submit(f, N + 5); /* + the timeout + own read + the wake-up poll */
	assert_int_equal(in_flight(f->bh), N + 2);
	assert_int_equal(stats_of(f->bh).queued, 1);

	assert_int_equal(bh_uring_drain(f->t, BH_FOREVER, count_cqe, &ty), 0);
	assert_int_equal(drain_grant_result, -ECANCELED);
	assert_int_equal(ty.done, N + 2);
	assert_int_equal(ty.foreign, 1);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(stats_of(f->bh).queued, 0);
	struct bh_uring_stats st = tstats(f->t);
	assert_int_equal(st.in_flight + st.helpers + st.waiting, 0);
	assert_int_equal(bh_uring_wait(f->t, &waiter, f->bh, 1, record_drain_grant), -ESHUTDOWN);
	assert_int_equal(bh_uring_get_sqe(f->t, &ops[0], f->bh, 1, &sqe), -ESHUTDOWN);
	assert_int_equal(io_uring_sq_ready(&f->ring), 0);
	close_pipe(p);
	close(efd);
	fix_free(f);
}

/* The same with CQ overflow: 200 reads on a ring whose CQ holds 4. */
static void test_drain_with_overflow(void **state)
{
	enum { N = 200 };
	struct fix *f = fix_new(4, 4, N, 0, 0);
	struct bh_uring_op *ops = calloc(N, sizeof(*ops));
	struct io_uring_sqe *sqe;
	struct tally ty = { .base = ops };
	int p[2];
	char b;

	(void)state;
	assert_non_null(ops);
	make_pipe(p);
	for (int i = 0; i < N; i++) {
		int r;

		while ((r = bh_uring_get_sqe(f->t, &ops[i], f->bh, 1, &sqe)) == -EAGAIN)
			assert_true(io_uring_submit(&f->ring) > 0);
		assert_int_equal(r, 0);
		io_uring_prep_read(sqe, p[0], &b, 1, 0);
		assert_int_equal(bh_uring_track(f->t, &ops[i], BH_FOREVER), 0);
	}
	assert_int_equal(bh_uring_destroy(f->t), -EBUSY); /* not while in flight */
	assert_int_equal(bh_uring_drain(f->t, bh_now_ns() + 60 * BH_SEC, count_cqe, &ty), 0);
	assert_int_equal(ty.done, N);
	assert_int_equal(in_flight(f->bh), 0);
	close_pipe(p);
	free(ops);
	fix_free(f);
}

/* ---- waiting for permits without blocking --------------------------------- */

/* Grant callbacks run on the ring's thread, blocking waiters on theirs:
 * one log, under a lock, in the order things happened. */
static pthread_mutex_t grant_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bh_uring_op *grant_order[8];
static int grant_results[8];
static unsigned ngrants;

static void record_grant(struct bh_uring_op *op, int result)
{
	pthread_mutex_lock(&grant_lock);
	if (ngrants < 8) {
		grant_order[ngrants] = op;
		grant_results[ngrants] = result;
	}
	ngrants++;
	pthread_mutex_unlock(&grant_lock);
}

static unsigned grants(void)
{
	unsigned n;

	pthread_mutex_lock(&grant_lock);
	n = ngrants;
	pthread_mutex_unlock(&grant_lock);
	return n;
}

static void grants_reset(void)
{
	pthread_mutex_lock(&grant_lock);
	ngrants = 0;
	memset(grant_order, 0, sizeof(grant_order));
	pthread_mutex_unlock(&grant_lock);
}

/* Reap until n more grant callbacks ran, blocking in the kernel between. */
static void reap_grants(struct fix *f, unsigned n)
{
	unsigned want = grants() + n;

	while (grants() < want) {
		assert_true(io_uring_submit_and_wait(&f->ring, 1) >= 0);
		assert_true(bh_uring_reap(f->t, NULL, NULL) >= 0);
	}
	assert_int_equal(grants(), want);
}

/* Threads other than the test's report failures instead of asserting
 * (cmocka's longjmp belongs to the main thread). */
static _Atomic int thread_failed_line;
#define T_CHECK(c)                                                          \
	do {                                                                \
		if (!(c)) {                                                 \
			atomic_store(&thread_failed_line, __LINE__);        \
			return NULL;                                        \
		}                                                           \
	} while (0)

static void *blocking_waiter(void *arg)
{
	bulkhead_t *bh = arg;

	T_CHECK(bh_acquire(bh, 1, BH_FOREVER) == 0);
	record_grant(NULL, 0); /* NULL: the blocking waiter */
	T_CHECK(bh_release(bh, 1) == 0);
	return NULL;
}

static void *release_one(void *arg)
{
	T_CHECK(bh_release(arg, 1) == 0);
	return NULL;
}

/* Async waiters share the FIFO with blocking ones; a cancelled one is never
 * told anything; grants made on other threads wake the ring. */
static void test_waiters_fifo_and_cancel(void **state)
{
	struct fix *f = fix_new(16, 0, 1, 8, BH_FAIR);
	struct bh_uring_op hold = { 0 }, a = { 0 }, b = { 0 }, c = { 0 };
	pthread_t w;
	int p[2];
	char ch;

	(void)state;
	grants_reset();
	make_pipe(p);
	track_read(f, &hold, p[0], &ch, BH_FOREVER);
	submit(f, 1);
	assert_int_equal(bh_uring_wait(f->t, &a, f->bh, 1, record_grant), 1);
	assert_int_equal(bh_uring_wait(f->t, &b, f->bh, 1, record_grant), 1);
	assert_int_equal(pthread_create(&w, NULL, blocking_waiter, f->bh), 0);
	await_queued(f->bh, 3);
	assert_int_equal(bh_uring_wait(f->t, &c, f->bh, 1, record_grant), 1);
	assert_int_equal(tstats(f->t).waiting, 3);
	assert_int_equal(bh_uring_cancel(f->t, &b), 0);
	assert_int_equal(stats_of(f->bh).queued, 3);
	assert_int_equal(tstats(f->t).waiting, 2);

	assert_int_equal(write(p[1], "x", 1), 1); /* the holder finishes... */
	reap_grants(f, 1);                        /* ...and a is told, here */
	assert_ptr_equal(grant_order[0], &a);
	assert_int_equal(grant_results[0], 0);
	assert_int_equal(in_flight(f->bh), 1);
	assert_int_equal(tstats(f->t).held, 1);
	track_nop(f, &a); /* the granted permit, no new acquire */
	assert_int_equal(in_flight(f->bh), 1);
	assert_int_equal(tstats(f->t).held, 0);
	/* a's NOP finishes -> the blocking waiter runs -> its release, on its
	 * thread, grants c, whose wake-up arrives through the ring */
	reap_grants(f, 2);
	assert_null(grant_order[1]);
	assert_ptr_equal(grant_order[2], &c);
	pthread_join(w, NULL);
	assert_int_equal(atomic_load(&thread_failed_line), 0);
	assert_int_equal(grants(), 3); /* b never */
	assert_int_equal(bh_uring_cancel(f->t, &c), 0); /* gives the held permit back */
	assert_int_equal(in_flight(f->bh), 0);
	close_pipe(p);
	fix_free(f);
}

/* A grant lands (callback run, wake pending) before the owner cancels: the
 * cancel finds the op granted, gives the permits back, and the callback is
 * never called - on this thread or when the wake-up CQE arrives. */
static void test_cancel_racing_grant(void **state)
{
	for (int how = 0; how < 3; how++) {
		struct fix *f = fix_new(8, 0, 1, 4, 0);
		struct bh_uring_op op = { 0 };

		(void)state;
		grants_reset();
		assert_int_equal(bh_try_acquire(f->bh, 1), 0);
		assert_int_equal(bh_uring_wait(f->t, &op, f->bh, 1, record_grant), 1);
		submit(f, 1); /* the wake-up poll */
		if (how == 0) {
			assert_int_equal(bh_release(f->bh, 1), 0); /* grants op, here */
			assert_int_equal(in_flight(f->bh), 1);
		} else if (how == 1) {
			pthread_t th;

			assert_int_equal(pthread_create(&th, NULL, release_one, f->bh), 0);
			pthread_join(th, NULL);
			assert_int_equal(in_flight(f->bh), 1);
		} else {
			assert_int_equal(bh_close(f->bh), 0); /* fails op: -ESHUTDOWN */
		}
		assert_int_equal(bh_uring_cancel(f->t, &op), 0);
		assert_int_equal(in_flight(f->bh), how == 2 ? 1 : 0);
		assert_int_equal(stats_of(f->bh).over_released, 0);
		assert_int_equal(tstats(f->t).waiting, 0);
		/* the wake-up CQE is there; it must tell nobody */
		struct io_uring_cqe *cqe;

		assert_int_equal(io_uring_wait_cqe(&f->ring, &cqe), 0);
		assert_true(bh_uring_reap(f->t, NULL, NULL) >= 1);
		assert_int_equal(grants(), 0);
		assert_int_equal(atomic_load(&thread_failed_line), 0);
		if (how == 2)
			assert_int_equal(bh_release(f->bh, 1), 0);
		fix_free(f);
	}
}

static void test_wait_free_permits_and_results(void **state)
{
	struct fix *f = fix_new(8, 0, 2, 4, 0);
	struct bh_uring_op op = { 0 }, big = { 0 };
	struct io_uring_sqe *sqe;

	(void)state;
	grants_reset();
	/* free permits: held at once, no callback */
	assert_int_equal(bh_uring_wait(f->t, &op, f->bh, 1, record_grant), 0);
	assert_int_equal(in_flight(f->bh), 1);
	assert_int_equal(tstats(f->t).held, 1);
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 2, &sqe), -EINVAL); /* not what it holds */
	assert_int_equal(bh_uring_cancel(f->t, &op), 0);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(tstats(f->t).held, 0);
	/* a shrink below n fails the waiter with -EINVAL */
	assert_int_equal(bh_try_acquire(f->bh, 2), 0);
	assert_int_equal(bh_uring_wait(f->t, &big, f->bh, 2, record_grant), 1);
	submit(f, 1);
	assert_int_equal(bh_set_limit(f->bh, 1), 0);
	reap_grants(f, 1);
	assert_ptr_equal(grant_order[0], &big);
	assert_int_equal(grant_results[0], -EINVAL);
	assert_int_equal(bh_uring_cancel(f->t, &big), -ENOENT); /* idle */
	/* close fails it with -ESHUTDOWN */
	assert_int_equal(bh_set_limit(f->bh, 2), 0);
	assert_int_equal(bh_uring_wait(f->t, &op, f->bh, 1, record_grant), 1);
	assert_int_equal(bh_close(f->bh), 0);
	reap_grants(f, 1);
	assert_int_equal(grant_results[1], -ESHUTDOWN);
	assert_int_equal(bh_release(f->bh, 2), 0);
	fix_free(f);
}

/* One release grants three waiters at once: their callbacks run oldest
 * first, from one wake-up. */
static void test_grants_delivered_oldest_first(void **state)
{
	struct fix *f = fix_new(8, 0, 3, 8, BH_FAIR);
	struct bh_uring_op w[3] = { { 0 } };

	(void)state;
	grants_reset();
	assert_int_equal(bh_try_acquire(f->bh, 3), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(bh_uring_wait(f->t, &w[i], f->bh, 1, record_grant), 1);
	assert_int_equal(bh_release(f->bh, 3), 0);
	reap_grants(f, 3);
	for (int i = 0; i < 3; i++) {
		assert_ptr_equal(grant_order[i], &w[i]);
		assert_int_equal(bh_uring_cancel(f->t, &w[i]), 0); /* held: give back */
	}
	assert_int_equal(in_flight(f->bh), 0);
	fix_free(f);
}

/* The wake-up poll ends (here: cancelled by the caller's own cancel-all; in
 * life: CQ overflow). The tracker arms a new one, and a grant made before
 * the new one reaches the kernel is still told: the eventfd stays readable
 * and a poll armed on it fires at once. */
static void test_wake_poll_rearmed(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 4, 0);
	struct bh_uring_op op = { 0 };
	struct io_uring_sqe *sqe;
	struct tally ty = { 0 };

	(void)state;
	grants_reset();
	assert_int_equal(bh_try_acquire(f->bh, 1), 0);
	assert_int_equal(bh_uring_wait(f->t, &op, f->bh, 1, record_grant), 1);
	submit(f, 1);
	sqe = io_uring_get_sqe(&f->ring);
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
	sqe->user_data = 9;
	assert_int_equal(io_uring_submit_and_wait(&f->ring, 2), 1);
	assert_int_equal(bh_uring_reap(f->t, count_cqe, &ty), 2); /* the poll's end + ours */
	assert_int_equal(ty.foreign, 1);
	assert_int_equal(io_uring_sq_ready(&f->ring), 1); /* a new poll, not yet submitted */
	assert_int_equal(tstats(f->t).helpers, 1);
	assert_int_equal(bh_release(f->bh, 1), 0); /* grant while no poll is armed */
	reap_grants(f, 1);
	assert_ptr_equal(grant_order[0], &op);
	assert_int_equal(grant_results[0], 0);
	assert_int_equal(bh_uring_cancel(f->t, &op), 0);
	fix_free(f);
}

/* op waits for the one permit of f->bh (held), the wake-up poll in flight;
 * then the caller's own cancel-all ends the poll. */
static void end_wake_poll(struct fix *f, struct bh_uring_op *op)
{
	struct io_uring_sqe *sqe;

	grants_reset();
	assert_int_equal(bh_try_acquire(f->bh, 1), 0);
	assert_int_equal(bh_uring_wait(f->t, op, f->bh, 1, record_grant), 1);
	submit(f, 1);
	sqe = io_uring_get_sqe(&f->ring);
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
	sqe->user_data = 9;
	assert_int_equal(io_uring_submit_and_wait(&f->ring, 2), 1);
}

/* nr reads of the caller's own on the idle pipe p, queued, unsubmitted. */
static void queue_reads(struct fix *f, int p[2], char *b, int nr)
{
	for (int i = 0; i < nr; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&f->ring);

		io_uring_prep_read(sqe, p[0], &b[i], 1, 0);
		sqe->user_data = 100 + (uint64_t)i;
	}
}

/* The grant of op (f->bh's permit, released now) reaches the owner through
 * a CQE after the caller's submit. */
static void grant_wakes_owner(struct fix *f, struct bh_uring_op *op)
{
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts = { .tv_nsec = 300 * 1000 * 1000 };

	assert_int_equal(bh_release(f->bh, 1), 0);
	assert_int_equal(io_uring_wait_cqe_timeout(&f->ring, &cqe, &ts), 0);
	reap_grants(f, 1);
	assert_int_equal(bh_uring_cancel(f->t, op), 0);
}

/* The wake-up poll ends (a cancel of the caller's own, or CQ overflow)
 * while the caller's SQEs fill the SQ: the reap cannot arm it again
 * without an SQE, and the caller's submit that follows would go without
 * it, so a grant would wake nobody. The reap submits the caller's SQEs
 * first and arms the poll behind them. */
static void test_wake_poll_rearm_with_full_sq(void **state)
{
	struct fix *f = fix_new(4, 0, 1, 4, 0);
	struct bh_uring_op op = { 0 };
	int p[2];
	char b[4];

	(void)state;
	make_pipe(p);
	end_wake_poll(f, &op);
	queue_reads(f, p, b, 4); /* the caller's reads fill the SQ */
	assert_int_equal(bh_uring_reap(f->t, NULL, NULL), 2); /* the poll's end */
	io_uring_submit(&f->ring);
	grant_wakes_owner(f, &op);
	fix_free(f);
	close_pipe(p);
}

/* ...but not while an op of the tracker's is taken and not yet tracked:
 * its SQE may not be prepared, so the reap leaves the SQ to the caller, and
 * the reap after the caller's submit arms the poll. */
static void test_wake_poll_rearm_waits_for_untracked_op(void **state)
{
	struct fix *f = fix_new(4, 0, 1, 4, 0);
	bulkhead_t *other = make_bh(1, 0, 0);
	struct bh_uring_op op = { 0 }, armed = { 0 };
	struct io_uring_sqe *mine;
	int p[2];
	char b[4];

	(void)state;
	make_pipe(p);
	end_wake_poll(f, &op);
	assert_int_equal(bh_uring_get_sqes(f->t, &armed, other, 1, 1, &mine), 0);
	queue_reads(f, p, b, 3); /* the caller's own SQEs fill the rest */
	assert_int_equal(io_uring_sq_space_left(&f->ring), 0);
	assert_int_equal(bh_uring_reap(f->t, NULL, NULL), 2); /* the poll's end */
	assert_int_equal(io_uring_sq_ready(&f->ring), 4);  /* nothing submitted */
	io_uring_prep_nop(mine);
	assert_int_equal(bh_uring_track(f->t, &armed, BH_FOREVER), 0);
	io_uring_submit(&f->ring);
	assert_int_equal(bh_uring_reap(f->t, NULL, NULL), 1); /* the NOP; arms the poll */
	io_uring_submit(&f->ring);
	grant_wakes_owner(f, &op);
	fix_free(f);
	close_pipe(p);
	assert_int_equal(in_flight(other), 0);
	bh_destroy(other);
}

/* The same, with an op whose own CQE never comes without help (a read on
 * an idle pipe): no reap follows its track, so the track arms the poll
 * (the SQ is full: the caller's SQEs go first) and the grant wakes the
 * owner. */
static void test_wake_poll_rearmed_by_track(void **state)
{
	struct fix *f = fix_new(4, 0, 1, 4, 0);
	bulkhead_t *other = make_bh(1, 0, 0);
	struct bh_uring_op op = { 0 }, armed = { 0 };
	struct io_uring_sqe *mine;
	int p[2], q[2];
	char b[4], c;

	(void)state;
	make_pipe(p);
	make_pipe(q);
	end_wake_poll(f, &op);
	assert_int_equal(bh_uring_get_sqes(f->t, &armed, other, 1, 1, &mine), 0);
	queue_reads(f, p, b, 3);
	assert_int_equal(bh_uring_reap(f->t, NULL, NULL), 2); /* the poll's end */
	assert_int_equal(tstats(f->t).helpers, 0);	      /* not armed: mine is not ready */
	io_uring_prep_read(mine, q[0], &c, 1, 0);
	assert_int_equal(bh_uring_track(f->t, &armed, BH_FOREVER), 0);
	assert_int_equal(tstats(f->t).helpers, 1); /* armed now, behind the SQEs it submitted */
	io_uring_submit(&f->ring);
	grant_wakes_owner(f, &op);
	fix_free(f);
	close_pipe(p);
	close_pipe(q);
	assert_int_equal(in_flight(other), 0);
	bh_destroy(other);
}

/* test_wake_poll_rearmed_by_track on an SQPOLL ring of the given size: the
 * track finds the SQ full and submits, but io_uring_submit only hands the
 * SQEs to the kernel's SQ thread, which frees their room when it takes
 * them: the track waits for that room, then arms the poll. The kernel's
 * SQ_WAIT returns once the SQ thread has taken the SQEs, before it
 * publishes the head after the whole batch: a long batch (a big SQ full of
 * reads, each arming a poll) makes that window wide, where one SQ_WAIT
 * alone left the poll unarmed. */
static void rearmed_by_track_sqpoll(unsigned entries)
{
	struct fix *f = calloc(1, sizeof(*f));
	bulkhead_t *other = make_bh(1, 0, 0);
	struct bh_uring_op op = { 0 }, armed = { 0 };
	struct io_uring_sqe *mine;
	int p[2], q[2], r;
	char *b = malloc(entries), c;

	assert_non_null(f);
	assert_non_null(b);
	r = ring_up(&f->ring, entries, 0, IORING_SETUP_SQPOLL);
	if (r == -EINVAL || r == -EPERM) {
		free(f);
		free(b);
		skip();
	}
	assert_int_equal(r, 0);
	assert_int_equal(bh_uring_create(&f->ring, 0, &f->t), 0);
	f->bh = make_bh(1, 4, 0);
	make_pipe(p);
	make_pipe(q);
	{ /* end_wake_poll, counting CQEs instead of submit's (SQPOLL) */
		struct io_uring_sqe *sqe;

		grants_reset();
		assert_int_equal(bh_try_acquire(f->bh, 1), 0);
		assert_int_equal(bh_uring_wait(f->t, &op, f->bh, 1, record_grant), 1);
		io_uring_submit(&f->ring);
		sqe = io_uring_get_sqe(&f->ring);
		io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
		sqe->user_data = 9;
		io_uring_submit(&f->ring);
		while (io_uring_cq_ready(&f->ring) < 2)
			assert_true(io_uring_submit_and_wait(&f->ring, 1) >= 0);
		while (io_uring_sq_space_left(&f->ring) < entries)
			io_uring_sqring_wait(&f->ring); /* the SQ is empty again */
	}
	assert_int_equal(bh_uring_get_sqes(f->t, &armed, other, 1, 1, &mine), 0);
	queue_reads(f, p, b, (int)entries - 1);
	assert_int_equal(io_uring_sq_space_left(&f->ring), 0);
	assert_int_equal(bh_uring_reap(f->t, NULL, NULL), 2); /* the poll's end */
	assert_int_equal(tstats(f->t).helpers, 0);
	io_uring_prep_read(mine, q[0], &c, 1, 0);
	assert_int_equal(bh_uring_track(f->t, &armed, BH_FOREVER), 0);
	assert_int_equal(tstats(f->t).helpers, 1); /* armed */
	io_uring_submit(&f->ring);
	grant_wakes_owner(f, &op);
	fix_free(f);
	free(b);
	close_pipe(p);
	close_pipe(q);
	assert_int_equal(in_flight(other), 0);
	bh_destroy(other);
}

static void test_wake_poll_rearmed_by_track_sqpoll(void **state)
{
	(void)state;
	rearmed_by_track_sqpoll(4);
}

static void test_wake_poll_rearmed_by_track_sqpoll_long_batch(void **state)
{
	(void)state;
	for (int i = 0; i < 20; i++)
		rearmed_by_track_sqpoll(256);
}

/* A reap between an op's get and its track arms the poll at once, behind
 * the op (a deadline for the op is then refused: the poll's SQE is one
 * taken after it), so that the caller's next submit carries it whatever the
 * caller does with the op: here it submits the op before tracking it
 * (allowed: -EALREADY), and the grant still wakes the owner. */
static void test_wake_poll_rearmed_before_track(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 4, 0);
	bulkhead_t *other = make_bh(2, 0, 0);
	struct bh_uring_op op = { 0 }, armed = { 0 };
	struct io_uring_sqe *mine;
	int q[2];
	char c;

	(void)state;
	make_pipe(q);
	end_wake_poll(f, &op);
	assert_int_equal(bh_uring_get_sqes(f->t, &armed, other, 1, 1, &mine), 0);
	io_uring_prep_read(mine, q[0], &c, 1, 0); /* never completes by itself */
	assert_int_equal(bh_uring_reap(f->t, NULL, NULL), 2); /* the poll's end */
	assert_int_equal(tstats(f->t).helpers, 1);	      /* armed again, behind mine */
	assert_true(io_uring_submit(&f->ring) >= 2);	      /* mine, early, and the poll */
	grant_wakes_owner(f, &op);
	assert_int_equal(bh_uring_track(f->t, &armed, BH_FOREVER), -EALREADY);
	assert_int_equal(bh_uring_cancel(f->t, &armed), 0);
	fix_free(f);
	close_pipe(q);
	assert_int_equal(in_flight(other), 0);
	bh_destroy(other);
}

/* A wait between an op's get and its track takes the poll's SQE at once,
 * so that the caller's next submit carries it, whatever the caller does
 * with that op: here it submits the op before tracking it (allowed: the
 * track says -EALREADY), and the grant still wakes the owner. (The poll's
 * SQE is one taken after the op: a deadline for it would be refused.) */
static void test_wait_between_get_and_track(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 4, 0);
	bulkhead_t *other = make_bh(2, 0, 0);
	struct bh_uring_op op = { 0 }, armed = { 0 };
	struct io_uring_sqe *mine;
	int q[2];
	char c;

	(void)state;
	grants_reset();
	make_pipe(q);
	assert_int_equal(bh_try_acquire(f->bh, 1), 0);
	assert_int_equal(bh_uring_get_sqes(f->t, &armed, other, 1, 1, &mine), 0);
	io_uring_prep_read(mine, q[0], &c, 1, 0); /* never completes by itself */
	assert_int_equal(bh_uring_wait(f->t, &op, f->bh, 1, record_grant), 1);
	assert_int_equal(tstats(f->t).helpers, 1); /* the poll, in the SQ now */
	assert_true(io_uring_submit(&f->ring) >= 2); /* the op, early, and the poll */
	grant_wakes_owner(f, &op);
	assert_int_equal(bh_uring_track(f->t, &armed, BH_FOREVER), -EALREADY);
	assert_int_equal(bh_uring_cancel(f->t, &armed), 0);
	fix_free(f);
	close_pipe(q);
	assert_int_equal(in_flight(other), 0);
	bh_destroy(other);
}

/* Drain follows no stale user_data: an SQE the caller took and did not
 * prepare still holds what a past lap left there, here the user_data of an
 * op of the tracker's that finished on that slot and is now armed on
 * another ring. Drain must leave it alone. */
static void test_drain_ignores_stale_user_data(void **state)
{
	struct fix *a = fix_new(2, 0, 4, 0, 0), *b = fix_new(8, 0, 4, 0, 0);
	struct bh_uring_op x = { 0 };
	struct io_uring_sqe *sqe;
	struct tally ty = { 0 };

	(void)state;
	assert_int_equal(bh_uring_get_sqe(a->t, &x, a->bh, 1, &sqe), 0); /* slot 0 of a */
	io_uring_prep_nop(sqe);
	assert_int_equal(bh_uring_track(a->t, &x, BH_FOREVER), 0);
	submit(a, 1);
	reap_done(a, &ty, 1);
	sqe = io_uring_get_sqe(&a->ring); /* slot 1: the caller's, a NOP */
	io_uring_prep_nop(sqe);
	sqe->user_data = 9;
	submit(a, 1);
	assert_int_equal(bh_uring_get_sqe(b->t, &x, b->bh, 1, &sqe), 0); /* x armed on b */
	io_uring_prep_nop(sqe);
	sqe = io_uring_get_sqe(&a->ring); /* slot 0 again: x's user_data still there */
	assert_int_equal(sqe->user_data >> 56, BH_URING_UD_TAG);
	io_uring_prep_nop(sqe); /* prep leaves user_data alone */
	assert_int_equal(bh_uring_drain(a->t, bh_now_ns() + BH_SEC, NULL, NULL), 0);
	assert_true(bh_uring_op_busy(&x)); /* still b's, armed */
	assert_int_equal(in_flight(b->bh), 1);
	assert_int_equal(tstats(a->t).in_flight, 0);
	assert_int_equal(bh_uring_track(b->t, &x, BH_FOREVER), 0);
	submit(b, 1);
	memset(&ty, 0, sizeof(ty));
	reap_done(b, &ty, 1);
	fix_free(a);
	fix_free(b);
}

/* The wake-up poll costs an SQE only when an op queues, one for all
 * waiters, and reaches the kernel only with the caller's submit: a grant
 * made before that wakes nobody; after it, the poll fires at once. */
static void test_wake_poll_sqe_only_when_queued(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 4, 0);
	struct bh_uring_op held = { 0 }, a = { 0 }, b = { 0 };
	struct __kernel_timespec ts = { 0, 50 * 1000 * 1000 };
	struct io_uring_cqe *cqe;

	(void)state;
	grants_reset();
	assert_int_equal(bh_uring_wait(f->t, &held, f->bh, 1, record_grant), 0);
	assert_int_equal(io_uring_sq_ready(&f->ring), 0); /* free: no SQE spent */
	assert_int_equal(tstats(f->t).helpers, 0);
	assert_int_equal(bh_uring_wait(f->t, &a, f->bh, 1, record_grant), 1);
	assert_int_equal(io_uring_sq_ready(&f->ring), 1); /* queued: the poll */
	assert_int_equal(bh_uring_wait(f->t, &b, f->bh, 1, record_grant), 1);
	assert_int_equal(io_uring_sq_ready(&f->ring), 1); /* still one */
	assert_int_equal(tstats(f->t).helpers, 1);
	assert_int_equal(bh_uring_cancel(f->t, &held), 0); /* grants a, here */
	/* not submitted: entering the kernel, or waiting in it, posts nothing
	 * (a timed wait submits pending SQEs itself without EXT_ARG) */
	assert_true(io_uring_get_events(&f->ring) >= 0);
	assert_int_equal(io_uring_peek_cqe(&f->ring, &cqe), -EAGAIN);
	if (f->ring.features & IORING_FEAT_EXT_ARG)
		assert_int_equal(io_uring_wait_cqe_timeout(&f->ring, &cqe, &ts), -ETIME);
	assert_int_equal(io_uring_sq_ready(&f->ring), 1);
	assert_int_equal(grants(), 0);
	submit(f, 1);
	reap_grants(f, 1);
	assert_ptr_equal(grant_order[0], &a);
	assert_int_equal(grant_results[0], 0);
	assert_int_equal(bh_uring_cancel(f->t, &a), 0);
	assert_int_equal(bh_uring_cancel(f->t, &b), 0);
	assert_int_equal(in_flight(f->bh), 0);
	fix_free(f);
}

/* With the SQ full and no poll armed, a wait takes nothing: not a permit,
 * not a place in the queue. */
static void test_wait_full_sq_takes_nothing(void **state)
{
	struct fix *f = fix_new(4, 0, 1, 4, 0);
	struct bh_uring_op a = { 0 };

	(void)state;
	grants_reset();
	for (int i = 0; i < 4; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&f->ring);

		io_uring_prep_nop(sqe);
		sqe->user_data = 77;
	}
	assert_int_equal(bh_uring_wait(f->t, &a, f->bh, 1, record_grant), -EAGAIN);
	assert_false(bh_uring_op_busy(&a));
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(stats_of(f->bh).acquired, 0);
	/* and when it would have queued */
	assert_int_equal(bh_try_acquire(f->bh, 1), 0);
	assert_int_equal(bh_uring_wait(f->t, &a, f->bh, 1, record_grant), -EAGAIN);
	assert_false(bh_uring_op_busy(&a));
	assert_int_equal(stats_of(f->bh).queued, 0);
	assert_int_equal(stats_of(f->bh).rejected, 0);
	assert_int_equal(tstats(f->t).waiting, 0);
	assert_int_equal(bh_release(f->bh, 1), 0);
	submit(f, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(feed_next(f, NULL), BH_URING_FOREIGN);
	fix_free(f);
}

/* Permits granted to ops that never took an SQE - held at once by a wait,
 * or granted later and told - are given back by drain, which makes the ops
 * idle and tells them nothing; an op whose SQE was taken but not tracked is
 * submitted and reaped. Then destroy succeeds and the bulkhead's books are
 * whole. (Destroy refuses before the drain: here the wake-up poll alone
 * would make it; the next test has held permits alone.) */
static void test_held_permits_pin_tracker_until_drain(void **state)
{
	struct fix *f = fix_new(8, 0, 4, 4, 0);
	struct bh_uring_op a = { 0 }, b = { 0 }, c = { 0 };
	struct io_uring_sqe *sqe;

	(void)state;
	grants_reset();
	assert_int_equal(bh_uring_wait(f->t, &a, f->bh, 1, record_grant), 0);
	assert_int_equal(bh_try_acquire(f->bh, 3), 0);
	assert_int_equal(bh_uring_wait(f->t, &b, f->bh, 1, record_grant), 1);
	submit(f, 1); /* the wake-up poll */
	assert_int_equal(bh_release(f->bh, 1), 0);
	reap_grants(f, 1);
	assert_int_equal(grant_results[0], 0);
	assert_int_equal(bh_release(f->bh, 1), 0);
	assert_int_equal(bh_uring_get_sqe(f->t, &c, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe); /* taken, never tracked */
	assert_int_equal(tstats(f->t).held, 2);
	assert_int_equal(in_flight(f->bh), 4);

	assert_int_equal(bh_uring_destroy(f->t), -EBUSY); /* refused */
	assert_int_equal(tstats(f->t).held, 2);
	assert_int_equal(in_flight(f->bh), 4);
	assert_true(bh_uring_op_busy(&a) && bh_uring_op_busy(&b) && bh_uring_op_busy(&c));

	assert_int_equal(bh_uring_drain(f->t, BH_FOREVER, NULL, NULL), 0);
	assert_int_equal(in_flight(f->bh), 1); /* the test's own */
	assert_int_equal(tstats(f->t).held, 0);
	assert_int_equal(tstats(f->t).in_flight, 0);
	assert_int_equal(tstats(f->t).finished, 0); /* c was withdrawn: its SQE a NOP */
	assert_false(bh_uring_op_busy(&a) || bh_uring_op_busy(&b) || bh_uring_op_busy(&c));
	assert_int_equal(bh_uring_cancel(f->t, &a), -ENOENT);
	assert_int_equal(bh_uring_get_sqe(f->t, &b, f->bh, 1, &sqe), -ESHUTDOWN);
	assert_int_equal(stats_of(f->bh).over_released, 0);
	assert_int_equal(grants(), 1); /* drain tells held ops nothing */
	assert_int_equal(bh_release(f->bh, 1), 0);
	fix_free(f); /* drain again, destroy: 0 */
}

/* A reap's (or a drain's) callback may not destroy the tracker: the reap
 * goes on using it after fn returns. At the batch's last DONE the tracker
 * has nothing in flight, so only the reap itself can say no (-EINVAL, as a
 * reap or drain from within one). The tracker stays usable, and destroy
 * succeeds after the reap. */
struct destroy_in_fn {
	bh_uring_t *t;
	unsigned done;
	int r;
};

static void destroy_on_done(void *ctx, struct io_uring_cqe *cqe, int kind, struct bh_uring_op *op)
{
	struct destroy_in_fn *d = ctx;

	(void)cqe;
	(void)op;
	if (kind == BH_URING_DONE) {
		d->done++;
		d->r = bh_uring_destroy(d->t);
	}
}

/* A ring made with IORING_SETUP_IOPOLL refuses polls and timeouts: a wait
 * for permits, whose wake-up is a poll, is refused (-EOPNOTSUPP, nothing
 * queued), and so is an op with a deadline (-ECANCELED, its permit back). */
static void test_iopoll_ring_refuses_wait_and_deadline(void **state)
{
	struct io_uring ring;
	struct bh_uring_op w = { 0 }, op = { 0 };
	struct io_uring_sqe *sqe;
	bh_uring_t *t;
	bulkhead_t *bh;

	(void)state;
	if (ring_up(&ring, 8, 0, IORING_SETUP_IOPOLL) != 0)
		skip();
	assert_int_equal(bh_uring_create(&ring, 0, &t), 0);
	bh = make_bh(1, 4, 0);
	assert_int_equal(bh_uring_wait(t, &w, bh, 1, never_granted), -EOPNOTSUPP);
	assert_int_equal(stats_of(bh).queued, 0);
	assert_int_equal(tstats(t).waiting, 0);
	assert_int_equal(bh_uring_get_sqe(t, &op, bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe);
	assert_int_equal(bh_uring_track(t, &op, bh_now_ns() + BH_SEC), -ECANCELED);
	assert_int_equal(in_flight(bh), 0);
	assert_int_equal(tstats(t).refused, 1);
	assert_false(bh_uring_op_busy(&op));
	/* the neutralised SQE's CQE is the tracker's own */
	assert_int_equal(io_uring_submit(&ring), 1);
	while (tstats(t).helpers)
		assert_true(bh_uring_reap(t, NULL, NULL) >= 0);
	assert_int_equal(bh_uring_destroy(t), 0);
	io_uring_queue_exit(&ring);
	bh_destroy(bh);
}

static void test_destroy_refused_from_reap_callback(void **state)
{
	struct fix *f = fix_new(8, 0, 2, 0, 0);
	struct bh_uring_op op = { 0 };
	struct destroy_in_fn d = { .t = f->t, .r = 1 };

	(void)state;
	track_nop(f, &op);
	submit(f, 1);
	while (d.done == 0) {
		assert_true(io_uring_submit_and_wait(&f->ring, 1) >= 0);
		assert_true(bh_uring_reap(f->t, destroy_on_done, &d) >= 0);
	}
	assert_int_equal(d.r, -EINVAL);
	assert_int_equal(tstats(f->t).in_flight, 0);
	/* still usable: another op, and a drain whose callback tries again */
	track_nop(f, &op);
	submit(f, 1);
	d.done = 0;
	d.r = 1;
	assert_int_equal(bh_uring_drain(f->t, BH_FOREVER, destroy_on_done, &d), 0);
	assert_int_equal(d.done, 1);
	assert_int_equal(d.r, -EINVAL);
	assert_int_equal(in_flight(f->bh), 0);
	fix_free(f); /* destroy after the reap: 0 */
}

/* A stray (here the same CQE handed over twice) names a record that may be
 * reused or freed by now: *op is NULL, as for every kind but MORE and DONE,
 * never the stale pointer. */
static void test_complete_stray_sets_no_op(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 0, 0);
	struct bh_uring_op op = { 0 }, *got;
	struct io_uring_cqe c;

	(void)state;
	track_nop(f, &op);
	submit(f, 1);
	next_cqe(&f->ring, &c);
	assert_int_equal(feed(f, &c, &got), BH_URING_DONE);
	assert_ptr_equal(got, &op);
	got = &op;
	assert_int_equal(feed(f, &c, &got), -EINVAL);
	assert_null(got);
	assert_int_equal(tstats(f->t).strays, 1);
	assert_int_equal(in_flight(f->bh), 0);
	fix_free(f);
}

/* Drain with an op whose SQE was taken and never prepared: the slot still
 * holds the SQE of the ring's last lap (here a NOP that skips its CQE), so
 * sending it would run that instead, and post nothing. Drain withdraws the
 * op: its SQE a NOP of the tracker's, its permits back, idle. */
static void test_drain_withdraws_unprepared_op(void **state)
{
	struct fix *f = fix_new(2, 0, 2, 0, 0);
	struct bh_uring_op op = { 0 };
	struct io_uring_sqe *sqe;

	(void)state;
	for (int i = 0; i < 2; i++) { /* the caller's, one lap of the SQ */
		sqe = io_uring_get_sqe(&f->ring);
		io_uring_prep_nop(sqe);
		sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
		sqe->user_data = 9;
	}
	submit(f, 2);
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	assert_true(sqe->flags & IOSQE_CQE_SKIP_SUCCESS); /* the last lap's */
	assert_int_equal(in_flight(f->bh), 1);
	assert_int_equal(bh_uring_drain(f->t, bh_now_ns() + BH_SEC, NULL, NULL), 0);
	assert_false(bh_uring_op_busy(&op));
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(tstats(f->t).in_flight, 0);
	assert_int_equal(tstats(f->t).helpers, 0);
	fix_free(f);
}

/* A grant callback run by bh_uring_complete may not reap or drain: the
 * caller's CQE is not consumed yet, and a reap would handle it again and
 * move the CQ head past it. */
static struct fix *inner_fix;
static int inner_drain = 1, inner_reap = 1;

static void grant_then_reap(struct bh_uring_op *op, int result)
{
	record_grant(op, result);
	inner_reap = bh_uring_reap(inner_fix->t, NULL, NULL);
	inner_drain = bh_uring_drain(inner_fix->t, BH_FOREVER, NULL, NULL);
}

static void test_complete_callback_may_not_reap(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 4, 0);
	struct bh_uring_op op = { 0 };
	struct io_uring_cqe *cqe;
	unsigned head;

	(void)state;
	inner_fix = f;
	grants_reset();
	assert_int_equal(bh_try_acquire(f->bh, 1), 0);
	assert_int_equal(bh_uring_wait(f->t, &op, f->bh, 1, grant_then_reap), 1);
	submit(f, 1);
	assert_int_equal(bh_release(f->bh, 1), 0);
	assert_int_equal(io_uring_wait_cqe(&f->ring, &cqe), 0);
	head = *f->ring.cq.khead;
	assert_int_equal(bh_uring_complete(f->t, cqe, NULL), BH_URING_HELPER);
	assert_int_equal(grants(), 1);
	assert_int_equal(inner_reap, -EINVAL);
	assert_int_equal(inner_drain, -EINVAL);
	assert_int_equal(*f->ring.cq.khead, head); /* nothing consumed behind our back */
	io_uring_cqe_seen(&f->ring, cqe);
	assert_int_equal(io_uring_cq_ready(&f->ring), 0);
	assert_int_equal(bh_uring_cancel(f->t, &op), 0); /* held: give back */
	fix_free(f);
}

/* Without drain: destroy refuses while one op holds granted permits, and
 * succeeds once bh_uring_cancel gave them back. */
static void test_destroy_refuses_held_until_cancel(void **state)
{
	struct io_uring ring;
	bh_uring_t *t;
	bulkhead_t *bh = make_bh(1, 0, 0);
	struct bh_uring_op op = { 0 };

	(void)state;
	assert_int_equal(ring_up(&ring, 4, 0, 0), 0);
	assert_int_equal(bh_uring_create(&ring, 0, &t), 0);
	assert_int_equal(bh_uring_wait(t, &op, bh, 1, never_granted), 0);
	assert_int_equal(bh_uring_destroy(t), -EBUSY);
	assert_int_equal(in_flight(bh), 1);
	assert_int_equal(bh_uring_cancel(t, &op), 0);
	assert_int_equal(in_flight(bh), 0);
	assert_int_equal(bh_uring_destroy(t), 0);
	io_uring_queue_exit(&ring);
	bh_destroy(bh);
}

/* Two rings on two threads, one bulkhead: the permit an op of ring A holds
 * goes, when the kernel finishes that op and A reaps it, to an op waiting on
 * ring B, whose owner is woken through its ring. */
struct ring_a {
	bulkhead_t *bh;
	int pipe[2];
	_Atomic int phase; /* 1: A holds the permit; 2: go */
	uint64_t in_flight_seen;
};

static void *ring_a_main(void *arg)
{
	struct ring_a *a = arg;
	struct io_uring ring;
	bh_uring_t *t;
	struct bh_uring_op op = { 0 };
	struct io_uring_sqe *sqe;
	char b;

	T_CHECK(io_uring_queue_init(8, &ring, 0) == 0);
	T_CHECK(bh_uring_create(&ring, 0, &t) == 0);
	T_CHECK(bh_uring_get_sqe(t, &op, a->bh, 1, &sqe) == 0);
	io_uring_prep_read(sqe, a->pipe[0], &b, 1, 0);
	T_CHECK(bh_uring_track(t, &op, BH_FOREVER) == 0);
	T_CHECK(io_uring_submit(&ring) == 1);
	atomic_store(&a->phase, 1);
	while (atomic_load(&a->phase) != 2)
		sched_yield();
	T_CHECK(write(a->pipe[1], "x", 1) == 1);
	T_CHECK(io_uring_submit_and_wait(&ring, 1) >= 0);
	T_CHECK(bh_uring_reap(t, NULL, NULL) == 1); /* the release: grants B */
	T_CHECK(!bh_uring_op_busy(&op));
	T_CHECK(bh_uring_drain(t, BH_FOREVER, NULL, NULL) == 0);
	T_CHECK(bh_uring_destroy(t) == 0);
	io_uring_queue_exit(&ring);
	return NULL;
}

static void test_two_rings_share_bulkhead(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 4, BH_FAIR);
	struct ring_a a = { .bh = f->bh };
	struct bh_uring_op op = { 0 };
	pthread_t th;

	(void)state;
	grants_reset();
	make_pipe(a.pipe);
	assert_int_equal(pthread_create(&th, NULL, ring_a_main, &a), 0);
	while (atomic_load(&a.phase) != 1 && !atomic_load(&thread_failed_line))
		sched_yield();
	assert_int_equal(in_flight(f->bh), 1);
	assert_int_equal(bh_uring_wait(f->t, &op, f->bh, 1, record_grant), 1);
	submit(f, 1);
	atomic_store(&a.phase, 2);
	reap_grants(f, 1); /* blocks in ring B until A's reap grants us */
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&thread_failed_line), 0);
	assert_ptr_equal(grant_order[0], &op);
	assert_int_equal(in_flight(f->bh), 1); /* now ours */
	track_nop(f, &op);
	submit(f, 1);
	assert_int_equal(feed_next(f, NULL), BH_URING_DONE);
	assert_int_equal(in_flight(f->bh), 0);
	close_pipe(a.pipe);
	fix_free(f);
}

/* ---- ring flavours ---------------------------------------------------------- */

/* Chains on the flavour's ring, pairs then triples (the tracker has a copy
 * of its loops for each, and for rings of 64-byte SQEs): taken in one
 * update, sealed in one batch, each chain linked and done once, each read
 * after its own write. */
static void flavour_chains(struct fix *f, const int p[2])
{
	struct bh_uring_op ops[3], *po[3] = { &ops[0], &ops[1], &ops[2] };
	struct io_uring_sqe *sqes[6];

	for (unsigned nr = 2; nr <= 3; nr++) {
		unsigned n = 6 / nr;
		struct tally ty = { .base = ops, .bh = f->bh };
		char in[3] = { 0 };

		memset(ops, 0, sizeof(ops));
		assert_int_equal(bh_uring_get_chains(f->t, po, n, f->bh, 1, nr, sqes), (int)n);
		for (unsigned i = 0; i < n; i++) {
			io_uring_prep_write(sqes[i * nr], p[1], &"xyz"[i], 1, 0);
			io_uring_prep_read(sqes[i * nr + 1], p[0], &in[i], 1, 0);
			if (nr == 3)
				io_uring_prep_nop(sqes[i * nr + 2]);
		}
		assert_int_equal(bh_uring_track_batch(f->t, po, n), 0);
		for (unsigned i = 0; i < n * nr; i++)
			assert_int_equal(!!(sqes[i]->flags & IOSQE_IO_LINK), i % nr != nr - 1);
		reap_done(f, &ty, n);
		assert_int_equal(ty.more, n * (nr - 1));
		assert_int_equal(ty.in_flight_at_done, 0);
		assert_memory_equal(in, "xyz", n);
	}
	assert_int_equal(in_flight(f->bh), 0);
}

/* The same rules on rings with big entries (SQE128, CQE32: the tracker
 * indexes both arrays itself) and on an SQPOLL ring (the kernel thread
 * consumes the SQ on its own; pending SQEs are still the tracker's to check). */
static void flavour_round(unsigned flags)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct bh_uring_op ops[4] = { { 0 } }, *po[4] = { &ops[0], &ops[1], &ops[2], &ops[3] };
	struct io_uring_sqe *sqes[4];
	struct tally ty = { .base = ops };
	int p[2], r;
	char b;

	assert_non_null(f);
	r = ring_up(&f->ring, 16, 0, flags);
	if (r == -EINVAL || r == -EPERM) {
		free(f);
		skip();
	}
	assert_int_equal(r, 0);
	assert_int_equal(bh_uring_create(&f->ring, 0, &f->t), 0);
	f->bh = make_bh(8, 0, 0);
	make_pipe(p);
	assert_int_equal(bh_uring_get_batch(f->t, po, 3, f->bh, 1, sqes), 3);
	for (int i = 0; i < 3; i++)
		io_uring_prep_nop(sqes[i]);
	sqes[2]->flags |= IOSQE_CQE_SKIP_SUCCESS; /* refused, becomes a plain NOP */
	assert_int_equal(bh_uring_track_batch(f->t, po, 3), -ECANCELED);
	track_read(f, &ops[3], p[0], &b, bh_now_ns() + 3600 * BH_SEC);
	assert_int_equal(in_flight(f->bh), 3);
	assert_int_equal(io_uring_submit(&f->ring), 5);
	while (ty.done < 2)
		assert_true(io_uring_submit_and_wait(&f->ring, 1) >= 0 &&
			    bh_uring_reap(f->t, count_cqe, &ty) >= 0);
	assert_int_equal(in_flight(f->bh), 1); /* the read, with its deadline */
	assert_int_equal(bh_uring_cancel(f->t, &ops[3]), 0);
	io_uring_submit(&f->ring);
	while (ty.done < 3)
		assert_true(io_uring_submit_and_wait(&f->ring, 1) >= 0 &&
			    bh_uring_reap(f->t, count_cqe, &ty) >= 0);
	assert_int_equal(in_flight(f->bh), 0);
	flavour_chains(f, p);
	close_pipe(p);
	fix_free(f);
}

/* One reap across the end of the CQ array: one batch all the same, every
 * CQE shown once, in the order the kernel posted it, with its op, and the
 * whole batch's permits back before the first callback. Batches of 3 NOPs
 * on an 8-entry CQ start at 0, 3, 6 (across the end), 1, 4, 7 (across),
 * ... */
struct order {
	struct bh_uring_op *seen[8];
	uint64_t in_flight[8]; /* the bulkhead's, at each callback */
	bulkhead_t *bh;
	unsigned n;
	int bad_kind;
};

static void order_cqe(void *ctx, struct io_uring_cqe *cqe, int kind, struct bh_uring_op *op)
{
	struct order *o = ctx;

	(void)cqe;
	if (kind != BH_URING_DONE || o->n == 8) {
		o->bad_kind = kind == BH_URING_DONE ? -1 : kind + 1;
	} else {
		o->in_flight[o->n] = in_flight(o->bh);
		o->seen[o->n++] = op;
	}
}

static void cq_end_round(unsigned flags)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct bh_uring_op ops[3] = { { 0 } }, *po[3] = { &ops[0], &ops[1], &ops[2] };
	struct io_uring_sqe *sqes[3];
	int r;

	assert_non_null(f);
	r = ring_up(&f->ring, 4, 8, flags);
	if (r == -EINVAL || r == -EPERM) {
		free(f);
		skip();
	}
	assert_int_equal(r, 0);
	assert_int_equal(f->ring.cq.ring_entries, 8);
	assert_int_equal(bh_uring_create(&f->ring, 0, &f->t), 0);
	f->bh = make_bh(3, 0, 0);
	for (unsigned round = 0; round < 16; round++) {
		struct order o = { .bh = f->bh };
		unsigned head = *f->ring.cq.khead;

		assert_int_equal(bh_uring_get_batch(f->t, po, 3, f->bh, 1, sqes), 3);
		for (int i = 0; i < 3; i++)
			io_uring_prep_nop(sqes[i]);
		assert_int_equal(bh_uring_track_batch(f->t, po, 3), 0);
		assert_int_equal(io_uring_submit_and_wait(&f->ring, 3), 3);
		assert_int_equal(io_uring_cq_ready(&f->ring), 3);
		assert_int_equal(bh_uring_reap(f->t, order_cqe, &o), 3);
		assert_int_equal(o.bad_kind, 0);
		assert_int_equal(o.n, 3);
		for (int i = 0; i < 3; i++) {
			assert_ptr_equal(o.seen[i], &ops[i]);
			assert_int_equal(o.in_flight[i], 0);
		}
		assert_int_equal(*f->ring.cq.khead, head + 3);
		assert_int_equal(in_flight(f->bh), 0);
	}
	assert_int_equal(tstats(f->t).finished, 48);
	fix_free(f);
}

static void test_reap_across_cq_end(void **state)
{
	(void)state;
	cq_end_round(0);
}

static void test_reap_across_cq_end_big_cqes(void **state)
{
	(void)state;
	cq_end_round(IORING_SETUP_CQE32);
}

static void test_big_entries(void **state)
{
	(void)state;
	flavour_round(IORING_SETUP_SQE128 | IORING_SETUP_CQE32);
}

static void test_sqpoll(void **state)
{
	(void)state;
	flavour_round(IORING_SETUP_SQPOLL);
}

/* ---- cross-thread wake-up of a single-issuer ring ------------------------ */

struct owner_ctx {
	bulkhead_t *bh;
	int submit_err;
	bool granted, done, skipped;
};

static void owner_granted(struct bh_uring_op *op, int result)
{
	struct owner_ctx *oc = op->data;

	oc->granted = result == 0;
	if (result != 0)
		atomic_store(&thread_failed_line, __LINE__);
}

/* Runs the ring on its own thread (the only one that may submit to a
 * SINGLE_ISSUER ring); the permit it waits for is released elsewhere. */
static void *owner_thread(void *arg)
{
	struct owner_ctx *oc = arg;
	struct io_uring ring;
	bh_uring_t *t;
	struct bh_uring_op op = { .data = oc };
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int r = ring_up(&ring, 8, 0, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);

	if (r == -EINVAL) {
		oc->skipped = true;
		return NULL;
	}
	T_CHECK(r == 0);
	T_CHECK(bh_uring_create(&ring, 0, &t) == 0);
	T_CHECK(bh_uring_wait(t, &op, oc->bh, 1, owner_granted) == 1);
	while (!oc->granted && !atomic_load(&thread_failed_line)) { /* blocks in the kernel: no timeout, no polling */
		r = io_uring_submit_and_wait(&ring, 1);
		T_CHECK(r >= 0);
		T_CHECK(bh_uring_reap(t, NULL, NULL) >= 0);
	}
	T_CHECK(bh_uring_get_sqe(t, &op, oc->bh, 1, &sqe) == 0);
	io_uring_prep_nop(sqe);
	T_CHECK(bh_uring_track(t, &op, BH_FOREVER) == 0);
	oc->submit_err = io_uring_submit(&ring);
	T_CHECK(io_uring_wait_cqe(&ring, &cqe) == 0);
	T_CHECK(bh_uring_complete(t, cqe, NULL) == BH_URING_DONE);
	io_uring_cqe_seen(&ring, cqe);
	T_CHECK(bh_uring_drain(t, BH_FOREVER, NULL, NULL) == 0);
	T_CHECK(bh_uring_destroy(t) == 0);
	io_uring_queue_exit(&ring);
	oc->done = true;
	return NULL;
}

static void test_cross_thread_release_wakes_single_issuer_ring(void **state)
{
	bulkhead_t *bh = make_bh(1, 4, BH_FAIR);
	struct owner_ctx oc = { .bh = bh };
	pthread_t th;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0); /* held by this thread */
	assert_int_equal(pthread_create(&th, NULL, owner_thread, &oc), 0);
	while (!oc.skipped && !atomic_load(&thread_failed_line) && stats_of(bh).queued != 1)
		sched_yield();
	if (!oc.skipped)
		assert_int_equal(bh_release(bh, 1), 0); /* wakes the owner's ring */
	pthread_join(th, NULL);
	if (oc.skipped) {
		assert_int_equal(bh_release(bh, 1), 0);
		bh_destroy(bh);
		skip(); /* no SINGLE_ISSUER/DEFER_TASKRUN */
	}
	assert_int_equal(atomic_load(&thread_failed_line), 0);
	assert_true(oc.done);
	assert_int_equal(oc.submit_err, 1); /* not -EEXIST: the owner submitted */
	assert_int_equal(stats_of(bh).in_flight, 0);
	bh_destroy(bh);
}

/* ---- drain and its callback ----------------------------------------------- */

/* fn, during a drain, cancels a multishot op on one of its MORE CQEs (what a
 * callback does to stop a multishot accept or poll). The MORE CQE is the
 * last of a reap batch (63 foreign CQEs before it), so the op is still in
 * flight when fn sees it and bh_uring_cancel prepares a kernel cancel. The
 * drain must still end: the cancel's SQE has to reach the kernel. */
struct cancel_on_more {
	bh_uring_t *t;
	int cancel_r, mores;
};

static void cancel_on_more_cqe(void *ctx, struct io_uring_cqe *cqe, int kind,
			       struct bh_uring_op *op)
{
	struct cancel_on_more *c = ctx;

	(void)cqe;
	if (kind == BH_URING_MORE) {
		c->mores++;
		c->cancel_r = bh_uring_cancel(c->t, op);
	}
}

static void test_drain_submits_cancel_made_by_fn(void **state)
{
	struct fix *f = fix_new(64, 256, 1, 0, 0);
	struct bh_uring_op op = { 0 };
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct cancel_on_more c = { .t = f->t, .cancel_r = 1 };
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t v = 1;

	(void)state;
	assert_true(efd >= 0);
	for (int i = 0; i < 63; i++) {
		sqe = io_uring_get_sqe(&f->ring);
		io_uring_prep_nop(sqe);
		sqe->user_data = 7;
	}
	submit(f, 63);
	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	io_uring_prep_poll_multishot(sqe, efd, POLLIN);
	assert_int_equal(bh_uring_track(f->t, &op, BH_FOREVER), 0);
	submit(f, 1);
	assert_int_equal(write(efd, &v, sizeof(v)), sizeof(v));
	assert_int_equal(io_uring_wait_cqe_nr(&f->ring, &cqe, 64), 0);
	assert_int_equal(io_uring_cq_ready(&f->ring), 64);

	assert_int_equal(bh_uring_drain(f->t, bh_now_ns() + 2 * BH_SEC, cancel_on_more_cqe, &c), 0);
	assert_int_equal(c.mores, 1);
	assert_int_equal(c.cancel_r, 0);
	assert_int_equal(in_flight(f->bh), 0);
	close(efd);
	fix_free(f);
}

/* A fork child's copy of a tracker sees the parent's ring: io_uring maps
 * its queues shared. A drain there must touch nothing of it: its
 * cancel-everything would end the parent's ops and its reap would take
 * their CQEs from the parent's CQ, so the parent would never see their
 * final CQEs and their permits would never come back. */
static void test_fork_child_drain_leaves_parent_ring(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 0, 0);
	struct bh_uring_op op = { 0 }, *done = NULL;
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts = { .tv_sec = 2 };
	int p[2], status;
	char buf;
	pid_t pid;

	(void)state;
	make_pipe(p);
	track_read(f, &op, p[0], &buf, BH_FOREVER);
	submit(f, 1);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int r = bh_uring_drain(f->t, bh_now_ns() + 200 * BH_MSEC, NULL, NULL);

		_exit(r == -EPERM ? 0 : r == 0 ? 1 : 2);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	/* The parent's read is still in flight, and its CQE comes to it. */
	assert_int_equal(tstats(f->t).in_flight, 1);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(io_uring_wait_cqe_timeout(&f->ring, &cqe, &ts), 0);
	assert_int_equal(cqe->res, 1);
	assert_int_equal(bh_uring_complete(f->t, cqe, &done), BH_URING_DONE);
	io_uring_cqe_seen(&f->ring, cqe);
	assert_ptr_equal(done, &op);
	assert_int_equal(in_flight(f->bh), 0);
	/* The child's drain said why it did nothing. */
	assert_int_equal(WEXITSTATUS(status), 0);
	close_pipe(p);
	fix_free(f);
}

/* What a fork child saw, in a page it shares with the parent: the child
 * reports and exits, and the parent asserts (an assert in the child would
 * unwind the child's copy of the test). */
struct child_report {
	int r[16]; /* what the child's calls returned */
	int n;     /* how many of r */
	uint64_t v[8];
};

static struct child_report *report_new(void)
{
	void *p = mmap(NULL, sizeof(struct child_report), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p; /* zeroed */
}

static void report_free(struct child_report *rep)
{
	munmap(rep, sizeof(*rep));
}

/* The child exited on its own, status 0: it got to its report. */
static void child_exited(int status)
{
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void wait_child(pid_t pid)
{
	int status;

	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	child_exited(status);
}

/* A fork child's reap: a CQE it took from the parent's CQ would never reach
 * the parent, and the op's permits would never come back. It takes none:
 * -EPERM, the CQE still in the CQ, the child's copy unchanged; the parent
 * reaps its own CQE and gets its permit back. */
static void test_fork_child_reap_leaves_parent_cqes(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 0, 0);
	struct child_report *rep = report_new();
	struct bh_uring_op op = { 0 };
	struct io_uring_cqe *cqe;
	struct tally ty = { .base = &op };
	int p[2];
	char buf;
	pid_t pid;

	(void)state;
	make_pipe(p);
	track_read(f, &op, p[0], &buf, BH_FOREVER);
	submit(f, 1);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(io_uring_wait_cqe(&f->ring, &cqe), 0); /* posted, still there */
	pid = fork();
	if (pid == 0) {
		rep->r[0] = bh_uring_reap(f->t, NULL, NULL);
		rep->v[0] = io_uring_cq_ready(&f->ring);
		rep->v[1] = tstats(f->t).in_flight;
		rep->v[2] = tstats(f->t).finished;
		_exit(0);
	}
	wait_child(pid);
	assert_int_equal(rep->r[0], -EPERM);
	assert_int_equal(rep->v[0], 1);
	assert_int_equal(rep->v[1], 1);
	assert_int_equal(rep->v[2], 0);
	assert_int_equal(io_uring_cq_ready(&f->ring), 1);
	assert_int_equal(in_flight(f->bh), 1);
	assert_int_equal(bh_uring_reap(f->t, count_cqe, &ty), 1);
	assert_int_equal(ty.done, 1);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(tstats(f->t).in_flight, 0);
	report_free(rep);
	close_pipe(p);
	fix_free(f);
}

static void ignore_grant(struct bh_uring_op *op, int result)
{
	(void)op;
	(void)result;
}

/* Every call of a fork child's copy that would take an SQE, write one,
 * consume or book a CQE, queue or withdraw an op, or give permits back:
 * -EPERM, and nothing changed, neither the child's copy nor the ring. Each
 * call is made where, in the parent, it would succeed. The parent then
 * finishes what it started as if the child had never run: the op whose
 * SQE it took still tracks (a child's cancel would have made it a NOP), and
 * both ops end with their own CQEs. */
static void test_fork_child_calls_refused(void **state)
{
	struct fix *f = fix_new(16, 0, 8, 4, 0);
	struct child_report *rep = report_new();
	struct bh_uring_op flying = { 0 }, armed = { 0 }, idle[5] = { { 0 } }, *one[1];
	struct io_uring_sqe *sqe, *sqes[4];
	struct io_uring_cqe cqe = { .res = 1 };
	struct tally ty = { 0 };
	int p[2];
	char buf;
	pid_t pid;

	(void)state;
	make_pipe(p);
	assert_int_equal(bh_uring_get_sqe(f->t, &flying, f->bh, 1, &sqe), 0);
	io_uring_prep_read(sqe, p[0], &buf, 1, 0);
	cqe.user_data = sqe->user_data; /* what the read's final CQE will carry */
	assert_int_equal(bh_uring_track(f->t, &flying, BH_FOREVER), 0);
	submit(f, 1);
	assert_int_equal(bh_uring_get_sqe(f->t, &armed, f->bh, 1, &sqe), 0);
	io_uring_prep_nop(sqe); /* taken, not yet tracked */
	pid = fork();
	if (pid == 0) {
		struct bh_uring_stats before = tstats(f->t), after;
		int i = 0;

		rep->r[i++] = bh_uring_get_sqe(f->t, &idle[0], f->bh, 1, &sqe);
		rep->r[i++] = bh_uring_get_sqes(f->t, &idle[1], f->bh, 1, 2, sqes);
		one[0] = &idle[2];
		rep->r[i++] = bh_uring_get_batch(f->t, one, 1, f->bh, 1, sqes);
		one[0] = &idle[3];
		rep->r[i++] = bh_uring_get_chains(f->t, one, 1, f->bh, 1, 2, sqes);
		rep->r[i++] = bh_uring_track(f->t, &armed, BH_FOREVER);
		one[0] = &armed;
		rep->r[i++] = bh_uring_track_batch(f->t, one, 1);
		rep->r[i++] = bh_uring_complete(f->t, &cqe, NULL);
		rep->r[i++] = bh_uring_reap(f->t, NULL, NULL);
		rep->r[i++] = bh_uring_wait(f->t, &idle[4], f->bh, 1, ignore_grant);
		rep->r[i++] = bh_uring_cancel(f->t, &flying);
		rep->r[i++] = bh_uring_cancel(f->t, &armed);
		rep->r[i++] = bh_uring_drain(f->t, bh_now_ns() + 2 * BH_SEC, NULL, NULL);
		rep->n = i;
		after = tstats(f->t);
		rep->v[0] = memcmp(&before, &after, sizeof(before)) != 0;
		rep->v[1] = in_flight(f->bh);
		rep->v[2] = io_uring_sq_ready(&f->ring);
		for (i = 0; i < 5; i++)
			rep->v[3] += bh_uring_op_busy(&idle[i]);
		_exit(0);
	}
	wait_child(pid);
	assert_int_equal(rep->n, 12);
	for (int i = 0; i < rep->n; i++)
		if (rep->r[i] != -EPERM)
			fail_msg("the child's call %d returned %d, not -EPERM", i, rep->r[i]);
	assert_int_equal(rep->v[0], 0); /* the child's copy: counts unchanged */
	assert_int_equal(rep->v[1], 2); /* no permit taken or given back */
	assert_int_equal(rep->v[2], 1); /* the SQ: armed's SQE, nothing more */
	assert_int_equal(rep->v[3], 0); /* no op of the child's queued or armed */
	assert_int_equal(bh_uring_track(f->t, &armed, BH_FOREVER), 0);
	submit(f, 1);
	assert_int_equal(write(p[1], "x", 1), 1);
	reap_done(f, &ty, 2);
	assert_int_equal(in_flight(f->bh), 0);
	assert_int_equal(io_uring_cq_ready(&f->ring), 0);
	report_free(rep);
	close_pipe(p);
	fix_free(f);
}

/* The lowest descriptor number free now: the next one opened gets it. */
static int next_fd(void)
{
	int fd = fcntl(0, F_DUPFD_CLOEXEC, 0);

	assert_true(fd >= 0);
	close(fd);
	return fd;
}

/* A fork child frees its copy of a tracker whose parent has ops in flight
 * and waiting: 0, the copy's eventfd closed, no permit given back (the
 * child's copy of the bulkhead still counts the parent's read, and still
 * queues its waiting op). A grant there, should the child make one, does
 * not reach the freed copy: it would write the copy's eventfd, whose
 * number the child has given to an eventfd of its own. The parent's read
 * and grant then come as if the child had never run. */
static void test_fork_child_destroy_frees_copy(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 4, 0);
	struct child_report *rep = report_new();
	struct bh_uring_op flying = { 0 }, waiter = { 0 };
	uint64_t v;
	int p[2], wake_fd;
	char buf;
	pid_t pid;

	(void)state;
	make_pipe(p);
	grants_reset();
	track_read(f, &flying, p[0], &buf, BH_FOREVER);
	wake_fd = next_fd(); /* the first wait that queues makes the eventfd */
	assert_int_equal(bh_uring_wait(f->t, &waiter, f->bh, 1, record_grant), 1);
	assert_int_equal(fcntl(wake_fd, F_GETFD), FD_CLOEXEC);
	submit(f, 2); /* the read, the wake-up poll */
	pid = fork();
	if (pid == 0) {
		int efd;

		rep->r[0] = bh_uring_destroy(f->t);
		rep->r[1] = fcntl(wake_fd, F_GETFD) < 0 ? -errno : 0;
		rep->v[0] = in_flight(f->bh);
		rep->v[1] = stats_of(f->bh).queued;
		efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (efd != wake_fd) {
			dup2(efd, wake_fd);
			close(efd);
		}
		rep->r[2] = bh_release(f->bh, 1); /* grants the queued op, here */
		rep->v[2] = stats_of(f->bh).queued;
		rep->r[3] = read(wake_fd, &v, sizeof(v)) < 0 ? -errno : (int)v;
		_exit(0);
	}
	wait_child(pid);
	assert_int_equal(rep->r[0], 0);
	assert_int_equal(rep->r[1], -EBADF);
	assert_int_equal(rep->v[0], 1);
	assert_int_equal(rep->v[1], 1);
	assert_int_equal(rep->r[2], 0);
	assert_int_equal(rep->v[2], 0); /* granted */
	assert_int_equal(rep->r[3], -EAGAIN); /* and nothing wrote the eventfd */
	/* The parent's tracker, ring and bulkhead go on. */
	assert_int_equal(tstats(f->t).in_flight, 1);
	assert_int_equal(stats_of(f->bh).queued, 1);
	assert_int_equal(write(p[1], "x", 1), 1);
	reap_grants(f, 1);
	assert_ptr_equal(grant_order[0], &waiter);
	assert_int_equal(grant_results[0], 0);
	assert_int_equal(tstats(f->t).in_flight, 0);
	assert_int_equal(bh_uring_cancel(f->t, &waiter), 0); /* held: given back */
	assert_int_equal(in_flight(f->bh), 0);
	report_free(rep);
	close_pipe(p);
	fix_free(f);
}

/* A callback that forks, and whose child returns into the call that ran
 * it, as a loop that forks a worker per request and lets the worker's
 * copy of the loop find out what it is. The parent waits for the child
 * first, so that whatever the child does to the ring comes before the
 * parent's own reap goes on. */
struct fork_in_cb {
	bool in_child;
	int status; /* the child's, in the parent */
	unsigned calls;
};

static void fork_here(struct fork_in_cb *c)
{
	pid_t pid = fork();

	if (pid == 0) {
		c->in_child = true;
		return;
	}
	if (pid < 0 || waitpid(pid, &c->status, 0) != pid)
		c->status = -1;
}

static void fork_on_first_cqe(void *ctx, struct io_uring_cqe *cqe, int kind,
			      struct bh_uring_op *op)
{
	struct fork_in_cb *c = ctx;

	(void)cqe;
	(void)kind;
	(void)op;
	if (c->calls++ == 0)
		fork_here(c);
}

/* fn forks on a batch's first CQE: the child's fn sees the rest of the
 * batch, then its reap returns -EPERM without moving the CQ's head. Moved
 * there, it would move again in the parent: three CQEs lost, and the head
 * past the tail. */
static void test_fork_in_reap_callback_leaves_cq(void **state)
{
	struct fix *f = fix_new(8, 0, 4, 0, 0);
	struct child_report *rep = report_new();
	struct bh_uring_op ops[3] = { { 0 } };
	struct fork_in_cb c = { 0 };
	struct tally ty = { 0 };
	int r;

	(void)state;
	for (int i = 0; i < 3; i++)
		track_nop(f, &ops[i]);
	assert_int_equal(io_uring_submit_and_wait(&f->ring, 3), 3);
	r = bh_uring_reap(f->t, fork_on_first_cqe, &c);
	if (c.in_child) {
		rep->r[0] = r;
		rep->v[0] = io_uring_cq_ready(&f->ring);
		rep->v[1] = c.calls;
		_exit(0);
	}
	child_exited(c.status);
	assert_int_equal(rep->r[0], -EPERM);
	assert_int_equal(rep->v[0], 3);
	assert_int_equal(rep->v[1], 3);
	assert_int_equal(r, 3);
	assert_int_equal(io_uring_cq_ready(&f->ring), 0);
	assert_int_equal(in_flight(f->bh), 0);
	/* The ring still works. */
	track_nop(f, &ops[0]);
	assert_int_equal(io_uring_submit_and_wait(&f->ring, 1), 1);
	assert_int_equal(bh_uring_reap(f->t, count_cqe, &ty), 1);
	assert_int_equal(ty.done, 1);
	assert_int_equal(io_uring_cq_ready(&f->ring), 0);
	assert_int_equal(in_flight(f->bh), 0);
	report_free(rep);
	fix_free(f);
}

static struct fork_in_cb grant_fork;

static void fork_on_first_grant(struct bh_uring_op *op, int result)
{
	(void)op;
	(void)result;
	if (grant_fork.calls++ == 0)
		fork_here(&grant_fork);
}

/* Two grants are due and the wake-up poll's CQE opens a batch of 64 with
 * 7 CQEs behind it; the first grant's callback forks. The child delivers
 * no more grants (they are the parent's ops') and books no second batch
 * (its CQEs are the parent's): its reap returns -EPERM. The parent's reap
 * goes on: both grants, all 71 CQEs. */
static void test_fork_in_grant_callback_leaves_cq(void **state)
{
	enum { OWN = 70 };
	struct fix *f = fix_new(128, 256, 2, 4, 0);
	struct child_report *rep = report_new();
	struct bh_uring_op a = { 0 }, b = { 0 };
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int r;

	(void)state;
	memset(&grant_fork, 0, sizeof(grant_fork));
	assert_int_equal(bh_try_acquire(f->bh, 2), 0);
	assert_int_equal(bh_uring_wait(f->t, &a, f->bh, 1, fork_on_first_grant), 1);
	assert_int_equal(bh_uring_wait(f->t, &b, f->bh, 1, fork_on_first_grant), 1);
	submit(f, 1);
	assert_int_equal(bh_release(f->bh, 2), 0); /* both granted */
	assert_int_equal(io_uring_wait_cqe(&f->ring, &cqe), 0); /* the poll's */
	for (int i = 0; i < OWN; i++) {
		sqe = io_uring_get_sqe(&f->ring);
		io_uring_prep_nop(sqe);
		sqe->user_data = 7;
	}
	assert_int_equal(io_uring_submit_and_wait(&f->ring, OWN + 1), OWN);
	r = bh_uring_reap(f->t, NULL, NULL);
	if (grant_fork.in_child) {
		rep->r[0] = r;
		rep->v[0] = grant_fork.calls;
		rep->v[1] = io_uring_cq_ready(&f->ring);
		_exit(0);
	}
	child_exited(grant_fork.status);
	assert_int_equal(rep->r[0], -EPERM);
	assert_int_equal(rep->v[0], 1);
	assert_int_equal(rep->v[1], OWN + 1 - 64);
	assert_int_equal(r, OWN + 1);
	assert_int_equal(grant_fork.calls, 2);
	assert_int_equal(io_uring_cq_ready(&f->ring), 0);
	assert_int_equal(bh_uring_cancel(f->t, &a), 0);
	assert_int_equal(bh_uring_cancel(f->t, &b), 0);
	assert_int_equal(in_flight(f->bh), 0);
	report_free(rep);
	fix_free(f);
}

/* bh_uring_complete runs a grant callback that forks, while the wake-up
 * poll is owed (it ended, and the SQ was full when the tracker tried to
 * re-arm it): the child takes no SQE for it, nor submits the parent's full
 * SQ to make room; the parent does. */
static void test_fork_in_complete_grant_takes_no_sqe(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 4, 0);
	struct child_report *rep = report_new();
	struct bh_uring_op a = { 0 }, b = { 0 };
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe, copy;
	unsigned own = 0;
	struct tally ty = { 0 };

	(void)state;
	memset(&grant_fork, 0, sizeof(grant_fork));
	assert_int_equal(bh_try_acquire(f->bh, 1), 0);
	assert_int_equal(bh_uring_wait(f->t, &a, f->bh, 1, fork_on_first_grant), 1);
	assert_int_equal(bh_uring_wait(f->t, &b, f->bh, 1, fork_on_first_grant), 1);
	submit(f, 1);
	sqe = io_uring_get_sqe(&f->ring); /* our cancel-all ends the poll */
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
	sqe->user_data = 9;
	assert_int_equal(io_uring_submit_and_wait(&f->ring, 2), 1);
	while ((sqe = io_uring_get_sqe(&f->ring)) != NULL) { /* no room to re-arm */
		io_uring_prep_nop(sqe);
		sqe->user_data = 7;
		own++;
	}
	assert_int_equal(bh_release(f->bh, 1), 0); /* grants a */
	for (int i = 0; i < 2; i++) {
		int kind;

		assert_int_equal(io_uring_peek_cqe(&f->ring, &cqe), 0);
		copy = *cqe;
		io_uring_cqe_seen(&f->ring, cqe);
		kind = bh_uring_complete(f->t, &copy, NULL);
		if (grant_fork.in_child) {
			rep->r[0] = kind;
			rep->v[0] = io_uring_sq_ready(&f->ring);
			rep->v[1] = tstats(f->t).helpers;
			_exit(0);
		}
	}
	child_exited(grant_fork.status);
	assert_int_equal(rep->r[0], BH_URING_HELPER); /* the poll's end */
	assert_int_equal(rep->v[0], own);
	assert_int_equal(rep->v[1], 0);
	assert_int_equal(grant_fork.calls, 1);
	/* The parent made room and re-armed the poll: b's grant still comes. */
	assert_int_equal(io_uring_sq_ready(&f->ring), 1);
	assert_int_equal(tstats(f->t).helpers, 1);
	assert_int_equal(bh_uring_cancel(f->t, &a), 0);
	while (grant_fork.calls < 2) {
		assert_true(io_uring_submit_and_wait(&f->ring, 1) >= 0);
		assert_true(bh_uring_reap(f->t, count_cqe, &ty) >= 0);
	}
	assert_int_equal(bh_uring_cancel(f->t, &b), 0);
	assert_int_equal(in_flight(f->bh), 0);
	report_free(rep);
	fix_free(f);
}

static struct fork_in_cb drain_fork;

static void fork_in_drain_grant(struct bh_uring_op *op, int result)
{
	(void)op;
	drain_fork.calls++;
	if (result == -ECANCELED)
		fork_here(&drain_fork);
}

/* A drain's grant callback (-ECANCELED for a waiting op) forks: the child
 * goes no further with the drain. Gone on, it would cancel everything on
 * the parent's ring (the parent's read and wake-up poll would post their
 * CQEs at once) and reap them. */
static void test_fork_in_drain_callback_leaves_ring(void **state)
{
	struct fix *f = fix_new(8, 0, 1, 4, 0);
	struct child_report *rep = report_new();
	struct bh_uring_op flying = { 0 }, waiter = { 0 };
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts = { .tv_nsec = 100 * BH_MSEC };
	int p[2], r;
	char buf;

	(void)state;
	memset(&drain_fork, 0, sizeof(drain_fork));
	make_pipe(p);
	track_read(f, &flying, p[0], &buf, BH_FOREVER);
	assert_int_equal(bh_uring_wait(f->t, &waiter, f->bh, 1, fork_in_drain_grant), 1);
	submit(f, 2);
	r = bh_uring_drain(f->t, bh_now_ns() + 5 * BH_SEC, NULL, NULL);
	if (drain_fork.in_child) {
		rep->r[0] = r;
		rep->v[0] = tstats(f->t).in_flight;
		rep->v[1] = tstats(f->t).helpers;
		rep->r[1] = io_uring_wait_cqe_timeout(&f->ring, &cqe, &ts);
		_exit(0);
	}
	child_exited(drain_fork.status);
	assert_int_equal(rep->r[0], -EPERM);
	assert_int_equal(rep->v[0], 1); /* the read */
	assert_int_equal(rep->v[1], 1); /* the wake-up poll, no cancel-everything */
	assert_int_equal(rep->r[1], -ETIME); /* nothing ended */
	assert_int_equal(r, 0);
	assert_int_equal(drain_fork.calls, 1);
	assert_int_equal(in_flight(f->bh), 0);
	report_free(rep);
	close_pipe(p);
	fix_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_reap_many_bulkheads),
		cmocka_unit_test(test_track_batch_resumes),
		cmocka_unit_test(test_busy_consumes_no_sqe),
		cmocka_unit_test(test_full_sq_takes_no_permit),
		cmocka_unit_test(test_pipe_reads_held_until_final_cqe),
		cmocka_unit_test(test_cancel_holds_until_target_cqe),
		cmocka_unit_test(test_cancel_of_completed_op),
		cmocka_unit_test(test_multishot_poll_held_until_last),
		cmocka_unit_test(test_multishot_accept),
		cmocka_unit_test(test_send_zc_released_at_notification),
		cmocka_unit_test(test_send_zc_cancelled_while_waiting),
		cmocka_unit_test(test_link_timeout_fires),
		cmocka_unit_test(test_link_timeout_not_firing),
		cmocka_unit_test(test_skip_success_refused),
		cmocka_unit_test(test_drain_behind_pending_link),
		cmocka_unit_test(test_refused_nop_after_failing_skip_link),
		cmocka_unit_test(test_track_refuses_broken_contracts),
		cmocka_unit_test(test_track_outcomes_distinct),
		cmocka_unit_test(test_chain_is_one_op),
		cmocka_unit_test(test_chain_checked_whole),
		cmocka_unit_test(test_send_zc_refused_where_a_link_may_cancel_it),
		cmocka_unit_test(test_batch_and_reap_coalesce),
		cmocka_unit_test(test_chains_in_one_update),
		cmocka_unit_test(test_chains_wrap_and_partial),
		cmocka_unit_test(test_reap_all_done_wraps),
		cmocka_unit_test(test_foreign_cqes_pass_through),
		cmocka_unit_test(test_cq_overflow_many_in_flight),
		cmocka_unit_test(test_drain_at_shutdown),
		cmocka_unit_test(test_drain_with_overflow),
		cmocka_unit_test(test_held_permits_pin_tracker_until_drain),
		cmocka_unit_test(test_drain_withdraws_unprepared_op),
		cmocka_unit_test(test_complete_callback_may_not_reap),
		cmocka_unit_test(test_destroy_refuses_held_until_cancel),
		cmocka_unit_test(test_destroy_refused_from_reap_callback),
		cmocka_unit_test(test_iopoll_ring_refuses_wait_and_deadline),
		cmocka_unit_test(test_complete_stray_sets_no_op),
		cmocka_unit_test(test_waiters_fifo_and_cancel),
		cmocka_unit_test(test_cancel_racing_grant),
		cmocka_unit_test(test_wait_free_permits_and_results),
		cmocka_unit_test(test_grants_delivered_oldest_first),
		cmocka_unit_test(test_wake_poll_rearmed),
		cmocka_unit_test(test_wake_poll_rearm_with_full_sq),
		cmocka_unit_test(test_wake_poll_rearm_waits_for_untracked_op),
		cmocka_unit_test(test_wake_poll_rearmed_by_track),
		cmocka_unit_test(test_wake_poll_rearmed_by_track_sqpoll),
		cmocka_unit_test(test_wake_poll_rearmed_by_track_sqpoll_long_batch),
		cmocka_unit_test(test_wake_poll_rearmed_before_track),
		cmocka_unit_test(test_wait_between_get_and_track),
		cmocka_unit_test(test_drain_ignores_stale_user_data),
		cmocka_unit_test(test_wake_poll_sqe_only_when_queued),
		cmocka_unit_test(test_wait_full_sq_takes_nothing),
		cmocka_unit_test(test_two_rings_share_bulkhead),
		cmocka_unit_test(test_big_entries),
		cmocka_unit_test(test_reap_across_cq_end),
		cmocka_unit_test(test_reap_across_cq_end_big_cqes),
		cmocka_unit_test(test_sqpoll),
		cmocka_unit_test(test_cross_thread_release_wakes_single_issuer_ring),
		cmocka_unit_test(test_drain_submits_cancel_made_by_fn),
		cmocka_unit_test(test_fork_child_drain_leaves_parent_ring),
		cmocka_unit_test(test_fork_child_reap_leaves_parent_cqes),
		cmocka_unit_test(test_fork_child_calls_refused),
		cmocka_unit_test(test_fork_child_destroy_frees_copy),
		cmocka_unit_test(test_fork_in_reap_callback_leaves_cq),
		cmocka_unit_test(test_fork_in_grant_callback_leaves_cq),
		cmocka_unit_test(test_fork_in_complete_grant_takes_no_sqe),
		cmocka_unit_test(test_fork_in_drain_callback_leaves_ring),
	};
	struct io_uring probe;
	int r = io_uring_queue_init(4, &probe, 0);

	if (r < 0) {
		printf("no io_uring here (%d): skip\n", r);
		return 77;
	}
	io_uring_queue_exit(&probe);
	alarm(300); /* a lost wake-up must fail the run, not hang it */
	if (getenv("BH_TEST_FILTER")) /* one test: BH_TEST_FILTER=test_name */
		cmocka_set_test_filter(getenv("BH_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
