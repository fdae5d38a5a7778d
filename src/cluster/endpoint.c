/* Endpoint strings: redis://[user[:password]@]host[:port][/db] and
 * unix://[user[:password]@]/path[?db=N]. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "endpoint.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Copy [s, s + n) into dst (cap bytes), decoding %XX. */
static int decode(char *dst, size_t cap, const char *s, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= n)
				return -EINVAL;
			hi = hexval(s[i + 1]);
			lo = hexval(s[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -EINVAL; /* %00 would cut the string */
			c = (char)(hi * 16 + lo);
			i += 2;
		}
		if (o + 1 >= cap)
			return -ENAMETOOLONG;
		dst[o++] = c;
	}
	dst[o] = '\0';
	return 0;
}

static int parse_uint(const char *s, size_t n, unsigned long max, unsigned long *out)
{
	unsigned long v = 0;

	if (n == 0 || n > 10)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "user:password", ":password" (password only). A user alone is refused:
 * there is no AUTH without a password. */
static int parse_userinfo(const char *s, size_t n, struct bhc_endpoint *ep)
{
	const char *colon = memchr(s, ':', n);
	int r;

	if (!colon)
		return -EINVAL;
	if ((r = decode(ep->user, sizeof(ep->user), s, (size_t)(colon - s))) < 0)
		return r;
	if ((r = decode(ep->password, sizeof(ep->password), colon + 1,
			n - (size_t)(colon - s) - 1)) < 0)
		return r;
	return ep->password[0] ? 0 : -EINVAL;
}

/* Split off "userinfo@" in front of rest (only before the first '/'). */
static int take_userinfo(const char **rest, struct bhc_endpoint *ep)
{
	const char *s = *rest;
	size_t span = strcspn(s, "/?");
	const char *at = memchr(s, '@', span);
	int r;

	if (!at)
		return 0;
	/* The last '@' before the path: passwords may contain '@' unencoded. */
	for (const char *p = at; p < s + span; p++)
		if (*p == '@')
			at = p;
	if ((r = parse_userinfo(s, (size_t)(at - s), ep)) < 0)
		return r;
	*rest = at + 1;
	return 0;
}

/* Where the host and the port (NULL: none) are in s: "[v6]:port" or
 * "host:port", each port optional. */
static int split_host_port(const char *s, size_t n, const char **host, size_t *hlen,
			   const char **port)
{
	*host = s;
	*hlen = n;
	*port = NULL;
	if (n && s[0] == '[') {
		const char *close = memchr(s, ']', n);

		if (!close)
			return -EINVAL;
		*host = s + 1;
		*hlen = (size_t)(close - s) - 1;
		if (close + 1 < s + n) {
			if (close[1] != ':')
				return -EINVAL;
			*port = close + 2;
		}
	} else {
		const char *colon = memchr(s, ':', n);

		if (colon) {
			*hlen = (size_t)(colon - s);
			*port = colon + 1;
		}
	}
	return 0;
}

static int parse_host_port(const char *s, size_t n, struct bhc_endpoint *ep)
{
	const char *host, *port;
	size_t hlen;
	unsigned long v;

	if (split_host_port(s, n, &host, &hlen, &port) < 0 || hlen == 0)
		return -EINVAL;
	if (hlen >= sizeof(ep->host))
		return -ENAMETOOLONG;
	for (size_t i = 0; i < hlen; i++)
		if ((unsigned char)host[i] <= ' ' || host[i] == '@' || host[i] == '/')
			return -EINVAL;
	memcpy(ep->host, host, hlen);
	ep->host[hlen] = '\0';
	if (!port) {
		strcpy(ep->port, "6379");
		return 0;
	}
	if (parse_uint(port, (size_t)(s + n - port), 65535, &v) < 0 || v == 0)
		return -EINVAL;
	/* The number, not the text: leading zeros would not fit (port[8]). */
	snprintf(ep->port, sizeof(ep->port), "%lu", v);
	return 0;
}

static int parse_db(const char *s, size_t n, struct bhc_endpoint *ep)
{
	unsigned long v;

	if (parse_uint(s, n, INT32_MAX, &v) < 0)
		return -EINVAL;
	ep->db = (unsigned)v;
	return 0;
}

static int parse_redis(const char *s, struct bhc_endpoint *ep)
{
	size_t hp = strcspn(s, "/?#");
	int r;

	if ((r = parse_host_port(s, hp, ep)) < 0)
		return r;
	s += hp;
	if (*s == '\0')
		return 0;
	if (*s != '/')
		return -EINVAL;
	s++;
	if (*s == '\0')
		return 0; /* "host:port/" */
	return parse_db(s, strlen(s), ep);
}

static int parse_unix(const char *s, struct bhc_endpoint *ep)
{
	const char *q = strchr(s, '?');
	size_t plen = q ? (size_t)(q - s) : strlen(s);

	if (plen < 2 || s[0] != '/')
		return -EINVAL;
	if (plen >= sizeof(ep->path))
		return -ENAMETOOLONG;
	memcpy(ep->path, s, plen);
	ep->path[plen] = '\0';
	ep->is_unix = true;
	if (!q)
		return 0;
	if (strncmp(q, "?db=", 4) != 0)
		return -EINVAL;
	return parse_db(q + 4, strlen(q + 4), ep);
}

int bhc_endpoint_parse(const char *s, struct bhc_endpoint *ep)
{
	int r;

	memset(ep, 0, sizeof(*ep));
	if (!s)
		return -EINVAL;
	if (strncmp(s, "rediss://", 9) == 0)
		return -EPROTONOSUPPORT;
	if (strncmp(s, "redis://", 8) == 0) {
		s += 8;
		if ((r = take_userinfo(&s, ep)) == 0)
			r = parse_redis(s, ep);
	} else if (strncmp(s, "unix://", 7) == 0) {
		s += 7;
		if ((r = take_userinfo(&s, ep)) == 0)
			r = parse_unix(s, ep);
	} else {
		r = -EINVAL;
	}
	if (r < 0)
		bhc_endpoint_wipe(ep);
	return r;
}

void bhc_endpoint_wipe(struct bhc_endpoint *ep)
{
	explicit_bzero(ep->user, sizeof(ep->user));
	explicit_bzero(ep->password, sizeof(ep->password));
}
