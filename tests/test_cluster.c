/* Cluster bulkheads against a real redis-server (started here, on a unix
 * socket and a loopback port in a temporary directory; the test skips with
 * 77 when redis-server is not installed). Multi-process fault scenarios are
 * in test_cluster_faults.c. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <netdb.h>
#include <poll.h>

#include "testutil.h"
#include "redis_harness.h"
#include "bulkhead/adaptive.h"
#include "bulkhead/cluster.h"
#include "bulkhead/metrics.h"
#include "endpoint.h"
#include "core/layer.h"
#include "src/cluster/lease_lua.h" /* generated: BHC_LEASE_LUA */

#define LEASE (600 * BH_MSEC)

static struct redis_srv srv;
static unsigned seq; /* a fresh limit name per test */

static const char *fresh_name(char *buf, size_t len)
{
	snprintf(buf, len, "t%u-%d", ++seq, (int)getpid());
	return buf;
}

static struct bh_cluster_config config(const char *name, uint32_t limit)
{
	return (struct bh_cluster_config){
		.endpoint = srv.endpoint,
		.name = name,
		.global_limit = limit,
		.lease_ns = LEASE,
		.flags = BH_CLUSTER_FRESH_STORE,
	};
}

static struct bh_cluster_stats cstats(bulkhead_t *bh)
{
	struct bh_cluster_stats s;

	assert_int_equal(bh_cluster_stats(bh, &s), 0);
	return s;
}

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static int threads(void)
{
	return count_dir("/proc/self/task");
}

static int fds(void)
{
	return count_dir("/proc/self/fd");
}

/* Open must fail with want and leave no thread and no fd behind. */
static void open_fails(const struct bh_cluster_config *cc, const struct bh_config *local, int want)
{
	int t = threads(), f = fds();
	bulkhead_t *bh = (bulkhead_t *)&srv;

	errno = 12345;
	assert_int_equal(bh_cluster_open(cc, local, &bh), want);
	assert_int_equal(errno, 12345);
	assert_ptr_equal(bh, (bulkhead_t *)&srv); /* untouched */
	assert_int_equal(threads(), t);
	assert_int_equal(fds(), f);
}

/* Drive a manual handle until its renewals count reaches n. */
static void step_until_renewals(bulkhead_t *bh, uint64_t n)
{
	uint64_t end = bh_now_ns() + 5 * BH_SEC;

	while (cstats(bh).renewals < n) {
		assert_true(bh_now_ns() < end);
		assert_int_equal(bh_cluster_step(bh, bh_now_ns() + 20 * BH_MSEC), 0);
	}
}

/* ---- a loopback proxy that can hold a renewal back --------------------------- */

/* Relays an instance's connections to the store's TCP port, except that,
 * armed, it takes the next renewal off the wire and keeps it until the
 * test lets it go: a request delayed in the network. PX_HOLD_RESET also
 * resets the instance's connection at once (it sends the renewal again on a
 * new one); PX_HOLD leaves it waiting for an answer that does not come. Let
 * go, the renewal reaches the store on the proxy's own connection and the
 * store's answer is kept for the test. PX_GARBLE relays the next renewal
 * at once but answers the instance with a reply it cannot use (an integer
 * where the grant's array belongs), keeping the store's for the test. */
enum { PX_RELAY, PX_HOLD, PX_HOLD_RESET, PX_GARBLE };

static struct {
	int lfd;
	char endpoint[64];
	pthread_t acceptor;
	_Atomic int mode;     /* for the next renewal */
	_Atomic int held;     /* a renewal is held */
	_Atomic int let_go;
	_Atomic int answered; /* the store answered it: answer is written */
	char answer[128];
} px;

struct px_conn {
	int cfd, ufd;
};

static bool px_is_renewal(const char *buf, size_t n)
{
	static const char arg[] = "$5\r\nrenew\r\n"; /* the argument, as RESP */

	for (size_t i = 0; i + sizeof(arg) - 1 <= n; i++)
		if (memcmp(buf + i, arg, sizeof(arg) - 1) == 0)
			return true;
	return false;
}

static void px_hold(struct px_conn *pc, const char *req, size_t n, int mode)
{
	ssize_t got;

	if (mode == PX_HOLD_RESET) {
		struct linger lg = { 1, 0 };

		setsockopt(pc->cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(pc->cfd);
		pc->cfd = -1;
	}
	atomic_store(&px.held, 1);
	while (!atomic_load(&px.let_go))
		rh_sleep_ms(1);
	if (send(pc->ufd, req, n, MSG_NOSIGNAL) == (ssize_t)n &&
	    (got = recv(pc->ufd, px.answer, sizeof(px.answer) - 1, 0)) > 0)
		px.answer[got] = '\0';
	atomic_store(&px.answered, 1);
}

static void *px_relay(void *arg)
{
	struct px_conn *pc = arg;
	char b[16384], up[16384];
	struct pollfd p[2] = { { .fd = pc->cfd, .events = POLLIN }, { .fd = pc->ufd, .events = POLLIN } };
	bool garble = false;

	while (poll(p, 2, -1) > 0) {
		ssize_t n;

		if (p[0].revents) {
			n = recv(pc->cfd, b, sizeof(b), 0);
			if (n <= 0)
				break;
			if (px_is_renewal(b, (size_t)n)) {
				int mode = atomic_exchange(&px.mode, PX_RELAY);

				if (mode == PX_GARBLE) {
					garble = true;
				} else if (mode != PX_RELAY) {
					px_hold(pc, b, (size_t)n, mode);
					break;
				}
			}
			if (send(pc->ufd, b, (size_t)n, MSG_NOSIGNAL) != n)
				break;
		}
		if (p[1].revents) {
			n = recv(pc->ufd, up, sizeof(up), 0);
			if (n > 0 && garble) {
				size_t keep = (size_t)n < sizeof(px.answer) ? (size_t)n
									    : sizeof(px.answer) - 1;

				garble = false;
				memcpy(px.answer, up, keep);
				px.answer[keep] = '\0';
				atomic_store(&px.answered, 1);
				n = 4;
				memcpy(up, ":1\r\n", 4);
			}
			if (n <= 0 || send(pc->cfd, up, (size_t)n, MSG_NOSIGNAL) != n)
				break;
		}
	}
	if (pc->cfd >= 0)
		close(pc->cfd);
	close(pc->ufd);
	free(pc);
	return NULL;
}

static void *px_accept(void *arg)
{
	(void)arg;
	for (;;) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)srv.port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int cfd = accept(px.lfd, NULL, NULL);
		struct px_conn *pc;
		pthread_t t;

		if (cfd < 0)
			return NULL;
		pc = malloc(sizeof(*pc));
		pc->cfd = cfd;
		pc->ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (connect(pc->ufd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    pthread_create(&t, NULL, px_relay, pc) != 0) {
			close(cfd);
			close(pc->ufd);
			free(pc);
			continue;
		}
		pthread_detach(t);
	}
}

static void px_start(int mode)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	atomic_store(&px.mode, mode);
	atomic_store(&px.held, 0);
	atomic_store(&px.let_go, 0);
	atomic_store(&px.answered, 0);
	px.answer[0] = '\0';
	px.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(px.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(px.lfd, 16), 0);
	assert_int_equal(getsockname(px.lfd, (struct sockaddr *)&a, &len), 0);
	snprintf(px.endpoint, sizeof(px.endpoint), "redis://127.0.0.1:%d", ntohs(a.sin_port));
	assert_int_equal(pthread_create(&px.acceptor, NULL, px_accept, NULL), 0);
}

/* Deliver the held renewal to the store; the store's answer. */
static const char *px_let_go(void)
{
	uint64_t end = bh_now_ns() + 5 * BH_SEC;

	assert_int_equal(atomic_load(&px.held), 1);
	atomic_store(&px.let_go, 1);
	while (!atomic_load(&px.answered))
		assert_true(bh_now_ns() < end);
	return px.answer;
}

/* Connections relayed now end when their instances close them. */
static void px_stop(void)
{
	shutdown(px.lfd, SHUT_RDWR);
	pthread_join(px.acceptor, NULL);
	close(px.lfd);
}

/* The record of the one instance other than skip's at the store: its id. */
static void other_instance_id(const char *name, const char *skip, char id[40])
{
	redisReply *h = rh_cmd(&srv, "HGETALL {bh:%s}", name);

	id[0] = '\0';
	assert_non_null(h);
	for (size_t i = 0; i < h->elements; i += 2)
		if (strncmp(h->element[i]->str, "i:", 2) == 0 &&
		    (!skip || strcmp(h->element[i]->str + 2, skip) != 0))
			snprintf(id, 40, "%s", h->element[i]->str + 2);
	freeReplyObject(h);
	assert_true(id[0]);
}

/* The instance records at the store. */
static int records_at_store(const char *name)
{
	redisReply *h = rh_cmd(&srv, "HGETALL {bh:%s}", name);
	int n = 0;

	assert_non_null(h);
	for (size_t i = 0; i < h->elements; i += 2)
		n += strncmp(h->element[i]->str, "i:", 2) == 0;
	freeReplyObject(h);
	return n;
}

/* An instance's counted permits at the store. */
static unsigned long long counted_at_store(const char *name, const char *id)
{
	redisReply *r = rh_cmd(&srv, "HGET {bh:%s} i:%s", name, id);
	unsigned long long counted = 0;

	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_int_equal(sscanf(r->str, "%*s %*s %llu", &counted), 1);
	freeReplyObject(r);
	return counted;
}

/* ---- endpoints ----------------------------------------------------------------- */

