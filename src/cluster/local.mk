# The cluster layer: bulkheads whose limit is shared by every instance of a
# service through Redis (docs/cluster.md). Built when configure finds
# hiredis (libhiredis-dev); the tests need redis-server and skip without it.
CLUSTER_MANS = \
	docs/man/bh_cluster_open.3 \
	docs/man/bh_cluster_stats.3 \
	docs/man/bh_cluster_step.3 \
	docs/man/bh_cluster_fd.3 \
	docs/man/bh_cluster_set_global_limit.3
CLUSTER_SOURCES = \
	src/cluster/bhc.h \
	src/cluster/clock.c \
	src/cluster/cluster.c \
	src/cluster/cluster.h \
	src/cluster/endpoint.c \
	src/cluster/endpoint.h \
	src/cluster/redis.c \
	src/cluster/renew.c \
	src/cluster/store.h
dist_doc_DATA += docs/cluster.md
EXTRA_DIST += src/cluster/lease.lua

if HAVE_HIREDIS
bhinclude_HEADERS += include/bulkhead/cluster.h
src_libbhcore_la_SOURCES += $(CLUSTER_SOURCES)
nodist_src_libbhcore_la_SOURCES = src/cluster/lease_lua.h
src_libbhcore_la_CFLAGS += $(HIREDIS_CFLAGS) -I$(top_builddir)/src/cluster
src_libbulkhead_la_LIBADD += $(HIREDIS_LIBS)
BH_MAN_PAGES += $(CLUSTER_MANS)

# The lease script, as a C string (the store receives this file verbatim).
# The core's objects wait for it whatever the target (BUILT_SOURCES covers
# only all, check and install; make fuzz and stress/mutants/run.sh build
# single programs). Named
# through the variable: a rule for the object itself would replace
# automake's.
BUILT_SOURCES += src/cluster/lease_lua.h
$(src_libbhcore_la_OBJECTS): src/cluster/lease_lua.h
CLEANFILES += src/cluster/lease_lua.h
src/cluster/lease_lua.h: $(srcdir)/src/cluster/lease.lua
	$(AM_V_GEN)$(MKDIR_P) src/cluster && { \
		echo '/* Generated from src/cluster/lease.lua. */'; \
		echo '#define BHC_LEASE_LUA \'; \
		sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n" \\/' \
			$(srcdir)/src/cluster/lease.lua; \
		echo '""'; \
	} >$@.tmp && mv $@.tmp $@

CLUSTER_CFLAGS = $(AM_CFLAGS) $(HIREDIS_CFLAGS) -I$(top_srcdir)/src/cluster
CLUSTER_LIBS = src/libbhcore.la $(HIREDIS_LIBS)

if HAVE_CMOCKA
check_PROGRAMS += tests/test_cluster
tests_test_cluster_SOURCES = tests/test_cluster.c tests/testutil.h tests/redis_harness.h
tests_test_cluster_CFLAGS = $(CLUSTER_CFLAGS) $(CMOCKA_CFLAGS) -DBH_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_test_cluster_LDADD = $(CLUSTER_LIBS) $(CMOCKA_LIBS)
TESTS += tests/test_cluster

# Multi-process fault scenarios: instance processes (tests/cluster_inst)
# calling a backend that counts its own concurrency.
check_PROGRAMS += tests/test_cluster_faults
tests_test_cluster_faults_SOURCES = tests/test_cluster_faults.c tests/testutil.h \
	tests/redis_harness.h tests/cluster_rig.h
tests_test_cluster_faults_CFLAGS = $(CLUSTER_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_cluster_faults_LDADD = $(CLUSTER_LIBS) $(CMOCKA_LIBS)
TESTS += tests/test_cluster_faults
endif
# The header compiles and links as C++.
if HAVE_CXX
check_PROGRAMS += tests/test_cluster_cxx
tests_test_cluster_cxx_SOURCES = tests/test_cluster_cxx.cc
tests_test_cluster_cxx_CXXFLAGS = -Wall -Wextra -Werror $(BH_SAN_FLAGS)
tests_test_cluster_cxx_LDADD = src/libbulkhead.la
TESTS += tests/test_cluster_cxx
endif

noinst_PROGRAMS += bench/bench_cluster
# src/lib/vdso.c: the benchmark reads the clock the gate reads, the same way
bench_bench_cluster_SOURCES = bench/bench_cluster.c tests/redis_harness.h src/lib/vdso.c
bench_bench_cluster_CFLAGS = $(AM_CFLAGS) $(HIREDIS_CFLAGS) -I$(top_srcdir)/tests \
	-I$(top_srcdir)/src -O2
bench_bench_cluster_LDADD = src/libbulkhead.la $(HIREDIS_LIBS)

check_PROGRAMS += tests/cluster_inst
tests_cluster_inst_SOURCES = tests/cluster_inst.c
tests_cluster_inst_CFLAGS = $(CLUSTER_CFLAGS)
tests_cluster_inst_LDADD = $(CLUSTER_LIBS)

# The soak: random faults for BH_STRESS_SECONDS (make stress).
STRESS_PROGS += stress/stress_cluster
STRESS_DEPS += tests/cluster_inst # the instances it starts
stress_stress_cluster_SOURCES = stress/stress_cluster.c tests/cluster_rig.h \
	tests/redis_harness.h
stress_stress_cluster_CFLAGS = $(CLUSTER_CFLAGS) -I$(top_srcdir)/tests
stress_stress_cluster_LDADD = $(CLUSTER_LIBS)
else
EXTRA_DIST += include/bulkhead/cluster.h $(CLUSTER_SOURCES) $(CLUSTER_MANS) \
	tests/test_cluster.c tests/redis_harness.h tests/test_cluster_faults.c \
	tests/cluster_inst.c bench/bench_cluster.c tests/test_cluster_cxx.cc \
	tests/cluster_rig.h stress/stress_cluster.c
endif
