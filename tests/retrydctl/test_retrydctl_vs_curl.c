/* SPDX-License-Identifier: MIT */
/*
 * retrydctl request beside curl: each invocation runs through the real
 * curl and through `retrydctl request` against the same loopback servers,
 * and the two must agree on the exit code, the bytes on stdout and what
 * the server saw (its LOG of the request, and of a redirect's target:
 * method, body length and checksum, Idempotency-Key, Authorization,
 * Cookie). retrydctl is told --safe --max-attempts 1 so that no retry
 * hides a difference; the differences kept on purpose are listed in
 * retrydctl(1), "DIFFERENCES FROM CURL", and compared here only where
 * they agree (NO_STDOUT: the status line of -i and -I). h1, TLS h2, h2c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "run.h"
#include "testsrv.h"

static testsrv *srv, *tls, *h2c;
static run_result curl_res, ctl_res;

static void setup(void)
{
    char *argv_tls[] = {"--tls", NULL};
    cr_assert_eq(testsrv_start(FAULTSRV_PATH, NULL, &srv), 0);
    char *argv_h2c[] = {"--h2c", NULL};
    cr_assert_eq(testsrv_start(H2SRV_PATH, argv_tls, &tls), 0);
    cr_assert_eq(testsrv_start(H2SRV_PATH, argv_h2c, &h2c), 0);
}

static void teardown(void)
{
    testsrv_stop(srv);
    testsrv_stop(tls);
    testsrv_stop(h2c);
}

TestSuite(retrydctl_vs_curl, .init = setup, .fini = teardown, .timeout = 120);

/* H2C: the cleartext HTTP/2 server, which curl reaches with
 * --http2-prior-knowledge and retrydctl with --h2c. */
/* NAMED: the URL names the host retryd.test (at the plain server's port),
 * which only --resolve or a proxy can reach. */
enum {
    NO_STDOUT = 1,
    TLS_SERVER = 2,
    REFUSED = 4,
    NOWHERE = 8,
    H2C = 16,
    NAMED = 32
};

typedef struct invocation {
    char *args[8];    /* before the URL; "{port}": the plain server's */
    const char *path; /* "{id}" becomes the run's request id */
    int flags;
} invocation;

#define A(...)                                                                 \
    {                                                                          \
        __VA_ARGS__, NULL                                                      \
    }

