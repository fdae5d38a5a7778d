/*
 * A model of libbulkhead's core protocol (src/core/word.c, word.h, queue.c),
 * for Spin.
 *
 * What is modelled: the state word as src/core/backend.h lays it out (the
 * free permits avail, the permits held, queued and the STARVING, WOKEN,
 * CLOSED bits; the limit is avail + held) and every CAS on it, with the
 * fast paths' single tests (take1_plain's W_TAKE1_BLOCK, give_word's "nobody
 * queued, a permit held") ahead of their full looks; the FIFO queue and direct handoff
 * under the queue lock; each blocking waiter's own futex word (WAITING,
 * SLEEPING, WOKEN, GRANTED, SHUTDOWN, INVALID), the exchange that publishes a
 * final state and reads whether the owner slept, and the futex itself (a
 * wait that checks the value and blocks, a wake that only reaches a sleeper);
 * the unfair woken head racing newcomers and marking itself starving;
 * deadlines racing grants; pthread cancellation racing a grant (the cleanup
 * handler); async nodes and bh_cancel_async; bh_close; bh_set_limit; the
 * short-hold pre-wake; weighted requests. docs/design.md ("The protocol
 * model") maps each step to the function it abstracts and says what is
 * left out.
 *
 * Granularity. One Promela step per access to shared state that another
 * thread can observe without the lock: a CAS loop on the word is one atomic
 * step (a CAS that computes the new word from the old one, retried until it
 * succeeds, is linearizable at its successful attempt, and a loop that exits
 * without writing decides on one load); an exchange, CAS or store on a
 * waiter's state is one step; a futex wait is two (the value check that
 * blocks, then the return). Updates of data guarded by the queue lock (the
 * list, short_holds, a node's kind) are folded into the neighbouring step of
 * the lock holder: nobody reads them without the lock.
 *
 * Configurations are chosen with -DCFG_<name> (see the end of the file);
 * -DMUTANT_<name> plants one of the stress suite's defects
 * (stress/mutants/<name>.patch); -DLIVENESS adds the no-lost-wakeup claim.
 * model/check.sh runs them all.
 */

/* ---- constants ------------------------------------------------------- */

#define NONE 255

/* sync_waiter.state */
#define WS_WAITING  0
#define WS_SLEEPING 1
#define WS_WOKEN    2
#define WS_GRANTED  3
#define WS_SHUTDOWN 4
#define WS_INVALID  5

/* bh_qlink.kind */
#define K_NONE  0
#define K_SYNC  1
#define K_ASYNC 2

/* results the model's callers see (negative errnos in the library) */
#define R_OK       0
#define R_QUEUED   1 /* bh_acquire_async: queued */
#define R_BUSY     2
#define R_SHUTDOWN 3
#define R_INVAL    4
#define R_TIMEDOUT 5
#define R_FAIL     6 /* take_fast: not taken */

/* futex wait returns */
#define F_WOKEN    0 /* woken, or spurious */
#define F_AGAIN    1 /* the word no longer held the expected value */
#define F_TIMEDOUT 2
#define F_CANCEL   3 /* SIGCANCEL interrupted the wait */

/* ---- configuration defaults (each CFG_ below overrides some) ------------ */

#define NODES 4 /* clients; client i owns node i */

#ifdef CFG_prewake
#define PREWAKE
#endif

#ifndef SPURIOUS
#define SPURIOUS 0 /* spurious wakeups / EINTR each waiter may see */
#endif

/* Witnesses: -DREACH=W_<name> turns the point into a failing assertion, so
 * the check proves the interleaving it names is reachable (the properties
 * are not vacuously true of a model that never gets there). */
#define W_leave_granted   1 /* a grant beat the deadline to the lock */
#define W_leave_timeout   2 /* a queued waiter timed out */
#define W_cancel_granted  3 /* pthread_cancel acted after the handoff */
#define W_cancel_queued   4 /* pthread_cancel acted while queued */
#define W_async_cancel_late 5 /* bh_cancel_async lost to the callback */
#define W_async_cancel_won  6 /* bh_cancel_async took the node back */
#define W_compete_lost    7 /* a woken head lost the race */
#define W_starving_handoff 8 /* a release handed off to a starving head */
#define W_barge_woken     9 /* a newcomer took permits past a woken head */
#define W_prewake        10 /* a release pre-woke a sleeping head */
#define W_futex_again    11 /* the state changed between SLEEPING and the wait */
#define W_close_fails    12 /* bh_close failed a queued waiter */
#define W_shrink_fails   13 /* bh_set_limit failed an oversized waiter */
#define W_woken_wakes    14 /* an unfair head was woken from its sleep */
#ifdef REACH
#define reached(w) assert(REACH != w)
#else
#define reached(w) skip
#endif

/* ---- the bulkhead --------------------------------------------------- */

