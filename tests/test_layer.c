/* The core's hook for layers (src/core/layer.h): a gate that every admission
 * path obeys, and bh_destroy calling the layer first. */
#include <unistd.h>

#include "testutil.h"
#include "bulkhead/metrics.h"
#include "core/layer.h"

struct fake_layer {
	struct bhi_layer l;
	int destroyed;
	uint64_t value;
	bulkhead_t *bh;
	struct bh_stats at_destroy; /* the bulkhead is still whole then */
};

static void fake_destroy(struct bhi_layer *l)
{
	struct fake_layer *f = (struct fake_layer *)l;

	f->destroyed++;
	bh_stats(f->bh, &f->at_destroy);
}

static void never(struct bh_async *node, int result)
{
	(void)node;
	(void)result;
	fail_msg("a callback ran for a node that was never queued");
}

static bulkhead_t *gated(struct fake_layer *f, uint32_t max, uint32_t queue, uint32_t flags)
{
	bulkhead_t *bh = make_bh(max, queue, flags);

	memset(f, 0, sizeof(*f));
	f->l.destroy = fake_destroy;
	f->bh = bh;
	bhi_layer_attach(bh, &f->l);
	return bh;
}

static void test_gate_starts_shut(void **state)
{
	struct fake_layer f;
	bulkhead_t *bh = gated(&f, 4, 0, 0);
	struct bh_async node;

	(void)state;
	assert_ptr_equal(bhi_layer_of(bh), &f.l);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_acquire(bh, 1, bh_now_ns() + BH_MSEC), -EBUSY); /* no queue */
	assert_int_equal(bh_acquire_async(bh, &node, 1, never, NULL), -EBUSY);
	assert_int_equal(stats_of(bh).rejected, 3);
	assert_int_equal(stats_of(bh).in_flight, 0);
	bh_destroy(bh);
	assert_int_equal(f.destroyed, 1);
}

static void test_gate_follows_coarse_clock(void **state)
{
	struct fake_layer f;
	bulkhead_t *bh = gated(&f, 2, 0, 0);
	uint64_t now = bhi_coarse_ns(), res = bhi_coarse_res_ns();

	(void)state;
	assert_true(res > 0 && res <= 10 * BH_MSEC);
	assert_true(now <= bh_now_ns()); /* coarse is never ahead */
	bhi_gate_set(bh, now + 10 * BH_SEC);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	bhi_gate_set(bh, now); /* reached: shut, whatever is free */
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, 1), 0); /* releases never need the gate */
	bhi_gate_set(bh, BHI_GATE_OPEN);
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(bh_release(bh, 2), 0);
	/* A gate a few ticks ahead shuts by itself, with no store to it. (A
	 * preemption of three ticks between setting it and trying shuts it
	 * first: then set it again.) */
	for (int i = 0;; i++) {
		uint64_t gate = bhi_coarse_ns() + 3 * res;
		int r;

		bhi_gate_set(bh, gate);
		r = bh_try_acquire(bh, 1);
		if (r == 0)
			break;
		assert_true(r == -EBUSY && bhi_coarse_ns() >= gate && i < 100);
	}
	assert_int_equal(bh_release(bh, 1), 0);
	usleep((useconds_t)(5 * res / BH_USEC));
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	bh_destroy(bh);
}

/* Every way into a gated take: a thread with no counter slot yet (its
 * first call goes the rare way) and one with a slot (the gated copy), with
 * and without the other rare flags; the gate decides each time, and the
 * counters say exactly what the callers saw. */
struct gate_round {
	bulkhead_t *bh;
	uint64_t open_until;
	int r[6];
};

static void *gate_calls(void *arg)
{
	struct gate_round *g = arg;

	for (int i = 0; i < 2; i++) { /* the first take is this thread's first call */
		bhi_gate_set(g->bh, g->open_until);
		g->r[3 * i] = bh_try_acquire(g->bh, 1);
		g->r[3 * i + 1] = bh_acquire(g->bh, 1, bh_now_ns() + BH_MSEC);
		bhi_gate_set(g->bh, 0);
		g->r[3 * i + 2] = bh_try_acquire(g->bh, 1);
		if (g->r[3 * i] == 0)
			bh_release(g->bh, 1);
		if (g->r[3 * i + 1] == 0)
			bh_release(g->bh, 1);
	}
	return NULL;
}

static void test_gate_every_path(void **state)
{
	static const uint32_t flags[] = { 0, BH_NO_STATS, BH_TRACK_HOLD, BH_FAIR };

	(void)state;
	for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
		struct fake_layer f;
		struct gate_round g = { .bh = gated(&f, 4, 0, flags[k]),
					.open_until = BHI_GATE_OPEN };
		pthread_t t;
		struct bh_stats st;

		assert_int_equal(pthread_create(&t, NULL, gate_calls, &g), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		for (int i = 0; i < 2; i++) {
			assert_int_equal(g.r[3 * i], 0);
			assert_int_equal(g.r[3 * i + 1], 0);
			assert_int_equal(g.r[3 * i + 2], -EBUSY);
		}
		st = stats_of(g.bh);
		assert_int_equal(st.in_flight, 0);
		if (!(flags[k] & BH_NO_STATS)) {
			assert_int_equal(st.acquired, 4);
			assert_int_equal(st.released, 4);
			assert_int_equal(st.rejected, 2);
		}
		bh_destroy(g.bh);
	}
}

