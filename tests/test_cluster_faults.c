/* Cluster bulkheads under faults, with real processes: a redis-server and
 * several instance processes (tests/cluster_inst) that call a backend
 * running here. The backend counts its own concurrency - calls it is
 * serving right now, whatever the instances believe - and every scenario
 * asserts the safety rule there: never more than the global limit while
 * the store is reachable, and within the documented bound (the fallback
 * limits of the instances in fallback) while it is not. Each scenario
 * prints what it measured; the last lines are a summary.
 *
 * BH_CLUSTER_SCENARIO=name runs one scenario. Skips (77) without
 * redis-server. */
#define _GNU_SOURCE /* pipe2, accept4 */
#include "testutil.h"

#define RIG_CHECK(cond) assert_true(cond)
#include "cluster_rig.h"

/* ---- reporting ---------------------------------------------------------------------- */

struct result {
	const char *scenario;
	int limit, peak, bound;
	long long reported;   /* sum of the instances' over_admission_max */
	long long extra_ms;   /* convergence or recovery time, -1 if none */
};

static struct result results[16];
static int n_results;

static void report(const char *scenario, int limit, int peak, int bound, long long reported,
		   long long extra_ms)
{
	struct result *r = &results[n_results++];

	*r = (struct result){ scenario, limit, peak, bound, reported, extra_ms };
	printf("%s: limit %d, backend peak %d, over-admission %d (bound %d), instances "
	       "reported up to %lld", scenario, limit, peak, peak > limit ? peak - limit : 0,
	       bound, reported);
	if (extra_ms >= 0)
		printf(", %lld ms", extra_ms);
	printf("\n");
	fflush(stdout);
}

/* Watch the backend for ms milliseconds: its peak over that window. */
static int watch_ms(unsigned ms)
{
	peak_window();
	rh_sleep_ms(ms);
	return peak_window();
}

static bool near(long long v, long long want, long long slack)
{
	return v >= want - slack && v <= want + slack;
}

/* ---- scenarios ---------------------------------------------------------------------- */

/* Three instances, skewed demand: the busy two share what the idle one
 * leaves; then the idle one gets busy and all converge to a third. */
static void test_skew_and_converge(void **state)
{
	char name[64];
	struct inst a, b, c;
	int peak = 0, p;
	uint64_t t0;
	long long conv = -1;
	struct istats sa, sb, sc;

	(void)state;
	name_for("skew", name, sizeof(name));
	inst_start(&a, "A", name, 12, NULL);
	inst_start(&b, "B", name, 12, NULL);
	inst_start(&c, "C", name, 12, NULL);
	peak_window();
	inst_say(&a, "demand 8");
	inst_say(&b, "demand 8");
	inst_say(&c, "demand 1");
	p = watch_ms(2000);
	peak = p > peak ? p : peak;
	sa = inst_stats(&a);
	sb = inst_stats(&b);
	sc = inst_stats(&c);
	printf("skewed: shares A %lld B %lld C %lld\n", sa.share, sb.share, sc.share);
	assert_true(sa.share + sb.share + sc.share <= 12);
	assert_true(sc.share <= 3);
	assert_true(near(sa.share, sb.share, 2));
	assert_true(sa.share >= 4 && sb.share >= 4);

	inst_say(&c, "demand 8");
	t0 = rh_now();
	while (rh_now() - t0 < 5 * BH_SEC) {
		rh_sleep_ms(20);
		sa = inst_stats(&a);
		sb = inst_stats(&b);
		sc = inst_stats(&c);
		if (near(sa.share, 4, 1) && near(sb.share, 4, 1) && near(sc.share, 4, 1)) {
			conv = (long long)((rh_now() - t0) / BH_MSEC);
			break;
		}
	}
	p = peak_window();
	peak = p > peak ? p : peak;
	printf("after the shift: shares A %lld B %lld C %lld\n", sa.share, sb.share, sc.share);
	assert_true(conv >= 0);
	assert_true(conv <= 10 * RENEW_MS);
	/* Nobody starves: every instance keeps calling. */
	sc = inst_stats(&c);
	p = watch_ms(500);
	peak = p > peak ? p : peak;
	assert_true(inst_stats(&c).calls > sc.calls + 10);
	report("skewed demand, then a shift", 12, peak, 0,
	       inst_stats(&a).over_max + inst_stats(&b).over_max + inst_stats(&c).over_max, conv);
	assert_true(peak <= 12);
	inst_quit(&a);
	inst_quit(&b);
	inst_quit(&c);
}

