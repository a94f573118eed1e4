/* SPDX-License-Identifier: MIT */
/* HTTP/1.1 side of retryd-faultsrv: request parsing, responses and the
 * fault modes selected by the request path.
 *
 * Return convention of the request-reading functions: 0 on success, a
 * negative errno when the connection is unusable (client EOF, I/O error,
 * server stopping: close silently), or a positive HTTP status the server
 * answers with before closing the connection (400, 413, 431, ...). */
#include "faultsrv.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CHUNK_LINE_MAX 1024 /* chunk-size line, with extensions */
#define SEQ_MAX 64          /* codes in /seq?codes= */
#define SLOW_MAX_MS 60000L

/* The common fields (method, target, header values, id, body) are in
 * base; what follows is HTTP/1.1's own. */
struct request {
    struct srv_request base;
    struct srv_h1_head h1;
    unsigned long nth; /* 1 for the first request on its connection */
    /* The ordinal of this execution among those of its id, 1 for the
     * first (set by dispatch; 0 for modes that count themselves). */
    long execution;
};

/* --- reading a request -------------------------------------------------- */

/* Reads one line of the request head, charging it to *budget so the whole
 * head stays within FS_HEAD_MAX. */
static int read_head_line(struct srv_conn *c, size_t *budget, char **line,
                          size_t *len)
{
    int rc = srv_read_line(c, *budget, line, len);

    if (rc == -EMSGSIZE)
        return 431;
    if (rc < 0)
        return rc;
    *budget = *budget > *len + 2 ? *budget - *len - 2 : 0;
    return 0;
}

static int read_request_line(struct srv_conn *c, struct request *r,
                             size_t *budget)
{
    char *line;
    size_t len;
    int rc;

    /* RFC 9112 2.2: ignore empty lines before the request line. */
    do {
        rc = read_head_line(c, budget, &line, &len);
        if (rc)
            return rc;
    } while (len == 0);

    return srv_h1_request_line(&r->base, &r->h1, line);
}

static int read_headers(struct srv_conn *c, struct request *r, size_t *budget)
{
    for (;;) {
        char *line;
        size_t len;
        int rc = read_head_line(c, budget, &line, &len);

        if (rc)
            return rc;
        if (len == 0)
            break;
        if ((rc = srv_h1_field(&r->base, &r->h1, line)))
            return rc;
    }
    r->h1.keep_alive = srv_h1_keep_alive(&r->h1);
    return 0;
}

static int reserve(char **buf, size_t *cap, size_t need)
{
    size_t n = *cap ? *cap : 4096;
    char *p;

    if (need <= *cap)
        return 0;
    while (n < need)
        n *= 2;
    if (n > SRV_BODY_MAX) /* need <= SRV_BODY_MAX, checked by the caller */
        n = SRV_BODY_MAX;
    if (!(p = realloc(*buf, n)))
        return 500;
    *buf = p;
    *cap = n;
    return 0;
}

static int read_trailers(struct srv_conn *c)
{
    size_t budget = FS_HEAD_MAX;

    for (;;) {
        char *line;
        size_t len;
        int rc = read_head_line(c, &budget, &line, &len);

        if (rc || len == 0)
            return rc;
    }
}

/* RFC 9112 7.1: size [; extensions] CRLF data CRLF ... 0 CRLF trailers CRLF */
static int read_body_chunked(struct srv_conn *c, struct request *r)
{
    size_t cap = 0;

    for (;;) {
        char *line, *end;
        size_t len;
        int rc = srv_read_line(c, CHUNK_LINE_MAX, &line, &len);

        if (rc)
            return rc == -EMSGSIZE ? 400 : rc;
        if (!isxdigit((unsigned char)line[0]))
            return 400;
        errno = 0;
        unsigned long long size = strtoull(line, &end, 16);
        end += strspn(end, " \t");
        if (*end != '\0' && *end != ';')
            return 400;
        if (size == 0)
            return read_trailers(c);
        /* Refuse before reading: the declared size alone is over limit. */
        if (errno == ERANGE || size > SRV_BODY_MAX - r->base.body_len)
            return 413;
        if ((rc = reserve(&r->base.body, &cap, r->base.body_len + size)))
            return rc;
        if ((rc = srv_read_exact(c, r->base.body + r->base.body_len, size)))
            return rc;
        r->base.body_len += size;
        rc = srv_read_line(c, 3, &line, &len); /* the CRLF after the data */
        if (rc == -EMSGSIZE || (rc == 0 && len != 0))
            return 400;
        if (rc)
            return rc;
    }
}

