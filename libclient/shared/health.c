/* SPDX-License-Identifier: MIT */
/*
 * Upstream health on one slot: the out-of-line parts of health.h. The
 * common operations (recording an attempt, reading the hold) are inline
 * there; what is here runs once per slot rotation, once per rejection, or
 * for a reader that sums the window.
 */
#include "shared/health.h"

#define NS_PER_S UINT64_C(1000000000)

/* Zero: the first call computes (a slot length of 0 is never asked). */
_Thread_local health_epoch_memo retryd__health_epoch_tls;

const health_params retryd__health_defaults = {
    .flags = SEG_HEALTH_PUSHBACK,
    .k_micro = 2 * SEG_MICRO,
    .window_ns = 30 * NS_PER_S,
    .min_processes = 1,
    .pushback_max_ns = 60 * NS_PER_S,
};

bool retryd__health_params_ok(const health_params *p)
{
    return (p->flags & ~(uint64_t)SEG_HEALTH_FLAGS_ALL) == 0 &&
           p->k_micro <= HEALTH_MAX_K_MICRO &&
           p->window_ns >= HEALTH_MIN_WINDOW_NS &&
           p->window_ns <= HEALTH_MAX_WINDOW_NS && p->min_processes >= 1 &&
           p->min_processes <= SEG_MAX_PROCESSES &&
           p->pushback_max_ns <= HEALTH_MAX_PUSHBACK_NS;
}

static void clear_rings(seg_upstream *s)
{
    for (unsigned i = 0; i < SEG_HEALTH_SLOTS; i++) {
        atomic_store_explicit(&s->window[i], 0, memory_order_relaxed);
        atomic_store_explicit(&s->rejecters[i], 0, memory_order_relaxed);
    }
    atomic_store_explicit(&s->probe_epoch, 0, memory_order_relaxed);
}

void retryd__health_init(seg_upstream *s, const health_params *p)
{
    /* The slot length goes to zero first, so that a writer in between
     * records nothing rather than into a ring being cleared. */
    atomic_store_explicit(&s->health_slot_ns, 0, memory_order_release);
    clear_rings(s);
    atomic_store_explicit(&s->pushback_until_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&s->health_flags, p->flags, memory_order_relaxed);
    atomic_store_explicit(&s->throttle_k_micro, p->k_micro,
                          memory_order_relaxed);
    atomic_store_explicit(&s->throttle_min_processes, p->min_processes,
                          memory_order_relaxed);
    atomic_store_explicit(&s->pushback_max_ns, p->pushback_max_ns,
                          memory_order_relaxed);
    atomic_store_explicit(&s->health_slot_ns, p->window_ns / SEG_HEALTH_SLOTS,
                          memory_order_release);
}

void retryd__health_params_of(seg_upstream *s, health_params *ret)
{
    *ret = (health_params){
        .flags = atomic_load_explicit(&s->health_flags, memory_order_relaxed),
        .k_micro =
            atomic_load_explicit(&s->throttle_k_micro, memory_order_relaxed),
        .window_ns = health_slot_ns(s) * SEG_HEALTH_SLOTS,
        .min_processes = atomic_load_explicit(&s->throttle_min_processes,
                                              memory_order_relaxed),
        .pushback_max_ns =
            atomic_load_explicit(&s->pushback_max_ns, memory_order_relaxed),
    };
}

/*
 * The ring word was not of epoch @p e, or is full. A full word of this
 * epoch drops the event (a slot saw four million attempts: the window is
 * not short of evidence). Any other word is from an older round of the
 * ring (or scribbled): the new epoch starts with this event, by
 * compare-and-swap, so that of two processes rotating at once one starts
 * it and the other adds to it.
 */
void retryd__health_add_slow(_Atomic uint64_t *w, uint64_t old, uint64_t e,
                             uint64_t add)
{
    for (;;) {
        if (health_word_epoch(old) == e) {
            if ((old >> HEALTH_COUNT_BITS & HEALTH_COUNT_MASK) >=
                HEALTH_COUNT_LIMIT)
                return;
            atomic_fetch_add_explicit(w, add, memory_order_relaxed);
            return;
        }
        if (atomic_compare_exchange_weak_explicit(
                w, &old, e << HEALTH_EPOCH_SHIFT | add, memory_order_relaxed,
                memory_order_relaxed))
            return;
    }
}

