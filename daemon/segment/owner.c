/* SPDX-License-Identifier: MIT */
#include "segment/owner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "core/rcu.h"

#include "shared/bucket.h"
#include "shared/hedge.h"
#include "segment/fleet_slots.h"
#include "segment/keeper.h"
#include "segment/audit.h"
#include "segment/shares.h"
#include "core/log.h"
#include "retryd.pb-c.h"
#include "retryd/common.h"

/* What a segment must be sealed against: a peer holding its descriptor
 * could otherwise shrink it (every mapping faults: SIGBUS) or grow it. */
#define OWNER_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static int map_fd(owner *o, int fd, size_t size)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return RETRYD_EIO;
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return RETRYD_EIO;
    o->fd_mode = st.st_mode & 07777;
    o->fd_dev = st.st_dev;
    o->fd_ino = st.st_ino;
    o->fd = fd;
    o->map = m;
    o->size = size;
    return 0;
}

/* Why a received segment cannot be adopted, or NULL when it can. */
static const char *adopt_check(owner *o, const config *c, int fd)
{
    struct stat st;
    size_t want =
        retryd__segment_size(c->upstream_capacity, c->process_capacity);
    int seals = fcntl(fd, F_GET_SEALS);
    if (fstat(fd, &st) < 0)
        return "cannot stat it";
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
        return "not a segment of ours";
    if (seals < 0 || (seals & OWNER_SEALS) != OWNER_SEALS)
        return "not sealed against resizing (not a segment memfd)";
    if (st.st_size != (off_t)want)
        return "another size (other capacities?)";
    if (map_fd(o, fd, want) < 0)
        return "cannot map it";
    int r = retryd__segment_view(o->map, o->size, &o->view);
    if (r == RETRYD_EVERSION)
        return "another layout version";
    if (r < 0)
        return "header failed validation";
    if (o->view.upstream_capacity != c->upstream_capacity ||
        o->view.process_capacity != c->process_capacity)
        return "other capacities";
    return NULL;
}

/* A new memfd of @p size bytes, its space reserved and sealed against
 * resizing; a negative errno with @p why set. */
static int new_memfd(size_t size, char *why, size_t why_len)
{
    int fd = memfd_create("retryd-segment", MFD_ALLOW_SEALING | MFD_CLOEXEC);
    int err = fd < 0 ? errno : 0;
    /* Beyond RLIMIT_FSIZE ftruncate raises SIGXFSZ, whose default kills
     * the daemon: ignored, it fails with EFBIG, which is said below. */
    signal(SIGXFSZ, SIG_IGN);
    if (err == 0 && ftruncate(fd, (off_t)size) < 0)
        err = errno;
    /* Reserved now, so a full tmpfs or a memory limit is an error at
     * start-up, not a SIGBUS in a client at its first write to a page. */
    if (err == 0)
        err = posix_fallocate(fd, 0, (off_t)size);
    if (err == 0 && fcntl(fd, F_ADD_SEALS, OWNER_SEALS) < 0)
        err = errno;
    if (err == 0)
        return fd;
    snprintf(why, why_len,
             "cannot reserve %zu bytes (%.1f MiB) for the segment: %s "
             "(lower upstream_capacity or process_capacity, or raise the "
             "memory or file size limit)",
             size, (double)size / (1024.0 * 1024.0), strerror(err));
    if (fd >= 0)
        close(fd);
    return -err;
}

static int create(owner *o, const config *c, char *why, size_t why_len)
{
    size_t size =
        retryd__segment_size(c->upstream_capacity, c->process_capacity);
    uint64_t gen = 0;
    int fd = new_memfd(size, why, why_len);
    if (fd < 0)
        return fd;
    if (map_fd(o, fd, size) < 0) {
        snprintf(why, why_len, "cannot map the segment: %s", strerror(errno));
        close(fd);
        return RETRYD_EIO;
    }
    while (gen == 0)
        if (getrandom(&gen, sizeof(gen), 0) != (ssize_t)sizeof(gen))
            gen = retryd__clock_monotonic_ns() ^ (uint64_t)getpid() << 32;
    retryd__segment_format_zeroed(o->map, c->upstream_capacity,
                                  c->process_capacity, gen,
                                  retryd__clock_realtime_ms());
    int r = retryd__segment_view(o->map, o->size, &o->view);
    if (r == 0)
        r = keeper_start(c->segment_path, fd, why, why_len);
    return r;
}

/* Slots [0, high-water) may be in use (readers scan only those): raise the
 * mark over slot @p i. */
static void cover_upstream(owner *o, uint32_t i)
{
    if (i + 1 > atomic_load(&o->view.hdr->upstream_high_water))
        atomic_store(&o->view.hdr->upstream_high_water, i + 1);
}

/* An adopted header's mark may be short of its slots (another writer's
 * damage): it covers every active one again. */
static void cover_active_upstreams(owner *o)
{
    for (uint32_t i = 0; i < o->view.upstream_capacity; i++)
        if (seg_ident_state(atomic_load(&o->view.upstreams[i].ident)) ==
            SEG_ACTIVE)
            cover_upstream(o, i);
}

