/* bulkhead-demo: watch a bulkhead contain a slow dependency, for real.
 *
 * Starts two backends on loopback (inventory ~20 ms, payment ~200 ms), an
 * order service with a fixed worker pool, and an open-loop load generator;
 * part-way through each run payment slows to ~5 s. Runs twice, without and
 * with a libbulkhead bulkhead per dependency (sized by the same model as
 * bulkhead-size), prints a line per second, a side-by-side summary, and an
 * SVG chart. Ctrl-C stops it cleanly; at exit it checks that no thread or
 * socket it made is left. See bulkhead-demo(1) and tools/demo.h.
 *
 * --scenario async-trap shows the async trap instead: an io_uring caller
 * that gives its permit back when it stops waiting, though the call goes on
 * in the kernel, then one whose permit follows the call (tools/demo_trap.h).
 *
 * Files given with --svg and --kv are opened before anything starts; a stop
 * signal ends a run early, and what ran is still summarised and charted,
 * marked as interrupted. */
#define _GNU_SOURCE /* dirfd, sigtimedwait, strsignal */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "demo.h"
#include "sizing.h"
#include "demo_adaptive.h"
#include "demo_procs.h"
#ifdef HAVE_LIBURING
#include "demo_trap.h"
#endif

/* A scenario this build or this system cannot run (sysexits' EX_UNAVAILABLE). */
#define EXIT_UNAVAILABLE 69

/* ---- flags --------------------------------------------------------------- */

static const char usage_text[] =
	"Usage: %s [options]\n"
	"\n"
	"An order service with two dependencies, run for real over loopback:\n"
	"payment slows from ~200 ms to ~5 s part-way through; one run without\n"
	"isolation, one with a libbulkhead bulkhead per dependency. About a minute\n"
	"with the defaults. Ctrl-C stops it and summarises what ran.\n"
	"\n"
	"Load and service:\n"
	"  -r, --rate N              orders per second, open loop (default 200)\n"
	"      --pay-share X         share of orders that call payment (default 0.2)\n"
	"  -w, --workers N           order service worker threads (default 40)\n"
	"      --accept-queue N      orders that may wait for a worker (default 100)\n"
	"      --inv-timeout TIME    deadline of an inventory order (default 1s)\n"
	"      --pay-timeout TIME    deadline of a payment order (default 2s)\n"
	"Backends and the fault:\n"
	"      --inv-latency TIME    inventory's typical answer time (default 20ms)\n"
	"      --pay-latency TIME    payment's typical answer time (default 200ms)\n"
	"      --jitter X            answers take latency x (1 +- X) (default 0.2)\n"
	"      --fault-latency TIME  payment's answer time in the fault (default 5s)\n"
	"  -d, --duration TIME       length of each run (default 25s)\n"
	"      --fault-at TIME       when payment slows (default 5s)\n"
	"      --fault-for TIME      how long it stays slow (default 15s)\n"
	"Isolation (default: sized like bulkhead-size, queues cut to fit the workers):\n"
	"      --safety X            sizing safety factor (default 1.3)\n"
	"      --inv-bulkhead C[+K]  inventory bulkhead: C permits, K queued\n"
	"      --pay-bulkhead C[+K]  payment bulkhead\n"
	"      --inv-queue-wait TIME longest wait for a permit (default: the deadline)\n"
	"      --pay-queue-wait TIME the same for payment\n"
	"Output:\n"
	"      --only RUN            run only 'without' or 'with' isolation\n"
	"      --svg FILE            the chart (default bulkhead-demo.svg; '' for none)\n"
	"      --kv FILE             also write the summary as key=value lines\n"
	"  -q, --quiet               no line per second\n"
	"      --seed N              seed of the order mix and the jitter (default 1)\n"
	"      --scenario NAME       containment (default), async-trap, adaptive,\n"
	"                            prefork or cluster\n"
	"  -h, --help                show this help\n"
	"\n"
	"--scenario async-trap: one io_uring event loop calls payment through a\n"
	"bulkhead; its callers stop waiting after --pay-timeout. Run 'naive' gives\n"
	"the permit back then, with the call still in the kernel; run 'tracked'\n"
	"lets it follow the call. Prints what the bulkhead reports in flight and\n"
	"what really is. About 30 s. It takes --rate (calls/s, default 50),\n"
	"--pay-latency, --jitter, --fault-latency (default 3s), --duration\n"
	"(default 14s), --fault-at (3s), --fault-for (7s), --pay-timeout (default\n"
	"400ms), --pay-bulkhead C (permits, default 16), --only naive|tracked,\n"
	"--svg (default bulkhead-demo-async-trap.svg), --kv, --quiet, --seed, and\n"
	"      --call-deadline TIME  the tracked call's own deadline, a linked\n"
	"                            timeout (default 7/8 of --pay-timeout; 'none')\n"
	"\n"
	"--scenario prefork: worker processes (--procs, default 4, of --threads\n"
	"threads, default 8) call payment back to back. Run 'local': a bulkhead of\n"
	"--pay-bulkhead C permits (default 4) in each process; run 'shared': one\n"
	"host-wide bulkhead of C for all. Payment counts what it serves itself.\n"
	"Mid-fault the worker holding the most permits is SIGKILLed (--kill-at,\n"
	"default fault start + half the fastest fault call); the host-wide\n"
	"bulkhead takes its permits back. About 30 s: --duration 12s, --fault-at\n"
	"3s, --fault-for 6s, --fault-latency 3s; --svg default\n"
	"bulkhead-demo-prefork.svg; --only local|shared.\n"
	"--scenario cluster: the same with 3 instances (--procs) of 16 threads and\n"
	"a limit of 13: run 'shared' is one cluster bulkhead in the demo's own\n"
	"redis-server (started on a unix socket, stopped at the end), whose\n"
	"shares move to the survivors once the killed instance's lease ran out:\n"
	"      --lease TIME          an instance's lease (default 2s)\n"
	"--svg default bulkhead-demo-cluster.svg.\n"
	"\n"
	"The fault must end within the run and be slower than payment's P99,\n"
	"--pay-latency x (1 + --jitter).\n"
	"\n"
	"--scenario adaptive: payment serves --pay-capacity N calls at a time\n"
	"(default 16) and queues the rest; during the fault only --fault-capacity\n"
	"N (default 3). Both runs isolate each dependency; run 'static' keeps the\n"
	"computed limit, run 'adaptive' attaches an adaptive controller to\n"
	"payment's bulkhead (the defaults, its ceiling that limit). About 40 s:\n"
	"--duration (default 20s), --fault-at (3s), --fault-for (6s),\n"
	"--pay-timeout (default 1s), --pay-queue-wait (a quarter of it); the chart\n"
	"goes to bulkhead-demo-adaptive.svg. It takes the containment flags\n"
	"except --fault-latency.\n"
	"\n"
	"TIME is a number with an optional unit: %s. A bare number is in\n"
	"seconds for --duration, --fault-at and --fault-for, in ms elsewhere.\n";

