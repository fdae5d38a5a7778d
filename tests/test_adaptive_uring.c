/* Automatic adaptive samples from the io_uring tracker, on a real ring:
 * each op's time from taking its SQE to its final CQE, dropped when the
 * kernel cancelled it (a linked timeout), ignored when it failed on its
 * own. Exit 77 when the kernel has no io_uring. */
#define _GNU_SOURCE /* pipe2 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

#include "adaptive/bha.h"
#include "bulkhead/adaptive.h"
#include "bulkhead/uring.h"

struct fix {
	struct io_uring ring;
	bh_uring_t *t;
	bulkhead_t *bh;
	bh_adaptive_t *a;
	int pipe[2];
	uint64_t drop_sum;
};

static void log_window(void *ctx, const struct bha_window *w, const struct bha_verdict *v)
{
	(void)v;
	((struct fix *)ctx)->drop_sum += w->drop_sum_ns;
}

static void fix_up(struct fix *f, uint32_t sources)
{
	struct bh_adaptive_config c = { .sources = sources };

	memset(f, 0, sizeof(*f));
	assert_int_equal(io_uring_queue_init(16, &f->ring, 0), 0);
	assert_int_equal(bh_uring_create(&f->ring, 0, &f->t), 0);
	f->bh = make_bh(8, 0, 0);
	assert_int_equal(bh_adaptive_attach(f->bh, &c, &f->a), 0);
	bha_set_window_hook(f->a, log_window, f);
	assert_int_equal(pipe2(f->pipe, O_CLOEXEC), 0);
}

static void fix_down(struct fix *f)
{
	assert_int_equal(bh_uring_drain(f->t, BH_FOREVER, NULL, NULL), 0);
	assert_int_equal(bh_uring_destroy(f->t), 0);
	io_uring_queue_exit(&f->ring);
	bh_adaptive_detach(f->a);
	bh_destroy(f->bh);
	close(f->pipe[0]);
	close(f->pipe[1]);
}

/* One op to completion: prep it, track it, wait for its final CQE. */
static void one_op(struct fix *f, int kind, uint64_t deadline)
{
	struct bh_uring_op op = { 0 };
	struct io_uring_sqe *sqe;
	static char buf[8];

	assert_int_equal(bh_uring_get_sqe(f->t, &op, f->bh, 1, &sqe), 0);
	if (kind == 0)
		io_uring_prep_nop(sqe);
	else if (kind == 1)
		io_uring_prep_read(sqe, f->pipe[0], buf, sizeof(buf), 0); /* empty: waits */
	else
		io_uring_prep_read(sqe, -1, buf, sizeof(buf), 0); /* -EBADF */
	assert_int_equal(bh_uring_track(f->t, &op, deadline), 0);
	assert_true(io_uring_submit(&f->ring) >= 1);
	while (bh_uring_op_busy(&op)) {
		struct io_uring_cqe *cqe;

		assert_int_equal(io_uring_wait_cqe(&f->ring, &cqe), 0);
		assert_true(bh_uring_reap(f->t, NULL, NULL) >= 1);
	}
}

static void final_cqes_are_samples(void **state)
{
	struct fix f;
	struct bh_adaptive_stats st;

	(void)state;
	fix_up(&f, 0);
	/* The first probe's epoch starts at the first sample: that op ran
	 * before it and is discarded; the next ones count. */
	for (int i = 0; i < 4; i++)
		one_op(&f, 0, BH_FOREVER);
	one_op(&f, 1, bh_now_ns() + 20 * BH_MSEC); /* cancelled by its deadline */
	one_op(&f, 2, BH_FOREVER);
	bha_flush(f.a);
	assert_int_equal(bh_adaptive_stats(f.a, &st), 0);
	assert_int_equal(st.discarded, 1);
	assert_int_equal(st.ok, 3);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.ignored, 1);
	assert_true(f.drop_sum >= 20 * BH_MSEC); /* the whole time it held its permit */
	fix_down(&f);
}

static void manual_means_none(void **state)
{
	struct fix f;
	struct bh_adaptive_stats st;

	(void)state;
	fix_up(&f, BH_ADAPTIVE_SRC_MANUAL);
	for (int i = 0; i < 3; i++)
		one_op(&f, 0, BH_FOREVER);
	assert_int_equal(bh_adaptive_stats(f.a, &st), 0);
	assert_int_equal(st.ok + st.dropped + st.ignored + st.discarded, 0);
	fix_down(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(final_cqes_are_samples),
		cmocka_unit_test(manual_means_none),
	};
	struct io_uring probe;
	int r = io_uring_queue_init(4, &probe, 0);

	if (r < 0) {
		printf("no io_uring here (%d): skip\n", r);
		return 77;
	}
	io_uring_queue_exit(&probe);
	alarm(60);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
