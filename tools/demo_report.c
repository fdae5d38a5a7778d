/* What the demo measures and prints: a line per second while a run goes,
 * then totals by phase (before, during, after the fault) compared side by
 * side. Orders count in the phase they arrived in, so none escapes the
 * fault window by finishing after it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "demo.h"

#define FAST_FAIL_NS (50 * BH_MSEC)

/* ---- results ------------------------------------------------------------- */

int results_init(struct results *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	r->rec = calloc(cap, sizeof(*r->rec));
	if (!r->rec)
		return -ENOMEM;
	r->cap = cap;
	pthread_mutex_init(&r->lock, NULL);
	return 0;
}

void results_free(struct results *r)
{
	pthread_mutex_destroy(&r->lock);
	free(r->rec);
	r->rec = NULL;
}

/* The array never moves: records below n are final and readable after
 * reading n under the lock. */
void results_add(struct results *r, uint64_t arrival_ns, uint64_t done_ns, enum dep d,
		 enum outcome o)
{
	pthread_mutex_lock(&r->lock);
	if (r->n < r->cap)
		r->rec[r->n++] = (struct record){ arrival_ns, done_ns, (uint8_t)d, (uint8_t)o };
	else
		r->dropped++;
	pthread_mutex_unlock(&r->lock);
}

static size_t results_count(struct results *r)
{
	size_t n;

	pthread_mutex_lock(&r->lock);
	n = r->n;
	pthread_mutex_unlock(&r->lock);
	return n;
}

/* ---- percentiles ----------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double percentile_sorted(const double *v, size_t n, double q)
{
	size_t rank;

	if (n == 0)
		return NAN;
	rank = (size_t)ceil(q * (double)n);
	return v[rank ? rank - 1 : 0];
}

/* ---- one line per second ----------------------------------------------------- */

void reporter_init(struct reporter *rp, struct results *res)
{
	memset(rp, 0, sizeof(*rp));
	rp->res = res;
}

/* The orders finished since the last tick: counts and response times. */
static void fold_records(struct reporter *rp, struct tick *tk)
{
	size_t n = results_count(rp->res), m = n - rp->seen, nl[NDEPS] = { 0, 0 };
	double *lat = malloc((2 * m + 1) * sizeof(double)); /* m per dependency */

	for (size_t i = rp->seen; i < n; i++) {
		const struct record *r = &rp->res->rec[i];
		struct dep_tick *dt = &tk->d[r->dep];

		dt->done++;
		dt->ok += r->outcome == OUT_OK;
		if (lat)
			lat[r->dep * m + nl[r->dep]++] = (double)(r->done_ns - r->arrival_ns) / 1e9;
	}
	for (int d = 0; d < NDEPS; d++) {
		double *v = lat ? lat + d * m : NULL;

		if (v)
			qsort(v, nl[d], sizeof(double), cmp_double);
		tk->d[d].p50_s = v ? percentile_sorted(v, nl[d], 0.50) : NAN;
		tk->d[d].p99_s = v ? percentile_sorted(v, nl[d], 0.99) : NAN;
	}
	free(lat);
	rp->seen = n;
}

static void fold_gauges(struct reporter *rp, struct tick *tk, struct service *s)
{
	struct service_gauges g;

	service_gauges(s, &g);
	tk->busy = g.busy;
	tk->accept_queued = g.accept_queued;
	tk->has_bh = g.has_bh;
	for (int d = 0; d < NDEPS; d++) {
		struct dep_tick *dt = &tk->d[d];

		dt->offered = (uint32_t)(g.offered[d] - rp->last.offered[d]);
		dt->held = g.held[d];
		dt->bh = g.bh[d];
		dt->rejected = g.bh[d].rejected - rp->last.bh[d].rejected;
		dt->timed_out = g.bh[d].timed_out - rp->last.bh[d].timed_out;
	}
	rp->last = g;
}

