# Sourced by the demo tests. check_sigterm [ARGS...]: start bulkhead-demo with
# ARGS and a fault from 1 s, send SIGTERM once the fault shows, and expect a
# prompt, clean stop with status 143. Uses $prog, $tmp, fail() and sets $pid
# (the caller's EXIT trap kills it if the test dies first).
check_sigterm() {
	"$prog" "$@" --duration 60 --fault-at 1 --svg '' >"$tmp/term" 2>&1 &
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
	fi
	pid=
}
