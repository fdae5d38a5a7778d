/* The cluster layer: a local bulkhead whose limit follows this instance's
 * leased share of a global limit kept in a store. Admission stays the
 * core's (plus the lease check, the core's gate, src/core/layer.h); this file
 * renews the lease, reports demand, applies grants and falls back when the
 * store is gone. docs/cluster.md has the protocol and its safety argument.
 *
 * One driver at a time (the background thread, or the caller through
 * bh_cluster_step) runs the state below under c->drive; statistics are
 * relaxed atomics that any thread may read. */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "bulkhead/cluster.h"
#include "cluster.h"
#include "endpoint.h"
#include "core/layer.h"
#include "store.h"

#define DEFAULT_LEASE (10 * BH_SEC)
#define MIN_LEASE (50 * BH_MSEC)
#define ALL_FLAGS \
	(BH_CLUSTER_MANUAL | BH_CLUSTER_START_FALLBACK | BH_CLUSTER_ADOPT_LIMIT | \
	 BH_CLUSTER_FRESH_STORE)

enum stat {
	S_GLOBAL, S_SHARE, S_GRANTED, S_WANT, S_INSTANCES, S_EXPIRY, S_LEARNING,
	S_RENEWALS, S_FAILED, S_RESETS, S_FALLBACK, S_FALLBACKS, S_UNACCOUNTED,
	S_OVER, S_OVER_MAX, S_LAST_ERROR, S_EXCESS, S_ACCOUNTED_END, S_JOINED, S_NSTATS
};

struct bhc {
	struct bhi_layer layer; /* first: the core knows us by it */
	bulkhead_t *bh;
	struct bhc_store *store;
	struct bhc_endpoint ep;
	char name[BH_NAME_MAX];
	char id[33];
	uint32_t cap, fallback, initial_want, flags;
	uint64_t lease, renew, margin, timeout, sample_every, coarse_slack;

	pthread_mutex_t drive;
	/* Under drive. Times are on the layer's clock (clk()). */
	uint32_t limit;         /* the global limit, as configured then as the store says */
	bool busy;              /* a request is in flight */
	bool joined;            /* a renewal has succeeded */
	bool started;           /* open returned: fallback may begin */
	bool in_fallback;
	uint64_t sent_at;       /* when the request in flight began */
	uint64_t deadline;      /* when it is given up */
	uint64_t next_renew, next_sample, backoff;
	uint64_t lease_end;     /* admission on the lease stops here */
	uint64_t accounted_end; /* the store may drop the lease from here */
	uint32_t applied;       /* what admission allows now (0: nothing) */
	uint64_t epoch;
	uint64_t last_rejected, last_timed_out;
	uint32_t peak_held, peak_queued;
	struct bh_stats scratch;
	int epfd, tfd, evfd, sock;
	pthread_t thread;
	bool has_thread;

	_Atomic uint64_t st[S_NSTATS];
};

/* ---- statistics ---------------------------------------------------------------- */

static void put(struct bhc *c, enum stat i, uint64_t v)
{
	atomic_store_explicit(&c->st[i], v, memory_order_relaxed);
}

static uint64_t get(const struct bhc *c, enum stat i)
{
	return atomic_load_explicit(&((struct bhc *)c)->st[i], memory_order_relaxed);
}

static void bump(struct bhc *c, enum stat i)
{
	put(c, i, get(c, i) + 1); /* one writer: the driver */
}

/* ---- the clock ---------------------------------------------------------------- */

/* Tests skew it (bhc_test_clock); written before any handle exists. */
static struct {
	_Atomic int active;
	int64_t offset;
	int32_t ppm;
	uint64_t ref;
} skew;

static uint64_t mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * BH_SEC + (uint64_t)ts.tv_nsec;
}

#define SKEW_BASE 1000000000000000ull /* keeps skewed times positive */

void bhc_test_clock(int64_t offset_ns, int32_t rate_ppm)
{
	skew.offset = offset_ns;
	skew.ppm = rate_ppm;
	skew.ref = mono();
	/* release: pairs with the acquire in clk() and real() */
	atomic_store_explicit(&skew.active, 1, memory_order_release);
}

