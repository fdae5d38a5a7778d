// <bulkhead.hpp>: ownership, exactly-once release on every path, errors as
// std::error_code, deadlines from std::chrono, pool tasks and io_uring
// requests. Every count is checked for equality with what the calls did,
// from the library's own stats. tests/test_hpp.sh builds it with g++ and
// clang++, C++17 and C++20, with and without exceptions, under ASan and
// TSan, and runs each build.
#include <bulkhead.hpp>

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

using namespace std::chrono_literals;

static std::atomic<int> failures{ 0 }; // checks fail on any thread

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
			failures++;                                                  \
		}                                                                    \
	} while (0)

// ---- what the types promise, at compile time ----------------------------

static_assert(!std::is_copy_constructible_v<bh::permit>);
static_assert(!std::is_copy_assignable_v<bh::permit>);
static_assert(std::is_nothrow_move_constructible_v<bh::permit>);
static_assert(std::is_nothrow_move_assignable_v<bh::permit>);
static_assert(!std::is_copy_constructible_v<bh::bulkhead>);
static_assert(std::is_nothrow_move_constructible_v<bh::bulkhead>);
static_assert(std::is_nothrow_move_assignable_v<bh::bulkhead>);
static_assert(!std::is_copy_constructible_v<bh::pool>);
static_assert(std::is_nothrow_move_constructible_v<bh::pool>);
static_assert(!std::is_copy_constructible_v<bh::task>);
static_assert(!std::is_move_constructible_v<bh::task>);
static_assert(std::is_error_condition_enum<bh::errc>::value);
static_assert(bh::clock::is_steady);

// ---- helpers ------------------------------------------------------------

static bh::bulkhead make(std::uint32_t limit, std::uint32_t queue)
{
	bh_config cfg{};
	cfg.max_concurrent = limit;
	cfg.queue_capacity = queue;
	std::error_code ec;
	bh::bulkhead b = bh::bulkhead::create(cfg, ec);
	CHECK(!ec);
	CHECK(b);
	return b;
}

struct counts {
	std::uint64_t in_flight, queued, acquired, released, rejected, timed_out, over_released;
};

static counts read(const bh::bulkhead &b)
{
	thread_local struct bh_stats st; // 10 KB: not on every caller's stack
	b.stats(st);
	return { st.in_flight, st.queued,  st.acquired,    st.released,
		 st.rejected,  st.timed_out, st.over_released };
}

// ---- errors -------------------------------------------------------------

static void test_errors()
{
	CHECK(!bh::to_error_code(0));
	CHECK(!bh::to_error_code(3)); // a count is not an error
	std::error_code busy = bh::to_error_code(-EBUSY);
	CHECK(busy == bh::errc::busy);
	CHECK(busy == std::errc::device_or_resource_busy);
	CHECK(busy != bh::errc::timed_out);
	CHECK(busy.category() == std::generic_category());
	CHECK(bh::to_error_code(-ETIMEDOUT) == std::errc::timed_out);
	CHECK(bh::to_error_code(-ESHUTDOWN) == bh::errc::shut_down);
	CHECK(bh::to_error_code(-ESHUTDOWN).value() == ESHUTDOWN);

	bh_config bad{}; // max_concurrent 0
	std::error_code ec;
	bh::bulkhead b = bh::bulkhead::create(bad, ec);
	CHECK(ec == bh::errc::invalid);
	CHECK(!b);
	// An empty bulkhead refuses everything, without touching a NULL handle.
	bh::permit p = b.try_acquire();
	CHECK(!p && p.error() == bh::errc::invalid);
	p = b.acquire_for(1ms);
	CHECK(!p && p.error() == bh::errc::invalid);
	CHECK(b.close() == bh::errc::invalid);
	CHECK(b.set_limit(3) == bh::errc::invalid);
	CHECK(b.name() == nullptr);
}

// ---- a permit is given back exactly once, on every path -----------------

// Returns early, returns at the end, or hands its permit to the caller.
static int use(bh::bulkhead &b, int path, bh::permit *out)
{
	bh::permit p = b.try_acquire();
	if (!p)
		return -1;
	if (path == 0)
		return 0; // early return
	if (out && path == 2) {
		*out = std::move(p); // moved out: this scope gives nothing back
		return 2;
	}
	return 1; // the normal end
}

