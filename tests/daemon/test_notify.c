/* SPDX-License-Identifier: MIT */
/*
 * retryd under a service manager's notify protocol, as systemd runs it
 * (Type=notify, WatchdogSec=): the test plays the manager. It binds an
 * AF_UNIX datagram socket with SO_PASSCRED, starts the real daemon with
 * NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID (set in the child before
 * exec, as systemd does) and checks, each waited for with a bound:
 * READY=1 once the control socket accepts; WATCHDOG=1 at least twice per
 * interval; no ping while the daemon is stopped (SIGSTOP) and pings again
 * after SIGCONT; RELOADING=1 with a plausible MONOTONIC_USEC then READY=1
 * on SIGHUP, also when the new file is refused (STATUS= says why);
 * STOPPING=1 on SIGTERM. First, a daemon whose WATCHDOG_PID names another
 * process gets READY=1 out but never pings. Every datagram's sender
 * (SCM_CREDENTIALS) must be the daemon's main pid, never its segment
 * keeper's (the second daemon adopts the first one's keeper, which has
 * outlived a daemon by then). A plain program, so the thread sanitizer
 * build runs it too.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "harness.h"
#include "run.h"

/* 1.5 s: the daemon pings every 500 ms (a third), so two pings must come
 * in every 750 ms (half), and a stopped daemon misses three. */
#define WATCHDOG_USEC 1500000ull
#define PING_GAP_MAX_MS (WATCHDOG_USEC / 2000)
#define WAIT_MS 10000

static rd_daemon D;
static int notify_fd = -1;
static char notify_path[160];
static pid_t keeper_pid;

static long long mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void bind_notify_socket(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int on = 1;
    snprintf(notify_path, sizeof(notify_path), "%s/notify.sock", D.dir);
    CHECK(strlen(notify_path) < sizeof(sa.sun_path), "path too long");
    strcpy(sa.sun_path, notify_path);
    notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CHECK(notify_fd >= 0, "socket: %s", strerror(errno));
    CHECK(bind(notify_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
          "bind %s: %s", notify_path, strerror(errno));
    CHECK(setsockopt(notify_fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) == 0,
          "SO_PASSCRED: %s", strerror(errno));
}

/* The daemon, its environment as systemd gives it: NOTIFY_SOCKET,
 * WATCHDOG_USEC and WATCHDOG_PID: its own pid (known only in the child),
 * or @p watchdog_pid when that is not 0. */
static void start_daemon(pid_t watchdog_pid)
{
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        char usec[32], self[32];
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
            _exit(127);
        FILE *log = freopen(D.log, "ae", stderr);
        if (log != NULL)
            dup2(fileno(log), 1);
        snprintf(usec, sizeof(usec), "%llu", WATCHDOG_USEC);
        snprintf(self, sizeof(self), "%ld",
                 (long)(watchdog_pid ? watchdog_pid : getpid()));
        setenv("NOTIFY_SOCKET", notify_path, 1);
        setenv("WATCHDOG_USEC", usec, 1);
        setenv("WATCHDOG_PID", self, 1);
        execl(RETRYD_PATH, "retryd", "--config", D.config, (char *)NULL);
        _exit(127);
    }
    D.pid = pid;
}

/* The daemon's log, for a failure message. */
static const char *daemon_log(void)
{
    static char text[1 << 15];
    if (rd_daemon_read_log(&D, text, sizeof(text)) < 0)
        snprintf(text, sizeof(text), "(no log)");
    return text;
}

/* One datagram within @p timeout_ms into @p buf (NUL-terminated); false
 * when none came. Its sender must be the daemon's main pid. */
static bool receive(char *buf, size_t len, int timeout_ms)
{
    struct pollfd pf = {.fd = notify_fd, .events = POLLIN};
    int r = poll(&pf, 1, timeout_ms);
    CHECK(r >= 0, "poll: %s", strerror(errno));
    if (r == 0)
        return false;
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(struct ucred))];
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = len - 1};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = &ctl,
                       .msg_controllen = sizeof(ctl)};
    ssize_t n = recvmsg(notify_fd, &m, MSG_DONTWAIT);
    CHECK(n >= 0, "recvmsg: %s", strerror(errno));
    buf[n] = '\0';
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    CHECK(c != NULL && c->cmsg_level == SOL_SOCKET &&
              c->cmsg_type == SCM_CREDENTIALS,
          "no credentials with '%s'", buf);
    struct ucred cred;
    memcpy(&cred, CMSG_DATA(c), sizeof(cred));
    CHECK(cred.pid == D.pid, "'%s' came from pid %ld, not the daemon %ld%s",
          buf, (long)cred.pid, (long)D.pid,
          cred.pid == keeper_pid ? " (its keeper)" : "");
    return true;
}

