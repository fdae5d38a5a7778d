/* Private to the cluster layer and its tests. */
#ifndef BHC_CLUSTER_H
#define BHC_CLUSTER_H

#include <stdint.h>

/* Tests only: make this process's clock for leases read
 *   CLOCK_MONOTONIC + 10^15 ns + offset_ns, running rate_ppm faster (or
 * slower, when negative) than the real one from now on, as another
 * machine's clock would. Admission's coarse-clock check follows it. Call
 * before any cluster bulkhead is opened. */
void bhc_test_clock(int64_t offset_ns, int32_t rate_ppm);

#endif /* BHC_CLUSTER_H */
