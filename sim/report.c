/* SPDX-License-Identifier: MIT */
/* Tables and JSON for each scenario; see report.h. */
#include "sim/report.h"

#include <math.h>

#include "sim/output.h"

static double seconds(int64_t ns)
{
    return (double)ns / SIM_NS_PER_S;
}

/* The parameters every scenario's JSON carries; a floors table's @p axis
 * ('H', 'P'; 0: none) leaves out the count it varies, which its own array
 * gives. */
static void json_params(sim_json *j, const char *scenario, const sim_params *p,
                        char axis)
{
    sim_json_str(j, "scenario", scenario);
    sim_json_int(j, "seed", (int64_t)p->seed);
    sim_json_int(j, "layers", p->layers);
    if (axis != 'H')
        sim_json_int(j, "hosts", p->hosts);
    if (axis != 'P')
        sim_json_int(j, "processes", p->processes);
    sim_json_num(j, "rate", p->rate);
    sim_json_int(j, "attempts", p->attempts);
    sim_json_num(j, "attempt_timeout_s", seconds(p->attempt_timeout_ns));
    sim_json_num(j, "deadline_s", seconds(p->deadline_ns));
    sim_json_num(j, "latency_ms", (double)p->latency_ns / SIM_NS_PER_MS);
    sim_json_num(j, "duration_s", seconds(p->duration_ns));
}

/* One row's figures, after its policy's name: row @p i of @p rows. */
typedef void (*json_row_fn)(sim_json *j, const void *rows, size_t i);

/* The rows: an object each in "rows", or, for one policy, the fields of
 * the document itself. */
static void json_rows(sim_json *j, const sim_report *r, const void *rows,
                      json_row_fn row)
{
    bool many = r->n > 1;
    if (many)
        sim_json_array(j, "rows");
    for (size_t i = 0; i < r->n; i++) {
        if (many)
            sim_json_object(j, NULL);
        sim_json_str(j, "policy", r->policies[i]->name);
        row(j, rows, i);
        if (many)
            sim_json_end_object(j);
    }
    if (many)
        sim_json_end_array(j);
}

/* "@p n @p one" or "@p n @p many", or "@p letter @p many" when the
 * count is a floors table's axis (@p letter not 0). */
static void count_text(char *buf, size_t len, char letter, uint32_t n,
                       const char *one, const char *many)
{
    if (letter != 0)
        snprintf(buf, len, "%c %s", letter, many);
    else
        snprintf(buf, len, "%u %s", n, n == 1 ? one : many);
}

static void print_header(const sim_report *r, const char *scenario, char axis)
{
    const sim_params *p = r->p;
    char hosts[32], procs[32];
    count_text(hosts, sizeof(hosts), axis == 'H' ? 'H' : 0, p->hosts, "host",
               "hosts");
    count_text(procs, sizeof(procs), axis == 'P' ? 'P' : 0, p->processes,
               "process", "processes");
    fprintf(r->out,
            "retryd-sim %s: %u layer%s, %u attempts, %s x %s, %g first "
            "attempts/s per host, seed %llu\n",
            scenario, p->layers, p->layers == 1 ? "" : "s", p->attempts, hosts,
            procs, p->rate, (unsigned long long)p->seed);
}

static const char *down_text(const sim_params *p)
{
    return p->down_mode == SIM_DOWN_503 ? "answers 503 to everything"
                                        : "answers nothing (attempts time out)";
}

/* --- outage -------------------------------------------------------------- */

static void outage_row(sim_json *j, const void *rows, size_t i)
{
    const sim_outage_result *o = (const sim_outage_result *)rows + i;
    sim_json_num(j, "deepest_load_ratio", o->deepest_load_ratio);
    sim_json_num(j, "retries_per_s", o->deepest_retries_per_s);
    sim_json_num(j, "expected_ratio", o->expected_ratio);
    sim_json_num(j, "first_per_s", o->first_per_s);
    sim_json_array(j, "layer_load_ratio");
    for (uint32_t t = 1; t <= o->layers; t++)
        sim_json_num(j, NULL, o->load_per_s[t] / o->first_per_s);
    sim_json_end_array(j);
    sim_json_array(j, "layer_retries_per_s");
    for (uint32_t t = 1; t <= o->layers; t++)
        sim_json_num(j, NULL, o->retries_per_s[t]);
    sim_json_end_array(j);
}

