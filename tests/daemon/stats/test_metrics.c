/* SPDX-License-Identifier: MIT */
/*
 * The /metrics endpoint and per-process program names, against a real
 * retryd with real client processes started under distinct program names
 * (symlinks to the test client) and real HTTP through libcurl: the live
 * body passes `promtool check metrics`; per-program series are the sums
 * of the stats socket's per-process numbers; the pid and none choices;
 * 404 and 405 (GET / is the status page: tests/ops); metrics_listen refused
 * when it is not a loopback ADDRESS:PORT; IPv6; a reload that moves, keeps or
 * turns off the endpoint; nothing listening when it is not configured; an
 * upstream's health (docs/health.md) alike in /metrics, JSON, table, top;
 * attribution (docs/daemon.md): per-program series that never go down when
 * a process exits, the program that drained an upstream, over_share apart
 * from budget_exhausted.
 */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "child.h"
#include "harness.h"
#include "metrics_http.h"
#include "run.h"

static const char *const base_config = "";
#include "daemon_fixture.h"

static int port;

/* A daemon whose [retryd] has metrics_listen on a free port, then @p more. */
static void start_daemon(const char *more)
{
    char extra[512];
    port = rd_free_port(AF_INET);
    cr_assert_gt(port, 0, "no free loopback port");
    snprintf(extra, sizeof(extra), "metrics_listen = 127.0.0.1:%d\n%s", port,
             more);
    cr_assert_eq(rd_daemon_init(&D, extra), 0);
    cr_assert_eq(rd_daemon_start(&D), 0, "daemon did not start: %s",
                 daemon_log());
}

static void metrics_setup(void)
{
    start_daemon("");
}

/* A test client named @p name, attached, with @p deposits deposits to
 * "payments". */
static void start_named(child *c, const char *name, int deposits)
{
    char path[256], cmd[32];
    cr_assert_eq(
        rd_named_program(D.dir, name, TEST_CLIENT_PATH, path, sizeof(path)), 0,
        "symlink %s", name);
    char *argv[] = {path, D.control, NULL};
    cr_assert_eq(child_start(c, argv), 0);
    ask(c, "open payments", "ok shared=1");
    snprintf(cmd, sizeof(cmd), "deposit %d", deposits);
    ask(c, cmd, "ok");
}

/* GET /metrics; it must answer 200 with the exposition's content type. */
static rd_http scrape(void)
{
    rd_http h;
    cr_assert_eq(rd_http_get("127.0.0.1", port, "/metrics", &h), 0,
                 "no answer from the endpoint; log: %s", daemon_log());
    cr_assert_eq(h.status, 200);
    cr_assert_str_eq(h.ctype, "text/plain; version=0.0.4; charset=utf-8");
    return h;
}

static void expect_line(const char *body, const char *line)
{
    char want[512];
    snprintf(want, sizeof(want), "\n%s\n", line);
    cr_expect(strstr(body, want) != NULL, "no line '%s' in:\n%s", line, body);
}

/* Deposits of process @p pid per `retrydctl stats --json`. */
static long json_deposits_of(pid_t pid)
{
    char anchor[64];
    pid_anchor(anchor, sizeof(anchor), (long)pid);
    return (long)number_in_res(anchor, "deposits");
}

TestSuite(metrics, .init = metrics_setup, .fini = daemon_teardown,
          .timeout = 60);

Test(metrics, live_body_passes_promtool)
{
    const char *promtool = rd_promtool();
    if (promtool == NULL)
        cr_skip_test("promtool not found (deploy/install-deps.sh puts it in "
                     "/var/cache/retryd/tools; or set RETRYD_PROMTOOL)");
    child a, b, q;
    start_named(&a, "rd-alpha", 2);
    start_named(&b, "rd-beta", 1);
    start_named(&q, "q\"uo\\te", 1); /* a label value to escape */
    rd_http h = scrape();
    char file[256];
    run_result r;
    snprintf(file, sizeof(file), "%s/metrics.txt", D.dir);
    cr_assert_eq(rd_promtool_check(promtool, file, h.body, &r), 0,
                 "promtool check metrics failed:\n%s%s\nbody:\n%s", r.out,
                 r.err, h.body);
    expect_line(h.body, "retryd_processes{program=\"q\\\"uo\\\\te\"} 1");
    free(h.body);
    child_stop(&a), child_stop(&b), child_stop(&q);
}

Test(metrics, series_per_program_are_the_sums_of_its_processes)
{
    child a1, a2, b;
    start_named(&a1, "rd-alpha", 3);
    start_named(&a2, "rd-alpha", 4);
    start_named(&b, "rd-beta", 5);
    ask(&b, "withdraw 2", "granted 2 denied 0");

    rd_http h = scrape();
    expect_line(h.body, "retryd_processes{program=\"rd-alpha\"} 2");
    expect_line(h.body, "retryd_processes{program=\"rd-beta\"} 1");
    expect_line(h.body,
                "retryd_process_deposits_total{program=\"rd-alpha\"} 7");
    expect_line(h.body, "retryd_process_deposits_total{program=\"rd-beta\"} 5");
    expect_line(h.body,
                "retryd_process_retries_granted_total{program=\"rd-beta\"} 2");
    expect_line(h.body,
                "retryd_upstream_deposits_total{upstream=\"payments\"} 12");
    cr_expect(strstr(h.body, "pid=\"") == NULL, "a pid label:\n%s", h.body);

    /* The same numbers through the stats socket. */
    stats_json();
    cr_expect_eq(json_deposits_of(a1.pid) + json_deposits_of(a2.pid), 7);
    cr_expect_eq(json_deposits_of(b.pid), 5);
    cr_expect_eq(stat_of("payments", "deposits"), 12);
    cr_expect(strstr(res.out, "\"program\":\"rd-alpha\"") != NULL, "%s",
              res.out);
    cr_assert_eq(rd_ctl(&D, &res, "stats", "--processes", NULL), 0);
    cr_expect(strstr(res.out, "  rd-beta\n") != NULL, "%s", res.out);
    free(h.body);
    child_stop(&a1), child_stop(&a2), child_stop(&b);
}

