#!/bin/sh
# The version set once in configure.ac is the one every artefact carries:
#   - BH_VERSION_MAJOR/_MINOR/_PATCH and BH_VERSION_STRING, as a program
#     compiled against <bulkhead.h> sees them;
#   - Version: of every pkg-config file the build made;
#   - the shared library's soname, libbulkhead.so.(libtool current - age);
#   - the upstream part of the newest debian/changelog entry, when the
#     source tree has one.
# It first checks the same tree against a made-up version, to prove it can
# fail. Run by tests/test_version, which make generates.
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# What the preprocessor makes of EXPR after #include <bulkhead.h>.
expand() {
	printf '#include <bulkhead.h>\n%s\n' "$1" |
		$CPP -P -I"$top_builddir/include" -I"$top_srcdir/include" - 2>/dev/null |
		grep -v '^[[:space:]]*$' | tail -n 1 | tr -d ' '
}

# check VERSION SOVERSION: count in $fails where the tree disagrees.
check() {
	want=$1
	so_want=$2
	got=$(expand 'BH_VERSION_MAJOR.BH_VERSION_MINOR.BH_VERSION_PATCH')
	[ "$got" = "$want" ] || fail "BH_VERSION_MAJOR.MINOR.PATCH is '$got', configure says $want"
	got=$(expand 'BH_VERSION_STRING')
	[ "$got" = "\"$want\"" ] || fail "BH_VERSION_STRING is $got, configure says \"$want\""
	npc=0
	for pc in "$top_builddir"/*.pc; do
		[ -f "$pc" ] || continue
		npc=$((npc + 1))
		got=$(sed -n 's/^Version:[[:space:]]*//p' "$pc")
		[ "$got" = "$want" ] || fail "$(basename "$pc") says Version: $got, configure says $want"
	done
	[ "$npc" -gt 0 ] || fail "no .pc file in $top_builddir"
	so=$(dirname "$BH_LA")/.libs/libbulkhead.so
	if [ -f "$so" ]; then
		got=$($READELF -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
		[ "$got" = "libbulkhead.so.$so_want" ] || fail "soname is $got, want libbulkhead.so.$so_want"
	else
		echo "note: no shared library ($so): soname not checked"
	fi
	cl="$top_srcdir/debian/changelog"
	if [ -f "$cl" ]; then
		# "libbulkhead (EPOCH:UPSTREAM-REVISION) ...": keep UPSTREAM.
		got=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$cl" | sed -e 's/^[0-9]*://' -e 's/-[^-]*$//')
		[ "$got" = "$want" ] || fail "debian/changelog's newest entry is $got, configure says $want"
	fi
}

out=$( (check 9.9.9 99; echo "faults: $fails") )
expected='BH_VERSION_MAJOR BH_VERSION_STRING says+Version:'
[ -f "$(dirname "$BH_LA")/.libs/libbulkhead.so" ] && expected="$expected soname+is"
[ -f "$top_srcdir/debian/changelog" ] && expected="$expected debian/changelog"
for f in $expected; do
	f=$(echo "$f" | tr + ' ')
	echo "$out" | grep -q "$f" || { echo "the check missed a wrong version ($f):"; echo "$out"; exit 1; }
done

check "$VERSION" "$BH_SOVERSION"
[ "$fails" -eq 0 ] || exit 1
said="headers, $npc .pc file(s), soname libbulkhead.so.$BH_SOVERSION"
[ -f "$top_srcdir/debian/changelog" ] && said="$said, debian/changelog"
echo "ok: $said: all say $VERSION"
