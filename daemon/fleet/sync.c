/* SPDX-License-Identifier: MIT */
/*
 * The fleet thread (fleet.h): once per sync interval, at a phase of its
 * own within the interval, it gathers this host's counts from the segment,
 * sends every upstream's sync to Redis in one pipeline and reads the
 * fleet's sums of the previous interval back, and hands the outcome to the
 * main thread.
 *
 * Why intervals and a phase: every host adds its gauges to the hash of
 * the interval it is in, once, at a moment between a quarter and three
 * quarters into it (by a hash of its host_id, so a fleet's hosts do not
 * all come at once), and reads the hash of the interval before, which
 * every host has finished by then (clocks within a quarter interval of
 * each other: NTP does far better). So all hosts read the same sums, and
 * their shares of the floor add up to one.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "core/log.h"
#include "core/rcu.h"
#include "fleet/fleet.h"
#include "fleet/state.h"
#include "retryd/common.h"
#include "segment/fleet_slots.h"
#include "shared/health.h"

#define NS_PER_MS UINT64_C(1000000)

/* When in each interval this host syncs: a quarter to three quarters in,
 * by its host_id. */
static uint64_t phase_ms(const fleet_conf *c)
{
    uint64_t ms = c->sync_interval_ns / NS_PER_MS;
    uint64_t h = seg_name_hash(c->host_id);
    return ms * (250 + h % 500) / 1000;
}

/* A reply, a connect, a login: each waits half an interval at most, so a
 * Redis that does not answer is given up before the next sync is due. */
static uint64_t timeout_ns(const fleet_conf *c)
{
    return c->sync_interval_ns / 2;
}

/* --- the status the statistics read ------------------------------------- */

/* Move to @p state, counting and saying what changed (once per change:
 * a Redis down for an hour is one line, not one a second). */
static void set_state(struct fleet *f, int state, const char *why)
{
    server *d = f->d;
    pthread_mutex_lock(&d->fleet_lock);
    fleet_status *st = &d->fleet_status;
    int was = st->state;
    uint64_t since = st->fallback_since_unix_ms;
    st->state = state;
    if (why != NULL)
        snprintf(st->last_error, sizeof(st->last_error), "%s", why);
    if (state == FLEET_FALLBACK && was != FLEET_FALLBACK) {
        st->fallbacks++;
        st->fallback_since_unix_ms = retryd__clock_realtime_ms();
    } else if (state != FLEET_FALLBACK) {
        st->fallback_since_unix_ms = 0;
    }
    pthread_mutex_unlock(&d->fleet_lock);
    if (state == was)
        return;
    if (state == FLEET_FALLBACK)
        log_warn("fleet: redis %s: %s; this host runs on its own budgets "
                 "(min_retries_per_sec, its own throttle and holds) until it "
                 "answers, trying again with backoff",
                 f->conf.redis, why ? why : "unreachable");
    else if (state == FLEET_CONNECTED)
        log_info("fleet: joined the fleet '%s' as '%s' through redis %s%s",
                 f->conf.name, f->conf.host_id, f->conf.redis,
                 since ? " (was on its own budgets)" : "");
    else if (state == FLEET_JOINING)
        log_debug("fleet: linked, not yet in an interval of the fleet");
}

static void count_sync(struct fleet *f, bool ok, uint64_t rtt_us,
                       uint32_t upstreams, uint32_t applied)
{
    fleet_status *st = &f->d->fleet_status;
    pthread_mutex_lock(&f->d->fleet_lock);
    if (ok) {
        st->syncs++;
        st->last_sync_unix_ms = retryd__clock_realtime_ms();
        st->last_sync_ns = retryd__clock_monotonic_ns();
        st->round_trip_us = rtt_us;
        st->upstreams = upstreams;
        st->upstreams_applied = applied;
    } else {
        st->sync_failures++;
        st->upstreams_applied = 0;
    }
    pthread_mutex_unlock(&f->d->fleet_lock);
}

/* --- the hand-over ------------------------------------------------------- */

