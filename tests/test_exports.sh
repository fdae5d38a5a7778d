#!/bin/sh
# Fails when the shared library exports anything but bh_* functions.
so=$(ls "${top_builddir:-.}"/src/.libs/libbulkhead.so.* 2>/dev/null | head -n 1)
[ -n "$so" ] || { echo "no shared library built: skip"; exit 77; }
nm=${NM:-nm}
bad=$($nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRW]$/ {print $3}' | grep -v '^bh_' | grep -v '^LIBBULKHEAD_')
if [ -n "$bad" ]; then
	echo "unexpected exports:"; echo "$bad"; exit 1
fi
n=$($nm -D --defined-only "$so" | awk '$2 == "T"' | grep -c ' bh_')
[ "$n" -ge 9 ] || { echo "only $n bh_ functions exported"; exit 1; }
echo "ok: $n bh_ functions exported, nothing else"
