/* SPDX-License-Identifier: MIT */
/*
 * retrydctl doctor against a real daemon, as the identity that runs it: a
 * user the daemon serves is told it shares the host budget (exit 0); with
 * no daemon, a user outside the socket's group, a user in the allow list
 * but not the group, a user in the group but not the allow lists, and no
 * free process slot, it is told it does not and what to change (exit 1).
 * Other users are user nobody, which needs root; without it those tests
 * skip.
 */
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "child.h"
#include "harness.h"
#include "run.h"

static const char *const base_config =
    "[upstream payments]\nratio = 0.5\nmin_retries_per_sec = 0\ncap = 20\n";

#include "daemon_fixture.h"

TestSuite(doctor, .init = daemon_setup, .fini = daemon_teardown, .timeout = 60);

#define SHARES "verdict: this identity shares the host budget\n"
#define NOT_SHARING "verdict: this identity would NOT share the host budget: "

static char *unconst(const char *s)
{
    return (char *)(uintptr_t)s;
}

static void restart_with(const char *extra)
{
    char config[1024];
    rd_daemon_stop(&D, SIGTERM);
    snprintf(config, sizeof(config), "%s%s", extra, base_config);
    cr_assert_eq(rd_daemon_write_config(&D, config), 0);
    cr_assert_eq(rd_daemon_start(&D), 0, "see %s", D.log);
}

/* `retrydctl doctor` as user and group nobody, in a child: 0 when it
 * exits @p code and its output holds both @p a and @p b, else a code
 * saying what differed (its output on stderr). */
static int doctor_as_nobody_exits(int code, const char *a, const char *b)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        static run_result r;
        if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
            _exit(99);
        int rc = rd_ctl(&D, &r, "doctor", NULL);
        int bad = rc != code                 ? 10
                  : strstr(r.out, a) == NULL ? 11
                  : strstr(r.out, b) == NULL ? 12
                                             : 0;
        if (bad)
            fprintf(stderr, "doctor exit %d, wanted '%s' and '%s':\n%s%s\n", rc,
                    a, b, r.out, r.err);
        _exit(bad);
    }
    return rd_reap(pid, 30000);
}

/* doctor as nobody says it does not share (exit 1), with @p a and @p b. */
static int doctor_as_nobody(const char *a, const char *b)
{
    return doctor_as_nobody_exits(1, a, b);
}

static void need_root(void)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to run doctor as user nobody");
}

/* "sudo usermod -aG GROUP nobody", GROUP the runtime directory's. */
static void group_fix(char *buf, size_t len)
{
    struct stat st;
    cr_assert_eq(stat(D.runtime, &st), 0);
    const struct group *g = getgrgid(st.st_gid);
    cr_assert(g != NULL);
    snprintf(buf, len, "sudo usermod -aG %s nobody", g->gr_name);
}

Test(doctor, a_user_the_daemon_serves_shares)
{
    cr_assert_eq(rd_ctl(&D, &res, "doctor", NULL), 0, "%s%s", res.out, res.err);
    cr_expect(strstr(res.out, SHARES) != NULL, "%s", res.out);
    cr_expect(strstr(res.out, "FAIL") == NULL, "%s", res.out);
    cr_expect(strstr(res.out, "ok    the daemon answers hello: retryd ") !=
                  NULL,
              "%s", res.out);
    cr_expect(strstr(res.out, "ok    segment accepted") != NULL, "%s", res.out);
    cr_expect(strstr(res.out, "ok    a free process slot") != NULL, "%s",
              res.out);
    cr_expect(strstr(res.out, D.control) != NULL, "names the socket");
}

Test(doctor, a_user_in_the_socket_group_shares_without_root)
{
    need_root();
    if (getgrnam("nogroup") == NULL)
        cr_skip_test("no group 'nogroup' on this machine");
    /* nogroup is nobody's group; allow_groups defaults to it. */
    restart_with("group = nogroup\n");
    cr_expect_eq(doctor_as_nobody_exits(0, "uid 65534 (nobody)", SHARES), 0);
}