static void outage_json(const sim_report *r, const sim_outage_result *rows)
{
    sim_json j;
    sim_json_init(&j, r->out);
    sim_json_object(&j, NULL);
    json_params(&j, "outage", r->p, 0);
    sim_json_num(&j, "measured_from_s", seconds(r->p->measure_from_ns));
    json_rows(&j, r, rows, outage_row);
    sim_json_end_object(&j);
    sim_json_done(&j);
}

void sim_report_outage(const sim_report *r, const sim_outage_result *rows)
{
    if (r->json) {
        outage_json(r, rows);
        return;
    }
    print_header(r, "outage", 0);
    fprintf(r->out,
            "the deepest layer %s; rates over %g..%g s of simulated time\n\n",
            down_text(r->p), seconds(r->p->measure_from_ns),
            seconds(r->p->duration_ns));
    fprintf(r->out, "%-16s %13s %9s %11s  %s\n", "policy", "deepest/first",
            "expected", "retries/s", "load at each layer / first attempts");
    for (size_t i = 0; i < r->n; i++) {
        const sim_outage_result *o = &rows[i];
        fprintf(r->out, "%-16s %13.2f %9.2f %11.1f ", r->policies[i]->name,
                o->deepest_load_ratio, o->expected_ratio,
                o->deepest_retries_per_s);
        for (uint32_t t = 1; t <= o->layers; t++)
            fprintf(r->out, " %.2f", o->load_per_s[t] / o->first_per_s);
        fputc('\n', r->out);
    }
}

/* --- floors -------------------------------------------------------------- */

/* A table cell: @p v with @p decimals and @p unit, or "-" when it is no
 * number (0 / 0). */
static void cell(char *buf, size_t len, double v, int decimals,
                 const char *unit)
{
    if (isfinite(v))
        snprintf(buf, len, "%.*f%s", decimals, v, unit);
    else
        snprintf(buf, len, "-");
}

/* Retries/s beyond what the policy's ratio of first attempts allows: the
 * floors' part. NaN for a policy without a ratio. */
static double beyond_ratio(const sim_policy *pol, double retries, double first)
{
    if (pol->ratio == 0)
        return NAN;
    return retries - pol->ratio * first;
}

static void floors_json(const sim_report *r, const sim_axis *ax, size_t np,
                        const double *const *retries,
                        const double *const *first)
{
    sim_json j;
    sim_json_init(&j, r->out);
    sim_json_object(&j, NULL);
    json_params(&j, ax->scenario, r->p, ax->letter);
    sim_json_array(&j, ax->json_key);
    for (size_t k = 0; k < np; k++)
        sim_json_int(&j, NULL, ax->values[k]);
    sim_json_end_array(&j);
    sim_json_array(&j, "rows");
    for (size_t i = 0; i < r->n; i++) {
        const sim_policy *pol = r->policies[i];
        sim_json_object(&j, NULL);
        sim_json_str(&j, "policy", pol->name);
        sim_json_array(&j, "retries_per_s");
        for (size_t k = 0; k < np; k++)
            sim_json_num(&j, NULL, retries[i][k]);
        sim_json_end_array(&j);
        sim_json_array(&j, "beyond_ratio_per_s");
        for (size_t k = 0; k < np; k++)
            sim_json_num(&j, NULL,
                         beyond_ratio(pol, retries[i][k], first[i][k]));
        sim_json_end_array(&j);
        sim_json_num(&j, "growth", retries[i][np - 1] / retries[i][0]);
        sim_json_num(&j, "beyond_ratio_growth",
                     beyond_ratio(pol, retries[i][np - 1], first[i][np - 1]) /
                         beyond_ratio(pol, retries[i][0], first[i][0]));
        sim_json_end_object(&j);
    }
    sim_json_end_array(&j);
    sim_json_end_object(&j);
    sim_json_done(&j);
}

