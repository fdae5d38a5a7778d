/*
 * stress_shm: worker processes x threads hammer one host-wide bulkhead with
 * random operations (try, timed and forever acquires, async acquires with
 * and without cancel, releases on the taking thread or handed to a sibling
 * thread) while a killer SIGKILLs a random worker at a random instant and
 * starts a new one in its place.
 *
 * Invariants are counted outside the library, in a separate shared segment
 * with a record per worker thread (so a dead process's share is known):
 *
 *  - in flight never above the limit: a thread adds n to a global counter
 *    after its acquire returned and takes it off before it releases, and
 *    checks the sum against the limit. Before a kill the killer stops the
 *    victim (SIGSTOP: it dies at that instant) and takes the victim's share
 *    off the counter first, so permits the library gives back are never
 *    counted twice (the stop is retried while a thread of the victim is in
 *    the middle of updating its share);
 *  - reclaimed equals what the dead held: the victim's records give its
 *    holdings exactly, or a range when a thread was inside a call (an
 *    acquire that may or may not have been granted, a release that may or
 *    may not have happened); the library's reclaimed counter must move by
 *    exactly that, or within that range, when the death is processed;
 *  - a death is processed within a second (the killer usually asks for a
 *    look at once; some kills are left to the survivors' own polls);
 *  - a recoverer that dies counts nothing twice and loses nothing: after one
 *    kill in four, left to the survivors, the killer watches the segment
 *    for a worker holding the internal lock with a recovery log open and
 *    kills it there, in the middle of recovering the first; both deaths
 *    are then counted, and reclaimed moves by what the two held;
 *  - the library's ledgers agree with the records: between kills the killer
 *    stops a worker where its records agree and holds what the library
 *    says it holds (its ledgers and the grants made to it) against them;
 *    now and then it stops every worker and, when nothing is under way in
 *    the library, checks that the word's in-flight count is exactly what
 *    the living hold by their ledgers (a permit lost or made up in the
 *    word shows here, long before a recovery would count it);
 *  - no waiter stranded: a timed wait returns between its deadline and the
 *    deadline plus a slack, and at the end every worker returns;
 *  - every permit back at quiesce: nothing in flight or queued, every
 *    permit takeable once and not one more, one process attached, and the
 *    global counter back at zero.
 *
 * A failure prints the killed worker's last calls per thread. One run in
 * four makes transfers between a process's threads use the fallback for
 * kernels without membarrier(2).
 *
 * Prints kills survived, kills whose victim was inside a call, recoverers
 * killed while recovering, the stops that checked ledgers (probes, audits),
 * rebuilds, and the slowest detection. BH_STRESS_SECONDS, BH_STRESS_SEED as
 * for the other programs; BH_STRESS_PROCS, BH_STRESS_THREADS override the
 * shape, BH_STRESS_FENCED=1 or 0 the transfers.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bulkhead.h"
#include "bulkhead/shm.h"
#include "core/internal.h"
#include "shm/hooks.h"
#include "shm/seg.h"

#define MAX_PROCS 8
#define MAX_THREADS 8
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SCALE 4 /* sanitizers slow everything down */
#endif
#ifdef __has_feature
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SCALE 4
#endif
#endif
#ifndef SCALE
#define SCALE 1
#endif
/* A wait may return this much after its deadline (a loaded machine, and a
 * victim the killer keeps stopped while it reads its records, if it held
 * the internal lock). */
#define SLACK_NS ((uint64_t)(env_num("BH_STRESS_SLACK_MS", 1000 * SCALE) * 1e6))
/* Timeouts fire on time: the per-call slack above allows for a stopped
 * victim holding the lock, so the bound is on the share of -ETIMEDOUT back
 * within this of the deadline: at least a tenth (72-100% on a loaded 2-CPU
 * machine), none when timeouts fire late (a late timeout also turns most of them into grants,
 * so few are needed to judge). */
#define PROMPT_NS (2 * BH_MSEC * SCALE)
#define PROMPT_MIN 20
/* A death must be processed within this. */
#define DETECT_NS ((uint64_t)(env_num("BH_STRESS_DETECT_MS", 1000 * SCALE) * 1e6))

enum { PH_IDLE, PH_ACQ, PH_REL, PH_ADD, PH_SUB };

/* One worker thread's record (the agent's callbacks use record T). */
struct rec {
	_Atomic int64_t held;    /* permits its process holds by its account */
	_Atomic uint32_t pend;   /* n of a call in progress */
	_Atomic uint32_t phase;  /* PH_*: what the call in progress is */
	_Atomic int64_t contrib; /* its share of the global counter */
	_Atomic uint64_t ops;
	_Atomic uint32_t hist[16]; /* the last calls, for a failure report */
	_Atomic uint32_t hpos;
};

struct wproc {
	_Atomic pid_t pid;
	_Atomic uint32_t ready; /* registered: a death is something to find */
	struct rec r[MAX_THREADS + 1];
};

