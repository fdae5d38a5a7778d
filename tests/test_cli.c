/* The tools' shared flag parsing and number formatting: a percentage never
 * rounds a result away (100% only when exact, 0% only when nothing), and
 * the units help text lists are the units the parser takes. */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cli.h"

static const char *share(uint64_t part, uint64_t whole)
{
	static char buf[32];

	return cli_fmt_share(part, whole, buf, sizeof(buf));
}

static const char *percent(double p)
{
	static char buf[32];

	return cli_fmt_percent(p, buf, sizeof(buf));
}

/* ---- shares of counts ------------------------------------------------------- */

static void test_share_ends_are_exact(void **state)
{
	(void)state;
	assert_string_equal(share(1000, 1000), "100%");
	assert_string_equal(share(1, 1), "100%");
	assert_string_equal(share(0, 1000), "0%");
	assert_string_equal(share(0, 0), "-");
	/* the cases that used to print 100: 99.5% at %.0f, 99.95% at %.1f */
	assert_string_equal(share(995, 1000), "99.5%");
	assert_string_equal(share(1999, 2000), "99.9%");
	assert_string_equal(share(9999, 10000), "99.9%");
	assert_string_equal(share(999999, 1000000), "99.9%");
	/* ...and the same at the other end */
	assert_string_equal(share(1, 10000), "<0.1%");
	assert_string_equal(share(1, 1000000), "<0.1%");
}

static void test_share_rounds_in_the_middle(void **state)
{
	(void)state;
	assert_string_equal(share(1, 3), "33.3%");
	assert_string_equal(share(2, 3), "66.7%");
	assert_string_equal(share(613, 1000), "61.3%");
	assert_string_equal(share(1994, 2000), "99.7%");
	assert_string_equal(share(1, 500), "0.2%");
}

/* The rule, for every fraction with a denominator up to 600: "100%" if and
 * only if part == whole, "0%" if and only if part == 0, and never a
 * result that rounds up past the truth near 100. */
static void test_share_never_rounds_to_the_ends(void **state)
{
	(void)state;
	for (uint64_t whole = 1; whole <= 600; whole++) {
		for (uint64_t part = 0; part <= whole; part++) {
			const char *s = share(part, whole);
			double shown = strtod(s[0] == '<' ? s + 1 : s, NULL);

			if ((strcmp(s, "100%") == 0) != (part == whole) ||
			    (strcmp(s, "0%") == 0) != (part == 0))
				fail_msg("%llu of %llu printed as %s", (unsigned long long)part,
					 (unsigned long long)whole, s);
			if (part < whole && shown > 100.0 * part / whole + 0.05 + 1e-9)
				fail_msg("%llu of %llu printed as %s: rounded up too far",
					 (unsigned long long)part, (unsigned long long)whole, s);
		}
	}
}

static void test_share_with_counts(void **state)
{
	char buf[48];

	(void)state;
	assert_string_equal(cli_fmt_share_of(995, 1000, buf, sizeof(buf)), "99.5% (995 of 1000)");
	assert_string_equal(cli_fmt_share_of(2400, 2400, buf, sizeof(buf)),
			    "100% (2400 of 2400)");
	assert_string_equal(cli_fmt_share_of(0, 0, buf, sizeof(buf)), "- (0 of 0)");
}

/* ---- probabilities ------------------------------------------------------------ */

static void test_percent_of_a_probability(void **state)
{
	(void)state;
	assert_string_equal(percent(0), "0%");
	assert_string_equal(percent(1), "100%");
	assert_string_equal(percent(0.5), "50%");
	assert_string_equal(percent(0.000445), "0.0445%");
	assert_string_equal(percent(1e-7), "<0.0001%");
	assert_string_equal(percent(0.9994), "99.9%");
	/* %.3g alone would say 100% */
	assert_string_equal(percent(0.9996), "99.9%");
	assert_string_equal(percent(0.999999), "99.9%");
}

/* ---- durations ------------------------------------------------------------- */

static void test_units_text_is_the_parsers_table(void **state)
{
	static const struct {
		const char *unit;
		double seconds;
	} want[] = { { "ns", 1e-9 }, { "us", 1e-6 }, { "ms", 1e-3 }, { "s", 1 }, { "min", 60 } };
	char text[64], *save = NULL, *tok;
	size_t n = 0;

	(void)state;
	snprintf(text, sizeof(text), "%s", cli_duration_units());
	for (tok = strtok_r(text, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save), n++) {
		char flag[16];
		double v = 0;

		assert_true(n < sizeof(want) / sizeof(want[0]));
		assert_string_equal(tok, want[n].unit);
		snprintf(flag, sizeof(flag), "3%s", tok);
		assert_true(cli_parse_duration(flag, 1, 0, 1e6, &v));
		assert_true(fabs(v - 3 * want[n].seconds) <= 1e-12 * v);
	}
	assert_int_equal(n, sizeof(want) / sizeof(want[0]));
}