static uint64_t clk(void)
{
	uint64_t t = mono();
	long double d;

	if (!atomic_load_explicit(&skew.active, memory_order_acquire))
		return t;
	d = (long double)(t - skew.ref) * (1e6L + skew.ppm) / 1e6L;
	return (uint64_t)((long double)skew.ref + d + SKEW_BASE + skew.offset);
}

/* The CLOCK_MONOTONIC instant at which clk() reads t. */
static uint64_t real(uint64_t t)
{
	long double d;

	if (!atomic_load_explicit(&skew.active, memory_order_acquire))
		return t;
	d = ((long double)t - SKEW_BASE - skew.offset - skew.ref) * 1e6L / (1e6L + skew.ppm);
	return d + skew.ref <= 0 ? 0 : (uint64_t)(d + skew.ref);
}

/* ---- the local side: applying shares --------------------------------------- */

static uint64_t gate_for(const struct bhc *c, uint64_t end)
{
	uint64_t r = real(end);

	/* The coarse clock lags by up to a tick: stop that much earlier. */
	return r > c->coarse_slack ? r - c->coarse_slack : 0;
}

static void allow(struct bhc *c, uint32_t permits, uint64_t gate)
{
	if (permits) {
		bh_set_limit(c->bh, permits);
		bhi_gate_set(c->bh, gate);
	} else {
		bhi_gate_set(c->bh, 0); /* the limit stays; nothing is admitted */
	}
	c->applied = permits;
	put(c, S_SHARE, permits);
}

static void enter_fallback(struct bhc *c)
{
	if (c->in_fallback)
		return;
	c->in_fallback = true;
	bump(c, S_FALLBACKS);
	put(c, S_FALLBACK, 1);
	put(c, S_EXPIRY, 0);
	allow(c, c->fallback, BHI_GATE_OPEN);
}

/* Permits in flight that the store may no longer count (all of them in
 * fallback, or once the lease may have run out at the store), and the
 * over-admission estimate. Any thread may call it (bh_cluster_stats): it
 * reads only the statistics, and the maximum is kept with a CAS. */
static void account(struct bhc *c, uint64_t held)
{
	uint64_t end = get(c, S_ACCOUNTED_END), un, over, max;

	un = get(c, S_FALLBACK) || !get(c, S_JOINED) || mono() >= end ? held : 0;
	over = un + get(c, S_EXCESS);
	put(c, S_UNACCOUNTED, un);
	put(c, S_OVER, over);
	max = get(c, S_OVER_MAX);
	while (over > max && !atomic_compare_exchange_weak_explicit(&c->st[S_OVER_MAX], &max, over,
								    memory_order_relaxed,
								    memory_order_relaxed))
		;
}

static void sample(struct bhc *c, uint64_t now)
{
	struct bh_stats *s = &c->scratch;

	bh_stats(c->bh, s);
	if (s->in_flight > c->peak_held)
		c->peak_held = (uint32_t)s->in_flight;
	if (s->queued > c->peak_queued)
		c->peak_queued = (uint32_t)s->queued;
	account(c, s->in_flight);
	c->next_sample = now + c->sample_every;
}

/* Demand since the last report: with rejections, timeouts, waiters or the
 * share used up, ask for twice as much (the store caps it at the fair
 * share); otherwise for the peak in use plus a quarter, so that idle
 * instances give back. */
static uint32_t demand(struct bhc *c, bool pressed)
{
	uint64_t w, top = c->cap < c->limit ? c->cap : c->limit;

	if (!c->joined)
		w = c->initial_want;
	else if (pressed)
		w = 2ull * c->applied > (uint64_t)c->peak_held + c->peak_queued + 1
			    ? 2ull * c->applied
			    : (uint64_t)c->peak_held + c->peak_queued + 1;
	else
		w = c->peak_held + (c->peak_held / 4 ? c->peak_held / 4 : 1);
	return (uint32_t)(w < 1 ? 1 : w > top ? top : w);
}

/* ---- renewals ------------------------------------------------------------------ */

