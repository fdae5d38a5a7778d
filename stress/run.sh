#!/bin/sh
# run.sh PROG...: run each stress program for BH_STRESS_SECONDS (default 3)
# and print its summary line; on a failure, the report and the log's tail.
# Sanitizer options default to stopping at the first report. A program that
# outlives its own quiesce watchdog is killed and counted as hung. Exits 1 if
# any program failed; exit status 77 (what it needs is missing here, as in
# automake tests) is a skip. Logs are left in PROG.stress.log.
secs=${BH_STRESS_SECONDS:-3}
export BH_STRESS_SECONDS="$secs"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1 detect_stack_use_after_return=1 detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1 print_stacktrace=1}"
# Whole seconds: the program's own run, its quiesce bound (120 s when
# sanitized), and room for a slow start.
limit=$(awk -v s="$secs" 'BEGIN { printf "%d", 2 * s + 240 }')

failed=0
passed=0
skipped=0
for prog in "$@"; do
	log="$prog.stress.log"
	start=$(date +%s)
	timeout -k 10 "$limit" "./$prog" >"$log" 2>&1
	rc=$?
	took=$(($(date +%s) - start))
	if [ "$rc" -eq 0 ] && grep -q ': PASS ' "$log"; then
		grep ': PASS ' "$log"
		passed=$((passed + 1))
		continue
	fi
	if [ "$rc" -eq 77 ]; then # what it needs is missing here (io_uring, redis-server)
		echo "$prog: SKIP: $(tail -n 1 "$log")"
		skipped=$((skipped + 1))
		continue
	fi
	failed=$((failed + 1))
	case $rc in
	124 | 137) why="hung: killed after ${limit}s" ;;
	*) why="exit status $rc after ${took}s" ;;
	esac
	echo "$prog: FAILED ($why); seed line, report and log tail follow:"
	head -n 1 "$log"
	grep -m 1 ': FAIL ' "$log"
	tail -n 40 "$log"
done
echo "stress: $passed passed, $skipped skipped, $failed failed (BH_STRESS_SECONDS=$secs)"
[ "$failed" -eq 0 ]
