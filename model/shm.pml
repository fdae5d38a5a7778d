/*
 * The host-wide bulkhead's recovery protocol (src/shm/), checked with Spin.
 *
 * NPROC worker processes share one word (avail and held as the core keeps
 * them, limit = avail + held; the queued count, FROZEN, the epoch and the
 * grant bit)
 * and one internal lock. Each has three record words, each with its own
 * PEND window, and one queue node: the ledger (the slow paths' count) and
 * the two one-permit words, in (takes) and out (gives), which only grow;
 * what a process holds is ledger + in - out. A worker takes a permit (fast
 * path: open the window on in, CAS the word, close it with in + 1; slow
 * path: under the lock, take or queue on the ledger, then claim the grant
 * in a ledger window that checks for a freeze), uses it and gives it back
 * (fast path on out, or under the lock on the ledger, with a dispatch that
 * hands the permit to the queue's head). A fast take and a slow give leave
 * the ledger below zero; the sum stays exact. A worker registers first (takes
 * its process slot, without the lock), so it may do so while a recovery
 * of another process's death runs. The killer may kill one worker at
 * any step, holding the lock or not, inside a window or not. Survivors
 * find the dead when a wait polls (as the library's waiters do every
 * 100 ms) and when they take over the lock from a dead owner:
 *
 *   reclaim  every ledger of the dead is closed: add its ledger and its
 *            granted-but-unclaimed node back to the word, unqueue it, serve;
 *   rebuild  it died inside a window (on any of its three words), or
 *            holding the lock: freeze the word, wait until no living
 *            window is open (on any word), set held to what the living
 *            hold (their ledgers and granted nodes) and avail to the limit
 *            less what the living hold, requeue the living's nodes, thaw,
 *            serve.
 *
 * Both keep the recovery log: they write down the counters' values after
 * them (reclaimed, deaths) and, for a rebuild, the word it thaws to; they
 * commit by flipping the word's epoch (a reclaim with the permits it gives
 * back, a rebuild on its frozen word), then clear the dead, count, thaw (a
 * rebuild) and close the log. A lock taker that takes over from a dead
 * owner replays an open log: committed, it finishes it; else it drops it.
 * The killer may kill KILLS workers (default 1); with 2, a recoverer can
 * die in the middle of recovering the first.
 *
 * A handoff keeps a grant log: its node, written before the CAS that takes
 * the permit and flips the word's grant bit; a taker finishes a logged
 * grant whose CAS happened before it rebuilds, so the permit is the
 * waiter's and not counted as the dead granter's.
 *
 * Ghosts (never read by the protocol): taken[i] is what process i has
 * really taken off the word (a CAS it made, a grant made to it from the
 * granter's CAS on);
 * using[i] what its caller was told it holds; gone[i] that a recovery has
 * accounted for dead process i (its permits are back on the word);
 * given_back the sum of what the dead had taken when they went.
 *
 * Properties:
 *   - conservation: whenever the word is not frozen,
 *       avail + sum(taken[i], i not gone) == LIMIT
 *     (no permit lost, none duplicated, a dead process's returned once);
 *   - the limit never moves: avail + held == LIMIT in every state (every
 *     change of the word moves permits between the two, a rebuild's thaw
 *     sets held to what the living hold and avail to the rest);
 *   - in flight never above the limit: sum(using) <= LIMIT;
 *   - at quiesce (every worker finished or dead, a last caller scanned):
 *     avail == LIMIT, nothing queued, every dead process accounted for,
 *     the counters exact: reclaimed == given_back, deaths == the dead;
 *   - no living waiter waits forever (an invalid end state otherwise),
 *     which covers a grant made to a dead waiter being passed on.
 *
 * Unfair mode (-DFAIR=0; the default, FAIR=1, is BH_FAIR): a dispatch does
 * not hand the permit to an unfair head; it sets the word's WOKEN bit in a
 * CAS and marks the head's node WOKEN with the exchange that says whether
 * its owner sleeps (bhs_notify_locked), and the wake itself is sent after
 * the unlock (bhs_wake_later, bhs_flush_wakes): a step of its own, so a
 * kill can land between the mark and the wake, holding the lock or not.
 * Waiters sleep on their node's state word (SLEEPING; a wake reaches only
 * an owner asleep in the kernel); the woken head competes under the lock
 * in its ledger's window (take with the CAS if a permit is free, else back
 * to WAITING), and newcomers and fast gives go past it while the word is
 * WOKEN (barging). A reclaim that unqueues a dead head clears the word's
 * WOKEN mark; a rebuild's thaw word has none, and its census sends a
 * living WOKEN head back to WAITING and wakes it (its waker may have died
 * before sending the wake). Every recovery then wakes the nodes that were
 * told something (rewake_told): a scan that reclaimed someone and did not
 * rebuild wakes every WOKEN node, since a waker that died after marking
 * the head, under the lock or between its unlock and its wakes, left it
 * asleep, and the reclaim's dispatch, which finds the word WOKEN, leaves it
 * to come on its own; a rebuild wakes them only if it gave up (one that
 * ran has woken them in its census). These wakes go in the recoverer's
 * own batch, sent after its unlock, and the killer may strike there too
 * (-DKILLS=2): the head is then woken by its poll, which finds the dead
 * recoverer, or by the rewake of whoever reclaims it first. Left out: the
 * starvation guard (W_STARVING and the handoff to a starving head: an
 * unfair head that loses always waits again) and the pre-wake of a
 * short-hold head (prewake_head), which only adds wakes. A sleeper's poll
 * (every 100 ms in the code) is modelled only when it finds an unaccounted
 * dead process, as in fair mode: a waiter that nothing but its next poll
 * would wake counts as a lost wakeup.
 *
 * Fair mode has no sleep and no wake: a waiter watches its node's state
 * and polls when a dead process is left, so a handoff is seen at once and
 * a wake cannot be lost. The same gap for a GRANTED node (a granter dead
 * after the handoff, before its deferred wake; rewake_told wakes GRANTED
 * nodes too) is therefore not visible to this model; test_shm_crash kills
 * a granter there (after its unlock, and holding the lock after the
 * handoff). Nor are the failure states (SHUTDOWN, INVALID: no close and no
 * resize here) or async nodes (their agent's wake).
 *
 * -DMUTANT_<name> plants a defect; model/check.sh expects each to fail.
 * -DREACH=W_<name> turns a witness point into a failing assertion, to show
 * the path is reachable.
 */

