/* Adaptive limits: the API's rules, the defaults of a zeroed config, the
 * windows, every algorithm's update rule against its published formula
 * (fed synthetic windows), and many threads sampling at once: no sample
 * lost, no two limit changes at once (run it under ThreadSanitizer). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "adaptive/algo.h"
#include "adaptive/bha.h"
#include "bulkhead/adaptive.h"
#include "bulkhead/shm.h"
#include "pool/pool_internal.h"
#include "shm/role.h"

#ifndef MS /* adaptive/algo.h has it */
#define MS BH_MSEC
#endif

/* ---- a fake clock ------------------------------------------------------------ */

static _Atomic uint64_t fake_t = 1000 * MS;

static uint64_t fake_clock(void *ctx)
{
	(void)ctx;
	return atomic_load_explicit(&fake_t, memory_order_relaxed);
}

static void advance(uint64_t ns)
{
	atomic_fetch_add_explicit(&fake_t, ns, memory_order_relaxed);
}

static uint32_t limit_of(bulkhead_t *bh)
{
	struct bh_stats st;

	bh_stats(bh, &st);
	return (uint32_t)st.limit;
}

static bh_adaptive_t *attach(bulkhead_t *bh, const struct bh_adaptive_config *cfg)
{
	bh_adaptive_t *a = NULL;

	assert_int_equal(bh_adaptive_attach(bh, cfg, &a), 0);
	bha_set_clock(a, fake_clock, NULL);
	return a;
}

/* n samples of rtt, one per step of virtual time. */
static void feed(bh_adaptive_t *a, unsigned n, uint64_t rtt, enum bh_outcome o, uint64_t step)
{
	for (unsigned i = 0; i < n; i++) {
		advance(step);
		bh_adaptive_sample(a, rtt, o);
	}
}

/* ---- the API -------------------------------------------------------------------- */

static void null_and_bad_arguments(void **state)
{
	bulkhead_t *bh = make_bh(10, 0, 0);
	bh_adaptive_t *a = NULL;
	struct bh_adaptive_stats st;
	struct bh_adaptive_change ch[2];
	struct bh_adaptive_config bad[] = {
		{ .algo = (enum bh_adaptive_algo)99 },
		{ .percentile = 101 },
		{ .min_limit = 10, .max_limit = 5 },
		{ .max_limit = BH_LIMIT_MAX + 1 },
		{ .initial_limit = BH_LIMIT_MAX + 1 },
		{ .sources = 1u << 5 },
	};

	(void)state;
	assert_int_equal(bh_adaptive_attach(NULL, NULL, &a), -EINVAL);
	assert_int_equal(bh_adaptive_attach(bh, NULL, NULL), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(bh_adaptive_attach(bh, &bad[i], &a), -EINVAL);
	assert_null(a);
	assert_int_equal(limit_of(bh), 10); /* nothing touched it */
	assert_int_equal(bh_adaptive_stats(NULL, &st), -EINVAL);
	assert_int_equal(bh_adaptive_history(NULL, ch, 2), -EINVAL);
	bh_adaptive_detach(NULL);
	a = attach(bh, NULL);
	assert_int_equal(bh_adaptive_stats(a, NULL), -EINVAL);
	assert_int_equal(bh_adaptive_history(a, NULL, 1), -EINVAL);
	assert_int_equal(bh_adaptive_history(a, NULL, 0), 0);
	bh_adaptive_detach(a);
	bh_destroy(bh);
}

/* An explicit floor above the algorithm's default ceiling (AIMD's 200)
 * raises the ceiling to it: the limit never goes below min_limit. */
static void explicit_floor_raises_defaulted_ceiling(void **state)
{
	bulkhead_t *bh = make_bh(100, 0, 0);
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD, .min_limit = 500 };
	struct bh_adaptive_stats st;
	bh_adaptive_t *a = attach(bh, &c);

	(void)state;
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	assert_int_equal(st.min_limit, 500);
	assert_int_equal(st.max_limit, 500);
	assert_int_equal(st.limit, 500);
	assert_int_equal(limit_of(bh), 500);
	bh_adaptive_detach(a);
	bh_destroy(bh);
}

/* The window percentile is the observation of rank ceil(n q / 100): of
 * three samples, the median is the second, so with one fast sample and
 * two slow ones it lies in the slow samples' bucket. */
static void percentile_rank_rounds_up(void **state)
{
	uint32_t counts[BHA_NB] = { 0 };
	uint64_t p;

	(void)state;
	counts[9] = 1;  /* [2048, 2304) ns */
	counts[17] = 2; /* [4096, 4608) ns */
	p = bha_percentile(counts, 3, 50);
	assert_true(p >= 4096 && p < 4608);
	p = bha_percentile(counts, 3, 33); /* rank ceil(0.99) = 1 */
	assert_true(p >= 2048 && p < 2304);
	p = bha_percentile(counts, 3, 34); /* rank ceil(1.02) = 2 */
	assert_true(p >= 4096 && p < 4608);
}

static void one_controller_per_bulkhead(void **state)
{
	bulkhead_t *bh = make_bh(10, 0, 0);
	bh_adaptive_t *a, *b = NULL;

	(void)state;
	a = attach(bh, NULL);
	assert_int_equal(bh_adaptive_attach(bh, NULL, &b), -EBUSY);
	assert_null(b);
	bh_adaptive_detach(a);
	b = attach(bh, NULL); /* free again */
	bh_adaptive_detach(b);
	bh_destroy(bh);
}

/* ---- host-wide bulkheads ------------------------------------------------------------ */

static const struct bh_adaptive_config host_cfg = {
	.algo = BH_ADAPTIVE_AIMD, .min_limit = 2, .max_limit = 100,
	.sources = BH_ADAPTIVE_SRC_MANUAL,
};

static bulkhead_t *host_open(char *dir, uint32_t limit, uint32_t flags)
{
	struct bh_config cfg = { .max_concurrent = limit, .flags = flags };
	bulkhead_t *bh;

	assert_non_null(mkdtemp(dir));
	setenv("BH_SHM_DIR", dir, 1);
	assert_int_equal(bh_shm_open("adaptive", &cfg, BH_SHM_CREATE, &bh), 0);
	return bh;
}

static void host_close(bulkhead_t *bh, char *dir)
{
	bh_destroy(bh);
	assert_int_equal(bh_shm_unlink("adaptive"), 0);
	assert_int_equal(rmdir(dir), 0);
	unsetenv("BH_SHM_DIR");
}

/* One window of drops: AIMD cuts the limit to 0.9 of itself. */
static void drops(bh_adaptive_t *a)
{
	feed(a, 12, 10 * MS, BH_DROPPED, 100 * MS);
	bha_flush(a);
}

/* In a child: a controller that is not the role's holder follows the
 * limit and does not move it. Exit status 0 when it did not. */
static int child_follows(uint32_t limit)
{
	struct bh_adaptive_stats st;
	bulkhead_t *bh;
	bh_adaptive_t *b;

	/* its own handle: the inherited one carries the parent's controller
	 * (as a follower in this process) */
	if (bh_shm_open("adaptive", NULL, 0, &bh) != 0 ||
	    bh_adaptive_attach(bh, &host_cfg, &b) != 0)
		return 2;
	bha_set_clock(b, fake_clock, NULL);
	drops(b);
	bh_adaptive_stats(b, &st);
	return limit_of(bh) == limit && st.limit == limit ? 0 : 1;
}

static int wait_child(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Every process may attach a controller to one host-wide bulkhead; the
 * first moves the host's limit and the others follow it, until the holder
 * detaches or dies. */
static void host_wide_one_mover(void **state)
{
	char dir[] = "/tmp/bh-adaptive-test.XXXXXX";
	bulkhead_t *bh = host_open(dir, 30, 0);
	bh_adaptive_t *a = attach(bh, &host_cfg);
	int sync[2];
	char c = 0;
	pid_t pid;

	(void)state;
	if ((pid = fork()) == 0)
		_exit(child_follows(30));
	assert_int_equal(wait_child(pid), 0);
	assert_int_equal(limit_of(bh), 30);
	drops(a);
	assert_int_equal(limit_of(bh), 27); /* the holder moves it */
	bh_adaptive_detach(a);              /* and frees the role */

	assert_int_equal(pipe(sync), 0);
	if ((pid = fork()) == 0) {
		bh_adaptive_t *b;

		if (bh_shm_open("adaptive", NULL, 0, &bh) != 0 ||
		    bh_adaptive_attach(bh, &host_cfg, &b) != 0)
			_exit(2);
		bha_set_clock(b, fake_clock, NULL);
		drops(b);
		if (write(sync[1], &c, 1) != 1)
			_exit(3);
		pause(); /* holds the role until killed */
		_exit(4);
	}
	assert_int_equal(read(sync[0], &c, 1), 1);
	assert_int_equal(limit_of(bh), 24); /* the child took the free role */
	a = attach(bh, &host_cfg);
	drops(a);
	assert_int_equal(limit_of(bh), 24); /* a live holder: we follow */
	kill(pid, SIGKILL);
	assert_int_equal(wait_child(pid), 128);
	drops(a);
	assert_int_equal(limit_of(bh), 21); /* the dead holder's role is ours */
	bh_adaptive_detach(a);
	close(sync[0]);
	close(sync[1]);
	host_close(bh, dir);
}

/* BH_TRACK_HOLD's hold times on a host-wide bulkhead are samples too. */
static uint64_t host_hold_samples(uint32_t sources)
{
	char dir[] = "/tmp/bh-adaptive-test.XXXXXX";
	bulkhead_t *bh = host_open(dir, 8, BH_TRACK_HOLD);
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD, .sources = sources };
	struct bh_adaptive_stats st;
	bh_adaptive_t *a = attach(bh, &c);

	for (int i = 0; i < 5; i++) {
		assert_int_equal(bh_try_acquire(bh, 2), 0);
		usleep(200); /* above the controller's shortest round trip */
		assert_int_equal(bh_release(bh, 1), 0);
		assert_int_equal(bh_release(bh, 1), 0); /* the hold ends here */
	}
	bha_flush(a);
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	bh_adaptive_detach(a);
	host_close(bh, dir);
	return st.ok;
}

