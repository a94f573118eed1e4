/* SPDX-License-Identifier: MIT */
/* Requests as the test servers share them, whatever the protocol: the
 * common fields (struct srv_request) and the header fields that fill
 * them, query parameters (a path's configuration: /ok?len=N,
 * /status?code=503, ...), the request id, reason phrases; and HTTP/1.1
 * heads, which both servers parse (faultsrv always, h2srv after a
 * downgrade).
 *
 * The srv_request functions return negative errnos; the query and id
 * parsers 0 (or 1 for "found") on success and -1 for input the server
 * answers with 400; the HTTP/1.1 parsers 0 or the status to answer
 * with. */
#include "srv_common.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* --- the request ---------------------------------------------------------- */

void srv_request_init(struct srv_request *r)
{
    *r = (struct srv_request){
        .path = "",
        .query = "",
        .content_length = -1,
        .id = "-",
    };
}

void srv_request_free(struct srv_request *r)
{
    free(r->target);
    free(r->request_id_hdr);
    free(r->idempotency_key);
    free(r->authorization);
    free(r->cookie);
    free(r->body);
    r->target = r->request_id_hdr = r->idempotency_key = NULL;
    r->authorization = r->cookie = r->body = NULL;
}

/* Copies the request target and splits path and query at the first '?'.
 * Returns 0, -EINVAL (a second target, empty, or a NUL inside), or
 * -ENOMEM. */
int srv_request_set_target(struct srv_request *r, const char *t, size_t len)
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

static bool name_is(const char *name, size_t len, const char *lit)
{
    return len == strlen(lit) && strncasecmp(name, lit, len) == 0;
}

/* Content-Length: digits only. 18 digits cannot overflow; a longer value
 * is over any limit, stored as SRV_BODY_MAX + 1. */
static int content_length(struct srv_request *r, const char *v, size_t len)
{
    long long n = 0;

    if (len == 0 || strspn(v, "0123456789") < len)
        return -EINVAL;
    if (len > 18) {
        r->content_length = (long long)SRV_BODY_MAX + 1;
        return -EFBIG;
    }
    for (size_t i = 0; i < len; i++)
        n = n * 10 + (v[i] - '0');
    if (r->content_length >= 0 && r->content_length != n)
        return -EINVAL; /* conflicting lengths: request smuggling territory */
    r->content_length = n;
    return 0;
}

/* Takes the header fields every server needs (names case-insensitive):
 * Content-Length, and a copy of the first X-Request-Id, Idempotency-Key
 * Authorization and Cookie. Returns 1 if the field was one of them, 0 if not,
 * -ENOMEM, -EINVAL for a malformed or conflicting Content-Length, or
 * -EFBIG for one too long to read (then content_length is over
 * SRV_BODY_MAX: the server may answer 413 now or when it checks). */
int srv_request_field(struct srv_request *r, const char *name, size_t namelen,
                      const char *v, size_t len)
{
    char **dst;

    if (name_is(name, namelen, "content-length")) {
        int rc = content_length(r, v, len);

        return rc < 0 ? rc : 1;
    }
    if (name_is(name, namelen, "x-request-id"))
        dst = &r->request_id_hdr;
    else if (name_is(name, namelen, "idempotency-key"))
        dst = &r->idempotency_key;
    else if (name_is(name, namelen, "authorization"))
        dst = &r->authorization;
    else if (name_is(name, namelen, "cookie"))
        dst = &r->cookie;
    else
        return 0;
    if (!*dst && !(*dst = strndup(v, len)))
        return -ENOMEM;
    return 1;
}

/* --- query strings -------------------------------------------------------- */

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
int srv_query_get(const char *query, const char *key, char *out, size_t outlen)
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

/* A decimal integer in [min, max]: digits only, no sign, no spaces. */
int srv_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    long v;

    if (!isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Integer parameter in [min, max], `def` when absent; -1 when invalid. */
int srv_query_long(const char *query, const char *key, long def, long min,
                   long max, long *out)
{
    char buf[32];
    int r = srv_query_get(query, key, buf, sizeof buf);

    if (r < 0)
        return -1;
    if (r == 0) {
        *out = def;
        return 0;
    }
    return srv_parse_long(buf, min, max, out);
}

/* --- request ids and header values from the query ------------------------- */

/* Ids appear in control commands and stderr lines: 1..SRV_ID_MAX bytes,
 * no spaces, no control characters. */
static bool valid_id(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || *s == 0x7f)
            return false;
    return true;
}

/* Sets r->id: the query parameter id=, else the X-Request-Id header,
 * else "-". Returns 0, or -1 when it is malformed (answered 400); r->id is
 * then "?" (a failed decode leaves junk, and stderr notes print it). */
int srv_request_resolve_id(struct srv_request *r)
{
    int rc = srv_query_get(r->query, "id", r->id, sizeof r->id);

    if (rc == 0) {
        const char *h = r->request_id_hdr ? r->request_id_hdr : "-";

        if (strlen(h) < sizeof r->id)
            strcpy(r->id, h);
        else
            rc = -1;
    }
    if (rc >= 0 && valid_id(r->id))
        return 0;
    strcpy(r->id, "?");
    return -1;
}