/* Remove the samples of @p family from exposition @p s. */
static void drop_samples(char *s, const char *family)
{
    char pat[96];
    snprintf(pat, sizeof(pat), "\n%s", family);
    for (char *l; (l = strstr(s, pat)) != NULL;) {
        char *end = strchr(l + 1, '\n');
        cr_assert(end != NULL, "%s", s);
        memmove(l, end, strlen(end) + 1);
    }
}

/* What moves between two readings a few milliseconds apart: the uptime,
 * the balances (the floor refills them) and the heartbeat's checks. */
static void drop_clocks(char *s)
{
    drop_samples(s, "retryd_uptime_seconds ");
    drop_samples(s, "retryd_upstream_balance_tokens{");
    drop_samples(s, "retryd_upstream_hedge_balance_tokens{");
    drop_samples(s, "retryd_segment_checks_total ");
    /* The scrape's own connection is one of them, and so may others be. */
    drop_samples(s, "process_open_fds ");
}

Test(metrics, endpoint_and_retrydctl_render_alike)
{
    child a;
    start_named(&a, "rd-alpha", 3);
    rd_http h = scrape();
    cr_assert_eq(rd_ctl(&D, &res, "stats", "--prometheus", NULL), 0);
    /* One renderer: the same exposition but for what moves with time. */
    drop_clocks(h.body);
    drop_clocks(res.out);
    cr_expect_str_eq(h.body, res.out);

    char want[128];
    snprintf(want, sizeof(want), "{pid=\"%d\",program=\"rd-alpha\"} 3",
             (int)a.pid);
    cr_assert_eq(
        rd_ctl(&D, &res, "stats", "--prometheus", "--per-process=pid", NULL),
        0);
    cr_expect(strstr(res.out, want) != NULL, "no '%s' in %s", want, res.out);
    cr_assert_eq(rd_ctl(&D, &res, "stats", "--prometheus", "--per-process",
                        "none", NULL),
                 0);
    cr_expect(strstr(res.out, "retryd_process") == NULL, "%s", res.out);
    cr_expect(strstr(res.out, "retryd_upstream_deposits_total") != NULL);
    cr_expect_eq(
        rd_ctl(&D, &res, "stats", "--prometheus", "--per-process=bogus", NULL),
        64);
    /* Only the Prometheus text has per-process series to label. */
    cr_expect_eq(rd_ctl(&D, &res, "stats", "--per-process=pid", NULL), 64);
    cr_expect(strstr(res.err, "--prometheus only") != NULL, "%s", res.err);
    free(h.body);
    child_stop(&a);
}

Test(metrics, other_paths_404_other_methods_405)
{
    char url[96];
    rd_http h;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", port);
    cr_assert_eq(rd_http_get("127.0.0.1", port, "/nope", &h), 0);
    cr_expect_eq(h.status, 404);
    free(h.body);
    cr_assert_eq(rd_http_get("127.0.0.1", port, "/metrics/x", &h), 0);
    cr_expect_eq(h.status, 404);
    free(h.body);
    const char *methods[] = {"POST", "PUT", "DELETE", "HEAD"};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        cr_assert_eq(rd_http_do(methods[i], url, 5000, &h), 0, "%s",
                     methods[i]);
        cr_expect_eq(h.status, 405, "%s: %ld", methods[i], h.status);
        cr_expect_str_eq(h.allow, "GET", "%s", methods[i]);
        free(h.body);
    }
    h = scrape(); /* and still serving */
    free(h.body);
    /* A clean exit (under ASan: nothing of these answers leaked). */
    cr_expect_eq(rd_daemon_stop(&D, SIGTERM), 0, "%s", daemon_log());
}

/* --- choices, addresses and reloads --------------------------------------- */

TestSuite(metrics_config, .fini = daemon_teardown, .timeout = 60);

Test(metrics_config, pid_mode_labels_each_process)
{
    start_daemon("metrics_per_process = pid\n");
    child a1, a2;
    start_named(&a1, "rd-alpha", 3);
    start_named(&a2, "rd-alpha", 4);
    rd_http h = scrape();
    char line[160];
    snprintf(line, sizeof(line),
             "retryd_process_deposits_total{pid=\"%d\",program=\"rd-alpha\"} 3",
             (int)a1.pid);
    expect_line(h.body, line);
    snprintf(line, sizeof(line),
             "retryd_process_deposits_total{pid=\"%d\",program=\"rd-alpha\"} 4",
             (int)a2.pid);
    expect_line(h.body, line);
    free(h.body);
    child_stop(&a1), child_stop(&a2);
}