static void test_endpoint_parse(void **state)
{
	struct bhc_endpoint ep;

	(void)state;
	assert_int_equal(bhc_endpoint_parse("redis://localhost", &ep), 0);
	assert_string_equal(ep.host, "localhost");
	assert_string_equal(ep.port, "6379");
	assert_int_equal(ep.db, 0);
	assert_false(ep.is_unix);
	assert_string_equal(ep.password, "");
	assert_int_equal(bhc_endpoint_parse("redis://alice:s%40cr:t@10.0.0.5:7000/3", &ep), 0);
	assert_string_equal(ep.user, "alice");
	assert_string_equal(ep.password, "s@cr:t");
	assert_string_equal(ep.host, "10.0.0.5");
	assert_string_equal(ep.port, "7000");
	assert_int_equal(ep.db, 3);
	assert_int_equal(bhc_endpoint_parse("redis://:pw@[::1]:6380/", &ep), 0);
	assert_string_equal(ep.user, "");
	assert_string_equal(ep.password, "pw");
	assert_string_equal(ep.host, "::1");
	assert_string_equal(ep.port, "6380");
	/* leading zeros: the number is kept, not the text (which overflowed) */
	assert_int_equal(bhc_endpoint_parse("redis://h:000000016", &ep), 0);
	assert_string_equal(ep.port, "16");
	assert_int_equal(bhc_endpoint_parse("unix:///run/redis.sock", &ep), 0);
	assert_true(ep.is_unix);
	assert_string_equal(ep.path, "/run/redis.sock");
	assert_int_equal(bhc_endpoint_parse("unix://bob:pw@/run/r.sock?db=2", &ep), 0);
	assert_string_equal(ep.user, "bob");
	assert_string_equal(ep.path, "/run/r.sock");
	assert_int_equal(ep.db, 2);

	const char *bad[] = { "", "localhost:6379", "http://x", "redis://", "redis://:6379",
			      "redis://host:0", "redis://host:65536", "redis://host:12x",
			      "redis://host/x", "redis://user@host", "redis://user:@host",
			      "redis://h:1/2/3", "redis://[::1", "redis://[::1]x", "unix://",
			      "unix://relative", "unix:///p?db=x", "unix:///p?nodb=1",
			      "redis://a:%zz@h", "redis://a:%00@h", "redis://a:b%4@h", "redis://h o" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(bhc_endpoint_parse(bad[i], &ep), -EINVAL);
		assert_string_equal(ep.password, ""); /* wiped */
	}
	assert_int_equal(bhc_endpoint_parse("rediss://host", &ep), -EPROTONOSUPPORT);
	assert_int_equal(bhc_endpoint_parse(NULL, &ep), -EINVAL);
}

/* ---- open, shares, destroy ---------------------------------------------------------- */

static void test_single_instance_gets_the_limit(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 5);
	struct bh_config local = { .queue_capacity = 2 };
	bulkhead_t *bh;
	struct bh_cluster_stats s;

	(void)state;
	assert_int_equal(bh_cluster_open(&cc, &local, &bh), 0);
	assert_string_equal(bh_name(bh), name);
	s = cstats(bh);
	assert_int_equal(s.share, 5);
	assert_int_equal(s.granted, 5);
	assert_int_equal(s.global_limit, 5);
	assert_int_equal(s.instances, 1);
	assert_int_equal(s.renewals, 1);
	assert_int_equal(s.renewals_failed, 0);
	assert_int_equal(s.round_trips, 2); /* SCRIPT LOAD, EVALSHA */
	assert_int_equal(s.fallback_active, 0);
	assert_int_equal(s.learning_ns, 0);
	assert_int_equal(s.last_error, 0);
	assert_true(s.lease_expiry_ns > bh_now_ns());
	assert_true(s.lease_expiry_ns <= bh_now_ns() + LEASE);
	for (int i = 0; i < 5; i++)
		assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(stats_of(bh).limit, 5);
	for (int i = 0; i < 5; i++)
		assert_int_equal(bh_release(bh, 1), 0);
	bh_destroy(bh);
}

static void test_local_cap_and_name(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 8);
	struct bh_config local = { .max_concurrent = 3, .name = "pay-local" };
	bulkhead_t *bh;

	(void)state;
	assert_int_equal(bh_cluster_open(&cc, &local, &bh), 0);
	assert_string_equal(bh_name(bh), "pay-local");
	assert_int_equal(cstats(bh).share, 3);
	assert_int_equal(cstats(bh).want, 3);
	bh_destroy(bh);
}

/* A waiter that timed out since the last renewal is demand the share did
 * not meet: the next renewal asks for twice the share, even when nothing
 * was in flight or queued at any of the instance's samples (a manual
 * handle samples only when stepped, and the wait happens between steps). */
static void test_timeout_presses_for_more(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 10);
	struct bh_config local = { .queue_capacity = 1 };
	uint32_t share;
	bulkhead_t *bh;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, &local, &bh), 0);
	step_until_renewals(bh, cstats(bh).renewals + 1); /* idle: asks for 1 */
	assert_int_equal(cstats(bh).want, 1);
	share = (uint32_t)cstats(bh).share;
	assert_true(share >= 1);
	assert_int_equal(bh_try_acquire(bh, share), 0);
	assert_int_equal(bh_acquire(bh, 1, bh_now_ns() + BH_MSEC), -ETIMEDOUT);
	assert_int_equal(bh_release(bh, share), 0);
	assert_int_equal(stats_of(bh).timed_out, 1);
	assert_int_equal(stats_of(bh).rejected, 0);
	step_until_renewals(bh, cstats(bh).renewals + 1);
	assert_int_equal(cstats(bh).want, 2 * share < 10 ? 2 * share : 10);
	bh_destroy(bh);
}

/* An adaptive controller on a cluster handle moves the cap on this
 * instance's share: a cut applies at once, the next renewal asks the store
 * for no more, and the global limit stays. */
static void test_adaptive_moves_the_share_cap(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 10);
	struct bh_adaptive_config ac = { .algo = BH_ADAPTIVE_AIMD, .min_limit = 2,
					 .max_limit = 10, .sources = BH_ADAPTIVE_SRC_MANUAL,
					 .window_ns = BH_MSEC };
	struct bh_adaptive_stats as;
	uint64_t end = bh_now_ns() + 2 * BH_SEC, renewals;
	bulkhead_t *bh;
	bh_adaptive_t *a;

	(void)state;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(cstats(bh).share, 10);
	assert_int_equal(bh_adaptive_attach(bh, &ac, &a), 0);
	do { /* drops: AIMD cuts 10 to 9 when a window closes */
		assert_true(bh_now_ns() < end);
		bh_adaptive_sample(a, 2 * BH_MSEC, BH_DROPPED);
		usleep(200);
		bh_adaptive_stats(a, &as);
	} while (as.limit == 10);
	assert_int_equal(as.limit, 9);
	assert_int_equal(stats_of(bh).limit, 9); /* at once */
	assert_int_equal(cstats(bh).share, 9);
	renewals = cstats(bh).renewals;
	while (cstats(bh).renewals < renewals + 2) { /* the driver thread renews */
		assert_true(bh_now_ns() < end + 3 * BH_SEC);
		usleep(10 * 1000);
	}
	assert_true(cstats(bh).want <= 9);
	assert_int_equal(cstats(bh).share, 9);
	assert_int_equal(cstats(bh).global_limit, 10);
	bh_adaptive_detach(a);
	bh_destroy(bh);
}

/* The cap moves down while a renewal asked under the old one is in flight:
 * the store's answer grants by the old cap, and the instance applies no
 * more than the cap in force when the answer comes. */
static void test_cap_cut_during_renewal_holds(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 10);
	uint64_t end = bh_now_ns() + 5 * BH_SEC, rt, ren;
	struct bhi_layer *l;
	bulkhead_t *bh;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(cstats(bh).share, 10);
	for (;;) { /* one pass at a time until a renewal is sent, not answered */
		assert_true(bh_now_ns() < end);
		rt = cstats(bh).round_trips;
		ren = cstats(bh).renewals;
		assert_int_equal(bh_cluster_step(bh, 0), 0);
		if (cstats(bh).round_trips > rt && cstats(bh).renewals == ren)
			break;
		usleep(1000);
	}
	l = bhi_layer_of(bh);
	assert_int_equal(l->adapt_set(l, 4), 0); /* as a controller would */
	assert_int_equal(cstats(bh).share, 4);
	step_until_renewals(bh, ren + 1); /* the answer: granted by cap 10 */
	assert_int_equal(cstats(bh).granted, 10);
	assert_int_equal(cstats(bh).share, 4);
	assert_int_equal(bh_try_acquire(bh, 4), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, 4), 0);
	bh_destroy(bh);
}

static void test_learning_period_on_a_new_store(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4);
	bulkhead_t *bh;
	struct bh_cluster_stats s;

	(void)state;
	cc.flags = BH_CLUSTER_MANUAL; /* no FRESH_STORE: learn one lease */
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	s = cstats(bh);
	assert_int_equal(s.share, 0);
	assert_int_equal(s.granted, 0);
	assert_true(s.learning_ns > LEASE - 100 * BH_MSEC && s.learning_ns <= LEASE);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	/* Renewals during the learning period still grant nothing new. */
	step_until_renewals(bh, 2);
	assert_int_equal(cstats(bh).share, 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	usleep((useconds_t)(LEASE / BH_USEC));
	step_until_renewals(bh, cstats(bh).renewals + 1);
	assert_int_equal(cstats(bh).learning_ns, 0);
	assert_int_equal(cstats(bh).share, 4);
	assert_int_equal(bh_try_acquire(bh, 4), 0);
	assert_int_equal(bh_release(bh, 4), 0);
	bh_destroy(bh);
}

/* The second instance finds every permit granted: share 0 admits nothing,
 * and the first one's bh_destroy gives its share back at once. */
static void test_share_zero_then_destroy_gives_back(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 3);
	struct bh_config local = { .queue_capacity = 4 };
	bulkhead_t *a, *b;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &a), 0);
	assert_int_equal(cstats(a).share, 3);
	assert_int_equal(bh_cluster_open(&cc, &local, &b), 0);
	assert_int_equal(cstats(b).share, 0);
	assert_int_equal(cstats(b).granted, 0);
	assert_int_equal(cstats(b).instances, 2);
	assert_int_equal(bh_try_acquire(b, 1), -EBUSY);
	assert_int_equal(bh_acquire(b, 1, bh_now_ns() + 20 * BH_MSEC), -ETIMEDOUT);
	assert_int_equal(stats_of(b).in_flight, 0);
	bh_destroy(a);
	/* B's next renewal (due now: it asked with rejections) gets all. */
	step_until_renewals(b, 2);
	assert_int_equal(cstats(b).instances, 1);
	assert_int_equal(cstats(b).share, 3);
	assert_int_equal(bh_try_acquire(b, 3), 0);
	assert_int_equal(bh_release(b, 3), 0);
	bh_destroy(b);
}

/* ---- open errors ---------------------------------------------------------------- */

