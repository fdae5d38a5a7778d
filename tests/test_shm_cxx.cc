// <bulkhead/shm.h> compiles as C++ and a host-wide bulkhead links and runs
// from C++ (in a private directory).
#include <bulkhead/shm.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

int main()
{
	char dir[] = "/tmp/bh-shm-cxx.XXXXXX";
	bh_config cfg = {};
	bulkhead_t *bh = nullptr;

	if (!mkdtemp(dir) || setenv("BH_SHM_DIR", dir, 1) != 0)
		return 1;
	cfg.max_concurrent = 2;
	if (bh_shm_open("a/b", &cfg, BH_SHM_CREATE, &bh) != -EINVAL)
		return 2;
	if (bh_shm_open("cxx", &cfg, BH_SHM_CREATE | BH_SHM_EXCL | BH_SHM_MODE(0600), &bh) != 0)
		return 3;
	int r = bh_try_acquire(bh, 2);
	int over = bh_release(bh, 3);
	int back = bh_release(bh, 2);
	bh_destroy(bh);
	int gone = bh_shm_unlink("cxx");
	rmdir(dir);
	if (r != 0 || over != -EOVERFLOW || back != 0 || gone != 0)
		return 4;
	std::puts("shm from C++: ok");
	return 0;
}
