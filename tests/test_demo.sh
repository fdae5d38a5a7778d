#!/bin/sh
# bulkhead-demo end to end: a short run of both runs must show the
# containment (with isolation inventory keeps succeeding while payment is
# slow; without, it fails) in a summary that never rounds a result away,
# bad flags must exit 2, an output file that cannot be written must fail
# before anything starts, and SIGTERM must stop it cleanly and still
# summarise what ran (the demo itself fails if a thread or socket it made
# is left).
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
bad "unknown option '-z'$" -zq
bad "unknown option '-z'$" --svg x -zq
bad "-r needs a value$" -qr
bad "--rate" --rate 0
bad "--rate" --rate fast
bad "--workers" --workers -3
bad "--duration" --duration 3parsecs
bad "--pay-bulkhead" --pay-bulkhead 0+4
bad "--pay-bulkhead" --pay-bulkhead 4+x
bad "--only" --only sometimes
bad "--fault-at" --duration 5 --fault-at 9
bad "the fault must end within --duration (5 s): --fault-at 3 s + --fault-for 10 s ends at 13 s" \
	--duration 5 --fault-at 3 --fault-for 10
bad "the fault must end within --duration (10 s): --fault-at 2 s + --fault-for 15 s" \
	--duration 10 --fault-at 2 # the default --fault-for
bad "--fault-for" --fault-for 0
# The fault is a slowdown past payment's P99 (200 ms x 1.2), as in bulkhead-size.
bad "--fault-latency (100 ms) must exceed the P99 latency (240 ms" --fault-latency 100ms
bad "--fault-latency (220 ms) must exceed the P99 latency (240 ms" --fault-latency 220ms
bad "--fault-latency (300 ms) must exceed the P99 latency (300 ms" --fault-latency 300ms \
	--pay-latency 250ms
bad "needs a value" --rate
bad "unexpected argument" extra
bad "--scenario" --scenario nonsense
# Flags of the other scenario (tests/test_demo_trap.sh runs that one).
bad "--call-deadline does not apply to --scenario containment" --call-deadline 100ms
bad "--only: expected 'without' or 'with'" --only naive
bad "--pay-latency" --pay-latency 1h
"$prog" --help >"$tmp/out" 2>&1 && grep -q '^Usage: ' "$tmp/out" || fail "--help"

# Units: --help, the man page and the parser agree (the table bulkhead-size
# uses too). A --help after the flag exits 0 once the flag parsed.
help_units=$("$prog" --help | sed -n 's/^TIME is a number with an optional unit: \([a-z, ]*\)\..*/\1/p' |
	tr -d ,)
[ -n "$help_units" ] || fail "--help lists no units"
for u in $help_units; do
	case $u in # two seconds (one minute) in each, for --duration's range
	ns) v=2000000000 ;; us) v=2000000 ;; ms) v=2000 ;; s) v=2 ;; min) v=1 ;;
	*) v=; fail "--help lists '$u', which this test does not know" ;;
	esac
	[ -z "$v" ] || "$prog" --duration "$v$u" --help >/dev/null 2>&1 ||
		fail "--help lists '$u'; --duration $v$u is refused"
done
page="${top_srcdir:-.}/docs/man/bulkhead-demo.1"
man_units=$(sed -n '/^TIME is a number/,/^a bare number/p' "$page" |
	sed -n 's/^\.BR\{0,1\} \([a-z]*\).*/\1/p' | tr '\n' ' ')
# shellcheck disable=SC2086
[ "$(echo $man_units)" = "$(echo $help_units)" ] ||
	fail "units: --help says '$help_units', $page says '$man_units'"

# ---- output files: checked before anything starts, one message, exit 1 ----
for flag in --svg --kv; do
	"$prog" --quiet --duration 2 --fault-at 1 --fault-for 0.5 --only with \
		"$flag" /nonexistent/x >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 1 ] || fail "$flag /nonexistent/x: exit $rc, want 1"
	[ -s "$tmp/out" ] && fail "$flag /nonexistent/x: it started: $(head -n 1 "$tmp/out")"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qx "bulkhead-demo: cannot write /nonexistent/x: .*" "$tmp/err" ||
		fail "$flag /nonexistent/x: want one message, got: $(cat "$tmp/err")"
done

# A file that exists already is left as it was when the demo does not run:
# a bad --kv path costs its message, not the chart of an earlier run.
echo "an earlier chart" >"$tmp/old.svg"
"$prog" --quiet --duration 2 --fault-at 1 --fault-for 0.5 --only with \
	--svg "$tmp/old.svg" --kv /nonexistent/x >/dev/null 2>&1
if [ ! -e "$tmp/old.svg" ]; then
	fail "--svg FILE --kv /nonexistent/x: FILE, which existed before, was removed"
elif [ "$(cat "$tmp/old.svg")" != "an earlier chart" ]; then
	fail "--svg FILE --kv /nonexistent/x: FILE, which existed before, was changed"
fi

