/* SPDX-License-Identifier: MIT */
/*
 * The asynchronous executor's own rules, against the real fault server
 * (the fault x idempotency x body matrix, the executor's rules and the
 * HTTP/2 rows run through it too: test_executor*_multi). Hundreds of
 * requests on one thread, some failing, some told to come back later, some
 * ambiguous; cancellation during a transfer, a backoff and a permit wait;
 * the bulkhead queue, served by the multi's own calls and by other
 * threads; deadlines bounding a permit wait; completions never inside
 * submit. Every wait is for a condition, with a bound.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "retryd/retryd.h"
#include "testsrv.h"

#include "exec_fixture.h"
#include "exec_profile.h"
#include "srv_log.h"

#define MS INT64_C(1000000)
#define S INT64_C(1000000000)

TestSuite(multi, .init = exec_setup, .fini = exec_teardown, .timeout = 90);

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * S + ts.tv_nsec;
}

static retryd_multi *new_multi(void)
{
    retryd_multi *m;
    cr_assert_eq(retryd_multi_new(client, NULL, &m), 0);
    return m;
}

/* One request and what its completion said. The request lives here until
 * the completion has run, as retryd_multi_submit() requires. */
typedef struct job {
    char id[48], path[128];
    retryd_request q;
    retryd_call *call;
    int calls; /* completions: exactly one */
    int err;
    retryd_result *r;
    int64_t done_ns;
} job;

static void on_done(void *ctx, retryd_call *call, int err, retryd_result *r)
{
    job *j = ctx;
    cr_expect_eq(call, j->call, "%s: its own call", j->id);
    j->calls++;
    j->err = err;
    j->r = r;
    j->done_ns = now_ns();
}

/* Submit GET or POST @p path with "id=<id>" appended, its deadline
 * @p deadline_ns from now. */
static void submit_until(retryd_multi *m, retryd_profile *p, job *j,
                         const char *id, const char *path, const char *method,
                         retryd_idempotency idem, int64_t deadline_ns)
{
    snprintf(j->id, sizeof(j->id), "%s", id);
    snprintf(j->path, sizeof(j->path), "%s%cid=%s", path,
             strchr(path, '?') ? '&' : '?', id);
    j->q = (retryd_request){.sz = sizeof(j->q),
                            .method = method,
                            .path = j->path,
                            .idempotency = idem,
                            .deadline_ns = deadline_ns};
    cr_assert_eq(retryd_multi_submit(m, p, &j->q, on_done, j, &j->call), 0,
                 "%s", id);
}

/* The same with a deadline of 20 s. */
static void submit(retryd_multi *m, retryd_profile *p, job *j, const char *id,
                   const char *path, const char *method,
                   retryd_idempotency idem)
{
    submit_until(m, p, j, id, path, method, idem, 20 * S);
}

typedef bool (*cond_fn)(void *arg);

/* Drive @p m until @p cond holds, at most @p ms milliseconds. */
static bool run_until(retryd_multi *m, cond_fn cond, void *arg, int ms)
{
    int64_t end = now_ns() + ms * MS;
    while (!cond(arg)) {
        if (now_ns() > end)
            return false;
        int r = retryd_multi_run(m, 5 * MS);
        cr_assert(r == 0 || r == RETRYD_ETIMEDOUT, "run: %s",
                  retryd_strerror(r));
    }
    return true;
}

static bool job_done(void *arg)
{
    return ((job *)arg)->calls > 0;
}

typedef struct count_is {
    const char *id;
    long n;
} count_is;

static bool server_counted(void *arg)
{
    count_is *c = arg;
    return testsrv_count(srv, c->id) >= c->n;
}

/* --- hundreds at once ------------------------------------------------------
 */

typedef struct kind {
    const char *name, *path, *method;
    retryd_idempotency idem;
    int slow; /* through the profile with a short attempt timeout */
    retryd_outcome outcome;
    int status;
    long executions;
} kind;

