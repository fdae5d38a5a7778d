/* Serve a running program's bulkhead metrics on http://127.0.0.1:PORT/metrics
 * (Prometheus text) and /metrics.json, while a few threads call two fake
 * dependencies through their bulkheads.
 *
 *   ./metrics_http --port 9464 &   curl -s 127.0.0.1:9464/metrics
 *
 * Flags: --port N (0: any free port; it is printed), --seconds S (0: run
 * until SIGINT/SIGTERM; at most 9223372036, 292 years). */
#define _GNU_SOURCE /* accept4 */
#include <bulkhead.h>
#include <bulkhead/metrics.h>
#include <bulkhead/pool.h>

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Read by every thread, set by the signal handler: a lock-free atomic is
 * both async-signal-safe and race-free (sig_atomic_t is only the former). */
static atomic_int stopping;
static bulkhead_t *deps[2]; /* payment, inventory */
static bh_pool_t *dns;      /* a blocking client behind a thread pool */

static void on_signal(int sig)
{
	int saved = errno;

	(void)sig;
	atomic_store(&stopping, 1);
	errno = saved;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void resolve(struct bh_task *t)
{
	(void)t;
	sleep_ms(5); /* stands in for a blocking getaddrinfo() */
}

/* A caller: payment is slow (20-40 ms) and small, inventory fast; now and
 * then a blocking lookup through the pool, with a deadline. */
static void *client(void *arg)
{
	unsigned seed = (unsigned)(size_t)arg;

	while (!atomic_load(&stopping)) {
		int pay = rand_r(&seed) % 3 == 0;
		bulkhead_t *bh = deps[pay ? 0 : 1];

		if (rand_r(&seed) % 8 == 0) {
			struct bh_task t = { .run = resolve };

			if (bh_pool_call(dns, &t, BH_FOREVER) == -EBUSY)
				sleep_ms(1);
			continue;
		}
		if (bh_acquire(bh, 1, bh_now_ns() + 15 * BH_MSEC) == 0) {
			sleep_ms(pay ? 20 + (unsigned)rand_r(&seed) % 20 : 1 + (unsigned)rand_r(&seed) % 3);
			bh_release(bh, 1);
		} else {
			sleep_ms(2);
		}
	}
	return NULL;
}

static int listen_on(unsigned short port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* The body: grown until the whole text fits. */
static char *render(int json, size_t *len)
{
	struct bh_metric_set set = { .bulkheads = deps, .n_bulkheads = 2, .pools = &dns,
				     .n_pools = 1 };
	size_t cap = 16384;
	char *buf = NULL;

	for (;;) {
		char *nb = realloc(buf, cap);
		ssize_t n;

		if (!nb)
			break;
		buf = nb;
		n = json ? bh_metrics_json(&set, buf, cap) : bh_metrics_prometheus(&set, buf, cap);
		if (n < 0)
			break;
		if ((size_t)n < cap) {
			*len = (size_t)n;
			return buf;
		}
		cap = (size_t)n + 1;
	}
	free(buf);
	return NULL;
}

static void serve(int fd)
{
	char req[1024], head[256];
	ssize_t n = read(fd, req, sizeof(req) - 1);
	const char *type = "text/plain; version=0.0.4; charset=utf-8";
	int json, status = 200;
	size_t len = 0;
	char *body = NULL;

	if (n <= 0)
		return;
	req[n] = '\0';
	json = !strncmp(req, "GET /metrics.json ", 18);
	if (json || !strncmp(req, "GET /metrics ", 13)) {
		body = render(json, &len);
		if (json)
			type = "application/json";
		if (!body)
			status = 500;
	} else {
		status = 404;
	}
	snprintf(head, sizeof(head),
		 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n",
		 status, status == 200 ? "OK" : status == 404 ? "Not Found" : "Error", type, len);
	write_all(fd, head, strlen(head));
	if (body)
		write_all(fd, body, len);
	free(body);
}

static int usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [--port N] [--seconds S]\n", argv0);
	return 2;
}

static int parse_args(int argc, char **argv, long *port, long *seconds)
{
	static const struct option opts[] = { { "port", required_argument, 0, 'p' },
					       { "seconds", required_argument, 0, 's' },
					       { 0, 0, 0, 0 } };
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "p:s:", opts, NULL)) != -1) {
		long *dst = c == 'p' ? port : c == 's' ? seconds : NULL;

		if (!dst)
			return -1;
		errno = 0;
		*dst = strtol(optarg, &end, 10);
		/* Whole numbers only, and seconds the clock can add to now. */
		if (end == optarg || *end || errno || *dst < 0 || (c == 'p' && *dst > 65535) ||
		    (c == 's' && *dst > (long)(INT64_MAX / BH_SEC)))
			return -1;
	}
	return optind == argc ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct bh_config pay = { .max_concurrent = 4, .queue_capacity = 4,
				 .flags = BH_TRACK_HOLD, .name = "payment" };
	struct bh_config inv = { .max_concurrent = 8, .queue_capacity = 16,
				 .flags = BH_TRACK_HOLD | BH_FAIR, .name = "inventory" };
	struct sigaction sa = { .sa_handler = on_signal };
	long port = 0, seconds = 0;
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	pthread_t t[6];
	uint64_t end;
	int lfd;

	if (parse_args(argc, argv, &port, &seconds) < 0)
		return usage(argv[0]);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	struct bh_pool_config pool = { .name = "dns", .core_threads = 1, .max_threads = 2,
				       .queue_capacity = 4 };

	if (bh_create(&pay, &deps[0]) || bh_create(&inv, &deps[1]) || bh_pool_create(&pool, &dns))
		return 1;
	if ((lfd = listen_on((unsigned short)port)) < 0) {
		perror("listen");
		return 1;
	}
	getsockname(lfd, (struct sockaddr *)&a, &alen);
	printf("listening on http://127.0.0.1:%u/metrics\n", ntohs(a.sin_port));
	fflush(stdout);
	for (size_t i = 0; i < 6; i++)
		pthread_create(&t[i], NULL, client, (void *)(i + 1));
	end = seconds ? bh_now_ns() + (uint64_t)seconds * BH_SEC : UINT64_MAX;
	while (!atomic_load(&stopping) && bh_now_ns() < end) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };

		if (poll(&p, 1, 100) == 1) {
			int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0) {
				serve(fd);
				close(fd);
			}
		}
	}
	atomic_store(&stopping, 1);
	for (int i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	close(lfd);
	bh_pool_shutdown(dns, BH_FOREVER);
	bh_pool_destroy(dns);
	bh_destroy(deps[0]);
	bh_destroy(deps[1]);
	return 0;
}
