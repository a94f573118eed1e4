/* SPDX-License-Identifier: MIT */
/*
 * The one-host storm (issue 21, docs/storms.md): the simulator's
 * metastability scenario, for real, and the simulator's prediction of it.
 *
 *   - a real upstream on loopback with bounded capacity
 *     (retryd-storm-upstream: WORKERS x SERVICE, a queue of QUEUE that
 *     keeps the requests whose callers gave up, 503 when full);
 *   - 16 real client processes, each an event loop on the real executor
 *     (retryd_multi) sending idempotent GETs, open-loop: a Poisson stream
 *     of RATE / 16 first attempts per second each, 3 attempts of 1 s, the
 *     executor's backoff;
 *   - BEFORE seconds at 70 % of capacity, TRIGGER seconds with half the
 *     workers (SIGUSR1), AFTER seconds with all of them again;
 *
 * three times, with the same binaries: retryd's host budget (a real daemon
 * the clients attach to), process-local budgets (the clients never ask a
 * daemon: the library's fallback bucket), and naive retries (local, with a
 * budget no storm can empty). Then `retryd-sim metastable` is given the
 * same setup (and the service time the upstream measured) and its
 * goodput and retries/s per phase are printed beside the real ones.
 *
 * usage: bench_storm [before trigger after (s)] [rate] [variant...]
 *        (default: 20 30 40 280 retryd retryd-local naive); with
 *        BENCH_STORM_SERIES=DIR, each variant's run second by second, real
 *        beside simulated, in DIR/storm-VARIANT.dat (sim/plot.sh draws it).
 *
 * The real clients draw their arrivals from the simulator's streams for
 * the same seed (sim/rng.c), so the simulator is given the very arrivals
 * of the real run: what is compared is the model, not two draws of a
 * Poisson process. Everything else random (the backoff's jitter) is drawn
 * independently on each side.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_proc.h"
#include "harness.h"
#include "retryd/multi.h"
#include "retryd/retryd.h"
#include "sim/rng.h"

const char bench_prog[] = "bench_storm";

#define CLIENTS 16
#define WORKERS 8
#define SERVICE_US 20000
#define QUEUE 800
#define TIMEOUT_MS 1000
#define DEADLINE_NS (30 * INT64_C(1000000000))
#define MAX_S 3600
/* The seed of the arrivals, here and in the simulator. */
#define SEED 1
#define NS INT64_C(1000000000)
/* The first seconds of a run are its start, not its steady state: the
 * phase "before" starts here, as the simulator's does. */
#define WARM_S 10

typedef struct storm_cfg {
    int before_s, trigger_s, after_s;
    double rate;
} storm_cfg;

static int total_s(const storm_cfg *c)
{
    return c->before_s + c->trigger_s + c->after_s;
}

/* Per second of a run, as a client counts it. */
typedef struct storm_bin {
    uint32_t goodput, retries;
} storm_bin;

/* Per second, as the upstream counts it. */
typedef struct server_bin {
    uint32_t arrivals, served, stale, rejected;
} server_bin;

typedef struct variant {
    const char *name; /* the simulator's policy name */
    bool daemon;      /* attach to a daemon (else process-local) */
    bool unlimited;   /* a budget no storm can empty: naive retries */
} variant;

static const variant variants[] = {
    {"retryd", true, false},
    {"retryd-local", false, false},
    {"naive", false, true},
};

/* --- a client process ---------------------------------------------------- */

typedef struct job {
    retryd_request req;
    int64_t submitted;
} job;

typedef struct client {
    storm_bin *bins;
    int64_t epoch;
    int n_bins;
} client;

static client C;

static storm_bin *bin_at(int64_t t)
{
    int64_t s = (t - C.epoch) / NS;
    return s >= 0 && s < C.n_bins ? &C.bins[s] : &C.bins[C.n_bins];
}

/* Each retry the upstream saw, in the second it was sent: the call's
 * start, plus each attempt's wait and hold before it, plus the durations
 * of those before. */
