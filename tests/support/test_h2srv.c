/* SPDX-License-Identifier: MIT */
/* Tests of retryd-h2srv, driven by real libcurl (the client retryd uses)
 * over cleartext HTTP/2 with prior knowledge (suite h2c) and HTTP/2 over
 * TLS with ALPN (suite tls), plus the --http11-only server (suite
 * tls_http11). Each test runs in its own process with its own server,
 * started through testsrv; results are checked from both sides: libcurl's
 * return code and response, and the server's counters (COUNT, REFUSED,
 * STREAMS, CONNS, LOG).
 *
 * The libcurl results asserted here are those of libcurl 7.88.1 (Debian
 * 12), e.g. for a refused stream it retries internally and gives up with
 * CURLE_RECV_ERROR after six attempts. Every transfer has a time bound
 * (CURLOPT_TIMEOUT_MS), and waits on the server use its bounded IDLE
 * command: no sleeps.
 *
 * libcurl 7.88.1 cannot reuse an h2c prior-knowledge connection (curl
 * #10634, fixed in 8.0.0): tests that need several streams on one
 * connection run over TLS only. */
#include "rawhttp.h"
#include "srv_test.h"
#include "testsrv.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef H2SRV_PATH
#error "H2SRV_PATH must be defined to the path of retryd-h2srv"
#endif

#define WAIT_MS 5000
#define TRANSFER_MS 10000 /* bound on every libcurl transfer */

enum transport { H2C, TLS, TLS_HTTP11_ONLY };

static testsrv *srv;
static enum transport transport;
static char cert_dir[64] = "";
static char cert_path[128] = "";

/* --- server lifecycle ------------------------------------------------------
 */

