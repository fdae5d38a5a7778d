#include <stdlib.h>

#include "fx.h"

struct fx {
	struct fx_cfg cfg;
#ifdef FX_PRIVATE
	char more_private_state[64]; /* the opaque struct changes: not ABI */
#endif
};

int fx_create(const struct fx_cfg *cfg, fx_t **out)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return -1;
	(*out)->cfg = *cfg;
	return 0;
}

int fx_stats(const fx_t *fx, struct fx_stats *out)
{
	out->a = fx->cfg.limit;
	out->b = fx->cfg.flags;
#ifdef FX_GROW
	out->c = 3;
#endif
	return 0;
}

#ifndef FX_REMOVE
int fx_other(int x)
{
	return x;
}
#endif

#ifdef FX_CHANGE_RETURN
long fx_ret(int x)
#else
int fx_ret(int x)
#endif
{
	return x + 1;
}

#ifdef FX_ADD
int fx_new(int x)
{
	return x + 2;
}
#endif