struct waiter {
	bulkhead_t *bh;
	int result;
};

static void *wait_one(void *arg)
{
	struct waiter *w = arg;

	w->result = bh_acquire(w->bh, 1, BH_FOREVER);
	return NULL;
}

/* A waiter queued while the gate was shut is not served by a release, only
 * once the gate opens, and then at once. */
static void gate_opening_serves(uint32_t flags)
{
	struct fake_layer f;
	bulkhead_t *bh = gated(&f, 1, 4, flags);
	struct waiter w = { bh, 1 };
	pthread_t t;

	bhi_gate_set(bh, BHI_GATE_OPEN);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	bhi_gate_set(bh, 0);
	assert_int_equal(pthread_create(&t, NULL, wait_one, &w), 0);
	await_queued(bh, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	usleep(20000);
	assert_int_equal(stats_of(bh).queued, 1);
	assert_int_equal(stats_of(bh).in_flight, 0);
	bhi_gate_set(bh, BHI_GATE_OPEN);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(w.result, 0);
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	bh_destroy(bh);
}

static void test_gate_opening_serves_fair(void **state)
{
	(void)state;
	gate_opening_serves(BH_FAIR);
}

static void test_gate_opening_serves_unfair(void **state)
{
	(void)state;
	gate_opening_serves(0);
}

static void test_destroy_calls_layer_first(void **state)
{
	struct fake_layer f;
	bulkhead_t *bh = gated(&f, 3, 0, 0);

	(void)state;
	bhi_gate_set(bh, BHI_GATE_OPEN);
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(bh_release(bh, 2), 0);
	bh_destroy(bh);
	assert_int_equal(f.destroyed, 1);
	assert_int_equal(f.at_destroy.limit, 3);
	assert_int_equal(f.at_destroy.acquired, 1);
}

static size_t fake_metrics(const struct bhi_layer *l, struct bhi_layer_metric *m)
{
	const struct fake_layer *f = (const struct fake_layer *)l;

	m[0] = (struct bhi_layer_metric){ "bulkhead_fake_level", "gauge", "A level.", f->value, 0 };
	m[1] = (struct bhi_layer_metric){ "bulkhead_fake_wait_seconds", "gauge", "A time.",
					  f->value * BH_MSEC + 5, 1 };
	m[2] = (struct bhi_layer_metric){ "bulkhead_fake_events_total", "counter", "Events.",
					  f->value + 1, 0 };
	return 3;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

/* The export shows a layer's series: one family each, grouped across
 * bulkheads, plain ones without them; nanoseconds as exact seconds. */
static void test_layer_series_exported(void **state)
{
	struct fake_layer f1, f2;
	bulkhead_t *plain = make_bh(1, 0, 0), *all[3];
	struct bh_metric_set set = { .bulkheads = all, .n_bulkheads = 3 };
	char buf[1 << 16];

	(void)state;
	all[0] = gated(&f1, 1, 0, 0);
	all[1] = plain;
	all[2] = gated(&f2, 1, 0, 0);
	f1.l.metrics = fake_metrics;
	f2.l.metrics = fake_metrics;
	f1.value = 7;
	f2.value = 2500;
	assert_true(bh_metrics_prometheus(&set, buf, sizeof(buf)) > 0);
	assert_int_equal(count(buf, "# TYPE bulkhead_fake_level gauge\n"), 1);
	assert_int_equal(count(buf, "# TYPE bulkhead_fake_events_total counter\n"), 1);
	assert_int_equal(count(buf, "bulkhead_fake_level{"), 2);
	assert_non_null(strstr(buf, "bulkhead_fake_wait_seconds{name=\"bulkhead-"));
	assert_non_null(strstr(buf, "} 0.007000005\n"));
	assert_non_null(strstr(buf, "} 2.500000005\n"));
	assert_non_null(strstr(buf, "} 2501\n"));
	assert_int_equal(count(buf, bh_name(plain)), count(buf, bh_name(all[0])) - 3);
	assert_true(bh_metrics_json(&set, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "\"fake_level\":7,\"fake_wait_seconds\":0.007000005,"
				    "\"fake_events\":8}"));
	assert_int_equal(count(buf, "fake_level"), 2);
	for (int i = 0; i < 3; i++)
		bh_destroy(all[i]);
}

static void test_plain_bulkhead_has_no_gate(void **state)
{
	bulkhead_t *bh = make_bh(1, 0, 0);

	(void)state;
	assert_null(bhi_layer_of(bh));
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	bh_destroy(bh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gate_starts_shut),
		cmocka_unit_test(test_gate_follows_coarse_clock),
		cmocka_unit_test(test_gate_every_path),
		cmocka_unit_test(test_gate_opening_serves_fair),
		cmocka_unit_test(test_gate_opening_serves_unfair),
		cmocka_unit_test(test_destroy_calls_layer_first),
		cmocka_unit_test(test_layer_series_exported),
		cmocka_unit_test(test_plain_bulkhead_has_no_gate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
