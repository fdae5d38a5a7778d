/* Histograms, waits and holds in stats, names, and the exporters — the
 * Prometheus text is parsed back and checked against bh_stats. */
#include <ctype.h>
#include <locale.h>
#include <math.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bulkhead/metrics.h"
#include "testutil.h"

/* ---- histograms ------------------------------------------------------------ */

static void test_bucket_boundaries(void **state)
{
	uint64_t lo, hi;

	(void)state;
	assert_int_equal(bh_hist_bucket(0), 0);
	assert_int_equal(bh_hist_bucket(1023), 0);
	assert_int_equal(bh_hist_bucket(1024), 1);
	assert_int_equal(bh_hist_bucket(1024 + 63), 1); /* 16 sub-buckets of 64 ns */
	assert_int_equal(bh_hist_bucket(1024 + 64), 2);
	assert_int_equal(bh_hist_bucket(2047), 16);
	assert_int_equal(bh_hist_bucket(2048), 17);
	assert_int_equal(bh_hist_bucket((1ull << 36) - 1), BH_HIST_BUCKETS - 2);
	assert_int_equal(bh_hist_bucket(1ull << 36), BH_HIST_BUCKETS - 1);
	assert_int_equal(bh_hist_bucket(UINT64_MAX), BH_HIST_BUCKETS - 1);
	bh_hist_bounds(1, &lo, &hi);
	assert_int_equal(lo, 1024);
	assert_int_equal(hi, 1088);
	bh_hist_bounds(0, &lo, &hi);
	assert_int_equal(lo, 0);
	assert_int_equal(hi, 1024);
	/* the last bucket is open-ended: nothing recorded is above its upper
	 * bound, whatever the exporter or the caller compares it with */
	bh_hist_bounds(BH_HIST_BUCKETS - 1, &lo, &hi);
	assert_int_equal(lo, 1ull << 36);
	assert_true(hi == UINT64_MAX);
	/* every bucket: contiguous with the next, and at most 6.25% wide */
	for (unsigned b = 1; b < BH_HIST_BUCKETS - 1; b++) {
		uint64_t lo2, hi2;

		bh_hist_bounds(b, &lo, &hi);
		bh_hist_bounds(b + 1, &lo2, &hi2);
		assert_int_equal(hi, lo2);
		assert_true((double)hi / (double)lo <= 1.0625 + 1e-12);
		assert_int_equal(bh_hist_bucket(lo), b);
		assert_int_equal(bh_hist_bucket(hi - 1), b);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Quantiles against exact order statistics of known inputs: within the
 * documented 3.2% (half a bucket) of the observation at that rank. */
static void test_quantiles_within_bound(void **state)
{
	enum { N = 20000 };
	static uint64_t v[N];
	static const double qs[] = { 0.5, 0.9, 0.99, 0.999, 1.0 };
	struct bh_hist h;
	uint64_t x = 88172645463325252ull;

	(void)state;
	memset(&h, 0, sizeof(h));
	for (int i = 0; i < N; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift */
		v[i] = 2000 + x % (50 * BH_MSEC);     /* 2 us .. 50 ms */
		bh_hist_record(&h, v[i]);
	}
	qsort(v, N, sizeof(v[0]), cmp_u64);
	assert_int_equal(h.count, N);
	for (unsigned k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
		size_t rank = (size_t)(qs[k] * N + 0.999999);
		double exact = (double)v[rank - 1], est = (double)bh_hist_quantile(&h, qs[k]);

		assert_true(est >= exact * (1 - 0.0325) && est <= exact * (1 + 0.0325));
	}
	/* a point mass: every quantile answers the same bucket middle */
	memset(&h, 0, sizeof(h));
	for (int i = 0; i < 100; i++)
		bh_hist_record(&h, 5 * BH_MSEC);
	uint64_t lo, hi;
	bh_hist_bounds(bh_hist_bucket(5 * BH_MSEC), &lo, &hi);
	assert_int_equal(bh_hist_quantile(&h, 0.5), lo + (hi - lo) / 2);
	assert_int_equal(bh_hist_quantile(&h, 0.999), lo + (hi - lo) / 2);
	assert_int_equal(h.sum_ns, 100 * 5 * BH_MSEC);
	/* no quantile is NaN: no estimate, rather than a rank cast from NaN */
	assert_int_equal(bh_hist_quantile(&h, NAN), 0);
	assert_int_equal(bh_hist_quantile(&h, -NAN), 0);
	memset(&h, 0, sizeof(h));
	assert_int_equal(bh_hist_quantile(&h, 0.5), 0); /* empty */
}

static void test_merge_equals_recording_all(void **state)
{
	struct bh_hist a, b, all;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&all, 0, sizeof(all));
	for (uint64_t i = 1; i < 5000; i++) {
		uint64_t ns = i * i * 37;

		bh_hist_record(i % 3 ? &a : &b, ns);
		bh_hist_record(&all, ns);
	}
	bh_hist_merge(&a, &b);
	assert_memory_equal(&a, &all, sizeof(all));
}

/* ---- waits and holds, on a fake clock ------------------------------------- */

static int hook_grant_after_5ms(struct fake_sync *f, unsigned call)
{
	(void)call;
	f->now += 5 * BH_MSEC;
	assert_int_equal(bh_release(f->bh, 1), 0);
	return 0;
}

static int hook_timeout_after_7ms(struct fake_sync *f, unsigned call)
{
	(void)call;
	f->now += 7 * BH_MSEC;
	return -ETIMEDOUT;
}

static void assert_one_in_bucket_of(const struct bh_hist *h, uint64_t ns)
{
	assert_int_equal(h->count, 1);
	assert_int_equal(h->sum_ns, ns);
	assert_int_equal(h->buckets[bh_hist_bucket(ns)], 1);
}

static void test_wait_histograms(void **state)
{
	bulkhead_t *bh = make_bh(1, 4, BH_FAIR);
	struct fake_sync f;
	struct bh_stats st;

	(void)state;
	fake_install(&f, bh, hook_grant_after_5ms);
	assert_int_equal(bh_try_acquire(bh, 1), 0); /* fast path: no wait recorded */
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
	f.hook = hook_timeout_after_7ms;
	assert_int_equal(bh_acquire(bh, 1, f.now + 10 * BH_MSEC), -ETIMEDOUT);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY); /* rejected at once: no wait */
	bh_stats(bh, &st);
	assert_one_in_bucket_of(&st.wait, 5 * BH_MSEC);
	assert_one_in_bucket_of(&st.wait_failed, 7 * BH_MSEC);
	assert_int_equal(st.hold.count, 0); /* not tracked */
	bh_destroy(bh);
}

