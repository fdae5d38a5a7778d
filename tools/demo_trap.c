/* bulkhead-demo --scenario async-trap: two runs with the same load and the
 * same fault, naive then tracked; a line per second while each runs, then
 * the two side by side, as text, key=value lines and a chart. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "demo_trap.h"

#define BACKEND_IDLE_NS (2 * BH_SEC) /* for the last RSTs to reach payment */
#define POLL_NS (50 * BH_MSEC)       /* how soon a published second is printed */

const char *const trap_mode_name[NTRAP_MODES] = { "naive", "tracked" };

static const char *const mode_story[NTRAP_MODES] = {
	"naive: the permit goes back when the caller stops waiting",
	"tracked: the permit goes back at the call's final CQE (bh_uring_track)",
};

int trap_run_init(struct trap_run *run, enum trap_mode mode, const struct demo_config *cfg)
{
	memset(run, 0, sizeof(*run));
	run->mode = mode;
	run->limit = cfg->conc[DEP_PAY];
	run->cap_ticks = (uint32_t)(cfg->duration_s + 0.999);
	run->cap_samples = (uint32_t)(cfg->duration_s * 10) + 2;
	run->ticks = calloc(run->cap_ticks, sizeof(*run->ticks));
	run->samples = calloc(run->cap_samples, sizeof(*run->samples));
	atomic_init(&run->nticks, 0);
	atomic_init(&run->nsamples, 0);
	if (run->ticks && run->samples)
		return 0;
	trap_run_free(run);
	return -ENOMEM;
}

void trap_run_free(struct trap_run *run)
{
	free(run->ticks);
	free(run->samples);
	run->ticks = NULL;
	run->samples = NULL;
}

/* ---- what it prints while it runs --------------------------------------- */

static void print_intro(const struct demo_config *c)
{
	char a[32], b[32], t[32];

	printf("bulkhead-demo: the async trap, for real over loopback: does the permit\n"
	       "  follow the call, or the caller's patience?\n");
	printf("  one io_uring event loop calls payment %g times a second, through a bulkhead\n"
	       "  of %u permits (no queue: a full bulkhead rejects at once)\n",
	       c->rate, c->conc[DEP_PAY]);
	printf("  payment answers in ~%s; from %g s to %g s of each %g s run, in ~%s\n",
	       cli_fmt_duration(c->latency_s[DEP_PAY], a, 32), c->fault_at_s, fault_end_s(c),
	       c->duration_s, cli_fmt_duration(c->fault_latency_s, b, 32));
	printf("  each caller stops waiting after %s; the call itself goes on in the kernel\n",
	       cli_fmt_duration(c->timeout_s[DEP_PAY], t, 32));
	printf("    naive:   gives its permit back then\n");
	if (c->call_deadline_s > 0)
		printf("    tracked: the permit follows the call; the call has its own %s\n"
		       "             deadline (a linked timeout), and a cancel when its caller\n"
		       "             gives up\n",
		       cli_fmt_duration(c->call_deadline_s, a, 32));
	else
		printf("    tracked: the permit follows the call, which is cancelled when its\n"
		       "             caller gives up (no deadline of its own)\n");
	printf("  in flight: what the bulkhead reports (bh_stats) against what really is: calls\n"
	       "  the loop started whose final CQE has not come (kernel), requests payment is\n"
	       "  serving (backend)\n");
	fflush(stdout);
}

static void print_header(const struct demo_config *c, enum trap_mode mode)
{
	printf("\n== run %d/2: %s\n", mode + 1, mode_story[mode]);
	if (c->quiet)
		return;
	printf("%36s | %s\n", "calls this second", "in flight, peak this second");
	printf("%3s  %6s %5s %5s %5s %6s | %8s %7s %7s\n", "t", "offer", "shed", "ok", "fail",
	       "gaveup", "bulkhead", "kernel", "backend");
}

