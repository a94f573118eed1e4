/* SPDX-License-Identifier: MIT */
/*
 * retrydctl request: one HTTP request through libretryd and the host
 * budget, from a shell, typed as with curl (ctl_request_opts.c). Like
 * curl, the response body goes to stdout (or -o FILE); the outcome and the
 * evidence go to stderr, and the exit code tells the three answers apart:
 *
 *   0  response   final headers arrived (whatever the status, unless -f)
 *   1  failure    no response, and nothing that must not run twice ran
 *   2  ambiguous  the request may have executed: reconcile before replaying
 *   22 -f and a status >= 400; 47 -L past --max-redirs; 64 usage; 70 error
 *
 * Without --safe, --idempotent or a key a request is non-idempotent: the
 * method never decides, and -v (or an ambiguous answer) says so in words.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_request.h"
#include "ctl_status.h"

/* One request of a call (the first, or a redirect's). */
typedef struct hop {
    char *url;          /* absolute, owned */
    const char *method; /* a->method, or GET after a 303 */
    bool with_body;
    bool foreign; /* another scheme, host or port than the first URL's */
} hop;

typedef struct output {
    FILE *out;        /* stdout or -o FILE */
    bool write_error; /* a write or the final flush failed: exit 23 */
    int write_errno;  /* the first failure's */
    size_t bytes;     /* of body written, for -w's %{size_download} */
} output;

static void write_failed(output *o)
{
    if (!o->write_error)
        o->write_errno = errno;
    o->write_error = true;
}

/* Split URL into the profile's base (scheme://host[:port]) and the path
 * with its query. */
static int split_url(const char *url, char **base, char **path)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *p = NULL, *q = NULL;
    int r = -1;
    if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PATH, &p, 0) == CURLUE_OK) {
        curl_url_get(u, CURLUPART_PORT, &port, 0);
        curl_url_get(u, CURLUPART_QUERY, &q, 0);
        size_t nb = strlen(scheme) + strlen(host) + 16;
        size_t np = strlen(p) + (q ? strlen(q) + 2 : 1);
        *base = malloc(nb);
        *path = malloc(np);
        if (*base && *path) {
            snprintf(*base, nb, "%s://%s%s%s", scheme, host, port ? ":" : "",
                     port ? port : "");
            snprintf(*path, np, "%s%s%s", p, q ? "?" : "", q ? q : "");
            r = 0;
        }
    }
    curl_free(scheme), curl_free(host), curl_free(port), curl_free(p);
    curl_free(q);
    curl_url_cleanup(u);
    return r;
}

/* @p location resolved against @p from (a redirect's target), malloc'ed,
 * or NULL. */
static char *resolve(const char *from, const char *location)
{
    CURLU *u = curl_url();
    char *url = NULL, *copy = NULL;
    if (u && curl_url_set(u, CURLUPART_URL, from, 0) == CURLUE_OK &&
        curl_url_set(u, CURLUPART_URL, location, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_URL, &url, 0) == CURLUE_OK)
        copy = strdup(url);
    curl_free(url);
    curl_url_cleanup(u);
    return copy;
}

/* A URL's scheme, host and port (the scheme's default when it names
 * none), in @p out; false when it does not parse. */
static bool origin_of(const char *url, char *out, size_t len)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL;
    bool ok =
        u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK;
    if (ok)
        ok = (size_t)snprintf(out, len, "%s://%s:%s", scheme, host, port) < len;
    curl_free(scheme), curl_free(host), curl_free(port);
    curl_url_cleanup(u);
    return ok;
}

/* Whether @p to is another origin than @p first: curl's rule for where
 * credentials may go on a redirect (CURLOPT_UNRESTRICTED_AUTH: "one or
 * more of hostname, protocol scheme or port number changed"). A URL that
 * does not parse counts as foreign. */
static bool is_foreign(const char *first, const char *to)
{
    char a[512], b[512];
    return !origin_of(first, a, sizeof(a)) || !origin_of(to, b, sizeof(b)) ||
           strcasecmp(a, b) != 0;
}

