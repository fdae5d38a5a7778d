/* The async trap's caller: one thread, one io_uring ring, an open-loop
 * stream of calls to payment. A call is a chain CONNECT -> SEND -> RECV on
 * a fresh loopback socket; its caller stops waiting after its timeout.
 *
 * The two runs differ only in who gives the permit back (struct mode):
 * naive, the caller, when it stops waiting or hears the answer, whichever
 * comes first (a whenComplete on a future ended by orTimeout); tracked,
 * the tracker, at the call's final CQE. Everything else - load, sockets,
 * counting - is shared, and the loop keeps its own count of the calls in
 * the kernel, comparing it with the bulkhead's in_flight after every round
 * of submissions. */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <liburing.h>

#include "bulkhead/uring.h"
#include "demo_trap.h"

#define CHAIN 3                    /* CONNECT, SEND, RECV */
#define RING_ENTRIES 256
#define SAMPLE_NS (100 * BH_MSEC)  /* the chart's resolution */
#define SHUTDOWN_NS (5 * BH_SEC)   /* cancelled socket ops end at once */
#define UD_SHUTDOWN_CANCEL 1       /* naive: the cancels sent at shutdown */

/* A circular list with a sentinel: a call sits on two at once. */
struct node {
	struct node *prev, *next;
};

struct call {
	struct bh_uring_op op; /* tracked: the tracker's record */
	struct node waiting;   /* while its caller waits, oldest first */
	struct node live;      /* while it is in the kernel */
	int fd;
	uint8_t cqes_left;     /* chain members whose CQE has not come */
	bool caller_waits, holds_permit, broken;
	uint64_t id, give_up_ns;
	char req[24], resp[64];
	size_t req_len;
};

struct trap_caller;

/* How a run holds permits. */
struct mode {
	/* Take a permit and prepare the call's chain: 0, -EBUSY or -errno. */
	int (*start)(struct trap_caller *c, struct call *call, uint64_t arrival_ns);
	void (*caller_gave_up)(struct trap_caller *c, struct call *call);
	void (*finished)(struct trap_caller *c, struct call *call);
	void (*reap)(struct trap_caller *c);
	void (*cancel)(struct trap_caller *c, struct call *call); /* at shutdown */
};

struct trap_caller {
	struct trap_caller_params p;
	const struct demo_config *cfg;
	const struct mode *mode;
	struct trap_run *run;
	struct io_uring ring;
	bool ring_ready;
	bh_uring_t *tracker;
	bulkhead_t *bh;
	struct sockaddr_in addr;
	struct node waiting, live;
	uint32_t in_kernel; /* our own count: the live list's length */
	uint32_t shutdown_cancels; /* naive: their CQEs still due */
	uint64_t caller_timeout_ns, call_deadline_ns, period_ns, end_ns;
	uint64_t next_arrival, next_sample;
	uint32_t sec, secs; /* the second being collected (1-based), of secs */
	struct trap_calls calls, tick_base;
	struct trap_counts tick_peak;
	struct bh_stats st; /* ~10 KB: not on the stack */
	pthread_t thread;
	bool started;
	_Atomic bool stop, done;
};

/* ---- lists ---------------------------------------------------------------- */

#define call_of(n, field) ((struct call *)((char *)(n) - offsetof(struct call, field)))

static void list_init(struct node *head)
{
	head->prev = head->next = head;
}

static void list_add_tail(struct node *n, struct node *head)
{
	n->prev = head->prev;
	n->next = head;
	head->prev->next = n;
	head->prev = n;
}

