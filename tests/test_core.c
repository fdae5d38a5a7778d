/* The core limiter's rules, one test each. Races are played deterministically
 * through the fake wait hook (testutil.h); tests with real threads wait for
 * observable states (queued counts, joins), never for time to pass. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_timedjoin_np */
#endif
#include <signal.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

/* ---- bad input -------------------------------------------------------- */

static void test_create_rejects_bad_config(void **state)
{
	struct bh_config cfg = { .max_concurrent = 1 };
	bulkhead_t *bh = (bulkhead_t *)&cfg;

	(void)state;
	assert_int_equal(bh_create(NULL, &bh), -EINVAL);
	assert_int_equal(bh_create(&cfg, NULL), -EINVAL);
	cfg.max_concurrent = 0;
	assert_int_equal(bh_create(&cfg, &bh), -EINVAL);
	cfg.max_concurrent = BH_LIMIT_MAX + 1;
	assert_int_equal(bh_create(&cfg, &bh), -EINVAL);
	cfg.max_concurrent = 4;
	cfg.flags = 1u << 7;
	assert_int_equal(bh_create(&cfg, &bh), -EINVAL);
	cfg.flags = BH_FAIR | 1u << 3;
	assert_int_equal(bh_create(&cfg, &bh), -EINVAL);
	assert_ptr_equal(bh, (bulkhead_t *)&cfg); /* untouched on failure */
	cfg.flags = BH_FAIR | BH_TRACK_HOLD | BH_NO_STATS; /* every flag is valid */
	assert_int_equal(bh_create(&cfg, &bh), 0);
	bh_destroy(bh);
	cfg.flags = 0;
	cfg.max_concurrent = BH_LIMIT_MAX;
	assert_int_equal(bh_create(&cfg, &bh), 0);
	assert_int_equal(stats_of(bh).limit, BH_LIMIT_MAX);
	assert_int_equal(bh_try_acquire(bh, BH_LIMIT_MAX), 0);
	assert_int_equal(stats_of(bh).in_flight, BH_LIMIT_MAX);
	assert_int_equal(bh_release(bh, BH_LIMIT_MAX), 0);
	bh_destroy(bh);
	bh_destroy(NULL);
}

static void never_called(struct bh_async *node, int result)
{
	(void)node;
	fail_msg("callback ran with %d", result);
}

static void test_bad_n_everywhere(void **state)
{
	bulkhead_t *bh = make_bh(4, 4, 0);
	struct bh_async a;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 0), -EINVAL);
	assert_int_equal(bh_try_acquire(bh, 5), -EINVAL);
	assert_int_equal(bh_try_acquire(bh, UINT32_MAX), -EINVAL);
	assert_int_equal(bh_acquire(bh, 0, BH_FOREVER), -EINVAL);
	assert_int_equal(bh_acquire(bh, 5, BH_FOREVER), -EINVAL); /* never waits forever */
	assert_int_equal(bh_acquire(bh, UINT32_MAX, BH_FOREVER), -EINVAL);
	assert_int_equal(bh_release(bh, 0), -EINVAL);
	assert_int_equal(bh_acquire_async(bh, &a, 0, never_called, NULL), -EINVAL);
	assert_int_equal(bh_acquire_async(bh, &a, 5, never_called, NULL), -EINVAL);
	assert_int_equal(bh_acquire_async(bh, NULL, 1, never_called, NULL), -EINVAL);
	assert_int_equal(bh_acquire_async(bh, &a, 1, NULL, NULL), -EINVAL);
	assert_int_equal(bh_cancel_async(bh, NULL), -EINVAL);
	assert_int_equal(bh_set_limit(bh, 0), -EINVAL);
	assert_int_equal(bh_set_limit(bh, BH_LIMIT_MAX + 1), -EINVAL);
	struct bh_stats st = stats_of(bh);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.limit, 4);
	assert_int_equal(st.rejected, 0); /* bad input is not a rejection */
	bh_destroy(bh);
}

/* One order of errors on every acquiring entry point: invalid arguments,
 * then closed, then more than the current limit, then no room. */
enum entry { E_TRY, E_PAST, E_TIMED, E_FOREVER, E_ASYNC, E_N };

static int acquire_by(bulkhead_t *bh, enum entry e, uint32_t n)
{
	static struct bh_async node;

	switch (e) {
	case E_TRY:
		return bh_try_acquire(bh, n);
	case E_PAST:
		return bh_acquire(bh, n, 0);
	case E_TIMED:
		return bh_acquire(bh, n, bh_now_ns() + 10 * BH_SEC);
	case E_FOREVER:
		return bh_acquire(bh, n, BH_FOREVER);
	default:
		return bh_acquire_async(bh, &node, n, never_called, NULL);
	}
}

static void test_error_precedence(void **state)
{
	bulkhead_t *full = make_bh(1, 0, 0), *roomy = make_bh(1, 4, 0);

	(void)state;
	assert_int_equal(bh_try_acquire(full, 1), 0); /* no permit, no queue room */
	assert_int_equal(bh_try_acquire(roomy, 1), 0); /* no permit, queue room */
	for (int e = 0; e < E_N; e++) {
		assert_int_equal(acquire_by(full, e, 0), -EINVAL);
		assert_int_equal(acquire_by(full, e, BH_LIMIT_MAX + 1), -EINVAL);
		assert_int_equal(acquire_by(full, e, 2), -EINVAL); /* not -EBUSY */
		assert_int_equal(acquire_by(full, e, 1), -EBUSY);
		assert_int_equal(acquire_by(roomy, e, 2), -EINVAL); /* never queued */
	}
	assert_int_equal(stats_of(full).rejected, E_N);
	assert_int_equal(stats_of(roomy).queued, 0);
	assert_int_equal(bh_close(full), 0);
	assert_int_equal(bh_close(roomy), 0);
	for (int e = 0; e < E_N; e++) {
		assert_int_equal(acquire_by(full, e, 0), -EINVAL);
		assert_int_equal(acquire_by(full, e, BH_LIMIT_MAX + 1), -EINVAL);
		assert_int_equal(acquire_by(full, e, 2), -ESHUTDOWN); /* not -EINVAL */
		assert_int_equal(acquire_by(full, e, 1), -ESHUTDOWN); /* not -EBUSY */
		assert_int_equal(acquire_by(roomy, e, 2), -ESHUTDOWN);
		assert_int_equal(acquire_by(roomy, e, 1), -ESHUTDOWN);
	}
	struct bh_async a;
	assert_int_equal(bh_acquire_async(full, &a, 1, NULL, NULL), -EINVAL);
	assert_int_equal(bh_acquire_async(full, NULL, 1, never_called, NULL), -EINVAL);
	assert_int_equal(stats_of(full).rejected, E_N); /* closed is not a rejection */
	assert_int_equal(bh_release(full, 1), 0);
	assert_int_equal(bh_release(roomy, 1), 0);
	bh_destroy(full);
	bh_destroy(roomy);
}

/* One rule for NULL: -EINVAL, or NULL from a function returning a pointer,
 * or 0 from one returning a value, everywhere but the hot paths (which take
 * a valid handle as a precondition); destroy ignores NULL. */
static void test_null_handles(void **state)
{
	bulkhead_t *bh = make_bh(2, 1, 0);
	struct bh_stats st;
	struct bh_hist h;
	struct bh_async a;

	(void)state;
	memset(&h, 0, sizeof(h));
	bh_hist_record(&h, 5000);
	assert_int_equal(bh_close(NULL), -EINVAL);
	assert_int_equal(bh_set_limit(NULL, 1), -EINVAL);
	assert_int_equal(bh_set_limit(NULL, 0), -EINVAL);
	assert_int_equal(bh_stats(NULL, &st), -EINVAL);
	assert_int_equal(bh_stats(bh, NULL), -EINVAL);
	assert_null(bh_name(NULL));
	assert_int_equal(bh_acquire_async(NULL, &a, 1, never_called, NULL), -EINVAL);
	assert_int_equal(bh_acquire_async(NULL, &a, 0, never_called, NULL), -EINVAL);
	assert_int_equal(bh_cancel_async(NULL, &a), -EINVAL);
	assert_int_equal(bh_hist_merge(NULL, &h), -EINVAL);
	assert_int_equal(bh_hist_merge(&h, NULL), -EINVAL);
	assert_int_equal(bh_hist_quantile(NULL, 0.5), 0);
	bh_hist_bounds(3, NULL, NULL); /* both outputs are optional */
	bh_destroy(NULL);
	/* nothing above touched bh, and the checked calls work with it */
	assert_int_equal(bh_stats(bh, &st), 0);
	assert_int_equal(st.limit, 2);
	assert_int_equal(st.acquired + st.rejected + st.cancelled, 0);
	assert_int_equal(bh_hist_merge(&h, &h), 0);
	assert_int_equal(h.count, 2);
	assert_int_equal(bh_hist_quantile(&h, 0.5), bh_hist_quantile(&h, 1.0));
	assert_int_equal(bh_set_limit(bh, 1), 0);
	assert_int_equal(bh_close(bh), 0);
	bh_destroy(bh);
}