static void host_wide_hold_samples(void **state)
{
	(void)state;
	assert_int_equal(host_hold_samples(0), 5);
	assert_int_equal(host_hold_samples(BH_ADAPTIVE_SRC_MANUAL), 0);
}

static void reason_names(void **state)
{
	(void)state;
	assert_string_equal(bh_adaptive_reason_name(BH_ADAPTIVE_START), "start");
	assert_string_equal(bh_adaptive_reason_name(BH_ADAPTIVE_QUEUEING), "queueing");
	assert_string_equal(bh_adaptive_reason_name(BH_ADAPTIVE_BASELINE), "baseline");
	for (unsigned r = 0; r < BH_ADAPTIVE_NREASONS; r++)
		assert_non_null(bh_adaptive_reason_name(r));
	assert_null(bh_adaptive_reason_name(BH_ADAPTIVE_NREASONS));
}

/* A zeroed config (and NULL) means: the library's algorithm, starting at
 * the bulkhead's limit, floor 2, ceiling max(1000, 4 x start); it first
 * probes (limit 4) for 16 samples of calls started after in flight
 * drained, then goes back to the start with a baseline. */
static void zeroed_config_defaults(void **state)
{
	static const struct bh_adaptive_config zero;
	const struct bh_adaptive_config *cfgs[] = { NULL, &zero };

	(void)state;
	for (int i = 0; i < 2; i++) {
		bulkhead_t *bh = make_bh(50, 0, 0);
		bh_adaptive_t *a = attach(bh, cfgs[i]);
		struct bh_adaptive_stats st;
		struct bh_adaptive_change ch[4];

		assert_int_equal(bh_adaptive_stats(a, &st), 0);
		assert_int_equal(st.min_limit, 2);
		assert_int_equal(st.max_limit, 1000);
		assert_int_equal(st.limit, 4);
		assert_int_equal(st.reason, BH_ADAPTIVE_PROBE);
		assert_int_equal(st.probing, 1);
		assert_int_equal(limit_of(bh), 4);
		/* in flight (0) is under the pin: the first sample starts the
		 * epoch and is itself from before it */
		feed(a, 1, 10 * MS, BH_OK, MS);
		advance(20 * MS);
		feed(a, 16, 10 * MS, BH_OK, MS);
		assert_int_equal(bh_adaptive_stats(a, &st), 0);
		assert_int_equal(st.probing, 0);
		assert_int_equal(st.limit, 50);
		assert_int_equal(st.reason, BH_ADAPTIVE_RESTORE);
		assert_true(st.baseline_ns > 9 * MS && st.baseline_ns < 11 * MS);
		assert_int_equal(st.discarded, 1);
		assert_int_equal(st.ok, 16);
		assert_int_equal(limit_of(bh), 50);
		assert_int_equal(bh_adaptive_history(a, ch, 4), 3);
		assert_int_equal(ch[0].reason, BH_ADAPTIVE_START);
		assert_int_equal(ch[0].limit, 50);
		assert_int_equal(ch[1].reason, BH_ADAPTIVE_PROBE);
		assert_int_equal(ch[2].limit, 50);
		bh_adaptive_detach(a);
		assert_int_equal(limit_of(bh), 50); /* detach leaves it */
		bh_destroy(bh);
	}
}

static void ceiling_follows_start(void **state)
{
	struct bh_adaptive_config c = { .initial_limit = 400 };
	bulkhead_t *bh = make_bh(10, 0, 0);
	bh_adaptive_t *a = attach(bh, &c);
	struct bh_adaptive_stats st;

	(void)state;
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	assert_int_equal(st.max_limit, 1600);
	bh_adaptive_detach(a);
	bh_destroy(bh);
}

struct win_log {
	unsigned n;
	uint64_t longest_ns, ok, dropped;
	uint64_t ok_sum;
	struct bha_window last;
	struct bha_verdict last_v;
};

static void log_window(void *ctx, const struct bha_window *w, const struct bha_verdict *v)
{
	struct win_log *l = ctx;

	l->n++;
	if (!w->probe && w->end_ns - w->start_ns > l->longest_ns)
		l->longest_ns = w->end_ns - w->start_ns;
	l->ok += w->ok;
	l->dropped += w->dropped;
	l->ok_sum += w->ok_sum_ns;
	l->last = *w;
	l->last_v = *v;
}

/* At a 10 ms round trip a window closes after 4 of them (40 ms) with a
 * steady stream, and within 250 ms even with a thin one. */
static void windows_close_after_a_few_round_trips(void **state)
{
	static const uint64_t steps[] = { 1 * MS, 20 * MS };

	(void)state;
	for (int i = 0; i < 2; i++) {
		bulkhead_t *bh = make_bh(20, 0, 0);
		bh_adaptive_t *a = attach(bh, NULL);
		struct win_log l = { 0 };

		feed(a, 40, 10 * MS, BH_OK, MS); /* through the probe */
		bha_set_window_hook(a, log_window, &l);
		feed(a, 2000, 10 * MS, BH_OK, steps[i]);
		assert_true(l.n > 0);
		if (i == 0)
			assert_true(l.longest_ns >= 40 * MS && l.longest_ns <= 45 * MS);
		else
			assert_true(l.longest_ns <= 250 * MS);
		bh_adaptive_detach(a);
		bh_destroy(bh);
	}
}

/* Every sample counts once, by outcome; the windows used exactly the OK
 * and dropped ones, and a flush closes the open one. */
static void every_sample_counted_once(void **state)
{
	bulkhead_t *bh = make_bh(20, 0, 0);
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD };
	bh_adaptive_t *a = attach(bh, &c);
	struct bh_adaptive_stats st;
	struct win_log l = { 0 };

	(void)state;
	bha_set_window_hook(a, log_window, &l);
	feed(a, 500, 10 * MS, BH_OK, MS);
	feed(a, 70, 10 * MS, BH_DROPPED, MS);
	feed(a, 30, 10 * MS, BH_IGNORE, MS);
	feed(a, 20, 50 * BH_USEC, BH_OK, MS); /* under Netflix's 100 us */
	feed(a, 5, 10 * MS, (enum bh_outcome)7, MS);
	bha_flush(a);
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	assert_int_equal(st.ok, 500);
	assert_int_equal(st.dropped, 70);
	assert_int_equal(st.ignored, 35);
	assert_int_equal(st.discarded, 20);
	assert_int_equal(st.windowed, 570);
	assert_int_equal(l.ok, 500);
	assert_int_equal(l.dropped, 70);
	assert_int_equal(l.ok_sum, 500 * 10 * MS);
	assert_int_equal(st.windows, l.n);
	bh_adaptive_detach(a);
	bh_destroy(bh);
}

/* A latency from a start after its end (now - t0 wrapped) is discarded, as
 * a negative duration; a real but absurd one counts as BHA_RTT_MAX, so that
 * a window's sum cannot wrap into a small mean. */
static void impossible_latencies(void **state)
{
	bulkhead_t *bh = make_bh(20, 0, 0);
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD };
	bh_adaptive_t *a = attach(bh, &c);
	struct bh_adaptive_stats st;
	struct win_log l = { 0 };

	(void)state;
	bha_set_window_hook(a, log_window, &l);
	feed(a, 9, 10 * MS, BH_OK, MS);
	feed(a, 1, UINT64_MAX, BH_OK, MS);
	feed(a, 1, (uint64_t)-1000, BH_DROPPED, MS);
	feed(a, 2, 1ull << 50, BH_OK, MS);
	bha_flush(a);
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	assert_int_equal(st.ok, 11);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.discarded, 2);
	assert_int_equal(l.ok, 11);
	assert_int_equal(l.ok_sum, 9 * 10 * MS + 2 * BHA_RTT_MAX);
	bh_adaptive_detach(a);
	bh_destroy(bh);
	assert_int_equal(sat_shl_ns(1, 63), 1ull << 63);
	assert_int_equal(sat_shl_ns(1ull << 62, 2), UINT64_MAX); /* the probe backoff */
	assert_int_equal(sat_shl_ns(3, 64), UINT64_MAX);
	assert_int_equal(sat_shl_ns(0, 64), UINT64_MAX);
}

/* A fork child detaches a controller that a thread of the parent was inside
 * when it forked (a hold sample closing a window, held in the window hook):
 * that thread does not exist in the child, so neither its mark in the
 * bulkhead's slot nor its closer's role may be waited for. */
static _Atomic int hook_in, hook_go;

