/* bulkhead-demo --scenario async-trap: the async trap with a real io_uring
 * caller. A caller that stops waiting (a timeout on the future it holds)
 * has not stopped the call it made; if the permit goes back then, the
 * bulkhead counts less than is really in flight.
 *
 *   event loop (one thread, one ring) --CONNECT, SEND, RECV--> payment
 *   permits: a bulkhead, no queue                              (loopback)
 *
 * Each call's caller stops waiting after its timeout (as Java's orTimeout
 * ends the wait on a CompletableFuture, not the work behind it).
 * naive gives the permit back right then, though the call is still in the
 * kernel; tracked lets the io_uring tracker give it back at the call's final
 * CQE (bh_uring_track), with a linked timeout as the call's own, shorter
 * deadline and a cancel when the caller gives up. What is really in flight
 * is counted twice, apart from the bulkhead: by the loop (calls started
 * whose final CQE has not come) and by the backend (requests it serves). */
#ifndef BH_TOOLS_DEMO_TRAP_H
#define BH_TOOLS_DEMO_TRAP_H

#include "demo.h"

enum trap_mode { TRAP_NAIVE, TRAP_TRACKED, NTRAP_MODES };

extern const char *const trap_mode_name[NTRAP_MODES];

/* In flight, three ways, at one instant of the loop. */
struct trap_counts {
	uint32_t reported; /* the bulkhead's in_flight, from bh_stats */
	uint32_t kernel;   /* calls started whose final CQE has not come */
	uint32_t backend;  /* requests the backend is serving */
};

struct trap_sample {
	uint32_t t_ms; /* since the run's start */
	struct trap_counts n;
};

/* What became of the calls (cumulative, or during one second). */
struct trap_calls {
	uint64_t offered;  /* arrivals, open loop */
	uint64_t shed;     /* no permit: the bulkhead was full */
	uint64_t no_start; /* no socket or no SQE */
	uint64_t ok;       /* answered before the caller stopped waiting */
	uint64_t deadline; /* ended by the call's own deadline, caller still waiting */
	uint64_t failed;   /* any other error while the caller waited */
	uint64_t gave_up;  /* the caller stopped waiting first */
	uint64_t late;     /* final CQEs that came after their caller gave up */
	uint64_t cancels;  /* kernel cancels sent when a caller gave up */
};

/* One second of a run, as its line shows it. */
struct trap_tick {
	uint32_t t; /* seconds into the run */
	bool fault;
	struct trap_calls calls; /* during this second */
	struct trap_counts peak; /* over the loop's checks in this second */
};

/* The loop compares the bulkhead with its own count after every round of
 * submissions. */
struct trap_checks {
	uint64_t n, mismatched;
	uint32_t max_hidden;      /* calls in the kernel the bulkhead did not count */
	struct trap_counts peak;  /* over every check */
	uint64_t disagreements;   /* tracked: the tracker's DONE vs our count of CQEs */
	uint64_t refused_releases; /* bh_release said -EOVERFLOW */
};

/* One run. The caller thread appends ticks and samples, publishing each
 * count with a release store; the rest is final once the thread is joined. */
struct trap_run {
	enum trap_mode mode;
	uint32_t limit;
	struct trap_tick *ticks;
	struct trap_sample *samples;
	uint32_t cap_ticks, cap_samples;
	_Atomic uint32_t nticks, nsamples;
	struct trap_calls calls;   /* over the load window */
	struct trap_checks checks;
	uint32_t backend_peak;     /* the backend's own, exact */
	uint32_t samples_mismatched;
	bool started;              /* the caller ran: the run has something to show */
	bool complete;
	double stopped_s;          /* when started && !complete: seconds into the run */
	int error;                 /* of the caller thread, as -errno */
};

int trap_run_init(struct trap_run *run, enum trap_mode mode, const struct demo_config *cfg);
void trap_run_free(struct trap_run *run);

/* ---- the io_uring caller (demo_trap_caller.c) -------------------------- */

struct trap_caller;

struct trap_caller_params {
	const struct demo_config *cfg;
	enum trap_mode mode;
	struct backend *backend; /* payment, on loopback */
	struct trap_run *run;
	uint64_t t0; /* the run's start, bh_now_ns() */
};

/* 0 when this process may set up an io_uring ring, else -errno. */
int trap_probe_uring(void);

/* Start the caller thread; it offers calls until t0 + duration, then
 * cancels what is left, waits for every final CQE and returns. */
int trap_caller_start(const struct trap_caller_params *p, struct trap_caller **out);
bool trap_caller_done(struct trap_caller *c);
/* Stop it now if it still runs, join it, free it. */
void trap_caller_stop(struct trap_caller *c);

/* ---- the scenario (demo_trap.c) and its chart (demo_trap_svg.c) -------- */

/* Both runs, lines, summary, chart (of what ran, when a stop signal
 * came). 0, -EINTR (a stop signal) or -errno, already reported. */
int trap_scenario(const struct demo_config *cfg, struct demo_outputs *out);

void trap_svg_write(FILE *f, const struct trap_run *naive, const struct trap_run *tracked,
		    const struct demo_config *cfg);

#endif /* BH_TOOLS_DEMO_TRAP_H */