/* The word (struct bulkhead.word): always updated as a whole. As in the
 * code it keeps the permits held, not the limit: a take moves one permit
 * from avail to held (w_take), a give moves it back (w_give), a resize
 * sets avail to the new limit less what is held (w_with_limit). */
short avail;  /* may be negative after a shrink */
byte held;    /* in flight */
byte nq;
bit starving, woken, closed;
#define limit (avail + held) /* w_limit() */

/* Guarded by the queue lock (bh->lock). */
byte lk;             /* 0: free; else holder's id + 1 */
byte q[NODES];       /* the FIFO, q[0] is bh->head */
byte qlen;
bit short_holds;     /* note_release's verdict; time-based, so free here */
byte queue_cap;
bit fair_mode;       /* BH_FAIR */

/* Per node (struct sync_waiter / struct bh_async). */
byte nd_n[NODES];
byte nd_kind[NODES];
byte nd_state[NODES];  /* sync_waiter.state */
bit in_kernel[NODES];  /* the owner sleeps in FUTEX_WAIT on nd_state */
byte async_res[NODES]; /* an async node's callback result, NONE: not run */

/* Library counters (struct bh_stats). */
byte lib_timed_out, lib_cancelled;

/* ---- ghost state: the specification's view -------------------------- */

byte owns[NODES];      /* permits client i holds */
byte node_owns[NODES]; /* permits granted to node i, not yet its caller's */
byte ghost;            /* sum of owns[] and node_owns[] */
byte lim_set;          /* the limit last set (creation, bh_set_limit) */
byte joined[NODES], left_q[NODES]; /* times node i entered / left the queue */
byte seen_timeouts, seen_cancels;  /* what the callers saw */
bit close_done;        /* a bh_close has returned */
byte done;             /* clients finished */
byte nclients;

/* ---- invariants ------------------------------------------------------ */

/* Permits are conserved: the word's held is exactly what callers and
 * granted nodes own, and avail + held is the limit last set. Neither lost
 * nor created, and no change of the word moves the limit by accident. */
#define CONSERVED (held == ghost && limit == lim_set)

#define OVERSIZED(i) (qlen > i && nd_n[q[i]] > limit)

/* What the stress watchdog samples under the lock (so: while it is free):
 * the word's count is the queue's length, marks only with a head, nobody
 * queued after a close returned or asking for more than the limit. */
#define COUNT_IS_LENGTH (lk != 0 || nq == qlen)
#define MARKS_HAVE_HEAD (lk != 0 || ((!woken || qlen > 0) && (!starving || qlen > 0)))
#define NONE_AFTER_CLOSE (lk != 0 || !close_done || qlen == 0)
#define NONE_OVERSIZED \
	(lk != 0 || !(OVERSIZED(0) || OVERSIZED(1) || OVERSIZED(2) || OVERSIZED(3)))

/* A lost wakeup, as a state: the head's permits are free, or a granted
 * waiter sleeps. Liveness says this never persists (see LIVENESS below). */
#define HEAD_FITS (qlen > 0 && avail >= nd_n[q[0]] && !closed)
#define ASLEEP(i) (in_kernel[i] && nd_state[i] >= WS_GRANTED)
#define STUCK (HEAD_FITS || ASLEEP(0) || ASLEEP(1) || ASLEEP(2) || ASLEEP(3))

/* A grant never takes in-flight above the limit in force. */
#define GRANT_CHECK assert(ghost <= limit)

/* Newcomers (a take that did not come from the queue): in fair mode never
 * while anyone is queued; in unfair mode only while the head is out
 * competing, and never while it is starving. */
#define BARGE_CHECK assert(qlen == 0 || (!fair_mode && woken && !starving))

#ifdef MUTANT_fair_barging
#define MAY_TAKE(n) (!closed && !starving && avail >= (n))
#else
#define MAY_TAKE(n) (!closed && !starving && !(nq > 0 && !woken) && avail >= (n))
#endif
#define RELEASE_NEEDS_LOCK (nq > 0 && !woken)

/* w_take(), w_give(): n permits between avail and held (inside a d_step) */
#define W_TAKE(n) avail = avail - (n); held = held + (n)
#define W_GIVE(n) avail = avail + (n); held = held - (n)

/* take1_plain(): the one test of the word that lets a take of one permit
 * go ahead (backend.h W_TAKE1_BLOCK: closed, starving, anyone queued, or
 * bit 20 of W_BIAS - avail, which is clear exactly when avail >= 1). */
#ifdef MUTANT_take1_ignores_queue
#define TAKE1_BLOCK (closed || starving || avail < 1)
#else
#define TAKE1_BLOCK (closed || starving || nq > 0 || avail < 1)
#endif

/* ---- locals every client declares -------------------------------------- */

