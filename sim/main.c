/* SPDX-License-Identifier: MIT */
/*
 * retryd-sim: the command line. Each scenario is a subcommand; every
 * option is checked against its bounds before anything runs, and a bad
 * one is named with what was expected (exit 64). docs/storms.md has the
 * commands that made its tables.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/number.h"
#include "sim/report.h"

#define EXIT_USAGE 64
#define EXIT_FAILED 70

/* Memory bounds every run: processes of all tiers together. */
#define MAX_WORLD_PROCESSES 4000000u
#define FLOORS_MAX 64u
#define HOSTS_MAX 1000u
/* The columns of a floors table at most: P doubling, H tenfold. */
#define AXIS_MAX 16

enum scenario {
    S_OUTAGE = 1,
    S_FLOORS = 2,
    S_META = 4,
    S_RESTART = 8,
    S_HOSTS = 16,
    S_ALL = 31,
};

typedef struct cli {
    unsigned scenario;
    const sim_policy *policy; /* NULL: every one */
    sim_params p;
    sim_meta_phases ph;
    uint32_t max_processes;
    uint32_t max_hosts;
    bool json;
} cli;

typedef enum opt_kind {
    OPT_U32,
    OPT_U64,
    OPT_DOUBLE,
    OPT_SECONDS,
    OPT_MS,
    OPT_US,
    OPT_FLAG,
    OPT_POLICY,
    OPT_FAILURE,
} opt_kind;

typedef struct opt {
    const char *name;
    opt_kind kind;
    size_t offset; /* in cli */
    double lo, hi;
    unsigned scenarios;
    const char *help;
} opt;

#define AT(field) offsetof(cli, field)

static const opt opts[] = {
    {"--policy", OPT_POLICY, AT(policy), 0, 0, S_ALL,
     "NAME or all (the default; see 'retryd-sim policies')"},
    {"--layers", OPT_U32, AT(p.layers), 1, SIM_MAX_LAYERS, S_OUTAGE,
     "calling layers above the deepest, 1..5"},
    {"--attempts", OPT_U32, AT(p.attempts), 1, 10, S_ALL,
     "attempts per call, 1..10 (3)"},
    {"--hosts", OPT_U32, AT(p.hosts), 1, SIM_MAX_HOSTS, S_ALL & ~S_HOSTS,
     "hosts per calling layer (1)"},
    {"--processes", OPT_U32, AT(p.processes), 1, SIM_MAX_PROCESSES,
     S_OUTAGE | S_META | S_RESTART, "processes per host"},
    {"--max-processes", OPT_U32, AT(max_processes), 1, SIM_MAX_PROCESSES,
     S_FLOORS, "the largest P, doubling from 1 (64)"},
    {"--max-hosts", OPT_U32, AT(max_hosts), 1, SIM_MAX_HOSTS, S_HOSTS,
     "the largest H, tenfold from 1 (1000)"},
    {"--rate", OPT_DOUBLE, AT(p.rate), 0.001, 1e7, S_ALL,
     "first attempts per second per host of the top layer"},
    {"--seed", OPT_U64, AT(p.seed), 0, 9.2e18, S_ALL, "the random seed (1)"},
    {"--duration", OPT_SECONDS, AT(p.duration_ns), 1, 3600,
     S_OUTAGE | S_FLOORS | S_HOSTS | S_RESTART, "simulated seconds"},
    {"--measure-from", OPT_SECONDS, AT(p.measure_from_ns), 0, 3599,
     S_OUTAGE | S_FLOORS | S_HOSTS | S_RESTART, "rates from this second on"},
    {"--failure", OPT_FAILURE, AT(p.down_mode), 0, 0,
     S_OUTAGE | S_FLOORS | S_HOSTS | S_RESTART, "503 (the default) or timeout"},
    {"--timeout-ms", OPT_MS, AT(p.attempt_timeout_ns), 1, 3.6e6, S_ALL,
     "an attempt's timeout"},
    {"--deadline-ms", OPT_MS, AT(p.deadline_ns), 1, 3.6e6, S_ALL,
     "a call's deadline"},
    {"--latency-us", OPT_US, AT(p.latency_ns), 0, 1e7, S_ALL,
     "one hop's latency (500)"},
    {"--host-floor", OPT_DOUBLE, AT(p.host_floor), 0, 1e6, S_ALL,
     "retryd's floor per host, retries/s (10)"},
    {"--throttle-window", OPT_SECONDS, AT(p.throttle_window_ns), 1, 3600, S_ALL,
     "retryd-adaptive's throttle_window, s (30)"},
    {"--workers", OPT_U32, AT(p.workers), 2, 100000, S_META,
     "the server's workers (10)"},
    {"--service-ms", OPT_DOUBLE, AT(p.service_ns), 0.001, 60000, S_META,
     "a request's service time (10)"},
    {"--queue", OPT_U32, AT(p.queue), 0, 10000000, S_META,
     "requests waiting beyond the workers (2000)"},
    {"--before", OPT_SECONDS, AT(ph.before_ns), 1, 3600, S_META,
     "seconds before the trigger (60)"},
    {"--trigger", OPT_SECONDS, AT(ph.trigger_ns), 1, 3600, S_META,
     "seconds on half the workers (30)"},
    {"--after", OPT_SECONDS, AT(ph.after_ns), 1, 3600, S_META,
     "seconds after the trigger (300)"},
    {"--period", OPT_SECONDS, AT(p.restart_period_ns), 1, 3600, S_RESTART,
     "seconds between a process's crashes (5)"},
    {"--json", OPT_FLAG, AT(json), 0, 0, S_ALL, "one JSON object"},
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

static int usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "retryd-sim: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "; see 'retryd-sim --help'\n");
    return EXIT_USAGE;
}

