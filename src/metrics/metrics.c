/* Metrics export. Cold path: snapshots are taken with bh_stats (heap, one
 * per bulkhead) and formatted into a buffer or a stream. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bulkhead/metrics.h"
#include "core/layer.h"
#include "lib/textout.h"
#include "lib/utf8.h"

static void put_char(struct bhi_out *o, char c)
{
	bhi_put(o, "%c", c);
}

/* JSON strings escape quote, backslash and every control character; a
 * byte that is not UTF-8 becomes U+FFFD. */
static void put_json_string(struct bhi_out *o, const char *s)
{
	put_char(o, '"');
	while (*s) {
		unsigned char c = (unsigned char)*s;
		size_t n = bhi_utf8_len(s);

		if (c == '"' || c == '\\')
			bhi_put(o, "\\%c", c);
		else if (c < 0x20)
			bhi_put(o, "\\u%04x", c);
		else if (n == 0)
			bhi_put(o, "\\ufffd");
		else
			bhi_put(o, "%.*s", (int)n, s);
		s += n ? n : 1;
	}
	put_char(o, '"');
}

struct snap {
	const char *name;
	bool tracks_hold; /* BH_TRACK_HOLD: its hold histogram is exported */
	bool host; /* host-wide: its host families are exported */
	struct bh_stats st;
	struct bhi_layer_metric layer[BHI_LAYER_METRICS_MAX]; /* a layer's series */
	size_t n_layer;
};

struct pool_snap {
	const char *name;
	struct bh_pool_stats st;
};

/* Everything one export shows, read once up front. */
struct snaps {
	struct snap *bh;
	size_t n_bh;
	struct pool_snap *pool;
	size_t n_pool;
};

static void free_snaps(struct snaps *s)
{
	free(s->bh);
	free(s->pool);
}

static int take_snaps(const struct bh_metric_set *set, struct snaps *s)
{
	s->n_bh = set->n_bulkheads;
	s->n_pool = set->n_pools;
	s->bh = calloc(s->n_bh ? s->n_bh : 1, sizeof(*s->bh));
	s->pool = calloc(s->n_pool ? s->n_pool : 1, sizeof(*s->pool));
	if (!s->bh || !s->pool) {
		free_snaps(s);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->n_bh; i++) {
		const bulkhead_t *bh = set->bulkheads[i];
		const struct bhi_layer *l = bhi_layer_of(bh);

		s->bh[i].name = bh_name(bh);
		s->bh[i].tracks_hold = bhi_tracks_hold(bh);
		s->bh[i].host = bhi_is_host(bh);
		bh_stats(bh, &s->bh[i].st);
		if (l && l->metrics)
			s->bh[i].n_layer = l->metrics(l, s->bh[i].layer);
	}
	for (size_t i = 0; i < s->n_pool; i++) {
		s->pool[i].name = bh_pool_name(set->pools[i]);
		bh_pool_stats(set->pools[i], &s->pool[i].st);
	}
	return 0;
}

static bool none_null(void *const *v, size_t n)
{
	if (n && !v)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!v[i])
			return false;
	return true;
}

static bool valid(const struct bh_metric_set *set)
{
	return set && none_null((void *const *)set->bulkheads, set->n_bulkheads) &&
	       none_null((void *const *)set->pools, set->n_pools);
}

/* ---- Prometheus ------------------------------------------------------------- */

struct scalar {
	const char *name, *type, *help;
	size_t offset; /* of a uint64_t in the stats struct */
};

#define SCALAR(table) table, sizeof(table) / sizeof(table[0])
#define POOL(f) offsetof(struct bh_pool_stats, f)

