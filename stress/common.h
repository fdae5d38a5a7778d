/*
 * The stress harness: multi-threaded invariant checkers for libbulkhead.
 *
 * Every scenario drives one or more "checked bulkheads" (struct st_bh) from
 * many threads and checks, with state kept outside the library:
 *
 *  - in flight: callers add n to their own atomic counter inside the held
 *    region; it may never exceed the highest limit that can be in force
 *    (the ceiling, lowered after a shrink only once every operation that
 *    began before it has ended);
 *  - FIFO: the core's queued/granted observers feed a shadow queue of
 *    arrival tickets; a queued node is granted only when no older node is
 *    still in the real queue (strict FIFO, strict head-of-line for weights),
 *    and in BH_FAIR mode nobody takes permits directly past a node that was
 *    queued before the call started and still is after it returned;
 *  - results: every return value is legal for the call and agrees with the
 *    observers (0 after queueing only if a grant was observed, never a grant
 *    followed by an error), -ESHUTDOWN only once a close began and always
 *    once it ended, -EINVAL only when the limit in force was below n (and
 *    never after a close), -ETIMEDOUT never before the
 *    deadline and within a stated slack after it;
 *  - no lost wakeup: a watchdog samples each bulkhead under its lock and
 *    fails the run, dumping the word and both queues, when a head waiter
 *    stays queued while the permits it needs are free for longer than a
 *    bound; it also checks queue length against the word and avail <= limit;
 *  - quiesce: in_flight == 0, queued == 0, every permit can be taken again,
 *    and the library's stats equal the outcomes the callers counted.
 *
 * A violation prints the seed, the time into the run and a dump, and exits 1
 * at once. BH_STRESS_SECONDS sets the duration (default 3), BH_STRESS_SEED
 * replays a seed's parameters and random choices (thread interleavings are
 * the kernel's), BH_STRESS_THREADS overrides the worker count.
 */
#ifndef BH_STRESS_COMMON_H
#define BH_STRESS_COMMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "bulkhead.h"
#include "core/internal.h"
#include "lib/compiler.h"
#include "lib/list.h"

/* ---- the run ------------------------------------------------------------ */

struct st_run {
	const char *name;
	uint64_t seed;
	double seconds;
	uint64_t start_ns, end_ns;
	uint64_t watchdog_ns; /* a free permit may wait this long for its head */
	uint64_t slack_ns;    /* a deadline may be overshot by this much */
	uint64_t quiesce_ns;  /* stopping may take this long */
	unsigned threads;     /* BH_STRESS_THREADS, 0 = the scenario's choice */
	bool sanitized;
};

extern struct st_run st;

