/* SPDX-License-Identifier: MIT */
/*
 * Attaching a process to the host budget: the control connection, the
 * segment mapping, the process slot, and what happens at fork().
 *
 * The control connection stays open for the life of the attachment: its
 * hang-up is how the daemon learns that this process detached or died (it
 * also watches the pid through a pidfd). So the attachment ends when the
 * library hangs up (an exchange failed), since the daemon then releases the
 * slot and may give it to another process; it outlives the connection only
 * when the daemon died first. A forked child must not act as its parent's
 * process slot, so the child handler drops the attachment; the child
 * attaches anew on its next budget operation.
 */
#include "base/clock.h"
#include "base/macros.h"
#include "budget/host.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "shared/frame.h"
#include "retryd.pb-c.h"

/* --- counter lanes -------------------------------------------------------- */

static _Atomic unsigned lanes_taken; /* bit i: lane i has an owner */
_Thread_local int retryd__tls_lane = -1;
static pthread_key_t lane_key;
static pthread_once_t lane_once = PTHREAD_ONCE_INIT;

static void lane_release(void *arg)
{
    int lane = (int)(intptr_t)arg;
    atomic_fetch_and_explicit(&lanes_taken, ~(1u << lane),
                              memory_order_release);
}

static void lane_key_create(void)
{
    if (pthread_key_create(&lane_key, lane_release) != 0)
        lane_key = (pthread_key_t)-1;
}

int retryd__thread_lane_slow(void)
{
    if (retryd__tls_lane >= 0)
        return retryd__tls_lane;
    retryd__tls_lane = 0;
    pthread_once(&lane_once, lane_key_create);
    if (lane_key == (pthread_key_t)-1)
        return 0;
    unsigned taken = atomic_load_explicit(&lanes_taken, memory_order_relaxed);
    for (int lane = 1; lane < SEG_PROC_LANES; lane++) {
        if (taken & (1u << lane))
            continue;
        /* acquire: the previous owner's plain stores happen before ours. */
        if (atomic_compare_exchange_strong_explicit(
                &lanes_taken, &taken, taken | (1u << lane),
                memory_order_acq_rel, memory_order_relaxed)) {
            if (pthread_setspecific(lane_key, (void *)(intptr_t)lane) != 0) {
                lane_release((void *)(intptr_t)lane);
                return 0;
            }
            retryd__tls_lane = lane;
            return lane;
        }
        lane = 0; /* lost a race: rescan with the fresh mask */
    }
    return 0;
}

/* --- the attachment ------------------------------------------------------ */

/* Stop using the host's attachment: handles find none and rebind, on
 * local budgets until the host attaches again. The mapping stays, since
 * bindings may still point into it. Under h->lock. */
static void retire_attachment(retryd_host *h)
{
    attachment *a = atomic_load_explicit(&h->att, memory_order_relaxed);
    if (a == NULL)
        return;
    a->next_old = h->old_atts;
    h->old_atts = a;
    atomic_store_explicit(&h->att, NULL, memory_order_release);
}

/* Whether @p a's process slot still holds what the daemon gave us: not
 * released (which changes the state) nor given again (the generation). */
static bool slot_still_ours(const attachment *a)
{
    return atomic_load_explicit(&a->proc->ident, memory_order_acquire) ==
           a->proc_ident;
}

/* --- fork ---------------------------------------------------------------- */

static pthread_mutex_t hosts_lock = PTHREAD_MUTEX_INITIALIZER;
static retryd_host *hosts;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* Hold every lock across fork(), so the child inherits none held by a
 * thread that does not exist there. */
static void atfork_prepare(void)
{
    pthread_mutex_lock(&hosts_lock);
    for (retryd_host *h = hosts; h; h = h->next_host)
        pthread_mutex_lock(&h->lock);
}

static void atfork_parent(void)
{
    for (retryd_host *h = hosts; h; h = h->next_host)
        pthread_mutex_unlock(&h->lock);
    pthread_mutex_unlock(&hosts_lock);
}

