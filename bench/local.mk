# Benchmarks: built by `make`, never run by `make check`.
noinst_PROGRAMS += bench/bench_core
# bench/machine.h: the machine line every benchmark prints first (header-only,
# listed here so that it ships)
bench_bench_core_SOURCES = bench/bench_core.c bench/machine.h
bench_bench_core_CFLAGS = $(AM_CFLAGS) -O2
bench_bench_core_LDADD = src/libbulkhead.la
