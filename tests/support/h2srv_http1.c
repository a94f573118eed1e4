/* SPDX-License-Identifier: MIT */
/* HTTP/1.1 fallback of retryd-h2srv.
 *
 * Only there so that a client's downgrade can complete: after
 * RST_STREAM(HTTP_1_1_REQUIRED) libcurl reconnects with HTTP/1.1 (plain
 * HTTP/1.1 on the h2c port, ALPN http/1.1 over TLS), and with
 * --http11-only the TLS server offers nothing else. It serves the paths
 * that make sense without HTTP/2 (/ok, /echo, /status, /hold,
 * /http11-required, unknown paths: 404), counted like over HTTP/2; the
 * HTTP/2 fault paths answer 501 and are not executed. Bodies need a
 * Content-Length (chunked: 501); Expect: 100-continue is honoured. The
 * thorough HTTP/1.1 fault server is retryd-faultsrv. */
#include "h2srv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- reading ------------------------------------------------------------- */

/* Finds the end of the request head (an empty line) in the buffered
 * input; returns its length including the terminator, or 0. */
static size_t head_length(const struct h2_conn *c)
{
    const char *p = (const char *)c->in + c->in_pos;
    size_t avail = c->in_len - c->in_pos;

    for (size_t i = 0; i + 1 < avail; i++) {
        if (p[i] != '\n')
            continue;
        if (p[i + 1] == '\n')
            return i + 2;
        if (i + 2 < avail && p[i + 1] == '\r' && p[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* Waits for a whole head. Returns its length, 0 on a clean EOF between
 * requests, a negative errno, or -EMSGSIZE over H2_HEAD_MAX. */
static ssize_t read_head(struct h2_conn *c)
{
    for (;;) {
        /* RFC 9112 2.2: ignore empty lines before the request line. */
        while (c->in_pos < c->in_len &&
               (c->in[c->in_pos] == '\r' || c->in[c->in_pos] == '\n'))
            c->in_pos++;
        size_t len = head_length(c);
        if (len > H2_HEAD_MAX || (!len && c->in_len - c->in_pos >= H2_HEAD_MAX))
            return -EMSGSIZE;
        if (len)
            return (ssize_t)len;
        ssize_t r = h2_io_fill(c, -1);
        if (r == 0)
            return c->in_len == c->in_pos ? 0 : -EPROTO;
        if (r < 0)
            return r;
    }
}

/* Splits off the next line (LF or CR LF), NUL-terminated in place. */
static char *next_line(char **p)
{
    char *line = *p, *nl = strchr(line, '\n');

    if (!nl)
        return NULL;
    *nl = '\0';
    *p = nl + 1;
    if (nl > line && nl[-1] == '\r')
        nl[-1] = '\0';
    return line;
}

/* Parses the head (len bytes at c->in + c->in_pos) and consumes it.
 * Returns 0 or an HTTP status to answer with. */
static int parse_head(struct h2_conn *c, size_t len, struct h2_request *r,
                      struct srv_h1_head *h)
{
    char *p = (char *)c->in + c->in_pos, *line;
    int rc;

    if (memchr(p, '\0', len))
        return 400;
    p[len - 1] = '\0'; /* the final LF: the head becomes a C string */
    c->in_pos += len;
    if (!(line = next_line(&p)))
        return 400;
    if ((rc = srv_h1_request_line(&r->base, h, line)) != 0)
        return rc;
    while ((line = next_line(&p)) && *line)
        if ((rc = srv_h1_field(&r->base, h, line)) != 0)
            return rc;
    h->keep_alive = srv_h1_keep_alive(h);
    return 0;
}

/* Reads a Content-Length body into r. 0 or a negative errno. */
static int read_body(struct h2_conn *c, struct h2_request *r)
{
    size_t left =
        r->base.content_length > 0 ? (size_t)r->base.content_length : 0;

    while (left > 0) {
        size_t avail = c->in_len - c->in_pos;

        if (avail == 0) {
            ssize_t n = h2_io_fill(c, -1);
            if (n <= 0)
                return n == 0 ? -EPROTO : (int)n;
            continue;
        }
        size_t take = avail < left ? avail : left;
        int rc = h2_request_append_body(r, c->in + c->in_pos, take);
        if (rc < 0)
            return rc;
        c->in_pos += take;
        left -= take;
    }
    return 0;
}

/* --- answering ----------------------------------------------------------- */

static enum srv_next respond(struct h2_conn *c, const struct srv_h1_head *h,
                             const struct h2_response *resp)
{
    char head[SRV_PARAM_MAX + 256], ra[SRV_PARAM_MAX + 32] = "";
    int n;

    if (resp->retry_after[0])
        snprintf(ra, sizeof ra, "Retry-After: %s\r\n", resp->retry_after);
    n = srv_h1_status_head(head, sizeof head, resp->status,
                           resp->content_length, h->keep_alive, ra);
    if (n < 0 || h2_io_write_all(c, head, (size_t)n) < 0)
        return SRV_NEXT_DONE;
    if (!resp->no_body && resp->send_len > 0 &&
        h2_io_write_all(c, resp->body, resp->send_len) < 0)
        return SRV_NEXT_DONE;
    return h->keep_alive ? SRV_NEXT_KEEP : SRV_NEXT_CLOSE;
}

/* Answers a request that is not executed; `close` also ends the
 * connection (the request was malformed: the stream cannot be trusted). */
static enum srv_next answer_text(struct h2_conn *c, struct srv_h1_head *h,
                                 const struct h2_request *r, int status,
                                 const char *text, bool close)
{
    struct h2_plan p = {.after = AFTER_RESPOND};
    char what[32];
    enum srv_next nx;

    if (close)
        h->keep_alive = false;
    snprintf(what, sizeof what, "%d, not executed", status);
    h2_note(c, r, what);
    if (h2_plan_text(&p, status, text) < 0)
        return SRV_NEXT_DONE;
    p.resp.no_body = strcmp(r->base.method, "HEAD") == 0;
    nx = respond(c, h, &p.resp);
    h2_plan_free(&p);
    return nx;
}

/* Executes the request (count first) and answers its plan. */
static enum srv_next execute(struct h2_conn *c, struct srv_h1_head *h,
                             const struct h2_mode *m, struct h2_request *r)
{
    struct h2_plan p;
    enum srv_next nx;

    if (h2_request_execute(c->srv, r) < 0 || h2_mode_plan(m, r, &p) < 0)
        return answer_text(c, h, r, 500, "out of memory\n", true);
    if (p.after == AFTER_HOLD) {
        /* Wait, but notice a client that leaves meanwhile. */
        int gone = h2_io_wait_peer_close(c, (int)p.hold_ms);
        if (gone != 0) {
            h2_note(c, r, "client gone while held");
            h2_plan_free(&p);
            return SRV_NEXT_DONE;
        }
    }
    h2_note(c, r, "executed, answered");
    nx = respond(c, h, &p.resp);
    h2_plan_free(&p);
    return nx;
}

static enum srv_next serve_one(struct h2_conn *c, struct h2_request *r)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    struct srv_h1_head h = {.keep_alive = false};
    ssize_t len = read_head(c);
    int rc;

    if (len == -EMSGSIZE)
        return answer_text(c, &h, r, 431, "request head too large\n", true);
    if (len <= 0)
        return SRV_NEXT_DONE;
    if ((rc = parse_head(c, (size_t)len, r, &h)) != 0) {
        char msg[64];

        snprintf(msg, sizeof msg, "%d %s\n", rc, srv_reason(rc));
        return answer_text(c, &h, r, rc, msg, true);
    }
    if (srv_request_resolve_id(&r->base) < 0)
        return answer_text(c, &h, r, 400, "bad request id\n", true);
    if (h.chunked)
        return answer_text(c, &h, r, 501, "chunked bodies unsupported\n", true);
    if (r->base.content_length > SRV_BODY_MAX)
        return answer_text(c, &h, r, 413, "content too large\n", true);
    const struct h2_mode *m = h2_mode_find(r->base.path);
    if (!m->http1)
        /* Unread body bytes would be taken for the next request. */
        return answer_text(c, &h, r, 501, "this path needs HTTP/2\n",
                           r->base.content_length > 0);
    if (r->base.content_length > 0 && h.expect_continue &&
        h2_io_write_all(c, cont, sizeof cont - 1) < 0)
        return SRV_NEXT_DONE;
    if ((rc = read_body(c, r)) < 0)
        return rc == -ENOMEM
                   ? answer_text(c, &h, r, 500, "out of memory\n", true)
                   : SRV_NEXT_DONE;
    return execute(c, &h, m, r);
}

/* Serves requests until the connection ends. Returns true when it
 * should be closed gracefully. */
bool h2_http1_serve(struct h2_conn *c)
{
    for (;;) {
        struct h2_request r;

        h2_request_init(&r, "http/1.1");
        enum srv_next nx = serve_one(c, &r);
        srv_request_free(&r.base);
        if (nx != SRV_NEXT_KEEP)
            return nx == SRV_NEXT_CLOSE;
    }
}
