/* The summary as a chart: three panels over the run's seconds, both runs
 * overlaid, the fault window shaded. Plain SVG 1.1, no scripts, no fonts
 * beyond sans-serif, so any browser or image viewer shows it. */
#include <math.h>
#include <stdio.h>

#include "cli.h"
#include "demo.h"

#define W 760
#define LEFT 70
#define RIGHT 20
#define TOP 100
#define PANEL_H 140
#define GAP 46
#define NPANELS 3
#define FOOT 44
#define H (TOP + NPANELS * (PANEL_H + GAP) + FOOT)

static const char *const color[2] = { "#c0392b", "#1f6fb4" }; /* without, with */

struct panel {
	int idx;
	const char *title;
	double lo, hi; /* y range */
	bool log;
	double tick[5];     /* linear panels: labelled values */
	double (*value)(const struct tick *tk, const struct demo_config *cfg);
};

static double v_inv_ok(const struct tick *tk, const struct demo_config *cfg)
{
	(void)cfg;
	return tk->d[DEP_INV].done ? 100.0 * tk->d[DEP_INV].ok / tk->d[DEP_INV].done : NAN;
}

static double v_inv_p99(const struct tick *tk, const struct demo_config *cfg)
{
	(void)cfg;
	return tk->d[DEP_INV].p99_s * 1e3;
}

static double v_pay_held(const struct tick *tk, const struct demo_config *cfg)
{
	(void)cfg;
	return tk->d[DEP_PAY].held;
}

static double x_of(double t, const struct demo_config *cfg)
{
	return LEFT + (W - LEFT - RIGHT) * t / cfg->duration_s;
}

static double y_of(const struct panel *p, double v)
{
	double top = TOP + p->idx * (PANEL_H + GAP), f;

	if (p->log)
		f = (log10(fmax(v, p->lo)) - log10(p->lo)) / (log10(p->hi) - log10(p->lo));
	else
		f = (v - p->lo) / (p->hi - p->lo);
	f = fmin(fmax(f, 0.0), 1.0);
	return top + PANEL_H * (1.0 - f);
}

static void y_tick(FILE *f, const struct panel *p, double v, const char *label)
{
	double y = y_of(p, v);

	fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#ddd'/>\n", LEFT, y,
		W - RIGHT, y);
	fprintf(f, "<text x='%d' y='%.1f' text-anchor='end' font-size='11'>%s</text>\n",
		LEFT - 6, y + 4, label);
}

static void frame(FILE *f, const struct panel *p, const struct demo_config *cfg)
{
	double top = TOP + p->idx * (PANEL_H + GAP);
	double x0 = x_of(cfg->fault_at_s, cfg);
	double x1 = x_of(fmin(cfg->fault_at_s + cfg->fault_for_s, cfg->duration_s), cfg);

	fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%d' fill='#fbe9e7'/>\n", x0, top,
		x1 - x0, PANEL_H);
	fprintf(f, "<text x='%d' y='%.1f' font-size='13' font-weight='bold'>%s</text>\n", LEFT,
		top - 8, p->title);
	fprintf(f, "<rect x='%d' y='%.1f' width='%d' height='%d' fill='none' stroke='#888'/>\n",
		LEFT, top, W - LEFT - RIGHT, PANEL_H);
	for (int s = 0; s <= (int)cfg->duration_s; s += cfg->duration_s > 30 ? 10 : 5)
		fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='middle' "
			   "font-size='11'>%ds</text>\n",
			x_of(s, cfg), top + PANEL_H + 15, s);
}

/* A polyline per stretch of seconds that have a value. */
static void series(FILE *f, const struct panel *p, const struct run_report *rr, int which,
		   const struct demo_config *cfg)
{
	bool open = false;

	for (uint32_t i = 0; i < rr->nticks; i++) {
		double v = p->value(&rr->ticks[i], cfg);

		if (isnan(v)) {
			if (open)
				fprintf(f, "'/>\n");
			open = false;
			continue;
		}
		if (!open)
			fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='",
				color[which]);
		open = true;
		fprintf(f, "%.1f,%.1f ", x_of(rr->ticks[i].t, cfg), y_of(p, v));
	}
	if (open)
		fprintf(f, "'/>\n");
}

void svg_begin(FILE *f, int w, int h)
{
	fprintf(f, "<?xml version='1.0' encoding='UTF-8'?>\n"
		   "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
		   "viewBox='0 0 %d %d' font-family='sans-serif'>\n"
		   "<rect width='100%%' height='100%%' fill='white'/>\n",
		w, h, w, h);
}

