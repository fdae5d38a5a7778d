/* The one role a host-wide bulkhead hands to a single process: moving its
 * limit for an adaptive controller (src/adaptive/). Every process may run
 * a controller on the same host-wide bulkhead; only the role's holder
 * applies its verdicts, the others follow the limit it sets, so two
 * controllers never fight over one number. The role is freed by its
 * holder's detach or death, and the next controller that wants to move
 * the limit takes it. */
#ifndef BH_SHM_ROLE_H
#define BH_SHM_ROLE_H

#include <stdbool.h>

#include "bulkhead.h"

/* 0: bh (this handle of the calling process) holds the role (now, or
 * already); -EAGAIN: a live process, or another handle of this one, holds
 * it; -ENOSPC: this process could not register. */
int bhs_role_take(bulkhead_t *bh);
/* Give the role up if bh holds it. */
void bhs_role_drop(bulkhead_t *bh);
/* Whether bh (this handle of the calling process) holds the role now. */
bool bhs_role_held(const bulkhead_t *bh);

#endif /* BH_SHM_ROLE_H */
