/* Defects the fuzz harness found against the reference model
 * (tests/fuzz/fuzz_core.c, tests/ref_model.c), each kept as a unit test
 * played deterministically through the fake wait hook (testutil.h). */
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

/* The waiter's own wait plays the other threads: a release hands it the
 * permits, then the releasing side gives back one permit too many (a bug
 * the library cannot tell from a correct release, since the total stays
 * within the limit), then pthread_cancel strikes the waiter. */
static int hook_grant_overrelease_cancel(struct fake_sync *f, unsigned call)
{
	struct bh_stats st;

	(void)call;
	assert_int_equal(bh_release(f->bh, 1), 0); /* 2 free: handed to us */
	st = stats_of(f->bh);
	assert_int_equal(st.in_flight, 4);
	/* the release has returned: counted, though we have not woken to
	 * count our take (released is derived, bh_stats(3)) */
	assert_int_equal(st.released, 1);
	assert_int_equal(st.acquired, 1);
	for (int i = 0; i < 3; i++) /* the main side held 2, gives back 3 */
		assert_int_equal(bh_release(f->bh, 1), 0);
	assert_int_equal(stats_of(f->bh).in_flight, 1);
	pthread_cancel(pthread_self());
	pthread_testcancel();
	fail_msg("not cancelled");
	return 0;
}

static void *acquire_two(void *p)
{
	bh_acquire(p, 2, BH_FOREVER);
	return NULL;
}

/* A cancelled grantee gives back only what fits under the limit: the
 * permit another call already released for it is not given back twice. */
static void test_cancel_give_back_stays_within_limit(void **state)
{
	bulkhead_t *bh = make_bh(4, 4, BH_FAIR);
	struct fake_sync f;
	struct bh_stats st;
	pthread_t t;
	void *ret;

	(void)state;
	fake_install(&f, bh, hook_grant_overrelease_cancel);
	assert_int_equal(bh_try_acquire(bh, 3), 0);
	assert_int_equal(pthread_create(&t, NULL, acquire_two, bh), 0);
	pthread_join(t, &ret);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	st = stats_of(bh);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.cancelled, 1);
	assert_int_equal(st.over_released, 1);
	/* what the callers saw: one take (3 permits), four releases; the
	 * cancelled grant is neither, and the permit it could not give back
	 * was given back by the over-release */
	assert_int_equal(st.acquired, 1);
	assert_int_equal(st.released, 4);
	/* exactly the limit can be taken, not one more */
	assert_int_equal(bh_try_acquire(bh, 4), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, 4), 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	bh_destroy(bh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cancel_give_back_stays_within_limit),
	};

	alarm(60);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
