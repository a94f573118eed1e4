/* SPDX-License-Identifier: MIT */
/*
 * The control socket: hello, attach, register, drain, retire.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "daemon.h"
#include "frame_io.h"
#include "shared/frame.h"
#include "log.h"
#include "retryd.pb-c.h"
#include "retryd/common.h"

struct conn {
    conn *prev, *next; /* d->conns */
    conn *next_dead;   /* d->dead: closed, freed after the epoll batch */
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
        conn *prev, *next;
        uint64_t due_ns;
        bool queued;
    } t[CONN_TIMERS];
    char client[64];
};

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

static const char *const timer_name[CONN_TIMERS] = {
    [CONN_T_HELLO] = "no hello in time",
    [CONN_T_FRAME] = "a frame left unfinished",
    [CONN_T_IDLE] = "idle without a process slot",
    [CONN_T_WRITE] = "replies left unread",
};

static uint64_t now_ns(void)
{
    return retryd__clock_monotonic_ns();
}

static bool group_allowed(gid_t g, const config *c, bool stats)
{
    if (stats && c->has_stats_group && c->stats_group == g)
        return true;
    for (size_t i = 0; i < c->n_allow_groups; i++)
        if (c->allow_groups[i] == g)
            return true;
    return false;
}

bool daemon_peer_allowed(int fd, uid_t uid, gid_t gid, const config *c,
                         bool stats)
{
    gid_t groups[256];
    socklen_t len = sizeof(groups);

    if (uid == 0 || uid == geteuid())
        return true;
    for (size_t i = 0; i < c->n_allow_users; i++)
        if (c->allow_users[i] == uid)
            return true;
    if (group_allowed(gid, c, stats))
        return true;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
        return false;
    for (size_t g = 0; g < len / sizeof(gid_t); g++)
        if (group_allowed(groups[g], c, stats))
            return true;
    return false;
}

/* --- deadlines ----------------------------------------------------------- */

static void timer_stop(server *d, conn *c, enum conn_timer k)
{
    if (!c->t[k].queued)
        return;
    conn_queue *q = &d->timers[k];
    if (c->t[k].prev != NULL)
        c->t[k].prev->t[k].next = c->t[k].next;
    else
        q->head = c->t[k].next;
    if (c->t[k].next != NULL)
        c->t[k].next->t[k].prev = c->t[k].prev;
    else
        q->tail = c->t[k].prev;
    c->t[k].prev = c->t[k].next = NULL;
    c->t[k].queued = false;
    q->n--;
}

/* (Re)start timer @p k of @p c from now: to the tail of its queue. */
static void timer_start(server *d, conn *c, enum conn_timer k)
{
    timer_stop(d, c, k);
    conn_queue *q = &d->timers[k];
    c->t[k].due_ns = now_ns() + timer_ms(d, k) * 1000000u;
    c->t[k].prev = q->tail;
    c->t[k].next = NULL;
    if (q->tail != NULL)
        q->tail->t[k].next = c;
    else
        q->head = c;
    q->tail = c;
    c->t[k].queued = true;
    q->n++;
}

/* Traffic on an unattached connection: it is the most recently active. */
static void conn_active(server *d, conn *c)
{
    if (c->t[CONN_T_IDLE].queued)
        timer_start(d, c, CONN_T_IDLE);
}

/* --- connections --------------------------------------------------------- */

static void conn_free(server *d, conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        d->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    for (int k = 0; k < CONN_TIMERS; k++)
        timer_stop(d, c, (enum conn_timer)k);
    epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    frame_in_reset(&c->in);
    free(c->out);
    c->out = NULL;
    /* Other events of the current epoll batch may still point at it: it
     * is freed when the batch is done (control_reap). */
    c->dead = true;
    c->next_dead = d->dead;
    d->dead = c;
}

void control_reap(server *d)
{
    while (d->dead != NULL) {
        conn *c = d->dead;
        d->dead = c->next_dead;
        free(c);
    }
}

bool control_dead(const conn *c)
{
    return c->dead;
}

static void conn_close(server *d, conn *c)
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
static int conn_flush(server *d, conn *c)
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
        timer_stop(d, c, CONN_T_WRITE);
        if (c->closing)
            return -1;
    } else if (progress || !c->t[CONN_T_WRITE].queued) {
        timer_start(d, c, CONN_T_WRITE);
    }
    if (progress)
        conn_active(d, c);
    conn_watch(d, c);
    return 0;
}

