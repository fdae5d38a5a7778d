/* What tracking costs: NOP submissions at queue depth D (default 64),
 * through raw liburing and through the tracker, in one run, rounds
 * interleaved so both see the same machine. Each batch: D SQEs prepared,
 * one io_uring_submit_and_wait(D), D CQEs handled by the application's
 * handler (one indirect call per CQE in every mode, as a real loop has).
 *
 *   raw      io_uring_get_sqe + prep + user_data; io_uring_for_each_cqe
 *   batch    bh_uring_get_batch (one acquire per batch) + prep +
 *            bh_uring_track_batch; bh_uring_reap (one release per batch)
 *   per-op   bh_uring_get_sqe + prep + bh_uring_track per op (an acquire
 *            each); bh_uring_complete per CQE (a release each)
 *
 * Prints ns per op (median of the rounds) and each mode's ratio to raw: the
 * median of the per-round ratios, each round running the modes back to back,
 * so that load from other processes cancels out. The project's target is
 * batch/raw <= 1.05 at depth 64. A benchmark, not a test: it never fails.
 * Usage: bench_uring [-d depth] [-n ops per round] [-r rounds] [-m modes] */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bulkhead.h"
#include "bulkhead/uring.h"

struct req {
	struct bh_uring_op op;
	long done;
};

static struct io_uring ring;
static bh_uring_t *tracker;
static bulkhead_t *bh;
static struct req *reqs;
static struct bh_uring_op **ops;
static struct io_uring_sqe **sqes;
static unsigned depth = 64;

/* The application's work per completion, the same in every mode, reached
 * through one indirect call per CQE in every mode. */
static void handle(struct req *r, int res)
{
	r->done += res == 0;
}

static void (*volatile handler)(struct req *, int) = handle;

static void raw_batch(void)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	for (unsigned i = 0; i < depth; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data(sqe, &reqs[i]);
	}
	io_uring_submit_and_wait(&ring, depth);
	io_uring_for_each_cqe(&ring, head, cqe) {
		handler(io_uring_cqe_get_data(cqe), cqe->res);
		n++;
	}
	io_uring_cq_advance(&ring, n);
}

/* bh_uring_reap's callback is the application's handler. */
static void on_cqe(void *ctx, struct io_uring_cqe *cqe, int kind, struct bh_uring_op *op)
{
	(void)ctx;
	(void)kind;
	handle(op->data, cqe->res);
}

static void tracked_batch(void)
{
	int got = bh_uring_get_batch(tracker, ops, depth, bh, 1, sqes);

	for (int i = 0; i < got; i++)
		io_uring_prep_nop(sqes[i]);
	bh_uring_track_batch(tracker, ops, (unsigned)got);
	io_uring_submit_and_wait(&ring, (unsigned)got);
	bh_uring_reap(tracker, on_cqe, NULL);
}

static void tracked_per_op(void)
{
	struct io_uring_cqe *cqe;
	struct bh_uring_op *op;
	unsigned head, n = 0;

	for (unsigned i = 0; i < depth; i++) {
		struct io_uring_sqe *sqe;

		bh_uring_get_sqe(tracker, ops[i], bh, 1, &sqe);
		io_uring_prep_nop(sqe);
		bh_uring_track(tracker, ops[i], BH_FOREVER);
	}
	io_uring_submit_and_wait(&ring, depth);
	io_uring_for_each_cqe(&ring, head, cqe) {
		if (bh_uring_complete(tracker, cqe, &op) == BH_URING_DONE)
			handler(op->data, cqe->res);
		n++;
	}
	io_uring_cq_advance(&ring, n);
}

static double run(void (*batch)(void), unsigned long nops)
{
	unsigned long batches = nops / depth;
	uint64_t t0 = bh_now_ns();

	for (unsigned long i = 0; i < batches; i++)
		batch();
	return (double)(bh_now_ns() - t0) / (double)(batches * depth);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

int main(int argc, char **argv)
{
	struct bh_config cfg = { .max_concurrent = 1u << 16, .queue_capacity = 0 };
	void (*modes[3])(void) = { raw_batch, tracked_batch, tracked_per_op };
	const char *names[3] = { "raw liburing", "tracker, batch", "tracker, per op" };
	unsigned long nops = 1u << 18;
	int rounds = 31, opt, r;
	unsigned mask = 7;
	double ns[3][128], ratio[3][128], med[3], rmed[3];

	while ((opt = getopt(argc, argv, "d:n:r:m:")) != -1) {
		if (opt == 'd')
			depth = (unsigned)atoi(optarg);
		else if (opt == 'n')
			nops = strtoul(optarg, NULL, 0);
		else if (opt == 'r')
			rounds = atoi(optarg);
		else if (opt == 'm') /* for profiling: 1 raw, 2 batch, 4 per op */
			mask = (unsigned)atoi(optarg);
		else
			return fprintf(stderr, "usage: %s [-d depth] [-n ops] [-r rounds]\n", argv[0]), 2;
	}
	if (depth == 0 || depth > 4096 || rounds < 1 || rounds > 128 || nops < depth)
		return fprintf(stderr, "bad arguments\n"), 2;
	/* twice the depth: the tracker keeps one SQE free for a timeout */
	if ((r = io_uring_queue_init(2 * depth, &ring, 0)) < 0) {
		fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-r));
		return 1;
	}
	if (bh_create(&cfg, &bh) < 0 || bh_uring_create(&ring, 0, &tracker) < 0)
		return fprintf(stderr, "setup failed\n"), 1;
	reqs = calloc(depth, sizeof(*reqs));
	ops = calloc(depth, sizeof(*ops));
	sqes = calloc(depth, sizeof(*sqes));
	if (!reqs || !ops || !sqes)
		return fprintf(stderr, "out of memory\n"), 1;
	for (unsigned i = 0; i < depth; i++) {
		ops[i] = &reqs[i].op;
		reqs[i].op.data = &reqs[i];
	}
	for (int m = 0; m < 3; m++)
		if (mask & (1u << m))
			run(modes[m], nops / 8); /* warm up */
	for (int i = 0; i < rounds; i++)
		for (int m = 0; m < 3; m++)
			ns[m][i] = mask & (1u << m) ? run(modes[m], nops) : 0;
	for (int i = 0; i < rounds; i++)
		for (int m = 0; m < 3; m++)
			ratio[m][i] = ns[0][i] > 0 ? ns[m][i] / ns[0][i] : 0;
	printf("NOP, depth %u, %lu ops x %d rounds (median ns/op; median of per-round ratios):\n",
	       depth, nops, rounds);
	for (int m = 0; m < 3; m++) {
		med[m] = median(ns[m], rounds);
		rmed[m] = median(ratio[m], rounds);
		if (mask & (1u << m))
			printf("  %-16s %7.2f ns/op  ratio %.3f\n", names[m], med[m], rmed[m]);
	}
	if ((mask & 3) == 3)
		printf("overhead at depth %u: batch %+.1f%% (target <= 5%%), per op %+.1f%%\n", depth,
		       (rmed[1] - 1) * 100, (rmed[2] - 1) * 100);
	bh_uring_drain(tracker, BH_FOREVER, NULL, NULL);
	bh_uring_destroy(tracker);
	io_uring_queue_exit(&ring);
	bh_destroy(bh);
	return 0;
}