static const char *fmt_lat(double s, char *buf, size_t len)
{
	if (isnan(s))
		snprintf(buf, len, "-");
	else if (s < 1e-3)
		snprintf(buf, len, "%.2fms", s * 1e3);
	else if (s < 1.0)
		snprintf(buf, len, "%.0fms", s * 1e3);
	else
		snprintf(buf, len, "%.2fs", s);
	return buf;
}

static const char *fmt_ok(const struct dep_tick *d, char *buf, size_t len)
{
	return cli_fmt_share(d->ok, d->done, buf, len);
}

static const char *fmt_bh(const struct tick *tk, enum dep d, char *buf, size_t len)
{
	const struct dep_tick *dt = &tk->d[d];

	if (!tk->has_bh)
		snprintf(buf, len, "%15s", "-");
	else
		snprintf(buf, len, "%3llu %4llu %6llu", (unsigned long long)dt->bh.in_flight,
			 (unsigned long long)dt->bh.queued,
			 (unsigned long long)(dt->rejected + dt->timed_out));
	return buf;
}

/* The same widths as print_tick's, so the columns line up. */
void report_print_header(const struct demo_config *cfg)
{
	if (cfg->quiet)
		return;
	printf("%14s | %-21s | %-21s | %-9s | %-15s | %s\n", "orders/s", "    inventory",
	       "     payment", " workers", "  inventory bh", "  payment bh");
	printf("%3s  %5s %3s | %5s %6s %6s   | %5s %6s %6s   | %3s %4s  | "
	       "%3s %4s %6s | %3s %4s %6s\n",
	       "t", "offer", "ok", "ok", "p50", "p99", "ok", "p50", "p99", "pay", "busy", "in",
	       "queue", "shed", "in", "queue", "shed");
}

static void print_tick(const struct tick *tk)
{
	char ok[2][16], p50[2][16], p99[2][16], bh[2][32];

	for (int d = 0; d < NDEPS; d++) {
		fmt_ok(&tk->d[d], ok[d], sizeof(ok[d]));
		fmt_lat(tk->d[d].p50_s, p50[d], sizeof(p50[d]));
		fmt_lat(tk->d[d].p99_s, p99[d], sizeof(p99[d]));
		fmt_bh(tk, (enum dep)d, bh[d], sizeof(bh[d]));
	}
	printf("%3u%c %5u %3u | %5s %6s %6s   | %5s %6s %6s   | %3u %4u  | %s | %s\n", tk->t,
	       tk->fault ? '!' : ' ', tk->d[0].offered + tk->d[1].offered,
	       tk->d[0].ok + tk->d[1].ok, ok[0], p50[0], p99[0], ok[1], p50[1], p99[1],
	       tk->d[DEP_PAY].held, tk->busy, bh[0], bh[1]);
	fflush(stdout);
}

static int grow_ticks(struct run_report *rr)
{
	uint32_t cap = rr->cap_ticks ? 2 * rr->cap_ticks : 64;
	struct tick *t = realloc(rr->ticks, cap * sizeof(*t));

	if (!t)
		return -ENOMEM;
	rr->ticks = t;
	rr->cap_ticks = cap;
	return 0;
}

void reporter_tick(struct reporter *rp, struct run_report *rr, const struct demo_config *cfg,
		   struct service *s, uint32_t t, bool fault)
{
	struct tick tk = { .t = t, .fault = fault };

	fold_records(rp, &tk);
	fold_gauges(rp, &tk, s);
	for (int d = 0; d < NDEPS; d++)
		if (tk.d[d].held > rr->peak_held[d])
			rr->peak_held[d] = tk.d[d].held;
	rr->late_max_ns = rp->last.late_max_ns;
	if (!cfg->quiet)
		print_tick(&tk);
	if (rr->nticks == rr->cap_ticks && grow_ticks(rr) < 0)
		return;
	rr->ticks[rr->nticks++] = tk;
}

/* ---- totals by phase ----------------------------------------------------- */

