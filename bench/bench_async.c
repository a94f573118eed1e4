/* SPDX-License-Identifier: MIT */
/*
 * Requests per second through the asynchronous executor (retryd_multi)
 * beside raw curl_multi, the same requests with the same concurrency on
 * one thread, against the same keep-alive loopback nginx in the same run.
 * Target: at least 0.95 of raw curl_multi's throughput for safe GETs.
 *
 * nginx is bench_nginx.c's (bench_executor's), on the same CPU as the
 * benchmark by default. Three variants, each with its own connections,
 * warmed up untimed so that every connection it needs is open:
 *
 *   raw      one curl multi driven the way an event loop drives it
 *            (curl_multi_socket_action, a socket callback keeping a poll
 *            set, one timer), IN_FLIGHT easy handles set up once (URL,
 *            NOSIGNAL, no proxy, a write callback appending the body),
 *            each re-added when its transfer is done: the baseline the
 *            target is measured against.
 *   raw + timeout + headers kept
 *            the same plus CURLOPT_TIMEOUT_MS and a header callback
 *            keeping every response header line: a bounded transfer with
 *            kept headers through libcurl's own timer (bench_executor's
 *            second reference; retryd_multi times its transfers itself).
 *   retryd   retryd_multi_run() on one multi: a safe GET through an
 *            HTTP/1.1 profile (local budget, a bulkhead of IN_FLIGHT, so
 *            no call waits for a permit), IN_FLIGHT submitted, each
 *            completion checking its result, freeing it and submitting the
 *            next; the profile's pool hands the handles back, as raw
 *            re-adds its own.
 *
 * Both keep as many idle connections as they run transfers at once (raw:
 * CURLMOPT_MAXCONNECTS; retryd_multi does it itself, docs/async.md).
 * In a run the variants take turns in blocks of BLOCK requests, the order
 * rotating (bench_run.h); each figure is a median over runs. The target is
 * judged on the median of the runs' own ratios (retryd_multi / raw), whose
 * spread (extremes and quartiles) is printed beside it with the load
 * average, since other work on the machine is what widens it. Every
 * request must answer 200 with the expected body, and nginx's stub_status
 * must count exactly the timed requests and no new connection in every
 * run.
 *
 * usage: bench_async [requests-per-run] [runs] [in-flight] [cpus] [variants]
 *        cpus: same (default), split or none; see bench_place()
 *        variants: all (default), or only raw, same or retryd: one variant's
 *        requests alone, to profile it (callgrind); nothing is judged
 */
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "bench_common.h"
#include "bench_nginx.h"
#include "bench_proc.h"
#include "bench_run.h"
#include "harness.h"
#include "retryd/retryd.h"

#define MAX_IN_FLIGHT 1000
#define TARGET_RATIO 0.95
#define BLOCK 1000 /* requests a variant makes before the next one's turn */
#define PATH "/ok"

enum variant { V_RAW, V_RAW_SAME, V_RETRYD, N_VARIANTS };

static const char *const labels[N_VARIANTS] = {
    [V_RAW] = "raw curl_multi (baseline)",
    [V_RAW_SAME] = "raw + timeout + headers kept",
    [V_RETRYD] = "retryd_multi",
};

/* One raw transfer's handle and its buffers. */
typedef struct raw_xfer {
    CURL *h;
    bench_sink body, hdr;
} raw_xfer;

/* A raw curl multi and the poll set its socket callback keeps. */
typedef struct raw_multi {
    CURLM *m;
    raw_xfer x[MAX_IN_FLIGHT];
    struct pollfd pfd[2 * MAX_IN_FLIGHT];
    int n_pfd;
    int64_t timer_at; /* -1: none */
    long left, done;  /* to start, completed */
    bool same_work;
} raw_multi;

typedef struct bench {
    rd_daemon d; /* only its temporary directory: no daemon runs */
    bench_nginx ng;
    char base_url[64], url[96];
    long in_flight;
    size_t body_len;
    CURL *status; /* stub_status queries, its own connection */
    bench_sink sk;
    raw_multi raw[2]; /* V_RAW, V_RAW_SAME */
    retryd_client *client;
    retryd_profile *profile;
    retryd_multi *multi;
    retryd_request req;
    long left, done; /* the retryd variant's block */
    int failed;
} bench;

const char bench_prog[] = "bench_async";

static int g_cpu_self = -1, g_cpu_nginx = -1;
static const char *g_pin = "same";

