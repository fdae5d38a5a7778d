/* The engine of bulkhead-demo's multi-process scenarios (tools/demo_procs.h):
 * fork the worker processes, drive the fault and the kill, print a line a
 * second, summarise both runs. */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "demo_procs.h"

#define STEP_NS (100 * BH_MSEC) /* the parent looks this often */
#define RETRY_NS (20 * BH_MSEC) /* a refused thread tries again after this */

/* ---- in a worker process ---------------------------------------------------- */

struct wthread {
	pthread_t tid;
	struct procs_page *page;
	struct procs_slot *slot;
	bulkhead_t *bh;
	uint16_t port;
	uint64_t id, call_timeout_ns;
};

static void nap(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / BH_SEC), (long)(ns % BH_SEC) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* One request, its answer checked; 0 or -errno (the connection is then
 * dropped by the caller). */
static int call_payment(int fd, uint64_t id, uint64_t timeout_ns)
{
	char buf[64];
	int len = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", id);
	uint64_t got_id, answer, end = bh_now_ns() + timeout_ns;
	size_t have = 0;

	if (send(fd, buf, (size_t)len, MSG_NOSIGNAL) != len)
		return -EPIPE;
	while (!memchr(buf, '\n', have)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = bh_now_ns();
		ssize_t n;

		if (now >= end)
			return -ETIMEDOUT;
		if (poll(&p, 1, (int)((end - now) / BH_MSEC) + 1) <= 0)
			continue;
		n = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		have += (size_t)n;
		if (have == sizeof(buf) - 1)
			return -EPROTO;
	}
	buf[have] = '\0';
	if (sscanf(buf, "%" SCNu64 " %" SCNu64, &got_id, &answer) != 2 || got_id != id ||
	    answer != backend_answer(id))
		return -EPROTO;
	return 0;
}

/* One call after another: a permit (or a short wait), a call, the permit
 * back, a short pause. held
 * counts the permits from the acquire that took them to just before the
 * release: while payment is slow nothing is released for seconds, so the
 * count then is exactly what the process holds. */