Test(doctor, no_daemon_is_told_to_start_one)
{
    rd_daemon_stop(&D, SIGTERM);
    cr_assert_eq(rd_ctl(&D, &res, "doctor", NULL), 1, "%s%s", res.out, res.err);
    cr_expect(strstr(res.out, NOT_SHARING "no daemon") != NULL, "%s", res.out);
    cr_expect(strstr(res.out, "systemctl start retryd") != NULL, "%s", res.out);
}

Test(doctor, a_socket_path_with_nothing_there_is_no_daemon)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/nothing/control.sock", D.dir);
    char *argv[] = {unconst(RETRYDCTL_PATH), unconst("doctor"),
                    unconst("--control-socket"), path, NULL};
    cr_assert_eq(run_program(argv, 20000, &res), 0);
    cr_expect_eq(res.exit_code, 1, "%s", res.out);
    cr_expect(strstr(res.out, NOT_SHARING "no daemon") != NULL, "%s", res.out);
    cr_expect(strstr(res.out, "(--control-socket)") != NULL, "%s", res.out);
}

Test(doctor, a_user_outside_the_group_is_told_the_group_fix)
{
    need_root();
    char fix[128];
    group_fix(fix, sizeof(fix));
    cr_expect_eq(doctor_as_nobody(fix, NOT_SHARING), 0);
}

Test(doctor, a_user_in_the_allow_list_but_not_the_group_is_told_the_socket_fix)
{
    need_root();
    restart_with("allow_users = nobody\n");
    char fix[128];
    group_fix(fix, sizeof(fix));
    cr_expect_eq(doctor_as_nobody(fix, "checked only after the socket's "
                                       "permissions let nobody connect"),
                 0);
}

Test(doctor, a_user_in_the_group_but_not_the_allow_lists_is_told_allow_users)
{
    need_root();
    if (getgrnam("nogroup") == NULL)
        cr_skip_test("no group 'nogroup' on this machine");
    restart_with("group = nogroup\nallow_groups = root\n");
    cr_expect_eq(doctor_as_nobody("FAIL  the daemon refuses uid 65534",
                                  "add nobody to allow_users"),
                 0);
}

/* #23: a full upstream table is a new upstream not shared, and doctor says
 * so with the fix; the configuration's one upstream and a client's fill
 * a table of 2. */
Test(doctor, a_full_upstream_table_is_told_upstream_capacity)
{
    restart_with("upstream_capacity = 2\n");
    cr_assert_eq(rd_ctl(&D, &res, "doctor", NULL), 0, "%s%s", res.out, res.err);
    cr_expect(strstr(res.out, "upstream table: 1 of 2 slots") != NULL, "%s",
              res.out);
    child c;
    start_client(&c);
    ask(&c, "open orders", "ok shared=1");
    ask(&c, "open more", "ok shared=0"); /* no slot left for it */
    cr_assert_eq(rd_ctl(&D, &res, "doctor", NULL), 1, "%s%s", res.out, res.err);
    cr_expect(strstr(res.out, NOT_SHARING "the upstream table is full") != NULL,
              "%s", res.out);
    cr_expect(strstr(res.out, "raise upstream_capacity") != NULL, "%s",
              res.out);
    child_stop(&c);
}

Test(doctor, no_free_process_slot_is_told_process_capacity)
{
    restart_with("process_capacity = 1\n");
    child c;
    start_client(&c);
    ask(&c, "status", "status shared");
    cr_assert_eq(rd_ctl(&D, &res, "doctor", NULL), 1, "%s%s", res.out, res.err);
    cr_expect(strstr(res.out, NOT_SHARING "no free process slot") != NULL, "%s",
              res.out);
    cr_expect(strstr(res.out, "raise process_capacity") != NULL, "%s", res.out);
    child_stop(&c);
}
