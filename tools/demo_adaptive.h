/* --scenario adaptive: payment has a real capacity (it serves so many calls
 * at a time and queues the rest), and the capacity drops part-way through.
 * One run keeps the static limit bulkhead-size computes; the other attaches
 * an adaptive controller with the defaults (bh_adaptive_attach(pay, NULL)),
 * which samples every call's hold by itself. Same load, same backends. */
#ifndef BH_TOOLS_DEMO_ADAPTIVE_H
#define BH_TOOLS_DEMO_ADAPTIVE_H

#include "demo.h"

#define AD_SAMPLE_NS (100 * BH_MSEC) /* the limit and capacity, this often */

/* What payment's bulkhead and backend were at one instant. */
struct ad_sample {
	double t_s;
	uint32_t limit, capacity;
};

struct ad_run {
	const char *label;
	bool adaptive, complete;
	struct run_report rr;
	struct ad_sample *s;
	size_t ns, cap;
	/* the limit (median) over the fault's second half, and over the last
	 * quarter of the time after it */
	uint32_t late_fault_median, late_after_median;
	double goodput; /* payment successes per second of the fault */
	double ok_p50_s, ok_p99_s; /* response time of those successes */
};

/* The sizing bulkhead-demo computed: static permits and queues. */
struct ad_sizing {
	uint32_t conc[NDEPS], queue[NDEPS];
	uint64_t queue_wait_ns[NDEPS];
};

/* Both runs, lines, summary, chart. 0, -EINTR (a stop signal) or -errno,
 * already reported. */
int adaptive_scenario(const struct demo_config *cfg, const struct ad_sizing *z,
		      struct demo_outputs *out);

void adaptive_svg_write(FILE *f, const struct ad_run *stat, const struct ad_run *adap,
			const struct demo_config *cfg);

#endif /* BH_TOOLS_DEMO_ADAPTIVE_H */