static void atfork_child(void)
{
    for (retryd_host *h = hosts; h; h = h->next_host) {
        retire_attachment(h);
        h->resume = NULL; /* the parent's slot: the daemon would refuse */
        if (h->ctl_fd >= 0) {
            close(h->ctl_fd);
            h->ctl_fd = -1;
        }
        h->ctl_holds_slot = false;
        atomic_store_explicit(&h->next_attach_ns, 0, memory_order_relaxed);
        pthread_mutex_unlock(&h->lock);
    }
    pthread_mutex_unlock(&hosts_lock);
}

static void atfork_register(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* --- the control connection ---------------------------------------------- */

/* The pauses between connects to a full listen backlog: 1 ms, doubling to
 * at most this. */
#define CONNECT_PAUSE_MAX_NS (16u * 1000000u)

/*
 * Connect to the daemon's socket within @p timeout_ms. A Unix socket whose
 * listen backlog is full fails a non-blocking connect with EAGAIN and,
 * unlike TCP, leaves no connect in progress to wait for (polling that
 * socket only says it is not connected): the connect is tried again after
 * a short pause, until the deadline. A daemon that is busy, or was stopped
 * a moment, then still has this process attach rather than fall back to a
 * local budget at once.
 */
static int connect_unix(const char *path, int timeout_ms, int *ret_fd)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    uint64_t deadline, pause = 1000000;
    int fd, r;

    if (strlen(path) >= sizeof(sa.sun_path))
        return RETRYD_EINVAL;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return RETRYD_EIO;
    deadline = retryd__clock_monotonic_ns() + (uint64_t)timeout_ms * 1000000u;
    while ((r = connect(fd, (struct sockaddr *)&sa, sizeof(sa))) < 0 &&
           (errno == EAGAIN || errno == EINTR)) {
        uint64_t now = retryd__clock_monotonic_ns();
        if (now >= deadline) {
            errno = ETIMEDOUT;
            break;
        }
        uint64_t ns = deadline - now < pause ? deadline - now : pause;
        struct timespec ts = {(time_t)(ns / 1000000000u),
                              (long)(ns % 1000000000u)};
        nanosleep(&ts, NULL);
        pause =
            pause * 2 < CONNECT_PAUSE_MAX_NS ? pause * 2 : CONNECT_PAUSE_MAX_NS;
    }
    if (r < 0) {
        int e = errno;
        close(fd);
        return e == EACCES || e == EPERM ? RETRYD_EPERM : RETRYD_ENOTCONN;
    }
    *ret_fd = fd;
    return 0;
}

/* Send @p req on the host's connection and read the reply; *ret is
 * unpacked (caller frees). */
static int exchange(retryd_host *h, const Retryd__ControlRequest *req,
                    Retryd__ControlReply **ret, int *ret_fd)
{
    return retryd__control_exchange(h->ctl_fd, req, h->timeout_ms, ret, ret_fd);
}

/*
 * The connection is unusable (@p err says why): forget it, and wait a
 * moment before the next attempt so a dead daemon costs each caller
 * nothing.
 *
 * A live daemon releases the process slot tied to a connection when it
 * sees the hang-up (now, or once it runs again), and may give it to the
 * next process: retire the attachment so nothing more is written there.
 * The exception is a daemon that hung up first (RETRYD_ENOTCONN) and left
 * the slot as it was (one closing a live client releases the slot before
 * it closes): it died or exited, and its successor keeps the slots of live
 * processes, so the attachment stays.
 */
static void drop_connection(retryd_host *h, int err)
{
    attachment *a = atomic_load_explicit(&h->att, memory_order_relaxed);

    if (h->ctl_fd >= 0)
        close(h->ctl_fd);
    h->ctl_fd = -1;
    if (h->ctl_holds_slot && a != NULL &&
        (err != RETRYD_ENOTCONN || !slot_still_ours(a))) {
        retire_attachment(h);
        h->resume = a;
    }
    h->ctl_holds_slot = false;
    atomic_store_explicit(&h->next_attach_ns,
                          retryd__clock_coarse_ns() + 1000000000ull,
                          memory_order_relaxed);
}