/* A holds the whole limit with long calls in flight when B arrives: A's
 * share shrinks, but its permits stay counted until they are released, so
 * B only gets what A has really given back. */
static void test_shrink_with_calls_in_flight(void **state)
{
	char name[64];
	struct inst a, b;
	int peak;
	struct istats sa, sb;
	uint64_t t0;

	(void)state;
	name_for("shrink", name, sizeof(name));
	inst_start(&a, "A", name, 12, "--workers", "12", "--hold-ms", "400", NULL);
	inst_say(&a, "demand 12");
	t0 = rh_now();
	while (inst_stats(&a).in_flight < 12 && rh_now() - t0 < 3 * BH_SEC)
		rh_sleep_ms(10);
	assert_int_equal(inst_stats(&a).in_flight, 12);
	peak_window();
	inst_start(&b, "B", name, 12, "--workers", "12", "--hold-ms", "400", NULL);
	inst_say(&b, "demand 12");
	peak = watch_ms(2500);
	sa = inst_stats(&a);
	sb = inst_stats(&b);
	printf("shrink: shares A %lld B %lld, in flight A %lld B %lld\n", sa.share, sb.share,
	       sa.in_flight, sb.in_flight);
	assert_true(near(sa.share, 6, 1) && near(sb.share, 6, 1));
	assert_true(sb.calls > 0);
	report("share shrink with calls in flight", 12, peak, 0, sa.over_max + sb.over_max, -1);
	assert_true(peak <= 12);
	inst_quit(&a);
	inst_quit(&b);
}

/* SIGKILL of an instance: its share returns to the other within a lease
 * (plus the survivor's next renewal). */
static void test_sigkill_instance(void **state)
{
	char name[64];
	struct inst a, b;
	int peak;
	uint64_t t0;
	long long back = -1;

	(void)state;
	name_for("kill", name, sizeof(name));
	inst_start(&a, "A", name, 8, NULL);
	inst_start(&b, "B", name, 8, NULL);
	inst_say(&a, "demand 8");
	inst_say(&b, "demand 8");
	peak_window();
	t0 = rh_now();
	while (!(near(inst_stats(&a).share, 4, 1) && near(inst_stats(&b).share, 4, 1)))
		assert_true(rh_now() - t0 < 3 * BH_SEC);
	inst_kill(&a);
	t0 = rh_now();
	while (rh_now() - t0 < 3 * BH_SEC) {
		if (inst_stats(&b).share == 8) {
			back = (long long)((rh_now() - t0) / BH_MSEC);
			break;
		}
		rh_sleep_ms(10);
	}
	peak = peak_window();
	report("SIGKILL of an instance", 8, peak, 0, inst_stats(&b).over_max, back);
	assert_true(back >= 0);
	assert_true(back <= LEASE_MS + RENEW_MS + 100);
	assert_true(peak <= 8);
	inst_quit(&b);
}

/* SIGSTOP of an instance past its lease: the other takes its share. B is
 * stopped with a renewal in flight (held up by a short CLIENT PAUSE that
 * B's timeout outlasts; its answer arrives while B is stopped), and
 * resumed while the store is paused again, so that its renewal thread
 * cannot renew for a while: B must admit nothing on the stale share
 * meanwhile (admission checks the lease itself, and so does a handoff to
 * a queued waiter), and must not fall back either, since the store
 * answers.
 *
 * B's calls are held at the backend until let go, and B is stopped only
 * once every permit of its share is in a call there: a worker stopped
 * between its admission and its call's arrival would reach the backend
 * after the stop, on a permit admitted in time - the documented window of
 * permits held past the lease, not what this scenario checks. The held
 * calls end as B stops, as calls would that finish before the store can
 * reassign their permits. Each is let go only once every thread of B has
 * stopped. */
static bool all_of_share_at_backend(struct inst *p)
{
	struct istats s = inst_stats(p);

	return s.share > 0 && s.in_flight == s.share && atomic_load(&backend.held) == s.in_flight;
}

/* SIGSTOP, and wait until every thread of the child has stopped: kill
 * returns before the others (on other CPUs, or just woken) have, and one
 * could still take an answer, release and admit again. The kernel reports
 * the group stop to the parent when its last thread stops. */
static void stop_all_threads(pid_t pid)
{
	int st;

	assert_int_equal(kill(pid, SIGSTOP), 0);
	assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
	assert_true(WIFSTOPPED(st));
}