static void usage(FILE *out);

static const opt *find_opt(const char *name)
{
    for (size_t i = 0; i < N_OPTS; i++)
        if (strcmp(opts[i].name, name) == 0)
            return &opts[i];
    return NULL;
}

/* A time option in ns: @p scale ns per unit. */
static bool parse_time(const char *v, const opt *o, double scale, int64_t *ret)
{
    double d;
    if (!retryd__parse_double(v, o->lo, o->hi, &d))
        return false;
    *ret = (int64_t)llround(d * scale);
    return true;
}

static bool parse_number(const char *v, const opt *o, void *field)
{
    long l;
    double d;
    switch (o->kind) {
    case OPT_U32:
        if (!retryd__parse_long(v, (long)o->lo, (long)o->hi, &l))
            return false;
        *(uint32_t *)field = (uint32_t)l;
        return true;
    case OPT_U64:
        if (!retryd__parse_double(v, o->lo, o->hi, &d) || d != floor(d))
            return false;
        *(uint64_t *)field = (uint64_t)d;
        return true;
    case OPT_DOUBLE:
        if (!retryd__parse_double(v, o->lo, o->hi, &d))
            return false;
        /* --service-ms is the one double stored as nanoseconds. */
        if (o->offset == AT(p.service_ns))
            *(int64_t *)field = (int64_t)llround(d * SIM_NS_PER_MS);
        else
            *(double *)field = d;
        return true;
    case OPT_SECONDS:
        return parse_time(v, o, SIM_NS_PER_S, field);
    case OPT_MS:
        return parse_time(v, o, SIM_NS_PER_MS, field);
    case OPT_US:
        return parse_time(v, o, 1000, field);
    default:
        return false;
    }
}

static int apply_opt(cli *c, const opt *o, const char *v)
{
    void *field = (char *)c + o->offset;
    if (o->kind == OPT_POLICY) {
        c->policy = strcmp(v, "all") == 0 ? NULL : sim_policy_find(v);
        if (c->policy == NULL && strcmp(v, "all") != 0)
            return usage_error("unknown policy '%s' (see 'retryd-sim "
                               "policies')",
                               v);
        return 0;
    }
    if (o->kind == OPT_FAILURE) {
        if (strcmp(v, "503") != 0 && strcmp(v, "timeout") != 0)
            return usage_error("--failure: expected 503 or timeout, got '%s'",
                               v);
        *(sim_down_mode *)field =
            strcmp(v, "503") == 0 ? SIM_DOWN_503 : SIM_DOWN_SILENT;
        return 0;
    }
    if (!parse_number(v, o, field)) {
        char range[96];
        snprintf(range, sizeof(range), " (expected %s in %g..%g)",
                 o->kind == OPT_U32 || o->kind == OPT_U64 ? "an integer"
                                                          : "a number",
                 o->lo, o->hi);
        fprintf(stderr, "retryd-sim: %s: bad value '%s'%s\n", o->name, v,
                range);
        return EXIT_USAGE;
    }
    return 0;
}

static int parse_opts(cli *c, int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return -1; /* done: exit 0 */
        }
        const opt *o = find_opt(argv[i]);
        if (o == NULL)
            return usage_error("unknown option '%s'", argv[i]);
        if (!(o->scenarios & c->scenario))
            return usage_error("%s is not an option of %s", o->name, argv[1]);
        if (o->kind == OPT_FLAG) {
            c->json = true;
            continue;
        }
        if (i + 1 == argc)
            return usage_error("%s needs a value", o->name);
        int r = apply_opt(c, o, argv[++i]);
        if (r != 0)
            return r;
    }
    return 0;
}

