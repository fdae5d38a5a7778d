/* The cluster layer: a local bulkhead whose limit follows this instance's
 * leased share of a global limit kept in a store. Admission stays the
 * core's (plus the lease check, the core's gate, src/core/layer.h); the
 * lease protocol (renewals, grants, fallback, the driver) is in renew.c.
 * This file opens and destroys a cluster bulkhead and answers for it:
 * bh_cluster_stats, the metrics series, bh_cluster_set_global_limit and
 * the adaptive controller's target. docs/cluster.md has the protocol and
 * its safety argument. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "bhc.h"

#define DEFAULT_LEASE (10 * BH_SEC)
#define MIN_LEASE (50 * BH_MSEC)
/* Renewals go out one at a time, the next renew_ns (a quarter of it while
 * the share is short) after the last was sent, and a failed request backs
 * off from renew_ns / 8: an interval of a few nanoseconds would send them
 * back to back, and retry a store that is down in a loop that never
 * sleeps. A millisecond keeps the backoff at 125 us or more. */
#define MIN_RENEW BH_MSEC
#define ALL_FLAGS \
	(BH_CLUSTER_MANUAL | BH_CLUSTER_START_FALLBACK | BH_CLUSTER_ADOPT_LIMIT | \
	 BH_CLUSTER_FRESH_STORE)

/* ---- open / destroy ---------------------------------------------------------- */

static void random_id(char id[33])
{
	unsigned char b[16];
	uint64_t t = bhc_mono();

	if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
		for (unsigned i = 0; i < sizeof(b); i++)
			b[i] = (unsigned char)((t >> (i % 8 * 8)) ^ ((uint64_t)getpid() >> (i % 4 * 8)) ^
					       ((uintptr_t)id >> (i % 8)));
	}
	for (unsigned i = 0; i < sizeof(b); i++)
		snprintf(id + 2 * i, 3, "%02x", b[i]);
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
	pthread_mutex_destroy(&c->admit);
	pthread_mutex_destroy(&c->drive);
	free(c);
}

/* ---- fork ------------------------------------------------------------------- */

/* The process's open cluster bulkheads, so that a fork child can close its
 * copies at once: they would admit on the parent's share until its lease
 * ran out, doubling what the store granted. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static struct bhc *live;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
	pthread_mutex_lock(&live_mu);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&live_mu);
}

static void fork_child(void)
{
	for (struct bhc *c = live; c; c = c->live_next)
		bhi_close_inherited(c->bh);
	live = NULL; /* the child's own opens start a list of their own */
	pthread_mutex_unlock(&live_mu);
}

