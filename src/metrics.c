/* Metrics export. Cold path: snapshots are taken with bh_stats (heap, one
 * per bulkhead) and formatted into a buffer or a stream. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bulkhead/metrics.h"
#include "internal.h"

/* Where text goes: a caller's buffer (counting what would not fit, like
 * snprintf) or a stream. */
struct out {
	char *buf;
	size_t len, pos;
	FILE *f;
	int err;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	if (o->f) {
		if (vfprintf(o->f, fmt, ap) < 0)
			o->err = -EIO;
	} else {
		n = vsnprintf(o->pos < o->len ? o->buf + o->pos : NULL,
			      o->pos < o->len ? o->len - o->pos : 0, fmt, ap);
		if (n > 0)
			o->pos += (size_t)n;
	}
	va_end(ap);
}

static void put_char(struct out *o, char c)
{
	put(o, "%c", c);
}

/* Prometheus label values escape backslash, double quote and newline. */
static void put_label(struct out *o, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			put(o, "\\%c", *s);
		else if (*s == '\n')
			put(o, "\\n");
		else
			put_char(o, *s);
	}
}

/* JSON strings escape quote, backslash and every control character. */
static void put_json_string(struct out *o, const char *s)
{
	put_char(o, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			put(o, "\\%c", c);
		else if (c < 0x20)
			put(o, "\\u%04x", c);
		else
			put_char(o, (char)c);
	}
	put_char(o, '"');
}

struct snap {
	const struct bulkhead *bh;
	struct bh_stats st;
};

static struct snap *take_snaps(const struct bh_metric_set *set)
{
	struct snap *s = calloc(set->n_bulkheads ? set->n_bulkheads : 1, sizeof(*s));

	for (size_t i = 0; s && i < set->n_bulkheads; i++) {
		s[i].bh = set->bulkheads[i];
		bh_stats(set->bulkheads[i], &s[i].st);
	}
	return s;
}

static bool valid(const struct bh_metric_set *set)
{
	if (!set || (set->n_bulkheads && !set->bulkheads))
		return false;
	for (size_t i = 0; i < set->n_bulkheads; i++)
		if (!set->bulkheads[i])
			return false;
	return true;
}

/* ---- Prometheus ------------------------------------------------------------- */

struct scalar {
	const char *name, *type, *help;
	size_t offset; /* of a uint64_t in struct bh_stats */
};

static const struct scalar scalars[] = {
	{ "bulkhead_limit", "gauge", "Permits in force (max_concurrent).",
	  offsetof(struct bh_stats, limit) },
	{ "bulkhead_in_flight", "gauge", "Permits held now.", offsetof(struct bh_stats, in_flight) },
	{ "bulkhead_queued", "gauge", "Waiters queued now.", offsetof(struct bh_stats, queued) },
	{ "bulkhead_acquired_total", "counter", "Successful acquires.",
	  offsetof(struct bh_stats, acquired) },
	{ "bulkhead_released_total", "counter", "Successful releases.",
	  offsetof(struct bh_stats, released) },
	{ "bulkhead_rejected_total", "counter", "Acquires refused at once: no permit, no queue room.",
	  offsetof(struct bh_stats, rejected) },
	{ "bulkhead_timed_out_total", "counter", "Queued acquires whose deadline passed.",
	  offsetof(struct bh_stats, timed_out) },
	{ "bulkhead_cancelled_total", "counter", "Queued acquires cancelled.",
	  offsetof(struct bh_stats, cancelled) },
	{ "bulkhead_over_released_total", "counter", "Releases refused: more than held.",
	  offsetof(struct bh_stats, over_released) },
};

struct histo {
	const char *name, *help;
	size_t offset; /* of a struct bh_hist in struct bh_stats */
	bool hold;     /* only for bulkheads that track hold times */
};

static const struct histo histos[] = {
	{ "bulkhead_wait_seconds", "Queued acquires: time from enqueue to grant.",
	  offsetof(struct bh_stats, wait), false },
	{ "bulkhead_wait_failed_seconds",
	  "Queued acquires: time from enqueue to timeout, close or cancel.",
	  offsetof(struct bh_stats, wait_failed), false },
	{ "bulkhead_hold_seconds", "Time from grant to release.", offsetof(struct bh_stats, hold),
	  true },
};

