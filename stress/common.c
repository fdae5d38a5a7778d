/* The stress harness (see common.h): run parameters, failure reports, the
 * checked acquire/release, the shadow FIFO fed by the core's observers, the
 * fault-injecting wait/wake, and the lost-wakeup watchdog. */
#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define ST_SANITIZED 1
#endif
#ifdef __has_feature
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define ST_SANITIZED 1
#endif
#endif
#ifndef ST_SANITIZED
#define ST_SANITIZED 0
#endif

struct st_run st;

static _Atomic int st_failed;
#define ST_MAX_BH 16
static struct st_bh *_Atomic st_all[ST_MAX_BH];

/* What this thread holds, so a failure report never deadlocks on it. */
static __thread struct st_bh *held_core, *held_shadow;
/* The caller's shadow entry while it is inside an acquire: the queued
 * observer runs on the caller's own thread and claims it. */
static __thread struct st_ent *pending;
static __thread bool cancellable;
static __thread uint32_t holding;

enum { SE_NONE, SE_QUEUED, SE_GRANTED, SE_LEFT };

struct st_ent {
	struct st_bh *sb;
	const struct bh_qlink *l;
	uint64_t ticket, queued_ns, granted_ns;
	uint32_t n;
	int state;
	struct st_ent *next, *prev; /* on sb->shadow or sb->granted */
};

BHI_LIST_OPS(st_ents, struct st_ent, next, prev)

/* ---- the run ------------------------------------------------------------ */

static double env_double(const char *k, double def)
{
	const char *v = getenv(k);
	char *end;
	double d;

	if (!v || !*v)
		return def;
	d = strtod(v, &end);
	return *end || d < 0 ? def : d;
}

static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void st_init(const char *name)
{
	const char *seed = getenv("BH_STRESS_SEED");
	double scale = ST_SANITIZED ? 4.0 : 1.0;

	st.name = name;
	st.sanitized = ST_SANITIZED;
	st.seconds = env_double("BH_STRESS_SECONDS", 3.0);
	st.threads = (unsigned)env_double("BH_STRESS_THREADS", 0);
	st.watchdog_ns = (uint64_t)(env_double("BH_STRESS_WATCHDOG_MS", 1000 * scale) * 1e6);
	st.slack_ns = (uint64_t)(env_double("BH_STRESS_SLACK_MS", 250 * scale) * 1e6);
	st.quiesce_ns = (uint64_t)(env_double("BH_STRESS_QUIESCE_S", 30 * scale) * 1e9);
	if (seed && *seed)
		st.seed = strtoull(seed, NULL, 0);
	else
		st.seed = mix64(bh_now_ns() ^ ((uint64_t)getpid() << 32));
	st.start_ns = bh_now_ns();
	st.end_ns = st.start_ns + (uint64_t)(st.seconds * 1e9);
	printf("%s: seed=0x%016" PRIx64 " seconds=%g%s (replay: BH_STRESS_SEED=0x%016" PRIx64
	       ")\n",
	       name, st.seed, st.seconds, st.sanitized ? " sanitized" : "", st.seed);
	fflush(stdout);
}

bool st_running(void)
{
	return bh_now_ns() < st.end_ns;
}

double st_elapsed(void)
{
	return (double)(bh_now_ns() - st.start_ns) / 1e9;
}

void st_sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / BH_SEC), .tv_nsec = (long)(ns % BH_SEC) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void st_spin_until(uint64_t t)
{
	while (bh_now_ns() < t)
		bhi_cpu_relax();
}

void st_sharp_timers(void)
{
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
}

static bool lock_within(pthread_mutex_t *m, uint64_t ns)
{
	uint64_t end = bh_now_ns() + ns;

	while (pthread_mutex_trylock(m) != 0) {
		if (bh_now_ns() > end)
			return false;
		sched_yield();
	}
	return true;
}

static const char *kind_name(uint32_t kind)
{
	return kind == 1 ? "sync" : kind == 2 ? "async" : "?";
}

static struct st_ent *shadow_find(struct st_bh *sb, const struct bh_qlink *l)
{
	struct st_ent *e;

	bhi_list_for_each(e, &sb->shadow, st_ents)
		if (e->l == l)
			return e;
	return NULL;
}

static void dump_bh(struct st_bh *sb)
{
	struct bulkhead *bh = sb->bh;
	bool core = held_core == sb || lock_within(&bh->lock, 200 * BH_MSEC);
	bool shadow = held_shadow == sb || lock_within(&sb->slock, 200 * BH_MSEC);
	uint64_t w = bhi_word(bh), now = bh_now_ns();
	unsigned i = 0;

	fprintf(stderr,
		"  [%s] word=0x%016" PRIx64 " avail=%" PRId64 " limit=%u queued=%u%s%s%s"
		" | callers hold %" PRId64 ", ceiling %u, gen %" PRIu64 "%s\n",
		sb->label, w, w_avail(w), w_limit(w), w_nq(w), w & W_STARVING ? " STARVING" : "",
		w & W_WOKEN ? " WOKEN" : "", w & W_CLOSED ? " CLOSED" : "",
		atomic_load(&sb->inflight), atomic_load(&sb->ceiling), atomic_load(&sb->gen),
		core ? "" : " (core lock busy: no queue dump)");
	for (const struct bh_qlink *l = core ? bh->queue.first : NULL; l && i < 64;
	     l = l->next, i++) {
		struct st_ent *e = shadow ? shadow_find(sb, l) : NULL;

		fprintf(stderr, "    queue[%u] node=%p n=%u %s waited %.3f ms ticket=%" PRIu64 "\n",
			i, (const void *)l, l->n, kind_name(l->kind),
			(double)(now - l->enqueued_ns) / 1e6, e ? e->ticket : 0);
	}
	i = 0;
	for (struct st_ent *e = shadow ? sb->shadow.first : NULL; e && i < 64; e = e->next, i++)
		fprintf(stderr, "    shadow ticket=%" PRIu64 " n=%u node=%p queued %.3f ms ago\n",
			e->ticket, e->n, (const void *)e->l, (double)(now - e->queued_ns) / 1e6);
	i = 0;
	for (struct st_ent *e = shadow ? sb->granted.first : NULL; e && i < 64; e = e->next, i++)
		fprintf(stderr, "    granted ticket=%" PRIu64 " n=%u node=%p %.3f ms ago, owner "
			"not back yet\n", e->ticket, e->n, (const void *)e->l,
			(double)(now - e->granted_ns) / 1e6);
	if (shadow && held_shadow != sb)
		pthread_mutex_unlock(&sb->slock);
	if (core && held_core != sb)
		pthread_mutex_unlock(&bh->lock);
}

