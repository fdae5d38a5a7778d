/* The sizing rules and the M/M/c/K model against hand-computed numbers:
 * worked examples of the usual rules (max_concurrent = peak QPS x P99 x
 * safety factor, queue = 2 x max_concurrent, queue / QPS <= the caller's
 * timeout), closed forms (Erlang B, Erlang C, M/M/1/K, M/M/1) and
 * identities the model must keep (Little's law, tail vs mean). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "sizing.h"

#define assert_near(a, b, tol)                                                         \
	do {                                                                           \
		double a_ = (a), b_ = (b);                                             \
		if (!(fabs(a_ - b_) <= (tol)))                                         \
			fail_msg("%s = %.12g, expected %.12g (+-%g)", #a, a_, b_, (double)(tol)); \
	} while (0)

static struct bhz_model model(double lambda, double mean_s, uint32_t c, uint32_t k)
{
	struct bhz_model m;

	assert_int_equal(bhz_model_init(&m, lambda, mean_s, c, k), 0);
	return m;
}

static struct bhz_result solve(double lambda, double mean_s, uint32_t c, uint32_t k)
{
	struct bhz_model m = model(lambda, mean_s, c, k);
	struct bhz_result r;

	bhz_model_solve(&m, &r);
	return r;
}

/* ---- the rules of thumb -------------------------------------------------- */

static void test_inventory_pool(void **state)
{
	(void)state;
	/* an inventory dependency: 160 QPS x 30 ms x 1.3 = 6.24 */
	assert_near(bhz_concurrency_raw(160, 0.030, 1.3), 6.24, 1e-9);
	assert_int_equal(bhz_round_up(bhz_concurrency_raw(160, 0.030, 1.3)), 7);
	/* rounded generously to 8: queue 2 x 8 = 16, drained at 160 QPS in 100 ms */
	assert_int_equal(bhz_queue_rule(8), 16);
	assert_near(bhz_queue_over_qps(16, 160), 0.100, 1e-12);
	/* drained by 8 permits turning over every 30 ms: 16 / 8 x 30 ms */
	assert_near(bhz_worst_queue_wait(16, 8, 0.030), 0.060, 1e-12);
}

static void test_payment_pool(void **state)
{
	(void)state;
	/* a payment dependency: 50 QPS x 200 ms x 1.3 = 13, not 14 */
	assert_near(bhz_concurrency_raw(50, 0.2, 1.3), 13.0, 1e-9);
	assert_int_equal(bhz_round_up(bhz_concurrency_raw(50, 0.2, 1.3)), 13);
	/* rounded to 15 with a queue of 30: 30 / 50 = 0.6 s < a 2 s timeout */
	assert_near(bhz_queue_over_qps(bhz_queue_rule(15), 50), 0.6, 1e-12);
}

static void test_worst_wait(void **state)
{
	(void)state;
	/* queue 32, 16 permits, 100 ms service: the last waits about 200 ms */
	assert_near(bhz_worst_queue_wait(32, 16, 0.100), 0.200, 1e-12);
}

static void test_round_up(void **state)
{
	(void)state;
	assert_int_equal(bhz_round_up(8.0), 8);
	assert_int_equal(bhz_round_up(8.001), 9);
	assert_int_equal(bhz_round_up(0.2), 1);
	assert_int_equal(bhz_round_up(0.0), 1);
	assert_int_equal(bhz_round_up(-3.0), 1);
	assert_int_equal(bhz_round_up(NAN), 1);
	assert_int_equal(bhz_round_up(1e30), UINT32_MAX);
}

/* The recommended queue and the bound that set it. */
static void test_queue_recommend_names_its_bound(void **state)
{
	enum bhz_queue_bound why = (enum bhz_queue_bound)-1;

	(void)state;
	/* 7 permits, 2 x 7 = 14 fits a 1 s timeout both ways: the rule */
	assert_int_equal(bhz_queue_recommend(160, 0.030, 1.0, 7, 0, &why), 14);
	assert_int_equal(why, BHZ_QUEUE_RULE);
	/* 130 permits at 1 s, 500 ms timeout: 65 fit by the permits' turnover,
	 * 50 by draining at 100 QPS; the drain binds */
	assert_int_equal(bhz_queue_recommend(100, 1.0, 0.5, 130, 0, &why), 50);
	assert_int_equal(why, BHZ_QUEUE_DRAIN);
	/* fewer permits than the load keeps busy (a given size): 2 permits at
	 * 1 s serve 1 waiter in 500 ms, though 50 would drain at 100 QPS */
	assert_int_equal(bhz_queue_recommend(100, 1.0, 0.5, 2, 0, &why), 1);
	assert_int_equal(why, BHZ_QUEUE_WAIT);
	/* 13 permits in a compartment of 28 threads: 15 queued at most */
	assert_int_equal(bhz_queue_recommend(40, 0.2, 2.0, 13, 28, &why), 15);
	assert_int_equal(why, BHZ_QUEUE_THREADS);
	/* 7 permits, 5 threads: the timeout allows 14, the threads none */
	assert_int_equal(bhz_queue_recommend(160, 0.030, 1.0, 7, 5, &why), 0);
	assert_int_equal(why, BHZ_QUEUE_THREADS);
	/* threads that leave room for the whole rule cut nothing */
	assert_int_equal(bhz_queue_recommend(160, 0.030, 1.0, 7, 100, &why), 14);
	assert_int_equal(why, BHZ_QUEUE_RULE);
	/* a tie names the harder bound: 10 by the drain, 10 by the threads */
	assert_int_equal(bhz_queue_recommend(100, 0.01, 0.1, 10, 20, &why), 10);
	assert_int_equal(why, BHZ_QUEUE_THREADS);
	assert_int_equal(bhz_queue_recommend(160, 0.030, 1.0, 7, 0, NULL), 14);
}