static void list_del(struct node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

static bool list_empty(const struct node *head)
{
	return head->next == head;
}

/* ---- sockets and the chain -------------------------------------------------- */

/* Close with RST: the backend learns at once that its caller left, and no
 * TIME_WAIT piles up. */
static void drop_socket(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

static int new_socket(struct call *call)
{
	call->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	return call->fd < 0 ? -errno : 0;
}

static void prep_chain(struct trap_caller *c, struct call *call, struct io_uring_sqe **s)
{
	io_uring_prep_connect(s[0], call->fd, (struct sockaddr *)&c->addr, sizeof(c->addr));
	io_uring_prep_send(s[1], call->fd, call->req, call->req_len, MSG_NOSIGNAL);
	io_uring_prep_recv(s[2], call->fd, call->resp, sizeof(call->resp) - 1, 0);
}

/* Whether the RECV brought the backend's answer to this call. */
static bool answered(struct call *call, int res)
{
	uint64_t id, answer;

	if (res <= 0)
		return false;
	call->resp[res] = '\0';
	return sscanf(call->resp, "%" SCNu64 " %" SCNu64, &id, &answer) == 2 && id == call->id &&
	       answer == backend_answer(id);
}

/* Leave room for n SQEs: hand the kernel what is queued if need be. */
static bool sq_room(struct trap_caller *c, unsigned n)
{
	if (io_uring_sq_space_left(&c->ring) < n)
		io_uring_submit(&c->ring);
	return io_uring_sq_space_left(&c->ring) >= n;
}

/* ---- a call's life ---------------------------------------------------------- */

static void call_finished(struct trap_caller *c, struct call *call, int res)
{
	if (call->caller_waits) {
		list_del(&call->waiting);
		call->caller_waits = false;
		if (!call->broken && answered(call, res))
			c->calls.ok++;
		else if (!call->broken && (res == -ECANCELED || res == -ETIME))
			c->calls.deadline++;
		else
			c->calls.failed++;
	} else {
		c->calls.late++;
	}
	c->mode->finished(c, call);
	list_del(&call->live);
	c->in_kernel--;
	drop_socket(call->fd);
	free(call);
}

/* Each chain member posts one CQE (after a failure the rest post
 * -ECANCELED); the RECV's is the last. tracker_done: what the tracker made
 * of this CQE, or -1 when there is none. Should the two ever disagree, the
 * call stays until both say it is over: the op is the tracker's until then. */
static void on_call_cqe(struct trap_caller *c, struct call *call, int res, int tracker_done)
{
	bool last;

	if (call->cqes_left)
		call->cqes_left--;
	last = call->cqes_left == 0;
	if (tracker_done >= 0 && tracker_done != last)
		c->run->checks.disagreements++;
	if (!last)
		call->broken |= res < 0;
	else if (tracker_done != 0)
		call_finished(c, call, res);
}

static void start_call(struct trap_caller *c, uint64_t arrival_ns)
{
	struct call *call = calloc(1, sizeof(*call));
	int r;

	c->calls.offered++;
	if (!call) {
		c->calls.no_start++;
		return;
	}
	call->fd = -1;
	call->id = c->next_arrival;
	call->req_len = (size_t)snprintf(call->req, sizeof(call->req), "%" PRIu64 "\n", call->id);
	r = sq_room(c, CHAIN + 1) ? c->mode->start(c, call, arrival_ns) : -EAGAIN;
	if (r < 0) {
		if (r == -EBUSY)
			c->calls.shed++;
		else
			c->calls.no_start++;
		drop_socket(call->fd);
		free(call);
		return;
	}
	call->cqes_left = CHAIN;
	call->caller_waits = true;
	call->give_up_ns = arrival_ns + c->caller_timeout_ns;
	list_add_tail(&call->waiting, &c->waiting);
	list_add_tail(&call->live, &c->live);
	c->in_kernel++;
}

/* Open loop: call i arrives at t0 + i / rate, whatever became of the
 * others, and its caller's patience counts from then. */
static void start_due_calls(struct trap_caller *c, uint64_t now)
{
	for (;;) {
		uint64_t at = c->p.t0 + c->next_arrival * c->period_ns;

		if (at > now || at >= c->end_ns)
			return;
		start_call(c, at);
		c->next_arrival++;
	}
}

/* The caller's own timer: it stops waiting. The call goes on. */
static void give_up_overdue(struct trap_caller *c, uint64_t now)
{
	while (!list_empty(&c->waiting)) {
		struct call *call = call_of(c->waiting.next, waiting);

		if (call->give_up_ns > now)
			return;
		list_del(&call->waiting);
		call->caller_waits = false;
		c->calls.gave_up++;
		c->mode->caller_gave_up(c, call);
	}
}

/* ---- naive: the permit follows the caller ------------------------------------ */

static void naive_release(struct trap_caller *c, struct call *call)
{
	if (!call->holds_permit)
		return;
	call->holds_permit = false;
	if (bh_release(c->bh, 1) != 0)
		c->run->checks.refused_releases++;
}

static int naive_start(struct trap_caller *c, struct call *call, uint64_t arrival_ns)
{
	struct io_uring_sqe *s[CHAIN];
	int r = bh_try_acquire(c->bh, 1);

	(void)arrival_ns; /* no deadline of its own: the trap */
	if (r < 0)
		return r;
	call->holds_permit = true;
	if ((r = new_socket(call)) < 0) {
		naive_release(c, call);
		return r;
	}
	for (int i = 0; i < CHAIN; i++) {
		s[i] = io_uring_get_sqe(&c->ring); /* sq_room made sure */
		s[i]->user_data = (uint64_t)(uintptr_t)call;
	}
	prep_chain(c, call, s);
	s[0]->flags |= IOSQE_IO_LINK;
	s[1]->flags |= IOSQE_IO_LINK;
	return 0;
}

/* The trap: the caller stopped waiting, so the permit goes back - while
 * the RECV is still in the kernel and payment still serves the request. */
static void naive_gave_up(struct trap_caller *c, struct call *call)
{
	naive_release(c, call);
}

/* The answer came before the caller gave up: whenComplete releases. */
static void naive_finished(struct trap_caller *c, struct call *call)
{
	naive_release(c, call);
}

static void naive_cqe(struct trap_caller *c, const struct io_uring_cqe *cqe)
{
	if (cqe->user_data == UD_SHUTDOWN_CANCEL)
		c->shutdown_cancels--;
	else if (cqe->user_data != LIBURING_UDATA_TIMEOUT)
		on_call_cqe(c, (struct call *)(uintptr_t)cqe->user_data, cqe->res, -1);
}

static void naive_reap(struct trap_caller *c)
{
	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;

		io_uring_for_each_cqe(&c->ring, head, cqe) {
			naive_cqe(c, cqe);
			n++;
		}
		io_uring_cq_advance(&c->ring, n);
		if (n)
			continue;
		/* Iterating never brings back CQEs the kernel parked. */
		if (!io_uring_cq_has_overflow(&c->ring) || io_uring_get_events(&c->ring) < 0)
			return;
	}
}

static void naive_cancel(struct trap_caller *c, struct call *call)
{
	struct io_uring_sqe *sqe;

	if (!sq_room(c, 1))
		return; /* the next round of the shutdown retries */
	sqe = io_uring_get_sqe(&c->ring);
	io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)call, 0);
	sqe->user_data = UD_SHUTDOWN_CANCEL;
	c->shutdown_cancels++;
}

