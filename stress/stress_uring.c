/* Stress: several threads, each the owner of its own ring and tracker, share
 * one bulkhead with a blocking client; they start random operations (NOPs,
 * pipe reads with and without kernel deadlines, polls, multishot polls,
 * timeouts, linked chains, batches of NOPs), cancel them, wait for permits
 * without blocking, and reap (even workers with bh_uring_reap, odd ones with
 * their own CQ loop and bh_uring_complete) - all at once, for
 * BH_STRESS_SECONDS (default 3). Odd seeds use a BH_FAIR bulkhead; seeds
 * with bit 1 set use SINGLE_ISSUER|DEFER_TASKRUN rings.
 *
 * Every thread keeps its own books of each of its records (what it started,
 * what it was told), never asking the library. Invariants:
 *  - a record gets MORE only while in flight (multishot: any number; chain:
 *    exactly members - 1), exactly one DONE per start, a grant only while
 *    waiting, and nothing after a cancel took it back;
 *  - always: the bulkhead's in_flight <= its limit;
 *  - at checkpoints, with every thread parked outside the library: the
 *    bulkhead's in_flight + queued == permits the books say are held (ops
 *    in flight or granted) + ops the books say are waiting (a grant made but
 *    not yet told moves one from queued to in_flight, so the sum is exact),
 *    and each tracker's counts equal its thread's books;
 *  - at the end, after bh_uring_drain (which gives back, in half the
 *    workers, the permits of records still holding a grant): every record
 *    idle, nothing in flight, nothing queued, every start matched by one
 *    DONE, no over-release.
 * Prints the seed and one summary line; exits 1 on any violation. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bulkhead.h"
#include "bulkhead/uring.h"

#define NWORKERS 4
#define NRECS 48
#define NPIPES 4
#define LIMIT 24
#define QUEUE 16

enum kind { K_NOP, K_READ, K_READ_DL, K_POLL, K_MPOLL, K_TIMEOUT, K_CHAIN, K_KINDS };
enum book { B_FREE, B_WAITING, B_HELD, B_INFLIGHT };

struct rec {
	struct bh_uring_op op;
	struct worker *w;
	enum book book;
	enum kind kind;
	uint32_t n;
	unsigned mores;
	char buf[2];
	struct __kernel_timespec ts;
};

struct worker {
	pthread_t th;
	int id;
	uint64_t rng;
	struct io_uring ring;
	bh_uring_t *t;
	struct rec recs[NRECS];
	int pipes[NPIPES][2];
	int chain_pipe[2];
	int efd;
	/* the books, read by the checker only at checkpoints */
	uint64_t held_permits, waiting, inflight_ops, held_ops;
	uint64_t started, done, mores, cancels, rejected, waits, grants, refused;
};

static bulkhead_t *bh;
static struct worker workers[NWORKERS];
static _Atomic int stop, pause_req, violations;
static _Atomic uint64_t checks, client_ok, client_busy;
static uint64_t client_held; /* the blocking client's books */
static pthread_barrier_t park;
static bool defer_taskrun;

#define VIOLATION(...)                                                        \
	do {                                                                  \
		fprintf(stderr, "stress_uring: VIOLATION: " __VA_ARGS__);    \
		fputc('\n', stderr);                                          \
		atomic_fetch_add(&violations, 1);                             \
	} while (0)

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static unsigned below(struct worker *w, unsigned n)
{
	return (unsigned)(rnd(&w->rng) % n);
}

/* ---- the books -------------------------------------------------------- */

static void book_start(struct rec *r)
{
	if (r->book != B_FREE && r->book != B_HELD)
		VIOLATION("start of a record in state %d", r->book);
	if (r->book == B_HELD)
		r->w->held_ops--;
	else
		r->w->held_permits += r->n;
	r->book = B_INFLIGHT;
	r->mores = 0;
	r->w->inflight_ops++;
	r->w->started++;
}

static void book_done(struct rec *r)
{
	r->book = B_FREE;
	r->w->held_permits -= r->n;
	r->w->inflight_ops--;
	r->w->done++;
}

