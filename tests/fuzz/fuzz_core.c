/* A fuzz harness for the core limiter, checked against the reference model
 * (tests/ref_model.h).
 *
 * The input is decoded into one bulkhead's configuration and then a
 * sequence of operations by three kinds of actor: the main thread (try,
 * release, close, resize, async acquire and cancel, the clock), four
 * blocking waiters and four async nodes. Each blocking waiter is a real
 * thread, but only one thread ever runs at a time: a waiter runs from the
 * moment the harness hands it a call until it returns or enters the
 * library's wait hook, which parks it. So every interleaving decision —
 * which waiter's wait returns next, and with what (woken or spurious,
 * -EINTR, -EAGAIN, -ETIMEDOUT), when pthread_cancel strikes a waiter, when
 * time passes — comes from the input, and a run is exactly repeatable.
 *
 * After every operation the harness compares: the result with the model's;
 * the queue observers' and async callbacks' events, in order; the whole of
 * bh_stats (gauges, counters, both wait histograms); and the futex rule
 * that no parked waiter's word changed without a wake for it (a lost
 * wakeup). At the end it closes the bulkhead, lets every waiter return,
 * gives back what is in flight and checks it all once more. Any difference
 * prints the operations so far and aborts, which libFuzzer saves as a
 * crash input.
 *
 * Built with -DBHF_SHM (fuzz_shm_api, replay_shm_api) the same harness
 * drives a host-wide bulkhead instead: bh_shm_open creates a small segment
 * in a private BH_SHM_DIR under TMPDIR for each input, the host-wide
 * layer's own hooks (src/shm/hooks.h) take the waiters' wait, wake and
 * clock, and at the end the name is unlinked. Every check above applies,
 * against the same model, with these differences, each one what the
 * host-wide semantics document (include/bulkhead/shm.h, bulkhead(7)):
 *   - permits belong to a process: a release succeeds only for what the
 *     process's ledger holds, and permits handed to a blocking waiter join
 *     the ledger when that waiter's thread runs (the model's host flag,
 *     ref_set_host; over-releasing is -EOVERFLOW and counted either way);
 *   - the queue capacity is at most the segment's queue nodes (the model
 *     is told the geometry);
 *   - bh_stats also says processes (1: this one) and reclaimed (0: nobody
 *     dies here), checked in both builds (0 and 0 process-locally);
 *   - the layer has no queue observers, so only the callbacks are compared
 *     as events, not 'Q' and 'G' (the queue's order is still checked
 *     through the results, the callbacks and stats.queued);
 *   - callbacks run on the process's agent thread, soon after the grant:
 *     before comparing, the harness calls bh_cancel_async on each node the
 *     model has finished, which must return 0 and waits for its callback;
 *     the callbacks of one operation are compared in node order, the
 *     agent's delivery order;
 *   - a waiter sleeps at most the poll interval (10 ms of the harness's
 *     clock, longer than any deadline it sets) before it looks for dead
 *     processes, so a wait for ever can end in -ETIMEDOUT, which the model
 *     takes as a spurious wakeup;
 *   - byte 1 bit 3 picks a segment of 3 thread slots instead of 16, so some
 *     threads share the process's slot (and queue on extra nodes). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bulkhead.h"
#ifdef BHF_SHM
#include <unistd.h>

#include "bulkhead/shm.h"
#endif
#include "fuzz_hooks.h"
#include "fuzz_seeds.h"
#include "ref_model.h"

#define NW REF_NSYNC
#define NA (REF_NODES - REF_NSYNC)
#define MAX_OPS 400
#define LOG_MAX 16384

enum phase { W_IDLE, W_RUNNING, W_PARKED };

struct waiter {
	unsigned id;
	pthread_t thread;
	bool alive;
	sem_t go;
	uint32_t n;
	uint64_t deadline;
	int result;
	enum phase phase;
	/* while parked in the wait hook */
	_Atomic uint32_t *word;
	uint32_t expect;
	uint64_t wait_deadline;
	bool woken;
	int resume_with;
	const struct bh_qlink *link; /* its node, from the queued observer */
};

static struct {
	bulkhead_t *bh;
	struct ref_bh m;
	_Atomic uint64_t now; /* read by the host-wide agent thread too */
	struct waiter w[NW];
	struct bh_async a[NA];
	sem_t back;
	struct ref_event ev[REF_MAX_EVENTS];
	unsigned nev;
	bool ev_overflow;
	const uint8_t *in;
	size_t len, pos;
	char log[LOG_MAX];
	size_t loglen;
} H;

