/* SPDX-License-Identifier: MIT */
/*
 * Calls: the executor's loop (libclient/exec/attempt.c), step for step, in
 * simulated time. A first attempt is admitted (the policy may throttle
 * it), opened (the policy's deposit), and sent with the profile's attempt
 * timeout, cut to the deadline; when it ends, the policy hears how, and a
 * failed one goes to the decision engine, retryd_decide(), with the facts
 * the executor would give it and the policy's budget. A retry waits the
 * backoff the engine drew and is sent. The requests are idempotent GETs
 * with no body: whether a retry is allowed is the budget's and the
 * deadline's question, never the request's.
 */
#include "base/macros.h"
#include "sim/policy.h"
#include "sim/sim.h"

static const sim_policy *policy_of(const sim_world *w)
{
    return w->p.policy;
}

/* A server of tier @p tier: the deepest layer's, or a host's at random. */
static sim_server *pick_server(sim_world *w, uint32_t tier)
{
    if (tier == w->p.layers)
        return &w->deepest;
    return &sim_host_at(w, tier, (uint32_t)sim_rng_below(&w->lb, w->p.hosts))
                ->server;
}

/* A call of tier 0 that got its response: the goodput's. */
static void count_goodput(sim_world *w)
{
    sim_bin *b = sim_bin_now(w);
    if (b != NULL)
        b->goodput++;
}

/* The call is over: its server's request (if it serves one) is answered,
 * the policy's books closed. */
static void finish(sim_world *w, sim_call *c, bool ok)
{
    sim_cancel(&w->q, &c->ev);
    if (c->att != NULL) {
        sim_req_abandon(w, c->att);
        c->att = NULL;
    }
    retryd__queue_remove(&c->link);
    if (policy_of(w)->finish != NULL)
        policy_of(w)->finish(w, c);
    if (c->parent != NULL)
        sim_req_respond(w, c->parent, ok ? 200 : 503);
    else if (ok)
        count_goodput(w);
    sim_call_release(w, c);
}

static void on_timeout(void *ctx, sim_event *e);

static void send_attempt(sim_world *w, sim_call *c)
{
    sim_req *r = sim_req_alloc(w);
    if (r == NULL) {
        finish(w, c, false);
        return;
    }
    c->attempt++;
    r->caller = c;
    r->attempt = c->attempt;
    r->srv = pick_server(w, c->proc->host->tier + 1);
    c->att = r;
    int64_t left = c->deadline - w->q.now;
    int64_t timeout =
        left < w->p.attempt_timeout_ns ? left : w->p.attempt_timeout_ns;
    sim_schedule(&w->q, &c->ev, w->q.now + timeout, on_timeout);
    if (policy_of(w)->sent != NULL)
        policy_of(w)->sent(w, c);
    sim_req_send(w, r);
}

static void on_backoff(void *ctx, sim_event *e)
{
    send_attempt(ctx, RETRYD_CONTAINER_OF(e, sim_call, ev));
}

/* The facts the executor fills (fill_facts): an idempotent request with a
 * replayable body, no Retry-After, no refresh, not draining. */
static void facts_of(const sim_world *w, const sim_call *c, int status,
                     retryd_facts *f)
{
    int64_t left = c->deadline - w->q.now;
    *f = (retryd_facts){
        .sz = sizeof(*f),
        .attempt = c->attempt,
        .max_attempts = w->p.attempts,
        .evidence = status ? RETRYD_EVIDENCE_RESPONSE_RECEIVED
                           : RETRYD_EVIDENCE_SENT_NO_RESPONSE,
        .replayability = RETRYD_REPLAYABLE,
        .idempotency = RETRYD_IDEMPOTENCY_IDEMPOTENT,
        .failure = status ? RETRYD_FAILURE_NONE : RETRYD_FAILURE_TIMEOUT,
        .status = status,
        .retry_after_ns = -1,
        .remaining_ns = left > 0 ? left : 0,
        .min_attempt_ns = w->p.min_attempt_ns,
        .prev_delay_ns = c->wait,
        .refresh_used = true,
    };
}

/* The attempt in flight ended with @p status (0: it timed out). */
static void attempt_over(sim_world *w, sim_call *c, int status)
{
    if (policy_of(w)->outcome != NULL)
        policy_of(w)->outcome(w, c, status);
    if (status == 200) {
        finish(w, c, true);
        return;
    }
    retryd_facts f;
    facts_of(w, c, status, &f);
    retryd_decide_env env = {
        .sz = sizeof(env),
        .backoff = &w->p.backoff,
        .random = sim_rng_source,
        .random_ctx = &w->jitter,
        .budget = policy_of(w)->budget,
        .budget_ctx = c,
    };
    retryd_decision d = {.sz = sizeof(d)};
    if (retryd_decide(&f, &env, &d) < 0 || d.verdict != RETRYD_VERDICT_RETRY) {
        finish(w, c, false);
        return;
    }
    c->wait = d.delay_ns;
    sim_schedule(&w->q, &c->ev, w->q.now + d.delay_ns, on_backoff);
}

static void on_timeout(void *ctx, sim_event *e)
{
    sim_world *w = ctx;
    sim_call *c = RETRYD_CONTAINER_OF(e, sim_call, ev);
    sim_req *r = c->att;
    c->att = NULL;
    sim_req_abandon(w, r);
    attempt_over(w, c, 0);
}

void sim_call_answer(sim_world *w, sim_call *c, int status)
{
    sim_cancel(&w->q, &c->ev);
    c->att = NULL;
    attempt_over(w, c, status);
}

void sim_call_start(sim_world *w, sim_proc *proc, sim_req *parent)
{
    sim_call *c = sim_call_alloc(w);
    if (c == NULL) {
        if (parent != NULL)
            sim_req_respond(w, parent, 503);
        return;
    }
    c->proc = proc;
    c->parent = parent;
    c->deadline = w->q.now + w->p.deadline_ns;
    retryd__queue_insert_tail(&proc->calls, &c->link);
    if (parent == NULL) {
        sim_bin *b = sim_bin_now(w);
        if (b != NULL)
            b->started++;
        w->top_started += sim_measuring(w);
    }
    /* As the executor: admitted first, then opened, depositing. */
    if (policy_of(w)->admit != NULL && !policy_of(w)->admit(w, c)) {
        finish(w, c, false);
        return;
    }
    if (policy_of(w)->first != NULL)
        policy_of(w)->first(w, c);
    send_attempt(w, c);
}

void sim_proc_kill_calls(sim_world *w, sim_proc *proc)
{
    RETRYD_QUEUE_FOREACH_SAFE(it, &proc->calls)
    {
        finish(w, RETRYD_QUEUE_DATA(it, sim_call, link), false);
    }
}