static int read_body_length(struct srv_conn *c, struct request *r)
{
    size_t n = (size_t)r->base.content_length;
    int rc;

    if (r->base.content_length <= 0)
        return 0;
    if (!(r->base.body = malloc(n)))
        return 500;
    if ((rc = srv_read_exact(c, r->base.body, n)))
        return rc;
    r->base.body_len = n;
    return 0;
}

/* --- responses ---------------------------------------------------------- */

static void note(const struct srv_conn *c, const struct request *r,
                 const char *outcome)
{
    if (c->srv->verbose)
        fprintf(stderr, "faultsrv: %s %s id=%s -> %s\n", r->base.method,
                r->base.path, r->base.id, outcome);
}

/* Status line and header fields (see srv_h1_status_head). */
static int send_head(struct srv_conn *c, const struct request *r, int status,
                     const char *extra, size_t content_length)
{
    char head[1024], what[16];
    int n = srv_h1_status_head(head, sizeof head, status, content_length,
                               r->h1.keep_alive, extra);

    if (n < 0)
        return n;
    snprintf(what, sizeof what, "%d", status);
    note(c, r, what);
    return srv_write_all(c, head, (size_t)n);
}

static bool sends_body(const struct request *r, int status)
{
    return status != 204 && status != 304 &&
           strcmp(r->base.method, "HEAD") != 0;
}

static enum srv_next respond(struct srv_conn *c, const struct request *r,
                             int status, const char *extra, const void *body,
                             size_t len)
{
    if (send_head(c, r, status, extra, len) < 0)
        return SRV_NEXT_DONE;
    if (sends_body(r, status) && len > 0 && srv_write_all(c, body, len) < 0)
        return SRV_NEXT_DONE;
    return r->h1.keep_alive ? SRV_NEXT_KEEP : SRV_NEXT_CLOSE;
}

static enum srv_next respond_text(struct srv_conn *c, const struct request *r,
                                  int status, const char *extra,
                                  const char *text)
{
    return respond(c, r, status, extra, text, strlen(text));
}

static enum srv_next bad_param(struct srv_conn *c, const struct request *r,
                               const char *name)
{
    char msg[64];

    snprintf(msg, sizeof msg, "bad parameter: %s\n", name);
    return respond_text(c, r, 400, NULL, msg);
}

/* Answers with `status` and closes: for requests that were not executed
 * (malformed, over a limit). A negative rc means there is nobody to
 * answer. */
static enum srv_next fail(struct srv_conn *c, struct request *r, int rc)
{
    char msg[64];

    if (rc < 0)
        return SRV_NEXT_DONE;
    r->h1.keep_alive = false;
    snprintf(msg, sizeof msg, "%d %s\n", rc, srv_reason(rc));
    respond_text(c, r, rc, NULL, msg);
    return SRV_NEXT_CLOSE;
}

/* LOG tags an execution "expect-100" when its request said Expect:
 * 100-continue (a client that should not ask for it can be caught). */
static long record_execution(struct srv_conn *c, const struct request *r)
{
    return srv_stats_execute(c->srv->stats, &r->base,
                             r->h1.expect_continue ? "expect-100" : NULL);
}

/* --- modes ---------------------------------------------------------------
 * Each runs after the whole request was read, and after it was counted
 * (r->execution) unless it counts itself. */

typedef enum srv_next mode_fn(struct srv_conn *c, struct request *r);