static const struct mode naive_mode = {
	naive_start, naive_gave_up, naive_finished, naive_reap, naive_cancel,
};

/* ---- tracked: the permit follows the call ------------------------------------- */

static int tracked_start(struct trap_caller *c, struct call *call, uint64_t arrival_ns)
{
	struct io_uring_sqe *s[CHAIN];
	uint64_t deadline = BH_FOREVER;
	int r;

	call->op.data = call;
	r = bh_uring_get_sqes(c->tracker, &call->op, c->bh, 1, CHAIN, s);
	if (r < 0)
		return r;
	if ((r = new_socket(call)) < 0) {
		bh_uring_cancel(c->tracker, &call->op); /* SQEs become NOPs, permit back */
		return r;
	}
	prep_chain(c, call, s);
	if (c->call_deadline_ns)
		deadline = arrival_ns + c->call_deadline_ns;
	return bh_uring_track(c->tracker, &call->op, deadline);
}

/* Tell the kernel; the permit stays held until the call's final CQE. */
static void tracked_gave_up(struct trap_caller *c, struct call *call)
{
	int r = bh_uring_cancel(c->tracker, &call->op);

	if (r == -EAGAIN && sq_room(c, 1))
		r = bh_uring_cancel(c->tracker, &call->op);
	if (r == 0)
		c->calls.cancels++;
}

static void tracked_finished(struct trap_caller *c, struct call *call)
{
	(void)c; /* the tracker gave the permit back before we saw the CQE */
	(void)call;
}

static void tracked_cqe(void *ctx, struct io_uring_cqe *cqe, int kind, struct bh_uring_op *op)
{
	if (kind == BH_URING_MORE || kind == BH_URING_DONE)
		on_call_cqe(ctx, op->data, cqe->res, kind == BH_URING_DONE);
}

static void tracked_reap(struct trap_caller *c)
{
	bh_uring_reap(c->tracker, tracked_cqe, c);
}

static void tracked_cancel(struct trap_caller *c, struct call *call)
{
	if (bh_uring_cancel(c->tracker, &call->op) == -EAGAIN && sq_room(c, 1))
		bh_uring_cancel(c->tracker, &call->op);
	if (!bh_uring_op_busy(&call->op)) /* never reached the kernel: no CQE will come */
		call_finished(c, call, -ECANCELED);
}

static const struct mode tracked_mode = {
	tracked_start, tracked_gave_up, tracked_finished, tracked_reap, tracked_cancel,
};

/* ---- what the run shows ------------------------------------------------------ */

