/* SPDX-License-Identifier: MIT */
/*
 * The attempt state machine (attempt.h) and retryd_execute, its blocking
 * driver. Read docs/evidence.md first, then docs/async.md.
 *
 * Each attempt: a bulkhead permit and an easy handle from the profile's
 * pool (pool.c), one transfer whose callbacks fill an attempt_trace
 * (transfer.c), the evidence from that trace, a decision from the engine
 * (which takes the retry's token from the host budget), and, for a retry,
 * a backoff during which neither the permit nor the handle is held.
 *
 * This file decides what happens between attempts and what the caller gets
 * back; how a request goes on the wire is the transfer's, and how the
 * waits are waited is the driver's: retryd_execute below blocks its
 * thread, the multi (multi.c) runs the same steps from an event loop. It
 * depends on validate.c, transfer.c and pool.c, and none of them on it.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uuid/uuid.h>

#include "base/clock.h"
#include "base/macros.h"
#include "exec/attempt.h"
#include "exec/body_internal.h"
#include "exec/call.h"
#include "exec/evidence.h"
#include "exec/executor.h"
#include "exec/pool.h"
#include "exec/transfer.h"
#include "exec/validate.h"

/*
 * Each step of the state machine is written once, below, and inlined into
 * retryd_execute, which runs them back to back: out of line, the calls
 * between them cost the blocking path about 160 instructions per request
 * (over 10% of what retryd adds around curl_easy_perform;
 * docs/benchmarks.md). The multi calls the retryd__ wrappers at the end.
 */
#define STEP static inline __attribute__((always_inline))

#define DEFAULT_DEADLINE_NS (30 * INT64_C(1000000000))
#define AUTH_MAX 4096

/* --- one attempt --------------------------------------------------------- */

/*
 * The call's per-attempt state, which the transfer's callbacks fill (trace,
 * response headers, body, error text), cleared before the attempt asks for
 * a permit: an attempt that gets none still reports from a clean state.
 * Here rather than in transfer.c because the loop owns the call (call_init
 * sets the same fields up), and inlined it saves every attempt a call.
 */
STEP void attempt_reset(call *c)
{
    retryd__trace_init(&c->trace);
    retryd__hdrs_clear(&c->resp);
    c->pending_status = 0;
    c->pending_version = 0;
    c->header_bytes = c->header_lines = 0;
    c->stream_to_sink = false;
    c->buf_len = 0;
    c->errbuf[0] = '\0';
}

/* A body's reader for this attempt, or a MIME body's parts as a curl_mime
 * of handle @p h, whose files this attempt opens: both fail before the
 * request is sent (body_source). */
STEP void open_body(call *c, easy *h)
{
    c->body_open = false;
    c->mime = NULL;
    if (c->req->body == NULL)
        return;
    if (retryd__body_is_mime(c->req->body)
            ? retryd__body_mime(c->req->body, h->curl, &c->mime) < 0
            : retryd__body_open(c->req->body, &c->body) < 0) {
        c->trace.body_source_failed = true;
        snprintf(c->errbuf, sizeof(c->errbuf), "the body could not be opened");
        return;
    }
    c->body_open = c->mime == NULL; /* a reader to close */
}

STEP void describe_error(call *c, int rc)
{
    /* libcurl's error buffer keeps its first error, which after a vetoed
     * re-send is about the veto (a refused seek, an aborted callback), not
     * about what happened to the request. */
    if (c->trace.resend_blocked)
        snprintf(c->errbuf, sizeof(c->errbuf),
                 "%s; libcurl's own re-send was vetoed",
                 c->trace.refused_stream    ? "HTTP/2 stream refused"
                 : c->trace.http11_required ? "server requires HTTP/1.1"
                                            : "connection lost");
    else if (rc != CURLE_OK && c->errbuf[0] == '\0')
        snprintf(c->errbuf, sizeof(c->errbuf), "%s", curl_easy_strerror(rc));
}

/*
 * The next entry of the attempt log, which grows in the call: the attempt
 * runs and is decided in place, so nothing is copied per attempt. It
 * counts once log_attempt() has given it its error text.
 */
STEP attempt_rec *next_attempt(call *c, int64_t wait)
{
    if (c->n_att == c->cap_att) {
        size_t bytes = c->cap_att * sizeof(*c->att);
        if (!retryd__grow((void **)&c->att, bytes, &bytes,
                          bytes + sizeof(*c->att), c->att_first))
            return NULL;
        c->cap_att = bytes / sizeof(*c->att);
    }
    attempt_rec *rec = &c->att[c->n_att];
    *rec = (attempt_rec){
        .a = {.sz = sizeof(retryd_attempt), .wait_before_ns = wait},
        .d = {.sz = sizeof(retryd_decision)}};
    return rec;
}