/* --- admission ----------------------------------------------------------- */

/* Unattached connections of @p uid (*ret_uid) and, of those, of @p pid
 * (*ret_pid): one pass over the pool. */
static void count_unattached(const server *d, uid_t uid, pid_t pid,
                             unsigned *ret_uid, unsigned *ret_pid)
{
    unsigned nu = 0, np = 0;
    for (conn *c = d->timers[CONN_T_IDLE].head; c; c = c->t[CONN_T_IDLE].next)
        if (c->uid == uid) {
            nu++;
            np += c->pid == pid;
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
    for (conn *c = d->timers[CONN_T_IDLE].head; c; c = c->t[CONN_T_IDLE].next) {
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

/*
 * An unauthorised peer: tell it so at once (one non-blocking send into an
 * empty socket), stop sending, and never read it. It is not counted
 * against anyone. The descriptor lingers briefly, half-closed: closed at
 * once, the peer's hello (often in flight) would fail on a dead socket
 * before it could read why.
 */
static void refuse(server *d, int fd, const char *why)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    rep.error = RETRYD_EPERM;
    rep.message = (char *)(uintptr_t)why;
    uint8_t buf[256];
    size_t n = protobuf_c_message_get_packed_size(&rep.base);
    if (n <= sizeof(buf) - RETRYD_FRAME_HEADER) {
        retryd__frame_pack(&rep.base, n, buf);
        (void)!send(fd, buf, n + RETRYD_FRAME_HEADER,
                    MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    shutdown(fd, SHUT_WR);
    if (d->refused_n == CONTROL_REFUSED_LINGER_MAX)
        refused_close_oldest(d);
    unsigned i = (d->refused_first + d->refused_n) % CONTROL_REFUSED_LINGER_MAX;
    d->refused_fd[i] = fd;
    d->refused_due_ns[i] = now_ns() + CONTROL_REFUSED_LINGER_MS * 1000000ull;
    d->refused_n++;
}

/* A new authorised connection: watched, and under its hello and idle
 * deadlines. */
static void conn_open(server *d, int fd, const struct ucred *cr)
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
    int sndbuf = CONTROL_SNDBUF;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    struct epoll_event ev = {.events = c->events, .data.ptr = &c->w};
    if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        free(c);
        return;
    }
    c->next = d->conns;
    if (d->conns != NULL)
        d->conns->prev = c;
    d->conns = c;
    timer_start(d, c, CONN_T_HELLO);
    timer_start(d, c, CONN_T_IDLE);
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
        int fd =
            accept4(d->control_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        accept_one(d, fd);
    }
    return 0; /* the rest next turn: epoll is level-triggered */
}

int control_next_timeout_ms(const server *d)
{
    uint64_t due = UINT64_MAX, now = now_ns();
    for (int k = 0; k < CONN_TIMERS; k++)
        if (d->timers[k].head != NULL && d->timers[k].head->t[k].due_ns < due)
            due = d->timers[k].head->t[k].due_ns;
    if (d->refused_n > 0 && d->refused_due_ns[d->refused_first] < due)
        due = d->refused_due_ns[d->refused_first];
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
    uint64_t now = now_ns();
    while (d->refused_n > 0 && d->refused_due_ns[d->refused_first] <= now)
        refused_close_oldest(d);
    for (int k = 0; k < CONN_TIMERS; k++) {
        conn *c;
        while ((c = d->timers[k].head) != NULL && c->t[k].due_ns <= now) {
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

/* --- replies ------------------------------------------------------------- */

/* Queue @p rep (with @p pass_fd riding on its first byte when >= 0); the
 * caller's turn ends with conn_flush(). < 0 when the peer let more than
 * CONTROL_OUTPUT_MAX pile up: the connection is closed. */
static int reply(conn *c, Retryd__ControlReply *rep, int pass_fd)
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

static int reply_error(conn *c, int err, const char *message)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    rep.error = err;
    rep.message = (char *)(uintptr_t)message;
    return reply(c, &rep, -1);
}

/* --- handlers: each returns 0 to keep the connection, < 0 to close it -- */

static int on_hello(server *d, conn *c, const Retryd__Hello *h)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    Retryd__HelloReply hr;
    retryd__hello_reply__init(&hr);

    if (h->protocol_version != RETRYD_PROTOCOL_VERSION) {
        reply_error(c, RETRYD_EVERSION, "unsupported protocol version");
        return -1;
    }
    snprintf(c->client, sizeof(c->client), "%s", h->client ? h->client : "");
    c->greeted = true;
    timer_stop(d, c, CONN_T_HELLO);
    log_debug("pid %d uid %u (%s) said hello", (int)c->pid, (unsigned)c->uid,
              c->client[0] ? c->client : "?");
    hr.protocol_version = RETRYD_PROTOCOL_VERSION;
    hr.generation = d->seg.generation;
    hr.daemon_version = RETRYD_DAEMON_VERSION;
    rep.body_case = RETRYD__CONTROL_REPLY__BODY_HELLO;
    rep.hello = &hr;
    return reply(c, &rep, -1);
}

/* Process slots attached by user @p uid (the daemon's own copies). */
static uint32_t slots_of_uid(const server *d, uid_t uid)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < d->seg.view.process_capacity; i++) {
        const owner_proc *p = &d->seg.procs[i];
        n += seg_ident_state(p->ident) == SEG_ACTIVE && p->uid == (uint64_t)uid;
    }
    return n;
}

/* A slot for @p c's process: its old one back, or a new one unless its
 * user holds process_slots_per_uid (*ret_quota then) or all are taken. */
static int attach_slot(server *d, conn *c, const Retryd__Attach *a,
                       uint32_t *ret, bool *ret_quota)
{
    uint64_t start = retryd__process_start_time((uint64_t)c->pid);
    if (start == 0)
        return RETRYD_ENOENT;
    /* A process that held a slot before this daemon started keeps it. */
    if (a->resume && a->resume_generation == d->seg.generation &&
        owner_process_matches(&d->seg, a->resume_slot, c->pid, start) &&
        d->procs[a->resume_slot].conn == NULL) {
        *ret = a->resume_slot;
        return 0;
    }
    uint32_t quota = d->cfg->process_slots_per_uid;
    if (quota < d->seg.view.process_capacity &&
        slots_of_uid(d, c->uid) >= quota) {
        *ret_quota = true;
        return RETRYD_EFULL;
    }
    int r = owner_process_alloc(&d->seg, c->pid, start, c->uid, ret);
    if (r < 0)
        return r;
    int pidfd = pidfd_open(c->pid, 0);
    if (pidfd < 0 || daemon_watch_process(d, *ret, pidfd) < 0) {
        if (pidfd >= 0)
            close(pidfd);
        owner_process_release(&d->seg, *ret);
        return RETRYD_EIO;
    }
    return 0;
}

/* An attach refused: why, to the log (rate-limited, one site per reason)
 * and to the peer. */
static int attach_refused(server *d, conn *c, int r, bool quota)
{
    const char *who = c->client[0] ? c->client : "?";
    if (quota) {
        atomic_fetch_add_explicit(&d->slots_refused_quota, 1,
                                  memory_order_relaxed);
        log_limited(LOG_WARN,
                    "pid %d uid %u (%s) refused a process slot: its user "
                    "holds %u, its quota (process_slots_per_uid); it spends "
                    "from a local budget",
                    (int)c->pid, (unsigned)c->uid, who,
                    d->cfg->process_slots_per_uid);
        return reply_error(c, r,
                           "this user holds its quota of process slots "
                           "(process_slots_per_uid)");
    }
    if (r == RETRYD_EFULL) {
        atomic_fetch_add_explicit(&d->slots_refused_capacity, 1,
                                  memory_order_relaxed);
        log_limited(LOG_WARN,
                    "pid %d uid %u (%s) refused a process slot: all %u are "
                    "taken (raise process_capacity); it spends from a local "
                    "budget",
                    (int)c->pid, (unsigned)c->uid, who,
                    d->seg.view.process_capacity);
        return reply_error(c, r,
                           "no free process slot (raise process_capacity)");
    }
    log_limited(LOG_WARN, "pid %d uid %u (%s) cannot attach: %s", (int)c->pid,
                (unsigned)c->uid, who, retryd_strerror(r));
    return reply_error(c, r, "cannot attach this process");
}

static int on_attach(server *d, conn *c, const Retryd__Attach *a)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    Retryd__AttachReply ar;
    retryd__attach_reply__init(&ar);
    uint32_t slot;
    bool quota = false;

    if (c->slot >= 0)
        return reply_error(c, RETRYD_EPROTO, "already attached");
    int r = attach_slot(d, c, a, &slot, &quota);
    if (r < 0)
        return attach_refused(d, c, r, quota);
    c->slot = (int32_t)slot;
    d->procs[slot].conn = c;
    /* Attached: its connection is how its hang-up is seen, so it leaves
     * the unattached pool and its idle deadline. */
    timer_stop(d, c, CONN_T_IDLE);
    log_debug("pid %d uid %u (%s) attached to process slot %u%s", (int)c->pid,
              (unsigned)c->uid, c->client[0] ? c->client : "?", slot,
              a->resume ? " (resumed)" : "");
    ar.process_slot = slot;
    ar.generation = d->seg.generation;
    ar.layout_version = SEG_LAYOUT_VERSION;
    ar.segment_size = d->seg.size;
    rep.body_case = RETRYD__CONTROL_REPLY__BODY_ATTACH;
    rep.attach = &ar;
    return reply(c, &rep, d->seg.fd);
}

