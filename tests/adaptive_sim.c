/* The adaptive-limits simulator (see adaptive_sim.h). Event-driven on a
 * virtual clock: one thread, no sleeping, the same run for the same seed. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adaptive/bha.h"
#include "adaptive_sim.h"
#include "core/internal.h"
#include "lib/compiler.h"
#include "sizing.h"

#define NS_PER_S 1e9
#define NS_PER_MS 1e6

enum ev_type { EV_ARRIVAL, EV_SERVED, EV_REFUSED, EV_CALL_TIMEOUT, EV_QUEUE_TIMEOUT };

struct ev {
	uint64_t t, seq;
	uint32_t type, id, gen;
};

enum req_state { R_FREE, R_QUEUED, R_CALLING, R_DONE };

struct req {
	struct bh_async node;
	uint32_t state, gen;
	bool job;          /* the dependency still works on it */
	uint64_t arrive_t, grant_t;
	uint32_t next;     /* free list / dependency FIFO */
	uint32_t id;
	int grant_result;
	bool granted_now;  /* set by the grant callback, handled after the call */
};

struct sim {
	const struct sim_config *cfg;
	uint64_t now, seq, rng;
	bulkhead_t *bh;
	bh_adaptive_t *ctl;

	struct ev *heap;
	size_t nheap, capheap;
	struct req **chunk; /* stable addresses: the bulkhead links their nodes */
	uint32_t nreq, nchunks, free_head;
	uint32_t *granted; /* ids the grant callback reported */
	uint32_t ngranted, capgranted;

	/* the dependency */
	unsigned ph;
	uint32_t busy, fifo_head, fifo_tail, nfifo;
	uint64_t calls;

	/* measuring */
	uint64_t last_t;
	uint32_t cur_limit;
	struct acc {
		double t0, t1; /* the measured span */
		double limit_area, span;
		uint32_t lmin, lmax;
		uint64_t ok, rejected, dropped;
		struct bh_hist lat;
	} acc[SIM_PHASES + 1];
	uint64_t samples;
};

#define NIL UINT32_MAX

#define CHUNK_BITS 12

static inline struct req *R(const struct sim *s, uint32_t id)
{
	return &s->chunk[id >> CHUNK_BITS][id & ((1u << CHUNK_BITS) - 1)];
}

/* ---- random numbers --------------------------------------------------------- */