void st_fail(const char *fmt, ...)
{
	va_list ap;

	if (atomic_exchange(&st_failed, 1)) {
		for (;;) /* another thread is reporting and will exit */
			pause();
	}
	fflush(stdout);
	fprintf(stderr, "%s: FAIL after %.3f s (seed=0x%016" PRIx64 "; replay: BH_STRESS_SEED=0x%016"
		PRIx64 "): ", st.name, st_elapsed(), st.seed, st.seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	for (int i = 0; i < ST_MAX_BH; i++) {
		struct st_bh *sb = atomic_load(&st_all[i]);

		if (sb)
			dump_bh(sb);
	}
	fflush(stderr);
	_exit(1);
}

void st_pass(const char *fmt, ...)
{
	va_list ap;

	printf("%s: PASS seed=0x%016" PRIx64 " %.1fs ", st.name, st.seed, st_elapsed());
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* ---- random --------------------------------------------------------------- */

void st_rng_init(struct st_rng *r, uint64_t stream)
{
	r->s = mix64(st.seed ^ mix64(stream));
}

uint64_t st_next(struct st_rng *r)
{
	r->s += 0x9e3779b97f4a7c15ull;
	return mix64(r->s);
}

uint32_t st_below(struct st_rng *r, uint32_t bound)
{
	return bound ? (uint32_t)(((st_next(r) >> 32) * bound) >> 32) : 0;
}

bool st_chance(struct st_rng *r, uint32_t per_mille)
{
	return st_below(r, 1000) < per_mille;
}

/* ---- futex helpers for the harness's own waits ------------------------------ */

static void futex_wait_until(_Atomic uint32_t *word, uint32_t expect, uint64_t deadline)
{
	struct timespec ts = { .tv_sec = (time_t)(deadline / BH_SEC),
			       .tv_nsec = (long)(deadline % BH_SEC) };

	syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expect,
		deadline == BH_FOREVER ? NULL : &ts, NULL, FUTEX_BITSET_MATCH_ANY);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1);
}

/* ---- the wrapped wait/wake: counting, faults, observers --------------------- */

#define RECENT 64
static _Atomic uint32_t *_Atomic recent_words[RECENT];
static _Atomic unsigned recent_pos;
static __thread struct st_rng fault_rng;
static __thread bool fault_rng_ready;

static struct st_rng *frng(void)
{
	if (!fault_rng_ready) {
		st_rng_init(&fault_rng, (uint64_t)(uintptr_t)&fault_rng ^ 0xfa17);
		fault_rng_ready = true;
	}
	return &fault_rng;
}

static void hit(struct st_bh *sb, enum st_fault f)
{
	atomic_fetch_add_explicit(&sb->faults_hit[f], 1, memory_order_relaxed);
}

/* An injected early return, or 1 to really wait. */
static int inject_wait(struct st_bh *sb)
{
	struct st_rng *r = frng();
	uint32_t x = st_below(r, 1000);

	if (x < sb->faults.spurious) {
		hit(sb, SF_SPURIOUS);
		return 0;
	}
	x -= sb->faults.spurious;
	if (x < sb->faults.eintr) {
		hit(sb, SF_EINTR);
		return -EINTR;
	}
	x -= sb->faults.eintr;
	if (x < sb->faults.eagain) {
		hit(sb, SF_EAGAIN);
		return -EAGAIN;
	}
	if (st_chance(r, sb->faults.delay)) {
		hit(sb, SF_DELAY);
		sched_yield();
	}
	return 1;
}

static int st_wait(void *ctx, enum bhi_wait_kind kind, _Atomic uint32_t *word, uint32_t expect,
		   uint64_t deadline)
{
	struct st_bh *sb = ctx;
	unsigned pos = atomic_fetch_add_explicit(&recent_pos, 1, memory_order_relaxed);
	int r;

	atomic_store_explicit(&recent_words[pos % RECENT], word, memory_order_relaxed);
	if (sb->faulty) {
		r = inject_wait(sb);
		if (r != 1)
			return r;
	}
	r = bhi_sync_wait(&bhi_futex_ops, kind, word, expect, deadline);
	atomic_fetch_add_explicit(&sb->wait_ret[r == 0 ? SW_OK : r == -EINTR ? SW_EINTR :
						r == -EAGAIN ? SW_EAGAIN :
						r == -ETIMEDOUT ? SW_ETIMEDOUT : SW_OTHER],
				  1, memory_order_relaxed);
	if (r == 0 && sb->faulty && st_chance(frng(), sb->faults.relabel)) {
		hit(sb, SF_RELABEL);
		r = -EINTR;
	}
	if (r == -ETIMEDOUT && bh_now_ns() < deadline)
		st_fail("the kernel's futex timed out before the deadline");
	return r;
}

static void st_wake(void *ctx, _Atomic uint32_t *word, bool all)
{
	struct st_bh *sb = ctx;

	if (sb->faulty && st_chance(frng(), sb->faults.wake_delay)) {
		hit(sb, SF_WAKE_DELAY);
		sched_yield();
	}
	bhi_sync_wake(&bhi_futex_ops, word, all);
	if (sb->faulty && st_chance(frng(), sb->faults.wake_extra)) {
		_Atomic uint32_t *other = atomic_load_explicit(
			&recent_words[st_below(frng(), RECENT)], memory_order_relaxed);

		/* A stale address is harmless: at worst it wakes whoever
		 * sleeps there now, which is exactly a spurious wakeup. */
		if (other) {
			hit(sb, SF_WAKE_EXTRA);
			bhi_sync_wake(&bhi_futex_ops, other, false);
		}
	}
}

