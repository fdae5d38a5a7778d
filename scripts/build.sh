#!/bin/sh
# build.sh DIR [configure args...]: configure (once) and build in DIR.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$1
shift
[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh >/dev/null 2>&1)
mkdir -p "$top/$dir"
cd "$top/$dir"
[ -f Makefile ] || "$top/configure" --enable-werror "$@" >configure.out
make -j"$(nproc)" >make.out 2>&1 || { tail -n 40 make.out; exit 1; }