static uint64_t rnd(struct sim *s)
{
	uint64_t x = s->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	s->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

static double uniform(struct sim *s)
{
	return ((double)(rnd(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double normal(struct sim *s)
{
	return sqrt(-2.0 * log(uniform(s))) * cos(6.283185307179586 * uniform(s));
}

/* ---- events ------------------------------------------------------------------- */

static bool ev_less(const struct ev *a, const struct ev *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static int push(struct sim *s, uint64_t t, uint32_t type, uint32_t id)
{
	size_t i;

	if (s->nheap == s->capheap) {
		size_t cap = s->capheap ? 2 * s->capheap : 1024;
		struct ev *h = realloc(s->heap, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		s->heap = h;
		s->capheap = cap;
	}
	i = s->nheap++;
	s->heap[i] = (struct ev){ t, s->seq++, type, id, id == NIL ? 0 : R(s, id)->gen };
	while (i && ev_less(&s->heap[i], &s->heap[(i - 1) / 2])) {
		struct ev tmp = s->heap[i];

		s->heap[i] = s->heap[(i - 1) / 2];
		s->heap[(i - 1) / 2] = tmp;
		i = (i - 1) / 2;
	}
	return 0;
}

static struct ev pop(struct sim *s)
{
	struct ev top = s->heap[0];
	size_t i = 0;

	s->heap[0] = s->heap[--s->nheap];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < s->nheap && ev_less(&s->heap[l], &s->heap[m]))
			m = l;
		if (r < s->nheap && ev_less(&s->heap[r], &s->heap[m]))
			m = r;
		if (m == i)
			break;
		struct ev tmp = s->heap[i];

		s->heap[i] = s->heap[m];
		s->heap[m] = tmp;
		i = m;
	}
	return top;
}

/* ---- requests ---------------------------------------------------------------------- */

static uint32_t req_new(struct sim *s)
{
	uint32_t id;

	if (s->free_head != NIL) {
		id = s->free_head;
		s->free_head = R(s, id)->next;
	} else {
		if ((s->nreq >> CHUNK_BITS) == s->nchunks) {
			struct req **c = realloc(s->chunk, (s->nchunks + 1) * sizeof(*c));

			if (!c)
				return NIL;
			s->chunk = c;
			if (!(c[s->nchunks] = calloc(1u << CHUNK_BITS, sizeof(struct req))))
				return NIL;
			s->nchunks++;
		}
		id = s->nreq++;
		R(s, id)->id = id;
	}
	R(s, id)->gen++;
	R(s, id)->job = false;
	R(s, id)->next = NIL;
	return id;
}

static void req_maybe_free(struct sim *s, uint32_t id)
{
	struct req *r = R(s, id);

	if (r->state == R_DONE && !r->job) {
		r->state = R_FREE;
		r->next = s->free_head;
		s->free_head = id;
	}
}

/* ---- measuring ------------------------------------------------------------------------ */

static const struct sim_phase *phase(const struct sim *s)
{
	return &s->cfg->phase[s->ph];
}

static double phase_end(const struct sim *s, unsigned i)
{
	return i + 1 < s->cfg->nphases ? s->cfg->phase[i + 1].at_s : s->cfg->duration_s;
}

/* Accumulators that cover time t: the phase's second half, and the run. */
static void for_acc(struct sim *s, double t, void (*fn)(struct acc *a, void *arg), void *arg)
{
	for (unsigned i = 0; i < s->cfg->nphases; i++)
		if (t >= s->acc[i].t0 && t < s->acc[i].t1)
			fn(&s->acc[i], arg);
	fn(&s->acc[SIM_PHASES], arg);
}

struct span {
	double t0, t1;
	uint32_t limit;
};

static void add_span(struct acc *a, void *arg)
{
	struct span *sp = arg;
	double t0 = sp->t0 > a->t0 ? sp->t0 : a->t0, t1 = sp->t1 < a->t1 ? sp->t1 : a->t1;

	if (t1 <= t0)
		return;
	a->limit_area += (t1 - t0) * sp->limit;
	a->span += t1 - t0;
	a->lmin = sp->limit < a->lmin ? sp->limit : a->lmin;
	a->lmax = sp->limit > a->lmax ? sp->limit : a->lmax;
}

/* The limit in force from last_t to now, then whatever it is now. */
static void note_limit(struct sim *s)
{
	struct span sp = { s->last_t / NS_PER_S, s->now / NS_PER_S, s->cur_limit };

	if (s->now > s->last_t)
		for (unsigned i = 0; i <= SIM_PHASES; i++)
			if (i < s->cfg->nphases || i == SIM_PHASES)
				add_span(&s->acc[i], &sp);
	s->last_t = s->now;
	s->cur_limit = w_limit(bhi_word(s->bh));
}

static void count_ok(struct acc *a, void *arg)
{
	a->ok++;
	bh_hist_record(&a->lat, *(uint64_t *)arg);
}

static void count_rejected(struct acc *a, void *arg)
{
	(void)arg;
	a->rejected++;
}

static void count_dropped(struct acc *a, void *arg)
{
	(void)arg;
	a->dropped++;
}

/* ---- the controller's side -------------------------------------------------------------- */

static uint64_t sim_clock(void *ctx)
{
	return ((struct sim *)ctx)->now;
}

static void on_grant(struct bh_async *node, int result)
{
	struct req *r = bhi_container_of(node, struct req, node);
	struct sim *s = node->data;

	/* Runs under the bulkhead's lock: only note it. */
	r->grant_result = result;
	s->granted[s->ngranted++] = r->id;
}

static int start_call(struct sim *s, uint32_t id);

/* Grants the last bulkhead call made (a release, a resize by the
 * controller): start those calls now. */
static int handle_grants(struct sim *s)
{
	for (uint32_t i = 0; i < s->ngranted; i++) {
		uint32_t id = s->granted[i];
		struct req *r = R(s, id);
		int rc;

		if (r->grant_result == 0) {
			if ((rc = start_call(s, id)) < 0)
				return rc;
		} else {
			r->state = R_DONE;
			for_acc(s, s->now / NS_PER_S, count_rejected, NULL);
			req_maybe_free(s, id);
		}
	}
	s->ngranted = 0;
	return 0;
}

/* The caller is done with its permit: release and sample, in the
 * configured order. */
static int finish_call(struct sim *s, uint32_t id, uint64_t rtt, enum bh_outcome o)
{
	struct req *r = R(s, id);

	r->state = R_DONE;
	if (s->cfg->sample_after_release)
		bh_release(s->bh, 1);
	if (s->ctl) {
		bh_adaptive_sample(s->ctl, rtt, o);
		s->samples++;
	}
	if (!s->cfg->sample_after_release)
		bh_release(s->bh, 1);
	note_limit(s);
	req_maybe_free(s, id);
	return handle_grants(s);
}

/* ---- the dependency ---------------------------------------------------------------------- */

static uint64_t service_ns(struct sim *s)
{
	const struct sim_phase *p = phase(s);
	double ms = p->service_ms;

	if (s->calls <= s->cfg->lucky_first)
		ms = s->cfg->lucky_ms;
	else if (p->sigma > 0)
		ms *= exp(p->sigma * normal(s));
	return (uint64_t)(ms * NS_PER_MS) + 1;
}

static int serve_next(struct sim *s)
{
	while (s->nfifo && s->busy < phase(s)->knee) {
		uint32_t id = s->fifo_head;

		s->fifo_head = R(s, id)->next;
		if (--s->nfifo == 0)
			s->fifo_tail = NIL;
		s->busy++;
		if (push(s, s->now + service_ns(s), EV_SERVED, id) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int start_call(struct sim *s, uint32_t id)
{
	const struct sim_phase *p = phase(s);
	struct req *r = R(s, id);

	r->state = R_CALLING;
	r->grant_t = s->now;
	s->calls++;
	if (push(s, s->now + (uint64_t)(s->cfg->timeout_ms * NS_PER_MS), EV_CALL_TIMEOUT, id) < 0)
		return -ENOMEM;
	if (p->blackhole)
		return 0;
	if (p->err_prob > 0 && uniform(s) < p->err_prob)
		return push(s, s->now + (uint64_t)(p->err_ms * NS_PER_MS) + 1, EV_REFUSED, id);
	r->job = true;
	r->next = NIL;
	if (s->fifo_tail == NIL)
		s->fifo_head = id;
	else
		R(s, s->fifo_tail)->next = id;
	s->fifo_tail = id;
	s->nfifo++;
	return serve_next(s);
}

/* ---- events ---------------------------------------------------------------------------------- */

static int on_arrival(struct sim *s)
{
	uint32_t id = req_new(s);
	struct req *r;
	int rc;

	if (id == NIL)
		return -ENOMEM;
	r = R(s, id);
	r->arrive_t = s->now;
	r->state = R_QUEUED;
	rc = bh_acquire_async(s->bh, &r->node, 1, on_grant, s);
	if (rc == 0)
		rc = start_call(s, id);
	else if (rc == 1)
		rc = push(s, s->now + (uint64_t)(s->cfg->queue_timeout_ms * NS_PER_MS),
			  EV_QUEUE_TIMEOUT, id);
	else {
		r->state = R_DONE;
		for_acc(s, s->now / NS_PER_S, count_rejected, NULL);
		req_maybe_free(s, id);
		rc = 0;
	}
	if (rc < 0)
		return rc;
	return push(s, s->now + (uint64_t)(-log(uniform(s)) / phase(s)->rate * NS_PER_S) + 1,
		    EV_ARRIVAL, NIL);
}

static int on_served(struct sim *s, uint32_t id, bool refused)
{
	struct req *r = R(s, id);
	uint64_t rtt = s->now - r->grant_t;
	int rc = 0;

	if (!refused) {
		r->job = false;
		s->busy--;
		if ((rc = serve_next(s)) < 0)
			return rc;
	}
	if (r->state != R_CALLING) { /* its caller gave up: wasted work */
		req_maybe_free(s, id);
		return 0;
	}
	if (refused) {
		for_acc(s, s->now / NS_PER_S, count_dropped, NULL);
		return finish_call(s, id, rtt, BH_DROPPED);
	}
	uint64_t seen = s->now - r->arrive_t;

	for_acc(s, s->now / NS_PER_S, count_ok, &seen);
	return finish_call(s, id, rtt, BH_OK);
}

static int on_call_timeout(struct sim *s, uint32_t id)
{
	if (R(s, id)->state != R_CALLING)
		return 0;
	for_acc(s, s->now / NS_PER_S, count_dropped, NULL);
	return finish_call(s, id, s->now - R(s, id)->grant_t, BH_DROPPED);
}

static int on_queue_timeout(struct sim *s, uint32_t id)
{
	if (R(s, id)->state != R_QUEUED || bh_cancel_async(s->bh, &R(s, id)->node) != 1)
		return 0;
	R(s, id)->state = R_DONE;
	for_acc(s, s->now / NS_PER_S, count_rejected, NULL);
	req_maybe_free(s, id);
	return 0;
}

static int dispatch(struct sim *s, const struct ev *e)
{
	if (e->id != NIL && R(s, e->id)->gen != e->gen)
		return 0; /* the request was reused */
	switch (e->type) {
	case EV_ARRIVAL:
		return on_arrival(s);
	case EV_SERVED:
		return on_served(s, e->id, false);
	case EV_REFUSED:
		return on_served(s, e->id, true);
	case EV_CALL_TIMEOUT:
		return on_call_timeout(s, e->id);
	default:
		return on_queue_timeout(s, e->id);
	}
}

/* ---- the run ------------------------------------------------------------------------------------ */

static void stats_of(const struct acc *a, struct sim_stats *o)
{
	double span = a->t1 - a->t0;

	memset(o, 0, sizeof(*o));
	o->ok = a->ok;
	o->goodput = span > 0 ? a->ok / span : 0;
	o->rejected = span > 0 ? a->rejected / span : 0;
	o->dropped = span > 0 ? a->dropped / span : 0;
	o->p50_ms = bh_hist_quantile(&a->lat, 0.50) / NS_PER_MS;
	o->p99_ms = bh_hist_quantile(&a->lat, 0.99) / NS_PER_MS;
	o->limit_mean = a->span > 0 ? a->limit_area / a->span : 0;
	o->limit_min = a->lmin == UINT32_MAX ? 0 : a->lmin;
	o->limit_max = a->lmax;
}

static void trace_window(void *ctx, const struct bha_window *w, const struct bha_verdict *v)
{
	struct sim *s = ctx;
	double t = s->now / NS_PER_S;

	if (t >= s->cfg->trace_from_s && t < s->cfg->trace_to_s)
		printf("  t %.3f win %.1f ms lim %u ok %llu drop %llu pct %.2f ms peak %u%s -> %u (%s)%s\n",
		       t, (w->end_ns - w->start_ns) / NS_PER_MS, w->limit,
		       (unsigned long long)w->ok, (unsigned long long)w->dropped,
		       w->pct_ns / NS_PER_MS, w->peak, w->probe ? " probe" : "", v->limit,
		       bh_adaptive_reason_name(v->reason), v->probe_samples ? " PROBE" : "");
}

static int setup(struct sim *s, const struct sim_config *cfg)
{
	struct bh_config bc = { .max_concurrent = cfg->start_limit, .queue_capacity = cfg->queue };
	int rc;

	memset(s, 0, sizeof(*s));
	s->cfg = cfg;
	s->rng = cfg->seed ? cfg->seed : 1;
	s->free_head = s->fifo_head = s->fifo_tail = NIL;
	s->now = 1; /* 0 reads as "never" in places */
	if ((rc = bh_create(&bc, &s->bh)) < 0)
		return rc;
	for (unsigned i = 0; i < cfg->nphases; i++) {
		s->acc[i].t0 = (cfg->phase[i].at_s + phase_end(s, i)) / 2;
		s->acc[i].t1 = phase_end(s, i);
	}
	s->acc[SIM_PHASES].t0 = 0;
	s->acc[SIM_PHASES].t1 = cfg->duration_s;
	for (unsigned i = 0; i <= SIM_PHASES; i++)
		s->acc[i].lmin = UINT32_MAX;
	if (cfg->mode == SIM_ADAPTIVE) {
		/* the controller runs on the virtual clock from attach on */
		struct bh_adaptive_config ac = cfg->acfg;

		if (!ac.seed)
			ac.seed = s->rng;
		if ((rc = bh_adaptive_attach(s->bh, &ac, &s->ctl)) < 0)
			return rc;
		bha_set_clock(s->ctl, sim_clock, s);
		if (cfg->trace_to_s > 0)
			bha_set_window_hook(s->ctl, trace_window, s);
	}
	s->cur_limit = w_limit(bhi_word(s->bh));
	s->last_t = s->now;
	return 0;
}

static void teardown(struct sim *s)
{
	bh_adaptive_detach(s->ctl);
	/* The simulator's queued nodes are its own memory: close, then free. */
	if (s->bh) {
		s->ngranted = 0;
		if (s->granted)
			bh_close(s->bh);
		bh_destroy(s->bh);
	}
	free(s->heap);
	for (uint32_t i = 0; i < s->nchunks; i++)
		free(s->chunk[i]);
	free(s->chunk);
	free(s->granted);
}

int sim_run(const struct sim_config *cfg, struct sim_result *out)
{
	struct sim s;
	uint64_t end = (uint64_t)(cfg->duration_s * NS_PER_S);
	int rc;

	if (cfg->nphases == 0 || cfg->nphases > SIM_PHASES)
		return -EINVAL;
	if ((rc = setup(&s, cfg)) < 0)
		goto out;
	s.capgranted = 1u << 20;
	if (!(s.granted = malloc(s.capgranted * sizeof(*s.granted)))) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = push(&s, s.now, EV_ARRIVAL, NIL)) < 0)
		goto out;
	while (s.nheap && s.heap[0].t < end) {
		struct ev e = pop(&s);

		while (s.ph + 1 < cfg->nphases && e.t >= (uint64_t)(cfg->phase[s.ph + 1].at_s * NS_PER_S)) {
			s.now = (uint64_t)(cfg->phase[s.ph + 1].at_s * NS_PER_S);
			s.ph++;
			if ((rc = serve_next(&s)) < 0) /* more capacity starts queued calls */
				goto out;
		}
		s.now = e.t;
		if ((rc = dispatch(&s, &e)) < 0)
			goto out;
		if (s.ngranted && (rc = handle_grants(&s)) < 0)
			goto out;
	}
	s.now = end;
	note_limit(&s);
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < cfg->nphases; i++)
		stats_of(&s.acc[i], &out->phase[i]);
	stats_of(&s.acc[SIM_PHASES], &out->all);
	out->samples = s.samples;
	if (s.ctl)
		bh_adaptive_stats(s.ctl, &out->ctl);
out:
	teardown(&s);
	return rc;
}

uint32_t sim_static_limit(const struct sim_config *cfg)
{
	const struct sim_phase *p = &cfg->phase[0];
	double p99_ms = p->service_ms * exp(2.326 * p->sigma);

	return bhz_round_up(bhz_concurrency_raw(p->rate, p99_ms / 1e3, 1.3));
}
