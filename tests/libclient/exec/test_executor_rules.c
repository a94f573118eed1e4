/* SPDX-License-Identifier: MIT */
/*
 * The executor's rules one at a time, against the real fault server:
 * libcurl's silent re-send on a dead keep-alive connection (and the veto),
 * Retry-After, the 401 refresh, response sinks, the bulkhead and its
 * release during backoff, draining, the deadline, keep-alive reuse, body
 * sources that fail, and hostile responses.
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <curl/curl.h>

#include "retryd/retryd.h"
#include "testsrv.h"

#include "exec_fixture.h"
#include "exec_profile.h"
#include "srv_log.h"

#define MS INT64_C(1000000)
#define S INT64_C(1000000000)

TestSuite(executor_rules, .init = exec_setup, .fini = exec_teardown,
          .timeout = 60);

static retryd_result *run(retryd_profile *p, retryd_request q)
{
    retryd_result *r;
    q.sz = sizeof(q);
    if (q.deadline_ns == 0)
        q.deadline_ns = 20 * S;
    cr_assert_eq(retryd_execute(p, &q, &r), 0);
    return r;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * S + ts.tv_nsec;
}

/* --- libcurl's own re-send ----------------------------------------------- */

static size_t discard(char *d, size_t s, size_t n, void *ctx)
{
    (void)d, (void)ctx;
    return s * n;
}

/* The problem, shown with plain libcurl: a POST on a reused keep-alive
 * connection that dies after the request was written is sent again on a
 * fresh connection, and the server executes it twice. */
Test(executor_rules, raw_libcurl_resends_a_post_on_a_dead_keepalive_connection)
{
    char url[96];
    CURL *h = curl_easy_init();
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/drop-second?id=raw",
             testsrv_port(srv));
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "pay 10");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    cr_assert_eq(curl_easy_perform(h), CURLE_OK); /* opens the connection */
    cr_assert_eq(curl_easy_perform(h), CURLE_OK); /* dropped, re-sent */
    curl_easy_cleanup(h);
    cr_expect_eq(testsrv_count(srv, "raw"), 3,
                 "the second POST was executed twice by the server");
}

Test(executor_rules, executor_vetoes_the_resend_and_answers_ambiguous)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_body *b;
    cr_assert_eq(retryd_body_new_bytes("pay 10", 6, &b), 0);
    retryd_request q = {.method = "POST",
                        .path = "/drop-second?id=veto",
                        .body = b,
                        .idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT};
    retryd_result *r = run(p, q); /* opens the connection */
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_RESPONSE);
    retryd_result_free(r);
    r = run(p, q); /* the same connection, dropped after the request */
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_AMBIGUOUS);
    cr_expect_eq(retryd_result_evidence(r), RETRYD_EVIDENCE_SENT_NO_RESPONSE);
    cr_expect(strstr(retryd_result_error(r), "re-send was vetoed") != NULL,
              "%s", retryd_result_error(r));
    cr_expect_eq(testsrv_count(srv, "veto"), 2, "once per call, never twice");
    retryd_result_free(r);
    retryd_body_free(b);
    retryd_profile_free(p);
}

Test(executor_rules, idempotent_request_is_retried_by_the_engine_instead)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_request q = {.path = "/drop-second?id=idem",
                        .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    retryd_result_free(run(p, q));
    retryd_result *r = run(p, q);
    /* The first call, the dropped send, and the engine's retry on a fresh
     * connection. */
    cr_expect_eq(testsrv_count(srv, "idem"), 3);
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_RESPONSE);
    cr_assert_eq(retryd_result_attempt_count(r), 2);
    const retryd_attempt *a = retryd_result_attempt(r, 0);
    cr_expect_eq(a->evidence, RETRYD_EVIDENCE_SENT_NO_RESPONSE);
    cr_expect_eq(a->decision->verdict, RETRYD_VERDICT_RETRY, "in the log");
    retryd_result_free(r);
    retryd_profile_free(p);
}

/* --- libcurl's avoidable re-sends, never enabled ------------------------- */

Test(executor_rules, redirect_is_the_response_and_is_not_followed)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_result *r = run(
        p, (retryd_request){.method = "POST",
                            .path = "/redirect?to=/ok%3Fid%3Dtarget&id=moved",
                            .idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT});
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_RESPONSE);
    cr_expect_eq(retryd_result_status(r), 302);
    cr_expect_eq(retryd_result_attempt_count(r), 1);
    cr_expect_eq(testsrv_count(srv, "moved"), 1);
    cr_expect_eq(testsrv_count(srv, "target"), 0, "the Location not followed");
    retryd_result_free(r);
    retryd_profile_free(p);
}

/* libcurl 7.88.1 asks for "100-continue" before a body over 1 MiB and
 * before one of unknown length (sent chunked); a 417 answer to that makes
 * it send the request again. The executor's uploads never ask. */