static void test_open_rejects_bad_config(void **state)
{
	char name[32];
	struct bh_cluster_config good = config(fresh_name(name, sizeof(name)), 4), cc;
	struct bh_config local = { .max_concurrent = BH_LIMIT_MAX + 1 };
	bulkhead_t *bh;

	(void)state;
	open_fails(NULL, NULL, -EINVAL);
	assert_int_equal(bh_cluster_open(&good, NULL, NULL), -EINVAL);
#define BAD(field, value, err) \
	do { cc = good; cc.field = value; open_fails(&cc, NULL, err); } while (0)
	BAD(endpoint, NULL, -EINVAL);
	BAD(endpoint, "redis://", -EINVAL);
	BAD(endpoint, "tcp://127.0.0.1:6379", -EINVAL);
	BAD(endpoint, "rediss://127.0.0.1:6379", -EPROTONOSUPPORT);
	BAD(name, NULL, -EINVAL);
	BAD(name, "", -EINVAL);
	BAD(name, "a{b}", -EINVAL);
	BAD(name, "has space", -EINVAL);
	BAD(name, "0123456789012345678901234567890123456789012345678901234567890123", -EINVAL);
	BAD(global_limit, 0, -EINVAL);
	BAD(global_limit, BH_LIMIT_MAX + 1, -EINVAL);
	BAD(fallback_limit, BH_LIMIT_MAX + 1, -EINVAL);
	BAD(lease_ns, 10 * BH_MSEC, -EINVAL);
	BAD(renew_ns, LEASE, -EINVAL);
	BAD(renew_ns, BH_MSEC - 1, -EINVAL); /* renewals back to back, a backoff of 0 */
	BAD(margin_ns, LEASE, -EINVAL);
	BAD(timeout_ns, LEASE, -EINVAL);
	BAD(flags, 1u << 20, -EINVAL);
#undef BAD
	open_fails(&good, &local, -EINVAL);
	local = (struct bh_config){ .flags = 1u << 30 };
	open_fails(&good, &local, -EINVAL);
	(void)bh;
}

/* A margin so large that adding two coarse ticks to it wraps past 2^64 is
 * refused like any margin at or above the lease: accepted, it would make the
 * instance use its lease past the moment the store may drop it. */
static void test_margin_overflow_refused(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4);
	bulkhead_t *bh = NULL;
	uint64_t t0 = bh_now_ns();
	int r;

	(void)state;
	cc.margin_ns = UINT64_MAX;
	r = bh_cluster_open(&cc, NULL, &bh);
	if (r == 0) {
		printf("accepted: lease_expiry - (open + lease) = %lld ns\n",
		       (long long)(cstats(bh).lease_expiry_ns - (t0 + LEASE)));
		bh_destroy(bh);
	}
	assert_int_equal(r, -EINVAL);
}

static void test_open_unreachable(void **state)
{
	char name[32], ep[200];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4);

	(void)state;
	snprintf(ep, sizeof(ep), "unix://%s/nothing-here.sock", srv.dir);
	cc.endpoint = ep;
	open_fails(&cc, NULL, -EHOSTUNREACH);
	snprintf(ep, sizeof(ep), "redis://127.0.0.1:%d", rh_free_port());
	open_fails(&cc, NULL, -EHOSTUNREACH);
	cc.endpoint = "redis://no-such-host.invalid:6379";
	open_fails(&cc, NULL, -EHOSTUNREACH);
}

/* A server that accepts but never answers: the request times out. */
static void test_open_times_out(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4);

	(void)state;
	cc.timeout_ns = 100 * BH_MSEC;
	assert_int_equal(rh_do(&srv, "CLIENT PAUSE 1000 ALL"), 0);
	open_fails(&cc, NULL, -ETIMEDOUT);
	assert_int_equal(rh_do(&srv, "CLIENT UNPAUSE"), 0);
}

static void test_open_over_tcp(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);
	bulkhead_t *bh;

	(void)state;
	cc.endpoint = srv.tcp_endpoint;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(cstats(bh).share, 2);
	bh_destroy(bh);
}

static void test_open_wrong_type_at_key(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);

	(void)state;
	assert_int_equal(rh_do(&srv, "SET {bh:%s} hello", name), 0);
	open_fails(&cc, NULL, -ENOTUNIQ);
	assert_int_equal(rh_do(&srv, "DEL {bh:%s}", name), 0);
	assert_int_equal(rh_do(&srv, "HSET {bh:%s} owner someone-else", name), 0);
	open_fails(&cc, NULL, -ENOTUNIQ);
	assert_int_equal(rh_do(&srv, "DEL {bh:%s}", name), 0);
}

/* The script's refusals quote the key, and the key holds the limit's name,
 * which is the user's: a name that contains a word of another error
 * (NOPERM, BUSY, BHTYPE, NOSCRIPT) must not change the errno. */
static void test_error_words_in_the_name(void **state)
{
	static const char *const words[] = { "NOPERM", "BUSY", "NOSCRIPT", "BHMISMATCH", "OOM" };
	char name[64];
	bulkhead_t *bh;

	(void)state;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		struct bh_cluster_config cc;

		snprintf(name, sizeof(name), "t%u-%s-%d", ++seq, words[i], (int)getpid());
		cc = config(name, 2);
		assert_int_equal(rh_do(&srv, "SET {bh:%s} hello", name), 0);
		open_fails(&cc, NULL, -ENOTUNIQ);
		assert_int_equal(rh_do(&srv, "DEL {bh:%s}", name), 0);
	}
	/* bh_cluster_set_global_limit on a limit the store lost: -ENOENT */
	snprintf(name, sizeof(name), "t%u-BHTYPE-%d", ++seq, (int)getpid());
	struct bh_cluster_config cc = config(name, 2);

	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(rh_do(&srv, "DEL {bh:%s}", name), 0);
	assert_int_equal(bh_cluster_set_global_limit(bh, 3), -ENOENT);
	bh_destroy(bh);
}

/* A key that is not this layer's, or holds another protocol's state, is
 * refused, and left exactly as it was: Redis keeps a script's writes when it
 * then returns an error, so the script must not clean up fields that look
 * expired (i:, x:, s:) before it has checked whose the key is. */
static void test_refused_key_left_untouched(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);
	redisReply *r;

	(void)state;
	/* someone else's hash, with fields that look like ours and expired */
	assert_int_equal(rh_do(&srv, "HSET {bh:%s} s:session1 42 x:job 7 i:x %s owner app", name,
			       "1 1 1 1"), 0);
	open_fails(&cc, NULL, -ENOTUNIQ);
	r = rh_cmd(&srv, "HLEN {bh:%s}", name);
	assert_int_equal(r->integer, 4);
	freeReplyObject(r);
	assert_int_equal(rh_do(&srv, "DEL {bh:%s}", name), 0);
	/* another protocol's state, with an instance whose lease ran out */
	assert_int_equal(rh_do(&srv, "HSET {bh:%s} p 2 L 2 T 600000 E 1 U 1 i:x %s s:x 3", name,
			       "1 1 1 1"), 0);
	open_fails(&cc, NULL, -EPROTONOSUPPORT);
	r = rh_cmd(&srv, "HLEN {bh:%s}", name);
	assert_int_equal(r->integer, 7);
	freeReplyObject(r);
	assert_int_equal(rh_do(&srv, "DEL {bh:%s}", name), 0);
}

/* The error named name is in bh_cluster_open(3)'s ERRORS. */
static void assert_documented(const char *name)
{
	char path[512], *page, *errors, *end;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/docs/man/bh_cluster_open.3", BH_TOP_SRCDIR);
	f = fopen(path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	page = calloc(1, (size_t)n + 1);
	assert_int_equal(fread(page, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	errors = strstr(page, ".SH ERRORS");
	assert_non_null(errors);
	end = strstr(errors, ".SH NOTES");
	assert_non_null(end);
	*end = '\0';
	printf("%s: %s\n", name, strstr(errors, name) ? "documented" : "NOT documented");
	assert_non_null(strstr(errors, name));
	free(page);
}

/* The store as a read-only replica (the old primary after a failover),
 * then out of memory: the open fails, and says why in an errno its page
 * lists; so does an endpoint with a host too long to keep. */
static void test_open_errors_documented(void **state)
{
	char name[32], ep[600], replicaof[64];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);

	(void)state;
	memset(ep, 'h', sizeof(ep));
	memcpy(ep, "redis://", 8);
	ep[sizeof(ep) - 1] = '\0';
	cc.endpoint = ep;
	open_fails(&cc, NULL, -ENAMETOOLONG);
	assert_documented("ENAMETOOLONG");
	cc.endpoint = srv.endpoint;
	snprintf(replicaof, sizeof(replicaof), "REPLICAOF 127.0.0.1 %d", rh_free_port());
	assert_int_equal(rh_do(&srv, replicaof), 0);
	open_fails(&cc, NULL, -EROFS);
	assert_documented("EROFS");
	assert_int_equal(rh_do(&srv, "REPLICAOF NO ONE"), 0);
	assert_int_equal(rh_do(&srv, "CONFIG SET maxmemory 1"), 0);
	open_fails(&cc, NULL, -ENOSPC);
	assert_documented("ENOSPC");
	assert_int_equal(rh_do(&srv, "CONFIG SET maxmemory 0"), 0);
}

static int store_teardown(void **state)
{
	(void)state;
	rh_do(&srv, "REPLICAOF NO ONE");
	rh_do(&srv, "CONFIG SET maxmemory 0");
	return 0;
}

static void test_open_protocol_mismatch(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);
	bulkhead_t *bh;

	(void)state;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	bh_destroy(bh);
	assert_int_equal(rh_do(&srv, "HSET {bh:%s} p 2", name), 0);
	open_fails(&cc, NULL, -EPROTONOSUPPORT);
}

static void test_open_limit_and_lease_mismatch(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 6), other;
	bulkhead_t *a, *b;

	(void)state;
	assert_int_equal(bh_cluster_open(&cc, NULL, &a), 0);
	other = cc;
	other.global_limit = 7;
	open_fails(&other, NULL, -EEXIST);
	other.flags |= BH_CLUSTER_ADOPT_LIMIT;
	assert_int_equal(bh_cluster_open(&other, NULL, &b), 0);
	assert_int_equal(cstats(b).global_limit, 6);
	bh_destroy(b);
	other = cc;
	other.lease_ns = LEASE + BH_MSEC;
	other.flags |= BH_CLUSTER_ADOPT_LIMIT; /* adopts the limit, never the lease */
	open_fails(&other, NULL, -EEXIST);
	bh_destroy(a);
}

