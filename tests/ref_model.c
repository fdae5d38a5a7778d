/* The reference model (see ref_model.h): plain sequential code, no atomics,
 * no word layout, written from the documented semantics. */
#include <errno.h>
#include <string.h>

#include "ref_model.h"

static void event(struct ref_bh *m, char type, unsigned id, int result)
{
	if (m->nev == REF_MAX_EVENTS) {
		m->ev_overflow = true;
		return;
	}
	m->ev[m->nev++] = (struct ref_event){ .type = type, .id = (uint8_t)id,
					      .result = (int16_t)result };
}

static void count(struct ref_bh *m, uint64_t *c)
{
	if (!m->no_stats)
		(*c)++;
}

static void record_wait(struct ref_bh *m, unsigned id, int result, uint64_t now)
{
	bh_hist_record(result == 0 ? &m->wait : &m->wait_failed, now - m->req[id].enqueued_ns);
}

static bool n_valid(uint32_t n)
{
	return n >= 1 && n <= BH_LIMIT_MAX;
}

static bool is_async(unsigned id)
{
	return id >= REF_NSYNC;
}

/* A newcomer may take n now: not closed, no starving head, nobody queued
 * unless the head is being offered the permits (unfair mode), and enough. */
static bool may_take(const struct ref_bh *m, uint32_t n)
{
	if (m->closed || m->starving)
		return false;
	if (m->qlen && !m->offered)
		return false;
	return m->avail >= (int64_t)n;
}

/* A thread's holding begins when it goes from no permits to some... */
static void hold_begin(struct ref_bh *m, unsigned thread, uint32_t n, uint64_t now)
{
	struct ref_holding *h = &m->holding[thread];

	if (!m->track_hold)
		return;
	if (h->held == 0)
		h->since_ns = now;
	h->held += n;
}

/* ...and ends when it holds none again; a release of more than it took
 * (permits acquired on another thread) makes the pair unmeasurable. */
static void hold_end(struct ref_bh *m, unsigned thread, uint32_t n, uint64_t now)
{
	struct ref_holding *h = &m->holding[thread];

	if (!m->track_hold)
		return;
	if (n > h->held) {
		*h = (struct ref_holding){ 0 };
		return;
	}
	h->held -= n;
	if (h->held == 0 && h->since_ns) {
		bh_hist_record(&m->hold, now - h->since_ns);
		h->since_ns = 0;
	}
}

static void take(struct ref_bh *m, unsigned thread, uint32_t n, uint64_t now)
{
	m->avail -= n;
	count(m, &m->acquired);
	hold_begin(m, thread, n, now);
}

/* ---- the queue ---------------------------------------------------------- */

static void remove_request(struct ref_bh *m, unsigned id)
{
	unsigned i = 0;

	while (i < m->qlen && m->q[i] != id)
		i++;
	if (i == m->qlen)
		return;
	if (i == 0) /* the marks were about the head */
		m->offered = m->starving = false;
	memmove(&m->q[i], &m->q[i + 1], m->qlen - i - 1);
	m->qlen--;
}

/* The final word to a request that left the queue. */
static void finish(struct ref_bh *m, unsigned id, int result, uint64_t now)
{
	struct ref_request *r = &m->req[id];

	if (!is_async(id)) {
		r->st = result == 0 ? REF_GRANTED : result == -ESHUTDOWN ? REF_SHUT : REF_INVAL;
		return;
	}
	r->st = REF_IDLE;
	if (result == 0)
		count(m, &m->acquired);
	record_wait(m, id, result, now);
	event(m, 'C', id, result);
}

/* Serve the queue from the head while it fits (strict head-of-line): fair
 * mode, a starving head and async nodes get the permits handed over; a
 * blocking head in unfair mode is offered them, once. */
static void dispatch(struct ref_bh *m, uint64_t now)
{
	while (m->qlen) {
		unsigned h = m->q[0];
		struct ref_request *r = &m->req[h];

		if (m->avail < (int64_t)r->n)
			return;
		if (!m->fair && !m->starving && !is_async(h)) {
			if (!m->offered) {
				m->offered = true;
				r->st = REF_OFFERED;
			}
			return;
		}
		m->avail -= r->n;
		remove_request(m, h);
		event(m, 'G', h, 0);
		finish(m, h, 0, now);
	}
}

