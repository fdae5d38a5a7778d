// The public header compiles as C++ and the library links from C++.
#include <bulkhead.h>

#include <cerrno>
#include <cstdio>

int main()
{
	bh_config cfg = {};
	cfg.max_concurrent = 2;
	cfg.queue_capacity = 1;
	bulkhead_t *bh = nullptr;

	if (bh_create(&cfg, &bh) != 0)
		return 1;
	int ok = bh_try_acquire(bh, 2) == 0 && bh_try_acquire(bh, 1) == -EBUSY &&
		 bh_release(bh, 2) == 0 && bh_release(bh, 1) == -EOVERFLOW;
	struct bh_stats st;
	struct bh_gauges g; // "struct": the function bh_gauges hides the tag, as stat() does
	ok = ok && bh_stats(bh, &st) == 0 && bh_gauges(bh, &g) == 0;
	ok = ok && st.acquired == 1 && st.rejected == 1 && st.over_released == 1;
	ok = ok && g.limit == 2 && g.in_flight == 0 && g.queued == 0;
	bh_destroy(bh);
	std::printf("%s\n", ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}
