/*
 * retryd_execute: the attempt loop. Read docs/evidence.md first.
 *
 * Each attempt: a bulkhead permit, an easy handle from the profile's pool,
 * one curl_easy_perform() whose callbacks fill an attempt_trace, the
 * evidence from that trace, a decision from the engine (which takes the
 * retry's token from the host budget), and, for a retry, a backoff during
 * which neither the permit nor the handle is held.
 *
 * libcurl would re-send a request on its own (a reused connection that
 * died, an HTTP/2 REFUSED_STREAM, an HTTP_1_1_REQUIRED downgrade). The
 * pre-request callback runs before every request libcurl puts on the wire;
 * the second call within one perform is such a re-send, and is vetoed:
 * every attempt on the wire is one the engine decided.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <uuid/uuid.h>

#include "base/macros.h"
#include "exec/body_internal.h"
#include "base/clock.h"
#include "exec/evidence.h"
#include "exec/executor.h"

#define DEFAULT_DEADLINE_NS (30 * INT64_C(1000000000))
#define HEADER_MAX_BYTES (64 * 1024)
#define HEADER_MAX_LINES 256
#define AUTH_MAX 4096
#define BODY_FIRST_BUFFER 4096

typedef struct call {
    retryd_profile *p;
    const retryd_request *req;
    char *url; /* url_first, or malloc'ed when longer */
    retryd_idempotency idem;
    char key[40];
    char *auth; /* Authorization after a refresh, or NULL */
    bool refresh_used, force_http11, delivered;
    int64_t deadline;
    int64_t now; /* the last clock reading: when the call or attempt ended */
    /* One attempt's state, reset before each. */
    attempt_trace trace;
    retryd_body_reader body;
    bool body_open;
    header_arena resp; /* the block being read; final once final_headers */
    int pending_status;
    size_t header_bytes, header_lines;
    bool stream_to_sink;
    unsigned char *buf; /* body_first until outgrown */
    size_t buf_len, buf_cap;
    /* The attempt log: att_first until outgrown; error texts strdup'ed. */
    retryd_attempt *att;
    size_t n_att, cap_att;
    /* Storage that lives in retryd_execute's frame: a keep-alive request
     * needs no allocation until its result. Not zeroed: sized, not read. */
    char url_first[512];
    char hdr_first[2048];
    uint32_t hdr_off_first[2 * 64];
    unsigned char body_first[BODY_FIRST_BUFFER];
    retryd_attempt att_first[4];
    struct curl_slist *headers; /* one allocation: nodes, then our lines */
    char errbuf[CURL_ERROR_SIZE];
} call;

/* --- request validation -------------------------------------------------- */

static bool is_token_char(char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
           (ch >= '0' && ch <= '9') || strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static bool method_ok(const char *m)
{
    size_t n = strlen(m);
    if (n == 0 || n > 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_token_char(m[i]))
            return false;
    return true;
}

/* No control characters or spaces: nothing a header could be smuggled
 * through. */
static bool path_ok(const char *path)
{
    for (; *path; path++)
        if ((unsigned char)*path <= 0x20 || *path == 0x7f)
            return false;
    return true;
}

static bool header_line_ok(const char *h)
{
    const char *colon = strchr(h, ':');
    if (colon == NULL || colon == h)
        return false;
    for (const char *q = h; q < colon; q++)
        if (!is_token_char(*q))
            return false;
    return retryd__field_value_ok(colon + 1);
}

static int validate(const retryd_request *r)
{
    if ((r->method && !method_ok(r->method)) || (r->path && !path_ok(r->path)))
        return RETRYD_EINVAL;
    if ((unsigned)r->idempotency >= RETRYD_IDEMPOTENCY_COUNT ||
        r->deadline_ns < 0)
        return RETRYD_EINVAL;
    if (r->idempotency_key_value &&
        (!retryd__field_value_ok(r->idempotency_key_value) ||
         strlen(r->idempotency_key_value) >= 40 || !*r->idempotency_key_value))
        return RETRYD_EINVAL;
    for (size_t i = 0; r->headers && r->headers[i]; i++)
        if (!header_line_ok(r->headers[i]) || i > 1000)
            return RETRYD_EINVAL;
    return 0;
}

/* --- response headers ---------------------------------------------------- */

/* "HTTP/1.1 200 OK", "HTTP/2 200": the status, or -1. */
static int status_of(const char *line, size_t len)
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
 * and is skipped, as libcurl does. */
static bool add_field(header_arena *a, const char *line, size_t len)
{
    const char *colon = memchr(line, ':', len);
    if (colon == NULL)
        return true;
    const char *v = colon + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' ||
                       end[-1] == '\n'))
        end--;
    return retryd__hdrs_add(a, line, (size_t)(colon - line), v,
                            (size_t)(end - v));
}

