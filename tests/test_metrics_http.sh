#!/bin/sh
# A real scrape: run examples/metrics_http, fetch /metrics and /metrics.json
# with curl, check what came back, and validate the exposition with promtool
# when it is installed (Debian's prometheus package).
ex="${top_builddir:-.}/examples/metrics_http"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skip"; exit 77; }
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
"${top_builddir:-.}/tests/loopback_probe" || exit 77
"$ex" --seconds 60 >"$tmp/out" &
pid=$!
port=""
for _ in $(seq 200); do
	port=$(sed -n 's|^listening on http://127.0.0.1:\([0-9]*\)/metrics$|\1|p' "$tmp/out")
	[ -n "$port" ] && break
	sleep 0.05
done
[ -n "$port" ] || { echo "example did not start"; exit 1; }
url="http://127.0.0.1:$port"

# Scrape until the load has put something in every histogram we check.
for _ in $(seq 100); do
	curl -sf "$url/metrics" >"$tmp/m" || { echo "scrape failed"; exit 1; }
	grep -q '^bulkhead_hold_seconds_count{name="payment"} [1-9]' "$tmp/m" &&
		grep -q '^bulkhead_wait_seconds_count{name="payment"} [1-9]' "$tmp/m" && break
	sleep 0.1
done
fail=0
# A flag's value that is not a number in range is refused (exit 2), never
# taken for another: an empty one for 0, a count of seconds too large for
# the clock for one that wrapped around and ended the program at once.
for args in "--seconds 18446744074" "--seconds 99999999999999999999" "--seconds=" \
	"--port=" "--port 65536" "--seconds -1"; do
	# shellcheck disable=SC2086
	timeout 5 "$ex" $args >/dev/null 2>&1
	rc=$?
	[ "$rc" = 2 ] || { echo "metrics_http $args: exit $rc, want 2"; fail=1; }
done
for want in \
	'^# TYPE bulkhead_in_flight gauge$' \
	'^bulkhead_limit{name="payment"} 4$' \
	'^bulkhead_limit{name="inventory"} 8$' \
	'^bulkhead_acquired_total{name="inventory"} [1-9]' \
	'^bulkhead_wait_seconds_count{name="payment"} [1-9]' \
	'^bulkhead_hold_seconds_bucket{name="payment",le="+Inf"} [1-9]' \
	'^# TYPE bulkhead_wait_seconds histogram$' \
	'^bulkhead_pool_max_threads{name="dns"} 2$' \
	'^bulkhead_pool_completed_total{name="dns"} [0-9]'; do
	grep -q "$want" "$tmp/m" || { echo "missing: $want"; fail=1; }
done
curl -sf "$url/metrics.json" | grep -q '^{"bulkheads":\[{"name":"payment","limit":4,' ||
	{ echo "bad /metrics.json"; fail=1; }
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/nope")
[ "$code" = 404 ] || { echo "/nope gave $code"; fail=1; }
if command -v promtool >/dev/null 2>&1; then
	if promtool check metrics <"$tmp/m" >"$tmp/lint" 2>&1; then
		echo "promtool: ok"
	else
		echo "promtool rejected the exposition:"; cat "$tmp/lint"; fail=1
	fi
else
	echo "promtool not installed: format checked by tests/test_metrics only"
fi
kill -INT "$pid"
wait "$pid" || { echo "example exited with $?"; fail=1; }
pid=""
[ "$fail" = 0 ] && echo "ok: scraped $(wc -l <"$tmp/m") lines from $url/metrics"
exit "$fail"
