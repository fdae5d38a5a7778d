/* Reproducer (public API only): a pthread_cancel that races the end of
 * bh_acquire's wait can act after bh_acquire has returned, at a later
 * cancellation point where the caller has disabled cancellation.
 *
 * Workers enable cancellation for bh_acquire alone, disable it, hold the
 * permit across nanosleep() (a cancellation point, but cancellation is
 * disabled), then release. Another thread floods them with SIGUSR1 and
 * cancels them at random. Exits 1 as soon as a worker dies while holding a
 * permit, 0 if none did within BH_STRESS_SECONDS (default 10).
 *
 * Why (glibc 2.36): the core waits with pthread_setcanceltype(ASYNC) around
 * a raw futex call. pthread_cancel on a thread in that window marks it
 * CANCELING and sends SIGCANCEL; the handler sets CANCELED and acts if the
 * type bit is ASYNC when the signal lands, without looking at the cancel
 * state. glibc's own cancellable waits (__pthread_disable_asynccancel) wait
 * for that in-flight signal before leaving the async region;
 * pthread_setcanceltype(DEFERRED) does not. If the signal lands later,
 * inside any glibc cancellation point (which sets the type bit for its
 * syscall), the thread is cancelled there, cancellation disabled or not. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bulkhead.h"

#define NWORKERS 6

static bulkhead_t *bh;
static pthread_t workers[NWORKERS];
static pthread_mutex_t reg = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int escaped, stop;
static _Atomic long acquired, cancelled;
static __thread int holding;

static void on_signal(int sig)
{
	(void)sig;
}

static void on_exit_check(void *arg)
{
	(void)arg;
	if (holding)
		atomic_fetch_add(&escaped, 1);
	else
		atomic_fetch_add(&cancelled, 1);
}

static void *worker(void *arg)
{
	(void)arg;
	pthread_cleanup_push(on_exit_check, NULL);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	while (!atomic_load(&stop)) {
		struct timespec hold = { 0, 20000 };
		int r;

		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		r = bh_acquire(bh, 1, bh_now_ns() + 200 * BH_USEC);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (r != 0)
			continue;
		atomic_fetch_add(&acquired, 1);
		holding = 1;
		nanosleep(&hold, NULL); /* must not be cancelled: disabled */
		holding = 0;
		bh_release(bh, 1);
	}
	pthread_cleanup_pop(0);
	return NULL;
}

static void *signaller(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		struct timespec gap = { 0, 10000 };

		pthread_mutex_lock(&reg);
		pthread_kill(workers[rand() % NWORKERS], SIGUSR1);
		pthread_mutex_unlock(&reg);
		nanosleep(&gap, NULL);
	}
	return NULL;
}

int main(void)
{
	struct bh_config cfg = { .max_concurrent = 1, .queue_capacity = BH_QUEUE_UNBOUNDED };
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART */
	const char *s = getenv("BH_STRESS_SECONDS"), *seed_env = getenv("BH_STRESS_SEED");
	uint64_t end = bh_now_ns() + (uint64_t)((s ? atof(s) : 10.0) * 1e9);
	unsigned seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 0) : (unsigned)bh_now_ns();
	pthread_t sig;

	printf("cancel_escape: seed=0x%x (replay with BH_STRESS_SEED)\n", seed);
	fflush(stdout);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	if (bh_create(&cfg, &bh) != 0)
		return 2;
	for (int i = 0; i < NWORKERS; i++)
		pthread_create(&workers[i], NULL, worker, NULL);
	pthread_create(&sig, NULL, signaller, NULL);
	while (!atomic_load(&escaped) && bh_now_ns() < end) {
		struct timespec gap = { 0, (50 + rand_r(&seed) % 500) * 1000 };
		int k = rand_r(&seed) % NWORKERS;

		nanosleep(&gap, NULL);
		pthread_mutex_lock(&reg);
		pthread_cancel(workers[k]);
		pthread_join(workers[k], NULL);
		pthread_create(&workers[k], NULL, worker, NULL);
		pthread_mutex_unlock(&reg);
	}
	atomic_store(&stop, 1);
	pthread_join(sig, NULL);
	for (int i = 0; i < NWORKERS; i++)
		pthread_join(workers[i], NULL);
	printf("cancel_escape: %s %ld acquires, %ld cancelled inside bh_acquire, %d cancelled "
	       "later while holding a permit with cancellation disabled\n",
	       atomic_load(&escaped) ? "FAIL" : "PASS", atomic_load(&acquired),
	       atomic_load(&cancelled), atomic_load(&escaped));
	return atomic_load(&escaped) ? 1 : 0;
}
