/* SPDX-License-Identifier: MIT */
/*
 * What the plain programs (check.h) that fork their clients share: a
 * child that runs one function and never outlives the test, and memory
 * that every child forked later sees (for the counts and flags the test
 * checks against).
 */
#ifndef RETRYD_TEST_CHECK_FORK_H
#define RETRYD_TEST_CHECK_FORK_H

#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "check.h"

/* Run @p fn(@p i) in a forked process, which exits with its return. */
static inline pid_t check_fork(int (*fn)(int), int i)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        /* Never outlive the test, whatever stops it. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1)
            _exit(1);
        int rc = fn(i);
        fflush(NULL); /* _exit() does not */
        _exit(rc);
    }
    return pid;
}

/* @p len bytes of zeroed memory shared with every process forked later. */
static inline void *check_shared(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap");
    return p;
}

#endif
