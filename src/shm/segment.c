/* The segment file of a host-wide bulkhead: its name and path, its header
 * (geometry, layout, checksum) and the checks an attaching process makes on
 * it, and creation.
 *
 * A segment is created complete under no name (O_TMPFILE, or a private
 * temporary name where the file system has none) and then linked into
 * place, so nobody ever sees a half-initialised one: a file at the name is
 * either a finished segment or not ours. Attaching (open.c) reads and
 * checks the header before mapping anything (fstat first: no SIGBUS on a
 * short file), looks at the size again once mapped, then checks the header
 * again in the mapping. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_TMPFILE, secure_getenv */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hooks.h"
#include "seg.h"

/* Tests shrink the segment to reach its limits. */
static uint32_t geo_procs = BHS_PROCS, geo_slots = BHS_SLOTS, geo_extra = BHS_EXTRA;

void bhs_test_geometry(uint32_t nprocs, uint32_t nslots, uint32_t nextra)
{
	geo_procs = nprocs ? nprocs : BHS_PROCS;
	geo_slots = nslots ? nslots : BHS_SLOTS;
	geo_extra = nextra ? nextra : BHS_EXTRA;
}

/* ---- names and paths ---------------------------------------------------------- */

int bhs_check_name(const char *name)
{
	size_t len;

	if (!name)
		return -EINVAL;
	len = strnlen(name, BH_SHM_NAME_MAX + 1);
	if (len == 0 || strchr(name, '/'))
		return -EINVAL;
	return len > BH_SHM_NAME_MAX ? -ENAMETOOLONG : 0;
}

int bhs_reopen(int fd)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return open(proc, O_RDWR | O_CLOEXEC);
}

/* BH_SHM_DIR, ignored in a setuid or setgid program. */
static const char *shm_dir(void)
{
	const char *d = secure_getenv("BH_SHM_DIR");

	return d && *d ? d : "/dev/shm";
}

