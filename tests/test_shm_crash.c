/* Host-wide bulkheads: a process killed with SIGKILL at chosen instants.
 * This program links the copy of the layer built with crash points
 * (src/libbhcrash.la): a child told to stop at a point announces it on a
 * pipe and waits there; the test kills it and checks that, within a second,
 * what it held is back, its waiters are gone, a grant made to it has passed
 * on, a lock it held is taken over -- and that every permit can be taken
 * once and not one more (none lost, none created). */
#include <poll.h>
#include <pthread.h>

#include "shmutil.h"
#include "shm/role.h"
#include "shm/seg.h"

/* Every permit is back and can be taken once: none lost, none created. */
static void all_permits_back(bulkhead_t *bh, uint32_t limit)
{
	struct bh_stats st = stats_of(bh);

	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(bh_try_acquire(bh, limit), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, limit), 0);
	assert_false(bhs_word(bh) & S_FROZEN);
}

struct victim {
	const char *name;
	int point;
	unsigned count;
	int (*act)(bulkhead_t *bh, struct victim *v, int out, int in);
	uint32_t n;
};

/* The child: attach, arm the point, act. Reaching the end means the point
 * was never hit: exit 7 and the test fails. */
static int victim_main(void *arg, int out, int in)
{
	struct victim *v = arg;
	bulkhead_t *bh;

	if (bh_shm_open(v->name, NULL, 0, &bh) != 0)
		return 1;
	bhs_crash_at(v->point, v->count, out);
	v->act(bh, v, out, in);
	return 7;
}

/* Start the victim and wait until it stops at its point. */
static struct child stop_at(struct victim *v)
{
	struct child c = spawn(victim_main, v);
	char point = 0;

	assert_int_equal(read(c.rd, &point, 1), 1);
	assert_int_equal(point, v->point);
	return c;
}

static int act_try(bulkhead_t *bh, struct victim *v, int out, int in)
{
	(void)out;
	(void)in;
	return bh_try_acquire(bh, v->n);
}

/* A pair of one permit first, so the thread has its slot and the act runs
 * on the fast path (a thread's first call maps its slot on the slow one);
 * the crash point's count skips the pair's own stop there. */
static int act_warm_try(bulkhead_t *bh, struct victim *v, int out, int in)
{
	(void)out;
	(void)in;
	if (bh_try_acquire(bh, 1) != 0 || bh_release(bh, 1) != 0)
		return 1;
	return bh_try_acquire(bh, v->n);
}

static int act_warm_take_then_release(bulkhead_t *bh, struct victim *v, int out, int in)
{
	(void)out;
	(void)in;
	if (bh_try_acquire(bh, 1) != 0 || bh_release(bh, 1) != 0)
		return 1;
	if (bh_try_acquire(bh, v->n) != 0)
		return 1;
	return bh_release(bh, v->n);
}

static int act_take_then_release(bulkhead_t *bh, struct victim *v, int out, int in)
{
	(void)out;
	(void)in;
	if (bh_try_acquire(bh, v->n) != 0)
		return 1;
	return bh_release(bh, v->n);
}

static int act_wait(bulkhead_t *bh, struct victim *v, int out, int in)
{
	(void)out;
	(void)in;
	return bh_acquire(bh, v->n, BH_FOREVER);
}

static int act_set_limit(bulkhead_t *bh, struct victim *v, int out, int in)
{
	(void)out;
	(void)in;
	return bh_set_limit(bh, v->n);
}

/* Between the permit CAS and the ledger write: the ambiguous window. One
 * permit on the fast path goes through the slot's in word, more (or a
 * thread's first call) through its ledger. */
static void killed_between_cas_and_ledger(uint32_t n, bool warm)
{
	const char *name = uniq("acq-window");
	bulkhead_t *bh = shm_make(name, 4, 4, 0);
	struct victim v = { name, BP_ACQ_CAS, warm ? 2 : 1, warm ? act_warm_try : act_try, n };
	struct child c = stop_at(&v);

	assert_int_equal(stats_of(bh).in_flight, n); /* the CAS happened */
	kill_reap(&c);
	await_in_flight(bh, 0, BH_SEC);
	assert_int_equal(stats_of(bh).reclaimed, n);
	assert_true(atomic_load(&((struct bhs_seg *)bhs_segment(bh, NULL))->rebuilds) >= 1);
	all_permits_back(bh, 4);
	shm_done(bh, name);
}

static void test_killed_between_cas_and_ledger(void **state)
{
	(void)state;
	killed_between_cas_and_ledger(1, false);
	killed_between_cas_and_ledger(1, true);
	killed_between_cas_and_ledger(3, false);
	killed_between_cas_and_ledger(3, true);
}

/* The release's CAS gave the permits back but the ledger still counts
 * them: trusting it would create permits. */
static void killed_between_release_cas_and_ledger(uint32_t n, bool warm)
{
	const char *name = uniq("rel-window");
	bulkhead_t *bh = shm_make(name, 4, 4, 0);
	struct victim v = { name, BP_REL_CAS, warm ? 2 : 1,
			    warm ? act_warm_take_then_release : act_take_then_release, n };
	struct child c = stop_at(&v);

	assert_int_equal(stats_of(bh).in_flight, 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	kill_reap(&c);
	assert_true(bhs_scan_now(bh));
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_true(atomic_load(&((struct bhs_seg *)bhs_segment(bh, NULL))->rebuilds) >= 1);
	assert_int_equal(stats_of(bh).reclaimed, 0);
	assert_int_equal(bh_try_acquire(bh, 3), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, 4), 0);
	all_permits_back(bh, 4);
	shm_done(bh, name);
}

static void test_killed_between_release_cas_and_ledger(void **state)
{
	(void)state;
	killed_between_release_cas_and_ledger(1, false);
	killed_between_release_cas_and_ledger(1, true);
	killed_between_release_cas_and_ledger(2, false);
	killed_between_release_cas_and_ledger(2, true);
}

/* A queued waiter dies: it leaves the queue, and the permit it would have
 * had goes to the waiter behind it, whether the death is found before the
 * release or after a handoff to the dead waiter. */
static int blocking_child(void *arg, int out, int in)
{
	bulkhead_t *bh;
	int r;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0)
		return 1;
	say(out, 1);
	r = bh_acquire(bh, 1, bh_now_ns() + 20 * BH_SEC);
	say(out, r);
	hear(in);
	if (r == 0)
		bh_release(bh, 1);
	return 0;
}

static void killed_while_queued(bool release_first)
{
	const char *name = uniq("queued");
	bulkhead_t *bh = shm_make(name, 1, 4, BH_FAIR);
	struct victim v = { name, BP_QUEUED, 1, act_wait, 1 };
	struct child dead, next;
	uint64_t t0;

	assert_int_equal(bh_try_acquire(bh, 1), 0);
	dead = stop_at(&v);
	assert_int_equal(stats_of(bh).queued, 1);
	next = spawn(blocking_child, (void *)name);
	assert_int_equal(hear(next.rd), 1);
	await_queued(bh, 2);
	kill_reap(&dead);
	if (release_first)
		assert_int_equal(bh_release(bh, 1), 0); /* handed to the dead waiter */
	t0 = bh_now_ns();
	if (!release_first) {
		while (stats_of(bh).queued != 1)
			assert_true(bh_now_ns() - t0 < BH_SEC);
		assert_int_equal(bh_release(bh, 1), 0);
	}
	assert_int_equal(hear(next.rd), 0);
	assert_true(bh_now_ns() - t0 < BH_SEC);
	assert_int_equal(stats_of(bh).in_flight, 1);
	say(next.wr, 0);
	assert_int_equal(reap(&next), 0);
	all_permits_back(bh, 1);
	assert_int_equal(stats_of(bh).reclaimed, release_first ? 1 : 0);
	shm_done(bh, name);
}

static void test_killed_while_queued(void **state)
{
	(void)state;
	killed_while_queued(false);
}

static void test_handoff_to_dead_waiter_passes_on(void **state)
{
	(void)state;
	killed_while_queued(true);
}

/* Right after a handoff to it, before it claimed the permit. */
static void test_killed_right_after_handoff(void **state)
{
	const char *name = uniq("granted");
	bulkhead_t *bh = shm_make(name, 1, 4, BH_FAIR);
	struct victim v = { name, BP_GRANTED, 1, act_wait, 1 };
	struct child c, next;
	char point;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	c = spawn(victim_main, &v);
	await_queued(bh, 1);
	next = spawn(blocking_child, (void *)name);
	assert_int_equal(hear(next.rd), 1);
	await_queued(bh, 2);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(read(c.rd, &point, 1), 1);
	assert_int_equal(point, BP_GRANTED);
	assert_int_equal(stats_of(bh).in_flight, 1); /* the dead one's grant */
	kill_reap(&c);
	assert_int_equal(hear(next.rd), 0);
	say(next.wr, 0);
	assert_int_equal(reap(&next), 0);
	assert_int_equal(stats_of(bh).reclaimed, 1);
	all_permits_back(bh, 1);
	shm_done(bh, name);
}

/* A waiter that saw its grant and died while moving it into its ledger. */
static void test_killed_while_claiming(void **state)
{
	const char *name = uniq("claim");
	bulkhead_t *bh = shm_make(name, 2, 4, BH_FAIR);
	struct victim v = { name, BP_CLAIM, 1, act_wait, 2 };
	struct child c;
	char point;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	c = spawn(victim_main, &v);
	await_queued(bh, 1);
	assert_int_equal(bh_release(bh, 2), 0);
	assert_int_equal(read(c.rd, &point, 1), 1);
	assert_int_equal(point, BP_CLAIM);
	kill_reap(&c);
	await_in_flight(bh, 0, BH_SEC);
	assert_int_equal(stats_of(bh).reclaimed, 2);
	all_permits_back(bh, 2);
	shm_done(bh, name);
}

static int victim_armed_later(void *arg, int out, int in)
{
	struct victim *v = arg;
	bulkhead_t *bh;

	if (bh_shm_open(v->name, NULL, 0, &bh) != 0)
		return 1;
	v->act(bh, v, out, in);
	return 7;
}

/* The granter holds n + 1 and gives back one, which is granted to the
 * waiter; it dies at the point with n of its own. */
static int act_give_one(bulkhead_t *bh, struct victim *v, int out, int in)
{
	if (bh_try_acquire(bh, v->n + 1) != 0)
		return 1;
	bhs_crash_at(BP_NONE, 0, out); /* disarm until told */
	say(out, 1);
	hear(in);
	bhs_crash_at(v->point, 1, out);
	return bh_release(bh, 1);
}