static void begin(struct bhc *c, uint64_t now)
{
	struct bh_stats *s = &c->scratch;
	struct bhc_request rq = { .op = BHC_RENEW, .id = c->id };
	bool pressed;

	sample(c, now);
	pressed = s->rejected != c->last_rejected || s->timed_out != c->last_timed_out ||
		  c->peak_queued || (c->applied && c->peak_held >= c->applied);
	c->last_rejected = s->rejected;
	c->last_timed_out = s->timed_out;
	rq.limit = c->limit;
	rq.lease_us = c->lease / BH_USEC;
	rq.want = demand(c, pressed);
	rq.cap = c->cap;
	/* What admission may do until the answer is applied: the core's
	 * limit while anything is admitted (a user's bh_set_limit included). */
	rq.applied = c->applied ? (uint32_t)s->limit : 0;
	rq.held = (uint32_t)s->in_flight;
	rq.check = !c->joined;
	rq.adopt = c->flags & BH_CLUSTER_ADOPT_LIMIT;
	rq.fresh = c->flags & BH_CLUSTER_FRESH_STORE;
	rq.epoch = c->epoch;
	if (c->store->ops->start(c->store, &rq) < 0)
		return;
	put(c, S_WANT, rq.want);
	c->busy = true;
	c->sent_at = now;
	c->deadline = now + c->timeout;
	c->peak_held = (uint32_t)s->in_flight;
	c->peak_queued = (uint32_t)s->queued;
}

/* Fallback needs the store to have failed a request begun after the
 * lease ran out: a request that was in flight while this process was
 * stopped (SIGSTOP, a long pause) times out on resuming, but says nothing
 * about the store; it is retried at once instead. */
static void failed(struct bhc *c, int err, uint64_t now)
{
	bump(c, S_FAILED);
	put(c, S_LAST_ERROR, (uint64_t)(int64_t)err);
	c->backoff = c->backoff ? 2 * c->backoff : c->renew / 8;
	if (c->backoff > c->renew)
		c->backoff = c->renew;
	c->next_renew = now + c->backoff;
	if (!c->started || now < c->lease_end)
		return;
	if (c->sent_at >= c->lease_end)
		enter_fallback(c);
	else
		c->next_renew = now;
}

static void granted(struct bhc *c, const struct bhc_grant *g, uint64_t now)
{
	uint64_t end = c->sent_at + c->lease - c->margin;
	uint32_t share = g->granted < c->cap ? g->granted : c->cap;
	bool shrank = share < c->applied;

	if (end <= now) {
		/* Too late to use (this process was stopped meanwhile), but
		 * the store answers: ask again at once, no fallback. */
		bump(c, S_FAILED);
		put(c, S_LAST_ERROR, (uint64_t)(int64_t)-ETIMEDOUT);
		c->next_renew = now;
		return;
	}
	if (c->epoch && g->epoch != c->epoch)
		bump(c, S_RESETS);
	c->epoch = g->epoch;
	c->joined = true;
	c->limit = g->limit;
	c->lease_end = end;
	c->accounted_end = c->sent_at + c->lease;
	c->backoff = 0;
	/* A shrink frees permits at the store only once a renewal reports
	 * that they drained: confirm it sooner. A share below the target
	 * waits for others to do that: ask again sooner too. */
	c->next_renew = c->sent_at + (shrank || g->granted < g->target ? c->renew / 4 : c->renew);
	if (c->in_fallback) {
		c->in_fallback = false;
		put(c, S_FALLBACK, 0);
	}
	put(c, S_GLOBAL, g->limit);
	put(c, S_GRANTED, g->granted);
	put(c, S_INSTANCES, g->instances);
	put(c, S_LEARNING, g->learning_us * BH_USEC);
	put(c, S_EXCESS, g->excess);
	put(c, S_EXPIRY, real(end));
	put(c, S_ACCOUNTED_END, real(c->accounted_end));
	put(c, S_JOINED, 1);
	put(c, S_LAST_ERROR, 0);
	bump(c, S_RENEWALS);
	allow(c, share, gate_for(c, end));
	sample(c, now);
}

