/* Little's law for sizing a bulkhead, shared by the library (bh_pool_size)
 * and the tools (bulkhead-size, bulkhead-demo), so both round the same way.
 * No protocol: arithmetic only. docs/sizing.md derives the rule. */
#ifndef BHI_LIB_SIZING_H
#define BHI_LIB_SIZING_H

#include <stdint.h>

/* Calls in flight at the peak, before rounding: peak QPS x P99 x safety
 * factor, Little's law applied to the tail (160/s x 0.03 s x 1.3 = 6.24). */
static inline double bhi_little_concurrency(double qps, double p99_s, double safety)
{
	return qps * p99_s * safety;
}

/* Round a size up, at least 1, forgiving the last bits of floating-point
 * noise (50 x 0.2 x 1.3 is 13.000000000000002 and means 13): anything up
 * to 1e-9 above a whole number is that number. NaN gives 1; sizes past
 * UINT32_MAX give UINT32_MAX. */
static inline uint32_t bhi_size_round_up(double x)
{
	uint32_t n;

	if (!(x > 1.0))
		return 1;
	if (x >= (double)UINT32_MAX)
		return UINT32_MAX;
	n = (uint32_t)x;
	return (double)n < x - 1e-9 ? n + 1 : n;
}

#endif /* BHI_LIB_SIZING_H */
