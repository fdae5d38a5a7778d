/* The Redis store: one non-blocking connection, hiredis for the protocol
 * (command formatting and the reply reader), the lease script
 * (lease.lua) loaded once with SCRIPT LOAD and called with EVALSHA; after
 * NOSCRIPT (a restarted or flushed server) it is loaded again and the call
 * repeated, in one round trip.
 *
 * The socket is ours, not a redisContext's: hiredis 0.14 writes with
 * write(2), which raises SIGPIPE when the server has closed the connection
 * (https://github.com/redis/hiredis/issues/1229), and a library must neither
 * kill its process nor change its signal dispositions. Ours sends with
 * MSG_NOSIGNAL, never blocks, and is close-on-exec. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <hiredis.h>

#include "endpoint.h"
#include "store.h"
#include "lease_lua.h"

static const char lease_lua[] = BHC_LEASE_LUA;

enum rs_state {
	RS_DOWN,       /* no connection */
	RS_CONNECTING, /* connect(2) in progress */
	RS_HELLO,      /* AUTH / SELECT / SCRIPT LOAD sent, replies due */
	RS_READY,      /* idle */
	RS_CALL,       /* the request's command(s) sent, replies due */
};

struct rstore {
	struct bhc_store base;
	struct bhc_endpoint ep;
	char key[80];
	enum rs_state st;
	int fd;
	struct addrinfo *ai, *ai_next; /* TCP: addresses still to try */
	int connect_err;
	redisReader *rd;
	char *out;
	size_t out_len, out_off, out_cap;
	/* Where each command queued in out ends, and how many of them have
	 * gone out whole: a command counts as sent (base.commands) only then,
	 * not when queued, so one queued on a connection that then fails is
	 * not counted. At most 3 are queued at once (AUTH, SELECT, SCRIPT
	 * LOAD; or SCRIPT LOAD and the call). */
	size_t ends[4];
	unsigned queued, counted;
	unsigned due;      /* replies still expected */
	unsigned hello_n;  /* of which hello replies (AUTH, SELECT, SCRIPT LOAD) */
	char sha[41];      /* the script's SHA1, once loaded */
	bool reloading;    /* this call already met NOSCRIPT once */
	int err;           /* first error seen among this exchange's replies */
	struct bhc_request rq;
	struct bhc_grant grant;
	bool have_rq;
	bool reused;       /* the request went out on a connection made before it */
};

static struct rstore *rs_of(struct bhc_store *s)
{
	return (struct rstore *)s;
}

/* ---- output --------------------------------------------------------------- */

static int put_cmd(struct rstore *r, int argc, const char **argv)
{
	size_t lens[20];
	char *cmd;
	int n;

	if (r->queued == sizeof(r->ends) / sizeof(r->ends[0]))
		return -ENOMEM; /* never: see ends */
	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	n = redisFormatCommandArgv(&cmd, argc, argv, lens);
	if (n < 0)
		return -ENOMEM;
	/* An AUTH command holds the password: no copy is freed uncleared. */
	if (r->out_len + (size_t)n > r->out_cap) {
		size_t cap = (r->out_len + (size_t)n) * 2;
		char *p = malloc(cap);

		if (!p) {
			explicit_bzero(cmd, (size_t)n);
			redisFreeCommand(cmd);
			return -ENOMEM;
		}
		if (r->out) {
			memcpy(p, r->out, r->out_len);
			explicit_bzero(r->out, r->out_cap);
			free(r->out);
		}
		r->out = p;
		r->out_cap = cap;
	}
	memcpy(r->out + r->out_len, cmd, (size_t)n);
	r->out_len += (size_t)n;
	r->ends[r->queued++] = r->out_len;
	explicit_bzero(cmd, (size_t)n);
	redisFreeCommand(cmd);
	r->due++;
	return 0;
}

static void clear_out(struct rstore *r)
{
	r->out_off = r->out_len = 0;
	r->queued = r->counted = 0;
}

/* A send or recv error on a connection: the few that bh_cluster_open(3)
 * documents. Whatever else the network says (a host or net unreachable
 * after connecting, an abort) is the connection failing mid-request. */
static int io_error(int e)
{
	switch (e) {
	case EPIPE:
	case ECONNRESET:
	case ETIMEDOUT:
		return -e;
	case ENOMEM:
	case ENOBUFS:
		return -ENOMEM;
	default:
		return -ECONNRESET;
	}
}

