/* bench_ab: two builds of libbulkhead side by side in one process, for a
 * change to the fast path: the uncontended try+release pair of each, in
 * alternating rounds, with glibc's sem_t in every round as the anchor.
 *
 *   bench_ab [-s] [-r ROUNDS] [-n PAIRS] OLD.so NEW.so
 *
 * -s adds each build's host-wide bulkhead (bh_shm_open, one segment per
 * build under a name of this process, unlinked at once) to the rounds, and
 * reports its pair against the same build's process-local one.
 *
 * Both libraries are loaded with dlopen(RTLD_LOCAL) from copies under
 * distinct names, so each keeps its own symbols; the pair is called through
 * function pointers, which costs what a call through the PLT does. Runs of
 * separate processes on a shared VM drift by 10-20% from one to the next;
 * within one process, round by round, the ratio NEW / OLD is what moves
 * least. Prints the median and the quartiles of the per-round ratios. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bulkhead.h"
#include "machine.h"

struct lib {
	const char *path;
	int (*create)(const struct bh_config *, bulkhead_t **);
	int (*try_acquire)(bulkhead_t *, uint32_t);
	int (*release)(bulkhead_t *, uint32_t);
	void (*destroy)(bulkhead_t *);
	int (*shm_open)(const char *, const struct bh_config *, unsigned, bulkhead_t **);
	int (*shm_unlink)(const char *);
	bulkhead_t *bh, *host;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *sym(void *h, const char *path, const char *name)
{
	void *p = dlsym(h, name);

	if (!p) {
		fprintf(stderr, "bench_ab: %s has no %s\n", path, name);
		exit(2);
	}
	return p;
}

/* Copy path to copy; false on any failure. */
static bool copy_file(const char *path, const char *copy)
{
	char buf[65536];
	ssize_t got;
	int in = open(path, O_RDONLY | O_CLOEXEC), out;
	bool ok = in >= 0;

	out = ok ? open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700) : -1;
	ok = ok && out >= 0;
	while (ok && (got = read(in, buf, sizeof(buf))) > 0)
		ok = write(out, buf, (size_t)got) == got;
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out) != 0)
		ok = false;
	return ok;
}

/* dlopen dedups by file: a copy under its own name is a second library. */
static void lib_load(struct lib *l, const char *path, int i, bool host)
{
	char copy[64], name[64];
	void *h;
	struct bh_config cfg = { .max_concurrent = 1, .queue_capacity = 0 };

	snprintf(copy, sizeof(copy), "/tmp/bench_ab.%ld.%d.so", (long)getpid(), i);
	if (!copy_file(path, copy)) {
		fprintf(stderr, "bench_ab: cannot copy %s to %s\n", path, copy);
		exit(2);
	}
	h = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
	unlink(copy);
	if (!h) {
		fprintf(stderr, "bench_ab: %s\n", dlerror());
		exit(2);
	}
	l->path = path;
	l->create = sym(h, path, "bh_create");
	l->try_acquire = sym(h, path, "bh_try_acquire");
	l->release = sym(h, path, "bh_release");
	l->destroy = sym(h, path, "bh_destroy");
	if (l->create(&cfg, &l->bh) != 0) {
		fprintf(stderr, "bench_ab: bh_create failed in %s\n", path);
		exit(2);
	}
	if (!host)
		return;
	l->shm_open = sym(h, path, "bh_shm_open");
	l->shm_unlink = sym(h, path, "bh_shm_unlink");
	snprintf(name, sizeof(name), "bench_ab.%ld.%d", (long)getpid(), i);
	if (l->shm_open(name, &cfg, 3 /* BH_SHM_CREATE | BH_SHM_EXCL */, &l->host) != 0) {
		fprintf(stderr, "bench_ab: bh_shm_open failed in %s\n", path);
		exit(2);
	}
	l->shm_unlink(name); /* the segment lives until the detach */
}

static double time_lib(const struct lib *l, bulkhead_t *bh, long n)
{
	uint64_t t0 = now_ns();

	for (long i = 0; i < n; i++) {
		if (l->try_acquire(bh, 1) != 0 || l->release(bh, 1) != 0)
			abort();
	}
	return (double)(now_ns() - t0) / (double)n;
}

