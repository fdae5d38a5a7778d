/* struct fx_stats as version 1 of the made-up library released it, frozen:
 * what fx_stats@FX_1 fills for programs built against it. */
#ifndef FX_STATS_1_H
#define FX_STATS_1_H
#include <stdint.h>

struct fx_stats {
#ifdef FX_COMPAT_WRONG
	uint32_t a; /* a compat layout that is not the released one */
	uint64_t b;
#else
	uint64_t a, b;
#endif
};
#endif
