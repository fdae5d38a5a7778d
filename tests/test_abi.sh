#!/bin/sh
# The ABI gate (abi/abi-gate.sh). First it must judge a made-up library
# right (tests/abi/): version 1 is the baseline, and each later version
# makes one change, which the gate must call compatible (0), broken (1) or
# an intentional break (77, a new soname). Then the gate runs on this
# build's libbulkhead against the committed baseline, abi/libbulkhead.abi.
# Run by tests/test_abi, which make generates with the build's settings.
gate="$top_srcdir/abi/abi-gate.sh"
fx="$top_srcdir/tests/abi"
command -v abidw >/dev/null 2>&1 && command -v abidiff >/dev/null 2>&1 ||
	{ echo "no abidw/abidiff (Debian: abigail-tools): skip"; exit 77; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fails=0

# lib NAME MAP SONAME CFLAGS [SOURCES]: build the made-up library NAME.so.
lib() {
	name=$1 map=$2 soname=$3 cflags=$4
	shift 4
	printf '%s\n' "$map" >"$tmp/$name.map"
	# shellcheck disable=SC2086
	${CC:-cc} -O2 -fPIC -shared -fvisibility=hidden $cflags -I"$fx" "$fx/fx.c" "$@" \
		-Wl,-soname,"$soname" -Wl,--version-script="$tmp/$name.map" -o "$tmp/$name.so" ||
		{ echo "FAIL: cannot build the made-up library $name"; fails=$((fails + 1)); return 1; }
}

# expect NAME RC TEXT: the gate says RC, and TEXT, of NAME.so.
expect() {
	name=$1 want=$2 text=$3
	[ -f "$tmp/$name.so" ] || return
	sh "$gate" check "$tmp/fx1.abi" "$tmp/$name.so" "$fx" "$fx/compat" >"$tmp/$name.out" 2>&1
	rc=$?
	if [ "$rc" -ne "$want" ] || ! grep -q -- "$text" "$tmp/$name.out"; then
		echo "FAIL: made-up change '$name': the gate said $rc, want $want and '$text':"
		sed 's/^/    /' "$tmp/$name.out"
		fails=$((fails + 1))
	else
		echo "made-up change '$name': $want ($(grep -m 1 -- "$text" "$tmp/$name.out"))"
	fi
}

V1='FX_1 { global: fx_*; local: *; };'
NEW='FX_1 { global: fx_*; local: *; }; FX_2 { global: fx_new; } FX_1;'
GROWN='FX_1 { global: fx_*; local: *; }; FX_2 { global: fx_stats; } FX_1;'
S=libfx.so.1

lib fx1 "$V1" $S -g && sh "$gate" dump "$tmp/fx1.so" "$fx" "$fx/compat" >"$tmp/fx1.abi" ||
	{ echo "FAIL: cannot make the made-up baseline"; exit 1; }
lib same "$V1" $S -g
lib private "$V1" $S "-g -DFX_PRIVATE"
lib remove "$V1" $S "-g -DFX_REMOVE"
lib field "$V1" $S "-g -DFX_CHANGE_FIELD"
lib return "$V1" $S "-g -DFX_CHANGE_RETURN"
lib grow "$V1" $S "-g -DFX_GROW"
lib add_new "$NEW" $S "-g -DFX_ADD"
lib add_old "$V1" $S "-g -DFX_ADD"
lib grow_versioned "$GROWN" $S "-g -DFX_GROW" "$fx/fx_compat.c"
lib grow_versioned_wrong "$GROWN" $S "-g -DFX_GROW -DFX_COMPAT_WRONG" "$fx/fx_compat.c"
lib soname "$V1" libfx.so.2 "-g -DFX_REMOVE"
lib nodebug "$V1" $S ""

expect same 0 "^ok: 4 symbols"
expect private 0 "^ok: 4 symbols"
expect remove 1 "fx_other@FX_1 was removed"
expect field 1 "data member change"
expect return 1 "fx_ret"
expect grow 1 "type size changed"
expect add_new 0 "added in new version nodes: fx_new@FX_2"
expect add_old 1 "fx_new was added to FX_1, a node the baseline has"
expect grow_versioned 0 "added in new version nodes: fx_stats@FX_2"
expect grow_versioned_wrong 1 "fx_stats"
expect soname 77 "soname changed from libfx.so.1 to libfx.so.2"
expect nodebug 77 "no debug information"
[ "$fails" -eq 0 ] || { echo "the gate misjudged $fails made-up changes"; exit 1; }

# Now the real one.
so="$(dirname "$BH_LA")/.libs/libbulkhead.so"
[ -f "$so" ] || { echo "no shared library built: skip"; exit 77; }
# The baseline is the full library: a build without an optional layer
# (--without-liburing, --without-hiredis) lacks that layer's functions.
for d in HAVE_LIBURING HAVE_HIREDIS; do
	grep -q "^#define $d 1" "$top_builddir/config.h" ||
		{ echo "the gate judged made-up changes right; this build has no $d: the baseline is not its ABI, skip"; exit 77; }
done
sh "$gate" check "$top_srcdir/abi/libbulkhead.abi" "$so" \
	"$top_srcdir/include" "$top_builddir/include" "$top_srcdir/abi/compat"
