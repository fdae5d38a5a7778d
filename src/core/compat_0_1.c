/* Symbols for programs built against libbulkhead 0.1 whose types have
 * grown since (abi/README.md, "How structs grow"). This file must not see
 * the current headers: it fills the layouts 0.1 shipped. Only the shared
 * library has version nodes (libtool builds its objects with -DPIC); a
 * static link always gets the current functions. */
#if defined(PIC) && defined(BH_LD_VERSION_SCRIPT)
#include <stddef.h>

#include "../../abi/compat/bh_stats_0_1.h" /* struct bh_stats as 0.1 shipped it */

typedef struct bulkhead bulkhead_t;

/* In the core: fill the current struct bh_stats, copy its first size bytes. */
int bhi_stats_prefix(const bulkhead_t *bh, void *out, size_t size);

/* bh_stats@LIBBULKHEAD_0.1: void, and the 0.1 struct without the
 * host-wide fields. The current one is bh_stats@@LIBBULKHEAD_0.2. */
void bhi_stats_0_1(const bulkhead_t *bh, struct bh_stats *out);
__asm__(".symver bhi_stats_0_1, bh_stats@LIBBULKHEAD_0.1");
__attribute__((visibility("default"))) void bhi_stats_0_1(const bulkhead_t *bh,
							  struct bh_stats *out)
{
	(void)bhi_stats_prefix(bh, out, sizeof(*out));
}
#endif