/* --- raw curl_multi --------------------------------------------------------
 */

static int raw_socket(CURL *e, curl_socket_t fd, int what, void *ctx,
                      void *socketp)
{
    raw_multi *r = ctx;
    (void)e, (void)socketp;
    int i = 0;
    while (i < r->n_pfd && r->pfd[i].fd != fd)
        i++;
    if (what == CURL_POLL_REMOVE) {
        if (i < r->n_pfd)
            r->pfd[i] = r->pfd[--r->n_pfd];
        return 0;
    }
    if (i == r->n_pfd) {
        if (r->n_pfd == 2 * MAX_IN_FLIGHT)
            return -1;
        r->pfd[r->n_pfd++].fd = fd;
    }
    r->pfd[i].events = (short)((what & CURL_POLL_IN ? POLLIN : 0) |
                               (what & CURL_POLL_OUT ? POLLOUT : 0));
    return 0;
}

static int raw_timer(CURLM *m, long ms, void *ctx)
{
    raw_multi *r = ctx;
    (void)m;
    r->timer_at = ms < 0 ? -1 : bench_now_ns() + (int64_t)ms * 1000000;
    return 0;
}

static void raw_options(bench *b, raw_multi *r, raw_xfer *x)
{
    CURL *h = x->h;
    curl_easy_setopt(h, CURLOPT_URL, b->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bench_sink_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x->body);
    curl_easy_setopt(h, CURLOPT_PRIVATE, x);
    if (r->same_work) {
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, bench_sink_write);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &x->hdr);
    }
}

static int raw_open(bench *b, raw_multi *r, bool same_work)
{
    r->same_work = same_work;
    r->timer_at = -1;
    if ((r->m = curl_multi_init()) == NULL)
        return bench_fail("curl_multi_init failed");
    curl_multi_setopt(r->m, CURLMOPT_SOCKETFUNCTION, raw_socket);
    curl_multi_setopt(r->m, CURLMOPT_SOCKETDATA, r);
    curl_multi_setopt(r->m, CURLMOPT_TIMERFUNCTION, raw_timer);
    curl_multi_setopt(r->m, CURLMOPT_TIMERDATA, r);
    /* Idle connections kept for every transfer at once, as retryd_multi
     * keeps them; libcurl's default shrinks with the transfers running. */
    curl_multi_setopt(r->m, CURLMOPT_MAXCONNECTS, b->in_flight);
    for (long i = 0; i < b->in_flight; i++) {
        if ((r->x[i].h = curl_easy_init()) == NULL)
            return bench_fail("out of memory");
        raw_options(b, r, &r->x[i]);
    }
    return 0;
}

static void raw_close(raw_multi *r)
{
    for (long i = 0; i < MAX_IN_FLIGHT && r->x[i].h != NULL; i++) {
        curl_easy_cleanup(r->x[i].h);
        free(r->x[i].body.buf);
        free(r->x[i].hdr.buf);
    }
    curl_multi_cleanup(r->m);
}

static int raw_start(raw_multi *r, raw_xfer *x)
{
    x->body.len = x->hdr.len = 0;
    r->left--;
    return curl_multi_add_handle(r->m, x->h) == CURLM_OK
               ? 0
               : bench_fail("curl_multi_add_handle failed");
}

/* Each finished transfer checked, and its handle re-added while requests
 * are left. */