static void hold_in_hook(void *ctx, const struct bha_window *w, const struct bha_verdict *v)
{
	(void)ctx;
	(void)w;
	(void)v;
	atomic_store(&hook_in, 1);
	while (!atomic_load(&hook_go))
		sched_yield();
}

static void *hold_sampler(void *arg)
{
	uint64_t end = bh_now_ns() + 10 * BH_SEC;

	while (!atomic_load(&hook_in) && bh_now_ns() < end) {
		advance(10 * MS);
		bh_record_hold(arg, 10 * MS);
	}
	return NULL;
}

static void fork_child_detaches(void **state)
{
	bulkhead_t *bh = make_bh(20, 0, BH_TRACK_HOLD);
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD };
	bh_adaptive_t *a = attach(bh, &c);
	uint64_t end = bh_now_ns() + 10 * BH_SEC;
	pthread_t th;
	pid_t pid;
	int st;

	(void)state;
	atomic_store(&hook_in, 0);
	atomic_store(&hook_go, 0);
	bha_set_window_hook(a, hold_in_hook, NULL);
	assert_int_equal(pthread_create(&th, NULL, hold_sampler, bh), 0);
	while (!atomic_load(&hook_in) && bh_now_ns() < end)
		sched_yield();
	assert_true(atomic_load(&hook_in)); /* inside the sink, closing a window */
	pid = fork();
	if (pid == 0) {
		alarm(5); /* a hang dies of SIGALRM */
		bh_adaptive_detach(a);
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	atomic_store(&hook_go, 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	bh_adaptive_detach(a);
	bh_destroy(bh);
}

/* The same, with the parent's closer cut short in the middle of publishing
 * the window (its seqlock odd, which the test makes it: no hook runs
 * there): the child's readers must not wait for a writer that does not
 * exist in it. */
static void fork_child_reads_a_cut_publish(void **state)
{
	bulkhead_t *bh = make_bh(20, 0, BH_TRACK_HOLD);
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD };
	bh_adaptive_t *a = attach(bh, &c);
	uint64_t end = bh_now_ns() + 10 * BH_SEC;
	pthread_t th;
	pid_t pid;
	int st;

	(void)state;
	atomic_store(&hook_in, 0);
	atomic_store(&hook_go, 0);
	bha_set_window_hook(a, hold_in_hook, NULL);
	assert_int_equal(pthread_create(&th, NULL, hold_sampler, bh), 0);
	while (!atomic_load(&hook_in) && bh_now_ns() < end)
		sched_yield();
	assert_true(atomic_load(&hook_in)); /* the parent's closer, mid-close */
	pid = fork();
	if (pid == 0) {
		struct bh_adaptive_stats s;
		struct bh_adaptive_change h[BH_ADAPTIVE_HISTORY];
		char buf[8192];

		alarm(5); /* a hang dies of SIGALRM */
		atomic_fetch_add(&a->seq, 1); /* as a fork inside publish() leaves it */
		if (bh_adaptive_stats(a, &s) != 0 || s.limit != 20 ||
		    bh_adaptive_history(a, h, BH_ADAPTIVE_HISTORY) < 1 ||
		    bh_adaptive_metrics_prometheus(&a, 1, buf, sizeof(buf)) <= 0)
			_exit(3);
		bh_adaptive_detach(a);
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	atomic_store(&hook_go, 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	bh_adaptive_detach(a);
	bh_destroy(bh);
}

/* The same, on the slot that the threads beyond a bulkhead's own slots
 * share: the parent's thread left its mark there, and in the child a new
 * thread, also beyond the slots, marks and unmarks it again before the
 * detach, which must still not wait for the parent's thread. */
/* The child's thread takes an index beyond the slots, as a new thread of
 * a child whose parent had that many threads would (ThreadSanitizer starts
 * no thread after a multi-threaded fork, so the forking thread plays it). */
static int child_samples_then_detaches(bulkhead_t *bh, bh_adaptive_t *a)
{
	alarm(5); /* a hang dies of SIGALRM */
	atomic_store(&hook_go, 1); /* this process's copy of the hook passes */
	bhi_tindex = ((struct bulkhead *)bh)->nslots + 1u; /* the shared slot */
	bh_record_hold(bh, 10 * MS);
	bh_adaptive_detach(a);
	return 0;
}

static void fork_child_detaches_shared_slot(void **state)
{
	bulkhead_t *bh = make_bh(20, 0, BH_TRACK_HOLD);
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD };
	bh_adaptive_t *a = attach(bh, &c);
	uint64_t end = bh_now_ns() + 10 * BH_SEC;
	struct parked_threads k;
	pthread_t th;
	pid_t pid;
	int st;

	(void)state;
	park_threads(&k, bh->nslots + 1); /* every slot's index is taken: the sampler shares */
	atomic_store(&hook_in, 0);
	atomic_store(&hook_go, 0);
	bha_set_window_hook(a, hold_in_hook, NULL);
	assert_int_equal(pthread_create(&th, NULL, hold_sampler, bh), 0);
	while (!atomic_load(&hook_in) && bh_now_ns() < end)
		sched_yield();
	assert_true(atomic_load(&hook_in)); /* inside the sink, marked on the shared slot */
	pid = fork();
	if (pid == 0)
		_exit(child_samples_then_detaches(bh, a));
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	atomic_store(&hook_go, 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	unpark_threads(&k);
	bh_adaptive_detach(a);
	bh_destroy(bh);
}

/* ---- the algorithms, one window at a time ------------------------------------- */

static void algo(struct bha_algo *g, enum bh_adaptive_algo kind, uint32_t start,
		 struct bha_verdict *v)
{
	struct bh_adaptive_config c = { .algo = kind, .seed = 7 };

	bha_algo_init(g, &c, start, 0, v);
}

static struct bha_window win(uint64_t ok, uint64_t dropped, uint64_t mean_ns, uint32_t peak)
{
	struct bha_window w = { .ok = ok, .dropped = dropped, .ok_sum_ns = ok * mean_ns,
				.drop_sum_ns = dropped * mean_ns, .pct_ns = mean_ns,
				.hist_n = ok, .peak = peak };

	return w;
}

static uint32_t step(struct bha_algo *g, struct bha_verdict *v, struct bha_window w)
{
	w.limit = v->limit;
	bha_algo_window(g, &w, 0, v);
	return v->limit;
}

/* AIMDLimit: drop or rtt > 5 s: (int)(L x 0.9); inflight x 2 >= L: L + 1;
 * clamp [20, 200]; windows of fewer than 10 samples change nothing. */
static void aimd_rules(void **state)
{
	struct bha_algo g;
	struct bha_verdict v;

	(void)state;
	algo(&g, BH_ADAPTIVE_AIMD, 30, &v);
	assert_int_equal(v.limit, 30);
	assert_int_equal(v.window_ns, BH_SEC);
	assert_int_equal(step(&g, &v, win(10, 0, 10 * MS, 15)), 31);
	assert_int_equal(step(&g, &v, win(10, 0, 10 * MS, 15)), 31); /* 30 < 31 */
	assert_int_equal(step(&g, &v, win(9, 0, 10 * MS, 31)), 31);  /* not ready */
	assert_int_equal(step(&g, &v, win(9, 1, 10 * MS, 31)), 27);  /* (int)27.9 */
	assert_int_equal(v.reason, BH_ADAPTIVE_DROPS);
	assert_int_equal(step(&g, &v, win(10, 0, 6 * BH_SEC, 31)), 24);
	assert_int_equal(step(&g, &v, win(10, 1, MS, 31)), 21);
	assert_int_equal(step(&g, &v, win(10, 1, MS, 31)), 20); /* floor 20 */
	algo(&g, BH_ADAPTIVE_AIMD, 500, &v);
	assert_int_equal(v.limit, 200); /* ceiling 200 */
}

/* VegasLimit: f = max(1, floor(log10 L)), alpha 3f, beta 6f; the first
 * window (and every probe) sets the no-load RTT; queue = ceil(L(1 -
 * noload/rtt)); drop: L - f; inflight x 2 < L: unchanged; queue <= f:
 * L + beta; < alpha: L + f; > beta: L - f. */
static void vegas_rules(void **state)
{
	struct bha_algo g;
	struct bha_verdict v;

	(void)state;
	algo(&g, BH_ADAPTIVE_VEGAS, 20, &v);
	assert_int_equal(step(&g, &v, win(10, 0, 10 * MS, 20)), 20); /* noload = 10 ms */
	assert_int_equal(g.u.vegas.rtt_noload, 10 * MS);
	assert_int_equal(step(&g, &v, win(10, 0, 10 * MS, 20)), 26); /* queue 0: + 6 */
	/* queue = ceil(26 (1 - 10/11)) = 3: alpha = 3, so not < alpha, not > beta */
	assert_int_equal(step(&g, &v, win(10, 0, 11 * MS, 26)), 26);
	/* queue = ceil(26 (1 - 10/12)) = 5: unchanged; 10/16: 10 > 6: - 1 */
	assert_int_equal(step(&g, &v, win(10, 0, 12 * MS, 26)), 26);
	assert_int_equal(step(&g, &v, win(10, 0, 16 * MS, 26)), 25);
	assert_int_equal(v.reason, BH_ADAPTIVE_QUEUEING);
	/* queue = ceil(25 (1 - 10/10.5)) = 2 < 3: + 1 */
	assert_int_equal(step(&g, &v, win(10, 0, 10500 * BH_USEC, 25)), 26);
	assert_int_equal(step(&g, &v, win(10, 0, 10 * MS, 12)), 26); /* 24 < 26 */
	assert_int_equal(step(&g, &v, win(9, 1, 10 * MS, 12)), 25);  /* drop: - 1 */
	assert_int_equal(step(&g, &v, win(10, 0, 5 * MS, 25)), 25);  /* new minimum */
	assert_int_equal(g.u.vegas.rtt_noload, 5 * MS);
}

/* Vegas's probe: after jitter x 30 x L updates the sample replaces the
 * minimum, even when larger. */
static void vegas_probe(void **state)
{
	struct bha_algo g;
	struct bha_verdict v;
	unsigned n = 0;

	(void)state;
	algo(&g, BH_ADAPTIVE_VEGAS, 2, &v);
	step(&g, &v, win(10, 0, 10 * MS, 0)); /* noload 10 ms; app-limited from here */
	while (g.u.vegas.rtt_noload == 10 * MS && n < 100) {
		step(&g, &v, win(10, 0, 30 * MS, 0));
		n++;
	}
	assert_int_equal(g.u.vegas.rtt_noload, 30 * MS);
	/* jitter in [0.5, 1): after 30..60 updates at L = 2 */
	assert_true(n >= 29 && n <= 60);
}

/* Gradient2Limit: longRtt EMA(600) after a 10-sample warm-up, x 0.95 when
 * long/short > 2; inflight < L/2: unchanged; gradient = clamp(1.5 long /
 * short, 0.5, 1); L = 0.8 L + 0.2 (L gradient + 4); clamp [20, 200]. */
static void gradient2_rules(void **state)
{
	struct bha_algo g;
	struct bha_verdict v;
	double est = 100, lng = 0, sum = 0;

	(void)state;
	algo(&g, BH_ADAPTIVE_GRADIENT2, 100, &v);
	for (int i = 1; i <= 30; i++) {
		double rtt = i <= 12 ? 10e6 : 40e6, grad;

		if (i <= 10) {
			sum += rtt;
			lng = sum / i;
		} else {
			lng = lng * (1 - 2.0 / 601) + rtt * (2.0 / 601);
		}
		grad = fmax(0.5, fmin(1.0, 1.5 * lng / rtt));
		est = est * 0.8 + (est * grad + 4) * 0.2;
		est = fmax(20, fmin(200, est));
		step(&g, &v, win(10, 0, (uint64_t)rtt, 200));
		assert_int_equal(v.limit, (uint32_t)est);
		if (lng / rtt > 2)
			lng *= 0.95;
	}
	/* app-limited: unchanged; drops: not looked at */
	assert_int_equal(step(&g, &v, win(10, 0, 80 * MS, (uint32_t)est / 2 - 1)), (uint32_t)est);
}

/* Envoy: pinned at 3 for 50 samples first; then L x clamp(1.25 minRTT /
 * sample, 0.5, 2) + sqrt of that, clamp [3, 1000]; 5 updates in a row at 3
 * start a new minRTT window. */
static void envoy_rules(void **state)
{
	struct bha_algo g;
	struct bha_verdict v;
	struct bha_window w;
	double l;

	(void)state;
	algo(&g, BH_ADAPTIVE_ENVOY, 40, &v);
	assert_int_equal(v.limit, 3);
	assert_int_equal(v.probe_samples, 50);
	w = win(50, 0, 10 * MS, 3);
	w.probe = true;
	assert_int_equal(step(&g, &v, w), 40);
	assert_int_equal(v.reason, BH_ADAPTIVE_RESTORE);
	assert_int_equal(v.window_ns, 100 * MS);
	l = 40 * 1.25;
	assert_int_equal(step(&g, &v, win(100, 0, 10 * MS, 40)), (uint32_t)(l + sqrt(l)));
	l = (uint32_t)(l + sqrt(l)) * 0.5; /* 12.5 / 40: clamped to 0.5 */
	assert_int_equal(step(&g, &v, win(100, 0, 40 * MS, 40)), (uint32_t)(l + sqrt(l)));
	for (int i = 0; i < 10 && v.limit > 3; i++)
		step(&g, &v, win(100, 0, 1000 * MS, 3));
	assert_int_equal(v.limit, 3);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(v.probe_samples, 0);
		step(&g, &v, win(100, 0, 1000 * MS, 3));
	}
	assert_int_equal(v.probe_samples, 50); /* the 5th at the minimum */
	w = win(3, 0, 30 * MS, 3); /* that window ends on its deadline, 3 samples */
	w.probe = true;
	step(&g, &v, w);
	assert_int_equal(g.u.envoy.min_rtt, 10 * MS); /* kept: too few to measure */
	algo(&g, BH_ADAPTIVE_ENVOY, 40, &v);
	step(&g, &v, w);
	assert_int_equal(g.u.envoy.min_rtt, 30 * MS); /* none yet: the few it has */
}

/* The default, rule by rule (its baseline from the first probe). */
static void default_rules(void **state)
{
	struct bha_algo g;
	struct bha_verdict v;
	struct bha_window w;

	(void)state;
	algo(&g, BH_ADAPTIVE_DEFAULT, 40, &v);
	assert_int_equal(v.limit, 4);
	w = win(16, 0, 10 * MS, 4);
	w.probe = true;
	assert_int_equal(step(&g, &v, w), 40);
	assert_int_equal(g.u.own.base, 10 * MS);
	/* at the baseline, in use: slow start doubles until queueing */
	assert_int_equal(step(&g, &v, win(100, 0, 10 * MS, 40)), 80);
	assert_int_equal(v.reason, BH_ADAPTIVE_RECOVER);
	/* 2x the baseline: cut towards 1.15 B / p = 0.575 */
	assert_int_equal(step(&g, &v, win(100, 0, 20 * MS, 80)), 46);
	assert_int_equal(v.reason, BH_ADAPTIVE_QUEUEING);
	/* latency followed (11.5 ms < 85% of 20): in band, held */
	assert_int_equal(step(&g, &v, win(100, 0, 11500 * BH_USEC, 46)), 46);
	/* at the baseline again: above the last good limit grow by sqrt/2 */
	assert_int_equal(step(&g, &v, win(100, 0, 10 * MS, 46)), 49);
	assert_int_equal(v.reason, BH_ADAPTIVE_GROW);
	/* app-limited: no growth */
	assert_int_equal(step(&g, &v, win(100, 0, 10 * MS, 20)), 49);
	/* 10% dropped: x 0.9 */
	assert_int_equal(step(&g, &v, win(90, 10, 10 * MS, 49)), 44);
	assert_int_equal(v.reason, BH_ADAPTIVE_DROPS);
	/* the same share after a further cut by a fifth: background, back */
	assert_int_equal(step(&g, &v, win(90, 10, 10 * MS, 44)), 39);
	assert_int_equal(step(&g, &v, win(90, 10, 10 * MS, 39)), 49);
	assert_int_equal(v.reason, BH_ADAPTIVE_BASELINE);
	/* ...and from then on that share does not cut */
	assert_int_equal(step(&g, &v, win(90, 10, 10 * MS, 49)), 49);
	/* every call dropped: halve down to the floor */
	for (int i = 0; i < 10; i++)
		step(&g, &v, win(0, 100, MS, v.limit));
	assert_int_equal(v.limit, 2);
	/* back: doubling towards the last good limit, 49 */
	assert_int_equal(step(&g, &v, win(100, 0, 10 * MS, 2)), 4);
	assert_int_equal(step(&g, &v, win(100, 0, 10 * MS, 4)), 8);
	assert_int_equal(step(&g, &v, win(100, 0, 10 * MS, 8)), 16);
	assert_int_equal(step(&g, &v, win(100, 0, 10 * MS, 16)), 32);
	assert_int_equal(step(&g, &v, win(100, 0, 10 * MS, 32)), 49);
	/* 5x slower: a cut to half; still 5x after it: a new baseline, back */
	assert_int_equal(step(&g, &v, win(100, 0, 50 * MS, 49)), 24);
	assert_int_equal(step(&g, &v, win(100, 0, 50 * MS, 24)), 49);
	assert_int_equal(v.reason, BH_ADAPTIVE_BASELINE);
	assert_int_equal(g.u.own.base, 50 * MS);
}

/* The default algorithm under an explicit ceiling: slow start and then the
 * growth by sqrt/2 both stop at max_limit, window after window. */
static void default_growth_stops_at_ceiling(void **state)
{
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_DEFAULT, .seed = 7, .max_limit = 50 };
	struct bha_algo g;
	struct bha_verdict v;
	struct bha_window w;

	(void)state;
	bha_algo_init(&g, &c, 40, 0, &v);
	w = win(16, 0, 10 * MS, 4);
	w.probe = true;
	assert_int_equal(step(&g, &v, w), 40);
	for (int i = 0; i < 8; i++) { /* at the baseline, in use: it would grow */
		step(&g, &v, win(100, 0, 10 * MS, v.limit));
		assert_true(v.limit <= 50);
	}
	assert_int_equal(v.limit, 50);
}