static bool header_is(const char *line, const char *name)
{
    size_t n = strlen(name);
    return strncasecmp(line, name, n) == 0 && line[n] == ':';
}

/* The hop's request headers, into @p out (REQ_MAX_HEADERS + 5 slots):
 * all of them, except that a foreign hop gets no Authorization and no
 * Cookie unless --location-trusted, so that -u, -H 'Authorization: ...'
 * and -H 'Cookie: ...' never leak to a host a redirect names (nor -b's
 * cookies: hop_cookie). */
static const char **hop_headers(const req_args *a, const hop *h,
                                const char **out)
{
    size_t n = 0;
    for (size_t i = 0; i < a->n_headers; i++) {
        const char *line = a->headers[i];
        if (h->foreign && !a->location_trusted &&
            (header_is(line, "Authorization") || header_is(line, "Cookie")))
            continue;
        out[n++] = line;
    }
    out[n] = NULL;
    return out;
}

/* -b's "name=value" cookies for the hop: not to another origin than the
 * first URL's unless --location-trusted, as a Cookie header (curl sends
 * them everywhere: retrydctl(1), the differences). The engine's cookies
 * go by their own domains and paths. */
static const char *hop_cookie(const req_args *a, const hop *h)
{
    return h->foreign && !a->location_trusted ? NULL : a->cookie;
}

/* The first URL: -G puts the data in its query, as curl does. */
static char *first_url(const req_args *a)
{
    if (!a->get_query || a->data == NULL)
        return strdup(a->url);
    size_t n = strlen(a->url) + a->data_len + 2;
    char *url = malloc(n);
    if (url)
        snprintf(url, n, "%s%c%s", a->url, strchr(a->url, '?') ? '&' : '?',
                 a->data);
    return url;
}

static long stdin_read(void *ctx, void *buf, size_t len)
{
    (void)ctx;
    ssize_t n = read(0, buf, len);
    return n < 0 ? -1 : (long)n;
}

static int make_body(const req_args *a, retryd_body **ret)
{
    *ret = NULL;
    if (a->data_file && strcmp(a->data_file, "-") == 0) {
        retryd_body_reader r = {sizeof(retryd_body_reader), stdin_read, NULL,
                                NULL, -1};
        return retryd_body_new_stream(&r, ret);
    }
    if (a->data_file)
        return retryd_body_new_file(a->data_file, ret);
    if (a->data && !a->get_query)
        return retryd_body_new_bytes(a->data, a->data_len, ret);
    if (a->n_form) {
        const retryd_mime_part *parts[REQ_MAX_FORM];
        for (size_t i = 0; i < a->n_form; i++)
            parts[i] = &a->form[i];
        return retryd_body_new_mime(parts, a->n_form, ret);
    }
    return 0;
}

static size_t to_output(const void *data, size_t len, void *ctx)
{
    output *o = ctx;
    size_t n = fwrite(data, 1, len, o->out);
    o->bytes += n;
    if (n != len)
        write_failed(o);
    return n;
}

/* curl's exit code for a failure's category, where curl has one; 1
 * otherwise (what retryd's own failures, a body source or the budget's
 * pool, exit with). */
static int failure_exit(retryd_failure f)
{
    switch (f) {
    case RETRYD_FAILURE_DNS:
        return REQ_EXIT_DNS;
    case RETRYD_FAILURE_CONNECT:
        return REQ_EXIT_CONNECT;
    case RETRYD_FAILURE_BODY_SOURCE:
        return REQ_EXIT_READ;
    case RETRYD_FAILURE_TLS_HANDSHAKE:
        return REQ_EXIT_TLS;
    case RETRYD_FAILURE_TLS_CERTIFICATE:
        return REQ_EXIT_CERTIFICATE;
    case RETRYD_FAILURE_TIMEOUT:
    case RETRYD_FAILURE_POOL_TIMEOUT:
        return REQ_EXIT_TIMEOUT;
    case RETRYD_FAILURE_CONNECTION_LOST:
        return REQ_EXIT_LOST;
    case RETRYD_FAILURE_MALFORMED:
        return REQ_EXIT_MALFORMED;
    case RETRYD_FAILURE_TOO_MANY_REDIRECTS:
        return REQ_EXIT_TOO_MANY_REDIRS;
    default:
        return REQ_EXIT_FAILURE;
    }
}