int bhs_path_of(const char *name, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/bulkhead.%s", shm_dir(), name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- the header ------------------------------------------------------------------ */

static uint64_t fnv1a(const void *p, size_t len)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t hdr_sum(const struct bhs_hdr *h)
{
	return fnv1a(h, offsetof(struct bhs_hdr, checksum));
}


/* Where the arrays go for a geometry, and the segment's size. */
static void layout(struct bhs_hdr *h)
{
	size_t off = bhs_align_up(sizeof(struct bhs_seg));

	h->off_procs = off;
	/* one more than nprocs: the recovery slot (BHS_RECOVERY, open.c) */
	off = bhs_align_up(off + ((size_t)h->nprocs + 1) * sizeof(struct bhs_proc));
	h->off_slots = off;
	off = bhs_align_up(off + (size_t)h->nslots * sizeof(struct bhs_slot));
	h->off_qnodes = off;
	off = bhs_align_up(off + (size_t)(h->nslots + h->nextra) * sizeof(struct bhs_qnode));
	h->seg_size = (off + 4095) & ~(size_t)4095;
}

/* Foreign or of another layout: -EPROTO. Ours but inconsistent: -EBADMSG. */
int bhs_check_hdr(const struct bhs_hdr *h, const char *name, off_t file_size)
{
	struct bhs_hdr want;

	if (h->magic != BHS_MAGIC)
		return -EPROTO;
	if (h->layout != BHS_LAYOUT || h->hdr_size != sizeof(*h))
		return -EPROTO;
	if (h->checksum != hdr_sum(h))
		return -EBADMSG;
	if (h->nprocs == 0 || h->nprocs > BHS_PROCS || h->nslots == 0 || h->nslots > BHS_SLOTS ||
	    h->nextra > BHS_EXTRA || h->nholds != BHS_HOLDS)
		return -EBADMSG;
	want = *h;
	layout(&want);
	if (want.off_procs != h->off_procs || want.off_slots != h->off_slots ||
	    want.off_qnodes != h->off_qnodes || want.seg_size != h->seg_size ||
	    (uint64_t)file_size != h->seg_size)
		return -EBADMSG;
	if (h->max_concurrent == 0 || h->max_concurrent > BH_LIMIT_MAX ||
	    h->queue_cap > h->nslots + h->nextra || (h->flags & ~BHS_CFG_FLAGS))
		return -EBADMSG;
	if (strncmp(h->name, name, sizeof(h->name)) != 0 || h->name[sizeof(h->name) - 1])
		return -EBADMSG;
	return 0;
}

/* A word whose limit (free + held) is one a bulkhead can have. */
static bool word_sane(uint64_t w)
{
	int64_t limit = w_avail(w) + w_held(w);

	return limit >= 1 && limit <= (int64_t)BH_LIMIT_MAX;
}

/* The recovery log (reclaim.c): closed, or open (bit 0) with an epoch
 * (bit 1) for a process slot or for a rebuild (UINT32_MAX), whose word to
 * thaw to has a limit. */
static bool rlog_valid(const struct bhs_seg *g)
{
	struct bhs_seg *m = (struct bhs_seg *)g;
	uint32_t open = atomic_load_explicit(&m->rlog.open, memory_order_relaxed);
	uint32_t pidx = atomic_load_explicit(&m->rlog.pidx, memory_order_relaxed);
	uint64_t thaw = atomic_load_explicit(&m->rlog.thaw, memory_order_relaxed);

	if (open == 0)
		return true;
	if (open & ~3u || !(open & 1u))
		return false;
	if (pidx == UINT32_MAX)
		return word_sane(thaw);
	return pidx < g->hdr.nprocs;
}

/* The grant log (queue.c): closed, or a queue node's index + 1. */
static bool glog_valid(const struct bhs_seg *g)
{
	uint32_t log = atomic_load_explicit(&((struct bhs_seg *)g)->glog, memory_order_relaxed);

	return log == 0 || (log & ~GLOG_PRE) - 1u < g->hdr.nslots + g->hdr.nextra;
}

/* The mutable part a crash could never leave this way: refuse it. */
int bhs_check_state(const struct bhs_seg *g)
{
	uint64_t w = atomic_load_explicit(&((struct bhs_seg *)g)->word, memory_order_relaxed);
	uint32_t lock = atomic_load_explicit(&((struct bhs_seg *)g)->lock, memory_order_relaxed);

	if (!word_sane(w) ||
	    s_nq(w) > g->hdr.nslots + g->hdr.nextra || (w & (1ull << 59)))
		return -EBADMSG;
	if (lock && ((lock & 0xffffu) == 0 || (lock & 0xffffu) > g->hdr.nprocs + 1u))
		return -EBADMSG;
	if (!rlog_valid(g) || !glog_valid(g))
		return -EBADMSG;
	return 0;
}

static uint32_t norm_queue(uint32_t cap, uint32_t nodes)
{
	return cap > nodes ? nodes : cap;
}

/* A cfg given for an existing bulkhead must match how it was created. */
int bhs_check_cfg(const struct bh_config *cfg, const struct bhs_hdr *h, const char *name)
{
	if (!cfg)
		return 0;
	if (cfg->max_concurrent != h->max_concurrent || cfg->flags != h->flags ||
	    norm_queue(cfg->queue_capacity, h->nslots + h->nextra) != h->queue_cap)
		return -EINVAL;
	if (cfg->name && strcmp(cfg->name, name) != 0)
		return -EINVAL;
	return 0;
}

/* ---- creating ---------------------------------------------------------------------- */

static void init_seg(struct bhs_seg *g, const struct bhs_hdr *h, const struct bh_config *cfg)
{
	struct bhs_qnode *q = (struct bhs_qnode *)((char *)g + h->off_qnodes);

	memcpy(&g->hdr, h, sizeof(*h));
	atomic_store_explicit(&g->word, w_make(cfg->max_concurrent, cfg->max_concurrent, 0),
			      memory_order_relaxed);
	atomic_store_explicit(&g->starve_ns, BH_MSEC, memory_order_relaxed);
	/* The free list of extra nodes, lowest index first. */
	for (uint32_t i = h->nslots + h->nextra; i-- > h->nslots;) {
		atomic_store_explicit(&q[i].next, atomic_load_explicit(&g->free_extra,
								       memory_order_relaxed),
				      memory_order_relaxed);
		atomic_store_explicit(&g->free_extra, i + 1, memory_order_relaxed);
	}
}

static void fill_hdr(struct bhs_hdr *h, const char *name, const struct bh_config *cfg,
		     unsigned mode)
{
	struct timespec ts;

	memset(h, 0, sizeof(*h));
	h->magic = BHS_MAGIC;
	h->layout = BHS_LAYOUT;
	h->hdr_size = sizeof(*h);
	h->nprocs = geo_procs;
	h->nslots = geo_slots;
	h->nextra = geo_extra;
	h->nholds = BHS_HOLDS;
	layout(h);
	h->max_concurrent = cfg->max_concurrent;
	h->queue_cap = norm_queue(cfg->queue_capacity, h->nslots + h->nextra);
	h->flags = cfg->flags;
	h->mode = mode;
	clock_gettime(CLOCK_REALTIME, &ts);
	h->created_ns = (uint64_t)ts.tv_sec * BH_SEC + (uint64_t)ts.tv_nsec;
	h->creator_pid = (int32_t)getpid();
	snprintf(h->name, sizeof(h->name), "%s", name);
	h->checksum = hdr_sum(h);
}

/* An unnamed file in dir: O_TMPFILE, else a private name (*tmp) that the
 * caller removes. */
static int anon_file(const char *dir, unsigned mode, char *tmp, size_t len)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode);

	tmp[0] = '\0';
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
	for (int i = 0; i < 100; i++) {
		snprintf(tmp, len, "%s/.bulkhead.tmp.%d.%ld.%d", dir, (int)getpid(),
			 (long)bh_now_ns(), i);
		fd = open(tmp, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, mode);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	return -1;
}

