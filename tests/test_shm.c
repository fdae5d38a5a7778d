/* Host-wide bulkheads: names, files, the header, attaching, ledgers and the
 * fast paths, fork and exec. Cross-process behaviour is tested with real
 * forked processes in a private BH_SHM_DIR. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* unshare, CLONE_NEW* */
#endif
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "bulkhead/metrics.h"
#include "shmutil.h"
#include "core/layer.h" /* bhi_tindex */
#include "shm/seg.h"
#include "shm/dispatch.h"

/* ---- names, flags, configuration ---------------------------------------- */

static void test_names(void **state)
{
	char longest[BH_SHM_NAME_MAX + 2];
	bulkhead_t *bh = NULL;
	struct bh_config cfg = { .max_concurrent = 1 };

	(void)state;
	memset(longest, 'n', sizeof(longest));
	longest[BH_SHM_NAME_MAX + 1] = '\0';
	assert_int_equal(bh_shm_open(NULL, &cfg, BH_SHM_CREATE, &bh), -EINVAL);
	assert_int_equal(bh_shm_open("", &cfg, BH_SHM_CREATE, &bh), -EINVAL);
	assert_int_equal(bh_shm_open("a/b", &cfg, BH_SHM_CREATE, &bh), -EINVAL);
	assert_int_equal(bh_shm_open("/a", &cfg, BH_SHM_CREATE, &bh), -EINVAL);
	assert_int_equal(bh_shm_open(longest, &cfg, BH_SHM_CREATE, &bh), -ENAMETOOLONG);
	assert_int_equal(bh_shm_unlink(""), -EINVAL);
	assert_int_equal(bh_shm_unlink("x/y"), -EINVAL);
	assert_int_equal(bh_shm_unlink(longest), -ENAMETOOLONG);
	assert_null(bh);
	longest[BH_SHM_NAME_MAX] = '\0'; /* the longest allowed */
	assert_int_equal(bh_shm_open(longest, &cfg, BH_SHM_CREATE, &bh), 0);
	assert_string_equal(bh_name(bh), longest);
	shm_done(bh, longest);
	assert_int_equal(bh_shm_unlink(longest), -ENOENT);
	assert_int_equal(shm_files(), 0);
}

static void test_open_flags(void **state)
{
	const char *name = uniq("flags");
	struct bh_config cfg = { .max_concurrent = 4, .queue_capacity = 2 };
	bulkhead_t *bh = NULL, *again = NULL;

	(void)state;
	assert_int_equal(bh_shm_open(name, NULL, 0, &bh), -ENOENT);
	assert_int_equal(bh_shm_open(name, &cfg, 0, &bh), -ENOENT);
	assert_int_equal(bh_shm_open(name, NULL, BH_SHM_CREATE, &bh), -EINVAL);
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_EXCL, &bh), -EINVAL);
	assert_int_equal(bh_shm_open(name, &cfg, 1u << 5, &bh), -EINVAL);
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE, NULL), -EINVAL);
	cfg.max_concurrent = 0;
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE, &bh), -EINVAL);
	cfg.max_concurrent = BH_LIMIT_MAX + 1;
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE, &bh), -EINVAL);
	cfg.max_concurrent = 4;
	cfg.flags = 1u << 9;
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE, &bh), -EINVAL);
	cfg.flags = 0;
	assert_int_equal(shm_files(), 0); /* nothing was created */
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE | BH_SHM_EXCL, &bh), 0);
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE | BH_SHM_EXCL, &again), -EEXIST);
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE, &again), 0); /* attaches */
	bh_destroy(again);
	assert_int_equal(bh_shm_open(name, NULL, 0, &again), 0);
	bh_destroy(again);
	shm_done(bh, name);
}

static void test_cfg_must_match(void **state)
{
	const char *name = uniq("match");
	struct bh_config cfg = { .max_concurrent = 4, .queue_capacity = 2, .flags = BH_FAIR };
	struct bh_config other;
	bulkhead_t *bh, *b2 = NULL;

	(void)state;
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE, &bh), 0);
	other = cfg;
	other.max_concurrent = 5;
	assert_int_equal(bh_shm_open(name, &other, BH_SHM_CREATE, &b2), -EINVAL);
	other = cfg;
	other.queue_capacity = 3;
	assert_int_equal(bh_shm_open(name, &other, 0, &b2), -EINVAL);
	other = cfg;
	other.flags = 0;
	assert_int_equal(bh_shm_open(name, &other, 0, &b2), -EINVAL);
	other = cfg;
	other.name = "not-it";
	assert_int_equal(bh_shm_open(name, &other, 0, &b2), -EINVAL);
	other.name = name;
	assert_int_equal(bh_shm_open(name, &other, 0, &b2), 0);
	bh_destroy(b2);
	/* a later resize does not make matching attaches fail */
	assert_int_equal(bh_set_limit(bh, 9), 0);
	assert_int_equal(bh_shm_open(name, &cfg, 0, &b2), 0);
	assert_int_equal(stats_of(b2).limit, 9);
	bh_destroy(b2);
	shm_done(bh, name);

	/* queue capacities above the most a segment queues are the same */
	name = uniq("match-q");
	cfg.queue_capacity = BH_QUEUE_UNBOUNDED;
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE, &bh), 0);
	cfg.queue_capacity = BH_SHM_QUEUE_MAX + 1;
	assert_int_equal(bh_shm_open(name, &cfg, 0, &b2), 0);
	bh_destroy(b2);
	cfg.queue_capacity = BH_SHM_QUEUE_MAX - 1;
	assert_int_equal(bh_shm_open(name, &cfg, 0, &b2), -EINVAL);
	shm_done(bh, name);

	/* a cfg whose name is not name is refused before anything is
	 * created: a failed call leaves no segment behind */
	name = uniq("match-name");
	cfg.name = "not-it";
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE, &b2), -EINVAL);
	assert_int_equal(bh_shm_unlink(name), -ENOENT);
	assert_int_equal(shm_files(), 0);
}

/* ---- files ------------------------------------------------------------------ */

static mode_t mode_of(const char *name)
{
	char path[512];
	struct stat st;

	path_for(name, path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	return st.st_mode & 0777;
}

static void test_file_modes(void **state)
{
	const char *name = uniq("mode");
	bulkhead_t *bh;
	mode_t old = umask(022);
	struct bh_config cfg = { .max_concurrent = 1 };

	(void)state;
	bh = shm_make(name, 1, 0, 0);
	assert_int_equal(mode_of(name), 0600);
	shm_done(bh, name);

	name = uniq("mode"); /* no mode asked for: the default */
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE | BH_SHM_MODE(0), &bh), 0);
	assert_int_equal(mode_of(name), 0600);
	shm_done(bh, name);

	name = uniq("mode");
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE | BH_SHM_MODE(0640), &bh), 0);
	assert_int_equal(mode_of(name), 0640);
	shm_done(bh, name);

	umask(077); /* the umask narrows; nothing widens */
	name = uniq("mode");
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE | BH_SHM_MODE(0666), &bh), 0);
	assert_int_equal(mode_of(name), 0600);
	shm_done(bh, name);
	umask(old);
	assert_int_equal(shm_files(), 0);

	/* A mode that does not let its owner read and write: nobody could
	 * attach, the creator included, and nothing is created (a process
	 * that may override file modes can attach all the same). */
	name = uniq("mode");
	if (geteuid() != 0) {
		assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE | BH_SHM_MODE(0400), &bh),
				 -EACCES);
		assert_int_equal(shm_files(), 0);
	}
}

static int hold_then_wait(void *arg, int out, int in)
{
	bulkhead_t *bh;

	if (bh_shm_open(arg, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 1) != 0)
		return 1;
	say(out, 1);
	hear(in);
	bh_destroy(bh);
	return 0;
}

/* The name goes at unlink; the segment with its last detach. */
static void test_unlink_then_last_detach(void **state)
{
	const char *name = uniq("unlink");
	char path[512];
	bulkhead_t *bh = shm_make(name, 2, 0, 0), *b2;
	struct child c;
	struct stat st;

	(void)state;
	path_for(name, path, sizeof(path));
	c = spawn(hold_then_wait, (void *)name);
	assert_int_equal(hear(c.rd), 1);
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(bh_shm_unlink(name), 0);
	assert_int_equal(stat(path, &st), -1);
	assert_int_equal(bh_shm_open(name, NULL, 0, &b2), -ENOENT);
	/* the attached keep working */
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	say(c.wr, 0);
	assert_int_equal(reap(&c), 0);
	/* the child died still attached (its inherited handle): reclaimed */
	await_in_flight(bh, 1, BH_SEC);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_release(bh, 2), 0);
	bh_destroy(bh);
	assert_int_equal(shm_files(), 0);
}

