/* The order service under test and the load that drives it.
 *
 * Like a Tomcat connector: orders wait in a bounded accept queue for one of
 * a fixed pool of workers, and a worker makes its dependency call with
 * blocking socket I/O. Every order carries a deadline, and the worker honours
 * it (drops orders that expired in the queue, bounds the call by what is
 * left), so the unisolated run is a fair baseline, not a strawman.
 *
 * With isolation, each dependency sits behind its own bulkhead: a worker
 * takes a permit (waiting at most its queue-wait budget) before the call
 * and gives it back after. This is the core bh_acquire; a thread-pool
 * bulkhead (bh_pool_call, <bulkhead/pool.h>) would replace
 * guard_enter/guard_leave. */
#define _GNU_SOURCE /* ppoll, pthread_setname_np */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bulkhead/adaptive.h"
#include "demo.h"

struct order {
	uint64_t id, arrival_ns, deadline_ns; /* absolute, bh_now_ns() */
	enum dep dep;
};

/* Orders waiting for a worker; pushing never blocks (open loop). A popped
 * order counts as active until its worker is done with it, so "nothing
 * queued and nothing active" is one observation under the lock. */
struct accept_queue {
	pthread_mutex_t lock;
	pthread_cond_t nonempty;
	struct order *ring;
	uint32_t cap, head, n, active;
	bool closed;
};

struct worker {
	struct service *svc;
	pthread_t thread;
	int fd[NDEPS]; /* one kept-alive connection per dependency, -1: none */
	bool started;
};

struct service {
	struct service_params p;
	struct accept_queue q;
	bulkhead_t *bh[NDEPS];
	bh_adaptive_t *ctl[NDEPS];
	struct worker *w;
	pthread_t generator;
	bool generator_started;
	int stop_fd; /* eventfd: readable once the service stops */
	_Atomic bool stop_load, load_done;
	_Atomic uint64_t offered[NDEPS];
	_Atomic uint32_t held[NDEPS];
	_Atomic uint64_t refused_releases;
	_Atomic uint64_t late_max_ns; /* the generator's, only it writes */
};

const char *const dep_name[NDEPS] = { "inventory", "payment" };

/* ---- the accept queue ------------------------------------------------------ */

static int aq_init(struct accept_queue *q, uint32_t cap)
{
	memset(q, 0, sizeof(*q));
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->nonempty, NULL);
	q->ring = calloc(cap ? cap : 1, sizeof(*q->ring));
	q->cap = cap;
	return q->ring ? 0 : -ENOMEM;
}

static void aq_destroy(struct accept_queue *q)
{
	pthread_cond_destroy(&q->nonempty);
	pthread_mutex_destroy(&q->lock);
	free(q->ring);
}

static bool aq_push(struct accept_queue *q, const struct order *o)
{
	bool ok;

	pthread_mutex_lock(&q->lock);
	ok = q->n < q->cap && !q->closed;
	if (ok) {
		q->ring[(q->head + q->n) % q->cap] = *o;
		q->n++;
		pthread_cond_signal(&q->nonempty);
	}
	pthread_mutex_unlock(&q->lock);
	return ok;
}

/* Blocks for the next order; false once the queue is closed. */
static bool aq_pop(struct accept_queue *q, struct order *o)
{
	bool ok;

	pthread_mutex_lock(&q->lock);
	while (q->n == 0 && !q->closed)
		pthread_cond_wait(&q->nonempty, &q->lock);
	ok = !q->closed;
	if (ok) {
		*o = q->ring[q->head];
		q->head = (q->head + 1) % q->cap;
		q->n--;
		q->active++;
	}
	pthread_mutex_unlock(&q->lock);
	return ok;
}

/* The worker is done with the order it popped. */
static void aq_done(struct accept_queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->active--;
	pthread_mutex_unlock(&q->lock);
}

static void aq_counts(struct accept_queue *q, uint32_t *queued, uint32_t *active)
{
	pthread_mutex_lock(&q->lock);
	*queued = q->n;
	*active = q->active;
	pthread_mutex_unlock(&q->lock);
}

static void aq_close(struct accept_queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed = true;
	pthread_cond_broadcast(&q->nonempty);
	pthread_mutex_unlock(&q->lock);
}

/* After the close, with the workers gone: the orders no worker took. */
static bool aq_take_left(struct accept_queue *q, struct order *o)
{
	if (q->n == 0)
		return false;
	*o = q->ring[q->head];
	q->head = (q->head + 1) % q->cap;
	q->n--;
	return true;
}