static void print_tick(const struct trap_tick *tk)
{
	const struct trap_calls *k = &tk->calls;

	printf("%3u%c %6llu %5llu %5llu %5llu %6llu | %8u %7u %7u\n", tk->t, tk->fault ? '!' : ' ',
	       (unsigned long long)k->offered, (unsigned long long)(k->shed + k->no_start),
	       (unsigned long long)k->ok, (unsigned long long)(k->deadline + k->failed),
	       (unsigned long long)k->gave_up, tk->peak.reported, tk->peak.kernel,
	       tk->peak.backend);
	fflush(stdout);
}

/* Print the seconds the caller published since last time. */
static void print_new_ticks(const struct demo_config *c, const struct trap_run *run,
			    uint32_t *printed)
{
	/* acquire: pairs with the caller's release; the ticks are complete */
	uint32_t n = atomic_load_explicit(&run->nticks, memory_order_acquire);

	for (; *printed < n; (*printed)++)
		if (!c->quiet)
			print_tick(&run->ticks[*printed]);
}

/* ---- one run -------------------------------------------------------------- */

static void set_fault(const struct demo_config *c, struct backend *pay, bool on)
{
	backend_set_latency(pay, on ? c->fault_latency_s : c->latency_s[DEP_PAY]);
}

/* Switch payment's latency at the fault's edges and print each second,
 * until the caller is done. -EINTR when a stop signal came. */
static int drive(const struct demo_config *c, struct backend *pay, struct trap_caller *caller,
		 const struct trap_run *run, uint64_t t0)
{
	uint64_t edge[2] = { t0 + sec_to_ns(c->fault_at_s), t0 + sec_to_ns(fault_end_s(c)) };
	unsigned stage = 0;
	uint32_t printed = 0;

	while (!trap_caller_done(caller)) {
		uint64_t at = bh_now_ns() + POLL_NS;

		if (stage < 2 && edge[stage] < at)
			at = edge[stage];
		if (!demo_wait_until(at))
			return -EINTR;
		if (stage < 2 && bh_now_ns() >= edge[stage])
			set_fault(c, pay, ++stage == 1);
		print_new_ticks(c, run, &printed);
	}
	print_new_ticks(c, run, &printed);
	return 0;
}

/* Sockets the last run closed reach payment a moment later. False when a
 * stop signal came. */
static bool wait_backend_idle(struct backend *pay)
{
	uint64_t until = bh_now_ns() + BACKEND_IDLE_NS;

	while (backend_serving(pay) && bh_now_ns() < until)
		if (!demo_wait_until(bh_now_ns() + 10 * BH_MSEC))
			return false;
	return true;
}

static int run_one(const struct demo_config *c, struct backend *pay, enum trap_mode mode,
		   struct trap_run *run)
{
	struct trap_caller_params p = { .cfg = c, .mode = mode, .backend = pay, .run = run };
	struct trap_caller *caller;
	int r;

	print_header(c, mode);
	set_fault(c, pay, false);
	if (!wait_backend_idle(pay))
		return -EINTR;
	backend_take_peak(pay);
	p.t0 = bh_now_ns();
	r = trap_caller_start(&p, &caller);
	if (r < 0)
		goto fail;
	run->started = true;
	r = drive(c, pay, caller, run, p.t0);
	run->stopped_s = (double)(bh_now_ns() - p.t0) / 1e9;
	trap_caller_stop(caller);
	run->backend_peak = backend_take_peak(pay);
	set_fault(c, pay, false);
	if (r == 0 && run->error)
		r = run->error;
	if (r == 0 || r == -EINTR)
		return r;
fail:
	fprintf(stderr, "%s: the %s run failed: %s\n", cli_prog, trap_mode_name[mode],
		strerror(-r));
	return r;
}

/* ---- the summary -------------------------------------------------------------- */

enum {
	ROW_REPORTED, ROW_KERNEL, ROW_BACKEND, ROW_RIGHT, ROW_HIDDEN, ROW_ADMITTED, ROW_OK,
	ROW_GAVE_UP, ROW_DEADLINE, ROW_LATE, NROWS
};

static const char *const row_label[NROWS] = {
	"in flight says the bulkhead, peak",
	"really in flight: in the kernel, peak",
	"really in flight: at payment, peak",
	"checks where the bulkhead was right",
	"calls it did not count, at worst",
	"calls started / shed",
	"answered before the caller gave up",
	"callers that gave up / cancels sent",
	"calls ended by their own deadline",
	"calls ended after the caller left",
};

