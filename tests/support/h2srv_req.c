/* Requests and modes of retryd-h2srv, independent of the protocol: the
 * request id, query parameters, which path does what, and the response a
 * mode answers with. The HTTP/2 session (h2srv_session.c) and the HTTP/1.1
 * fallback (h2srv_http1.c) both fill a struct h2_request and act on the
 * struct h2_plan built here, so a path means the same thing on both. */
#include "h2srv.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t h2_fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

const char *h2_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 413:
        return "Content Too Large";
    case 425:
        return "Too Early";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Status";
    }
}

void h2_note(const struct h2_conn *c, const struct h2_request *r,
             const char *outcome)
{
    if (!c->srv->verbose)
        return;
    if (r->stream_id > 0)
        fprintf(stderr, "h2srv: conn=%lu stream=%d %s %s id=%s -> %s\n", c->num,
                (int)r->stream_id, r->method, r->path, r->id, outcome);
    else
        fprintf(stderr, "h2srv: conn=%lu %s %s %s id=%s -> %s\n", c->num,
                r->proto, r->method, r->path, r->id, outcome);
}

/* --- the request ---------------------------------------------------------- */

void h2_request_init(struct h2_request *r, const char *proto)
{
    *r = (struct h2_request){
        .path = "",
        .query = "",
        .content_length = -1,
        .id = "-",
        .proto = proto,
    };
}

void h2_request_free(struct h2_request *r)
{
    free(r->target);
    free(r->request_id_hdr);
    free(r->idempotency_key);
    free(r->authorization);
    free(r->body);
    r->target = r->request_id_hdr = r->idempotency_key = NULL;
    r->authorization = r->body = NULL;
}

/* Keeps the first occurrence of a header field we care about (a copy,
 * NUL-terminated). Returns 0 or -ENOMEM. */
int h2_request_keep(char **dst, const char *v, size_t len)
{
    if (*dst)
        return 0;
    *dst = strndup(v, len);
    return *dst ? 0 : -ENOMEM;
}

/* Copies the request target and splits path and query at the first '?'.
 * Returns 0, -EINVAL (empty, or a NUL inside), or -ENOMEM. */
int h2_request_set_target(struct h2_request *r, const char *t, size_t len)
{
    if (r->target || len == 0 || memchr(t, '\0', len))
        return -EINVAL;
    if (!(r->target = strndup(t, len)))
        return -ENOMEM;
    char *q = strchr(r->target, '?');
    if (q) {
        *q = '\0';
        r->query = q + 1;
    }
    r->path = r->target;
    return 0;
}

/* Appends body bytes, growing geometrically up to H2_BODY_MAX. Returns 0,
 * -EFBIG past the limit, or -ENOMEM. */
int h2_request_append_body(struct h2_request *r, const void *d, size_t n)
{
    if (n > H2_BODY_MAX - r->body_len)
        return -EFBIG;
    if (r->body_cap - r->body_len < n) {
        size_t cap = r->body_cap ? r->body_cap : 4096;
        while (cap - r->body_len < n)
            cap *= 2;
        if (cap > H2_BODY_MAX)
            cap = H2_BODY_MAX;
        char *p = realloc(r->body, cap);
        if (!p)
            return -ENOMEM;
        r->body = p;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, d, n);
    r->body_len += n;
    return 0;
}

/* --- query strings ------------------------------------------------------ */

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = tolower(ch);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Decodes %XX and '+' (a space, as in HTML forms: that is how test URLs
 * carry HTTP-dates). Fails on bad escapes, a decoded NUL, or no room. */
static int url_decode(const char *src, size_t len, char *out, size_t outlen)
{
    size_t o = 0;

    for (size_t i = 0; i < len; i++) {
        int ch = (unsigned char)src[i];

        if (ch == '+') {
            ch = ' ';
        } else if (ch == '%') {
            if (i + 2 >= len)
                return -1;
            int hi = hexval((unsigned char)src[i + 1]);
            int lo = hexval((unsigned char)src[i + 2]);
            if (hi < 0 || lo < 0 || (hi | lo) == 0)
                return -1;
            ch = hi * 16 + lo;
            i += 2;
        }
        if (o + 1 >= outlen)
            return -1;
        out[o++] = (char)ch;
    }
    out[o] = '\0';
    return 0;
}

