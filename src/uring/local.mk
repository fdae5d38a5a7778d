# Rules for the uring area (owned by that area's work; included from Makefile.am).
# io_uring integration: built only when configure found liburing >= 2.3.
EXTRA_DIST += docs/uring.md
URING_MANS = \
	docs/man/bh_uring_create.3 \
	docs/man/bh_uring_destroy.3 \
	docs/man/bh_uring_get_sqes.3 \
	docs/man/bh_uring_get_sqe.3 \
	docs/man/bh_uring_get_batch.3 \
	docs/man/bh_uring_get_chains.3 \
	docs/man/bh_uring_track.3 \
	docs/man/bh_uring_track_batch.3 \
	docs/man/bh_uring_complete.3 \
	docs/man/bh_uring_reap.3 \
	docs/man/bh_uring_cancel.3 \
	docs/man/bh_uring_wait.3 \
	docs/man/bh_uring_drain.3 \
	docs/man/bh_uring_stats.3 \
	docs/man/bh_uring_owns.3 \
	docs/man/bh_uring_op_busy.3

if HAVE_LIBURING
bhinclude_HEADERS += include/bulkhead/uring.h
# <bulkhead/uring.h> users: pkg-config --cflags --libs bulkhead-uring
pkgconfig_DATA += bulkhead-uring.pc
# uring.c: taking SQEs, tracking, completions; grant.c: grants from other
# threads to the ring's owner; cancel.c: ops that end early; tracker.h: what
# they share.
src_libbhcore_la_SOURCES += src/uring/uring.c src/uring/grant.c src/uring/cancel.c \
	src/uring/tracker.h
src_libbhcore_la_CFLAGS += $(LIBURING_CFLAGS)
src_libbulkhead_la_LIBADD += $(LIBURING_LIBS)

BH_MAN_PAGES += $(URING_MANS)

URING_CFLAGS = $(AM_CFLAGS) $(LIBURING_CFLAGS)
URING_LIBS = src/libbhcore.la $(LIBURING_LIBS)

if HAVE_CMOCKA
check_PROGRAMS += tests/test_uring
tests_test_uring_SOURCES = tests/test_uring.c tests/testutil.h
tests_test_uring_CFLAGS = $(URING_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_uring_LDADD = $(URING_LIBS) $(CMOCKA_LIBS)
TESTS += tests/test_uring
endif

# The header compiles and links as C++.
if HAVE_CXX
check_PROGRAMS += tests/test_uring_cxx
tests_test_uring_cxx_SOURCES = tests/test_uring_cxx.cc
tests_test_uring_cxx_CXXFLAGS = -Wall -Wextra -Werror $(BH_SAN_FLAGS) $(LIBURING_CFLAGS)
tests_test_uring_cxx_LDADD = src/libbulkhead.la $(LIBURING_LIBS)
TESTS += tests/test_uring_cxx
endif

STRESS_PROGS += stress/stress_uring
noinst_PROGRAMS += stress/stress_uring
stress_stress_uring_SOURCES = stress/stress_uring.c
stress_stress_uring_CFLAGS = $(URING_CFLAGS)
stress_stress_uring_LDADD = $(URING_LIBS)

noinst_PROGRAMS += bench/bench_uring examples/uring_deps
bench_bench_uring_SOURCES = bench/bench_uring.c
bench_bench_uring_CFLAGS = $(URING_CFLAGS) -O2
bench_bench_uring_LDADD = src/libbulkhead.la $(LIBURING_LIBS)
examples_uring_deps_SOURCES = examples/uring_deps.c
examples_uring_deps_CFLAGS = $(URING_CFLAGS)
examples_uring_deps_LDADD = src/libbulkhead.la $(LIBURING_LIBS)
else
EXTRA_DIST += include/bulkhead/uring.h src/uring/uring.c src/uring/grant.c src/uring/cancel.c \
	src/uring/tracker.h tests/test_uring.c \
	tests/test_uring_cxx.cc stress/stress_uring.c bench/bench_uring.c \
	examples/uring_deps.c $(URING_MANS)
endif
