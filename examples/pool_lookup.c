/* A blocking client behind a thread-pool bulkhead: getaddrinfo has no
 * timeout and no async API, so each lookup runs on a small pool of its own,
 * and the caller waits at most 300 ms. A lookup that takes longer is
 * abandoned: the caller moves on at once, the lookup keeps its thread until
 * it ends, and its done callback frees it.
 *
 *   cc pool_lookup.c $(pkg-config --cflags --libs bulkhead) -o pool_lookup
 *   ./pool_lookup localhost example.com
 */
#define _POSIX_C_SOURCE 200809L /* getaddrinfo, under -std=c11 too */
#include <bulkhead/pool.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lookup {
	struct bh_task task; /* first: a lookup is its task */
	const char *host;
	struct addrinfo *res;
	int err;
};

static void lookup_run(struct bh_task *t)
{
	struct lookup *l = (struct lookup *)t;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };

	l->err = getaddrinfo(l->host, "443", &hints, &l->res);
}

/* The pool's report for a lookup nobody waits for any more, or dropped. */
static void lookup_free(struct bh_task *t, int status)
{
	struct lookup *l = (struct lookup *)t;

	(void)status;
	if (l->res)
		freeaddrinfo(l->res);
	free(l);
}

static void resolve(bh_pool_t *dns, const char *host)
{
	struct lookup *l = calloc(1, sizeof(*l));
	char addr[64]; /* a numeric IPv6 address fits (INET6_ADDRSTRLEN is 46) */
	int r;

	if (!l)
		return;
	l->task = (struct bh_task){ .run = lookup_run, .done = lookup_free };
	l->host = host;
	r = bh_pool_call(dns, &l->task, bh_now_ns() + 300 * BH_MSEC);
	if (r == -ETIMEDOUT) { /* the pool frees it when getaddrinfo returns */
		printf("%s: gave up after 300 ms\n", host);
		return;
	}
	if (r < 0)
		printf("%s: not looked up: %s\n", host, strerror(-r)); /* busy, closed */
	else if (l->err)
		printf("%s: %s\n", host, gai_strerror(l->err));
	else if (getnameinfo(l->res->ai_addr, l->res->ai_addrlen, addr, sizeof(addr), NULL, 0,
			     NI_NUMERICHOST) == 0)
		printf("%s: %s\n", host, addr);
	lookup_free(&l->task, 0); /* ours again */
}

int main(int argc, char **argv)
{
	/* Sized for 20 lookups/s at a P99 of 100 ms; callers wait 300 ms. */
	struct bh_pool_load load = { .peak_qps = 20, .p99_ns = 100 * BH_MSEC,
				     .caller_timeout_ns = 300 * BH_MSEC };
	struct bh_pool_config cfg = { .name = "dns", .keep_alive_ns = 30 * BH_SEC,
				      .stack_size = 256 * 1024 };
	struct bh_pool_sizing size;
	struct bh_pool_stats st;
	bh_pool_t *dns;

	if (bh_pool_size(&load, &size) < 0)
		return 1;
	if (!size.fits)
		fprintf(stderr, "warning: a full queue waits longer than callers do\n");
	cfg.max_threads = size.max_threads;
	cfg.core_threads = size.core_threads;
	cfg.queue_capacity = size.queue_capacity;
	if (bh_pool_create(&cfg, &dns) < 0)
		return 1;
	for (int i = 1; i < argc; i++)
		resolve(dns, argv[i]);
	if (argc < 2)
		resolve(dns, "localhost");
	bh_pool_stats(dns, &st);
	printf("dns pool: %llu completed, %llu abandoned, %llu rejected, %llu threads at most\n",
	       (unsigned long long)st.completed, (unsigned long long)st.abandoned,
	       (unsigned long long)st.rejected, (unsigned long long)st.largest);
	bh_pool_destroy(dns); /* waits for abandoned lookups, frees them */
	return 0;
}
