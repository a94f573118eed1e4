/* SPDX-License-Identifier: MIT */
/*
 * The /metrics endpoint and per-process program names, against a real
 * retryd with real client processes started under distinct program names
 * (symlinks to the test client) and real HTTP through libcurl: the live
 * body passes `promtool check metrics`; per-program series are the sums
 * of the stats socket's per-process numbers; the pid and none choices;
 * 404 and 405 (GET / is the status page: tests/ops); metrics_listen refused
 * when it is not a loopback ADDRESS:PORT; IPv6; a reload that moves, keeps or
 * turns off the endpoint; nothing listening when it is not configured.
 */
#include <dirent.h>
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
