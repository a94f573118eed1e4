/* SPDX-License-Identifier: MIT */
/*
 * The executor against a real fault-injecting HTTP/1.1 server: for every
 * fault x idempotency (safe, idempotent, non-idempotent, keyed) x body kind,
 * the outcome, the number of attempts, the evidence, and the number of
 * executions the server saw. The property above all: a non-idempotent
 * request is never executed twice.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "retryd/retryd.h"
#include "testsrv.h"

#include "exec_fixture.h"
#include "srv_log.h"

#define MS INT64_C(1000000)
#define S INT64_C(1000000000)

TestSuite(executor, .init = exec_setup, .fini = exec_teardown, .timeout = 120);

/* The matrix with hedging on (tests/daemon: test_executor_hedged, whose
 * header sets this policy and a daemon's generous hedge budget): a hedge
 * may add executions and attempts to a safe request, never to a
 * non-idempotent one or a one-shot body (docs/hedging.md). */
#ifndef EXEC_HEDGE_POLICY
#define EXEC_HEDGE_POLICY NULL
#endif
#define HEDGED (EXEC_HEDGE_POLICY != NULL)

static retryd_profile *profile_at(int port, int64_t attempt_ns)
{
    char base[64], name[32];
    retryd_profile *p;
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", port);
    snprintf(name, sizeof(name), "matrix-%d", port);
    retryd_profile_opts o = {
        .sz = sizeof(o),
        .base_url = base,
        .upstream = name,
        .attempt_timeout_ns = attempt_ns,
        .min_attempt_ns = 10 * MS,
        .max_attempts = 3,
        .backoff = &(const retryd_backoff_policy){sizeof(retryd_backoff_policy),
                                                  RETRYD_JITTER_FULL, 1 * MS,
                                                  4 * MS, 2 * S},
        .budget = &plenty,
        .hedge = EXEC_HEDGE_POLICY,
    };
    cr_assert_eq(retryd_profile_new(client, &o, &p), 0);
    return p;
}

/* --- bodies -------------------------------------------------------------- */

typedef struct mem {
    const char *data;
    size_t len, off;
} mem;

static long mem_read(void *ctx, void *buf, size_t len)
{
    mem *m = ctx;
    size_t n = m->len - m->off < len ? m->len - m->off : len;
    memcpy(buf, m->data + m->off, n);
    m->off += n;
    return (long)n;
}

static int open_fresh(void *ctx, retryd_body_reader *ret)
{
    mem *m = malloc(sizeof(*m));
    *m = (mem){ctx, strlen(ctx), 0};
    *ret = (retryd_body_reader){sizeof(retryd_body_reader), mem_read, free, m,
                                (int64_t)m->len};
    return 0;
}

static int encode_amount(const void *dto, void *ctx, void **data, size_t *len)
{
    (void)ctx;
    char *s = malloc(32);
    *len = (size_t)snprintf(s, 32, "amount=%d", *(const int *)dto);
    *data = s;
    return 0;
}

enum { N_BODIES = 9 };
static const char *const body_names[N_BODIES] = {
    "bytes",  "dto",       "supplier",         "file", "factory", "multipart",
    "stream", "publisher", "multipart_oneshot"};
static const int amount = 42;
static mem one_shot_source;
static char file_path[64];
static char multipart_bytes[1024];

/* The form-data bytes (RFC 7578) of parts "a" = "part one" and "b" =
 * "part two" under @p b's boundary. */
static const char *multipart_expected(const retryd_body *b)
{
    const char *ct = retryd_body_content_type(b);
    const char *boundary = ct ? strstr(ct, "boundary=") : NULL;
    cr_assert(boundary != NULL, "content type %s", ct ? ct : "(none)");
    boundary += strlen("boundary=");
    snprintf(multipart_bytes, sizeof(multipart_bytes),
             "--%s\r\n"
             "Content-Disposition: form-data; name=\"a\"\r\n"
             "Content-Type: application/octet-stream\r\n\r\n"
             "part one\r\n"
             "--%s\r\n"
             "Content-Disposition: form-data; name=\"b\"\r\n"
             "Content-Type: application/octet-stream\r\n\r\n"
             "part two\r\n"
             "--%s--\r\n",
             boundary, boundary, boundary);
    return multipart_bytes;
}