static void record_nothing(struct bh_async *node, int result)
{
	(void)node;
	(void)result;
}

static void test_async_waits_recorded(void **state)
{
	bulkhead_t *bh = make_bh(1, 4, 0);
	struct fake_sync f;
	struct bh_async a, b;
	struct bh_stats st;

	(void)state;
	fake_install(&f, bh, hook_timeout_after_7ms);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire_async(bh, &a, 1, record_nothing, NULL), 1);
	assert_int_equal(bh_acquire_async(bh, &b, 1, record_nothing, NULL), 1);
	f.now += 3 * BH_MSEC;
	assert_int_equal(bh_release(bh, 1), 0); /* a granted after 3 ms */
	f.now += 1 * BH_MSEC;
	assert_int_equal(bh_cancel_async(bh, &b), 1); /* b gave up after 4 ms */
	bh_stats(bh, &st);
	assert_one_in_bucket_of(&st.wait, 3 * BH_MSEC);
	assert_one_in_bucket_of(&st.wait_failed, 4 * BH_MSEC);
	bh_destroy(bh);
}

static void *acquire_one(void *bh)
{
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	return NULL;
}

static void test_hold_tracking(void **state)
{
	bulkhead_t *bh = make_bh(4, 4, BH_TRACK_HOLD);
	struct fake_sync f;
	struct bh_stats st;

	(void)state;
	fake_install(&f, bh, hook_timeout_after_7ms);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	f.now += 2 * BH_MSEC;
	assert_int_equal(bh_release(bh, 1), 0); /* a 2 ms hold */
	/* nested: the thread's holding spans both, measured once */
	assert_int_equal(bh_acquire(bh, 2, BH_FOREVER), 0);
	f.now += 1 * BH_MSEC;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	f.now += 1 * BH_MSEC;
	assert_int_equal(bh_release(bh, 1), 0);
	f.now += 1 * BH_MSEC;
	assert_int_equal(bh_release(bh, 2), 0); /* a 3 ms hold */
	/* a release of permits another thread took: not measured */
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, acquire_one, bh), 0);
	pthread_join(t, NULL);
	f.now += 1 * BH_MSEC;
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(stats_of(bh).in_flight, 0);
	bh_record_hold(bh, 40 * BH_MSEC); /* measured by the caller */
	bh_stats(bh, &st);
	assert_int_equal(st.hold.count, 3);
	assert_int_equal(st.hold.sum_ns, (2 + 3 + 40) * BH_MSEC);
	assert_int_equal(st.hold.buckets[bh_hist_bucket(2 * BH_MSEC)], 1);
	assert_int_equal(st.hold.buckets[bh_hist_bucket(3 * BH_MSEC)], 1);
	assert_int_equal(st.hold.buckets[bh_hist_bucket(40 * BH_MSEC)], 1);
	bh_destroy(bh);

	/* without BH_TRACK_HOLD nothing is recorded, not even by hand */
	bh = make_bh(4, 4, 0);
	bh_record_hold(bh, BH_MSEC);
	bh_stats(bh, &st);
	assert_int_equal(st.hold.count, 0);
	bh_destroy(bh);
}

/* A thread that exits holding a permit leaves its slot to the next thread
 * given its index: that thread's holds are measured afresh. */
static void *take_and_exit(void *bh)
{
	assert_int_equal(bh_try_acquire(bh, 1), 0); /* held = 1, never released here */
	return NULL;
}

static void *hold_once(void *bh)
{
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	return NULL;
}

static void test_hold_slot_recycled(void **state)
{
	bulkhead_t *bh = make_bh(4, 0, BH_TRACK_HOLD);
	pthread_t t;

	(void)state;
	for (int i = 0; i < 4; i++) { /* indices are reused lowest-first */
		assert_int_equal(pthread_create(&t, NULL, i % 2 ? hold_once : take_and_exit, bh), 0);
		pthread_join(t, NULL);
	}
	assert_int_equal(stats_of(bh).hold.count, 2);
	assert_int_equal(stats_of(bh).in_flight, 2);
	bh_destroy(bh);
}

/* More live threads than the bulkhead has slots: the threads beyond them
 * count on the shared slot, and still have their holds measured (a hold
 * needs the thread's own count, kept by thread index, not in a slot). */
static void *ten_holds_without_a_slot(void *p)
{
	bulkhead_t *bh = p;

	for (int i = 0; i < 10; i++) {
		assert_int_equal(bh_try_acquire(bh, 1), 0);
		assert_int_equal(bh_release(bh, 1), 0);
	}
	assert_true(bhi_tindex - 1u >= bh->nslots); /* the case under test */
	return NULL;
}

static void test_hold_without_a_slot(void **state)
{
	bulkhead_t *bh = make_bh(4, 0, BH_TRACK_HOLD);
	struct parked_threads k;
	pthread_t t;

	(void)state;
	park_threads(&k, bh->nslots + 1); /* every slot's index is taken by a live thread */
	assert_int_equal(pthread_create(&t, NULL, ten_holds_without_a_slot, bh), 0);
	pthread_join(t, NULL);
	unpark_threads(&k);
	assert_int_equal(stats_of(bh).hold.count, 10);
	assert_int_equal(stats_of(bh).acquired, 10);
	bh_destroy(bh);
}

/* Hold times are recorded in shards picked by thread index: stats merge
 * every shard, so a hold recorded by any thread is counted once. The
 * threads live together until each has recorded, so their indexes differ
 * (the lowest free ones, consecutive: every shard is hit). */
struct shard_holds {
	bulkhead_t *bh;
	pthread_barrier_t all_in;
};

static void *one_hold_then_wait(void *arg)
{
	struct shard_holds *sh = arg;

	assert_int_equal(bh_try_acquire(sh->bh, 1), 0);
	assert_int_equal(bh_release(sh->bh, 1), 0);
	pthread_barrier_wait(&sh->all_in);
	return NULL;
}

