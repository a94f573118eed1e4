/* SPDX-License-Identifier: MIT */
/*
 * The control socket's accept loop: who may connect, and how many.
 *
 * Every peer is identified by the kernel (SO_PEERCRED, SO_PEERGROUPS) and
 * checked against the configured users and groups when it is accepted: an
 * unauthorised one is refused at once and never counted. Frames are
 * length-checked before they are read (frame.h). A peer that sends
 * garbage gets an error reply and loses its connection.
 *
 * Nothing here waits for a peer: sockets are non-blocking, input is read
 * into a per-connection frame buffer, replies are queued (at most
 * CONTROL_OUTPUT_MAX) and written when epoll says the socket takes them.
 * Every unfinished thing a peer can leave (no hello, half a frame, unread
 * replies, an idle connection) has a deadline (daemon.h), and what it can
 * hold (connections without a process slot) is limited per user and per
 * process; so no peer can stop the daemon serving the others.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/conn.h"
#include "core/fdlimit.h"
#include "core/log.h"
#include "core/peer.h"
#include "retryd.pb-c.h"
#include "retryd/common.h"
#include "shared/frame.h"

static const char *const timer_name[CONN_TIMERS] = {
    [CONN_T_HELLO] = "no hello in time",
    [CONN_T_FRAME] = "a frame left unfinished",
    [CONN_T_IDLE] = "idle without a process slot",
    [CONN_T_WRITE] = "replies left unread",
};

/* --- admission ----------------------------------------------------------- */

/* Unattached connections of @p uid (*ret_uid) and, of those, of @p pid
 * (*ret_pid): one pass over the pool. */
static void count_unattached(const server *d, uid_t uid, pid_t pid,
                             unsigned *ret_uid, unsigned *ret_pid)
{
    unsigned nu = 0, np = 0;
    RETRYD_QUEUE_FOREACH(n, &d->timers[CONN_T_IDLE].q)
    {
        const conn *c = CONN_OF_TIMER(n, CONN_T_IDLE);
        if (c->uid == uid) {
            nu++;
            np += c->pid == pid;
        }
    }
    *ret_uid = nu;
    *ret_pid = np;
}

/* A holder of unattached connections: a user or a process. */
typedef struct holder {
    uint32_t id;
    unsigned n;
    conn *oldest; /* its least recently active connection */
} holder;

/*
 * The biggest holder of unattached connections, by user (@p by_uid) or by
 * process, among @p uid's (every user's when @p any_uid); ties go to the
 * one whose oldest is least recently active. One pass over the pool (the
 * idle queue runs from least to most recently active) with a table of at
 * most connections_unattached holders: it runs for every admission
 * under a connect storm, so it must stay cheap.
 */
static holder biggest(const server *d, bool any_uid, uid_t uid, bool by_uid)
{
    holder h[CONFIG_UNATTACHED_MAX], best = {0};
    size_t n = 0;
    RETRYD_QUEUE_FOREACH(node, &d->timers[CONN_T_IDLE].q)
    {
        conn *c = CONN_OF_TIMER(node, CONN_T_IDLE);
        if (!any_uid && c->uid != uid)
            continue;
        uint32_t id = by_uid ? (uint32_t)c->uid : (uint32_t)c->pid;
        size_t i = 0;
        while (i < n && h[i].id != id)
            i++;
        if (i == n && n == CONFIG_UNATTACHED_MAX)
            continue;
        if (i == n)
            h[n++] = (holder){.id = id, .oldest = c};
        h[i].n++;
    }
    for (size_t i = 0; i < n; i++)
        if (h[i].n > best.n)
            best = h[i];
    return best;
}

/*
 * The connection to evict among @p uid's unattached ones (any uid's when
 * @p any_uid: then of the user with the most): the least recently active
 * one of the process with the most. *ret_held is the count of the holder
 * the choice was made among (the user when @p any_uid, else the process).
 */
static conn *pick_victim(const server *d, bool any_uid, uid_t uid,
                         unsigned *ret_held)
{
    if (any_uid) {
        holder u = biggest(d, true, 0, true);
        *ret_held = u.n;
        return u.n > 0 ? biggest(d, false, (uid_t)u.id, false).oldest : NULL;
    }
    holder p = biggest(d, false, uid, false);
    *ret_held = p.n;
    return p.oldest;
}