/* The failure of the last attempt made, or NONE without one. */
static retryd_failure last_failure(const retryd_result *r)
{
    size_t n = retryd_result_attempt_count(r);
    return n ? retryd_result_attempt(r, n - 1)->failure : RETRYD_FAILURE_NONE;
}

/* The hedging line of the trail: hedges sent, whether one answered, and
 * why no (further) hedge went out (docs/hedging.md). */
static void print_hedging(const retryd_result *r)
{
    const retryd_hedge_decision *d = retryd_result_hedge(r);
    bool won;
    uint32_t n = retryd_result_hedges(r, &won);
    if (d == NULL)
        return;
    fprintf(stderr, "retrydctl: hedging: %u hedge%s sent%s", n,
            n == 1 ? "" : "s",
            n == 0 ? ""
            : won  ? ", one answered"
                   : ", none answered");
    if (d->verdict == RETRYD_HEDGE_NO)
        fprintf(stderr, "; no %shedge: %s", n ? "further " : "",
                retryd_hedge_rule_name(d->rule));
    else if (d->verdict == RETRYD_HEDGE_WAIT)
        fprintf(stderr, "; answered before %s hedge was due",
                n ? "the next" : "a");
    fprintf(stderr, "\n");
}

static void print_trace(const retryd_result *r)
{
    for (size_t i = 0; i < retryd_result_attempt_count(r); i++) {
        const retryd_attempt *at = retryd_result_attempt(r, i);
        fprintf(stderr, "retrydctl: attempt %u: %s/%s status %d", at->number,
                retryd_evidence_name(at->evidence),
                retryd_failure_name(at->failure), at->status);
        if (at->http_version)
            fprintf(stderr, " HTTP/%d.%d", at->http_version / 10,
                    at->http_version % 10);
        /* Its role, and when it went out (a hedge's is the point). */
        fprintf(stderr, " %.1fms (%s, +%.1fms) -> %s (%s)",
                (double)at->duration_ns / 1e6,
                retryd_attempt_role_name(at->role),
                (double)at->started_ns / 1e6,
                retryd_verdict_name(at->decision->verdict),
                retryd_rule_name(at->decision->rule));
        if (at->decision->verdict == RETRYD_VERDICT_RETRY)
            fprintf(stderr, ", wait %.1fms%s",
                    (double)at->decision->delay_ns / 1e6,
                    at->decision->flags & RETRYD_RETRY_HELD_BY_PUSHBACK
                        ? " (host pushback)"
                        : "");
        /* The hold a host pushback added before it (docs/health.md). */
        if (at->held_ns > 0)
            fprintf(stderr, ", held %.1fms by a host pushback",
                    (double)at->held_ns / 1e6);
        fprintf(stderr, "%s%s\n", at->error[0] ? ": " : "", at->error);
    }
    print_hedging(r);
}

/* The rule that the method never decides, in words, where it matters: on
 * -v, or when the answer is ambiguous because nothing was declared. */
static void explain_idempotency(const req_args *a, const hop *h,
                                const retryd_result *r)
{
    if (a->idem_declared || !req_says(a, false) ||
        !(a->verbose || retryd_result_outcome(r) == RETRYD_OUTCOME_AMBIGUOUS))
        return;
    fprintf(stderr,
            "retrydctl: no idempotency was declared, so %s %s was treated "
            "as non-idempotent (retryd never infers it from the method): "
            "after a timeout or a 502/503/504 it may have executed, so it "
            "is not retried and the answer is ambiguous. If repeating it is "
            "harmless, say --safe (read-only) or --idempotent; for a write "
            "the upstream deduplicates, --idempotency-key.\n",
            h->method, h->url);
}

