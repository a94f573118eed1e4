/* SPDX-License-Identifier: MIT */
/*
 * Upstream handles: the public budget operations.
 *
 * Every operation is op_fast(), then op_slow() only if that found no usable
 * binding. op_fast() loads the handle's binding, checks that it belongs to
 * the current attachment and runs the bucket operation on the shared slot:
 * no lock, no system call. op_slow() handles everything else (no binding
 * yet, the daemon gone or back, the slot retired, a fork): rebind(), under
 * the host's lock, attaches and registers the name (round trips on the
 * control socket) and publishes a new binding, or leaves the handle on its
 * process-local bucket. Handles are found by name through an RCU hash table
 * (liburcu's cds_lfht, bp flavour: no thread registration needed in the
 * caller's program); they live until the host is closed.
 */
#include <stdlib.h>
#include <string.h>

#include "budget/host.h"
#include "shared/fleet.h"
#include "base/macros.h"

#define NS_PER_S UINT64_C(1000000000)
/* How long a handle on its local bucket waits before asking again. */
#define REBIND_INTERVAL_NS (NS_PER_S / 2)
/* The process-local bucket's generation; nothing ever retires it. */
#define LOCAL_GEN 1
#define LOCAL_IDENT seg_ident(LOCAL_GEN, SEG_ACTIVE)

static int name_match(struct cds_lfht_node *node, const void *key)
{
    const retryd_upstream *up =
        RETRYD_CONTAINER_OF(node, retryd_upstream, node);
    return strcmp(up->name, key) == 0;
}

/* Tokens to micro-tokens; false for what no figure of the segment may be
 * (seg_params_plausible() then checks each figure's own range). */
static bool to_micro(double tokens, uint64_t *ret)
{
    return seg_tokens_to_micro(tokens, SEG_MAX_CAP_MICRO, ret);
}

static int params_to_micro(const retryd_budget_params *in, retryd_upstream *up)
{
    retryd_budget_params local;
    const retryd_budget_params *p;
    int r = RETRYD_OPTS_VIEW(p, &local, in,
                             RETRYD_OPTS_MIN(retryd_budget_params, cap));
    if (r < 0)
        return r;
    if (!to_micro(p->ratio, &up->ratio_micro) ||
        !to_micro(p->min_retries_per_sec, &up->floor_micro_per_s) ||
        !to_micro(p->cap, &up->cap_micro) ||
        !seg_params_plausible(up->ratio_micro, up->floor_micro_per_s,
                              up->cap_micro))
        return RETRYD_EINVAL;
    return 0;
}

static retryd_upstream *lookup(retryd_host *h, const char *name)
{
    struct cds_lfht_iter it;
    struct cds_lfht_node *node;

    urcu_bp_read_lock();
    cds_lfht_lookup(h->names, seg_name_hash(name), name_match, name, &it);
    node = cds_lfht_iter_get_node(&it);
    urcu_bp_read_unlock();
    /* Handles are freed only with the host, so the pointer outlives the
     * read-side section. */
    return node ? RETRYD_CONTAINER_OF(node, retryd_upstream, node) : NULL;
}

/* The entry of this process slot that counts for @p key, claiming a free
 * one; -1 when the table is full (the slot's shared counters then). */
static int claim_entry(seg_process *p, uint64_t key)
{
    int free_entry = -1;
    for (int i = 0; i < SEG_PROC_ENTRIES; i++) {
        uint64_t k =
            atomic_load_explicit(&p->entry_upstream[i], memory_order_relaxed);
        if (k == key)
            return i;
        if (k == 0 && free_entry < 0)
            free_entry = i;
    }
    if (free_entry >= 0)
        atomic_store_explicit(&p->entry_upstream[free_entry], key,
                              memory_order_release);
    return free_entry;
}

/* Find an active slot by name without the daemon (it is down, but the
 * segment we hold still works). Each candidate is read between two loads
 * of its ident, so a slot being rewritten is skipped, not misread. */