static void legend(FILE *f, const struct demo_config *cfg)
{
	fprintf(f, "<text x='%d' y='24' font-size='17' font-weight='bold'>Payment slows from "
		   "%g ms to %g s (shaded): does inventory survive?</text>\n",
		LEFT, cfg->latency_s[DEP_PAY] * 1e3, cfg->fault_latency_s);
	fprintf(f, "<text x='%d' y='44' font-size='12' fill='#555'>bulkhead-demo: %g orders/s "
		   "(%.0f%% inventory, %.0f%% payment) over loopback, "
		   "%u order-service workers</text>\n",
		LEFT, cfg->rate, 100 * (1 - cfg->pay_share), 100 * cfg->pay_share, cfg->workers);
	fprintf(f, "<line x1='%d' y1='64' x2='%d' y2='64' stroke='%s' stroke-width='3'/>"
		   "<text x='%d' y='68' font-size='12'>without isolation (shared workers)</text>\n",
		LEFT, LEFT + 24, color[0], LEFT + 30);
	fprintf(f, "<line x1='%d' y1='64' x2='%d' y2='64' stroke='%s' stroke-width='3'/>"
		   "<text x='%d' y='68' font-size='12'>with isolation (a libbulkhead bulkhead "
		   "per dependency)</text>\n",
		LEFT + 250, LEFT + 274, color[1], LEFT + 280);
}

/* The summary's headline, under the chart; a stopped run says so. */
static void footer(FILE *f, const struct run_report *without, const struct run_report *with)
{
	const struct run_report *runs[2] = { without, with };
	const char *name[2] = { "without isolation", "with isolation" };
	int y = H - FOOT + 16;

	for (int r = 0; r < 2; r++) {
		const struct phase_stats *inv, *pay;
		char ok[16], fast[16], note[96] = "";

		if (!runs[r])
			continue;
		inv = &runs[r]->ph[DEP_INV][PH_FAULT];
		pay = &runs[r]->ph[DEP_PAY][PH_FAULT];
		if (!runs[r]->complete)
			snprintf(note, sizeof(note), " (INTERRUPTED at %.2f s)",
				 runs[r]->stopped_s);
		fprintf(f, "<text x='%d' y='%d' font-size='12' fill='%s'>%s, in the fault: "
			   "inventory %s succeeded, p99 %.0f ms; payment failed fast "
			   "(&lt; 50 ms): %s%s</text>\n",
			LEFT, y, color[r], name[r], cli_fmt_share(inv->ok, inv->n, ok, sizeof(ok)),
			inv->p99_s * 1e3,
			cli_fmt_share(pay->fast_fail, pay->n - pay->ok, fast, sizeof(fast)), note);
		y += 18;
	}
}

static void y_axis(FILE *f, const struct panel *p)
{
	char buf[32];

	if (p->log) {
		for (double v = p->lo; v <= p->hi; v *= 10) {
			if (v < 1000)
				snprintf(buf, sizeof(buf), "%g ms", v);
			else
				snprintf(buf, sizeof(buf), "%g s", v / 1000);
			y_tick(f, p, v, buf);
		}
		return;
	}
	for (int k = 0; k < 5; k++) {
		snprintf(buf, sizeof(buf), "%g", p->tick[k]);
		y_tick(f, p, p->tick[k], buf);
	}
}

/* The most workers payment can hold with isolation: its compartment. */
static void compartment(FILE *f, const struct panel *p, const struct run_report *with)
{
	uint32_t held = with->conc[DEP_PAY] + with->queue[DEP_PAY];
	double y = y_of(p, held);

	fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='%s' "
		   "stroke-dasharray='6,4'/>\n", LEFT, y, W - RIGHT, y, color[1]);
	fprintf(f, "<text x='%d' y='%.1f' font-size='11' fill='%s'>"
		   "payment's bulkhead: %u permits + %u queued</text>\n",
		LEFT + 6, y - 5, color[1], with->conc[DEP_PAY], with->queue[DEP_PAY]);
}

void svg_write(FILE *f, const struct run_report *without, const struct run_report *with,
	       const struct demo_config *cfg)
{
	const struct run_report *runs[2] = { without, with };
	double w = cfg->workers;
	struct panel panels[NPANELS] = {
		{ 0, "inventory orders that succeeded, per second (%)", 0, 104, false,
		  { 0, 25, 50, 75, 100 }, v_inv_ok },
		{ 1, "inventory p99 response time (log scale)", 1, 10000, true, { 0 }, v_inv_p99 },
		{ 2, "order-service workers held by payment", 0, w * 1.04, false,
		  { 0, round(w / 4), round(w / 2), round(3 * w / 4), w }, v_pay_held },
	};
	svg_begin(f, W, H);
	legend(f, cfg);
	for (int i = 0; i < NPANELS; i++) {
		frame(f, &panels[i], cfg);
		y_axis(f, &panels[i]);
		for (int r = 0; r < 2; r++)
			if (runs[r])
				series(f, &panels[i], runs[r], r, cfg);
		if (i == 2 && with)
			compartment(f, &panels[i], with);
	}
	footer(f, without, with);
	fprintf(f, "</svg>\n");
}