static int params_from_wire(const Retryd__Params *w, budget_params *p)
{
    *p = (budget_params){w->ratio_micro, w->floor_micro_per_s, w->cap_micro};
    return budget_params_plausible(p) ? 0 : RETRYD_EINVAL;
}

static int upstream_reply(conn *c, const reg_entry *e)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    Retryd__UpstreamReply ur;
    retryd__upstream_reply__init(&ur);
    Retryd__Params p;
    retryd__params__init(&p);
    p.ratio_micro = e->params.ratio_micro;
    p.floor_micro_per_s = e->params.floor_micro_per_s;
    p.cap_micro = e->params.cap_micro;
    ur.slot = e->slot;
    ur.slot_generation = e->generation;
    ur.params = &p;
    rep.body_case = RETRYD__CONTROL_REPLY__BODY_UPSTREAM;
    rep.upstream = &ur;
    return reply(c, &rep, -1);
}

static int on_register(server *d, conn *c, const Retryd__Register *rg)
{
    budget_params given;
    reg_entry e;

    if (rg->params != NULL && params_from_wire(rg->params, &given) < 0)
        return reply_error(c, RETRYD_EINVAL, "parameters out of range");
    int r = daemon_register(d, rg->name ? rg->name : "",
                            rg->params ? &given : NULL, &e);
    if (r == RETRYD_EINVAL)
        return reply_error(c, r, "an upstream name is 1..95 printable bytes");
    if (r == RETRYD_ECONFLICT)
        return reply_error(c, r,
                           "the upstream is registered with other "
                           "parameters");
    if (r < 0)
        return reply_error(c, r, retryd_strerror(r));
    return upstream_reply(c, &e);
}

