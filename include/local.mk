# The headers that are not one layer's: <bulkhead/version.h>, which
# configure writes from configure.ac's version numbers, and the C++ header
# <bulkhead.hpp>, header-only, with its tests.
nodist_bhinclude_HEADERS = include/bulkhead/version.h

# The version configure.ac sets is the one every artefact carries: the
# header's BH_VERSION_*, the .pc files, the soname, debian/changelog. The
# generated wrapper hands the check what configure and libtool made.
TESTS += tests/test_version
check_SCRIPTS += tests/test_version
CLEANFILES += tests/test_version
EXTRA_DIST += tests/test_version.sh
tests/test_version: $(srcdir)/tests/test_version.sh Makefile
	$(AM_V_GEN)$(MKDIR_P) tests && { \
		echo '#!/bin/sh'; \
		echo 'VERSION="$(VERSION)" BH_SOVERSION="$(BH_SOVERSION)"; export VERSION BH_SOVERSION'; \
		echo 'BH_LA="$(abs_top_builddir)/$(filter %/libbulkhead.la,$(lib_LTLIBRARIES))"; export BH_LA'; \
		echo 'CPP="$(CPP)" READELF="$${READELF:-readelf}"; export CPP READELF'; \
		echo 'top_srcdir="$(abs_top_srcdir)" top_builddir="$(abs_top_builddir)"'; \
		echo 'export top_srcdir top_builddir'; \
		echo 'exec $(SHELL) "$(abs_top_srcdir)/tests/test_version.sh" "$$@"'; \
	} >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@
