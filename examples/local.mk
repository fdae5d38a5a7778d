# Small real programs a user can copy (built by make).
noinst_PROGRAMS += examples/basic
examples_basic_SOURCES = examples/basic.c
examples_basic_LDADD = src/libbulkhead.la
