/* SPDX-License-Identifier: MIT */
/*
 * The executor with a real retryd: retries are paid from the host budget,
 * the host-wide draining flag stops them, and the per-process statistics
 * show what the executor reported (evidence, ambiguous outcomes).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "retryd/retryd.h"
#include "run.h"
#include "testsrv.h"

#define MS INT64_C(1000000)

static rd_daemon D;
static testsrv *srv;
static retryd_client *client;
static retryd_profile *profile;
static run_result res;

static void setup(void)
{
    cr_assert_eq(rd_daemon_init(&D, "[upstream pay]\nratio = 0.5\n"
                                    "min_retries_per_sec = 0\ncap = 10\n"),
                 0);
    cr_assert_eq(rd_daemon_start(&D), 0);
    cr_assert_eq(testsrv_start(FAULTSRV_PATH, NULL, &srv), 0);
    const retryd_host_opts ho = {.sz = sizeof(ho), .control_socket = D.control};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    cr_assert_eq(retryd_client_new(&co, &client), 0);
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", testsrv_port(srv));
    retryd_profile_opts po = {
        .sz = sizeof(po),
        .base_url = base,
        .upstream = "pay",
        .max_attempts = 3,
        .backoff = &(const retryd_backoff_policy){sizeof(retryd_backoff_policy),
                                                  RETRYD_JITTER_FULL, 1 * MS,
                                                  2 * MS, 1000 * MS}};
    cr_assert_eq(retryd_profile_new(client, &po, &profile), 0);
    cr_assert(retryd_upstream_shared(retryd_profile_budget(profile)));
}

static void teardown(void)
{
    retryd_profile_free(profile);
    retryd_client_free(client);
    testsrv_stop(srv);
    rd_daemon_cleanup(&D);
}

TestSuite(executor_host, .init = setup, .fini = teardown, .timeout = 60);

static retryd_result *get(const char *path, retryd_idempotency idem)
{
    retryd_request q = {
        .sz = sizeof(q), .method = "POST", .path = path, .idempotency = idem};
    retryd_result *r;
    cr_assert_eq(retryd_execute(profile, &q, &r), 0);
    return r;
}

/* `retrydctl stats --json` into res; the number @p key of upstream pay. */
static double pay_stat(const char *key)
{
    cr_assert_eq(rd_ctl(&D, &res, "stats", "--json", NULL), 0, "%s", res.err);
    return rd_json_number(res.out, "\"name\":\"pay\"", key);
}

Test(executor_host, retries_are_paid_from_the_host_budget)
{
    /* ratio 0.5, no floor, starting empty: two first attempts buy one
     * retry. Four failing requests: the 2nd and the 4th get one retry. */
    int attempts = 0;
    for (int i = 0; i < 4; i++) {
        retryd_result *r =
            get("/status?code=503&id=pb", RETRYD_IDEMPOTENCY_SAFE);
        attempts += (int)retryd_result_attempt_count(r);
        cr_expect_eq(retryd_result_decision(r)->reason,
                     RETRYD_DENIAL_BUDGET_EXHAUSTED);
        retryd_result_free(r);
    }
    cr_expect_eq(attempts, 6);
    cr_expect_eq(testsrv_count(srv, "pb"), 6);
    cr_expect_eq(pay_stat("deposits"), 4, "%s", res.out);
    cr_expect_eq(pay_stat("retries_granted"), 2, "%s", res.out);
    cr_expect_eq(pay_stat("budget_exhausted"), 4, "%s", res.out);
    cr_expect_eq(pay_stat("response_received"), 6, "%s", res.out);
}

Test(executor_host, host_wide_draining_stops_retries)
{
    /* A token first: the budget (rule 2) is checked before draining. */
    for (int i = 0; i < 2; i++)
        retryd_result_free(get("/ok?id=warm", RETRYD_IDEMPOTENCY_SAFE));
    cr_assert_eq(rd_ctl(&D, &res, "drain", "on", NULL), 0, "%s", res.err);
    retryd_result *r = get("/status?code=503&id=hd", RETRYD_IDEMPOTENCY_SAFE);
    cr_expect_eq(retryd_result_decision(r)->reason,
                 RETRYD_DENIAL_RUNTIME_DRAINING);
    cr_expect_eq(testsrv_count(srv, "hd"), 1);
    retryd_result_free(r);
}

Test(executor_host, ambiguous_outcomes_and_evidence_reach_the_stats)
{
    retryd_result *r =
        get("/close-after-read?id=am", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT);
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_AMBIGUOUS);
    retryd_result_free(r);
    cr_expect_eq(pay_stat("ambiguous"), 1, "%s", res.out);
    cr_expect_eq(pay_stat("sent_no_response"), 1, "%s", res.out);
    char mine[64];
    snprintf(mine, sizeof(mine), "{\"pid\":%d,", (int)getpid());
    cr_expect_eq(rd_json_number(res.out, mine, "ambiguous"), 1,
                 "per process too: %s", res.out);
}