static seg_upstream *scan_for_name(const attachment *a, const char *name,
                                   uint64_t *ret_ident)
{
    uint32_t hw = atomic_load_explicit(&a->view.hdr->upstream_high_water,
                                       memory_order_acquire);
    if (hw > a->view.upstream_capacity)
        hw = a->view.upstream_capacity; /* a corrupted high-water mark */
    for (uint32_t i = 0; i < hw; i++) {
        seg_upstream *s = &a->view.upstreams[i];
        uint64_t id = atomic_load_explicit(&s->ident, memory_order_acquire);
        if (seg_ident_state(id) != SEG_ACTIVE)
            continue;
        char copy[SEG_NAME_MAX + 1];
        memcpy(copy, s->name, sizeof(copy));
        copy[SEG_NAME_MAX] = '\0';
        /* The name's bytes must be read before the ident is read again
         * (a seqlock read). The thread sanitizer does not support fences;
         * there a sequentially consistent load stands in. */
#if defined(__SANITIZE_THREAD__)
        if (atomic_load_explicit(&s->ident, memory_order_seq_cst) == id &&
#else
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->ident, memory_order_relaxed) == id &&
#endif
            strcmp(copy, name) == 0) {
            *ret_ident = id;
            return s;
        }
    }
    return NULL;
}

/* Under h->lock: find this handle's slot in the current attachment. */
static seg_upstream *resolve_slot(retryd_host *h, retryd_upstream *up,
                                  attachment *a, uint64_t *ret_ident, int *err)
{
    uint32_t slot, gen;
    int r = retryd__host_register_locked(h, up, &slot, &gen);

    *err = 0;
    if (r == 0) {
        seg_upstream *s = retryd__segment_upstream(&a->view, slot);
        uint64_t id = seg_ident(gen, SEG_ACTIVE);
        if (s != NULL &&
            atomic_load_explicit(&s->ident, memory_order_acquire) == id) {
            *ret_ident = id;
            return s;
        }
        return NULL; /* retired under our feet, or a lying reply */
    }
    if (r == RETRYD_ECONFLICT || r == RETRYD_EINVAL) {
        *err = r;
        return NULL;
    }
    /* The daemon did not answer. If we are still attached (it died, not
     * us hanging up on it), the segment we hold still decides; if the
     * attachment was retired, its slot is not ours to write into. */
    if (up->has_params ||
        atomic_load_explicit(&h->att, memory_order_relaxed) != a)
        return NULL;
    return scan_for_name(a, up->name, ret_ident);
}

/* Where @p b counts from each lane: its entry of the process slot, on the
 * lane's own counters (exclusive for lanes 1..3, which one thread owns),
 * or the upstream slot's own counters (atomic) when the process's table
 * is full. */
static void set_lanes(binding *b)
{
    seg_process *p = b->att->proc;
    for (int lane = 0; lane < SEG_PROC_LANES; lane++)
        b->lanes[lane] =
            b->entry < 0 ? (bucket_tally){b->slot->counters, false, NULL, NULL}
                         : (bucket_tally){p->counters[lane][b->entry],
                                          lane != 0, &p->claim[b->entry],
                                          &p->share_factor[b->entry]};
}

/*
 * The slow path: bind @p up to a shared slot if the host can attach, else
 * leave it local. Returns the binding to use (NULL: local), or sets *err for
 * an error the caller must see.
 */