/* A granter that holds 2 of bh's 2 permits gives one back, which goes to
 * a waiter in another process; it dies at point at, holding the lock and
 * the other permit. Returns the waiter. */
static struct child granter_dies_at(bulkhead_t *bh, const char *name, int at)
{
	struct victim v = { name, at, 1, act_give_one, 1 };
	struct child granter = spawn(victim_armed_later, &v), waiter;
	char point;

	assert_int_equal(hear(granter.rd), 1);
	waiter = spawn(blocking_child, (void *)name);
	assert_int_equal(hear(waiter.rd), 1);
	await_queued(bh, 1);
	say(granter.wr, 0);
	assert_int_equal(read(granter.rd, &point, 1), 1);
	assert_int_equal(point, at);
	kill_reap(&granter);
	return waiter;
}

/* After that death: reclaimed counts the granter's own permit, not the one
 * it was handing over, and the waiter holds the grant, made once. */
static void granted_once(bulkhead_t *bh, const char *name, struct child *waiter)
{
	assert_int_equal(stats_of(bh).reclaimed, 1);
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY); /* not granted twice */
	assert_int_equal(bh_release(bh, 1), 0);
	say(waiter->wr, 0);
	assert_int_equal(reap(waiter), 0);
	all_permits_back(bh, 2);
	shm_done(bh, name);
}

/* The granter dies before the handoff's CAS (nothing granted yet) or after
 * it (the permit off the word, the waiter not told); the waiter's own polls
 * find the death. */
static void granter_killed(int at)
{
	const char *name = uniq("granter");
	bulkhead_t *bh = shm_make(name, 2, 4, BH_FAIR);
	struct child waiter = granter_dies_at(bh, name, at);
	uint64_t t0 = bh_now_ns();

	assert_int_equal(hear(waiter.rd), 0);
	assert_true(bh_now_ns() - t0 < BH_SEC);
	granted_once(bh, name, &waiter);
}

static void test_granter_killed_mid_grant(void **state)
{
	(void)state;
	granter_killed(BP_LOCKED);
}

static void test_granter_killed_before_grant(void **state)
{
	(void)state;
	granter_killed(BP_GRANTING);
}

/* A granter dies after its handoff is made and told, its grant log still
 * open, and the waiter claims the grant before anyone takes the lock over
 * (its polls find a scan just made and do not look: we keep making it).
 * The takeover then finds a logged grant whose CAS happened and a node no
 * longer queued: nothing to finish, nothing granted twice. */
static void test_granter_killed_after_grant(void **state)
{
	const char *name = uniq("granted");
	bulkhead_t *bh = shm_make(name, 2, 4, BH_FAIR);
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct child waiter = granter_dies_at(bh, name, BP_HANDED);
	struct pollfd told = { .fd = waiter.rd, .events = POLLIN };

	(void)state;
	do
		atomic_store(&g->scan_ns, bh_now_ns());
	while (poll(&told, 1, 1) == 0);
	assert_int_equal(hear(waiter.rd), 0); /* it claimed, the lock still the dead's */
	assert_int_not_equal(atomic_load(&g->lock), 0);
	bhs_scan_now(bh); /* takes the lock over */
	assert_int_equal(atomic_load(&g->deaths), 1);
	granted_once(bh, name, &waiter);
}

/* Dies holding the internal lock: the next caller takes it over. */
static void test_killed_holding_lock(void **state)
{
	const char *name = uniq("lock");
	bulkhead_t *bh = shm_make(name, 3, 4, 0);
	struct victim v = { name, BP_HOLD_LOCK, 1, act_set_limit, 2 };
	struct child c;
	uint64_t t0;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	c = stop_at(&v);
	kill_reap(&c);
	t0 = bh_now_ns();
	assert_int_equal(bh_set_limit(bh, 2), 0);
	assert_true(bh_now_ns() - t0 < BH_SEC);
	assert_int_equal(stats_of(bh).limit, 2);
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	all_permits_back(bh, 2);
	shm_done(bh, name);
}

static void never_called(struct bh_async *node, int result)
{
	(void)node;
	(void)result;
	_exit(8);
}

static int act_queue_async(bulkhead_t *bh, struct victim *v, int out, int in)
{
	struct bh_async node;

	(void)out;
	(void)in;
	return bh_acquire_async(bh, &node, v->n, never_called, NULL);
}

/* Every extra queue node is on the free list, once. */
static void all_extra_nodes_free(bulkhead_t *bh)
{
	struct bhs_seg *g = bhs_segment(bh, NULL);
	const struct bhs_hdr *h = &g->hdr;
	struct bhs_qnode *q = (struct bhs_qnode *)((char *)g + h->off_qnodes);
	uint32_t n = 0, i = atomic_load(&g->free_extra);

	while (i != 0) {
		assert_true(i - 1 >= h->nslots && i - 1 < h->nslots + h->nextra);
		assert_true(++n <= h->nextra); /* a node twice: a cycle */
		i = atomic_load(&q[i - 1].next);
	}
	assert_int_equal(n, h->nextra);
}

/* Dies holding the lock with an extra queue node taken off the free list
 * but not yet its own: no queue, owner or ledger names the node, so the
 * takeover's rebuild must relist the free nodes from the nodes themselves,
 * or it is lost for good. */
static void test_killed_taking_extra_node(void **state)
{
	const char *name = uniq("extra");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct victim v = { name, BP_EXTRA_TAKEN, 1, act_queue_async, 1 };
	struct child c;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0); /* the child's acquire queues */
	c = stop_at(&v);
	assert_int_not_equal(atomic_load(&g->lock), 0);
	kill_reap(&c);
	bhs_scan_now(bh); /* takes the lock over, and rebuilds */
	assert_int_equal(atomic_load(&g->deaths), 1);
	assert_true(atomic_load(&g->rebuilds) >= 1);
	all_extra_nodes_free(bh);
	assert_int_equal(stats_of(bh).queued, 0);
	assert_int_equal(bh_release(bh, 1), 0);
	all_permits_back(bh, 1);
	shm_done(bh, name);
}

/* The child of killed_after_telling: takes the permit, says so, and on cue
 * gives it back; the release tells the queued head (a grant, or a WOKEN
 * mark), and the child stops at its point, before the wake goes out. */
static int act_take_release_on_cue(bulkhead_t *bh, struct victim *v, int out, int in)
{
	if (bh_try_acquire(bh, v->n) != 0)
		return 1;
	say(out, 1);
	if (hear(in) != 1)
		return 1;
	return bh_release(bh, v->n);
}

static struct child woke_by;

/* A process that told a sleeping head something and died before the wake
 * it deferred to its unlock went out: a grant (BH_FAIR) or a WOKEN mark
 * (unfair mode). Dead holding the lock (BP_HANDED: a handoff made and
 * told), the lock is taken over and the state rebuilt; dead just after
 * giving the lock up (BP_UNLOCKED), its ledgers are closed and the look for
 * the dead reclaims. Neither recovery owes that head anything by itself: a
 * GRANTED node is out of the queue, and a dispatch leaves a WOKEN head to
 * come on its own. The recovery must wake every waiter that was told
 * something, or the head sleeps on until its next poll for the dead
 * (100 ms), its permit unused. */
static int told_at, told_rebuilds;

static int sleep_through_teller_death(struct fake_sync *f, unsigned call)
{
	struct bhs_seg *g = bhs_segment(f->bh, NULL);
	unsigned before = fake_wakes(f);
	char point = 0;

	assert_int_equal(call, 0);
	say(woke_by.wr, 1);
	assert_int_equal(read(woke_by.rd, &point, 1), 1);
	assert_int_equal(point, told_at);
	kill_reap(&woke_by);
	assert_int_equal(fake_wakes(f), before);
	bhs_scan_now(f->bh);
	assert_int_equal(atomic_load(&g->deaths), 1);
	assert_int_equal(atomic_load(&g->rebuilds), told_rebuilds);
	assert_int_equal(fake_wakes(f), before + 1);
	return 0;
}

static void killed_after_telling(uint32_t flags, int at, int rebuilds)
{
	const char *name = uniq("told");
	bulkhead_t *bh = shm_make(name, 1, 4, flags);
	/* the victim's take is a fast one, with no lock: the release's
	 * unlock is its first */
	struct victim v = { name, at, 1, act_take_release_on_cue, 1 };
	struct fake_sync f;

	told_at = at;
	told_rebuilds = rebuilds;
	woke_by = spawn(victim_main, &v);
	assert_int_equal(hear(woke_by.rd), 1); /* it holds the permit */
	fake_init(&f, 1000, sleep_through_teller_death);
	f.bh = bh;
	bhs_set_sync_ops(bh, &f.ops);
	assert_int_equal(bh_acquire(bh, 1, BH_FOREVER), 0);
	assert_int_equal(f.waits, 1);
	assert_int_equal(fake_wakes(&f), 1);
	assert_false(bhs_word(bh) & (W_STARVING | W_WOKEN));
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(stats_of(bh).reclaimed, 0);
	assert_int_equal(bh_release(bh, 1), 0);
	bhs_set_sync_ops(bh, NULL);
	all_permits_back(bh, 1);
	shm_done(bh, name);
}

/* A process that marked a sleeping head WOKEN (unfair mode) and died
 * before its unlock sent the wake: the rebuild sends the head back to
 * WAITING and must wake it itself. Its dispatch marks the head WOKEN
 * again, but from WAITING, which owes no wake (only a SLEEPING node is
 * woken), so without the rebuild's wake the head sleeps on until its next
 * poll for the dead (100 ms), the free permit unused. */
static void test_killed_waking_head(void **state)
{
	(void)state;
	killed_after_telling(0, BP_WOKE_HEAD, 1);
}

static void test_killed_after_unlock_woken_head(void **state)
{
	(void)state;
	killed_after_telling(0, BP_UNLOCKED, 0);
}

static void test_killed_after_unlock_granted_head(void **state)
{
	(void)state;
	killed_after_telling(BH_FAIR, BP_UNLOCKED, 0);
}

static void test_killed_after_handoff_told(void **state)
{
	(void)state;
	killed_after_telling(BH_FAIR, BP_HANDED, 1);
}

/* The same for an async waiter, whose process is told through its agent
 * word: the granter bumped our agent word, gave the lock up and died
 * before the wake. Our agent sleeps for poll_ns at most (10 s here); the
 * look for the dead must wake it, so the grant is delivered at once. */
