#!/bin/sh
# The whole suite: install what is missing, then build and test three ways,
# each with `make check` and then the stress suite (`make stress`: every
# program in STRESS_PROGS for BH_STRESS_SECONDS each, 20 here):
#   build/       gcc -Werror
#   build-tsan/  clang -fsanitize=thread
#   build-asan/  gcc -fsanitize=address,undefined
# In build/, every benchmark once in its quick form (`make bench-quick`).
# Then, in build/, the protocol model (`make model`, spin) and each fuzz
# harness for a fixed time (`make fuzz`, libFuzzer: BH_FUZZ_SECONDS; here
# 35 each for the API sequences on a process-local and on a host-wide
# bulkhead, 30 for each command line and the pool, 25 for the segment
# header, 20 for the endpoint strings: about 3.5 minutes in all).
# Exits non-zero on the first failure.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
export BH_STRESS_SECONDS="${BH_STRESS_SECONDS:-20}"
"$top/scripts/install-deps.sh"

check() {
	dir=$1
	shift
	echo "== $dir: $*"
	"$top/scripts/build.sh" "$dir" "$@"
	if ! make -C "$top/$dir" -j"$(nproc)" check >"$top/$dir/check.out" 2>&1; then
		tail -n 30 "$top/$dir/check.out"
		# Each failing test's own log, then the names again last, where a
		# truncated CI record still shows them.
		for f in $(find "$top/$dir/tests" -name '*.trs'); do
			grep -q -E '^:test-result: (FAIL|ERROR)' "$f" || continue
			echo "== ${f%.trs}.log:"
			tail -n 60 "${f%.trs}.log"
		done
		grep -E '^(FAIL|ERROR):' "$top/$dir/check.out" || true
		echo "== $dir: FAILED"
		exit 1
	fi
	grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR)' "$top/$dir/check.out" | tr '\n' ' '
	echo
}

# Compile and run a program against the *installed* header and pkg-config
# file, as C and as C++.
installed() {
	stage="$top/build/stage"
	rm -rf "$stage"
	make -C "$top/build" install DESTDIR="$stage" >/dev/null
	prefix=$(sed -n 's/^prefix=//p' "$top/build/bulkhead.pc")
	export PKG_CONFIG_PATH="$stage$prefix/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage"
	flags="$(pkg-config --cflags --libs bulkhead) -pthread -Wl,-rpath,$stage$prefix/lib"
	cc -std=c11 -Wall -Wextra -Werror "$top/examples/basic.c" $flags -o "$top/build/basic-installed"
	c++ -x c++ -Wall -Wextra -Werror "$top/tests/test_cxx.cc" $flags -o "$top/build/cxx-installed"
	"$top/build/basic-installed" >/dev/null && "$top/build/cxx-installed" >/dev/null
	echo "== installed header, pkg-config, C and C++: ok"
	installed_uring
	unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
}

# The io_uring layer, with nothing but the flags of its own pkg-config
# module: shared as C and C++, and fully static (which needs every library
# the archive uses to be named by `pkg-config --static`). The module is
# installed only when the library was built with liburing.
installed_uring() {
	if ! pkg-config --exists bulkhead-uring; then
		echo "== installed io_uring layer: skipped (built without liburing)"
		return 0
	fi
	b="$top/build"
	flags="$(pkg-config --cflags --libs bulkhead-uring) -Wl,-rpath,$stage$prefix/lib"
	cc -std=gnu11 -Wall -Wextra -Werror "$top/examples/uring_deps.c" $flags -o "$b/uring-installed"
	c++ -x c++ -Wall -Wextra -Werror "$top/tests/test_uring_cxx.cc" $flags -o "$b/uring-cxx-installed"
	cc -static -std=gnu11 -Wall -Wextra -Werror "$top/examples/uring_deps.c" \
		$(pkg-config --static --cflags --libs bulkhead-uring) -o "$b/uring-static-installed"
	for prog in uring-installed uring-cxx-installed uring-static-installed; do
		rc=0
		"$b/$prog" >/dev/null || rc=$?
		if [ "$rc" = 77 ]; then # the kernel has no io_uring: built, not run
			echo "== installed io_uring layer: built; not run (no io_uring)"
			return 0
		fi
		[ "$rc" = 0 ] || { echo "== $prog: exit $rc"; return 1; }
	done
	echo "== installed io_uring layer, pkg-config bulkhead-uring, C, C++, static: ok"
}

# The stress suite in a build that `check` made; one summary line per program.
stress() {
	dir=$1
	echo "== $dir: stress (BH_STRESS_SECONDS=$BH_STRESS_SECONDS per program)"
	if ! make -C "$top/$dir" stress >"$top/$dir/stress.out" 2>&1; then
		tail -n 80 "$top/$dir/stress.out"
		echo "== $dir: stress FAILED"
		exit 1
	fi
	grep -E ': PASS |^stress: ' "$top/$dir/stress.out"
}

# The model and the fuzzers in a build that `check` made; a missing spin or
# libFuzzer is a failure here, not a skip.
model() {
	echo "== $1: model"
	if ! BH_MODEL_REQUIRE=1 make -C "$top/$1" model >"$top/$1/model.out" 2>&1; then
		grep -v '^model: ok' "$top/$1/model.out" | tail -n 40
		echo "== $1: model FAILED"
		exit 1
	fi
	grep -E '^model: [0-9]+ s in all|^model: PASS' "$top/$1/model.out"
}

fuzz() {
	echo "== $1: fuzz"
	if ! BH_FUZZ_REQUIRE=1 BH_FUZZ_SECONDS="${BH_FUZZ_SECONDS:-35}" \
		BH_FUZZ_SECONDS_size_flags="${BH_FUZZ_SECONDS_size_flags:-30}" \
		BH_FUZZ_SECONDS_demo_flags="${BH_FUZZ_SECONDS_demo_flags:-30}" \
		BH_FUZZ_SECONDS_endpoint="${BH_FUZZ_SECONDS_endpoint:-20}" \
		BH_FUZZ_SECONDS_shm_hdr="${BH_FUZZ_SECONDS_shm_hdr:-25}" \
		BH_FUZZ_SECONDS_pool="${BH_FUZZ_SECONDS_pool:-30}" \
		make -C "$top/$1" fuzz >"$top/$1/fuzz.out" 2>&1; then
		tail -n 40 "$top/$1/fuzz.out"
		echo "== $1: fuzz FAILED"
		exit 1
	fi
	grep -E '^fuzz: ' "$top/$1/fuzz.out"
}

# Every benchmark once, in its quick form (bench/run-all.sh --quick): each
# still runs and prints every figure of the README's table. A smoke run: its
# numbers, taken on a loaded machine, mean nothing.
bench_quick() {
	echo "== $1: benchmarks, quick"
	if ! make -C "$top/$1" bench-quick >"$top/$1/bench.out" 2>&1; then
		tail -n 40 "$top/$1/bench.out"
		echo "== $1: benchmarks FAILED"
		exit 1
	fi
	grep -E '^machine: |^Measured on ' "$top/$1/bench.out" | head -n 1
}

check build
installed
bench_quick build
stress build
model build
fuzz build
check build-tsan CC=clang --enable-sanitizer=thread
stress build-tsan
check build-asan --enable-sanitizer=address,undefined
stress build-asan
echo "== all passed"