/* Body @p k, and the bytes the server must see. */
static retryd_body *make_body(int k, const char **expect)
{
    retryd_body *b = NULL, *parts[2];
    const char *names[2] = {"a", "b"};
    *expect = NULL;
    switch (k) {
    case 0:
        *expect = "hello payment";
        cr_assert_eq(retryd_body_new_bytes(*expect, strlen(*expect), &b), 0);
        break;
    case 1:
        *expect = "amount=42";
        cr_assert_eq(retryd_body_new_dto(&amount, encode_amount, NULL, &b), 0);
        break;
    case 2:
        *expect = "supplied body";
        cr_assert_eq(retryd_body_new_supplier(open_fresh, "supplied body", &b),
                     0);
        break;
    case 3: {
        *expect = "from a file";
        snprintf(file_path, sizeof(file_path), "/tmp/retryd-body-XXXXXX");
        int fd = mkstemp(file_path);
        cr_assert(fd >= 0 && write(fd, *expect, 11) == 11);
        close(fd);
        cr_assert_eq(retryd_body_new_file(file_path, &b), 0);
        break;
    }
    case 4:
        *expect = "published";
        cr_assert_eq(retryd_body_new_publisher_factory(open_fresh, "published",
                                                       RETRYD_REPLAYABLE, &b),
                     0);
        break;
    case 5:
    case 8:
        cr_assert_eq(retryd_body_new_bytes("part one", 8, &parts[0]), 0);
        if (k == 5) {
            cr_assert_eq(
                retryd_body_new_supplier(open_fresh, "part two", &parts[1]), 0);
        } else {
            one_shot_source = (mem){"part two", 8, 0};
            retryd_body_reader r = {sizeof(retryd_body_reader), mem_read, NULL,
                                    &one_shot_source, 8};
            cr_assert_eq(retryd_body_new_stream(&r, &parts[1]), 0);
        }
        cr_assert_eq(retryd_body_new_multipart(parts, names, NULL, 2, &b), 0);
        *expect = multipart_expected(b);
        break;
    case 6:
    case 7: {
        *expect = "streamed once";
        one_shot_source = (mem){*expect, strlen(*expect), 0};
        retryd_body_reader r = {sizeof(retryd_body_reader), mem_read, NULL,
                                &one_shot_source, (int64_t)one_shot_source.len};
        cr_assert_eq(k == 6 ? retryd_body_new_stream(&r, &b)
                            : retryd_body_new_publisher(&r, &b),
                     0);
        break;
    }
    }
    return b;
}

/* --- the matrix ---------------------------------------------------------- */

typedef struct expect {
    retryd_outcome outcome;
    int executions, attempts, status; /* status 0: none expected */
} expect;

/* Per class: safe or idempotent (or keyed) with a replayable body;
 * non-idempotent with a replayable body; and the same with a one-shot
 * body. */
enum { SAFE_REPLAY, UNSAFE_REPLAY, SAFE_ONESHOT, UNSAFE_ONESHOT };

typedef struct fault {
    const char *name;
    const char *path; /* the request id is appended as id=... */
    bool refused;     /* connect to a port nobody listens on */
    /* The status says "not processed" (429, 425): the server answers each
     * attempt, so its count is of answers, not of executions. */
    bool refusal;
    int64_t attempt_ns;
    uint32_t evidence_mask; /* evidences the last attempt may show */
    expect per_class[4];
} fault;

#define EV(e) (1u << RETRYD_EVIDENCE_##e)
#define RESP RETRYD_OUTCOME_RESPONSE
#define FAIL RETRYD_OUTCOME_FAILURE
#define AMB RETRYD_OUTCOME_AMBIGUOUS