static int flush_out(struct rstore *r)
{
	while (r->out_off < r->out_len) {
		ssize_t n = send(r->fd, r->out + r->out_off, r->out_len - r->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return -EINPROGRESS;
			return io_error(errno);
		}
		r->out_off += (size_t)n;
		for (; r->counted < r->queued && r->ends[r->counted] <= r->out_off; r->counted++)
			atomic_fetch_add_explicit(&r->base.commands, 1, memory_order_relaxed);
	}
	clear_out(r);
	return 0;
}

/* ---- connection ------------------------------------------------------------ */

static void close_conn(struct rstore *r)
{
	int saved = errno;

	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	if (r->ai)
		freeaddrinfo(r->ai);
	r->ai = r->ai_next = NULL;
	if (r->rd)
		redisReaderFree(r->rd);
	r->rd = NULL;
	clear_out(r);
	r->due = r->hello_n = 0;
	r->st = RS_DOWN;
	errno = saved;
}

static int new_socket(int family)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd >= 0 && family != AF_UNIX) {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	}
	return fd;
}

/* Start connecting to the next address: 0 connected, -EINPROGRESS, or
 * -EHOSTUNREACH once every address failed (the cause stays in connect_err:
 * an EACCES on a socket file must not read as an AUTH failure). */
static int connect_next(struct rstore *r)
{
	for (;;) {
		const struct sockaddr *sa;
		socklen_t len;
		struct sockaddr_un un;
		int family;

		if (r->ep.is_unix) {
			if (r->fd >= 0 || r->connect_err)
				return -EHOSTUNREACH;
			memset(&un, 0, sizeof(un));
			un.sun_family = AF_UNIX;
			memcpy(un.sun_path, r->ep.path, strlen(r->ep.path) + 1);
			sa = (const struct sockaddr *)&un;
			len = sizeof(un);
			family = AF_UNIX;
		} else {
			if (!r->ai_next)
				return -EHOSTUNREACH;
			sa = r->ai_next->ai_addr;
			len = r->ai_next->ai_addrlen;
			family = r->ai_next->ai_family;
			r->ai_next = r->ai_next->ai_next;
		}
		if (r->fd >= 0)
			close(r->fd);
		r->fd = new_socket(family);
		if (r->fd < 0)
			return errno == EMFILE || errno == ENFILE || errno == ENOMEM ? -errno
										     : -EHOSTUNREACH;
		if (connect(r->fd, sa, len) == 0)
			return 0;
		if (errno == EINPROGRESS)
			return -EINPROGRESS;
		r->connect_err = errno;
	}
}

static int begin_connect(struct rstore *r)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	int rc;

	r->connect_err = 0;
	if (!r->ep.is_unix) {
		rc = getaddrinfo(r->ep.host, r->ep.port, &hints, &r->ai);
		if (rc != 0) {
			r->ai = NULL;
			return rc == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH;
		}
		r->ai_next = r->ai;
	}
	r->st = RS_CONNECTING;
	return connect_next(r);
}

/* AUTH, SELECT and (the first time) SCRIPT LOAD, pipelined. */
static int send_hello(struct rstore *r)
{
	int rc = 0;

	r->rd = redisReaderCreate();
	if (!r->rd)
		return -ENOMEM;
	r->err = 0; /* a new exchange: an earlier one's error is not its own */
	atomic_fetch_add_explicit(&r->base.connects, 1, memory_order_relaxed);
	if (r->ep.password[0]) {
		const char *a3[] = { "AUTH", r->ep.user, r->ep.password };
		const char *a2[] = { "AUTH", r->ep.password };

		rc = r->ep.user[0] ? put_cmd(r, 3, a3) : put_cmd(r, 2, a2);
	}
	if (rc == 0 && r->ep.db) {
		char db[16];
		const char *a[] = { "SELECT", db };

		snprintf(db, sizeof(db), "%u", r->ep.db);
		rc = put_cmd(r, 2, a);
	}
	if (rc == 0 && !r->sha[0]) {
		const char *a[] = { "SCRIPT", "LOAD", lease_lua };

		rc = put_cmd(r, 3, a);
	}
	r->hello_n = r->due;
	r->st = RS_HELLO;
	return rc;
}

/* ---- errors -------------------------------------------------------------- */

static bool has(const char *s, const char *what)
{
	return strstr(s, what) != NULL;
}

/* The lease script's refusals, by the code that begins them: their text
 * goes on to quote the key, which holds the limit's name, the user's, and
 * that may contain any word looked for in the server's own errors. */
