/* The observers: per-thread counters, hold and wait times, the gauges and
 * bh_stats. Nothing here decides anything; the protocol (word.c, queue.c)
 * reports to these and reads none of their fields. */
#include <errno.h>
#include <string.h>

#include "internal.h"
#include "lib/hold.h"
#include "observe.h"
#include "word.h"
#include "sample_hook.h"
#include "shm/dispatch.h"

/* ---- counters ------------------------------------------------------------ */

/* acquire: pairs with the acq_rel CAS that last changed the word, so a
 * test that reads it sees what happened before that change. */
uint64_t bhi_word(const bulkhead_t *bh)
{
	return atomic_load_explicit(&((struct bulkhead *)bh)->word, memory_order_acquire);
}

uint64_t bhi_counter(const struct bulkhead *bh, unsigned c)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i <= bh->nslots; i++)
		sum += atomic_load_explicit(&((struct bulkhead *)bh)->slots[i].c[c],
					    memory_order_acquire);
	return sum;
}

void bhi_count_slow(struct bulkhead *bh, unsigned c, uint64_t v)
{
	uint32_t t = bhi_tindex ? bhi_tindex : bhi_tindex_assign();

	if (bh->flags & BH_NO_STATS)
		return;
	if (t - 1u < bh->nslots) {
		bhi_count_n(bh, c, v);
		return;
	}
	/* More live threads than slots: share the last one, atomically.
	 * release: as bhi_slot_add's store. */
	atomic_fetch_add_explicit(&bh->slots[bh->nslots].c[c], v, memory_order_release);
}

/* Successful releases (calls), derived: every permit taken and not held now
 * was given back, by a release call of n permits or by a cancelled grant.
 * In permits,
 *
 *   taken = ACQUIRED + TAKEN_EXTRA + granted - grants_claimed
 *   given = taken - held - grants_returned
 *   released = given - GIVEN_EXTRA
 *
 * (a grant is a take its waiter has not counted yet). Read in an order that
 * can only undercount: what adds is counted after the CAS that took the
 * permits, so it is read before the word (a take seen is a take held);
 * what subtracts is counted before the CAS that gave them back, or before
 * the take that replaces it (claimed), so it is read after both. A call in
 * flight shows up as a release too few, never one too many, and the
 * highest result reported so far is the floor of the next: monotonic, and
 * exact once nobody is between a CAS and its count. */
static uint64_t bhi_released(const struct bulkhead *bh)
{
	struct bulkhead *m = (struct bulkhead *)bh;
	uint64_t seen, got;
	int64_t given;

	if (bh->flags & BH_NO_STATS)
		return 0;
	/* acquire, all: pair with the release of each count (and, for the
	 * word, of every CAS of it) */
	given = (int64_t)(bhi_counter(bh, BHI_ACQUIRED) + bhi_counter(bh, BHI_TAKEN_EXTRA));
	given += (int64_t)atomic_load_explicit(&m->granted, memory_order_acquire);
	given -= w_held(atomic_load_explicit(&m->word, memory_order_acquire));
	given -= (int64_t)bhi_counter(bh, BHI_GIVEN_EXTRA);
	given -= (int64_t)atomic_load_explicit(&m->grants_returned, memory_order_acquire);
	given -= (int64_t)atomic_load_explicit(&m->grants_claimed, memory_order_acquire);
	got = given > 0 ? (uint64_t)given : 0;
	seen = atomic_load_explicit(&m->released_seen, memory_order_relaxed);
	/* relaxed: a maximum of numbers, not a publication */
	while (got > seen && !atomic_compare_exchange_weak_explicit(&m->released_seen, &seen, got,
								     memory_order_relaxed,
								     memory_order_relaxed))
		;
	return got > seen ? got : seen;
}

int bhi_over_release(struct bulkhead *bh)
{
	atomic_fetch_add_explicit(&bh->over_released, 1, memory_order_relaxed);
	return -EOVERFLOW;
}

/* The pool's (layer.h): its admission bulkhead's refusals, counted where the
 * pool decides them, and read for bh_pool_stats. */
void bhi_count_rejected(bulkhead_t *bh)
{
	bhi_count(bh, BHI_REJECTED);
}

uint64_t bhi_rejected(const bulkhead_t *bh)
{
	return bhi_counter(bh, BHI_REJECTED);
}

/* relaxed: a snapshot the pool acts on under its own lock (layer.h) */
int64_t bhi_over_limit(const bulkhead_t *bh)
{
	return -w_avail(atomic_load_explicit(&((struct bulkhead *)bh)->word, memory_order_relaxed));
}

/* ---- automatic samples (the protocol is in sample_hook.h) ------------------ */

/* The calling thread's slot, or the shared one. */
static struct bhi_slot *bhk_busy_slot(struct bulkhead *bh)
{
	uint32_t t = bhi_tindex ? bhi_tindex : bhi_tindex_assign();

	return &bh->slots[t - 1u < bh->nslots ? t - 1u : bh->nslots];
}