/* ---- many threads ---------------------------------------------------------------- */

#define T_SAMPLES 20000
#define T_WINDOWS 10 /* a run must see more than this many windows close */

struct race_target {
	_Atomic uint32_t inside, calls, overlaps;
	_Atomic uint32_t in_flight;
	uint32_t limit;       /* plain: TSan flags two closers not ordered */
	uint64_t last_window; /* plain, likewise */
};

static int rt_set(void *ctx, uint32_t limit)
{
	struct race_target *t = ctx;

	if (atomic_exchange_explicit(&t->inside, 1, memory_order_relaxed))
		atomic_fetch_add_explicit(&t->overlaps, 1, memory_order_relaxed);
	t->limit = limit;
	atomic_fetch_add_explicit(&t->calls, 1, memory_order_relaxed);
	sched_yield(); /* widen the window for a second closer */
	atomic_store_explicit(&t->inside, 0, memory_order_relaxed);
	return 0;
}

static uint32_t rt_limit(void *ctx)
{
	(void)ctx;
	return 10;
}

static uint32_t rt_in_flight(void *ctx)
{
	return atomic_load_explicit(&((struct race_target *)ctx)->in_flight, memory_order_relaxed);
}

struct sum_log {
	_Atomic uint64_t ok, dropped, ok_sum, n;
};

