/* The demo's dependencies: a TCP server on 127.0.0.1 that answers each
 * request line "<id>\n" with "<id> <answer>\n" after its latency. One epoll
 * thread serves every connection, and a timerfd fires at the earliest due
 * answer, so thousands of slow requests cost no threads. A connection
 * carries one request at a time (its caller waits for the answer).
 *
 * By default every request is served at once, however many there are. With
 * a capacity K (backend_set_capacity) it serves K at a time, in the order
 * they came, and the rest wait; like most servers it does not notice a
 * caller that left: a request it has read is served to the end, its answer
 * going nowhere, and holds its place until then. */
#define _GNU_SOURCE /* accept4, pthread_setname_np */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cli.h"
#include "demo.h"

struct bconn {
	int fd;
	char buf[64];
	size_t len;
	uint64_t due_ns; /* 0: not being served */
	uint64_t waiting; /* nonzero: waiting for a slot (arrival order) */
	uint64_t id;
};

static bool pending(const struct bconn *c)
{
	return c->due_ns || c->waiting;
}

uint64_t backend_answer(uint64_t id)
{
	/* splitmix64's finaliser: any wrong or stale answer shows. */
	id += 0x9e3779b97f4a7c15ull;
	id = (id ^ (id >> 30)) * 0xbf58476d1ce4e5b9ull;
	id = (id ^ (id >> 27)) * 0x94d049bb133111ebull;
	return id ^ (id >> 31);
}

static double uniform01(uint64_t *s)
{
	*s ^= *s << 13; /* xorshift64 */
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (double)(*s >> 11) / (double)(1ull << 53);
}

static uint64_t draw_latency(struct backend *b)
{
	double base = (double)atomic_load_explicit(&b->latency_ns, memory_order_relaxed);

	return (uint64_t)(base * (1.0 + b->jitter * (2.0 * uniform01(&b->rng) - 1.0)));
}