void st_wake_random(struct st_rng *rng)
{
	_Atomic uint32_t *w = atomic_load_explicit(&recent_words[st_below(rng, RECENT)],
						   memory_order_relaxed);

	if (w)
		bhi_sync_wake(&bhi_futex_ops, w, false);
}

static uint64_t st_now(void *ctx)
{
	(void)ctx;
	return bh_now_ns();
}

static bool in_real_queue(struct st_bh *sb, const struct bh_qlink *l)
{
	for (const struct bh_qlink *q = sb->bh->queue.first; q; q = q->next)
		if (q == l)
			return true;
	return false;
}

static void shadow_unlink(struct st_bh *sb, struct st_ent *e)
{
	st_ents_del(&sb->shadow, e);
	sb->nshadow--;
}

static void shadow_lock(struct st_bh *sb)
{
	pthread_mutex_lock(&sb->slock);
	held_shadow = sb;
}

static void shadow_unlock(struct st_bh *sb)
{
	held_shadow = NULL;
	pthread_mutex_unlock(&sb->slock);
}

/* Under the core lock: a node joined. It must be the caller's, at the tail. */
static void on_queued(void *ctx, const struct bh_qlink *l)
{
	struct st_bh *sb = ctx;
	struct st_ent *e = pending;

	held_core = sb;
	shadow_lock(sb);
	if (!e || e->sb != sb || e->state != SE_NONE)
		st_fail("a node joined the queue on a thread that is not acquiring from it");
	if (sb->bh->queue.last != l)
		st_fail("a node joined the queue somewhere other than the tail");
	if (l->n != e->n)
		st_fail("a node for %u permits joined for a caller who asked for %u", l->n, e->n);
	if (shadow_find(sb, l))
		st_fail("node %p joined the queue twice", (const void *)l);
	e->l = l;
	e->ticket = ++sb->tickets;
	e->queued_ns = bh_now_ns();
	e->state = SE_QUEUED;
	st_ents_add_tail(&sb->shadow, e);
	sb->nshadow++;
	shadow_unlock(sb);
	held_core = NULL;
}

/* The real queue must be a subsequence of the shadow (arrival order). */
static void check_order(struct st_bh *sb)
{
	struct st_ent *e = st_ents_first(&sb->shadow);

	for (const struct bh_qlink *q = sb->bh->queue.first; q; q = q->next) {
		while (e && e->l != q)
			e = e->next;
		if (!e)
			st_fail("the queue is out of arrival order or holds node %p nobody queued",
				(const void *)q);
		e = e->next;
	}
}

/* Under the core lock: node l left the queue holding its permits. Nobody
 * who arrived before it may still be queued. */
static void on_granted(void *ctx, const struct bh_qlink *l)
{
	struct st_bh *sb = ctx;
	struct st_ent *e;

	held_core = sb;
	shadow_lock(sb);
	e = shadow_find(sb, l);
	if (!e)
		st_fail("permits were granted to node %p, which is not queued (it left, or "
			"never joined)", (const void *)l);
	if (in_real_queue(sb, l))
		st_fail("node %p was granted but is still linked in the queue", (const void *)l);
	for (struct st_ent *p = st_ents_first(&sb->shadow); p != e; p = p->next)
		if (in_real_queue(sb, p->l))
			st_fail("FIFO: ticket %" PRIu64 " (n=%u) was granted while the older ticket %"
				PRIu64 " (n=%u) is still queued", e->ticket, e->n, p->ticket, p->n);
	check_order(sb);
	e->state = SE_GRANTED;
	shadow_unlink(sb, e);
	e->granted_ns = bh_now_ns();
	st_ents_add_head(&sb->granted, e);
	atomic_fetch_add_explicit(&sb->checks[SC_FIFO], 1, memory_order_relaxed);
	shadow_unlock(sb);
	held_core = NULL;
}

/* ---- checked bulkheads ----------------------------------------------------- */

static void register_bh(struct st_bh *sb)
{
	for (int i = 0; i < ST_MAX_BH; i++) {
		struct st_bh *none = NULL;

		if (atomic_compare_exchange_strong(&st_all[i], &none, sb))
			return;
	}
	st_fail("more than %d checked bulkheads at once", ST_MAX_BH);
}

static void unregister_bh(struct st_bh *sb)
{
	for (int i = 0; i < ST_MAX_BH; i++) {
		struct st_bh *me = sb;

		if (atomic_compare_exchange_strong(&st_all[i], &me, NULL))
			return;
	}
}

void st_bh_init(struct st_bh *sb, const char *label, const struct bh_config *cfg,
		const struct st_faults *faults, uint64_t spin_ns, uint64_t starve_ns)
{
	int r;

	memset(sb, 0, sizeof(*sb));
	snprintf(sb->label, sizeof(sb->label), "%s", label);
	sb->cfg = *cfg;
	r = bh_create(cfg, &sb->bh);
	if (r != 0)
		st_fail("bh_create(%s) = %d", label, r);
	if (faults) {
		sb->faults = *faults;
		sb->faulty = true;
	}
	pthread_mutex_init(&sb->slock, NULL);
	sb->exclusive = cfg->max_concurrent == 1;
	atomic_init(&sb->ceiling, cfg->max_concurrent);
	atomic_init(&sb->hist[0], cfg->max_concurrent);
	sb->ops = (struct bhi_sync_ops){
		.wait = st_wait,
		.wake = st_wake,
		.now = st_now,
		.ctx = sb,
	};
	sb->obs = (struct bhi_queue_obs){
		.queued = on_queued,
		.granted = on_granted,
		.ctx = sb,
	};
	bhi_set_sync_ops(sb->bh, &sb->ops);
	bhi_set_queue_obs(sb->bh, &sb->obs);
	bhi_set_spin_ns(sb->bh, spin_ns); /* installing ops turned it off */
	if (starve_ns)
		bhi_set_starve_ns(sb->bh, starve_ns);
	register_bh(sb);
}

