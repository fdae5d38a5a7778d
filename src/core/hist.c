/* Log-linear latency histograms (layout in include/bulkhead.h). Recording is
 * one relaxed fetch_add on a bucket: lock-free, and nothing else orders
 * against it — histograms are statistics. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "internal.h"

#define SUB (1u << BH_HIST_SUB_BITS)
#define LAST (BH_HIST_BUCKETS - 1)

unsigned bh_hist_bucket(uint64_t ns)
{
	unsigned octave, sub;

	if (ns < (1ull << BH_HIST_MIN_SHIFT))
		return 0;
	if (ns >= (1ull << BH_HIST_MAX_SHIFT))
		return LAST;
	octave = 63u - (unsigned)__builtin_clzll(ns);
	sub = (unsigned)(ns >> (octave - BH_HIST_SUB_BITS)) & (SUB - 1);
	return 1 + (octave - BH_HIST_MIN_SHIFT) * SUB + sub;
}

void bh_hist_bounds(unsigned bucket, uint64_t *lower_ns, uint64_t *upper_ns)
{
	uint64_t lo, hi;

	if (bucket == 0) {
		lo = 0;
		hi = 1ull << BH_HIST_MIN_SHIFT;
	} else if (bucket >= LAST) {
		lo = 1ull << BH_HIST_MAX_SHIFT;
		hi = UINT64_MAX;
	} else {
		unsigned octave = BH_HIST_MIN_SHIFT + (bucket - 1) / SUB;
		uint64_t sub = (bucket - 1) % SUB, step = 1ull << (octave - BH_HIST_SUB_BITS);

		lo = (1ull << octave) + sub * step;
		hi = lo + step;
	}
	if (lower_ns)
		*lower_ns = lo;
	if (upper_ns)
		*upper_ns = hi;
}

void bh_hist_record(struct bh_hist *h, uint64_t ns)
{
	h->buckets[bh_hist_bucket(ns)]++;
	h->count++;
	h->sum_ns += ns;
}

int bh_hist_merge(struct bh_hist *dst, const struct bh_hist *src)
{
	if (!dst || !src)
		return -EINVAL;
	for (unsigned i = 0; i < BH_HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
	dst->count += src->count;
	dst->sum_ns += src->sum_ns;
	return 0;
}

/* The middle of the bucket holding the observation of rank ceil(q * count):
 * within half a bucket (3.2%) of that observation. The open-ended buckets
 * answer with their finite bound. A NaN q has no rank, and the clamp below
 * would let it through to the conversion, whose result is undefined: no
 * estimate, as for an empty histogram. */
uint64_t bh_hist_quantile(const struct bh_hist *h, double q)
{
	uint64_t rank, seen = 0, lo, hi;

	if (!h || h->count == 0 || isnan(q))
		return 0;
	q = q < 0 ? 0 : q > 1 ? 1 : q;
	rank = (uint64_t)(q * (double)h->count + 0.999999);
	rank = rank == 0 ? 1 : rank;
	for (unsigned i = 0; i < BH_HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen < rank)
			continue;
		bh_hist_bounds(i, &lo, &hi);
		if (i == 0)
			return hi / 2;
		if (i == LAST)
			return lo;
		return lo + (hi - lo) / 2;
	}
	return 0; /* count and buckets disagree: not from a snapshot */
}

void bhi_hist_add(struct bhi_hist *h, uint64_t ns)
{
	atomic_fetch_add_explicit(&h->buckets[bh_hist_bucket(ns)], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

/* count is derived from the buckets so a snapshot is self-consistent. */
void bhi_hist_read(const struct bhi_hist *h, struct bh_hist *out)
{
	out->count = 0;
	for (unsigned i = 0; i < BH_HIST_BUCKETS; i++) {
		out->buckets[i] = atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
		out->count += out->buckets[i];
	}
	out->sum_ns = atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
}
