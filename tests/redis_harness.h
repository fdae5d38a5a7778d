/* A real redis-server for the cluster tests: started in a temporary
 * directory on a unix socket (and, when asked, an ephemeral loopback port),
 * persistence off, stopped at the end. Commands from the test side go
 * through hiredis's blocking API. */
#ifndef BH_REDIS_HARNESS_H
#define BH_REDIS_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

struct redis_srv {
	pid_t pid;
	char dir[128];
	char sock[160];
	char endpoint[200];     /* unix://<sock> */
	char tcp_endpoint[64];  /* redis://127.0.0.1:<port> when port != 0 */
	int port;
	const char *extra[8];   /* more redis-server arguments (NULL-ended) */
};

static inline uint64_t rh_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void rh_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The redis-server binary, or NULL: tests then exit 77. */
static inline const char *rh_binary(void)
{
	static char found[256];
	const char *env = getenv("REDIS_SERVER");
	const char *dirs[] = { "/usr/bin", "/usr/local/bin", "/usr/sbin", NULL };

	if (env && access(env, X_OK) == 0)
		return env;
	for (int i = 0; dirs[i]; i++) {
		snprintf(found, sizeof(found), "%s/redis-server", dirs[i]);
		if (access(found, X_OK) == 0)
			return found;
	}
	return NULL;
}

static inline int rh_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* A blocking connection from the test side, or NULL. */
static inline redisContext *rh_connect(const struct redis_srv *s)
{
	struct timeval tv = { 2, 0 };
	redisContext *c = redisConnectUnixWithTimeout(s->sock, tv);

	if (c && c->err) {
		redisFree(c);
		return NULL;
	}
	return c;
}

/* Run one command (printf-style, hiredis format); returns the reply or
 * NULL. The caller frees it with freeReplyObject. */
static inline redisReply *rh_cmd(const struct redis_srv *s, const char *fmt, ...)
{
	redisContext *c = rh_connect(s);
	redisReply *r = NULL;
	va_list ap;

	if (!c)
		return NULL;
	va_start(ap, fmt);
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	redisFree(c);
	return r;
}

/* The same, for commands whose reply does not matter; 0 when it was not an
 * error. */
static inline int rh_do(const struct redis_srv *s, const char *fmt, ...)
{
	redisContext *c = rh_connect(s);
	redisReply *r;
	va_list ap;
	int rc;

	if (!c)
		return -1;
	va_start(ap, fmt);
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	rc = r && r->type != REDIS_REPLY_ERROR ? 0 : -1;
	if (r)
		freeReplyObject(r);
	redisFree(c);
	return rc;
}

static inline int rh_spawn(struct redis_srv *s)
{
	const char *bin = rh_binary();
	char port[16], log[200];
	const char *argv[40];
	int n = 0;

	snprintf(port, sizeof(port), "%d", s->port);
	snprintf(log, sizeof(log), "%s/redis.log", s->dir);
	argv[n++] = bin;
	argv[n++] = "--port";
	argv[n++] = port;
	if (s->port) {
		argv[n++] = "--bind";
		argv[n++] = "127.0.0.1";
	}
	argv[n++] = "--unixsocket";
	argv[n++] = s->sock;
	argv[n++] = "--unixsocketperm";
	argv[n++] = "700";
	argv[n++] = "--save";
	argv[n++] = "";
	argv[n++] = "--appendonly";
	argv[n++] = "no";
	argv[n++] = "--dir";
	argv[n++] = s->dir;
	argv[n++] = "--logfile";
	argv[n++] = log;
	argv[n++] = "--enable-debug-command";
	argv[n++] = "local";
	for (int i = 0; s->extra[i] && n < 38; i++)
		argv[n++] = s->extra[i];
	argv[n] = NULL;
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		setpgid(0, 0); /* a test's SIGINT is not the server's */
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		redisContext *c = rh_connect(s);

		if (c) {
			redisReply *r = redisCommand(c, "PING");
			bool ok = r && r->type != REDIS_REPLY_ERROR;

			if (r)
				freeReplyObject(r);
			redisFree(c);
			if (ok)
				return 0;
		}
		rh_sleep_ms(10);
	}
	return -1;
}

/* Start a server; 0, 77 (no redis-server: skip) or -1. With tcp, also on
 * an ephemeral loopback port. */
static inline int redis_start(struct redis_srv *s, bool tcp)
{
	if (!rh_binary())
		return 77;
	signal(SIGPIPE, SIG_IGN); /* the test's own hiredis connections */
	snprintf(s->dir, sizeof(s->dir), "/tmp/bh-redis-XXXXXX");
	if (!mkdtemp(s->dir))
		return -1;
	snprintf(s->sock, sizeof(s->sock), "%s/redis.sock", s->dir);
	snprintf(s->endpoint, sizeof(s->endpoint), "unix://%s", s->sock);
	s->port = tcp ? rh_free_port() : 0;
	if (s->port)
		snprintf(s->tcp_endpoint, sizeof(s->tcp_endpoint), "redis://127.0.0.1:%d", s->port);
	return rh_spawn(s);
}

static inline void redis_signal(struct redis_srv *s, int sig)
{
	if (s->pid > 0)
		kill(s->pid, sig);
}

/* Kill it and wait for it to be gone. */
static inline void redis_kill(struct redis_srv *s, int sig)
{
	if (s->pid <= 0)
		return;
	kill(s->pid, sig);
	waitpid(s->pid, NULL, 0);
	s->pid = 0;
}

/* Start it again on the same socket and port: with persistence off it
 * comes back empty, as after a crash. */
static inline int redis_restart(struct redis_srv *s)
{
	unlink(s->sock);
	return rh_spawn(s);
}

static inline void redis_stop(struct redis_srv *s)
{
	char path[200];

	if (s->pid > 0) {
		kill(s->pid, SIGCONT);
		redis_kill(s, SIGKILL);
	}
	if (!s->dir[0])
		return;
	unlink(s->sock);
	snprintf(path, sizeof(path), "%s/redis.log", s->dir);
	unlink(path);
	rmdir(s->dir);
	s->dir[0] = '\0';
}

#endif /* BH_REDIS_HARNESS_H */