#ifndef NPROC
#define NPROC 2
#endif
#ifndef LIMIT
#define LIMIT 1
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif
#ifndef KILLS
#define KILLS 1
#endif
#ifndef FAIR
#define FAIR 1
#endif

#define W_rebuild      1 /* a rebuild after a death inside a window */
#define W_takeover     2 /* the lock taken over from a dead owner */
#define W_dead_grant   3 /* a grant to a dead waiter passed on */
#define W_reclaim      4 /* a closed-ledger reclaim */
#define W_gave_up      5 /* a rebuild gave up on an open living window */
#define W_below_zero   6 /* a slow give of a fast take: the ledger below zero */
#define W_recoverer_died 7 /* a recoverer died with its log open */
#define W_grant_replayed 8 /* a dead granter's handoff finished by the taker */
#define W_compete_lost 9   /* a woken head lost the race and waits again */
#define W_barge_woken  10  /* a newcomer took a permit past a woken head */
#define W_waker_died   11  /* killed after marking a head WOKEN, the wake not sent */
#define W_rebuild_wakes 12 /* a rebuild woke a sleeping WOKEN head */
#define W_dead_woken_head 13 /* a reclaim unqueued a dead head the word had WOKEN */
#define W_rewake       14  /* a recovery's rewake is the only wake for a head asleep in the kernel */
#define W_rewaker_died 15  /* a recoverer killed after its unlock, that wake not sent */
#ifdef REACH
#define reached(w) assert(REACH != w)
#else
#define reached(w) skip
#endif

#define NS_IDLE    0
#define NS_WAITING 1
#define NS_GRANTED 2
#define NS_CLAIMED 3
#define NS_SLEEPING 4 /* unfair mode: asleep, or about to be, on the state word */
#define NS_WOKEN   5  /* unfair mode: the head, woken to compete */

#if FAIR
/* a queued node (queued_state()); only WAITING in fair mode */
#define queued(k) (nstate[k] == NS_WAITING)
/* no queued waiter stands in a newcomer's or a fast give's way */
#define NOQ (nq == 0)
#else
#define queued(k) (nstate[k] == NS_WAITING || nstate[k] == NS_SLEEPING || nstate[k] == NS_WOKEN)
#define NOQ (nq == 0 || wbit)
#endif

/* Arrays have room for three workers and the last caller (index 3);
 * workers beyond NPROC start finished and never run. */
#define SLOTS 4
#define LAST 3