static void test_start_in_fallback(void **state)
{
	char name[32], ep[200];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4);
	bulkhead_t *bh;
	struct bh_cluster_stats s;

	(void)state;
	snprintf(ep, sizeof(ep), "unix://%s/later.sock", srv.dir);
	cc.endpoint = ep;
	cc.fallback_limit = 2;
	cc.flags |= BH_CLUSTER_START_FALLBACK | BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	s = cstats(bh);
	assert_int_equal(s.fallback_active, 1);
	assert_int_equal(s.fallbacks, 1);
	assert_int_equal(s.share, 2);
	assert_int_equal(s.renewals, 0);
	assert_int_equal(s.renewals_failed, 1);
	assert_int_equal(s.last_error, -EHOSTUNREACH);
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(cstats(bh).unaccounted, 2); /* not counted anywhere */
	assert_int_equal(cstats(bh).over_admission, 2);
	bh_cluster_step(bh, 0);
	/* The store appears at that path: the instance joins, with its two
	 * fallback permits still in flight counted at the store. */
	assert_int_equal(symlink(srv.sock, ep + 7), 0);
	step_until_renewals(bh, 1);
	s = cstats(bh);
	assert_int_equal(s.fallback_active, 0);
	assert_int_equal(s.share, 4);
	assert_int_equal(s.over_admission, 0);
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(bh_release(bh, 4), 0);
	unlink(ep + 7);
	bh_destroy(bh);
	/* Without the option, unreachable is an error; a protocol error is
	 * one even with it. */
	cc.flags &= ~BH_CLUSTER_START_FALLBACK;
	open_fails(&cc, NULL, -EHOSTUNREACH);
}

/* ---- AUTH ------------------------------------------------------------------------ */

static void test_auth_password_and_acl_user(void **state)
{
	char name[32], ep[300];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 3);
	bulkhead_t *bh;

	(void)state;
	/* What docs/cluster.md asks for: the scripting commands, the ones
	 * the script calls, the limits' keys. */
	assert_int_equal(rh_do(&srv, "ACL SETUSER bhuser on >bh-user-pw ~{bh:*} +evalsha "
				     "+script|load +type +time +hgetall +hset +hdel +pexpire"),
			 0);
	assert_int_equal(rh_do(&srv, "ACL SETUSER nohset on >nohset-pw ~{bh:*} +evalsha "
				     "+script|load +type +time +hgetall +hdel +pexpire"),
			 0);
	assert_int_equal(rh_do(&srv, "ACL SETUSER weak on >weak-pw ~other:* +@all"), 0);
	assert_int_equal(rh_do(&srv, "CONFIG SET requirepass s3cret-default"), 0);

	cc.endpoint = ep;
	snprintf(ep, sizeof(ep), "unix://%s", srv.sock);
	open_fails(&cc, NULL, -EACCES); /* NOAUTH */
	snprintf(ep, sizeof(ep), "unix://:wrong@%s", srv.sock);
	open_fails(&cc, NULL, -EACCES);
	snprintf(ep, sizeof(ep), "unix://bhuser:wrong@%s", srv.sock);
	open_fails(&cc, NULL, -EACCES);
	snprintf(ep, sizeof(ep), "unix://weak:weak-pw@%s", srv.sock); /* no right to the key */
	open_fails(&cc, NULL, -EACCES);
	snprintf(ep, sizeof(ep), "unix://nohset:nohset-pw@%s", srv.sock); /* nor to a command */
	open_fails(&cc, NULL, -EACCES);

	snprintf(ep, sizeof(ep), "unix://:s3cret-default@%s", srv.sock);
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(cstats(bh).round_trips, 3); /* AUTH, SCRIPT LOAD, EVALSHA */
	bh_destroy(bh);
	snprintf(ep, sizeof(ep), "unix://bhuser:bh-user-pw@%s?db=0", srv.sock);
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(cstats(bh).share, 3);
	bh_destroy(bh);
}

/* Leave the server as the other tests expect it, even after a failure: the
 * test side is the default user, which may now have a password. */
static int auth_teardown(void **state)
{
	redisContext *c = rh_connect(&srv);
	redisReply *r;

	(void)state;
	if (!c)
		return -1;
	r = redisCommand(c, "AUTH s3cret-default");
	if (r)
		freeReplyObject(r);
	r = redisCommand(c, "CONFIG SET requirepass %s", "");
	if (r)
		freeReplyObject(r);
	r = redisCommand(c, "ACL DELUSER bhuser weak nohset");
	if (r)
		freeReplyObject(r);
	redisFree(c);
	return rh_do(&srv, "PING");
}

static void test_select_db(void **state)
{
	char name[32], ep[300];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);
	bulkhead_t *bh;
	redisReply *r;

	(void)state;
	cc.endpoint = ep;
	snprintf(ep, sizeof(ep), "unix://%s?db=99", srv.sock);
	open_fails(&cc, NULL, -EINVAL); /* out of range at the server */
	snprintf(ep, sizeof(ep), "unix://%s?db=3", srv.sock);
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	r = rh_cmd(&srv, "EXISTS {bh:%s}", name);
	assert_int_equal(r->integer, 0); /* not in db 0 */
	freeReplyObject(r);
	bh_destroy(bh);
}

/* ---- the lease on the admission path, the caller's loop ------------------------ */

/* Nobody renews: admission stops on its own when the lease runs out,
 * although every permit is free and no thread of the layer ran. */
static void test_lease_checked_on_admission(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);
	bulkhead_t *bh;
	uint64_t expiry;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	expiry = cstats(bh).lease_expiry_ns;
	assert_true(expiry >= bh_now_ns() + LEASE - LEASE / 10 - 200 * BH_MSEC); /* 200: slack */
	assert_int_equal(bh_try_acquire(bh, 1), 0);
	assert_int_equal(bh_release(bh, 1), 0);
	while (bh_now_ns() < expiry)
		usleep(1000);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	assert_int_equal(stats_of(bh).in_flight, 0);
	/* The caller's step renews: admission resumes. */
	bh_cluster_step(bh, 0);
	step_until_renewals(bh, 2);
	assert_int_equal(bh_try_acquire(bh, 2), 0);
	assert_int_equal(bh_release(bh, 2), 0);
	bh_destroy(bh);
}

static void test_manual_fd_polls_readable(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);
	bulkhead_t *bh, *plain = make_bh(1, 0, 0);
	struct pollfd p;
	int renewals = 0;
	uint64_t end;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	cc.renew_ns = 100 * BH_MSEC;
	assert_int_equal(bh_cluster_fd(plain), -EINVAL);
	assert_int_equal(bh_cluster_step(plain, 0), -EINVAL);
	assert_int_equal(bh_cluster_stats(plain, &(struct bh_cluster_stats){ 0 }), -EINVAL);
	bh_destroy(plain);
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	p.fd = bh_cluster_fd(bh);
	p.events = POLLIN;
	assert_true(p.fd >= 0);
	/* An event loop: poll the fd, step when it is readable. */
	end = bh_now_ns() + 2 * BH_SEC;
	while (cstats(bh).renewals < 4) {
		assert_true(bh_now_ns() < end);
		if (poll(&p, 1, 500) == 1)
			assert_int_equal(bh_cluster_step(bh, 0), 0);
		renewals++;
	}
	/* It woke for timers and the store's answers, not in a busy loop. */
	assert_true(renewals < 100);
	assert_int_equal(cstats(bh).renewals_failed, 0);
	bh_destroy(bh);
}

/* The background thread renews by itself. */
static void test_thread_renews(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);
	bulkhead_t *bh;
	int t = threads();
	uint64_t end;

	(void)state;
	cc.renew_ns = 100 * BH_MSEC;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(threads(), t + 1);
	/* Nobody steps it: six renewals come from the thread alone (0.6 s
	 * unloaded; a stalled machine gets 10 s, since each renewal is timed
	 * from the one before). */
	end = bh_now_ns() + 10 * BH_SEC;
	while (cstats(bh).renewals < 6) {
		assert_true(bh_now_ns() < end);
		usleep(10000);
	}
	assert_int_equal(bh_try_acquire(bh, 2), 0); /* the lease is fresh */
	assert_int_equal(bh_release(bh, 2), 0);
	bh_destroy(bh);
	assert_int_equal(threads(), t);
}

/* ---- the store gone: fallback, rejoin, a store restarted empty --------------- */

/* Step a manual handle until cond holds (a few seconds at most). */
#define STEP_UNTIL(bh, cond) \
	do { \
		uint64_t end_ = bh_now_ns() + 5 * BH_SEC; \
		while (!(cond)) { \
			assert_true(bh_now_ns() < end_); \
			bh_cluster_step(bh, bh_now_ns() + 10 * BH_MSEC); \
		} \
	} while (0)

/* The same for two manual handles, stepped in turn. */
#define STEP2_UNTIL(a, b, cond) \
	do { \
		uint64_t end_ = bh_now_ns() + 5 * BH_SEC; \
		while (!(cond)) { \
			assert_true(bh_now_ns() < end_); \
			bh_cluster_step(a, bh_now_ns() + 5 * BH_MSEC); \
			bh_cluster_step(b, bh_now_ns() + 5 * BH_MSEC); \
		} \
	} while (0)

/* The store stops answering: the instance keeps its share until the lease
 * runs out, then runs on its fallback limit, not counted at the store, and
 * rejoins when the store answers again. */
