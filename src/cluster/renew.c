/* The cluster layer's lease protocol (docs/cluster.md): what admission may
 * use (a share until the lease's end, or the fallback limit), the renewals
 * that report demand and apply grants, and the driver that runs them from
 * the background thread or the caller's loop (bh_cluster_step). Everything
 * here runs under c->drive, except bhc_account (any thread); what it
 * changes of admission's side, it changes under c->admit too (bhc.h). */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "bhc.h"

/* ---- the local side: applying shares --------------------------------------- */

uint64_t bhc_gate_for(const struct bhc *c, uint64_t end)
{
	uint64_t r = bhc_real(end);

	/* The coarse clock lags by up to a tick: stop that much earlier. */
	return r > c->coarse_slack ? r - c->coarse_slack : 0;
}

void bhc_allow(struct bhc *c, uint32_t permits, uint64_t gate)
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

void bhc_enter_fallback(struct bhc *c)
{
	if (c->in_fallback)
		return;
	bump(c, S_FALLBACKS);
	put(c, S_FALLBACK, 1);
	put(c, S_EXPIRY, 0);
	pthread_mutex_lock(&c->admit);
	c->in_fallback = true;
	bhc_allow(c, c->fallback, BHI_GATE_OPEN);
	pthread_mutex_unlock(&c->admit);
}

/* Permits in flight that the store may no longer count (all of them in
 * fallback, or once the lease may have run out at the store), and the
 * over-admission estimate. Any thread may call it (bh_cluster_stats): it
 * reads only the statistics, and the maximum is kept with a CAS. */
void bhc_account(struct bhc *c, uint64_t held)
{
	uint64_t end = get(c, S_ACCOUNTED_END), un, over, max;

	un = get(c, S_FALLBACK) || !get(c, S_JOINED) || bhc_mono() >= end ? held : 0;
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
	bhc_account(c, s->in_flight);
	c->next_sample = now + c->sample_every;
}

/* Demand since the last report: with rejections, timeouts, waiters or the
 * share used up, ask for twice as much (the store caps it at the fair
 * share); otherwise for the peak in use plus a quarter, so that idle
 * instances give back. cap and applied: as admission had them at begin. */
static uint32_t demand(struct bhc *c, bool pressed, uint32_t cap, uint32_t applied)
{
	uint64_t w, top = cap < c->limit ? cap : c->limit;

	if (!c->joined)
		w = c->initial_want;
	else if (pressed)
		w = 2ull * applied > (uint64_t)c->peak_held + c->peak_queued + 1
			    ? 2ull * applied
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
	uint32_t cap, applied;
	bool pressed;

	sample(c, now);
	/* A cap the controller moves after this reaches the store with the
	 * next renewal; a lower one limits admission at once anyway
	 * (layer_adapt_set), and only lowers the core's limit reported below. */
	pthread_mutex_lock(&c->admit);
	cap = c->cap;
	applied = c->applied;
	pthread_mutex_unlock(&c->admit);
	pressed = s->rejected != c->last_rejected || s->timed_out != c->last_timed_out ||
		  c->peak_queued || (applied && c->peak_held >= applied);
	c->last_rejected = s->rejected;
	c->last_timed_out = s->timed_out;
	rq.limit = c->limit;
	rq.lease_us = c->lease / BH_USEC;
	rq.want = demand(c, pressed, cap, applied);
	rq.cap = cap;
	/* What admission may do until the answer is applied: the core's
	 * limit while anything is admitted (a user's bh_set_limit included). */
	rq.applied = applied ? (uint32_t)s->limit : 0;
	rq.held = (uint32_t)s->in_flight;
	rq.check = !c->joined;
	rq.adopt = c->flags & BH_CLUSTER_ADOPT_LIMIT;
	rq.fresh = c->flags & BH_CLUSTER_FRESH_STORE;
	rq.epoch = c->epoch;
	rq.seq = c->seq += 2; /* seq + 1 is the store's, for a copy sent again */
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
		bhc_enter_fallback(c);
	else
		c->next_renew = now;
}

/* A renewal's answer, for bh_cluster_stats. The expiry is the lease's end
 * on CLOCK_MONOTONIC; the gate shuts coarse_slack before it, on the coarse
 * clock (bhc_gate_for), which bh_cluster_stats compares too. */
