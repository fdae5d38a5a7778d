#!/bin/sh
# Fails when the shared library exports anything but bh_* functions, or when
# an export carries the wrong symbol version: a name listed in a later node
# of src/core/libbulkhead.map must carry that node's version (an exact name
# outranks the first node's bh_* glob), every other one LIBBULKHEAD_0.1. A
# compat symbol (name@NODE, not the default: a released layout kept for old
# programs, abi/README.md) is allowed only for a name whose default is in a
# later node, at a node of the map.
so=$(ls "${top_builddir:-.}"/src/.libs/libbulkhead.so.* 2>/dev/null | head -n 1)
[ -n "$so" ] || { echo "no shared library built: skip"; exit 77; }
nm=${NM:-nm}
bad=$($nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRW]$/ {print $3}' | grep -v '^bh_' | grep -v '^LIBBULKHEAD_')
if [ -n "$bad" ]; then
	echo "unexpected exports:"; echo "$bad"; exit 1
fi
n=$($nm -D --defined-only "$so" | awk '$2 == "T"' | grep -c ' bh_')
[ "$n" -ge 9 ] || { echo "only $n bh_ functions exported"; exit 1; }

map="${top_srcdir:-.}/src/core/libbulkhead.map"
command -v readelf >/dev/null 2>&1 || { echo "ok: $n bh_ functions exported (no readelf: versions unchecked)"; exit 0; }
# "name node" for every name listed without a wildcard in a node after the first
later=$(sed 's,/\*.*\*/,,' "$map" | awk '
	/^[A-Z_0-9.]+ *\{/ { node = $1; nodes++ }
	nodes > 1 && /^[ \t]+[a-z_0-9]+;/ { name = $1; sub(/;/, "", name); print name, node }')
fails=0
compat=0
for s in $(readelf --dyn-syms -W "$so" | awk '$7 != "UND" && $8 ~ /^bh_/ {print $8}'); do
	name=${s%%@*}
	want=$(echo "$later" | awk -v n="$name" '$1 == n {print $2}')
	want=${want:-LIBBULKHEAD_0.1}
	case $s in
	*@@*) ;;
	*)
		node=${s#*@}
		if [ "$want" = LIBBULKHEAD_0.1 ] || [ "$node" = "$want" ] ||
			! grep -q "^$node *{" "$map"; then
			echo "FAIL: compat symbol $s, but $name's default is $want"; fails=$((fails + 1))
		fi
		compat=$((compat + 1))
		continue
		;;
	esac
	if [ "$s" != "$name@@$want" ]; then
		echo "FAIL: $s, expected $name@@$want"; fails=$((fails + 1))
	fi
done
# The optional layers' functions exist only in a build that has the layer.
has() { grep -q "^#define $1 1" "${top_builddir:-.}/config.h" 2>/dev/null; }
for name in $(echo "$later" | awk '{print $1}'); do
	case $name in
	bh_uring_*) has HAVE_LIBURING || continue ;;
	bh_cluster_*) has HAVE_HIREDIS || continue ;;
	esac
	readelf --dyn-syms -W "$so" | awk '{print $8}' | grep -q "^$name@@" ||
		{ echo "FAIL: $name is listed in $map but not exported"; fails=$((fails + 1)); }
done
[ "$fails" -eq 0 ] || exit 1
echo "ok: $n bh_ functions exported, nothing else, each at its version ($compat compat symbols)"