static void on_cqe(void *ctx, struct io_uring_cqe *cqe, int kind, struct bh_uring_op *op)
{
	struct worker *w = ctx;
	struct rec *r = op ? op->data : NULL;

	if (kind == BH_URING_FOREIGN && cqe->user_data == LIBURING_UDATA_TIMEOUT)
		return; /* liburing's own, on kernels without IORING_FEAT_EXT_ARG */
	if (kind == BH_URING_FOREIGN) {
		VIOLATION("foreign CQE %llx on a ring with none", (unsigned long long)cqe->user_data);
		return;
	}
	if (!r || r->w != w || r->book != B_INFLIGHT) {
		VIOLATION("CQE (kind %d, res %d) for a record not in flight", kind, cqe->res);
		return;
	}
	/* What the kernel says, independently of the tracker: a CQE with
	 * F_MORE is never final; a chain's first member's CQE is not either. */
	if (kind == BH_URING_MORE) {
		r->mores++;
		w->mores++;
		if (r->kind == K_CHAIN ? r->mores != 1 || (cqe->flags & IORING_CQE_F_MORE)
				       : r->kind != K_MPOLL || !(cqe->flags & IORING_CQE_F_MORE))
			VIOLATION("MORE #%u for kind %d, flags %x", r->mores, r->kind, cqe->flags);
		return;
	}
	if (cqe->flags & IORING_CQE_F_MORE)
		VIOLATION("DONE on a CQE with F_MORE (kind %d)", r->kind);
	if (r->kind == K_CHAIN && r->mores != 1)
		VIOLATION("chain DONE after %u MOREs", r->mores);
	if (bh_uring_op_busy(op))
		VIOLATION("record busy after its DONE");
	book_done(r);
}

static void on_grant(struct bh_uring_op *op, int result)
{
	struct rec *r = op->data;
	struct worker *w = r->w;

	if (r->book != B_WAITING) {
		VIOLATION("grant (%d) for a record in state %d", result, r->book);
		return;
	}
	w->waiting--;
	w->grants++;
	if (result == 0) {
		r->book = B_HELD;
		w->held_ops++;
		w->held_permits += r->n;
	} else {
		r->book = B_FREE;
		if (result != -ECANCELED)
			VIOLATION("grant failed with %d", result);
	}
}

/* ---- starting operations ------------------------------------------------ */

static void prep(struct worker *w, struct rec *r, struct io_uring_sqe **s)
{
	switch (r->kind) {
	case K_NOP:
		io_uring_prep_nop(s[0]);
		break;
	case K_READ:
	case K_READ_DL:
		io_uring_prep_read(s[0], w->pipes[below(w, NPIPES)][0], r->buf, 1, 0);
		break;
	case K_POLL:
		io_uring_prep_poll_add(s[0], w->efd, POLLIN);
		break;
	case K_MPOLL:
		io_uring_prep_poll_multishot(s[0], w->efd, POLLIN);
		break;
	case K_TIMEOUT:
		r->ts.tv_sec = 0;
		r->ts.tv_nsec = 10000 + below(w, 500000);
		io_uring_prep_timeout(s[0], &r->ts, 0, 0);
		break;
	default: /* K_CHAIN: a write, then the read of what it wrote */
		io_uring_prep_write(s[0], w->chain_pipe[1], "c", 1, 0);
		io_uring_prep_read(s[1], w->chain_pipe[0], r->buf, 1, 0);
		break;
	}
}

static void start(struct worker *w, struct rec *r)
{
	struct io_uring_sqe *s[2];
	unsigned nr;
	uint64_t deadline = BH_FOREVER;
	int ret;

	if (r->book == B_FREE) {
		r->kind = (enum kind)below(w, K_KINDS);
		r->n = 1 + below(w, 2);
	}
	nr = r->kind == K_CHAIN ? 2 : 1;
	ret = bh_uring_get_sqes(w->t, &r->op, bh, r->n, nr, s);
	if (ret == -EAGAIN) {
		io_uring_submit(&w->ring);
		return;
	}
	if (ret == -EBUSY) {
		w->rejected++;
		if (r->book == B_FREE && below(w, 2)) { /* queue instead, n = 1 */
			r->n = 1;
			ret = bh_uring_wait(w->t, &r->op, bh, 1, on_grant);
			w->waits++;
			if (ret == 1) {
				r->book = B_WAITING;
				w->waiting++;
			} else if (ret == 0) {
				r->book = B_HELD;
				w->held_ops++;
				w->held_permits += 1;
			} else if (ret != -EBUSY && ret != -EAGAIN) {
				VIOLATION("bh_uring_wait: %d", ret);
			}
		}
		return;
	}
	if (ret != 0) {
		VIOLATION("bh_uring_get_sqes: %d (book %d)", ret, r->book);
		return;
	}
	prep(w, r, s);
	if (r->kind == K_READ_DL)
		deadline = bh_now_ns() + 50 * BH_USEC + below(w, 2000) * BH_USEC;
	book_start(r);
	if ((ret = bh_uring_track(w->t, &r->op, deadline)) != 0)
		VIOLATION("bh_uring_track: %d", ret);
}