/* max_attempts 2 throughout. The 429s carry Retry-After: 1 (second). */
static const kind kinds[] = {
    {"ok", "/ok", "GET", RETRYD_IDEMPOTENCY_SAFE, 0, RETRYD_OUTCOME_RESPONSE,
     200, 1},
    {"gw", "/status?code=503", "GET", RETRYD_IDEMPOTENCY_SAFE, 0,
     RETRYD_OUTCOME_RESPONSE, 503, 2},
    {"pay", "/close-after-read", "POST", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT, 0,
     RETRYD_OUTCOME_AMBIGUOUS, 0, 1},
    {"later", "/status?code=429&retry_after=1", "POST",
     RETRYD_IDEMPOTENCY_NON_IDEMPOTENT, 0, RETRYD_OUTCOME_RESPONSE, 429, 2},
    {"seq", "/seq?codes=503,200", "PUT", RETRYD_IDEMPOTENCY_IDEMPOTENT, 0,
     RETRYD_OUTCOME_RESPONSE, 200, 2},
    {"rst", "/reset-after-read", "PUT", RETRYD_IDEMPOTENCY_IDEMPOTENT, 0,
     RETRYD_OUTCOME_FAILURE, 0, 2},
    {"gwpay", "/status?code=502", "POST", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT, 0,
     RETRYD_OUTCOME_AMBIGUOUS, 502, 1},
    {"hold", "/hold?ms=5000", "GET", RETRYD_IDEMPOTENCY_SAFE, 1,
     RETRYD_OUTCOME_FAILURE, 0, 2},
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))
#define PER_KIND 40

/* The @p i-th call of kind @p k, its id "<prefix><kind>-<i>". */
static void submit_kind(retryd_multi *m, retryd_profile *p, job *j,
                        const kind *k, const char *prefix, int i)
{
    char id[48];
    snprintf(id, sizeof(id), "%s%s-%d", prefix, k->name, i);
    submit(m, p, j, id, k->path, k->method, k->idem);
}

/* How many of @p j's attempts may have reached the server: all but those
 * whose evidence proves no byte of the request was written. An attempt
 * that timed out before its connection was accepted (a slow machine, a
 * busy server) is NOT_SENT, and the server never saw it. */
static long attempts_sent(const job *j)
{
    long sent = 0;
    for (size_t i = 0; i < retryd_result_attempt_count(j->r); i++)
        sent += retryd_result_attempt(j->r, i)->evidence !=
                RETRYD_EVIDENCE_NOT_SENT;
    return sent;
}

static void check_job(const job *j, const kind *k)
{
    cr_assert_eq(j->calls, 1, "%s: completed %d times", j->id, j->calls);
    cr_assert_eq(j->err, 0, "%s: %s", j->id, retryd_strerror(j->err));
    cr_expect_eq(retryd_result_outcome(j->r), k->outcome, "%s: %s", j->id,
                 retryd_outcome_name(retryd_result_outcome(j->r)));
    cr_expect_eq(retryd_result_status(j->r), k->status, "%s: status", j->id);
    cr_expect_eq(retryd_result_attempt_count(j->r), (size_t)k->executions,
                 "%s: attempts", j->id);
    /* Answered attempts were executed by definition; an attempt cut by its
     * own timeout was executed exactly when its evidence says it was sent:
     * the evidence must never claim less than the server saw, nor more. */
    long want = k->slow ? attempts_sent(j) : k->executions;
    long n = testsrv_wait_count(srv, j->id, want, 5000);
    if (k->idem == RETRYD_IDEMPOTENCY_NON_IDEMPOTENT && k->status != 429)
        cr_assert_leq(n, 1, "%s: a payment executed %ld times", j->id, n);
    cr_expect_eq(n, want, "%s: executions", j->id);
}

/* A Retry-After is a floor at the server: the second execution arrived a
 * second or more after the first. */
static void check_retry_after(const job *j)
{
    int64_t at[4];
    long n = srv_log_times(srv, j->id, at, 4);
    cr_assert_eq(n, 2, "%s: %ld arrivals", j->id, n);
    cr_expect_geq(at[1] - at[0], 1000,
                  "%s: retried %lld ms after a 429 "
                  "asking for 1 s",
                  j->id, (long long)(at[1] - at[0]));
}

/* The jobs of hundreds_of_requests_on_one_thread: every kind, and beside
 * them calls the server holds until the client hangs up. */
static job hundreds[N_KINDS][PER_KIND];
static job held[PER_KIND];