static _Atomic int told_result = 1;

static void record_told(struct bh_async *node, int result)
{
	(void)node;
	atomic_store(&told_result, result);
}

static void test_killed_after_unlock_async_grant(void **state)
{
	const char *name = uniq("told-async");
	bulkhead_t *bh = shm_make(name, 1, 4, BH_FAIR);
	struct victim v = { name, BP_UNLOCKED, 1, act_take_release_on_cue, 1 };
	struct bh_async node;
	char point = 0;
	uint64_t t0;

	(void)state;
	bhs_set_poll_ns(bh, 10 * BH_SEC);
	atomic_store(&told_result, 1);
	woke_by = spawn(victim_main, &v);
	assert_int_equal(hear(woke_by.rd), 1); /* it holds the permit */
	assert_int_equal(bh_acquire_async(bh, &node, 1, record_told, NULL), 1);
	/* our agent asleep on its word, so that only a wake can get it going */
	assert_true(await_futex_sleeper(&((struct bhs_att *)bh->ext)->proc->agent));
	say(woke_by.wr, 1);
	assert_int_equal(read(woke_by.rd, &point, 1), 1);
	assert_int_equal(point, BP_UNLOCKED);
	kill_reap(&woke_by);
	t0 = bh_now_ns();
	assert_true(bhs_scan_now(bh));
	while (atomic_load(&told_result) == 1 && bh_now_ns() - t0 < 2 * BH_SEC)
		usleep(1000);
	assert_int_equal(atomic_load(&told_result), 0);
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(bh_release(bh, 1), 0);
	all_permits_back(bh, 1);
	shm_done(bh, name);
}

/* An unlock whose wake went to a waiter that then died (here: the lock is
 * freed and nobody is woken at all): the other waiters still get it. */
static int set_limit_child(void *arg, int out, int in)
{
	bulkhead_t *bh;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0)
		return 1;
	say(out, 1);
	hear(in);
	say(out, bh_set_limit(bh, 5));
	return 0;
}

static void test_swallowed_lock_wakeup(void **state)
{
	const char *name = uniq("swallow");
	bulkhead_t *bh = shm_make(name, 3, 4, 0);
	struct bhs_att *a = bh->ext;
	struct child c;
	uint64_t t0;

	(void)state;
	c = spawn(set_limit_child, (void *)name); /* fork waits for the lock */
	assert_int_equal(hear(c.rd), 1);
	bhs_lock(a);
	say(c.wr, 0);
	while (!(atomic_load(&a->seg->lock) & (1u << 31)))
		usleep(1000); /* the child sleeps on the lock */
	usleep(30 * 1000);
	t0 = bh_now_ns();
	atomic_store(&a->seg->lock, 0); /* unlocked, the wake-up lost */
	pthread_mutex_unlock(&a->hmu);
	assert_int_equal(hear(c.rd), 0);
	assert_true(bh_now_ns() - t0 < BH_SEC);
	assert_int_equal(reap(&c), 0);
	assert_int_equal(stats_of(bh).limit, 5);
	shm_done(bh, name);
}

/* A release that moves permits between threads, killed half-way. */
static void *take3(void *arg)
{
	return (void *)(intptr_t)bh_try_acquire(arg, 3);
}

static int act_cross_thread(bulkhead_t *bh, struct victim *v, int out, int in)
{
	pthread_t t;
	void *r;

	(void)out;
	(void)in;
	/* this thread's own index and slot first: a fork child inherits its
	 * index only if the test's thread had one, and without one here the
	 * helper's, freed when it exits, would become ours, slot and permits
	 * with it, and the release would need no transfer */
	if (bh_try_acquire(bh, 1) != 0 || bh_release(bh, 1) != 0)
		return 1;
	pthread_create(&t, NULL, take3, bh);
	pthread_join(t, &r);
	if (r)
		return 1;
	return bh_release(bh, v->n);
}

static void test_killed_mid_transfer(void **state)
{
	const char *name = uniq("xfer");
	bulkhead_t *bh = shm_make(name, 4, 4, 0);
	struct victim v = { name, BP_XFER, 1, act_cross_thread, 2 };
	struct child c = stop_at(&v);

	(void)state;
	assert_int_equal(stats_of(bh).in_flight, 3);
	kill_reap(&c);
	await_in_flight(bh, 0, BH_SEC);
	assert_int_equal(stats_of(bh).reclaimed, 3);
	all_permits_back(bh, 4);
	shm_done(bh, name);
}

/* The recoverer itself dies, the word frozen and the lock held. */
static int act_scan(bulkhead_t *bh, struct victim *v, int out, int in)
{
	(void)v;
	(void)out;
	(void)in;
	return bhs_scan_now(bh);
}

static void test_recoverer_killed_mid_rebuild(void **state)
{
	const char *name = uniq("rebuild");
	bulkhead_t *bh = shm_make(name, 4, 4, 0);
	struct victim first = { name, BP_ACQ_CAS, 1, act_try, 2 };
	struct victim second = { name, BP_REBUILD, 1, act_scan, 0 };
	struct child c;
	uint64_t t0;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	c = stop_at(&first);
	kill_reap(&c);           /* dead inside a window: needs a rebuild */
	c = stop_at(&second);    /* which dies with the word frozen */
	assert_true(bhs_word(bh) & S_FROZEN);
	kill_reap(&c);
	t0 = bh_now_ns();
	assert_int_equal(bh_try_acquire(bh, 3), 0); /* waits out the takeover */
	assert_true(bh_now_ns() - t0 < BH_SEC);
	assert_int_equal(stats_of(bh).reclaimed, 2);
	assert_int_equal(bh_release(bh, 4), 0);
	all_permits_back(bh, 4);
	shm_done(bh, name);
}

/* A recoverer killed anywhere in its recovery leaves the counts exact: the
 * next lock holder finishes the recovery's log, or drops it and counts
 * afresh, never both. The recoverer holds one permit itself, so its own
 * death is in the counts too: reclaimed is the first victim's n plus 1,
 * deaths 2, and neither moves on a scan after that. */
static int act_hold_one_and_scan(bulkhead_t *bh, struct victim *v, int out, int in)
{
	(void)v;
	(void)out;
	(void)in;
	if (bh_try_acquire(bh, 1) != 0)
		return 1;
	return bhs_scan_now(bh);
}

/* Holds n on a closed ledger until killed. */
static int holder_main(void *arg, int out, int in)
{
	struct victim *v = arg;
	bulkhead_t *bh;

	(void)in;
	if (bh_shm_open(v->name, NULL, 0, &bh) != 0)
		return 1;
	say(out, bh_try_acquire(bh, v->n));
	pause();
	return 0;
}

/* Attaches afresh: the handle inherited from the test is dropped first, so
 * the segment is mapped and checked again. */

static int attach_main(void *arg, int out, int in)
{
	struct fresh *f = arg;
	bulkhead_t *bh;
	int r;

	(void)out;
	(void)in;
	bh_destroy(f->inherited);
	if ((r = bh_shm_open(f->name, NULL, 0, &bh)) != 0)
		return 100 - r;
	r = bh_try_acquire(bh, 1) || bh_release(bh, 1);
	bh_destroy(bh);
	return r;
}

/* Wait until deaths reaches want (stats_of scans when a scan is due); fails
 * after a second. */
static void await_deaths(bulkhead_t *bh, uint64_t want)
{
	struct bhs_seg *g = bhs_segment(bh, NULL);
	uint64_t t0 = bh_now_ns();

	while (atomic_load(&g->deaths) < want) {
		if (bh_now_ns() - t0 > BH_SEC)
			fail_msg("deaths stays %llu, want %llu",
				 (unsigned long long)atomic_load(&g->deaths),
				 (unsigned long long)want);
		(void)stats_of(bh);
		usleep(1000);
	}
}

/* Holds one permit, then damages the word so that it no longer counts it
 * (nothing but a foreign write leaves a word short of the ledgers), and
 * waits to be killed. */
static int hold_then_damage_main(void *arg, int out, int in)
{
	struct fresh *f = arg;
	bulkhead_t *bh;
	struct bhs_seg *g;
	uint64_t w;

	(void)in;
	bh_destroy(f->inherited);
	if (bh_shm_open(f->name, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 1) != 0)
		return 1;
	g = bhs_segment(bh, NULL);
	w = atomic_load(&g->word);
	atomic_store(&g->word, w_give(w, 1));
	say(out, 0);
	pause();
	return 0;
}

/* The dead process's ledger says it held one; the word counts none. Its
 * reclaim gives back only what the word holds: the queued count and the
 * flags stay as they were. */
static void test_reclaim_of_word_short_of_ledgers(void **state)
{
	const char *name = uniq("shortdead");
	bulkhead_t *bh = shm_make(name, 3, 2, 0);
	struct fresh f = { name, bh };
	struct child c = spawn(hold_then_damage_main, &f);

	(void)state;
	assert_int_equal(hear(c.rd), 0);
	kill_reap(&c);
	await_deaths(bh, 1);
	assert_word_clean(bh, 3);
	shm_done(bh, name);
}

/* The first victim dies holding 2 (inside a window: the scan rebuilds;
 * with closed ledgers: it reclaims); a recoverer holding 1 dies at point;
 * if replay is a point, the next one, replaying that recoverer's log,
 * dies there too, holding 1 unless its take had to wait for the lock the
 * recoverer left with the word frozen. Then the test's own calls recover:
 * every death counted once, reclaimed what they held. */
static void killed_in_turn(int point, int replay, bool window)
{
	const char *name = uniq("relog");
	bulkhead_t *bh = shm_make(name, 4, 4, 0);
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct victim first = { name, BP_ACQ_CAS, 1, act_try, 2 };
	struct victim second = { name, point, 1, act_hold_one_and_scan, 0 };
	struct victim third = { name, replay, 1, act_hold_one_and_scan, 0 };
	uint64_t deaths = replay != BP_NONE ? 3 : 2;
	uint64_t held = 2 + 1 + (replay != BP_NONE && !window);
	struct child c;

	if (window) {
		c = stop_at(&first);
	} else {
		c = spawn(holder_main, &first);
		assert_int_equal(hear(c.rd), 0);
	}
	kill_reap(&c);
	c = stop_at(&second);
	kill_reap(&c);
	if (replay != BP_NONE) {
		c = stop_at(&third);
		kill_reap(&c);
	}
	await_deaths(bh, deaths);
	await_in_flight(bh, 0, BH_SEC);
	assert_int_equal(atomic_load(&g->deaths), deaths);
	assert_int_equal(stats_of(bh).reclaimed, held);
	assert_int_equal(atomic_load(&g->rlog.open), 0);
	assert_true(bhs_scan_now(bh) == false); /* nobody left to find */
	assert_int_equal(atomic_load(&g->deaths), deaths);
	assert_int_equal(stats_of(bh).reclaimed, held);
	assert_int_equal(stats_of(bh).processes, 1);
	c = spawn(attach_main, &(struct fresh){ name, bh }); /* a recovery's word: attachable */
	assert_int_equal(reap(&c), 0);
	all_permits_back(bh, 4);
	shm_done(bh, name);
}