static void final_block(call *c)
{
    attempt_trace *t = &c->trace;
    t->final_headers = true;
    t->status = c->pending_status;
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
    int status = status_of(line, len);
    if (status >= 0) { /* a new block: 1xx interim, or the final one */
        retryd__hdrs_clear(&c->resp);
        c->pending_status = status;
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
static int build_headers(call *c)
{
    const retryd_request *r = c->req;
    const char *ct = retryd_body_content_type(r->body);
    size_t n = 0, has_ct = 0, extra;
    for (; r->headers && r->headers[n]; n++)
        has_ct |= strncasecmp(r->headers[n], "Content-Type:", 13) == 0;
    /* libcurl adds "Expect: 100-continue" only to uploads; its 417 path is
     * another re-send, so uploads say "Expect:" (none). */
    bool expect = c->body_open;
    bool add_ct = ct != NULL && !has_ct;
    c->headers = NULL;
    if (n == 0 && !expect && !c->key[0] && !add_ct && !c->auth)
        return 0;
    extra = 16 + (c->key[0] ? 60 : 0) + (add_ct ? strlen(ct) + 16 : 0) +
            (c->auth ? strlen(c->auth) + 16 : 0);
    struct curl_slist *nodes = malloc((n + 4) * sizeof(*nodes) + extra);
    if (nodes == NULL)
        return RETRYD_ENOMEM;
    char *text = (char *)(nodes + n + 4), *end = text + extra;
    size_t k = 0;
#define LINK(s) (nodes[k].data = (char *)(uintptr_t)(s), k++)
#define PRINT(...)                                                             \
    do {                                                                       \
        int w_ = snprintf(text, (size_t)(end - text), __VA_ARGS__);            \
        LINK(text);                                                            \
        text += w_ + 1;                                                        \
    } while (0)
    for (size_t i = 0; i < n; i++)
        if (!c->auth || strncasecmp(r->headers[i], "Authorization:", 14) != 0)
            LINK(r->headers[i]);
    if (expect)
        LINK("Expect:");
    if (c->key[0])
        PRINT("Idempotency-Key: %s", c->key);
    if (add_ct)
        PRINT("Content-Type: %s", ct);
    if (c->auth)
        PRINT("Authorization: %s", c->auth);
#undef PRINT
#undef LINK
    for (size_t i = 0; i < k; i++)
        nodes[i].next = i + 1 < k ? &nodes[i + 1] : NULL;
    c->headers = nodes; /* k >= 1: every reason to get here adds a line */
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
    curl_easy_setopt(h, CURLOPT_PREREQDATA, e);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, e);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, e);
    curl_easy_setopt(h, CURLOPT_READDATA, e);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, e);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* never an environment proxy */
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
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

enum method_kind { METHOD_GET, METHOD_HEAD, METHOD_POST_EMPTY, METHOD_BODY };

/* The method and body, set only when they differ from what the handle was
 * last told; CUSTOMREQUEST and POSTFIELDS are set whenever the kind
 * changes, so nothing of another request's method survives. */
