// libbulkhead for C++17: owning handles and permit guards over the C API.
//
//   bh_config cfg{};
//   cfg.max_concurrent = 16;
//   cfg.queue_capacity = 32;
//   std::error_code ec;
//   bh::bulkhead payment = bh::bulkhead::create(cfg, ec);
//   if (ec) ...
//
//   std::error_code charge(const order &o)
//   {
//           bh::permit p = payment.acquire_for(std::chrono::milliseconds(10));
//           if (!p)
//                   return p.error();   // bh::errc::busy, timed_out, shut_down
//           return call_payment(o);     // p gives its permit back on every path
//   }
//
// OWNERSHIP. bh::bulkhead, bh::pool and bh::uring own one C handle each and
// free it in their destructor; they move, never copy. A bh::permit owns
// permits of one bulkhead and gives them back exactly once: in release(),
// or in its destructor if release() was not called. Moving a permit moves
// the duty to give them back (into another scope, a task, a completion
// handler on another thread); the moved-from permit holds nothing.
//
// ERRORS are std::error_code values in std::generic_category(), one per
// negative errno the C call returned; compare them with bh::errc (or
// std::errc). Nothing here throws, so -fno-exceptions builds work; with
// exceptions, an exception that unwinds a scope gives its permits back like
// any other exit.
//
// DEADLINES are std::chrono time points of any clock (bh::clock is the
// library's own CLOCK_MONOTONIC, exact; other clocks are converted through
// their distance from now), or durations from now. A duration too long to
// represent means no deadline.
//
// Functions that may wait (acquire, pool calls and shutdown) are not
// noexcept: a pthread cancellation unwinds through them, and then no permit
// exists and nothing is held. Everything else is noexcept.
//
// Thread safety is the C API's: a bulkhead or pool may be used from many
// threads at once; one permit, one bh::uring, from one thread at a time.
// See docs/cpp.md.
#ifndef BULKHEAD_HPP
#define BULKHEAD_HPP

#if __cplusplus < 201703L
#error "<bulkhead.hpp> needs C++17 or later"
#endif

#include <bulkhead.h>
#include <bulkhead/pool.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <ratio>
#include <system_error>
#include <type_traits>
#include <utility>

// The io_uring guards, when the C header and liburing are installed
// (define BH_HPP_NO_URING to leave them out).
#if !defined(BH_HPP_NO_URING) && __has_include(<bulkhead/uring.h>) && __has_include(<liburing.h>)
#include <bulkhead/uring.h>
#define BH_HPP_URING 1
#endif

namespace bh {

// ---- errors -----------------------------------------------------------

// The errors libbulkhead returns, as conditions to compare a
// std::error_code with: `if (p.error() == bh::errc::busy)`.
enum class errc : int {
	busy = EBUSY,           // no permit free and no room in the queue
	timed_out = ETIMEDOUT,  // the deadline passed while queued
	shut_down = ESHUTDOWN,  // closed (bh_close, pool shutdown)
	invalid = EINVAL,       // a bad argument, or n above the limit
	overflow = EOVERFLOW,   // a release of more permits than are held
	no_memory = ENOMEM,
	again = EAGAIN,         // pool: no thread could be created; uring: no SQE free
	cancelled = ECANCELED,  // pool: a task dropped unrun
	deadlock = EDEADLK,     // pool: destroyed from one of its own threads
};

inline std::error_condition make_error_condition(errc e) noexcept
{
	return std::error_condition(static_cast<int>(e), std::generic_category());
}

// A C result (0 or a count, else a negative errno) as a std::error_code.
inline std::error_code to_error_code(int result) noexcept
{
	return result < 0 ? std::error_code(-result, std::generic_category()) : std::error_code();
}

} // namespace bh

namespace std {
template <>
struct is_error_condition_enum<bh::errc> : true_type {
};
} // namespace std

namespace bh {

// ---- time -------------------------------------------------------------

// CLOCK_MONOTONIC in nanoseconds, the clock of every libbulkhead deadline
// (a std::chrono clock over bh_now_ns()).
struct clock {
	using rep = std::int64_t;
	using period = std::nano;
	using duration = std::chrono::nanoseconds;
	using time_point = std::chrono::time_point<clock>;
	static constexpr bool is_steady = true;

