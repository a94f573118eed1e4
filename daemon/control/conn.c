/* SPDX-License-Identifier: MIT */
/*
 * The control wing's connections: each one's state, its deadlines (one
 * FIFO per timeout, daemon.h), the replies queued for it and written when
 * the kernel takes them, the process slot it attached. The accept loop
 * (accept.c) opens them, the protocol operations (ops.c) read and answer
 * them; nothing here waits for a peer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "control/conn.h"
#include "core/log.h"
#include "retryd/common.h"
#include "shared/frame.h"

/* A deadline's length, from the configuration (hello_timeout_ms, ...). A
 * reload that changes one applies to deadlines started after it; until
 * those started before are gone, a queue may be out of order by the
 * change, so some expire that much late, none early. */
static uint64_t timer_ms(const server *d, enum conn_timer k)
{
    const config *cfg = d->cfg;
    switch (k) {
    case CONN_T_HELLO:
        return cfg->hello_timeout_ms;
    case CONN_T_FRAME:
        return cfg->frame_timeout_ms;
    case CONN_T_IDLE:
        return cfg->idle_timeout_ms;
    default:
        return cfg->write_timeout_ms;
    }
}

uint64_t conn_now_ns(void)
{
    return retryd__clock_monotonic_ns();
}

/* --- deadlines ----------------------------------------------------------- */

void conn_timer_stop(server *d, conn *c, enum conn_timer k)
{
    if (!conn_timer_queued(c, k))
        return;
    retryd__queue_remove(&c->t[k].node);
    d->timers[k].n--;
}

/* (Re)start timer @p k of @p c from now: to the tail of its queue. */
void conn_timer_start(server *d, conn *c, enum conn_timer k)
{
    conn_timer_stop(d, c, k);
    c->t[k].due_ns = conn_now_ns() + timer_ms(d, k) * 1000000u;
    retryd__queue_insert_tail(&d->timers[k].q, &c->t[k].node);
    d->timers[k].n++;
}

conn *conn_timer_first(const server *d, enum conn_timer k)
{
    const retryd_queue *q = &d->timers[k].q;
    return retryd__queue_empty(q) ? NULL
                                  : CONN_OF_TIMER(retryd__queue_head(q), k);
}

void control_init(server *d)
{
    retryd__queue_init(&d->conns);
    retryd__queue_init(&d->dead);
    for (int k = 0; k < CONN_TIMERS; k++) {
        retryd__queue_init(&d->timers[k].q);
        d->timers[k].n = 0;
    }
}

/* Traffic on an unattached connection: it is the most recently active. */
void conn_active(server *d, conn *c)
{
    if (conn_timer_queued(c, CONN_T_IDLE))
        conn_timer_start(d, c, CONN_T_IDLE);
}

/* --- connections --------------------------------------------------------- */

void conn_free(server *d, conn *c)
{
    retryd__queue_remove(&c->link);
    for (int k = 0; k < CONN_TIMERS; k++)
        conn_timer_stop(d, c, (enum conn_timer)k);
    epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    frame_in_reset(&c->in);
    free(c->out);
    c->out = NULL;
    /* Other events of the current epoll batch may still point at it: it
     * is freed when the batch is done (control_reap). */
    c->dead = true;
    retryd__queue_insert_tail(&d->dead, &c->link);
}

void control_reap(server *d)
{
    for (retryd_queue *n; (n = retryd__queue_pop(&d->dead)) != NULL;)
        free(RETRYD_QUEUE_DATA(n, conn, link));
}

bool control_dead(const conn *c)
{
    return c->dead;
}

void conn_close(server *d, conn *c)
{
    if (c->slot >= 0) {
        uint32_t slot = (uint32_t)c->slot;
        d->procs[slot].conn = NULL;
        log_debug("pid %d uid %u detached (process slot %u)", (int)c->pid,
                  (unsigned)c->uid, slot);
        daemon_release_process(d, slot);
    }
    conn_free(d, c);
}

/* Watch for output while replies wait, else for input (unless closing).
 * No request is read while a reply waits: a peer that does not read its
 * replies stops being served once the kernel's buffer is full, costs no
 * work, and is closed at write_timeout_ms; CONTROL_OUTPUT_MAX is
 * the backstop. */
static void conn_watch(server *d, conn *c)
{
    uint32_t want = c->closing ? 0 : EPOLLIN | EPOLLRDHUP;
    if (c->out_off < c->out_len)
        want = EPOLLOUT;
    if (want == c->events)
        return;
    struct epoll_event ev = {.events = want, .data.ptr = &c->w};
    if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->events = want;
}

/* One send of out[off, end), with the descriptor to pass when it rides on
 * the first of these bytes. */
static ssize_t send_part(conn *c, size_t end, bool with_fd)
{
    return retryd__send_with_fd(c->fd, c->out + c->out_off, end - c->out_off,
                                with_fd ? c->pass_fd : -1);
}

