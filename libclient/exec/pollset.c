/* SPDX-License-Identifier: MIT */
/* retryd_multi_run's poll set (pollset.h). */
#include "exec/pollset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "retryd/common.h"

static int grow(pollset *ps, int fd)
{
    if ((size_t)fd >= ps->cap_fd) {
        size_t cap = ps->cap_fd ? ps->cap_fd : 64;
        while (cap <= (size_t)fd)
            cap *= 2;
        size_t *s = realloc(ps->slot_of_fd, cap * sizeof(*s));
        if (s == NULL)
            return RETRYD_ENOMEM;
        memset(s + ps->cap_fd, 0, (cap - ps->cap_fd) * sizeof(*s));
        ps->slot_of_fd = s;
        ps->cap_fd = cap;
    }
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 16;
        struct pollfd *p = realloc(ps->pfd, cap * sizeof(*p));
        if (p == NULL)
            return RETRYD_ENOMEM;
        ps->pfd = p;
        if ((p = realloc(ps->ready, cap * sizeof(*p))) == NULL)
            return RETRYD_ENOMEM;
        ps->ready = p;
        ps->cap = cap;
    }
    return 0;
}

int retryd__pollset_watch(pollset *ps, int fd, int what)
{
    if (fd < 0)
        return -1;
    size_t slot = (size_t)fd < ps->cap_fd ? ps->slot_of_fd[fd] : 0;
    short ev = (short)((what & CURL_POLL_IN ? POLLIN : 0) |
                       (what & CURL_POLL_OUT ? POLLOUT : 0));
    if (what == CURL_POLL_REMOVE) {
        if (slot == 0)
            return 0;
        struct pollfd last = ps->pfd[--ps->n];
        ps->slot_of_fd[fd] = 0;
        if (slot - 1 < ps->n) {
            ps->pfd[slot - 1] = last;
            ps->slot_of_fd[last.fd] = slot;
        }
        return 0;
    }
    if (slot == 0) {
        if (grow(ps, fd) < 0)
            return -1;
        slot = ++ps->n;
        ps->slot_of_fd[fd] = slot;
        ps->pfd[slot - 1].fd = fd;
    }
    ps->pfd[slot - 1].events = ev;
    return 0;
}

int retryd__pollset_wait(pollset *ps, int ms)
{
    int n = poll(ps->pfd, ps->n, ms);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    int k = 0;
    for (size_t i = 0; i < ps->n && k < n; i++)
        if (ps->pfd[i].revents != 0)
            ps->ready[k++] = ps->pfd[i];
    return k;
}

int retryd__pollset_events(short revents)
{
    return (revents & (POLLIN | POLLHUP | POLLERR) ? CURL_CSELECT_IN : 0) |
           (revents & (POLLOUT | POLLERR) ? CURL_CSELECT_OUT : 0) |
           (revents & POLLERR ? CURL_CSELECT_ERR : 0);
}

void retryd__pollset_free(pollset *ps)
{
    free(ps->pfd);
    free(ps->ready);
    free(ps->slot_of_fd);
}
