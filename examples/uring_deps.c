/* One io_uring event loop calling two dependencies over loopback, each
 * behind its own bulkhead: "inventory" answers at once, "payment" has
 * slowed down (100 or 400 ms per call). Every request calls both. Payment
 * gets 4 calls at a time, 4 more may queue - without ever blocking the loop
 * (bh_uring_wait) - and the rest are shed at once. Each payment call has a
 * kernel deadline of 200 ms (a linked timeout), shorter than the caller's
 * patience, and its permit stays held until the kernel has really finished
 * the call. Inventory never notices payment's trouble.
 *
 * The payment budget is 200 ms per request, queueing included; the kernel
 * ends a call at that deadline, and only then is its permit given back.
 *
 *   cc uring_deps.c $(pkg-config --cflags --libs bulkhead-uring) -pthread -o uring_deps
 *
 * A call is one tracked op: a chain CONNECT -> SEND -> RECV on a fresh
 * socket. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bulkhead.h>
#include <bulkhead/uring.h>

#define REQUESTS 40
#define TICK_UD 1 /* user_data of the loop's own timer */

/* ---- two dependencies, as plain blocking servers ------------------------ */

struct dep_server {
	const char *name;
	int listener;
	uint16_t port;
	int slow; /* 0: answer at once; 1: 100 or 400 ms */
};

static void *serve_one(void *arg)
{
	long fd_slow = (long)(intptr_t)arg;
	int fd = (int)(fd_slow >> 1);
	uint64_t req;

	while (recv(fd, &req, sizeof(req), MSG_WAITALL) == sizeof(req)) {
		if (fd_slow & 1) {
			struct timespec ts = { 0, (req % 2 ? 400 : 100) * 1000000L };

			nanosleep(&ts, NULL);
		}
		if (send(fd, &req, sizeof(req), MSG_NOSIGNAL) != sizeof(req))
			break;
	}
	close(fd);
	return NULL;
}

static void *serve(void *arg)
{
	struct dep_server *s = arg;
	int fd;

	while ((fd = accept(s->listener, NULL, NULL)) >= 0) {
		pthread_t th;

		pthread_create(&th, NULL, serve_one, (void *)(intptr_t)((long)fd << 1 | s->slow));
		pthread_detach(th);
	}
	return NULL;
}

static int start_server(struct dep_server *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	pthread_t th;

	s->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->listener < 0 || bind(s->listener, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(s->listener, 128) < 0 || getsockname(s->listener, (struct sockaddr *)&a, &len) < 0)
		return -1;
	s->port = ntohs(a.sin_port);
	return pthread_create(&th, NULL, serve, s) == 0 ? 0 : -1;
}

/* ---- the client side: one loop, one ring -------------------------------- */

struct dep {
	const char *name;
	bulkhead_t *bh;
	struct sockaddr_in addr;
	uint64_t budget_ns; /* the kernel's deadline for one call */
	unsigned ok, failed, timed_out, shed, queued;
	uint64_t worst_ns;
};

struct call {
	struct bh_uring_op op; /* first: the tracker's record */
	struct dep *dep;
	int fd;
	bool broken; /* connect or send failed */
	uint64_t id, reply, started_ns;
};

static struct io_uring ring;
static bh_uring_t *tracker;
static unsigned calls_open;

static void drop(struct call *c)
{
	uint64_t took = bh_now_ns() - c->started_ns;

	if (took > c->dep->worst_ns)
		c->dep->worst_ns = took;
	if (c->fd >= 0)
		close(c->fd);
	free(c);
	calls_open--;
}

/* The call's final CQE (the RECV's): the kernel is done with it. */
static void finish(struct call *c, int res)
{
	struct dep *d = c->dep;

	if (res == sizeof(c->reply) && c->reply == c->id)
		d->ok++;
	else if (!c->broken && (res == -ECANCELED || res == -EINTR))
		d->timed_out++; /* the kernel's deadline ended it */
	else
		d->failed++;
	drop(c);
}

/* No permit (bulkhead and queue full, closed, or the deadline passed while
 * queued): the caller hears at once, and nothing was sent. */
static void shed(struct call *c)
{
	c->dep->shed++;
	drop(c);
}

/* The call's three SQEs, one op, with the kernel's deadline: the request's
 * budget, queueing included. Takes a permit, or uses the one granted. */
static int launch(struct call *c)
{
	uint64_t deadline = c->started_ns + c->dep->budget_ns;
	struct io_uring_sqe *s[3];
	int r;

	if (bh_now_ns() >= deadline)
		return -ETIMEDOUT;
	if ((r = bh_uring_get_sqes(tracker, &c->op, c->dep->bh, 1, 3, s)) < 0)
		return r;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	io_uring_prep_connect(s[0], c->fd, (struct sockaddr *)&c->dep->addr, sizeof(c->dep->addr));
	io_uring_prep_send(s[1], c->fd, &c->id, sizeof(c->id), MSG_NOSIGNAL);
	io_uring_prep_recv(s[2], c->fd, &c->reply, sizeof(c->reply), MSG_WAITALL);
	return bh_uring_track(tracker, &c->op, deadline);
}

