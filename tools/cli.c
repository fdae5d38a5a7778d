/* Strict flag parsing: a value is valid only if all of it parses. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sizing.h"

const char *cli_prog = "bulkhead";

void cli_usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", cli_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", cli_prog);
	exit(CLI_EXIT_USAGE);
}

/* How many long options begin with the n bytes at s; buf names them,
 * "--a, --b or --c". */
static int long_candidates(const struct option *longopts, const char *s, size_t n, char *buf,
			   size_t len)
{
	int count = 0, i = 0;

	for (const struct option *o = longopts; o->name; o++)
		count += strncmp(o->name, s, n) == 0;
	buf[0] = '\0';
	for (const struct option *o = longopts; o->name; o++) {
		size_t used = strlen(buf);

		if (strncmp(o->name, s, n) != 0)
			continue;
		snprintf(buf + used, len - used, "%s--%s",
			 i == 0 ? "" : i == count - 1 ? " or " : ", ", o->name);
		i++;
	}
	return count;
}

/* A long option is behind the error when getopt says no short one (optopt
 * 0: unknown, or a prefix of several, which are named), or when the word
 * it just stepped past is a long option of that val. In a group ("-zq") optind has not moved yet,
 * so that word is the one before: only optopt names the option. */
const char *cli_option_problem(int ch, char *const argv[], const struct option *longopts,
			       char *buf, size_t len)
{
	const char *word = optind > 0 ? argv[optind - 1] : "";
	size_t n = strcspn(word, "=");
	bool is_long = false;
	char which[128];

	if (strncmp(word, "--", 2) == 0 && n > 2) {
		is_long = optopt == 0;
		for (const struct option *o = longopts; o->name && !is_long; o++)
			is_long = o->val == optopt && strncmp(o->name, word + 2, n - 2) == 0;
	}
	if (ch == ':' && is_long)
		snprintf(buf, len, "%.*s needs a value", (int)n, word);
	else if (ch == ':')
		snprintf(buf, len, "-%c needs a value", optopt);
	else if (is_long && optopt != 0)
		snprintf(buf, len, "%.*s takes no value", (int)n, word);
	else if (is_long && long_candidates(longopts, word + 2, n - 2, which, sizeof(which)) > 1)
		snprintf(buf, len, "ambiguous option '%.*s': %s?", (int)n, word, which);
	else if (is_long)
		snprintf(buf, len, "unknown option '%.*s'", (int)n, word);
	else
		snprintf(buf, len, "unknown option '-%c'", optopt);
	return buf;
}

void cli_option_error(int ch, char *const argv[], const struct option *longopts)
{
	char msg[160];

	cli_usage_error("%s", cli_option_problem(ch, argv, longopts, msg, sizeof(msg)));
}

/* strtod also takes "nan", "inf" and hex; flags want plain finite decimals. */
static bool parse_prefix(const char *s, double *out, char **end)
{
	if (!s || !*s || !strchr("+-.0123456789", *s))
		return false;
	errno = 0;
	*out = strtod(s, end);
	if (*end == s || errno != 0 || !isfinite(*out))
		return false;
	for (const char *p = s; p < *end; p++)
		if (strchr("xXnNiIpP", *p))
			return false;
	return true;
}

bool cli_parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (!parse_prefix(s, &v, &end) || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}

bool cli_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end || errno || v < min || v > max)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* The one list of duration units: the parser reads it, help text prints it. */
static const struct {
	const char *name;
	double seconds;
} units[] = {
	{ "ns", 1e-9 }, { "us", 1e-6 }, { "ms", 1e-3 }, { "s", 1.0 }, { "min", 60.0 },
};

#define NUNITS (sizeof(units) / sizeof(units[0]))

const char *cli_duration_units(void)
{
	static char text[64];

	if (!text[0])
		for (size_t i = 0; i < NUNITS; i++)
			snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s%s",
				 i ? ", " : "", units[i].name);
	return text;
}

bool cli_parse_duration(const char *s, double default_unit_s, double min_s, double max_s,
			double *out)
{
	char *end;
	double v, unit = default_unit_s;

	if (!parse_prefix(s, &v, &end))
		return false;
	if (*end) {
		unit = 0;
		for (size_t i = 0; i < NUNITS; i++)
			if (strcmp(end, units[i].name) == 0)
				unit = units[i].seconds;
		if (unit == 0)
			return false;
	}
	v *= unit;
	if (v < min_s || v > max_s)
		return false;
	*out = v;
	return true;
}

