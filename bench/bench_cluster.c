/* Cluster bulkheads side by side with their anchors, in one run, against a
 * redis-server this program starts (unix socket, temporary directory,
 * persistence off; it prints "skip" without one):
 *   1. an acquire+release pair on a cluster bulkhead (lease check
 *      included) vs a plain local one, the coarse clock read alone (through
 *      glibc, and through the vDSO as the gate reads it), and the floor a
 *      read per take puts under the ratio;
 *   2. store commands per 1,000 acquisitions at steady load;
 *   3. throughput at 4 instances (processes) vs a Redisson-style semaphore
 *      written here: one script call per acquire and one per release, a
 *      rejected acquire polling again after 1 ms;
 *   4. time to converge to fair shares after a demand shift;
 *   5. with --faults, the over-admission each fault scenario measured
 *      (it runs tests/test_cluster_faults from the same build tree).
 * A benchmark, not a test: it never fails. Read the ratios, not the
 * absolutes; machines here are noisy. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bulkhead.h"
#include "bulkhead/cluster.h"
#include "redis_harness.h"
#include "machine.h"
#include "stats.h"
#include "lib/vdso.h"

static struct redis_srv srv;
static int reps = 7;
static unsigned ms = 300;
static unsigned seq;

static const char *fresh_name(char *buf, size_t len)
{
	snprintf(buf, len, "bench%u-%d", ++seq, (int)getpid());
	return buf;
}

static bulkhead_t *open_cluster(const char *name, uint32_t limit, uint64_t lease, uint32_t flags)
{
	struct bh_cluster_config cc = { .endpoint = srv.endpoint, .name = name,
					.global_limit = limit, .lease_ns = lease,
					.flags = BH_CLUSTER_FRESH_STORE | flags };
	bulkhead_t *bh = NULL;
	int r = bh_cluster_open(&cc, NULL, &bh);

	if (r < 0) {
		fprintf(stderr, "bh_cluster_open: %s\n", strerror(-r));
		exit(1);
	}
	return bh;
}

/* ---- 1. the pair ------------------------------------------------------------------ */

static double pair_ns(bulkhead_t *bh, unsigned iters)
{
	uint64_t t0 = bh_now_ns();

	for (unsigned i = 0; i < iters; i++) {
		if (bh_try_acquire(bh, 1) != 0)
			abort();
		bh_release(bh, 1);
	}
	return (double)(bh_now_ns() - t0) / iters;
}

typedef int clock_fn(clockid_t, struct timespec *);

/* ns per CLOCK_MONOTONIC_COARSE read through f. */
static double coarse_ns(clock_fn *f, unsigned iters)
{
	struct timespec ts;
	uint64_t t0 = bh_now_ns(), sum = 0;

	for (unsigned i = 0; i < iters; i++) {
		f(CLOCK_MONOTONIC_COARSE, &ts);
		sum += (uint64_t)ts.tv_nsec;
	}
	__asm__ __volatile__("" : : "r"(sum));
	return (double)(bh_now_ns() - t0) / iters;
}

static void bench_pair(void)
{
	struct bh_config cfg = { .max_concurrent = 64 };
	bulkhead_t *plain, *cl;
	char name[64];
	double p[32], c[32], k[32], v[32], fl[32];
	unsigned iters = 2000000;
	/* The read the gate makes: the vDSO's clock_gettime, called directly
	 * (glibc's where there is no vDSO). */
	clock_fn *vdso = (clock_fn *)bhi_vdso_sym("__vdso_clock_gettime");

	if (!vdso)
		vdso = clock_gettime;

	bh_create(&cfg, &plain);
	cl = open_cluster(fresh_name(name, sizeof(name)), 64, 10 * BH_SEC, 0);
	pair_ns(plain, iters / 4);
	pair_ns(cl, iters / 4);
	for (int r = 0; r < reps; r++) { /* contenders take turns */
		p[r] = pair_ns(plain, iters);
		c[r] = pair_ns(cl, iters);
		k[r] = coarse_ns(clock_gettime, iters);
		v[r] = coarse_ns(vdso, iters);
	}
	double rr[32]; /* the ratio: the median of the per-round ratios */
	for (int r = 0; r < reps; r++) {
		rr[r] = c[r] / p[r];
		fl[r] = (p[r] + v[r]) / p[r];
	}
	double ratio = bench_median(rr, reps), floor_ratio = bench_median(fl, reps);
	double mp = bench_median(p, reps), mc = bench_median(c, reps), mk = bench_median(k, reps);
	double mv = bench_median(v, reps);

	printf("1. uncontended try+release pair (median of %d)\n", reps);
	printf("   plain bulkhead                    %6.2f ns\n", mp);
	printf("   cluster bulkhead (lease checked)  %6.2f ns   %.2fx the plain pair (target <= 1.10x)\n",
	       mc, ratio);
	printf("   CLOCK_MONOTONIC_COARSE read alone %6.2f ns through glibc, "
	       "%.2f ns through the vDSO directly (the gate's read)\n",
	       mk, mv);
	printf("   floor: the plain pair plus one gate read is %.2fx the plain pair\n", floor_ratio);
	bh_destroy(plain);
	bh_destroy(cl);
}