static const struct scalar pool_scalars[] = {
	{ "bulkhead_pool_threads", "gauge", "Pool threads alive.", POOL(alive) },
	{ "bulkhead_pool_active_threads", "gauge", "Pool threads running a task.", POOL(active) },
	{ "bulkhead_pool_queued", "gauge", "Tasks waiting for a thread.", POOL(queued) },
	{ "bulkhead_pool_largest_threads", "gauge", "Most pool threads alive at once.",
	  POOL(largest) },
	{ "bulkhead_pool_abandoned_running", "gauge",
	  "Tasks still running whose caller gave up.", POOL(abandoned_running) },
	{ "bulkhead_pool_core_threads", "gauge", "Configured core threads.", POOL(core_threads) },
	{ "bulkhead_pool_max_threads", "gauge", "Configured maximum threads.", POOL(max_threads) },
	{ "bulkhead_pool_queue_capacity", "gauge", "Configured queue capacity.",
	  POOL(queue_capacity) },
	{ "bulkhead_pool_submitted_total", "counter", "Tasks submitted.", POOL(submitted) },
	{ "bulkhead_pool_completed_total", "counter", "Tasks run to completion on the pool.",
	  POOL(completed) },
	{ "bulkhead_pool_abandoned_total", "counter", "Calls whose caller gave up.",
	  POOL(abandoned) },
	{ "bulkhead_pool_discarded_total", "counter", "Tasks dropped unrun.", POOL(discarded) },
	{ "bulkhead_pool_caller_ran_total", "counter", "Tasks run by the submitting thread.",
	  POOL(caller_ran) },
	{ "bulkhead_pool_rejected_total", "counter", "Submissions that found the pool full.",
	  POOL(rejected) },
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

/* Host-wide bulkheads (bh_shm_open) only. */
static const struct scalar host_scalars[] = {
	{ "bulkhead_reclaimed_total", "counter",
	  "Permits taken back from processes that died holding them.",
	  offsetof(struct bh_stats, reclaimed) },
	{ "bulkhead_processes", "gauge", "Processes attached to the host-wide bulkhead.",
	  offsetof(struct bh_stats, processes) },
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

static void put_head(struct bhi_out *o, const char *name, const char *type, const char *help)
{
	bhi_put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_sample_start(struct bhi_out *o, const char *metric, const char *suffix,
			     const char *name)
{
	bhi_put(o, "%s%s{name=\"", metric, suffix);
	bhi_put_label(o, name);
	put_char(o, '"');
}

static uint64_t field(const void *stats, size_t offset)
{
	return *(const uint64_t *)((const char *)stats + offset);
}

/* One family per row of the table, one sample per source: stats[i] is
 * source i's stats struct, stride bytes apart; names[i] its name. */
static void put_scalars(struct bhi_out *o, const struct scalar *table, size_t rows,
			const void *stats, size_t stride, const char *const *names, size_t n)
{
	if (n == 0)
		return; /* no families without samples */
	for (size_t k = 0; k < rows; k++) {
		put_head(o, table[k].name, table[k].type, table[k].help);
		for (size_t i = 0; i < n; i++) {
			put_sample_start(o, table[k].name, "", names[i]);
			bhi_put(o, "} %llu\n",
			    (unsigned long long)field((const char *)stats + i * stride,
						      table[k].offset));
		}
	}
}

/* Nanoseconds as exact decimal seconds, trailing zeros trimmed: a bucket
 * bound printed with %g would round, and "le" must be the real bound. Every
 * number in seconds goes through here, never through %f: printf's decimal
 * point is the locale's, and a program that set one with a decimal comma
 * would export "0,5", which neither a scraper nor a JSON parser accepts
 * (a double would also lose nanoseconds of a large sum). */
static void put_seconds(struct bhi_out *o, uint64_t ns)
{
	char frac[10];
	int n = 9;

	snprintf(frac, sizeof(frac), "%09llu", (unsigned long long)(ns % BH_SEC));
	while (n > 0 && frac[n - 1] == '0')
		frac[--n] = '\0';
	bhi_put(o, "%llu%s%s", (unsigned long long)(ns / BH_SEC), n ? "." : "", frac);
}

/* One boundary per power of two: the fine buckets below it add up exactly.
 * A bucket holds [lower, upper) and observations are whole nanoseconds, so
 * the buckets below 2^k ns hold exactly the observations <= 2^k - 1 ns: that
 * is the "le" (less or equal) bound, and an observation of exactly 2^k ns
 * is counted from the next bound on, as it must be. */
static void put_histogram(struct bhi_out *o, const char *name, const char *bh,
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
		bhi_put(o, ",le=\"");
		put_seconds(o, (1ull << shift) - 1);
		bhi_put(o, "\"} %llu\n", (unsigned long long)cum);
	}
	put_sample_start(o, name, "_bucket", bh);
	bhi_put(o, ",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
	put_sample_start(o, name, "_sum", bh);
	bhi_put(o, "} ");
	put_seconds(o, h->sum_ns);
	put_char(o, '\n');
	put_sample_start(o, name, "_count", bh);
	bhi_put(o, "} %llu\n", (unsigned long long)h->count);
}

/* Names for put_scalars, in source order. */
static const char **names_of(const struct snaps *s, bool pools)
{
	size_t n = pools ? s->n_pool : s->n_bh;
	const char **v = calloc(n ? n : 1, sizeof(*v));

	for (size_t i = 0; v && i < n; i++)
		v[i] = pools ? s->pool[i].name : s->bh[i].name;
	return v;
}

static void put_histograms(struct bhi_out *o, const struct snaps *s)
{
	for (size_t k = 0; k < sizeof(histos) / sizeof(histos[0]); k++) {
		const struct histo *m = &histos[k];
		bool any = false;

		for (size_t i = 0; i < s->n_bh; i++)
			any |= !m->hold || s->bh[i].tracks_hold;
		if (!any)
			continue;
		put_head(o, m->name, "histogram", m->help);
		for (size_t i = 0; i < s->n_bh; i++)
			if (!m->hold || s->bh[i].tracks_hold)
				put_histogram(o, m->name, s->bh[i].name,
					      (const struct bh_hist *)((const char *)&s->bh[i].st +
								       m->offset));
	}
}

/* ---- series added by layers (src/core/layer.h) ------------------------------------ */

static void put_layer_value(struct bhi_out *o, const struct bhi_layer_metric *m)
{
	if (m->is_ns)
		put_seconds(o, m->value);
	else
		bhi_put(o, "%llu", (unsigned long long)m->value);
}

static const struct bhi_layer_metric *find_layer_metric(const struct snap *b, const char *name)
{
	for (size_t k = 0; k < b->n_layer; k++)
		if (!strcmp(b->layer[k].name, name))
			return &b->layer[k];
	return NULL;
}

/* One family per name, in order of first appearance, with a sample for
 * every bulkhead that has it. */
static void put_layer_families(struct bhi_out *o, const struct snaps *s)
{
	for (size_t i = 0; i < s->n_bh; i++) {
		for (size_t k = 0; k < s->bh[i].n_layer; k++) {
			const struct bhi_layer_metric *m = &s->bh[i].layer[k];
			bool seen = false;

			for (size_t j = 0; j < i && !seen; j++)
				seen = find_layer_metric(&s->bh[j], m->name) != NULL;
			if (seen)
				continue;
			put_head(o, m->name, m->type, m->help);
			for (size_t j = i; j < s->n_bh; j++) {
				const struct bhi_layer_metric *v = find_layer_metric(&s->bh[j], m->name);

				if (!v)
					continue;
				put_sample_start(o, m->name, "", s->bh[j].name);
				bhi_put(o, "} ");
				put_layer_value(o, v);
				put_char(o, '\n');
			}
		}
	}
}

/* The host-wide families, for the host-wide bulkheads among the sources. */
static void put_host_scalars(struct bhi_out *o, const struct snaps *s)
{
	bool any = false;

	for (size_t i = 0; i < s->n_bh; i++)
		any |= s->bh[i].host;
	if (!any)
		return;
	for (size_t k = 0; k < sizeof(host_scalars) / sizeof(host_scalars[0]); k++) {
		put_head(o, host_scalars[k].name, host_scalars[k].type, host_scalars[k].help);
		for (size_t i = 0; i < s->n_bh; i++) {
			if (!s->bh[i].host)
				continue;
			put_sample_start(o, host_scalars[k].name, "", s->bh[i].name);
			bhi_put(o, "} %llu\n",
			    (unsigned long long)field(&s->bh[i].st, host_scalars[k].offset));
		}
	}
}

static int prometheus(struct bhi_out *o, const struct snaps *s)
{
	const char **bh_names = names_of(s, false), **pool_names = names_of(s, true);
	int r = 0;

	if (bh_names && pool_names) {
		put_scalars(o, SCALAR(scalars), &s->bh[0].st, sizeof(s->bh[0]), bh_names, s->n_bh);
		put_host_scalars(o, s);
		put_histograms(o, s);
		put_layer_families(o, s);
		put_scalars(o, SCALAR(pool_scalars), &s->pool[0].st, sizeof(s->pool[0]), pool_names,
			    s->n_pool);
	} else {
		r = -ENOMEM;
	}
	free(bh_names);
	free(pool_names);
	return r;
}

/* ---- JSON ------------------------------------------------------------------------- */

static void put_json_hist(struct bhi_out *o, const char *key, const struct bh_hist *h)
{
	static const double q[] = { 0.5, 0.9, 0.99, 0.999 };
	static const char *qname[] = { "p50", "p90", "p99", "p999" };

	bhi_put(o, ",\"%s\":{\"count\":%llu,\"sum_seconds\":", key, (unsigned long long)h->count);
	put_seconds(o, h->sum_ns);
	for (int i = 0; i < 4; i++) {
		bhi_put(o, ",\"%s\":", qname[i]);
		put_seconds(o, bh_hist_quantile(h, q[i]));
	}
	put_char(o, '}');
}

/* "key":value pairs of a table, keys without the family prefix and _total. */
static void put_json_fields(struct bhi_out *o, const struct scalar *table, size_t rows,
			    const void *stats, const char *prefix)
{
	for (size_t k = 0; k < rows; k++) {
		const char *key = table[k].name + strlen(prefix);
		size_t keylen = strlen(key);

		if (keylen > 6 && !strcmp(key + keylen - 6, "_total"))
			keylen -= 6;
		bhi_put(o, ",\"%.*s\":%llu", (int)keylen, key,
		    (unsigned long long)field(stats, table[k].offset));
	}
}

static int json(struct bhi_out *o, const struct snaps *s)
{
	bhi_put(o, "{\"bulkheads\":[");
	for (size_t i = 0; i < s->n_bh; i++) {
		const struct bh_stats *st = &s->bh[i].st;

		bhi_put(o, "%s{\"name\":", i ? "," : "");
		put_json_string(o, s->bh[i].name);
		put_json_fields(o, SCALAR(scalars), st, "bulkhead_");
		if (s->bh[i].host)
			put_json_fields(o, SCALAR(host_scalars), st, "bulkhead_");
		put_json_hist(o, "wait", &st->wait);
		put_json_hist(o, "wait_failed", &st->wait_failed);
		if (s->bh[i].tracks_hold)
			put_json_hist(o, "hold", &st->hold);
		for (size_t k = 0; k < s->bh[i].n_layer; k++) {
			const struct bhi_layer_metric *m = &s->bh[i].layer[k];
			const char *key = m->name + strlen("bulkhead_");
			size_t keylen = strlen(key);

			if (keylen > 6 && !strcmp(key + keylen - 6, "_total"))
				keylen -= 6;
			bhi_put(o, ",\"%.*s\":", (int)keylen, key);
			put_layer_value(o, m);
		}
		put_char(o, '}');
	}
	bhi_put(o, "],\"pools\":[");
	for (size_t i = 0; i < s->n_pool; i++) {
		bhi_put(o, "%s{\"name\":", i ? "," : "");
		put_json_string(o, s->pool[i].name);
		put_json_fields(o, SCALAR(pool_scalars), &s->pool[i].st, "bulkhead_pool_");
		put_char(o, '}');
	}
	bhi_put(o, "]}\n");
	return 0;
}

/* ---- entry points ----------------------------------------------------------------- */

typedef int format_fn(struct bhi_out *o, const struct snaps *s);

static ssize_t to_buffer(const struct bh_metric_set *set, char *buf, size_t len, format_fn *fmt)
{
	struct bhi_out o = { .buf = buf, .len = buf ? len : 0 };
	struct snaps s;
	int r;

	if (!valid(set) || (len && !buf))
		return -EINVAL;
	if ((r = take_snaps(set, &s)) < 0)
		return r;
	if (o.len)
		o.buf[0] = '\0';
	r = fmt(&o, &s);
	free_snaps(&s);
	return r < 0 ? r : (ssize_t)o.pos;
}

static int to_file(const struct bh_metric_set *set, FILE *f, format_fn *fmt)
{
	struct bhi_out o = { .f = f };
	struct snaps s;
	int r;

	if (!valid(set) || !f)
		return -EINVAL;
	if ((r = take_snaps(set, &s)) < 0)
		return r;
	r = fmt(&o, &s);
	free_snaps(&s);
	return r < 0 ? r : o.err;
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
