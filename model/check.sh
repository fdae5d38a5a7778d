#!/bin/sh
# Model-check the core protocol (model/bulkhead.pml) and the host-wide
# bulkhead's recovery protocol (model/shm.pml, the runs named shm-*) with
# Spin.
#
#   model/check.sh [-j JOBS] [-o OUTDIR] [NAME...]
#
# Runs every verification in the table below (or only the NAMEs given):
#   pass   the real model: a complete search with no error;
#   fail   a planted defect (MUTANT_*) or a witness (REACH=W_*): the search
#          must find an error and write a counterexample trail.
# Each run's pan output, trail and replay land in OUTDIR (default
# ./model-out); OUTDIR/summary.md gets a table of the state spaces.
# Exits 0 when every run went as expected, 1 otherwise, 77 when spin or a
# C compiler is missing. PAN_CFLAGS (default -O0) compiles the verifiers.
set -u
here=$(cd "$(dirname "$0")" && pwd)
model=$here/bulkhead.pml
jobs=${BH_MODEL_JOBS:-2}
out=${BH_MODEL_OUT:-$PWD/model-out}
cc=${CC:-cc}
pan_cflags=${PAN_CFLAGS:--O0}
per_run=${BH_MODEL_TIMEOUT:-600}

# name | expect | mode | spin defines
# mode: safety (assertions, invariants, invalid end states = lost wakeups)
#       live   (the no_lost_wakeup LTL claim under weak fairness)
runs() {
	cat <<'EOF'
basic-fair            pass safety -DCFG_basic -DFAIR=1
basic-unfair          pass safety -DCFG_basic -DFAIR=0
basic-fair-spurious   pass safety -DCFG_basic -DFAIR=1 -DSPURIOUS=1
weighted-fair         pass safety -DCFG_weighted -DFAIR=1
weighted-unfair       pass safety -DCFG_weighted -DFAIR=0
leave-fair            pass safety -DCFG_leave -DFAIR=1
leave-unfair          pass safety -DCFG_leave -DFAIR=0
cancel-fair           pass safety -DCFG_cancel -DFAIR=1
cancel-unfair         pass safety -DCFG_cancel -DFAIR=0
close-fair            pass safety -DCFG_close -DFAIR=1
close-unfair          pass safety -DCFG_close -DFAIR=0
resize-fair           pass safety -DCFG_resize -DFAIR=1
close-resize-fair     pass safety -DCFG_close_resize -DFAIR=1
close-resize-unfair   pass safety -DCFG_close_resize -DFAIR=0
resize-unfair         pass safety -DCFG_resize -DFAIR=0
prewake-fair          pass safety -DCFG_prewake -DFAIR=1
prewake-unfair        pass safety -DCFG_prewake -DFAIR=0
live-basic-fair       pass live   -DCFG_basic -DFAIR=1
live-basic-unfair     pass live   -DCFG_basic -DFAIR=0
live-weighted-fair    pass live   -DCFG_weighted -DFAIR=1
live-weighted-unfair  pass live   -DCFG_weighted -DFAIR=0
live-leave-unfair     pass live   -DCFG_leave -DFAIR=0
live-cancel-unfair    pass live   -DCFG_cancel -DFAIR=0
live-close-unfair     pass live   -DCFG_close -DFAIR=0
live-resize-fair      pass live   -DCFG_resize -DFAIR=1
live-prewake-unfair   pass live   -DCFG_prewake -DFAIR=0
reach-leave_granted   fail safety -DCFG_basic -DFAIR=1 -DREACH=W_leave_granted
reach-leave_timeout   fail safety -DCFG_basic -DFAIR=0 -DREACH=W_leave_timeout
reach-cancel_granted  fail safety -DCFG_cancel -DFAIR=1 -DREACH=W_cancel_granted
reach-cancel_queued   fail safety -DCFG_cancel -DFAIR=0 -DREACH=W_cancel_queued
reach-async_cancel_late fail safety -DCFG_cancel -DFAIR=1 -DREACH=W_async_cancel_late
reach-async_cancel_won fail safety -DCFG_cancel -DFAIR=1 -DREACH=W_async_cancel_won
reach-compete_lost    fail safety -DCFG_basic -DFAIR=0 -DREACH=W_compete_lost
reach-starving_handoff fail safety -DCFG_basic -DFAIR=0 -DREACH=W_starving_handoff
reach-barge_woken     fail safety -DCFG_basic -DFAIR=0 -DREACH=W_barge_woken
reach-prewake         fail safety -DCFG_prewake -DFAIR=1 -DREACH=W_prewake
reach-futex_again     fail safety -DCFG_basic -DFAIR=1 -DREACH=W_futex_again
reach-close_fails     fail safety -DCFG_close -DFAIR=1 -DREACH=W_close_fails
reach-shrink_fails    fail safety -DCFG_resize -DFAIR=1 -DREACH=W_shrink_fails
reach-woken_wakes     fail safety -DCFG_basic -DFAIR=0 -DREACH=W_woken_wakes
mutant-admit-ignores-close     fail safety -DCFG_close -DFAIR=1 -DMUTANT_admit_ignores_close
mutant-cancel-gives-back-twice fail safety -DCFG_cancel -DFAIR=1 -DMUTANT_cancel_gives_back_twice
mutant-cancel-keeps-grant      fail safety -DCFG_cancel -DFAIR=1 -DMUTANT_cancel_keeps_grant
mutant-close-skips-head        fail safety -DCFG_close -DFAIR=1 -DMUTANT_close_skips_head
mutant-fair-barging            fail safety -DCFG_basic -DFAIR=1 -DMUTANT_fair_barging
mutant-handoff-no-take         fail safety -DCFG_basic -DFAIR=1 -DMUTANT_handoff_no_take
mutant-head-leave-no-dispatch  fail safety -DCFG_leave -DFAIR=1 -DMUTANT_head_leave_no_dispatch
mutant-prewake-no-wake         fail safety -DCFG_prewake -DFAIR=1 -DMUTANT_prewake_no_wake
mutant-release-counts-twice    fail safety -DCFG_basic -DFAIR=1 -DMUTANT_release_counts_twice
mutant-release-no-wake         fail safety -DCFG_basic -DFAIR=1 -DMUTANT_release_no_wake
mutant-shrink-keeps-oversized  fail safety -DCFG_resize -DFAIR=1 -DMUTANT_shrink_keeps_oversized
mutant-resize-clears-closed    fail safety -DCFG_close_resize -DFAIR=1 -DMUTANT_resize_clears_closed
mutant-timeout-counted-twice   fail safety -DCFG_basic -DFAIR=1 -DMUTANT_timeout_counted_twice
mutant-timeout-drops-grant     fail safety -DCFG_basic -DFAIR=1 -DMUTANT_timeout_drops_grant
mutant-timeout-no-unlink       fail safety -DCFG_basic -DFAIR=1 -DMUTANT_timeout_no_unlink
mutant-unqueue-keeps-node      fail safety -DCFG_basic -DFAIR=1 -DMUTANT_unqueue_keeps_node
mutant-wake-batch-overflow     fail safety -DCFG_close -DFAIR=1 -DMUTANT_wake_batch_overflow
mutant-woken-mark-stays        fail safety -DCFG_basic -DFAIR=0 -DMUTANT_woken_mark_stays
mutant-give-tests-queue-early  fail safety -DCFG_basic -DFAIR=1 -DMUTANT_give_tests_queue_early
mutant-take1-ignores-queue     fail safety -DCFG_basic -DFAIR=1 -DMUTANT_take1_ignores_queue
live-mutant-release-no-wake    fail live   -DCFG_basic -DFAIR=1 -DMUTANT_release_no_wake
live-mutant-woken-mark-stays   fail live   -DCFG_basic -DFAIR=0 -DMUTANT_woken_mark_stays
live-mutant-head-leave-no-dispatch fail live -DCFG_leave -DFAIR=1 -DMUTANT_head_leave_no_dispatch
live-mutant-give-tests-queue-early fail live -DCFG_basic -DFAIR=1 -DMUTANT_give_tests_queue_early
shm-2proc-1permit-2rounds pass safety -DNPROC=2 -DLIMIT=1 -DROUNDS=2
shm-3proc-1permit     pass safety -DNPROC=3 -DLIMIT=1
shm-3proc-2permits    pass safety -DNPROC=3 -DLIMIT=2
shm-2proc-2kills      pass safety -DNPROC=2 -DLIMIT=1 -DKILLS=2
shm-reach-recoverer_died fail safety -DNPROC=2 -DLIMIT=1 -DKILLS=2 -DREACH=W_recoverer_died
shm-reach-rebuild     fail safety -DNPROC=3 -DLIMIT=1 -DREACH=W_rebuild
shm-reach-takeover    fail safety -DNPROC=3 -DLIMIT=1 -DREACH=W_takeover
shm-reach-dead_grant  fail safety -DNPROC=3 -DLIMIT=1 -DREACH=W_dead_grant
shm-reach-reclaim     fail safety -DNPROC=3 -DLIMIT=1 -DREACH=W_reclaim
shm-reach-gave_up     fail safety -DNPROC=3 -DLIMIT=1 -DREACH=W_gave_up
shm-reach-below_zero  fail safety -DNPROC=3 -DLIMIT=1 -DREACH=W_below_zero
shm-reach-grant_replayed fail safety -DNPROC=3 -DLIMIT=1 -DREACH=W_grant_replayed
shm-mutant-trust-open-ledger     fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_trust_open_ledger
shm-mutant-census-before-freeze  fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_census_before_freeze
shm-mutant-no-wait-windows       fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_no_wait_windows
shm-mutant-reclaim-skips-granted fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_reclaim_skips_granted
shm-mutant-claim-no-freeze-check fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_claim_no_freeze_check
shm-mutant-takeover-no-rebuild   fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_takeover_no_rebuild
shm-mutant-reclaim-no-dispatch   fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_reclaim_no_dispatch
shm-mutant-free-late-registrant  fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_free_late_registrant
shm-mutant-keep-dead-looking-alive fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_keep_dead_looking_alive
shm-mutant-take-no-window        fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_take_no_window
shm-mutant-open-ignores-in       fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_open_ignores_in
shm-mutant-open-ignores-out      fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_open_ignores_out
shm-mutant-no-replay             fail safety -DNPROC=2 -DLIMIT=1 -DKILLS=2 -DMUTANT_no_replay
shm-mutant-replay-ignores-epoch  fail safety -DNPROC=2 -DLIMIT=1 -DKILLS=2 -DMUTANT_replay_ignores_epoch
shm-mutant-free-before-commit    fail safety -DNPROC=2 -DLIMIT=1 -DKILLS=2 -DMUTANT_free_before_commit
shm-mutant-no-grant-replay       fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_no_grant_replay
shm-mutant-grant-replay-ignores-state fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_grant_replay_ignores_state
shm-mutant-grant-replay-ignores-bit   fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_grant_replay_ignores_bit
shm-mutant-rebuild-keeps-held    fail safety -DNPROC=3 -DLIMIT=1 -DMUTANT_rebuild_keeps_held
shm-unfair-2proc-1permit          pass safety -DNPROC=2 -DLIMIT=1 -DFAIR=0
shm-unfair-2proc-1permit-2rounds  pass safety -DNPROC=2 -DLIMIT=1 -DROUNDS=2 -DFAIR=0
shm-unfair-3proc-1permit          pass safety -DNPROC=3 -DLIMIT=1 -DFAIR=0
shm-unfair-3proc-2permits         pass safety -DNPROC=3 -DLIMIT=2 -DFAIR=0
shm-unfair-2proc-2kills           pass safety -DNPROC=2 -DLIMIT=1 -DKILLS=2 -DFAIR=0
shm-unfair-reach-barge_woken      fail safety -DNPROC=2 -DLIMIT=1 -DROUNDS=2 -DFAIR=0 -DREACH=W_barge_woken
shm-unfair-reach-compete_lost     fail safety -DNPROC=2 -DLIMIT=1 -DROUNDS=2 -DFAIR=0 -DREACH=W_compete_lost
shm-unfair-reach-waker_died       fail safety -DNPROC=2 -DLIMIT=1 -DFAIR=0 -DREACH=W_waker_died
shm-unfair-reach-dead_woken_head  fail safety -DNPROC=2 -DLIMIT=1 -DFAIR=0 -DREACH=W_dead_woken_head
shm-unfair-reach-rebuild_wakes    fail safety -DNPROC=3 -DLIMIT=1 -DFAIR=0 -DREACH=W_rebuild_wakes
shm-unfair-reach-rewake           fail safety -DNPROC=3 -DLIMIT=1 -DFAIR=0 -DREACH=W_rewake
shm-unfair-reach-rewaker_died     fail safety -DNPROC=3 -DLIMIT=1 -DKILLS=2 -DFAIR=0 -DREACH=W_rewaker_died
shm-unfair-mutant-dead-woken-mark-stays fail safety -DNPROC=2 -DLIMIT=1 -DFAIR=0 -DMUTANT_dead_woken_mark_stays
shm-unfair-mutant-rebuild-no-wake fail safety -DNPROC=3 -DLIMIT=1 -DFAIR=0 -DMUTANT_rebuild_no_wake
shm-unfair-mutant-recovery-no-rewake fail safety -DNPROC=3 -DLIMIT=1 -DFAIR=0 -DMUTANT_recovery_no_rewake
EOF
}