static uint64_t started(const struct trap_calls *k)
{
	return k->offered - k->shed - k->no_start;
}

static void run_cells(const struct trap_run *run, char cell[NROWS][32])
{
	const struct trap_checks *ck = &run->checks;
	const struct trap_calls *k = &run->calls;

	snprintf(cell[ROW_REPORTED], 32, "%u of %u", ck->peak.reported, run->limit);
	snprintf(cell[ROW_KERNEL], 32, "%u", ck->peak.kernel);
	snprintf(cell[ROW_BACKEND], 32, "%u", run->backend_peak);
	cli_fmt_share_of(ck->n - ck->mismatched, ck->n, cell[ROW_RIGHT], 32);
	snprintf(cell[ROW_HIDDEN], 32, "%u", ck->max_hidden);
	snprintf(cell[ROW_ADMITTED], 32, "%llu / %llu", (unsigned long long)started(k),
		 (unsigned long long)(k->shed + k->no_start));
	snprintf(cell[ROW_OK], 32, "%llu", (unsigned long long)k->ok);
	snprintf(cell[ROW_GAVE_UP], 32, "%llu / %llu", (unsigned long long)k->gave_up,
		 (unsigned long long)k->cancels);
	snprintf(cell[ROW_DEADLINE], 32, "%llu", (unsigned long long)k->deadline);
	snprintf(cell[ROW_LATE], 32, "%llu", (unsigned long long)k->late);
}

static void print_summary(const struct demo_config *c, const struct trap_run *naive,
			  const struct trap_run *tracked)
{
	const struct trap_run *runs[NTRAP_MODES] = { naive, tracked };
	char cell[NTRAP_MODES][NROWS][32], a[32], b[32];

	for (int m = 0; m < NTRAP_MODES; m++)
		for (int i = 0; i < NROWS; i++)
			if (runs[m])
				run_cells(runs[m], cell[m]);
			else
				snprintf(cell[m][i], 32, "(not run)");
	printf("\nsummary: %u permits; payment slow (~%s) from %g s to %g s; callers wait %s\n",
	       c->conc[DEP_PAY], cli_fmt_duration(c->fault_latency_s, a, 32), c->fault_at_s,
	       fault_end_s(c), cli_fmt_duration(c->timeout_s[DEP_PAY], b, 32));
	for (int m = 0; m < NTRAP_MODES; m++) {
		char run[32], note[96];

		if (!runs[m] || runs[m]->complete)
			continue;
		snprintf(run, sizeof(run), "run %d/2 (%s)", m + 1, trap_mode_name[m]);
		printf("  INTERRUPTED: %s;\n    its column covers what ran until then\n",
		       demo_stop_note(run, runs[m]->stopped_s, note, sizeof(note)));
	}
	/* 80 columns; a cell of up to 19 characters keeps a space before it */
	printf("  %-37s%20s %20s\n", "", "naive", "tracked");
	for (int i = 0; i < NROWS; i++)
		printf("  %-37s%20s %20s\n", row_label[i], cell[0][i], cell[1][i]);
}

/* ---- key=value, for scripts and the test ----------------------------------- */

static void kv_counts(FILE *f, const struct trap_run *run)
{
	const char *p = trap_mode_name[run->mode];
	const struct trap_checks *ck = &run->checks;
	const struct trap_calls *k = &run->calls;
	const struct {
		const char *key;
		unsigned long long v;
	} kv[] = {
		{ "complete", run->complete }, { "limit", run->limit },
		{ "peak_reported", ck->peak.reported }, { "peak_kernel", ck->peak.kernel },
		{ "peak_backend", run->backend_peak }, { "checks", ck->n },
		{ "mismatched", ck->mismatched }, { "max_hidden", ck->max_hidden },
		{ "samples", atomic_load_explicit(&run->nsamples, memory_order_relaxed) },
		{ "samples_mismatched", run->samples_mismatched },
		{ "disagreements", ck->disagreements },
		{ "refused_releases", ck->refused_releases },
		{ "offered", k->offered }, { "started", started(k) }, { "shed", k->shed },
		{ "no_start", k->no_start }, { "ok", k->ok }, { "deadline", k->deadline },
		{ "failed", k->failed }, { "gave_up", k->gave_up }, { "late", k->late },
		{ "cancels", k->cancels },
	};

	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		fprintf(f, "%s_%s=%llu\n", p, kv[i].key, kv[i].v);
}