static void *wthread_main(void *arg)
{
	struct wthread *w = arg;
	int fd = -1;

	while (!atomic_load_explicit(&w->page->stop, memory_order_relaxed)) {
		int r;

		if (bh_try_acquire(w->bh, 1) != 0) {
			atomic_fetch_add_explicit(&w->slot->rejected, 1, memory_order_relaxed);
			nap(RETRY_NS);
			continue;
		}
		atomic_fetch_add_explicit(&w->slot->held, 1, memory_order_relaxed);
		if (fd < 0)
			fd = demo_connect_loopback(w->port);
		r = fd < 0 ? fd : call_payment(fd, w->id++, w->call_timeout_ns);
		atomic_fetch_sub_explicit(&w->slot->held, 1, memory_order_relaxed);
		bh_release(w->bh, 1);
		atomic_fetch_add_explicit(r == 0 ? &w->slot->ok : &w->slot->failed, 1,
					  memory_order_relaxed);
		if (r < 0 && fd >= 0) {
			close(fd);
			fd = -1;
		}
		/* The next order: a pause, or a thread that just released would
		 * win its permit back before any other got a chance. */
		nap(RETRY_NS);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int open_bulkhead(const struct procs_scenario *sc, enum procs_mode mode,
			 const struct demo_config *cfg, bulkhead_t **bh)
{
	struct bh_config local = { .max_concurrent = cfg->conc[DEP_PAY], .name = "payment" };

	if (mode == PM_SHM)
		return procs_open_shm(sc, cfg, bh);
	if (mode == PM_CLUSTER)
		return procs_open_cluster(sc, cfg, bh);
	return bh_create(&local, bh);
}

/* The body of worker process i; never returns. */
static void __attribute__((noreturn))
worker_process(const struct procs_scenario *sc, enum procs_mode mode,
	       const struct demo_config *cfg, struct procs_page *page, uint32_t i, uint16_t port)
{
	static struct wthread th[PROCS_THREADS_MAX];
	struct procs_slot *slot = &page->slot[i];
	bulkhead_t *bh;
	uint32_t n = 0;
	int r;

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the demo */
	if (getppid() == 1)
		_exit(1);
	r = open_bulkhead(sc, mode, cfg, &bh);
	if (r < 0) {
		atomic_store_explicit(&slot->error, r, memory_order_relaxed);
		_exit(1);
	}
	for (; n < cfg->threads; n++) {
		th[n] = (struct wthread){ .page = page, .slot = slot, .bh = bh, .port = port,
					  .id = ((uint64_t)i << 40) | ((uint64_t)n << 32),
					  .call_timeout_ns = sec_to_ns(2 * cfg->fault_latency_s + 5) };
		if (pthread_create(&th[n].tid, NULL, wthread_main, &th[n]) != 0) {
			atomic_store_explicit(&slot->error, -EAGAIN, memory_order_relaxed);
			atomic_store_explicit(&page->stop, 1, memory_order_relaxed);
			break;
		}
	}
	atomic_store_explicit(&slot->ready, 1, memory_order_relaxed);
	while (!atomic_load_explicit(&page->stop, memory_order_relaxed)) {
		if (mode == PM_CLUSTER)
			atomic_store_explicit(&slot->share, procs_cluster_share(bh),
					      memory_order_relaxed);
		nap(50 * BH_MSEC);
	}
	while (n-- > 0)
		pthread_join(th[n].tid, NULL);
	bh_destroy(bh);
	_exit(0);
}

/* ---- in the parent ----------------------------------------------------------- */

struct procs_ctx {
	const struct procs_scenario *sc;
	const struct demo_config *cfg;
	struct backend pay;
	struct procs_page *page;
	pid_t pid[PROCS_MAX];
	bulkhead_t *watch; /* PM_SHM: the parent's own handle, for bh_stats */
};

static void reap(struct procs_ctx *x, uint32_t i, bool kill_it)
{
	if (x->pid[i] <= 0)
		return;
	if (kill_it)
		kill(x->pid[i], SIGKILL);
	while (waitpid(x->pid[i], NULL, 0) < 0 && errno == EINTR)
		;
	x->pid[i] = 0;
}

/* Ask every process to finish its call and exit; kill those that do not
 * within the longest call, or at once (a stop signal came: a call in the
 * fault may have seconds to go, and the stop is to be prompt). */
static void stop_procs(struct procs_ctx *x, bool at_once)
{
	uint64_t end = at_once ? 0 : bh_now_ns() + sec_to_ns(2 * x->cfg->fault_latency_s + 5);

	atomic_store_explicit(&x->page->stop, 1, memory_order_relaxed);
	for (uint32_t i = 0; i < x->cfg->procs; i++) {
		while (x->pid[i] > 0 && bh_now_ns() < end) {
			if (waitpid(x->pid[i], NULL, WNOHANG) == x->pid[i])
				x->pid[i] = 0;
			else
				nap(10 * BH_MSEC);
		}
		reap(x, i, true);
	}
}

static int start_procs(struct procs_ctx *x, enum procs_mode mode)
{
	const struct demo_config *c = x->cfg;
	uint64_t end;

	memset(x->page, 0, sizeof(*x->page));
	fflush(NULL); /* nothing buffered twice */
	for (uint32_t i = 0; i < c->procs; i++) {
		x->pid[i] = fork();
		if (x->pid[i] < 0) {
			int e = -errno;

			x->pid[i] = 0;
			stop_procs(x, false);
			fprintf(stderr, "%s: fork: %s\n", cli_prog, strerror(-e));
			return e;
		}
		if (x->pid[i] == 0)
			worker_process(x->sc, mode, c, x->page, i, x->pay.port);
	}
	end = bh_now_ns() + 10 * BH_SEC;
	for (uint32_t i = 0; i < c->procs; i++) {
		struct procs_slot *sl = &x->page->slot[i];

		while (!atomic_load_explicit(&sl->ready, memory_order_relaxed) &&
		       !atomic_load_explicit(&sl->error, memory_order_relaxed) && bh_now_ns() < end)
			nap(5 * BH_MSEC);
		if (!atomic_load_explicit(&sl->ready, memory_order_relaxed)) {
			int e = atomic_load_explicit(&sl->error, memory_order_relaxed);

			e = e ? e : -ETIMEDOUT;
			fprintf(stderr, "%s: %s %u could not open its bulkhead: %s\n", cli_prog,
				x->sc->unit, i + 1, strerror(-e));
			stop_procs(x, false);
			return e;
		}
	}
	return 0;
}

static int grow_ticks(struct procs_run *run)
{
	struct procs_tick *t;
	uint32_t cap = run->cap_ticks ? 2 * run->cap_ticks : 64;

	if (run->nticks < run->cap_ticks)
		return 0;
	t = realloc(run->ticks, cap * sizeof(*t));
	if (!t)
		return -ENOMEM;
	run->ticks = t;
	run->cap_ticks = cap;
	return 0;
}

static void print_header(const struct procs_ctx *x, enum procs_mode mode)
{
	char what[32];

	if (x->cfg->quiet)
		return;
	snprintf(what, sizeof(what), "%s by %s", mode == PM_CLUSTER ? "share" : "held",
		 x->sc->unit);
	printf("   t  fault  payment  ok/s  refused/s  %-*s", 4 * (int)x->cfg->procs, what);
	if (mode == PM_SHM)
		printf("  in_flight  reclaimed");
	if (mode == PM_CLUSTER)
		printf("  sum");
	printf("\n");
}

static void print_tick(const struct procs_ctx *x, const struct procs_run *run,
		       const struct procs_tick *tk)
{
	char cells[PROCS_MAX * 4 + 1] = "";
	uint32_t sum = 0;

	if (x->cfg->quiet)
		return;
	for (uint32_t i = 0; i < run->procs; i++) {
		uint32_t v = run->mode == PM_CLUSTER ? tk->share[i] : tk->held[i];
		size_t len = strlen(cells);

		if (tk->alive[i])
			snprintf(cells + len, sizeof(cells) - len, "%4u", v);
		else
			snprintf(cells + len, sizeof(cells) - len, "   -");
		sum += tk->alive[i] ? v : 0;
	}
	printf("%3us  %-5s  %7u  %4" PRIu64 "  %9" PRIu64 " %s", tk->t, tk->fault ? "FAULT" : "",
	       tk->backend_peak, tk->ok, tk->rejected, cells);
	if (run->mode == PM_SHM)
		printf("  %9" PRIu64 "  %9" PRIu64, tk->in_flight, tk->reclaimed);
	if (run->mode == PM_CLUSTER)
		printf("  %3u", sum);
	printf("\n");
	fflush(stdout);
}

/* Kill the process that holds the most permits (the first of those). */
static void kill_one(struct procs_ctx *x, struct procs_run *run, uint64_t t0)
{
	uint32_t best = 0, most = 0;

	for (uint32_t i = 0; i < run->procs; i++) {
		uint32_t h = atomic_load_explicit(&x->page->slot[i].held, memory_order_relaxed);

		if (x->pid[i] > 0 && h > most) {
			most = h;
			best = i;
		}
	}
	/* The instant of the kill, not of the reap after it: a loaded machine
	 * can take a while to let the killed process exit. */
	run->kill_s = (double)(bh_now_ns() - t0) / 1e9;
	kill(x->pid[best], SIGKILL);
	reap(x, best, false);
	/* Its threads are gone with it: held is frozen at what it held. */
	run->victim = (int)best;
	run->victim_held = atomic_load_explicit(&x->page->slot[best].held, memory_order_relaxed);
	if (!x->cfg->quiet)
		printf("      SIGKILL %s %u at %.2f s, holding %u permit%s\n", x->sc->unit, best + 1,
		       run->kill_s, run->victim_held, run->victim_held == 1 ? "" : "s");
}

struct totals {
	uint64_t ok, rejected, failed;
};

static void sum_counts(const struct procs_ctx *x, struct totals *t)
{
	memset(t, 0, sizeof(*t));
	for (uint32_t i = 0; i < x->cfg->procs; i++) {
		t->ok += atomic_load_explicit(&x->page->slot[i].ok, memory_order_relaxed);
		t->rejected += atomic_load_explicit(&x->page->slot[i].rejected, memory_order_relaxed);
		t->failed += atomic_load_explicit(&x->page->slot[i].failed, memory_order_relaxed);
	}
}

static uint32_t survivors_share(const struct procs_ctx *x)
{
	uint32_t sum = 0;

	for (uint32_t i = 0; i < x->cfg->procs; i++)
		if (x->pid[i] > 0)
			sum += atomic_load_explicit(&x->page->slot[i].share, memory_order_relaxed);
	return sum;
}

static int take_tick(struct procs_ctx *x, struct procs_run *run, uint32_t sec,
		     struct totals *last, bool killed)
{
	const struct demo_config *c = x->cfg;
	struct procs_tick *tk;
	struct totals now;
	int r = grow_ticks(run);

	if (r < 0)
		return r;
	tk = &run->ticks[run->nticks++];
	memset(tk, 0, sizeof(*tk));
	tk->t = sec;
	tk->fault = fault_overlaps(c, sec - 1.0, sec);
	tk->killed = killed;
	tk->backend_peak = backend_take_peak(&x->pay);
	if (tk->backend_peak > run->peak)
		run->peak = tk->backend_peak;
	for (uint32_t i = 0; i < run->procs; i++) {
		tk->alive[i] = x->pid[i] > 0;
		tk->held[i] = atomic_load_explicit(&x->page->slot[i].held, memory_order_relaxed);
		tk->share[i] = atomic_load_explicit(&x->page->slot[i].share, memory_order_relaxed);
	}
	if (x->watch) {
		struct bh_stats st;

		bh_stats(x->watch, &st);
		tk->in_flight = st.in_flight;
		tk->reclaimed = run->reclaimed = st.reclaimed;
	}
	sum_counts(x, &now);
	tk->ok = now.ok - last->ok;
	tk->rejected = now.rejected - last->rejected;
	*last = now;
	print_tick(x, run, tk);
	return 0;
}

/* 100 ms steps: the fault's edges, the kill, the end of each second; and,
 * after the kill, when the survivors' shares first add up to the limit. */
static int drive(struct procs_ctx *x, struct procs_run *run, uint64_t t0)
{
	const struct demo_config *c = x->cfg;
	uint64_t fault_on = t0 + sec_to_ns(c->fault_at_s), fault_off = t0 + sec_to_ns(fault_end_s(c));
	uint64_t kill_at = t0 + sec_to_ns(c->kill_at_s), end = t0 + sec_to_ns(c->duration_s);
	uint64_t next_sec = t0 + BH_SEC, step = t0;
	bool faulty = false, killed = false, killed_this_sec = false;
	struct totals last = { 0 };
	uint32_t sec = 1;

	while (step < end) {
		uint64_t now;

		step += STEP_NS;
		if (!demo_wait_until(step))
			return -EINTR;
		now = bh_now_ns();
		if (faulty != (now >= fault_on && now < fault_off)) {
			faulty = !faulty;
			backend_set_latency(&x->pay, faulty ? c->fault_latency_s
							    : c->latency_s[DEP_PAY]);
		}
		if (!killed && now >= kill_at) {
			kill_one(x, run, t0);
			killed = killed_this_sec = true;
		}
		if (run->mode == PM_CLUSTER && killed && run->moved_s < 0 &&
		    survivors_share(x) == run->limit)
			run->moved_s = (double)(now - t0) / 1e9 - run->kill_s;
		if (now >= next_sec || step >= end) {
			int r = take_tick(x, run, sec++, &last, killed_this_sec);

			if (r < 0)
				return r;
			killed_this_sec = false;
			next_sec += BH_SEC;
		}
	}
	return 0;
}

static int run_one(struct procs_ctx *x, enum procs_mode mode, struct procs_run *run, int idx)
{
	const struct demo_config *c = x->cfg;
	struct totals t;
	uint64_t t0;
	int r;

	memset(run, 0, sizeof(*run));
	run->mode = mode;
	run->label = mode == PM_LOCAL ? x->sc->local_label : x->sc->shared_label;
	run->limit = c->conc[DEP_PAY];
	run->procs = c->procs;
	run->victim = -1;
	run->moved_s = -1;
	printf("\n== run %d/2 (%s): %u %ss, %s of %u\n", idx, mode == PM_LOCAL ? "local" : "shared",
	       c->procs, x->sc->unit, run->label, run->limit);
	backend_set_latency(&x->pay, c->latency_s[DEP_PAY]);
	print_header(x, mode);
	r = start_procs(x, mode);
	if (r < 0)
		return r;
	run->ran = true;
	backend_take_peak(&x->pay);
	t0 = bh_now_ns();
	r = drive(x, run, t0);
	run->complete = r == 0;
	run->stopped_s = (double)(bh_now_ns() - t0) / 1e9;
	if (mode == PM_CLUSTER)
		run->survivors_share = survivors_share(x);
	backend_set_latency(&x->pay, c->latency_s[DEP_PAY]);
	stop_procs(x, r == -EINTR);
	sum_counts(x, &t);
	run->ok = t.ok;
	run->rejected = t.rejected;
	run->failed = t.failed;
	return r;
}

/* ---- the summary --------------------------------------------------------------- */

static void print_run_summary(const struct procs_scenario *sc, const struct procs_run *run)
{
	printf("  %-26s payment served at most %u at once (limit %u, %u %ss)\n", run->label,
	       run->peak, run->limit, run->procs, sc->unit);
	if (run->victim >= 0) {
		printf("  %-26s SIGKILL %s %u at %.2f s holding %u", "", sc->unit, run->victim + 1,
		       run->kill_s, run->victim_held);
		if (run->mode == PM_SHM)
			printf("; reclaimed %" PRIu64, run->reclaimed);
		if (run->mode == PM_CLUSTER) {
			if (run->moved_s >= 0)
				printf("; survivors' shares = %u after %.2f s", run->limit,
				       run->moved_s);
			else
				printf("; survivors' shares never reached %u", run->limit);
		}
		if (run->mode == PM_LOCAL)
			printf(" (its bulkhead died with it)");
		printf("\n");
	}
	printf("  %-26s %" PRIu64 " calls answered, %" PRIu64 " failed, %" PRIu64
	       " refused tries\n", "", run->ok, run->failed, run->rejected);
	if (run->ran && !run->complete)
		printf("  INTERRUPTED: stopped at %.2f s\n", run->stopped_s);
}

static void print_summary(const struct procs_scenario *sc, const struct procs_run *local,
			  const struct procs_run *shared)
{
	printf("\nsummary: %s, a limit of %u for payment\n", sc->name,
	       (local->ran ? local : shared)->limit);
	if (local->ran)
		print_run_summary(sc, local);
	if (shared->ran)
		print_run_summary(sc, shared);
	if (local->ran && shared->ran)
		printf("  payment saw %u at most with %s, %u with %s\n", local->peak, local->label,
		       shared->peak, shared->label);
}

static void kv_run(FILE *f, const char *p, const struct procs_run *run)
{
	if (!run->ran)
		return;
	fprintf(f, "%s_complete=%d\n%s_peak=%u\n%s_limit=%u\n%s_procs=%u\n", p, run->complete, p,
		run->peak, p, run->limit, p, run->procs);
	fprintf(f, "%s_ok=%" PRIu64 "\n%s_failed=%" PRIu64 "\n%s_refused=%" PRIu64 "\n", p,
		run->ok, p, run->failed, p, run->rejected);
	if (!run->complete)
		fprintf(f, "%s_stopped_s=%.3f\n", p, run->stopped_s);
	fprintf(f, "%s_killed=%d\n", p, run->victim >= 0);
	if (run->victim < 0)
		return;
	fprintf(f, "%s_victim=%d\n%s_victim_held=%u\n%s_kill_s=%.3f\n", p, run->victim + 1, p,
		run->victim_held, p, run->kill_s);
	if (run->mode == PM_SHM)
		fprintf(f, "%s_reclaimed=%" PRIu64 "\n", p, run->reclaimed);
	if (run->mode == PM_CLUSTER)
		fprintf(f, "%s_moved_s=%.3f\n%s_survivors_share=%u\n", p, run->moved_s, p,
			run->survivors_share);
}

static int finish(const struct procs_scenario *sc, const struct demo_config *cfg,
		  struct demo_outputs *out, const struct procs_run *runs)
{
	int r, r2;

	print_summary(sc, &runs[0], &runs[1]);
	if (out->svg.f)
		procs_svg_write(out->svg.f, sc, runs[0].ran ? &runs[0] : NULL,
				runs[1].ran ? &runs[1] : NULL, cfg);
	r = demo_output_close(&out->svg);
	if (r == 0 && out->svg.path && *out->svg.path)
		printf("\nchart: %s\n", out->svg.path);
	if (out->kv.f) {
		bool stopped = (runs[0].ran && !runs[0].complete) ||
			       (runs[1].ran && !runs[1].complete);

		fprintf(out->kv.f, "scenario=%s\nlimit=%u\nprocs=%u\ninterrupted=%d\n", sc->name,
			cfg->conc[DEP_PAY], cfg->procs, stopped);
		kv_run(out->kv.f, "local", &runs[0]);
		kv_run(out->kv.f, "shared", &runs[1]);
	}
	r2 = demo_output_close(&out->kv);
	return r < 0 ? r : r2;
}

static void print_intro(const struct procs_scenario *sc, const struct demo_config *c)
{
	char a[32], b[32], k[32];

	printf("bulkhead-demo %s: %u %s processes x %u threads call payment (~%s) back to "
	       "back\n", sc->name, c->procs, sc->unit, c->threads,
	       cli_fmt_duration(c->latency_s[DEP_PAY], a, 32));
	printf("  payment's limit: %u; payment counts what it serves itself\n",
	       c->conc[DEP_PAY]);
	printf("  fault: payment answers in ~%s from %g s to %g s of each %g s run; one %s "
	       "is SIGKILLed at %s\n", cli_fmt_duration(c->fault_latency_s, b, 32), c->fault_at_s,
	       fault_end_s(c), c->duration_s, sc->unit, cli_fmt_duration(c->kill_at_s, k, 32));
	fflush(stdout);
}

int procs_scenario_run(const struct procs_scenario *sc, const struct demo_config *cfg,
		       struct demo_outputs *out)
{
	struct procs_ctx x = { .sc = sc, .cfg = cfg };
	struct procs_run runs[2];
	int r = 0, w;

	memset(runs, 0, sizeof(runs));
	x.page = mmap(NULL, sizeof(*x.page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	if (x.page == MAP_FAILED) {
		fprintf(stderr, "%s: mmap: %s\n", cli_prog, strerror(errno));
		return -ENOMEM;
	}
	r = backend_start(&x.pay, "payment", cfg->latency_s[DEP_PAY], cfg->jitter,
			  (uint64_t)cfg->seed * 31 + 1);
	if (r < 0) {
		fprintf(stderr, "%s: cannot start the payment backend on loopback: %s\n", cli_prog,
			strerror(-r));
		munmap(x.page, sizeof(*x.page));
		return r;
	}
	print_intro(sc, cfg);
	for (int i = 0; i < 2 && r == 0; i++) {
		enum procs_mode mode = i ? sc->shared_mode : PM_LOCAL;

		if (!(cfg->runs & (i ? RUN_WITH : RUN_WITHOUT)))
			continue;
		if (mode == PM_SHM) {
			r = procs_open_shm(sc, cfg, &x.watch);
			if (r < 0) {
				fprintf(stderr, "%s: bh_shm_open %s: %s\n", cli_prog, sc->shm_name,
					strerror(-r));
				break;
			}
		}
		r = run_one(&x, mode, &runs[i], i + 1);
		bh_destroy(x.watch);
		x.watch = NULL;
	}
	backend_stop(&x.pay);
	if (r == 0 || r == -EINTR) {
		w = finish(sc, cfg, out, runs);
		if (r == 0)
			r = w;
	}
	for (int i = 0; i < 2; i++)
		free(runs[i].ticks);
	munmap(x.page, sizeof(*x.page));
	return r;
}