static void fallback_and_rejoin(uint32_t fallback)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 3);
	bulkhead_t *bh;
	struct bh_cluster_stats s;
	uint64_t expiry;

	cc.flags |= BH_CLUSTER_MANUAL;
	cc.fallback_limit = fallback;
	cc.timeout_ns = 100 * BH_MSEC;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(bh_try_acquire(bh, 1), 0); /* held across the outage */
	expiry = cstats(bh).lease_expiry_ns;
	redis_signal(&srv, SIGSTOP);
	/* Renewals fail, but the lease is still good: 3 permits. */
	STEP_UNTIL(bh, cstats(bh).renewals_failed >= 1);
	if (bh_now_ns() < expiry - 20 * BH_MSEC) {
		int r = bh_try_acquire(bh, 2);

		if (r == 0)
			assert_int_equal(bh_release(bh, 2), 0);
		else /* only a preemption past the lease's end may refuse it */
			assert_true(r == -EBUSY && bh_now_ns() >= expiry - 20 * BH_MSEC);
	}
	STEP_UNTIL(bh, cstats(bh).fallback_active == 1);
	assert_true(bh_now_ns() >= expiry);
	s = cstats(bh);
	assert_int_equal(s.share, fallback);
	assert_int_equal(s.fallbacks, 1);
	assert_int_equal(s.lease_expiry_ns, 0);
	assert_true(s.last_error == -ETIMEDOUT || s.last_error == -EHOSTUNREACH);
	/* Held and fallback permits are unaccounted, and reported so. */
	if (fallback)
		assert_int_equal(bh_try_acquire(bh, fallback - 1), 0);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	bh_cluster_step(bh, 0); /* samples */
	s = cstats(bh);
	assert_int_equal(s.unaccounted, fallback ? fallback : 1);
	assert_int_equal(s.over_admission, s.unaccounted);
	assert_int_equal(s.over_admission_max, s.unaccounted);
	redis_signal(&srv, SIGCONT);
	STEP_UNTIL(bh, cstats(bh).fallback_active == 0);
	s = cstats(bh);
	assert_int_equal(s.last_error, 0);
	assert_int_equal(s.share, 3);
	assert_int_equal(s.unaccounted, 0);
	assert_int_equal(s.over_admission, 0);
	assert_true(s.lease_expiry_ns > bh_now_ns());
	assert_int_equal(bh_release(bh, fallback ? fallback : 1), 0);
	bh_destroy(bh);
}

static void test_fallback_and_rejoin(void **state)
{
	(void)state;
	fallback_and_rejoin(2);
}

static void test_fallback_zero_admits_nothing(void **state)
{
	(void)state;
	fallback_and_rejoin(0);
}

static int cont_teardown(void **state)
{
	(void)state;
	redis_signal(&srv, SIGCONT);
	return 0;
}

/* The store restarts empty while A and B hold shares: the first renewal
 * recreates the state in a learning period; every instance keeps at most
 * what it enforced, and a newcomer gets nothing until a lease passed, even
 * though it says the store is fresh (the state was created by an instance
 * that remembers the old store). */
static void test_store_restart_empty_learns(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 6);
	bulkhead_t *a, *b, *c;
	uint64_t sa, sb;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &a), 0);
	assert_int_equal(bh_try_acquire(a, 6), 0); /* A is busy */
	assert_int_equal(bh_try_acquire(a, 1), -EBUSY);
	assert_int_equal(bh_cluster_open(&cc, NULL, &b), 0);
	assert_int_equal(cstats(b).share, 0);
	assert_int_equal(bh_try_acquire(b, 1), -EBUSY); /* B wants some */
	assert_int_equal(bh_release(a, 3), 0);           /* A now uses 3 */
	/* B is served once A's renewal reported the 3 released. */
	STEP2_UNTIL(a, b, cstats(b).granted >= 1);
	assert_int_equal(bh_try_acquire(b, 1), 0);
	sa = cstats(a).share;
	sb = cstats(b).share;
	assert_true(sa >= 3 && sa + sb <= 6);

	redis_kill(&srv, SIGKILL);
	assert_int_equal(redis_restart(&srv), 0);
	STEP2_UNTIL(a, b, cstats(a).store_resets == 1 && cstats(a).last_error == 0 &&
				  cstats(b).store_resets == 1 && cstats(b).last_error == 0);
	assert_true(cstats(a).learning_ns > 0);
	assert_true(cstats(b).learning_ns > 0);
	assert_true(cstats(a).share <= sa);
	assert_true(cstats(b).share <= sb);
	assert_int_equal(bh_cluster_open(&cc, NULL, &c), 0);
	assert_int_equal(cstats(c).share, 0);
	assert_true(cstats(c).learning_ns > 0);
	assert_int_equal(cstats(c).store_resets, 0);
	assert_int_equal(bh_try_acquire(c, 1), -EBUSY);
	/* A and B keep renewing through the learning period; afterwards the
	 * newcomer is served. */
	{
		uint64_t end = bh_now_ns() + LEASE + 100 * BH_MSEC;

		while (bh_now_ns() < end) {
			bh_cluster_step(a, bh_now_ns() + 5 * BH_MSEC);
			bh_cluster_step(b, bh_now_ns() + 5 * BH_MSEC);
			bh_cluster_step(c, bh_now_ns() + 5 * BH_MSEC);
			assert_true(cstats(a).share + cstats(b).share + cstats(c).share <= 6);
			bh_try_acquire(c, 1) == 0 ? (void)bh_release(c, 1) : (void)0;
		}
	}
	STEP_UNTIL(c, cstats(c).learning_ns == 0 && cstats(c).share > 0);
	assert_int_equal(bh_release(a, 3), 0);
	assert_int_equal(bh_release(b, 1), 0);
	bh_destroy(a);
	bh_destroy(b);
	bh_destroy(c);
}

/* The store closed this instance's idle connection (its idle timeout, a
 * proxy, a restart) while the process was stopped past its lease. The first
 * renewal after resuming finds the connection dead (EPIPE, ECONNRESET)
 * though the store answers: that says nothing about the store, so the
 * request reconnects and goes again, and no fallback starts. */
static void test_idle_connection_closed_no_fallback(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 3);
	bulkhead_t *bh;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	cc.fallback_limit = 2;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(rh_do(&srv, "CLIENT KILL TYPE normal SKIPME yes"), 0);
	usleep((useconds_t)(LEASE / BH_USEC) + 50000); /* stopped past the lease */
	STEP_UNTIL(bh, cstats(bh).renewals >= 2 || cstats(bh).fallbacks > 0);
	assert_int_equal(cstats(bh).fallbacks, 0);
	STEP_UNTIL(bh, cstats(bh).renewals >= 2);
	assert_int_equal(cstats(bh).share, 3);
	bh_destroy(bh);
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * BH_SEC + (uint64_t)ts.tv_nsec;
}

/* A prefork parent keeps its cluster bulkhead and forks workers, which
 * inherit the store's socket. A renewal that times out closes the socket in
 * the parent while it is in the epoll set; the file stays open in the child,
 * so epoll keeps the registration (epoll(7), Q6) and the late answer makes
 * it readable for good. One-shot registrations wake the renewal thread once
 * for it, not on every epoll_wait: it must not spin. */
static void test_fork_then_dropped_request_no_spin(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 3);
	bulkhead_t *bh;
	pid_t child;
	uint64_t c0, c1, r0;

	(void)state;
	cc.renew_ns = 100 * BH_MSEC;
	cc.timeout_ns = 50 * BH_MSEC;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		pause(); /* a worker: holds the inherited fds */
		_exit(0);
	}
	/* The store stalls past the timeout: renewals in flight are dropped;
	 * it answers them afterwards, on sockets only the child still has. */
	assert_int_equal(rh_do(&srv, "DEBUG SLEEP 0.3"), 0);
	r0 = cstats(bh).renewals;
	while (cstats(bh).renewals < r0 + 2)
		usleep(10000);
	c0 = cpu_ns();
	usleep(500 * 1000);
	c1 = cpu_ns();
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	printf("cpu over 500 ms: %llu ms, renewals_failed %llu\n",
	       (unsigned long long)((c1 - c0) / BH_MSEC),
	       (unsigned long long)cstats(bh).renewals_failed);
	assert_true(cstats(bh).renewals_failed >= 1);
	assert_true(c1 - c0 < 100 * BH_MSEC);
	bh_destroy(bh);
}

/* A prefork parent keeps its cluster bulkhead and forks. The child's copy
 * is closed at the fork: it would admit on the parent's share (the store
 * counts it once), and its bh_destroy (a cleanup path, an atexit handler)
 * must neither stop the parent's renewals nor give the parent's lease back
 * over the parent's connection. */
static void test_fork_child_copy_closed(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 3);
	bulkhead_t *bh;
	redisReply *h;
	pid_t child;
	uint64_t r0, end;
	int st, recs = 0;

	(void)state;
	cc.renew_ns = 100 * BH_MSEC;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		struct bh_cluster_stats cs;
		int ok = bh_try_acquire(bh, 1) == -ESHUTDOWN &&
			 bh_acquire(bh, 1, bh_now_ns() + 10 * BH_MSEC) == -ESHUTDOWN &&
			 bh_cluster_set_global_limit(bh, 5) == -ESHUTDOWN;

		/* its statistics say what it admits: nothing, on no lease */
		if (bh_cluster_stats(bh, &cs) != 0 || cs.share != 0 || cs.lease_expiry_ns != 0)
			ok = 0;

		alarm(2); /* a destroy that waits for the parent's thread hangs */
		bh_destroy(bh);
		_exit(ok ? 0 : 3);
	}
	assert_int_equal(waitpid(child, &st, 0), child);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	h = rh_cmd(&srv, "HGETALL {bh:%s}", name);
	assert_non_null(h);
	for (size_t i = 0; i < h->elements; i += 2)
		recs += strncmp(h->element[i]->str, "i:", 2) == 0;
	freeReplyObject(h);
	assert_int_equal(recs, 1); /* the parent's record is still there */
	assert_int_equal(bh_try_acquire(bh, 3), 0);
	assert_int_equal(bh_release(bh, 3), 0);
	r0 = cstats(bh).renewals;
	end = bh_now_ns() + LEASE;
	while (bh_now_ns() < end && cstats(bh).renewals < r0 + 2)
		usleep(10000);
	assert_true(cstats(bh).renewals >= r0 + 2); /* the parent still renews */
	bh_destroy(bh);
}

struct stepper {
	bulkhead_t *bh;
	uint64_t until;
};

static void *step_long(void *arg)
{
	struct stepper *st = arg;

	bh_cluster_step(st->bh, st->until);
	return NULL;
}

/* bh_cluster_step waits for events (up to deadline_ns) without the layer's
 * lock: an adaptive controller moving the share's cap takes that lock from
 * the sampling thread (bh_release with BH_TRACK_HOLD, bh_adaptive_sample),
 * which must not block for the step's whole wait. */
static void test_step_waits_without_lock(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 10);
	struct bh_adaptive_config ac = { .algo = BH_ADAPTIVE_AIMD, .min_limit = 1,
					 .max_limit = 10, .sources = BH_ADAPTIVE_SRC_MANUAL,
					 .window_ns = BH_MSEC };
	struct stepper st;
	pthread_t t;
	bulkhead_t *bh;
	bh_adaptive_t *a;
	uint64_t worst = 0, end;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(bh_adaptive_attach(bh, &ac, &a), 0);
	st.bh = bh;
	st.until = bh_now_ns() + 400 * BH_MSEC;
	assert_int_equal(pthread_create(&t, NULL, step_long, &st), 0);
	usleep(20000);
	end = bh_now_ns() + 300 * BH_MSEC;
	while (bh_now_ns() < end) {
		uint64_t t0 = bh_now_ns();

		bh_adaptive_sample(a, 2 * BH_MSEC, BH_DROPPED);
		if (bh_now_ns() - t0 > worst)
			worst = bh_now_ns() - t0;
		usleep(200);
	}
	pthread_join(t, NULL);
	printf("longest bh_adaptive_sample: %llu ms\n", (unsigned long long)(worst / BH_MSEC));
	bh_adaptive_detach(a);
	bh_destroy(bh);
	assert_true(worst < 50 * BH_MSEC);
}

