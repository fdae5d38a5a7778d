/* bulkhead-size: size one bulkhead from the load it must carry.
 *
 * From peak QPS, the P99 latency, a safety factor and the caller's timeout
 * it prints max_concurrent and queue_capacity (the usual rules of thumb),
 * the checks those rules imply (Little's law, worst queue wait), and what
 * the sizes buy under an M/M/c/K model: the share of calls rejected at once,
 * the share that wait, and how long. docs/sizing.md explains every line. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bulkhead.h"
#include "cli.h"
#include "sizing.h"

struct opts {
	double qps, p99_s, safety, timeout_s, mean_s, fault_s;
	uint32_t conc, queue; /* conc 0: compute */
	uint32_t threads;     /* 0: calls do not hold the caller's threads */
	bool queue_given, kv;
};

struct plan {
	double raw;      /* Q x P99 x safety */
	uint32_t c, k;   /* what is evaluated */
	uint32_t k_rule; /* 2 x c */
	bool k_shrunk;   /* k < k_rule */
	enum bhz_queue_bound k_bound; /* what cut it */
	double busy;     /* Little: Q x mean */
	double cap_qps;  /* c / P99 */
	double over_qps; /* k / Q: drained at the arrival rate */
	double worst;    /* k / c x mean: drained by the permits */
	int failed;      /* checks that failed */
	struct bhz_model model;
	struct bhz_result res;
	double p99_wait, p_wait_timeout;
};

static const char usage_text[] =
	"Usage: %s --qps N --p99 TIME [options]\n"
	"\n"
	"Size one bulkhead: max_concurrent and queue_capacity from the load it must\n"
	"carry, the checks they must pass, and what they buy under an M/M/c/K model.\n"
	"\n"
	"  -q, --qps N          peak calls per second to the dependency (required)\n"
	"  -p, --p99 TIME       P99 latency of one call (required)\n"
	"  -a, --safety X       safety factor, 1 to 10 (default 1.3)\n"
	"  -t, --timeout TIME   the caller's timeout, queue wait included (default 1s)\n"
	"  -m, --mean TIME      mean latency for the queue model (default: the P99,\n"
	"                       which is conservative)\n"
	"  -c, --concurrency N  evaluate this max_concurrent instead of computing it\n"
	"  -k, --queue N        evaluate this queue_capacity instead of computing it\n"
	"  -n, --threads N      the calls block their callers' threads, and this\n"
	"                       dependency may hold at most N of them: queued callers\n"
	"                       count, so max_concurrent + queue_capacity <= N\n"
	"  -f, --fault TIME     also show what happens when the latency rises to TIME\n"
	"      --kv             print key=value lines for scripts\n"
	"  -h, --help           show this help\n"
	"\n"
	"TIME is a number with an optional unit: %s (a bare number is ms).\n"
	"Example, a dependency called 160 times a second with a 30 ms P99:\n"
	"  %s --qps 160 --p99 30ms\n";

/* --kv has no short option: a val that is not a character. */
enum { OPT_KV = 256 };

