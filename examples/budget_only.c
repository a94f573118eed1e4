/* SPDX-License-Identifier: MIT */
/*
 * budget_only: a service that keeps its own HTTP stack and takes from
 * retryd only the host budget and the retry decision.
 *
 * Its "own stack" here is libcurl's easy API, used directly; a raw socket
 * or any other client fits the same loop:
 *
 *   retryd_upstream_deposit()        before the first attempt
 *   attempt                          with the service's own client
 *   classify                         what the attempt proves (see below)
 *   retryd_decide(retryd_upstream_budget_iface())  after an attempt that
 * failed; a RETRY has already taken its token sleep decision.delay_ns, retry
 * only when the verdict is RETRY
 *
 * usage: budget_only METHOD URL IDEMPOTENCY
 *   IDEMPOTENCY: safe, idempotent, non_idempotent or idempotent_by_key
 *   (declared by the caller: the method never decides it). A POST sends
 *   the body "amount=10".
 * exit: 0 response, 1 failure, 2 ambiguous (as retrydctl request), 64
 *       usage, 70 could not run.
 *
 * The budget is the host's when a retryd daemon answers on
 * $RETRYD_CONTROL_SOCKET (default /run/retryd/control.sock), and
 * process-local otherwise; its name is the URL's host[:port], the name
 * retryd's executor gives it, so this service and executor-based ones on
 * the same host spend from one bucket.
 *
 * THE EVIDENCE IS OURS, AND WEAKER. retryd's executor proves from the
 * stages libcurl reports (the pre-request callback, the bytes of the
 * request head actually written; docs/evidence.md) whether a request
 * reached the server, and vetoes the request libcurl would re-send by
 * itself. This service sees only libcurl's result code and the headers it
 * received, so it claims only what those prove:
 *   - NOT_SENT only when the name did not resolve or the TCP connect
 *     failed: nothing can have been written. (A connect that timed out
 *     also sent nothing, but CURLE_OPERATION_TIMEDOUT does not say whether
 *     it was the connect or the response that timed out.)
 *   - RESPONSE_RECEIVED only once the header callback has seen the end of
 *     a final header block (libcurl returns CURLE_OK when a server closes
 *     in the middle of its headers: that is no response).
 *   - SENT_NO_RESPONSE for everything else, the most careful claim: a
 *     non-idempotent request then ends ambiguous, never retried. So it is
 *     ambiguous more often than through the executor (a connection that
 *     died before the first byte left, which the executor proves NOT_SENT
 *     and retries, is ambiguous here), but never retried less safely.
 * And because a fresh easy handle is used per attempt, no connection is
 * reused, so libcurl has no dead keep-alive connection to re-send a request
 * on behind the decision's back (the executor keeps its connections and
 * vetoes such re-sends instead).
 */
#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <retryd/retryd.h>

#define MS INT64_C(1000000)
#define DEADLINE_NS (10000 * MS) /* for all attempts and waits */
#define ATTEMPT_NS (2000 * MS)
#define MAX_ATTEMPTS 3

enum { EXIT_RESPONSE = 0, EXIT_FAILURE_ = 1, EXIT_AMBIGUOUS = 2 };

/* The request, as the service knows it. */
struct call {
    const char *method, *url;
    retryd_idempotency idempotency;
    retryd_upstream *budget;
    retryd_host *host;
};

/* What one attempt proved. */
struct attempt {
    int block_status;   /* the status line of the header block being read */
    bool final_headers; /* a final (non-1xx) header block has ended */
    retryd_evidence evidence;
    retryd_failure failure;
    int status;             /* the final status; 0 without final headers */
    int64_t retry_after_ns; /* -1: none */
    size_t body_bytes;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* libcurl's header callback, one line at a time. A status line starts a
 * block; a blank line ends it, and the block was the final one when its
 * status is not 1xx (100 Continue, 103 Early Hints come before it). */
static size_t on_header(char *line, size_t size, size_t n, void *ctx)
{
    struct attempt *a = ctx;
    size_t len = size * n;
    int code;
    if (len > 5 && strncmp(line, "HTTP/", 5) == 0 &&
        sscanf(line, "HTTP/%*s %3d", &code) == 1)
        a->block_status = code;
    else if ((len == 2 && line[0] == '\r') || (len == 1 && line[0] == '\n'))
        if (a->block_status >= 200) {
            a->final_headers = true;
            a->status = a->block_status;
        }
    return len;
}

/* The body is only counted here; a service would hand it on. */
static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    (void)data;
    ((struct attempt *)ctx)->body_bytes += size * n;
    return size * n;
}

/* A Retry-After of the final response (parsed only for an error status,
 * as the executor does), or -1. The value is kept whole: the engine, not
 * the parser, denies one longer than the backoff policy will wait. */