static void progress(struct bhc *c)
{
	struct bhc_grant g;
	int r = c->store->ops->advance(c->store, &g);
	uint64_t now = clk();

	if (r == -EINPROGRESS) {
		if (now < c->deadline)
			return;
		r = c->store->ops->drop(c->store);
	}
	c->busy = false;
	if (r == 0)
		granted(c, &g, now);
	else
		failed(c, r, now);
}

/* The lease ran out: admission has stopped by itself (the gate). Ask the
 * store at once; fallback comes if it does not answer. */
static void expire(struct bhc *c, uint64_t now)
{
	if (c->in_fallback || !c->applied || now < c->lease_end)
		return;
	c->applied = 0;
	put(c, S_SHARE, 0);
	put(c, S_EXPIRY, 0);
	if (!c->busy)
		c->next_renew = now;
}

static uint64_t next_wake(const struct bhc *c)
{
	uint64_t t = c->next_sample;

	if (c->busy ? c->deadline < t : c->next_renew < t)
		t = c->busy ? c->deadline : c->next_renew;
	if (c->applied && !c->in_fallback && c->lease_end < t)
		t = c->lease_end;
	return t;
}

/* Keep the epoll set and the timer in step with what the driver waits for.
 * A socket closed and reopened under the same number has lost its
 * registration: MOD then fails with ENOENT and it is added again. */
static void watch(struct bhc *c)
{
	short ev;
	int fd = c->store->ops->fd(c->store, &ev);
	struct epoll_event e = { .events = (ev & POLLIN ? EPOLLIN : 0u) |
					   (ev & POLLOUT ? EPOLLOUT : 0u),
				 .data.fd = fd };
	uint64_t t = real(next_wake(c));
	struct itimerspec its = { .it_value = { .tv_sec = (time_t)(t / BH_SEC),
						.tv_nsec = (long)(t % BH_SEC) } };

	if (c->epfd < 0)
		return;
	if (c->sock >= 0 && c->sock != fd)
		epoll_ctl(c->epfd, EPOLL_CTL_DEL, c->sock, NULL);
	if (fd >= 0 && epoll_ctl(c->epfd, EPOLL_CTL_MOD, fd, &e) < 0)
		epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &e);
	c->sock = fd;
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1; /* 0 would disarm it */
	timerfd_settime(c->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* Do everything that is due now. */
static void drive(struct bhc *c)
{
	uint64_t now, ticks;

	if (c->tfd >= 0 && read(c->tfd, &ticks, sizeof(ticks)) < 0)
		ticks = 0; /* not expired: nothing to clear */
	if (c->busy)
		progress(c);
	now = clk();
	if (now >= c->next_sample)
		sample(c, now);
	expire(c, now);
	if (!c->busy && now >= c->next_renew) {
		begin(c, now);
		if (c->busy)
			progress(c);
	}
	watch(c);
}

/* Run the request in flight to its end, blocking until deadline at most
 * (open, destroy, bh_cluster_set_global_limit). */
static int finish(struct bhc_store *s, uint64_t deadline, struct bhc_grant *g)
{
	for (;;) {
		int r = s->ops->advance(s, g);
		uint64_t now = mono();
		struct pollfd p;

		if (r != -EINPROGRESS)
			return r;
		if (now >= deadline)
			return s->ops->drop(s);
		p.fd = s->ops->fd(s, &p.events);
		poll(&p, 1, (int)((deadline - now + BH_MSEC - 1) / BH_MSEC));
	}
}

/* ---- the thread and the caller's loop ------------------------------------------ */

static void *run(void *arg)
{
	struct bhc *c = arg;

	for (;;) {
		struct epoll_event ev[4];
		int n = epoll_wait(c->epfd, ev, 4, -1);

		for (int i = 0; i < n; i++)
			if (ev[i].data.fd == c->evfd)
				return NULL;
		pthread_mutex_lock(&c->drive);
		drive(c);
		pthread_mutex_unlock(&c->drive);
	}
}

static int add_fd(int epfd, int fd)
{
	struct epoll_event e = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e);
}

