/* SPDX-License-Identifier: MIT */
/*
 * Hedging's tail (issue 20, docs/hedging.md): the host's p99 latency with
 * and without hedging, side by side in one run. A real daemon, a real
 * upstream on loopback (faultsrv's /tail) answering in 5 ms of which
 * 1.2 % of requests stall for 100 ms (20x the median), and 8 processes (real
 * ones, forked) each keeping requests in flight through a multi of its
 * own. The two variants take turns in phases (off, on, off, on, ...), all
 * processes switching together; each phase's first 500 ms are not
 * measured (the switch's own transients).
 *
 *   off  a policy whose hedge is never due (a fixed delay of an hour): the
 *        same executor, the latency picture fed, no hedge sent
 *   on   adaptive: a hedge after the host's p98 of the upstream, paid
 *        from the hedge budget (max_extra_load 0.02, retryd's default)
 *
 * Printed: per variant the requests, their latency (p50, p99, p99.9, max,
 * from the submit to the completion, over every process), the share that
 * took the stall or longer, and for "on" the extra load, hedges sent per
 * request; then p99 off over on, against the target of at least
 * 5x, and the extra load against max_extra_load plus half a point, and
 * the daemon's own hedge counters.
 *
 * Why 1.2 % and not 1 %: with exactly 1 % of requests stalling, the p99
 * sits on the knee itself. The number of stalled requests among n is
 * binomial (250 +- 16 of 25 000), and the p99 (the ceil(0.99 n)-th
 * latency) is the stall when more than 1 % of them stalled, the fast
 * answers' tail when not: "off"'s p99 is 100 ms or about 10 ms by a coin
 * toss, whatever hedging does. At 1.2 % the stalled share is three
 * standard deviations above 1 % at this benchmark's sizes, so "off"'s p99
 * is the stall in practice; a fifth argument sets the per mille (10 shows
 * the coin toss).
 *
 * usage: bench_hedge [phase-seconds [rounds [processes [in-flight
 *        [stall-per-mille]]]]]   (default: 3 4 8 2 12)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "health_fixture.h"
#include "retryd/multi.h"
#include "testsrv.h"

#define MS INT64_C(1000000)
#define WARMUP_MS 500
#define MAX_PROCS 16
#define MAX_IN_FLIGHT 16
#define MAX_SAMPLES 200000 /* per process and variant */
#define BOUND_MS 60000

enum { OFF, ON, VARIANTS };
static const char *const variant_names[VARIANTS] = {"off", "on"};

/* What the processes and the parent share (mapped before the forks). */
typedef struct shared {
    _Atomic long ready, stop;
    _Atomic int variant;
    _Atomic int64_t phase_start_ms; /* a phase measures from +WARMUP_MS */
    _Atomic long failed;
    struct proc_samples {
        _Atomic long n[VARIANTS];
        _Atomic long hedges[VARIANTS], won[VARIANTS];
        uint32_t us[VARIANTS][MAX_SAMPLES]; /* latencies, microseconds */
    } p[MAX_PROCS];
} shared;

static shared *S;
static testsrv *srv;
static int procs = 8, in_flight = 2, per_mille = 12;
#define STALL_MS 100

/* --- a process ------------------------------------------------------------ */

typedef struct req_slot {
    struct worker *w;
    char path[96];
    retryd_request req;
    int64_t started_ns, phase_ms;
    int variant;
} req_slot;

typedef struct worker {
    int index;
    retryd_multi *m;
    retryd_profile *profile;
    long next;
    req_slot slots[MAX_IN_FLIGHT];
} worker;

static const retryd_hedge_policy policies[VARIANTS] = {
    {sizeof(retryd_hedge_policy), RETRYD_HEDGE_FIXED, 3600000 * MS, 1},
    {sizeof(retryd_hedge_policy), RETRYD_HEDGE_ADAPTIVE, 0, 1},
};

