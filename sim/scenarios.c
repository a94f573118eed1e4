/* SPDX-License-Identifier: MIT */
/* The scenarios; see scenarios.h and docs/storms.md. */
#include "sim/scenarios.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/policy.h"

/* The executor's defaults (retryd/client.h: RETRYD_DEFAULT_*), which the
 * simulator may not include: it links no executor. */
#define ATTEMPT_TIMEOUT_NS (10 * SIM_NS_PER_S)
#define DEADLINE_NS (30 * SIM_NS_PER_S)
#define MIN_ATTEMPT_NS (50 * SIM_NS_PER_MS)
#define MAX_ATTEMPTS 3

/* A 5 s window of seconds: the figures of a metastability run. */
#define WINDOW_BINS 5

void sim_params_default(sim_params *p)
{
    *p = (sim_params){
        .policy = &sim_policy_retryd,
        .layers = 1,
        .hosts = 1,
        .processes = 1,
        .rate = 1000,
        .attempts = MAX_ATTEMPTS,
        .attempt_timeout_ns = ATTEMPT_TIMEOUT_NS,
        .deadline_ns = DEADLINE_NS,
        .min_attempt_ns = MIN_ATTEMPT_NS,
        .backoff = retryd_backoff_default,
        .latency_ns = SIM_NS_PER_MS / 2,
        .duration_ns = 60 * SIM_NS_PER_S,
        .measure_from_ns = 30 * SIM_NS_PER_S,
        .host_floor = 10,
        .throttle_window_ns = 30 * SIM_NS_PER_S,
        .seed = 1,
    };
}

/* --- outage -------------------------------------------------------------- */

void sim_outage_params(sim_params *p)
{
    sim_params_default(p);
    p->attempt_timeout_ns = 60 * SIM_NS_PER_S;
    p->deadline_ns = 60 * SIM_NS_PER_S;
    p->down_from_ns = 0;
    p->down_to_ns = INT64_MAX;
    p->down_mode = SIM_DOWN_503;
    p->duration_ns = 90 * SIM_NS_PER_S;
    p->measure_from_ns = 60 * SIM_NS_PER_S;
}

static bool is_naive(const sim_policy *pol)
{
    return pol->budget == NULL && pol->admit == NULL;
}

double sim_outage_expected(const sim_params *p)
{
    const sim_policy *pol = p->policy;
    if (is_naive(pol))
        return pow(p->attempts, p->layers);
    /* A throttle sends less than its budget allows; a budget that is no
     * ratio and floor has no such formula. */
    if (pol->admit != NULL || (pol->ratio == 0 && pol->floor == 0))
        return NAN;
    double first = p->rate * p->hosts, load = first;
    double scopes = pol->fleet_sync != NULL ? 1
                    : pol->per_process      ? (double)p->hosts * p->processes
                                            : (double)p->hosts;
    double floor = pol->per_process ? pol->floor : p->host_floor;
    for (uint32_t t = 0; t < p->layers; t++) {
        double allowed = pol->ratio * load + scopes * floor;
        double wanted = (p->attempts - 1) * load;
        load += allowed < wanted ? allowed : wanted;
    }
    return load / first;
}

static double window_s(const sim_params *p)
{
    return (double)(p->duration_ns - p->measure_from_ns) / SIM_NS_PER_S;
}

int sim_outage_run(const sim_params *p, sim_outage_result *ret)
{
    sim_world w;
    int r = sim_world_run(&w, p);
    if (r == 0) {
        double s = window_s(p);
        *ret = (sim_outage_result){.layers = p->layers};
        ret->first_per_s = (double)w.top_started / s;
        for (uint32_t t = 1; t <= p->layers; t++) {
            ret->load_per_s[t] = (double)w.tiers[t].arrivals / s;
            ret->retries_per_s[t] = (double)w.tiers[t].retries / s;
        }
        ret->deepest_load_ratio =
            ret->first_per_s > 0 ? ret->load_per_s[p->layers] / ret->first_per_s
                                 : NAN;
        ret->deepest_retries_per_s = ret->retries_per_s[p->layers];
        ret->expected_ratio = sim_outage_expected(p);
    }
    sim_world_free(&w);
    return r;
}

/* --- floors -------------------------------------------------------------- */

void sim_floors_params(sim_params *p)
{
    sim_outage_params(p);
    p->duration_ns = 40 * SIM_NS_PER_S;
    p->measure_from_ns = 20 * SIM_NS_PER_S;
}

/* --- hosts -------------------------------------------------------------- */

void sim_hosts_params(sim_params *p)
{
    sim_floors_params(p);
    /* Ten first attempts a second per host: a thousand hosts are ten
     * thousand a second, and the floors' part is not lost in the ratio's. */
    p->rate = 10;
}

/* --- metastability ------------------------------------------------------- */

void sim_meta_apply(sim_params *p, const sim_meta_phases *ph)
{
    p->halve_from_ns = ph->before_ns;
    p->halve_to_ns = ph->before_ns + ph->trigger_ns;
    p->duration_ns = ph->before_ns + ph->trigger_ns + ph->after_ns;
    p->measure_from_ns = 0;
}