static int make_fds(struct bhc *c)
{
	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	c->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	c->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->epfd < 0 || c->tfd < 0 || c->evfd < 0 || add_fd(c->epfd, c->tfd) < 0 ||
	    add_fd(c->epfd, c->evfd) < 0)
		return errno == ENOMEM ? -ENOMEM : -EMFILE;
	return 0;
}

/* The thread takes no signals: they stay the application's. */
static int start_thread(struct bhc *c)
{
	sigset_t all, old;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&c->thread, NULL, run, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		return -r;
	pthread_setname_np(c->thread, "bh-cluster");
	c->has_thread = true;
	return 0;
}

static struct bhc *cluster_of(const bulkhead_t *bh);

int bh_cluster_step(bulkhead_t *bh, uint64_t deadline_ns)
{
	struct bhc *c = bh ? cluster_of(bh) : NULL;
	int saved = errno;

	if (!c || !(c->flags & BH_CLUSTER_MANUAL))
		return -EINVAL;
	pthread_mutex_lock(&c->drive);
	drive(c);
	for (;;) {
		uint64_t now = mono(), until = real(next_wake(c));
		struct epoll_event ev[4];

		if (now >= deadline_ns)
			break;
		if (until > deadline_ns)
			until = deadline_ns;
		epoll_wait(c->epfd, ev, 4,
			   until > now ? (int)((until - now + BH_MSEC - 1) / BH_MSEC) : 0);
		drive(c);
	}
	pthread_mutex_unlock(&c->drive);
	errno = saved;
	return 0;
}

int bh_cluster_fd(const bulkhead_t *bh)
{
	struct bhc *c = bh ? cluster_of(bh) : NULL;

	return c && (c->flags & BH_CLUSTER_MANUAL) ? c->epfd : -EINVAL;
}

/* ---- open / destroy ---------------------------------------------------------- */

static void random_id(char id[33])
{
	unsigned char b[16];
	uint64_t t = mono();

	if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
		for (unsigned i = 0; i < sizeof(b); i++)
			b[i] = (unsigned char)((t >> (i % 8 * 8)) ^ ((uint64_t)getpid() >> (i % 4 * 8)) ^
					       ((uintptr_t)id >> (i % 8)));
	}
	for (unsigned i = 0; i < sizeof(b); i++)
		snprintf(id + 2 * i, 3, "%02x", b[i]);
}

static void give_back(struct bhc *c)
{
	struct bhc_request rq = { .op = BHC_LEAVE, .id = c->id };
	struct bhc_grant g;

	if (c->busy)
		c->store->ops->drop(c->store);
	c->busy = false;
	if (c->joined && c->store->ops->start(c->store, &rq) == 0)
		finish(c->store, mono() + c->timeout, &g);
}

static void free_cluster(struct bhc *c)
{
	if (c->store)
		c->store->ops->free(c->store);
	if (c->epfd >= 0)
		close(c->epfd);
	if (c->tfd >= 0)
		close(c->tfd);
	if (c->evfd >= 0)
		close(c->evfd);
	bhc_endpoint_wipe(&c->ep);
	pthread_mutex_destroy(&c->drive);
	free(c);
}

/* bh_destroy on a cluster bulkhead: stop renewing, give the share back. */
static void layer_destroy(struct bhi_layer *l)
{
	struct bhc *c = (struct bhc *)l;
	int saved = errno;

	if (c->has_thread) {
		uint64_t one = 1;

		if (write(c->evfd, &one, sizeof(one)) == (ssize_t)sizeof(one))
			pthread_join(c->thread, NULL);
	}
	if (c->store)
		give_back(c);
	free_cluster(c);
	errno = saved;
}

static size_t layer_metrics(const struct bhi_layer *l, struct bhi_layer_metric *m);
static int layer_adapt_set(struct bhi_layer *l, uint32_t cap);
static uint32_t layer_adapt_limit(const struct bhi_layer *l);

static struct bhc *cluster_of(const bulkhead_t *bh)
{
	struct bhi_layer *l = bhi_layer_of(bh);

	return l && l->destroy == layer_destroy ? (struct bhc *)l : NULL;
}