/* What client @p c says of its upstream's health (retryd_upstream_health):
 * the same slot the daemon's stats read. */
typedef struct client_health {
    int throttle, engaged;
    double probability;
    unsigned long requests, accepts, rejecting;
    long long pushback_ms;
} client_health;

static client_health health_of(child *c)
{
    char reply[256];
    client_health h;
    cr_assert_eq(child_ask(c, "health", reply, sizeof(reply), ASK_MS), 0);
    cr_assert_eq(sscanf(reply,
                        "health throttle=%d engaged=%d probability=%lf "
                        "requests=%lu accepts=%lu rejecting=%lu "
                        "pushback_ms=%lld",
                        &h.throttle, &h.engaged, &h.probability, &h.requests,
                        &h.accepts, &h.rejecting, &h.pushback_ms),
                 7, "%s", reply);
    return h;
}

/* The value of the sample @p series (name and labels) in @p body. */
static double sample_of(const char *body, const char *series)
{
    char want[256];
    snprintf(want, sizeof(want), "\n%s ", series);
    const char *at = strstr(body, want);
    cr_assert(at != NULL, "no sample %s in:\n%s", series, body);
    return strtod(at + strlen(want), NULL);
}

/*
 * An upstream's health in every view of one reply: /metrics (and promtool
 * on it), the JSON, the table and top. A client named rd-flaky reports
 * rejections and one Retry-After on flaky (throttle on, an hour's window
 * that does not rotate in the test), asks first attempts until one is
 * throttled and a retry, which the pushback holds. Each view says what
 * the client's own reading of the slot says.
 */
Test(metrics_config, upstream_health_in_every_view)
{
    start_daemon("[upstream flaky]\nadaptive_throttle = on\n"
                 "throttle_window = 1h\npushback_max = 60s\n");
    child c;
    start_named(&c, "rd-flaky", 1);
    ask(&c, "open flaky", "ok shared=1");
    ask(&c, "observe 503", "ok");
    ask(&c, "observe 0", "ok");
    ask(&c, "observe 200", "ok");
    ask(&c, "observe 503 30000", "ok");
    client_health h = health_of(&c);
    cr_expect(h.engaged && h.requests == 4 && h.accepts == 1 &&
                  h.rejecting == 1,
              "R %lu A %lu rejecting %lu", h.requests, h.accepts, h.rejecting);
    cr_expect(fabs(h.probability - 0.4) < 1e-9, "(4 - 2) / 5: %f",
              h.probability);
    /* p >= 0.4 each: one in a thousand tries never throttles 1e-220. */
    unsigned long throttled = 0;
    char reply[64];
    for (int i = 0; i < 1000 && throttled == 0; i++) {
        cr_assert_eq(child_ask(&c, "admit first", reply, sizeof(reply), ASK_MS),
                     0);
        throttled += strcmp(reply, "admit throttled 0") == 0;
    }
    cr_assert_eq(throttled, 1, "no first attempt throttled");
    cr_assert_eq(child_ask(&c, "admit retry", reply, sizeof(reply), ASK_MS), 0);
    cr_expect(strncmp(reply, "admit hold ", 11) == 0, "%s", reply);
    h = health_of(&c);
    cr_expect_eq(h.requests, 5, "a throttled attempt counts in R");

    rd_http m = scrape();
    char file[256], series[160];
    run_result r;
    const char *promtool = rd_promtool();
    snprintf(file, sizeof(file), "%s/metrics.txt", D.dir);
    if (promtool != NULL)
        cr_expect_eq(rd_promtool_check(promtool, file, m.body, &r), 0,
                     "promtool check metrics failed:\n%s%s", r.out, r.err);
    expect_line(m.body,
                "retryd_upstream_throttle_enabled{upstream=\"flaky\"} 1");
    expect_line(m.body,
                "retryd_upstream_throttle_enabled{upstream=\"payments\"} 0");
    expect_line(m.body,
                "retryd_upstream_throttle_engaged{upstream=\"flaky\"} 1");
    snprintf(series, sizeof(series),
             "retryd_upstream_throttle_probability{upstream=\"flaky\"} %.6f",
             h.probability);
    expect_line(m.body, series);
    expect_line(m.body, "retryd_upstream_throttle_probability{upstream="
                        "\"payments\"} 0.000000");
    expect_line(m.body,
                "retryd_upstream_throttle_requests{upstream=\"flaky\"} 5");
    expect_line(m.body,
                "retryd_upstream_throttle_accepts{upstream=\"flaky\"} 1");
    expect_line(m.body, "retryd_upstream_throttle_rejecting_processes{upstream="
                        "\"flaky\"} 1");
    expect_line(m.body,
                "retryd_upstream_throttled_total{upstream=\"flaky\"} 1");
    expect_line(m.body, "retryd_upstream_held_total{upstream=\"flaky\"} 1");
    expect_line(m.body,
                "retryd_process_throttled_total{program=\"rd-flaky\"} 1");
    expect_line(m.body, "retryd_process_held_total{program=\"rd-flaky\"} 1");
    double left = sample_of(m.body, "retryd_upstream_pushback_seconds{upstream="
                                    "\"flaky\"}");
    cr_expect(left > 0 && left <= 30, "the hold left: %f s", left);
    expect_line(
        m.body,
        "retryd_upstream_pushback_seconds{upstream=\"payments\"} 0.000");
    free(m.body);

    cr_expect_eq(stat_of("flaky", "throttled"), 1);
    cr_expect_eq(stat_of("flaky", "held"), 1);
    cr_expect_eq(stat_of("flaky", "requests"), 5);
    cr_expect_eq(stat_of("flaky", "rejecting_processes"), 1);
    cr_expect(fabs(stat_of("flaky", "probability") - h.probability) < 1e-6);
    cr_expect_eq(stat_of("flaky", "throttle_window_seconds"), 3600);
    cr_expect_eq(stat_of("flaky", "pushback_max_seconds"), 60);
    left = stat_of("flaky", "pushback_seconds");
    cr_expect(left > 0 && left <= 30, "%f", left);
    char pid[64];
    pid_anchor(pid, sizeof(pid), (long)c.pid);
    cr_expect_eq(number_in_res(pid, "throttled"), 1);
    cr_expect_eq(number_in_res(pid, "held"), 1);

    cr_assert_eq(rd_ctl(&D, &res, "stats", NULL), 0, "%s", res.err);
    snprintf(series, sizeof(series),
             "health: throttle on ENGAGED p=%.3f R=5 A=1 rejecting=1  "
             "pushback on HOLDING ",
             h.probability);
    cr_expect(strstr(res.out, series) != NULL, "no '%s' in:\n%s", series,
              res.out);
    cr_expect(strstr(res.out, "s  throttled 1 held 1\n") != NULL, "%s",
              res.out);
    cr_expect(strstr(res.out, "health: throttle off  pushback on  throttled 0 "
                              "held 0\n") != NULL,
              "payments: %s", res.out);

    cr_assert_eq(rd_ctl(&D, &res, "top", "-b", "-n", "1", NULL), 0, "%s",
                 res.err);
    const char *row = strstr(res.out, "\nHEALTH ");
    cr_assert(row != NULL, "no health table in:\n%s", res.out);
    row = strstr(row, "\nflaky ");
    cr_assert(row != NULL, "no health row for flaky:\n%s", res.out);
    char state[16], p[16];
    unsigned long rr, aa, rej, thr;
    cr_assert_eq(sscanf(row, " flaky %15s %15s %lu %lu %lu %lu", state, p, &rr,
                        &aa, &rej, &thr),
                 6, "%.200s", row);
    cr_expect_str_eq(state, "ENGAGED");
    cr_expect(rr == 5 && aa == 1 && rej == 1 && thr == 1, "%.200s", row);
    child_stop(&c);
}