static void print_headers(FILE *f, const char *prefix, const retryd_result *r)
{
    const retryd_attempt *last =
        retryd_result_attempt(r, retryd_result_attempt_count(r) - 1);
    int v = last->http_version ? last->http_version : 11;
    /* As curl writes it: HTTP/2's line ends in a space (no reason). */
    if (v == 20)
        fprintf(f, "%sHTTP/2 %d \r\n", prefix, retryd_result_status(r));
    else
        fprintf(f, "%sHTTP/%d.%d %d%s%s\r\n", prefix, v / 10, v % 10,
                retryd_result_status(r), *retryd_result_reason(r) ? " " : "",
                retryd_result_reason(r));
    for (size_t i = 0; i < retryd_result_header_count(r); i++) {
        const char *name, *value;
        if (retryd_result_header_at(r, i, &name, &value) == 0)
            fprintf(f, "%s%s: %s\r\n", prefix, name, value);
    }
    fprintf(f, "%s\r\n", prefix);
}

/* The summary's first line: the outcome, its evidence and attempts (and
 * hedges), why no further attempt followed. */
static void summary_line(const retryd_result *r)
{
    retryd_outcome o = retryd_result_outcome(r);
    const retryd_decision *d = retryd_result_decision(r);
    fprintf(stderr, "retrydctl: %s", retryd_outcome_name(o));
    if (retryd_result_status(r))
        fprintf(stderr, " %d", retryd_result_status(r));
    fprintf(stderr, " (evidence %s, %zu attempt%s",
            retryd_evidence_name(retryd_result_evidence(r)),
            retryd_result_attempt_count(r),
            retryd_result_attempt_count(r) == 1 ? "" : "s");
    bool won;
    uint32_t hedges = retryd_result_hedges(r, &won);
    if (hedges > 0)
        fprintf(stderr, " of which %u hedge%s%s", hedges,
                hedges == 1 ? "" : "s", won ? ", a hedge answered" : "");
    /* Why no further attempt followed, unless the answer was a success
     * that needed none. */
    if (d->reason != RETRYD_DENIAL_NONE &&
        !(o == RETRYD_OUTCOME_RESPONSE && retryd_result_status(r) < 400))
        fprintf(stderr, ", no retry: %s (%s)", retryd_denial_name(d->reason),
                retryd_rule_name(d->rule));
    fprintf(stderr, ")%s%s\n", retryd_result_error(r)[0] ? ": " : "",
            retryd_result_error(r));
}

static int summary(const req_args *a, const retryd_result *r)
{
    retryd_outcome o = retryd_result_outcome(r);
    const retryd_decision *d = retryd_result_decision(r);
    const char *key = retryd_result_idempotency_key(r);
    if (req_says(a, o != RETRYD_OUTCOME_RESPONSE))
        summary_line(r);
    if (o == RETRYD_OUTCOME_AMBIGUOUS && req_says(a, true))
        fprintf(stderr,
                "retrydctl: the request may have executed; reconcile "
                "before replaying%s%s\n",
                key ? " (Idempotency-Key: " : "", key ? key : "");
    if (o == RETRYD_OUTCOME_THROTTLED && req_says(a, true))
        fprintf(stderr,
                "retrydctl: not sent: %s upstream %s; the upstream did not "
                "fail here. Try again later.\n",
                d->rule == RETRYD_RULE_HOST_THROTTLED
                    ? "the host throttle (docs/health.md) kept it back from"
                    : "a host pushback would have held it past the deadline "
                      "on",
                a->upstream ? a->upstream : "(the URL's host:port)");
    if (key && req_says(a, false))
        fprintf(stderr, "retrydctl: Idempotency-Key: %s\n", key);
    switch (o) {
    case RETRYD_OUTCOME_RESPONSE:
        return REQ_EXIT_RESPONSE;
    case RETRYD_OUTCOME_FAILURE:
        return failure_exit(last_failure(r));
    case RETRYD_OUTCOME_THROTTLED:
        return REQ_EXIT_THROTTLED;
    case RETRYD_OUTCOME_AMBIGUOUS:
        break;
    }
    return REQ_EXIT_AMBIGUOUS;
}

