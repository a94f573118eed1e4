/* SPDX-License-Identifier: MIT */
/*
 * Requests per second through the executor (retryd_execute) beside raw
 * libcurl, against the same keep-alive loopback server in the same run,
 * and the executor's overhead in microseconds per request. Target: at
 * least 0.97 of raw libcurl's throughput for safe GETs.
 *
 * The server is Debian's nginx, started by the benchmark with a
 * configuration of its own in a temporary directory, on a free port of
 * 127.0.0.1, and stopped at the end. Four variants, single-threaded, each
 * on its own keep-alive connection, warmed up untimed:
 *
 *   raw      one easy handle, options set once (URL, NOSIGNAL, no proxy,
 *            a write callback), then curl_easy_perform() in a loop; the
 *            body appended to a buffer kept across requests. The baseline
 *            the target is measured against.
 *   raw + timeout + headers kept
 *            the same handle setup plus what the executor cannot leave out
 *            and a careful caller adds too: CURLOPT_TIMEOUT_MS and a header
 *            callback keeping every response header line. A second
 *            reference, which separates libcurl's cost of that work from
 *            retryd's own.
 *   local    retryd_execute: a safe GET through an HTTP/1.1 profile, a
 *            client with a process-local budget (RETRYD_HOST_LOCAL_ONLY),
 *            result freed.
 *   daemon   the same with a client attached to a real retryd daemon the
 *            benchmark starts (tests/support/harness/harness.c, as the tests
 * do).
 *
 * local - raw and daemon - raw are the executor's overhead per request:
 * everything retryd does around libcurl (URL, header lists, result,
 * evidence, decision, budget, pool, bulkhead). The executor configures its
 * pooled handles once and sets per request only the options that changed,
 * and turns VERBOSE on only for HTTP/2 profiles, so that overhead is
 * retryd's own, not libcurl's reset or verbose formatting.
 *
 * In a run the variants take turns in blocks of BLOCK requests, the order
 * rotating, so that drift and a neighbour's bursts hit them all alike; each
 * figure is a median over runs. Beside wall time, the benchmark thread's
 * own CPU time per request is reported: it excludes nginx and time the
 * thread was not running, so it shows the client's overhead even on a busy
 * machine. Every request must answer 200 with the expected body, and
 * nginx's stub_status must count exactly the timed requests and no new
 * connection in every run: a retry, a libcurl re-send or a lost keep-alive
 * connection fails the benchmark instead of skewing it.
 *
 * By default the benchmark and nginx share one CPU: each request is then
 * two context switches on that CPU (bench_nginx.h: bench_place). nginx,
 * its configuration and its counters are bench_nginx.c's, shared with
 * bench_async.
 *
 * usage: bench_executor [requests-per-run] [runs] [path] [cpus]
 *        path: /ok (default, 2-byte body) or /static/1k (1 KiB file)
 *        cpus: same (default), split or none; see bench_place()
 */
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
#include "retryd/client.h"

#define TARGET_RATIO 0.97
#define BLOCK 500 /* requests a variant makes before the next one's turn */

enum variant { V_RAW, V_RAW_SAME, V_LOCAL, V_DAEMON, N_VARIANTS };

static const char *const labels[N_VARIANTS] = {
    [V_RAW] = "raw libcurl (baseline)",
    [V_RAW_SAME] = "raw + timeout + headers kept",
    [V_LOCAL] = "retryd_execute, local budget",
    [V_DAEMON] = "retryd_execute, daemon budget",
};

typedef struct bench {
    rd_daemon d;       /* its directory holds nginx's files too */
    char url[128];     /* http://127.0.0.1:port/path */
    char base_url[64]; /* http://127.0.0.1:port */
    char path[64];
    bench_nginx ng; /* in d's directory */
    CURL *raw;      /* the baseline */
    CURL *raw_same; /* the baseline doing the executor's job */
    bench_sink hdr; /* raw_same's response header lines */
    CURL *status;   /* stub_status queries, its own connection */
    bench_sink sk;  /* the bodies of the raw and stub_status handles */
    retryd_client *client[2]; /* local, daemon */
    retryd_profile *profile[2];
    size_t body_len; /* what every answer must carry */
} bench;

