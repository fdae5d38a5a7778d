/* The thread indices (src/core/tindex.c) that give each live thread its own
 * counter slot in every bulkhead. The lock that guards them is played
 * through the linker: this program is linked with
 * --wrap=pthread_mutex_lock, so the core's calls reach the wrapper below,
 * which can park a thread right after it took a lock. The shared library,
 * where the build made one, is loaded with dlopen. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
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

/* The shared library as a plugin loads it: dlopen, use, dlclose. */
struct plugin {
	void *so;
	int (*create)(const struct bh_config *, bulkhead_t **);
	int (*try_acquire)(bulkhead_t *, uint32_t);
	int (*release)(bulkhead_t *, uint32_t);
	void (*destroy)(bulkhead_t *);
};

static void *plugin_sym(struct plugin *p, const char *name)
{
	void *f = dlsym(p->so, name);

	if (!f)
		_exit(2);
	return f;
}

static void plugin_open(struct plugin *p, const char *path)
{
	p->so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!p->so)
		_exit(2);
	p->create = plugin_sym(p, "bh_create");
	p->try_acquire = plugin_sym(p, "bh_try_acquire");
	p->release = plugin_sym(p, "bh_release");
	p->destroy = plugin_sym(p, "bh_destroy");
}

static struct plugin plugin;
static pthread_barrier_t used, unloaded;

/* Takes a thread index in the loaded copy, then outlives the dlclose. */
static void *use_then_outlive(void *bh)
{
	if (plugin.try_acquire(bh, 1) != 0 || plugin.release(bh, 1) != 0)
		_exit(3);
	pthread_barrier_wait(&used);
	pthread_barrier_wait(&unloaded);
	return NULL; /* the thread exits with the library closed */
}

/* In a child, so that a crash is a status: load, use on a thread, unload,
 * let the thread exit. */
static int plugin_round(const char *path)
{
	struct bh_config cfg = { .max_concurrent = 1 };
	bulkhead_t *bh;
	pthread_t t;

	alarm(10);
	signal(SIGSEGV, SIG_DFL); /* a crash is the status, not cmocka's report */
	plugin_open(&plugin, path);
	if (plugin.create(&cfg, &bh) != 0)
		return 4;
	pthread_barrier_init(&used, NULL, 2);
	pthread_barrier_init(&unloaded, NULL, 2);
	if (pthread_create(&t, NULL, use_then_outlive, bh) != 0)
		return 5;
	pthread_barrier_wait(&used);
	plugin.destroy(bh);
	if (dlclose(plugin.so) != 0)
		return 6;
	pthread_barrier_wait(&unloaded);
	return pthread_join(t, NULL) == 0 ? 0 : 7;
}

/* A program may dlopen the library, use it on its threads and dlclose it
 * while they live (a plugin unloaded on reload): a thread that took an
 * index and exits afterwards must not call into unmapped code. */
static void test_thread_exit_after_dlclose(void **state)
{
	const char *top = getenv("top_builddir");
	char path[4096];
	pid_t pid;

	(void)state;
	snprintf(path, sizeof(path), "%s/src/.libs/libbulkhead.so", top ? top : ".");
	if (access(path, R_OK) != 0)
		skip(); /* a static-only build */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(plugin_round(path));
	assert_int_equal(reap_status(pid), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_child_takes_index),
		cmocka_unit_test(test_thread_exit_after_dlclose),
	};

	alarm(60);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