static bool all_kinds_done(void *arg)
{
    (void)arg;
    for (size_t k = 0; k < N_KINDS; k++)
        for (int i = 0; i < PER_KIND; i++)
            if (hundreds[k][i].calls == 0)
                return false;
    return true;
}

static bool held_at_server(void *arg)
{
    (void)arg;
    for (int i = 0; i < PER_KIND; i++)
        if (testsrv_count(srv, held[i].id) < 1)
            return false;
    return true;
}

Test(multi, hundreds_of_requests_on_one_thread)
{
    retryd_backoff_policy ra = exec_fast;
    retryd_profile *p = exec_profile((retryd_profile_opts){
        .max_attempts = 2, .bulkhead = 1000, .backoff = &ra});
    retryd_profile *slow = exec_profile((retryd_profile_opts){
        .max_attempts = 2, .bulkhead = 1000, .attempt_timeout_ns = 300 * MS});
    retryd_multi *m = new_multi();
    /* Interleaved, so that every kind is in flight with every other, and
     * with calls that no answer will end. */
    for (int i = 0; i < PER_KIND; i++) {
        char id[48];
        snprintf(id, sizeof(id), "held-%d", i);
        submit_until(m, p, &held[i], id, "/hold?ms=3600000", "GET",
                     RETRYD_IDEMPOTENCY_SAFE, 3600 * S);
        for (size_t k = 0; k < N_KINDS; k++)
            submit_kind(m, kinds[k].slow ? slow : p, &hundreds[k][i], &kinds[k],
                        "", i);
    }
    cr_assert_eq(retryd_multi_in_flight(m), (N_KINDS + 1) * PER_KIND);
    /* Calls held by their server stall no one: every other call completes
     * while all of them are still held (a condition, not a race: nothing
     * but the test's cancel below ends a held call). */
    cr_assert(run_until(m, all_kinds_done, NULL, 60000),
              "the other calls did not complete beside the held ones");
    cr_assert(run_until(m, held_at_server, NULL, 30000),
              "the held calls did not all reach the server");
    cr_assert_eq(retryd_multi_in_flight(m), PER_KIND);
    for (int i = 0; i < PER_KIND; i++) {
        cr_assert_eq(held[i].calls, 0, "%s: ended while held", held[i].id);
        cr_assert_eq(retryd_multi_cancel(m, held[i].call), 0);
        cr_assert_eq(held[i].calls, 1, "%s: cancel completes it", held[i].id);
        cr_expect_eq(held[i].err, RETRYD_ECANCELED, "%s", held[i].id);
        cr_expect_eq(retryd_result_attempt_count(held[i].r), 1, "%s",
                     held[i].id);
        cr_expect_eq(retryd_result_evidence(held[i].r),
                     RETRYD_EVIDENCE_SENT_NO_RESPONSE, "%s", held[i].id);
        cr_expect_eq(testsrv_count(srv, held[i].id), 1, "%s", held[i].id);
        retryd_result_free(held[i].r);
    }
    cr_assert_eq(retryd_multi_in_flight(m), 0);
    for (size_t k = 0; k < N_KINDS; k++)
        for (int i = 0; i < PER_KIND; i++) {
            job *j = &hundreds[k][i];
            check_job(j, &kinds[k]);
            if (strcmp(kinds[k].name, "later") == 0)
                check_retry_after(j);
            retryd_result_free(j->r);
        }
    retryd_multi_free(m);
    retryd_profile_free(p);
    retryd_profile_free(slow);
}

/* Thousands of calls in flight on one thread: every kind above but the
 * slow one, 300 of each, through a bulkhead of 200, so that at any moment
 * most calls wait for a permit or in a backoff and the rest transfer.
 * Each completes once, as its kind says, and no payment runs twice. */
#define MANY_PER_KIND 300
#define MANY_KINDS (N_KINDS - 1) /* not "hold": its own profile */