/* len bytes: 'x' repeated, or "abc...z" repeated when `pattern` (lets a
 * streaming test check order and completeness). Caller frees. */
static char *filled(size_t len, bool pattern, size_t offset)
{
    char *b = malloc(len ? len : 1);

    for (size_t i = 0; b && i < len; i++)
        b[i] = pattern ? (char)('a' + (offset + i) % 26) : 'x';
    return b;
}

static enum srv_next mode_ok(struct srv_conn *c, struct request *r)
{
    long len;
    enum srv_next nx;
    char *body;

    if (srv_query_long(r->base.query, "len", -1, 0, SRV_BODY_MAX, &len) < 0)
        return bad_param(c, r, "len");
    if (len < 0)
        return respond_text(c, r, 200, NULL, "ok");
    if (!(body = filled((size_t)len, false, 0)))
        return fail(c, r, 500);
    nx = respond(c, r, 200, NULL, body, (size_t)len);
    free(body);
    return nx;
}

static enum srv_next mode_echo(struct srv_conn *c, struct request *r)
{
    return respond(c, r, 200, NULL, r->base.body, r->base.body_len);
}

static enum srv_next mode_close_after_read(struct srv_conn *c,
                                           struct request *r)
{
    note(c, r, "close");
    srv_close(c);
    return SRV_NEXT_DONE;
}

static enum srv_next mode_reset_after_read(struct srv_conn *c,
                                           struct request *r)
{
    note(c, r, "reset");
    srv_close_reset(c);
    return SRV_NEXT_DONE;
}

static enum srv_next mode_hold(struct srv_conn *c, struct request *r)
{
    long ms;

    if (srv_query_long(r->base.query, "ms", -1, 0, SRV_HOLD_MAX_MS, &ms) < 0)
        return bad_param(c, r, "ms");
    if (srv_wait_peer_close(c->fd, c->srv->stop_fd, (int)ms) != 0) {
        note(c, r, "client gone while held");
        srv_close(c);
        return SRV_NEXT_DONE;
    }
    return respond_text(c, r, 200, NULL, "ok");
}

static enum srv_next mode_partial(struct srv_conn *c, struct request *r)
{
    long len, sent;
    char *body;
    int rc;

    if (srv_query_long(r->base.query, "len", 100, 0, SRV_BODY_MAX, &len) < 0)
        return bad_param(c, r, "len");
    if (srv_query_long(r->base.query, "sent", len / 2, 0, len, &sent) < 0)
        return bad_param(c, r, "sent");
    if (!(body = filled((size_t)sent, false, 0)))
        return fail(c, r, 500);
    rc = send_head(c, r, 200, NULL, (size_t)len);
    if (rc == 0)
        rc = srv_write_all(c, body, (size_t)sent);
    free(body);
    if (rc == 0)
        srv_drain_output(c, 2000);
    note(c, r, "reset after partial body");
    srv_close_reset(c);
    return SRV_NEXT_DONE;
}

static enum srv_next mode_status(struct srv_conn *c, struct request *r)
{
    char ra[SRV_PARAM_MAX], extra[SRV_PARAM_MAX + 32] = "", body[32];
    long code;
    int rc;

    if (srv_query_long(r->base.query, "code", -1, 200, 599, &code) < 0 ||
        code < 0)
        return bad_param(c, r, "code");
    rc = srv_query_get(r->base.query, "retry_after", ra, sizeof ra);
    if (rc < 0 || (rc > 0 && !srv_header_safe(ra)))
        return bad_param(c, r, "retry_after");
    if (rc > 0)
        snprintf(extra, sizeof extra, "Retry-After: %s\r\n", ra);
    snprintf(body, sizeof body, "status %ld\n", code);
    return respond_text(c, r, (int)code, extra, body);
}

/* 200 "ok" with the reason phrase T, decoded and sent as it is: a hostile
 * server's control bytes (no CR or LF: those would end the line). */
