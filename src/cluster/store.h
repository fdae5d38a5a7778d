/* Private to the cluster layer: the store behind a cluster bulkhead, as a
 * small non-blocking interface, so that another engine (etcd) could follow
 * Redis. A store runs one request at a time over one connection; the layer
 * owns all timing (it decides when a request has taken too long and drops
 * it). Nothing here is thread-safe: the layer calls it under its own lock.
 *
 * The protocol every store implements (docs/cluster.md):
 *   RENEW  register or renew this instance's lease and report its demand
 *          (want), the limit it enforces now (applied) and its permits in
 *          flight (held); the store, atomically and on its own clock, drops
 *          expired leases, computes this instance's max-min fair share,
 *          grants what is free of it, and keeps max(granted, applied, held)
 *          counted for the instance until its next renewal.
 *   LEAVE  give this instance's lease back now.
 *   LIMIT  change the global limit on purpose.
 */
#ifndef BHC_STORE_H
#define BHC_STORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define BHC_PROTO 1 /* the lease protocol's version, checked by the store */

enum bhc_op { BHC_RENEW, BHC_LEAVE, BHC_LIMIT };

struct bhc_request {
	enum bhc_op op;
	const char *id;     /* this instance, unique per open */
	uint32_t limit;     /* RENEW: the configured global limit; LIMIT: the new one */
	uint64_t lease_us;  /* RENEW */
	uint32_t want;      /* RENEW: the demand */
	uint32_t cap;       /* RENEW: the most it would ever use */
	uint32_t applied;   /* RENEW: the limit it enforces until the answer */
	uint32_t held;      /* RENEW: its permits in flight */
	bool check;         /* RENEW: limit and lease must match the store's */
	bool adopt;         /* ...except the limit: take the store's */
	bool fresh;         /* creating the state needs no learning period */
	uint64_t epoch;     /* the store incarnation this instance knows (0: none) */
	uint64_t seq;       /* RENEW: grows by 2 with every renewal this instance
	                       begins; a store that sends a request again sends
	                       it as seq + 1, so that the store refuses the first
	                       copy if it arrives late */
};

struct bhc_grant {
	uint32_t granted;      /* permits this instance may use */
	uint32_t limit;        /* the global limit at the store */
	uint32_t instances;    /* live instances, this one included */
	uint64_t epoch;        /* the store incarnation (changes when state was lost) */
	uint64_t excess;       /* permits counted at the store beyond the limit */
	uint64_t learning_us;  /* learning period left */
	uint64_t lease_us;     /* the lease the store keeps */
	uint32_t target;       /* its fair share; above granted while others
	                          still have to give permits back */
};

struct bhc_store;

struct bhc_store_ops {
	/* Begin rq, connecting first when needed. Never blocks (except for a
	 * DNS lookup). 0, or -errno (nothing in flight then). */
	int (*start)(struct bhc_store *s, const struct bhc_request *rq);
	/* Make progress: 0 when done (*g filled for RENEW), -EINPROGRESS to
	 * be called again once the fd is ready, or -errno (the connection is
	 * dropped; a later start reconnects). */
	int (*advance)(struct bhc_store *s, struct bhc_grant *g);
	/* The fd to wait on and its poll events (POLLIN/POLLOUT), or -1. */
	int (*fd)(const struct bhc_store *s, short *events);
	/* Abandon the request in flight and the connection with it (it took
	 * too long). Returns what that means: -EHOSTUNREACH when no connection
	 * was made, else -ETIMEDOUT. */
	int (*drop)(struct bhc_store *s);
	void (*free)(struct bhc_store *s);
};

struct bhc_store {
	const struct bhc_store_ops *ops;
	/* The last request ended without its answer after it may have gone
	 * out (dropped, or its connection failed mid-call; or a copy was sent
	 * again): the store may still run it, late. Or the store ran it and
	 * answered with what is no error but no answer we can read either.
	 * Cleared by start(). */
	bool unsure;
	_Atomic uint64_t commands;   /* store commands sent, all kinds */
	_Atomic uint64_t connects;   /* connections established */
};

struct bhc_endpoint;

/* A Redis store for the limit named name (no I/O yet). 0, -ENOMEM. */
int bhc_redis_new(const struct bhc_endpoint *ep, const char *name, struct bhc_store **out);

#endif /* BHC_STORE_H */