enum {
	OPT_PAY_SHARE = 256, OPT_ACCEPT, OPT_INV_TIMEOUT, OPT_PAY_TIMEOUT, OPT_INV_LAT,
	OPT_PAY_LAT, OPT_JITTER, OPT_FAULT_LAT, OPT_FAULT_AT, OPT_FAULT_FOR, OPT_SAFETY,
	OPT_INV_BH, OPT_PAY_BH, OPT_INV_QW, OPT_PAY_QW, OPT_ONLY, OPT_SVG, OPT_KV, OPT_SEED,
	OPT_SCENARIO, OPT_CALL_DEADLINE, OPT_PAY_CAP, OPT_FAULT_CAP, OPT_PROCS, OPT_THREADS,
	OPT_KILL_AT, OPT_LEASE, NOPT_IDS
};

/* Bits, so that a flag may belong to several. */
enum scenario_id {
	SC_CONTAINMENT = 1, SC_TRAP = 2, SC_ADAPTIVE = 4, SC_PREFORK = 8, SC_CLUSTER = 16
};
#define SC_PROCS (SC_PREFORK | SC_CLUSTER)

/* Flags that set one number of the configuration. */
enum value_kind { V_NUMBER, V_COUNT, V_MS, V_SECONDS };

#define FIELD(f) offsetof(struct demo_config, f)

static const struct value_flag {
	int id;
	const char *name;
	size_t field;
	enum value_kind kind;
	double min, max;
} value_flags[] = {
	{ 'r', "rate", FIELD(rate), V_NUMBER, 1, 20000 },
	{ OPT_PAY_SHARE, "pay-share", FIELD(pay_share), V_NUMBER, 0, 1 },
	{ 'w', "workers", FIELD(workers), V_COUNT, 1, 4096 },
	{ OPT_ACCEPT, "accept-queue", FIELD(accept_queue), V_COUNT, 1, 1000000 },
	{ OPT_INV_TIMEOUT, "inv-timeout", FIELD(timeout_s[DEP_INV]), V_MS, 1e-3, 60 },
	{ OPT_PAY_TIMEOUT, "pay-timeout", FIELD(timeout_s[DEP_PAY]), V_MS, 1e-3, 60 },
	{ OPT_INV_LAT, "inv-latency", FIELD(latency_s[DEP_INV]), V_MS, 1e-4, 60 },
	{ OPT_PAY_LAT, "pay-latency", FIELD(latency_s[DEP_PAY]), V_MS, 1e-4, 60 },
	{ OPT_JITTER, "jitter", FIELD(jitter), V_NUMBER, 0, 0.9 },
	{ OPT_FAULT_LAT, "fault-latency", FIELD(fault_latency_s), V_MS, 1e-4, 600 },
	{ 'd', "duration", FIELD(duration_s), V_SECONDS, 1, 3600 },
	{ OPT_FAULT_AT, "fault-at", FIELD(fault_at_s), V_SECONDS, 0, 3600 },
	{ OPT_FAULT_FOR, "fault-for", FIELD(fault_for_s), V_SECONDS, 1e-3, 3600 },
	{ OPT_SAFETY, "safety", FIELD(safety), V_NUMBER, 1, 10 },
	{ OPT_INV_QW, "inv-queue-wait", FIELD(queue_wait_s[DEP_INV]), V_MS, 1e-6, 60 },
	{ OPT_PAY_QW, "pay-queue-wait", FIELD(queue_wait_s[DEP_PAY]), V_MS, 1e-6, 60 },
	{ OPT_SEED, "seed", FIELD(seed), V_COUNT, 0, UINT32_MAX },
	{ OPT_PAY_CAP, "pay-capacity", FIELD(capacity), V_COUNT, 1, 10000 },
	{ OPT_FAULT_CAP, "fault-capacity", FIELD(fault_capacity), V_COUNT, 1, 10000 },
	{ OPT_PROCS, "procs", FIELD(procs), V_COUNT, 2, PROCS_MAX },
	{ OPT_THREADS, "threads", FIELD(threads), V_COUNT, 1, PROCS_THREADS_MAX },
	{ OPT_KILL_AT, "kill-at", FIELD(kill_at_s), V_SECONDS, 0, 3600 },
	{ OPT_LEASE, "lease", FIELD(lease_s), V_MS, 0.3, 60 },
};

