#!/bin/sh
# sanitized.sh DIR SANITIZERS: configure (once) a build of this source tree
# in DIR with --enable-sanitizer=SANITIZERS, build it and run `make stress`
# there. ThreadSanitizer builds use clang when it is installed. Called by
# `make stress-tsan` and `make stress-asan` with top_srcdir and MAKE set.
# When the source tree is itself configured (an in-tree build), configure
# refuses a second build from it, so DIR gets a copy made by `make distdir`.
set -e
dir=$1
san=$2
: "${MAKE:=make}"
srcdir=$(cd "$top_srcdir" && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

cc=
case $san in
*thread*) command -v clang >/dev/null 2>&1 && cc=clang ;;
esac

if [ ! -f "$dir/Makefile" ]; then
	if [ -f "$srcdir/config.status" ]; then
		$MAKE distdir distdir="$dir/tree" >/dev/null
		srcdir="$dir/tree"
	fi
	echo "stress: configuring $dir (--enable-sanitizer=$san${cc:+ CC=$cc})"
	(cd "$dir" && "$srcdir/configure" --enable-sanitizer="$san" ${cc:+CC=$cc} \
		>configure.out 2>&1) || { tail -n 20 "$dir/configure.out"; exit 1; }
fi
$MAKE -C "$dir" >"$dir/make.out" 2>&1 || { tail -n 40 "$dir/make.out"; exit 1; }
$MAKE -C "$dir" stress
