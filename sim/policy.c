/* SPDX-License-Identifier: MIT */
/*
 * The policies other than retryd's (policy_retryd.c), each as its own
 * documentation describes it; docs/storms.md cites the constants:
 *
 *   naive    N attempts, nothing else.
 *   finagle  Finagle's RetryBudget(ttl 10 s, minRetriesPerSec 10,
 *            percentCanRetry 0.2), per process: every request deposits
 *            1000 into a 10-slice window of 10 s, a retry withdraws
 *            1000 / 0.2 = 5000 when the window's sum plus the reserve
 *            (10/s x 10 s x 5000) holds that much.
 *   grpc     gRPC's retry throttling (A6: maxTokens 10, tokenRatio 0.1),
 *            per process (one channel): a failed attempt takes 1 token, a
 *            successful one adds 0.1, and no retry while the count is at
 *            or below half of the maximum.
 *   aws      the AWS SDKs' standard retry quota (500 tokens, 5 per retry,
 *            10 per retry after a timeout, 1 back per success without a
 *            retry, the retry's cost back when it succeeds), per process.
 *   aws-2026 the same quota with the SDKs' 2026 retry costs
 *            (AWS_NEW_RETRIES_2026): 14 per transient retry, timeouts
 *            like any transient error, 5 after throttling (429).
 *   envoy    Envoy's retry budget (budget_percent 20, min_retry_concurrency
 *            3), per proxy (a sidecar per process): retries in progress
 *            at most max(3, 20 % of the requests in flight).
 */
#include "sim/policy.h"

#include <stdlib.h>
#include <string.h>

/* The call a budget is asked for (retryd_budget_iface's context). */
static inline sim_call *call_of(void *ctx)
{
    return ctx;
}

static void *proc_state(const sim_call *c)
{
    return c->proc->policy;
}

static int alloc_state(sim_proc *p, size_t size)
{
    free(p->policy);
    p->policy = calloc(1, size);
    return p->policy ? 0 : -1;
}

static void free_state(sim_proc *p)
{
    free(p->policy);
    p->policy = NULL;
}

/* --- naive --------------------------------------------------------------- */

static const sim_policy policy_naive = {
    .name = "naive",
    .what = "N attempts, no budget",
};

/* --- Finagle ------------------------------------------------------------- */

#define FINAGLE_SLICES 10
#define FINAGLE_SLICE_NS SIM_NS_PER_S /* ttl 10 s in 10 slices */
#define FINAGLE_DEPOSIT 1000          /* ScaleFactor */
#define FINAGLE_WITHDRAW 5000         /* ScaleFactor / percentCanRetry */
#define FINAGLE_RESERVE (10 * 10 * FINAGLE_WITHDRAW) /* min/s x ttl */

typedef struct finagle_state {
    int64_t sum[FINAGLE_SLICES];
    int64_t epoch[FINAGLE_SLICES];
} finagle_state;

/* The WindowedAdder: what was added in the last ttl. */
static int64_t finagle_sum(const finagle_state *f, int64_t now)
{
    int64_t e = now / FINAGLE_SLICE_NS, total = 0;
    for (int i = 0; i < FINAGLE_SLICES; i++)
        if (f->epoch[i] > e - FINAGLE_SLICES && f->epoch[i] <= e)
            total += f->sum[i];
    return total;
}

static void finagle_add(finagle_state *f, int64_t now, int64_t v)
{
    int64_t e = now / FINAGLE_SLICE_NS;
    int i = (int)(e % FINAGLE_SLICES);
    if (f->epoch[i] != e) {
        f->epoch[i] = e;
        f->sum[i] = 0;
    }
    f->sum[i] += v;
}

static int finagle_init(sim_world *w, sim_proc *p)
{
    (void)w;
    if (alloc_state(p, sizeof(finagle_state)) < 0)
        return -1;
    finagle_state *f = p->policy;
    for (int i = 0; i < FINAGLE_SLICES; i++)
        f->epoch[i] = INT64_MIN; /* nothing in the window yet */
    return 0;
}

static void finagle_first(sim_world *w, sim_call *c)
{
    finagle_add(proc_state(c), w->q.now, FINAGLE_DEPOSIT);
}

static bool finagle_peek(void *ctx)
{
    sim_call *c = call_of(ctx);
    const finagle_state *f = proc_state(c);
    sim_world *w = c->proc->host->world;
    return finagle_sum(f, w->q.now) + FINAGLE_RESERVE >= FINAGLE_WITHDRAW;
}

static bool finagle_take(void *ctx)
{
    if (!finagle_peek(ctx))
        return false;
    sim_call *c = call_of(ctx);
    finagle_add(proc_state(c), c->proc->host->world->q.now, -FINAGLE_WITHDRAW);
    return true;
}