/* The clocks of the attempt opening at @p start: its time, bounded by the
 * deadline, and until when it may wait for a bulkhead permit. */
STEP void attempt_clocks(call *c, attempt_rec *rec, int64_t start)
{
    int64_t left = c->deadline - start;
    c->start = start;
    c->attempt_ns =
        left < c->p->attempt_timeout_ns ? left : c->p->attempt_timeout_ns;
    c->permit_deadline =
        c->p->bulkhead_wait_ns &&
                retryd__add_sat(start, c->p->bulkhead_wait_ns) < c->deadline
            ? start + c->p->bulkhead_wait_ns
            : c->deadline;
    attempt_reset(c);
    rec->a.started_ns = start - c->t0;
    c->att_open = true;
}

STEP int attempt_open(call *c)
{
    attempt_rec *rec = next_attempt(c, c->wait);
    if (rec == NULL)
        return RETRYD_ENOMEM;
    rec->a.held_ns = c->held;
    c->held = 0;
    uint32_t round = ++c->round;
    /* The first attempt starts when the call did, unless a pushback held
     * it (the hold is in held_ns, not its duration); a retry after its
     * wait. */
    int64_t start =
        round == 1 && rec->a.held_ns == 0 ? c->now : retryd__now_ns();
    attempt_clocks(c, rec, start);
    rec->a.number = round + c->hedges; /* the rounds and hedges so far */
    rec->a.role = round == 1 ? RETRYD_ROLE_FIRST : RETRYD_ROLE_RETRY;
    if (round == 1) {
        retryd_upstream_deposit(c->p->budget); /* every first attempt */
        if (c->hedgeable)
            retryd_upstream_hedge_deposit(c->p->budget);
    }
    return 0;
}

STEP void attempt_unpermitted(call *c, int err)
{
    retryd_attempt *a = &retryd__attempt_current(c)->a;
    a->evidence = RETRYD_EVIDENCE_NOT_SENT;
    /* A hedge stopped while it waited for a permit (multi.c) was never
     * sent either. */
    a->failure = err == RETRYD_ETIMEDOUT   ? RETRYD_FAILURE_POOL_TIMEOUT
                 : err == RETRYD_ECANCELED ? RETRYD_FAILURE_ABORTED
                                           : RETRYD_FAILURE_IO;
    snprintf(c->errbuf, sizeof(c->errbuf), "%s",
             err == RETRYD_ETIMEDOUT   ? "no bulkhead permit in time"
             : err == RETRYD_ECANCELED ? "stopped before it was sent"
                                       : "out of memory");
    c->now = retryd__now_ns();
    a->duration_ns = c->now - c->start;
}

STEP bool attempt_begin(call *c, easy *h)
{
    open_body(c, h);
    return !c->trace.body_source_failed;
}

STEP void attempt_end(call *c, easy *h, int rc)
{
    retryd_attempt *a = &retryd__attempt_current(c)->a;
    if (c->body_open)
        retryd__body_close(&c->body);
    /* libcurl's reference to it goes with it (curl_mime_free). */
    curl_mime_free(c->mime);
    c->mime = NULL;
    /* A handle whose transfer failed may carry libcurl 7.88.1's stale
     * per-handle state (the retry count, the refused-stream flag): it is
     * not reused. */
    retryd__slot_give(c->p, h, rc != CURLE_OK || c->trace.resend_blocked);
    retryd__evidence_classify(&c->trace, rc, &a->evidence, &a->failure);
    if (c->trace.http11_required)
        c->force_http11 = true; /* the server asked for HTTP/1.1 */
    describe_error(c, rc);
    a->status = c->trace.status; /* 0 unless a final block completed */
    c->now = retryd__now_ns();
    a->duration_ns = c->now - c->start;
    /* The latency picture (docs/hedging.md): a hedgeable request's round
     * leads with this attempt (its hedges are calls of their own). One
     * never sent, or cancelled by the caller, says nothing of the
     * upstream's latency; one the multi cut off otherwise was stopped
     * because a hedge answered first: it outlived that. */
    if (c->hedgeable && !c->cancelled &&
        a->evidence != RETRYD_EVIDENCE_NOT_SENT)
        retryd_upstream_hedge_observe(c->p->budget, a->duration_ns,
                                      c->trace.cancelled);
}

