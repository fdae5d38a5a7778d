/* The adaptive scenario as a chart: payment's limit over time against its
 * capacity, then per second payment's successes, its p99 and the workers
 * it held; both runs overlaid, the fault shaded. Plain SVG 1.1, like
 * demo_svg.c. */
#include <math.h>
#include <stdio.h>

#include "cli.h"
#include "demo_adaptive.h"

#define W 760
#define LEFT 70
#define RIGHT 20
#define TOP 100
#define PANEL_H 130
#define GAP 46
#define NPANELS 4
#define FOOT 44
#define H (TOP + NPANELS * (PANEL_H + GAP) + FOOT)

static const char *const color[2] = { "#c0392b", "#1f6fb4" }; /* static, adaptive */

struct panel {
	int idx;
	const char *title;
	double lo, hi;
	bool log;
};

static double x_of(double t, const struct demo_config *c)
{
	return LEFT + (W - LEFT - RIGHT) * fmin(fmax(t / c->duration_s, 0.0), 1.0);
}

static double top_of(const struct panel *p)
{
	return TOP + p->idx * (PANEL_H + GAP);
}

static double y_of(const struct panel *p, double v)
{
	double f;

	if (p->log)
		f = (log10(fmax(v, p->lo)) - log10(p->lo)) / (log10(p->hi) - log10(p->lo));
	else
		f = (v - p->lo) / (p->hi - p->lo);
	return top_of(p) + PANEL_H * (1.0 - fmin(fmax(f, 0.0), 1.0));
}

static void y_tick(FILE *f, const struct panel *p, double v, const char *label)
{
	double y = y_of(p, v);

	fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#ddd'/>\n", LEFT, y,
		W - RIGHT, y);
	fprintf(f, "<text x='%d' y='%.1f' text-anchor='end' font-size='11'>%s</text>\n",
		LEFT - 6, y + 4, label);
}

static void frame(FILE *f, const struct panel *p, const struct demo_config *c)
{
	double top = top_of(p), x0 = x_of(c->fault_at_s, c), x1 = x_of(fault_end_s(c), c);
	char buf[32];

	fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%d' fill='#fbe9e7'/>\n", x0, top,
		x1 - x0, PANEL_H);
	fprintf(f, "<text x='%d' y='%.1f' font-size='13' font-weight='bold'>%s</text>\n", LEFT,
		top - 8, p->title);
	fprintf(f, "<rect x='%d' y='%.1f' width='%d' height='%d' fill='none' stroke='#888'/>\n",
		LEFT, top, W - LEFT - RIGHT, PANEL_H);
	for (int s = 0; s <= (int)c->duration_s; s += c->duration_s > 30 ? 10 : 2)
		fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='middle' "
			   "font-size='11'>%ds</text>\n",
			x_of(s, c), top + PANEL_H + 15, s);
	if (p->log) {
		for (double v = p->lo; v <= p->hi * 1.0001; v *= 10) {
			if (v < 1000)
				snprintf(buf, sizeof(buf), "%g ms", v);
			else
				snprintf(buf, sizeof(buf), "%g s", v / 1000);
			y_tick(f, p, v, buf);
		}
		return;
	}
	for (int k = 0; k <= 4; k++) {
		double v = p->lo + (p->hi - p->lo) * k / 4;

		snprintf(buf, sizeof(buf), "%.3g", v);
		y_tick(f, p, v, buf);
	}
}

/* The limit (or the capacity) as steps: it holds until it changes. */
static void steps(FILE *f, const struct panel *p, const struct ad_run *run, bool capacity,
		  const char *stroke, const char *dash, double width, const struct demo_config *c)
{
	double last = NAN;

	if (!run->ns)
		return;
	fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='%.1f' stroke-dasharray='%s' "
		   "points='", stroke, width, dash);
	for (size_t i = 0; i < run->ns; i++) {
		double v = capacity ? run->s[i].capacity : run->s[i].limit;
		double x = x_of(run->s[i].t_s, c);

		if (v == last)
			continue;
		if (!isnan(last))
			fprintf(f, "%.1f,%.1f ", x, y_of(p, last));
		fprintf(f, "%.1f,%.1f ", x, y_of(p, v));
		last = v;
	}
	fprintf(f, "%.1f,%.1f'/>\n", x_of(c->duration_s, c), y_of(p, last));
}

static double v_pay_ok(const struct tick *tk)
{
	return tk->d[DEP_PAY].ok;
}

static double v_pay_p99(const struct tick *tk)
{
	return tk->d[DEP_PAY].p99_s * 1e3;
}

static double v_pay_held(const struct tick *tk)
{
	return tk->d[DEP_PAY].held;
}