static void test_fault_must_exceed_the_p99(void **state)
{
	(void)state;
	assert_true(bhz_fault_exceeds_p99(5.0, 0.240));
	assert_true(bhz_fault_exceeds_p99(0.031, 0.030));
	assert_false(bhz_fault_exceeds_p99(0.030, 0.030));
	assert_false(bhz_fault_exceeds_p99(0.001, 0.030));
	/* between the mean (200 ms) and the P99 (240 ms): not a fault */
	assert_false(bhz_fault_exceeds_p99(0.220, 0.240));
}

static void test_queue_fitting(void **state)
{
	(void)state;
	/* 8 permits at 30 ms serve 266.7 waiters per second */
	assert_int_equal(bhz_queue_fitting(1.0, 8, 0.030), 266);
	/* exactly 16 fit in 60 ms, despite 0.06 / 0.03 not being exact */
	assert_int_equal(bhz_queue_fitting(0.060, 8, 0.030), 16);
	assert_int_equal(bhz_queue_fitting(0.010, 8, 0.030), 2);
	assert_int_equal(bhz_queue_fitting(0.001, 1, 0.030), 0);
}

/* ---- M/M/c/K closed forms ------------------------------------------------ */

static void test_model_rejects_bad_input(void **state)
{
	struct bhz_model m;

	(void)state;
	assert_int_equal(bhz_model_init(&m, 0, 1, 1, 0), -EINVAL);
	assert_int_equal(bhz_model_init(&m, -1, 1, 1, 0), -EINVAL);
	assert_int_equal(bhz_model_init(&m, NAN, 1, 1, 0), -EINVAL);
	assert_int_equal(bhz_model_init(&m, INFINITY, 1, 1, 0), -EINVAL);
	assert_int_equal(bhz_model_init(&m, 1, 0, 1, 0), -EINVAL);
	assert_int_equal(bhz_model_init(&m, 1, 1, 0, 0), -EINVAL);
	assert_int_equal(bhz_model_init(&m, 1, 1, 2, UINT32_MAX - 1), -EINVAL);
}

static void test_mm11_is_a_coin(void **state)
{
	/* one permit, no queue, a = 1: half the calls find it taken */
	struct bhz_result r = solve(1.0, 1.0, 1, 0);

	(void)state;
	assert_near(r.p_reject, 0.5, 1e-12);
	assert_near(r.p_wait, 0.0, 1e-12);
	assert_near(r.throughput, 0.5, 1e-12);
	assert_near(r.mean_in_flight, 0.5, 1e-12);
	assert_near(r.mean_wait_s, 0.0, 1e-12);
}

static void test_erlang_b(void **state)
{
	/* K = 0 is Erlang's loss formula: B(2, 1) = (1/2) / (1 + 1 + 1/2) */
	(void)state;
	assert_near(solve(1.0, 1.0, 2, 0).p_reject, 0.2, 1e-12);
	/* B(10, 5) = 0.018384 (standard tables) */
	assert_near(solve(5.0, 1.0, 10, 0).p_reject, 0.0183840, 1e-6);
}