Test(metrics_config, none_mode_has_no_process_series)
{
    start_daemon("metrics_per_process = none\n");
    child a;
    start_named(&a, "rd-alpha", 3);
    rd_http h = scrape();
    cr_expect(strstr(h.body, "retryd_process") == NULL, "%s", h.body);
    expect_line(h.body,
                "retryd_upstream_deposits_total{upstream=\"payments\"} 3");
    expect_line(h.body, "retryd_attached_processes 1");
    free(h.body);
    child_stop(&a);
}

/* `retryd --check-config` of a file whose [retryd] ends with @p line. */
static int check_config(const char *line, run_result *r)
{
    char *argv[] = {RETRYD_PATH, "--config", D.config, "--check-config", NULL};
    cr_assert_eq(rd_daemon_write_config(&D, line), 0);
    cr_assert_eq(run_program(argv, 10000, r), 0);
    return r->exit_code;
}

Test(metrics_config, bad_addresses_are_refused_naming_the_line)
{
    cr_assert_eq(rd_daemon_init(&D, ""), 0);
    static const struct {
        const char *line, *why;
    } bad[] = {
        {"metrics_listen = 0.0.0.0:9464", "not a loopback address"},
        {"metrics_listen = 10.1.2.3:9464", "not a loopback address"},
        {"metrics_listen = [::]:9464", "not a loopback address"},
        {"metrics_listen = [fe80::1]:9464", "not a loopback address"},
        {"metrics_listen = 127.0.0.1", "is not ADDRESS:PORT"},
        {"metrics_listen = 127.0.0.1:0", "is not ADDRESS:PORT"},
        {"metrics_listen = 127.0.0.1:65536", "is not ADDRESS:PORT"},
        {"metrics_listen = 127.0.0.1:+80", "is not ADDRESS:PORT"},
        {"metrics_listen = localhost:9464", "is not an IPv4 address"},
        {"metrics_listen = ::1:9464", "is not an IPv4 address"},
        {"metrics_listen = 127.1:9464", "is not an IPv4 address"},
        {"metrics_per_process = uid", "is not program, pid or none"},
    };
    run_result r;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(check_config(bad[i].line, &r), 78, "%s", bad[i].line);
        /* The harness writes three lines of [retryd] first. */
        cr_expect(strstr(r.err, "retryd.conf:4: [retryd] metrics_") != NULL,
                  "%s: %s", bad[i].line, r.err);
        cr_expect(strstr(r.err, bad[i].why) != NULL, "%s: %s", bad[i].line,
                  r.err);
    }
    const char *good[] = {
        "metrics_listen = 127.0.0.1:9464", "metrics_listen = 127.8.9.10:1",
        "metrics_listen = [::1]:65535", "metrics_per_process = pid"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        cr_expect_eq(check_config(good[i], &r), 0, "%s: %s", good[i], r.err);
}

