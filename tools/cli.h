/* Flag parsing shared by the bulkhead-* commands: strict numbers, durations
 * with units, and one way to complain (message, hint, exit status 2). */
#ifndef BH_TOOLS_CLI_H
#define BH_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>

#define CLI_EXIT_USAGE 2

/* The program name used in messages; set once by main. */
extern const char *cli_prog;

/* Print "prog: message" and a hint to run --help, then exit 2. */
__attribute__((noreturn, format(printf, 1, 2))) void cli_usage_error(const char *fmt, ...);

/* Each parser returns true and sets *out, or returns false when the text is
 * not entirely a valid value in [min, max]. */
bool cli_parse_double(const char *s, double min, double max, double *out);
bool cli_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);

/* A duration: a number with an optional unit (ns, us, ms, s, min); a bare
 * number is in default_unit_s seconds (1e-3 for milliseconds). Result in
 * seconds, which must lie in [min_s, max_s]. */
bool cli_parse_duration(const char *s, double default_unit_s, double min_s, double max_s,
			double *out);

/* The same, exiting with a clear message naming the flag on failure. */
double cli_double(const char *flag, const char *s, double min, double max);
uint32_t cli_u32(const char *flag, const char *s, uint32_t min, uint32_t max);
/* unit_s: what a bare number means (1e-3: milliseconds, 1: seconds). */
double cli_duration(const char *flag, const char *s, double unit_s, double min_s, double max_s);
#define CLI_MS 1e-3
#define CLI_S 1.0

/* "200 ms", "1.5 s", "80 us": a duration for humans. */
const char *cli_fmt_duration(double s, char *buf, unsigned len);

/* A probability as a percentage, "<0.0001%" rather than "3e-82%". */
const char *cli_fmt_percent(double p, char *buf, unsigned len);

#endif /* BH_TOOLS_CLI_H */
