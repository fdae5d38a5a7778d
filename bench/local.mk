# Benchmarks: built by `make`, never run by `make check`.
noinst_PROGRAMS += bench/bench_core
# bench/machine.h: the machine line every benchmark prints first; bench/stats.h:
# the median every benchmark reports (both header-only, listed here so that
# they ship)
bench_bench_core_SOURCES = bench/bench_core.c bench/machine.h bench/stats.h
bench_bench_core_CFLAGS = $(AM_CFLAGS) -O2
bench_bench_core_LDADD = src/libbulkhead.la

# Two builds of the library side by side in one process (the uncontended
# pair; for a change to the fast path): bench/bench_ab OLD.so NEW.so
noinst_PROGRAMS += bench/bench_ab
bench_bench_ab_SOURCES = bench/bench_ab.c bench/machine.h
bench_bench_ab_CFLAGS = $(AM_CFLAGS) -O2
bench_bench_ab_LDADD = -ldl -lpthread

# `make bench`: every figure of the README's performance table, in its shape,
# headed by the CPU it was measured on (bench/run-all.sh); `make bench-quick`:
# the same in seconds, a smoke run whose numbers are noise.
EXTRA_DIST += bench/run-all.sh
bench: all
	$(SHELL) $(srcdir)/bench/run-all.sh $(abs_builddir)
bench-quick: all
	$(SHELL) $(srcdir)/bench/run-all.sh --quick $(abs_builddir)
# `make bench-scaling`: the contended figures at 1 to 16 threads, against
# sem_t (bench/scaling.sh; docs/performance.md has its results).
EXTRA_DIST += bench/scaling.sh
bench-scaling: all
	$(SHELL) $(srcdir)/bench/scaling.sh $(abs_builddir)
.PHONY: bench bench-quick bench-scaling
