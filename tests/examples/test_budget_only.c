/* SPDX-License-Identifier: MIT */
/*
 * examples/budget_only.c (its own libcurl stack, retryd's budget and
 * decision) against a fault server and a real retryd: the exit codes of
 * the three outcomes, what the server executed (a payment whose answer was
 * lost: once), a Retry-After honoured between executions, and the
 * deposits, grants and ambiguities the daemon recorded for the upstream.
 */
#include <stdint.h>

#include "example_test.h"
#include "srv_log.h"

static char url[160];

static int run_example(char *method, char *target, char *idempotency)
{
    char *argv[] = {EXAMPLE_PATH, method, target, idempotency, NULL};
    return ex_run(argv);
}

static char *at(const char *path)
{
    snprintf(url, sizeof(url), "%s%s", ex.base, path);
    return url;
}

#define EXPECT_OUT(text)                                                       \
    CHECK(strstr(ex.res.out, text) != NULL, "no '%s' in:\n%s%s", text,         \
          ex.res.out, ex.res.err)

/* A read that fails once: retried (a token from the budget), then 200. */
static void idempotent_read_is_retried(void)
{
    int rc =
        run_example("GET", at("/seq?codes=503,200&id=bo-read"), "idempotent");
    CHECK(rc == 0, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);
    EXPECT_OUT("budget shared through retryd");
    EXPECT_OUT("-> retry (status_gateway_idempotent)");
    EXPECT_OUT("response 200 (10 bytes) after 2 attempts");
    CHECK(ex_count("bo-read") == 2, "executions");
}

/* A payment read by the server, then its connection closed: the example
 * can only claim SENT_NO_RESPONSE, so it is ambiguous and never resent. */
static void lost_payment_is_ambiguous(void)
{
    int rc = run_example("POST", at("/close-after-read?id=bo-pay"),
                         "non_idempotent");
    CHECK(rc == 2, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);
    EXPECT_OUT("attempt 1: sent_no_response/connection_lost");
    EXPECT_OUT("ambiguous (evidence sent_no_response, 1 attempt)");
    CHECK(ex_count("bo-pay") == 1, "a payment executed twice");
}

/* A refused connection proves NOT_SENT: retried even for a payment, and
 * a plain failure in the end. */
static void refused_connection_is_not_sent(void)
{
    char target[64];
    snprintf(target, sizeof(target), "http://127.0.0.1:%d/pay",
             testsrv_unused_port());
    int rc = run_example("POST", target, "non_idempotent");
    CHECK(rc == 1, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);
    EXPECT_OUT("attempt 1: not_sent/connect status 0 -> retry (not_sent)");
    EXPECT_OUT("failure (evidence not_sent, 3 attempts, no retry: "
               "max_attempts)");
}

/* Retry-After: 1 is waited out before each retry (the decision's delay,
 * slept by the example): the server saw the executions a second apart. */
static void retry_after_is_waited(void)
{
    int rc = run_example("GET", at("/status?code=503&retry_after=1&id=bo-ra"),
                         "safe");
    CHECK(rc == 0, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);
    EXPECT_OUT("response 503 (");
    int64_t t[4];
    long n = srv_log_times(ex.srv, "bo-ra", t, 4);
    CHECK(n == 3, "%ld executions", n);
    CHECK(t[1] - t[0] >= 1000 && t[2] - t[1] >= 1000,
          "executions at %lld, %lld, %lld ms", (long long)t[0], (long long)t[1],
          (long long)t[2]);
}

int main(void)
{
    ex_start_server();
    ex_start_daemon();
    idempotent_read_is_retried();
    lost_payment_is_ambiguous();
    refused_connection_is_not_sent();
    retry_after_is_waited();

    /* What the example told the host budget about the server's upstream:
     * a deposit per request, the grants of the read (1) and of the
     * Retry-After (2), the ambiguity and its evidence. */
    char upstream[64];
    snprintf(upstream, sizeof(upstream), "127.0.0.1:%d", testsrv_port(ex.srv));
    CHECK(ex_stat(upstream, "deposits") == 3, "deposits");
    CHECK(ex_stat(upstream, "retries_granted") == 3, "granted");
    CHECK(ex_stat(upstream, "ambiguous") == 1, "ambiguous");
    CHECK(ex_stat(upstream, "sent_no_response") == 1, "evidence");
    CHECK(ex_stat(upstream, "response_received") == 5, "evidence");
    printf("budget_only: the three outcomes and the budget's counts\n");
    return 0;
}