static void test_mm1k_by_hand(void **state)
{
	/* c = 1, K = 2, rho = 1/2: p_n proportional to 8, 4, 2, 1 (of 15) */
	struct bhz_model m = model(0.5, 1.0, 1, 2);
	struct bhz_result r;

	(void)state;
	assert_near(bhz_model_pn(&m, 0), 8.0 / 15, 1e-12);
	assert_near(bhz_model_pn(&m, 3), 1.0 / 15, 1e-12);
	assert_near(bhz_model_pn(&m, 4), 0.0, 0);
	bhz_model_solve(&m, &r);
	assert_near(r.p_reject, 1.0 / 15, 1e-12);
	assert_near(r.p_wait, 6.0 / 15, 1e-12);       /* found 1 or 2 */
	assert_near(r.mean_queued, 4.0 / 15, 1e-12);  /* 1 x 2/15 + 2 x 1/15 */
	assert_near(r.throughput, 7.0 / 15, 1e-12);   /* 0.5 x 14/15 */
	assert_near(r.mean_wait_s, 4.0 / 7, 1e-12);   /* Lq / throughput */
	/* P(W > 1 | admitted) = (4 e^-1 + 2 e^-1 (1 + 1)) / 14 = 8 / (14 e) */
	assert_near(bhz_model_wait_tail(&m, 1.0), 8.0 / (14.0 * M_E), 1e-12);
	assert_near(bhz_model_wait_tail(&m, 0.0), 6.0 / 14, 1e-12);
}

static void test_erlang_c_limit(void **state)
{
	/* A long queue is M/M/c: C(2, 1) = 1/3, Wq = C / (c mu - lambda) = 1/3 */
	struct bhz_result r = solve(1.0, 1.0, 2, 400);

	(void)state;
	assert_near(r.p_wait, 1.0 / 3, 1e-9);
	assert_near(r.mean_wait_s, 1.0 / 3, 1e-9);
	assert_near(r.p_reject, 0.0, 1e-12);
}

static void test_mm1_wait_tail_and_quantile(void **state)
{
	/* M/M/1, rho = 1/2: P(W > t) = rho e^{-(mu - lambda) t} */
	struct bhz_model m = model(0.5, 1.0, 1, 2000);

	(void)state;
	assert_near(bhz_model_wait_tail(&m, 2.0), 0.5 * exp(-1.0), 1e-9);
	assert_near(bhz_model_wait_quantile(&m, 0.99), log(50.0) / 0.5, 1e-6);
	assert_near(bhz_model_wait_quantile(&m, 0.40), 0.0, 0); /* half never wait */
}

/* ---- identities ------------------------------------------------------ */

static void check_identities(double lambda, double mean_s, uint32_t c, uint32_t k)
{
	struct bhz_model m = model(lambda, mean_s, c, k);
	struct bhz_result r;
	double sum = 0, integral = 0, dt;

	bhz_model_solve(&m, &r);
	for (uint32_t n = 0; n <= c + k; n++)
		sum += bhz_model_pn(&m, n);
	assert_near(sum, 1.0, 1e-9);
	assert_false(isnan(r.mean_wait_s) || isnan(r.p_reject) || isnan(r.p_wait));
	/* Little's law on the permits: L = throughput x mean service time */
	assert_near(r.mean_in_flight, r.throughput * mean_s, 1e-9 * (1 + r.mean_in_flight));
	/* The mean wait is the integral of the tail (coarse trapezoids). */
	dt = mean_s / c / 64;
	for (double t = 0; t < 60 * (k + 1) * mean_s / c; t += dt)
		integral += dt * (bhz_model_wait_tail(&m, t) + bhz_model_wait_tail(&m, t + dt)) / 2;
	assert_near(integral, r.mean_wait_s, 1e-3 * mean_s + 1e-3 * r.mean_wait_s);
}

static void test_identities(void **state)
{
	(void)state;
	check_identities(160, 0.030, 7, 14);  /* the inventory pool above */
	check_identities(50, 0.2, 13, 26);    /* the payment pool above */
	check_identities(50, 5.0, 13, 26);    /* payment at 5 s: overloaded */
	check_identities(3, 1.0, 3, 6);       /* rho = 1 exactly */
}

static void test_many_permits_stay_finite(void **state)
{
	/* a^c / c! overflows a double for a = 4000; the logs must not */
	struct bhz_result r = solve(4000, 1.0, 5000, 10000);

	(void)state;
	assert_near(r.utilisation, 0.8, 1e-6);
	assert_true(r.p_reject < 1e-12);
	assert_true(r.p_wait >= 0 && r.p_wait < 1e-6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inventory_pool),
		cmocka_unit_test(test_payment_pool),
		cmocka_unit_test(test_worst_wait),
		cmocka_unit_test(test_round_up),
		cmocka_unit_test(test_queue_recommend_names_its_bound),
		cmocka_unit_test(test_fault_must_exceed_the_p99),
		cmocka_unit_test(test_queue_fitting),
		cmocka_unit_test(test_model_rejects_bad_input),
		cmocka_unit_test(test_mm11_is_a_coin),
		cmocka_unit_test(test_erlang_b),
		cmocka_unit_test(test_mm1k_by_hand),
		cmocka_unit_test(test_erlang_c_limit),
		cmocka_unit_test(test_mm1_wait_tail_and_quantile),
		cmocka_unit_test(test_identities),
		cmocka_unit_test(test_many_permits_stay_finite),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
