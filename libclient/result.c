/* Results: the outcome of a request, its response and its attempt log. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "executor.h"

retryd_result *retryd__result_new(void)
{
    return calloc(1, sizeof(retryd_result));
}

int retryd__result_add_attempt(retryd_result *r, const retryd_attempt *a,
                               const char *error)
{
    if (r->n_attempts == r->cap_attempts) {
        size_t cap = r->cap_attempts ? r->cap_attempts * 2 : 4;
        result_attempt *more = realloc(r->attempts, cap * sizeof(*more));
        if (more == NULL)
            return RETRYD_ENOMEM;
        r->attempts = more;
        r->cap_attempts = cap;
        /* The strings moved with the records: re-point them. */
        for (size_t i = 0; i < r->n_attempts; i++)
            r->attempts[i].pub.error = r->attempts[i].error;
    }
    result_attempt *ra = &r->attempts[r->n_attempts++];
    ra->pub = *a;
    snprintf(ra->error, sizeof(ra->error), "%s", error ? error : "");
    ra->pub.error = ra->error;
    return 0;
}

retryd_outcome retryd_result_outcome(const retryd_result *r)
{
    return r ? r->outcome : RETRYD_OUTCOME_FAILURE;
}

int retryd_result_status(const retryd_result *r)
{
    return r ? r->status : 0;
}

const void *retryd_result_body(const retryd_result *r, size_t *ret_len)
{
    if (ret_len != NULL)
        *ret_len = r ? r->body_len : 0;
    return r && r->body ? r->body : (const void *)"";
}

const char *retryd_result_header(const retryd_result *r, const char *name)
{
    const char *v = NULL;
    for (size_t i = 0; r && name && i < r->n_headers; i++)
        if (strcasecmp(r->hdr_names[i], name) == 0)
            v = r->hdr_values[i];
    return v;
}

size_t retryd_result_header_count(const retryd_result *r)
{
    return r ? r->n_headers : 0;
}

int retryd_result_header_at(const retryd_result *r, size_t i,
                            const char **ret_name, const char **ret_value)
{
    if (r == NULL || i >= r->n_headers)
        return RETRYD_ERANGE;
    *ret_name = r->hdr_names[i];
    *ret_value = r->hdr_values[i];
    return 0;
}

retryd_evidence retryd_result_evidence(const retryd_result *r)
{
    return r ? r->evidence : RETRYD_EVIDENCE_NOT_SENT;
}

const retryd_decision *retryd_result_decision(const retryd_result *r)
{
    return r ? &r->decision : NULL;
}

const char *retryd_result_error(const retryd_result *r)
{
    return r ? r->error : "";
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
    return r && i < r->n_attempts ? &r->attempts[i].pub : NULL;
}

const char *retryd_outcome_name(retryd_outcome o)
{
    static const char *const names[] = {"response", "failure", "ambiguous"};
    return (unsigned)o < 3 ? names[o] : "unknown";
}

void retryd_result_free(retryd_result *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n_headers; i++) {
        free(r->hdr_names[i]);
        free(r->hdr_values[i]);
    }
    free(r->hdr_names);
    free(r->hdr_values);
    free(r->body);
    free(r->attempts);
    free(r);
}
