/* SPDX-License-Identifier: MIT */
/*
 * What the hostile-neighbour suites share: raw connections that an
 * attacker process holds without criterion (they run in forked children,
 * where an assertion must not unwind into the test runner), dropping to
 * another user, a process's descriptor count, the daemon log's lines, and
 * latency percentiles measured honestly (nearest rank over every sample).
 */
#ifndef RETRYD_TEST_HOSTILE_H
#define RETRYD_TEST_HOSTILE_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* @p size zeroed bytes shared with the processes forked after: a
 * scoreboard the attackers and the test all write. NULL on failure. */
static inline void *rd_shared_board(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p; /* anonymous: already zero */
}

/* fork(), the child killed when the test process ends: an attacker that a
 * failed assertion left behind would hold the test's output open, and
 * ctest would wait for it until its timeout. -1 on failure. */
static inline pid_t rd_fork_attacker(void)
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0 &&
        (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent))
        _exit(99);
    return pid;
}

/* Write @p d's configuration as rd_daemon_write_config() does, but at log
 * level @p level (the harness's is debug): a suite that counts the log's
 * lines runs the daemon as an operator would. 0, or -errno. */
static inline int rd_write_config_at(const char *config, const char *runtime,
                                     const char *level, const char *extra)
{
    FILE *f = fopen(config, "we");
    if (f == NULL)
        return -errno;
    fprintf(f, "[retryd]\nruntime_dir = %s\nlog_level = %s\n%s\n", runtime,
            level, extra ? extra : "");
    return fclose(f) == 0 ? 0 : -errno;
}

/* A stream connection to @p path, non-blocking when @p nonblock; the
 * descriptor, or a negative errno (EAGAIN: the listen backlog is full). */
static inline int rd_raw_connect(const char *path, int nonblock)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    int fd =
        socket(AF_UNIX,
               SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* Become user @p uid and group @p gid for good (no supplementary groups):
 * 0, or -errno. Needs root. */
static inline int rd_become(uid_t uid, gid_t gid)
{
    if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
        return -errno;
    return 0;
}

/* Open descriptors of process @p pid, or -1. */
static inline int rd_fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *dir = opendir(path);
    if (dir == NULL)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(dir);
    return n;
}

/* Lines of file @p path (the daemon's log), or -1. */
static inline long rd_file_lines(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    long n = 0;
    for (int ch; (ch = getc(f)) != EOF;)
        n += ch == '\n';
    fclose(f);
    return n;
}

/* Lines of file @p path that hold both @p a and @p b (b may be NULL). */
static inline long rd_file_lines_with(const char *path, const char *a,
                                      const char *b)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    char line[2048];
    long n = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, a) != NULL && (b == NULL || strstr(line, b) != NULL);
    fclose(f);
    return n;
}

static inline uint64_t rd_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int rd__cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The @p pct-th percentile (nearest rank) of @p n samples; sorts them. */
static inline uint64_t rd_percentile(uint64_t *v, size_t n, double pct)
{
    qsort(v, n, sizeof(*v), rd__cmp_u64);
    size_t rank = (size_t)((pct / 100.0) * (double)n + 0.999999);
    if (rank < 1)
        rank = 1;
    return v[(rank > n ? n : rank) - 1];
}

#endif
