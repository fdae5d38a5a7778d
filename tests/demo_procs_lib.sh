# Sourced by the multi-process demo tests (test_demo_prefork.sh,
# test_demo_cluster.sh). Uses $prog, $tmp; defines fail(), bad() and check().
fails=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# bad SCENARIO WANT ARGS...: a clear message, exit status 2, nothing started.
bad() {
	sc=$1
	want=$2
	shift 2
	"$prog" --scenario "$sc" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 2 ] || fail "bulkhead-demo --scenario $sc $*: exit $rc, want 2"
	grep -q "^bulkhead-demo: .*$want" "$tmp/err" ||
		fail "bulkhead-demo --scenario $sc $*: stderr: $(cat "$tmp/err")"
	[ -s "$tmp/out" ] && fail "bulkhead-demo --scenario $sc $*: it started"
}

# check KV "description" awk-condition: the condition sees every key as a
# variable.
check() {
	vars=$(sed -n 's/^\([a-z_0-9]*\)=\([-0-9.e+a-z]*\)$/\1=\2/p' "$tmp/$1" | tr '\n' ' ')
	# shellcheck disable=SC2046,SC2086
	awk $(printf -- '-v %s ' $vars) "BEGIN { exit !($3) }" 2>/dev/null ||
		fail "$2 ($3)"
}

# The chart: an SVG document, closed, with a series per run and one per
# process of the shared run.
check_svg() {
	[ "$(head -c 5 "$1")" = "<?xml" ] || fail "chart: not XML"
	tail -n 1 "$1" | grep -q '^</svg>$' || fail "chart: not closed"
	[ "$(grep -c '<polyline' "$1")" -eq $((2 + $2)) ] ||
		fail "chart: want 2 + $2 series, got $(grep -c '<polyline' "$1")"
}