/*
 * Whether taking one connection from a holder of @p held to give it to one
 * of @p mine makes the shares fairer: the holder keeps at least as many
 * as the newcomer gets. A holder of nothing always gets its first. Holders
 * a connection apart never evict each other: that would only churn.
 */
static bool fairer(unsigned held, unsigned mine)
{
    return held >= mine + 2 || (mine == 0 && held >= 1);
}

/*
 * Whether a new connection of @p uid and @p pid may be served, evicting
 * one when that is fair: when its user holds connections_per_uid, the
 * oldest idle one of the user's process holding the most; when the pool
 * is full, the oldest idle one of the user holding the most. Eviction is
 * done only when fairer(), so any number of connections of one user
 * cannot keep another user out. NULL, or why not.
 */
static const char *admit(server *d, uid_t uid, pid_t pid)
{
    unsigned mine_uid, mine_pid, held;
    conn *victim;

    const config *cfg = d->cfg;

    count_unattached(d, uid, pid, &mine_uid, &mine_pid);
    if (mine_pid >= cfg->connections_per_process)
        return "too many connections from this process";
    if (mine_uid >= cfg->connections_per_uid) {
        victim = pick_victim(d, false, uid, &held);
        if (victim == NULL || !fairer(held, mine_pid))
            return "too many connections from this user";
    } else if (d->timers[CONN_T_IDLE].n >= cfg->connections_unattached) {
        victim = pick_victim(d, true, 0, &held);
        if (victim == NULL || !fairer(held, mine_uid))
            return "too many connections";
    } else {
        return NULL;
    }
    log_limited(LOG_WARN,
                "control connection of pid %d uid %u evicted (idle, no "
                "process slot) for pid %d uid %u",
                (int)victim->pid, (unsigned)victim->uid, (int)pid,
                (unsigned)uid);
    conn_close(d, victim);
    return NULL;
}

/* --- refused peers ------------------------------------------------------- */

static void refused_close_oldest(server *d)
{
    close(d->refused_fd[d->refused_first]);
    d->refused_first = (d->refused_first + 1) % CONTROL_REFUSED_LINGER_MAX;
    d->refused_n--;
}

/* One error reply into the peer's empty socket (one non-blocking send),
 * and no more from us. */
static void send_refusal(int fd, int code, const char *why)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    rep.error = code;
    rep.message = (char *)(uintptr_t)why;
    uint8_t buf[256];
    size_t n = protobuf_c_message_get_packed_size(&rep.base);
    if (n <= sizeof(buf) - RETRYD_FRAME_HEADER) {
        retryd__frame_pack(&rep.base, n, buf);
        (void)!send(fd, buf, n + RETRYD_FRAME_HEADER,
                    MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    shutdown(fd, SHUT_WR);
}

/*
 * An unauthorised peer: tell it so at once, stop sending, and never read
 * it. It is not counted against anyone. The descriptor lingers briefly,
 * half-closed: closed at once, the peer's hello (often in flight) would
 * fail on a dead socket before it could read why.
 */
static void refuse(server *d, int fd, const char *why)
{
    send_refusal(fd, RETRYD_EPERM, why);
    if (d->refused_n == CONTROL_REFUSED_LINGER_MAX)
        refused_close_oldest(d);
    unsigned i = (d->refused_first + d->refused_n) % CONTROL_REFUSED_LINGER_MAX;
    d->refused_fd[i] = fd;
    d->refused_due_ns[i] =
        conn_now_ns() + CONTROL_REFUSED_LINGER_MS * 1000000ull;
    d->refused_n++;
}

/*
 * A connection taken on the spare descriptor while the daemon is out of
 * them (core/fdlimit.h): it cannot linger, so the reply goes before the
 * close; the library reads a reply queued before a hang-up even when its
 * hello then fails to send. RETRYD_EFULL: to the library, the daemon has
 * no room for another process, which is what a process slot needs.
 */
static void refuse_exhausted(int fd, void *arg)
{
    (void)arg;
    send_refusal(fd, RETRYD_EFULL,
                 "the daemon is out of file descriptors (raise its "
                 "LimitNOFILE)");
}

int control_accept_guard(server *d, int epfd, struct epoll_event ev)
{
    int r = accept_guard_init(&d->control_guard, "control", d->control_fd, epfd,
                              ev);
    d->control_guard.refuse = refuse_exhausted;
    return r;
}

static void accept_one(server *d, int fd)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
        log_limited(LOG_WARN, "control connection refused: no peer "
                              "credentials");
        close(fd);
        return;
    }
    if (!daemon_peer_allowed(fd, cr.uid, cr.gid, d->cfg, false)) {
        log_limited(LOG_WARN,
                    "pid %d uid %u is not authorised (allow_users, "
                    "allow_groups): connection refused",
                    (int)cr.pid, (unsigned)cr.uid);
        refuse(d, fd, "not authorised");
        return;
    }
    const char *why = admit(d, cr.uid, cr.pid);
    if (why != NULL) {
        log_limited(LOG_WARN, "control connection of pid %d uid %u refused: %s",
                    (int)cr.pid, (unsigned)cr.uid, why);
        close(fd);
        return;
    }
    conn_open(d, fd, &cr);
}

