# Adaptive limits: a controller that moves a bulkhead's limit from the
# latency it measures. Part of libbulkhead itself, always built.
bhinclude_HEADERS += include/bulkhead/adaptive.h
src_libbhcore_la_SOURCES += \
	src/adaptive/adaptive.c \
	src/adaptive/algo.c \
	src/adaptive/algo.h \
	src/adaptive/attach.c \
	src/adaptive/metrics.c \
	src/adaptive/own.c \
	src/adaptive/published.c \
	src/adaptive/bha.h
dist_doc_DATA += docs/adaptive.md

# The simulator (virtual time, a dependency with a concurrency knee) and
# the scenarios with pass bands; the unit and thread tests.
ADAPTIVE_SIM = tests/adaptive_sim.c tests/adaptive_sim.h tests/adaptive_scenarios.h
ADAPTIVE_SIM_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
ADAPTIVE_SIM_LIBS = src/libbhcore.la tools/libbhtools.la

if HAVE_CMOCKA
check_PROGRAMS += tests/test_adaptive_sim
tests_test_adaptive_sim_SOURCES = tests/test_adaptive_sim.c $(ADAPTIVE_SIM)
tests_test_adaptive_sim_CPPFLAGS = $(ADAPTIVE_SIM_CPPFLAGS)
tests_test_adaptive_sim_CFLAGS = $(TEST_CFLAGS)
tests_test_adaptive_sim_LDADD = $(ADAPTIVE_SIM_LIBS) $(CMOCKA_LIBS)
# One thread on a virtual clock: ThreadSanitizer has nothing to look at and
# makes it twenty times slower.
if !BH_TSAN
TESTS += tests/test_adaptive_sim
endif
endif

if HAVE_LIBURING
if HAVE_CMOCKA
check_PROGRAMS += tests/test_adaptive_uring
tests_test_adaptive_uring_SOURCES = tests/test_adaptive_uring.c tests/testutil.h
tests_test_adaptive_uring_CFLAGS = $(TEST_CFLAGS) $(LIBURING_CFLAGS)
tests_test_adaptive_uring_LDADD = src/libbhcore.la $(LIBURING_LIBS) $(CMOCKA_LIBS)
TESTS += tests/test_adaptive_uring
endif
else
EXTRA_DIST += tests/test_adaptive_uring.c
endif

BH_MAN_PAGES += \
	docs/man/bh_adaptive_attach.3 \
	docs/man/bh_adaptive_attach_pool.3 \
	docs/man/bh_adaptive_sample.3 \
	docs/man/bh_adaptive_detach.3 \
	docs/man/bh_adaptive_stats.3 \
	docs/man/bh_adaptive_history.3 \
	docs/man/bh_adaptive_reason_name.3 \
	docs/man/bh_adaptive_metrics_prometheus.3

if HAVE_CMOCKA
check_PROGRAMS += tests/test_adaptive
tests_test_adaptive_SOURCES = tests/test_adaptive.c tests/testutil.h
tests_test_adaptive_CFLAGS = $(TEST_CFLAGS)
tests_test_adaptive_LDADD = src/libbhcore.la $(CMOCKA_LIBS)
TESTS += tests/test_adaptive
endif

# Benchmarks (built, never run by make check): sampling cost against a
# mutex-protected sampler, and control quality in the simulator.
noinst_PROGRAMS += bench/bench_adaptive
bench_bench_adaptive_SOURCES = bench/bench_adaptive.c $(ADAPTIVE_SIM)
bench_bench_adaptive_CPPFLAGS = $(ADAPTIVE_SIM_CPPFLAGS) -I$(top_srcdir)/tests
bench_bench_adaptive_CFLAGS = $(AM_CFLAGS) -O2
bench_bench_adaptive_LDADD = $(ADAPTIVE_SIM_LIBS)

# The header compiles and links as C++.
if HAVE_CXX
check_PROGRAMS += tests/test_adaptive_cxx
tests_test_adaptive_cxx_SOURCES = tests/test_adaptive_cxx.cc
tests_test_adaptive_cxx_CXXFLAGS = -Wall -Wextra -Werror $(BH_SAN_FLAGS)
tests_test_adaptive_cxx_LDADD = src/libbulkhead.la
TESTS += tests/test_adaptive_cxx
endif

# Controllers detached and attached under callers that sample by hand and
# by their holds (stress/stress_adaptive.c).
STRESS_PROGS += stress/stress_adaptive
stress_stress_adaptive_SOURCES = stress/stress_adaptive.c
stress_stress_adaptive_LDADD = src/libbhcore.la
