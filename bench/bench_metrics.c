/* What observability costs on the uncontended acquire+release pair, in one
 * run: stats off (BH_NO_STATS), stats on (the default), and hold-time
 * tracking (BH_TRACK_HOLD: two clock reads per pair). Rounds interleave the
 * three so machine noise hits them alike; medians are reported, and each
 * ratio is the median of the per-round ratios.
 * A benchmark, not a test: it never fails. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "bulkhead.h"
#include "machine.h"

enum { OFF, ON, HOLD, N_MODES };
static const char *mode_name[N_MODES] = { "stats off (BH_NO_STATS)", "stats on (default)",
					  "stats on + BH_TRACK_HOLD" };
static const uint32_t mode_flags[N_MODES] = { BH_NO_STATS, 0, BH_TRACK_HOLD };

static double pair_ns(uint32_t flags, long iters)
{
	struct bh_config cfg = { .max_concurrent = 4, .queue_capacity = 4, .flags = flags };
	bulkhead_t *bh;
	uint64_t t0;

	if (bh_create(&cfg, &bh) != 0)
		abort();
	t0 = bh_now_ns();
	for (long i = 0; i < iters; i++) {
		if (bh_acquire(bh, 1, BH_FOREVER) != 0 || bh_release(bh, 1) != 0)
			abort();
	}
	double ns = (double)(bh_now_ns() - t0) / (double)iters;
	bh_destroy(bh);
	return ns;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int reps = 9, c;
	long iters = 5000000;
	double s[N_MODES][99], med[N_MODES], ron[99], rhold[99];

	while ((c = getopt(argc, argv, "r:i:q")) != -1) {
		if (c == 'r')
			reps = atoi(optarg);
		else if (c == 'i')
			iters = atol(optarg);
		else if (c == 'q')
			reps = 3, iters = 500000;
		else {
			fprintf(stderr, "usage: %s [-q] [-r reps] [-i iters]\n", argv[0]);
			return 2;
		}
	}
	if (reps < 1 || reps > 99 || iters < 1) {
		fprintf(stderr, "usage: %s [-q] [-r reps] [-i iters]\n", argv[0]);
		return 2;
	}
	bench_print_machine(stdout);
	for (int r = 0; r < reps; r++)
		for (int m = 0; m < N_MODES; m++)
			s[m][r] = pair_ns(mode_flags[m], iters);
	/* the ratios: medians of the per-round ratios, before the sort below */
	for (int r = 0; r < reps; r++) {
		ron[r] = s[ON][r] / s[OFF][r];
		rhold[r] = s[HOLD][r] / s[OFF][r];
	}
	qsort(ron, (size_t)reps, sizeof(double), cmp);
	qsort(rhold, (size_t)reps, sizeof(double), cmp);
	printf("uncontended bh_acquire+bh_release pair, ns (median of %d x %ld)\n", reps, iters);
	for (int m = 0; m < N_MODES; m++) {
		qsort(s[m], (size_t)reps, sizeof(double), cmp);
		med[m] = s[m][reps / 2];
		printf("  %-26s %7.2f\n", mode_name[m], med[m]);
	}
	printf("  stats on / off:          %.3f  (target <= 1.10: %s)\n", ron[reps / 2],
	       ron[reps / 2] <= 1.10 ? "met" : "MISSED");
	printf("  hold tracking / off:     %.3f\n", rhold[reps / 2]);
	return 0;
}