#define WBCAP 3 /* wakes one lock holder can collect here */
#define CLIENT_LOCALS \
	byte r, s, old, fr, i, h, act, rel; \
	bit take, was_head, won, queued, cas_ok, starve_now; \
	byte spur = SPURIOUS; \
	byte wb[WBCAP]; \
	byte wbn

/* ---- the queue lock and the wake batch ---------------------------------- */

inline lock()
{
	atomic { lk == 0 -> lk = me + 1; wbn = 0 }
}

/* futex wake: reaches the owner only if it is in the kernel on that word */
inline wake(x)
{
	in_kernel[x] = 0
}

inline wb_flush()
{
	do
	:: wbn > 0 -> wbn--; wake(wb[wbn]); wb[wbn] = 0
	:: else -> break
	od
}

inline wb_add(x)
{
#ifdef MUTANT_wake_batch_overflow
	/* the model's batches are short: a one-slot batch that drops the rest */
	if
	:: wbn >= 1 -> skip
	:: else -> wb[wbn] = x; wbn++
	fi
#else
	assert(wbn < WBCAP);
	wb[wbn] = x;
	wbn++
#endif
}

/* unlock(): wakes are issued after the mutex is dropped */
inline unlock()
{
	lk = 0;
	wb_flush()
}

/* ---- queue primitives (under the lock) ----------------------------------- */

inline q_append(x)
{
	q[qlen] = x;
	qlen++;
	joined[x]++
}

inline q_remove(x)
{
	i = 0;
	do
	:: i < qlen && q[i] != x -> i++
	:: else -> break
	od;
	assert(i < qlen); /* leaves only a queue it is in */
	do
	:: i + 1 < qlen -> q[i] = q[i + 1]; i++
	:: else -> break
	od;
	qlen--;
	q[qlen] = 0;
	i = 0;
	left_q[x]++
}

/* notify(): exchange the state, wake the owner if the old state says it sleeps */
inline notify(x, st)
{
	atomic {
		old = nd_state[x];
		nd_state[x] = st;
		if
		:: old == WS_SLEEPING -> wb_add(x)
		:: else -> skip
		fi;
		old = 0
	}
}

/* finish(): the final word to a dequeued node */
inline finish(x, res)
{
	if
	:: nd_kind[x] == K_SYNC ->
		notify(x, (res == R_OK -> WS_GRANTED :
			   (res == R_SHUTDOWN -> WS_SHUTDOWN : WS_INVALID)))
	:: else ->
		/* async: the callback runs here, under the lock, exactly once */
		d_step {
			nd_kind[x] = K_NONE;
			assert(async_res[x] == NONE);
			async_res[x] = res;
			owns[x] = owns[x] + node_owns[x];
			node_owns[x] = 0
		}
	fi
}

/* unqueue(): one CAS drops the count and, for the head, its marks */
inline unqueue(x)
{
	d_step {
		was_head = (q[0] == x);
		nq--;
		if
		:: was_head ->
#ifndef MUTANT_woken_mark_stays
			woken = 0;
#endif
			starving = 0
		:: else -> skip
		fi;
#ifdef MUTANT_unqueue_keeps_node
		if
		:: nd_kind[x] == K_ASYNC -> q_remove(x)
		:: else -> skip
		fi;
#else
		q_remove(x);
#endif
		was_head = 0
	}
}

/* ---- serving the queue ------------------------------------------------ */

#define ACT_STOP 0
#define ACT_WAKE 1
#define ACT_HANDOFF 2

/* serve(): hand off to the head while it fits (fair, starving, async), or
 * wake an unfair head to compete. One CAS per head, then its notify. */
inline serve()
{
	do
	:: d_step {
		if
		:: qlen == 0 -> act = ACT_STOP
		:: else ->
			h = q[0];
			if
			:: avail < nd_n[h] -> act = ACT_STOP
			:: else ->
				if
				:: fair_mode || starving || nd_kind[h] == K_ASYNC ->
					/* the handoff: permits and queue slot in one CAS */
					if
					:: !fair_mode && starving && nd_kind[h] == K_SYNC ->
						reached(W_starving_handoff)
					:: else -> skip
					fi;
#ifndef MUTANT_handoff_no_take
					W_TAKE(nd_n[h]);
#endif
					nq--;
					woken = 0;
					starving = 0;
					assert(q[0] == h); /* FIFO: only the head is granted */
					q_remove(h);
					node_owns[h] = nd_n[h];
					ghost = ghost + nd_n[h];
					GRANT_CHECK;
					act = ACT_HANDOFF
				:: else ->
					if
					:: woken -> act = ACT_STOP /* already on its way */
					:: else -> woken = 1; act = ACT_WAKE
					fi
				fi
			fi
		fi
	   };
		if
		:: act == ACT_STOP -> break
		:: act == ACT_WAKE ->
			if
			:: nd_state[h] == WS_SLEEPING -> reached(W_woken_wakes)
			:: else -> skip
			fi;
			notify(h, WS_WOKEN);
			break
		:: act == ACT_HANDOFF -> finish(h, R_OK)
		fi
	od;
	act = 0;
	h = 0
}