static __thread struct waiter *self;
/* Events come from the main thread and the waiters, which never run at
 * the same time, and (host-wide) from the agent thread. */
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- reporting ---------------------------------------------------------- */

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
	va_list ap;
	int n;

	if (H.loglen >= LOG_MAX - 2)
		return;
	va_start(ap, fmt);
	n = vsnprintf(H.log + H.loglen, LOG_MAX - 1 - H.loglen, fmt, ap);
	va_end(ap);
	if (n > 0)
		H.loglen += (size_t)n < LOG_MAX - 1 - H.loglen ? (size_t)n : LOG_MAX - 1 - H.loglen;
	if (H.loglen < LOG_MAX - 1)
		H.log[H.loglen++] = '\n';
	H.log[H.loglen] = '\0';
}

__attribute__((noreturn, format(printf, 1, 2))) static void diverge(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "bhfuzz: operations so far:\n%s", H.log);
	fprintf(stderr, "bhfuzz: DIVERGENCE from the reference model: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nbhfuzz: input (%zu bytes):", H.len);
	for (size_t i = 0; i < H.len; i++)
		fprintf(stderr, "%s%02x", i % 32 ? "" : "\n  ", H.in[i]);
	fprintf(stderr, "\n");
	abort();
}

static const char *res_name(int r, char *buf)
{
	switch (r) {
	case REF_BLOCKS: return "(waits)";
	case 0: return "0";
	case -EBUSY: return "-EBUSY";
	case -EINVAL: return "-EINVAL";
	case -ESHUTDOWN: return "-ESHUTDOWN";
	case -ETIMEDOUT: return "-ETIMEDOUT";
	case -EOVERFLOW: return "-EOVERFLOW";
	case -EALREADY: return "-EALREADY";
	case -EINTR: return "-EINTR";
	case -EAGAIN: return "-EAGAIN";
	}
	sprintf(buf, "%d", r);
	return buf;
}

static void expect(const char *what, int got, int want)
{
	char a[16], b[16];

	note("  %s -> %s", what, res_name(got, a));
	if (got != want)
		diverge("%s returned %s, the model says %s", what, res_name(got, a),
			res_name(want, b));
}

/* ---- the hooks ---------------------------------------------------------- */

static void event(char type, unsigned id, int result)
{
	pthread_mutex_lock(&ev_mu);
	if (H.nev == REF_MAX_EVENTS)
		H.ev_overflow = true;
	else
		H.ev[H.nev++] = (struct ref_event){ .type = type, .id = (uint8_t)id,
						    .result = (int16_t)result };
	pthread_mutex_unlock(&ev_mu);
}

static int async_id(const struct bh_qlink *l)
{
	for (unsigned j = 0; j < NA; j++)
		if (&H.a[j].link == l)
			return NW + (int)j;
	return -1;
}

/* Wait for the turn. A pthread_cancel sent meanwhile acts when the turn
 * comes, at the pthread_testcancel: inside the library's wait, as in the
 * real futex wait, but outside sem_wait (ThreadSanitizer loses track of a
 * thread cancelled inside a call it intercepts). */
static void park(struct waiter *w)
{
	int old;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	while (sem_wait(&w->go) != 0)
		;
	pthread_setcancelstate(old, NULL);
	pthread_testcancel();
}

/* The wait parks the calling waiter and hands the turn back; it returns
 * what the harness decides. A word that no longer holds expect returns at
 * once, as FUTEX_WAIT does. */
static int fw_wait(void *ctx, _Atomic uint32_t *word, uint32_t expect_v, uint64_t deadline)
{
	struct waiter *w = self;

	(void)ctx;
	if (!w)
		diverge("the library waited on the main thread");
	if (atomic_load_explicit(word, memory_order_relaxed) != expect_v)
		return -EAGAIN;
	w->word = word;
	w->expect = expect_v;
	w->wait_deadline = deadline;
	w->woken = false;
	w->phase = W_PARKED;
	sem_post(&H.back);
	park(w);
	w->phase = W_RUNNING;
	return w->resume_with;
}

static void fw_wake(void *ctx, _Atomic uint32_t *word)
{
	(void)ctx;
	for (unsigned k = 0; k < NW; k++)
		if (H.w[k].phase == W_PARKED && H.w[k].word == word)
			H.w[k].woken = true;
}

static uint64_t fw_now(void *ctx)
{
	(void)ctx;
	return H.now;
}

static void fw_queued(void *ctx, const struct bh_qlink *l)
{
	int id = async_id(l);

	(void)ctx;
	if (id < 0) { /* a blocking waiter queues itself, on its own thread */
		if (!self)
			diverge("a blocking node was queued from the main thread");
		self->link = l;
		id = (int)self->id;
	}
	event('Q', (unsigned)id, 0);
}

static void fw_granted(void *ctx, const struct bh_qlink *l)
{
	int id = async_id(l);

	(void)ctx;
	for (unsigned k = 0; id < 0 && k < NW; k++)
		if (H.w[k].phase != W_IDLE && H.w[k].link == l)
			id = (int)k;
	if (id < 0)
		diverge("a node no waiter owns was granted");
	event('G', (unsigned)id, 0);
}