/* Header values that come from the query: refuse controls, or a test
 * could inject header lines (HTTP/1.1) or invalid fields (HTTP/2) by
 * accident. */
bool srv_header_safe(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
            return false;
    return true;
}

/* --- reason phrases ------------------------------------------------------- */

/* For HTTP/1.1 status lines and stderr notes. */
const char *srv_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 103:
        return "Early Hints";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 421:
        return "Misdirected Request";
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

/* --- HTTP/1.1 heads ------------------------------------------------------- */

/* The request line "<method> <target> HTTP/1.1" (or HTTP/1.0), without its
 * line end. Returns 0, or 400 (malformed), 505 (another HTTP version) or
 * 500 (out of memory). */
int srv_h1_request_line(struct srv_request *r, struct srv_h1_head *h,
                        char *line)
{
    char *target, *version, *sp = strchr(line, ' ');
    int rc;

    if (!sp || sp == line || (size_t)(sp - line) >= sizeof r->method)
        return 400;
    memcpy(r->method, line, (size_t)(sp - line));
    r->method[sp - line] = '\0';
    target = sp + 1;
    if (!(sp = strchr(target, ' ')) || sp == target)
        return 400;
    *sp = '\0';
    version = sp + 1;
    if (strcmp(version, "HTTP/1.1") == 0)
        h->http10 = false;
    else if (strcmp(version, "HTTP/1.0") == 0)
        h->http10 = true;
    else
        return strncmp(version, "HTTP/", 5) == 0 ? 505 : 400;
    rc = srv_request_set_target(r, target, strlen(target));
    return rc == -ENOMEM ? 500 : rc < 0 ? 400 : 0;
}

/* Connection is a token list (RFC 9110 7.6.1): "close, TE" closes too. */
static void connection_tokens(struct srv_h1_head *h, char *v)
{
    char *save = NULL;

    for (char *t = strtok_r(v, ", \t", &save); t;
         t = strtok_r(NULL, ", \t", &save)) {
        if (strcasecmp(t, "close") == 0)
            h->conn_close = true;
        else if (strcasecmp(t, "keep-alive") == 0)
            h->conn_keep_alive = true;
    }
}

/* One header field line of a request head, without its line end, split
 * in place. The fields of srv_request_field go to r, those of HTTP/1.1
 * framing to h. Returns 0, or the status to answer with: 400 for a
 * malformed line (RFC 9112 5.1: no colon, an empty name, whitespace
 * before the colon) or Content-Length, 413 for a Content-Length too long
 * to read, 501 for a transfer coding other than chunked, 500 when out of
 * memory. */
int srv_h1_field(struct srv_request *r, struct srv_h1_head *h, char *line)
{
    char *colon = strchr(line, ':');
    char *v;
    size_t n;
    int rc;

    if (!colon || colon == line ||
        strcspn(line, " \t") < (size_t)(colon - line))
        return 400;
    *colon = '\0';
    v = colon + 1 + strspn(colon + 1, " \t");
    n = strlen(v);
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        v[--n] = '\0';
    rc = srv_request_field(r, line, strlen(line), v, n);
    if (rc < 0)
        return rc == -ENOMEM ? 500 : rc == -EFBIG ? 413 : 400;
    if (rc > 0)
        return 0;
    if (strcasecmp(line, "Transfer-Encoding") == 0) {
        if (strcasecmp(v, "chunked") != 0)
            return 501;
        h->chunked = true;
    } else if (strcasecmp(line, "Expect") == 0) {
        h->expect_continue = strcasecmp(v, "100-continue") == 0;
    } else if (strcasecmp(line, "Connection") == 0) {
        connection_tokens(h, v);
    }
    return 0;
}

/* Once the head is read: HTTP/1.0 closes unless asked not to, HTTP/1.1
 * stays open unless asked to close. */
bool srv_h1_keep_alive(const struct srv_h1_head *h)
{
    return h->http10 ? h->conn_keep_alive && !h->conn_close : !h->conn_close;
}

/* A response's status line and header fields, through the empty line that
 * ends them, into buf: Content-Length, except on 204 (RFC 9110 8.6 forbids
 * it) and 304 (where it would have to be that of the 200 the client did
 * not get), Connection, then `extra` (CRLF-terminated lines, or NULL).
 * Returns the length, or -EOVERFLOW. */
int srv_h1_status_head(char *buf, size_t len, int status, size_t content_length,
                       bool keep_alive, const char *extra)
{
    char clen[48] = "";
    int n;

    if (status != 204 && status != 304)
        snprintf(clen, sizeof clen, "Content-Length: %zu\r\n", content_length);
    n = snprintf(buf, len, "HTTP/1.1 %d %s\r\n%sConnection: %s\r\n%s\r\n",
                 status, srv_reason(status), clen,
                 keep_alive ? "keep-alive" : "close", extra ? extra : "");
    return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}