static void test_name_and_closed_attach(void **state)
{
	const char *name = uniq("closed");
	bulkhead_t *bh = shm_make(name, 2, 0, 0), *b2;

	(void)state;
	assert_string_equal(bh_name(bh), name);
	assert_int_equal(bh_close(bh), 0);
	assert_int_equal(bh_shm_open(name, NULL, 0, &b2), 0);
	assert_int_equal(bh_try_acquire(b2, 1), -ESHUTDOWN);
	assert_int_equal(bh_acquire(b2, 1, bh_now_ns() + BH_SEC), -ESHUTDOWN);
	assert_int_equal(bh_close(b2), -EALREADY);
	bh_destroy(b2);
	shm_done(bh, name);
}

/* ---- the header and bad files ------------------------------------------------- */

static void write_file(const char *name, const void *buf, size_t len)
{
	char path[512];
	int fd;

	path_for(name, path, sizeof(path));
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* A real segment's bytes (its size in *len). */
static unsigned char *segment_bytes(size_t *len)
{
	const char *name = uniq("image");
	bulkhead_t *bh = shm_make(name, 3, 2, 0);
	void *seg = bhs_segment(bh, len);
	unsigned char *copy = malloc(*len);

	assert_non_null(copy);
	memcpy(copy, seg, *len);
	shm_done(bh, name);
	return copy;
}

static void expect_refused(const char *name, int err)
{
	struct bh_config cfg = { .max_concurrent = 3, .queue_capacity = 2 };
	char path[512];
	struct stat before, after;
	bulkhead_t *bh = NULL;

	path_for(name, path, sizeof(path));
	assert_int_equal(lstat(path, &before), 0);
	assert_int_equal(bh_shm_open(name, NULL, 0, &bh), err);
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE, &bh), err);
	assert_null(bh);
	/* never silently reinitialised */
	assert_int_equal(lstat(path, &after), 0);
	assert_int_equal(before.st_size, after.st_size);
	assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
	assert_int_equal(before.st_ino, after.st_ino);
	unlink(path);
}

/* A segment's image under its own name, with its mutable part damaged in
 * ways no crash leaves: refused with -EBADMSG. A recovery log left open
 * (its recoverer died), or a grant log (its granter died), is no damage. */
static void test_damaged_state_refused(void **state)
{
	const char *name = uniq("state");
	bulkhead_t *bh = shm_make(name, 3, 2, 0);
	size_t len;
	unsigned char *img = malloc(bhs_segment(bh, &len) ? len : 1);
	struct bhs_seg *g = (struct bhs_seg *)(void *)img;
	uint64_t w;

	(void)state;
	assert_non_null(img);
	memcpy(img, bhs_segment(bh, NULL), len);
	shm_done(bh, name);
	w = atomic_load(&g->word);

	atomic_store(&g->word, w | (1ull << 59)); /* an unused bit */
	write_file(name, img, len);
	expect_refused(name, -EBADMSG);
	atomic_store(&g->word, w);

	atomic_store(&g->glog, g->hdr.nslots + g->hdr.nextra + 1u); /* no such node */
	write_file(name, img, len);
	expect_refused(name, -EBADMSG);
	atomic_store(&g->glog, 0);

	atomic_store(&g->rlog.open, 5); /* not a log state */
	write_file(name, img, len);
	expect_refused(name, -EBADMSG);
	atomic_store(&g->rlog.open, 1);
	atomic_store(&g->rlog.pidx, g->hdr.nprocs); /* no such process */
	write_file(name, img, len);
	expect_refused(name, -EBADMSG);
	atomic_store(&g->rlog.pidx, UINT32_MAX); /* a rebuild's, thawing to no limit */
	atomic_store(&g->rlog.thaw, 0);
	write_file(name, img, len);
	expect_refused(name, -EBADMSG);

	atomic_store(&g->rlog.thaw, w); /* a rebuild's log, left open */
	atomic_store(&g->glog, GLOG_PRE | 1u); /* and a grant log */
	write_file(name, img, len);
	assert_int_equal(bh_shm_open(name, NULL, 0, &bh), 0);
	assert_int_equal(bh_try_acquire(bh, 3), 0);
	assert_int_equal(bh_release(bh, 3), 0);
	shm_done(bh, name);
	free(img);
}

static void test_foreign_files_refused(void **state)
{
	size_t len;
	unsigned char *img = segment_bytes(&len), junk[8192];
	char path[512], target[512];
	const char *name;

	(void)state;
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 131 + 7);
	name = uniq("junk");
	write_file(name, junk, sizeof(junk));
	expect_refused(name, -EPROTO);
	name = uniq("empty");
	write_file(name, junk, 0);
	expect_refused(name, -EPROTO);
	name = uniq("short-junk");
	write_file(name, junk, 5);
	expect_refused(name, -EPROTO);

	/* another layout version */
	img[8]++;
	name = uniq("layout");
	write_file(name, img, len);
	expect_refused(name, -EPROTO);
	img[8]--;

	/* ours, but damaged: checksum, truncated, extended, renamed */
	name = uniq("sum");
	img[70] ^= 1;
	write_file(name, img, len);
	expect_refused(name, -EBADMSG);
	img[70] ^= 1;
	name = uniq("trunc");
	write_file(name, img, len / 2);
	expect_refused(name, -EBADMSG);
	name = uniq("trunc-hdr");
	write_file(name, img, 100);
	expect_refused(name, -EBADMSG);
	name = uniq("renamed"); /* the header names another bulkhead */
	write_file(name, img, len);
	expect_refused(name, -EBADMSG);

	/* not regular files */
	name = uniq("fifo");
	path_for(name, path, sizeof(path));
	assert_int_equal(mkfifo(path, 0600), 0);
	expect_refused(name, -EPROTO);
	name = uniq("dir");
	path_for(name, path, sizeof(path));
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(bh_shm_open(name, NULL, 0, &(bulkhead_t *){ NULL }), -EPROTO);
	assert_int_equal(bh_shm_open(name, &(struct bh_config){ .max_concurrent = 1 },
				     BH_SHM_CREATE, &(bulkhead_t *){ NULL }),
			 -EPROTO);
	rmdir(path);
	name = uniq("link");
	path_for(name, path, sizeof(path));
	snprintf(target, sizeof(target), "%s/elsewhere", shm_dir);
	close(open(target, O_CREAT | O_WRONLY, 0600));
	assert_int_equal(symlink(target, path), 0);
	expect_refused(name, -EPROTO);
	unlink(target);
	/* a socket: open(2) says ENXIO, but it is no segment either */
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int sfd = socket(AF_UNIX, SOCK_STREAM, 0);

		name = uniq("sock");
		path_for(name, path, sizeof(path));
		assert_true(strlen(path) < sizeof(sa.sun_path));
		memcpy(sa.sun_path, path, strlen(path) + 1);
		assert_int_equal(bind(sfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		expect_refused(name, -EPROTO);
		close(sfd);
	}
	free(img);
	assert_int_equal(shm_files(), 0);
}

/* Copy a real segment under the name it was made for, with damage, and try
 * everything on it in a child: a refusal or a working bulkhead, never a
 * crash or a hang (the child's alarm). Deterministic: a fixed sequence. */
static int fuzz_child(void *arg, int out, int in)
{
	bulkhead_t *bh;
	struct bh_stats st;
	int r = bh_shm_open(arg, NULL, 0, &bh);

	(void)in;
	alarm(10);
	say(out, r);
	if (r == -EPROTO || r == -EBADMSG || r == -ENOSPC)
		return 0;
	if (r != 0)
		return 2;
	if (bh_try_acquire(bh, 1) == 0)
		bh_release(bh, 1);
	if (bh_acquire(bh, 1, bh_now_ns() + 5 * BH_MSEC) == 0)
		bh_release(bh, 1);
	bh_release(bh, 1);
	bh_stats(bh, &st);
	bh_set_limit(bh, 2);
	bh_close(bh);
	bh_destroy(bh);
	return 0;
}