static enum phase phase_of(uint64_t arrival_ns, const struct demo_config *cfg)
{
	if (arrival_ns < sec_to_ns(cfg->fault_at_s))
		return PH_BEFORE;
	if (arrival_ns < sec_to_ns(cfg->fault_at_s + cfg->fault_for_s))
		return PH_FAULT;
	return PH_AFTER;
}

/* Whether an order counts in the totals: one still open when a run was
 * stopped neither succeeded nor failed. */
static bool counted(const struct record *r)
{
	return r->outcome != OUT_SHUTDOWN;
}

static void phase_latencies(struct phase_stats *ps, const struct results *res, enum dep d,
			    enum phase ph, const struct demo_config *cfg)
{
	double *all = malloc((ps->n ? ps->n : 1) * sizeof(double));
	double *failed = malloc((ps->n ? ps->n : 1) * sizeof(double));
	size_t na = 0, nf = 0;

	if (!all || !failed)
		goto out;
	for (size_t i = 0; i < res->n; i++) {
		const struct record *r = &res->rec[i];
		double lat = (double)(r->done_ns - r->arrival_ns) / 1e9;

		if (r->dep != d || phase_of(r->arrival_ns, cfg) != ph || !counted(r))
			continue;
		all[na++] = lat;
		if (r->outcome != OUT_OK)
			failed[nf++] = lat;
	}
	qsort(all, na, sizeof(double), cmp_double);
	qsort(failed, nf, sizeof(double), cmp_double);
	ps->p50_s = percentile_sorted(all, na, 0.50);
	ps->p99_s = percentile_sorted(all, na, 0.99);
	ps->fail_p50_s = percentile_sorted(failed, nf, 0.50);
out:
	free(all);
	free(failed);
}

void report_finish(struct run_report *rr, const struct demo_config *cfg,
		   const struct results *res)
{
	memset(rr->ph, 0, sizeof(rr->ph));
	rr->open_at_stop = 0;
	for (size_t i = 0; i < res->n; i++) {
		const struct record *r = &res->rec[i];
		struct phase_stats *ps = &rr->ph[r->dep][phase_of(r->arrival_ns, cfg)];

		if (!counted(r)) {
			rr->open_at_stop++;
			continue;
		}
		ps->n++;
		ps->ok += r->outcome == OUT_OK;
		ps->by_outcome[r->outcome]++;
		if (r->outcome != OUT_OK && r->done_ns - r->arrival_ns <= FAST_FAIL_NS)
			ps->fast_fail++;
	}
	for (int d = 0; d < NDEPS; d++)
		for (int ph = 0; ph < NPHASES; ph++)
			phase_latencies(&rr->ph[d][ph], res, (enum dep)d, (enum phase)ph, cfg);
	rr->dropped_records = res->dropped;
}

void run_report_free(struct run_report *rr)
{
	free(rr->ticks);
	rr->ticks = NULL;
	rr->nticks = rr->cap_ticks = 0;
}

/* ---- the side-by-side summary -------------------------------------------- */

#define CELL 32

static double share(uint64_t part, uint64_t whole)
{
	return whole ? (double)part / (double)whole : NAN;
}

/* The part of the fault a run saw: all of it, unless it was stopped first. */
static double fault_seen_s(const struct run_report *rr, const struct demo_config *cfg)
{
	double end = fault_end_s(cfg);

	if (!rr->complete && rr->stopped_s < end)
		end = rr->stopped_s;
	return end > cfg->fault_at_s ? end - cfg->fault_at_s : 0;
}

static double served_per_s(const struct run_report *rr, const struct demo_config *cfg)
{
	uint64_t ok = rr->ph[DEP_INV][PH_FAULT].ok + rr->ph[DEP_PAY][PH_FAULT].ok;
	double seen = fault_seen_s(rr, cfg);

	return seen > 0 ? (double)ok / seen : NAN;
}

enum {
	ROW_INV_OK, ROW_INV_P99, ROW_PAY_OK, ROW_PAY_FAST, ROW_PAY_FAIL_P50, ROW_PAY_SHED,
	ROW_SERVED, ROW_PEAK_HELD, ROW_INV_OK_BEFORE, ROW_INV_P99_BEFORE, NROWS
};