# ---- the containment run ---------------------------------------------------
# Both files exist, longer than what the run writes: they are replaced whole.
awk 'BEGIN { for (i = 0; i < 20000; i++) print "left_over=" i }' >"$tmp/kv"
cp "$tmp/kv" "$tmp/chart.svg"
"$prog" --quiet --duration 7 --fault-at 2 --fault-for 4 --kv "$tmp/kv" \
	--svg "$tmp/chart.svg" >"$tmp/run" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { cat "$tmp/run"; fail "short run: exit $rc"; }
cat "$tmp/run"

kvfile=$tmp/kv
kv() {
	sed -n "s/^$1=//p" "$kvfile"
}

# check "description" awk-condition: the condition sees every key of
# $kvfile as a variable.
holds() {
	vars=$(sed -n 's/^\([a-z_0-9]*\)=\([-0-9.e+a-z]*\)$/\1=\2/p' "$kvfile" | tr '\n' ' ')
	# shellcheck disable=SC2086
	awk $(printf -- '-v %s ' $vars) "BEGIN { exit !($1) }" 2>/dev/null
}
check() {
	holds "$2" || fail "$1 ($2)"
}
# The absolute figures assume the machine ran the demo on time. A stall of
# the whole demo (a loaded or paused VM) shows as a load generator that woke
# late, and sends a burst of orders that no bulkhead was sized for; then only
# the comparison between the runs is checked.
check_unless_stalled() {
	if holds "without_late_max_ms > 60 || with_late_max_ms > 60"; then
		echo "note: the machine stalled the demo (the load generator woke" \
			"$(kv without_late_max_ms) / $(kv with_late_max_ms) ms late): not checked: $1"
	else
		check "$1" "$2"
	fi
}

[ -s "$tmp/kv" ] || fail "no key=value summary"
check "both runs completed" "without_complete == 1 && with_complete == 1"
check "enough inventory orders in the fault" "without_inv_n_fault >= 100 && with_inv_n_fault >= 100"
grep -q '^without_late_max_ms=[0-9.]*$' "$kvfile" && grep -q '^with_late_max_ms=[0-9.]*$' "$kvfile" ||
	fail "no lateness of the load generator in the summary"
check_unless_stalled "inventory healthy before the fault" \
	"without_inv_ok_before >= 0.95 && with_inv_ok_before >= 0.95"
check "inventory p99 before the fault within its deadline" \
	"without_inv_p99_before_ms > 0 && without_inv_p99_before_ms <= 1000 && with_inv_p99_before_ms > 0 && with_inv_p99_before_ms <= 1000"
check "not interrupted" "interrupted == 0"
# The containment result, with margins far from what a healthy machine shows
# (about 100% and 60%).
check_unless_stalled "with isolation inventory keeps succeeding" "with_inv_ok_fault >= 0.97"
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
grep -q left_over "$tmp/chart.svg" "$tmp/kv" && fail "an existing file's old content is left after the run's"
grep -q "summary: orders that arrived during the fault" "$tmp/run" || fail "no summary printed"
grep -q "^  before the fault: inventory p99  *[0-9.]*m\{0,1\}s  *[0-9.]*m\{0,1\}s$" "$tmp/run" ||
	fail "no inventory p99 before the fault: $(grep 'before the fault' "$tmp/run")"

# Every percentage of the summary comes with its counts, and says 100% only
# when they are equal, 0% only when nothing: "99.5% (995 of 1000)".
sed -n '/^summary:/,$p' "$tmp/run" | grep '%' >"$tmp/pct"
[ "$(grep -c '%' "$tmp/pct")" -ge 4 ] || fail "summary: too few percentages"
awk '{
	for (i = 1; i <= NF; i++) {
		if ($i !~ /%$/ || $i == "%")
			continue
		if ($(i + 1) !~ /^\([0-9]+$/ || $(i + 2) != "of" || $(i + 3) !~ /^[0-9]+\)$/) {
			print "no counts: " $0; bad = 1; continue
		}
		part = substr($(i + 1), 2) + 0; whole = $(i + 3) + 0
		if (($i == "100%") != (part == whole) || ($i == "0%") != (part == 0)) {
			print "rounded: " $0; bad = 1
		}
	}
} END { exit bad }' "$tmp/pct" || fail "summary percentages: $(cat "$tmp/pct")"
# The counts are the ones --kv gives.
grep -q "^  inventory orders that succeeded .* of $(kv without_inv_n_fault)) .* of $(kv with_inv_n_fault))$" \
	"$tmp/run" || fail "summary counts differ from the kv ones"

# ---- SIGTERM mid-run: prompt, clean, 128 + 15 -------------------------------
# (A background job of a script ignores SIGINT, as shells arrange; Ctrl-C in
# a terminal takes the same path as SIGTERM.)
check_sigterm
kvfile=$tmp/term.kv
check "stopped: run 1 summarised" \
	"without_complete == 0 && without_stopped_s >= 2 && with_complete == \"\""
check "stopped: the orders before the fault counted" "without_inv_n_before >= 100"
check "stopped: the fault so far counted" "without_inv_n_fault > 0"
grep -q "^  INTERRUPTED: run 1/2 (without isolation) stopped at [0-9.]* s by Terminated;$" \
	"$tmp/term" || fail "stopped: the summary is not marked: $(sed -n '/^summary/,$p' "$tmp/term")"

[ "$fails" -eq 0 ] || exit 1
echo "ok: bulkhead-demo"
