/* Stress for the thread pool: rounds of one pool with a random shape and
 * policy, several submitters mixing plain tasks and deadline calls (past,
 * short, long, none), tasks that spin, sleep or poll their cancel flag, a
 * monitor taking snapshots, and a shutdown (graceful or immediate) in the
 * middle of the traffic. Checked outside the library:
 *
 *   - never more tasks running on pool threads than max_threads (a counter
 *     kept by the tasks), never more pool threads than max_threads (counted
 *     by name in /proc), never more queued than capacity, no task queued
 *     while a thread idles, every snapshot balanced and its counters
 *     monotonic;
 *   - every task reported exactly once, in the way its submit/call result
 *     promised (a per-task record; tasks are heap objects freed by whoever
 *     owns them, so a late touch is a use-after-free under ASan);
 *   - the pool's final counters equal the records' tallies;
 *   - no pool thread left once the pool is destroyed.
 *
 * BH_STRESS_SECONDS (default 3) sets the length; -s SEED replays a run.
 * Prints the seed first and one summary line last; exits 1 on a violation. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bulkhead/pool.h"

#define MAX_SUBMITTERS 6
#define RECS (1u << 17) /* tasks per round at most */

enum kind { PLAIN, CALL };

struct rec {
	_Atomic int runs, dones, status;
	int ret;
	uint8_t kind;
	_Atomic bool ret_set;
	_Atomic bool on_caller; /* run ran on the submitting thread */
};

struct round {
	bh_pool_t *pool;
	struct bh_pool_config cfg;
	char name[16];
	struct rec *recs;
	_Atomic uint32_t nrecs;
	_Atomic int running; /* tasks running on pool threads now */
	_Atomic bool stop, closed;
	int dropped_now; /* what bh_pool_shutdown_now dropped from the queue */
};

struct stask {
	struct bh_task task;
	struct round *r;
	uint32_t id;
	pthread_t submitter;
	uint8_t work;
	uint32_t work_ns;
};

static _Atomic unsigned long violations, checks;
static unsigned long long tot[8]; /* summary tallies */
enum { T_TASKS, T_COMPLETED, T_ABANDONED, T_DISCARDED, T_CALLER_RAN, T_REJECTED, T_SHUTDOWN };

__attribute__((format(printf, 1, 2))) static void violation(const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&violations, 1) < 20) {
		va_start(ap, fmt);
		fprintf(stderr, "stress_pool: VIOLATION: ");
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		va_end(ap);
	}
}

static void check(bool ok, const char *what)
{
	atomic_fetch_add_explicit(&checks, 1, memory_order_relaxed);
	if (!ok)
		violation("%s", what);
}

static uint64_t now_ns(void)
{
	return bh_now_ns();
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / BH_SEC), (long)(ns % BH_SEC) };

	nanosleep(&ts, NULL);
}

/* ---- the tasks -------------------------------------------------------------- */

static void s_run(struct bh_task *t)
{
	struct stask *st = (struct stask *)t;
	struct rec *rc = &st->r->recs[st->id];
	bool on_pool = !pthread_equal(pthread_self(), st->submitter);
	uint64_t end;

	atomic_fetch_add(&rc->runs, 1);
	atomic_store(&rc->on_caller, !on_pool);
	if (on_pool) {
		int n = atomic_fetch_add(&st->r->running, 1) + 1;

		check(n <= (int)st->r->cfg.max_threads, "more tasks running than max_threads");
	}
	switch (st->work) {
	case 0:
		break;
	case 1: /* spin */
		for (end = now_ns() + st->work_ns; now_ns() < end;)
			;
		break;
	default: /* a blocking call, stopping early when nobody waits any more */
		for (end = now_ns() + st->work_ns; now_ns() < end && !bh_task_cancelled(t);)
			sleep_ns(50 * BH_USEC);
		break;
	}
	if (on_pool)
		atomic_fetch_sub(&st->r->running, 1);
}

