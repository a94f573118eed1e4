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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CHUNK_LINE_MAX 1024 /* chunk-size line, with extensions */
#define PARAM_MAX 256       /* one decoded query parameter */
#define SEQ_MAX 64          /* codes in /seq?codes= */
#define HOLD_MAX_MS 3600000L
#define SLOW_MAX_MS 60000L

struct request {
    char method[32];
    char *target; /* owned; its '?' is replaced by a NUL */
    const char *path;
    const char *query; /* "" when absent */
    bool http10;
    long long content_length; /* -1: no Content-Length */
    bool chunked;
    bool expect_continue;
    bool conn_close, conn_keep_alive; /* Connection: tokens */
    bool keep_alive;                  /* the verdict, after all header fields */
    char *request_id_hdr;             /* owned header values; NULL: absent */
    char *idempotency_key;
    char *authorization;
    char id[FS_ID_MAX + 1];
    char *body; /* owned, decoded */
    size_t body_len;
};

enum next {
    NEXT_KEEP,  /* read the next request from this connection */
    NEXT_CLOSE, /* the answer said Connection: close: close gracefully */
    NEXT_DONE,  /* already closed or reset, or I/O failed: just close */
};

uint64_t fs_fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static const char *reason(int status)
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

static int parse_long(const char *s, long min, long max, long *out)
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
static int query_long(const char *query, const char *key, long def, long min,
                      long max, long *out)
{
    char buf[32];
    int r = query_get(query, key, buf, sizeof buf);

    if (r < 0)
        return -1;
    if (r == 0) {
        *out = def;
        return 0;
    }
    return parse_long(buf, min, max, out);
}

/* --- reading a request -------------------------------------------------- */

/* Keeps the first occurrence of a header field we care about. */
static int keep_value(char **dst, const char *v)
{
    if (*dst)
        return 0;
    *dst = strdup(v);
    return *dst ? 0 : 500;
}

static int parse_content_length(struct request *r, const char *v)
{
    long long n = 0;
    size_t digits = strspn(v, "0123456789");

    /* 18 digits cannot overflow; anything that long is over the limit. */
    if (digits == 0 || v[digits] != '\0' || digits > 18)
        return digits > 18 && v[digits] == '\0' ? 413 : 400;
    for (size_t i = 0; i < digits; i++)
        n = n * 10 + (v[i] - '0');
    if (r->content_length >= 0 && r->content_length != n)
        return 400; /* conflicting lengths: request smuggling territory */
    r->content_length = n;
    return 0;
}

static void parse_connection(struct request *r, char *v)
{
    char *save = NULL;

    for (char *t = strtok_r(v, ", \t", &save); t;
         t = strtok_r(NULL, ", \t", &save)) {
        if (strcasecmp(t, "close") == 0)
            r->conn_close = true;
        else if (strcasecmp(t, "keep-alive") == 0)
            r->conn_keep_alive = true;
    }
}

static int parse_header(struct request *r, char *line)
{
    char *colon = strchr(line, ':');
    char *v;
    size_t vlen;

    /* RFC 9112 5.1: no whitespace between field name and colon. */
    if (!colon || colon == line ||
        strcspn(line, " \t") < (size_t)(colon - line))
        return 400;
    *colon = '\0';
    v = colon + 1 + strspn(colon + 1, " \t");
    vlen = strlen(v);
    while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
        v[--vlen] = '\0';

    if (strcasecmp(line, "Content-Length") == 0)
        return parse_content_length(r, v);
    if (strcasecmp(line, "Transfer-Encoding") == 0) {
        if (strcasecmp(v, "chunked") != 0)
            return 501;
        r->chunked = true;
    } else if (strcasecmp(line, "Expect") == 0) {
        r->expect_continue = strcasecmp(v, "100-continue") == 0;
    } else if (strcasecmp(line, "Connection") == 0) {
        parse_connection(r, v);
    } else if (strcasecmp(line, "X-Request-Id") == 0) {
        return keep_value(&r->request_id_hdr, v);
    } else if (strcasecmp(line, "Idempotency-Key") == 0) {
        return keep_value(&r->idempotency_key, v);
    } else if (strcasecmp(line, "Authorization") == 0) {
        return keep_value(&r->authorization, v);
    }
    return 0;
}

/* Reads one line of the request head, charging it to *budget so the whole
 * head stays within FS_HEAD_MAX. */