static void test_errno_untouched(void **state)
{
	bulkhead_t *bh = make_bh(1, 0, 0);

	(void)state;
	errno = 1234;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_acquire(bh, 1, bh_now_ns() + BH_MSEC), -EBUSY);
	assert_int_equal(bh_release(bh, 2), -EOVERFLOW);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(errno, 1234);
	bh_destroy(bh);
}

/* ---- try, release, over-release ---------------------------------------- */

static void test_try_acquire_and_release(void **state)
{
	bulkhead_t *bh = make_bh(3, 0, 0);
	struct bh_stats st;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(bh_try_acquire(bh, 2), -EBUSY);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	st = stats_of(bh);
	assert_int_equal(st.in_flight, 3);
	assert_int_equal(st.acquired, 2);
	assert_int_equal(st.rejected, 2);
	assert_int_equal(bh_release(bh, 3), 0);
	assert_int_equal(bh_try_acquire(bh, 3), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_release(bh, 2), 0);
	st = stats_of(bh);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.released, 3);
	assert_int_equal(st.acquired, 3);
	bh_destroy(bh);
}

/* released is derived from the takes and the word (bh_stats(3)). A take
 * between its CAS and its count, made here by hand, makes the permits held
 * look like a release that has not happened: the count must stay where it
 * was, not go back, and be exact again once the take is counted. */
static void test_released_never_goes_back(void **state)
{
	bulkhead_t *bh = make_bh(2, 0, 0);
	struct bh_stats st;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(stats_of(bh).released, 1);
	atomic_fetch_add(&bh->word, W_TAKE_ONE); /* a take's CAS, its count not yet stored */
	st = stats_of(bh);
	assert_int_equal(st.in_flight, 1);
	assert_int_equal(st.acquired, 1);
	assert_int_equal(st.released, 1);
	bhi_count(bh, BHI_ACQUIRED); /* ...and now stored */
	st = stats_of(bh);
	assert_int_equal(st.acquired, 2);
	assert_int_equal(st.released, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(stats_of(bh).released, 2);
	bh_destroy(bh);
}

/* The word's fields at their ends: every permit held, then the limit cut to
 * 1 (free permits at their lowest, -(BH_LIMIT_MAX - 1)), then raised back
 * with one held. A take or give that carried from one field into the next
 * would show in the gauges or in what the next call is told. */
static void test_word_fields_at_their_ends(void **state)
{
	bulkhead_t *bh = make_bh(BH_LIMIT_MAX, 0, 0);
	struct bh_stats st;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, BH_LIMIT_MAX), 0);
	assert_int_equal(bh_set_limit(bh, 1), 0);
	st = stats_of(bh);
	assert_int_equal(st.limit, 1);
	assert_int_equal(st.in_flight, BH_LIMIT_MAX);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, BH_LIMIT_MAX - 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY); /* avail 0 */
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_set_limit(bh, BH_LIMIT_MAX), 0);
	assert_int_equal(bh_try_acquire(bh, BH_LIMIT_MAX - 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	st = stats_of(bh);
	assert_int_equal(st.limit, BH_LIMIT_MAX);
	assert_int_equal(st.in_flight, BH_LIMIT_MAX);
	assert_int_equal(st.queued, 0);
	for (uint32_t i = 0; i < 3; i++)
		assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_release(bh, BH_LIMIT_MAX - 3), 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	st = stats_of(bh);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.acquired, 3);
	assert_int_equal(st.rejected, 3);
	assert_int_equal(st.released, 6);
	assert_int_equal(st.over_released, 2);
	bh_destroy(bh);
}

static void test_over_release_changes_nothing(void **state)
{
	bulkhead_t *bh = make_bh(4, 0, 0);
	struct bh_stats st;

	(void)state;
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW); /* nothing held */
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(bh_release(bh, 3), -EOVERFLOW);
	assert_int_equal(bh_release(bh, 2), 0);
	assert_int_equal(bh_release(bh, 2), -EOVERFLOW); /* a double release */
	st = stats_of(bh);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.limit, 4);
	assert_int_equal(st.over_released, 3);
	assert_int_equal(st.released, 1);
	/* still exactly 4 permits */
	assert_int_equal(bh_try_acquire(bh, 4), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	bh_destroy(bh);
}

/* A release racing a waiter's registration: whichever CAS lands first on the
 * word, the permit reaches the waiter (no lost wakeup). Played at the two
 * orders the word allows: released before registering, and after. */
static int hook_release_then_timeout(struct fake_sync *f, unsigned call)
{
	if (call == 0) {
		assert_int_equal(bh_release(f->bh, 1), 0); /* the holder, "concurrently" */
		return -ETIMEDOUT;                         /* and our deadline passes */
	}
	fail_msg("no second wait expected");
	return 0;
}

static void test_timeout_racing_grant_keeps_permit(void **state)
{
	for (int fair = 0; fair <= 1; fair++) {
		bulkhead_t *bh = make_bh(1, 4, fair ? BH_FAIR : 0);
		struct fake_sync f;
		struct bh_stats st;

		(void)state;
		fake_install(&f, bh, hook_release_then_timeout);
		assert_int_equal(bh_try_acquire(bh, 1), 0);
		/* unfair mode: the release wakes us to compete, the timeout
		 * arrives first, we leave and the permit stays free; fair mode:
		 * the release hands it over and we own it despite the timeout */
		int r = bh_acquire(bh, 1, 5000);
		st = stats_of(bh);
		assert_int_equal(st.queued, 0);
		if (fair) {
			assert_int_equal(r, 0);
			assert_int_equal(st.in_flight, 1);
			assert_int_equal(st.timed_out, 0);
			assert_int_equal(bh_release(bh, 1), 0);
		} else {
			assert_int_equal(r, -ETIMEDOUT);
			assert_int_equal(st.in_flight, 0);
			assert_int_equal(st.timed_out, 1);
		}
		assert_int_equal(bh_try_acquire(bh, 1), 0); /* nothing lost */
		assert_int_equal(bh_release(bh, 1), 0);
		assert_int_equal(stats_of(bh).in_flight, 0);
		bh_destroy(bh);
	}
}

/* The other order of the lost-wakeup race: the holder's release lands after
 * the acquire's fast path failed and before the acquire registers in the
 * queue. The clock read that stamps the enqueue time sits in that window, so
 * the release is played from there. Registration decides on the same word
 * as the release: it finds the permit free and takes it, and nobody queues
 * or sleeps (a registration that queued anyway would sleep with the permit
 * free, and the hook below fails the test at its first wait). */
static bool release_at_clock;

static uint64_t now_releasing(void *ctx)
{
	struct fake_sync *f = ctx;

	if (release_at_clock) {
		release_at_clock = false;
		assert_int_equal(stats_of(f->bh).in_flight, 1); /* still held: the window */
		assert_int_equal(bh_release(f->bh, 1), 0);
	}
	return fake_now(ctx);
}

static int hook_no_wait(struct fake_sync *f, unsigned call)
{
	(void)f;
	(void)call;
	fail_msg("the acquire queued and waited with the permit free");
	return 0;
}

static void test_release_before_registration(void **state)
{
	(void)state;
	for (int fair = 0; fair <= 1; fair++) {
		bulkhead_t *bh = make_bh(1, 4, fair ? BH_FAIR : 0);
		struct fake_sync f;
		struct bh_stats st;

		fake_install(&f, bh, hook_no_wait);
		f.ops.now = now_releasing;
		assert_int_equal(bh_try_acquire(bh, 1), 0);
		release_at_clock = true;
		assert_int_equal(bh_acquire(bh, 1, 5000), 0);
		assert_false(release_at_clock); /* the release was played */
		st = stats_of(bh);
		assert_int_equal(f.waits, 0);
		assert_int_equal(f.wakes, 0);
		assert_int_equal(st.queued, 0);
		assert_int_equal(st.in_flight, 1);
		assert_int_equal(st.acquired, 2);
		assert_int_equal(st.released, 1);
		assert_int_equal(st.rejected, 0);
		assert_int_equal(st.timed_out, 0);
		assert_int_equal(st.wait.count, 0); /* never queued */
		assert_int_equal(bh_release(bh, 1), 0);
		assert_int_equal(stats_of(bh).in_flight, 0);
		bh_destroy(bh);
	}
}

