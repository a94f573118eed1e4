/* SPDX-License-Identifier: MIT */
/* testsrv: test servers as child processes, and their control port.
 * See testsrv.h for the contract with the server. */
#include "testsrv.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 5000

struct testsrv {
    pid_t pid;
    int pidfd;    /* readable once the child exits; -1 if unavailable */
    int stdin_fd; /* write end of the child's stdin; -1 once closed */
    int http_port;
    int control_port;
    bool reaped;
    int wstatus;
};

/* --- time and fds ----------------------------------------------------- */

int64_t testsrv_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd reports `events` (or POLLERR/POLLHUP) or the deadline
 * passes. Returns the revents (> 0), -ETIMEDOUT, or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int64_t left = deadline - testsrv_now_ms();
        int n = poll(&p, 1, left > 0 ? (int)left : 0);

        if (n > 0)
            return p.revents;
        if (n == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Moves fd to >= 3, keeping O_CLOEXEC: the child's dup2() onto 0 and 1
 * must never overwrite one of the other pipe ends (possible when the test
 * process runs with stdin or stdout closed). */
static int raise_fd(int fd)
{
    int moved, e;

    if (fd >= 3)
        return fd;
    moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    e = errno;
    close(fd);
    return moved < 0 ? -e : moved;
}

/* O_CLOEXEC: another server started later must not inherit our stdin
 * pipe, or closing it would no longer stop this server. */
static int make_pipe(int p[2])
{
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    p[0] = raise_fd(p[0]);
    p[1] = raise_fd(p[1]);
    if (p[0] < 0 || p[1] < 0) {
        int rc = p[0] < 0 ? p[0] : p[1];

        close_fd(&p[0]);
        close_fd(&p[1]);
        return rc;
    }
    return 0;
}

/* --- starting ---------------------------------------------------------- */

/* argv[0] is a copy of the path (execv wants char *, the path is const);
 * the extra arguments are borrowed. */
static char **build_argv(const char *path, char *const extra[])
{
    size_t n = 0;
    char **argv;

    while (extra && extra[n])
        n++;
    if (!(argv = calloc(n + 2, sizeof *argv)))
        return NULL;
    if (!(argv[0] = strdup(path))) {
        free(argv);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = extra[i];
    return argv;
}

static void free_argv(char **argv)
{
    if (argv)
        free(argv[0]);
    free(argv);
}

/* Runs in the child between fork and exec: the test process may have
 * threads, so only async-signal-safe calls (no malloc, no stdio). */
static _Noreturn void child_exec(const char *path, char *const argv[],
                                 int in_fd, int out_fd, int err_fd)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigset_t none;
    int e;

    /* The server must start like a fresh process, whatever signal setup
     * the test runner has (an ignored SIGTERM would survive exec). */
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGPIPE, &dfl, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0)
        goto fail;
#ifdef CLOSE_RANGE_CLOEXEC
    /* The test runner's own fds (criterion's pipes) may lack O_CLOEXEC:
     * a server holding them could keep the runner waiting for an EOF.
     * Best effort: fails harmlessly on kernels before 5.11. */
    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
#endif
    execv(path, argv);
fail:
    e = errno;
    /* The exec-status pipe is O_CLOEXEC: success closes it unwritten. */
    ssize_t w = write(err_fd, &e, sizeof e);
    (void)w;
    _exit(127);
}

/* Returns 0 once the exec succeeded, or the child's exec errno. */
static int wait_exec(int fd, int64_t deadline)
{
    int e = 0, r = wait_fd(fd, POLLIN, deadline);
    ssize_t n;

    if (r < 0)
        return r;
    do
        n = read(fd, &e, sizeof e);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        return 0;
    return n == (ssize_t)sizeof e && e > 0 ? -e : -EIO;
}

static int parse_port_line(const char *line, int *http, int *ctl)
{
    int h, c, end = -1;

    if (sscanf(line, "PORT %d CONTROL %d%n", &h, &c, &end) != 2 || end < 0 ||
        line[end] != '\0' || h <= 0 || h > 65535 || c <= 0 || c > 65535)
        return -EPROTO;
    *http = h;
    *ctl = c;
    return 0;
}

