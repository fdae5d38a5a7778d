/* The rig of the cluster fault scenarios and the cluster soak: a loopback
 * backend that counts its own concurrency (calls it is serving right now),
 * and instance processes (tests/cluster_inst) driven over pipes. The
 * includer defines RIG_CHECK(cond), which must not return when cond is
 * false. */
#ifndef BH_CLUSTER_RIG_H
#define BH_CLUSTER_RIG_H

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "redis_harness.h"

#define LEASE_MS 600
#define RENEW_MS 150

/* ---- the backend ---------------------------------------------------------------- */

static struct {
	int lfd, port;
	_Atomic int cur, peak;
	_Atomic int held;      /* calls held until backend_let_go */
	_Atomic unsigned gen;  /* bumped by backend_let_go */
	_Atomic bool no_hold;  /* backend_let_go(true): hold nothing from now on */
	_Atomic uint64_t served;
} backend;

/* A call of hold -1 (an instance's --hold-ms -1): served until the test
 * lets it go, or until its client is gone (an instance that quit or was
 * killed). A scenario that must know every permit of an instance is at
 * the backend uses these: they cannot end by themselves. */
static inline void hold_until_let_go(int fd)
{
	unsigned gen = atomic_load(&backend.gen);
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };

	atomic_fetch_add(&backend.held, 1);
	while (atomic_load(&backend.gen) == gen && !atomic_load(&backend.no_hold))
		if (poll(&p, 1, 1) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			break;
	atomic_fetch_sub(&backend.held, 1);
}

/* End every call held now (they answer; their clients may be stopped), and
 * with forever, every later one at once too, until backend_hold_again. */
static inline void backend_let_go(bool forever)
{
	if (forever)
		atomic_store(&backend.no_hold, true);
	atomic_fetch_add(&backend.gen, 1);
}

static inline void backend_hold_again(void)
{
	atomic_store(&backend.no_hold, false);
}

static inline void *serve_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char line[32];
	size_t n = 0;

	for (;;) {
		char ch;
		ssize_t r = recv(fd, &ch, 1, 0);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			break;
		}
		if (ch != '\n') {
			if (n + 1 < sizeof(line))
				line[n++] = ch;
			continue;
		}
		line[n] = '\0';
		n = 0;
		/* A call begins: count it, hold it, end it, answer. */
		int cur = atomic_fetch_add(&backend.cur, 1) + 1, peak = atomic_load(&backend.peak);

		while (cur > peak && !atomic_compare_exchange_weak(&backend.peak, &peak, cur))
			;
		if (atoi(line) < 0)
			hold_until_let_go(fd);
		else
			rh_sleep_ms((unsigned)atoi(line));
		atomic_fetch_sub(&backend.cur, 1);
		atomic_fetch_add(&backend.served, 1);
		if (send(fd, "K", 1, MSG_NOSIGNAL) != 1)
			break;
	}
	close(fd);
	return NULL;
}

static inline void *accept_loop(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept4(backend.lfd, NULL, NULL, SOCK_CLOEXEC), one = 1;
		pthread_t t;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (pthread_create(&t, NULL, serve_conn, (void *)(intptr_t)fd) == 0)
			pthread_detach(t);
		else
			close(fd);
	}
}

