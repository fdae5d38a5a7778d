#!/bin/sh
# <bulkhead.hpp> with every C++ compiler here (g++, clang++ and the one
# configure chose), at -std=c++17 and -std=c++20, -Wall -Wextra -Werror:
# builds tests/test_hpp.cc and runs it, against this build's library.
#   - a plain build: as is; under -fsanitize=address,undefined (the
#     header's code is what matters, an uninstrumented library is fine for
#     ASan); and with -fno-exceptions -fno-rtti (C++17 only: what it proves
#     does not depend on the standard, and each build costs seconds);
#   - a sanitized build (--enable-sanitizer): with its flags. ThreadSanitizer
#     must see the library's atomics, so it only runs there; a compiler whose
#     sanitizer runtime cannot be mixed with the library's is skipped, and
#     said so.
# Run by tests/test_hpp, which make generates with the build's settings.
src="$top_srcdir/tests/test_hpp.cc"
libdir="$(dirname "$BH_LA")/.libs"
[ -f "$libdir/libbulkhead.so" ] || { echo "no shared library in $libdir: skip"; exit 77; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

family() {
	case $("$1" --version 2>/dev/null | head -n 1) in
	*clang*) echo clang ;;
	*) echo gcc ;;
	esac
}
lib_family=$(family "${CC:-cc}")
# Without the io_uring layer the library has no bh_uring_*, though the source
# tree's <bulkhead/uring.h> (and liburing's header) may be found.
no_uring=""
grep -q '^#define HAVE_LIBURING 1' "$top_builddir/config.h" || no_uring="-DBH_HPP_NO_URING"

# The compilers, each once.
compilers=""
for c in $CXX g++ clang++; do
	p=$(command -v "$c" 2>/dev/null) || continue
	case " $compilers " in *" $p "*) continue ;; esac
	compilers="$compilers $p"
done
[ -n "$compilers" ] || { echo "no C++ compiler: skip"; exit 77; }

if [ -z "$BH_SAN_FLAGS" ]; then
	modes="plain noexcept asan"
else
	modes="sanitized"
fi
flags_of() {
	case $1 in
	plain) echo "" ;;
	noexcept) echo "-fno-exceptions -fno-rtti" ;;
	asan) echo "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" ;;
	sanitized) echo "$BH_SAN_FLAGS" ;;
	esac
}

fails=0
ran=0
for c in $compilers; do
	fam=$(family "$c")
	for mode in $modes; do
		if [ "$mode" = sanitized ] && [ "$fam" != "$lib_family" ]; then
			case $BH_SAN_FLAGS in
			*address*)
				echo "skip: $(basename "$c") $mode: its ASan runtime cannot load a $lib_family-instrumented library"
				continue ;;
			esac
		fi
		stds="17 20"
		[ "$mode" = noexcept ] && stds=17
		for std in $stds; do
			what="$(basename "$c") -std=c++$std $mode"
			exe="$tmp/test_hpp"
			# shellcheck disable=SC2046,SC2086
			if ! "$c" -std=c++$std -O1 -g -Wall -Wextra -Werror $(flags_of "$mode") $no_uring \
				-I"$top_builddir/include" -I"$top_srcdir/include" $LIBURING_CFLAGS "$src" \
				-L"$libdir" -lbulkhead $LIBURING_LIBS -pthread -Wl,-rpath,"$libdir" \
				-o "$exe" >"$tmp/build.log" 2>&1; then
				echo "FAIL: $what: does not build"
				head -n 40 "$tmp/build.log"
				fails=$((fails + 1))
				continue
			fi
			if "$exe" >"$tmp/run.log" 2>&1; then
				echo "$what: $(tail -n 1 "$tmp/run.log")"
				grep '^skip:' "$tmp/run.log"
			else
				echo "FAIL: $what:"
				tail -n 40 "$tmp/run.log"
				fails=$((fails + 1))
			fi
			ran=$((ran + 1))
			rm -f "$exe"
		done
	done
done
[ "$fails" -eq 0 ] || exit 1
[ "$ran" -gt 0 ] || { echo "nothing could be built here: skip"; exit 77; }
echo "ok: $ran builds of tests/test_hpp.cc passed"