/* Put a finished file at path; EEXIST when someone was first. */
static int publish(int fd, const char *tmp, const char *path)
{
	char proc[64];
	int r;

	if (tmp[0]) {
		r = link(tmp, path);
		r = r < 0 ? -errno : 0;
		unlink(tmp);
		return r;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	r = linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
	return r < 0 ? -errno : 0;
}

/* Every process attaches through descriptions it opens read-write from the
 * file itself, the creator too (it maps the segment through one of its
 * own: open.c, map_att): a mode that does not let us do that would leave a
 * segment that nobody can attach to, so it is refused before it has a
 * name. */
static int check_reopen(int fd)
{
	int t = bhs_reopen(fd);

	if (t < 0)
		return -errno;
	close(t);
	return 0;
}

/* Create the segment complete, then link it at path. Returns its fd (our
 * own open file description), or -EEXIST when it appeared meanwhile. */
int bhs_create_seg(const char *name, const char *path, const struct bh_config *cfg,
		      unsigned mode)
{
	char dir[4096], tmp[4200];
	struct bhs_hdr h;
	void *m;
	int fd, r;

	snprintf(dir, sizeof(dir), "%s", shm_dir());
	fill_hdr(&h, name, cfg, mode);
	if ((fd = anon_file(dir, mode, tmp, sizeof(tmp))) < 0)
		return -errno;
	/* Every page is allocated now: a file only truncated to size gets its
	 * pages when they are first written, and on a full file system that
	 * write through the mapping is a SIGBUS, not an error. */
	r = ftruncate(fd, (off_t)h.seg_size) < 0 ? -errno : 0;
	if (r == 0)
		r = -posix_fallocate(fd, 0, (off_t)h.seg_size);
	if (r == 0) {
		m = mmap(NULL, h.seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			r = -errno;
		} else {
			init_seg(m, &h, cfg);
			munmap(m, h.seg_size);
			r = check_reopen(fd);
			if (r == 0) {
				r = publish(fd, tmp, path);
				tmp[0] = '\0'; /* publish() unlinked it */
			}
		}
	}
	if (r < 0 && tmp[0])
		unlink(tmp);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