static void report_grant(struct bhc *c, const struct bhc_grant *g, uint64_t end)
{
	put(c, S_GLOBAL, g->limit);
	put(c, S_GRANTED, g->granted);
	put(c, S_INSTANCES, g->instances);
	put(c, S_LEARNING, g->learning_us * BH_USEC);
	put(c, S_EXCESS, g->excess);
	put(c, S_EXPIRY, bhc_real(end));
	put(c, S_ACCOUNTED_END, bhc_real(c->accounted_end));
	put(c, S_JOINED, 1);
	put(c, S_LAST_ERROR, 0);
	bump(c, S_RENEWALS);
}

/* Under c->admit: apply a grant's share, within the cap; whether it shrank
 * what admission had. */
static bool apply_share(struct bhc *c, const struct bhc_grant *g, uint64_t end)
{
	uint32_t share = g->granted < c->cap ? g->granted : c->cap;
	bool shrank = share < c->applied;

	c->lease_end = end;
	if (c->in_fallback) {
		c->in_fallback = false;
		put(c, S_FALLBACK, 0);
	}
	report_grant(c, g, end);
	bhc_allow(c, share, bhc_gate_for(c, end));
	return shrank;
}

static void granted(struct bhc *c, const struct bhc_grant *g, uint64_t now)
{
	uint64_t end = c->sent_at + c->lease - c->margin;
	bool shrank;

	if (end <= now) {
		/* Too late to use (this process was stopped meanwhile), but
		 * the store answers: ask again at once, no fallback. It ran
		 * the renewal, so this instance is registered there: an open
		 * that fails now must leave (bhc_give_back). */
		c->maybe_joined = true;
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
	c->accounted_end = c->sent_at + c->lease;
	c->backoff = 0;
	pthread_mutex_lock(&c->admit);
	shrank = apply_share(c, g, end);
	pthread_mutex_unlock(&c->admit);
	/* A shrink frees permits at the store only once a renewal reports
	 * that they drained: confirm it sooner. A share below the target
	 * waits for others to do that: ask again sooner too. */
	c->next_renew = c->sent_at + (shrank || g->granted < g->target ? c->renew / 4 : c->renew);
	sample(c, now);
}

static void progress(struct bhc *c)
{
	struct bhc_grant g;
	int r = c->store->ops->advance(c->store, &g);
	uint64_t now = bhc_clk();

	if (r == -EINPROGRESS) {
		if (now < c->deadline)
			return;
		r = c->store->ops->drop(c->store);
	}
	c->busy = false;
	if (c->store->unsure)
		c->maybe_joined = true;
	if (r == 0)
		granted(c, &g, now);
	else
		failed(c, r, now);
}

/* The first renewal, synchronously: it registers this instance and checks
 * the configuration against the store's. */
int bhc_join(struct bhc *c)
{
	uint64_t now = bhc_clk();

	c->next_sample = now;
	begin(c, now);
	while (c->busy) {
		short ev;
		int fd;
		struct pollfd p;

		progress(c);
		if (!c->busy)
			break;
		now = bhc_clk();
		fd = c->store->ops->fd(c->store, &ev);
		p = (struct pollfd){ .fd = fd, .events = ev };
		/* progress() gives up at the deadline: wait at most until then */
		poll(&p, 1, now < c->deadline ? (int)((c->deadline - now + BH_MSEC - 1) / BH_MSEC) : 0);
	}
	return c->joined ? 0 : (int)(int64_t)get(c, S_LAST_ERROR);
}

/* The lease ran out: admission has stopped by itself (the gate). Ask the
 * store at once; fallback comes if it does not answer. */
static void expire(struct bhc *c, uint64_t now)
{
	uint32_t was;

	if (c->in_fallback || now < c->lease_end)
		return;
	pthread_mutex_lock(&c->admit);
	was = c->applied;
	c->applied = 0;
	pthread_mutex_unlock(&c->admit);
	if (!was)
		return;
	put(c, S_SHARE, 0);
	put(c, S_EXPIRY, 0);
	if (!c->busy)
		c->next_renew = now;
}

static uint64_t next_wake(struct bhc *c)
{
	uint64_t t = c->next_sample;
	bool on_lease;

	if (c->busy ? c->deadline < t : c->next_renew < t)
		t = c->busy ? c->deadline : c->next_renew;
	pthread_mutex_lock(&c->admit);
	on_lease = c->applied && !c->in_fallback;
	pthread_mutex_unlock(&c->admit);
	if (on_lease && c->lease_end < t)
		t = c->lease_end;
	return t;
}

/* Keep the epoll set and the timer in step with what the driver waits for.
 * A socket closed and reopened under the same number has lost its
 * registration: MOD then fails with ENOENT and it is added again. */
void bhc_watch(struct bhc *c)
{
	short ev;
	int fd = c->store->ops->fd(c->store, &ev);
	/* One-shot, re-armed here after every drive: a socket the store closed
	 * while a forked child still holds it stays in the epoll set (epoll(7),
	 * Q6), where it could no longer be removed by its number; one-shot, it
	 * wakes us once at most instead of on every epoll_wait. */
	struct epoll_event e = { .events = (ev & POLLIN ? EPOLLIN : 0u) |
					   (ev & POLLOUT ? EPOLLOUT : 0u) | EPOLLONESHOT,
				 .data.fd = fd };
	uint64_t t = bhc_real(next_wake(c));
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
	now = bhc_clk();
	if (now >= c->next_sample)
		sample(c, now);
	expire(c, now);
	if (!c->busy && now >= c->next_renew) {
		begin(c, now);
		if (c->busy)
			progress(c);
	}
	bhc_watch(c);
}

/* Run the request in flight to its end, blocking until deadline at most
 * (open, destroy, bh_cluster_set_global_limit). */
int bhc_finish(struct bhc_store *s, uint64_t deadline, struct bhc_grant *g)
{
	for (;;) {
		int r = s->ops->advance(s, g);
		uint64_t now = bhc_mono();
		struct pollfd p;

		if (r != -EINPROGRESS)
			return r;
		if (now >= deadline)
			return s->ops->drop(s);
		p.fd = s->ops->fd(s, &p.events);
		poll(&p, 1, (int)((deadline - now + BH_MSEC - 1) / BH_MSEC));
	}
}

/* A renewal that went unanswered (an open that timed out, one in flight
 * now) may still run at the store and register this instance, holding a
 * share for a lease that nobody uses: leave then too; and after one whose
 * answer came too late or could not be read, which did register it. If the leave comes
 * first, its mark refuses the late renewal. This costs a failed open one
 * more request (up to timeout_ns), only when its renewal went out. */
void bhc_give_back(struct bhc *c)
{
	struct bhc_request rq = { .op = BHC_LEAVE, .id = c->id };
	struct bhc_grant g;

	if (c->busy) {
		c->store->ops->drop(c->store);
		if (c->store->unsure)
			c->maybe_joined = true;
	}
	c->busy = false;
	if ((c->joined || c->maybe_joined) && c->store->ops->start(c->store, &rq) == 0)
		bhc_finish(c->store, bhc_mono() + c->timeout, &g);
	c->joined = c->maybe_joined = false; /* given back */
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

int bhc_make_fds(struct bhc *c)
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
int bhc_start_thread(struct bhc *c)
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

int bh_cluster_step(bulkhead_t *bh, uint64_t deadline_ns)
{
	struct bhc *c = bh ? bhc_of(bh) : NULL;
	int saved = errno, cs;

	if (!c || !(c->flags & BH_CLUSTER_MANUAL))
		return -EINVAL;
	if (bhc_inherited(c))
		return -ESHUTDOWN; /* the parent's connection and lease */
	/* Not a cancellation point: the timerfd's read, epoll_wait, the
	 * store's I/O are, and a thread unwound there would leave c->drive
	 * locked for good and a request half done. A pending request waits
	 * for the caller's next cancellation point. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	pthread_mutex_lock(&c->drive);
	drive(c);
	for (;;) {
		uint64_t now = bhc_mono(), until = bhc_real(next_wake(c));
		struct epoll_event ev[4];

		if (now >= deadline_ns)
			break;
		if (until > deadline_ns)
			until = deadline_ns;
		/* Wait without the lock: the adaptive controller (from a
		 * releasing thread) and bh_cluster_set_global_limit take it. */
		pthread_mutex_unlock(&c->drive);
		epoll_wait(c->epfd, ev, 4,
			   until > now ? (int)((until - now + BH_MSEC - 1) / BH_MSEC) : 0);
		pthread_mutex_lock(&c->drive);
		drive(c);
	}
	pthread_mutex_unlock(&c->drive);
	pthread_setcancelstate(cs, NULL);
	errno = saved;
	return 0;
}

int bh_cluster_fd(const bulkhead_t *bh)
{
	struct bhc *c = bh ? bhc_of(bh) : NULL;

	if (!c || !(c->flags & BH_CLUSTER_MANUAL))
		return -EINVAL;
	return bhc_inherited(c) ? -ESHUTDOWN : c->epfd;
}