/* the word */
byte avail = LIMIT;
byte held;      /* the word's held field: a take adds, a give subtracts */
byte nq;
bool frozen;
bool epoch;
/* the counters */
byte reclaimed;
byte deaths;
/* the recovery log: log_pid is the reclaimed process, NONE for a rebuild */
#define NONE 255
bool log_open;
bool log_epoch;
byte log_reclaimed, log_deaths, log_avail, log_held, log_nq, log_pid;
/* the grant bit of the word, and the grant log: the node, NONE for none */
bool gbit;
byte glog_h = NONE;
bool glog_pre;
/* the lock: 0 free, else owner + 1 */
byte lock;
#if !FAIR
bool wbit;              /* the word's WOKEN bit */
bool in_kernel[SLOTS];  /* asleep in the kernel on its node's state word */
byte wb[SLOTS];         /* wakes to send after the unlock, one bit per node */
#ifdef REACH
byte rwb[SLOTS];        /* ghost, for W_rewaker_died: the rewake's wakes in wb */
#endif
#endif
/* per process */
short ledger[SLOTS]; /* may run below zero: a fast take, a slow give */
byte tin[SLOTS];     /* in: fast takes */
byte tout[SLOTS];    /* out: fast gives */
bool pend_l[SLOTS];  /* a window open on the ledger */
bool pend_in[SLOTS]; /* ... on in */
bool pend_out[SLOTS];/* ... on out */
byte nstate[SLOTS];
byte ticket[SLOTS];
bool dead[SLOTS];
bool done[SLOTS];
bool registered[SLOTS];
bool cleared[SLOTS]; /* its ledgers and node cleared by a recovery */
/* ghosts */
byte taken[SLOTS];
byte using[SLOTS];
bool gone[SLOTS];
byte given_back;
byte next_ticket = 1;

#define owned(j) (gone[j] -> 0 : taken[j])
#define total (avail + owned(0) + owned(1) + owned(2) + taken[LAST])
/* w_take(1), and s_give(): a give of at most what the word holds */
#define W_TAKE1 avail--; held++
#define S_GIVE(n) if :: held < (n) -> avail = avail + held; held = 0 \
		     :: else -> avail = avail + (n); held = held - (n) fi
#define using_sum (using[0] + using[1] + using[2])
/* an unaccounted dead process */
#define dead_left(j) (dead[j] && !gone[j])
#define any_dead_left (dead_left(0) || dead_left(1) || dead_left(2))
#define over(j) (done[j] || dead[j])

#if FAIR
#define THAW_MARKS
#define marks_ok true
#else
#define THAW_MARKS ; wbit = false
/* the WOKEN mark only with a queued head */
#define marks_ok (!wbit || nq > 0)
#endif

/* The invariants, looked at in every reachable state. */
active proctype invariants()
{
end:	atomic {
		!((frozen || total == LIMIT) && using_sum <= LIMIT && avail + held == LIMIT &&
		  marks_ok) ->
		assert(frozen || total == LIMIT);
		assert(using_sum <= LIMIT);
		/* no change of the word moves the limit (avail + held) */
		assert(avail + held == LIMIT);
		assert(marks_ok)
	}
}

/* ---- the lock --------------------------------------------------------------- */

/* bhs_lock: take it, or take it over from a dead owner, replay its log
 * and rebuild. */
inline take_lock(me)
{
	if
	:: atomic { lock == 0 -> lock = me + 1 }
	:: atomic { lock != 0 && dead[lock - 1] -> lock = me + 1 };
		reached(W_takeover);
#ifndef MUTANT_no_grant_replay
		grant_replay();
#endif
#ifndef MUTANT_no_replay
		replay();
#endif
#ifndef MUTANT_takeover_no_rebuild
		rebuild(me, true)
#endif
	fi
}

#if FAIR
inline drop_lock(me)
{
	lock = 0
}
#else
/* bhs_unlock: the unlock, then the wakes the hold left to send
 * (bhs_flush_wakes), one step each; a wake reaches only an owner asleep
 * in the kernel on that node's word. A kill lands before any of them as
 * well as under the lock: the killer drops the wakes left in wb. Two wakes
 * for one node in a hold (a dispatch's and a rewake's) are one bit: the
 * second would only wake an owner that went back to sleep, to look at its
 * state again. */
#ifdef REACH
#define RWB_DONE(me) rwb[me] = 0;
#else
#define RWB_DONE(me)
#endif
inline drop_lock(me)
{
	lock = 0;
	do
	:: atomic { wb[me] & 1 -> wb[me] = wb[me] & 6; in_kernel[0] = false }
	:: atomic { (wb[me] & 3) == 2 -> wb[me] = wb[me] & 5; in_kernel[1] = false }
	:: atomic { (wb[me] & 7) == 4 -> wb[me] = 0; in_kernel[2] = false }
	:: else -> RWB_DONE(me) break
	od
}
#endif

/* ---- the queue ----------------------------------------------------------------- */

