/* A fuzz harness for bulkhead-demo's command line. The input, split at NUL
 * bytes, is the argv. The parse must refuse with status 2 and
 * "bulkhead-demo: ..." plus the --help hint, or print help with status 0,
 * or accept a configuration in which every numeric flag lies in the range
 * its own table states, the fault starts within the run and is a slowdown,
 * and the bulkhead sizes are ones a bulkhead can hold; parsing the same
 * argv twice gives the same configuration. Only the parser runs; the demo's
 * other objects are linked but never called. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_seeds.h"
#include "flags_common.h"

#include "cli.c"

#define main bhf_demo_main
int bhf_demo_main(int argc, char **argv);
#include "bulkhead-demo.c"
#undef main

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static double field(const struct demo_config *c, const struct value_flag *f)
{
	const char *p = (const char *)c + f->field;

	return f->kind == V_COUNT ? *(const uint32_t *)p : *(const double *)p;
}

static bool same_config(const struct demo_config *a, const struct demo_config *b)
{
	for (size_t i = 0; i < sizeof(value_flags) / sizeof(value_flags[0]); i++) {
		if (field(a, &value_flags[i]) != field(b, &value_flags[i]))
			return false;
	}
	for (int d = 0; d < NDEPS; d++)
		if (a->conc[d] != b->conc[d] || a->queue[d] != b->queue[d] ||
		    a->queue_given[d] != b->queue_given[d])
			return false;
	return a->call_deadline_s == b->call_deadline_s && a->runs == b->runs &&
	       a->quiet == b->quiet;
}

/* Each value is its default (some mean "not set": 0 = until the deadline)
 * or within its flag's range. */
static void check_config(const struct bhf_argv *a, const char *err, const struct demo_config *c)
{
	struct demo_config def;

	defaults(&def);
	for (size_t i = 0; i < sizeof(value_flags) / sizeof(value_flags[0]); i++) {
		const struct value_flag *f = &value_flags[i];
		double v = field(c, f);

		if (v != field(&def, f) && !(v >= f->min && v <= f->max))
			bhf_fail(a, err, "--%s is %g, outside [%g, %g]", f->name, v, f->min, f->max);
	}
	if (!(c->fault_at_s < c->duration_s))
		bhf_fail(a, err, "the fault starts at %g s of a %g s run", c->fault_at_s,
			 c->duration_s);
	/* --scenario adaptive's fault is a drop in capacity, not a slowdown */
	if (!c->fault_capacity && !(c->latency_s[DEP_PAY] < c->fault_latency_s))
		bhf_fail(a, err, "the fault is not a slowdown");
	for (int d = 0; d < NDEPS; d++)
		if (c->conc[d] > BH_LIMIT_MAX || c->queue[d] > BH_QUEUE_MAX)
			bhf_fail(a, err, "a bulkhead of %u + %u", c->conc[d], c->queue[d]);
	if (!(c->call_deadline_s >= 0 && isfinite(c->call_deadline_s)))
		bhf_fail(a, err, "a call deadline of %g s", c->call_deadline_s);
	if (c->runs == 0 || (c->runs & ~(RUN_WITHOUT | RUN_WITH)))
		bhf_fail(a, err, "runs = %u", c->runs);
}

/* The scenarios bulkhead-demo(1) lists. */
static bool known_scenario(const char *sc)
{
	static const char *const names[] = { "containment", "async-trap", "adaptive", "prefork",
					     "cluster" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(sc, names[i]) == 0)
			return true;
	return false;
}

/* One parse: 0 accepted (c filled), else the exit status + 1. */
static int parse_once(struct bhf_argv *a, char **args, struct demo_config *c,
		      const char **scenario, struct bhf_capture *cap)
{
	volatile int status;

	memcpy(a->argv, args, sizeof(a->argv));
	optind = 0; /* glibc: start afresh */
	bhf_capture_begin(cap);
	status = setjmp(bhf_escape);
	if (status == 0)
		*scenario = parse(a->argc, a->argv, c);
	bhf_capture_end(cap);
	return status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bhf_argv a;
	struct bhf_capture cap1, cap2;
	static struct demo_config c1, c2;
	const char *sc1 = NULL, *sc2 = NULL;
	char *args[BHF_MAX_ARGS + 2];
	int s1, s2;

	bhf_make_argv(&a, "bulkhead-demo", data, size);
	memcpy(args, a.argv, sizeof(args));
	cli_prog = "bulkhead-demo";
	s1 = parse_once(&a, args, &c1, &sc1, &cap1);
	s2 = parse_once(&a, args, &c2, &sc2, &cap2);
	memcpy(a.argv, args, sizeof(args));
	if (s1 != s2 || strcmp(cap1.text, cap2.text) != 0 ||
	    (s1 == 0 && (!same_config(&c1, &c2) || strcmp(sc1, sc2) != 0)))
		bhf_fail(&a, cap1.text, "a second parse of the same flags differs");
	if (s1 != 0) {
		bhf_check_refusal(&a, "bulkhead-demo", s1 - 1, cap1.text);
	} else {
		if (!known_scenario(sc1))
			bhf_fail(&a, cap1.text, "accepted the scenario '%s'", sc1);
		check_config(&a, cap1.text, &c1);
	}
	free(cap1.text);
	free(cap2.text);
	bhf_free_argv(&a, args);
	return 0;
}

/* ---- seeds: command lines from the manual and the tests -------------------- */

#define SEED(name, s) { name, (const uint8_t *)(s), sizeof(s) - 1 }

const struct bhf_seed bhf_seeds[] = {
	SEED("demo-defaults", ""),
	SEED("demo-short", "-d\0003\0--fault-at\0001\0--fault-for\0001\0-q\0--svg\0/dev/null"),
	SEED("demo-sizes", "--pay-bulkhead\0008+16\0--inv-bulkhead=4\0--pay-queue-wait=50ms"),
	SEED("demo-trap", "--scenario\0async-trap\0--call-deadline\000300ms\0--only\0tracked"),
	SEED("demo-trap-none", "--scenario=async-trap\0--call-deadline=none\0--pay-bulkhead=12"),
	SEED("demo-bad-scenario", "--scenario\0both"),
	SEED("demo-wrong-scenario-flag", "--scenario\0async-trap\0--workers\00010"),
	SEED("demo-fault-late", "-d\0005\0--fault-at\00010"),
	SEED("demo-fault-fast", "--pay-latency\0006s\0--fault-latency\0005s"),
	SEED("demo-bad-bulkhead", "--pay-bulkhead\0008+\0"),
	SEED("demo-help", "-qh"),
	SEED("demo-prefork", "--scenario\0prefork\0--procs\0003"),
	SEED("demo-cluster", "--scenario=cluster\0-d\0004"),
	SEED("demo-adaptive", "--scenario\0adaptive\0--pay-capacity\0003"),
	SEED("demo-adaptive-slow-pay", "--sc\0adaptive\0--pay-l\0006s"),
	SEED("demo-scenario-twice", "--sc\0\0--sc\0prefork"),
	SEED("demo-all-values", "-r\000500\0--pay-share\0000.5\0-w\00064\0--accept-queue\000200\0"
				"--inv-timeout\000800ms\0--pay-timeout\0003s\0--inv-latency\00010ms\0"
				"--pay-latency\000150ms\0--jitter\0000.3\0--fault-latency\0004s\0"
				"--safety\0002\0--seed\0007\0--kv\0/dev/null"),
};
const unsigned bhf_nseeds = sizeof(bhf_seeds) / sizeof(bhf_seeds[0]);