/* Every time flag: positive, at most an hour, bare numbers in ms. */
static double time_arg(const char *flag)
{
	return cli_duration(flag, optarg, CLI_MS, 1e-9, 3600);
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "qps", required_argument, NULL, 'q' },
		{ "p99", required_argument, NULL, 'p' },
		{ "safety", required_argument, NULL, 'a' },
		{ "timeout", required_argument, NULL, 't' },
		{ "mean", required_argument, NULL, 'm' },
		{ "concurrency", required_argument, NULL, 'c' },
		{ "queue", required_argument, NULL, 'k' },
		{ "threads", required_argument, NULL, 'n' },
		{ "fault", required_argument, NULL, 'f' },
		{ "kv", no_argument, NULL, OPT_KV },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	*o = (struct opts){ .safety = 1.3, .timeout_s = 1.0 };
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":q:p:a:t:m:c:k:n:f:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'q': o->qps = cli_double("--qps", optarg, 0.001, 1e7); break;
		case 'p': o->p99_s = time_arg("--p99"); break;
		case 'a': o->safety = cli_double("--safety", optarg, 1, 10); break;
		case 't': o->timeout_s = time_arg("--timeout"); break;
		case 'm': o->mean_s = time_arg("--mean"); break;
		case 'c': o->conc = cli_u32("--concurrency", optarg, 1, BH_LIMIT_MAX); break;
		case 'k':
			o->queue = cli_u32("--queue", optarg, 0, BH_QUEUE_MAX);
			o->queue_given = true;
			break;
		case 'n': o->threads = cli_u32("--threads", optarg, 1, UINT32_MAX - 1); break;
		case 'f': o->fault_s = time_arg("--fault"); break;
		case OPT_KV: o->kv = true; break;
		case 'h': printf(usage_text, cli_prog, cli_duration_units(), cli_prog); exit(0);
		default: cli_option_error(ch, argv, longopts);
		}
	}
	if (optind < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	if (o->qps == 0 || o->p99_s == 0)
		cli_usage_error("--qps and --p99 are required");
	if (o->mean_s == 0)
		o->mean_s = o->p99_s;
	if (o->mean_s > o->p99_s)
		cli_usage_error("--mean (%g ms) cannot exceed --p99 (%g ms)", o->mean_s * 1e3,
				o->p99_s * 1e3);
	if (o->fault_s > 0)
		cli_check_fault("--fault", o->fault_s, o->p99_s, "--p99");
}

/* queue_capacity for c permits: as given, or recommended (sizing.h), and
 * what bounds it. */
static uint32_t queue_for(const struct opts *o, uint32_t c, enum bhz_queue_bound *bound)
{
	uint32_t k;

	*bound = BHZ_QUEUE_RULE;
	if (o->queue_given)
		return o->queue;
	if (o->conc) /* evaluating a given size: the plain rule, never cut */
		k = bhz_queue_rule(c);
	else
		k = bhz_queue_recommend(o->qps, o->mean_s, o->timeout_s, c, o->threads, bound);
	return k > BH_QUEUE_MAX ? BH_QUEUE_MAX : k;
}

static void make_plan(const struct opts *o, struct plan *p)
{
	memset(p, 0, sizeof(*p));
	p->raw = bhz_concurrency_raw(o->qps, o->p99_s, o->safety);
	p->c = o->conc ? o->conc : bhz_round_up(p->raw);
	if (p->c > BH_LIMIT_MAX) /* p->c stops at UINT32_MAX; the raw size does not */
		cli_usage_error("this load needs %.0f permits; a bulkhead holds at most %u",
				p->raw >= UINT32_MAX ? ceil(p->raw) : (double)p->c, BH_LIMIT_MAX);
	p->k_rule = bhz_queue_rule(p->c);
	p->k = queue_for(o, p->c, &p->k_bound);
	p->k_shrunk = !o->queue_given && p->k < p->k_rule;
	p->busy = o->qps * o->mean_s;
	p->cap_qps = p->c / o->p99_s;
	p->over_qps = bhz_queue_over_qps(p->k, o->qps);
	p->worst = bhz_worst_queue_wait(p->k, p->c, o->mean_s);
	p->failed = (p->busy >= p->c) + (p->cap_qps < o->qps) + (p->over_qps > o->timeout_s) +
		    (p->worst > o->timeout_s) + (o->threads && p->c + (uint64_t)p->k > o->threads);
	bhz_model_init(&p->model, o->qps, o->mean_s, p->c, p->k);
	bhz_model_solve(&p->model, &p->res);
	p->p99_wait = bhz_model_wait_quantile(&p->model, 0.99);
	p->p_wait_timeout = bhz_model_wait_tail(&p->model, o->timeout_s);
}

/* ---- human output ---------------------------------------------------- */

static const char *dur(double s, char *buf)
{
	return cli_fmt_duration(s, buf, 32);
}

static const char *pct(double p, char *buf)
{
	return cli_fmt_percent(p, buf, 32);
}

