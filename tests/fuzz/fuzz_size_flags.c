/* A fuzz harness for bulkhead-size's command line and the shared parsers
 * of tools/cli.c.
 *
 * Input byte 0 chooses the target:
 *   even: the rest, split at NUL bytes, is bulkhead-size's argv. The parse
 *         must refuse with status 2 and "bulkhead-size: ..." plus the --help
 *         hint, or print help with status 0, or accept values that are
 *         finite, positive where they must be, with mean <= P99 and sizes
 *         a bulkhead can hold; parsing the same argv twice gives the same
 *         options; and for sizes small enough to solve quickly, the plan's
 *         probabilities lie in [0, 1].
 *   odd:  bytes 1-2 pick bounds, the rest is one string given to
 *         cli_parse_u32, cli_parse_double and cli_parse_duration, each
 *         checked against a strict grammar written here from cli.h's rules
 *         (all of the text must be a plain decimal number, with an optional
 *         unit for durations).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_seeds.h"
#include "flags_common.h"

#include "cli.c"

#define main bhf_size_main
int bhf_size_main(int argc, char **argv);
#include "bulkhead-size.c"
#undef main

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- the parsers, against a grammar -------------------------------------- */

static bool digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Length of the longest prefix of s that is a plain decimal number:
 * [+-]? (d+ (. d*)? | . d+) ([eE] [+-]? d+)? ; 0 if there is none. */
static size_t decimal_prefix(const char *s)
{
	size_t i = 0, digits = 0, e;

	if (s[i] == '+' || s[i] == '-')
		i++;
	while (digit(s[i]))
		i++, digits++;
	if (s[i] == '.') {
		i++;
		while (digit(s[i]))
			i++, digits++;
	}
	if (digits == 0)
		return 0;
	e = i;
	if (s[e] == 'e' || s[e] == 'E') {
		e++;
		if (s[e] == '+' || s[e] == '-')
			e++;
		if (digit(s[e])) {
			while (digit(s[e]))
				e++;
			i = e;
		}
	}
	return i;
}

/* The value of s's first len characters, or false if out of range. */
static bool decimal_value(const char *s, size_t len, double *v)
{
	char *buf = strndup(s, len);
	int saved = errno;
	bool ok;

	if (!buf)
		abort();
	errno = 0;
	*v = strtod(buf, NULL);
	ok = errno == 0 && isfinite(*v);
	errno = saved;
	free(buf);
	return ok;
}

static void fail_parser(const char *what, const char *s, bool got, bool want)
{
	fprintf(stderr, "bhfuzz: %s(\"", what);
	for (const char *p = s; *p; p++)
		fprintf(stderr, (unsigned char)*p < 32 || (unsigned char)*p > 126 ? "\\x%02x" : "%c",
			(unsigned char)*p);
	fprintf(stderr, "\") %s; the grammar says it should %s\n", got ? "accepts" : "refuses",
		want ? "accept" : "refuse");
	abort();
}

static void check_u32(const char *s, uint32_t min, uint32_t max)
{
	uint64_t v = 0;
	bool ok = digit(s[0]), over = false;
	uint32_t got = 0;

	for (const char *p = s; ok && *p; p++) {
		if (!digit(*p))
			ok = false;
		else if (v > (UINT64_MAX - 9) / 10)
			over = true;
		else
			v = v * 10 + (uint64_t)(*p - '0');
	}
	ok = ok && !over && v >= min && v <= max;
	if (cli_parse_u32(s, min, max, &got) != ok)
		fail_parser("cli_parse_u32", s, !ok, ok);
	if (ok && got != v)
		fail_parser("cli_parse_u32 (value)", s, true, true);
}

static void check_double(const char *s, double min, double max)
{
	size_t len = decimal_prefix(s);
	double v = 0, got = 0;
	bool ok = len > 0 && s[len] == '\0' && decimal_value(s, len, &v) && v >= min && v <= max;

	if (cli_parse_double(s, min, max, &got) != ok)
		fail_parser("cli_parse_double", s, !ok, ok);
	if (ok && got != v)
		fail_parser("cli_parse_double (value)", s, true, true);
}