static enum srv_next mode_reason(struct srv_conn *c, struct request *r)
{
    char text[SRV_PARAM_MAX], head[SRV_PARAM_MAX + 128];
    if (srv_query_get(r->base.query, "text", text, sizeof text) < 0 ||
        strpbrk(text, "\r\n") != NULL)
        return bad_param(c, r, "text");
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 200 %s\r\nContent-Length: 2\r\nConnection: "
                     "%s\r\n\r\nok",
                     text, r->h1.keep_alive ? "keep-alive" : "close");
    if (n < 0 || (size_t)n >= sizeof head ||
        srv_write_all(c, head, (size_t)n) < 0)
        return SRV_NEXT_DONE;
    return r->h1.keep_alive ? SRV_NEXT_KEEP : SRV_NEXT_CLOSE;
}

/* The status the control port's FLIP set (200 "ok" until then). */
static enum srv_next mode_flip(struct srv_conn *c, struct request *r)
{
    int code = atomic_load(&c->srv->flip_status);

    if (code == 200)
        return respond_text(c, r, 200, NULL, "ok");
    char body[32];
    snprintf(body, sizeof body, "status %d\n", code);
    return respond_text(c, r, code, NULL, body);
}

static enum srv_next mode_redirect(struct srv_conn *c, struct request *r)
{
    char to[SRV_PARAM_MAX], extra[SRV_PARAM_MAX + 32];
    int rc = srv_query_get(r->base.query, "to", to, sizeof to);
    long code;

    if (rc <= 0 || !srv_header_safe(to))
        return bad_param(c, r, "to");
    if (srv_query_long(r->base.query, "code", 302, 300, 399, &code) < 0)
        return bad_param(c, r, "code");
    snprintf(extra, sizeof extra, "Location: %s\r\n", to);
    return respond_text(c, r, (int)code, extra, "redirect\n");
}

/* A response that sets a cookie: "Set-Cookie: <set>" on 200 "ok", or on a
 * 302 to <to> when given, or with the status <code> (a cookie engine's
 * test: what a later request, attempt or the redirect's target is sent
 * back). */
static enum srv_next mode_cookie(struct srv_conn *c, struct request *r)
{
    char set[SRV_PARAM_MAX], to[SRV_PARAM_MAX];
    char extra[2 * SRV_PARAM_MAX + 64];
    int rs = srv_query_get(r->base.query, "set", set, sizeof set);
    int rt = srv_query_get(r->base.query, "to", to, sizeof to);

    if (rs <= 0 || !srv_header_safe(set))
        return bad_param(c, r, "set");
    long code;

    if (rt < 0 || (rt > 0 && !srv_header_safe(to)))
        return bad_param(c, r, "to");
    if (srv_query_long(r->base.query, "code", rt > 0 ? 302 : 200, 200, 599,
                       &code) < 0)
        return bad_param(c, r, "code");
    int n = snprintf(extra, sizeof extra, "Set-Cookie: %s\r\n", set);
    if (rt > 0)
        snprintf(extra + n, sizeof extra - (size_t)n, "Location: %s\r\n", to);
    return respond_text(c, r, (int)code, extra, rt > 0 ? "redirect\n" : "ok");
}

/* Header fields a parser can get wrong, for the result's header accessors:
 * an interim 1xx block with a field of its own (not the response's),
 * blanks around a value, an empty value, one name twice in two cases,
 * colons inside a value, and a chunked body whose trailer field is not a
 * response header. */
static enum srv_next mode_headers(struct srv_conn *c, struct request *r)
{
    static const char resp[] = "HTTP/1.1 102 Processing\r\n"
                               "X-Interim: yes\r\n"
                               "\r\n"
                               "HTTP/1.1 200 OK\r\n"
                               "X-Padded:  \t spaced  value \t \r\n"
                               "X-Empty:\r\n"
                               "X-Twice: first\r\n"
                               "x-twice: second\r\n"
                               "X-Colon: a:b: c\r\n"
                               "Transfer-Encoding: chunked\r\n"
                               "Trailer: X-Trailer\r\n"
                               "\r\n"
                               "2\r\nok\r\n"
                               "0\r\n"
                               "X-Trailer: t\r\n"
                               "\r\n";
    note(c, r, "200 with tricky headers");
    if (srv_write_all(c, resp, sizeof resp - 1) < 0)
        return SRV_NEXT_DONE;
    return r->h1.keep_alive ? SRV_NEXT_KEEP : SRV_NEXT_CLOSE;
}