/* Whether @p msg holds the line @p line (e.g. "READY=1"). */
static bool has_line(const char *msg, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = msg; (p = strstr(p, line)) != NULL; p += n)
        if ((p == msg || p[-1] == '\n') && (p[n] == '\0' || p[n] == '\n'))
            return true;
    return false;
}

/* The value of @p key ("STATUS=") in @p msg, up to its line's end, into
 * @p out; empty when absent. */
static void value_of(const char *msg, const char *key, char *out, size_t len)
{
    out[0] = '\0';
    for (const char *p = msg; (p = strstr(p, key)) != NULL; p++)
        if (p == msg || p[-1] == '\n') {
            p += strlen(key);
            size_t n = strcspn(p, "\n");
            snprintf(out, len, "%.*s", (int)n, p);
            return;
        }
}

/* The next datagram holding @p line, within @p timeout_ms; those before
 * it (watchdog pings) are checked for their sender and skipped. */
static void expect(const char *line, char *msg, size_t len, int timeout_ms)
{
    long long deadline = rd_now_ms() + timeout_ms;
    for (;;) {
        long long left = deadline - rd_now_ms();
        CHECK(left > 0 && receive(msg, len, (int)left),
              "no %s within %d ms; daemon log:\n%s", line, timeout_ms,
              daemon_log());
        if (has_line(msg, line))
            return;
    }
}

static bool control_accepts(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, D.control);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0, "socket");
    bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/* The keeper: the segment link names /proc/<keeper>/fd/3. */
static pid_t find_keeper(void)
{
    char target[64] = {0};
    long pid = 0;
    ssize_t n = readlink(D.segment, target, sizeof(target) - 1);
    CHECK(n > 0 && sscanf(target, "/proc/%ld/fd/3", &pid) == 1,
          "no keeper link at %s", D.segment);
    return (pid_t)pid;
}

static void check_ready(void)
{
    char msg[2048], v[1024];
    expect("READY=1", msg, sizeof(msg), WAIT_MS);
    CHECK(control_accepts(), "READY=1 before the control socket accepts");
    value_of(msg, "MAINPID=", v, sizeof(v));
    CHECK(atol(v) == (long)D.pid, "MAINPID=%s, daemon %ld", v, (long)D.pid);
    value_of(msg, "STATUS=", v, sizeof(v));
    CHECK(strstr(v, "serving") != NULL, "READY=1 with STATUS=%s", v);
    keeper_pid = find_keeper();
    CHECK(keeper_pid > 0 && keeper_pid != D.pid, "keeper %ld",
          (long)keeper_pid);
    printf("READY=1 from %ld (keeper %ld): %s\n", (long)D.pid, (long)keeper_pid,
           v);
}

/* Six pings in a row, each within half the interval of the one before
 * (systemd's "at least twice per interval"), and not a flood. */
static void check_cadence(void)
{
    char msg[256];
    long long prev = 0, worst = 0, best = 1LL << 40;
    for (int i = 0; i < 7; i++) {
        expect("WATCHDOG=1", msg, sizeof(msg), WAIT_MS);
        long long now = rd_now_ms();
        if (i > 0) {
            worst = now - prev > worst ? now - prev : worst;
            best = now - prev < best ? now - prev : best;
        }
        prev = now;
    }
    printf("WATCHDOG=1 gaps: %lld to %lld ms (interval %llu ms)\n", best, worst,
           WATCHDOG_USEC / 1000);
    CHECK(worst <= (long long)PING_GAP_MAX_MS,
          "a gap of %lld ms between pings, more than half the interval", worst);
    CHECK(best >= (long long)PING_GAP_MAX_MS / 3,
          "pings %lld ms apart: a flood, not a cadence", best);
}

/* The state letter of /proc/<daemon>/stat. */
static char proc_state(void)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)D.pid);
    FILE *f = fopen(path, "re");
    CHECK(f != NULL, "%s: %s", path, strerror(errno));
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    CHECK(p != NULL && p[1] == ' ', "cannot read %s", path);
    return p[2];
}

static bool daemon_stopped(void *arg)
{
    (void)arg;
    return proc_state() == 'T';
}