Test(executor_rules, uploads_never_ask_for_100_continue)
{
    enum { BIG = 2 * 1024 * 1024 };
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    char *big = malloc(BIG);
    cr_assert(big != NULL);
    memset(big, 'u', BIG);
    retryd_body *bodies[2], *part;
    cr_assert_eq(retryd_body_new_bytes(big, BIG, &bodies[0]), 0);
    free(big);
    /* A multipart body has no length in advance. */
    cr_assert_eq(retryd_body_new_bytes("part", 4, &part), 0);
    const char *name = "p";
    cr_assert_eq(retryd_body_new_multipart(&part, &name, NULL, 1, &bodies[1]),
                 0);
    static const char *const ids[] = {"big-upload", "chunked-upload"};
    for (int i = 0; i < 2; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/ok?id=%s", ids[i]);
        retryd_result *r =
            run(p, (retryd_request){.method = "POST",
                                    .path = path,
                                    .body = bodies[i],
                                    .idempotency =
                                        RETRYD_IDEMPOTENCY_NON_IDEMPOTENT});
        cr_expect_eq(retryd_result_status(r), 200, "%s", ids[i]);
        cr_expect_eq(testsrv_count(srv, ids[i]), 1, "%s", ids[i]);
        cr_expect_eq(srv_log_count(srv, ids[i], " POST "), 1, "%s", ids[i]);
        cr_expect_eq(srv_log_count(srv, ids[i], "expect-100"), 0,
                     "%s: the request said Expect: 100-continue", ids[i]);
        retryd_result_free(r);
        retryd_body_free(bodies[i]);
    }
    cr_expect_eq(srv_log_count(srv, "big-upload", " 2097152 "), 1,
                 "the whole body arrived");
    retryd_profile_free(p);
}

Test(executor_rules, closed_before_reading_is_never_executed)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    cr_assert_eq(testsrv_mode(srv, "accept-close"), 0);
    retryd_request q = {.method = "POST",
                        .path = "/ok?id=acc",
                        .idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT};
    retryd_result *r = run(p, q);
    retryd_evidence e = retryd_result_evidence(r);
    /* Whether the write beat the close decides what can be proven; either
     * way nothing executed, and a write that may have arrived is
     * ambiguous, never a silent retry. */
    cr_expect(e == RETRYD_EVIDENCE_NOT_SENT ||
              e == RETRYD_EVIDENCE_SENT_NO_RESPONSE);
    if (e == RETRYD_EVIDENCE_SENT_NO_RESPONSE)
        cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_AMBIGUOUS);
    cr_expect_eq(testsrv_count(srv, "acc"), 0);
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_rules, keepalive_connection_is_reused)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    for (int i = 0; i < 20; i++) {
        retryd_result *r = run(p, (retryd_request){.path = "/ok?id=ka"});
        cr_assert_eq(retryd_result_status(r), 200);
        retryd_result_free(r);
    }
    cr_expect_eq(testsrv_conns(srv), 1, "20 requests, one connection");
    retryd_profile_free(p);
}

/* --- Retry-After --------------------------------------------------------- */

Test(executor_rules, retry_after_seconds_is_the_wait)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){.max_attempts = 2});
    int64_t t0 = now_ns();
    retryd_result *r = run(
        p, (retryd_request){.path = "/status?code=429&retry_after=1&id=ra"});
    int64_t took = now_ns() - t0;
    cr_assert_eq(retryd_result_attempt_count(r), 2);
    const retryd_attempt *a = retryd_result_attempt(r, 0);
    cr_expect_eq(a->decision->delay_ns, 1 * S);
    cr_expect(a->decision->flags & RETRYD_RETRY_HONOURS_RETRY_AFTER);
    cr_expect_eq(retryd_result_attempt(r, 1)->wait_before_ns, 1 * S);
    cr_expect_geq(took, 1 * S, "waited %lld ns", (long long)took);
    cr_expect_eq(testsrv_count(srv, "ra"), 2);
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_rules, retry_after_http_date_is_the_wait)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){.max_attempts = 2});
    char date[64], path[160];
    /* 3 s ahead: at least 2 s of wait left even when the first attempt
     * is answered a whole (sanitized, loaded) second later. */
    time_t when = time(NULL) + 3;
    strftime(date, sizeof(date), "%a,%%20%d%%20%b%%20%Y%%20%H:%M:%S%%20GMT",
             gmtime(&when));
    snprintf(path, sizeof(path), "/status?code=503&retry_after=%s&id=rd", date);
    int64_t t0 = now_ns();
    retryd_result *r = run(p, (retryd_request){.path = path});
    int64_t took = now_ns() - t0;
    cr_assert_eq(retryd_result_attempt_count(r), 2);
    const retryd_attempt *a = retryd_result_attempt(r, 0);
    cr_expect(a->decision->flags & RETRYD_RETRY_HONOURS_RETRY_AFTER);
    cr_expect(a->decision->delay_ns > 0 && a->decision->delay_ns <= 3 * S,
              "%lld", (long long)a->decision->delay_ns);
    cr_expect_geq(took, a->decision->delay_ns, "waited %lld ns of %lld",
                  (long long)took, (long long)a->decision->delay_ns);
    cr_expect_eq(testsrv_count(srv, "rd"), 2);
    retryd_result_free(r);
    retryd_profile_free(p);
}

/* The wait, measured where it matters, at the server: the second attempt
 * arrives no sooner than the Retry-After the first one was sent. */
static void expect_server_gap(const char *id, int64_t at_least_ms)
{
    int64_t at[4];
    cr_assert_eq(srv_log_times(srv, id, at, 4), 2, "two executions of %s", id);
    cr_expect_geq(at[1] - at[0], at_least_ms,
                  "the server saw the retry %lld ms after the first attempt",
                  (long long)(at[1] - at[0]));
}

Test(executor_rules, retry_after_is_a_floor_at_the_server)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){.max_attempts = 2});
    retryd_result *r = run(
        p, (retryd_request){.path = "/status?code=429&retry_after=2&id=rf"});
    cr_assert_eq(retryd_result_attempt_count(r), 2);
    cr_expect_eq(retryd_result_attempt(r, 0)->decision->delay_ns, 2 * S);
    expect_server_gap("rf", 2000);
    retryd_result_free(r);
    /* RFC 9110 allows it on 503 too: a safe read waits for it the same. */
    r = run(p, (retryd_request){.path = "/status?code=503&retry_after=2&id=rg",
                                .idempotency = RETRYD_IDEMPOTENCY_SAFE});
    cr_assert_eq(retryd_result_attempt_count(r), 2);
    expect_server_gap("rg", 2000);
    retryd_result_free(r);
    retryd_profile_free(p);
}