static void set_method(call *c, easy *e)
{
    CURL *h = e->curl;
    const char *m = c->req->method ? c->req->method : "GET";
    bool post = strcmp(m, "POST") == 0, get = strcmp(m, "GET") == 0;
    bool head = strcmp(m, "HEAD") == 0;
    int kind = c->body_open ? METHOD_BODY
               : head       ? METHOD_HEAD
               : post       ? METHOD_POST_EMPTY
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
        else
            curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        e->method = kind;
    }
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

#define SET_IF_CHANGED(e, field, opt, value)                                   \
    do {                                                                       \
        long v_ = (value);                                                     \
        if ((e)->field != v_) {                                                \
            curl_easy_setopt((e)->curl, (opt), v_);                            \
            (e)->field = v_;                                                   \
        }                                                                      \
    } while (0)

static void setup(call *c, easy *e, int64_t attempt_ns)
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
    SET_IF_CHANGED(e, timeout_ms, CURLOPT_TIMEOUT_MS, ms_of(attempt_ns));
    SET_IF_CHANGED(e, connect_ms, CURLOPT_CONNECTTIMEOUT_MS,
                   ms_of(p->connect_timeout_ns < attempt_ns
                             ? p->connect_timeout_ns
                             : attempt_ns));
    SET_IF_CHANGED(e, version, CURLOPT_HTTP_VERSION,
                   c->force_http11 ? CURL_HTTP_VERSION_1_1
                   : p->http_version == RETRYD_HTTP_2_TLS
                       ? CURL_HTTP_VERSION_2TLS
                   : p->http_version == RETRYD_HTTP_2_PRIOR_KNOWLEDGE
                       ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
                       : CURL_HTTP_VERSION_1_1);
    set_method(c, e);
}

static void attempt_reset(call *c)
{
    retryd__trace_init(&c->trace);
    retryd__hdrs_clear(&c->resp);
    c->pending_status = 0;
    c->header_bytes = c->header_lines = 0;
    c->stream_to_sink = false;
    c->buf_len = 0;
    c->errbuf[0] = '\0';
}

/* The part of an attempt that holds a permit and a handle. */
static int perform(call *c, easy *e, retryd_attempt *a, int64_t attempt_ns)
{
    CURL *h = e->curl;
    if (build_headers(c) < 0) {
        snprintf(c->errbuf, sizeof(c->errbuf), "out of memory");
        return CURLE_OUT_OF_MEMORY;
    }
    setup(c, e, attempt_ns);
    int rc = curl_easy_perform(h);
    if (rc != CURLE_OK)
        memcpy(c->errbuf, e->errbuf, sizeof(c->errbuf));
    long v = 0;
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
    return rc;
}

static void open_body(call *c)
{
    c->body_open = false;
    if (c->req->body == NULL)
        return;
    if (retryd__body_open(c->req->body, &c->body) < 0) {
        c->trace.body_source_failed = true;
        snprintf(c->errbuf, sizeof(c->errbuf), "the body could not be opened");
        return;
    }
    c->body_open = true;
}

static void describe_error(call *c, int rc)
{
    /* libcurl's error buffer keeps its first error, which after a vetoed
     * re-send is about the veto (a refused seek, an aborted callback), not
     * about what happened to the request. */
    if (c->trace.resend_blocked)
        snprintf(c->errbuf, sizeof(c->errbuf),
                 "%s; libcurl's own re-send was vetoed",
                 c->trace.refused_stream    ? "HTTP/2 stream refused"
                 : c->trace.http11_required ? "server requires HTTP/1.1"
                                            : "connection lost");
    else if (rc != CURLE_OK && c->errbuf[0] == '\0')
        snprintf(c->errbuf, sizeof(c->errbuf), "%s", curl_easy_strerror(rc));
}