/* prewake_head(): with short holds, a sleeping sync head is set WAITING and
 * woken so that it spins when its turn comes. */
inline prewake()
{
	atomic {
		if
		:: qlen > 0 && nd_kind[q[0]] == K_SYNC && short_holds &&
		   nd_state[q[0]] == WS_SLEEPING ->
			nd_state[q[0]] = WS_WAITING;
			reached(W_prewake);
#ifndef MUTANT_prewake_no_wake
			wb_add(q[0])
#endif
		:: else -> skip
		fi
	}
}

inline dispatch()
{
	serve();
	prewake()
}

/* ---- taking permits ----------------------------------------------------- */

/* take_fast(): the newcomer's fast path (src/core/word.c). For one permit
 * take1_plain() first: one load, the single test TAKE1_BLOCK, one CAS; when
 * it says no, the full look of take_word(): one load, may_take(), one CAS.
 * Each is one step (a CAS on the word it loaded). */
inline take_fast(n)
{
	d_step {
		if
		:: n == 1 && !(TAKE1_BLOCK) ->
			BARGE_CHECK;
			W_TAKE(1);
			owns[me] = owns[me] + 1;
			ghost = ghost + 1;
			GRANT_CHECK;
			r = R_OK
		:: else -> r = R_FAIL
		fi
	};
	if
	:: r == R_FAIL ->
		d_step {
			if
			:: MAY_TAKE(n) ->
				BARGE_CHECK;
				if
				:: qlen > 0 -> reached(W_barge_woken)
				:: else -> skip
				fi;
				W_TAKE(n);
				owns[me] = owns[me] + n;
				ghost = ghost + n;
				GRANT_CHECK;
				r = R_OK
			:: else -> skip
			fi
		}
	:: else -> skip
	fi
}

/* refuse(): the error for a failed try, from a fresh load */
inline refuse(n)
{
	d_step {
		if
		:: n > limit -> r = R_INVAL
		:: else ->
			if
			:: closed -> r = R_SHUTDOWN
			:: else -> r = R_BUSY
			fi
		fi
	}
}

inline try_acquire(n)
{
	take_fast(n);
	if
	:: r == R_FAIL -> refuse(n)
	:: else -> skip
	fi
}

/* admit(): take, or join the queue, in one CAS under the lock; a node that
 * is not the head goes straight to SLEEPING (acquire_slow). */
inline admit(n, kind)
{
	d_step {
#ifdef MUTANT_admit_ignores_close
		if
		:: closed && kind == K_ASYNC -> r = R_SHUTDOWN
#else
		if
		:: closed -> r = R_SHUTDOWN
#endif
		:: else ->
			if
			:: n > limit -> r = R_INVAL
			:: else ->
				take = MAY_TAKE(n);
				if
				:: !take && nq >= queue_cap -> r = R_BUSY
				:: take ->
					BARGE_CHECK;
					W_TAKE(n);
					owns[me] = owns[me] + n;
					ghost = ghost + n;
					GRANT_CHECK;
					r = R_OK
				:: else ->
					nq++;
					nd_n[me] = n;
					nd_kind[me] = kind;
					q_append(me);
					if
					:: kind == K_SYNC ->
						nd_state[me] = (q[0] == me -> WS_WAITING : WS_SLEEPING)
					:: else -> skip
					fi;
					r = R_QUEUED
				fi;
				take = 0
			fi
		fi
	}
}

/* ---- releasing -------------------------------------------------------- */

/* give_back(): return_grant(), a cancelled grantee's permits go back, then
 * the queue. The code gives back only what the word holds (room = held),
 * for callers that released permits they did not hold; this model's
 * callers never do, so the clamp must never act: asserted. */
inline give_back(n)
{
	assert(held >= n);
	if
	:: held < n -> W_GIVE(held)
	:: else -> W_GIVE(n)
	fi
}

/* Whether the word lets a caller that holds n permits give them back: the
 * exact over-release check (held is in the word). The model's callers hold
 * what they give, so the check must always pass: a refusal is asserted
 * against wherever it is made. */
#define HOLDS(n) (held >= (n))

