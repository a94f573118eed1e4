/*
 * retrydctl request: one HTTP request through libretryd and the host
 * budget, from a shell. Like curl, the response body goes to stdout; the
 * outcome word and the evidence go to stderr, and the exit code tells the
 * three answers apart:
 *
 *   0  response   final headers arrived (whatever the status)
 *   1  failure    no response, and nothing that must not run twice ran
 *   2  ambiguous  the request may have executed: reconcile before replaying
 *   64 bad usage, 70 could not run
 *
 * Without --safe or --idempotent a request is non-idempotent: the method
 * never decides.
 */
#include <curl/curl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ctl.h"
#include "retryd/retryd.h"

enum {
    REQ_EXIT_RESPONSE = 0,
    REQ_EXIT_FAILURE = 1,
    REQ_EXIT_AMBIGUOUS = 2,
    MAX_HEADERS = 128,
};

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: retrydctl request [options] URL\n"
        "  -X, --request METHOD     method (default GET, or POST with data)\n"
        "  -H, --header 'N: v'      a request header (repeatable)\n"
        "  -d, --data DATA          a body; @FILE reads a file (reopened per\n"
        "                           attempt)\n"
        "      --data-file PATH     the body from a file; '-' is stdin (one\n"
        "                           shot: it cannot be sent twice)\n"
        "      --safe               the operation is read-only\n"
        "      --idempotent         executing it twice equals once\n"
        "      --non-idempotent     it must not run twice (the default)\n"
        "      --idempotency-key[=K]  send an Idempotency-Key (generated, or\n"
        "                           K), the same on every attempt\n"
        "      --deadline D         the whole call's time (default 30s)\n"
        "      --max-attempts N     (default 3)\n"
        "      --attempt-timeout D  (default 10s)\n"
        "      --upstream NAME      the budget's name (default host:port)\n"
        "      --http2 | --h2c      HTTP/2 over TLS, or cleartext HTTP/2\n"
        "      --cacert FILE        trust this CA; -k, --insecure: trust any\n"
        "      --trace              print the attempt log on stderr\n"
        "      --control-socket P   the retryd daemon to share budgets with\n"
        "exit: 0 response, 1 failure, 2 ambiguous, 64 usage, 70 error\n");
}

typedef struct req_args {
    const char *method, *url, *data, *data_file, *key, *upstream, *cacert;
    const char *control;
    const char *headers[MAX_HEADERS + 2];
    size_t n_headers;
    retryd_idempotency idem;
    bool want_key, trace, insecure;
    int64_t deadline_ns, attempt_ns;
    long max_attempts;
    retryd_http_version version;
} req_args;

enum {
    O_SAFE = 256,
    O_IDEMPOTENT,
    O_NON_IDEMPOTENT,
    O_KEY,
    O_DEADLINE,
    O_MAX_ATTEMPTS,
    O_ATTEMPT_TIMEOUT,
    O_UPSTREAM,
    O_HTTP2,
    O_H2C,
    O_CACERT,
    O_TRACE,
    O_DATA_FILE,
    O_CONTROL,
    O_HELP,
};

