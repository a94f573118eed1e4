/* SPDX-License-Identifier: MIT */
/*
 * What the tests of examples/ share. Each test is a plain program
 * (check.h: it also runs where criterion cannot) that starts a fault
 * server, sometimes a retryd daemon, runs one built example as a real
 * child process, and checks its exit code, what it printed and what the
 * server and the daemon counted. Every wait is bounded.
 */
#ifndef RETRYD_EXAMPLE_TEST_H
#define RETRYD_EXAMPLE_TEST_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "run.h"
#include "testsrv.h"

/* The bound on one run of an example, in ms: far above what any needs. */
#define EX_RUN_MS 60000

/* Everything a test holds, cleaned up at exit: a failed CHECK exits. */
static struct {
    testsrv *srv;
    rd_daemon daemon;
    bool daemon_started;
    run_result res;
    char base[64];
} ex;

static inline void ex_cleanup(void)
{
    testsrv_stop(ex.srv);
    if (ex.daemon_started)
        rd_daemon_cleanup(&ex.daemon);
}

/* A fault server; ex.base is its URL. Registers the cleanup. */
static inline void ex_start_server(void)
{
    atexit(ex_cleanup);
    int r = testsrv_start(FAULTSRV_PATH, NULL, &ex.srv);
    CHECK(r == 0, "faultsrv did not start: %s", strerror(-r));
    snprintf(ex.base, sizeof(ex.base), "http://127.0.0.1:%d",
             testsrv_port(ex.srv));
}

/* A retryd daemon in a temporary directory, which the examples find
 * through $RETRYD_CONTROL_SOCKET as any client would. */
static inline void ex_start_daemon(void)
{
    CHECK(rd_daemon_init(&ex.daemon, NULL) == 0, "no temporary directory");
    ex.daemon_started = true;
    CHECK(rd_daemon_start(&ex.daemon) == 0, "retryd did not start; see %s",
          ex.daemon.log);
    setenv("RETRYD_CONTROL_SOCKET", ex.daemon.control, 1);
}

/* No daemon: a control socket nobody listens on, so the examples use
 * process-local budgets (and never a daemon of the machine's own). */
static inline void ex_no_daemon(void)
{
    setenv("RETRYD_CONTROL_SOCKET", "/nonexistent/retryd/control.sock", 1);
}

/* Run argv (NULL-terminated; argv[0] a path) into ex.res; returns its
 * exit code. */
static inline int ex_run(char *const argv[])
{
    int r = run_program(argv, EX_RUN_MS, &ex.res);
    CHECK(r == 0, "cannot run %s: %s", argv[0], strerror(-r));
    return ex.res.exit_code;
}

/* The line of ex.res.out that starts with @p prefix, or NULL. */
static inline const char *ex_line(const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = ex.res.out; p != NULL && *p != '\0';) {
        if (strncmp(p, prefix, n) == 0)
            return p;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return NULL;
}

/* A line the example must have printed, for sscanf. */
static inline const char *ex_need_line(const char *prefix)
{
    const char *line = ex_line(prefix);
    CHECK(line != NULL, "no line '%s...' in the output:\n%s%s", prefix,
          ex.res.out, ex.res.err);
    return line;
}

/* Executions the server counted for request id @p id. */
static inline long ex_count(const char *id)
{
    long n = testsrv_count(ex.srv, id);
    CHECK(n >= 0, "COUNT %s: %s", id, strerror((int)-n));
    return n;
}

/* The same, for an id made with a format. */
static inline long ex_countf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static inline long ex_countf(const char *fmt, ...)
{
    char id[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(id, sizeof(id), fmt, ap);
    va_end(ap);
    return ex_count(id);
}

/* A counter of upstream @p name in the daemon's `retrydctl stats --json`
 * (e.g. "retries_granted", "deposits", "budget_exhausted"). */
static inline double ex_stat(const char *name, const char *key)
{
    static run_result stats;
    char anchor[160];
    CHECK(rd_ctl(&ex.daemon, &stats, "stats", "--json", NULL) == 0,
          "retrydctl stats: %s", stats.err);
    snprintf(anchor, sizeof(anchor), "\"name\":\"%s\"", name);
    double v = rd_json_number(stats.out, anchor, key);
    CHECK(!isnan(v), "no %s of %s in %s", key, name, stats.out);
    return v;
}

#endif
