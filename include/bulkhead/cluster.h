/*
 * OVERVIEW. libbulkhead cluster bulkheads: one concurrency limit shared by every
 * instance of a service, kept in Redis, with the local fast path kept.
 *
 * EXAMPLE.
 *
 *   struct bh_cluster_config cc = {
 *           .endpoint = "redis://10.0.0.5:6379", .name = "payment",
 *           .global_limit = 39, .lease_ns = 10 * BH_SEC, .fallback_limit = 4,
 *   };
 *   struct bh_config local = { .queue_capacity = 16, .flags = BH_FAIR };
 *   bulkhead_t *pay;
 *   int r = bh_cluster_open(&cc, &local, &pay);  // 0, or -EHOSTUNREACH, ...
 *   ... bh_acquire(pay, 1, deadline) / bh_release(pay, 1) as with any bulkhead
 *   bh_destroy(pay);                              // gives the share back
 *
 * Each instance leases a share of global_limit from the store and admits
 * locally within it: acquire and release never touch the network (one
 * coarse-clock read checks the lease). A background thread (or the caller,
 * with BH_CLUSTER_MANUAL) renews the lease every renew_ns, reporting the
 * instance's demand; the store splits the limit max-min fairly, atomically
 * and on its own clock, and never grants a permit that another instance may
 * still hold.
 *
 * OWNERSHIP. bh_cluster_open returns a bulkhead_t the caller owns
 * (credentials are kept in memory only to log in again after a reconnect,
 * and cleared at bh_destroy). bh_destroy stops the
 * renewals and gives the share back at once (one store request, at most
 * timeout_ns). Do not call bh_set_limit on it: the next renewal sets the
 * limit again.
 *
 * MEMORY ORDERING. Within the process, a local bulkhead's (bulkhead.h):
 * an acquire synchronizes with the release that freed its permits. Nothing
 * is ordered across instances: the store bounds how many permits the
 * instances hold together (outside the failure windows of bh_cluster_open(3):
 * fallback limits, permits that outlive a lease, a store that lost its
 * data), it does not carry memory.
 *
 * THREADS, SIGNALS, CANCELLATION. The handle takes every call of
 * <bulkhead.h> from any thread, with the same signal and cancellation
 * rules. The background renewal thread blocks every signal and may block
 * in getaddrinfo(3) when it reconnects. With BH_CLUSTER_MANUAL,
 * bh_cluster_step is called from one thread at a time (concurrent calls
 * are serialised by a lock), is not a cancellation point, and signals do
 * not cut its waits short. After fork(2) the child has no renewal thread:
 * open cluster bulkheads in the child.
 *
 * ERRORS. Negative errno values, never errno. bh_cluster_open: -EINVAL
 * (bad configuration or endpoint), -EPROTONOSUPPORT (TLS, another lease
 * protocol version, no script support), -EHOSTUNREACH (store unreachable),
 * -ETIMEDOUT (no answer within timeout_ns), -EACCES (authentication or
 * permissions), -EEXIST (the store holds this limit with another
 * global_limit or lease_ns), -ENOTUNIQ (the key is someone else's),
 * -EAGAIN (store loading or busy), -EPROTO (unexpected answer), -ENOMEM,
 * -EMFILE. See bh_cluster_open(3), bulkhead(7) and docs/cluster.md.
 */
#ifndef BULKHEAD_CLUSTER_H
#define BULKHEAD_CLUSTER_H

#include <stdint.h>

#include <bulkhead.h>

