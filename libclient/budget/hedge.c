/* SPDX-License-Identifier: MIT */
/*
 * Hedging as a service sees it (docs/hedging.md): the host's part of a
 * hedge's facts read from the upstream's slot, the engine asked, the two
 * budgets paid, and what happened counted. Like the health, it lives on
 * the handle's shared slot while it has one, else on its process-local
 * slot (retryd__upstream_slot); it knows nothing of HTTP.
 */
#include <string.h>

#include "base/macros.h"
#include "budget/host.h"

#define NS_PER_S UINT64_C(1000000000)

/* The hedge's two tokens, all-or-nothing: the host hedge bucket's first
 * (it gives back simply), then the retry bucket's, through the same
 * withdrawal as a retry's (fair shares, the request's share, its counts:
 * a hedge's token is a grant like a retry's). */
static int take_both(void *ctx, uint32_t taken)
{
    retryd_upstream *up = ctx;
    seg_upstream *s = retryd__upstream_slot(up);
    int r = retryd__hedge_take(&s->hedge, retryd__clock_coarse_ns());
    if (r < 0)
        return r;
    r = retryd_upstream_withdraw_for(up, taken);
    if (r < 0)
        retryd__hedge_give_back(&s->hedge);
    return r;
}

static bool peek_both(void *ctx)
{
    retryd_upstream *up = ctx;
    seg_upstream *s = retryd__upstream_slot(up);
    return retryd__hedge_projected_balance(
               &s->hedge, retryd__clock_coarse_ns()) >= SEG_MICRO &&
           retryd_upstream_peek(up);
}

static bool take_one_retry_token(void *ctx)
{
    return take_both(ctx, 0) == 0;
}

static const retryd_budget_iface hedge_budget = {
    sizeof(retryd_budget_iface), peek_both, take_one_retry_token, take_both};

/* The host's part of the facts: the picture (for an adaptive request),
 * the throttle, the pushback, draining. */
static void host_facts(retryd_upstream *up, seg_upstream *s, uint64_t now,
                       retryd_hedge_facts *f)
{
    if (f->picture != RETRYD_HEDGE_PICTURE_FIXED) {
        uint64_t delay = 0;
        enum hedge_pic p = retryd__hedge_picture(&s->hedge, now, &delay);
        f->picture = p == HEDGE_PIC_FRESH     ? RETRYD_HEDGE_PICTURE_FRESH
                     : p == HEDGE_PIC_NO_TAIL ? RETRYD_HEDGE_PICTURE_NO_TAIL
                                              : RETRYD_HEDGE_PICTURE_NONE;
        f->delay_ns = (int64_t)delay;
    }
    health_view v;
    retryd__health_view(s, now, &v);
    f->throttle_engaged = v.engaged;
    f->pushback_ns = retryd_upstream_pushback(up);
    f->draining = retryd_host_draining(up->host);
}

/* What a decision counts: a hedge sent, or one due and refused. */
static void count(seg_hedge *h, const retryd_hedge_facts *f,
                  const retryd_hedge_decision *d)
{
    bool due = f->elapsed_ns >= f->delay_ns;
    switch (d->rule) {
    case RETRYD_HEDGE_RULE_SEND:
        hedge_count(h, SEG_H_SENT, 1);
        break;
    case RETRYD_HEDGE_RULE_HEDGE_BUDGET:
        hedge_count(h, SEG_H_REFUSED_HEDGE_BUDGET, 1);
        break;
    case RETRYD_HEDGE_RULE_RETRY_BUDGET:
    case RETRYD_HEDGE_RULE_PROCESS_OVER_SHARE:
    case RETRYD_HEDGE_RULE_REQUEST_OVER_SHARE:
        hedge_count(h, SEG_H_REFUSED_RETRY_BUDGET, 1);
        break;
    case RETRYD_HEDGE_RULE_HOST_THROTTLED:
        hedge_count(h, SEG_H_REFUSED_THROTTLED, 1);
        break;
    case RETRYD_HEDGE_RULE_HOST_PUSHBACK:
        hedge_count(h, SEG_H_REFUSED_PUSHBACK, 1);
        break;
    case RETRYD_HEDGE_RULE_DEADLINE:
        if (due)
            hedge_count(h, SEG_H_REFUSED_DEADLINE, 1);
        break;
    case RETRYD_HEDGE_RULE_DRAINING:
        if (due)
            hedge_count(h, SEG_H_REFUSED_DRAINING, 1);
        break;
    default: /* not due, or never to be hedged: nothing was refused */
        break;
    }
}