	static time_point now() noexcept
	{
		return time_point(duration(static_cast<rep>(bh_now_ns())));
	}
};

// Wait as long as it takes: `b.acquire(bh::forever)`.
struct forever_t {
	explicit constexpr forever_t() = default;
};
inline constexpr forever_t forever{};

namespace detail {

// now_ns + d, rounded up (never wait less than asked); BH_FOREVER when that
// does not fit; now_ns when d is not positive.
template <class Rep, class Period>
std::uint64_t add_ns(std::uint64_t now_ns, const std::chrono::duration<Rep, Period> &d) noexcept
{
	using namespace std::chrono;
	if (!(d > duration<Rep, Period>::zero()))
		return now_ns;
	// Compare in floating point first: d may not fit in nanoseconds (from
	// 2^63 ns, 292 years, ceil<nanoseconds> would overflow).
	long double ns_ld = duration<long double, std::nano>(d).count();
	if (ns_ld >= static_cast<long double>(BH_FOREVER - now_ns) || ns_ld >= 0x1p63L)
		return BH_FOREVER;
	std::uint64_t ns = static_cast<std::uint64_t>(ceil<nanoseconds>(d).count());
	return ns >= BH_FOREVER - now_ns ? BH_FOREVER : now_ns + ns;
}

inline std::uint64_t deadline_ns(forever_t) noexcept
{
	return BH_FOREVER;
}

inline std::uint64_t deadline_ns(const clock::time_point &t) noexcept
{
	clock::rep ns = t.time_since_epoch().count();
	return ns < 0 ? 0 : static_cast<std::uint64_t>(ns);
}

template <class Clock, class Dur>
std::uint64_t deadline_ns(const std::chrono::time_point<Clock, Dur> &t) noexcept
{
	using namespace std::chrono;
	using common = std::common_type_t<Dur, typename Clock::duration>;
	auto now = Clock::now();
	std::uint64_t bh_now = bh_now_ns();
	// t and now meet in the finer of their durations, where a coarse t may
	// not fit (sys_seconds::max() in nanoseconds): past its range, t is no
	// deadline at all, or long past.
	using ld_ns = duration<long double, std::nano>;
	if (ld_ns(t.time_since_epoch()) > ld_ns(common::max()))
		return BH_FOREVER;
	if (ld_ns(t.time_since_epoch()) < ld_ns(common::min()))
		return bh_now;
	if (t <= now)
		return bh_now;
	return add_ns(bh_now, t - now);
}

template <class Rep, class Period>
std::uint64_t deadline_ns_after(const std::chrono::duration<Rep, Period> &d) noexcept
{
	return add_ns(bh_now_ns(), d);
}

} // namespace detail

// ---- permits ----------------------------------------------------------

class bulkhead;

// n permits of one bulkhead, given back exactly once: by release() or by
// the destructor. Empty when default-constructed, moved from, released,
// detached, or when the acquire that made it failed (error() says why).
class [[nodiscard]] permit {
public:
	permit() noexcept = default;

	permit(permit &&o) noexcept
		: bh_(std::exchange(o.bh_, nullptr)), n_(std::exchange(o.n_, 0u)), err_(o.err_)
	{
	}

	// Gives back what this permit holds first, then takes o's.
	permit &operator=(permit &&o) noexcept
	{
		if (this != &o) {
			(void)release();
			bh_ = std::exchange(o.bh_, nullptr);
			n_ = std::exchange(o.n_, 0u);
			err_ = o.err_;
		}
		return *this;
	}

	permit(const permit &) = delete;
	permit &operator=(const permit &) = delete;

	~permit()
	{
		(void)release();
	}

	// Whether it holds permits.
	explicit operator bool() const noexcept
	{
		return bh_ != nullptr;
	}

	std::uint32_t count() const noexcept
	{
		return n_;
	}

	// Why the acquire that made this permit failed; empty when it succeeded.
	std::error_code error() const noexcept
	{
		return to_error_code(-err_);
	}

	bulkhead_t *native_handle() const noexcept
	{
		return bh_;
	}

