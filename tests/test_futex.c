/* The plumbing layer's futex wrappers (src/lib/futex.h) and spin policy
 * (src/lib/spin.h): the wrappers return what the kernel said as a negative
 * errno and leave errno as it was, whatever the path (timeout, mismatch,
 * the cancellable window); a spinner is refused when the spinners would
 * outnumber the online CPUs, and the count comes back to 0. And the vDSO
 * lookup (src/lib/vdso.h) behind the gate's clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>

#include "core/internal.h"
#include "lib/futex.h"
#include "lib/spin.h"
#include "lib/vdso.h"

#include <sys/auxv.h>
#include <time.h>

#define SENTINEL 4242 /* no errno value: any write to errno shows */

static const unsigned all_flags[] = { 0, BHI_FUTEX_SHARED, BHI_FUTEX_CANCEL,
				      BHI_FUTEX_SHARED | BHI_FUTEX_CANCEL };

static void test_wait_timeout_keeps_errno(void **state)
{
	_Atomic uint32_t word = 7;

	(void)state;
	for (size_t i = 0; i < sizeof(all_flags) / sizeof(all_flags[0]); i++) {
		uint64_t t0 = bhi_now_ns();

		errno = SENTINEL;
		assert_int_equal(bhi_futex_wait(&word, 7, t0 + BH_MSEC, all_flags[i]), -ETIMEDOUT);
		assert_int_equal(errno, SENTINEL);
		assert_true(bhi_now_ns() >= t0 + BH_MSEC); /* the deadline is absolute */
		assert_int_equal(bhi_futex_wait_for(&word, 7, BH_MSEC, all_flags[i]), -ETIMEDOUT);
		assert_int_equal(errno, SENTINEL);
	}
}

static void test_wait_past_deadline_times_out(void **state)
{
	_Atomic uint32_t word = 7;

	(void)state;
	errno = SENTINEL;
	assert_int_equal(bhi_futex_wait(&word, 7, bhi_now_ns() - 1, BHI_FUTEX_CANCEL), -ETIMEDOUT);
	assert_int_equal(errno, SENTINEL);
}

static void test_wait_mismatch_is_eagain(void **state)
{
	_Atomic uint32_t word = 7;

	(void)state;
	for (size_t i = 0; i < sizeof(all_flags) / sizeof(all_flags[0]); i++) {
		errno = SENTINEL;
		assert_int_equal(bhi_futex_wait(&word, 8, BH_FOREVER, all_flags[i]), -EAGAIN);
		assert_int_equal(bhi_futex_wait_for(&word, 8, BH_FOREVER, all_flags[i]), -EAGAIN);
		assert_int_equal(errno, SENTINEL);
	}
}

static void test_wake_keeps_errno(void **state)
{
	_Atomic uint32_t word = 0;

	(void)state;
	errno = SENTINEL;
	bhi_futex_wake(&word, 1, 0);
	bhi_futex_wake(&word, INT_MAX, BHI_FUTEX_SHARED);
	assert_int_equal(errno, SENTINEL);
}

/* The ops tables every layer sleeps with are thin calls into the same. */
static void test_ops_tables_keep_errno(void **state)
{
	const struct bhi_sync_ops *ops[] = { &bhi_futex_ops, &bhi_futex_shared_ops };
	_Atomic uint32_t word = 1;

	(void)state;
	for (int i = 0; i < 2; i++) {
		errno = SENTINEL;
		assert_int_equal(bhi_sync_wait(ops[i], BHI_WAIT_GRANT, &word, 1,
					       bhi_sync_now(ops[i]) + BH_MSEC),
				 -ETIMEDOUT);
		bhi_sync_wake(ops[i], &word, false);
		bhi_sync_wake(ops[i], &word, true);
		assert_int_equal(errno, SENTINEL);
	}
	assert_true(bh_now_ns() <= bhi_now_ns());
}