#ifdef __cplusplus
extern "C" {
#endif

struct bh_cluster_config {
	const char *endpoint;    /* "redis://[user[:password]@]host:port[/db]" or
	                            "unix://[user[:password]@]/path[?db=N]" */
	const char *name;        /* the shared limit's name; also the local
	                            bulkhead's name (no '{', '}' or spaces) */
	uint32_t global_limit;   /* permits across all instances, 1 ... BH_LIMIT_MAX */
	uint64_t lease_ns;       /* an instance that stops renewing loses its share
	                            after this (0: 10 s); the same for every instance */
	uint32_t fallback_limit; /* what this instance may use once its lease ran
	                            out and the store cannot be reached (0: reject
	                            everything); not counted at the store */
	/* Extensions: 0 picks the default. */
	uint32_t flags;          /* BH_CLUSTER_* below */
	uint64_t renew_ns;       /* renew this often (default lease/3; >= 1 ms) */
	uint64_t margin_ns;      /* stop using a lease this long before the store
	                            may expire it (default lease/10): covers clock
	                            rate error and calls still in flight */
	uint64_t timeout_ns;     /* connect + one store request (default the
	                            smaller of renew_ns and 1 s) */
	uint32_t initial_want;   /* demand reported when joining (default: the
	                            local cap, else global_limit) */
};

/* No background thread: the caller drives renewals with bh_cluster_step,
 * e.g. whenever bh_cluster_fd is readable. */
#define BH_CLUSTER_MANUAL (1u << 0)
/* When the store cannot be reached at open, succeed anyway, in fallback
 * (fallback_limit permits), and keep trying. Other errors still fail. */
#define BH_CLUSTER_START_FALLBACK (1u << 1)
/* The store holds a different global_limit: take it instead of failing
 * with -EEXIST. */
#define BH_CLUSTER_ADOPT_LIMIT (1u << 2)
/* When this instance finds the store empty and creates the state, skip the
 * learning period (one lease in which only permits already in use are
 * granted). Only for a store known not to have lost data that running
 * instances relied on: a first deployment, a test. */
#define BH_CLUSTER_FRESH_STORE (1u << 3)

struct bh_cluster_stats {
	uint64_t global_limit;     /* as the store last said */
	uint64_t share;            /* permits this instance may admit now: the
	                              granted share, fallback_limit in fallback, 0
	                              while its lease is out */
	uint64_t granted;          /* the share the store granted last */
	uint64_t want;             /* the demand reported last */
	uint64_t instances;        /* live instances at the last renewal */
	uint64_t lease_expiry_ns;  /* CLOCK_MONOTONIC by which admission on
	                              the current lease has stopped (0: none) */
	uint64_t learning_ns;      /* the store's learning period left, as of the
	                              last renewal */
	uint64_t round_trips;      /* store commands sent (every kind) */
	uint64_t renewals;         /* successful renewals, the first included */
	uint64_t renewals_failed;
	uint64_t reconnects;       /* connections made after the first */
	uint64_t store_resets;     /* times the store was found to have lost its state */
	uint64_t fallback_active;  /* 1 while in fallback */
	uint64_t fallbacks;        /* times fallback was entered */
	uint64_t unaccounted;      /* permits in flight here that the store may
	                              no longer count (held past the lease) */
	uint64_t over_admission;   /* the estimate now: unaccounted + the excess
	                              the store reported at the last renewal */
	uint64_t over_admission_max; /* the largest estimate seen */
	int64_t last_error;        /* -errno of the last failed store request, 0
	                              after a success */
};

/* Open a cluster bulkhead. local (may be NULL) gives queue_capacity, flags
 * and an optional name for the local bulkhead; its max_concurrent, when not
 * 0, caps this instance's share. 0 and *out, or -EINVAL (bad config or
 * endpoint), -EPROTONOSUPPORT (TLS endpoint; a store speaking another
 * protocol version), -EHOSTUNREACH (store unreachable), -ETIMEDOUT (no
 * answer in time), -EACCES (AUTH failed or not permitted), -EEXIST
 * (global_limit or lease_ns differs from the store's), -ENOTUNIQ (the key
 * holds something else), -ENOMEM, -EPROTO (an unexpected answer), -EAGAIN
 * (the store is busy or loading). */
BH_API int bh_cluster_open(const struct bh_cluster_config *cc, const struct bh_config *local,
			   bulkhead_t **out);

/* Fill *out. 0, or -EINVAL when bh is not a cluster bulkhead. */
BH_API int bh_cluster_stats(const bulkhead_t *bh, struct bh_cluster_stats *out);

/* BH_CLUSTER_MANUAL: do the renewal work that is due, waiting for the store
 * at most until deadline_ns (absolute CLOCK_MONOTONIC; 0: never wait). 0,
 * or -EINVAL (not a manual cluster bulkhead). */
BH_API int bh_cluster_step(bulkhead_t *bh, uint64_t deadline_ns);

/* BH_CLUSTER_MANUAL: an fd that polls readable whenever bh_cluster_step has
 * work (a timer or the store's answer). Owned by bh; valid until bh_destroy.
 * The fd, or -EINVAL. */
BH_API int bh_cluster_fd(const bulkhead_t *bh);

/* Change the global limit at the store on purpose; every instance follows
 * at its next renewal (a lower limit drains as permits are released). 0, or
 * the errors of bh_cluster_open, or -ENOENT (the store has no such limit). */
BH_API int bh_cluster_set_global_limit(bulkhead_t *bh, uint32_t global_limit);

#ifdef __cplusplus
}
#endif
#endif /* BULKHEAD_CLUSTER_H */
