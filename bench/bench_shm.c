/* The host-wide bulkhead side by side with what a multi-process server
 * would otherwise use, in one run:
 *   - the host-wide bulkhead (bh_shm_open),
 *   - the process-local bulkhead (bh_create: one process's limit only),
 *   - glibc sem_t with pshared=1 in shared memory (no owner: a dead
 *     process's permits are lost),
 *   - a SysV semaphore with SEM_UNDO (the kernel gives a dead process's
 *     permits back, at a syscall per operation).
 * Prints ns per uncontended try+release pair, and ops/s of 2 processes x 4
 * threads sharing 1 and 4 permits with a ~100 ns critical section (the
 * process-local bulkhead: 1 process x 8 threads, the nearest it gets), each
 * the median of several rounds in which the contenders take turns, and the
 * ratios the project targets (each the median of the per-round ratios). A benchmark, not a test: it never fails;
 * machines here are noisy, so read the ratios, not the absolutes. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bulkhead.h"
#include "bulkhead/shm.h"
#include "machine.h"
#include "stats.h"

enum impl { I_SHM, I_LOCAL, I_SEM, I_SYSV, I_COUNT };

static const char *impl_name[I_COUNT] = {
	"host-wide bulkhead",
	"process-local bulkhead",
	"sem_t pshared=1",
	"SysV sem + SEM_UNDO",
};

/* ---- the contenders ------------------------------------------------------- */

struct lim {
	enum impl kind;
	bulkhead_t *bh;
	sem_t *sem; /* in shared memory */
	int semid;
};

static char shm_name[64];

