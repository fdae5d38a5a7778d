/* The cluster layer's clock: leases, renewals and deadlines are measured on
 * CLOCK_MONOTONIC, which tests may skew (offset and rate) to play another
 * machine's clock; bhc_real() maps a time back for the core's gate, the
 * timerfd and the exported expiry. */
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "bhc.h"
#include "cluster.h"

/* Tests skew it (bhc_test_clock); written before any handle exists. */
static struct {
	_Atomic int active;
	int64_t offset;
	int32_t ppm;
	uint64_t ref;
} skew;

uint64_t bhc_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * BH_SEC + (uint64_t)ts.tv_nsec;
}

#define SKEW_BASE 1000000000000000ull /* keeps skewed times positive */

void bhc_test_clock(int64_t offset_ns, int32_t rate_ppm)
{
	skew.offset = offset_ns;
	skew.ppm = rate_ppm;
	skew.ref = bhc_mono();
	/* release: pairs with the acquire in bhc_clk() and bhc_real() */
	atomic_store_explicit(&skew.active, 1, memory_order_release);
}

uint64_t bhc_clk(void)
{
	uint64_t t = bhc_mono();
	long double d;

	/* acquire: pairs with bhc_test_clock()'s release store, so the skew is visible */
	if (!atomic_load_explicit(&skew.active, memory_order_acquire))
		return t;
	d = (long double)(t - skew.ref) * (1e6L + skew.ppm) / 1e6L;
	return (uint64_t)((long double)skew.ref + d + SKEW_BASE + skew.offset);
}

/* The CLOCK_MONOTONIC instant at which bhc_clk() reads t. */
uint64_t bhc_real(uint64_t t)
{
	long double d;

	/* acquire: pairs with bhc_test_clock()'s release store, as in bhc_clk() */
	if (!atomic_load_explicit(&skew.active, memory_order_acquire))
		return t;
	d = ((long double)t - SKEW_BASE - skew.offset - skew.ref) * 1e6L / (1e6L + skew.ppm);
	return d + skew.ref <= 0 ? 0 : (uint64_t)(d + skew.ref);
}
