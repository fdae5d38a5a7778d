/* A fuzz harness for the thread pool's admission and its four policies,
 * checked against a small reference model of them.
 *
 * Byte 0 configures a small pool: bits 0-1 core_threads (0-2), bits 2-3
 * max_threads - 1 (clamped to at least core_threads), bits 4-5
 * queue_capacity (0-3), bits 6-7 the policy; byte 1 bit 0 BH_POOL_PRESTART,
 * bit 1 a 1 ms keep-alive (else one minute). Then each byte is an
 * operation (low 3 bits) and an argument (the rest):
 *   0 submit the next task           1 let task (arg) finish
 *   2 let every task finish          3 bh_pool_call, gate open (arg & 1),
 *                                      deadline 0.2 ms or 2 ms (arg & 2),
 *                                      or already past (arg & 12 == 12)
 *   4 bh_pool_shutdown_now           5 bh_pool_shutdown, deadline 1 ms
 *   6 check bh_pool_stats' identity  7 wait 0.1 ms
 * A task's run waits on its gate (a task run on the caller's thread does
 * not wait). At the end every gate opens and the pool is destroyed.
 *
 * The model (struct model below) knows what the pool holds: which tasks
 * run, which wait in FIFO order, whether it is closing, and every counter
 * of bh_pool_stats. From that and the number of threads alive it predicts
 * each bh_pool_submit and bh_pool_call result as include/bulkhead/pool.h
 * specifies it: the executor's order (a thread below core, else an idle
 * thread, else the queue, else a thread up to max), and for a full pool
 * (as many tasks running and queued as max_threads + queue_capacity) the
 * policy: ABORT -EBUSY; CALLER_RUNS runs it on the caller; DISCARD drops
 * the newcomer (-ECANCELED to its done); DISCARD_OLDEST drops the oldest
 * queued task and queues the newcomer, or drops the newcomer when nothing
 * is queued; a call is refused with -EBUSY rather than dropped. It also
 * says which tasks then run, on which thread (the caller's or the pool's),
 * which are reported and with what status, what bh_pool_shutdown_now
 * returns, and when a task's gate opens, which queued tasks the freed
 * threads take next.
 *
 * Between operations the harness waits until the pool is quiet: every other
 * thread asleep (the pool's in their gates or parked: /proc/self/task) and
 * the gauges where the model has them. Then the results, each
 * task's runs and reports, and every counter must equal the model's.
 *
 * Where the pool's decision depends on timing the harness does not
 * control, the model allows the set of outcomes and follows the one seen:
 *   - with the 1 ms keep-alive an idle thread above core may leave at any
 *     moment, so a task may find it there (and run) or gone (and queue);
 *   - a call whose task runs with its gate open returns 0 only if the run
 *     ends before the deadline (0.2 ms is short on a loaded machine): 0 or
 *     -ETIMEDOUT, the task then reported -ETIMEDOUT once it has run;
 *   - bh_pool_shutdown with a 1 ms deadline returns the tasks still there
 *     when it passes: at least those that cannot finish (gate closed), at
 *     most all of them;
 *   - -EAGAIN (no thread could be created) is accepted for a task that
 *     needed a new thread, as a refusal.
 * One timing case is not guessed but seen: bh_pool_call gives up before
 * anything else when its deadline has already passed (a caller descheduled
 * between computing the deadline and the call, on a loaded machine). The
 * pool is created with its real wait/wake/clock (and polls as a real pool
 * does), except that the harness watches the clock: the first reading a call makes on the caller's thread
 * is that check, so the harness knows whether the call gave up early (and
 * then expects -ETIMEDOUT, nothing run or dropped, the task reported
 * -ECANCELED) or went on (and then the model above applies in full).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bulkhead/pool.h"
#include "fuzz_seeds.h"
#include "pool/pool_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NTASKS 24
#define SETTLE_NS 10000000000ull /* longest wait for a quiet pool */

enum how { NOT_GIVEN, SUBMITTED, CALLED };

/* Where the model has a task. */
enum mst {
	M_OUT,     /* never taken, refused, or the caller's again */
	M_QUEUED,  /* waiting in the pool's queue */
	M_RUNNING, /* on a pool thread (its gate is closed) */
	M_DONE,    /* ran or dropped; reported if want_report */
};