static int on_drain(server *d, conn *c, const Retryd__Drain *dr)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    owner_set_draining(&d->seg, dr->on);
    log_limited(LOG_INFO, "host-wide draining %s (by pid %d)",
                dr->on ? "on" : "off", (int)c->pid);
    return reply(c, &rep, -1);
}

static int on_retire(server *d, conn *c, const Retryd__Retire *rt)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    int r = rt->name ? daemon_retire(d, rt->name) : RETRYD_EINVAL;
    if (r < 0)
        return reply_error(c, r, "no such upstream");
    return reply(c, &rep, -1);
}

static int dispatch(server *d, conn *c, const Retryd__ControlRequest *req)
{
    if (!c->greeted && req->body_case != RETRYD__CONTROL_REQUEST__BODY_HELLO) {
        reply_error(c, RETRYD_EPROTO, "hello first");
        return -1;
    }
    switch (req->body_case) {
    case RETRYD__CONTROL_REQUEST__BODY_HELLO:
        return on_hello(d, c, req->hello);
    case RETRYD__CONTROL_REQUEST__BODY_ATTACH:
        return on_attach(d, c, req->attach);
    case RETRYD__CONTROL_REQUEST__BODY_REGISTER:
        return on_register(d, c, req->register_);
    case RETRYD__CONTROL_REQUEST__BODY_DRAIN:
        return on_drain(d, c, req->drain);
    case RETRYD__CONTROL_REQUEST__BODY_RETIRE:
        return on_retire(d, c, req->retire);
    default:
        reply_error(c, RETRYD_EPROTO, "unknown request");
        return -1;
    }
}