static binding *rebind(retryd_upstream *up, int *err)
{
    retryd_host *h = up->host;
    binding *b = NULL;

    *err = 0;
    /* Never to be shared: no clock, no lock, on every operation. */
    if (h->flags & RETRYD_HOST_LOCAL_ONLY)
        return NULL;
    uint64_t now = retryd__clock_coarse_ns();
    if (now < atomic_load_explicit(&up->next_bind_ns, memory_order_relaxed))
        return NULL;
    pthread_mutex_lock(&h->lock);
    (void)retryd__host_attach_locked(h);
    attachment *a = atomic_load_explicit(&h->att, memory_order_relaxed);
    binding *cur = atomic_load_explicit(&up->bind, memory_order_relaxed);
    if (a == NULL)
        goto out;
    uint64_t ident;
    seg_upstream *s = resolve_slot(h, up, a, &ident, err);
    if (s == NULL)
        goto out;
    if (cur != NULL && cur->att == a && cur->slot == s && cur->ident == ident) {
        b = cur; /* another thread rebound it already */
        goto out;
    }
    b = malloc(sizeof(*b));
    if (b == NULL)
        goto out;
    uint32_t index = (uint32_t)(s - a->view.upstreams);
    *b = (binding){
        .att = a,
        .slot = s,
        .ident = ident,
        .entry = claim_entry(a->proc, (uint64_t)(index + 1) << 32 |
                                          seg_ident_generation(ident)),
    };
    set_lanes(b);
    if (cur != NULL) {
        cur->next_old = up->old_bindings;
        up->old_bindings = cur;
    }
    atomic_store_explicit(&up->bind, b, memory_order_release);
out:
    if (b == NULL)
        atomic_store_explicit(&up->next_bind_ns, now + REBIND_INTERVAL_NS,
                              memory_order_relaxed);
    pthread_mutex_unlock(&h->lock);
    return b;
}

int retryd_upstream_open(retryd_host *host, const char *name,
                         const retryd_budget_params *params,
                         retryd_upstream **ret)
{
    retryd_upstream *up, *found;
    int r, err;

    if (host == NULL || ret == NULL || !seg_name_valid(name))
        return RETRYD_EINVAL;
    up = calloc(1, sizeof(*up));
    if (up == NULL)
        return RETRYD_ENOMEM;
    r = params_to_micro(params ? params : &retryd_budget_defaults, up);
    if (r < 0) {
        free(up);
        return r;
    }
    up->has_params = params != NULL;

    found = lookup(host, name);
    if (found != NULL) {
        bool same = !up->has_params ||
                    (found->ratio_micro == up->ratio_micro &&
                     found->floor_micro_per_s == up->floor_micro_per_s &&
                     found->cap_micro == up->cap_micro);
        free(up);
        if (!same)
            return RETRYD_ECONFLICT;
        *ret = found;
        return 0;
    }

    up->host = host;
    memcpy(up->name, name, strlen(name) + 1);
    cds_lfht_node_init(&up->node);
    uint64_t now = retryd__clock_coarse_ns();
    atomic_store_explicit(&up->local.ident, LOCAL_IDENT, memory_order_relaxed);
    /* The local bucket starts with one second of floor, like a new shared
     * slot (docs/budget.md). */
    retryd__bucket_init(&up->local, LOCAL_GEN, up->ratio_micro,
                        up->floor_micro_per_s, up->cap_micro,
                        up->floor_micro_per_s, now);
    retryd__health_init(&up->local, &retryd__health_defaults);
    retryd__hedge_init(&up->local.hedge, &retryd__hedge_defaults, now);

    pthread_mutex_lock(&host->lock);
    struct cds_lfht_node *prev = cds_lfht_add_unique(
        host->names, seg_name_hash(name), name_match, up->name, &up->node);
    if (prev != &up->node) {
        /* Another thread opened it first. */
        pthread_mutex_unlock(&host->lock);
        free(up);
        return retryd_upstream_open(host, name, params, ret);
    }
    up->next_all = host->all;
    host->all = up;
    pthread_mutex_unlock(&host->lock);

    (void)rebind(up, &err);
    if (err == RETRYD_ECONFLICT) {
        /* Unlist the handle so the next open asks again; its memory stays
         * on the host's list, since a racing opener may hold it. */
        pthread_mutex_lock(&host->lock);
        cds_lfht_del(host->names, &up->node);
        pthread_mutex_unlock(&host->lock);
        return err;
    }
    *ret = up;
    return 0;
}

