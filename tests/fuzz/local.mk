# Fuzz harnesses (tests/fuzz/): the core limiter and the host-wide bulkhead
# (the same harness built with -DBHF_SHM: shm_api) against the reference
# model (tests/ref_model.c), the command lines of bulkhead-size and bulkhead-demo,
# the cluster endpoint strings, the host-wide segment validation, and the
# thread pool's admission and policies. `make check` replays each harness's seeds and committed
# corpus (tests/fuzz/corpus/<harness>/) with the normal compiler;
# `make fuzz` builds them with libFuzzer (clang, ASan+UBSan) in ./fuzz-build
# and runs each for BH_FUZZ_SECONDS (tests/fuzz/run.sh).
FUZZ_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests -I$(top_srcdir)/tests/fuzz
FUZZ_CORPUS = $(abs_top_srcdir)/tests/fuzz/corpus
FUZZ_CORE_SOURCES = tests/fuzz/fuzz_core.c tests/fuzz/fuzz_hooks.c tests/fuzz/fuzz_hooks.h \
	tests/fuzz/fuzz_seeds.h tests/ref_model.c tests/ref_model.h
FUZZ_FLAGS_CPPFLAGS = $(FUZZ_CPPFLAGS) -I$(top_srcdir)/tools
# The demo's flag parser is static in bulkhead-demo.c, which the harness
# includes; it links the program's other objects (never called).
FUZZ_DEMO_OBJECTS = $(filter-out %bulkhead-demo.$(OBJEXT),$(am_tools_bulkhead_demo_OBJECTS))
FUZZ_DEMO_LIBS = $(FUZZ_DEMO_OBJECTS) $(tools_bulkhead_demo_LDADD)

check_PROGRAMS += tests/fuzz/replay_core tests/fuzz/replay_size_flags \
	tests/fuzz/replay_demo_flags tests/fuzz/replay_endpoint tests/fuzz/replay_shm_hdr \
	tests/fuzz/replay_pool tests/fuzz/replay_shm_api
TESTS += tests/fuzz/replay_core tests/fuzz/replay_shm_api tests/fuzz/replay_size_flags tests/fuzz/replay_demo_flags \
	tests/fuzz/replay_endpoint tests/fuzz/replay_shm_hdr tests/fuzz/replay_pool

# The endpoint parser is compiled into its harness (it needs no hiredis).
FUZZ_ENDPOINT_SOURCES = tests/fuzz/fuzz_endpoint.c tests/fuzz/fuzz_seeds.h \
	src/cluster/endpoint.c src/cluster/endpoint.h
FUZZ_ENDPOINT_CPPFLAGS = $(FUZZ_CPPFLAGS) -I$(top_srcdir)/src/cluster
tests_fuzz_replay_endpoint_SOURCES = $(FUZZ_ENDPOINT_SOURCES) tests/fuzz/replay.c
tests_fuzz_replay_endpoint_CPPFLAGS = $(FUZZ_ENDPOINT_CPPFLAGS) \
	-DBHF_CORPUS='"$(FUZZ_CORPUS)/endpoint"'
tests_fuzz_replay_shm_hdr_SOURCES = tests/fuzz/fuzz_shm_hdr.c tests/fuzz/fuzz_seeds.h \
	tests/fuzz/replay.c
tests_fuzz_replay_shm_hdr_CPPFLAGS = $(FUZZ_CPPFLAGS) -DBHF_CORPUS='"$(FUZZ_CORPUS)/shm_hdr"'
tests_fuzz_replay_shm_hdr_LDADD = src/libbhcore.la
tests_fuzz_replay_pool_SOURCES = tests/fuzz/fuzz_pool.c tests/fuzz/fuzz_seeds.h \
	tests/fuzz/replay.c
tests_fuzz_replay_pool_CPPFLAGS = $(FUZZ_CPPFLAGS) -DBHF_CORPUS='"$(FUZZ_CORPUS)/pool"'
tests_fuzz_replay_pool_LDADD = src/libbhcore.la

tests_fuzz_replay_core_SOURCES = $(FUZZ_CORE_SOURCES) tests/fuzz/replay.c
tests_fuzz_replay_core_CPPFLAGS = $(FUZZ_CPPFLAGS) -DBHF_CORPUS='"$(FUZZ_CORPUS)/core"'
tests_fuzz_replay_core_LDADD = src/libbhcore.la
tests_fuzz_replay_shm_api_SOURCES = $(FUZZ_CORE_SOURCES) tests/fuzz/replay.c
tests_fuzz_replay_shm_api_CPPFLAGS = $(FUZZ_CPPFLAGS) -DBHF_SHM \
	-DBHF_CORPUS='"$(FUZZ_CORPUS)/shm_api"'
tests_fuzz_replay_shm_api_LDADD = src/libbhcore.la

tests_fuzz_replay_size_flags_SOURCES = tests/fuzz/fuzz_size_flags.c tests/fuzz/flags_common.h \
	tests/fuzz/fuzz_seeds.h tests/fuzz/replay.c
