#!/bin/sh
# run-all.sh [--quick] [--all] [BUILD_DIR]: run the benchmarks behind the README's
# performance table, one after the other, and print that table (Markdown,
# in the README's shape) headed by the machine it was measured on, so the
# README's table is this command's output. `make bench` runs it on the
# build tree it is called in; `make bench-quick` runs it with --quick.
#
#   --quick    each benchmark's short form: a smoke run that every figure
#              still comes out, in seconds; its numbers are noise. Implies
#              --all, so that every benchmark is run
#   --all      then the benchmarks outside the table too (bench_shm,
#              bench_cluster, bench_adaptive cost, bench/scaling.sh), their
#              output as it is
#   BUILD_DIR  where the benchmarks were built (default: build, beside
#              this script's directory)
#
# Each benchmark's own output is kept in BH_BENCH_OUT when that is set (a
# directory), else thrown away at the end. A benchmark, not a test: it
# exits 0 whatever the figures are; 1 when a benchmark crashed or refused
# its arguments (so the quick form is a smoke run of every benchmark); one
# that exits 77 (io_uring missing) is left out.
set -e
quick= all=
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 all=1; shift ;;
	--all) all=1; shift ;;
	-h|--help) sed -n '2,21s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) break ;;
	esac
done
top=$(cd "$(dirname "$0")/.." && pwd)
b=${1:-$top/build}
[ -x "$b/bench/bench_core" ] || { echo "no $b/bench/bench_core: build first (./scripts/build.sh build)" >&2; exit 2; }
# Each benchmark's own output goes to $BH_BENCH_OUT when set (kept), else
# to a temporary directory removed at exit.
if [ -n "$BH_BENCH_OUT" ]; then
	out=$BH_BENCH_OUT
	mkdir -p "$out"
else
	out=$(mktemp -d "${TMPDIR:-/tmp}/bh-bench.XXXXXX")
	trap 'rm -rf "$out"' EXIT
fi

if [ -n "$quick" ]; then
	core_args=--quick metrics_args=-q uring_args=--quick
	pool_args="-r 1 -i 2000 -n 40000"
	shm_args=--quick cluster_args=--quick
	adaptive_args="cost --seconds 0.05 --rounds 1"
else
	core_args= metrics_args= uring_args= pool_args= shm_args= cluster_args=
	adaptive_args=cost
fi

# run NAME ARGS...: one benchmark, its output to $out/NAME.out; a missing
# program (built without liburing) or one that cannot run leaves it empty.
run() {
	name=$1
	o=$out/${as:-$name}
	shift
	: >"$o.out"
	if [ ! -x "$b/bench/$name" ]; then
		echo "$name: not built" >&2
		return 0
	fi
	echo "== $b/bench/$name $*" >&2
	rc=0
	"$b/bench/$name" "$@" >"$o.out" 2>"$o.err" || rc=$?
	case $rc in
	0) ;;
	77) echo "$name: not run here ($(tail -n 1 "$o.err"))" >&2 ;;
	*) echo "$name: exit $rc ($(tail -n 1 "$o.err"))" >&2; failed="$failed $name" ;;
	esac
	[ "$rc" = 0 ] || : >"$o.out"
}
# run_as OUTNAME NAME ARGS...: the same, its output to $out/OUTNAME.out.
run_as() {
	as=$1
	shift
	run "$@"
	as=
}
as=
failed=

# shellcheck disable=SC2086 # the argument lists are meant to split
{
	run bench_core $core_args
	run bench_metrics $metrics_args
	run bench_pool $pool_args
	run bench_uring $uring_args
}
# The pool's throughput over a grid of pool threads x submitters, throughput
# only (-m t), each cell its own interleaved run: 11 rounds, not 5, as with
# more threads than CPUs one round's ratio moves by half from the next one's
# (a round is a tenth of a second).
grid_args=${quick:+$pool_args}
grid_args=${grid_args:--r 11}
for t in 1 2; do
	for sub in 1 2 4; do
		# shellcheck disable=SC2086
		run_as "pool_t${t}_s${sub}" bench_pool $grid_args -m t -t "$t" -s "$sub"
	done
done

machine=$(sed -n 's/^machine: //p' "$out/bench_core.out" | head -n 1)
echo
echo "Measured on $machine; \`bench/run-all.sh${quick:+ --quick}\` after \`./scripts/build.sh build\`."
echo "Contenders take turns within each round; absolutes are medians over the rounds,"
echo "ratios medians of the per-round ratios."
[ -z "$quick" ] || echo "(--quick: a smoke run; these numbers are noise, not figures.)"
echo