static const struct option options[] = {
    {"request", required_argument, NULL, 'X'},
    {"header", required_argument, NULL, 'H'},
    {"data", required_argument, NULL, 'd'},
    {"data-file", required_argument, NULL, O_DATA_FILE},
    {"safe", no_argument, NULL, O_SAFE},
    {"idempotent", no_argument, NULL, O_IDEMPOTENT},
    {"non-idempotent", no_argument, NULL, O_NON_IDEMPOTENT},
    {"idempotency-key", optional_argument, NULL, O_KEY},
    {"deadline", required_argument, NULL, O_DEADLINE},
    {"max-attempts", required_argument, NULL, O_MAX_ATTEMPTS},
    {"attempt-timeout", required_argument, NULL, O_ATTEMPT_TIMEOUT},
    {"upstream", required_argument, NULL, O_UPSTREAM},
    {"http2", no_argument, NULL, O_HTTP2},
    {"h2c", no_argument, NULL, O_H2C},
    {"cacert", required_argument, NULL, O_CACERT},
    {"insecure", no_argument, NULL, 'k'},
    {"trace", no_argument, NULL, O_TRACE},
    {"control-socket", required_argument, NULL, O_CONTROL},
    {"help", no_argument, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

static int bad(const char *what, const char *value)
{
    fprintf(stderr, "retrydctl request: invalid %s '%s'\n", what, value);
    return CTL_EXIT_USAGE;
}

static int parse_one(req_args *a, int opt, const char *arg)
{
    switch (opt) {
    case 'X':
        a->method = arg;
        break;
    case 'H':
        if (a->n_headers == MAX_HEADERS)
            return bad("header count", arg);
        a->headers[a->n_headers++] = arg;
        break;
    case 'd':
        a->data = arg;
        break;
    case O_DATA_FILE:
        a->data_file = arg;
        break;
    case O_SAFE:
        a->idem = RETRYD_IDEMPOTENCY_SAFE;
        break;
    case O_IDEMPOTENT:
        a->idem = RETRYD_IDEMPOTENCY_IDEMPOTENT;
        break;
    case O_NON_IDEMPOTENT:
        a->idem = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
        break;
    case O_KEY:
        a->want_key = true;
        a->key = arg;
        break;
    case O_DEADLINE:
    case O_ATTEMPT_TIMEOUT:
        if (retryd_duration_parse(arg, opt == O_DEADLINE ? &a->deadline_ns
                                                         : &a->attempt_ns) < 0)
            return bad("duration", arg);
        break;
    case O_MAX_ATTEMPTS:
        if (!ctl_parse_long(arg, 1, 100, &a->max_attempts))
            return bad("attempt count", arg);
        break;
    case O_UPSTREAM:
        a->upstream = arg;
        break;
    case O_HTTP2:
        a->version = RETRYD_HTTP_2_TLS;
        break;
    case O_H2C:
        a->version = RETRYD_HTTP_2_PRIOR_KNOWLEDGE;
        break;
    case O_CACERT:
        a->cacert = arg;
        break;
    case 'k':
        a->insecure = true;
        break;
    case O_TRACE:
        a->trace = true;
        break;
    case O_CONTROL:
        a->control = arg;
        break;
    default:
        return CTL_EXIT_USAGE;
    }
    return 0;
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
    if (a->data && a->data[0] == '@')
        return retryd_body_new_file(a->data + 1, ret);
    if (a->data)
        return retryd_body_new_bytes(a->data, strlen(a->data), ret);
    return 0;
}

static size_t to_stdout(const void *data, size_t len, void *ctx)
{
    (void)ctx;
    return fwrite(data, 1, len, stdout);
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
        fprintf(stderr, " %.1fms -> %s (%s)", (double)at->duration_ns / 1e6,
                retryd_verdict_name(at->decision->verdict),
                retryd_rule_name(at->decision->rule));
        if (at->decision->verdict == RETRYD_VERDICT_RETRY)
            fprintf(stderr, ", wait %.1fms",
                    (double)at->decision->delay_ns / 1e6);
        fprintf(stderr, "%s%s\n", at->error[0] ? ": " : "", at->error);
    }
}

static int report(const retryd_result *r)
{
    retryd_outcome o = retryd_result_outcome(r);
    const retryd_decision *d = retryd_result_decision(r);
    const char *key = retryd_result_idempotency_key(r);
    fprintf(stderr, "retrydctl: %s", retryd_outcome_name(o));
    if (retryd_result_status(r))
        fprintf(stderr, " %d", retryd_result_status(r));
    fprintf(stderr, " (evidence %s, %zu attempt%s",
            retryd_evidence_name(retryd_result_evidence(r)),
            retryd_result_attempt_count(r),
            retryd_result_attempt_count(r) == 1 ? "" : "s");
    /* Why no further attempt followed, unless the answer was a success
     * that needed none. */
    if (d->reason != RETRYD_DENIAL_NONE &&
        !(o == RETRYD_OUTCOME_RESPONSE && retryd_result_status(r) < 400))
        fprintf(stderr, ", no retry: %s", retryd_denial_name(d->reason));
    fprintf(stderr, ")%s%s\n", retryd_result_error(r)[0] ? ": " : "",
            retryd_result_error(r));
    if (o == RETRYD_OUTCOME_AMBIGUOUS)
        fprintf(stderr,
                "retrydctl: the request may have executed; reconcile "
                "before replaying%s%s\n",
                key ? " (Idempotency-Key: " : "", key ? key : "");
    if (key)
        fprintf(stderr, "retrydctl: Idempotency-Key: %s\n", key);
    return o == RETRYD_OUTCOME_RESPONSE  ? REQ_EXIT_RESPONSE
           : o == RETRYD_OUTCOME_FAILURE ? REQ_EXIT_FAILURE
                                         : REQ_EXIT_AMBIGUOUS;
}

static int parse_args(int argc, char **argv, req_args *a)
{
    int opt, r;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "X:H:d:k", options, NULL)) != -1) {
        if (opt == O_HELP) {
            usage(stdout);
            exit(CTL_EXIT_OK);
        }
        if (opt == '?')
            return CTL_EXIT_USAGE;
        if ((r = parse_one(a, opt, optarg)) != 0)
            return r;
    }
    if (optind != argc - 1) {
        usage(stderr);
        return CTL_EXIT_USAGE;
    }
    if (a->data && a->data_file)
        return bad("combination", "--data with --data-file");
    a->url = argv[optind];
    bool has_body = a->data || a->data_file;
    if (a->method == NULL)
        a->method = has_body ? "POST" : "GET";
    bool has_ct = false;
    for (size_t i = 0; i < a->n_headers; i++)
        has_ct |= strncasecmp(a->headers[i], "Content-Type:", 13) == 0;
    if (a->data && !has_ct) /* what curl -d sends */
        a->headers[a->n_headers++] =
            "Content-Type: application/x-www-form-urlencoded";
    a->headers[a->n_headers] = NULL;
    return 0;
}

