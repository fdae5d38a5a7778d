#!/bin/sh
# scaling.sh [--quick] [BUILD_DIR]: how the contended figures scale with the
# number of threads. bench_core's contended workload (each thread takes a
# permit, holds it ~100 ns, gives it back, in a loop) at 1, 2, 4, 8 and 16
# threads with 1, 16 and 1024 permits: libbulkhead unfair and BH_FAIR
# against glibc's sem_t. Prints a Markdown table headed by the machine.
# `make bench-scaling` runs it on the build tree it is called in.
#
#   --quick    one short round per point: a smoke run, its numbers are noise
#   BUILD_DIR  where the benchmarks were built (default: build, beside this
#              script's directory)
#
# Environment: BH_SCALING_THREADS (default "1 2 4 8 16"), BH_SCALING_PERMITS
# ("1 16 1024"), BH_SCALING_ROUNDS (5), BH_SCALING_MS (300, one contender's
# run in one round). Contenders take turns within each round, their order
# rotating from round to round; the figures are medians over the rounds and
# each ratio the median of the per-round ratios. More threads than CPUs is
# oversubscription: read the machine line. A benchmark, not a test: it
# exits 0 whatever the figures are, 1 when a run failed.
set -e
rounds=${BH_SCALING_ROUNDS:-5} ms=${BH_SCALING_MS:-300}
threads=${BH_SCALING_THREADS:-1 2 4 8 16}
permits=${BH_SCALING_PERMITS:-1 16 1024}
case "$1" in
--quick) rounds=1 ms=20; shift ;;
-h|--help) sed -n '2,19s/^# \{0,1\}//p' "$0"; exit 0 ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
b=${1:-$top/build}
core=$b/bench/bench_core
[ -x "$core" ] || { echo "no $core: build first (./scripts/build.sh build)" >&2; exit 2; }
data=$(mktemp "${TMPDIR:-/tmp}/bh-scaling.XXXXXX")
trap 'rm -f "$data"' EXIT

# bench_core's impl numbers: 2 glibc sem_t, 5 libbulkhead unfair, 6 BH_FAIR
impls="2 5 6"
# one calibration of the critical section for every run that follows
first=$("$core" --only 2,1,1 --ms 1)
echo "$first" | sed -n 1p
spins=$(echo "$first" | sed -n 's/^critical section: \([0-9]*\) spins.*/\1/p')
[ -n "$spins" ] || { echo "bench_core printed no calibration" >&2; exit 1; }
echo "bench/scaling.sh: $rounds rounds of $ms ms per contender and point; critical section $spins spins (about 100 ns)"
for t in $threads; do
	for p in $permits; do
		r=0
		while [ "$r" -lt "$rounds" ]; do
			set -- $impls
			i=0
			while [ "$i" -lt "$r" ]; do # rotate the order
				first=$1
				shift
				set -- "$@" "$first"
				i=$((i + 1))
			done
			for impl in "$@"; do
				v=$("$core" --only "$impl,$t,$p" --ms "$ms" --spins "$spins" | sed -n 's/.*: \([0-9.]*\) Mops\/s$/\1/p')
				[ -n "$v" ] || { echo "bench_core --only $impl,$t,$p failed" >&2; exit 1; }
				echo "$t $p $impl $r $v" >>"$data"
			done
			r=$((r + 1))
		done
	done
done

echo
echo "| threads | permits | libbulkhead unfair | \`BH_FAIR\` | glibc \`sem_t\` | unfair / \`sem_t\` | \`BH_FAIR\` / \`sem_t\` |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
awk '
function median(a, n,    i, j, x) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { x = a[j]; a[j] = a[j - 1]; a[j - 1] = x }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ v[$1, $2, $3, $4] = $5; if (!(($1, $2) in seen)) { seen[$1, $2] = 1; order[++npts] = $1 " " $2 }
  if ($4 + 1 > nr) nr = $4 + 1 }
END {
	for (k = 1; k <= npts; k++) {
		split(order[k], tp, " "); t = tp[1]; p = tp[2]
		for (r = 0; r < nr; r++) {
			s[r + 1] = v[t, p, 2, r]; u[r + 1] = v[t, p, 5, r]; f[r + 1] = v[t, p, 6, r]
			ru[r + 1] = u[r + 1] / s[r + 1]; rf[r + 1] = f[r + 1] / s[r + 1]
		}
		printf "| %s | %s | %.3f Mops/s | %.3f | %.3f | %.2f× | %.2f× |\n", t, p,
		       median(u, nr), median(f, nr), median(s, nr), median(ru, nr), median(rf, nr)
	}
}' "$data"