static int64_t retry_after(CURL *h, int status)
{
    struct curl_header *hdr;
    int64_t ns;
    if (status < 400 || curl_easy_header(h, "Retry-After", 0, CURLH_HEADER, -1,
                                         &hdr) != CURLHE_OK)
        return -1;
    if (retryd_retry_after_parse(hdr->value, strlen(hdr->value),
                                 (int64_t)time(NULL), INT64_MAX, &ns) < 0)
        return -1;
    return ns;
}

/* The service's own classification, from what libcurl returned: see the
 * comment at the top for what it cannot prove. */
static void classify(CURLcode rc, CURL *h, struct attempt *a)
{
    a->failure = rc == CURLE_OPERATION_TIMEDOUT
                     ? RETRYD_FAILURE_TIMEOUT
                     : RETRYD_FAILURE_CONNECTION_LOST;
    if (a->final_headers) { /* the server answered: it executed */
        a->evidence = rc == CURLE_OK ? RETRYD_EVIDENCE_RESPONSE_RECEIVED
                                     : RETRYD_EVIDENCE_PARTIAL_RESPONSE;
        if (rc == CURLE_OK) {
            a->failure = RETRYD_FAILURE_NONE;
            a->retry_after_ns = retry_after(h, a->status);
        }
        return;
    }
    a->status = 0;
    a->evidence = RETRYD_EVIDENCE_NOT_SENT; /* only for the proven cases */
    if (rc == CURLE_COULDNT_RESOLVE_HOST)
        a->failure = RETRYD_FAILURE_DNS;
    else if (rc == CURLE_COULDNT_CONNECT)
        a->failure = RETRYD_FAILURE_CONNECT;
    else if (rc == CURLE_URL_MALFORMAT)
        a->failure = RETRYD_FAILURE_MALFORMED; /* permanent: never retried */
    else
        a->evidence = RETRYD_EVIDENCE_SENT_NO_RESPONSE; /* can't know more */
}

/* One attempt with a fresh easy handle: no connection is reused, so
 * libcurl cannot re-send the request on a dead keep-alive connection. */
static CURLcode attempt(const struct call *c, int64_t timeout_ns,
                        struct attempt *a)
{
    *a = (struct attempt){.retry_after_ns = -1};
    CURL *h = curl_easy_init();
    /* No "Expect: 100-continue": a 417 would make libcurl send again. */
    struct curl_slist *hdrs = curl_slist_append(NULL, "Expect:");
    if (h == NULL || hdrs == NULL) {
        curl_easy_cleanup(h);
        curl_slist_free_all(hdrs);
        return CURLE_OUT_OF_MEMORY;
    }
    long ms = timeout_ns / MS > 0 ? (long)(timeout_ns / MS) : 1;
    curl_easy_setopt(h, CURLOPT_URL, c->url);
    if (strcmp(c->method, "GET") != 0)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "amount=10");
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    CURLcode rc = curl_easy_perform(h);
    classify(rc, h, a);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    return rc;
}

/* The engine's verdict on a failed attempt. With the upstream's budget in
 * the environment it peeks first and takes a token only for a RETRY. */
static int decide(const struct call *c, const struct attempt *a, uint32_t n,
                  int64_t deadline, int64_t prev_delay, retryd_decision *d)
{
    const retryd_decide_env env = {
        .sz = sizeof(env),
        .budget = retryd_upstream_budget_iface(),
        .budget_ctx = c->budget,
    }; /* backoff NULL: retryd's defaults */
    int64_t left = deadline - now_ns();
    const retryd_facts f = {
        .sz = sizeof(f),
        .attempt = n,
        .max_attempts = MAX_ATTEMPTS,
        .evidence = a->evidence,
        .replayability = RETRYD_REPLAYABLE, /* a body in memory */
        .idempotency = c->idempotency,
        .failure = a->failure,
        .status = a->status,
        .retry_after_ns = a->retry_after_ns,
        .remaining_ns = left > 0 ? left : 0,
        .min_attempt_ns = 50 * MS,
        .prev_delay_ns = prev_delay,
        /* No body byte has been handed on (it is only counted); a service
         * that streams a response must say so, and is then not retried. */
        .response_delivered = false,
        .draining = retryd_host_draining(c->host),
        .refresh_used = true, /* no credentials to refresh */
    };
    *d = (retryd_decision){.sz = sizeof(*d)};
    return retryd_decide(&f, &env, d);
}

static void print_attempt(uint32_t n, const struct attempt *a, CURLcode rc,
                          const retryd_decision *d)
{
    printf("attempt %u: %s/%s status %d", n, retryd_evidence_name(a->evidence),
           retryd_failure_name(a->failure), a->status);
    if (d == NULL)
        printf(" -> final");
    else
        printf(" -> %s (%s)", retryd_verdict_name(d->verdict),
               retryd_rule_name(d->rule));
    if (d != NULL && d->verdict == RETRYD_VERDICT_RETRY)
        printf(", wait %.1f ms", (double)d->delay_ns / 1e6);
    printf("%s%s\n", rc == CURLE_OK ? "" : ": ",
           rc == CURLE_OK ? "" : curl_easy_strerror(rc));
}