/* The binding to use now, or NULL for the slow path. */
static inline binding *current(retryd_upstream *up)
{
    binding *b = atomic_load_explicit(&up->bind, memory_order_acquire);
    if (__builtin_expect(b != NULL, 1) &&
        __builtin_expect(b->att == atomic_load_explicit(&up->host->att,
                                                        memory_order_acquire),
                         1))
        return b;
    return NULL;
}

static inline bucket_tally tally_of(const binding *b)
{
    return b->lanes[retryd__thread_lane()];
}

static inline bucket_tally local_tally(retryd_upstream *up)
{
    return (bucket_tally){up->local_counters, false, NULL, NULL};
}

/* The budget operations, named so that one fast path and one slow path
 * serve them all. */
enum bucket_op { OP_DEPOSIT, OP_WITHDRAW, OP_PEEK, OP_BALANCE };

/*
 * @p op on one bucket. Always inlined with a constant @p op, so the switch
 * folds away and each public call keeps only its own bucket operation:
 * what a macro pasting the operation in would give, with types checked.
 */
static inline __attribute__((always_inline)) int
on_bucket(enum bucket_op op, seg_upstream *s, uint64_t ident,
          const bucket_tally *t, uint64_t *micro)
{
    const bucket_clock *clk = &retryd__coarse_clock;
    switch (op) {
    case OP_DEPOSIT:
        return retryd__bucket_deposit(s, ident, t);
    case OP_WITHDRAW:
        return retryd__bucket_withdraw(s, ident, clk, t);
    case OP_PEEK:
        return retryd__bucket_peek(s, ident, clk, t);
    case OP_BALANCE:
        return retryd__bucket_balance(s, ident, clk, t, micro);
    }
    return RETRYD_EINVAL; /* not an operation */
}

/*
 * The fast path: @p op on the shared slot of the handle's current binding.
 * A few loads and the bucket's atomic instructions; no lock, no system
 * call. RETRYD_ESTALE when there is no current binding or its slot was
 * retired: the caller then takes op_slow().
 */
static inline __attribute__((always_inline)) int
op_fast(retryd_upstream *up, enum bucket_op op, uint64_t *micro)
{
    binding *b = current(up);
    if (__builtin_expect(b == NULL, 0))
        return RETRYD_ESTALE;
    /* The lane's tally in the binding itself, by pointer: a copy on the
     * stack would give the call a frame, and its slow paths (which take
     * the tally whole) a reason to build one before the fast one is done. */
    return on_bucket(op, b->slot, b->ident, &b->lanes[retryd__thread_lane()],
                     micro);
}

/*
 * The slow path, after op_fast() found no usable binding: rebind() (under
 * the host's lock; may connect, attach and register, i.e. round trips on
 * the control socket, at most every REBIND_INTERVAL_NS per handle), then
 * @p op on the new binding, else on the process-local bucket. Out of line
 * and cold, so none of it (nor its register saves) weighs on the fast
 * path.
 */
static __attribute__((noinline, cold)) int
op_slow(retryd_upstream *up, enum bucket_op op, uint64_t *micro)
{
    int r = RETRYD_ESTALE, err;
    binding *b = rebind(up, &err);
    if (b != NULL) {
        bucket_tally t = tally_of(b);
        r = on_bucket(op, b->slot, b->ident, &t, micro);
    }
    if (r == RETRYD_ESTALE) { /* unbound, or retired again meanwhile */
        bucket_tally t = local_tally(up);
        r = on_bucket(op, &up->local, LOCAL_IDENT, &t, micro);
    }
    return r;
}

/* @p op on the handle's bucket: the fast path, and the slow one only when
 * the fast one had no binding to use. */
static inline __attribute__((always_inline)) int
op_any(retryd_upstream *up, enum bucket_op op, uint64_t *micro)
{
    int r = op_fast(up, op, micro);
    if (__builtin_expect(r != RETRYD_ESTALE, 1))
        return r;
    return op_slow(up, op, micro);
}

int retryd_upstream_deposit(retryd_upstream *up)
{
    if (up == NULL)
        return RETRYD_EINVAL;
    return op_any(up, OP_DEPOSIT, NULL);
}