static void test_hold_counted_from_every_shard(void **state)
{
	enum { N = 2 * BHI_HOLD_SHARDS };
	struct shard_holds sh = { .bh = make_bh(N, 0, BH_TRACK_HOLD) };
	pthread_t t[N];

	(void)state;
	pthread_barrier_init(&sh.all_in, NULL, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(pthread_create(&t[i], NULL, one_hold_then_wait, &sh), 0);
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&sh.all_in);
	assert_int_equal(stats_of(sh.bh).acquired, N);
	assert_int_equal(stats_of(sh.bh).hold.count, N);
	bh_destroy(sh.bh);
}

/* A permit this thread took and another thread gave back leaves this
 * thread's own count one too high: its next take finds the count larger
 * than the bulkhead has in flight, and starts afresh, so its later holds
 * are measured. */
static void *release_one(void *bh)
{
	assert_int_equal(bh_release(bh, 1), 0);
	return NULL;
}

static void test_hold_after_release_elsewhere(void **state)
{
	bulkhead_t *bh = make_bh(4, 0, BH_TRACK_HOLD);
	struct fake_sync f;
	pthread_t t;

	(void)state;
	fake_install(&f, bh, NULL);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, release_one, bh), 0);
	pthread_join(t, NULL); /* measures nothing */
	for (int i = 0; i < 5; i++) {
		assert_int_equal(bh_try_acquire(bh, 1), 0);
		f.now += BH_MSEC;
		assert_int_equal(bh_release(bh, 1), 0);
	}
	/* nested, with another thread's permit in flight: one hold of 3 ms */
	assert_int_equal(pthread_create(&t, NULL, acquire_one, bh), 0);
	pthread_join(t, NULL);
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	f.now += BH_MSEC;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	f.now += 2 * BH_MSEC;
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_release(bh, 2), 0);
	assert_int_equal(stats_of(bh).hold.count, 6);
	assert_int_equal(stats_of(bh).hold.sum_ns, 8 * BH_MSEC);
	assert_int_equal(stats_of(bh).in_flight, 1);
	bh_destroy(bh);
}

static void test_no_stats_flag(void **state)
{
	bulkhead_t *bh = make_bh(1, 0, BH_NO_STATS);
	struct bh_stats st;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	bh_stats(bh, &st);
	assert_int_equal(st.acquired, 0);
	assert_int_equal(st.released, 0);
	assert_int_equal(st.rejected, 0);
	assert_int_equal(st.over_released, 1); /* slow-path counters stay */
	assert_int_equal(st.in_flight, 0);     /* gauges stay */
	bh_destroy(bh);
}

/* ---- names ---------------------------------------------------------------------- */

static void test_names(void **state)
{
	char longname[BH_NAME_MAX + 1];
	struct bh_config cfg = { .max_concurrent = 1 };
	bulkhead_t *a, *b;

	(void)state;
	assert_int_equal(bh_create(&cfg, &a), 0);
	assert_int_equal(bh_create(&cfg, &b), 0);
	assert_int_equal(strncmp(bh_name(a), "bulkhead-", 9), 0);
	assert_string_not_equal(bh_name(a), bh_name(b)); /* defaults stay unique */
	bh_destroy(a);
	bh_destroy(b);
	memset(longname, 'x', sizeof(longname));
	longname[BH_NAME_MAX] = '\0';
	cfg.name = longname;
	assert_int_equal(bh_create(&cfg, &a), -ENAMETOOLONG);
	longname[BH_NAME_MAX - 1] = '\0'; /* 63 bytes: fits */
	assert_int_equal(bh_create(&cfg, &a), 0);
	assert_string_equal(bh_name(a), longname);
	longname[0] = 'y'; /* the name was copied */
	assert_int_equal(bh_name(a)[0], 'x');
	bh_destroy(a);
}

/* ---- Prometheus text, parsed back ---------------------------------------------- */

#define MAX_SAMPLES 512
struct sample {
	char metric[64];
	char name[BH_NAME_MAX];
	char le[32];
	double value;
};

/* Parses `metric{name="...",le="..."} value` lines, unescaping the name;
 * checks that every family has HELP and TYPE before its samples. */
static int parse_prometheus(const char *text, struct sample *out)
{
	char typed[64] = "";
	int n = 0;

	for (const char *p = text; *p;) {
		const char *eol = strchr(p, '\n');

		assert_non_null(eol); /* every line ends with a newline */
		if (*p == '#') {
			char kind[8], fam[64];

			assert_int_equal(sscanf(p, "# %7s %63s", kind, fam), 2);
			assert_true(!strcmp(kind, "HELP") || !strcmp(kind, "TYPE"));
			if (!strcmp(kind, "TYPE"))
				strcpy(typed, fam);
			p = eol + 1;
			continue;
		}
		struct sample *s = &out[n++];
		const char *brace = strchr(p, '{');

		assert_true(n < MAX_SAMPLES);
		memset(s, 0, sizeof(*s));
		assert_non_null(brace);
		memcpy(s->metric, p, (size_t)(brace - p));
		assert_int_equal(strncmp(s->metric, typed, strlen(typed)), 0);
		assert_int_equal(strncmp(brace, "{name=\"", 7), 0);
		p = brace + 7;
		for (size_t i = 0; *p != '"'; i++) {
			assert_true(i < sizeof(s->name) - 1);
			if (*p == '\\') {
				p++;
				s->name[i] = *p == 'n' ? '\n' : *p;
			} else {
				s->name[i] = *p;
			}
			p++;
		}
		p++;
		if (!strncmp(p, ",le=\"", 5)) {
			const char *q = strchr(p + 5, '"');

			memcpy(s->le, p + 5, (size_t)(q - p - 5));
			p = q + 1;
		}
		assert_int_equal(strncmp(p, "} ", 2), 0);
		s->value = strtod(p + 2, NULL);
		p = eol + 1;
	}
	return n;
}

static const struct sample *find(const struct sample *s, int n, const char *metric,
				 const char *name, const char *le)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s[i].metric, metric) && !strcmp(s[i].name, name) &&
		    !strcmp(s[i].le, le ? le : ""))
			return &s[i];
	fail_msg("no sample %s{name=%s,le=%s}", metric, name, le ? le : "");
	return NULL;
}

