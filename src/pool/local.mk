# Rules for the pool area: thread-pool bulkheads for blocking clients.
bhinclude_HEADERS += include/bulkhead/pool.h
src_libbhcore_la_SOURCES += src/pool/pool.c src/pool/pool_internal.h \
	src/pool/submit.c src/pool/task.h src/pool/worker.c

if HAVE_CMOCKA
check_PROGRAMS += tests/test_pool
tests_test_pool_SOURCES = tests/test_pool.c tests/testutil.h
tests_test_pool_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
tests_test_pool_CFLAGS = $(TEST_CFLAGS)
# the tools' sizing functions, checked against bh_pool_size
tests_test_pool_LDADD = tools/libbhtools.la $(TEST_LIBS)
TESTS += tests/test_pool
endif

# <bulkhead/pool.h> compiles and links as C++.
if HAVE_CXX
check_PROGRAMS += tests/test_pool_cxx
tests_test_pool_cxx_SOURCES = tests/test_pool_cxx.cc
tests_test_pool_cxx_CXXFLAGS = -Wall -Wextra -Werror $(BH_SAN_FLAGS)
tests_test_pool_cxx_LDADD = src/libbulkhead.la
TESTS += tests/test_pool_cxx
endif

# A small real program a user can copy (built, not run).
noinst_PROGRAMS += examples/pool_lookup
examples_pool_lookup_SOURCES = examples/pool_lookup.c
examples_pool_lookup_LDADD = src/libbulkhead.la

# Run by the stress suite (stress/local.mk), normal and sanitized; built by
# `make` here too, so it never rots.
STRESS_PROGS += stress/stress_pool
noinst_PROGRAMS += stress/stress_pool
stress_stress_pool_SOURCES = stress/stress_pool.c
stress_stress_pool_LDADD = src/libbhcore.la

noinst_PROGRAMS += bench/bench_pool
bench_bench_pool_SOURCES = bench/bench_pool.c
bench_bench_pool_CFLAGS = $(AM_CFLAGS) -O2
bench_bench_pool_LDADD = src/libbhcore.la # static: reaches the polling knob

EXTRA_DIST += docs/pool.md
BH_MAN_PAGES += \
	docs/man/bh_pool_create.3 \
	docs/man/bh_pool_submit.3 \
	docs/man/bh_pool_call.3 \
	docs/man/bh_task_cancelled.3 \
	docs/man/bh_pool_shutdown.3 \
	docs/man/bh_pool_shutdown_now.3 \
	docs/man/bh_pool_destroy.3 \
	docs/man/bh_pool_stats.3 \
	docs/man/bh_pool_name.3 \
	docs/man/bh_pool_size.3