/* ---- 2. store commands per 1,000 acquisitions ---------------------------------- */

struct load {
	bulkhead_t *bh;
	_Atomic bool stop;
	_Atomic uint64_t ops;
	unsigned pace_us; /* 0: as fast as possible */
};

static void *load_worker(void *arg)
{
	struct load *l = arg;

	while (!atomic_load(&l->stop)) {
		if (bh_acquire(l->bh, 1, bh_now_ns() + 10 * BH_MSEC) == 0) {
			bh_release(l->bh, 1);
			atomic_fetch_add(&l->ops, 1);
		}
		if (l->pace_us)
			usleep(l->pace_us);
	}
	return NULL;
}

static void run_load(struct load *l, int threads, unsigned run_ms)
{
	pthread_t t[16];

	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, load_worker, l);
	rh_sleep_ms(run_ms);
	atomic_store(&l->stop, true);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
}

static void commands_per_1000(const char *what, uint64_t lease, unsigned pace_us, unsigned run_ms)
{
	char name[64];
	struct load l = { .pace_us = pace_us };
	struct bh_cluster_stats s0, s1;

	l.bh = open_cluster(fresh_name(name, sizeof(name)), 8, lease, 0);
	bh_cluster_stats(l.bh, &s0);
	run_load(&l, 2, run_ms);
	bh_cluster_stats(l.bh, &s1);
	printf("   %-34s %9llu acquisitions, %3llu store commands: %.4f per 1,000 (target <= 5)\n",
	       what, (unsigned long long)l.ops,
	       (unsigned long long)(s1.round_trips - s0.round_trips),
	       l.ops ? 1000.0 * (double)(s1.round_trips - s0.round_trips) / (double)l.ops : 0.0);
	bh_destroy(l.bh);
}

/* ---- 3. throughput vs a Redisson-style semaphore at 4 instances ------------------ */

/* One script per acquire (take a permit if the count allows), one per
 * release; the key expires like Redisson's permit-expirable variant would
 * reclaim, which a steady benchmark never hits. */
static const char sem_acquire[] =
	"local n = tonumber(redis.call('GET', KEYS[1]) or '0') "
	"if n < tonumber(ARGV[1]) then redis.call('INCR', KEYS[1]) return 1 end return 0";
static const char sem_release[] =
	"local n = redis.call('DECR', KEYS[1]) "
	"if n < 0 then redis.call('SET', KEYS[1], 0) end "
	"redis.call('PUBLISH', KEYS[1] .. ':ch', 1) return n";

struct shared_counts {
	_Atomic uint64_t ops;
};

struct base_arg {
	redisContext *c;
	const char *key, *sha_a, *sha_r;
	uint32_t limit;
	uint64_t end, ops;
};

static void *baseline_worker(void *arg)
{
	struct base_arg *a = arg;
	char lim[16];

	snprintf(lim, sizeof(lim), "%u", a->limit);
	while (bh_now_ns() < a->end) {
		redisReply *r = redisCommand(a->c, "EVALSHA %s 1 %s %s", a->sha_a, a->key, lim);
		bool got = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;

		if (r)
			freeReplyObject(r);
		if (!got) {
			usleep(1000); /* poll again, as redis-semaphore does (10 ms there) */
			continue;
		}
		r = redisCommand(a->c, "EVALSHA %s 1 %s", a->sha_r, a->key);
		if (r)
			freeReplyObject(r);
		a->ops++;
	}
	return NULL;
}