# one NAME EXPECT MODE DEFINES...: run one verification in OUTDIR/work/NAME,
# write OUTDIR/NAME.result (one line: verdict and figures).
one() {
	name=$1 expect=$2 mode=$3
	shift 3
	dir=$out/work/$name
	rm -rf "$dir"
	mkdir -p "$dir"
	# The file keeps one name in every run's directory, so the trail and
	# the replay commands are the same for both models.
	case $name in
	shm-*) cp "$here/shm.pml" "$dir/bulkhead.pml" ;;
	*) cp "$model" "$dir/bulkhead.pml" ;;
	esac
	cd "$dir" || exit 1
	case $mode in
	live) set -- "$@" -DLIVENESS; panflags=-DNFAIR=7; runflags="-a -f" ;;
	*) panflags=-DSAFETY; runflags= ;;
	esac
	start=$(date +%s.%N)
	if ! spin "$@" -a bulkhead.pml >spin.out 2>&1; then
		echo "$name ERROR | spin -a failed: $(head -n 1 spin.out)" >"$out/$name.result"
		return
	fi
	# shellcheck disable=SC2086
	if ! $cc $pan_cflags $panflags -DCOLLAPSE -DVECTORSZ=512 -w -o pan pan.c >cc.out 2>&1; then
		echo "$name ERROR | pan did not compile: $(head -n 1 cc.out)" >"$out/$name.result"
		return
	fi
	# shellcheck disable=SC2086
	timeout "$per_run" ./pan -m100000 -w22 $runflags >pan.out 2>&1
	rc=$?
	took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -n 1)
	stored=$(awk '/states, stored/ { print $1; exit }' pan.out)
	trans=$(awk '/transitions \(= / { print $1; exit }' pan.out)
	depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out | head -n 1)
	mem=$(awk '/total actual memory usage/ { print $1; exit }' pan.out)
	first=$(grep -m 1 -E '^pan:[0-9]+:|^pan: (error|out of memory)' pan.out | cut -c1-120)
	figures="states=${stored:-?} transitions=${trans:-?} depth=${depth:-?} memory_mb=${mem:-?} time_s=$took"
	if [ $rc -eq 124 ]; then
		verdict=ERROR
		first="timed out after ${per_run}s"
	elif [ -z "$errors" ]; then
		verdict=ERROR
		first="no result: $(tail -n 1 pan.out)"
	elif [ "$expect" = pass ]; then
		if [ "$errors" = 0 ] && ! grep -q 'max search depth too small' pan.out; then
			verdict=ok
		else
			verdict=FAIL
		fi
	elif [ "$errors" != 0 ] && [ -f bulkhead.pml.trail ]; then
		verdict=ok
		cp bulkhead.pml.trail "$out/$name.trail"
		# shellcheck disable=SC2086
		spin "$@" -t -p -g -l bulkhead.pml >"$out/$name.replay.txt" 2>&1
	else
		verdict=FAIL
		first="expected a counterexample, the search found none"
	fi
	cp pan.out "$out/$name.pan.txt"
	echo "$name $verdict $figures | $first" >"$out/$name.result"
}

