/* Private to the limit algorithms (algo.c dispatches, published.c holds
 * the ports of Netflix's and Envoy's, own.c the library's own): the helpers
 * they share and each algorithm's two entry points, start (the first
 * verdict) and window (one closed window in, the next verdict out). */
#ifndef BH_ADAPTIVE_ALGO_H
#define BH_ADAPTIVE_ALGO_H

#include <stdint.h>

#include "bha.h"

#define MS (1000ull * 1000ull)
#define SEC (1000ull * MS)
#define NEVER UINT64_MAX

/* Defaults the dispatcher needs. */
#define ENVOY_INTERVAL_NS (60 * SEC)
#define OWN_MIN 2
#define OWN_INTERVAL_NS (10 * SEC)

static inline uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: deterministic for a given seed, good enough for jitter */
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [lo, hi). */
static inline double rng_uniform(uint64_t *s, double lo, double hi)
{
	return lo + (hi - lo) * (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

static inline uint32_t clamp_u32(double x, uint32_t lo, uint32_t hi)
{
	if (!(x >= lo)) /* NaN goes low too */
		return lo;
	if (x >= hi)
		return hi;
	return (uint32_t)x;
}

/* a + b, at most NEVER: a long configured interval must not wrap around. */
static inline uint64_t sat_add_ns(uint64_t a, uint64_t b)
{
	return a > NEVER - b ? NEVER : a + b;
}

/* v << s, at most NEVER: a backoff that doubles must not wrap to 0. */
static inline uint64_t sat_shl_ns(uint64_t v, unsigned s)
{
	return s >= 64 || v > (NEVER >> s) ? NEVER : v << s;
}

/* x ns as an integer, at most NEVER (a double past 2^64 has no uint64_t). */
static inline uint64_t ns_of(double x)
{
	return !(x > 0) ? 0 : x >= 18446744073709551616.0 ? NEVER : (uint64_t)x;
}

static inline double clamp_d(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

static inline uint64_t mean_all(const struct bha_window *w)
{
	uint64_t n = w->ok + w->dropped;

	return n ? (w->ok_sum_ns + w->drop_sum_ns) / n : 0;
}

/* Windows of fixed length that close with any sample (Netflix, Envoy). */
static inline void fixed_window(const struct bha_algo *g, uint64_t len, struct bha_verdict *v)
{
	v->window_ns = g->window_ns ? g->window_ns : len;
	v->window_max_ns = v->window_ns;
	v->min_samples = 0;
	v->max_samples = 0;
	v->probe_samples = 0;
}

static inline void set_limit(struct bha_verdict *v, uint32_t limit, uint32_t reason)
{
	if (limit != v->limit) {
		v->limit = limit;
		v->reason = reason;
	}
}

void bha_aimd_start(struct bha_algo *g, uint32_t start, struct bha_verdict *v);
void bha_aimd_window(struct bha_algo *g, const struct bha_window *w, struct bha_verdict *v);
void bha_vegas_start(struct bha_algo *g, uint32_t start, struct bha_verdict *v);
void bha_vegas_window(struct bha_algo *g, const struct bha_window *w, struct bha_verdict *v);
void bha_g2_start(struct bha_algo *g, uint32_t start, struct bha_verdict *v);
void bha_g2_window(struct bha_algo *g, const struct bha_window *w, struct bha_verdict *v);
void bha_envoy_start(struct bha_algo *g, uint32_t start, struct bha_verdict *v);
void bha_envoy_window(struct bha_algo *g, const struct bha_window *w, uint64_t now,
		      struct bha_verdict *v);
void bha_own_start(struct bha_algo *g, uint32_t start, struct bha_verdict *v);
void bha_own_window(struct bha_algo *g, const struct bha_window *w, uint64_t now,
		    struct bha_verdict *v);

#endif /* BH_ADAPTIVE_ALGO_H */