static const char *const row_label[NROWS] = {
	"inventory orders that succeeded",
	"inventory p99 response time",
	"payment orders that succeeded",
	"payment failures answered < 50 ms",
	"payment median time to fail",
	"payment rejected / gave up queueing",
	"orders served per second",
	"workers held by payment (peak)",
	"before the fault: inventory success",
	"before the fault: inventory p99",
};

/* One column of the summary: a run's numbers for each row. */
static void run_cells(const struct run_report *rr, const struct demo_config *cfg,
		      char cell[NROWS][CELL])
{
	const struct phase_stats *inv = &rr->ph[DEP_INV][PH_FAULT];
	const struct phase_stats *pay = &rr->ph[DEP_PAY][PH_FAULT];
	const struct phase_stats *inv0 = &rr->ph[DEP_INV][PH_BEFORE];
	double served = served_per_s(rr, cfg);

	cli_fmt_share_of(inv->ok, inv->n, cell[ROW_INV_OK], CELL);
	fmt_lat(inv->p99_s, cell[ROW_INV_P99], CELL);
	cli_fmt_share_of(pay->ok, pay->n, cell[ROW_PAY_OK], CELL);
	cli_fmt_share_of(pay->fast_fail, pay->n - pay->ok, cell[ROW_PAY_FAST], CELL);
	fmt_lat(pay->fail_p50_s, cell[ROW_PAY_FAIL_P50], CELL);
	snprintf(cell[ROW_PAY_SHED], CELL, "%llu / %llu",
		 (unsigned long long)pay->by_outcome[OUT_REJECTED],
		 (unsigned long long)pay->by_outcome[OUT_QUEUE_TIMEOUT]);
	if (isnan(served))
		snprintf(cell[ROW_SERVED], CELL, "-");
	else
		snprintf(cell[ROW_SERVED], CELL, "%.0f/s", served);
	snprintf(cell[ROW_PEAK_HELD], CELL, "%u of %u", rr->peak_held[DEP_PAY], cfg->workers);
	cli_fmt_share_of(inv0->ok, inv0->n, cell[ROW_INV_OK_BEFORE], CELL);
	fmt_lat(inv0->p99_s, cell[ROW_INV_P99_BEFORE], CELL);
}

/* What a stopped run's column covers. */
static void print_stop_note(const struct run_report *rr, int i, const struct demo_config *cfg)
{
	char run[48], note[128];
	double seen = fault_seen_s(rr, cfg);

	snprintf(run, sizeof(run), "run %d/2 (%s)", i + 1, rr->label);
	printf("  INTERRUPTED: %s;\n", demo_stop_note(run, rr->stopped_s, note, sizeof(note)));
	if (seen > 0)
		printf("    its column covers the fault from %g s to %.2f s,\n", cfg->fault_at_s,
		       cfg->fault_at_s + seen);
	else
		printf("    it stopped before the fault;\n");
	printf("    the %llu orders still open then are left out\n",
	       (unsigned long long)rr->open_at_stop);
}

void report_print_summary(const struct run_report *without, const struct run_report *with,
			  const struct demo_config *cfg)
{
	const struct run_report *runs[2] = { without, with };
	char cell[2][NROWS][CELL];

	for (int r = 0; r < 2; r++) {
		if (runs[r])
			run_cells(runs[r], cfg, cell[r]);
		else
			for (int i = 0; i < NROWS; i++)
				snprintf(cell[r][i], CELL, "(not run)");
	}
	printf("\nsummary: orders that arrived during the fault (%g s to %g s)\n",
	       cfg->fault_at_s, fault_end_s(cfg));
	for (int r = 0; r < 2; r++)
		if (runs[r] && !runs[r]->complete)
			print_stop_note(runs[r], r, cfg);
	/* 80 columns; a cell of up to 20 characters keeps a space before it */
	printf("  %-35s%21s %21s\n", "", "without isolation", "with isolation");
	for (int i = 0; i < NROWS; i++)
		printf("  %-35s%21s %21s\n", row_label[i], cell[0][i], cell[1][i]);
}

