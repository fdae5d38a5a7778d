/* A program built against libbulkhead 0.1 keeps working with this library:
 * it binds to bh_stats@LIBBULKHEAD_0.1, which fills exactly the 0.1 layout
 * of struct bh_stats (abi/compat/bh_stats_0_1.h) and not a byte more, with
 * the same values the current bh_stats gives. Built against the shared
 * library only (the static one has no version nodes). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../abi/compat/bh_stats_0_1.h"

/* The handful of 0.1 declarations this program needs, as 0.1 had them. */
typedef struct bulkhead bulkhead_t;
struct bh_config {
	uint32_t max_concurrent, queue_capacity, flags;
	const char *name;
};
int bh_create(const struct bh_config *cfg, bulkhead_t **out);
int bh_try_acquire(bulkhead_t *bh, uint32_t n);
int bh_release(bulkhead_t *bh, uint32_t n);
void bh_destroy(bulkhead_t *bh);

void bh_stats_0_1(const bulkhead_t *bh, struct bh_stats *out);
__asm__(".symver bh_stats_0_1, bh_stats@LIBBULKHEAD_0.1");

#define CANARY 0xa5

static int fail(const char *what)
{
	printf("FAIL: %s\n", what);
	return 1;
}

int main(void)
{
	/* The 0.1 struct, and room after it that must stay untouched. */
	static unsigned char buf[sizeof(struct bh_stats) + 4096];
	struct bh_stats *st = (struct bh_stats *)buf;
	struct bh_config cfg = { .max_concurrent = 3 };
	bulkhead_t *bh;

	if (bh_create(&cfg, &bh) != 0)
		return fail("bh_create");
	if (bh_try_acquire(bh, 2) != 0 || bh_try_acquire(bh, 2) != -EBUSY)
		return fail("acquire");
	memset(buf, CANARY, sizeof(buf));
	bh_stats_0_1(bh, st);
	for (size_t i = sizeof(*st); i < sizeof(buf); i++)
		if (buf[i] != CANARY)
			return fail("bh_stats@LIBBULKHEAD_0.1 wrote past the 0.1 struct");
	if (st->limit != 3 || st->in_flight != 2 || st->queued != 0 || st->acquired != 1 ||
	    st->rejected != 1 || st->released != 0 || st->wait.count != 0)
		return fail("bh_stats@LIBBULKHEAD_0.1 values");
	bh_release(bh, 2);
	bh_stats_0_1(bh, st);
	if (st->in_flight != 0 || st->released != 1)
		return fail("bh_stats@LIBBULKHEAD_0.1 after a release");
	bh_destroy(bh);
	printf("ok: bh_stats@LIBBULKHEAD_0.1 fills the %zu bytes of 0.1's struct bh_stats\n",
	       sizeof(*st));
	return 0;
}