/* Runs on this thread when a queued call gets its permit (or fails). */
static void on_permit(struct bh_uring_op *op, int result)
{
	struct call *c = op->data;

	if (result == 0 && launch(c) == 0)
		return;
	if (bh_uring_op_busy(op))
		bh_uring_cancel(tracker, op); /* could not launch: give the permit back */
	shed(c);
}

static void call_dep(struct dep *d, uint64_t id)
{
	struct call *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return;
	c->dep = d;
	c->id = id;
	c->fd = -1;
	c->started_ns = bh_now_ns();
	c->op.data = c;
	calls_open++;
	r = launch(c);
	if (r == -EBUSY) { /* full: queue without blocking the loop */
		r = bh_uring_wait(tracker, &c->op, d->bh, 1, on_permit);
		if (r == 1) {
			d->queued++;
			return;
		}
		if (r == 0 && (r = launch(c)) < 0) /* freed meanwhile: ours now */
			bh_uring_cancel(tracker, &c->op);
	}
	if (r < 0)
		shed(c); /* -EBUSY: the queue is full too */
}

static void on_cqe(void *ctx, struct io_uring_cqe *cqe, int kind, struct bh_uring_op *op)
{
	unsigned *ticks = ctx;

	if (kind == BH_URING_FOREIGN) { /* our timer */
		if (cqe->user_data == TICK_UD)
			(*ticks)++;
		return;
	}
	if (kind == BH_URING_DONE) /* res of the last CQE: the RECV's */
		finish(op->data, cqe->res);
	else if (cqe->res < 0) /* connect or send failed: the RECV will say -ECANCELED */
		((struct call *)op->data)->broken = true;
}

static void arm_tick(struct __kernel_timespec *ts)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

	io_uring_prep_timeout(sqe, ts, 0, 0);
	sqe->user_data = TICK_UD;
}

static void report(const struct dep *d)
{
	struct bh_stats st;

	bh_stats(d->bh, &st);
	printf("%-9s ok %2u, ended by kernel deadline %2u, failed %u, shed %2u, queued %2u; "
	       "slowest %5.1f ms; in flight now %llu\n",
	       d->name, d->ok, d->timed_out, d->failed, d->shed, d->queued, d->worst_ns / 1e6,
	       (unsigned long long)st.in_flight);
}

int main(void)
{
	struct dep_server fast_srv = { "inventory", -1, 0, 0 }, slow_srv = { "payment", -1, 0, 1 };
	struct bh_config fast_cfg = { .max_concurrent = 8, .queue_capacity = 16, .flags = BH_FAIR };
	struct bh_config slow_cfg = { .max_concurrent = 4, .queue_capacity = 4, .flags = BH_FAIR };
	struct dep fast = { .name = "inventory", .budget_ns = 50 * BH_MSEC };
	struct dep slow = { .name = "payment", .budget_ns = 200 * BH_MSEC };
	struct __kernel_timespec tick = { 0, 10 * 1000 * 1000 };
	unsigned ticks = 0, sent = 0;
	int r;

	if (start_server(&fast_srv) < 0 || start_server(&slow_srv) < 0) {
		perror("server");
		return 1;
	}
	if ((r = io_uring_queue_init(64, &ring, 0)) < 0) {
		fprintf(stderr, "io_uring: %s\n", strerror(-r));
		return 77;
	}
	if (bh_create(&fast_cfg, &fast.bh) < 0 || bh_create(&slow_cfg, &slow.bh) < 0 ||
	    bh_uring_create(&ring, 0, &tracker) < 0)
		return 1;
	fast.addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(fast_srv.port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	slow.addr = fast.addr;
	slow.addr.sin_port = htons(slow_srv.port);

	/* Every 10 ms, 2 new requests, each calling both dependencies. */
	arm_tick(&tick);
	while (sent < REQUESTS || calls_open) {
		unsigned before = ticks;

		io_uring_submit_and_wait(&ring, 1);
		bh_uring_reap(tracker, on_cqe, &ticks);
		if (ticks == before)
			continue;
		for (int i = 0; i < 2 && sent < REQUESTS; i++, sent++) {
			call_dep(&fast, sent);
			call_dep(&slow, sent);
		}
		if (sent < REQUESTS)
			arm_tick(&tick);
	}
	report(&fast);
	report(&slow);
	bh_uring_drain(tracker, BH_FOREVER, NULL, NULL); /* before the ring goes */
	bh_uring_destroy(tracker);
	io_uring_queue_exit(&ring);
	bh_destroy(fast.bh);
	bh_destroy(slow.bh);
	return 0;
}