inline release_slow(n)
{
	lock();
	d_step {
		/* bhi_release_slow(): the CAS loop refuses (-EOVERFLOW) unless
		 * w_held(w) >= n */
		assert(HOLDS(n));
#ifdef MUTANT_release_counts_twice
		if
		:: nq > 1 -> W_GIVE(2 * n)
		:: else -> W_GIVE(n)
		fi;
#else
		W_GIVE(n);
#endif
		owns[me] = owns[me] - n;
		ghost = ghost - n
	};
	/* note_release(): whether holds are short depends on the clock */
#ifdef PREWAKE
	if
	:: short_holds = 1
	:: short_holds = 0
	fi;
#endif
	dispatch();
#ifdef MUTANT_release_no_wake
	wbn = 0; /* the batch is dropped */
#endif
	unlock()
}

/* bh_release(): give_word()'s single tests on the word it loaded (nobody
 * queued, held_at_least()) and its CAS, one step; when they say no,
 * give_retry()'s full look at a fresh word (release_fast_ok(): no queued
 * waiter needs the lock, and held >= n) and its CAS, one step; when a
 * queued waiter needs serving, the lock (release_slow). rel: 0 given,
 * 1 to the slow path, 2 to give_retry. */
inline release(n)
{
	assert(owns[me] >= n);
#ifdef MUTANT_give_tests_queue_early
	/* the defect: the tests on one load, then a give that does not
	 * compare against that load (a fetch_sub, or a CAS on a fresh word) */
	d_step {
		if
		:: nq == 0 && HOLDS(n) -> rel = 3
		:: else -> rel = 2
		fi
	};
	if
	:: rel == 3 ->
		d_step {
			W_GIVE(n);
			owns[me] = owns[me] - n;
			ghost = ghost - n;
			rel = 0
		}
	:: else -> skip
	fi;
#else
	d_step {
		if
		:: nq == 0 && HOLDS(n) ->
			W_GIVE(n);
			owns[me] = owns[me] - n;
			ghost = ghost - n;
			rel = 0
		:: else -> rel = 2
		fi
	};
#endif
	if
	:: rel == 2 ->
		d_step {
			if
			:: RELEASE_NEEDS_LOCK -> rel = 1
			:: else ->
				/* not queued-blocked: bhi_over_release() unless held */
				assert(HOLDS(n));
				W_GIVE(n);
				owns[me] = owns[me] - n;
				ghost = ghost - n;
				rel = 0
			fi
		}
	:: else -> skip
	fi;
	if
	:: rel == 1 -> rel = 0; release_slow(n)
	:: else -> skip
	fi
}

/* ---- blocking waiters ----------------------------------------------------- */

/* compete(): the woken unfair head races newcomers, under the lock */
inline compete(n)
{
	lock();
	if
	:: nd_state[me] != WS_WOKEN -> won = 0 /* closed or invalidated meanwhile */
	:: else ->
		/* starving(): waited starve_ns and no fair handoff for as long */
		if
		:: starve_now = 1
		:: starve_now = 0
		fi;
		d_step {
			won = (avail >= n);
			woken = 0;
			starving = 0;
			if
			:: won ->
				W_TAKE(n);
				nq--;
				assert(q[0] == me);
				q_remove(me);
				owns[me] = owns[me] + n;
				ghost = ghost + n;
				GRANT_CHECK
			:: else ->
				reached(W_compete_lost);
				starving = starve_now;
				nd_state[me] = WS_WAITING
			fi;
			starve_now = 0
		};
		if
		:: won -> dispatch()
		:: else -> skip
		fi
	fi;
	unlock()
}

/* the futex wait on our own state word, and the windows around it */
inline futex_wait(timed, cancellable)
{
	atomic {
		if
		:: nd_state[me] != WS_SLEEPING -> fr = F_AGAIN; reached(W_futex_again)
		:: else -> in_kernel[me] = 1; fr = F_WOKEN
		fi
	};
	if
	:: fr == F_WOKEN ->
		if
		:: atomic { !in_kernel[me] -> skip } /* woken */
		:: atomic { timed && in_kernel[me] -> in_kernel[me] = 0; fr = F_TIMEDOUT }
		:: atomic { spur > 0 && in_kernel[me] -> in_kernel[me] = 0; spur-- }
		:: atomic { cancellable && in_kernel[me] -> in_kernel[me] = 0; fr = F_CANCEL }
		fi
	:: else -> skip
	fi;
	/* settle_cancel(): a cancel that raced the end of the wait acts here */
	if
	:: fr == F_CANCEL -> goto cancelled
	:: fr != F_CANCEL && cancellable -> goto cancelled
	:: fr != F_CANCEL -> skip
	fi
}