/* A stopped loop sends nothing for a whole interval; after SIGCONT the
 * pings come back. They come from the live loop, not from a thread or a
 * process that runs on without it. */
static void check_stop_cont(void)
{
    char msg[256];
    CHECK(kill(D.pid, SIGSTOP) == 0, "SIGSTOP");
    CHECK(rd_wait_until(daemon_stopped, NULL, 5000), "not stopped");
    while (receive(msg, sizeof(msg), 0))
        ; /* what was sent before it stopped */
    long long t0 = rd_now_ms();
    bool got = receive(msg, sizeof(msg), (int)(WATCHDOG_USEC / 1000));
    CHECK(!got, "'%s' after %lld ms of SIGSTOP", msg, rd_now_ms() - t0);
    CHECK(kill(D.pid, SIGCONT) == 0, "SIGCONT");
    t0 = rd_now_ms();
    expect("WATCHDOG=1", msg, sizeof(msg), (int)PING_GAP_MAX_MS * 4);
    printf("stopped for %llu ms: no ping; WATCHDOG=1 %lld ms after SIGCONT\n",
           WATCHDOG_USEC / 1000, rd_now_ms() - t0);
}

/* SIGHUP: RELOADING=1 stamped between the signal and its receipt, then
 * READY=1 whose STATUS= contains @p status_has and @p also (unless NULL). */
static void check_reload(const char *status_has, const char *also)
{
    char msg[2048], v[1024];
    long long before = mono_us();
    CHECK(kill(D.pid, SIGHUP) == 0, "SIGHUP");
    expect("RELOADING=1", msg, sizeof(msg), WAIT_MS);
    long long after = mono_us();
    value_of(msg, "MONOTONIC_USEC=", v, sizeof(v));
    long long stamp = atoll(v);
    CHECK(stamp >= before && stamp <= after,
          "MONOTONIC_USEC=%s, not between %lld and %lld", v, before, after);
    expect("READY=1", msg, sizeof(msg), WAIT_MS);
    value_of(msg, "STATUS=", v, sizeof(v));
    CHECK(strstr(v, status_has) != NULL &&
              (also == NULL || strstr(v, also) != NULL),
          "after SIGHUP, STATUS=%s", v);
    CHECK(control_accepts(), "not serving after the reload");
    printf("SIGHUP: RELOADING=1 (MONOTONIC_USEC %lld us after the signal), "
           "READY=1: %s\n",
           stamp - before, v);
}

static void check_stopping(void)
{
    char msg[512];
    CHECK(kill(D.pid, SIGTERM) == 0, "SIGTERM");
    expect("STOPPING=1", msg, sizeof(msg), WAIT_MS);
    int code = rd_daemon_stop(&D, SIGTERM);
    CHECK(code == 0, "the daemon exited with %d; log:\n%s", code, daemon_log());
    printf("SIGTERM: STOPPING=1, exit 0\n");
}

/* WATCHDOG_PID naming another process (as a child of a watched service
 * inherits it) means the watchdog is not this process's: READY=1 comes,
 * pings never do. */
static void check_foreign_watchdog_pid(void)
{
    char msg[2048];
    start_daemon(getpid());
    expect("READY=1", msg, sizeof(msg), WAIT_MS);
    bool got = false;
    long long left, deadline = rd_now_ms() + (long long)(WATCHDOG_USEC / 1000);
    while (!got && (left = deadline - rd_now_ms()) > 0)
        got =
            receive(msg, sizeof(msg), (int)left) && has_line(msg, "WATCHDOG=1");
    CHECK(!got, "WATCHDOG=1 with WATCHDOG_PID naming another process");
    check_stopping();
    printf("WATCHDOG_PID of another process: READY=1, no ping in %llu ms\n",
           WATCHDOG_USEC / 1000);
}

int main(void)
{
    CHECK(rd_daemon_init(&D, "[upstream pay]\nratio = 0.1\n") == 0, "init");
    bind_notify_socket();
    check_foreign_watchdog_pid();
    start_daemon(0);
    check_ready();
    check_cadence();
    check_stop_cont();
    check_reload("reloaded", NULL);
    /* A number the strict reader refuses: the old configuration runs on,
     * and the manager is told so, naming the key. */
    CHECK(rd_daemon_write_config(&D, "[upstream pay]\nratio = 0x10\n") == 0,
          "rewrite");
    check_reload("reload refused", "ratio");
    check_stopping();
    close(notify_fd);
    rd_daemon_cleanup(&D);
    return 0;
}