/* Fail every queued request asking for more than above, in queue order. */
static void fail_above(struct ref_bh *m, uint32_t above, int result, uint64_t now)
{
	unsigned i = 0;

	while (i < m->qlen) {
		unsigned id = m->q[i];

		if (m->req[id].n > above) {
			remove_request(m, id);
			finish(m, id, result, now);
		} else {
			i++;
		}
	}
}

/* ---- entry points -------------------------------------------------------- */

void ref_init(struct ref_bh *m, const struct bh_config *cfg, uint64_t starve_ns)
{
	memset(m, 0, sizeof(*m));
	m->fair = cfg->flags & BH_FAIR;
	m->no_stats = cfg->flags & BH_NO_STATS;
	m->track_hold = cfg->flags & BH_TRACK_HOLD;
	m->queue_cap = cfg->queue_capacity > BH_QUEUE_MAX ? BH_QUEUE_MAX : cfg->queue_capacity;
	m->starve_ns = starve_ns;
	m->limit = cfg->max_concurrent;
	m->avail = cfg->max_concurrent;
}

void ref_set_host(struct ref_bh *m, uint32_t nodes)
{
	m->host = true;
	if (m->queue_cap > nodes)
		m->queue_cap = nodes;
}

/* Why n cannot be taken now: invalid n, closed, above the limit, no room. */
static int refusal(const struct ref_bh *m, uint32_t n)
{
	if (!n_valid(n))
		return -EINVAL;
	if (m->closed)
		return -ESHUTDOWN;
	if (n > m->limit)
		return -EINVAL;
	return -EBUSY;
}

int ref_try_acquire(struct ref_bh *m, unsigned thread, uint32_t n, uint64_t now)
{
	int r;

	if (n_valid(n) && may_take(m, n)) {
		take(m, thread, n, now);
		return 0;
	}
	r = refusal(m, n);
	if (r == -EBUSY)
		count(m, &m->rejected);
	return r;
}


/* Take n on thread, or join the queue as request id. */
static int admit(struct ref_bh *m, unsigned thread, unsigned id, uint32_t n, uint64_t now)
{
	int r = refusal(m, n);

	if (r != -EBUSY)
		return r;
	if (may_take(m, n)) {
		take(m, thread, n, now);
		return 0;
	}
	if (m->qlen >= m->queue_cap) {
		count(m, &m->rejected);
		return -EBUSY;
	}
	m->req[id] = (struct ref_request){ .st = REF_QUEUED, .n = n, .enqueued_ns = now };
	m->q[m->qlen++] = (uint8_t)id;
	event(m, 'Q', id, 0);
	return REF_BLOCKS;
}

int ref_acquire(struct ref_bh *m, unsigned id, uint32_t n, uint64_t deadline_ns, uint64_t now)
{
	if (n_valid(n) && may_take(m, n)) {
		take(m, REF_WAITER(id), n, now);
		return 0;
	}
	if (!n_valid(n))
		return -EINVAL;
	if (deadline_ns <= now) /* a deadline already past is a try */
		return ref_try_acquire(m, REF_WAITER(id), n, now);
	return admit(m, REF_WAITER(id), id, n, now);
}

static int final_result(enum ref_state s)
{
	return s == REF_GRANTED ? 0 : s == REF_SHUT ? -ESHUTDOWN : -EINVAL;
}

/* The offered head runs: it takes the permits if they are still free; if a
 * newcomer got them first it waits again, marked starving if it has waited
 * starve_ns and no fair handoff happened for as long. */
static bool compete(struct ref_bh *m, unsigned id, uint64_t now)
{
	struct ref_request *r = &m->req[id];

	m->offered = m->starving = false;
	if (m->avail >= (int64_t)r->n) {
		m->avail -= r->n;
		remove_request(m, id);
		event(m, 'G', id, 0);
		dispatch(m, now);
		return true;
	}
	r->st = REF_QUEUED;
	if (now - r->enqueued_ns >= m->starve_ns && now >= m->fair_after_ns) {
		m->starving = true;
		m->fair_after_ns = now + m->starve_ns;
	}
	return false;
}

/* A blocking call returns result after having queued. */
static int leave_with(struct ref_bh *m, unsigned id, int result, uint64_t now)
{
	record_wait(m, id, result, now);
	m->req[id].st = REF_IDLE;
	if (result == 0) {
		count(m, &m->acquired);
		hold_begin(m, REF_WAITER(id), m->req[id].n, now);
	}
	return result;
}

