/* Attaching to and detaching from host-wide bulkheads, and their handles.
 * The segment file itself (names, the header and its checks, creation) is
 * segment.c.
 *
 * Each process attaches to a segment once (the registry, by device and
 * inode) however many handles it opens, and owns: a process slot whose
 * liveness lock it holds through its own open file description (opened
 * O_CLOEXEC, reopened by a fork child, and never the one the segment is
 * mapped through, so that a child never keeps a dead parent looking alive),
 * the ledgers of its threads, and its queue nodes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_TMPFILE, F_OFD_*, secure_getenv, qsort_r */
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hooks.h"
#include "lib/spin.h"
#include "seg.h"
#include "shm/dispatch.h"

#define OPEN_FLAGS (BH_SHM_CREATE | BH_SHM_EXCL | BH_SHM_MODE(0777))
#define POLL_NS (100 * BH_MSEC)

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct bhs_att *reg_head;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

/* ---- attaching --------------------------------------------------------------------------- */

/* Open an existing segment: refuse anything that is not a regular file
 * (O_NONBLOCK: a FIFO planted at the name does not block us; a socket, or
 * a device file without its device, fails the open with ENXIO). */
static int open_existing(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		return errno == ELOOP || errno == EISDIR || errno == ENXIO ? -EPROTO : -errno;
	return fd;
}

static int read_hdr(int fd, const char *name, struct bhs_hdr *h, off_t *size)
{
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EPROTO;
	*size = st.st_size;
	memset(h, 0, sizeof(*h));
	n = pread(fd, h, sizeof(*h), 0);
	if (n < 0)
		return -errno;
	if ((size_t)n < sizeof(*h))
		return (size_t)n >= sizeof(h->magic) && h->magic == BHS_MAGIC ? -EBADMSG : -EPROTO;
	return bhs_check_hdr(h, name, st.st_size);
}

static bool force_fenced;

void bhs_test_fenced(bool on)
{
	force_fenced = on;
}

/* membarrier(2) for transfers, once per process; where the kernel has none,
 * fast paths fence instead. */