struct sampler {
	bh_adaptive_t *a;
	struct sum_log *l;
	struct race_target *t;
	unsigned id;
	uint64_t sum_ok, n_ok, n_drop, n_ign;
};

static uint64_t windows_closed(struct sum_log *l)
{
	return atomic_load_explicit(&l->n, memory_order_relaxed);
}

static void *sampler_main(void *arg)
{
	struct sampler *s = arg;
	uint64_t x = 0x9e3779b97f4a7c15ull * (s->id + 1);

	/* A closer preempted on a loaded machine holds off every other close
	 * (sampling never waits), so a thread goes on past T_SAMPLES until
	 * enough windows closed for the run to have raced closes with samples. */
	for (unsigned i = 0; i < T_SAMPLES || (windows_closed(s->l) <= T_WINDOWS &&
						  i < 100 * T_SAMPLES); i++) {
		uint64_t rtt;
		enum bh_outcome o;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		rtt = 1 * MS + x % (20 * MS);
		o = x % 10 == 0 ? BH_DROPPED : x % 10 == 1 ? BH_IGNORE : BH_OK;
		atomic_store_explicit(&s->t->in_flight, (uint32_t)(x % 64), memory_order_relaxed);
		bh_adaptive_sample(s->a, rtt, o);
		if (o == BH_OK) {
			s->n_ok++;
			s->sum_ok += rtt;
		} else if (o == BH_DROPPED) {
			s->n_drop++;
		} else {
			s->n_ign++;
		}
		if (i % 64 == 0)
			advance(MS); /* windows keep closing on every thread */
	}
	return NULL;
}

/* Called by the closer only: a plain update races if two closers run. */
static void sum_window(void *ctx, const struct bha_window *w, const struct bha_verdict *v)
{
	struct sum_log *l = ctx;

	(void)v;
	atomic_fetch_add_explicit(&l->ok, w->ok, memory_order_relaxed);
	atomic_fetch_add_explicit(&l->dropped, w->dropped, memory_order_relaxed);
	atomic_fetch_add_explicit(&l->ok_sum, w->ok_sum_ns, memory_order_relaxed);
	atomic_fetch_add_explicit(&l->n, 1, memory_order_relaxed);
}

static void run_samplers(enum bh_adaptive_algo kind, unsigned nthreads)
{
	struct race_target t = { .limit = 10 };
	struct bha_target tgt = { rt_set, rt_limit, rt_in_flight, &t, NULL };
	struct bh_adaptive_config c = { .algo = kind, .window_ns = 2 * MS, .seed = 1 };
	struct sampler *s = calloc(nthreads, sizeof(*s));
	pthread_t *tid = calloc(nthreads, sizeof(*tid));
	struct sum_log l = { 0 };
	struct bh_adaptive_stats st;
	uint64_t ok = 0, drop = 0, ign = 0, sum = 0;
	bh_adaptive_t *a;

	assert_non_null(s);
	assert_non_null(tid);
	assert_int_equal(bha_create(&c, &tgt, 10, &a), 0);
	bha_set_clock(a, fake_clock, NULL);
	bha_start(a);
	bha_set_window_hook(a, sum_window, &l);
	for (unsigned i = 0; i < nthreads; i++) {
		s[i] = (struct sampler){ .a = a, .l = &l, .t = &t, .id = i };
		assert_int_equal(pthread_create(&tid[i], NULL, sampler_main, &s[i]), 0);
	}
	for (unsigned i = 0; i < nthreads; i++) {
		assert_int_equal(pthread_join(tid[i], NULL), 0);
		ok += s[i].n_ok;
		drop += s[i].n_drop;
		ign += s[i].n_ign;
		sum += s[i].sum_ok;
	}
	bha_flush(a);
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	/* no sample lost or counted twice; probes discard some (OK or not) */
	assert_int_equal(st.ok + st.dropped + st.discarded, ok + drop);
	assert_int_equal(st.ignored, ign);
	assert_int_equal(l.ok, st.ok);
	assert_int_equal(l.dropped, st.dropped);
	if (kind != BH_ADAPTIVE_DEFAULT && kind != BH_ADAPTIVE_ENVOY) { /* no probes */
		assert_int_equal(st.discarded, 0);
		assert_int_equal(l.ok, ok);
		assert_int_equal(l.dropped, drop);
		assert_int_equal(l.ok_sum, sum);
	}
	assert_int_equal(st.windowed, l.ok + l.dropped);
	assert_int_equal(st.windows, l.n);
	assert_true(l.n > T_WINDOWS);
	/* no two limit changes at once, and every change was counted */
	assert_int_equal(t.overlaps, 0);
	assert_int_equal(st.changes, t.calls + 1); /* + the start */
	bha_destroy(a);
	free(s);
	free(tid);
}

static void threads_lose_no_sample(void **state)
{
	(void)state;
	run_samplers(BH_ADAPTIVE_AIMD, 8);
	run_samplers(BH_ADAPTIVE_DEFAULT, 8);
	run_samplers(BH_ADAPTIVE_ENVOY, 4);
}

/* Beyond 32 threads the rest share one shard, with atomic adds. */
static void threads_beyond_the_shards(void **state)
{
	(void)state;
	run_samplers(BH_ADAPTIVE_VEGAS, 40);
}

/* A real bulkhead and the real clock: callers take, sample and release
 * while the closer resizes under them. The permits add up at the end. */
struct caller {
	bulkhead_t *bh;
	bh_adaptive_t *a;
	unsigned id, got;
};

static void *caller_main(void *arg)
{
	struct caller *c = arg;

	for (unsigned i = 0; i < 20000; i++) {
		uint64_t t0 = bh_now_ns();

		if (bh_try_acquire(c->bh, 1) != 0)
			continue;
		c->got++;
		for (volatile int k = 0; k < 50; k++)
			;
		if (i & 1) {
			bh_adaptive_sample(c->a, bh_now_ns() - t0 + 200 * BH_USEC, BH_OK);
			bh_release(c->bh, 1);
		} else {
			bh_release(c->bh, 1);
			bh_adaptive_sample(c->a, bh_now_ns() - t0 + 200 * BH_USEC, BH_OK);
		}
	}
	return NULL;
}

static void threads_on_a_real_bulkhead(void **state)
{
	bulkhead_t *bh = make_bh(16, 0, 0);
	struct bh_adaptive_config cfg = { .window_ns = 2 * MS };
	bh_adaptive_t *a = NULL;
	struct caller c[6];
	pthread_t tid[6];
	struct bh_adaptive_stats st;
	struct bh_stats bs;
	unsigned got = 0;

	(void)state;
	assert_int_equal(bh_adaptive_attach(bh, &cfg, &a), 0);
	for (unsigned i = 0; i < 6; i++) {
		c[i] = (struct caller){ .bh = bh, .a = a, .id = i };
		assert_int_equal(pthread_create(&tid[i], NULL, caller_main, &c[i]), 0);
	}
	for (unsigned i = 0; i < 6; i++) {
		assert_int_equal(pthread_join(tid[i], NULL), 0);
		got += c[i].got;
	}
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	assert_int_equal(st.ok + st.discarded, got);
	assert_int_equal(st.dropped + st.ignored, 0);
	bh_adaptive_detach(a);
	bh_stats(bh, &bs);
	assert_int_equal(bs.in_flight, 0);
	assert_int_equal(bs.acquired, got);
	assert_int_equal(bs.released, got);
	assert_int_equal(bh_try_acquire(bh, (uint32_t)bs.limit), 0); /* all back */
	bh_destroy(bh);
}

/* ---- automatic samples ------------------------------------------------------------ */

/* A BH_TRACK_HOLD bulkhead samples every grant-to-release pair by itself
 * (on the bulkhead's clock), and bh_record_hold's holds; MANUAL turns that
 * off, and a bulkhead without the flag has nothing to give. */
static int no_wait(struct fake_sync *f, unsigned call)
{
	(void)f;
	(void)call;
	return -ETIMEDOUT;
}

