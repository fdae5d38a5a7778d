/* The async trap as a chart: one panel per run, on one scale, with what the
 * bulkhead reports and what is really in flight every 100 ms, the limit
 * dashed and the fault shaded. Plain SVG 1.1, like demo_svg.c. */
#include <math.h>
#include <stdio.h>

#include "cli.h"
#include "demo_trap.h"

#define W 800
#define LEFT 60
#define RIGHT 20
#define TOP 96
#define PANEL_H 170
#define GAP 50
#define FOOT 48
#define H (TOP + NTRAP_MODES * (PANEL_H + GAP) + FOOT)

enum series { S_REPORTED, S_KERNEL, S_BACKEND, NSERIES };

static const struct {
	const char *label, *color, *dash;
	double width;
} series_style[NSERIES] = {
	{ "the bulkhead says (bh_stats)", "#8fb8de", "none", 5 },
	{ "really: calls in the kernel", "#c0392b", "none", 1.5 },
	{ "really: requests at payment", "#333333", "3,3", 1 },
};

struct frame {
	double top, ymax, duration_s;
};

static uint32_t sample_value(const struct trap_sample *s, enum series which)
{
	return which == S_REPORTED ? s->n.reported : which == S_KERNEL ? s->n.kernel : s->n.backend;
}

static double x_of(const struct frame *fr, double t_s)
{
	return LEFT + (W - LEFT - RIGHT) * fmin(t_s / fr->duration_s, 1.0);
}

static double y_of(const struct frame *fr, double v)
{
	return fr->top + PANEL_H * (1.0 - fmin(v / fr->ymax, 1.0));
}

/* A round top for the shared y axis, four gridlines apart, above the
 * highest count and twice the limit (the limit line never sits on top). */
static double y_top(const struct trap_run *runs[], uint32_t limit)
{
	static const double nice[] = { 1, 2, 2.5, 4, 5 };
	double hi = 2.0 * limit, step, unit;

	for (int m = 0; m < NTRAP_MODES; m++) {
		uint32_t n;

		if (!runs[m])
			continue;
		n = atomic_load_explicit(&runs[m]->nsamples, memory_order_relaxed);
		for (uint32_t i = 0; i < n; i++)
			for (int s = 0; s < NSERIES; s++)
				hi = fmax(hi, sample_value(&runs[m]->samples[i], (enum series)s));
	}
	step = hi * 1.05 / 4;
	unit = pow(10, floor(log10(step)));
	for (size_t i = 0; i < sizeof(nice) / sizeof(nice[0]); i++)
		if (step <= nice[i] * unit)
			return 4 * nice[i] * unit;
	return 40 * unit;
}

static void panel_frame(FILE *f, const struct frame *fr, const struct demo_config *cfg,
			const char *title)
{
	double x0 = x_of(fr, cfg->fault_at_s), x1 = x_of(fr, cfg->fault_at_s + cfg->fault_for_s);

	fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%d' fill='#fbe9e7'/>\n", x0,
		fr->top, x1 - x0, PANEL_H);
	fprintf(f, "<text x='%d' y='%.1f' font-size='13' font-weight='bold'>%s</text>\n", LEFT,
		fr->top - 8, title);
	fprintf(f, "<rect x='%d' y='%.1f' width='%d' height='%d' fill='none' stroke='#888'/>\n",
		LEFT, fr->top, W - LEFT - RIGHT, PANEL_H);
	for (int k = 0; k <= 4; k++) {
		double v = fr->ymax * k / 4, y = y_of(fr, v);

		fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#ddd'/>"
			   "<text x='%d' y='%.1f' text-anchor='end' font-size='11'>%g</text>\n",
			LEFT, y, W - RIGHT, y, LEFT - 6, y + 4, v);
	}
	for (int s = 0; s <= (int)fr->duration_s; s += fr->duration_s > 30 ? 10 : 2)
		fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='middle' "
			   "font-size='11'>%ds</text>\n", x_of(fr, s), fr->top + PANEL_H + 15, s);
}

