# The ABI gate: this build's libbulkhead against the committed baseline,
# abi/libbulkhead.abi (abidw's view of the last release's library). See
# abi/README.md for what it checks, how structs grow, and when to
# regenerate the baseline (make abi-baseline).
BH_ABI_LA = $(filter %/libbulkhead.la,$(lib_LTLIBRARIES))
BH_ABI_SO = $(top_builddir)/$(dir $(BH_ABI_LA)).libs/libbulkhead.so
# Where public types may be defined: the headers, and the frozen layouts
# that compat symbols of older versions fill.
BH_ABI_HDIRS = $(top_srcdir)/include $(top_builddir)/include $(top_srcdir)/abi/compat

EXTRA_DIST += abi/README.md abi/abi-gate.sh abi/libbulkhead.abi abi/compat \
	tests/test_abi.sh tests/abi/fx.h tests/abi/fx.c tests/abi/fx_compat.c \
	tests/abi/compat/fx_stats_1.h

TESTS += tests/test_abi
check_SCRIPTS += tests/test_abi
CLEANFILES += tests/test_abi
tests/test_abi: $(srcdir)/tests/test_abi.sh Makefile
	$(AM_V_GEN)$(MKDIR_P) tests && { \
		echo '#!/bin/sh'; \
		echo 'CC="$(CC)" BH_LA="$(abs_top_builddir)/$(BH_ABI_LA)"'; \
		echo 'top_srcdir="$(abs_top_srcdir)" top_builddir="$(abs_top_builddir)"'; \
		echo 'export CC BH_LA top_srcdir top_builddir'; \
		echo 'exec $(SHELL) "$(abs_top_srcdir)/tests/test_abi.sh" "$$@"'; \
	} >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@

# Write the baseline from this build (a plain one: no sanitizer, with -g),
# after a release or a soname bump; commit the result.
abi-baseline: $(BH_ABI_LA)
	$(AM_V_GEN)$(SHELL) $(top_srcdir)/abi/abi-gate.sh dump $(BH_ABI_SO) $(BH_ABI_HDIRS) \
		>$(top_srcdir)/abi/libbulkhead.abi.tmp && \
		mv $(top_srcdir)/abi/libbulkhead.abi.tmp $(top_srcdir)/abi/libbulkhead.abi
.PHONY: abi-baseline

# A program built against 0.1 binds to bh_stats@LIBBULKHEAD_0.1 and gets
# exactly the 0.1 layout (shared library only: the version nodes).
if HAVE_LD_VERSION_SCRIPT
check_PROGRAMS += tests/test_compat_0_1
tests_test_compat_0_1_SOURCES = tests/test_compat_0_1.c
tests_test_compat_0_1_LDADD = src/libbulkhead.la
TESTS += tests/test_compat_0_1
else
EXTRA_DIST += tests/test_compat_0_1.c
endif
