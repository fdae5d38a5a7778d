/* The only file of the fuzz harness that includes the core's internals. */
#include "core/internal.h"
#include "fuzz_hooks.h"

void bhf_attach(bulkhead_t *bh, const struct bhf_hooks *h, uint64_t spin_ns,
		uint64_t starve_ns)
{
	static struct bhi_sync_ops ops;

	ops = (struct bhi_sync_ops){
		.wait = h->wait,
		.wake = h->wake,
		.now = h->now,
		.queued = h->queued,
		.granted = h->granted,
		.ctx = h->ctx,
	};
	bhi_set_sync_ops(bh, &ops); /* also turns spinning off */
	bhi_set_spin_ns(bh, spin_ns);
	bhi_set_starve_ns(bh, starve_ns);
}


#ifdef BHF_SHM
#include "shm/hooks.h"

void bhf_attach_shm(bulkhead_t *bh, const struct bhf_hooks *h, uint64_t spin_ns,
		    uint64_t starve_ns, uint64_t poll_ns)
{
	static struct bhi_sync_ops ops;

	/* the host-wide layer reports no queue events: it has no observers */
	ops = (struct bhi_sync_ops){
		.wait = h->wait,
		.wake = h->wake,
		.now = h->now,
		.ctx = h->ctx,
	};
	bhs_set_sync_ops(bh, &ops); /* also turns spinning off */
	bhs_set_spin_ns(bh, spin_ns);
	bhs_set_starve_ns(bh, starve_ns);
	bhs_set_poll_ns(bh, poll_ns);
}

void bhf_shm_geometry(uint32_t nprocs, uint32_t nslots, uint32_t nextra)
{
	bhs_test_geometry(nprocs, nslots, nextra);
}
#endif