static uint64_t hold_samples(uint32_t flags, uint32_t sources, uint64_t *sum)
{
	bulkhead_t *bh = make_bh(8, 0, flags);
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD, .sources = sources };
	struct fake_sync f;
	struct win_log l = { 0 };
	struct bh_adaptive_stats st;
	bh_adaptive_t *a;

	fake_install(&f, bh, no_wait);
	a = attach(bh, &c);
	bha_set_window_hook(a, log_window, &l);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(bh_try_acquire(bh, 2), 0);
		f.now += (uint64_t)(i + 1) * MS;
		assert_int_equal(bh_release(bh, 1), 0);
		assert_int_equal(bh_release(bh, 1), 0); /* the pair ends here */
	}
	bh_record_hold(bh, 7 * MS);
	bha_flush(a);
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	*sum = l.ok_sum;
	bh_adaptive_detach(a);
	bh_destroy(bh);
	return st.ok;
}

static void hold_times_are_samples(void **state)
{
	uint64_t sum;

	(void)state;
	assert_int_equal(hold_samples(BH_TRACK_HOLD, 0, &sum), 6);
	assert_int_equal(sum, (1 + 2 + 3 + 4 + 5 + 7) * MS);
	assert_int_equal(hold_samples(BH_TRACK_HOLD, BH_ADAPTIVE_SRC_MANUAL, &sum), 0);
	assert_int_equal(hold_samples(BH_TRACK_HOLD, BH_ADAPTIVE_SRC_URING, &sum), 0);
	assert_int_equal(hold_samples(0, 0, &sum), 0);
}

/* A pool's tasks' run times are samples; the controller moves the pool's
 * admission limit (running + queued), at most max_threads + queue. */
struct slow_task {
	struct bh_task task;
	_Atomic int *running, *peak;
};

static uint64_t bh_pool_stats_queued(bh_pool_t *pool)
{
	struct bh_pool_stats ps;

	bh_pool_stats(pool, &ps);
	return ps.queued + ps.active;
}

static void slow_run(struct bh_task *t)
{
	struct slow_task *s = (struct slow_task *)t;
	int now = atomic_fetch_add(s->running, 1) + 1, p = atomic_load(s->peak);

	while (now > p && !atomic_compare_exchange_weak(s->peak, &p, now))
		;
	usleep(2000);
	atomic_fetch_sub(s->running, 1);
}

static void pool_run_times_are_samples(void **state)
{
	struct bh_pool_config pc = { .max_threads = 4, .queue_capacity = 8 };
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD, .min_limit = 1 };
	_Atomic int running = 0, peak = 0;
	struct slow_task t = { .task = { .run = slow_run }, .running = &running, .peak = &peak };
	struct bh_adaptive_stats st;
	struct win_log l = { 0 };
	bh_adaptive_t *a = NULL;
	bh_pool_t *pool;

	(void)state;
	assert_int_equal(bh_pool_create(&pc, &pool), 0);
	assert_int_equal(bh_adaptive_attach_pool(NULL, &c, &a), -EINVAL);
	c.max_limit = 13; /* more than the pool can admit */
	assert_int_equal(bh_adaptive_attach_pool(pool, &c, &a), -EINVAL);
	c.max_limit = 0;
	assert_int_equal(bh_adaptive_attach_pool(pool, &c, &a), 0);
	bha_set_window_hook(a, log_window, &l);
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	assert_int_equal(st.max_limit, 12);
	assert_int_equal(st.limit, 12);
	for (int i = 0; i < 10; i++)
		assert_int_equal(bh_pool_call(pool, &t.task, BH_FOREVER), 0);
	bha_flush(a);
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	assert_int_equal(st.ok, 10);
	assert_true(l.ok_sum >= 10 * 2 * MS);
	bh_adaptive_detach(a);
	bh_pool_destroy(pool);
}

/* A pool that admits fewer than an algorithm's default floor (AIMD's 20):
 * the defaulted floor yields to the pool's room, and the attach succeeds
 * with the limit inside [floor, room]. */
static void pool_smaller_than_default_floor(void **state)
{
	struct bh_pool_config pc = { .max_threads = 4, .queue_capacity = 8 };
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD };
	struct bh_adaptive_stats st;
	bh_adaptive_t *a = NULL;
	bh_pool_t *pool;

	(void)state;
	assert_int_equal(bh_pool_create(&pc, &pool), 0);
	assert_int_equal(bh_adaptive_attach_pool(pool, &c, &a), 0);
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	assert_int_equal(st.max_limit, 12);
	assert_int_equal(st.min_limit, 12);
	assert_int_equal(st.limit, 12);
	bh_adaptive_detach(a);
	bh_pool_destroy(pool);
}

/* A shrunk admission limit holds even though the pool keeps permits of
 * finished tasks cached: with a controller attached, the cache gives them
 * back while the bulkhead is over its limit. */
static void pool_shrink_holds(void **state)
{
	struct bh_pool_config pc = { .core_threads = 4, .max_threads = 4, .queue_capacity = 8,
				     .flags = BH_POOL_PRESTART };
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD, .min_limit = 1,
					.window_ns = 3600 * BH_SEC };
	_Atomic int running = 0, peak = 0;
	struct slow_task t[16];
	bh_adaptive_t *a = NULL;
	bh_pool_t *pool;
	int accepted = 0;

	(void)state;
	assert_int_equal(bh_pool_create(&pc, &pool), 0);
	assert_int_equal(bh_adaptive_attach_pool(pool, &c, &a), 0);
	for (int i = 0; i < 16; i++)
		t[i] = (struct slow_task){ .task = { .run = slow_run }, .running = &running,
					   .peak = &peak };
	for (int i = 0; i < 4; i++) /* warm: permits of finished tasks cached */
		assert_int_equal(bh_pool_call(pool, &t[i].task, BH_FOREVER), 0);
	assert_int_equal(bh_set_limit(pool->adm, 2), 0); /* as the controller would */
	atomic_store(&peak, 0);
	for (int i = 0; i < 16; i++)
		accepted += bh_pool_submit(pool, &t[i].task) == 0;
	while (atomic_load(&running) || bh_pool_stats_queued(pool))
		usleep(1000);
	assert_int_equal(accepted, 2);
	/* at most 2 at once (whether both overlapped is up to the scheduler) */
	assert_true(atomic_load(&peak) >= 1 && atomic_load(&peak) <= 2);
	bh_adaptive_detach(a);
	bh_pool_destroy(pool);
}

/* The export shows the limit, the baseline, the last window, why it last
 * changed, and the counts, under the bulkhead's name. */
static void prometheus_export(void **state)
{
	struct bh_config bc = { .max_concurrent = 50, .name = "pay\"ment" };
	bulkhead_t *bh;
	bh_adaptive_t *a;
	char buf[8192], small[16];
	ssize_t n;

	(void)state;
	assert_int_equal(bh_create(&bc, &bh), 0);
	a = attach(bh, NULL);
	feed(a, 1, 10 * MS, BH_OK, MS);
	advance(20 * MS);
	feed(a, 16, 10 * MS, BH_OK, MS);
	bh_adaptive_sample(a, 1, BH_IGNORE);
	n = bh_adaptive_metrics_prometheus(&a, 1, buf, sizeof(buf));
	assert_true(n > 0 && (size_t)n < sizeof(buf));
	assert_int_equal(strlen(buf), n);
	assert_non_null(strstr(buf, "# TYPE bulkhead_adaptive_limit gauge\n"));
	assert_non_null(strstr(buf, "bulkhead_adaptive_limit{name=\"pay\\\"ment\"} 50\n"));
	assert_non_null(strstr(buf, "bulkhead_adaptive_baseline_seconds{name=\"pay\\\"ment\"} 0.0"));
	assert_non_null(strstr(buf, "bulkhead_adaptive_last_change_reason{name=\"pay\\\"ment\","
				    "reason=\"restore\"} 1\n"));
	assert_non_null(strstr(buf, "bulkhead_adaptive_changes_total{name=\"pay\\\"ment\","
				    "reason=\"probe\"} 1\n"));
	assert_non_null(strstr(buf, "bulkhead_adaptive_samples_total{name=\"pay\\\"ment\","
				    "outcome=\"ok\"} 16\n"));
	assert_non_null(strstr(buf, "outcome=\"ignored\"} 1\n"));
	assert_non_null(strstr(buf, "outcome=\"discarded\"} 1\n"));
	assert_non_null(strstr(buf, "bulkhead_adaptive_windows_total{name=\"pay\\\"ment\"} 1\n"));
	/* cut like snprintf: the whole length, a terminated prefix */
	assert_int_equal(bh_adaptive_metrics_prometheus(&a, 1, small, sizeof(small)), n);
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_int_equal(bh_adaptive_metrics_prometheus(NULL, 1, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(bh_adaptive_metrics_prometheus(&a, 1, NULL, 10), -EINVAL);
	bh_adaptive_detach(a);
	bh_destroy(bh);
	/* a name that is not UTF-8 (a byte cut from a character, a stray byte)
	 * is exported with U+FFFD for each bad byte: one odd name must not make
	 * a scraper refuse the whole text */
	bc.name = "p\xd1\xff\xc3\xa9";
	assert_int_equal(bh_create(&bc, &bh), 0);
	a = attach(bh, NULL);
	n = bh_adaptive_metrics_prometheus(&a, 1, buf, sizeof(buf));
	assert_true(n > 0 && (size_t)n < sizeof(buf));
	assert_non_null(strstr(buf, "bulkhead_adaptive_limit{name=\"p\xef\xbf\xbd\xef\xbf\xbd\xc3\xa9\"} "));
	assert_null(strstr(buf, "\xff"));
	bh_adaptive_detach(a);
	bh_destroy(bh);
}

/* ---- probes that cannot drain, ceilings, roles ------------------------------------ */

/* A probe whose pin cannot drain in flight (calls that are not sampled hold
 * permits, or on a host-wide bulkhead another process moves the limit)
 * discards every sample; its window must still end at window_max_ns. */
static void probe_ends_without_drain(void **state)
{
	bulkhead_t *bh = make_bh(100, 0, 0);
	struct bh_adaptive_stats st;
	bh_adaptive_t *a;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 10), 0); /* long holders, never sampled */
	a = attach(bh, NULL);
	assert_int_equal(limit_of(bh), 4); /* the first probe's pin */
	feed(a, 2000, 10 * MS, BH_OK, 50 * MS); /* 100 s of traffic */
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	print_message("windows %llu discarded %llu limit %u probing %u\n",
		      (unsigned long long)st.windows, (unsigned long long)st.discarded,
		      limit_of(bh), st.probing);
	assert_true(st.windows > 0);     /* the probe timed out ... */
	assert_int_equal(limit_of(bh), 100); /* ... and the limit came back */
	bh_adaptive_detach(a);
	assert_int_equal(bh_release(bh, 10), 0);
	bh_destroy(bh);
}