/*
 * Hand the kernel what it takes of the queued replies, never waiting: the
 * rest waits for EPOLLOUT, under CONN_T_WRITE. Returns 0, or < 0 when the
 * connection is to be closed (the peer is gone, or it was closing and all
 * is sent).
 */
int conn_flush(server *d, conn *c)
{
    bool progress = false;
    while (c->out_off < c->out_len) {
        bool pass = c->pass_fd >= 0;
        size_t end = pass && c->out_off < c->pass_at ? c->pass_at : c->out_len;
        ssize_t w = send_part(c, end, pass && c->out_off == c->pass_at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (w <= 0)
            return -1; /* EPIPE, ECONNRESET: gone */
        if (pass && c->out_off == c->pass_at)
            c->pass_fd = -1; /* it went with the first byte */
        c->out_off += (size_t)w;
        progress = true;
    }
    if (c->out_off == c->out_len) {
        c->out_off = c->out_len = 0;
        conn_timer_stop(d, c, CONN_T_WRITE);
        if (c->closing)
            return -1;
    } else if (progress || !conn_timer_queued(c, CONN_T_WRITE)) {
        conn_timer_start(d, c, CONN_T_WRITE);
    }
    if (progress)
        conn_active(d, c);
    conn_watch(d, c);
    return 0;
}

/* A new authorised connection: watched, and under its hello and idle
 * deadlines. */
void conn_open(server *d, int fd, const struct ucred *cr)
{
    conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return;
    }
    *c = (conn){.fd = fd,
                .w = {.kind = WATCH_CONN, .ptr = c},
                .events = EPOLLIN | EPOLLRDHUP,
                .pid = cr->pid,
                .uid = cr->uid,
                .slot = -1,
                .pass_fd = -1};
    /* In no list yet: a zeroed node is not an unlinked one. */
    retryd__queue_init(&c->link);
    for (int k = 0; k < CONN_TIMERS; k++)
        retryd__queue_init(&c->t[k].node);
    int sndbuf = CONTROL_SNDBUF;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    struct epoll_event ev = {.events = c->events, .data.ptr = &c->w};
    if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        free(c);
        return;
    }
    retryd__queue_insert_head(&d->conns, &c->link);
    conn_timer_start(d, c, CONN_T_HELLO);
    conn_timer_start(d, c, CONN_T_IDLE);
}

/* --- replies ------------------------------------------------------------- */

/* Queue @p rep (with @p pass_fd riding on its first byte when >= 0); the
 * caller's turn ends with conn_flush(). < 0 when the peer let more than
 * CONTROL_OUTPUT_MAX pile up: the connection is closed. */
int conn_reply(conn *c, Retryd__ControlReply *rep, int pass_fd)
{
    size_t n = protobuf_c_message_get_packed_size(&rep->base);
    size_t need = RETRYD_FRAME_HEADER + n;
    if (c->out_off > 0) { /* what was sent makes room at the front */
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        if (c->pass_fd >= 0)
            c->pass_at -= c->out_off;
        c->out_off = 0;
    }
    if (c->out_len + need > CONTROL_OUTPUT_MAX ||
        (pass_fd >= 0 && c->pass_fd >= 0)) {
        log_limited(LOG_WARN,
                    "pid %d uid %u does not read its replies: closing",
                    (int)c->pid, (unsigned)c->uid);
        c->overflow = true;
        return RETRYD_EFULL;
    }
    uint8_t *grown = realloc(c->out, c->out_len + need);
    if (grown == NULL)
        return RETRYD_ENOMEM;
    c->out = grown;
    retryd__frame_pack(&rep->base, n, c->out + c->out_len);
    if (pass_fd >= 0) {
        c->pass_fd = pass_fd;
        c->pass_at = c->out_len;
    }
    c->out_len += need;
    return 0;
}

int conn_reply_error(conn *c, int err, const char *message)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    rep.error = err;
    rep.message = (char *)(uintptr_t)message;
    return conn_reply(c, &rep, -1);
}

int daemon_watch_process(server *d, uint32_t slot, int pidfd)
{
    proc_track *t = &d->procs[slot];
    t->w = (watch){.kind = WATCH_PIDFD, .slot = slot};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &t->w};
    if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, pidfd, &ev) < 0)
        return -errno;
    t->pidfd = pidfd;
    d->watched++;
    return 0;
}

void daemon_release_process(server *d, uint32_t slot)
{
    proc_track *t = &d->procs[slot];
    if (t->pidfd >= 0) {
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, t->pidfd, NULL);
        close(t->pidfd);
        t->pidfd = -1;
        d->watched--;
    }
    if (t->conn != NULL) {
        conn *c = t->conn;
        t->conn = NULL;
        c->slot = -1;
        conn_free(d, c);
    }
    owner_process_release(&d->seg, slot);
}