static void run_attempt(call *c, uint32_t n, retryd_attempt *a)
{
    /* The first attempt starts when the call did; a retry after its wait. */
    int64_t start = n == 1 ? c->now : retryd__now_ns();
    int64_t left = c->deadline - start;
    int64_t attempt_ns =
        left < c->p->attempt_timeout_ns ? left : c->p->attempt_timeout_ns;
    int64_t permit_deadline =
        c->p->bulkhead_wait_ns && start + c->p->bulkhead_wait_ns < c->deadline
            ? start + c->p->bulkhead_wait_ns
            : c->deadline;
    int rc = CURLE_OK; /* stays so when the body did not open */
    easy *h;

    attempt_reset(c);
    a->number = n;
    if (n == 1)
        retryd_upstream_deposit(c->p->budget); /* every first attempt */
    int r = retryd__slot_take(c->p, permit_deadline, &h);
    if (r < 0) {
        a->evidence = RETRYD_EVIDENCE_NOT_SENT;
        a->failure = r == RETRYD_ETIMEDOUT ? RETRYD_FAILURE_POOL_TIMEOUT
                                           : RETRYD_FAILURE_IO;
        snprintf(c->errbuf, sizeof(c->errbuf), "%s",
                 r == RETRYD_ETIMEDOUT ? "no bulkhead permit in time"
                                       : "out of memory");
        c->now = retryd__now_ns();
        a->duration_ns = c->now - start;
        return;
    }
    open_body(c);
    if (!c->trace.body_source_failed)
        rc = perform(c, h, a, attempt_ns);
    if (c->body_open)
        retryd__body_close(&c->body);
    /* A handle whose transfer failed may carry libcurl 7.88.1's stale
     * per-handle state (the retry count, the refused-stream flag): it is
     * not reused. */
    retryd__slot_give(c->p, h, rc != CURLE_OK || c->trace.resend_blocked);
    retryd__evidence_classify(&c->trace, rc, &a->evidence, &a->failure);
    if (c->trace.http11_required)
        c->force_http11 = true; /* the server asked for HTTP/1.1 */
    describe_error(c, rc);
    a->status = c->trace.status; /* 0 unless a final block completed */
    c->now = retryd__now_ns();
    a->duration_ns = c->now - start;
}

/* --- the loop ------------------------------------------------------------ */

static void fill_facts(call *c, const retryd_attempt *a, int64_t prev_delay,
                       bool refreshed, retryd_facts *f)
{
    int64_t retry_after = -1;
    /* A success or a redirect is final whatever it says: no lookup. */
    const char *ra =
        a->status >= 400 ? retryd__hdrs_get(&c->resp, "Retry-After") : NULL;
    if (ra != NULL && retryd_retry_after_parse(
                          ra, strlen(ra), (int64_t)time(NULL),
                          c->p->backoff.max_retry_after_ns, &retry_after) < 0)
        retry_after = -1;
    int64_t left = c->deadline - c->now;
    *f = (retryd_facts){
        .attempt = a->number,
        .max_attempts = c->p->max_attempts,
        .evidence = a->evidence,
        .replayability = retryd_body_replayability(c->req->body),
        .idempotency = c->idem,
        .failure = a->failure,
        .status = a->status,
        .retry_after_ns = retry_after,
        .remaining_ns = left > 0 ? left : 0,
        .min_attempt_ns = c->p->min_attempt_ns,
        .prev_delay_ns = prev_delay,
        .response_delivered = c->delivered,
        .draining = retryd_host_draining(c->p->client->host),
        /* A refresh is there to spend when one just succeeded; without a
         * callback there is none. */
        .refresh_used =
            c->req->refresh == NULL || (c->refresh_used && !refreshed),
        .transient_500 = c->p->transient_500,
    };
}

static bool refresh(call *c);

/*
 * The decision after an attempt, counted in the upstream's statistics. A
 * complete response with a final status (retryd_status_is_final) needs
 * none: asking the engine would run the rules of a failed attempt first
 * (the budget peek among them) and count a success as a denied retry. It
 * is logged as the engine would end it, status_final.
 */