int retryd_upstream_withdraw(retryd_upstream *up)
{
    if (up == NULL)
        return RETRYD_EINVAL;
    return op_any(up, OP_WITHDRAW, NULL);
}

int retryd_upstream_withdraw_for(retryd_upstream *up, uint32_t taken)
{
    if (up == NULL)
        return RETRYD_EINVAL;
    if (taken > 0) {
        binding *b = current(up);
        seg_upstream *s = b ? b->slot : &up->local;
        /* The balance foreseen, not claimed: the take claims the refill
         * if it needs it. */
        uint64_t seen =
            retryd__bucket_projected_balance(s, retryd__clock_coarse_ns());
        if (!retryd__share_request_ok(s, taken, seen)) {
            bucket_tally t = b ? tally_of(b) : local_tally(up);
            bucket_tally_add(&t, SEG_C_DENIED_OVER_SHARE, 1);
            return RETRYD_EREQSHARE;
        }
    }
    return op_any(up, OP_WITHDRAW, NULL);
}

bool retryd_upstream_peek(retryd_upstream *up)
{
    return up != NULL && op_any(up, OP_PEEK, NULL) == 1;
}

int retryd_upstream_balance(retryd_upstream *up, double *ret_tokens)
{
    uint64_t micro = 0;
    if (up == NULL || ret_tokens == NULL)
        return RETRYD_EINVAL;
    int r = op_any(up, OP_BALANCE, &micro);
    if (r == 0)
        *ret_tokens = (double)micro / 1e6;
    return r;
}

bool retryd_upstream_shared(retryd_upstream *up)
{
    return up != NULL && current(up) != NULL;
}

const char *retryd_upstream_name(const retryd_upstream *up)
{
    return up ? up->name : NULL;
}

/*
 * The segment counter of a denial reason, or -1 for none. The counters are
 * numbered by the segment layout (shared/segment.h); this switch is the one
 * place that maps the public enum onto them, and -Wswitch makes a new
 * reason fail the build here until it is given a counter.
 */
static int denial_counter(retryd_denial reason)
{
    switch (reason) {
    case RETRYD_DENIAL_OVER_SHARE:
        return SEG_C_DENIED_OVER_SHARE;
    case RETRYD_DENIAL_NONE:
        return -1;
    case RETRYD_DENIAL_MAX_ATTEMPTS:
        return SEG_C_DENIED_MAX_ATTEMPTS;
    case RETRYD_DENIAL_BUDGET_EXHAUSTED:
        return SEG_C_DENIED_BUDGET_EXHAUSTED;
    case RETRYD_DENIAL_BODY_NOT_REPLAYABLE:
        return SEG_C_DENIED_BODY_NOT_REPLAYABLE;
    case RETRYD_DENIAL_RESPONSE_ALREADY_DELIVERED:
        return SEG_C_DENIED_RESPONSE_DELIVERED;
    case RETRYD_DENIAL_RUNTIME_DRAINING:
        return SEG_C_DENIED_RUNTIME_DRAINING;
    case RETRYD_DENIAL_DEADLINE:
        return SEG_C_DENIED_DEADLINE;
    case RETRYD_DENIAL_PERMANENT_FAILURE:
        return SEG_C_DENIED_PERMANENT_FAILURE;
    case RETRYD_DENIAL_STATUS_NOT_RETRYABLE:
        return SEG_C_DENIED_STATUS_NOT_RETRYABLE;
    }
    return -1; /* a value outside the enum */
}

/* The public enums and the layout's counters agree in count; a change to
 * either is a layout decision, made in shared/segment.h. */
_Static_assert(RETRYD_DENIAL_COUNT - 1 == SEG_C_DENIED_COUNT &&
                   RETRYD_DENIAL_OVER_SHARE == 9,
               "every denial reason has a segment counter");
_Static_assert(RETRYD_EVIDENCE_COUNT == SEG_C_EVIDENCE_COUNT,
               "every evidence value has a segment counter");