/* ---- key=value, for scripts and the test ----------------------------------- */

static void kv_run(FILE *f, const char *p, const struct run_report *rr,
		   const struct demo_config *cfg)
{
	const struct phase_stats *inv = &rr->ph[DEP_INV][PH_FAULT];
	const struct phase_stats *pay = &rr->ph[DEP_PAY][PH_FAULT];
	const struct phase_stats *inv0 = &rr->ph[DEP_INV][PH_BEFORE];

	fprintf(f, "%s_complete=%d\n", p, rr->complete);
	if (!rr->complete)
		fprintf(f, "%s_stopped_s=%.3f\n%s_open_at_stop=%llu\n", p, rr->stopped_s, p,
			(unsigned long long)rr->open_at_stop);
	fprintf(f, "%s_inv_n_fault=%llu\n", p, (unsigned long long)inv->n);
	fprintf(f, "%s_inv_ok_fault=%.4f\n", p, share(inv->ok, inv->n));
	fprintf(f, "%s_inv_p99_fault_ms=%.3f\n", p, inv->p99_s * 1e3);
	fprintf(f, "%s_inv_n_before=%llu\n", p, (unsigned long long)inv0->n);
	fprintf(f, "%s_inv_ok_before=%.4f\n", p, share(inv0->ok, inv0->n));
	fprintf(f, "%s_inv_p99_before_ms=%.3f\n", p, inv0->p99_s * 1e3);
	fprintf(f, "%s_pay_n_fault=%llu\n", p, (unsigned long long)pay->n);
	fprintf(f, "%s_pay_ok_fault=%.4f\n", p, share(pay->ok, pay->n));
	fprintf(f, "%s_pay_fast_fail_fault=%.4f\n", p, share(pay->fast_fail, pay->n - pay->ok));
	fprintf(f, "%s_pay_fail_p50_fault_ms=%.3f\n", p, pay->fail_p50_s * 1e3);
	fprintf(f, "%s_pay_rejected_fault=%llu\n", p,
		(unsigned long long)pay->by_outcome[OUT_REJECTED]);
	fprintf(f, "%s_pay_queue_timeout_fault=%llu\n", p,
		(unsigned long long)pay->by_outcome[OUT_QUEUE_TIMEOUT]);
	fprintf(f, "%s_served_fault_per_s=%.1f\n", p, served_per_s(rr, cfg));
	fprintf(f, "%s_peak_pay_held=%u\n", p, rr->peak_held[DEP_PAY]);
	fprintf(f, "%s_peak_inv_held=%u\n", p, rr->peak_held[DEP_INV]);
	fprintf(f, "%s_refused_releases=%llu\n", p, (unsigned long long)rr->refused_releases);
	fprintf(f, "%s_dropped_records=%llu\n", p, (unsigned long long)rr->dropped_records);
	fprintf(f, "%s_late_max_ms=%.1f\n", p, (double)rr->late_max_ns / 1e6);
	for (int d = 0; d < NDEPS && rr->isolated; d++)
		fprintf(f, "%s_%s_bulkhead=%u+%u\n", p, d == DEP_INV ? "inv" : "pay", rr->conc[d],
			rr->queue[d]);
}

void report_write_kv(FILE *f, const struct run_report *without, const struct run_report *with,
		     const struct demo_config *cfg)
{
	bool stopped = (without && !without->complete) || (with && !with->complete);

	fprintf(f, "rate=%g\nworkers=%u\nfault_at_s=%g\nfault_for_s=%g\ninterrupted=%d\n",
		cfg->rate, cfg->workers, cfg->fault_at_s, cfg->fault_for_s, stopped);
	if (without)
		kv_run(f, "without", without, cfg);
	if (with)
		kv_run(f, "with", with, cfg);
}
