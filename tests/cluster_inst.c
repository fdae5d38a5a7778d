/* One service instance for the cluster fault scenarios (test_cluster_faults):
 * a cluster bulkhead in front of a loopback backend that counts its own
 * concurrency. Worker threads loop: acquire a permit (waiting up to 20 ms),
 * call the backend (it holds the call for --hold-ms; with --hold-ms -1 until
 * the test lets it go, cluster_rig.h), release. Commands on stdin, one per
 * line:
 *   demand N   let the first N workers call (the others idle)
 *   stats      print one line of key=value statistics
 *   quit       destroy the bulkhead (giving the share back) and exit
 * It prints "ready <open's result>" once the bulkhead is open. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bulkhead.h"
#include "bulkhead/cluster.h"
#include "cluster.h"

#define MAX_WORKERS 64

static bulkhead_t *bh;
static _Atomic int demand, quitting;
static int backend_port, hold_ms = 20;
static _Atomic uint64_t calls, call_errors;

static void nap_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)backend_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One call: the backend holds it hold_ms (-1: until the test lets it go),
 * then answers one byte. */
static bool call(int fd)
{
	char req[32], rep;
	int n = snprintf(req, sizeof(req), "%d\n", hold_ms);

	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
		return false;
	while (recv(fd, &rep, 1, 0) < 0)
		if (errno != EINTR)
			return false;
	return true;
}

static void *worker(void *arg)
{
	int index = (int)(intptr_t)arg, fd = dial();

	while (!atomic_load(&quitting)) {
		if (index >= atomic_load(&demand)) {
			nap_ms(2);
			continue;
		}
		if (bh_acquire(bh, 1, bh_now_ns() + 20 * BH_MSEC) != 0) {
			nap_ms(1); /* rejected: a client would retry a little later */
			continue;
		}
		if (fd >= 0 && call(fd))
			atomic_fetch_add(&calls, 1);
		else
			atomic_fetch_add(&call_errors, 1);
		bh_release(bh, 1);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void print_stats(void)
{
	struct bh_cluster_stats c;
	struct bh_stats s;

	bh_cluster_stats(bh, &c);
	bh_stats(bh, &s);
	printf("stats share=%llu granted=%llu want=%llu instances=%llu global=%llu in_flight=%llu "
	       "renewals=%llu failed=%llu reconnects=%llu resets=%llu fallback=%llu fallbacks=%llu "
	       "unaccounted=%llu over=%llu over_max=%llu learning_ms=%llu last_error=%lld "
	       "round_trips=%llu acquired=%llu rejected=%llu calls=%llu call_errors=%llu\n",
	       (unsigned long long)c.share, (unsigned long long)c.granted,
	       (unsigned long long)c.want, (unsigned long long)c.instances,
	       (unsigned long long)c.global_limit, (unsigned long long)s.in_flight,
	       (unsigned long long)c.renewals, (unsigned long long)c.renewals_failed,
	       (unsigned long long)c.reconnects, (unsigned long long)c.store_resets,
	       (unsigned long long)c.fallback_active, (unsigned long long)c.fallbacks,
	       (unsigned long long)c.unaccounted, (unsigned long long)c.over_admission,
	       (unsigned long long)c.over_admission_max,
	       (unsigned long long)(c.learning_ns / BH_MSEC), (long long)c.last_error,
	       (unsigned long long)c.round_trips, (unsigned long long)s.acquired,
	       (unsigned long long)s.rejected, (unsigned long long)atomic_load(&calls),
	       (unsigned long long)atomic_load(&call_errors));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct bh_cluster_config cc = { .lease_ns = 600 * BH_MSEC };
	struct bh_config local = { .queue_capacity = 64 };
	static const struct option opts[] = {
		{ "endpoint", 1, 0, 'e' }, { "name", 1, 0, 'n' },    { "limit", 1, 0, 'l' },
		{ "lease-ms", 1, 0, 'L' }, { "renew-ms", 1, 0, 'r' }, { "margin-ms", 1, 0, 'm' },
		{ "timeout-ms", 1, 0, 't' }, { "fallback", 1, 0, 'f' }, { "workers", 1, 0, 'w' },
		{ "hold-ms", 1, 0, 'h' },  { "backend", 1, 0, 'b' },  { "offset-ms", 1, 0, 'o' },
		{ "ppm", 1, 0, 'p' },      { "fresh", 0, 0, 'F' },    { "cap", 1, 0, 'c' },
		{ 0, 0, 0, 0 },
	};
	pthread_t th[MAX_WORKERS];
	int workers = 8, opt, r;
	long long offset_ms = 0;
	int ppm = 0;
	char line[128];

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'e': cc.endpoint = optarg; break;
		case 'n': cc.name = optarg; break;
		case 'l': cc.global_limit = (uint32_t)atoi(optarg); break;
		case 'L': cc.lease_ns = (uint64_t)atoll(optarg) * BH_MSEC; break;
		case 'r': cc.renew_ns = (uint64_t)atoll(optarg) * BH_MSEC; break;
		case 'm': cc.margin_ns = (uint64_t)atoll(optarg) * BH_MSEC; break;
		case 't': cc.timeout_ns = (uint64_t)atoll(optarg) * BH_MSEC; break;
		case 'f': cc.fallback_limit = (uint32_t)atoi(optarg); break;
		case 'w': workers = atoi(optarg); break;
		case 'h': hold_ms = atoi(optarg); break;
		case 'b': backend_port = atoi(optarg); break;
		case 'o': offset_ms = atoll(optarg); break;
		case 'p': ppm = atoi(optarg); break;
		case 'F': cc.flags |= BH_CLUSTER_FRESH_STORE; break;
		case 'c': local.max_concurrent = (uint32_t)atoi(optarg); break;
		default: return 2;
		}
	}
	if (workers < 0 || workers > MAX_WORKERS)
		return 2;
	signal(SIGPIPE, SIG_IGN); /* the backend connections */
	if (offset_ms || ppm)
		bhc_test_clock(offset_ms * (int64_t)BH_MSEC, ppm);
	r = bh_cluster_open(&cc, &local, &bh);
	printf("ready %d\n", r);
	fflush(stdout);
	if (r < 0)
		return 1;
	for (int i = 0; i < workers; i++)
		pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
	while (fgets(line, sizeof(line), stdin)) {
		int n;

		if (sscanf(line, "demand %d", &n) == 1)
			atomic_store(&demand, n);
		else if (!strncmp(line, "stats", 5))
			print_stats();
		else if (!strncmp(line, "quit", 4))
			break;
	}
	atomic_store(&quitting, 1);
	for (int i = 0; i < workers; i++)
		pthread_join(th[i], NULL);
	bh_destroy(bh);
	printf("bye\n");
	fflush(stdout);
	return 0;
}
