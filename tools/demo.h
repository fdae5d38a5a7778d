/* bulkhead-demo: an order service with a slow dependency, for real over
 * loopback.
 *
 *   load generator --(accept queue)--> order service workers --TCP--> inventory
 *   (open loop)                        (fixed pool, blocking I/O)    payment
 *
 * The generator offers orders at a fixed rate whatever happens downstream;
 * each order needs one call to inventory (80%) or payment (20%). Part-way
 * through, payment slows from ~200 ms to ~5 s but keeps answering correctly.
 * Without isolation the shared workers drain into payment; with isolation
 * each dependency sits behind its own bulkhead and inventory keeps its
 * workers. Latency is measured from each order's scheduled arrival, so a
 * stalled server cannot hide its queueing (no coordinated omission). */
#ifndef BH_TOOLS_DEMO_H
#define BH_TOOLS_DEMO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bulkhead.h"

enum dep { DEP_INV, DEP_PAY, NDEPS };

extern const char *const dep_name[NDEPS];

/* How one order ended. Only OUT_OK is a success. */
enum outcome {
	OUT_OK,            /* correct answer within the order's deadline */
	OUT_DOOR,          /* accept queue full: turned away on arrival */
	OUT_EXPIRED,       /* waited in the accept queue past its deadline */
	OUT_REJECTED,      /* bulkhead full: -EBUSY at once */
	OUT_QUEUE_TIMEOUT, /* no permit within the queue-wait budget */
	OUT_CALL_TIMEOUT,  /* the dependency did not answer in time */
	OUT_CALL_ERROR,    /* connection failed or a wrong answer */
	OUT_SHUTDOWN,      /* still open when the run was stopped: not counted */
	NOUTCOMES
};

struct demo_config {
	double rate;          /* orders per second, offered open loop */
	double pay_share;     /* share of orders that call payment */
	uint32_t workers;     /* the order service's fixed pool */
	uint32_t accept_queue; /* orders waiting for a worker (Tomcat's acceptCount) */
	double duration_s;    /* of each run */
	double fault_at_s, fault_for_s;
	double latency_s[NDEPS]; /* typical answer time of each backend */
	double fault_latency_s;  /* payment's, during the fault */
	double jitter;        /* backends answer in latency x [1 - j, 1 + j] */
	double timeout_s[NDEPS]; /* an order's deadline, by the dependency it calls */
	double safety;        /* sizing: safety factor */
	/* Bulkhead sizes (0: computed with the sizing model) and how long a
	 * worker may wait for a permit (0: until the order's deadline). */
	uint32_t conc[NDEPS], queue[NDEPS];
	bool queue_given[NDEPS];
	double queue_wait_s[NDEPS];
	double call_deadline_s; /* async-trap: the tracked call's own deadline (0: none) */
	uint32_t capacity, fault_capacity; /* adaptive: payment's calls at a time */
	/* prefork, cluster (tools/demo_procs.h) */
	uint32_t procs, threads; /* worker processes, threads in each */
	double kill_at_s;     /* one process is SIGKILLed then */
	double lease_s;       /* cluster: the lease of an instance's share */
	unsigned runs;        /* RUN_WITHOUT | RUN_WITH */
	const char *svg_path, *kv_path; /* NULL or "": none */
	uint32_t seed;
	bool quiet;
};

#define RUN_WITHOUT 1u /* async-trap: the naive run; adaptive: the static one;
                        * prefork, cluster: local */
#define RUN_WITH 2u    /* async-trap: the tracked run; adaptive: the adaptive one;
                        * prefork, cluster: shared */

/* An output file (--svg, --kv). main opens it before anything starts, so
 * that a path that cannot be written fails at once, not after the run. */
struct demo_output {
	const char *path;
	FILE *f;      /* NULL: not asked for */
	bool created; /* by demo_output_open: it did not exist before */
};

struct demo_outputs {
	struct demo_output svg, kv;
};

/* Open path for writing (NULL or "": none, 0), creating it, or leaving an
 * existing file as it is until the close. -errno, with one message
 * printed, when it cannot be created or written. */
int demo_output_open(struct demo_output *o, const char *path);
/* The scenario wrote it: flush, cut an existing file's old content past
 * it, and close. 0, or -errno with one message. */