static const fault faults[] = {
    {"ok",
     "/echo",
     false,
     false,
     2 * S,
     EV(RESPONSE_RECEIVED),
     {{RESP, 1, 1, 200},
      {RESP, 1, 1, 200},
      {RESP, 1, 1, 200},
      {RESP, 1, 1, 200}}},
    {"connection_refused",
     "/ok",
     true,
     false,
     2 * S,
     EV(NOT_SENT),
     {{FAIL, 0, 3, 0}, {FAIL, 0, 3, 0}, {FAIL, 0, 1, 0}, {FAIL, 0, 1, 0}}},
    {"close_after_read",
     "/close-after-read",
     false,
     false,
     2 * S,
     EV(SENT_NO_RESPONSE),
     {{FAIL, 3, 3, 0}, {AMB, 1, 1, 0}, {FAIL, 1, 1, 0}, {AMB, 1, 1, 0}}},
    {"reset_after_read",
     "/reset-after-read",
     false,
     false,
     2 * S,
     EV(SENT_NO_RESPONSE),
     {{FAIL, 3, 3, 0}, {AMB, 1, 1, 0}, {FAIL, 1, 1, 0}, {AMB, 1, 1, 0}}},
    {"headers_past_the_timeout",
     "/hold?ms=5000",
     false,
     false,
     300 * MS,
     EV(SENT_NO_RESPONSE),
     {{FAIL, 3, 3, 0}, {AMB, 1, 1, 0}, {FAIL, 1, 1, 0}, {AMB, 1, 1, 0}}},
    {"headers_then_part_of_the_body",
     "/partial",
     false,
     false,
     2 * S,
     EV(PARTIAL_RESPONSE),
     {{FAIL, 3, 3, 200},
      {AMB, 1, 1, 200},
      {FAIL, 1, 1, 200},
      {AMB, 1, 1, 200}}},
    {"interim_response_then_close",
     "/interim-then-close",
     false,
     false,
     2 * S,
     EV(SENT_NO_RESPONSE),
     {{FAIL, 3, 3, 0}, {AMB, 1, 1, 0}, {FAIL, 1, 1, 0}, {AMB, 1, 1, 0}}},
    {"status_503",
     "/status?code=503",
     false,
     false,
     2 * S,
     EV(RESPONSE_RECEIVED),
     {{RESP, 3, 3, 503},
      {AMB, 1, 1, 503},
      {RESP, 1, 1, 503},
      {AMB, 1, 1, 503}}},
    {"status_503_then_200",
     "/seq?codes=503,200",
     false,
     false,
     2 * S,
     EV(RESPONSE_RECEIVED),
     {{RESP, 2, 2, 200},
      {AMB, 1, 1, 503},
      {RESP, 1, 1, 503},
      {AMB, 1, 1, 503}}},
    {"status_429_retry_after_0",
     "/status?code=429&retry_after=0",
     false,
     true,
     2 * S,
     EV(RESPONSE_RECEIVED),
     {{RESP, 3, 3, 429},
      {RESP, 3, 3, 429},
      {RESP, 1, 1, 429},
      {RESP, 1, 1, 429}}},
    {"status_425_once",
     "/once425",
     false,
     true,
     2 * S,
     EV(RESPONSE_RECEIVED),
     {{RESP, 2, 2, 200},
      {RESP, 2, 2, 200},
      {RESP, 1, 1, 425},
      {RESP, 1, 1, 425}}},
    {"status_500",
     "/status?code=500",
     false,
     false,
     2 * S,
     EV(RESPONSE_RECEIVED),
     {{RESP, 1, 1, 500},
      {RESP, 1, 1, 500},
      {RESP, 1, 1, 500},
      {RESP, 1, 1, 500}}},
    {"status_404",
     "/status?code=404",
     false,
     false,
     2 * S,
     EV(RESPONSE_RECEIVED),
     {{RESP, 1, 1, 404},
      {RESP, 1, 1, 404},
      {RESP, 1, 1, 404},
      {RESP, 1, 1, 404}}},
};
#define N_FAULTS (sizeof(faults) / sizeof(faults[0]))

static const retryd_idempotency idems[] = {
    RETRYD_IDEMPOTENCY_SAFE, RETRYD_IDEMPOTENCY_IDEMPOTENT,
    RETRYD_IDEMPOTENCY_NON_IDEMPOTENT, RETRYD_IDEMPOTENCY_BY_KEY};

/* Every execution the server logged for @p id carried @p key: counted in
 * one LOG, so that an execution arriving meanwhile (a hedge the client
 * stopped, read by the server after all) is in both counts or neither. */
static void expect_key_everywhere(const char *id, const char *key,
                                  const char *what)
{
    char cmd[300], reply[8192];
    snprintf(cmd, sizeof(cmd), "LOG %s", id);
    cr_assert_eq(testsrv_command(srv, cmd, reply, sizeof(reply)), 0);
    long keyed = 0, all = 0;
    for (const char *q = reply; (q = strstr(q, key)) != NULL; q++)
        keyed++;
    for (const char *q = reply; (q = strstr(q, " POST ")) != NULL; q++)
        all++;
    cr_expect(all > 0 && keyed == all,
              "%s: the same key on every execution (%ld of %ld)", what, keyed,
              all);
}

static long hedges_seen; /* hedge attempts in the results of a fault */

/*
 * The executions and attempts @p e says, exactly; with hedging on, a safe
 * replayable request (@p hedgeable) may have more of both, each round at
 * most doubled by its one hedge, and never an attempt whose role is not
 * first, hedge or retry. Every other request, never hedged, exactly.
 */
