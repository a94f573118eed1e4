/* SPDX-License-Identifier: MIT */
/*
 * retrydctl behaves like a command-line tool (issue 10): every subcommand
 * answers -h/--help on stdout with exit 0 and --version with the project's
 * version, an unknown option is exit 64 with a one-line hint, 'help
 * [COMMAND]' works, and 'retire --help' retires nothing while 'retire --
 * NAME' takes any name. Real retrydctl processes; the retire tests against
 * a real daemon.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "child.h"
#include "harness.h"
#include "retryd/retryd.h"
#include "run.h"

static const char *const base_config =
    "[upstream payments]\nratio = 0.5\nmin_retries_per_sec = 0\ncap = 20\n";

#include "daemon_fixture.h"

TestSuite(cli, .timeout = 60);
TestSuite(cli_daemon, .init = daemon_setup, .fini = daemon_teardown,
          .timeout = 60);

/* Every command the top-level usage lists (help aside). */
static const char *const commands[] = {
    "decide", "request", "stats",  "top",    "upstreams",
    "drain",  "retire",  "status", "doctor",
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static char *unconst(const char *s)
{
    return (char *)(uintptr_t)s;
}

/* retrydctl with @p a (NULL-terminated, at most 8), no daemon involved;
 * its exit code. */
static int ctl(const char *a0, const char *a1, const char *a2)
{
    char *argv[] = {unconst(RETRYDCTL_PATH), unconst(a0), unconst(a1),
                    unconst(a2), NULL};
    cr_assert_eq(run_program(argv, 20000, &res), 0, "retrydctl did not run");
    return res.exit_code;
}

/* The number of lines in @p s. */
static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(cli, every_subcommand_help_is_usage_on_stdout_exit_0)
{
    char want[64];
    for (size_t i = 0; i < N_COMMANDS; i++) {
        snprintf(want, sizeof(want), "usage: retrydctl %s", commands[i]);
        for (int form = 0; form < 3; form++) {
            int rc = form == 2   ? ctl("help", commands[i], NULL)
                     : form == 1 ? ctl(commands[i], "-h", NULL)
                                 : ctl(commands[i], "--help", NULL);
            cr_expect_eq(rc, 0, "%s form %d: %s", commands[i], form, res.err);
            cr_expect(strstr(res.out, want) != NULL, "%s form %d: %s",
                      commands[i], form, res.out);
            cr_expect_eq(res.err_len, 0u, "%s: %s", commands[i], res.err);
        }
    }
}

Test(cli, version_is_the_projects_everywhere)
{
    char want[64];
    snprintf(want, sizeof(want), "retrydctl %d.%d.%d\n", RETRYD_VERSION_MAJOR,
             RETRYD_VERSION_MINOR, RETRYD_VERSION_PATCH);
    /* The daemon says the same version. */
    char *daemon[] = {unconst(RETRYD_PATH), unconst("--version"), NULL};
    cr_assert_eq(run_program(daemon, 20000, &res), 0);
    cr_expect_eq(res.exit_code, 0);
    char daemon_says[64];
    snprintf(daemon_says, sizeof(daemon_says), "retryd %s",
             want + strlen("retrydctl "));
    cr_expect_str_eq(res.out, daemon_says);
    cr_expect_eq(ctl("--version", NULL, NULL), 0);
    cr_expect_str_eq(res.out, want);
    cr_expect_eq(ctl("-V", NULL, NULL), 0);
    cr_expect_str_eq(res.out, want);
    for (size_t i = 0; i < N_COMMANDS; i++) {
        cr_expect_eq(ctl(commands[i], "--version", NULL), 0, "%s: %s",
                     commands[i], res.err);
        cr_expect_str_eq(res.out, want, "%s", commands[i]);
    }
}

Test(cli, an_unknown_option_is_64_with_a_one_line_hint)
{
    for (size_t i = 0; i < N_COMMANDS; i++) {
        cr_expect_eq(ctl(commands[i], "--no-such-option", NULL), 64, "%s",
                     commands[i]);
        cr_expect_eq(res.out_len, 0u, "%s wrote %s", commands[i], res.out);
        cr_expect_eq(lines(res.err), 1, "%s: %s", commands[i], res.err);
        cr_expect(strstr(res.err, "no-such-option") != NULL, "%s: %s",
                  commands[i], res.err);
    }
    /* The operator commands point at their --help. */
    cr_expect_eq(ctl("top", "-Z", NULL), 64);
    cr_expect(strstr(res.err, "'-Z'") != NULL, "%s", res.err);
    cr_expect(strstr(res.err, "retrydctl top --help") != NULL, "%s", res.err);
}

Test(cli, bad_values_and_commands_are_usage_errors)
{
    cr_expect_eq(ctl("top", "--delay", NULL), 64, "a missing value");
    cr_expect(strstr(res.err, "needs a value") != NULL, "%s", res.err);
    cr_expect_eq(ctl("top", "--delay", "0.01"), 64, "below 0.1 s");
    cr_expect_eq(ctl("top", "--delay", "3601"), 64, "above an hour");
    cr_expect_eq(ctl("top", "--delay", "nan"), 64);
    cr_expect_eq(ctl("top", "--iterations", "0"), 64);
    cr_expect_eq(ctl("drain", "sideways", NULL), 64);
    cr_expect_eq(ctl("stats", "extra", NULL), 64);
    cr_expect_eq(ctl("no-such-command", NULL, NULL), 64);
    cr_expect(strstr(res.err, "unknown command") != NULL, "%s", res.err);
    cr_expect_eq(ctl("help", "no-such-command", NULL), 64);
    char *bare[] = {unconst(RETRYDCTL_PATH), NULL};
    cr_assert_eq(run_program(bare, 20000, &res), 0);
    cr_expect_eq(res.exit_code, 64, "no command at all");
}

Test(cli, help_lists_every_command_and_the_exit_codes)
{
    cr_expect_eq(ctl("help", NULL, NULL), 0);
    for (size_t i = 0; i < N_COMMANDS; i++) {
        char want[32];
        snprintf(want, sizeof(want), "  %s ", commands[i]);
        cr_expect(strstr(res.out, want) != NULL, "no %s in %s", commands[i],
                  res.out);
    }
    cr_expect(strstr(res.out, "0 done, 64 bad usage, 70 could not be done") !=
                  NULL,
              "%s", res.out);
    cr_expect(strstr(res.out, "request: 0 response, 2 ambiguous, a failure "
                              "curl's code") != NULL,
              "%s", res.out);
}

/* --- retire, against the daemon ------------------------------------------ */

/* `retrydctl retire` with D's sockets first and then @p a, @p b (NULL to
 * end): the operands stay last, after a "--" when the test passes one. */
static int retire(const char *a, const char *b)
{
    char *argv[] = {unconst(RETRYDCTL_PATH),
                    unconst("retire"),
                    unconst("--control-socket"),
                    D.control,
                    unconst("--stats-socket"),
                    D.stats,
                    unconst(a),
                    unconst(b),
                    NULL};
    cr_assert_eq(run_program(argv, 20000, &res), 0);
    return res.exit_code;
}

/* Whether `retrydctl upstreams` lists @p name (a line starting with it). */
static bool listed(const char *name)
{
    char line[128];
    cr_assert_eq(rd_ctl(&D, &res, "upstreams", NULL), 0, "%s", res.err);
    snprintf(line, sizeof(line), "\n%s ", name);
    return strstr(res.out, line) != NULL;
}

Test(cli_daemon, retire_help_prints_help_and_retires_nothing)
{
    child c;
    start_client(&c);
    /* An upstream whose name is the option: the old parser retired it. */
    ask(&c, "open --help", "ok shared=1");
    cr_assert(listed("--help"), "%s", res.out);
    cr_assert(listed("payments"), "%s", res.out);

    cr_expect_eq(retire("--help", NULL), 0, "%s", res.err);
    cr_expect(strstr(res.out, "usage: retrydctl retire") != NULL, "%s",
              res.out);
    cr_expect(listed("--help"), "retire --help retired it: %s", res.out);
    cr_expect(listed("payments"), "%s", res.out);

    cr_expect_eq(retire("--", "--help"), 0, "%s", res.err);
    cr_expect_str_eq(res.out, "retired --help\n");
    cr_expect(!listed("--help"), "'retire -- --help' left it: %s", res.out);
    cr_expect(listed("payments"), "%s", res.out);
    child_stop(&c);
}

Test(cli_daemon, options_may_follow_the_operand)
{
    /* As scripts (and rd_ctl) write them: retire NAME --control-socket P. */
    cr_expect_eq(rd_ctl(&D, &res, "retire", "payments", NULL), 0, "%s",
                 res.err);
    cr_expect_str_eq(res.out, "retired payments\n");
    cr_expect(!listed("payments"), "%s", res.out);
    cr_expect_eq(rd_ctl(&D, &res, "retire", "payments", NULL), 70,
                 "an upstream that is not there");
}