struct ext {
	_Atomic int64_t inflight; /* the global counter */
	_Atomic uint32_t stop;
	_Atomic uint32_t failed;
	char why[256];
	struct wproc p[MAX_PROCS];
	_Atomic uint64_t timed_ok, timed_out, busy, tries_ok, async_ok, async_cancel,
		handed, forever_ok;
	_Atomic uint64_t timed_out_prompt; /* back within PROMPT_NS of the deadline */
};

static struct ext *ext;
static bulkhead_t *inherited; /* the killer's handle, which workers inherit */
static char name[64];
static uint32_t limit, nprocs, nthreads;
static uint64_t seed;
static double seconds;

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t *s)
{
	*s = mix(*s);
	return *s;
}

static uint32_t below(uint64_t *s, uint32_t bound)
{
	return (uint32_t)(rnd(s) % bound);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;

	if (atomic_exchange(&ext->failed, 1))
		return;
	va_start(ap, fmt);
	vsnprintf(ext->why, sizeof(ext->why), fmt, ap);
	va_end(ap);
}

static double env_num(const char *k, double def)
{
	const char *v = getenv(k);

	return v && *v ? strtod(v, NULL) : def;
}

/* ---- a worker ------------------------------------------------------------ */

struct worker {
	bulkhead_t *bh;
	struct wproc *wp;
	uint32_t slot;
	/* permits handed between this process's threads */
	pthread_mutex_t mbox_mu;
	uint32_t mbox[64];
	unsigned nmbox;
};

struct wthread {
	struct worker *w;
	struct rec *r;
	uint64_t rng;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int async_result, async_done;
};

/* One call in the thread's history: what, n, the result. */
enum { H_TRY = 1, H_TIMED, H_FOREVER, H_ASYNC, H_ASYNC_CB, H_CANCEL, H_REL };

static void note(struct rec *r, uint32_t what, uint32_t n, int res)
{
	uint32_t i = atomic_fetch_add(&r->hpos, 1) % 16;

	atomic_store(&r->hist[i], what << 24 | (n & 0xff) << 16 | ((uint32_t)res & 0xffff));
}

/* The share of the global counter: PH_ADD/PH_SUB mark the instants when
 * the record and the counter disagree, for the killer to avoid. */
static void count_in(struct rec *r, uint32_t n)
{
	int64_t now;

	atomic_store(&r->phase, PH_ADD);
	atomic_fetch_add(&r->held, n);
	atomic_fetch_add(&r->contrib, n);
	now = atomic_fetch_add(&ext->inflight, n) + n;
	atomic_store(&r->phase, PH_ACQ);
	if (now > (int64_t)limit)
		fail("%" PRId64 " permits in flight, above the limit %u", now, limit);
}

static void count_out(struct rec *r, uint32_t n)
{
	atomic_store(&r->phase, PH_SUB);
	atomic_fetch_sub(&ext->inflight, n);
	atomic_fetch_sub(&r->contrib, n);
	atomic_fetch_sub(&r->held, n);
	atomic_store(&r->phase, PH_REL);
}

static void do_release(struct wthread *t, uint32_t n)
{
	int r;

	atomic_store(&t->r->pend, n);
	atomic_store(&t->r->phase, PH_REL);
	count_out(t->r, n);
	r = bh_release(t->w->bh, n);
	note(t->r, H_REL, n, r);
	if (r != 0)
		fail("release of %u held permits returned %d", n, r);
	atomic_store(&t->r->phase, PH_IDLE);
	atomic_store(&t->r->pend, 0);
}

static void hold(struct wthread *t)
{
	switch (below(&t->rng, 4)) {
	case 0:
		break;
	case 1:
		sched_yield();
		break;
	default: {
		struct timespec ts = { 0, (long)below(&t->rng, 200) * 1000 };

		nanosleep(&ts, NULL);
	}
	}
}

/* Release on this thread, or hand to a sibling (who releases later). */
static void put_back(struct wthread *t, uint32_t n)
{
	struct worker *w = t->w;

	hold(t);
	if (nthreads > 1 && below(&t->rng, 4) == 0) {
		pthread_mutex_lock(&w->mbox_mu);
		if (w->nmbox < 64) {
			w->mbox[w->nmbox++] = n;
			n = 0;
		}
		pthread_mutex_unlock(&w->mbox_mu);
		if (!n) {
			atomic_fetch_add(&ext->handed, 1);
			return;
		}
	}
	do_release(t, n);
}

/* Permits handed to us: ours to release (the count moves with them).
 * Returns whether there was any. */
static bool drain_mbox(struct wthread *t)
{
	struct worker *w = t->w;
	uint32_t n = 0;

	pthread_mutex_lock(&w->mbox_mu);
	if (w->nmbox)
		n = w->mbox[--w->nmbox];
	pthread_mutex_unlock(&w->mbox_mu);
	if (n)
		do_release(t, n);
	return n != 0;
}