static void count_retries(const retryd_result *r, int64_t t)
{
    size_t n = retryd_result_attempt_count(r);
    for (size_t i = 0; i < n; i++) {
        const retryd_attempt *a = retryd_result_attempt(r, i);
        t += a->wait_before_ns + a->held_ns;
        if (i > 0 && a->evidence != RETRYD_EVIDENCE_NOT_SENT)
            bin_at(t)->retries++;
        t += a->duration_ns;
    }
}

static void on_done(void *ctx, retryd_call *call, int err, retryd_result *r)
{
    (void)call;
    job *j = ctx;
    if (r != NULL) {
        count_retries(r, j->submitted);
        if (err == 0 && retryd_result_outcome(r) == RETRYD_OUTCOME_RESPONSE &&
            retryd_result_status(r) == 200)
            bin_at(bench_now_ns())->goodput++;
        retryd_result_free(r);
    }
    free(j);
}

static void submit(retryd_multi *m, retryd_profile *p)
{
    job *j = malloc(sizeof(*j));
    if (j == NULL)
        return;
    j->req = (retryd_request){.sz = sizeof(retryd_request),
                              .path = "/",
                              .idempotency = RETRYD_IDEMPOTENCY_IDEMPOTENT,
                              .deadline_ns = DEADLINE_NS};
    j->submitted = bench_now_ns();
    if (retryd_multi_submit(m, p, &j->req, on_done, j, NULL) < 0)
        free(j);
}

