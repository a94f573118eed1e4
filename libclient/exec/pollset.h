/* SPDX-License-Identifier: MIT */
/*
 * retryd_multi_run's own poll(2) set, kept by libcurl's socket callback
 * when the caller brings no event loop (multi.c). A leaf of the executor:
 * it knows libcurl's CURL_POLL_* and CURL_CSELECT_* values and nothing of
 * calls or transfers.
 */
#ifndef RETRYD_EXEC_POLLSET_H
#define RETRYD_EXEC_POLLSET_H

#include <poll.h>
#include <stddef.h>

typedef struct pollset {
    struct pollfd *pfd;   /* the descriptors watched, n of them */
    struct pollfd *ready; /* after a wait: the ready ones, copied */
    size_t n, cap;
    size_t *slot_of_fd; /* fd -> index in pfd + 1, 0: not watched */
    size_t cap_fd;
} pollset;

/* libcurl's socket callback, as a poll set: @p what (CURL_POLL_IN, _OUT,
 * _INOUT or _REMOVE) for @p fd. 0, or -1 (no memory, or a bad fd), which
 * libcurl takes as the callback's failure. */
int retryd__pollset_watch(pollset *ps, int fd, int what);

/* One poll(2) of at most @p ms (-1: no bound). The ready descriptors are
 * copied to ps->ready (an action on one may change the set); their count,
 * 0 after EINTR, or a negative errno. */
int retryd__pollset_wait(pollset *ps, int ms);

/* poll's @p revents as libcurl's CURL_CSELECT_* bits. */
int retryd__pollset_events(short revents);

/* Frees what @p ps holds (not @p ps). */
void retryd__pollset_free(pollset *ps);

#endif