static const invocation cases[] = {
    {A("-s"), "/ok?id={id}", 0},
    {A("-s"), "/ok?len=100000&id={id}", 0},
    {A("-s"), "/ok?len=0&id={id}", 0},
    {A("-s", "-d", "a=1"), "/echo?id={id}", 0},
    {A("-s", "-d", "a", "-d", "b"), "/echo?id={id}", 0},
    {A("-s", "-d", ""), "/echo?id={id}", 0},
    {A("-s", "--data-binary", "x y"), "/echo?id={id}", 0},
    {A("-s", "--data-raw", "@x"), "/echo?id={id}", 0},
    {A("-s", "--data-ascii", "k=v"), "/echo?id={id}", 0},
    {A("-s", "--json", "{\"a\":1}"), "/echo?id={id}", 0},
    {A("-s", "--json", "[1]", "--json", "[2]"), "/echo?id={id}", 0},
    {A("-s", "--data-urlencode", "q=a b&c"), "/echo?id={id}", 0},
    {A("-s", "--data-urlencode", "=x/y"), "/echo?id={id}", 0},
    {A("-s", "--data-urlencode", "plain text"), "/echo?id={id}", 0},
    {A("-s", "--data-urlencode", "a=1", "-d", "b=2"), "/echo?id={id}", 0},
    {A("-s", "-G", "-d", "a=1"), "/echo?id={id}", 0},
    {A("-s", "-G", "--data-urlencode", "q=a b"), "/echo?id={id}", 0},
    {A("-s", "-H", "Content-Type: text/plain", "-d", "x"), "/echo?id={id}", 0},
    {A("-s", "-X", "PUT", "-d", "x"), "/echo?id={id}", 0},
    {A("-s", "-X", "PATCH", "-d", "xy"), "/echo?id={id}", 0},
    {A("-s", "-X", "DELETE"), "/ok?id={id}", 0},
    {A("-s", "-X", "POST"), "/ok?id={id}", 0},
    {A("-s", "-X", "OPTIONS"), "/ok?id={id}", 0},
    {A("-s", "-I"), "/ok?id={id}", NO_STDOUT},
    {A("-s", "-i"), "/ok?id={id}", 0},
    {A("-s", "-i", "-d", "x"), "/echo?id={id}", 0},
    {A("-s"), "/status?code=404&id={id}", 0},
    {A("-s"), "/status?code=500&id={id}", 0},
    {A("-s"), "/status?code=204&id={id}", 0},
    {A("-s"), "/status?code=418&id={id}", 0},
    {A("-s", "-f"), "/status?code=404&id={id}", 0},
    {A("-s", "-f"), "/status?code=500&id={id}", 0},
    {A("-s", "-f"), "/ok?id={id}", 0},
    {A("-s", "--fail-with-body"), "/status?code=404&id={id}", 0},
    {A("-s", "--fail-with-body"), "/ok?id={id}", 0},
    {A("-s"), "/redirect?to=%2Fok%3Fid%3D{id}-t&id={id}", 0},
    {A("-s", "-L"), "/redirect?to=%2Fok%3Fid%3D{id}-t&id={id}", 0},
    {A("-s", "-L", "-d", "x"), "/redirect?to=%2Fecho%3Fid%3D{id}-t&id={id}", 0},
    {A("-s", "-L", "-u", "a:b"), "/redirect?to=%2Fok%3Fid%3D{id}-t&id={id}", 0},
    {A("-s", "--location-trusted", "-u", "a:b"),
     "/redirect?to=%2Fok%3Fid%3D{id}-t&id={id}", 0},
    {A("-s", "-L", "--max-redirs", "0"),
     "/redirect?to=%2Fok%3Fid%3D{id}-t&id={id}", 0},
    {A("-s", "-u", "alice:secret"), "/ok?id={id}", 0},
    {A("-s", "-u", "ab:c"), "/ok?id={id}", 0},
    {A("-s", "-H", "Authorization: Bearer t0k"), "/ok?id={id}", 0},
    {A("-s", "-b", "c=1; d=2"), "/ok?id={id}", 0},
    {A("-s", "-H", "Cookie: e=3"), "/ok?id={id}", 0},
    {A("-s", "-H", "Idempotency-Key: k-1", "-d", "x"), "/echo?id={id}", 0},
    {A("-s", "-A", "agent/1.0"), "/ok?id={id}", 0},
    {A("-s", "-e", "http://referrer.example/"), "/ok?id={id}", 0},
    {A("-s", "-H", "X-Custom: 1"), "/ok?id={id}", 0},
    {A("-sS"), "/ok?id={id}", 0},
    {A("-v"), "/ok?id={id}", 0},
    {A("-s", "-o", "/dev/null"), "/ok?id={id}", 0},
    {A("-s", "-o", "/dev/full"), "/ok?id={id}", 0},
    {A("-s", "-o", "/dev/full"), "/ok?len=1000000&id={id}", 0},
    {A("-s", "--url"), "/ok?id={id}", 0},
    {A("-s", "--max-time", "0.5"), "/hold?ms=3000&id={id}", 0},
    {A("-s"), "/", REFUSED},
    {A("-s"), "/", NOWHERE},
    {A("-s", "-k"), "/ok?id={id}", TLS_SERVER | REFUSED},
    {A("-s"), "/ok?id={id}", TLS_SERVER},
    {A("-s", "-k"), "/ok?id={id}", TLS_SERVER},
    {A("-s", "-k", "-d", "x=1"), "/echo?id={id}", TLS_SERVER},
    {A("-s", "-k", "-f"), "/status?code=404&id={id}", TLS_SERVER},
    {A("-s", "-w", "%{http_code} %{size_download}\\n"), "/ok?id={id}", 0},
    {A("-s", "-w", "[%{response_code}|%{http_version}|%{content_type}]"),
     "/status?code=503&id={id}", 0},
    {A("-s", "-L", "-w", "%{num_redirects} %{http_code} 100%%"),
     "/redirect?to=%2Fok%3Fid%3D{id}-t&id={id}", 0},
    {A("-s", "-o", "/dev/null", "-w", "%{http_code}\\t%{size_download}"),
     "/ok?len=1000&id={id}", 0},
    {A("-s", "-k", "-w", "%{http_version}"), "/ok?id={id}", TLS_SERVER},
    {A("-s", "--resolve", "retryd.test:{port}:127.0.0.1"), "/ok?id={id}",
     NAMED},
    {A("-s", "--resolve", "retryd.test:{port}:127.0.0.1", "-d", "x"),
     "/echo?id={id}", NAMED},
    {A("-s", "-x", "http://127.0.0.1:{port}"), "/ok?id={id}", NAMED},
    {A("-s", "--compressed"), "/echo?id={id}", 0},
    {A("-s", "--compressed", "-i"), "/ok?len=5000&id={id}", 0},
    {A("-s", "-i"), "/status?code=404&id={id}", 0},
    {A("-s", "-i"), "/status?code=503&retry_after=1&id={id}", 0},
    {A("-s", "-k", "-i"), "/ok?id={id}", TLS_SERVER},
    {A("-s"), "/ok?id={id}", H2C},
    {A("-s", "-d", "a=1"), "/echo?id={id}", H2C},
    {A("-s", "-f"), "/status?code=404&id={id}", H2C},
    {A("-s", "-u", "a:b"), "/ok?id={id}", H2C},
};

/* @p tmpl with each "{id}" replaced by @p id. */
static void fill(const char *tmpl, const char *id, char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = tmpl; *p && n + 1 < len;) {
        if (strncmp(p, "{id}", 4) == 0) {
            n += (size_t)snprintf(out + n, len - n, "%s", id);
            p += 4;
        } else {
            out[n++] = *p++;
        }
    }
    out[n < len ? n : len - 1] = '\0';
}