static bool name_ok(const char *name)
{
	size_t n = name ? strnlen(name, BH_NAME_MAX) : 0;

	if (n == 0 || n == BH_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)name[i];

		/* Braces would end the hash tag; the rest keeps keys printable. */
		if (ch <= ' ' || ch >= 0x7f || ch == '{' || ch == '}')
			return false;
	}
	return true;
}

static int configure(struct bhc *c, const struct bh_cluster_config *cc,
		     const struct bh_config *local)
{
	uint64_t lease = cc->lease_ns ? cc->lease_ns : DEFAULT_LEASE;

	if (!name_ok(cc->name) || cc->global_limit == 0 || cc->global_limit > BH_LIMIT_MAX ||
	    cc->fallback_limit > BH_LIMIT_MAX || (cc->flags & ~ALL_FLAGS) || lease < MIN_LEASE ||
	    lease / BH_USEC > (1ull << 40) || (local && local->max_concurrent > BH_LIMIT_MAX) ||
	    cc->initial_want > BH_LIMIT_MAX)
		return -EINVAL;
	c->lease = lease / BH_USEC * BH_USEC; /* the store keeps microseconds */
	c->margin = cc->margin_ns ? cc->margin_ns : lease / 10;
	c->renew = cc->renew_ns ? cc->renew_ns : lease / 3;
	c->timeout = cc->timeout_ns ? cc->timeout_ns : (c->renew < BH_SEC ? c->renew : BH_SEC);
	c->coarse_slack = 2 * bhi_coarse_res_ns();
	/* An answer that comes in time must leave some lease to use. */
	if (c->margin + c->coarse_slack >= c->lease || c->renew >= c->lease - c->margin ||
	    c->timeout >= c->lease - c->margin)
		return -EINVAL;
	c->sample_every = c->renew / 4 > BH_MSEC ? c->renew / 4 : BH_MSEC;
	c->limit = cc->global_limit;
	c->cap = local && local->max_concurrent ? local->max_concurrent : BH_LIMIT_MAX;
	c->fallback = cc->fallback_limit;
	c->flags = cc->flags;
	c->initial_want = cc->initial_want ? cc->initial_want
			  : c->cap < cc->global_limit ? c->cap : cc->global_limit;
	snprintf(c->name, sizeof(c->name), "%s", cc->name);
	return 0;
}

static struct bhc *alloc_cluster(void)
{
	struct bhc *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (pthread_mutex_init(&c->drive, NULL) != 0) {
		free(c);
		return NULL;
	}
	c->epfd = c->tfd = c->evfd = c->sock = -1;
	c->layer.destroy = layer_destroy;
	c->layer.metrics = layer_metrics;
	c->layer.adapt_set = layer_adapt_set;
	c->layer.adapt_limit = layer_adapt_limit;
	random_id(c->id);
	return c;
}

static int make_local(struct bhc *c, const struct bh_config *local)
{
	struct bh_config cfg = { .max_concurrent = 1 };

	if (local) {
		cfg.queue_capacity = local->queue_capacity;
		cfg.flags = local->flags;
		cfg.name = local->name;
	}
	if (!cfg.name)
		cfg.name = c->name;
	return bh_create(&cfg, &c->bh);
}

/* The first renewal, synchronously: it registers this instance and checks
 * the configuration against the store's. */
static int join(struct bhc *c)
{
	uint64_t now = clk();

	c->next_sample = now;
	begin(c, now);
	while (c->busy) {
		short ev;
		int fd;
		struct pollfd p;

		progress(c);
		if (!c->busy)
			break;
		now = clk();
		fd = c->store->ops->fd(c->store, &ev);
		p = (struct pollfd){ .fd = fd, .events = ev };
		/* progress() gives up at the deadline: wait at most until then */
		poll(&p, 1, now < c->deadline ? (int)((c->deadline - now + BH_MSEC - 1) / BH_MSEC) : 0);
	}
	return c->joined ? 0 : (int)(int64_t)get(c, S_LAST_ERROR);
}