static void recoverer_killed_at(int point, bool window)
{
	killed_in_turn(point, BP_NONE, window);
}

static void test_recoverer_killed_counts_once(void **state)
{
	(void)state;
	recoverer_killed_at(BP_LOGGED, false);    /* logged, nothing given back */
	recoverer_killed_at(BP_COMMITTED, false); /* given back, not counted */
	recoverer_killed_at(BP_CLEARED, false);   /* the dead reclaimed, its generation not moved */
	recoverer_killed_at(BP_COUNTED, false);   /* counted, the log open */
	recoverer_killed_at(BP_REBUILD, true);    /* frozen */
	recoverer_killed_at(BP_CLEARED, true);    /* the first dead cleared, not committed */
	recoverer_killed_at(BP_FREED, true);      /* the dead cleared, not committed */
	recoverer_killed_at(BP_COMMITTED, true);  /* committed, frozen, not counted */
	recoverer_killed_at(BP_COUNTED, true);    /* counted and thawed, the log open */
}

/* And the one who replays a dead recoverer's log dies too, part-way: the
 * next one replays the same log. */
static void test_replayer_killed_counts_once(void **state)
{
	(void)state;
	killed_in_turn(BP_COMMITTED, BP_REPLAYED, false);
	killed_in_turn(BP_COMMITTED, BP_REPLAYED, true);
}

/* A process that detaches gives its permits back and serves the queue
 * holding the internal lock as itself. Nobody may take the lock over from
 * it meanwhile, as from a dead owner: its process slot moves to another
 * generation only after it unlocked. (Freed under the lock, a waiter for
 * the lock took it over and rebuilt while the detacher was still serving,
 * and the detacher's unlock then released the new holder's lock.) */
static int detacher_main(void *arg, int out, int in)
{
	struct fresh *f = arg;
	bulkhead_t *bh;

	bh_destroy(f->inherited);
	if (bh_shm_open(f->name, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 1) != 0)
		return 1;
	say(out, 1);
	if (hear(in) != 1)
		return 2;
	bhs_pause_at(BP_LOCKED, 1, out, in); /* in the dispatch of its detach */
	bh_destroy(bh);
	return 0;
}

struct timed_call {
	bulkhead_t *bh;
	int r;
	_Atomic uint64_t done_ns;
};

static void *wait_one(void *arg)
{
	struct timed_call *t = arg;

	t->r = bh_acquire(t->bh, 1, bh_now_ns() + 10 * BH_SEC);
	atomic_store(&t->done_ns, bh_now_ns());
	return NULL;
}

static void *set_limit_one(void *arg)
{
	struct timed_call *t = arg;

	t->r = bh_set_limit(t->bh, 1);
	atomic_store(&t->done_ns, bh_now_ns());
	return NULL;
}

static void test_detacher_keeps_its_lock(void **state)
{
	const char *name = uniq("detach");
	bulkhead_t *bh = shm_make(name, 1, 4, BH_FAIR);
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct timed_call w = { bh, -12345, 0 }, l = { bh, -12345, 0 };
	struct child d = spawn(detacher_main, &(struct fresh){ name, bh });
	pthread_t wt, lt;
	char point = 0;

	(void)state;
	assert_int_equal(hear(d.rd), 1); /* it holds the permit */
	pthread_create(&wt, NULL, wait_one, &w);
	await_queued(bh, 1);
	say(d.wr, 1);
	assert_int_equal(read(d.rd, &point, 1), 1);
	assert_int_equal(point, BP_LOCKED); /* granting its permit to w, the lock held */
	pthread_create(&lt, NULL, set_limit_one, &l);
	usleep(200 * 1000); /* ten times the lock waiters' 20 ms poll */
	assert_int_equal(atomic_load(&l.done_ns), 0); /* still waiting for the lock */
	assert_int_equal(atomic_load(&g->rebuilds), 0);
	assert_int_equal(write(d.wr, "", 1), 1);
	assert_int_equal(reap(&d), 0);
	pthread_join(lt, NULL);
	pthread_join(wt, NULL);
	assert_int_equal(l.r, 0);
	assert_int_equal(w.r, 0);
	assert_int_equal(atomic_load(&g->rebuilds), 0);
	assert_int_equal(atomic_load(&g->deaths), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(stats_of(bh).processes, 1);
	all_permits_back(bh, 1);
	shm_done(bh, name);
}

/* A process that registers while a rebuild runs was not alive when the
 * rebuild counted the living; it holds nothing (the word is frozen), but it
 * is alive: the rebuild must not free it as if it had died. Freed, it went
 * on using slots that were no longer its own, and a release moving permits
 * between its threads found too few (-EOVERFLOW). */
static int act_scan_paused(bulkhead_t *bh, struct victim *v, int out, int in)
{
	(void)v;
	bhs_pause_at(BP_CENSUS, 1, out, in);
	return bhs_scan_now(bh) ? 0 : 1;
}

static int rebuilder_main(void *arg, int out, int in)
{
	bulkhead_t *bh;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0)
		return 1;
	return act_scan_paused(bh, NULL, out, in);
}

/* Registers at open, then on request takes n on one thread and releases
 * them on another, and reports both results. */
struct hand_over {
	bulkhead_t *bh;
	int r;
};

static void *release_two(void *arg)
{
	struct hand_over *h = arg;

	h->r = bh_release(h->bh, 2);
	return NULL;
}

static int late_main(void *arg, int out, int in)
{
	struct hand_over h = { .r = -12345 };
	pthread_t t;

	if (bh_shm_open(arg, NULL, 0, &h.bh) != 0)
		return 1;
	say(out, (int)getpid());
	if (hear(in) != 1)
		return 2;
	say(out, bh_try_acquire(h.bh, 2));
	pthread_create(&t, NULL, release_two, &h);
	pthread_join(t, NULL);
	say(out, h.r);
	say(out, bh_try_acquire(h.bh, 1));
	pause(); /* holding 1, for the test to kill */
	return 0;
}

static void test_registered_during_rebuild(void **state)
{
	const char *name = uniq("late");
	bulkhead_t *bh = shm_make(name, 4, 4, 0);
	struct victim first = { name, BP_ACQ_CAS, 1, act_try, 2 };
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct bhs_proc *procs = (struct bhs_proc *)((char *)g + g->hdr.off_procs);
	struct child c = stop_at(&first), rb, late;
	char point = 0;
	int pid, live = 0;

	(void)state;
	kill_reap(&c); /* dead inside a window: the scan must rebuild */
	rb = spawn(rebuilder_main, (void *)name);
	assert_int_equal(read(rb.rd, &point, 1), 1);
	assert_int_equal(point, BP_CENSUS);
	late = spawn(late_main, (void *)name);
	pid = hear(late.rd); /* registered while the rebuild waits */
	assert_true(pid > 0);
	assert_int_equal(write(rb.wr, "", 1), 1);
	assert_int_equal(reap(&rb), 0);
	assert_int_equal(atomic_load(&g->deaths), 1); /* the dead one, no other */
	for (uint32_t i = 0; i < g->hdr.nprocs; i++)
		live += atomic_load(&procs[i].state) != PS_FREE &&
			atomic_load(&procs[i].pid) == pid;
	assert_int_equal(live, 1);
	say(late.wr, 1);
	assert_int_equal(hear(late.rd), 0);  /* took 2 */
	assert_int_equal(hear(late.rd), 0);  /* gave them back from another thread */
	assert_int_equal(hear(late.rd), 0);  /* holds 1 */
	assert_int_equal(stats_of(bh).in_flight, 1);
	kill_reap(&late);
	await_in_flight(bh, 0, BH_SEC);
	assert_int_equal(stats_of(bh).reclaimed, 2 + 1);
	all_permits_back(bh, 4);
	shm_done(bh, name);
}

/* A rebuild counts the dead in deaths only after their permits are in
 * reclaimed, so that a reader who sees deaths move (acquire) finds them
 * there. Paused after the dead are freed, before either count moves,
 * neither has moved; counted the other way round, deaths had. */
static int freed_rebuilder_main(void *arg, int out, int in)
{
	bulkhead_t *bh;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0)
		return 1;
	bhs_pause_at(BP_FREED, 1, out, in);
	return bhs_scan_now(bh) ? 0 : 1;
}

static void test_rebuild_counts_deaths_after_permits(void **state)
{
	const char *name = uniq("order");
	bulkhead_t *bh = shm_make(name, 4, 4, 0);
	struct victim first = { name, BP_ACQ_CAS, 1, act_try, 2 };
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct child c = stop_at(&first), rb;
	char point = 0;

	(void)state;
	kill_reap(&c); /* dead inside a window: the scan must rebuild */
	rb = spawn(freed_rebuilder_main, (void *)name);
	assert_int_equal(read(rb.rd, &point, 1), 1);
	assert_int_equal(point, BP_FREED);
	assert_int_equal(atomic_load(&g->deaths), 0);
	assert_int_equal(atomic_load(&g->reclaimed), 0);
	assert_int_equal(write(rb.wr, "", 1), 1);
	assert_int_equal(reap(&rb), 0);
	assert_int_equal(atomic_load(&g->deaths), 1);
	assert_int_equal(atomic_load(&g->reclaimed), 2);
	all_permits_back(bh, 4);
	shm_done(bh, name);
}

/* A waiter whose deadline passed leaves the queue under the lock; a
 * rebuild that runs after it dropped the lock must not find its node still
 * in a queued state, or the census queues it again: the word counts a
 * waiter nobody is, and the next release hands its permits to that node,
 * granted to a thread that has gone (lost, or reclaimed when its process
 * dies, as stress_shm once saw: reclaimed more than the dead held). */
