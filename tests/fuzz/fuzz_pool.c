/* A fuzz harness for the thread pool's admission and its policies.
 *
 * Byte 0 configures a small pool: bits 0-1 core_threads (0-2), bits 2-3
 * max_threads - 1 (clamped to at least core_threads), bits 4-5
 * queue_capacity (0-3), bits 6-7 the policy; byte 1 bit 0 BH_POOL_PRESTART,
 * bit 1 a 1 ms keep-alive (else one minute). Then each byte is an
 * operation (low 3 bits) and an argument (the rest):
 *   0 submit the next task           1 let task (arg) finish
 *   2 let every task finish          3 bh_pool_call, gate open (arg & 1),
 *                                      deadline 0.2 ms or 2 ms (arg & 2)
 *   4 bh_pool_shutdown_now           5 bh_pool_shutdown, deadline 1 ms
 *   6 check bh_pool_stats' identity  7 wait 0.1 ms
 * A task's run waits on its gate (a task run on the caller's thread does
 * not wait). At the end every gate opens and the pool is destroyed.
 *
 * The reference is a count of outcomes kept by the harness: what each
 * submission returned, how often each task ran and was reported, and with
 * what status. Every task the pool took is reported exactly once, with a
 * status that says whether it ran (0 or -ETIMEDOUT: it ran; -ECANCELED: it
 * did not); a task the pool refused, or a call that returned 0 or
 * -ECANCELED, is never reported; a CALLER_RAN task ran on the caller before
 * the return; and the final counters equal the harness's counts:
 * submitted, caller_ran, discarded, abandoned, completed, rejected.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bulkhead/pool.h"
#include "fuzz_seeds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NTASKS 24

enum how { NOT_GIVEN, SUBMITTED, CALLED };

struct ftask {
	struct bh_task task; /* first: the callbacks cast back */
	int idx;
	enum how how;
	int result; /* what submit or call returned */
	_Atomic int runs, on_caller, reports, status;
};