static void check_histogram(const struct sample *s, int n, const char *metric, const char *name,
			    const struct bh_hist *h)
{
	char bucket[80];
	double last = 0;
	int seen = 0;

	snprintf(bucket, sizeof(bucket), "%s_bucket", metric);
	for (int i = 0; i < n; i++) {
		if (strcmp(s[i].metric, bucket) || strcmp(s[i].name, name))
			continue;
		assert_true(s[i].value >= last); /* cumulative */
		last = s[i].value;
		seen++;
	}
	assert_int_equal(seen, BH_HIST_MAX_SHIFT - BH_HIST_MIN_SHIFT + 2);
	assert_true(find(s, n, bucket, name, "+Inf")->value == (double)h->count);
	snprintf(bucket, sizeof(bucket), "%s_count", metric);
	assert_true(find(s, n, bucket, name, NULL)->value == (double)h->count);
	snprintf(bucket, sizeof(bucket), "%s_sum", metric);
	assert_true(fabs(find(s, n, bucket, name, NULL)->value - (double)h->sum_ns / 1e9) < 1e-6);
}

static int hook_grant_after_3ms(struct fake_sync *f, unsigned call)
{
	(void)call;
	f->now += 3 * BH_MSEC;
	assert_int_equal(bh_release(f->bh, 1), 0);
	return 0;
}

static void test_prometheus_round_trip(void **state)
{
	static const char *weird = "pay\"ment\\eu\nwest";
	struct bh_config cfg = { .max_concurrent = 3, .queue_capacity = 2, .name = weird };
	bulkhead_t *bhs[2];
	struct fake_sync f;
	static char text[256 * 1024];
	static struct sample s[MAX_SAMPLES];
	struct bh_stats st[2];

	(void)state;
	assert_int_equal(bh_create(&cfg, &bhs[0]), 0);
	cfg.name = "inventory";
	cfg.flags = BH_TRACK_HOLD | BH_FAIR;
	assert_int_equal(bh_create(&cfg, &bhs[1]), 0);
	fake_install(&f, bhs[1], hook_grant_after_3ms);
	assert_int_equal(bh_try_acquire(bhs[0], 2), 0);
	assert_int_equal(bh_try_acquire(bhs[0], 2), -EBUSY);
	assert_int_equal(bh_try_acquire(bhs[1], 3), 0);
	assert_int_equal(bh_acquire(bhs[1], 1, BH_FOREVER), 0); /* waits 3 ms */
	f.now += 9 * BH_MSEC;
	assert_int_equal(bh_release(bhs[1], 3), 0); /* held from t0 to t0+12 ms */

	struct bh_metric_set set = { .bulkheads = bhs, .n_bulkheads = 2 };
	ssize_t len = bh_metrics_prometheus(&set, text, sizeof(text));
	assert_true(len > 0 && len < (ssize_t)sizeof(text));
	assert_int_equal(strlen(text), (size_t)len);
	int n = parse_prometheus(text, s);
	bh_stats(bhs[0], &st[0]);
	bh_stats(bhs[1], &st[1]);
	for (int i = 0; i < 2; i++) {
		const char *name = bh_name(bhs[i]);

		assert_true(find(s, n, "bulkhead_limit", name, NULL)->value == 3);
		assert_true(find(s, n, "bulkhead_in_flight", name, NULL)->value ==
			    (double)st[i].in_flight);
		assert_true(find(s, n, "bulkhead_acquired_total", name, NULL)->value ==
			    (double)st[i].acquired);
		assert_true(find(s, n, "bulkhead_rejected_total", name, NULL)->value ==
			    (double)st[i].rejected);
		check_histogram(s, n, "bulkhead_wait_seconds", name, &st[i].wait);
		check_histogram(s, n, "bulkhead_wait_failed_seconds", name, &st[i].wait_failed);
	}
	assert_string_equal(s[0].name, weird); /* escaped, and back */
	assert_true(find(s, n, "bulkhead_rejected_total", weird, NULL)->value == 1);
	check_histogram(s, n, "bulkhead_hold_seconds", "inventory", &st[1].hold);
	assert_int_equal(st[1].hold.count, 1);
	/* 3 ms wait: counted from le=4.194303 ms up, not at 2.097151 ms */
	assert_true(find(s, n, "bulkhead_wait_seconds_bucket", "inventory", "0.004194303")->value ==
		    1);
	assert_true(find(s, n, "bulkhead_wait_seconds_bucket", "inventory", "0.002097151")->value ==
		    0);
	for (int i = 0; i < n; i++) /* no hold histogram for the untracked one */
		assert_false(!strcmp(s[i].metric, "bulkhead_hold_seconds_count") &&
			     !strcmp(s[i].name, weird));

	/* a short buffer: cut, NUL-terminated, and the full length reported */
	char small[100];
	assert_int_equal(bh_metrics_prometheus(&set, small, sizeof(small)), len);
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_memory_equal(small, text, sizeof(small) - 1);
	assert_int_equal(bh_metrics_prometheus(&set, NULL, 0), len);
	/* the stream form writes the same text */
	FILE *tmp = tmpfile();
	static char back[256 * 1024];
	assert_non_null(tmp);
	assert_int_equal(bh_metrics_prometheus_file(&set, tmp), 0);
	rewind(tmp);
	assert_int_equal(fread(back, 1, sizeof(back), tmp), (size_t)len);
	assert_memory_equal(back, text, (size_t)len);
	fclose(tmp);
	bh_destroy(bhs[0]);
	bh_destroy(bhs[1]);
}

/* An "le" value as exact nanoseconds: whole seconds, then up to 9 digits. */
static uint64_t le_ns(const char *le)
{
	char *end;
	uint64_t ns = strtoull(le, &end, 10) * BH_SEC, scale = BH_SEC;

	if (*end == '.')
		for (const char *p = end + 1; *p; p++) {
			assert_true(*p >= '0' && *p <= '9' && scale > 1);
			scale /= 10;
			ns += (uint64_t)(*p - '0') * scale;
		}
	else
		assert_int_equal(*end, '\0');
	return ns;
}

