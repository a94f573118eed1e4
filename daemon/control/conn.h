/* SPDX-License-Identifier: MIT */
/*
 * The control wing's connections (conn.c), shared by its accept loop
 * (accept.c) and its protocol operations (ops.c); nothing outside the wing
 * includes this.
 */
#ifndef RETRYD_CONTROL_CONN_H
#define RETRYD_CONTROL_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "control/control.h"
#include "core/frame_io.h"
#include "daemon.h"

struct conn {
    retryd_queue link; /* in d->conns; once closed, in d->dead */
    bool dead;
    bool greeted;
    bool closing;  /* answered for the last time: close once flushed */
    bool overflow; /* its unread replies went over CONTROL_OUTPUT_MAX */
    int fd;
    watch w;
    uint32_t events; /* what epoll watches for it now */
    pid_t pid;
    uid_t uid;
    int32_t slot; /* process slot attached through this connection, or -1 */
    frame_in in;  /* the frame being read */
    /* Replies not yet taken by the kernel, at most CONTROL_OUTPUT_MAX. */
    uint8_t *out;
    size_t out_off, out_len;
    size_t pass_at; /* the byte of out the passed descriptor rides on */
    int pass_fd;    /* -1: none to pass */
    struct {
        retryd_queue node; /* in d->timers[k] while that deadline runs */
        uint64_t due_ns;
    } t[CONN_TIMERS];
    char client[64];
};

uint64_t conn_now_ns(void);
/* (Re)start or stop deadline @p k of @p c. */
void conn_timer_start(server *d, conn *c, enum conn_timer k);
void conn_timer_stop(server *d, conn *c, enum conn_timer k);
/* Traffic on an unattached connection: it is the most recently active. */
void conn_active(server *d, conn *c);
/* A new authorised connection: watched, under its hello and idle
 * deadlines. */
void conn_open(server *d, int fd, const struct ucred *cr);
/* Closed now, freed after the epoll batch (control_reap); conn_close()
 * also releases the process slot it attached. */
void conn_free(server *d, conn *c);
void conn_close(server *d, conn *c);
/* What the kernel takes of the queued replies: 0, or < 0 to close. */
int conn_flush(server *d, conn *c);
/* Queue a reply (with @p pass_fd riding on its first byte when >= 0): 0,
 * or < 0 when the peer let more than CONTROL_OUTPUT_MAX pile up. */
int conn_reply(conn *c, Retryd__ControlReply *rep, int pass_fd);
int conn_reply_error(conn *c, int err, const char *message);

/* The connection whose deadline @p k is the first of its queue, or NULL. */
conn *conn_timer_first(const server *d, enum conn_timer k);
/* Whether deadline @p k of @p c runs. */
static inline bool conn_timer_queued(const conn *c, enum conn_timer k)
{
    return retryd__queue_linked(&c->t[k].node);
}

/* The connection of node @p n of d->timers[@p k]. */
#define CONN_OF_TIMER(n, k) RETRYD_QUEUE_DATA(n, conn, t[k].node)

#endif