static int hook_timeout_only(struct fake_sync *f, unsigned call)
{
	(void)f;
	(void)call;
	return -ETIMEDOUT;
}

static void test_timeout_then_release_goes_to_pool(void **state)
{
	bulkhead_t *bh = make_bh(1, 4, BH_FAIR);
	struct fake_sync f;

	(void)state;
	fake_install(&f, bh, hook_timeout_only);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, 5000), -ETIMEDOUT);
	assert_int_equal(stats_of(bh).queued, 0);
	assert_int_equal(bh_release(bh, 1), 0); /* nobody queued: a fast release */
	assert_int_equal(f.wakes, 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	bh_destroy(bh);
}

/* Thousands of rounds of timeout vs grant at every hook position, fair and
 * unfair: afterwards every permit is back and nothing stays queued. */
static unsigned grant_at;
static int hook_grant_at(struct fake_sync *f, unsigned call)
{
	if (call == grant_at)
		assert_int_equal(bh_release(f->bh, 1), 0);
	if (call >= grant_at + 1 || call == 3)
		return -ETIMEDOUT;
	return call % 2 ? -EINTR : -EAGAIN;
}

static void test_timeout_vs_grant_rounds(void **state)
{
	(void)state;
	for (int round = 0; round < 4000; round++) {
		int fair = round & 1;
		bulkhead_t *bh = make_bh(2, 8, fair ? BH_FAIR : 0);
		struct fake_sync f;
		int r;

		grant_at = (unsigned)(round / 2) % 5;
		fake_install(&f, bh, hook_grant_at);
		assert_int_equal(bh_try_acquire(bh, 2), 0);
		r = bh_acquire(bh, 1, 5000);
		assert_true(r == 0 || r == -ETIMEDOUT);
		struct bh_stats st = stats_of(bh);
		assert_int_equal(st.queued, 0);
		/* holder gave one back only if the hook reached grant_at */
		uint64_t held_by_holder = grant_at <= 3 ? 1 : 2;
		assert_int_equal(st.in_flight, held_by_holder + (r == 0));
		if (r == 0)
			assert_int_equal(bh_release(bh, 1), 0);
		assert_int_equal(bh_release(bh, (uint32_t)held_by_holder), 0);
		assert_int_equal(bh_try_acquire(bh, 2), 0);
		bh_destroy(bh);
	}
}

/* Unfair: a head woken to compete that times out must take the WOKEN mark
 * with it; left behind, later releases would skip the lock and strand the
 * next waiter (a lost wakeup). */
static int hook_wake_then_timeout(struct fake_sync *f, unsigned call)
{
	(void)call;
	assert_int_equal(bh_release(f->bh, 1), 0); /* wakes us to compete */
	assert_true(bhi_word(f->bh) & W_WOKEN);
	return -ETIMEDOUT;
}

static int hook_one_release(struct fake_sync *f, unsigned call)
{
	assert_int_equal(call, 0); /* a second wait means the release missed us */
	assert_int_equal(bh_release(f->bh, 1), 0);
	return 0;
}

static void test_woken_head_leaving_takes_mark(void **state)
{
	bulkhead_t *bh = make_bh(1, 4, 0);
	struct fake_sync f;

	(void)state;
	fake_install(&f, bh, hook_wake_then_timeout);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, 5000), -ETIMEDOUT);
	assert_false(bhi_word(bh) & W_WOKEN);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	f.hook = hook_one_release;
	f.waits = 0;
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
	assert_int_equal(f.waits, 1);
	assert_int_equal(stats_of(bh).in_flight, 1);
	bh_destroy(bh);
}

/* ---- deadlines, signals ------------------------------------------------ */

static void test_past_deadline_is_try(void **state)
{
	bulkhead_t *bh = make_bh(1, 8, BH_FAIR);

	(void)state;
	assert_int_equal(bh_acquire(bh, 1, 0), 0); /* free: taken */
	assert_int_equal(bh_acquire(bh, 1, 0), -EBUSY);
	assert_int_equal(bh_acquire(bh, 1, bh_now_ns()), -EBUSY);
	struct bh_stats st = stats_of(bh);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.rejected, 2);
	assert_int_equal(st.timed_out, 0);
	bh_destroy(bh);
}

static void test_timeout_never_early(void **state)
{
	bulkhead_t *bh = make_bh(1, 8, 0);

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	for (int i = 0; i < 5; i++) {
		uint64_t deadline = bh_now_ns() + (uint64_t)(i + 1) * 3 * BH_MSEC;

		assert_int_equal(bh_acquire(bh, 1, deadline), -ETIMEDOUT);
		uint64_t now = bh_now_ns();
		assert_true(now >= deadline);
		assert_true(now < deadline + 5 * BH_SEC); /* a sanity bound, not a timing test */
	}
	assert_int_equal(stats_of(bh).timed_out, 5);
	assert_int_equal(stats_of(bh).queued, 0);
	bh_destroy(bh);
}

/* EINTR and EAGAIN from the wait are retried with the same deadline. */
static int hook_interrupted(struct fake_sync *f, unsigned call)
{
	if (call < 6)
		return call % 2 ? -EINTR : -EAGAIN;
	if (call == 6)
		return 0; /* spurious wakeup */
	assert_int_equal(bh_release(f->bh, 1), 0);
	return 0;
}

static void test_eintr_is_retried(void **state)
{
	bulkhead_t *bh = make_bh(1, 8, BH_FAIR);
	struct fake_sync f;

	(void)state;
	fake_install(&f, bh, hook_interrupted);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
	assert_int_equal(f.waits, 8);
	assert_int_equal(stats_of(bh).in_flight, 1);
	bh_destroy(bh);
}

static void on_sigusr1(int sig)
{
	(void)sig;
}

struct waiter_arg {
	bulkhead_t *bh;
	uint32_t n;
	uint64_t deadline;
	int result;
	int id;
	int *order;
	_Atomic int *order_pos;
	int release_after;
};

static void *waiter_main(void *p)
{
	struct waiter_arg *a = p;

	a->result = bh_acquire(a->bh, a->n, a->deadline);
	if (a->result == 0 && a->order)
		a->order[atomic_fetch_add(a->order_pos, 1)] = a->id;
	if (a->result == 0 && a->release_after)
		assert_int_equal(bh_release(a->bh, a->n), 0);
	return NULL;
}

static void test_signals_do_not_cut_wait(void **state)
{
	struct sigaction sa = { .sa_handler = on_sigusr1 }; /* no SA_RESTART */
	bulkhead_t *bh = make_bh(1, 8, 0);
	struct waiter_arg a = { .bh = bh, .n = 1, .deadline = BH_FOREVER };
	pthread_t t;

	(void)state;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, waiter_main, &a), 0);
	await_queued(bh, 1);
	for (int i = 0; i < 200; i++) {
		pthread_kill(t, SIGUSR1);
		sched_yield();
	}
	assert_int_equal(stats_of(bh).queued, 1); /* still waiting */
	assert_int_equal(bh_release(bh, 1), 0);
	pthread_join(t, NULL);
	assert_int_equal(a.result, 0);
	assert_int_equal(stats_of(bh).in_flight, 1);
	bh_destroy(bh);
}

/* ---- queue bounds, FIFO, fairness ---------------------------------------- */

static void test_queue_full_rejects_at_once(void **state)
{
	bulkhead_t *bh = make_bh(1, 2, BH_FAIR);
	struct waiter_arg a[2];
	pthread_t t[2];

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	for (int i = 0; i < 2; i++) {
		a[i] = (struct waiter_arg){ .bh = bh, .n = 1, .deadline = BH_FOREVER, .release_after = 1 };
		assert_int_equal(pthread_create(&t[i], NULL, waiter_main, &a[i]), 0);
		await_queued(bh, (uint64_t)i + 1);
	}
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), -EBUSY);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(stats_of(bh).rejected, 2);
	assert_int_equal(bh_release(bh, 1), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(a[i].result, 0);
	}
	assert_int_equal(stats_of(bh).in_flight, 0);
	bh_destroy(bh);
}

static void test_queue_zero_never_waits(void **state)
{
	bulkhead_t *bh = make_bh(1, 0, 0);

	(void)state;
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), -EBUSY);
	assert_int_equal(stats_of(bh).rejected, 1);
	bh_destroy(bh);
}