static int say_hello(retryd_host *h)
{
    Retryd__Hello hello;
    retryd__hello__init(&hello);
    Retryd__ControlRequest req;
    retryd__control_request__init(&req);
    Retryd__ControlReply *rep;
    int r;

    hello.protocol_version = RETRYD_PROTOCOL_VERSION;
    hello.client = h->client_name;
    req.body_case = RETRYD__CONTROL_REQUEST__BODY_HELLO;
    req.hello = &hello;
    r = exchange(h, &req, &rep, NULL);
    if (r < 0)
        return r;
    if (rep->error < 0)
        r = rep->error;
    else if (rep->body_case != RETRYD__CONTROL_REPLY__BODY_HELLO ||
             rep->hello->protocol_version != RETRYD_PROTOCOL_VERSION)
        r = RETRYD_EVERSION;
    retryd__control_reply__free_unpacked(rep, NULL);
    return r;
}

/* What a descriptor must be sealed against before it is mapped: a peer
 * holding it could otherwise shrink it under every mapping (SIGBUS). */
#define HOST_SEALS (F_SEAL_SHRINK | F_SEAL_GROW)

/* Whether @p seg_fd is a sealed segment of exactly @p size bytes: checked
 * before mapping it. */
static int check_segment_fd(int seg_fd, uint64_t size, int *why)
{
    struct stat st;
    int seals = fcntl(seg_fd, F_GET_SEALS);
    if (seals < 0 || (seals & HOST_SEALS) != HOST_SEALS) {
        *why = RETRYD_SHARE_SEGMENT_NOT_SEALED;
        return RETRYD_ECORRUPT;
    }
    if (fstat(seg_fd, &st) < 0 || size < SEG_HEADER_SIZE ||
        size > (1ull << 36) || (uint64_t)st.st_size != size) {
        *why = RETRYD_SHARE_SEGMENT_BAD_SIZE;
        return RETRYD_ECORRUPT;
    }
    return 0;
}

/* Our process slot in view @p v, as the reply names it, or NULL. The
 * slot is ours when it holds the ident the daemon gave it: the pid it
 * wrote there is the one its own PID namespace sees, which a process in a
 * container's does not know (only a daemon that sends no ident is checked
 * by pid, as before). */
static seg_process *our_slot(const seg_view *v, const Retryd__AttachReply *ar,
                             uint64_t *ret_ident)
{
    seg_process *p = retryd__segment_process(v, ar->process_slot);
    if (v->hdr->generation != ar->generation || p == NULL)
        return NULL;
    *ret_ident = atomic_load_explicit(&p->ident, memory_order_acquire);
    if (seg_ident_state(*ret_ident) != SEG_ACTIVE)
        return NULL;
    if (ar->process_ident != 0)
        return *ret_ident == ar->process_ident ? p : NULL;
    return atomic_load_explicit(&p->pid, memory_order_relaxed) ==
                   (uint64_t)getpid()
               ? p
               : NULL;
}

/* Map the passed segment and check everything the reply claims about it;
 * *why says what was refused. */
static int map_attachment(const Retryd__AttachReply *ar, int seg_fd,
                          attachment **ret, int *why)
{
    seg_view v;
    seg_process *p = NULL;
    uint64_t ident = 0;
    int r = check_segment_fd(seg_fd, ar->segment_size, why);
    if (r < 0)
        return r;
    void *map = mmap(NULL, ar->segment_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                     seg_fd, 0);
    if (map == MAP_FAILED)
        return RETRYD_EIO;
    r = retryd__segment_view(map, ar->segment_size, &v);
    *why = r == RETRYD_EVERSION ? RETRYD_SHARE_SEGMENT_BAD_VERSION
                                : RETRYD_SHARE_SEGMENT_BAD_HEADER;
    /* A header that passed and a slot that is not what the reply says:
     * not the header's fault (retrydctl doctor must not blame it). */
    if (r == 0 && (p = our_slot(&v, ar, &ident)) == NULL) {
        r = RETRYD_ECORRUPT;
        *why = RETRYD_SHARE_PROTOCOL;
    }
    attachment *a = r == 0 ? calloc(1, sizeof(*a)) : NULL;
    if (r == 0 && a == NULL)
        r = RETRYD_ENOMEM;
    if (r < 0) {
        munmap(map, ar->segment_size);
        return r;
    }
    *a = (attachment){.view = v,
                      .proc_slot = ar->process_slot,
                      .proc_ident = ident,
                      .proc = p,
                      .generation = ar->generation};
    *ret = a;
    return 0;
}