static void url_for(const invocation *c, const char *id, char *out, size_t len)
{
    char path[512];
    fill(c->path, id, path, sizeof(path));
    if (c->flags & NOWHERE)
        snprintf(out, len, "http://no-such-host.invalid%s", path);
    else if (c->flags & TLS_SERVER && c->flags & REFUSED)
        /* TLS to the plain server: the handshake fails. */
        snprintf(out, len, "https://127.0.0.1:%d%s", testsrv_port(srv), path);
    else if (c->flags & REFUSED)
        snprintf(out, len, "http://127.0.0.1:%d%s", testsrv_unused_port(),
                 path);
    else if (c->flags & TLS_SERVER)
        snprintf(out, len, "https://127.0.0.1:%d%s", testsrv_port(tls), path);
    else if (c->flags & H2C)
        snprintf(out, len, "http://127.0.0.1:%d%s", testsrv_port(h2c), path);
    else if (c->flags & NAMED)
        snprintf(out, len, "http://retryd.test:%d%s", testsrv_port(srv), path);
    else
        snprintf(out, len, "http://127.0.0.1:%d%s", testsrv_port(srv), path);
}

static void run_one(bool ctl, const invocation *c, const char *id,
                    run_result *res)
{
    char url[700];
    char *argv[24];
    size_t n = 0;
    url_for(c, id, url, sizeof(url));
    argv[n++] = ctl ? RETRYDCTL_PATH : CURL_PATH;
    if (ctl) {
        argv[n++] = "request";
        argv[n++] = "--safe";
        argv[n++] = "--max-attempts";
        argv[n++] = "1";
    }
    if (c->flags & H2C)
        argv[n++] = ctl ? "--h2c" : "--http2-prior-knowledge";
    static char filled[8][128];
    char port[16];
    snprintf(port, sizeof(port), "%d", testsrv_port(srv));
    for (size_t i = 0; c->args[i]; i++) {
        const char *at = strstr(c->args[i], "{port}");
        if (at == NULL) {
            argv[n++] = c->args[i];
            continue;
        }
        snprintf(filled[i], sizeof(filled[i]), "%.*s%s%s",
                 (int)(at - c->args[i]), c->args[i], port, at + 6);
        argv[n++] = filled[i];
    }
    argv[n++] = url;
    argv[n] = NULL;
    cr_assert_eq(run_program(argv, 20000, res), 0);
}

/* The server's LOG of @p id, without what differs between any two runs. */
static void log_of(testsrv *s, const char *id, char *out, size_t len)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "LOG %s", id);
    cr_assert_eq(testsrv_command(s, cmd, out, len), 0);
}

static void compare_logs(const invocation *c, const char *cid, const char *rid,
                         size_t i)
{
    testsrv *s = c->flags & H2C                                   ? h2c
                 : c->flags & TLS_SERVER && !(c->flags & REFUSED) ? tls
                                                                  : srv;
    char a[2048], b[2048], ct[64], rt[64];
    log_of(s, cid, a, sizeof(a));
    log_of(s, rid, b, sizeof(b));
    cr_expect_str_eq(b, a, "case %zu (%s): the request the server saw", i,
                     c->path);
    snprintf(ct, sizeof(ct), "%s-t", cid);
    snprintf(rt, sizeof(rt), "%s-t", rid);
    log_of(s, ct, a, sizeof(a));
    log_of(s, rt, b, sizeof(b));
    cr_expect_str_eq(b, a, "case %zu (%s): the redirect's target saw", i,
                     c->path);
}

Test(retrydctl_vs_curl, same_exit_stdout_and_request_as_curl)
{
    if (access(CURL_PATH, X_OK) != 0)
        cr_skip_test("no curl at " CURL_PATH);
    size_t n = sizeof(cases) / sizeof(cases[0]);
    cr_assert_geq(n, 50, "the issue asks for 50 invocations at least");
    for (size_t i = 0; i < n; i++) {
        const invocation *c = &cases[i];
        char cid[32], rid[32];
        snprintf(cid, sizeof(cid), "c%zu", i);
        snprintf(rid, sizeof(rid), "r%zu", i);
        run_one(false, c, cid, &curl_res);
        run_one(true, c, rid, &ctl_res);
        cr_expect_eq(ctl_res.exit_code, curl_res.exit_code,
                     "case %zu (%s %s): exit: curl %d, retrydctl %d: %s", i,
                     c->args[0], c->path, curl_res.exit_code, ctl_res.exit_code,
                     ctl_res.err);
        if (!(c->flags & NO_STDOUT))
            cr_expect(ctl_res.out_len == curl_res.out_len &&
                          memcmp(ctl_res.out, curl_res.out, curl_res.out_len) ==
                              0,
                      "case %zu (%s %s): stdout: curl [%.200s] retrydctl "
                      "[%.200s]",
                      i, c->args[1] ? c->args[1] : c->args[0], c->path,
                      curl_res.out, ctl_res.out);
        compare_logs(c, cid, rid, i);
    }
}