/* --- the loop ------------------------------------------------------------ */

STEP void fill_facts(call *c, const retryd_attempt *a, int64_t prev_delay,
                     bool refreshed, retryd_facts *f)
{
    int64_t retry_after = -1;
    /* A success or a redirect is final whatever it says: no lookup. The
     * parse keeps the server's value whole (clamped only where it would
     * overflow): the engine, not the parser, judges one the profile will
     * not wait for, and denies rather than shortens it. */
    const char *ra =
        a->status >= 400 ? retryd__hdrs_get(&c->resp, "Retry-After") : NULL;
    if (ra != NULL &&
        retryd_retry_after_parse(ra, strlen(ra), (int64_t)time(NULL), INT64_MAX,
                                 &retry_after) < 0)
        retry_after = -1;
    int64_t left = c->deadline - c->now;
    *f = (retryd_facts){
        .sz = sizeof(retryd_facts),
        .attempt = c->round,
        .max_attempts = c->p->max_attempts,
        .evidence = a->evidence,
        .replayability = retryd_body_replayability(c->req->body),
        .idempotency = c->idem,
        .failure = a->failure,
        .status = a->status,
        .retry_after_ns = retry_after,
        .remaining_ns = left > 0 ? left : 0,
        .min_attempt_ns = c->p->min_attempt_ns,
        .prev_delay_ns = prev_delay,
        .response_delivered = c->delivered,
        .draining = retryd_host_draining(c->p->client->host),
        /* A refresh is there to spend when one just succeeded; without a
         * callback there is none. */
        .refresh_used =
            c->req->refresh == NULL || (c->refresh_used && !refreshed),
        .transient_500 = c->p->transient_500,
        /* Other processes' Retry-After for this upstream (docs/health.md). */
        .pushback_ns = retryd_upstream_pushback(c->p->budget),
    };
}

static bool refresh(call *c);

/*
 * The decision after an attempt, counted in the upstream's statistics. A
 * complete response with a final status (retryd_status_is_final) needs
 * none: asking the engine would run the rules of a failed attempt first
 * (the budget peek among them) and count a success as a denied retry. It
 * is logged as the engine would end it, status_final.
 */
STEP int decide_attempt(call *c, attempt_rec *rec)
{
    retryd_attempt *a = &rec->a;
    retryd_facts f;
    if (a->evidence == RETRYD_EVIDENCE_RESPONSE_RECEIVED &&
        retryd_status_is_final(a->status)) {
        rec->d = (retryd_decision){
            .sz = sizeof(retryd_decision),
            .verdict = RETRYD_VERDICT_DENIED,
            .reason = RETRYD_DENIAL_STATUS_NOT_RETRYABLE,
            .rule = RETRYD_RULE_STATUS_FINAL,
        };
        retryd_upstream_record(c->p->budget, NULL, a->evidence);
        retryd_upstream_observe(c->p->budget, a->evidence, a->status, -1);
        return 0;
    }
    /* The one credential refresh comes before the decision, so that a
     * refresh that fails is a fact the engine sees (a 401 it does not
     * retry, no token spent), not a granted retry then abandoned. Only
     * where the 401 rule could grant it: a safe operation. */
    bool refreshed = a->status == 401 && !c->refresh_used &&
                     c->req->refresh != NULL &&
                     retryd_idempotency_is_safe(c->idem) && refresh(c);
    fill_facts(c, a, c->wait, refreshed, &f);
    /* fill_facts read the host's hold before this attempt's answer joins
     * the host's picture: the server's word to this process is waited
     * exactly (retry_after_ns), the hold it now puts on every other
     * process is theirs to spread. */
    retryd_upstream_observe(c->p->budget, a->evidence, a->status,
                            f.retry_after_ns);
    int r = retryd_decide(&f, &c->env, &rec->d);
    if (r == 0)
        retryd_upstream_record(c->p->budget, &rec->d, a->evidence);
    return r;
}

/* The credential is the request's: a hedge (owner not itself) refreshes
 * its owner's, which every later attempt sends. */
static bool refresh(call *c)
{
    char *value = calloc(1, AUTH_MAX);
    call *o = c->owner;
    c->refresh_used = o->refresh_used = true;
    if (value == NULL ||
        c->req->refresh(c->req->refresh_ctx, value, AUTH_MAX) < 0) {
        free(value);
        return false;
    }
    value[AUTH_MAX - 1] = '\0';
    if (!retryd__field_value_ok(value)) {
        free(value);
        return false;
    }
    free(o->auth);
    o->auth = c->auth = value;
    return true;
}

