# Design notes, installed next to the man pages that point to them (in
# $(docdir), share/doc/libbulkhead under the prefix), and man pages.
dist_doc_DATA = docs/design.md docs/sizing.md docs/pool.md docs/uring.md docs/performance.md

# One page per public function of the core, the overview bulkhead(7), and
# the commands. Areas with their own headers add their pages to
# BH_MAN_PAGES in their own fragments; tests/test_manpages checks that every
# BH_API function has one.
#
# The sources in docs/man/ carry no version or date (".TH NAME 3 ""
# libbulkhead ...", readable with man -l from a checkout, never stale):
# what is installed is man/NAME.S, the same page with the date and version
# configure.ac sets filled into its .TH line.
BH_MAN_PAGES += \
	docs/man/bulkhead.7 \
	docs/man/bh_create.3 \
	docs/man/bh_destroy.3 \
	docs/man/bh_try_acquire.3 \
	docs/man/bh_acquire.3 \
	docs/man/bh_release.3 \
	docs/man/bh_close.3 \
	docs/man/bh_set_limit.3 \
	docs/man/bh_stats.3 \
	docs/man/bh_gauges.3 \
	docs/man/bh_now_ns.3 \
	docs/man/bh_acquire_async.3 \
	docs/man/bh_cancel_async.3 \
	docs/man/bulkhead-size.1 \
	docs/man/bulkhead-demo.1

EXTRA_DIST += $(BH_MAN_PAGES)
man_MANS = $(BH_MAN_PAGES:docs/man/%=man/%)
CLEANFILES += $(man_MANS)
man/%: docs/man/% Makefile
	$(AM_V_GEN)$(MKDIR_P) man && sed -e \
		's/^\.TH \([^ ]*\) \([^ ]*\) "" libbulkhead /.TH \1 \2 $(BH_MAN_DATE) "libbulkhead $(VERSION)" /' \
		$< >$@.tmp && mv $@.tmp $@

# The check learns what `make install` installs (man_MANS, including other
# fragments' pages) and the version they must carry through this generated
# wrapper.
TESTS += tests/test_manpages
check_SCRIPTS += tests/test_manpages
CLEANFILES += tests/test_manpages
EXTRA_DIST += tests/test_manpages.sh
tests/test_manpages: $(srcdir)/tests/test_manpages.sh Makefile $(man_MANS)
	$(AM_V_GEN)$(MKDIR_P) tests && { \
		echo '#!/bin/sh'; \
		echo 'BH_MANS="$(man_MANS)"; export BH_MANS'; \
		echo 'BH_MAN_BUILT="$(abs_top_builddir)/man"; export BH_MAN_BUILT'; \
		echo 'BH_HEADERS="$(include_HEADERS) $(bhinclude_HEADERS)"; export BH_HEADERS'; \
		echo 'BH_VERSION="$(VERSION)" BH_MAN_DATE="$(BH_MAN_DATE)"; export BH_VERSION BH_MAN_DATE'; \
		echo 'exec $(SHELL) "$(abs_top_srcdir)/tests/test_manpages.sh" "$$@"'; \
	} >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@

# make install, into a temporary DESTDIR, installs the commands, the pages
# and the documents; this wrapper gives the check the install directories.
TESTS += tests/test_install
check_SCRIPTS += tests/test_install
CLEANFILES += tests/test_install
EXTRA_DIST += tests/test_install.sh
tests/test_install: $(srcdir)/tests/test_install.sh Makefile
	$(AM_V_GEN)$(MKDIR_P) tests && { \
		echo '#!/bin/sh'; \
		echo 'MAKE="$(MAKE)" VERSION="$(VERSION)"; export MAKE VERSION'; \
		echo 'bindir="$(bindir)" libdir="$(libdir)" includedir="$(includedir)"'; \
		echo 'mandir="$(mandir)" docdir="$(docdir)"'; \
		echo 'top_srcdir="$(abs_top_srcdir)" top_builddir="$(abs_top_builddir)"'; \
		echo 'export bindir libdir includedir mandir docdir top_srcdir top_builddir'; \
		echo 'exec $(SHELL) "$(abs_top_srcdir)/tests/test_install.sh" "$$@"'; \
	} >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@

# User-facing text refers to no document a user does not have.
TESTS += tests/test_references.sh
EXTRA_DIST += tests/test_references.sh
TESTS += tests/test_layer_includes.sh
EXTRA_DIST += tests/test_layer_includes.sh

# Every source file the documents name exists; under distcheck, in the
# tarball.
TESTS += tests/test_shipped.sh
EXTRA_DIST += tests/test_shipped.sh
