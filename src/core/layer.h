/* Private to libbulkhead: what an optional layer built on the core's public
 * API may ask of the core itself. The cluster layer (src/cluster/) attaches
 * to it: its handle is an ordinary bulkhead whose admission must also
 * stop when a lease runs out, even if no thread of the layer has run since
 * (a process resumed after SIGSTOP), and whose bh_destroy must give the
 * lease back. The metrics exporter (src/metrics/) reads what a bulkhead
 * exports through it, never the bulkhead's fields; the adaptive controller
 * (src/adaptive/) hooks its sink in through it. The thread pool (src/pool/)
 * takes, counts and gives back its admission bulkhead's permits through it,
 * and the pool and the io_uring tracker (src/uring/) hand their latencies
 * to an attached sink through src/core/sample_hook.h, which is built on
 * what this file declares.
 *
 * An optional layer includes the public headers, src/lib/, this file and
 * src/core/sample_hook.h, never src/core/internal.h: struct bulkhead, the
 * word and the slots stay the core's to change (docs/design.md, "What a
 * layer may include"). What a layer needs of them is a hidden function
 * here, out of line, except the one load a completion path makes inline:
 * the sink pointer, at BHI_SINK_OFFSET.
 *
 * A plain bulkhead pays one flag test on its acquire fast path; releases
 * pay nothing. */
#ifndef BH_LAYER_H
#define BH_LAYER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bulkhead.h"

/* One extra series for the metrics export, per bulkhead. The name starts
 * with "bulkhead_" (the JSON key is the name without it and "_total"). */
struct bhi_layer_metric {
	const char *name, *type, *help; /* Prometheus family, "gauge"/"counter" */
	uint64_t value;
	int is_ns; /* value is nanoseconds: exported as seconds */
};
#define BHI_LAYER_METRICS_MAX 16

struct bhi_layer {
	/* Called first by bh_destroy, before the core frees anything. */
	void (*destroy)(struct bhi_layer *l);
	/* Fill up to BHI_LAYER_METRICS_MAX entries; return how many. */
	size_t (*metrics)(const struct bhi_layer *l, struct bhi_layer_metric *m);
	/* What an adaptive controller (src/adaptive/) moves on this handle
	 * instead of the core's limit, and reads back; NULL: the controller
	 * refuses the handle. */
	int (*adapt_set)(struct bhi_layer *l, uint32_t limit);
	uint32_t (*adapt_limit)(const struct bhi_layer *l);
};

/* Attach l to bh before bh is shared. From then on every admission (the
 * fast paths, queueing, grants to queued waiters) also needs the gate open:
 * bhi_coarse_ns() < the gate's time, which starts at 0 (shut). */
void bhi_layer_attach(bulkhead_t *bh, struct bhi_layer *l);
struct bhi_layer *bhi_layer_of(const bulkhead_t *bh);

/* Admission is allowed while bhi_coarse_ns() < until_ns (0: never,
 * BHI_GATE_OPEN: always). Opening serves waiters that now fit. The store is
 * relaxed: a thread that read the old value just before is like a thread
 * that was admitted just before, so callers that shut the gate must not
 * assume that nobody admits on the old value a moment later. */
#define BHI_GATE_OPEN UINT64_MAX
void bhi_gate_set(bulkhead_t *bh, uint64_t until_ns);

/* In a fork child, for a handle whose layer belongs to the parent: shut
 * the gate and close the bulkhead (every admission then fails with
 * -ESHUTDOWN), taking no lock. Only where no other thread can touch bh: a
 * pthread_atfork child handler, or a pool freeing its copy of its
 * admission bulkhead in a child (no call on the pool may run then). */
void bhi_close_inherited(bulkhead_t *bh);

/* CLOCK_MONOTONIC_COARSE in ns: never ahead of CLOCK_MONOTONIC, behind it
 * by about one tick, bhi_coarse_res_ns() (a layer allows for two). */
uint64_t bhi_coarse_ns(void);
uint64_t bhi_coarse_res_ns(void);

/* What a bulkhead was made with, for an exporter: whether it records hold
 * times (BH_TRACK_HOLD, so its hold histogram means something) and whether
 * it is host-wide (bh_shm_open, so its host-wide counters do). Both are
 * fixed before the bulkhead is shared. */
