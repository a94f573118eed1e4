/*
 * The client's process slot against a real retryd: what the library writes
 * into it, and that it stops writing into it once the daemon may have given
 * it to another process.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "child.h"
#include "harness.h"
#include "host.h"
#include "retryd/retryd.h"
#include "run.h"
#include "segment.h"

#define ASK_MS 10000

/* Floor 0 keeps balances exact: nothing refills behind the test's back. */
static const char *const base_config =
    "[upstream payments]\nratio = 0.5\nmin_retries_per_sec = 0\ncap = 20\n";

static rd_daemon D;
static run_result res;

static void setup(void)
{
    cr_assert_eq(rd_daemon_init(&D, base_config), 0);
    cr_assert_eq(rd_daemon_start(&D), 0, "daemon did not start; see %s", D.log);
}

static void teardown(void)
{
    if (D.pid > 0)
        kill(D.pid, SIGCONT); /* a test that failed while it was stopped */
    rd_daemon_cleanup(&D);
}

TestSuite(reattach, .init = setup, .fini = teardown, .timeout = 60);

/* --- helpers ------------------------------------------------------------- */

/* retrydctl stats --json with the test daemon's socket; output in res. */
static void stats(void)
{
    char *argv[] = {
        RETRYDCTL_PATH, "stats",          "--json", "--control-socket",
        D.control,      "--stats-socket", D.stats,  NULL};
    cr_assert_eq(run_program(argv, 10000, &res), 0);
    cr_assert_eq(res.exit_code, 0, "retrydctl: %s", res.err);
}

/* The number after "key": in the JSON object that follows @p anchor. */
static double json_number(const char *anchor, const char *key)
{
    const char *p = strstr(res.out, anchor);
    cr_assert(p != NULL, "'%s' not in %s", anchor, res.out);
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    p = strstr(p, pat);
    cr_assert(p != NULL, "'%s' not after '%s'", key, anchor);
    return strtod(p + strlen(pat), NULL);
}

static void pid_anchor(char *buf, size_t len, long pid)
{
    snprintf(buf, len, "{\"pid\":%ld,", pid);
}

/* --- the tests ----------------------------------------------------------- */

Test(reattach, record_counts_on_the_thread_own_lane)
{
    retryd_host_opts o = {.sz = sizeof(o), .control_socket = D.control};
    retryd_host *h;
    retryd_upstream *up;
    cr_assert_eq(retryd_host_open(&o, &h), 0);
    cr_assert_eq(retryd_upstream_open(h, "payments", NULL, &up), 0);
    cr_assert(retryd_upstream_shared(up));
    int lane = retryd__thread_lane();
    cr_assert(lane > 0, "the first thread owns a lane");

    const retryd_decision deadline = {.verdict = RETRYD_VERDICT_DENIED,
                                      .reason = RETRYD_DENIAL_DEADLINE,
                                      .rule = RETRYD_RULE_DEADLINE};
    const retryd_decision take_failed = {
        .verdict = RETRYD_VERDICT_DENIED,
        .reason = RETRYD_DENIAL_BUDGET_EXHAUSTED,
        .rule = RETRYD_RULE_BUDGET_TAKE_FAILED};
    const retryd_decision ambiguous = {
        .verdict = RETRYD_VERDICT_AMBIGUOUS,
        .reason = RETRYD_DENIAL_NONE,
        .rule = RETRYD_RULE_STATUS_GATEWAY_AMBIGUOUS};
    const retryd_decision retry = {.verdict = RETRYD_VERDICT_RETRY,
                                   .rule = RETRYD_RULE_NOT_SENT};
    retryd_upstream_record(up, &deadline, RETRYD_EVIDENCE_RESPONSE_RECEIVED);
    retryd_upstream_record(up, &deadline, RETRYD_EVIDENCE_SENT_NO_RESPONSE);
    retryd_upstream_record(up, &take_failed, RETRYD_EVIDENCE_NOT_SENT);
    retryd_upstream_record(up, &ambiguous, RETRYD_EVIDENCE_SENT_NO_RESPONSE);
    retryd_upstream_record(up, &retry, RETRYD_EVIDENCE_NOT_SENT);
    retryd_upstream_record(up, NULL, RETRYD_EVIDENCE_PARTIAL_RESPONSE);

    /* In this thread's lane of the handle's entry, nowhere else. */
    binding *b = atomic_load(&up->bind);
    cr_assert(b != NULL && b->entry >= 0);
    _Atomic uint64_t *mine = b->att->proc->counters[lane][b->entry];
    _Atomic uint64_t *shared = b->att->proc->counters[0][b->entry];
    cr_expect_eq(atomic_load(&mine[seg_denied_counter(RETRYD_DENIAL_DEADLINE)]),
                 2);
    cr_expect_eq(atomic_load(&mine[SEG_C_AMBIGUOUS]), 1);
    cr_expect_eq(
        atomic_load(
            &mine[SEG_C_EVIDENCE_FIRST + RETRYD_EVIDENCE_SENT_NO_RESPONSE]),
        2);
    for (int c = 0; c < SEG_COUNTERS; c++)
        cr_expect_eq(atomic_load(&shared[c]), 0, "lane 0, counter %d", c);

    /* And what the operator sees. */
    char anchor[64];
    pid_anchor(anchor, sizeof(anchor), (long)getpid());
    stats();
    cr_expect_eq(json_number(anchor, "deadline"), 2);
    cr_expect_eq(json_number(anchor, "budget_exhausted"), 0,
                 "a failed take was counted by the withdrawal");
    cr_expect_eq(json_number(anchor, "ambiguous"), 1);
    cr_expect_eq(json_number(anchor, "not_sent"), 2);
    cr_expect_eq(json_number(anchor, "sent_no_response"), 2);
    cr_expect_eq(json_number(anchor, "response_received"), 1);
    cr_expect_eq(json_number(anchor, "partial_response"), 1);
    retryd_host_close(h);
}