static void atfork_register(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void live_add(struct bhc *c)
{
	pthread_once(&atfork_once, atfork_register);
	pthread_mutex_lock(&live_mu);
	c->live_next = live;
	live = c;
	pthread_mutex_unlock(&live_mu);
}

static void live_del(struct bhc *c)
{
	pthread_mutex_lock(&live_mu);
	for (struct bhc **p = &live; *p; p = &(*p)->live_next)
		if (*p == c) {
			*p = c->live_next;
			break;
		}
	pthread_mutex_unlock(&live_mu);
}

/* bh_destroy on a cluster bulkhead: stop renewing, give the share back.
 * Like bh_destroy on any bulkhead, not a cancellation point: the write,
 * the join, the leave's I/O and the closes are, and a destroy unwound
 * half way would leak the handle and leave the share registered. */
static void layer_destroy(struct bhi_layer *l)
{
	struct bhc *c = (struct bhc *)l;
	int saved = errno, cs;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	if (bhc_inherited(c)) {
		/* A fork child's copy: the thread, the connection and the lease
		 * are the parent's. Free our memory and our copies of the fds. */
		free_cluster(c);
	} else {
		live_del(c);
		if (c->has_thread) {
			uint64_t one = 1;

			if (write(c->evfd, &one, sizeof(one)) == (ssize_t)sizeof(one))
				pthread_join(c->thread, NULL);
		}
		if (c->store)
			bhc_give_back(c);
		free_cluster(c);
	}
	pthread_setcancelstate(cs, NULL);
	errno = saved;
}

static size_t layer_metrics(const struct bhi_layer *l, struct bhi_layer_metric *m);
static int layer_adapt_set(struct bhi_layer *l, uint32_t cap);
static uint32_t layer_adapt_limit(const struct bhi_layer *l);

struct bhc *bhc_of(const bulkhead_t *bh)
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
	if (c->coarse_slack >= c->lease || c->margin >= c->lease - c->coarse_slack ||
	    c->renew < MIN_RENEW || c->renew >= c->lease - c->margin ||
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
	if (pthread_mutex_init(&c->admit, NULL) != 0) {
		pthread_mutex_destroy(&c->drive);
		free(c);
		return NULL;
	}
	c->epfd = c->tfd = c->evfd = c->sock = -1;
	c->layer.destroy = layer_destroy;
	c->layer.metrics = layer_metrics;
	c->layer.adapt_set = layer_adapt_set;
	c->layer.adapt_limit = layer_adapt_limit;
	random_id(c->id);
	c->pid = getpid();
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
	r = bhc_join(c);
	if (r < 0 && !(unreachable(r) && (c->flags & BH_CLUSTER_START_FALLBACK)))
		goto fail;
	c->started = true;
	if (r < 0)
		bhc_enter_fallback(c);
	if ((r = bhc_make_fds(c)) < 0 || (!(c->flags & BH_CLUSTER_MANUAL) && (r = bhc_start_thread(c)) < 0))
		goto fail;
	pthread_mutex_lock(&c->drive);
	bhc_watch(c);
	pthread_mutex_unlock(&c->drive);
	live_add(c);
	*out = c->bh;
	return 0;
fail:
	bhc_give_back(c);
	bh_destroy(c->bh); /* runs layer_destroy, which frees c */
	return r;
}

/* Not a cancellation point (connect, poll, the store's I/O are): an open
 * unwound half way would leak the handle and maybe a registration. */
int bh_cluster_open(const struct bh_cluster_config *cc, const struct bh_config *local,
		    bulkhead_t **out)
{
	int saved = errno, cs, r;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	r = open_cluster(cc, local, out);
	pthread_setcancelstate(cs, NULL);
	errno = saved;
	return r;
}

/* ---- stats, metrics, the global limit ----------------------------------------- */

int bh_cluster_stats(const bulkhead_t *bh, struct bh_cluster_stats *out)
{
	struct bhc *c = bh ? bhc_of(bh) : NULL;
	struct bh_stats local; /* ~10 KB; only in_flight is needed */
	uint64_t connects;

	if (!c || !out)
		return -EINVAL;
	bh_stats(bh, &local);
	bhc_account(c, local.in_flight); /* unaccounted as of now */
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
	/* The lease ran out and no driver has run since (a manual handle not
	 * stepped, a process just resumed): admission has stopped at the gate
	 * already, and the statistics say so too, from the instant it did: the
	 * gate's own test, coarse_slack before the expiry on the coarse clock
	 * (bhc_gate_for), not the expiry on CLOCK_MONOTONIC, up to two ticks
	 * later. A fork child's copy admits nothing either: the share and the
	 * lease are the parent's. */
	if (bhc_inherited(c) || (!out->fallback_active && out->lease_expiry_ns &&
				  bhi_coarse_ns() + c->coarse_slack >= out->lease_expiry_ns)) {
		out->share = 0;
		out->lease_expiry_ns = 0;
	}
	return 0;
}

#define GAUGE(n, h, v) { "bulkhead_cluster_" n, "gauge", h, v, 0 }
#define COUNTER(n, h, v) { "bulkhead_cluster_" n "_total", "counter", h, v, 0 }

static size_t layer_metrics(const struct bhi_layer *l, struct bhi_layer_metric *m)
{
	struct bh_cluster_stats s;
	const struct bhc *c = (const struct bhc *)l;
	uint64_t now = bhc_mono();
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
	struct bhc *c = bh ? bhc_of(bh) : NULL;
	struct bhc_request rq = { .op = BHC_LIMIT, .limit = global_limit };
	struct bhc_store *s = NULL;
	struct bhc_grant g;
	int saved = errno, cs, r;

	if (!c || global_limit == 0 || global_limit > BH_LIMIT_MAX)
		return -EINVAL;
	if (bhc_inherited(c))
		return -ESHUTDOWN;
	/* Not a cancellation point, as bh_cluster_open. Its own connection:
	 * the driver's may be mid-request. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	r = bhc_redis_new(&c->ep, c->name, &s);
	if (r == 0 && (r = s->ops->start(s, &rq)) == 0)
		r = bhc_finish(s, bhc_mono() + c->timeout, &g);
	/* What it sent counts, whatever the outcome. */
	if (s) {
		atomic_fetch_add_explicit(&c->store->commands,
					  atomic_load_explicit(&s->commands, memory_order_relaxed),
					  memory_order_relaxed);
		s->ops->free(s);
	}
	if (r == 0) {
		pthread_mutex_lock(&c->drive);
		c->limit = global_limit;
		pthread_mutex_unlock(&c->drive);
	}
	pthread_setcancelstate(cs, NULL);
	errno = saved;
	return r;
}

/* ---- the adaptive controller's target (src/adaptive/) -------------------------------- */

/* What a controller adapts on a cluster handle: the cap on this instance's
 * share. The instance never asks the store for more, nor admits more; the
 * global limit stays the configured one and the store shares it among the
 * instances. A lower cap applies at once (in flight above it drains); the
 * next renewal reports it, so the store can give the rest to others. The
 * fallback limit, chosen by the user for when there is no store, stays.
 * Called where a window closes, inside a caller's bh_release or
 * bh_acquire: it takes admit only, never drive, which the driver holds
 * across the store's I/O and name lookups. */
static int layer_adapt_set(struct bhi_layer *l, uint32_t cap)
{
	struct bhc *c = (struct bhc *)l;

	if (cap == 0 || cap > BH_LIMIT_MAX)
		return -EINVAL;
	pthread_mutex_lock(&c->admit);
	c->cap = cap;
	if (!c->in_fallback && c->applied > cap)
		bhc_allow(c, cap, bhc_gate_for(c, c->lease_end));
	pthread_mutex_unlock(&c->admit);
	return 0;
}

/* The limit in force for the controller: the cap, or the share when the
 * store grants less. */
static uint32_t layer_adapt_limit(const struct bhi_layer *l)
{
	struct bhc *c = (struct bhc *)l;
	struct bh_gauges g;
	uint32_t cap;

	pthread_mutex_lock(&c->admit);
	cap = c->cap;
	pthread_mutex_unlock(&c->admit);
	bh_gauges(c->bh, &g);
	return g.limit < cap ? (uint32_t)g.limit : cap;
}