static enum srv_next mode_once425(struct srv_conn *c, struct request *r)
{
    if (r->execution == 1)
        return respond_text(c, r, 425, NULL, "too early\n");
    return respond_text(c, r, 200, NULL, "ok");
}

/* "Bearer <token>"; the scheme is case-insensitive (RFC 9110 11.1). With
 * no token= parameter any non-empty bearer credential is accepted. */
static bool authorized(const char *header, const char *token)
{
    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return false;
    return token ? strcmp(header + 7, token) == 0 : header[7] != '\0';
}

static enum srv_next mode_auth(struct srv_conn *c, struct request *r)
{
    char token[SRV_PARAM_MAX];
    int rc = srv_query_get(r->base.query, "token", token, sizeof token);

    if (rc < 0)
        return bad_param(c, r, "token");
    if (!authorized(r->base.authorization, rc > 0 ? token : NULL)) {
        srv_stats_tally(c->srv->stats, r->base.id, SRV_TALLY_REJECTS);
        return respond_text(c, r, 401, "WWW-Authenticate: Bearer\r\n",
                            "unauthorized\n");
    }
    /* Only an accepted request is an execution. */
    if (record_execution(c, r) < 0)
        return fail(c, r, 500);
    return respond_text(c, r, 200, NULL, "ok");
}

static enum srv_next mode_seq(struct srv_conn *c, struct request *r)
{
    char list[SRV_PARAM_MAX], body[48], *save = NULL;
    long codes[SEQ_MAX];
    size_t k = 0;

    if (srv_query_get(r->base.query, "codes", list, sizeof list) <= 0)
        return bad_param(c, r, "codes");
    for (char *t = strtok_r(list, ",", &save); t;
         t = strtok_r(NULL, ",", &save))
        if (k == SEQ_MAX || srv_parse_long(t, 200, 599, &codes[k++]) < 0)
            return bad_param(c, r, "codes");
    if (k == 0)
        return bad_param(c, r, "codes");
    size_t n = (size_t)r->execution;
    long code = codes[n <= k ? n - 1 : k - 1];
    snprintf(body, sizeof body, "seq %zu %ld\n", n, code);
    return respond_text(c, r, (int)code, NULL, body);
}

static enum srv_next mode_drop_second(struct srv_conn *c, struct request *r)
{
    if (r->nth < 2)
        return respond_text(c, r, 200, NULL, "ok");
    note(c, r, "dropped (second request on the connection)");
    srv_close(c);
    return SRV_NEXT_DONE;
}

/* Hold the response @p ms milliseconds, or until the client leaves (a
 * hedged request's loser is stopped: its connection closes). */
static enum srv_next hold_then(struct srv_conn *c, struct request *r, long ms,
                               int code)
{
    if (ms > 0 && srv_wait_peer_close(c->fd, c->srv->stop_fd, (int)ms) != 0) {
        srv_stats_tally(c->srv->stats, r->base.id, FS_TALLY_GONE);
        note(c, r, "client gone while held");
        srv_close(c);
        return SRV_NEXT_DONE;
    }
    char body[48];
    snprintf(body, sizeof body, "execution %ld\n", r->execution);
    return respond_text(c, r, code, NULL, body);
}

/* The first n= (1) executions of a request stall (ms=, held until the
 * client leaves), then answer first= (200); every later one answers at
 * once, the k-th later one the k-th status of then= (200; the last one
 * repeats). Hedging's test: a hedge of a stalled request answers from its
 * own execution. */
