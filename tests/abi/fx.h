/* A made-up library for tests/test_abi.sh: version 1 of its ABI, and the
 * changes a later version might make, one macro each. */
#ifndef FX_H
#define FX_H
#include <stdint.h>

#define FX_API __attribute__((visibility("default")))

typedef struct fx fx_t; /* opaque: its layout is not ABI */

struct fx_cfg {
	uint32_t limit;
#ifdef FX_CHANGE_FIELD
	uint64_t flags; /* a field changes type: every later offset moves */
#else
	uint32_t flags;
#endif
};

struct fx_stats {
	uint64_t a, b;
#ifdef FX_GROW
	uint64_t c; /* appended */
#endif
};

FX_API int fx_create(const struct fx_cfg *cfg, fx_t **out);
FX_API int fx_stats(const fx_t *fx, struct fx_stats *out);
#ifndef FX_REMOVE
FX_API int fx_other(int x);
#endif
#ifdef FX_CHANGE_RETURN
FX_API long fx_ret(int x);
#else
FX_API int fx_ret(int x);
#endif
#ifdef FX_ADD
FX_API int fx_new(int x);
#endif
#endif