static const struct {
	const char *code;
	int err;
} script_codes[] = {
	{ "BHPROTO ", -EPROTONOSUPPORT }, { "BHMISMATCH ", -EEXIST }, { "BHTYPE ", -ENOTUNIQ },
	{ "BHNONE ", -ENOENT },           { "BHSTALE ", -EPROTO },
};

/* A server's error reply as an errno (see bh_cluster_open(3)). Messages
 * are never kept: they could quote what a user typed. */
static int map_error(const char *s)
{
	for (size_t i = 0; i < sizeof(script_codes) / sizeof(script_codes[0]); i++)
		if (strncmp(s, script_codes[i].code, strlen(script_codes[i].code)) == 0)
			return script_codes[i].err;
	if (has(s, "NOAUTH") || has(s, "WRONGPASS") || has(s, "NOPERM") ||
	    has(s, "without any password configured") || has(s, "invalid password") ||
	    has(s, "invalid username-password") || has(s, "can't run this command"))
		return -EACCES;
	if (has(s, "WRONGTYPE"))
		return -ENOTUNIQ;
	if (has(s, "LOADING") || has(s, "BUSY") || has(s, "MASTERDOWN") || has(s, "TRYAGAIN") ||
	    has(s, "CLUSTERDOWN"))
		return -EAGAIN;
	if (has(s, "READONLY"))
		return -EROFS;
	if (has(s, "MOVED") || has(s, "ASK "))
		return -EREMOTE;
	if (has(s, "OOM"))
		return -ENOSPC;
	if (has(s, "unknown command") || has(s, "DB index is out of range") ||
	    has(s, "SELECT is not allowed"))
		return -EPROTONOSUPPORT;
	return -EPROTO;
}

/* ---- replies ---------------------------------------------------------------- */

static int hello_reply(struct rstore *r, const redisReply *rep, unsigned index)
{
	bool is_load = !r->sha[0] && index == r->hello_n - 1;

	if (rep->type == REDIS_REPLY_ERROR) {
		int e = map_error(rep->str);

		/* SELECT's range error is the endpoint's fault. */
		return e == -EPROTONOSUPPORT && has(rep->str, "DB index") ? -EINVAL : e;
	}
	if (is_load) {
		if (rep->type != REDIS_REPLY_STRING || rep->len != 40)
			return -EPROTO;
		memcpy(r->sha, rep->str, 40);
		r->sha[40] = '\0';
	}
	return 0;
}

static int int_at(const redisReply *rep, size_t i, uint64_t *out)
{
	if (i >= rep->elements || rep->element[i]->type != REDIS_REPLY_INTEGER ||
	    rep->element[i]->integer < 0)
		return -EPROTO;
	*out = (uint64_t)rep->element[i]->integer;
	return 0;
}

static int renew_reply(struct rstore *r, const redisReply *rep)
{
	uint64_t v[8];

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 8)
		return -EPROTO;
	for (size_t i = 0; i < 8; i++)
		if (int_at(rep, i, &v[i]) < 0)
			return -EPROTO;
	if (v[0] > UINT32_MAX || v[2] > UINT32_MAX || v[3] > UINT32_MAX || v[7] > UINT32_MAX)
		return -EPROTO;
	r->grant = (struct bhc_grant){
		.granted = (uint32_t)v[0], .epoch = v[1], .limit = (uint32_t)v[2],
		.instances = (uint32_t)v[3], .excess = v[4], .learning_us = v[5], .lease_us = v[6],
		.target = (uint32_t)v[7],
	};
	return 0;
}

static int call_reply(struct rstore *r, const redisReply *rep)
{
	int e;

	if (rep->type == REDIS_REPLY_ERROR)
		return strncmp(rep->str, "NOSCRIPT ", 9) == 0 ? -ENOEXEC : map_error(rep->str);
	e = r->rq.op == BHC_RENEW ? renew_reply(r, rep)
				  : rep->type == REDIS_REPLY_INTEGER ? 0 : -EPROTO;
	/* No error reply: the script ran to its end (its refusals come before
	 * it writes), so a renewal did register this instance, whatever the
	 * reply we could not read. */
	if (e < 0)
		r->base.unsure = true;
	return e;
}

/* ---- the call ------------------------------------------------------------ */

