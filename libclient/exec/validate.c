/* SPDX-License-Identifier: MIT */
/*
 * Request validation, apart from the attempt loop: it looks only at what
 * the caller passed, so it is read without libcurl or a call in mind. A
 * request is refused here, before any budget is spent or byte sent, when
 * one of its parts could carry a header or a line ending the caller did
 * not mean to send, or is out of range.
 */
#include <string.h>

#include "base/macros.h"
#include "exec/headers.h"
#include "exec/validate.h"

static bool is_token_char(char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
           (ch >= '0' && ch <= '9') || strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static bool method_ok(const char *m)
{
    size_t n = strlen(m);
    if (n == 0 || n > 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_token_char(m[i]))
            return false;
    return true;
}

/* No control characters or spaces: nothing a header could be smuggled
 * through. */
static bool path_ok(const char *path)
{
    for (; *path; path++)
        if ((unsigned char)*path <= 0x20 || *path == 0x7f)
            return false;
    return true;
}

static bool header_line_ok(const char *h)
{
    const char *colon = strchr(h, ':');
    if (colon == NULL || colon == h)
        return false;
    for (const char *q = h; q < colon; q++)
        if (!is_token_char(*q))
            return false;
    return retryd__field_value_ok(colon + 1);
}

int retryd__hedge_policy_read(const retryd_hedge_policy *in,
                              retryd_hedge_policy *out)
{
    int r = RETRYD_COPY_OPTS(out, in,
                             RETRYD_OPTS_MIN(retryd_hedge_policy, max_hedges));
    if (r < 0)
        return r;
    out->sz = sizeof(*out);
    if (out->max_hedges == 0)
        out->max_hedges = 1;
    if ((unsigned)out->mode > RETRYD_HEDGE_ADAPTIVE || out->delay_ns < 0 ||
        (out->mode == RETRYD_HEDGE_FIXED && out->delay_ns == 0) ||
        out->max_hedges > RETRYD_MAX_HEDGES)
        return RETRYD_EINVAL;
    return 0;
}

/* Out of line: most requests carry no policy of their own, and the copy
 * it is read into would give every request's validation a stack frame. */
static __attribute__((noinline)) bool
hedge_policy_ok(const retryd_hedge_policy *in)
{
    retryd_hedge_policy hp;
    return retryd__hedge_policy_read(in, &hp) == 0;
}

int retryd__validate_request(const retryd_request *r)
{
    if ((r->method && !method_ok(r->method)) || (r->path && !path_ok(r->path)))
        return RETRYD_EINVAL;
    if ((unsigned)r->idempotency >= RETRYD_IDEMPOTENCY_COUNT ||
        r->deadline_ns < 0)
        return RETRYD_EINVAL;
    if (r->idempotency_key_value &&
        (!retryd__field_value_ok(r->idempotency_key_value) ||
         strlen(r->idempotency_key_value) >= 40 || !*r->idempotency_key_value))
        return RETRYD_EINVAL;
    if (r->cookie && !retryd__field_value_ok(r->cookie))
        return RETRYD_EINVAL;
    for (size_t i = 0; r->headers && r->headers[i]; i++)
        if (!header_line_ok(r->headers[i]) || i > 1000)
            return RETRYD_EINVAL;
    if (r->hedge != NULL && !hedge_policy_ok(r->hedge))
        return RETRYD_EINVAL;
    return 0;
}