static int raw_reap(bench *b, raw_multi *r)
{
    CURLMsg *msg;
    int n;
    while ((msg = curl_multi_info_read(r->m, &n)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        char *priv = NULL;
        long code = 0;
        CURL *h = msg->easy_handle;
        CURLcode rc = msg->data.result;
        curl_easy_getinfo(h, CURLINFO_PRIVATE, &priv);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        raw_xfer *x = (raw_xfer *)(void *)priv;
        curl_multi_remove_handle(r->m, h);
        if (rc != CURLE_OK || code != 200 || x->body.len != b->body_len ||
            (r->same_work && x->hdr.len == 0))
            return bench_fail("raw: %s, status %ld, %zu body bytes",
                              curl_easy_strerror(rc), code, x->body.len);
        r->done++;
        if (r->left > 0 && raw_start(r, x) < 0)
            return -1;
    }
    return 0;
}

static int raw_events(short revents)
{
    return (revents & (POLLIN | POLLHUP | POLLERR) ? CURL_CSELECT_IN : 0) |
           (revents & (POLLOUT | POLLERR) ? CURL_CSELECT_OUT : 0) |
           (revents & POLLERR ? CURL_CSELECT_ERR : 0);
}

/* One turn of the loop: poll until the timer, each ready descriptor (a
 * copy: an action changes the set), the timer, the finished transfers. */
static int raw_turn(bench *b, raw_multi *r)
{
    struct pollfd ready[2 * MAX_IN_FLIGHT];
    int running, n = r->n_pfd;
    int64_t now = bench_now_ns();
    int ms = r->timer_at < 0 ? 1000
             : r->timer_at <= now
                 ? 0
                 : (int)((r->timer_at - now + 999999) / 1000000);
    memcpy(ready, r->pfd, (size_t)n * sizeof(*ready));
    if (poll(ready, (nfds_t)n, ms) < 0)
        return bench_fail_errno("poll");
    for (int i = 0; i < n; i++)
        if (ready[i].revents != 0)
            curl_multi_socket_action(r->m, ready[i].fd,
                                     raw_events(ready[i].revents), &running);
    if (r->timer_at >= 0 && bench_now_ns() >= r->timer_at) {
        r->timer_at = -1;
        curl_multi_socket_action(r->m, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    return raw_reap(b, r);
}

static int raw_block(bench *b, raw_multi *r, long n)
{
    long start = n < b->in_flight ? n : b->in_flight;
    r->left = n;
    r->done = 0;
    for (long i = 0; i < start; i++)
        if (raw_start(r, &r->x[i]) < 0)
            return -1;
    while (r->done < n)
        if (bench_stop || raw_turn(b, r) < 0)
            return bench_fail("raw: interrupted or failed");
    return 0;
}

/* --- retryd_multi ------------------------------------------------------- */

static void on_done(void *ctx, retryd_call *call, int err, retryd_result *res)
{
    bench *b = ctx;
    size_t len = 0;
    (void)call;
    (void)retryd_result_body(res, &len);
    if (err != 0 || retryd_result_outcome(res) != RETRYD_OUTCOME_RESPONSE ||
        retryd_result_status(res) != 200 || len != b->body_len ||
        retryd_result_attempt_count(res) != 1) {
        if (b->failed++ == 0)
            bench_fail("retryd: %s, %s, status %d, %zu body bytes, error "
                       "\"%s\"",
                       retryd_strerror(err),
                       retryd_outcome_name(retryd_result_outcome(res)),
                       retryd_result_status(res), len,
                       retryd_result_error(res));
    }
    retryd_result_free(res);
    b->done++;
    if (b->left > 0) {
        b->left--;
        if (retryd_multi_submit(b->multi, b->profile, &b->req, on_done, b,
                                NULL) < 0)
            b->failed++;
    }
}

static int retryd_block(bench *b, long n)
{
    long start = n < b->in_flight ? n : b->in_flight;
    b->left = n - start;
    b->done = 0;
    for (long i = 0; i < start; i++)
        if (retryd_multi_submit(b->multi, b->profile, &b->req, on_done, b,
                                NULL) < 0)
            return bench_fail("retryd_multi_submit failed");
    int r = retryd_multi_run(b->multi, 60 * INT64_C(1000000000));
    if (r < 0 || b->failed || b->done != n)
        return bench_fail("retryd: run %s, %d failed, %ld of %ld done",
                          retryd_strerror(r), b->failed, b->done, n);
    return 0;
}

static int open_retryd(bench *b)
{
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .flags = RETRYD_HOST_LOCAL_ONLY,
                                 .client_name = "bench_async"};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    retryd_profile_opts po = {.sz = sizeof(po),
                              .base_url = b->base_url,
                              .bulkhead = (uint32_t)b->in_flight};
    b->req = (retryd_request){.sz = sizeof(b->req),
                              .path = PATH,
                              .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    int r = retryd_client_new(&co, &b->client);
    if (r == 0)
        r = retryd_profile_new(b->client, &po, &b->profile);
    if (r == 0)
        r = retryd_multi_new(b->client, NULL, &b->multi);
    return r < 0 ? bench_fail("opening the executor: %s", retryd_strerror(r))
                 : 0;
}

/* --- measuring ------------------------------------------------------------ */

/* One block of variant @p v: @p n requests, each checked (bench_run.h). */
static int block(void *ctx, int v, long n)
{
    bench *b = ctx;
    if (bench_stop)
        return bench_fail("interrupted");
    return v == V_RETRYD ? retryd_block(b, n) : raw_block(b, &b->raw[v], n);
}

/* The expected body, from one plain request. */
static int probe(bench *b)
{
    long code = 0;
    CURL *h = curl_easy_init();
    if (h == NULL)
        return bench_fail("out of memory");
    b->sk.len = 0;
    curl_easy_setopt(h, CURLOPT_URL, b->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bench_sink_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b->sk);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK || code != 200)
        return bench_fail("GET %s: %s, status %ld", b->url,
                          curl_easy_strerror(rc), code);
    b->body_len = b->sk.len;
    return 0;
}

static int setup(bench *b)
{
    if (rd_daemon_init(&b->d, NULL) < 0)
        return bench_fail_errno("the temporary directory");
    b->ng = (bench_nginx){.dir = b->d.dir,
                          .worker_connections = 4 * (int)b->in_flight + 64,
                          .cpu = g_cpu_nginx};
    if (bench_nginx_start(&b->ng) < 0)
        return -1;
    snprintf(b->base_url, sizeof(b->base_url), "http://127.0.0.1:%d",
             b->ng.port);
    snprintf(b->url, sizeof(b->url), "%s%s", b->base_url, PATH);
    if ((b->status = bench_nginx_status_open(b->ng.port, &b->sk)) == NULL)
        return -1;
    if (probe(b) < 0 || raw_open(b, &b->raw[V_RAW], false) < 0 ||
        raw_open(b, &b->raw[V_RAW_SAME], true) < 0)
        return -1;
    return open_retryd(b);
}

static int teardown(bench *b)
{
    int rc = 0;
    retryd_multi_free(b->multi); /* closes its connections */
    retryd_profile_free(b->profile);
    retryd_client_free(b->client);
    for (int i = 0; i < 2; i++)
        if (b->raw[i].m != NULL)
            raw_close(&b->raw[i]);
    curl_easy_cleanup(b->status);
    free(b->sk.buf);
    if (bench_nginx_stop(&b->ng) < 0)
        rc = -1;
    rd_daemon_cleanup(&b->d);
    return rc;
}

/* --- the report ----------------------------------------------------------- */

/* The judged figure: the median of the runs' own ratios, its spread, and
 * the same pairs from CPU time alone. */
static void report_judgement(const bench_runs *runs, const bench_summary *s)
{
    bench_ratios st, cst;
    bench_ratios_of(runs, V_RETRYD, V_RAW, &st);
    bench_cpu_ratios_of(runs, V_RETRYD, V_RAW, &cst);
    printf("  per-run ratio retryd_multi / raw, in run order:");
    for (int r = 0; r < st.n; r++)
        printf(" %.3f", st.ratio[r]);
    printf("\n  spread of the runs' ratios: %.3f..%.3f, quartiles %.3f..%.3f, "
           "median %.3f\n",
           st.sorted[0], st.sorted[st.n - 1], st.q1, st.q3, st.median);
    /* The same pairs without the time others took from the shared CPU:
     * what the two processes' own CPU time allows. Not judged; it shows
     * how much of the spread is the machine's. */
    printf("  CPU-time ratio (benchmark + nginx CPU per request): median "
           "%.3f, %.3f..%.3f, quartiles %.3f..%.3f\n",
           cst.median, cst.sorted[0], cst.sorted[cst.n - 1], cst.q1, cst.q3);
    /* Judged on the runs' own ratios: within a run the variants take
     * turns block by block, so each ratio pairs figures measured under the
     * same conditions, where the medians of each column need not. */
    printf("  target: retryd_multi >= %.2f x raw curl_multi (median of the "
           "runs' ratios): %.3f  %s\n",
           TARGET_RATIO, st.median,
           st.median >= TARGET_RATIO ? "met" : "MISSED");
    printf("  retryd's own share: %.3f x raw + timeout + headers kept\n",
           s[V_RETRYD].rps / s[V_RAW_SAME].rps);
    printf("  (us/req: wall time, 1e6 / req/s; cpu us: the benchmark "
           "thread's own CPU time per request,\n   user + system; nginx: "
           "nginx's CPU time per request; other: the rest of us/req, when\n"
           "   neither ran (other processes did, or the CPU idled). Every "
           "request answered 200\n   with its body; in every run nginx "
           "counted exactly the requests and no new connection.)\n");
}

static void report(const bench *b, long n, const bench_runs *runs,
                   const double load[2])
{
    bench_summary s[N_VARIANTS];

    for (int v = 0; v < N_VARIANTS; v++)
        bench_summarize(runs, v, &s[v]);
    printf("bench_async: %ld x GET %s (%zu-byte body) per variant and run, "
           "%ld in flight on one thread, x %d runs, medians\n",
           n, PATH, b->body_len, b->in_flight, runs->done);
    printf("  nginx on 127.0.0.1:%d, keep-alive connections, libcurl %s\n",
           b->ng.port, curl_version_info(CURLVERSION_NOW)->version);
    bench_print_cpus(g_pin, g_cpu_self, g_cpu_nginx);
    printf("; load average %.2f before, %.2f after\n", load[0], load[1]);
    printf("  %-30s %7s %7s %6s %8s %6s %6s %6s  %s\n", "", "req/s", "us/req",
           "x raw", "cpu us", "+cpu", "nginx", "other", "req/s range");
    for (int v = 0; v < N_VARIANTS; v++) {
        if (s[v].rps == 0)
            continue; /* not run */
        bool raw = s[V_RAW].rps > 0;
        printf(
            "  %-30s %7.0f %7.2f %6.3f %8.2f %6.2f %6.2f %6.2f  %.0f..%.0f\n",
            labels[v], s[v].rps, 1e6 / s[v].rps,
            raw ? s[v].rps / s[V_RAW].rps : 0, s[v].cpu_us,
            raw ? s[v].cpu_us - s[V_RAW].cpu_us : 0, s[v].peer_us,
            s[v].other_us, s[v].rps_lo, s[v].rps_hi);
    }
    if (runs->only == 0)
        report_judgement(runs, s);
    else
        printf("  (one variant only, for profiling: nothing judged)\n");
}

/* The variants run: "all", or one of "raw", "same", "retryd" (bench_run.h
 * only). False for anything else. */
static bool parse_only(const char *arg, unsigned *only)
{
    static const char *const names[N_VARIANTS] = {
        [V_RAW] = "raw", [V_RAW_SAME] = "same", [V_RETRYD] = "retryd"};
    *only = 0;
    for (int v = 0; v < N_VARIANTS; v++)
        if (strcmp(arg, names[v]) == 0)
            *only = 1u << v;
    return *only != 0 || strcmp(arg, "all") == 0;
}

int main(int argc, char **argv)
{
    static bench_runs runs = {.variants = N_VARIANTS, .block = BLOCK};
    static bench b;
    long n = 10000, n_runs = 11;
    double load[2] = {0, 0};

    b.in_flight = 100;
    if (argc > 6 ||
        (argc > 1 && !retryd__parse_long(argv[1], 1, 100000000, &n)) ||
        (argc > 2 &&
         !retryd__parse_long(argv[2], 1, BENCH_MAX_RUNS, &n_runs)) ||
        (argc > 3 &&
         !retryd__parse_long(argv[3], 1, MAX_IN_FLIGHT, &b.in_flight)) ||
        (argc > 4 && !bench_place_mode_ok(argv[4])) ||
        (argc > 5 && !parse_only(argv[5], &runs.only))) {
        fprintf(stderr, "usage: bench_async [requests-per-run>0] [runs 1..64] "
                        "[in-flight 1..1000] [cpus: same|split|none] "
                        "[variants: all|raw|same|retryd]\n");
        return 64;
    }
    if (argc > 4)
        g_pin = argv[4];
    if (bench_start(g_pin, &g_cpu_self, &g_cpu_nginx) < 0)
        return 1;
    int rc = setup(&b);
    /* Warm up untimed: every variant's connections opened (a block of
     * in-flight requests at once), the pool's handles, caches. */
    for (int v = 0; v < N_VARIANTS && rc == 0; v++)
        for (int i = 0; i < 3 && rc == 0 && (!runs.only || runs.only >> v & 1);
             i++)
            rc = block(&b, v, b.in_flight * 5);
    runs.run = block;
    runs.ctx = &b;
    runs.status = b.status;
    runs.sk = &b.sk;
    runs.peer = b.ng.pid;
    /* Other work on the machine shows in the spread: say how much. */
    (void)getloadavg(&load[0], 1);
    if (rc == 0)
        rc = bench_run_all(&runs, n, (int)n_runs);
    (void)getloadavg(&load[1], 1);
    if (teardown(&b) < 0)
        rc = -1;
    if (rc == 0)
        report(&b, n, &runs, load);
    curl_global_cleanup();
    return rc == 0 ? 0 : 1;
}