static const struct option longopts[] = {
	{ "rate", required_argument, NULL, 'r' },
	{ "pay-share", required_argument, NULL, OPT_PAY_SHARE },
	{ "workers", required_argument, NULL, 'w' },
	{ "accept-queue", required_argument, NULL, OPT_ACCEPT },
	{ "inv-timeout", required_argument, NULL, OPT_INV_TIMEOUT },
	{ "pay-timeout", required_argument, NULL, OPT_PAY_TIMEOUT },
	{ "inv-latency", required_argument, NULL, OPT_INV_LAT },
	{ "pay-latency", required_argument, NULL, OPT_PAY_LAT },
	{ "jitter", required_argument, NULL, OPT_JITTER },
	{ "fault-latency", required_argument, NULL, OPT_FAULT_LAT },
	{ "duration", required_argument, NULL, 'd' },
	{ "fault-at", required_argument, NULL, OPT_FAULT_AT },
	{ "fault-for", required_argument, NULL, OPT_FAULT_FOR },
	{ "safety", required_argument, NULL, OPT_SAFETY },
	{ "inv-bulkhead", required_argument, NULL, OPT_INV_BH },
	{ "pay-bulkhead", required_argument, NULL, OPT_PAY_BH },
	{ "inv-queue-wait", required_argument, NULL, OPT_INV_QW },
	{ "pay-queue-wait", required_argument, NULL, OPT_PAY_QW },
	{ "only", required_argument, NULL, OPT_ONLY },
	{ "svg", required_argument, NULL, OPT_SVG },
	{ "kv", required_argument, NULL, OPT_KV },
	{ "quiet", no_argument, NULL, 'q' },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "scenario", required_argument, NULL, OPT_SCENARIO },
	{ "call-deadline", required_argument, NULL, OPT_CALL_DEADLINE },
	{ "pay-capacity", required_argument, NULL, OPT_PAY_CAP },
	{ "fault-capacity", required_argument, NULL, OPT_FAULT_CAP },
	{ "procs", required_argument, NULL, OPT_PROCS },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "kill-at", required_argument, NULL, OPT_KILL_AT },
	{ "lease", required_argument, NULL, OPT_LEASE },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Set the field of flag id from text s; false if id is not a value flag. */
static bool set_value(struct demo_config *c, int id, const char *s)
{
	for (size_t i = 0; i < sizeof(value_flags) / sizeof(value_flags[0]); i++) {
		const struct value_flag *f = &value_flags[i];
		void *p = (char *)c + f->field;
		char name[32];

		if (f->id != id)
			continue;
		snprintf(name, sizeof(name), "--%s", f->name);
		if (f->kind == V_COUNT)
			*(uint32_t *)p = cli_u32(name, s, (uint32_t)f->min, (uint32_t)f->max);
		else if (f->kind == V_NUMBER)
			*(double *)p = cli_double(name, s, f->min, f->max);
		else
			*(double *)p = cli_duration(name, s, f->kind == V_MS ? CLI_MS : CLI_S,
						    f->min, f->max);
		return true;
	}
	return false;
}

static void defaults(struct demo_config *c)
{
	*c = (struct demo_config){
		.rate = 200, .pay_share = 0.2, .workers = 40, .accept_queue = 100,
		.duration_s = 25, .fault_at_s = 5, .fault_for_s = 15,
		.latency_s = { 0.020, 0.200 }, .fault_latency_s = 5, .jitter = 0.2,
		.timeout_s = { 1, 2 }, .safety = 1.3, .runs = RUN_WITHOUT | RUN_WITH,
		.svg_path = "bulkhead-demo.svg", .seed = 1,
	};
}

/* "C" or "C+K". */
static void parse_bulkhead(const char *flag, const char *s, struct demo_config *c, enum dep d)
{
	char buf[64], *plus;

	if (strlen(s) >= sizeof(buf))
		cli_usage_error("%s: expected C or C+K, got '%s'", flag, s);
	strcpy(buf, s);
	plus = strchr(buf, '+');
	if (plus)
		*plus = '\0';
	if (!cli_parse_u32(buf, 1, BH_LIMIT_MAX, &c->conc[d]) ||
	    (plus && !cli_parse_u32(plus + 1, 0, BH_QUEUE_MAX, &c->queue[d])))
		cli_usage_error("%s: expected C or C+K (permits from 1 to %u, queue from 0 to %u), "
				"got '%s'", flag, BH_LIMIT_MAX, BH_QUEUE_MAX, s);
	c->queue_given[d] = plus != NULL;
}

/* What the command line said beyond the values: which flags it gave, for
 * the checks and defaults that depend on the scenario. */
struct cmdline {
	const char *scenario, *only;
	bool given[NOPT_IDS];
};

/* Flags that belong to some scenarios only (a set of enum scenario_id
 * bits); the rest serve every one. */
#define SC_ORDERS (SC_CONTAINMENT | SC_ADAPTIVE) /* the order service's */
static const struct {
	int id;
	unsigned in;
} one_scenario_flags[] = {
	{ 'r', SC_ORDERS | SC_TRAP },      { OPT_PAY_TIMEOUT, SC_ORDERS | SC_TRAP },
	{ OPT_PAY_SHARE, SC_ORDERS },        { 'w', SC_ORDERS },
	{ OPT_ACCEPT, SC_ORDERS },           { OPT_INV_TIMEOUT, SC_ORDERS },
	{ OPT_INV_LAT, SC_ORDERS },          { OPT_SAFETY, SC_ORDERS },
	{ OPT_INV_BH, SC_ORDERS },           { OPT_INV_QW, SC_ORDERS },
	{ OPT_PAY_QW, SC_ORDERS },           { OPT_CALL_DEADLINE, SC_TRAP },
	{ OPT_PAY_CAP, SC_ADAPTIVE },        { OPT_FAULT_CAP, SC_ADAPTIVE },
	{ OPT_FAULT_LAT, SC_CONTAINMENT | SC_TRAP | SC_PROCS },
	{ OPT_PROCS, SC_PROCS },             { OPT_THREADS, SC_PROCS },
	{ OPT_KILL_AT, SC_PROCS },           { OPT_LEASE, SC_CLUSTER },
};