/* ---- a blocking call to a dependency ------------------------------------- */

/* Close with RST: a caller that gave up must not leave TIME_WAIT behind
 * for every timed-out call. */
static void drop_conn(int *fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (*fd < 0)
		return;
	setsockopt(*fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(*fd);
	*fd = -1;
}

int demo_connect_loopback(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* Wait until fd is readable, the deadline passes (-ETIMEDOUT) or the
 * service stops (-ECANCELED). */
static int wait_readable(int fd, int stop_fd, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd pfd[2] = { { .fd = fd, .events = POLLIN },
					 { .fd = stop_fd, .events = POLLIN } };
		uint64_t now = bh_now_ns();
		struct timespec ts;
		int r;

		if (now >= deadline_ns)
			return -ETIMEDOUT;
		ts.tv_sec = (time_t)((deadline_ns - now) / BH_SEC);
		ts.tv_nsec = (long)((deadline_ns - now) % BH_SEC);
		r = ppoll(pfd, 2, &ts, NULL);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0 && pfd[1].revents)
			return -ECANCELED;
		if (r > 0)
			return 0;
	}
}

static int read_answer(int fd, int stop_fd, uint64_t id, uint64_t deadline_ns)
{
	char buf[64];
	size_t len = 0;
	uint64_t got_id, answer;

	while (!memchr(buf, '\n', len)) {
		int r = wait_readable(fd, stop_fd, deadline_ns);
		ssize_t n;

		if (r < 0)
			return r;
		n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		len += (size_t)n;
		if (len == sizeof(buf) - 1)
			return -EPROTO;
	}
	buf[len] = '\0';
	if (sscanf(buf, "%" SCNu64 " %" SCNu64, &got_id, &answer) != 2 || got_id != id ||
	    answer != backend_answer(id))
		return -EPROTO;
	return 0;
}

/* One request, one answer, on the worker's kept-alive connection. Any
 * failure closes it: after a timeout the late answer must not be read as
 * the next call's. */
static int dep_call(struct worker *w, enum dep d, uint64_t id, uint64_t deadline_ns)
{
	struct service *s = w->svc;
	char req[32];
	int len = snprintf(req, sizeof(req), "%" PRIu64 "\n", id), r;

	if (w->fd[d] < 0) {
		w->fd[d] = demo_connect_loopback(s->p.port[d]);
		if (w->fd[d] < 0) {
			r = w->fd[d];
			w->fd[d] = -1;
			return r;
		}
	}
	if (send(w->fd[d], req, (size_t)len, MSG_NOSIGNAL) != len)
		r = -EPIPE;
	else
		r = read_answer(w->fd[d], s->stop_fd, id, deadline_ns);
	if (r < 0)
		drop_conn(&w->fd[d]);
	return r;
}

/* ---- isolation ------------------------------------------------------------ */

/* Take a permit for a call to d. Time spent queued is the caller's: the
 * wait never outlasts the order's deadline, nor the queue-wait budget when
 * one is set. */
static enum outcome guard_enter(struct service *s, enum dep d, uint64_t deadline_ns)
{
	uint64_t wait = s->p.queue_wait_ns[d], until = deadline_ns;

	if (!s->bh[d])
		return OUT_OK;
	if (wait && bh_now_ns() + wait < until)
		until = bh_now_ns() + wait;
	switch (bh_acquire(s->bh[d], 1, until)) {
	case 0: return OUT_OK;
	case -EBUSY: return OUT_REJECTED;
	case -ETIMEDOUT: return OUT_QUEUE_TIMEOUT;
	case -ESHUTDOWN: return OUT_SHUTDOWN;
	default: return OUT_CALL_ERROR;
	}
}

static void guard_leave(struct service *s, enum dep d)
{
	if (s->bh[d] && bh_release(s->bh[d], 1) != 0)
		atomic_fetch_add_explicit(&s->refused_releases, 1, memory_order_relaxed);
}

/* ---- workers ------------------------------------------------------------- */

static enum outcome call_outcome(int r)
{
	switch (r) {
	case 0: return OUT_OK;
	case -ETIMEDOUT: return OUT_CALL_TIMEOUT;
	case -ECANCELED: return OUT_SHUTDOWN;
	default: return OUT_CALL_ERROR;
	}
}

/* What a call tells d's controller: its time from the grant, and whether
 * it was a sign of overload (a timeout) or says nothing (it was stopped). */