double cli_double(const char *flag, const char *s, double min, double max)
{
	double v;

	if (!cli_parse_double(s, min, max, &v))
		cli_usage_error("%s: expected a number from %g to %g, got '%s'", flag, min, max, s);
	return v;
}

uint32_t cli_u32(const char *flag, const char *s, uint32_t min, uint32_t max)
{
	uint32_t v;

	if (!cli_parse_u32(s, min, max, &v))
		cli_usage_error("%s: expected a whole number from %u to %u, got '%s'", flag, min,
				max, s);
	return v;
}

double cli_duration(const char *flag, const char *s, double unit_s, double min_s, double max_s)
{
	const char *bare = unit_s >= 1 ? "seconds" : "milliseconds";
	char lo[32], hi[32];
	double v;

	if (cli_parse_duration(s, unit_s, min_s, max_s, &v))
		return v;
	cli_fmt_duration(max_s, hi, sizeof(hi));
	if (min_s <= 1e-6)
		cli_usage_error("%s: expected a %sduration up to %s, such as 200ms or 1.5s "
				"(a bare number is %s), got '%s'",
				flag, min_s > 0 ? "positive " : "", hi, bare, s);
	cli_usage_error("%s: expected a duration from %s to %s, such as 200ms or 1.5s "
			"(a bare number is %s), got '%s'",
			flag, cli_fmt_duration(min_s, lo, sizeof(lo)), hi, bare, s);
}

const char *cli_fmt_duration(double s, char *buf, unsigned len)
{
	/* A unit's last value is the one that rounds below 1000 at %.3g: 999.6
	 * ms is "1 s", not "1e+03 ms". */
	if (s == 0)
		snprintf(buf, len, "0 ms");
	else if (s < 999.5e-6)
		snprintf(buf, len, "%.3g us", s * 1e6);
	else if (s < 0.9995)
		snprintf(buf, len, "%.3g ms", s * 1e3);
	else if (s < 999.5)
		snprintf(buf, len, "%.3g s", s);
	else
		snprintf(buf, len, "%.0f s", s);
	return buf;
}

const char *cli_fmt_percent(double p, char *buf, unsigned len)
{
	if (p == 0)
		snprintf(buf, len, "0%%");
	else if (p < 1e-6)
		snprintf(buf, len, "<0.0001%%");
	else if (p < 1 && 100 * p >= 99.95) /* %.3g would say 100 */
		snprintf(buf, len, "99.9%%");
	else
		snprintf(buf, len, "%.3g%%", 100 * p);
	return buf;
}

const char *cli_fmt_share(uint64_t part, uint64_t whole, char *buf, size_t len)
{
	double pct = whole ? 100.0 * (double)part / (double)whole : 0;

	if (whole == 0)
		snprintf(buf, len, "-");
	else if (part == whole || part == 0)
		snprintf(buf, len, "%s%%", part ? "100" : "0");
	else if (pct < 0.05) /* %.1f would say 0.0 */
		snprintf(buf, len, "<0.1%%");
	else if (pct >= 99.95 && part < whole) /* %.1f would say 100.0: truncate */
		snprintf(buf, len, "99.9%%");
	else
		snprintf(buf, len, "%.1f%%", pct);
	return buf;
}

const char *cli_fmt_share_of(uint64_t part, uint64_t whole, char *buf, size_t len)
{
	char pct[16];

	snprintf(buf, len, "%s (%llu of %llu)", cli_fmt_share(part, whole, pct, sizeof(pct)),
		 (unsigned long long)part, (unsigned long long)whole);
	return buf;
}

void cli_check_fault(const char *flag, double fault_s, double p99_s, const char *p99_from)
{
	char a[32], b[32];

	if (bhz_fault_exceeds_p99(fault_s, p99_s))
		return;
	cli_usage_error("%s (%s) must exceed the P99 latency (%s, from %s): a fault is a "
			"slowdown past the tail the permits are sized for",
			flag, cli_fmt_duration(fault_s, a, sizeof(a)),
			cli_fmt_duration(p99_s, b, sizeof(b)), p99_from);
}
