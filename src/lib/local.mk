# Shared plumbing for every layer: compiler and CPU helpers, the sizing
# arithmetic the tools share with the library, the futex wait/wake and
# clock, the vDSO lookup, the spin policy and the exports' text output; no
# protocol. Each layer includes them as "lib/<name>.h". The .c files of
# BHLIB_SOURCES are built into every library that holds a layer (libbhcore
# here; the shm crash-test copy in src/shm/local.mk); textout.c, which only
# the exports use, into libbhcore alone.
BHLIB_SOURCES = src/lib/futex.c src/lib/futex.h src/lib/spin.c src/lib/spin.h \
	src/lib/vdso.c src/lib/vdso.h
src_libbhcore_la_SOURCES += src/lib/compiler.h src/lib/hold.h src/lib/list.h src/lib/utf8.h \
	src/lib/sizing.h src/lib/textout.c src/lib/textout.h $(BHLIB_SOURCES)
