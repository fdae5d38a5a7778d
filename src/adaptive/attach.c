/* Attaching adaptive limits to what they move: the targets (a bulkhead's
 * limit, a host-wide bulkhead's through the controller role, a layer's
 * handle through the layer's own target), the automatic sample sources,
 * and attach/detach for bulkheads and pools. The controller itself
 * (sampling, windows, reading) is adaptive.c. */
#include <errno.h>
#include <stdatomic.h>

#include "bha.h"
#include "core/layer.h"
#include "lib/compiler.h"
#include "shm/role.h"


/* A bulkhead's limit and in-flight count, from the core's gauges (one load
 * of its word for a process-local one, the host's for a host-wide one). */
static uint32_t bh_target_limit(void *ctx)
{
	struct bh_gauges g;

	bh_gauges(ctx, &g);
	return (uint32_t)g.limit;
}

static uint32_t bh_target_in_flight(void *ctx)
{
	struct bh_gauges g;

	bh_gauges(ctx, &g);
	/* in flight goes below 0 for a moment when a shrink races releases */
	return (int64_t)g.in_flight > 0 ? (uint32_t)g.in_flight : 0;
}

static int bh_target_set(void *ctx, uint32_t limit)
{
	return bh_set_limit(ctx, limit);
}

/* A host-wide bulkhead: the host's gauges, and the limit moved only by the
 * process holding the controller role (src/shm/role.h); -EAGAIN tells
 * apply() that another process's controller moves it. */
static uint32_t host_target_in_flight(void *ctx)
{
	struct bh_gauges g;

	bh_gauges(ctx, &g);
	return (uint32_t)g.in_flight;
}

static int host_target_set(void *ctx, uint32_t limit)
{
	int r = bhs_role_take(ctx);

	return r ? r : bh_set_limit(ctx, limit);
}

/* Not the role's holder: another process's controller (or none, until
 * this one takes the free role) moves the limit. */
static bool host_target_follows(void *ctx)
{
	return !bhs_role_held(ctx);
}

/* A layer's handle (a cluster bulkhead's: the cap on its share). */
static int layer_target_set(void *ctx, uint32_t limit)
{
	struct bhi_layer *l = bhi_layer_of(ctx);

	return l->adapt_set(l, limit);
}

static uint32_t layer_target_limit(void *ctx)
{
	return bhi_layer_of(ctx)->adapt_limit(bhi_layer_of(ctx));
}

static struct bha_target target_of(bulkhead_t *bh)
{
	if (bhi_layer_of(bh))
		return (struct bha_target){ layer_target_set, layer_target_limit,
					    bh_target_in_flight, bh, NULL };
	if (bhi_is_host(bh))
		return (struct bha_target){ host_target_set, bh_target_limit,
					    host_target_in_flight, bh, host_target_follows };
	return (struct bha_target){ bh_target_set, bh_target_limit, bh_target_in_flight, bh,
				    NULL };
}

/* The sink is hooked in before attach applies the starting limit (so that
 * a second controller is refused before it moves anything); a sample that
 * arrives in between is dropped, or it could close a window while the
 * start is being applied. acquire: pairs with attach's release store. */
static void sink_fn(struct bhk_sink *k, uint64_t ns, int outcome)
{
	bh_adaptive_t *a = bhi_container_of(k, struct bh_adaptive, sink);

	if (atomic_load_explicit(&a->started, memory_order_acquire))
		bh_adaptive_sample(a, ns, (enum bh_outcome)outcome);
}

/* The automatic sources a config asks for: by default every one the
 * bulkhead has (hold times only with BH_TRACK_HOLD). */
static uint32_t sources(const struct bh_adaptive_config *cfg, const bulkhead_t *bh)
{
	uint32_t s = cfg ? cfg->sources : 0;

	if (s & BH_ADAPTIVE_SRC_MANUAL)
		return 0;
	if (s == 0)
		s = (bhi_tracks_hold(bh) ? BH_ADAPTIVE_SRC_HOLD : 0) |
		    BH_ADAPTIVE_SRC_URING | BH_ADAPTIVE_SRC_POOL;
	return (s & BH_ADAPTIVE_SRC_HOLD ? BHK_HOLD : 0) |
	       (s & BH_ADAPTIVE_SRC_URING ? BHK_URING : 0) | (s & BH_ADAPTIVE_SRC_POOL ? BHK_POOL : 0);
}