static double time_sem(sem_t *s, long n)
{
	uint64_t t0 = now_ns();

	for (long i = 0; i < n; i++) {
		if (sem_trywait(s) != 0)
			abort();
		sem_post(s);
	}
	return (double)(now_ns() - t0) / (double)n;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sorts v; the value at quantile q. */
static double quantile(double *v, int n, double q)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return v[(int)(q * (n - 1) + 0.5)];
}

static void report(const char *what, double *v, int n)
{
	double lo = quantile(v, n, 0.25), med = quantile(v, n, 0.5), hi = quantile(v, n, 0.75);

	printf("  %-26s median %.3f (quartiles %.3f - %.3f)\n", what, med, lo, hi);
}

/* Contenders, in rounds: old, new, sem_t, and with -s old host, new host. */
enum { OLD, NEW, SEM, OLD_HOST, NEW_HOST, NCONT };

static double time_one(int k, struct lib *lib, sem_t *sem, long n)
{
	switch (k) {
	case OLD:
	case NEW:
		return time_lib(&lib[k], lib[k].bh, n);
	case SEM:
		return time_sem(sem, n);
	default:
		return time_lib(&lib[k - OLD_HOST], lib[k - OLD_HOST].host, n);
	}
}

/* The per-round ratios a / b (into the scratch r), reported as what. */
static void report_ratio(const char *what, double *const *t, int a, int b, int rounds, double *r)
{
	for (int i = 0; i < rounds; i++)
		r[i] = t[a][i] / t[b][i];
	report(what, r, rounds);
}

int main(int argc, char **argv)
{
	int rounds = 41, opt, ncont = SEM + 1;
	long n = 2000000;
	bool host = false;
	struct lib lib[2];
	sem_t sem;
	double *t[NCONT], *r;

	while ((opt = getopt(argc, argv, "r:n:s")) != -1) {
		if (opt == 'r')
			rounds = atoi(optarg);
		else if (opt == 'n')
			n = atol(optarg);
		else if (opt == 's')
			host = true;
		else
			goto usage;
	}
	if (argc - optind != 2 || rounds < 1 || n < 1)
		goto usage;
	if (host)
		ncont = NCONT;
	bench_print_machine(stdout);
	lib_load(&lib[0], argv[optind], 0, host);
	lib_load(&lib[1], argv[optind + 1], 1, host);
	sem_init(&sem, 0, 1);
	r = calloc((size_t)rounds, sizeof(double));
	for (int k = 0; k < ncont; k++)
		if (!(t[k] = calloc((size_t)rounds, sizeof(double))) || !r)
			return 2;
	for (int k = 0; k < ncont; k++)
		time_one(k, lib, &sem, n / 4); /* warm up */
	for (int i = 0; i < rounds; i++)
		/* the order rotates, so no contender always follows another */
		for (int j = 0; j < ncont; j++) {
			int k = (i + j) % ncont;

			t[k][i] = time_one(k, lib, &sem, n);
		}
	printf("uncontended try+release pair, %d rounds x %ld pairs, per-round ratios of time:\n",
	       rounds, n);
	printf("  old: %s\n  new: %s\n", lib[0].path, lib[1].path);
	report_ratio("new / old", t, NEW, OLD, rounds, r);
	report_ratio("old / sem_t", t, OLD, SEM, rounds, r);
	report_ratio("new / sem_t", t, NEW, SEM, rounds, r);
	if (host) {
		report_ratio("host-wide new / old", t, NEW_HOST, OLD_HOST, rounds, r);
		report_ratio("old host-wide / local", t, OLD_HOST, OLD, rounds, r);
		report_ratio("new host-wide / local", t, NEW_HOST, NEW, rounds, r);
	}
	printf("  ns per pair (medians): old %.2f, new %.2f, sem_t %.2f",
	       quantile(t[OLD], rounds, 0.5), quantile(t[NEW], rounds, 0.5),
	       quantile(t[SEM], rounds, 0.5));
	if (host)
		printf(", old host-wide %.2f, new host-wide %.2f", quantile(t[OLD_HOST], rounds, 0.5),
		       quantile(t[NEW_HOST], rounds, 0.5));
	printf("\n");
	for (int k = 0; k < 2; k++) {
		if (host)
			lib[k].destroy(lib[k].host);
		lib[k].destroy(lib[k].bh);
	}
	return 0;
usage:
	fprintf(stderr, "usage: %s [-s] [-r ROUNDS] [-n PAIRS] OLD.so NEW.so\n", argv[0]);
	return 2;
}
