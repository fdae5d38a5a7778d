# Shared plumbing for every layer: compiler and CPU helpers, no protocol.
# Headers only; each layer includes them as "lib/<name>.h".
src_libbhcore_la_SOURCES += src/lib/compiler.h