const char bench_prog[] = "bench_executor";

/* CPU placement: the benchmark's and nginx's CPU, -1 for "not pinned". */
static int g_cpu_self = -1, g_cpu_nginx = -1;
static const char *g_pin = "same";

/* --- raw libcurl ---------------------------------------------------------- */

/* raw_same's header callback: every line kept, as the executor keeps the
 * response's headers for its result. */
static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
    return bench_sink_write(data, size, n, ctx);
}

/* The options of a baseline handle, set once. */
static void raw_options(bench *b, CURL *h)
{
    curl_easy_setopt(h, CURLOPT_URL, b->url);
    /* What any threaded program sets (and the executor does): without it,
     * libcurl swaps SIGPIPE's handler around every transfer. */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* as the executor: no proxy */
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bench_sink_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b->sk);
    if (h == b->raw_same) {
        /* What any careful caller adds, and the executor does: a bound on
         * the transfer, and the response's headers. */
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &b->hdr);
    }
}

/* One request on a baseline handle; 0 when it answered 200 with the
 * body. */
static int raw_request(bench *b, enum variant v)
{
    CURL *h = v == V_RAW ? b->raw : b->raw_same;
    long code = 0;

    b->sk.len = 0;
    b->hdr.len = 0;
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK || code != 200 || b->sk.len != b->body_len ||
        (v == V_RAW_SAME && b->hdr.len == 0))
        return bench_fail("%s: %s, status %ld, %zu body bytes, %zu header "
                          "bytes (expected 200, %zu)",
                          labels[v], curl_easy_strerror(rc), code, b->sk.len,
                          b->hdr.len, b->body_len);
    return 0;
}

/* --- the executor --------------------------------------------------------- */