static void wait_ns(int64_t ns)
{
    struct timespec ts = {ns / NS, ns % NS};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Open-loop arrivals until the end, the multi run between them. The gaps
 * are the simulator's for the same seed and process (sim/rng.h), so that
 * retryd-sim, given the seed, is given these very arrivals. */
static void client_loop(retryd_multi *m, retryd_profile *p, double per_s,
                        int index, int64_t end)
{
    sim_rng arrivals;
    double mean_ns = (double)NS / per_s;
    sim_rng_seed(&arrivals, SEED, SIM_STREAM_ARRIVALS + (uint64_t)index);
    int64_t next = C.epoch + sim_rng_exp_ns(&arrivals, mean_ns), now;
    while ((now = bench_now_ns()) < end) {
        while (next <= now && next < end) {
            submit(m, p);
            next += sim_rng_exp_ns(&arrivals, mean_ns);
        }
        int64_t until = (next < end ? next : end) - now;
        if (until <= 0)
            continue;
        if (retryd_multi_in_flight(m) > 0)
            (void)retryd_multi_run(m, until);
        else
            wait_ns(until);
    }
}

static int client_setup(const variant *v, const char *url, const char *control,
                        retryd_client **rc, retryd_profile **rp,
                        retryd_multi **rm)
{
    retryd_host_opts ho = {.sz = sizeof(ho),
                           .control_socket = control,
                           .flags = v->daemon ? 0 : RETRYD_HOST_LOCAL_ONLY,
                           .client_name = "storm"};
    retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    /* Naive: a process-local budget that refills a million tokens a
     * second; every failed attempt that may be retried is. */
    retryd_budget_params unlimited = {.sz = sizeof(unlimited),
                                      .ratio = 1000,
                                      .min_retries_per_sec = 1e6,
                                      .cap = 1e6};
    retryd_profile_opts po = {
        .sz = sizeof(po),
        .base_url = url,
        .upstream = "storm",
        .attempt_timeout_ns = TIMEOUT_MS * INT64_C(1000000),
        .max_attempts = 3,
        .bulkhead = 4096, /* the storm's concurrency is the test's */
        .budget = v->unlimited ? &unlimited : NULL,
    };
    if (retryd_client_new(&co, rc) < 0 ||
        retryd_profile_new(*rc, &po, rp) < 0 ||
        retryd_multi_new(*rc, NULL, rm) < 0)
        return -1;
    return v->daemon && !retryd_host_attached(retryd_client_host(*rc)) ? -1 : 0;
}

/* A client process: ready on @p ready, start at the epoch, its bins on
 * @p out at the end. Never returns. */
static void client_main(const storm_cfg *cfg, const variant *v, const char *url,
                        const char *control, int64_t epoch, int index,
                        int ready, int out)
{
    retryd_client *rc;
    retryd_profile *rp;
    retryd_multi *m;
    C.epoch = epoch;
    C.n_bins = total_s(cfg) + 2;
    C.bins = calloc((size_t)C.n_bins + 1, sizeof(*C.bins));
    if (C.bins == NULL || client_setup(v, url, control, &rc, &rp, &m) < 0)
        _exit(70);
    (void)!write(ready, "r", 1);
    close(ready);
    int64_t now = bench_now_ns();
    if (now < epoch)
        wait_ns(epoch - now);
    client_loop(m, rp, cfg->rate / CLIENTS, index,
                epoch + (int64_t)total_s(cfg) * NS);
    retryd_multi_free(m); /* what is in flight ends as cancelled */
    retryd_profile_free(rp);
    retryd_client_free(rc);
    size_t bytes = (size_t)C.n_bins * sizeof(*C.bins);
    _exit(write(out, C.bins, bytes) == (ssize_t)bytes ? 0 : 70);
}

/* --- the run ------------------------------------------------------------- */

typedef struct run {
    storm_bin bins[MAX_S];
    server_bin server[MAX_S];
    double service_ns; /* what the upstream measured */
} run;

typedef struct procs {
    pid_t upstream, clients[CLIENTS];
    int up_out, outs[CLIENTS];
    rd_daemon d;
    bool have_daemon;
} procs;

static int start_upstream(procs *ps, int64_t epoch, char *url, size_t len)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return bench_fail_errno("pipe");
    pid_t parent = getpid();
    ps->upstream = fork();
    if (ps->upstream < 0)
        return bench_fail_errno("fork");
    if (ps->upstream == 0) {
        bench_child_prepare(parent, SIGKILL, NULL);
        dup2(p[1], 1);
        char w[16], us[16], q[16], e[32];
        snprintf(w, sizeof(w), "%d", WORKERS);
        snprintf(us, sizeof(us), "%d", SERVICE_US);
        snprintf(q, sizeof(q), "%d", QUEUE);
        snprintf(e, sizeof(e), "%lld", (long long)epoch);
        execl(STORM_UPSTREAM_PATH, "retryd-storm-upstream", w, us, q, e,
              (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    ps->up_out = p[0];
    char line[64] = {0};
    struct pollfd pfd = {p[0], POLLIN, 0};
    int port = 0;
    if (poll(&pfd, 1, BENCH_START_TIMEOUT_MS) != 1 ||
        read(p[0], line, sizeof(line) - 1) <= 0 ||
        sscanf(line, "port %d", &port) != 1)
        return bench_fail("the upstream did not start");
    snprintf(url, len, "http://127.0.0.1:%d", port);
    return 0;
}

static int start_clients(procs *ps, const storm_cfg *cfg, const variant *v,
                         const char *url, int64_t epoch)
{
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) < 0)
        return bench_fail_errno("pipe");
    pid_t parent = getpid();
    for (int i = 0; i < CLIENTS; i++) {
        int o[2];
        if (pipe2(o, O_CLOEXEC) < 0)
            return bench_fail_errno("pipe");
        ps->clients[i] = fork();
        if (ps->clients[i] < 0)
            return bench_fail_errno("fork");
        if (ps->clients[i] == 0) {
            bench_child_prepare(parent, SIGKILL, NULL);
            close(ready[0]);
            close(o[0]);
            client_main(cfg, v, url, ps->have_daemon ? ps->d.control : NULL,
                        epoch, i, ready[1], o[1]);
        }
        close(o[1]);
        ps->outs[i] = o[0];
    }
    close(ready[1]);
    for (int n = 0; n < CLIENTS;) {
        char b;
        struct pollfd pfd = {ready[0], POLLIN, 0};
        int64_t left = (epoch - bench_now_ns()) / 1000000;
        if (left <= 0 || poll(&pfd, 1, (int)left) != 1 ||
            read(ready[0], &b, 1) != 1) {
            close(ready[0]);
            return bench_fail("%d of %d clients ready before the start "
                              "(a client that cannot attach exits 70)",
                              n, CLIENTS);
        }
        n++;
    }
    close(ready[0]);
    return 0;
}

static void sleep_until(int64_t t)
{
    int64_t now = bench_now_ns();
    if (now < t)
        wait_ns(t - now);
}

static int collect_clients(procs *ps, run *out, int n_bins)
{
    storm_bin *b = calloc((size_t)n_bins, sizeof(*b));
    int rc = b ? 0 : bench_fail("out of memory");
    for (int i = 0; i < CLIENTS && rc == 0; i++) {
        size_t want = (size_t)n_bins * sizeof(*b), got = 0;
        while (got < want) {
            ssize_t n = read(ps->outs[i], (char *)b + got, want - got);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        if (got != want)
            rc = bench_fail("client %d sent %zu of %zu bytes", i, got, want);
        for (int s = 0; rc == 0 && s < n_bins && s < MAX_S; s++) {
            out->bins[s].goodput += b[s].goodput;
            out->bins[s].retries += b[s].retries;
        }
    }
    free(b);
    for (int i = 0; i < CLIENTS; i++) {
        int st;
        close(ps->outs[i]);
        if (bench_reap(ps->clients[i], BENCH_STOP_TIMEOUT_MS, &st) < 0 ||
            !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = rc ? rc : bench_fail("client %d did not exit cleanly", i);
    }
    return rc;
}

static int collect_upstream(procs *ps, run *out)
{
    kill(ps->upstream, SIGTERM);
    FILE *f = fdopen(ps->up_out, "r");
    if (f == NULL)
        return bench_fail_errno("fdopen");
    long long s;
    unsigned a, sv, st, rj;
    char line[128];
    out->service_ns = NAN;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%lld %u %u %u %u", &s, &a, &sv, &st, &rj) == 5 &&
            s >= 0 && s < MAX_S)
            out->server[s] = (server_bin){a, sv, st, rj};
        else
            sscanf(line, "service_ns %lf", &out->service_ns);
    }
    fclose(f);
    int status;
    return bench_reap(ps->upstream, BENCH_STOP_TIMEOUT_MS, &status) == 0 &&
                   !isnan(out->service_ns)
               ? 0
               : bench_fail("the upstream did not report");
}

/* The phases: half the workers at BEFORE, all of them at BEFORE+TRIGGER. */
static void trigger(const procs *ps, const storm_cfg *cfg, int64_t epoch)
{
    sleep_until(epoch + (int64_t)cfg->before_s * NS);
    kill(ps->upstream, SIGUSR1);
    sleep_until(epoch + (int64_t)(cfg->before_s + cfg->trigger_s) * NS);
    kill(ps->upstream, SIGUSR2);
    sleep_until(epoch + (int64_t)total_s(cfg) * NS);
}

static int run_variant(const storm_cfg *cfg, const variant *v, run *out)
{
    procs ps = {0};
    char url[64];
    int rc = 0;
    /* Every process is up well before the epoch, so that the first
     * second's arrivals are the first second's. */
    int64_t epoch = bench_now_ns() + 4 * NS;
    if (v->daemon) {
        ps.have_daemon = true;
        if (rd_daemon_init(&ps.d, NULL) < 0 || rd_daemon_start(&ps.d) < 0)
            rc = bench_fail("the daemon did not start");
    }
    if (rc == 0)
        rc = start_upstream(&ps, epoch, url, sizeof(url));
    if (rc == 0)
        rc = start_clients(&ps, cfg, v, url, epoch);
    if (rc == 0) {
        trigger(&ps, cfg, epoch);
        rc = collect_clients(&ps, out, total_s(cfg) + 2);
    }
    if (ps.upstream > 0) {
        int u = collect_upstream(&ps, out);
        rc = rc ? rc : u;
    }
    if (ps.have_daemon) {
        if (ps.d.pid > 0 && rd_daemon_stop(&ps.d, SIGTERM) != 0)
            rc = rc ? rc : bench_fail("the daemon did not exit cleanly");
        rd_daemon_cleanup(&ps.d);
    }
    return rc;
}

/* --- the comparison ------------------------------------------------------- */

typedef struct phase_figures {
    double goodput, retries, load;
} phase_figures;

enum { BEFORE, DURING, AFTER, WHOLE, N_PHASES };
static const char *const phase_names[N_PHASES] = {"before", "during", "after",
                                                  "whole"};

static void phase_bounds(const storm_cfg *c, int ph, int *from, int *to)
{
    int b = c->before_s, t = c->before_s + c->trigger_s, e = total_s(c);
    int lo[N_PHASES] = {b > WARM_S ? WARM_S : 0, b, t, b > WARM_S ? WARM_S : 0};
    int hi[N_PHASES] = {b, t, e, e};
    *from = lo[ph];
    *to = hi[ph];
}

static phase_figures real_phase(const run *r, const storm_cfg *c, int ph)
{
    int from, to;
    phase_bounds(c, ph, &from, &to);
    phase_figures f = {0};
    for (int s = from; s < to; s++) {
        f.goodput += r->bins[s].goodput;
        f.retries += r->bins[s].retries;
        f.load += r->server[s].arrivals;
    }
    double n = to - from;
    return (phase_figures){f.goodput / n, f.retries / n, f.load / n};
}

/* The numbers of the JSON array "key":[...] in @p json into @p out (at
 * most @p n); how many there were. The simulator's own output: numbers
 * only, no nesting inside the array. */
static int json_series(const char *json, const char *key, double *out, int n)
{
    char anchor[64];
    snprintf(anchor, sizeof(anchor), "\"%s\":[", key);
    const char *p = strstr(json, anchor);
    if (p == NULL)
        return 0;
    p += strlen(anchor);
    int i = 0;
    while (i < n && *p != ']' && *p != '\0') {
        char *end;
        out[i++] = strtod(p, &end);
        if (end == p)
            break;
        p = *end == ',' ? end + 1 : end;
    }
    return i;
}

/* The simulator's figures for the same phases, from its per-second series
 * (so "whole" is averaged the same way). */
static int sim_phases(const storm_cfg *c, const variant *v, double service_ns,
                      run *sim, phase_figures out[N_PHASES])
{
    char b[16], t[16], a[16], rate[32], svc[32], pol[32], nproc[16],
        workers[16], queue[16], timeout[16], seed[16];
    snprintf(pol, sizeof(pol), "%s", v->name);
    snprintf(b, sizeof(b), "%d", c->before_s);
    snprintf(t, sizeof(t), "%d", c->trigger_s);
    snprintf(a, sizeof(a), "%d", c->after_s);
    snprintf(rate, sizeof(rate), "%g", c->rate);
    snprintf(svc, sizeof(svc), "%.4f", service_ns / 1e6);
    snprintf(nproc, sizeof(nproc), "%d", CLIENTS);
    snprintf(workers, sizeof(workers), "%d", WORKERS);
    snprintf(queue, sizeof(queue), "%d", QUEUE);
    snprintf(timeout, sizeof(timeout), "%d", TIMEOUT_MS);
    snprintf(seed, sizeof(seed), "%d", SEED);
    /* A hop on loopback, through libcurl and the upstream's I/O thread:
     * about 0.1 ms. */
    char *argv[] = {RETRYD_SIM_PATH, "metastable",
                    "--policy",      pol,
                    "--processes",   nproc,
                    "--rate",        rate,
                    "--workers",     workers,
                    "--service-ms",  svc,
                    "--queue",       queue,
                    "--timeout-ms",  timeout,
                    "--latency-us",  "100",
                    "--before",      b,
                    "--trigger",     t,
                    "--after",       a,
                    "--seed",        seed,
                    "--json",        NULL};
    static run_result res;
    if (run_program(argv, 120000, &res) < 0 || res.exit_code != 0)
        return bench_fail("retryd-sim failed: %s", res.err);
    static double g[MAX_S], r[MAX_S], l[MAX_S];
    int n = total_s(c);
    memset(sim, 0, sizeof(*sim));
    if (json_series(res.out, "goodput", g, n) != n ||
        json_series(res.out, "retries", r, n) != n ||
        json_series(res.out, "load", l, n) != n)
        return bench_fail("retryd-sim printed no series of %d s: %.200s", n,
                          res.out);
    for (int s = 0; s < n; s++) {
        sim->bins[s].goodput = (uint32_t)g[s];
        sim->bins[s].retries = (uint32_t)r[s];
        sim->server[s].arrivals = (uint32_t)l[s];
    }
    for (int ph = 0; ph < N_PHASES; ph++)
        out[ph] = real_phase(sim, c, ph);
    return 0;
}

/* The simulator's error on one figure: against the real value, or, for a
 * figure below a tenth of the offered load (no retries before the
 * trigger, no goodput in a collapse), against a tenth of the offered load:
 * a relative error of a figure near zero says nothing. */
static double error_of(double sim, double real, double offered)
{
    double base = fabs(real) > 0.1 * offered ? fabs(real) : 0.1 * offered;
    return (sim - real) / base;
}

static bool print_row(const char *name, int ph, phase_figures re,
                      phase_figures si, double offered)
{
    double eg = error_of(si.goodput, re.goodput, offered);
    double er = error_of(si.retries, re.retries, offered);
    bool ok = fabs(eg) <= 0.10 && fabs(er) <= 0.10;
    printf("%-13s %-7s %8.1f %8.1f %+7.1f%% %9.1f %8.1f %+7.1f%% %8.1f  %s\n",
           ph == 0 ? name : "", phase_names[ph], re.goodput, si.goodput,
           100 * eg, re.retries, si.retries, 100 * er, re.load,
           ok ? "within 10%" : "OUTSIDE 10%");
    return ok;
}

static int stale_of(const run *r, const storm_cfg *c)
{
    int n = 0;
    for (int s = 0; s < total_s(c) && s < MAX_S; s++)
        n += (int)r->server[s].stale;
    return n;
}

/* With $BENCH_STORM_SERIES set to a directory: the run second by second,
 * real beside simulated, in DIR/storm-VARIANT.dat (second, goodput,
 * retries and load, real then simulated), for sim/plot.sh. */
static int write_series(const storm_cfg *c, const variant *v, const run *r,
                        const run *sim)
{
    const char *dir = getenv("BENCH_STORM_SERIES");
    if (dir == NULL || *dir == '\0')
        return 0;
    char path[512];
    snprintf(path, sizeof(path), "%s/storm-%s.dat", dir, v->name);
    FILE *f = fopen(path, "we");
    if (f == NULL)
        return bench_fail_errno(path);
    fprintf(f, "# trigger %d %d\n# second goodput sim retries sim load sim\n",
            c->before_s, c->before_s + c->trigger_s);
    for (int s = 0; s < total_s(c) && s < MAX_S; s++)
        fprintf(f, "%d %u %u %u %u %u %u\n", s, r->bins[s].goodput,
                sim->bins[s].goodput, r->bins[s].retries, sim->bins[s].retries,
                r->server[s].arrivals, sim->server[s].arrivals);
    return fclose(f) == 0 ? 0 : bench_fail_errno(path);
}

static int compare(const storm_cfg *c, const variant *v, const run *r,
                   int *outside)
{
    static run simulated;
    phase_figures sim[N_PHASES];
    if (sim_phases(c, v, r->service_ns, &simulated, sim) < 0 ||
        write_series(c, v, r, &simulated) < 0)
        return -1;
    for (int ph = 0; ph < N_PHASES; ph++)
        *outside +=
            !print_row(v->name, ph, real_phase(r, c, ph), sim[ph], c->rate);
    printf("%-13s service %.3f ms measured; %d requests served after their "
           "caller gave up\n",
           "", r->service_ns / 1e6, stale_of(r, c));
    return 0;
}

/* --- main ------------------------------------------------------------------
 */

static int parse_args(int argc, char **argv, storm_cfg *c, const variant **vs,
                      int *nv)
{
    long l[3] = {20, 30, 40};
    int i = 1;
    for (; i <= 3 && i < argc; i++)
        if (!retryd__parse_long(argv[i], 1, 1200, &l[i - 1]))
            return bench_fail("usage: bench_storm [before trigger after (s)] "
                              "[rate] [variant...]");
    c->before_s = (int)l[0];
    c->trigger_s = (int)l[1];
    c->after_s = (int)l[2];
    c->rate = 280;
    if (i < argc && !retryd__parse_double(argv[i++], 1, 5000, &c->rate))
        return bench_fail("rate: 1 to 5000 first attempts/s");
    *nv = 0;
    for (; i < argc; i++) {
        const variant *v = NULL;
        for (size_t k = 0; k < sizeof(variants) / sizeof(variants[0]); k++)
            if (strcmp(argv[i], variants[k].name) == 0)
                v = &variants[k];
        if (v == NULL)
            return bench_fail("variants: retryd, retryd-local, naive");
        vs[(*nv)++] = v;
    }
    if (*nv == 0)
        for (size_t k = 0; k < sizeof(variants) / sizeof(variants[0]); k++)
            vs[(*nv)++] = &variants[k];
    return total_s(c) < MAX_S - 2 ? 0 : bench_fail("at most an hour in all");
}

int main(int argc, char **argv)
{
    storm_cfg c;
    const variant *vs[8];
    int nv, outside = 0;
    if (parse_args(argc, argv, &c, vs, &nv) < 0 || bench_install_signals() < 0)
        return 1;
    printf("bench_storm: %d client processes, %g first attempts/s in all "
           "(Poisson), 3 attempts of %d ms;\nupstream %d workers x %d ms "
           "(%.0f/s), queue %d; half the workers from %d s to %d s, run %d "
           "s\n",
           CLIENTS, c.rate, TIMEOUT_MS, WORKERS, SERVICE_US / 1000,
           WORKERS * 1e6 / SERVICE_US, QUEUE, c.before_s,
           c.before_s + c.trigger_s, total_s(&c));
    printf("per second, real beside retryd-sim given the same setup; phases "
           "before [%d,%d) during [%d,%d) after [%d,%d)\n\n",
           c.before_s > WARM_S ? WARM_S : 0, c.before_s, c.before_s,
           c.before_s + c.trigger_s, c.before_s + c.trigger_s, total_s(&c));
    printf("%-13s %-7s %8s %8s %8s %9s %8s %8s %8s\n", "variant", "phase",
           "goodput", "sim", "error", "retries", "sim", "error", "load");
    static run r;
    for (int i = 0; i < nv && !bench_stop; i++) {
        memset(&r, 0, sizeof(r));
        if (run_variant(&c, vs[i], &r) < 0 ||
            compare(&c, vs[i], &r, &outside) < 0)
            return 1;
    }
    printf("\n%d figure%s outside 10%% of the real run (error: against the "
           "real figure, or a tenth\nof the offered load for a figure "
           "below that)\n",
           outside, outside == 1 ? "" : "s");
    return 0;
}
