#!/bin/sh
# build.sh DIR [configure args...]: configure (once) and build in DIR.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$1
shift
if [ ! -x "$top/configure" ]; then
	log=$(mktemp)
	(cd "$top" && ./autogen.sh) >"$log" 2>&1 || { cat "$log"; rm -f "$log"; echo "autogen.sh failed"; exit 1; }
	rm -f "$log"
fi
mkdir -p "$top/$dir"
cd "$top/$dir"
[ -f Makefile ] || "$top/configure" --enable-werror "$@" >configure.out
make -j"$(nproc)" >make.out 2>&1 || { tail -n 40 make.out; exit 1; }
