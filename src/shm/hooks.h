/* Hidden hooks of the host-wide layer for its tests, stress program and
 * benchmark (they link the static core). */
#ifndef BH_SHM_HOOKS_H
#define BH_SHM_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"

/* The next segments this process creates get this geometry (0: default). */
void bhs_test_geometry(uint32_t nprocs, uint32_t nslots, uint32_t nextra);
/* Replace the waiters' wait/wake/clock (NULL: the real, process-shared
 * futexes); installing ops turns spinning off. */
void bhs_set_sync_ops(bulkhead_t *bh, const struct bhi_sync_ops *ops);
void bhs_set_spin_ns(bulkhead_t *bh, uint64_t ns);
void bhs_set_starve_ns(bulkhead_t *bh, uint64_t ns);
/* The longest sleep of a waiter or agent before it looks for the dead. */
void bhs_set_poll_ns(bulkhead_t *bh, uint64_t ns);
/* Attachments registered from now on use the fallback for kernels without
 * membarrier(2): release windows fence themselves. */
void bhs_test_fenced(bool on);
/* The shared word, and the mapping itself. */
uint64_t bhs_word(const bulkhead_t *bh);
void *bhs_segment(const bulkhead_t *bh, size_t *size);
/* Look for dead processes now (not waiting for the scan interval);
 * true when some were found. */
bool bhs_scan_now(bulkhead_t *bh);

/* Crash points (a build with -DBHS_CRASH_POINTS): when the process reaches
 * point p for the count-th time (1 = first), it writes one byte to fd and
 * stops there forever, for the test to kill it. */
void bhs_crash_at(int p, unsigned count, int fd);
/* The same, but the process waits at the point only until it can read one
 * byte from in, and then goes on (it stops for good if in is closed); a
 * byte other than 0 names the next point to pause at, first time. */
void bhs_pause_at(int p, unsigned count, int out, int in);

#endif /* BH_SHM_HOOKS_H */