static void sleep_ns(int64_t ns)
{
    int64_t until = retryd__now_ns() + ns;
    for (int64_t left = ns; left > 0; left = until - retryd__now_ns()) {
        struct timespec ts = {left / 1000000000, left % 1000000000};
        nanosleep(&ts, NULL);
    }
}

/* Error texts are kept only when there is one. */
STEP int log_attempt(call *c, attempt_rec *rec)
{
    char *text = NULL;
    if (c->errbuf[0] != '\0' && (text = strdup(c->errbuf)) == NULL)
        return RETRYD_ENOMEM;
    rec->a.error = text ? text : "";
    c->n_att++;
    c->att_open = false;
    return 0;
}

/*
 * Before each attempt, what the host's health says of it (docs/health.md):
 * 0, open it; 1, a host pushback holds it, wait c->hold and ask again; 2,
 * it is not sent and the call is over, with the log saying why: a first
 * attempt throttled or held past the deadline gets a record of its own
 * (the outcome is then RETRYD_OUTCOME_THROTTLED); a retry held past the
 * deadline turns the decision that granted it into a deadline denial, so
 * the call ends with what its last attempt found. Its token stays spent.
 */
STEP int attempt_admit(call *c)
{
    int64_t wait;
    bool first = c->round == 0;
    c->hold = 0; /* every way out below; a stale one would time a backoff */
    /* An attempt waits out one hold, not a chain of them: a retry whose
     * decision already waited for a hold (or one held here once) goes. A
     * rate-limited upstream answers every resumed retry with a new
     * Retry-After; re-holding on each would let one retry through per
     * hold and starve the rest until their deadlines. */
    bool hold_done =
        c->held > 0 || (!first && (retryd__attempt_current(c)[-1].d.flags &
                                   RETRYD_RETRY_HELD_BY_PUSHBACK));
    if (hold_done && !first)
        return 0; /* a retry: the throttle is not its business */
    retryd_admission a = retryd_upstream_admit(c->p->budget, first,
                                               c->deadline - retryd__now_ns(),
                                               c->p->min_attempt_ns, &wait);
    if (hold_done && a != RETRYD_ADMIT_THROTTLED)
        a = RETRYD_ADMIT_SEND;
    if (a == RETRYD_ADMIT_SEND)
        return 0;
    if (a == RETRYD_ADMIT_HOLD) {
        c->hold = wait;
        c->held += wait;
        return 1;
    }
    if (!first) {
        attempt_rec *last = retryd__attempt_current(c) - 1;
        last->d = (retryd_decision){
            .sz = sizeof(retryd_decision),
            .verdict = RETRYD_VERDICT_DENIED,
            .reason = RETRYD_DENIAL_DEADLINE,
            .rule = RETRYD_RULE_PUSHBACK_EXCEEDS_DEADLINE,
        };
        return 2;
    }
    attempt_rec *rec = next_attempt(c, 0);
    if (rec == NULL)
        return RETRYD_ENOMEM;
    /* No attempt opened, so nothing of one may be read as if it had: no
     * final headers, no body, no error but ours (the result reads them). */
    attempt_reset(c);
    rec->a.number = 1;
    rec->a.role = RETRYD_ROLE_FIRST;
    rec->a.started_ns = 0;
    rec->a.held_ns = c->held;
    rec->a.evidence = RETRYD_EVIDENCE_NOT_SENT;
    rec->a.failure = RETRYD_FAILURE_THROTTLED;
    bool throttled = a == RETRYD_ADMIT_THROTTLED;
    rec->d = (retryd_decision){
        .sz = sizeof(retryd_decision),
        .verdict = RETRYD_VERDICT_DENIED,
        .reason = throttled ? RETRYD_DENIAL_NONE : RETRYD_DENIAL_DEADLINE,
        .rule = throttled ? RETRYD_RULE_HOST_THROTTLED
                          : RETRYD_RULE_PUSHBACK_EXCEEDS_DEADLINE,
    };
    snprintf(c->errbuf, sizeof(c->errbuf), "%s",
             throttled ? "not sent: the host throttle is engaged for this "
                         "upstream (docs/health.md)"
                       : "not sent: a host pushback would hold it past the "
                         "deadline");
    int r = log_attempt(c, rec);
    return r < 0 ? r : 2;
}