Test(multi, thousands_in_flight_on_one_thread)
{
    static job jobs[MANY_KINDS][MANY_PER_KIND];
    cr_assert_str_eq(kinds[MANY_KINDS].name, "hold");
    retryd_profile *p = exec_profile((retryd_profile_opts){
        .max_attempts = 2, .bulkhead = 200, .bulkhead_wait_ns = 30 * S});
    retryd_multi *m = new_multi();
    for (int i = 0; i < MANY_PER_KIND; i++)
        for (size_t k = 0; k < MANY_KINDS; k++)
            submit_kind(m, p, &jobs[k][i], &kinds[k], "m", i);
    cr_assert_eq(retryd_multi_in_flight(m), MANY_KINDS * MANY_PER_KIND);
    cr_assert_eq(retryd_multi_run(m, 60 * S), 0);
    cr_assert_eq(retryd_multi_in_flight(m), 0);
    for (size_t k = 0; k < MANY_KINDS; k++)
        for (int i = 0; i < MANY_PER_KIND; i++) {
            check_job(&jobs[k][i], &kinds[k]);
            retryd_result_free(jobs[k][i].r);
        }
    retryd_multi_free(m);
    retryd_profile_free(p);
}

/* --- completions -----------------------------------------------------------
 */

typedef struct chain {
    retryd_multi *m;
    retryd_profile *p;
    job jobs[50];
    int next;
} chain;

static void chain_submit(chain *c);

static void chain_done(void *ctx, retryd_call *call, int err, retryd_result *r)
{
    chain *c = ctx;
    on_done(&c->jobs[c->next - 1], call, err, r);
    if (c->next < 50)
        chain_submit(c);
}

static void chain_submit(chain *c)
{
    job *j = &c->jobs[c->next++];
    snprintf(j->id, sizeof(j->id), "chain");
    j->q = (retryd_request){.sz = sizeof(j->q), .path = "/ok?id=chain"};
    cr_assert_eq(
        retryd_multi_submit(c->m, c->p, &j->q, chain_done, c, &j->call), 0);
}

Test(multi, a_completion_submits_the_next_on_a_kept_connection)
{
    static chain c;
    c.p = exec_profile((retryd_profile_opts){0});
    c.m = new_multi();
    chain_submit(&c);
    cr_assert_eq(retryd_multi_run(c.m, 20 * S), 0);
    cr_assert_eq(c.next, 50);
    for (int i = 0; i < 50; i++) {
        cr_expect_eq(c.jobs[i].calls, 1);
        cr_expect_eq(retryd_result_status(c.jobs[i].r), 200);
        retryd_result_free(c.jobs[i].r);
    }
    cr_expect_eq(testsrv_count(srv, "chain"), 50);
    cr_expect_eq(testsrv_conns(srv), 1, "one keep-alive connection");
    retryd_multi_free(c.m);
    retryd_profile_free(c.p);
}

/* libcurl alone keeps idle connections for four times the transfers still
 * running, so the end of a burst would close most of what it opened. */
Test(multi, a_burst_keeps_its_connections_for_the_next)
{
    static job j[2][30];
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_multi *m = new_multi();
    for (int burst = 0; burst < 2; burst++) {
        for (int i = 0; i < 30; i++) {
            char id[16];
            snprintf(id, sizeof(id), "b%d-%d", burst, i);
            submit(m, p, &j[burst][i], id, "/hold?ms=50", "GET",
                   RETRYD_IDEMPOTENCY_SAFE);
        }
        cr_assert_eq(retryd_multi_run(m, 20 * S), 0);
        for (int i = 0; i < 30; i++) {
            cr_expect_eq(retryd_result_status(j[burst][i].r), 200);
            retryd_result_free(j[burst][i].r);
        }
    }
    cr_expect_eq(testsrv_conns(srv), 30, "the second burst reused the first's");
    retryd_multi_free(m);
    retryd_profile_free(p);
}

static int open_never(void *ctx, retryd_body_reader *ret)
{
    (void)ctx, (void)ret;
    return -1;
}