static struct trap_counts counts_now(struct trap_caller *c)
{
	bh_stats(c->bh, &c->st);
	return (struct trap_counts){ .reported = (uint32_t)c->st.in_flight,
				     .kernel = c->in_kernel,
				     .backend = backend_serving(c->p.backend) };
}

static void raise_peaks(struct trap_counts *peak, const struct trap_counts *n)
{
	if (n->reported > peak->reported)
		peak->reported = n->reported;
	if (n->kernel > peak->kernel)
		peak->kernel = n->kernel;
	if (n->backend > peak->backend)
		peak->backend = n->backend;
}

static struct trap_calls calls_since(const struct trap_calls *now, const struct trap_calls *then)
{
	return (struct trap_calls){
		now->offered - then->offered, now->shed - then->shed,
		now->no_start - then->no_start, now->ok - then->ok,
		now->deadline - then->deadline, now->failed - then->failed,
		now->gave_up - then->gave_up, now->late - then->late,
		now->cancels - then->cancels,
	};
}

/* Publish the ticks of the seconds that ended by now. */
static void close_ticks(struct trap_caller *c, uint64_t now)
{
	struct trap_run *run = c->run;

	while (c->sec <= c->secs && now >= c->p.t0 + (uint64_t)c->sec * BH_SEC) {
		uint32_t n = atomic_load_explicit(&run->nticks, memory_order_relaxed);

		run->ticks[n] = (struct trap_tick){
			.t = c->sec, .fault = fault_overlaps(c->cfg, c->sec - 1.0, c->sec),
			.calls = calls_since(&c->calls, &c->tick_base), .peak = c->tick_peak,
		};
		/* release: the tick is written before the printer sees it */
		atomic_store_explicit(&run->nticks, n + 1, memory_order_release);
		c->tick_base = c->calls;
		memset(&c->tick_peak, 0, sizeof(c->tick_peak));
		c->sec++;
	}
}

static void take_sample(struct trap_caller *c, uint64_t now, const struct trap_counts *n)
{
	struct trap_run *run = c->run;
	uint32_t i = atomic_load_explicit(&run->nsamples, memory_order_relaxed);

	if (now < c->next_sample)
		return;
	while (c->next_sample <= now)
		c->next_sample += SAMPLE_NS;
	if (i == run->cap_samples)
		return;
	run->samples[i] = (struct trap_sample){ (uint32_t)((now - c->p.t0) / BH_MSEC), *n };
	run->samples_mismatched += n->reported != n->kernel;
	atomic_store_explicit(&run->nsamples, i + 1, memory_order_release);
}

/* After every round of submissions: the bulkhead's view against ours. */
static void check(struct trap_caller *c, uint64_t now)
{
	struct trap_checks *ck = &c->run->checks;
	struct trap_counts n = counts_now(c);

	ck->n++;
	ck->mismatched += n.reported != n.kernel;
	if (n.kernel > n.reported && n.kernel - n.reported > ck->max_hidden)
		ck->max_hidden = n.kernel - n.reported;
	raise_peaks(&ck->peak, &n);
	raise_peaks(&c->tick_peak, &n);
	take_sample(c, now, &n);
}

/* ---- the loop ----------------------------------------------------------------- */

static uint64_t next_event(struct trap_caller *c)
{
	uint64_t at = c->next_sample, arrival = c->p.t0 + c->next_arrival * c->period_ns;

	if (arrival < at && arrival < c->end_ns)
		at = arrival;
	if (!list_empty(&c->waiting) && call_of(c->waiting.next, waiting)->give_up_ns < at)
		at = call_of(c->waiting.next, waiting)->give_up_ns;
	if (c->end_ns < at)
		at = c->end_ns;
	return at;
}

static void wait_for(struct trap_caller *c, uint64_t until)
{
	struct io_uring_cqe *cqe;
	uint64_t now = bh_now_ns(), left = until > now ? until - now : 0;
	struct __kernel_timespec ts = { .tv_sec = (long long)(left / BH_SEC),
					.tv_nsec = (long long)(left % BH_SEC) };

	if (left)
		io_uring_wait_cqe_timeout(&c->ring, &cqe, &ts);
	c->mode->reap(c);
}

static void offer_load(struct trap_caller *c)
{
	for (;;) {
		uint64_t now = bh_now_ns();

		if (atomic_load_explicit(&c->stop, memory_order_relaxed) || now >= c->end_ns)
			break;
		close_ticks(c, now); /* what happens from now on is the next second's */
		start_due_calls(c, now);
		give_up_overdue(c, now);
		io_uring_submit(&c->ring);
		check(c, now);
		wait_for(c, next_event(c));
	}
	c->run->complete = !atomic_load_explicit(&c->stop, memory_order_relaxed);
	close_ticks(c, c->run->complete ? UINT64_MAX : bh_now_ns());
	c->run->calls = c->calls;
}