static void fw_async_done(struct bh_async *node, int result)
{
	event('C', NW + (unsigned)(node - H.a), result);
}

static const struct bhf_hooks hooks = {
	.wait = fw_wait,
	.wake = fw_wake,
	.now = fw_now,
	.queued = fw_queued,
	.granted = fw_granted,
};

/* ---- waiter threads ----------------------------------------------------- */

static void *waiter_main(void *p)
{
	struct waiter *w = p;

	self = w;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL); /* but inside bh_acquire */
	for (;;) {
		while (sem_wait(&w->go) != 0)
			;
		w->phase = W_RUNNING;
		w->link = NULL;
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		w->result = bh_acquire(H.bh, w->n, w->deadline);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		w->phase = W_IDLE;
		sem_post(&H.back);
	}
	return NULL;
}

static void ensure_thread(struct waiter *w)
{
	if (w->alive)
		return;
	sem_init(&w->go, 0, 0);
	if (pthread_create(&w->thread, NULL, waiter_main, w) != 0) {
		fprintf(stderr, "bhfuzz: cannot create a thread\n");
		abort();
	}
	w->alive = true;
}

/* Give w the turn until it parks again or returns. */
static void run_waiter(struct waiter *w)
{
	sem_post(&w->go);
	while (sem_wait(&H.back) != 0)
		;
}

static int waiter_outcome(const struct waiter *w)
{
	return w->phase == W_PARKED ? REF_BLOCKS : w->result;
}

/* ---- checks after every operation ----------------------------------------- */

#ifdef BHF_SHM
/* Host-wide, a callback runs on the process's agent thread, soon after the
 * grant: for each node the model has finished, bh_cancel_async (which
 * returns 0 once the callback has run, and waits for it) makes sure it has
 * run before the events are compared. */
static void await_callbacks(void)
{
	for (unsigned i = 0; i < H.m.nev; i++) {
		const struct ref_event *e = &H.m.ev[i];
		int r;

		if (e->type != 'C')
			continue;
		r = bh_cancel_async(H.bh, &H.a[e->id - NW]);
		if (r != 0)
			diverge("async %u: its callback should have run, but bh_cancel_async "
				"returned %d", e->id - NW, r);
	}
}

/* Keep only the callbacks, in node order: the host-wide layer has no queue
 * observers, and its agent delivers the callbacks of one operation in the
 * order of its nodes in the segment, not of the grants. */
static unsigned callbacks_only(struct ref_event *ev, unsigned n)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (ev[i].type == 'C')
			ev[k++] = ev[i];
	for (unsigned i = 1; i < k; i++)
		for (unsigned j = i; j > 0 && ev[j - 1].id > ev[j].id; j--) {
			struct ref_event t = ev[j];

			ev[j] = ev[j - 1];
			ev[j - 1] = t;
		}
	return k;
}
#endif

static void check_events(void)
{
	struct ref_bh *m = &H.m;

#ifdef BHF_SHM
	await_callbacks();
	pthread_mutex_lock(&ev_mu);
	H.nev = callbacks_only(H.ev, H.nev);
	pthread_mutex_unlock(&ev_mu);
	m->nev = callbacks_only(m->ev, m->nev);
#endif
	if (H.ev_overflow || m->ev_overflow)
		diverge("more than %d events in one operation", REF_MAX_EVENTS);
	for (unsigned i = 0; i < H.nev || i < m->nev; i++) {
		const struct ref_event *g = i < H.nev ? &H.ev[i] : NULL;
		const struct ref_event *e = i < m->nev ? &m->ev[i] : NULL;

		if (g && g->type == 'C')
			note("  event C%u %d", g->id, g->result);
		else if (g)
			note("  event %c%u", g->type, g->id);
		if (!g || !e || g->type != e->type || g->id != e->id || g->result != e->result)
			diverge("event %u: the library reported %c%d (%d), the model %c%d (%d)", i,
				g ? g->type : '-', g ? g->id : -1, g ? g->result : 0,
				e ? e->type : '-', e ? e->id : -1, e ? e->result : 0);
	}
	H.nev = 0;
	H.m.nev = 0;
}

static void check_hist(const char *name, const struct bh_hist *g, const struct bh_hist *e)
{
	if (g->count != e->count || g->sum_ns != e->sum_ns)
		diverge("stats.%s: count %llu sum %llu ns, the model %llu and %llu ns", name,
			(unsigned long long)g->count, (unsigned long long)g->sum_ns,
			(unsigned long long)e->count, (unsigned long long)e->sum_ns);
	if (memcmp(g->buckets, e->buckets, sizeof(g->buckets)) != 0)
		diverge("stats.%s: the buckets differ", name);
}

