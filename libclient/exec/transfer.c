/* SPDX-License-Identifier: MIT */
/*
 * One attempt's transfer: what happens on a pooled easy handle between
 * taking it and giving it back. Read docs/evidence.md first: the
 * callbacks here are where the evidence comes from.
 *
 * libcurl's callbacks fill the call's attempt_trace (the pre-request
 * callback, verbose texts for HTTP/2, the final header block) and its
 * response (headers into the arena, the body into the call's buffer or
 * the caller's sink). libcurl would re-send a request on its own (a reused
 * connection that died, an HTTP/2 REFUSED_STREAM, an HTTP_1_1_REQUIRED
 * downgrade); the pre-request callback runs before every request libcurl
 * puts on the wire, and vetoes the second within one perform, so that
 * every attempt on the wire is one the engine decided.
 *
 * Handle options are split by lifetime, because setting them is a
 * measurable part of a keep-alive request: those fixed for the profile are
 * set once (retryd__handle_configure, when the pool creates the handle),
 * the per-request ones only when they differ from what the handle was last
 * told (setup). Kept apart from the pool and the loop, so that neither
 * needs to know libcurl's callbacks and this file needs neither.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "exec/call.h"
#include "exec/transfer.h"

/* The per-request path is inlined into retryd__transfer_perform, the
 * blocking driver's, as it was before the multi shared it (attempt.c says
 * why); the multi calls the two halves' out-of-line copies. */
#define HALF static inline __attribute__((always_inline))

#define HEADER_MAX_BYTES (64 * 1024)
#define HEADER_MAX_LINES 256

/* --- response headers ---------------------------------------------------- */

/* [@p p, @p end) of a status line, its reason phrase, into @p out: the
 * line's end dropped, printable bytes only, cut to @p cap. */
static void copy_reason(const char *p, const char *end, char *out, size_t cap)
{
    size_t n = 0;
    for (; p < end && n + 1 < cap; p++)
        if (*p != '\r' && *p != '\n')
            out[n++] = *p >= 0x20 && *p < 0x7f ? *p : '?';
    out[n] = '\0';
}

/* "HTTP/1.1 200 OK", "HTTP/2 200": the status, or -1; the version as
 * CURLINFO_HTTP_VERSION would give it into *version (0: neither 1.0, 1.1
 * nor 2), and the reason phrase into @p reason (@p cap bytes), printable
 * bytes only (a hostile server's control bytes never reach a caller's
 * terminal), cut to fit. */
static int status_of(const char *line, size_t len, long *version, char *reason,
                     size_t cap)
{
    if (len < 12 || memcmp(line, "HTTP/", 5) != 0)
        return -1;
    const char *sp = memchr(line, ' ', len);
    if (sp == NULL || line + len - sp < 4)
        return -1;
    int s = 0;
    for (int i = 1; i <= 3; i++) {
        if (sp[i] < '0' || sp[i] > '9')
            return -1;
        s = s * 10 + (sp[i] - '0');
    }
    copy_reason(line + len - sp > 5 && sp[4] == ' ' ? sp + 5 : line + len,
                line + len, reason, cap);
    size_t v = (size_t)(sp - line) - 5; /* "1.1", "1.0", "2" */
    *version = v == 3 && memcmp(line + 5, "1.1", 3) == 0 ? CURL_HTTP_VERSION_1_1
               : v == 3 && memcmp(line + 5, "1.0", 3) == 0
                   ? CURL_HTTP_VERSION_1_0
               : v == 1 && line[5] == '2' ? CURL_HTTP_VERSION_2_0
                                          : 0;
    return s;
}

/* --- libcurl callbacks --------------------------------------------------- */

static int on_prereq(void *ctx, char *conn_primary_ip, char *conn_local_ip,
                     int conn_primary_port, int conn_local_port)
{
    call *c = ((easy *)ctx)->call;
    (void)conn_primary_ip, (void)conn_local_ip;
    (void)conn_primary_port, (void)conn_local_port;
    if (++c->trace.prereq_calls > 1) {
        /* libcurl is about to re-send on its own: not without a decision. */
        c->trace.resend_blocked = true;
        return CURL_PREREQFUNC_ABORT;
    }
    return CURL_PREREQFUNC_OK;
}

