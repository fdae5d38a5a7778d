// <bulkhead/adaptive.h> compiles as C++ and the library links from C++.
#include <bulkhead/adaptive.h>

#include <cerrno>
#include <cstdio>

int main()
{
	bh_config cfg = {};
	cfg.max_concurrent = 20;
	bulkhead_t *bh = nullptr;
	bh_adaptive_t *a = nullptr;
	bh_adaptive_config ac = {};
	struct bh_adaptive_stats st; // the function has the same name

	if (bh_create(&cfg, &bh) != 0)
		return 1;
	ac.algo = BH_ADAPTIVE_AIMD;
	int ok = bh_adaptive_attach(bh, &ac, &a) == 0 && bh_adaptive_attach(bh, &ac, &a) == -EBUSY;
	for (int i = 0; ok && i < 10; i++)
		bh_adaptive_sample(a, 5 * BH_MSEC, i ? BH_OK : BH_IGNORE);
	ok = ok && bh_adaptive_stats(a, &st) == 0 && st.ok == 9 && st.ignored == 1 &&
	     st.limit == 20 && bh_adaptive_reason_name(st.reason) != nullptr;
	bh_adaptive_detach(a);
	bh_destroy(bh);
	std::printf("%s\n", ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}
