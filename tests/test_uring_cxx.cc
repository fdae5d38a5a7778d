// The io_uring header compiles as C++ and the library links from C++.
#include <bulkhead/uring.h>

#include <cerrno>
#include <cstdio>

int main()
{
	bh_config cfg = {};
	cfg.max_concurrent = 1;
	bulkhead_t *bh = nullptr;
	io_uring ring;
	bh_uring_t *t = nullptr;
	bh_uring_op op = {};
	io_uring_sqe *sqe = nullptr;
	io_uring_cqe *cqe = nullptr;
	bh_uring_op *done = nullptr;

	if (bh_create(&cfg, &bh) != 0)
		return 1;
	if (io_uring_queue_init(4, &ring, 0) < 0) {
		bh_destroy(bh);
		std::printf("no io_uring: skip\n");
		return 77;
	}
	int ok = bh_uring_create(&ring, 0, &t) == 0 && bh_uring_get_sqe(t, &op, bh, 1, &sqe) == 0;
	if (ok) {
		io_uring_prep_nop(sqe);
		ok = bh_uring_track(t, &op, BH_FOREVER) == 0 && io_uring_submit(&ring) == 1 &&
		     io_uring_wait_cqe(&ring, &cqe) == 0 && bh_uring_owns(cqe) &&
		     bh_uring_complete(t, cqe, &done) == BH_URING_DONE && done == &op;
		io_uring_cqe_seen(&ring, cqe);
	}
	ok = ok && bh_uring_drain(t, BH_FOREVER, nullptr, nullptr) == 0 && bh_uring_destroy(t) == 0;
	io_uring_queue_exit(&ring);
	struct bh_stats st;
	bh_stats(bh, &st);
	ok = ok && st.in_flight == 0 && st.acquired == 1 && st.released == 1;
	bh_destroy(bh);
	std::printf("%s\n", ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}