static void put_head(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_sample_start(struct out *o, const char *name, const char *suffix,
			     const struct bulkhead *bh)
{
	put(o, "%s%s{name=\"", name, suffix);
	put_label(o, bh->name);
	put_char(o, '"');
}

/* Nanoseconds as exact decimal seconds, trailing zeros trimmed: a bucket
 * bound printed with %g would round, and "le" must be the real bound. */
static void put_seconds(struct out *o, uint64_t ns)
{
	char frac[10];
	int n = 9;

	snprintf(frac, sizeof(frac), "%09llu", (unsigned long long)(ns % BH_SEC));
	while (n > 0 && frac[n - 1] == '0')
		frac[--n] = '\0';
	put(o, "%llu%s%s", (unsigned long long)(ns / BH_SEC), n ? "." : "", frac);
}

/* One boundary per power of two: the fine buckets below it add up exactly. */
static void put_histogram(struct out *o, const char *name, const struct bulkhead *bh,
			  const struct bh_hist *h)
{
	uint64_t cum = 0, upper;
	unsigned b = 0;

	for (unsigned shift = BH_HIST_MIN_SHIFT; shift <= BH_HIST_MAX_SHIFT; shift++) {
		for (; b < BH_HIST_BUCKETS - 1; b++) {
			bh_hist_bounds(b, NULL, &upper);
			if (upper > (1ull << shift))
				break;
			cum += h->buckets[b];
		}
		put_sample_start(o, name, "_bucket", bh);
		put(o, ",le=\"");
		put_seconds(o, 1ull << shift);
		put(o, "\"} %llu\n", (unsigned long long)cum);
	}
	put_sample_start(o, name, "_bucket", bh);
	put(o, ",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
	put_sample_start(o, name, "_sum", bh);
	put(o, "} %.9f\n", (double)h->sum_ns / 1e9);
	put_sample_start(o, name, "_count", bh);
	put(o, "} %llu\n", (unsigned long long)h->count);
}

static void prometheus(struct out *o, const struct snap *s, size_t n)
{
	if (n == 0)
		return; /* no families without samples */
	for (size_t k = 0; k < sizeof(scalars) / sizeof(scalars[0]); k++) {
		const struct scalar *m = &scalars[k];

		put_head(o, m->name, m->type, m->help);
		for (size_t i = 0; i < n; i++) {
			put_sample_start(o, m->name, "", s[i].bh);
			put(o, "} %llu\n",
			    (unsigned long long)*(const uint64_t *)((const char *)&s[i].st +
								    m->offset));
		}
	}
	for (size_t k = 0; k < sizeof(histos) / sizeof(histos[0]); k++) {
		const struct histo *m = &histos[k];
		bool any = false;

		for (size_t i = 0; i < n; i++)
			any |= !m->hold || s[i].bh->hold != NULL;
		if (!any)
			continue;
		put_head(o, m->name, "histogram", m->help);
		for (size_t i = 0; i < n; i++)
			if (!m->hold || s[i].bh->hold)
				put_histogram(o, m->name, s[i].bh,
					      (const struct bh_hist *)((const char *)&s[i].st +
								       m->offset));
	}
}

/* ---- JSON ------------------------------------------------------------------------- */

static void put_json_hist(struct out *o, const char *key, const struct bh_hist *h)
{
	static const double q[] = { 0.5, 0.9, 0.99, 0.999 };
	static const char *qname[] = { "p50", "p90", "p99", "p999" };

	put(o, ",\"%s\":{\"count\":%llu,\"sum_seconds\":%.9f", key, (unsigned long long)h->count,
	    (double)h->sum_ns / 1e9);
	for (int i = 0; i < 4; i++)
		put(o, ",\"%s\":%.9f", qname[i], (double)bh_hist_quantile(h, q[i]) / 1e9);
	put_char(o, '}');
}

static void json(struct out *o, const struct snap *s, size_t n)
{
	put(o, "{\"bulkheads\":[");
	for (size_t i = 0; i < n; i++) {
		const struct bh_stats *st = &s[i].st;

		put(o, "%s{\"name\":", i ? "," : "");
		put_json_string(o, s[i].bh->name);
		for (size_t k = 0; k < sizeof(scalars) / sizeof(scalars[0]); k++) {
			const char *key = scalars[k].name + strlen("bulkhead_");
			size_t keylen = strlen(key);

			if (keylen > 6 && !strcmp(key + keylen - 6, "_total"))
				keylen -= 6;
			put(o, ",\"%.*s\":%llu", (int)keylen, key,
			    (unsigned long long)*(const uint64_t *)((const char *)st +
								    scalars[k].offset));
		}
		put_json_hist(o, "wait", &st->wait);
		put_json_hist(o, "wait_failed", &st->wait_failed);
		if (s[i].bh->hold)
			put_json_hist(o, "hold", &st->hold);
		put_char(o, '}');
	}
	put(o, "]}\n");
}

/* ---- entry points ----------------------------------------------------------------- */

typedef void format_fn(struct out *o, const struct snap *s, size_t n);

static ssize_t to_buffer(const struct bh_metric_set *set, char *buf, size_t len, format_fn *fmt)
{
	struct out o = { .buf = buf, .len = buf ? len : 0 };
	struct snap *s;

	if (!valid(set) || (len && !buf))
		return -EINVAL;
	if (!(s = take_snaps(set)))
		return -ENOMEM;
	if (o.len)
		o.buf[0] = '\0';
	fmt(&o, s, set->n_bulkheads);
	free(s);
	return (ssize_t)o.pos;
}

static int to_file(const struct bh_metric_set *set, FILE *f, format_fn *fmt)
{
	struct out o = { .f = f };
	struct snap *s;

	if (!valid(set) || !f)
		return -EINVAL;
	if (!(s = take_snaps(set)))
		return -ENOMEM;
	fmt(&o, s, set->n_bulkheads);
	free(s);
	return o.err;
}

ssize_t bh_metrics_prometheus(const struct bh_metric_set *set, char *buf, size_t len)
{
	return to_buffer(set, buf, len, prometheus);
}

ssize_t bh_metrics_json(const struct bh_metric_set *set, char *buf, size_t len)
{
	return to_buffer(set, buf, len, json);
}

int bh_metrics_prometheus_file(const struct bh_metric_set *set, FILE *f)
{
	return to_file(set, f, prometheus);
}

int bh_metrics_json_file(const struct bh_metric_set *set, FILE *f)
{
	return to_file(set, f, json);
}
