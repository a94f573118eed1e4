/* SPDX-License-Identifier: MIT */
/* Test helper: a long-lived child process driven line by line. */
#ifndef RETRYD_TEST_CHILD_H
#define RETRYD_TEST_CHILD_H

#include <stddef.h>
#include <sys/types.h>

typedef struct child {
    pid_t pid;
    int in;  /* we write commands here */
    int out; /* we read replies here */
    char buf[4096];
    size_t len;
} child;

/* fork+exec argv[0] with pipes on stdin and stdout. 0 or -errno. */
int child_start(child *c, char *const argv[]);

/* Send one command line and read one reply line (without the newline)
 * into @p reply, waiting at most @p timeout_ms. 0 or -errno. */
int child_ask(child *c, const char *cmd, char *reply, size_t len,
              int timeout_ms);

/* Close its stdin, wait (bounded), SIGKILL if needed. Accepts a stopped
 * child. Returns the exit code or -signal. */
int child_stop(child *c);

#endif