static void s_done(struct bh_task *t, int status)
{
	struct stask *st = (struct stask *)t;
	struct rec *rc = &st->r->recs[st->id];
	int runs = atomic_load(&rc->runs);

	atomic_store(&rc->status, status);
	check(atomic_fetch_add(&rc->dones, 1) == 0, "done called twice");
	check(status == 0 || status == -ETIMEDOUT || status == -ECANCELED, "done: bad status");
	check(status == -ECANCELED ? runs == 0 : runs == 1, "done's status disagrees with run");
	free(st);
}

/* ---- submitters ----------------------------------------------------------------- */

struct submitter {
	struct round *r;
	uint64_t seed;
	pthread_t tid;
};

static struct stask *new_task(struct round *r, uint64_t *seed, enum kind k)
{
	uint32_t id = atomic_fetch_add(&r->nrecs, 1);
	struct stask *st;

	if (id >= RECS)
		return NULL;
	st = calloc(1, sizeof(*st));
	if (!st) {
		violation("out of memory");
		return NULL;
	}
	st->task.run = s_run;
	st->task.done = s_done;
	st->r = r;
	st->id = id;
	st->submitter = pthread_self();
	st->work = (uint8_t)(rnd(seed) % 3);
	st->work_ns = (uint32_t)(rnd(seed) % (st->work == 1 ? 20 * BH_USEC : 400 * BH_USEC));
	r->recs[id].kind = (uint8_t)k;
	return st;
}

static uint64_t pick_deadline(uint64_t *seed)
{
	switch (rnd(seed) % 10) {
	case 0:
		return 0; /* already past */
	case 1:
		return BH_FOREVER;
	case 2:
	case 3:
		return now_ns() + rnd(seed) % (200 * BH_USEC);
	default:
		return now_ns() + rnd(seed) % (2 * BH_MSEC);
	}
}

/* The submitter owns the task again on these results: it frees it. */
static bool caller_owns(enum kind k, int ret)
{
	if (k == PLAIN)
		return ret < 0;
	return ret != -ETIMEDOUT;
}

static void *submitter_main(void *arg)
{
	struct submitter *s = arg;
	struct round *r = s->r;

	while (!atomic_load(&r->stop)) {
		enum kind k = rnd(&s->seed) % 5 < 3 ? PLAIN : CALL;
		struct stask *st = new_task(r, &s->seed, k);
		uint32_t id;
		int ret;

		if (!st) {
			sleep_ns(BH_MSEC);
			continue;
		}
		id = st->id;
		if (k == PLAIN)
			ret = bh_pool_submit(r->pool, &st->task);
		else
			ret = bh_pool_call(r->pool, &st->task, pick_deadline(&s->seed));
		r->recs[id].ret = ret;
		atomic_store(&r->recs[id].ret_set, true);
		if (caller_owns(k, ret))
			free(st);
		if (ret == -ESHUTDOWN)
			sleep_ns(100 * BH_USEC); /* closed: no point hurrying */
		else if (rnd(&s->seed) % 64 == 0)
			sleep_ns(rnd(&s->seed) % (100 * BH_USEC));
	}
	return NULL;
}

/* ---- the monitor ------------------------------------------------------------------ */

static int count_threads(const char *prefix)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL) {
		char path[300], name[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f) && strncmp(name, prefix, strlen(prefix)) == 0)
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* The kernel wakes pthread_join (the tid clear on exit) a moment before the
 * thread leaves /proc: give it up to a second to catch up. */
static bool threads_settle(const char *prefix, int want)
{
	uint64_t end = now_ns() + BH_SEC;

	while (count_threads(prefix) != want) {
		if (now_ns() > end)
			return false;
		sleep_ns(BH_MSEC);
	}
	return true;
}

/* At most max pool threads in /proc while the round runs. A thread that
 * left its slot may still be listed for a moment after its join (see
 * threads_settle) while a new one already runs in the slot: only a count
 * that stays above max for a second is a violation. */
static bool threads_at_most(const char *prefix, int max)
{
	uint64_t end = now_ns() + BH_SEC;

	while (count_threads(prefix) > max) {
		if (now_ns() > end)
			return false;
		sleep_ns(BH_MSEC);
	}
	return true;
}