static void test_fuzz_attach(void **state)
{
	const char *name = "fuzz";
	struct bh_config cfg = { .max_concurrent = 3, .queue_capacity = 2 };
	bulkhead_t *bh;
	unsigned char *img;
	size_t len;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	int refused = 0, attached = 0;

	(void)state;
	assert_int_equal(bh_shm_open(name, &cfg, BH_SHM_CREATE, &bh), 0);
	img = malloc(bhs_segment(bh, &len) ? len : 0);
	memcpy(img, bhs_segment(bh, NULL), len);
	shm_done(bh, name);
	for (int round = 0; round < 300; round++) {
		unsigned char *copy = malloc(len);
		size_t cut = len;
		struct child c;
		int r;

		memcpy(copy, img, len);
		for (int k = 0; k < 1 + round % 4; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			/* mostly the header and the shared state, sometimes anywhere */
			size_t at = (x >> 8) % (round % 3 ? 1024 : len);

			copy[at] ^= (unsigned char)(1u << (x % 8));
		}
		if (round % 10 == 9)
			cut = (x >> 20) % len;
		write_file(name, copy, cut);
		c = spawn(fuzz_child, (void *)name);
		r = hear(c.rd);
		if (wait_child(&c) != 0) {
			char keep[600];

			path_for(name, keep, sizeof(keep));
			rename(keep, "/tmp/bh-fuzz-failed");
			fail_msg("round %d: the damaged segment is /tmp/bh-fuzz-failed", round);
		}
		refused += r == -EPROTO || r == -EBADMSG;
		attached += r == 0;
		free(copy);
	}
	bh_shm_unlink(name);
	free(img);
	/* both outcomes were exercised */
	assert_true(refused > 50);
	assert_true(attached > 20);
}

/* A frozen word under a free lock is a state no crash leaves (the freezer
 * holds the lock until it thaws, or dies holding it and is taken over), so
 * only damage makes it; nobody would ever thaw it, and a try, which never
 * waits, spun for ever (found by tests/fuzz/fuzz_shm_hdr). The next lock
 * taker rebuilds it. alarm: a hang fails the test instead of stalling it. */
static void test_frozen_word_free_lock(void **state)
{
	const char *name = uniq("frozen");
	bulkhead_t *bh = shm_make(name, 2, 0, 0);
	struct bhs_seg *g = bhs_segment(bh, NULL);
	struct bh_stats st;

	(void)state;
	atomic_fetch_or_explicit(&g->word, S_FROZEN, memory_order_relaxed);
	alarm(20);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	alarm(0);
	assert_false(atomic_load_explicit(&g->word, memory_order_relaxed) & S_FROZEN);
	st = stats_of(bh);
	assert_int_equal(st.in_flight, 1);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, 2), 0);
	st = stats_of(bh);
	assert_int_equal(st.in_flight, 0);
	shm_done(bh, name);
}

/* ---- ledgers and the fast paths ---------------------------------------------- */

/* A word that counts fewer permits held than the ledgers (a segment damaged
 * by something other than this library: no crash leaves one) takes back
 * only what it holds: a give never borrows from the queued count and the
 * flags above it. */
static void test_word_short_of_ledgers(void **state)
{
	const char *name = uniq("short");
	bulkhead_t *bh = shm_make(name, 3, 2, 0);
	struct bhs_seg *g = bhs_segment(bh, NULL);
	uint64_t w;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	w = atomic_load(&g->word);
	atomic_store(&g->word, w_give(w, 1)); /* the damage: the word forgets it */
	assert_int_equal(bh_release(bh, 1), 0);
	assert_word_clean(bh, 3);
	shm_done(bh, name);
}

static void test_try_release_counts(void **state)
{
	const char *name = uniq("try");
	bulkhead_t *bh = shm_make(name, 3, 0, 0);
	struct bh_stats st;
	uint64_t lim, in, q;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 0), -EINVAL);
	assert_int_equal(bh_try_acquire(bh, BH_LIMIT_MAX + 1), -EINVAL);
	assert_int_equal(bh_try_acquire(bh, 4), -EINVAL);
	assert_int_equal(bh_release(bh, 0), -EINVAL);
	assert_int_equal(bh_acquire(bh, 4, BH_FOREVER), -EINVAL);
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(bh_try_acquire(bh, 2), -EBUSY);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_release(bh, 4), -EOVERFLOW);
	st = stats_of(bh);
	assert_int_equal(st.in_flight, 3);
	assert_int_equal(st.acquired, 2);
	assert_int_equal(st.rejected, 1);
	assert_int_equal(st.over_released, 1);
	assert_int_equal(st.processes, 1);
	bhs_gauges(bh, &lim, &in, &q); /* for bh_gauges: one load of the word */
	assert_int_equal(lim, 3);
	assert_int_equal(in, 3);
	assert_int_equal(q, 0);
	assert_int_equal(bh_release(bh, 3), 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	st = stats_of(bh);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.released, 1);
	assert_int_equal(st.over_released, 2);
	assert_int_equal(st.limit, 3);
	shm_done(bh, name);
}

static void test_errno_untouched(void **state)
{
	const char *name = uniq("errno");
	bulkhead_t *bh = shm_make(name, 1, 0, 0), *b2;

	(void)state;
	errno = 4321;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_acquire(bh, 1, bh_now_ns() + BH_MSEC), -EBUSY);
	assert_int_equal(bh_release(bh, 2), -EOVERFLOW);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_shm_open("no-such", NULL, 0, &b2), -ENOENT);
	assert_int_equal(errno, 4321);
	shm_done(bh, name);
}

/* A child that makes `pairs` fast pairs, takes one more permit and waits
 * to be killed holding it. */
struct pairs_arg {
	const char *name;
	int pairs;
};

static int pairs_then_hold(void *arg, int out, int in)
{
	struct pairs_arg *p = arg;
	bulkhead_t *bh;

	if (bh_shm_open(p->name, NULL, 0, &bh) != 0)
		return 1;
	for (int i = 0; i < p->pairs; i++)
		if (bh_try_acquire(bh, 1) != 0 || bh_release(bh, 1) != 0)
			return 2;
	if (bh_try_acquire(bh, 1) != 0)
		return 3;
	say(out, 1);
	hear(in);
	return 0;
}

/* The fast path's single permits are counted by the slot's in and out
 * words, not by counters: every call still counts once, permits taken one
 * at a time go back in one call, and the counts stay when a dead process's
 * slot passes to the next one. */
static void test_fast_pairs_count_exactly(void **state)
{
	const char *name = uniq("fastcount");
	bulkhead_t *bh = shm_make(name, 4, 0, 0);
	struct pairs_arg pa = { name, 500 };
	struct bh_stats st;
	struct child c;

	(void)state;
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(bh_try_acquire(bh, 1), 0);
		assert_int_equal(bh_release(bh, 1), 0);
	}
	/* two taken through in, given back together through the ledger */
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_release(bh, 2), 0);
	/* two taken together, given back one at a time through out */
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	st = stats_of(bh);
	assert_int_equal(st.acquired, 1003);
	assert_int_equal(st.released, 1003);
	assert_int_equal(st.over_released, 1);
	for (int round = 0; round < 3; round++) {
		c = spawn(pairs_then_hold, &pa);
		assert_int_equal(hear(c.rd), 1);
		kill_reap(&c);
		await_in_flight(bh, 0, BH_SEC);
		st = stats_of(bh);
		assert_int_equal(st.acquired, 1003 + (uint64_t)(round + 1) * 501);
		assert_int_equal(st.released, 1003 + (uint64_t)(round + 1) * 500);
		assert_int_equal(st.reclaimed, (uint64_t)round + 1);
	}
	assert_int_equal(bh_try_acquire(bh, 4), 0); /* all four back */
	assert_int_equal(bh_release(bh, 4), 0);
	shm_done(bh, name);
}

/* Handles of one process share its ledger. */
static void test_handles_share_ledger(void **state)
{
	const char *name = uniq("handles");
	bulkhead_t *a = shm_make(name, 4, 0, 0), *b;

	(void)state;
	assert_int_equal(bh_shm_open(name, NULL, 0, &b), 0);
	assert_int_equal(bh_try_acquire(a, 3), 0);
	assert_int_equal(bh_try_acquire(b, 2), -EBUSY);
	assert_int_equal(bh_release(b, 2), 0);
	assert_int_equal(bh_release(a, 2), -EOVERFLOW);
	assert_int_equal(bh_release(a, 1), 0);
	assert_int_equal(stats_of(a).processes, 1);
	bh_destroy(b);
	assert_int_equal(stats_of(a).in_flight, 0);
	shm_done(a, name);
}

struct xt {
	bulkhead_t *bh;
	uint32_t n;
	int r;
};

static void *xt_acquire(void *arg)
{
	struct xt *x = arg;

	x->r = bh_try_acquire(x->bh, x->n);
	return NULL;
}

static void *xt_release(void *arg)
{
	struct xt *x = arg;

	x->r = bh_release(x->bh, x->n);
	return NULL;
}