	// Give the permits back now; later calls (and the destructor) do
	// nothing. The C release's error, e.g. bh::errc::overflow when C code
	// gave back permits this guard owned.
	std::error_code release() noexcept
	{
		if (!bh_)
			return std::error_code();
		bulkhead_t *bh = std::exchange(bh_, nullptr);
		return to_error_code(bh_release(bh, std::exchange(n_, 0u)));
	}

	// Stop owning the permits without giving them back: returns how many
	// (0 if none), for C code that calls bh_release itself.
	[[nodiscard]] std::uint32_t detach() noexcept
	{
		bh_ = nullptr;
		return std::exchange(n_, 0u);
	}

	// Own n permits of bh that the caller already holds, e.g. the ones a
	// bh_acquire_async callback was granted (adopt them on your own thread,
	// never inside that callback, which runs under the bulkhead's lock).
	static permit adopt(bulkhead_t *bh, std::uint32_t n) noexcept
	{
		return bh && n ? permit(bh, n) : permit();
	}

private:
	friend class bulkhead;

	permit(bulkhead_t *bh, std::uint32_t n) noexcept : bh_(bh), n_(n)
	{
	}

	// A failed acquire: result is the C call's negative errno.
	static permit failed(int result) noexcept
	{
		permit p;
		p.err_ = -result;
		return p;
	}

	bulkhead_t *bh_ = nullptr;
	std::uint32_t n_ = 0;
	int err_ = 0; // positive errno of the failed acquire, else 0
};

// ---- bulkheads --------------------------------------------------------

// Owns one bulkhead_t. Empty when default-constructed or moved from; every
// call on an empty one fails with bh::errc::invalid.
class bulkhead {
public:
	bulkhead() noexcept = default;

	// Take ownership of a handle from bh_create (nullptr: empty).
	explicit bulkhead(bulkhead_t *adopt) noexcept : h_(adopt)
	{
	}

	static bulkhead create(const bh_config &cfg, std::error_code &ec) noexcept
	{
		bulkhead_t *h = nullptr;
		ec = to_error_code(bh_create(&cfg, &h));
		return bulkhead(ec ? nullptr : h);
	}

	bulkhead(bulkhead &&o) noexcept : h_(std::exchange(o.h_, nullptr))
	{
	}

	bulkhead &operator=(bulkhead &&o) noexcept
	{
		if (this != &o)
			reset(std::exchange(o.h_, nullptr));
		return *this;
	}

	bulkhead(const bulkhead &) = delete;
	bulkhead &operator=(const bulkhead &) = delete;

	// The same rule as bh_destroy: nobody may still wait on it, and every
	// permit of it must be gone (permits hold a plain pointer).
	~bulkhead()
	{
		reset();
	}

	void reset(bulkhead_t *adopt = nullptr) noexcept
	{
		bh_destroy(std::exchange(h_, adopt));
	}

	// Stop owning the handle and return it.
	[[nodiscard]] bulkhead_t *detach() noexcept
	{
		return std::exchange(h_, nullptr);
	}

	explicit operator bool() const noexcept
	{
		return h_ != nullptr;
	}

	bulkhead_t *get() const noexcept
	{
		return h_;
	}

	// n permits if they are free now; never waits.
	permit try_acquire(std::uint32_t n = 1) noexcept
	{
		if (!h_)
			return permit::failed(-EINVAL);
		return make(bh_try_acquire(h_, n), n);
	}

	// n permits, waiting in the FIFO queue until the deadline (a time
	// point, or bh::forever). A deadline already past behaves like
	// try_acquire.
	template <class Deadline>
	permit acquire_until(const Deadline &deadline, std::uint32_t n = 1)
	{
		return acquire_ns(detail::deadline_ns(deadline), n);
	}

	// n permits, waiting in the FIFO queue for at most d.
	template <class Rep, class Period>
	permit acquire_for(const std::chrono::duration<Rep, Period> &d, std::uint32_t n = 1)
	{
		return acquire_ns(detail::deadline_ns_after(d), n);
	}

	// n permits, waiting as long as it takes (until closed).
	permit acquire(std::uint32_t n = 1)
	{
		return acquire_ns(BH_FOREVER, n);
	}