static void test_sigstop_instance(void **state)
{
	char name[64];
	struct inst a, b;
	int peak;
	uint64_t t0;
	struct istats sb;

	(void)state;
	name_for("stop", name, sizeof(name));
	backend_hold_again();
	inst_start(&a, "A", name, 8, "--fallback", "2", NULL);
	inst_start(&b, "B", name, 8, "--fallback", "2", "--timeout-ms", "500", "--hold-ms", "-1",
		   NULL);
	inst_say(&a, "demand 8");
	inst_say(&b, "demand 8");
	t0 = rh_now();
	while (!(near(inst_stats(&a).share, 4, 1) && near(inst_stats(&b).share, 4, 1)))
		assert_true(rh_now() - t0 < 3 * BH_SEC);
	peak_window();
	assert_int_equal(rh_do(&srv, "CLIENT PAUSE 300 ALL"), 0);
	/* The store is paused: B's share stays as it is until B is stopped. */
	t0 = rh_now();
	while (!all_of_share_at_backend(&b))
		assert_true(rh_now() - t0 < 150 * BH_MSEC);
	while (rh_now() - t0 < 200 * BH_MSEC) /* B's renewal waits at the store */
		rh_sleep_ms(5);
	assert_true(all_of_share_at_backend(&b));
	stop_all_threads(b.pid);
	backend_let_go(false);
	t0 = rh_now();
	while (inst_stats(&a).share < 8)
		assert_true(rh_now() - t0 < 3 * BH_SEC);
	rh_sleep_ms(100);
	assert_int_equal(rh_do(&srv, "CLIENT PAUSE 150 ALL"), 0);
	kill(b.pid, SIGCONT);
	rh_sleep_ms(1500);
	peak = peak_window();
	sb = inst_stats(&b);
	printf("stop: after SIGCONT B share %lld, fallbacks %lld, renewals failed %lld\n",
	       sb.share, sb.fallbacks, sb.failed);
	report("SIGSTOP of an instance past its lease", 8, peak, 0,
	       inst_stats(&a).over_max + sb.over_max, -1);
	backend_let_go(true); /* B's calls since: so that it can quit */
	assert_int_equal(sb.fallbacks, 0);
	assert_true(sb.share >= 3); /* back in */
	assert_true(peak <= 8);
	inst_quit(&a);
	inst_quit(&b);
}

/* The store stops (SIGSTOP), then dies (SIGKILL) and comes back empty. A
 * may use 1 fallback permit, B none: the bound is the limit plus 1. */
static void test_redis_stop_kill_restart(void **state)
{
	char name[64];
	struct inst a, b;
	int peak1, peak2, peak3;
	struct istats sa, sb;
	long long reported;

	(void)state;
	name_for("store", name, sizeof(name));
	inst_start(&a, "A", name, 8, "--fallback", "1", NULL);
	inst_start(&b, "B", name, 8, "--fallback", "0", NULL);
	inst_say(&a, "demand 8");
	inst_say(&b, "demand 8");
	rh_sleep_ms(800);
	peak_window();

	redis_signal(&srv, SIGSTOP);
	rh_sleep_ms(1500); /* past the lease: A on 1 fallback permit, B on none */
	sa = inst_stats(&a);
	sb = inst_stats(&b);
	printf("store stopped: A fallback %lld share %lld, B fallback %lld share %lld\n",
	       sa.fallback, sa.share, sb.fallback, sb.share);
	assert_int_equal(sa.fallback, 1);
	assert_int_equal(sa.share, 1);
	assert_int_equal(sb.fallback, 1);
	assert_int_equal(sb.share, 0);
	redis_signal(&srv, SIGCONT);
	rh_sleep_ms(1000);
	peak1 = peak_window();
	assert_int_equal(inst_stats(&a).fallback, 0);
	assert_int_equal(inst_stats(&b).fallback, 0);

	redis_kill(&srv, SIGKILL);
	rh_sleep_ms(300);
	peak2 = peak_window();
	assert_int_equal(redis_restart(&srv), 0);
	rh_sleep_ms(2000); /* re-registration, one lease of learning, fair again */
	peak3 = peak_window();
	sa = inst_stats(&a);
	sb = inst_stats(&b);
	printf("store restarted empty: A resets %lld share %lld, B resets %lld share %lld\n",
	       sa.resets, sa.share, sb.resets, sb.share);
	assert_int_equal(sa.resets, 1);
	assert_int_equal(sb.resets, 1);
	assert_true(sa.share + sb.share <= 8 && sa.share >= 2 && sb.share >= 2);
	reported = sa.over_max + sb.over_max;
	report("redis-server SIGSTOP past the lease, SIGCONT", 8, peak1, 1, reported, -1);
	report("redis-server SIGKILL", 8, peak2, 1, reported, -1);
	report("redis-server restarted with no data", 8, peak3, 1, reported, -1);
	assert_true(peak1 <= 9 && peak2 <= 9 && peak3 <= 9);
	/* The estimate bounds what the backend saw. */
	assert_true(reported >= (peak1 > 8 ? peak1 - 8 : 0));
	inst_quit(&a);
	inst_quit(&b);
}

