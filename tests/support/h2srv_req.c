/* SPDX-License-Identifier: MIT */
/* Requests and modes of retryd-h2srv, independent of the protocol: the
 * request id, query parameters, which path does what, and the response a
 * mode answers with. The HTTP/2 session (h2srv_session.c) and the HTTP/1.1
 * fallback (h2srv_http1.c) both fill a struct h2_request and act on the
 * struct h2_plan built here, so a path means the same thing on both. */
#include "h2srv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void h2_note(const struct h2_conn *c, const struct h2_request *r,
             const char *outcome)
{
    if (!c->srv->verbose)
        return;
    if (r->stream_id > 0)
        fprintf(stderr, "h2srv: conn=%lu stream=%d %s %s id=%s -> %s\n", c->num,
                (int)r->stream_id, r->base.method, r->base.path, r->base.id,
                outcome);
    else
        fprintf(stderr, "h2srv: conn=%lu %s %s %s id=%s -> %s\n", c->num,
                r->proto, r->base.method, r->base.path, r->base.id, outcome);
}

/* --- the request ---------------------------------------------------------- */

/* A fresh request; free it with srv_request_free(&r->base). */
void h2_request_init(struct h2_request *r, const char *proto)
{
    *r = (struct h2_request){.proto = proto};
    srv_request_init(&r->base);
}

/* Appends body bytes, growing geometrically up to SRV_BODY_MAX. Returns 0,
 * -EFBIG past the limit, or -ENOMEM. */
int h2_request_append_body(struct h2_request *r, const void *d, size_t n)
{
    if (n > SRV_BODY_MAX - r->base.body_len)
        return -EFBIG;
    if (r->body_cap - r->base.body_len < n) {
        size_t cap = r->body_cap ? r->body_cap : 4096;
        while (cap - r->base.body_len < n)
            cap *= 2;
        if (cap > SRV_BODY_MAX)
            cap = SRV_BODY_MAX;
        char *p = realloc(r->base.body, cap);
        if (!p)
            return -ENOMEM;
        r->base.body = p;
        r->body_cap = cap;
    }
    memcpy(r->base.body + r->base.body_len, d, n);
    r->base.body_len += n;
    return 0;
}

/* Records the execution, with the protocol as LOG's tag: "h2:<stream>"
 * or "http/1.1". Returns its ordinal among those of the id, or -ENOMEM. */
long h2_request_execute(struct srv *srv, const struct h2_request *r)
{
    char tag[24];

    if (r->stream_id > 0)
        snprintf(tag, sizeof tag, "%s:%" PRId32, r->proto, r->stream_id);
    else
        snprintf(tag, sizeof tag, "%s", r->proto);
    return srv_stats_execute(srv->stats, &r->base, tag);
}

/* --- plans: what a path answers after its execution --------------------- */

void h2_plan_free(struct h2_plan *p)
{
    free(p->resp.body);
    p->resp.body = NULL;
}

/* A response whose body is `len` bytes of 'x' (or a copy of `text`). */
static int plan_body(struct h2_plan *p, int status, const char *text,
                     size_t len)
{
    p->resp.status = status;
    p->resp.body = malloc(len ? len : 1);
    if (!p->resp.body)
        return -ENOMEM;
    if (text)
        memcpy(p->resp.body, text, len);
    else
        memset(p->resp.body, 'x', len);
    p->resp.send_len = p->resp.content_length = len;
    return 0;
}

int h2_plan_text(struct h2_plan *p, int status, const char *text)
{
    return plan_body(p, status, text, strlen(text));
}

static int bad_param(struct h2_plan *p, const char *name)
{
    char msg[64];

    snprintf(msg, sizeof msg, "bad parameter: %s\n", name);
    p->after = AFTER_RESPOND;
    return h2_plan_text(p, 400, msg);
}

/* /ok[?len=N]: 200, "ok" or N bytes of 'x'. Also what /refuse-once (once
 * past its refusal) and /http11-required (over HTTP/1.1) answer. */
static int plan_ok(const struct h2_request *r, struct h2_plan *p)
{
    long len;

    if (srv_query_long(r->base.query, "len", -1, 0, SRV_BODY_MAX, &len) < 0)
        return bad_param(p, "len");
    if (len < 0)
        return h2_plan_text(p, 200, "ok");
    return plan_body(p, 200, NULL, (size_t)len);
}

static int plan_echo(const struct h2_request *r, struct h2_plan *p)
{
    return plan_body(p, 200, r->base.body ? r->base.body : "",
                     r->base.body_len);
}

