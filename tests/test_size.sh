#!/bin/sh
# bulkhead-size against worked numbers of the usual sizing rules, its own
# rules, the reasons it gives, and bad flags (a clear message on stderr,
# nothing on stdout, exit status 2).
prog="${top_builddir:-.}/tools/bulkhead-size"
[ -x "$prog" ] || { echo "no $prog"; exit 99; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# expect "ARGS" key=value...: run with --kv, compare each key exactly.
expect() {
	args=$1
	shift
	# shellcheck disable=SC2086
	if ! "$prog" $args --kv >"$tmp/out" 2>"$tmp/err"; then
		fail "bulkhead-size $args: exit $?: $(cat "$tmp/err")"
		return
	fi
	for kv in "$@"; do
		grep -qx "$kv" "$tmp/out" ||
			fail "bulkhead-size $args: want $kv, got $(grep "^${kv%%=*}=" "$tmp/out")"
	done
}

# An inventory pool: 160 QPS x 30 ms x 1.3 = 6.24, rounded up to 7.
expect "--qps 160 --p99 30ms" concurrency_raw=6.24 max_concurrent=7 \
	queue_capacity=14 queue_shrunk=0 queue_bound=rule busy_permits=4.8 checks_failed=0
# Rounded generously to 8 permits: queue 16, full queue at 160 QPS = 100 ms,
# and 16 waiters served by 8 permits turning over every 30 ms = 60 ms.
expect "--qps 160 --p99 30 --concurrency 8" max_concurrent=8 queue_capacity=16 \
	queue_over_qps_ms=100 worst_queue_wait_ms=60 timeout_ms=1000
# A payment pool: 50 QPS x 200 ms x 1.3 = 13 (not 14).
expect "--qps 50 --p99 0.2s --timeout 2s" concurrency_raw=13 max_concurrent=13 \
	queue_capacity=26 queue_over_qps_ms=520 worst_queue_wait_ms=400 checks_failed=0
# ...rounded to 15 and 30: 30 / 50 = 0.6 s < 2 s.
expect "--qps 50 --p99 200 -t 2s -c 15" queue_capacity=30 queue_over_qps_ms=600
# Units: the same load written four ways.
expect "--qps 50 --p99 200000us -t 2000ms --safety 1.3" max_concurrent=13 mean_ms=200
# A queue the timeout cannot drain is cut: 2 x 130 = 260 waiters at 1 s
# each / 130 permits is 2 s; 500 ms fits 65 by that and 50 by QPS.
expect "--qps 100 --p99 1s --timeout 500ms" max_concurrent=130 queue_rule=260 \
	queue_capacity=50 queue_shrunk=1 queue_bound=drain checks_failed=0
# Given sizes are evaluated, never changed: 5 permits for 10 busy fail two
# checks (Little's law and capacity at the P99).
expect "--qps 100 --p99 100ms -c 5 -k 0" max_concurrent=5 queue_capacity=0 checks_failed=2
# The fault: 13 permits at 5 s complete 2.6 calls/s; 26 waiters would wait 10 s.
expect "--qps 50 --p99 200ms -t 2s --fault 5s" fault_capacity_qps=2.6 \
	fault_worst_queue_wait_ms=10000
# A mean below the P99 is used by the model, not by the rule.
expect "--qps 160 --p99 30ms --mean 10ms" max_concurrent=7 busy_permits=1.6

# Blocking callers: a queued caller holds a thread, so permits + queue must
# fit the threads the dependency may hold (the demo's payment compartment).
expect "--qps 40 --p99 240ms --mean 200ms --timeout 2s --threads 28" max_concurrent=13 \
	queue_rule=26 queue_capacity=15 queue_shrunk=1 queue_bound=threads threads_held=28 \
	checks_failed=0
# Fewer threads than permits: no room for a queue, and the check fails.
expect "--qps 40 --p99 240ms --threads 10" max_concurrent=13 queue_capacity=0 \
	queue_bound=threads checks_failed=1
expect "--qps 160 --p99 30ms --threads 5" max_concurrent=7 queue_capacity=0 \
	queue_bound=threads checks_failed=1
# Given sizes that overflow the threads are reported, not changed.
expect "--qps 40 --p99 240ms -c 13 -k 26 --threads 28" queue_capacity=26 threads_held=39 \
	checks_failed=1

# The human report carries the same numbers.
"$prog" --qps 160 --p99 30ms >"$tmp/human" 2>&1 || fail "human report: exit $?"
for s in "6.24" "queue_capacity  14" "87.5 ms <= 1 s" "60 ms <= 1 s" "M/M/c/K"; do
	grep -qF "$s" "$tmp/human" || fail "human report lacks '$s'"
done
grep -q FAIL "$tmp/human" && fail "a default plan fails its own checks"

# The reason given for a cut queue is the bound that set it.
# reason "ARGS" "text it must give": the text under queue_capacity.
reason() {
	# shellcheck disable=SC2086
	"$prog" $1 >"$tmp/human" 2>&1 || fail "bulkhead-size $1: exit $?"
	sed -n '/^  queue_capacity/,/^$/p' "$tmp/human" | tr -s ' \n' '  ' >"$tmp/why"
	grep -qF "$2" "$tmp/why" || fail "bulkhead-size $1: reason: $(cat "$tmp/why")"
	if [ "$3" ]; then
		grep -qF "$3" "$tmp/why" && fail "bulkhead-size $1: gives '$3': $(cat "$tmp/why")"
	fi
}
reason "--qps 160 --p99 30ms --threads 5" "max_concurrent alone takes all 5 threads" timeout
reason "--qps 160 --p99 30ms --threads 10" "queued callers hold threads too, and it may hold 10" \
	timeout
reason "--qps 100 --p99 1s --timeout 500ms" \
	"drained at the arrival rate (queue / QPS), would outlast the caller's timeout" threads
reason "--qps 160 --p99 30ms" "= 2 x max_concurrent" cut

# The fault is a slowdown past the P99, as in bulkhead-demo.
expect "--qps 160 --p99 30ms --fault 31ms" fault_ms=31

# Bad flags: exit 2, stdout empty, stderr names the program and the problem.
bad() {
	want=$1
	shift
	"$prog" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 2 ] || fail "bulkhead-size $*: exit $rc, want 2"
	[ -s "$tmp/out" ] && fail "bulkhead-size $*: wrote to stdout"
	grep -q "^bulkhead-size: .*$want" "$tmp/err" || fail "bulkhead-size $*: stderr: $(cat "$tmp/err")"
}
bad "required"
bad "required" --qps 100
bad "--qps" --qps abc --p99 30
bad "--qps" --qps -5 --p99 30
bad "--qps" --qps nan --p99 30
bad "--qps" --qps 0x10 --p99 30
bad "--p99" --qps 100 --p99 30parsecs
bad "--p99" --qps 100 --p99 0
bad "--safety" --qps 100 --p99 30 --safety 0.5
bad "--concurrency" --qps 100 --p99 30 --concurrency 0
bad "--concurrency" --qps 100 --p99 30 --concurrency 99999999999
bad "--queue" --qps 100 --p99 30 --queue -1
bad "--threads" --qps 100 --p99 30 --threads 0
bad "--mean" --qps 100 --p99 30 --mean 40
bad "unknown option" --qps 100 --p99 30 --frobnicate
bad "needs a value" --qps
bad "unexpected argument" --qps 100 --p99 30 extra
bad "permits" --qps 10000000 --p99 60s
bad "--fault (1 ms) must exceed the P99 latency (30 ms" --qps 160 --p99 30ms --fault 1ms
bad "--fault (30 ms) must exceed the P99" --qps 160 --p99 30ms --fault 30ms
bad "--p99" --qps 100 --p99 1h
# An option getopt refuses is named as it is, inside a group too.
bad "unknown option '-z'$" -zq 5 --p99 30
bad "unknown option '-z'$" --qps 160 -zp 30
bad "unknown option '-x'$" -q160 -p30 -xq
bad "--kv takes no value" --kv=1 --qps 1 --p99 1
bad "-p needs a value$" --qps 1 -p
# A size past UINT32_MAX is said as it is, not as 4294967295.
bad "needs 360000000000 permits" --qps 1e7 --p99 3600s --safety 10

