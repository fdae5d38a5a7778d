/* A fuzz harness for the cluster layer's endpoint strings
 * (src/cluster/endpoint.c, compiled into the harness: it needs no hiredis).
 *
 * The input is the string (cut at its first NUL). The parser must return 0
 * or one of its documented errors (-EINVAL, -ENAMETOOLONG,
 * -EPROTONOSUPPORT); after an error the credentials are wiped. After a
 * success every field is a terminated string inside its buffer, a TCP host
 * is non-empty with no blank, '@' or '/', the port is decimal in 1..65535,
 * a unix path starts with '/', and a user comes only with a password. Then
 * the round trip: the endpoint printed back as a string (credentials
 * %-encoded, an IPv6-looking host in brackets) parses to the same endpoint;
 * and parsing the same string twice gives the same result.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "endpoint.h"
#include "fuzz_seeds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *input;

static void fail(const char *what, const char *also)
{
	fprintf(stderr, "bhfuzz: endpoint '%s': %s%s%s\n", input, what, also ? ": " : "",
		also ? also : "");
	abort();
}

static bool terminated(const char *buf, size_t cap)
{
	return memchr(buf, '\0', cap) != NULL;
}

static bool all_zero(const char *buf, size_t cap)
{
	for (size_t i = 0; i < cap; i++)
		if (buf[i])
			return false;
	return true;
}

/* Append s to out, %-encoding every byte but letters and digits. */
static size_t encode(char *out, size_t o, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	return o;
}

/* The endpoint as a string the parser accepts (the printer the parser has
 * not: this is its specification's inverse). */
static void print(const struct bhc_endpoint *ep, char *out)
{
	size_t o = 0;

	o += (size_t)sprintf(out, "%s", ep->is_unix ? "unix://" : "redis://");
	if (ep->password[0]) {
		o = encode(out, o, ep->user);
		out[o++] = ':';
		o = encode(out, o, ep->password);
		out[o++] = '@';
	}
	if (ep->is_unix) {
		o += (size_t)sprintf(out + o, "%s", ep->path);
		if (ep->db)
			o += (size_t)sprintf(out + o, "?db=%u", ep->db);
	} else {
		bool brackets = strchr(ep->host, ':') || ep->host[0] == '[';

		o += (size_t)sprintf(out + o, brackets ? "[%s]:%s" : "%s:%s", ep->host, ep->port);
		if (ep->db)
			o += (size_t)sprintf(out + o, "/%u", ep->db);
	}
	out[o] = '\0';
}

static bool same(const struct bhc_endpoint *a, const struct bhc_endpoint *b)
{
	return a->is_unix == b->is_unix && a->db == b->db && !strcmp(a->host, b->host) &&
	       !strcmp(a->port, b->port) && !strcmp(a->path, b->path) &&
	       !strcmp(a->user, b->user) && !strcmp(a->password, b->password);
}

static void check_ok(const struct bhc_endpoint *ep)
{
	unsigned long port;
	char *end;

	if (!terminated(ep->host, sizeof(ep->host)) || !terminated(ep->port, sizeof(ep->port)) ||
	    !terminated(ep->path, sizeof(ep->path)) || !terminated(ep->user, sizeof(ep->user)) ||
	    !terminated(ep->password, sizeof(ep->password)))
		fail("a field is not terminated", NULL);
	if (ep->user[0] && !ep->password[0])
		fail("a user without a password", ep->user);
	if (ep->db > 2147483647u)
		fail("db out of range", NULL);
	if (ep->is_unix) {
		if (ep->path[0] != '/' || !ep->path[1] || ep->host[0] || ep->port[0])
			fail("a unix endpoint with a bad path or a host", ep->path);
		return;
	}
	if (!ep->host[0] || ep->path[0])
		fail("a TCP endpoint without a host, or with a path", ep->host);
	for (const char *p = ep->host; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == '@' || *p == '/')
			fail("a host with a blank, '@' or '/'", ep->host);
	if (ep->port[0] < '0' || ep->port[0] > '9')
		fail("a port that is not decimal", ep->port);
	port = strtoul(ep->port, &end, 10);
	if (*end || port == 0 || port > 65535)
		fail("a port out of 1..65535", ep->port);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bhc_endpoint ep, again, back;
	char *s = malloc(size + 1);
	char printed[4 * (BHC_CRED_MAX * 3 + BHC_HOST_MAX + sizeof(ep.path))];
	int r, r2;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	input = s;
	r = bhc_endpoint_parse(s, &ep);
	if (r != 0 && r != -EINVAL && r != -ENAMETOOLONG && r != -EPROTONOSUPPORT)
		fail("an undocumented result", strerror(-r));
	r2 = bhc_endpoint_parse(s, &again);
	if (r2 != r || (r == 0 && !same(&ep, &again)))
		fail("two parses of one string differ", NULL);
	if (r < 0) {
		if (!all_zero(ep.user, sizeof(ep.user)) || !all_zero(ep.password, sizeof(ep.password)))
			fail("credentials left behind after an error", NULL);
		free(s);
		return 0;
	}
	check_ok(&ep);
	print(&ep, printed);
	r = bhc_endpoint_parse(printed, &back);
	if (r != 0)
		fail("its printed form is refused", printed);
	if (!same(&ep, &back))
		fail("its printed form parses to another endpoint", printed);
	bhc_endpoint_wipe(&ep);
	if (!all_zero(ep.user, sizeof(ep.user)) || !all_zero(ep.password, sizeof(ep.password)))
		fail("bhc_endpoint_wipe left credentials", NULL);
	free(s);
	return 0;
}

#define SEED(name, s) { name, (const uint8_t *)(s), sizeof(s) - 1 }

const struct bhf_seed bhf_seeds[] = {
	SEED("tcp", "redis://127.0.0.1:6379"),
	SEED("tcp-default-port", "redis://localhost"),
	SEED("tcp-db", "redis://localhost:6380/3"),
	SEED("tcp-slash", "redis://localhost:6380/"),
	SEED("tcp-auth", "redis://alice:s%40cret@cache.internal:7000/1"),
	SEED("tcp-password-only", "redis://:pw@h"),
	SEED("tcp-at-in-password", "redis://u:a@b@h:1"),
	SEED("tcp-v6", "redis://[::1]:6379/2"),
	SEED("tcp-v6-noport", "redis://[fe80::1%25eth0]"),
	SEED("unix", "unix:///run/redis/redis.sock"),
	SEED("unix-db", "unix:///tmp/r.sock?db=5"),
	SEED("unix-auth", "unix://u:p@/tmp/r.sock?db=1"),
	SEED("tls", "rediss://h:6379"),
	SEED("bad-port", "redis://h:65536"),
	SEED("bad-port-zero", "redis://h:0"),
	SEED("bad-db", "redis://h/2147483648"),
	SEED("bad-user-only", "redis://alice@h"),
	SEED("bad-percent", "redis://u:%0@h"),
	SEED("bad-nul-escape", "redis://u:%00@h"),
	SEED("bad-scheme", "http://h"),
	SEED("bad-unix-query", "unix:///x?dbx=1"),
	SEED("bad-v6", "redis://[::1"),
	SEED("empty", ""),
};
const unsigned bhf_nseeds = sizeof(bhf_seeds) / sizeof(bhf_seeds[0]);