static void check_duration(const char *s, double unit, double min, double max)
{
	static const struct {
		const char *name;
		double s;
	} u[] = { { "ns", 1e-9 }, { "us", 1e-6 }, { "ms", 1e-3 }, { "s", 1.0 }, { "min", 60.0 } };
	size_t len = decimal_prefix(s);
	double v = 0, got = 0, scale = 0;
	bool ok = len > 0 && decimal_value(s, len, &v);

	if (s[len] == '\0') {
		scale = unit;
	} else {
		for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
			if (strcmp(s + len, u[i].name) == 0)
				scale = u[i].s;
	}
	ok = ok && scale > 0;
	if (ok) {
		v *= scale;
		ok = v >= min && v <= max;
	}
	if (cli_parse_duration(s, unit, min, max, &got) != ok)
		fail_parser("cli_parse_duration", s, !ok, ok);
	if (ok && got != v)
		fail_parser("cli_parse_duration (value)", s, true, true);
}

static void fuzz_parsers(const uint8_t *data, size_t size)
{
	static const double bounds[8] = { 0, 1e-9, 1e-3, 1, 10, 3600, 1e7, 1e300 };
	char *s;
	double lo, hi;

	if (size < 3)
		return;
	lo = bounds[data[1] & 7];
	hi = bounds[(data[1] >> 3) & 7];
	s = strndup((const char *)data + 3, size - 3);
	if (!s)
		abort();
	check_u32(s, data[2] & 0x0f, data[2] & 0x80 ? UINT32_MAX : (uint32_t)(data[2] & 0x7f) * 1000);
	check_double(s, lo, hi);
	check_duration(s, data[2] & 1 ? CLI_S : CLI_MS, lo, hi);
	free(s);
}

/* ---- bulkhead-size's command line ---------------------------------------- */

static void check_opts(const struct bhf_argv *a, const char *err, const struct opts *o)
{
	if (!(isfinite(o->qps) && o->qps > 0))
		bhf_fail(a, err, "accepted a qps of %g", o->qps);
	if (!(isfinite(o->p99_s) && o->p99_s > 0))
		bhf_fail(a, err, "accepted a P99 of %g s", o->p99_s);
	if (!(isfinite(o->mean_s) && o->mean_s > 0 && o->mean_s <= o->p99_s))
		bhf_fail(a, err, "accepted a mean of %g s for a P99 of %g s", o->mean_s, o->p99_s);
	if (!(isfinite(o->safety) && o->safety >= 1))
		bhf_fail(a, err, "accepted a safety factor of %g", o->safety);
	if (!(isfinite(o->timeout_s) && o->timeout_s > 0))
		bhf_fail(a, err, "accepted a timeout of %g s", o->timeout_s);
	if (!(isfinite(o->fault_s) && o->fault_s >= 0))
		bhf_fail(a, err, "accepted a fault latency of %g s", o->fault_s);
	if (o->conc > BH_LIMIT_MAX || o->queue > BH_QUEUE_MAX)
		bhf_fail(a, err, "accepted sizes %u + %u", o->conc, o->queue);
}

static void check_plan(const struct bhf_argv *a, const struct plan *p)
{
	const double probs[] = { p->res.p_reject, p->res.p_wait, p->p_wait_timeout,
				 p->res.utilisation };

	for (size_t i = 0; i < sizeof(probs) / sizeof(probs[0]); i++)
		if (!(probs[i] >= 0 && probs[i] <= 1 + 1e-9))
			bhf_fail(a, NULL, "the plan for c=%u k=%u has a probability of %g", p->c, p->k,
				 probs[i]);
	if (!(isfinite(p->p99_wait) && p->p99_wait >= 0))
		bhf_fail(a, NULL, "the plan's P99 queue wait is %g", p->p99_wait);
}

static bool same_opts(const struct opts *a, const struct opts *b)
{
	return a->qps == b->qps && a->p99_s == b->p99_s && a->safety == b->safety &&
	       a->timeout_s == b->timeout_s && a->mean_s == b->mean_s &&
	       a->fault_s == b->fault_s && a->conc == b->conc && a->queue == b->queue &&
	       a->threads == b->threads && a->queue_given == b->queue_given && a->kv == b->kv;
}