/* Connections cut by CLIENT KILL: the instances reconnect within their
 * lease and never fall back. */
static void test_client_kill(void **state)
{
	char name[64];
	struct inst a, b;
	int peak;
	struct istats sa, sb;

	(void)state;
	name_for("ckill", name, sizeof(name));
	inst_start(&a, "A", name, 8, "--fallback", "2", NULL);
	inst_start(&b, "B", name, 8, "--fallback", "2", NULL);
	inst_say(&a, "demand 8");
	inst_say(&b, "demand 8");
	rh_sleep_ms(500);
	peak_window();
	for (int i = 0; i < 6; i++) {
		assert_int_equal(rh_do(&srv, "CLIENT KILL TYPE normal SKIPME yes"), 0);
		rh_sleep_ms(250);
	}
	rh_sleep_ms(300);
	peak = peak_window();
	sa = inst_stats(&a);
	sb = inst_stats(&b);
	printf("client kill: reconnects A %lld B %lld, failed A %lld B %lld\n", sa.reconnects,
	       sb.reconnects, sa.failed, sb.failed);
	report("connections cut (CLIENT KILL)", 8, peak, 0, sa.over_max + sb.over_max, -1);
	assert_true(sa.reconnects >= 3 && sb.reconnects >= 3);
	assert_int_equal(sa.fallbacks, 0);
	assert_int_equal(sb.fallbacks, 0);
	assert_true(sa.share + sb.share <= 8 && sa.share >= 2 && sb.share >= 2);
	assert_true(peak <= 8);
	inst_quit(&a);
	inst_quit(&b);
}

static void *debug_sleep(void *arg)
{
	(void)arg;
	rh_do(&srv, "DEBUG SLEEP 0.25");
	return NULL;
}

/* A slow store: a 250 ms stall (DEBUG SLEEP) costs renewals, not the
 * lease; a pause longer than the lease (CLIENT PAUSE) means fallback
 * (A: 1 permit, B: none), then a clean rejoin. */
static void test_slow_store(void **state)
{
	char name[64];
	struct inst a, b;
	int peak1, peak2;
	struct istats sa, sb;
	pthread_t t;

	(void)state;
	name_for("slow", name, sizeof(name));
	inst_start(&a, "A", name, 8, "--fallback", "1", NULL);
	inst_start(&b, "B", name, 8, "--fallback", "0", NULL);
	inst_say(&a, "demand 8");
	inst_say(&b, "demand 8");
	rh_sleep_ms(500);
	peak_window();
	for (int i = 0; i < 3; i++) {
		assert_int_equal(pthread_create(&t, NULL, debug_sleep, NULL), 0);
		pthread_join(t, NULL);
		rh_sleep_ms(200);
	}
	peak1 = peak_window();
	sa = inst_stats(&a);
	sb = inst_stats(&b);
	printf("stalls: failed A %lld B %lld, fallbacks A %lld B %lld\n", sa.failed, sb.failed,
	       sa.fallbacks, sb.fallbacks);
	assert_int_equal(sa.fallbacks, 0);
	assert_int_equal(sb.fallbacks, 0);
	assert_true(sa.failed + sb.failed >= 1);

	assert_int_equal(rh_do(&srv, "CLIENT PAUSE 1500 ALL"), 0);
	rh_sleep_ms(1300);
	sa = inst_stats(&a);
	sb = inst_stats(&b);
	assert_int_equal(sa.fallback, 1);
	assert_int_equal(sb.fallback, 1);
	rh_sleep_ms(1200);
	peak2 = peak_window();
	sa = inst_stats(&a);
	sb = inst_stats(&b);
	assert_int_equal(sa.fallback, 0);
	assert_int_equal(sb.fallback, 0);
	report("slow store (DEBUG SLEEP 250 ms)", 8, peak1, 0, sa.over_max + sb.over_max, -1);
	report("store paused past the lease (CLIENT PAUSE)", 8, peak2, 1,
	       sa.over_max + sb.over_max, -1);
	assert_true(peak1 <= 8);
	assert_true(peak2 <= 9);
	inst_quit(&a);
	inst_quit(&b);
}