static int decide_attempt(call *c, retryd_attempt *a, int64_t prev_delay,
                          const retryd_decide_env *env)
{
    retryd_facts f;
    if (a->evidence == RETRYD_EVIDENCE_RESPONSE_RECEIVED &&
        retryd_status_is_final(a->status)) {
        a->decision = (retryd_decision){
            .verdict = RETRYD_VERDICT_DENIED,
            .reason = RETRYD_DENIAL_STATUS_NOT_RETRYABLE,
            .rule = RETRYD_RULE_STATUS_FINAL,
        };
        retryd_upstream_record(c->p->budget, NULL, a->evidence);
        return 0;
    }
    /* The one credential refresh comes before the decision, so that a
     * refresh that fails is a fact the engine sees (a 401 it does not
     * retry, no token spent), not a granted retry then abandoned. Only
     * where the 401 rule could grant it: a safe operation. */
    bool refreshed = a->status == 401 && !c->refresh_used &&
                     c->req->refresh != NULL &&
                     retryd_idempotency_is_safe(c->idem) && refresh(c);
    fill_facts(c, a, prev_delay, refreshed, &f);
    int r = retryd_decide(&f, env, &a->decision);
    if (r == 0)
        retryd_upstream_record(c->p->budget, &a->decision, a->evidence);
    return r;
}

static bool refresh(call *c)
{
    char *value = calloc(1, AUTH_MAX);
    c->refresh_used = true;
    if (value == NULL ||
        c->req->refresh(c->req->refresh_ctx, value, AUTH_MAX) < 0) {
        free(value);
        return false;
    }
    value[AUTH_MAX - 1] = '\0';
    if (!retryd__field_value_ok(value)) {
        free(value);
        return false;
    }
    free(c->auth);
    c->auth = value;
    return true;
}

static void sleep_ns(int64_t ns)
{
    int64_t until = retryd__now_ns() + ns;
    for (int64_t left = ns; left > 0; left = until - retryd__now_ns()) {
        struct timespec ts = {left / 1000000000, left % 1000000000};
        nanosleep(&ts, NULL);
    }
}

/* The attempt log grows in the call; error texts are kept only when
 * there is one. */
static int log_attempt(call *c, const retryd_attempt *a)
{
    char *text = NULL;
    if (c->errbuf[0] != '\0' && (text = strdup(c->errbuf)) == NULL)
        return RETRYD_ENOMEM;
    size_t bytes = c->cap_att * sizeof(*c->att);
    if (c->n_att == c->cap_att) {
        if (!retryd__grow((void **)&c->att, bytes, &bytes,
                          bytes + sizeof(*c->att), c->att_first)) {
            free(text);
            return RETRYD_ENOMEM;
        }
        c->cap_att = bytes / sizeof(*c->att);
    }
    c->att[c->n_att] = *a;
    c->att[c->n_att++].error = text ? text : "";
    return 0;
}

/* The result, in one allocation; a held-back body goes to the sink. */
static retryd_result *finish(call *c)
{
    bool final = c->trace.final_headers;
    bool keep_body = final && c->req->sink == NULL;
    retryd_result *r =
        retryd__result_build(c->att, c->n_att, final ? &c->resp : NULL, c->buf,
                             keep_body ? c->buf_len : 0, c->key);
    if (r == NULL)
        return NULL;
    c->n_att = 0; /* the error texts now belong to the result */
    if (final && c->req->sink != NULL && !c->stream_to_sink && c->buf_len > 0 &&
        r->outcome == RETRYD_OUTCOME_RESPONSE)
        c->req->sink(c->buf, c->buf_len, c->req->sink_ctx);
    return r;
}

