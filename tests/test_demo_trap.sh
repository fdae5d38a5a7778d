#!/bin/sh
# bulkhead-demo --scenario async-trap end to end: a short run must show the
# trap (naive: the bulkhead reports at most its limit while more calls are
# really in flight; tracked: the two counts agree at every check and stay
# within the limit), a run without the call's own deadline must cancel,
# bad flags must exit 2, and SIGTERM must stop it cleanly and summarise what
# ran (the demo itself fails if a thread, socket or ring it made is left). Skipped (77) when the
# build has no liburing or the system refuses io_uring (the demo exits 69).
#
# The margins are wide: with the flags below a healthy machine shows about
# 60 calls really in flight against 16 permits. The tracked run's counts are
# compared by the event loop itself after every round of submissions, on the
# one thread that changes both, so "equal" needs no tolerance. The backend's
# own count lags the loop's: it learns of a request after it was sent, and of
# a cancelled call after its socket was closed - which is before the call
# that takes the freed permit connects, so it stays within the limit too.
prog="${top_builddir:-.}/tools/bulkhead-demo"
[ -x "$prog" ] || { echo "no $prog"; exit 99; }
tmp=$(mktemp -d) || exit 99
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
limit=16
"${top_builddir:-.}/tests/loopback_probe" || exit 77 # payment is called over loopback

. "${top_srcdir:-.}/tests/demo_sigterm.sh"

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# ---- bad flags: a clear message, exit status 2, nothing started -----------
bad() {
	want=$1
	shift
	"$prog" --scenario async-trap "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 2 ] || fail "bulkhead-demo --scenario async-trap $*: exit $rc, want 2"
	grep -q "^bulkhead-demo: .*$want" "$tmp/err" ||
		fail "bulkhead-demo --scenario async-trap $*: stderr: $(cat "$tmp/err")"
}
bad "--workers does not apply to --scenario async-trap" --workers 3
bad "--inv-bulkhead does not apply" --inv-bulkhead 4
bad "--pay-bulkhead: async-trap takes permits only" --pay-bulkhead 16+4
bad "--pay-bulkhead" --pay-bulkhead 0
bad "--only: expected 'naive' or 'tracked'" --only with
bad "--call-deadline" --call-deadline soon
bad "--call-deadline (900 ms) must not exceed --pay-timeout" --call-deadline 900ms
bad "--fault-at" --duration 5 --fault-at 9
# The fault must fit the run here too: its own default is 3 s + 7 s.
bad "the fault must end within --duration (5 s): --fault-at 3 s + --fault-for 7 s ends at 10 s" \
	--duration 5
bad "--fault-latency (200 ms) must exceed the P99 latency (240 ms" --fault-latency 200ms
bad "--rate" --rate 0
"$prog" --call-deadline 100ms >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 2 ] || ! grep -q "call-deadline does not apply to --scenario containment" "$tmp/err"; then
	fail "--call-deadline without async-trap: exit $rc: $(cat "$tmp/err")"
fi

# ---- a system that refuses io_uring: a clear message, exit status 69 --------
refuse="${top_builddir:-.}/tests/no_io_uring"
if [ -x "$refuse" ]; then
	"$refuse" "$prog" --scenario async-trap >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ "$rc" -ne 125 ]; then # 125: no seccomp here, nothing to check
		[ "$rc" -eq 69 ] || fail "io_uring refused: exit $rc, want 69"
		grep -q "^bulkhead-demo: scenario async-trap cannot run: .*refuses io_uring" \
			"$tmp/err" || fail "io_uring refused: stderr: $(cat "$tmp/err")"
	fi
fi

# ---- the trap -----------------------------------------------------------------
run() {
	out=$1
	shift
	"$prog" --scenario async-trap --quiet --duration 5 --fault-at 1 --fault-for 2.5 \
		--fault-latency 1.5s --pay-bulkhead "$limit" --kv "$tmp/$out.kv" "$@" \
		>"$tmp/$out" 2>&1
	rc=$?
	if [ "$rc" -eq 69 ]; then
		cat "$tmp/$out"
		echo "SKIP: async-trap cannot run here"
		exit 77
	fi
	[ "$rc" -eq 0 ] || { cat "$tmp/$out"; fail "$out: exit $rc"; }
}

# check KV "description" awk-condition: the condition sees every key as a
# variable.
check() {
	vars=$(sed -n 's/^\([a-z_0-9]*\)=\([-0-9.e+a-z]*\)$/\1=\2/p' "$tmp/$1" | tr '\n' ' ')
	# shellcheck disable=SC2046,SC2086
	awk $(printf -- '-v %s ' $vars) "BEGIN { exit !($3) }" 2>/dev/null ||
		fail "$2 ($3)"
}

