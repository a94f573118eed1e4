/* SPDX-License-Identifier: MIT */
#include "redis.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Whether it answers PING (PONG, or NOAUTH when it wants a login). */
static bool answers(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = false;
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        write(fd, "PING\r\n", 6) == 6) {
        char buf[64] = {0};
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        ok = n > 0 &&
             (strncmp(buf, "+PONG", 5) == 0 || strncmp(buf, "-NOAUTH", 7) == 0);
    }
    if (fd >= 0)
        close(fd);
    return ok;
}

static int spawn(rd_redis *r)
{
    char port[16];
    const char *argv[RD_REDIS_MAX_ARGS + 16];
    size_t n = 0;
    snprintf(port, sizeof(port), "%d", r->port);
    const char *own[] = {r->bin,      "--port", port,   "--bind",
                         "127.0.0.1", "--save", "",     "--appendonly",
                         "no",        "--dir",  r->dir, "--daemonize",
                         "no"};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        argv[n++] = own[i];
    for (size_t i = 0; r->extra[i] != NULL; i++)
        argv[n++] = r->extra[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
            _exit(127);
        int log = open(r->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log >= 0) {
            dup2(log, 1);
            dup2(log, 2);
        }
        execv(r->bin, (char *const *)(uintptr_t)argv);
        _exit(127);
    }
    r->pid = pid;
    long long deadline = rd_now_ms() + RD_REDIS_READY_MS;
    while (rd_now_ms() < deadline) {
        if (answers(r->port))
            return 0;
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            r->pid = 0;
            return -ECHILD; /* the port was taken since, or bad arguments */
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    rd_redis_kill(r);
    return -ETIMEDOUT;
}

bool rd_redis_installed(void)
{
    char bin[256];
    return rd_find_program("redis-server", bin, sizeof(bin));
}

int rd_redis_start(rd_redis *r, int port, const char *const *extra)
{
    memset(r, 0, sizeof(*r));
    if (!rd_find_program("redis-server", r->bin, sizeof(r->bin)))
        return -ENOENT;
    size_t n = 0;
    for (; extra != NULL && extra[n] != NULL && n < RD_REDIS_MAX_ARGS; n++)
        r->extra[n] = extra[n];
    r->extra[n] = NULL;
    snprintf(r->dir, sizeof(r->dir), "/tmp/retryd-redis-XXXXXX");
    if (mkdtemp(r->dir) == NULL)
        return -errno;
    snprintf(r->log, sizeof(r->log), "%s/redis.log", r->dir);
    /* A port the kernel had free may be taken before redis binds it (the
     * suites run two at a time): another one then. */
    int rc = -EADDRINUSE;
    for (int tries = 0; tries < 5 && rc == -EADDRINUSE; tries++) {
        r->port = port > 0 ? port : rd_free_port(AF_INET);
        if (r->port == 0)
            return -EADDRNOTAVAIL;
        rc = spawn(r);
        if (rc == -ECHILD && port == 0)
            rc = -EADDRINUSE;
    }
    snprintf(r->addr, sizeof(r->addr), "127.0.0.1:%d", r->port);
    return rc;
}

int rd_redis_restart(rd_redis *r)
{
    rd_redis_kill(r);
    return spawn(r);
}

void rd_redis_kill(rd_redis *r)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, SIGKILL);
    rd_reap(r->pid, 10000);
    r->pid = 0;
}

void rd_redis_cleanup(rd_redis *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGTERM);
        kill(r->pid, SIGCONT);
        rd_reap(r->pid, 10000);
        r->pid = 0;
    }
    if (r->dir[0] != '\0')
        rd_remove_tree(r->dir);
    r->dir[0] = '\0';
}

int rd_redis_cli(const rd_redis *r, run_result *res, const char *arg, ...)
{
    char cli[256], port[16];
    char *argv[24];
    size_t n = 0;
    if (!rd_find_program("redis-cli", cli, sizeof(cli)))
        return -ENOENT;
    snprintf(port, sizeof(port), "%d", r->port);
    argv[n++] = cli;
    argv[n++] = (char *)(uintptr_t) "-p";
    argv[n++] = port;
    va_list ap;
    va_start(ap, arg);
    for (const char *a = arg; a != NULL && n < 20; a = va_arg(ap, const char *))
        argv[n++] = (char *)(uintptr_t)a;
    va_end(ap);
    argv[n] = NULL;
    int rc = run_program(argv, 10000, res);
    return rc < 0 ? rc : res->exit_code;
}