static void test_spin_refused_at_cpu_count(void **state)
{
	(void)state;
	assert_int_equal(bhi_spin_count(), 0);
	bhi_spin_test_cpus(3); /* three may spin, one a CPU; not a fourth */
	assert_true(bhi_spin_begin());
	assert_true(bhi_spin_begin());
	assert_true(bhi_spin_begin());
	assert_false(bhi_spin_begin());
	assert_int_equal(bhi_spin_count(), 3);
	bhi_spin_end();
	assert_true(bhi_spin_begin());
	bhi_spin_end();
	bhi_spin_end();
	bhi_spin_end();
	assert_int_equal(bhi_spin_count(), 0);
	bhi_spin_test_cpus(1);
	assert_true(bhi_spin_begin());
	assert_false(bhi_spin_begin());
	bhi_spin_end();
	assert_int_equal(bhi_spin_count(), 0);
	bhi_spin_test_cpus(0);
}

/* A refused spinner returns at once: with UINT32_MAX polls on a word that
 * never changes, spinning would take seconds. */
static void test_spin_while_refused_returns(void **state)
{
	_Atomic uint32_t word = 5;
	uint64_t t0;

	(void)state;
	bhi_spin_test_cpus(2);
	assert_true(bhi_spin_begin()); /* the two spinners two CPUs allow */
	assert_true(bhi_spin_begin());
	t0 = bhi_now_ns();
	bhi_spin_while(&word, 5, UINT32_MAX);
	assert_true(bhi_now_ns() - t0 < BH_SEC); /* a loaded machine's slack */
	assert_int_equal(bhi_spin_count(), 2);
	bhi_spin_end();
	bhi_spin_end();
	bhi_spin_while(&word, 6, UINT32_MAX); /* allowed; the word differs: returns */
	bhi_spin_while(&word, 5, 0);          /* no budget: never counted */
	assert_int_equal(bhi_spin_count(), 0);
	bhi_spin_test_cpus(0);
}

/* Where the kernel mapped a vDSO, its clock_gettime is found and reads the
 * same clocks as glibc's; a name it does not have is NULL. x86-64 names it
 * __vdso_clock_gettime; elsewhere the lookup may miss, which is allowed
 * (the caller falls back to glibc). */
static void test_vdso_clock(void **state)
{
	typedef int clock_fn(clockid_t, struct timespec *);
	clock_fn *f = (clock_fn *)bhi_vdso_sym("__vdso_clock_gettime");
	struct timespec a, b, c;

	(void)state;
	assert_null(bhi_vdso_sym("__vdso_no_such_function"));
	assert_null(bhi_vdso_sym(""));
	if (!getauxval(AT_SYSINFO_EHDR)) {
		assert_null(f);
		return;
	}
#if defined(__x86_64__) && !defined(__ILP32__)
	assert_non_null(f);
#endif
	if (!f || sizeof(time_t) != sizeof(long)) /* see src/core/word.c */
		return;
	for (int i = 0; i < 2; i++) {
		clockid_t id = i ? CLOCK_MONOTONIC : CLOCK_MONOTONIC_COARSE;

		clock_gettime(id, &a);
		assert_int_equal(f(id, &b), 0);
		clock_gettime(id, &c);
		assert_true(a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec <= b.tv_nsec));
		assert_true(b.tv_sec < c.tv_sec || (b.tv_sec == c.tv_sec && b.tv_nsec <= c.tv_nsec));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wait_timeout_keeps_errno),
		cmocka_unit_test(test_wait_past_deadline_times_out),
		cmocka_unit_test(test_wait_mismatch_is_eagain),
		cmocka_unit_test(test_wake_keeps_errno),
		cmocka_unit_test(test_ops_tables_keep_errno),
		cmocka_unit_test(test_spin_refused_at_cpu_count),
		cmocka_unit_test(test_spin_while_refused_returns),
		cmocka_unit_test(test_vdso_clock),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