static int put_call(struct rstore *r)
{
	const struct bhc_request *q = &r->rq;
	char proto[4], a[8][24];
	const char *argv[20] = { "EVALSHA", r->sha, "1", r->key, NULL, proto };
	int argc = 6;

	snprintf(proto, sizeof(proto), "%d", BHC_PROTO);
	switch (q->op) {
	case BHC_RENEW:
		argv[4] = "renew";
		argv[argc++] = q->id;
		snprintf(a[0], sizeof(a[0]), "%u", q->limit);
		snprintf(a[1], sizeof(a[1]), "%llu", (unsigned long long)q->lease_us);
		snprintf(a[2], sizeof(a[2]), "%u", q->want);
		snprintf(a[3], sizeof(a[3]), "%u", q->applied);
		snprintf(a[4], sizeof(a[4]), "%u", q->held);
		snprintf(a[5], sizeof(a[5]), "%llu", (unsigned long long)q->epoch);
		snprintf(a[6], sizeof(a[6]), "%u", q->cap);
		snprintf(a[7], sizeof(a[7]), "%llu", (unsigned long long)q->seq);
		argv[argc++] = a[0];
		argv[argc++] = a[1];
		argv[argc++] = q->check ? "1" : "0";
		argv[argc++] = q->adopt ? "1" : "0";
		argv[argc++] = q->fresh ? "1" : "0";
		argv[argc++] = a[2];
		argv[argc++] = a[6];
		argv[argc++] = a[3];
		argv[argc++] = a[4];
		argv[argc++] = a[5];
		argv[argc++] = a[7];
		break;
	case BHC_LEAVE:
		argv[4] = "leave";
		argv[argc++] = q->id;
		break;
	case BHC_LIMIT:
		argv[4] = "limit";
		snprintf(a[0], sizeof(a[0]), "%u", q->limit);
		argv[argc++] = a[0];
		break;
	}
	return put_cmd(r, argc, argv);
}

static int send_call(struct rstore *r)
{
	int rc = 0;

	if (r->reloading) {
		const char *a[] = { "SCRIPT", "LOAD", lease_lua };

		rc = put_cmd(r, 3, a);
	}
	if (rc == 0)
		rc = put_call(r);
	r->st = RS_CALL;
	r->err = 0;
	return rc;
}

/* Handle each complete reply the reader holds, while replies are due: the
 * first error is the exchange's. 0, or -EPROTO for a broken stream. */
static int take_replies(struct rstore *r)
{
	while (r->due) {
		void *reply = NULL;
		redisReply *rep;
		int e;

		if (redisReaderGetReply(r->rd, &reply) != REDIS_OK)
			return -EPROTO;
		if (!reply)
			break;
		rep = reply;
		if (r->st == RS_HELLO) {
			e = hello_reply(r, rep, r->hello_n - r->due);
		} else if (r->reloading && r->due == 2) {
			e = rep->type == REDIS_REPLY_ERROR ? map_error(rep->str) : 0;
		} else {
			e = call_reply(r, rep);
		}
		freeReplyObject(reply);
		if (e < 0 && !r->err)
			r->err = e;
		r->due--;
	}
	return 0;
}

/* Read what arrived; handle each complete reply. 0 when the exchange is
 * complete, -EINPROGRESS when more is due, -errno. */
static int read_replies(struct rstore *r)
{
	char buf[16384];

	for (;;) {
		ssize_t n;

		if (take_replies(r) < 0)
			return -EPROTO;
		if (!r->due)
			return 0;
		n = recv(r->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return -EINPROGRESS;
			return io_error(errno);
		}
		if (redisReaderFeed(r->rd, buf, (size_t)n) != REDIS_OK)
			return -EPROTO;
	}
}

static int fail(struct rstore *r, int e)
{
	close_conn(r);
	r->have_rq = false;
	return e;
}

/* The connection failed with the call (maybe) sent and unanswered. */
static int lost(struct rstore *r, int e)
{
	if (r->st == RS_CALL)
		r->base.unsure = true;
	return fail(r, e);
}

/* A step's answer when the machine moves on at once (every other answer,
 * 0, -EINPROGRESS or an error, ends advance()). */
#define NEXT 1

static int hello_or_fail(struct rstore *r)
{
	int rc = send_hello(r);

	return rc < 0 ? fail(r, rc) : NEXT;
}

static int call_or_fail(struct rstore *r)
{
	int rc = send_call(r);

	return rc < 0 ? fail(r, rc) : NEXT;
}

static int step_down(struct rstore *r)
{
	int rc = begin_connect(r);

	if (rc == -EINPROGRESS)
		return rc;
	if (rc < 0)
		return fail(r, rc);
	return hello_or_fail(r);
}