/* Take one count back from the rejecters word of epoch @p e, if the word
 * still is of that epoch (a rotated word already forgot it). */
static void rejecter_leave(_Atomic uint64_t *ring, uint64_t e)
{
    _Atomic uint64_t *w = &ring[e % SEG_HEALTH_SLOTS];
    uint64_t old = atomic_load_explicit(w, memory_order_relaxed);
    const uint64_t count_mask = (UINT64_C(1) << HEALTH_EPOCH_SHIFT) - 1;
    while (health_word_epoch(old) == e && (old & count_mask) > 0)
        if (atomic_compare_exchange_weak_explicit(
                w, &old, old - 1, memory_order_relaxed, memory_order_relaxed))
            return;
}

void retryd__health_reject(seg_upstream *s, uint64_t now_ns,
                           _Atomic uint64_t *mine)
{
    uint64_t slot = health_slot_ns(s);
    if (slot == 0 ||
        !(atomic_load_explicit(&s->health_flags, memory_order_relaxed) &
          SEG_HEALTH_THROTTLE))
        return;
    uint64_t e = health_epoch(now_ns, slot);
    uint64_t prev = atomic_load_explicit(mine, memory_order_relaxed);
    if (prev == e + 1)
        return; /* counted in this slot already */
    if (!atomic_compare_exchange_strong_explicit(
            mine, &prev, e + 1, memory_order_relaxed, memory_order_relaxed))
        return; /* another thread of the process moved it */
    health_add(s->rejecters, e, 1);
    if (prev != 0)
        rejecter_leave(s->rejecters, prev - 1);
}

void retryd__health_view(seg_upstream *s, uint64_t now_ns, health_view *ret)
{
    *ret = (health_view){0};
    uint64_t slot = health_slot_ns(s);
    uint64_t flags =
        atomic_load_explicit(&s->health_flags, memory_order_relaxed);
    if (slot == 0 || !(flags & SEG_HEALTH_THROTTLE))
        return;
    uint64_t e = health_epoch(now_ns, slot);
    const uint64_t count_mask = (UINT64_C(1) << HEALTH_EPOCH_SHIFT) - 1;
    for (unsigned i = 0; i < SEG_HEALTH_SLOTS; i++) {
        uint64_t w = atomic_load_explicit(&s->window[i], memory_order_relaxed);
        if (health_live(health_word_epoch(w), i, e)) {
            ret->requests += w >> HEALTH_COUNT_BITS & HEALTH_COUNT_MASK;
            ret->accepts += w & HEALTH_COUNT_MASK;
        }
        uint64_t r =
            atomic_load_explicit(&s->rejecters[i], memory_order_relaxed);
        if (health_live(health_word_epoch(r), i, e))
            ret->rejecters += r & count_mask;
    }
    health_view_judge(s, ret);
}

bool retryd__health_claim_probe(seg_upstream *s, uint64_t now_ns)
{
    uint64_t slot = health_slot_ns(s);
    if (slot == 0)
        return true;
    uint64_t stamp = health_epoch(now_ns, slot) + 1;
    uint64_t old = atomic_load_explicit(&s->probe_epoch, memory_order_relaxed);
    return old != stamp && atomic_compare_exchange_strong_explicit(
                               &s->probe_epoch, &old, stamp,
                               memory_order_relaxed, memory_order_relaxed);
}

void retryd__health_push(seg_upstream *s, uint64_t now_ns, int64_t hold_ns)
{
    if (hold_ns <= 0 ||
        !(atomic_load_explicit(&s->health_flags, memory_order_relaxed) &
          SEG_HEALTH_PUSHBACK))
        return;
    uint64_t max =
        atomic_load_explicit(&s->pushback_max_ns, memory_order_relaxed);
    uint64_t hold = (uint64_t)hold_ns < max ? (uint64_t)hold_ns : max;
    uint64_t until = now_ns + hold;
    uint64_t old =
        atomic_load_explicit(&s->pushback_until_ns, memory_order_relaxed);
    while (old < until && !atomic_compare_exchange_weak_explicit(
                              &s->pushback_until_ns, &old, until,
                              memory_order_relaxed, memory_order_relaxed))
        ;
}