void st_bh_describe(const struct st_bh *sb, char *buf, size_t len)
{
	char q[16];

	if (sb->cfg.queue_capacity == BH_QUEUE_UNBOUNDED)
		snprintf(q, sizeof(q), "unbounded");
	else
		snprintf(q, sizeof(q), "%u", sb->cfg.queue_capacity);
	snprintf(buf, len, "%s(limit=%u queue=%s %s%s)", sb->label, sb->cfg.max_concurrent, q,
		 sb->cfg.flags & BH_FAIR ? "fair" : "unfair", sb->faulty ? " faults" : "");
}

static void expect_eq(struct st_bh *sb, const char *what, uint64_t lib, uint64_t seen)
{
	if (lib != seen)
		st_fail("[%s] stats: %s is %" PRIu64 " but the callers saw %" PRIu64, sb->label, what,
			lib, seen);
}

static void expect_ret(struct st_bh *sb, const char *call, int got, int want)
{
	if (got != want)
		st_fail("[%s] quiesced: %s returned %d, expected %d", sb->label, call, got, want);
}

static uint64_t seen(struct st_bh *sb, enum st_outcome o)
{
	return atomic_load(&sb->outcome[o]);
}

/* Everything stopped: no permit lost or created, and the stats add up. */
static void quiesce(struct st_bh *sb)
{
	uint32_t limit = atomic_load(&sb->hist[atomic_load(&sb->gen) & 3]);
	bool closed = atomic_load(&sb->closed);
	struct bh_stats s;

	bh_stats(sb->bh, &s);
	if (sb->nshadow || !st_ents_empty(&sb->granted) || s.in_flight || s.queued ||
	    atomic_load(&sb->inflight))
		st_fail("[%s] quiesced with in_flight=%" PRIu64 " queued=%" PRIu64
			" (callers hold %" PRId64 ", shadow queue %u)",
			sb->label, s.in_flight, s.queued, atomic_load(&sb->inflight), sb->nshadow);
	expect_eq(sb, "limit", s.limit, limit);
	expect_eq(sb, "acquired", s.acquired, seen(sb, SO_OK));
	expect_eq(sb, "released", s.released, atomic_load(&sb->releases));
	expect_eq(sb, "acquired - released (held)", s.acquired - s.released, 0);
	expect_eq(sb, "rejected", s.rejected, seen(sb, SO_BUSY));
	expect_eq(sb, "timed_out", s.timed_out, seen(sb, SO_TIMEDOUT));
	expect_eq(sb, "cancelled", s.cancelled, seen(sb, SO_CANCELLED));
	expect_eq(sb, "over_released", s.over_released, 0);
	/* every queued acquire records its wait once: granted, or failed
	 * (timed out, closed, shrunk below it, cancelled either way) */
	expect_eq(sb, "wait.count (queued, granted)", s.wait.count,
		  atomic_load(&sb->queued_granted));
	expect_eq(sb, "wait_failed.count (queued, not granted)", s.wait_failed.count,
		  atomic_load(&sb->queued_ops) - atomic_load(&sb->queued_granted) +
			  atomic_load(&sb->thread_cancels));
	if (closed) {
		expect_ret(sb, "bh_try_acquire(1) after close", bh_try_acquire(sb->bh, 1), -ESHUTDOWN);
		expect_ret(sb, "a second bh_close", bh_close(sb->bh), -EALREADY);
	} else {
		/* every permit can be taken again, and not one more */
		expect_ret(sb, "bh_try_acquire(limit)", bh_try_acquire(sb->bh, limit), 0);
		expect_ret(sb, "bh_try_acquire(1) with all held", bh_try_acquire(sb->bh, 1), -EBUSY);
		expect_ret(sb, "bh_release(limit)", bh_release(sb->bh, limit), 0);
	}
	expect_ret(sb, "bh_release(1) with none held", bh_release(sb->bh, 1), -EOVERFLOW);
	bh_stats(sb->bh, &s);
	expect_eq(sb, "in_flight after the final checks", s.in_flight, 0);
	expect_eq(sb, "over_released after the final checks", s.over_released, 1);
	atomic_fetch_add(&sb->checks[SC_QUIESCE], 1);
}

void st_bh_finish(struct st_bh *sb)
{
	quiesce(sb);
	unregister_bh(sb);
	bh_destroy(sb->bh);
	sb->bh = NULL;
	pthread_mutex_destroy(&sb->slock);
}

/* ---- limit generations ------------------------------------------------------ */

/* Register an operation in the current generation. Dekker-style (seq_cst
 * RMW, then re-read gen) against st_resize's gen bump then active load:
 * either we see the new gen and retry, or the resizer sees us. */
static uint64_t gen_enter(struct st_bh *sb)
{
	for (;;) {
		uint64_t g = atomic_load(&sb->gen);

		atomic_fetch_add(&sb->active[g & 1], 1);
		if (atomic_load(&sb->gen) == g)
			return g;
		atomic_fetch_sub(&sb->active[g & 1], 1);
	}
}

static void gen_exit(struct st_bh *sb, uint64_t g)
{
	atomic_fetch_sub(&sb->active[g & 1], 1);
}

/*
 * The ceiling protocol. Before the limit changes, the ceiling rises to the
 * larger of old and new (a grow is covered before any grant under it). The
 * new generation starts only after bh_set_limit returned, so its operations
 * are all judged by the new limit; once the old generation has drained, no
 * holder remains from before, and the ceiling drops to the new limit.
 * hist[] keeps the limits of the current and next generation for -EINVAL.
 */