/* A Retry-After of 120 s with a 5 s deadline: nothing can honour it, so
 * the call returns at once with the 429, whether the profile's maximum
 * (60 s by default) or the deadline is what it exceeds. */
Test(executor_rules, retry_after_nobody_can_honour_returns_without_waiting)
{
    static const retryd_backoff_policy patient = {
        sizeof(patient), RETRYD_JITTER_FULL, 1 * MS, 4 * MS, 300 * S};
    retryd_profile *dflt = exec_profile((retryd_profile_opts){
        .backoff = &retryd_backoff_default, .max_attempts = 3});
    retryd_profile *slow = exec_profile(
        (retryd_profile_opts){.backoff = &patient, .max_attempts = 3});
    struct {
        retryd_profile *p;
        const char *path, *id;
        retryd_rule rule;
    } cases[] = {
        {dflt, "/status?code=429&retry_after=120&id=rm", "rm",
         RETRYD_RULE_RETRY_AFTER_EXCEEDS_MAX},
        {slow, "/status?code=429&retry_after=120&id=rn", "rn",
         RETRYD_RULE_WAIT_EXCEEDS_DEADLINE},
    };
    for (size_t i = 0; i < 2; i++) {
        int64_t t0 = now_ns();
        retryd_result *r =
            run(cases[i].p,
                (retryd_request){.path = cases[i].path, .deadline_ns = 5 * S});
        int64_t took = now_ns() - t0;
        cr_expect_lt(took, 1 * S, "returned after %lld ms", (long long)took);
        cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_RESPONSE);
        cr_expect_eq(retryd_result_status(r), 429);
        cr_expect_eq(retryd_result_attempt_count(r), 1);
        cr_expect_eq(retryd_result_decision(r)->reason, RETRYD_DENIAL_DEADLINE);
        cr_expect_eq(retryd_result_decision(r)->rule, cases[i].rule, "%s",
                     retryd_rule_name(retryd_result_decision(r)->rule));
        cr_expect_eq(testsrv_count(srv, cases[i].id), 1);
        retryd_result_free(r);
    }
    retryd_profile_free(dflt);
    retryd_profile_free(slow);
}

Test(executor_rules, retry_after_past_the_deadline_is_not_waited_for)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_result *r =
        run(p, (retryd_request){.path = "/status?code=503&retry_after=4&id=rl",
                                .deadline_ns = 2 * S});
    cr_expect_eq(retryd_result_attempt_count(r), 1);
    cr_expect_eq(retryd_result_decision(r)->reason, RETRYD_DENIAL_DEADLINE);
    cr_expect_eq(retryd_result_decision(r)->rule,
                 RETRYD_RULE_WAIT_EXCEEDS_DEADLINE);
    cr_expect_eq(testsrv_count(srv, "rl"), 1);
    retryd_result_free(r);
    retryd_profile_free(p);
}

/* --- 401 ----------------------------------------------------------------- */

static int refreshes;
static int refresh_good(void *ctx, char *value, size_t len)
{
    (void)ctx;
    refreshes++;
    snprintf(value, len, "Bearer fresh");
    return 0;
}

Test(executor_rules, status_401_refreshes_credentials_once_then_succeeds)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    static const char *const hdrs[] = {"Authorization: Bearer stale", NULL};
    refreshes = 0;
    retryd_result *r =
        run(p, (retryd_request){.path = "/auth?token=fresh&id=au",
                                .headers = hdrs,
                                .idempotency = RETRYD_IDEMPOTENCY_IDEMPOTENT,
                                .refresh = refresh_good});
    cr_expect_eq(retryd_result_status(r), 200);
    cr_expect_eq(refreshes, 1);
    cr_expect_eq(testsrv_rejects(srv, "au"), 1);
    cr_expect_eq(testsrv_count(srv, "au"), 1);
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_rules, status_401_after_the_refresh_is_final)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){.max_attempts = 5});
    refreshes = 0;
    retryd_result *r =
        run(p, (retryd_request){.path = "/auth?token=never&id=au2",
                                .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                                .refresh = refresh_good});
    cr_expect_eq(retryd_result_status(r), 401);
    cr_expect_eq(refreshes, 1, "one refresh-and-replay, no more");
    cr_expect_eq(testsrv_rejects(srv, "au2"), 2);
    cr_expect_eq(retryd_result_decision(r)->rule,
                 RETRYD_RULE_STATUS_401_DENIED);
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_rules, status_401_is_not_replayed_for_a_payment)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    refreshes = 0;
    retryd_result *r = run(
        p, (retryd_request){.method = "POST",
                            .path = "/auth?token=fresh&id=au3",
                            .idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT,
                            .refresh = refresh_good});
    cr_expect_eq(retryd_result_status(r), 401);
    cr_expect_eq(refreshes, 0);
    cr_expect_eq(testsrv_rejects(srv, "au3"), 1);
    retryd_result_free(r);
    retryd_profile_free(p);
}

/* --- sinks --------------------------------------------------------------- */

typedef struct sink_buf {
    char data[8192];
    size_t len;
    int calls;
} sink_buf;

static size_t to_sink(const void *d, size_t len, void *ctx)
{
    sink_buf *s = ctx;
    if (s->len + len > sizeof(s->data))
        return 0;
    memcpy(s->data + s->len, d, len);
    s->len += len;
    s->calls++;
    return len;
}

