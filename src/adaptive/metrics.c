/* Adaptive limits in the Prometheus text format: what each controller
 * set, measured and why (families in include/bulkhead/adaptive.h). A cold
 * path: one bh_adaptive_stats per controller, formatted like snprintf. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bha.h"
#include "lib/textout.h"

/* The name label, escaped as Prometheus wants (bhi_put_label). */
static void put_name(struct bhi_out *o, const bh_adaptive_t *a)
{
	bhi_put(o, "name=\"");
	bhi_put_label(o, a->name ? a->name : "adaptive");
	bhi_put(o, "\"");
}

static void put_secs(struct bhi_out *o, uint64_t ns)
{
	bhi_put(o, "%llu.%09llu", (unsigned long long)(ns / BH_SEC), (unsigned long long)(ns % BH_SEC));
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
static bool put_labelled(struct bhi_out *o, unsigned f, bh_adaptive_t *c,
			 const struct bh_adaptive_stats *s)
{
	const uint64_t by_outcome[] = { s->ok, s->dropped, s->ignored, s->discarded };
	static const char *const outcome[] = { "ok", "dropped", "ignored", "discarded" };

	switch (f) {
	case F_REASON:
		bhi_put(o, "%s{", fam[f].name);
		put_name(o, c);
		bhi_put(o, ",reason=\"%s\"} 1\n", bh_adaptive_reason_name(s->reason));
		return true;
	case F_CHANGES:
		for (unsigned r = 0; r < BH_ADAPTIVE_NREASONS; r++) {
			bhi_put(o, "%s{", fam[f].name);
			put_name(o, c);
			bhi_put(o, ",reason=\"%s\"} %llu\n", bh_adaptive_reason_name(r),
			    (unsigned long long)atomic_load_explicit(&c->s_by_reason[r],
								     memory_order_relaxed));
		}
		return true;
	case F_SAMPLES:
		for (unsigned k = 0; k < 4; k++) {
			bhi_put(o, "%s{", fam[f].name);
			put_name(o, c);
			bhi_put(o, ",outcome=\"%s\"} %llu\n", outcome[k], (unsigned long long)by_outcome[k]);
		}
		return true;
	}
	return false;
}

static void put_plain(struct bhi_out *o, unsigned f, bh_adaptive_t *c,
		      const struct bh_adaptive_stats *s)
{
	bhi_put(o, "%s{", fam[f].name);
	put_name(o, c);
	bhi_put(o, "} ");
	if (f == F_LIMIT)
		bhi_put(o, "%u", s->limit);
	else if (f == F_BASELINE)
		put_secs(o, s->baseline_ns);
	else if (f == F_SAMPLE)
		put_secs(o, s->sample_ns);
	else if (f == F_PEAK)
		bhi_put(o, "%u", s->window_peak);
	else if (f == F_PROBING)
		bhi_put(o, "%u", s->probing);
	else
		bhi_put(o, "%llu", (unsigned long long)s->windows);
	bhi_put(o, "\n");
}

static void family(struct bhi_out *o, unsigned f, bh_adaptive_t *const *ctl,
		   const struct bh_adaptive_stats *st, size_t n)
{
	bhi_put(o, "# HELP %s %s\n# TYPE %s %s\n", fam[f].name, fam[f].help, fam[f].name, fam[f].type);
	for (size_t i = 0; i < n; i++)
		if (!put_labelled(o, f, ctl[i], &st[i]))
			put_plain(o, f, ctl[i], &st[i]);
}

ssize_t bh_adaptive_metrics_prometheus(bh_adaptive_t *const *ctl, size_t n, char *buf,
				       size_t len)
{
	struct bh_adaptive_stats *st;
	struct bhi_out o = { .buf = buf, .len = len };
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
