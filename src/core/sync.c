/* The public clock. The real wait/wake/clock tables the core sleeps with
 * (bhi_futex_ops, bhi_futex_shared_ops) are in lib/futex.c. */
#include "internal.h"
#include "lib/futex.h"

uint64_t bh_now_ns(void)
{
	return bhi_now_ns();
}