/* leave(): the deadline passed; a grant that got the lock first wins */
inline leave()
{
	lock();
	s = nd_state[me];
	if
	:: s < WS_GRANTED ->
		reached(W_leave_timeout);
#ifndef MUTANT_timeout_no_unlink
		unqueue(me);
#ifndef MUTANT_head_leave_no_dispatch
		dispatch();
#endif
#endif
		skip
	:: s == WS_GRANTED -> reached(W_leave_granted)
	:: else -> skip
	fi;
	unlock();
	if
#ifdef MUTANT_timeout_drops_grant
	:: s < WS_GRANTED || s == WS_GRANTED ->
#else
	:: s < WS_GRANTED ->
#endif
#ifdef MUTANT_timeout_counted_twice
		lib_timed_out = lib_timed_out + 2;
#else
		lib_timed_out++;
#endif
		r = R_TIMEDOUT
	:: s == WS_GRANTED -> r = R_OK
	:: s == WS_SHUTDOWN -> r = R_SHUTDOWN
	:: s == WS_INVALID -> r = R_INVAL
	fi;
	s = 0
}

inline wait_loop(n, timed, cancellable)
{
	do
	:: s = nd_state[me];
		if
		:: s >= WS_GRANTED ->
			if
			:: s == WS_GRANTED -> r = R_OK
			:: s == WS_SHUTDOWN -> r = R_SHUTDOWN
			:: else -> r = R_INVAL
			fi;
			break
		:: s == WS_WOKEN ->
			compete(n);
			if
			:: won -> won = 0; r = R_OK; break
			:: else -> skip
			fi
		:: s == WS_WAITING ->
			/* spin() only delays; then the CAS WAITING -> SLEEPING */
			atomic {
				cas_ok = (nd_state[me] == WS_WAITING);
				if
				:: cas_ok -> nd_state[me] = WS_SLEEPING
				:: else -> skip
				fi
			}
		:: s == WS_SLEEPING -> cas_ok = 1
		fi;
		if
		:: cas_ok -> cas_ok = 0; futex_wait(timed, cancellable)
		:: else -> fr = F_AGAIN
		fi;
		s = 0;
		if
		:: fr == F_TIMEDOUT -> fr = 0; leave(); break
		:: else -> fr = 0
		fi
	od;
	skip /* a break must not land on a d_step */
}

/* bh_acquire(n, deadline): the fast path, then acquire_slow() */
inline acquire(n, timed, cancellable)
{
	take_fast(n);
	if
	:: r == R_OK -> skip
	:: else ->
		if
		:: timed -> /* the deadline may already have passed: a try */
			if
			:: true -> try_acquire(n)
			:: true -> r = R_FAIL
			fi
		:: else -> r = R_FAIL
		fi;
		if
		:: r == R_FAIL ->
			lock();
			admit(n, K_SYNC);
			unlock();
			if
			:: r == R_QUEUED -> wait_loop(n, timed, cancellable)
			:: else -> skip
			fi
		:: else -> skip
		fi
	fi;
	/* what the caller gets matches what it owns; its node is out */
	d_step {
		if
		:: r == R_OK ->
			owns[me] = owns[me] + node_owns[me];
			node_owns[me] = 0
		:: else -> assert(node_owns[me] == 0)
		fi;
		if
		:: r == R_TIMEDOUT -> seen_timeouts++
		:: else -> skip
		fi;
		assert(joined[me] == left_q[me])
	}
}

/* on_cancel(): the cleanup handler of a cancelled waiter */
inline on_cancel(n)
{
	lock();
	s = nd_state[me];
	if
	:: s == WS_GRANTED ->
		reached(W_cancel_granted);
		/* the spec: a cancelled waiter owns nothing once it unwinds; its
		 * permits go back in give_back()'s one atomic add */
		d_step {
#ifndef MUTANT_cancel_keeps_grant
			give_back(n);
#ifdef MUTANT_cancel_gives_back_twice
			give_back(n);
#endif
#endif
			ghost = ghost - node_owns[me];
			node_owns[me] = 0
		};
		dispatch()
	:: s < WS_GRANTED ->
		reached(W_cancel_queued);
		unqueue(me);
		dispatch()
	:: else -> skip
	fi;
	unlock();
	s = 0;
	lib_cancelled++;
	seen_cancels++;
	assert(node_owns[me] == 0 && owns[me] == 0 && joined[me] == left_q[me])
}

/* ---- async waiters ---------------------------------------------------------- */

inline acquire_async(n)
{
	take_fast(n);
	if
	:: r == R_FAIL ->
		lock();
		admit(n, K_ASYNC);
		unlock()
	:: else -> skip
	fi
}

inline cancel_async()
{
	lock();
	d_step {
		queued = (nd_kind[me] == K_ASYNC);
		if
		:: queued -> nd_kind[me] = K_NONE
		:: else -> skip
		fi
	};
	if
	:: queued ->
		unqueue(me);
		dispatch()
	:: else -> skip
	fi;
	unlock();
	if
	:: queued -> lib_cancelled++; seen_cancels++
	:: else -> skip
	fi
}

/* ---- close and resize ------------------------------------------------------- */