BHI_COLD void bhk_emit_slow(bulkhead_t *bh, unsigned src, uint64_t ns, int outcome)
{
	_Atomic uint64_t *mark = &bhk_busy_slot(bh)->sink_mark;
	uint64_t gen = (uint64_t)bhk_fork_generation() << 32, m, nm;
	struct bhk_sink *k;

	/* seq_cst, the mark and the load: with bhk_detach's clear and its load
	 * of our slot, one single order, in which either we see NULL or detach
	 * sees us busy. An older generation's count is dropped (internal.h). */
	m = atomic_load_explicit(mark, memory_order_relaxed);
	do
		nm = (m & ~(uint64_t)UINT32_MAX) == gen ? m + 1 : gen + 1;
	while (!atomic_compare_exchange_weak_explicit(mark, &m, nm, memory_order_seq_cst,
						     memory_order_relaxed));
	k = atomic_load_explicit(&bh->sink, memory_order_seq_cst);
	if (k && (k->sources & src))
		k->fn(k, ns, outcome);
	/* release: our last use of k happens before detach's load sees 0 */
	atomic_fetch_sub_explicit(mark, 1, memory_order_release);
}

/* ---- hold times (BH_TRACK_HOLD) -------------------------------------------- */

static void hold_add(struct bulkhead *bh, unsigned shard, uint64_t ns)
{
	bhi_hist_add(&bh->hold[shard % BHI_HOLD_SHARDS], ns);
}

/* This thread's hold record (every thread with an index has one, slot or
 * not); NULL for a thread beyond BHI_TINDEX_MAX, whose holds go unmeasured. */
static struct bhi_hold *my_hold(struct bulkhead *bh)
{
	if (!bhi_tindex && bhi_tindex_assign() == UINT32_MAX)
		return NULL;
	return bhi_hold_mine(&bh->holds[bhi_tindex - 1u], bhi_tgen);
}

/* A thread's hold begins when it goes from no permits to some (the rules
 * are lib/hold.h's). */
void bhi_hold_begin(struct bulkhead *bh, uint32_t n)
{
	struct bhi_hold *h = my_hold(bh);

	if (h)
		bhi_hold_take(h, n, (uint64_t)w_held(load_word(bh)), bh->sync);
}

/* ...and ends when it holds none again. */
void bhi_hold_end(struct bulkhead *bh, uint32_t n)
{
	struct bhi_hold *h = my_hold(bh);
	uint64_t ns;

	if (h && bhi_hold_give(h, n, bh->sync, &ns)) {
		hold_add(bh, bhi_tindex, ns);
		bhk_emit(bh, BHK_HOLD, ns, BHK_OK); /* an adaptive sample, if one listens */
	}
}

void bh_record_hold(bulkhead_t *bh, uint64_t ns)
{
	if (bh->ext)
		bhs_record_hold(bh, ns);
	else if (bh->hold)
		hold_add(bh, bhi_tindex, ns);
	bhk_emit(bh, BHK_HOLD, ns, BHK_OK);
}


void bhi_record_wait(struct bulkhead *bh, uint64_t enqueued_ns, int result)
{
	uint64_t ns = bhi_sync_now(bh->sync) - enqueued_ns;

	bhi_hist_add(result == 0 ? &bh->wait : &bh->wait_failed, ns);
}

/* ---- gauges and stats ------------------------------------------------------ */

/* The gauges from one load of the word. acquire: pairs with the acq_rel CAS
 * that last changed it, so whatever the caller does on seeing, say, nothing
 * in flight comes after the release that made it so. */
static struct bh_gauges gauges_now(const struct bulkhead *bh)
{
	uint64_t w = atomic_load_explicit(&((struct bulkhead *)bh)->word, memory_order_acquire);

	return (struct bh_gauges){
		.limit = w_limit(w),
		.in_flight = (uint64_t)w_held(w),
		.queued = w_nq(w),
	};
}

int bh_gauges(const bulkhead_t *bh, struct bh_gauges *out)
{
	if (!bh || !out)
		return -EINVAL;
	if (bh->ext) {
		bhs_gauges(bh, &out->limit, &out->in_flight, &out->queued);
		return 0;
	}
	*out = gauges_now(bh);
	return 0;
}

int bh_stats(const bulkhead_t *bh, struct bh_stats *out)
{
	struct bh_gauges g;

	if (!bh || !out)
		return -EINVAL;
	if (bh->ext) {
		bhs_stats(bh, out);
		return 0;
	}
	g = gauges_now(bh);
	memset(out, 0, sizeof(*out));
	out->limit = g.limit;
	out->in_flight = g.in_flight;
	out->queued = g.queued;
	out->acquired = bhi_counter(bh, BHI_ACQUIRED);
	out->released = bhi_released(bh);
	out->rejected = bhi_counter(bh, BHI_REJECTED);
	out->timed_out = atomic_load_explicit(&bh->timed_out, memory_order_relaxed);
	out->cancelled = atomic_load_explicit(&bh->cancelled, memory_order_relaxed);
	out->over_released = atomic_load_explicit(&bh->over_released, memory_order_relaxed);
	bhi_hist_read(&bh->wait, &out->wait);
	bhi_hist_read(&bh->wait_failed, &out->wait_failed);
	for (unsigned i = 0; bh->hold && i < BHI_HOLD_SHARDS; i++) {
		struct bh_hist shard;

		bhi_hist_read(&bh->hold[i], &shard);
		bh_hist_merge(&out->hold, &shard);
	}
	return 0;
}

/* For bh_stats@LIBBULKHEAD_0.1 (src/core/compat_0_1.c): growth is append-only,
 * so an older layout is a prefix of the current one. */
int bhi_stats_prefix(const bulkhead_t *bh, void *out, size_t size)
{
	struct bh_stats st;
	int r = bh_stats(bh, &st);

	if (r == 0)
		memcpy(out, &st, size < sizeof(st) ? size : sizeof(st));
	return r;
}