static int leaving_waiter(void *arg, int out, int in)
{
	bulkhead_t *bh;
	int r;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0)
		return 1;
	bhs_pause_at(BP_LEFT, 1, out, in);
	r = bh_acquire(bh, 2, bh_now_ns() + 50 * BH_MSEC); /* 1 free: queues */
	say(out, r);
	return hear(in) == 1 ? 0 : 3;
}

static void test_rebuild_after_waiter_left(void **state)
{
	const char *name = uniq("left");
	bulkhead_t *bh = shm_make(name, 2, 4, BH_FAIR);
	struct victim first = { name, BP_ACQ_CAS, 1, act_try, 1 };
	struct child w, c;
	char point = 0;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	w = spawn(leaving_waiter, (void *)name);
	assert_int_equal(read(w.rd, &point, 1), 1);
	assert_int_equal(point, BP_LEFT); /* timed out, out of the queue, unlocked */
	assert_int_equal(stats_of(bh).queued, 0);
	c = stop_at(&first);
	kill_reap(&c); /* dead inside a window: the scan must rebuild */
	assert_true(bhs_scan_now(bh));
	assert_true(atomic_load(&((struct bhs_seg *)bhs_segment(bh, NULL))->rebuilds) >= 1);
	assert_int_equal(stats_of(bh).queued, 0); /* not queued again */
	assert_int_equal(stats_of(bh).reclaimed, 1);
	assert_int_equal(write(w.wr, "", 1), 1);
	assert_int_equal(hear(w.rd), -ETIMEDOUT);
	assert_int_equal(bh_release(bh, 1), 0); /* granted to nobody? */
	assert_int_equal(stats_of(bh).in_flight, 0);
	say(w.wr, 1);
	assert_int_equal(reap(&w), 0);
	all_permits_back(bh, 2);
	shm_done(bh, name);
}

/* The same for a slow take whose first CAS would have queued it and
 * failed (the word moved), and whose retry took the permit: its node must
 * not be left WAITING, unqueued, for a rebuild to queue again. */
static int retaking_waiter(void *arg, int out, int in)
{
	bulkhead_t *bh;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0)
		return 1;
	bhs_pause_at(BP_ADMIT, 1, out, in);
	say(out, bh_acquire(bh, 1, bh_now_ns() + 10 * BH_SEC)); /* none free: queues */
	if (hear(in) != 1)
		return 3;
	return bh_release(bh, 1) == 0 ? 0 : 4;
}

static void test_rebuild_after_admit_retook(void **state)
{
	const char *name = uniq("retook");
	bulkhead_t *bh = shm_make(name, 3, 4, BH_FAIR);
	struct victim first = { name, BP_ACQ_CAS, 1, act_try, 1 };
	struct child w, c;
	char point = 0;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 3), 0);
	w = spawn(retaking_waiter, (void *)name);
	assert_int_equal(read(w.rd, &point, 1), 1);
	assert_int_equal(point, BP_ADMIT); /* about to queue, under the lock */
	assert_int_equal(bh_release(bh, 1), 0); /* the word moves: its CAS fails */
	assert_int_equal(write(w.wr, "", 1), 1);
	assert_int_equal(hear(w.rd), 0); /* the retry took it */
	assert_int_equal(stats_of(bh).queued, 0);
	assert_int_equal(bh_release(bh, 1), 0); /* one free, for the victim */
	c = stop_at(&first);
	kill_reap(&c); /* dead inside a window: the scan must rebuild */
	assert_true(bhs_scan_now(bh));
	assert_true(atomic_load(&((struct bhs_seg *)bhs_segment(bh, NULL))->rebuilds) >= 1);
	assert_int_equal(stats_of(bh).queued, 0); /* no waiter made up */
	assert_int_equal(stats_of(bh).reclaimed, 1);
	assert_int_equal(stats_of(bh).in_flight, 2);
	say(w.wr, 1);
	assert_int_equal(reap(&w), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	all_permits_back(bh, 3);
	shm_done(bh, name);
}

/* A dead process looks alive for an instant to a rebuild while a
 * registrant that saw its slot free before it was taken holds the slot's
 * liveness lock (claim_proc locks, then finds the slot taken, unlocks).
 * The rebuild had already left the dead one out of its sums; had it then
 * kept the slot because the dead one looked alive, the next scan would
 * reclaim its closed ledgers a second time, permits made from nothing. */
static int lock_dier(void *arg, int out, int in)
{
	bulkhead_t *bh;

	(void)in;
	if (bh_shm_open(arg, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 2) != 0)
		return 1;
	bhs_crash_at(BP_HOLD_LOCK, 1, out); /* dies holding 2 and the lock */
	bh_set_limit(bh, 4);
	return 7;
}

static int slow_registrant(void *arg, int out, int in)
{
	bulkhead_t *bh;
	int r;

	bhs_pause_at(BP_PROC_FREE, 1, out, in);
	r = bh_shm_open(arg, NULL, 0, &bh);
	say(out, r);
	return r == 0 && hear(in) == 1 ? 0 : 3;
}

static int takeover_main(void *arg, int out, int in)
{
	bulkhead_t *bh;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0)
		return 1;
	bhs_pause_at(BP_CENSUS, 1, out, in);
	bhs_scan_now(bh); /* takes the dead owner's lock over: a rebuild */
	return 0;
}

static void test_dead_looks_alive_during_rebuild(void **state)
{
	const char *name = uniq("blink");
	bulkhead_t *bh = shm_make(name, 4, 4, 0);
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct bhs_proc *procs = (struct bhs_proc *)((char *)g + g->hdr.off_procs);
	struct child reg, dier, rb;
	char point = 0, next = BP_PROC_LOCKED;

	(void)state;
	reg = spawn(slow_registrant, (void *)name); /* sees slot 1 free */
	assert_int_equal(read(reg.rd, &point, 1), 1);
	assert_int_equal(point, BP_PROC_FREE);
	dier = spawn(lock_dier, (void *)name); /* takes slot 1 */
	assert_int_equal(read(dier.rd, &point, 1), 1);
	assert_int_equal(point, BP_HOLD_LOCK);
	assert_int_equal(atomic_load(&procs[1].pid), dier.pid);
	kill_reap(&dier);
	rb = spawn(takeover_main, (void *)name);
	assert_int_equal(read(rb.rd, &point, 1), 1);
	assert_int_equal(point, BP_CENSUS); /* the dead one is not counted */
	assert_int_equal(write(reg.wr, &next, 1), 1);
	assert_int_equal(read(reg.rd, &point, 1), 1);
	assert_int_equal(point, BP_PROC_LOCKED); /* slot 1's lock: held */
	assert_int_equal(write(rb.wr, "", 1), 1);
	assert_int_equal(reap(&rb), 0);
	assert_int_equal(atomic_load(&g->deaths), 1);
	assert_int_equal(atomic_load(&procs[1].state), PS_FREE);
	assert_int_equal(write(reg.wr, "", 1), 1);
	assert_int_equal(hear(reg.rd), 0); /* it registered */
	say(reg.wr, 1);
	assert_int_equal(reap(&reg), 0);
	bhs_scan_now(bh); /* the two helpers exited, holding nothing */
	assert_int_equal(atomic_load(&g->deaths), 3);
	assert_int_equal(stats_of(bh).reclaimed, 2);
	all_permits_back(bh, 4);
	shm_done(bh, name);
}

/* A look at a taken process slot races the process there detaching and a
 * new one registering into it: the look read the slot taken, then the
 * detacher freed it and closed its descriptor, then the probe found the
 * liveness lock free. The detacher is not dead, and the newcomer that took
 * the slot right after the probe is not either: reclaimed as the slot's
 * dead owner, its permit went back to the word (one more than the limit)
 * and its own release failed with -EOVERFLOW. */
static int quiet_detacher(void *arg, int out, int in)
{
	struct fresh *f = arg;
	bulkhead_t *bh;

	bh_destroy(f->inherited); /* attach afresh: our own detach */
	if (bh_shm_open(f->name, NULL, 0, &bh) != 0)
		return 1;
	say(out, 1);
	if (hear(in) != 1)
		return 2;
	bhs_pause_at(BP_DETACHED, 1, out, in);
	bh_destroy(bh);
	return 0;
}

static int idle_main(void *arg, int out, int in)
{
	struct fresh *f = arg;
	bulkhead_t *bh;

	(void)in;
	bh_destroy(f->inherited);
	if (bh_shm_open(f->name, NULL, 0, &bh) != 0)
		return 1;
	say(out, 1);
	pause();
	return 0;
}

static int probing_scanner(void *arg, int out, int in)
{
	struct fresh *f = arg;
	bulkhead_t *bh;

	bh_destroy(f->inherited); /* attach afresh: our own detach */
	if (bh_shm_open(f->name, NULL, 0, &bh) != 0)
		return 1;
	/* Looks 1-3: the unlocked pre-scan of slots 0 (the test), 1 (the
	 * detacher) and 2 (a dead one: it stops there and locks); look 4:
	 * slot 0 under the lock; look 5: slot 1 under the lock. Its own
	 * slot (3) is never probed. */
	bhs_pause_at(BP_PROBE, 5, out, in);
	bhs_scan_now(bh);
	bh_destroy(bh);
	return 0;
}

static int late_taker(void *arg, int out, int in)
{
	struct fresh *f = arg;
	bulkhead_t *bh;

	bh_destroy(f->inherited); /* attach afresh: our own detach */
	if (bh_shm_open(f->name, NULL, 0, &bh) != 0)
		return 1;
	say(out, bh_try_acquire(bh, 1));
	if (hear(in) != 1)
		return 2;
	say(out, bh_release(bh, 1));
	bh_destroy(bh);
	return 0;
}