/* Ask for the segment and a process slot, resuming @p prev's if any. */
static int request_attach(retryd_host *h, const attachment *prev,
                          attachment **ret, int *why)
{
    Retryd__Attach at;
    retryd__attach__init(&at);
    Retryd__ControlRequest req;
    retryd__control_request__init(&req);
    Retryd__ControlReply *rep;
    int seg_fd = -1, r;

    if (prev != NULL) {
        at.resume = true;
        at.resume_slot = prev->proc_slot;
        at.resume_generation = prev->generation;
    }
    req.body_case = RETRYD__CONTROL_REQUEST__BODY_ATTACH;
    req.attach = &at;
    /* From now on the daemon may tie a slot to this connection: @p prev's,
     * resumed, or a new one. */
    h->ctl_holds_slot = true;
    r = exchange(h, &req, &rep, &seg_fd);
    if (r < 0)
        return r;
    if (rep->error < 0) {
        r = rep->error;
        h->ctl_holds_slot = false; /* refused: nothing tied */
    } else if (rep->body_case != RETRYD__CONTROL_REPLY__BODY_ATTACH ||
               seg_fd < 0)
        r = RETRYD_EPROTO;
    else if (rep->attach->layout_version != SEG_LAYOUT_VERSION) {
        r = RETRYD_EVERSION;
        *why = RETRYD_SHARE_SEGMENT_BAD_VERSION;
    }
    if (r == 0)
        r = map_attachment(rep->attach, seg_fd, ret, why);
    if (seg_fd >= 0)
        close(seg_fd); /* the mapping keeps the segment */
    retryd__control_reply__free_unpacked(rep, NULL);
    return r;
}

/* The share status an attach that failed with @p err stands for, when
 * nothing more precise (@p why, from the segment's checks) is known. */
static int share_status_of(int err, int why)
{
    if (why >= 0)
        return why;
    switch (err) {
    case RETRYD_EPERM:
        return RETRYD_SHARE_NOT_AUTHORISED;
    case RETRYD_EFULL:
        return RETRYD_SHARE_NO_PROCESS_SLOT;
    case RETRYD_EVERSION:
    case RETRYD_EPROTO:
        return RETRYD_SHARE_PROTOCOL;
    default:
        return RETRYD_SHARE_NO_DAEMON;
    }
}

/* Record what an attempt found; a process still attached (to a segment
 * whose daemon went away) still shares. */
static void set_share(retryd_host *h, int err, int why)
{
    int s = atomic_load_explicit(&h->att, memory_order_relaxed) != NULL
                ? RETRYD_SHARE_SHARED
                : share_status_of(err, why);
    atomic_store_explicit(&h->share, s, memory_order_relaxed);
}

int retryd__host_attach_locked(retryd_host *h)
{
    attachment *cur = atomic_load_explicit(&h->att, memory_order_relaxed);
    attachment *a = NULL;
    int r, why = -1;

    if (h->flags & RETRYD_HOST_LOCAL_ONLY) {
        atomic_store_explicit(&h->share, RETRYD_SHARE_LOCAL_ONLY,
                              memory_order_relaxed);
        return RETRYD_ENOTCONN;
    }
    if (cur != NULL && h->ctl_fd >= 0)
        return 0;
    if (retryd__clock_coarse_ns() <
        atomic_load_explicit(&h->next_attach_ns, memory_order_relaxed))
        return cur != NULL ? 0 : RETRYD_ENOTCONN;

    r = connect_unix(h->socket_path, h->timeout_ms, &h->ctl_fd);
    if (r < 0) {
        h->ctl_fd = -1;
        drop_connection(h, r);
        set_share(h, r, why);
        return cur != NULL ? 0 : r;
    }
    r = say_hello(h);
    if (r == 0)
        r = request_attach(h, cur != NULL ? cur : h->resume, &a, &why);
    if (r < 0) {
        drop_connection(h, r);
        set_share(h, r, why);
        /* Unless that retired it, still attached to the segment we hold:
         * keep deciding on it. */
        if (atomic_load_explicit(&h->att, memory_order_relaxed) != NULL)
            return 0;
        return r;
    }
    h->resume = NULL;
    atomic_store_explicit(&h->share, RETRYD_SHARE_SHARED, memory_order_relaxed);
    if (cur != NULL && cur->generation == a->generation &&
        cur->proc_slot == a->proc_slot && cur->proc_ident == a->proc_ident) {
        /* The daemon came back and resumed our slot: nothing moves. (The
         * same index under another ident is a new slot: its entries were
         * cleared, so the bindings must claim them again.) */
        munmap(a->view.hdr, a->view.size);
        free(a);
        return 0;
    }
    retire_attachment(h);
    atomic_store_explicit(&h->att, a, memory_order_release);
    return 0;
}