/* The head: the queued node with the lowest ticket, or NPROC. */
inline find_head(h)
{
	h = NPROC;
	k = 0;
	do
	:: k < NPROC ->
		if
		:: queued(k) && (h == NPROC || ticket[k] < ticket[h]) -> h = k
		:: else
		fi;
		k++
	:: else -> break
	od
}

/* bhs_dispatch_locked: hand permits to the head while they last. A
 * handoff writes its node in the grant log, takes the permit off the word
 * in a CAS that flips the grant bit (the permit is the waiter's from
 * then), marks the node and closes the log: four steps. A granter that
 * dies between them leaves the lock to a taker that finishes a logged
 * grant whose CAS happened (grant_replay) and then rebuilds. */
#if FAIR
inline dispatch(me)
{
	do
	:: atomic {
		find_head(h);
		if
		:: h == NPROC || avail == 0 -> rb = true
		:: else -> glog_h = h; glog_pre = gbit; rb = false
		fi
	   };
		if
		:: rb -> break
		:: else
		fi;
		atomic { W_TAKE1; nq--; gbit = !gbit; taken[h]++ };
		atomic {
			nstate[h] = NS_GRANTED;
			if
			:: dead[h] -> reached(W_dead_grant)
			:: else
			fi
		};
		glog_h = NONE
	od
}
#else
/* Unfair mode (serve()): the head is not handed the permit but woken to
 * compete for it. The grant log is written as for a handoff, the CAS sets
 * WOKEN (and leaves the grant bit as it is, so a replay finishes nothing),
 * the log is closed, then the notify's exchange marks the node WOKEN and,
 * if its owner went to sleep, leaves the wake for after the unlock. No
 * CAS when the permit went meanwhile or the head is already on its way. */
inline dispatch(me)
{
	atomic {
		find_head(h);
		if
		:: h == NPROC || avail == 0 -> rb = true
		:: else -> glog_h = h; glog_pre = gbit; rb = false
		fi
	};
	if
	:: rb
	:: else ->
		atomic {
			if
			:: avail == 0 || nq == 0 || wbit -> rb = true
			:: else -> wbit = true
			fi
		};
		glog_h = NONE;
		if
		:: rb
		:: else ->
			atomic {
				if
				:: nstate[h] == NS_SLEEPING -> wb[me] = wb[me] | (1 << h)
				:: else
				fi;
				nstate[h] = NS_WOKEN
			}
		fi
	fi;
	rb = false
}
#endif

/* bhs_grant_replay_locked: a logged handoff whose CAS happened (the grant
 * bit is no longer what the log says) and whose node is still queued is
 * finished; the log is closed either way. */
inline grant_replay()
{
	atomic {
		if
#if defined(MUTANT_grant_replay_ignores_state)
		:: glog_h != NONE && gbit != glog_pre ->
#elif defined(MUTANT_grant_replay_ignores_bit)
		:: glog_h != NONE && nstate[glog_h] == NS_WAITING ->
#else
		:: glog_h != NONE && gbit != glog_pre && queued(glog_h) ->
#endif
			nstate[glog_h] = NS_GRANTED; reached(W_grant_replayed)
		:: else
		fi;
		glog_h = NONE
	}
}

/* ---- recovery -------------------------------------------------------------------- */

/* What process j holds by its own record: its ledger and a granted node. */
#ifdef MUTANT_reclaim_skips_granted
#define holdings(j) (ledger[j] + tin[j] - tout[j])
#else
#define holdings(j) (ledger[j] + tin[j] - tout[j] + (nstate[j] == NS_GRANTED -> 1 : 0))
#endif

/* slot_open(): a window open on any of the process's three words. */
#if defined(MUTANT_open_ignores_in)
#define open_any(j) (pend_l[j] || pend_out[j])
#elif defined(MUTANT_open_ignores_out)
#define open_any(j) (pend_l[j] || pend_in[j])
#else
#define open_any(j) (pend_l[j] || pend_in[j] || pend_out[j])
#endif

/* clear_proc(): the dead process's node and ledgers cleared; doing it
 * again changes nothing. */
inline clear(j)
{
	atomic {
		nstate[j] = NS_IDLE;
		ledger[j] = tout[j] - tin[j]; /* free_slot: holds 0, counts go on */
#ifdef MUTANT_free_before_commit
		/* the slot freed at once, not left PS_RECLAIMED: a census after
		 * the recoverer's death no longer sees it taken */
		registered[j] = false;
#endif
		cleared[j] = true
	}
}

/* A recovery's commit accounts for dead process j (ghosts only). */
inline account(j)
{
	given_back = given_back + taken[j]; gone[j] = true; taken[j] = 0
}

