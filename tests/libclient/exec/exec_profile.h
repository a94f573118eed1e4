/* SPDX-License-Identifier: MIT */
/*
 * The profile the executor suites test with: the options @p o on the
 * suite's test server (exec_fixture.h's srv, client), with a fast backoff
 * and the budget that never runs dry unless @p o names its own. Include
 * after exec_fixture.h.
 */
#ifndef RETRYD_TEST_EXEC_PROFILE_H
#define RETRYD_TEST_EXEC_PROFILE_H

#include <stdint.h>
#include <stdio.h>

/* 1 ms, at most 4 ms, 5 s cap on the total. */
static const retryd_backoff_policy exec_fast = {
    sizeof(exec_fast), RETRYD_JITTER_FULL, INT64_C(1000000), INT64_C(4000000),
    INT64_C(5000000000)};

static inline retryd_profile *exec_profile(retryd_profile_opts o)
{
    char base[64];
    retryd_profile *p;
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", testsrv_port(srv));
    o.sz = sizeof(o);
    o.base_url = base;
    if (o.backoff == NULL)
        o.backoff = &exec_fast;
    if (o.budget == NULL)
        o.budget = &plenty;
    cr_assert_eq(retryd_profile_new(client, &o, &p), 0);
    return p;
}

#endif
