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

STEP int attempt_open(call *c)
{
    attempt_rec *rec = next_attempt(c, c->wait);
    if (rec == NULL)
        return RETRYD_ENOMEM;
    rec->a.held_ns = c->held;
    c->held = 0;
    uint32_t n = (uint32_t)c->n_att + 1;
    /* The first attempt starts when the call did, unless a pushback held
     * it (the hold is in held_ns, not its duration); a retry after its
     * wait. */
    int64_t start = n == 1 && rec->a.held_ns == 0 ? c->now : retryd__now_ns();
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
    rec->a.number = n;
    if (n == 1)
        retryd_upstream_deposit(c->p->budget); /* every first attempt */
    return 0;
}

STEP void attempt_unpermitted(call *c, int err)
{
    retryd_attempt *a = &retryd__attempt_current(c)->a;
    a->evidence = RETRYD_EVIDENCE_NOT_SENT;
    a->failure = err == RETRYD_ETIMEDOUT ? RETRYD_FAILURE_POOL_TIMEOUT
                                         : RETRYD_FAILURE_IO;
    snprintf(c->errbuf, sizeof(c->errbuf), "%s",
             err == RETRYD_ETIMEDOUT ? "no bulkhead permit in time"
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
        .attempt = a->number,
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

static bool refresh(call *c)
{
    char *value = calloc(1, AUTH_MAX);
    c->refresh_used = true;
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
    free(c->auth);
    c->auth = value;
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
    bool first = c->n_att == 0;
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
STEP retryd_result *call_result(call *c)
{
    bool final = c->trace.final_headers;
    bool held = final && c->req->sink != NULL && !c->stream_to_sink;
    bool keep_body = final && (c->req->sink == NULL || held);
    retryd_result *r = retryd__result_build(
        c->att, c->n_att, final ? &c->resp : NULL, c->buf,
        keep_body ? c->buf_len : 0, c->key, c->pending_reason);
    if (r == NULL)
        return NULL;
    c->n_att = 0; /* the error texts now belong to the result */
    if (held && r->outcome == RETRYD_OUTCOME_RESPONSE) {
        r->body_len = 0; /* the sink's, not the result's */
        if (c->buf_len > 0 && !c->cancelled)
            c->req->sink(c->buf, c->buf_len, c->req->sink_ctx);
    }
    return r;
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

/* Every field is set here; the big first-storage buffers are not zeroed,
 * only sized. */
STEP int call_init(call *c, retryd_profile *p, const retryd_request *req)
{
    c->p = p;
    c->env = (retryd_decide_env){.sz = sizeof(retryd_decide_env),
                                 .backoff = &p->backoff,
                                 .budget = retryd_upstream_budget_iface(),
                                 .budget_ctx = p->budget};
    c->wait = c->hold = c->held = 0;
    c->req = req;
    c->idem = req->idempotency;
    c->key[0] = '\0';
    c->auth = NULL;
    c->refresh_used = c->force_http11 = c->delivered = c->cancelled = false;
    c->now = retryd__now_ns();
    c->deadline = retryd__add_sat(
        c->now, req->deadline_ns ? req->deadline_ns : DEFAULT_DEADLINE_NS);
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

int retryd_execute(retryd_profile *p, const retryd_request *caller_req,
                   retryd_result **ret)
{
    const retryd_request *req;
    call c;
    int r;

    retryd_request rq; /* a caller's of another size, at this library's */
    if (p == NULL || caller_req == NULL || ret == NULL)
        return RETRYD_EINVAL;
    /* The usual caller's request is read where it is; only one built
     * against another header is copied (docs/abi.md). */
    r = RETRYD_OPTS_VIEW(req, &rq, caller_req, sizeof(size_t));
    if (r < 0)
        return r;
    if (retryd__validate_request(req) < 0)
        return RETRYD_EINVAL;
    r = call_init(&c, p, req);
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

retryd_result *retryd__call_result(call *c)
{
    return call_result(c);
}
