#!/bin/sh
# bulkhead-demo --scenario prefork end to end: 4 worker processes of 8
# threads call payment (which counts what it serves itself) through a
# bulkhead of 4 in each process, then through one host-wide bulkhead of 4.
# The central claims: per-process bulkheads let payment see more than the
# limit (up to 4 x 4); the host-wide one never more than the limit, and it
# is reached; the worker SIGKILLed mid-fault held permits, and exactly those
# were reclaimed. Bad flags exit 2.
#
# Why "exactly" is safe on a loaded machine: the kill comes 0.8 s into a
# fault whose calls take 1.6 s to 2.4 s, after the calls begun before the
# fault (~200 ms) ended and before any begun in it ends, so no permit is
# released then and what the victim holds cannot change.
prog="${top_builddir:-.}/tools/bulkhead-demo"
[ -x "$prog" ] || { echo "no $prog"; exit 99; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
"${top_builddir:-.}/tests/loopback_probe" || exit 77 # payment is called over loopback
. "${top_srcdir:-.}/tests/demo_procs_lib.sh"

bad prefork "--procs" --procs 1
bad prefork "--threads" --threads 0
bad prefork "--pay-bulkhead: this scenario takes permits only" --pay-bulkhead 4+2
bad prefork "--kill-at (1 s) must fall within the fault (3 s to 9 s)" --kill-at 1
bad prefork "--only: expected 'local' or 'shared'" --only with
bad prefork "--rate does not apply to --scenario prefork" --rate 10
bad prefork "--lease does not apply to --scenario prefork" --lease 1s
bad prefork "--workers does not apply" --workers 3
"$prog" --procs 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "procs does not apply to --scenario containment" "$tmp/err" ||
	fail "--procs without prefork: exit $rc: $(cat "$tmp/err")"

limit=4
procs=4
# An empty BH_SHM_DIR of the caller's stays empty: the demo uses its own.
mkdir "$tmp/shm"
BH_SHM_DIR="$tmp/shm" "$prog" --scenario prefork --duration 4 --fault-at 1 --fault-for 2.5 \
	--fault-latency 2s --pay-bulkhead $limit --procs $procs --threads 8 \
	--svg "$tmp/p.svg" --kv "$tmp/p.kv" >"$tmp/p" 2>&1
rc=$?
cat "$tmp/p"
[ "$rc" -eq 0 ] || fail "exit $rc"
k=p.kv
check $k "both runs completed" "local_complete == 1 && shared_complete == 1"
check $k "the limit is the one asked for" "limit == $limit && shared_limit == $limit"
check $k "every call answered correctly" "local_failed == 0 && shared_failed == 0"
check $k "calls were made" "local_ok >= 40 && shared_ok >= 10"
# A bulkhead per worker: payment sees more than the limit, up to procs x limit.
check $k "per-worker bulkheads: payment sees more than the limit" \
	"local_peak >= 2 * limit && local_peak <= procs * limit"
# One host-wide bulkhead: the limit holds at payment, and is reached.
check $k "host-wide bulkhead: payment sees at most the limit" "shared_peak <= limit"
check $k "host-wide bulkhead: the limit is reached" "shared_peak == limit"
# The SIGKILL: a worker holding permits, and exactly those came back.
check $k "a worker holding permits was killed" "shared_killed == 1 && shared_victim_held >= 1"
check $k "its permits were reclaimed, all of them" "shared_reclaimed == shared_victim_held"
# The kill is due at 1.8 s; the first calls of the fault (2 s +- 20%) end
# at 2.6 s at the earliest, so a kill a loaded machine delayed until then
# still finds the victim holding what it took in the fault.
check $k "killed in the fault" "shared_kill_s >= 1.7 && shared_kill_s < 2.6"
grep -q "^ *SIGKILL worker [1-4] at [0-9.]* s, holding [1-4] permits*$" "$tmp/p" ||
	fail "no line for the kill"
grep -q "^summary: prefork, a limit of $limit for payment$" "$tmp/p" || fail "no summary"
grep -q "^  payment saw [0-9]* at most with a bulkhead per worker, [0-9]* with one host-wide bulkhead$" \
	"$tmp/p" || fail "no comparison in the summary"
check_svg "$tmp/p.svg" $procs
[ -z "$(ls -A "$tmp/shm")" ] || fail "the caller's BH_SHM_DIR was used: $(ls "$tmp/shm")"

# A stop signal in a long fault stops it at once: the workers' calls have
# up to 20 s to go, and it neither waits for them nor leaves them behind.
# What ran is still summarised, charted and written, marked interrupted.
"$prog" --scenario prefork --only local --duration 30 --fault-at 1 --fault-for 25 \
	--fault-latency 20s --svg "$tmp/t.svg" --kv "$tmp/t.kv" -q >"$tmp/t" 2>&1 &
pid=$!
sleep 2
kill -TERM "$pid"
i=0
while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 30 ]; do
	sleep 0.1
	i=$((i + 1))
done
if kill -0 "$pid" 2>/dev/null; then
	fail "SIGTERM in the fault: still running 3 s later"
	kill -KILL "$pid"
fi
wait "$pid"
rc=$?
[ "$rc" -eq 143 ] || fail "SIGTERM in the fault: exit $rc, want 143: $(tail -n 2 "$tmp/t")"
grep -qx "interrupted=1" "$tmp/t.kv" || fail "SIGTERM: key=value lines not marked interrupted=1"
grep -q "INTERRUPTED at [0-9.]* s" "$tmp/t.svg" || fail "SIGTERM: the chart is not marked"
tail -n 1 "$tmp/t.svg" | grep -q '^</svg>$' || fail "SIGTERM: no complete chart"

[ "$fails" -eq 0 ] || exit 1
echo "ok: bulkhead-demo --scenario prefork"
