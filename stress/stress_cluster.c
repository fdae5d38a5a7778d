/* Cluster soak: three instance processes (tests/cluster_inst) share a limit
 * of 10 through a redis-server and call a backend here that counts its own
 * concurrency, while random faults follow one another for
 * BH_STRESS_SECONDS: an instance SIGSTOPped (up to 1.5 s, past its lease)
 * or SIGKILLed and started again, connections cut (CLIENT KILL), stalls
 * (DEBUG SLEEP), pauses (CLIENT PAUSE), redis-server SIGSTOPped or
 * SIGKILLed and restarted empty, demand moving.
 *
 * The instances have no fallback permits, their calls (20 ms) are shorter
 * than the lease margin (60 ms), and an empty store is re-learned: the
 * backend must never see more than the limit. Should it, the instances
 * must have reported at least the excess as over-admission (a permit held
 * past its lease by a thread the scheduler kept away that long): anything
 * else fails. Ends with each instance still served. BH_STRESS_SEED replays
 * the choice of faults. Passes, saying so, without redis-server. */
#define _GNU_SOURCE /* pipe2, accept4 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RIG_CHECK(cond) \
	do { \
		if (!(cond)) { \
			printf("stress_cluster: FAIL %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
			fflush(stdout); \
			exit(1); \
		} \
	} while (0)
#include "cluster_rig.h"

#define N 3
#define LIMIT 10

static struct inst insts[N];
static char name[64];
static unsigned long long rng;

static unsigned pick(unsigned n)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)((rng >> 33) % n);
}

/* Open may fail while the store is paused or busy (-ETIMEDOUT, -EAGAIN):
 * a real instance would try again, so does this one. */
static void start(int i)
{
	static const char *labels[N] = { "A", "B", "C" };
	uint64_t until = rh_now() + 10 * 1000000000ull;
	int rc;

	while ((rc = inst_try_start(&insts[i], labels[i], name, LIMIT, "--fallback", "0",
				    NULL)) != 0) {
		printf("stress_cluster: open: %s, again\n", strerror(-rc));
		RIG_CHECK(rh_now() < until);
		rh_sleep_ms(100);
	}
	inst_say(&insts[i], "demand %u", 2 + pick(7));
}

/* A failed check exits: take the instances and the server along. */
static void cleanup(void)
{
	rig_kill_all();
	redis_stop(&srv);
}

/* Stopped from outside (stress/run.sh's timeout on a hang, ^C): the server
 * runs in a process group of its own and outlives us unless taken along
 * here, with its temporary directory. kill, waitpid, unlink and rmdir are
 * async-signal-safe. */
static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static long long reported(void)
{
	long long sum = 0;

	for (int i = 0; i < N; i++)
		sum += inst_stats(&insts[i]).over_max;
	return sum;
}

static void *debug_sleep(void *arg)
{
	(void)arg;
	rh_do(&srv, "DEBUG SLEEP 0.2");
	return NULL;
}

/* One fault, applied and undone; returns its name. */
static const char *fault(void)
{
	int i = (int)pick(N);
	pthread_t t;

	switch (pick(8)) {
	case 0:
		kill(insts[i].pid, SIGSTOP);
		rh_sleep_ms(100 + pick(1400));
		kill(insts[i].pid, SIGCONT);
		return "instance SIGSTOP";
	case 1:
		inst_kill(&insts[i]);
		rh_sleep_ms(pick(800));
		start(i);
		return "instance SIGKILL";
	case 2:
		rh_do(&srv, "CLIENT KILL TYPE normal SKIPME yes");
		return "CLIENT KILL";
	case 3:
		if (pthread_create(&t, NULL, debug_sleep, NULL) == 0)
			pthread_join(t, NULL);
		return "DEBUG SLEEP";
	case 4:
		rh_do(&srv, "CLIENT PAUSE %u ALL", 100 + pick(1100));
		return "CLIENT PAUSE";
	case 5:
		redis_signal(&srv, SIGSTOP);
		rh_sleep_ms(100 + pick(1200));
		redis_signal(&srv, SIGCONT);
		return "redis-server SIGSTOP";
	case 6:
		redis_kill(&srv, SIGKILL);
		rh_sleep_ms(pick(500));
		RIG_CHECK(redis_restart(&srv) == 0);
		return "redis-server restarted empty";
	default:
		inst_say(&insts[i], "demand %u", pick(9));
		return "demand";
	}
}

int main(void)
{
	const char *secs = getenv("BH_STRESS_SECONDS"), *seed = getenv("BH_STRESS_SEED");
	uint64_t end;
	int worst = 0, faults = 0, r;
	long long calls[N];

	rng = seed ? strtoull(seed, NULL, 10) : (unsigned long long)rh_now();
	printf("stress_cluster: seed %llu\n", rng);
	if ((r = redis_start(&srv, false)) == 77) {
		printf("stress_cluster: PASS (skipped: redis-server is not installed)\n");
		return 0;
	}
	atexit(cleanup);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGHUP, on_signal);
	RIG_CHECK(r == 0 && find_inst() == 0 && backend_start() == 0);
	end = rh_now() + (uint64_t)((secs ? atof(secs) : 3) * 1e9);
	rig_fresh = false; /* a store found empty is re-learned: every restart too */
	name_for("soak", name, sizeof(name));
	for (int i = 0; i < N; i++)
		start(i);
	rh_sleep_ms(LEASE_MS + 200); /* the first learning period */
	peak_window();
	while (rh_now() < end) {
		const char *what = fault();
		int peak;

		rh_sleep_ms(100 + pick(400));
		peak = peak_window();
		faults++;
		if (peak > worst)
			worst = peak;
		if (peak > LIMIT) {
			long long rep = reported();

			printf("stress_cluster: backend saw %d of %d after %s; instances reported %lld\n",
			       peak, LIMIT, what, rep);
			RIG_CHECK(rep >= peak - LIMIT);
		}
	}
	/* Every instance is still served once the faults stop. */
	for (int i = 0; i < N; i++) {
		inst_say(&insts[i], "demand 4");
		calls[i] = inst_stats(&insts[i]).calls;
	}
	rh_sleep_ms(2 * LEASE_MS + 500);
	for (int i = 0; i < N; i++)
		RIG_CHECK(inst_stats(&insts[i]).calls > calls[i]);
	RIG_CHECK(peak_window() <= LIMIT);
	for (int i = 0; i < N; i++)
		inst_quit(&insts[i]);
	printf("stress_cluster: PASS %d faults, backend peak %d of %d\n", faults, worst, LIMIT);
	return 0;
}
