/* bulkhead-demo --scenario cluster: three instances of an order service
 * (processes here, hosts in production) call payment. A bulkhead in each
 * instance limits that instance alone, so payment sees instances x limit;
 * one cluster bulkhead (bh_cluster_open) keeps the limit in Redis and
 * leases each instance a share of it. When an instance is SIGKILLed its
 * lease runs out and the others' shares grow to the whole limit.
 *
 * The demo starts its own redis-server, on a unix socket in a temporary
 * directory (no TCP port, persistence off), and stops it at the end. */
#define _GNU_SOURCE /* execvp's PATH search, strsignal */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "demo_procs.h"
#ifdef HAVE_HIREDIS
#include "bulkhead/cluster.h"

/* redis-server as REDIS_SERVER names it, or found on PATH; NULL: none. */
static const char *redis_binary(void)
{
	static char found[512];
	const char *env = getenv("REDIS_SERVER"), *path = getenv("PATH");

	if (env && *env)
		return access(env, X_OK) == 0 ? env : NULL;
	while (path && *path) {
		size_t n = strcspn(path, ":");

		if (n > 0 && n < sizeof(found) - 16) {
			snprintf(found, sizeof(found), "%.*s/redis-server", (int)n, path);
			if (access(found, X_OK) == 0)
				return found;
		}
		path += n + (path[n] == ':');
	}
	return NULL;
}
#endif

const char *cluster_unavailable(void)
{
#ifndef HAVE_HIREDIS
	return "this build has no cluster support (configure found no hiredis >= 0.14)";
#else
	if (!redis_binary())
		return "redis-server is not installed (the demo starts its own; install the "
		       "redis-server package, or name the binary in REDIS_SERVER)";
	return NULL;
#endif
}

#ifdef HAVE_HIREDIS
struct redis {
	pid_t pid;
	char dir[88], sock[104], log[104], endpoint[120]; /* sock fits sun_path */
};

static void nap_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* PING on the unix socket; true on +PONG. */
static bool redis_ready(const struct redis *rs)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char buf[16] = "";
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = false;

	if (fd < 0)
		return false;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", rs->sock);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    send(fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6 && recv(fd, buf, sizeof(buf) - 1, 0) > 0)
		ok = strncmp(buf, "+PONG", 5) == 0;
	close(fd);
	return ok;
}

/* SIGTERM, and SIGKILL when it is not gone within 5 s. */
static void redis_stop(struct redis *rs)
{
	if (rs->pid > 0) {
		bool gone = false;

		kill(rs->pid, SIGTERM);
		for (int i = 0; i < 500 && !gone; i++) {
			gone = waitpid(rs->pid, NULL, WNOHANG) == rs->pid;
			if (!gone)
				nap_ms(10);
		}
		if (!gone)
			kill(rs->pid, SIGKILL);
		while (!gone && waitpid(rs->pid, NULL, 0) < 0 && errno == EINTR)
			;
		rs->pid = 0;
	}
	unlink(rs->sock);
	unlink(rs->log);
	rmdir(rs->dir);
}

/* The end of the server's log on stderr: why it did not start. */
static void redis_show_log(const struct redis *rs)
{
	char buf[2048];
	FILE *f = rs->log[0] ? fopen(rs->log, "r") : NULL;
	size_t n;

	if (!f)
		return;
	if (fseek(f, -(long)(sizeof(buf) - 1), SEEK_END) < 0)
		rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (n > 0)
		fprintf(stderr, "%s: redis-server's log:\n%s%s", cli_prog, buf,
			buf[n - 1] == '\n' ? "" : "\n");
}