static const retryd_budget_iface finagle_budget = {
    sizeof(retryd_budget_iface), finagle_peek, finagle_take, NULL};

static const sim_policy policy_finagle = {
    .name = "finagle",
    .what = "Finagle RetryBudget: 20 %, 10/s, 10 s window, per process",
    .per_process = true,
    .ratio = 0.2,
    .floor = 10,
    .proc_init = finagle_init,
    .proc_free = free_state,
    .first = finagle_first,
    .budget = &finagle_budget,
};

/* --- gRPC
 * --------------------------------------------------------------------- */

#define GRPC_MAX_MILLI                                                         \
    10000                    /* maxTokens 10, in thousandths as gRPC keeps it  \
                              */
#define GRPC_RATIO_MILLI 100 /* tokenRatio 0.1 */

typedef struct grpc_state {
    int32_t tokens_milli;
} grpc_state;

static int grpc_init(sim_world *w, sim_proc *p)
{
    (void)w;
    if (alloc_state(p, sizeof(grpc_state)) < 0)
        return -1;
    ((grpc_state *)p->policy)->tokens_milli = GRPC_MAX_MILLI;
    return 0;
}

static void grpc_outcome(sim_world *w, sim_call *c, int status)
{
    (void)w;
    grpc_state *g = proc_state(c);
    if (status == 200)
        g->tokens_milli = g->tokens_milli + GRPC_RATIO_MILLI > GRPC_MAX_MILLI
                              ? GRPC_MAX_MILLI
                              : g->tokens_milli + GRPC_RATIO_MILLI;
    else
        g->tokens_milli = g->tokens_milli < 1000 ? 0 : g->tokens_milli - 1000;
}

/* Retries while the count is above half the maximum: A6 checks after the
 * failure's decrement, which grpc_outcome made. */
static bool grpc_peek(void *ctx)
{
    const grpc_state *g = proc_state(call_of(ctx));
    return g->tokens_milli > GRPC_MAX_MILLI / 2;
}

static const retryd_budget_iface grpc_budget = {sizeof(retryd_budget_iface),
                                                grpc_peek, grpc_peek, NULL};

static const sim_policy policy_grpc = {
    .name = "grpc",
    .what = "gRPC retry throttling (A6): 10 tokens, ratio 0.1, per process",
    .per_process = true,
    .proc_init = grpc_init,
    .proc_free = free_state,
    .outcome = grpc_outcome,
    .budget = &grpc_budget,
};

/* --- AWS
 * ----------------------------------------------------------------------- */

#define AWS_QUOTA 500
#define AWS_RETRY_COST 5
#define AWS_TIMEOUT_COST 10
#define AWS_NO_RETRY_INCREMENT 1
/* The 2026 costs: a transient error (a timeout among them) 14, a
 * throttling error 5. */
#define AWS_2026_RETRY_COST 14
#define AWS_2026_THROTTLE_COST 5

typedef struct aws_state {
    int32_t quota;
    int32_t retry_cost, timeout_cost, throttle_cost;
} aws_state;

static int aws_init_costs(sim_proc *p, int32_t retry, int32_t timeout,
                          int32_t throttle)
{
    if (alloc_state(p, sizeof(aws_state)) < 0)
        return -1;
    *(aws_state *)p->policy = (aws_state){AWS_QUOTA, retry, timeout, throttle};
    return 0;
}

static int aws_init(sim_world *w, sim_proc *p)
{
    (void)w;
    return aws_init_costs(p, AWS_RETRY_COST, AWS_TIMEOUT_COST, AWS_RETRY_COST);
}

static int aws_2026_init(sim_world *w, sim_proc *p)
{
    (void)w;
    return aws_init_costs(p, AWS_2026_RETRY_COST, AWS_2026_RETRY_COST,
                          AWS_2026_THROTTLE_COST);
}

static void aws_outcome(sim_world *w, sim_call *c, int status)
{
    (void)w;
    aws_state *a = proc_state(c);
    c->timed_out = status == 0;
    c->throttled = status == 429;
    if (status != 200)
        return;
    /* A success gives back what its retry took, or one token when it
     * needed no retry. */
    int32_t back = c->aws_held ? (int32_t)c->aws_held : AWS_NO_RETRY_INCREMENT;
    c->aws_held = 0;
    a->quota = a->quota + back > AWS_QUOTA ? AWS_QUOTA : a->quota + back;
}

static int32_t aws_cost(const sim_call *c)
{
    const aws_state *a = proc_state(c);
    return c->timed_out   ? a->timeout_cost
           : c->throttled ? a->throttle_cost
                          : a->retry_cost;
}

static bool aws_peek(void *ctx)
{
    sim_call *c = call_of(ctx);
    return ((aws_state *)proc_state(c))->quota >= aws_cost(c);
}