static int read_head_line(struct fs_conn *c, size_t *budget, char **line,
                          size_t *len)
{
    int rc = fs_read_line(c, *budget, line, len);

    if (rc == -EMSGSIZE)
        return 431;
    if (rc < 0)
        return rc;
    *budget = *budget > *len + 2 ? *budget - *len - 2 : 0;
    return 0;
}

static int read_request_line(struct fs_conn *c, struct request *r,
                             size_t *budget)
{
    char *line, *target, *sp;
    size_t len;
    int rc;

    /* RFC 9112 2.2: ignore empty lines before the request line. */
    do {
        rc = read_head_line(c, budget, &line, &len);
        if (rc)
            return rc;
    } while (len == 0);

    sp = strchr(line, ' ');
    if (!sp || sp == line || (size_t)(sp - line) >= sizeof r->method)
        return 400;
    memcpy(r->method, line, (size_t)(sp - line));
    r->method[sp - line] = '\0';
    target = sp + 1;
    sp = strchr(target, ' ');
    if (!sp || sp == target)
        return 400;
    *sp = '\0';
    if (strcmp(sp + 1, "HTTP/1.1") == 0)
        r->http10 = false;
    else if (strcmp(sp + 1, "HTTP/1.0") == 0)
        r->http10 = true;
    else
        return strncmp(sp + 1, "HTTP/", 5) == 0 ? 505 : 400;

    if (!(r->target = strdup(target)))
        return 500;
    char *q = strchr(r->target, '?');
    if (q) {
        *q = '\0';
        r->query = q + 1;
    }
    r->path = r->target;
    return 0;
}

static int read_headers(struct fs_conn *c, struct request *r, size_t *budget)
{
    for (;;) {
        char *line;
        size_t len;
        int rc = read_head_line(c, budget, &line, &len);

        if (rc)
            return rc;
        if (len == 0)
            break;
        if ((rc = parse_header(r, line)))
            return rc;
    }
    /* HTTP/1.0 closes unless asked not to; HTTP/1.1 stays open unless
     * asked to close. */
    r->keep_alive =
        r->http10 ? r->conn_keep_alive && !r->conn_close : !r->conn_close;
    return 0;
}

/* Ids appear in control commands and stderr lines: no spaces, no control
 * characters. */
static bool valid_id(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || *s == 0x7f)
            return false;
    return true;
}

/* The request id: the query parameter id=, else X-Request-Id, else "-". */
static int resolve_id(struct request *r)
{
    int rc = query_get(r->query, "id", r->id, sizeof r->id);

    if (rc < 0)
        return 400;
    if (rc == 0) {
        const char *h = r->request_id_hdr ? r->request_id_hdr : "-";

        if (strlen(h) >= sizeof r->id)
            return 400;
        strcpy(r->id, h);
    }
    return valid_id(r->id) ? 0 : 400;
}

static int reserve(char **buf, size_t *cap, size_t need)
{
    size_t n = *cap ? *cap : 4096;
    char *p;

    if (need <= *cap)
        return 0;
    while (n < need)
        n *= 2;
    if (n > FS_BODY_MAX) /* need <= FS_BODY_MAX, checked by the caller */
        n = FS_BODY_MAX;
    if (!(p = realloc(*buf, n)))
        return 500;
    *buf = p;
    *cap = n;
    return 0;
}

static int read_trailers(struct fs_conn *c)
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
static int read_body_chunked(struct fs_conn *c, struct request *r)
{
    size_t cap = 0;

    for (;;) {
        char *line, *end;
        size_t len;
        int rc = fs_read_line(c, CHUNK_LINE_MAX, &line, &len);

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
        if (errno == ERANGE || size > FS_BODY_MAX - r->body_len)
            return 413;
        if ((rc = reserve(&r->body, &cap, r->body_len + size)))
            return rc;
        if ((rc = fs_read_exact(c, r->body + r->body_len, size)))
            return rc;
        r->body_len += size;
        rc = fs_read_line(c, 3, &line, &len); /* the CRLF after the data */
        if (rc == -EMSGSIZE || (rc == 0 && len != 0))
            return 400;
        if (rc)
            return rc;
    }
}

static int read_body_length(struct fs_conn *c, struct request *r)
{
    size_t n = (size_t)r->content_length;
    int rc;

    if (r->content_length <= 0)
        return 0;
    if (!(r->body = malloc(n)))
        return 500;
    if ((rc = fs_read_exact(c, r->body, n)))
        return rc;
    r->body_len = n;
    return 0;
}

static void free_request(struct request *r)
{
    free(r->target);
    free(r->request_id_hdr);
    free(r->idempotency_key);
    free(r->authorization);
    free(r->body);
}