/* The daemon's listening sockets in /proc/net/@p table (tcp or tcp6):
 * its socket inodes found there in state 0A (LISTEN). */
static int daemon_sockets_in(const char *table)
{
    char path[64], link[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)D.pid);
    DIR *dir = opendir(path);
    cr_assert(dir != NULL);
    unsigned long inodes[256];
    int n = 0, found = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL && n < 256;) {
        char fd[320];
        snprintf(fd, sizeof(fd), "%s/%s", path, e->d_name);
        ssize_t l = readlink(fd, link, sizeof(link) - 1);
        if (l > 0 &&
            (link[l] = '\0', sscanf(link, "socket:[%lu]", &inodes[n]) == 1))
            n++;
    }
    closedir(dir);
    snprintf(path, sizeof(path), "/proc/net/%s", table);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0; /* no such protocol here */
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long ino;
        unsigned st;
        if (sscanf(line, "%*s %*s %*s %x %*s %*s %*s %*s %*s %lu", &st, &ino) !=
                2 ||
            st != 0x0A)
            continue;
        for (int i = 0; i < n; i++)
            found += inodes[i] == ino;
    }
    fclose(f);
    return found;
}

Test(metrics_config, off_by_default_nothing_listens)
{
    cr_assert_eq(rd_daemon_init(&D, ""), 0);
    cr_assert_eq(rd_daemon_start(&D), 0);
    cr_expect_eq(daemon_sockets_in("tcp"), 0);
    cr_expect_eq(daemon_sockets_in("tcp6"), 0);
    cr_expect(strstr(daemon_log(), "metrics") == NULL, "%s", daemon_log());
}

Test(metrics_config, ipv6_loopback)
{
    int p6 = rd_free_port(AF_INET6);
    if (p6 == 0)
        cr_skip_test("no IPv6 loopback on this machine");
    char extra[96];
    snprintf(extra, sizeof(extra), "metrics_listen = [::1]:%d\n", p6);
    cr_assert_eq(rd_daemon_init(&D, extra), 0);
    cr_assert_eq(rd_daemon_start(&D), 0, "%s", daemon_log());
    rd_http h;
    cr_assert_eq(rd_http_get("[::1]", p6, "/metrics", &h), 0);
    cr_expect_eq(h.status, 200);
    cr_expect(strstr(h.body, "retryd_info{") != NULL);
    free(h.body);
    /* The status page: the same listener, so loopback only too. */
    cr_assert_eq(rd_http_get("[::1]", p6, "/", &h), 0);
    cr_expect_eq(h.status, 200);
    cr_expect_str_eq(h.ctype, "text/html; charset=utf-8");
    cr_expect(strstr(h.body, "<h1>retryd on [::1]:") != NULL, "%.300s", h.body);
    free(h.body);
    cr_expect_eq(daemon_sockets_in("tcp6"), 1);
    cr_expect_eq(daemon_sockets_in("tcp"), 0);
}

typedef struct port_probe {
    int port;
    bool serving; /* wanted: answers 200, or refuses the connection */
} port_probe;

/* A listening socket on loopback port @p p, held by the test: a port
 * another process holds. */
static int hold_port(int p)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)p),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(fd >= 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 1), 0);
    return fd;
}

static bool probe(void *arg)
{
    port_probe *p = arg;
    rd_http h;
    int r = rd_http_get("127.0.0.1", p->port, "/metrics", &h);
    free(h.body);
    /* Off means refused: nothing listens, not a connection cut short. */
    return p->serving ? r == 0 && h.status == 200 : r == CURLE_COULDNT_CONNECT;
}

static bool log_has(void *text)
{
    return strstr(daemon_log(), text) != NULL;
}

static void reload_with(const char *extra)
{
    cr_assert_eq(rd_daemon_write_config(&D, extra), 0);
    cr_assert_eq(kill(D.pid, SIGHUP), 0);
}

Test(metrics_config, reload_moves_keeps_or_stops_the_endpoint)
{
    char extra[96];
    start_daemon("");
    int a = port, b = rd_free_port(AF_INET);
    cr_assert(b > 0 && b != a);

    /* Moved: the new port serves, the old one is closed. */
    snprintf(extra, sizeof(extra), "metrics_listen = 127.0.0.1:%d\n", b);
    reload_with(extra);
    port_probe on_b = {b, true}, off_a = {a, false};
    cr_assert(rd_wait_until(probe, &on_b, 5000), "%s", daemon_log());
    cr_assert(rd_wait_until(probe, &off_a, 5000), "%s", daemon_log());

    /* A port another process holds: the running endpoint stays. */
    int c = rd_free_port(AF_INET);
    int holder = hold_port(c);
    snprintf(extra, sizeof(extra), "metrics_listen = 127.0.0.1:%d\n", c);
    reload_with(extra);
    cr_expect(rd_wait_until(log_has,
                            (void *)"reload: keeping the metrics endpoint",
                            5000),
              "%s", daemon_log());
    cr_expect(probe(&on_b), "the running endpoint stopped");
    close(holder);

    /* Removed: nothing listens any more. */
    reload_with("");
    port_probe off_b = {b, false};
    cr_assert(rd_wait_until(probe, &off_b, 5000), "%s", daemon_log());
    cr_expect_eq(daemon_sockets_in("tcp"), 0, "%s", daemon_log());
}

