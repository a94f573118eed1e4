/* SPDX-License-Identifier: MIT */
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
#include "budget/host.h"
#include "retryd/retryd.h"
#include "run.h"
#include "shared/segment.h"

/* Floor 0 keeps balances exact: nothing refills behind the test's back. */
static const char *const base_config =
    "[upstream payments]\nratio = 0.5\nmin_retries_per_sec = 0\ncap = 20\n";

#include "daemon_fixture.h"

TestSuite(reattach, .init = daemon_setup, .fini = daemon_teardown,
          .timeout = 60);

/* --- helpers ------------------------------------------------------------- */

static bool none_attached(void *arg)
{
    (void)arg;
    return daemon_stat("attached_processes") == 0;
}

/* Spend until the client's handle is on a shared slot again. */
static bool becomes_shared(void *arg)
{
    char reply[64];
    child_ask(arg, "deposit 1", reply, sizeof(reply), ASK_MS);
    child_ask(arg, "shared", reply, sizeof(reply), ASK_MS);
    return strcmp(reply, "shared 1") == 0;
}

/* Stop the daemon, and have @p c open a name it has not registered: the
 * register times out (the client's 1 s), and the library hangs up. */
static void drop_by_timeout(child *c)
{
    cr_assert_eq(kill(D.pid, SIGSTOP), 0);
    ask(c, "open newcomer", "ok shared=0");
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

    const retryd_decision deadline = {.sz = sizeof(deadline),
                                      .verdict = RETRYD_VERDICT_DENIED,
                                      .reason = RETRYD_DENIAL_DEADLINE,
                                      .rule = RETRYD_RULE_DEADLINE};
    const retryd_decision take_failed = {
        .sz = sizeof(take_failed),
        .verdict = RETRYD_VERDICT_DENIED,
        .reason = RETRYD_DENIAL_BUDGET_EXHAUSTED,
        .rule = RETRYD_RULE_BUDGET_TAKE_FAILED};
    const retryd_decision ambiguous = {
        .sz = sizeof(ambiguous),
        .verdict = RETRYD_VERDICT_AMBIGUOUS,
        .reason = RETRYD_DENIAL_NONE,
        .rule = RETRYD_RULE_STATUS_GATEWAY_AMBIGUOUS};
    const retryd_decision retry = {.sz = sizeof(retry),
                                   .verdict = RETRYD_VERDICT_RETRY,
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
    cr_expect_eq(atomic_load(&mine[SEG_C_DENIED_DEADLINE]), 2);
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
    stats_json();
    cr_expect_eq(number_in_res(anchor, "deadline"), 2);
    cr_expect_eq(number_in_res(anchor, "budget_exhausted"), 0,
                 "a failed take was counted by the withdrawal");
    cr_expect_eq(number_in_res(anchor, "ambiguous"), 1);
    cr_expect_eq(number_in_res(anchor, "not_sent"), 2);
    cr_expect_eq(number_in_res(anchor, "sent_no_response"), 2);
    cr_expect_eq(number_in_res(anchor, "response_received"), 1);
    cr_expect_eq(number_in_res(anchor, "partial_response"), 1);
    retryd_host_close(h);
}

/*
 * The daemon releases the process slot of a connection that hangs up, and
 * may give it to the next process. The library must stop writing into it:
 * before, it kept its bindings and counted into the other process's slot.
 */
Test(reattach, a_dropped_connection_leaves_the_slot_to_its_next_owner)
{
    child a, b;
    char a_at[64], b_at[64];
    start_client(&a);
    pid_anchor(a_at, sizeof(a_at), (long)a.pid);
    ask(&a, "open payments", "ok shared=1");
    ask(&a, "deposit 2", "ok");
    stats_json();
    double a_slot = number_in_res(a_at, "slot");

    drop_by_timeout(&a);
    cr_assert_eq(kill(D.pid, SIGCONT), 0);
    ask(&a, "attached", "attached 0");
    cr_assert(rd_wait_until(none_attached, NULL, 5000),
              "the daemon did not release the slot");

    start_client(&b);
    pid_anchor(b_at, sizeof(b_at), (long)b.pid);
    ask(&b, "open payments", "ok shared=1");
    stats_json();
    cr_assert_eq(number_in_res(b_at, "slot"), a_slot,
                 "the scenario needs b in a's old slot");

    /* a spends through the handle it had: local, or on a slot of its own
     * once it attaches again; never in b's. */
    char reply[64];
    cr_assert_eq(child_ask(&a, "open payments", reply, sizeof(reply), ASK_MS),
                 0);
    ask(&a, "deposit 5", "ok");
    stats_json();
    cr_expect_eq(number_in_res(b_at, "deposits"), 0,
                 "a's deposits were counted as b's");

    cr_expect(rd_wait_until(becomes_shared, &a, 10000),
              "a did not attach again");
    ask(&a, "attached", "attached 1");
    cr_expect_eq(daemon_stat("attached_processes"), 2);
    cr_expect_neq(number_in_res(a_at, "slot"), a_slot);
    cr_expect_gt(number_in_res(a_at, "deposits"), 0);
    cr_expect_eq(number_in_res(b_at, "deposits"), 0);
    child_stop(&b);
    child_stop(&a);
}

/*
 * A daemon killed after the library hung up on it never released the slot;
 * the next daemon adopts it for the live process. The library asks for it
 * back instead of leaving it to the process's exit.
 */
Test(reattach, a_slot_left_by_a_killed_daemon_is_resumed)
{
    child a;
    char a_at[64];
    start_client(&a);
    pid_anchor(a_at, sizeof(a_at), (long)a.pid);
    ask(&a, "open payments", "ok shared=1");
    ask(&a, "deposit 2", "ok");
    stats_json();
    double a_slot = number_in_res(a_at, "slot");

    drop_by_timeout(&a);
    rd_daemon_stop(&D, SIGKILL);
    cr_assert_eq(rd_daemon_start(&D), 0);
    cr_expect(rd_wait_until(becomes_shared, &a, 10000),
              "a did not attach again");
    cr_expect_eq(daemon_stat("attached_processes"), 1,
                 "a holds one slot, not two");
    cr_expect_eq(number_in_res(a_at, "slot"), a_slot);
    cr_expect_geq(number_in_res(a_at, "deposits"), 3, "its counts went on");
    child_stop(&a);
}

/*
 * A process slot has entries for 32 upstreams; a process that uses more
 * counts the rest in the upstream slots' own counters (docs/segment.md).
 * Either way every deposit reaches the upstream's statistics.
 */
Test(reattach, upstreams_past_the_32nd_count_in_their_own_slot)
{
    enum { MANY = 40 };
    child c;
    char cmd[64], anchor[64];
    start_client(&c);
    for (int i = 1; i <= MANY; i++) {
        snprintf(cmd, sizeof(cmd), "open many-%02d", i);
        ask(&c, cmd, "ok shared=1");
        ask(&c, "deposit 1", "ok");
    }
    stats_json();
    for (int i = 1; i <= MANY; i++) {
        snprintf(anchor, sizeof(anchor), "\"name\":\"many-%02d\"", i);
        cr_expect_eq(number_in_res(anchor, "deposits"), 1, "many-%02d", i);
    }
    /* The process's own row sums its 32 entries: the other 8 deposits
     * were counted in the upstream slots, not lost and not twice. */
    pid_anchor(anchor, sizeof(anchor), (long)c.pid);
    cr_expect_eq(number_in_res(anchor, "deposits"), 32);
    child_stop(&c);
}
