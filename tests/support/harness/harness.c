/* SPDX-License-Identifier: MIT */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int rd_daemon_write_config(rd_daemon *d, const char *extra)
{
    FILE *f = fopen(d->config, "we");
    if (f == NULL)
        return -errno;
    fprintf(f, "[retryd]\nruntime_dir = %s\nlog_level = debug\n%s\n",
            d->runtime, extra ? extra : "");
    return fclose(f) == 0 ? 0 : -errno;
}

int rd_daemon_init(rd_daemon *d, const char *extra)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->dir, sizeof(d->dir), "/tmp/retryd-test-XXXXXX");
    if (mkdtemp(d->dir) == NULL)
        return -errno;
    snprintf(d->config, sizeof(d->config), "%s/retryd.conf", d->dir);
    snprintf(d->runtime, sizeof(d->runtime), "%s/run", d->dir);
    snprintf(d->control, sizeof(d->control), "%s/control.sock", d->runtime);
    snprintf(d->stats, sizeof(d->stats), "%s/stats.sock", d->runtime);
    snprintf(d->segment, sizeof(d->segment), "%s/segment", d->runtime);
    snprintf(d->log, sizeof(d->log), "%s/retryd.log", d->dir);
    /* The harness's directory is traversable so tests that drop
     * privileges reach the runtime directory's own permission check. */
    chmod(d->dir, 0755);
    return rd_daemon_write_config(d, extra);
}

int rd_daemon_start(rd_daemon *d)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        char fdarg[16];
        /* A test that fails an assertion exits without its cleanup: the
         * daemon goes with it, and never holds the test's output open. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
            _exit(127);
        int log = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log >= 0) {
            dup2(log, 1);
            dup2(log, 2);
        }
        struct rlimit nofile = {.rlim_cur = d->nofile_soft,
                                .rlim_max = d->nofile_hard};
        if (d->nofile_hard > 0 && setrlimit(RLIMIT_NOFILE, &nofile) < 0)
            _exit(127);
        int wfd = dup(p[1]); /* without O_CLOEXEC: it survives exec */
        snprintf(fdarg, sizeof(fdarg), "%d", wfd);
        execl(RETRYD_PATH, "retryd", "--config", d->config, "--notify-fd",
              fdarg, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    d->pid = pid;
    /* The bound is for a daemon that never gets ready, not a measure of
     * speed: a sanitized daemon reading thousands of sections on a busy
     * machine takes seconds. */
    char buf[8] = {0};
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    int polled;
    while ((polled = poll(&pf, 1, RD_DAEMON_READY_MS)) < 0 && errno == EINTR)
        ;
    ssize_t got = polled == 1 ? read(p[0], buf, 6) : -1;
    close(p[0]);
    if (got == 6 && memcmp(buf, "READY\n", 6) == 0)
        return 0;
    rd_daemon_stop(d, SIGKILL);
    /* A closed pipe: the daemon exited (its log says why); else no word
     * within the bound. */
    return got == 0 ? -ECHILD : -ETIMEDOUT;
}

int rd_daemon_stop(rd_daemon *d, int sig)
{
    if (d->pid <= 0)
        return 0;
    kill(d->pid, sig);
    kill(d->pid, SIGCONT); /* a test may have stopped it */
    int code = rd_reap(d->pid, 10000);
    d->pid = 0;
    return code;
}

void rd_daemon_cleanup(rd_daemon *d)
{
    rd_daemon_stop(d, SIGTERM);
    if (d->dir[0] != '\0')
        rd_remove_tree(d->dir);
}

bool rd_wait_until(bool (*cond)(void *), void *arg, int timeout_ms)
{
    long long deadline = rd_now_ms() + timeout_ms;
    while (!cond(arg)) {
        if (rd_now_ms() > deadline)
            return cond(arg);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return true;
}

/* retrydctl's argv holds char *; the test's strings are not written. */
static char *unconst(const char *s)
{
    return (char *)(uintptr_t)s;
}

int rd_ctl(const rd_daemon *d, run_result *res, const char *cmd, ...)
{
    enum { MAX_ARGS = 16 };
    char *argv[MAX_ARGS + 7];
    size_t n = 0;
    va_list ap;

    argv[n++] = unconst(RETRYDCTL_PATH);
    argv[n++] = unconst(cmd);
    va_start(ap, cmd);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
        if (n == MAX_ARGS + 2) {
            va_end(ap);
            return -E2BIG;
        }
        argv[n++] = unconst(a);
    }
    va_end(ap);
    argv[n++] = unconst("--control-socket");
    argv[n++] = unconst(d->control);
    argv[n++] = unconst("--stats-socket");
    argv[n++] = unconst(d->stats);
    argv[n] = NULL;
    int rc = run_program(argv, 20000, res);
    return rc < 0 ? rc : res->exit_code;
}

ssize_t rd_daemon_read_log(const rd_daemon *d, char *buf, size_t len)
{
    int fd = open(d->log, O_RDONLY | O_CLOEXEC);
    size_t got = 0;

    if (fd < 0)
        return -errno;
    while (got + 1 < len) {
        ssize_t n = read(fd, buf + got, len - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
}

int rd_daemon_stop_or_show_log(rd_daemon *d, int sig)
{
    int code = rd_daemon_stop(d, sig);
    if (code != 0) {
        static char text[65536];
        if (rd_daemon_read_log(d, text, sizeof(text)) >= 0)
            fprintf(stderr, "--- %s ---\n%s\n", d->log, text);
    }
    return code;
}

double rd_json_number(const char *json, const char *anchor, const char *key)
{
    const char *p = anchor ? strstr(json, anchor) : json;
    char pat[64];

    if (p == NULL)
        return NAN;
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    p = strstr(p, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}