static uint64_t baseline_instance(const char *key, uint32_t limit, int threads, unsigned run_ms)
{
	struct base_arg a[16];
	pthread_t t[16];
	char sha_a[41], sha_r[41];
	uint64_t total = 0, end = bh_now_ns() + (uint64_t)run_ms * BH_MSEC;
	redisReply *r;

	for (int i = 0; i < threads; i++) {
		a[i] = (struct base_arg){ rh_connect(&srv), key, sha_a, sha_r, limit, end, 0 };
		if (!a[i].c)
			return 0;
	}
	r = redisCommand(a[0].c, "SCRIPT LOAD %s", sem_acquire);
	snprintf(sha_a, sizeof(sha_a), "%s", r && r->str ? r->str : "");
	freeReplyObject(r);
	r = redisCommand(a[0].c, "SCRIPT LOAD %s", sem_release);
	snprintf(sha_r, sizeof(sha_r), "%s", r && r->str ? r->str : "");
	freeReplyObject(r);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, baseline_worker, &a[i]);
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		total += a[i].ops;
		redisFree(a[i].c);
	}
	return total;
}

static uint64_t cluster_instance(const char *name, uint32_t limit, int threads, unsigned run_ms)
{
	struct load l = { 0 };

	l.bh = open_cluster(name, limit, 2 * BH_SEC, 0);
	rh_sleep_ms(1000); /* let shares settle */
	run_load(&l, threads, run_ms);
	bh_destroy(l.bh);
	return l.ops;
}

/* 4 processes, each an instance with `threads` callers, run_ms each. */
static double instances_ops(bool cluster, const char *name, unsigned run_ms)
{
	struct shared_counts *sc = mmap(NULL, sizeof(*sc), PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid[4];

	atomic_store(&sc->ops, 0);
	for (int i = 0; i < 4; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			uint64_t n = cluster ? cluster_instance(name, 8, 2, run_ms)
					     : baseline_instance(name, 8, 2, run_ms);

			atomic_fetch_add(&sc->ops, n);
			_exit(0);
		}
	}
	for (int i = 0; i < 4; i++)
		waitpid(pid[i], NULL, 0);
	double ops = (double)atomic_load(&sc->ops) / (run_ms / 1000.0);

	munmap(sc, sizeof(*sc));
	return ops;
}

static void bench_instances(void)
{
	char name[64], key[80];
	unsigned run_ms = 4 * ms > 1000 ? 4 * ms : 1000;
	double base, cl;

	snprintf(key, sizeof(key), "sem:%s", fresh_name(name, sizeof(name)));
	base = instances_ops(false, key, run_ms);
	cl = instances_ops(true, fresh_name(name, sizeof(name)), run_ms);
	printf("3. 4 instances (processes) x 2 callers, global limit 8, acquire+release, %u ms\n",
	       run_ms);
	printf("   Redisson-style semaphore (a script per acquire and release, 1 ms poll)"
	       " %12.0f ops/s\n", base);
	printf("   cluster bulkheads %*s %12.0f ops/s\n", 53, "", cl);
	printf("   ratio %.0fx\n", base > 0 ? cl / base : 0.0);
}

/* ---- 4. convergence after a demand shift ------------------------------------------- */

struct shifter {
	bulkhead_t *bh;
	_Atomic int demand;
	_Atomic bool stop;
	int index;
};

struct shift_worker {
	struct shifter *s;
	int index;
};

static void *shift_loop(void *arg)
{
	struct shift_worker *w = arg;

	while (!atomic_load(&w->s->stop)) {
		if (w->index >= atomic_load(&w->s->demand)) {
			usleep(2000);
			continue;
		}
		if (bh_acquire(w->s->bh, 1, bh_now_ns() + 20 * BH_MSEC) == 0) {
			usleep(2000); /* a 2 ms call */
			bh_release(w->s->bh, 1);
		} else {
			usleep(1000);
		}
	}
	return NULL;
}

static uint64_t share_of(bulkhead_t *bh)
{
	struct bh_cluster_stats s;

	bh_cluster_stats(bh, &s);
	return s.share;
}