static void test_every_path()
{
	bh::bulkhead b = make(1, 0);
	bh::permit kept;

	CHECK(use(b, 0, nullptr) == 0);
	counts c = read(b);
	CHECK(c.in_flight == 0 && c.acquired == 1 && c.released == 1);

	CHECK(use(b, 1, nullptr) == 1);
	c = read(b);
	CHECK(c.in_flight == 0 && c.acquired == 2 && c.released == 2);

	CHECK(use(b, 2, &kept) == 2);
	c = read(b);
	CHECK(kept && kept.count() == 1);
	CHECK(c.in_flight == 1 && c.acquired == 3 && c.released == 2);
	CHECK(use(b, 1, nullptr) == -1); // the one permit is kept
	{
		bh::permit moved = std::move(kept);
		CHECK(!kept && kept.count() == 0); // the moved-from one holds nothing
		CHECK(moved);
	} // moved gives it back here, kept later does nothing
	c = read(b);
	CHECK(c.in_flight == 0 && c.released == 3 && c.rejected == 1);
	kept = bh::permit();
	c = read(b);
	CHECK(c.released == 3 && c.over_released == 0);

#if defined(__cpp_exceptions)
	try {
		bh::permit p = b.try_acquire();
		CHECK(p);
		throw 42;
	} catch (int) {
	}
	c = read(b);
	CHECK(c.in_flight == 0 && c.acquired == 4 && c.released == 4);
#endif
}

static void test_release_and_assign()
{
	bh::bulkhead b = make(3, 0);

	bh::permit p = b.try_acquire(2);
	CHECK(p && p.count() == 2 && !p.error() && p.native_handle() == b.get());
	CHECK(!p.release()); // early
	CHECK(!p && p.count() == 0);
	CHECK(!p.release()); // again: nothing
	counts c = read(b);
	CHECK(c.in_flight == 0 && c.released == 1 && c.over_released == 0);

	// Move-assigning onto a permit that holds some gives those back first.
	bh::permit a = b.try_acquire(1);
	bh::permit d = b.try_acquire(2);
	CHECK(read(b).in_flight == 3);
	a = std::move(d);
	c = read(b);
	CHECK(c.in_flight == 2 && c.released == 2 && a.count() == 2 && !d);
	bh::permit &alias = a;
	a = std::move(alias); // self-move: no release, still held
	c = read(b);
	CHECK(c.in_flight == 2 && c.released == 2 && a.count() == 2);

	// detach: the guard lets go, C code gives them back.
	std::uint32_t n = a.detach();
	CHECK(n == 2 && !a);
	a = bh::permit();
	CHECK(read(b).in_flight == 2);
	CHECK(bh_release(b.get(), n) == 0);
	c = read(b);
	CHECK(c.in_flight == 0 && c.released == 3);

	// adopt: permits taken in C become the guard's.
	CHECK(bh_try_acquire(b.get(), 3) == 0);
	{
		bh::permit own = bh::permit::adopt(b.get(), 3);
		CHECK(own.count() == 3);
		CHECK(!bh::permit::adopt(nullptr, 1) && !bh::permit::adopt(b.get(), 0));
	}
	c = read(b);
	CHECK(c.in_flight == 0 && c.released == 4 && c.over_released == 0);

	// If C code gave back what a guard owns, its release reports overflow.
	bh::permit q = b.try_acquire(1);
	CHECK(bh_release(b.get(), 1) == 0);
	CHECK(q.release() == bh::errc::overflow);
	CHECK(read(b).over_released == 1);
}

// ---- refusals and deadlines ---------------------------------------------