static int on_thread(void *(*fn)(void *), bulkhead_t *bh, uint32_t n)
{
	struct xt x = { bh, n, -12345 };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, fn, &x), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	return x.r;
}

/* A permit taken on one thread may be released on another; the process's
 * total is exact. */
static void test_cross_thread_release(void **state)
{
	const char *name = uniq("xthread");
	bulkhead_t *bh = shm_make(name, 5, 0, 0);

	(void)state;
	assert_int_equal(on_thread(xt_acquire, bh, 3), 0);
	assert_int_equal(bh_release(bh, 2), 0);    /* moved from the other thread's ledger */
	assert_int_equal(bh_release(bh, 2), -EOVERFLOW); /* the process holds 1 */
	assert_int_equal(on_thread(xt_release, bh, 2), -EOVERFLOW);
	assert_int_equal(on_thread(xt_release, bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	assert_int_equal(stats_of(bh).in_flight, 0);
	assert_int_equal(stats_of(bh).over_released, 3);
	/* and the other way round, from several ledgers at once */
	assert_int_equal(on_thread(xt_acquire, bh, 1), 0);
	assert_int_equal(on_thread(xt_acquire, bh, 2), 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(on_thread(xt_release, bh, 4), 0);
	assert_int_equal(stats_of(bh).in_flight, 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	shm_done(bh, name);
}

struct race {
	bulkhead_t *bh;
	pthread_barrier_t *bar;
	int rounds, ok;
};

static void *race_release(void *arg)
{
	struct race *r = arg;

	for (int i = 0; i < r->rounds; i++) {
		pthread_barrier_wait(r->bar);
		r->ok += bh_release(r->bh, 1) == 0;
		pthread_barrier_wait(r->bar);
	}
	return NULL;
}

/* Two threads release the process's one permit at once, neither holding it:
 * exactly one succeeds, every round; with membarrier, and with the fenced
 * fallback for kernels without it. */
static void double_release_race(bool fenced)
{
	const char *name = uniq("race");
	bulkhead_t *bh = shm_make(name, 4, 0, 0);
	pthread_barrier_t bar;
	struct race r1 = { bh, &bar, 300, 0 }, r2 = r1;
	pthread_t t1, t2;

	assert_int_equal(!!(atomic_load(&((struct bhs_att *)bh->ext)->xfer) & XFER_FENCED), fenced);
	pthread_barrier_init(&bar, NULL, 3);
	assert_int_equal(pthread_create(&t1, NULL, race_release, &r1), 0);
	assert_int_equal(pthread_create(&t2, NULL, race_release, &r2), 0);
	for (int i = 0; i < 300; i++) {
		assert_int_equal(bh_try_acquire(bh, 1), 0);
		pthread_barrier_wait(&bar);
		pthread_barrier_wait(&bar);
		assert_int_equal(stats_of(bh).in_flight, 0);
	}
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	assert_int_equal(r1.ok + r2.ok, 300);
	assert_int_equal(stats_of(bh).over_released, 300);
	pthread_barrier_destroy(&bar);
	shm_done(bh, name);
}

static void test_double_release_race(void **state)
{
	(void)state;
	double_release_race(false);
}

static void test_double_release_race_fenced(void **state)
{
	(void)state;
	bhs_test_fenced(true);
	double_release_race(true);
	bhs_test_fenced(false);
}

/* ---- processes: fork, detach, exec ---------------------------------------------- */

static int child_of_holder(void *arg, int out, int in)
{
	bulkhead_t *bh = arg;
	struct bh_stats st;

	(void)in;
	say(out, bh_release(bh, 1));     /* the parent's permits are not ours */
	say(out, bh_try_acquire(bh, 1)); /* ours, on the inherited handle */
	bh_stats(bh, &st);
	say(out, (int)st.processes);
	hear(in);
	_exit(0); /* and we die holding it */
}

/* The parent holds `held` permits (taken as one call of that many, or one
 * at a time after warm pairs: warm), forks, and the child (child_of_holder)
 * may not give them back, takes one of its own and dies holding it. */
static void fork_child_holds_nothing(const char *name, uint32_t held, bool warm)
{
	bulkhead_t *bh = shm_make(name, 4, 0, 0);
	struct child c;
	struct bh_stats st;

	for (int i = 0; warm && i < 3; i++) { /* the plain pair, its slot kept */
		assert_int_equal(bh_try_acquire(bh, 1), 0);
		assert_int_equal(bh_release(bh, 1), 0);
	}
	for (uint32_t i = 0; i < held; i += warm ? 1 : held)
		assert_int_equal(bh_try_acquire(bh, warm ? 1 : held), 0);
	c = spawn(child_of_holder, bh);
	assert_int_equal(hear(c.rd), -EOVERFLOW);
	assert_int_equal(hear(c.rd), 0);
	assert_int_equal(hear(c.rd), 2);
	assert_int_equal(stats_of(bh).in_flight, held + 1);
	say(c.wr, 0);
	assert_int_equal(reap(&c), 0);
	await_in_flight(bh, held, BH_SEC);
	st = stats_of(bh);
	assert_int_equal(st.reclaimed, 1);
	assert_int_equal(st.processes, 1);
	assert_int_equal(bh_release(bh, held), 0); /* the parent's are still its own */
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	shm_done(bh, name);
}

static void test_fork_child_holds_nothing(void **state)
{
	(void)state;
	fork_child_holds_nothing(uniq("fork"), 2, false);
}

/* The same after the parent's fast paths ran: its thread keeps the slot it
 * used last, and the child's only thread is that thread. A child that kept
 * it would give back the parent's permit and hold its own in the parent's
 * ledger, where its death would not reclaim it. */
static void test_fork_child_forgets_the_parents_slot(void **state)
{
	(void)state;
	fork_child_holds_nothing(uniq("forklast"), 1, true);
}

/* A thread's fast paths keep the slot of the handle it used last. A handle
 * destroyed and another opened in its place (malloc tends to give back the
 * same block) must not inherit it: the old slot is in an unmapped segment,
 * or in a mapped one of another bulkhead. A page mapped into the hole each
 * detach leaves keeps the next segment from landing where the last one
 * was, which would put the old slot's address on the new one's same slot
 * and hide the mistake. Each round checks the new bulkhead's own counts. */
static void test_reopened_handle_uses_its_own_slot(void **state)
{
	char names[2][64];
	const void *seen[6];
	void *pad[6];
	int same = 0;

	(void)state;
	snprintf(names[0], sizeof(names[0]), "%s", uniq("reopenA"));
	snprintf(names[1], sizeof(names[1]), "%s", uniq("reopenB"));
	for (int i = 0; i < 6; i++) {
		struct bh_config cfg = { .max_concurrent = 2 };
		bulkhead_t *bh = NULL;
		struct bh_stats st;

		assert_int_equal(bh_shm_open(names[i % 2], &cfg, BH_SHM_CREATE, &bh), 0);
		seen[i] = bh;
		same += i > 0 && seen[i] == seen[i - 1];
		for (int k = 0; k < 3; k++) {
			assert_int_equal(bh_try_acquire(bh, 1), 0);
			assert_int_equal(bh_release(bh, 1), 0);
		}
		assert_int_equal(bh_try_acquire(bh, 1), 0);
		st = stats_of(bh);
		assert_int_equal(st.acquired, 4 + 4 * (i / 2));
		assert_int_equal(st.in_flight, 1);
		assert_int_equal(bh_release(bh, 1), 0);
		assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
		bh_destroy(bh);
		pad[i] = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		assert_true(pad[i] != MAP_FAILED);
	}
	for (int i = 0; i < 6; i++)
		munmap(pad[i], 4096);
	for (int i = 0; i < 2; i++)
		assert_int_equal(bh_shm_unlink(names[i]), 0);
	print_message("a handle reused its predecessor's address in %d of 5 reopens\n", same);
}

/* A thread's late calls, from a destructor of a key of its own that runs
 * after the library's (tindex.c gives the thread's index back there, and
 * a later call takes a fresh one), while a new thread already has the old
 * index, and with it the old slot. Each slot has one writer: if the late
 * calls kept using the slot the exited index maps to, the two threads'
 * windows on its in and out words would lose counts, and with them
 * permits. */
#define LATE_ROUNDS 5
#define LATE_PAIRS 200000

struct late {
	bulkhead_t *bh;
	pthread_key_t key;
	pthread_barrier_t *gone, *go;
	int rounds, bad;
	uint32_t index;
};

static void late_pairs(struct late *l)
{
	for (int i = 0; i < l->rounds; i++) {
		l->bad += bh_try_acquire(l->bh, 1) != 0;
		l->bad += bh_release(l->bh, 1) != 0;
	}
}

static void late_dtor(void *arg)
{
	struct late *l = arg;

	pthread_barrier_wait(l->gone); /* our index is free: the sibling takes it */
	pthread_barrier_wait(l->go);
	late_pairs(l);
}

static void *late_exiting(void *arg)
{
	struct late *l = arg;

	for (int i = 0; i < 3; i++) { /* the plain pair, its slot kept */
		l->bad += bh_try_acquire(l->bh, 1) != 0;
		l->bad += bh_release(l->bh, 1) != 0;
	}
	l->index = bhi_tindex;
	pthread_setspecific(l->key, l);
	return NULL;
}

static void *late_sibling(void *arg)
{
	struct late *l = arg;

	l->bad += bh_try_acquire(l->bh, 1) != 0;
	l->bad += bh_release(l->bh, 1) != 0;
	l->index = bhi_tindex;
	pthread_barrier_wait(l->go);
	late_pairs(l);
	return NULL;
}

static int late_calls(void *arg, int out, int in)
{
	bulkhead_t *bh = arg;
	pthread_barrier_t gone, go;
	pthread_key_t key;
	struct bh_stats st;
	int bad = 0, same = 0;

	(void)in;
	/* the library's key first (this thread has an index), then ours */
	if (bh_try_acquire(bh, 1) != 0 || bh_release(bh, 1) != 0 ||
	    pthread_key_create(&key, late_dtor) != 0)
		return 1;
	pthread_barrier_init(&gone, NULL, 2);
	pthread_barrier_init(&go, NULL, 2);
	for (int round = 0; round < LATE_ROUNDS; round++) {
		struct late x = { bh, key, &gone, &go, LATE_PAIRS, 0, 0 }, y = x;
		pthread_t tx, ty;

		if (pthread_create(&tx, NULL, late_exiting, &x) != 0)
			return 1;
		pthread_barrier_wait(&gone);
		if (pthread_create(&ty, NULL, late_sibling, &y) != 0)
			return 1;
		pthread_join(tx, NULL);
		pthread_join(ty, NULL);
		same += x.index == y.index; /* the scenario: the sibling took the index */
		bad += x.bad + y.bad;
	}
	st = stats_of(bh);
	print_message("late calls: %d failed calls, in_flight %llu, acquired %llu, released %llu\n",
		      bad, (unsigned long long)st.in_flight, (unsigned long long)st.acquired,
		      (unsigned long long)st.released);
	say(out, same);
	say(out, bad);
	say(out, (int)st.in_flight);
	say(out, st.acquired == 1 + LATE_ROUNDS * (3 + 1 + 2 * (uint64_t)LATE_PAIRS));
	say(out, st.released == st.acquired);
	return 0;
}

static void test_late_calls_after_index_reuse(void **state)
{
	const char *name = uniq("late");
	bulkhead_t *bh = shm_make(name, 8, 0, 0);
	struct child c;

	(void)state;
	c = spawn(late_calls, bh);
	assert_int_equal(hear(c.rd), LATE_ROUNDS);
	assert_int_equal(hear(c.rd), 0);
	assert_int_equal(hear(c.rd), 0);
	assert_int_equal(hear(c.rd), 1);
	assert_int_equal(hear(c.rd), 1);
	assert_int_equal(reap(&c), 0);
	assert_int_equal(stats_of(bh).in_flight, 0);
	shm_done(bh, name);
}

struct first_use {
	bulkhead_t *bh;
	pthread_barrier_t *bar;
	int r;
};

static void *first_use(void *arg)
{
	struct first_use *f = arg;

	pthread_barrier_wait(f->bar);
	f->r = bh_try_acquire(f->bh, 1);
	if (f->r == 0)
		f->r = bh_release(f->bh, 1);
	return NULL;
}

/* A fork child whose threads make their first calls at once: one of them
 * registers the child, the others find it registered and read its slot
 * without the mutex (acquire, att_proc(): a plain read was a data race,
 * which TSan reports). Every call succeeds and the child holds nothing. */
static int threads_first_use(void *arg, int out, int in)
{
	struct first_use f[8];
	pthread_t t[8];
	pthread_barrier_t bar;
	int bad = 0;

	(void)in;
	pthread_barrier_init(&bar, NULL, 8);
	for (int i = 0; i < 8; i++) {
		f[i] = (struct first_use){ arg, &bar, -12345 };
		if (pthread_create(&t[i], NULL, first_use, &f[i]) != 0)
			return 1;
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		bad += f[i].r != 0;
	}
	say(out, bad);
	say(out, (int)stats_of(arg).processes);
	return 0;
}

static void test_fork_child_threads_register_at_once(void **state)
{
	const char *name = uniq("forkthreads");
	bulkhead_t *bh = shm_make(name, 16, 0, 0);

	(void)state;
	for (int round = 0; round < 20; round++) {
		struct child c = spawn(threads_first_use, bh);

		assert_int_equal(hear(c.rd), 0);
		assert_int_equal(hear(c.rd), 2);
		assert_int_equal(reap(&c), 0);
		bhs_scan_now(bh); /* the child's slot, for the next round's count */
		assert_int_equal(stats_of(bh).processes, 1);
		assert_int_equal(stats_of(bh).in_flight, 0);
	}
	shm_done(bh, name);
}

static int detacher(void *arg, int out, int in)
{
	struct fresh *t = arg;
	bulkhead_t *bh;

	(void)in;
	if (bh_shm_open(t->name, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 2) != 0)
		return 1;
	say(out, 1);
	hear(in);
	bh_destroy(t->inherited); /* a handle the child has too */
	bh_destroy(bh);           /* the last one: gives the 2 back */
	say(out, 2);
	hear(in);
	return 0;
}

static void test_detach_returns_holdings(void **state)
{
	const char *name = uniq("detach");
	bulkhead_t *bh = shm_make(name, 3, 0, 0);
	struct fresh t = { name, bh };
	struct child c = spawn(detacher, &t);

	(void)state;
	assert_int_equal(hear(c.rd), 1);
	assert_int_equal(stats_of(bh).in_flight, 2);
	assert_int_equal(stats_of(bh).processes, 2);
	say(c.wr, 0);
	assert_int_equal(hear(c.rd), 2);
	assert_int_equal(stats_of(bh).in_flight, 0);
	assert_int_equal(stats_of(bh).processes, 1);
	assert_int_equal(stats_of(bh).reclaimed, 0); /* a detach is not a death */
	say(c.wr, 0);
	assert_int_equal(reap(&c), 0);
	shm_done(bh, name);
}

static int execer(void *arg, int out, int in)
{
	bulkhead_t *bh;

	(void)in;
	if (bh_shm_open(arg, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 1) != 0)
		return 1;
	say(out, 1);
	execl("/bin/sleep", "sleep", "30", (char *)NULL);
	return 2;
}

/* exec drops everything the process held: its descriptor is O_CLOEXEC, its
 * liveness lock goes with it, and the new image holds no handle. */
static void test_exec_counts_as_death(void **state)
{
	const char *name = uniq("exec");
	bulkhead_t *bh = shm_make(name, 2, 0, 0);
	struct child c = spawn(execer, (void *)name);

	(void)state;
	assert_int_equal(hear(c.rd), 1);
	await_in_flight(bh, 0, 2 * BH_SEC);
	assert_int_equal(kill(c.pid, 0), 0); /* still running, as sleep */
	assert_int_equal(stats_of(bh).reclaimed, 1);
	kill_reap(&c);
	shm_done(bh, name);
}

static int hold_and_die(void *arg, int out, int in)
{
	bulkhead_t *bh;

	(void)in;
	if (bh_shm_open(arg, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 2) != 0)
		return 1;
	say(out, 1);
	for (;;)
		pause();
}

/* A zombie's permits come back, to a waiter already blocked in bh_acquire
 * while nobody else calls the library, within a second of the death. */
static void test_zombie_reclaimed_for_waiter(void **state)
{
	const char *name = uniq("zombie");
	bulkhead_t *bh = shm_make(name, 2, 1, 0);
	struct child c = spawn(hold_and_die, (void *)name);
	uint64_t t0, took;

	(void)state;
	assert_int_equal(hear(c.rd), 1);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	kill(c.pid, SIGKILL); /* not reaped: a zombie until reap() below */
	t0 = bh_now_ns();
	assert_int_equal(bh_acquire(bh, 2, t0 + 3 * BH_SEC), 0);
	took = bh_now_ns() - t0;
	assert_true(took < BH_SEC);
	assert_int_equal(stats_of(bh).reclaimed, 2);
	waitpid(c.pid, NULL, 0);
	close(c.rd);
	close(c.wr);
	assert_int_equal(bh_release(bh, 2), 0);
	shm_done(bh, name);
}

static int forks_and_dies(void *arg, int out, int in)
{
	bulkhead_t *bh;
	pid_t grandchild;

	(void)in;
	if (bh_shm_open(arg, NULL, 0, &bh) != 0 || bh_try_acquire(bh, 2) != 0)
		return 1;
	grandchild = fork();
	if (grandchild == 0) {
		for (;;) /* never touches the bulkhead: inherits, keeps, sleeps */
			pause();
	}
	say(out, (int)grandchild);
	for (;;)
		pause();
}

/* A fork child shares its parent's open file description unless it trades
 * it for its own: the parent's death must be seen while the child lives. */
static void test_fork_child_does_not_keep_parent_alive(void **state)
{
	const char *name = uniq("keepalive");
	bulkhead_t *bh = shm_make(name, 2, 0, 0);
	struct child c = spawn(forks_and_dies, (void *)name);
	pid_t grandchild = (pid_t)hear(c.rd);

	(void)state;
	assert_true(grandchild > 0);
	assert_int_equal(stats_of(bh).in_flight, 2);
	kill_reap(&c);
	await_in_flight(bh, 0, BH_SEC);
	assert_int_equal(kill(grandchild, 0), 0); /* the grandchild is alive */
	assert_int_equal(stats_of(bh).reclaimed, 2);
	kill(grandchild, SIGKILL);
	shm_done(bh, name);
}

/* The same when the dying parent mapped the segment itself (it dropped the
 * handle it inherited, so its mapping is its own and not its parent's). A
 * mapping holds a reference to the open file description it was made
 * through, and a fork child inherits the mapping: had the parent mapped
 * through the description that holds its liveness lock, the child's copy of
 * the mapping would keep that lock, and the dead parent alive, for as long
 * as the child lived, whatever the child did with its descriptors. */
static int maps_forks_and_dies(void *arg, int out, int in)
{
	struct fresh *f = arg;

	bh_destroy(f->inherited);
	return forks_and_dies((void *)f->name, out, in);
}

static void test_fork_child_of_a_mapper_does_not_keep_it_alive(void **state)
{
	const char *name = uniq("keepalive-map");
	bulkhead_t *bh = shm_make(name, 2, 0, 0);
	struct child c = spawn(maps_forks_and_dies, &(struct fresh){ name, bh });
	pid_t grandchild = (pid_t)hear(c.rd);
	uint64_t t0;

	(void)state;
	assert_true(grandchild > 0);
	assert_int_equal(stats_of(bh).in_flight, 2);
	kill_reap(&c);
	t0 = bh_now_ns();
	while (stats_of(bh).in_flight != 0 && bh_now_ns() - t0 < BH_SEC) {
		bhs_scan_now(bh);
		usleep(10 * 1000);
	}
	kill(grandchild, SIGKILL);
	assert_int_equal(stats_of(bh).in_flight, 0); /* the dead parent's permits */
	assert_int_equal(stats_of(bh).reclaimed, 2);
	assert_int_equal(stats_of(bh).processes, 1);
	shm_done(bh, name);
}

struct shared_arg {
	bulkhead_t *bh;
	int r[6];
};

static void *on_shared_slot(void *arg)
{
	struct shared_arg *x = arg;

	x->r[0] = bh_try_acquire(x->bh, 1);
	x->r[1] = bh_acquire(x->bh, 2, bh_now_ns() + 5 * BH_SEC); /* queues */
	x->r[2] = bh_release(x->bh, 2);
	x->r[3] = bh_release(x->bh, 2); /* the process holds 1 */
	return NULL;
}

static void *release_two_shared(void *arg)
{
	struct shared_arg *x = arg;

	x->r[4] = bh_release(x->bh, 2); /* one is the main thread's: moved */
	x->r[5] = bh_release(x->bh, 1);
	return NULL;
}

static int open_one(void *arg, int out, int in)
{
	bulkhead_t *bh;
	int r = bh_shm_open(arg, NULL, 0, &bh);

	say(out, r);
	hear(in);
	if (r == 0)
		bh_destroy(bh);
	return 0;
}

/* A fork child that cannot attach as a process of its own (here the only
 * process slot is its parent's) holds nothing and can take nothing: every
 * call that needs its own slot fails with -ENOSPC, a release with
 * -EOVERFLOW, and nothing changes (bh_shm_open(3), "fork and exec"). */
static void noop_cb(struct bh_async *node, int result)
{
	(void)node;
	(void)result;
}

static int unattached_child(void *arg, int out, int in)
{
	bulkhead_t *bh = arg;
	struct bh_async node = { 0 };

	(void)in;
	say(out, bh_try_acquire(bh, 1));
	say(out, bh_acquire(bh, 1, bh_now_ns() + BH_SEC));
	say(out, bh_acquire_async(bh, &node, 1, noop_cb, NULL));
	say(out, bh_close(bh));
	say(out, bh_set_limit(bh, 1));
	say(out, bh_release(bh, 1));
	return 0;
}

static void test_fork_child_without_a_slot(void **state)
{
	const char *name = uniq("noslot");
	bulkhead_t *bh;
	struct child c;

	(void)state;
	bhs_test_geometry(1, 0, 0); /* one process: this one */
	bh = shm_make(name, 2, 4, 0);
	bhs_test_geometry(0, 0, 0);
	c = spawn(unattached_child, bh);
	assert_int_equal(hear(c.rd), -ENOSPC);
	assert_int_equal(hear(c.rd), -ENOSPC);
	assert_int_equal(hear(c.rd), -ENOSPC);
	assert_int_equal(hear(c.rd), -ENOSPC);
	assert_int_equal(hear(c.rd), -ENOSPC);
	assert_int_equal(hear(c.rd), -EOVERFLOW);
	assert_int_equal(reap(&c), 0);
	assert_int_equal(stats_of(bh).limit, 2); /* not closed, not resized */
	assert_word_clean(bh, 2);
	shm_done(bh, name);
}

/* At the segment's limits: a thread beyond its thread slots shares its
 * process's slot (under the lock, with an extra queue node to wait on), and
 * a process beyond its process slots is refused at open. */
static void test_segment_limits(void **state)
{
	const char *name = uniq("limits");
	bulkhead_t *bh;
	struct shared_arg x = { .r = { 9, 9, 9, 9, 9, 9 } };
	struct child a, b;
	pthread_t t;

	(void)state;
	bhs_test_geometry(2, 3, 4); /* two processes, three thread slots */
	bh = shm_make(name, 3, 4, BH_FAIR);
	bhs_test_geometry(0, 0, 0);
	a = spawn(open_one, (void *)name);
	assert_int_equal(hear(a.rd), 0);       /* the second process: one slot */
	b = spawn(open_one, (void *)name);
	assert_int_equal(hear(b.rd), -ENOSPC); /* a third: no process slot */
	assert_int_equal(bh_try_acquire(bh, 2), 0); /* main: its own slot, the last */
	x.bh = bh;
	assert_int_equal(pthread_create(&t, NULL, on_shared_slot, &x), 0);
	await_queued(bh, 1); /* took the last one, waits for two more */
	assert_int_equal(bh_release(bh, 2), 0); /* handed to the shared slot's waiter */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(x.r[0], 0);
	assert_int_equal(x.r[1], 0);
	assert_int_equal(x.r[2], 0);
	assert_int_equal(x.r[3], -EOVERFLOW);
	assert_int_equal(stats_of(bh).in_flight, 1);
	assert_int_equal(bh_try_acquire(bh, 1), 0); /* main holds 1, the shared slot 1 */
	assert_int_equal(pthread_create(&t, NULL, release_two_shared, &x), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(x.r[4], 0);
	assert_int_equal(x.r[5], -EOVERFLOW);
	assert_int_equal(stats_of(bh).in_flight, 0);
	assert_int_equal(bh_release(bh, 1), -EOVERFLOW);
	say(a.wr, 0);
	say(b.wr, 0);
	assert_int_equal(reap(&a), 0);
	assert_int_equal(reap(&b), 0);
	shm_done(bh, name);
}

/* Hold times are tracked across threads and processes like the rest, and
 * the metrics export carries the host-wide families. */
static void test_hold_and_metrics(void **state)
{
	const char *name = uniq("metrics");
	bulkhead_t *bh = shm_make(name, 3, 2, BH_TRACK_HOLD), *local = make_bh(1, 0, 0);
	bulkhead_t *all[] = { bh, local };
	struct bh_metric_set set = { .bulkheads = all, .n_bulkheads = 2 };
	struct child c = spawn(hold_and_die, (void *)name);
	char buf[1 << 16], want[256];

	(void)state;
	assert_int_equal(hear(c.rd), 1);
	kill_reap(&c);
	await_in_flight(bh, 0, BH_SEC);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	usleep(2000);
	assert_int_equal(bh_release(bh, 1), 0);
	bh_record_hold(bh, 5 * BH_MSEC);
	assert_int_equal(stats_of(bh).hold.count, 2);
	assert_true(stats_of(bh).hold.sum_ns >= 7 * BH_MSEC);
	assert_true(bh_metrics_prometheus(&set, buf, sizeof(buf)) < (ssize_t)sizeof(buf));
	snprintf(want, sizeof(want), "bulkhead_reclaimed_total{name=\"%s\"} 2\n", name);
	assert_non_null(strstr(buf, want));
	snprintf(want, sizeof(want), "bulkhead_processes{name=\"%s\"} 1\n", name);
	assert_non_null(strstr(buf, want));
	snprintf(want, sizeof(want), "bulkhead_hold_seconds_count{name=\"%s\"} 2\n", name);
	assert_non_null(strstr(buf, want));
	snprintf(want, sizeof(want), "bulkhead_processes{name=\"%s\"}", bh_name(local));
	assert_null(strstr(buf, want)); /* process-local: no host-wide families */
	assert_true(bh_metrics_json(&set, buf, sizeof(buf)) < (ssize_t)sizeof(buf));
	assert_non_null(strstr(buf, "\"over_released\":0,\"reclaimed\":2,\"processes\":1,"));
	bh_destroy(local);
	shm_done(bh, name);
}

/* A permit this thread took and another gave back leaves this thread's
 * count too high; its next take sees more than the host has in flight and
 * starts afresh, so its later holds are measured. */
static void *give_one(void *bh)
{
	assert_int_equal(bh_release(bh, 1), 0);
	return NULL;
}

static void test_hold_after_release_elsewhere(void **state)
{
	const char *name = uniq("holdx");
	bulkhead_t *bh = shm_make(name, 3, 2, BH_TRACK_HOLD);
	pthread_t t;

	(void)state;
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, give_one, bh), 0);
	pthread_join(t, NULL); /* measures nothing */
	for (int i = 0; i < 5; i++) {
		assert_int_equal(bh_try_acquire(bh, 1), 0);
		assert_int_equal(bh_release(bh, 1), 0);
	}
	assert_int_equal(stats_of(bh).hold.count, 5);
	assert_int_equal(stats_of(bh).in_flight, 0);
	shm_done(bh, name);
}

/* Every way the core hands a host-wide handle to its layer (try, acquire,
 * release), on a thread's first call and later ones, a release moved to
 * another thread, refusals and over-release, with each flag the layer's
 * fast path tests for: results as documented, counters equal to what the
 * callers saw (none with BH_NO_STATS), hold times with BH_TRACK_HOLD. */
struct flag_round {
	bulkhead_t *bh;
	int r[8];
};

static void *flag_calls(void *arg)
{
	struct flag_round *f = arg;

	f->r[0] = bh_try_acquire(f->bh, 1);          /* this thread's first call */
	f->r[1] = bh_acquire(f->bh, 1, BH_FOREVER);
	f->r[2] = bh_try_acquire(f->bh, 1);          /* full, no queue: -EBUSY */
	f->r[3] = bh_acquire(f->bh, 3, BH_FOREVER);  /* more than the limit */
	f->r[4] = bh_release(f->bh, 1);
	f->r[5] = bh_try_acquire(f->bh, 0);
	f->r[6] = bh_release(f->bh, 0);
	f->r[7] = 0;
	return NULL;
}

static void test_every_entry_each_flag(void **state)
{
	static const uint32_t flags[] = { 0, BH_NO_STATS, BH_TRACK_HOLD,
					  BH_NO_STATS | BH_TRACK_HOLD, BH_FAIR };

	(void)state;
	for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
		const char *name = uniq("flags");
		struct flag_round f = { .bh = shm_make(name, 2, 0, flags[k]) };
		struct bh_stats st;
		pthread_t t;

		assert_int_equal(pthread_create(&t, NULL, flag_calls, &f), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		assert_int_equal(f.r[0], 0);
		assert_int_equal(f.r[1], 0);
		assert_int_equal(f.r[2], -EBUSY);
		assert_int_equal(f.r[3], -EINVAL);
		assert_int_equal(f.r[4], 0);
		assert_int_equal(f.r[5], -EINVAL);
		assert_int_equal(f.r[6], -EINVAL);
		/* the other permit, taken there, is given back here */
		assert_int_equal(bh_release(f.bh, 1), 0);
		assert_int_equal(bh_release(f.bh, 1), -EOVERFLOW);
		assert_int_equal(bh_try_acquire(f.bh, 2), 0);
		assert_int_equal(bh_release(f.bh, 2), 0);
		st = stats_of(f.bh);
		assert_int_equal(st.in_flight, 0);
		assert_int_equal(st.over_released, 1);
		if (flags[k] & BH_NO_STATS) {
			assert_int_equal(st.acquired, 0);
			assert_int_equal(st.released, 0);
			assert_int_equal(st.rejected, 0);
		} else {
			assert_int_equal(st.acquired, 3);
			assert_int_equal(st.released, 3);
			assert_int_equal(st.rejected, 1);
		}
		if (flags[k] & BH_TRACK_HOLD)
			assert_int_equal(st.hold.count, 1); /* only this thread's pair ended a hold */
		else
			assert_int_equal(st.hold.count, 0);
		shm_done(f.bh, name);
	}
}

static void never_called(struct bh_async *node, int result)
{
	(void)node;
	(void)result;
	fail_msg("an async acquire that took its permits at once ran its callback");
}

/* A thread's first call on the handle, an async acquire that takes its
 * permits at once, releases them on the same thread. */
static void *async_take_then_release(void *arg)
{
	bulkhead_t *bh = arg;
	struct bh_async node;

	if (bh_acquire_async(bh, &node, 2, never_called, NULL) != 0)
		return (void *)1;
	usleep(1000);
	return bh_release(bh, 2) == 0 ? NULL : (void *)2;
}

/* With BH_TRACK_HOLD an async acquire that takes its permits at once begins
 * a hold, as bh_try_acquire does, on every path: also when the thread has
 * no ledger slot mapped yet (found by fuzz_shm_api: the hold was lost). */
static void test_async_take_begins_hold(void **state)
{
	const char *name = uniq("async-hold");
	bulkhead_t *bh = shm_make(name, 2, 2, BH_TRACK_HOLD);
	pthread_t t;
	void *ret;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, async_take_then_release, bh), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_null(ret);
	assert_int_equal(stats_of(bh).hold.count, 1);
	assert_true(stats_of(bh).hold.sum_ns >= BH_MSEC);
	assert_int_equal(stats_of(bh).in_flight, 0);
	shm_done(bh, name);
}

/* Creating a segment on a file system without room for it fails with
 * -ENOSPC. The file was only truncated to size, so its pages were first
 * needed when the new segment was written: the process died of SIGBUS.
 * The child mounts a tmpfs far smaller than a segment in a mount namespace
 * of its own (exit 77: it cannot, and the test is skipped). */
static int create_on_small_fs(const char *dir)
{
	struct bh_config cfg = { .max_concurrent = 4, .queue_capacity = 4 };
	bulkhead_t *bh = NULL;
	struct dirent *e;
	DIR *d;
	int r, left = 0;

	if (unshare(CLONE_NEWNS) < 0 && unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return 77;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", dir, "tmpfs", 0, "size=256k") < 0)
		return 77;
	setenv("BH_SHM_DIR", dir, 1);
	r = bh_shm_open("fullfs", &cfg, BH_SHM_CREATE, &bh);
	if (r != -ENOSPC)
		return 10;
	if ((d = opendir(dir)) == NULL)
		return 11;
	while ((e = readdir(d)) != NULL)
		left += e->d_name[0] != '.'; /* no half-made file left behind */
	closedir(d);
	return left ? 12 : 0;
}

static void test_create_on_full_fs(void **state)
{
	char dir[] = "/tmp/bh-fullfs-XXXXXX";
	pid_t pid;
	int st;

	(void)state;
	assert_non_null(mkdtemp(dir));
	fflush(stdout);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGBUS, SIG_DFL); /* cmocka's handler is the parent's business */
		alarm(60);
		_exit(create_on_small_fs(dir));
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	rmdir(dir);
	if (WIFSIGNALED(st))
		fail_msg("the creator died of signal %d", WTERMSIG(st));
	if (WEXITSTATUS(st) == 77)
		skip(); /* no mount namespace here */
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- cancellation: only a waiting bh_acquire is a cancellation point --- */

static int cb_hold[2];
static _Atomic int cb_running;

static void held_cb(struct bh_async *node, int result)
{
	char c;

	(void)node;
	(void)result;
	atomic_store(&cb_running, 1);
	if (read(cb_hold[0], &c, 1) != 1) {
		/* the test let it go */
	}
}

struct cancelled_call {
	bulkhead_t *bh;
	struct bh_async *node;
	const char *name;
	_Atomic pid_t tid;
	_Atomic int returned; /* the call returned, and its result + 100 */
	_Atomic int destroyed;
};

/* Cancelled before it starts (deferred: the cancel waits for a
 * cancellation point), the thread calls bh_cancel_async while the agent
 * runs the node's callback: the call waits for the callback, and must not
 * act on the cancel there. */
static void *cancel_async_cancelled(void *arg)
{
	struct cancelled_call *c = arg;
	int r;

	atomic_store(&c->tid, (pid_t)syscall(SYS_gettid));
	pthread_cancel(pthread_self());
	r = bh_cancel_async(c->bh, c->node);
	atomic_store(&c->returned, r + 100);
	pthread_testcancel();
	return NULL;
}

static void test_cancel_async_not_a_cancellation_point(void **state)
{
	const char *name = uniq("cancasync");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct bhs_att *a = att_of(bh);
	struct bh_async node;
	struct cancelled_call c = { bh, &node, NULL, 0, 0, 0 };
	uintptr_t lo = (uintptr_t)&a->delivered, hi = lo + sizeof(a->delivered), f;
	pthread_t t;
	void *ret;

	(void)state;
	assert_int_equal(pipe(cb_hold), 0);
	atomic_store(&cb_running, 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_acquire_async(bh, &node, 1, held_cb, NULL), 1);
	assert_int_equal(bh_release(bh, 1), 0); /* granted: the agent runs held_cb */
	while (!atomic_load(&cb_running))
		usleep(1000);
	pthread_create(&t, NULL, cancel_async_cancelled, &c);
	/* Until it either left (acted on the cancel in its wait) or sleeps
	 * waiting for the callback, on a->delivered. */
	for (;;) {
		pid_t tid = atomic_load(&c.tid);

		if (pthread_tryjoin_np(t, &ret) == 0)
			break;
		f = tid ? futex_of(tid) : 0;
		if (f >= lo && f < hi) {
			assert_int_equal(write(cb_hold[1], "", 1), 1); /* the callback returns */
			assert_int_equal(pthread_join(t, &ret), 0);
			break;
		}
		usleep(1000);
	}
	assert_true(ret == PTHREAD_CANCELED); /* at its next cancellation point */
	assert_int_equal(atomic_load(&c.returned), 100); /* bh_cancel_async returned 0 */
	close(cb_hold[0]);
	close(cb_hold[1]);
	assert_int_equal(bh_release(bh, 1), 0); /* the grant held_cb was given */
	shm_done(bh, name); /* the agent stops: a->mu is free */
}

/* bh_shm_open is no cancellation point either: cancelled inside, the
 * thread would leave the registry lock held, which fork() takes. */
static void *open_cancelled(void *arg)
{
	struct cancelled_call *c = arg;
	bulkhead_t *bh = NULL;
	int r;

	pthread_cancel(pthread_self());
	r = bh_shm_open(c->name, NULL, 0, &bh);
	atomic_store(&c->returned, r + 100);
	if (r == 0)
		bh_destroy(bh); /* a second handle: no detach */
	atomic_store(&c->destroyed, 1);
	pthread_testcancel();
	return NULL;
}

static void test_open_not_a_cancellation_point(void **state)
{
	const char *name = uniq("cancopen");
	bulkhead_t *bh = shm_make(name, 1, 4, 0);
	struct cancelled_call c = { NULL, NULL, name, 0, 0, 0 };
	pthread_t t;
	void *ret;
	pid_t pid;
	int st;

	(void)state;
	pthread_create(&t, NULL, open_cancelled, &c);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_true(ret == PTHREAD_CANCELED);
	assert_int_equal(atomic_load(&c.returned), 100); /* it attached */
	assert_int_equal(atomic_load(&c.destroyed), 1);
	pid = fork(); /* its prepare handler takes the registry lock */
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	shm_done(bh, name);
}

/* Nor is the last handle's bh_destroy, which detaches (it closes the
 * descriptor whose lock says the process lives, and joins the agent): a
 * cancel acted on there would leave the process registered, its slot
 * taken, its lock held. */
static void *destroy_cancelled(void *arg)
{
	struct cancelled_call *c = arg;

	pthread_cancel(pthread_self());
	bh_destroy(c->bh); /* the process's only handle: it detaches */
	atomic_store(&c->destroyed, 1);
	pthread_testcancel();
	return NULL;
}

static void test_destroy_not_a_cancellation_point(void **state)
{
	const char *name = uniq("candestroy");
	struct cancelled_call c = { shm_make(name, 2, 2, 0), NULL, name, 0, 0, 0 };
	bulkhead_t *bh = NULL;
	pthread_t t;
	void *ret;

	(void)state;
	assert_int_equal(stats_of(c.bh).processes, 1);
	pthread_create(&t, NULL, destroy_cancelled, &c);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_true(ret == PTHREAD_CANCELED); /* at its next cancellation point */
	assert_int_equal(atomic_load(&c.destroyed), 1);
	assert_int_equal(bh_shm_open(name, NULL, 0, &bh), 0);
	assert_int_equal(stats_of(bh).processes, 1); /* the detached registration is gone */
	shm_done(bh, name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_open_flags),
		cmocka_unit_test(test_cfg_must_match),
		cmocka_unit_test(test_file_modes),
		cmocka_unit_test(test_unlink_then_last_detach),
		cmocka_unit_test(test_name_and_closed_attach),
		cmocka_unit_test(test_foreign_files_refused),
		cmocka_unit_test(test_damaged_state_refused),
		cmocka_unit_test(test_fuzz_attach),
		cmocka_unit_test(test_frozen_word_free_lock),
		cmocka_unit_test(test_word_short_of_ledgers),
		cmocka_unit_test(test_try_release_counts),
		cmocka_unit_test(test_fast_pairs_count_exactly),
		cmocka_unit_test(test_errno_untouched),
		cmocka_unit_test(test_handles_share_ledger),
		cmocka_unit_test(test_cross_thread_release),
		cmocka_unit_test(test_double_release_race),
		cmocka_unit_test(test_double_release_race_fenced),
		cmocka_unit_test(test_fork_child_holds_nothing),
		cmocka_unit_test(test_fork_child_forgets_the_parents_slot),
		cmocka_unit_test(test_reopened_handle_uses_its_own_slot),
		cmocka_unit_test(test_late_calls_after_index_reuse),
		cmocka_unit_test(test_fork_child_threads_register_at_once),
		cmocka_unit_test(test_detach_returns_holdings),
		cmocka_unit_test(test_exec_counts_as_death),
		cmocka_unit_test(test_fork_child_does_not_keep_parent_alive),
		cmocka_unit_test(test_fork_child_of_a_mapper_does_not_keep_it_alive),
		cmocka_unit_test(test_zombie_reclaimed_for_waiter),
		cmocka_unit_test(test_hold_and_metrics),
		cmocka_unit_test(test_hold_after_release_elsewhere),
		cmocka_unit_test(test_every_entry_each_flag),
		cmocka_unit_test(test_async_take_begins_hold),
		cmocka_unit_test(test_segment_limits),
		cmocka_unit_test(test_fork_child_without_a_slot),
		cmocka_unit_test(test_create_on_full_fs),
		cmocka_unit_test(test_cancel_async_not_a_cancellation_point),
		cmocka_unit_test(test_open_not_a_cancellation_point),
		cmocka_unit_test(test_destroy_not_a_cancellation_point),
	};

	alarm(300);
	if (getenv("BH_TEST_FILTER")) /* one test: BH_TEST_FILTER=test_name */
		cmocka_set_test_filter(getenv("BH_TEST_FILTER"));
	return cmocka_run_group_tests(tests, shm_setup, shm_teardown);
}