/* Envoy's minRTT window: the same, with its window_max_ns = NEVER. */
static void envoy_probe_ends_without_drain(void **state)
{
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_ENVOY };
	bulkhead_t *bh = make_bh(100, 0, 0);
	struct bh_adaptive_stats st;
	bh_adaptive_t *a;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 10), 0);
	a = attach(bh, &c);
	assert_int_equal(limit_of(bh), 3);
	feed(a, 2000, 10 * MS, BH_OK, 50 * MS);
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	print_message("envoy: windows %llu discarded %llu limit %u probing %u\n",
		      (unsigned long long)st.windows, (unsigned long long)st.discarded,
		      limit_of(bh), st.probing);
	assert_true(st.windows > 0);
	assert_int_equal(st.probing, 0);
	bh_adaptive_detach(a);
	assert_int_equal(bh_release(bh, 10), 0);
	bh_destroy(bh);
}

/* An explicit ceiling below the algorithm's default floor: the ceiling holds. */
static void explicit_ceiling_below_default_floor(void **state)
{
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD, .max_limit = 10 };
	bulkhead_t *bh = make_bh(10, 0, 0);
	struct bh_adaptive_stats st;
	bh_adaptive_t *a = attach(bh, &c);

	(void)state;
	assert_int_equal(bh_adaptive_stats(a, &st), 0);
	print_message("limit %u (bulkhead %u) min %u max %u\n", st.limit, limit_of(bh),
		      st.min_limit, st.max_limit);
	assert_true(limit_of(bh) <= 10);
	assert_true(st.max_limit <= 10);
	bh_adaptive_detach(a);
	bh_destroy(bh);
}

/* A second attach on a host-wide handle that already has a controller
 * fails with -EBUSY and must leave the first controller's role alone. */
static void host_wide_failed_attach_keeps_role(void **state)
{
	char dir[] = "/tmp/bh-adaptive-test.XXXXXX";
	bulkhead_t *bh = host_open(dir, 30, 0);
	bh_adaptive_t *a = attach(bh, &host_cfg), *b = NULL;
	struct bh_adaptive_config bad = { .percentile = 101 };
	pid_t pid;

	(void)state;
	assert_int_equal(bh_adaptive_attach(bh, &host_cfg, &b), -EBUSY);
	assert_int_equal(bh_adaptive_attach(bh, &bad, &b), -EINVAL);
	/* a controller in another process must still be a follower */
	if ((pid = fork()) == 0)
		_exit(child_follows(30));
	assert_int_equal(wait_child(pid), 0);
	drops(a);
	assert_int_equal(limit_of(bh), 27); /* still the mover */
	bh_adaptive_detach(a);
	host_close(bh, dir);
}

/* A follower on a host-wide bulkhead cannot pin the host's limit for its
 * probe: with the host busy (in flight above the pin) its probe window must
 * still close. Exit status 0 when windows closed. */
static int child_follower_windows(enum bh_adaptive_algo algo)
{
	struct bh_adaptive_config c = { .algo = algo, .sources = BH_ADAPTIVE_SRC_MANUAL };
	struct bh_adaptive_stats st;
	bulkhead_t *bh;
	bh_adaptive_t *b;

	if (bh_shm_open("adaptive", NULL, 0, &bh) != 0 || bh_adaptive_attach(bh, &c, &b) != 0)
		return 2;
	bha_set_clock(b, fake_clock, NULL);
	feed(b, 2000, 10 * MS, BH_OK, 50 * MS); /* 100 s */
	bh_adaptive_stats(b, &st);
	fprintf(stderr, "follower algo %d: windows %llu discarded %llu\n", (int)algo,
		(unsigned long long)st.windows, (unsigned long long)st.discarded);
	return st.windows > 0 ? 0 : 1;
}

static void host_wide_follower_probe_ends(void **state)
{
	char dir[] = "/tmp/bh-adaptive-test.XXXXXX";
	bulkhead_t *bh = host_open(dir, 30, 0);
	bh_adaptive_t *a = attach(bh, &host_cfg); /* the mover */
	enum bh_adaptive_algo algos[] = { BH_ADAPTIVE_DEFAULT, BH_ADAPTIVE_ENVOY };
	pid_t pid;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 10), 0); /* the host is busy */
	for (int i = 0; i < 2; i++) {
		if ((pid = fork()) == 0)
			_exit(child_follower_windows(algos[i]));
		assert_int_equal(wait_child(pid), 0);
	}
	assert_int_equal(bh_release(bh, 10), 0);
	bh_adaptive_detach(a);
	host_close(bh, dir);
}

/* ---- explicit configuration honoured ---------------------------------------------- */

/* cfg.window_ns fixes the window's length for any algorithm (the header,
 * docs/adaptive.md), the default's included: 5 s windows, not 1 s. */
static void default_explicit_window_length(void **state)
{
	struct bh_adaptive_config c = { .window_ns = 5000 * MS, .probe_interval_ns = 3600000 * MS };
	bulkhead_t *bh = make_bh(20, 0, 0);
	bh_adaptive_t *a = attach(bh, &c);
	struct win_log l = { 0 };

	(void)state;
	feed(a, 40, 10 * MS, BH_OK, MS); /* through the probe */
	bha_set_window_hook(a, log_window, &l);
	feed(a, 200, 10 * MS, BH_OK, 100 * MS); /* 20 s, 10 samples a second */
	print_message("windows %u longest %llu ms\n", l.n,
		      (unsigned long long)(l.longest_ns / MS));
	assert_true(l.n >= 3 && l.n <= 4);
	assert_true(l.longest_ns >= 5000 * MS && l.longest_ns <= 5400 * MS); /* the clock every 4th */
	bh_adaptive_detach(a);
	bh_destroy(bh);
}

/* A probe interval too long to matter (UINT64_MAX: never, in effect) must
 * not wrap around into probes at every window. */
static void probe_interval_does_not_wrap(void **state)
{
	enum bh_adaptive_algo kinds[] = { BH_ADAPTIVE_DEFAULT, BH_ADAPTIVE_ENVOY };
	unsigned bad[2] = { 0, 0 };

	(void)state;
	for (int k = 0; k < 2; k++) {
		for (uint64_t seed = 1; seed <= 20; seed++) {
			struct bh_adaptive_config c = { .algo = kinds[k], .seed = seed,
							.probe_interval_ns = UINT64_MAX };
			struct bha_algo g;
			struct bha_verdict v;
			struct bha_window w;
			uint64_t now = 1000 * MS;
			unsigned probes = 0;

			bha_algo_init(&g, &c, 40, now, &v);
			w = win(60, 0, 10 * MS, 4);
			w.probe = true;
			w.limit = v.limit;
			bha_algo_window(&g, &w, now, &v); /* the first probe ends */
			for (int i = 0; i < 200; i++) {
				now += 100 * MS;
				w = win(100, 0, 20 * MS, v.limit); /* loaded: never confirms */
				w.limit = v.limit;
				bha_algo_window(&g, &w, now, &v);
				if (v.probe_samples)
					probes++;
			}
			if (probes)
				print_message("algo %d seed %llu: %u probes in 20 s\n", (int)kinds[k],
					      (unsigned long long)seed, probes);
			bad[k] += probes != 0;
		}
	}
	assert_int_equal(bad[0], 0);
	assert_int_equal(bad[1], 0);
}

/* A controller that was probing when it had to follow (its pin refused:
 * another process moves the host's limit) has no probe pending: its next
 * window is an ordinary one, not the end of a probe. Ending one would take
 * that window's latency (the host's load, not the baseline) for the
 * baseline and restore the limit from before it followed (40), not the
 * one in force (24). Having learnt no baseline, it probes anew, and that
 * probe restores the limit it followed. */
