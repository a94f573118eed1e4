/* SPDX-License-Identifier: MIT */
/*
 * The executor over HTTP/2 (h2c with prior knowledge, and h2 over TLS)
 * against the real HTTP/2 fault server: refused streams and GOAWAY are
 * proven not sent, resets after the request are not, libcurl's own
 * re-sends of refused streams are vetoed (one stream per attempt), and
 * 7.88.1's broken h2c connection reuse is worked around.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "retryd/retryd.h"
#include "testsrv.h"

#include "exec_fixture.h"

#define MS INT64_C(1000000)
#define S INT64_C(1000000000)

static char cert[64];

static void start(bool tls)
{
    snprintf(cert, sizeof(cert), "/tmp/retryd-h2-cert-%d.pem", (int)getpid());
    char *argv_tls[] = {"--tls", "--cert-out", cert, NULL};
    char *argv_h2c[] = {"--h2c", NULL};
    exec_start(H2SRV_PATH, tls ? argv_tls : argv_h2c);
}

static void setup_h2c(void)
{
    start(false);
}

static void setup_tls(void)
{
    start(true);
}

static void teardown(void)
{
    exec_teardown();
    unlink(cert);
}

TestSuite(executor_h2c, .init = setup_h2c, .fini = teardown, .timeout = 60);
TestSuite(executor_h2tls, .init = setup_tls, .fini = teardown, .timeout = 60);

static retryd_profile *profile(bool tls, uint32_t max_attempts)
{
    char base[64];
    retryd_profile *p;
    snprintf(base, sizeof(base), "%s://127.0.0.1:%d", tls ? "https" : "http",
             testsrv_port(srv));
    retryd_profile_opts o = {
        .sz = sizeof(o),
        .base_url = base,
        .max_attempts = max_attempts,
        .backoff = &(const retryd_backoff_policy){sizeof(retryd_backoff_policy),
                                                  RETRYD_JITTER_FULL, 1 * MS,
                                                  3 * MS, 1 * S},
        .http_version = tls ? RETRYD_HTTP_2_TLS : RETRYD_HTTP_2_PRIOR_KNOWLEDGE,
        .tls = &(const retryd_tls_opts){.sz = sizeof(retryd_tls_opts),
                                        .ca_file = tls ? cert : NULL},
        .budget = &plenty,
    };
    cr_assert_eq(retryd_profile_new(client, &o, &p), 0);
    return p;
}

static retryd_result *post(retryd_profile *p, const char *path,
                           retryd_idempotency idem)
{
    retryd_body *b;
    cr_assert_eq(retryd_body_new_bytes("amount=10", 9, &b), 0);
    retryd_request q = {.sz = sizeof(q),
                        .method = "POST",
                        .path = path,
                        .body = b,
                        .idempotency = idem,
                        .deadline_ns = 20 * S};
    retryd_result *r;
    cr_assert_eq(retryd_execute(p, &q, &r), 0);
    retryd_body_free(b);
    return r;
}

/* Negative on failure, so a broken command cannot pass for a count. */
static long refused(const char *id)
{
    return testsrv_number(srv, "REFUSED", id);
}

/* --- h2c ----------------------------------------------------------------- */

Test(executor_h2c, sequential_requests_succeed_despite_the_reuse_bug)
{
    retryd_profile *p = profile(false, 1);
    for (int i = 0; i < 5; i++) {
        retryd_result *r = post(p, "/ok?id=seq", RETRYD_IDEMPOTENCY_SAFE);
        cr_expect_eq(retryd_result_status(r), 200, "request %d: %s", i,
                     retryd_result_error(r));
        cr_expect_eq(retryd_result_attempt(r, 0)->http_version, 20);
        retryd_result_free(r);
    }
    cr_expect_eq(testsrv_count(srv, "seq"), 5);
    retryd_profile_free(p);
}