static bool have_membarrier(void)
{
	static _Atomic int state; /* 0 unknown, 1 yes, 2 no */
	static _Atomic pid_t for_pid;
	/* acquire: pairs with the release store of state below, so for_pid is
	 * the one stored with it */
	int s = atomic_load_explicit(&state, memory_order_acquire), saved = errno;
	long q;

	if (force_fenced)
		return false;
	if (s && atomic_load_explicit(&for_pid, memory_order_relaxed) == getpid())
		return s == 1;
	q = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	s = (q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
	     syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
		    ? 1
		    : 2;
	errno = saved;
	atomic_store_explicit(&for_pid, getpid(), memory_order_relaxed);
	/* release: for_pid before state; pairs with the acquire load above */
	atomic_store_explicit(&state, s, memory_order_release);
	return s == 1;
}

static void free_att(struct bhs_att *a)
{
	if (a->seg)
		munmap(a->seg, a->size);
	if (a->fd >= 0)
		close(a->fd);
	pthread_mutex_destroy(&a->mu);
	pthread_mutex_destroy(&a->xmu);
	pthread_mutex_destroy(&a->hmu);
	pthread_cond_destroy(&a->delivered);
	free(a->hold);
	free((void *)a->anode);
	free(a->order);
	bhi_free_aligned(a);
}

static struct bhs_att *new_att(int fd, const struct stat *st, const struct bhs_hdr *h,
			       const char *name)
{
	struct bhs_att *a = bhi_zalloc_aligned(sizeof(*a), BHI_CACHELINE);
	uint32_t nodes = h->nslots + h->nextra;

	if (!a)
		return NULL;
	a->fd = fd;
	a->dev = st->st_dev;
	a->ino = st->st_ino;
	pthread_mutex_init(&a->mu, NULL);
	pthread_mutex_init(&a->xmu, NULL);
	pthread_mutex_init(&a->hmu, NULL);
	pthread_cond_init(&a->delivered, NULL);
	a->anode = calloc(h->nextra ? h->nextra : 1, sizeof(*a->anode));
	a->order = calloc(nodes, sizeof(*a->order));
	a->hold = (h->flags & BH_TRACK_HOLD) ? calloc(BHS_TMAP, sizeof(*a->hold)) : NULL;
	if (!a->anode || !a->order || ((h->flags & BH_TRACK_HOLD) && !a->hold)) {
		a->fd = -1;
		free_att(a);
		return NULL;
	}
	a->flags = h->flags;
	a->nprocs = h->nprocs;
	a->nslots = h->nslots;
	a->nextra = h->nextra;
	a->sync = &bhi_futex_shared_ops;
	a->spin_ns = BHI_SPIN_NS;
	a->spin_iters = bhi_spin_iters_for(BHI_SPIN_NS);
	a->poll_ns = POLL_NS;
	snprintf(a->name, sizeof(a->name), "%s", name);
	return a;
}

/* The file still holds every page of a mapping of size bytes. mmap does
 * not look at the file's size, and a page past its end is a SIGBUS when it
 * is touched, not an error: a file cut short between read_hdr's look and
 * the mapping (by a process with write access, or one that replaced the
 * segment's contents) must be refused before anything reads the mapping. */
static int still_long_enough(int fd, size_t size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	return st.st_size >= 0 && (uint64_t)st.st_size >= size ? 0 : -EBADMSG;
}

/* Map and check again in the mapping: the file may have changed since.
 * The mapping is made through a description of its own, closed at once,
 * never the one that holds our liveness lock: a mapping holds a reference
 * to the description it was made through, which keeps the description's
 * OFD locks for as long as the mapping lives -- in a fork child too, which
 * inherits the mapping, so the child would keep a dead parent looking
 * alive whatever it did with its descriptors. */
static int map_att(struct bhs_att *a, const struct bhs_hdr *h, const char *name)
{
	int mfd = bhs_reopen(a->fd), r;
	void *m;

	if (mfd < 0)
		return -errno;
	m = mmap(NULL, h->seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	r = m == MAP_FAILED ? -errno : 0;
	close(mfd);
	if (r < 0)
		return r;
	a->seg = m;
	a->size = h->seg_size;
	if ((r = still_long_enough(a->fd, h->seg_size)) < 0)
		return r;
	if ((r = bhs_check_hdr(&a->seg->hdr, name, (off_t)h->seg_size)) < 0 ||
	    memcmp(&a->seg->hdr, h, sizeof(*h)) != 0 || (r = bhs_check_state(a->seg)) < 0)
		return r < 0 ? r : -EBADMSG;
	a->procs = (struct bhs_proc *)((char *)m + h->off_procs);
	a->slots = (struct bhs_slot *)((char *)m + h->off_slots);
	a->qnodes = (struct bhs_qnode *)((char *)m + h->off_qnodes);
	return 0;
}

/* ---- the process slot ---------------------------------------------------------------------- */

static int set_lock(int fd, uint32_t i, short type)
{
	struct flock fl = {
		.l_type = type,
		.l_whence = SEEK_SET,
		.l_start = BHS_LOCK_BASE + (off_t)i,
		.l_len = 1,
	};

	return fcntl(fd, F_OFD_SETLK, &fl);
}

/* Take a process slot: its liveness lock first (only one open file
 * description can hold it), then the slot itself. No internal lock is
 * needed: a slot that is taken but has no ledger yet holds nothing. */
static int claim_proc(struct bhs_att *a)
{
	for (uint32_t i = 0; i < a->nprocs; i++) {
		struct bhs_proc *p = &a->procs[i];
		uint32_t free = PS_FREE;

		if (atomic_load_explicit(&p->state, memory_order_relaxed) != PS_FREE)
			continue;
		BHS_POINT(BP_PROC_FREE);
		if (set_lock(a->fd, i, F_WRLCK) < 0)
			continue;
		BHS_POINT(BP_PROC_LOCKED);
		/* acquire: pairs with the release that freed the slot */
		if (atomic_compare_exchange_strong_explicit(&p->state, &free, PS_LIVE,
							    memory_order_acquire,
							    memory_order_relaxed))
			return (int)i;
		set_lock(a->fd, i, F_UNLCK); /* a dead one's, not yet reclaimed */
	}
	return -ENOSPC;
}

/* No process slot is free, but dead processes may hold some: they are
 * recovered when a registered process is refused or waits, and there may
 * be none (idle workers killed, or every process attached is dead). An
 * attacher recovers them itself. To take the internal lock it needs an
 * identity the others can judge alive or dead, as they judge every lock
 * owner by its slot's liveness lock and generation, so it borrows the
 * recovery slot: process slot nprocs, one past the registrable ones, held
 * through its liveness lock by one attacher at a time, with a new
 * generation each time (a lock word left by a recoverer that died names
 * an older one, and is taken over). It holds no ledger, node or role, so
 * no census counts it. true: worth looking for a free slot again (we
 * recovered, or waited for whoever was recovering). */
#define RECOVER_WAIT_NS (1 * BH_SEC)

static bool recover_dead(struct bhs_att *a)
{
	uint32_t r = a->nprocs, gen;
	struct bhs_proc *p = &a->procs[r];
	uint64_t t0 = bh_now_ns();
	bool any = false;

	for (uint32_t i = 0; i < a->nprocs && !any; i++)
		any = bhs_proc_look(a, i, &gen) == WHO_DEAD;
	if (!any)
		return false;
	while (set_lock(a->fd, r, F_WRLCK) < 0) {
		if (bh_now_ns() - t0 > RECOVER_WAIT_NS)
			return true; /* someone is at it: maybe it freed one */
		sched_yield();
	}
	/* release: with the generation, the state; pairs with bhs_proc_look() */
	gen = atomic_fetch_add_explicit(&p->gen, 1, memory_order_release) + 1u;
	atomic_store_explicit(&p->state, PS_LIVE, memory_order_release);
	a->pidx = r;
	a->lockval = (r + 1u) | ((gen & 0x7fffu) << 16);
	bhs_lock(a);
	bhs_scan_locked(a);
	bhs_unlock(a);
	bhs_leave_proc(a, r);
	set_lock(a->fd, r, F_UNLCK);
	return true;
}

static int claim_or_recover(struct bhs_att *a)
{
	int i = claim_proc(a);

	if (i == -ENOSPC && recover_dead(a))
		i = claim_proc(a);
	return i;
}

/* The process's shared slot (for threads without a ledger of their own):
 * the first free one, owned by process slot i from now on. */
static bool claim_shared(struct bhs_att *a, uint32_t i)
{
	for (uint32_t k = 0; k < a->nslots && !a->shared; k++) {
		struct bhs_slot *s = slot_at(a, k);
		uint32_t free = 0;

		/* acquire: pairs with free_slot()'s release store of the owner
		 * (reclaim.c), as in take_slot() */
		if (atomic_compare_exchange_strong_explicit(&s->owner, &free, i + 1u,
							    memory_order_acquire,
							    memory_order_relaxed))
			a->shared = s;
	}
	return a->shared != NULL;
}

/* Register this process (at open, or at first use since fork). */
int bhs_register(struct bhs_att *a)
{
	int saved = errno, i, r = 0;
	struct bhs_proc *p;

	pthread_mutex_lock(&a->mu);
	if (a->proc)
		goto out;
	if (!have_membarrier())
		atomic_fetch_or_explicit(&a->xfer, XFER_FENCED, memory_order_relaxed);
	else
		atomic_fetch_and_explicit(&a->xfer, ~XFER_FENCED, memory_order_relaxed);
	/* a->mu before a->hmu (a recovery takes the internal lock), as in
	 * fork_prepare() */
	if (a->fd < 0 || (i = claim_or_recover(a)) < 0) {
		r = -ENOSPC;
		goto out;
	}
	p = &a->procs[i];
	atomic_store_explicit(&p->pid, (int32_t)getpid(), memory_order_relaxed);
	atomic_store_explicit(&p->attached_ns, bh_now_ns(), memory_order_relaxed);
	a->pidx = (uint32_t)i;
	a->lockval = ((uint32_t)i + 1u) |
		     ((atomic_load_explicit(&p->gen, memory_order_relaxed) & 0x7fffu) << 16);
	if (!claim_shared(a, (uint32_t)i)) {
		/* Given back as a detacher does, with a new generation: a look
		 * that read the slot taken and then found its lock free must not
		 * take the next registrant there for us (bhs_proc_look()). */
		bhs_leave_proc(a, (uint32_t)i);
		set_lock(a->fd, (uint32_t)i, F_UNLCK);
		r = -ENOSPC;
		goto out;
	}
	atomic_store_explicit(&p->shared, slot_index(a, a->shared) + 1u, memory_order_relaxed);
	/* release: the fast paths of this process read a->proc last */
	atomic_store_explicit((_Atomic(struct bhs_proc *) *)&a->proc, p, memory_order_release);
out:
	pthread_mutex_unlock(&a->mu);
	errno = saved;
	return r;
}

/* ---- fork ----------------------------------------------------------------------------------- */

static void fork_prepare(void)
{
	pthread_mutex_lock(&reg_mu);
	for (struct bhs_att *a = reg_head; a; a = a->next) {
		/* mu first: a registration holds it while it recovers the dead
		 * under the internal lock (hmu) */
		pthread_mutex_lock(&a->mu);
		pthread_mutex_lock(&a->hmu); /* no thread of ours in the lock */
		pthread_mutex_lock(&a->xmu);
	}
}

static void fork_parent(void)
{
	for (struct bhs_att *a = reg_head; a; a = a->next) {
		pthread_mutex_unlock(&a->xmu);
		pthread_mutex_unlock(&a->mu);
		pthread_mutex_unlock(&a->hmu);
	}
	pthread_mutex_unlock(&reg_mu);
}

/* The child holds nothing and is nobody yet: it drops the parent's slot,
 * ledgers and async nodes, and trades the inherited descriptor (whose open
 * file description, and so liveness lock, it shares with the parent) for
 * one of its own. Its first use of the handle registers it afresh. */
static void fork_child_att(struct bhs_att *a)
{
	int fd = a->fd >= 0 ? bhs_reopen(a->fd) : -1;

	if (a->fd >= 0)
		close(a->fd);
	a->fd = fd;
	a->proc = NULL;
	a->shared = NULL;
	a->agent_on = false;
	atomic_store_explicit(&a->xfer, 0, memory_order_relaxed); /* fenced: at register */
	memset(a->tmap, 0, sizeof(a->tmap));
	memset((void *)a->anode, 0, (a->nextra ? a->nextra : 1) * sizeof(*a->anode));
	if (a->hold)
		memset(a->hold, 0, BHS_TMAP * sizeof(*a->hold));
	pthread_cond_init(&a->delivered, NULL);
}

/* An attachment that a thread of the parent was detaching (no handle left,
 * bhs_destroy) is the parent's business: the child has no handle to it and
 * nobody to finish the detach, so it closes its copy of the parent's
 * descriptor at once and forgets it. Its memory stays: the child's thread
 * may be the parent's agent, forked from a callback during that detach,
 * and still running in it. */
static void fork_child(void)
{
	struct bhs_att **pp = &reg_head, *a;

	bhs_forget_last();
	while ((a = *pp) != NULL) {
		pthread_mutex_unlock(&a->xmu);
		pthread_mutex_unlock(&a->mu);
		pthread_mutex_unlock(&a->hmu);
		if (a->refs == 0) {
			*pp = a->next;
			if (a->fd >= 0)
				close(a->fd);
			a->fd = -1;
			continue;
		}
		fork_child_att(a);
		pp = &a->next;
	}
	pthread_mutex_unlock(&reg_mu);
}

static void reg_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- handles ---------------------------------------------------------------------------------- */

/* A detaching attachment (no handle left) stays listed until its
 * descriptor is closed, for the fork handlers, but is nobody's to reuse. */
static struct bhs_att *find_att(dev_t dev, ino_t ino)
{
	for (struct bhs_att *a = reg_head; a; a = a->next)
		if (a->refs && a->dev == dev && a->ino == ino)
			return a;
	return NULL;
}

static int check_open_args(const char *name, const struct bh_config *cfg, unsigned flags,
			   bulkhead_t **out)
{
	int r = bhs_check_name(name);

	if (r < 0)
		return r;
	if (!out || (flags & ~OPEN_FLAGS) || ((flags & BH_SHM_EXCL) && !(flags & BH_SHM_CREATE)))
		return -EINVAL;
	if ((flags & BH_SHM_CREATE) && !cfg)
		return -EINVAL;
	if (cfg && (cfg->max_concurrent == 0 || cfg->max_concurrent > BH_LIMIT_MAX ||
		    (cfg->flags & ~BHS_CFG_FLAGS)))
		return -EINVAL;
	/* before anything is created: attach() would refuse it after */
	if (cfg && cfg->name && strcmp(cfg->name, name) != 0)
		return -EINVAL;
	return 0;
}

/* Open the file at path: create it when asked and missing. *fd is ours. */
static int get_file(const char *name, const char *path, const struct bh_config *cfg,
		    unsigned flags, int *fd)
{
	unsigned mode = (flags >> 16) & 0777u;

	for (int tries = 0; tries < 8; tries++) {
		*fd = open_existing(path);
		if (*fd >= 0)
			return (flags & BH_SHM_EXCL) ? (close(*fd), -EEXIST) : 0;
		if (*fd != -ENOENT || !(flags & BH_SHM_CREATE))
			return *fd;
		/* BH_SHM_MODE(0) asks for nothing: the default (documented) */
		*fd = bhs_create_seg(name, path, cfg, mode ? mode : 0600);
		if (*fd >= 0)
			return 0;
		if (*fd != -EEXIST)
			return *fd;
		/* someone created it meanwhile: attach to theirs */
	}
	return -EAGAIN;
}

/* Attach through fd, which is ours to close (or keep) on every path: one
 * owner closes it, once. Closed twice, the second close could take another
 * thread's file that got the number in between. */
static int attach(const char *name, int fd, const struct bh_config *cfg, struct bhs_att **out)
{
	struct bhs_hdr h;
	struct stat st;
	struct bhs_att *a;
	off_t size;
	int r;

	if ((r = read_hdr(fd, name, &h, &size)) < 0 || (r = bhs_check_cfg(cfg, &h, name)) < 0 ||
	    (r = fstat(fd, &st) < 0 ? -errno : 0) < 0) {
		close(fd);
		return r;
	}
	if ((a = find_att(st.st_dev, st.st_ino)) != NULL) {
		/* ours already, maybe inherited: a fork child registers here */
		close(fd);
		if ((r = bhs_register(a)) < 0)
			return r;
		a->refs++;
		*out = a;
		return 0;
	}
	BHS_POINT(BP_ATTACH_READ);
	if ((a = new_att(fd, &st, &h, name)) == NULL) {
		close(fd);
		return -ENOMEM;
	}
	if ((r = map_att(a, &h, name)) < 0 || (r = bhs_register(a)) < 0) {
		free_att(a); /* closes fd */
		return r;
	}
	a->refs = 1;
	a->next = reg_head;
	reg_head = a;
	*out = a;
	return 0;
}

int bh_shm_open(const char *name, const struct bh_config *cfg, unsigned flags, bulkhead_t **out)
{
	char path[4096];
	struct bhs_att *a = NULL;
	bulkhead_t *bh;
	int saved = errno, fd, r, cs;

	if ((r = check_open_args(name, cfg, flags, out)) < 0 ||
	    (r = bhs_path_of(name, path, sizeof(path))) < 0)
		return r;
	if ((bh = bhi_ext_alloc()) == NULL)
		return -ENOMEM;
	pthread_once(&reg_once, reg_init);
	/* Not a cancellation point (<bulkhead.h>), though open, pread and close
	 * are: cancelled there, the thread would leave reg_mu held, and the
	 * next fork() (its prepare handler takes it) would hang. A pending
	 * cancel acts at the caller's next cancellation point. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	pthread_mutex_lock(&reg_mu);
	r = get_file(name, path, cfg, flags, &fd);
	if (r == 0)
		r = attach(name, fd, cfg, &a); /* closes fd when it fails */
	pthread_mutex_unlock(&reg_mu);
	pthread_setcancelstate(cs, NULL);
	errno = saved;
	if (r < 0) {
		bhi_ext_free(bh);
		return r;
	}
	bhi_ext_init(bh, a, &a->seg->word, a->flags, a->name);
	*out = bh;
	return 0;
}

int bh_shm_unlink(const char *name)
{
	char path[4096];
	int saved = errno, r;

	if ((r = bhs_check_name(name)) < 0 || (r = bhs_path_of(name, path, sizeof(path))) < 0)
		return r;
	r = unlink(path) < 0 ? -errno : 0;
	errno = saved;
	return r;
}

/* ---- detaching ------------------------------------------------------------------------------ */

static void detach(struct bhs_att *a)
{
	BHS_POINT(BP_DETACHING);
	bhs_agent_stop(a);
	if (a->proc) {
		bhs_lock(a);
		bhs_reclaim_self_locked(a);
		bhs_unlock(a);
		BHS_POINT(BP_DETACHED);
		bhs_release_self(a);
	}
}

/* Not a cancellation point, as bh_destroy of any bulkhead: the detach
 * joins the agent and closes the descriptor whose lock says this process
 * lives, and a cancel acted on there would leave the process registered
 * and its slot taken.
 *
 * The last handle's attachment stays in the registry, with no handle,
 * until its descriptor is closed: a fork() meanwhile must find it, or the
 * child would keep the parent's open file description, and with it the
 * liveness lock, while it lives, and a parent killed in the middle of the
 * detach would look alive, holding its permits (and maybe the internal
 * lock) for as long. The fork handlers hold reg_mu; the descriptor is
 * closed under it. */
void bhs_destroy(bulkhead_t *bh)
{
	struct bhs_att *a = att_of(bh), **pp;
	bool last;
	int cs;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	pthread_mutex_lock(&reg_mu);
	last = --a->refs == 0;
	pthread_mutex_unlock(&reg_mu);
	if (last) {
		detach(a);
		pthread_mutex_lock(&reg_mu);
		for (pp = &reg_head; *pp; pp = &(*pp)->next)
			if (*pp == a) {
				*pp = a->next;
				break;
			}
		free_att(a); /* closing our descriptor drops the liveness lock */
		pthread_mutex_unlock(&reg_mu);
	}
	bhi_ext_free(bh);
	pthread_setcancelstate(cs, NULL);
}

/* ---- test hooks (hooks.h) --------------------------------------------------------------------- */

void bhs_set_sync_ops(bulkhead_t *bh, const struct bhi_sync_ops *ops)
{
	struct bhs_att *a = att_of(bh);

	a->sync = ops ? ops : &bhi_futex_shared_ops;
	if (ops)
		bhs_set_spin_ns(bh, 0);
}

void bhs_set_spin_ns(bulkhead_t *bh, uint64_t ns)
{
	struct bhs_att *a = att_of(bh);

	a->spin_ns = ns;
	a->spin_iters = ns ? bhi_spin_iters_for(ns) : 0;
}

void bhs_set_starve_ns(bulkhead_t *bh, uint64_t ns)
{
	atomic_store_explicit(&att_of(bh)->seg->starve_ns, ns, memory_order_relaxed);
}

void bhs_set_poll_ns(bulkhead_t *bh, uint64_t ns)
{
	att_of(bh)->poll_ns = ns;
}

/* acquire: pairs with the acq_rel CAS that last changed the word
 * (cas_sword()), as the core's bhi_word() does. */
uint64_t bhs_word(const bulkhead_t *bh)
{
	return atomic_load_explicit(&att_of(bh)->seg->word, memory_order_acquire);
}

void *bhs_segment(const bulkhead_t *bh, size_t *size)
{
	if (size)
		*size = att_of(bh)->size;
	return att_of(bh)->seg;
}