/* ---- a host name whose resolution the test holds up ---------------------- */

/* The library resolves an endpoint's host name with getaddrinfo(3) at each
 * connect; this definition takes its place in the test program. HELD_HOST
 * stands for the loopback address, and while dns_hold is set its lookups
 * wait (up to 5 s), as a slow resolver would. */
#define HELD_HOST "bh-held.invalid"

static _Atomic int dns_hold, dns_waiting;

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		struct addrinfo **res)
{
	int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
	uint64_t end = bh_now_ns() + 5 * BH_SEC;

	*(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
	if (node && strcmp(node, HELD_HOST) == 0) {
		atomic_fetch_add(&dns_waiting, 1);
		while (atomic_load(&dns_hold) && bh_now_ns() < end)
			rh_sleep_ms(1);
		atomic_fetch_sub(&dns_waiting, 1);
		node = "127.0.0.1";
	}
	return real(node, service, hints, res);
}

struct holder {
	bulkhead_t *bh;
	_Atomic int held, go;
};

/* Holds one permit on its own thread (its hold never ends meanwhile). */
static void *hold_one(void *arg)
{
	struct holder *h = arg;

	assert_int_equal(bh_try_acquire(h->bh, 1), 0);
	atomic_store(&h->held, 1);
	while (!atomic_load(&h->go))
		rh_sleep_ms(1);
	bh_release(h->bh, 1);
	return NULL;
}

/* No caller of bh_acquire/bh_release ever waits for the network: a
 * release whose hold time closes an adaptive controller's window moves
 * the share's cap while the driver, reconnecting to an endpoint given by
 * host name, waits in getaddrinfo. The release must return at once, and
 * the cap must change meanwhile. */
static void test_release_never_waits_for_dns(void **state)
{
	char name[32], ep[64];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 10);
	struct bh_config local = { .flags = BH_TRACK_HOLD };
	struct bh_adaptive_config ac = { .algo = BH_ADAPTIVE_AIMD, .min_limit = 1,
					 .max_limit = 10, .initial_limit = 2,
					 .window_ns = BH_MSEC };
	struct holder h = { 0 };
	struct bh_adaptive_stats as;
	struct stepper st;
	pthread_t t, ht;
	bulkhead_t *bh;
	bh_adaptive_t *a;
	uint64_t worst = 0, end;
	int waiting;

	(void)state;
	snprintf(ep, sizeof(ep), "redis://" HELD_HOST ":%d", srv.port);
	cc.endpoint = ep;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, &local, &bh), 0);
	assert_int_equal(bh_adaptive_attach(bh, &ac, &a), 0);
	h.bh = bh;
	assert_int_equal(pthread_create(&ht, NULL, hold_one, &h), 0);
	while (!atomic_load(&h.held))
		rh_sleep_ms(1);
	/* the next renewal reconnects, and its lookup waits */
	assert_int_equal(rh_do(&srv, "CLIENT KILL TYPE normal SKIPME yes"), 0);
	atomic_store(&dns_hold, 1);
	st.bh = bh;
	st.until = bh_now_ns() + 3 * BH_SEC;
	assert_int_equal(pthread_create(&t, NULL, step_long, &st), 0);
	end = bh_now_ns() + 2 * BH_SEC;
	while (!atomic_load(&dns_waiting))
		assert_true(bh_now_ns() < end);
	/* releases end holds: AIMD grows 2 to 3 when a window closes */
	end = bh_now_ns() + BH_SEC;
	do {
		uint64_t t0;

		assert_int_equal(bh_try_acquire(bh, 1), 0);
		usleep(300); /* above the controller's shortest round trip */
		t0 = bh_now_ns();
		assert_int_equal(bh_release(bh, 1), 0);
		if (bh_now_ns() - t0 > worst)
			worst = bh_now_ns() - t0;
		bh_adaptive_stats(a, &as);
	} while (as.limit == 2 && bh_now_ns() < end);
	waiting = atomic_load(&dns_waiting);
	atomic_store(&dns_hold, 0);
	pthread_join(t, NULL);
	atomic_store(&h.go, 1);
	pthread_join(ht, NULL);
	printf("longest bh_release: %llu us\n", (unsigned long long)(worst / BH_USEC));
	assert_true(worst < 100 * BH_MSEC);
	assert_int_equal(as.limit, 3);
	assert_int_equal(waiting, 1); /* the change came while the lookup waited */
	bh_adaptive_detach(a);
	bh_destroy(bh);
}

/* bh_cluster_open, bh_cluster_step, bh_cluster_set_global_limit and
 * bh_destroy on a cluster bulkhead are no cancellation points, though they
 * connect, poll, read and join: a thread with a cancellation request
 * pending runs each to its end (unwound inside, it would leave the layer's
 * lock held, a handle leaked, a share registered at the store). */
enum { CALL_OPEN, CALL_STEP, CALL_SET_LIMIT, CALL_DESTROY };

struct cancel_call {
	int what, r;
	bool returned;
	bulkhead_t *bh;
	const struct bh_cluster_config *cc;
};

static void *call_cancel_pending(void *arg)
{
	struct cancel_call *cl = arg;

	pthread_cancel(pthread_self()); /* deferred: acted on at a cancellation point */
	switch (cl->what) {
	case CALL_OPEN:
		cl->r = bh_cluster_open(cl->cc, NULL, &cl->bh);
		break;
	case CALL_STEP:
		cl->r = bh_cluster_step(cl->bh, bh_now_ns() + 20 * BH_MSEC);
		break;
	case CALL_SET_LIMIT:
		cl->r = bh_cluster_set_global_limit(cl->bh, 5);
		break;
	case CALL_DESTROY:
		bh_destroy(cl->bh);
		cl->r = 0;
		break;
	}
	cl->returned = true;
	return NULL;
}

static void call_with_cancel_pending(struct cancel_call *cl, int what)
{
	pthread_t t;
	void *res = NULL;

	cl->what = what;
	cl->returned = false;
	assert_int_equal(pthread_create(&t, NULL, call_cancel_pending, cl), 0);
	assert_int_equal(pthread_join(t, &res), 0);
	assert_true(cl->returned);
	assert_ptr_equal(res, NULL);
	assert_int_equal(cl->r, 0);
}

static void test_not_cancellation_points(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4);
	struct cancel_call cl = { .cc = &cc };

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	call_with_cancel_pending(&cl, CALL_OPEN);
	assert_int_equal(cstats(cl.bh).share, 4);
	call_with_cancel_pending(&cl, CALL_STEP);
	assert_int_equal(bh_cluster_step(cl.bh, 0), 0); /* the lock is free */
	call_with_cancel_pending(&cl, CALL_SET_LIMIT);
	call_with_cancel_pending(&cl, CALL_DESTROY);
	/* with the background thread, which destroy stops and joins */
	cc.flags &= ~BH_CLUSTER_MANUAL;
	cc.global_limit = 5;
	assert_int_equal(bh_cluster_open(&cc, NULL, &cl.bh), 0);
	call_with_cancel_pending(&cl, CALL_DESTROY);
	assert_int_equal(records_at_store(name), 0);
}

/* ---- the store's side ------------------------------------------------------------- */

static void test_noscript_reloads(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);
	bulkhead_t *bh;
	struct bh_cluster_stats s;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(rh_do(&srv, "SCRIPT FLUSH"), 0);
	step_until_renewals(bh, 2);
	s = cstats(bh);
	assert_int_equal(s.renewals_failed, 0);
	/* EVALSHA (NOSCRIPT), then SCRIPT LOAD + EVALSHA in one write. */
	assert_int_equal(s.round_trips, 2 + 3);
	step_until_renewals(bh, 3);
	assert_int_equal(cstats(bh).round_trips, 2 + 3 + 1);
	bh_destroy(bh);
}

/* The store keeps time: an instance's expiry is the store's TIME plus the
 * lease, whatever the instance's clock says. */
static void test_expiry_on_store_clock(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);
	bulkhead_t *bh;
	redisReply *t, *h;
	unsigned long long exp = 0, now;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	t = rh_cmd(&srv, "TIME");
	h = rh_cmd(&srv, "HGETALL {bh:%s}", name);
	now = strtoull(t->element[0]->str, NULL, 10) * 1000000 + strtoull(t->element[1]->str, NULL, 10);
	for (size_t i = 0; i < h->elements; i += 2)
		if (strncmp(h->element[i]->str, "i:", 2) == 0)
			exp = strtoull(h->element[i + 1]->str, NULL, 10);
	assert_true(exp > now && exp <= now + LEASE / BH_USEC);
	assert_true(exp + 400000 > now + LEASE / BH_USEC); /* 400 ms: a loaded machine's slack */
	freeReplyObject(t);
	freeReplyObject(h);
	bh_destroy(bh);
	/* bh_destroy gave the lease back: no instance is left. */
	h = rh_cmd(&srv, "HGETALL {bh:%s}", name);
	for (size_t i = 0; i < h->elements; i += 2)
		assert_true(strncmp(h->element[i]->str, "i:", 2) != 0);
	freeReplyObject(h);
}

/* round_trips counts the store commands that went out, each once: not one
 * queued on a connection the server had closed (the renewal then goes out
 * on a new one), and every one sent by a bh_cluster_set_global_limit that
 * failed. */
static void test_round_trips_exact(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4);
	bulkhead_t *bh;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(cstats(bh).round_trips, 2); /* SCRIPT LOAD, EVALSHA */
	/* The server closes the idle connection (unix socket: the next send
	 * fails with EPIPE, nothing goes out); the renewal goes on a new one. */
	assert_int_equal(rh_do(&srv, "CLIENT KILL TYPE normal SKIPME yes"), 0);
	step_until_renewals(bh, 2);
	assert_int_equal(cstats(bh).reconnects, 1);
	assert_int_equal(cstats(bh).renewals_failed, 0);
	assert_int_equal(cstats(bh).round_trips, 2 + 1);
	/* A limit change the store refuses: its SCRIPT LOAD and EVALSHA went out. */
	assert_int_equal(rh_do(&srv, "DEL {bh:%s}", name), 0);
	assert_int_equal(bh_cluster_set_global_limit(bh, 6), -ENOENT);
	assert_int_equal(cstats(bh).round_trips, 2 + 1 + 2);
	bh_destroy(bh);
}

