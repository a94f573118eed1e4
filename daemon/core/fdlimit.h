/* SPDX-License-Identifier: MIT */
/*
 * Running out of file descriptors (docs/daemon.md, "Limits"), as nginx and
 * systemd handle it. At start the daemon raises its soft RLIMIT_NOFILE to
 * the hard limit (fd_limit_raise()) and says how many attached processes
 * that leaves room for. Each listening socket accepts through an
 * accept_guard, which keeps one spare descriptor: when accept4() fails
 * with EMFILE or ENFILE the connection would stay in the backlog, and a
 * level-triggered epoll would report it again at once, for ever (the loop
 * spun at 100 % CPU and the peer waited for a reply that never came). The
 * guard instead closes its spare, takes the connection, tells it why (the
 * caller's refusal) and closes it; when even that fails it stops watching
 * the socket for a back-off that doubles from ACCEPT_PAUSE_MIN_MS to
 * ACCEPT_PAUSE_MAX_MS, so the thread sleeps instead of spinning. Either
 * way one rate-limited line says so.
 */
#ifndef RETRYD_FDLIMIT_H
#define RETRYD_FDLIMIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "core/log.h"

#define ACCEPT_PAUSE_MIN_MS 10
#define ACCEPT_PAUSE_MAX_MS 1000

/*
 * Raise the soft descriptor limit to the hard one. Returns the soft limit
 * now in force; *ret_before is the one inherited. Never fails: a limit it
 * cannot raise is kept (and told by the caller's start line).
 */
uint64_t fd_limit_raise(uint64_t *ret_before);

/* The descriptors this process has open now (/proc/self/fd), or 0. */
unsigned fd_open_count(void);

typedef struct accept_guard {
    const char *what; /* the socket, for the log: "control", "stats" */
    int listen_fd;
    int epfd;              /* the epoll set that watches listen_fd */
    struct epoll_event ev; /* how it watches it, to watch it again */
    int spare;             /* the reserved descriptor, -1 while used */
    uint64_t resume_ns;    /* 0: watched; else when to watch it again */
    unsigned pause_ms;     /* the next pause's length */
    /* Called with a connection taken on the spare, before it is closed:
     * tell the peer why (NULL: close it unanswered). */
    void (*refuse)(int fd, void *arg);
    void *arg;
    log_limit log; /* one window per socket: one flooded hides no other */
} accept_guard;

/* Reserve @p g's spare descriptor for @p listen_fd, watched in @p epfd as
 * @p ev says. 0, or a negated errno. */
int accept_guard_init(accept_guard *g, const char *what, int listen_fd,
                      int epfd, struct epoll_event ev);
void accept_guard_close(accept_guard *g);

/*
 * accept4(2) on the guarded socket (SOCK_NONBLOCK | SOCK_CLOEXEC): the
 * descriptor; -EMFILE when out of descriptors a connection was taken on
 * the spare and refused (call again: the next may be refused too, so the
 * backlog drains with answers); -EAGAIN when there is nothing more to do
 * this turn (the backlog is empty, or the socket was paused); or another
 * negated errno from accept4().
 */
int accept_guarded(accept_guard *g, struct sockaddr *sa, socklen_t *len);

/* Milliseconds until a paused socket is watched again (-1: not paused);
 * at or past that time, watch it again (and take a spare back). */
int accept_guard_timeout_ms(accept_guard *g);

#endif