static void fifo_order(uint32_t flags)
{
	enum { N = 12 };
	bulkhead_t *bh = make_bh(1, N, flags);
	struct waiter_arg a[N];
	pthread_t t[N];
	int order[N];
	_Atomic int pos = 0;

	assert_int_equal(bh_try_acquire(bh, 1), 0);
	for (int i = 0; i < N; i++) {
		a[i] = (struct waiter_arg){ .bh = bh, .n = 1, .deadline = BH_FOREVER, .id = i,
					    .order = order, .order_pos = &pos, .release_after = 1 };
		assert_int_equal(pthread_create(&t[i], NULL, waiter_main, &a[i]), 0);
		await_queued(bh, (uint64_t)i + 1);
	}
	assert_int_equal(bh_release(bh, 1), 0);
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < N; i++) {
		assert_int_equal(a[i].result, 0);
		assert_int_equal(order[i], i);
	}
	assert_int_equal(stats_of(bh).in_flight, 0);
	bh_destroy(bh);
}

static void test_fifo_fair(void **state)
{
	(void)state;
	fifo_order(BH_FAIR);
}

static void test_fifo_unfair(void **state)
{
	(void)state;
	fifo_order(0);
}

/* Fair: the release hands the permit to the queued waiter inside bh_release,
 * so a newcomer's try fails even before the waiter runs. Unfair: the waiter
 * is only woken, and the newcomer may take the permit first. */
static int hook_newcomer(struct fake_sync *f, unsigned call)
{
	int *barged = f->user;

	if (call == 0) {
		assert_int_equal(bh_release(f->bh, 1), 0);
		*barged = bh_try_acquire(f->bh, 1) == 0;
		return 0;
	}
	if (call == 1) {
		assert_true(*barged);
		assert_int_equal(bh_release(f->bh, 1), 0); /* the barger is done */
		return 0;
	}
	fail_msg("unexpected wait %u", call);
	return 0;
}

static void test_no_barging_when_fair(void **state)
{
	for (int fair = 0; fair <= 1; fair++) {
		bulkhead_t *bh = make_bh(1, 4, fair ? BH_FAIR : 0);
		struct fake_sync f;
		int barged = -1;

		(void)state;
		fake_install(&f, bh, hook_newcomer);
		f.user = &barged;
		bhi_set_starve_ns(bh, UINT64_MAX / 2); /* keep the starvation guard out */
		assert_int_equal(bh_try_acquire(bh, 1), 0);
		assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
		assert_int_equal(barged, !fair);
		assert_int_equal(f.waits, fair ? 1u : 2u);
		assert_int_equal(stats_of(bh).in_flight, 1);
		bh_destroy(bh);
	}
}

/* Unfair: a woken head that keeps losing the race marks itself starving
 * (once it has waited starve_ns and no fair handoff happened for as long);
 * the next release then hands off to it and newcomers must queue. */
static int hook_starving(struct fake_sync *f, unsigned call)
{
	if (call < 3) {
		assert_int_equal(bh_release(f->bh, 1), 0);       /* wakes us */
		assert_int_equal(bh_try_acquire(f->bh, 1), 0);   /* and a newcomer wins */
		assert_false(bhi_word(f->bh) & W_STARVING);
		f->now += 400 * BH_USEC;
		return 0;
	}
	/* we lost at t = 1.2 ms: starving now */
	assert_true(bhi_word(f->bh) & W_STARVING);
	assert_int_equal(bh_try_acquire(f->bh, 1), -EBUSY); /* newcomers blocked... */
	assert_int_equal(bh_release(f->bh, 1), 0);          /* ...and we get handed it */
	assert_int_equal(bh_try_acquire(f->bh, 1), -EBUSY);
	return 0;
}

static void test_unfair_starvation_guard(void **state)
{
	bulkhead_t *bh = make_bh(1, 4, 0);
	struct fake_sync f;

	(void)state;
	fake_install(&f, bh, hook_starving);
	bhi_set_starve_ns(bh, BH_MSEC);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
	assert_int_equal(f.waits, 4);
	assert_false(bhi_word(bh) & W_STARVING);
	assert_int_equal(stats_of(bh).in_flight, 1);
	bh_destroy(bh);
}

/* The threshold is inclusive: a head that has waited exactly starve_ns when
 * it loses is starving, so the guard's worst case is starve_ns, not a full
 * poll past it. */
static int hook_starving_at_threshold(struct fake_sync *f, unsigned call)
{
	if (call == 0) {
		assert_int_equal(bh_release(f->bh, 1), 0);     /* wakes us */
		assert_int_equal(bh_try_acquire(f->bh, 1), 0); /* and a newcomer wins */
		f->now += BH_MSEC;                             /* exactly starve_ns */
		return 0;
	}
	assert_int_equal(call, 1);
	assert_true(bhi_word(f->bh) & W_STARVING);
	assert_int_equal(bh_try_acquire(f->bh, 1), -EBUSY);
	assert_int_equal(bh_release(f->bh, 1), 0); /* handed to us */
	return 0;
}

static void test_unfair_starving_at_exact_threshold(void **state)
{
	bulkhead_t *bh = make_bh(1, 4, 0);
	struct fake_sync f;

	(void)state;
	fake_install(&f, bh, hook_starving_at_threshold);
	bhi_set_starve_ns(bh, BH_MSEC);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
	assert_int_equal(f.waits, 2);
	assert_int_equal(stats_of(bh).in_flight, 1);
	bh_destroy(bh);
}

/* ---- weighted requests ------------------------------------------------- */

static int async_result[8];
static void record_async(struct bh_async *node, int result)
{
	async_result[(intptr_t)node->data] = result;
}

static void weighted_head_of_line(uint32_t flags)
{
	bulkhead_t *bh = make_bh(4, 8, flags);
	struct bh_async big, small;

	memset(async_result, 0x7f, sizeof(async_result));
	assert_int_equal(bh_try_acquire(bh, 4), 0);
	assert_int_equal(bh_acquire_async(bh, &big, 3, record_async, (void *)0), 1);
	assert_int_equal(bh_acquire_async(bh, &small, 1, record_async, (void *)1), 1);
	assert_int_equal(bh_release(bh, 1), 0);
	/* one free permit: the small request must not pass the big head */
	assert_int_equal(stats_of(bh).queued, 2);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY); /* nor may a newcomer */
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(stats_of(bh).queued, 2);
	assert_int_equal(bh_release(bh, 1), 0); /* 3 free: the head fits */
	assert_int_equal(async_result[0], 0);
	assert_int_equal(stats_of(bh).queued, 1);
	assert_int_equal(stats_of(bh).in_flight, 4);
	assert_int_equal(bh_release(bh, 1), 0); /* last of the original 4 */
	assert_int_equal(async_result[1], 0);
	assert_int_equal(bh_release(bh, 3), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(stats_of(bh).in_flight, 0);
	bh_destroy(bh);
}

static void test_weighted_head_of_line_fair(void **state)
{
	(void)state;
	weighted_head_of_line(BH_FAIR);
}

static void test_weighted_head_of_line_unfair(void **state)
{
	(void)state;
	weighted_head_of_line(0);
}

/* An over-release while a waiter is queued takes the locked path (a head
 * needs serving): it must be refused there as on the fast path, or the
 * permits it gives back would exceed the limit and reach the waiter. */
static void over_release_with_waiter(uint32_t flags)
{
	bulkhead_t *bh = make_bh(2, 8, flags);
	struct bh_async big;
	struct bh_stats st;

	memset(async_result, 0x7f, sizeof(async_result));
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire_async(bh, &big, 2, record_async, (void *)0), 1);
	assert_int_equal(bh_release(bh, 2), -EOVERFLOW); /* one held */
	st = stats_of(bh);
	assert_int_equal(st.over_released, 1);
	assert_int_equal(st.in_flight, 1);
	assert_int_equal(st.queued, 1);
	assert_int_equal(async_result[0], 0x7f7f7f7f); /* not granted */
	assert_int_equal(bh_release(bh, 1), 0); /* now both are free */
	assert_int_equal(async_result[0], 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY); /* still 2 permits */
	assert_int_equal(bh_release(bh, 2), 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	st = stats_of(bh);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.over_released, 2);
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	bh_destroy(bh);
}

static void test_over_release_with_waiter_fair(void **state)
{
	(void)state;
	over_release_with_waiter(BH_FAIR);
}

static void test_over_release_with_waiter_unfair(void **state)
{
	(void)state;
	over_release_with_waiter(0);
}