static void expect_counts(const retryd_result *r, const expect *e,
                          long executions, bool hedgeable, const char *what)
{
    size_t n = retryd_result_attempt_count(r);
    for (size_t i = 0; i < n; i++)
        hedges_seen += retryd_result_attempt(r, i)->role == RETRYD_ROLE_HEDGE;
    if (HEDGED && hedgeable) {
        cr_expect(executions >= e->executions &&
                      executions <= 2 * (long)e->attempts,
                  "%s: %ld executions, %d to %d", what, executions,
                  e->executions, 2 * e->attempts);
        cr_expect(n >= (size_t)e->attempts && n <= 2 * (size_t)e->attempts,
                  "%s: %zu attempts", what, n);
        return;
    }
    cr_expect_eq(executions, e->executions, "%s: executions", what);
    cr_expect_eq(n, (size_t)e->attempts, "%s: attempts", what);
    cr_expect_eq(retryd_result_hedges(r, NULL), 0, "%s: hedged", what);
}

static void run_case(const fault *f, retryd_profile *p, size_t i, int body)
{
    retryd_idempotency idem = idems[i];
    const char *want_body;
    retryd_body *b = make_body(body, &want_body);
    bool one_shot = retryd_body_replayability(b) == RETRYD_ONE_SHOT;
    bool unsafe = idem == RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
    const expect *e = &f->per_class[(one_shot ? 2 : 0) + (unsafe ? 1 : 0)];
    char id[64], path[128];
    snprintf(id, sizeof(id), "%s-%zu-%s", f->name, i, body_names[body]);
    snprintf(path, sizeof(path), "%s%cid=%s", f->path,
             strchr(f->path, '?') ? '&' : '?', id);
    retryd_request req = {
        .sz = sizeof(req),
        .method = "POST",
        .path = path,
        .body = b,
        .idempotency = idem == RETRYD_IDEMPOTENCY_BY_KEY
                           ? RETRYD_IDEMPOTENCY_NON_IDEMPOTENT
                           : idem,
        .idempotency_key = idem == RETRYD_IDEMPOTENCY_BY_KEY,
        .deadline_ns = 20 * S,
    };
    retryd_result *r;
    cr_assert_eq(retryd_execute(p, &req, &r), 0);
    const char *what = id;

    /* A request the client gave up on (a timeout) may still be in the
     * server's socket buffer, to be read and counted a moment later: wait
     * for the expected count, with a bound, before comparing. A count
     * above it is returned at once. */
    long executions = testsrv_wait_count(srv, id, e->executions, 5000);
    /* With hedging on, a second copy of a payment would follow the first
     * within the hedge's microsecond: it is given that long and more to
     * show up. */
    if (HEDGED && unsafe && !f->refusal)
        executions = testsrv_wait_count(srv, id, 2, 50);
    if (unsafe && !f->refusal)
        cr_assert_leq(executions, 1,
                      "%s: a non-idempotent request ran %ld "
                      "times",
                      what, executions);
    cr_expect_eq(retryd_result_outcome(r), e->outcome, "%s: outcome %s", what,
                 retryd_outcome_name(retryd_result_outcome(r)));
    expect_counts(r, e, executions, !unsafe && !one_shot, what);
    cr_expect_eq(retryd_result_status(r), e->status, "%s: status", what);
    cr_expect(f->evidence_mask & (1u << retryd_result_evidence(r)),
              "%s: evidence %s", what,
              retryd_evidence_name(retryd_result_evidence(r)));
    if (req.idempotency_key && executions > 0)
        expect_key_everywhere(id, retryd_result_idempotency_key(r), what);
    if (e->outcome == RESP && e->status == 200 &&
        strcmp(f->path, "/echo") == 0) {
        size_t len;
        const char *got = retryd_result_body(r, &len);
        cr_expect(len == strlen(want_body) && !memcmp(got, want_body, len),
                  "%s: the server got the body intact: \"%.*s\"", what,
                  (int)len, got);
    }
    retryd_result_free(r);
    retryd_body_free(b);
    if (body == 3)
        unlink(file_path);
}

/* The row of @p name: each test names the fault it runs, so reordering the
 * table cannot make a test run another fault. */