/* Observations exactly on and beside every power of two: each cumulative
 * bucket counts exactly the observations less than or equal to its "le". */
static void test_prometheus_bounds_exact(void **state)
{
	struct bh_config cfg = { .max_concurrent = 1, .name = "edges", .flags = BH_TRACK_HOLD };
	static uint64_t obs[1 + 3 * (BH_HIST_MAX_SHIFT - BH_HIST_MIN_SHIFT + 3)];
	static char text[256 * 1024];
	static struct sample s[MAX_SAMPLES];
	unsigned nobs = 0, seen = 0;
	bulkhead_t *bh;

	(void)state;
	assert_int_equal(bh_create(&cfg, &bh), 0);
	obs[nobs++] = 0;
	for (unsigned k = BH_HIST_MIN_SHIFT - 1; k <= BH_HIST_MAX_SHIFT + 1; k++) {
		obs[nobs++] = (1ull << k) - 1;
		obs[nobs++] = 1ull << k;
		obs[nobs++] = (1ull << k) + 1;
	}
	for (unsigned i = 0; i < nobs; i++)
		bh_record_hold(bh, obs[i]);
	struct bh_metric_set set = { .bulkheads = &bh, .n_bulkheads = 1 };
	ssize_t len = bh_metrics_prometheus(&set, text, sizeof(text));
	assert_true(len > 0 && len < (ssize_t)sizeof(text));
	int n = parse_prometheus(text, s);
	for (int i = 0; i < n; i++) {
		uint64_t le, want = 0;

		if (strcmp(s[i].metric, "bulkhead_hold_seconds_bucket") || !strcmp(s[i].le, "+Inf"))
			continue;
		le = le_ns(s[i].le);
		for (unsigned j = 0; j < nobs; j++)
			want += obs[j] <= le;
		if (s[i].value != (double)want)
			fail_msg("le=\"%s\": %.0f observations, %llu are <= %llu ns", s[i].le,
				 s[i].value, (unsigned long long)want, (unsigned long long)le);
		seen++;
	}
	assert_int_equal(seen, BH_HIST_MAX_SHIFT - BH_HIST_MIN_SHIFT + 1);
	/* 0, 511, 512, 513 and 1023 ns; 1024 ns is above */
	assert_true(find(s, n, "bulkhead_hold_seconds_bucket", "edges", "0.000001023")->value == 5);
	assert_true(find(s, n, "bulkhead_hold_seconds_bucket", "edges", "68.719476735")->value ==
		    nobs - 5); /* 2^36, 2^36 + 1 and the three around 2^37 are above */
	assert_true(find(s, n, "bulkhead_hold_seconds_bucket", "edges", "+Inf")->value == nobs);
	bh_destroy(bh);
}

