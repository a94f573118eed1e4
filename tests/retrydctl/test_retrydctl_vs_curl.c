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
 *
 * Cookies (-b FILE, -c JAR) go through libcurl's cookie engine in both, so
 * a cookie file's cookies for 127.0.0.2 reach only the second server (a
 * faultsrv bound there), a Set-Cookie of a redirect's first hop reaches
 * the second when it matches, and the two jars must be the same file.
 * -F goes through libcurl's MIME API in both: the parts' boundaries differ
 * by run, so a MULTIPART case compares stdout (the echoed body) with the
 * boundary replaced, and the server's LOG without its body checksum (the
 * body's length stays compared).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "run.h"
#include "testsrv.h"

static testsrv *srv, *tls, *h2c, *second;
static run_result curl_res, ctl_res;
/* The files an invocation names: a cookie file (cookies for 127.0.0.1 and
 * for 127.0.0.2), a file to upload, and each program's cookie jar. */
static char dir[64], cookies[96], upload[96], jar[2][96];

static void write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text),
              "%s", path);
    close(fd);
}

static void files(void)
{
    snprintf(dir, sizeof(dir), "/tmp/retryd-vs-curl-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(cookies, sizeof(cookies), "%s/cookies.txt", dir);
    snprintf(upload, sizeof(upload), "%s/upload.txt", dir);
    snprintf(jar[0], sizeof(jar[0]), "%s/jar-curl.txt", dir);
    snprintf(jar[1], sizeof(jar[1]), "%s/jar-retrydctl.txt", dir);
    write_file(cookies, "127.0.0.1\tFALSE\t/\tFALSE\t0\tone\t1\n"
                        "127.0.0.1\tFALSE\t/other\tFALSE\t0\tpath\tp\n"
                        "127.0.0.2\tFALSE\t/\tFALSE\t0\ttwo\t2\n");
    write_file(upload, "uploaded\r\nbytes\n");
}

static void setup(void)
{
    char *argv_tls[] = {"--tls", NULL};
    char *bind2[] = {"--bind=127.0.0.2", NULL};
    files();
    cr_assert_eq(testsrv_start(FAULTSRV_PATH, NULL, &srv), 0);
    cr_assert_eq(testsrv_start(FAULTSRV_PATH, bind2, &second), 0);
    char *argv_h2c[] = {"--h2c", NULL};
    cr_assert_eq(testsrv_start(H2SRV_PATH, argv_tls, &tls), 0);
    cr_assert_eq(testsrv_start(H2SRV_PATH, argv_h2c, &h2c), 0);
}

static void teardown(void)
{
    testsrv_stop(srv);
    testsrv_stop(tls);
    testsrv_stop(h2c);
    testsrv_stop(second);
    unlink(cookies);
    unlink(upload);
    unlink(jar[0]);
    unlink(jar[1]);
    rmdir(dir);
}

TestSuite(retrydctl_vs_curl, .init = setup, .fini = teardown, .timeout = 120);

/* H2C: the cleartext HTTP/2 server, which curl reaches with
 * --http2-prior-knowledge and retrydctl with --h2c. */
/* NAMED: the URL names the host retryd.test (at the plain server's port),
 * which only --resolve or a proxy can reach. MULTIPART: -F's boundary is
 * replaced in stdout, the body checksum left out of the LOG. JAR: the two
 * cookie jars ({jar}) must be the same. */
enum {
    NO_STDOUT = 1,
    TLS_SERVER = 2,
    REFUSED = 4,
    NOWHERE = 8,
    H2C = 16,
    NAMED = 32,
    MULTIPART = 64,
    JAR = 128,
};

typedef struct invocation {
    /* Before the URL; "{port}": the plain server's, "{cookies}" the cookie
     * file, "{upload}" the file to upload, "{jar}" the program's jar. */
    char *args[8];
    /* "{id}" becomes the run's request id, "{port2}" the port of the
     * server at 127.0.0.2. */
    const char *path;
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
    {A("-s", "-b", "{cookies}"), "/ok?id={id}", 0},
    {A("-s", "-b", "c=1", "-b", "d=2"), "/ok?id={id}", 0},
    {A("-s", "-b", "c=1", "-b", "{cookies}"), "/ok?id={id}", 0},
    {A("-s", "-b", "{cookies}"), "/other/x?id={id}", 0},
    {A("-s", "-c", "{jar}"), "/cookie?set=sc%3D1%3B%20Path%3D%2F&id={id}", JAR},
    {A("-s", "-b", "{cookies}", "-c", "{jar}"), "/cookie?set=one%3Dnew&id={id}",
     JAR},
    {A("-s", "-L", "-b", "{cookies}"),
     "/redirect?to=http%3A%2F%2F127.0.0.2%3A{port2}%2Fok%3Fid%3D{id}-t&id={id}",
     0},
    {A("-s", "-L", "-b", "{cookies}"),
     "/cookie?set=hop%3D1&to=%2Fok%3Fid%3D{id}-t&id={id}", 0},
    {A("-s", "-L", "-c", "{jar}"),
     "/cookie?set=hop%3D1&to=http%3A%2F%2F127.0.0.2%3A{port2}%2Fcookie%3Fid%"
     "3D{id}-t%26set%3Dtwo%253D2&id={id}",
     JAR},
    {A("-s", "-F", "a=1"), "/echo?id={id}", MULTIPART},
    {A("-s", "-F", "a=1", "-F", "b= two words ;type=text/x-y"), "/echo?id={id}",
     MULTIPART},
    {A("-s", "-F", "f=@{upload}"), "/echo?id={id}", MULTIPART},
    {A("-s", "-F", "f=@{upload};type=text/x-t;filename=other.bin", "-F", "n=2"),
     "/echo?id={id}", MULTIPART},
    {A("-s", "-F", "g=<{upload}"), "/echo?id={id}", MULTIPART},
    {A("-s", "-F", "q=\"a;b\";filename=\"x y.txt\""), "/echo?id={id}",
     MULTIPART},
    {A("-s", "--form-string", "s=@not-a-file;type=x"), "/echo?id={id}",
     MULTIPART},
    {A("-s", "-X", "PUT", "-F", "a=1"), "/echo?id={id}", MULTIPART},
    {A("-s", "-L", "-F", "a=1"), "/redirect?to=%2Fecho%3Fid%3D{id}-t&id={id}",
     MULTIPART},
    {A("-s", "-L", "-F", "f=@{upload}"),
     "/redirect?code=307&to=%2Fecho%3Fid%3D{id}-t&id={id}", MULTIPART},
    {A("-s", "-L", "-F", "a=1"),
     "/redirect?code=308&to=%2Fecho%3Fid%3D{id}-t&id={id}", MULTIPART},
    {A("-s", "-L", "-F", "a=1"),
     "/redirect?code=303&to=%2Fecho%3Fid%3D{id}-t&id={id}", MULTIPART},
    {A("-s", "-F", "f=@/nonexistent/retryd-upload"), "/echo?id={id}", 0},
    {A("-s", "-k", "-F", "f=@{upload}"), "/echo?id={id}",
     TLS_SERVER | MULTIPART},
    {A("-s", "-F", "a=1"), "/echo?id={id}", H2C | MULTIPART},
};

/* @p tmpl with each "{id}" replaced by @p id, and "{port}", "{port2}",
 * "{cookies}", "{upload}", "{jar}" (the jar of curl, or of retrydctl when
 * @p ctl) by theirs. */
static void fill(const char *tmpl, const char *id, bool ctl, char *out,
                 size_t len)
{
    char port[16], port2[16];
    snprintf(port, sizeof(port), "%d", testsrv_port(srv));
    snprintf(port2, sizeof(port2), "%d", testsrv_port(second));
    const struct {
        const char *name, *value;
    } vars[] = {{"{id}", id},         {"{port}", port},
                {"{port2}", port2},   {"{cookies}", cookies},
                {"{upload}", upload}, {"{jar}", jar[ctl]}};
    size_t n = 0;
    for (const char *p = tmpl; *p && n + 1 < len;) {
        size_t v = 0, k = sizeof(vars) / sizeof(vars[0]);
        while (v < k && strncmp(p, vars[v].name, strlen(vars[v].name)) != 0)
            v++;
        if (v == k) {
            out[n++] = *p++;
            continue;
        }
        n += (size_t)snprintf(out + n, len - n, "%s", vars[v].value);
        p += strlen(vars[v].name);
    }
    out[n < len ? n : len - 1] = '\0';
}

static void url_for(const invocation *c, const char *id, char *out, size_t len)
{
    char path[512];
    fill(c->path, id, false, path, sizeof(path));
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
    static char filled[8][256];
    for (size_t i = 0; c->args[i]; i++) {
        fill(c->args[i], id, ctl, filled[i], sizeof(filled[i]));
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

/* A LOG without each execution's body checksum (its fourth field): a
 * multipart body's boundary differs by run. */
static void without_checksums(char *log)
{
    for (char *e = log; e != NULL && *e;) {
        char *p = e;
        for (int field = 0; field < 3 && p; field++)
            p = strchr(p, ' ') ? strchr(p, ' ') + 1 : NULL;
        char *end = p ? strchr(p, ' ') : NULL;
        if (end == NULL)
            break;
        memmove(p, end + 1, strlen(end + 1) + 1);
        e = strstr(p, " ; ");
        e = e ? e + 3 : NULL;
    }
}

static void log_pair(testsrv *s, const invocation *c, const char *cid,
                     const char *rid, char *a, char *b, size_t len)
{
    log_of(s, cid, a, len);
    log_of(s, rid, b, len);
    if (c->flags & MULTIPART) {
        without_checksums(a);
        without_checksums(b);
    }
}

static void compare_logs(const invocation *c, const char *cid, const char *rid,
                         size_t i)
{
    testsrv *s = c->flags & H2C                                   ? h2c
                 : c->flags & TLS_SERVER && !(c->flags & REFUSED) ? tls
                                                                  : srv;
    char a[2048], b[2048], ct[64], rt[64];
    log_pair(s, c, cid, rid, a, b, sizeof(a));
    cr_expect_str_eq(b, a, "case %zu (%s): the request the server saw", i,
                     c->path);
    snprintf(ct, sizeof(ct), "%s-t", cid);
    snprintf(rt, sizeof(rt), "%s-t", rid);
    log_pair(s, c, ct, rt, a, b, sizeof(a));
    cr_expect_str_eq(b, a, "case %zu (%s): the redirect's target saw", i,
                     c->path);
    /* A redirect to the server at 127.0.0.2. */
    log_pair(second, c, ct, rt, a, b, sizeof(a));
    cr_expect_str_eq(b, a, "case %zu (%s): 127.0.0.2 saw", i, c->path);
}

/* Each occurrence of the multipart boundary in @p res's output (the first
 * line of an echoed body, less its leading "--") as "BOUNDARY". */
static void normalise_boundary(run_result *res)
{
    char *nl = memchr(res->out, '\r', res->out_len);
    if (res->out_len < 4 || strncmp(res->out, "--", 2) != 0 || nl == NULL)
        return;
    char boundary[128];
    size_t blen = (size_t)(nl - res->out) - 2;
    if (blen == 0 || blen >= sizeof(boundary))
        return;
    memcpy(boundary, res->out + 2, blen);
    boundary[blen] = '\0';
    size_t w = 0;
    for (size_t r = 0; r < res->out_len;) {
        if (r + blen <= res->out_len &&
            memcmp(res->out + r, boundary, blen) == 0) {
            memcpy(res->out + w, "BOUNDARY", 8);
            w += 8;
            r += blen;
        } else {
            res->out[w++] = res->out[r++];
        }
    }
    res->out_len = w;
    res->out[w] = '\0';
}

/* A file's whole text into @p out ("" when it cannot be read). */
static void read_text(const char *path, char *out, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, out, len - 1) : 0;
    out[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
}

static void compare_jars(size_t i, const invocation *c)
{
    char a[4096], b[4096];
    read_text(jar[0], a, sizeof(a));
    read_text(jar[1], b, sizeof(b));
    cr_expect(strstr(a, "Netscape HTTP Cookie File") != NULL,
              "case %zu (%s): curl wrote its jar: [%s]", i, c->path, a);
    cr_expect_str_eq(b, a, "case %zu (%s): the cookie jar", i, c->path);
    unlink(jar[0]);
    unlink(jar[1]);
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
        if (c->flags & MULTIPART) {
            normalise_boundary(&curl_res);
            normalise_boundary(&ctl_res);
        }
        if (c->flags & JAR)
            compare_jars(i, c);
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