static inline int backend_start(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	pthread_t t;

	backend.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (backend.lfd < 0 || bind(backend.lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(backend.lfd, 256) < 0 || getsockname(backend.lfd, (struct sockaddr *)&a, &len) < 0)
		return -1;
	backend.port = ntohs(a.sin_port);
	return pthread_create(&t, NULL, accept_loop, NULL) == 0 ? (pthread_detach(t), 0) : -1;
}

/* The peak since the last call, and start a new window at the current
 * concurrency. */
static inline int peak_window(void)
{
	int p = atomic_exchange(&backend.peak, atomic_load(&backend.cur));

	return p;
}

/* ---- instance processes ------------------------------------------------------------ */

static struct redis_srv srv;
static char inst_path[PATH_MAX];
static unsigned seq;
static bool rig_fresh = true; /* instances pass BH_CLUSTER_FRESH_STORE */
static pid_t rig_pids[64];     /* instances alive, for rig_kill_all */

static inline void rig_track(pid_t pid, bool alive)
{
	for (int i = 0; i < 64; i++)
		if (alive ? rig_pids[i] == 0 : rig_pids[i] == pid) {
			rig_pids[i] = alive ? pid : 0;
			return;
		}
}

/* After a failed check: no instance of it may go on loading the backend. */
static inline void rig_kill_all(void)
{
	for (int i = 0; i < 64; i++)
		if (rig_pids[i] > 0) {
			kill(rig_pids[i], SIGKILL);
			waitpid(rig_pids[i], NULL, 0);
			rig_pids[i] = 0;
		}
}

struct inst {
	pid_t pid;
	FILE *in, *out;
	const char *label;
};

struct istats {
	long long share, granted, want, instances, global, in_flight, renewals, failed, reconnects,
		resets, fallback, fallbacks, unaccounted, over, over_max, learning_ms, last_error,
		round_trips, acquired, rejected, calls, call_errors;
};

/* Start an instance: the common arguments, then extra ones. Returns what
 * its bh_cluster_open returned (the instance has exited if not 0). */
static inline int inst_start_v(struct inst *p, const char *label, const char *name,
			       int limit, va_list ap)
{
	char lim[16], port[16], lease[16], renew[16];
	const char *argv[40];
	int n = 0, to[2], from[2];
	const char *a;
	char line[64];
	int rc;

	snprintf(lim, sizeof(lim), "%d", limit);
	snprintf(port, sizeof(port), "%d", backend.port);
	snprintf(lease, sizeof(lease), "%d", LEASE_MS);
	snprintf(renew, sizeof(renew), "%d", RENEW_MS);
	argv[n++] = inst_path;
	argv[n++] = "--endpoint";
	argv[n++] = srv.endpoint;
	argv[n++] = "--name";
	argv[n++] = name;
	argv[n++] = "--limit";
	argv[n++] = lim;
	argv[n++] = "--backend";
	argv[n++] = port;
	argv[n++] = "--lease-ms";
	argv[n++] = lease;
	argv[n++] = "--renew-ms";
	argv[n++] = renew;
	argv[n++] = "--margin-ms";
	argv[n++] = "60";
	argv[n++] = "--timeout-ms";
	argv[n++] = "100";
	if (rig_fresh)
		argv[n++] = "--fresh";
	while ((a = va_arg(ap, const char *)) != NULL && n < 38)
		argv[n++] = a;
	argv[n] = NULL;
	/* close-on-exec: no other child keeps an instance's pipes open */
	RIG_CHECK(pipe2(to, O_CLOEXEC) == 0);
	RIG_CHECK(pipe2(from, O_CLOEXEC) == 0);
	p->label = label;
	p->pid = fork();
	RIG_CHECK(p->pid >= 0);
	if (p->pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		close(to[1]);
		close(from[0]);
		execv(inst_path, (char *const *)argv);
		_exit(127);
	}
	rig_track(p->pid, true);
	close(to[0]);
	close(from[1]);
	p->in = fdopen(to[1], "w");
	p->out = fdopen(from[0], "r");
	RIG_CHECK(fgets(line, sizeof(line), p->out) != NULL);
	RIG_CHECK(sscanf(line, "ready %d", &rc) == 1);
	if (rc != 0) {
		waitpid(p->pid, NULL, 0);
		rig_track(p->pid, false);
		fclose(p->in);
		fclose(p->out);
		p->pid = 0;
	}
	return rc;
}

/* The same, with the extra arguments NULL-ended; the open must succeed. */
static inline void inst_start(struct inst *p, const char *label, const char *name, int limit,
			      ...)
{
	va_list ap;
	int rc;

	va_start(ap, limit);
	rc = inst_start_v(p, label, name, limit, ap);
	va_end(ap);
	RIG_CHECK(rc == 0);
}

static inline int inst_try_start(struct inst *p, const char *label, const char *name,
				 int limit, ...)
{
	va_list ap;
	int rc;

	va_start(ap, limit);
	rc = inst_start_v(p, label, name, limit, ap);
	va_end(ap);
	return rc;
}

static inline void inst_say(struct inst *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline void inst_say(struct inst *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(p->in, fmt, ap);
	va_end(ap);
	fputc('\n', p->in);
	fflush(p->in);
}

static inline long long field_of(const char *line, const char *key)
{
	char pat[40];
	const char *at;

	snprintf(pat, sizeof(pat), " %s=", key);
	at = strstr(line, pat);
	RIG_CHECK(at != NULL);
	return strtoll(at + strlen(pat), NULL, 10);
}

static inline struct istats inst_stats(struct inst *p)
{
	char line[1024];
	struct istats s;

	inst_say(p, "stats");
	RIG_CHECK(fgets(line, sizeof(line), p->out) != NULL);
#define F(k) s.k = field_of(line, #k)
	F(share); F(granted); F(want); F(instances); F(global); F(in_flight); F(renewals);
	F(failed); F(reconnects); F(resets); F(fallback); F(fallbacks); F(unaccounted); F(over);
	F(over_max); F(learning_ms); F(last_error); F(round_trips); F(acquired); F(rejected);
	F(calls); F(call_errors);
#undef F
	return s;
}

static inline void inst_quit(struct inst *p)
{
	char line[64];
	int status = -1;

	if (p->pid <= 0)
		return;
	inst_say(p, "quit");
	while (fgets(line, sizeof(line), p->out) && strcmp(line, "bye\n") != 0)
		;
	waitpid(p->pid, &status, 0);
	rig_track(p->pid, false);
	/* A sanitizer's finding in the instance shows as its exit status. */
	RIG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fclose(p->in);
	fclose(p->out);
	p->pid = 0;
}

static inline void inst_kill(struct inst *p)
{
	kill(p->pid, SIGKILL);
	waitpid(p->pid, NULL, 0);
	rig_track(p->pid, false);
	fclose(p->in);
	fclose(p->out);
	p->pid = 0;
}

static inline const char *name_for(const char *scenario, char *buf, size_t len)
{
	snprintf(buf, len, "%s-%u-%d", scenario, ++seq, (int)getpid());
	return buf;
}

/* tests/cluster_inst, next to the running program (or in ../tests). */
static inline int find_inst(void)
{
	ssize_t n = readlink("/proc/self/exe", inst_path, sizeof(inst_path) - 32);
	char *slash;

	if (n <= 0)
		return -1;
	inst_path[n] = '\0';
	slash = strrchr(inst_path, '/');
	if (!slash)
		return -1;
	strcpy(slash + 1, "cluster_inst");
	if (access(inst_path, X_OK) == 0)
		return 0;
	strcpy(slash + 1, "../tests/cluster_inst");
	return access(inst_path, X_OK);
}

#endif /* BH_CLUSTER_RIG_H */
