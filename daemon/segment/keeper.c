/* SPDX-License-Identifier: MIT */
/*
 * The segment keeper. A memfd lives only while something holds it, and the
 * daemon must be able to die (kill -9) without taking the host's balances
 * with it: the keeper holds a descriptor of the segment and nothing else.
 * It publishes that descriptor as a symbolic link in the runtime
 * directory, /proc/<keeper>/fd/3, which only our own user (and root) can
 * open: the kernel checks /proc/<pid>/fd as it checks ptrace access. A
 * restarted daemon opens the link and verifies what it gets (owner.c)
 * before adopting it.
 *
 * The keeper is forked from a daemon that may already run threads, so
 * between fork() and _exit() it calls only async-signal-safe functions.
 */
#include "segment/keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "retryd/common.h"

#define KEEPER_FD 3
#define KEEPER_READY_FD 4
/* How often the keeper looks whether the link still names it. */
#define KEEPER_POLL_NS 200000000L

/* "/proc/<pid>/fd/3" without snprintf (not async-signal-safe). */
static size_t link_target(char *buf, pid_t pid)
{
    char digits[24];
    size_t n = 0, len = 0;
    unsigned long v = (unsigned long)pid;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    memcpy(buf, "/proc/", 6);
    len = 6;
    while (n > 0)
        buf[len++] = digits[--n];
    memcpy(buf + len, "/fd/3", 6);
    return len + 5;
}

static bool still_named(const char *link_path, const char *target, size_t len)
{
    char buf[64];
    ssize_t n = readlink(link_path, buf, sizeof(buf));
    return n == (ssize_t)len && memcmp(buf, target, len) == 0;
}

#define KEEPER_NAME "rd-seg-keeper"

/* The daemon's argument strings: contiguous, from argv[0] to the end of
 * the last (the kernel lays them out so). */
static char *title_area;
static size_t title_len;

void keeper_title_area(int argc, char **argv)
{
    if (argc < 1 || argv[0] == NULL)
        return;
    char *end = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
    title_area = argv[0];
    title_len = (size_t)(end - argv[0]);
}

/* The keeper itself: publish the link, report, then wait to be dropped. */
static _Noreturn void keeper_main(const char *link_path, const char *tmp_path)
{
    char target[64];
    size_t len = link_target(target, getpid());
    struct timespec nap = {0, KEEPER_POLL_NS};
    /* Not "retryd", in its name nor its command line: `pkill retryd` or
     * `pkill -f retryd` stopping the daemon must not take the balances
     * with it. memset and memcpy: async-signal-safe. */
    (void)prctl(PR_SET_NAME, KEEPER_NAME, 0, 0, 0);
    if (title_len > 1) {
        size_t n = sizeof(KEEPER_NAME) - 1;
        memset(title_area, 0, title_len);
        memcpy(title_area, KEEPER_NAME, n < title_len ? n : title_len - 1);
    }

    (void)unlink(tmp_path);
    if (symlink(target, tmp_path) < 0 || rename(tmp_path, link_path) < 0) {
        (void)write(KEEPER_READY_FD, "E", 1);
        _exit(1);
    }
    (void)write(KEEPER_READY_FD, "K", 1);
    close(KEEPER_READY_FD);
    while (still_named(link_path, target, len))
        nanosleep(&nap, NULL);
    _exit(0);
}

/* In the forked child: a session of its own, nothing inherited but the
 * segment and the ready pipe (not the daemon's lock, sockets or stdio, so
 * neither a restarted daemon nor a test runner waits on it), then the
 * keeper in a grandchild, so the daemon has no child to reap later. */
static _Noreturn void keeper_child(int memfd, int ready_fd, int null_fd,
                                   const char *link_path, const char *tmp_path)
{
    static char *no_environment[] = {NULL};
    sigset_t none;
    /* No NOTIFY_SOCKET, WATCHDOG_USEC or anything else of the daemon's
     * environment: the keeper outlives the daemon and must never speak to
     * the service manager for it. A pointer store, async-signal-safe where
     * unsetenv() (which takes the environment's lock) is not. */
    environ = no_environment;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL); /* the daemon blocks some */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    /* Out of the way first: either may already sit on 0..4. */
    memfd = fcntl(memfd, F_DUPFD, 10);
    ready_fd = fcntl(ready_fd, F_DUPFD, 10);
    if (memfd < 0 || ready_fd < 0 || setsid() < 0 || dup2(null_fd, 0) < 0 ||
        dup2(null_fd, 1) < 0 || dup2(null_fd, 2) < 0 ||
        dup2(memfd, KEEPER_FD) < 0 || dup2(ready_fd, KEEPER_READY_FD) < 0)
        _exit(1);
    (void)close_range(KEEPER_READY_FD + 1, ~0u, 0);
    (void)fcntl(KEEPER_FD, F_SETFD, 0);
    pid_t pid = fork();
    if (pid == 0)
        keeper_main(link_path, tmp_path);
    _exit(pid < 0 ? 1 : 0);
}

static int wait_ready(int ready_rd, pid_t child, char *why, size_t why_len)
{
    char c = 0;
    int status = 0;
    ssize_t n;
    while ((n = read(ready_rd, &c, 1)) < 0 && errno == EINTR)
        ;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    if (n == 1 && c == 'K')
        return 0;
    snprintf(why, why_len, "the segment keeper could not publish its link");
    return RETRYD_EIO;
}

int keeper_start(const char *link_path, int memfd, char *why, size_t why_len)
{
    char tmp_path[4200];
    int pipefd[2];
    if (snprintf(tmp_path, sizeof(tmp_path), "%s.new", link_path) >=
        (int)sizeof(tmp_path)) {
        snprintf(why, why_len, "segment path too long");
        return RETRYD_EINVAL;
    }
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
        snprintf(why, why_len, "segment keeper: %s", strerror(errno));
        if (null_fd >= 0)
            close(null_fd);
        return RETRYD_EIO;
    }
    pid_t pid = fork();
    if (pid == 0)
        keeper_child(memfd, pipefd[1], null_fd, link_path, tmp_path);
    close(pipefd[1]);
    close(null_fd);
    int r = RETRYD_EIO;
    if (pid < 0)
        snprintf(why, why_len, "cannot fork the segment keeper: %s",
                 strerror(errno));
    else
        r = wait_ready(pipefd[0], pid, why, why_len);
    close(pipefd[0]);
    return r;
}