static bool unreachable(int r)
{
	return r == -EHOSTUNREACH || r == -ETIMEDOUT || r == -ECONNRESET || r == -EPIPE;
}

static int open_cluster(const struct bh_cluster_config *cc, const struct bh_config *local,
			bulkhead_t **out)
{
	struct bhc *c;
	int r;

	if (!cc || !out)
		return -EINVAL;
	c = alloc_cluster();
	if (!c)
		return -ENOMEM;
	if ((r = configure(c, cc, local)) < 0 || (r = bhc_endpoint_parse(cc->endpoint, &c->ep)) < 0 ||
	    (r = bhc_redis_new(&c->ep, c->name, &c->store)) < 0 || (r = make_local(c, local)) < 0) {
		free_cluster(c);
		return r;
	}
	bhi_layer_attach(c->bh, &c->layer);
	r = join(c);
	if (r < 0 && !(unreachable(r) && (c->flags & BH_CLUSTER_START_FALLBACK)))
		goto fail;
	c->started = true;
	if (r < 0)
		enter_fallback(c);
	if ((r = make_fds(c)) < 0 || (!(c->flags & BH_CLUSTER_MANUAL) && (r = start_thread(c)) < 0))
		goto fail;
	pthread_mutex_lock(&c->drive);
	watch(c);
	pthread_mutex_unlock(&c->drive);
	*out = c->bh;
	return 0;
fail:
	give_back(c);
	c->joined = false; /* given back already */
	bh_destroy(c->bh); /* runs layer_destroy, which frees c */
	return r;
}

int bh_cluster_open(const struct bh_cluster_config *cc, const struct bh_config *local,
		    bulkhead_t **out)
{
	int saved = errno, r = open_cluster(cc, local, out);

	errno = saved;
	return r;
}

/* ---- stats, metrics, the global limit ----------------------------------------- */

int bh_cluster_stats(const bulkhead_t *bh, struct bh_cluster_stats *out)
{
	struct bhc *c = bh ? cluster_of(bh) : NULL;
	struct bh_stats local; /* ~10 KB; only in_flight is needed */
	uint64_t connects;

	if (!c || !out)
		return -EINVAL;
	bh_stats(bh, &local);
	account(c, local.in_flight); /* unaccounted as of now */
	connects = atomic_load_explicit(&c->store->connects, memory_order_relaxed);
	*out = (struct bh_cluster_stats){
		.global_limit = get(c, S_GLOBAL),
		.share = get(c, S_SHARE),
		.granted = get(c, S_GRANTED),
		.want = get(c, S_WANT),
		.instances = get(c, S_INSTANCES),
		.lease_expiry_ns = get(c, S_EXPIRY),
		.learning_ns = get(c, S_LEARNING),
		.round_trips = atomic_load_explicit(&c->store->commands, memory_order_relaxed),
		.renewals = get(c, S_RENEWALS),
		.renewals_failed = get(c, S_FAILED),
		.reconnects = connects ? connects - 1 : 0,
		.store_resets = get(c, S_RESETS),
		.fallback_active = get(c, S_FALLBACK),
		.fallbacks = get(c, S_FALLBACKS),
		.unaccounted = get(c, S_UNACCOUNTED),
		.over_admission = get(c, S_OVER),
		.over_admission_max = get(c, S_OVER_MAX),
		.last_error = (int64_t)get(c, S_LAST_ERROR),
	};
	return 0;
}

#define GAUGE(n, h, v) { "bulkhead_cluster_" n, "gauge", h, v, 0 }
#define COUNTER(n, h, v) { "bulkhead_cluster_" n "_total", "counter", h, v, 0 }

