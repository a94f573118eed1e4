/* SPDX-License-Identifier: MIT */
/*
 * retrydctl request and the host's health (docs/health.md), against a real
 * daemon and a real upstream: a request the host throttle keeps back is
 * not sent, says so (the host throttle, not an upstream failure) and exits
 * 75; one a host pushback would hold past its deadline too; and -v shows
 * how long a pushback held an attempt. The test process plays the other
 * processes of the host through the public API (retryd_upstream_observe).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "retryd/retryd.h"
#include "run.h"
#include "testsrv.h"

#define MS INT64_C(1000000)

static rd_daemon D;
static testsrv *srv;
static retryd_host *host;
static run_result res;
static char url[256];

static void setup(void)
{
    cr_assert_eq(rd_daemon_init(&D, "[upstream hot]\nadaptive_throttle = on\n"
                                    "throttle_window = 3600s\n"
                                    "[upstream held]\npushback = on\n"
                                    "pushback_first_attempts = on\n"
                                    "[upstream fair]\nratio = 0.5\n"
                                    "min_retries_per_sec = 0\n"),
                 0);
    cr_assert_eq(rd_daemon_start(&D), 0, "see %s", D.log);
    cr_assert_eq(testsrv_start(FAULTSRV_PATH, NULL, &srv), 0);
    retryd_host_opts o = {.sz = sizeof(o), .control_socket = D.control};
    cr_assert_eq(retryd_host_open(&o, &host), 0);
    cr_assert(retryd_host_attached(host));
}

static void teardown(void)
{
    retryd_host_close(host);
    testsrv_stop(srv);
    rd_daemon_cleanup(&D);
}

TestSuite(retrydctl_health, .init = setup, .fini = teardown, .timeout = 60);

static retryd_upstream *open_shared(const char *name)
{
    retryd_upstream *up;
    cr_assert_eq(retryd_upstream_open(host, name, NULL, &up), 0);
    cr_assert(retryd_upstream_shared(up));
    return up;
}

static char *at(const char *path)
{
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", testsrv_port(srv),
             path);
    return url;
}

#define REQUEST(...)                                                           \
    do {                                                                       \
        char *argv_[] = {RETRYDCTL_PATH, "request",   "--control-socket",      \
                         D.control,      __VA_ARGS__, NULL};                   \
        cr_assert_eq(run_program(argv_, 20000, &res), 0);                      \
    } while (0)

Test(retrydctl_health, a_throttled_request_is_not_sent_and_exits_75)
{
    retryd_upstream *up = open_shared("hot");
    /* The host saw nothing but rejections: p = R / (R + 1). */
    for (int i = 0; i < 10000; i++)
        retryd_upstream_observe(up, RETRYD_EVIDENCE_RESPONSE_RECEIVED, 503, -1);
    retryd_health h = {.sz = sizeof(h)};
    cr_assert_eq(retryd_upstream_health(up, &h), 0);
    cr_assert(h.engaged && h.probability > 0.999, "p %f", h.probability);
    /* One first attempt per slot (here 450 s) is sent whatever the
     * throttle says: this process takes it. */
    int tries = 0;
    while (retryd_upstream_admit(up, true, INT64_MAX / 2, 0, NULL) !=
           RETRYD_ADMIT_THROTTLED)
        cr_assert(++tries < 100, "the probe never went");

    REQUEST("--safe", "--upstream", "hot", at("/ok?id=th"));
    cr_expect_eq(res.exit_code, 75, "stderr: %s", res.err);
    cr_expect(strstr(res.err, "retrydctl: throttled") != NULL, "%s", res.err);
    cr_expect(strstr(res.err, "host throttle (docs/health.md) kept it back "
                              "from upstream hot") != NULL,
              "%s", res.err);
    cr_expect(strstr(res.err, "did not fail") != NULL, "%s", res.err);
    cr_expect_eq(res.out_len, 0, "nothing on stdout: %s", res.out);
    cr_expect_eq(testsrv_count(srv, "th"), 0, "nothing reached the upstream");

    REQUEST("-v", "--safe", "--upstream", "hot", at("/ok?id=th"));
    cr_expect_eq(res.exit_code, 75, "stderr: %s", res.err);
    cr_expect(strstr(res.err, "attempt 1: not_sent/throttled") != NULL, "%s",
              res.err);
    cr_expect(strstr(res.err, "(host_throttled)") != NULL, "%s", res.err);
}