static void test_refusals()
{
	bh::bulkhead b = make(1, 1);
	bh::permit held = b.try_acquire();
	CHECK(held);

	bh::permit p = b.try_acquire();
	CHECK(!p && p.error() == bh::errc::busy && p.count() == 0);
	p = b.acquire_for(2ms); // queues, the deadline passes
	CHECK(!p && p.error() == bh::errc::timed_out);
	p = b.acquire_until(bh::clock::now() + 2ms);
	CHECK(!p && p.error() == bh::errc::timed_out);
	p = b.acquire_until(std::chrono::steady_clock::now() - 1s); // past: like try
	CHECK(!p && p.error() == bh::errc::busy);
	p = b.acquire_until(std::chrono::system_clock::now() + 2ms);
	CHECK(!p && p.error() == bh::errc::timed_out);
	p = b.acquire_for(std::chrono::duration<double, std::milli>(1.5));
	CHECK(!p && p.error() == bh::errc::timed_out);
	p = b.try_acquire(2); // more than the limit
	CHECK(!p && p.error() == bh::errc::invalid);
	counts c = read(b);
	// Rejected: the try and the past deadline; the one above the limit is
	// neither.
	CHECK(c.acquired == 1 && c.rejected == 2 && c.timed_out == 4);

	CHECK(!b.close());
	CHECK(b.close().value() == EALREADY);
	p = b.acquire(1);
	CHECK(!p && p.error() == bh::errc::shut_down);
	CHECK(!held.release()); // holders still give back after close
	CHECK(read(b).in_flight == 0);
}

static void test_deadline_conversion()
{
	using bh::detail::deadline_ns;
	using bh::detail::deadline_ns_after;
	const std::uint64_t ms = 1000000;

	std::uint64_t now = bh_now_ns();
	std::uint64_t d = deadline_ns_after(100ms);
	CHECK(d >= now + 100 * ms && d < now + 200 * ms);
	d = deadline_ns(bh::clock::now() + 100ms);
	CHECK(d >= now + 100 * ms && d < now + 200 * ms);
	d = deadline_ns(std::chrono::steady_clock::now() + 100ms);
	CHECK(d >= now + 100 * ms && d < now + 200 * ms);
	d = deadline_ns(std::chrono::system_clock::now() + 100ms);
	CHECK(d >= now + 100 * ms && d < now + 200 * ms);
	// Rounded up, never down: 1.5 ns is 2 ns.
	CHECK(bh::detail::add_ns(1000, std::chrono::duration<double, std::nano>(1.5)) == 1002);
	CHECK(bh::detail::add_ns(1000, std::chrono::microseconds(3)) == 4000);
	// Not positive: now. Too long for the clock: no deadline.
	CHECK(bh::detail::add_ns(1000, -5s) == 1000);
	CHECK(bh::detail::add_ns(1000, 0s) == 1000);
	CHECK(deadline_ns_after(std::chrono::hours::max()) == BH_FOREVER);
	CHECK(bh::detail::add_ns(BH_FOREVER - 10, 11ns) == BH_FOREVER);
	// The longest nanoseconds (292 years) still fits in the deadline.
	std::uint64_t max_ns = std::uint64_t(std::chrono::nanoseconds::max().count());
	d = deadline_ns_after(std::chrono::nanoseconds::max());
	CHECK(d != BH_FOREVER && d > max_ns);
	d = deadline_ns(std::chrono::steady_clock::time_point::max());
	CHECK(d != BH_FOREVER && d > max_ns / 2);
	CHECK(deadline_ns(bh::forever) == BH_FOREVER);
	CHECK(deadline_ns(bh::clock::time_point(-5ns)) == 0);
	now = bh_now_ns();
	d = deadline_ns(std::chrono::steady_clock::now() - 1h);
	CHECK(d >= now && d < now + 100 * ms);
	// A coarse time point past what nanoseconds hold (sys_seconds::max(),
	// a "never") is no deadline, not one long past; its min() is past.
	using sys_seconds = std::chrono::time_point<std::chrono::system_clock, std::chrono::seconds>;
	CHECK(deadline_ns(sys_seconds::max()) == BH_FOREVER);
	now = bh_now_ns();
	d = deadline_ns(sys_seconds::min());
	CHECK(d >= now && d < now + 100 * ms);
	// A duration past nanoseconds' range (300 years): no deadline, and no
	// overflow on the way (UBSan).
	CHECK(deadline_ns_after(std::chrono::hours(24 * 365 * 300)) == BH_FOREVER);
	CHECK(bh::detail::add_ns(1000, std::chrono::duration<double>(1e10)) == BH_FOREVER);
}

// ---- across threads -----------------------------------------------------

