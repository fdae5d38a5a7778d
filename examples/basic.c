/* The smallest real use: 8 threads call a slow dependency that can take 2
 * calls at a time; 2 more may wait up to 50 ms; the rest are shed at once.
 *
 *   cc basic.c $(pkg-config --cflags --libs bulkhead) -o basic && ./basic
 */
#include <bulkhead.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static bulkhead_t *dep;

static void slow_call(void)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 }; /* 20 ms */

	nanosleep(&ts, NULL);
}

static void *client(void *arg)
{
	for (int i = 0; i < 10; i++) {
		int r = bh_acquire(dep, 1, bh_now_ns() + 50 * BH_MSEC);

		if (r == 0) {
			slow_call();
			bh_release(dep, 1);
		} else if (r != -EBUSY && r != -ETIMEDOUT) {
			fprintf(stderr, "client %ld: unexpected %d\n", (long)(size_t)arg, r);
		}
	}
	return NULL;
}

int main(void)
{
	struct bh_config cfg = { .max_concurrent = 2, .queue_capacity = 2, .flags = BH_FAIR };
	pthread_t t[8];
	struct bh_stats st;

	if (bh_create(&cfg, &dep) != 0)
		return 1;
	for (long i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, client, (void *)i);
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	bh_stats(dep, &st);
	printf("acquired %llu, rejected at once %llu, timed out %llu, in flight now %llu\n",
	       (unsigned long long)st.acquired, (unsigned long long)st.rejected,
	       (unsigned long long)st.timed_out, (unsigned long long)st.in_flight);
	bh_destroy(dep);
	return st.acquired + st.rejected + st.timed_out == 80 ? 0 : 1;
}
