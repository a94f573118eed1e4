/* SPDX-License-Identifier: MIT */
/*
 * The /metrics endpoint (metrics.h): libmicrohttpd without a listening
 * socket of its own, in external-epoll mode, run by the stats thread.
 *
 * Why not MHD's own thread: it would be one more thread to register with
 * RCU (MHD offers no hook where its thread starts or ends, and a thread
 * that exits registered leaves the RCU registry pointing at freed memory),
 * and one more place for a reader to race a reload. The stats thread
 * already is a registered reader with its own epoll that nothing else
 * waits on; serving /metrics there costs the control socket nothing.
 *
 * Why we accept the connections, not MHD: MHD's limits refuse a newcomer
 * when full, so many half-sent requests on a loopback port (every peer has
 * the same address) would keep a legitimate scraper out. Here a newcomer
 * evicts the oldest connection that has not sent its request yet, and a
 * request must be whole within metrics_request_timeout_ms: a slowloris
 * holds places only briefly and never the one a scraper needs.
 */
#include "stats/metrics.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "stats/evict.h"
#include "stats/snapshot.h"
#include "core/fdlimit.h"
#include "core/log.h"
#include "prom.h"
#include "core/rcu.h"
#include "status_page.h"
#include "base/clock.h"
#include "base/heap.h"
#include "retryd/common.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define STATUS_CONTENT_TYPE "text/html; charset=utf-8"
/* The status page loads nothing and runs nothing: a browser is told so. */
#define STATUS_CSP "default-src 'none'; style-src 'unsafe-inline'"

/* A connection we admitted, from accept until MHD closes it. */
typedef struct mconn {
    metrics *m;
    int fd;
    int index; /* in m->conns; -1 once evicted or expired */
    struct sockaddr_storage peer;
    uint64_t accepted_ns, due_ns;
    bool requested; /* its request's headers are in */
    bool started;   /* MHD has it */
    /* While it holds a place (index >= 0): in the eviction order of all
     * (daemon_evict_before()), in that of its address, and by deadline. */
    retryd_heap_node by_evict, by_evict_ip, by_due;
    struct ip_share *ip;
} mconn;

/* The places one address holds, in their eviction order; a share is free
 * when it holds none. */
typedef struct ip_share {
    struct sockaddr_storage peer;
    retryd_heap evict; /* of mconn.by_evict_ip */
} ip_share;

struct metrics {
    struct server *d;
    int listen_fd;
    accept_guard guard; /* listen_fd's, out of descriptors (fdlimit.h) */
    struct MHD_Daemon *mhd;
    char where[64];
    mconn *conns[METRICS_CONNECTIONS_MAX]; /* NULL: a free place */
    retryd_heap evict, due; /* the places held, by_evict and by_due */
    ip_share ips[METRICS_CONNECTIONS_MAX];
    mconn *adding; /* being handed to MHD_add_connection() */
    /* The status page's history (status_page.h), and its next sample. */
    status_history *history;
    uint64_t sample_due_ns;
};

static uint64_t ms_ns(uint64_t ms)
{
    return ms * 1000000u;
}

/* The endpoint's request or reply deadline now, read under RCU: a reload
 * may change it. */
static uint32_t config_ms(const metrics *m, bool reply)
{
    rd_rcu_read_lock();
    const config *c = rcu_dereference(m->d->cfg);
    uint32_t ms =
        reply ? c->metrics_reply_timeout_ms : c->metrics_request_timeout_ms;
    rd_rcu_read_unlock();
    return ms;
}

/* --- admitting connections ----------------------------------------------- */

static bool same_ip(const struct sockaddr_storage *a,
                    const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr,
                  sizeof(struct in6_addr)) == 0;
}

static bool evicts_first(const mconn *x, const mconn *y)
{
    return daemon_evict_before(x->requested, x->accepted_ns, y->requested,
                               y->accepted_ns);
}

static bool evict_less(const retryd_heap_node *a, const retryd_heap_node *b)
{
    return evicts_first(RETRYD_HEAP_CDATA(a, mconn, by_evict),
                        RETRYD_HEAP_CDATA(b, mconn, by_evict));
}

static bool evict_ip_less(const retryd_heap_node *a, const retryd_heap_node *b)
{
    return evicts_first(RETRYD_HEAP_CDATA(a, mconn, by_evict_ip),
                        RETRYD_HEAP_CDATA(b, mconn, by_evict_ip));
}

static bool due_less(const retryd_heap_node *a, const retryd_heap_node *b)
{
    return RETRYD_HEAP_CDATA(a, mconn, by_due)->due_ns <
           RETRYD_HEAP_CDATA(b, mconn, by_due)->due_ns;
}