	// bh_close: every waiter and later acquire fails with shut_down;
	// permits still held go back as usual.
	std::error_code close() noexcept
	{
		return h_ ? to_error_code(bh_close(h_)) : std::make_error_code(std::errc::invalid_argument);
	}

	std::error_code set_limit(std::uint32_t max_concurrent) noexcept
	{
		return h_ ? to_error_code(bh_set_limit(h_, max_concurrent))
			  : std::make_error_code(std::errc::invalid_argument);
	}

	// A snapshot (struct bh_stats, about 10 KB).
	void stats(struct bh_stats &out) const noexcept
	{
		if (h_)
			bh_stats(h_, &out);
		else
			out = {};
	}

	// The name used in exports (nullptr when empty).
	const char *name() const noexcept
	{
		return h_ ? bh_name(h_) : nullptr;
	}

private:
	permit acquire_ns(std::uint64_t deadline_ns, std::uint32_t n)
	{
		if (!h_)
			return permit::failed(-EINVAL);
		return make(bh_acquire(h_, n, deadline_ns), n);
	}

	permit make(int result, std::uint32_t n) noexcept
	{
		return result == 0 ? permit(h_, n) : permit::failed(result < 0 ? result : -EINVAL);
	}

	bulkhead_t *h_ = nullptr;
};

// ---- thread pools -----------------------------------------------------

class pool;

// A unit of work for a bh::pool. Derive from it, allocate it with
// std::make_unique, and hand the std::unique_ptr to pool::submit or
// pool::call: while the pool holds the task the pointer is empty, and the
// pool deletes the task after done() has reported it, exactly once. A task
// is never copied or moved (the pool holds its address).
class task {
public:
	task(const task &) = delete;
	task &operator=(const task &) = delete;
	virtual ~task() = default;

	// True once nobody waits for this task any more (its caller gave up)
	// or the pool is shutting down now: run() may stop early. Only valid
	// during run().
	bool cancelled() const noexcept
	{
		return bh_task_cancelled(&node_);
	}

protected:
	task() noexcept
	{
		node_.run = run_cb;
		node_.done = done_cb;
		node_.data = this;
	}

private:
	friend class pool;

	// The work, on a pool thread (or on the submitting thread, under
	// BH_POOL_CALLER_RUNS). An exception that escapes it ends the program.
	virtual void run() = 0;

	// The pool's report for a task it held: {} (it ran), bh::errc::timed_out
	// (it ran, but its caller had given up), bh::errc::cancelled (dropped
	// unrun). The task is deleted right after. Not called when
	// pool::call succeeds: the task ran and is the caller's again.
	virtual void done(std::error_code status) noexcept
	{
		(void)status;
	}

	static void run_cb(bh_task *t) noexcept
	{
		static_cast<task *>(t->data)->run();
	}

	static void done_cb(bh_task *t, int status) noexcept
	{
		std::unique_ptr<task> owned(static_cast<task *>(t->data));
		owned->done(to_error_code(status));
	}

	bh_task node_{};
};

namespace detail {

template <class F>
class fn_task final : public task {
public:
	explicit fn_task(F &&f) : f_(std::move(f))
	{
	}

private:
	void run() override
	{
		f_();
	}

	F f_;
};

} // namespace detail

// A task that runs f(): `pool.submit(bh::make_task([p = std::move(permit)] { ... }))`.
// Whatever f captures is destroyed with the task, after the pool's report.
template <class F>
std::unique_ptr<task> make_task(F f)
{
	return std::make_unique<detail::fn_task<F>>(std::move(f));
}

// Owns one bh_pool_t. Its destructor is bh_pool_destroy: it waits for the
// queued and running tasks, and must not run on one of the pool's threads
// (there bh_pool_destroy refuses, and the destructor leaves the pool alive
// rather than deadlock; destroy() reports it).
class pool {
public:
	pool() noexcept = default;

	explicit pool(bh_pool_t *adopt) noexcept : p_(adopt)
	{
	}

