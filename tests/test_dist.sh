#!/bin/sh
# The tarball builds: every file that a shipped source includes by a quoted
# name ("lib/hold.h", "cli.h") is shipped too, when the source tree has it
# (a header configure or make writes is not a source). The shipped files
# are make's DISTFILES, one a line in $BH_DISTFILES (a folder ships
# everything under it). A missing header passes every check of a checkout
# and breaks `make distcheck` and every build from the tarball. It first
# checks a made-up tree with one header left out, to prove it can fail.
# Run by tests/test_dist, which make generates with the list.

# shipped LIST PATH: whether PATH, or a folder above it, is in LIST.
shipped() {
	s=$2
	while :; do
		grep -qxF "$s" "$1" && return 0
		case $s in */*) s=${s%/*} ;; *) return 1 ;; esac
	done
}

# check ROOT LIST [MADE]: print each included file that ROOT has but LIST
# lacks, as "SOURCE: INCLUDED", unless make writes it (listed in MADE: a
# build in the source tree, as Debian's, leaves such headers there).
# Quoted includes are looked up as the compilers here do: next to the
# source, then in src/ and include/ (AM_CPPFLAGS).
check() {
	root=$1
	list=$2
	made=${3:-/dev/null}
	grep -E '\.(c|h|cc)$' "$list" | while read -r f; do
		[ -f "$root/$f" ] || continue
		dir=$(dirname "$f")
		sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$root/$f" |
			while read -r inc; do
				for base in "$dir" src include; do
					[ -f "$root/$base/$inc" ] || continue
					# The path from the top, "a/../" steps undone.
					p=$(echo "$base/$inc" | sed -e 's#^\./##' -e 's#/\./#/#g')
					while :; do
						q=$(echo "$p" | sed 's#[^/][^/]*/\.\./##')
						[ "$q" = "$p" ] && break
						p=$q
					done
					shipped "$list" "$p" || grep -qxF "$p" "$made" || echo "$f: $p"
					break
				done
			done
	done
}

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tree/src/core" "$tmp/tree/src/lib" "$tmp/tree/scripts"
echo '#include "lib/a.h"' >"$tmp/tree/src/core/x.c"
echo '#include "../lib/b.h"' >>"$tmp/tree/src/core/x.c"
echo '#include "y.h"' >>"$tmp/tree/src/core/x.c"
echo '#include "gone.h"' >>"$tmp/tree/src/core/x.c"
echo '#include "made.h"' >>"$tmp/tree/src/core/x.c"
: >"$tmp/tree/src/core/made.h"
echo src/core/made.h >"$tmp/made"
: >"$tmp/tree/src/lib/a.h"
: >"$tmp/tree/src/lib/b.h"
: >"$tmp/tree/src/core/y.h"
printf '%s\n' src/core/x.c src/lib/a.h scripts >"$tmp/list"
check "$tmp/tree" "$tmp/list" "$tmp/made" >"$tmp/out"
expected="src/core/x.c: src/lib/b.h
src/core/x.c: src/core/y.h"
[ "$(sort "$tmp/out")" = "$(echo "$expected" | sort)" ] || {
	echo "the check itself is wrong; it said:"; cat "$tmp/out"; exit 1; }

[ -s "$BH_DISTFILES" ] || { echo "no list of shipped files: BH_DISTFILES"; exit 99; }
check "${top_srcdir:-.}" "$BH_DISTFILES" "${BH_MADEFILES:-/dev/null}" >"$tmp/out"
if [ -s "$tmp/out" ]; then
	echo "included by a shipped source, but not shipped:"
	cat "$tmp/out"
	exit 1
fi
echo "ok: every quoted include of $(grep -cE '\.(c|h|cc)$' "$BH_DISTFILES") shipped sources is shipped"
