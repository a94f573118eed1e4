/* SPDX-License-Identifier: MIT */
/*
 * What the daemon suites share: per test, a real retryd started from the
 * suite's base_config (define `static const char *const base_config`
 * before including), the test client processes that talk to it, and
 * readers of `retrydctl stats --json`. Include after
 * <criterion/criterion.h>, "child.h" and "harness.h"; then
 * TestSuite(name, .init = daemon_setup, .fini = daemon_teardown).
 */
#ifndef RETRYD_TEST_DAEMON_FIXTURE_H
#define RETRYD_TEST_DAEMON_FIXTURE_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>

#define ASK_MS 10000

static rd_daemon D;
static run_result res;

static inline void daemon_setup(void)
{
    cr_assert_eq(rd_daemon_init(&D, base_config), 0);
    cr_assert_eq(rd_daemon_start(&D), 0, "daemon did not start; see %s", D.log);
}

static inline void daemon_teardown(void)
{
    rd_daemon_cleanup(&D);
}

/* A retryd-test-client process attached to D's control socket. */
static inline void start_client(child *c)
{
    char *argv[] = {TEST_CLIENT_PATH, D.control, NULL};
    cr_assert_eq(child_start(c, argv), 0);
}

/* Send @p cmd to @p c; its one-line reply must be @p expect. */
static inline void ask(child *c, const char *cmd, const char *expect)
{
    char reply[256];
    cr_assert_eq(child_ask(c, cmd, reply, sizeof(reply), ASK_MS), 0,
                 "client did not answer '%s'", cmd);
    cr_assert_str_eq(reply, expect, "after '%s'", cmd);
}

/* `retrydctl stats --json` into res; the test fails when it does. */
static inline void stats_json(void)
{
    cr_assert_eq(rd_ctl(&D, &res, "stats", "--json", NULL), 0, "retrydctl: %s",
                 res.err);
}

/* The number after "key": in res.out, after @p anchor (NULL: anywhere). */
static inline double number_in_res(const char *anchor, const char *key)
{
    double v = rd_json_number(res.out, anchor, key);
    cr_assert(!isnan(v), "no \"%s\" after '%s' in %s", key,
              anchor ? anchor : "", res.out);
    return v;
}

/* A field of upstream @p upstream in fresh stats. */
static inline double stat_of(const char *upstream, const char *key)
{
    char anchor[128];
    stats_json();
    snprintf(anchor, sizeof(anchor), "\"name\":\"%s\"", upstream);
    return number_in_res(anchor, key);
}

/* A field of the daemon's own object in fresh stats. */
static inline double daemon_stat(const char *key)
{
    stats_json();
    return number_in_res("\"daemon\"", key);
}

/* What the stats say of the host-wide draining flag (a JSON true or false,
 * which no number reader can tell apart). */
static inline bool stats_say_draining(bool on)
{
    stats_json();
    return strstr(res.out, on ? "\"draining\":true," : "\"draining\":false,") !=
           NULL;
}

/* The JSON anchor of process @p pid's row in `stats --json`. */
static inline void pid_anchor(char *buf, size_t len, long pid)
{
    snprintf(buf, len, "{\"pid\":%ld,", pid);
}

/* Whether the daemon has not exited. kill(pid, 0) also succeeds for a
 * zombie; WNOWAIT leaves the exit status to the harness's reap. */
static inline bool daemon_running(void)
{
    siginfo_t si = {0};
    return waitid(P_PID, (id_t)D.pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           si.si_pid == 0;
}

/* The daemon's log so far (rd_daemon_read_log), in a static buffer that
 * the next call overwrites. */
static inline const char *daemon_log(void)
{
    static char text[1 << 16];
    cr_assert_geq(rd_daemon_read_log(&D, text, sizeof(text)), 0,
                  "cannot read %s", D.log);
    return text;
}

/* A stream connection to the socket at @p path; every read on it is
 * bounded at 5 s. */
static inline int raw_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0,
                 "connect %s: %s", path, strerror(errno));
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* @p n bytes to a socket in one send. MSG_NOSIGNAL: a daemon that closed
 * first fails the test with EPIPE instead of killing it with SIGPIPE. */
static inline void send_all(int fd, const void *bytes, size_t n)
{
    cr_assert_eq(send(fd, bytes, n, MSG_NOSIGNAL), (ssize_t)n, "send: %s",
                 strerror(errno));
}

#endif