/* --- responses ---------------------------------------------------------- */

static void note(const struct fs_conn *c, const struct request *r,
                 const char *outcome)
{
    if (c->srv->verbose)
        fprintf(stderr, "faultsrv: %s %s id=%s -> %s\n", r->method, r->path,
                r->id, outcome);
}

/* Status line and header fields. 204 and 304 carry no Content-Length
 * (RFC 9110 8.6 forbids it for 204); every other response does. */
static int send_head(struct fs_conn *c, const struct request *r, int status,
                     const char *extra, size_t content_length)
{
    char head[1024], clen[48] = "", what[16];
    int n;

    if (status != 204 && status != 304)
        snprintf(clen, sizeof clen, "Content-Length: %zu\r\n", content_length);
    n = snprintf(head, sizeof head,
                 "HTTP/1.1 %d %s\r\n%sConnection: %s\r\n%s\r\n", status,
                 reason(status), clen, r->keep_alive ? "keep-alive" : "close",
                 extra ? extra : "");
    if (n < 0 || (size_t)n >= sizeof head)
        return -EOVERFLOW;
    snprintf(what, sizeof what, "%d", status);
    note(c, r, what);
    return fs_write_all(c, head, (size_t)n);
}

static bool sends_body(const struct request *r, int status)
{
    return status != 204 && status != 304 && strcmp(r->method, "HEAD") != 0;
}

static enum next respond(struct fs_conn *c, const struct request *r, int status,
                         const char *extra, const void *body, size_t len)
{
    if (send_head(c, r, status, extra, len) < 0)
        return NEXT_DONE;
    if (sends_body(r, status) && len > 0 && fs_write_all(c, body, len) < 0)
        return NEXT_DONE;
    return r->keep_alive ? NEXT_KEEP : NEXT_CLOSE;
}

static enum next respond_text(struct fs_conn *c, const struct request *r,
                              int status, const char *extra, const char *text)
{
    return respond(c, r, status, extra, text, strlen(text));
}

static enum next bad_param(struct fs_conn *c, const struct request *r,
                           const char *name)
{
    char msg[64];

    snprintf(msg, sizeof msg, "bad parameter: %s\n", name);
    return respond_text(c, r, 400, NULL, msg);
}

/* Answers with `status` and closes: for requests that were not executed
 * (malformed, over a limit). A negative rc means there is nobody to
 * answer. */
static enum next fail(struct fs_conn *c, struct request *r, int rc)
{
    char msg[64];

    if (rc < 0)
        return NEXT_DONE;
    r->keep_alive = false;
    snprintf(msg, sizeof msg, "%d %s\n", rc, reason(rc));
    respond_text(c, r, rc, NULL, msg);
    return NEXT_CLOSE;
}

static long record_execution(struct fs_conn *c, const struct request *r)
{
    struct fs_exec e = {
        .method = r->method,
        .body_len = r->body_len,
        .body_fnv = fs_fnv1a64(r->body, r->body_len),
        .idempotency_key = r->idempotency_key,
        .authorization = r->authorization,
    };

    return fs_stats_execute(c->srv->stats, r->id, &e);
}

/* --- modes ---------------------------------------------------------------
 * Each runs after the whole request was read; `n` is the ordinal of this
 * execution among those of its request id (0 for modes that count
 * themselves). */

typedef enum next mode_fn(struct fs_conn *c, struct request *r, long n);

/* len bytes: 'x' repeated, or "abc...z" repeated when `pattern` (lets a
 * streaming test check order and completeness). Caller frees. */
static char *filled(size_t len, bool pattern, size_t offset)
{
    char *b = malloc(len ? len : 1);

    for (size_t i = 0; b && i < len; i++)
        b[i] = pattern ? (char)('a' + (offset + i) % 26) : 'x';
    return b;
}

static enum next mode_ok(struct fs_conn *c, struct request *r, long n)
{
    long len;
    enum next nx;
    char *body;

    (void)n;
    if (query_long(r->query, "len", -1, 0, FS_BODY_MAX, &len) < 0)
        return bad_param(c, r, "len");
    if (len < 0)
        return respond_text(c, r, 200, NULL, "ok");
    if (!(body = filled((size_t)len, false, 0)))
        return fail(c, r, 500);
    nx = respond(c, r, 200, NULL, body, (size_t)len);
    free(body);
    return nx;
}

static enum next mode_echo(struct fs_conn *c, struct request *r, long n)
{
    (void)n;
    return respond(c, r, 200, NULL, r->body, r->body_len);
}

