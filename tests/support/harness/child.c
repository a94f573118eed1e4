/* SPDX-License-Identifier: MIT */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

int child_start(child *c, char *const argv[])
{
    int in[2], out[2];
    memset(c, 0, sizeof(*c));
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
        return -errno;
    c->pid = fork();
    if (c->pid < 0)
        return -errno;
    if (c->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execv(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c->in = in[1];
    c->out = out[0];
    return 0;
}

int child_ask(child *c, const char *cmd, char *reply, size_t len,
              int timeout_ms)
{
    size_t n = strlen(cmd);
    if (write(c->in, cmd, n) != (ssize_t)n || write(c->in, "\n", 1) != 1)
        return -EPIPE;
    long long deadline = rd_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        if (nl != NULL) {
            size_t l = (size_t)(nl - c->buf);
            size_t copy = l < len - 1 ? l : len - 1;
            memcpy(reply, c->buf, copy);
            reply[copy] = '\0';
            memmove(c->buf, nl + 1, c->len - l - 1);
            c->len -= l + 1;
            return 0;
        }
        long long left = deadline - rd_now_ms();
        struct pollfd p = {.fd = c->out, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            return -ETIMEDOUT;
        ssize_t r = read(c->out, c->buf + c->len, sizeof(c->buf) - c->len);
        if (r <= 0)
            return -EPIPE;
        c->len += (size_t)r;
    }
}

int child_stop(child *c)
{
    if (c->pid <= 0)
        return 0;
    close(c->in);
    close(c->out);
    int code = rd_reap(c->pid, 10000);
    c->pid = 0;
    return code;
}