static int run_request(const req_args *a, const char *base, const char *path,
                       retryd_body *body)
{
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .control_socket = a->control,
                                 .client_name = "retrydctl request"};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    const retryd_tls_opts tls = {
        .sz = sizeof(tls), .ca_file = a->cacert, .insecure = a->insecure};
    retryd_client *client = NULL;
    retryd_profile *profile = NULL;
    retryd_result *res = NULL;
    int rc = CTL_EXIT_ERROR, r;

    retryd_profile_opts po = {
        .sz = sizeof(po),
        .base_url = base,
        .upstream = a->upstream,
        .max_attempts = (uint32_t)a->max_attempts,
        .attempt_timeout_ns = a->attempt_ns,
        .http_version = a->version,
        .tls = &tls,
    };
    retryd_request q = {
        .sz = sizeof(q),
        .method = a->method,
        .path = path,
        .headers = a->headers,
        .body = body,
        .idempotency = a->idem,
        .idempotency_key = a->want_key,
        .idempotency_key_value = a->key,
        .deadline_ns = a->deadline_ns,
        .sink = to_stdout,
    };
    if ((r = retryd_client_new(&co, &client)) < 0 ||
        (r = retryd_profile_new(client, &po, &profile)) < 0 ||
        (r = retryd_execute(profile, &q, &res)) < 0) {
        fprintf(stderr, "retrydctl request: %s\n", retryd_strerror(r));
        rc = r == RETRYD_EINVAL ? CTL_EXIT_USAGE : CTL_EXIT_ERROR;
    } else {
        fflush(stdout);
        if (a->trace)
            print_trace(res);
        rc = report(res);
    }
    retryd_result_free(res);
    retryd_profile_free(profile);
    retryd_client_free(client);
    return rc;
}

int ctl_request_main(int argc, char **argv)
{
    req_args a = {.idem = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT};
    char *base = NULL, *path = NULL;
    retryd_body *body = NULL;
    int rc = parse_args(argc, argv, &a);

    if (rc != 0)
        return rc;
    if (split_url(a.url, &base, &path) < 0) {
        rc = bad("URL", a.url);
    } else if (make_body(&a, &body) < 0) {
        fprintf(stderr, "retrydctl request: cannot use the body\n");
        rc = CTL_EXIT_USAGE;
    } else {
        rc = run_request(&a, base, path, body);
    }
    retryd_body_free(body);
    free(base);
    free(path);
    return rc;
}