	static pool create(const bh_pool_config &cfg, std::error_code &ec) noexcept
	{
		bh_pool_t *p = nullptr;
		ec = to_error_code(bh_pool_create(&cfg, &p));
		return pool(ec ? nullptr : p);
	}

	pool(pool &&o) noexcept : p_(std::exchange(o.p_, nullptr))
	{
	}

	pool &operator=(pool &&o) noexcept
	{
		if (this != &o) {
			destroy();
			p_ = std::exchange(o.p_, nullptr);
		}
		return *this;
	}

	pool(const pool &) = delete;
	pool &operator=(const pool &) = delete;

	~pool()
	{
		destroy();
	}

	// Shut down gracefully, join the threads and free the pool (empty
	// afterwards). bh::errc::deadlock, and nothing done, on a pool thread.
	std::error_code destroy()
	{
		std::error_code ec = to_error_code(bh_pool_destroy(p_));
		if (!ec)
			p_ = nullptr;
		return ec;
	}

	explicit operator bool() const noexcept
	{
		return p_ != nullptr;
	}

	bh_pool_t *get() const noexcept
	{
		return p_;
	}

	// Queue t or start it. On success t is empty: the pool holds the task
	// and reports it through done() (possibly already: under CALLER_RUNS
	// or DISCARD a full pool has run or dropped it before this returns).
	// On failure (busy, shut_down, again, invalid) t still owns it.
	template <class T>
	std::error_code submit(std::unique_ptr<T> &t) noexcept
	{
		static_assert(std::is_base_of_v<task, T>, "a bh::pool runs bh::task objects");
		if (!t || !p_)
			return std::make_error_code(std::errc::invalid_argument);
		task *raw = t.get();
		std::error_code ec = to_error_code(bh_pool_submit(p_, &raw->node_));
		if (!ec)
			(void)t.release(); // the pool's now; done_cb deletes it
		return ec;
	}

	// The same for a task nobody keeps: on failure it is deleted.
	template <class T>
	std::error_code submit(std::unique_ptr<T> &&t) noexcept
	{
		std::unique_ptr<T> own(std::move(t));
		return submit(own);
	}

	// Submit t and wait until it has run or the deadline (a time point,
	// or bh::forever) passes.
	//   {}: it ran, t still owns it (done() is not called);
	//   bh::errc::timed_out: the caller gave up, t is empty, the pool
	//     reports the task through done() when it finishes (or drops it);
	//   anything else: it never ran, t still owns it.
	template <class T, class Deadline>
	std::error_code call_until(std::unique_ptr<T> &t, const Deadline &deadline)
	{
		return call_ns(t, detail::deadline_ns(deadline));
	}

	template <class T, class Rep, class Period>
	std::error_code call_for(std::unique_ptr<T> &t, const std::chrono::duration<Rep, Period> &d)
	{
		return call_ns(t, detail::deadline_ns_after(d));
	}

	template <class T>
	std::error_code call(std::unique_ptr<T> &t)
	{
		return call_ns(t, BH_FOREVER);
	}

	// Refuse new tasks, let the queued ones run, wait until the deadline
	// for every thread to finish: how many tasks were still running or
	// queued (0: all done), or a negative errno.
	template <class Deadline>
	int shutdown_until(const Deadline &deadline)
	{
		return p_ ? bh_pool_shutdown(p_, detail::deadline_ns(deadline)) : -EINVAL;
	}

	// Refuse new tasks, drop the queued ones (done gets cancelled), flag
	// the running ones cancelled. How many it dropped, or a negative errno.
	int shutdown_now() noexcept
	{
		return p_ ? bh_pool_shutdown_now(p_) : -EINVAL;
	}

	void stats(struct bh_pool_stats &out) const noexcept
	{
		if (p_)
			bh_pool_stats(p_, &out);
		else
			out = {};
	}

