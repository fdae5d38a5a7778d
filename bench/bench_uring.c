/* What tracking costs, in one run, rounds interleaved so every mode sees
 * the same machine. NOP submissions at queue depth D (default 64); each
 * batch: D SQEs prepared, one io_uring_submit_and_wait(D), D CQEs handled by
 * the application's handler (one indirect call per CQE in every mode).
 *
 *   raw, bare     io_uring_get_sqe + prep + user_data; io_uring_for_each_cqe
 *                 hands user_data straight to the handler: nothing checked
 *                 or counted (the floor)
 *   raw, lookup   the same, plus what a real loop must keep for itself and
 *                 what the tracker keeps for it: user_data names the request,
 *                 the loop checks that it is in flight, marks it idle, counts
 *                 what is in flight (to drain at shutdown) and calls the
 *                 request's own callback
 *   batch         bh_uring_get_batch (one acquire per batch) + prep +
 *                 bh_uring_track_batch; bh_uring_reap (one release per batch)
 *   per-op        bh_uring_get_sqe + prep + bh_uring_track per op (an acquire
 *                 each); bh_uring_complete per CQE (a release each)
 *
 * Then real I/O: each op a linked write+read of B bytes (default 512),
 * D/2 chains per batch, raw (lookup, counting both CQEs of a chain),
 * tracked per op (bh_uring_get_sqes, a two-SQE chain, bh_uring_track, one
 * reap) and tracked in batches (bh_uring_get_chains, bh_uring_track_batch,
 * one reap), where the tracker's share of the time should be under 1%:
 * through a pipe (the cheapest I/O the kernel does), and through a
 * loopback TCP connection (a send, then a recv at the other end;
 * TCP_NODELAY), what a server's I/O looks like.
 *
 * Prints ns per op (median of the rounds) and each ratio as the median of
 * the per-round ratios. Targets at depth 64: batch <= 1.05x raw with lookup,
 * <= 1.08x bare raw. A benchmark, not a test: it never fails.
 * Usage: bench_uring [--quick] [-d depth] [-n ops per round] [-r rounds]
 *                    [-b bytes] [-m modes] */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_SETPIPE_SZ */
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bulkhead.h"
#include "bulkhead/uring.h"
#include "machine.h"
#include "stats.h"

struct req {
	struct bh_uring_op op;
	void (*cb)(struct req *r, int res); /* the request's own completion */
	unsigned state;                     /* raw, lookup: 1 while in flight */
	unsigned cqes_left;                 /* raw I/O: CQEs of its chain still due */
	long done;
};

static struct io_uring ring;
static bh_uring_t *tracker;
static bulkhead_t *bh;
static struct req *reqs;
static struct bh_uring_op **ops;
static struct io_uring_sqe **sqes;
static unsigned depth = 64;
static unsigned long raw_in_flight, raw_strays; /* raw, lookup: its own books */
/* The real-I/O points: where each chain writes, and where it reads back. */
enum point { PIPE, TCP, N_POINTS };
static int io_fd[N_POINTS][2] = { { -1, -1 }, { -1, -1 } }; /* write end, read end */
static enum point cur;
static char *io_buf;
static unsigned io_bytes = 512;

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

/* Every real loop: the request named by user_data must be one in flight
 * (a stray or a second CQE for it is a bug to catch, not to act on); it is
 * idle again, one fewer is in flight, and its own callback runs. */
static void raw_lookup_batch(void)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	for (unsigned i = 0; i < depth; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

		reqs[i].state = 1;
		raw_in_flight++;
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data(sqe, &reqs[i]);
	}
	io_uring_submit_and_wait(&ring, depth);
	io_uring_for_each_cqe(&ring, head, cqe) {
		struct req *r = io_uring_cqe_get_data(cqe);

		n++;
		if (!r || r->state != 1) {
			raw_strays++;
			continue;
		}
		r->state = 0;
		raw_in_flight--;
		r->cb(r, cqe->res);
	}
	io_uring_cq_advance(&ring, n);
}

/* The real-I/O work per request: a write of io_bytes into the current
 * point, linked to a read of as many at its other end, so each chain finds
 * its bytes there. */
static void handle_io(struct req *r, int res)
{
	r->done += res == (int)io_bytes;
}

static void prep_io(struct io_uring_sqe *w, struct io_uring_sqe *rd, unsigned i)
{
	char *buf = io_buf + (size_t)i * io_bytes;

	if (cur == TCP) {
		io_uring_prep_send(w, io_fd[TCP][0], buf, io_bytes, 0);
		io_uring_prep_recv(rd, io_fd[TCP][1], buf, io_bytes, 0);
	} else {
		io_uring_prep_write(w, io_fd[PIPE][0], buf, io_bytes, 0);
		io_uring_prep_read(rd, io_fd[PIPE][1], buf, io_bytes, 0);
	}
}