static size_t layer_metrics(const struct bhi_layer *l, struct bhi_layer_metric *m)
{
	struct bh_cluster_stats s;
	const struct bhc *c = (const struct bhc *)l;
	uint64_t now = mono();
	struct bhi_layer_metric all[] = {
		GAUGE("global_limit", "The global limit, as the store last said.", 0),
		GAUGE("share", "Permits this instance may admit now.", 0),
		GAUGE("instances", "Live instances at the last renewal.", 0),
		{ "bulkhead_cluster_lease_remaining_seconds", "gauge",
		  "Time left on the lease admission uses (0: none).", 0, 1 },
		GAUGE("fallback_active", "1 while this instance runs on its fallback limit.", 0),
		GAUGE("unaccounted", "Permits in flight that the store may no longer count.", 0),
		GAUGE("over_admission", "Estimated permits in flight beyond the global limit.", 0),
		GAUGE("over_admission_max", "The largest over-admission estimate seen.", 0),
		COUNTER("store_round_trips", "Store commands sent.", 0),
		COUNTER("renewals", "Successful lease renewals.", 0),
		COUNTER("renewals_failed", "Lease renewals that failed.", 0),
		COUNTER("store_resets", "Times the store was found to have lost its state.", 0),
		COUNTER("fallbacks", "Times the fallback limit took over.", 0),
	};

	bh_cluster_stats(c->bh, &s);
	all[0].value = s.global_limit;
	all[1].value = s.share;
	all[2].value = s.instances;
	all[3].value = s.lease_expiry_ns > now ? s.lease_expiry_ns - now : 0;
	all[4].value = s.fallback_active;
	all[5].value = s.unaccounted;
	all[6].value = s.over_admission;
	all[7].value = s.over_admission_max;
	all[8].value = s.round_trips;
	all[9].value = s.renewals;
	all[10].value = s.renewals_failed;
	all[11].value = s.store_resets;
	all[12].value = s.fallbacks;
	memcpy(m, all, sizeof(all));
	return sizeof(all) / sizeof(all[0]);
}

int bh_cluster_set_global_limit(bulkhead_t *bh, uint32_t global_limit)
{
	struct bhc *c = bh ? cluster_of(bh) : NULL;
	struct bhc_request rq = { .op = BHC_LIMIT, .limit = global_limit };
	struct bhc_store *s = NULL;
	struct bhc_grant g;
	int saved = errno, r;

	if (!c || global_limit == 0 || global_limit > BH_LIMIT_MAX)
		return -EINVAL;
	/* Its own connection: the driver's may be mid-request. */
	r = bhc_redis_new(&c->ep, c->name, &s);
	if (r == 0 && (r = s->ops->start(s, &rq)) == 0)
		r = finish(s, mono() + c->timeout, &g);
	if (r == 0)
		atomic_fetch_add_explicit(&c->store->commands,
					  atomic_load_explicit(&s->commands, memory_order_relaxed),
					  memory_order_relaxed);
	if (s)
		s->ops->free(s);
	if (r == 0) {
		pthread_mutex_lock(&c->drive);
		c->limit = global_limit;
		pthread_mutex_unlock(&c->drive);
	}
	errno = saved;
	return r;
}

/* ---- the adaptive controller's target (src/adaptive/) -------------------------------- */

/* What a controller adapts on a cluster handle: the cap on this instance's
 * share. The instance never asks the store for more, nor admits more; the
 * global limit stays the configured one and the store shares it among the
 * instances. A lower cap applies at once (in flight above it drains); the
 * next renewal reports it, so the store can give the rest to others. The
 * fallback limit, chosen by the user for when there is no store, stays. */
static int layer_adapt_set(struct bhi_layer *l, uint32_t cap)
{
	struct bhc *c = (struct bhc *)l;

	if (cap == 0 || cap > BH_LIMIT_MAX)
		return -EINVAL;
	pthread_mutex_lock(&c->drive);
	c->cap = cap;
	if (!c->in_fallback && c->applied > cap)
		allow(c, cap, gate_for(c, c->lease_end));
	pthread_mutex_unlock(&c->drive);
	return 0;
}

/* The limit in force for the controller: the cap, or the share when the
 * store grants less. */
static uint32_t layer_adapt_limit(const struct bhi_layer *l)
{
	struct bhc *c = (struct bhc *)l;
	struct bh_gauges g;
	uint32_t cap;

	pthread_mutex_lock(&c->drive);
	cap = c->cap;
	pthread_mutex_unlock(&c->drive);
	bh_gauges(c->bh, &g);
	return g.limit < cap ? (uint32_t)g.limit : cap;
}