static void check_snapshot(const struct round *r, const struct bh_pool_stats *st,
			   const struct bh_pool_stats *prev)
{
	check(st->submitted == st->queued + st->active - st->abandoned_running + st->completed +
				       st->abandoned + st->discarded + st->caller_ran,
	      "snapshot does not balance");
	check(st->alive <= r->cfg.max_threads, "more threads alive than max_threads");
	check(st->largest <= r->cfg.max_threads, "largest above max_threads");
	check(st->queued <= r->cfg.queue_capacity, "more queued than queue_capacity");
	check(st->active <= st->alive, "more active than alive");
	check(!st->queued || st->active == st->alive, "a task waits while a thread idles");
	check(st->abandoned_running <= st->active, "abandoned_running above active");
	check(st->submitted >= prev->submitted && st->completed >= prev->completed &&
		      st->abandoned >= prev->abandoned && st->discarded >= prev->discarded &&
		      st->caller_ran >= prev->caller_ran && st->rejected >= prev->rejected &&
		      st->largest >= prev->largest,
	      "a counter went backwards");
}

static void *monitor_main(void *arg)
{
	struct round *r = arg;
	struct bh_pool_stats prev = { 0 }, st;
	char prefix[20];
	unsigned i = 0;

	snprintf(prefix, sizeof(prefix), "%s-", r->name);
	while (!atomic_load(&r->stop)) {
		bh_pool_stats(r->pool, &st);
		check_snapshot(r, &st, &prev);
		prev = st;
		if (++i % 16 == 0)
			check(threads_at_most(prefix, (int)r->cfg.max_threads),
			      "more pool threads in /proc than max_threads");
		sleep_ns(200 * BH_USEC);
	}
	return NULL;
}

/* ---- one round ------------------------------------------------------------------ */

static void random_config(struct round *r, uint64_t *seed, unsigned idx)
{
	static const uint64_t keep[] = { 0, 50 * BH_USEC, BH_MSEC, 20 * BH_MSEC };
	struct bh_pool_config *c = &r->cfg;

	snprintf(r->name, sizeof(r->name), "sp%u", idx % 1000);
	memset(c, 0, sizeof(*c));
	c->name = r->name;
	c->core_threads = (uint32_t)(rnd(seed) % 4);
	c->max_threads = c->core_threads + (uint32_t)(rnd(seed) % 4);
	if (c->max_threads == 0)
		c->max_threads = 1;
	c->queue_capacity = (uint32_t)(rnd(seed) % 9);
	c->policy = (enum bh_pool_policy)(rnd(seed) % 4);
	c->keep_alive_ns = keep[rnd(seed) % 4];
	c->stack_size = rnd(seed) % 2 ? 256 * 1024 : 0;
	c->flags = rnd(seed) % 3 == 0 ? BH_POOL_PRESTART : 0;
}

/* The pool's final counters against the records' tallies, each exact.
 * rejected counts what a full pool refused (-EBUSY, -EAGAIN) and what its
 * policy took instead: run by the caller, dropped new, or queued in place
 * of the oldest task, which is then dropped unrun. Those drops are the
 * queued tasks dropped in all, less what bh_pool_shutdown_now dropped. */