Test(metrics, a_restarted_daemon_names_the_processes_it_adopts)
{
    child a, b;
    start_named(&a, "rd-alpha", 2);
    start_named(&b, "rd-beta", 3);
    cr_assert_eq(rd_daemon_stop(&D, SIGTERM), 0);
    cr_assert_eq(child_stop(&b), 0, "rd-beta exits while no daemon runs");
    cr_assert_eq(rd_daemon_start(&D), 0, "%s", daemon_log());

    /* Adopted before READY: named from /proc/PID/comm again, never from
     * the segment; the gone one is folded into its upstream. */
    rd_http h = scrape();
    expect_line(h.body, "retryd_processes{program=\"rd-alpha\"} 1");
    expect_line(h.body,
                "retryd_process_deposits_total{program=\"rd-alpha\"} 2");
    cr_expect(strstr(h.body, "rd-beta") == NULL, "%s", h.body);
    expect_line(h.body,
                "retryd_upstream_deposits_total{upstream=\"payments\"} 5");
    free(h.body);
    child_stop(&a);
}

static bool drained_by_shows(void *arg)
{
    const char *line = arg;
    rd_http h = scrape();
    bool yes = strstr(h.body, line) != NULL;
    free(h.body);
    return yes;
}

/* Until the heartbeat has checked the segment @p want times (each
 * heartbeat samples the drained-by window too). */
typedef struct checks_watch {
    double want;
} checks_watch;

static bool checked_since(void *arg)
{
    const checks_watch *w = arg;
    rd_http h = scrape();
    bool yes = sample_of(h.body, "retryd_segment_checks_total") >= w->want;
    free(h.body);
    return yes;
}

/*
 * A restarted daemon's drained-by window starts at its start: an adopted
 * process's grants from before are its baseline, not "drained" (the
 * process is named for its grants after the restart, and for those only).
 */
Test(metrics, a_restarted_daemon_counts_drains_from_its_start)
{
    child a;
    start_named(&a, "rd-alpha", 0);
    ask(&a, "withdraw 5", "granted 5 denied 0");
    cr_assert(rd_wait_until(drained_by_shows,
                            (void *)"\nretryd_upstream_drained_by{upstream="
                                    "\"payments\",program=\"rd-alpha\"} 1",
                            5000),
              "not named before the restart");
    cr_assert_eq(rd_daemon_stop(&D, SIGTERM), 0);
    cr_assert_eq(rd_daemon_start(&D), 0, "%s", daemon_log());
    /* Two heartbeats after the start, still nobody: the baseline holds. */
    rd_http h = scrape();
    checks_watch cw = {sample_of(h.body, "retryd_segment_checks_total") + 2};
    free(h.body);
    cr_assert(rd_wait_until(checked_since, &cw, 10000), "%s", daemon_log());
    h = scrape();
    cr_expect(strstr(h.body, "retryd_upstream_drained_by{") == NULL, "%s",
              h.body);
    free(h.body);
    ask(&a, "withdraw 2", "granted 2 denied 0");
    cr_assert(rd_wait_until(drained_by_shows,
                            (void *)"\nretryd_upstream_drained_by{upstream="
                                    "\"payments\",program=\"rd-alpha\"} 1",
                            5000),
              "not named after the restart");
    stats_json();
    const char *at = strstr(res.out, "\"drained_by\":{");
    cr_assert(at != NULL, "%s", res.out);
    cr_expect_eq(rd_json_number(at, NULL, "grants"), 2, "%s", at);
    child_stop(&a);
}

Test(metrics_config, a_port_in_use_at_start_is_an_error)
{
    int p = rd_free_port(AF_INET);
    int holder = hold_port(p);
    char extra[96];
    snprintf(extra, sizeof(extra), "metrics_listen = 127.0.0.1:%d\n", p);
    cr_assert_eq(rd_daemon_init(&D, extra), 0);
    cr_expect_neq(rd_daemon_start(&D), 0, "started without its endpoint");
    char want[96];
    snprintf(want, sizeof(want), "metrics_listen 127.0.0.1:%d: cannot listen",
             p);
    cr_expect(strstr(daemon_log(), want) != NULL, "%s", daemon_log());
    close(holder);
}

Test(metrics, names_outside_printable_ascii_are_sanitised)
{
    child t, u;
    /* A tab, and nine two-byte characters the kernel cuts at 15 bytes,
     * inside the eighth: every byte outside printable ASCII is '?', so a
     * label is always valid UTF-8. */
    start_named(&t, "tab\tname", 1);
    start_named(&u,
                "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                "\xc3\xa9\xc3\xa9",
                1);
    rd_http h = scrape();
    expect_line(h.body, "retryd_processes{program=\"tab?name\"} 1");
    expect_line(h.body, "retryd_processes{program=\"???????????????\"} 1");
    free(h.body);
    stats_json();
    cr_expect(strstr(res.out, "\"program\":\"tab?name\"") != NULL, "%s",
              res.out);
    child_stop(&t), child_stop(&u);
}

Test(metrics_config, a_reload_to_a_non_loopback_address_is_refused)
{
    start_daemon("");
    reload_with("metrics_listen = 0.0.0.0:9464\n");
    cr_assert(rd_wait_until(log_has, (void *)"reload refused", 5000), "%s",
              daemon_log());
    cr_expect(strstr(daemon_log(), "is not a loopback address") != NULL, "%s",
              daemon_log());
    port_probe still = {port, true};
    cr_expect(probe(&still), "the running endpoint stopped");
    cr_expect_eq(daemon_sockets_in("tcp"), 1);
}