Test(executor_rules, success_streams_into_the_sink)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    sink_buf s = {0};
    retryd_result *r =
        run(p, (retryd_request){.path = "/slow-body?len=64&chunk=8&ms=5&id=sk",
                                .sink = to_sink,
                                .sink_ctx = &s});
    cr_expect_eq(retryd_result_status(r), 200);
    cr_expect_eq(s.len, 64);
    cr_expect_gt(s.calls, 1, "delivered as it arrived");
    size_t len;
    retryd_result_body(r, &len);
    cr_expect_eq(len, 0, "streamed, not kept");
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_rules, delivered_bytes_forbid_a_retry)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    sink_buf s = {0};
    retryd_result *r =
        run(p, (retryd_request){.path = "/partial?len=100&sent=40&id=sp",
                                .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                                .sink = to_sink,
                                .sink_ctx = &s});
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_FAILURE);
    cr_expect_eq(retryd_result_evidence(r), RETRYD_EVIDENCE_PARTIAL_RESPONSE);
    cr_expect_eq(retryd_result_decision(r)->reason,
                 RETRYD_DENIAL_RESPONSE_ALREADY_DELIVERED);
    cr_expect_eq(s.len, 40);
    cr_expect_eq(testsrv_count(srv, "sp"), 1);
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_rules, retried_error_bodies_never_reach_the_sink)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    sink_buf s = {0};
    retryd_result *r =
        run(p, (retryd_request){.path = "/seq?codes=503,200&id=se",
                                .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                                .sink = to_sink,
                                .sink_ctx = &s});
    cr_expect_eq(retryd_result_status(r), 200);
    cr_expect_eq(retryd_result_attempt_count(r), 2);
    s.data[s.len] = '\0';
    /* The server numbers its answers: "seq <n> <code>". */
    cr_expect_str_eq(s.data, "seq 2 200\n", "only the final response's body");
    retryd_result_free(r);
    retryd_profile_free(p);
}

/* A sink receives a response's body only; an ambiguous 503's body stays
 * in the result, for a caller that shows what arrived. */
Test(executor_rules, ambiguous_error_body_stays_in_the_result_not_the_sink)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    sink_buf s = {0};
    retryd_result *r = run(
        p, (retryd_request){.path = "/status?code=503&id=sam",
                            .idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT,
                            .sink = to_sink,
                            .sink_ctx = &s});
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_AMBIGUOUS);
    cr_expect_eq(s.len, 0, "not a response: the sink gets nothing");
    size_t len;
    const char *body = retryd_result_body(r, &len);
    cr_expect_eq(len, strlen("status 503\n"));
    cr_expect(len > 0 && memcmp(body, "status 503\n", len) == 0);
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_rules, oversized_response_is_refused_not_buffered)
{
    retryd_profile *p =
        exec_profile((retryd_profile_opts){.max_response_bytes = 1000});
    retryd_result *r =
        run(p, (retryd_request){.path = "/ok?len=100000&id=big"});
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_FAILURE);
    cr_expect_eq(retryd_result_decision(r)->reason,
                 RETRYD_DENIAL_PERMANENT_FAILURE);
    cr_expect_eq(testsrv_count(srv, "big"), 1);
    retryd_result_free(r);
    retryd_profile_free(p);
}

/* --- bulkhead ------------------------------------------------------------ */

typedef struct bg {
    retryd_profile *p;
    retryd_request q;
    retryd_result *r;
    int64_t done_ns;
} bg;

static void *bg_run(void *arg)
{
    bg *b = arg;
    b->q.sz = sizeof(b->q);
    retryd_execute(b->p, &b->q, &b->r);
    b->done_ns = now_ns();
    return NULL;
}

Test(executor_rules, bulkhead_wait_that_runs_out_is_not_sent)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){
        .bulkhead = 1, .bulkhead_wait_ns = 50 * MS, .max_attempts = 2});
    bg hold = {.p = p,
               .q = {.path = "/hold?ms=1500&id=hold", .deadline_ns = 10 * S}};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, bg_run, &hold), 0);
    cr_assert_eq(testsrv_wait_count(srv, "hold", 1, 5000), 1);
    retryd_result *r = run(
        p, (retryd_request){.method = "POST",
                            .path = "/ok?id=late",
                            .idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT});
    const retryd_attempt *a = retryd_result_attempt(r, 0);
    cr_expect_eq(a->evidence, RETRYD_EVIDENCE_NOT_SENT);
    cr_expect_eq(a->failure, RETRYD_FAILURE_POOL_TIMEOUT);
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_FAILURE,
                 "proven not sent: a plain failure even for a payment");
    cr_expect_eq(testsrv_count(srv, "late"), 0);
    retryd_result_free(r);
    pthread_join(t, NULL);
    retryd_result_free(hold.r);
    retryd_profile_free(p);
}

Test(executor_rules, backoff_holds_no_permit)
{
    /* One permit. A retries a 503 with 300 ms waits; B, started once the
     * server has A's first request, may wait 250 ms for the permit. B
     * gets it: a waiting retry holds nothing. Had A kept the permit
     * through its waits, B would need 600 ms; the 250 ms leave A time to
     * read its first answer and let go on a loaded machine. */
    retryd_profile *p = exec_profile((retryd_profile_opts){
        .bulkhead = 1,
        .bulkhead_wait_ns = 250 * MS,
        .backoff = &(const retryd_backoff_policy){sizeof(retryd_backoff_policy),
                                                  RETRYD_JITTER_DECORRELATED,
                                                  300 * MS, 300 * MS, 5 * S}});
    bg a = {.p = p,
            .q = {.path = "/status?code=503&id=A",
                  .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                  .deadline_ns = 10 * S}};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, bg_run, &a), 0);
    cr_assert_eq(testsrv_wait_count(srv, "A", 1, 5000), 1);
    retryd_result *r = run(p, (retryd_request){.path = "/ok?id=B"});
    int64_t b_done = now_ns();
    cr_expect_eq(retryd_result_status(r), 200);
    cr_expect_eq(retryd_result_attempt_count(r), 1, "no pool timeout");
    pthread_join(t, NULL);
    cr_expect_eq(retryd_result_attempt_count(a.r), 3);
    cr_expect_lt(b_done, a.done_ns, "B finished while A was still waiting");
    retryd_result_free(r);
    retryd_result_free(a.r);
    retryd_profile_free(p);
}

