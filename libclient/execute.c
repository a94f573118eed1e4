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

#include "body_internal.h"
#include "evidence.h"
#include "executor.h"

#define DEFAULT_DEADLINE_NS (30 * INT64_C(1000000000))
#define HEADER_MAX_BYTES (64 * 1024)
#define HEADER_MAX_LINES 256
#define AUTH_MAX 4096

typedef struct header_list {
    char **names, **values;
    size_t n, cap;
} header_list;

typedef struct call {
    retryd_profile *p;
    const retryd_request *req;
    retryd_result *res;
    char *url;
    retryd_idempotency idem;
    char key[40];
    char auth[AUTH_MAX];
    bool auth_override, refresh_used, force_http11, delivered;
    int64_t deadline;
    /* One attempt's state, reset before each. */
    attempt_trace trace;
    retryd_body_reader body;
    bool body_open;
    header_list pending, final;
    int pending_status;
    size_t header_bytes, header_lines;
    bool stream_to_sink;
    unsigned char *buf;
    size_t buf_len, buf_cap;
    struct curl_slist *headers;
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
    for (const char *q = colon; *q; q++)
        if (*q == '\r' || *q == '\n' || *q == '\0')
            return false;
    return true;
}

static bool value_ok(const char *v)
{
    for (; *v; v++)
        if (*v == '\r' || *v == '\n')
            return false;
    return true;
}

static int validate(const retryd_request *r)
{
    if (r->sz < sizeof(size_t) || r->sz > 4 * sizeof(*r))
        return RETRYD_EINVAL;
    if ((r->method && !method_ok(r->method)) || (r->path && !path_ok(r->path)))
        return RETRYD_EINVAL;
    if ((unsigned)r->idempotency >= RETRYD_IDEMPOTENCY_COUNT ||
        r->deadline_ns < 0)
        return RETRYD_EINVAL;
    if (r->idempotency_key_value &&
        (!value_ok(r->idempotency_key_value) ||
         strlen(r->idempotency_key_value) >= 40 || !*r->idempotency_key_value))
        return RETRYD_EINVAL;
    for (size_t i = 0; r->headers && r->headers[i]; i++)
        if (!header_line_ok(r->headers[i]) || i > 1000)
            return RETRYD_EINVAL;
    return 0;
}

/* --- response headers ---------------------------------------------------- */

static void headers_clear(header_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->names[i]);
        free(l->values[i]);
    }
    l->n = 0;
}

static void headers_free(header_list *l)
{
    headers_clear(l);
    free(l->names);
    free(l->values);
    memset(l, 0, sizeof(*l));
}

static bool headers_add(header_list *l, const char *line, size_t len)
{
    const char *colon = memchr(line, ':', len);
    if (colon == NULL)
        return true; /* not a field: ignore, as libcurl does */
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **nn = realloc(l->names, cap * sizeof(*nn));
        if (nn == NULL)
            return false;
        l->names = nn;
        char **nv = realloc(l->values, cap * sizeof(*nv));
        if (nv == NULL)
            return false;
        l->values = nv;
        l->cap = cap;
    }
    const char *v = colon + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    l->names[l->n] = strndup(line, (size_t)(colon - line));
    l->values[l->n] = strndup(v, (size_t)(end - v));
    if (!l->names[l->n] || !l->values[l->n]) {
        free(l->names[l->n]);
        free(l->values[l->n]);
        return false;
    }
    l->n++;
    return true;
}

static const char *headers_get(const header_list *l, const char *name)
{
    const char *v = NULL;
    for (size_t i = 0; i < l->n; i++)
        if (strcasecmp(l->names[i], name) == 0)
            v = l->values[i];
    return v;
}

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
    call *c = ctx;
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
    call *c = ctx;
    (void)h;
    if (type == CURLINFO_TEXT)
        retryd__trace_text(&c->trace, data, size);
    else if ((type == CURLINFO_HEADER_OUT || type == CURLINFO_DATA_OUT) &&
             c->trace.prereq_calls == 1)
        c->trace.bytes_out += size; /* reported after a successful write */
    return 0;
}

static void final_block(call *c)
{
    attempt_trace *t = &c->trace;
    t->final_headers = true;
    t->status = c->pending_status;
    header_list tmp = c->final;
    c->final = c->pending;
    c->pending = tmp;
    headers_clear(&c->pending);
    /* A success streams straight to the caller's sink; anything else is
     * held back until the engine has said whether it is final. */
    c->stream_to_sink = c->req->sink != NULL && t->status / 100 == 2;
}