/* --- attribution (docs/metrics.md, "Attribution") ------------------------- */

/* What the polls below watch: the exposition's lowest readings of two
 * per-program series while waiting for @p want. */
typedef struct series_watch {
    const char *want;      /* a whole line */
    double low[2];         /* the lowest value seen of each */
    const char *series[2]; /* name and labels */
    char *last;            /* the body that had @p want */
} series_watch;

static bool scrape_shows(void *arg)
{
    series_watch *w = arg;
    rd_http h = scrape();
    for (int i = 0; i < 2; i++) {
        double v = sample_of(h.body, w->series[i]);
        w->low[i] = v < w->low[i] ? v : w->low[i];
    }
    char line[256];
    snprintf(line, sizeof(line), "\n%s\n", w->want);
    if (strstr(h.body, line) == NULL) {
        free(h.body);
        return false;
    }
    w->last = h.body;
    return true;
}

/*
 * Two processes of one program, one exits: the program's series keep
 * what the gone one counted, on every scrape while the daemon notices the
 * exit and after (a drop would be a counter reset to Prometheus).
 */
Test(metrics, per_program_series_stay_monotonic_when_a_process_exits)
{
    child h1, h2;
    start_named(&h1, "hold", 20);
    start_named(&h2, "hold", 20);
    ask(&h1, "withdraw 3", "granted 3 denied 0");
    ask(&h2, "withdraw 2", "granted 2 denied 0");
    rd_http h = scrape();
    expect_line(h.body, "retryd_processes{program=\"hold\"} 2");
    expect_line(h.body, "retryd_process_deposits_total{program=\"hold\"} 40");
    expect_line(h.body,
                "retryd_process_retries_granted_total{program=\"hold\"} 5");
    free(h.body);

    cr_assert_eq(child_stop(&h2), 0);
    series_watch w = {
        .want = "retryd_processes{program=\"hold\"} 1",
        .low = {INFINITY, INFINITY},
        .series = {"retryd_process_deposits_total{program=\"hold\"}",
                   "retryd_process_retries_granted_total{program=\"hold\"}"}};
    cr_assert(rd_wait_until(scrape_shows, &w, 10000),
              "the exit was not noticed in 10 s: %s", daemon_log());
    cr_expect_eq(w.low[0], 40, "deposits went down to %f", w.low[0]);
    cr_expect_eq(w.low[1], 5, "grants went down to %f", w.low[1]);
    expect_line(w.last, "retryd_process_deposits_total{program=\"hold\"} 40");
    expect_line(w.last,
                "retryd_process_retries_granted_total{program=\"hold\"} 5");
    free(w.last);

    /* The stats socket says the same, and how many exited. */
    stats_json();
    cr_expect_eq(number_in_res("{\"program\":\"hold\"", "processes"), 1);
    cr_expect_eq(number_in_res("{\"program\":\"hold\"", "exited"), 1);
    cr_expect_eq(number_in_res("{\"program\":\"hold\"", "deposits"), 40);
    /* Both gone: the series stay, with no process. */
    cr_assert_eq(child_stop(&h1), 0);
    w.want = "retryd_processes{program=\"hold\"} 0";
    w.low[0] = w.low[1] = INFINITY;
    cr_assert(rd_wait_until(scrape_shows, &w, 10000), "%s", daemon_log());
    cr_expect(w.low[0] == 40 && w.low[1] == 5, "%f %f", w.low[0], w.low[1]);
    free(w.last);
}

static bool drained_by_greedy(void *arg)
{
    (void)arg;
    rd_http h = scrape();
    bool yes = strstr(h.body,
                      "\nretryd_upstream_drained_by{upstream="
                      "\"payments\",program=\"rd-greedy\"} 0.800000\n") != NULL;
    free(h.body);
    return yes;
}

/*
 * The program that took most of an upstream's retries is named, with its
 * share, within a few heartbeats (the window is sampled once a second),
 * in /metrics, the JSON, the table and top; it is the window's figure,
 * not the totals': an exited process's grants still count in it.
 */
Test(metrics, drained_by_names_the_program_that_took_the_retries)
{
    child g, q;
    start_named(&g, "rd-greedy", 0);
    start_named(&q, "rd-quiet", 0);
    ask(&g, "withdraw 8", "granted 8 denied 0");
    ask(&q, "withdraw 2", "granted 2 denied 0");
    cr_assert_eq(child_stop(&g), 0);
    cr_assert(rd_wait_until(drained_by_greedy, NULL, 5000),
              "not named within 5 s");

    stats_json();
    const char *at =
        strstr(res.out, "\"drained_by\":{\"program\":\"rd-greedy\"");
    cr_assert(at != NULL, "%s", res.out);
    cr_expect_eq(rd_json_number(at, NULL, "grants"), 8);
    cr_expect_eq(rd_json_number(at, NULL, "window_grants"), 10);
    cr_expect_eq(rd_json_number(at, NULL, "window_seconds"), 10);
    cr_assert_eq(rd_ctl(&D, &res, "stats", NULL), 0, "%s", res.err);
    cr_expect(strstr(res.out, "drained by rd-greedy 80% (8 of 10 retries in "
                              "10s)\n") != NULL,
              "%s", res.out);
    cr_assert_eq(rd_ctl(&D, &res, "top", "-b", "-n", "1", NULL), 0, "%s",
                 res.err);
    const char *row = strstr(res.out, "\npayments ");
    cr_assert(row != NULL, "%s", res.out);
    const char *eol = strchr(row + 1, '\n');
    cr_expect(strstr(row, " rd-greedy 80%") != NULL &&
                  strstr(row, " rd-greedy 80%") < eol,
              "%s", res.out);
    child_stop(&q);
}