static void acquired(struct wthread *t, uint32_t n)
{
	count_in(t->r, n);
	atomic_store(&t->r->phase, PH_IDLE);
	atomic_store(&t->r->pend, 0);
	put_back(t, n);
}

static void async_cb(struct bh_async *node, int result)
{
	struct wthread *t = node->data;
	struct rec *agent = &t->w->wp->r[nthreads];

	note(agent, H_ASYNC_CB, node->link.n, result);
	if (result == 0) {
		atomic_store(&agent->pend, node->link.n);
		count_in(agent, node->link.n); /* the agent's record, its thread */
		atomic_store(&agent->phase, PH_IDLE);
		atomic_store(&agent->pend, 0);
	}
	pthread_mutex_lock(&t->mu);
	t->async_result = result;
	t->async_done = 1;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

static void op_async(struct wthread *t, uint32_t n)
{
	struct bh_async node;
	struct timespec ts;
	int r, done;

	t->async_done = 0;
	atomic_store(&t->r->pend, n);
	atomic_store(&t->r->phase, PH_ACQ);
	r = bh_acquire_async(t->w->bh, &node, n, async_cb, t);
	note(t->r, H_ASYNC, n, r);
	if (r == 0) {
		atomic_fetch_add(&ext->async_ok, 1);
		acquired(t, n);
		return;
	}
	if (r != 1) {
		if (r != -EBUSY)
			fail("bh_acquire_async returned %d", r);
		atomic_fetch_add(&ext->busy, 1);
		goto done;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)below(&t->rng, 3) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&t->mu);
	while (!t->async_done && pthread_cond_timedwait(&t->cv, &t->mu, &ts) == 0)
		;
	done = t->async_done;
	pthread_mutex_unlock(&t->mu);
	if (!done && (r = bh_cancel_async(t->w->bh, &node), note(t->r, H_CANCEL, n, r), r == 1)) {
		atomic_fetch_add(&ext->async_cancel, 1);
		goto done;
	}
	pthread_mutex_lock(&t->mu);
	while (!t->async_done)
		pthread_cond_wait(&t->cv, &t->mu);
	pthread_mutex_unlock(&t->mu);
	if (t->async_result != 0) {
		fail("async callback got %d", t->async_result);
		goto done;
	}
	/* The agent counted it in its record; the permits move to ours. */
	atomic_fetch_add(&ext->async_ok, 1);
	atomic_store(&t->r->phase, PH_IDLE);
	atomic_store(&t->r->pend, 0);
	put_back(t, n);
	return;
done:
	atomic_store(&t->r->phase, PH_IDLE);
	atomic_store(&t->r->pend, 0);
}

static void op_blocking(struct wthread *t, uint32_t n, bool forever)
{
	uint64_t t0 = bh_now_ns();
	uint64_t deadline = forever ? BH_FOREVER : t0 + below(&t->rng, 8) * BH_MSEC;
	uint64_t end;
	uint32_t what;
	int r;

	atomic_store(&t->r->pend, n);
	atomic_store(&t->r->phase, PH_ACQ);
	what = forever ? H_FOREVER : below(&t->rng, 3) ? H_TIMED : H_TRY;
	r = what == H_TRY ? bh_try_acquire(t->w->bh, n) : bh_acquire(t->w->bh, n, deadline);
	end = bh_now_ns();
	note(t->r, what, n, r);
	if (r == 0) {
		atomic_fetch_add(forever ? &ext->forever_ok : &ext->timed_ok, 1);
		acquired(t, n);
		return;
	}
	if (r == -ETIMEDOUT) {
		atomic_fetch_add(&ext->timed_out, 1);
		if (end < deadline)
			fail("-ETIMEDOUT %" PRIu64 " ns before the deadline", deadline - end);
		if (end > deadline + SLACK_NS)
			fail("a wait came back %" PRIu64 " ms after its deadline",
			     (uint64_t)((end - deadline) / BH_MSEC));
		if (end <= deadline + PROMPT_NS)
			atomic_fetch_add(&ext->timed_out_prompt, 1);
	} else if (r == -EBUSY) {
		atomic_fetch_add(&ext->busy, 1);
	} else {
		fail("acquire returned %d", r);
	}
	atomic_store(&t->r->phase, PH_IDLE);
	atomic_store(&t->r->pend, 0);
}