static enum next mode_close_after_read(struct fs_conn *c, struct request *r,
                                       long n)
{
    (void)n;
    note(c, r, "close");
    fs_close(c);
    return NEXT_DONE;
}

static enum next mode_reset_after_read(struct fs_conn *c, struct request *r,
                                       long n)
{
    (void)n;
    note(c, r, "reset");
    fs_close_reset(c);
    return NEXT_DONE;
}

static enum next mode_hold(struct fs_conn *c, struct request *r, long n)
{
    long ms;

    (void)n;
    if (query_long(r->query, "ms", -1, 0, HOLD_MAX_MS, &ms) < 0)
        return bad_param(c, r, "ms");
    if (fs_wait_peer_close(c, (int)ms) != 0) {
        note(c, r, "client gone while held");
        fs_close(c);
        return NEXT_DONE;
    }
    return respond_text(c, r, 200, NULL, "ok");
}

static enum next mode_partial(struct fs_conn *c, struct request *r, long n)
{
    long len, sent;
    char *body;
    int rc;

    (void)n;
    if (query_long(r->query, "len", 100, 0, FS_BODY_MAX, &len) < 0)
        return bad_param(c, r, "len");
    if (query_long(r->query, "sent", len / 2, 0, len, &sent) < 0)
        return bad_param(c, r, "sent");
    if (!(body = filled((size_t)sent, false, 0)))
        return fail(c, r, 500);
    rc = send_head(c, r, 200, NULL, (size_t)len);
    if (rc == 0)
        rc = fs_write_all(c, body, (size_t)sent);
    free(body);
    if (rc == 0)
        fs_drain_output(c, 2000);
    note(c, r, "reset after partial body");
    fs_close_reset(c);
    return NEXT_DONE;
}

/* Header values come from the query: refuse CR, LF and other controls,
 * or a test could inject header lines by accident. */
static bool header_safe(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
            return false;
    return true;
}

static enum next mode_status(struct fs_conn *c, struct request *r, long n)
{
    char ra[PARAM_MAX], extra[PARAM_MAX + 32] = "", body[32];
    long code;
    int rc;

    (void)n;
    if (query_long(r->query, "code", -1, 200, 599, &code) < 0 || code < 0)
        return bad_param(c, r, "code");
    rc = query_get(r->query, "retry_after", ra, sizeof ra);
    if (rc < 0 || (rc > 0 && !header_safe(ra)))
        return bad_param(c, r, "retry_after");
    if (rc > 0)
        snprintf(extra, sizeof extra, "Retry-After: %s\r\n", ra);
    snprintf(body, sizeof body, "status %ld\n", code);
    return respond_text(c, r, (int)code, extra, body);
}

static enum next mode_once425(struct fs_conn *c, struct request *r, long n)
{
    if (n == 1)
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

static enum next mode_auth(struct fs_conn *c, struct request *r, long n)
{
    char token[PARAM_MAX];
    int rc = query_get(r->query, "token", token, sizeof token);

    if (rc < 0)
        return bad_param(c, r, "token");
    if (!authorized(r->authorization, rc > 0 ? token : NULL)) {
        fs_stats_reject(c->srv->stats, r->id);
        return respond_text(c, r, 401, "WWW-Authenticate: Bearer\r\n",
                            "unauthorized\n");
    }
    /* Only an accepted request is an execution. */
    if ((n = record_execution(c, r)) < 0)
        return fail(c, r, 500);
    return respond_text(c, r, 200, NULL, "ok");
}

static enum next mode_seq(struct fs_conn *c, struct request *r, long n)
{
    char list[PARAM_MAX], body[48], *save = NULL;
    long codes[SEQ_MAX];
    size_t k = 0;

    if (query_get(r->query, "codes", list, sizeof list) <= 0)
        return bad_param(c, r, "codes");
    for (char *t = strtok_r(list, ",", &save); t;
         t = strtok_r(NULL, ",", &save))
        if (k == SEQ_MAX || parse_long(t, 200, 599, &codes[k++]) < 0)
            return bad_param(c, r, "codes");
    if (k == 0)
        return bad_param(c, r, "codes");
    long code = codes[(size_t)n <= k ? (size_t)n - 1 : k - 1];
    snprintf(body, sizeof body, "seq %ld %ld\n", n, code);
    return respond_text(c, r, (int)code, NULL, body);
}

static enum next mode_drop_second(struct fs_conn *c, struct request *r, long n)
{
    (void)n;
    if (c->requests < 2)
        return respond_text(c, r, 200, NULL, "ok");
    note(c, r, "dropped (second request on the connection)");
    fs_close(c);
    return NEXT_DONE;
}

static enum next mode_interim_then_close(struct fs_conn *c, struct request *r,
                                         long n)
{
    static const char interim[] =
        "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n";

    (void)n;
    note(c, r, "103 then close");
    fs_write_all(c, interim, sizeof interim - 1);
    fs_close(c);
    return NEXT_DONE;
}

static enum next mode_slow_body(struct fs_conn *c, struct request *r, long n)
{
    long len, chunk, ms;
    char *buf;
    int rc;