/* Bounds between options, and the size of the world. */
static int check_cli(const cli *c)
{
    const sim_params *p = &c->p;
    uint64_t procs =
        (uint64_t)p->layers *
        (c->scenario == S_HOSTS ? c->max_hosts : p->hosts) *
        (c->scenario == S_FLOORS ? c->max_processes : p->processes);
    if (procs > MAX_WORLD_PROCESSES)
        return usage_error("layers x hosts x processes: more than %u "
                           "processes in the world",
                           MAX_WORLD_PROCESSES);
    if (c->scenario != S_META && p->measure_from_ns >= p->duration_ns)
        return usage_error("--measure-from must be below --duration");
    if (c->scenario == S_META &&
        c->ph.before_ns + c->ph.trigger_ns + c->ph.after_ns >
            SIM_MAX_DURATION_NS)
        return usage_error("--before + --trigger + --after: at most 3600 s");
    return 0;
}

/* --- running ------------------------------------------------------------- */

/* The policies a run compares: the one asked for, or all of them. */
static size_t policies_of(const cli *c, const sim_policy *const **ret)
{
    static const sim_policy *one[1];
    if (c->policy == NULL) {
        *ret = sim_policies;
        return sim_policy_count;
    }
    one[0] = c->policy;
    *ret = one;
    return 1;
}

static int failed(const char *what)
{
    fprintf(stderr,
            "retryd-sim: %s: out of memory (a smaller world: fewer "
            "hosts, processes or a lower rate)\n",
            what);
    return EXIT_FAILED;
}

static int run_outage(cli *c)
{
    const sim_policy *const *pols;
    size_t n = policies_of(c, &pols);
    sim_outage_result rows[SIM_MAX_POLICIES];
    for (size_t i = 0; i < n; i++) {
        sim_params p = c->p;
        p.policy = pols[i];
        if (sim_outage_run(&p, &rows[i]) < 0)
            return failed("outage");
    }
    c->p.policy = pols[0];
    sim_report r = {stdout, c->json, pols, n, &c->p};
    sim_report_outage(&r, rows);
    return 0;
}

/* A dead upstream for every policy at each of @p ax's values, which set
 * the processes per host (floors) or the hosts (hosts). */
static int run_axis(cli *c, const sim_axis *ax, size_t np)
{
    const sim_policy *const *pols;
    size_t n = policies_of(c, &pols);
    double table[SIM_MAX_POLICIES][AXIS_MAX], first[SIM_MAX_POLICIES][AXIS_MAX];
    const double *rows[SIM_MAX_POLICIES], *firsts[SIM_MAX_POLICIES];
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < np; k++) {
            sim_params p = c->p;
            p.policy = pols[i];
            if (ax->letter == 'P')
                p.processes = ax->values[k];
            else
                p.hosts = ax->values[k];
            sim_outage_result o;
            if (sim_outage_run(&p, &o) < 0)
                return failed(ax->scenario);
            table[i][k] = o.deepest_retries_per_s;
            first[i][k] = o.first_per_s;
        }
        rows[i] = table[i];
        firsts[i] = first[i];
    }
    c->p.policy = pols[0];
    sim_report r = {stdout, c->json, pols, n, &c->p};
    sim_report_floors(&r, ax, np, rows, firsts);
    return 0;
}

static int run_floors(cli *c)
{
    uint32_t procs[AXIS_MAX];
    size_t np = 0;
    for (uint32_t k = 1; k <= c->max_processes && np < AXIS_MAX; k *= 2)
        procs[np++] = k;
    const sim_axis ax = {"floors", 'P', "processes_per_host",
                         "as the host's first attempts are split among P "
                         "processes",
                         procs};
    return run_axis(c, &ax, np);
}

static int run_hosts(cli *c)
{
    uint32_t hosts[AXIS_MAX];
    size_t nh = 0;
    for (uint32_t k = 1; k <= c->max_hosts && nh < AXIS_MAX; k *= 10)
        hosts[nh++] = k;
    const sim_axis ax = {"hosts", 'H', "hosts",
                         "as H hosts each make the same first attempts", hosts};
    return run_axis(c, &ax, nh);
}

