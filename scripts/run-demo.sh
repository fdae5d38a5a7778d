#!/bin/sh
# The main job: install what is missing, build, and run the demo: an order
# service whose payment dependency slows from 200 ms to 5 s, without and
# with bulkheads, then the async trap (permits released when the caller
# stops waiting vs at the operation's final CQE), then adaptive limits
# (payment's capacity drops: a static limit vs one that follows it), then
# a service of several processes: a bulkhead per worker process vs one
# host-wide bulkhead, and a bulkhead per instance vs one cluster bulkhead
# (through a redis-server the demo starts itself). Arguments go to the
# containment scenario. Nothing is installed: the end says where things are.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh" build
cd "$top/build"
./tools/bulkhead-demo "$@"
echo
rc=0
./tools/bulkhead-demo --scenario async-trap || rc=$?
[ "$rc" -eq 69 ] && rc=0 # 69: no io_uring here
echo
./tools/bulkhead-demo --scenario adaptive || rc=$?
# 69: a scenario that cannot run here (cluster without redis-server) is not
# a failure; the first real failure is the exit status.
for sc in prefork cluster; do
	echo
	r=0
	./tools/bulkhead-demo --scenario "$sc" || r=$?
	[ "$r" -eq 69 ] && r=0
	[ "$rc" -eq 0 ] && rc=$r
done
cat <<WHERE

Built in $top/build, nothing installed:
  commands   $top/build/tools/bulkhead-demo, $top/build/tools/bulkhead-size (--help)
  manuals    man -l $top/docs/man/bulkhead-demo.1 (bulkhead-size.1, bulkhead.7, bh_*.3)
  charts     in $top/build (the 'chart:' lines above)
  install    make -C $top/build install: library, headers, commands, man pages, docs/*.md
WHERE
exit "$rc"
