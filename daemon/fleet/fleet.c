/* SPDX-License-Identifier: MIT */
/*
 * The fleet wing's life (fleet.h): its thread started and stopped with the
 * [fleet] section, and the login check of the start, a reload and
 * --check-config.
 */
#include "fleet/fleet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/clock.h"
#include "core/log.h"
#include "fleet/state.h"
#include "retryd/common.h"
#include "segment/fleet_slots.h"

bool fleet_same_link(const fleet_conf *a, const fleet_conf *b)
{
    return a->on == b->on && strcmp(a->redis, b->redis) == 0 &&
           strcmp(a->user, b->user) == 0 &&
           strcmp(a->password, b->password) == 0;
}

static void fleet_free(struct fleet *f)
{
    if (f == NULL)
        return;
    if (f->wake_fd >= 0)
        close(f->wake_fd);
    if (f->kick_fd >= 0)
        close(f->kick_fd);
    if (f->stop_fd >= 0)
        close(f->stop_fd);
    pthread_mutex_destroy(&f->lock);
    fleet_pipe_free(&f->pipe);
    free(f->ready);
    free(f->ups);
    free(f->items);
    free(f->totals);
    free(f->replies);
    free(f->applied);
    free(f);
}

static struct fleet *fleet_new(server *d)
{
    uint32_t cap = d->seg.view.upstream_capacity;
    struct fleet *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    *f = (struct fleet){.d = d,
                        .link = FLEET_LINK_INIT,
                        .wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK),
                        .kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK),
                        .stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
    pthread_mutex_init(&f->lock, NULL);
    f->link.abort_fd = f->stop_fd;
    f->ups = calloc(cap, sizeof(*f->ups));
    f->items = calloc(cap, sizeof(*f->items));
    f->totals = calloc(cap, sizeof(*f->totals));
    f->replies =
        calloc((size_t)cap * (FLEET_SYNC_COMMANDS + FLEET_SYNC_HOLD_COMMANDS),
               sizeof(*f->replies));
    f->applied = calloc(cap, sizeof(*f->applied));
    if (f->wake_fd < 0 || f->kick_fd < 0 || f->stop_fd < 0 || f->ups == NULL ||
        f->items == NULL || f->totals == NULL || f->replies == NULL ||
        f->applied == NULL) {
        fleet_free(f);
        return NULL;
    }
    return f;
}

static void set_status(server *d, int state)
{
    pthread_mutex_lock(&d->fleet_lock);
    d->fleet_status.state = state;
    d->fleet_status.upstreams_applied = 0;
    pthread_mutex_unlock(&d->fleet_lock);
}

/* The main loop's watch of the wake descriptor: static, not in the
 * fleet's state, because an event of a batch may still point at it after a
 * reload in the same batch stopped the fleet (fleet_wake() then finds no
 * fleet, or a new one whose descriptor has nothing to read). */
static watch w_fleet = {.kind = WATCH_FLEET};

int fleet_start(server *d, int epfd)
{
    if (!d->cfg->fleet.on || d->fleet != NULL)
        return 0;
    struct fleet *f = fleet_new(d);
    if (f == NULL)
        return RETRYD_ENOMEM;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &w_fleet};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, f->wake_fd, &ev) < 0) {
        int err = -errno;
        fleet_free(f);
        return err;
    }
    set_status(d, FLEET_JOINING);
    int r = pthread_create(&f->thread, NULL, fleet_thread_main, f);
    if (r != 0) {
        fleet_free(f);
        set_status(d, FLEET_OFF);
        return -r;
    }
    f->running = true;
    d->fleet = f;
    log_info("fleet: '%s' through redis %s as '%s', a sync every %.3g s",
             d->cfg->fleet.name, d->cfg->fleet.redis, d->cfg->fleet.host_id,
             (double)d->cfg->fleet.sync_interval_ns / 1e9);
    return 0;
}

void fleet_stop(server *d)
{
    struct fleet *f = d->fleet;
    if (f == NULL)
        return;
    atomic_store(&f->stopping, true);
    uint64_t one = 1;
    if (write(f->stop_fd, &one, sizeof(one)) < 0)
        log_warn("fleet: cannot stop its thread: %s", strerror(errno));
    if (f->running)
        pthread_join(f->thread, NULL);
    /* The host's own budgets from now: no view stays behind to lapse. */
    for (uint32_t i = 0; i < d->seg.view.upstream_capacity; i++)
        if (f->applied[i])
            owner_fleet_clear(&d->seg, i);
    d->fleet = NULL;
    fleet_free(f); /* closing wake_fd takes it out of the epoll set */
    set_status(d, FLEET_OFF);
}

void fleet_reconfigure(server *d, int epfd)
{
    bool on = d->cfg->fleet.on;
    if (!on) {
        if (d->fleet != NULL)
            log_info("fleet: the [fleet] section is gone: off");
        fleet_stop(d);
        return;
    }
    if (d->fleet == NULL) {
        int r = fleet_start(d, epfd);
        if (r < 0)
            log_err("fleet: cannot start: %s", retryd_strerror(r));
        return;
    }
    uint64_t one = 1; /* the thread re-reads the section */
    if (write(d->fleet->kick_fd, &one, sizeof(one)) < 0)
        log_warn("fleet: cannot tell its thread: %s", strerror(errno));
}

/* The probe's pipe: a sync of the upstream ".probe" with a hold, so every
 * command a real sync may send is tried, on keys of the same namespace. */
static int probe(fleet_link *l, const fleet_conf *c, uint64_t deadline,
                 char *err, size_t err_len)
{
    uint64_t now_ms = retryd__clock_realtime_ms();
    uint64_t bucket = now_ms / (c->sync_interval_ns / 1000000);
    fleet_gauges none = {0}, total;
    fleet_pipe p = {0};
    redisReply *replies[FLEET_SYNC_COMMANDS + FLEET_SYNC_HOLD_COMMANDS];
    bool published;
    uint64_t hold;
    int r = fleet_pipe_sync(&p, c, ".probe", bucket, &none, now_ms + 1000,
                            now_ms, &published);
    if (r == 0)
        r = fleet_link_exchange(l, &p, replies, deadline, 65536, err, err_len);
    if (r == 0) {
        r = fleet_read_sync(replies, p.n, published, &total, &hold, err,
                            err_len);
        for (size_t i = 0; i < p.n; i++)
            freeReplyObject(replies[i]);
        /* Any error reply: a refused right, or a Redis without ZADD GT
         * or PEXPIREAT NX/GT (before 7.0). Either way no sync would work:
         * said with what would. */
        size_t n = strlen(err);
        if (r == RETRYD_EPERM)
            snprintf(err + n, err_len - n,
                     " (the fleet's user needs HINCRBY, PEXPIRE, HGETALL, "
                     "ZADD, PEXPIREAT and ZSCORE on the keys retryd:*)");
        else if (r == RETRYD_EPROTO)
            snprintf(err + n, err_len - n,
                     " (the fleet needs Redis 7.0 or later: ZADD GT, "
                     "PEXPIREAT NX and GT)");
        if (r == RETRYD_EPROTO)
            r = RETRYD_EPERM;
    }
    fleet_pipe_free(&p);
    return r;
}

int fleet_login_check(const fleet_conf *c, uint64_t timeout_ns, char *err,
                      size_t err_len)
{
    fleet_link l = FLEET_LINK_INIT;
    uint64_t deadline = retryd__clock_monotonic_ns() + timeout_ns;
    int r = fleet_link_open(&l, c, deadline, err, err_len);
    if (r == 0)
        r = probe(&l, c, deadline, err, err_len);
    fleet_link_close(&l);
    return r;
}