# bench_core: the uncontended block, the contended table (columns 2thr/1p,
# 2thr/4p, 8thr/1p, 8thr/4p) and the handoff table (2, 4, 8 threads).
awk '
function last(n) { return $(NF - 4 + n) } # n-th of the last four fields
/^uncontended/ { sec = "u" } /^contended/ { sec = "c" } /^handoff latency/ { sec = "h" }
sec == "u" && /glibc sem_t/ { sem = $NF }
sec == "u" && /libbulkhead unfair/ { un = $NF }
sec == "u" && /libbulkhead BH_FAIR/ { fa = $NF }
sec == "u" && /guard:/ {
	gsub(/[x,;()]/, " ")
	for (i = 1; i <= NF; i++) {
		if ($i == "sem_t:") { rs = $(i + 2); rsf = $(i + 4) }
		if ($i == "CAS:") { rc = $(i + 2); rcf = $(i + 4) }
	}
}
sec == "u" && /2 bare xadd:/ { gsub(/[x,]/, " "); rx = $(NF - 2); rxf = $NF }
sec == "u" && /2 called CAS:/ {
	gsub(/[x,;()]/, " ")
	for (i = 1; i <= NF; i++)
		if ($i == "CAS:") { rk = $(i + 2); rkf = $(i + 4) }
	kc = $(NF - 6); sc = $NF
}
sec == "c" && /glibc sem_t/ { for (j = 1; j <= 4; j++) csem[j] = last(j) }
sec == "c" && /FIFO mutex\+condvar/ { for (j = 1; j <= 4; j++) cfifo[j] = last(j) }
sec == "c" && /ticket mutex\+condvar/ { for (j = 1; j <= 4; j++) ctick[j] = last(j) }
sec == "c" && /libbulkhead unfair/ { for (j = 1; j <= 4; j++) cun[j] = last(j) }
sec == "c" && /libbulkhead BH_FAIR/ { for (j = 1; j <= 4; j++) cfa[j] = last(j) }
sec == "c" && /unfair \/ sem_t/ { for (j = 1; j <= 4; j++) run_[j] = last(j) }
sec == "c" && /fair \/ FIFO condvar/ { for (j = 1; j <= 4; j++) rfifo[j] = last(j) }
sec == "c" && /fair \/ ticket condvar/ { for (j = 1; j <= 4; j++) rtick[j] = last(j) }
sec == "h" && /FIFO mutex\+condvar/ { for (j = 1; j <= 3; j++) hfifo[j] = $(2 + j) }
sec == "h" && /libbulkhead BH_FAIR/ { for (j = 1; j <= 3; j++) hfa[j] = $(2 + j) }
sec == "h" && /FIFO condvar \/ fair/ { for (j = 1; j <= 3; j++) hr[j] = $(4 + j) }
END {
	if (un == "") { print "bench_core: no figures (see above)"; exit }
	print "| `bench/bench_core` | libbulkhead | anchor | ratio |"
	print "| --- | --- | --- | --- |"
	printf "| uncontended try+release pair | %s ns (`BH_FAIR` %s) | glibc `sem_t` %s ns | %s× the time (`BH_FAIR` %s×) |\n", un, fa, sem, rs, rsf
	printf "| the same pair against its floor | | two bare CAS | %s× the time (`BH_FAIR` %s×); two bare `xadd`s: %s× (%s×) |\n", rc, rcf, rx, rxf
	printf "| the same pair against two CASes called as a library is | | two called CAS (%s× two bare CAS; `sem_t` %s×) | %s× the time (`BH_FAIR` %s×) |\n", kc, sc, rk, rkf
	printf "| unfair, 8 threads / 1 permit, ~100 ns held | %s Mops/s | `sem_t` %s | %s× |\n", cun[3], csem[3], run_[3]
	printf "| unfair, 2 threads / 1 permit | %s Mops/s | `sem_t` %s | %s× |\n", cun[1], csem[1], run_[1]
	printf "| `BH_FAIR`, 8 threads / 1 permit | %s Mops/s | FIFO mutex+condvar %s (per-waiter condvars), %s (tickets + broadcast) | %s×, %s× |\n", cfa[3], cfifo[3], ctick[3], rfifo[3], rtick[3]
	printf "| `BH_FAIR`, 2 threads / 1 permit | %s Mops/s | FIFO mutex+condvar %s | %s× |\n", cfa[1], cfifo[1], rfifo[1]
	printf "| `BH_FAIR`, 8 threads / 4 permits | %s Mops/s | FIFO mutex+condvar %s | %s× |\n", cfa[4], cfifo[4], rfifo[4]
	for (j = 1; j <= 3; j++) {
		n = j == 1 ? 2 : j == 2 ? 4 : 8
		split(hfa[j], a, "/"); split(hfifo[j], f, "/"); split(hr[j], r, "/")
		sub(/x$/, "", r[1]); sub(/x$/, "", r[2])
		printf "| `BH_FAIR` handoff, %d threads / 1 permit, p50 / p99 | %s / %s ns | FIFO mutex+condvar %s / %s ns | the FIFO condvar takes %s×, %s× as long |\n", n, a[1], a[2], f[1], f[2], r[1], r[2]
	}
}' "$out/bench_core.out"
echo