static void test_duration_parsing(void **state)
{
	double v = -1;

	(void)state;
	assert_true(cli_parse_duration("250", 1e-3, 0, 10, &v)); /* bare: the default unit */
	assert_true(fabs(v - 0.25) < 1e-12);
	assert_true(cli_parse_duration("1.5s", 1e-3, 0, 10, &v));
	assert_true(fabs(v - 1.5) < 1e-12);
	assert_false(cli_parse_duration("1h", 1, 0, 1e6, &v));   /* not in the table */
	assert_false(cli_parse_duration("1 s", 1, 0, 10, &v));   /* no space */
	assert_false(cli_parse_duration("1sec", 1, 0, 10, &v));
	assert_false(cli_parse_duration("nan", 1, 0, 10, &v));
	assert_false(cli_parse_duration("11s", 1, 0, 10, &v));   /* above max */
	assert_false(cli_parse_duration("", 1, 0, 10, &v));
}

static void test_duration_format_never_shows_1000(void **state)
{
	char buf[32];

	(void)state;
	assert_string_equal(cli_fmt_duration(0.030, buf, sizeof(buf)), "30 ms");
	assert_string_equal(cli_fmt_duration(0.9994, buf, sizeof(buf)), "999 ms");
	/* %.3g of 999.6 is "1e+03": the next unit up says it */
	assert_string_equal(cli_fmt_duration(0.9996, buf, sizeof(buf)), "1 s");
	assert_string_equal(cli_fmt_duration(999.6e-6, buf, sizeof(buf)), "1 ms");
	assert_string_equal(cli_fmt_duration(999.6, buf, sizeof(buf)), "1000 s");
	assert_string_equal(cli_fmt_duration(80e-6, buf, sizeof(buf)), "80 us");
}

/* ---- options getopt_long refused -------------------------------------------- */

static const struct option longopts[] = {
	{ "rate", required_argument, NULL, 'r' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "svg", required_argument, NULL, 256 },
	{ "kv", no_argument, NULL, 257 },
	{ "svg-width", required_argument, NULL, 258 },
	{ "svg-height", required_argument, NULL, 259 },
	{ NULL, 0, NULL, 0 },
};

/* Parse the words (NULL-terminated) as the tools do, and return the
 * message for the first option refused ("" if none was). */
static const char *refused(const char *first, ...)
{
	static char buf[160], words[8][32];
	char *argv[10] = { "prog" };
	int argc = 1, ch;
	const char *a;
	va_list ap;

	va_start(ap, first);
	for (a = first; a && argc < 9; a = va_arg(ap, const char *), argc++) {
		snprintf(words[argc - 1], sizeof(words[0]), "%s", a);
		argv[argc] = words[argc - 1];
	}
	va_end(ap);
	argv[argc] = NULL;
	buf[0] = '\0';
	optind = 0; /* glibc: start afresh */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":r:qh", longopts, NULL)) != -1)
		if (ch == ':' || ch == '?')
			return cli_option_problem(ch, argv, longopts, buf, sizeof(buf));
	return buf;
}

static void test_option_problem_names_the_option(void **state)
{
	(void)state;
	/* an unknown short option inside a group: argv[optind - 1] is the
	 * word before it, or the program */
	assert_string_equal(refused("-zq", NULL), "unknown option '-z'");
	assert_string_equal(refused("-qz", NULL), "unknown option '-z'");
	assert_string_equal(refused("-q", "-zq", NULL), "unknown option '-z'");
	assert_string_equal(refused("--svg", "x", "-zq", NULL), "unknown option '-z'");
	assert_string_equal(refused("--quiet", "-zq", NULL), "unknown option '-z'");
	assert_string_equal(refused("-z", NULL), "unknown option '-z'");
	/* long options as written, up to the '=' */
	assert_string_equal(refused("--frob", NULL), "unknown option '--frob'");
	assert_string_equal(refused("--frob=3", NULL), "unknown option '--frob'");
	assert_string_equal(refused("--quiet=1", NULL), "--quiet takes no value");
	assert_string_equal(refused("--kv=1", NULL), "--kv takes no value");
	/* a prefix of several: not unknown, but which are meant */
	assert_string_equal(refused("--svg-", "3", NULL),
			    "ambiguous option '--svg-': --svg-width or --svg-height?");
	assert_string_equal(refused("--sv=3", NULL),
			    "ambiguous option '--sv': --svg, --svg-width or --svg-height?");
	assert_string_equal(refused("--svg", "x", "--svg-w", "3", NULL), "");
	/* a missing value: the option that wanted it */
	assert_string_equal(refused("--rate", NULL), "--rate needs a value");
	assert_string_equal(refused("--svg", NULL), "--svg needs a value");
	assert_string_equal(refused("-r", NULL), "-r needs a value");
	assert_string_equal(refused("-qr", NULL), "-r needs a value");
	assert_string_equal(refused("-q", "-r", "5", NULL), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_share_ends_are_exact),
		cmocka_unit_test(test_share_rounds_in_the_middle),
		cmocka_unit_test(test_share_never_rounds_to_the_ends),
		cmocka_unit_test(test_share_with_counts),
		cmocka_unit_test(test_percent_of_a_probability),
		cmocka_unit_test(test_units_text_is_the_parsers_table),
		cmocka_unit_test(test_duration_parsing),
		cmocka_unit_test(test_duration_format_never_shows_1000),
		cmocka_unit_test(test_option_problem_names_the_option),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
