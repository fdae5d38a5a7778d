/* bulkhead-demo --scenario prefork and --scenario cluster: a service made
 * of several processes, each with its own worker threads, calling one
 * payment backend. The backend (the parent's, over loopback) counts what
 * it really serves.
 *
 *   worker process 1 (threads) --+
 *   worker process 2 (threads) --+--TCP--> payment (counts its own
 *   ...                          |          concurrency)
 *   worker process N (threads) --+
 *
 * Run 'local': every process has its own bulkhead of the limit, so payment
 * sees up to processes x limit. Run 'shared': one bulkhead for all of them,
 * host-wide (prefork: bh_shm_open) or through Redis (cluster:
 * bh_cluster_open); payment sees at most the limit. Mid-fault (payment
 * slow, the permits held for seconds) one process is SIGKILLed: a
 * host-wide bulkhead takes its permits back (bh_stats' reclaimed), a
 * cluster bulkhead gives its share to the others once its lease ran out.
 *
 * Every thread calls payment back to back: try a permit (no queue), call,
 * give it back; on a refusal wait a little and try again. Each process
 * writes what its threads hold into a page it shares with the parent. */
#ifndef BH_TOOLS_DEMO_PROCS_H
#define BH_TOOLS_DEMO_PROCS_H

#include "demo.h"

#define PROCS_MAX 16u
#define PROCS_THREADS_MAX 64u

enum procs_mode {
	PM_LOCAL,   /* a bulkhead per process (bh_create) */
	PM_SHM,     /* one host-wide bulkhead (bh_shm_open) */
	PM_CLUSTER, /* one cluster bulkhead (bh_cluster_open) */
};

/* One worker process, written by it, read by the parent; in a MAP_SHARED
 * page. Every access is relaxed: each field is a flag or a count read on
 * its own, and nothing is published through one (a dead process's last
 * values are read after waitpid). */
struct procs_slot {
	_Atomic uint32_t held;  /* permits its threads hold now */
	_Atomic uint32_t share; /* cluster: permits it may admit now */
	_Atomic uint32_t ready; /* 1: its bulkhead is open and its threads run */
	_Atomic int32_t error;  /* -errno that ended it early */
	_Atomic uint64_t ok, rejected, failed;
};

struct procs_page {
	_Atomic uint32_t stop; /* the parent says: finish your calls and exit */
	struct procs_slot slot[PROCS_MAX];
};

/* What a scenario gives the engine. */
struct procs_scenario {
	const char *name;       /* "prefork" */
	const char *unit;       /* "worker", "instance" */
	const char *local_label;  /* "a bulkhead per worker" */
	const char *shared_label; /* "one host-wide bulkhead" */
	enum procs_mode shared_mode;
	const char *shm_name;   /* PM_SHM */
	const char *endpoint;   /* PM_CLUSTER: unix://... */
	uint64_t lease_ns;      /* PM_CLUSTER */
};

/* One second of a run. */
struct procs_tick {
	uint32_t t;
	bool fault;
	uint32_t backend_peak;        /* the most payment served at once */
	uint32_t held[PROCS_MAX];     /* at the end of the second */
	uint32_t share[PROCS_MAX];
	bool alive[PROCS_MAX];
	uint64_t ok, rejected;        /* during the second, every process */
	uint64_t in_flight, reclaimed; /* PM_SHM: the shared bulkhead's */
	bool killed;                  /* the kill happened in this second */
};

struct procs_run {
	enum procs_mode mode;
	const char *label;
	uint32_t limit, procs;
	struct procs_tick *ticks;
	uint32_t nticks, cap_ticks;
	uint32_t peak;            /* payment's, over the run */
	int victim;               /* the process killed, -1: none */
	uint32_t victim_held;     /* what it held when it was killed */
	double kill_s;
	uint64_t reclaimed;       /* PM_SHM: at the end of the run */
	double moved_s;           /* PM_CLUSTER: kill to survivors' shares == limit (-1: never) */
	uint32_t survivors_share; /* PM_CLUSTER: their sum at the end */
	uint64_t ok, rejected, failed;
	bool ran, complete;
	double stopped_s;
};

/* Both runs, lines, summary, chart. 0, -EINTR (a stop signal) or -errno,
 * already reported. */
int procs_scenario_run(const struct procs_scenario *sc, const struct demo_config *cfg,
		       struct demo_outputs *out);

/* The shared bulkhead, opened in a worker process (demo_prefork.c,
 * demo_cluster.c). */
int procs_open_shm(const struct procs_scenario *sc, const struct demo_config *cfg,
		   bulkhead_t **out);
int procs_open_cluster(const struct procs_scenario *sc, const struct demo_config *cfg,
		       bulkhead_t **out);
/* PM_CLUSTER: the share this process may admit now. */
uint32_t procs_cluster_share(bulkhead_t *bh);

void procs_svg_write(FILE *f, const struct procs_scenario *sc, const struct procs_run *local,
		     const struct procs_run *shared, const struct demo_config *cfg);

/* The scenarios, for bulkhead-demo.c. */
int prefork_scenario(const struct demo_config *cfg, struct demo_outputs *out);
int cluster_scenario(const struct demo_config *cfg, struct demo_outputs *out);
/* Why the cluster scenario cannot run here, or NULL. */
const char *cluster_unavailable(void);

#endif /* BH_TOOLS_DEMO_PROCS_H */
