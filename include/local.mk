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

# <bulkhead.hpp>: header-only, installed next to <bulkhead.h>.
include_HEADERS += include/bulkhead.hpp
# Its guide goes with the other design notes, into the documentation
# directory.
bhcxxdocdir = $(docdir)
dist_bhcxxdoc_DATA = docs/cpp.md

# Its tests build tests/test_hpp.cc with every C++ compiler found, C++17 and
# C++20, and with this build's sanitizer (see the script).
TESTS += tests/test_hpp
check_SCRIPTS += tests/test_hpp
CLEANFILES += tests/test_hpp
EXTRA_DIST += tests/test_hpp.sh tests/test_hpp.cc
tests/test_hpp: $(srcdir)/tests/test_hpp.sh Makefile
	$(AM_V_GEN)$(MKDIR_P) tests && { \
		echo '#!/bin/sh'; \
		echo 'CC="$(CC)" CXX="$(CXX)" BH_SAN_FLAGS="$(BH_SAN_FLAGS)"'; \
		echo 'LIBURING_CFLAGS="$(LIBURING_CFLAGS)" LIBURING_LIBS="$(LIBURING_LIBS)"'; \
		echo 'BH_LA="$(abs_top_builddir)/$(filter %/libbulkhead.la,$(lib_LTLIBRARIES))"'; \
		echo 'top_srcdir="$(abs_top_srcdir)" top_builddir="$(abs_top_builddir)"'; \
		echo 'export CC CXX BH_SAN_FLAGS LIBURING_CFLAGS LIBURING_LIBS BH_LA top_srcdir top_builddir'; \
		echo 'exec $(SHELL) "$(abs_top_srcdir)/tests/test_hpp.sh" "$$@"'; \
	} >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@

# The smallest real use, in C++ (built by make, like examples/basic).
if HAVE_CXX
noinst_PROGRAMS += examples/basic-cxx
examples_basic_cxx_SOURCES = examples/basic.cc
examples_basic_cxx_CXXFLAGS = -std=c++17 -Wall -Wextra -Werror $(BH_SAN_FLAGS)
examples_basic_cxx_LDADD = src/libbulkhead.la
endif