/* When the big head leaves, the followers that now fit are granted at once. */
static void test_head_leaves_followers_granted(void **state)
{
	for (int fair = 0; fair <= 1; fair++) {
		bulkhead_t *bh = make_bh(4, 8, fair ? BH_FAIR : 0);
		struct bh_async big, s1, s2;

		(void)state;
		memset(async_result, 0x7f, sizeof(async_result));
		assert_int_equal(bh_try_acquire(bh, 2), 0); /* 2 free */
		assert_int_equal(bh_acquire_async(bh, &big, 3, record_async, (void *)0), 1);
		assert_int_equal(bh_acquire_async(bh, &s1, 1, record_async, (void *)1), 1);
		assert_int_equal(bh_acquire_async(bh, &s2, 1, record_async, (void *)2), 1);
		assert_int_equal(bh_cancel_async(bh, &big), 1);
		assert_int_equal(async_result[1], 0);
		assert_int_equal(async_result[2], 0);
		assert_int_equal(async_result[0], 0x7f7f7f7f); /* cancelled: never called */
		struct bh_stats st = stats_of(bh);
		assert_int_equal(st.queued, 0);
		assert_int_equal(st.in_flight, 4);
		assert_int_equal(st.cancelled, 1);
		bh_destroy(bh);
	}
}

/* The same with a blocking head whose deadline passes (fake clock). */
static int hook_head_times_out(struct fake_sync *f, unsigned call)
{
	struct bh_async *s1 = f->user;

	(void)call;
	assert_int_equal(bh_acquire_async(f->bh, s1, 1, record_async, (void *)1), 1);
	return -ETIMEDOUT;
}

static void test_blocking_head_timeout_grants_followers(void **state)
{
	bulkhead_t *bh = make_bh(4, 8, BH_FAIR);
	struct fake_sync f;
	struct bh_async s1;

	(void)state;
	memset(async_result, 0x7f, sizeof(async_result));
	fake_install(&f, bh, hook_head_times_out);
	f.user = &s1;
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(bh_acquire(bh, 3, 5000), -ETIMEDOUT);
	assert_int_equal(async_result[1], 0);
	assert_int_equal(stats_of(bh).in_flight, 3);
	bh_destroy(bh);
}

/* ---- close --------------------------------------------------------------- */

static void test_close_wakes_waiters(void **state)
{
	enum { N = 4 };
	bulkhead_t *bh = make_bh(1, 8, 0);
	struct waiter_arg a[N];
	struct bh_async an;
	pthread_t t[N];

	(void)state;
	memset(async_result, 0x7f, sizeof(async_result));
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	for (int i = 0; i < N; i++) {
		a[i] = (struct waiter_arg){ .bh = bh, .n = 1, .deadline = BH_FOREVER };
		assert_int_equal(pthread_create(&t[i], NULL, waiter_main, &a[i]), 0);
	}
	await_queued(bh, N);
	assert_int_equal(bh_acquire_async(bh, &an, 1, record_async, (void *)3), 1);
	assert_int_equal(bh_close(bh), 0);
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(a[i].result, -ESHUTDOWN);
	}
	assert_int_equal(async_result[3], -ESHUTDOWN);
	assert_int_equal(bh_cancel_async(bh, &an), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -ESHUTDOWN);
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), -ESHUTDOWN);
	assert_int_equal(bh_acquire_async(bh, &an, 1, record_async, NULL), -ESHUTDOWN);
	assert_int_equal(bh_close(bh), -EALREADY);
	/* holders still drain */
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	struct bh_stats st = stats_of(bh);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.queued, 0);
	bh_destroy(bh);
}

/* ---- resize -------------------------------------------------------------- */

static void test_grow_grants_waiters(void **state)
{
	enum { N = 3 };
	bulkhead_t *bh = make_bh(1, 8, BH_FAIR);
	struct waiter_arg a[N];
	pthread_t t[N];

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	for (int i = 0; i < N; i++) {
		a[i] = (struct waiter_arg){ .bh = bh, .n = 1, .deadline = BH_FOREVER };
		assert_int_equal(pthread_create(&t[i], NULL, waiter_main, &a[i]), 0);
		await_queued(bh, (uint64_t)i + 1);
	}
	assert_int_equal(bh_set_limit(bh, 3), 0); /* room for two */
	assert_int_equal(stats_of(bh).queued, 1);
	assert_int_equal(stats_of(bh).in_flight, 3);
	assert_int_equal(bh_set_limit(bh, 10), 0);
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(a[i].result, 0);
	}
	struct bh_stats st = stats_of(bh);
	assert_int_equal(st.limit, 10);
	assert_int_equal(st.in_flight, 4);
	bh_destroy(bh);
}

static void test_shrink_takes_effect_as_holders_release(void **state)
{
	bulkhead_t *bh = make_bh(4, 8, 0);
	struct bh_stats st;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 4), 0);
	assert_int_equal(bh_set_limit(bh, 2), 0); /* never blocks */
	st = stats_of(bh);
	assert_int_equal(st.limit, 2);
	assert_int_equal(st.in_flight, 4);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY); /* 3 > 2 */
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY); /* 2 == 2 */
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, 2), 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW); /* exact after a resize too */
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(stats_of(bh).in_flight, 2);
	bh_destroy(bh);
}

static void test_shrink_fails_oversized_waiters(void **state)
{
	bulkhead_t *bh = make_bh(4, 8, BH_FAIR);
	struct bh_async big, small;

	(void)state;
	memset(async_result, 0x7f, sizeof(async_result));
	assert_int_equal(bh_try_acquire(bh, 4), 0);
	assert_int_equal(bh_acquire_async(bh, &big, 3, record_async, (void *)0), 1);
	assert_int_equal(bh_acquire_async(bh, &small, 1, record_async, (void *)1), 1);
	assert_int_equal(bh_set_limit(bh, 2), 0);
	assert_int_equal(async_result[0], -EINVAL); /* could never be granted */
	assert_int_equal(async_result[1], 0x7f7f7f7f);
	assert_int_equal(stats_of(bh).queued, 1);
	assert_int_equal(bh_release(bh, 2), 0); /* in_flight 2 == limit */
	assert_int_equal(async_result[1], 0x7f7f7f7f);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(async_result[1], 0);
	bh_destroy(bh);
}

/* ---- thread cancellation --------------------------------------------------- */

static void *cancel_waiter_main(void *p)
{
	struct waiter_arg *a = p;

	a->result = bh_acquire(a->bh, a->n, BH_FOREVER);
	return NULL;
}

static void test_pthread_cancel_waiter(void **state)
{
	bulkhead_t *bh = make_bh(1, 8, BH_FAIR);
	struct waiter_arg a = { .bh = bh, .n = 1, .result = 99 };
	pthread_t t;
	void *ret;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, cancel_waiter_main, &a), 0);
	await_queued(bh, 1);
	assert_int_equal(pthread_cancel(t), 0);
	pthread_join(t, &ret);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	assert_int_equal(a.result, 99);
	struct bh_stats st = stats_of(bh);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.cancelled, 1);
	assert_int_equal(st.in_flight, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	bh_destroy(bh);
}

/* Cancelled just after the handoff: the permits it was given pass on to the
 * next waiter instead of leaking. The hook is the waiter's own wait, so the
 * cancellation lands exactly there. */
static int hook_grant_then_cancel(struct fake_sync *f, unsigned call)
{
	struct bh_async *next = f->user;

	(void)call;
	assert_int_equal(bh_acquire_async(f->bh, next, 1, record_async, (void *)2), 1);
	assert_int_equal(bh_release(f->bh, 1), 0); /* handed to us */
	pthread_cancel(pthread_self());
	pthread_testcancel();
	fail_msg("not cancelled");
	return 0;
}

static void *fake_cancel_main(void *p)
{
	struct waiter_arg *a = p;

	a->result = bh_acquire(a->bh, 1, BH_FOREVER);
	return NULL;
}

/* A cancellation already pending when bh_acquire is called is acted on only
 * if the call sleeps in the queue. A call that takes its permits, or fails,
 * at once returns normally; the request waits for the next cancellation
 * point (here pthread_testcancel, after the release). */
struct pending_arg {
	bulkhead_t *bh;
	int cancel, result, release; /* checked by the test thread */
	_Atomic int stage; /* 1: bh_acquire returned; 2: released, about to testcancel */
};

static void *pending_cancel_main(void *arg)
{
	struct pending_arg *a = arg;

	a->cancel = pthread_cancel(pthread_self()); /* deferred: pending */
	a->result = bh_acquire(a->bh, 1, BH_FOREVER);
	atomic_store(&a->stage, 1);
	if (a->result == 0)
		a->release = bh_release(a->bh, 1);
	atomic_store(&a->stage, 2);
	pthread_testcancel();
	atomic_store(&a->stage, 3); /* never */
	return NULL;
}

static void run_pending(bulkhead_t *bh, struct pending_arg *a)
{
	pthread_t t;
	void *ret;

	*a = (struct pending_arg){ .bh = bh, .result = 99 };
	assert_int_equal(pthread_create(&t, NULL, pending_cancel_main, a), 0);
	pthread_join(t, &ret);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	assert_int_equal(a->cancel, 0);
	assert_int_equal(a->release, 0);
}

