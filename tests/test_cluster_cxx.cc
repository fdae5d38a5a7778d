// The cluster header compiles as C++ and the library links from C++.
#include <bulkhead/cluster.h>

#include <cerrno>
#include <cstdio>

int main()
{
	bh_config cfg = {};
	cfg.max_concurrent = 1;
	bulkhead_t *bh = nullptr;
	bh_cluster_config cc = {};
	struct bh_cluster_stats st = {}; // the tag: a function has the same name

	if (bh_create(&cfg, &bh) != 0)
		return 1;
	cc.endpoint = "redis://";
	cc.name = "cxx";
	cc.global_limit = 1;
	cc.flags = BH_CLUSTER_MANUAL | BH_CLUSTER_FRESH_STORE;
	bulkhead_t *cl = bh;
	int ok = bh_cluster_open(&cc, nullptr, &cl) == -EINVAL && cl == bh &&
		 bh_cluster_stats(bh, &st) == -EINVAL && bh_cluster_step(bh, 0) == -EINVAL &&
		 bh_cluster_fd(bh) == -EINVAL && bh_cluster_set_global_limit(bh, 2) == -EINVAL;
	bh_destroy(bh);
	std::printf("%s\n", ok ? "ok" : "FAIL");
	return ok ? 0 : 1;
}
