/* The only file of the fuzz harness that includes the core's internals. */
#include "core/internal.h"
#include "fuzz_hooks.h"

/* The hooks of the one bulkhead attached now. The harness's waits are all
 * acquirers' (BHI_WAIT_GRANT), and the core and the host-wide layer wake
 * one waiter at a time, so the harness's narrower signatures lose nothing. */
static struct bhf_hooks hooks;

static int hook_wait(void *ctx, enum bhi_wait_kind kind, _Atomic uint32_t *word,
		     uint32_t expect, uint64_t deadline_ns)
{
	(void)kind;
	return hooks.wait(ctx, word, expect, deadline_ns);
}

static void hook_wake(void *ctx, _Atomic uint32_t *word, bool all)
{
	(void)all;
	hooks.wake(ctx, word);
}

static void set_ops(struct bhi_sync_ops *ops, const struct bhf_hooks *h)
{
	hooks = *h;
	*ops = (struct bhi_sync_ops){
		.wait = hook_wait,
		.wake = hook_wake,
		.now = h->now,
		.ctx = h->ctx,
	};
}

void bhf_attach(bulkhead_t *bh, const struct bhf_hooks *h, uint64_t spin_ns,
		uint64_t starve_ns)
{
	static struct bhi_sync_ops ops;
	static struct bhi_queue_obs obs;

	set_ops(&ops, h);
	obs = (struct bhi_queue_obs){ .queued = h->queued, .granted = h->granted, .ctx = h->ctx };
	bhi_set_sync_ops(bh, &ops); /* also turns spinning off */
	bhi_set_queue_obs(bh, &obs);
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
	set_ops(&ops, h);
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