/* Reads the PORT line; -EPROTO if the child exits (EOF) or says
 * something else first. */
static int read_port_line(int fd, int64_t deadline, int *http, int *ctl)
{
    char line[128];
    size_t len = 0;

    while (len < sizeof line - 1) {
        int r = wait_fd(fd, POLLIN, deadline);
        ssize_t n;

        if (r < 0)
            return r;
        n = read(fd, line + len, sizeof line - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EPROTO;
        len += (size_t)n;
        line[len] = '\0';
        char *nl = strchr(line, '\n');
        if (nl) {
            *nl = '\0';
            return parse_port_line(line, http, ctl);
        }
    }
    return -EPROTO;
}

/* Reaps the child. Returns 0, -EAGAIN (WNOHANG, still running) or -errno. */
static int reap(testsrv *srv, int flags)
{
    int st = 0;
    pid_t r;

    do
        r = waitpid(srv->pid, &st, flags);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return -EAGAIN;
    if (r < 0) {
        int e = errno;

        srv->reaped = e == ECHILD; /* gone: never wait for it again */
        return -e;
    }
    srv->reaped = true;
    srv->wstatus = st;
    return 0;
}

int testsrv_start(const char *binary_path, char *const extra_argv[],
                  testsrv **ret)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    int64_t deadline = testsrv_now_ms() + START_TIMEOUT_MS;
    char **argv = NULL;
    testsrv *srv;
    int rc;

    if (!binary_path || !ret)
        return -EINVAL;
    *ret = NULL;
    if (!(srv = calloc(1, sizeof *srv)))
        return -ENOMEM;
    *srv = (testsrv){.pid = -1, .pidfd = -1, .stdin_fd = -1};
    if (!(argv = build_argv(binary_path, extra_argv))) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = make_pipe(in)) || (rc = make_pipe(out)) || (rc = make_pipe(err)))
        goto fail;
    if ((srv->pid = fork()) < 0) {
        rc = -errno;
        goto fail;
    }
    if (srv->pid == 0)
        child_exec(binary_path, argv, in[0], out[1], err[1]);
    /* A pidfd makes waiting for exit a poll(); without one (old kernel)
     * testsrv_wait_exit falls back to polling waitpid. */
    srv->pidfd = pidfd_open(srv->pid, 0);
    srv->stdin_fd = in[1];
    in[1] = -1;
    close_fd(&in[0]);
    close_fd(&out[1]);
    close_fd(&err[1]);
    if ((rc = wait_exec(err[0], deadline)) ||
        (rc = read_port_line(out[0], deadline, &srv->http_port,
                             &srv->control_port)))
        goto fail;
    close_fd(&err[0]);
    close_fd(&out[0]); /* the contract: nothing more on stdout */
    free_argv(argv);
    *ret = srv;
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        close_fd(&in[i]);
        close_fd(&out[i]);
        close_fd(&err[i]);
    }
    free_argv(argv);
    if (srv->pid > 0 && !srv->reaped)
        kill(srv->pid, SIGKILL);
    testsrv_stop(srv); /* reaps it */
    return rc;
}

/* --- waiting and stopping ----------------------------------------------- */

/* Without a pidfd nothing signals a child's exit on an fd we own, so this
 * fallback polls waitpid(WNOHANG) every 5 ms up to the deadline. */
static int wait_polling(testsrv *srv, int64_t deadline)
{
    for (;;) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 5000000};
        int rc = reap(srv, WNOHANG);

        if (rc != -EAGAIN)
            return rc;
        if (testsrv_now_ms() >= deadline)
            return -ETIMEDOUT;
        nanosleep(&ts, NULL);
    }
}

int testsrv_wait_exit(testsrv *srv, int timeout_ms, int *wstatus)
{
    int64_t deadline = testsrv_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    int rc = 0;

    if (!srv || srv->pid <= 0)
        return -EINVAL;
    if (!srv->reaped && srv->pidfd >= 0) {
        rc = wait_fd(srv->pidfd, POLLIN, deadline);
        if (rc >= 0)
            rc = reap(srv, 0); /* exited: does not block */
    } else if (!srv->reaped) {
        rc = wait_polling(srv, deadline);
    }
    if (rc < 0)
        return rc;
    if (wstatus)
        *wstatus = srv->wstatus;
    return 0;
}