#define CHECK_FIELD(f)                                                                   \
	do {                                                                             \
		if (got.f != want.f)                                                     \
			diverge("stats." #f " is %llu, the model says %llu",             \
				(unsigned long long)got.f, (unsigned long long)want.f);  \
	} while (0)

static void check_stats(void)
{
	static struct bh_stats got, want; /* 10 KB each: off the stack */

	bh_stats(H.bh, &got);
	ref_stats(&H.m, &want);
	CHECK_FIELD(limit);
	CHECK_FIELD(in_flight);
	CHECK_FIELD(queued);
	CHECK_FIELD(acquired);
	CHECK_FIELD(released);
	CHECK_FIELD(rejected);
	CHECK_FIELD(timed_out);
	CHECK_FIELD(cancelled);
	CHECK_FIELD(over_released);
	CHECK_FIELD(reclaimed);
	CHECK_FIELD(processes);
	check_hist("wait", &got.wait, &want.wait);
	check_hist("wait_failed", &got.wait_failed, &want.wait_failed);
	check_hist("hold", &got.hold, &want.hold);
}

/* A parked waiter whose word changed without a wake would sleep forever;
 * so would one the model has offered permits to, or decided, unwoken. */
static void check_waiters(void)
{
	for (unsigned k = 0; k < NW; k++) {
		const struct waiter *w = &H.w[k];
		enum ref_state st = H.m.req[k].st;

		if (w->phase == W_PARKED) {
			if (atomic_load_explicit(w->word, memory_order_relaxed) != w->expect &&
			    !w->woken)
				diverge("lost wakeup: waiter %u's state changed and nobody woke it", k);
			if ((st == REF_OFFERED || ref_final(st)) && !w->woken)
				diverge("lost wakeup: the model has waiter %u %s, nobody woke it", k,
					st == REF_OFFERED ? "offered the permits" : "done");
			if (st == REF_IDLE)
				diverge("waiter %u is still waiting; the model has it done", k);
		} else if (st != REF_IDLE) {
			diverge("waiter %u returned; the model has it still waiting", k);
		}
	}
}

static void check_all(void)
{
	check_events();
	check_stats();
	check_waiters();
}

/* ---- operations ---------------------------------------------------------- */

static void op_try(uint32_t n)
{
	int want = ref_try_acquire(&H.m, REF_MAIN, n, H.now);

	note("try_acquire(%u)", n);
	expect("bh_try_acquire", bh_try_acquire(H.bh, n), want);
}

static void op_acquire(unsigned k, uint32_t n, uint64_t deadline)
{
	struct waiter *w = &H.w[k];
	int want;

	if (w->phase != W_IDLE)
		return;
	note("waiter %u: acquire(%u, %s%llu) at %llu", k, n,
	     deadline == BH_FOREVER ? "forever " : "", (unsigned long long)deadline,
	     (unsigned long long)H.now);
	want = ref_acquire(&H.m, k, n, deadline, H.now);
	ensure_thread(w);
	w->n = n;
	w->deadline = deadline;
	run_waiter(w);
	expect("bh_acquire", waiter_outcome(w), want);
}

static void op_resume(unsigned k, int how)
{
	struct waiter *w = &H.w[k];
	char a[16];
	int want, model_how;

	if (w->phase != W_PARKED)
		return;
	if (how == -ETIMEDOUT) {
		if (w->wait_deadline == BH_FOREVER)
			how = 0;
		else if (H.now < w->wait_deadline)
			H.now = w->wait_deadline; /* time passes until the deadline */
	}
	/* A sleep shorter than the waiter's deadline (the host-wide layer's
	 * poll for dead processes) that ends is, to the waiter, a spurious
	 * wakeup. */
	model_how = how == -ETIMEDOUT && w->wait_deadline < w->deadline ? 0 : how;
	note("waiter %u: wait returns %s%s%s at %llu", k, res_name(how, a),
	     w->woken ? " (woken)" : "", how != model_how ? " (a poll)" : "",
	     (unsigned long long)H.now);
	want = ref_resume(&H.m, k, model_how, H.now);
	w->resume_with = how;
	run_waiter(w);
	expect("bh_acquire", waiter_outcome(w), want);
}

static void op_cancel(unsigned k)
{
	struct waiter *w = &H.w[k];
	void *ret = NULL;

	if (w->phase != W_PARKED)
		return;
	note("waiter %u: pthread_cancel at %llu", k, (unsigned long long)H.now);
	ref_cancel(&H.m, k, H.now);
	w->phase = W_RUNNING;
	pthread_cancel(w->thread);
	sem_post(&w->go); /* its turn: the cancel acts, the cleanup handler runs */
	pthread_join(w->thread, &ret);
	sem_destroy(&w->go);
	w->alive = false;
	w->phase = W_IDLE;
	if (ret != PTHREAD_CANCELED)
		diverge("waiter %u was not cancelled", k);
}