static void test_set_global_limit(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4), other;
	bulkhead_t *a, *b;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &a), 0);
	assert_int_equal(bh_cluster_set_global_limit(a, 0), -EINVAL);
	assert_int_equal(bh_cluster_set_global_limit(a, 9), 0);
	/* A new instance must now say 9, or adopt. */
	open_fails(&cc, NULL, -EEXIST);
	other = cc;
	other.global_limit = 9;
	assert_int_equal(bh_cluster_open(&other, NULL, &b), 0);
	assert_int_equal(cstats(b).global_limit, 9);
	bh_destroy(b);
	step_until_renewals(a, 2);
	assert_int_equal(cstats(a).global_limit, 9);
	assert_int_equal(cstats(a).share, 9); /* idle, but alone: all of it */
	bh_destroy(a);
	assert_int_equal(rh_do(&srv, "DEL {bh:%s}", name), 0);
	/* On a bulkhead that is not a cluster one. */
	bulkhead_t *plain = make_bh(1, 0, 0);

	assert_int_equal(bh_cluster_set_global_limit(plain, 3), -EINVAL);
	bh_destroy(plain);
}

/* Fewer permits than instances, all of them pressed: the odd permits go
 * round (a new turn every lease), so that no instance gets 0 for ever. */
static void test_odd_permits_go_round(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);
	bulkhead_t *bh[3];
	bool had[3] = { false, false, false };
	uint64_t end;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	cc.initial_want = 2;
	for (int i = 0; i < 3; i++)
		assert_int_equal(bh_cluster_open(&cc, NULL, &bh[i]), 0);
	end = bh_now_ns() + 8 * LEASE;
	while (bh_now_ns() < end && !(had[0] && had[1] && had[2])) {
		for (int i = 0; i < 3; i++) {
			unsigned n = 0;

			/* use all of the share, and be refused once more */
			while (bh_try_acquire(bh[i], 1) == 0)
				n++;
			if (n)
				had[i] = true;
			assert_int_equal(bh_cluster_step(bh[i], bh_now_ns() + 5 * BH_MSEC), 0);
			if (n)
				bh_release(bh[i], n);
		}
	}
	for (int i = 0; i < 3; i++) {
		assert_true(had[i]);
		bh_destroy(bh[i]);
	}
}

/* A renewal given up on and delivered late (a retransmission after the
 * connection was dropped) must not replace a later record of the same
 * instance: the store would count less than the instance enforces. */
static void test_late_renewal_refused(void **state)
{
	char name[32], id[40] = "", field[48];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4);
	bulkhead_t *bh;
	redisReply *h, *sha, *r;
	unsigned long long counted = 0;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	step_until_renewals(bh, 3);
	assert_int_equal(cstats(bh).share, 4);
	h = rh_cmd(&srv, "HGETALL {bh:%s}", name);
	for (size_t i = 0; i < h->elements; i += 2)
		if (strncmp(h->element[i]->str, "i:", 2) == 0)
			snprintf(id, sizeof(id), "%s", h->element[i]->str + 2);
	freeReplyObject(h);
	assert_true(id[0]);
	sha = rh_cmd(&srv, "SCRIPT LOAD %s", BHC_LEASE_LUA);
	assert_int_equal(sha->type, REDIS_REPLY_STRING);
	/* its first renewal (the open), arriving now: want 1, cap 1 */
	r = rh_cmd(&srv, "EVALSHA %s 1 {bh:%s} renew 1 %s 4 %llu 0 0 1 1 1 0 0 0 1", sha->str, name,
		   id, (unsigned long long)(LEASE / BH_USEC));
	freeReplyObject(r);
	freeReplyObject(sha);
	snprintf(field, sizeof(field), "i:%s", id);
	r = rh_cmd(&srv, "HGET {bh:%s} %s", name, field);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	sscanf(r->str, "%*s %*s %llu", &counted);
	freeReplyObject(r);
	assert_true(counted >= cstats(bh).share); /* it enforces 4 */
	bh_destroy(bh);
}

/* A renewal answered with an error (here the key briefly held something
 * else; in production LOADING, BUSY, READONLY, OOM) must not poison the
 * connections that follow: once the store answers normally again, the
 * next renewal succeeds. */
static void test_error_reply_does_not_stick(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 3);
	bulkhead_t *bh;
	uint64_t renewals;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(rh_do(&srv, "RENAME {bh:%s} {bh:%s}saved", name, name), 0);
	assert_int_equal(rh_do(&srv, "SET {bh:%s} intruder", name), 0);
	STEP_UNTIL(bh, cstats(bh).renewals_failed >= 1);
	assert_int_equal(cstats(bh).last_error, -ENOTUNIQ);
	assert_int_equal(rh_do(&srv, "DEL {bh:%s}", name), 0);
	assert_int_equal(rh_do(&srv, "RENAME {bh:%s}saved {bh:%s}", name, name), 0);
	renewals = cstats(bh).renewals;
	STEP_UNTIL(bh, cstats(bh).renewals > renewals);
	assert_int_equal(cstats(bh).last_error, 0);
	assert_int_equal(cstats(bh).share, 3);
	bh_destroy(bh);
}

/* bh_cluster_stats(3): share is "0 while the lease is out", and
 * lease_expiry_ns 0 when there is no lease. A manual handle whose caller
 * has not stepped it since the lease ran out admits nothing (the gate);
 * its statistics must say so too, not the stale share. */
static void test_stats_share_zero_once_lease_out(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 3);
	bulkhead_t *bh;
	struct bh_cluster_stats s;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	assert_int_equal(cstats(bh).share, 3);
	usleep((useconds_t)(LEASE / BH_USEC) + 50000); /* not stepped: the lease runs out */
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY); /* admission has stopped */
	s = cstats(bh);
	assert_int_equal(s.share, 0);
	assert_true(s.lease_expiry_ns == 0 || s.lease_expiry_ns > bh_now_ns());
	STEP_UNTIL(bh, cstats(bh).share == 3);
	bh_destroy(bh);
}

/* The statistics say what admission does, to the instant: share turns 0
 * when the gate shuts (on the coarse clock, up to two ticks before the
 * lease's end), not up to two ticks later; and by lease_expiry_ns, on
 * CLOCK_MONOTONIC, admission has stopped. */
static void test_stats_share_zero_when_gate_shuts(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 3);
	bulkhead_t *bh;
	struct bh_cluster_stats s;
	uint64_t expiry;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	expiry = cstats(bh).lease_expiry_ns;
	while (bh_try_acquire(bh, 1) == 0) { /* not stepped: the lease runs out */
		assert_int_equal(bh_release(bh, 1), 0);
		assert_true(bh_now_ns() < expiry + 100 * BH_MSEC);
		usleep(200);
	}
	s = cstats(bh); /* right after the first refusal */
	assert_int_equal(s.share, 0);
	assert_int_equal(s.lease_expiry_ns, 0);
	bh_destroy(bh);
	/* The other way: from lease_expiry_ns on, nothing is admitted. */
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	expiry = cstats(bh).lease_expiry_ns;
	while (bh_now_ns() < expiry)
		usleep(200);
	assert_int_equal(bh_try_acquire(bh, 1), -EBUSY);
	bh_destroy(bh);
}

/* The same late delivery after bh_destroy: the instance left, and its
 * renewal given up on reaches the store afterwards. It must not register
 * the departed instance again, holding a share nobody uses for a lease:
 * bh_destroy "gives the share back at once". */
static void test_late_renewal_after_leave_refused(void **state)
{
	char name[32], id[40] = "";
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4);
	bulkhead_t *a, *b;
	redisReply *h, *sha, *r;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &a), 0);
	assert_int_equal(cstats(a).share, 4);
	h = rh_cmd(&srv, "HGETALL {bh:%s}", name);
	for (size_t i = 0; i < h->elements; i += 2)
		if (strncmp(h->element[i]->str, "i:", 2) == 0)
			snprintf(id, sizeof(id), "%s", h->element[i]->str + 2);
	freeReplyObject(h);
	assert_true(id[0]);
	bh_destroy(a); /* leaves */
	sha = rh_cmd(&srv, "SCRIPT LOAD %s", BHC_LEASE_LUA);
	assert_int_equal(sha->type, REDIS_REPLY_STRING);
	/* its first renewal (the open) arriving now: want 4, nothing held */
	r = rh_cmd(&srv, "EVALSHA %s 1 {bh:%s} renew 1 %s 4 %llu 0 0 1 4 1048575 0 0 0 1", sha->str,
		   name, id, (unsigned long long)(LEASE / BH_USEC));
	freeReplyObject(r);
	freeReplyObject(sha);
	/* A newcomer is alone: the whole limit is free for it. */
	assert_int_equal(bh_cluster_open(&cc, NULL, &b), 0);
	assert_int_equal(cstats(b).instances, 1);
	assert_int_equal(cstats(b).share, 4);
	bh_destroy(b);
}

/* A renewal whose connection is reset after it went out is sent again on a
 * new connection. The first copy may be delayed rather than lost (a proxy)
 * and reach the store after the second: it must be refused there, or it
 * replaces the record with one computed from the state before: here it
 * would count A at 2 while A enforces 4 and has 4 in flight, and C would be
 * granted permits A holds. */