/* The library's own words are the trail's; the exit code is retrydctl's. */
Test(retrydctl_health, a_hold_past_the_deadline_is_not_sent_and_exits_75)
{
    retryd_upstream *up = open_shared("held");
    retryd_upstream_observe(up, RETRYD_EVIDENCE_RESPONSE_RECEIVED, 503,
                            5000 * MS);
    cr_assert_gt(retryd_upstream_pushback(up), 0);
    REQUEST("--safe", "--upstream", "held", "--max-time", "0.5",
            at("/ok?id=pd"));
    cr_expect_eq(res.exit_code, 75, "stderr: %s", res.err);
    cr_expect(strstr(res.err, "pushback would hold it past the deadline") !=
                  NULL,
              "%s", res.err);
    cr_expect(strstr(res.err, "held it past the deadline on upstream held") !=
                  NULL,
              "%s", res.err);
    cr_expect_eq(testsrv_count(srv, "pd"), 0, "nothing reached the upstream");
}

Test(retrydctl_health, verbose_shows_the_time_a_pushback_held_an_attempt)
{
    retryd_upstream *up = open_shared("held");
    long long before = rd_now_ms();
    retryd_upstream_observe(up, RETRYD_EVIDENCE_RESPONSE_RECEIVED, 503,
                            1000 * MS);
    REQUEST("-v", "--safe", "--upstream", "held", at("/ok?id=hv"));
    long long took = rd_now_ms() - before;
    cr_expect_eq(res.exit_code, 0, "stderr: %s", res.err);
    cr_expect_eq(testsrv_count(srv, "hv"), 1);
    const char *held = strstr(res.err, ", held ");
    double ms = 0;
    cr_assert(held != NULL && sscanf(held, ", held %lfms", &ms) == 1, "%s",
              res.err);
    cr_expect(strstr(held, "ms by a host pushback") != NULL, "%s", res.err);
    /* What was left of the 1 s hold when retrydctl asked, no more than the
     * whole run: a lower bound on the machine's speed would be a guess. */
    cr_expect(ms > 0 && ms <= (double)took, "held %.1f ms of a %lld ms run", ms,
              took);
}

static bool none_attached(void *arg)
{
    (void)arg;
    run_result r;
    return rd_ctl(&D, &r, "stats", "--json", NULL) == 0 &&
           rd_json_number(r.out, "\"daemon\"", "attached_processes") == 0;
}

/*
 * Fair shares in the trail (docs/budget.md#fair-shares): a retry refused
 * because the tokens are owed to another process, then one refused
 * because the request took its share of the balance, each named by its
 * rule, beside the reason over_share.
 */
Test(retrydctl_health, the_trail_names_the_share_that_refused_a_retry)
{
    retryd_upstream *up = open_shared("fair");
    cr_assert_eq(retryd_upstream_withdraw(up), RETRYD_EBUDGET); /* short */
    for (int i = 0; i < 10; i++)
        cr_assert_eq(retryd_upstream_deposit(up), 0); /* 5 tokens, ours */
    REQUEST("-v", "--safe", "--max-attempts", "3", "--upstream", "fair",
            at("/status?code=503&id=os"));
    cr_expect(strstr(res.err, "denied (process_over_share)") != NULL, "%s",
              res.err);
    cr_expect(strstr(res.err, "over_share") != NULL, "%s", res.err);
    cr_expect_eq(testsrv_count(srv, "os"), 1, "no retry was sent");

    /* This process goes, and its claims with it: the tokens are nobody's,
     * so the next request borrows its first retry, and its second would
     * take more than 20 % of what is left. */
    retryd_host_close(host);
    host = NULL;
    cr_assert(rd_wait_until(none_attached, NULL, 5000), "slot freed");
    REQUEST("-v", "--safe", "--max-attempts", "3", "--upstream", "fair",
            at("/status?code=503&id=rs"));
    cr_expect(strstr(res.err, "denied (request_over_share)") != NULL, "%s",
              res.err);
    cr_expect_eq(testsrv_count(srv, "rs"), 2, "one retry was sent");
}