int demo_output_close(struct demo_output *o);
/* Nothing was written (the run failed): close it, and remove it if
 * demo_output_open created it; an existing file stays as it was. */
void demo_output_discard(struct demo_output *o);

/* A stopped run: "run 1/2 (without isolation) stopped at 2.35 s by
 * Terminated", for the summaries and the charts. */
const char *demo_stop_note(const char *run, double stopped_s, char *buf, size_t len);

/* One finished order; times in ns from the start of its run. */
struct record {
	uint64_t arrival_ns, done_ns;
	uint8_t dep, outcome;
};

/* Everything a run's orders did, appended by workers and the generator. */
struct results {
	pthread_mutex_t lock;
	struct record *rec;
	size_t n, cap, dropped;
};

int results_init(struct results *r, size_t cap);
void results_free(struct results *r);
void results_add(struct results *r, uint64_t arrival_ns, uint64_t done_ns, enum dep d,
		 enum outcome o);

/* ---- backends (demo_backend.c) ------------------------------------------ */

struct bconn;

/* A dependency on 127.0.0.1: one epoll thread answers every request after
 * its latency, concurrently, however many are outstanding, or with a
 * capacity, so many at a time, the rest queued. */
struct backend {
	const char *name;
	uint16_t port;
	int listen_fd, epoll_fd, timer_fd, stop_fd;
	pthread_t thread;
	_Atomic uint64_t latency_ns; /* for requests arriving from now on */
	double jitter;
	uint64_t rng;
	struct bconn **conns;
	size_t nconns, cap;
	_Atomic uint64_t answered;
	_Atomic uint32_t capacity; /* requests served at a time; 0: all */
	uint32_t in_service;       /* the backend thread's own */
	uint64_t arrivals;         /* the backend thread's own: request order */
	/* Requests read whose answer is not yet sent (their connection still
	 * open, or with a capacity, served all the same), and the most there were since the last backend_take_peak:
	 * what the backend is really serving, whatever its callers think. */
	_Atomic uint32_t serving, serving_peak;
	int error; /* first fatal error of the thread, as -errno */
};

int backend_start(struct backend *b, const char *name, double latency_s, double jitter,
		  uint64_t seed);
/* Every dependency's backend, as cfg says (its latency, the jitter, a seed
 * of its own): 0, or -errno (said on stderr) with none of them left
 * running. */
int backends_start(struct backend be[NDEPS], const struct demo_config *cfg);
void backend_set_latency(struct backend *b, double latency_s);
/* Serve k requests at a time and queue the rest (0: no limit). */
void backend_set_capacity(struct backend *b, uint32_t k);
void backend_stop(struct backend *b);
uint32_t backend_serving(struct backend *b);
/* The peak of serving since the last call, which starts a new one. */
uint32_t backend_take_peak(struct backend *b);

/* The answer a backend gives to request id; a caller checks it. */
uint64_t backend_answer(uint64_t id);

/* ---- the order service and its load (demo_service.c) ------------------- */

struct service;

struct service_params {
	const struct demo_config *cfg;
	bool isolated;
	uint16_t port[NDEPS];
	uint32_t conc[NDEPS], queue[NDEPS];
	uint64_t queue_wait_ns[NDEPS]; /* 0: until the order's deadline */
	/* Attach an adaptive controller to the bulkhead, the defaults but a
	 * ceiling (0: the default); each call is a sample: its time from the
	 * grant, a timeout as dropped. */
	bool adaptive[NDEPS];
	uint32_t adaptive_max[NDEPS];
	struct results *res;
	uint64_t t0; /* the run's start, bh_now_ns() */
};

/* A live view for the per-second line. */
struct service_gauges {
	uint64_t offered[NDEPS]; /* orders generated so far */
	uint32_t held[NDEPS];    /* workers busy with a dependency, permit waits included */
	uint32_t busy;           /* workers not idle */
	uint32_t accept_queued;  /* orders waiting for a worker */
	uint64_t late_max_ns;    /* the load generator's worst wake-up so far */
	bool has_bh;
	struct bh_stats bh[NDEPS];
};

int service_start(const struct service_params *p, struct service **out);
/* The controller of d's bulkhead, or NULL. */
struct bh_adaptive *service_adaptive(struct service *s, enum dep d);
/* Stop offering load (the generator exits; already accepted orders stay). */
void service_stop_load(struct service *s);
/* True once the generator stopped and no order is queued or being served. */
bool service_idle(struct service *s);
void service_gauges(struct service *s, struct service_gauges *g);
/* Stop everything (waiters get -ESHUTDOWN, blocked calls return), join
 * every thread, close every socket, free. Returns the number of releases
 * the library refused (must be 0). */