if [ "${1:-}" = --one ]; then
	shift
	one "$@"
	exit 0
fi

while getopts j:o: opt; do
	case $opt in
	j) jobs=$OPTARG ;;
	o) out=$OPTARG ;;
	*) echo "usage: $0 [-j JOBS] [-o OUTDIR] [NAME...]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))

for tool in spin "$cc"; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "model: SKIP: $tool is not installed (Debian: apt-get install spin)"
		exit 77
	fi
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
list=$out/runs.txt
if [ $# -gt 0 ]; then
	: >"$list"
	for n in "$@"; do
		runs | awk -v n="$n" '$1 == n' >>"$list"
	done
else
	runs >"$list"
fi
rm -f "$out"/*.result "$out"/*.trail "$out"/*.replay.txt "$out"/*.pan.txt
echo "model: $(wc -l <"$list") verifications of bulkhead.pml and shm.pml, $jobs at a time, output in $out"
begin=$(date +%s)
# shellcheck disable=SC2016
sed 's/^/--one /' "$list" |
	BH_MODEL_OUT=$out PAN_CFLAGS=$pan_cflags CC=$cc BH_MODEL_TIMEOUT=$per_run \
	xargs -P "$jobs" -L 1 sh "$here/check.sh"

get() { printf '%s\n' "$figures" | sed -n "s/.*$1=\([^ ]*\).*/\1/p"; }
bad=0
{
	echo "| run | expected | states stored | transitions | depth | memory (MB) | time (s) | verdict |"
	echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"
} >"$out/summary.md"
while read -r name expect mode rest; do
	res=$out/$name.result
	if [ ! -f "$res" ]; then
		echo "model: $name: no result"
		bad=1
		continue
	fi
	read -r _ verdict figures <"$res"
	why=${figures#*|}
	why=${why# }
	figures=${figures%%|*}
	case $expect in
	pass) what="no error ($mode)" ;;
	*) what="counterexample ($mode)" ;;
	esac
	printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$what" "$(get states)" \
		"$(get transitions)" "$(get depth)" "$(get memory_mb)" "$(get time_s)" \
		"$verdict${why:+: $why}" >>"$out/summary.md"
	if [ "$verdict" = ok ]; then
		if [ "$expect" = fail ]; then
			printf 'model: ok   %-36s caught: %s (trail %s)\n' "$name" "$why" "$out/$name.trail"
		else
			printf 'model: ok   %-36s %s states, depth %s, %s MB, %s s\n' "$name" \
				"$(get states)" "$(get depth)" "$(get memory_mb)" "$(get time_s)"
		fi
	else
		printf 'model: %-4s %-36s %s\n' "$verdict" "$name" "$why"
		bad=1
	fi
done <"$list"
echo "model: $(($(date +%s) - begin)) s in all; table in $out/summary.md"
if [ $bad -ne 0 ]; then
	echo "model: FAILED"
	exit 1
fi
echo "model: PASS"
