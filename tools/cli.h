/* Flag parsing shared by the bulkhead-* commands: strict numbers, durations
 * with units, and one way to complain (message, hint, exit status 2). */
#ifndef BH_TOOLS_CLI_H
#define BH_TOOLS_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_EXIT_USAGE 2

/* The program name used in messages; set once by main. */
extern const char *cli_prog;

/* Print "prog: message" and a hint to run --help, then exit 2. */
__attribute__((noreturn, format(printf, 1, 2))) void cli_usage_error(const char *fmt, ...);

/* What getopt_long refused, when it returned ':' or '?' (opterr 0, the
 * short options led by ':'), as the message says it: the option itself,
 * "-z" even inside a group ("-qz", "-zq", where argv[optind - 1] is not
 * the option's word), or the long option as written, up to any '=', with
 * the long options it may mean when it begins several.
 * The char vals of longopts must all be short options too, or a short
 * option that is not one could be taken for the long option. */
const char *cli_option_problem(int ch, char *const argv[], const struct option *longopts,
			       char *buf, size_t len);

/* The same as a usage error: exit 2. */
__attribute__((noreturn)) void cli_option_error(int ch, char *const argv[],
						const struct option *longopts);

/* Each parser returns true and sets *out, or returns false when the text is
 * not entirely a valid value in [min, max]. */
bool cli_parse_double(const char *s, double min, double max, double *out);
bool cli_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);

/* A duration: a number with an optional unit, one of cli_duration_units();
 * a bare number is in default_unit_s seconds (1e-3 for milliseconds).
 * Result in seconds, which must lie in [min_s, max_s]. */
bool cli_parse_duration(const char *s, double default_unit_s, double min_s, double max_s,
			double *out);

/* The same, exiting with a clear message naming the flag on failure. */
double cli_double(const char *flag, const char *s, double min, double max);
uint32_t cli_u32(const char *flag, const char *s, uint32_t min, uint32_t max);
/* unit_s: what a bare number means (1e-3: milliseconds, 1: seconds). */
double cli_duration(const char *flag, const char *s, double unit_s, double min_s, double max_s);
#define CLI_MS 1e-3
#define CLI_S 1.0

/* The units a duration may carry, as help text lists them: "ns, us, ms,
 * s, min". The parser reads the same table. */
const char *cli_duration_units(void);

/* "200 ms", "1.5 s", "80 us": a duration for humans. */
const char *cli_fmt_duration(double s, char *buf, unsigned len);

/* A probability as a percentage, "<0.0001%" rather than "3e-82%", and never
 * "100%" unless p is 1 (99.96% prints "99.9%"). */
const char *cli_fmt_percent(double p, char *buf, unsigned len);

/* part of whole as a percentage with one decimal, "99.5%". It says "100%"
 * only when part == whole and "0%" only when part == 0: near the ends it
 * truncates towards the middle ("99.9%" for 99.96%, "<0.1%" for 0.04%), so
 * a result the text reports is never rounded away. "-" when whole is 0. */
const char *cli_fmt_share(uint64_t part, uint64_t whole, char *buf, size_t len);

/* The same with the counts: "99.5% (995 of 1000)". */
const char *cli_fmt_share_of(uint64_t part, uint64_t whole, char *buf, size_t len);

/* A fault is a slowdown past the tail the sizes were made for (permits are
 * peak QPS x P99 x a safety factor): its latency must exceed the P99, or
 * the "fault" is latency the bulkhead already carries. Both tools check
 * their fault flag with this; on failure, a usage error naming the flag
 * and where the P99 came from (p99_from, e.g. "--p99"). */
void cli_check_fault(const char *flag, double fault_s, double p99_s, const char *p99_from);

#endif /* BH_TOOLS_CLI_H */