static void sleep_until_ms(int64_t at)
{
    for (int64_t now; (now = testsrv_now_ms()) < at;) {
        struct timespec ts = {(at - now) / 1000,
                              (long)((at - now) % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
}

static void submit(worker *w, req_slot *s);

/* A request's latency, counted in its variant's samples when it started
 * after the phase's warm-up and ended in the same phase. */
static void record(worker *w, req_slot *s, const retryd_result *r)
{
    struct proc_samples *ps = &S->p[w->index];
    int64_t t = bench_now_ns();
    bool same_phase = atomic_load(&S->phase_start_ms) == s->phase_ms;
    if (!same_phase || s->started_ns / MS < s->phase_ms + WARMUP_MS)
        return;
    long i = atomic_load(&ps->n[s->variant]);
    if (i >= MAX_SAMPLES)
        return;
    ps->us[s->variant][i] = (uint32_t)((t - s->started_ns) / 1000);
    bool won;
    atomic_fetch_add(&ps->hedges[s->variant], retryd_result_hedges(r, &won));
    atomic_fetch_add(&ps->won[s->variant], won);
    atomic_store(&ps->n[s->variant], i + 1);
}

static void done(void *ctx, retryd_call *call, int err, retryd_result *r)
{
    req_slot *s = ctx;
    (void)call;
    if (err != 0 || retryd_result_status(r) != 200)
        atomic_fetch_add(&S->failed, 1);
    else
        record(s->w, s, r);
    retryd_result_free(r);
    if (!atomic_load(&S->stop))
        submit(s->w, s);
}

static void submit(worker *w, req_slot *s)
{
    s->w = w;
    s->phase_ms = atomic_load(&S->phase_start_ms);
    s->variant = atomic_load(&S->variant);
    snprintf(s->path, sizeof(s->path),
             "/tail?ms=5&stall_ms=%d&per_mille=%d&id=p%d-%ld", STALL_MS,
             per_mille, w->index, w->next++);
    s->req = (retryd_request){.sz = sizeof(retryd_request),
                              .path = s->path,
                              .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                              .hedge = &policies[s->variant]};
    s->started_ns = bench_now_ns();
    CHECK(retryd_multi_submit(w->m, w->profile, &s->req, done, s, NULL) == 0,
          "submit");
}

static int process_main(int index)
{
    worker w = {.index = index};
    retryd_client *client;
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .control_socket = hf_daemon.control};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    CHECK(retryd_client_new(&co, &client) == 0, "client");
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", testsrv_port(srv));
    retryd_profile_opts po = {.sz = sizeof(po),
                              .base_url = base,
                              .upstream = "tail",
                              .max_attempts = 1};
    CHECK(retryd_profile_new(client, &po, &w.profile) == 0, "profile");
    CHECK(retryd_upstream_shared(retryd_profile_budget(w.profile)), "shared");
    CHECK(retryd_multi_new(client, NULL, &w.m) == 0, "multi");
    atomic_fetch_add(&S->ready, 1);
    for (int i = 0; i < in_flight; i++)
        submit(&w, &w.slots[i]);
    while (retryd_multi_in_flight(w.m) > 0) {
        int r = retryd_multi_run(w.m, 50 * MS);
        CHECK(r == 0 || r == RETRYD_ETIMEDOUT, "run: %d", r);
    }
    retryd_multi_free(w.m);
    retryd_profile_free(w.profile);
    retryd_client_free(client);
    return 0;
}

/* --- the figures ---------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct figures {
    long n, hedges, won, stalled; /* stalled: took STALL_MS or longer */
    double p50, p99, p999, max;   /* ms */
} figures;

static double quantile(const uint32_t *v, long n, double q)
{
    long k = (long)ceil(q * (double)n);
    return v[k > 0 ? k - 1 : 0] / 1000.0;
}

static figures figures_of(int v)
{
    figures f = {0};
    for (int p = 0; p < procs; p++)
        f.n += atomic_load(&S->p[p].n[v]);
    uint32_t *all = malloc((size_t)f.n * sizeof(*all));
    CHECK(all != NULL && f.n > 0, "samples of %s", variant_names[v]);
    long k = 0;
    for (int p = 0; p < procs; p++) {
        long n = atomic_load(&S->p[p].n[v]);
        memcpy(all + k, S->p[p].us[v], (size_t)n * sizeof(*all));
        k += n;
        f.hedges += atomic_load(&S->p[p].hedges[v]);
        f.won += atomic_load(&S->p[p].won[v]);
    }
    qsort(all, (size_t)f.n, sizeof(*all), cmp_u32);
    for (long i = f.n; i > 0 && all[i - 1] >= STALL_MS * 1000; i--)
        f.stalled++;
    f.p50 = quantile(all, f.n, 0.5);
    f.p99 = quantile(all, f.n, 0.99);
    f.p999 = quantile(all, f.n, 0.999);
    f.max = all[f.n - 1] / 1000.0;
    free(all);
    return f;
}

/* The daemon's count of a hedge counter for "tail". */
static double daemon_count(const char *key)
{
    run_result res;
    CHECK(rd_ctl(&hf_daemon, &res, "stats", "--json", NULL) == 0, "stats");
    return rd_json_number(res.out, "\"name\":\"tail\"", key);
}

static void report(int phase_s, int rounds)
{
    figures f[VARIANTS] = {figures_of(OFF), figures_of(ON)};
    printf("bench_hedge: %d processes x %d in flight, upstream 5 ms with "
           "%.1f%% of requests stalling %d ms; %d rounds of %d s per variant "
           "(first %d ms of each phase not measured)\n",
           procs, in_flight, per_mille / 10.0, STALL_MS, rounds, phase_s,
           WARMUP_MS);
    printf("  %-4s %9s %9s %9s %9s %9s %9s %9s %9s\n", "", "requests", "p50 ms",
           "p99 ms", "p99.9 ms", "max ms", ">=stall", "hedges", "won");
    for (int v = 0; v < VARIANTS; v++)
        printf("  %-4s %9ld %9.2f %9.2f %9.2f %9.2f %8.3f%% %9ld %9ld\n",
               variant_names[v], f[v].n, f[v].p50, f[v].p99, f[v].p999,
               f[v].max, 100.0 * (double)f[v].stalled / (double)f[v].n,
               f[v].hedges, f[v].won);
    double ratio = f[OFF].p99 / f[ON].p99;
    double extra = (double)f[ON].hedges / (double)f[ON].n;
    printf("  p99 off / on: %.2fx (target >= 5x: %s)\n", ratio,
           ratio >= 5 ? "met" : "MISSED");
    printf("  extra load on: %.3f%% of requests (target <= max_extra_load 2%% "
           "+ 0.5 points: %s)\n",
           100 * extra, extra <= 0.025 ? "met" : "MISSED");
    printf("  daemon: %.0f hedges sent, %.0f won, %.0f refused by the hedge "
           "budget, picture %s\n",
           daemon_count("hedges_sent"), daemon_count("hedges_won"),
           daemon_count("refused_hedge_budget"),
           daemon_count("hedge_delay_seconds") > 0 ? "fresh" : "none");
    CHECK(atomic_load(&S->failed) == 0, "%ld requests failed",
          atomic_load(&S->failed));
}

int main(int argc, char **argv)
{
    int phase_s = argc > 1 ? atoi(argv[1]) : 3;
    int rounds = argc > 2 ? atoi(argv[2]) : 4;
    procs = argc > 3 ? atoi(argv[3]) : 8;
    in_flight = argc > 4 ? atoi(argv[4]) : 2;
    per_mille = argc > 5 ? atoi(argv[5]) : 12;
    CHECK(phase_s >= 1 && phase_s <= 600 && rounds >= 1 && rounds <= 100 &&
              procs >= 1 && procs <= MAX_PROCS && in_flight >= 1 &&
              in_flight <= MAX_IN_FLIGHT && per_mille >= 0 && per_mille <= 1000,
          "usage: bench_hedge [phase-seconds [rounds [processes "
          "[in-flight [stall-per-mille]]]]]");
    S = check_shared(sizeof(*S));
    hf_daemon_start("[upstream tail]\nratio = 0.1\n");
    CHECK(testsrv_start(FAULTSRV_PATH, NULL, &srv) == 0, "faultsrv");
    atomic_store(&S->phase_start_ms, testsrv_now_ms());
    pid_t pids[MAX_PROCS];
    for (int i = 0; i < procs; i++)
        pids[i] = check_fork(process_main, i);
    CHECK(hf_wait_for(&S->ready, procs, BOUND_MS), "processes ready");
    /* A phase of each before measuring: the picture's first windows. */
    for (int r = -1; r < rounds; r++)
        for (int v = 0; v < VARIANTS; v++) {
            atomic_store(&S->variant, v);
            atomic_store(&S->phase_start_ms,
                         r < 0 ? INT64_MAX / 2 : testsrv_now_ms());
            sleep_until_ms(testsrv_now_ms() + phase_s * 1000);
        }
    atomic_store(&S->stop, 1);
    hf_reap(pids, procs, BOUND_MS);
    report(phase_s, rounds);
    testsrv_stop(srv);
    return 0;
}