static void *worker_thread(void *arg)
{
	struct wthread *t = arg;

	for (;;) {
		uint32_t n = 1 + below(&t->rng, limit < 3 ? limit : 3);
		uint32_t op = below(&t->rng, 20);

		drain_mbox(t);
		if (atomic_load(&ext->stop) || atomic_load(&ext->failed))
			break;
		if (op < 8)
			op_blocking(t, n, false);
		else if (op < 10)
			op_blocking(t, n, true);
		else if (op < 14)
			op_async(t, n);
		else
			op_blocking(t, n, false);
		atomic_fetch_add(&t->r->ops, 1);
	}
	/* A sibling may be in a forever wait that only the permits handed over
	 * can end: whoever leaves last after a hand-over takes none of them
	 * along (every hand-over is followed by its thread passing here). */
	while (drain_mbox(t))
		;
	return NULL;
}

/* Even slots keep the handle they inherit (the prefork pattern); odd ones
 * drop it and open their own. */
static int worker_main(uint32_t slot, uint64_t rng)
{
	struct worker w = { .slot = slot, .mbox_mu = PTHREAD_MUTEX_INITIALIZER };
	struct wthread t[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	int64_t held = 0;
	int r;

	w.wp = &ext->p[slot];
	w.bh = inherited;
	if (slot % 2) {
		bh_destroy(inherited);
		if ((r = bh_shm_open(name, NULL, 0, &w.bh)) != 0) {
			fail("worker: bh_shm_open returned %d", r);
			return 1;
		}
	} else if ((r = bh_try_acquire(w.bh, 1)) == 0) { /* registers */
		bh_release(w.bh, 1);
	} else if (r != -EBUSY) {
		fail("worker: first try returned %d", r);
		return 1;
	}
	atomic_store(&w.wp->ready, 1);
	for (uint32_t i = 0; i < nthreads; i++) {
		t[i] = (struct wthread){ .w = &w, .r = &w.wp->r[i], .rng = mix(rng + i) };
		pthread_mutex_init(&t[i].mu, NULL);
		pthread_cond_init(&t[i].cv, NULL);
		pthread_create(&tid[i], NULL, worker_thread, &t[i]);
	}
	for (uint32_t i = 0; i < nthreads; i++)
		pthread_join(tid[i], NULL);
	while (w.nmbox)
		drain_mbox(&t[0]);
	for (uint32_t i = 0; i <= nthreads; i++)
		held += atomic_load(&w.wp->r[i].held);
	if (held != 0)
		fail("a worker finished holding %" PRId64 " permits by its own account", held);
	bh_destroy(w.bh);
	return 0;
}

/* ---- the killer ---------------------------------------------------------------- */

static pid_t start_worker(uint32_t slot, uint64_t rng)
{
	pid_t pid;

	memset(&ext->p[slot].r, 0, sizeof(ext->p[slot].r));
	atomic_store(&ext->p[slot].ready, 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(worker_main(slot, rng));
	atomic_store(&ext->p[slot].pid, pid);
	return pid;
}

struct snapshot {
	int64_t held, pend, contrib;
	bool inside; /* some thread was inside a call */
};

static bool consistent(struct wproc *wp, struct snapshot *s)
{
	memset(s, 0, sizeof(*s));
	for (uint32_t i = 0; i <= nthreads; i++) {
		struct rec *r = &wp->r[i];
		uint32_t ph = atomic_load(&r->phase);

		if (ph == PH_ADD || ph == PH_SUB)
			return false;
		s->held += atomic_load(&r->held);
		s->contrib += atomic_load(&r->contrib);
		s->pend += atomic_load(&r->pend);
		s->inside |= atomic_load(&r->pend) != 0;
	}
	return true;
}

/* Stop the victim where its records agree with the counter. */
static bool stop_victim(pid_t pid, struct wproc *wp, struct snapshot *s)
{
	for (int tries = 0; tries < 1000; tries++) {
		int st;

		kill(pid, SIGSTOP);
		if (waitpid(pid, &st, WUNTRACED) != pid || !WIFSTOPPED(st))
			return false;
		if (consistent(wp, s))
			return true;
		kill(pid, SIGCONT);
		sched_yield();
	}
	return false;
}

static void dump(bulkhead_t *bh);

struct tally {
	uint64_t kills, inside, natural, detect_max_ns, recoverers, probes, audits;
	int64_t reclaimed;
};

/* A kill and what the victim held then. */
struct kill {
	uint32_t slot;
	pid_t pid;
	struct snapshot s;
	bool recovering; /* it held the lock with a recovery log open */
};

/* The pid of the process that holds the internal lock with a recovery log
 * open (it is recovering), or 0. */
static pid_t recovering_pid(struct bhs_att *a, struct bhs_seg *g)
{
	uint32_t owner = (atomic_load(&g->lock) & 0xffffu) - 1u;

	if (!atomic_load(&g->rlog.open) || owner >= a->nprocs)
		return 0;
	return atomic_load(&a->procs[owner].pid);
}

static void dump_hist(uint32_t slot);

/* While the victim is stopped with its records consistent, the library's
 * account of what it holds (its ledgers and the grants made to it) must
 * agree with them: exactly what they say it holds, plus at most what its
 * threads are asking for or giving back in calls under way. Skipped while
 * a window of its ledgers is open (the account is not settled then). */
static void check_ledgers(struct bhs_att *a, struct kill *k)
{
	for (uint32_t i = 0; i < a->nprocs; i++) {
		bool open;
		uint64_t h;

		if (atomic_load(&a->procs[i].state) != PS_LIVE ||
		    atomic_load(&a->procs[i].pid) != k->pid)
			continue;
		h = bhs_proc_holdings(a, i, &open);
		if (!open && ((int64_t)h < k->s.held || (int64_t)h > k->s.held + k->s.pend)) {
			fail("worker %d holds %" PRIu64 " by the library's ledgers, %" PRId64
			     " (+%" PRId64 " in a call) by its records",
			     (int)k->pid, h, k->s.held, k->s.pend);
			dump_hist(k->slot);
		}
		return;
	}
}

/* Between kills: stop a worker where its records agree, hold its ledgers
 * against them, and let it go on. */
static void probe_one(struct bhs_att *a, uint64_t *rng, struct tally *t)
{
	struct kill k = { .slot = below(rng, nprocs) };
	struct wproc *wp = &ext->p[k.slot];

	if (!atomic_load(&wp->ready))
		return;
	k.pid = atomic_load(&wp->pid);
	if (!stop_victim(k.pid, wp, &k.s)) {
		fail("could not stop worker %d", (int)k.pid);
		return;
	}
	check_ledgers(a, &k);
	kill(k.pid, SIGCONT);
	t->probes++;
}

/* Stop every worker where its records agree and, when nothing is under
 * way in the library (no window open, the lock free, the word not
 * frozen), hold the word against the ledgers: the permits it counts as
 * held are exactly those the living hold, and each worker's within what
 * its records allow. */
static void audit_all(bulkhead_t *bh, struct tally *t)
{
	struct bhs_att *a = att_of(bh);
	struct bhs_seg *g = a->seg;
	struct kill k[MAX_PROCS];
	uint32_t stopped = 0;
	uint64_t sum = 0, w;
	bool open = false;

	for (uint32_t i = 0; i < nprocs; i++)
		if (!atomic_load(&ext->p[i].ready))
			return;
	for (; stopped < nprocs; stopped++) {
		k[stopped] = (struct kill){ .slot = stopped, .pid = atomic_load(&ext->p[stopped].pid) };
		if (!stop_victim(k[stopped].pid, &ext->p[stopped], &k[stopped].s))
			break;
	}
	w = atomic_load(&g->word);
	if (stopped == nprocs && !atomic_load(&g->lock) && !(w & S_FROZEN)) {
		for (uint32_t i = 0; i < a->nprocs; i++) {
			bool o;

			if (atomic_load(&a->procs[i].state) == PS_LIVE)
				sum += bhs_proc_holdings(a, i, &o), open |= o;
		}
		if (!open && !atomic_load(&g->lock) && atomic_load(&g->word) == w) {
			t->audits++;
			for (uint32_t i = 0; i < nprocs; i++)
				check_ledgers(a, &k[i]);
			if (sum != (uint64_t)w_held(w)) {
				fail("the word counts %" PRId64 " held, the ledgers of the living %" PRIu64,
				     w_held(w), sum);
				for (uint32_t i = 0; i < nprocs; i++)
					dump_hist(i);
				dump(bh);
			}
		}
	}
	for (uint32_t i = 0; i < stopped; i++)
		kill(k[i].pid, SIGCONT);
}

/* Stop the worker in slot where its records agree, take its share off the
 * global counter, and kill it. */
static bool kill_at(struct bhs_att *a, struct bhs_seg *g, uint32_t slot, struct kill *k)
{
	struct wproc *wp = &ext->p[slot];

	k->slot = slot;
	k->pid = atomic_load(&wp->pid);
	if (!stop_victim(k->pid, wp, &k->s)) {
		fail("could not stop worker %d", (int)k->pid);
		return false;
	}
	k->recovering = recovering_pid(a, g) == k->pid; /* looked at while stopped */
	check_ledgers(a, k);
	atomic_fetch_sub(&ext->inflight, k->s.contrib);
	kill(k->pid, SIGKILL);
	kill(k->pid, SIGCONT);
	waitpid(k->pid, NULL, 0);
	return true;
}

/* The worker slot of the process recovering now, or -1. */
static int recovering_worker(struct bhs_att *a, struct bhs_seg *g)
{
	pid_t pid = recovering_pid(a, g);

	for (uint32_t i = 0; pid && i < nprocs; i++)
		if (atomic_load(&ext->p[i].pid) == pid)
			return (int)i;
	return -1;
}

/* After a kill left to the survivors: watch for one of them recovering
 * the victim, and kill it in the middle of its recovery (the next lock
 * holder must finish or redo it, and count both deaths exactly). */
static bool kill_recoverer(bulkhead_t *bh, struct bhs_seg *g, uint64_t deaths, struct kill *k)
{
	struct bhs_att *a = att_of(bh);
	uint64_t t0 = bh_now_ns();
	int slot;

	while (atomic_load(&g->deaths) == deaths && bh_now_ns() - t0 < 300 * BH_MSEC) {
		if ((slot = recovering_worker(a, g)) >= 0 && atomic_load(&ext->p[slot].ready))
			return kill_at(a, g, (uint32_t)slot, k);
		sched_yield(); /* on a loaded machine the recoverer needs the CPU */
	}
	return false;
}

static void kill_one(bulkhead_t *bh, struct bhs_seg *g, uint64_t *rng, struct tally *t)
{
	struct kill k[2];
	uint32_t nk = 1;
	uint64_t deaths, r0, t0, d;
	int64_t held = 0, pend = 0;
	bool hunt = below(rng, 4) == 0, natural = !hunt && below(rng, 8) == 0;

	k[0].slot = below(rng, nprocs);
	while (!atomic_load(&ext->p[k[0].slot].ready) && !atomic_load(&ext->failed))
		usleep(100);
	deaths = atomic_load(&g->deaths);
	r0 = atomic_load(&g->reclaimed);
	if (!kill_at(att_of(bh), g, k[0].slot, &k[0]))
		return;
	t0 = bh_now_ns();
	if (hunt) /* left to the survivors, one of which is killed recovering */
		nk += kill_recoverer(bh, g, deaths, &k[1]);
	else if (!natural)
		bhs_scan_now(bh);
	while (atomic_load(&g->deaths) < deaths + nk) {
		struct bh_stats st;

		if (getenv("BH_STRESS_DEBUG") && bh_now_ns() - t0 > 500 * BH_MSEC) {
			dump(bh);
			exit(3);
		}
		if (bh_now_ns() - t0 > DETECT_NS) {
			fail("the death of worker %d was not processed within %d ms", (int)k[0].pid,
			     (int)(DETECT_NS / BH_MSEC));
			return;
		}
		usleep(natural || hunt ? 2000 : 200);
		if (natural || hunt)
			bh_stats(bh, &st); /* a caller; looks when a look is due */
		else
			bhs_scan_now(bh);
	}
	if (natural && bh_now_ns() - t0 > t->detect_max_ns)
		t->detect_max_ns = bh_now_ns() - t0;
	if (atomic_load(&g->deaths) != deaths + nk)
		fail("%" PRIu64 " deaths counted for %u kills", atomic_load(&g->deaths) - deaths,
		     nk);
	for (uint32_t i = 0; i < nk; i++) {
		held += k[i].s.held;
		pend += k[i].s.pend;
		t->inside += k[i].s.inside;
	}
	d = atomic_load(&g->reclaimed) - r0;
	if ((int64_t)d < held || (int64_t)d > held + pend) {
		for (uint32_t i = 0; i < nk; i++)
			dump_hist(k[i].slot);
		fail("reclaimed %" PRIu64 " from %u worker(s) (%d first), which held %" PRId64
		     " (+%" PRId64 " in a call)",
		     d, nk, (int)k[0].pid, held, pend);
	}
	t->kills += nk;
	t->recoverers += nk > 1 && k[1].recovering;
	t->natural += natural || hunt;
	t->reclaimed += (int64_t)d;
	for (uint32_t i = 0; i < nk; i++)
		start_worker(k[i].slot, rnd(rng));
}

/* A worker's last calls, oldest first, for a failure report. */
static void dump_hist(uint32_t slot)
{
	static const char *names[] = { "?", "try", "timed", "forever", "async", "callback",
				       "cancel", "release" };

	for (uint32_t i = 0; i <= nthreads; i++) {
		struct rec *r = &ext->p[slot].r[i];
		uint32_t end = atomic_load(&r->hpos);

		fprintf(stderr, "  worker %d thread %u (held %" PRId64 ", pend %u, phase %u):",
			(int)atomic_load(&ext->p[slot].pid), i, atomic_load(&r->held),
			atomic_load(&r->pend), atomic_load(&r->phase));
		for (uint32_t j = end > 16 ? end - 16 : 0; j < end; j++) {
			uint32_t v = atomic_load(&r->hist[j % 16]);

			fprintf(stderr, " %s(%u)=%d", names[(v >> 24) & 7], (v >> 16) & 0xff,
				(int)(int16_t)(v & 0xffff));
		}
		fprintf(stderr, "\n");
	}
}

static void dump(bulkhead_t *bh);
/* The segment as the killer sees it, for a failure report. */
static void dump(bulkhead_t *bh)
{
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct bhs_att *a = bh->ext;
	uint64_t w = atomic_load(&g->word);

	fprintf(stderr, "  word: avail %" PRId64 " limit %u queued %u%s%s%s%s; lock 0x%08x; "
		"deaths %" PRIu64 " rebuilds %" PRIu64 " gave up %" PRIu64 "\n",
		w_avail(w), w_limit(w), s_nq(w), w & S_FROZEN ? " FROZEN" : "",
		w & W_STARVING ? " STARVING" : "", w & W_WOKEN ? " WOKEN" : "",
		w & W_CLOSED ? " CLOSED" : "", atomic_load(&g->lock),
		atomic_load(&g->deaths), atomic_load(&g->rebuilds), atomic_load(&g->rebuild_waits));
	for (uint32_t i = 0; i < a->nprocs; i++) {
		struct bhs_proc *p = &a->procs[i];

		if (atomic_load(&p->state) == PS_FREE)
			continue;
		fprintf(stderr, "  proc %u: pid %d gen %u %s\n", i, (int)atomic_load(&p->pid),
			atomic_load(&p->gen), bhs_proc_alive(a, i) ? "alive" : "DEAD");
	}
	for (uint32_t i = 0; i < a->nslots; i++) {
		struct bhs_slot *sl = &a->slots[i];
		uint64_t l = atomic_load(&sl->ledger);

		uint64_t in = atomic_load(&sl->in), out = atomic_load(&sl->out);

		if (atomic_load(&sl->owner))
			fprintf(stderr,
				"  slot %u: owner %u held %" PRIu64 " (ledger %" PRIu64 "%s in %" PRIu64
				"%s out %" PRIu64 "%s debit %" PRIu64 ")\n",
				i, atomic_load(&sl->owner) - 1, held_of(sl, l),
				(uint64_t)(l & S_HELD_MASK), l & S_PEND ? " PEND" : "",
				(uint64_t)(in & S_HELD_MASK), in & S_PEND ? " PEND" : "",
				(uint64_t)(out & S_HELD_MASK), out & S_PEND ? " PEND" : "",
				atomic_load(&sl->debit));
	}
	for (uint32_t i = 0; i < a->nslots + a->nextra; i++) {
		struct bhs_qnode *q = &a->qnodes[i];

		if (atomic_load(&q->kind) != QK_NONE || atomic_load(&q->linked))
			fprintf(stderr, "  node %u: owner %d kind %u state %u n %u linked %u\n", i,
				(int)atomic_load(&q->owner) - 1, atomic_load(&q->kind),
				atomic_load(&q->state), atomic_load(&q->n), atomic_load(&q->linked));
	}
}

static int finish(bulkhead_t *bh, struct tally *t)
{
	struct bh_stats st;
	uint64_t end = bh_now_ns() + 60 * BH_SEC;
	int status, bad = 0;

	atomic_store(&ext->stop, 1);
	for (uint32_t i = 0; i < nprocs; i++) {
		pid_t pid = atomic_load(&ext->p[i].pid);

		while (waitpid(pid, &status, WNOHANG) == 0) {
			if (bh_now_ns() > end) {
				fail("worker %d did not finish: a waiter stranded?", (int)pid);
				kill(pid, SIGKILL);
			}
			usleep(1000);
		}
		bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	}
	if (bad)
		fail("a worker exited abnormally");
	bh_stats(bh, &st);
	if (st.in_flight || st.queued)
		fail("at quiesce %llu in flight, %llu queued", (unsigned long long)st.in_flight,
		     (unsigned long long)st.queued);
	if (st.processes != 1)
		fail("at quiesce %llu processes attached", (unsigned long long)st.processes);
	if (bh_try_acquire(bh, limit) != 0 || bh_try_acquire(bh, 1) != -EBUSY ||
	    bh_release(bh, limit) != 0)
		fail("not every permit is back exactly once");
	if (atomic_load(&ext->inflight) != 0)
		fail("the outside count ends at %" PRId64, atomic_load(&ext->inflight));
	if (atomic_load(&ext->timed_out) >= PROMPT_MIN &&
	    atomic_load(&ext->timed_out_prompt) * 10 < atomic_load(&ext->timed_out))
		fail("timeouts fire late: %" PRIu64 " of %" PRIu64 " came back within %d ms of the "
		     "deadline", atomic_load(&ext->timed_out_prompt), atomic_load(&ext->timed_out),
		     (int)(PROMPT_NS / BH_MSEC));
	if ((int64_t)st.reclaimed != t->reclaimed)
		fail("reclaimed %llu in all, the kills account for %" PRId64,
		     (unsigned long long)st.reclaimed, t->reclaimed);
	return atomic_load(&ext->failed);
}

int main(void)
{
	const char *s = getenv("BH_STRESS_SEED");
	struct bh_config cfg = { 0 };
	struct tally t = { 0 };
	bulkhead_t *bh;
	struct bhs_seg *g;
	uint64_t rng, end, ops = 0, rebuilds;
	bool fenced;
	char dir[] = "/tmp/bh-stress-shm.XXXXXX";
	int r;

	seconds = env_num("BH_STRESS_SECONDS", 3);
	seed = s && *s ? strtoull(s, NULL, 0) : mix(bh_now_ns() ^ ((uint64_t)getpid() << 32));
	rng = seed;
	limit = 2 + below(&rng, 9);
	nprocs = (uint32_t)env_num("BH_STRESS_PROCS", 4);
	nthreads = (uint32_t)env_num("BH_STRESS_THREADS", 3);
	nprocs = nprocs < 1 ? 1 : nprocs > MAX_PROCS ? MAX_PROCS : nprocs;
	nthreads = nthreads < 1 ? 1 : nthreads > MAX_THREADS ? MAX_THREADS : nthreads;
	cfg.max_concurrent = limit;
	cfg.queue_capacity = 2 + below(&rng, 30);
	cfg.flags = below(&rng, 2) ? BH_FAIR : 0;
	/* one run in four uses the fallback for kernels without membarrier(2) */
	fenced = env_num("BH_STRESS_FENCED", below(&rng, 4) == 0) != 0;
	bhs_test_fenced(fenced);
	printf("stress_shm: seed=0x%016" PRIx64 " seconds=%g (replay: BH_STRESS_SEED=0x%016" PRIx64
	       ")\n",
	       seed, seconds, seed);
	printf("stress_shm: %u processes x %u threads, limit %u, queue %u, %s%s\n", nprocs,
	       nthreads, limit, cfg.queue_capacity, cfg.flags ? "fair" : "unfair",
	       fenced ? ", fenced transfers" : "");
	fflush(stdout);
	if (!mkdtemp(dir))
		return 1;
	setenv("BH_SHM_DIR", dir, 1);
	ext = mmap(NULL, sizeof(*ext), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ext == MAP_FAILED)
		return 1;
	snprintf(name, sizeof(name), "stress-%d", (int)getpid());
	if ((r = bh_shm_open(name, &cfg, BH_SHM_CREATE | BH_SHM_EXCL, &bh)) != 0) {
		printf("stress_shm: FAIL bh_shm_open returned %d\n", r);
		return 1;
	}
	g = bhs_segment(bh, NULL);
	inherited = bh;
	for (uint32_t i = 0; i < nprocs; i++)
		start_worker(i, rnd(&rng));
	end = bh_now_ns() + (uint64_t)(seconds * 1e9);
	while (bh_now_ns() < end && !atomic_load(&ext->failed)) {
		uint64_t pause = bh_now_ns() + (1000 + below(&rng, 15000)) * BH_USEC;

		while (bh_now_ns() < pause && !atomic_load(&ext->failed)) {
			if (below(&rng, 8))
				probe_one(att_of(bh), &rng, &t);
			else
				audit_all(bh, &t);
			usleep(200);
		}
		kill_one(bh, g, &rng, &t);
	}
	finish(bh, &t);
	for (uint32_t i = 0; i < nprocs; i++)
		for (uint32_t k = 0; k <= nthreads; k++)
			ops += atomic_load(&ext->p[i].r[k].ops);
	rebuilds = atomic_load(&g->rebuilds);
	if (atomic_load(&ext->failed))
		dump(bh);
	bh_destroy(bh);
	bh_shm_unlink(name);
	rmdir(dir);
	if (atomic_load(&ext->failed)) {
		printf("stress_shm: FAIL after %u kills (seed=0x%016" PRIx64 "): %s\n",
		       (unsigned)t.kills, seed, ext->why);
		return 1;
	}
	printf("stress_shm: PASS seed=0x%016" PRIx64 " kills=%" PRIu64 " (inside a call %" PRIu64
	       ", left to the survivors %" PRIu64 ", slowest found %.0f ms, recovering %" PRIu64
	       ") probes=%" PRIu64 " audits=%" PRIu64 " reclaimed=%" PRId64
	       " rebuilds=%" PRIu64 " | ok: timed=%" PRIu64 " forever=%" PRIu64 " async=%" PRIu64
	       " | timed_out=%" PRIu64 " busy=%" PRIu64 " cancelled=%" PRIu64 " handed=%" PRIu64
	       " ops(last workers)=%" PRIu64 " timed_out_within_%dms=%" PRIu64 "\n",
	       seed, t.kills, t.inside, t.natural, (double)t.detect_max_ns / 1e6, t.recoverers,
	       t.probes, t.audits, t.reclaimed,
	       rebuilds, atomic_load(&ext->timed_ok),
	       atomic_load(&ext->forever_ok), atomic_load(&ext->async_ok),
	       atomic_load(&ext->timed_out), atomic_load(&ext->busy),
	       atomic_load(&ext->async_cancel), atomic_load(&ext->handed), ops,
	       (int)(PROMPT_NS / BH_MSEC), atomic_load(&ext->timed_out_prompt));
	return 0;
}
