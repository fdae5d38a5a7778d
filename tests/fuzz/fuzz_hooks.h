/* The fuzz harness's one door into the core's private test hooks (wait,
 * wake, clock and queue observers; spin and starvation timing). Everything
 * else the harness does goes through the public API. */
#ifndef BH_FUZZ_HOOKS_H
#define BH_FUZZ_HOOKS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "bulkhead.h"

struct bhf_hooks {
	int (*wait)(void *ctx, _Atomic uint32_t *word, uint32_t expect, uint64_t deadline_ns);
	void (*wake)(void *ctx, _Atomic uint32_t *word);
	uint64_t (*now)(void *ctx);
	void (*queued)(void *ctx, const struct bh_qlink *l);
	void (*granted)(void *ctx, const struct bh_qlink *l);
	void *ctx;
};

/* Drive bh's slow path through h (one bulkhead at a time), with a head
 * waiter's spin budget and the unfair starvation delay set as given. */
void bhf_attach(bulkhead_t *bh, const struct bhf_hooks *h, uint64_t spin_ns,
		uint64_t starve_ns);

#ifdef BHF_SHM
/* The same for a host-wide bulkhead (src/shm/hooks.h), whose waiters also
 * sleep at most poll_ns at a time before they look for dead processes; and
 * the geometry of the segments created from now on. */
void bhf_attach_shm(bulkhead_t *bh, const struct bhf_hooks *h, uint64_t spin_ns,
		    uint64_t starve_ns, uint64_t poll_ns);
void bhf_shm_geometry(uint32_t nprocs, uint32_t nslots, uint32_t nextra);
#endif

#endif /* BH_FUZZ_HOOKS_H */