/* --- draining, deadline, budget ------------------------------------------ */

Test(executor_rules, draining_process_denies_retries)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_host_set_draining(retryd_client_host(client), true);
    retryd_result *r =
        run(p, (retryd_request){.path = "/status?code=503&id=dr"});
    cr_expect_eq(retryd_result_decision(r)->reason,
                 RETRYD_DENIAL_RUNTIME_DRAINING);
    cr_expect_eq(testsrv_count(srv, "dr"), 1);
    retryd_result_free(r);
    retryd_host_set_draining(retryd_client_host(client), false);
    retryd_profile_free(p);
}

Test(executor_rules, attempt_timeout_is_bounded_by_the_deadline)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){
        .attempt_timeout_ns = 5 * S, .min_attempt_ns = 100 * MS});
    int64_t t0 = now_ns();
    retryd_result *r = run(p, (retryd_request){.path = "/hold?ms=3000&id=dl",
                                               .deadline_ns = 400 * MS});
    int64_t took = now_ns() - t0;
    cr_expect_lt(took, 2 * S, "took %lld ns", (long long)took);
    cr_expect_eq(retryd_result_attempt_count(r), 1);
    cr_expect_eq(retryd_result_decision(r)->reason, RETRYD_DENIAL_DEADLINE);
    cr_expect_eq(retryd_result_attempt(r, 0)->failure, RETRYD_FAILURE_TIMEOUT);
    /* The client gave up on its own clock, not on anything the server did:
     * wait (bounded) for the server to have counted the request. */
    cr_expect_eq(testsrv_wait_count(srv, "dl", 1, 5000), 1);
    retryd_result_free(r);
    retryd_profile_free(p);
}

Test(executor_rules, empty_budget_denies_the_retry)
{
    static const retryd_budget_params dry = {sizeof(retryd_budget_params), 0, 0,
                                             1};
    retryd_profile *p =
        exec_profile((retryd_profile_opts){.budget = &dry, .upstream = "dry"});
    retryd_result *r =
        run(p, (retryd_request){.path = "/status?code=503&id=bu"});
    cr_expect_eq(retryd_result_decision(r)->reason,
                 RETRYD_DENIAL_BUDGET_EXHAUSTED);
    cr_expect_eq(testsrv_count(srv, "bu"), 1);
    retryd_result_free(r);
    retryd_profile_free(p);
}

/* --- bad bodies and hostile input ---------------------------------------- */

static long failing_read(void *ctx, void *buf, size_t len)
{
    (void)ctx, (void)buf, (void)len;
    return -1;
}

static int open_failing(void *ctx, retryd_body_reader *ret)
{
    (void)ctx;
    *ret = (retryd_body_reader){sizeof(retryd_body_reader), failing_read, NULL,
                                NULL, 10};
    return 0;
}

Test(executor_rules, failing_body_source_is_permanent)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_body *b;
    cr_assert_eq(retryd_body_new_supplier(open_failing, NULL, &b), 0);
    retryd_result *r =
        run(p, (retryd_request){.method = "PUT",
                                .path = "/echo?id=bs",
                                .body = b,
                                .idempotency = RETRYD_IDEMPOTENCY_IDEMPOTENT});
    cr_expect_eq(retryd_result_attempt_count(r), 1);
    cr_expect_eq(retryd_result_attempt(r, 0)->failure,
                 RETRYD_FAILURE_BODY_SOURCE);
    cr_expect_eq(retryd_result_decision(r)->reason,
                 RETRYD_DENIAL_PERMANENT_FAILURE);
    cr_expect_eq(testsrv_count(srv, "bs"), 0);
    retryd_result_free(r);
    retryd_body_free(b);
    retryd_profile_free(p);
}

/* Refused with RETRYD_EINVAL, and no result handed out. */
static void expect_refused(retryd_profile *p, retryd_request q,
                           const char *what)
{
    retryd_result *r = NULL;
    q.sz = sizeof(q);
    cr_expect_eq(retryd_execute(p, &q, &r), RETRYD_EINVAL, "%s", what);
    cr_expect(r == NULL, "%s: a result for a refused request", what);
}

Test(executor_rules, request_smuggling_is_refused_before_sending)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    static const char *const bad_header[] = {"X-A: 1\r\nX-B: 2", NULL};
    static const char *const bad_name[] = {"X A: 1", NULL};
    /* Any control character but a tab, not only CR and LF. */
    static const char *const bad_value[] = {"X-A: 1\x01", NULL};
    static const char *const tab_value[] = {"X-A: 1\t2", NULL};
    expect_refused(p, (retryd_request){.path = "/ok?id=x\r\nHost: evil"},
                   "CR LF in the path");
    expect_refused(p, (retryd_request){.path = "/ok", .method = "GET /x"},
                   "a space in the method");
    expect_refused(p, (retryd_request){.path = "/ok", .headers = bad_header},
                   "CR LF in a header value");
    expect_refused(p, (retryd_request){.path = "/ok", .headers = bad_name},
                   "a space in a header name");
    expect_refused(
        p, (retryd_request){.path = "/ok", .idempotency_key_value = "a\nb"},
        "LF in the idempotency key");
    expect_refused(p, (retryd_request){.path = "/ok", .headers = bad_value},
                   "a control character in a header value");
    cr_expect_eq(testsrv_conns(srv), 0, "a refused request was sent");
    retryd_result *r =
        run(p, (retryd_request){.path = "/ok?id=tab", .headers = tab_value});
    cr_expect_eq(retryd_result_status(r), 200, "a tab is a field value");
    cr_expect_eq(testsrv_count(srv, "tab"), 1);
    retryd_result_free(r);
    retryd_profile_free(p);
}