/* rewake_told() (reclaim.c), after every recovery: a process that told a
 * sleeping waiter something (a WOKEN mark here; a grant, a failure) left
 * the wake for after its unlock, and dead before the wake went out, it
 * left the waiter asleep with news it has not seen, which no recovery
 * tells it again (a dispatch leaves a WOKEN head to come on its own). So
 * the recoverer wakes every node that was told something, in its own
 * deferred batch: sent after its unlock (drop_lock), where it can die too.
 * woken: WOKEN nodes as well; a rebuild that ran has woken those (its
 * census sends them back to WAITING with a wake). The code skips nodes
 * with no owner; a cleared node is IDLE here, and a wake for a dead one
 * reaches nobody. One step: under the lock, and a told state changes
 * without it only from GRANTED to CLAIMED, by an owner that is awake.
 * The fair model has no sleep and no wake (its waiters watch their node's
 * state), so the GRANTED case is not seen here: see the header. */
#if !FAIR
#ifdef REACH
/* the only wake for a node whose owner sleeps in the kernel */
#define RWB_NOTE(me, k) if :: in_kernel[k] && !(wb[me] & (1 << k)) -> \
				rwb[me] = rwb[me] | (1 << k); reached(W_rewake) :: else fi
#else
#define RWB_NOTE(me, k) skip
#endif
inline rewake(me, woken)
{
#ifdef MUTANT_recovery_no_rewake
	skip
#else
	atomic {
		k = 0;
		do
		:: k < NPROC ->
			if
			:: nstate[k] == NS_GRANTED || (woken && nstate[k] == NS_WOKEN) ->
				RWB_NOTE(me, k);
				wb[me] = wb[me] | (1 << k)
			:: else
			fi;
			k++
		:: else -> k = 0; break
		od
	}
#endif
}
#endif

/* replay(): an open log whose recovery committed (the word's epoch is the
 * log's) is finished, each step idempotent; one that did not is dropped. */
inline replay()
{
	if
#ifdef MUTANT_replay_ignores_epoch
	:: log_open ->
#else
	:: log_open && epoch == log_epoch ->
#endif
		if
		:: log_pid != NONE && !cleared[log_pid] -> clear(log_pid)
		:: else
		fi;
		atomic { reclaimed = log_reclaimed; deaths = log_deaths };
		atomic {
			if
			:: frozen -> avail = log_avail; held = log_held; nq = log_nq; frozen = false THAW_MARKS
			:: else
			fi
		};
		log_open = false
	:: log_open && epoch != log_epoch -> log_open = false
	:: else
	fi
}

/* A dead process the rebuild frees: registered at the census (tkn, the
 * segment's process slot taken) and left out of the living. One that
 * registers after the census holds nothing (the word is frozen); if it
 * dies, a later scan finds it. */
#ifdef MUTANT_keep_dead_looking_alive
/* freed on a second look at liveness, not from the census: a registrant
 * holding the dead one's liveness lock for an instant makes it look alive
 * (here process 0, always), and it is kept after its share was left out of
 * the sums */
#define freed(k) (tkn[k] && !live[k] && !gone[k] && k != 0)
#elif defined(MUTANT_free_late_registrant)
/* every registered process left out of the census, as if one that
 * registered after it had died */
#define freed(k) (!live[k] && registered[k] && !gone[k])
#else
#define freed(k) (tkn[k] && !live[k] && !gone[k])
#endif

/* rebuild (reclaim.c): under the lock. must: the lock was taken over, so
 * no giving up. */
