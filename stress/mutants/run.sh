#!/bin/sh
# Proof that the stress suite catches bugs: apply each purpose-made defect
# (stress/mutants/*.patch, each against the file under src/ that holds the
# code it breaks, with no fuzz) to a scratch copy of the tree, rebuild, run
# every scenario, and report which caught it and how fast.
# Not run by CI: a few minutes per mutant on a small machine.
#
#   stress/mutants/run.sh [-s SECONDS] [-o TABLE.md] [NAME...]
#
# SECONDS is each scenario's budget (default 5). A patch whose header has a
# "Build: tsan" line is run in a ThreadSanitizer build (its defect is a
# memory-ordering one that x86 hardware hides). The unpatched tree runs first
# as a control and must pass everywhere. Cells read "1.2s <what failed>",
# "hang" (killed), or "-" (survived: not caught). The scratch copy lives in
# $TMPDIR and is removed at the end unless BH_MUTANT_KEEP=1.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
secs=5
out=
while getopts s:o: opt; do
	case $opt in
	s) secs=$OPTARG ;;
	o) out=$OPTARG ;;
	*) echo "usage: $0 [-s SECONDS] [-o TABLE.md] [NAME...]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
scenarios="stress_mixed stress_churn stress_hostile stress_deadline"

if [ $# -gt 0 ]; then
	mutants=$*
else
	mutants=$(cd "$here" && ls *.patch | sed 's/\.patch$//')
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/bh-mutants.XXXXXX")
[ "${BH_MUTANT_KEEP:-0}" = 1 ] || trap 'rm -rf "$scratch"' EXIT
tree=$scratch/tree
mkdir -p "$tree"
if [ -e "$top/.git" ]; then
	(cd "$top" && git ls-files -co --exclude-standard | tar cf - -T -) | (cd "$tree" && tar xf -)
else
	# A release tarball: its files. Objects an in-tree build left would be
	# found through VPATH and mix with the scratch builds, so refuse those.
	if [ -f "$top/config.status" ]; then
		echo "$top is configured in place: run 'make distclean' there first" >&2
		exit 1
	fi
	# Leave out build directories made inside it (./build, ./build-tsan, ...).
	set --
	for d in "$top"/*/; do
		[ -f "$d/config.status" ] && set -- "$@" --exclude="./$(basename "$d")"
	done
	(cd "$top" && tar cf - "$@" .) | (cd "$tree" && tar xf -)
fi
# A pristine copy of src/, to undo each mutant before the next one.
orig=$scratch/orig
mkdir -p "$orig"
(cd "$tree" && tar cf - src) | (cd "$orig" && tar xf -)
patched=
# restore: put back the files the last mutant patched, newer than their
# objects so that make rebuilds them.
restore() {
	for f in $patched; do
		cp "$orig/$f" "$tree/$f"
		touch "$tree/$f"
	done
	patched=
}
# A checkout has no configure; a tarball has one and may lack the autotools.
if [ ! -x "$tree/configure" ]; then
	(cd "$tree" && ./autogen.sh) >"$scratch/autogen.log" 2>&1 || {
		echo "autogen failed, see $scratch/autogen.log"; exit 1; }
fi

# configure_build KIND: a build dir per kind, configured once.
configure_build() {
	dir=$scratch/$1
	[ -f "$dir/Makefile" ] && return 0
	mkdir -p "$dir"
	case $1 in
	normal) set -- ;;
	tsan) set -- --enable-sanitizer=thread CC=clang ;;
	esac
	(cd "$dir" && "$tree/configure" "$@") >"$dir/configure.log" 2>&1 || {
		echo "configure ($dir) failed, see $dir/configure.log"; exit 1; }
}

progs() {
	for s in $scenarios; do printf 'stress/%s ' "$s"; done
}

# run_one KIND SCENARIO: prints one cell.
run_one() {
	dir=$scratch/$1
	log=$dir/$2.mutant.log
	start=$(date +%s.%N)
	(cd "$dir" && BH_STRESS_SECONDS=$secs BH_STRESS_QUIESCE_S=10 \
		TSAN_OPTIONS="halt_on_error=1" timeout -k 5 $((secs + 60)) "./stress/$2") \
		>"$log" 2>&1
	rc=$?
	took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
	if [ $rc -eq 0 ]; then
		echo "-"
	elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		echo "hang"
	elif grep -q ': FAIL after' "$log"; then
		sed -n 's/^[a-z_]*: FAIL after \([0-9.]*\) s ([^)]*): \(.*\)/\1s \2/p' "$log" |
			head -n 1 | sed 's/\[[^]]*\] //' | cut -c1-60
	elif grep -q 'ThreadSanitizer' "$log"; then
		printf '%.1fs TSan: %s\n' "$took" \
			"$(grep -m1 -o 'WARNING: ThreadSanitizer: [a-z -]*' "$log" | cut -c27-)"
	else
		printf '%.1fs exit %d\n' "$took" "$rc"
	fi
}

row() {
	printf '| %s | %s |' "$1" "$2"
	for s in $scenarios; do
		printf ' %s |' "$(run_one "$2" "$s")"
	done
	echo
}

header="| mutant | build |"
rule="| --- | --- |"
for s in $scenarios; do
	header="$header ${s#stress_} |"
	rule="$rule --- |"
done
{
	echo "BH_STRESS_SECONDS=$secs per scenario, $(nproc) CPUs, $(date -u +%Y-%m-%d)"
	echo
	echo "$header"
	echo "$rule"
} | tee ${out:+"$out"}

for m in control $mutants; do
	kind=normal
	if [ "$m" != control ]; then
		patch=$here/$m.patch
		[ -f "$patch" ] || { echo "no such mutant: $m" >&2; continue; }
		grep -q '^Build: tsan' "$patch" && kind=tsan
	fi
	configure_build "$kind"
	restore
	[ "$m" != control ] && patched=$(sed -n 's|^+++ b/\([^[:space:]]*\).*|\1|p' "$patch")
	if [ "$m" != control ] && ! (cd "$tree" && patch -s -F0 -p1 <"$patch"); then
		echo "| $m | $kind | does not apply to $patched |" | tee -a ${out:+"$out"}
		continue
	fi
	if ! make -C "$scratch/$kind" -j"$(nproc)" $(progs) >"$scratch/$kind/make.log" 2>&1; then
		echo "| $m | $kind | does not build |" | tee -a ${out:+"$out"}
		continue
	fi
	row "$m" "$kind" | tee -a ${out:+"$out"}
done
restore