/* The outcome, as the executor would give it, and the exit code. */
static int outcome(const struct attempt *a, const retryd_decision *d,
                   uint32_t n)
{
    if (d != NULL && d->verdict == RETRYD_VERDICT_AMBIGUOUS) {
        printf("ambiguous (evidence %s, %u attempt%s): the request may have "
               "executed; reconcile before sending it again\n",
               retryd_evidence_name(a->evidence), n, n == 1 ? "" : "s");
        return EXIT_AMBIGUOUS;
    }
    if (a->evidence == RETRYD_EVIDENCE_RESPONSE_RECEIVED) {
        printf("response %d (%zu bytes) after %u attempt%s\n", a->status,
               a->body_bytes, n, n == 1 ? "" : "s");
        return EXIT_RESPONSE;
    }
    printf("failure (evidence %s, %u attempt%s, no retry: %s)\n",
           retryd_evidence_name(a->evidence), n, n == 1 ? "" : "s",
           retryd_denial_name(d->reason));
    return EXIT_FAILURE_;
}

static void sleep_ns(int64_t ns)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ns / 1000000000;
    until.tv_nsec += ns % 1000000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    /* Absolute: a signal that interrupts it does not stretch the wait. */
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) != 0)
        ;
}

/* The attempt loop: deposit, attempt, decide, and retry only on RETRY. */
static int run(const struct call *c)
{
    int64_t deadline = now_ns() + DEADLINE_NS, prev_delay = 0;
    retryd_upstream_deposit(c->budget); /* every first attempt */
    for (uint32_t n = 1;; n++) {
        struct attempt a;
        int64_t left = deadline - now_ns();
        CURLcode rc = attempt(c, left < ATTEMPT_NS ? left : ATTEMPT_NS, &a);
        if (rc == CURLE_OUT_OF_MEMORY && !a.final_headers)
            return 70;
        if (a.evidence == RETRYD_EVIDENCE_RESPONSE_RECEIVED &&
            retryd_status_is_final(a.status)) {
            /* A success or a redirect: nothing to decide. The evidence
             * still counts in the upstream's statistics. */
            retryd_upstream_record(c->budget, NULL, a.evidence);
            print_attempt(n, &a, rc, NULL);
            return outcome(&a, NULL, n);
        }
        retryd_decision d;
        if (decide(c, &a, n, deadline, prev_delay, &d) < 0)
            return 70;
        /* What `retrydctl stats` shows for this process and upstream. */
        retryd_upstream_record(c->budget, &d, a.evidence);
        print_attempt(n, &a, rc, &d);
        if (d.verdict != RETRYD_VERDICT_RETRY)
            return outcome(&a, &d, n);
        sleep_ns(d.delay_ns); /* the token is already taken */
        prev_delay = d.delay_ns;
    }
}

/* The budget's name: the URL's host[:port], as the executor names it. */
static int upstream_name(const char *url, char *buf, size_t len)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL;
    int r = -1;
    if (u != NULL && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
        curl_url_get(u, CURLUPART_PORT, &port, 0); /* none: no port */
        int k = snprintf(buf, len, "%s%s%s", host, port ? ":" : "",
                         port ? port : "");
        r = k > 0 && (size_t)k < len ? 0 : -1;
    }
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return r;
}

int main(int argc, char **argv)
{
    struct call c = {.method = argc == 4 ? argv[1] : NULL};
    char name[128];
    if (argc != 4 ||
        retryd_idempotency_from_name(argv[3], &c.idempotency) < 0) {
        fprintf(stderr, "usage: budget_only METHOD URL IDEMPOTENCY\n"
                        "  IDEMPOTENCY: safe, idempotent, non_idempotent or "
                        "idempotent_by_key\n");
        return 64;
    }
    c.url = argv[2];
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 70;
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .client_name = "example budget_only"};
    int r = upstream_name(c.url, name, sizeof(name)) < 0 ? RETRYD_EINVAL : 0;
    if (r == 0)
        r = retryd_host_open(&ho, &c.host);
    if (r == 0) /* NULL parameters: the daemon's for this name */
        r = retryd_upstream_open(c.host, name, NULL, &c.budget);
    int rc = 70;
    if (r < 0) {
        fprintf(stderr, "budget_only: %s: %s\n", c.url, retryd_strerror(r));
    } else {
        printf("upstream %s, budget %s\n", name,
               retryd_upstream_shared(c.budget) ? "shared through retryd"
                                                : "process-local");
        rc = run(&c);
    }
    retryd_host_close(c.host); /* frees the upstream handle too */
    curl_global_cleanup();
    return rc;
}
