/* bench_ab: two builds of libbulkhead side by side in one process, for a
 * change to the fast path: the uncontended try+release pair of each, in
 * alternating rounds, with glibc's sem_t in every round as the anchor.
 *
 *   bench_ab [-r ROUNDS] [-n PAIRS] OLD.so NEW.so
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
	bulkhead_t *bh;
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
static void lib_load(struct lib *l, const char *path, int i)
{
	char copy[64];
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
}

static double time_lib(const struct lib *l, long n)
{
	uint64_t t0 = now_ns();

	for (long i = 0; i < n; i++) {
		if (l->try_acquire(l->bh, 1) != 0 || l->release(l->bh, 1) != 0)
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

int main(int argc, char **argv)
{
	int rounds = 41, opt;
	long n = 2000000;
	struct lib lib[2];
	sem_t sem;

	while ((opt = getopt(argc, argv, "r:n:")) != -1) {
		if (opt == 'r')
			rounds = atoi(optarg);
		else if (opt == 'n')
			n = atol(optarg);
		else
			goto usage;
	}
	if (argc - optind != 2 || rounds < 1 || n < 1)
		goto usage;
	bench_print_machine(stdout);
	lib_load(&lib[0], argv[optind], 0);
	lib_load(&lib[1], argv[optind + 1], 1);
	sem_init(&sem, 0, 1);

	double *t[3], *r_new_old = calloc((size_t)rounds, sizeof(double)),
		      *r_old_sem = calloc((size_t)rounds, sizeof(double)),
		      *r_new_sem = calloc((size_t)rounds, sizeof(double));
	for (int k = 0; k < 3; k++)
		t[k] = calloc((size_t)rounds, sizeof(double));
	if (!r_new_old || !r_old_sem || !r_new_sem || !t[0] || !t[1] || !t[2])
		return 2;
	time_lib(&lib[0], n / 4); /* warm up */
	time_lib(&lib[1], n / 4);
	time_sem(&sem, n / 4);
	for (int i = 0; i < rounds; i++) {
		/* the order rotates, so neither library always follows sem_t */
		for (int j = 0; j < 3; j++) {
			int k = (i + j) % 3;

			t[k][i] = k == 2 ? time_sem(&sem, n) : time_lib(&lib[k], n);
		}
		r_new_old[i] = t[1][i] / t[0][i];
		r_old_sem[i] = t[0][i] / t[2][i];
		r_new_sem[i] = t[1][i] / t[2][i];
	}
	printf("uncontended try+release pair, %d rounds x %ld pairs, per-round ratios of time:\n",
	       rounds, n);
	printf("  old: %s\n  new: %s\n", lib[0].path, lib[1].path);
	report("new / old", r_new_old, rounds);
	report("old / sem_t", r_old_sem, rounds);
	report("new / sem_t", r_new_sem, rounds);
	printf("  ns per pair (medians): old %.2f, new %.2f, sem_t %.2f\n",
	       quantile(t[0], rounds, 0.5), quantile(t[1], rounds, 0.5),
	       quantile(t[2], rounds, 0.5));
	lib[0].destroy(lib[0].bh);
	lib[1].destroy(lib[1].bh);
	return 0;
usage:
	fprintf(stderr, "usage: %s [-r ROUNDS] [-n PAIRS] OLD.so NEW.so\n", argv[0]);
	return 2;
}
