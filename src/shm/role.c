/* The controller role of a host-wide bulkhead (role.h). The role word is
 * the holder's lock value, so liveness is told exactly as for the internal
 * lock (lock.c): a slot reused by another process has another generation,
 * and a dead holder's liveness lock is gone. Taking and dropping happen
 * under the internal lock, so two processes never both see it free. */
#include <errno.h>

#include "role.h"
#include "seg.h"

/* Is the role ours? Only we write our own lock value there, and only a
 * process that found us gone overwrites it: a relaxed look is exact for
 * the answer "ours". */
static bool role_ours(struct bhs_att *a)
{
	return att_proc(a) &&
	       atomic_load_explicit(&a->seg->role, memory_order_relaxed) == a->lockval;
}

int bhs_role_take(bulkhead_t *bh)
{
	struct bhs_att *a = att_of(bh);
	uint64_t me = bhi_id_of(bh) + 1; /* role_handle's value for bh */
	uint32_t v;
	int r = 0;

	if (!att_proc(a) && bhs_register(a) < 0)
		return -ENOSPC;
	/* ours: only the handle that took it moves the limit; another handle
	 * of this process (its own controller) follows, as another process's */
	if (role_ours(a) && atomic_load_explicit(&a->role_handle, memory_order_relaxed) == me)
		return 0;
	bhs_lock(a);
	v = atomic_load_explicit(&a->seg->role, memory_order_relaxed);
	if (v == a->lockval ? atomic_load_explicit(&a->role_handle, memory_order_relaxed) != me
			    : v != 0 && !bhs_owner_gone(a, v)) {
		r = -EAGAIN;
	} else {
		atomic_store_explicit(&a->role_handle, me, memory_order_relaxed);
		atomic_store_explicit(&a->seg->role, a->lockval, memory_order_relaxed);
	}
	bhs_unlock(a);
	return r;
}

void bhs_role_drop(bulkhead_t *bh)
{
	struct bhs_att *a = att_of(bh);

	if (!role_ours(a))
		return;
	bhs_lock(a);
	if (atomic_load_explicit(&a->seg->role, memory_order_relaxed) == a->lockval &&
	    atomic_load_explicit(&a->role_handle, memory_order_relaxed) == bhi_id_of(bh) + 1) {
		atomic_store_explicit(&a->seg->role, 0, memory_order_relaxed);
		atomic_store_explicit(&a->role_handle, 0, memory_order_relaxed);
	}
	bhs_unlock(a);
}

/* relaxed, both: only this process writes its own values there (see
 * role_ours), so the look is exact for "ours" and pairs with nothing */
bool bhs_role_held(const bulkhead_t *bh)
{
	return role_ours(att_of(bh)) &&
	       atomic_load_explicit(&att_of(bh)->role_handle, memory_order_relaxed) ==
		       bhi_id_of(bh) + 1;
}
