/* The bulkhead object: create, destroy, the test hooks and the layers'
 * attachment. The protocol is elsewhere: the word's fast paths in word.c,
 * the queue and its waits in queue.c, the observers in observe.c. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "layer.h"
#include "lib/hold.h"
#include "shm/dispatch.h"

/* ---- create / destroy / hooks ------------------------------------------ */

static uint32_t slot_count(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_CONF);
	uint32_t n = 16;

	while (n < 4 * (uint32_t)(cpus > 0 ? cpus : 1) && n < 1024)
		n *= 2;
	return n;
}

#define BH_ALL_FLAGS (BH_FAIR | BH_TRACK_HOLD | BH_NO_STATS)

static int check_config(const struct bh_config *cfg)
{
	if (cfg->max_concurrent == 0 || cfg->max_concurrent > BH_LIMIT_MAX ||
	    (cfg->flags & ~BH_ALL_FLAGS))
		return -EINVAL;
	if (cfg->name && strnlen(cfg->name, BH_NAME_MAX) == BH_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/* Every handle's id, host-wide ones too (a 64-bit count never wraps). */
static _Atomic uint64_t next_id;

static uint64_t new_id(void)
{
	return atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
}

static void set_name(struct bulkhead *bh, const char *name)
{
	bh->id = new_id();
	if (name)
		memcpy(bh->name, name, strlen(name) + 1);
	else
		snprintf(bh->name, sizeof(bh->name), "bulkhead-%llu", (unsigned long long)bh->id);
}

static void free_bulkhead(struct bulkhead *bh)
{
	free(bh->hold);
	free(bh->holds);
	bhi_free_aligned(bh);
}

/* With BH_TRACK_HOLD, a hold record for every thread index: 96 KiB of
 * address space, of which a page is touched per 170 indices in use. */
static struct bulkhead *alloc_bulkhead(size_t size, bool hold)
{
	int saved = errno; /* the library never sets errno, even on ENOMEM */
	struct bulkhead *bh = bhi_zalloc_aligned(size, BHI_CACHELINE);

	if (bh && hold &&
	    (!(bh->hold = calloc(BHI_HOLD_SHARDS, sizeof(*bh->hold))) ||
	     !(bh->holds = calloc(BHI_TINDEX_MAX, sizeof(*bh->holds))))) {
		free_bulkhead(bh);
		bh = NULL;
	}
	errno = saved;
	return bh;
}

int bh_create(const struct bh_config *cfg, bulkhead_t **out)
{
	struct bulkhead *bh;
	uint32_t nslots = slot_count();
	size_t size = sizeof(*bh) + (nslots + 1) * sizeof(struct bhi_slot);
	int r;

	if (!cfg || !out)
		return -EINVAL;
	if ((r = check_config(cfg)) < 0)
		return r;
	bh = alloc_bulkhead(size, cfg->flags & BH_TRACK_HOLD);
	if (!bh)
		return -ENOMEM;
	if (pthread_mutex_init(&bh->lock, NULL) != 0) {
		free_bulkhead(bh);
		return -ENOMEM;
	}
	set_name(bh, cfg->name);
	atomic_init(&bh->word, w_make(cfg->max_concurrent, cfg->max_concurrent, 0));
	bh->flags = cfg->flags;
	bh->queue_cap = cfg->queue_capacity > BH_QUEUE_MAX ? BH_QUEUE_MAX : cfg->queue_capacity;
	bh->nslots = nslots;
	bh->sync = &bhi_futex_ops;
	bh->starve_ns = BH_MSEC;
	bh->spin_ns = BHI_SPIN_NS;
	bh->spin_iters = bhi_spin_iters_for(bh->spin_ns);
	*out = bh;
	return 0;
}

void bh_destroy(bulkhead_t *bh)
{
	if (!bh)
		return;
	if (bh->layer)
		bh->layer->destroy(bh->layer);
	if (bh->ext) {
		bhs_destroy(bh);
		return;
	}
	pthread_mutex_destroy(&bh->lock);
	free_bulkhead(bh);
}

const char *bh_name(const bulkhead_t *bh)
{
	return bh ? bh->name : NULL;
}

/* Fake clocks do not advance while a waiter spins: tests get no spinning. */
void bhi_set_sync_ops(bulkhead_t *bh, const struct bhi_sync_ops *ops)
{
	bh->sync = ops ? ops : &bhi_futex_ops;
	if (ops)
		bhi_set_spin_ns(bh, 0);
}

/* Observers only watch: the waits and spinning stay as they are. */
void bhi_set_queue_obs(bulkhead_t *bh, const struct bhi_queue_obs *obs)
{
	bh->obs = obs;
}

void bhi_set_spin_ns(bulkhead_t *bh, uint64_t ns)
{
	bh->spin_ns = ns;
	bh->spin_iters = ns ? bhi_spin_iters_for(ns) : 0;
}

void bhi_set_starve_ns(bulkhead_t *bh, uint64_t ns)
{
	bh->starve_ns = ns;
}

/* ---- host-wide handles (src/core/backend.h) ------------------------------ */

/* One spare slot keeps the core's count fallback in bounds should anything
 * ever count on it. */
bulkhead_t *bhi_ext_alloc(void)
{
	return bhi_zalloc_aligned(sizeof(struct bulkhead) + sizeof(struct bhi_slot),
				  BHI_CACHELINE);
}

void bhi_ext_init(bulkhead_t *bh, struct bhs_att *a, _Atomic uint64_t *word, uint32_t flags,
		  const char *name)
{
	atomic_init(&bh->word, BHI_WORD_EXT);
	bh->flags = flags | BHI_EXT;
	bh->nslots = 0;
	bh->ext = a;
	bh->ext_word = word;
	bh->id = new_id();
	bh->sync = &bhi_futex_ops;
	pthread_mutex_init(&bh->lock, NULL);
	snprintf(bh->name, sizeof(bh->name), "%s", name);
}

void bhi_ext_free(bulkhead_t *bh)
{
	if (bh->ext) /* bound: the lock was initialised */
		pthread_mutex_destroy(&bh->lock);
	bhi_free_aligned(bh);
}

/* ---- layers (src/core/layer.h) -------------------------------------------------- */

void bhi_layer_attach(bulkhead_t *bh, struct bhi_layer *l)
{
	bh->layer = l;
	atomic_store_explicit(&bh->gate_ns, 0, memory_order_relaxed);
	bh->flags |= BHI_GATED;
}

struct bhi_layer *bhi_layer_of(const bulkhead_t *bh)
{
	return bh->layer;
}

bool bhi_tracks_hold(const bulkhead_t *bh)
{
	return bh->flags & BH_TRACK_HOLD;
}

bool bhi_is_host(const bulkhead_t *bh)
{
	return bh->ext != NULL;
}

/* Counted by the child side of pthread_atfork; layer.h reads it inline.
 * Relaxed: a fork child runs one thread when its handler bumps it. */
_Atomic uint32_t bhk_fork_gen;
static pthread_once_t fork_gen_once = PTHREAD_ONCE_INIT;

static void fork_gen_bump(void)
{
	atomic_fetch_add_explicit(&bhk_fork_gen, 1, memory_order_relaxed);
}

static void fork_gen_register(void)
{
	pthread_atfork(NULL, NULL, fork_gen_bump);
}

uint32_t bhk_fork_watch(void)
{
	pthread_once(&fork_gen_once, fork_gen_register);
	return bhk_fork_generation();
}

/* 0, or -EBUSY when another sink is attached. acq_rel: pairs with a
 * detach's clear, and publishes k's fields to the hooks' loads. */
int bhk_attach(bulkhead_t *bh, struct bhk_sink *k)
{
	struct bhk_sink *none = NULL;

	pthread_once(&fork_gen_once, fork_gen_register);
	return atomic_compare_exchange_strong_explicit(&bh->sink, &none, k, memory_order_acq_rel,
						       memory_order_acquire)
		       ? 0
		       : -EBUSY;
}

/* Unhook and wait until no hook is inside the sink (the protocol is in
 * sample_hook.h). */
void bhk_detach(bulkhead_t *bh)
{
	/* seq_cst, store and loads: one single order with bhk_emit_slow()'s
	 * seq_cst increment of its slot and reload of sink; the load that
	 * sees 0 also pairs with bhk_emit_slow()'s release decrement */
	uint64_t gen = (uint64_t)bhk_fork_generation() << 32, m;

	atomic_store_explicit(&bh->sink, NULL, memory_order_seq_cst);
	/* A mark of an older generation is a parent's thread's, which does not
	 * exist here: it never goes, and is not waited for. */
	for (uint32_t i = 0; i <= bh->nslots; i++)
		while ((m = atomic_load_explicit(&bh->slots[i].sink_mark, memory_order_seq_cst)) !=
			       gen &&
		       (m & ~(uint64_t)UINT32_MAX) == gen)
			sched_yield();
}