static void run_fault(const char *name, bool all_bodies)
{
    const fault *f = NULL;
    for (size_t i = 0; i < N_FAULTS && f == NULL; i++)
        if (strcmp(faults[i].name, name) == 0)
            f = &faults[i];
    cr_assert(f != NULL, "no fault %s", name);
    int port = f->refused ? testsrv_unused_port() : testsrv_port(srv);
    retryd_profile *p = profile_at(port, f->attempt_ns);
    hedges_seen = 0;
    for (size_t i = 0; i < 4; i++)
        for (int body = 0; body < N_BODIES; body++)
            if (all_bodies || body == 0 || body == 6)
                run_case(f, p, i, body);
    /* Not a vacuous run: attempts that reached the server were hedged. */
    if (HEDGED && !f->refused)
        cr_expect_gt(hedges_seen, 0, "%s: no hedge in the matrix", name);
    if (HEDGED)
        cr_log_info("%s: %ld hedges", name, hedges_seen);
    retryd_profile_free(p);
}

Test(executor, ok_delivers_every_body_kind_once)
{
    run_fault("ok", true);
}

Test(executor, refused_connection_is_not_sent_and_retried_for_everyone)
{
    run_fault("connection_refused", true);
}

Test(executor, close_after_read_is_ambiguous_for_a_payment)
{
    run_fault("close_after_read", true);
}

Test(executor, reset_after_read_is_ambiguous_for_a_payment)
{
    run_fault("reset_after_read", true);
}

Test(executor, headers_past_the_timeout_are_sent_no_response)
{
    /* Slow: two body kinds suffice. */
    run_fault("headers_past_the_timeout", false);
}

Test(executor, partial_body_is_partial_response)
{
    run_fault("headers_then_part_of_the_body", true);
}

Test(executor, interim_1xx_is_not_a_final_response)
{
    run_fault("interim_response_then_close", true);
}

Test(executor, gateway_503_retries_idempotent_only)
{
    run_fault("status_503", true);
}

Test(executor, sequence_503_then_200_recovers_idempotent)
{
    run_fault("status_503_then_200", true);
}

Test(executor, status_429_is_retried_whatever_the_idempotency)
{
    run_fault("status_429_retry_after_0", true);
}

Test(executor, status_425_is_retried_once)
{
    run_fault("status_425_once", true);
}

Test(executor, status_500_not_registered_transient_is_final)
{
    run_fault("status_500", true);
}

Test(executor, other_4xx_is_final)
{
    run_fault("status_404", true);
}

/* The result's header accessors over a response a parser can get wrong:
 * only the final block's fields, in arrival order, values trimmed of the
 * blanks around them, the last of a repeated name (any case), colons
 * inside a value kept, and neither the interim block's field nor the
 * trailer's. The same checks run through the asynchronous executor (the
 * _multi suite). */
Test(executor, result_headers_are_the_final_blocks_fields_trimmed)
{
    retryd_profile *p = profile_at(testsrv_port(srv), 5 * S);
    retryd_request req = {.sz = sizeof(req),
                          .path = "/headers",
                          .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    retryd_result *r;
    cr_assert_eq(retryd_execute(p, &req, &r), 0);
    cr_assert_eq(retryd_result_outcome(r), RETRYD_OUTCOME_RESPONSE);
    cr_assert_eq(retryd_result_status(r), 200);
    size_t len;
    const char *body = retryd_result_body(r, &len);
    cr_expect(len == 2 && memcmp(body, "ok", 2) == 0);

    static const char *const want[][2] = {
        {"X-Padded", "spaced  value"}, {"X-Empty", ""},
        {"X-Twice", "first"},          {"x-twice", "second"},
        {"X-Colon", "a:b: c"},         {"Transfer-Encoding", "chunked"},
        {"Trailer", "X-Trailer"},
    };
    size_t n = sizeof(want) / sizeof(want[0]);
    cr_expect_eq(retryd_result_header_count(r), n);
    for (size_t i = 0; i < n && i < retryd_result_header_count(r); i++) {
        const char *name, *value;
        cr_assert_eq(retryd_result_header_at(r, i, &name, &value), 0);
        cr_expect_str_eq(name, want[i][0], "field %zu", i);
        cr_expect_str_eq(value, want[i][1], "field %zu (%s)", i, name);
    }
    const char *name, *value;
    cr_expect_eq(retryd_result_header_at(r, n, &name, &value), RETRYD_ERANGE);
    cr_expect_str_eq(retryd_result_header(r, "X-TWICE"), "second");
    cr_expect_str_eq(retryd_result_header(r, "x-padded"), "spaced  value");
    cr_expect_str_eq(retryd_result_header(r, "X-Empty"), "");
    cr_expect_null(retryd_result_header(r, "X-Interim"));
    cr_expect_null(retryd_result_header(r, "X-Trailer"));
    cr_expect_null(retryd_result_header(r, "X-Absent"));
    retryd_result_free(r);
    retryd_profile_free(p);
}