int retryd__host_register_locked(retryd_host *h, retryd_upstream *up,
                                 uint32_t *ret_slot, uint32_t *ret_gen)
{
    Retryd__Register reg;
    retryd__register__init(&reg);
    Retryd__Params params;
    retryd__params__init(&params);
    Retryd__ControlRequest req;
    retryd__control_request__init(&req);
    Retryd__ControlReply *rep;
    int r;

    if (h->ctl_fd < 0)
        return RETRYD_ENOTCONN;
    reg.name = up->name;
    if (up->has_params) {
        params.ratio_micro = up->ratio_micro;
        params.floor_micro_per_s = up->floor_micro_per_s;
        params.cap_micro = up->cap_micro;
        reg.params = &params;
    }
    req.body_case = RETRYD__CONTROL_REQUEST__BODY_REGISTER;
    req.register_ = &reg;
    r = exchange(h, &req, &rep, NULL);
    if (r < 0) {
        drop_connection(h, r);
        return r;
    }
    if (rep->error < 0)
        r = rep->error;
    else if (rep->body_case != RETRYD__CONTROL_REPLY__BODY_UPSTREAM)
        r = RETRYD_EPROTO;
    else {
        *ret_slot = rep->upstream->slot;
        *ret_gen = rep->upstream->slot_generation;
    }
    retryd__control_reply__free_unpacked(rep, NULL);
    return r;
}

/* --- the host ------------------------------------------------------------ */

const retryd_budget_params retryd_budget_defaults = {
    .sz = sizeof(retryd_budget_params),
    .ratio = (double)SEG_DEFAULT_RATIO_MICRO / (double)SEG_MICRO,
    .min_retries_per_sec =
        (double)SEG_DEFAULT_FLOOR_MICRO_PER_S / (double)SEG_MICRO,
    .cap = (double)SEG_DEFAULT_CAP_MICRO / (double)SEG_MICRO,
};

static void host_free(retryd_host *h);

int retryd_host_open(const retryd_host_opts *opts, retryd_host **ret)
{
    retryd_host_opts o = {0};
    const char *path;
    retryd_host *h;

    if (ret == NULL)
        return RETRYD_EINVAL;
    if (opts != NULL) {
        if (RETRYD_COPY_OPTS(&o, opts,
                             offsetof(retryd_host_opts, flags) +
                                 sizeof(unsigned)) < 0)
            return RETRYD_EINVAL;
    }
    path =
        o.control_socket ? o.control_socket : getenv(RETRYD_CONTROL_SOCKET_ENV);
    if (path == NULL || *path == '\0')
        path = RETRYD_DEFAULT_CONTROL_SOCKET;
    if (strlen(path) >= sizeof(h->socket_path) || o.timeout_ms < 0)
        return RETRYD_EINVAL;

    h = calloc(1, sizeof(*h));
    if (h == NULL)
        return RETRYD_ENOMEM;
    pthread_mutex_init(&h->lock, NULL);
    h->ctl_fd = -1;
    memcpy(h->socket_path, path, strlen(path) + 1);
    snprintf(h->client_name, sizeof(h->client_name), "%s",
             o.client_name ? o.client_name : "");
    h->timeout_ms = o.timeout_ms ? o.timeout_ms : 1000;
    h->flags = o.flags;
    h->share = RETRYD_SHARE_NO_DAEMON; /* until the first attempt says */
    /* A fixed bucket count and no automatic resize: the table starts no
     * worker thread inside the caller's program. Handles are few. */
    h->names = cds_lfht_new_flavor(64, 64, 64, 0, &urcu_bp_flavor, NULL);
    if (h->names == NULL) {
        host_free(h);
        return RETRYD_ENOMEM;
    }

    pthread_once(&atfork_once, atfork_register);
    pthread_mutex_lock(&hosts_lock);
    h->next_host = hosts;
    hosts = h;
    pthread_mutex_unlock(&hosts_lock);

    pthread_mutex_lock(&h->lock);
    (void)retryd__host_attach_locked(h); /* no daemon: local budgets */
    pthread_mutex_unlock(&h->lock);
    *ret = h;
    return 0;
}