inline rebuild(me, must)
{
	live_held = 0;
#ifdef MUTANT_census_before_freeze
	atomic {
		k = 0;
		do
		:: k < NPROC -> if :: !dead[k] -> live_held = live_held + holdings(k) :: else fi; k++
		:: else -> break
		od
	};
#endif
	atomic { saved = held; frozen = true };
	/* the living, probed after the freeze */
	atomic {
		k = 0;
		do
		:: k < NPROC -> live[k] = registered[k] && !dead[k]; tkn[k] = registered[k]; k++
		:: else -> break
		od
	};
	/* wait until no living window is open (one that dies open stops
	 * counting as living); or give up, when one stays open and we may */
	k = 0;
	do
	:: k == NPROC -> break
	:: k < NPROC && (!live[k] || !open_any(k)) -> k++
	:: k < NPROC && live[k] && open_any(k) && dead[k] -> live[k] = false; k++
#ifdef MUTANT_no_wait_windows
	:: k < NPROC && live[k] && open_any(k) && !dead[k] -> k++
#endif
	:: k < NPROC && live[k] && open_any(k) && !dead[k] && !must ->
		reached(W_gave_up);
		k = NPROC + 1;
		break
	od;
	if
	:: k == NPROC + 1 ->
		/* nothing CASes a frozen word and we hold the lock */
		atomic { frozen = false }
#if !FAIR
		/* bhs_rebuild_locked(): the told woken, WOKEN nodes too */
		; rewake(me, true)
#endif
	:: else ->
		/* census, log_open */
		atomic {
#ifndef MUTANT_census_before_freeze
			k = 0;
			do
			:: k < NPROC -> if :: live[k] -> live_held = live_held + holdings(k) :: else fi; k++
			:: else -> break
			od;
#endif
			/* the thaw word: w_make(limit - held, limit, 0) */
#ifdef MUTANT_rebuild_keeps_held
			/* avail from the ledgers, held left as the frozen word had it */
			log_avail = LIMIT - live_held;
			log_held = saved;
#else
			log_avail = LIMIT - live_held;
			log_held = live_held;
#endif
			/* reclaimed: what the word held beyond what the living hold */
			log_reclaimed = reclaimed;
			if
			:: saved > live_held ->
				log_reclaimed = reclaimed + (saved - live_held)
			:: else
			fi;
			log_deaths = deaths;
			log_nq = 0;
			k = 0;
			do
			:: k < NPROC ->
				if
				:: live[k] && queued(k) ->
					log_nq++;
#if !FAIR
					/* census_nodes(): a WOKEN head back to WAITING,
					 * and woken after the unlock (its waker may have
					 * died before its own wake); the dispatch below
					 * serves the head afresh */
					if
					:: nstate[k] == NS_WOKEN ->
						nstate[k] = NS_WAITING;
						if
						:: in_kernel[k] -> reached(W_rebuild_wakes)
						:: else
						fi;
#ifndef MUTANT_rebuild_no_wake
						wb[me] = wb[me] | (1 << k)
#endif
					:: else
					fi
#endif
				:: else
				fi;
				dying[k] = freed(k);
				if
				:: dying[k] -> log_deaths++
				:: else
				fi;
				k++
			:: else -> break
			od;
			log_pid = NONE;
			log_epoch = !epoch;
			log_open = true
		};
		/* clear the dead */
		k = 0;
		do
		:: k < NPROC -> if :: dying[k] -> clear(k) :: else fi; k++
		:: else -> break
		od;
		/* the commit, on the frozen word */
		atomic {
			epoch = !epoch;
			k = 0;
			do
			:: k < NPROC -> if :: dying[k] -> account(k) :: else fi; k++
			:: else -> break
			od
		};
		atomic { reclaimed = log_reclaimed; deaths = log_deaths };
		/* the thaw: no WOKEN (nor STARVING) mark in the word it makes */
		atomic { avail = log_avail; held = log_held; nq = log_nq; frozen = false THAW_MARKS };
		log_open = false;
		dispatch(me)
#if !FAIR
		/* bhs_rebuild_locked(): the told woken (GRANTED nodes; this
		 * model's unfair dispatch grants nothing, so none) */
		; rewake(me, false)
#endif
	fi
}

/* reclaim (reclaim.c): every ledger of j is closed, its holdings exact. */
inline reclaim(me, j)
{
	/* unqueue_proc(): its queued node leaves the word's count first, in
	 * a CAS of its own (bhs_unqueue_locked; the head's marks go with it),
	 * before anything is logged; its state stays until clear_proc */
	atomic {
		if
		:: queued(j) ->
#if !FAIR
			/* a leaving head takes the WOKEN mark with it */
			find_head(h);
			if
			:: h == j && wbit ->
				reached(W_dead_woken_head);
#ifndef MUTANT_dead_woken_mark_stays
				wbit = false
#endif
			:: else
			fi;
			h = 0;
#endif
			nq--
		:: else
		fi
	};
	atomic {
		log_reclaimed = reclaimed + holdings(j);
		log_deaths = deaths + 1;
		log_pid = j;
		log_epoch = !epoch;
		log_open = true
	};
	/* the commit: the permits back, the epoch flipped */
	atomic {
		S_GIVE(holdings(j));
		epoch = !epoch;
		account(j);
		reached(W_reclaim)
	};
	clear(j);
	atomic { reclaimed = log_reclaimed; deaths = log_deaths };
	log_open = false;
#ifndef MUTANT_reclaim_no_dispatch
	dispatch(me)
#endif
}

#if FAIR
#define FOUND
#define FOUND_CLEAR
#else
#define FOUND ; found = true
#define FOUND_CLEAR ; found = false
#endif