/* A figure with 3 significant digits, but a large one whole: "1000", not
 * "1e+03". */
static const char *num(double v, char *buf)
{
	snprintf(buf, 32, v >= 999.5 ? "%.0f" : "%.3g", v);
	return buf;
}

static const char *verdict(bool ok)
{
	return ok ? "ok  " : "FAIL";
}

static void print_header(const struct opts *o)
{
	char a[32], b[32], c[32];

	printf("%g calls/s at peak, P99 %s, safety factor %g, caller timeout %s\n", o->qps,
	       dur(o->p99_s, a), o->safety, dur(o->timeout_s, b));
	if (o->mean_s == o->p99_s)
		printf("mean latency taken as the P99 (%s): conservative; --mean refines it\n",
		       dur(o->mean_s, c));
	else
		printf("mean latency %s\n", dur(o->mean_s, c));
}

/* Why the queue is shorter than the rule: the bound that set it, in up to
 * two lines under the size. */
static void print_cut_reason(const struct opts *o, const struct plan *p)
{
	const char *indent = "                         ";

	switch (p->k_bound) {
	case BHZ_QUEUE_THREADS:
		if (p->c >= o->threads)
			printf("%smax_concurrent alone takes all %u threads it may hold\n",
			       indent, o->threads);
		else
			printf("%squeued callers hold threads too, and it may hold %u\n",
			       indent, o->threads);
		break;
	case BHZ_QUEUE_DRAIN:
		printf("%sa longer queue, drained at the arrival rate (queue / QPS),\n"
		       "%swould outlast the caller's timeout\n", indent, indent);
		break;
	case BHZ_QUEUE_WAIT:
		printf("%sthe last waiter of a longer queue, served as the permits\n"
		       "%sturn over, would wait past the caller's timeout\n", indent, indent);
		break;
	case BHZ_QUEUE_RULE:
		break;
	}
}

/* The size before rounding, with the digits that show why it rounds to c:
 * "6.0004" (not "6") for 7, "1300" (not "1.3e+03"). */
static const char *raw_text(double raw, uint32_t c, char *buf)
{
	int prec = raw >= 1000 ? (int)floor(log10(raw)) + 1 : 3;

	for (; prec < 17; prec++) {
		snprintf(buf, 32, "%.*g", prec, raw);
		if (bhz_round_up(strtod(buf, NULL)) == c)
			break;
	}
	return buf;
}

static void print_sizes(const struct opts *o, const struct plan *p)
{
	char a[32], r[32];

	printf("\nsizes\n");
	if (o->conc)
		printf("  max_concurrent  %-6u given (the rule gives %g x %s x %g = %s)\n", p->c,
		       o->qps, dur(o->p99_s, a), o->safety,
		       raw_text(p->raw, bhz_round_up(p->raw), r));
	else
		printf("  max_concurrent  %-6u = ceil(%g/s x %s x %g = %s)   "
		       "Little's law on the P99\n",
		       p->c, o->qps, dur(o->p99_s, a), o->safety, raw_text(p->raw, p->c, r));
	if (o->queue_given)
		printf("  queue_capacity  %-6u given\n", p->k);
	else if (p->k_shrunk) {
		printf("  queue_capacity  %-6u cut from 2 x max_concurrent = %u:\n", p->k,
		       p->k_rule);
		print_cut_reason(o, p);
	} else
		printf("  queue_capacity  %-6u = 2 x max_concurrent\n", p->k);
}