static void free_bindings(binding *b)
{
    for (binding *next; b; b = next) {
        next = b->next_old;
        free(b);
    }
}

static void host_free(retryd_host *h)
{
    retire_attachment(h); /* onto old_atts, freed with the others */
    for (attachment *next; h->old_atts; h->old_atts = next) {
        next = h->old_atts->next_old;
        munmap(h->old_atts->view.hdr, h->old_atts->view.size);
        free(h->old_atts);
    }
    /* No reader is left (the caller's guarantee): empty the table, which
     * cds_lfht_destroy() requires, then free the handles themselves. */
    for (retryd_upstream *up = h->all; up && h->names; up = up->next_all)
        if (!cds_lfht_is_node_deleted(&up->node))
            cds_lfht_del(h->names, &up->node);
    for (retryd_upstream *next; h->all; h->all = next) {
        next = h->all->next_all;
        free_bindings(atomic_load(&h->all->bind));
        free_bindings(h->all->old_bindings);
        free(h->all);
    }
    if (h->names != NULL)
        cds_lfht_destroy(h->names, NULL);
    if (h->ctl_fd >= 0)
        close(h->ctl_fd); /* the daemon frees our process slot */
    pthread_mutex_destroy(&h->lock);
    free(h);
}

void retryd_host_close(retryd_host *host)
{
    if (host == NULL)
        return;
    pthread_mutex_lock(&hosts_lock);
    for (retryd_host **p = &hosts; *p; p = &(*p)->next_host) {
        if (*p == host) {
            *p = host->next_host;
            break;
        }
    }
    pthread_mutex_unlock(&hosts_lock);
    host_free(host);
}

bool retryd_host_attached(retryd_host *host)
{
    return host != NULL &&
           atomic_load_explicit(&host->att, memory_order_acquire) != NULL;
}

void retryd_host_set_draining(retryd_host *host, bool on)
{
    if (host != NULL)
        atomic_store_explicit(&host->local_draining, on, memory_order_release);
}

bool retryd_host_draining(retryd_host *host)
{
    if (host == NULL)
        return false;
    if (atomic_load_explicit(&host->local_draining, memory_order_acquire))
        return true;
    attachment *a = atomic_load_explicit(&host->att, memory_order_acquire);
    return a != NULL &&
           (atomic_load_explicit(&a->view.hdr->flags, memory_order_acquire) &
            SEG_FLAG_DRAINING);
}

retryd_share_status retryd_host_share_status(retryd_host *host)
{
    if (host == NULL)
        return RETRYD_SHARE_NO_DAEMON;
    return (retryd_share_status)atomic_load_explicit(&host->share,
                                                     memory_order_relaxed);
}

const char *retryd_share_status_name(retryd_share_status s)
{
    static const char *const names[] = {
        [RETRYD_SHARE_SHARED] = "shared",
        [RETRYD_SHARE_LOCAL_ONLY] = "local-only",
        [RETRYD_SHARE_NO_DAEMON] = "no-daemon",
        [RETRYD_SHARE_NOT_AUTHORISED] = "not-authorised",
        [RETRYD_SHARE_SEGMENT_BAD_HEADER] = "segment-bad-header",
        [RETRYD_SHARE_SEGMENT_BAD_VERSION] = "segment-bad-version",
        [RETRYD_SHARE_SEGMENT_BAD_SIZE] = "segment-bad-size",
        [RETRYD_SHARE_SEGMENT_NOT_SEALED] = "segment-not-sealed",
        [RETRYD_SHARE_NO_PROCESS_SLOT] = "no-process-slot",
        [RETRYD_SHARE_PROTOCOL] = "protocol",
    };
    if ((unsigned)s >= sizeof(names) / sizeof(names[0]))
        return "unknown";
    return names[s];
}
