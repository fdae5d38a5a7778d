/*
 * OVERVIEW. libbulkhead host-wide bulkheads: one limit shared by every process on the
 * host, kept in a shared-memory segment, with no permit lost when a process
 * dies.
 *
 * EXAMPLE.
 *
 *   bulkhead_t *pay;
 *   struct bh_config cfg = { .max_concurrent = 13, .queue_capacity = 15 };
 *   int r = bh_shm_open("payment", &cfg, BH_SHM_CREATE, &pay);
 *   ...  bh_acquire(pay, 1, deadline) / bh_release(pay, 1), in any process
 *   bh_destroy(pay);            (detach this process)
 *   bh_shm_unlink("payment");   (the segment goes with its last detach)
 *
 * The handle is a bulkhead_t: every call of <bulkhead.h> works on it, with
 * the same semantics across processes as across threads (one FIFO queue for
 * the host, direct handoff, BH_FAIR, weighted head-of-line, close, resize).
 *
 * The backing file is BH_SHM_DIR/bulkhead.NAME, where BH_SHM_DIR is the
 * environment variable of that name or /dev/shm. It is created mode 0600
 * (BH_SHM_MODE widens that, the umask applies; BH_SHM_MODE(0) is the
 * default 0600).
 *
 * OWNERSHIP. bh_shm_open attaches this process and returns a handle it
 * owns; bh_destroy detaches it. The bulkhead itself lives until
 * bh_shm_unlink has removed its name and the last process has detached.
 * Permits belong to the process that took them, whichever of its threads
 * releases them; a process cannot release another's (-EOVERFLOW). When a
 * process dies, by any signal, at any instruction, what it held goes back,
 * its waiters leave the queue and a grant made to it passes on, within a
 * second, found by the survivors' own timed waits. A child made by fork()
 * holds none of its parent's permits; at its first call through an
 * inherited handle it attaches as a process of its own.
 *
 * MEMORY ORDERING. As in <bulkhead.h>, across processes: an acquire
 * synchronizes with the release that freed its permits (acq_rel operations
 * on the shared word), whichever process made it.
 *
 * THREADS, SIGNALS, CANCELLATION. As in <bulkhead.h>: any thread of any
 * attached process may call; bh_acquire's deadlines, signal handling and
 * cancellation are unchanged. An async node's callback runs in the process
 * that queued it, on an agent thread the library starts for that bulkhead
 * (every signal blocked), one callback at a time, never under the internal
 * lock.
 *
 * ERRORS. bh_shm_open: -EINVAL (a bad name, flags or cfg, or cfg does not
 * match the existing bulkhead), -ENAMETOOLONG, -ENOENT (no such bulkhead,
 * no BH_SHM_CREATE), -EEXIST (BH_SHM_EXCL), -EPROTO (not a bulkhead
 * segment), -EBADMSG (damaged), -ENOSPC (no process or thread ledger
 * free), -ENOMEM, or an error of open(2), ftruncate(2) or mmap(2); *out is
 * left unchanged. bh_shm_unlink: -EINVAL, -ENAMETOOLONG, -ENOENT, or an
 * error of unlink(2). See bh_shm_open(3) and bulkhead(7) for the rules and
 * the trust model.
 */
#ifndef BULKHEAD_SHM_H
#define BULKHEAD_SHM_H

#include <bulkhead.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BH_SHM_CREATE (1u << 0) /* create it if it does not exist (cfg required) */
#define BH_SHM_EXCL (1u << 1)   /* with CREATE: -EEXIST if it exists */
/* The file's permission bits when this call creates it (default 0600;
 * 0 means the default). */
#define BH_SHM_MODE(mode) ((((unsigned)(mode)) & 0777u) << 16)

#define BH_SHM_NAME_MAX 63     /* bytes in a name, without the NUL */
#define BH_SHM_QUEUE_MAX 8192u /* most waiters one host-wide bulkhead queues */
#define BH_SHM_PROCS_MAX 1024u /* most processes attached at once */

/* Attach to the host-wide bulkhead `name`, creating it with cfg when
 * BH_SHM_CREATE is given and it does not exist. 0 and *out, or -EINVAL,
 * -ENAMETOOLONG, -ENOENT, -EEXIST, -EPROTO (not a bulkhead segment, or
 * another layout), -EBADMSG (damaged or truncated), -ENOSPC (too many
 * living processes attached; or, creating, no room for the segment on its file
 * system), -EAGAIN (creating: the name kept vanishing under us), -ENOMEM,
 * or the error of open(2), mmap(2) or link(2). */
BH_API int bh_shm_open(const char *name, const struct bh_config *cfg, unsigned flags,
		       bulkhead_t **out);

/* Remove the name; the segment lives on until its last detach. 0, or
 * -EINVAL, -ENAMETOOLONG, -ENOENT, or the error of unlink(2). */
BH_API int bh_shm_unlink(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* BULKHEAD_SHM_H */