/* bhs_scan_locked: reclaim the dead whose ledgers are closed; rebuild when
 * one died inside a window (opened: a flag of its own, which the dispatch
 * in a reclaim does not touch), which wakes the told itself; else, when it
 * reclaimed someone (found), wake the told, the WOKEN among them. */
inline scan(me)
{
	j = 0;
	opened = false;
	do
	:: j < NPROC ->
		if
		:: dead_left(j) && open_any(j) ->
#ifdef MUTANT_trust_open_ledger
			reclaim(me, j) FOUND
#else
			opened = true
#endif
		:: dead_left(j) && !open_any(j) -> reclaim(me, j) FOUND
		:: else
		fi;
		j++
	:: else -> break
	od;
	if
	:: opened -> opened = false FOUND_CLEAR; reached(W_rebuild); rebuild(me, false)
#if !FAIR
	:: !opened && found -> found = false; rewake(me, true)
#endif
	:: else
	fi
}

/* ---- a worker ---------------------------------------------------------------------- */

#if !FAIR
/* compete() (wait.c): the woken head races newcomers for the permit, under
 * the lock, in its ledger's window: one CAS takes it (and leaves the
 * queue) or only clears the WOKEN mark; then the node leaves the queue and
 * the rest is served, or it waits again. won: it holds the permit. */
inline compete(me)
{
	take_lock(me);
	if
	:: nstate[me] != NS_WOKEN -> won = false /* a rebuild sent it back to WAITING */
	:: else ->
		pend_l[me] = true;
		atomic {
			won = avail > 0;
			if
			:: won -> W_TAKE1; nq--; taken[me]++
			:: else -> reached(W_compete_lost)
			fi;
			wbit = false
		};
		atomic { if :: won -> ledger[me]++ :: else fi; pend_l[me] = false };
		if
		:: won -> nstate[me] = NS_IDLE; dispatch(me)
		:: else -> nstate[me] = NS_WAITING
		fi
	fi;
	drop_lock(me)
}

/* wait_loop() (wait.c), no deadline: load the state; WOKEN: compete;
 * WAITING (the head, after its spin): CAS to SLEEPING; SLEEPING: the futex
 * wait, which sleeps only if the word still reads SLEEPING and returns on a
 * wake, or at a poll, which is modelled when it finds an unaccounted dead
 * process (then it scans, and the loop looks at the state again). A load
 * and the CAS or the futex's check that follows it are one step: a state
 * that changed between them only sends the loop round again. */
inline wait_loop(me)
{
	do
	:: nstate[me] == NS_GRANTED -> break
	:: nstate[me] == NS_WOKEN ->
		compete(me);
		if
		:: won -> break
		:: else
		fi
	:: atomic { nstate[me] == NS_WAITING -> nstate[me] = NS_SLEEPING }
	:: atomic { nstate[me] == NS_SLEEPING -> in_kernel[me] = true };
		if
		:: !in_kernel[me] /* woken */
		:: atomic { in_kernel[me] && any_dead_left -> in_kernel[me] = false };
			take_lock(me); scan(me); drop_lock(me)
		fi
	od
}
#endif