bool bhi_tracks_hold(const bulkhead_t *bh);
bool bhi_is_host(const bulkhead_t *bh);

/* ---- automatic samples (the core emits them: src/core/sample_hook.h) ---- */

enum bhk_source { BHK_HOLD = 1u << 0, BHK_URING = 1u << 1, BHK_POOL = 1u << 2 };
enum bhk_outcome { BHK_OK, BHK_DROPPED, BHK_IGNORE }; /* = enum bh_outcome */

struct bhk_sink {
	void (*fn)(struct bhk_sink *k, uint64_t ns, int outcome);
	uint32_t sources; /* enum bhk_source bits it wants */
};

/* Where struct bulkhead keeps its sink pointer, an _Atomic(struct bhk_sink *):
 * a layer tests for a sink inline on its completion path (bhk_attached in
 * sample_hook.h) without seeing struct bulkhead. It follows two uint64_t
 * and three uint32_t, so it is 32 with 8-byte pointers and 28 with 4-byte
 * ones; internal.h asserts it. */
#if UINTPTR_MAX > 0xffffffffu
#define BHI_SINK_OFFSET 32
#else
#define BHI_SINK_OFFSET 28
#endif

/* Hook k into bh: 0, or -EBUSY when another sink is attached. */
int bhk_attach(bulkhead_t *bh, struct bhk_sink *k);
/* Unhook bh's sink and wait until no hook is inside it. */
void bhk_detach(bulkhead_t *bh);

/* How many fork()s separate this process from the one that first asked
 * for the count (a pthread_atfork child handler counts them, registered
 * by the first bhk_attach or bhk_fork_watch). A sink's busy marks and its
 * closer's role carry the generation they were taken in: in a fork child,
 * those of the parent's threads, which do not exist there, are never
 * waited for. Read inline, one relaxed load (pairing with nothing: the
 * child's one thread bumped it), for a layer that checks it on every call
 * (the io_uring tracker). */
extern _Atomic uint32_t bhk_fork_gen __attribute__((visibility("hidden")));

static inline uint32_t bhk_fork_generation(void)
{
	return atomic_load_explicit(&bhk_fork_gen, memory_order_relaxed);
}

/* Start the count if nobody has yet, and return the generation now: a
 * layer that records it in a handle it makes tells a fork child's copy of
 * that handle by a generation that differs. */
uint32_t bhk_fork_watch(void);

/* ---- the thread index (src/core/tindex.c) --------------------------------- */

/* 0 = none yet, else index + 1; indices of exited threads are reused.
 * Initial-exec TLS keeps the fast path free of __tls_get_addr. */
extern __thread uint32_t bhi_tindex __attribute__((tls_model("initial-exec")));
extern __thread uint64_t bhi_tgen __attribute__((tls_model("initial-exec")));
uint32_t bhi_tindex_assign(void);
/* Indices run from 1 to this; a thread beyond it has none (bhi_tindex 0). */
#define BHI_TINDEX_MAX 4096

/* ---- pools (src/pool/) ------------------------------------------------------ */

/* What a pool asks of its admission bulkhead (a process-local one it made
 * itself). All out of line: only bhi_try_take is on a fast path, and it is
 * a call already. */

/* bh_try_acquire that does not count a refusal: for a caller (the pool's
 * admission) that may still succeed another way, and counts its own. */
int bhi_try_take(bulkhead_t *bh, uint32_t n);
/* Count one refusal, as bh_try_acquire's -EBUSY does, in the calling
 * thread's counter slot. */
void bhi_count_rejected(bulkhead_t *bh);
/* The refusals counted so far (bh_stats' rejected; relaxed: statistics). */
uint64_t bhi_rejected(const bulkhead_t *bh);
/* How many permits bh is over its limit now (0 or less: not over), as a
 * limit lowered below what is held leaves it (relaxed: a snapshot; the
 * caller acts on it under its own lock and may be a moment late). */
int64_t bhi_over_limit(const bulkhead_t *bh);

struct bh_pool;
/* A pool's admission bulkhead (running and queued tasks), and in *room the
 * most it may ever admit: max_threads + queue_capacity. */
bulkhead_t *bhi_pool_admission(const struct bh_pool *pool, uint32_t *room);

#endif /* BH_LAYER_H */