static int on_debug(CURL *h, curl_infotype type, char *data, size_t size,
                    void *ctx)
{
    call *c = ((easy *)ctx)->call;
    (void)h;
    if (type == CURLINFO_TEXT)
        retryd__trace_text(&c->trace, data, size);
    else if ((type == CURLINFO_HEADER_OUT || type == CURLINFO_DATA_OUT) &&
             c->trace.prereq_calls == 1)
        c->trace.bytes_out += size; /* reported after a successful write */
    return 0;
}

/* "Name: value\r\n" into the arena; a line without a colon is not a field
 * and is skipped, as libcurl does. The line's end is almost always "\r\n",
 * taken off before the blanks are looked for. */
static bool add_field(header_arena *a, const char *line, size_t len)
{
    const char *colon = memchr(line, ':', len);
    if (colon == NULL)
        return true;
    const char *v = colon + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    if (end > v && end[-1] == '\n')
        end--;
    if (end > v && end[-1] == '\r')
        end--;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' ||
                       end[-1] == '\n'))
        end--;
    return retryd__hdrs_add_line(a, line, (size_t)(colon - line),
                                 (size_t)(v - line), (size_t)(end - v));
}

static void final_block(call *c)
{
    attempt_trace *t = &c->trace;
    t->final_headers = true;
    t->status = c->pending_status;
    t->http_version = c->pending_version;
    /* A success streams straight to the caller's sink; anything else is
     * held back until the engine has said whether it is final. */
    c->stream_to_sink = c->req->sink != NULL && t->status / 100 == 2;
}

static size_t on_header(char *line, size_t size, size_t n, void *ctx)
{
    call *c = ((easy *)ctx)->call;
    size_t len = size * n;
    if (c->trace.final_headers)
        return len; /* trailers: not part of the decision */
    c->header_bytes += len;
    if (++c->header_lines > HEADER_MAX_LINES ||
        c->header_bytes > HEADER_MAX_BYTES) {
        c->trace.headers_too_large = true;
        return 0;
    }
    long version = 0;
    int status = status_of(line, len, &version, c->pending_reason,
                           sizeof(c->pending_reason));
    if (status >= 0) { /* a new block: 1xx interim, or the final one */
        retryd__hdrs_clear(&c->resp);
        c->pending_status = status;
        c->pending_version = version;
    } else if (len <= 2 && (line[0] == '\r' || line[0] == '\n')) {
        if (c->pending_status >= 200)
            final_block(c);
        else
            retryd__hdrs_clear(&c->resp);
    } else if (!add_field(&c->resp, line, len)) {
        return 0;
    }
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    call *c = ((easy *)ctx)->call;
    size_t len = size * n;
    if (c->stream_to_sink) {
        if (c->req->sink(data, len, c->req->sink_ctx) != len) {
            c->trace.sink_refused = true;
            return 0;
        }
        c->delivered |= len > 0;
        return len;
    }
    if (c->buf_len + len > c->p->max_response_bytes) {
        c->trace.body_too_large = true;
        return 0;
    }
    if (c->buf_len + len > c->buf_cap &&
        !retryd__grow((void **)&c->buf, c->buf_len, &c->buf_cap,
                      c->buf_len + len, c->body_first))
        return 0;
    memcpy(c->buf + c->buf_len, data, len);
    c->buf_len += len;
    return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *ctx)
{
    call *c = ((easy *)ctx)->call;
    long r = c->body.read(c->body.ctx, buf, size * n);
    if (r < 0 || (size_t)r > size * n) {
        c->trace.body_source_failed = true;
        return CURL_READFUNC_ABORT;
    }
    return (size_t)r;
}

/* Rewinding a body is how libcurl prepares a re-send: refuse it. */
static int on_seek(void *ctx, curl_off_t offset, int origin)
{
    (void)ctx, (void)offset, (void)origin;
    return CURL_SEEKFUNC_FAIL;
}

/* --- one attempt --------------------------------------------------------- */

/*
 * The request's header list, as libcurl reads it (a linked list), built in
 * one allocation: the nodes, then the lines retryd adds. A request with no
 * header to send gets no list at all: libcurl then skips its custom-header
 * matching, a measurable part of a keep-alive request.
 */
typedef struct header_list {
    struct curl_slist *nodes;
    size_t k;         /* nodes filled so far */
    char *text, *end; /* the room left for the lines retryd formats */
} header_list;