static void check_records(struct round *r, const struct bh_pool_stats *st)
{
	uint32_t n = atomic_load(&r->nrecs);
	uint64_t completed = 0, abandoned = 0, discarded = 0, caller_ran = 0, taken = 0, busy = 0;
	uint64_t dropped_queued = 0;

	if (n > RECS)
		n = RECS;
	for (uint32_t i = 0; i < n; i++) {
		struct rec *c = &r->recs[i];
		int runs = atomic_load(&c->runs), dones = atomic_load(&c->dones);
		int status = atomic_load(&c->status), ret = c->ret;
		bool ok;

		if (!atomic_load(&c->ret_set)) {
			violation("task %u: submit never returned", i);
			continue;
		}
		if (c->kind == PLAIN) {
			if (ret == 0)
				ok = dones == 1; /* status/run agreement checked in done */
			else if (ret == BH_POOL_CALLER_RAN)
				ok = runs == 1 && dones == 1 && status == 0;
			else if (ret == BH_POOL_DISCARDED)
				ok = runs == 0 && dones == 1 && status == -ECANCELED;
			else
				ok = ret < 0 && runs == 0 && dones == 0;
			taken += ret >= 0;
			completed += ret == 0 && status == 0;
			discarded += ret == BH_POOL_DISCARDED || (ret == 0 && status == -ECANCELED);
			dropped_queued += ret == 0 && status == -ECANCELED;
			caller_ran += ret == BH_POOL_CALLER_RAN;
			busy += ret == -EBUSY || ret == -EAGAIN || ret == BH_POOL_CALLER_RAN ||
				ret == BH_POOL_DISCARDED;
		} else {
			bool here = atomic_load(&c->on_caller);

			if (ret == 0)
				ok = runs == 1 && dones == 0;
			else if (ret == -ETIMEDOUT)
				ok = dones == 1;
			else
				ok = runs == 0 && dones == 0;
			taken += ret == 0 || ret == -ETIMEDOUT || ret == -ECANCELED;
			abandoned += ret == -ETIMEDOUT;
			discarded += ret == -ECANCELED;
			dropped_queued += ret == -ECANCELED;
			completed += ret == 0 && !here;
			caller_ran += ret == 0 && here; /* CALLER_RUNS */
			busy += ret == -EBUSY || ret == -EAGAIN || (ret == 0 && here);
		}
		check(ok, "a task was not reported as its result promised");
		if (!ok)
			violation("task %u kind %d ret %d runs %d dones %d status %d", i, c->kind, ret,
				  runs, dones, status);
		tot[T_SHUTDOWN] += ret == -ESHUTDOWN;
	}
	check(dropped_queued >= (uint64_t)r->dropped_now, "shutdown_now dropped tasks nobody saw dropped");
	busy += dropped_queued - (uint64_t)r->dropped_now; /* DISCARD_OLDEST's swaps */
	check(st->completed == completed, "completed differs from the records");
	check(st->caller_ran == caller_ran, "caller_ran differs from the records");
	check(st->abandoned == abandoned, "abandoned differs from the records");
	check(st->discarded == discarded, "discarded differs from the records");
	check(st->submitted == taken, "submitted differs from the records");
	check(st->rejected == busy, "rejected differs from the refusals and policy results seen");
	if (st->rejected != busy || st->completed != completed || st->caller_ran != caller_ran)
		violation("round %s policy %d: rejected %llu (seen %llu), completed %llu (%llu), "
			  "caller_ran %llu (%llu)", r->name, (int)r->cfg.policy,
			  (unsigned long long)st->rejected, (unsigned long long)busy,
			  (unsigned long long)st->completed, (unsigned long long)completed,
			  (unsigned long long)st->caller_ran, (unsigned long long)caller_ran);
	tot[T_TASKS] += n;
	tot[T_COMPLETED] += st->completed;
	tot[T_ABANDONED] += st->abandoned;
	tot[T_DISCARDED] += st->discarded;
	tot[T_CALLER_RAN] += st->caller_ran;
	tot[T_REJECTED] += st->rejected;
}

static void shut_down(struct round *r, uint64_t *seed)
{
	int left;

	switch (rnd(seed) % 4) {
	case 0:
		left = bh_pool_shutdown_now(r->pool);
		check(left >= 0 && left <= (int)r->cfg.queue_capacity, "shutdown_now dropped too many");
		r->dropped_now = left;
		break;
	case 1:
		left = bh_pool_shutdown(r->pool, 0);
		check(left >= 0, "shutdown failed");
		break;
	case 2:
		left = bh_pool_shutdown(r->pool, now_ns() + rnd(seed) % (2 * BH_MSEC));
		check(left >= 0, "shutdown failed");
		break;
	default:
		left = bh_pool_shutdown(r->pool, BH_FOREVER);
		check(left == 0, "shutdown(FOREVER) left work");
		break;
	}
	atomic_store(&r->closed, true);
}

