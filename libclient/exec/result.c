/* SPDX-License-Identifier: MIT */
/* Results: the outcome of a request, its response and its attempt log. */
#include <stdlib.h>
#include <string.h>

#include "exec/executor.h"

retryd_result *retryd__result_build(const attempt_rec *attempts,
                                    size_t n_attempts,
                                    const header_arena *headers,
                                    const void *body, size_t body_len,
                                    const char *key, const char *reason)
{
    size_t n_hdr = headers ? headers->n : 0,
           hdr_len = headers ? headers->len : 0;
    size_t off_bytes = 2 * n_hdr * sizeof(uint32_t);
    size_t att_bytes = n_attempts * sizeof(attempt_rec);
    retryd_result *r =
        malloc(sizeof(*r) + att_bytes + off_bytes + hdr_len + body_len + 1);
    if (r == NULL)
        return NULL;
    char *p = (char *)(r + 1);
    *r = (retryd_result){.n_attempts = n_attempts};
    if (headers != NULL) { /* a copy, not a format: every request's path */
        size_t n = strnlen(reason, sizeof(r->reason) - 1);
        memcpy(r->reason, reason, n);
        r->reason[n] = '\0';
    }
    const attempt_rec *last = &attempts[n_attempts - 1];
    if (last->a.failure == RETRYD_FAILURE_THROTTLED)
        r->outcome = RETRYD_OUTCOME_THROTTLED;
    else if (last->d.verdict == RETRYD_VERDICT_AMBIGUOUS)
        r->outcome = RETRYD_OUTCOME_AMBIGUOUS;
    else if (last->a.evidence == RETRYD_EVIDENCE_RESPONSE_RECEIVED)
        r->outcome = RETRYD_OUTCOME_RESPONSE;
    else
        r->outcome = RETRYD_OUTCOME_FAILURE;
    /* Not snprintf: this is every request's path, and a format costs
     * hundreds of instructions where a copy costs tens. */
    size_t key_len = strnlen(key, sizeof(r->idempotency_key) - 1);
    memcpy(r->idempotency_key, key, key_len);
    r->idempotency_key[key_len] = '\0';
    r->attempts = (attempt_rec *)(void *)p;
    memcpy(p, attempts, att_bytes);
    for (size_t i = 0; i < n_attempts; i++)
        r->attempts[i].a.decision = &r->attempts[i].d;
    p += att_bytes;
    uint32_t *off = (uint32_t *)(void *)p;
    p += off_bytes;
    retryd__hdrs_init(&r->headers, p, hdr_len, off, n_hdr);
    if (n_hdr) {
        memcpy(off, headers->off, off_bytes);
        memcpy(p, headers->buf, hdr_len);
        r->headers.n = n_hdr;
        r->headers.len = hdr_len;
    }
    p += hdr_len;
    r->body = (unsigned char *)p;
    r->body_len = body_len;
    if (body_len)
        memcpy(p, body, body_len);
    p[body_len] = '\0';
    return r;
}

static const retryd_attempt *last(const retryd_result *r)
{
    return &r->attempts[r->n_attempts - 1].a;
}

retryd_outcome retryd_result_outcome(const retryd_result *r)
{
    return r ? r->outcome : RETRYD_OUTCOME_FAILURE;
}

int retryd_result_status(const retryd_result *r)
{
    return r ? last(r)->status : 0;
}

const void *retryd_result_body(const retryd_result *r, size_t *ret_len)
{
    if (ret_len != NULL)
        *ret_len = r ? r->body_len : 0;
    return r ? (const void *)r->body : (const void *)"";
}

const char *retryd_result_header(const retryd_result *r, const char *name)
{
    return r && name ? retryd__hdrs_get(&r->headers, name) : NULL;
}

size_t retryd_result_header_count(const retryd_result *r)
{
    return r ? r->headers.n : 0;
}

int retryd_result_header_at(const retryd_result *r, size_t i,
                            const char **ret_name, const char **ret_value)
{
    if (r == NULL || i >= r->headers.n)
        return RETRYD_ERANGE;
    *ret_name = retryd__hdrs_name(&r->headers, i);
    *ret_value = retryd__hdrs_value(&r->headers, i);
    return 0;
}

retryd_evidence retryd_result_evidence(const retryd_result *r)
{
    return r ? last(r)->evidence : RETRYD_EVIDENCE_NOT_SENT;
}

const retryd_decision *retryd_result_decision(const retryd_result *r)
{
    return r ? last(r)->decision : NULL;
}

const char *retryd_result_error(const retryd_result *r)
{
    return r ? last(r)->error : "";
}

const char *retryd_result_idempotency_key(const retryd_result *r)
{
    return r && r->idempotency_key[0] ? r->idempotency_key : NULL;
}

size_t retryd_result_attempt_count(const retryd_result *r)
{
    return r ? r->n_attempts : 0;
}

const retryd_attempt *retryd_result_attempt(const retryd_result *r, size_t i)
{
    return r && i < r->n_attempts ? &r->attempts[i].a : NULL;
}

void retryd_result_free(retryd_result *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n_attempts; i++)
        if (r->attempts[i].a.error[0] != '\0')
            free((char *)(uintptr_t)r->attempts[i].a.error);
    free(r);
}

const char *retryd_result_reason(const retryd_result *r)
{
    return r ? r->reason : "";
}

const retryd_hedge_decision *retryd_result_hedge(const retryd_result *r)
{
    return r && r->has_hedge ? &r->hedge : NULL;
}

uint32_t retryd_result_hedges(const retryd_result *r, bool *ret_won)
{
    if (ret_won != NULL)
        *ret_won = r && r->hedge_won;
    return r ? r->hedges : 0;
}