	const char *name() const noexcept
	{
		return p_ ? bh_pool_name(p_) : nullptr;
	}

private:
	template <class T>
	std::error_code call_ns(std::unique_ptr<T> &t, std::uint64_t deadline_ns)
	{
		static_assert(std::is_base_of_v<task, T>, "a bh::pool runs bh::task objects");
		if (!t || !p_)
			return std::make_error_code(std::errc::invalid_argument);
		// A pthread_cancel of the wait unwinds out of bh_pool_call with the
		// task given up as on a timeout: the pool's then, and done_cb
		// deletes it, so t must let go of it on the way out too.
		struct give_up {
			std::unique_ptr<T> &t;
			bool armed;
			~give_up()
			{
				if (armed)
					(void)t.release();
			}
		} on_cancel{ t, true };
		task *raw = t.get();
		int r = bh_pool_call(p_, &raw->node_, deadline_ns);
		on_cancel.armed = false;
		if (r == -ETIMEDOUT)
			(void)t.release(); // the pool's: done_cb deletes it, maybe already
		return to_error_code(r);
	}

	bh_pool_t *p_ = nullptr;
};

#ifdef BH_HPP_URING

// ---- io_uring ---------------------------------------------------------

class uring;

// An io_uring request whose permits follow the kernel's work. Derive from
// it, allocate it with std::make_unique, get its SQE with uring::get_sqe,
// prepare the SQE, and seal it with uring::track: from then on the request
// belongs to the kernel (the std::unique_ptr is empty) until its final CQE,
// when the tracker gives the permits back, calls completed() and deletes
// the request. No request is freed while the kernel may still write to it.
class uring_request {
public:
	uring_request(const uring_request &) = delete;
	uring_request &operator=(const uring_request &) = delete;
	virtual ~uring_request() = default;

protected:
	uring_request() noexcept = default;

private:
	friend class uring;

	// Each CQE of this request that is not its last (IORING_CQE_F_MORE:
	// multishot, zero-copy send notifications); the permits are still held.
	virtual void more(const io_uring_cqe &cqe) noexcept
	{
		(void)cqe;
	}

	// The final CQE: the permits are back, the request is deleted after.
	virtual void completed(const io_uring_cqe &cqe) noexcept = 0;

	bh_uring_op op_{};
};

// Owns the tracker (bh_uring_t) of one ring; used by the ring's thread only.
// Every operation it tracks is a bh::uring_request (its reap and drain hand
// each tracked op to the request that owns it).
class uring {
public:
	uring() noexcept = default;

	static uring create(io_uring &ring, std::error_code &ec) noexcept
	{
		bh_uring_t *t = nullptr;
		ec = to_error_code(bh_uring_create(&ring, 0, &t));
		uring u;
		u.t_ = ec ? nullptr : t;
		return u;
	}

	uring(uring &&o) noexcept : t_(std::exchange(o.t_, nullptr))
	{
	}

	uring &operator=(uring &&o) noexcept
	{
		if (this != &o) {
			reset();
			t_ = std::exchange(o.t_, nullptr);
		}
		return *this;
	}

	uring(const uring &) = delete;
	uring &operator=(const uring &) = delete;

	// Frees the tracker. If anything it tracks is still in flight, it
	// drains first (bh_uring_drain: everything on the ring is cancelled and
	// reaped, its requests completed and deleted, CQEs not the tracker's
	// dropped), so no request outlives its memory: call drain_until()
	// yourself first to see those CQEs. Destroy it before
	// io_uring_queue_exit. If even the drain fails (a kernel without
	// IORING_ASYNC_CANCEL_ANY), the tracker is left allocated: a leak, never
	// memory the kernel still writes to.
	~uring()
	{
		reset();
	}

	explicit operator bool() const noexcept
	{
		return t_ != nullptr;
	}

	bh_uring_t *get() const noexcept
	{
		return t_;
	}

	// n permits of b for req and one SQE (bh_uring_get_sqe). On success
	// prepare *sqe (not its user_data) and call track. busy: no permits,
	// no SQE used, nothing taken; again: no SQE free.
	template <class R>
	std::error_code get_sqe(const std::unique_ptr<R> &req, bulkhead &b, std::uint32_t n,
				io_uring_sqe *&sqe) noexcept
	{
		static_assert(std::is_base_of_v<uring_request, R>, "requests derive from bh::uring_request");
		if (!req || !t_ || !b)
			return std::make_error_code(std::errc::invalid_argument);
		uring_request *base = req.get();
		bh_uring_op *op = &base->op_;
		op->data = base;
		return to_error_code(bh_uring_get_sqe(t_, op, b.get(), n, &sqe));
	}

