/* The multi-process scenarios as a chart: what payment served at once,
 * second by second, in both runs, against the limit and against processes
 * x limit; and, in the shared run, each process's permits (prefork: held;
 * cluster: its leased share), so the kill and what followed it show. */
#include <stdio.h>

#include "demo_procs.h"

#define W 760
#define LEFT 70
#define RIGHT 20
#define TOP 90
#define PANEL_H 170
#define GAP 50
#define H (TOP + 2 * (PANEL_H + GAP) + 30)

static const char *const run_color[2] = { "#c0392b", "#1f6fb4" };
static const char *const proc_color[] = { "#1f6fb4", "#27ae60", "#8e44ad", "#d35400",
					  "#16a085", "#7f8c8d", "#2c3e50", "#c0392b" };

struct frame {
	int top;
	double hi; /* y range: 0 ... hi */
};

static double x_of(double t, const struct demo_config *c)
{
	return LEFT + (W - LEFT - RIGHT) * t / c->duration_s;
}

static double y_of(const struct frame *p, double v)
{
	return p->top + PANEL_H - PANEL_H * (v > p->hi ? p->hi : v) / p->hi;
}

static void panel(FILE *f, const struct frame *p, const char *title, const struct demo_config *c)
{
	fprintf(f, "<text x='%d' y='%d' font-size='13' font-weight='bold'>%s</text>\n", LEFT,
		p->top - 8, title);
	fprintf(f, "<rect x='%.1f' y='%d' width='%.1f' height='%d' fill='#f3d9d5'/>\n",
		x_of(c->fault_at_s, c), p->top, x_of(fault_end_s(c), c) - x_of(c->fault_at_s, c),
		PANEL_H);
	fprintf(f, "<rect x='%d' y='%d' width='%d' height='%d' fill='none' stroke='#999'/>\n",
		LEFT, p->top, W - LEFT - RIGHT, PANEL_H);
	for (int i = 0; i <= 4; i++) {
		double v = p->hi * i / 4;

		fprintf(f, "<text x='%d' y='%.1f' font-size='11' text-anchor='end'>%.0f</text>\n",
			LEFT - 6, y_of(p, v) + 4, v);
	}
	for (int s = 0; s <= (int)c->duration_s; s += 2)
		fprintf(f, "<text x='%.1f' y='%d' font-size='11' text-anchor='middle'>%d s</text>\n",
			x_of(s, c), p->top + PANEL_H + 14, s);
	fprintf(f, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='black' "
		   "stroke-dasharray='2,3'/>\n", x_of(c->kill_at_s, c), p->top,
		x_of(c->kill_at_s, c), p->top + PANEL_H);
	fprintf(f, "<text x='%.1f' y='%d' font-size='11'>SIGKILL</text>\n",
		x_of(c->kill_at_s, c) + 3, p->top + 12);
}

static void hline(FILE *f, const struct frame *p, double v, const char *label)
{
	fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#555' "
		   "stroke-dasharray='6,4'/>\n", LEFT, y_of(p, v), W - RIGHT, y_of(p, v));
	fprintf(f, "<text x='%d' y='%.1f' font-size='11' text-anchor='end' fill='#555'>%s</text>\n",
		W - RIGHT - 4, y_of(p, v) - 4, label);
}

static void peak_series(FILE *f, const struct frame *p, const struct procs_run *run, int i,
			const struct demo_config *c)
{
	fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2.5' points='", run_color[i]);
	for (uint32_t k = 0; k < run->nticks; k++) {
		const struct procs_tick *tk = &run->ticks[k];

		fprintf(f, "%.1f,%.1f %.1f,%.1f ", x_of(tk->t - 1.0, c), y_of(p, tk->backend_peak),
			x_of(tk->t, c), y_of(p, tk->backend_peak));
	}
	fprintf(f, "'/>\n");
}

static void proc_series(FILE *f, const struct frame *p, const struct procs_run *run, uint32_t i,
			const struct demo_config *c)
{
	fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='",
		proc_color[i % (sizeof(proc_color) / sizeof(proc_color[0]))]);
	for (uint32_t k = 0; k < run->nticks && run->ticks[k].alive[i]; k++) {
		const struct procs_tick *tk = &run->ticks[k];
		double v = run->mode == PM_CLUSTER ? tk->share[i] : tk->held[i];

		fprintf(f, "%.1f,%.1f ", x_of(tk->t, c), y_of(p, v));
	}
	fprintf(f, "'/>\n");
}

void procs_svg_write(FILE *f, const struct procs_scenario *sc, const struct procs_run *local,
		     const struct procs_run *shared, const struct demo_config *c)
{
	uint32_t limit = c->conc[DEP_PAY], all = limit * c->procs;
	struct frame top = { TOP, all * 1.15 }, bottom = { TOP + PANEL_H + GAP, limit * 1.15 };
	char t[160];

	svg_begin(f, W, H);
	fprintf(f, "<text x='%d' y='24' font-size='17' font-weight='bold'>%u %s processes, one "
		   "payment: a bulkhead each, or one for all?</text>\n", LEFT, c->procs, sc->unit);
	fprintf(f, "<text x='%d' y='44' font-size='12' fill='#555'>bulkhead-demo --scenario %s: "
		   "payment slows from %g ms to %g s (shaded); one %s is SIGKILLed "
		   "at %g s</text>\n", LEFT, sc->name, c->latency_s[DEP_PAY] * 1e3,
		c->fault_latency_s, sc->unit, c->kill_at_s);
	fprintf(f, "<line x1='%d' y1='62' x2='%d' y2='62' stroke='%s' stroke-width='3'/>"
		   "<text x='%d' y='66' font-size='12'>a bulkhead of %u per process</text>\n",
		LEFT, LEFT + 24, run_color[0], LEFT + 30, limit);
	fprintf(f, "<line x1='%d' y1='62' x2='%d' y2='62' stroke='%s' stroke-width='3'/>"
		   "<text x='%d' y='66' font-size='12'>%s of %u</text>\n", LEFT + 260, LEFT + 284,
		run_color[1], LEFT + 290, sc->shared_label, limit);
	for (int i = 0; i < 2; i++) {
		const struct procs_run *run = i ? shared : local;

		if (run && !run->complete)
			fprintf(f, "<text x='%d' y='%d' font-size='12' font-weight='bold' "
				   "fill='#b00'>%s: INTERRUPTED at %.2f s</text>\n",
				LEFT + 300 * i, H - 8, i ? "shared" : "local", run->stopped_s);
	}
	panel(f, &top, "Calls payment served at once (its own count, peak of each second)", c);
	snprintf(t, sizeof(t), "%u x %u = %u", c->procs, limit, all);
	hline(f, &top, all, t);
	snprintf(t, sizeof(t), "limit %u", limit);
	hline(f, &top, limit, t);
	if (local)
		peak_series(f, &top, local, 0, c);
	if (shared)
		peak_series(f, &top, shared, 1, c);
	snprintf(t, sizeof(t), "%s: %s by %s (one line each)", sc->shared_label,
		 sc->shared_mode == PM_CLUSTER ? "the share leased" : "the permits held", sc->unit);
	panel(f, &bottom, t, c);
	hline(f, &bottom, limit, "limit");
	if (shared)
		for (uint32_t i = 0; i < shared->procs; i++)
			proc_series(f, &bottom, shared, i, c);
	fprintf(f, "</svg>\n");
}