/* Whether the whole response must be seen before any of it is written:
 * the headers first (-i, -I), nothing on an error (-f), or a redirect to
 * follow (-L). Otherwise the body streams to the output as it arrives. */
static bool buffered(const req_args *a)
{
    /* A hedged request's body is written once its answer is known: a
     * streamed response is never hedged (docs/hedging.md). */
    return a->include || a->head || a->fail || a->follow ||
           a->hedge != RETRYD_HEDGE_OFF;
}

/* One request through a profile of its own base URL. */
static int execute_hop(retryd_client *client, const req_args *a, const hop *h,
                       output *o, retryd_result **ret)
{
    const retryd_tls_opts tls = {
        .sz = sizeof(tls), .ca_file = a->cacert, .insecure = a->insecure};
    retryd_profile *profile = NULL;
    retryd_body *body = NULL;
    const char *headers[REQ_MAX_HEADERS + 5];
    char *base = NULL, *path = NULL;
    int r = split_url(h->url, &base, &path) < 0 ? RETRYD_EINVAL : 0;
    if (r == 0 && h->with_body && make_body(a, &body) < 0)
        r = RETRYD_EINVAL;
    retryd_profile_opts po = {
        .sz = sizeof(po),
        .base_url = base,
        .upstream = a->upstream,
        .max_attempts = (uint32_t)a->max_attempts,
        .attempt_timeout_ns = a->attempt_ns,
        .connect_timeout_ns = a->connect_ns,
        .http_version = a->version,
        .tls = &tls,
        .resolve = a->n_resolve ? a->resolve : NULL,
        .proxy = a->proxy,
        .accept_encoding = a->compressed ? "" : NULL,
    };
    const retryd_hedge_policy hedge = {.sz = sizeof(hedge),
                                       .mode = a->hedge,
                                       .delay_ns = a->hedge_after_ns,
                                       .max_hedges = (uint32_t)a->max_hedges};
    retryd_request q = {
        .sz = sizeof(q),
        .method = h->method,
        .path = path,
        .headers = hop_headers(a, h, headers),
        .cookie = hop_cookie(a, h),
        .body = body,
        .idempotency = a->idem,
        .idempotency_key = a->want_key,
        .idempotency_key_value = a->key,
        .deadline_ns = a->deadline_ns,
        .sink = buffered(a) ? NULL : to_output,
        .sink_ctx = o,
        .hedge = a->hedge != RETRYD_HEDGE_OFF ? &hedge : NULL,
    };
    if (r == 0)
        r = retryd_profile_new(client, &po, &profile);
    if (r == 0)
        r = retryd_execute(profile, &q, ret);
    retryd_profile_free(profile);
    retryd_body_free(body);
    free(base);
    free(path);
    return r;
}

static void verbose_request(const req_args *a, const hop *h)
{
    if (!a->verbose)
        return;
    const char *headers[REQ_MAX_HEADERS + 5];
    fprintf(stderr, "> %s %s\n", h->method, h->url);
    if (h->foreign && !a->location_trusted)
        fprintf(stderr, "retrydctl: another origin than the first URL's: "
                        "no Authorization or Cookie (--location-trusted "
                        "sends them)\n");
    for (const char **p = hop_headers(a, h, headers); *p; p++)
        fprintf(stderr, "> %s\n", *p);
    if (hop_cookie(a, h) != NULL)
        fprintf(stderr, "> Cookie: %s\n", hop_cookie(a, h));
}

/* Where a followed redirect goes next, or NULL: not -L, not a redirect,
 * or no Location. 303 (and 301/302 after a POST, as curl) turn into a GET
 * without a body; 307 and 308 keep both. */