static size_t on_header(char *line, size_t size, size_t n, void *ctx)
{
    call *c = ctx;
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
        headers_clear(&c->pending);
        c->pending_status = status;
    } else if (len <= 2 && (line[0] == '\r' || line[0] == '\n')) {
        if (c->pending_status >= 200)
            final_block(c);
        else
            headers_clear(&c->pending);
    } else {
        size_t l = len;
        while (l > 0 && (line[l - 1] == '\r' || line[l - 1] == '\n'))
            l--;
        if (!headers_add(&c->pending, line, l))
            return 0;
    }
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    call *c = ctx;
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
    if (c->buf_len + len > c->buf_cap) {
        size_t cap = c->buf_cap ? c->buf_cap : 4096;
        while (cap < c->buf_len + len)
            cap *= 2;
        unsigned char *nb = realloc(c->buf, cap);
        if (nb == NULL)
            return 0;
        c->buf = nb;
        c->buf_cap = cap;
    }
    memcpy(c->buf + c->buf_len, data, len);
    c->buf_len += len;
    return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *ctx)
{
    call *c = ctx;
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

static int build_headers(call *c)
{
    const retryd_request *r = c->req;
    struct curl_slist *l = NULL, *n;
    char line[AUTH_MAX + 64];
    bool has_ct = false;

#define ADD(s)                                                                 \
    do {                                                                       \
        if ((n = curl_slist_append(l, (s))) == NULL)                           \
            goto oom;                                                          \
        l = n;                                                                 \
    } while (0)
    for (size_t i = 0; r->headers && r->headers[i]; i++) {
        if (c->auth_override &&
            strncasecmp(r->headers[i], "Authorization:", 14) == 0)
            continue;
        has_ct |= strncasecmp(r->headers[i], "Content-Type:", 13) == 0;
        ADD(r->headers[i]);
    }
    /* No 100-continue handshake: its 417 path is another re-send. */
    ADD("Expect:");
    if (c->key[0]) {
        snprintf(line, sizeof(line), "Idempotency-Key: %s", c->key);
        ADD(line);
    }
    if (!has_ct && retryd_body_content_type(r->body)) {
        snprintf(line, sizeof(line), "Content-Type: %s",
                 retryd_body_content_type(r->body));
        ADD(line);
    }
    if (c->auth_override) {
        snprintf(line, sizeof(line), "Authorization: %s", c->auth);
        ADD(line);
    }
#undef ADD
    c->headers = l;
    return 0;
oom:
    curl_slist_free_all(l);
    return RETRYD_ENOMEM;
}

static long ms_of(int64_t ns)
{
    long ms = (long)(ns / 1000000);
    return ms > 0 ? ms : 1; /* 0 would mean "no timeout" to libcurl */
}

static void set_method(call *c, CURL *h)
{
    const char *m = c->req->method ? c->req->method : "GET";
    if (c->body_open) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, c);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)c->body.length);
        if (strcmp(m, "POST") != 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
    } else if (strcmp(m, "GET") == 0) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(m, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(m, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
    } else {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
    }
}

static void set_version(call *c, CURL *h)
{
    retryd_http_version v =
        c->force_http11 ? RETRYD_HTTP_1_1 : c->p->http_version;
    long cv = v == RETRYD_HTTP_2_TLS ? CURL_HTTP_VERSION_2TLS
              : v == RETRYD_HTTP_2_PRIOR_KNOWLEDGE
                  ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
                  : CURL_HTTP_VERSION_1_1;
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, cv);
    /* libcurl 7.88.1 breaks h2c prior-knowledge requests on a reused
     * connection (fixed in 8.0): one connection per h2c request. */
    if (v == RETRYD_HTTP_2_PRIOR_KNOWLEDGE &&
        curl_version_info(CURLVERSION_NOW)->version_num < 0x080000)
        curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
}

static void setup(call *c, CURL *h, int64_t attempt_ns)
{
    retryd_profile *p = c->p;
    curl_easy_reset(h); /* keeps the connection cache, clears the rest */
    curl_easy_setopt(h, CURLOPT_URL, c->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* never an environment proxy */
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms_of(attempt_ns));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     ms_of(p->connect_timeout_ns < attempt_ns
                               ? p->connect_timeout_ns
                               : attempt_ns));
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
    /* Verbose output only through the debug callback: that is where the
     * stages show (bytes written, stream ids, GOAWAY, re-sends). */
    curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
    curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, on_debug);
    curl_easy_setopt(h, CURLOPT_DEBUGDATA, c);
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, on_prereq);
    curl_easy_setopt(h, CURLOPT_PREREQDATA, c);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, c);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
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
    set_version(c, h);
    set_method(c, h);
}

static void attempt_reset(call *c)
{
    retryd__trace_init(&c->trace);
    headers_clear(&c->pending);
    headers_clear(&c->final);
    c->pending_status = 0;
    c->header_bytes = c->header_lines = 0;
    c->stream_to_sink = false;
    c->buf_len = 0;
    c->errbuf[0] = '\0';
}