static void follower_mid_probe_ends_its_probe(void **state)
{
	struct bh_adaptive_config c = { .min_limit = 2, .max_limit = 100, .seed = 1 };
	struct bha_algo g;
	struct bha_verdict v;
	struct bha_window w;
	uint64_t now = 1000 * MS;

	(void)state;
	bha_algo_init(&g, &c, 40, now, &v);
	assert_int_not_equal(v.probe_samples, 0); /* the first probe is on */
	bha_algo_follow(&g, 24);
	w = win(60, 0, 30 * MS, 24); /* loaded: the host's latency */
	w.limit = v.limit = 24; /* as the controller passes the limit in force */
	bha_algo_window(&g, &w, now + 100 * MS, &v);
	assert_int_equal(v.reason, BH_ADAPTIVE_PROBE);
	assert_int_equal(v.limit, 4);
	w = win(60, 0, 10 * MS, 4);
	w.probe = true;
	w.limit = v.limit;
	bha_algo_window(&g, &w, now + 200 * MS, &v);
	assert_int_equal(v.reason, BH_ADAPTIVE_RESTORE);
	assert_int_equal(v.limit, 24);
}

/* Two handles of one host-wide bulkhead in one process, a controller on
 * each: the first moves the limit, the second follows it (the header: "the
 * first one moves the host's limit and the others follow it"). */
static void host_wide_two_handles_one_mover(void **state)
{
	char dir[] = "/tmp/bh-adaptive-test.XXXXXX";
	bulkhead_t *bh = host_open(dir, 30, 0), *bh2;
	bh_adaptive_t *a, *b;

	(void)state;
	assert_int_equal(bh_shm_open("adaptive", NULL, 0, &bh2), 0);
	a = attach(bh, &host_cfg);
	b = attach(bh2, &host_cfg);
	drops(a);
	assert_int_equal(limit_of(bh), 27); /* the mover */
	drops(b);
	drops(b); /* it would go 30 -> 27 -> 24 */
	assert_int_equal(limit_of(bh), 27); /* a follower: no second mover */
	bh_adaptive_detach(a);              /* frees the role ... */
	drops(b);
	assert_int_equal(limit_of(bh), 24); /* ... and the follower takes it */
	bh_adaptive_detach(b);
	bh_destroy(bh2);
	host_close(bh, dir);
}

/* A follower whose windows asked for no change while the mover moved the
 * limit goes on from the limit in force, not from its own last figure:
 * when the role comes to it, a window of drops cuts the host's limit
 * (21 -> 18), it does not raise it to a cut of the limit it saw at attach
 * (30 -> 27). The same for Envoy, whose minRTT window's restore must not
 * bring back the limit it had before that window. */
static void host_wide_follower_starts_from_limit_in_force(void **state)
{
	char dir[] = "/tmp/bh-adaptive-test.XXXXXX";
	bulkhead_t *bh = host_open(dir, 30, 0), *bh2;
	struct bh_adaptive_config ec = { .algo = BH_ADAPTIVE_ENVOY, .min_limit = 2,
					 .max_limit = 100, .sources = BH_ADAPTIVE_SRC_MANUAL };
	struct bh_adaptive_stats st;
	bh_adaptive_t *a, *b;

	(void)state;
	assert_int_equal(bh_shm_open("adaptive", NULL, 0, &bh2), 0);
	a = attach(bh, &host_cfg);
	b = attach(bh2, &host_cfg);
	drops(a);
	drops(a);
	drops(a);
	assert_int_equal(limit_of(bh), 21); /* the mover: 30 -> 27 -> 24 -> 21 */
	bh_adaptive_detach(a);
	drops(b);
	assert_int_equal(limit_of(bh), 18); /* from the limit in force */
	bh_adaptive_detach(b);

	/* Envoy: the follower's minRTT window (it cannot pin) ends after the
	 * mover left; the window's restore is the limit in force. */
	assert_int_equal(bh_set_limit(bh, 30), 0);
	a = attach(bh, &host_cfg);
	b = attach(bh2, &ec); /* its pin, refused: still 30 */
	assert_int_equal(limit_of(bh), 30);
	drops(a);
	drops(a);
	assert_int_equal(limit_of(bh), 24);
	bh_adaptive_detach(a);
	/* the first sample starts the epoch, the next 50 close the window */
	feed(b, 51, 10 * MS, BH_OK, 20 * MS);
	assert_int_equal(bh_adaptive_stats(b, &st), 0);
	assert_int_equal(st.windows, 1);
	assert_int_equal(limit_of(bh), 24);
	bh_adaptive_detach(b);
	bh_destroy(bh2);
	host_close(bh, dir);
}

/* A detach that a sample holds up (it is closing a window in the old
 * controller) races a new attach on the same host-wide handle: whatever
 * order they end in, the new controller must hold the role it believes it
 * holds, and another handle must find the role taken. The attach is tried
 * while the sample is held; it may succeed only once the old controller's
 * detach can no longer touch the role. */
struct detacher {
	bh_adaptive_t *a;
	_Atomic int done;
};

static void *detach_thread(void *arg)
{
	struct detacher *d = arg;

	bh_adaptive_detach(d->a);
	atomic_store(&d->done, 1);
	return NULL;
}

static void host_wide_detach_racing_attach_keeps_role(void **state)
{
	char dir[] = "/tmp/bh-adaptive-test.XXXXXX";
	bulkhead_t *bh = host_open(dir, 30, BH_TRACK_HOLD), *bh2;
	struct bh_adaptive_config c = { .algo = BH_ADAPTIVE_AIMD, .min_limit = 2,
					.max_limit = 100 };
	struct detacher d = { .a = attach(bh, &c) };
	uint64_t end = bh_now_ns() + 10 * BH_SEC;
	bh_adaptive_t *b = NULL;
	pthread_t th, dt;

	(void)state;
	assert_true(bhs_role_held(bh));
	atomic_store(&hook_in, 0);
	atomic_store(&hook_go, 0);
	bha_set_window_hook(d.a, hold_in_hook, NULL);
	assert_int_equal(pthread_create(&th, NULL, hold_sampler, bh), 0);
	while (!atomic_load(&hook_in) && bh_now_ns() < end)
		sched_yield();
	assert_true(atomic_load(&hook_in)); /* inside the sink, closing a window */
	assert_int_equal(pthread_create(&dt, NULL, detach_thread, &d), 0);
	/* the detach is held up by the sample: try the new attach meanwhile */
	end = bh_now_ns() + 300 * MS;
	while (bh_adaptive_attach(bh, &host_cfg, &b) != 0 && bh_now_ns() < end)
		usleep(1000);
	assert_false(atomic_load(&d.done)); /* the sample still holds it */
	atomic_store(&hook_go, 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(pthread_join(dt, NULL), 0);
	if (!b)
		b = attach(bh, &host_cfg);
	assert_true(bhs_role_held(bh)); /* the new controller's, as it believes */
	assert_int_equal(bh_shm_open("adaptive", NULL, 0, &bh2), 0);
	assert_int_equal(bhs_role_take(bh2), -EAGAIN); /* not free for another */
	bh_destroy(bh2);
	bh_adaptive_detach(b);
	host_close(bh, dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(null_and_bad_arguments),
		cmocka_unit_test(one_controller_per_bulkhead),
		cmocka_unit_test(explicit_floor_raises_defaulted_ceiling),
		cmocka_unit_test(percentile_rank_rounds_up),
		cmocka_unit_test(host_wide_one_mover),
		cmocka_unit_test(host_wide_hold_samples),
		cmocka_unit_test(reason_names),
		cmocka_unit_test(zeroed_config_defaults),
		cmocka_unit_test(ceiling_follows_start),
		cmocka_unit_test(windows_close_after_a_few_round_trips),
		cmocka_unit_test(every_sample_counted_once),
		cmocka_unit_test(impossible_latencies),
		cmocka_unit_test(fork_child_detaches),
		cmocka_unit_test(fork_child_detaches_shared_slot),
		cmocka_unit_test(fork_child_reads_a_cut_publish),
		cmocka_unit_test(aimd_rules),
		cmocka_unit_test(vegas_rules),
		cmocka_unit_test(vegas_probe),
		cmocka_unit_test(gradient2_rules),
		cmocka_unit_test(envoy_rules),
		cmocka_unit_test(default_rules),
		cmocka_unit_test(default_growth_stops_at_ceiling),
		cmocka_unit_test(threads_lose_no_sample),
		cmocka_unit_test(threads_beyond_the_shards),
		cmocka_unit_test(threads_on_a_real_bulkhead),
		cmocka_unit_test(hold_times_are_samples),
		cmocka_unit_test(pool_run_times_are_samples),
		cmocka_unit_test(pool_smaller_than_default_floor),
		cmocka_unit_test(pool_shrink_holds),
		cmocka_unit_test(prometheus_export),
		cmocka_unit_test(probe_ends_without_drain),
		cmocka_unit_test(envoy_probe_ends_without_drain),
		cmocka_unit_test(explicit_ceiling_below_default_floor),
		cmocka_unit_test(host_wide_failed_attach_keeps_role),
		cmocka_unit_test(host_wide_follower_probe_ends),
		cmocka_unit_test(default_explicit_window_length),
		cmocka_unit_test(probe_interval_does_not_wrap),
		cmocka_unit_test(follower_mid_probe_ends_its_probe),
		cmocka_unit_test(host_wide_two_handles_one_mover),
		cmocka_unit_test(host_wide_follower_starts_from_limit_in_force),
		cmocka_unit_test(host_wide_detach_racing_attach_keeps_role),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