static char *next_hop(const req_args *a, hop *h, const retryd_result *r)
{
    int s = retryd_result_status(r);
    const char *loc = retryd_result_header(r, "Location");
    if (!a->follow || loc == NULL ||
        !(s == 301 || s == 302 || s == 303 || s == 307 || s == 308))
        return NULL;
    if (s == 303 || ((s == 301 || s == 302) && strcmp(h->method, "POST") == 0))
        if (strcmp(h->method, "HEAD") != 0) {
            h->method = "GET";
            h->with_body = false;
        }
    return resolve(h->url, loc);
}

/* The final response's headers and body, as -i, -I and -f ask, whatever
 * the outcome, as curl writes what arrived: an ambiguous 503's body too
 * (@p rc, the outcome's exit code, is kept then, even under -f). */
static int write_response(const req_args *a, const retryd_result *r, output *o,
                          int rc)
{
    int status = retryd_result_status(r);
    if (status == 0)
        return rc; /* no response arrived */
    if (a->fail && status >= 400) {
        if (rc != REQ_EXIT_RESPONSE)
            return rc;
        if (req_says(a, true))
            fprintf(stderr, "retrydctl: the requested URL returned error: %d\n",
                    status);
        if (!a->fail_with_body)
            return REQ_EXIT_HTTP_ERROR;
        rc = REQ_EXIT_HTTP_ERROR; /* -f buffers: the body is in r */
    }
    /* Streamed already, unless the outcome kept the body in the result. */
    if (!buffered(a) && rc == REQ_EXIT_RESPONSE)
        return rc;
    if (a->include || a->head)
        print_headers(o->out, "", r);
    size_t len;
    const void *body = retryd_result_body(r, &len);
    if (!a->head && len)
        to_output(body, len, o);
    return rc;
}

/* Hedging asked for a request it can never apply to: said in words (the
 * engine's rule, and what to declare), since the request otherwise runs
 * exactly as without it. */
static void explain_unhedged(const req_args *a, const retryd_result *r)
{
    const retryd_hedge_decision *d = retryd_result_hedge(r);
    if (d == NULL || d->verdict != RETRYD_HEDGE_NO || !req_says(a, false))
        return;
    if (d->rule == RETRYD_HEDGE_RULE_NOT_IDEMPOTENT)
        fprintf(stderr,
                "retrydctl: not hedged (%s): only a request declared "
                "--safe, --idempotent or with --idempotency-key is "
                "ever sent twice at once\n",
                retryd_hedge_rule_name(d->rule));
    else if (d->rule == RETRYD_HEDGE_RULE_BODY_NOT_REPLAYABLE)
        fprintf(stderr,
                "retrydctl: not hedged (%s): a body read from stdin "
                "can be sent once\n",
                retryd_hedge_rule_name(d->rule));
}

static void after_hop(const req_args *a, const hop *h, const retryd_result *r)
{
    if (a->verbose) {
        if (retryd_result_status(r))
            print_headers(stderr, "< ", r);
        print_trace(r);
    }
    explain_idempotency(a, h, r);
    explain_unhedged(a, r);
}

/* -w, once the last response is written. */
static void write_out(const req_args *a, retryd_client *client, const hop *h,
                      long redirects, const retryd_result *r, const output *o)
{
    if (a->write_out == NULL)
        return;
    char budget[64];
    retryd_share_status st =
        retryd_host_share_status(retryd_client_host(client));
    snprintf(budget, sizeof(budget),
             st == RETRYD_SHARE_SHARED ? "shared" : "local (%s)",
             retryd_share_status_name(st));
    const req_writeout w = {h->url, redirects, o->bytes, budget};
    req_write_out(a->write_out, r, &w, stdout);
}

