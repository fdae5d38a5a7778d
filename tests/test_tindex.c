/* The thread indices (src/core/tindex.c) that give each live thread its own
 * counter slot in every bulkhead. The lock that guards them is played
 * through the linker: this program is linked with
 * --wrap=pthread_mutex_lock, so the core's calls reach the wrapper below,
 * which can park a thread right after it took a lock. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __wrap_pthread_mutex_lock(pthread_mutex_t *m);

/* Set on a thread: the next lock it takes parks it, holding that lock,
 * until the test lets it go. */
static __thread bool park_next_lock;
static pthread_barrier_t holding, released;

int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
	int r = __real_pthread_mutex_lock(m);

	if (park_next_lock) {
		park_next_lock = false;
		pthread_barrier_wait(&holding);
		pthread_barrier_wait(&released);
	}
	return r;
}

/* A new thread's first call: the only lock it takes is the indices'. */
static void *first_call_parks(void *bh)
{
	park_next_lock = true;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	return NULL;
}

static int reap_status(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A thread of the parent is taking its index when another forks: in the
 * child that thread does not exist, and a thread there that takes its
 * first index (here the forking one) must not wait for it. */
static void test_fork_child_takes_index(void **state)
{
	bulkhead_t *bh = make_bh(2, 0, 0);
	pthread_t t;
	pid_t pid;

	(void)state;
	assert_int_equal(bhi_tindex, 0); /* this thread has none yet */
	pthread_barrier_init(&holding, NULL, 2);
	pthread_barrier_init(&released, NULL, 2);
	assert_int_equal(pthread_create(&t, NULL, first_call_parks, bh), 0);
	pthread_barrier_wait(&holding); /* t holds the indices' lock */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(10); /* a hang fails the test instead of stalling it */
		_exit(bh_try_acquire(bh, 1) == 0 && bhi_tindex != 0 ? 0 : 1);
	}
	pthread_barrier_wait(&released);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(reap_status(pid), 0);
	assert_int_equal(stats_of(bh).in_flight, 0);
	pthread_barrier_destroy(&holding);
	pthread_barrier_destroy(&released);
	bh_destroy(bh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_child_takes_index),
	};

	alarm(60);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