static void raw_io_batch(void)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	for (unsigned i = 0; i < depth / 2; i++) {
		struct io_uring_sqe *w = io_uring_get_sqe(&ring);
		struct io_uring_sqe *rd = io_uring_get_sqe(&ring);

		prep_io(w, rd, i);
		w->flags |= IOSQE_IO_LINK;
		io_uring_sqe_set_data(w, &reqs[i]);
		io_uring_sqe_set_data(rd, &reqs[i]);
		reqs[i].state = 1;
		reqs[i].cqes_left = 2;
		raw_in_flight++;
	}
	io_uring_submit_and_wait(&ring, depth / 2 * 2);
	io_uring_for_each_cqe(&ring, head, cqe) {
		struct req *r = io_uring_cqe_get_data(cqe);

		n++;
		if (!r || r->state != 1) {
			raw_strays++;
			continue;
		}
		if (--r->cqes_left)
			continue;
		r->state = 0;
		raw_in_flight--;
		handle_io(r, cqe->res);
	}
	io_uring_cq_advance(&ring, n);
}

static void on_cqe_io(void *ctx, struct io_uring_cqe *cqe, int kind, struct bh_uring_op *op)
{
	(void)ctx;
	if (kind == BH_URING_DONE)
		handle_io(op->data, cqe->res);
}

static void tracked_io_batch(void)
{
	for (unsigned i = 0; i < depth / 2; i++) {
		struct io_uring_sqe *sq[2];

		if (bh_uring_get_sqes(tracker, ops[i], bh, 1, 2, sq) != 0) {
			fprintf(stderr, "bh_uring_get_sqes failed\n");
			exit(1);
		}
		prep_io(sq[0], sq[1], i);
		bh_uring_track(tracker, ops[i], BH_FOREVER);
	}
	io_uring_submit_and_wait(&ring, depth / 2 * 2);
	bh_uring_reap(tracker, on_cqe_io, NULL);
}

/* The same chains, batched: bh_uring_get_chains (one acquire for the
 * batch), bh_uring_track_batch (which links each chain), one reap (one
 * release per batch). */
static void tracked_io_chains(void)
{
	int got = bh_uring_get_chains(tracker, ops, depth / 2, bh, 1, 2, sqes);

	if (got != (int)(depth / 2)) {
		fprintf(stderr, "bh_uring_get_chains: %d\n", got);
		exit(1);
	}
	for (unsigned i = 0; i < depth / 2; i++)
		prep_io(sqes[2 * i], sqes[2 * i + 1], i);
	bh_uring_track_batch(tracker, ops, depth / 2);
	io_uring_submit_and_wait(&ring, depth / 2 * 2);
	bh_uring_reap(tracker, on_cqe_io, NULL);
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

enum mode {
	RAW,
	LOOKUP,
	BATCH,
	PER_OP,
	IO_RAW,
	IO_TRACKED,
	IO_BATCH,
	TCP_RAW,
	TCP_TRACKED,
	TCP_BATCH,
	N_MODES
};

static void (*const modes[N_MODES])(void) = {
	[RAW] = raw_batch,		  [LOOKUP] = raw_lookup_batch,
	[BATCH] = tracked_batch,	  [PER_OP] = tracked_per_op,
	[IO_RAW] = raw_io_batch,	  [IO_TRACKED] = tracked_io_batch,
	[IO_BATCH] = tracked_io_chains,	  [TCP_RAW] = raw_io_batch,
	[TCP_TRACKED] = tracked_io_batch, [TCP_BATCH] = tracked_io_chains,
};
/* Where a real-I/O mode's chains write and read (cur, for prep_io; PIPE is
 * 0, the rest's default). */
static const enum point point_of[N_MODES] = { [TCP_RAW] = TCP, [TCP_TRACKED] = TCP,
					      [TCP_BATCH] = TCP };
static const char *const names[N_MODES] = {
	[RAW] = "raw liburing, bare",	     [LOOKUP] = "raw liburing, lookup",
	[BATCH] = "tracker, batch",	     [PER_OP] = "tracker, per op",
	[IO_RAW] = "raw liburing, lookup",   [IO_TRACKED] = "tracker, per op",
	[IO_BATCH] = "tracker, batch",	     [TCP_RAW] = "raw liburing, lookup",
	[TCP_TRACKED] = "tracker, per op",   [TCP_BATCH] = "tracker, batch",
};

/* ns per op of mode m over about nops ops, per_batch ops in each batch. */
static double run(int m, unsigned long nops, unsigned per_batch)
{
	void (*batch)(void) = modes[m];
	unsigned long batches = nops / per_batch;
	uint64_t t0;

	cur = point_of[m];
	t0 = bh_now_ns();
	for (unsigned long i = 0; i < batches; i++)
		batch();
	return (double)(bh_now_ns() - t0) / (double)(batches * per_batch);
}

/* The median over the rounds of ns[m] / ns[base]. */
static double ratio(double ns[][128], int m, int base, int rounds)
{
	double v[128];

	for (int i = 0; i < rounds; i++)
		v[i] = ns[base][i] > 0 ? ns[m][i] / ns[base][i] : 0;
	return bench_median(v, rounds);
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--quick] [-d depth] [-n ops per round] [-r rounds] [-b bytes]"
		" [-m modes]\n"
		"  --quick  short run (smoke test): 5 rounds of 16384 ops\n"
		"  -b       bytes per write and read in the real-I/O points (default 512)\n"
		"  -m       bit mask, for profiling: 1 raw bare, 2 raw lookup, 4 batch,\n"
		"           8 per op, 16 pipe raw, 32 pipe tracked per op, 64 pipe\n"
		"           tracked batch, 128 TCP raw, 256 TCP tracked per op,\n"
		"           512 TCP tracked batch (default 1023)\n",
		argv0);
}

