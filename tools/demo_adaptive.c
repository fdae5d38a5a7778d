/* --scenario adaptive (see demo_adaptive.h): the order service of the
 * containment scenario, isolated in both runs, in front of a payment
 * backend that serves --pay-capacity calls at a time and only
 * --fault-capacity during the fault. Run 1 keeps the static limit; run 2
 * attaches the adaptive controller with its defaults. The summary compares
 * the orders that arrived during the fault, and checks what the controller
 * should have done: followed the capacity down and come back after. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bulkhead/adaptive.h"
#include "cli.h"
#include "demo_adaptive.h"

/* ---- the limit over time ---------------------------------------------- */

static void take_sample(struct ad_run *run, struct service *s, struct backend *pay,
			uint64_t t0)
{
	struct service_gauges g;
	struct ad_sample *n;

	if (run->ns == run->cap) {
		size_t cap = run->cap ? 2 * run->cap : 256;

		n = realloc(run->s, cap * sizeof(*n));
		if (!n)
			return; /* the chart misses a point, nothing else */
		run->s = n;
		run->cap = cap;
	}
	service_gauges(s, &g);
	run->s[run->ns++] = (struct ad_sample){
		.t_s = (double)(bh_now_ns() - t0) / 1e9,
		.limit = (uint32_t)g.bh[DEP_PAY].limit,
		.capacity = atomic_load_explicit(&pay->capacity, memory_order_relaxed),
	};
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* The median limit of the samples in [from_s, to_s); 0 when none. */
static uint32_t median_limit(const struct ad_run *run, double from_s, double to_s)
{
	uint32_t *v = malloc((run->ns ? run->ns : 1) * sizeof(*v)), m = 0;
	size_t n = 0;

	if (!v)
		return 0;
	for (size_t i = 0; i < run->ns; i++)
		if (run->s[i].t_s >= from_s && run->s[i].t_s < to_s)
			v[n++] = run->s[i].limit;
	if (n) {
		qsort(v, n, sizeof(*v), cmp_u32);
		m = v[(n - 1) / 2];
	}
	free(v);
	return m;
}

/* ---- one run ----------------------------------------------------------- */

struct ad_scenario {
	const struct demo_config *cfg;
	const struct ad_sizing *z;
	struct backend backend[NDEPS];
};

static void set_fault(struct ad_scenario *sc, bool on)
{
	backend_set_capacity(&sc->backend[DEP_PAY],
			     on ? sc->cfg->fault_capacity : sc->cfg->capacity);
}

static const char *reason_of(struct service *s)
{
	struct bh_adaptive_stats st;
	bh_adaptive_t *ctl = service_adaptive(s, DEP_PAY);
	const char *name;

	if (!ctl || bh_adaptive_stats(ctl, &st) < 0)
		return "-";
	name = bh_adaptive_reason_name(st.reason);
	return name ? name : "?";
}

static void print_header(const struct demo_config *cfg)
{
	if (cfg->quiet)
		return;
	printf("%3s  | %-26s | %-22s | %-5s | %s\n", "", "        payment orders", "  payment's bulkhead",
	       "held", "inventory");
	printf("%3s  | %5s %5s %6s %6s | %5s %4s %5s %5s | %5s | %5s   %s\n", "t", "offer", "ok",
	       "p50", "p99", "limit", "cap", "in", "shed", "pay", "ok", "last change");
}

static void fmt_s(double s, char *buf, size_t len)
{
	if (isnan(s))
		snprintf(buf, len, "-");
	else if (s < 1.0)
		snprintf(buf, len, "%.0fms", s * 1e3);
	else
		snprintf(buf, len, "%.2fs", s);
}

static void print_line(const struct tick *tk, const struct ad_sample *last, struct service *s)
{
	const struct dep_tick *p = &tk->d[DEP_PAY], *i = &tk->d[DEP_INV];
	char ok[2][16], p50[16], p99[16];

	cli_fmt_share(p->ok, p->done, ok[0], sizeof(ok[0]));
	cli_fmt_share(i->ok, i->done, ok[1], sizeof(ok[1]));
	fmt_s(p->p50_s, p50, sizeof(p50));
	fmt_s(p->p99_s, p99, sizeof(p99));
	printf("%3u%c | %5u %5s %6s %6s | %5u %4u %5llu %5llu | %5u | %5s   %s\n", tk->t,
	       tk->fault ? '!' : ' ', p->offered, ok[0], p50, p99, last->limit, last->capacity,
	       (unsigned long long)p->bh.in_flight,
	       (unsigned long long)(p->rejected + p->timed_out), p->held, ok[1], reason_of(s));
	fflush(stdout);
}

static bool drain(const struct demo_config *c, struct service *s)
{
	double longest = fmax(c->timeout_s[DEP_INV], c->timeout_s[DEP_PAY]);
	uint64_t end = bh_now_ns() + sec_to_ns(longest + 1);

	service_stop_load(s);
	while (!service_idle(s) && bh_now_ns() < end)
		if (!demo_wait_until(bh_now_ns() + 20 * BH_MSEC))
			return false;
	return true;
}

/* Three kinds of instants: a sample of the limit every AD_SAMPLE_NS, the
 * end of each second (a line), the fault's edges (payment's capacity). */
static int drive(struct ad_scenario *sc, struct service *s, struct ad_run *run,
		 struct results *res, uint64_t t0)
{
	const struct demo_config *c = sc->cfg;
	struct demo_config quiet = *c;
	uint64_t edge[2] = { t0 + sec_to_ns(c->fault_at_s), t0 + sec_to_ns(fault_end_s(c)) };
	uint64_t next_sample = t0;
	uint32_t sec = 1, secs = (uint32_t)(c->duration_s + 0.999), stage = 0;
	struct reporter rp;

	quiet.quiet = true; /* the lines are this scenario's own */
	reporter_init(&rp, res);
	while (sec <= secs) {
		uint64_t tick = t0 + (uint64_t)sec * BH_SEC, at = tick;

		if (next_sample < at)
			at = next_sample;
		if (stage < 2 && edge[stage] < at)
			at = edge[stage];
		if (!demo_wait_until(at))
			return -EINTR;
		if (stage < 2 && bh_now_ns() >= edge[stage]) {
			set_fault(sc, ++stage == 1);
			continue;
		}
		if (bh_now_ns() >= next_sample) {
			take_sample(run, s, &sc->backend[DEP_PAY], t0);
			next_sample += AD_SAMPLE_NS;
			continue;
		}
		reporter_tick(&rp, &run->rr, &quiet, s, sec, fault_overlaps(c, sec - 1.0, sec));
		if (!c->quiet && run->rr.nticks && run->ns)
			print_line(&run->rr.ticks[run->rr.nticks - 1], &run->s[run->ns - 1], s);
		sec++;
	}
	return drain(c, s) ? 0 : -EINTR;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Response times of the payment orders that arrived in the fault and
 * succeeded: what a caller who got an answer waited. */
static void ok_latency(struct ad_run *run, const struct demo_config *c, const struct results *res)
{
	double *v = malloc((res->n ? res->n : 1) * sizeof(*v));
	uint64_t from = sec_to_ns(c->fault_at_s), to = sec_to_ns(fault_end_s(c));
	size_t n = 0;

	run->ok_p50_s = run->ok_p99_s = NAN;
	if (!v)
		return;
	for (size_t i = 0; i < res->n; i++) {
		const struct record *r = &res->rec[i];

		if (r->dep == DEP_PAY && r->outcome == OUT_OK && r->arrival_ns >= from &&
		    r->arrival_ns < to)
			v[n++] = (double)(r->done_ns - r->arrival_ns) / 1e9;
	}
	qsort(v, n, sizeof(*v), cmp_double);
	run->ok_p50_s = percentile_sorted(v, n, 0.50);
	run->ok_p99_s = percentile_sorted(v, n, 0.99);
	free(v);
}

/* The part of the fault a run saw: all of it, unless it was stopped first. */
static double fault_seen_s(const struct ad_run *run, const struct demo_config *c)
{
	double end = fault_end_s(c);

	if (!run->complete && run->rr.stopped_s < end)
		end = run->rr.stopped_s;
	return end > c->fault_at_s ? end - c->fault_at_s : NAN;
}

static void finish_run(struct ad_run *run, const struct demo_config *c, const struct results *res)
{
	double mid = c->fault_at_s + c->fault_for_s / 2;
	/* the limit grows back a step per window: where it got to by the end */
	double after_end = c->duration_s - (c->duration_s - fault_end_s(c)) / 4;

	report_finish(&run->rr, c, res);
	ok_latency(run, c, res);
	run->late_fault_median = median_limit(run, mid, fault_end_s(c));
	run->late_after_median = median_limit(run, after_end, c->duration_s);
	run->goodput = (double)run->rr.ph[DEP_PAY][PH_FAULT].ok / fault_seen_s(run, c);
}

static int run_one(struct ad_scenario *sc, bool adaptive, struct ad_run *run)
{
	const struct demo_config *c = sc->cfg;
	struct service_params p = { .cfg = c, .isolated = true };
	struct results res;
	struct service *s;
	int r;

	memset(run, 0, sizeof(*run));
	run->label = adaptive ? "adaptive limit" : "static limit";
	run->adaptive = adaptive;
	run->rr.label = run->label;
	run->rr.isolated = true;
	p.adaptive[DEP_PAY] = adaptive;
	/* The compartment is a hard bound: the workers block in their calls,
	 * and a payment limit above its share would take inventory's. */
	p.adaptive_max[DEP_PAY] = sc->z->conc[DEP_PAY];
	for (int d = 0; d < NDEPS; d++) {
		p.port[d] = sc->backend[d].port;
		p.conc[d] = run->rr.conc[d] = sc->z->conc[d];
		p.queue[d] = run->rr.queue[d] = sc->z->queue[d];
		p.queue_wait_ns[d] = run->rr.queue_wait_ns[d] = sc->z->queue_wait_ns[d];
	}
	r = results_init(&res, (size_t)(c->rate * (c->duration_s + 1) * 1.1) + 1024);
	if (r < 0)
		goto fail;
	p.res = &res;
	set_fault(sc, false);
	printf("\n== run %s: %s\n", adaptive ? "2/2" : "1/2",
	       adaptive ? "adaptive: a controller on payment's bulkhead moves its limit"
			: "static: payment's bulkhead keeps the limit bulkhead-size computes");
	print_header(c);
	p.t0 = bh_now_ns();
	r = service_start(&p, &s);
	if (r == 0) {
		r = drive(sc, s, run, &res, p.t0);
		run->complete = run->rr.complete = r == 0;
		run->rr.stopped_s = (double)(bh_now_ns() - p.t0) / 1e9;
		run->rr.refused_releases = service_stop(s);
		finish_run(run, c, &res);
	}
	results_free(&res);
	set_fault(sc, false);
	if (r == 0 || r == -EINTR)
		return r;
fail:
	fprintf(stderr, "%s: cannot run %s: %s\n", cli_prog, run->label, strerror(-r));
	return r;
}

static void run_free(struct ad_run *run)
{
	run_report_free(&run->rr);
	free(run->s);
	run->s = NULL;
}

/* ---- the claims and the summary ------------------------------------------ */

/* What the scenario shows, each checked on the runs: the adaptive limit
 * fell to near the reduced capacity (within a factor 2, median of the
 * fault's second half), came back after it (median of the last quarter of
 * the time after the fault: at least the calls payment's load keeps busy at
 * its normal latency), and payment got at least 1.5 times the static
 * limit's successes during the fault. */
struct claims {
	bool followed, recovered, better;
	uint32_t need;
};

static struct claims check_claims(const struct ad_run *st, const struct ad_run *ad,
				  const struct demo_config *c)
{
	struct claims k;

	k.followed = ad->late_fault_median >= (c->fault_capacity + 1) / 2 &&
		     ad->late_fault_median <= 2 * c->fault_capacity;
	k.need = (uint32_t)ceil(c->rate * c->pay_share * c->latency_s[DEP_PAY] - 1e-9);
	k.recovered = ad->late_after_median >= k.need;
	k.better = ad->goodput >= 1.5 * st->goodput;
	return k;
}

enum {
	R_PAY_OK, R_GOODPUT, R_OK_P50, R_OK_P99, R_PAY_SHED, R_HELD, R_INV_OK, R_INV_P99,
	R_LIMIT_FAULT, R_LIMIT_AFTER, R_PAY_OK_AFTER, NR
};

static const char *const r_label[NR] = {
	"payment orders that succeeded",
	"payment goodput (successes/s)",
	"payment successes: median time",
	"payment successes: p99 time",
	"payment rejected / gave up queueing",
	"workers held by payment (peak)",
	"inventory orders that succeeded",
	"inventory p99 response time",
	"limit, fault's 2nd half (median)",
	"limit, end of the run (median)",
	"after the fault: payment success",
};

#define CELL 32

static void cells(const struct ad_run *run, const struct demo_config *c, char cell[NR][CELL])
{
	const struct phase_stats *pay = &run->rr.ph[DEP_PAY][PH_FAULT];
	const struct phase_stats *inv = &run->rr.ph[DEP_INV][PH_FAULT];
	const struct phase_stats *after = &run->rr.ph[DEP_PAY][PH_AFTER];

	cli_fmt_share_of(pay->ok, pay->n, cell[R_PAY_OK], CELL);
	if (isnan(run->goodput))
		snprintf(cell[R_GOODPUT], CELL, "-");
	else
		snprintf(cell[R_GOODPUT], CELL, "%.1f/s", run->goodput);
	fmt_s(run->ok_p50_s, cell[R_OK_P50], CELL);
	fmt_s(run->ok_p99_s, cell[R_OK_P99], CELL);
	snprintf(cell[R_PAY_SHED], CELL, "%llu / %llu",
		 (unsigned long long)pay->by_outcome[OUT_REJECTED],
		 (unsigned long long)pay->by_outcome[OUT_QUEUE_TIMEOUT]);
	snprintf(cell[R_HELD], CELL, "%u of %u", run->rr.peak_held[DEP_PAY], c->workers);
	cli_fmt_share_of(inv->ok, inv->n, cell[R_INV_OK], CELL);
	fmt_s(inv->p99_s, cell[R_INV_P99], CELL);
	snprintf(cell[R_LIMIT_FAULT], CELL, "%u (cap. %u)", run->late_fault_median,
		 c->fault_capacity);
	snprintf(cell[R_LIMIT_AFTER], CELL, "%u (cap. %u)", run->late_after_median, c->capacity);
	cli_fmt_share_of(after->ok, after->n, cell[R_PAY_OK_AFTER], CELL);
}

static const char *yes(bool b)
{
	return b ? "yes" : "NO";
}

static void print_claims(const struct ad_run *st, const struct ad_run *ad,
			 const struct demo_config *c)
{
	struct claims k = check_claims(st, ad, c);

	printf("\nclaims (checked on these runs):\n");
	printf("  %-3s the adaptive limit fell to near payment's reduced capacity: %u in the\n"
	       "      fault's second half (median), within a factor 2 of %u\n",
	       yes(k.followed), ad->late_fault_median, c->fault_capacity);
	printf("  %-3s and came back after it: %u in the last quarter of the time after the\n"
	       "      fault (median), at least the %u calls payment's load keeps busy\n",
	       yes(k.recovered), ad->late_after_median, k.need);
	printf("  %-3s payment got more done with the adaptive limit during the fault:\n"
	       "      %.1f vs %.1f successes/s, at least 1.5 times as many\n",
	       yes(k.better), ad->goodput, st->goodput);
}

static void print_summary(const struct ad_run *st, const struct ad_run *ad,
			  const struct demo_config *c)
{
	const struct ad_run *runs[2] = { st, ad };
	char cell[2][NR][CELL], note[128];

	for (int r = 0; r < 2; r++) {
		if (runs[r])
			cells(runs[r], c, cell[r]);
		else
			for (int i = 0; i < NR; i++)
				snprintf(cell[r][i], CELL, "(not run)");
	}
	printf("\nsummary: orders that arrived during the fault (%g s to %g s), payment's\n"
	       "capacity %u calls at a time, %u before and after\n",
	       c->fault_at_s, fault_end_s(c), c->fault_capacity, c->capacity);
	for (int r = 0; r < 2; r++)
		if (runs[r] && !runs[r]->complete)
			printf("  INTERRUPTED: %s\n",
			       demo_stop_note(runs[r]->label, runs[r]->rr.stopped_s, note,
					      sizeof(note)));
	printf("  %-35s%21s %21s\n", "", "static limit", "adaptive limit");
	for (int i = 0; i < NR; i++)
		printf("  %-35s%21s %21s\n", r_label[i], cell[0][i], cell[1][i]);
	if (st && ad && st->complete && ad->complete)
		print_claims(st, ad, c);
}

static void kv_run(FILE *f, const char *p, const struct ad_run *run)
{
	const struct phase_stats *pay = &run->rr.ph[DEP_PAY][PH_FAULT];
	const struct phase_stats *inv = &run->rr.ph[DEP_INV][PH_FAULT];

	fprintf(f, "%s_complete=%d\n", p, run->complete);
	if (!run->complete)
		fprintf(f, "%s_stopped_s=%.3f\n%s_open_at_stop=%llu\n", p, run->rr.stopped_s, p,
			(unsigned long long)run->rr.open_at_stop);
	fprintf(f, "%s_pay_n_fault=%llu\n", p, (unsigned long long)pay->n);
	fprintf(f, "%s_pay_ok_n_fault=%llu\n", p, (unsigned long long)pay->ok);
	fprintf(f, "%s_pay_goodput_fault=%.2f\n", p, run->goodput);
	fprintf(f, "%s_pay_ok_p50_fault_ms=%.1f\n", p, run->ok_p50_s * 1e3);
	fprintf(f, "%s_pay_ok_p99_fault_ms=%.1f\n", p, run->ok_p99_s * 1e3);
	fprintf(f, "%s_pay_p50_fault_ms=%.1f\n", p, pay->p50_s * 1e3);
	fprintf(f, "%s_pay_p99_fault_ms=%.1f\n", p, pay->p99_s * 1e3);
	fprintf(f, "%s_pay_rejected_fault=%llu\n", p,
		(unsigned long long)pay->by_outcome[OUT_REJECTED]);
	fprintf(f, "%s_pay_queue_timeout_fault=%llu\n", p,
		(unsigned long long)pay->by_outcome[OUT_QUEUE_TIMEOUT]);
	fprintf(f, "%s_peak_pay_held=%u\n", p, run->rr.peak_held[DEP_PAY]);
	fprintf(f, "%s_pay_n_after=%llu\n", p, (unsigned long long)run->rr.ph[DEP_PAY][PH_AFTER].n);
	fprintf(f, "%s_pay_ok_n_after=%llu\n", p, (unsigned long long)run->rr.ph[DEP_PAY][PH_AFTER].ok);
	fprintf(f, "%s_inv_n_fault=%llu\n", p, (unsigned long long)inv->n);
	fprintf(f, "%s_inv_ok_n_fault=%llu\n", p, (unsigned long long)inv->ok);
	fprintf(f, "%s_limit_late_fault=%u\n", p, run->late_fault_median);
	fprintf(f, "%s_limit_late_after=%u\n", p, run->late_after_median);
	fprintf(f, "%s_refused_releases=%llu\n", p, (unsigned long long)run->rr.refused_releases);
	fprintf(f, "%s_dropped_records=%llu\n", p, (unsigned long long)run->rr.dropped_records);
}

static void write_kv(FILE *f, const struct ad_run *st, const struct ad_run *ad,
		     const struct demo_config *c)
{
	bool stopped = (st && !st->complete) || (ad && !ad->complete);

	fprintf(f, "rate=%g\nworkers=%u\nfault_at_s=%g\nfault_for_s=%g\ncapacity=%u\n"
		   "fault_capacity=%u\ninterrupted=%d\n",
		c->rate, c->workers, c->fault_at_s, c->fault_for_s, c->capacity, c->fault_capacity,
		stopped);
	if (st)
		kv_run(f, "static", st);
	if (ad)
		kv_run(f, "adaptive", ad);
	if (st && ad && st->complete && ad->complete) {
		struct claims k = check_claims(st, ad, c);

		fprintf(f, "claim_followed=%d\nclaim_recovered=%d\nclaim_better=%d\n"
			   "pay_need=%u\n", k.followed, k.recovered, k.better, k.need);
	}
}

/* ---- the scenario ------------------------------------------------------------- */

static void print_intro(const struct ad_scenario *sc)
{
	const struct demo_config *c = sc->cfg;
	char a[32], b[32];

	printf("bulkhead-demo --scenario adaptive: %g orders/s, %.0f%% inventory (~%s), "
	       "%.0f%% payment (~%s)\n",
	       c->rate, 100 * (1 - c->pay_share), cli_fmt_duration(c->latency_s[DEP_INV], a, 32),
	       100 * c->pay_share, cli_fmt_duration(c->latency_s[DEP_PAY], b, 32));
	printf("  payment serves %u calls at a time and queues the rest, serving each to the\n"
	       "  end even when its caller gave up; from %g s to %g s of each %g s run, only %u\n",
	       c->capacity, c->fault_at_s, fault_end_s(c), c->duration_s, c->fault_capacity);
	printf("  %u workers, accept queue %u; deadlines: inventory %s, payment %s\n", c->workers,
	       c->accept_queue, cli_fmt_duration(c->timeout_s[DEP_INV], a, 32),
	       cli_fmt_duration(c->timeout_s[DEP_PAY], b, 32));
	printf("  bulkheads (permits + queue): inventory %u + %u, payment %u + %u, as\n"
	       "  bulkhead-size computes them; run 2 attaches a controller to payment's\n"
	       "  (bh_adaptive_attach, the defaults but the ceiling: %u, so that payment\n"
	       "  never holds more workers than its share); each call is a sample, its\n"
	       "  time from the grant, a timeout a drop\n",
	       sc->z->conc[DEP_INV], sc->z->queue[DEP_INV], sc->z->conc[DEP_PAY],
	       sc->z->queue[DEP_PAY], sc->z->conc[DEP_PAY]);
	fflush(stdout);
}

static int finish_outputs(const struct ad_run *st, const struct ad_run *ad,
			  const struct demo_config *c, struct demo_outputs *out)
{
	int r, r2;

	print_summary(st, ad, c);
	if (out->svg.f)
		adaptive_svg_write(out->svg.f, st, ad, c);
	r = demo_output_close(&out->svg);
	if (r == 0 && out->svg.path && *out->svg.path)
		printf("\nchart: %s\n", out->svg.path);
	if (out->kv.f)
		write_kv(out->kv.f, st, ad, c);
	r2 = demo_output_close(&out->kv);
	return r < 0 ? r : r2;
}

int adaptive_scenario(const struct demo_config *cfg, const struct ad_sizing *z,
		      struct demo_outputs *out)
{
	struct ad_scenario sc = { .cfg = cfg, .z = z };
	struct ad_run runs[2];
	bool ran[2] = { false, false };
	int r = backends_start(sc.backend, sc.cfg), w;

	if (r < 0)
		return r;
	print_intro(&sc);
	for (int i = 0; i < 2 && r == 0; i++) {
		if (!(cfg->runs & (i ? RUN_WITH : RUN_WITHOUT)))
			continue;
		r = run_one(&sc, i == 1, &runs[i]);
		ran[i] = r == 0 || r == -EINTR;
	}
	for (int d = 0; d < NDEPS; d++)
		backend_stop(&sc.backend[d]);
	if (r == 0 || r == -EINTR) {
		w = finish_outputs(ran[0] ? &runs[0] : NULL, ran[1] ? &runs[1] : NULL, cfg, out);
		if (r == 0)
			r = w;
	}
	for (int i = 0; i < 2; i++)
		if (ran[i])
			run_free(&runs[i]);
	return r;
}