/* The first request and the redirects it is told to follow. */
static int run_hops(retryd_client *client, const req_args *a, output *o)
{
    hop h = {first_url(a), a->method, a->data || a->data_file || a->n_form,
             false};
    int rc = CTL_EXIT_ERROR;
    for (long n = 0; h.url != NULL; n++) {
        retryd_result *r = NULL;
        verbose_request(a, &h);
        int e = execute_hop(client, a, &h, o, &r);
        if (e < 0) {
            if (req_says(a, true))
                fprintf(stderr, "retrydctl request: %s: %s\n", h.url,
                        retryd_strerror(e));
            rc = e == RETRYD_EINVAL ? CTL_EXIT_USAGE : CTL_EXIT_ERROR;
            break;
        }
        after_hop(a, &h, r);
        char *next = next_hop(a, &h, r);
        if (next != NULL && n == a->max_redirs) {
            if (req_says(a, true))
                fprintf(stderr, "retrydctl: maximum (%ld) redirects followed\n",
                        a->max_redirs);
            rc = REQ_EXIT_TOO_MANY_REDIRS;
            free(next);
            next = NULL;
        } else if (next == NULL) {
            if (fflush(o->out) != 0)
                write_failed(o);
            rc = write_response(a, r, o, summary(a, r));
            write_out(a, client, &h, n, r, o);
        }
        retryd_result_free(r);
        h.foreign = next != NULL && is_foreign(a->url, next);
        free(h.url);
        h.url = next;
    }
    free(h.url);
    return rc;
}

/* The last of the output: its final flush (where a small body meets a full
 * disk) and, for -o FILE, its close. A failure exits 23, as curl, unless
 * the answer was ambiguous: that the request may have run matters more. */
static int finish_output(const req_args *a, output *o, int rc)
{
    if (fflush(o->out) != 0 || ferror(o->out))
        write_failed(o);
    if (o->out != stdout && fclose(o->out) != 0)
        write_failed(o);
    if (!o->write_error)
        return rc;
    if (req_says(a, true))
        fprintf(stderr, "retrydctl: failure writing output to %s: %s\n",
                a->output ? a->output : "stdout", strerror(o->write_errno));
    return rc == REQ_EXIT_AMBIGUOUS ? rc : REQ_EXIT_WRITE;
}

/* -v: whether the retries are paid from the host budget, and if not why
 * and what to do (the reasons retrydctl status gives), since a local
 * budget is otherwise silent: the request works the same either way. */
static void verbose_budget(const req_args *a, retryd_client *client)
{
    if (!a->verbose)
        return;
    retryd_share_status st =
        retryd_host_share_status(retryd_client_host(client));
    if (st == RETRYD_SHARE_SHARED)
        fprintf(stderr, "retrydctl: host budget: shared (%s)\n",
                ctl_share_advice(st));
    else
        fprintf(stderr,
                "retrydctl: host budget: not shared (%s), retries are paid "
                "from this process's own budget: %s\n",
                retryd_share_status_name(st), ctl_share_advice(st));
}

int ctl_request_main(int argc, char **argv)
{
    req_args a = {0};
    output o = {stdout, false, 0, 0};
    retryd_client *client = NULL;
    int rc = req_parse(argc, argv, &a);
    if (rc != 0) {
        req_args_free(&a);
        return rc == REQ_DONE ? CTL_EXIT_OK : rc;
    }
    if (a.output && (o.out = fopen(a.output, "we")) == NULL) {
        if (req_says(&a, true))
            fprintf(stderr, "retrydctl request: cannot write '%s': %s\n",
                    a.output, strerror(errno));
        req_args_free(&a);
        return REQ_EXIT_WRITE; /* as curl */
    }
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .control_socket = a.control,
                                 .client_name = "retrydctl request"};
    const retryd_client_opts co = {.sz = sizeof(co),
                                   .host = &ho,
                                   .cookie_file = a.cookie_file,
                                   .cookie_jar = a.cookie_jar};
    int r = retryd_client_new(&co, &client);
    if (r < 0) {
        fprintf(stderr, "retrydctl request: %s\n", retryd_strerror(r));
        rc = CTL_EXIT_ERROR;
    } else {
        verbose_budget(&a, client);
        rc = run_hops(client, &a, &o);
    }
    retryd_client_free(client);
    rc = finish_output(&a, &o, rc);
    req_args_free(&a);
    return rc;
}