static int step_connecting(struct rstore *r)
{
	int err = 0, rc;
	socklen_t len = sizeof(err);

	if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err == 0) {
		struct pollfd p = { .fd = r->fd, .events = POLLOUT };

		if (poll(&p, 1, 0) == 0)
			return -EINPROGRESS; /* not yet */
		return hello_or_fail(r);
	}
	r->connect_err = err;
	rc = connect_next(r);
	if (rc == -EINPROGRESS)
		return rc;
	if (rc < 0)
		return fail(r, rc);
	return hello_or_fail(r);
}

/* HELLO or CALL sent: write what is left, read the replies. */
static int step_exchange(struct rstore *r, struct bhc_grant *g)
{
	int rc = flush_out(r);

	if (rc == 0)
		rc = read_replies(r);
	if (rc == -EINPROGRESS)
		return rc;
	/* A connection that sat idle may have been closed by the server (its
	 * idle timeout, a restart, a proxy): that says nothing about the
	 * store. Reconnect and send the request again, once. A renewal sent
	 * again goes with the next sequence number (the layer leaves it free):
	 * the first copy may not be lost but delayed, and reach the store
	 * after the second; as the older one it is refused there, instead of
	 * replacing the record with one computed from the state before. */
	if ((rc == -EPIPE || rc == -ECONNRESET) && r->st == RS_CALL && r->reused) {
		r->reused = false;
		r->rq.seq++;
		r->base.unsure = true;
		close_conn(r);
		return NEXT;
	}
	if (rc < 0)
		return lost(r, rc);
	if (r->err == -ENOEXEC && r->st == RS_CALL && !r->reloading) {
		r->reloading = true; /* NOSCRIPT: load and call again */
		return call_or_fail(r);
	}
	if (r->err < 0)
		return fail(r, r->err == -ENOEXEC ? -EPROTO : r->err);
	if (r->st == RS_HELLO) {
		r->st = RS_READY;
		return NEXT;
	}
	r->st = RS_READY;
	r->have_rq = false;
	if (r->rq.op == BHC_RENEW)
		*g = r->grant;
	return 0;
}

/* One step of the machine; loops while progress needs no waiting. */
static int advance(struct bhc_store *s, struct bhc_grant *g)
{
	struct rstore *r = rs_of(s);
	int rc = NEXT;

	if (!r->have_rq)
		return -EINVAL;
	while (rc == NEXT) {
		switch (r->st) {
		case RS_DOWN:
			rc = step_down(r);
			break;
		case RS_CONNECTING:
			rc = step_connecting(r);
			break;
		case RS_HELLO:
		case RS_CALL:
			rc = step_exchange(r, g);
			break;
		case RS_READY:
			r->reloading = false;
			rc = call_or_fail(r);
			break;
		}
	}
	return rc;
}

static int start(struct bhc_store *s, const struct bhc_request *rq)
{
	struct rstore *r = rs_of(s);

	if (r->have_rq)
		return -EBUSY;
	r->rq = *rq;
	r->have_rq = true;
	r->base.unsure = false;
	r->reused = r->st == RS_READY;
	return 0;
}

static int store_fd(const struct bhc_store *s, short *events)
{
	const struct rstore *r = (const struct rstore *)s;

	if (r->fd < 0 || r->st == RS_DOWN || r->st == RS_READY) {
		*events = 0;
		return -1;
	}
	*events = r->st == RS_CONNECTING || r->out_off < r->out_len ? POLLOUT : POLLIN;
	return r->fd;
}

static int drop(struct bhc_store *s)
{
	struct rstore *r = rs_of(s);
	bool connected = r->st >= RS_HELLO;

	lost(r, 0);
	return connected ? -ETIMEDOUT : -EHOSTUNREACH;
}

static void store_free(struct bhc_store *s)
{
	struct rstore *r = rs_of(s);

	if (!r)
		return;
	close_conn(r);
	bhc_endpoint_wipe(&r->ep);
	if (r->out)
		explicit_bzero(r->out, r->out_cap);
	free(r->out);
	free(r);
}

static const struct bhc_store_ops redis_ops = {
	.start = start,
	.advance = advance,
	.fd = store_fd,
	.drop = drop,
	.free = store_free,
};

int bhc_redis_new(const struct bhc_endpoint *ep, const char *name, struct bhc_store **out)
{
	struct rstore *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->base.ops = &redis_ops;
	r->ep = *ep;
	r->fd = -1;
	snprintf(r->key, sizeof(r->key), "{bh:%s}", name);
	*out = &r->base;
	return 0;
}