// A waiter blocked in acquire() gets the permit when a permit moved to
// another thread is destroyed there.
static void test_moved_to_another_thread()
{
	bh::bulkhead b = make(1, 4);
	bh::permit p = b.try_acquire();
	CHECK(p);

	std::atomic<bool> got{ false };
	std::thread waiter([&] {
		// Not forever: a broken release must fail the test, not hang it.
		bh::permit w = b.acquire_until(bh::clock::now() + 60s);
		CHECK(w);
		got.store(true, std::memory_order_relaxed);
	});
	while (read(b).queued != 1)
		std::this_thread::yield();
	CHECK(!got.load(std::memory_order_relaxed));
	std::thread releaser([q = std::move(p)]() mutable {
		bh::permit mine = std::move(q); // given back on this thread
		CHECK(mine);
	});
	CHECK(!p);
	releaser.join();
	waiter.join();
	CHECK(got.load(std::memory_order_relaxed));
	counts c = read(b);
	CHECK(c.in_flight == 0 && c.acquired == 2 && c.released == 2);
}

// Many threads, each moving its permits through a chain of owners.
static void test_threads_hammer()
{
	const int threads = 4, rounds = 2000;
	bh::bulkhead b = make(3, 64);
	std::atomic<std::uint64_t> granted{ 0 };
	std::vector<std::thread> ts;

	for (int i = 0; i < threads; i++)
		ts.emplace_back([&] {
			for (int r = 0; r < rounds; r++) {
				bh::permit p = b.acquire_for(10s);
				if (!p)
					continue;
				granted.fetch_add(1, std::memory_order_relaxed);
				bh::permit q = std::move(p);
				bh::permit s;
				s = std::move(q);
				if (r % 2)
					(void)s.release();
			}
		});
	for (auto &t : ts)
		t.join();
	counts c = read(b);
	CHECK(c.in_flight == 0);
	CHECK(c.acquired == granted.load() && c.released == granted.load());
	CHECK(c.acquired + c.timed_out + c.rejected == std::uint64_t(threads) * rounds);
	CHECK(c.over_released == 0);
}

// ---- pool tasks ---------------------------------------------------------

static std::atomic<int> tasks_alive{ 0 };

struct counted_task : bh::task {
	std::atomic<int> *ran;
	std::atomic<int> *reported;
	std::error_code *status;
	std::mutex *gate; // run() waits for it when set

	counted_task(std::atomic<int> *r, std::atomic<int> *rep, std::error_code *st,
		     std::mutex *g = nullptr)
		: ran(r), reported(rep), status(st), gate(g)
	{
		tasks_alive.fetch_add(1, std::memory_order_relaxed);
	}
	~counted_task() override
	{
		tasks_alive.fetch_sub(1, std::memory_order_relaxed);
	}

private:
	void run() override
	{
		if (gate) {
			gate->lock();
			gate->unlock();
		}
		ran->fetch_add(1, std::memory_order_relaxed);
	}
	void done(std::error_code st) noexcept override
	{
		*status = st;
		reported->fetch_add(1, std::memory_order_release); // pairs with the acquire loads below
	}
};

static bh::pool make_pool(std::uint32_t threads, std::uint32_t queue)
{
	bh_pool_config cfg{};
	cfg.name = "hpp";
	cfg.core_threads = threads;
	cfg.max_threads = threads;
	cfg.queue_capacity = queue;
	std::error_code ec;
	bh::pool p = bh::pool::create(cfg, ec);
	CHECK(!ec && p);
	return p;
}

static void wait_for(const std::atomic<int> &v, int want)
{
	while (v.load(std::memory_order_acquire) != want)
		std::this_thread::yield();
}

/* Wait up to 5 s for v to reach want (a failing CHECK follows otherwise). */
static void settle(const std::atomic<int> &v, int want)
{
	auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);

	while (v.load(std::memory_order_acquire) != want && std::chrono::steady_clock::now() < until)
		std::this_thread::yield();
}