static void adaptive_sample(struct service *s, enum dep d, uint64_t granted_ns, enum outcome out)
{
	enum bh_outcome o = out == OUT_OK ? BH_OK : out == OUT_CALL_TIMEOUT ? BH_DROPPED : BH_IGNORE;

	if (s->ctl[d])
		bh_adaptive_sample(s->ctl[d], bh_now_ns() - granted_ns, o);
}

static enum outcome serve(struct worker *w, const struct order *o)
{
	struct service *s = w->svc;
	enum outcome out;

	if (bh_now_ns() >= o->deadline_ns)
		return OUT_EXPIRED; /* its caller gave up while it queued */
	atomic_fetch_add_explicit(&s->held[o->dep], 1, memory_order_relaxed);
	out = guard_enter(s, o->dep, o->deadline_ns);
	if (out == OUT_OK) {
		uint64_t granted = bh_now_ns();

		out = call_outcome(dep_call(w, o->dep, o->id, o->deadline_ns));
		adaptive_sample(s, o->dep, granted, out);
		guard_leave(s, o->dep);
	}
	atomic_fetch_sub_explicit(&s->held[o->dep], 1, memory_order_relaxed);
	return out;
}

/* Times are what the order's caller saw: one who gave up at the deadline
 * saw nothing later, and an answer after it is no answer. */
static void record(struct service *s, const struct order *o, enum outcome out)
{
	uint64_t now = bh_now_ns();

	if (now > o->deadline_ns) {
		now = o->deadline_ns;
		if (out == OUT_OK)
			out = OUT_CALL_TIMEOUT;
	}
	results_add(s->p.res, o->arrival_ns - s->p.t0, now - s->p.t0, o->dep, out);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct service *s = w->svc;
	struct order o;

	pthread_setname_np(pthread_self(), "bhd-worker");
	while (aq_pop(&s->q, &o)) {
		record(s, &o, serve(w, &o));
		aq_done(&s->q);
	}
	for (int d = 0; d < NDEPS; d++)
		drop_conn(&w->fd[d]);
	return NULL;
}

/* ---- the load generator -------------------------------------------------- */

static double rng_uniform(uint64_t *x)
{
	*x ^= *x << 13; /* xorshift64 */
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (double)(*x >> 11) / (double)(1ull << 53);
}

