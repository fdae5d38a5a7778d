/* A sequential reference model of the core limiter's public semantics: the
 * executable spec the fuzz harness (tests/fuzz/) checks libbulkhead against.
 *
 * It knows requests, not words or locks: a FIFO of requests, permits, and
 * the rules of include/bulkhead.h and docs/design.md ("The queue and the
 * handoff", "Leaving the queue"). Given the order in which things happen —
 * which call is made, when a blocked waiter's wait returns and how, when it
 * is cancelled, what the clock reads — it says what every call returns,
 * which queued requests are granted or failed and in what order, and what
 * bh_stats then reports. The only choices left to the library are the ones
 * the documentation leaves open, and the model makes them as documented:
 * in unfair mode a release offers free permits to a blocking head, which
 * takes them when its thread next runs if a newcomer has not; a head that
 * loses that race after waiting starve_ns (with no fair handoff for as long)
 * is served by direct handoff next.
 *
 * Blocking requests use ids below REF_NSYNC, async nodes the ids above.
 * Calls are made by threads: REF_MAIN, and blocking request id k always by
 * thread REF_WAITER(k); with BH_TRACK_HOLD a hold is paired per thread. */
#ifndef BH_REF_MODEL_H
#define BH_REF_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "bulkhead.h"

#define REF_NSYNC 6
#define REF_NODES 10
#define REF_BLOCKS 1 /* ref_acquire / ref_resume: the waiter waits (again) */
#define REF_MAX_EVENTS 64
#define REF_MAIN 0
#define REF_WAITER(k) (1 + (k))
#define REF_THREADS (1 + REF_NSYNC)

/* What a request is to its owner. Final states are what a blocked waiter
 * finds when its thread next runs. */
enum ref_state {
	REF_IDLE,    /* not queued, nothing pending */
	REF_QUEUED,  /* in the queue */
	REF_OFFERED, /* unfair head: free permits are offered, it has not run */
	REF_GRANTED, /* final: the permits are the waiter's */
	REF_SHUT,    /* final: -ESHUTDOWN */
	REF_INVAL,   /* final: -EINVAL (the limit shrank below n) */
};

/* What the library reports through its observers and callbacks, in order:
 * 'Q' a request joined the queue, 'G' one left it holding its permits,
 * 'C' an async node's callback ran with result. */
struct ref_event {
	char type;
	uint8_t id;
	int16_t result;
};

struct ref_request {
	enum ref_state st;
	uint32_t n;
	uint64_t enqueued_ns;
};

/* BH_TRACK_HOLD: permits a thread holds, and since when it went from none */
struct ref_holding {
	uint64_t held, since_ns;
};

struct ref_bh {
	/* configuration */
	bool fair, no_stats, track_hold;
	/* A host-wide bulkhead (bh_shm_open) seen from its only process:
	 * permits belong to the process that holds them, so a release takes
	 * them from the process's ledger (permits granted to a blocking
	 * waiter are in it only once that waiter has run), and bh_stats says
	 * how many processes are attached. See ref_set_host(). */
	bool host;
	uint32_t queue_cap;
	uint64_t starve_ns;

	/* state */
	uint32_t limit;
	int64_t avail; /* negative after a shrink below what is held */
	bool closed;
	bool offered;  /* the unfair head has free permits offered to it */
	bool starving; /* the unfair head is owed the next handoff */
	uint64_t fair_after_ns;
	uint8_t q[REF_NODES];
	unsigned qlen;
	struct ref_request req[REF_NODES];
	struct ref_holding holding[REF_THREADS];

	/* what bh_stats must say */
	uint64_t acquired, released, rejected, timed_out, cancelled, over_released;
	struct bh_hist wait, wait_failed, hold;

	/* observer events since ref_take_events() */
	struct ref_event ev[REF_MAX_EVENTS];
	unsigned nev;
	bool ev_overflow;
};

void ref_init(struct ref_bh *m, const struct bh_config *cfg, uint64_t starve_ns);
/* The semantics of a host-wide bulkhead with one process attached and
 * nodes queue nodes in its segment (the queue capacity is at most that). */
void ref_set_host(struct ref_bh *m, uint32_t nodes);

int ref_try_acquire(struct ref_bh *m, unsigned thread, uint32_t n, uint64_t now);
/* bh_acquire by blocking request id at time now: a result, or REF_BLOCKS. */
int ref_acquire(struct ref_bh *m, unsigned id, uint32_t n, uint64_t deadline_ns, uint64_t now);
/* The blocked waiter id's wait returned wait_result (0, -EINTR, -EAGAIN:
 * re-check; -ETIMEDOUT: its deadline passed): its result, or REF_BLOCKS. */
int ref_resume(struct ref_bh *m, unsigned id, int wait_result, uint64_t now);
/* pthread_cancel acted on the blocked waiter id; its thread is gone. */
void ref_cancel(struct ref_bh *m, unsigned id, uint64_t now);
int ref_acquire_async(struct ref_bh *m, unsigned thread, unsigned id, uint32_t n,
		      uint64_t now);
int ref_cancel_async(struct ref_bh *m, unsigned id, uint64_t now);
int ref_release(struct ref_bh *m, unsigned thread, uint32_t n, uint64_t now);
void ref_record_hold(struct ref_bh *m, uint64_t ns);
int ref_close(struct ref_bh *m, uint64_t now);
int ref_set_limit(struct ref_bh *m, uint32_t limit, uint64_t now);
/* The expected bh_stats. */
void ref_stats(const struct ref_bh *m, struct bh_stats *out);

static inline bool ref_final(enum ref_state s)
{
	return s >= REF_GRANTED;
}

#endif /* BH_REF_MODEL_H */