static void limit_line(FILE *f, const struct frame *fr, uint32_t limit)
{
	double y = y_of(fr, limit);

	fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='black' "
		   "stroke-dasharray='6,4'/>\n", LEFT, y, W - RIGHT, y);
	fprintf(f, "<text x='%d' y='%.1f' font-size='11'>limit: %u permits</text>\n", LEFT + 6,
		y - 5, limit);
}

static void plot(FILE *f, const struct frame *fr, const struct trap_run *run, enum series which)
{
	uint32_t n = atomic_load_explicit(&run->nsamples, memory_order_relaxed);

	fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='%g' stroke-dasharray='%s' "
		   "points='", series_style[which].color, series_style[which].width,
		series_style[which].dash);
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, "%.1f,%.1f ", x_of(fr, run->samples[i].t_ms / 1e3),
			y_of(fr, sample_value(&run->samples[i], which)));
	fprintf(f, "'/>\n");
}

static void legend(FILE *f, const struct demo_config *cfg)
{
	fprintf(f, "<text x='%d' y='24' font-size='17' font-weight='bold'>The async trap: "
		   "%u permits. How many calls are really in flight?</text>\n",
		LEFT, cfg->conc[DEP_PAY]);
	fprintf(f, "<text x='%d' y='44' font-size='12' fill='#555'>One io_uring loop, %g calls/s "
		   "to payment over loopback; payment takes %g s when shaded; callers wait "
		   "%g ms</text>\n",
		LEFT, cfg->rate, cfg->fault_latency_s, cfg->timeout_s[DEP_PAY] * 1e3);
	for (int s = 0; s < NSERIES; s++) {
		int x = LEFT + s * 240;

		fprintf(f, "<line x1='%d' y1='66' x2='%d' y2='66' stroke='%s' stroke-width='3' "
			   "stroke-dasharray='%s'/><text x='%d' y='70' font-size='12'>%s</text>\n",
			x, x + 22, series_style[s].color, series_style[s].dash, x + 28,
			series_style[s].label);
	}
}

static void footer(FILE *f, const struct trap_run *runs[])
{
	int y = H - FOOT + 16;

	for (int m = 0; m < NTRAP_MODES; m++, y += 18) {
		const struct trap_checks *ck;
		char right[16], note[48] = "";

		if (!runs[m])
			continue;
		ck = &runs[m]->checks;
		if (!runs[m]->complete)
			snprintf(note, sizeof(note), " (INTERRUPTED at %.2f s)", runs[m]->stopped_s);
		fprintf(f, "<text x='%d' y='%d' font-size='12'>%s: the bulkhead said at most %u; "
			   "really up to %u in the kernel, %u at payment; right at %llu of %llu "
			   "checks (%s)%s</text>\n",
			LEFT, y, trap_mode_name[m], ck->peak.reported, ck->peak.kernel,
			runs[m]->backend_peak, (unsigned long long)(ck->n - ck->mismatched),
			(unsigned long long)ck->n,
			cli_fmt_share(ck->n - ck->mismatched, ck->n, right, sizeof(right)), note);
	}
}

void trap_svg_write(FILE *f, const struct trap_run *naive, const struct trap_run *tracked,
		    const struct demo_config *cfg)
{
	static const char *const title[NTRAP_MODES] = {
		"naive: the permit goes back when the caller stops waiting",
		"tracked: the permit goes back at the call's final CQE",
	};
	const struct trap_run *runs[NTRAP_MODES] = { naive, tracked };
	struct frame fr = { .duration_s = cfg->duration_s,
			    .ymax = y_top(runs, cfg->conc[DEP_PAY]) };
	svg_begin(f, W, H);
	legend(f, cfg);
	for (int m = 0; m < NTRAP_MODES; m++) {
		fr.top = TOP + m * (PANEL_H + GAP);
		panel_frame(f, &fr, cfg, title[m]);
		if (!runs[m])
			continue;
		for (int s = 0; s < NSERIES; s++) /* thin lines over the wide one */
			plot(f, &fr, runs[m], (enum series)s);
		limit_line(f, &fr, cfg->conc[DEP_PAY]);
	}
	footer(f, runs);
	fprintf(f, "</svg>\n");
}