static void test_probe_races_detach_and_register(void **state)
{
	const char *name = uniq("detreg");
	bulkhead_t *bh = shm_make(name, 4, 4, 0);
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct bhs_proc *procs = (struct bhs_proc *)((char *)g + g->hdr.off_procs);
	struct fresh f = { name, bh };
	struct child d, x, s, n;
	char point = 0, next = BP_PROBED;

	(void)state;
	d = spawn(quiet_detacher, &f);
	assert_int_equal(hear(d.rd), 1);
	assert_int_equal(atomic_load(&procs[1].pid), d.pid);
	x = spawn(idle_main, &f); /* slot 2, then dead, not yet found */
	assert_int_equal(hear(x.rd), 1);
	kill_reap(&x);
	say(d.wr, 1);
	assert_int_equal(read(d.rd, &point, 1), 1);
	assert_int_equal(point, BP_DETACHED); /* gave back and unlocked, slot 1 taken */
	s = spawn(probing_scanner, &f);
	assert_int_equal(read(s.rd, &point, 1), 1);
	assert_int_equal(point, BP_PROBE); /* holds the lock, read slot 1 taken */
	assert_int_equal(atomic_load(&procs[3].pid), s.pid);
	assert_int_equal(write(d.wr, "", 1), 1);
	assert_int_equal(reap(&d), 0); /* detached: slot 1 free, descriptor closed */
	assert_int_equal(write(s.wr, &next, 1), 1);
	assert_int_equal(read(s.rd, &point, 1), 1);
	assert_int_equal(point, BP_PROBED); /* found slot 1's lock free */
	n = spawn(late_taker, &f);
	assert_int_equal(hear(n.rd), 0); /* registered into slot 1, holds 1 */
	assert_int_equal(atomic_load(&procs[1].pid), n.pid);
	assert_int_equal(write(s.wr, "", 1), 1);
	assert_int_equal(reap(&s), 0);
	assert_int_equal(atomic_load(&g->deaths), 1); /* x; not d, not n */
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(bh_try_acquire(bh, 4), -EBUSY);
	say(n.wr, 1);
	assert_int_equal(hear(n.rd), 0);
	assert_int_equal(reap(&n), 0);
	assert_int_equal(atomic_load(&g->deaths), 1);
	assert_int_equal(stats_of(bh).reclaimed, 0);
	all_permits_back(bh, 4);
	shm_done(bh, name);
}

/* A survivor whose waits are all shorter than the 100 ms poll still looks
 * for the dead, when a wait reaches its deadline: the dead holder's permit
 * comes back to it. Without that look its waits all ended in -ETIMEDOUT
 * and nothing else looked. */
static int take_one_and_hang(void *arg, int out, int in)
{
	struct fresh *f = arg;
	bulkhead_t *bh;

	(void)in;
	bh_destroy(f->inherited);
	if (bh_shm_open(f->name, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 1) != 0)
		return 1;
	say(out, 1);
	pause();
	return 0;
}

static void short_wait_after_death(uint32_t flags)
{
	const char *name = uniq("short");
	bulkhead_t *bh = shm_make(name, 1, 4, flags);
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct fresh f = { name, bh };
	struct child c = spawn(take_one_and_hang, &f);

	assert_int_equal(hear(c.rd), 1);
	kill_reap(&c); /* died holding the only permit */
	/* The next look is due 20 ms from now: not when the wait starts, but
	 * before its 50 ms deadline (and never at a poll: 50 ms < 100 ms). */
	atomic_store(&g->scan_ns, bh_now_ns() - 80 * BH_MSEC);
	assert_int_equal(bh_acquire(bh, 1, bh_now_ns() + 50 * BH_MSEC), 0);
	assert_int_equal(atomic_load(&g->deaths), 1);
	assert_int_equal(stats_of(bh).reclaimed, 1);
	assert_int_equal(stats_of(bh).timed_out, 0);
	assert_int_equal(bh_release(bh, 1), 0);
	all_permits_back(bh, 1);
	shm_done(bh, name);
}

/* Fair: the look grants the head; unfair: it wakes the head to compete. */
static void test_short_wait_looks_for_the_dead(void **state)
{
	(void)state;
	short_wait_after_death(BH_FAIR);
	short_wait_after_death(0);
}

/* A refused attach closes its descriptor once. Closed a second time, the
 * number could by then be another thread's file: the library closed that.
 * The close() wrap plays the other thread: right after the library's
 * first close of the segment's descriptor it opens /dev/null, which gets
 * the same number. */
int __real_close(int fd);
int __wrap_close(int fd);
static _Atomic int close_watch;
static int other_fd = -1;

int __wrap_close(int fd)
{
	int r = __real_close(fd);

	if (atomic_load(&close_watch) && r == 0 && other_fd < 0) {
		atomic_store(&close_watch, 0);
		other_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* the other thread's */
		assert_int_equal(other_fd, fd);
	}
	return r;
}

static void test_refused_attach_closes_once(void **state)
{
	const char *name = uniq("dclose");
	bulkhead_t *bh = shm_make(name, 3, 2, 0), *b2 = NULL;
	char path[512];
	size_t len;
	unsigned char *img;
	struct bhs_seg *g;
	int fd;

	(void)state;
	bhs_segment(bh, &len);
	img = malloc(len);
	assert_non_null(img);
	memcpy(img, bhs_segment(bh, NULL), len);
	shm_done(bh, name);
	/* a bit no state word has: the mapping's check refuses it */
	g = (struct bhs_seg *)(void *)img;
	atomic_store(&g->word, atomic_load(&g->word) | (1ull << 59));
	path_for(name, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, img, len), (ssize_t)len);
	assert_int_equal(__real_close(fd), 0);
	free(img);
	other_fd = -1;
	atomic_store(&close_watch, 1);
	assert_int_equal(bh_shm_open(name, NULL, 0, &b2), -EBADMSG);
	atomic_store(&close_watch, 0);
	assert_true(other_fd >= 0);
	assert_true(fcntl(other_fd, F_GETFD) >= 0); /* still open: not closed for it */
	assert_int_equal(__real_close(other_fd), 0);
	assert_int_equal(bh_shm_unlink(name), 0);
}

/* A segment cut short after an attacher read its header, before the
 * mapping: mmap does not look at the file's size, and reading the mapping
 * past the file's end is a SIGBUS. The attacher pauses between the two
 * (BP_ATTACH_READ); the test cuts the file to one page; the open must be
 * refused with -EBADMSG and the attacher live on. */
static int attach_after_cut(void *arg, int out, int in)
{
	bulkhead_t *bh = NULL;
	int r;

	bhs_pause_at(BP_ATTACH_READ, 1, out, in);
	r = bh_shm_open(arg, NULL, 0, &bh);
	say(out, r);
	if (r == 0)
		bh_destroy(bh);
	return 0;
}