static void test_pending_cancel_only_when_waiting(void **state)
{
	bulkhead_t *free_bh = make_bh(1, 1, 0), *full = make_bh(1, 0, 0), *wait = make_bh(1, 1, 0);
	struct pending_arg a;
	struct bh_stats st;

	(void)state;
	run_pending(free_bh, &a); /* a free permit: taken, then released */
	assert_int_equal(a.result, 0);
	assert_int_equal(atomic_load(&a.stage), 2);
	st = stats_of(free_bh);
	assert_int_equal(st.acquired, 1);
	assert_int_equal(st.released, 1);
	assert_int_equal(st.cancelled, 0);
	assert_int_equal(st.in_flight, 0);

	assert_int_equal(bh_try_acquire(full, 1), 0); /* no permit, no queue room */
	run_pending(full, &a);
	assert_int_equal(a.result, -EBUSY);
	assert_int_equal(atomic_load(&a.stage), 2);
	assert_int_equal(stats_of(full).rejected, 1);

	assert_int_equal(bh_try_acquire(wait, 1), 0); /* it must queue: cancelled there */
	run_pending(wait, &a);
	assert_int_equal(a.result, 99);
	assert_int_equal(atomic_load(&a.stage), 0);
	st = stats_of(wait);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.cancelled, 1);
	assert_int_equal(st.in_flight, 1);
	assert_int_equal(bh_release(wait, 1), 0);
	assert_int_equal(bh_release(full, 1), 0);
	bh_destroy(free_bh);
	bh_destroy(full);
	bh_destroy(wait);
}

static void test_cancel_after_grant_passes_permits_on(void **state)
{
	bulkhead_t *bh = make_bh(1, 8, BH_FAIR);
	struct waiter_arg a = { .bh = bh, .result = 99 };
	struct fake_sync f;
	struct bh_async next;
	pthread_t t;
	void *ret;

	(void)state;
	memset(async_result, 0x7f, sizeof(async_result));
	fake_install(&f, bh, hook_grant_then_cancel);
	f.user = &next;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, fake_cancel_main, &a), 0);
	pthread_join(t, &ret);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	assert_int_equal(async_result[2], 0); /* the next waiter got the permit */
	struct bh_stats st = stats_of(bh);
	assert_int_equal(st.in_flight, 1);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.cancelled, 1);
	/* What the callers saw: two takes (ours, the async one's), one release;
	 * the cancelled grant is neither. */
	assert_int_equal(st.acquired, 2);
	assert_int_equal(st.released, 1);
	bh_destroy(bh);
}

/* Granted, then an over-release gives the permit back before the grantee is
 * cancelled: the grant finds nothing to put back (an over-release), and the
 * counters still say what the callers saw. Unlike test_regress's case, no
 * bh_stats between the over-release and the cancel: a read there would set
 * the floor that released never goes below, and hide a cancel miscounted. */
static int hook_grant_overrelease_cancel(struct fake_sync *f, unsigned call)
{
	struct bh_stats st;

	(void)call;
	assert_int_equal(bh_release(f->bh, 1), 0); /* handed to us */
	st = stats_of(f->bh);
	assert_int_equal(st.released, 1); /* the release has returned: counted */
	assert_int_equal(st.acquired, 1); /* our take has not */
	assert_int_equal(bh_release(f->bh, 1), 0); /* a caller's bug: it fits */
	pthread_cancel(pthread_self());
	pthread_testcancel();
	fail_msg("not cancelled");
	return 0;
}

static void test_cancel_after_grant_and_over_release(void **state)
{
	bulkhead_t *bh = make_bh(1, 8, BH_FAIR);
	struct waiter_arg a = { .bh = bh, .result = 99 };
	struct fake_sync f;
	struct bh_stats st;
	pthread_t t;
	void *ret;

	(void)state;
	fake_install(&f, bh, hook_grant_overrelease_cancel);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, fake_cancel_main, &a), 0);
	pthread_join(t, &ret);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	st = stats_of(bh);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.acquired, 1);
	assert_int_equal(st.released, 2);
	assert_int_equal(st.over_released, 1);
	assert_int_equal(st.cancelled, 1);
	assert_int_equal(bh_try_acquire(bh, 1), 0); /* still exactly 1 permit */
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	bh_destroy(bh);
}

/* An async node's callback runs under the bulkhead's lock, on whatever
 * thread grants it; bh_acquire_async(3) suggests writing an eventfd there,
 * and write(2) is a cancellation point. A thread with a cancellation
 * pending that releases (not a cancellation point) must not be cancelled
 * inside the library holding the lock: every later slow path would hang. */
static int cb_fd = -1;
static void write_async(struct bh_async *node, int result)
{
	uint64_t one = 1;

	async_result[(intptr_t)node->data] = result;
	(void)!write(cb_fd, &one, sizeof(one)); /* a cancellation point */
}

struct release_arg {
	bulkhead_t *bh;
	_Atomic int stage; /* 1: bh_release returned */
	int release;
};

static void *pending_release_main(void *p)
{
	struct release_arg *a = p;

	pthread_cancel(pthread_self()); /* deferred: pending */
	a->release = bh_release(a->bh, 1); /* grants the async node */
	atomic_store(&a->stage, 1);
	pthread_testcancel();
	return NULL;
}

static void test_callback_cancellation_point_under_lock(void **state)
{
	bulkhead_t *bh = make_bh(1, 4, BH_FAIR);
	struct release_arg a = { .bh = bh, .release = 99 };
	struct bh_async node;
	pthread_t t;
	void *ret;
	int fds[2];

	(void)state;
	memset(async_result, 0x7f, sizeof(async_result));
	assert_int_equal(pipe(fds), 0);
	cb_fd = fds[1];
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire_async(bh, &node, 1, write_async, (void *)5), 1);
	assert_int_equal(pthread_create(&t, NULL, pending_release_main, &a), 0);
	pthread_join(t, &ret);
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	assert_int_equal(async_result[5], 0);
	/* bh_release returned, and nobody is left holding the lock */
	assert_int_equal(atomic_load(&a.stage), 1);
	assert_int_equal(a.release, 0);
	assert_int_equal(pthread_mutex_trylock(&bh->lock), 0);
	pthread_mutex_unlock(&bh->lock);
	assert_int_equal(bh_close(bh), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	bh_destroy(bh);
	close(fds[0]);
	close(fds[1]);
}

/* The same from a blocking waiter leaving the queue: its deadline passes,
 * leave() grants the async node behind it, the callback's write acts on a
 * cancellation that arrived meanwhile, and the cancellation handler (the
 * waiter is still inside bh_acquire) takes the lock its own thread holds. */
static int hook_timeout_cancel_grants_async(struct fake_sync *f, unsigned call)
{
	(void)call;
	assert_int_equal(bh_acquire_async(f->bh, f->user, 1, write_async, (void *)6), 1);
	assert_int_equal(bh_release(f->bh, 1), 0); /* 1 free: not enough for us (2) */
	pthread_cancel(pthread_self()); /* arrives after the wait, before leave() */
	return -ETIMEDOUT;
}

static void *leave_main(void *p)
{
	struct waiter_arg *a = p;

	a->result = bh_acquire(a->bh, 2, 5000);
	pthread_testcancel();
	return NULL;
}

static void test_leave_callback_cancel_no_self_deadlock(void **state)
{
	bulkhead_t *bh = make_bh(2, 4, BH_FAIR);
	struct waiter_arg a = { .bh = bh, .result = 99 };
	struct fake_sync f;
	struct bh_async node;
	struct timespec ts;
	pthread_t t;
	void *ret;
	int fds[2];

	(void)state;
	memset(async_result, 0x7f, sizeof(async_result));
	assert_int_equal(pipe(fds), 0);
	cb_fd = fds[1];
	fake_install(&f, bh, hook_timeout_cancel_grants_async);
	f.user = &node;
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(pthread_create(&t, NULL, leave_main, &a), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	if (pthread_timedjoin_np(t, &ret, &ts) != 0)
		fail_msg("the waiter deadlocked on its own lock");
	assert_ptr_equal(ret, PTHREAD_CANCELED);
	assert_int_equal(a.result, -ETIMEDOUT);
	assert_int_equal(async_result[6], 0);
	struct bh_stats st = stats_of(bh);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.in_flight, 2);
	bh_destroy(bh);
	close(fds[0]);
	close(fds[1]);
}

/* BH_TRACK_HOLD: an async acquire that takes its permits at once starts
 * the thread's hold, whether the fast path or the locked one took them. The
 * clock read before the lock plays a release landing between the two. */