static const char *flag_name(int id)
{
	for (const struct option *o = longopts; o->name; o++)
		if (o->val == id)
			return o->name;
	return "?";
}

static void check_flags_apply(const struct cmdline *cl, enum scenario_id sc)
{
	for (size_t i = 0; i < sizeof(one_scenario_flags) / sizeof(one_scenario_flags[0]); i++)
		if (cl->given[one_scenario_flags[i].id] && !(one_scenario_flags[i].in & sc))
			cli_usage_error("--%s does not apply to --scenario %s",
					flag_name(one_scenario_flags[i].id), cl->scenario);
}

static void parse_only(const char *s, struct demo_config *c, enum scenario_id sc)
{
	const char *first = sc == SC_TRAP ? "naive" : sc == SC_ADAPTIVE ? "static"
			  : sc & SC_PROCS ? "local" : "without";
	const char *second = sc == SC_TRAP ? "tracked" : sc == SC_ADAPTIVE ? "adaptive"
			   : sc & SC_PROCS ? "shared" : "with";

	if (!s)
		return;
	if (strcmp(s, first) == 0)
		c->runs = RUN_WITHOUT;
	else if (strcmp(s, second) == 0)
		c->runs = RUN_WITH;
	else
		cli_usage_error("--only: expected '%s' or '%s', got '%s'", first, second, s);
}

static void parse_call_deadline(const char *s, struct demo_config *c)
{
	if (strcmp(s, "none") == 0)
		c->call_deadline_s = 0;
	else
		c->call_deadline_s = cli_duration("--call-deadline", s, CLI_MS, 1e-3, 60);
}

static double qps_of(const struct demo_config *c, enum dep d)
{
	return c->rate * (d == DEP_PAY ? c->pay_share : 1 - c->pay_share);
}

/* P99 of a backend's answers: the top of its jitter. */
static double p99_of(const struct demo_config *c, enum dep d)
{
	return c->latency_s[d] * (1 + c->jitter);
}

/* The fault, in every scenario: within the run, and a real slowdown (the
 * same rule as bulkhead-size --fault). The summary compares the fault with
 * the time before it, so a fault that ends past the run has no meaning. */
static void check_fault(const struct demo_config *c)
{
	if (c->fault_at_s >= c->duration_s)
		cli_usage_error("--fault-at (%g s) must fall within --duration (%g s)",
				c->fault_at_s, c->duration_s);
	if (fault_end_s(c) > c->duration_s * (1 + 1e-12))
		cli_usage_error("the fault must end within --duration (%g s): --fault-at %g s "
				"+ --fault-for %g s ends at %g s",
				c->duration_s, c->fault_at_s, c->fault_for_s, fault_end_s(c));
	if (c->fault_capacity) /* adaptive: the fault is a capacity drop */
		return;
	cli_check_fault("--fault-latency", c->fault_latency_s, p99_of(c, DEP_PAY),
			"--pay-latency x (1 + --jitter)");
}

/* async-trap's own defaults, for what the command line left unsaid: about
 * 30 s for both runs, payment slow well past its callers' patience. */
static void trap_defaults(struct demo_config *c, const struct cmdline *cl)
{
	static const struct {
		int id;
		size_t field;
		double v;
	} d[] = {
		{ 'r', FIELD(rate), 50 },
		{ 'd', FIELD(duration_s), 14 },
		{ OPT_FAULT_AT, FIELD(fault_at_s), 3 },
		{ OPT_FAULT_FOR, FIELD(fault_for_s), 7 },
		{ OPT_FAULT_LAT, FIELD(fault_latency_s), 3 },
		{ OPT_PAY_TIMEOUT, FIELD(timeout_s[DEP_PAY]), 0.4 },
	};

	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
		if (!cl->given[d[i].id])
			*(double *)((char *)c + d[i].field) = d[i].v;
	if (!cl->given[OPT_PAY_BH])
		c->conc[DEP_PAY] = 16;
	if (!cl->given[OPT_SVG])
		c->svg_path = "bulkhead-demo-async-trap.svg";
	if (!cl->given[OPT_CALL_DEADLINE])
		c->call_deadline_s = 0.875 * c->timeout_s[DEP_PAY];
}

static void check_trap(const struct demo_config *c)
{
	if (c->queue_given[DEP_PAY])
		cli_usage_error("--pay-bulkhead: async-trap takes permits only (C, no +K): "
				"its event loop never queues for a permit");
	if (c->call_deadline_s > c->timeout_s[DEP_PAY])
		cli_usage_error("--call-deadline (%g ms) must not exceed --pay-timeout (%g ms): "
				"the call should end before its caller stops waiting",
				c->call_deadline_s * 1e3, c->timeout_s[DEP_PAY] * 1e3);
}

/* adaptive's own defaults: about 40 s for both runs, a capacity that drops
 * to under a fifth, payment's deadline a few of its calls long. */
