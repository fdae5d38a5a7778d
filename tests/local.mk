# cmocka unit tests: one program per module. `make check TESTS=tests/test_x`
# runs one.
TEST_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
TEST_LIBS = src/libbhcore.la $(CMOCKA_LIBS)

if HAVE_CMOCKA
check_PROGRAMS += tests/test_core
tests_test_core_SOURCES = tests/test_core.c tests/testutil.h
tests_test_core_CFLAGS = $(TEST_CFLAGS)
tests_test_core_LDADD = $(TEST_LIBS)
TESTS += tests/test_core

# The core's hook for layers (src/core/layer.h).
check_PROGRAMS += tests/test_layer
tests_test_layer_SOURCES = tests/test_layer.c tests/testutil.h
tests_test_layer_CFLAGS = $(TEST_CFLAGS)
tests_test_layer_LDADD = $(TEST_LIBS)
TESTS += tests/test_layer

# The shared intrusive list (src/lib/list.h).
check_PROGRAMS += tests/test_list
tests_test_list_SOURCES = tests/test_list.c
tests_test_list_CFLAGS = $(TEST_CFLAGS)
tests_test_list_LDADD = $(CMOCKA_LIBS)
TESTS += tests/test_list

# The futex wrappers and the spin policy (src/lib/futex.h, src/lib/spin.h).
check_PROGRAMS += tests/test_futex
tests_test_futex_SOURCES = tests/test_futex.c
tests_test_futex_CFLAGS = $(TEST_CFLAGS)
tests_test_futex_LDADD = $(TEST_LIBS)
TESTS += tests/test_futex

# The thread indices (src/core/tindex.c); the wrap lets the test park a
# thread holding the core's locks.
check_PROGRAMS += tests/test_tindex
tests_test_tindex_SOURCES = tests/test_tindex.c tests/testutil.h
tests_test_tindex_CFLAGS = $(TEST_CFLAGS)
tests_test_tindex_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=pthread_mutex_lock
tests_test_tindex_LDADD = $(TEST_LIBS) -ldl
TESTS += tests/test_tindex
endif

# Only bh_* leaves the shared library.
TESTS += tests/test_exports.sh
EXTRA_DIST += tests/test_exports.sh
TESTS_ENVIRONMENT = top_builddir=$(top_builddir) top_srcdir=$(top_srcdir) NM="$(NM)"

# The public headers compile and link as C++.
if HAVE_CXX
check_PROGRAMS += tests/test_cxx
tests_test_cxx_SOURCES = tests/test_cxx.cc
tests_test_cxx_CXXFLAGS = -Wall -Wextra -Werror $(BH_SAN_FLAGS)
tests_test_cxx_LDADD = src/libbulkhead.la
TESTS += tests/test_cxx
endif

# Whether TCP over 127.0.0.1 works here (a build chroot may have its
# loopback down): the tests that need it run it first and skip without.
check_PROGRAMS += tests/loopback_probe
tests_loopback_probe_SOURCES = tests/loopback_probe.c

# The tarball ships every header that its sources include: a missing one
# passes every check of a checkout and breaks each build from the tarball.
# The wrapper hands the test make's list of shipped files.
TESTS += tests/test_dist
check_SCRIPTS += tests/test_dist
CLEANFILES += tests/test_dist tests/test_dist.files tests/test_dist.made
EXTRA_DIST += tests/test_dist.sh
tests/test_dist: $(srcdir)/tests/test_dist.sh Makefile
	$(AM_V_GEN)$(MKDIR_P) tests && \
	for f in $(DISTFILES); do \
		case $$f in $(srcdir)/*) f=$${f#$(srcdir)/} ;; esac; \
		echo "$$f"; \
	done | sort -u >tests/test_dist.files && \
	for f in $(BUILT_SOURCES) $(CLEANFILES) $(DISTCLEANFILES); do \
		echo "$$f"; \
	done | sort -u >tests/test_dist.made && { \
		echo '#!/bin/sh'; \
		echo 'BH_DISTFILES="$(abs_top_builddir)/tests/test_dist.files"; export BH_DISTFILES'; \
		echo 'BH_MADEFILES="$(abs_top_builddir)/tests/test_dist.made"; export BH_MADEFILES'; \
		echo 'top_srcdir="$(abs_top_srcdir)"; export top_srcdir'; \
		echo 'exec $(SHELL) "$(abs_top_srcdir)/tests/test_dist.sh" "$$@"'; \
	} >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@