struct ftask {
	struct bh_task task; /* first: the callbacks cast back */
	int idx;
	enum how how;
	int result; /* what submit or call returned */
	_Atomic int runs, on_caller, reports, status;
	/* the model's view */
	enum mst st;
	bool ran, ran_on_caller, abandoned, want_report;
	int want_status;
};

static struct model {
	uint32_t core, max, cap;
	enum bh_pool_policy policy;
	bool short_keep_alive, closing;
	int q[NTASKS]; /* queued tasks, oldest first */
	unsigned nq;
	uint64_t active, submitted, completed, abandoned, abandoned_running, discarded,
		caller_ran, rejected;
} M;

static struct ftask tasks[NTASKS];
static bool gate[NTASKS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_t main_thread;
static int ntasks;
static const uint8_t *in_data;
static size_t in_size;
static bh_pool_t *pool;

/* Prints why and the input, and aborts. */
__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "bhfuzz: pool: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nbhfuzz: input:");
	for (size_t i = 0; i < in_size; i++)
		fprintf(stderr, " %02x", in_data[i]);
	fprintf(stderr, "\n");
	abort();
}

static bool gate_open(int i)
{
	bool open;

	pthread_mutex_lock(&mu);
	open = gate[i];
	pthread_mutex_unlock(&mu);
	return open;
}

