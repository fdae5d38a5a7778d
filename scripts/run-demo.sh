#!/bin/sh
# The main job: install what is missing, build, and run the demo: seed 002's
# payment slowdown without and with bulkheads, then seed 000's async trap
# (permits released when the caller stops waiting vs at the final CQE).
# Arguments go to the containment scenario.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh" build
cd "$top/build"
./tools/bulkhead-demo "$@"
echo
./tools/bulkhead-demo --scenario async-trap || [ $? -eq 69 ] # 69: no io_uring here
