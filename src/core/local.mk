# The core, as a convenience library: the shared and static libbulkhead are
# made from it, and tests and stress link it directly to reach the hidden
# hooks (bhi_*) that drive the slow path deterministically.
noinst_LTLIBRARIES += src/libbhcore.la
# The core's files, also built a second time into the shm crash-test copy
# (src/shm/local.mk).
BHCORE_SOURCES = \
	src/core/bulkhead.c \
	src/core/word.c \
	src/core/queue.c \
	src/core/observe.c \
	src/core/hist.c \
	src/core/sync.c \
	src/core/tindex.c \
	src/core/internal.h \
	src/core/backend.h \
	src/core/word.h \
	src/core/queue.h \
	src/core/observe.h \
	src/core/layer.h \
	src/core/sample_hook.h
src_libbhcore_la_SOURCES = $(BHCORE_SOURCES)
src_libbhcore_la_CFLAGS = $(AM_CFLAGS) $(BH_VISIBILITY_CFLAGS)

lib_LTLIBRARIES += src/libbulkhead.la
src_libbulkhead_la_SOURCES = src/core/compat_0_1.c
nodist_EXTRA_src_libbulkhead_la_SOURCES = src/dummy.c
src_libbulkhead_la_LIBADD = src/libbhcore.la
# -z nodelete: dlclose leaves the library mapped. A thread that used it
# keeps a thread-specific value whose destructor (src/core/tindex.c) runs
# when that thread exits, and the fork handlers stay registered too; code
# unmapped under them would crash the program at the thread's exit.
src_libbulkhead_la_LDFLAGS = $(AM_LDFLAGS) -version-info $(BH_LT_VERSION) -no-undefined \
	-Wl,-z,nodelete
if HAVE_LD_VERSION_SCRIPT
src_libbulkhead_la_CPPFLAGS = $(AM_CPPFLAGS) -DBH_LD_VERSION_SCRIPT
src_libbulkhead_la_LDFLAGS += -Wl,--version-script=$(top_srcdir)/src/core/libbulkhead.map
endif
EXTRA_src_libbulkhead_la_DEPENDENCIES = $(top_srcdir)/src/core/libbulkhead.map
EXTRA_DIST += src/core/libbulkhead.map