void sim_meta_params(sim_params *p, sim_meta_phases *ph)
{
    sim_params_default(p);
    p->processes = 16;
    p->rate = 700;
    p->workers = 10;
    p->service_ns = 10 * SIM_NS_PER_MS;
    p->queue = 2000;
    p->attempt_timeout_ns = SIM_NS_PER_S;
    *ph = (sim_meta_phases){
        .before_ns = 60 * SIM_NS_PER_S,
        .trigger_ns = 30 * SIM_NS_PER_S,
        .after_ns = 300 * SIM_NS_PER_S,
    };
    sim_meta_apply(p, ph);
}

/* The means per second of bins [from, to). */
typedef struct bin_means {
    double started, goodput, deepest, retries;
} bin_means;

static bin_means means_of(const sim_bin *b, size_t from, size_t to)
{
    bin_means m = {0};
    if (to <= from)
        return (bin_means){NAN, NAN, NAN, NAN};
    for (size_t i = from; i < to; i++) {
        m.started += b[i].started;
        m.goodput += b[i].goodput;
        m.deepest += b[i].deepest;
        m.retries += b[i].retries;
    }
    double n = (double)(to - from);
    return (bin_means){m.started / n, m.goodput / n, m.deepest / n,
                       m.retries / n};
}

static void phase_means(sim_meta_result *r, size_t from, size_t to, int ph)
{
    bin_means m = means_of(r->bins, from, to);
    r->goodput_per_s[ph] = m.goodput;
    r->retries_per_s[ph] = m.retries;
    r->load_per_s[ph] = m.deepest;
    r->offered_per_s[ph] = m.started;
}

/* Goodput over the calls started in bins [from, to): arrivals are a
 * Poisson stream, and a 5 s window that happens to receive 4 % fewer
 * calls is no loss of goodput. */
static double goodput_share(const sim_bin *b, size_t from, size_t to)
{
    bin_means m = means_of(b, from, to);
    return m.started > 0 ? m.goodput / m.started : NAN;
}

/* Recovery and collapse, from the 5 s windows after the trigger ends at
 * bin @p end, each window's goodput share against the share before. */
static void judge_after(sim_meta_result *r, size_t warm, size_t start,
                        size_t end)
{
    double pre = goodput_share(r->bins, warm, start);
    size_t n = r->n_bins, last_bad = SIZE_MAX, first_up = SIZE_MAX;
    for (size_t i = end; i + WINDOW_BINS <= n; i++) {
        double g = goodput_share(r->bins, i, i + WINDOW_BINS);
        if (!(g >= 0.95 * pre))
            last_bad = i;
        if (g >= 0.5 * pre && first_up == SIZE_MAX)
            first_up = i;
    }
    if (last_bad == SIZE_MAX)
        r->recovery_s = 0;
    else if (last_bad + WINDOW_BINS >= n)
        r->recovery_s = NAN; /* still below at the end */
    else
        r->recovery_s = (double)(last_bad + 1 - end);
    r->collapsed_s = (double)((first_up == SIZE_MAX ? n : first_up) - end);
}

int sim_meta_run(const sim_params *p, const sim_meta_phases *ph,
                 sim_meta_result *ret)
{
    sim_world w;
    *ret = (sim_meta_result){0};
    int r = sim_world_run(&w, p);
    if (r == 0) {
        ret->n_bins = w.n_bins;
        ret->bins = malloc(w.n_bins * sizeof(*ret->bins));
        if (ret->bins == NULL)
            r = -1;
    }
    if (r == 0) {
        memcpy(ret->bins, w.bins, w.n_bins * sizeof(*ret->bins));
        size_t start = (size_t)(ph->before_ns / SIM_BIN_NS);
        size_t end = (size_t)((ph->before_ns + ph->trigger_ns) / SIM_BIN_NS);
        size_t warm = start > 10 ? 10 : 0;
        phase_means(ret, warm, start, SIM_BEFORE);
        phase_means(ret, start, end, SIM_DURING);
        phase_means(ret, end, ret->n_bins, SIM_AFTER);
        judge_after(ret, warm, start, end);
    }
    sim_world_free(&w);
    return r;
}

void sim_meta_result_free(sim_meta_result *r)
{
    free(r->bins);
    r->bins = NULL;
}

/* --- restart storms
 * ------------------------------------------------------------- */

void sim_restart_params(sim_params *p)
{
    sim_outage_params(p);
    p->processes = 16;
    p->attempt_timeout_ns = SIM_NS_PER_S;
    p->deadline_ns = DEADLINE_NS;
    p->restart_period_ns = 5 * SIM_NS_PER_S;
    p->duration_ns = 60 * SIM_NS_PER_S;
    p->measure_from_ns = 20 * SIM_NS_PER_S;
}

int sim_restart_run(const sim_params *p, sim_restart_result *ret)
{
    sim_params quiet = *p;
    quiet.restart_period_ns = 0;
    sim_world w, base;
    int r = sim_world_run(&w, p);
    if (r == 0)
        r = sim_world_run(&base, &quiet);
    else
        base = (sim_world){0};
    if (r == 0) {
        double s = window_s(p);
        uint64_t with = w.tiers[p->layers].retries;
        uint64_t without = base.tiers[p->layers].retries;
        *ret = (sim_restart_result){
            .retries_per_s = (double)with / s,
            .baseline_retries_per_s = (double)without / s,
            .restarts_per_s = (double)w.restarts / s,
            .extra_per_restart = w.restarts ? ((double)with - (double)without) /
                                                  (double)w.restarts
                                            : NAN,
        };
    }
    sim_world_free(&w);
    sim_world_free(&base);
    return r;
}