static void adaptive_defaults(struct demo_config *c, const struct cmdline *cl)
{
	static const struct {
		int id;
		size_t field;
		double v;
	} d[] = {
		{ 'd', FIELD(duration_s), 20 },
		{ OPT_FAULT_AT, FIELD(fault_at_s), 3 },
		{ OPT_FAULT_FOR, FIELD(fault_for_s), 6 },
		{ OPT_PAY_TIMEOUT, FIELD(timeout_s[DEP_PAY]), 1 },
	};

	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
		if (!cl->given[d[i].id])
			*(double *)((char *)c + d[i].field) = d[i].v;
	if (!cl->given[OPT_PAY_CAP])
		c->capacity = 16;
	if (!cl->given[OPT_FAULT_CAP])
		c->fault_capacity = 3;
	/* A call that starts with most of its deadline left can finish. */
	if (!cl->given[OPT_PAY_QW])
		c->queue_wait_s[DEP_PAY] = c->timeout_s[DEP_PAY] / 4;
	if (!cl->given[OPT_SVG])
		c->svg_path = "bulkhead-demo-adaptive.svg";
	if (c->fault_capacity >= c->capacity)
		cli_usage_error("--fault-capacity (%u) must be below --pay-capacity (%u): the fault "
				"is a capacity drop", c->fault_capacity, c->capacity);
}

/* prefork's and cluster's own defaults: about 30 s for both runs, the
 * kill in the fault where no call ends (the calls begun before it ended,
 * those begun in it are still running), so what the victim holds is
 * exact. */
static void procs_defaults(struct demo_config *c, const struct cmdline *cl, enum scenario_id sc)
{
	static const struct {
		int id;
		size_t field;
		double v;
	} d[] = {
		{ 'd', FIELD(duration_s), 12 },
		{ OPT_FAULT_AT, FIELD(fault_at_s), 3 },
		{ OPT_FAULT_FOR, FIELD(fault_for_s), 6 },
		{ OPT_FAULT_LAT, FIELD(fault_latency_s), 3 },
		{ OPT_LEASE, FIELD(lease_s), 2 },
	};

	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
		if (!cl->given[d[i].id])
			*(double *)((char *)c + d[i].field) = d[i].v;
	if (!cl->given[OPT_PROCS])
		c->procs = sc == SC_CLUSTER ? 3 : 4;
	if (!cl->given[OPT_THREADS])
		c->threads = sc == SC_CLUSTER ? 16 : 8;
	if (!cl->given[OPT_PAY_BH])
		c->conc[DEP_PAY] = sc == SC_CLUSTER ? 13 : 4;
	if (!cl->given[OPT_SVG])
		c->svg_path = sc == SC_CLUSTER ? "bulkhead-demo-cluster.svg"
					       : "bulkhead-demo-prefork.svg";
	if (!cl->given[OPT_KILL_AT])
		c->kill_at_s = c->fault_at_s + c->fault_latency_s * (1 - c->jitter) / 2;
}

static void check_procs(const struct demo_config *c)
{
	if (c->queue_given[DEP_PAY])
		cli_usage_error("--pay-bulkhead: this scenario takes permits only (C, no +K): "
				"its threads never queue for a permit");
	if (c->kill_at_s < c->fault_at_s || c->kill_at_s >= fault_end_s(c))
		cli_usage_error("--kill-at (%g s) must fall within the fault (%g s to %g s)",
				c->kill_at_s, c->fault_at_s, fault_end_s(c));
}

static enum scenario_id scenario_id(const char *name)
{
	if (strcmp(name, "containment") == 0)
		return SC_CONTAINMENT;
	if (strcmp(name, "async-trap") == 0)
		return SC_TRAP;
	if (strcmp(name, "adaptive") == 0)
		return SC_ADAPTIVE;
	if (strcmp(name, "prefork") == 0)
		return SC_PREFORK;
	if (strcmp(name, "cluster") == 0)
		return SC_CLUSTER;
	cli_usage_error("--scenario: expected 'containment', 'async-trap', 'adaptive', "
			"'prefork' or 'cluster', got '%s'", name);
}

static void read_flags(int argc, char **argv, struct demo_config *c, struct cmdline *cl)
{
	int ch;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":r:w:d:qh", longopts, NULL)) != -1) {
		if (ch > 0 && ch < NOPT_IDS)
			cl->given[ch] = true;
		if (set_value(c, ch, optarg))
			continue;
		switch (ch) {
		case OPT_INV_BH: parse_bulkhead("--inv-bulkhead", optarg, c, DEP_INV); break;
		case OPT_PAY_BH: parse_bulkhead("--pay-bulkhead", optarg, c, DEP_PAY); break;
		case OPT_ONLY: cl->only = optarg; break;
		case OPT_SVG: c->svg_path = optarg; break;
		case OPT_KV: c->kv_path = optarg; break;
		case 'q': c->quiet = true; break;
		case OPT_SCENARIO: cl->scenario = optarg; break;
		case OPT_CALL_DEADLINE: parse_call_deadline(optarg, c); break;
		case 'h': printf(usage_text, cli_prog, cli_duration_units()); exit(0);
		default: cli_option_error(ch, argv, longopts);
		}
	}
	if (optind < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
}

static const char *parse(int argc, char **argv, struct demo_config *c)
{
	struct cmdline cl = { .scenario = "containment" };
	enum scenario_id sc;

	defaults(c);
	read_flags(argc, argv, c, &cl);
	sc = scenario_id(cl.scenario);
	check_flags_apply(&cl, sc);
	parse_only(cl.only, c, sc);
	if (sc == SC_TRAP) {
		trap_defaults(c, &cl);
		check_trap(c);
	}
	if (sc == SC_ADAPTIVE)
		adaptive_defaults(c, &cl);
	if (sc & SC_PROCS)
		procs_defaults(c, &cl, sc);
	check_fault(c);
	if (sc & SC_PROCS)
		check_procs(c);
	return cl.scenario;
}