void retryd_upstream_record(retryd_upstream *up,
                            const retryd_decision *decision,
                            retryd_evidence evidence)
{
    if (up == NULL)
        return;
    binding *b = current(up);
    /* On the thread's own lane the counts are plain stores, like the
     * bucket's: no locked instruction. */
    bucket_tally t = b ? tally_of(b) : local_tally(up);

    if ((unsigned)evidence < RETRYD_EVIDENCE_COUNT)
        bucket_tally_add(&t, SEG_C_EVIDENCE_FIRST + (int)evidence, 1);
    /* A decision too short to hold the fields read here (sz unset) is not
     * counted rather than read past its end. */
    if (decision == NULL ||
        decision->sz < RETRYD_OPTS_MIN(retryd_decision, rule))
        return;
    if (decision->verdict == RETRYD_VERDICT_AMBIGUOUS)
        bucket_tally_add(&t, SEG_C_AMBIGUOUS, 1);
    /* Failed takes were counted by the withdrawal itself. */
    int denied = denial_counter(decision->reason);
    if (decision->verdict != RETRYD_VERDICT_RETRY && denied >= 0 &&
        decision->rule != RETRYD_RULE_BUDGET_TAKE_FAILED &&
        decision->rule != RETRYD_RULE_PROCESS_OVER_SHARE &&
        decision->rule != RETRYD_RULE_REQUEST_OVER_SHARE)
        bucket_tally_add(&t, denied, 1);
}

/* --- upstream health (docs/health.md) ------------------------------------ */

/* Where the handle's health lives now: its binding's shared slot, or its
 * local one; with the rejecter record that goes with it. The tally is
 * worked out only where something is counted (health_tally): the common
 * paths count nothing, and the thread's lane is a TLS read they skip. */
typedef struct health_place {
    seg_upstream *slot;
    const binding *b; /* NULL: the local slot */
    _Atomic uint64_t *reject_epoch;
} health_place;

static inline health_place health_place_of(retryd_upstream *up)
{
    binding *b = current(up);
    if (__builtin_expect(b != NULL, 1) && bucket_ident_ok(b->slot, b->ident))
        return (health_place){b->slot, b, &b->reject_epoch};
    return (health_place){&up->local, NULL, &up->local_reject_epoch};
}

static inline bucket_tally health_tally(retryd_upstream *up,
                                        const health_place *h)
{
    return h->b ? tally_of(h->b) : local_tally(up);
}

/* A uniform draw in [0, 1). */
static inline double draw01(void)
{
    return (double)(retryd_random_default(NULL) >> 11) * 0x1p-53;
}

/*
 * The window of one slot at one tick of the coarse clock, as this thread
 * last summed it, plus what the thread itself recorded since. Summing is
 * sixteen loads, two of them of a line every attempt writes; each thread
 * sums once per tick (1 to 4 ms) and slot, so an admission sees its own
 * thread's events at once and everyone else's within a tick
 * (docs/health.md), in windows of at least a second.
 */
typedef struct throttle_memo {
    const seg_upstream *slot; /* NULL: nothing remembered */
    uint64_t now_ns;
    uint64_t requests, accepts, k_micro;
    bool engaged;
} throttle_memo;

static _Thread_local throttle_memo throttle_memo_tls
    __attribute__((tls_model("initial-exec")));

static inline double throttle_probability(seg_upstream *s, uint64_t now)
{
    throttle_memo *m = &throttle_memo_tls;
    if (__builtin_expect(m->slot != s || m->now_ns != now, 0)) {
        health_view v; /* with the other hosts' while the fleet's applies */
        retryd__health_view_fleet(s, now, &v);
        *m = (throttle_memo){
            .slot = s,
            .now_ns = now,
            .requests = v.requests,
            .accepts = v.accepts,
            .k_micro = atomic_load_explicit(&s->throttle_k_micro,
                                            memory_order_relaxed),
            .engaged = v.engaged,
        };
    }
    return m->engaged ? health_probability(m->requests, m->accepts, m->k_micro)
                      : 0;
}