/* Clocks an hour apart and 2% off in rate (within the 10% margin): expiry
 * is judged on the store's clock and no instance compares clocks, so the
 * limit holds, through a SIGSTOP of the slow-clocked one too (stopped as in
 * test_sigstop_instance: its calls held at the backend, the store paused
 * for a moment so that its share stays put, and let go once it stopped). */
static void test_clock_offsets(void **state)
{
	char name[64];
	struct inst a, b, c;
	int peak;
	uint64_t t0;

	(void)state;
	name_for("clock", name, sizeof(name));
	backend_hold_again();
	inst_start(&a, "A", name, 9, "--offset-ms", "-3600000", "--ppm", "-20000", "--hold-ms",
		   "-1", NULL);
	inst_start(&b, "B", name, 9, NULL);
	inst_start(&c, "C", name, 9, "--offset-ms", "3600000", "--ppm", "20000", NULL);
	/* A last: its held calls never give a permit back, so it must grow
	 * into its share, never be granted more first. */
	inst_say(&b, "demand 8");
	inst_say(&c, "demand 8");
	rh_sleep_ms(300);
	inst_say(&a, "demand 8");
	rh_sleep_ms(1000);
	peak_window();
	assert_true(near(inst_stats(&a).share, 3, 1));
	assert_true(near(inst_stats(&c).share, 3, 1));
	assert_int_equal(rh_do(&srv, "CLIENT PAUSE 200 ALL"), 0);
	t0 = rh_now();
	while (!all_of_share_at_backend(&a))
		assert_true(rh_now() - t0 < 150 * BH_MSEC);
	stop_all_threads(a.pid);
	backend_let_go(false);
	rh_sleep_ms(1200);
	kill(a.pid, SIGCONT);
	rh_sleep_ms(1200);
	peak = peak_window();
	assert_true(near(inst_stats(&a).share, 3, 1));
	report("clocks 1 h apart, rates 2% off", 9, peak, 0,
	       inst_stats(&a).over_max + inst_stats(&b).over_max + inst_stats(&c).over_max, -1);
	backend_let_go(true); /* A's calls since: so that it can quit */
	assert_true(peak <= 9);
	inst_quit(&a);
	inst_quit(&b);
	inst_quit(&c);
}

/* Whatever a failed scenario left: its instances, a stopped or paused
 * server. */
static int teardown(void **state)
{
	(void)state;
	rig_kill_all();
	backend_let_go(true);
	redis_signal(&srv, SIGCONT);
	rh_do(&srv, "CLIENT UNPAUSE");
	peak_window();
	return 0;
}

int main(void)
{
	const struct CMUnitTest all[] = {
		cmocka_unit_test_teardown(test_skew_and_converge, teardown),
		cmocka_unit_test_teardown(test_shrink_with_calls_in_flight, teardown),
		cmocka_unit_test_teardown(test_sigkill_instance, teardown),
		cmocka_unit_test_teardown(test_sigstop_instance, teardown),
		cmocka_unit_test_teardown(test_redis_stop_kill_restart, teardown),
		cmocka_unit_test_teardown(test_client_kill, teardown),
		cmocka_unit_test_teardown(test_slow_store, teardown),
		cmocka_unit_test_teardown(test_clock_offsets, teardown),
	};
	struct CMUnitTest chosen[8];
	const char *only = getenv("BH_CLUSTER_SCENARIO");
	size_t n = 0;
	int r;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!only || strstr(all[i].name, only))
			chosen[n++] = all[i];
	if ((r = redis_start(&srv, false)) == 77) {
		printf("redis-server is not installed: skip\n");
		return 77;
	}
	if (r != 0 || find_inst() != 0 || backend_start() != 0) {
		printf("setup failed (redis-server, tests/cluster_inst or the backend)\n");
		redis_stop(&srv);
		return 1;
	}
	r = _cmocka_run_group_tests("cluster_faults", chosen, n, NULL, NULL);
	printf("\nsummary (backend concurrency; bound = the fallback limits in play):\n");
	for (int i = 0; i < n_results; i++)
		printf("  %-46s limit %2d  peak %2d  over %d (bound %d)\n", results[i].scenario,
		       results[i].limit, results[i].peak,
		       results[i].peak > results[i].limit ? results[i].peak - results[i].limit : 0,
		       results[i].bound);
	redis_stop(&srv);
	return r;
}
