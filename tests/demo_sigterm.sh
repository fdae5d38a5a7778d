# Sourced by the demo tests. check_sigterm [ARGS...]: start bulkhead-demo with
# ARGS and a fault from 1 s, send SIGTERM once the fault shows, and expect a
# prompt, clean stop with status 143 that still summarises the part that
# ran: the summary marked INTERRUPTED, a complete chart marked the same, and
# key=value lines with interrupted=1 in $tmp/term.kv (the caller checks what
# its scenario counted). Uses $prog, $tmp, fail() and sets $pid (the
# caller's EXIT trap kills it if the test dies first).
check_sigterm() {
	"$prog" "$@" --duration 60 --fault-at 1 --svg "$tmp/term.svg" --kv "$tmp/term.kv" \
		>"$tmp/term" 2>&1 &
	pid=$!
	i=0
	while ! grep -qs '^  *2!' "$tmp/term" && [ "$i" -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -q '^  *2!' "$tmp/term" || fail "SIGTERM: the run never reached the fault"
	kill -TERM "$pid"
	i=0
	while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		fail "SIGTERM: still running 10 s later"
	else
		wait "$pid"
		rc=$?
		[ "$rc" -eq 143 ] || { cat "$tmp/term"; fail "SIGTERM: exit $rc, want 143"; }
		grep -q "every thread and socket it started is gone" "$tmp/term" ||
			fail "SIGTERM: no clean stop: $(tail -n 2 "$tmp/term")"
		grep -q "^summary: " "$tmp/term" || fail "SIGTERM: no summary of what ran"
		grep -q "^  INTERRUPTED: run 1/2 .* stopped at [0-9.]* s by " "$tmp/term" ||
			fail "SIGTERM: the summary is not marked as interrupted"
		grep -qx "interrupted=1" "$tmp/term.kv" 2>/dev/null ||
			fail "SIGTERM: no key=value lines marked interrupted=1"
		tail -n 1 "$tmp/term.svg" 2>/dev/null | grep -q '^</svg>$' ||
			fail "SIGTERM: no complete chart"
		grep -q "INTERRUPTED at [0-9.]* s" "$tmp/term.svg" 2>/dev/null ||
			fail "SIGTERM: the chart is not marked as interrupted"
		[ "$(grep -c '<polyline' "$tmp/term.svg" 2>/dev/null)" -ge 3 ] ||
			fail "SIGTERM: the chart shows nothing of what ran"
	fi
	pid=
}