/* This thread recorded an event of slot @p s at @p now: its memo counts
 * it too. A rejection may complete the quorum, which only a new sum
 * tells. */
static inline void throttle_memo_note(const seg_upstream *s, uint64_t now,
                                      bool accept, bool reject)
{
    throttle_memo *m = &throttle_memo_tls;
    if (m->slot != s || m->now_ns != now)
        return;
    m->requests++;
    m->accepts += accept;
    if (reject && !m->engaged)
        m->slot = NULL;
}

/* The rare outcomes of an admission: a throttled first attempt (unless
 * it is the slot's probe) and a held one are counted. */
static __attribute__((noinline)) retryd_admission
admit_counted(retryd_upstream *up, const health_place *h, retryd_admission a,
              uint64_t now)
{
    bucket_tally t = health_tally(up, h);
    switch (a) {
    case RETRYD_ADMIT_THROTTLED:
        /* One first attempt per slot goes out whatever the throttle
         * says: without it a host throttled near 1 would learn of the
         * upstream's recovery only by chance. */
        if (retryd__health_claim_probe(h->slot, now))
            return RETRYD_ADMIT_SEND;
        /* Throttled requests count as requests, as in the SRE formula. */
        retryd__health_record(h->slot, now, 1, 0);
        throttle_memo_note(h->slot, now, false, false);
        bucket_tally_add(&t, SEG_C_THROTTLED, 1);
        break;
    case RETRYD_ADMIT_HOLD:
    case RETRYD_ADMIT_PAST_DEADLINE:
        bucket_tally_add(&t, SEG_C_HELD, 1);
        break;
    case RETRYD_ADMIT_SEND:
        break;
    }
    return a;
}

retryd_admission retryd_upstream_admit(retryd_upstream *up, bool first_attempt,
                                       int64_t remaining_ns,
                                       int64_t min_attempt_ns,
                                       int64_t *ret_wait_ns)
{
    int64_t wait_local;
    if (ret_wait_ns == NULL)
        ret_wait_ns = &wait_local;
    *ret_wait_ns = 0;
    if (up == NULL)
        return RETRYD_ADMIT_SEND;
    health_place h = health_place_of(up);
    uint64_t flags =
        atomic_load_explicit(&h.slot->health_flags, memory_order_relaxed);
    uint64_t until =
        atomic_load_explicit(&h.slot->pushback_until_ns, memory_order_relaxed);
    /* The common case, throttle off and no hold: two loads of one line
     * that every process only reads, and nothing written. */
    if (!(flags & SEG_HEALTH_THROTTLE) &&
        (!(flags & SEG_HEALTH_PUSHBACK) || until == 0))
        return RETRYD_ADMIT_SEND;
    uint64_t now = retryd__clock_coarse_ns();
    /* No hold ever set (or the last one cleared): nothing to ask. */
    int64_t hold = until != 0 ? retryd__health_hold_spent(h.slot, now) : 0;
    double p = first_attempt && (flags & SEG_HEALTH_THROTTLE)
                   ? throttle_probability(h.slot, now)
                   : 0;
    /* Nothing held and nothing to draw for: retryd_admit would say send
     * (a draw is never below 0), so its facts need not be built. */
    if (hold == 0 && p == 0)
        return RETRYD_ADMIT_SEND;
    retryd_admit_facts f = {
        .sz = sizeof(f),
        .first_attempt = first_attempt,
        .pushback_ns = hold,
        .pushback_first_attempts = (flags & SEG_HEALTH_PUSHBACK_FIRST) != 0,
        .remaining_ns = remaining_ns > 0 ? remaining_ns : 0,
        .min_attempt_ns = min_attempt_ns > 0 ? min_attempt_ns : 0,
        .throttle_probability = p,
        .draw = p > 0 ? draw01() : 0,
    };
    retryd_admission a;
    if (retryd_admit(&f, NULL, NULL, &a, ret_wait_ns) < 0)
        return RETRYD_ADMIT_SEND; /* facts of our own making are valid */
    return a == RETRYD_ADMIT_SEND ? a : admit_counted(up, &h, a, now);
}