void testsrv_close_stdin(testsrv *srv)
{
    if (srv)
        close_fd(&srv->stdin_fd);
}

int testsrv_terminate(testsrv *srv, int timeout_ms, int *wstatus)
{
    if (!srv || srv->pid <= 0)
        return -EINVAL;
    if (!srv->reaped)
        kill(srv->pid, SIGTERM);
    return testsrv_wait_exit(srv, timeout_ms, wstatus);
}

void testsrv_stop(testsrv *srv)
{
    if (!srv)
        return;
    if (srv->pid > 0 && !srv->reaped) {
        if (testsrv_terminate(srv, STOP_TIMEOUT_MS, NULL) == -ETIMEDOUT) {
            fprintf(stderr, "testsrv: pid %d ignored SIGTERM, killing it\n",
                    (int)srv->pid);
            kill(srv->pid, SIGKILL);
            testsrv_wait_exit(srv, STOP_TIMEOUT_MS, NULL);
        }
    }
    close_fd(&srv->stdin_fd);
    close_fd(&srv->pidfd);
    free(srv);
}

int testsrv_port(const testsrv *srv)
{
    return srv ? srv->http_port : -EINVAL;
}

int testsrv_control_port(const testsrv *srv)
{
    return srv ? srv->control_port : -EINVAL;
}

pid_t testsrv_pid(const testsrv *srv)
{
    return srv ? srv->pid : -EINVAL;
}

/* --- control port ------------------------------------------------------- */

static int loopback_connect(int port, int64_t deadline)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = 0, soerr = 0;
    socklen_t len = sizeof soerr;

    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        rc = errno == EINPROGRESS ? wait_fd(fd, POLLOUT, deadline) : -errno;
        if (rc >= 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
            rc = -errno;
        else if (rc >= 0 && soerr)
            rc = -soerr;
    }
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

static int send_all(int fd, const char *buf, size_t len, int64_t deadline)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int r = wait_fd(fd, POLLOUT, deadline);
            if (r < 0)
                return r;
        } else if (errno != EINTR) {
            return -errno;
        }
    }
    return 0;
}

/* Reads one reply line; keeps reading to its end even when it does not
 * fit, so that the result is "truncated" rather than "timed out". */
static int recv_line(int fd, char *reply, size_t reply_len, int64_t deadline)
{
    size_t len = 0;
    bool truncated = false;

    for (;;) {
        char buf[4096];
        int r = wait_fd(fd, POLLIN, deadline);
        ssize_t n;

        if (r < 0)
            return r;
        n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EPROTO; /* closed before a whole line */
        char *nl = memchr(buf, '\n', (size_t)n);
        size_t take = nl ? (size_t)(nl - buf) : (size_t)n;
        size_t room = reply_len - 1 - len;
        if (take > room) {
            take = room;
            truncated = true;
        }
        memcpy(reply + len, buf, take);
        len += take;
        reply[len] = '\0';
        if (nl) {
            if (len > 0 && reply[len - 1] == '\r')
                reply[--len] = '\0';
            return truncated ? -EMSGSIZE : 0;
        }
    }
}

int testsrv_command_timeout(testsrv *srv, const char *cmd, char *reply,
                            size_t reply_len, int timeout_ms)
{
    int64_t deadline = testsrv_now_ms() + timeout_ms;
    int fd, rc;

    if (!srv || !cmd || !reply || reply_len == 0 || strchr(cmd, '\n') ||
        timeout_ms < 0)
        return -EINVAL;
    reply[0] = '\0';
    if ((fd = loopback_connect(srv->control_port, deadline)) < 0)
        return fd;
    rc = send_all(fd, cmd, strlen(cmd), deadline);
    if (rc == 0)
        rc = send_all(fd, "\n", 1, deadline);
    if (rc == 0)
        rc = recv_line(fd, reply, reply_len, deadline);
    close(fd);
    return rc;
}