uint64_t service_stop(struct service *s);

/* A TCP connection to port on loopback, Nagle off: the fd, or -errno. */
int demo_connect_loopback(uint16_t port);

/* ---- reporting (demo_report.c) ----------------------------------------- */

struct dep_tick {
	uint32_t offered, done, ok;
	double p50_s, p99_s; /* response time of the orders done this second */
	uint32_t held;
	struct bh_stats bh;  /* snapshot at the end of the second */
	uint64_t rejected, timed_out; /* during this second */
};

struct tick {
	uint32_t t;          /* seconds into the run */
	bool fault;
	uint32_t busy, accept_queued;
	bool has_bh;
	struct dep_tick d[NDEPS];
};

/* Ticks plus the totals, by phase of arrival, that the summary compares. */
struct phase_stats {
	uint64_t n, ok;
	uint64_t by_outcome[NOUTCOMES];
	double p50_s, p99_s;   /* response time of every order, failed ones too */
	double fail_p50_s;     /* time to the answer of failed orders */
	uint64_t fast_fail;    /* failed orders answered within 50 ms */
};

enum phase { PH_BEFORE, PH_FAULT, PH_AFTER, NPHASES };

struct run_report {
	const char *label;
	bool isolated, complete;
	double stopped_s;      /* when !complete: seconds into the run it stopped */
	uint64_t open_at_stop; /* orders still open then, left out of the totals */
	uint32_t conc[NDEPS], queue[NDEPS];
	uint64_t queue_wait_ns[NDEPS];
	struct tick *ticks;
	uint32_t nticks, cap_ticks;
	struct phase_stats ph[NDEPS][NPHASES];
	uint32_t peak_held[NDEPS];
	uint64_t refused_releases;
	uint64_t dropped_records;
	uint64_t late_max_ns; /* the load generator's worst wake-up */
};

struct reporter {
	struct results *res;
	size_t seen;     /* records already folded into a tick */
	struct service_gauges last;
};

void reporter_init(struct reporter *rp, struct results *res);
/* Fold the last second into a tick, print its line (unless quiet). */
void reporter_tick(struct reporter *rp, struct run_report *rr, const struct demo_config *cfg,
		   struct service *s, uint32_t t, bool fault);
void report_print_header(const struct demo_config *cfg);
/* Totals by phase, from every record. */
void report_finish(struct run_report *rr, const struct demo_config *cfg,
		   const struct results *res);
void report_print_summary(const struct run_report *without, const struct run_report *with,
			  const struct demo_config *cfg);
void report_write_kv(FILE *f, const struct run_report *without, const struct run_report *with,
		     const struct demo_config *cfg);
void run_report_free(struct run_report *rr);

/* ---- the chart (demo_svg.c) -------------------------------------------- */

/* Start an SVG document of w x h on a white page. */
void svg_begin(FILE *f, int w, int h);

void svg_write(FILE *f, const struct run_report *without, const struct run_report *with,
	       const struct demo_config *cfg);

/* ---- helpers ------------------------------------------------------------- */

/* Sleep until t_ns (bh_now_ns clock); false when a stop signal came
 * (bulkhead-demo.c: only the main thread takes them). */
bool demo_wait_until(uint64_t t_ns);
/* The stop signal that came, or 0. */
int demo_stop_signal(void);

/* The end of the fault: it fits the run (bulkhead-demo refuses one that
 * does not). */
static inline double fault_end_s(const struct demo_config *c)
{
	return c->fault_at_s + c->fault_for_s;
}

/* Whether the fault overlaps [from_s, to_s) of a run. */
static inline bool fault_overlaps(const struct demo_config *c, double from_s, double to_s)
{
	return from_s < c->fault_at_s + c->fault_for_s && to_s > c->fault_at_s;
}

static inline uint64_t sec_to_ns(double s)
{
	return (uint64_t)(s * 1e9 + 0.5);
}

/* Percentile of a sorted array (nearest rank). */
double percentile_sorted(const double *v, size_t n, double q);

#endif /* BH_TOOLS_DEMO_H */