void retryd_upstream_observe(retryd_upstream *up, retryd_evidence evidence,
                             int status, int64_t retry_after_ns)
{
    if (up == NULL)
        return;
    retryd_health_count c = retryd_health_classify(evidence, status);
    if (c == RETRYD_HEALTH_NOT_COUNTED)
        return;
    health_place h = health_place_of(up);
    uint64_t flags =
        atomic_load_explicit(&h.slot->health_flags, memory_order_relaxed);
    bool push = (flags & SEG_HEALTH_PUSHBACK) && retry_after_ns > 0 &&
                (status == 429 || status == 503);
    if (!(flags & SEG_HEALTH_THROTTLE) && !push)
        return; /* nothing to record: no clock read, nothing written */
    uint64_t now = retryd__clock_coarse_ns();
    /* The one atomic write an attempt adds (docs/health.md). */
    retryd__health_record(h.slot, now, 1, c == RETRYD_HEALTH_ACCEPT);
    throttle_memo_note(h.slot, now, c == RETRYD_HEALTH_ACCEPT,
                       c == RETRYD_HEALTH_REJECT);
    if (c == RETRYD_HEALTH_REJECT)
        retryd__health_reject(h.slot, now, h.reject_epoch);
    if (push)
        retryd__health_push(h.slot, now, retry_after_ns);
}

int64_t retryd_upstream_pushback(retryd_upstream *up)
{
    if (up == NULL)
        return 0;
    health_place h = health_place_of(up);
    if (atomic_load_explicit(&h.slot->pushback_until_ns,
                             memory_order_relaxed) == 0)
        return 0; /* no hold was ever set: no clock read */
    return retryd__health_hold_spent(h.slot, retryd__clock_coarse_ns());
}

int retryd_upstream_health(retryd_upstream *up, retryd_health *ret)
{
    if (up == NULL || ret == NULL ||
        ret->sz < RETRYD_OPTS_MIN(retryd_health, pushback_ns))
        return RETRYD_EINVAL;
    health_place h = health_place_of(up);
    uint64_t now = retryd__clock_coarse_ns();
    health_view v; /* summed now, not the admissions' memo; the fleet's
                    * counts in, as the admissions see them */
    health_params p;
    retryd__health_view_fleet(h.slot, now, &v);
    retryd__health_params_of(h.slot, &p);
    retryd_health out = {
        .sz = sizeof(out),
        .throttle = (p.flags & SEG_HEALTH_THROTTLE) != 0,
        .engaged = v.engaged,
        .probability = v.probability,
        .requests = v.requests,
        .accepts = v.accepts,
        .rejecting_processes = v.rejecters,
        .pushback = (p.flags & SEG_HEALTH_PUSHBACK) != 0,
        .pushback_ns = retryd__health_hold(h.slot, now),
    };
    size_t sz = ret->sz < sizeof(out) ? ret->sz : sizeof(out);
    out.sz = sz;
    memcpy(ret, &out, sz);
    return 0;
}

bool retryd__budget_peek(void *ctx)
{
    return retryd_upstream_peek(ctx);
}

bool retryd__budget_take(void *ctx)
{
    return retryd_upstream_withdraw(ctx) == 0;
}

static int budget_take_for(void *ctx, uint32_t taken)
{
    return retryd_upstream_withdraw_for(ctx, taken);
}

/* The whole interface, take_for() included; retryd_upstream_budget is its
 * first version (upstream_budget_v1.c). */
static const retryd_budget_iface upstream_budget = {
    sizeof(retryd_budget_iface), retryd__budget_peek, retryd__budget_take,
    budget_take_for};

const retryd_budget_iface *retryd_upstream_budget_iface(void)
{
    return &upstream_budget;
}