/* The part of an attempt that holds a permit and a handle. */
static int perform(call *c, retryd_attempt *a, int64_t attempt_ns)
{
    int rc = CURLE_OK;
    CURL *h = retryd__handle_take(c->p);
    if (h == NULL || build_headers(c) < 0) {
        snprintf(c->errbuf, sizeof(c->errbuf), "out of memory");
        if (h != NULL)
            curl_easy_cleanup(h);
        return CURLE_OUT_OF_MEMORY;
    }
    setup(c, h, attempt_ns);
    rc = curl_easy_perform(h);
    long v = 0;
    curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &v);
    a->http_version = v == CURL_HTTP_VERSION_2_0   ? 20
                      : v == CURL_HTTP_VERSION_1_1 ? 11
                      : v == CURL_HTTP_VERSION_1_0 ? 10
                                                   : 0;
    if (c->trace.http_major == 0 && a->http_version)
        c->trace.http_major = a->http_version / 10;
    if (rc == CURLE_SEND_FAIL_REWIND)
        c->trace.resend_blocked = true; /* it wanted to send it again */
    /* A handle whose transfer failed may carry libcurl 7.88.1's stale
     * per-handle state (the retry count, the refused-stream flag): it is
     * not reused. */
    retryd__handle_give(c->p, h, rc != CURLE_OK || c->trace.resend_blocked);
    curl_slist_free_all(c->headers);
    c->headers = NULL;
    return rc;
}

static void run_attempt(call *c, uint32_t n, retryd_attempt *a)
{
    int64_t start = retryd__now_ns(), left = c->deadline - start;
    int64_t attempt_ns =
        left < c->p->attempt_timeout_ns ? left : c->p->attempt_timeout_ns;
    int64_t permit_deadline =
        c->p->bulkhead_wait_ns && start + c->p->bulkhead_wait_ns < c->deadline
            ? start + c->p->bulkhead_wait_ns
            : c->deadline;
    int rc = CURLE_OK;

    attempt_reset(c);
    a->number = n;
    if (retryd__permit_take(c->p, permit_deadline) < 0) {
        a->evidence = RETRYD_EVIDENCE_NOT_SENT;
        a->failure = RETRYD_FAILURE_POOL_TIMEOUT;
        snprintf(c->errbuf, sizeof(c->errbuf), "no bulkhead permit in time");
        a->duration_ns = retryd__now_ns() - start;
        return;
    }
    if (n == 1)
        retryd_upstream_deposit(c->p->budget); /* every first attempt */
    c->body_open = false;
    if (c->req->body != NULL) {
        if (retryd__body_open(c->req->body, &c->body) < 0) {
            c->trace.body_source_failed = true;
            snprintf(c->errbuf, sizeof(c->errbuf),
                     "the body could not be "
                     "opened");
            rc = CURLE_READ_ERROR;
        } else {
            c->body_open = true;
        }
    }
    if (rc == CURLE_OK)
        rc = perform(c, a, attempt_ns);
    if (c->body_open)
        retryd__body_close(&c->body);
    retryd__permit_give(c->p);
    retryd__evidence_classify(&c->trace, rc, &a->evidence, &a->failure);
    if (c->trace.http11_required)
        c->force_http11 = true; /* the server asked for HTTP/1.1 */
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
    a->status = c->trace.final_headers ? c->trace.status : 0;
    a->duration_ns = retryd__now_ns() - start;
}

/* --- the loop ------------------------------------------------------------ */

static void fill_facts(call *c, const retryd_attempt *a, int64_t prev_delay,
                       retryd_facts *f)
{
    int64_t retry_after = -1;
    const char *ra = a->status ? headers_get(&c->final, "Retry-After") : NULL;
    if (ra != NULL && retryd_retry_after_parse(
                          ra, strlen(ra), (int64_t)time(NULL),
                          c->p->backoff.max_retry_after_ns, &retry_after) < 0)
        retry_after = -1;
    int64_t left = c->deadline - retryd__now_ns();
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
        /* Without a refresh callback there is no refresh to spend. */
        .refresh_used = c->refresh_used || c->req->refresh == NULL,
        .transient_500 = c->p->transient_500,
    };
}

