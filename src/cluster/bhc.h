/* Private to the cluster layer (src/cluster/): the state of one cluster
 * bulkhead, shared by the files that hold its concerns:
 *   cluster.c  open/destroy, bh_cluster_stats, the metrics series, the
 *              global limit and the adaptive controller's target;
 *   renew.c    the lease protocol: applying shares, renewals, fallback,
 *              and the driver (the background thread or bh_cluster_step);
 *   clock.c    the clock leases are measured on (skewable by tests);
 *   redis.c    the store (store.h), endpoint.c the address it is at.
 *
 * One driver at a time (the background thread, or the caller through
 * bh_cluster_step) runs the state below under c->drive, which it holds
 * across the store's I/O and name lookups; what admission uses (the cap,
 * the share applied) is under c->admit too, which no one holds across a
 * wait, so that the adaptive controller, moving the cap from inside a
 * caller's bh_release or bh_acquire, never waits for the network.
 * Statistics are relaxed atomics that any thread may read. */
#ifndef BHC_BHC_H
#define BHC_BHC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include "bulkhead/cluster.h"
#include "core/layer.h"
#include "endpoint.h"
#include "store.h"

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
	uint32_t fallback, initial_want, flags;
	uint64_t lease, renew, margin, timeout, sample_every, coarse_slack;

	pthread_mutex_t drive;
	/* Admission's side: under admit, taken after drive when both are held
	 * and never across I/O or a wait. The driver writes these holding
	 * both; the adaptive controller (layer_adapt_set) holds admit only, so
	 * the driver reads cap and applied, which it writes too, under admit;
	 * in_fallback and lease_end it may read under drive alone. */
	pthread_mutex_t admit;
	uint32_t cap;           /* the most this instance asks for or admits */
	uint32_t applied;       /* what admission allows now (0: nothing) */
	bool in_fallback;
	uint64_t lease_end;     /* admission on the lease stops here */

	/* Under drive. Times are on the layer's clock (clk()). */
	uint32_t limit;         /* the global limit, as configured then as the store says */
	bool busy;              /* a request is in flight */
	bool joined;            /* a renewal has succeeded */
	bool maybe_joined;      /* a renewal went unanswered: it may have
	                           registered this instance at the store */
	bool started;           /* open returned: fallback may begin */
	uint64_t sent_at;       /* when the request in flight began */
	uint64_t seq;           /* 2 x renewals begun (the store refuses older ones) */
	uint64_t deadline;      /* when it is given up */
	uint64_t next_renew, next_sample, backoff;
	uint64_t accounted_end; /* the store may drop the lease from here */
	uint64_t epoch;
	uint64_t last_rejected, last_timed_out;
	uint32_t peak_held, peak_queued;
	struct bh_stats scratch;
	int epfd, tfd, evfd, sock;
	pthread_t thread;
	bool has_thread;
	pid_t pid;              /* the process that opened it: a fork child's copy
	                           must neither stop its thread nor give back its lease */
	struct bhc *live_next;  /* the process's open cluster bulkheads (cluster.c) */

	_Atomic uint64_t st[S_NSTATS];
};

/* A fork child's copy of a handle: the lease, the thread and the connection
 * are the parent's. */
static inline bool bhc_inherited(const struct bhc *c)
{
	return c->pid != getpid();
}

/* ---- statistics (relaxed: each is read on its own) ------------------------ */

static inline void put(struct bhc *c, enum stat i, uint64_t v)
{
	atomic_store_explicit(&c->st[i], v, memory_order_relaxed);
}

static inline uint64_t get(const struct bhc *c, enum stat i)
{
	return atomic_load_explicit(&((struct bhc *)c)->st[i], memory_order_relaxed);
}

static inline void bump(struct bhc *c, enum stat i)
{
	put(c, i, get(c, i) + 1); /* one writer: the driver */
}

/* ---- the clock (clock.c) ---------------------------------------------------- */

/* CLOCK_MONOTONIC in ns. */
uint64_t bhc_mono(void);
/* The clock leases are measured on: bhc_mono() unless a test skews it. */
uint64_t bhc_clk(void);
/* The CLOCK_MONOTONIC instant at which bhc_clk() reads t. */
uint64_t bhc_real(uint64_t t);

/* ---- the lease protocol (renew.c) ------------------------------------------- */

/* The gate time for a lease that ends at end (bhc_clk()). */
uint64_t bhc_gate_for(const struct bhc *c, uint64_t end);
/* Under c->admit: let admission use permits until gate (0 permits: shut
 * the gate). */
void bhc_allow(struct bhc *c, uint32_t permits, uint64_t gate);
/* Under c->drive (or in open, before any other thread has the handle). */
void bhc_enter_fallback(struct bhc *c);
/* Any thread: refresh the unaccounted and over-admission statistics. */
void bhc_account(struct bhc *c, uint64_t held);
/* Open: the first renewal, synchronously; 0 or the store's error. */
int bhc_join(struct bhc *c);
/* Destroy or a failed open: end the request in flight, leave the store
 * when a renewal has or may have registered this instance there. */
void bhc_give_back(struct bhc *c);
/* Run s's request in flight to its end, blocking until deadline at most. */
int bhc_finish(struct bhc_store *s, uint64_t deadline, struct bhc_grant *g);
/* Under c->drive: arm the epoll set and the timer for the next wake. */
void bhc_watch(struct bhc *c);
int bhc_make_fds(struct bhc *c);
int bhc_start_thread(struct bhc *c);

/* ---- cluster.c ----------------------------------------------------------------- */

/* The cluster state behind bh, or NULL if bh is not a cluster bulkhead. */
struct bhc *bhc_of(const bulkhead_t *bh);

#endif /* BHC_BHC_H */
