# Benchmarks: built by `make`, never run by `make check`.
noinst_PROGRAMS += bench/bench_core
bench_bench_core_SOURCES = bench/bench_core.c
bench_bench_core_CFLAGS = $(AM_CFLAGS) -O2
bench_bench_core_LDADD = src/libbulkhead.la