/* fail_waiters(): every queued node asking for more than above */
inline fail_waiters(above, res)
{
#ifdef MUTANT_close_skips_head
	rel = 1;
#else
	rel = 0;
#endif
	do
	:: d_step {
		do
		:: rel < qlen && nd_n[q[rel]] <= above -> rel++
		:: else -> break
		od;
		if
		:: rel < qlen -> h = q[rel]
		:: else -> h = NONE
		fi
	   };
		if
		:: h == NONE -> break
		:: else ->
			if
			:: res == R_SHUTDOWN -> reached(W_close_fails)
			:: else -> reached(W_shrink_fails)
			fi;
			unqueue(h);
			finish(h, res)
		fi
	od;
	rel = 0;
	h = 0
}

inline close()
{
	lock();
	d_step { s = closed; closed = 1 };
	if
	:: !s -> fail_waiters(0, R_SHUTDOWN)
	:: else -> skip
	fi;
	s = 0;
	atomic { lk = 0; close_done = 1 };
	wb_flush()
}

inline set_limit(m)
{
	lock();
#ifdef MUTANT_resize_clears_closed
	d_step { avail = m - held; lim_set = m; closed = 0 };
#else
	/* w_with_limit(): held stays, avail follows */
	d_step { avail = m - held; lim_set = m };
#endif
#ifndef MUTANT_shrink_keeps_oversized
	fail_waiters(m, R_INVAL);
#endif
	dispatch();
	unlock()
}

/* ---- the clients -------------------------------------------------------- */

/* Holds p1 + p2 + p3 permits from the start, gives them back in that order. */
proctype holder(byte me; byte p1; byte p2; byte p3)
{
	CLIENT_LOCALS;

	release(p1);
	if
	:: p2 > 0 -> release(p2)
	:: else -> skip
	fi;
	if
	:: p3 > 0 -> release(p3)
	:: else -> skip
	fi;
	assert(owns[me] == 0);
	done++
}

/* bh_acquire(n), then bh_release(n) when granted. */
proctype waiter(byte me; byte n; bit timed; bit cancellable)
{
	CLIENT_LOCALS;

	acquire(n, timed, cancellable);
	if
	:: r == R_OK -> release(n)
	:: else -> skip
	fi;
	goto out;
cancelled:
	on_cancel(n);
out:
	assert(owns[me] == 0 && node_owns[me] == 0);
	done++
}

/* bh_try_acquire(n): a newcomer; releases what it got. */
proctype newcomer(byte me; byte n; byte rounds)
{
	CLIENT_LOCALS;

	do
	:: rounds > 0 ->
		rounds--;
		try_acquire(n);
		if
		:: r == R_OK -> release(n)
		:: else -> skip
		fi
	:: else -> break
	od;
	done++
}

/* bh_acquire_async(n); then waits for the callback, or calls bh_cancel_async
 * at any moment (racing the grant). */
proctype async_waiter(byte me; byte n; bit may_cancel)
{
	CLIENT_LOCALS;

	acquire_async(n);
	if
	:: r == R_QUEUED ->
		if
		:: may_cancel ->
			cancel_async();
			if
			:: queued ->
				/* 1: the callback never runs and nothing is ours */
				reached(W_async_cancel_won);
				assert(async_res[me] == NONE && node_owns[me] == 0)
			:: else ->
				/* 0: the callback has run */
				reached(W_async_cancel_late);
				assert(async_res[me] != NONE)
			fi
		:: else -> async_res[me] != NONE
		fi;
		r = async_res[me]
	:: else -> skip
	fi;
	if
	:: r == R_OK -> release(n)
	:: else -> skip
	fi;
	assert(owns[me] == 0 && node_owns[me] == 0);
	done++
}

/* Gives back p1, then p2 only once every other client is done: nothing but
 * the queue itself may serve the others after the first release. */
proctype late_holder(byte me; byte p1; byte p2)
{
	CLIENT_LOCALS;

	release(p1);
	done == nclients - 1;
	release(p2);
	done++
}

/* Gives back p1, closes the bulkhead, gives back p2 (a shutdown that drains). */
proctype holder_closer(byte me; byte p1; byte p2)
{
	CLIENT_LOCALS;

	release(p1);
	close();
	release(p2);
	done++
}

proctype resizer(byte me; byte m1; byte m2)
{
	CLIENT_LOCALS;

	set_limit(m1);
	if
	:: m2 > 0 -> set_limit(m2)
	:: else -> skip
	fi;
	done++
}

/* Checks the invariants in every state (blocked until one fails; the
 * failed assertion names it). */
active proctype monitor()
{
end:	if
	:: atomic { !(CONSERVED) -> assert(CONSERVED) }
	:: atomic { !(COUNT_IS_LENGTH) -> assert(COUNT_IS_LENGTH) }
	:: atomic { !(MARKS_HAVE_HEAD) -> assert(MARKS_HAVE_HEAD) }
	:: atomic { !(NONE_AFTER_CLOSE) -> assert(NONE_AFTER_CLOSE) }
	:: atomic { !(NONE_OVERSIZED) -> assert(NONE_OVERSIZED) }
	fi
}