tests_fuzz_replay_size_flags_CPPFLAGS = $(FUZZ_FLAGS_CPPFLAGS) \
	-DBHF_CORPUS='"$(FUZZ_CORPUS)/size_flags"'
tests_fuzz_replay_size_flags_LDADD = tools/libbhtools.la

tests_fuzz_replay_demo_flags_SOURCES = tests/fuzz/fuzz_demo_flags.c tests/fuzz/flags_common.h \
	tests/fuzz/fuzz_seeds.h tests/fuzz/replay.c
tests_fuzz_replay_demo_flags_CPPFLAGS = $(FUZZ_FLAGS_CPPFLAGS) $(LIBURING_CFLAGS) \
	-DBHF_CORPUS='"$(FUZZ_CORPUS)/demo_flags"'
tests_fuzz_replay_demo_flags_LDADD = $(FUZZ_DEMO_LIBS)
EXTRA_tests_fuzz_replay_demo_flags_DEPENDENCIES = $(FUZZ_DEMO_OBJECTS)

# The same harnesses with libFuzzer's driver: built only on request, in a
# build configured for it (tests/fuzz/run.sh).
EXTRA_PROGRAMS += tests/fuzz/fuzz_core tests/fuzz/fuzz_size_flags tests/fuzz/fuzz_demo_flags \
	tests/fuzz/fuzz_endpoint tests/fuzz/fuzz_shm_hdr tests/fuzz/fuzz_pool tests/fuzz/fuzz_shm_api
tests_fuzz_fuzz_endpoint_SOURCES = $(FUZZ_ENDPOINT_SOURCES)
tests_fuzz_fuzz_endpoint_CPPFLAGS = $(FUZZ_ENDPOINT_CPPFLAGS)
tests_fuzz_fuzz_endpoint_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_shm_hdr_SOURCES = tests/fuzz/fuzz_shm_hdr.c tests/fuzz/fuzz_seeds.h
tests_fuzz_fuzz_shm_hdr_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_shm_hdr_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_shm_hdr_LDADD = src/libbhcore.la
tests_fuzz_fuzz_pool_SOURCES = tests/fuzz/fuzz_pool.c tests/fuzz/fuzz_seeds.h
tests_fuzz_fuzz_pool_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_pool_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_pool_LDADD = src/libbhcore.la
tests_fuzz_fuzz_core_SOURCES = $(FUZZ_CORE_SOURCES)
tests_fuzz_fuzz_core_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_core_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_core_LDADD = src/libbhcore.la
tests_fuzz_fuzz_shm_api_SOURCES = $(FUZZ_CORE_SOURCES)
tests_fuzz_fuzz_shm_api_CPPFLAGS = $(FUZZ_CPPFLAGS) -DBHF_SHM
tests_fuzz_fuzz_shm_api_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_shm_api_LDADD = src/libbhcore.la
tests_fuzz_fuzz_size_flags_SOURCES = tests/fuzz/fuzz_size_flags.c tests/fuzz/flags_common.h \
	tests/fuzz/fuzz_seeds.h
tests_fuzz_fuzz_size_flags_CPPFLAGS = $(FUZZ_FLAGS_CPPFLAGS)
tests_fuzz_fuzz_size_flags_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_size_flags_LDADD = tools/libbhtools.la
tests_fuzz_fuzz_demo_flags_SOURCES = tests/fuzz/fuzz_demo_flags.c tests/fuzz/flags_common.h \
	tests/fuzz/fuzz_seeds.h
tests_fuzz_fuzz_demo_flags_CPPFLAGS = $(FUZZ_FLAGS_CPPFLAGS) $(LIBURING_CFLAGS)
tests_fuzz_fuzz_demo_flags_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_demo_flags_LDADD = $(FUZZ_DEMO_LIBS)
EXTRA_tests_fuzz_fuzz_demo_flags_DEPENDENCIES = $(FUZZ_DEMO_OBJECTS)

# A defect the fuzz harness found, kept as a unit test.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_regress
tests_test_regress_SOURCES = tests/test_regress.c tests/testutil.h
tests_test_regress_CFLAGS = $(TEST_CFLAGS)
tests_test_regress_LDADD = $(TEST_LIBS)
TESTS += tests/test_regress
endif

FUZZ_HARNESSES = core size_flags demo_flags endpoint shm_hdr pool shm_api
fuzz:
	@rc=0; top_srcdir=$(top_srcdir) MAKE="$(MAKE)" FUZZ_HARNESSES="$(FUZZ_HARNESSES)" \
		$(SHELL) $(top_srcdir)/tests/fuzz/run.sh fuzz-build || rc=$$?; \
	if [ $$rc -eq 77 ]; then echo "fuzz: SKIPPED"; exit 0; fi; \
	exit $$rc
.PHONY: fuzz
EXTRA_DIST += tests/fuzz/run.sh tests/fuzz/corpus tests/fuzz/size_flags.dict \
	tests/fuzz/demo_flags.dict