static int exec_request(bench *b, enum variant v)
{
    retryd_request req = {.sz = sizeof(req),
                          .path = b->path,
                          .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    retryd_result *res = NULL;
    size_t len = 0;

    int r = retryd_execute(b->profile[v - V_LOCAL], &req, &res);
    if (r < 0)
        return bench_fail("retryd_execute: %s", retryd_strerror(r));
    (void)retryd_result_body(res, &len);
    bool ok = retryd_result_outcome(res) == RETRYD_OUTCOME_RESPONSE &&
              retryd_result_status(res) == 200 && len == b->body_len &&
              retryd_result_attempt_count(res) == 1;
    if (!ok)
        bench_fail("%s: %s, status %d, %zu body bytes, %zu attempts, error "
                   "\"%s\" (expected response 200, %zu, 1)",
                   labels[v], retryd_outcome_name(retryd_result_outcome(res)),
                   retryd_result_status(res), len,
                   retryd_result_attempt_count(res), retryd_result_error(res),
                   b->body_len);
    retryd_result_free(res);
    return ok ? 0 : -1;
}

static int open_executor(bench *b, int i, const char *control)
{
    retryd_host_opts ho = {.sz = sizeof(ho), .client_name = "bench_executor"};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    retryd_profile_opts po = {.sz = sizeof(po), .base_url = b->base_url};

    if (control == NULL)
        ho.flags = RETRYD_HOST_LOCAL_ONLY;
    else
        ho.control_socket = control;
    int r = retryd_client_new(&co, &b->client[i]);
    if (r == 0)
        r = retryd_profile_new(b->client[i], &po, &b->profile[i]);
    if (r < 0)
        return bench_fail("opening the executor: %s", retryd_strerror(r));
    /* Unattached, the library would spend from a process-local bucket: a
     * figure for that is not the daemon's. */
    if (control != NULL &&
        (!retryd_host_attached(retryd_client_host(b->client[i])) ||
         !retryd_upstream_shared(retryd_profile_budget(b->profile[i]))))
        return bench_fail("not attached to the daemon's segment");
    return 0;
}

/* --- measuring ------------------------------------------------------------ */

static int request(bench *b, enum variant v)
{
    if (bench_stop)
        return bench_fail("interrupted");
    return v < V_LOCAL ? raw_request(b, v) : exec_request(b, v);
}

/* One block of variant @p v: @p n requests (bench_run.h). */
static int run_block(void *ctx, int v, long n)
{
    for (long i = 0; i < n; i++)
        if (request(ctx, (enum variant)v) < 0)
            return -1;
    return 0;
}

static int setup(bench *b)
{
    long accepts, requests;

    if (rd_daemon_init(&b->d, NULL) < 0)
        return bench_fail_errno("the temporary directory");
    /* The servers first: they inherit no connection of ours. */
    b->ng = (bench_nginx){
        .dir = b->d.dir, .worker_connections = 64, .cpu = g_cpu_nginx};
    if (bench_nginx_start(&b->ng) < 0)
        return -1;
    if (rd_daemon_start(&b->d) < 0) {
        bench_print_tail(b->d.log);
        return bench_fail("retryd did not become ready");
    }
    snprintf(b->base_url, sizeof(b->base_url), "http://127.0.0.1:%d",
             b->ng.port);
    snprintf(b->url, sizeof(b->url), "%s%s", b->base_url, b->path);
    b->raw = curl_easy_init();
    b->raw_same = curl_easy_init();
    if (b->raw == NULL || b->raw_same == NULL)
        return bench_fail("out of memory");
    if ((b->status = bench_nginx_status_open(b->ng.port, &b->sk)) == NULL)
        return -1;
    if (bench_nginx_counters(b->status, &b->sk, &accepts, &requests) < 0)
        return -1;
    raw_options(b, b->raw);
    raw_options(b, b->raw_same);
    /* The expected body: what the baseline gets first. */
    b->sk.len = 0;
    long code = 0;
    CURLcode rc = curl_easy_perform(b->raw);
    curl_easy_getinfo(b->raw, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK || code != 200)
        return bench_fail("GET %s: %s, status %ld", b->url,
                          curl_easy_strerror(rc), code);
    b->body_len = b->sk.len;
    if (open_executor(b, 0, NULL) < 0)
        return -1;
    return open_executor(b, 1, b->d.control);
}

/* Everything setup made, whatever part of it succeeded. */
static int teardown(bench *b)
{
    int rc = 0;
    for (int i = 0; i < 2; i++) {
        retryd_profile_free(b->profile[i]); /* closes its connections */
        retryd_client_free(b->client[i]);
    }
    curl_easy_cleanup(b->raw);
    curl_easy_cleanup(b->raw_same);
    curl_easy_cleanup(b->status);
    free(b->sk.buf);
    free(b->hdr.buf);
    if (bench_nginx_stop(&b->ng) < 0)
        rc = -1;
    if (b->d.pid > 0 && rd_daemon_stop(&b->d, SIGTERM) != 0)
        rc = bench_fail("retryd did not stop cleanly");
    rd_daemon_cleanup(&b->d);
    return rc;
}

/* --- the report ----------------------------------------------------------- */

static void report(const bench *b, long n, const bench_runs *runs)
{
    double med[N_VARIANTS], lo[N_VARIANTS], hi[N_VARIANTS], us[N_VARIANTS],
        cpu[N_VARIANTS];

    for (int v = 0; v < N_VARIANTS; v++) {
        bench_summary s;
        bench_summarize(runs, v, &s);
        med[v] = s.rps;
        lo[v] = s.rps_lo;
        hi[v] = s.rps_hi;
        us[v] = 1e6 / med[v];
        cpu[v] = s.cpu_us;
    }
    printf("bench_executor: %ld x GET %s (%zu-byte body) per variant and run "
           "x %d runs, medians\n",
           n, b->path, b->body_len, runs->done);
    printf("  nginx on 127.0.0.1:%d, one keep-alive connection per variant, "
           "libcurl %s\n",
           b->ng.port, curl_version_info(CURLVERSION_NOW)->version);
    bench_print_cpus(g_pin, g_cpu_self, g_cpu_nginx);
    printf("\n");
    printf("  %-30s %7s %7s %6s %6s %8s %6s  %s\n", "", "req/s", "us/req",
           "+us", "x raw", "cpu us", "+cpu", "req/s range");
    for (int v = 0; v < N_VARIANTS; v++) {
        printf("  %-30s %7.0f %7.2f %6.2f %6.3f %8.2f %6.2f  %.0f..%.0f\n",
               labels[v], med[v], us[v], us[v] - us[V_RAW], med[v] / med[V_RAW],
               cpu[v], cpu[v] - cpu[V_RAW], lo[v], hi[v]);
    }
    for (int v = V_LOCAL; v < N_VARIANTS; v++)
        printf("  target: %-29s >= %.2f x raw: %.3f  %s\n", labels[v],
               TARGET_RATIO, med[v] / med[V_RAW],
               med[v] >= TARGET_RATIO * med[V_RAW] ? "met" : "MISSED");
    for (int v = V_LOCAL; v < N_VARIANTS; v++)
        printf("  retryd's own share: %-18s %.3f x raw + timeout + "
               "headers kept (%+.2f us)\n",
               labels[v] + strlen("retryd_execute, "), med[v] / med[V_RAW_SAME],
               us[v] - us[V_RAW_SAME]);
    printf("  (us/req: wall time, 1e6 / req/s; cpu us: the benchmark "
           "thread's own CPU time per request,\n   user + system, without "
           "nginx's; +: above the baseline. Every request answered 200\n"
           "   with its body; in every run nginx counted exactly the requests "
           "and no new connection.)\n");
}

int main(int argc, char **argv)
{
    static bench_runs runs = {.variants = N_VARIANTS, .block = BLOCK};
    static bench b;
    long n = 20000, n_runs = 7;

    snprintf(b.path, sizeof(b.path), "/ok");
    if (argc > 5 ||
        (argc > 1 && !retryd__parse_long(argv[1], 1, 100000000, &n)) ||
        (argc > 2 &&
         !retryd__parse_long(argv[2], 1, BENCH_MAX_RUNS, &n_runs)) ||
        (argc > 3 && (argv[3][0] != '/' || strlen(argv[3]) >= sizeof(b.path) ||
                      strpbrk(argv[3], " \t\r\n") != NULL)) ||
        (argc > 4 && !bench_place_mode_ok(argv[4]))) {
        fprintf(stderr, "usage: bench_executor [requests-per-run>0] "
                        "[runs 1..64] [path: /ok or /static/1k] "
                        "[cpus: same|split|none]\n");
        return 64;
    }
    if (argc > 3)
        snprintf(b.path, sizeof(b.path), "%s", argv[3]);
    if (argc > 4)
        g_pin = argv[4];
    if (bench_start(g_pin, &g_cpu_self, &g_cpu_nginx) < 0)
        return 1;
    int rc = setup(&b);
    /* Warm up every variant untimed: connections, the pool's handle, the
     * budget's lane, caches. */
    long warm = n / 10 < 1000 ? n / 10 + 1 : 1000;
    for (int v = 0; v < N_VARIANTS && rc == 0; v++)
        for (long i = 0; i < warm && rc == 0; i++)
            rc = request(&b, (enum variant)v);
    runs.run = run_block;
    runs.ctx = &b;
    runs.status = b.status;
    runs.sk = &b.sk;
    if (rc == 0)
        rc = bench_run_all(&runs, n, (int)n_runs);
    if (teardown(&b) < 0)
        rc = -1;
    if (rc == 0)
        report(&b, n, &runs);
    curl_global_cleanup();
    return rc == 0 ? 0 : 1;
}