static bool aws_take(void *ctx)
{
    sim_call *c = call_of(ctx);
    aws_state *a = proc_state(c);
    int32_t cost = aws_cost(c);
    if (a->quota < cost)
        return false;
    a->quota -= cost;
    c->aws_held = (uint32_t)cost;
    return true;
}

static const retryd_budget_iface aws_budget = {sizeof(retryd_budget_iface),
                                               aws_peek, aws_take, NULL};

static const sim_policy policy_aws = {
    .name = "aws",
    .what = "AWS standard retry quota: 500, 5 a retry, 10 after a timeout, "
            "per process",
    .per_process = true,
    .proc_init = aws_init,
    .proc_free = free_state,
    .outcome = aws_outcome,
    .budget = &aws_budget,
};

static const sim_policy policy_aws_2026 = {
    .name = "aws-2026",
    .what = "AWS standard retry quota with the 2026 costs: 500, 14 a "
            "transient retry, 5 after throttling, per process",
    .per_process = true,
    .proc_init = aws_2026_init,
    .proc_free = free_state,
    .outcome = aws_outcome,
    .budget = &aws_budget,
};

/* --- Envoy
 * ----------------------------------------------------------------------- */

#define ENVOY_PERCENT 0.20
#define ENVOY_MIN_CONCURRENCY 3

typedef struct envoy_state {
    uint32_t active;  /* attempts in flight through the proxy */
    uint32_t retries; /* retries granted and not yet answered */
} envoy_state;

static int envoy_init(sim_world *w, sim_proc *p)
{
    (void)w;
    /* The sidecar outlives its application: a restarted process finds
     * the proxy's counts as its calls left them (a crash released what
     * they held, envoy_finish). */
    if (p->policy != NULL)
        return 0;
    p->policy = calloc(1, sizeof(envoy_state));
    return p->policy ? 0 : -1;
}

static void envoy_sent(sim_world *w, sim_call *c)
{
    (void)w;
    ((envoy_state *)proc_state(c))->active++;
    c->attempt_out = true;
}

/* The attempt is over: it no longer counts as active, and the retry it
 * was (Envoy resets a retry's hold at the next decision) is released. */
static void envoy_release(sim_call *c)
{
    envoy_state *e = proc_state(c);
    if (c->attempt_out) {
        e->active--;
        c->attempt_out = false;
    }
    if (c->retry_held) {
        e->retries--;
        c->retry_held = false;
    }
}

static void envoy_outcome(sim_world *w, sim_call *c, int status)
{
    (void)w;
    (void)status;
    envoy_release(c);
}

static void envoy_finish(sim_world *w, sim_call *c)
{
    (void)w;
    envoy_release(c);
}

static bool envoy_peek(void *ctx)
{
    const envoy_state *e = proc_state(call_of(ctx));
    double limit = ENVOY_PERCENT * (double)e->active;
    if (limit < ENVOY_MIN_CONCURRENCY)
        limit = ENVOY_MIN_CONCURRENCY;
    return (double)e->retries < limit;
}

static bool envoy_take(void *ctx)
{
    if (!envoy_peek(ctx))
        return false;
    sim_call *c = call_of(ctx);
    ((envoy_state *)proc_state(c))->retries++;
    c->retry_held = true;
    return true;
}

static const retryd_budget_iface envoy_budget = {sizeof(retryd_budget_iface),
                                                 envoy_peek, envoy_take, NULL};

static const sim_policy policy_envoy = {
    .name = "envoy",
    .what = "Envoy retry budget: 20 % of active requests, min 3 "
            "concurrent, per proxy",
    .per_process = true,
    .proc_init = envoy_init,
    .proc_free = free_state,
    .sent = envoy_sent,
    .outcome = envoy_outcome,
    .finish = envoy_finish,
    .budget = &envoy_budget,
};

/* --- the table
 * ------------------------------------------------------------------- */

const sim_policy *const sim_policies[] = {
    &policy_naive,
    &policy_finagle,
    &policy_grpc,
    &policy_aws,
    &policy_aws_2026,
    &policy_envoy,
    &sim_policy_retryd,
    &sim_policy_retryd_adaptive,
    &sim_policy_retryd_local,
    &sim_policy_retryd_fleet,
};

const size_t sim_policy_count = sizeof(sim_policies) / sizeof(sim_policies[0]);
_Static_assert(sizeof(sim_policies) / sizeof(sim_policies[0]) <=
                   SIM_MAX_POLICIES,
               "SIM_MAX_POLICIES sizes the tables of retryd-sim's rows");

const sim_policy *sim_policy_find(const char *name)
{
    for (size_t i = 0; i < sim_policy_count; i++)
        if (strcmp(sim_policies[i]->name, name) == 0)
            return sim_policies[i];
    return NULL;
}