static char *join_url(call *c, const char *base, const char *path)
{
    size_t bl = strlen(base);
    while (bl > 0 && base[bl - 1] == '/')
        bl--;
    if (path == NULL || *path == '\0')
        path = "/";
    size_t pl = strlen(path), sep = *path != '/';
    size_t need = bl + sep + pl + 1;
    char *u = need <= sizeof(c->url_first) ? c->url_first : malloc(need);
    if (u != NULL) {
        memcpy(u, base, bl);
        u[bl] = '/';
        memcpy(u + bl + sep, path, pl + 1);
    }
    return u;
}

/* Every field is set here; the big first-storage buffers are not zeroed,
 * only sized. */
static int call_init(call *c, retryd_profile *p, const retryd_request *req)
{
    c->p = p;
    c->req = req;
    c->idem = req->idempotency;
    c->key[0] = '\0';
    c->auth = NULL;
    c->refresh_used = c->force_http11 = c->delivered = false;
    c->now = retryd__now_ns();
    c->deadline =
        c->now + (req->deadline_ns ? req->deadline_ns : DEFAULT_DEADLINE_NS);
    c->body_open = false;
    retryd__hdrs_init(&c->resp, c->hdr_first, sizeof(c->hdr_first),
                      c->hdr_off_first,
                      sizeof(c->hdr_off_first) / (2 * sizeof(uint32_t)));
    c->buf = c->body_first;
    c->buf_len = 0;
    c->buf_cap = sizeof(c->body_first);
    c->att = c->att_first;
    c->n_att = 0;
    c->cap_att = sizeof(c->att_first) / sizeof(c->att_first[0]);
    c->headers = NULL;
    c->url = join_url(c, p->base_url, req->path);
    if (c->url == NULL)
        return RETRYD_ENOMEM;
    if (req->idempotency_key || req->idempotency_key_value) {
        if (req->idempotency_key_value) {
            snprintf(c->key, sizeof(c->key), "%s", req->idempotency_key_value);
        } else {
            uuid_t u;
            uuid_generate_random(u);
            uuid_unparse_lower(u, c->key);
        }
        /* A replay with the same key is deduplicated by the upstream. */
        c->idem = RETRYD_IDEMPOTENCY_BY_KEY;
    }
    return 0;
}

static void call_free(call *c)
{
    if (c->url != c->url_first)
        free(c->url);
    if (c->buf != c->body_first)
        free(c->buf);
    free(c->auth);
    retryd__hdrs_free(&c->resp);
    for (size_t i = 0; i < c->n_att; i++)
        if (c->att[i].error[0] != '\0')
            free((char *)(uintptr_t)c->att[i].error);
    if (c->att != c->att_first)
        free(c->att);
}

int retryd_execute(retryd_profile *p, const retryd_request *req,
                   retryd_result **ret)
{
    call c;
    int64_t prev_delay = 0, wait = 0;
    retryd_decide_env env = {.backoff = NULL,
                             .budget = &retryd_upstream_budget};
    int r;

    retryd_request rq = {0}; /* the caller's, at this library's size */
    if (p == NULL || req == NULL || ret == NULL ||
        RETRYD_COPY_OPTS(&rq, req, sizeof(size_t)) < 0 || validate(&rq) < 0)
        return RETRYD_EINVAL;
    req = &rq;
    r = call_init(&c, p, req);
    if (r < 0)
        goto out;
    env.backoff = &p->backoff;
    env.budget_ctx = p->budget;
    for (uint32_t n = 1;; n++) {
        retryd_attempt a = {.wait_before_ns = wait};
        run_attempt(&c, n, &a);
        r = decide_attempt(&c, &a, prev_delay, &env);
        if (r < 0)
            goto out;
        r = log_attempt(&c, &a);
        if (r < 0)
            goto out;
        if (a.decision.verdict != RETRYD_VERDICT_RETRY)
            break;
        /* Nothing is held while waiting: the permit and the handle went
         * back when the attempt ended. */
        wait = a.decision.delay_ns;
        sleep_ns(wait);
        prev_delay = wait;
    }
    *ret = finish(&c);
    r = *ret ? 0 : RETRYD_ENOMEM;
out:
    call_free(&c);
    return r;
}