/* A server that accepts one connection and answers its request with an
 * endless header block. */
typedef struct hostile {
    int lfd;
    int accepted;
} hostile;

static void *hostile_server(void *arg)
{
    hostile *h = arg;
    int fd = accept(h->lfd, NULL, NULL);
    char buf[4096];
    if (fd < 0)
        return NULL;
    h->accepted++;
    const char *head = "HTTP/1.1 200 OK\r\n";
    if (read(fd, buf, sizeof(buf)) > 0 &&
        send(fd, head, strlen(head), MSG_NOSIGNAL) >= 0) {
        for (int i = 0; i < 5000; i++) {
            char line[64];
            int n =
                snprintf(line, sizeof(line), "X-Junk-%d: %0*d\r\n", i, 30, i);
            if (send(fd, line, (size_t)n, MSG_NOSIGNAL) < 0)
                break;
        }
    }
    close(fd);
    return NULL;
}

Test(executor_rules, endless_response_headers_are_cut_off)
{
    hostile h = {.lfd = socket(AF_INET, SOCK_STREAM, 0)};
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    cr_assert_eq(bind(h.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(h.lfd, 4), 0);
    getsockname(h.lfd, (struct sockaddr *)&sa, &len);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, hostile_server, &h), 0);
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", ntohs(sa.sin_port));
    retryd_profile_opts o = {.sz = sizeof(o),
                             .base_url = base,
                             .max_attempts = 1,
                             .budget = &plenty};
    retryd_profile *p;
    cr_assert_eq(retryd_profile_new(client, &o, &p), 0);
    retryd_result *r = run(
        p, (retryd_request){.method = "POST",
                            .idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT});
    cr_expect_eq(retryd_result_attempt(r, 0)->failure, RETRYD_FAILURE_ABORTED);
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_AMBIGUOUS,
                 "no final header block: whether it ran is unknown");
    retryd_result_free(r);
    retryd_profile_free(p);
    pthread_join(t, NULL);
    /* Every connection the client opened is accepted or in the backlog
     * by now: count those the server never took. */
    cr_assert_eq(fcntl(h.lfd, F_SETFL, O_NONBLOCK), 0);
    int fd;
    while ((fd = accept(h.lfd, NULL, NULL)) >= 0) {
        h.accepted++;
        close(fd);
    }
    cr_expect_eq(h.accepted, 1, "the request went out once");
    close(h.lfd);
}

/* --- pooled handles carry nothing from one request to the next ----------- */

Test(executor_rules, head_then_bodyless_post_on_one_handle_sends_a_post)
{
    /* One permit: every request takes the same pooled handle. */
    retryd_profile *p = exec_profile((retryd_profile_opts){.bulkhead = 1});
    static const struct {
        const char *method, *id;
    } seq[] = {{"HEAD", "m1"}, {"POST", "m2"}, {"GET", "m3"},
               {"HEAD", "m4"}, {"POST", "m5"}, {"PUT", "m6"}};
    for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
        char path[32];
        snprintf(path, sizeof(path), "/ok?id=%s", seq[i].id);
        retryd_result *r =
            run(p, (retryd_request){.method = seq[i].method, .path = path});
        cr_expect_eq(retryd_result_status(r), 200);
        retryd_result_free(r);
        char want[16];
        snprintf(want, sizeof(want), " %s ", seq[i].method);
        cr_expect_eq(srv_log_count(srv, seq[i].id, want), 1,
                     "%s went out as %s", seq[i].id, seq[i].method);
    }
    cr_expect_eq(testsrv_conns(srv), 1, "and all on one connection");
    retryd_profile_free(p);
}

static int open_never(void *ctx, retryd_body_reader *ret)
{
    (void)ctx, (void)ret;
    return -1;
}

Test(executor_rules, body_that_fails_to_open_keeps_the_connection)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){.bulkhead = 1});
    retryd_body *b;
    cr_assert_eq(retryd_body_new_supplier(open_never, NULL, &b), 0);
    retryd_result *r = run(p, (retryd_request){.path = "/ok?id=c1"});
    retryd_result_free(r);
    r = run(p, (retryd_request){.method = "PUT",
                                .path = "/echo?id=c2",
                                .body = b,
                                .idempotency = RETRYD_IDEMPOTENCY_IDEMPOTENT});
    cr_expect_eq(retryd_result_attempt(r, 0)->failure,
                 RETRYD_FAILURE_BODY_SOURCE);
    retryd_result_free(r);
    r = run(p, (retryd_request){.path = "/ok?id=c3"});
    cr_expect_eq(retryd_result_status(r), 200);
    retryd_result_free(r);
    cr_expect_eq(testsrv_count(srv, "c2"), 0);
    cr_expect_eq(testsrv_conns(srv), 1, "libcurl never ran: handle kept");
    retryd_body_free(b);
    retryd_profile_free(p);
}

/* --- the 401 refresh ------------------------------------------------------ */

static int refresh_bad(void *ctx, char *value, size_t len)
{
    (void)ctx, (void)value, (void)len;
    refreshes++;
    return -1;
}