/* Cancel every call still in the kernel and wait for its final CQE: the
 * ring may go only when the kernel is done with every buffer and socket. */
static void shut_down(struct trap_caller *c)
{
	uint64_t until = bh_now_ns() + SHUTDOWN_NS;

	for (struct node *n = c->live.next, *next; n != &c->live; n = next) {
		next = n->next; /* cancel may finish the call */
		c->mode->cancel(c, call_of(n, live));
	}
	while ((c->in_kernel || c->shutdown_cancels) && bh_now_ns() < until) {
		io_uring_submit(&c->ring);
		wait_for(c, bh_now_ns() + 100 * BH_MSEC);
	}
	if (c->tracker && bh_uring_drain(c->tracker, until, tracked_cqe, c) == 0)
		bh_uring_destroy(c->tracker);
	else if (c->tracker)
		c->run->error = -ETIMEDOUT;
	c->tracker = NULL;
	if (c->in_kernel)
		c->run->error = -ETIMEDOUT;
}

static void *caller_main(void *arg)
{
	struct trap_caller *c = arg;

	pthread_setname_np(pthread_self(), "bhd-caller");
	offer_load(c);
	shut_down(c);
	/* release: the run's totals are written before done is seen */
	atomic_store_explicit(&c->done, true, memory_order_release);
	return NULL;
}

/* ---- lifecycle ---------------------------------------------------------------- */

int trap_probe_uring(void)
{
	struct io_uring ring;
	int r = io_uring_queue_init(8, &ring, 0);

	if (r == 0)
		io_uring_queue_exit(&ring);
	return r;
}

static int make_caller(struct trap_caller *c)
{
	struct bh_config bc = { .max_concurrent = c->run->limit, .queue_capacity = 0,
				.name = "payment" };
	int r;

	if ((r = bh_create(&bc, &c->bh)) < 0)
		return r;
	if ((r = io_uring_queue_init(RING_ENTRIES, &c->ring, 0)) < 0)
		return r;
	c->ring_ready = true;
	if (c->p.mode == TRAP_TRACKED)
		return bh_uring_create(&c->ring, 0, &c->tracker);
	return 0;
}

static void set_times(struct trap_caller *c)
{
	const struct demo_config *cfg = c->cfg;

	c->period_ns = sec_to_ns(1.0 / cfg->rate);
	c->caller_timeout_ns = sec_to_ns(cfg->timeout_s[DEP_PAY]);
	c->call_deadline_ns = sec_to_ns(cfg->call_deadline_s);
	c->end_ns = c->p.t0 + sec_to_ns(cfg->duration_s);
	c->next_sample = c->p.t0;
	c->sec = 1;
	c->secs = (uint32_t)(cfg->duration_s + 0.999);
}

int trap_caller_start(const struct trap_caller_params *p, struct trap_caller **out)
{
	struct trap_caller *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	c->p = *p;
	c->cfg = p->cfg;
	c->run = p->run;
	c->mode = p->mode == TRAP_TRACKED ? &tracked_mode : &naive_mode;
	c->addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(p->backend->port),
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	list_init(&c->waiting);
	list_init(&c->live);
	set_times(c);
	r = make_caller(c);
	if (r == 0)
		r = -pthread_create(&c->thread, NULL, caller_main, c);
	c->started = r == 0;
	if (r < 0) {
		trap_caller_stop(c);
		return r;
	}
	*out = c;
	return 0;
}

bool trap_caller_done(struct trap_caller *c)
{
	return atomic_load_explicit(&c->done, memory_order_acquire);
}

void trap_caller_stop(struct trap_caller *c)
{
	atomic_store_explicit(&c->stop, true, memory_order_relaxed);
	if (c->started)
		pthread_join(c->thread, NULL);
	else
		bh_uring_destroy(c->tracker); /* never used: nothing in flight */
	if (c->ring_ready)
		io_uring_queue_exit(&c->ring);
	/* Calls the kernel never finished (shut_down timed out): theirs now. */
	while (!list_empty(&c->live)) {
		struct call *call = call_of(c->live.next, live);

		list_del(&call->live);
		drop_socket(call->fd);
		free(call);
	}
	bh_destroy(c->bh);
	free(c);
}