static int run_meta(cli *c)
{
    const sim_policy *const *pols;
    size_t n = policies_of(c, &pols);
    sim_meta_result rows[SIM_MAX_POLICIES] = {0};
    int rc = 0;
    sim_meta_apply(&c->p, &c->ph);
    for (size_t i = 0; i < n && rc == 0; i++) {
        sim_params p = c->p;
        p.policy = pols[i];
        if (sim_meta_run(&p, &c->ph, &rows[i]) < 0)
            rc = failed("metastable");
    }
    if (rc == 0) {
        c->p.policy = pols[0];
        sim_report r = {stdout, c->json, pols, n, &c->p};
        sim_report_meta(&r, &c->ph, rows);
    }
    for (size_t i = 0; i < n; i++)
        sim_meta_result_free(&rows[i]);
    return rc;
}

static int run_restart(cli *c)
{
    const sim_policy *const *pols;
    size_t n = policies_of(c, &pols);
    sim_restart_result rows[SIM_MAX_POLICIES];
    for (size_t i = 0; i < n; i++) {
        sim_params p = c->p;
        p.policy = pols[i];
        if (sim_restart_run(&p, &rows[i]) < 0)
            return failed("restart");
    }
    c->p.policy = pols[0];
    sim_report r = {stdout, c->json, pols, n, &c->p};
    sim_report_restart(&r, rows);
    return 0;
}

/* --- the subcommands
 * ---------------------------------------------------------- */

typedef struct subcommand {
    const char *name;
    unsigned scenario;
    int (*run)(cli *c);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"outage", S_OUTAGE, run_outage,
     "the deepest layer down: amplification at each layer"},
    {"floors", S_FLOORS, run_floors,
     "a dead upstream, 1 to 64 processes per host: retries/s"},
    {"metastable", S_META, run_meta,
     "capacity halved for a while: goodput over time"},
    {"restart", S_RESTART, run_restart,
     "processes crash-looping during an outage: retries per restart"},
    {"hosts", S_HOSTS, run_hosts,
     "a dead upstream, 1 to 1000 hosts: retries/s (the fleet tier)"},
};

#define N_SUBCOMMANDS (sizeof(subcommands) / sizeof(subcommands[0]))

static void usage(FILE *out)
{
    fprintf(out, "usage: retryd-sim <scenario> [options]\n"
                 "       retryd-sim policies [--json]\n\nscenarios:\n");
    for (size_t i = 0; i < N_SUBCOMMANDS; i++)
        fprintf(out, "  %-11s %s\n", subcommands[i].name,
                subcommands[i].summary);
    fprintf(out, "\noptions (of every scenario, unless they are named):\n");
    for (size_t i = 0; i < N_OPTS; i++) {
        fprintf(out, "  %-17s %s", opts[i].name, opts[i].help);
        const char *sep = " (";
        for (size_t k = 0; opts[i].scenarios != S_ALL && k < N_SUBCOMMANDS; k++)
            if (opts[i].scenarios & subcommands[k].scenario) {
                fprintf(out, "%s%s", sep, subcommands[k].name);
                sep = ", ";
            }
        fprintf(out, "%s\n", opts[i].scenarios != S_ALL ? ")" : "");
    }
    fprintf(out, "\nThe same seed prints the same numbers. docs/storms.md "
                 "tells the model and\nthe commands that made its tables. "
                 "Exit: 0 done, 64 bad usage, 70 failed.\n");
}

static void defaults_for(cli *c, unsigned scenario)
{
    *c = (cli){.scenario = scenario,
               .max_processes = FLOORS_MAX,
               .max_hosts = HOSTS_MAX};
    switch (scenario) {
    case S_HOSTS:
        sim_hosts_params(&c->p);
        break;
    case S_OUTAGE:
        sim_outage_params(&c->p);
        break;
    case S_FLOORS:
        sim_floors_params(&c->p);
        break;
    case S_META:
        sim_meta_params(&c->p, &c->ph);
        break;
    default:
        sim_restart_params(&c->p);
        break;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr), EXIT_USAGE;
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0)
        return usage(stdout), 0;
    if (strcmp(argv[1], "policies") == 0) {
        bool json = argc == 3 && strcmp(argv[2], "--json") == 0;
        if (argc > 3 || (argc == 3 && !json))
            return usage_error("usage: retryd-sim policies [--json]");
        sim_report_policies(stdout, json);
        return 0;
    }
    for (size_t i = 0; i < N_SUBCOMMANDS; i++) {
        if (strcmp(argv[1], subcommands[i].name) != 0)
            continue;
        cli c;
        defaults_for(&c, subcommands[i].scenario);
        int r = parse_opts(&c, argc, argv);
        if (r < 0)
            return 0; /* --help */
        if (r == 0)
            r = check_cli(&c);
        return r != 0 ? r : subcommands[i].run(&c);
    }
    return usage_error("unknown scenario '%s'", argv[1]);
}
