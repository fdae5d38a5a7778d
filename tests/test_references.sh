#!/bin/sh
# User-facing text stands on its own: the README, the docs, the man pages,
# the stress suite's notes and the build files never point to documents a
# user does not have ("seed 002", "the seed's", a section sign, "issue 5");
# they state the idea or cite a public source. It first checks made-up text
# with such references, to prove it can fail.
refs='\bseed 0[0-9][0-9]|\bthe seeds?'"'"'s?( |$)|§|\\\(sc|\bissue [0-9]'

# check_files FILE...: print every line that refers to such a document.
check_files() {
	grep -n -i -E "$refs" "$@" /dev/null
}

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' 'as seed 002 shows' 'the seeds'"'"' rule' 'cap it (\(sc7.2.2)' \
	'see issue 5' 'section §3' 'the seed'"'"'s pool' >"$tmp/bad"
printf '%s\n' 'BH_STRESS_SEED=0x1 replays a seed' '--seed N: the seed of the order mix' \
	'the tissue 5' >"$tmp/good"
[ "$(check_files "$tmp/bad" | wc -l)" -eq 6 ] || { echo "the check missed a reference:"; check_files "$tmp/bad"; exit 1; }
[ -z "$(check_files "$tmp/good")" ] || { echo "the check flagged plain words:"; check_files "$tmp/good"; exit 1; }

cd "${top_srcdir:-.}" || exit 99
files=$(ls README.md stress/README.md examples/*.md docs/*.md docs/man/* Makefile.am tools/*.c tools/*.h bulkhead-uring.pc.in \
	configure.ac bulkhead.pc.in autogen.sh */local.mk */*/local.mk scripts/* .ci/run 2>/dev/null)
found=$(check_files $files)
if [ -n "$found" ]; then
	echo "$found"
	echo "FAIL: these lines refer to documents users do not have; state the idea or cite a public source"
	exit 1
fi
echo "ok: $(echo "$files" | wc -w) files refer to no unpublished document"