static enum srv_next mode_stall_first(struct srv_conn *c, struct request *r)
{
    char list[SRV_PARAM_MAX], *save = NULL;
    long ms, first, n, code = 200;

    if (srv_query_long(r->base.query, "ms", 1000, 0, SRV_HOLD_MAX_MS, &ms) < 0)
        return bad_param(c, r, "ms");
    if (srv_query_long(r->base.query, "first", 200, 200, 599, &first) < 0)
        return bad_param(c, r, "first");
    if (srv_query_long(r->base.query, "n", 1, 0, 1000, &n) < 0)
        return bad_param(c, r, "n");
    if (r->execution <= n)
        return hold_then(c, r, ms, (int)first);
    int got = srv_query_get(r->base.query, "then", list, sizeof list);
    if (got < 0)
        return bad_param(c, r, "then");
    long k = r->execution - n;
    for (char *t = got > 0 ? strtok_r(list, ",", &save) : NULL; t && k > 0;
         t = strtok_r(NULL, ",", &save), k--)
        if (srv_parse_long(t, 200, 599, &code) < 0)
            return bad_param(c, r, "then");
    return respond_text(c, r, (int)code, NULL, "later execution\n");
}

/* A per-thread draw in [0, 1000), for /tail. */
static long draw_per_mille(void)
{
    static _Thread_local uint64_t x;
    if (x == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = ((uint64_t)ts.tv_nsec << 20 ^ (uint64_t)pthread_self()) | 1;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return (long)(x % 1000);
}

/* An upstream with a slow minority: each execution is held ms= times
 * SCALE %, or, with a chance of per_mille= in a thousand, stall_ms= when
 * that is longer. A brownout (SCALE over 100) slows every request, and
 * the stalls, a stuck backend's, are then no longer out of line. 200. */
static enum srv_next mode_tail(struct srv_conn *c, struct request *r)
{
    long ms, stall, per_mille;

    if (srv_query_long(r->base.query, "ms", 0, 0, SLOW_MAX_MS, &ms) < 0)
        return bad_param(c, r, "ms");
    if (srv_query_long(r->base.query, "stall_ms", 0, 0, SLOW_MAX_MS, &stall) <
        0)
        return bad_param(c, r, "stall_ms");
    if (srv_query_long(r->base.query, "per_mille", 0, 0, 1000, &per_mille) < 0)
        return bad_param(c, r, "per_mille");
    long hold = ms * atomic_load(&c->srv->latency_scale) / 100;
    if (draw_per_mille() < per_mille && stall > hold)
        hold = stall;
    return hold_then(c, r, hold, 200);
}

static enum srv_next mode_interim_then_close(struct srv_conn *c,
                                             struct request *r)
{
    static const char interim[] =
        "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n";

    note(c, r, "103 then close");
    srv_write_all(c, interim, sizeof interim - 1);
    srv_close(c);
    return SRV_NEXT_DONE;
}

static enum srv_next mode_slow_body(struct srv_conn *c, struct request *r)
{
    long len, chunk, ms;
    char *buf;
    int rc;

    if (srv_query_long(r->base.query, "len", 64, 0, SRV_BODY_MAX, &len) < 0)
        return bad_param(c, r, "len");
    if (srv_query_long(r->base.query, "chunk", 8, 1, SRV_BODY_MAX, &chunk) < 0)
        return bad_param(c, r, "chunk");
    if (srv_query_long(r->base.query, "ms", 10, 0, SLOW_MAX_MS, &ms) < 0)
        return bad_param(c, r, "ms");
    if ((rc = send_head(c, r, 200, NULL, (size_t)len)) < 0)
        return SRV_NEXT_DONE;
    if (!sends_body(r, 200))
        return r->h1.keep_alive ? SRV_NEXT_KEEP : SRV_NEXT_CLOSE;
    for (long off = 0; off < len && rc == 0; off += chunk) {
        size_t m = (size_t)(len - off < chunk ? len - off : chunk);

        /* Pause between chunks, but stop as soon as the client leaves. */
        if (off > 0 &&
            srv_wait_peer_close(c->fd, c->srv->stop_fd, (int)ms) != 0)
            return SRV_NEXT_DONE;
        if (!(buf = filled(m, true, (size_t)off)))
            return SRV_NEXT_DONE;
        rc = srv_write_all(c, buf, m);
        free(buf);
    }
    if (rc < 0)
        return SRV_NEXT_DONE;
    return r->h1.keep_alive ? SRV_NEXT_KEEP : SRV_NEXT_CLOSE;
}

static const struct mode {
    const char *path;
    mode_fn *fn;
    bool counts; /* record the execution before running fn */
} modes[] = {
    {"/ok", mode_ok, true},
    {"/echo", mode_echo, true},
    {"/close-after-read", mode_close_after_read, true},
    {"/reset-after-read", mode_reset_after_read, true},
    {"/hold", mode_hold, true},
    {"/partial", mode_partial, true},
    {"/status", mode_status, true},
    {"/flip", mode_flip, true},
    {"/reason", mode_reason, true},
    {"/redirect", mode_redirect, true},
    {"/cookie", mode_cookie, true},
    {"/once425", mode_once425, true},
    {"/headers", mode_headers, true},
    {"/auth", mode_auth, false},
    {"/seq", mode_seq, true},
    {"/drop-second", mode_drop_second, true},
    {"/interim-then-close", mode_interim_then_close, true},
    {"/slow-body", mode_slow_body, true},
    {"/stall-first", mode_stall_first, true},
    {"/tail", mode_tail, true},
};

static enum srv_next dispatch(struct srv_conn *c, struct request *r)
{
    const struct mode *m = NULL;

    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(r->base.path, modes[i].path) == 0) {
            m = &modes[i];
            break;
        }
    /* Count first: whatever the client observes next, the counters
     * already include this execution. Unknown paths count too. */
    if ((!m || m->counts) && (r->execution = record_execution(c, r)) < 0)
        return fail(c, r, 500);
    if (!m)
        return respond_text(c, r, 404, NULL, "not found\n");
    return m->fn(c, r);
}