STEP int attempt_decide(call *c)
{
    attempt_rec *rec = retryd__attempt_current(c);
    int r = decide_attempt(c, rec);
    if (r == 0)
        r = log_attempt(c, rec);
    if (r < 0)
        return r;
    if (rec->d.verdict != RETRYD_VERDICT_RETRY)
        return 0;
    /* The next attempt's wait, and the engine's prev_delay after it. */
    c->wait = rec->d.delay_ns;
    return 1;
}

/* The result, in one allocation; a held-back body goes to the sink on a
 * response. On any other outcome (an ambiguous 503, say) it stays in the
 * result instead: the caller may still want to show what arrived, but a
 * sink only ever receives a response's body. */
STEP retryd_result *call_result_from(call *c, call *resp)
{
    bool final = resp->trace.final_headers;
    bool held = final && c->req->sink != NULL && !resp->stream_to_sink;
    bool keep_body = final && (c->req->sink == NULL || held);
    retryd_result *r = retryd__result_build(
        c->att, c->n_att, final ? &resp->resp : NULL, resp->buf,
        keep_body ? resp->buf_len : 0, c->key, resp->pending_reason);
    if (r == NULL)
        return NULL;
    c->n_att = 0; /* the error texts now belong to the result */
    if (c->hedge.mode != RETRYD_HEDGE_OFF) {
        r->has_hedge = true;
        r->hedge = c->hedge_d;
        r->hedges = c->hedges;
        r->hedge_won = c->hedge_won;
    }
    if (held && r->outcome == RETRYD_OUTCOME_RESPONSE) {
        r->body_len = 0; /* the sink's, not the result's */
        if (resp->buf_len > 0 && !c->cancelled)
            c->req->sink(resp->buf, resp->buf_len, c->req->sink_ctx);
    }
    return r;
}

STEP retryd_result *call_result(call *c)
{
    return call_result_from(c, c);
}

/*
 * The base URL without its trailing slashes, then the path, in the call's
 * own storage when it fits. Here, next to call_init, rather than with the
 * validation: it writes the call's storage, and inlined it saves every
 * request a call of its own (about 20 instructions, over 1% of what
 * retryd adds around curl_easy_perform; docs/benchmarks.md).
 */
STEP char *join_url(call *c, const char *base, const char *path)
{
    size_t bl = strlen(base);
    while (bl > 0 && base[bl - 1] == '/')
        bl--;
    if (path == NULL || *path == '\0')
        path = "/";
    size_t pl = strlen(path), sep = *path != '/';
    size_t need = bl + sep + pl + 1;
    char *u = need <= sizeof(c->url_first) ? c->url_first : malloc(need);
    if (u != NULL) {
        memcpy(u, base, bl);
        u[bl] = '/';
        memcpy(u + bl + sep, path, pl + 1);
    }
    return u;
}

/* The per-attempt storage of a new call: the response's headers and body
 * in the call's own buffers, the attempt log in its own entries. */
STEP void call_storage(call *c)
{
    c->body_open = false;
    c->mime = NULL;
    retryd__hdrs_init(&c->resp, c->hdr_first, sizeof(c->hdr_first),
                      c->hdr_off_first,
                      sizeof(c->hdr_off_first) / (2 * sizeof(uint32_t)));
    c->buf = c->body_first;
    c->buf_len = 0;
    c->buf_cap = sizeof(c->body_first);
    c->att = c->att_first;
    c->n_att = 0;
    c->cap_att = sizeof(c->att_first) / sizeof(c->att_first[0]);
    c->headers = NULL;
    c->att_open = false;
}

/* --- hedging (docs/hedging.md) ------------------------------------------ */

/*
 * The retry budget as the engine sees it for a hedgeable request: the
 * host budget's, hearing of the request's hedges besides its retries (a
 * hedge takes a token of the retry bucket too), so that one request's
 * share bounds both. The context is the request's call.
 */
static bool hedged_peek(void *ctx)
{
    return retryd_upstream_peek(((call *)ctx)->p->budget);
}

static bool hedged_take(void *ctx)
{
    call *o = ctx;
    return retryd_upstream_withdraw_for(o->p->budget, o->hedges) == 0;
}

static int hedged_take_for(void *ctx, uint32_t taken)
{
    call *o = ctx;
    return retryd_upstream_withdraw_for(o->p->budget, taken + o->hedges);
}