static void kv_run(FILE *f, const struct trap_run *run)
{
	const char *p = trap_mode_name[run->mode];

	if (!run->complete)
		fprintf(f, "%s_stopped_s=%.3f\n", p, run->stopped_s);
	kv_counts(f, run);
}

static void write_kv(FILE *f, const struct trap_run *naive, const struct trap_run *tracked,
		     const struct demo_config *c)
{
	bool stopped = (naive && !naive->complete) || (tracked && !tracked->complete);

	fprintf(f, "scenario=async-trap\nrate=%g\nlimit=%u\nfault_at_s=%g\nfault_for_s=%g\n"
		   "interrupted=%d\n",
		c->rate, c->conc[DEP_PAY], c->fault_at_s, c->fault_for_s, stopped);
	if (naive)
		kv_run(f, naive);
	if (tracked)
		kv_run(f, tracked);
}

/* 0, or the first write error (already reported). */
static int finish_outputs(const struct demo_config *c, struct demo_outputs *out,
			  const struct trap_run *naive, const struct trap_run *tracked)
{
	int r, r2;

	print_summary(c, naive, tracked);
	if (out->svg.f)
		trap_svg_write(out->svg.f, naive, tracked, c);
	r = demo_output_close(&out->svg);
	if (r == 0 && out->svg.path && *out->svg.path)
		printf("\nchart: %s\n", out->svg.path);
	if (out->kv.f)
		write_kv(out->kv.f, naive, tracked, c);
	r2 = demo_output_close(&out->kv);
	return r < 0 ? r : r2;
}

/* ---- the scenario ------------------------------------------------------------- */

static int run_both(const struct demo_config *c, struct backend *pay, struct trap_run runs[],
		    bool ran[])
{
	int r = 0;

	for (int m = 0; m < NTRAP_MODES && r == 0; m++) {
		if (!(c->runs & (m == TRAP_NAIVE ? RUN_WITHOUT : RUN_WITH)))
			continue;
		r = trap_run_init(&runs[m], (enum trap_mode)m, c);
		if (r < 0) {
			fprintf(stderr, "%s: the %s run failed: %s\n", cli_prog,
				trap_mode_name[m], strerror(-r));
			break;
		}
		ran[m] = true;
		r = run_one(c, pay, (enum trap_mode)m, &runs[m]);
	}
	return r;
}

/* A run to summarise: one that started. */
static const struct trap_run *shown(const struct trap_run runs[], const bool ran[], int m)
{
	return ran[m] && runs[m].started ? &runs[m] : NULL;
}

int trap_scenario(const struct demo_config *c, struct demo_outputs *out)
{
	int w;
	struct trap_run runs[NTRAP_MODES];
	bool ran[NTRAP_MODES] = { false, false };
	struct backend pay;
	int r = backend_start(&pay, dep_name[DEP_PAY], c->latency_s[DEP_PAY], c->jitter,
			      (uint64_t)c->seed * 31 + DEP_PAY);

	if (r < 0) {
		fprintf(stderr, "%s: cannot start the payment backend on loopback: %s\n", cli_prog,
			strerror(-r));
		return r;
	}
	print_intro(c);
	r = run_both(c, &pay, runs, ran);
	backend_stop(&pay);
	if (r == 0 || r == -EINTR) {
		w = finish_outputs(c, out, shown(runs, ran, 0), shown(runs, ran, 1));
		if (r == 0)
			r = w;
	}
	for (int m = 0; m < NTRAP_MODES; m++)
		if (ran[m])
			trap_run_free(&runs[m]);
	return r;
}