Test(multi, a_completion_never_runs_inside_submit)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_multi *m = new_multi();
    retryd_body *b;
    cr_assert_eq(retryd_body_new_supplier(open_never, NULL, &b), 0);
    job j = {.id = "nobody"};
    /* Its body fails to open: the attempt ends, and the call with it,
     * before submit returns. */
    j.q = (retryd_request){.sz = sizeof(j.q),
                           .method = "PUT",
                           .path = "/echo?id=nobody",
                           .body = b,
                           .idempotency = RETRYD_IDEMPOTENCY_IDEMPOTENT};
    cr_assert_eq(retryd_multi_submit(m, p, &j.q, on_done, &j, &j.call), 0);
    cr_expect_eq(j.calls, 0, "not from inside submit");
    cr_assert_eq(retryd_multi_run(m, 5 * S), 0);
    cr_assert_eq(j.calls, 1);
    cr_expect_eq(retryd_result_attempt(j.r, 0)->failure,
                 RETRYD_FAILURE_BODY_SOURCE);
    cr_expect_eq(testsrv_count(srv, "nobody"), 0);
    retryd_result_free(j.r);
    retryd_body_free(b);
    retryd_multi_free(m);
    retryd_profile_free(p);
}

/* --- cancellation ----------------------------------------------------------
 */

static void cancel_mid_transfer(retryd_idempotency idem, const char *id,
                                retryd_outcome outcome)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_multi *m = new_multi();
    job j = {0};
    submit(m, p, &j, id, "/hold?ms=10000", "POST", idem);
    /* The server has read and executed it, and holds the answer. */
    count_is c = {id, 1};
    cr_assert(run_until(m, server_counted, &c, 5000));
    cr_assert_eq(retryd_multi_cancel(m, j.call), 0);
    cr_assert_eq(j.calls, 1, "completed from inside cancel");
    cr_assert_eq(j.err, RETRYD_ECANCELED);
    cr_assert(j.r != NULL, "the attempt made is reported");
    cr_assert_eq(retryd_result_attempt_count(j.r), 1);
    const retryd_attempt *a = retryd_result_attempt(j.r, 0);
    cr_expect_eq(a->evidence, RETRYD_EVIDENCE_SENT_NO_RESPONSE,
                 "it may have reached the server: %s",
                 retryd_evidence_name(a->evidence));
    cr_expect_eq(a->failure, RETRYD_FAILURE_ABORTED);
    cr_expect_eq(retryd_result_outcome(j.r), outcome, "%s",
                 retryd_outcome_name(retryd_result_outcome(j.r)));
    cr_expect_eq(retryd_multi_in_flight(m), 0);
    /* The transfer really stopped: its connection is closed. */
    cr_expect_eq(testsrv_wait_idle(srv, 5000), 0);
    cr_expect_eq(retryd_multi_cancel(m, j.call), RETRYD_ENOENT);
    cr_expect_eq(testsrv_count(srv, id), 1);
    retryd_result_free(j.r);
    retryd_multi_free(m);
    retryd_profile_free(p);
}

Test(multi, cancel_during_a_transfer_of_a_payment_is_ambiguous)
{
    cancel_mid_transfer(RETRYD_IDEMPOTENCY_NON_IDEMPOTENT, "ctpay",
                        RETRYD_OUTCOME_AMBIGUOUS);
}

Test(multi, cancel_during_a_transfer_of_a_read_is_a_failure)
{
    cancel_mid_transfer(RETRYD_IDEMPOTENCY_SAFE, "ctread",
                        RETRYD_OUTCOME_FAILURE);
}

/* No floor: the balance moves only by deposits and granted retries. */
static const retryd_budget_params ledger = {sizeof(retryd_budget_params), 1, 0,
                                            1e6};

typedef struct granted {
    retryd_upstream *up;
    double balance;
    const char *id;
} granted;

/* The first attempt deposited one token and ran; the engine then took it
 * back for the retry it granted: the backoff has begun. */
static bool retry_granted(void *arg)
{
    granted *g = arg;
    double b = -1;
    return testsrv_count(srv, g->id) == 1 &&
           retryd_upstream_balance(g->up, &b) == 0 && b == g->balance;
}