static void set_gate(int i)
{
	pthread_mutex_lock(&mu);
	if (i < 0) {
		for (int k = 0; k < NTASKS; k++)
			gate[k] = true;
	} else {
		gate[i] = true;
	}
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void task_run(struct bh_task *t)
{
	struct ftask *f = (struct ftask *)t;

	atomic_fetch_add(&f->runs, 1);
	if (pthread_equal(pthread_self(), main_thread)) {
		atomic_fetch_add(&f->on_caller, 1);
		return;
	}
	pthread_mutex_lock(&mu);
	while (!gate[f->idx])
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

static void task_done(struct bh_task *t, int status)
{
	struct ftask *f = (struct ftask *)t;

	atomic_store(&f->status, status);
	atomic_fetch_add(&f->reports, 1);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The pool's clock, watched on the caller's thread while a call is made
 * (only that thread reads or writes the watch, so it needs no atomics). */
static bool watching;
static uint64_t first_reading;

static uint64_t watched_now(void *ctx)
{
	uint64_t t = bhi_sync_now(bhp_real_ops.sync);

	(void)ctx;

	if (pthread_equal(pthread_self(), main_thread) && watching && !first_reading)
		first_reading = t;
	return t;
}

/* bh_pool_call, and whether it found its deadline already past. */
static int watched_call(struct ftask *f, uint64_t deadline, bool *early)
{
	int r;

	first_reading = 0;
	watching = true;
	r = bh_pool_call(pool, &f->task, deadline);
	watching = false;
	*early = first_reading >= deadline;
	return r;
}

static struct ftask *next_task(void)
{
	struct ftask *f;

	if (ntasks == NTASKS)
		return NULL;
	f = &tasks[ntasks];
	memset(f, 0, sizeof(*f));
	f->idx = ntasks++;
	f->task.run = task_run;
	f->task.done = task_done;
	return f;
}

static struct bh_pool_stats stats(void)
{
	struct bh_pool_stats s;

	if (bh_pool_stats(pool, &s) != 0)
		fail("bh_pool_stats failed");
	return s;
}

/* ---- the model ------------------------------------------------------------ */

static void report(struct ftask *f, int status)
{
	f->st = M_DONE;
	f->want_report = true;
	f->want_status = status;
}

static void run_on_pool(struct ftask *f)
{
	f->st = M_RUNNING;
	f->ran = true;
	M.active++;
}

static void enqueue(struct ftask *f)
{
	f->st = M_QUEUED;
	M.q[M.nq++] = f->idx;
}

static struct ftask *dequeue(void)
{
	struct ftask *f = &tasks[M.q[0]];

	memmove(&M.q[0], &M.q[1], (M.nq - 1) * sizeof(M.q[0]));
	M.nq--;
	return f;
}

/* Tasks whose gate is open finish; each freed thread takes the oldest
 * queued task, which may finish in turn. */
static void model_settle(void)
{
	bool changed = true;

	while (changed) {
		changed = false;
		for (int i = 0; i < ntasks; i++) {
			struct ftask *f = &tasks[i];

			if (f->st != M_RUNNING || !gate_open(i))
				continue;
			M.active--;
			if (f->abandoned) {
				M.abandoned_running--;
				report(f, -ETIMEDOUT);
			} else {
				M.completed++;
				report(f, 0);
			}
			if (M.nq)
				run_on_pool(dequeue());
			changed = true;
		}
	}
}

static bool model_full(void)
{
	return M.active + M.nq >= (uint64_t)M.max + M.cap;
}

enum { P_RUN = 1, P_QUEUE = 2 };

/* Where the executor's order puts a task with alive threads (not full). */
static unsigned place(uint64_t alive)
{
	if (alive < M.core)
		return P_RUN; /* a new thread */
	if (alive > M.active)
		return P_RUN; /* an idle thread */
	if (M.nq < M.cap && alive > 0)
		return P_QUEUE;
	return P_RUN; /* a new thread: not full, so alive < max */
}

/* The placements allowed with alive threads seen just before: with a short
 * keep-alive, idle threads above core may have left since. */
static unsigned placements(uint64_t alive)
{
	uint64_t lo = alive, floor = M.core > M.active ? M.core : M.active;
	unsigned set = 0;

	if (M.short_keep_alive && lo > floor)
		lo = floor;
	for (uint64_t a = lo; a <= alive; a++)
		set |= place(a);
	return set;
}

/* DISCARD_OLDEST: the oldest queued task is dropped. */
static void drop_oldest(void)
{
	report(dequeue(), -ECANCELED);
	M.discarded++;
}

/* ---- the pool must be quiet before each look ------------------------------ */

/* Every thread but this one asleep: the pool's wait at their gates or are
 * parked (a thread names itself fz-N only once it runs: all are looked at). */
static bool threads_asleep(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	bool asleep = true;
	char me[16];

	snprintf(me, sizeof(me), "%d", (int)gettid());

	if (!d)
		fail("cannot read /proc/self/task");
	while (asleep && (e = readdir(d)) != NULL) {
		char path[64], buf[256];
		FILE *f;
		const char *p;
		size_t n;

		if (e->d_name[0] == '.' || strcmp(e->d_name, me) == 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%.16s/stat", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue; /* it left */
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && (p[2] == 'R' || p[2] == 'D'))
			asleep = false;
	}
	closedir(d);
	return asleep;
}

static bool matches_model(const struct bh_pool_stats *s)
{
	if (s->active != M.active || s->queued != M.nq)
		return false;
	for (int i = 0; i < ntasks; i++) {
		const struct ftask *f = &tasks[i];

		if (atomic_load(&f->reports) != (int)f->want_report)
			return false;
		if (f->st == M_RUNNING && atomic_load(&f->runs) != 1)
			return false; /* its thread has not reached the gate yet */
	}
	return true;
}

/* Wait for the pool to be quiet where the model is, then compare all. */
static void check(const char *after)
{
	uint64_t until = mono_ns() + SETTLE_NS;
	struct bh_pool_stats s;
	static const struct timespec nap = { 0, 20000 };

	for (;;) {
		s = stats();
		if (matches_model(&s) && threads_asleep())
			break;
		if (mono_ns() > until)
			break; /* the checks below say what differs */
		nanosleep(&nap, NULL);
	}
	if (s.active != M.active || s.queued != M.nq)
		fail("after %s: active %d queued %d, the model %d and %u", after, (int)s.active,
		     (int)s.queued, (int)M.active, M.nq);
#define FIELD(x)                                                                      \
	if (s.x != M.x)                                                               \
	fail("after %s: stats." #x " is %d, the model says %d", after, (int)s.x, (int)M.x)
	FIELD(submitted);
	FIELD(completed);
	FIELD(abandoned);
	FIELD(abandoned_running);
	FIELD(discarded);
	FIELD(caller_ran);
	FIELD(rejected);
#undef FIELD
	if (s.alive > M.max || s.largest > M.max || s.alive < s.active)
		fail("after %s: %d threads alive, %d at most, %d active", after, (int)s.alive,
		     (int)s.largest, (int)s.active);
	for (int i = 0; i < ntasks; i++) {
		const struct ftask *f = &tasks[i];
		int runs = atomic_load(&f->runs), reports = atomic_load(&f->reports);

		if (runs != (int)f->ran || atomic_load(&f->on_caller) != (int)f->ran_on_caller)
			fail("after %s: task %d ran %d times (%d on the caller), the model says %d "
			     "(%s)", after, i, runs, atomic_load(&f->on_caller), (int)f->ran,
			     f->ran_on_caller ? "on the caller" : "on the pool");
		if (reports != (int)f->want_report)
			fail("after %s: task %d reported %d times, the model says %d", after, i,
			     reports, (int)f->want_report);
		if (reports && atomic_load(&f->status) != f->want_status)
			fail("after %s: task %d reported %d, the model says %d", after, i,
			     atomic_load(&f->status), f->want_status);
	}
}

/* ---- operations ------------------------------------------------------------ */

/* CALLER_RUNS took a task the full pool could not: it ran on the caller. */
static void ran_on_caller(struct ftask *f)
{
	M.submitted++;
	M.caller_ran++;
	f->ran = f->ran_on_caller = true;
}

/* The pool was full: the policy's outcome for a submission. */
static int submit_full(struct ftask *f)
{
	M.rejected++;
	switch (M.policy) {
	case BH_POOL_CALLER_RUNS:
		ran_on_caller(f);
		report(f, 0);
		return BH_POOL_CALLER_RAN;
	case BH_POOL_DISCARD_OLDEST:
		if (M.nq) {
			M.submitted++;
			drop_oldest();
			enqueue(f);
			return 0;
		}
		/* nothing queued to drop: the newcomer is the oldest */
		/* fall through */
	case BH_POOL_DISCARD:
		M.submitted++;
		M.discarded++;
		report(f, -ECANCELED);
		return BH_POOL_DISCARDED;
	default:
		return -EBUSY;
	}
}

static void do_submit(void)
{
	struct ftask *f = next_task();
	uint64_t alive = stats().alive;
	unsigned allowed, got;
	int want;

	if (!f)
		return;
	f->how = SUBMITTED;
	f->result = bh_pool_submit(pool, &f->task);
	if (M.closing) {
		want = -ESHUTDOWN;
	} else if (model_full()) {
		want = submit_full(f);
	} else {
		allowed = placements(alive);
		if (f->result == -EAGAIN) {
			M.rejected++;
			return;
		}
		/* a queued task stays queued (every running task waits at its
		 * gate); one that ran may be done already */
		got = stats().queued > M.nq ? P_QUEUE : P_RUN;
		if (!(got & allowed))
			fail("task %d was %s, the model says it %s (%d alive, %d active, %u queued)",
			     f->idx, got == P_QUEUE ? "queued" : "run",
			     got == P_QUEUE ? "runs" : "queues", (int)alive, (int)M.active, M.nq);
		M.submitted++;
		if (got == P_QUEUE)
			enqueue(f);
		else
			run_on_pool(f);
		want = 0;
	}
	if (f->result != want)
		fail("task %d: bh_pool_submit returned %d, the model says %d", f->idx, f->result,
		     want);
}

/* The pool was full: a call. */
static int call_full(struct ftask *f)
{
	M.rejected++;
	switch (M.policy) {
	case BH_POOL_CALLER_RUNS:
		ran_on_caller(f); /* a call is not reported: its result says it all */
		return 0;
	case BH_POOL_DISCARD_OLDEST:
		if (!M.nq)
			return -EBUSY;
		/* it takes the oldest one's place, and waits in vain: every
		 * thread runs a task whose gate is closed */
		M.submitted++;
		drop_oldest();
		M.abandoned++;
		report(f, -ECANCELED);
		return -ETIMEDOUT;
	default:
		return -EBUSY;
	}
}

/* The deadline had passed when the call began: nothing was admitted,
 * dropped or run; the task is reported unrun. */
static int give_up_early(struct ftask *f)
{
	M.submitted++;
	M.abandoned++;
	report(f, -ECANCELED);
	return -ETIMEDOUT;
}

static void do_call(uint8_t arg)
{
	struct ftask *f = next_task();
	uint64_t alive = stats().alive, deadline;
	unsigned allowed;
	bool queued, early;
	int want;

	if (!f)
		return;
	f->how = CALLED;
	if (arg & 1)
		set_gate(f->idx);
	if ((arg & 12) == 12)
		deadline = mono_ns() - 1; /* passed already: a caller that was late */
	else
		deadline = mono_ns() + ((arg & 2) ? 2000000 : 200000);
	f->result = watched_call(f, deadline, &early);
	if (M.closing) {
		want = -ESHUTDOWN;
	} else if (early) {
		want = give_up_early(f);
	} else if (model_full()) {
		want = call_full(f);
	} else {
		allowed = placements(alive);
		want = f->result;
		switch (f->result) {
		case -EAGAIN:
			M.rejected++;
			return;
		case 0: /* it ran on the pool, its gate open, in time */
			if (!(allowed & P_RUN) || !gate_open(f->idx))
				fail("task %d: bh_pool_call returned 0, the model says it %s", f->idx,
				     allowed & P_RUN ? "waits at its gate" : "queues");
			M.submitted++;
			M.completed++;
			f->ran = true;
			if (M.nq) /* its thread takes the next one */
				run_on_pool(dequeue());
			break;
		case -ETIMEDOUT:
			/* queued: taken off the queue and reported unrun at once;
			 * running: abandoned, reported when it has run */
			queued = atomic_load(&f->reports) == 1 &&
				 atomic_load(&f->status) == -ECANCELED;
			if (!(allowed & (queued ? P_QUEUE : P_RUN)))
				fail("task %d: bh_pool_call timed out %s, the model says it %s",
				     f->idx, queued ? "queued" : "running",
				     queued ? "runs" : "queues");
			M.submitted++;
			M.abandoned++;
			if (queued) {
				report(f, -ECANCELED);
			} else {
				run_on_pool(f);
				f->abandoned = true;
				M.abandoned_running++;
			}
			break;
		default:
			want = 0;
		}
	}
	if (f->result != want)
		fail("task %d: bh_pool_call returned %d, the model says %d", f->idx, f->result,
		     want);
}

static void do_shutdown_now(void)
{
	int want = (int)M.nq, r;

	r = bh_pool_shutdown_now(pool);
	M.closing = true;
	while (M.nq)
		drop_oldest();
	if (r != want)
		fail("bh_pool_shutdown_now returned %d, the model says %d", r, want);
}

/* Left when the 1 ms deadline passes: at least every task that cannot end. */
static void do_shutdown(void)
{
	int before = (int)(M.active + M.nq), after, r;

	r = bh_pool_shutdown(pool, mono_ns() + 1000000);
	M.closing = true;
	model_settle();
	after = (int)(M.active + M.nq);
	if (r < after || r > before)
		fail("bh_pool_shutdown returned %d, the model says %d to %d", r, after, before);
}

/* The identity bh_pool_stats promises, at one instant. */
static void check_identity(void)
{
	struct bh_pool_stats s = stats();

	if (s.submitted != s.queued + s.active - s.abandoned_running + s.completed + s.abandoned +
				   s.discarded + s.caller_ran)
		fail("the stats identity does not hold: submitted %d, accounted %d",
		     (int)s.submitted,
		     (int)(s.queued + s.active - s.abandoned_running + s.completed + s.abandoned +
			   s.discarded + s.caller_ran));
}

static const char *const op_names[8] = { "submit",        "open a gate",  "open every gate",
					 "call",          "shutdown_now", "shutdown",
					 "stats",         "a pause" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct bhi_sync_ops watched_sync;
	static struct bhp_ops watched_ops;
	static const struct timespec tick = { 0, 100000 };
	struct bh_pool_config cfg = { .name = "fz" };
	bool verbose = getenv("BHF_VERBOSE") != NULL;
	uint8_t c0, c1;

	if (size < 2)
		return 0;
	in_data = data;
	in_size = size;
	main_thread = pthread_self();
	watched_sync = *bhp_real_ops.sync;
	watched_sync.now = watched_now;
	watched_ops = bhp_real_ops;
	watched_ops.sync = &watched_sync;
	c0 = data[0];
	c1 = data[1];
	cfg.core_threads = (c0 & 3) % 3;
	cfg.max_threads = ((c0 >> 2) & 3) + 1;
	if (cfg.max_threads < cfg.core_threads)
		cfg.max_threads = cfg.core_threads;
	cfg.queue_capacity = (c0 >> 4) & 3;
	cfg.policy = (enum bh_pool_policy)(c0 >> 6);
	cfg.flags = (c1 & 1) ? BH_POOL_PRESTART : 0;
	cfg.keep_alive_ns = (c1 & 2) ? 1000000 : 60000000000ull;
	if (bhp_create(&cfg, &watched_ops, &pool) != 0)
		return 0;
	M = (struct model){ .core = cfg.core_threads, .max = cfg.max_threads,
			    .cap = cfg.queue_capacity, .policy = cfg.policy,
			    .short_keep_alive = c1 & 2 };
	ntasks = 0;
	memset(gate, 0, sizeof(gate));
	check("creation");
	for (size_t i = 2; i < size && i < 2 + 64; i++) {
		uint8_t op = data[i] & 7, arg = data[i] >> 3;

		switch (op) {
		case 0: do_submit(); break;
		case 1: set_gate(arg % NTASKS); break;
		case 2: set_gate(-1); break;
		case 3: do_call(arg); break;
		case 4: do_shutdown_now(); break;
		case 5: do_shutdown(); break;
		case 6: check_identity(); break;
		case 7: nanosleep(&tick, NULL); break;
		}
		model_settle();
		if (verbose)
			fprintf(stderr, "bhfuzz: pool: %s (%u): model active %d queued %u\n",
				op_names[op], arg, (int)M.active, M.nq);
		check(op_names[op]);
	}
	set_gate(-1);
	model_settle();
	if (bh_pool_shutdown(pool, BH_FOREVER) != 0)
		fail("a shutdown with every gate open left work");
	M.closing = true;
	check("the last shutdown");
	if (bh_pool_destroy(pool) != 0)
		fail("bh_pool_destroy failed");
	pool = NULL;
	for (int i = 0; i < ntasks; i++)
		if (tasks[i].st == M_RUNNING || tasks[i].st == M_QUEUED)
			fail("the model still has task %d in the pool", i);
	return 0;
}

#define SEED(name, s) { name, (const uint8_t *)(s), sizeof(s) - 1 }

/* config byte: core | (max - 1) << 2 | queue << 4 | policy << 6 */
const struct bhf_seed bhf_seeds[] = {
	SEED("abort-fill", "\x15\x00\x00\x00\x00\x00\x00\x06\x02"),
	SEED("caller-runs", "\x55\x00\x00\x00\x00\x00\x06\x0a\x02"),
	SEED("discard", "\x95\x00\x00\x00\x00\x00\x06\x02"),
	SEED("discard-oldest", "\xd5\x00\x00\x00\x00\x00\x00\x06\x09\x11\x02"),
	/* two queued: the oldest is dropped, not the newest */
	SEED("discard-oldest-of-two", "\xe0\x00\x00\x00\x00\x00\x06\x02"),
	SEED("call-open", "\x05\x00\x0b\x0b\x06"),
	SEED("call-timeout", "\x05\x00\x03\x06\x02"),
	/* deadlines already past: a give-up before anything, even when full */
	SEED("call-late", "\x05\x00\x63\x06\x02"),
	SEED("call-late-full-caller-runs", "\x41\x00\x00\x63\x06\x02"),
	SEED("call-late-full-discard-oldest", "\xd1\x00\x00\x00\x63\x06\x02"),
	SEED("call-queued-shutdown-now", "\x11\x00\x00\x03\x04\x02"),
	SEED("shutdown-now", "\x25\x00\x00\x00\x00\x04\x06\x00\x02"),
	SEED("shutdown-graceful", "\x25\x01\x00\x00\x05\x02\x00"),
	SEED("handoff-only", "\x04\x02\x00\x00\x07\x00\x02"),
	SEED("prestart-keepalive", "\x29\x03\x00\x00\x0f\x07\x07\x02\x07\x00"),
};
const unsigned bhf_nseeds = sizeof(bhf_seeds) / sizeof(bhf_seeds[0]);