static struct fake_sync *hold_fake;
static int hold_release_armed;
static uint64_t release_in_now(void *ctx)
{
	(void)ctx;
	if (hold_release_armed) {
		hold_release_armed = 0;
		assert_int_equal(bh_release(hold_fake->bh, 1), 0);
	}
	return 1000;
}

static void test_async_slow_take_starts_hold(void **state)
{
	bulkhead_t *bh = make_bh(1, 4, BH_TRACK_HOLD);
	struct fake_sync f;
	struct bh_async node;

	(void)state;
	fake_install(&f, bh, NULL);
	f.ops.now = release_in_now;
	hold_fake = &f;
	assert_int_equal(bh_try_acquire(bh, 1), 0); /* hold 1 begins */
	hold_release_armed = 1;                     /* its release lands in the slow path */
	assert_int_equal(bh_acquire_async(bh, &node, 1, never_called, NULL), 0);
	assert_int_equal(stats_of(bh).hold.count, 1); /* hold 1 ended */
	assert_int_equal(bh_release(bh, 1), 0);        /* hold 2 ends */
	assert_int_equal(stats_of(bh).hold.count, 2);
	bh_destroy(bh);
}

/* ---- async ------------------------------------------------------------- */

static void test_async_basics(void **state)
{
	bulkhead_t *bh = make_bh(2, 2, 0);
	struct bh_async a, b, c, d;

	(void)state;
	memset(async_result, 0x7f, sizeof(async_result));
	assert_int_equal(bh_acquire_async(bh, &a, 2, record_async, (void *)0), 0);
	assert_int_equal(async_result[0], 0x7f7f7f7f); /* immediate: no callback */
	assert_int_equal(bh_cancel_async(bh, &a), 0);   /* not queued */
	assert_int_equal(bh_acquire_async(bh, &b, 1, record_async, (void *)1), 1);
	assert_int_equal(bh_acquire_async(bh, &c, 1, record_async, (void *)2), 1);
	assert_int_equal(bh_acquire_async(bh, &d, 1, record_async, (void *)3), -EBUSY);
	assert_int_equal(bh_cancel_async(bh, &b), 1);
	assert_int_equal(bh_cancel_async(bh, &b), 0); /* once */
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(async_result[2], 0);
	assert_int_equal(async_result[1], 0x7f7f7f7f);
	assert_int_equal(bh_cancel_async(bh, &c), 0); /* granted: we own it */
	struct bh_stats st = stats_of(bh);
	assert_int_equal(st.in_flight, 2);
	assert_int_equal(st.acquired, 2);
	assert_int_equal(st.cancelled, 1);
	assert_int_equal(st.rejected, 1);
	bh_destroy(bh);
}

/* bh_cancel_async(3): a node that was never queued because bh_acquire_async
 * returned an error gets 0 and changes nothing, whatever its memory held
 * before (here a copy of a queued node, so it looks queued): the refused
 * call leaves the node marked as not queued, as every other refusal does. */
static void test_cancel_after_refused_async(void **state)
{
	bulkhead_t *bh = make_bh(1, 2, 0);
	struct bh_async q, stale;

	(void)state;
	memset(async_result, 0x7f, sizeof(async_result));
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire_async(bh, &q, 1, record_async, (void *)5), 1);
	stale = q;
	assert_int_equal(bh_acquire_async(bh, &stale, 1, NULL, NULL), -EINVAL);
	assert_int_equal(bh_cancel_async(bh, &stale), 0);
	struct bh_stats st = stats_of(bh);
	assert_int_equal(st.queued, 1);
	assert_int_equal(st.cancelled, 0);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(async_result[5], 0); /* q is still queued, and served */
	assert_int_equal(bh_release(bh, 1), 0);
	bh_destroy(bh);
}

/* Async and blocking waiters share one FIFO. */
static int hook_mixed_fifo(struct fake_sync *f, unsigned call)
{
	if (call == 0) {
		/* we (blocking) are first; an async node queues behind us */
		assert_int_equal(bh_acquire_async(f->bh, f->user, 1, record_async, (void *)4), 1);
		assert_int_equal(bh_release(f->bh, 1), 0);
		assert_int_equal(async_result[4], 0x7f7f7f7f); /* not passed */
		return 0;
	}
	fail_msg("unexpected wait");
	return 0;
}

static void test_async_and_blocking_share_fifo(void **state)
{
	bulkhead_t *bh = make_bh(1, 4, BH_FAIR);
	struct fake_sync f;
	struct bh_async n;

	(void)state;
	memset(async_result, 0x7f, sizeof(async_result));
	fake_install(&f, bh, hook_mixed_fifo);
	f.user = &n;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(async_result[4], 0);
	bh_destroy(bh);
}

/* ---- stats ------------------------------------------------------------------ */

struct counting_arg {
	bulkhead_t *bh;
	int ok, busy;
};

static void *counting_main(void *p)
{
	struct counting_arg *c = p;

	for (int i = 0; i < 2000; i++) {
		if (bh_try_acquire(c->bh, 1) == 0) {
			c->ok++;
			assert_int_equal(bh_release(c->bh, 1), 0);
		} else {
			c->busy++;
		}
	}
	return NULL;
}

/* More threads than counter slots: the shared slot keeps the sums exact. */
static void test_counters_add_up_across_threads(void **state)
{
	enum { T = 80 };
	bulkhead_t *bh = make_bh(3, 0, 0);
	struct counting_arg c[T];
	pthread_t t[T];
	uint64_t ok = 0, busy = 0;

	(void)state;
	for (int i = 0; i < T; i++) {
		c[i] = (struct counting_arg){ .bh = bh };
		assert_int_equal(pthread_create(&t[i], NULL, counting_main, &c[i]), 0);
	}
	for (int i = 0; i < T; i++) {
		pthread_join(t[i], NULL);
		ok += (uint64_t)c[i].ok;
		busy += (uint64_t)c[i].busy;
	}
	struct bh_stats st = stats_of(bh);
	assert_int_equal(st.acquired, ok);
	assert_int_equal(st.released, ok);
	assert_int_equal(st.rejected, busy);
	assert_int_equal(ok + busy, (uint64_t)T * 2000);
	assert_int_equal(st.in_flight, 0);
	bh_destroy(bh);
}

/* The closed bit survives every other CAS on the word (tokio #8020). */
/* bh_gauges reads what bh_stats reads for the gauges, through queueing, a
 * shrink below in_flight and a grant; bad input is -EINVAL. */
static void expect_gauges(bulkhead_t *bh, uint64_t limit, uint64_t in_flight, uint64_t queued)
{
	struct bh_gauges g;
	struct bh_stats st = stats_of(bh);

	memset(&g, 0xa5, sizeof(g));
	assert_int_equal(bh_gauges(bh, &g), 0);
	assert_int_equal(g.limit, limit);
	assert_int_equal(g.in_flight, in_flight);
	assert_int_equal(g.queued, queued);
	assert_int_equal(st.limit, g.limit);
	assert_int_equal(st.in_flight, g.in_flight);
	assert_int_equal(st.queued, g.queued);
}

static void test_gauges(void **state)
{
	bulkhead_t *bh = make_bh(2, 2, BH_FAIR);
	struct waiter_arg a = { .bh = bh, .n = 1, .deadline = BH_FOREVER };
	struct bh_gauges g;
	pthread_t t;

	(void)state;
	assert_int_equal(sizeof(struct bh_gauges), 3 * sizeof(uint64_t));
	assert_int_equal(bh_gauges(NULL, &g), -EINVAL);
	assert_int_equal(bh_gauges(bh, NULL), -EINVAL);
	expect_gauges(bh, 2, 0, 0);
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	expect_gauges(bh, 2, 2, 0);
	assert_int_equal(pthread_create(&t, NULL, waiter_main, &a), 0);
	await_queued(bh, 1);
	expect_gauges(bh, 2, 2, 1);
	assert_int_equal(bh_set_limit(bh, 1), 0); /* in flight above the limit */
	expect_gauges(bh, 1, 2, 1);
	assert_int_equal(bh_release(bh, 2), 0); /* the waiter gets the one permit */
	pthread_join(t, NULL);
	assert_int_equal(a.result, 0);
	expect_gauges(bh, 1, 1, 0);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_close(bh), 0);
	expect_gauges(bh, 1, 0, 0);
	bh_destroy(bh);
}