/* ---- signals and the clock ---------------------------------------------- */

static sigset_t stop_signals;
static int stopped_by; /* the stop signal that came, or 0 */

int demo_stop_signal(void)
{
	return stopped_by;
}

/* Every thread inherits a mask that blocks the stop signals; only the main
 * thread takes them, synchronously, while it waits for the next second. */
static void block_stop_signals(void)
{
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	signal(SIGPIPE, SIG_IGN);
}

bool demo_wait_until(uint64_t t_ns)
{
	for (;;) {
		uint64_t now = bh_now_ns();
		struct timespec ts;

		if (now >= t_ns)
			return true;
		ts.tv_sec = (time_t)((t_ns - now) / BH_SEC);
		ts.tv_nsec = (long)((t_ns - now) % BH_SEC);
		stopped_by = sigtimedwait(&stop_signals, NULL, &ts);
		if (stopped_by > 0)
			return false;
		stopped_by = 0;
	}
}

/* ---- leak check ----------------------------------------------------------- */

/* Sockets, eventfds, timerfds and epoll fds open now, as a bitmap by fd. */
struct fdset {
	unsigned char open[4096];
};

static void our_kind_fds(struct fdset *s)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;

	memset(s, 0, sizeof(*s));
	if (!dir)
		return;
	while ((e = readdir(dir)) != NULL) {
		char path[64], target[128];
		int fd = atoi(e->d_name);
		ssize_t n;

		if (fd < 0 || fd >= (int)sizeof(s->open) || fd == dirfd(dir))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		s->open[fd] = !strncmp(target, "socket:", 7) || !strncmp(target, "anon_inode:", 11);
	}
	closedir(dir);
}

/* Threads named bhd-*: ours, whatever sanitizer runtimes add. */
static int our_threads(void)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!dir)
		return 0;
	while ((e = readdir(dir)) != NULL) {
		char path[300], comm[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "bhd-", 4))
			n++;
		fclose(f);
	}
	closedir(dir);
	return n;
}

static int check_clean(const struct fdset *before)
{
	struct fdset after;
	int leaked = 0, threads = our_threads();

	our_kind_fds(&after);
	for (size_t fd = 0; fd < sizeof(after.open); fd++)
		leaked += after.open[fd] && !before->open[fd];
	if (leaked == 0 && threads == 0)
		return 0;
	fprintf(stderr, "%s: left behind %d sockets or event fds and %d threads\n", cli_prog,
		leaked, threads);
	return -1;
}

/* ---- the containment scenario --------------------------------------------- */

struct demo {
	struct demo_config cfg;
	struct demo_outputs *out;
	struct backend backend[NDEPS];
	uint32_t conc[NDEPS], queue[NDEPS];
	uint64_t queue_wait_ns[NDEPS];
	bool interrupted;
};

/* Size each bulkhead the way bulkhead-size does, from what the order
 * service knows: the peak rate to the dependency, the P99 and mean of its
 * answers, and the order's deadline. */
static void size_by_rule(struct demo *dm)
{
	const struct demo_config *c = &dm->cfg;

	for (int d = 0; d < NDEPS; d++) {
		double qps = qps_of(c, (enum dep)d);

		dm->conc[d] = c->conc[d];
		if (!dm->conc[d])
			dm->conc[d] = bhz_round_up(bhz_concurrency_raw(qps, p99_of(c, (enum dep)d),
								       c->safety));
		if (dm->conc[d] > BH_LIMIT_MAX)
			dm->conc[d] = BH_LIMIT_MAX;
		dm->queue[d] = c->queue[d];
		if (!c->queue_given[d] && qps > 0)
			dm->queue[d] = bhz_queue_recommend(qps, c->latency_s[d], c->timeout_s[d],
							   dm->conc[d], 0, NULL);
		if (dm->queue[d] > BH_QUEUE_MAX)
			dm->queue[d] = BH_QUEUE_MAX;
		dm->queue_wait_ns[d] = sec_to_ns(c->queue_wait_s[d]);
	}
}

/* The workers block in their calls, so a queued worker is held as surely
 * as a running one: a dependency can hold up to permits + queue workers.
 * Make the compartments fit the pool (cutting computed queues in
 * proportion), so that no dependency, however slow, can take the workers
 * another one is sized for. */
static void fit_compartments(struct demo *dm)
{
	const struct demo_config *c = &dm->cfg;
	uint64_t fixed = 0, cut = 0;

	for (int d = 0; d < NDEPS; d++) {
		fixed += dm->conc[d] + (c->queue_given[d] ? dm->queue[d] : 0);
		cut += c->queue_given[d] ? 0 : dm->queue[d];
	}
	if (fixed + cut <= c->workers)
		return;
	for (int d = 0; d < NDEPS; d++) {
		if (c->queue_given[d])
			continue;
		if (fixed >= c->workers)
			dm->queue[d] = 0;
		else
			dm->queue[d] = (uint32_t)(dm->queue[d] * (c->workers - fixed) / cut);
	}
}

static void size_bulkheads(struct demo *dm)
{
	size_by_rule(dm);
	fit_compartments(dm);
}

/* A duration as a bulkhead-size flag value. */
static const char *ms_flag(double s, char *buf)
{
	snprintf(buf, 32, "%gms", s * 1e3);
	return buf;
}