void st_resize(struct st_bh *sb, uint32_t limit)
{
	uint64_t g = atomic_load(&sb->gen);
	uint32_t cur = atomic_load(&sb->hist[g & 3]);
	int r;

	if (sb->exclusive)
		st_fail("[%s] resized a bulkhead marked exclusive", sb->label);
	atomic_store(&sb->ceiling, cur > limit ? cur : limit);
	atomic_store(&sb->hist[(g + 1) & 3], limit);
	atomic_store(&sb->resizing, g + 1);
	r = bh_set_limit(sb->bh, limit);
	if (r != 0)
		st_fail("[%s] bh_set_limit(%u) = %d", sb->label, limit, r);
	atomic_store(&sb->gen, g + 1);
	while (atomic_load(&sb->active[g & 1]) != 0)
		st_sleep_ns(20 * BH_USEC);
	atomic_store(&sb->ceiling, limit);
}

void st_close(struct st_bh *sb)
{
	struct bh_stats s;
	int r;

	atomic_store(&sb->closing, true);
	r = bh_close(sb->bh);
	if (r != 0)
		st_fail("[%s] bh_close = %d", sb->label, r);
	atomic_store(&sb->closed, true);
	bh_stats(sb->bh, &s);
	if (s.queued)
		st_fail("[%s] bh_close returned with %" PRIu64 " waiters still queued", sb->label,
			s.queued);
}

/* ---- the checked acquire ----------------------------------------------------- */

#define ST_ECANCELLED 100000 /* bh_cancel_async took the node back */

struct st_async {
	struct bh_async node;
	_Atomic uint32_t done;
	int result;
};

/* Runs under the core lock on the granting thread: publish, wake, return. */
static void async_done(struct bh_async *node, int result)
{
	struct st_async *a = bhi_container_of(node, struct st_async, node);

	a->result = result;
	/* release: pairs with the owner's acquire load of done */
	atomic_store_explicit(&a->done, 1, memory_order_release);
	futex_wake_all(&a->done);
}

static int async_acquire(struct st_bh *sb, struct st_op *op)
{
	struct st_async a = { .result = 12345 };
	int r = bh_acquire_async(sb->bh, &a.node, op->n, async_done, &a);

	if (r != 1)
		return r;
	for (;;) {
		uint64_t now;

		if (atomic_load_explicit(&a.done, memory_order_acquire))
			return a.result;
		now = bh_now_ns();
		if (op->deadline != BH_FOREVER && now >= op->deadline)
			break;
		futex_wait_until(&a.done, 0, op->deadline);
	}
	r = bh_cancel_async(sb->bh, &a.node);
	if (r == 1) {
		if (atomic_load_explicit(&a.done, memory_order_acquire))
			st_fail("[%s] bh_cancel_async returned 1 but the callback ran", sb->label);
		return -ST_ECANCELLED;
	}
	if (r != 0)
		st_fail("[%s] bh_cancel_async = %d", sb->label, r);
	if (!atomic_load_explicit(&a.done, memory_order_acquire))
		st_fail("[%s] bh_cancel_async returned 0 but the callback has not run", sb->label);
	return a.result;
}

/* Take the entry out of the shadow if no grant did; returns its state. */
static int resolve(struct st_bh *sb, struct st_ent *e)
{
	int s;

	shadow_lock(sb);
	s = e->state;
	if (s == SE_QUEUED) {
		shadow_unlink(sb, e);
		e->state = SE_LEFT;
	} else if (s == SE_GRANTED) {
		uint64_t woke = bh_now_ns() - e->granted_ns;

		st_ents_del(&sb->granted, e);
		sb->wake_max_ns = woke > sb->wake_max_ns ? woke : sb->wake_max_ns;
	}
	shadow_unlock(sb);
	return s;
}

struct cancel_ctx {
	struct st_bh *sb;
	struct st_op *op;
	struct st_ent *e;
};

/* pthread_cancel hit a blocking acquire: the core's own cleanup already ran
 * (it is the inner one) and must have taken the node out of the queue. */
static void on_cancelled(void *arg)
{
	struct cancel_ctx *cc = arg;
	struct st_bh *sb = cc->sb;
	bool linked;

	pending = NULL;
	resolve(sb, cc->e);
	pthread_mutex_lock(&sb->bh->lock);
	linked = cc->e->l && in_real_queue(sb, cc->e->l);
	pthread_mutex_unlock(&sb->bh->lock);
	if (linked)
		st_fail("[%s] a cancelled waiter's node is still queued", sb->label);
	atomic_fetch_add(&sb->outcome[SO_CANCELLED], 1);
	atomic_fetch_add(&sb->thread_cancels, 1);
	gen_exit(sb, cc->op->gen);
}

static int blocking_acquire(struct st_bh *sb, struct st_op *op, struct st_ent *e)
{
	uint64_t deadline = op->kind == SK_FOREVER ? BH_FOREVER : op->deadline;
	struct cancel_ctx cc = { sb, op, e };
	int r;

	if (!cancellable)
		return bh_acquire(sb->bh, op->n, deadline);
	/* Cancellation is enabled for the acquire alone; the core acts on it
	 * only inside its futex wait. */
	pthread_cleanup_push(on_cancelled, &cc);
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	r = bh_acquire(sb->bh, op->n, deadline);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_cleanup_pop(0);
	return r;
}

uint32_t st_holding(void)
{
	return holding;
}

void st_allow_cancel(bool on)
{
	cancellable = on;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
}

/* BH_FAIR: nobody queued since before the call may still be queued after a
 * direct take. Checked under the core lock, against the real queue. */
static void check_no_barging(struct st_bh *sb, uint64_t before)
{
	pthread_mutex_lock(&sb->bh->lock);
	held_core = sb;
	shadow_lock(sb);
	for (struct st_ent *p = st_ents_first(&sb->shadow); p && p->ticket <= before; p = p->next)
		if (in_real_queue(sb, p->l))
			st_fail("BH_FAIR barging: permits taken directly while ticket %" PRIu64
				" (n=%u), queued before the call began, is still queued", p->ticket, p->n);
	atomic_fetch_add_explicit(&sb->checks[SC_BARGING], 1, memory_order_relaxed);
	shadow_unlock(sb);
	held_core = NULL;
	pthread_mutex_unlock(&sb->bh->lock);
}