static void link_line(header_list *l, const char *line)
{
    l->nodes[l->k++].data = (char *)(uintptr_t)line;
}

/* "name: value", formatted into the allocation's text, then linked. */
static void print_line(header_list *l, const char *name, const char *value)
{
    int w =
        snprintf(l->text, (size_t)(l->end - l->text), "%s: %s", name, value);
    link_line(l, l->text);
    l->text += w + 1;
}

/* How many lines the caller gave, and whether one is a Content-Type (the
 * caller's then wins over the body's). */
HALF size_t caller_headers(const retryd_request *r, bool *has_ct)
{
    size_t n = 0, ct = 0;
    for (; r->headers && r->headers[n]; n++)
        ct |= strncasecmp(r->headers[n], "Content-Type:", 13) == 0;
    *has_ct = ct != 0;
    return n;
}

/* The lines in the order they go out: the caller's, then retryd's. */
HALF void fill_list(const call *c, header_list *l, size_t n, const char *add_ct)
{
    const retryd_request *r = c->req;
    for (size_t i = 0; i < n; i++)
        /* After a refresh, the new credential replaces the caller's. */
        if (!c->auth || strncasecmp(r->headers[i], "Authorization:", 14) != 0)
            link_line(l, r->headers[i]);
    /* libcurl adds "Expect: 100-continue" only to uploads; its 417 path is
     * another re-send, so uploads say "Expect:" (none). */
    if (c->body_open || c->mime)
        link_line(l, "Expect:");
    if (c->key[0])
        print_line(l, "Idempotency-Key", c->key);
    if (add_ct)
        print_line(l, "Content-Type", add_ct);
    if (c->auth)
        print_line(l, "Authorization", c->auth);
    for (size_t i = 0; i < l->k; i++)
        l->nodes[i].next = i + 1 < l->k ? &l->nodes[i + 1] : NULL;
}

HALF int build_headers(call *c)
{
    bool has_ct;
    const char *ct = retryd_body_content_type(c->req->body);
    size_t n = caller_headers(c->req, &has_ct);
    const char *add_ct = ct != NULL && !has_ct ? ct : NULL;
    c->headers = NULL;
    if (n == 0 && !c->body_open && !c->mime && !c->key[0] && !add_ct &&
        !c->auth)
        return 0;
    /* Room for the formatted lines: 16 covers a name, ": " and the
     * terminator, 60 the whole key line (a key has at most 39
     * characters). */
    size_t extra = 16 + (c->key[0] ? 60 : 0) +
                   (add_ct ? strlen(add_ct) + 16 : 0) +
                   (c->auth ? strlen(c->auth) + 16 : 0);
    /* n + 4 nodes: the caller's lines, Expect, the key, Content-Type and
     * Authorization (which takes the place of the caller's, if any). */
    header_list l = {.nodes = malloc((n + 4) * sizeof(*l.nodes) + extra)};
    if (l.nodes == NULL)
        return RETRYD_ENOMEM;
    l.text = (char *)(l.nodes + n + 4);
    l.end = l.text + extra;
    fill_list(c, &l, n, add_ct);
    c->headers = l.nodes; /* l.k >= 1: every reason to get here adds a line */
    return 0;
}

static long ms_of(int64_t ns)
{
    long ms = (long)(ns / 1000000);
    return ms > 0 ? ms : 1; /* 0 would mean "no timeout" to libcurl */
}

static bool wants_verbose(const retryd_profile *p)
{
    /* HTTP/2's proofs are libcurl texts (stream ids, REFUSED_STREAM,
     * GOAWAY): only in verbose output. HTTP/1.1's proof, the bytes
     * written, is CURLINFO_REQUEST_SIZE, which libcurl raises where it
     * would report HEADER_OUT (Curl_buffer_send, after a successful
     * write), so plain HTTP/1.1 profiles skip verbose formatting. */
    return p->http_version != RETRYD_HTTP_1_1;
}