int bh_adaptive_attach(bulkhead_t *bh, const struct bh_adaptive_config *cfg,
		       bh_adaptive_t **out)
{
	struct bha_target t;
	bh_adaptive_t *a;
	uint32_t start_limit;
	int r;

	if (!bh || !out)
		return -EINVAL;
	/* A layer's handle whose layer has no target of its own: its limit is
	 * the layer's to move, not ours. */
	if (bhi_layer_of(bh) && !bhi_layer_of(bh)->adapt_set)
		return -EOPNOTSUPP;
	t = target_of(bh);
	start_limit = cfg && cfg->initial_limit ? cfg->initial_limit : t.limit(bh);
	if ((r = bha_create(cfg, &t, start_limit, &a)) < 0)
		return r;
	a->sink.fn = sink_fn;
	a->sink.sources = sources(cfg, bh);
	a->owner = bh;
	a->name = bh_name(bh);
	a->limit = t.limit(bh);
	if ((r = bhk_attach(bh, &a->sink)) < 0) {
		bha_destroy(a);
		return r;
	}
	/* Host-wide: the first controller on the host moves the limit, the
	 * others follow it until the role is free (role.h). Taken only once
	 * this handle's sink is ours: a refused attach (-EBUSY, -EINVAL) must
	 * not drop the role of the controller already attached here. */
	if (bhi_is_host(bh) && (r = bhs_role_take(bh)) < 0 && r != -EAGAIN) {
		bhk_detach(bh);
		bha_destroy(a);
		return r;
	}
	bha_start(a);
	/* release: the start's writes before any automatic sample's reads */
	atomic_store_explicit(&a->started, true, memory_order_release);
	*out = a;
	return 0;
}

/* A pool's admission bulkhead counts running and queued tasks; the pool
 * relies on it never admitting more than max_threads + queue_capacity. */
int bh_adaptive_attach_pool(bh_pool_t *pool, const struct bh_adaptive_config *cfg,
			    bh_adaptive_t **out)
{
	struct bh_adaptive_config c = { 0 };
	bulkhead_t *adm;
	uint32_t room, start;
	int r;

	if (!pool || !out || (r = bha_check_config(cfg)) < 0)
		return -EINVAL;
	if (cfg)
		c = *cfg;
	adm = bhi_pool_admission(pool, &room);
	if (c.max_limit > room || c.initial_limit > room)
		return -EINVAL;
	start = c.initial_limit ? c.initial_limit : room;
	if (!c.max_limit) {
		c.max_limit = bha_default_max(c.algo, start);
		c.max_limit = c.max_limit < room ? c.max_limit : room;
	}
	if (!c.min_limit)
		c.min_limit = bha_default_min(c.algo);
	c.min_limit = c.min_limit < c.max_limit ? c.min_limit : c.max_limit;
	if (!c.sources)
		c.sources = BH_ADAPTIVE_SRC_POOL;
	if ((r = bh_adaptive_attach(adm, &c, out)) == 0)
		(*out)->name = bh_pool_name(pool);
	return r;
}

/* The role goes before the hook: once the hook is cleared, a new attach on
 * the same handle may take the sink and, being the same handle, find the
 * role its own already; a drop after that would take it from the new
 * controller. Until the hook is cleared, an attach here is refused
 * (-EBUSY). Samples that still come in meanwhile find the closer's role
 * taken (try_close) and close nothing, so nothing takes the role again. */
void bh_adaptive_detach(bh_adaptive_t *a)
{
	if (!a)
		return;
	bha_become_closer(a); /* and never let go: no window closes any more */
	if (a->owner && bhi_is_host(a->owner))
		bhs_role_drop(a->owner); /* another process's controller may move it now */
	if (a->owner)
		bhk_detach(a->owner); /* no automatic sample is inside a any more */
	bha_destroy(a);
}