/* The newest ticket already queued, or 0 when nobody is queued. */
static uint64_t queued_before(struct st_bh *sb)
{
	uint64_t t;

	shadow_lock(sb);
	t = sb->nshadow ? sb->tickets : 0;
	shadow_unlock(sb);
	return t;
}

/* -EINVAL is legal only when a limit in force during the call was below n:
 * its generation's, or the next one's once that resize began (an operation
 * spans at most two generations: st_resize drains the old one). */
static bool limit_below(struct st_bh *sb, uint64_t g, uint32_t n)
{
	if (n > atomic_load(&sb->hist[g & 3]))
		return true;
	return atomic_load(&sb->resizing) > g && n > atomic_load(&sb->hist[(g + 1) & 3]);
}

static void check_deadline(struct st_bh *sb, struct st_op *op, uint64_t ret_ns)
{
	uint64_t late, max;

	if (op->result == -ETIMEDOUT && ret_ns < op->deadline)
		st_fail("[%s] -ETIMEDOUT %" PRIu64 " ns before the deadline", sb->label,
			op->deadline - ret_ns);
	if (ret_ns <= op->deadline)
		return;
	late = ret_ns - op->deadline;
	if (late > st.slack_ns)
		st_fail("[%s] returned %d %.3f ms after the deadline (slack %.0f ms)", sb->label,
			op->result, (double)late / 1e6, (double)st.slack_ns / 1e6);
	max = atomic_load_explicit(&sb->late_max_ns, memory_order_relaxed);
	while (late > max && !atomic_compare_exchange_weak(&sb->late_max_ns, &max, late))
		;
	atomic_fetch_add_explicit(&sb->checks[SC_DEADLINE], 1, memory_order_relaxed);
}

static bool unbounded(const struct st_bh *sb)
{
	return sb->cfg.queue_capacity > BH_QUEUE_MAX;
}

/* Is this result legal for this call, given what the observers saw? */
static void check_result(struct st_bh *sb, struct st_op *op, int state, bool closed_before,
			 uint64_t ret_ns)
{
	int r = op->result;
	bool queued = state != SE_NONE, granted = state == SE_GRANTED;
	bool may_wait = op->kind == SK_ASYNC || op->kind == SK_FOREVER ||
			(op->kind == SK_TIMED && op->deadline > ret_ns);

	if (queued && (op->kind == SK_TRY || sb->cfg.queue_capacity == 0))
		st_fail("[%s] a call that may not wait joined the queue", sb->label);
	if (r == 0 && queued && !granted)
		st_fail("[%s] returned 0 after queueing, but no grant was observed", sb->label);
	if (r != 0 && granted)
		st_fail("[%s] permits were granted to the node but the call returned %d: leaked",
			sb->label, r);
	/* closed outranks every error but invalid arguments (never made
	 * here): n above the limit is -ESHUTDOWN too once closed */
	if (closed_before && r != -ESHUTDOWN)
		st_fail("[%s] returned %d for a call that began after bh_close returned",
			sb->label, r);
	switch (r) {
	case 0:
		break;
	case -EBUSY:
		if (queued)
			st_fail("[%s] -EBUSY after joining the queue", sb->label);
		if (may_wait && unbounded(sb))
			st_fail("[%s] -EBUSY from a waiting acquire on an unbounded queue",
				sb->label);
		break;
	case -ETIMEDOUT:
		if (op->kind != SK_TIMED || !queued)
			st_fail("[%s] -ETIMEDOUT from a call that never waited (kind %d)", sb->label,
				op->kind);
		break;
	case -ESHUTDOWN:
		if (!atomic_load(&sb->closing))
			st_fail("[%s] -ESHUTDOWN before anyone closed the bulkhead", sb->label);
		break;
	case -EINVAL:
		if (!limit_below(sb, op->gen, op->n))
			st_fail("[%s] -EINVAL for n=%u while the limit was %u", sb->label, op->n,
				atomic_load(&sb->hist[op->gen & 3]));
		break;
	case -ST_ECANCELLED:
		if (op->kind != SK_ASYNC)
			st_fail("[%s] cancelled outside bh_cancel_async", sb->label);
		break;
	default:
		st_fail("[%s] unexpected result %d (kind %d, n=%u)", sb->label, r, op->kind, op->n);
	}
	if (op->kind == SK_TIMED && queued)
		check_deadline(sb, op, ret_ns);
	atomic_fetch_add_explicit(&sb->checks[SC_RESULT], 1, memory_order_relaxed);
}

static enum st_outcome outcome_of(int r)
{
	switch (r) {
	case 0:
		return SO_OK;
	case -EBUSY:
		return SO_BUSY;
	case -ETIMEDOUT:
		return SO_TIMEDOUT;
	case -ESHUTDOWN:
		return SO_SHUTDOWN;
	case -EINVAL:
		return SO_INVAL;
	default:
		return SO_CANCELLED;
	}
}

/* In flight, counted by the callers inside the held region, never above the
 * highest limit that may be in force. */
static void enter_held(struct st_bh *sb, uint32_t n)
{
	int64_t v = atomic_fetch_add_explicit(&sb->inflight, n, memory_order_relaxed) + n;
	uint32_t c = atomic_load(&sb->ceiling);

	if (v > (int64_t)c)
		st_fail("[%s] %" PRId64 " permits in flight, above the limit in force (%u)",
			sb->label, v, c);
	atomic_fetch_add_explicit(&sb->checks[SC_INFLIGHT], 1, memory_order_relaxed);
}