static void op_async(unsigned j, uint32_t n)
{
	unsigned id = NW + j;
	int want;

	if (H.m.req[id].st == REF_QUEUED)
		return; /* a queued node is the library's until it is done */
	note("async %u: acquire_async(%u) at %llu", j, n, (unsigned long long)H.now);
	want = ref_acquire_async(&H.m, REF_MAIN, id, n, H.now);
	expect("bh_acquire_async", bh_acquire_async(H.bh, &H.a[j], n, fw_async_done, NULL),
	       want);
}

static void op_cancel_async(unsigned j)
{
	int want = ref_cancel_async(&H.m, NW + j, H.now);

	note("async %u: cancel_async", j);
	expect("bh_cancel_async", bh_cancel_async(H.bh, &H.a[j]), want);
}

static void op_release(uint32_t n)
{
	int want = ref_release(&H.m, REF_MAIN, n, H.now);

	note("release(%u)", n);
	expect("bh_release", bh_release(H.bh, n), want);
}

static void op_close(void)
{
	int want = ref_close(&H.m, H.now);

	note("close");
	expect("bh_close", bh_close(H.bh), want);
}

static void op_set_limit(uint32_t limit)
{
	int want = ref_set_limit(&H.m, limit, H.now);

	note("set_limit(%u)", limit);
	expect("bh_set_limit", bh_set_limit(H.bh, limit), want);
}

static void op_record_hold(uint64_t ns)
{
	note("record_hold(%llu)", (unsigned long long)ns);
	ref_record_hold(&H.m, ns);
	bh_record_hold(H.bh, ns);
}

/* Arguments the API refuses with -EINVAL before touching anything. */
static void op_nulls(void)
{
	struct bh_async scratch;

	note("null arguments");
	expect("bh_acquire_async(NULL node)", bh_acquire_async(H.bh, NULL, 1, fw_async_done, NULL),
	       -EINVAL);
	expect("bh_acquire_async(NULL fn)", bh_acquire_async(H.bh, &scratch, 1, NULL, NULL),
	       -EINVAL);
	expect("bh_cancel_async(NULL)", bh_cancel_async(H.bh, NULL), -EINVAL);
	bh_destroy(NULL);
}

/* The kernel delivers the wakes it was asked for. */
static void op_wake_all(void)
{
	for (unsigned k = 0; k < NW; k++)
		if (H.w[k].phase == W_PARKED && H.w[k].woken)
			op_resume(k, 0);
}

/* ---- decoding ------------------------------------------------------------ */

static uint8_t next(void)
{
	return H.pos < H.len ? H.in[H.pos++] : 0;
}

static uint64_t deadline_of(uint8_t b)
{
	switch (b) {
	case BHF_DL_FOREVER: return BH_FOREVER;
	case BHF_DL_ZERO: return 0;
	case BHF_DL_NOW: return H.now;
	}
	return H.now + (uint64_t)b * 100;
}

static const int wait_results[4] = { 0, -EINTR, -EAGAIN, -ETIMEDOUT };

static void run_op(uint8_t op)
{
	uint8_t a;

	switch (op % BHF_NOPS) {
	case BHF_TRY: op_try(next() & 7); break;
	case BHF_ACQ:
		a = next();
		op_acquire((a & 7) % NW, (a >> 3) & 7, deadline_of(next()));
		break;
	case BHF_RESUME: a = next(); op_resume((a & 7) % NW, wait_results[(a >> 3) & 3]); break;
	case BHF_CANCEL: op_cancel((next() & 7) % NW); break;
	case BHF_ASYNC: a = next(); op_async(a & 3, (a >> 2) & 7); break;
	case BHF_ACANCEL: op_cancel_async(next() & 3); break;
	case BHF_REL: op_release(next() & 7); break;
	case BHF_CLOSE: op_close(); break;
	case BHF_SETLIM: op_set_limit(next() & 7); break;
	case BHF_CLOCK:
		H.now += ((uint64_t)next() + 1) * 50;
		note("clock %llu", (unsigned long long)H.now);
		break;
	case BHF_WAKEALL: op_wake_all(); break;
	case BHF_HOLD: op_record_hold(((uint64_t)next() + 1) * 1000); break;
	case BHF_NULLS: op_nulls(); break;
	}
}

#ifdef BHF_SHM
/* The segment: two processes, 16 thread slots or 3 (so some threads share
 * the process's slot and queue on extra nodes), 16 extra nodes (more than
 * the waiters and async nodes that can be queued at once, and one being
 * freed). Waiters poll every 10 ms of the harness's clock, longer than any
 * deadline it sets, so only a wait for ever ends in a poll. */