/* Looks up `key` in the query string. Returns 1 with the decoded value in
 * out, 0 if absent, -1 if malformed or too long. */
static int query_get(const char *query, const char *key, char *out,
                     size_t outlen)
{
    size_t klen = strlen(key);
    const char *p = query;

    while (*p) {
        const char *end = p + strcspn(p, "&");
        const char *eq = memchr(p, '=', (size_t)(end - p));
        size_t nlen = (size_t)((eq ? eq : end) - p);

        if (nlen == klen && memcmp(p, key, klen) == 0) {
            const char *v = eq ? eq + 1 : end;

            return url_decode(v, (size_t)(end - v), out, outlen) < 0 ? -1 : 1;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* Integer parameter in [min, max], `def` when absent; -1 when invalid. */
static int query_long(const char *query, const char *key, long def, long min,
                      long max, long *out)
{
    char buf[32], *end;
    int r = query_get(query, key, buf, sizeof buf);
    long v;

    if (r < 0)
        return -1;
    if (r == 0) {
        *out = def;
        return 0;
    }
    if (!isdigit((unsigned char)buf[0]))
        return -1;
    errno = 0;
    v = strtol(buf, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Ids appear in control commands and stderr lines: 1..255 bytes, no
 * spaces, no control characters. */
static bool valid_id(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || *s == 0x7f)
            return false;
    return true;
}

/* The request id: the query parameter id=, else x-request-id, else "-".
 * Returns 0, or -EINVAL when it is malformed (answered 400). */
int h2_request_resolve_id(struct h2_request *r)
{
    int rc = query_get(r->query, "id", r->id, sizeof r->id);

    if (rc == 0) {
        const char *h = r->request_id_hdr ? r->request_id_hdr : "-";

        if (strlen(h) < sizeof r->id)
            strcpy(r->id, h);
        else
            rc = -1;
    }
    if (rc >= 0 && valid_id(r->id))
        return 0;
    strcpy(r->id, "?"); /* for stderr notes: a failed decode leaves junk */
    return -EINVAL;
}

/* Records the execution. Returns its ordinal among those of the id, or
 * -ENOMEM. */
long h2_request_execute(struct h2_server *srv, const struct h2_request *r)
{
    struct h2_exec e = {
        .method = r->method,
        .body_len = r->body_len,
        .body_fnv = h2_fnv1a64(r->body, r->body_len),
        .idempotency_key = r->idempotency_key,
        .authorization = r->authorization,
        .proto = r->proto,
        .stream_id = r->stream_id,
    };

    return h2_stats_execute(srv->stats, r->id, &e);
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

    if (query_long(r->query, "len", -1, 0, H2_BODY_MAX, &len) < 0)
        return bad_param(p, "len");
    if (len < 0)
        return h2_plan_text(p, 200, "ok");
    return plan_body(p, 200, NULL, (size_t)len);
}

static int plan_echo(const struct h2_request *r, struct h2_plan *p)
{
    return plan_body(p, 200, r->body ? r->body : "", r->body_len);
}

/* Header values come from the query: refuse controls, or a test could
 * inject header lines (HTTP/1.1) or invalid fields (HTTP/2) by accident. */
static bool header_safe(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
            return false;
    return true;
}

/* /status?code=NNN[&retry_after=V]: that final status (200-599). */
static int plan_status(const struct h2_request *r, struct h2_plan *p)
{
    char body[32];
    long code;
    int rc;

    if (query_long(r->query, "code", -1, 200, 599, &code) < 0 || code < 0)
        return bad_param(p, "code");
    rc = query_get(r->query, "retry_after", p->resp.retry_after,
                   sizeof p->resp.retry_after);
    if (rc < 0 || (rc > 0 && !header_safe(p->resp.retry_after))) {
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
    if (query_long(r->query, "ms", -1, 0, H2_HOLD_MAX_MS, &p->hold_ms) < 0)
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

    if (query_long(r->query, "len", 100, 0, H2_BODY_MAX, &len) < 0)
        return bad_param(p, "len");
    if (query_long(r->query, "sent", len / 2, 0, len, &sent) < 0)
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
 * body (RFC 9110 6.4.1); 204 no content-length either (RFC 9110 8.6).
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
    if (st == 204 || st == 304 || strcmp(r->method, "HEAD") == 0) {
        p->resp.no_body = true;
        p->resp.send_len = 0;
    }
    return 0;
}