void retryd__handle_configure(retryd_profile *p, easy *e)
{
    CURL *h = e->curl;
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, e->errbuf);
    curl_easy_setopt(h, CURLOPT_PRIVATE, e); /* the multi's way back */
    curl_easy_setopt(h, CURLOPT_PREREQDATA, e);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, e);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, e);
    curl_easy_setopt(h, CURLOPT_READDATA, e);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, e);
    /* The profile's proxy, never the environment's. */
    curl_easy_setopt(h, CURLOPT_PROXY, p->proxy ? p->proxy : "");
    if (p->resolve != NULL)
        curl_easy_setopt(h, CURLOPT_RESOLVE, p->resolve);
    if (p->accept_encoding != NULL)
        curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, p->accept_encoding);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    /* The client's cookie engine: the share holds the cookies, and "" (no
     * file: the client read it) turns the engine on for this handle. */
    if (p->client->share != NULL) {
        curl_easy_setopt(h, CURLOPT_SHARE, p->client->share);
        curl_easy_setopt(h, CURLOPT_COOKIEFILE, "");
    }
    if (wants_verbose(p)) {
        /* Verbose output only through the debug callback: nothing on
         * stderr. */
        curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
        curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, on_debug);
        curl_easy_setopt(h, CURLOPT_DEBUGDATA, e);
    }
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, on_prereq);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
    if (p->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, p->ca_file);
    if (p->ca_path)
        curl_easy_setopt(h, CURLOPT_CAPATH, p->ca_path);
    if (p->cert_file)
        curl_easy_setopt(h, CURLOPT_SSLCERT, p->cert_file);
    if (p->key_file)
        curl_easy_setopt(h, CURLOPT_SSLKEY, p->key_file);
    if (p->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    /* libcurl 7.88.1 breaks h2c prior-knowledge requests on a reused
     * connection (fixed in 8.0): one connection per h2c request. */
    if (p->http_version == RETRYD_HTTP_2_PRIOR_KNOWLEDGE &&
        curl_version_info(CURLVERSION_NOW)->version_num < 0x080000)
        curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
}

enum method_kind {
    METHOD_GET,
    METHOD_HEAD,
    METHOD_POST_EMPTY,
    METHOD_BODY,
    METHOD_MIME
};

/* The method and body, set only when they differ from what the handle was
 * last told; CUSTOMREQUEST and POSTFIELDS are set whenever the kind
 * changes, so nothing of another request's method survives. */
HALF void set_method(call *c, easy *e)
{
    CURL *h = e->curl;
    const char *m = c->req->method ? c->req->method : "GET";
    bool post = strcmp(m, "POST") == 0, get = strcmp(m, "GET") == 0;
    bool head = strcmp(m, "HEAD") == 0;
    int kind = c->mime        ? METHOD_MIME
               : c->body_open ? METHOD_BODY
               : head         ? METHOD_HEAD
               : post         ? METHOD_POST_EMPTY
                              : METHOD_GET;
    const char *custom = post || get || head ? "" : m;

    if (kind != e->method) {
        /* POSTFIELDS does not clear HEAD's NOBODY: a bodyless POST after
         * a HEAD on this handle would go out as HEAD. */
        curl_easy_setopt(h, CURLOPT_NOBODY, 0L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, NULL);
        e->custom[0] = '\0';
        if (kind == METHOD_BODY)
            curl_easy_setopt(h, CURLOPT_POST, 1L);
        else if (kind == METHOD_HEAD)
            curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        else if (kind == METHOD_POST_EMPTY)
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        else if (kind != METHOD_MIME)
            curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        e->method = kind;
    }
    /* A new curl_mime each attempt (attempt.c frees the last). */
    if (kind == METHOD_MIME)
        curl_easy_setopt(h, CURLOPT_MIMEPOST, c->mime);
    if (kind == METHOD_BODY)
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)c->body.length);
    else if (kind == METHOD_POST_EMPTY)
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    if (strcmp(custom, e->custom) != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, *custom ? custom : NULL);
        snprintf(e->custom, sizeof(e->custom), "%s", custom);
    }
}

/* The request's cookie string, told to libcurl only when it differs from
 * what the handle has (a request without one, the usual case, costs a
 * test). */
HALF void set_cookie(call *c, easy *e)
{
    const char *want = c->req->cookie;
    if (want == NULL && !e->had_cookie)
        return;
    if (want != NULL && e->cookie != NULL && strcmp(want, e->cookie) == 0)
        return;
    curl_easy_setopt(e->curl, CURLOPT_COOKIE, want);
    free(e->cookie);
    e->cookie = want ? strdup(want) : NULL;
    e->had_cookie = want != NULL;
}

