# Design notes and man pages.
EXTRA_DIST += docs/design.md docs/sizing.md

# One page per public function of the core, the overview bulkhead(7), and
# the commands. Areas with their own headers add their pages in their own
# fragments; tests/test_manpages checks that every BH_API function has one.
dist_man_MANS += \
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

# The check learns what `make install` installs (dist_man_MANS, including
# other fragments' pages) through this generated wrapper.
TESTS += tests/test_manpages
check_SCRIPTS += tests/test_manpages
CLEANFILES += tests/test_manpages
EXTRA_DIST += tests/test_manpages.sh
tests/test_manpages: $(srcdir)/tests/test_manpages.sh Makefile
	$(AM_V_GEN)$(MKDIR_P) tests && { \
		echo '#!/bin/sh'; \
		echo 'BH_MANS="$(dist_man_MANS)"; export BH_MANS'; \
		echo 'exec $(SHELL) "$(abs_top_srcdir)/tests/test_manpages.sh" "$$@"'; \
	} >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@