static int epoll_add(struct backend *b, int fd, void *ptr)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = ptr };

	return epoll_ctl(b->epoll_fd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* Only the backend's thread changes serving; others read it. */
static void serving_add(struct backend *b)
{
	uint32_t n = atomic_load_explicit(&b->serving, memory_order_relaxed) + 1;

	atomic_store_explicit(&b->serving, n, memory_order_relaxed);
	if (n > atomic_load_explicit(&b->serving_peak, memory_order_relaxed))
		atomic_store_explicit(&b->serving_peak, n, memory_order_relaxed);
}

static void serving_sub(struct backend *b)
{
	atomic_fetch_sub_explicit(&b->serving, 1, memory_order_relaxed);
}

static void conn_free(struct backend *b, size_t i)
{
	struct bconn *c = b->conns[i];

	if (pending(c))
		serving_sub(b);
	if (c->due_ns)
		b->in_service--;
	if (c->fd >= 0)
		close(c->fd); /* also leaves the epoll set */
	free(c);
	b->conns[i] = b->conns[--b->nconns];
}

/* The caller is gone. Without a capacity its request goes with it; with
 * one, the request stays to be served (fd -1: the answer goes nowhere). */
static void conn_close(struct backend *b, size_t i)
{
	struct bconn *c = b->conns[i];

	if (!pending(c) || !atomic_load_explicit(&b->capacity, memory_order_relaxed)) {
		conn_free(b, i);
		return;
	}
	close(c->fd);
	c->fd = -1;
}

static int conn_add(struct backend *b, int fd)
{
	struct bconn *c;

	if (b->nconns == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 64;
		struct bconn **n = realloc(b->conns, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		b->conns = n;
		b->cap = cap;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = fd;
	if (epoll_add(b, fd, c) < 0) {
		free(c);
		return -errno;
	}
	b->conns[b->nconns++] = c;
	return 0;
}

static void accept_all(struct backend *b)
{
	for (;;) {
		int fd = accept4(b->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int one = 1;

		if (fd < 0)
			return; /* EAGAIN, or a transient error: epoll says when to retry */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (conn_add(b, fd) < 0)
			close(fd);
	}
}

/* Take a whole request line, if one is there, and schedule its answer. */
static void take_request(struct backend *b, struct bconn *c)
{
	char *nl = memchr(c->buf, '\n', c->len);

	if (!nl || pending(c))
		return;
	*nl = '\0';
	c->id = strtoull(c->buf, NULL, 10);
	c->len -= (size_t)(nl + 1 - c->buf);
	memmove(c->buf, nl + 1, c->len);
	c->waiting = ++b->arrivals;
	serving_add(b);
}

static bool has_slot(struct backend *b)
{
	uint32_t cap = atomic_load_explicit(&b->capacity, memory_order_relaxed);

	return !cap || b->in_service < cap;
}

/* Start serving waiting requests, first come first, while slots are free. */
static void start_waiting(struct backend *b)
{
	uint64_t now = bh_now_ns();

	while (has_slot(b)) {
		struct bconn *first = NULL;

		for (size_t i = 0; i < b->nconns; i++)
			if (b->conns[i]->waiting && (!first || b->conns[i]->waiting < first->waiting))
				first = b->conns[i];
		if (!first)
			return;
		first->waiting = 0;
		first->due_ns = now + draw_latency(b);
		b->in_service++;
	}
}

/* Returns false when the connection is finished (EOF, error, garbage). */
static bool conn_read(struct backend *b, struct bconn *c)
{
	ssize_t n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return false;
	if (n > 0)
		c->len += (size_t)n;
	if (c->len == sizeof(c->buf) && !memchr(c->buf, '\n', c->len))
		return false;
	take_request(b, c);
	return true;
}

static bool conn_answer(struct backend *b, struct bconn *c)
{
	char out[64];
	int len = snprintf(out, sizeof(out), "%" PRIu64 " %" PRIu64 "\n", c->id,
			   backend_answer(c->id));

	c->due_ns = 0;
	b->in_service--;
	serving_sub(b);
	if (c->fd < 0)
		return false; /* served for a caller that left */
	if (send(c->fd, out, (size_t)len, MSG_NOSIGNAL) != len)
		return false; /* the caller gave up and left: fine */
	atomic_fetch_add_explicit(&b->answered, 1, memory_order_relaxed);
	take_request(b, c);
	return true;
}

/* Answer everything due, start what waits for the slots that freed, then
 * arm the timer for the next due answer. */
static void answer_due(struct backend *b)
{
	uint64_t now = bh_now_ns(), next = 0;
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };

	for (size_t i = 0; i < b->nconns;) {
		struct bconn *c = b->conns[i];

		if (c->due_ns && c->due_ns <= now && !conn_answer(b, c)) {
			conn_free(b, i);
			continue;
		}
		i++;
	}
	start_waiting(b);
	for (size_t i = 0; i < b->nconns; i++) {
		struct bconn *c = b->conns[i];

		if (c->due_ns && (!next || c->due_ns < next))
			next = c->due_ns;
	}
	if (next) { /* absolute, CLOCK_MONOTONIC: the clock of bh_now_ns */
		its.it_value.tv_sec = (time_t)(next / BH_SEC);
		its.it_value.tv_nsec = (long)(next % BH_SEC);
	}
	timerfd_settime(b->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void on_conn_event(struct backend *b, struct bconn *c)
{
	for (size_t i = 0; i < b->nconns; i++)
		if (b->conns[i] == c) {
			if (!conn_read(b, c))
				conn_close(b, i);
			return;
		}
}

static void *backend_main(void *arg)
{
	struct backend *b = arg;
	struct epoll_event ev[64];

	pthread_setname_np(pthread_self(), "bhd-backend");
	for (;;) {
		int n = epoll_wait(b->epoll_fd, ev, 64, -1);
		uint64_t drain;

		if (n < 0 && errno != EINTR) {
			b->error = -errno;
			break;
		}
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;

			if (p == &b->stop_fd)
				goto out;
			if (p == &b->listen_fd)
				accept_all(b);
			else if (p == &b->timer_fd) {
				if (read(b->timer_fd, &drain, sizeof(drain)) < 0)
					continue; /* EAGAIN: nothing expired after all */
			} else
				on_conn_event(b, p);
		}
		answer_due(b);
	}
out:
	while (b->nconns)
		conn_free(b, b->nconns - 1);
	return NULL;
}

static int listen_loopback(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 1024) ||
	    getsockname(fd, (struct sockaddr *)&a, &len)) {
		int e = -errno;

		close(fd);
		return e;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

static void close_fds(struct backend *b)
{
	int *fds[] = { &b->listen_fd, &b->epoll_fd, &b->timer_fd, &b->stop_fd };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	free(b->conns);
	b->conns = NULL;
	b->cap = 0;
}

int backend_start(struct backend *b, const char *name, double latency_s, double jitter,
		  uint64_t seed)
{
	int r;

	memset(b, 0, sizeof(*b));
	b->name = name;
	b->jitter = jitter;
	b->rng = seed | 1;
	atomic_init(&b->latency_ns, sec_to_ns(latency_s));
	atomic_init(&b->serving, 0);
	atomic_init(&b->serving_peak, 0);
	atomic_init(&b->capacity, 0);
	b->listen_fd = listen_loopback(&b->port);
	b->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	b->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	b->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (b->listen_fd < 0 || b->epoll_fd < 0 || b->timer_fd < 0 || b->stop_fd < 0) {
		r = b->listen_fd < 0 ? b->listen_fd : -errno;
		goto fail;
	}
	if ((r = epoll_add(b, b->listen_fd, &b->listen_fd)) < 0 ||
	    (r = epoll_add(b, b->timer_fd, &b->timer_fd)) < 0 ||
	    (r = epoll_add(b, b->stop_fd, &b->stop_fd)) < 0)
		goto fail;
	r = -pthread_create(&b->thread, NULL, backend_main, b);
	if (r == 0)
		return 0;
fail:
	close_fds(b);
	return r;
}

int backends_start(struct backend be[NDEPS], const struct demo_config *cfg)
{
	for (int d = 0; d < NDEPS; d++) {
		int r = backend_start(&be[d], dep_name[d], cfg->latency_s[d], cfg->jitter,
				      (uint64_t)cfg->seed * 31 + (uint64_t)d);

		if (r < 0) {
			fprintf(stderr, "%s: cannot start the %s backend on loopback: %s\n",
				cli_prog, dep_name[d], strerror(-r));
			while (d-- > 0)
				backend_stop(&be[d]);
			return r;
		}
	}
	return 0;
}

void backend_set_latency(struct backend *b, double latency_s)
{
	atomic_store_explicit(&b->latency_ns, sec_to_ns(latency_s), memory_order_relaxed);
}

/* Read by the backend's thread at its next event (an answer due, a request,
 * a connection): under load, within one answer's time. */
void backend_set_capacity(struct backend *b, uint32_t k)
{
	atomic_store_explicit(&b->capacity, k, memory_order_relaxed);
}

uint32_t backend_serving(struct backend *b)
{
	return atomic_load_explicit(&b->serving, memory_order_relaxed);
}

uint32_t backend_take_peak(struct backend *b)
{
	/* A new peak starts from what is served now. */
	return atomic_exchange_explicit(&b->serving_peak, backend_serving(b),
					memory_order_relaxed);
}

void backend_stop(struct backend *b)
{
	uint64_t one = 1;

	if (write(b->stop_fd, &one, sizeof(one)) != sizeof(one))
		abort(); /* an eventfd write of 1 cannot fail */
	pthread_join(b->thread, NULL);
	close_fds(b);
}