void fleet_post(struct fleet *f, fleet_batch *b)
{
    pthread_mutex_lock(&f->lock);
    free(f->ready); /* a newer outcome replaces one not taken */
    f->ready = b;
    pthread_mutex_unlock(&f->lock);
    uint64_t one = 1;
    if (write(f->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        log_limited(LOG_WARN, "fleet: cannot wake the main loop: %s",
                    strerror(errno));
}

static fleet_batch *new_batch(size_t n, uint64_t synced_ns,
                              uint64_t interval_ns)
{
    fleet_batch *b = calloc(1, sizeof(*b) + n * sizeof(b->r[0]));
    if (b != NULL)
        *b = (fleet_batch){.synced_ns = synced_ns, .interval_ns = interval_ns};
    return b;
}

/* Redis refused, or did not answer: every view goes, the link too, and
 * the next try waits a backoff (an interval, doubling to eight, each
 * drawn in its upper half so a fleet does not reconnect in step). */
static void fail(struct fleet *f, int r, const char *why)
{
    fleet_link_close(&f->link);
    uint64_t iv = f->conf.sync_interval_ns;
    f->backoff_ns = f->backoff_ns == 0 ? iv : 2 * f->backoff_ns;
    if (f->backoff_ns > 8 * iv)
        f->backoff_ns = 8 * iv;
    uint64_t draw = (uint64_t)random() % (f->backoff_ns / 2 + 1);
    f->next_connect_ns =
        retryd__clock_monotonic_ns() + f->backoff_ns / 2 + draw;
    if (r == RETRYD_EPERM)
        log_limited(LOG_ERR,
                    "fleet: redis %s refuses this host: %s (fix the ACL or "
                    "password_file, then reload)",
                    f->conf.redis, why);
    count_sync(f, false, 0, 0, 0);
    set_state(f, FLEET_FALLBACK, why);
    fleet_batch *b =
        new_batch(0, retryd__clock_monotonic_ns(), f->conf.sync_interval_ns);
    if (b != NULL)
        fleet_post(f, b);
}

/* --- gathering this host's counts ---------------------------------------- */

/* This host's gauges of upstream slot @p s: its first attempts and grants
 * over the share window (deltas of the counters, a ring of the last
 * FLEET_SHARE_SYNCS syncs) and its throttle's window as it is now. */
static void own_gauges(fleet_up *u, const uint64_t *t, seg_upstream *s,
                       uint64_t now_coarse, fleet_gauges *g)
{
    uint64_t dep = t[SEG_C_DEPOSITS], gr = t[SEG_C_GRANTED];
    uint64_t dd =
        u->primed && dep >= u->last_deposits ? dep - u->last_deposits : 0;
    uint64_t dg = u->primed && gr >= u->last_granted ? gr - u->last_granted : 0;
    u->primed = true;
    u->last_deposits = dep;
    u->last_granted = gr;
    u->fa_ring[u->ring_pos] = dd;
    u->rg_ring[u->ring_pos] = dg;
    u->ring_pos = (u->ring_pos + 1) % FLEET_SHARE_SYNCS;
    *g = (fleet_gauges){.hosts = 1};
    for (unsigned i = 0; i < FLEET_SHARE_SYNCS; i++) {
        g->fa += u->fa_ring[i];
        g->rg += u->rg_ring[i];
    }
    health_view v;
    retryd__health_view(s, now_coarse, &v); /* this host's alone */
    g->r = v.requests;
    g->a = v.accepts;
    g->rej = v.rejecters;
}

/* This host's own hold of slot @p slot, as a unix time, or 0: a hold its
 * processes set, not the fleet's the daemon wrote. */
static uint64_t own_hold(const owner *o, uint32_t slot, seg_upstream *s,
                         uint64_t now_coarse, uint64_t now_ms)
{
    uint64_t until =
        atomic_load_explicit(&s->pushback_until_ns, memory_order_relaxed);
    if (!(atomic_load_explicit(&s->health_flags, memory_order_relaxed) &
          SEG_HEALTH_PUSHBACK) ||
        until <= now_coarse || until == owner_fleet_hold_written(o, slot))
        return 0;
    uint64_t max =
        atomic_load_explicit(&s->pushback_max_ns, memory_order_relaxed);
    uint64_t left = until - now_coarse < max ? until - now_coarse : max;
    return now_ms + left / NS_PER_MS;
}

typedef struct gather_ctx {
    struct fleet *f;
    size_t n;
    uint64_t now_coarse, now_ms;
} gather_ctx;

static int gather_one(const reg_entry *e, void *arg)
{
    gather_ctx *g = arg;
    struct fleet *f = g->f;
    rd_rcu_dereferenced();
    seg_upstream *s = retryd__segment_upstream(&f->d->seg.view, e->slot);
    if (s == NULL || !budget_params_in_fleet(&e->params))
        return 0;
    fleet_up *u = &f->ups[e->slot];
    if (u->gen != e->generation)
        *u = (fleet_up){.gen = e->generation};
    fleet_item *it = &f->items[g->n++];
    *it = (fleet_item){
        .slot = e->slot, .gen = e->generation, .params = e->params};
    memcpy(it->name, e->name, sizeof(it->name));
    own_gauges(u, f->totals[e->slot], s, g->now_coarse, &it->own);
    it->hold_unix_ms =
        own_hold(&f->d->seg, e->slot, s, g->now_coarse, g->now_ms);
    return g->n == f->d->seg.view.upstream_capacity;
}

/* The upstreams that take part, with this host's counts, from one RCU
 * read-side section (a process's counts fold into its upstreams only
 * after the readers of its slot are gone: none is counted twice). */
static size_t gather(struct fleet *f, uint64_t now_ms)
{
    gather_ctx g = {f, 0, retryd__clock_coarse_ns(), now_ms};
    rd_rcu_read_lock();
    (void)owner_collect(&f->d->seg, f->totals);
    registry_for_each(f->d->reg, gather_one, &g);
    rd_rcu_read_unlock();
    return g.n;
}

/* --- one sync ------------------------------------------------------------ */

/* Linked: 0. Not yet time to try again (the backoff): 1, and nothing to
 * count. Else a failed connect or login (fail() says it). */
static int ensure_link(struct fleet *f, char *err, size_t err_len)
{
    if (f->link.fd >= 0)
        return 0;
    uint64_t now = retryd__clock_monotonic_ns();
    if (now < f->next_connect_ns)
        return 1;
    int r = fleet_link_open(&f->link, &f->conf, now + timeout_ns(&f->conf), err,
                            err_len);
    if (r == 0) {
        pthread_mutex_lock(&f->d->fleet_lock);
        f->d->fleet_status.connects++;
        pthread_mutex_unlock(&f->d->fleet_lock);
    }
    return r;
}

/* Remember what this host added to interval @p bucket. */
static void note_published(fleet_up *u, uint64_t bucket, const fleet_gauges *g)
{
    u->pub_bucket[0] = u->pub_bucket[1];
    u->pub[0] = u->pub[1];
    u->pub_bucket[1] = bucket;
    u->pub[1] = *g;
}

/* What this host added to interval @p bucket, or NULL. */
static const fleet_gauges *published_in(const fleet_up *u, uint64_t bucket)
{
    for (int i = 0; i < 2; i++)
        if (u->pub_bucket[i] == bucket && bucket != 0)
            return &u->pub[i];
    return NULL;
}

static int send_syncs(struct fleet *f, size_t n, uint64_t bucket,
                      uint64_t now_ms, char *err, size_t err_len)
{
    fleet_pipe_reset(&f->pipe);
    for (size_t i = 0; i < n; i++) {
        fleet_item *it = &f->items[i];
        if (fleet_pipe_sync(&f->pipe, &f->conf, it->name, bucket, &it->own,
                            it->hold_unix_ms, now_ms, &it->published) < 0) {
            snprintf(err, err_len, "cannot build the sync of '%s'", it->name);
            return RETRYD_ENOMEM;
        }
    }
    uint64_t deadline = retryd__clock_monotonic_ns() + timeout_ns(&f->conf);
    return fleet_link_exchange(&f->link, &f->pipe, f->replies, deadline,
                               4096 + 1024 * n, err, err_len);
}

/* The replies into @p b's results; 0, or an error with @p err said. */
static int read_syncs(struct fleet *f, fleet_batch *b, uint64_t bucket,
                      char *err, size_t err_len)
{
    size_t at = 0;
    int r = 0;
    for (size_t i = 0; i < b->n && r == 0; i++) {
        fleet_item *it = &f->items[i];
        fleet_result *res = &b->r[i];
        size_t k = FLEET_SYNC_COMMANDS +
                   (it->published ? FLEET_SYNC_HOLD_COMMANDS : 0);
        fleet_gauges total;
        uint64_t hold = 0;
        r = fleet_read_sync(f->replies + at, k, it->published, &total, &hold,
                            err, err_len);
        at += k;
        fleet_up *u = &f->ups[it->slot];
        const fleet_gauges *own = published_in(u, bucket - 1);
        *res = (fleet_result){.slot = it->slot,
                              .gen = it->gen,
                              .ready = r == 0 && own != NULL &&
                                       fleet_total_has(&total, own),
                              .hold_unix_ms = hold,
                              .pushback = it->params.fleet_pushback != 0};
        if (res->ready)
            fleet_view_compute(&it->params, &total, own,
                               f->conf.sync_interval_ns / NS_PER_MS,
                               &res->view);
        note_published(u, bucket, &it->own);
    }
    for (size_t i = 0; i < f->pipe.n; i++)
        freeReplyObject(f->replies[i]);
    return r;
}

static void sync_once(struct fleet *f, uint64_t bucket, uint64_t now_ms)
{
    char err[FLEET_ERROR_MAX] = "";
    uint64_t start = retryd__clock_monotonic_ns();
    size_t n = gather(f, now_ms);
    int r = ensure_link(f, err, sizeof(err));
    if (r > 0)
        return; /* in fallback, waiting out the backoff */
    if (r == 0)
        r = send_syncs(f, n, bucket, now_ms, err, sizeof(err));
    fleet_batch *b = NULL;
    if (r == 0) {
        b = new_batch(n, start, f->conf.sync_interval_ns);
        if (b == NULL)
            r = RETRYD_ENOMEM;
    }
    if (r == 0) {
        b->n = n;
        r = read_syncs(f, b, bucket, err, sizeof(err));
    }
    if (r < 0) {
        free(b);
        fail(f, r, err);
        return;
    }
    uint32_t applied = 0;
    for (size_t i = 0; i < n; i++)
        applied += b->r[i].ready;
    b->ok = true;
    f->backoff_ns = 0;
    count_sync(f, true, (retryd__clock_monotonic_ns() - start) / 1000,
               (uint32_t)n, applied);
    set_state(f, applied == n ? FLEET_CONNECTED : FLEET_JOINING, NULL);
    fleet_post(f, b);
}

/* --- the loop ------------------------------------------------------------ */

/* The [fleet] section as the configuration now says; a changed link or
 * namespace starts over (a new login, nothing carried across). */
static void take_conf(struct fleet *f)
{
    fleet_conf c;
    rd_rcu_read_lock();
    c = rcu_dereference(f->d->cfg)->fleet;
    rd_rcu_read_unlock();
    if (fleet_same_link(&c, &f->conf) && strcmp(c.name, f->conf.name) == 0 &&
        strcmp(c.host_id, f->conf.host_id) == 0 &&
        c.sync_interval_ns == f->conf.sync_interval_ns)
        return;
    fleet_link_close(&f->link);
    memset(f->ups, 0, f->d->seg.view.upstream_capacity * sizeof(*f->ups));
    f->next_connect_ns = 0;
    f->backoff_ns = 0;
    f->last_bucket = 0;
    explicit_bzero(&f->conf, sizeof(f->conf));
    f->conf = c;
    explicit_bzero(&c, sizeof(c));
}

/* Sleep until @p wake_ms (CLOCK_REALTIME), or until kicked; false when the
 * thread is to stop. */
static bool nap_until(struct fleet *f, uint64_t wake_ms)
{
    uint64_t now = retryd__clock_realtime_ms();
    uint64_t ms = wake_ms > now ? wake_ms - now : 0;
    /* At most an interval at a time: a clock stepped back re-plans. */
    uint64_t cap = f->conf.sync_interval_ns / NS_PER_MS;
    struct pollfd pf[2] = {{.fd = f->kick_fd, .events = POLLIN},
                           {.fd = f->stop_fd, .events = POLLIN}};
    if (poll(pf, 2, (int)(ms < cap ? ms : cap)) > 0 &&
        (pf[0].revents & POLLIN)) {
        uint64_t v;
        if (read(f->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
            log_limited(LOG_WARN, "fleet: %s", strerror(errno));
        take_conf(f);
    }
    return !atomic_load(&f->stopping);
}

void *fleet_thread_main(void *arg)
{
    struct fleet *f = arg;
    urcu_memb_register_thread();
    srandom((unsigned)(retryd__clock_monotonic_ns() ^ (uint64_t)getpid()));
    take_conf(f);
    for (;;) {
        uint64_t iv = f->conf.sync_interval_ns / NS_PER_MS;
        uint64_t now = retryd__clock_realtime_ms(), bucket = now / iv;
        uint64_t due = bucket * iv + phase_ms(&f->conf);
        if (bucket != f->last_bucket && now >= due) {
            f->last_bucket = bucket;
            sync_once(f, bucket, now);
            continue;
        }
        /* This interval's sync is done (or not due yet): the next one. */
        uint64_t wake = now < due && bucket != f->last_bucket
                            ? due
                            : (bucket + 1) * iv + phase_ms(&f->conf);
        if (!nap_until(f, wake))
            break;
    }
    fleet_link_close(&f->link);
    explicit_bzero(&f->conf, sizeof(f->conf));
    urcu_memb_unregister_thread();
    return NULL;
}