static void test_pool_tasks()
{
	std::atomic<int> ran{ 0 }, reported{ 0 };
	std::error_code status = bh::to_error_code(-EBUSY); // not what done() reports
	{
		bh::pool pool = make_pool(1, 0);

		// submit: the pool takes the task, reports it once, deletes it.
		auto t = std::make_unique<counted_task>(&ran, &reported, &status);
		CHECK(!pool.submit(t));
		CHECK(!t);
		wait_for(reported, 1);
		CHECK(ran.load() == 1 && !status);

		// A full pool (one thread busy, no queue) refuses: the lvalue
		// keeps its task, the rvalue one is deleted.
		std::mutex gate;
		gate.lock();
		auto busy = std::make_unique<counted_task>(&ran, &reported, &status, &gate);
		CHECK(!pool.submit(busy));
		auto refused = std::make_unique<counted_task>(&ran, &reported, &status);
		CHECK(pool.submit(refused) == bh::errc::busy);
		CHECK(refused != nullptr);
		int alive = tasks_alive.load();
		CHECK(pool.submit(std::make_unique<counted_task>(&ran, &reported, &status)) == bh::errc::busy);
		CHECK(tasks_alive.load() == alive); // made and deleted
		gate.unlock();
		wait_for(reported, 2);

		// call: 0 means it ran and is still ours; done is not called.
		CHECK(!pool.call_for(refused, 10s));
		CHECK(refused != nullptr && ran.load() == 3 && reported.load() == 2);

		// call that times out: the pool keeps it, reports timed_out.
		gate.lock();
		auto slow = std::make_unique<counted_task>(&ran, &reported, &status, &gate);
		CHECK(pool.call_until(slow, bh::clock::now() + 5ms) == bh::errc::timed_out);
		CHECK(!slow);
		gate.unlock();
		wait_for(reported, 3);
		CHECK(status == bh::errc::timed_out);

		// Invalid: no task.
		std::unique_ptr<counted_task> none;
		CHECK(pool.submit(none) == bh::errc::invalid);
		// The pool reports a task before it deletes it: give it a moment.
		settle(tasks_alive, 1);
		CHECK(tasks_alive.load() == 1); // refused, still ours
	} // the pool joins its thread; refused is deleted
	CHECK(tasks_alive.load() == 0);
	CHECK(ran.load() == 4 && reported.load() == 3);
}

// A caller cancelled while it waits in call(): the cancel gives the task up
// as a timeout does, so the pool reports it and deletes it; the caller's
// std::unique_ptr, destroyed by the unwinding, must not delete it as well.
struct cancelled_call {
	bh::pool *pool;
	std::atomic<int> *ran, *reported;
	std::error_code *status;
	std::mutex *gate;
	std::atomic<bool> returned{ false };
};

static void *call_until_cancelled(void *arg)
{
	auto *c = static_cast<cancelled_call *>(arg);
	auto t = std::make_unique<counted_task>(c->ran, c->reported, c->status, c->gate);
	(void)c->pool->call(t); // waits on the gate: cancelled there
	c->returned = true;
	return nullptr;
}

static void test_pool_call_cancelled()
{
	std::atomic<int> ran{ 0 }, reported{ 0 };
	std::error_code status;
	std::mutex gate;
	{
		bh::pool pool = make_pool(1, 0);
		cancelled_call c{ &pool, &ran, &reported, &status, &gate };
		pthread_t th;
		void *res = nullptr;

		gate.lock();
		CHECK(pthread_create(&th, nullptr, call_until_cancelled, &c) == 0);
		std::this_thread::sleep_for(20ms); // into the wait (a cancel before it waits for it)
		CHECK(pthread_cancel(th) == 0);
		CHECK(pthread_join(th, &res) == 0);
		CHECK(res == PTHREAD_CANCELED && !c.returned);
		gate.unlock();
		wait_for(reported, 1);
		CHECK(status == bh::errc::timed_out || status == bh::errc::cancelled);
		settle(tasks_alive, 0);
	}
	CHECK(tasks_alive.load() == 0);
	CHECK(reported.load() == 1);
}