static void sleep_until(uint64_t t_ns)
{
	struct timespec ts = { .tv_sec = (time_t)(t_ns / BH_SEC),
			       .tv_nsec = (long)(t_ns % BH_SEC) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* How late the generator woke for an order: a machine that stalls the
 * demo for a while sends a burst that no bulkhead was sized for, and the
 * test reads this to tell a stall from a result. */
static void note_lateness(struct service *s, uint64_t due_ns)
{
	uint64_t late = bh_now_ns() - due_ns;

	if (late > atomic_load_explicit(&s->late_max_ns, memory_order_relaxed))
		atomic_store_explicit(&s->late_max_ns, late, memory_order_relaxed);
}

/* Open loop: order i is due at t0 + i / rate, whatever happened to the
 * ones before it, and its latency counts from then. */
static void *generator_main(void *arg)
{
	struct service *s = arg;
	const struct demo_config *cfg = s->p.cfg;
	uint64_t period = sec_to_ns(1.0 / cfg->rate), end = s->p.t0 + sec_to_ns(cfg->duration_s);
	uint64_t rng = (uint64_t)cfg->seed * 2 + 1;

	pthread_setname_np(pthread_self(), "bhd-load");

	for (uint64_t i = 0;; i++) {
		struct order o = { .id = i, .arrival_ns = s->p.t0 + i * period };

		if (o.arrival_ns >= end ||
		    atomic_load_explicit(&s->stop_load, memory_order_relaxed))
			break;
		sleep_until(o.arrival_ns);
		note_lateness(s, o.arrival_ns);
		o.dep = rng_uniform(&rng) < cfg->pay_share ? DEP_PAY : DEP_INV;
		o.deadline_ns = o.arrival_ns + sec_to_ns(cfg->timeout_s[o.dep]);
		atomic_fetch_add_explicit(&s->offered[o.dep], 1, memory_order_relaxed);
		if (!aq_push(&s->q, &o))
			record(s, &o, OUT_DOOR);
	}
	atomic_store_explicit(&s->load_done, true, memory_order_release);
	return NULL;
}

/* ---- lifecycle ------------------------------------------------------------ */

static int make_bulkheads(struct service *s)
{
	for (int d = 0; d < NDEPS && s->p.isolated; d++) {
		struct bh_config c = { .max_concurrent = s->p.conc[d],
				       .queue_capacity = s->p.queue[d],
				       .flags = BH_FAIR };
		struct bh_adaptive_config ac = { .max_limit = s->p.adaptive_max[d] };
		int r = bh_create(&c, &s->bh[d]);

		if (r == 0 && s->p.adaptive[d])
			r = bh_adaptive_attach(s->bh[d], &ac, &s->ctl[d]);
		if (r < 0)
			return r;
	}
	return 0;
}

bh_adaptive_t *service_adaptive(struct service *s, enum dep d)
{
	return s->ctl[d];
}

static int start_threads(struct service *s)
{
	uint32_t n = s->p.cfg->workers;
	int r;

	for (uint32_t i = 0; i < n; i++) {
		s->w[i].svc = s;
		s->w[i].fd[DEP_INV] = s->w[i].fd[DEP_PAY] = -1;
		r = pthread_create(&s->w[i].thread, NULL, worker_main, &s->w[i]);
		if (r)
			return -r;
		s->w[i].started = true;
	}
	r = pthread_create(&s->generator, NULL, generator_main, s);
	if (r)
		return -r;
	s->generator_started = true;
	return 0;
}

int service_start(const struct service_params *p, struct service **out)
{
	struct service *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->p = *p;
	s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->stop_fd < 0) {
		r = -errno;
		free(s);
		return r;
	}
	s->w = calloc(p->cfg->workers, sizeof(*s->w));
	if (!s->w) {
		close(s->stop_fd);
		free(s);
		return -ENOMEM;
	}
	r = aq_init(&s->q, p->cfg->accept_queue);
	if (r == 0)
		r = make_bulkheads(s);
	if (r == 0)
		r = start_threads(s);
	if (r < 0) {
		service_stop(s);
		return r;
	}
	*out = s;
	return 0;
}

void service_stop_load(struct service *s)
{
	atomic_store_explicit(&s->stop_load, true, memory_order_relaxed);
}

bool service_idle(struct service *s)
{
	uint32_t queued, active;

	if (!atomic_load_explicit(&s->load_done, memory_order_acquire))
		return false;
	aq_counts(&s->q, &queued, &active);
	return queued == 0 && active == 0;
}

void service_gauges(struct service *s, struct service_gauges *g)
{
	memset(g, 0, sizeof(*g));
	for (int d = 0; d < NDEPS; d++) {
		g->offered[d] = atomic_load_explicit(&s->offered[d], memory_order_relaxed);
		g->held[d] = atomic_load_explicit(&s->held[d], memory_order_relaxed);
		if (s->bh[d]) {
			bh_stats(s->bh[d], &g->bh[d]);
			g->has_bh = true;
		}
	}
	aq_counts(&s->q, &g->accept_queued, &g->busy);
	g->late_max_ns = atomic_load_explicit(&s->late_max_ns, memory_order_relaxed);
}

uint64_t service_stop(struct service *s)
{
	uint64_t one = 1, refused;

	service_stop_load(s);
	if (s->generator_started)
		pthread_join(s->generator, NULL);
	aq_close(&s->q);
	/* Wake workers blocked on a socket or a permit. */
	if (write(s->stop_fd, &one, sizeof(one)) != sizeof(one))
		abort(); /* an eventfd write of 1 cannot fail */
	for (int d = 0; d < NDEPS; d++)
		if (s->bh[d])
			bh_close(s->bh[d]);
	for (uint32_t i = 0; i < s->p.cfg->workers; i++)
		if (s->w[i].started)
			pthread_join(s->w[i].thread, NULL);
	/* Every order offered leaves a record: one still queued when a run is
	 * stopped had failed if its caller had given up already, and is open
	 * otherwise. */
	for (struct order o; aq_take_left(&s->q, &o);)
		record(s, &o, bh_now_ns() >= o.deadline_ns ? OUT_EXPIRED : OUT_SHUTDOWN);
	for (int d = 0; d < NDEPS; d++) {
		bh_adaptive_detach(s->ctl[d]); /* no worker samples any more */
		bh_destroy(s->bh[d]); /* every holder and waiter has returned */
	}
	refused = atomic_load_explicit(&s->refused_releases, memory_order_relaxed);
	aq_destroy(&s->q);
	close(s->stop_fd);
	free(s->w);
	free(s);
	return refused;
}