int st_acquire(struct st_bh *sb, struct st_op *op, struct st_rng *rng)
{
	struct st_ent e = { .sb = sb, .n = op->n };
	bool closed_before = atomic_load(&sb->closed);
	uint64_t before = 0;
	int state;

	if (op->kind == SK_FOREVER)
		op->deadline = BH_FOREVER;
	op->gen = gen_enter(sb);
	if ((sb->cfg.flags & BH_FAIR) && st_chance(rng, 250))
		before = queued_before(sb);
	pending = &e;
	switch (op->kind) {
	case SK_TRY:
		op->result = bh_try_acquire(sb->bh, op->n);
		break;
	case SK_TIMED:
	case SK_FOREVER:
		op->result = blocking_acquire(sb, op, &e);
		break;
	default:
		atomic_fetch_add_explicit(&sb->async_ops, 1, memory_order_relaxed);
		op->result = async_acquire(sb, op);
		break;
	}
	pending = NULL;
	if (op->result == 0 && sb->exclusive)
		sb->guarded++; /* ordered after the previous holder's by the permit alone */
	state = resolve(sb, &e);
	op->queued = state != SE_NONE;
	check_result(sb, op, state, closed_before, bh_now_ns());
	if (op->queued)
		atomic_fetch_add_explicit(&sb->queued_ops, 1, memory_order_relaxed);
	if (op->queued && op->result == 0)
		atomic_fetch_add_explicit(&sb->queued_granted, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sb->outcome[outcome_of(op->result)], 1, memory_order_relaxed);
	if (op->result != 0) {
		gen_exit(sb, op->gen);
		return op->result == -ST_ECANCELLED ? -ECANCELED : op->result;
	}
	enter_held(sb, op->n);
	holding += op->n;
	if (before && !op->queued)
		check_no_barging(sb, before);
	return 0;
}

void st_release(struct st_bh *sb, struct st_op *op)
{
	int r;

	if (sb->exclusive)
		sb->guarded++;
	/* relaxed: counting needs no ordering, and an ordering here would
	 * hide a missing one in the core from the `guarded` check */
	atomic_fetch_sub_explicit(&sb->inflight, op->n, memory_order_relaxed);
	holding -= op->n;
	atomic_fetch_add_explicit(&sb->releases_begun, 1, memory_order_relaxed);
	r = bh_release(sb->bh, op->n);
	if (r != 0)
		st_fail("[%s] bh_release(%u) of held permits = %d", sb->label, op->n, r);
	atomic_fetch_add_explicit(&sb->releases, 1, memory_order_relaxed);
	gen_exit(sb, op->gen);
}

void st_hold(struct st_rng *rng, uint32_t sleep_per_mille)
{
	uint32_t x = st_below(rng, 1000);

	if (x < 400)
		return;
	if (x < 700)
		st_spin_until(bh_now_ns() + st_below(rng, 2000));
	else if (x < 1000 - sleep_per_mille)
		sched_yield();
	else
		st_sleep_ns((20 + st_below(rng, 300)) * BH_USEC);
}

/* ---- the watchdog ------------------------------------------------------------ */

static struct st_bh **wd_sbs;
static unsigned wd_n;
static _Atomic bool wd_stop;
static _Atomic uint64_t wd_stopping_ns;
static pthread_t wd_thread;

/* Leaked permits: taken in the word, held by no caller, none granted and
 * on its way to a caller, and yet waiters queue. A holder is out of the
 * callers' count only between the core's return and its own increment, a
 * few instructions; the bound makes a stall of every holder that long the
 * only false alarm. Under the core lock and slock. */
static void watch_leak(struct st_bh *sb, uint64_t w, unsigned queued, uint64_t now)
{
	int64_t taken = (int64_t)w_limit(w) - w_avail(w);

	if (!queued || (w & W_CLOSED) || taken <= 0 || !st_ents_empty(&sb->granted) ||
	    atomic_load_explicit(&sb->inflight, memory_order_relaxed) != 0) {
		sb->leak_since = 0;
		return;
	}
	if (!sb->leak_since)
		sb->leak_since = now;
	else if (now - sb->leak_since > st.watchdog_ns)
		st_fail("[%s] leak: %" PRId64 " permits taken but no caller holds any, for %.0f ms, "
			"while %u wait", sb->label, taken, (double)(now - sb->leak_since) / 1e6,
			queued);
}

/* Under the core lock, so no half-done operation is visible: the queue
 * matches the word, no permit was created, and a head that could take
 * free permits does so within the bound. */
static void watch_one(struct st_bh *sb)
{
	struct bulkhead *bh = sb->bh;
	const struct bh_qlink *head;
	uint64_t w, now, ticket = 0;
	unsigned m = 0;

	pthread_mutex_lock(&bh->lock);
	held_core = sb;
	w = bhi_word(bh);
	head = bh->queue.first;
	for (const struct bh_qlink *q = head; q; q = q->next) {
		if (++m > BH_QUEUE_MAX)
			st_fail("[%s] the queue is cyclic", sb->label);
		if (q->n > w_limit(w))
			st_fail("[%s] a waiter for %u permits is queued under a limit of %u: it "
				"can never be served", sb->label, q->n, w_limit(w));
	}
	if (m != w_nq(w))
		st_fail("[%s] the queue holds %u nodes but the word counts %u", sb->label, m,
			w_nq(w));
	/* The word counts free and held permits; a give of more than it holds
	 * borrows from the next field, and its limit (free + held) leaves the
	 * limits that can be in force. The ceiling is read after the word: under
	 * the lock no bh_set_limit moves the limit, and the ceiling only drops
	 * to a limit already set. */
	if (w_limit(w) > atomic_load(&sb->ceiling))
		st_fail("[%s] %" PRId64 " permits free and %" PRId64 " held, a limit of %u above "
			"the ceiling %u: permits were created",
			sb->label, w_avail(w), w_held(w), w_limit(w), atomic_load(&sb->ceiling));
	if ((w & W_CLOSED) && m)
		st_fail("[%s] closed, yet %u waiters are queued", sb->label, m);
	if (head && !(w & W_CLOSED) && w_avail(w) >= (int64_t)head->n) {
		struct st_ent *e;

		shadow_lock(sb);
		e = shadow_find(sb, head);
		if (!e)
			st_fail("[%s] head node %p is unknown to the shadow queue", sb->label,
				(const void *)head);
		ticket = e->ticket;
		shadow_unlock(sb);
	}
	now = bh_now_ns();
	shadow_lock(sb);
	for (struct st_ent *e = st_ents_first(&sb->granted); e; e = e->next)
		if (now > e->granted_ns && now - e->granted_ns > st.watchdog_ns)
			st_fail("[%s] lost wakeup: ticket %" PRIu64 " (n=%u) was granted %.0f ms ago "
				"and its owner has not returned", sb->label, e->ticket, e->n,
				(double)(now - e->granted_ns) / 1e6);
	watch_leak(sb, w, m, now);
	shadow_unlock(sb);
	if (!ticket || ticket != sb->stuck_ticket) {
		sb->stuck_ticket = ticket;
		sb->stuck_since = now;
	} else if (now - sb->stuck_since > st.watchdog_ns) {
		st_fail("[%s] lost wakeup: head ticket %" PRIu64 " (n=%u) has stayed queued for "
			"%.0f ms while %" PRId64 " permits are free", sb->label, ticket, head->n,
			(double)(now - sb->stuck_since) / 1e6, w_avail(w));
	}
	atomic_fetch_add_explicit(&sb->checks[SC_WATCH], 1, memory_order_relaxed);
	held_core = NULL;
	pthread_mutex_unlock(&bh->lock);
}