static void test_resent_renewal_first_copy_refused(void **state)
{
	char name[32], id[40];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4), via;
	struct bh_config capped = { .max_concurrent = 2 };
	bulkhead_t *a, *b, *c;
	const char *answer;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	px_start(PX_RELAY);
	via = cc;
	via.endpoint = px.endpoint;
	assert_int_equal(bh_cluster_open(&cc, &capped, &b), 0);
	assert_int_equal(bh_cluster_open(&via, NULL, &a), 0);
	assert_int_equal(cstats(a).share, 2);
	other_instance_id(name, NULL, id); /* B's */
	other_instance_id(name, id, id);   /* A's */
	assert_int_equal(bh_try_acquire(a, 2), 0); /* all of its share: A asks for more */
	bh_destroy(b);
	/* A's next renewal (applied 2, held 2) is held back and its connection
	 * reset: A sends it again and is granted all 4. */
	atomic_store(&px.mode, PX_HOLD_RESET);
	step_until_renewals(a, cstats(a).renewals + 1);
	assert_int_equal(atomic_load(&px.held), 1);
	assert_int_equal(cstats(a).reconnects, 1);
	assert_int_equal(cstats(a).renewals_failed, 0);
	assert_int_equal(cstats(a).share, 4);
	assert_int_equal(bh_try_acquire(a, 2), 0);
	/* C joins: everything is A's. */
	assert_int_equal(bh_cluster_open(&cc, NULL, &c), 0);
	assert_int_equal(cstats(c).share, 0);
	/* The first copy of A's renewal arrives now. */
	answer = px_let_go();
	printf("the first copy's answer: %.40s\n", answer);
	assert_int_equal(counted_at_store(name, id), 4);
	assert_int_equal(strncmp(answer, "-BHSTALE", 8), 0);
	step_until_renewals(c, cstats(c).renewals + 1);
	assert_int_equal(cstats(c).share, 0);
	assert_int_equal(bh_try_acquire(c, 1), -EBUSY);
	bh_release(a, 4);
	bh_destroy(c);
	bh_destroy(a);
	px_stop();
}

/* An open whose first renewal goes unanswered fails with ETIMEDOUT, but the
 * renewal may still reach the store (delayed in the network) and register
 * an instance that nobody runs: its want would hold the others' shares down
 * for a whole lease. The failed open leaves the store, and the late renewal
 * is refused. */
static void test_timed_out_open_leaves_no_phantom(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4), via;
	bulkhead_t *b, *a = NULL;
	const char *answer;
	uint64_t r0;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	assert_int_equal(bh_cluster_open(&cc, NULL, &b), 0);
	assert_int_equal(cstats(b).share, 4);
	px_start(PX_HOLD);
	via = cc;
	via.endpoint = px.endpoint;
	via.timeout_ns = 100 * BH_MSEC;
	assert_int_equal(bh_cluster_open(&via, NULL, &a), -ETIMEDOUT);
	assert_null(a);
	answer = px_let_go(); /* the open's renewal reaches the store now */
	printf("the late renewal's answer: %.40s\n", answer);
	r0 = cstats(b).renewals;
	step_until_renewals(b, r0 + 1);
	assert_int_equal(records_at_store(name), 1);
	assert_int_equal(cstats(b).instances, 1);
	assert_int_equal(cstats(b).share, 4);
	assert_int_equal(strncmp(answer, "-BHSTALE", 8), 0);
	bh_destroy(b);
	px_stop();
}

/* An open whose renewal the store ran, but whose answer came too late to
 * use (the process was stopped meanwhile), fails: its registration must
 * not stay behind at the store, holding a share that nobody renews for a
 * whole lease. The store holds the renewal back (CLIENT PAUSE WRITE holds
 * scripts, not SCRIPT LOAD) and answers while this process is stopped; it
 * resumes after the lease's usable part, before the store's expiry. */
static void test_late_answer_at_open_leaves_no_phantom(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 2);
	bulkhead_t *bh = NULL;
	pid_t stopper;
	uint64_t t0;

	(void)state;
	assert_int_equal(rh_do(&srv, "CLIENT PAUSE 250 WRITE"), 0);
	stopper = fork();
	assert_true(stopper >= 0);
	if (stopper == 0) {
		rh_sleep_ms(100);
		kill(getppid(), SIGSTOP);
		rh_sleep_ms(600); /* resumes 700 ms in: past 540, before 850 */
		kill(getppid(), SIGCONT);
		_exit(0);
	}
	t0 = bh_now_ns();
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), -ETIMEDOUT);
	assert_null(bh);
	waitpid(stopper, NULL, 0);
	printf("open returned after %llu ms\n", (unsigned long long)((bh_now_ns() - t0) / BH_MSEC));
	assert_int_equal(records_at_store(name), 0);
	assert_int_equal(rh_do(&srv, "DEL {bh:%s}", name), 0);
}


/* An open whose renewal the store ran but whose answer could not be used
 * (a reply that is no grant, though no error either) fails: the store did
 * answer, so the script may have run and registered the instance, which
 * nobody would renew and whose share and demand would hold the others'
 * down for a whole lease. The failed open leaves the store. */
static void test_garbled_answer_at_open_leaves_no_phantom(void **state)
{
	char name[32];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 4);
	bulkhead_t *bh = NULL;

	(void)state;
	cc.flags |= BH_CLUSTER_MANUAL;
	px_start(PX_GARBLE);
	cc.endpoint = px.endpoint;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), -EPROTO);
	assert_null(bh);
	assert_int_equal(atomic_load(&px.answered), 1);
	assert_int_equal(strncmp(px.answer, "*8\r\n", 4), 0); /* the store granted */
	assert_int_equal(records_at_store(name), 0);
	px_stop();
	assert_int_equal(rh_do(&srv, "DEL {bh:%s}", name), 0);
}

/* Metrics carry the cluster series; no credential ever shows up. */
static void test_metrics_and_no_credentials(void **state)
{
	char name[32], ep[300], buf[65536];
	struct bh_cluster_config cc = config(fresh_name(name, sizeof(name)), 3);
	bulkhead_t *bh;
	struct bh_metric_set set = { .n_bulkheads = 1 };
	ssize_t n;

	(void)state;
	assert_int_equal(rh_do(&srv, "ACL SETUSER secretive-user on >Tr0ub4dor ~{bh:*} +@all"), 0);
	snprintf(ep, sizeof(ep), "unix://secretive-user:Tr0ub4dor@%s", srv.sock);
	cc.endpoint = ep;
	assert_int_equal(bh_cluster_open(&cc, NULL, &bh), 0);
	set.bulkheads = &bh;
	n = bh_metrics_prometheus(&set, buf, sizeof(buf));
	assert_true(n > 0 && n < (ssize_t)sizeof(buf));
	assert_non_null(strstr(buf, "bulkhead_cluster_share{name=\""));
	assert_non_null(strstr(buf, "bulkhead_cluster_global_limit{name=\""));
	assert_non_null(strstr(buf, "# TYPE bulkhead_cluster_renewals_total counter"));
	assert_non_null(strstr(buf, "bulkhead_cluster_lease_remaining_seconds{name="));
	assert_null(strstr(buf, "Tr0ub4dor"));
	assert_null(strstr(buf, "secretive"));
	n = bh_metrics_json(&set, buf, sizeof(buf));
	assert_true(n > 0 && n < (ssize_t)sizeof(buf));
	assert_non_null(strstr(buf, "\"cluster_share\":3"));
	assert_null(strstr(buf, "Tr0ub4dor"));
	bh_destroy(bh);
	assert_int_equal(rh_do(&srv, "ACL DELUSER secretive-user"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_endpoint_parse),
		cmocka_unit_test(test_single_instance_gets_the_limit),
		cmocka_unit_test(test_local_cap_and_name),
		cmocka_unit_test(test_timeout_presses_for_more),
		cmocka_unit_test(test_adaptive_moves_the_share_cap),
		cmocka_unit_test(test_cap_cut_during_renewal_holds),
		cmocka_unit_test(test_learning_period_on_a_new_store),
		cmocka_unit_test(test_share_zero_then_destroy_gives_back),
		cmocka_unit_test(test_open_rejects_bad_config),
		cmocka_unit_test(test_margin_overflow_refused),
		cmocka_unit_test(test_open_unreachable),
		cmocka_unit_test(test_open_times_out),
		cmocka_unit_test(test_open_over_tcp),
		cmocka_unit_test(test_open_wrong_type_at_key),
		cmocka_unit_test(test_error_words_in_the_name),
		cmocka_unit_test(test_open_protocol_mismatch),
		cmocka_unit_test(test_refused_key_left_untouched),
		cmocka_unit_test_teardown(test_open_errors_documented, store_teardown),
		cmocka_unit_test(test_open_limit_and_lease_mismatch),
		cmocka_unit_test(test_start_in_fallback),
		cmocka_unit_test_teardown(test_auth_password_and_acl_user, auth_teardown),
		cmocka_unit_test(test_select_db),
		cmocka_unit_test(test_lease_checked_on_admission),
		cmocka_unit_test(test_manual_fd_polls_readable),
		cmocka_unit_test(test_thread_renews),
		cmocka_unit_test_teardown(test_fallback_and_rejoin, cont_teardown),
		cmocka_unit_test_teardown(test_fallback_zero_admits_nothing, cont_teardown),
		cmocka_unit_test(test_store_restart_empty_learns),
		cmocka_unit_test(test_idle_connection_closed_no_fallback),
		cmocka_unit_test(test_fork_then_dropped_request_no_spin),
		cmocka_unit_test(test_fork_child_copy_closed),
		cmocka_unit_test(test_step_waits_without_lock),
		cmocka_unit_test(test_release_never_waits_for_dns),
		cmocka_unit_test(test_not_cancellation_points),
		cmocka_unit_test(test_noscript_reloads),
		cmocka_unit_test(test_expiry_on_store_clock),
		cmocka_unit_test(test_set_global_limit),
		cmocka_unit_test(test_round_trips_exact),
		cmocka_unit_test(test_metrics_and_no_credentials),
		cmocka_unit_test(test_odd_permits_go_round),
		cmocka_unit_test(test_late_renewal_refused),
		cmocka_unit_test(test_error_reply_does_not_stick),
		cmocka_unit_test(test_stats_share_zero_once_lease_out),
		cmocka_unit_test(test_stats_share_zero_when_gate_shuts),
		cmocka_unit_test(test_late_renewal_after_leave_refused),
		cmocka_unit_test(test_resent_renewal_first_copy_refused),
		cmocka_unit_test(test_timed_out_open_leaves_no_phantom),
		cmocka_unit_test(test_late_answer_at_open_leaves_no_phantom),
		cmocka_unit_test(test_garbled_answer_at_open_leaves_no_phantom),
	};
	int r = redis_start(&srv, true);

	if (r == 77) {
		printf("redis-server is not installed: skip\n");
		return 77;
	}
	if (r != 0) {
		printf("could not start redis-server\n");
		redis_stop(&srv);
		return 1;
	}
	r = cmocka_run_group_tests(tests, NULL, NULL);
	redis_stop(&srv);
	return r;
}