proctype worker(byte me)
{
	byte round, h, k, j, saved, live_held;
	bool ok, rb, opened, found, won;
	bool live[NPROC];
	bool tkn[NPROC];
	bool dying[NPROC];

	{
		registered[me] = true;
		do
		:: round == ROUNDS -> break
		:: else ->
			/* acquire, fast path (one permit): open on in, CAS,
			 * close with in + 1 */
#ifndef MUTANT_take_no_window
			pend_in[me] = true;
#endif
			atomic {
				if
				:: !frozen && NOQ && avail > 0 -> W_TAKE1; taken[me]++; ok = true
#if !FAIR
					;
					if
					:: nq > 0 -> reached(W_barge_woken)
					:: else
					fi
#endif
				:: else -> ok = false
				fi
			};
			atomic { if :: ok -> tin[me]++ :: else fi; pend_in[me] = false };
			if
			:: ok
			:: else ->
				/* slow path, under the lock */
				take_lock(me);
				/* bhs_admit_locked: one CAS takes or queues; the
				 * node is marked and linked after the window
				 * closed (a death between leaves the queued count
				 * one above the nodes, for the takeover's rebuild) */
				pend_l[me] = true;
				atomic {
					if
					:: NOQ && avail > 0 -> W_TAKE1; taken[me]++; ok = true
					:: else -> nq++; ok = false
					fi
				};
				atomic { if :: ok -> ledger[me]++ :: else fi; pend_l[me] = false };
				if
				:: ok -> drop_lock(me)
				:: else ->
					atomic {
						nstate[me] = NS_WAITING; ticket[me] = next_ticket;
						next_ticket++;
#if !FAIR
						/* enqueue(): not the head, no point spinning */
						find_head(h);
						if
						:: h != me -> nstate[me] = NS_SLEEPING
						:: else
						fi;
						h = 0
#endif
					};
					drop_lock(me);
#if FAIR
					/* wait for the grant, polling for the dead */
					do
					:: nstate[me] == NS_GRANTED -> break
					:: any_dead_left && nstate[me] != NS_GRANTED ->
						take_lock(me); scan(me); drop_lock(me)
					od;
#else
					wait_loop(me);
					if
					:: won -> won = false; goto owned
					:: else
					fi;
#endif
					/* claim it in a window that checks for a freeze */
					do
					:: pend_l[me] = true;
						if
#ifndef MUTANT_claim_no_freeze_check
						:: frozen -> pend_l[me] = false;
							take_lock(me); drop_lock(me)
#endif
						:: else -> break
						fi
					od;
					atomic { nstate[me] = NS_CLAIMED };
					atomic { ledger[me]++; pend_l[me] = false };
					nstate[me] = NS_IDLE
				fi
			fi;
owned:
			using[me] = 1;
			/* release */
			using[me] = 0;
			/* release, fast path (one permit): open on out, CAS,
			 * close with out + 1 */
			pend_out[me] = true;
			atomic {
				if
				:: !frozen && NOQ && held > 0 -> avail++; held--; taken[me]--; ok = true
				:: else -> ok = false
				fi
			};
			atomic { if :: ok -> tout[me]++ :: else fi; pend_out[me] = false };
			if
			:: ok
			:: else ->
				take_lock(me);
				pend_l[me] = true;
				atomic { S_GIVE(1); taken[me]-- };
				atomic {
					ledger[me]--; pend_l[me] = false;
					if
					:: ledger[me] < 0 -> reached(W_below_zero)
					:: else
					fi
				};
				dispatch(me);
				drop_lock(me)
			fi;
			round++
		od;
		done[me] = true
	} unless { dead[me] }
}

/* Kills at most KILLS workers, each at any step. */
active proctype killer()
{
	byte v, n;

	do
	:: n == KILLS -> break
	:: n < KILLS ->
		if
		:: break
		:: atomic {
			select(v : 0 .. NPROC - 1);
			if
			:: !done[v] && !dead[v] && registered[v] ->
				dead[v] = true; using[v] = 0; n++;
				if
				:: lock == v + 1 && log_open -> reached(W_recoverer_died)
				:: else
				fi
#if !FAIR
				;
#ifdef REACH
				/* a recoverer past its unlock, the wake its rewake
				 * left for a sleeper not sent */
				if
				:: lock != v + 1 && (rwb[v] & wb[v]) != 0 -> reached(W_rewaker_died)
				:: else
				fi;
				rwb[v] = 0;
#endif
				/* wakes it never sent: a head it marked WOKEN sleeps on */
				if
				:: wb[v] != 0 -> reached(W_waker_died); wb[v] = 0
				:: else
				fi
#endif
			:: else
			fi
		   }
		fi
	od
}

/* The last caller: once every worker has finished or died, it looks for
 * the dead (as any call would) and checks that everything came back. */
active proctype last_caller()
{
	byte h, k, j, saved, live_held;
	bool rb, opened, found;
	bool live[NPROC];
	bool tkn[NPROC];
	bool dying[NPROC];
	byte me = LAST; /* a process of its own, never killed */

	atomic {
		run worker(0);
		if :: NPROC > 1 -> run worker(1) :: else -> done[1] = true fi;
		if :: NPROC > 2 -> run worker(2) :: else -> done[2] = true fi
	};
	over(0) && over(1) && over(2);
	do
	:: any_dead_left -> take_lock(me); scan(me); drop_lock(me)
	:: else -> break
	od;
	assert(lock == 0 && avail == LIMIT && held == 0 && nq == 0 && !frozen);
#if !FAIR
	assert(!wbit);
#endif
	/* a freed slot holds nothing, whatever its words counted */
	assert(!gone[0] || holdings(0) == 0);
	assert(!gone[1] || holdings(1) == 0);
	assert(!gone[2] || holdings(2) == 0);
	assert(!dead[0] || gone[0]);
	assert(!dead[1] || gone[1]);
	assert(!dead[2] || gone[2]);
	assert(!log_open);
	assert(reclaimed == given_back);
	assert(deaths == dead[0] + dead[1] + dead[2])
}