Test(multi, cancel_during_a_backoff_ends_the_wait)
{
    static const retryd_backoff_policy two_s = {
        sizeof(two_s), RETRYD_JITTER_DECORRELATED, 2 * S, 2 * S, 5 * S};
    retryd_profile *p = exec_profile((retryd_profile_opts){
        .max_attempts = 3, .backoff = &two_s, .budget = &ledger});
    retryd_upstream *up = retryd_profile_budget(p);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(retryd_upstream_deposit(up), 0);
    retryd_multi *m = new_multi();
    job j = {0};
    submit(m, p, &j, "cb", "/status?code=503", "GET", RETRYD_IDEMPOTENCY_SAFE);
    granted g = {up, 10, "cb"};
    cr_assert(run_until(m, retry_granted, &g, 5000));
    /* Completed inside the cancel: the 2 s wait was not waited. */
    cr_assert_eq(retryd_multi_cancel(m, j.call), 0);
    cr_assert_eq(j.calls, 1);
    cr_assert_eq(j.err, RETRYD_ECANCELED);
    cr_assert_eq(retryd_result_attempt_count(j.r), 1);
    cr_expect_eq(retryd_result_status(j.r), 503);
    cr_expect_eq(retryd_result_decision(j.r)->verdict, RETRYD_VERDICT_RETRY,
                 "the retry granted, never taken");
    cr_expect_eq(retryd_multi_in_flight(m), 0);
    cr_expect_eq(retryd_multi_run(m, 0), 0, "nothing left to wait for");
    cr_expect_eq(testsrv_count(srv, "cb"), 1);
    retryd_result_free(j.r);
    retryd_multi_free(m);
    retryd_profile_free(p);
}

Test(multi, cancel_while_waiting_for_a_permit)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){.bulkhead = 1});
    retryd_multi *m = new_multi();
    job holder = {0}, waiter = {0};
    submit(m, p, &holder, "cpholder", "/hold?ms=10000", "GET",
           RETRYD_IDEMPOTENCY_SAFE);
    submit(m, p, &waiter, "cpwaiter", "/ok", "POST",
           RETRYD_IDEMPOTENCY_NON_IDEMPOTENT);
    count_is c = {"cpholder", 1};
    cr_assert(run_until(m, server_counted, &c, 5000));
    cr_assert_eq(retryd_multi_cancel(m, waiter.call), 0);
    cr_assert_eq(waiter.calls, 1);
    cr_assert_eq(waiter.err, RETRYD_ECANCELED);
    cr_expect_null(waiter.r, "no attempt was made");
    cr_assert_eq(retryd_multi_cancel(m, holder.call), 0);
    cr_assert_eq(holder.err, RETRYD_ECANCELED);
    cr_expect_eq(testsrv_count(srv, "cpwaiter"), 0);
    retryd_result_free(holder.r);
    retryd_multi_free(m);
    retryd_profile_free(p);
}

Test(multi, freeing_the_multi_completes_every_call_cancelled)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){.bulkhead = 1});
    retryd_multi *m = new_multi();
    job j[3] = {0};
    submit(m, p, &j[0], "fr0", "/hold?ms=10000", "GET",
           RETRYD_IDEMPOTENCY_SAFE);
    submit(m, p, &j[1], "fr1", "/ok", "GET", RETRYD_IDEMPOTENCY_SAFE);
    submit(m, p, &j[2], "fr2", "/ok", "GET", RETRYD_IDEMPOTENCY_SAFE);
    count_is c = {"fr0", 1};
    cr_assert(run_until(m, server_counted, &c, 5000));
    retryd_multi_free(m);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(j[i].calls, 1, "%d", i);
        cr_expect_eq(j[i].err, RETRYD_ECANCELED, "%d", i);
        retryd_result_free(j[i].r);
    }
    cr_expect_eq(testsrv_count(srv, "fr1") + testsrv_count(srv, "fr2"), 0);
    retryd_profile_free(p);
}

/* --- the bulkhead ----------------------------------------------------------
 */