static bool refresh(call *c)
{
    c->refresh_used = true;
    c->auth[0] = '\0';
    if (c->req->refresh(c->req->refresh_ctx, c->auth, sizeof(c->auth)) < 0)
        return false;
    c->auth[sizeof(c->auth) - 1] = '\0';
    if (!value_ok(c->auth))
        return false;
    c->auth_override = true;
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

/* Move the final response into the result; deliver a held-back body. */
static void finish(call *c, const retryd_attempt *last)
{
    retryd_result *r = c->res;
    r->evidence = last->evidence;
    r->decision = last->decision;
    r->status = last->status;
    snprintf(r->error, sizeof(r->error), "%s", last->error);
    if (last->decision.verdict == RETRYD_VERDICT_AMBIGUOUS)
        r->outcome = RETRYD_OUTCOME_AMBIGUOUS;
    else if (last->evidence == RETRYD_EVIDENCE_RESPONSE_RECEIVED)
        r->outcome = RETRYD_OUTCOME_RESPONSE;
    else
        r->outcome = RETRYD_OUTCOME_FAILURE;
    if (!c->trace.final_headers)
        return;
    r->hdr_names = c->final.names;
    r->hdr_values = c->final.values;
    r->n_headers = c->final.n;
    memset(&c->final, 0, sizeof(c->final));
    if (c->req->sink != NULL && !c->stream_to_sink && c->buf_len > 0 &&
        r->outcome == RETRYD_OUTCOME_RESPONSE)
        c->req->sink(c->buf, c->buf_len, c->req->sink_ctx);
    else if (c->req->sink == NULL) {
        r->body = c->buf;
        r->body_len = c->buf_len;
        c->buf = NULL;
    }
}

static char *join_url(const char *base, const char *path)
{
    size_t bl = strlen(base);
    while (bl > 0 && base[bl - 1] == '/')
        bl--;
    const char *sep = path && *path && *path != '/' ? "/" : "";
    size_t n = bl + strlen(sep) + (path ? strlen(path) : 0) + 2;
    char *u = malloc(n);
    if (u != NULL)
        snprintf(u, n, "%.*s%s%s", (int)bl, base, sep,
                 path && *path ? path : "/");
    return u;
}

static int call_init(call *c, retryd_profile *p, const retryd_request *req)
{
    memset(c, 0, sizeof(*c));
    c->p = p;
    c->req = req;
    c->idem = req->idempotency;
    c->deadline = retryd__now_ns() +
                  (req->deadline_ns ? req->deadline_ns : DEFAULT_DEADLINE_NS);
    c->url = join_url(p->base_url, req->path);
    c->res = retryd__result_new();
    if (c->url == NULL || c->res == NULL)
        return RETRYD_ENOMEM;
    if (req->idempotency_key || req->idempotency_key_value) {
        if (req->idempotency_key_value) {
            snprintf(c->key, sizeof(c->key), "%s", req->idempotency_key_value);
        } else {
            uuid_t u;
            uuid_generate_random(u);
            uuid_unparse_lower(u, c->key);
        }
        memcpy(c->res->idempotency_key, c->key, sizeof(c->key));
        /* A replay with the same key is deduplicated by the upstream. */
        c->idem = RETRYD_IDEMPOTENCY_BY_KEY;
    }
    return 0;
}

static void call_free(call *c)
{
    free(c->url);
    free(c->buf);
    headers_free(&c->pending);
    headers_free(&c->final);
}

int retryd_execute(retryd_profile *p, const retryd_request *req,
                   retryd_result **ret)
{
    call c;
    int64_t prev_delay = 0, wait = 0;
    retryd_decide_env env = {.backoff = NULL,
                             .budget = &retryd_upstream_budget};
    int r;

    if (p == NULL || req == NULL || ret == NULL || validate(req) < 0)
        return RETRYD_EINVAL;
    r = call_init(&c, p, req);
    if (r < 0)
        goto out;
    env.backoff = &p->backoff;
    env.budget_ctx = p->budget;
    for (uint32_t n = 1;; n++) {
        retryd_attempt a = {.wait_before_ns = wait};
        retryd_facts f;
        run_attempt(&c, n, &a);
        fill_facts(&c, &a, prev_delay, &f);
        r = retryd_decide(&f, &env, &a.decision);
        if (r < 0)
            goto out;
        retryd_upstream_record(p->budget, &a.decision, a.evidence);
        r = retryd__result_add_attempt(c.res, &a, c.errbuf);
        if (r < 0)
            goto out;
        bool again = a.decision.verdict == RETRYD_VERDICT_RETRY;
        if (again && (a.decision.flags & RETRYD_RETRY_REFRESH_CREDENTIALS))
            again = refresh(&c);
        if (!again) {
            finish(&c, &c.res->attempts[c.res->n_attempts - 1].pub);
            break;
        }
        /* Nothing is held while waiting: the permit and the handle went
         * back when the attempt ended. */
        wait = a.decision.delay_ns;
        sleep_ns(wait);
        prev_delay = wait;
    }
    *ret = c.res;
    c.res = NULL;
    r = 0;
out:
    retryd_result_free(c.res);
    call_free(&c);
    return r;
}