static void print_intro(const struct demo *dm)
{
	const struct demo_config *c = &dm->cfg;
	char a[32], b[32], t[32];

	printf("bulkhead-demo: %g orders/s, %.0f%% inventory (~%s), %.0f%% payment (~%s)\n",
	       c->rate, 100 * (1 - c->pay_share), cli_fmt_duration(c->latency_s[DEP_INV], a, 32),
	       100 * c->pay_share, cli_fmt_duration(c->latency_s[DEP_PAY], b, 32));
	printf("  %u workers, accept queue %u; deadlines: inventory %s, payment %s\n",
	       c->workers, c->accept_queue, cli_fmt_duration(c->timeout_s[DEP_INV], a, 32),
	       cli_fmt_duration(c->timeout_s[DEP_PAY], b, 32));
	printf("  fault: payment answers in ~%s from %g s to %g s of each %g s run\n",
	       cli_fmt_duration(c->fault_latency_s, a, 32), c->fault_at_s, fault_end_s(c),
	       c->duration_s);
	printf("  with isolation, each dependency may hold at most permits + queue workers:\n");
	for (int d = 0; d < NDEPS; d++) {
		printf("    %-9s %3u + %-3u of %u", dep_name[d], dm->conc[d], dm->queue[d],
		       c->workers);
		if (dm->queue_wait_ns[d])
			printf(", queue wait <= %s",
			       cli_fmt_duration((double)dm->queue_wait_ns[d] / 1e9, a, 32));
		printf("   bulkhead-size --qps %g --p99 %s --mean %s --timeout %s --threads %u\n",
		       qps_of(c, (enum dep)d), ms_flag(p99_of(c, (enum dep)d), a),
		       ms_flag(c->latency_s[d], b), ms_flag(c->timeout_s[d], t),
		       dm->conc[d] + dm->queue[d]);
	}
	fflush(stdout);
}

/* Switch payment's latency at the fault's edges. */
static void set_fault(struct demo *dm, bool on)
{
	backend_set_latency(&dm->backend[DEP_PAY],
			    on ? dm->cfg.fault_latency_s : dm->cfg.latency_s[DEP_PAY]);
}

/* Let the orders still in the service finish: none can outlive its
 * deadline, so this ends. */
static bool drain(struct demo *dm, struct service *s)
{
	double longest = dm->cfg.timeout_s[DEP_INV] > dm->cfg.timeout_s[DEP_PAY]
				 ? dm->cfg.timeout_s[DEP_INV] : dm->cfg.timeout_s[DEP_PAY];
	uint64_t end = bh_now_ns() + sec_to_ns(longest + 1);

	service_stop_load(s);
	while (!service_idle(s) && bh_now_ns() < end)
		if (!demo_wait_until(bh_now_ns() + 20 * BH_MSEC))
			return false;
	return true;
}

/* One loop, two kinds of instants: the end of each second (print a line)
 * and the fault's two edges (switch payment's latency). */
static int drive(struct demo *dm, struct service *s, struct run_report *rr, struct results *res,
		 uint64_t t0)
{
	const struct demo_config *c = &dm->cfg;
	uint64_t edge[2] = { t0 + sec_to_ns(c->fault_at_s),
			     t0 + sec_to_ns(c->fault_at_s + c->fault_for_s) };
	uint32_t sec = 1, secs = (uint32_t)(c->duration_s + 0.999), stage = 0;
	struct reporter rp;

	reporter_init(&rp, res);
	while (sec <= secs) {
		uint64_t tick = t0 + (uint64_t)sec * BH_SEC;
		uint64_t at = stage < 2 && edge[stage] < tick ? edge[stage] : tick;

		if (!demo_wait_until(at))
			return -EINTR;
		if (stage < 2 && bh_now_ns() >= edge[stage]) {
			set_fault(dm, ++stage == 1);
			continue;
		}
		reporter_tick(&rp, rr, c, s, sec, fault_overlaps(c, sec - 1.0, sec));
		sec++;
	}
	return drain(dm, s) ? 0 : -EINTR;
}

static int run_one(struct demo *dm, bool isolated, struct run_report *rr)
{
	const struct demo_config *c = &dm->cfg;
	struct service_params p = { .cfg = c, .isolated = isolated };
	struct results res;
	struct service *s;
	int r;

	memset(rr, 0, sizeof(*rr));
	rr->label = isolated ? "with isolation" : "without isolation";
	rr->isolated = isolated;
	for (int d = 0; d < NDEPS; d++) {
		p.port[d] = dm->backend[d].port;
		p.conc[d] = rr->conc[d] = dm->conc[d];
		p.queue[d] = rr->queue[d] = dm->queue[d];
		p.queue_wait_ns[d] = rr->queue_wait_ns[d] = dm->queue_wait_ns[d];
	}
	r = results_init(&res, (size_t)(c->rate * (c->duration_s + 1) * 1.1) + 1024);
	if (r < 0)
		goto fail;
	p.res = &res;
	set_fault(dm, false);
	printf("\n== run %s: %s\n", isolated ? "2/2" : "1/2",
	       isolated ? "with isolation: a libbulkhead bulkhead per dependency"
			: "without isolation: inventory and payment share the workers");
	report_print_header(c);
	p.t0 = bh_now_ns();
	r = service_start(&p, &s);
	if (r == 0) {
		r = drive(dm, s, rr, &res, p.t0);
		rr->complete = r == 0;
		rr->stopped_s = (double)(bh_now_ns() - p.t0) / 1e9;
		rr->refused_releases = service_stop(s);
		report_finish(rr, c, &res);
	}
	results_free(&res);
	set_fault(dm, false);
	if (r == 0 || r == -EINTR)
		return r;
fail:
	fprintf(stderr, "%s: cannot run %s: %s\n", cli_prog, rr->label, strerror(-r));
	return r;
}