static const retryd_budget_iface hedged_budget = {
    sizeof(retryd_budget_iface), hedged_peek, hedged_take, hedged_take_for};

/* The request's part of a hedge's facts, @p elapsed after the attempt it
 * would follow started (the budget layer adds the host's). */
STEP void hedge_facts(const call *c, int64_t elapsed, retryd_hedge_facts *f)
{
    int64_t left = c->deadline - retryd__now_ns();
    bool fixed = c->hedge.mode == RETRYD_HEDGE_FIXED;
    *f = (retryd_hedge_facts){
        .sz = sizeof(*f),
        .idempotency = c->idem,
        .replayability = retryd_body_replayability(c->req->body),
        .streamed = c->req->sink != NULL,
        .response_delivered = c->delivered,
        .hedges = c->hedges,
        .max_hedges = c->hedge.max_hedges,
        .picture =
            fixed ? RETRYD_HEDGE_PICTURE_FIXED : RETRYD_HEDGE_PICTURE_NONE,
        .delay_ns = fixed ? c->hedge.delay_ns : 0,
        .elapsed_ns = elapsed,
        .remaining_ns = left > 0 ? left : 0,
        .min_attempt_ns = c->p->min_attempt_ns,
        .taken = (c->round > 0 ? c->round - 1 : 0) + c->hedges,
    };
}

/* Whether facts @p f may ever be hedged: asked of the engine with nothing
 * to wait for and no budget, only its request-wide rules can say no. The
 * decision is written to @p d. */
static bool hedge_eligible(retryd_hedge_facts *f, retryd_hedge_decision *d)
{
    f->picture = RETRYD_HEDGE_PICTURE_FIXED;
    f->delay_ns = f->elapsed_ns = f->min_attempt_ns = f->pushback_ns = 0;
    f->remaining_ns = INT64_MAX;
    f->throttle_engaged = f->draining = false;
    *d = (retryd_hedge_decision){.sz = sizeof(*d)};
    return retryd_hedge_decide(f, NULL, d) == 0 &&
           d->verdict != RETRYD_HEDGE_NO;
}

/* The policy in force (the request's, else the profile's), and whether the
 * request may ever be hedged: the engine's answer for the whole request is
 * what its result says when it may not. A hedgeable request's retries hear
 * of its hedges (hedged_budget). */
static void hedge_setup(call *c)
{
    c->hedge = c->p->hedge;
    if (c->req->hedge != NULL)
        (void)retryd__hedge_policy_read(c->req->hedge, &c->hedge);
    if (c->hedge.mode == RETRYD_HEDGE_OFF)
        return;
    retryd_hedge_facts f;
    hedge_facts(c, 0, &f);
    c->hedgeable = hedge_eligible(&f, &c->hedge_d);
    if (!c->hedgeable)
        return;
    /* Not due yet, until the multi asks when the first attempt goes out. */
    c->hedge_d = (retryd_hedge_decision){.sz = sizeof(retryd_hedge_decision),
                                         .verdict = RETRYD_HEDGE_WAIT,
                                         .rule = RETRYD_HEDGE_RULE_WAIT};
    c->env.budget = &hedged_budget;
    c->env.budget_ctx = c;
}

/* Every field is set here; the big first-storage buffers are not zeroed,
 * only sized. */
STEP int call_init(call *c, retryd_profile *p, const retryd_request *req)
{
    c->p = p;
    c->env = (retryd_decide_env){.sz = sizeof(retryd_decide_env),
                                 .backoff = &p->backoff,
                                 .budget = retryd_upstream_budget_iface(),
                                 .budget_ctx = p->budget};
    c->owner = c;
    c->round = c->hedges = 0;
    c->wait = c->hold = c->held = 0;
    c->req = req;
    c->idem = req->idempotency;
    c->key[0] = '\0';
    c->auth = NULL;
    c->refresh_used = c->force_http11 = c->delivered = c->cancelled = false;
    c->t0 = c->now = retryd__now_ns();
    c->deadline = retryd__add_sat(
        c->now, req->deadline_ns ? req->deadline_ns : DEFAULT_DEADLINE_NS);
    call_storage(c);
    c->url = join_url(c, p->base_url, req->path);
    if (c->url == NULL)
        return RETRYD_ENOMEM;
    if (req->idempotency_key || req->idempotency_key_value) {
        if (req->idempotency_key_value) {
            snprintf(c->key, sizeof(c->key), "%s", req->idempotency_key_value);
        } else {
            uuid_t u;
            uuid_generate_random(u);
            uuid_unparse_lower(u, c->key);
        }
        /* A replay with the same key is deduplicated by the upstream. */
        c->idem = RETRYD_IDEMPOTENCY_BY_KEY;
    }
    /* Most requests have no hedging: a test, not a call. */
    c->hedgeable = c->hedge_won = false;
    c->hedge.mode = RETRYD_HEDGE_OFF;
    if (p->hedge.mode != RETRYD_HEDGE_OFF || req->hedge != NULL)
        hedge_setup(c);
    return 0;
}