/* /status?code=NNN[&retry_after=V]: that final status (200-599). */
static int plan_status(const struct h2_request *r, struct h2_plan *p)
{
    char body[32];
    long code;
    int rc;

    if (srv_query_long(r->base.query, "code", -1, 200, 599, &code) < 0 ||
        code < 0)
        return bad_param(p, "code");
    rc = srv_query_get(r->base.query, "retry_after", p->resp.retry_after,
                       sizeof p->resp.retry_after);
    if (rc < 0 || (rc > 0 && !srv_header_safe(p->resp.retry_after))) {
        p->resp.retry_after[0] = '\0';
        return bad_param(p, "retry_after");
    }
    snprintf(body, sizeof body, "status %ld\n", code);
    return h2_plan_text(p, (int)code, body);
}

/* /hold[?ms=N]: "ok" after N ms; without ms= only when the client leaves
 * (then no answer at all). */
static int plan_hold(const struct h2_request *r, struct h2_plan *p)
{
    if (srv_query_long(r->base.query, "ms", -1, 0, SRV_HOLD_MAX_MS,
                       &p->hold_ms) < 0)
        return bad_param(p, "ms");
    p->after = AFTER_HOLD;
    return h2_plan_text(p, 200, "ok");
}

static int plan_reset_after_read(const struct h2_request *r, struct h2_plan *p)
{
    (void)r;
    p->after = AFTER_RESET;
    return 0;
}

/* /reset-after-headers?len=N&sent=M: HEADERS with content-length N, M
 * bytes of DATA, then RST_STREAM(INTERNAL_ERROR). Defaults 100 and N/2. */
static int plan_reset_after_headers(const struct h2_request *r,
                                    struct h2_plan *p)
{
    long len, sent;
    int rc;

    if (srv_query_long(r->base.query, "len", 100, 0, SRV_BODY_MAX, &len) < 0)
        return bad_param(p, "len");
    if (srv_query_long(r->base.query, "sent", len / 2, 0, len, &sent) < 0)
        return bad_param(p, "sent");
    if ((rc = plan_body(p, 200, NULL, (size_t)sent)) < 0)
        return rc;
    p->resp.content_length = (size_t)len;
    p->after = AFTER_RESET_PARTIAL;
    return 0;
}

static int plan_goaway_after(const struct h2_request *r, struct h2_plan *p)
{
    int rc = plan_ok(r, p);

    if (rc == 0 && p->resp.status == 200)
        p->after = AFTER_GOAWAY;
    return rc;
}

static int plan_not_found(const struct h2_request *r, struct h2_plan *p)
{
    (void)r;
    return h2_plan_text(p, 404, "not found\n");
}

/* Paths whose `early` is not EARLY_NONE are decided when the request
 * headers arrive; the others are executed once the request is complete
 * (END_STREAM) and then run their plan. */
static const struct h2_mode modes[] = {
    {"/ok", EARLY_NONE, true, plan_ok},
    {"/echo", EARLY_NONE, true, plan_echo},
    {"/status", EARLY_NONE, true, plan_status},
    {"/hold", EARLY_NONE, true, plan_hold},
    {"/refuse", EARLY_REFUSE, false, plan_ok},
    {"/refuse-once", EARLY_REFUSE_ONCE, false, plan_ok},
    {"/goaway", EARLY_GOAWAY, false, plan_ok},
    {"/goaway-after", EARLY_NONE, false, plan_goaway_after},
    {"/reset-after-read", EARLY_NONE, false, plan_reset_after_read},
    {"/reset-after-headers", EARLY_NONE, false, plan_reset_after_headers},
    {"/http11-required", EARLY_HTTP11, true, plan_ok},
};

static const struct h2_mode not_found = {"", EARLY_NONE, true, plan_not_found};

/* Never NULL: unknown paths get a mode that answers 404 (counted). */
const struct h2_mode *h2_mode_find(const char *path)
{
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(path, modes[i].path) == 0)
            return &modes[i];
    return &not_found;
}

/* Builds the plan of an executed request. HEAD, 204 and 304 carry no
 * body (RFC 9110 6.4.1); 204 and 304 no content-length either (RFC 9110
 * 8.6: on 304 it would have to be that of the 200 not sent).
 * Returns 0 or -ENOMEM (then p holds nothing to free). */
int h2_mode_plan(const struct h2_mode *m, const struct h2_request *r,
                 struct h2_plan *p)
{
    int rc;

    *p = (struct h2_plan){.after = AFTER_RESPOND, .hold_ms = -1};
    if ((rc = m->plan(r, p)) < 0) {
        h2_plan_free(p);
        return rc;
    }
    int st = p->resp.status;
    if (st == 204 || st == 304 || strcmp(r->base.method, "HEAD") == 0) {
        p->resp.no_body = true;
        p->resp.send_len = 0;
    }
    return 0;
}