static void test_attach_refuses_file_cut_before_mapping(void **state)
{
	const char *name = uniq("cut");
	struct child c;
	char path[512], point = 0, go = 0;
	int fd, r;

	(void)state;
	bh_destroy(shm_make(name, 3, 2, 0)); /* the file stays; we map nothing */
	c = spawn(attach_after_cut, (void *)name);
	assert_int_equal(read(c.rd, &point, 1), 1);
	assert_int_equal(point, BP_ATTACH_READ);
	path_for(name, path, sizeof(path));
	fd = open(path, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	assert_int_equal(__real_close(fd), 0);
	assert_int_equal(write(c.wr, &go, 1), 1);
	r = hear(c.rd);
	assert_int_equal(reap(&c), 0); /* not a SIGBUS */
	assert_int_equal(r, -EBADMSG);
	assert_int_equal(bh_shm_unlink(name), 0);
}

/* The controller role names its holder by slot and a 15-bit generation.
 * A dead holder's (or a detached one's) value stayed in the role word, and
 * after 32767 more attach/detach cycles of that slot its next process had
 * the same value: the role looked held by a living process, and nobody
 * could take it. The role now goes with the slot when it is cleared. */
static int role_taker(void *arg, int out, int in)
{
	struct fresh *f = arg;
	bulkhead_t *bh;

	bh_destroy(f->inherited);
	if (bh_shm_open(f->name, NULL, 0, &bh) != 0)
		return 1;
	say(out, bhs_role_take(bh));
	if (hear(in) != 1)
		return 2;
	bh_destroy(bh); /* detaches, role and all */
	say(out, 0);
	return 0;
}

static void test_role_goes_with_its_slot(void **state)
{
	const char *name = uniq("role");
	bulkhead_t *bh = shm_make(name, 4, 4, 0);
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct fresh f = { name, bh };
	struct child y;

	(void)state;
	y = spawn(role_taker, &f); /* dies holding the role */
	assert_int_equal(hear(y.rd), 0);
	assert_int_equal(atomic_load(&g->role) & 0xffffu, 2); /* slot 1 */
	kill_reap(&y);
	assert_true(bhs_scan_now(bh));
	assert_int_equal(atomic_load(&g->deaths), 1);
	assert_int_equal(atomic_load(&g->role), 0);
	y = spawn(role_taker, &f); /* detaches holding the role */
	assert_int_equal(hear(y.rd), 0);
	assert_int_equal(atomic_load(&g->role) & 0xffffu, 2);
	say(y.wr, 1);
	assert_int_equal(hear(y.rd), 0);
	assert_int_equal(reap(&y), 0);
	assert_int_equal(atomic_load(&g->role), 0);
	assert_int_equal(bhs_role_take(bh), 0);
	bhs_role_drop(bh);
	shm_done(bh, name);
}

/* Dead processes' slots come back to an attacher that finds none free.
 * They were recovered only when a registered process was refused or
 * waited: killing idle workers leaked their slots, and once every slot's
 * holder was dead no process could attach again (-ENOSPC). */
static int attach_take_hang(void *arg, int out, int in)
{
	struct bh_config cfg = { .max_concurrent = 2, .queue_capacity = 2 };
	const char *name = arg;
	bulkhead_t *bh;
	int r;

	(void)in;
	r = bh_shm_open(name, &cfg, BH_SHM_CREATE, &bh);
	if (r == 0)
		r = bh_try_acquire(bh, 1);
	say(out, r);
	pause();
	return 0;
}

static void test_attach_recovers_dead_slots(void **state)
{
	const char *name = uniq("full");
	struct child c1, c2, d;
	bulkhead_t *bh;
	struct bhs_seg *g;
	struct bhs_proc *procs;

	(void)state;
	bhs_test_geometry(2, 0, 0); /* two process slots */
	c1 = spawn(attach_take_hang, (void *)name); /* creates; slot 0, holds 1 */
	assert_int_equal(hear(c1.rd), 0);
	c2 = spawn(attach_take_hang, (void *)name); /* slot 1, holds 1 */
	assert_int_equal(hear(c2.rd), 0);
	bhs_test_geometry(0, 0, 0);
	kill_reap(&c1);
	kill_reap(&c2);
	/* every slot's holder is dead, nobody is left to look */
	assert_int_equal(bh_shm_open(name, NULL, 0, &bh), 0);
	g = bhs_segment(bh, NULL);
	procs = (struct bhs_proc *)((char *)g + g->hdr.off_procs);
	assert_int_equal(atomic_load(&g->deaths), 2);
	assert_int_equal(stats_of(bh).reclaimed, 2);
	assert_int_equal(atomic_load(&procs[2].state), PS_FREE); /* the recovery slot */
	assert_int_equal(stats_of(bh).processes, 1);
	/* an idle worker killed while we live: its slot comes back too */
	d = spawn(attach_take_hang, (void *)name);
	assert_int_equal(hear(d.rd), 0);
	kill_reap(&d);
	d = spawn(attach_take_hang, (void *)name);
	assert_int_equal(hear(d.rd), 0);
	assert_int_equal(atomic_load(&g->deaths), 3);
	assert_int_equal(stats_of(bh).reclaimed, 3);
	kill_reap(&d);
	assert_true(bhs_scan_now(bh));
	assert_int_equal(atomic_load(&g->deaths), 4);
	all_permits_back(bh, 2);
	shm_done(bh, name);
}

/* An attacher killed while it recovers, holding the internal lock under
 * the recovery slot's name: the next attacher takes the slot with a new
 * generation, takes the lock over from the dead one and recovers all. */
static int attach_die_recovering(void *arg, int out, int in)
{
	bulkhead_t *bh;

	(void)in;
	bhs_crash_at(BP_HOLD_LOCK, 1, out);
	bh_shm_open(arg, NULL, 0, &bh);
	return 7;
}

static void test_attacher_killed_recovering(void **state)
{
	const char *name = uniq("fullk");
	struct child c1, c2, r;
	bulkhead_t *bh;
	struct bhs_seg *g;
	char point = 0;

	(void)state;
	bhs_test_geometry(2, 0, 0);
	c1 = spawn(attach_take_hang, (void *)name);
	assert_int_equal(hear(c1.rd), 0);
	c2 = spawn(attach_take_hang, (void *)name);
	assert_int_equal(hear(c2.rd), 0);
	bhs_test_geometry(0, 0, 0);
	kill_reap(&c1);
	kill_reap(&c2);
	r = spawn(attach_die_recovering, (void *)name);
	assert_int_equal(read(r.rd, &point, 1), 1);
	assert_int_equal(point, BP_HOLD_LOCK); /* holds the lock as the recovery slot */
	kill_reap(&r);
	assert_int_equal(bh_shm_open(name, NULL, 0, &bh), 0);
	g = bhs_segment(bh, NULL);
	assert_int_equal(atomic_load(&g->deaths), 2);
	assert_int_equal(stats_of(bh).reclaimed, 2);
	assert_int_equal(stats_of(bh).processes, 1);
	all_permits_back(bh, 2);
	shm_done(bh, name);
}

/* An async grant claimed by the owner's agent, which dies before its
 * ledger records it. */
static void noop_cb(struct bh_async *node, int result)
{
	(void)node;
	(void)result;
}

static int act_async(bulkhead_t *bh, struct victim *v, int out, int in)
{
	static struct bh_async node;

	(void)out;
	(void)in;
	bh_acquire_async(bh, &node, v->n, noop_cb, NULL);
	pause();
	return 0;
}

static void test_agent_killed_mid_delivery(void **state)
{
	const char *name = uniq("agent");
	bulkhead_t *bh = shm_make(name, 2, 4, 0);
	struct victim v = { name, BP_CLAIM, 1, act_async, 2 };
	struct child c;
	char point;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	c = spawn(victim_main, &v);
	await_queued(bh, 1);
	assert_int_equal(bh_release(bh, 2), 0);
	assert_int_equal(read(c.rd, &point, 1), 1);
	assert_int_equal(point, BP_CLAIM);
	kill_reap(&c);
	await_in_flight(bh, 0, BH_SEC);
	all_permits_back(bh, 2);
	shm_done(bh, name);
}

/* A fork child is nobody until its first call registers it; its lock
 * value is still its parent's. Cancelling a node it inherited must not
 * take the internal lock under that value: the parent, finding its own
 * value in the lock word that it does not hold, reads it as damage and
 * takes the lock over while the child is inside -- two holders. */
static struct bh_async inherited;
static _Atomic int inherited_result = 1;

static void record_cb(struct bh_async *node, int result)
{
	(void)node;
	atomic_store(&inherited_result, result);
}

static int cancel_inherited(void *arg, int out, int in)
{
	bulkhead_t *bh = arg;
	char done = 'r';
	int r;

	bhs_pause_at(BP_HOLD_LOCK, 1, out, in);
	r = bh_cancel_async(bh, &inherited); /* not queued by this process */
	if (write(out, &done, 1) != 1)
		return 2;
	say(out, r);
	return 0;
}

static void test_fork_child_cancels_inherited_node(void **state)
{
	const char *name = uniq("forkcancel");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct child c;
	char point = 0;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire_async(bh, &inherited, 1, record_cb, NULL), 1);
	c = spawn(cancel_inherited, bh);
	assert_int_equal(read(c.rd, &point, 1), 1);
	if (point == BP_HOLD_LOCK) {
		kill_reap(&c);
		fail_msg("a child that is nobody yet took the lock under its parent's value");
	}
	assert_int_equal(point, 'r');
	assert_int_equal(hear(c.rd), 0);
	assert_int_equal(reap(&c), 0);
	assert_int_equal(atomic_load(&((struct bhs_seg *)bhs_segment(bh, NULL))->rebuilds), 0);
	assert_int_equal(stats_of(bh).queued, 1); /* still the parent's */
	assert_int_equal(bh_release(bh, 1), 0);
	while (atomic_load(&inherited_result) == 1)
		sched_yield();
	assert_int_equal(atomic_load(&inherited_result), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	all_permits_back(bh, 1);
	shm_done(bh, name);
}

/* A process stopped (SIGSTOP) keeps what it holds: only death reclaims. */
static int holder(void *arg, int out, int in)
{
	bulkhead_t *bh;

	(void)in;
	if (bh_shm_open(arg, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 2) != 0)
		return 1;
	say(out, 1);
	pause();
	return 0;
}

/* The agent looks at an async node, then at its state. In between, that
 * node is cancelled and its queue node taken by a new async acquire, which
 * is granted: the grant is the new caller's, and the cancelled one's
 * callback must never run. All in one child, whose agent pauses at
 * BP_AGENT_SEEN while its main thread does the rest. */
static _Atomic int reuse_result[2] = { 99, 99 }; /* x's, y's callback */

static void record_reuse(struct bh_async *node, int result)
{
	atomic_store(&reuse_result[(intptr_t)node->data], result);
}

static int reuse_main(void *arg, int out, int in)
{
	struct bh_async x, y;
	bulkhead_t *bh;
	int up[2], down[2];
	char c = 0;

	(void)out;
	(void)in;
	if (bh_shm_open(arg, NULL, 0, &bh) != 0 || pipe(up) != 0 || pipe(down) != 0)
		return 1;
	if (bh_try_acquire(bh, 1) != 0) /* the only permit: the async calls queue */
		return 2;
	bhs_pause_at(BP_AGENT_SEEN, 1, up[1], down[0]);
	if (bh_acquire_async(bh, &x, 1, record_reuse, (void *)0) != 1)
		return 3;
	if (read(up[0], &c, 1) != 1 || c != BP_AGENT_SEEN)
		return 4; /* the agent has seen x, not yet its state */
	if (bh_cancel_async(bh, &x) != 1)
		return 5;
	if (bh_acquire_async(bh, &y, 1, record_reuse, (void *)1) != 1)
		return 6;
	if (x.link.next != y.link.next)
		return 7; /* not the same queue node: nothing tested */
	if (bh_release(bh, 1) != 0) /* granted to y */
		return 8;
	if (write(down[1], "", 1) != 1) /* the agent goes on */
		return 9;
	for (int i = 0; i < 5000 && atomic_load(&reuse_result[1]) == 99; i++)
		usleep(1000);
	if (atomic_load(&reuse_result[0]) != 99)
		return 10; /* the cancelled caller was called back */
	if (atomic_load(&reuse_result[1]) != 0)
		return 11; /* the granted one never was */
	return bh_release(bh, 1) == 0 ? 0 : 12;
}

static void test_agent_delivers_to_reused_node(void **state)
{
	const char *name = uniq("reuse");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct child c = spawn(reuse_main, (void *)name);

	(void)state;
	assert_int_equal(reap(&c), 0);
	all_permits_back(bh, 1);
	shm_done(bh, name);
}

/* As above, but the queue node of the cancelled x is taken by another
 * process's async acquire, which is granted: the paused agent of the
 * process that cancelled x must leave that grant alone (it is not its
 * node, and it has no caller for it). */
static _Atomic int steal_result = 99;

static void record_steal(struct bh_async *node, int result)
{
	(void)node;
	atomic_store(&steal_result, result);
}

static int steal_thief(void *arg, int out, int in)
{
	struct bh_async x;
	bulkhead_t *bh;
	int up[2], down[2];
	char c = 0;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0 || pipe(up) != 0 || pipe(down) != 0)
		return 1;
	if (bh_try_acquire(bh, 1) != 0)
		return 2;
	bhs_pause_at(BP_AGENT_SEEN, 1, up[1], down[0]);
	if (bh_acquire_async(bh, &x, 1, record_steal, NULL) != 1)
		return 3;
	if (read(up[0], &c, 1) != 1 || c != BP_AGENT_SEEN)
		return 4; /* our agent has seen x, not yet its state */
	if (bh_cancel_async(bh, &x) != 1)
		return 5;
	say(out, (int)(uintptr_t)x.link.next);
	if (hear(in) != 1) /* the other process queued on x's node */
		return 6;
	if (bh_release(bh, 1) != 0) /* granted to the other process's node */
		return 7;
	if (write(down[1], "", 1) != 1) /* our agent goes on */
		return 8;
	usleep(300 * 1000);
	if (atomic_load(&steal_result) != 99)
		return 9; /* the cancelled x was called back */
	bh_destroy(bh);
	return 0;
}

static int steal_victim(void *arg, int out, int in)
{
	struct bh_async z;
	bulkhead_t *bh;
	int up[2], down[2];
	char c = 0;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0 || pipe(up) != 0 || pipe(down) != 0)
		return 1;
	bhs_pause_at(BP_AGENT_SEEN, 1, up[1], down[0]);
	if (hear(in) != 1)
		return 2;
	if (bh_acquire_async(bh, &z, 1, record_steal, NULL) != 1)
		return 3;
	if (read(up[0], &c, 1) != 1 || c != BP_AGENT_SEEN)
		return 4;
	say(out, (int)(uintptr_t)z.link.next);
	if (hear(in) != 2)
		return 5;
	if (write(down[1], "", 1) != 1)
		return 6;
	for (int i = 0; i < 3000 && atomic_load(&steal_result) == 99; i++)
		usleep(1000);
	if (atomic_load(&steal_result) != 0)
		return 7; /* our grant was never delivered */
	if (bh_release(bh, 1) != 0)
		return 8;
	bh_destroy(bh);
	return 0;
}