int64_t retryd__health_hold(seg_upstream *s, uint64_t now_ns)
{
    if (!(atomic_load_explicit(&s->health_flags, memory_order_relaxed) &
          SEG_HEALTH_PUSHBACK))
        return 0;
    uint64_t until =
        atomic_load_explicit(&s->pushback_until_ns, memory_order_relaxed);
    /* Within the coarse clock's tick of its end a hold is over: the
     * process that set it, waking when its own Retry-After ends, reads a
     * clock up to a tick behind its own, and must not wait again. */
    if (until <= now_ns + HEALTH_HOLD_SLACK_NS)
        return 0;
    uint64_t max =
        atomic_load_explicit(&s->pushback_max_ns, memory_order_relaxed);
    uint64_t left = until - now_ns;
    return (int64_t)(left < max ? left : max);
}

int64_t retryd__health_hold_spent(seg_upstream *s, uint64_t now_ns)
{
    int64_t left = retryd__health_hold(s, now_ns);
    uint64_t until =
        atomic_load_explicit(&s->pushback_until_ns, memory_order_relaxed);
    /* A hold set meanwhile fails the exchange and stays. */
    if (left == 0 && until != 0 && until <= now_ns)
        atomic_compare_exchange_strong_explicit(&s->pushback_until_ns, &until,
                                                0, memory_order_relaxed,
                                                memory_order_relaxed);
    return left;
}

/* Clear ring word @p i of @p ring when no writer could have left it as it
 * is at epoch @p e; true when it did. */
static bool police_word(_Atomic uint64_t *ring, unsigned i, uint64_t e,
                        bool window, uint64_t max_rejecters)
{
    uint64_t w = atomic_load_explicit(&ring[i], memory_order_relaxed);
    uint64_t we = health_word_epoch(w);
    bool bad;
    if (w == 0)
        return false;
    if (we % SEG_HEALTH_SLOTS != i)
        bad = true; /* in the wrong place of the ring */
    else if (!health_live(we, i, e))
        /* Stale words are harmless, unless stamped ahead of now: those
         * would come alive when their epoch comes. One slot of slack for
         * a writer whose clock read the next slot first. */
        bad = ((we - e) & HEALTH_EPOCH_MASK) <= HEALTH_EPOCH_MASK / 2 &&
              ((we - e) & HEALTH_EPOCH_MASK) > 1;
    else if (window)
        bad = (w & HEALTH_COUNT_MASK) >
              (w >> HEALTH_COUNT_BITS & HEALTH_COUNT_MASK);
    else
        bad = (w & ((UINT64_C(1) << HEALTH_EPOCH_SHIFT) - 1)) > max_rejecters;
    /* Only the word as it was read is cleared: a writer that changed it
     * since has a word of its own. */
    return bad && atomic_compare_exchange_strong_explicit(&ring[i], &w, 0,
                                                          memory_order_relaxed,
                                                          memory_order_relaxed);
}

unsigned retryd__health_check(seg_upstream *s, uint64_t now_ns,
                              uint64_t max_rejecters, const health_params *want)
{
    unsigned damage = 0;
    health_params have;
    retryd__health_params_of(s, &have);
    if (!retryd__health_params_ok(&have) ||
        have.window_ns / SEG_HEALTH_SLOTS == 0) {
        retryd__health_init(s, want);
        return HEALTH_PARAMS_RESET;
    }
    uint64_t e = health_epoch(now_ns, health_slot_ns(s));
    for (unsigned i = 0; i < SEG_HEALTH_SLOTS; i++) {
        if (police_word(s->window, i, e, true, max_rejecters))
            damage |= HEALTH_WINDOW_RESET;
        if (police_word(s->rejecters, i, e, false, max_rejecters))
            damage |= HEALTH_WINDOW_RESET;
    }
    uint64_t until =
        atomic_load_explicit(&s->pushback_until_ns, memory_order_relaxed);
    if (until > now_ns && until - now_ns > have.pushback_max_ns &&
        atomic_compare_exchange_strong_explicit(
            &s->pushback_until_ns, &until, now_ns + have.pushback_max_ns,
            memory_order_relaxed, memory_order_relaxed))
        damage |= HEALTH_PUSHBACK_RESET;
    return damage;
}