static void print_checks(const struct opts *o, const struct plan *p)
{
	char a[32], b[32], c[32];

	printf("\nchecks\n");
	printf("  %s busy permits at peak (Little's law): %g/s x %s = %s of %u (%.0f%%)\n",
	       verdict(p->busy < p->c), o->qps, dur(o->mean_s, a), num(p->busy, b), p->c,
	       100 * p->busy / p->c);
	printf("  %s capacity at the P99: %u / %s = %s/s %s %g/s\n",
	       verdict(p->cap_qps >= o->qps), p->c, dur(o->p99_s, a),
	       p->cap_qps >= 999.5 ? num(p->cap_qps, b) : (snprintf(b, 32, "%.4g", p->cap_qps), b),
	       p->cap_qps >= o->qps ? ">=" : "<", o->qps);
	printf("  %s full queue drained at the arrival rate: %u / %g/s = %s %s %s\n",
	       verdict(p->over_qps <= o->timeout_s), p->k, o->qps, dur(p->over_qps, b),
	       p->over_qps <= o->timeout_s ? "<=" : ">", dur(o->timeout_s, c));
	printf("  %s worst queue wait: %u / %u x %s = %s %s %s\n",
	       verdict(p->worst <= o->timeout_s), p->k, p->c, dur(o->mean_s, a),
	       dur(p->worst, b), p->worst <= o->timeout_s ? "<=" : ">", dur(o->timeout_s, c));
	if (o->threads) {
		uint64_t held = p->c + (uint64_t)p->k;

		printf("  %s threads it can hold when it stalls: %u + %u = %llu %s %u\n",
		       verdict(held <= o->threads), p->c, p->k, (unsigned long long)held,
		       held <= o->threads ? "<=" : ">", o->threads);
	}
}

static void print_model(const struct opts *o, const struct plan *p)
{
	const struct bhz_result *r = &p->res;
	char a[32], b[32], c[32];

	printf("\nM/M/c/K model: c = %u, K = %u, Poisson arrivals, exponential latency\n",
	       p->c, p->k);
	printf("  of all calls: %s run at once, ", pct(1 - r->p_wait - r->p_reject, a));
	printf("%s wait, %s rejected (-EBUSY)\n", pct(r->p_wait, b), pct(r->p_reject, c));
	printf("  queue wait of admitted calls: mean %s, p99 %s; ", dur(r->mean_wait_s, a),
	       dur(p->p99_wait, b));
	printf("%s wait over %s\n", pct(p->p_wait_timeout, a), dur(o->timeout_s, c));
	printf("  mean permits held %s (%.0f%%), mean waiters %s\n", num(r->mean_in_flight, a),
	       100 * r->utilisation, num(r->mean_queued, b));
}

static void print_row(const struct opts *o, uint32_t c, uint32_t k, bool chosen)
{
	struct bhz_model m;
	struct bhz_result r;
	char a[32], b[32], d[32], e[32];

	bhz_model_init(&m, o->qps, o->mean_s, c, k);
	bhz_model_solve(&m, &r);
	printf("  %c %8u %7u %10s %8s %10s %10s\n", chosen ? '*' : ' ', c, k, pct(r.p_reject, d),
	       pct(r.p_wait, e), dur(r.mean_wait_s, a), dur(bhz_model_wait_quantile(&m, 0.99), b));
}

/* The chosen sizes among their neighbours: what a permit more or less
 * buys, sized by the same rule, and what the queue buys at all. */
static void print_alternatives(const struct opts *o, const struct plan *p)
{
	uint32_t lo = p->c > 2 ? p->c - 2 : 1;
	enum bhz_queue_bound bound;

	printf("\nwhat other sizes buy (same load, same model)\n");
	printf("    max_conc   queue  rejected     wait  mean wait   p99 wait\n");
	for (uint32_t c = lo; c <= p->c + 2 && c <= BH_LIMIT_MAX; c++) {
		print_row(o, c, queue_for(o, c, &bound), c == p->c);
		if (c == p->c && p->k != 0)
			print_row(o, c, 0, false);
	}
}