#define SHM_NAME "fuzz-api"
#define SHM_SLOTS 16
#define SHM_FEW_SLOTS 3
#define SHM_EXTRA 16
#define SHM_POLL_NS (10 * BH_MSEC)

static char shm_dirname[128];

static void shm_rmdir(void)
{
	bh_shm_unlink(SHM_NAME);
	rmdir(shm_dirname);
}

/* A private BH_SHM_DIR under TMPDIR, removed at exit (libFuzzer's own
 * exits skip that: tests/fuzz/run.sh points TMPDIR into the fuzz build). */
static void shm_dir(void)
{
	const char *tmp = getenv("TMPDIR");

	if (shm_dirname[0])
		return;
	snprintf(shm_dirname, sizeof(shm_dirname), "%s/bhfuzz-api.XXXXXX", tmp ? tmp : "/tmp");
	if (strlen(shm_dirname) >= sizeof(shm_dirname) - 1 || !mkdtemp(shm_dirname)) {
		fprintf(stderr, "bhfuzz: cannot make a temporary directory\n");
		abort();
	}
	setenv("BH_SHM_DIR", shm_dirname, 1);
	atexit(shm_rmdir);
}
#endif

static const uint32_t queue_caps[8] = { 0, 1, 2, 3, 4, 6, 8, BH_QUEUE_UNBOUNDED };
static const uint64_t starve_delays[4] = { 0, 300, 3000, BH_MSEC };

static void start(uint8_t c0, uint8_t c1)
{
	struct bh_config cfg = {
		.max_concurrent = 1 + (c0 & 3),
		.queue_capacity = queue_caps[(c0 >> 3) & 7],
		.flags = (c0 & BHF_CFG_FAIR ? BH_FAIR : 0) |
			 (c0 & BHF_CFG_NOSTATS ? BH_NO_STATS : 0) |
			 (c1 & BHF_CFG1_HOLD ? BH_TRACK_HOLD : 0),
	};
	uint64_t spin_ns = c0 & BHF_CFG_SPIN ? 200 : 0, starve = starve_delays[c1 & 3];

	H.now = 1000;
#ifdef BHF_SHM
	uint32_t nslots = c1 & BHF_CFG1_FEWSLOTS ? SHM_FEW_SLOTS : SHM_SLOTS;
	int r;

	shm_dir();
	bhf_shm_geometry(2, nslots, SHM_EXTRA);
	bh_shm_unlink(SHM_NAME); /* left by a run that was stopped */
	r = bh_shm_open(SHM_NAME, &cfg, BH_SHM_CREATE | BH_SHM_EXCL, &H.bh);
	if (r != 0) {
		fprintf(stderr, "bhfuzz: bh_shm_open failed (%d)\n", r);
		abort();
	}
	bhf_attach_shm(H.bh, &hooks, spin_ns, starve, SHM_POLL_NS);
	ref_init(&H.m, &cfg, starve);
	ref_set_host(&H.m, nslots + SHM_EXTRA);
	note("host-wide, %u thread slots", nslots);
#else
	if (bh_create(&cfg, &H.bh) != 0) {
		fprintf(stderr, "bhfuzz: bh_create failed\n");
		abort();
	}
	bhf_attach(H.bh, &hooks, spin_ns, starve);
	ref_init(&H.m, &cfg, starve);
#endif
	note("bulkhead: limit %u, queue %u, %s%s%s%s, starve %llu ns", cfg.max_concurrent,
	     cfg.queue_capacity, cfg.flags & BH_FAIR ? "fair" : "unfair",
	     cfg.flags & BH_NO_STATS ? ", no stats" : "",
	     cfg.flags & BH_TRACK_HOLD ? ", hold times" : "", spin_ns ? ", spinning" : "",
	     (unsigned long long)starve);
}

/* Close, let every waiter return, give back what is in flight: the run must
 * end with nothing in flight or queued, as the model says. */