static void test_flags_survive_cas(void **state)
{
	bulkhead_t *bh = make_bh(8, 8, 0);

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 3), 0);
	assert_int_equal(bh_close(bh), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_set_limit(bh, 5), 0);
	assert_int_equal(bh_release(bh, 2), 0);
	assert_int_equal(bh_set_limit(bh, 9), 0);
	assert_true(bhi_word(bh) & W_CLOSED);
	assert_int_equal(bh_try_acquire(bh, 1), -ESHUTDOWN);
	struct bh_stats st = stats_of(bh);
	assert_int_equal(st.limit, 9);
	assert_int_equal(st.in_flight, 0);
	bh_destroy(bh);
}

/* ---- a fork child's copy of a layer's bulkhead (bhi_close_inherited) ---- */

static _Atomic int inherited_calls;

static void count_call(struct bh_async *node, int result)
{
	(void)node;
	(void)result;
	atomic_fetch_add(&inherited_calls, 1);
}

/* What the child sees: closed, nothing queued, the parent's async node not
 * queued (its callback never runs here), and calls that serve the queue
 * serving nothing. An exit status per broken promise. */
static int child_after_close_inherited(bulkhead_t *bh, struct bh_async *node)
{
	struct bh_gauges g;

	bhi_close_inherited(bh); /* what the layer's atfork child handler runs */
	if (bh_try_acquire(bh, 1) != -ESHUTDOWN)
		return 1;
	if (bh_gauges(bh, &g) != 0 || g.queued != 0)
		return 2;
	if (bh_cancel_async(bh, node) != 0)
		return 3;
	if (bh_release(bh, 1) != 0 || bh_set_limit(bh, 2) != 0)
		return 4;
	if (bh_gauges(bh, &g) != 0 || g.queued != 0 || g.in_flight != 0 ||
	    bh_try_acquire(bh, 1) != -ESHUTDOWN || bh_close(bh) != -EALREADY)
		return 5;
	return atomic_load(&inherited_calls) == 0 ? 0 : 6;
}

static int reap_status(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_fork_child_inherited_queue(void **state)
{
	bulkhead_t *bh = make_bh(1, 8, 0);
	struct bh_async node;
	pid_t pid;

	(void)state;
	atomic_store(&inherited_calls, 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire_async(bh, &node, 1, count_call, NULL), 1);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_after_close_inherited(bh, &node));
	assert_int_equal(reap_status(pid), 0);
	/* the parent's own queue is untouched */
	assert_int_equal(stats_of(bh).queued, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(atomic_load(&inherited_calls), 1);
	assert_int_equal(bh_release(bh, 1), 0);
	bh_destroy(bh);
}

/* A parent's thread holds the bulkhead's lock at the fork (it is inside an
 * async callback, which runs under it): the child's copy must not wait for
 * a lock nobody there will ever give back. */
static pthread_barrier_t in_callback, forked;

static void callback_parks(struct bh_async *node, int result)
{
	(void)node;
	assert_int_equal(result, 0);
	pthread_barrier_wait(&in_callback);
	pthread_barrier_wait(&forked);
}

static void *release_into_callback(void *bh)
{
	assert_int_equal(bh_release(bh, 1), 0);
	return NULL;
}

static void test_fork_child_inherited_lock(void **state)
{
	bulkhead_t *bh = make_bh(1, 8, 0);
	struct bh_async node;
	pthread_t t;
	pid_t pid;

	(void)state;
	pthread_barrier_init(&in_callback, NULL, 2);
	pthread_barrier_init(&forked, NULL, 2);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire_async(bh, &node, 1, callback_parks, NULL), 1);
	assert_int_equal(pthread_create(&t, NULL, release_into_callback, bh), 0);
	pthread_barrier_wait(&in_callback); /* t holds bh->lock now */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(10); /* a hang fails the test instead of stalling it */
		bhi_close_inherited(bh);
		_exit(bh_close(bh) == -EALREADY && bh_set_limit(bh, 3) == 0 &&
			      bh_try_acquire(bh, 1) == -ESHUTDOWN ? 0 : 1);
	}
	pthread_barrier_wait(&forked);
	pthread_join(t, NULL);
	assert_int_equal(reap_status(pid), 0);
	assert_int_equal(bh_release(bh, 1), 0); /* the async grant's permit */
	pthread_barrier_destroy(&in_callback);
	pthread_barrier_destroy(&forked);
	bh_destroy(bh);
}

/* A fork child of a process with no other thread in the library gets a
 * copy of the bulkhead as it stood at the fork, and the copy is a bulkhead
 * of its own: what the forking thread held is held in it too (and may be
 * given back there), the rest of the limit is free, and nothing either
 * process does moves the other's. */
static int child_uses_copy(bulkhead_t *bh)
{
	if (stats_of(bh).in_flight != 1)
		return 1;
	if (bh_try_acquire(bh, 1) != 0 || bh_try_acquire(bh, 1) != -EBUSY)
		return 2;
	if (bh_release(bh, 2) != 0 || bh_release(bh, 1) != -EOVERFLOW)
		return 3;
	if (bh_try_acquire(bh, 2) != 0 || bh_release(bh, 2) != 0)
		return 4;
	return stats_of(bh).acquired == 3 && stats_of(bh).rejected == 1 ? 0 : 5;
}

static void test_fork_child_gets_a_copy(void **state)
{
	bulkhead_t *bh = make_bh(2, 4, 0);
	pid_t pid;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_uses_copy(bh));
	assert_int_equal(reap_status(pid), 0);
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(stats_of(bh).acquired, 1);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, 2), 0);
	bh_destroy(bh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_rejects_bad_config),
		cmocka_unit_test(test_bad_n_everywhere),
		cmocka_unit_test(test_error_precedence),
		cmocka_unit_test(test_null_handles),
		cmocka_unit_test(test_errno_untouched),
		cmocka_unit_test(test_try_acquire_and_release),
		cmocka_unit_test(test_released_never_goes_back),
		cmocka_unit_test(test_word_fields_at_their_ends),
		cmocka_unit_test(test_over_release_changes_nothing),
		cmocka_unit_test(test_timeout_racing_grant_keeps_permit),
		cmocka_unit_test(test_release_before_registration),
		cmocka_unit_test(test_timeout_then_release_goes_to_pool),
		cmocka_unit_test(test_timeout_vs_grant_rounds),
		cmocka_unit_test(test_woken_head_leaving_takes_mark),
		cmocka_unit_test(test_past_deadline_is_try),
		cmocka_unit_test(test_timeout_never_early),
		cmocka_unit_test(test_eintr_is_retried),
		cmocka_unit_test(test_signals_do_not_cut_wait),
		cmocka_unit_test(test_queue_full_rejects_at_once),
		cmocka_unit_test(test_queue_zero_never_waits),
		cmocka_unit_test(test_fifo_fair),
		cmocka_unit_test(test_fifo_unfair),
		cmocka_unit_test(test_no_barging_when_fair),
		cmocka_unit_test(test_unfair_starvation_guard),
		cmocka_unit_test(test_unfair_starving_at_exact_threshold),
		cmocka_unit_test(test_weighted_head_of_line_fair),
		cmocka_unit_test(test_weighted_head_of_line_unfair),
		cmocka_unit_test(test_over_release_with_waiter_fair),
		cmocka_unit_test(test_over_release_with_waiter_unfair),
		cmocka_unit_test(test_head_leaves_followers_granted),
		cmocka_unit_test(test_blocking_head_timeout_grants_followers),
		cmocka_unit_test(test_close_wakes_waiters),
		cmocka_unit_test(test_grow_grants_waiters),
		cmocka_unit_test(test_shrink_takes_effect_as_holders_release),
		cmocka_unit_test(test_shrink_fails_oversized_waiters),
		cmocka_unit_test(test_pthread_cancel_waiter),
		cmocka_unit_test(test_pending_cancel_only_when_waiting),
		cmocka_unit_test(test_cancel_after_grant_passes_permits_on),
		cmocka_unit_test(test_cancel_after_grant_and_over_release),
		cmocka_unit_test(test_callback_cancellation_point_under_lock),
		cmocka_unit_test(test_leave_callback_cancel_no_self_deadlock),
		cmocka_unit_test(test_async_slow_take_starts_hold),
		cmocka_unit_test(test_async_basics),
		cmocka_unit_test(test_cancel_after_refused_async),
		cmocka_unit_test(test_async_and_blocking_share_fifo),
		cmocka_unit_test(test_counters_add_up_across_threads),
		cmocka_unit_test(test_gauges),
		cmocka_unit_test(test_flags_survive_cas),
		cmocka_unit_test(test_fork_child_inherited_queue),
		cmocka_unit_test(test_fork_child_inherited_lock),
		cmocka_unit_test(test_fork_child_gets_a_copy),
	};

	alarm(300); /* a lost wakeup must fail the run, not hang it */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
