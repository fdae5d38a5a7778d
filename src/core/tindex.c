/* Small per-thread indices, reused after a thread exits, so each live thread
 * owns one counter slot in every bulkhead (see bhi_count). */
#include <errno.h>
#include <pthread.h>

#include "internal.h"
#include "shm/dispatch.h" /* bhs_forget_last */

#define TINDEX_MAX BHI_TINDEX_MAX

__thread uint32_t bhi_tindex __attribute__((tls_model("initial-exec")));
/* Which owner of its index this thread is: never 0 once assigned. */
__thread uint64_t bhi_tgen __attribute__((tls_model("initial-exec")));
static uint64_t tindex_gen;

static pthread_mutex_t tindex_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tindex_used[TINDEX_MAX / 64];
static pthread_key_t tindex_key;
static pthread_once_t tindex_once = PTHREAD_ONCE_INIT;
static int tindex_key_ok;

static void tindex_free(void *arg)
{
	uint32_t i = (uint32_t)(uintptr_t)arg - 1u;

	/* A later call on this thread (another key's destructor) takes a
	 * fresh index; the mutex orders our last counts before its reuse.
	 * The host-wide fast paths forget the slot they kept for this index
	 * too: its next owner writes it. */
	bhi_tindex = 0;
	bhs_forget_last();
	pthread_mutex_lock(&tindex_lock);
	tindex_used[i / 64] &= ~(1ull << (i % 64));
	pthread_mutex_unlock(&tindex_lock);
}

/* A fork child runs the forking thread alone: a thread of the parent that
 * was taking or giving back an index at the fork holds the lock for good
 * there, and the child's first thread to need an index would wait for it.
 * So the child gets a lock of its own. What that thread was changing is
 * one word of the bitmap and the generation count, each written whole: an
 * index it took stays taken in the child, which costs the child one index. */
static void tindex_fork_child(void)
{
	pthread_mutex_init(&tindex_lock, NULL);
}

/* The atfork handler is registered before anyone can take the lock. */
static void tindex_init(void)
{
	tindex_key_ok = pthread_key_create(&tindex_key, tindex_free) == 0;
	pthread_atfork(NULL, NULL, tindex_fork_child);
}

static uint32_t tindex_take(void)
{
	for (uint32_t k = 0; k < TINDEX_MAX / 64; k++) {
		if (tindex_used[k] != UINT64_MAX) {
			uint32_t bit = (uint32_t)__builtin_ctzll(~tindex_used[k]);

			tindex_used[k] |= 1ull << bit;
			return k * 64 + bit;
		}
	}
	return UINT32_MAX;
}

/* Returns the new bhi_tindex, or UINT32_MAX when every index is taken (the
 * thread then counts on the shared slot). */
uint32_t bhi_tindex_assign(void)
{
	uint32_t i;

	pthread_once(&tindex_once, tindex_init);
	if (!tindex_key_ok)
		return UINT32_MAX;
	pthread_mutex_lock(&tindex_lock);
	i = tindex_take();
	bhi_tgen = ++tindex_gen;
	pthread_mutex_unlock(&tindex_lock);
	if (i == UINT32_MAX)
		return UINT32_MAX;
	if (pthread_setspecific(tindex_key, (void *)(uintptr_t)(i + 1u)) != 0) {
		tindex_free((void *)(uintptr_t)(i + 1u));
		return UINT32_MAX;
	}
	bhi_tindex = i + 1u;
	return bhi_tindex;
}