static void start_server(enum transport t)
{
    char *argv[6];
    size_t n = 0;
    int rc;

    cr_assert_eq(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
    transport = t;
    if (t == H2C) {
        argv[n++] = "--h2c";
    } else {
        snprintf(cert_dir, sizeof cert_dir, "/tmp/test_h2srv.XXXXXX");
        cr_assert_not_null(mkdtemp(cert_dir), "mkdtemp: %s", strerror(errno));
        snprintf(cert_path, sizeof cert_path, "%s/cert.pem", cert_dir);
        argv[n++] = "--tls";
        argv[n++] = "--cert-out";
        argv[n++] = cert_path;
        if (t == TLS_HTTP11_ONLY)
            argv[n++] = "--http11-only";
    }
    argv[n] = NULL;
    rc = testsrv_start(H2SRV_PATH, argv, &srv);
    cr_assert_eq(rc, 0, "testsrv_start(%s): %s", H2SRV_PATH, strerror(-rc));
}

static void start_h2c(void)
{
    start_server(H2C);
}

static void start_tls(void)
{
    start_server(TLS);
}

static void start_tls_http11_only(void)
{
    start_server(TLS_HTTP11_ONLY);
}

static void stop_server(void)
{
    testsrv_stop(srv); /* NULL-safe; a no-op after expect_clean_exit() */
    srv = NULL;
    if (cert_path[0])
        unlink(cert_path);
    if (cert_dir[0])
        rmdir(cert_dir);
    cert_path[0] = cert_dir[0] = '\0';
    curl_global_cleanup();
}

/* See SRV_TEST (srv_test.h). */
static void expect_clean_exit(void)
{
    srvtest_assert_clean_exit(srv, WAIT_MS);
    stop_server();
}

TestSuite(h2c, .init = start_h2c, .fini = stop_server, .timeout = 30);
TestSuite(tls, .init = start_tls, .fini = stop_server, .timeout = 30);
TestSuite(tls_http11, .init = start_tls_http11_only, .fini = stop_server,
          .timeout = 30);

/* A behaviour checked over both transports: SRV_TEST (srv_test.h) in
 * each suite, so both end with expect_clean_exit(). */
#define BOTH_TEST(name)                                                        \
    static void name##_body(void);                                             \
    SRV_TEST(h2c, name)                                                        \
    {                                                                          \
        name##_body();                                                         \
    }                                                                          \
    SRV_TEST(tls, name)                                                        \
    {                                                                          \
        name##_body();                                                         \
    }                                                                          \
    static void name##_body(void)

/* --- control port ----------------------------------------------------------
 */

/* A count from the control port; a command that fails fails the test. */
static long number(const char *verb, const char *arg)
{
    long v = testsrv_number(srv, verb, arg);

    cr_assert_geq(v, 0, "%s %s: %s", verb, arg ? arg : "", strerror((int)-v));
    return v;
}

static long count(const char *id)
{
    return number("COUNT", id);
}

static long refused(const char *id)
{
    return number("REFUSED", id);
}

static long streams(void)
{
    return number("STREAMS", NULL);
}

static long conns(void)
{
    return number("CONNS", NULL);
}

static void expect_log(const char *id, const char *want)
{
    char cmd[300], reply[1024];
    int rc;

    snprintf(cmd, sizeof cmd, "LOG %s", id);
    rc = testsrv_command(srv, cmd, reply, sizeof reply);
    cr_assert_eq(rc, 0, "LOG: %s", strerror(-rc));
    cr_expect_str_eq(reply, want);
}

/* The server closes its side (after a GOAWAY, after the client left):
 * wait, bounded, until it has no HTTP connection open. */
static void expect_idle(void)
{
    int rc = testsrv_wait_idle(srv, WAIT_MS);

    cr_expect_eq(rc, 0, "server connections still open: %s", strerror(-rc));
}

/* --- libcurl ---------------------------------------------------------------
 */

struct result {
    CURLcode rc;
    long status;  /* CURLINFO_RESPONSE_CODE */
    long version; /* CURLINFO_HTTP_VERSION */
    char *body;   /* malloc'd, NUL-terminated */
    size_t body_len;
    char retry_after[64];    /* "": absent */
    char content_length[32]; /* "": absent */
    char errbuf[CURL_ERROR_SIZE];
    int64_t elapsed_ms;
};

static size_t on_body(char *data, size_t size, size_t n, void *user)
{
    struct result *r = user;
    char *p = realloc(r->body, r->body_len + n + 1);

    (void)size; /* always 1 */
    if (!p)
        return 0;
    memcpy(p + r->body_len, data, n);
    r->body = p;
    r->body_len += n;
    r->body[r->body_len] = '\0';
    return n;
}

/* Copies the value of header field `name` (with its colon) when data, a
 * header line of n bytes (not NUL-terminated), is that field. */
static void field_value(const char *data, size_t n, const char *name, char *out,
                        size_t outlen)
{
    size_t v = strlen(name), end = n;

    if (n < v || strncasecmp(data, name, v) != 0)
        return;
    while (v < n && data[v] == ' ')
        v++;
    while (end > v && strchr(" \r\n", data[end - 1]))
        end--;
    snprintf(out, outlen, "%.*s", (int)(end - v), data + v);
}

static size_t on_header(char *data, size_t size, size_t n, void *user)
{
    struct result *r = user;

    (void)size;
    field_value(data, n, "retry-after:", r->retry_after, sizeof r->retry_after);
    field_value(data, n, "content-length:", r->content_length,
                sizeof r->content_length);
    return n;
}

static void url_for(char *url, size_t len, const char *host, const char *path)
{
    snprintf(url, len, "%s://%s:%d%s", transport == H2C ? "http" : "https",
             host, testsrv_port(srv), path);
}

/* An easy handle set up for this suite's transport, bounded in time. The
 * result struct receives the body, headers and error text. */
static CURL *new_handle(struct result *r)
{
    CURL *h = curl_easy_init();

    cr_assert_not_null(h);
    memset(r, 0, sizeof *r);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*"); /* ignore *_proxy variables */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)TRANSFER_MS);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->errbuf);
    if (transport == H2C) {
        curl_easy_setopt(h, CURLOPT_HTTP_VERSION,
                         (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    } else {
        curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
        curl_easy_setopt(h, CURLOPT_CAINFO, cert_path);
    }
    return h;
}

/* Performs a request on h; r was given to new_handle(h). */
static void perform(CURL *h, struct result *r, const char *path)
{
    char url[512];
    int64_t t0 = testsrv_now_ms();

    url_for(url, sizeof url, "127.0.0.1", path);
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
    r->retry_after[0] = r->content_length[0] = r->errbuf[0] = '\0';
    curl_easy_setopt(h, CURLOPT_URL, url);
    r->rc = curl_easy_perform(h);
    r->elapsed_ms = testsrv_now_ms() - t0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &r->version);
}

static void free_result(struct result *r)
{
    free(r->body);
    r->body = NULL;
}

/* One GET on a fresh handle (so a fresh connection). */
static void get(const char *path, struct result *r)
{
    CURL *h = new_handle(r);

    perform(h, r, path);
    curl_easy_cleanup(h);
}

static void expect_rc(const struct result *r, CURLcode want)
{
    cr_expect_eq(r->rc, want, "curl: %d (%s) \"%s\", want %d (%s)", r->rc,
                 curl_easy_strerror(r->rc), r->errbuf, want,
                 curl_easy_strerror(want));
}

/* --- one request, checked from both sides ----------------------------------
 */

/* What one request on a fresh handle must lead to: libcurl's result, and
 * every server count, for the id= parameter of the path. The zero value
 * of a field is an expectation too (no body, nothing refused, ...). */
struct want {
    const char *path;
    size_t upload;               /* > 0: a POST of that many bytes, "abc..z" */
    const char *idempotency_key; /* NULL: no Idempotency-Key */
    size_t header_bytes;         /* > 0: plus a header field X-Big that long */
    long timeout_ms;             /* 0: TRANSFER_MS */
    CURLcode rc;
    long status;      /* 0: no response */
    bool http11;      /* answered over HTTP/1.1 rather than HTTP/2 */
    bool echo;        /* the body is the upload */
    const char *body; /* else this; NULL: len bytes of 'x' (none if 0) */
    size_t len;
    const char *retry_after; /* NULL: absent */
    int64_t min_ms;          /* answered no earlier than this */
    long count, refused, streams, conns;
    /* The connection ends while the handle still holds it (a GOAWAY):
     * curl_easy_cleanup would close it anyway, so checked before. */
    bool gone_before_cleanup;
};

/* The id= parameter of path, verbatim: COUNT of an id that the server
 * decodes or rejects is 0, as wanted. */
static void id_of(const char *path, char *id, size_t len)
{
    const char *p = strstr(path, "?id=");

    if (!p)
        p = strstr(path, "&id=");
    cr_assert_not_null(p, "%s has no id=", path);
    p += 4;
    snprintf(id, len, "%.*s", (int)strcspn(p, "&"), p);
}

/* LOG of the id: its execution (at most one here) was a GET or the
 * upload, with the key, on stream 1 of its connection. */
static void expect_log_of(const struct want *w, const char *id,
                          const char *upload)
{
    char log[512];

    if (w->count == 0) {
        expect_log(id, "0");
        return;
    }
    cr_assert_eq(w->count, 1, "LOG of several executions: not predicted");
    snprintf(log, sizeof log, "1 %s %zu %016" PRIx64 " %s - %s",
             upload ? "POST" : "GET", w->upload,
             srvtest_fnv1a64(upload ? upload : "", w->upload),
             w->idempotency_key ? w->idempotency_key : "-",
             w->http11 ? "http/1.1" : "h2:1");
    expect_log(id, log);
}

static void expect_request(const struct want *w)
{
    struct curl_slist *hdrs = NULL;
    char *upload = NULL, *field = NULL, id[256], key[128];
    struct result r;
    CURL *h = new_handle(&r);

    id_of(w->path, id, sizeof id);
    if (w->upload) {
        cr_assert_not_null(upload = malloc(w->upload));
        for (size_t i = 0; i < w->upload; i++)
            upload[i] = (char)('a' + i % 26);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, upload);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)w->upload);
    }
    if (w->idempotency_key) {
        snprintf(key, sizeof key, "Idempotency-Key: %s", w->idempotency_key);
        hdrs = curl_slist_append(hdrs, key);
    }
    if (w->header_bytes) {
        cr_assert_not_null(field = malloc(w->header_bytes + 8));
        memcpy(field, "X-Big: ", 7);
        memset(field + 7, 'v', w->header_bytes);
        field[7 + w->header_bytes] = '\0';
        hdrs = curl_slist_append(hdrs, field);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (w->timeout_ms)
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, w->timeout_ms);
    perform(h, &r, w->path);
    if (w->gone_before_cleanup)
        expect_idle();
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    free(field);
    expect_idle(); /* whatever happened, the server lets go of the client */

    expect_rc(&r, w->rc);
    cr_expect_eq(r.status, w->status, "status %ld", r.status);
    if (w->status)
        cr_expect_eq(r.version,
                     w->http11 ? CURL_HTTP_VERSION_1_1 : CURL_HTTP_VERSION_2_0,
                     "HTTP version %ld", r.version);
    if (w->echo) {
        cr_expect(r.body_len == w->upload &&
                      memcmp(r.body, upload, w->upload) == 0,
                  "echoed %zu bytes, not the upload", r.body_len);
    } else if (w->body) {
        cr_expect_str_eq(r.body ? r.body : "", w->body);
    } else {
        cr_expect_eq(r.body_len, w->len, "body length %zu", r.body_len);
        cr_expect_eq(strspn(r.body ? r.body : "", "x"), w->len);
    }
    cr_expect_str_eq(r.retry_after, w->retry_after ? w->retry_after : "");
    /* RFC 9110 8.6: none on 204; on 304 it would have to be that of the
     * 200 the client did not get, so none either. */
    if (w->status)
        cr_expect_eq(r.content_length[0] != '\0',
                     w->status != 204 && w->status != 304,
                     "content-length: \"%s\"", r.content_length);
    cr_expect_geq(r.elapsed_ms, w->min_ms, "answered after %" PRId64 " ms",
                  r.elapsed_ms);
    cr_expect_eq(count(id), w->count, "COUNT %s", id);
    cr_expect_eq(refused(id), w->refused, "REFUSED %s", id);
    cr_expect_eq(streams(), w->streams, "STREAMS");
    cr_expect_eq(conns(), w->conns, "CONNS");
    expect_log_of(w, id, upload);
    free(upload);
    free_result(&r);
}