/* One parse: 0 accepted (o, p filled), else the exit status + 1. */
static int parse_once(struct bhf_argv *a, char **args, struct opts *o, struct plan *p,
		      struct bhf_capture *cap)
{
	volatile int status;

	memcpy(a->argv, args, sizeof(a->argv));
	optind = 0; /* glibc: start afresh */
	bhf_capture_begin(cap);
	status = setjmp(bhf_escape);
	if (status == 0) {
		parse(a->argc, a->argv, o);
		/* solving the queue model costs O(k) per step: keep it quick */
		if (bhz_concurrency_raw(o->qps, o->p99_s, o->safety) < 2000 && o->conc < 2000 &&
		    (!o->queue_given || o->queue < 4000))
			make_plan(o, p);
		else
			p->c = 0;
	}
	bhf_capture_end(cap);
	return status;
}

static void fuzz_size(const uint8_t *data, size_t size)
{
	struct bhf_argv a;
	struct bhf_capture cap1, cap2;
	struct opts o1, o2;
	static struct plan p1, p2;
	char *args[BHF_MAX_ARGS + 2];
	int s1, s2;

	bhf_make_argv(&a, "bulkhead-size", data, size);
	cli_prog = "bulkhead-size"; /* as its main() does */
	memcpy(args, a.argv, sizeof(args));
	memset(&o1, 0, sizeof(o1));
	memset(&o2, 0, sizeof(o2));
	memset(&p1, 0, sizeof(p1));
	memset(&p2, 0, sizeof(p2));
	s1 = parse_once(&a, args, &o1, &p1, &cap1);
	s2 = parse_once(&a, args, &o2, &p2, &cap2);
	memcpy(a.argv, args, sizeof(args));
	if (s1 != s2 || strcmp(cap1.text, cap2.text) != 0 || (s1 == 0 && !same_opts(&o1, &o2)))
		bhf_fail(&a, cap1.text, "a second parse of the same flags differs");
	if (s1 != 0)
		bhf_check_refusal(&a, "bulkhead-size", s1 - 1, cap1.text);
	else {
		check_opts(&a, cap1.text, &o1);
		if (p1.c)
			check_plan(&a, &p1);
	}
	free(cap1.text);
	free(cap2.text);
	bhf_free_argv(&a, args);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		fuzz_parsers(data, size);
	else
		fuzz_size(data + 1, size - 1);
	return 0;
}

/* ---- seeds: command lines from the manual and the tests -------------------- */

#define SEED(name, s) { name, (const uint8_t *)(s), sizeof(s) - 1 }

const struct bhf_seed bhf_seeds[] = {
	SEED("size-seed-002", "\0--qps\000160\0--p99\00030ms"),
	SEED("size-short", "\0-q\000200\0-p\0250\0-t\0001s"),
	SEED("size-everything", "\0--qps=1000\0--p99=80ms\0--safety=2\0--timeout=500ms\0"
				"--mean=20ms\0--fault=5s\0--threads=200\0--kv"),
	SEED("size-given", "\0-q\00050\0-p\0002s\0-c\0008\0-k\0000\0-f\00010s"),
	SEED("size-help", "\0--help"),
	SEED("size-bad-unit", "\0--qps\000160\0--p99\00030 ms"),
	SEED("size-mean-over-p99", "\0-q\00010\0-p\00010ms\0-m\00020ms"),
	SEED("size-missing-value", "\0--qps"),
	SEED("size-unknown", "\0-Zq\0001"),
	SEED("size-extra", "\0-q\0001\0-p\0001\0stray"),
	SEED("size-huge", "\0--qps\0009999999\0--p99\0003600s\0--safety\00010"),
	SEED("parse-double", "\x01\x3a\x85" "1.5e3"),
	SEED("parse-hex", "\x01\x3a\x85" "0x1p3"),
	SEED("parse-duration", "\x01\x29\x01" "2.5min"),
	SEED("parse-u32", "\x01\x07\x80" "4294967295"),
	SEED("parse-u32-over", "\x01\x07\x80" "18446744073709551616"),
	SEED("parse-tiny", "\x01\x38\x00" "1e-400"),
};
const unsigned bhf_nseeds = sizeof(bhf_seeds) / sizeof(bhf_seeds[0]);