/* Up to 4 free records, one bulkhead update: NOPs through bh_uring_get_batch,
 * or write+read chains through bh_uring_get_chains; then
 * bh_uring_track_batch. */
static void start_batch(struct worker *w)
{
	struct bh_uring_op *ops[4];
	struct io_uring_sqe *sqes[8];
	bool chains = below(w, 2);
	unsigned k = 0, nr = chains ? 2 : 1;
	int got;

	for (unsigned i = below(w, NRECS), tries = 0; k < 4 && tries < 8; i = (i + 7) % NRECS, tries++) {
		struct rec *r = &w->recs[i];
		bool dup = false;

		for (unsigned j = 0; j < k; j++)
			dup |= ops[j] == &r->op;
		if (r->book == B_FREE && !dup) {
			r->kind = chains ? K_CHAIN : K_NOP;
			r->n = 1;
			ops[k++] = &r->op;
		}
	}
	if (k == 0)
		return;
	got = chains ? bh_uring_get_chains(w->t, ops, k, bh, 1, nr, sqes)
		     : bh_uring_get_batch(w->t, ops, k, bh, 1, sqes);
	if (got == -EBUSY || got == -EAGAIN) {
		w->rejected += got == -EBUSY;
		return;
	}
	if (got <= 0) {
		VIOLATION("bh_uring_get_%s: %d", chains ? "chains" : "batch", got);
		return;
	}
	for (int i = 0; i < got; i++) {
		prep(w, ops[i]->data, &sqes[(unsigned)i * nr]);
		book_start(ops[i]->data);
	}
	if ((got = bh_uring_track_batch(w->t, ops, (unsigned)got)) != 0)
		VIOLATION("bh_uring_track_batch: %d", got);
}

static void cancel(struct worker *w, struct rec *r)
{
	int ret = bh_uring_cancel(w->t, &r->op);

	if (r->book == B_INFLIGHT) {
		if (ret != 0 && ret != -EALREADY && ret != -EAGAIN)
			VIOLATION("cancel of an op in flight: %d", ret);
		w->cancels += ret == 0;
		return; /* still in flight until its final CQE */
	}
	if (r->book == B_FREE) {
		if (ret != -ENOENT)
			VIOLATION("cancel of a free record: %d", ret);
		return;
	}
	if (ret != 0)
		VIOLATION("cancel of a %s record: %d", r->book == B_HELD ? "held" : "waiting", ret);
	if (r->book == B_HELD) {
		w->held_ops--;
		w->held_permits -= r->n;
	} else {
		w->waiting--;
	}
	r->book = B_FREE;
	if (bh_uring_op_busy(&r->op))
		VIOLATION("record busy after its cancel");
}

