/* fx_stats@FX_1, for programs built against version 1: it fills the
 * version-1 layout (compat/fx_stats_1.h), whose struct has the released
 * name, so the ABI gate compares it with the baseline. */
#include <string.h>

#include "compat/fx_stats_1.h"

struct fx_stats_now {
	uint64_t a, b, c;
};

typedef struct fx fx_t;
int fx_stats(const fx_t *fx, struct fx_stats_now *out);

/* .symver in __asm__, not the symver attribute: clang (the TSan build)
 * has no such attribute and would export no compat symbol. */
int fxi_stats_1(const fx_t *fx, struct fx_stats *out);
__asm__(".symver fxi_stats_1, fx_stats@FX_1");
__attribute__((visibility("default")))
int fxi_stats_1(const fx_t *fx, struct fx_stats *out)
{
	struct fx_stats_now now;
	int r = fx_stats(fx, &now);

	memcpy(out, &now, sizeof(*out));
	return r;
}
