# Rules for the tools area (owned by that area's work; included from Makefile.am).
# bulkhead-size sizes a bulkhead; bulkhead-demo runs the seeds' containment
# scenario over loopback. Both share the flag parser and the sizing model.
noinst_LTLIBRARIES += tools/libbhtools.la
tools_libbhtools_la_SOURCES = tools/cli.c tools/cli.h tools/sizing.c tools/sizing.h

bin_PROGRAMS += tools/bulkhead-size
tools_bulkhead_size_SOURCES = tools/bulkhead-size.c
tools_bulkhead_size_LDADD = tools/libbhtools.la

# Tests: the sizing model against hand-computed numbers.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_sizing
tests_test_sizing_SOURCES = tests/test_sizing.c
tests_test_sizing_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
tests_test_sizing_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_sizing_LDADD = tools/libbhtools.la $(CMOCKA_LIBS)
TESTS += tests/test_sizing
endif

# bulkhead-size end to end: the seeds' numbers, its rules, bad flags.
TESTS += tests/test_size.sh
EXTRA_DIST += tests/test_size.sh

bin_PROGRAMS += tools/bulkhead-demo
tools_bulkhead_demo_SOURCES = tools/bulkhead-demo.c tools/demo.h tools/demo_backend.c \
	tools/demo_service.c tools/demo_report.c tools/demo_svg.c
tools_bulkhead_demo_LDADD = tools/libbhtools.la src/libbulkhead.la

# bulkhead-demo end to end: a short run must show the containment.
TESTS += tests/test_demo.sh
EXTRA_DIST += tests/test_demo.sh