/* A TCP connection over 127.0.0.1: fd[0] the client's end (it sends), fd[1]
 * the accepted end (it receives). No Nagle delay: each send goes at once. */
static int tcp_pair(int fd[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	fd[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || fd[0] < 0 || bind(lfd, (struct sockaddr *)&a, len) != 0 ||
	    listen(lfd, 1) != 0 || getsockname(lfd, (struct sockaddr *)&a, &len) != 0 ||
	    connect(fd[0], (struct sockaddr *)&a, len) != 0 ||
	    (fd[1] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0) {
		fprintf(stderr, "loopback TCP: %s\n", strerror(errno));
		return 1;
	}
	close(lfd);
	setsockopt(fd[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

static int setup(void)
{
	struct bh_config cfg = { .max_concurrent = 1u << 16, .queue_capacity = 0 };
	int r, p[2];

	/* twice the depth: the tracker keeps one SQE free for a timeout */
	if ((r = io_uring_queue_init(2 * depth, &ring, 0)) < 0) {
		fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-r));
		/* no io_uring in this kernel or sandbox: not run, as the tests say */
		return r == -ENOSYS || r == -EPERM ? 77 : 1;
	}
	if (bh_create(&cfg, &bh) < 0 || bh_uring_create(&ring, 0, &tracker) < 0) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	reqs = calloc(depth, sizeof(*reqs));
	ops = calloc(depth, sizeof(*ops));
	sqes = calloc(depth, sizeof(*sqes));
	io_buf = calloc(depth, io_bytes);
	if (!reqs || !ops || !sqes || !io_buf) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (unsigned i = 0; i < depth; i++) {
		ops[i] = &reqs[i].op;
		reqs[i].op.data = &reqs[i];
		reqs[i].cb = handle;
	}
	if (pipe(p) != 0) {
		fprintf(stderr, "pipe: %s\n", strerror(errno));
		return 1;
	}
	io_fd[PIPE][0] = p[1]; /* write end first, as for TCP */
	io_fd[PIPE][1] = p[0];
	/* room for every chain's bytes at once, so no write waits (where the
	 * pipe may grow that far; it never deadlocks: each read follows its
	 * own write) */
	if (fcntl(io_fd[PIPE][0], F_GETPIPE_SZ) < (int)(depth / 2 * io_bytes))
		fcntl(io_fd[PIPE][0], F_SETPIPE_SZ, (int)(depth / 2 * io_bytes));
	return tcp_pair(io_fd[TCP]);
}

/* A real-I/O point's figures: raw is its raw mode, raw + 1 its tracked per
 * op, raw + 2 its tracked in batches (the target's). */
static void report_io(const char *what, int raw, double ns[][128], const double *med,
		      unsigned long nops, int rounds)
{
	double per_op = ratio(ns, raw + 1, raw, rounds), batch = ratio(ns, raw + 2, raw, rounds);

	printf("%s of %u bytes per op (a linked pair), %u ops per batch, %lu ops x %d rounds:\n",
	       what, io_bytes, depth / 2, nops, rounds);
	for (int m = raw; m <= raw + 2; m++)
		printf("  %-22s %7.1f ns/op\n", names[m], med[m]);
	printf("tracker's share of real I/O: batch %+.2f%% (target < 1%%: %s); per op %+.2f%%\n",
	       (batch - 1) * 100, batch < 1.01 ? "met" : "MISSED", (per_op - 1) * 100);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = { { "quick", no_argument, 0, 'q' },
					       { "help", no_argument, 0, 'h' },
					       { 0, 0, 0, 0 } };
	unsigned long nops = 1u << 18;
	int rounds = 31, opt;
	unsigned mask = (1u << N_MODES) - 1;
	static double ns[N_MODES][128];
	double med[N_MODES], v[128];

	while ((opt = getopt_long(argc, argv, "d:n:r:m:b:qh", lopts, NULL)) != -1) {
		if (opt == 'd')
			depth = (unsigned)atoi(optarg);
		else if (opt == 'n')
			nops = strtoul(optarg, NULL, 0);
		else if (opt == 'r')
			rounds = atoi(optarg);
		else if (opt == 'm')
			mask = (unsigned)atoi(optarg);
		else if (opt == 'b')
			io_bytes = (unsigned)atoi(optarg);
		else if (opt == 'q')
			rounds = 5, nops = 1u << 14;
		else
			return usage(argv[0]), opt == 'h' ? 0 : 2;
	}
	if (depth < 2 || depth > 4096 || rounds < 1 || rounds > 128 || nops < depth ||
	    io_bytes < 1 || io_bytes > 4096)
		return fprintf(stderr, "bad arguments\n"), 2;
	bench_print_machine(stdout);
	if ((opt = setup()) != 0)
		return opt;
	/* a pipe round trip costs some 10 NOPs, a TCP one some 60: fewer ops
	 * keep their rounds short (TCP's still take some 0.1 s each: its
	 * times move more from round to round) */
	unsigned long n_of[N_MODES];
	unsigned per[N_MODES];

	for (int m = 0; m < N_MODES; m++) {
		bool io = m >= IO_RAW;

		n_of[m] = io ? nops / 16 + depth : nops;
		per[m] = io ? depth / 2 : depth;
	}
	for (int m = 0; m < N_MODES; m++)
		if (mask & (1u << m))
			run(m, n_of[m] / 8 + depth, per[m]); /* warm up */
	for (int i = 0; i < rounds; i++)
		for (int n = 0; n < N_MODES; n++) { /* the order rotates from round to round */
			int m = (n + i) % N_MODES;

			ns[m][i] = mask & (1u << m) ? run(m, n_of[m], per[m]) : 0;
		}
	for (int m = 0; m < N_MODES; m++) {
		memcpy(v, ns[m], sizeof(double) * (size_t)rounds);
		med[m] = bench_median(v, rounds);
	}
	printf("NOP, depth %u, %lu ops x %d rounds (median ns/op; ratios: median of per-round"
	       " ratios):\n",
	       depth, nops, rounds);
	for (int m = RAW; m <= PER_OP; m++)
		if (mask & (1u << m))
			printf("  %-22s %7.2f ns/op  / bare %.3f  / lookup %.3f\n", names[m], med[m],
			       ratio(ns, m, RAW, rounds), ratio(ns, m, LOOKUP, rounds));
	if ((mask & 15) == 15) {
		double bl = ratio(ns, BATCH, LOOKUP, rounds), bb = ratio(ns, BATCH, RAW, rounds);

		printf("overhead at depth %u: batch %+.1f%% over raw with lookup (target <= 5%%: %s),"
		       " %+.1f%% over bare raw (target <= 8%%: %s); per op %+.1f%%, %+.1f%%\n",
		       depth, (bl - 1) * 100, bl <= 1.05 ? "met" : "MISSED", (bb - 1) * 100,
		       bb <= 1.08 ? "met" : "MISSED", (ratio(ns, PER_OP, LOOKUP, rounds) - 1) * 100,
		       (ratio(ns, PER_OP, RAW, rounds) - 1) * 100);
	}
	if ((mask & (7u << IO_RAW)) == 7u << IO_RAW)
		report_io("pipe write+read", IO_RAW, ns, med, n_of[IO_RAW], rounds);
	if ((mask & (7u << TCP_RAW)) == 7u << TCP_RAW)
		report_io("loopback TCP send+recv", TCP_RAW, ns, med, n_of[TCP_RAW], rounds);
	if (raw_in_flight || raw_strays)
		printf("raw loop's books: %lu in flight, %lu strays (expected 0, 0)\n", raw_in_flight,
		       raw_strays);
	bh_uring_drain(tracker, BH_FOREVER, NULL, NULL);
	bh_uring_destroy(tracker);
	io_uring_queue_exit(&ring);
	bh_destroy(bh);
	return 0;
}
