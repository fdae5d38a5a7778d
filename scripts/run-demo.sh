#!/bin/sh
# The main job: install what is missing, build, run the benchmark that
# compares libbulkhead with glibc sem_t and mutex+condvar semaphores.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh" build
exec "$top/build/bench/bench_core" "$@"