run both --svg "$tmp/both.svg"
cat "$tmp/both"
k=both.kv
[ -s "$tmp/$k" ] || fail "no key=value summary"
check $k "both runs completed" "naive_complete == 1 && tracked_complete == 1"
check $k "the limit is the one asked for" "limit == $limit && naive_limit == $limit"
check $k "enough calls offered" "naive_offered >= 200 && tracked_offered >= 200"
check $k "calls succeed outside the fault" "naive_ok >= 60 && tracked_ok >= 60"
check $k "the loop checked often" "naive_checks >= 100 && tracked_checks >= 100"
# naive: the bulkhead says at most its limit while far more is in flight.
check $k "naive: the bulkhead reports within its limit" "naive_peak_reported <= limit"
check $k "naive: more really in flight in the kernel" "naive_peak_kernel >= 2 * limit"
check $k "naive: more really served by payment" "naive_peak_backend >= 2 * limit"
check $k "naive: the bulkhead was wrong" "naive_mismatched > 0 && naive_max_hidden >= limit"
check $k "naive: callers gave up and the calls ran on" "naive_gave_up > 0 && naive_late > 0"
# tracked: the bulkhead is right at every check, and the limit holds.
check $k "tracked: reported == kernel at every check" \
	"tracked_mismatched == 0 && tracked_max_hidden == 0"
check $k "tracked: reported == kernel at every sample" \
	"tracked_samples >= 25 && tracked_samples_mismatched == 0"
check $k "tracked: within the limit in the kernel" \
	"tracked_peak_kernel <= limit && tracked_peak_reported <= limit"
check $k "tracked: within the limit at payment" "tracked_peak_backend <= limit"
check $k "tracked: the limit was reached and held" \
	"tracked_peak_kernel == limit && tracked_shed > 0"
check $k "tracked: calls ended by their own deadline" "tracked_deadline > 0"
check $k "tracked: the tracker's DONE is the chain's last CQE" "tracked_disagreements == 0"
check $k "every release accepted" "naive_refused_releases == 0 && tracked_refused_releases == 0"

grep -q "^summary: $limit permits" "$tmp/both" || fail "no summary printed"
[ "$(head -c 5 "$tmp/both.svg")" = "<?xml" ] || fail "chart: not XML"
tail -n 1 "$tmp/both.svg" | grep -q '^</svg>$' || fail "chart: not closed"
[ "$(grep -c '<polyline' "$tmp/both.svg")" -eq 6 ] || fail "chart: want 3 series per run"

# ---- no deadline of its own: the caller's cancel ends the call ----------------
run nodeadline --only tracked --call-deadline none --svg ''
k=nodeadline.kv
check $k "only the tracked run" "tracked_complete == 1 && naive_complete == \"\""
check $k "callers gave up and cancelled" \
	"tracked_gave_up > 0 && tracked_cancels == tracked_gave_up"
check $k "reported == kernel at every check" "tracked_mismatched == 0"
check $k "within the limit" "tracked_peak_kernel <= limit && tracked_peak_backend <= limit"

# ---- an output file that cannot be written: nothing starts -----------------
# (69 comes first: the scenario cannot run here, and the run below skips.)
"$prog" --scenario async-trap --kv /nonexistent/x >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 69 ]; then
	[ "$rc" -eq 1 ] || fail "--kv /nonexistent/x: exit $rc, want 1"
	[ -s "$tmp/out" ] && fail "--kv /nonexistent/x: it started: $(head -n 1 "$tmp/out")"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] ||
		fail "--kv /nonexistent/x: want one message: $(cat "$tmp/err")"
fi

# ---- SIGTERM mid-run: prompt, clean, 128 + 15, what ran summarised ----------
check_sigterm --scenario async-trap
check term.kv "stopped: the naive run summarised" \
	"naive_complete == 0 && naive_stopped_s >= 2 && tracked_complete == \"\""
check term.kv "stopped: its calls counted" "naive_offered >= 90 && naive_checks > 0"
grep -q "^  INTERRUPTED: run 1/2 (naive) stopped at [0-9.]* s by Terminated;$" "$tmp/term" ||
	fail "stopped: the summary is not marked: $(sed -n '/^summary/,$p' "$tmp/term")"

[ "$fails" -eq 0 ] || exit 1
echo "ok: bulkhead-demo --scenario async-trap"