static void poke(struct worker *w)
{
	uint64_t one = 1;

	switch (below(w, 3)) {
	case 0:
		if (write(w->pipes[below(w, NPIPES)][1], "x", 1) < 0 && errno != EAGAIN)
			VIOLATION("pipe write: %d", errno);
		break;
	case 1:
		if (write(w->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			VIOLATION("eventfd write: %d", errno);
		break;
	default:
		if (read(w->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			VIOLATION("eventfd read: %d", errno);
		break;
	}
}

/* The caller's own CQ loop: bh_uring_complete per CQE, overflow flushed by
 * hand (iterating never brings it back). */
static void own_loop(struct worker *w)
{
	for (int rounds = 0; rounds < 4; rounds++) {
		struct io_uring_cqe *cqe;
		struct bh_uring_op *op;
		unsigned head, n = 0;

		io_uring_for_each_cqe(&w->ring, head, cqe) {
			int kind = bh_uring_complete(w->t, cqe, &op);

			if (kind < 0)
				VIOLATION("bh_uring_complete: %d", kind);
			else if (kind != BH_URING_HELPER)
				on_cqe(w, cqe, kind, op);
			n++;
		}
		io_uring_cq_advance(&w->ring, n);
		if (n == 0 && !io_uring_cq_has_overflow(&w->ring))
			return;
		if (n == 0)
			io_uring_get_events(&w->ring);
	}
}

static void reap(struct worker *w, bool block)
{
	struct __kernel_timespec ts = { 0, 200000 };
	struct io_uring_cqe *cqe;
	int ret;

	if (block)
		ret = io_uring_submit_and_wait_timeout(&w->ring, &cqe, 1, &ts, NULL);
	else
		ret = io_uring_submit(&w->ring);
	if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EBUSY && ret != -EAGAIN)
		VIOLATION("submit: %d", ret);
	if (defer_taskrun)
		io_uring_get_events(&w->ring);
	if (w->id & 1) { /* odd workers walk the CQ themselves */
		own_loop(w);
		return;
	}
	if ((ret = bh_uring_reap(w->t, on_cqe, w)) < 0)
		VIOLATION("bh_uring_reap: %d", ret);
}

/* ---- checkpoints --------------------------------------------------------- */

static bool over_limit(void)
{
	struct bh_stats st;

	bh_stats(bh, &st);
	return st.in_flight > st.limit;
}

static void check_tracker(struct worker *w)
{
	struct bh_uring_stats st;

	bh_uring_stats(w->t, &st);
	if (st.strays)
		VIOLATION("worker %d: %llu stray CQEs", w->id, (unsigned long long)st.strays);
	if (st.in_flight != w->inflight_ops || st.held != w->held_ops || st.waiting != w->waiting)
		VIOLATION("worker %d: tracker says %llu/%llu/%llu in flight/held/waiting, books %llu/%llu/%llu",
			  w->id, (unsigned long long)st.in_flight, (unsigned long long)st.held,
			  (unsigned long long)st.waiting, (unsigned long long)w->inflight_ops,
			  (unsigned long long)w->held_ops, (unsigned long long)w->waiting);
}

/* Everyone is parked outside the library: only the kernel moves, and it
 * changes nothing the bulkhead counts until a CQE is handed over. */
static void checkpoint(void)
{
	struct bh_stats st;
	uint64_t held = client_held, waiting = 0;

	bh_stats(bh, &st);
	for (int i = 0; i < NWORKERS; i++) {
		held += workers[i].held_permits;
		waiting += workers[i].waiting;
		check_tracker(&workers[i]);
	}
	/* The books, not the library's own count, against the limit: a take
	 * past the limit shows in both of the library's counts alike. */
	if (held > LIMIT)
		VIOLATION("the books hold %llu permits, above the limit %d", (unsigned long long)held,
			  LIMIT);
	if (st.in_flight + st.queued != held + waiting || st.queued > waiting || st.in_flight < held)
		VIOLATION("bulkhead in_flight %llu + queued %llu != books: held %llu + waiting %llu",
			  (unsigned long long)st.in_flight, (unsigned long long)st.queued,
			  (unsigned long long)held, (unsigned long long)waiting);
	atomic_fetch_add(&checks, 1);
}

static void maybe_park(void)
{
	if (!atomic_load_explicit(&pause_req, memory_order_acquire))
		return;
	pthread_barrier_wait(&park); /* all parked: the checker looks */
	pthread_barrier_wait(&park); /* checked: carry on */
}

/* ---- threads ---------------------------------------------------------------- */

static int worker_setup(struct worker *w)
{
	struct io_uring_params p = { 0 };
	int ret;

	if (defer_taskrun)
		p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	if ((ret = io_uring_queue_init_params(64, &w->ring, &p)) < 0)
		return ret;
	if ((ret = bh_uring_create(&w->ring, 0, &w->t)) < 0)
		return ret;
	for (int i = 0; i < NPIPES; i++)
		if (pipe2(w->pipes[i], O_CLOEXEC | O_NONBLOCK) < 0)
			return -errno;
	if (pipe2(w->chain_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	if ((w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		return -errno;
	for (int i = 0; i < NRECS; i++) {
		w->recs[i].w = w;
		w->recs[i].op.data = &w->recs[i];
	}
	return 0;
}

static void worker_finish(struct worker *w)
{
	int ret;

	/* Half the workers give held permits back themselves, the other half
	 * leave them to the drain, which must make those records idle. */
	for (int i = 0; i < NRECS && w->id % 2 == 0; i++)
		if (w->recs[i].book == B_HELD)
			cancel(w, &w->recs[i]);
	ret = bh_uring_drain(w->t, bh_now_ns() + 20 * BH_SEC, on_cqe, w);
	if (ret != 0)
		VIOLATION("worker %d: drain: %d", w->id, ret);
	for (int i = 0; i < NRECS; i++) {
		struct rec *r = &w->recs[i];

		if (r->book != B_HELD)
			continue;
		if (bh_uring_op_busy(&r->op))
			VIOLATION("worker %d: record %d still held after the drain", w->id, i);
		w->held_ops--;
		w->held_permits -= r->n;
		r->book = B_FREE;
	}
	for (int i = 0; i < NRECS; i++)
		if (w->recs[i].book != B_FREE || bh_uring_op_busy(&w->recs[i].op))
			VIOLATION("worker %d: record %d left in state %d", w->id, i, w->recs[i].book);
	if (w->started != w->done || w->held_permits || w->waiting)
		VIOLATION("worker %d: %llu started, %llu done, %llu permits, %llu waiting", w->id,
			  (unsigned long long)w->started, (unsigned long long)w->done,
			  (unsigned long long)w->held_permits, (unsigned long long)w->waiting);
	check_tracker(w);
	if ((ret = bh_uring_destroy(w->t)) != 0)
		VIOLATION("worker %d: destroy: %d", w->id, ret);
	io_uring_queue_exit(&w->ring);
	for (int i = 0; i < NPIPES; i++) {
		close(w->pipes[i][0]);
		close(w->pipes[i][1]);
	}
	close(w->chain_pipe[0]);
	close(w->chain_pipe[1]);
	close(w->efd);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int ret = worker_setup(w);

	if (ret < 0) { /* the checker would wait for us forever */
		fprintf(stderr, "stress_uring: worker %d setup: %s\n", w->id, strerror(-ret));
		exit(1);
	}
	for (unsigned iter = 0; !atomic_load_explicit(&stop, memory_order_relaxed); iter++) {
		struct rec *r = &w->recs[below(w, NRECS)];
		unsigned dice = below(w, 100);

		maybe_park();
		if (dice < 27) {
			if (r->book == B_FREE || r->book == B_HELD)
				start(w, r);
		} else if (dice < 30) {
			start_batch(w);
		} else if (dice < 50) {
			cancel(w, r);
		} else if (dice < 75) {
			poke(w);
		} else {
			reap(w, dice >= 95);
		}
		if (iter % 16 == 0 && over_limit())
			VIOLATION("in_flight above the limit");
	}
	worker_finish(w);
	return NULL;
}

/* A plain blocking caller on the same bulkhead: queue fairness with the
 * rings' waiters, and releases on a thread that owns no ring. */
static void *client_main(void *arg)
{
	uint64_t rng = (uint64_t)(uintptr_t)arg | 1;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int ret;

		maybe_park();
		ret = bh_acquire(bh, 1, bh_now_ns() + (rnd(&rng) % 2000) * BH_USEC);
		if (ret == 0) {
			client_held = 1;
			atomic_fetch_add(&client_ok, 1);
			maybe_park();
			client_held = 0;
			bh_release(bh, 1);
		} else if (ret == -EBUSY || ret == -ETIMEDOUT) {
			atomic_fetch_add(&client_busy, 1);
			sched_yield();
		} else {
			VIOLATION("client: bh_acquire: %d", ret);
		}
	}
	return NULL;
}

static bool probe_defer_taskrun(void)
{
	struct io_uring r;
	struct io_uring_params p = { .flags = IORING_SETUP_SINGLE_ISSUER |
					      IORING_SETUP_DEFER_TASKRUN };

	if (io_uring_queue_init_params(4, &r, &p) < 0)
		return false;
	io_uring_queue_exit(&r);
	return true;
}

int main(void)
{
	const char *secs_env = getenv("BH_STRESS_SECONDS"), *seed_env = getenv("BH_STRESS_SEED");
	double secs = secs_env ? atof(secs_env) : 3.0;
	uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : bh_now_ns();
	struct bh_config cfg = { .max_concurrent = LIMIT, .queue_capacity = QUEUE };
	struct io_uring probe;
	pthread_t client;
	uint64_t end, next_check;
	struct bh_stats st;
	struct worker tot = { 0 };

	printf("stress_uring: seed %llu (BH_STRESS_SEED to replay)\n", (unsigned long long)seed);
	fflush(stdout);
	if (io_uring_queue_init(4, &probe, 0) < 0) {
		printf("stress_uring: no io_uring here: skip\n");
		return 77;
	}
	io_uring_queue_exit(&probe);
	defer_taskrun = (seed & 2) && probe_defer_taskrun();
	cfg.flags = (seed & 1) ? BH_FAIR : 0;
	if (bh_create(&cfg, &bh) < 0)
		return 1;
	pthread_barrier_init(&park, NULL, NWORKERS + 2);
	for (int i = 0; i < NWORKERS; i++) {
		workers[i].id = i;
		workers[i].rng = (seed + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)) | 1;
		pthread_create(&workers[i].th, NULL, worker_main, &workers[i]);
	}
	pthread_create(&client, NULL, client_main, (void *)(uintptr_t)(seed * 31));
	end = bh_now_ns() + (uint64_t)(secs * 1e9);
	next_check = bh_now_ns() + 20 * BH_MSEC;
	while (bh_now_ns() < end) {
		struct timespec ts = { 0, 2 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		if (bh_now_ns() < next_check)
			continue;
		atomic_store_explicit(&pause_req, 1, memory_order_release);
		pthread_barrier_wait(&park);
		atomic_store_explicit(&pause_req, 0, memory_order_relaxed);
		checkpoint();
		pthread_barrier_wait(&park);
		next_check = bh_now_ns() + 20 * BH_MSEC;
	}
	atomic_store(&stop, 1);
	pthread_join(client, NULL);
	for (int i = 0; i < NWORKERS; i++) {
		struct worker *w = &workers[i];

		pthread_join(w->th, NULL);
		tot.started += w->started;
		tot.done += w->done;
		tot.mores += w->mores;
		tot.cancels += w->cancels;
		tot.rejected += w->rejected;
		tot.waits += w->waits;
		tot.grants += w->grants;
	}
	bh_stats(bh, &st);
	if (st.in_flight || st.queued || st.over_released)
		VIOLATION("at the end: in_flight %llu, queued %llu, over_released %llu",
			  (unsigned long long)st.in_flight, (unsigned long long)st.queued,
			  (unsigned long long)st.over_released);
	/* stress/run.sh takes "NAME: PASS " as the verdict */
	printf("stress_uring: %s %s%s, %.1f s: ops started %llu, done %llu, more %llu, cancels %llu, "
	       "rejected %llu, waits %llu, grants %llu, client ok %llu busy %llu; checks %llu, "
	       "violations %d\n",
	       atomic_load(&violations) ? "FAIL" : "PASS", cfg.flags ? "fair" : "unfair", defer_taskrun ? ", defer_taskrun" : "", secs,
	       (unsigned long long)tot.started, (unsigned long long)tot.done,
	       (unsigned long long)tot.mores, (unsigned long long)tot.cancels,
	       (unsigned long long)tot.rejected, (unsigned long long)tot.waits,
	       (unsigned long long)tot.grants, (unsigned long long)atomic_load(&client_ok),
	       (unsigned long long)atomic_load(&client_busy), (unsigned long long)atomic_load(&checks),
	       atomic_load(&violations));
	pthread_barrier_destroy(&park);
	bh_destroy(bh);
	return atomic_load(&violations) ? 1 : 0;
}