/* Why the segment c->segment_path names cannot be adopted, NULL when it
 * was (mapped into @p o). */
static const char *try_adopt(owner *o, const config *c, const struct stat *lst)
{
    if (!S_ISLNK(lst->st_mode))
        return "not a keeper's link (an older retryd's file?)";
    int fd = open(c->segment_path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return "no keeper holds it any more";
    const char *bad = adopt_check(o, c, fd);
    if (bad != NULL && o->fd != fd)
        close(fd);
    return bad;
}

/* Read /proc/PID/comm into @p slot's program name, sanitised: a byte
 * outside printable ASCII becomes '?' (a label must be valid UTF-8, and
 * the kernel cuts a name at 15 bytes, maybe inside a character). */
static void read_program(owner *o, uint32_t slot, uint64_t pid)
{
    char path[48], name[OWNER_PROGRAM_MAX] = {0};
    snprintf(path, sizeof(path), "/proc/%llu/comm", (unsigned long long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, name, sizeof(name) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n < 0)
        n = 0;
    while (n > 0 && name[n - 1] == '\n')
        n--;
    memset(name + n, 0, sizeof(name) - (size_t)n);
    for (ssize_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || (unsigned char)name[i] >= 0x7f)
            name[i] = '?';
    uint64_t w[2];
    memcpy(w, name, sizeof(w));
    atomic_store_explicit(&o->programs[slot].w[0], w[0], memory_order_relaxed);
    atomic_store_explicit(&o->programs[slot].w[1], w[1], memory_order_relaxed);
}

void owner_process_program(const owner *o, uint32_t slot,
                           char out[OWNER_PROGRAM_MAX])
{
    uint64_t w[2] = {0, 0};
    if (o->programs != NULL && slot < o->view.process_capacity) {
        w[0] =
            atomic_load_explicit(&o->programs[slot].w[0], memory_order_relaxed);
        w[1] =
            atomic_load_explicit(&o->programs[slot].w[1], memory_order_relaxed);
    }
    memcpy(out, w, OWNER_PROGRAM_MAX);
    out[OWNER_PROGRAM_MAX - 1] = '\0';
}

/* The daemon's own copies of what it finds in an adopted segment (what it
 * then retires or releases updates them) or wrote into a new one. */
static int take_copies(owner *o)
{
    o->slots = calloc(o->view.upstream_capacity, sizeof(*o->slots));
    o->procs = calloc(o->view.process_capacity, sizeof(*o->procs));
    o->programs = calloc(o->view.process_capacity, sizeof(*o->programs));
    if (o->slots == NULL || o->procs == NULL || o->programs == NULL)
        return RETRYD_ENOMEM;
    memcpy(&o->hdr_copy, o->view.hdr, sizeof(o->hdr_copy));
    o->draining = atomic_load(&o->view.hdr->flags) & SEG_FLAG_DRAINING;
    for (uint32_t i = 0; i < o->view.upstream_capacity; i++) {
        seg_upstream *s = &o->view.upstreams[i];
        owner_slot *w = &o->slots[i];
        w->ident = atomic_load(&s->ident);
        w->params = (budget_params){.ratio_micro = atomic_load(&s->ratio_micro),
                                    .floor_micro_per_s =
                                        atomic_load(&s->floor_micro_per_s),
                                    .cap_micro = atomic_load(&s->cap_micro)};
        budget_params_read_share(&w->params, s);
        health_params h;
        retryd__health_params_of(s, &h);
        if (!retryd__health_params_ok(&h))
            h = retryd__health_defaults; /* the heartbeat rewrites it */
        budget_params_set_health(&w->params, &h);
        hedge_params hp;
        retryd__hedge_params_of(&s->hedge, &hp);
        if (!retryd__hedge_params_ok(&hp))
            hp = retryd__hedge_defaults; /* the heartbeat rewrites it */
        budget_params_set_hedge(&w->params, &hp);
        memcpy(w->name, s->name, sizeof(w->name));
        w->name[SEG_NAME_MAX] = '\0';
    }
    for (uint32_t i = 0; i < o->view.process_capacity; i++) {
        seg_process *p = &o->view.processes[i];
        o->procs[i] =
            (owner_proc){atomic_load(&p->ident), atomic_load(&p->pid),
                         atomic_load(&p->start_time), atomic_load(&p->uid),
                         OWNER_FREED_WATCH_BEATS};
        /* An adopted process's name; one that is gone or not the same
         * process (start time) has its slot freed before stats are
         * served. */
        if (seg_ident_state(o->procs[i].ident) == SEG_ACTIVE &&
            o->procs[i].pid > 0 && o->procs[i].pid < (1u << 22))
            read_program(o, i, o->procs[i].pid);
    }
    return 0;
}

static void stamp_heartbeat(owner *o)
{
    atomic_store_explicit(&o->view.hdr->heartbeat_ns,
                          retryd__clock_monotonic_ns(), memory_order_release);
}

int owner_open(owner *o, const config *c, bool *ret_adopted, char *why,
               size_t why_len)
{
    struct stat lst;
    int r;

    memset(o, 0, sizeof(*o));
    o->fd = -1;
    *ret_adopted = false;
    if (lstat(c->segment_path, &lst) == 0) {
        const char *bad = try_adopt(o, c, &lst);
        if (bad == NULL) {
            *ret_adopted = true;
            cover_active_upstreams(o);
            goto ready;
        }
        log_warn("retiring segment %s: %s", c->segment_path, bad);
        owner_close(o);
        /* Its keeper, if any, sees its link gone and exits. */
        if (unlink(c->segment_path) < 0 && errno != ENOENT) {
            snprintf(why, why_len, "cannot remove %s: %s", c->segment_path,
                     strerror(errno));
            return RETRYD_EIO;
        }
    } else if (errno != ENOENT) {
        snprintf(why, why_len, "cannot look at %s: %s", c->segment_path,
                 strerror(errno));
        return RETRYD_EIO;
    }
    r = create(o, c, why, why_len);
    if (r < 0) {
        owner_close(o);
        return r;
    }
ready:
    o->generation = o->view.hdr->generation;
    atomic_store(&o->view.hdr->daemon_pid, (uint64_t)getpid());
    atomic_store(&o->view.hdr->daemon_start_time,
                 retryd__process_start_time((uint64_t)getpid()));
    if (take_copies(o) < 0 || owner_fleet_open(o) < 0 ||
        owner_audit_open(o) < 0) {
        snprintf(why, why_len, "out of memory");
        owner_close(o);
        return RETRYD_ENOMEM;
    }
    stamp_heartbeat(o); /* policed from the first tick on */
    return 0;
}

void owner_close(owner *o)
{
    if (o->map != NULL)
        munmap(o->map, o->size);
    if (o->fd >= 0)
        close(o->fd);
    free(o->slots);
    free(o->procs);
    free(o->programs);
    owner_shares_free(o);
    owner_audit_free(o);
    owner_fleet_free(o);
    o->slots = NULL;
    o->procs = NULL;
    o->programs = NULL;
    o->map = NULL;
    o->fd = -1;
}

/* The memfd's owner and mode as made: put back, or said. */
static void check_fd_owner(owner *o)
{
    struct stat st;
    uid_t me = geteuid();
    if (fstat(o->fd, &st) < 0 ||
        (st.st_uid == me && (st.st_mode & 07777) == o->fd_mode))
        return;
    bool fixed = (st.st_uid == me || fchown(o->fd, me, (gid_t)-1) == 0) &&
                 fchmod(o->fd, o->fd_mode) == 0;
    log_limited(fixed ? LOG_WARN : LOG_ERR,
                "the segment's descriptor was given uid %u mode %04o (an "
                "attached process with the privilege ran fchown or fchmod "
                "on it): %s",
                (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                fixed ? "put back"
                      : "cannot put it back: a restart will not adopt the "
                        "segment, and the balances will start afresh");
}

/* The keeper's link still leads to our memfd; else a new keeper. */
static void check_keeper(owner *o, const char *link_path)
{
    struct stat st;
    if (stat(link_path, &st) == 0 && st.st_dev == o->fd_dev &&
        st.st_ino == o->fd_ino)
        return;
    char why[256];
    int r = keeper_start(link_path, o->fd, why, sizeof(why));
    log_limited(r == 0 ? LOG_WARN : LOG_ERR,
                "the segment keeper is gone (killed, or its link %s "
                "removed): %s",
                link_path, r == 0 ? "a new one holds the segment" : why);
}

void owner_check_envelope(owner *o, const char *link_path)
{
    if (o->fd < 0)
        return;
    check_fd_owner(o);
    check_keeper(o, link_path);
}

void owner_set_draining(owner *o, bool on)
{
    atomic_store(&o->draining, on);
    if (on)
        atomic_fetch_or(&o->view.hdr->flags, SEG_FLAG_DRAINING);
    else
        atomic_fetch_and(&o->view.hdr->flags, ~SEG_FLAG_DRAINING);
}

/* The daemon's word, not the segment's: a peer may flip the flag there
 * (the heartbeat flips it back). */
bool owner_draining(const owner *o)
{
    return atomic_load(&o->draining);
}

static void write_params(seg_upstream *s, const budget_params *p)
{
    uint64_t cap =
        p->cap_micro > SEG_MAX_CAP_MICRO ? SEG_MAX_CAP_MICRO : p->cap_micro;
    atomic_store(&s->ratio_micro, p->ratio_micro);
    atomic_store(&s->floor_micro_per_s, p->floor_micro_per_s);
    atomic_store(&s->cap_micro, cap);
    atomic_store(&s->share_window_ns, budget_params_slot_window(p));
    atomic_store(&s->request_share_micro, p->request_share_micro);
}

int owner_upstream_alloc(owner *o, const char *name, const budget_params *p,
                         uint32_t *ret_slot, uint32_t *ret_gen)
{
    for (uint32_t i = 0; i < o->view.upstream_capacity; i++) {
        seg_upstream *s = &o->view.upstreams[i];
        uint64_t id = o->slots[i].ident; /* ours: the segment's may lie */
        if (seg_ident_state(id) == SEG_ACTIVE)
            continue;
        /* FREE or RETIRED: a new generation either way (a fresh slot
         * starts at 1). Retiring already bumped it, and this bumps it
         * again: a stale handle's take that lands on the retired word
         * gives its token back to the retired generation, never to the
         * new bucket. */
        uint32_t gen = seg_ident_generation(id) + 1;
        for (int c = 0; c < SEG_COUNTERS; c++)
            atomic_store(&s->counters[c], 0);
        memset(s->name, 0, sizeof(s->name));
        memcpy(s->name, name, strlen(name));
        uint64_t initial = p->floor_micro_per_s; /* one second of floor */
        retryd__bucket_init(s, gen, p->ratio_micro, p->floor_micro_per_s,
                            p->cap_micro, initial, retryd__clock_coarse_ns());
        write_params(s, p);
        health_params h = budget_params_health(p);
        retryd__health_init(s, &h);
        hedge_params hp = budget_params_hedge(p);
        retryd__hedge_init(&s->hedge, &hp, retryd__clock_coarse_ns());
        owner_fleet_forget(o, i); /* nothing of a previous occupant's */
        atomic_store_explicit(&s->ident, seg_ident(gen, SEG_ACTIVE),
                              memory_order_release);
        o->slots[i].ident = seg_ident(gen, SEG_ACTIVE);
        o->slots[i].params = *p;
        if (p->cap_micro > SEG_MAX_CAP_MICRO)
            o->slots[i].params.cap_micro = SEG_MAX_CAP_MICRO;
        memcpy(o->slots[i].name, s->name, sizeof(o->slots[i].name));
        owner_audit_fresh(o, i,
                          initial < o->slots[i].params.cap_micro
                              ? initial
                              : o->slots[i].params.cap_micro,
                          atomic_load(&s->last_refill_ns));
        cover_upstream(o, i);
        *ret_slot = i;
        *ret_gen = gen;
        return 0;
    }
    return RETRYD_EFULL;
}

void owner_upstream_set_params(owner *o, uint32_t slot, const budget_params *p)
{
    seg_upstream *s = retryd__segment_upstream(&o->view, slot);
    if (s == NULL)
        return;
    write_params(s, p);
    if (!budget_health_equal(&o->slots[slot].params, p)) {
        /* A new window length makes the old window unreadable: it
         * starts again, empty, as does any hold. */
        health_params h = budget_params_health(p);
        retryd__health_init(s, &h);
    }
    if (!budget_hedge_equal(&o->slots[slot].params, p)) {
        hedge_params hp = budget_params_hedge(p);
        retryd__hedge_set_params(&s->hedge, &hp);
    }
    o->slots[slot].params = *p;
    if (p->cap_micro > SEG_MAX_CAP_MICRO)
        o->slots[slot].params.cap_micro = SEG_MAX_CAP_MICRO;
    /* A lower cap binds at once: the balance above it is discarded (and
     * counted), not left for clients to spend. */
    bucket_tally t = {s->counters, false, NULL, NULL};
    (void)retryd__bucket_check(s, atomic_load(&s->ident),
                               retryd__clock_coarse_ns(), &t);
}

void owner_upstream_retire(owner *o, uint32_t slot)
{
    seg_upstream *s = retryd__segment_upstream(&o->view, slot);
    if (s == NULL)
        return;
    /* One past both the daemon's generation and the segment's, so no
     * handle of either can match the retired slot. */
    uint32_t gen = seg_ident_generation(atomic_load(&s->ident));
    if (seg_ident_generation(o->slots[slot].ident) > gen)
        gen = seg_ident_generation(o->slots[slot].ident);
    gen++;
    o->slots[slot].ident = seg_ident(gen, SEG_RETIRED);
    /* The ident first (handles check it), then the token word, whose new
     * generation refuses any in-flight take or credit of a stale handle
     * (a take gives its token back to this retired word). */
    atomic_store_explicit(&s->ident, seg_ident(gen, SEG_RETIRED),
                          memory_order_release);
    atomic_store_explicit(&s->tokens, seg_token_word(gen, 0),
                          memory_order_release);
    owner_fleet_forget(o, slot);
}

int owner_process_alloc(owner *o, pid_t pid, uint64_t start_time, uid_t uid,
                        uint32_t *ret_slot)
{
    for (uint32_t i = 0; i < o->view.process_capacity; i++) {
        seg_process *p = &o->view.processes[i];
        uint64_t id = o->procs[i].ident;
        if (seg_ident_state(id) != SEG_FREE)
            continue;
        /* Freed slots were zeroed by owner_process_release(), but for the
         * entry keys it keeps watched. */
        memset(p->entry_upstream, 0, sizeof(p->entry_upstream));
        atomic_store(&p->pid, (uint64_t)pid);
        atomic_store(&p->start_time, start_time);
        atomic_store(&p->uid, (uint64_t)uid);
        atomic_store(&p->attached_unix_ms, retryd__clock_realtime_ms());
        read_program(o, i, (uint64_t)pid); /* before the slot shows ACTIVE */
        atomic_store_explicit(
            &p->ident, seg_ident(seg_ident_generation(id) + 1, SEG_ACTIVE),
            memory_order_release);
        o->procs[i] =
            (owner_proc){seg_ident(seg_ident_generation(id) + 1, SEG_ACTIVE),
                         (uint64_t)pid, start_time, (uint64_t)uid, 0};
        *ret_slot = i;
        return 0;
    }
    return RETRYD_EFULL;
}

bool owner_process_matches(const owner *o, uint32_t slot, pid_t pid,
                           uint64_t start_time)
{
    if (retryd__segment_process(&o->view, slot) == NULL)
        return false;
    const owner_proc *w = &o->procs[slot];
    return seg_ident_state(w->ident) == SEG_ACTIVE && w->pid == (uint64_t)pid &&
           w->start_time == start_time;
}

/* The upstream an entry key names, if that upstream still has the key's
 * generation. */
static seg_upstream *entry_upstream(const owner *o, uint64_t key)
{
    if (key == 0)
        return NULL;
    seg_upstream *s =
        retryd__segment_upstream(&o->view, (uint32_t)(key >> 32) - 1);
    if (s == NULL)
        return NULL;
    uint64_t id = atomic_load(&s->ident);
    return seg_ident_state(id) == SEG_ACTIVE &&
                   seg_ident_generation(id) == (uint32_t)key
               ? s
               : NULL;
}

int64_t owner_key_slot(const owner *o, uint64_t key)
{
    if (key == 0)
        return -1;
    uint32_t i = (uint32_t)(key >> 32) - 1;
    if (i >= o->view.upstream_capacity)
        return -1;
    uint64_t id = o->slots[i].ident; /* ours: the segment's may lie */
    return seg_ident_state(id) == SEG_ACTIVE &&
                   seg_ident_generation(id) == (uint32_t)key
               ? (int64_t)i
               : -1;
}

uint64_t owner_entry_sum(const seg_process *p, int e, int c)
{
    uint64_t sum = 0;
    for (int lane = 0; lane < SEG_PROC_LANES; lane++)
        sum += atomic_load_explicit(&p->counters[lane][e][c],
                                    memory_order_relaxed);
    return sum;
}

void owner_process_release(owner *o, uint32_t slot)
{
    seg_process *p = retryd__segment_process(&o->view, slot);
    if (p == NULL)
        return;
    uint64_t id = o->procs[slot].ident; /* ours: the segment's may lie */
    uint32_t gen = seg_ident_generation(id);
    if (seg_ident_state(id) == SEG_FREE)
        return;
    if (o->on_released != NULL)
        o->on_released(o->on_released_arg, slot);
    /* Hide the slot from stats readers, wait until none still sums it,
     * then move its counters into the upstreams: never counted twice. */
    atomic_store_explicit(&p->ident, seg_ident(gen, SEG_RETIRED),
                          memory_order_release);
    rd_rcu_synchronize();
    owner_shares_release(o, slot);
    for (int e = 0; e < SEG_PROC_ENTRIES; e++) {
        seg_upstream *s = entry_upstream(o, atomic_load(&p->entry_upstream[e]));
        if (s == NULL)
            continue;
        for (int c = 0; c < SEG_COUNTERS; c++)
            atomic_fetch_add(&s->counters[c], owner_entry_sum(p, e, c));
    }
    /* Everything but the entry keys: a process still writing through
     * this slot (forked without the library's handler) is seen by them,
     * and its counts folded (police_freed()). */
    memset((char *)p + sizeof(p->ident), 0,
           offsetof(seg_process, entry_upstream) - sizeof(p->ident));
    memset(&p->claim, 0, sizeof(*p) - offsetof(seg_process, claim));
    atomic_store_explicit(&p->ident, seg_ident(gen, SEG_FREE),
                          memory_order_release);
    o->procs[slot] = (owner_proc){seg_ident(gen, SEG_FREE), 0, 0, 0,
                                  OWNER_FREED_WATCH_BEATS};
}

unsigned owner_collect(const owner *o, uint64_t (*per_upstream)[SEG_COUNTERS])
{
    unsigned active = 0;
    uint32_t hw = atomic_load(&o->view.hdr->upstream_high_water);
    if (hw > o->view.upstream_capacity)
        hw = o->view.upstream_capacity;
    for (uint32_t i = 0; i < hw; i++)
        for (int c = 0; c < SEG_COUNTERS; c++)
            per_upstream[i][c] = atomic_load_explicit(
                &o->view.upstreams[i].counters[c], memory_order_relaxed);
    for (uint32_t i = 0; i < o->view.process_capacity; i++) {
        const seg_process *p = &o->view.processes[i];
        if (seg_ident_state(atomic_load(&p->ident)) != SEG_ACTIVE)
            continue;
        active++;
        for (int e = 0; e < SEG_PROC_ENTRIES; e++) {
            uint64_t key = atomic_load(&p->entry_upstream[e]);
            seg_upstream *s = entry_upstream(o, key);
            if (s == NULL)
                continue;
            uint32_t u = (uint32_t)(key >> 32) - 1;
            for (int c = 0; c < SEG_COUNTERS; c++)
                per_upstream[u][c] += owner_entry_sum(p, e, c);
        }
    }
    return active;
}

void owner_process_totals(const owner *o, uint32_t slot,
                          uint64_t out[SEG_COUNTERS])
{
    memset(out, 0, sizeof(uint64_t) * SEG_COUNTERS);
    const seg_process *p = retryd__segment_process(&o->view, slot);
    if (p == NULL)
        return;
    for (int e = 0; e < SEG_PROC_ENTRIES; e++)
        for (int c = 0; c < SEG_COUNTERS; c++)
            out[c] += owner_entry_sum(p, e, c);
}

uint64_t owner_entry_totals(const owner *o, uint32_t slot, int e,
                            uint64_t out[SEG_COUNTERS])
{
    memset(out, 0, sizeof(uint64_t) * SEG_COUNTERS);
    const seg_process *p = retryd__segment_process(&o->view, slot);
    if (p == NULL || e < 0 || e >= SEG_PROC_ENTRIES)
        return 0;
    uint64_t key = atomic_load(&p->entry_upstream[e]);
    for (int c = 0; key != 0 && c < SEG_COUNTERS; c++)
        out[c] = owner_entry_sum(p, e, c);
    return key;
}

/* --- policing ------------------------------------------------------------ */

static const char *const damage_what[OWNER_DAMAGE_KINDS] = {
    [OWNER_D_HEADER] = "header fields rewritten from the daemon's copy",
    [OWNER_D_SLOT_IDENT] = "upstream slot idents or names restored",
    [OWNER_D_PARAMS] = "upstream parameters reset from the registry",
    [OWNER_D_BALANCE] = "balances above the cap clamped (discarded)",
    [OWNER_D_REFILL] = "refill stamps in the future reset to now",
    [OWNER_D_RETIRED] = "upstream slots beyond repair retired",
    [OWNER_D_FORGED] = "active slots the daemon never gave out undone",
    [OWNER_D_PROCESS] = "process slot idents or owners restored",
    [OWNER_D_HEALTH] = "health windows or pushback holds repaired",
    [OWNER_D_SHARES] = "sums of fair-share claims put back",
    [OWNER_D_FREED] = "counts written into freed process slots moved to "
                      "their upstreams (a process forked without "
                      "libretryd's fork handler?)",
    [OWNER_D_BALANCE_UNEXPLAINED] = "balances above what the ledgers explain "
                                    "taken back",
    [OWNER_D_REFILL_UNEXPLAINED] = "refill stamps set back, or refills "
                                   "beyond what the floor pays, undone",
    [OWNER_D_LEDGER] = "process ledgers rewritten (a count went back, an "
                       "entry moved)",
    [OWNER_D_HEDGE] = "hedge pictures or hedge balances repaired",
    [OWNER_D_FLEET] = "fleet blocks put back from the daemon's copy",
};

void owner_found(owner *o, enum owner_damage kind)
{
    atomic_fetch_add_explicit(&o->damage[kind], 1, memory_order_relaxed);
    atomic_store_explicit(&o->last_damage_unix_ms, retryd__clock_realtime_ms(),
                          memory_order_relaxed);
    o->unlogged[kind]++;
}

/* One line per kind per OWNER_DAMAGE_LOG_NS, however much was found: a
 * peer scribbling in a loop must not flood the log. */
static void log_damage(owner *o, uint64_t now_ns)
{
    for (int k = 0; k < OWNER_DAMAGE_KINDS; k++) {
        if (o->unlogged[k] == 0 ||
            (o->logged_ns[k] != 0 &&
             now_ns - o->logged_ns[k] < OWNER_DAMAGE_LOG_NS))
            continue;
        log_warn("segment damage: %llu %s since the last report (%llu in "
                 "all); some process that maps the segment writes where it "
                 "must not",
                 (unsigned long long)o->unlogged[k], damage_what[k],
                 (unsigned long long)atomic_load(&o->damage[k]));
        o->unlogged[k] = 0;
        o->logged_ns[k] = now_ns;
    }
}

/* The header: the immutable part, the daemon's words, the flags and the
 * high-water mark. */
static void police_header(owner *o)
{
    seg_header *h = o->view.hdr;
    size_t fixed = offsetof(seg_header, daemon_pid);
    uint64_t pid = (uint64_t)getpid();
    if (memcmp(h, &o->hdr_copy, fixed) != 0) {
        /* The magic last, as at creation: a reader that sees it sees the
         * rest. */
        memcpy((char *)h + sizeof(h->magic),
               (const char *)&o->hdr_copy + sizeof(h->magic),
               fixed - sizeof(h->magic));
        __atomic_store_n(&h->magic, SEG_MAGIC, __ATOMIC_RELEASE);
        owner_found(o, OWNER_D_HEADER);
    }
    uint32_t flags = atomic_load(&o->draining) ? SEG_FLAG_DRAINING : 0;
    if (atomic_load(&h->daemon_pid) != pid ||
        atomic_load(&h->daemon_start_time) !=
            atomic_load(&o->hdr_copy.daemon_start_time) ||
        atomic_load(&h->flags) != flags) {
        atomic_store(&h->daemon_pid, pid);
        atomic_store(&h->daemon_start_time,
                     atomic_load(&o->hdr_copy.daemon_start_time));
        atomic_store(&h->flags, flags);
        owner_found(o, OWNER_D_HEADER);
    }
}

static bool params_differ(const seg_upstream *s, const budget_params *p)
{
    return atomic_load(&s->share_window_ns) != budget_params_slot_window(p) ||
           atomic_load(&s->request_share_micro) != p->request_share_micro ||
           atomic_load(&s->ratio_micro) != p->ratio_micro ||
           atomic_load(&s->floor_micro_per_s) != p->floor_micro_per_s ||
           atomic_load(&s->cap_micro) != p->cap_micro;
}

/* A slot the daemon holds FREE or RETIRED must say so; nobody may spend
 * from it. */
static void police_idle_slot(owner *o, seg_upstream *s, const owner_slot *w)
{
    uint64_t id = atomic_load(&s->ident);
    if (id == w->ident)
        return;
    owner_found(o, seg_ident_state(id) == SEG_ACTIVE ? OWNER_D_FORGED
                                                     : OWNER_D_SLOT_IDENT);
    atomic_store_explicit(&s->ident, w->ident, memory_order_release);
    if (seg_ident_state(w->ident) == SEG_RETIRED)
        atomic_store_explicit(&s->tokens,
                              seg_token_word(seg_ident_generation(w->ident), 0),
                              memory_order_release);
}

static void police_upstream(owner *o, uint32_t i, uint64_t now_ns)
{
    seg_upstream *s = &o->view.upstreams[i];
    owner_slot *w = &o->slots[i];
    if (seg_ident_state(w->ident) != SEG_ACTIVE) {
        police_idle_slot(o, s, w);
        return;
    }
    if (atomic_load(&s->ident) != w->ident ||
        memcmp(s->name, w->name, sizeof(w->name)) != 0) {
        memcpy(s->name, w->name, sizeof(w->name));
        atomic_store_explicit(&s->ident, w->ident, memory_order_release);
        owner_found(o, OWNER_D_SLOT_IDENT);
    }
    if (params_differ(s, &w->params)) {
        write_params(s, &w->params);
        owner_found(o, OWNER_D_PARAMS);
    }
    /* The health window (docs/health.md): parameters not the daemon's
     * start it again; a word no writer could leave, or a hold beyond
     * pushback_max, is repaired, so a scribble throttles or holds no
     * longer than one window. */
    health_params want = budget_params_health(&w->params), have;
    retryd__health_params_of(s, &have);
    if (memcmp(&want, &have, sizeof(want)) != 0) {
        retryd__health_init(s, &want);
        owner_found(o, OWNER_D_PARAMS);
    } else if (retryd__health_check(s, now_ns, o->view.process_capacity,
                                    &want) != 0) {
        owner_found(o, OWNER_D_HEALTH);
    }
    /* Hedging (docs/hedging.md): its parameters put back; a picture, a
     * claim or a hedge balance no writer could leave, repaired. */
    hedge_params hp = budget_params_hedge(&w->params);
    unsigned hd = retryd__hedge_check(&s->hedge, now_ns, &hp);
    if (hd & HEDGE_PARAMS_RESET)
        owner_found(o, OWNER_D_PARAMS);
    if (hd & (HEDGE_PICTURE_RESET | HEDGE_BUCKET_REPAIRED))
        owner_found(o, OWNER_D_HEDGE);
    if (owner_fleet_police(o, i))
        owner_found(o, OWNER_D_FLEET);
    bucket_tally t = {s->counters, false, NULL, NULL};
    unsigned damage = retryd__bucket_check(s, w->ident, now_ns, &t);
    if (damage & BUCKET_BROKEN) {
        char name[SEG_NAME_MAX + 1];
        memcpy(name, w->name, sizeof(name));
        owner_upstream_retire(o, i);
        owner_found(o, OWNER_D_RETIRED);
        if (o->on_retired != NULL)
            o->on_retired(o->on_retired_arg, i, name);
        return;
    }
    if (damage & BUCKET_CLAMPED)
        owner_found(o, OWNER_D_BALANCE);
    if (damage & BUCKET_REFILL_RESET)
        owner_found(o, OWNER_D_REFILL);
}

/*
 * A freed slot whose keys are still watched: counts in it come from a
 * process that writes through a slot it no longer owns (a child made by a
 * raw fork syscall keeps its parent's attachment; the library's fork
 * handler never ran). They are moved into the upstreams, as at release,
 * and found; once the watch ends, the keys go. The move takes each
 * counter with an exchange, but the writer's own lanes count with plain
 * stores, so a count it makes at that moment may be lost or counted twice:
 * what this does is notice, and keep most of the counts.
 */
static void police_freed(owner *o, uint32_t i)
{
    seg_process *p = &o->view.processes[i];
    owner_proc *w = &o->procs[i];
    if (w->watch_beats == 0)
        return;
    bool wrote = false;
    for (int e = 0; e < SEG_PROC_ENTRIES; e++) {
        seg_upstream *s = entry_upstream(o, atomic_load(&p->entry_upstream[e]));
        for (int lane = 0; s != NULL && lane < SEG_PROC_LANES; lane++)
            for (int c = 0; c < SEG_COUNTERS; c++) {
                _Atomic uint64_t *k = &p->counters[lane][e][c];
                uint64_t n = atomic_load_explicit(k, memory_order_relaxed);
                if (n == 0)
                    continue; /* read, never written: pages stay clean */
                n = atomic_exchange(k, 0);
                atomic_fetch_add(&s->counters[c], n);
                wrote = true;
            }
    }
    if (wrote) {
        owner_found(o, OWNER_D_FREED);
        w->watch_beats = OWNER_FREED_WATCH_BEATS;
    } else if (--w->watch_beats == 0) {
        memset(p->entry_upstream, 0, sizeof(p->entry_upstream));
    }
}

static void police_process(owner *o, uint32_t i)
{
    seg_process *p = &o->view.processes[i];
    const owner_proc *w = &o->procs[i];
    if (atomic_load(&p->ident) == w->ident &&
        (seg_ident_state(w->ident) != SEG_ACTIVE ||
         (atomic_load(&p->pid) == w->pid &&
          atomic_load(&p->start_time) == w->start_time &&
          atomic_load(&p->uid) == w->uid)))
        return;
    if (seg_ident_state(w->ident) == SEG_ACTIVE) {
        atomic_store(&p->pid, w->pid);
        atomic_store(&p->start_time, w->start_time);
        atomic_store(&p->uid, w->uid);
    }
    atomic_store_explicit(&p->ident, w->ident, memory_order_release);
    owner_found(o, OWNER_D_PROCESS);
}

void owner_police(owner *o)
{
    uint64_t now = retryd__clock_coarse_ns();
    uint32_t high = 0;
    if (o->slots == NULL || o->procs == NULL)
        return;
    police_header(o);
    for (uint32_t i = 0; i < o->view.upstream_capacity; i++) {
        police_upstream(o, i, now);
        if (seg_ident_state(o->slots[i].ident) == SEG_ACTIVE)
            high = i + 1;
    }
    /* Readers scan [0, mark): a mark short of an active slot hides it. */
    uint32_t mark = atomic_load(&o->view.hdr->upstream_high_water);
    if (mark < high || mark > o->view.upstream_capacity) {
        atomic_store(&o->view.hdr->upstream_high_water, high);
        owner_found(o, OWNER_D_HEADER);
    }
    for (uint32_t i = 0; i < o->view.process_capacity; i++) {
        police_process(o, i);
        if (seg_ident_state(o->procs[i].ident) == SEG_FREE)
            police_freed(o, i);
    }
    atomic_fetch_add_explicit(&o->checks, 1, memory_order_relaxed);
    log_damage(o, retryd__clock_monotonic_ns());
}

void owner_heartbeat(owner *o, const config *c)
{
    owner_police(o);
    /* The audit before the sweep: a refill stamp set back is put forward
     * before the sweep claims the floor for the shares. */
    owner_audit(o, retryd__clock_coarse_ns());
    unsigned repaired = owner_shares_sweep(o, c, retryd__clock_coarse_ns());
    for (unsigned i = 0; i < repaired; i++)
        owner_found(o, OWNER_D_SHARES);
    log_damage(o, retryd__clock_monotonic_ns());
    /* Last: whoever sees the stamp move sees a heartbeat's work done. */
    stamp_heartbeat(o);
}

void owner_health_fill(const owner *o, struct Retryd__SegmentHealth *h,
                       char *finding, size_t len)
{
    owner *m = (owner *)(uintptr_t)o; /* atomics only, read-only */
#define D(k) atomic_load_explicit(&m->damage[k], memory_order_relaxed)
    h->checks = atomic_load_explicit(&m->checks, memory_order_relaxed);
    h->header_repaired = D(OWNER_D_HEADER);
    h->slot_ident_repaired = D(OWNER_D_SLOT_IDENT);
    h->params_reset = D(OWNER_D_PARAMS);
    h->balance_clamped = D(OWNER_D_BALANCE);
    h->refill_reset = D(OWNER_D_REFILL);
    h->slots_retired = D(OWNER_D_RETIRED);
    h->forged_slots = D(OWNER_D_FORGED);
    h->process_repaired = D(OWNER_D_PROCESS);
    h->health_repaired = D(OWNER_D_HEALTH);
    h->shares_repaired = D(OWNER_D_SHARES);
    h->freed_slot_writes = D(OWNER_D_FREED);
    h->balance_unexplained = D(OWNER_D_BALANCE_UNEXPLAINED);
    h->refill_unexplained = D(OWNER_D_REFILL_UNEXPLAINED);
    h->ledger_rewritten = D(OWNER_D_LEDGER);
    h->unexplained_removed_micro =
        atomic_load_explicit(&m->audit_removed_micro, memory_order_relaxed);
    h->unexplained_spent_micro =
        atomic_load_explicit(&m->audit_spent_micro, memory_order_relaxed);
    owner_audit_last(o, finding, len);
    h->last_finding = finding;
    h->hedge_repaired = D(OWNER_D_HEDGE);
    h->fleet_repaired = D(OWNER_D_FLEET);
    h->last_damage_unix_ms =
        atomic_load_explicit(&m->last_damage_unix_ms, memory_order_relaxed);
#undef D
}