static void finish_run(void)
{
	int64_t in_flight;

	note("-- end: close, drain, give back");
	op_close();
	check_all();
	for (unsigned k = 0; k < NW; k++) {
		for (int tries = 0; H.w[k].phase == W_PARKED && tries < 3; tries++) {
			op_resume(k, 0);
			check_all();
		}
		if (H.w[k].phase == W_PARKED)
			diverge("waiter %u does not return after bh_close", k);
	}
	in_flight = (int64_t)H.m.limit - H.m.avail;
	if (in_flight > 0) {
		op_release((uint32_t)in_flight);
		check_all();
	}
	if (H.m.qlen || H.m.limit != H.m.avail)
		diverge("the model did not quiesce (%u queued, %lld in flight)", H.m.qlen,
			(long long)in_flight);
	bh_destroy(H.bh);
	H.bh = NULL;
#ifdef BHF_SHM
	if (bh_shm_unlink(SHM_NAME) != 0)
		diverge("bh_shm_unlink failed");
#endif
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	uint8_t c0, c1;

	if (!ready) {
		sem_init(&H.back, 0, 0);
		for (unsigned k = 0; k < NW; k++)
			H.w[k].id = k;
		ready = true;
	}
	if (size < 2)
		return 0;
	H.in = data;
	H.len = size;
	H.pos = 0;
	H.loglen = 0;
	H.log[0] = '\0';
	H.nev = 0;
	H.ev_overflow = false;
	memset(H.a, 0, sizeof(H.a));
	c0 = next();
	c1 = next();
	start(c0, c1);
	check_all();
	for (unsigned ops = 0; H.pos < H.len && ops < MAX_OPS; ops++) {
		run_op(next());
		check_all();
	}
	finish_run();
	if (getenv("BHF_VERBOSE"))
		fprintf(stderr, "%s", H.log);
	return 0;
}

/* ---- seeds ------------------------------------------------------------------ */

#define CFG(max, flags, cap) (((max) - 1) | (flags) | ((cap) << 3))
#define TRY(n) BHF_TRY, (n)
#define ACQ(k, n, dl) BHF_ACQ, ((k) | (n) << 3), (dl)
#define RESUME(k, how) BHF_RESUME, ((k) | (how) << 3)
#define CANCEL(k) BHF_CANCEL, (k)
#define ASYNC(j, n) BHF_ASYNC, ((j) | (n) << 2)
#define ACANCEL(j) BHF_ACANCEL, (j)
#define REL(n) BHF_REL, (n)
#define CLOSE BHF_CLOSE
#define SETLIM(m) BHF_SETLIM, (m)
#define CLOCK(a) BHF_CLOCK, (a)
#define WAKEALL BHF_WAKEALL
#define HOLD(a) BHF_HOLD, (a)
#define NULLS BHF_NULLS
#define WOKEN 0
#define EINTR_ 1
#define EAGAIN_ 2
#define TIMEOUT 3
#define FAIR BHF_CFG_FAIR
#define SEED(name, ...) { name, (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ }) }