/* Reads the environment, prints the seed line. */
void st_init(const char *name);
/* True until the run's time is up. */
bool st_running(void);
double st_elapsed(void);
/* Report a violation with a dump of every bulkhead, then exit(1). */
_Noreturn void st_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "name: PASS seed=... <rest>" as the one summary line. */
void st_pass(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void st_sleep_ns(uint64_t ns);
/* Spin (no syscall) until bh_now_ns() reaches t. */
void st_spin_until(uint64_t t);
/* Pin the calling thread's timer slack to 1 ns so deadlines are sharp. */
void st_sharp_timers(void);

/* ---- random --------------------------------------------------------------- */

struct st_rng {
	uint64_t s;
};

void st_rng_init(struct st_rng *r, uint64_t stream);
uint64_t st_next(struct st_rng *r);
/* Uniform in [0, bound). */
uint32_t st_below(struct st_rng *r, uint32_t bound);
/* True with probability per_mille / 1000. */
bool st_chance(struct st_rng *r, uint32_t per_mille);

/* ---- fault injection in the library's own wait/wake ------------------------ */

/* Probabilities in per mille, per call of the wait or wake hook. */
struct st_faults {
	uint32_t spurious; /* return 0 at once, as a spurious wakeup */
	uint32_t eintr;    /* return -EINTR at once */
	uint32_t eagain;   /* return -EAGAIN at once */
	uint32_t delay;    /* yield before sleeping: widens the window between
	                    * the state change and the futex call */
	uint32_t relabel;  /* a real wakeup reported as -EINTR */
	uint32_t wake_delay; /* yield before a wake */
	uint32_t wake_extra; /* also wake a recently seen, unrelated waiter */
};

enum st_wait_ret { SW_OK, SW_EINTR, SW_EAGAIN, SW_ETIMEDOUT, SW_OTHER, SW_NRET };
enum st_fault { SF_SPURIOUS, SF_EINTR, SF_EAGAIN, SF_DELAY, SF_RELABEL, SF_WAKE_DELAY,
		SF_WAKE_EXTRA, SF_NFAULTS };

/* A spurious wakeup for a waiter seen recently (maybe one long gone). */
void st_wake_random(struct st_rng *rng);

/* ---- checked bulkheads ------------------------------------------------------ */

enum st_outcome { SO_OK, SO_BUSY, SO_TIMEDOUT, SO_SHUTDOWN, SO_INVAL, SO_CANCELLED, SO_N };
enum st_check { SC_INFLIGHT, SC_RESULT, SC_FIFO, SC_BARGING, SC_DEADLINE, SC_WATCH, SC_QUIESCE,
		SC_N };

struct st_ent;
BHI_LIST_HEAD(st_ents, struct st_ent);

struct st_bh {
	bulkhead_t *bh;
	char label[40];
	struct bh_config cfg;
	struct bhi_sync_ops ops;
	struct bhi_queue_obs obs;
	struct st_faults faults;
	bool faulty;

	/* Permits the callers hold, counted inside the held region. */
	_Atomic int64_t inflight;
	/* The highest limit that may be in force (see st_resize). */
	_Atomic uint32_t ceiling;
	/* Limit generations: an operation registers in active[gen & 1]; a
	 * resize bumps gen and waits for the old generation to drain before
	 * it lowers the ceiling. hist[g & 3] is generation g's limit; resizing
	 * is the generation whose bh_set_limit has begun. */
	_Atomic uint64_t gen, resizing;
	_Atomic uint64_t active[2];
	_Atomic uint32_t hist[4];
	_Atomic bool closing; /* set before bh_close is called */
	_Atomic bool closed;  /* set after it returned */

	_Atomic uint64_t outcome[SO_N];
	_Atomic uint64_t releases, queued_ops, async_ops, late_max_ns;
	_Atomic uint64_t releases_begun; /* bh_release calls made or under way */
	_Atomic uint64_t queued_granted; /* queued_ops that returned 0 */
	_Atomic uint64_t thread_cancels; /* pthread_cancel landed in an acquire */
	_Atomic uint64_t checks[SC_N];
	_Atomic uint64_t wait_ret[SW_NRET], faults_hit[SF_NFAULTS];

	/* A one-permit bulkhead whose limit never changes: holders write
	 * `guarded` with plain accesses right after the acquire returns and
	 * right before the release, so ThreadSanitizer checks that the permit
	 * orders them (semaphore semantics) with no other synchronisation
	 * between the two accesses. */
	bool exclusive;
	uint64_t guarded;

	/* Shadow FIFO, under slock. Observers take slock inside the core's
	 * lock; callers take it alone. Granted entries move to the granted
	 * list until their owner returns. */
	pthread_mutex_t slock;
	struct st_ents shadow, granted;
	uint64_t tickets;
	uint32_t nshadow;
	uint64_t wake_max_ns; /* grant to the owner's return, under slock */

	/* Watchdog state (watchdog thread only). */
	uint64_t stuck_ticket, stuck_since, leak_since;
	uint64_t seen_acquired, seen_released; /* bh_stats's, last time */
};

/* Create a checked bulkhead: ops wrapped with observers (and faults when
 * given), spinning as asked (installing ops turns it off). */
void st_bh_init(struct st_bh *sb, const char *label, const struct bh_config *cfg,
		const struct st_faults *faults, uint64_t spin_ns, uint64_t starve_ns);
/* The quiesce checks; then destroy. */
void st_bh_finish(struct st_bh *sb);
/* One line of a checked bulkhead's configuration. */
void st_bh_describe(const struct st_bh *sb, char *buf, size_t len);

/* Change the limit under the ceiling protocol (one resizer at a time). */
void st_resize(struct st_bh *sb, uint32_t limit);
/* Close under the close protocol; checks the result and the empty queue. */
void st_close(struct st_bh *sb);

enum st_kind { SK_TRY, SK_TIMED, SK_FOREVER, SK_ASYNC, SK_N };

struct st_op {
	enum st_kind kind;
	uint32_t n;
	uint64_t deadline; /* SK_TIMED, SK_ASYNC (BH_FOREVER: no deadline) */
	/* filled in by st_acquire */
	uint64_t gen;
	int result;
	bool queued;
};

/* Acquire with every check; returns 0 when the permits are held (then call
 * st_release), else the error. May be a cancellation point when the thread
 * called st_allow_cancel. */
int st_acquire(struct st_bh *sb, struct st_op *op, struct st_rng *rng);
void st_release(struct st_bh *sb, struct st_op *op);
/* Hold for a random short time: nothing, a spin, a yield or a sleep. */
void st_hold(struct st_rng *rng, uint32_t sleep_per_mille);

/* Let pthread_cancel interrupt this thread's blocking acquires. */
void st_allow_cancel(bool on);
/* Permits this thread holds through st_acquire (0: none). */
uint32_t st_holding(void);

/* ---- the watchdog ------------------------------------------------------------ */

/* Watch these bulkheads until st_watchdog_stop(). */
void st_watchdog_start(struct st_bh **sbs, unsigned n);
/* The run is over: from now on stopping may take quiesce_ns. */
void st_watchdog_stopping(void);
void st_watchdog_stop(void);

/* "ops=... ok=... busy=..." and "checks ..." for the summary line. */
void st_outcomes(struct st_bh **sbs, unsigned n, char *buf, size_t len);
void st_checks(struct st_bh **sbs, unsigned n, char *buf, size_t len);

#endif /* BH_STRESS_COMMON_H */