int control_accept(server *d)
{
    for (int i = 0; i < CONTROL_ACCEPT_BATCH; i++) {
        int fd = accept_guarded(&d->control_guard, NULL, NULL);
        if (fd == -EMFILE)
            continue; /* refused on the spare: the next may be too */
        if (fd < 0)
            return fd == -EAGAIN ? 0 : fd;
        accept_one(d, fd);
    }
    return 0; /* the rest next turn: epoll is level-triggered */
}

int control_next_timeout_ms(const server *d)
{
    uint64_t due = UINT64_MAX, now = conn_now_ns();
    for (int k = 0; k < CONN_TIMERS; k++) {
        const conn *first = conn_timer_first(d, (enum conn_timer)k);
        if (first != NULL && first->t[k].due_ns < due)
            due = first->t[k].due_ns;
    }
    if (d->refused_n > 0 && d->refused_due_ns[d->refused_first] < due)
        due = d->refused_due_ns[d->refused_first];
    if (d->control_guard.resume_ns != 0 && d->control_guard.resume_ns < due)
        due = d->control_guard.resume_ns;
    if (due == UINT64_MAX)
        return -1;
    if (due <= now)
        return 0;
    /* Rounded up: waking before the deadline would only wait again. */
    uint64_t ms = (due - now + 999999) / 1000000;
    return ms > 60000 ? 60000 : (int)ms;
}

void control_expire(server *d)
{
    uint64_t now = conn_now_ns();
    while (d->refused_n > 0 && d->refused_due_ns[d->refused_first] <= now)
        refused_close_oldest(d);
    accept_guard_timeout_ms(&d->control_guard); /* a pause over: resume */
    for (int k = 0; k < CONN_TIMERS; k++) {
        conn *c;
        while ((c = conn_timer_first(d, (enum conn_timer)k)) != NULL &&
               c->t[k].due_ns <= now) {
            /* One rate limit per deadline: a flood of one kind must not
             * hide the others. */
            static log_limit sites[CONN_TIMERS];
            log_limited_msg(&sites[k], LOG_WARN,
                            "control connection of pid %d uid %u closed: %s",
                            (int)c->pid, (unsigned)c->uid, timer_name[k]);
            conn_close(d, c);
        }
    }
}

/* At exit: close every connection; process slots stay in the segment for
 * the next daemon, which adopts the live ones. */
void control_close_all(server *d)
{
    while (!retryd__queue_empty(&d->conns))
        conn_free(d,
                  RETRYD_QUEUE_DATA(retryd__queue_head(&d->conns), conn, link));
    control_reap(d);
    while (d->refused_n > 0)
        refused_close_oldest(d);
    for (uint32_t i = 0; i < d->seg.view.process_capacity; i++) {
        d->procs[i].conn = NULL;
        if (d->procs[i].pidfd >= 0) {
            close(d->procs[i].pidfd);
            d->procs[i].pidfd = -1;
        }
    }
}