static void print_fault(const struct opts *o, const struct plan *p)
{
	struct bhz_model m;
	struct bhz_result r;
	double cap = p->c / o->fault_s, worst = bhz_worst_queue_wait(p->k, p->c, o->fault_s);
	char a[32], b[32], c[32];

	bhz_model_init(&m, o->qps, o->fault_s, p->c, p->k);
	bhz_model_solve(&m, &r);
	printf("\nif the latency rises to %s (same load)\n", dur(o->fault_s, a));
	printf("  the dependency can complete at most %u / %s = %s calls/s of %g/s\n", p->c,
	       dur(o->fault_s, a), num(cap, b), o->qps);
	printf("  worst queue wait %u / %u x %s = %s%s\n", p->k, p->c, dur(o->fault_s, a),
	       dur(worst, b),
	       worst > o->timeout_s ? ": waiters give up at the timeout" : "");
	printf("  model: %s rejected at once; at most %u callers held in calls and %u\n"
	       "  in the queue, each for up to %s; every other caller is answered at once\n",
	       pct(r.p_reject, b), p->c, p->k, dur(fmin(o->timeout_s, o->fault_s), c));
}

/* ---- key=value output -------------------------------------------------- */

static const char *const bound_name[] = {
	[BHZ_QUEUE_RULE] = "rule", [BHZ_QUEUE_DRAIN] = "drain", [BHZ_QUEUE_WAIT] = "wait",
	[BHZ_QUEUE_THREADS] = "threads",
};

static void print_kv(const struct opts *o, const struct plan *p)
{
	const struct bhz_result *r = &p->res;

	printf("qps=%.6g\np99_ms=%.6g\nmean_ms=%.6g\nsafety=%.6g\ntimeout_ms=%.6g\n", o->qps,
	       o->p99_s * 1e3, o->mean_s * 1e3, o->safety, o->timeout_s * 1e3);
	printf("concurrency_raw=%.6g\nmax_concurrent=%u\nqueue_rule=%u\nqueue_capacity=%u\n"
	       "queue_shrunk=%d\nqueue_bound=%s\n",
	       p->raw, p->c, p->k_rule, p->k, p->k_shrunk,
	       o->queue_given ? "given" : bound_name[p->k_bound]);
	printf("busy_permits=%.6g\nutilisation=%.6g\ncapacity_qps=%.6g\nqueue_over_qps_ms=%.6g\n"
	       "worst_queue_wait_ms=%.6g\nchecks_failed=%d\n",
	       p->busy, p->busy / p->c, p->cap_qps, p->over_qps * 1e3, p->worst * 1e3,
	       p->failed);
	if (o->threads)
		printf("threads=%u\nthreads_held=%llu\n", o->threads,
		       (unsigned long long)p->c + p->k);
	printf("p_reject=%.6g\np_wait=%.6g\nmean_wait_ms=%.6g\np99_wait_ms=%.6g\n"
	       "p_wait_over_timeout=%.6g\n",
	       r->p_reject, r->p_wait, r->mean_wait_s * 1e3, p->p99_wait * 1e3,
	       p->p_wait_timeout);
	if (o->fault_s > 0) {
		struct bhz_model m;
		struct bhz_result f;

		bhz_model_init(&m, o->qps, o->fault_s, p->c, p->k);
		bhz_model_solve(&m, &f);
		printf("fault_ms=%.6g\nfault_capacity_qps=%.6g\nfault_worst_queue_wait_ms=%.6g\n"
		       "fault_p_reject=%.6g\n",
		       o->fault_s * 1e3, p->c / o->fault_s,
		       bhz_worst_queue_wait(p->k, p->c, o->fault_s) * 1e3, f.p_reject);
	}
}

/* 0, or 1 when the report did not reach stdout (a full disk, a closed
 * pipe): a script must not read a cut report as a whole one. */
static int finish_stdout(void)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	fprintf(stderr, "%s: cannot write the report: %s\n", cli_prog, strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct plan p;

	cli_prog = "bulkhead-size";
	parse(argc, argv, &o);
	make_plan(&o, &p);
	if (o.kv) {
		print_kv(&o, &p);
		return finish_stdout();
	}
	print_header(&o);
	print_sizes(&o, &p);
	print_checks(&o, &p);
	print_model(&o, &p);
	print_alternatives(&o, &p);
	if (o.fault_s > 0)
		print_fault(&o, &p);
	return finish_stdout();
}
