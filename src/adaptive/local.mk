# Adaptive limits: a controller that moves a bulkhead's limit from the
# latency it measures. Part of libbulkhead itself, always built.
bhinclude_HEADERS += include/bulkhead/adaptive.h
src_libbhcore_la_SOURCES += \
	src/adaptive/adaptive.c \
	src/adaptive/algo.c \
	src/adaptive/bha.h

dist_man_MANS += \
	docs/man/bh_adaptive_attach.3 \
	docs/man/bh_adaptive_sample.3 \
	docs/man/bh_adaptive_detach.3 \
	docs/man/bh_adaptive_stats.3 \
	docs/man/bh_adaptive_history.3 \
	docs/man/bh_adaptive_reason_name.3