/* The share of @p peer's address; with @p add, a free one taken for it
 * when it holds none (there are as many shares as places). */
static ip_share *share_of(metrics *m, const struct sockaddr_storage *peer,
                          bool add)
{
    ip_share *free_share = NULL;
    for (int i = 0; i < METRICS_CONNECTIONS_MAX; i++) {
        ip_share *sh = &m->ips[i];
        if (sh->evict.n == 0)
            free_share = free_share != NULL ? free_share : sh;
        else if (same_ip(&sh->peer, peer))
            return sh;
    }
    if (add && free_share != NULL)
        free_share->peer = *peer;
    return add ? free_share : NULL;
}

/* @p c, at place @p i, joins the three orders. */
static void track(metrics *m, mconn *c, int i)
{
    c->index = i;
    m->conns[i] = c;
    c->ip = share_of(m, &c->peer, true);
    retryd__heap_insert(&m->evict, &c->by_evict, evict_less);
    retryd__heap_insert(&c->ip->evict, &c->by_evict_ip, evict_ip_less);
    retryd__heap_insert(&m->due, &c->by_due, due_less);
}

/* @p c gives its place up and leaves the three orders (once). */
static void forget(mconn *c)
{
    metrics *m = c->m;
    if (c->index < 0)
        return;
    m->conns[c->index] = NULL;
    c->index = -1;
    retryd__heap_remove(&m->evict, &c->by_evict, evict_less);
    retryd__heap_remove(&c->ip->evict, &c->by_evict_ip, evict_ip_less);
    retryd__heap_remove(&m->due, &c->by_due, due_less);
}

/* Stop tracking @p c and make MHD close it (it sees the shut socket on its
 * next run and calls on_notify(CLOSED), which frees @p c). */
static void drop(mconn *c)
{
    if (c->index < 0)
        return;
    forget(c);
    shutdown(c->fd, SHUT_RDWR);
}

/* Room for a newcomer from @p peer: a free place, after closing the
 * first in its address's eviction order when that holds its share, or the
 * first of all when every place is taken. */
static int make_room(metrics *m, const struct sockaddr_storage *peer)
{
    ip_share *sh = share_of(m, peer, false);
    bool ip_full = sh != NULL && sh->evict.n >= METRICS_PER_IP_MAX;
    retryd_heap_node *first = ip_full ? retryd__heap_min(&sh->evict)
                              : m->evict.n == METRICS_CONNECTIONS_MAX
                                  ? retryd__heap_min(&m->evict)
                                  : NULL;
    if (first != NULL) {
        mconn *victim = ip_full ? RETRYD_HEAP_DATA(first, mconn, by_evict_ip)
                                : RETRYD_HEAP_DATA(first, mconn, by_evict);
        int at = victim->index;
        log_limited(LOG_WARN,
                    "metrics: %s: closing the oldest connection for a "
                    "newcomer",
                    ip_full ? "one address holds its share of connections"
                            : "all connections taken");
        drop(victim);
        return at;
    }
    for (int i = 0; i < METRICS_CONNECTIONS_MAX; i++)
        if (m->conns[i] == NULL)
            return i;
    return -1; /* not reached: fewer held than places */
}

static void admit(metrics *m, int fd, const struct sockaddr_storage *peer,
                  socklen_t len)
{
    mconn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return;
    }
    int i = make_room(m, peer);
    uint64_t now = retryd__clock_monotonic_ns();
    *c = (mconn){.m = m,
                 .fd = fd,
                 .index = -1,
                 .peer = *peer,
                 .accepted_ns = now,
                 .due_ns = now + ms_ns(config_ms(m, false))};
    track(m, c, i);
    m->adding = c;
    /* MHD owns (and closes) the socket from here, even on failure. */
    enum MHD_Result r =
        MHD_add_connection(m->mhd, fd, (const struct sockaddr *)peer, len);
    m->adding = NULL;
    if (r == MHD_YES || c->started)
        return; /* on_notify(CLOSED) frees it */
    forget(c);
    free(c);
}

void metrics_accept(metrics *m)
{
    for (int n = 0; n < METRICS_ACCEPT_BATCH; n++) {
        struct sockaddr_storage peer;
        socklen_t len = sizeof(peer);
        int fd = accept_guarded(&m->guard, (struct sockaddr *)&peer, &len);
        if (fd == -EMFILE)
            continue; /* refused on the spare: the next may be too */
        if (fd < 0)
            return;
        admit(m, fd, &peer, len);
    }
}