const struct bhf_seed bhf_seeds[] = {
	SEED("timeout-vs-grant-fair", CFG(1, FAIR, 2), 0, TRY(1), ACQ(0, 1, 50), REL(1),
	     RESUME(0, TIMEOUT), REL(1)),
	SEED("timeout-vs-grant-unfair", CFG(1, 0, 2), 3, TRY(1), ACQ(0, 1, 50), REL(1), TRY(1),
	     RESUME(0, WOKEN), REL(1), RESUME(0, TIMEOUT)),
	SEED("starving-head", CFG(1, 0, 2), 1, TRY(1), ACQ(0, 1, BHF_DL_FOREVER), REL(1),
	     TRY(1), CLOCK(10), RESUME(0, WOKEN), TRY(1), REL(1), RESUME(0, WOKEN), REL(1)),
	SEED("cancel-after-grant", CFG(1, FAIR, 4), 0, TRY(1), ACQ(0, 1, BHF_DL_FOREVER),
	     ASYNC(0, 1), REL(1), CANCEL(0), REL(1)),
	SEED("cancel-queued", CFG(1, 0, 4), 0, TRY(1), ACQ(0, 1, BHF_DL_FOREVER),
	     ACQ(1, 1, BHF_DL_FOREVER), CANCEL(0), REL(1), WAKEALL, REL(1)),
	SEED("weighted-head-of-line", CFG(4, FAIR, 6), 0, TRY(4), ASYNC(0, 3), ASYNC(1, 1),
	     REL(1), TRY(1), REL(1), REL(1), REL(1), REL(3), REL(1)),
	SEED("weighted-unfair-blocking", CFG(3, 0, 6), 2, TRY(3), ACQ(0, 2, BHF_DL_FOREVER),
	     ACQ(1, 1, BHF_DL_FOREVER), REL(1), TRY(1), REL(1), REL(1), WAKEALL, WAKEALL,
	     REL(2), WAKEALL, REL(1)),
	SEED("close-with-waiters", CFG(1, 0, 6), 0, TRY(1), ACQ(0, 1, BHF_DL_FOREVER),
	     ACQ(1, 1, 90), ASYNC(0, 1), CLOSE, RESUME(0, WOKEN), RESUME(1, WOKEN), TRY(1),
	     REL(1), REL(1), CLOSE),
	SEED("shrink-fails-oversized", CFG(4, FAIR, 6), 0, TRY(4), ASYNC(0, 3),
	     ACQ(0, 1, BHF_DL_FOREVER), SETLIM(2), REL(2), REL(1), RESUME(0, WOKEN), SETLIM(5),
	     REL(1)),
	SEED("grow-grants", CFG(1, 0, 6), 0, TRY(1), ACQ(0, 1, BHF_DL_FOREVER),
	     ACQ(1, 1, BHF_DL_FOREVER), ASYNC(0, 1), SETLIM(4), WAKEALL, WAKEALL, REL(3)),
	SEED("head-leaves-followers-granted", CFG(4, 0, 6), 0, TRY(2), ACQ(0, 3, 40),
	     ASYNC(0, 1), ASYNC(1, 1), RESUME(0, TIMEOUT), REL(4)),
	SEED("short-holds-prewake", CFG(1, FAIR | BHF_CFG_SPIN, 6), 0, TRY(1),
	     ACQ(0, 1, BHF_DL_FOREVER), ACQ(1, 1, BHF_DL_FOREVER), ACQ(2, 1, BHF_DL_FOREVER),
	     REL(1), RESUME(0, WOKEN), REL(1), WAKEALL, RESUME(2, WOKEN), REL(1), WAKEALL,
	     REL(1)),
	SEED("eintr-eagain-spurious", CFG(1, FAIR, 2), 0, TRY(1), ACQ(0, 1, BHF_DL_FOREVER),
	     RESUME(0, EINTR_), RESUME(0, EAGAIN_), RESUME(0, WOKEN), REL(1), RESUME(0, WOKEN),
	     REL(1)),
	SEED("bad-input-and-over-release", CFG(2, 0, 1), 0, TRY(0), TRY(5), REL(0), REL(1),
	     SETLIM(0), ACQ(0, 0, BHF_DL_FOREVER), ACQ(0, 3, BHF_DL_FOREVER), ASYNC(0, 0),
	     ACANCEL(1)),
	SEED("past-deadline-is-try", CFG(1, FAIR, 2), 0, TRY(1), ACQ(0, 1, BHF_DL_ZERO),
	     ACQ(0, 1, BHF_DL_NOW), REL(1), ACQ(0, 1, BHF_DL_NOW), REL(1)),
	SEED("queue-full", CFG(1, FAIR, 1), 0, TRY(1), ACQ(0, 1, BHF_DL_FOREVER),
	     ACQ(1, 1, BHF_DL_FOREVER), ASYNC(0, 1), TRY(1), REL(1), RESUME(0, WOKEN), REL(1)),
	SEED("no-stats", CFG(2, BHF_CFG_NOSTATS, 3), 0, TRY(2), ACQ(0, 1, 30), ASYNC(0, 1),
	     REL(1), RESUME(0, TIMEOUT), REL(1), TRY(3)),
	SEED("async-cancel-races-grant", CFG(1, 0, 3), 0, TRY(1), ASYNC(0, 1), ASYNC(1, 1),
	     REL(1), ACANCEL(0), ACANCEL(1), REL(1)),
	SEED("woken-head-times-out", CFG(1, 0, 4), 3, TRY(1), ACQ(0, 1, 50),
	     ACQ(1, 1, BHF_DL_FOREVER), REL(1), RESUME(0, TIMEOUT), WAKEALL, REL(1)),
	SEED("close-wakes-many", CFG(1, 0, 7), 0, TRY(1), ACQ(0, 1, BHF_DL_FOREVER),
	     ACQ(1, 1, BHF_DL_FOREVER), ACQ(2, 1, BHF_DL_FOREVER), ACQ(3, 1, BHF_DL_FOREVER),
	     ACQ(4, 1, 200), ACQ(5, 1, BHF_DL_FOREVER), CLOSE, WAKEALL, REL(1)),
	/* found by fuzzing: a cancelled grantee gave back permits another
	 * call had already released, and free permits exceeded the limit */
	SEED("cancel-after-over-release", CFG(4, FAIR, 6), 0, TRY(3),
	     ACQ(0, 2, BHF_DL_FOREVER), ACQ(1, 1, BHF_DL_FOREVER), REL(1), CANCEL(1), REL(1),
	     REL(1), REL(1), CANCEL(0), TRY(4), TRY(1)),
	SEED("hold-times", CFG(2, 0, 3), BHF_CFG1_HOLD, TRY(1), CLOCK(3), TRY(1), REL(1), CLOCK(9),
	     REL(1), ACQ(0, 2, BHF_DL_FOREVER), TRY(2), ACQ(1, 1, 60), REL(2), WAKEALL, REL(1),
	     TRY(1), REL(3), HOLD(7), NULLS, REL(1)),
	SEED("closed-try-order", CFG(2, 0, 2), 0, CLOSE, TRY(3), TRY(1), ACQ(0, 3, 20),
	     ASYNC(0, 3), REL(1)),
};
const unsigned bhf_nseeds = sizeof(bhf_seeds) / sizeof(bhf_seeds[0]);
