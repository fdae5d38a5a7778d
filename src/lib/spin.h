/* The one spin policy: how long a waiter may poll before it sleeps, and
 * whether it may poll at all. Private (bhi_); include it as "lib/spin.h".
 *
 * A spinner helps only while the thread it waits for runs, so spinners
 * must not take every CPU from the threads that do the work. The process
 * counts its spinners (the core's and the shm layer's head waiters, the
 * pool's pollers) and a thread may spin only while spinners < online CPUs:
 * never more spinners than CPUs, however many bulkheads and pools wait at
 * once. A refused spinner sleeps at once. The stricter rule, one CPU always
 * left for the holder (spinners + 1 < CPUs), was measured and is not used:
 * on 2 vCPUs it allowed one spinner, so a head woken early to overlap the
 * holder's work found the old head still spinning, slept, and needed a
 * futex wake at its turn; BH_FAIR at 8 threads / 1 permit lost about 20%
 * (docs/design.md). Only slow paths ask: bh_try_acquire and
 * bh_release never touch the count. */
#ifndef BHI_SPIN_H
#define BHI_SPIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* A waiter's spin budget in time (the core's head waiter, the shm layer's,
 * the pool's pollers). */
#define BHI_SPIN_NS (20ull * 1000)

/* Polls (bhi_cpu_relax) that fit in ns, from the cost of one pause,
 * measured once per process (it ranges from ~1 to ~40 ns across x86
 * generations). */
uint32_t bhi_spin_iters_for(uint64_t ns);

/* true: a CPU is free and the caller now counts as a spinner, until its
 * bhi_spin_end. false: it must not spin (and must not call bhi_spin_end). */
bool bhi_spin_begin(void);
void bhi_spin_end(void);

/* Poll *word while it reads value, at most iters times, if bhi_spin_begin
 * lets us. Returns at once with iters == 0. Relaxed loads: the caller
 * reads the word again with the ordering it needs. */
void bhi_spin_while(_Atomic uint32_t *word, uint32_t value, uint32_t iters);

/* Tests: the spinners counted now; and pretend the machine has cpus online
 * CPUs (0: the real count again). */
uint32_t bhi_spin_count(void);
void bhi_spin_test_cpus(long cpus);

#endif /* BHI_SPIN_H */