STEP void call_free(call *c)
{
    if (c->url != c->url_first)
        free(c->url);
    if (c->buf != c->body_first)
        free(c->buf);
    free(c->auth);
    retryd__hdrs_free(&c->resp);
    for (size_t i = 0; i < c->n_att; i++)
        if (c->att[i].a.error[0] != '\0')
            free((char *)(uintptr_t)c->att[i].a.error);
    if (c->att != c->att_first)
        free(c->att);
}

/*
 * The blocking driver: each step of the state machine in turn, the permit
 * waited for on the profile's condition variable, the transfer run by
 * curl_easy_perform, the backoff slept. 0 once the call is done.
 */
STEP int run_blocking(call *c)
{
    for (;;) {
        easy *h;
        int r = attempt_admit(c);
        if (r == 1) {
            sleep_ns(c->hold);
            continue;
        }
        if (r != 0)
            return r == 2 ? 0 : r;
        r = attempt_open(c);
        if (r < 0)
            return r;
        r = retryd__slot_take(c->p, c->permit_deadline, &h);
        if (r < 0) {
            attempt_unpermitted(c, r);
        } else {
            int rc = CURLE_OK; /* stays so when the body did not open */
            if (attempt_begin(c, h))
                rc = retryd__transfer_perform(
                    c, h, &retryd__attempt_current(c)->a, c->attempt_ns);
            attempt_end(c, h, rc);
        }
        r = attempt_decide(c);
        if (r != 1)
            return r;
        /* Nothing is held while waiting: the permit and the handle went
         * back when the attempt ended. */
        sleep_ns(c->wait);
    }
}

int retryd__execute_blocking(retryd_profile *p, const retryd_request *req,
                             retryd_result **ret)
{
    call c;
    int r = call_init(&c, p, req);
    if (r == 0)
        r = run_blocking(&c);
    if (r == 0) {
        *ret = call_result(&c);
        r = *ret ? 0 : RETRYD_ENOMEM;
    }
    call_free(&c);
    return r;
}

/* --- the steps, for the multi (multi.c) ---------------------------------- */

int retryd__call_init(call *c, retryd_profile *p, const retryd_request *req)
{
    return call_init(c, p, req);
}

void retryd__call_free(call *c)
{
    call_free(c);
}

int retryd__attempt_admit(call *c)
{
    return attempt_admit(c);
}

int retryd__attempt_open(call *c)
{
    return attempt_open(c);
}

void retryd__attempt_unpermitted(call *c, int err)
{
    attempt_unpermitted(c, err);
}

bool retryd__attempt_begin(call *c, easy *h)
{
    return attempt_begin(c, h);
}

void retryd__attempt_end(call *c, easy *h, int rc)
{
    attempt_end(c, h, rc);
}

int retryd__attempt_decide(call *c)
{
    return attempt_decide(c);
}

retryd_result *retryd__call_result_from(call *c, call *resp)
{
    return call_result_from(c, resp);
}

/* --- hedges, for the multi (multi.c; docs/hedging.md) -------------------- */

bool retryd__hedge_wanted_slow(retryd_profile *p, const retryd_request *req)
{
    retryd_hedge_policy hp = p->hedge;
    if (req->hedge != NULL) /* validated with the request */
        (void)retryd__hedge_policy_read(req->hedge, &hp);
    if (hp.mode == RETRYD_HEDGE_OFF)
        return false;
    bool keyed = req->idempotency_key || req->idempotency_key_value;
    retryd_hedge_facts f = {
        .sz = sizeof(f),
        .idempotency = keyed ? RETRYD_IDEMPOTENCY_BY_KEY : req->idempotency,
        .replayability = retryd_body_replayability(req->body),
        .streamed = req->sink != NULL,
        .max_hedges = hp.max_hedges,
    };
    retryd_hedge_decision d;
    return hedge_eligible(&f, &d);
}