/* The counters while calls run: neither goes back, and no release is
 * reported before its call began (the core derives the count of releases
 * from the takes and the word; a wrong order of its reads would show one
 * too many). Outside the core lock, like any reader of bh_stats. */
static void watch_counters(struct st_bh *sb)
{
	struct bh_stats s;
	uint64_t begun;

	bh_stats(sb->bh, &s);
	begun = atomic_load(&sb->releases_begun); /* after: it only grows */
	if (s.released > begun)
		st_fail("[%s] bh_stats reports %" PRIu64 " releases, but only %" PRIu64
			" bh_release calls have begun", sb->label, s.released, begun);
	if (s.released < sb->seen_released || s.acquired < sb->seen_acquired)
		st_fail("[%s] a counter went back: released %" PRIu64 " after %" PRIu64
			", acquired %" PRIu64 " after %" PRIu64, sb->label, s.released,
			sb->seen_released, s.acquired, sb->seen_acquired);
	sb->seen_released = s.released;
	sb->seen_acquired = s.acquired;
}

static void *watchdog_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&wd_stop)) {
		uint64_t s = atomic_load(&wd_stopping_ns);

		for (unsigned i = 0; i < wd_n; i++) {
			watch_one(wd_sbs[i]);
			watch_counters(wd_sbs[i]);
		}
		if (s && bh_now_ns() - s > st.quiesce_ns)
			st_fail("the run did not stop within %.0f s of its end: a waiter or holder "
				"is stuck", (double)st.quiesce_ns / 1e9);
		st_sleep_ns(2 * BH_MSEC);
	}
	return NULL;
}

void st_watchdog_start(struct st_bh **sbs, unsigned n)
{
	wd_sbs = sbs;
	wd_n = n;
	atomic_store(&wd_stop, false);
	atomic_store(&wd_stopping_ns, 0);
	if (pthread_create(&wd_thread, NULL, watchdog_main, NULL) != 0)
		st_fail("cannot start the watchdog");
}

void st_watchdog_stopping(void)
{
	atomic_store(&wd_stopping_ns, bh_now_ns());
}

void st_watchdog_stop(void)
{
	atomic_store(&wd_stop, true);
	pthread_join(wd_thread, NULL);
}

/* ---- the summary line ---------------------------------------------------------- */

void st_outcomes(struct st_bh **sbs, unsigned n, char *buf, size_t len)
{
	uint64_t o[SO_N] = { 0 }, total = 0, queued = 0, async = 0;

	for (unsigned i = 0; i < n; i++) {
		for (int k = 0; k < SO_N; k++)
			o[k] += atomic_load(&sbs[i]->outcome[k]);
		queued += atomic_load(&sbs[i]->queued_ops);
		async += atomic_load(&sbs[i]->async_ops);
	}
	for (int k = 0; k < SO_N; k++)
		total += o[k];
	snprintf(buf, len,
		 "ops=%" PRIu64 " ok=%" PRIu64 " busy=%" PRIu64 " timedout=%" PRIu64
		 " shutdown=%" PRIu64 " inval=%" PRIu64 " cancelled=%" PRIu64 " (queued=%" PRIu64
		 " async=%" PRIu64 ")",
		 total, o[SO_OK], o[SO_BUSY], o[SO_TIMEDOUT], o[SO_SHUTDOWN], o[SO_INVAL],
		 o[SO_CANCELLED], queued, async);
}

void st_checks(struct st_bh **sbs, unsigned n, char *buf, size_t len)
{
	static const char *names[SC_N] = { "inflight", "result", "fifo", "barging",
					   "deadline", "watchdog", "quiesce" };
	uint64_t c[SC_N] = { 0 }, late = 0, wake = 0;
	size_t off;

	for (unsigned i = 0; i < n; i++) {
		uint64_t l = atomic_load(&sbs[i]->late_max_ns);

		wake = sbs[i]->wake_max_ns > wake ? sbs[i]->wake_max_ns : wake;
		for (int k = 0; k < SC_N; k++)
			c[k] += atomic_load(&sbs[i]->checks[k]);
		late = l > late ? l : late;
	}
	off = (size_t)snprintf(buf, len, "checks:");
	for (int k = 0; k < SC_N && off < len; k++)
		off += (size_t)snprintf(buf + off, len - off, " %s=%" PRIu64, names[k], c[k]);
	if (off < len)
		snprintf(buf + off, len - off, " late_max=%.2fms(slack %.0fms) wake_max=%.2fms(bound %.0fms)",
			 (double)late / 1e6, (double)st.slack_ns / 1e6, (double)wake / 1e6,
			 (double)st.watchdog_ns / 1e6);
}