    (void)n;
    if (query_long(r->query, "len", 64, 0, FS_BODY_MAX, &len) < 0)
        return bad_param(c, r, "len");
    if (query_long(r->query, "chunk", 8, 1, FS_BODY_MAX, &chunk) < 0)
        return bad_param(c, r, "chunk");
    if (query_long(r->query, "ms", 10, 0, SLOW_MAX_MS, &ms) < 0)
        return bad_param(c, r, "ms");
    if ((rc = send_head(c, r, 200, NULL, (size_t)len)) < 0)
        return NEXT_DONE;
    if (!sends_body(r, 200))
        return r->keep_alive ? NEXT_KEEP : NEXT_CLOSE;
    for (long off = 0; off < len && rc == 0; off += chunk) {
        size_t m = (size_t)(len - off < chunk ? len - off : chunk);

        /* Pause between chunks, but stop as soon as the client leaves. */
        if (off > 0 && fs_wait_peer_close(c, (int)ms) != 0)
            return NEXT_DONE;
        if (!(buf = filled(m, true, (size_t)off)))
            return NEXT_DONE;
        rc = fs_write_all(c, buf, m);
        free(buf);
    }
    if (rc < 0)
        return NEXT_DONE;
    return r->keep_alive ? NEXT_KEEP : NEXT_CLOSE;
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
    {"/once425", mode_once425, true},
    {"/auth", mode_auth, false},
    {"/seq", mode_seq, true},
    {"/drop-second", mode_drop_second, true},
    {"/interim-then-close", mode_interim_then_close, true},
    {"/slow-body", mode_slow_body, true},
};

static enum next dispatch(struct fs_conn *c, struct request *r)
{
    const struct mode *m = NULL;
    long n = 0;

    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(r->path, modes[i].path) == 0) {
            m = &modes[i];
            break;
        }
    /* Count first: whatever the client observes next, the counters
     * already include this execution. Unknown paths count too. */
    if ((!m || m->counts) && (n = record_execution(c, r)) < 0)
        return fail(c, r, 500);
    if (!m)
        return respond_text(c, r, 404, NULL, "not found\n");
    return m->fn(c, r, n);
}

/* --- connection loop ---------------------------------------------------- */

static enum next serve_one(struct fs_conn *c, struct request *r)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    size_t budget = FS_HEAD_MAX;
    int rc = read_request_line(c, r, &budget);

    if (rc == 0)
        rc = read_headers(c, r, &budget);
    if (rc == 0) {
        c->requests++;
        rc = resolve_id(r);
    }
    if (rc)
        return fail(c, r, rc);
    /* Not executed: the body (if any) stays unread. With unread body bytes
     * already received, Linux turns this close into a RST. */
    if (strcmp(r->path, "/close-before-read") == 0) {
        note(c, r, "close before reading the body");
        fs_close(c);
        return NEXT_DONE;
    }
    if (r->content_length > FS_BODY_MAX)
        return fail(c, r, 413); /* before any 100 Continue */
    if ((r->chunked || r->content_length > 0) && r->expect_continue &&
        fs_write_all(c, cont, sizeof cont - 1) < 0)
        return NEXT_DONE;
    rc = r->chunked ? read_body_chunked(c, r) : read_body_length(c, r);
    if (rc)
        return fail(c, r, rc);
    return dispatch(c, r);
}

/* Serves requests on one connection until it closes; closes the socket. */
void fs_http_serve(struct fs_conn *c)
{
    for (;;) {
        struct request r = {
            .content_length = -1, .path = "", .query = "", .id = "-"};
        enum next nx = serve_one(c, &r);

        free_request(&r);
        if (nx == NEXT_KEEP)
            continue;
        if (nx == NEXT_CLOSE)
            fs_close_lingering(c);
        else
            fs_close(c);
        return;
    }
}
