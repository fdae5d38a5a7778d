#!/bin/sh
# bulkhead-demo end to end: a short run of both runs must show the
# containment (with isolation inventory keeps succeeding while payment is
# slow; without, it fails), bad flags must exit 2, and SIGTERM must stop it
# cleanly (the demo itself fails if a thread or socket it made is left).
# The margins are wide on purpose: this runs on loaded 2-core machines and
# under sanitizers. It asserts outcomes, never timings.
prog="${top_builddir:-.}/tools/bulkhead-demo"
[ -x "$prog" ] || { echo "no $prog"; exit 99; }
tmp=$(mktemp -d) || exit 99
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
"${top_builddir:-.}/tests/loopback_probe" || exit 77 # it all runs over loopback

. "${top_srcdir:-.}/tests/demo_sigterm.sh"

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# ---- bad flags: a clear message, exit status 2, nothing started -----------
bad() {
	want=$1
	shift
	"$prog" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 2 ] || fail "bulkhead-demo $*: exit $rc, want 2"
	grep -q "^bulkhead-demo: .*$want" "$tmp/err" || fail "bulkhead-demo $*: stderr: $(cat "$tmp/err")"
}
bad "unknown option" --frobnicate
bad "--rate" --rate 0
bad "--rate" --rate fast
bad "--workers" --workers -3
bad "--duration" --duration 3parsecs
bad "--pay-bulkhead" --pay-bulkhead 0+4
bad "--pay-bulkhead" --pay-bulkhead 4+x
bad "--only" --only sometimes
bad "--fault-at" --duration 5 --fault-at 9
bad "--fault-latency must exceed" --fault-latency 100ms
bad "needs a value" --rate
bad "unexpected argument" extra
bad "--scenario" --scenario nonsense
# Flags of the other scenario (tests/test_demo_trap.sh runs that one).
bad "--call-deadline does not apply to --scenario containment" --call-deadline 100ms
bad "--only: expected 'without' or 'with'" --only naive
"$prog" --help >"$tmp/out" 2>&1 && grep -q '^Usage: ' "$tmp/out" || fail "--help"

# ---- the containment run ---------------------------------------------------
"$prog" --quiet --duration 7 --fault-at 2 --fault-for 4 --kv "$tmp/kv" \
	--svg "$tmp/chart.svg" >"$tmp/run" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { cat "$tmp/run"; fail "short run: exit $rc"; }
cat "$tmp/run"

kv() {
	sed -n "s/^$1=//p" "$tmp/kv"
}

# check "description" awk-condition: the condition sees every key as a variable.
check() {
	vars=$(sed -n 's/^\([a-z_0-9]*\)=\([-0-9.e+a-z]*\)$/\1=\2/p' "$tmp/kv" | tr '\n' ' ')
	# shellcheck disable=SC2086
	awk $(printf -- '-v %s ' $vars) "BEGIN { exit !($2) }" 2>/dev/null ||
		fail "$1 ($2)"
}

[ -s "$tmp/kv" ] || fail "no key=value summary"
check "both runs completed" "without_complete == 1 && with_complete == 1"
check "enough inventory orders in the fault" "without_inv_n_fault >= 100 && with_inv_n_fault >= 100"
check "inventory healthy before the fault" "without_inv_ok_before >= 0.95 && with_inv_ok_before >= 0.95"
# The containment result, with margins far from what a healthy machine shows
# (about 100% and 60%).
check "with isolation inventory keeps succeeding" "with_inv_ok_fault >= 0.97"
check "without isolation inventory fails" "without_inv_ok_fault <= 0.85"
check "isolation makes the difference" "with_inv_ok_fault - without_inv_ok_fault >= 0.3"
# Payment is shed at once with isolation; without, the shared pool drains into it.
check "payment rejected at once with isolation" "with_pay_rejected_fault > 0"
check "payment took the shared workers" "without_peak_pay_held >= workers * 3 / 4"
check "payment kept out of inventory's workers" "with_peak_pay_held < workers - 4"
check "every release accepted" "without_refused_releases == 0 && with_refused_releases == 0"
check "no result lost" "without_dropped_records == 0 && with_dropped_records == 0"

[ "$(head -c 5 "$tmp/chart.svg")" = "<?xml" ] || fail "chart: not XML"
tail -n 1 "$tmp/chart.svg" | grep -q '^</svg>$' || fail "chart: not closed"
[ "$(grep -c '<polyline' "$tmp/chart.svg")" -ge 6 ] || fail "chart: too few series"
grep -q "summary: orders that arrived during the fault" "$tmp/run" || fail "no summary printed"

# ---- SIGTERM mid-run: prompt, clean, 128 + 15 -------------------------------
# (A background job of a script ignores SIGINT, as shells arrange; Ctrl-C in
# a terminal takes the same path as SIGTERM.)
check_sigterm

[ "$fails" -eq 0 ] || exit 1
echo "ok: bulkhead-demo"