void sim_report_floors(const sim_report *r, const sim_axis *ax, size_t np,
                       const double *const *retries, const double *const *first)
{
    if (r->json) {
        floors_json(r, ax, np, retries, first);
        return;
    }
    print_header(r, ax->scenario, ax->letter);
    fprintf(
        r->out,
        "retries/s reaching a dead upstream (it %s), over %g..%g s,\n%s\n\n",
        down_text(r->p), seconds(r->p->measure_from_ns),
        seconds(r->p->duration_ns), ax->what);
    fprintf(r->out, "%-16s", "policy");
    for (size_t k = 0; k < np; k++) {
        char head[16];
        snprintf(head, sizeof(head), "%c=%u", ax->letter, ax->values[k]);
        fprintf(r->out, " %8s", head);
    }
    char fat[16];
    snprintf(fat, sizeof(fat), "floors@%c", ax->letter);
    fprintf(r->out, " %8s %9s %9s\n", "growth", "floors@1", fat);
    for (size_t i = 0; i < r->n; i++) {
        const sim_policy *pol = r->policies[i];
        char g[16], f1[16], fp[16];
        fprintf(r->out, "%-16s", pol->name);
        for (size_t k = 0; k < np; k++)
            fprintf(r->out, " %8.1f", retries[i][k]);
        cell(g, sizeof(g), retries[i][np - 1] / retries[i][0], 2, "x");
        cell(f1, sizeof(f1), beyond_ratio(pol, retries[i][0], first[i][0]), 1,
             "");
        cell(fp, sizeof(fp),
             beyond_ratio(pol, retries[i][np - 1], first[i][np - 1]), 1, "");
        fprintf(r->out, " %8s %9s %9s\n", g, f1, fp);
    }
    fprintf(r->out,
            "\ngrowth: retries/s at the largest %c over %c=1; floors@%c: "
            "retries/s beyond the\npolicy's ratio of first attempts "
            "(-: it has none, or nothing was retried)\n",
            ax->letter, ax->letter, ax->letter);
}

/* --- metastability
 * --------------------------------------------------------------- */

static void meta_series(sim_json *j, const sim_meta_result *m)
{
    sim_json_array(j, "goodput");
    for (size_t k = 0; k < m->n_bins; k++)
        sim_json_int(j, NULL, m->bins[k].goodput);
    sim_json_end_array(j);
    sim_json_array(j, "load");
    for (size_t k = 0; k < m->n_bins; k++)
        sim_json_int(j, NULL, m->bins[k].deepest);
    sim_json_end_array(j);
    sim_json_array(j, "retries");
    for (size_t k = 0; k < m->n_bins; k++)
        sim_json_int(j, NULL, m->bins[k].retries);
    sim_json_end_array(j);
    sim_json_array(j, "queue");
    for (size_t k = 0; k < m->n_bins; k++)
        sim_json_int(j, NULL, m->bins[k].queue_max);
    sim_json_end_array(j);
}

static void phases_json(sim_json *j, const char *key, const double *v)
{
    sim_json_object(j, key);
    sim_json_num(j, "before", v[SIM_BEFORE]);
    sim_json_num(j, "during", v[SIM_DURING]);
    sim_json_num(j, "after", v[SIM_AFTER]);
    sim_json_end_object(j);
}

static void meta_row(sim_json *j, const void *rows, size_t i)
{
    const sim_meta_result *m = (const sim_meta_result *)rows + i;
    phases_json(j, "goodput_per_s", m->goodput_per_s);
    phases_json(j, "retries_per_s", m->retries_per_s);
    phases_json(j, "load_per_s", m->load_per_s);
    phases_json(j, "offered_per_s", m->offered_per_s);
    sim_json_num(j, "recovery_s", m->recovery_s);
    sim_json_num(j, "collapsed_s", m->collapsed_s);
    meta_series(j, m);
}

static void meta_json(const sim_report *r, const sim_meta_phases *ph,
                      const sim_meta_result *rows)
{
    const sim_params *p = r->p;
    sim_json j;
    sim_json_init(&j, r->out);
    sim_json_object(&j, NULL);
    json_params(&j, "metastable", p, 0);
    sim_json_int(&j, "workers", p->workers);
    sim_json_num(&j, "service_ms", (double)p->service_ns / SIM_NS_PER_MS);
    sim_json_int(&j, "queue", p->queue);
    sim_json_num(&j, "trigger_from_s", seconds(ph->before_ns));
    sim_json_num(&j, "trigger_to_s", seconds(ph->before_ns + ph->trigger_ns));
    json_rows(&j, r, rows, meta_row);
    sim_json_end_object(&j);
    sim_json_done(&j);
}

