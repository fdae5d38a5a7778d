#!/bin/sh
# bulkhead-demo --scenario adaptive end to end: payment serves 16 calls at a
# time, 3 during the fault. A short run, the default shape scaled in time
# (calls of 50 ms instead of 200 ms, deadline 250 ms instead of 1 s, four
# times the payment rate, so the same 13-permit static limit), must show
# what the summary claims:
#   - the adaptive limit fell to near the reduced capacity (median of the
#     fault's second half within a factor 2 of 3),
#   - it came back after the fault (median of the last quarter of the time
#     after it at least the 8 calls payment's load keeps busy),
#   - payment got at least 1.5 times the static limit's successes in the
#     fault (the static run collapses: its 13 calls queue past their
#     deadline at a backend that serves the abandoned ones all the same);
# with inventory unharmed in both runs, the static limit unmoved, and the
# demo's own claim lines agreeing. Bad flags exit 2. About 20 s (40 s when
# the short run misses and runs again, see short_run).
prog="${top_builddir:-.}/tools/bulkhead-demo"
[ -x "$prog" ] || { echo "no $prog"; exit 99; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fails=0
"${top_builddir:-.}/tests/loopback_probe" || exit 77 # it all runs over loopback

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

bad() {
	want=$1
	shift
	"$prog" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 2 ] || fail "bulkhead-demo $*: exit $rc, want 2"
	grep -q "^bulkhead-demo: .*$want" "$tmp/err" || fail "bulkhead-demo $*: stderr: $(cat "$tmp/err")"
}
bad "--fault-capacity does not apply to --scenario containment" --fault-capacity 2
bad "--pay-capacity does not apply to --scenario async-trap" --scenario async-trap --pay-capacity 8
bad "--fault-latency does not apply to --scenario adaptive" --scenario adaptive --fault-latency 3s
bad "--fault-capacity (16) must be below --pay-capacity (16)" --scenario adaptive --fault-capacity 16
bad "--fault-capacity (9) must be below --pay-capacity (8)" --scenario adaptive --pay-capacity 8 \
	--fault-capacity 9
bad "--pay-capacity" --scenario adaptive --pay-capacity 0
bad "--only: expected 'static' or 'adaptive'" --scenario adaptive --only with
bad "--scenario: expected 'containment', 'async-trap', 'adaptive', 'prefork' or 'cluster'" --scenario adaptiv

# The short run and its checks. Its figures are timing: on a loaded machine
# (a sanitizer build, other tests in parallel) the controller's windows
# close later and the limit may still be on its way down when the fault's
# second half is measured. So a run that misses is run once more, and the
# test fails when both miss; the first run's failures stay in the log.
short_run() {
	"$prog" --scenario adaptive --quiet --pay-latency 50ms --pay-timeout 250ms --pay-share 0.8 \
		--duration 9 --fault-at 1.5 --fault-for 4 --kv "$tmp/kv" --svg "$tmp/chart.svg" \
		>"$tmp/run" 2>&1
	rc=$?
	cat "$tmp/run"
	[ "$rc" -eq 0 ] || fail "short run: exit $rc"

	kvfile=$tmp/kv
	# check "description" awk-condition: the condition sees every key of
	# $kvfile as a variable.
	check() {
		vars=$(sed -n 's/^\([a-z_0-9]*\)=\([-0-9.e+a-z]*\)$/\1=\2/p' "$kvfile" | tr '\n' ' ')
		# shellcheck disable=SC2086
		awk $(printf -- '-v %s ' $vars) "BEGIN { exit !($2) }" 2>/dev/null ||
			fail "$1 ($2)"
	}

	[ -s "$tmp/kv" ] || fail "no key=value summary"
	check "both runs completed" "static_complete == 1 && adaptive_complete == 1"
	check "the capacities asked for" "capacity == 16 && fault_capacity == 3"
	check "enough payment orders in the fault" "static_pay_n_fault >= 300 && adaptive_pay_n_fault >= 300"
	# The claims, from the figures themselves.
	check "the adaptive limit fell to near the reduced capacity" \
		"adaptive_limit_late_fault >= 2 && adaptive_limit_late_fault <= 2 * fault_capacity"
	check "the adaptive limit came back after the fault" \
		"pay_need == 8 && adaptive_limit_late_after >= pay_need"
	check "adaptive got at least 1.5 times the static limit's payment successes" \
		"adaptive_pay_goodput_fault >= 1.5 * static_pay_goodput_fault && adaptive_pay_ok_n_fault > 0"
	check "the static limit did not move" \
		"static_limit_late_fault == static_limit_late_after && static_limit_late_fault > 2 * fault_capacity"
	# Both runs isolate: inventory is unharmed, payment keeps to its share.
	check "inventory kept going in both runs (its bulkhead is sized for it; a loaded machine can still shed some)" \
		"static_inv_ok_n_fault >= 0.9 * static_inv_n_fault && adaptive_inv_ok_n_fault >= 0.9 * adaptive_inv_n_fault"
	check "payment kept out of inventory's workers" \
		"static_peak_pay_held < workers - 4 && adaptive_peak_pay_held < workers - 4"
	check "every release accepted" "static_refused_releases == 0 && adaptive_refused_releases == 0"
	check "no result lost" "static_dropped_records == 0 && adaptive_dropped_records == 0"
	check "the demo says what the figures say" \
		"claim_followed == 1 && claim_recovered == 1 && claim_better == 1"
	[ "$(grep -c '^  yes ' "$tmp/run")" -eq 3 ] && ! grep -q '^  NO ' "$tmp/run" ||
		fail "the summary's claim lines: $(sed -n '/^claims/,$p' "$tmp/run")"
	grep -q "^  limit, fault's 2nd half (median) *13 (cap. 3) *$(sed -n 's/^adaptive_limit_late_fault=//p' "$tmp/kv") (cap. 3)$" \
		"$tmp/run" || fail "summary and kv differ on the limit"

	[ "$(head -c 5 "$tmp/chart.svg")" = "<?xml" ] || fail "chart: not XML"
	tail -n 1 "$tmp/chart.svg" | grep -q '^</svg>$' || fail "chart: not closed"
	# the limit of each run, the capacity, and per second three panels of two
	[ "$(grep -c '<polyline' "$tmp/chart.svg")" -ge 9 ] || fail "chart: too few series"
}

before=$fails
short_run
if [ "$fails" -ne "$before" ]; then
	echo "note: the short run missed ($((fails - before)) checks above); running it once more"
	fails=$before
	short_run
fi

# One run only: the other column says so, no claims.
"$prog" --scenario adaptive --quiet --duration 1 --fault-at 0.3 --fault-for 0.5 --only static \
	--pay-latency 50ms --pay-timeout 250ms \
	--svg '' >"$tmp/one" 2>&1 || fail "--only static: exit $?"
grep -q "^  payment orders that succeeded .*(not run)$" "$tmp/one" || fail "--only static: $(cat "$tmp/one")"
grep -q "^claims" "$tmp/one" && fail "--only static: claims on one run"

[ "$fails" -eq 0 ] || exit 1
echo "ok: bulkhead-demo --scenario adaptive"