static void on_notify(void *cls, struct MHD_Connection *connection,
                      void **socket_context,
                      enum MHD_ConnectionNotificationCode code)
{
    metrics *m = cls;
    (void)connection;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = m->adding;
        if (m->adding != NULL)
            m->adding->started = true;
        return;
    }
    mconn *c = *socket_context;
    if (c == NULL)
        return;
    forget(c);
    free(c);
    *socket_context = NULL;
}

/* --- answering ----------------------------------------------------------- */

static enum MHD_Result answer_as(struct MHD_Connection *connection,
                                 unsigned status, char *body, size_t len,
                                 bool owned, const char *ctype)
{
    struct MHD_Response *res = MHD_create_response_from_buffer(
        len, body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (res == NULL) {
        if (owned)
            free(body);
        return MHD_NO;
    }
    /* One request per connection, as on the stats socket: nothing idles
     * in a place between scrapes. */
    MHD_add_response_header(res, MHD_HTTP_HEADER_CONNECTION, "close");
    MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (strcmp(ctype, STATUS_CONTENT_TYPE) == 0) {
        MHD_add_response_header(res, "Content-Security-Policy", STATUS_CSP);
        MHD_add_response_header(res, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    }
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(res, MHD_HTTP_HEADER_ALLOW, "GET");
    enum MHD_Result r = MHD_queue_response(connection, status, res);
    MHD_destroy_response(res);
    return r;
}

static enum MHD_Result answer(struct MHD_Connection *connection,
                              unsigned status, char *body, size_t len,
                              bool owned)
{
    return answer_as(connection, status, body, len, owned,
                     status == MHD_HTTP_OK ? METRICS_CONTENT_TYPE
                                           : "text/plain");
}

static enum MHD_Result answer_text(struct MHD_Connection *connection,
                                   unsigned status, const char *text)
{
    return answer(connection, status, (char *)(uintptr_t)text, strlen(text),
                  false);
}

/* A view of what the stats socket would answer now: a snapshot (with the
 * processes when @p processes), rendered into memory by @p render and
 * answered as @p type; 503 when memory runs out. */
typedef int (*render_fn)(FILE *out, const Retryd__StatsReply *rep,
                         const metrics *m, int mode);

static enum MHD_Result view(metrics *m, struct MHD_Connection *connection,
                            int mode, bool processes, render_fn render,
                            const char *type)
{
    stats_snapshot s;
    char *body = NULL;
    size_t len = 0;
    if (stats_snapshot_take(m->d, processes, &s) < 0)
        return answer_text(connection, MHD_HTTP_SERVICE_UNAVAILABLE,
                           "out of memory\n");
    FILE *out = open_memstream(&body, &len);
    int r = out != NULL ? render(out, &s.rep, m, mode) : -1;
    if (out != NULL && fclose(out) != 0)
        r = -1;
    stats_snapshot_free(&s);
    if (r < 0) {
        free(body);
        return answer_text(connection, MHD_HTTP_SERVICE_UNAVAILABLE,
                           "out of memory\n");
    }
    return answer_as(connection, MHD_HTTP_OK, body, len, true, type);
}

static int render_exposition(FILE *out, const Retryd__StatsReply *rep,
                             const metrics *m, int mode)
{
    (void)m;
    return prom_render(out, rep, (prom_per_process)mode);
}

static int render_status(FILE *out, const Retryd__StatsReply *rep,
                         const metrics *m, int mode)
{
    (void)mode;
    return status_page_render(out, rep, m->history, m->where);
}

/* The exposition, with per-process series as metrics_per_process says. */
static enum MHD_Result scrape(metrics *m, struct MHD_Connection *connection)
{
    rd_rcu_read_lock();
    int mode = rcu_dereference(m->d->cfg)->metrics_per_process;
    rd_rcu_read_unlock();
    return view(m, connection, mode, mode != PROM_PER_NONE, render_exposition,
                METRICS_CONTENT_TYPE);
}

/* The status page, with the processes (its per-program table) whatever
 * metrics_per_process says. */
static enum MHD_Result status(metrics *m, struct MHD_Connection *connection)
{
    return view(m, connection, PROM_PER_NONE, true, render_status,
                STATUS_CONTENT_TYPE);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    metrics *m = cls;
    (void)version, (void)upload_data, (void)upload_data_size;
    if (*req_cls != NULL)
        return MHD_YES; /* a body being discarded: answered already */
    *req_cls = m;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    mconn *c = ci != NULL ? ci->socket_context : NULL;
    if (c != NULL) {
        /* Its keys change: it leaves the orders and comes back. */
        int at = c->index;
        forget(c);
        c->requested = true;
        c->due_ns = retryd__clock_monotonic_ns() + ms_ns(config_ms(c->m, true));
        if (at >= 0)
            track(c->m, c, at);
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0)
        return answer_text(connection, MHD_HTTP_METHOD_NOT_ALLOWED,
                           "only GET\n");
    if (strcmp(url, "/") == 0)
        return status(m, connection);
    if (strcmp(url, "/metrics") != 0)
        return answer_text(connection, MHD_HTTP_NOT_FOUND,
                           "not found: try / or /metrics\n");
    return scrape(m, connection);
}

/* --- the loop's side ----------------------------------------------------- */

/* One sample of the status page's history, when it is due. */
static void sample(metrics *m, uint64_t now)
{
    stats_snapshot s;
    if (now < m->sample_due_ns || stats_snapshot_take(m->d, false, &s) < 0)
        return;
    status_history_add(m->history, &s.rep, now);
    stats_snapshot_free(&s);
    m->sample_due_ns = now + ms_ns(STATUS_HISTORY_INTERVAL_MS);
}

void metrics_run(metrics *m)
{
    MHD_run(m->mhd);
    uint64_t now = retryd__clock_monotonic_ns();
    sample(m, now);
    retryd_heap_node *n;
    while ((n = retryd__heap_min(&m->due)) != NULL) {
        mconn *c = RETRYD_HEAP_DATA(n, mconn, by_due);
        if (c->due_ns > now)
            break;
        log_limited(LOG_INFO, "metrics connection closed: %s",
                    c->requested ? "reply left unread" : "no request in time");
        drop(c);
    }
    MHD_run(m->mhd); /* close what was just shut */
}

int metrics_timeout_ms(metrics *m)
{
    uint64_t now = retryd__clock_monotonic_ns(), next = m->sample_due_ns;
    retryd_heap_node *first = retryd__heap_min(&m->due);
    if (first != NULL && RETRYD_HEAP_DATA(first, mconn, by_due)->due_ns < next)
        next = RETRYD_HEAP_DATA(first, mconn, by_due)->due_ns;
    MHD_UNSIGNED_LONG_LONG mhd_ms;
    if (MHD_get_timeout(m->mhd, &mhd_ms) == MHD_YES &&
        (next == UINT64_MAX || now + ms_ns(mhd_ms) < next))
        next = now + ms_ns(mhd_ms);
    int paused_ms = accept_guard_timeout_ms(&m->guard);
    if (paused_ms >= 0 && now + ms_ns((uint64_t)paused_ms) < next)
        next = now + ms_ns((uint64_t)paused_ms);
    if (next == UINT64_MAX)
        return -1;
    return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

/* --- opening and handing over -------------------------------------------- */

static int listen_tcp(const config *c)
{
    int fam = c->metrics_addr.ss_family, one = 1;
    int fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* A restarted daemon binds while its predecessor's connections wait
     * in TIME_WAIT. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fam == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&c->metrics_addr,
             c->metrics_addr_len) < 0 ||
        listen(fd, SOMAXCONN) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

static metrics *metrics_open(server *d, const config *c)
{
    metrics *m = calloc(1, sizeof(*m));
    if (m != NULL)
        m->guard.spare = -1; /* reserved once watched (metrics_take) */
    if (m == NULL)
        return NULL;
    m->d = d;
    snprintf(m->where, sizeof(m->where), "%s", c->metrics_listen);
    m->history = status_history_new();
    m->listen_fd = m->history != NULL ? listen_tcp(c) : -1;
    if (m->listen_fd < 0) {
        log_err("metrics_listen %s: cannot listen: %s", m->where,
                m->history != NULL ? strerror(-m->listen_fd) : "out of memory");
        status_history_free(m->history);
        free(m);
        return NULL;
    }
    unsigned flags = MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET |
                     (c->metrics_addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    /* MHD's own limits are backstops above ours (evicted connections
     * count until MHD has closed them). */
    m->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, m, MHD_OPTION_NOTIFY_CONNECTION,
        on_notify, m, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(2 * METRICS_CONNECTIONS_MAX),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)(2 * METRICS_CONNECTIONS_MAX), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)(c->metrics_reply_timeout_ms / 1000), MHD_OPTION_END);
    if (m->mhd == NULL) {
        log_err("metrics_listen %s: libmicrohttpd did not start", m->where);
        close(m->listen_fd);
        status_history_free(m->history);
        free(m);
        return NULL;
    }
    return m;
}

void metrics_close(metrics *m)
{
    if (m == NULL)
        return;
    /* The listener first: a peer is refused from now on, rather than
     * accepted by the kernel and then cut off. */
    close(m->listen_fd);
    accept_guard_close(&m->guard);
    MHD_stop_daemon(m->mhd); /* closes and notifies every connection */
    for (int i = 0; i < METRICS_CONNECTIONS_MAX; i++)
        free(m->conns[i]); /* none left: on_notify freed them */
    log_info("metrics: stopped serving %s", m->where);
    status_history_free(m->history);
    free(m);
}

/* Give @p m (NULL: off) to the stats thread, replacing what it runs. */
static void hand_over(server *d, metrics *m)
{
    pthread_mutex_lock(&d->metrics_lock);
    if (d->metrics_pending)
        metrics_close(d->metrics_next); /* never taken: superseded */
    d->metrics_next = m;
    d->metrics_pending = true;
    pthread_mutex_unlock(&d->metrics_lock);
    uint64_t one = 1;
    if (write(d->metrics_wake_fd, &one, sizeof(one)) < 0)
        log_warn("metrics: cannot wake the stats thread: %s", strerror(errno));
}

int metrics_setup(server *d)
{
    d->metrics_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (d->metrics_wake_fd < 0)
        return -errno;
    if (!d->cfg->has_metrics)
        return 0;
    metrics *m = metrics_open(d, d->cfg);
    if (m == NULL)
        return RETRYD_EIO; /* metrics_open() logged why */
    hand_over(d, m);
    return 0;
}

static bool same_endpoint(const config *a, const config *b)
{
    return a->has_metrics == b->has_metrics &&
           (!a->has_metrics || (a->metrics_addr_len == b->metrics_addr_len &&
                                memcmp(&a->metrics_addr, &b->metrics_addr,
                                       a->metrics_addr_len) == 0));
}

void metrics_reload(server *d, const config *old, config *new)
{
    if (same_endpoint(old, new))
        return;
    metrics *m = new->has_metrics ? metrics_open(d, new) : NULL;
    if (new->has_metrics && m == NULL) {
        log_err("reload: keeping the metrics endpoint %s",
                old->has_metrics ? old->metrics_listen : "off");
        new->has_metrics = old->has_metrics;
        memcpy(new->metrics_listen, old->metrics_listen,
               sizeof(new->metrics_listen));
        new->metrics_addr = old->metrics_addr;
        new->metrics_addr_len = old->metrics_addr_len;
        return;
    }
    log_info("reload: metrics endpoint %s -> %s",
             old->has_metrics ? old->metrics_listen : "off",
             new->has_metrics ? new->metrics_listen : "off");
    hand_over(d, m);
}

void metrics_take(server *d, metrics **cur, int epfd, uint64_t listen_tag,
                  uint64_t mhd_tag)
{
    uint64_t n;
    if (read(d->metrics_wake_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
        log_warn("metrics: wake: %s", strerror(errno));
    pthread_mutex_lock(&d->metrics_lock);
    bool pending = d->metrics_pending;
    metrics *m = d->metrics_next;
    d->metrics_pending = false;
    d->metrics_next = NULL;
    pthread_mutex_unlock(&d->metrics_lock);
    if (!pending)
        return;
    metrics_close(*cur);
    *cur = m;
    if (m == NULL)
        return;
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    struct epoll_event lev = {.events = EPOLLIN, .data.u64 = listen_tag};
    struct epoll_event mev = {.events = EPOLLIN, .data.u64 = mhd_tag};
    if (di == NULL || epoll_ctl(epfd, EPOLL_CTL_ADD, m->listen_fd, &lev) < 0 ||
        epoll_ctl(epfd, EPOLL_CTL_ADD, di->epoll_fd, &mev) < 0 ||
        accept_guard_init(&m->guard, "metrics", m->listen_fd, epfd, lev) < 0) {
        log_err("metrics: cannot watch %s: %s", m->where, strerror(errno));
        metrics_close(m);
        *cur = NULL;
        return;
    }
    log_info("metrics: serving http://%s/metrics and the status page "
             "http://%s/",
             m->where, m->where);
}

void metrics_drop_pending(server *d)
{
    if (d->metrics_pending)
        metrics_close(d->metrics_next);
    d->metrics_pending = false;
    d->metrics_next = NULL;
    if (d->metrics_wake_fd >= 0)
        close(d->metrics_wake_fd);
    d->metrics_wake_fd = -1;
}
