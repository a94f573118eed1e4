/* SPDX-License-Identifier: MIT */
/*
 * retrydctl's command line, top and doctor against a real daemon, as a
 * plain program so the thread sanitizer build runs them too (criterion
 * cannot start there; the criterion suites test_retrydctl_cli, _top and
 * _doctor hold the full cases). While a client process deposits, the daemon
 * serves top's stats requests with processes and doctor's hello and attach;
 * afterwards it must exit cleanly (a sanitizer report makes its exit code
 * non-zero).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "child.h"
#include "harness.h"
#include "retryd/retryd.h"
#include "run.h"

static rd_daemon D;
static run_result res;

static char *unconst(const char *s)
{
    return (char *)(uintptr_t)s;
}

static void ask(child *c, const char *cmd, const char *expect)
{
    char reply[256];
    CHECK(child_ask(c, cmd, reply, sizeof(reply), 10000) == 0, "no reply to %s",
          cmd);
    CHECK(strcmp(reply, expect) == 0, "'%s' after '%s'", reply, cmd);
}

static void options(void)
{
    static const char *const cmds[] = {"decide", "request",   "stats",
                                       "top",    "upstreams", "drain",
                                       "retire", "status",    "doctor"};
    char want[64];
    snprintf(want, sizeof(want), "retrydctl %d.%d.%d\n", RETRYD_VERSION_MAJOR,
             RETRYD_VERSION_MINOR, RETRYD_VERSION_PATCH);
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        char *help[] = {unconst(RETRYDCTL_PATH), unconst(cmds[i]),
                        unconst("--help"), NULL};
        CHECK(run_program(help, 20000, &res) == 0 && res.exit_code == 0 &&
                  strstr(res.out, "usage: retrydctl ") == res.out,
              "%s --help: %d %s", cmds[i], res.exit_code, res.err);
        help[2] = unconst("--version");
        CHECK(run_program(help, 20000, &res) == 0 && res.exit_code == 0 &&
                  strcmp(res.out, want) == 0,
              "%s --version: %s", cmds[i], res.out);
        help[2] = unconst("--no-such-option");
        CHECK(run_program(help, 20000, &res) == 0 && res.exit_code == 64,
              "%s --no-such-option: %d", cmds[i], res.exit_code);
    }
}

/* The DEP/s cell of @p name's row in the frame at @p f. */
static const char *dep_rate(const char *f, const char *name, char out[32])
{
    char key[64];
    snprintf(key, sizeof(key), "\n%s ", name);
    const char *l = strstr(f, key);
    CHECK(l != NULL && sscanf(l + 1, "%*s %*s %*u %31s", out) == 1,
          "no row for %s in %s", name, f);
    return out;
}

/* top --batch, two frames a second apart, while a forked helper makes the
 * client deposit for 1.5 s: frame 2 has a deposit rate above zero. */
static void top(child *c)
{
    char *argv[] = {unconst(RETRYDCTL_PATH),
                    unconst("top"),
                    unconst("--batch"),
                    unconst("--iterations"),
                    unconst("2"),
                    unconst("--delay"),
                    unconst("1"),
                    unconst("--stats-socket"),
                    D.stats,
                    NULL};
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        long long end = rd_now_ms() + 1500;
        while (rd_now_ms() < end)
            ask(c, "deposit 10", "ok");
        _exit(0);
    }
    CHECK(run_program(argv, 20000, &res) == 0 && res.exit_code == 0,
          "top: %d %s", res.exit_code, res.err);
    CHECK(rd_reap(pid, 10000) == 0, "the depositing child failed");
    char *sep = strstr(res.out, "\n\n"), rate[32];
    CHECK(sep != NULL && strstr(sep + 2, "\n\n") == NULL, "two frames: %s",
          res.out);
    CHECK(strcmp(dep_rate(res.out, "payments", rate), "\u2014") == 0,
          "frame 1 has no rate: %s", rate);
    CHECK(strtod(dep_rate(sep + 1, "payments", rate), NULL) > 0,
          "frame 2's deposit rate is %s", rate);
}

int main(void)
{
    options();
    CHECK(rd_daemon_init(&D, "[upstream payments]\nratio = 0.5\n"
                             "min_retries_per_sec = 0\ncap = 1000\n") == 0,
          "init");
    CHECK(rd_daemon_start(&D) == 0, "the daemon did not start");
    child c;
    char *cargv[] = {unconst(TEST_CLIENT_PATH), D.control, NULL};
    CHECK(child_start(&c, cargv) == 0, "client");
    ask(&c, "open --help", "ok shared=1");
    ask(&c, "open payments", "ok shared=1");

    CHECK(rd_ctl(&D, &res, "retire", "--help", NULL) == 0, "retire --help");
    CHECK(rd_ctl(&D, &res, "upstreams", NULL) == 0 &&
              strstr(res.out, "\n--help ") != NULL,
          "retire --help retired it: %s", res.out);
    top(&c);
    CHECK(rd_ctl(&D, &res, "doctor", NULL) == 0, "doctor: %s", res.out);

    child_stop(&c);
    int code = rd_daemon_stop(&D, SIGTERM);
    CHECK(code == 0, "the daemon exited %d; see %s", code, D.log);
    CHECK(rd_ctl(&D, &res, "top", "-b", "-n", "1", NULL) == 70,
          "top with no daemon: %d", res.exit_code);
    CHECK(rd_ctl(&D, &res, "doctor", NULL) == 1, "doctor with no daemon");
    rd_daemon_cleanup(&D);
    printf("retrydctl_smoke: ok\n");
    return 0;
}