/* Per-second values, one polyline per stretch that has them. */
static void per_second(FILE *f, const struct panel *p, const struct ad_run *run, int which,
		       double (*value)(const struct tick *), const struct demo_config *c)
{
	bool open = false;

	for (uint32_t i = 0; i < run->rr.nticks; i++) {
		double v = value(&run->rr.ticks[i]);

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
		fprintf(f, "%.1f,%.1f ", x_of(run->rr.ticks[i].t, c), y_of(p, v));
	}
	if (open)
		fprintf(f, "'/>\n");
}

static void legend(FILE *f, const struct demo_config *c)
{
	fprintf(f, "<text x='%d' y='24' font-size='17' font-weight='bold'>Payment's capacity "
		   "drops from %u to %u calls at a time (shaded): does the limit follow?</text>\n",
		LEFT, c->capacity, c->fault_capacity);
	fprintf(f, "<text x='%d' y='44' font-size='12' fill='#555'>bulkhead-demo --scenario "
		   "adaptive: %g orders/s (%.0f%% payment, ~%g ms a call) over loopback, %u "
		   "workers, a bulkhead per dependency</text>\n",
		LEFT, c->rate, 100 * c->pay_share, c->latency_s[DEP_PAY] * 1e3, c->workers);
	fprintf(f, "<line x1='%d' y1='64' x2='%d' y2='64' stroke='%s' stroke-width='3'/>"
		   "<text x='%d' y='68' font-size='12'>static limit (bulkhead-size)</text>\n",
		LEFT, LEFT + 24, color[0], LEFT + 30);
	fprintf(f, "<line x1='%d' y1='64' x2='%d' y2='64' stroke='%s' stroke-width='3'/>"
		   "<text x='%d' y='68' font-size='12'>adaptive limit (the defaults)</text>\n",
		LEFT + 210, LEFT + 234, color[1], LEFT + 240);
	fprintf(f, "<line x1='%d' y1='64' x2='%d' y2='64' stroke='#333' stroke-width='1.5' "
		   "stroke-dasharray='4,3'/><text x='%d' y='68' font-size='12'>payment's "
		   "capacity</text>\n",
		LEFT + 420, LEFT + 444, LEFT + 450);
}

static void footer(FILE *f, const struct ad_run *runs[2])
{
	int y = H - FOOT + 16;

	for (int r = 0; r < 2; r++) {
		const struct phase_stats *pay, *inv;
		char ok[16];

		if (!runs[r])
			continue;
		pay = &runs[r]->rr.ph[DEP_PAY][PH_FAULT];
		inv = &runs[r]->rr.ph[DEP_INV][PH_FAULT];
		fprintf(f, "<text x='%d' y='%d' font-size='12' fill='%s'>%s, in the fault: payment "
			   "%.1f successes/s, p99 %.0f ms; inventory %s succeeded%s</text>\n",
			LEFT, y, color[r], runs[r]->label,
			isnan(runs[r]->goodput) ? 0.0 : runs[r]->goodput, pay->p99_s * 1e3,
			cli_fmt_share(inv->ok, inv->n, ok, sizeof(ok)),
			runs[r]->complete ? "" : " (INTERRUPTED)");
		y += 18;
	}
}

static double top_limit(const struct ad_run *runs[2], const struct demo_config *c)
{
	double hi = c->capacity;

	for (int r = 0; r < 2; r++)
		for (size_t i = 0; runs[r] && i < runs[r]->ns; i++)
			hi = fmax(hi, runs[r]->s[i].limit);
	return 4 * ceil(hi * 1.1 / 4);
}

void adaptive_svg_write(FILE *f, const struct ad_run *stat, const struct ad_run *adap,
			const struct demo_config *c)
{
	const struct ad_run *runs[2] = { stat, adap };
	double pay_qps = c->rate * c->pay_share;
	struct panel panels[NPANELS] = {
		{ 0, "payment's limit (calls at a time), against its capacity", 0,
		  top_limit(runs, c), false },
		{ 1, "payment orders that succeeded, per second", 0, 4 * ceil(pay_qps * 1.2 / 4),
		  false },
		{ 2, "payment p99 response time (log scale)", 10, 10000, true },
		{ 3, "order-service workers held by payment", 0, c->workers, false },
	};
	double (*value[NPANELS])(const struct tick *) = { NULL, v_pay_ok, v_pay_p99, v_pay_held };

	svg_begin(f, W, H);
	legend(f, c);
	for (int i = 0; i < NPANELS; i++) {
		frame(f, &panels[i], c);
		for (int r = 0; r < 2; r++) {
			if (!runs[r])
				continue;
			if (i == 0)
				steps(f, &panels[i], runs[r], false, color[r], "none", 2.5, c);
			else
				per_second(f, &panels[i], runs[r], r, value[i], c);
		}
		if (i == 0 && (stat || adap))
			steps(f, &panels[i], stat ? stat : adap, true, "#333", "4,3", 1.5, c);
	}
	footer(f, runs);
	fprintf(f, "</svg>\n");
}