# The size before rounding shows why it rounds as it does: 6.0004 is 7.
"$prog" --qps 1000 --p99 4.6157ms >"$tmp/human" 2>&1 || fail "human report: exit $?"
grep -qF "= 6.0004)" "$tmp/human" || fail "raw size: $(grep max_concurrent "$tmp/human")"
"$prog" --qps 10000 --p99 100ms --timeout 100ms >"$tmp/human" 2>&1 || fail "exit $?"
grep -q "e+0" "$tmp/human" && fail "exponent in the report: $(grep "e+0" "$tmp/human")"
# A report that cannot be written is a failure.
if [ -w /dev/full ]; then
	"$prog" --qps 160 --p99 30ms --kv >/dev/full 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 1 ] || fail "stdout on /dev/full: exit $rc, want 1"
fi

# Units: --help, the man page and the parser agree. Every unit --help lists
# is taken (a --help after the flag exits 0 once the flag parsed), and the
# man page lists the same ones in the same order.
help_units=$("$prog" --help | sed -n 's/^TIME is a number with an optional unit: \([a-z, ]*\).*/\1/p' |
	tr -d ,)
[ -n "$help_units" ] || fail "--help lists no units"
for u in $help_units; do
	"$prog" --qps 1 --p99 "2$u" --help >/dev/null 2>&1 || fail "--help lists '$u'; --p99 2$u is refused"
done
page="${top_srcdir:-.}/docs/man/bulkhead-size.1"
man_units=$(sed -n '/^TIME is a number/,/^a bare number/p' "$page" |
	sed -n 's/^\.BR\{0,1\} \([a-z]*\).*/\1/p' | tr '\n' ' ')
[ "$(echo $man_units)" = "$(echo $help_units)" ] ||
	fail "units: --help says '$help_units', $page says '$man_units'"

"$prog" --help >"$tmp/out" 2>&1 && grep -q '^Usage: ' "$tmp/out" || fail "--help"

[ "$fails" -eq 0 ] || exit 1
echo "ok: bulkhead-size"
