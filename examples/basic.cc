// basic.c in C++ with <bulkhead.hpp>: 8 threads call a slow dependency that
// can take 2 calls at a time; 2 more may wait up to 50 ms; the rest are shed
// at once. The permit goes back when it leaves scope, on every path.
//
//   c++ -std=c++17 basic.cc $(pkg-config --cflags --libs bulkhead) -pthread -o basic-cxx
#include <bulkhead.hpp>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

static std::error_code slow_call(bh::bulkhead &dep)
{
	bh::permit p = dep.acquire_for(50ms);
	if (!p)
		return p.error(); // busy (shed at once) or timed_out (waited 50 ms)
	std::this_thread::sleep_for(20ms);
	return {};
}

int main()
{
	bh_config cfg{};
	cfg.max_concurrent = 2;
	cfg.queue_capacity = 2;
	cfg.flags = BH_FAIR;
	std::error_code ec;
	bh::bulkhead dep = bh::bulkhead::create(cfg, ec);
	if (ec) {
		std::fprintf(stderr, "bulkhead: %s\n", ec.message().c_str());
		return 1;
	}

	std::vector<std::thread> clients;
	for (int i = 0; i < 8; i++)
		clients.emplace_back([&dep, i] {
			for (int call = 0; call < 10; call++) {
				std::error_code r = slow_call(dep);
				if (r && r != bh::errc::busy && r != bh::errc::timed_out)
					std::fprintf(stderr, "client %d: %s\n", i, r.message().c_str());
			}
		});
	for (auto &t : clients)
		t.join();

	static struct bh_stats st; // 10 KB
	dep.stats(st);
	std::printf("acquired %llu, rejected at once %llu, timed out %llu, in flight now %llu\n",
		    (unsigned long long)st.acquired, (unsigned long long)st.rejected,
		    (unsigned long long)st.timed_out, (unsigned long long)st.in_flight);
	return st.acquired + st.rejected + st.timed_out == 80 && st.in_flight == 0 ? 0 : 1;
}