static void run_round(unsigned idx, uint64_t *seed, uint64_t round_ns, int base_threads)
{
	struct round *r = calloc(1, sizeof(*r));
	struct submitter subs[MAX_SUBMITTERS];
	unsigned nsub = 2 + (unsigned)(rnd(seed) % (MAX_SUBMITTERS - 1));
	struct bh_pool_stats st;
	pthread_t mon;
	char prefix[20];
	int rc;

	if (!r || !(r->recs = calloc(RECS, sizeof(*r->recs)))) {
		violation("out of memory");
		free(r);
		return;
	}
	random_config(r, seed, idx);
	rc = bh_pool_create(&r->cfg, &r->pool);
	if (rc < 0) {
		violation("create failed: %d", rc);
		goto out;
	}
	pthread_create(&mon, NULL, monitor_main, r);
	for (unsigned i = 0; i < nsub; i++) {
		subs[i] = (struct submitter){ .r = r, .seed = rnd(seed) | 1 };
		pthread_create(&subs[i].tid, NULL, submitter_main, &subs[i]);
	}
	sleep_ns(round_ns / 4 + rnd(seed) % (round_ns / 2));
	shut_down(r, seed);
	sleep_ns(round_ns / 8); /* traffic meets the closed pool */
	atomic_store(&r->stop, true);
	for (unsigned i = 0; i < nsub; i++)
		pthread_join(subs[i].tid, NULL);
	pthread_join(mon, NULL);
	check(bh_pool_shutdown(r->pool, BH_FOREVER) == 0, "final shutdown left work");
	bh_pool_stats(r->pool, &st);
	check(st.alive == 0 && st.active == 0 && st.queued == 0, "threads or tasks left after shutdown");
	check(atomic_load(&r->running) == 0, "a task still running after shutdown");
	check(bh_pool_destroy(r->pool) == 0, "destroy failed");
	snprintf(prefix, sizeof(prefix), "%s-", r->name);
	check(threads_settle(prefix, 0), "a pool thread left behind");
	check(threads_settle("", base_threads), "the process has more threads than before");
	check_records(r, &st);
out:
	free(r->recs);
	free(r);
}

static void watchdog(int sig)
{
	static const char msg[] = "stress_pool: VIOLATION: hung (a lost wakeup?)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(1);
}

static void *nothing(void *arg)
{
	return arg;
}

int main(int argc, char **argv)
{
	const char *env = getenv("BH_STRESS_SECONDS");
	double seconds = env ? atof(env) : 3;
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32), end;
	unsigned rounds = 0;
	int opt, base;

	while ((opt = getopt(argc, argv, "s:")) != -1) {
		if (opt == 's') {
			seed = strtoull(optarg, NULL, 0);
		} else {
			fprintf(stderr, "usage: %s [-s seed]\n", argv[0]);
			return 2;
		}
	}
	if (seconds <= 0)
		seconds = 3;
	seed |= 1;
	/* A lost wakeup shows up as a hang: fail instead. */
	signal(SIGALRM, watchdog);
	alarm((unsigned)(seconds * 10) + 60);
	printf("stress_pool: seed=%llu seconds=%.1f\n", (unsigned long long)seed, seconds);
	fflush(stdout);
	/* A first thread makes ThreadSanitizer start its background thread, so
	 * the baseline counts it. */
	pthread_t t;
	pthread_create(&t, NULL, nothing, NULL);
	pthread_join(t, NULL);
	base = count_threads("");
	end = now_ns() + (uint64_t)(seconds * 1e9);
	while (now_ns() < end) {
		uint64_t round_ns = 40 * BH_MSEC + rnd(&seed) % (160 * BH_MSEC);

		run_round(rounds++, &seed, round_ns, base);
	}
	/* stress/run.sh takes "NAME: PASS " as the verdict */
	printf("stress_pool: %s rounds=%u tasks=%llu completed=%llu abandoned=%llu discarded=%llu "
	       "caller_ran=%llu rejected=%llu refused_closed=%llu checks=%lu violations=%lu\n",
	       atomic_load(&violations) ? "FAIL" : "PASS", rounds, tot[T_TASKS], tot[T_COMPLETED], tot[T_ABANDONED], tot[T_DISCARDED],
	       tot[T_CALLER_RAN], tot[T_REJECTED], tot[T_SHUTDOWN], atomic_load(&checks),
	       atomic_load(&violations));
	return atomic_load(&violations) ? 1 : 0;
}