int ref_resume(struct ref_bh *m, unsigned id, int wait_result, uint64_t now)
{
	struct ref_request *r = &m->req[id];

	if (wait_result == -ETIMEDOUT) {
		if (ref_final(r->st))
			return leave_with(m, id, final_result(r->st), now);
		remove_request(m, id);
		dispatch(m, now); /* followers may fit now the head is gone */
		m->timed_out++;
		return leave_with(m, id, -ETIMEDOUT, now);
	}
	if (ref_final(r->st))
		return leave_with(m, id, final_result(r->st), now);
	if (r->st == REF_OFFERED && compete(m, id, now))
		return leave_with(m, id, 0, now);
	return REF_BLOCKS;
}

void ref_cancel(struct ref_bh *m, unsigned id, uint64_t now)
{
	struct ref_request *r = &m->req[id];

	if (r->st == REF_GRANTED) {
		/* It holds nothing when it unwinds. Another call may have
		 * released some of its permits already (a release that fits
		 * under the limit is accepted from anyone): only what fits goes
		 * back, and the excess is an over-release. */
		int64_t room = (int64_t)m->limit - m->avail;

		if (room < (int64_t)r->n) {
			m->over_released++;
			m->avail += room;
		} else {
			m->avail += r->n;
		}
		dispatch(m, now);
	} else if (!ref_final(r->st)) {
		remove_request(m, id);
		dispatch(m, now);
	}
	m->cancelled++;
	record_wait(m, id, -ECANCELED, now);
	r->st = REF_IDLE;
	m->holding[REF_WAITER(id)] = (struct ref_holding){ 0 }; /* the thread is gone */
}

int ref_acquire_async(struct ref_bh *m, unsigned thread, unsigned id, uint32_t n,
		      uint64_t now)
{
	if (n_valid(n) && may_take(m, n)) {
		take(m, thread, n, now);
		return 0;
	}
	if (!n_valid(n))
		return -EINVAL;
	return admit(m, thread, id, n, now);
}

int ref_cancel_async(struct ref_bh *m, unsigned id, uint64_t now)
{
	if (m->req[id].st != REF_QUEUED)
		return 0;
	remove_request(m, id);
	dispatch(m, now);
	m->req[id].st = REF_IDLE;
	m->cancelled++;
	record_wait(m, id, -ECANCELED, now);
	return 1;
}

/* Host-wide: what the process's ledger holds. Permits handed to a blocking
 * waiter are not in it until that waiter's thread runs and claims them. */
static int64_t ledger(const struct ref_bh *m)
{
	int64_t held = (int64_t)m->limit - m->avail;

	for (unsigned id = 0; id < REF_NSYNC; id++)
		if (m->req[id].st == REF_GRANTED)
			held -= m->req[id].n;
	return held;
}

int ref_release(struct ref_bh *m, unsigned thread, uint32_t n, uint64_t now)
{
	if (!n_valid(n))
		return -EINVAL;
	/* a process-local bulkhead accepts any release that fits under the
	 * limit; a host-wide one only what its process holds */
	if (m->host ? (int64_t)n > ledger(m) : m->avail + n > m->limit) {
		m->over_released++;
		return -EOVERFLOW;
	}
	m->avail += n;
	count(m, &m->released);
	hold_end(m, thread, n, now);
	/* an offered head will see the permits itself */
	if (m->qlen && !m->offered)
		dispatch(m, now);
	return 0;
}

void ref_record_hold(struct ref_bh *m, uint64_t ns)
{
	if (m->track_hold)
		bh_hist_record(&m->hold, ns);
}

int ref_close(struct ref_bh *m, uint64_t now)
{
	if (m->closed)
		return -EALREADY;
	m->closed = true;
	fail_above(m, 0, -ESHUTDOWN, now);
	return 0;
}

int ref_set_limit(struct ref_bh *m, uint32_t limit, uint64_t now)
{
	if (!n_valid(limit))
		return -EINVAL;
	m->avail += (int64_t)limit - m->limit;
	m->limit = limit;
	fail_above(m, limit, -EINVAL, now);
	dispatch(m, now);
	return 0;
}

void ref_stats(const struct ref_bh *m, struct bh_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->limit = m->limit;
	out->in_flight = (uint64_t)((int64_t)m->limit - m->avail);
	out->queued = m->qlen;
	out->acquired = m->acquired;
	out->released = m->released;
	out->rejected = m->rejected;
	out->timed_out = m->timed_out;
	out->cancelled = m->cancelled;
	out->over_released = m->over_released;
	out->processes = m->host ? 1 : 0;
	out->wait = m->wait;
	out->wait_failed = m->wait_failed;
	out->hold = m->hold;
}