echo "| command | measures | libbulkhead | anchor |"
echo "| --- | --- | --- | --- |"
awk '
/stats off/ { off = $NF } /stats on \(default\)/ { on = $NF } /BH_TRACK_HOLD/ { hold = $NF }
/stats on \/ off:/ { r = $5 }
END {
	if (r == "") { print "| `./build/bench/bench_metrics` | (no figures) | | |"; exit }
	printf "| `./build/bench/bench_metrics` | uncontended acquire+release pair, stats on (the default) | %s× the time with `BH_NO_STATS` | `BH_NO_STATS` |\n", r
	printf "| `./build/bench/bench_metrics` | the same with `BH_TRACK_HOLD` | %+.0f ns a pair | without `BH_TRACK_HOLD` |\n", hold - on
}' "$out/bench_metrics.out"
awk '
/^mutex\+condvar pool/ { split($3, h, "/"); mc = h[1] }
/^libbulkhead pool/ { split($3, h, "/"); bh = h[1] }
/^  libbulkhead pool/ { for (i = 1; i <= NF; i++) if ($i == "tput") t = $(i + 1) }
END {
	if (t == "") { print "| `./build/bench/bench_pool` | (no figures) | | |"; exit }
	sub(/^x/, "", t)
	printf "| `./build/bench/bench_pool` | hand-off to an idle pool, p50 | %.2f µs | mutex+condvar pool %.1f µs |\n", bh / 1000, mc / 1000
	printf "| `./build/bench/bench_pool` | tiny-task throughput | %s× | mutex+condvar pool |\n", t
}' "$out/bench_pool.out"
for t in 1 2; do
	row="| \`./build/bench/bench_pool -m t -t $t -s 1,2,4\` | tiny-task throughput, $t pool thread$([ "$t" = 1 ] || echo s), 1 / 2 / 4 submitters |"
	cells=
	for sub in 1 2 4; do
		c=$(sed -n 's/^  libbulkhead pool .*tput x\([0-9.]*\).*/\1/p' "$out/pool_t${t}_s${sub}.out")
		cells="$cells${cells:+ / }${c:-?}×"
	done
	echo "$row $cells | mutex+condvar pool |"
done
awk '
/^  raw liburing, bare/ { bare = $4 }
/^  raw liburing, lookup/ && !io { look = $4 }
/^pipe write\+read/ { io = "pipe"; bytes = $4 }
/^loopback TCP send\+recv/ { io = "tcp"; bytes = $5 }
io && /^  raw liburing, lookup/ { ioraw[io] = $4 }
/^overhead at depth/ {
	for (i = 1; i <= NF; i++) {
		if ($i == "batch") ob = $(i + 1)
		if ($i == "bare") oa = $(i - 2)
	}
	d = $4; sub(/:$/, "", d)
}
/^tracker.s share of real I\/O:/ { share[io] = $7; shareop[io] = $NF }
END {
	if (ob == "") { print "| `./build/bench/bench_uring` | (not run: built without liburing, or no io_uring) | | |"; exit }
	printf "| `./build/bench/bench_uring` | tracked NOPs at depth %s, batched, per op | %s | raw liburing that looks up and books its request (a %.0f ns operation) |\n", d, ob, look
	printf "| `./build/bench/bench_uring` | the same | %s | bare raw liburing (a %.0f ns operation) |\n", oa, bare
	if (share["pipe"] != "")
		printf "| `./build/bench/bench_uring` | tracked pipe write+read of %s bytes, batched (per op) | %s (%s) | raw liburing (a %.0f ns operation) |\n", bytes, share["pipe"], shareop["pipe"], ioraw["pipe"]
	if (share["tcp"] != "")
		printf "| `./build/bench/bench_uring` | tracked loopback TCP send+recv of %s bytes, batched (per op) | %s (%s) | raw liburing (a %.0f ns operation) |\n", bytes, share["tcp"], shareop["tcp"], ioraw["tcp"]
}' "$out/bench_uring.out"
echo
if [ -n "$all" ]; then
	# shellcheck disable=SC2086
	{
		run bench_shm $shm_args
		run bench_cluster $cluster_args
		run bench_adaptive $adaptive_args
	}
	for name in bench_shm bench_cluster bench_adaptive; do
		echo
		echo "\`./build/bench/$name\`:"
		echo
		sed -e '/^machine: /d' -e 's/^/    /' "$out/$name.out"
	done
	echo
	echo "\`bench/scaling.sh\`:"
	echo
	# shellcheck disable=SC2086
	if ! sh "$top/bench/scaling.sh" ${quick:+--quick} "$b" >"$out/scaling.out" 2>&1; then
		failed="$failed scaling.sh"
	fi
	sed -e '/^machine: /d' "$out/scaling.out"
fi
[ -z "$BH_BENCH_OUT" ] || { echo; echo "Each benchmark's own output: $out"; }
[ -z "$failed" ] || { echo "failed:$failed" >&2; exit 1; }