void sim_report_meta(const sim_report *r, const sim_meta_phases *ph,
                     const sim_meta_result *rows)
{
    if (r->json) {
        meta_json(r, ph, rows);
        return;
    }
    const sim_params *p = r->p;
    print_header(r, "metastable", 0);
    fprintf(r->out,
            "a server of %u workers x %g ms (%.0f/s) with a queue of %u, "
            "attempts of %g s;\nhalf its workers from %g s to %g s, then "
            "all again until %g s\n\n",
            p->workers, (double)p->service_ns / SIM_NS_PER_MS,
            (double)p->workers * SIM_NS_PER_S / (double)p->service_ns, p->queue,
            seconds(p->attempt_timeout_ns), seconds(ph->before_ns),
            seconds(ph->before_ns + ph->trigger_ns), seconds(p->duration_ns));
    fprintf(r->out, "%-16s %22s %22s %10s %11s\n", "policy",
            "goodput/s bef/dur/aft", "retries/s bef/dur/aft", "recovery",
            "collapsed");
    for (size_t i = 0; i < r->n; i++) {
        const sim_meta_result *m = &rows[i];
        char rec[16];
        if (isnan(m->recovery_s))
            snprintf(rec, sizeof(rec), "never");
        else
            snprintf(rec, sizeof(rec), "%.0fs", m->recovery_s);
        fprintf(r->out,
                "%-16s %6.0f %7.0f %7.0f %6.0f %7.0f %7.0f %10s %10.0fs\n",
                r->policies[i]->name, m->goodput_per_s[0], m->goodput_per_s[1],
                m->goodput_per_s[2], m->retries_per_s[0], m->retries_per_s[1],
                m->retries_per_s[2], rec, m->collapsed_s);
    }
    fprintf(r->out,
            "\ngoodput as a share of the calls started in the same seconds;"
            " recovery: seconds\nafter the trigger until the first second "
            "from which every 5 s window's share\nis >= 95 %% of the share "
            "before; collapsed: seconds after it during\nwhich every 5 s "
            "window's share stays below 50 %% of it\n");
}

/* --- restart storms
 * -------------------------------------------------------------- */

static void restart_row(sim_json *j, const void *rows, size_t i)
{
    const sim_restart_result *x = (const sim_restart_result *)rows + i;
    sim_json_num(j, "retries_per_s", x->retries_per_s);
    sim_json_num(j, "baseline_retries_per_s", x->baseline_retries_per_s);
    sim_json_num(j, "restarts_per_s", x->restarts_per_s);
    sim_json_num(j, "extra_per_restart", x->extra_per_restart);
}

static void restart_json(const sim_report *r, const sim_restart_result *rows)
{
    sim_json j;
    sim_json_init(&j, r->out);
    sim_json_object(&j, NULL);
    json_params(&j, "restart", r->p, 0);
    sim_json_num(&j, "restart_period_s", seconds(r->p->restart_period_ns));
    json_rows(&j, r, rows, restart_row);
    sim_json_end_object(&j);
    sim_json_done(&j);
}

void sim_report_restart(const sim_report *r, const sim_restart_result *rows)
{
    const sim_params *p = r->p;
    if (r->json) {
        restart_json(r, rows);
        return;
    }
    print_header(r, "restart", 0);
    fprintf(r->out,
            "every process crashes and restarts every %g s (staggered) while "
            "the upstream\n%s; retries/s at it over %g..%g s, against the "
            "same run without crashes\n\n",
            seconds(p->restart_period_ns), down_text(p),
            seconds(p->measure_from_ns), seconds(p->duration_ns));
    fprintf(r->out, "%-16s %12s %12s %11s %18s\n", "policy", "retries/s",
            "no crashes", "restarts/s", "extra per restart");
    for (size_t i = 0; i < r->n; i++)
        fprintf(r->out, "%-16s %12.1f %12.1f %11.2f %18.1f\n",
                r->policies[i]->name, rows[i].retries_per_s,
                rows[i].baseline_retries_per_s, rows[i].restarts_per_s,
                rows[i].extra_per_restart);
}

/* --- the policies
 * ------------------------------------------------------------------ */

void sim_report_policies(FILE *out, bool json)
{
    if (!json) {
        for (size_t i = 0; i < sim_policy_count; i++)
            fprintf(out, "%-16s %s\n", sim_policies[i]->name,
                    sim_policies[i]->what);
        return;
    }
    sim_json j;
    sim_json_init(&j, out);
    sim_json_array(&j, NULL);
    for (size_t i = 0; i < sim_policy_count; i++) {
        sim_json_object(&j, NULL);
        sim_json_str(&j, "policy", sim_policies[i]->name);
        sim_json_str(&j, "what", sim_policies[i]->what);
        sim_json_bool(&j, "per_process", sim_policies[i]->per_process);
        sim_json_end_object(&j);
    }
    sim_json_end_array(&j);
    sim_json_done(&j);
}