/* The frame is done with: ready for the next one. */
static void frame_reset(server *d, conn *c)
{
    frame_in_reset(&c->in);
    timer_stop(d, c, CONN_T_FRAME);
}

/* Unpack and serve the whole frame in c->in; < 0 when the connection is
 * to close after its replies. */
static int serve_frame(server *d, conn *c)
{
    Retryd__ControlRequest *req =
        retryd__control_request__unpack(NULL, c->in.body_len, c->in.body);
    frame_reset(d, c);
    if (req == NULL) {
        log_limited(LOG_WARN, "pid %d: undecodable request: closing",
                    (int)c->pid);
        reply_error(c, RETRYD_EPROTO, "malformed request");
        return -1;
    }
    int r = dispatch(d, c, req);
    retryd__control_request__free_unpacked(req, NULL);
    return r;
}

/*
 * One read toward the frame being assembled (frame_in_read()). Returns 1
 * when the frame is whole, 0 when more is to come, < 0 to close: -2 at
 * once (end of file, an error: the peer is gone), -1 after the replies
 * (an oversized length, answered; no memory).
 */
static int frame_read(server *d, conn *c)
{
    bool fresh = c->in.hdr_len == 0;
    size_t n;
    int r = frame_in_read(&c->in, c->fd, &n);
    if (fresh && n > 0)
        timer_start(d, c, CONN_T_FRAME); /* a frame begun must end */
    if (n > 0)
        conn_active(d, c);
    if (r == RETRYD_EPROTO) {
        log_limited(LOG_WARN, "pid %d: oversized frame: closing", (int)c->pid);
        reply_error(c, RETRYD_EPROTO, "frame length out of bounds");
        return -1;
    }
    if (r == RETRYD_EIO)
        return -2;
    return r < 0 ? -1 : r;
}

/* Input: at most one frame per readiness event (a read for its header,
 * one for its body), so a peer that writes without pause delays the
 * others by one request at most; level-triggered epoll comes back for
 * the rest. < 0: close after the replies (-1) or at once (-2). */
static int conn_input(server *d, conn *c)
{
    for (int reads = 0; reads < 2; reads++) {
        int r = frame_read(d, c);
        if (r <= 0)
            return r;
        if (r == 1)
            return serve_frame(d, c) < 0 ? -1 : 0;
    }
    return 0;
}

/*
 * A readiness event: input unless closing, then whatever output the
 * kernel takes. A hang-up is noticed as end of file, after the frames
 * sent before it; a peer that stopped reading keeps its replies here
 * until CONTROL_OUTPUT_MAX or write_timeout_ms (CONN_T_WRITE).
 */
void control_ready(server *d, conn *c, uint32_t events)
{
    int r = 0;
    if (!c->closing && c->out_off == c->out_len &&
        (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
        r = conn_input(d, c);
    if (r == -2 || c->overflow) {
        conn_close(d, c);
        return;
    }
    if (r < 0) {
        c->closing = true;
        frame_reset(d, c);
    }
    if (conn_flush(d, c) < 0)
        conn_close(d, c);
}

int daemon_watch_process(server *d, uint32_t slot, int pidfd)
{
    proc_track *t = &d->procs[slot];
    t->w = (watch){.kind = WATCH_PIDFD, .slot = slot};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &t->w};
    if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, pidfd, &ev) < 0)
        return -errno;
    t->pidfd = pidfd;
    return 0;
}

void daemon_release_process(server *d, uint32_t slot)
{
    proc_track *t = &d->procs[slot];
    if (t->pidfd >= 0) {
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, t->pidfd, NULL);
        close(t->pidfd);
        t->pidfd = -1;
    }
    if (t->conn != NULL) {
        conn *c = t->conn;
        t->conn = NULL;
        c->slot = -1;
        conn_free(d, c);
    }
    owner_process_release(&d->seg, slot);
}

/* At exit: close every connection; process slots stay in the segment for
 * the next daemon, which adopts the live ones. */
void control_close_all(server *d)
{
    while (d->conns != NULL)
        conn_free(d, d->conns);
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
