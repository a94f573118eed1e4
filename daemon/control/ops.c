/* SPDX-License-Identifier: MIT */
/*
 * The control socket's protocol operations: hello, attach, register,
 * drain, retire. Frames are length-checked before they are read
 * (shared/frame.h), at most one per readiness event; a peer that sends
 * garbage gets an error reply and loses its connection.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/conn.h"
#include "core/log.h"
#include "retryd.pb-c.h"
#include "retryd/common.h"
#include "segment/upstreams.h"
#include "shared/frame.h"

/* --- handlers: each returns 0 to keep the connection, < 0 to close it -- */

static int on_hello(server *d, conn *c, const Retryd__Hello *h)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    Retryd__HelloReply hr;
    retryd__hello_reply__init(&hr);

    if (h->protocol_version != RETRYD_PROTOCOL_VERSION) {
        conn_reply_error(c, RETRYD_EVERSION, "unsupported protocol version");
        return -1;
    }
    snprintf(c->client, sizeof(c->client), "%s", h->client ? h->client : "");
    c->greeted = true;
    conn_timer_stop(d, c, CONN_T_HELLO);
    log_debug("pid %d uid %u (%s) said hello", (int)c->pid, (unsigned)c->uid,
              c->client[0] ? c->client : "?");
    hr.protocol_version = RETRYD_PROTOCOL_VERSION;
    hr.generation = d->seg.generation;
    hr.daemon_version = RETRYD_DAEMON_VERSION;
    rep.body_case = RETRYD__CONTROL_REPLY__BODY_HELLO;
    rep.hello = &hr;
    return conn_reply(c, &rep, -1);
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
    /* The reserve (core/fdlimit.h): refused before the table runs out,
     * so stats, retrydctl and the others' hellos still get descriptors. */
    if (d->watched >= d->fd_room)
        return -EMFILE;
    int r = owner_process_alloc(&d->seg, c->pid, start, c->uid, ret);
    if (r < 0)
        return r;
    int pidfd = pidfd_open(c->pid, 0);
    /* Out of descriptors, the slot cannot be watched: said as such. */
    r = pidfd < 0 && (errno == EMFILE || errno == ENFILE) ? -errno : RETRYD_EIO;
    if (pidfd < 0 || daemon_watch_process(d, *ret, pidfd) < 0) {
        if (pidfd >= 0)
            close(pidfd);
        owner_process_release(&d->seg, *ret);
        return r;
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
        return conn_reply_error(c, r,
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
        return conn_reply_error(
            c, r, "no free process slot (raise process_capacity)");
    }
    if (r == -EMFILE || r == -ENFILE) {
        atomic_fetch_add_explicit(&d->slots_refused_capacity, 1,
                                  memory_order_relaxed);
        log_limited(LOG_ERR,
                    "pid %d uid %u (%s) refused a process slot: the daemon's "
                    "file descriptors are taken (%u processes attached, room "
                    "for %u: %s); raise LimitNOFILE",
                    (int)c->pid, (unsigned)c->uid, who, d->watched, d->fd_room,
                    strerror(-r));
        return conn_reply_error(c, RETRYD_EFULL,
                                "the daemon is out of file descriptors "
                                "(raise its LimitNOFILE)");
    }
    log_limited(LOG_WARN, "pid %d uid %u (%s) cannot attach: %s", (int)c->pid,
                (unsigned)c->uid, who, retryd_strerror(r));
    return conn_reply_error(c, r, "cannot attach this process");
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
        return conn_reply_error(c, RETRYD_EPROTO, "already attached");
    int r = attach_slot(d, c, a, &slot, &quota);
    if (r < 0)
        return attach_refused(d, c, r, quota);
    c->slot = (int32_t)slot;
    d->procs[slot].conn = c;
    /* Attached: its connection is how its hang-up is seen, so it leaves
     * the unattached pool and its idle deadline. */
    conn_timer_stop(d, c, CONN_T_IDLE);
    log_debug("pid %d uid %u (%s) attached to process slot %u%s", (int)c->pid,
              (unsigned)c->uid, c->client[0] ? c->client : "?", slot,
              a->resume ? " (resumed)" : "");
    ar.process_slot = slot;
    ar.generation = d->seg.generation;
    ar.layout_version = SEG_LAYOUT_VERSION;
    ar.segment_size = d->seg.size;
    ar.process_ident = d->seg.procs[slot].ident;
    rep.body_case = RETRYD__CONTROL_REPLY__BODY_ATTACH;
    rep.attach = &ar;
    return conn_reply(c, &rep, d->seg.fd);
}

static int params_from_wire(const Retryd__Params *w, budget_params *p)
{
    *p = (budget_params){.ratio_micro = w->ratio_micro,
                         .floor_micro_per_s = w->floor_micro_per_s,
                         .cap_micro = w->cap_micro};
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
    return conn_reply(c, &rep, -1);
}

static int on_register(server *d, conn *c, const Retryd__Register *rg)
{
    budget_params given;
    reg_entry e;

    if (rg->params != NULL && params_from_wire(rg->params, &given) < 0)
        return conn_reply_error(c, RETRYD_EINVAL, "parameters out of range");
    bool quota;
    int r = daemon_register_for(d, c->uid, rg->name ? rg->name : "",
                                rg->params ? &given : NULL, &e, &quota);
    if (quota)
        return conn_reply_error(c, r,
                                "this user registered its quota of upstreams "
                                "(upstreams_per_uid)");
    if (r == RETRYD_EINVAL)
        return conn_reply_error(c, r,
                                "an upstream name is 1..95 printable bytes");
    if (r == RETRYD_ECONFLICT)
        return conn_reply_error(c, r,
                                "the upstream is registered with other "
                                "parameters");
    if (r < 0)
        return conn_reply_error(c, r, retryd_strerror(r));
    return upstream_reply(c, &e);
}

static int on_drain(server *d, conn *c, const Retryd__Drain *dr)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    owner_set_draining(&d->seg, dr->on);
    log_limited(LOG_INFO, "host-wide draining %s (by pid %d)",
                dr->on ? "on" : "off", (int)c->pid);
    return conn_reply(c, &rep, -1);
}

static int on_retire(server *d, conn *c, const Retryd__Retire *rt)
{
    Retryd__ControlReply rep;
    retryd__control_reply__init(&rep);
    int r = rt->name ? daemon_retire(d, rt->name) : RETRYD_EINVAL;
    if (r < 0)
        return conn_reply_error(c, r, "no such upstream");
    return conn_reply(c, &rep, -1);
}

static int dispatch(server *d, conn *c, const Retryd__ControlRequest *req)
{
    if (!c->greeted && req->body_case != RETRYD__CONTROL_REQUEST__BODY_HELLO) {
        conn_reply_error(c, RETRYD_EPROTO, "hello first");
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
        conn_reply_error(c, RETRYD_EPROTO, "unknown request");
        return -1;
    }
}

/* The frame is done with: ready for the next one. */
static void frame_reset(server *d, conn *c)
{
    frame_in_reset(&c->in);
    conn_timer_stop(d, c, CONN_T_FRAME);
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
        conn_reply_error(c, RETRYD_EPROTO, "malformed request");
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
        conn_timer_start(d, c, CONN_T_FRAME); /* a frame begun must end */
    if (n > 0)
        conn_active(d, c);
    if (r == RETRYD_EPROTO) {
        log_limited(LOG_WARN, "pid %d: oversized frame: closing", (int)c->pid);
        conn_reply_error(c, RETRYD_EPROTO, "frame length out of bounds");
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