static int redis_start(struct redis *rs)
{
	const char *bin = redis_binary();
	const char *tmp = getenv("TMPDIR");
	int n = snprintf(rs->dir, sizeof(rs->dir), "%s/bulkhead-demo-redis-XXXXXX",
			 tmp && *tmp ? tmp : "/tmp");

	if (n < 0 || (size_t)n >= sizeof(rs->dir))
		return -ENAMETOOLONG; /* a unix socket's path is short */
	if (!mkdtemp(rs->dir))
		return -errno;
	snprintf(rs->sock, sizeof(rs->sock), "%s/redis.sock", rs->dir);
	snprintf(rs->log, sizeof(rs->log), "%s/redis.log", rs->dir);
	snprintf(rs->endpoint, sizeof(rs->endpoint), "unix://%s", rs->sock);
	fflush(NULL);
	rs->pid = fork();
	if (rs->pid < 0)
		return -errno;
	if (rs->pid == 0) {
		int null = open("/dev/null", O_RDWR);
		sigset_t none;

		/* The demo blocks its stop signals; the server must not inherit that. */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);

		dup2(null, 0);
		dup2(null, 1);
		setpgid(0, 0); /* the demo's Ctrl-C is for the demo; it stops the server */
		prctl(PR_SET_PDEATHSIG, SIGTERM); /* and if the demo is killed, it goes too */
		execl(bin, bin, "--port", "0", "--unixsocket", rs->sock, "--unixsocketperm", "700",
		      "--save", "", "--appendonly", "no", "--dir", rs->dir, "--logfile", rs->log,
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		int st;

		if (redis_ready(rs))
			return 0;
		if (waitpid(rs->pid, &st, WNOHANG) == rs->pid) {
			rs->pid = 0;
			return -ECHILD;
		}
		nap_ms(10);
	}
	return -ETIMEDOUT;
}

int procs_open_cluster(const struct procs_scenario *sc, const struct demo_config *cfg,
		       bulkhead_t **out)
{
	struct bh_cluster_config cc = {
		.endpoint = sc->endpoint, .name = "payment", .global_limit = cfg->conc[DEP_PAY],
		.lease_ns = sc->lease_ns,
		/* Our own store, just started: no instance relied on it before. */
		.flags = BH_CLUSTER_FRESH_STORE,
		/* Every instance wants more than the whole limit. */
		.initial_want = cfg->threads,
	};
	struct bh_config local = { .max_concurrent = cfg->threads };

	return bh_cluster_open(&cc, &local, out);
}

uint32_t procs_cluster_share(bulkhead_t *bh)
{
	struct bh_cluster_stats st;

	return bh_cluster_stats(bh, &st) == 0 ? (uint32_t)st.share : 0;
}

int cluster_scenario(const struct demo_config *cfg, struct demo_outputs *out)
{
	struct procs_scenario sc = {
		.name = "cluster", .unit = "instance", .local_label = "a bulkhead per instance",
		.shared_label = "one cluster bulkhead",
		.shared_mode = PM_CLUSTER, .lease_ns = sec_to_ns(cfg->lease_s),
	};
	struct redis rs = { 0 };
	int r = 0;

	if (cfg->runs & RUN_WITH) {
		r = redis_start(&rs);
		if (r < 0) {
			fprintf(stderr, "%s: cannot start redis-server in %s: %s\n", cli_prog,
				rs.dir, r == -ECHILD ? "it exited" : strerror(-r));
			redis_show_log(&rs); /* redis_stop removes it */
			redis_stop(&rs);
			return r;
		}
		printf("redis-server: pid %d on %s (started for this demo)\n", (int)rs.pid,
		       rs.endpoint);
		sc.endpoint = rs.endpoint;
	}
	r = procs_scenario_run(&sc, cfg, out);
	if (cfg->runs & RUN_WITH)
		redis_stop(&rs);
	return r;
}
#else
int procs_open_cluster(const struct procs_scenario *sc, const struct demo_config *cfg,
		       bulkhead_t **out)
{
	(void)sc;
	(void)cfg;
	(void)out;
	return -EPROTONOSUPPORT;
}

uint32_t procs_cluster_share(bulkhead_t *bh)
{
	(void)bh;
	return 0;
}

int cluster_scenario(const struct demo_config *cfg, struct demo_outputs *out)
{
	(void)cfg;
	(void)out;
	return -EPROTONOSUPPORT;
}
#endif