#define SET_IF_CHANGED(e, field, opt, value)                                   \
    do {                                                                       \
        long v_ = (value);                                                     \
        if ((e)->field != v_) {                                                \
            curl_easy_setopt((e)->curl, (opt), v_);                            \
            (e)->field = v_;                                                   \
        }                                                                      \
    } while (0)

HALF void setup(call *c, easy *e, int64_t attempt_ns)
{
    retryd_profile *p = c->p;
    e->call = c;
    e->errbuf[0] = '\0';
    /* libcurl copies the URL; the same URL again needs no copy. */
    if (e->url == NULL || strcmp(e->url, c->url) != 0) {
        curl_easy_setopt(e->curl, CURLOPT_URL, c->url);
        free(e->url);
        e->url = strdup(c->url);
    }
    if (c->headers != NULL || e->had_headers)
        curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, c->headers);
    e->had_headers = c->headers != NULL;
    set_cookie(c, e);
    /* 0: the driver bounds the transfer itself (the multi, from its timer
     * heap), and libcurl keeps no timer of its own: a handle last used by
     * retryd_execute is told so. */
    SET_IF_CHANGED(e, timeout_ms, CURLOPT_TIMEOUT_MS,
                   attempt_ns ? ms_of(attempt_ns) : 0);
    SET_IF_CHANGED(e, connect_ms, CURLOPT_CONNECTTIMEOUT_MS,
                   attempt_ns ? ms_of(p->connect_timeout_ns < attempt_ns
                                          ? p->connect_timeout_ns
                                          : attempt_ns)
                              : 0);
    SET_IF_CHANGED(e, version, CURLOPT_HTTP_VERSION,
                   c->force_http11 ? CURL_HTTP_VERSION_1_1
                   : p->http_version == RETRYD_HTTP_2_TLS
                       ? CURL_HTTP_VERSION_2TLS
                   : p->http_version == RETRYD_HTTP_2_PRIOR_KNOWLEDGE
                       ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
                       : CURL_HTTP_VERSION_1_1);
    set_method(c, e);
}

HALF int transfer_setup(call *c, easy *e, int64_t attempt_ns)
{
    if (build_headers(c) < 0) {
        snprintf(c->errbuf, sizeof(c->errbuf), "out of memory");
        return CURLE_OUT_OF_MEMORY;
    }
    setup(c, e, attempt_ns);
    return CURLE_OK;
}

HALF void transfer_done(call *c, easy *e, retryd_attempt *a, int rc)
{
    CURL *h = e->curl;
    if (rc != CURLE_OK)
        memcpy(c->errbuf, e->errbuf, sizeof(c->errbuf));
    /* The final block's status line said it; only without one, ask. */
    long v = c->trace.final_headers ? c->trace.http_version : 0;
    if (v == 0)
        curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &v);
    a->http_version = v == CURL_HTTP_VERSION_2_0   ? 20
                      : v == CURL_HTTP_VERSION_1_1 ? 11
                      : v == CURL_HTTP_VERSION_1_0 ? 10
                                                   : 0;
    if (c->trace.http_major == 0 && a->http_version)
        c->trace.http_major = a->http_version / 10;
    /* The bytes-written proof matters only when no final response came. */
    if (!wants_verbose(c->p) && c->trace.prereq_calls >= 1 &&
        (rc != CURLE_OK || !c->trace.final_headers)) {
        long sent = 0;
        curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &sent);
        c->trace.bytes_out = sent > 0 ? (uint64_t)sent : 0;
        c->trace.http_major = 1;
    }
    if (rc == CURLE_SEND_FAIL_REWIND)
        c->trace.resend_blocked = true; /* it wanted to send it again */
    free(c->headers);
    c->headers = NULL;
}

int retryd__transfer_perform(call *c, easy *e, retryd_attempt *a,
                             int64_t attempt_ns)
{
    int rc = transfer_setup(c, e, attempt_ns);
    if (rc != CURLE_OK)
        return rc;
    rc = curl_easy_perform(e->curl);
    transfer_done(c, e, a, rc);
    return rc;
}

int retryd__transfer_setup(call *c, easy *e, int64_t attempt_ns)
{
    return transfer_setup(c, e, attempt_ns);
}

void retryd__transfer_done(call *c, easy *e, retryd_attempt *a, int rc)
{
    transfer_done(c, e, a, rc);
}