Test(multi, a_deadline_bounds_a_permit_wait)
{
    /* bulkhead_wait_ns 0: a permit is waited for until the deadline. */
    retryd_profile *p = exec_profile((retryd_profile_opts){.bulkhead = 1});
    retryd_multi *m = new_multi();
    job holder = {0}, late = {0};
    submit(m, p, &holder, "dlholder", "/hold?ms=10000", "GET",
           RETRYD_IDEMPOTENCY_SAFE);
    count_is c = {"dlholder", 1};
    cr_assert(run_until(m, server_counted, &c, 5000));
    snprintf(late.path, sizeof(late.path), "/ok?id=dllate");
    late.q = (retryd_request){.sz = sizeof(late.q),
                              .method = "POST",
                              .path = late.path,
                              .idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT,
                              .deadline_ns = 300 * MS};
    int64_t t0 = now_ns();
    cr_assert_eq(retryd_multi_submit(m, p, &late.q, on_done, &late, &late.call),
                 0);
    cr_assert(run_until(m, job_done, &late, 5000));
    cr_assert_eq(late.calls, 1);
    /* Not before the deadline; bounded by it, run_until's bound says. */
    cr_expect_geq(late.done_ns - t0, 300 * MS, "not before the deadline");
    const retryd_attempt *a = retryd_result_attempt(late.r, 0);
    cr_expect_eq(retryd_result_attempt_count(late.r), 1);
    cr_expect_eq(a->evidence, RETRYD_EVIDENCE_NOT_SENT);
    cr_expect_eq(a->failure, RETRYD_FAILURE_POOL_TIMEOUT);
    cr_expect_eq(retryd_result_outcome(late.r), RETRYD_OUTCOME_FAILURE);
    cr_expect_eq(testsrv_count(srv, "dllate"), 0);
    cr_assert_eq(retryd_multi_cancel(m, holder.call), 0);
    retryd_result_free(holder.r);
    retryd_result_free(late.r);
    retryd_multi_free(m);
    retryd_profile_free(p);
}

Test(multi, the_queue_gets_the_permits_its_calls_give_back)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){.bulkhead = 2});
    retryd_multi *m = new_multi();
    job j[10] = {0};
    int64_t t0 = now_ns();
    for (int i = 0; i < 10; i++) {
        char id[16];
        snprintf(id, sizeof(id), "q%d", i);
        submit(m, p, &j[i], id, "/hold?ms=100", "GET", RETRYD_IDEMPOTENCY_SAFE);
    }
    cr_assert_eq(retryd_multi_run(m, 20 * S), 0);
    /* Two permits: five rounds of 100 ms at the least. */
    cr_expect_geq(now_ns() - t0, 500 * MS);
    for (int i = 0; i < 10; i++) {
        cr_expect_eq(retryd_result_status(j[i].r), 200, "%s: %s", j[i].id,
                     retryd_result_error(j[i].r));
        cr_expect_eq(retryd_result_attempt_count(j[i].r), 1, "no pool timeout");
        retryd_result_free(j[i].r);
    }
    retryd_multi_free(m);
    retryd_profile_free(p);
}

typedef struct sync_call {
    retryd_profile *p;
    retryd_result *r;
    int64_t done_ns;
} sync_call;

static void *sync_run(void *arg)
{
    sync_call *s = arg;
    retryd_request q = {.sz = sizeof(q), .path = "/hold?ms=300&id=sync"};
    cr_assert_eq(retryd_execute(s->p, &q, &s->r), 0);
    s->done_ns = now_ns();
    return NULL;
}

Test(multi, a_permit_given_back_by_another_thread_is_found)
{
    retryd_profile *p = exec_profile(
        (retryd_profile_opts){.bulkhead = 1, .bulkhead_wait_ns = 5 * S});
    sync_call s = {.p = p};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, sync_run, &s), 0);
    cr_assert_eq(testsrv_wait_count(srv, "sync", 1, 5000), 1);
    retryd_multi *m = new_multi();
    job j = {0};
    submit(m, p, &j, "async", "/ok", "GET", RETRYD_IDEMPOTENCY_SAFE);
    cr_assert_eq(retryd_multi_run(m, 10 * S), 0);
    pthread_join(t, NULL);
    cr_expect_eq(retryd_result_status(j.r), 200, "%s",
                 retryd_result_error(j.r));
    cr_expect_eq(retryd_result_attempt_count(j.r), 1);
    cr_expect_geq(j.done_ns, s.done_ns - 5 * MS,
                  "it waited for the thread's permit");
    retryd_result_free(j.r);
    retryd_result_free(s.r);
    retryd_multi_free(m);
    retryd_profile_free(p);
}

