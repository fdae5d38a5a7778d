/* The spin policy (lib/spin.h): the per-process count of spinners, the
 * online CPUs it is measured against, and the pause calibration. */
#include <unistd.h>

#include "lib/compiler.h"
#include "lib/futex.h"
#include "lib/spin.h"

/* Threads spinning now. Relaxed everywhere: the count publishes no data,
 * so it pairs with nothing; each RMW is atomic, so the count is exact, and
 * a stale plain read (bhi_spin_count) is only a test's snapshot. */
static _Atomic uint32_t spinners;
/* Online CPUs, read once (0 = not yet). Relaxed: racing first readers
 * store the same value; nothing else is published with it. */
static _Atomic long online;
static _Atomic long test_cpus;

static long cpus_online(void)
{
	long n = atomic_load_explicit(&test_cpus, memory_order_relaxed);

	if (n > 0)
		return n;
	n = atomic_load_explicit(&online, memory_order_relaxed);
	if (BHI_UNLIKELY(n == 0)) {
		int saved = errno; /* sysconf may set it; the library never does */

		n = sysconf(_SC_NPROCESSORS_ONLN);
		errno = saved;
		n = n > 0 ? n : 1;
		atomic_store_explicit(&online, n, memory_order_relaxed);
	}
	return n;
}

bool bhi_spin_begin(void)
{
	uint32_t before = atomic_fetch_add_explicit(&spinners, 1, memory_order_relaxed);

	if ((long)before < cpus_online())
		return true;
	atomic_fetch_sub_explicit(&spinners, 1, memory_order_relaxed);
	return false;
}

void bhi_spin_end(void)
{
	atomic_fetch_sub_explicit(&spinners, 1, memory_order_relaxed);
}

/* The first look comes before the count: a word that already moved (the
 * permit came while we queued) costs no locked instruction. */
void bhi_spin_while(_Atomic uint32_t *word, uint32_t value, uint32_t iters)
{
	if (!iters || atomic_load_explicit(word, memory_order_relaxed) != value ||
	    !bhi_spin_begin())
		return;
	for (uint32_t i = 0; i < iters; i++) {
		if (atomic_load_explicit(word, memory_order_relaxed) != value)
			break;
		bhi_cpu_relax();
	}
	bhi_spin_end();
}

uint32_t bhi_spin_iters_for(uint64_t ns)
{
	static _Atomic uint32_t pause_ps; /* picoseconds per poll, 0 = unknown */
	uint32_t ps = atomic_load_explicit(&pause_ps, memory_order_relaxed);

	if (ps == 0) {
		uint64_t t0 = bhi_now_ns();

		for (int i = 0; i < 2000; i++)
			bhi_cpu_relax();
		ps = (uint32_t)((bhi_now_ns() - t0) * 1000 / 2000);
		ps = ps < 500 ? 500 : ps;
		atomic_store_explicit(&pause_ps, ps, memory_order_relaxed);
	}
	return (uint32_t)(ns * 1000 / ps);
}

uint32_t bhi_spin_count(void)
{
	return atomic_load_explicit(&spinners, memory_order_relaxed);
}

void bhi_spin_test_cpus(long cpus)
{
	atomic_store_explicit(&test_cpus, cpus, memory_order_relaxed);
}