Test(executor_rules, failed_refresh_is_a_denial_that_spends_no_token)
{
    /* No floor: the balance moves only by deposits and withdrawals. */
    static const retryd_budget_params exact = {sizeof(retryd_budget_params), 1,
                                               0, 10};
    retryd_profile *p = exec_profile(
        (retryd_profile_opts){.budget = &exact, .upstream = "refresh-fails"});
    double balance;
    refreshes = 0;
    retryd_result *r =
        run(p, (retryd_request){.path = "/auth?token=fresh&id=rf",
                                .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                                .refresh = refresh_bad});
    cr_expect_eq(refreshes, 1);
    cr_expect_eq(retryd_result_attempt_count(r), 1);
    cr_expect_eq(retryd_result_decision(r)->verdict, RETRYD_VERDICT_DENIED);
    cr_expect_eq(retryd_result_decision(r)->rule,
                 RETRYD_RULE_STATUS_401_DENIED);
    cr_assert_eq(retryd_upstream_balance(retryd_profile_budget(p), &balance),
                 0);
    cr_expect_eq(balance, 1.0, "the first attempt's deposit, unspent");
    retryd_result_free(r);
    retryd_profile_free(p);
}

/* --- growable structs (docs/abi.md) -------------------------------------- */

Test(executor_rules, options_refuse_a_set_field_they_do_not_know)
{
    char base[64];
    retryd_profile *p = NULL;
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", testsrv_port(srv));
    struct {
        retryd_profile_opts o;
        uint64_t unknown_field;
    } newer = {.o = {.sz = sizeof(newer), .base_url = base},
               .unknown_field = 1};
    cr_expect_eq(retryd_profile_new(client, &newer.o, &p), RETRYD_EOPTS);
    newer.unknown_field = 0;
    cr_assert_eq(retryd_profile_new(client, &newer.o, &p), 0,
                 "an unknown field left unset is fine");
    retryd_profile_free(p);

    /* Nested structs are checked too, each with its own size. */
    retryd_profile_opts o = {.sz = sizeof(o), .base_url = base};
    const retryd_backoff_policy no_sz = {.base_ns = MS, .max_ns = MS};
    o.backoff = &no_sz;
    cr_expect_eq(retryd_profile_new(client, &o, &p), RETRYD_EINVAL);
    struct {
        retryd_tls_opts t;
        int unknown_field;
    } tls = {.t = {.sz = sizeof(tls)}, .unknown_field = 1};
    o.backoff = NULL;
    o.tls = &tls.t;
    cr_expect_eq(retryd_profile_new(client, &o, &p), RETRYD_EOPTS);
    const retryd_host_opts host_no_sz = {.flags = RETRYD_HOST_LOCAL_ONLY};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &host_no_sz};
    retryd_client *c = NULL;
    cr_expect_eq(retryd_client_new(&co, &c), RETRYD_EINVAL);
    cr_expect_null(c);
}

Test(executor_rules, a_request_with_an_unknown_set_field_is_not_sent)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    struct {
        retryd_request q;
        void *unknown_field;
    } newer = {.q = {.sz = sizeof(newer), .path = "/ok?id=newer"},
               .unknown_field = &newer};
    retryd_result *r = NULL;
    cr_expect_eq(retryd_execute(p, &newer.q, &r), RETRYD_EOPTS);
    cr_expect_null(r);
    cr_expect_eq(testsrv_count(srv, "newer"), 0, "nothing reached the server");
    retryd_profile_free(p);
}

Test(executor_rules, attempts_and_their_decisions_carry_their_size)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_result *r =
        run(p, (retryd_request){.path = "/status?code=503&id=sz",
                                .idempotency = RETRYD_IDEMPOTENCY_SAFE});
    size_t n = retryd_result_attempt_count(r);
    cr_assert_eq(n, 3, "503 on a safe read: every attempt used");
    for (size_t i = 0; i < n; i++) {
        const retryd_attempt *a = retryd_result_attempt(r, i);
        cr_expect_eq(a->sz, sizeof(retryd_attempt));
        cr_assert_not_null(a->decision);
        cr_expect_eq(a->decision->sz, sizeof(retryd_decision));
        cr_expect_eq(a->decision->verdict,
                     i + 1 < n ? RETRYD_VERDICT_RETRY : RETRYD_VERDICT_DENIED);
    }
    cr_expect_eq(retryd_result_decision(r),
                 retryd_result_attempt(r, n - 1)->decision);
    retryd_result_free(r);
    retryd_profile_free(p);
}

static int open_short_reader(void *ctx, retryd_body_reader *ret)
{
    (void)ctx;
    ret->sz = 0; /* a caller that forgot the size */
    ret->read = NULL;
    return 0;
}

Test(executor_rules, a_reader_without_its_size_fails_the_attempt_unsent)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_body *body;
    cr_assert_eq(retryd_body_new_supplier(open_short_reader, NULL, &body), 0);
    retryd_result *r =
        run(p, (retryd_request){.method = "POST",
                                .path = "/ok?id=short",
                                .body = body,
                                .idempotency = RETRYD_IDEMPOTENCY_SAFE});
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_FAILURE);
    cr_expect_eq(retryd_result_evidence(r), RETRYD_EVIDENCE_NOT_SENT);
    cr_expect_eq(testsrv_count(srv, "short"), 0);
    retryd_result_free(r);
    retryd_body_free(body);
    retryd_profile_free(p);
}

/* "No deadline" spelled INT64_MAX must not overflow into the past (UBSan
 * checks the arithmetic in the sanitizer build); a negative one is refused. */
