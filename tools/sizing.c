/* Sizing rules and the M/M/c/K model (see sizing.h and docs/sizing.md). */
#include <errno.h>
#include <math.h>

#include "lib/sizing.h"
#include "sizing.h"

/* The library's own rule (bh_pool_size), so the tools and the library
 * never size differently. */
double bhz_concurrency_raw(double qps, double p99_s, double safety)
{
	return bhi_little_concurrency(qps, p99_s, safety);
}

uint32_t bhz_round_up(double x)
{
	return bhi_size_round_up(x);
}

uint32_t bhz_queue_rule(uint32_t concurrency)
{
	return concurrency > UINT32_MAX / 2 ? UINT32_MAX : 2 * concurrency;
}

double bhz_worst_queue_wait(uint32_t queue, uint32_t concurrency, double mean_s)
{
	return (double)queue / concurrency * mean_s;
}

double bhz_queue_over_qps(uint32_t queue, double qps)
{
	return queue / qps;
}

static uint32_t clamp_u32(double x)
{
	return x >= (double)UINT32_MAX ? UINT32_MAX : (uint32_t)x;
}

uint32_t bhz_queue_fitting(double timeout_s, uint32_t concurrency, double mean_s)
{
	return clamp_u32(floor(timeout_s * concurrency / mean_s + 1e-9));
}

/* Apply one bound below the rule; equal to the current one, it takes over
 * the blame (the caller applies the hardest bound last). */
static void tighten(uint32_t *k, enum bhz_queue_bound *why, uint32_t rule, uint32_t bound,
		    enum bhz_queue_bound which)
{
	if (bound < rule && bound <= *k) {
		*k = bound;
		*why = which;
	}
}

uint32_t bhz_queue_recommend(double qps, double mean_s, double timeout_s, uint32_t c,
			     uint32_t threads, enum bhz_queue_bound *bound)
{
	uint32_t rule = bhz_queue_rule(c), k = rule;
	enum bhz_queue_bound why = BHZ_QUEUE_RULE;

	tighten(&k, &why, rule, bhz_queue_fitting(timeout_s, c, mean_s), BHZ_QUEUE_WAIT);
	tighten(&k, &why, rule, clamp_u32(floor(timeout_s * qps + 1e-9)), BHZ_QUEUE_DRAIN);
	if (threads)
		tighten(&k, &why, rule, threads > c ? threads - c : 0, BHZ_QUEUE_THREADS);
	if (bound)
		*bound = why;
	return k;
}

bool bhz_fault_exceeds_p99(double fault_s, double p99_s)
{
	return fault_s > p99_s;
}

/* ---- M/M/c/K ------------------------------------------------------------ */

/* log of the unnormalised p_n: a^n / n! up to c, then times rho per waiter.
 * Logs keep a^n / n! finite for thousands of servers. */
static double log_term(const struct bhz_model *m, uint32_t n)
{
	if (n <= m->c)
		return n * m->log_a - lgamma(n + 1.0);
	return m->log_tc + (double)(n - m->c) * m->log_rho;
}

static double log_sum_terms(const struct bhz_model *m)
{
	uint32_t last = m->c + m->k;
	double top = -INFINITY, sum = 0.0;

	for (uint32_t n = 0; n <= last; n++)
		top = fmax(top, log_term(m, n));
	for (uint32_t n = 0; n <= last; n++)
		sum += exp(log_term(m, n) - top);
	return top + log(sum);
}

int bhz_model_init(struct bhz_model *m, double lambda, double mean_s, uint32_t c, uint32_t k)
{
	if (!(lambda > 0 && isfinite(lambda)) || !(mean_s > 0 && isfinite(mean_s)) || c == 0 ||
	    k >= UINT32_MAX - c)
		return -EINVAL;
	m->lambda = lambda;
	m->mu = 1.0 / mean_s;
	m->c = c;
	m->k = k;
	m->log_a = log(lambda * mean_s);
	m->log_rho = m->log_a - log((double)c);
	m->log_tc = c * m->log_a - lgamma(c + 1.0);
	m->log_norm = log_sum_terms(m);
	return 0;
}

double bhz_model_pn(const struct bhz_model *m, uint32_t n)
{
	if (n > m->c + m->k)
		return 0.0;
	return exp(log_term(m, n) - m->log_norm);
}

void bhz_model_solve(const struct bhz_model *m, struct bhz_result *out)
{
	uint32_t last = m->c + m->k;
	double in_flight = 0, queued = 0, wait = 0;

	for (uint32_t n = 0; n <= last; n++) {
		double p = bhz_model_pn(m, n);

		in_flight += p * (n < m->c ? n : m->c);
		if (n > m->c)
			queued += p * (n - m->c);
		if (n >= m->c && n < last)
			wait += p;
	}
	out->p_reject = bhz_model_pn(m, last);
	out->p_wait = wait;
	out->throughput = m->lambda * (1.0 - out->p_reject);
	out->mean_in_flight = in_flight;
	out->mean_queued = queued;
	/* Little's law on the queue alone: Lq = throughput x Wq. */
	out->mean_wait_s = out->throughput > 0 ? queued / out->throughput : 0.0;
	out->utilisation = in_flight / m->c;
}

/* log P(Poisson(x) = j); the caller sums the terms into a CDF. */
static double poisson_log_pmf(uint32_t j, double x)
{
	return -x + j * log(x) - lgamma(j + 1.0);
}

double bhz_model_wait_tail(const struct bhz_model *m, double t_s)
{
	double x = m->c * m->mu * (t_s > 0 ? t_s : 0);
	double admitted = 1.0 - bhz_model_pn(m, m->c + m->k);
	double cdf = 0.0, tail = 0.0;

	if (admitted <= 0)
		return 0.0;
	for (uint32_t j = 0; j < m->k; j++) {
		/* Found c + j calls: waits for j + 1 departures at rate c x mu;
		 * still waiting at t iff fewer than j + 1 happened by then. */
		double p = bhz_model_pn(m, m->c + j);

		cdf = x > 0 ? cdf + exp(poisson_log_pmf(j, x)) : 1.0;
		tail += p * fmin(cdf, 1.0);
	}
	return tail / admitted;
}

double bhz_model_wait_quantile(const struct bhz_model *m, double q)
{
	double target = 1.0 - q, lo = 0.0, hi = (m->k + 1.0) / (m->c * m->mu);

	if (bhz_model_wait_tail(m, 0.0) <= target)
		return 0.0;
	for (int i = 0; i < 200 && bhz_model_wait_tail(m, hi) > target; i++)
		hi *= 2;
	for (int i = 0; i < 100 && hi - lo > hi * 1e-9; i++) {
		double mid = (lo + hi) / 2;

		if (bhz_model_wait_tail(m, mid) > target)
			lo = mid;
		else
			hi = mid;
	}
	return hi;
}