#ifdef LIVENESS
/* No lost wakeup: under weak fairness (every thread that stays able to run
 * eventually runs), a head whose permits are free, or a granted waiter
 * asleep, does not stay so forever. */
ltl no_lost_wakeup { !<>[] (STUCK) }
#endif

/* ---- configurations ----------------------------------------------------- */

/* start(L, fair, cap): a bulkhead of L permits */
inline start(L, fair, cap)
{
	lim_set = L;
	avail = L;
	held = 0;
	fair_mode = fair;
	queue_cap = cap;
	i = 0;
	do
	:: i < NODES -> async_res[i] = NONE; i++
	:: else -> break
	od;
	i = 0
}

/* a client that starts holding p permits */
inline hold(c, p)
{
	avail = avail - p;
	held = held + p;
	owns[c] = p;
	ghost = ghost + p
}

#ifndef FAIR
#define FAIR 1
#endif

init
{
	byte i;

	atomic {
#if defined(CFG_basic)
		/* one permit; a holder, a forever and a timed waiter, a newcomer */
		start(1, FAIR, 2);
		hold(0, 1);
		run holder(0, 1, 0, 0);
		run waiter(1, 1, 0, 0);
		run waiter(2, 1, 1, 0);
		run newcomer(3, 1, 1);
		nclients = 4
#elif defined(CFG_weighted)
		/* three permits; a big timed head, then small async and sync */
		start(3, FAIR, 3);
		hold(0, 3);
		run holder(0, 1, 2, 0);
		run waiter(1, 2, 1, 0);
		run async_waiter(2, 1, 0);
		run waiter(3, 1, 0, 0);
		nclients = 4
#elif defined(CFG_leave)
		/* a big timed head leaves while the small followers fit */
		start(3, FAIR, 3);
		hold(0, 3);
		run late_holder(0, 1, 2);
		run waiter(1, 2, 1, 0);
		run async_waiter(2, 1, 0);
		run waiter(3, 1, 0, 0);
		nclients = 4
#elif defined(CFG_cancel)
		/* pthread_cancel and bh_cancel_async racing grants */
		start(1, FAIR, 3);
		hold(0, 1);
		run holder(0, 1, 0, 0);
		run waiter(1, 1, 0, 1);
		run async_waiter(2, 1, 1);
		run waiter(3, 1, 0, 0);
		nclients = 4
#elif defined(CFG_close)
		/* bh_close between two releases, racing sync and async waiters */
		start(2, FAIR, 3);
		hold(0, 2);
		run holder_closer(0, 1, 1);
		run waiter(1, 1, 0, 0);
		run waiter(2, 2, 1, 0);
		run async_waiter(3, 2, 0);
		nclients = 4
#elif defined(CFG_close_resize)
		/* a resize racing bh_close: the close must stay (every CAS on the
		 * word rewrites only its own field) */
		start(2, FAIR, 3);
		hold(0, 2);
		run holder_closer(0, 1, 1);
		run waiter(1, 2, 0, 0);
		run resizer(2, 2, 0);
		nclients = 3
#elif defined(CFG_resize)
		/* shrink below queued requests, then grow */
		start(2, FAIR, 3);
		hold(0, 2);
		run holder(0, 1, 1, 0);
		run waiter(1, 2, 0, 0);
		run async_waiter(2, 2, 0);
		run resizer(3, 1, 3);
		nclients = 4
#elif defined(CFG_prewake)
		/* short holds: releases pre-wake the next head */
		start(1, FAIR, 3);
		hold(0, 1);
		run holder(0, 1, 0, 0);
		run waiter(1, 1, 0, 0);
		run waiter(2, 1, 1, 0);
		nclients = 3
#else
#error "choose a configuration: -DCFG_basic, _weighted, _leave, _cancel, _close, _close_resize, _resize, _prewake"
#endif
	};
	done == nclients;
	/* quiesced: nothing in flight or queued, everyone left exactly once */
	assert(qlen == 0 && nq == 0 && !woken && !starving);
	assert(ghost == 0 && held == 0 && avail == lim_set);
	i = 0;
	do
	:: i < NODES ->
		assert(owns[i] == 0 && node_owns[i] == 0 && joined[i] == left_q[i]);
		i++
	:: else -> break
	od;
	/* the library's counters equal what the callers saw */
	assert(lib_timed_out == seen_timeouts && lib_cancelled == seen_cancels)

	/*
	 * The host-wide bulkhead's recovery (processes that die at any
	 * step, reclaim, rebuild, lock takeover) is model/shm.pml.
	 */
}
