#!/bin/sh
# bulkhead-demo --scenario cluster end to end: 3 instance processes of 16
# threads call payment (which counts what it serves itself) through a
# bulkhead of 13 in each, then through one cluster bulkhead of 13 kept in
# the demo's own redis-server. The central claims: per-instance bulkheads
# let payment see more than 13 (up to 39); the cluster bulkhead never more
# than 13, and it is reached; after one instance is SIGKILLed, the
# survivors' shares add up to the limit again within its lease (plus one
# renewal of theirs), and not before the lease could have run out. Without
# redis-server the demo exits 69 with a clear message, and this test skips.
prog="${top_builddir:-.}/tools/bulkhead-demo"
[ -x "$prog" ] || { echo "no $prog"; exit 99; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
"${top_builddir:-.}/tests/loopback_probe" || exit 77 # payment is called over loopback
. "${top_srcdir:-.}/tests/demo_procs_lib.sh"

bad cluster "--lease" --lease 0
bad cluster "--procs" --procs 17
bad cluster "--only: expected 'local' or 'shared'" --only tracked
"$prog" --lease 1s >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "lease does not apply to --scenario containment" "$tmp/err" ||
	fail "--lease without cluster: exit $rc: $(cat "$tmp/err")"

# No redis-server: a clear message, exit status 69, nothing started.
REDIS_SERVER=/nonexistent/redis-server "$prog" --scenario cluster >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 69 ]; then
	grep -q "^bulkhead-demo: scenario cluster cannot run: .*redis-server is not installed" \
		"$tmp/err" || grep -q "no cluster support" "$tmp/err" ||
		fail "no redis-server: stderr: $(cat "$tmp/err")"
	[ -s "$tmp/out" ] && fail "no redis-server: it started"
else
	fail "no redis-server: exit $rc, want 69"
fi

# A redis-server that will not start: its log is shown before the demo
# removes it with its directory, and nothing is left.
printf '%s\n' '#!/bin/sh' \
	'while [ $# -gt 0 ]; do [ "$1" = --logfile ] && log=$2; shift; done' \
	'echo "bad-redis: cannot listen here" >"$log"' 'exit 1' >"$tmp/bad-redis"
chmod +x "$tmp/bad-redis"
TMPDIR="$tmp" REDIS_SERVER="$tmp/bad-redis" "$prog" --scenario cluster --only shared --svg '' \
	>"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 69 ]; then
	[ "$rc" -eq 1 ] || fail "redis-server that exits: exit $rc, want 1"
	grep -q "bad-redis: cannot listen here" "$tmp/err" ||
		fail "redis-server that exits: its log is not shown: $(cat "$tmp/err")"
	ls -d "$tmp"/bulkhead-demo-redis-* >/dev/null 2>&1 &&
		fail "redis-server that exits: its directory is left"
fi

limit=13
procs=3
lease=1
"$prog" --scenario cluster --duration 5 --fault-at 1 --fault-for 3.5 --fault-latency 2s \
	--lease ${lease}s --pay-bulkhead $limit --procs $procs --threads 16 \
	--svg "$tmp/c.svg" --kv "$tmp/c.kv" >"$tmp/c" 2>&1
rc=$?
cat "$tmp/c"
if [ "$rc" -eq 69 ]; then
	echo "SKIP: the cluster scenario cannot run here"
	exit 77
fi
[ "$rc" -eq 0 ] || fail "exit $rc"
k=c.kv
check $k "both runs completed" "local_complete == 1 && shared_complete == 1"
check $k "the limit is the one asked for" "limit == $limit && shared_limit == $limit"
check $k "every call answered correctly" "local_failed == 0 && shared_failed == 0"
check $k "calls were made" "local_ok >= 100 && shared_ok >= 30"
# A bulkhead per instance: payment sees more than the limit, up to 3 x 13.
check $k "per-instance bulkheads: payment sees more than the limit" \
	"local_peak >= 2 * limit && local_peak <= procs * limit"
# One cluster bulkhead: the limit holds at payment, and is reached.
check $k "cluster bulkhead: payment sees at most the limit" "shared_peak <= limit"
check $k "cluster bulkhead: the limit is reached" "shared_peak == limit"
# The SIGKILL: the share moves to the survivors once the lease ran out.
# The victim renewed at most a renewal (lease / 3) before it died, so its
# lease ends between 2/3 and 1 lease after the kill; the survivors see it at
# their next renewal. The parent looks every 100 ms; 0.4 s of slack for a
# loaded machine (a late look only makes the time longer).
check $k "an instance holding permits was killed" "shared_killed == 1 && shared_victim_held >= 1"
check $k "the survivors' shares add up to the limit within a lease and a renewal" \
	"shared_moved_s >= 0 && shared_moved_s <= $lease * 4 / 3 + 0.4"
check $k "not before the victim's lease could have run out" \
	"shared_moved_s >= $lease * 2 / 3 - 0.15"
check $k "and stay there" "shared_survivors_share == limit"
grep -q "^ *SIGKILL instance [1-3] at [0-9.]* s, holding [0-9]* permits*$" "$tmp/c" ||
	fail "no line for the kill"
grep -q "^summary: cluster, a limit of $limit for payment$" "$tmp/c" || fail "no summary"
grep -q "^  payment saw [0-9]* at most with a bulkhead per instance, [0-9]* with one cluster bulkhead$" \
	"$tmp/c" || fail "no comparison in the summary"
grep -q "^redis-server: pid [0-9]* on unix://" "$tmp/c" || fail "no redis-server line"
check_svg "$tmp/c.svg" $procs
# Its redis-server is gone with it.
pid=$(sed -n 's/^redis-server: pid \([0-9]*\) .*/\1/p' "$tmp/c")
dir=$(sed -n 's|^redis-server: pid [0-9]* on unix://\(.*\)/redis.sock .*|\1|p' "$tmp/c")
[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && fail "redis-server $pid still runs"
[ -n "$dir" ] && [ -e "$dir" ] && fail "$dir is left"

[ "$fails" -eq 0 ] || exit 1
echo "ok: bulkhead-demo --scenario cluster"
