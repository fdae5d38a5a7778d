# Rules for the tools area (owned by that area's work; included from Makefile.am).
# bulkhead-size sizes a bulkhead; bulkhead-demo runs the containment
# scenario (a payment dependency slowing from 200 ms to 5 s) over loopback,
# the adaptive one (payment's capacity dropping, static vs adaptive limit),
# and with liburing the async trap too. Both share the flag parser and the
# sizing model.
noinst_LTLIBRARIES += tools/libbhtools.la
tools_libbhtools_la_SOURCES = tools/cli.c tools/cli.h tools/sizing.c tools/sizing.h

bin_PROGRAMS += tools/bulkhead-size
tools_bulkhead_size_SOURCES = tools/bulkhead-size.c
tools_bulkhead_size_LDADD = tools/libbhtools.la

# Tests: the sizing model against hand-computed numbers; the flag parser
# and the number formatting both tools print with.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_sizing tests/test_cli
tests_test_sizing_SOURCES = tests/test_sizing.c
tests_test_sizing_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
tests_test_sizing_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_sizing_LDADD = tools/libbhtools.la $(CMOCKA_LIBS)
tests_test_cli_SOURCES = tests/test_cli.c
tests_test_cli_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
tests_test_cli_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_cli_LDADD = tools/libbhtools.la $(CMOCKA_LIBS)
TESTS += tests/test_sizing tests/test_cli
endif

# bulkhead-size end to end: the worked numbers of docs/sizing.md, its rules,
# bad flags.
TESTS += tests/test_size.sh
EXTRA_DIST += tests/test_size.sh

bin_PROGRAMS += tools/bulkhead-demo
tools_bulkhead_demo_SOURCES = tools/bulkhead-demo.c tools/demo.h tools/demo_backend.c \
	tools/demo_service.c tools/demo_report.c tools/demo_svg.c tools/demo_output.c \
	tools/demo_adaptive.h tools/demo_adaptive.c tools/demo_adaptive_svg.c \
	tools/demo_procs.h tools/demo_procs.c tools/demo_procs_svg.c tools/demo_prefork.c \
	tools/demo_cluster.c
tools_bulkhead_demo_CPPFLAGS = $(AM_CPPFLAGS) $(LIBURING_CFLAGS)
tools_bulkhead_demo_LDADD = tools/libbhtools.la src/libbulkhead.la
# The async-trap scenario needs liburing; without it the demo says so.
if HAVE_LIBURING
tools_bulkhead_demo_SOURCES += tools/demo_trap.h tools/demo_trap.c tools/demo_trap_caller.c \
	tools/demo_trap_svg.c
tools_bulkhead_demo_LDADD += $(LIBURING_LIBS)
# For the test: the demo on a system that refuses io_uring.
check_PROGRAMS += tests/no_io_uring
tests_no_io_uring_SOURCES = tests/no_io_uring.c
endif

# bulkhead-demo end to end: a short run must show the containment, and
# another the async trap (skipped without io_uring).
TESTS += tests/test_demo.sh tests/test_demo_trap.sh
EXTRA_DIST += tests/test_demo.sh tests/test_demo_trap.sh tests/demo_sigterm.sh
# And the adaptive scenario: the limit follows payment's capacity down and
# back, and gets more of payment done than the static limit.
TESTS += tests/test_demo_adaptive.sh
EXTRA_DIST += tests/test_demo_adaptive.sh
# The multi-process scenarios: per-process bulkheads against one host-wide
# bulkhead, and against one cluster bulkhead (skipped without redis-server).
# Only in the plain build: ThreadSanitizer cannot start threads in a child
# forked from a threaded process, which is what these scenarios do, and
# under ASan the instances start too slowly for the per-instance run to
# reach its peak in the short test run.
if !BH_SANITIZED
TESTS += tests/test_demo_prefork.sh tests/test_demo_cluster.sh
endif
EXTRA_DIST += tests/test_demo_prefork.sh tests/test_demo_cluster.sh tests/demo_procs_lib.sh