static void bench_convergence(void)
{
	char name[64];
	struct shifter s[3];
	struct shift_worker w[3][8];
	pthread_t t[3][8];
	uint64_t t0, took = 0;
	const uint64_t lease = 600 * BH_MSEC, renew = 150 * BH_MSEC;

	fresh_name(name, sizeof(name));
	for (int i = 0; i < 3; i++) {
		struct bh_cluster_config cc = { .endpoint = srv.endpoint, .name = name,
						.global_limit = 12, .lease_ns = lease,
						.renew_ns = renew, .flags = BH_CLUSTER_FRESH_STORE };
		struct bh_config local = { .queue_capacity = 16 };

		s[i] = (struct shifter){ .index = i };
		atomic_store(&s[i].demand, i < 2 ? 8 : 1);
		if (bh_cluster_open(&cc, &local, &s[i].bh) < 0)
			return;
		for (int j = 0; j < 8; j++) {
			w[i][j] = (struct shift_worker){ &s[i], j };
			pthread_create(&t[i][j], NULL, shift_loop, &w[i][j]);
		}
	}
	rh_sleep_ms(1500);
	printf("4. convergence: 3 instances, global limit 12, renew every %llu ms\n",
	       (unsigned long long)(renew / BH_MSEC));
	printf("   demand 8/8/1: shares %llu/%llu/%llu\n", (unsigned long long)share_of(s[0].bh),
	       (unsigned long long)share_of(s[1].bh), (unsigned long long)share_of(s[2].bh));
	atomic_store(&s[2].demand, 8);
	t0 = bh_now_ns();
	while (bh_now_ns() - t0 < 5 * BH_SEC) {
		bool fair = true;

		for (int i = 0; i < 3; i++)
			fair &= share_of(s[i].bh) >= 3 && share_of(s[i].bh) <= 5;
		if (fair) {
			took = bh_now_ns() - t0;
			break;
		}
		usleep(1000);
	}
	printf("   demand 8/8/8: shares %llu/%llu/%llu, within one of fair after %.0f ms "
	       "(%.1f renewal periods)\n",
	       (unsigned long long)share_of(s[0].bh), (unsigned long long)share_of(s[1].bh),
	       (unsigned long long)share_of(s[2].bh), (double)took / 1e6,
	       (double)took / (double)renew);
	for (int i = 0; i < 3; i++) {
		atomic_store(&s[i].stop, true);
		for (int j = 0; j < 8; j++)
			pthread_join(t[i][j], NULL);
		bh_destroy(s[i].bh);
	}
}

/* ---- 5. the fault scenarios' over-admission ---------------------------------------- */

static void bench_faults(void)
{
	char path[512], line[512], *slash;
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 64);
	FILE *p;
	bool on = false;

	if (n <= 0)
		return;
	path[n] = '\0';
	/* bench/bench_cluster, or bench/.libs/ under libtool */
	if ((slash = strrchr(path, '/')))
		*slash = '\0';
	if ((slash = strrchr(path, '/')) && !strcmp(slash, "/.libs"))
		*slash = '\0';
	strcat(path, "/../tests/test_cluster_faults");
	printf("5. over-admission per fault scenario (%s)\n", path);
	if (access(path, X_OK) != 0) {
		printf("   not built: make check builds it\n");
		return;
	}
	p = popen(path, "r");
	while (p && fgets(line, sizeof(line), p)) {
		if (!strncmp(line, "summary", 7))
			on = true;
		else if (on)
			printf("  %s", line);
	}
	if (p)
		pclose(p);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "quick", 0, 0, 'q' }, { "faults", 0, 0, 'f' },
					      { "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
	bool faults = false;
	int c;

	while ((c = getopt_long(argc, argv, "qfh", opts, NULL)) != -1) {
		if (c == 'q') {
			reps = 3;
			ms = 100;
		} else if (c == 'f') {
			faults = true;
		} else {
			printf("usage: %s [--quick] [--faults]\n", argv[0]);
			return c == 'h' ? 0 : 2;
		}
	}
	bench_print_machine(stdout);
	if ((c = redis_start(&srv, false)) != 0) {
		printf("%s\n", c == 77 ? "skip: redis-server is not installed"
				       : "could not start redis-server");
		redis_stop(&srv);
		return 0;
	}
	bench_pair();
	printf("2. store commands per 1,000 acquisitions, 2 callers, alone on the limit\n");
	commands_per_1000("as fast as possible, lease 10 s", 10 * BH_SEC, 0, 4 * ms);
	commands_per_1000("~1,000 acquisitions/s, lease 10 s", 10 * BH_SEC, 2000, 10 * ms);
	commands_per_1000("~1,000 acquisitions/s, lease 1 s", 1 * BH_SEC, 2000, 10 * ms);
	bench_instances();
	bench_convergence();
	if (faults)
		bench_faults();
	redis_stop(&srv);
	return 0;
}