/* --- connection loop ---------------------------------------------------- */

static enum srv_next serve_one(struct srv_conn *c, struct request *r)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    size_t budget = FS_HEAD_MAX;
    int rc = read_request_line(c, r, &budget);

    if (rc == 0)
        rc = read_headers(c, r, &budget);
    if (rc == 0)
        rc = srv_request_resolve_id(&r->base) < 0 ? 400 : 0;
    if (rc)
        return fail(c, r, rc);
    /* Not executed: the body (if any) stays unread. With unread body bytes
     * already received, Linux turns this close into a RST. */
    if (strcmp(r->base.path, "/close-before-read") == 0) {
        note(c, r, "close before reading the body");
        srv_close(c);
        return SRV_NEXT_DONE;
    }
    if (r->base.content_length > SRV_BODY_MAX)
        return fail(c, r, 413); /* before any 100 Continue */
    if ((r->h1.chunked || r->base.content_length > 0) &&
        r->h1.expect_continue && srv_write_all(c, cont, sizeof cont - 1) < 0)
        return SRV_NEXT_DONE;
    rc = r->h1.chunked ? read_body_chunked(c, r) : read_body_length(c, r);
    if (rc)
        return fail(c, r, rc);
    return dispatch(c, r);
}

/* Serves requests on one connection until it closes; closes the socket. */
void fs_http_serve(struct srv_conn *c)
{
    for (unsigned long nth = 1;; nth++) {
        struct request r = {.nth = nth};
        enum srv_next nx;

        srv_request_init(&r.base);
        nx = serve_one(c, &r);
        srv_request_free(&r.base);
        if (nx == SRV_NEXT_KEEP)
            continue;
        if (nx == SRV_NEXT_CLOSE)
            srv_close_lingering(c);
        else
            srv_close(c);
        return;
    }
}
