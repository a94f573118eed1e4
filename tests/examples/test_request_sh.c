/* SPDX-License-Identifier: MIT */
/*
 * examples/request.sh (a payment through `retrydctl request`) against a
 * fault server: each of its exits, the reconciliation of an ambiguous
 * payment both ways (the upstream has it: not sent again; it has not:
 * sent once more), and how often the server executed each payment.
 */
#include "example_test.h"

static char pay[160], lookup[160];

/* sh request.sh PAY_URL LOOKUP_URL, with the built retrydctl. */
static int run_script(const char *pay_path, const char *lookup_path)
{
    snprintf(pay, sizeof(pay), "%s%s", ex.base, pay_path);
    snprintf(lookup, sizeof(lookup), "%s%s", ex.base, lookup_path);
    char *argv[] = {"/bin/sh", REQUEST_SH, pay, lookup, NULL};
    return ex_run(argv);
}

#define EXPECT_ERR(text)                                                       \
    CHECK(strstr(ex.res.err, text) != NULL, "no '%s' in:\n%s%s", text,         \
          ex.res.out, ex.res.err)

/* A 503 to a payment is ambiguous; the lookup says 404; the second try
 * (the server's next answer: 201) pays. Executed twice, on purpose. */
static void ambiguous_then_absent_is_sent_once_more(void)
{
    int rc = run_script("/seq?codes=503,201&id=rs-again",
                        "/status?code=404&id=rs-again-lookup");
    CHECK(rc == 0, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);
    EXPECT_ERR("request.sh: ambiguous: the payment may have executed");
    EXPECT_ERR("request.sh: the upstream does not have it: sending it once "
               "more");
    EXPECT_ERR("request.sh: paid");
    CHECK(ex_count("rs-again") == 2, "executions");
    CHECK(ex_count("rs-again-lookup") == 1, "lookups");
}

/* Lost after the server read it; the lookup finds it: not sent again. */
static void ambiguous_then_found_is_not_sent_again(void)
{
    int rc = run_script("/close-after-read?id=rs-found", "/ok?id=rs-found-l");
    CHECK(rc == 0, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);
    EXPECT_ERR("request.sh: the upstream has it: paid, not sent again");
    CHECK(ex_count("rs-found") == 1, "a payment executed twice");
}

/* The lookup cannot tell (503): exit 2, a human reconciles. */
static void ambiguous_and_unknown_is_exit_2(void)
{
    int rc = run_script("/close-after-read?id=rs-unknown",
                        "/status?code=503&id=rs-unknown-l");
    CHECK(rc == 2, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);
    EXPECT_ERR("request.sh: the upstream cannot tell: reconcile by hand");
    CHECK(ex_count("rs-unknown") == 1, "a payment executed twice");
    CHECK(ex_count("rs-unknown-l") >= 1, "no lookup");
}

/* Lost again on the second try: still ambiguous, never a third. */
static void ambiguous_twice_is_exit_2(void)
{
    int rc = run_script("/close-after-read?id=rs-twice",
                        "/status?code=404&id=rs-twice-l");
    CHECK(rc == 2, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);
    EXPECT_ERR("request.sh: ambiguous again: reconcile by hand");
    CHECK(ex_count("rs-twice") == 2, "executions");
}

/* A failure that proves nothing ran (refused connection): exit 1, and the
 * lookup is never asked. */
static void failure_is_exit_1(void)
{
    char target[64];
    snprintf(target, sizeof(target), "http://127.0.0.1:%d/pay",
             testsrv_unused_port());
    snprintf(lookup, sizeof(lookup), "%s/ok?id=rs-failed-l", ex.base);
    char *argv[] = {"/bin/sh", REQUEST_SH, target, lookup, NULL};
    int rc = ex_run(argv);
    CHECK(rc == 1, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);
    EXPECT_ERR("request.sh: failed without executing: not paid");
    CHECK(ex_count("rs-failed-l") == 0, "a lookup after a plain failure");
}

/* The upstream's refusal (402) is a response: not paid, exit 1. */
static void refusal_is_exit_1(void)
{
    int rc = run_script("/status?code=402&id=rs-refused", "/ok?id=rs-ref-l");
    CHECK(rc == 1, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);
    EXPECT_ERR("request.sh: refused by the upstream");
    CHECK(ex_count("rs-refused") == 1, "executions");
}

/* A payment answered at once: its body on stdout, exit 0. */
static void paid_is_exit_0(void)
{
    int rc = run_script("/ok?id=rs-paid", "/ok?id=rs-paid-l");
    CHECK(rc == 0, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);
    CHECK(strcmp(ex.res.out, "ok") == 0, "stdout: '%s'", ex.res.out);
    CHECK(ex_count("rs-paid") == 1 && ex_count("rs-paid-l") == 0, "counts");
}

int main(void)
{
    ex_start_server();
    ex_no_daemon();
    setenv("RETRYDCTL", RETRYDCTL_PATH, 1);
    ambiguous_then_absent_is_sent_once_more();
    ambiguous_then_found_is_not_sent_again();
    ambiguous_and_unknown_is_exit_2();
    ambiguous_twice_is_exit_2();
    failure_is_exit_1();
    refusal_is_exit_1();
    paid_is_exit_0();
    char *usage[] = {"/bin/sh", REQUEST_SH, NULL};
    CHECK(ex_run(usage) == 64, "usage: exit %d", ex.res.exit_code);
    printf("request.sh: every exit and both reconciliations\n");
    return 0;
}