static void test_agent_leaves_other_process_node(void **state)
{
	const char *name = uniq("steal");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct child a = spawn(steal_thief, (void *)name);
	struct child b = spawn(steal_victim, (void *)name);
	int xq, zq;

	(void)state;
	xq = hear(a.rd);
	say(b.wr, 1);
	zq = hear(b.rd);
	assert_int_equal(xq, zq); /* the same queue node, or nothing is tested */
	say(a.wr, 1);
	assert_int_equal(reap(&a), 0);
	say(b.wr, 2);
	assert_int_equal(reap(&b), 0);
	all_permits_back(bh, 1);
	shm_done(bh, name);
}

static void test_stopped_process_keeps_permits(void **state)
{
	const char *name = uniq("stopped");
	bulkhead_t *bh = shm_make(name, 2, 4, 0);
	struct child c = spawn(holder, (void *)name);

	(void)state;
	assert_int_equal(hear(c.rd), 1);
	kill(c.pid, SIGSTOP);
	assert_int_equal(bh_acquire(bh, 1, bh_now_ns() + 400 * BH_MSEC), -ETIMEDOUT);
	bhs_scan_now(bh);
	assert_int_equal(stats_of(bh).in_flight, 2);
	kill_reap(&c);
	assert_int_equal(bh_acquire(bh, 2, bh_now_ns() + BH_SEC), 0);
	assert_int_equal(bh_release(bh, 2), 0);
	all_permits_back(bh, 2);
	shm_done(bh, name);
}

/* A process that changes the limit, or closes, dies after the word moved
 * and before it failed the waiters the change rules out (above the new
 * limit; all of them on close). The rebuild after the takeover must fail
 * them: left queued, a head above the limit is never served and blocks
 * everyone behind it (strict head of line), and waiters on a closed
 * bulkhead wait for permits that no one may grant. */
static int deadline_child(void *arg, int out, int in)
{
	struct victim *v = arg;
	bulkhead_t *bh;
	int r;

	if (bh_shm_open(v->name, NULL, 0, &bh) != 0)
		return 1;
	say(out, 1);
	r = bh_acquire(bh, v->n, bh_now_ns() + 3 * BH_SEC);
	say(out, r);
	hear(in);
	if (r == 0)
		bh_release(bh, v->n);
	return 0;
}

static int act_close(bulkhead_t *bh, struct victim *v, int out, int in)
{
	(void)v;
	(void)out;
	(void)in;
	return bh_close(bh);
}

static void test_killed_mid_set_limit(void **state)
{
	const char *name = uniq("limit-waiters");
	bulkhead_t *bh = shm_make(name, 3, 4, BH_FAIR);
	struct victim wv = { name, BP_NONE, 0, NULL, 3 };
	struct victim v = { name, BP_LIMITED, 1, act_set_limit, 2 };
	struct child w, c;
	uint64_t t0;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	w = spawn(deadline_child, &wv);
	assert_int_equal(hear(w.rd), 1);
	await_queued(bh, 1); /* wants 3, 2 free */
	c = stop_at(&v);     /* the limit is 2, the waiter for 3 still queued */
	kill_reap(&c);
	t0 = bh_now_ns();
	assert_int_equal(hear(w.rd), -EINVAL); /* failed, as set_limit would have */
	assert_true(bh_now_ns() - t0 < BH_SEC);
	say(w.wr, 0);
	assert_int_equal(reap(&w), 0);
	assert_int_equal(stats_of(bh).limit, 2);
	assert_int_equal(stats_of(bh).queued, 0);
	assert_int_equal(bh_release(bh, 1), 0);
	all_permits_back(bh, 2);
	shm_done(bh, name);
}

static void test_killed_mid_close(void **state)
{
	const char *name = uniq("close-waiters");
	bulkhead_t *bh = shm_make(name, 1, 4, BH_FAIR);
	struct victim wv = { name, BP_NONE, 0, NULL, 1 };
	struct victim v = { name, BP_CLOSING, 1, act_close, 0 };
	struct child w, c;
	uint64_t t0;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	w = spawn(deadline_child, &wv);
	assert_int_equal(hear(w.rd), 1);
	await_queued(bh, 1);
	c = stop_at(&v); /* W_CLOSED set, the waiter still queued */
	kill_reap(&c);
	t0 = bh_now_ns();
	assert_int_equal(hear(w.rd), -ESHUTDOWN); /* failed, as close would have */
	assert_true(bh_now_ns() - t0 < BH_SEC);
	say(w.wr, 0);
	assert_int_equal(reap(&w), 0);
	assert_int_equal(stats_of(bh).queued, 0);
	assert_int_equal(bh_release(bh, 1), 0); /* granted to nobody */
	assert_int_equal(stats_of(bh).in_flight, 0);
	assert_int_equal(bh_try_acquire(bh, 1), -ESHUTDOWN);
	shm_done(bh, name);
}

/* A fork child must never keep a dead parent looking alive, not even when
 * it is forked while another thread of the parent destroys the parent's
 * last handle: the detach still holds the parent's descriptor, and a child
 * that inherits it keeps the parent's liveness lock. Here the parent is
 * killed half-way through that detach, holding a permit, while its child
 * lives on. */
static void *destroy_handle(void *arg)
{
	bh_destroy(arg);
	return NULL;
}

static int fork_while_detaching_main(void *arg, int out, int in)
{
	struct fresh *f = arg;
	bulkhead_t *bh;
	pthread_t t;
	pid_t g;

	bh_destroy(f->inherited);
	if (bh_shm_open(f->name, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 1) != 0)
		return 1;
	bhs_crash_at(BP_DETACHING, 1, out);
	pthread_create(&t, NULL, destroy_handle, bh);
	if (hear(in) != 1) /* the destroy stopped at its point */
		return 2;
	g = fork();
	if (g == 0) {
		alarm(30); /* a child does not inherit its parent's alarm */
		for (;;)
			pause();
	}
	say(out, (int)g);
	pause();
	return 0;
}

static void test_fork_while_detaching(void **state)
{
	const char *name = uniq("forkdetach");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct child d = spawn(fork_while_detaching_main, &(struct fresh){ name, bh });
	char point = 0;
	uint64_t t0;
	pid_t kid;
	int r = -EBUSY;

	(void)state;
	assert_int_equal(read(d.rd, &point, 1), 1);
	assert_int_equal(point, BP_DETACHING);
	assert_int_equal(stats_of(bh).in_flight, 1);
	say(d.wr, 1);
	kid = hear(d.rd);
	assert_true(kid > 0);
	kill_reap(&d); /* its child lives on */
	t0 = bh_now_ns();
	while (r != 0 && bh_now_ns() - t0 < BH_SEC) {
		bhs_scan_now(bh);
		if ((r = bh_try_acquire(bh, 1)) != 0)
			usleep(10 * 1000);
	}
	kill(kid, SIGKILL);
	assert_int_equal(r, 0); /* the dead parent's permit is back */
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(atomic_load(&g->deaths), 1);
	assert_int_equal(stats_of(bh).reclaimed, 1);
	assert_int_equal(stats_of(bh).processes, 1);
	all_permits_back(bh, 1);
	shm_done(bh, name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_killed_between_cas_and_ledger),
		cmocka_unit_test(test_killed_between_release_cas_and_ledger),
		cmocka_unit_test(test_reclaim_of_word_short_of_ledgers),
		cmocka_unit_test(test_killed_while_queued),
		cmocka_unit_test(test_handoff_to_dead_waiter_passes_on),
		cmocka_unit_test(test_killed_right_after_handoff),
		cmocka_unit_test(test_killed_while_claiming),
		cmocka_unit_test(test_granter_killed_mid_grant),
		cmocka_unit_test(test_granter_killed_before_grant),
		cmocka_unit_test(test_granter_killed_after_grant),
		cmocka_unit_test(test_killed_holding_lock),
		cmocka_unit_test(test_killed_taking_extra_node),
		cmocka_unit_test(test_killed_waking_head),
		cmocka_unit_test(test_killed_after_unlock_woken_head),
		cmocka_unit_test(test_killed_after_unlock_granted_head),
		cmocka_unit_test(test_killed_after_handoff_told),
		cmocka_unit_test(test_killed_after_unlock_async_grant),
		cmocka_unit_test(test_swallowed_lock_wakeup),
		cmocka_unit_test(test_killed_mid_transfer),
		cmocka_unit_test(test_recoverer_killed_mid_rebuild),
		cmocka_unit_test(test_recoverer_killed_counts_once),
		cmocka_unit_test(test_replayer_killed_counts_once),
		cmocka_unit_test(test_detacher_keeps_its_lock),
		cmocka_unit_test(test_registered_during_rebuild),
		cmocka_unit_test(test_rebuild_counts_deaths_after_permits),
		cmocka_unit_test(test_rebuild_after_waiter_left),
		cmocka_unit_test(test_rebuild_after_admit_retook),
		cmocka_unit_test(test_dead_looks_alive_during_rebuild),
		cmocka_unit_test(test_probe_races_detach_and_register),
		cmocka_unit_test(test_short_wait_looks_for_the_dead),
		cmocka_unit_test(test_refused_attach_closes_once),
		cmocka_unit_test(test_attach_refuses_file_cut_before_mapping),
		cmocka_unit_test(test_role_goes_with_its_slot),
		cmocka_unit_test(test_attach_recovers_dead_slots),
		cmocka_unit_test(test_attacher_killed_recovering),
		cmocka_unit_test(test_agent_killed_mid_delivery),
		cmocka_unit_test(test_fork_child_cancels_inherited_node),
		cmocka_unit_test(test_agent_delivers_to_reused_node),
		cmocka_unit_test(test_agent_leaves_other_process_node),
		cmocka_unit_test(test_stopped_process_keeps_permits),
		cmocka_unit_test(test_killed_mid_set_limit),
		cmocka_unit_test(test_killed_mid_close),
		cmocka_unit_test(test_fork_while_detaching),
	};

	alarm(300);
	if (getenv("BH_TEST_FILTER")) /* one test: BH_TEST_FILTER=test_name */
		cmocka_set_test_filter(getenv("BH_TEST_FILTER"));
	return cmocka_run_group_tests(tests, shm_setup, shm_teardown);
}