static void lim_init(struct lim *l, enum impl kind, unsigned permits)
{
	struct bh_config cfg = { .max_concurrent = permits, .queue_capacity = 64 };

	memset(l, 0, sizeof(*l));
	l->kind = kind;
	switch (kind) {
	case I_SHM:
		snprintf(shm_name, sizeof(shm_name), "bench-%d", (int)getpid());
		if (bh_shm_open(shm_name, &cfg, BH_SHM_CREATE, &l->bh) != 0)
			abort();
		break;
	case I_LOCAL:
		if (bh_create(&cfg, &l->bh) != 0)
			abort();
		break;
	case I_SEM:
		l->sem = mmap(NULL, sizeof(sem_t), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (l->sem == MAP_FAILED || sem_init(l->sem, 1, permits) != 0)
			abort();
		break;
	case I_SYSV:
		l->semid = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
		if (l->semid < 0 || semctl(l->semid, 0, SETVAL, (int)permits) < 0)
			abort();
		break;
	default:
		abort();
	}
}

static void lim_fini(struct lim *l)
{
	switch (l->kind) {
	case I_SHM:
		bh_destroy(l->bh);
		bh_shm_unlink(shm_name);
		break;
	case I_LOCAL:
		bh_destroy(l->bh);
		break;
	case I_SEM:
		sem_destroy(l->sem);
		munmap(l->sem, sizeof(sem_t));
		break;
	case I_SYSV:
		semctl(l->semid, 0, IPC_RMID);
		break;
	default:
		break;
	}
}

static inline bool lim_try(struct lim *l)
{
	struct sembuf op = { 0, -1, IPC_NOWAIT | SEM_UNDO };

	switch (l->kind) {
	case I_SHM:
	case I_LOCAL:
		return bh_try_acquire(l->bh, 1) == 0;
	case I_SEM:
		return sem_trywait(l->sem) == 0;
	default:
		return semop(l->semid, &op, 1) == 0;
	}
}

static inline void lim_acquire(struct lim *l)
{
	struct sembuf op = { 0, -1, SEM_UNDO };

	switch (l->kind) {
	case I_SHM:
	case I_LOCAL:
		if (bh_acquire(l->bh, 1, BH_FOREVER) != 0)
			abort();
		break;
	case I_SEM:
		while (sem_wait(l->sem) != 0)
			;
		break;
	default:
		while (semop(l->semid, &op, 1) != 0)
			;
	}
}

static inline void lim_release(struct lim *l)
{
	struct sembuf op = { 0, 1, SEM_UNDO };

	switch (l->kind) {
	case I_SHM:
	case I_LOCAL:
		bh_release(l->bh, 1);
		break;
	case I_SEM:
		sem_post(l->sem);
		break;
	default:
		semop(l->semid, &op, 1);
	}
}

/* ---- measuring --------------------------------------------------------------- */

/* ns per try+release pair on one thread, nobody else around. */
static double uncontended_ns(enum impl kind, long iters)
{
	struct lim l;
	uint64_t t0, t1;

	lim_init(&l, kind, 1);
	for (long i = 0; i < 1000; i++) { /* the first calls map slots */
		if (!lim_try(&l))
			abort();
		lim_release(&l);
	}
	t0 = bh_now_ns();
	for (long i = 0; i < iters; i++) {
		if (!lim_try(&l))
			abort();
		lim_release(&l);
	}
	t1 = bh_now_ns();
	lim_fini(&l);
	return (double)(t1 - t0) / (double)iters;
}

static double spin_per_ns;

static void critical_section(void)
{
	long n = (long)(100.0 * spin_per_ns);

	for (volatile long i = 0; i < n; i++)
		;
}

static void calibrate(void)
{
	long n = 20000000;
	uint64_t t0 = bh_now_ns();

	for (volatile long i = 0; i < n; i++)
		;
	spin_per_ns = (double)n / (double)(bh_now_ns() - t0);
}

/* Shared between the processes of a contended round. */
struct arena {
	pthread_barrier_t start;
	_Atomic bool stop;
	_Atomic int inside;
	_Atomic long ops;
	_Atomic bool overrun;
	unsigned permits;
};

struct run {
	struct lim *l;
	struct arena *ar;
};

static void *contender(void *p)
{
	struct run *r = p;
	long ops = 0;

	pthread_barrier_wait(&r->ar->start);
	while (!atomic_load_explicit(&r->ar->stop, memory_order_relaxed)) {
		lim_acquire(r->l);
		if (atomic_fetch_add_explicit(&r->ar->inside, 1, memory_order_relaxed) >=
		    (int)r->ar->permits)
			atomic_store(&r->ar->overrun, true);
		critical_section();
		atomic_fetch_sub_explicit(&r->ar->inside, 1, memory_order_relaxed);
		lim_release(r->l);
		ops++;
	}
	atomic_fetch_add(&r->ar->ops, ops);
	return NULL;
}

static void run_threads(struct lim *l, struct arena *ar, int threads)
{
	struct run r[16];
	pthread_t t[16];

	for (int i = 0; i < threads; i++) {
		r[i] = (struct run){ .l = l, .ar = ar };
		pthread_create(&t[i], NULL, contender, &r[i]);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
}

/* ops/s of procs processes x threads threads sharing `permits` permits. */
static double contended_ops(enum impl kind, int procs, int threads, unsigned permits,
			    unsigned ms)
{
	struct arena *ar = mmap(NULL, sizeof(*ar), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pthread_barrierattr_t ba;
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	pid_t pid[8];
	struct lim l;
	uint64_t t0, t1;
	double r;

	if (ar == MAP_FAILED)
		abort();
	memset(ar, 0, sizeof(*ar));
	ar->permits = permits;
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&ar->start, &ba, (unsigned)(procs * threads + 1));
	lim_init(&l, kind, permits);
	fflush(stdout);
	for (int p = 0; p < procs; p++) {
		pid[p] = fork();
		if (pid[p] == 0) {
			run_threads(&l, ar, threads);
			_exit(0);
		}
	}
	pthread_barrier_wait(&ar->start);
	t0 = bh_now_ns();
	nanosleep(&ts, NULL);
	atomic_store(&ar->stop, true);
	for (int p = 0; p < procs; p++)
		waitpid(pid[p], NULL, 0);
	t1 = bh_now_ns();
	if (atomic_load(&ar->overrun)) {
		fprintf(stderr, "%s let more than %u in at once\n", impl_name[kind], permits);
		exit(1);
	}
	lim_fini(&l);
	r = (double)atomic_load(&ar->ops) * 1e9 / (double)(t1 - t0);
	pthread_barrier_destroy(&ar->start);
	munmap(ar, sizeof(*ar));
	return r;
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--quick] [--reps N] [--ms MS] [--iters N]\n"
		"  --quick     short run (smoke test): 1 round, 50 ms, 200000 pairs\n"
		"  --reps N    rounds per figure, median reported (default 5)\n"
		"  --ms MS     duration of one contended round (default 400)\n"
		"  --iters N   uncontended pairs per round (default 5000000; SysV gets 1/20)\n",
		argv0);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "reps", required_argument, NULL, 'r' },
		{ "ms", required_argument, NULL, 'm' },
		{ "iters", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int reps = 5, c;
	unsigned ms = 400;
	long iters = 5000000;
	double pair[I_COUNT][32], cont[2][I_COUNT][32], mp[I_COUNT], mc[2][I_COUNT];
	const unsigned permits[2] = { 1, 4 };
	/* tmpfs, where host-wide bulkheads live by default: a segment on a disk
	 * file system would have its pages written back, and faulted writable
	 * again, in the middle of the measurement */
	char shm_dir[] = "/dev/shm/bh-bench-shm.XXXXXX", tmp_dir[] = "/tmp/bh-bench-shm.XXXXXX";
	char *dir = NULL;

	while ((c = getopt_long(argc, argv, "qr:m:i:h", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			reps = 1, ms = 50, iters = 200000;
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		case 'm':
			ms = (unsigned)atoi(optarg);
			break;
		case 'i':
			iters = atol(optarg);
			break;
		default:
			usage(argv[0]);
			return c == 'h' ? 0 : 2;
		}
	}
	reps = reps < 1 ? 1 : reps > 32 ? 32 : reps;
	if (!getenv("BH_SHM_DIR") &&
	    ((dir = mkdtemp(shm_dir)) != NULL || (dir = mkdtemp(tmp_dir)) != NULL))
		setenv("BH_SHM_DIR", dir, 1);
	bench_print_machine(stdout);
	calibrate();
	for (int r = 0; r < reps; r++) {
		/* the order rotates from round to round, so that neither of a
		 * pair is always the one measured right after the other */
		for (int n = 0; n < I_COUNT; n++) {
			int k = (n + r) % I_COUNT;

			pair[k][r] = uncontended_ns((enum impl)k, k == I_SYSV ? iters / 20 : iters);
		}
		for (int p = 0; p < 2; p++)
			for (int k = 0; k < I_COUNT; k++)
				cont[p][k][r] = k == I_LOCAL
							? contended_ops(I_LOCAL, 1, 8, permits[p], ms)
							: contended_ops((enum impl)k, 2, 4, permits[p], ms);
	}
	/* ratios: medians of the per-round ratios, taken before the sorts below */
	double v[4][32], rr[4];
	for (int r = 0; r < reps; r++) {
		v[0][r] = pair[I_SHM][r] / pair[I_LOCAL][r];
		v[1][r] = pair[I_SYSV][r] / pair[I_SHM][r];
		v[2][r] = cont[0][I_SHM][r] / cont[0][I_SEM][r];
		v[3][r] = cont[1][I_SHM][r] / cont[1][I_SEM][r];
	}
	for (int i = 0; i < 4; i++)
		rr[i] = bench_median(v[i], reps);
	for (int k = 0; k < I_COUNT; k++) {
		mp[k] = bench_median(pair[k], reps);
		for (int p = 0; p < 2; p++)
			mc[p][k] = bench_median(cont[p][k], reps);
	}
	printf("bench_shm: %d rounds; contended: 2 processes x 4 threads (process-local: 1 x 8),"
	       " ~100 ns held\n",
	       reps);
	printf("%-26s %14s %16s %16s\n", "", "pair (ns)", "1 permit (op/s)", "4 permits (op/s)");
	for (int k = 0; k < I_COUNT; k++)
		printf("%-26s %14.1f %16.0f %16.0f\n", impl_name[k], mp[k], mc[0][k], mc[1][k]);
	printf("host-wide fast path vs process-local: %.2fx the time (target <= 1.15x)\n", rr[0]);
	printf("host-wide vs SysV SEM_UNDO: %.1fx faster (target >= 20x)\n", rr[1]);
	printf("host-wide vs sem_t contended: %.2fx (1 permit), %.2fx (4 permits) (target >= 1x)\n",
	       rr[2], rr[3]);
	if (dir)
		rmdir(dir);
	return 0;
}