Test(executor_rules, extreme_deadlines_neither_overflow_nor_pass)
{
    retryd_profile *p =
        exec_profile((retryd_profile_opts){.bulkhead_wait_ns = INT64_MAX});
    retryd_result *r =
        run(p, (retryd_request){.path = "/ok?id=dmax",
                                .deadline_ns = INT64_MAX,
                                .idempotency = RETRYD_IDEMPOTENCY_SAFE});
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_RESPONSE);
    cr_expect_eq(retryd_result_status(r), 200);
    retryd_result_free(r);
    retryd_request q = {
        .sz = sizeof(q), .path = "/ok?id=dmin", .deadline_ns = INT64_MIN};
    r = NULL;
    cr_expect_eq(retryd_execute(p, &q, &r), RETRYD_EINVAL);
    cr_expect_null(r);
    cr_expect_eq(testsrv_count(srv, "dmin"), 0);
    retryd_profile_free(p);
}

/* --- connecting and transfer deadlines ------------------------------------
 * Both executors bound a transfer the same way: retryd_execute through
 * libcurl's timers, the multi through its own (multi.c, transfer_due).
 * These rows hold for both, since this suite runs through each. */

/* A listener that never accepts, its accept queue filled by connections of
 * our own: the kernel drops the next SYN, so a client's connect hangs
 * until its own timeout. The fillers are connected with a 100 ms send
 * timeout until one does not complete: the queue is then full. */
static int stalled_listener(int *port, int fill[], int cap, int *n)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(l, 0) != 0 || getsockname(l, (struct sockaddr *)&a, &len) != 0)
        return -1;
    *port = ntohs(a.sin_port);
    struct timeval tv = {.tv_usec = 100000};
    for (*n = 0; *n < cap;) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0)
            return -1;
        (void)setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        fill[(*n)++] = s;
        if (connect(s, (struct sockaddr *)&a, sizeof(a)) != 0)
            return l; /* this SYN was dropped: the queue is full */
    }
    return -1;
}

Test(executor_rules, a_connect_that_hangs_times_out_not_sent_and_is_retried)
{
    int fill[32], n = 0, port = 0;
    int l = stalled_listener(&port, fill, 32, &n);
    cr_assert_geq(l, 0, "a listener with a full accept queue");
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", port);
    retryd_profile_opts o = {.sz = sizeof(o),
                             .base_url = base,
                             .connect_timeout_ns = 200 * MS,
                             .attempt_timeout_ns = 5 * S,
                             .max_attempts = 2,
                             .backoff = &exec_fast,
                             .budget = &plenty};
    retryd_profile *p;
    cr_assert_eq(retryd_profile_new(client, &o, &p), 0);
    /* A payment: never sent, so retrying it is safe, and the answer is a
     * failure, not ambiguous. */
    retryd_result *r = run(
        p, (retryd_request){.method = "POST",
                            .path = "/pay",
                            .idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT});
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_FAILURE);
    cr_expect_eq(retryd_result_attempt_count(r), 2);
    for (size_t i = 0; i < retryd_result_attempt_count(r); i++) {
        const retryd_attempt *a = retryd_result_attempt(r, i);
        cr_expect_eq(a->evidence, RETRYD_EVIDENCE_NOT_SENT, "attempt %zu", i);
        cr_expect_eq(a->failure, RETRYD_FAILURE_CONNECT, "attempt %zu", i);
        cr_expect_geq(a->duration_ns, 150 * MS, "attempt %zu: %lld ns", i,
                      (long long)a->duration_ns);
        /* Ended by the connect timeout, not the attempt's 5 s: the failure
         * says so (an attempt timeout would be RETRYD_FAILURE_TIMEOUT), so
         * no upper bound on the clock is needed. libcurl's wording,
         * whichever of its paths (and executor) timed it. */
        cr_expect(strstr(a->error, "imed out") != NULL ||
                      strstr(a->error, "Timeout was reached") != NULL ||
                      strstr(a->error, "Connection timeout") != NULL,
                  "attempt %zu: \"%s\"", i, a->error);
        printf("connect timeout, attempt %zu: \"%s\"\n", i, a->error);
    }
    retryd_result_free(r);
    retryd_profile_free(p);
    for (int i = 0; i < n; i++)
        close(fill[i]);
    close(l);
}

/* Connected in time, a transfer runs past the connect timeout to the
 * attempt's: the answer after 300 ms arrives, one after 3 s does not. */
Test(executor_rules, the_connect_timeout_ends_with_the_connection)
{
    retryd_profile *p =
        exec_profile((retryd_profile_opts){.connect_timeout_ns = 100 * MS,
                                           .attempt_timeout_ns = 800 * MS,
                                           .max_attempts = 1});
    retryd_result *r =
        run(p, (retryd_request){.path = "/hold?ms=300&id=ct1",
                                .idempotency = RETRYD_IDEMPOTENCY_SAFE});
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_RESPONSE);
    cr_expect_eq(retryd_result_status(r), 200);
    retryd_result_free(r);

    int64_t t0 = now_ns();
    r = run(p, (retryd_request){.path = "/hold?ms=3000&id=ct2",
                                .idempotency = RETRYD_IDEMPOTENCY_SAFE});
    int64_t took = now_ns() - t0;
    const retryd_attempt *a = retryd_result_attempt(r, 0);
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_FAILURE);
    cr_expect_eq(a->evidence, RETRYD_EVIDENCE_SENT_NO_RESPONSE);
    cr_expect_eq(a->failure, RETRYD_FAILURE_TIMEOUT);
    /* Not before the attempt timeout; and ended by it, not by the 3 s
     * answer (that would be a response), so no upper bound is needed. */
    cr_expect_geq(took, 700 * MS, "took %lld ns", (long long)took);
    retryd_result_free(r);
    retryd_profile_free(p);
}