static void test_json(void **state)
{
	struct bh_config cfg = { .max_concurrent = 2, .name = "a\"b\\c\x01" };
	bulkhead_t *bh;
	char text[8192];

	(void)state;
	assert_int_equal(bh_create(&cfg, &bh), 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	struct bh_metric_set set = { .bulkheads = &bh, .n_bulkheads = 1 };
	ssize_t len = bh_metrics_json(&set, text, sizeof(text));
	assert_true(len > 0 && len < (ssize_t)sizeof(text));
	assert_non_null(strstr(text, "{\"bulkheads\":[{\"name\":\"a\\\"b\\\\c\\u0001\""));
	assert_non_null(strstr(text, "\"limit\":2,\"in_flight\":1,\"queued\":0,\"acquired\":1,"));
	assert_non_null(strstr(text, "\"wait\":{\"count\":0,"));
	assert_null(strstr(text, "\"hold\""));
	/* balanced braces and brackets outside strings */
	int depth = 0;
	bool in_str = false;
	for (const char *p = text; *p; p++) {
		if (in_str) {
			if (*p == '\\')
				p++;
			else if (*p == '"')
				in_str = false;
			continue;
		}
		if (*p == '"')
			in_str = true;
		depth += (*p == '{' || *p == '[') - (*p == '}' || *p == ']');
		assert_true(depth >= 0);
	}
	assert_int_equal(depth, 0);
	bh_destroy(bh);
}

/* JSON forbids every raw control character in a string (RFC 8259 7):
 * each of U+0001..U+001F in a name is written as its \\u escape. */
static void test_json_escapes_every_control_character(void **state)
{
	char name[32], want[32 * 6 + 16], text[8192];
	struct bh_config cfg = { .max_concurrent = 1, .name = name };
	bulkhead_t *bh;
	size_t w;

	(void)state;
	for (int c = 1; c < 0x20; c++)
		name[c - 1] = (char)c;
	name[0x1f] = '\0';
	w = (size_t)sprintf(want, "{\"name\":\"");
	for (int c = 1; c < 0x20; c++)
		w += (size_t)sprintf(want + w, "\\u%04x", c);
	sprintf(want + w, "\",");
	assert_int_equal(bh_create(&cfg, &bh), 0);
	struct bh_metric_set set = { .bulkheads = &bh, .n_bulkheads = 1 };
	ssize_t len = bh_metrics_json(&set, text, sizeof(text));
	assert_true(len > 0 && len < (ssize_t)sizeof(text));
	assert_non_null(strstr(text, want));
	for (const char *p = text; *p; p++)
		assert_true((unsigned char)*p >= 0x20 || *p == '\n');
	bh_destroy(bh);
}

/* Pools export their snapshot; the text parses back to bh_pool_stats. */
static void run_nothing(struct bh_task *t)
{
	(void)t;
}

static void test_pool_export(void **state)
{
	struct bh_pool_config cfg = { .name = "dns\"lookup", .core_threads = 1, .max_threads = 2,
				      .queue_capacity = 3 };
	struct bh_task tasks[5];
	bh_pool_t *pool;
	bulkhead_t *bh = make_bh(2, 0, 0);
	static char text[128 * 1024];
	static struct sample s[MAX_SAMPLES];
	struct bh_pool_stats ps;

	(void)state;
	assert_int_equal(bh_pool_create(&cfg, &pool), 0);
	for (int i = 0; i < 5; i++) {
		tasks[i] = (struct bh_task){ .run = run_nothing };
		assert_int_equal(bh_pool_call(pool, &tasks[i], BH_FOREVER), 0);
	}
	struct bh_metric_set set = { .bulkheads = &bh, .n_bulkheads = 1, .pools = &pool,
				     .n_pools = 1 };
	ssize_t len = bh_metrics_prometheus(&set, text, sizeof(text));
	assert_true(len > 0 && len < (ssize_t)sizeof(text));
	int n = parse_prometheus(text, s);
	bh_pool_stats(pool, &ps);
	const char *name = bh_pool_name(pool);
	assert_true(find(s, n, "bulkhead_pool_completed_total", name, NULL)->value == 5);
	assert_true(find(s, n, "bulkhead_pool_submitted_total", name, NULL)->value ==
		    (double)ps.submitted);
	assert_true(find(s, n, "bulkhead_pool_max_threads", name, NULL)->value == 2);
	assert_true(find(s, n, "bulkhead_pool_queue_capacity", name, NULL)->value == 3);
	assert_true(find(s, n, "bulkhead_pool_threads", name, NULL)->value == (double)ps.alive);
	assert_true(find(s, n, "bulkhead_limit", bh_name(bh), NULL)->value == 2);
	len = bh_metrics_json(&set, text, sizeof(text));
	assert_true(len > 0 && len < (ssize_t)sizeof(text));
	assert_non_null(strstr(text, "],\"pools\":[{\"name\":\"dns\\\"lookup\",\"threads\":"));
	assert_non_null(strstr(text, "\"completed\":5,"));
	/* a NULL pool is bad input */
	bh_pool_t *none = NULL;
	set.pools = &none;
	assert_int_equal(bh_metrics_prometheus(&set, text, sizeof(text)), -EINVAL);
	assert_int_equal(bh_pool_shutdown(pool, BH_FOREVER), 0);
	assert_int_equal(bh_pool_destroy(pool), 0);
	bh_destroy(bh);
}

/* Names that are not UTF-8 (a stray byte, a sequence cut short) must not
 * make the whole text unreadable: label values and JSON strings are UTF-8,
 * with U+FFFD for what is not. A pool name cut to its 15 bytes is cut
 * between characters. */
static bool valid_utf8(const unsigned char *s)
{
	while (*s) {
		int n = *s < 0x80 ? 1 : *s >= 0xc2 && *s < 0xe0 ? 2 : *s >= 0xe0 && *s < 0xf0 ? 3
			: *s >= 0xf0 && *s < 0xf5 ? 4 : 0;

		if (n == 0)
			return false;
		for (int i = 1; i < n; i++)
			if ((s[i] & 0xc0) != 0x80)
				return false;
		s += n;
	}
	return true;
}

/* Every field of bh_pool_stats is in a pool's JSON object, under its
 * Prometheus name less the prefix and _total, with the value stats give. */
static sem_t pool_go;

static void run_until_go(struct bh_task *t)
{
	(void)t;
	sem_wait(&pool_go);
}

static uint64_t json_pool_field(const char *text, const char *key)
{
	char k[64];
	const char *p = strstr(text, "\"pools\":[");

	assert_non_null(p);
	snprintf(k, sizeof(k), "\"%s\":", key);
	p = strstr(p, k);
	assert_non_null(p);
	return strtoull(p + strlen(k), NULL, 10);
}

static void test_json_pool_has_every_field(void **state)
{
	struct bh_pool_config cfg = { .name = "p", .max_threads = 1 };
	struct bh_task a = { .run = run_until_go }, b = { .run = run_nothing };
	struct bh_pool_stats ps;
	static char text[16 * 1024];
	bh_pool_t *pool;

	(void)state;
	sem_init(&pool_go, 0, 0);
	assert_int_equal(bh_pool_create(&cfg, &pool), 0);
	assert_int_equal(bh_pool_submit(pool, &a), 0);
	assert_int_equal(bh_pool_submit(pool, &b), -EBUSY); /* one rejection */
	sem_post(&pool_go);
	assert_int_equal(bh_pool_shutdown(pool, BH_FOREVER), 0); /* stats stand still */
	bh_pool_stats(pool, &ps);
	assert_int_equal(ps.rejected, 1);
	struct bh_metric_set set = { .pools = &pool, .n_pools = 1 };
	ssize_t len = bh_metrics_json(&set, text, sizeof(text));
	assert_true(len > 0 && len < (ssize_t)sizeof(text));
	assert_int_equal(json_pool_field(text, "threads"), ps.alive);
	assert_int_equal(json_pool_field(text, "active_threads"), ps.active);
	assert_int_equal(json_pool_field(text, "queued"), ps.queued);
	assert_int_equal(json_pool_field(text, "largest_threads"), ps.largest);
	assert_int_equal(json_pool_field(text, "abandoned_running"), ps.abandoned_running);
	assert_int_equal(json_pool_field(text, "core_threads"), ps.core_threads);
	assert_int_equal(json_pool_field(text, "max_threads"), ps.max_threads);
	assert_int_equal(json_pool_field(text, "queue_capacity"), ps.queue_capacity);
	assert_int_equal(json_pool_field(text, "submitted"), ps.submitted);
	assert_int_equal(json_pool_field(text, "completed"), ps.completed);
	assert_int_equal(json_pool_field(text, "abandoned"), ps.abandoned);
	assert_int_equal(json_pool_field(text, "discarded"), ps.discarded);
	assert_int_equal(json_pool_field(text, "caller_ran"), ps.caller_ran);
	assert_int_equal(json_pool_field(text, "rejected"), ps.rejected);
	assert_int_equal(bh_pool_destroy(pool), 0);
	sem_destroy(&pool_go);
}

static void test_export_utf8(void **state)
{
	struct bh_config cfg = { .max_concurrent = 1, .name = "caf\xc3\xa9-\xff-\xe2\x82" };
	struct bh_pool_config pc = { .name = "\xd0\xbf\xd0\xbb\xd0\xb0\xd1\x82\xd1\x91\xd0\xb6"
					     "\xd0\xbd\xd1\x8b\xd0\xb9", /* 18 bytes */
				     .max_threads = 1 };
	static char text[128 * 1024];
	bulkhead_t *bh;
	bh_pool_t *pool;

	(void)state;
	assert_int_equal(bh_create(&cfg, &bh), 0);
	assert_int_equal(bh_pool_create(&pc, &pool), 0);
	assert_int_equal(strlen(bh_pool_name(pool)), 14); /* 7 whole characters */
	assert_true(valid_utf8((const unsigned char *)bh_pool_name(pool)));
	struct bh_metric_set set = { .bulkheads = &bh, .n_bulkheads = 1, .pools = &pool,
				     .n_pools = 1 };
	ssize_t len = bh_metrics_prometheus(&set, text, sizeof(text));
	assert_true(len > 0 && len < (ssize_t)sizeof(text));
	assert_true(valid_utf8((const unsigned char *)text));
	assert_non_null(strstr(text, "bulkhead_limit{name=\"caf\xc3\xa9-\xef\xbf\xbd-"
				     "\xef\xbf\xbd\xef\xbf\xbd\"} 1\n"));
	len = bh_metrics_json(&set, text, sizeof(text));
	assert_true(len > 0 && len < (ssize_t)sizeof(text));
	assert_true(valid_utf8((const unsigned char *)text));
	assert_non_null(strstr(text, "{\"name\":\"caf\xc3\xa9-\\ufffd-\\ufffd\\ufffd\","));
	assert_int_equal(bh_pool_destroy(pool), 0);
	bh_destroy(bh);
}

static void test_export_bad_input(void **state)
{
	char buf[16];
	bulkhead_t *none[1] = { NULL };
	struct bh_metric_set bad = { .bulkheads = none, .n_bulkheads = 1 };
	struct bh_metric_set empty = { 0 };

	(void)state;
	assert_int_equal(bh_metrics_prometheus(NULL, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(bh_metrics_prometheus(&bad, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(bh_metrics_json(&empty, NULL, 5), -EINVAL);
	assert_int_equal(bh_metrics_prometheus_file(&empty, NULL), -EINVAL);
	/* a NULL pool, or a NULL array with a count, is bad input in every form */
	bh_pool_t *no_pool[1] = { NULL };
	struct bh_metric_set bad_pool = { .pools = no_pool, .n_pools = 1 };
	struct bh_metric_set no_array = { .n_bulkheads = 1 }, no_pools = { .n_pools = 2 };
	FILE *f = tmpfile();
	assert_non_null(f);
	for (int i = 0; i < 3; i++) {
		const struct bh_metric_set *set = i == 0 ? &bad_pool : i == 1 ? &no_array : &no_pools;

		assert_int_equal(bh_metrics_prometheus(set, buf, sizeof(buf)), -EINVAL);
		assert_int_equal(bh_metrics_json(set, buf, sizeof(buf)), -EINVAL);
		assert_int_equal(bh_metrics_prometheus_file(set, f), -EINVAL);
		assert_int_equal(bh_metrics_json_file(set, f), -EINVAL);
	}
	assert_int_equal(ftell(f), 0); /* nothing written */
	fclose(f);
	assert_int_equal(bh_metrics_prometheus(&empty, buf, sizeof(buf)), 0);
	assert_int_equal(bh_metrics_json(&empty, buf, sizeof(buf)), 28);
	assert_string_equal(buf, "{\"bulkheads\":[]"); /* cut to fit */
}

/* Counters and histograms add up when many threads hammer one bulkhead. */
struct hammer {
	bulkhead_t *bh;
	long ok, busy, timeout;
};

static void *hammer_main(void *p)
{
	struct hammer *h = p;

	for (int i = 0; i < 3000; i++) {
		int r = bh_acquire(h->bh, 1, bh_now_ns() + (i % 3) * BH_USEC * 50);

		if (r == 0) {
			h->ok++;
			assert_int_equal(bh_release(h->bh, 1), 0);
		} else if (r == -EBUSY) {
			h->busy++;
		} else {
			assert_int_equal(r, -ETIMEDOUT);
			h->timeout++;
		}
	}
	return NULL;
}

/* The core's grant observer: every queued acquire that got its permits. */
static _Atomic uint64_t grants_seen;

static void count_grant(void *ctx, const struct bh_qlink *l)
{
	(void)ctx;
	(void)l;
	atomic_fetch_add(&grants_seen, 1);
}

static void test_counters_add_up(void **state)
{
	enum { T = 6 };
	bulkhead_t *bh = make_bh(2, 3, BH_TRACK_HOLD);
	static const struct bhi_queue_obs obs = { .granted = count_grant };
	struct hammer h[T];
	pthread_t t[T];
	long ok = 0, busy = 0, timeout = 0;
	struct bh_stats st;

	(void)state;
	atomic_store(&grants_seen, 0);
	bhi_set_queue_obs(bh, &obs); /* the real futex, observed */
	for (int i = 0; i < T; i++) {
		h[i] = (struct hammer){ .bh = bh };
		assert_int_equal(pthread_create(&t[i], NULL, hammer_main, &h[i]), 0);
	}
	for (int i = 0; i < T; i++) {
		pthread_join(t[i], NULL);
		ok += h[i].ok, busy += h[i].busy, timeout += h[i].timeout;
	}
	bh_stats(bh, &st);
	assert_int_equal(st.acquired, ok);
	assert_int_equal(st.released, ok);
	assert_int_equal(st.rejected, busy);
	assert_int_equal(st.timed_out, timeout);
	assert_int_equal(st.wait_failed.count, timeout);
	assert_int_equal(st.wait.count, atomic_load(&grants_seen)); /* granted after queueing */
	assert_int_equal(st.hold.count, ok); /* every pair was on one thread */
	assert_int_equal(st.in_flight, 0);
	bh_destroy(bh);
}

/* A buffer too small gets a prefix of the text, NUL-terminated, and the
 * length of the whole: never a byte past len, at every len. Between two
 * calls the text may grow (a counter gains a digit), so a retry sized by
 * the first call's answer can be cut too: only a loop settles it. */
static void test_export_cut_at_every_length(void **state)
{
	bulkhead_t *bh = make_bh(2, 1, BH_TRACK_HOLD);
	struct bh_metric_set set = { .bulkheads = &bh, .n_bulkheads = 1 };
	static char full[64 * 1024], buf[64 * 1024 + 16];
	ssize_t (*const fmt[2])(const struct bh_metric_set *, char *, size_t) = {
		bh_metrics_prometheus, bh_metrics_json
	};

	uint64_t pairs = 0;

	(void)state;
	for (int f = 0; f < 2; f++) {
		ssize_t n;

		/* counters at 9, then 99: one pair short of another digit */
		for (; pairs < (f ? 99 : 9); pairs++) {
			assert_int_equal(bh_try_acquire(bh, 1), 0);
			assert_int_equal(bh_release(bh, 1), 0);
		}
		n = fmt[f](&set, full, sizeof(full));

		assert_true(n > 0 && n < (ssize_t)sizeof(full));
		assert_int_equal(fmt[f](&set, NULL, 0), n);
		for (size_t len = 1; len <= (size_t)n + 1; len++) {
			memset(buf, 0x5a, len + 16);
			assert_int_equal(fmt[f](&set, buf, len), n);
			assert_int_equal(strlen(buf), len - 1 < (size_t)n ? len - 1 : (size_t)n);
			assert_memory_equal(buf, full, strlen(buf));
			for (size_t i = len; i < len + 16; i++)
				assert_int_equal(buf[i], 0x5a);
		}
		/* sized by the last answer, after a counter gained a digit */
		assert_int_equal(bh_try_acquire(bh, 1), 0);
		assert_int_equal(bh_release(bh, 1), 0);
		pairs++;
		assert_true(fmt[f](&set, buf, (size_t)n + 1) > n);
	}
	bh_destroy(bh);
}

/* ---- numbers whatever the locale --------------------------------------------- */

/* A locale whose decimal point is a comma, in effect for LC_NUMERIC: one
 * that is installed, else a minimal one compiled with localedef(1) into
 * dir (LOCPATH). false: none to be had. */
static bool comma_locale(char *dir)
{
	static const char *const installed[] = { "de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8",
						 "fr_FR.utf8", "ru_RU.UTF-8", "nl_NL.UTF-8" };
	char cmd[512], num[8];
	FILE *f;

	for (size_t i = 0; i < sizeof(installed) / sizeof(installed[0]); i++)
		if (setlocale(LC_NUMERIC, installed[i]))
			goto check;
	if (!mkdtemp(dir))
		return false;
	snprintf(cmd, sizeof(cmd), "%s/comma.src", dir);
	f = fopen(cmd, "w");
	if (!f)
		return false;
	fputs("LC_CTYPE\ncopy \"POSIX\"\nEND LC_CTYPE\nLC_NUMERIC\ndecimal_point \"<U002C>\"\n"
	      "thousands_sep \"\"\ngrouping -1\nEND LC_NUMERIC\n",
	      f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "localedef -c -i %s/comma.src -f UTF-8 %s/comma >/dev/null 2>&1",
		 dir, dir);
	if (system(cmd) == -1 || setenv("LOCPATH", dir, 1) != 0 ||
	    !setlocale(LC_NUMERIC, "comma"))
		return false;
check:
	snprintf(num, sizeof(num), "%.1f", 0.5);
	return !strcmp(num, "0,5");
}

static void test_export_numbers_ignore_locale(void **state)
{
	char dir[] = "/tmp/bh-test-locale-XXXXXX", cmd[64];
	bulkhead_t *bh = make_bh(1, 0, BH_TRACK_HOLD);
	struct bh_metric_set set = { .bulkheads = &bh, .n_bulkheads = 1 };
	static char prom[64 * 1024], json[8192];
	ssize_t np, nj;
	bool have;

	(void)state;
	bh_record_hold(bh, 1500); /* 0.0000015 s: a sum with decimals */
	have = comma_locale(dir);
	np = bh_metrics_prometheus(&set, prom, sizeof(prom));
	nj = bh_metrics_json(&set, json, sizeof(json));
	setlocale(LC_NUMERIC, "C");
	unsetenv("LOCPATH");
	if (strcmp(dir + strlen(dir) - 6, "XXXXXX")) { /* mkdtemp made it */
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
	bh_destroy(bh);
	if (!have)
		skip(); /* no locale with a decimal comma here */
	assert_true(np > 0 && np < (ssize_t)sizeof(prom));
	assert_true(nj > 0 && nj < (ssize_t)sizeof(json));
	/* a sample's value never holds a comma */
	for (const char *p = prom; (p = strstr(p, "} ")) != NULL; p++)
		assert_true(strcspn(p, ",\n") == strcspn(p, "\n"));
	assert_non_null(strstr(prom, "bulkhead_hold_seconds_sum{name=\"bulkhead-"));
	assert_non_null(strstr(prom, "} 0.0000015\n"));
	/* in the JSON, a comma only ever follows a value: never a digit's
	 * neighbour on both sides */
	for (const char *p = strchr(json, ','); p; p = strchr(p + 1, ','))
		assert_false(p > json && isdigit((unsigned char)p[-1]) &&
			     isdigit((unsigned char)p[1]));
	assert_non_null(strstr(json, "\"hold\":{\"count\":1,\"sum_seconds\":0.0000015,"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket_boundaries),
		cmocka_unit_test(test_quantiles_within_bound),
		cmocka_unit_test(test_merge_equals_recording_all),
		cmocka_unit_test(test_wait_histograms),
		cmocka_unit_test(test_async_waits_recorded),
		cmocka_unit_test(test_hold_tracking),
		cmocka_unit_test(test_hold_slot_recycled),
		cmocka_unit_test(test_hold_without_a_slot),
		cmocka_unit_test(test_hold_counted_from_every_shard),
		cmocka_unit_test(test_hold_after_release_elsewhere),
		cmocka_unit_test(test_no_stats_flag),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_prometheus_round_trip),
		cmocka_unit_test(test_prometheus_bounds_exact),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_json_escapes_every_control_character),
		cmocka_unit_test(test_pool_export),
		cmocka_unit_test(test_json_pool_has_every_field),
		cmocka_unit_test(test_export_utf8),
		cmocka_unit_test(test_export_bad_input),
		cmocka_unit_test(test_export_cut_at_every_length),
		cmocka_unit_test(test_export_numbers_ignore_locale),
		cmocka_unit_test(test_counters_add_up),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
