# Host-wide bulkheads in shared memory (include/bulkhead/shm.h): part of the
# core library. The crash tests link a second copy of the core built with
# crash points (-DBHS_CRASH_POINTS), which the library itself never has.
bhinclude_HEADERS += include/bulkhead/shm.h
SHM_SOURCES = \
	src/shm/segment.c \
	src/shm/open.c \
	src/shm/fast.c \
	src/shm/queue.c \
	src/shm/wait.c \
	src/shm/async.c \
	src/shm/lock.c \
	src/shm/reclaim.c \
	src/shm/role.c \
	src/shm/role.h \
	src/shm/seg.h \
	src/shm/hooks.h \
	src/shm/dispatch.h
src_libbhcore_la_SOURCES += $(SHM_SOURCES)

noinst_LTLIBRARIES += src/libbhcrash.la
src_libbhcrash_la_SOURCES = \
	$(BHCORE_SOURCES) \
	$(BHLIB_SOURCES) \
	$(SHM_SOURCES) \
	src/shm/point.c
src_libbhcrash_la_CFLAGS = $(AM_CFLAGS) $(BH_VISIBILITY_CFLAGS) -DBHS_CRASH_POINTS

if HAVE_CMOCKA
check_PROGRAMS += tests/test_shm
tests_test_shm_SOURCES = tests/test_shm.c tests/shmutil.h tests/testutil.h
tests_test_shm_CFLAGS = $(TEST_CFLAGS)
tests_test_shm_LDADD = $(TEST_LIBS)
TESTS += tests/test_shm

check_PROGRAMS += tests/test_shm_queue
tests_test_shm_queue_SOURCES = tests/test_shm_queue.c tests/shmutil.h tests/testutil.h
tests_test_shm_queue_CFLAGS = $(TEST_CFLAGS)
tests_test_shm_queue_LDADD = $(TEST_LIBS)
TESTS += tests/test_shm_queue

check_PROGRAMS += tests/test_shm_crash
tests_test_shm_crash_SOURCES = tests/test_shm_crash.c tests/shmutil.h tests/testutil.h
tests_test_shm_crash_CFLAGS = $(TEST_CFLAGS) -DBHS_CRASH_POINTS
tests_test_shm_crash_LDADD = src/libbhcrash.la $(CMOCKA_LIBS)
# close() is wrapped to play another thread that opens a file between two
# of the library's calls (test_refused_attach_closes_once).
tests_test_shm_crash_LDFLAGS = -Wl,--wrap=close
TESTS += tests/test_shm_crash
endif

BH_MAN_PAGES += docs/man/bh_shm_open.3 docs/man/bh_shm_unlink.3

# <bulkhead/shm.h> compiles and links as C++.
if HAVE_CXX
check_PROGRAMS += tests/test_shm_cxx
tests_test_shm_cxx_SOURCES = tests/test_shm_cxx.cc
tests_test_shm_cxx_CXXFLAGS = -Wall -Wextra -Werror $(BH_SAN_FLAGS)
tests_test_shm_cxx_LDADD = src/libbulkhead.la
TESTS += tests/test_shm_cxx
endif

# The stress scenario (stress/README.md): workers killed at random instants.
STRESS_PROGS += stress/stress_shm
noinst_PROGRAMS += stress/stress_shm
stress_stress_shm_SOURCES = stress/stress_shm.c
stress_stress_shm_LDADD = src/libbhcore.la

noinst_PROGRAMS += bench/bench_shm
bench_bench_shm_SOURCES = bench/bench_shm.c
bench_bench_shm_CFLAGS = $(AM_CFLAGS) -O2
bench_bench_shm_LDADD = src/libbulkhead.la
