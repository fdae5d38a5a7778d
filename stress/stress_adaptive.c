/*
 * stress_adaptive: worker threads call through one bulkhead whose limit an
 * adaptive controller moves, while a churn thread detaches the controller
 * and attaches a new one (another algorithm, other bounds) every few
 * milliseconds. Workers hold each permit for a random time and release it
 * (BH_TRACK_HOLD: each release that ends a hold is an automatic sample,
 * which races the detach), and feed a manual sample for each call to the
 * controller in force (under a read lock: the caller owns that pointer's
 * lifetime, as the API says).
 *
 * Invariants, counted outside the library:
 *
 *  - in flight never above the highest limit that can be in force (the
 *    bulkhead's starting limit or a ceiling some controller had);
 *  - in flight never above the limit in force while no controller is
 *    attached: the churn leaves about half its swaps a gap of 0.2-2 ms with
 *    none, where the limit stays put; once every call begun before the
 *    detach has ended (a generation count, as in stress/common.c), a call
 *    that took its permits inside the gap is checked against that limit
 *    exactly (the static ceiling above is loose: it is never below the
 *    thread count's reach);
 *  - the limit always within the bounds of the controllers that ran;
 *  - every manual sample counted exactly once: for each controller, what
 *    the callers fed it (OK, dropped, ignored) equals what it reports
 *    (ok + dropped + discarded, ignored), automatic samples aside — its
 *    sources are manual only on odd generations, where the equality is
 *    exact; with hold samples on (OK ones), its OK and dropped counts are
 *    at least what was fed and its ignored count still exact;
 *  - a detach never frees a controller a hook is inside (ASan, TSan) and
 *    never blocks once the hooks have left;
 *  - at the end: nothing in flight, every permit takeable once at the last
 *    limit, the limit and the bulkhead's stats agree.
 *
 * BH_STRESS_SECONDS, BH_STRESS_SEED, BH_STRESS_THREADS as for the others.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bulkhead.h"
#include "bulkhead/adaptive.h"

#define MAX_THREADS 16

static uint64_t seed;
static double seconds;
static unsigned nthreads;
static bulkhead_t *bh;
static uint32_t ceiling;     /* the highest limit that can be in force */
static uint32_t floor_seen;  /* the lowest floor any controller had */
static _Atomic int64_t inflight;
static _Atomic int stop, failed;
static _Atomic uint64_t calls, busy, timed_out;

/* Call generations and the gaps without a controller. A call registers in
 * active[call_gen & 1] for its whole length; a gap bumps it after the detach and
 * waits for the old generation to drain, then opens (strict_epoch odd) with
 * strict_limit, the limit the detach left; it closes (even) before the next
 * attach. */
static _Atomic uint64_t call_gen, active[2], strict_epoch;
static _Atomic uint32_t strict_limit;
static _Atomic uint64_t strict_checks, strict_at_limit;

/* The controller in force, its generation and what was fed to it. */
static pthread_rwlock_t ctl_mu = PTHREAD_RWLOCK_INITIALIZER;
static bh_adaptive_t *ctl;
static uint64_t ctl_gen;
static _Atomic uint64_t fed_ok, fed_dropped, fed_ignored;
static uint64_t controllers, exact_checks;
static uint64_t gaps;