int retryd__hedge_ask(call *c, int64_t elapsed_ns)
{
    retryd_hedge_facts f;
    hedge_facts(c, elapsed_ns, &f);
    retryd_hedge_decision d = {.sz = sizeof(d)};
    int r = retryd_upstream_hedge(c->p->budget, &f, &d);
    if (r < 0)
        return r;
    c->hedge_d = d;
    if (d.verdict == RETRYD_HEDGE_SEND)
        c->hedges++;
    return 0;
}

void retryd__call_init_hedge(call *leg, call *owner)
{
    leg->p = owner->p;
    leg->req = owner->req;
    leg->url = owner->url;
    leg->idem = owner->idem;
    memcpy(leg->key, owner->key, sizeof(leg->key));
    leg->auth = owner->auth;
    leg->owner = owner; /* the URL and credentials are its */
    leg->refresh_used = owner->refresh_used;
    leg->force_http11 = owner->force_http11;
    leg->delivered = leg->cancelled = false;
    leg->deadline = owner->deadline;
    leg->t0 = owner->t0;
    leg->now = retryd__now_ns();
    leg->env = owner->env;
    leg->wait = owner->wait;
    leg->hold = leg->held = 0;
    /* Its one attempt is of the owner's round, numbered by the owner; it
     * neither deposits nor feeds the picture (the owner's first attempt
     * does), and sends no hedge of its own. */
    leg->round = owner->round;
    leg->hedges = 0;
    leg->hedge = owner->hedge;
    leg->hedge_d = owner->hedge_d;
    leg->hedgeable = leg->hedge_won = false;
    call_storage(leg);
}

void retryd__call_free_hedge(call *leg)
{
    /* What it borrowed is its owner's to free: a request's own call_free
     * then needs no test for it. */
    leg->url = leg->url_first;
    leg->auth = NULL;
    call_free(leg);
}

int retryd__attempt_open_hedge(call *leg)
{
    attempt_rec *rec = next_attempt(leg, 0);
    if (rec == NULL)
        return RETRYD_ENOMEM;
    attempt_clocks(leg, rec, retryd__now_ns());
    /* The owner counted it among its hedges when it was sent. */
    rec->a.number = leg->owner->round + leg->owner->hedges;
    rec->a.role = RETRYD_ROLE_HEDGE;
    return 0;
}

bool retryd__attempt_answers(call *c)
{
    retryd_attempt *a = &retryd__attempt_current(c)->a;
    if (a->evidence == RETRYD_EVIDENCE_RESPONSE_RECEIVED &&
        retryd_status_is_final(a->status))
        return true;
    retryd_facts f;
    fill_facts(c, a, c->wait, false, &f);
    return retryd_hedge_answers(&f);
}

int retryd__attempt_set_aside(call *c, retryd_rule rule)
{
    attempt_rec *rec = retryd__attempt_current(c);
    retryd_attempt *a = &rec->a;
    rec->d = (retryd_decision){.sz = sizeof(retryd_decision),
                               .verdict = RETRYD_VERDICT_DENIED,
                               .reason = RETRYD_DENIAL_NONE,
                               .rule = rule};
    retryd_upstream_record(c->p->budget, NULL, a->evidence);
    /* One that ended on its own tells the host's health what it found; one
     * stopped because a sibling answered says nothing of the upstream (a
     * request written and cut off would count as a rejection). */
    if (rule == RETRYD_RULE_HEDGE_SIBLING_RUNNING) {
        retryd_facts f;
        fill_facts(c, a, c->wait, false, &f);
        retryd_upstream_observe(c->p->budget, a->evidence, a->status,
                                f.retry_after_ns);
    }
    return log_attempt(c, rec);
}

int retryd__call_adopt(call *o, call *leg)
{
    size_t n = leg->n_att, open = o->att_open ? 1 : 0;
    size_t need = (o->n_att + n + open) * sizeof(*o->att);
    size_t bytes = o->cap_att * sizeof(*o->att);
    if (need > bytes &&
        !retryd__grow((void **)&o->att, bytes, &bytes, need, o->att_first))
        return RETRYD_ENOMEM;
    o->cap_att = bytes / sizeof(*o->att);
    /* The owner's attempt still open stays the open one, after them. */
    if (open)
        o->att[o->n_att + n] = o->att[o->n_att];
    memcpy(&o->att[o->n_att], leg->att, n * sizeof(*o->att));
    o->n_att += n;
    leg->n_att = 0; /* their error texts are the owner's now */
    return 0;
}
