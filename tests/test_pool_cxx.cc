// <bulkhead/pool.h> compiles as C++ and the pool links and runs from C++.
#include <bulkhead/pool.h>

#include <cerrno>
#include <cstdio>

struct job {
	bh_task task; // first member: a job is its task
	int in, out;
};

static void job_run(bh_task *t)
{
	job *j = reinterpret_cast<job *>(t);

	j->out = j->in * 2;
}

int main()
{
	bh_pool_config cfg = {};
	cfg.name = "cxx";
	cfg.max_threads = 1;
	cfg.queue_capacity = 1;
	bh_pool_t *pool = nullptr;

	if (bh_pool_create(&cfg, &pool) != 0)
		return 1;
	job j = {};
	j.task.run = job_run;
	j.in = 21;
	int ok = bh_pool_call(pool, &j.task, BH_FOREVER) == 0 && j.out == 42;
	struct bh_pool_stats st; // "struct": the function has the same name
	bh_pool_stats(pool, &st);
	ok = ok && st.completed == 1 && st.max_threads == 1;
	bh_pool_sizing s;
	bh_pool_load load = {};
	load.peak_qps = 50;
	load.p99_ns = 200 * BH_MSEC;
	ok = ok && bh_pool_size(&load, &s) == 0 && s.max_threads == 13;
	ok = ok && bh_pool_destroy(pool) == 0;
	std::printf("%s\n", ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}