static __attribute__((format(printf, 1, 2))) void fail(const char *fmt, ...)
{
	va_list ap;

	if (atomic_exchange(&failed, 1))
		return;
	printf("stress_adaptive: FAIL (seed=0x%016" PRIx64 "): ", seed);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t below(uint64_t *rng, uint64_t n)
{
	*rng = mix(*rng);
	return *rng % n;
}

static void pause_ns(uint64_t ns)
{
	struct timespec ts = { 0, (long)ns };

	nanosleep(&ts, NULL);
}

static uint32_t limit_now(void)
{
	struct bh_gauges g;

	bh_gauges(bh, &g);
	return (uint32_t)g.limit;
}

static void check_limit(void)
{
	uint32_t l = limit_now();

	if (l > ceiling || l < floor_seen)
		fail("limit %u outside [%u, %u]", l, floor_seen, ceiling);
}

/* ---- the workers ---------------------------------------------------------- */

static void sample(uint64_t *rng, uint64_t rtt)
{
	unsigned o = (unsigned)below(rng, 10);
	enum bh_outcome out = o < 7 ? BH_OK : o < 9 ? BH_DROPPED : BH_IGNORE;

	pthread_rwlock_rdlock(&ctl_mu);
	if (ctl) {
		bh_adaptive_sample(ctl, rtt, out);
		atomic_fetch_add_explicit(out == BH_OK	    ? &fed_ok
					  : out == BH_DROPPED ? &fed_dropped
							      : &fed_ignored,
					  1, memory_order_relaxed);
	}
	pthread_rwlock_unlock(&ctl_mu);
}

/* Dekker-style against the gap's gen bump then drain (seq_cst): either the
 * call sees the new generation and retries, or the gap waits for it. */
static uint64_t gen_enter(void)
{
	for (;;) {
		uint64_t g = atomic_load(&call_gen);

		atomic_fetch_add(&active[g & 1], 1);
		if (atomic_load(&call_gen) == g)
			return g;
		atomic_fetch_sub(&active[g & 1], 1);
	}
}

static void gen_exit(uint64_t g)
{
	atomic_fetch_sub(&active[g & 1], 1);
}

static void one_call(uint64_t *rng)
{
	uint64_t t0 = bh_now_ns(), held, g = gen_enter(), e0, e1;
	int r = bh_acquire(bh, 1, t0 + below(rng, 3) * BH_MSEC);
	int64_t now;

	if (r == -EBUSY || r == -ETIMEDOUT) {
		gen_exit(g);
		atomic_fetch_add(r == -EBUSY ? &busy : &timed_out, 1);
		if (r == -EBUSY)
			sched_yield(); /* leave the CPU to the holders */
		return;
	}
	if (r != 0) {
		gen_exit(g);
		fail("bh_acquire returned %d", r);
		return;
	}
	/* A gap open before the count and still open after it: every call
	 * counted began after the detach (older ones drained before it opened)
	 * and took its permits before the next attach, under one limit. */
	e0 = atomic_load(&strict_epoch);
	now = atomic_fetch_add(&inflight, 1) + 1;
	e1 = atomic_load(&strict_epoch);
	if (now > (int64_t)ceiling)
		fail("%" PRId64 " in flight, above every limit that can be in force (%u)", now,
		     ceiling);
	if ((e0 & 1) && e0 == e1) {
		uint32_t l = atomic_load(&strict_limit);

		if (now > (int64_t)l)
			fail("%" PRId64 " in flight, above the limit %u in force with no controller "
			     "attached", now, l);
		atomic_fetch_add_explicit(&strict_checks, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&strict_at_limit, now == (int64_t)l, memory_order_relaxed);
	}
	pause_ns(below(rng, 100) * 1000);
	atomic_fetch_sub(&inflight, 1);
	if ((r = bh_release(bh, 1)) != 0)
		fail("bh_release returned %d", r);
	gen_exit(g); /* before the sample: a gap may wait for it */
	held = bh_now_ns() - t0;
	sample(rng, held + below(rng, 2) * BH_MSEC);
	atomic_fetch_add(&calls, 1);
}

static void *worker(void *arg)
{
	uint64_t rng = mix(seed + (uintptr_t)arg);

	while (!atomic_load(&stop) && !atomic_load(&failed))
		one_call(&rng);
	return NULL;
}

/* ---- the churn ------------------------------------------------------------- */

/* What the controller being detached reports against what it was fed. */
static void check_counts(bh_adaptive_t *a, bool exact)
{
	struct bh_adaptive_stats s;
	uint64_t ok = atomic_load(&fed_ok), dr = atomic_load(&fed_dropped);
	uint64_t ig = atomic_load(&fed_ignored);

	bh_adaptive_stats(a, &s);
	if (s.limit < s.min_limit || s.limit > s.max_limit)
		fail("controller's limit %u outside its [%u, %u]", s.limit, s.min_limit,
		     s.max_limit);
	if (s.windowed > s.ok + s.dropped)
		fail("windows used %" PRIu64 " samples of %" PRIu64, s.windowed, s.ok + s.dropped);
	if (exact ? s.ok + s.dropped + s.discarded != ok + dr || s.ignored != ig
		  : s.ok + s.dropped + s.discarded < ok + dr || s.ignored != ig)
		fail("controller %" PRIu64 " counted ok %" PRIu64 " dropped %" PRIu64
		     " discarded %" PRIu64 " ignored %" PRIu64 "; fed ok %" PRIu64
		     " dropped %" PRIu64 " ignored %" PRIu64 "%s",
		     ctl_gen, s.ok, s.dropped, s.discarded, s.ignored, ok, dr, ig,
		     exact ? " (manual samples only: must be equal)" : "");
	exact_checks += exact;
}

static bh_adaptive_t *attach_one(uint64_t *rng, uint64_t gen)
{
	static const enum bh_adaptive_algo algos[] = {
		BH_ADAPTIVE_DEFAULT, BH_ADAPTIVE_AIMD, BH_ADAPTIVE_VEGAS,
		BH_ADAPTIVE_GRADIENT2, BH_ADAPTIVE_ENVOY,
	};
	struct bh_adaptive_config c = {
		.algo = algos[below(rng, 5)],
		.min_limit = 1 + (uint32_t)below(rng, 4),
		.max_limit = 8 + (uint32_t)below(rng, ceiling - 7),
		.sources = gen % 2 ? BH_ADAPTIVE_SRC_MANUAL : 0,
		.window_ns = below(rng, 2) ? 0 : (1 + below(rng, 5)) * BH_MSEC,
	};
	bh_adaptive_t *a;
	int r;

	if (c.min_limit < floor_seen)
		floor_seen = c.min_limit;
	if ((r = bh_adaptive_attach(bh, &c, &a)) != 0) {
		fail("bh_adaptive_attach returned %d", r);
		return NULL;
	}
	return a;
}

/* No controller for a while: the limit stays where the detach left it, and
 * calls that begin and take their permits in the gap are held to it. */
static void gap(uint64_t *rng)
{
	uint64_t g = atomic_load(&call_gen);
	uint32_t l = limit_now(), l2;

	atomic_store(&call_gen, g + 1);
	while (atomic_load(&active[g & 1]) != 0 && !atomic_load(&failed))
		pause_ns(20 * 1000);
	atomic_store(&strict_limit, l);
	atomic_fetch_add(&strict_epoch, 1); /* odd: open */
	pause_ns((200 + below(rng, 1800)) * 1000);
	atomic_fetch_add(&strict_epoch, 1); /* even: closed */
	if ((l2 = limit_now()) != l)
		fail("the limit moved from %u to %u with no controller attached", l, l2);
	gaps++;
}

static void swap_controller(uint64_t *rng)
{
	bh_adaptive_t *old, *a;

	pthread_rwlock_wrlock(&ctl_mu);
	old = ctl;
	if (old) {
		check_counts(old, ctl_gen % 2);
		bh_adaptive_detach(old); /* hold samples may be inside it now */
	}
	atomic_store(&fed_ok, 0);
	atomic_store(&fed_dropped, 0);
	atomic_store(&fed_ignored, 0);
	check_limit();
	if (below(rng, 2)) { /* a gap, with the callers' samples going nowhere */
		ctl = NULL;
		pthread_rwlock_unlock(&ctl_mu);
		gap(rng);
		pthread_rwlock_wrlock(&ctl_mu);
	}
	ctl_gen++;
	a = attach_one(rng, ctl_gen);
	ctl = a;
	controllers += a != NULL;
	pthread_rwlock_unlock(&ctl_mu);
}

static void *churn(void *arg)
{
	uint64_t rng = mix(seed ^ 0xc4u);

	(void)arg;
	while (!atomic_load(&stop) && !atomic_load(&failed)) {
		swap_controller(&rng);
		for (int i = 0; i < 4 && !atomic_load(&stop); i++) {
			pause_ns((50 + below(&rng, 500)) * 1000);
			check_limit();
		}
	}
	return NULL;
}

/* ---- the run ------------------------------------------------------------------- */

static void quiesce(void)
{
	struct bh_stats st;
	uint32_t l;

	pthread_rwlock_wrlock(&ctl_mu);
	if (ctl) {
		check_counts(ctl, ctl_gen % 2);
		bh_adaptive_detach(ctl);
		ctl = NULL;
	}
	pthread_rwlock_unlock(&ctl_mu);
	l = limit_now();
	bh_stats(bh, &st);
	if (st.in_flight || st.queued || atomic_load(&inflight))
		fail("at quiesce %llu in flight, %llu queued", (unsigned long long)st.in_flight,
		     (unsigned long long)st.queued);
	if (st.limit != l)
		fail("stats say limit %llu, gauges %u", (unsigned long long)st.limit, l);
	if (bh_try_acquire(bh, l) != 0 || bh_try_acquire(bh, 1) != -EBUSY ||
	    bh_release(bh, l) != 0)
		fail("not every permit is back exactly once at limit %u", l);
}

int main(void)
{
	const char *s = getenv("BH_STRESS_SEED");
	const char *sec = getenv("BH_STRESS_SECONDS");
	const char *thr = getenv("BH_STRESS_THREADS");
	struct bh_config cfg = { 0 };
	pthread_t tid[MAX_THREADS], ctid;
	uint64_t rng;
	int r;

	seed = s && *s ? strtoull(s, NULL, 0) : mix(bh_now_ns());
	seconds = sec && *sec ? atof(sec) : 3;
	nthreads = thr && *thr ? (unsigned)atoi(thr) : 6;
	nthreads = nthreads < 1 ? 1 : nthreads > MAX_THREADS ? MAX_THREADS : nthreads;
	rng = seed;
	cfg.max_concurrent = 8 + (uint32_t)below(&rng, 24);
	cfg.queue_capacity = (uint32_t)below(&rng, 16);
	cfg.flags = BH_TRACK_HOLD | (below(&rng, 2) ? BH_FAIR : 0);
	ceiling = cfg.max_concurrent;
	floor_seen = cfg.max_concurrent;
	printf("stress_adaptive: seed=0x%016" PRIx64 " seconds=%g (replay: BH_STRESS_SEED=0x%016" PRIx64
	       ")\n",
	       seed, seconds, seed);
	printf("stress_adaptive: %u threads, limit %u, queue %u, %s\n", nthreads,
	       cfg.max_concurrent, cfg.queue_capacity, cfg.flags & BH_FAIR ? "fair" : "unfair");
	fflush(stdout);
	if ((r = bh_create(&cfg, &bh)) != 0) {
		printf("stress_adaptive: FAIL bh_create returned %d\n", r);
		return 1;
	}
	for (unsigned i = 0; i < nthreads; i++)
		pthread_create(&tid[i], NULL, worker, (void *)(uintptr_t)i);
	pthread_create(&ctid, NULL, churn, NULL);
	for (uint64_t end = bh_now_ns() + (uint64_t)(seconds * 1e9);
	     bh_now_ns() < end && !atomic_load(&failed);)
		pause_ns(10 * BH_MSEC);
	atomic_store(&stop, 1);
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(tid[i], NULL);
	pthread_join(ctid, NULL);
	if (!atomic_load(&failed))
		quiesce();
	bh_destroy(bh);
	if (atomic_load(&failed))
		return 1;
	printf("stress_adaptive: PASS seed=0x%016" PRIx64 " controllers=%" PRIu64
	       " (counts checked exactly %" PRIu64 ") calls=%" PRIu64 " busy=%" PRIu64
	       " timed_out=%" PRIu64 " | checks: inflight<=%u limit in [%u, %u]"
	       " inflight<=limit with no controller %" PRIu64 " (at the limit %" PRIu64
	       ", gaps %" PRIu64 ")\n",
	       seed, controllers, exact_checks, atomic_load(&calls), atomic_load(&busy),
	       atomic_load(&timed_out), ceiling, floor_seen, ceiling,
	       atomic_load(&strict_checks), atomic_load(&strict_at_limit), gaps);
	return 0;
}
