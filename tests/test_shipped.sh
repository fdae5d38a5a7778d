#!/bin/sh
# Every file of the source tree that the documentation names exists: the
# README, stress/README.md, docs/*.md, examples/*.md and the man pages name
# sources, scripts, patches and documents (globs and {a,b} lists included).
# In a checkout this catches a dangling name; under `make distcheck` it runs
# in the unpacked tarball, so it proves the tarball ships what its documents
# mention. Built programs (names without an extension) are not sources and
# are not checked. It first checks made-up text, to prove it can fail.
fails=0

# The source paths named in the files given: URLs dropped, roff escapes
# undone, a path starting a word and under a top-level source directory.
named_paths() {
	cat "$@" | sed -e 's#[a-z]*://[^ )>]*##g' -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' |
		grep -o -E '(^|[^A-Za-z0-9_./-])(\./)?(src|include|tests|stress|bench|examples|docs|tools|scripts|m4|\.ci)/[A-Za-z0-9_./{},*-]*' |
		sed -e 's/^[^A-Za-z0-9_.]//' -e 's#^\./##' -e 's/[.,;:]*$//' |
		grep -E '/$|[*{]|\.(c|h|cc|md|sh|patch|map|mk|in|m4|[137])$' | sort -u
}

# expand WORD: one line per path of a {a,b,...} list (nested lists too).
expand() {
	case $1 in
	*\{*\}*)
		pre=${1%%\{*}; rest=${1#*\{}; alts=${rest%%\}*}; post=${rest#*\}}
		echo "$alts" | tr ',' '\n' | while read -r alt; do expand "$pre$alt$post"; done ;;
	*) echo "$1" ;;
	esac
}

# check ROOT FILE...: every path FILE... name exists under ROOT.
check() {
	root=$1
	shift
	set -f # the words are globs for the tree, not for the current directory
	for word in $(named_paths "$@"); do
		for p in $(expand "$word"); do
			# A glob must match at least one file.
			set +f
			set -- $root/$p
			set -f
			[ -e "$1" ] || { echo "FAIL: $p is named but not in the tree"; fails=$((fails + 1)); }
		done
	done
	set +f
}

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tree/docs" "$tmp/tree/stress/mutants" "$tmp/tree/include/bulkhead"
: >"$tmp/tree/docs/a.md"
: >"$tmp/tree/include/bulkhead/pool.h"
cat >"$tmp/doc" <<'D'
see docs/a.md, `stress/mutants/*.patch` and include/bulkhead/{pool,uring}.h;
run ./build/tools/x or bench/bench_core; https://example.org/docs/missing.md
\fBdocs/gone.md\fP
D
check "$tmp/tree" "$tmp/doc" >"$tmp/out"
expected="FAIL: stress/mutants/*.patch is named but not in the tree
FAIL: include/bulkhead/uring.h is named but not in the tree
FAIL: docs/gone.md is named but not in the tree"
[ "$(sort "$tmp/out")" = "$(echo "$expected" | sort)" ] || {
	echo "the check itself is wrong; it said:"; cat "$tmp/out"; exit 1; }
fails=0

top=${top_srcdir:-.}
docs=$(ls "$top/README.md" "$top/stress/README.md" "$top"/docs/*.md "$top"/examples/*.md \
	"$top"/docs/man/* 2>/dev/null)
check "$top" $docs
[ "$fails" -eq 0 ] || exit 1
echo "ok: every source path named in $(echo "$docs" | wc -w) documents exists"