int testsrv_command(testsrv *srv, const char *cmd, char *reply,
                    size_t reply_len)
{
    return testsrv_command_timeout(srv, cmd, reply, reply_len,
                                   TESTSRV_COMMAND_TIMEOUT_MS);
}

/* Runs "<verb>[ <arg>]" and parses a non-negative integer reply. */
static long number_within(testsrv *srv, const char *verb, const char *arg,
                          int timeout_ms)
{
    char cmd[1024], reply[64], *end;
    int n = arg ? snprintf(cmd, sizeof cmd, "%s %s", verb, arg)
                : snprintf(cmd, sizeof cmd, "%s", verb);
    long v;
    int rc;

    if (n < 0 || (size_t)n >= sizeof cmd)
        return -ENAMETOOLONG;
    if ((rc = testsrv_command_timeout(srv, cmd, reply, sizeof reply,
                                      timeout_ms)) < 0)
        return rc;
    errno = 0;
    v = strtol(reply, &end, 10);
    if (end == reply || *end || errno || v < 0)
        return -EPROTO;
    return v;
}

long testsrv_number(testsrv *srv, const char *verb, const char *arg)
{
    return verb ? number_within(srv, verb, arg, TESTSRV_COMMAND_TIMEOUT_MS)
                : -EINVAL;
}

long testsrv_count(testsrv *srv, const char *id)
{
    return id ? testsrv_number(srv, "COUNT", id) : -EINVAL;
}

long testsrv_rejects(testsrv *srv, const char *id)
{
    return id ? testsrv_number(srv, "REJECTS", id) : -EINVAL;
}

long testsrv_conns(testsrv *srv)
{
    return testsrv_number(srv, "CONNS", NULL);
}

static int ok_command(testsrv *srv, const char *cmd)
{
    char reply[128];
    int rc = testsrv_command(srv, cmd, reply, sizeof reply);

    if (rc < 0)
        return rc;
    return strcmp(reply, "OK") == 0 ? 0 : -EPROTO;
}

int testsrv_mode(testsrv *srv, const char *mode)
{
    char cmd[64];

    if (!mode ||
        (size_t)snprintf(cmd, sizeof cmd, "MODE %s", mode) >= sizeof cmd)
        return -EINVAL;
    return ok_command(srv, cmd);
}

int testsrv_reset(testsrv *srv)
{
    return ok_command(srv, "RESET");
}

long testsrv_wait_count(testsrv *srv, const char *id, long n, int timeout_ms)
{
    char arg[1024];

    if (!id || n < 0 || timeout_ms < 0 ||
        (size_t)snprintf(arg, sizeof arg, "%ld %d %s", n, timeout_ms, id) >=
            sizeof arg)
        return -EINVAL;
    /* The server waits up to timeout_ms; give the exchange itself room. */
    return number_within(srv, "WAIT", arg,
                         timeout_ms + TESTSRV_COMMAND_TIMEOUT_MS);
}

int testsrv_wait_idle(testsrv *srv, int timeout_ms)
{
    char cmd[64], reply[64];
    int rc;

    if (timeout_ms < 0)
        return -EINVAL;
    snprintf(cmd, sizeof cmd, "IDLE %d", timeout_ms);
    rc = testsrv_command_timeout(srv, cmd, reply, sizeof reply,
                                 timeout_ms + TESTSRV_COMMAND_TIMEOUT_MS);
    if (rc < 0)
        return rc;
    if (strcmp(reply, "OK") == 0)
        return 0;
    return strncmp(reply, "TIMEOUT", 7) == 0 ? -ETIMEDOUT : -EPROTO;
}

int testsrv_unused_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc;

    if (fd < 0)
        return -errno;
    /* Bound but never listening, then closed: connecting gets a RST, i.e.
     * ECONNREFUSED, until someone else happens to bind the port. */
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        rc = -errno;
    else
        rc = ntohs(sa.sin_port);
    close(fd);
    return rc;
}
