#!/bin/sh
# run.sh DIR: build the fuzz harnesses with libFuzzer in DIR (clang,
# -fsanitize=fuzzer-no-link plus ASan+UBSan; configured once, like the
# stress suite's sanitized builds), then run each harness named in
# FUZZ_HARNESSES for BH_FUZZ_SECONDS seconds (default 60; one harness:
# BH_FUZZ_SECONDS_<name>), starting from its committed corpus
# (tests/fuzz/corpus/<name>/, read only; new inputs go to DIR/fuzz-corpus/).
# A crash, a divergence from the reference model, a sanitizer report or a
# hang fails the run: the input is kept in DIR/fuzz-artifacts/ and its path
# and bytes (hex) are printed. Called by `make fuzz` with top_srcdir and
# MAKE set. Exits 77 when clang cannot build a libFuzzer program, unless
# BH_FUZZ_REQUIRE=1, which makes that a failure.
set -u
dir=$1
: "${MAKE:=make}"
: "${FUZZ_HARNESSES:=core size_flags demo_flags endpoint shm_hdr pool shm_api}"
secs=${BH_FUZZ_SECONDS:-60}
srcdir=$(cd "$top_srcdir" && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

probe=$dir/probe.c
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return !d + (int)n * 0; }' \
	>"$probe"
if ! clang -fsanitize=fuzzer,address,undefined "$probe" -o "$dir/probe" >/dev/null 2>&1; then
	echo "fuzz: SKIP: clang with libFuzzer is not available (Debian: apt-get install clang)"
	[ "${BH_FUZZ_REQUIRE:-0}" = 1 ] && exit 1
	exit 77
fi

if [ ! -f "$dir/Makefile" ]; then
	if [ -f "$srcdir/config.status" ]; then
		$MAKE distdir distdir="$dir/tree" >/dev/null
		srcdir="$dir/tree"
	fi
	echo "fuzz: configuring $dir (clang, libFuzzer, ASan+UBSan)"
	(cd "$dir" && "$srcdir/configure" CC=clang CFLAGS="-g -O1 -fsanitize=fuzzer-no-link" \
		--enable-sanitizer=address,undefined >configure.out 2>&1) ||
		{ tail -n 20 "$dir/configure.out"; exit 1; }
fi
progs=
for h in $FUZZ_HARNESSES; do
	progs="$progs tests/fuzz/fuzz_$h"
done
# shellcheck disable=SC2086
$MAKE -C "$dir" $progs >"$dir/make.out" 2>&1 || { tail -n 40 "$dir/make.out"; exit 1; }

export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1 detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1 print_stacktrace=1}"
art=$dir/fuzz-artifacts
mkdir -p "$art" "$dir/tmp"
# Temporary files of the harnesses (the segment harness's BH_SHM_DIR) stay
# in DIR: libFuzzer exits without running atexit handlers.
export TMPDIR="$dir/tmp"
failed=0
for h in $FUZZ_HARNESSES; do
	eval "s=\${BH_FUZZ_SECONDS_$h:-$secs}"
	corpus=$srcdir/tests/fuzz/corpus/$h
	work=$dir/fuzz-corpus/$h
	log=$dir/fuzz-$h.log
	mkdir -p "$work"
	dict=
	[ -f "$srcdir/tests/fuzz/$h.dict" ] && dict=-dict=$srcdir/tests/fuzz/$h.dict
	rm -f "$art/$h-"*
	# shellcheck disable=SC2086
	timeout -k 10 $((s + 120)) "$dir/tests/fuzz/fuzz_$h" -max_total_time="$s" -timeout=30 \
		-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/$h-" $dict \
		"$work" "$corpus" >"$log" 2>&1
	rc=$?
	stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -n 1; }
	if [ $rc -eq 0 ]; then
		echo "fuzz: $h: PASS $(stat number_of_executed_units) inputs in ${s} s" \
			"($(stat average_exec_per_sec)/s), $(stat new_units_added) new," \
			"corpus $(ls "$corpus" | wc -l) committed + $(ls "$work" | wc -l) found"
		continue
	fi
	failed=1
	echo "fuzz: $h: FAILED (exit $rc), log $log"
	grep -E 'bhfuzz:|ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error' "$log" |
		head -n 20
	found=0
	for f in "$art/$h-"*; do
		[ -f "$f" ] || continue
		found=1
		echo "fuzz: $h: reproducing input $f"
		echo "fuzz: $h: bytes: $(od -An -v -tx1 "$f" | tr -d ' \n')"
		echo "fuzz: $h: replay: $dir/tests/fuzz/fuzz_$h $f  (or tests/fuzz/replay_$h $f)"
	done
	[ $found = 1 ] || tail -n 20 "$log"
done
exit $failed
