/* Adaptive limits in the Prometheus text format: what each controller
 * set, measured and why (families in include/bulkhead/adaptive.h). A cold
 * path: one bh_adaptive_stats per controller, formatted like snprintf. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bha.h"
#include "lib/utf8.h"

struct out {
	char *buf;
	size_t len, pos;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->pos < o->len ? o->buf + o->pos : NULL, o->pos < o->len ? o->len - o->pos : 0,
		      fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

/* The name label, escaped as Prometheus wants (backslash, quote, newline);
 * a byte that is not UTF-8 becomes U+FFFD (lib/utf8.h says why). */
static void put_name(struct out *o, const bh_adaptive_t *a)
{
	const char *s = a->name ? a->name : "adaptive";

	put(o, "name=\"");
	while (*s) {
		size_t n = bhi_utf8_len(s);

		if (*s == '\\' || *s == '"')
			put(o, "\\%c", *s);
		else if (*s == '\n')
			put(o, "\\n");
		else if (n == 0)
			put(o, BHI_UTF8_REPLACEMENT);
		else
			put(o, "%.*s", (int)n, s);
		s += n ? n : 1;
	}
	put(o, "\"");
}

static void put_secs(struct out *o, uint64_t ns)
{
	put(o, "%llu.%09llu", (unsigned long long)(ns / BH_SEC), (unsigned long long)(ns % BH_SEC));
}

enum { F_LIMIT, F_BASELINE, F_SAMPLE, F_PEAK, F_PROBING, F_REASON, F_CHANGES, F_WINDOWS,
       F_SAMPLES, F_COUNT };

struct family {
	const char *name, *type, *help;
};

static const struct family fam[F_COUNT] = {
	{ "bulkhead_adaptive_limit", "gauge", "Limit the controller last set." },
	{ "bulkhead_adaptive_baseline_seconds", "gauge", "Unloaded latency estimate." },
	{ "bulkhead_adaptive_sample_seconds", "gauge", "Last window's latency sample." },
	{ "bulkhead_adaptive_window_peak", "gauge", "Most calls in flight in the last window." },
	{ "bulkhead_adaptive_probing", "gauge", "1 while the limit is pinned for a probe." },
	{ "bulkhead_adaptive_last_change_reason", "gauge", "Why the limit last changed (1)." },
	{ "bulkhead_adaptive_changes_total", "counter", "Limit changes, by reason." },
	{ "bulkhead_adaptive_windows_total", "counter", "Windows closed." },
	{ "bulkhead_adaptive_samples_total", "counter", "Samples, by outcome." },
};

/* The families with labels: the reason in force, one series per reason or
 * per outcome. False for a family without. */
static bool put_labelled(struct out *o, unsigned f, bh_adaptive_t *c,
			 const struct bh_adaptive_stats *s)
{
	const uint64_t by_outcome[] = { s->ok, s->dropped, s->ignored, s->discarded };
	static const char *const outcome[] = { "ok", "dropped", "ignored", "discarded" };

	switch (f) {
	case F_REASON:
		put(o, "%s{", fam[f].name);
		put_name(o, c);
		put(o, ",reason=\"%s\"} 1\n", bh_adaptive_reason_name(s->reason));
		return true;
	case F_CHANGES:
		for (unsigned r = 0; r < BH_ADAPTIVE_NREASONS; r++) {
			put(o, "%s{", fam[f].name);
			put_name(o, c);
			put(o, ",reason=\"%s\"} %llu\n", bh_adaptive_reason_name(r),
			    (unsigned long long)atomic_load_explicit(&c->s_by_reason[r],
								     memory_order_relaxed));
		}
		return true;
	case F_SAMPLES:
		for (unsigned k = 0; k < 4; k++) {
			put(o, "%s{", fam[f].name);
			put_name(o, c);
			put(o, ",outcome=\"%s\"} %llu\n", outcome[k], (unsigned long long)by_outcome[k]);
		}
		return true;
	}
	return false;
}

static void put_plain(struct out *o, unsigned f, bh_adaptive_t *c,
		      const struct bh_adaptive_stats *s)
{
	put(o, "%s{", fam[f].name);
	put_name(o, c);
	put(o, "} ");
	if (f == F_LIMIT)
		put(o, "%u", s->limit);
	else if (f == F_BASELINE)
		put_secs(o, s->baseline_ns);
	else if (f == F_SAMPLE)
		put_secs(o, s->sample_ns);
	else if (f == F_PEAK)
		put(o, "%u", s->window_peak);
	else if (f == F_PROBING)
		put(o, "%u", s->probing);
	else
		put(o, "%llu", (unsigned long long)s->windows);
	put(o, "\n");
}

static void family(struct out *o, unsigned f, bh_adaptive_t *const *ctl,
		   const struct bh_adaptive_stats *st, size_t n)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", fam[f].name, fam[f].help, fam[f].name, fam[f].type);
	for (size_t i = 0; i < n; i++)
		if (!put_labelled(o, f, ctl[i], &st[i]))
			put_plain(o, f, ctl[i], &st[i]);
}

ssize_t bh_adaptive_metrics_prometheus(bh_adaptive_t *const *ctl, size_t n, char *buf,
				       size_t len)
{
	struct bh_adaptive_stats *st;
	struct out o = { buf, len, 0 };
	int saved = errno; /* the library never sets errno */

	if ((!ctl && n) || (!buf && len))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!ctl[i])
			return -EINVAL;
	st = calloc(n ? n : 1, sizeof(*st));
	errno = saved;
	if (!st)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		bh_adaptive_stats(ctl[i], &st[i]);
	if (len)
		buf[0] = '\0';
	for (unsigned f = 0; f < F_COUNT; f++)
		family(&o, f, ctl, st, n);
	if (len && o.pos >= len)
		buf[len - 1] = '\0';
	free(st);
	return (ssize_t)o.pos;
}