// A permit moved into a task is given back when the pool is done with it.
static void test_permit_into_task()
{
	bh::bulkhead b = make(2, 0);
	std::atomic<int> runs{ 0 };
	std::mutex gate;
	gate.lock();
	{
		bh::pool pool = make_pool(2, 8);
		for (int i = 0; i < 2; i++) {
			bh::permit p = b.try_acquire();
			CHECK(p);
			CHECK(!pool.submit(bh::make_task([q = std::move(p), &runs, &gate] {
				std::lock_guard<std::mutex> wait(gate);
				CHECK(q);
				runs.fetch_add(1, std::memory_order_relaxed);
			})));
		}
		CHECK(!b.try_acquire()); // both are the tasks' until they are deleted
		gate.unlock();
		CHECK(pool.shutdown_until(bh::forever) == 0);
	}
	counts c = read(b);
	CHECK(runs.load() == 2);
	CHECK(c.in_flight == 0 && c.acquired == 2 && c.released == 2 && c.rejected == 1);
}

// ---- io_uring requests --------------------------------------------------

#ifdef BH_HPP_URING
static int requests_alive;

struct nop_request : bh::uring_request {
	int *completions;
	int res = 1;
	explicit nop_request(int *c) : completions(c)
	{
		requests_alive++;
	}
	~nop_request() override
	{
		requests_alive--;
	}

private:
	void completed(const io_uring_cqe &cqe) noexcept override
	{
		res = cqe.res;
		++*completions;
	}
};

static void test_uring()
{
	io_uring ring;
	int r = io_uring_queue_init(8, &ring, 0);
	if (r < 0) {
		std::printf("skip: io_uring_queue_init: %d (no io_uring here)\n", r);
		return;
	}
	bh::bulkhead b = make(1, 0);
	int completions = 0, foreign = 0;
	{
		std::error_code ec;
		bh::uring t = bh::uring::create(ring, ec);
		CHECK(!ec && t);

		auto req = std::make_unique<nop_request>(&completions);
		io_uring_sqe *sqe = nullptr;
		CHECK(!t.get_sqe(req, b, 1, sqe));
		io_uring_prep_nop(sqe);
		CHECK(!t.track(req, bh::forever));
		CHECK(!req); // the kernel's now
		CHECK(read(b).in_flight == 1);

		// The bulkhead is full: the next request gets nothing, stays ours.
		auto second = std::make_unique<nop_request>(&completions);
		CHECK(t.get_sqe(second, b, 1, sqe) == bh::errc::busy);
		CHECK(second != nullptr);
		bh::bulkhead none;
		CHECK(t.get_sqe(second, none, 1, sqe) == bh::errc::invalid);

		// A foreign SQE of our own goes to the foreign handler.
		io_uring_sqe *mine = io_uring_get_sqe(&ring);
		io_uring_prep_nop(mine);
		mine->user_data = 7;
		CHECK(io_uring_submit(&ring) == 2);
		int seen = 0;
		while (seen < 2) {
			io_uring_cqe *cqe;
			CHECK(io_uring_wait_cqe(&ring, &cqe) == 0);
			int n = t.reap([&](const io_uring_cqe &c) { foreign += c.user_data == 7; });
			CHECK(n >= 0);
			seen += n;
		}
		CHECK(completions == 1 && foreign == 1);
		CHECK(requests_alive == 1); // only second: the first was deleted
		counts c = read(b);
		CHECK(c.in_flight == 0 && c.released == 1);

		// One left in flight: the destructor drains it, deletes it.
		CHECK(!t.get_sqe(second, b, 1, sqe));
		io_uring_prep_nop(sqe);
		CHECK(!t.track(second, bh::clock::now() + 10s));
		CHECK(io_uring_submit(&ring) >= 1);
	}
	CHECK(requests_alive == 0 && completions == 2);
	CHECK(read(b).in_flight == 0);
	io_uring_queue_exit(&ring);
}
#endif

int main()
{
	test_errors();
	test_every_path();
	test_release_and_assign();
	test_refusals();
	test_deadline_conversion();
	test_moved_to_another_thread();
	test_threads_hammer();
	test_pool_tasks();
	test_pool_call_cancelled();
	test_permit_into_task();
#ifdef BH_HPP_URING
	test_uring();
#else
	std::printf("note: built without the io_uring guards\n");
#endif
	if (failures.load()) {
		std::printf("FAILED: %d checks\n", failures.load());
		return 1;
	}
	std::printf("ok: C++%ld, exceptions %s\n", (long)(__cplusplus / 100 % 100),
#if defined(__cpp_exceptions)
		    "on"
#else
		    "off"
#endif
	);
	return 0;
}