int retryd_upstream_hedge(retryd_upstream *up, const retryd_hedge_facts *facts,
                          retryd_hedge_decision *ret)
{
    retryd_hedge_facts f;
    if (up == NULL || facts == NULL || ret == NULL)
        return RETRYD_EINVAL;
    int r =
        RETRYD_COPY_OPTS(&f, facts, RETRYD_OPTS_MIN(retryd_hedge_facts, taken));
    if (r < 0)
        return r;
    f.sz = sizeof(f);
    seg_upstream *s = retryd__upstream_slot(up);
    host_facts(up, s, retryd__clock_coarse_ns(), &f);
    const retryd_decide_env env = {
        .sz = sizeof(env), .budget = &hedge_budget, .budget_ctx = up};
    r = retryd_hedge_decide(&f, &env, ret);
    if (r == 0 && ret->sz >= RETRYD_OPTS_MIN(retryd_hedge_decision, rule))
        count(&s->hedge, &f, ret);
    return r;
}

void retryd_upstream_hedge_deposit(retryd_upstream *up)
{
    if (up != NULL)
        retryd__hedge_deposit(&retryd__upstream_slot(up)->hedge);
}

void retryd_upstream_hedge_observe(retryd_upstream *up, int64_t latency_ns,
                                   bool outlived)
{
    if (up != NULL && latency_ns >= 0)
        retryd__hedge_observe(&retryd__upstream_slot(up)->hedge,
                              (uint64_t)latency_ns, outlived);
}

void retryd_upstream_hedge_won(retryd_upstream *up)
{
    if (up != NULL)
        hedge_count(&retryd__upstream_slot(up)->hedge, SEG_H_WON, 1);
}

static uint64_t counter(seg_hedge *h, enum seg_hedge_counter c)
{
    return atomic_load_explicit(&h->counters[c], memory_order_relaxed);
}

static retryd_hedge_picture picture_of(seg_hedge *h, uint64_t now,
                                       int64_t *ret_delay)
{
    uint64_t delay = 0;
    bool fresh;
    enum hedge_pic p = retryd__hedge_picture_peek(h, now, &delay, &fresh);
    *ret_delay = (int64_t)delay;
    if (!fresh || p == HEDGE_PIC_NONE) {
        *ret_delay = 0;
        return RETRYD_HEDGE_PICTURE_NONE;
    }
    return p == HEDGE_PIC_FRESH ? RETRYD_HEDGE_PICTURE_FRESH
                                : RETRYD_HEDGE_PICTURE_NO_TAIL;
}

int retryd_upstream_hedging(retryd_upstream *up, retryd_hedging *ret)
{
    if (up == NULL || ret == NULL ||
        ret->sz < RETRYD_OPTS_MIN(retryd_hedging, discarded))
        return RETRYD_EINVAL;
    seg_hedge *h = &retryd__upstream_slot(up)->hedge;
    uint64_t now = retryd__clock_coarse_ns();
    hedge_params p;
    retryd__hedge_params_of(h, &p);
    retryd_hedging out = {
        .sz = sizeof(out),
        .max_extra_load = (double)p.ratio_micro / 1e6,
        .min_hedges_per_sec = (double)p.floor_micro_per_s / 1e6,
        .cap = (double)p.cap_micro / 1e6,
        .balance = (double)retryd__hedge_balance(h, now) / 1e6,
        .min_delay_ns = (int64_t)p.min_delay_ns,
        .window_ns = (int64_t)p.window_ns,
        .sent = counter(h, SEG_H_SENT),
        .won = counter(h, SEG_H_WON),
        .refused_hedge_budget = counter(h, SEG_H_REFUSED_HEDGE_BUDGET),
        .refused_retry_budget = counter(h, SEG_H_REFUSED_RETRY_BUDGET),
        .refused_throttled = counter(h, SEG_H_REFUSED_THROTTLED),
        .refused_pushback = counter(h, SEG_H_REFUSED_PUSHBACK),
        .refused_deadline = counter(h, SEG_H_REFUSED_DEADLINE),
        .refused_draining = counter(h, SEG_H_REFUSED_DRAINING),
        .deposits = counter(h, SEG_H_DEPOSITS),
        .refilled = (double)counter(h, SEG_H_REFILLED_MICRO) / 1e6,
        .discarded = (double)counter(h, SEG_H_DISCARDED_MICRO) / 1e6,
    };
    out.picture = picture_of(h, now, &out.delay_ns);
    size_t sz = ret->sz < sizeof(out) ? ret->sz : sizeof(out);
    out.sz = sz;
    memcpy(ret, &out, sz);
    return 0;
}
