#include "owner.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rcu.h"

#include "shared/bucket.h"
#include "log.h"
#include "retryd/common.h"

static uint64_t realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int map_fd(owner *o, int fd, size_t size)
{
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return RETRYD_EIO;
    o->fd = fd;
    o->map = m;
    o->size = size;
    return 0;
}

/* Why an existing file cannot be adopted, or NULL when it can. */
static const char *adopt_check(owner *o, const config *c, int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return "cannot stat it";
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077) != 0)
        return "not a private regular file of ours";
    if (st.st_size < (off_t)SEG_HEADER_SIZE || st.st_size > (off_t)1 << 36)
        return "implausible size";
    if (map_fd(o, fd, (size_t)st.st_size) < 0)
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

static int create(owner *o, const config *c)
{
    size_t size =
        retryd__segment_size(c->upstream_capacity, c->process_capacity);
    uint64_t gen = 0;
    int fd = open(c->segment_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return RETRYD_EIO;
    if (ftruncate(fd, (off_t)size) < 0 || map_fd(o, fd, size) < 0) {
        close(fd);
        unlink(c->segment_path);
        return RETRYD_EIO;
    }
    while (gen == 0)
        if (getrandom(&gen, sizeof(gen), 0) != (ssize_t)sizeof(gen))
            gen = retryd__clock_monotonic_ns() ^ (uint64_t)getpid() << 32;
    retryd__segment_format(o->map, c->upstream_capacity, c->process_capacity,
                           gen, realtime_ms());
    return retryd__segment_view(o->map, o->size, &o->view);
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

int owner_open(owner *o, const config *c, bool *ret_adopted, char *why,
               size_t why_len)
{
    int fd, r;

    memset(o, 0, sizeof(*o));
    o->fd = -1;
    *ret_adopted = false;
    fd = open(c->segment_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        const char *bad = adopt_check(o, c, fd);
        if (bad == NULL) {
            *ret_adopted = true;
            cover_active_upstreams(o);
            goto ready;
        }
        log_warn("retiring segment %s: %s", c->segment_path, bad);
        owner_close(o);
        if (unlink(c->segment_path) < 0) {
            snprintf(why, why_len, "cannot remove %s: %s", c->segment_path,
                     strerror(errno));
            return RETRYD_EIO;
        }
    } else if (errno != ENOENT) {
        snprintf(why, why_len, "cannot open %s: %s", c->segment_path,
                 strerror(errno));
        return RETRYD_EIO;
    }
    r = create(o, c);
    if (r < 0) {
        snprintf(why, why_len, "cannot create %s: %s", c->segment_path,
                 strerror(errno));
        owner_close(o);
        return r;
    }
ready:
    o->generation = o->view.hdr->generation;
    atomic_store(&o->view.hdr->daemon_pid, (uint64_t)getpid());
    atomic_store(&o->view.hdr->daemon_start_time,
                 retryd__process_start_time((uint64_t)getpid()));
    owner_heartbeat(o);
    return 0;
}

void owner_close(owner *o)
{
    if (o->map != NULL)
        munmap(o->map, o->size);
    if (o->fd >= 0)
        close(o->fd);
    o->map = NULL;
    o->fd = -1;
}

void owner_heartbeat(owner *o)
{
    atomic_store_explicit(&o->view.hdr->heartbeat_ns,
                          retryd__clock_monotonic_ns(), memory_order_release);
}

void owner_set_draining(owner *o, bool on)
{
    if (on)
        atomic_fetch_or(&o->view.hdr->flags, SEG_FLAG_DRAINING);
    else
        atomic_fetch_and(&o->view.hdr->flags, ~SEG_FLAG_DRAINING);
}

bool owner_draining(const owner *o)
{
    return atomic_load(&o->view.hdr->flags) & SEG_FLAG_DRAINING;
}

static void write_params(seg_upstream *s, const budget_params *p)
{
    uint64_t cap =
        p->cap_micro > SEG_MAX_CAP_MICRO ? SEG_MAX_CAP_MICRO : p->cap_micro;
    atomic_store(&s->ratio_micro, p->ratio_micro);
    atomic_store(&s->floor_micro_per_s, p->floor_micro_per_s);
    atomic_store(&s->cap_micro, cap);
}

int owner_upstream_alloc(owner *o, const char *name, const budget_params *p,
                         uint32_t *ret_slot, uint32_t *ret_gen)
{
    for (uint32_t i = 0; i < o->view.upstream_capacity; i++) {
        seg_upstream *s = &o->view.upstreams[i];
        uint64_t id = atomic_load(&s->ident);
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
        atomic_store_explicit(&s->ident, seg_ident(gen, SEG_ACTIVE),
                              memory_order_release);
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
    /* A lower cap binds at once: the balance above it is discarded (and
     * counted), not left for clients to spend. */
    bucket_tally t = {s->counters, false};
    (void)retryd__bucket_check(s, atomic_load(&s->ident),
                               retryd__clock_coarse_ns(), &t);
}

void owner_upstream_retire(owner *o, uint32_t slot)
{
    seg_upstream *s = retryd__segment_upstream(&o->view, slot);
    if (s == NULL)
        return;
    uint32_t gen = seg_ident_generation(atomic_load(&s->ident)) + 1;
    /* The ident first (handles check it), then the token word, whose new
     * generation refuses any in-flight take or credit of a stale handle
     * (a take gives its token back to this retired word). */
    atomic_store_explicit(&s->ident, seg_ident(gen, SEG_RETIRED),
                          memory_order_release);
    atomic_store_explicit(&s->tokens, seg_token_word(gen, 0),
                          memory_order_release);
}

int owner_process_alloc(owner *o, pid_t pid, uint64_t start_time, uid_t uid,
                        uint32_t *ret_slot)
{
    for (uint32_t i = 0; i < o->view.process_capacity; i++) {
        seg_process *p = &o->view.processes[i];
        uint64_t id = atomic_load(&p->ident);
        if (seg_ident_state(id) != SEG_FREE)
            continue;
        /* Freed slots were zeroed by owner_process_release(). */
        atomic_store(&p->pid, (uint64_t)pid);
        atomic_store(&p->start_time, start_time);
        atomic_store(&p->uid, (uint64_t)uid);
        atomic_store(&p->attached_unix_ms, realtime_ms());
        atomic_store_explicit(
            &p->ident, seg_ident(seg_ident_generation(id) + 1, SEG_ACTIVE),
            memory_order_release);
        *ret_slot = i;
        return 0;
    }
    return RETRYD_EFULL;
}

bool owner_process_matches(const owner *o, uint32_t slot, pid_t pid,
                           uint64_t start_time)
{
    seg_process *p = retryd__segment_process(&o->view, slot);
    return p != NULL && seg_ident_state(atomic_load(&p->ident)) == SEG_ACTIVE &&
           atomic_load(&p->pid) == (uint64_t)pid &&
           atomic_load(&p->start_time) == start_time;
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

static uint64_t entry_total(const seg_process *p, int e, int c)
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
    uint64_t id = atomic_load(&p->ident);
    uint32_t gen = seg_ident_generation(id);
    if (seg_ident_state(id) == SEG_FREE)
        return;
    /* Hide the slot from stats readers, wait until none still sums it,
     * then move its counters into the upstreams: never counted twice. */
    atomic_store_explicit(&p->ident, seg_ident(gen, SEG_RETIRED),
                          memory_order_release);
    rd_rcu_synchronize();
    for (int e = 0; e < SEG_PROC_ENTRIES; e++) {
        seg_upstream *s = entry_upstream(o, atomic_load(&p->entry_upstream[e]));
        if (s == NULL)
            continue;
        for (int c = 0; c < SEG_COUNTERS; c++)
            atomic_fetch_add(&s->counters[c], entry_total(p, e, c));
    }
    memset((char *)p + sizeof(p->ident), 0, sizeof(*p) - sizeof(p->ident));
    atomic_store_explicit(&p->ident, seg_ident(gen, SEG_FREE),
                          memory_order_release);
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
                per_upstream[u][c] += entry_total(p, e, c);
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
            out[c] += entry_total(p, e, c);
}
