# Stress suite: multi-threaded invariant checkers, see stress/common.h.
#
#   make stress        every program in $(STRESS_PROGS), in this build
#   make stress-tsan   the same in a ThreadSanitizer build (./stress-tsan)
#   make stress-asan   the same in an ASan+UBSan build (./stress-asan)
#
# BH_STRESS_SECONDS (default 3) sets each program's duration; BH_STRESS_SEED
# replays one. Other areas add their programs with `STRESS_PROGS +=` (built
# with check_PROGRAMS, so `make check` compiles them too), and the helper
# programs those start with `STRESS_DEPS +=`.
STRESS_LIBS = src/libbhcore.la
STRESS_COMMON = stress/common.c stress/common.h

STRESS_PROGS += stress/stress_mixed stress/stress_churn stress/stress_hostile \
	stress/stress_deadline
stress_stress_mixed_SOURCES = stress/stress_mixed.c $(STRESS_COMMON)
stress_stress_mixed_LDADD = $(STRESS_LIBS)
stress_stress_churn_SOURCES = stress/stress_churn.c $(STRESS_COMMON)
stress_stress_churn_LDADD = $(STRESS_LIBS)
stress_stress_hostile_SOURCES = stress/stress_hostile.c $(STRESS_COMMON)
stress_stress_hostile_LDADD = $(STRESS_LIBS)
stress_stress_deadline_SOURCES = stress/stress_deadline.c $(STRESS_COMMON)
stress_stress_deadline_LDADD = $(STRESS_LIBS)

check_PROGRAMS += $(STRESS_PROGS)
EXTRA_DIST += stress/run.sh stress/sanitized.sh stress/README.md
# The mutants stress/README.md documents (never built or run by make): the
# whole directory, so a new patch ships without being listed here.
EXTRA_DIST += stress/mutants

stress: $(STRESS_PROGS) $(STRESS_DEPS)
	@$(SHELL) $(top_srcdir)/stress/run.sh $(STRESS_PROGS)

stress-tsan:
	@top_srcdir=$(top_srcdir) MAKE="$(MAKE)" \
		$(SHELL) $(top_srcdir)/stress/sanitized.sh stress-tsan thread

stress-asan:
	@top_srcdir=$(top_srcdir) MAKE="$(MAKE)" \
		$(SHELL) $(top_srcdir)/stress/sanitized.sh stress-asan address,undefined

.PHONY: stress stress-tsan stress-asan
CLEANFILES += $(STRESS_PROGS:=.stress.log)

# The reproducer of the cancellation finding in stress/README.md (fixed in
# src/lib/futex.c), public API only: it stays in the suite as a regression test.
STRESS_PROGS += stress/cancel_escape
stress_cancel_escape_SOURCES = stress/cancel_escape.c
stress_cancel_escape_LDADD = src/libbulkhead.la
