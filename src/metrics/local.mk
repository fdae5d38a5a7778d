# Observability: histograms live in the core (src/core/hist.c); the
# exporter, its tests, the /metrics example and the benchmark are here.
bhinclude_HEADERS += include/bulkhead/metrics.h
src_libbhcore_la_SOURCES += src/metrics/metrics.c

if HAVE_CMOCKA
check_PROGRAMS += tests/test_metrics
tests_test_metrics_SOURCES = tests/test_metrics.c tests/testutil.h
tests_test_metrics_CFLAGS = $(TEST_CFLAGS)
tests_test_metrics_LDADD = $(TEST_LIBS)
TESTS += tests/test_metrics
endif

noinst_PROGRAMS += examples/metrics_http
examples_metrics_http_SOURCES = examples/metrics_http.c
examples_metrics_http_LDADD = src/libbulkhead.la
TESTS += tests/test_metrics_http.sh
EXTRA_DIST += tests/test_metrics_http.sh

noinst_PROGRAMS += bench/bench_metrics
bench_bench_metrics_SOURCES = bench/bench_metrics.c
bench_bench_metrics_CFLAGS = $(AM_CFLAGS) -O2
bench_bench_metrics_LDADD = src/libbulkhead.la

BH_MAN_PAGES += \
	docs/man/bh_name.3 \
	docs/man/bh_record_hold.3 \
	docs/man/bh_hist_record.3 \
	docs/man/bh_hist_merge.3 \
	docs/man/bh_hist_quantile.3 \
	docs/man/bh_hist_bucket.3 \
	docs/man/bh_hist_bounds.3 \
	docs/man/bh_metrics_prometheus.3 \
	docs/man/bh_metrics_prometheus_file.3 \
	docs/man/bh_metrics_json.3 \
	docs/man/bh_metrics_json_file.3
