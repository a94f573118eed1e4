/*
 * The control socket: hello, attach, register, drain, retire.
 *
 * Every peer is identified by the kernel (SO_PEERCRED, SO_PEERGROUPS) and
 * checked against the configured users and groups before its first
 * request is served. Frames are length-checked before they are read
 * (frame.h). A peer that sends garbage gets an error reply and loses its
 * connection; nothing it sends can stop the daemon serving others.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"
#include "shared/frame.h"
#include "log.h"
#include "retryd.pb-c.h"
#include "retryd/common.h"

struct conn {
    conn *prev, *next; /* d->conns */
    conn *next_dead;   /* d->dead: closed, freed after the epoll batch */
    bool dead;
    int fd;
    watch w;
    pid_t pid;
    uid_t uid;
    bool authorised;
    bool greeted;
    int32_t slot; /* process slot attached through this connection, or -1 */
    uint8_t *buf; /* RETRYD_FRAME_HEADER + RETRYD_FRAME_REQUEST_MAX bytes */
    size_t len;
    char client[64];
};

#define CONN_BUF (RETRYD_FRAME_HEADER + RETRYD_FRAME_REQUEST_MAX)
#define REPLY_TIMEOUT_MS 1000

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

static void conn_free(server *d, conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        d->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->buf);
    c->buf = NULL;
    /* Other events of the current epoll batch may still point at it: it
     * is freed when the batch is done (control_reap). */
    c->dead = true;
    c->next_dead = d->dead;
    d->dead = c;
    d->n_conns--;
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
        log_info("pid %d detached (process slot %u)", (int)c->pid, slot);
        daemon_release_process(d, slot);
    }
    conn_free(d, c);
}

int control_accept(server *d)
{
    for (;;) {
        int fd =
            accept4(d->control_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        struct ucred cr;
        socklen_t len = sizeof(cr);
        unsigned max = d->seg.view.process_capacity + DAEMON_SPARE_CONNECTIONS;
        if (d->n_conns >= max ||
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
            log_warn("control connection refused: %s",
                     d->n_conns >= max ? "too many connections"
                                       : "no peer credentials");
            close(fd);
            continue;
        }
        conn *c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            continue;
        }
        *c = (conn){.fd = fd,
                    .w = {.kind = WATCH_CONN, .ptr = c},
                    .pid = cr.pid,
                    .uid = cr.uid,
                    .authorised =
                        daemon_peer_allowed(fd, cr.uid, cr.gid, d->cfg, false),
                    .slot = -1};
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
                                 .data.ptr = &c->w};
        if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            continue;
        }
        d->n_conns++;
        c->next = d->conns;
        if (d->conns != NULL)
            d->conns->prev = c;
        d->conns = c;
        if (!c->authorised)
            log_warn("pid %d uid %u is not authorised (allow_users, "
                     "allow_groups)",
                     (int)cr.pid, (unsigned)cr.uid);
    }
}

/* --- replies ------------------------------------------------------------- */

static int reply(conn *c, Retryd__ControlReply *rep, int pass_fd)
{
    return retryd__frame_send(c->fd, &rep->base, pass_fd, REPLY_TIMEOUT_MS);
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
    hr.protocol_version = RETRYD_PROTOCOL_VERSION;
    hr.generation = d->seg.generation;
    hr.daemon_version = RETRYD_DAEMON_VERSION;
    rep.body_case = RETRYD__CONTROL_REPLY__BODY_HELLO;
    rep.hello = &hr;
    return reply(c, &rep, -1);
}

static int attach_slot(server *d, conn *c, const Retryd__Attach *a,
                       uint32_t *ret)
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

static int on_attach(server *d, conn *c, const Retryd__Attach *a)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    Retryd__AttachReply ar;
    retryd__attach_reply__init(&ar);
    uint32_t slot;

    if (c->slot >= 0)
        return reply_error(c, RETRYD_EPROTO, "already attached");
    int r = attach_slot(d, c, a, &slot);
    if (r < 0)
        return reply_error(c, r,
                           r == RETRYD_EFULL ? "no free process slot (raise "
                                               "process_capacity)"
                                             : "cannot attach this process");
    c->slot = (int32_t)slot;
    d->procs[slot].conn = c;
    log_info("pid %d (%s) attached to process slot %u%s", (int)c->pid,
             c->client[0] ? c->client : "?", slot,
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
    log_info("host-wide draining %s (by pid %d)", dr->on ? "on" : "off",
             (int)c->pid);
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
    if (!c->authorised) {
        reply_error(c, RETRYD_EPERM, "not authorised");
        return -1;
    }
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

/* How many bytes to read for the frame being assembled: the rest of its
 * header, then the rest of the body it announces, never into the next
 * frame. 0 for a length above the cap (handle_frame() refuses it). */
static size_t frame_wanted(const conn *c)
{
    const uint8_t *body;
    size_t body_len, used;
    if (c->len < RETRYD_FRAME_HEADER)
        return RETRYD_FRAME_HEADER - c->len;
    if (retryd__frame_decode(c->buf, c->len, RETRYD_FRAME_REQUEST_MAX, &body,
                             &body_len, &used) < 0)
        return 0;
    return RETRYD_FRAME_HEADER + body_len - c->len;
}

/* Serve the buffered frame if it is whole: 1 when served, 0 when more
 * bytes are needed, < 0 to close the connection. */
static int handle_frame(server *d, conn *c)
{
    const uint8_t *body;
    size_t body_len, used;
    int dec = retryd__frame_decode(c->buf, c->len, RETRYD_FRAME_REQUEST_MAX,
                                   &body, &body_len, &used);
    if (dec == 1)
        return 0;
    if (dec < 0) {
        log_warn("pid %d: oversized frame: closing", (int)c->pid);
        reply_error(c, RETRYD_EPROTO, "frame length out of bounds");
        return -1;
    }
    Retryd__ControlRequest *req =
        retryd__control_request__unpack(NULL, body_len, body);
    c->len = 0;
    if (req == NULL) {
        log_warn("pid %d: undecodable request: closing", (int)c->pid);
        reply_error(c, RETRYD_EPROTO, "malformed request");
        return -1;
    }
    int r = dispatch(d, c, req);
    retryd__control_request__free_unpacked(req, NULL);
    return r < 0 ? r : 1;
}

/*
 * At most one frame per readiness event (a read for its header, one for
 * its body): what the peer sent beyond it stays in the socket, and the
 * level-triggered epoll comes back to it after every other ready
 * descriptor had its turn. A peer that writes without pause cannot hold
 * the loop. A hang-up is noticed as end of file, after the frames sent
 * before it.
 */
void control_ready(server *d, conn *c)
{
    if (c->buf == NULL && (c->buf = malloc(CONN_BUF)) == NULL) {
        conn_close(d, c);
        return;
    }
    for (int reads = 0; reads < 2; reads++) {
        size_t want = frame_wanted(c);
        if (want > 0) {
            ssize_t n = read(c->fd, c->buf + c->len, want);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return; /* epoll says when there is more */
            if (n <= 0) {
                conn_close(d, c); /* EOF or error: the peer is gone */
                return;
            }
            c->len += (size_t)n;
        }
        int r = handle_frame(d, c);
        if (r < 0)
            conn_close(d, c);
        if (r != 0)
            return;
    }
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
    for (uint32_t i = 0; i < d->seg.view.process_capacity; i++) {
        d->procs[i].conn = NULL;
        if (d->procs[i].pidfd >= 0) {
            close(d->procs[i].pidfd);
            d->procs[i].pidfd = -1;
        }
    }
}