	// Seal req's prepared SQE (bh_uring_track), with a kernel deadline (a
	// time point; bh::forever for none). On success req is empty: the
	// request is the kernel's until its final CQE. On failure (invalid)
	// req is idle again, its permits back, and still yours.
	template <class R, class Deadline>
	std::error_code track(std::unique_ptr<R> &req, const Deadline &deadline) noexcept
	{
		static_assert(std::is_base_of_v<uring_request, R>, "requests derive from bh::uring_request");
		if (!req || !t_)
			return std::make_error_code(std::errc::invalid_argument);
		bh_uring_op *op = &static_cast<uring_request *>(req.get())->op_;
		std::error_code ec = to_error_code(bh_uring_track(t_, op, detail::deadline_ns(deadline)));
		if (!ec)
			(void)req.release(); // the kernel's until the final CQE
		return ec;
	}

	// Handle the CQEs the ring has ready (bh_uring_reap): requests see
	// more()/completed(), CQEs that are not the tracker's go to
	// foreign(const io_uring_cqe &). The number of CQEs consumed, or a
	// negative errno.
	template <class F>
	int reap(F &&foreign) noexcept
	{
		auto call = [&foreign](const io_uring_cqe &cqe) { foreign(cqe); };
		return t_ ? bh_uring_reap(t_, dispatch<decltype(call)>, &call) : -EINVAL;
	}

	int reap() noexcept
	{
		return reap(ignore);
	}

	// Hand one CQE from your own loop to the tracker (bh_uring_complete);
	// advance the CQ yourself. Its enum bh_uring_kind, or a negative errno.
	int complete(const io_uring_cqe &cqe) noexcept
	{
		if (!t_)
			return -EINVAL;
		bh_uring_op *op = nullptr;
		int kind = bh_uring_complete(t_, &cqe, &op);
		if (op && (kind == BH_URING_MORE || kind == BH_URING_DONE))
			deliver(cqe, kind, op);
		return kind;
	}

	// bh_uring_drain: cancel everything on the ring and reap until nothing
	// of the tracker's is in flight or the deadline passes.
	template <class Deadline, class F>
	std::error_code drain_until(const Deadline &deadline, F &&foreign)
	{
		if (!t_)
			return std::make_error_code(std::errc::invalid_argument);
		auto call = [&foreign](const io_uring_cqe &cqe) { foreign(cqe); };
		return to_error_code(bh_uring_drain(t_, detail::deadline_ns(deadline),
						    dispatch<decltype(call)>, &call));
	}

	void stats(struct bh_uring_stats &out) const noexcept
	{
		if (t_)
			bh_uring_stats(t_, &out);
		else
			out = {};
	}

private:
	static void ignore(const io_uring_cqe &) noexcept
	{
	}

	static void deliver(const io_uring_cqe &cqe, int kind, bh_uring_op *op) noexcept
	{
		auto *req = static_cast<uring_request *>(op->data);
		if (kind == BH_URING_MORE) {
			req->more(cqe);
		} else {
			std::unique_ptr<uring_request> owned(req);
			owned->completed(cqe);
		}
	}

	// ctx points to a callable object taking const io_uring_cqe &.
	template <class Call>
	static void dispatch(void *ctx, io_uring_cqe *cqe, int kind, bh_uring_op *op) noexcept
	{
		if (op && (kind == BH_URING_MORE || kind == BH_URING_DONE))
			deliver(*cqe, kind, op);
		else
			(*static_cast<Call *>(ctx))(*cqe);
	}

	void reset() noexcept
	{
		if (!t_)
			return;
		if (bh_uring_destroy(t_) == -EBUSY) {
			auto drop = [](const io_uring_cqe &) {};
			(void)bh_uring_drain(t_, BH_FOREVER, dispatch<decltype(drop)>, &drop);
			(void)bh_uring_destroy(t_);
		}
		t_ = nullptr;
	}

	bh_uring_t *t_ = nullptr;
};

#endif // BH_HPP_URING

} // namespace bh

#endif // BULKHEAD_HPP
