/* SPDX-License-Identifier: MIT */
#include "run.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long long rd_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void drain(int fd, char *buf, size_t cap, size_t *len, int *open_fd)
{
    char scratch[4096];
    ssize_t n = read(fd, scratch, sizeof(scratch));

    if (n <= 0) {
        *open_fd = 0;
        return;
    }
    size_t room = cap - 1 - *len;
    size_t take = (size_t)n < room ? (size_t)n : room;
    memcpy(buf + *len, scratch, take);
    *len += take;
    buf[*len] = '\0';
}

int run_program(char *const argv[], int timeout_ms, run_result *ret)
{
    int out[2], err[2], status;
    pid_t pid;

    memset(ret, 0, sizeof(*ret));
    if (pipe2(out, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(err, O_CLOEXEC) < 0) {
        int e = -errno;
        close(out[0]);
        close(out[1]);
        return e;
    }
    pid = fork();
    if (pid < 0) {
        int e = -errno;
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        return e;
    }
    if (pid == 0) {
        /* Never the test's own stdin: a program that reads it would wait
         * for the test runner's terminal. */
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null >= 0)
            dup2(null, 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        execv(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);

    int out_open = 1, err_open = 1;
    long long deadline = rd_now_ms() + timeout_ms;
    while (out_open || err_open) {
        struct pollfd p[2] = {{out_open ? out[0] : -1, POLLIN, 0},
                              {err_open ? err[0] : -1, POLLIN, 0}};
        long long left = deadline - rd_now_ms();
        if (left <= 0 || poll(p, 2, (int)left) == 0) {
            kill(pid, SIGKILL);
            break;
        }
        if (p[0].revents)
            drain(out[0], ret->out, sizeof(ret->out), &ret->out_len, &out_open);
        if (p[1].revents)
            drain(err[0], ret->err, sizeof(ret->err), &ret->err_len, &err_open);
    }
    close(out[0]);
    close(err[0]);
    if (waitpid(pid, &status, 0) < 0)
        return -errno;
    ret->exit_code =
        WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return 0;
}

int rd_reap(pid_t pid, int timeout_ms)
{
    int status = 0;
    long long deadline = rd_now_ms() + timeout_ms;
    pid_t r;

    while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
        if (rd_now_ms() > deadline) {
            kill(pid, SIGKILL);
            r = waitpid(pid, &status, 0);
            break;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (r != pid)
        return -errno;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

bool rd_find_program(const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    if (path == NULL || *path == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path != '\0') {
        size_t n = strcspn(path, ":");
        int w = snprintf(out, cap, "%.*s/%s", (int)n, path, name);
        if (n > 0 && w > 0 && (size_t)w < cap && access(out, X_OK) == 0)
            return true;
        path += n + (path[n] == ':');
    }
    return false;
}

int rd_free_port(int family)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        len = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof(*a);
    }
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    close(fd);
    return ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                    : ((struct sockaddr_in *)&ss)->sin_port);
}

static int remove_one(const char *path, const struct stat *st, int flag,
                      struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

void rd_remove_tree(const char *dir)
{
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}