/* The summary, the chart and the key=value lines, for the runs that ran
 * (a stopped one too). 0, or the first write error (already reported). */
static int finish_outputs(const struct demo *dm, const struct run_report *without,
			  const struct run_report *with)
{
	const struct demo_config *c = &dm->cfg;
	struct demo_outputs *out = dm->out;
	int r, r2;

	report_print_summary(without, with, c);
	if (out->svg.f)
		svg_write(out->svg.f, without, with, c);
	r = demo_output_close(&out->svg);
	if (r == 0 && out->svg.path && *out->svg.path)
		printf("\nchart: %s\n", out->svg.path);
	if (out->kv.f)
		report_write_kv(out->kv.f, without, with, c);
	r2 = demo_output_close(&out->kv);
	return r < 0 ? r : r2;
}

static int run_containment(struct demo *dm)
{
	struct run_report runs[2];
	bool ran[2] = { false, false };
	int r = backends_start(dm->backend, &dm->cfg), w;

	if (r < 0)
		return r;
	size_bulkheads(dm);
	print_intro(dm);
	for (int i = 0; i < 2 && r == 0; i++) {
		if (!(dm->cfg.runs & (i ? RUN_WITH : RUN_WITHOUT)))
			continue;
		r = run_one(dm, i == 1, &runs[i]);
		ran[i] = r == 0 || r == -EINTR;
	}
	for (int d = 0; d < NDEPS; d++)
		backend_stop(&dm->backend[d]);
	if (r == 0 || r == -EINTR) {
		w = finish_outputs(dm, ran[0] ? &runs[0] : NULL, ran[1] ? &runs[1] : NULL);
		if (r == 0)
			r = w;
	}
	for (int i = 0; i < 2; i++)
		if (ran[i])
			run_report_free(&runs[i]);
	dm->interrupted = r == -EINTR;
	return r;
}

/* ---- scenarios -------------------------------------------------------------- */

#ifdef HAVE_LIBURING
static int run_async_trap(struct demo *dm)
{
	int r = trap_scenario(&dm->cfg, dm->out);

	dm->interrupted = r == -EINTR;
	return r;
}

static const char *async_trap_unavailable(void)
{
	static char why[160];
	int r = trap_probe_uring();

	if (r == 0)
		return NULL;
	snprintf(why, sizeof(why), "this system refuses io_uring (%s); see "
		 "/proc/sys/kernel/io_uring_disabled, or the container's seccomp profile",
		 strerror(-r));
	return why;
}
#else
#define run_async_trap NULL

static const char *async_trap_unavailable(void)
{
	return "this build has no io_uring support (configure found no liburing >= 2.3)";
}
#endif

static int run_adaptive(struct demo *dm)
{
	struct ad_sizing z;
	int r;

	size_bulkheads(dm);
	memcpy(z.conc, dm->conc, sizeof(z.conc));
	memcpy(z.queue, dm->queue, sizeof(z.queue));
	memcpy(z.queue_wait_ns, dm->queue_wait_ns, sizeof(z.queue_wait_ns));
	r = adaptive_scenario(&dm->cfg, &z, dm->out);
	dm->interrupted = r == -EINTR;
	return r;
}

struct scenario {
	const char *name;
	int (*run)(struct demo *dm);
	const char *(*unavailable)(void); /* why it cannot run here, or NULL */
};

static int run_prefork(struct demo *dm)
{
	int r = prefork_scenario(&dm->cfg, dm->out);

	dm->interrupted = r == -EINTR;
	return r;
}

static int run_cluster(struct demo *dm)
{
	int r = cluster_scenario(&dm->cfg, dm->out);

	dm->interrupted = r == -EINTR;
	return r;
}

static const struct scenario scenarios[] = {
	{ "containment", run_containment, NULL },
	{ "async-trap", run_async_trap, async_trap_unavailable },
	{ "adaptive", run_adaptive, NULL },
	{ "prefork", run_prefork, NULL },
	{ "cluster", run_cluster, cluster_unavailable },
};

static const struct scenario *find_scenario(const char *name)
{
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (strcmp(scenarios[i].name, name) == 0)
			return &scenarios[i];
	abort(); /* parse accepted only these names */
}

int main(int argc, char **argv)
{
	struct demo dm;
	struct demo_outputs out;
	const struct scenario *sc;
	const char *why;
	struct fdset before;
	int r;

	cli_prog = "bulkhead-demo";
	memset(&dm, 0, sizeof(dm));
	sc = find_scenario(parse(argc, argv, &dm.cfg));
	if (sc->unavailable && (why = sc->unavailable()) != NULL) {
		fprintf(stderr, "%s: scenario %s cannot run: %s\n", cli_prog, sc->name, why);
		return EXIT_UNAVAILABLE;
	}
	if (demo_output_open(&out.svg, dm.cfg.svg_path) < 0)
		return 1;
	if (demo_output_open(&out.kv, dm.cfg.kv_path) < 0) {
		demo_output_discard(&out.svg);
		return 1;
	}
	dm.out = &out;
	block_stop_signals();
	our_kind_fds(&before);
	/* Every failure is reported once, where it happened. */
	r = sc->run(&dm);
	demo_output_discard(&out.svg); /* what a failed run did not write */
	demo_output_discard(&out.kv);
	if (check_clean(&before) < 0)
		return 1;
	fflush(stdout); /* the summary before the last word on stderr */
	if (dm.interrupted) {
		fprintf(stderr, "%s: stopped by %s; every thread and socket it started is gone\n",
			cli_prog, strsignal(stopped_by));
		return 128 + stopped_by;
	}
	return r < 0 ? 1 : 0;
}