Test(executor_h2c, refused_stream_is_not_sent_and_one_stream_per_attempt)
{
    retryd_profile *p = profile(false, 3);
    retryd_result *r =
        post(p, "/refuse?id=rf", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT);
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_FAILURE,
                 "proven not processed: even a payment may be retried");
    cr_expect_eq(retryd_result_attempt_count(r), 3);
    for (size_t i = 0; i < 3; i++) {
        const retryd_attempt *a = retryd_result_attempt(r, i);
        cr_expect_eq(a->evidence, RETRYD_EVIDENCE_NOT_SENT);
        cr_expect_eq(a->failure, RETRYD_FAILURE_REFUSED_STREAM);
    }
    cr_expect_eq(testsrv_count(srv, "rf"), 0);
    /* libcurl alone would have refused-and-retried 6 streams per call. */
    cr_expect_eq(refused("rf"), 3, "exactly one stream per decided attempt");
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_h2c, refused_once_then_executed_once)
{
    retryd_profile *p = profile(false, 3);
    retryd_result *r =
        post(p, "/refuse-once?id=ro", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT);
    cr_expect_eq(retryd_result_status(r), 200);
    cr_expect_eq(retryd_result_attempt_count(r), 2);
    cr_expect_eq(testsrv_count(srv, "ro"), 1);
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_h2c, goaway_below_our_stream_is_not_sent)
{
    retryd_profile *p = profile(false, 2);
    retryd_result *r =
        post(p, "/goaway?id=ga", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT);
    const retryd_attempt *a = retryd_result_attempt(r, 0);
    cr_expect_eq(a->evidence, RETRYD_EVIDENCE_NOT_SENT);
    cr_expect_eq(a->failure, RETRYD_FAILURE_GOAWAY);
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_FAILURE);
    cr_expect_eq(testsrv_count(srv, "ga"), 0);
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_h2c, reset_after_the_request_is_ambiguous_for_a_payment)
{
    retryd_profile *p = profile(false, 3);
    retryd_result *r =
        post(p, "/reset-after-read?id=rr", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT);
    cr_expect_eq(retryd_result_evidence(r), RETRYD_EVIDENCE_SENT_NO_RESPONSE);
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_AMBIGUOUS);
    cr_expect_eq(testsrv_count(srv, "rr"), 1);
    retryd_result_free(r);
    r = post(p, "/reset-after-read?id=rs", RETRYD_IDEMPOTENCY_IDEMPOTENT);
    cr_expect_eq(retryd_result_attempt_count(r), 3);
    cr_expect_eq(testsrv_count(srv, "rs"), 3);
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_h2c, reset_after_headers_is_a_partial_response)
{
    retryd_profile *p = profile(false, 3);
    retryd_result *r = post(p, "/reset-after-headers?len=100&sent=7&id=rh",
                            RETRYD_IDEMPOTENCY_NON_IDEMPOTENT);
    cr_expect_eq(retryd_result_evidence(r), RETRYD_EVIDENCE_PARTIAL_RESPONSE);
    cr_expect_eq(retryd_result_status(r), 200);
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_AMBIGUOUS,
                 "it executed; its result was lost");
    cr_expect_eq(testsrv_count(srv, "rh"), 1);
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_h2c, http11_required_is_retried_over_http11_by_the_engine)
{
    retryd_profile *p = profile(false, 3);
    retryd_result *r =
        post(p, "/http11-required?id=h1", RETRYD_IDEMPOTENCY_IDEMPOTENT);
    cr_expect_eq(retryd_result_status(r), 200);
    cr_assert_eq(retryd_result_attempt_count(r), 2,
                 "libcurl's own downgrade re-send was vetoed");
    cr_expect_eq(retryd_result_attempt(r, 0)->evidence,
                 RETRYD_EVIDENCE_SENT_NO_RESPONSE, "not proven unprocessed");
    cr_expect_eq(retryd_result_attempt(r, 1)->http_version, 11);
    cr_expect_eq(testsrv_count(srv, "h1"), 1);
    retryd_result_free(r);
    /* A payment: not retried, ambiguous, and the server never ran it. */
    r = post(p, "/http11-required?id=h1p", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT);
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_AMBIGUOUS);
    cr_expect_eq(testsrv_count(srv, "h1p"), 0);
    retryd_result_free(r);
    retryd_profile_free(p);
}

/* --- h2 over TLS -----------------------------------------------------------
 */

Test(executor_h2tls, connections_are_kept_and_reused)
{
    retryd_profile *p = profile(true, 1);
    for (int i = 0; i < 5; i++) {
        retryd_result *r = post(p, "/ok?id=tls", RETRYD_IDEMPOTENCY_SAFE);
        cr_expect_eq(retryd_result_status(r), 200, "%s",
                     retryd_result_error(r));
        cr_expect_eq(retryd_result_attempt(r, 0)->http_version, 20);
        retryd_result_free(r);
    }
    cr_expect_eq(testsrv_count(srv, "tls"), 5);
    cr_expect_eq(testsrv_conns(srv), 1);
    retryd_profile_free(p);
}

Test(executor_h2tls, goaway_on_a_reused_connection_is_not_sent)
{
    retryd_profile *p = profile(true, 1);
    retryd_result_free(post(p, "/ok?id=warm", RETRYD_IDEMPOTENCY_SAFE));
    retryd_result *r =
        post(p, "/goaway?id=g2", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT);
    const retryd_attempt *a = retryd_result_attempt(r, 0);
    cr_expect_eq(a->evidence, RETRYD_EVIDENCE_NOT_SENT);
    cr_expect_eq(a->failure, RETRYD_FAILURE_GOAWAY);
    cr_expect_eq(testsrv_count(srv, "g2"), 0);
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_h2tls, untrusted_certificate_is_a_permanent_failure)
{
    char base[64];
    retryd_profile *p;
    snprintf(base, sizeof(base), "https://127.0.0.1:%d", testsrv_port(srv));
    retryd_profile_opts o = {.sz = sizeof(o),
                             .base_url = base,
                             .http_version = RETRYD_HTTP_2_TLS,
                             .budget = &plenty};
    cr_assert_eq(retryd_profile_new(client, &o, &p), 0);
    retryd_result *r = post(p, "/ok?id=ca", RETRYD_IDEMPOTENCY_SAFE);
    cr_expect_eq(retryd_result_attempt_count(r), 1);
    cr_expect_eq(retryd_result_evidence(r), RETRYD_EVIDENCE_NOT_SENT);
    cr_expect_eq(retryd_result_decision(r)->permanent,
                 RETRYD_FAILURE_TLS_CERTIFICATE);
    cr_expect_eq(testsrv_count(srv, "ca"), 0);
    retryd_result_free(r);
    retryd_profile_free(p);
}