/* A named test of one request, over both transports (REQUEST_TEST) or
 * in one suite (REQUEST_TEST_IN); the arguments fill its struct want. */
#define REQUEST_TEST(name, ...)                                                \
    static const struct want name##_want;                                      \
    BOTH_TEST(name)                                                            \
    {                                                                          \
        expect_request(&name##_want);                                          \
    }                                                                          \
    static const struct want name##_want = {__VA_ARGS__}

#define REQUEST_TEST_IN(suite, name, ...)                                      \
    static const struct want suite##_##name##_want;                            \
    SRV_TEST(suite, name)                                                      \
    {                                                                          \
        expect_request(&suite##_##name##_want);                                \
    }                                                                          \
    static const struct want suite##_##name##_want = {__VA_ARGS__}

/* --- plain requests ----------------------------------------------------------
 */

REQUEST_TEST(ok_is_answered_over_http2_and_executed_once, .path = "/ok?id=a",
             .status = 200, .body = "ok", .count = 1, .streams = 1, .conns = 1);

/* 3 MiB: beyond every default window. */
REQUEST_TEST(ok_len_sends_a_large_body_within_flow_control,
             .path = "/ok?id=big&len=3145728", .status = 200, .len = 3u << 20,
             .count = 1, .streams = 1, .conns = 1);

/* 3 MiB: the server's 1 MiB stream window, thrice. */
REQUEST_TEST(echo_returns_a_large_upload_and_logs_it, .path = "/echo?id=up",
             .upload = 3u << 20, .idempotency_key = "key-1", .status = 200,
             .echo = true, .count = 1, .streams = 1, .conns = 1);

REQUEST_TEST(status_answers_the_code_and_retry_after,
             .path = "/status?id=s&code=503&retry_after=7", .status = 503,
             .body = "status 503\n", .retry_after = "7", .count = 1,
             .streams = 1, .conns = 1);

REQUEST_TEST(status_304_has_neither_body_nor_content_length,
             .path = "/status?id=nm&code=304", .status = 304, .body = "",
             .count = 1, .streams = 1, .conns = 1);

REQUEST_TEST(unknown_path_is_answered_404_and_executed, .path = "/nope?id=n",
             .status = 404, .body = "not found\n", .count = 1, .streams = 1,
             .conns = 1);

REQUEST_TEST(bad_parameter_is_answered_400_and_executed,
             .path = "/status?id=b&code=99", .status = 400,
             .body = "bad parameter: code\n", .count = 1, .streams = 1,
             .conns = 1);

REQUEST_TEST(malformed_id_is_answered_400_without_execution,
             .path = "/ok?id=a%20b", .status = 400, .body = "bad request id\n",
             .streams = 1, .conns = 1);

/* Over the server's 32 KiB, under nghttp2's 64 KiB. */
REQUEST_TEST(oversized_header_is_answered_431_without_execution,
             .path = "/ok?id=hdr", .header_bytes = 40000, .status = 431,
             .body = "request header fields too large\n", .streams = 1,
             .conns = 1);

/* The 413 comes with the request headers (content-length), followed by
 * RST_STREAM(NO_ERROR): libcurl stops uploading and reports it. */
REQUEST_TEST(oversized_body_is_answered_413_without_execution,
             .path = "/echo?id=huge", .upload = (16u << 20) + 1, .status = 413,
             .body = "content too large\n", .streams = 1, .conns = 1);

/* --- faults that prove "not processed" --------------------------------------
 */

/* libcurl 7.88.1 re-sends a refused stream on a fresh connection, at most
 * 5 times, then fails "Connection died, tried 5 times". */
REQUEST_TEST(refuse_is_never_executed_and_curl_gives_up_after_six_streams,
             .path = "/refuse?id=r", .rc = CURLE_RECV_ERROR, .refused = 6,
             .streams = 6, .conns = 6);

REQUEST_TEST(refuse_once_is_resent_by_curl_and_executed_once,
             .path = "/refuse-once?id=r1", .status = 200, .body = "ok",
             .count = 1, .refused = 1, .streams = 2, .conns = 2);

/* GOAWAY(last-stream-id 0) for stream 1: libcurl 7.88.1 returns
 * CURLE_HTTP2 with an empty error buffer, and does not retry. It drops
 * the connection itself; that the server closes it too is
 * goaway_closes_a_connection_the_client_keeps_open. */
REQUEST_TEST(goaway_below_the_stream_fails_with_http2_error_unexecuted,
             .path = "/goaway?id=g", .rc = CURLE_HTTP2, .refused = 1,
             .streams = 1, .conns = 1, .gone_before_cleanup = true);

/* libcurl reconnects with HTTP/1.1 and the server answers there. */
REQUEST_TEST(http11_required_downgrades_and_executes_over_http11,
             .path = "/http11-required?id=d", .status = 200, .http11 = true,
             .body = "ok", .count = 1, .refused = 1, .streams = 1, .conns = 2);

/* --- faults after execution
 * --------------------------------------------------- */

/* Without the GOAWAY, libcurl would keep the connection for reuse. */
REQUEST_TEST(goaway_after_the_response_lets_the_request_succeed,
             .path = "/goaway-after?id=ga", .status = 200, .body = "ok",
             .count = 1, .streams = 1, .conns = 1, .gone_before_cleanup = true);

/* Sends the h2c preface, an empty SETTINGS and a GET of path as stream 1,
 * on a raw socket: unlike libcurl, which drops a connection that got a
 * GOAWAY, it stays open until the server closes it. HPACK: :method GET
 * and :scheme http from the static table, :path and :authority as
 * literals without Huffman coding. Returns the socket. */
static int raw_h2c_get(const char *path)
{
    static const unsigned char start[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                         "\0\0\0\x04\0\0\0\0\0";
    static const char authority[] = "127.0.0.1";
    /* Frame header: length (set below), HEADERS, END_STREAM | END_HEADERS,
     * stream 1. */
    unsigned char f[256] = {[3] = 0x1, [4] = 0x5, [8] = 1};
    size_t len = strlen(path), n = 9;
    int fd = rawhttp_connect(testsrv_port(srv));

    cr_assert_geq(fd, 0, "connect: %s", strerror(-fd));
    cr_assert_lt(len, 127);
    f[n++] = 0x82; /* :method GET */
    f[n++] = 0x86; /* :scheme http */
    f[n++] = 0x04; /* :path (static index 4), literal value */
    f[n++] = (unsigned char)len;
    memcpy(f + n, path, len);
    n += len;
    f[n++] = 0x01; /* :authority (static index 1), literal value */
    f[n++] = sizeof authority - 1;
    memcpy(f + n, authority, sizeof authority - 1);
    n += sizeof authority - 1;
    f[2] = (unsigned char)(n - 9); /* payload length */
    cr_assert_eq(rawhttp_send(fd, start, sizeof start - 1), 0);
    cr_assert_eq(rawhttp_send(fd, f, n), 0);
    return fd;
}

SRV_TEST(h2c, goaway_closes_a_connection_the_client_keeps_open)
{
    static const char *const paths[] = {"/goaway?id=raw",
                                        "/goaway-after?id=raw-after"};

    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        int fd = raw_h2c_get(paths[i]);
        int rc;

        /* Frames (SETTINGS, a response, GOAWAY), then the server's FIN;
         * every read is bounded (rawhttp's SO_RCVTIMEO). */
        while ((rc = rawhttp_wait_close(fd)) == 1)
            continue;
        cr_expect_eq(rc, 0, "%s: %s", paths[i], strerror(-rc));
        close(fd);
    }
    cr_expect_eq(count("raw"), 0);
    cr_expect_eq(refused("raw"), 1);
    cr_expect_eq(count("raw-after"), 1);
    cr_expect_eq(refused("raw-after"), 0);
}

REQUEST_TEST(reset_after_read_is_executed_without_a_response,
             .path = "/reset-after-read?id=x", .rc = CURLE_HTTP2_STREAM,
             .count = 1, .streams = 1, .conns = 1);

REQUEST_TEST(reset_after_headers_leaves_a_partial_body,
             .path = "/reset-after-headers?id=p&len=100&sent=7",
             .rc = CURLE_HTTP2_STREAM, .status = 200, .len = 7, .count = 1,
             .streams = 1, .conns = 1);

REQUEST_TEST(reset_after_headers_without_body_bytes,
             .path = "/reset-after-headers?id=p0&len=10&sent=0",
             .rc = CURLE_HTTP2_STREAM, .status = 200, .count = 1, .streams = 1,
             .conns = 1);

/* 290: both clocks count whole milliseconds. */
REQUEST_TEST(hold_answers_after_the_delay, .path = "/hold?id=h&ms=300",
             .status = 200, .body = "ok", .min_ms = 290, .count = 1,
             .streams = 1, .conns = 1);

/* Executed, never answered; the client's timeout closes the connection
 * and the server notices (expect_request waits for it to go idle). */
REQUEST_TEST(hold_notices_the_client_leaving, .path = "/hold?id=hl",
             .timeout_ms = 300, .rc = CURLE_OPERATION_TIMEDOUT, .count = 1,
             .streams = 1, .conns = 1);

/* --- control protocol and lifecycle -----------------------------------------
 */

SRV_TEST(h2c, control_counts_reset_and_errors)
{
    char reply[256];
    struct result r;

    get("/ok?id=c", &r);
    free_result(&r);
    get("/refuse-once?id=c", &r);
    free_result(&r);
    cr_expect_eq(count("c"), 2);
    cr_expect_eq(refused("c"), 1);
    cr_expect_eq(streams(), 3);
    expect_idle(); /* both handles are cleaned up: their connections end */
    cr_expect_eq(number("ACTIVE", NULL), 0);
    cr_expect_eq(testsrv_rejects(srv, "c"), 0);
    cr_expect_eq(testsrv_count(srv, "c"), 2);
    cr_expect_eq(testsrv_conns(srv), 3);
    cr_expect_eq(testsrv_wait_count(srv, "c", 2, WAIT_MS), 2);

    cr_assert_eq(testsrv_reset(srv), 0);
    cr_expect_eq(count("c"), 0);
    cr_expect_eq(refused("c"), 0);
    cr_expect_eq(streams(), 0);
    cr_expect_eq(conns(), 0);
    expect_log("c", "0");

    /* RESET also forgets /refuse-once: the next first stream is refused. */
    get("/refuse-once?id=c", &r);
    expect_rc(&r, CURLE_OK);
    cr_expect_eq(refused("c"), 1);
    free_result(&r);

    cr_assert_eq(testsrv_command(srv, "BOGUS", reply, sizeof reply), 0);
    cr_expect_eq(strncmp(reply, "ERR", 3), 0, "reply: %s", reply);
    cr_assert_eq(testsrv_command(srv, "COUNT", reply, sizeof reply), 0);
    cr_expect_eq(strncmp(reply, "ERR", 3), 0, "reply: %s", reply);
}

SRV_TEST(h2c, accept_close_mode_drops_connections)
{
    struct result r;

    cr_assert_eq(testsrv_mode(srv, "accept-close"), 0);
    get("/ok?id=m", &r);
    cr_expect_neq(r.rc, CURLE_OK);
    cr_expect_eq(count("m"), 0);
    free_result(&r);
    cr_assert_eq(testsrv_mode(srv, "normal"), 0);
    get("/ok?id=m", &r);
    expect_rc(&r, CURLE_OK);
    cr_expect_eq(count("m"), 1);
    free_result(&r);
}

/* The HTTP/1.1 fallback parses heads as faultsrv does (srv_request.c):
 * Connection is a token list, another protocol is 400 and another HTTP
 * version 505, and a 304 has no Content-Length. Raw, on the h2c port,
 * where a connection without the HTTP/2 preface is HTTP/1.1. Each case
 * is answered with Connection: close, and closed. */
SRV_TEST(h2c, http11_fallback_parses_heads_as_faultsrv_does)
{
    static const struct {
        const char *head;
        int status;
    } cases[] = {
        {"GET /ok?id=t HTTP/1.1\r\nConnection: TE, close\r\n\r\n", 200},
        {"GET /ok?id=t HTTP/2.0\r\n\r\n", 505},
        {"GET /ok?id=t FTP/1.1\r\n\r\n", 400},
        {"GET /status?id=t&code=304 HTTP/1.1\r\nConnection: close\r\n\r\n",
         304},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct rawhttp_response r;
        char v[32];
        int fd = rawhttp_connect(testsrv_port(srv));

        cr_assert_geq(fd, 0, "connect: %s", strerror(-fd));
        cr_assert_eq(rawhttp_send_str(fd, cases[i].head), 0);
        cr_assert_eq(rawhttp_read_response(fd, &r, false), 0, "case %zu", i);
        cr_expect_eq(r.status, cases[i].status, "case %zu:\n%s", i, r.head);
        const char *conn = rawhttp_header(&r, "Connection", v, sizeof v);
        cr_expect_str_eq(conn ? conn : "(none)", "close", "case %zu", i);
        cr_expect_eq(rawhttp_header(&r, "Content-Length", v, sizeof v) == NULL,
                     cases[i].status == 304, "case %zu:\n%s", i, r.head);
        cr_expect_eq(rawhttp_wait_close(fd), 0, "case %zu", i);
        free(r.body);
        close(fd);
    }
    cr_expect_eq(count("t"), 2); /* the 200 and the 304 */
}

Test(h2c, server_exits_when_stdin_closes)
{
    int st = -1;

    testsrv_close_stdin(srv);
    cr_assert_eq(testsrv_wait_exit(srv, WAIT_MS, &st), 0);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
}

/* --- TLS only
 * ------------------------------------------------------------------ */

SRV_TEST(tls, certificate_is_trusted_for_localhost_and_only_via_cainfo)
{
    char url[256], resolve[64];
    struct curl_slist *res = NULL;
    struct result r;

    /* By name: the DNS SAN, with the name pinned to 127.0.0.1. */
    snprintf(resolve, sizeof resolve, "localhost:%d:127.0.0.1",
             testsrv_port(srv));
    res = curl_slist_append(res, resolve);
    CURL *h = new_handle(&r);
    url_for(url, sizeof url, "localhost", "/ok?id=name");
    curl_easy_setopt(h, CURLOPT_RESOLVE, res);
    curl_easy_setopt(h, CURLOPT_URL, url);
    r.rc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    curl_slist_free_all(res);
    expect_rc(&r, CURLE_OK);
    cr_expect_eq(count("name"), 1);
    free_result(&r);

    /* Without our CA file the system store does not know it. */
    h = new_handle(&r);
    curl_easy_setopt(h, CURLOPT_CAINFO, NULL);
    curl_easy_setopt(h, CURLOPT_CAPATH, "/nonexistent");
    perform(h, &r, "/ok?id=untrusted");
    curl_easy_cleanup(h);
    expect_rc(&r, CURLE_PEER_FAILED_VERIFICATION);
    cr_expect_eq(count("untrusted"), 0);
    free_result(&r);
}

SRV_TEST(tls, goaway_below_a_second_stream_spares_the_first)
{
    struct result r;
    CURL *h = new_handle(&r);

    perform(h, &r, "/ok?id=first"); /* stream 1 */
    expect_rc(&r, CURLE_OK);
    perform(h, &r, "/goaway?id=second"); /* stream 3: GOAWAY(1) */
    curl_easy_cleanup(h);
    expect_rc(&r, CURLE_HTTP2);
    cr_expect_eq(count("first"), 1);
    cr_expect_eq(count("second"), 0);
    cr_expect_eq(refused("second"), 1);
    cr_expect_eq(streams(), 2);
    cr_expect_eq(conns(), 1);
    expect_log("first", "1 GET 0 cbf29ce484222325 - - h2:1");
    free_result(&r);
}

SRV_TEST(tls, goaway_after_makes_curl_open_a_new_connection)
{
    struct result r;
    CURL *h = new_handle(&r);

    perform(h, &r, "/goaway-after?id=ga1");
    expect_rc(&r, CURLE_OK);
    perform(h, &r, "/ok?id=ga2");
    curl_easy_cleanup(h);
    expect_rc(&r, CURLE_OK);
    cr_expect_eq(count("ga1"), 1);
    cr_expect_eq(count("ga2"), 1);
    cr_expect_eq(conns(), 2);
    expect_log("ga2", "1 GET 0 cbf29ce484222325 - - h2:1");
    free_result(&r);
}

/* Two transfers multiplexed on one connection (libcurl multi). Returns
 * when both are done or the deadline passed. */
static void run_multiplexed(const char *path_a, const char *path_b,
                            struct result *ra, struct result *rb)
{
    CURLM *m = curl_multi_init();
    CURL *a = new_handle(ra), *b = new_handle(rb);
    char url_a[256], url_b[256];
    int64_t deadline = testsrv_now_ms() + TRANSFER_MS;
    int running = 1;

    cr_assert_not_null(m);
    curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    url_for(url_a, sizeof url_a, "127.0.0.1", path_a);
    url_for(url_b, sizeof url_b, "127.0.0.1", path_b);
    curl_easy_setopt(a, CURLOPT_URL, url_a);
    curl_easy_setopt(b, CURLOPT_URL, url_b);
    /* b waits for a's connection instead of opening its own. */
    curl_easy_setopt(b, CURLOPT_PIPEWAIT, 1L);
    curl_multi_add_handle(m, a);
    curl_multi_add_handle(m, b);
    while (running && testsrv_now_ms() < deadline) {
        cr_assert_eq(curl_multi_perform(m, &running), CURLM_OK);
        if (running)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    cr_assert_eq(running, 0, "transfers still running at the deadline");
    for (CURLMsg *msg; (msg = curl_multi_info_read(m, &running));) {
        struct result *r = msg->easy_handle == a ? ra : rb;

        if (msg->msg == CURLMSG_DONE)
            r->rc = msg->data.result;
    }
    curl_easy_getinfo(a, CURLINFO_RESPONSE_CODE, &ra->status);
    curl_easy_getinfo(b, CURLINFO_RESPONSE_CODE, &rb->status);
    curl_multi_remove_handle(m, a);
    curl_multi_remove_handle(m, b);
    curl_easy_cleanup(a);
    curl_easy_cleanup(b);
    curl_multi_cleanup(m);
}

SRV_TEST(tls, concurrent_streams_share_one_connection)
{
    struct result ra, rb;

    run_multiplexed("/hold?id=m1&ms=200", "/hold?id=m2&ms=200", &ra, &rb);
    expect_rc(&ra, CURLE_OK);
    expect_rc(&rb, CURLE_OK);
    cr_expect_eq(ra.status, 200);
    cr_expect_eq(rb.status, 200);
    cr_expect_eq(count("m1"), 1);
    cr_expect_eq(count("m2"), 1);
    cr_expect_eq(streams(), 2);
    cr_expect_eq(conns(), 1);
    free_result(&ra);
    free_result(&rb);
}

SRV_TEST(tls, goaway_lets_a_lower_stream_finish_and_curl_resends_the_higher)
{
    struct result ra, rb;

    /* Stream 1 is held when stream 3 gets GOAWAY(last-stream-id 1). The
     * server finishes stream 1 before closing. libcurl 7.88.1 differs
     * from the single-stream case: with stream 1 keeping the session
     * alive, nghttp2 closes stream 3 as REFUSED_STREAM and libcurl
     * re-sends it on a fresh connection (stream 1 there), where /goaway
     * sends GOAWAY(0) and the transfer fails with CURLE_HTTP2. */
    run_multiplexed("/hold?id=low&ms=300", "/goaway?id=high", &ra, &rb);
    expect_rc(&ra, CURLE_OK);
    cr_expect_eq(ra.status, 200);
    expect_rc(&rb, CURLE_HTTP2);
    cr_expect_eq(count("low"), 1);
    cr_expect_eq(count("high"), 0);
    cr_expect_eq(refused("high"), 2);
    cr_expect_eq(streams(), 3);
    cr_expect_eq(conns(), 2);
    expect_idle();
    free_result(&ra);
    free_result(&rb);
}

/* --- TLS with ALPN http/1.1 only
 * ------------------------------------------------ */

REQUEST_TEST_IN(tls_http11, alpn_http11_only_serves_http11, .path = "/ok?id=h1",
                .status = 200, .http11 = true, .body = "ok", .count = 1,
                .conns = 1);

REQUEST_TEST_IN(tls_http11, status_304_has_neither_body_nor_content_length,
                .path = "/status?id=nm&code=304", .status = 304, .http11 = true,
                .body = "", .count = 1, .conns = 1);

/* The HTTP/2 fault paths do not exist there: 501, not executed. */
REQUEST_TEST_IN(tls_http11, http2_fault_paths_answer_501_unexecuted,
                .path = "/refuse?id=h1r", .status = 501, .http11 = true,
                .body = "this path needs HTTP/2\n", .conns = 1);