static struct ftask tasks[NTASKS];
static bool gate[NTASKS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_t main_thread;
static int ntasks;
static const uint8_t *in_data;
static size_t in_size;

/* Prints the input and aborts; fail() prints why first. */
static void fail_end(void)
{
	fprintf(stderr, "\nbhfuzz: input:");
	for (size_t i = 0; i < in_size; i++)
		fprintf(stderr, " %02x", in_data[i]);
	fprintf(stderr, "\n");
	abort();
}
#define fail(...) (fprintf(stderr, "bhfuzz: pool: " __VA_ARGS__), fail_end())

static void open_gate(int i)
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

static bool pool_errno(int r)
{
	return r == -EBUSY || r == -ESHUTDOWN || r == -EAGAIN;
}

static void check_stats(bh_pool_t *pool)
{
	struct bh_pool_stats s;

	if (bh_pool_stats(pool, &s) != 0)
		fail("bh_pool_stats failed");
	if (s.submitted != s.queued + s.active - s.abandoned_running + s.completed + s.abandoned +
				   s.discarded + s.caller_ran)
		fail("the stats identity does not hold: submitted %d, accounted %d",
		     (int)s.submitted,
		     (int)(s.queued + s.active - s.abandoned_running + s.completed + s.abandoned +
			   s.discarded + s.caller_ran));
}

static void do_submit(bh_pool_t *pool)
{
	struct ftask *f = next_task();

	if (!f)
		return;
	f->how = SUBMITTED;
	f->result = bh_pool_submit(pool, &f->task);
	switch (f->result) {
	case 0:
		break;
	case BH_POOL_CALLER_RAN:
		if (atomic_load(&f->on_caller) != 1 || atomic_load(&f->reports) != 1 ||
		    atomic_load(&f->status) != 0)
			fail("task %d: CALLER_RAN but it did not run and report on the caller (%d)",
			     f->idx, atomic_load(&f->reports));
		break;
	case BH_POOL_DISCARDED:
		break; /* this task or the oldest queued one was dropped: counted at the end */
	default:
		if (!pool_errno(f->result))
			fail("task %d: bh_pool_submit returned %d", f->idx, f->result);
	}
}

static void do_call(bh_pool_t *pool, uint8_t arg)
{
	struct ftask *f = next_task();

	if (!f)
		return;
	f->how = CALLED;
	if (arg & 1)
		open_gate(f->idx);
	f->result = bh_pool_call(pool, &f->task, mono_ns() + ((arg & 2) ? 2000000 : 200000));
	if (f->result != 0 && f->result != -ETIMEDOUT && f->result != -ECANCELED &&
	    !pool_errno(f->result))
		fail("task %d: bh_pool_call returned %d", f->idx, f->result);
	if (f->result == 0 && atomic_load(&f->runs) != 1)
		fail("task %d: bh_pool_call returned 0, runs %d", f->idx, atomic_load(&f->runs));
}

/* After the pool is gone: each task's fate against what it was told, and
 * the pool's counters against the counts. */
static void check_end(const struct bh_pool_stats *s)
{
	uint64_t submitted = 0, caller_ran = 0, discarded = 0, abandoned = 0, completed = 0;
	uint64_t rejected = 0;

	for (int i = 0; i < ntasks; i++) {
		struct ftask *f = &tasks[i];
		int runs = atomic_load(&f->runs), reports = atomic_load(&f->reports);
		int st = atomic_load(&f->status);
		bool taken;

		if (runs > 1)
			fail("task %d ran %d times", i, runs);
		if (f->how == CALLED) {
			taken = f->result == 0 || f->result == -ETIMEDOUT || f->result == -ECANCELED;
			if (f->result == -ETIMEDOUT)
				abandoned++;
			if (f->result == 0) {
				/* CALLER_RUNS runs a call on the caller too */
				if (atomic_load(&f->on_caller))
					caller_ran++;
				else
					completed++;
				if (reports)
					fail("task %d: a call that returned 0 was reported (%d)", i, st);
			} else if (f->result == -ETIMEDOUT) {
				if (reports != 1)
					fail("task %d: an abandoned call was reported %d times", i,
					     reports);
				if (!((st == -ETIMEDOUT && runs == 1) || (st == -ECANCELED && !runs)))
					fail("task %d: abandoned, reported %d, runs %d", i, st, runs);
			} else if (reports) {
				fail("task %d: a call that returned %d was reported", i, f->result);
			}
			if (f->result == -ECANCELED) {
				discarded++;
				if (runs)
					fail("task %d: a call dropped unrun ran (%d)", i, runs);
			}
			if (pool_errno(f->result))
				rejected += f->result != -ESHUTDOWN;
		} else {
			taken = f->result >= 0;
			if (f->result == BH_POOL_CALLER_RAN)
				caller_ran++;
			if (f->result > 0)
				rejected++;
			if (pool_errno(f->result))
				rejected += f->result != -ESHUTDOWN;
			if (taken && reports != 1)
				fail("task %d: taken, reported %d times", i, reports);
			if (taken && !((st == 0 && runs == 1) || (st == -ECANCELED && !runs)))
				fail("task %d: reported %d but runs %d", i, st, runs);
			if (taken && f->result != BH_POOL_CALLER_RAN && st == 0)
				completed++;
			if (taken && st == -ECANCELED)
				discarded++;
		}
		if (!taken && (runs || reports))
			fail("task %d: refused (%d) but it ran or was reported", i, f->result);
		submitted += taken;
	}
	if (s->submitted != submitted || s->caller_ran != caller_ran ||
	    s->discarded != discarded || s->abandoned != abandoned)
		fail("counters (pool, harness): submitted %d, %d; caller_ran %d, %d; "
		     "discarded %d, %d; abandoned %d, %d",
		     (int)s->submitted, (int)submitted, (int)s->caller_ran, (int)caller_ran,
		     (int)s->discarded, (int)discarded, (int)s->abandoned, (int)abandoned);
	if (s->completed != completed)
		fail("counters: completed %d, counted %d", (int)s->completed, (int)completed);
	if (s->rejected < rejected)
		fail("counters: rejected %d, counted at least %d", (int)s->rejected, (int)rejected);
	if (s->queued || s->active || s->abandoned_running)
		fail("a destroyed pool still has work: queued %d, active %d", (int)s->queued,
		     (int)s->active);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct timespec tick = { 0, 100000 };
	struct bh_pool_config cfg = { .name = "fz" };
	struct bh_pool_stats end;
	bh_pool_t *pool;
	uint8_t c0, c1;

	if (size < 2)
		return 0;
	in_data = data;
	in_size = size;
	main_thread = pthread_self();
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
	if (bh_pool_create(&cfg, &pool) != 0)
		return 0;
	ntasks = 0;
	memset(gate, 0, sizeof(gate));
	for (size_t i = 2; i < size && i < 2 + 64; i++) {
		uint8_t op = data[i] & 7, arg = data[i] >> 3;

		switch (op) {
		case 0: do_submit(pool); break;
		case 1: open_gate(arg % NTASKS); break;
		case 2: open_gate(-1); break;
		case 3: do_call(pool, arg); break;
		case 4: bh_pool_shutdown_now(pool); break;
		case 5: bh_pool_shutdown(pool, mono_ns() + 1000000); break;
		case 6: check_stats(pool); break;
		case 7: nanosleep(&tick, NULL); break;
		}
	}
	check_stats(pool);
	open_gate(-1);
	if (bh_pool_shutdown(pool, BH_FOREVER) != 0)
		fail("a shutdown with every gate open left work");
	if (bh_pool_stats(pool, &end) != 0)
		fail("bh_pool_stats failed");
	if (bh_pool_destroy(pool) != 0)
		fail("bh_pool_destroy failed");
	check_end(&end);
	return 0;
}

#define SEED(name, s) { name, (const uint8_t *)(s), sizeof(s) - 1 }

/* config byte: core | (max - 1) << 2 | queue << 4 | policy << 6 */
const struct bhf_seed bhf_seeds[] = {
	SEED("abort-fill", "\x15\x00\x00\x00\x00\x00\x00\x06\x02"),
	SEED("caller-runs", "\x55\x00\x00\x00\x00\x00\x06\x0a\x02"),
	SEED("discard", "\x95\x00\x00\x00\x00\x00\x06\x02"),
	SEED("discard-oldest", "\xd5\x00\x00\x00\x00\x00\x00\x06\x09\x11\x02"),
	SEED("call-open", "\x05\x00\x0b\x0b\x06"),
	SEED("call-timeout", "\x05\x00\x03\x06\x02"),
	SEED("call-queued-shutdown-now", "\x11\x00\x00\x03\x04\x02"),
	SEED("shutdown-now", "\x25\x00\x00\x00\x00\x04\x06\x00\x02"),
	SEED("shutdown-graceful", "\x25\x01\x00\x00\x05\x02\x00"),
	SEED("handoff-only", "\x04\x02\x00\x00\x07\x00\x02"),
	SEED("prestart-keepalive", "\x29\x03\x00\x00\x0f\x07\x07\x02\x07\x00"),
};
const unsigned bhf_nseeds = sizeof(bhf_seeds) / sizeof(bhf_seeds[0]);