Test(multi, a_backoff_holds_no_permit)
{
    /* One permit. A retries a 503 twice, 1 s apart; B, queued behind A's
     * first attempt, gets the permit during A's first wait. Had the wait
     * held the permit, B could not reach the server before A's last
     * attempt was over: the server's order of arrivals tells, whatever the
     * machine's speed (B has a whole second to be sent). */
    static const retryd_backoff_policy wait1s = {
        sizeof(wait1s), RETRYD_JITTER_DECORRELATED, 1 * S, 1 * S, 5 * S};
    retryd_profile *p =
        exec_profile((retryd_profile_opts){.bulkhead = 1, .backoff = &wait1s});
    retryd_multi *m = new_multi();
    job a = {0}, b = {0};
    submit(m, p, &a, "boA", "/status?code=503", "GET", RETRYD_IDEMPOTENCY_SAFE);
    submit(m, p, &b, "boB", "/ok", "GET", RETRYD_IDEMPOTENCY_SAFE);
    cr_assert_eq(retryd_multi_run(m, 20 * S), 0);
    cr_expect_eq(retryd_result_attempt_count(a.r), 3);
    cr_expect_eq(retryd_result_status(b.r), 200);
    cr_expect_eq(retryd_result_attempt_count(b.r), 1);
    int64_t at_a[4], at_b[2];
    cr_assert_eq(srv_log_times(srv, "boA", at_a, 4), 3);
    cr_assert_eq(srv_log_times(srv, "boB", at_b, 2), 1);
    cr_expect_lt(at_b[0], at_a[1], "B was sent during A's first wait");
    cr_expect_lt(b.done_ns, a.done_ns, "B finished before A");
    retryd_result_free(a.r);
    retryd_result_free(b.r);
    retryd_multi_free(m);
    retryd_profile_free(p);
}

/* --- misuse ----------------------------------------------------------------
 */

static int ignore_socket(void *ctx, int fd, int what, void *socketp)
{
    (void)ctx, (void)fd, (void)what, (void)socketp;
    return 0;
}

static int ignore_timer(void *ctx, long ms)
{
    (void)ctx, (void)ms;
    return 0;
}

Test(multi, misuse_is_refused_and_completes_nothing)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_multi *m = new_multi(), *looped;
    job j = {0};
    retryd_request q = {.sz = sizeof(q), .method = "GET\r\nX: y", .path = "/"};
    cr_expect_eq(retryd_multi_submit(m, p, &q, on_done, &j, NULL),
                 RETRYD_EINVAL);
    q.method = NULL;
    cr_expect_eq(retryd_multi_submit(m, p, &q, NULL, &j, NULL), RETRYD_EINVAL);
    struct {
        retryd_request q;
        long unknown;
    } newer = {.q = q, .unknown = 1};
    newer.q.sz = sizeof(newer);
    cr_expect_eq(retryd_multi_submit(m, p, &newer.q, on_done, &j, NULL),
                 RETRYD_EOPTS);
    /* A profile of another client. */
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .flags = RETRYD_HOST_LOCAL_ONLY};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    retryd_client *other;
    retryd_profile *foreign;
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", testsrv_port(srv));
    retryd_profile_opts po = {.sz = sizeof(po), .base_url = base};
    cr_assert_eq(retryd_client_new(&co, &other), 0);
    cr_assert_eq(retryd_profile_new(other, &po, &foreign), 0);
    cr_expect_eq(retryd_multi_submit(m, foreign, &q, on_done, &j, NULL),
                 RETRYD_EINVAL);
    cr_expect_eq(retryd_multi_in_flight(m), 0);
    cr_expect_eq(retryd_multi_run(m, 0), 0);
    cr_expect_eq(j.calls, 0, "no completion for a refused submit");
    /* One loop callback without the other; run with loop callbacks. */
    retryd_multi_opts half = {.sz = sizeof(half), .socket = ignore_socket};
    cr_expect_eq(retryd_multi_new(client, &half, &looped), RETRYD_EINVAL);
    retryd_multi_opts both = {
        .sz = sizeof(both), .socket = ignore_socket, .timer = ignore_timer};
    cr_assert_eq(retryd_multi_new(client, &both, &looped), 0);
    cr_expect_eq(retryd_multi_run(looped, 0), RETRYD_EINVAL);
    cr_expect_eq(retryd_multi_assign(looped, 12345, NULL), RETRYD_ENOENT);
    retryd_multi_free(looped);
    retryd_profile_free(foreign);
    retryd_client_free(other);
    retryd_multi_free(m);
    retryd_profile_free(p);
}