/*
 * A retry refused for being over the process's share is not an empty
 * bucket: ratio 1, no floor, cap 20; the taker finds the bucket empty once
 * (budget_exhausted, and shares are kept from then on), the keeper
 * deposits 10 and so claims them, and the taker's next withdrawals find
 * only tokens owed to the keeper (over_share). Each reason apart in the
 * JSON, the table and /metrics, per upstream and per program.
 */
Test(metrics, over_share_is_told_apart_from_budget_exhausted)
{
    child k, t;
    char reply[96], want[160];
    long got, empty, refused;
    start_named(&k, "rd-keeper", 0);
    start_named(&t, "rd-taker", 0);
    ask(&k, "open fair 1 0 20", "ok shared=1");
    ask(&t, "open fair 1 0 20", "ok shared=1");
    ask(&t, "take 1", "granted 0 budget 1 share 0");
    ask(&k, "deposit 10", "ok");
    /* The keeper's claim decays over the share window (seconds), so a
     * slow run may see a token of it free again: whatever the taker got
     * was borrowed, and at least its first try was refused. */
    cr_assert_eq(child_ask(&t, "take 5", reply, sizeof(reply), ASK_MS), 0);
    cr_assert_eq(sscanf(reply, "granted %ld budget %ld share %ld", &got, &empty,
                        &refused),
                 3, "%s", reply);
    cr_assert(refused >= 1 && empty == 0, "%s", reply);

    stats_json();
    const char *up = strstr(res.out, "\"name\":\"fair\"");
    cr_assert(up != NULL, "%s", res.out);
    cr_expect_eq(rd_json_number(up, NULL, "over_share"), refused);
    cr_expect_eq(rd_json_number(up, NULL, "budget_exhausted"), 1);
    cr_expect_eq(rd_json_number(up, NULL, "borrowed"), got);
    double claimed = rd_json_number(up, NULL, "claimed_tokens");
    cr_expect(claimed > 0 && claimed <= 10, "claimed %f", claimed);
    cr_expect(strstr(up, "\"shares_kept\":true") != NULL, "%s", up);
    const char *pr = strstr(res.out, "{\"program\":\"rd-taker\"");
    cr_assert(pr != NULL, "%s", res.out);
    cr_expect_eq(rd_json_number(pr, NULL, "over_share"), refused);
    cr_expect_eq(rd_json_number(pr, NULL, "budget_exhausted"), 1);

    rd_http h = scrape();
    cr_expect_eq(sample_of(h.body, "retryd_upstream_retries_denied_total{"
                                   "upstream=\"fair\",reason=\"over_share\"}"),
                 refused);
    expect_line(h.body, "retryd_upstream_retries_denied_total{upstream="
                        "\"fair\",reason=\"budget_exhausted\"} 1");
    cr_expect_eq(sample_of(h.body, "retryd_process_retries_denied_total{"
                                   "program=\"rd-taker\",reason=\"over_"
                                   "share\"}"),
                 refused);
    expect_line(h.body, "retryd_process_retries_denied_total{program="
                        "\"rd-taker\",reason=\"budget_exhausted\"} 1");
    expect_line(h.body, "retryd_process_retries_denied_total{program="
                        "\"rd-keeper\",reason=\"over_share\"} 0");
    claimed = sample_of(h.body, "retryd_upstream_claimed_tokens{upstream="
                                "\"fair\"}");
    cr_expect(claimed > 0 && claimed <= 10, "claimed %f", claimed);
    expect_line(h.body, "retryd_upstream_shares_kept{upstream=\"fair\"} 1");
    cr_expect_eq(
        sample_of(h.body, "retryd_upstream_borrowed_total{upstream=\"fair\"}"),
        got);
    const char *promtool = rd_promtool();
    if (promtool != NULL) {
        char file[256];
        run_result r;
        snprintf(file, sizeof(file), "%s/metrics.txt", D.dir);
        cr_expect_eq(rd_promtool_check(promtool, file, h.body, &r), 0,
                     "promtool check metrics failed:\n%s%s", r.out, r.err);
    }
    free(h.body);

    cr_assert_eq(rd_ctl(&D, &res, "stats", NULL), 0, "%s", res.err);
    snprintf(want, sizeof(want), "denied: budget_exhausted=1 over_share=%ld\n",
             refused);
    cr_expect(strstr(res.out, want) != NULL, "no '%s' in %s", want, res.out);
    snprintf(want, sizeof(want), " borrowed %ld over_share %ld  drained by ",
             got, refused);
    const char *line = strstr(res.out, "shares: KEPT claimed ");
    cr_expect(line != NULL && strstr(line, want) != NULL, "no '%s' in %s", want,
              res.out);
    child_stop(&k), child_stop(&t);
}
