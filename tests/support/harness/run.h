/* SPDX-License-Identifier: MIT */
/* Test helper: run a program as a real child process and capture it. */
#ifndef RETRYD_TEST_RUN_H
#define RETRYD_TEST_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct run_result {
    int exit_code; /* the child's exit status, or -signal when killed */
    char out[65536];
    size_t out_len;
    char err[16384];
    size_t err_len;
} run_result;

/*
 * fork+exec argv[0] (a path) with argv and stdin from /dev/null, wait for
 * it at most timeout_ms
 * (then SIGKILL), and capture stdout and stderr (NUL-terminated, truncated
 * at the buffer sizes). Returns 0, or a negative errno when the child could
 * not be started or waited for.
 */
int run_program(char *const argv[], int timeout_ms, run_result *ret);

/* Monotonic milliseconds: the clock of every bound in the harness. */
long long rd_now_ms(void);

/*
 * Reap child @p pid: wait for its exit at most @p timeout_ms, checking
 * every millisecond, then SIGKILL it (a stopped child too) and reap it.
 * Returns its exit code, -signal when a signal ended it, or a negative
 * errno when it cannot be waited for.
 */
int rd_reap(pid_t pid, int timeout_ms);

/* The path of program @p name on $PATH (the default path when it is
 * unset) into @p out; false when there is none. */
bool rd_find_program(const char *name, char *out, size_t cap);

/* A loopback TCP port nothing listens on now (the kernel's pick), for
 * @p family AF_INET or AF_INET6; 0 when there is none (no IPv6). */
int rd_free_port(int family);

/* Remove @p dir and everything under it (a test's temporary directory). */
void rd_remove_tree(const char *dir);

#endif
