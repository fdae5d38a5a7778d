#!/bin/sh
# The main job: install what is missing, build, and run the containment
# demo (seed 002's payment slowdown, without and with bulkheads).
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh" build
cd "$top/build"
exec ./tools/bulkhead-demo "$@"
