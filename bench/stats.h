/* The median every benchmark reports: each figure is the median over its
 * rounds, and each ratio the median of the per-round ratios. Header-only,
 * as machine.h: each benchmark is one C file. */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stddef.h>
#include <stdlib.h>

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n), n > 0, which it sorts: the middle value, or the
 * mean of the two middle ones when n is even. */
static inline double bench_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif /* BENCH_STATS_H */
