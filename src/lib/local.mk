# Shared plumbing for every layer: compiler and CPU helpers, the sizing
# arithmetic the tools share with the library; no protocol.
# Headers only; each layer includes them as "lib/<name>.h".
src_libbhcore_la_SOURCES += src/lib/compiler.h src/lib/list.h \
	src/lib/sizing.h
