/* Error codes, names, the body-kind algebra, durations and frames. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "frame.h"
#include "retryd.pb-c.h"
#include "retryd/retryd.h"

Test(error, every_code_has_a_distinct_name_and_text)
{
    const int codes[] = {
#define X(name, value, text) value,
        RETRYD_ERRNO_MAP(X)
#undef X
    };
    size_t n = sizeof(codes) / sizeof(codes[0]);
    for (size_t i = 0; i < n; i++) {
        cr_expect_eq(codes[i], -(int)(i + 1), "codes are dense and frozen");
        cr_expect_str_neq(retryd_strerror(codes[i]), "unknown error");
        for (size_t j = 0; j < i; j++)
            cr_expect_str_neq(retryd_err_name(codes[i]),
                              retryd_err_name(codes[j]));
    }
    cr_expect_str_eq(retryd_err_name(RETRYD_EBUDGET), "EBUDGET");
    cr_expect_str_eq(retryd_strerror(0), "success");
    cr_expect_str_eq(retryd_strerror(-9999), "unknown error");
    cr_expect_str_eq(retryd_err_name(42), "UNKNOWN");
}

Test(names, round_trip_through_the_stable_names)
{
    for (int i = 0; i < RETRYD_EVIDENCE_COUNT; i++) {
        retryd_evidence e;
        cr_assert_eq(retryd_evidence_from_name(retryd_evidence_name(i), &e), 0);
        cr_expect_eq((int)e, i);
    }
    for (int i = 0; i < RETRYD_IDEMPOTENCY_COUNT; i++) {
        retryd_idempotency v;
        cr_assert_eq(
            retryd_idempotency_from_name(retryd_idempotency_name(i), &v), 0);
        cr_expect_eq((int)v, i);
    }
    for (int i = 0; i < RETRYD_FAILURE_COUNT; i++) {
        retryd_failure v;
        cr_assert_eq(retryd_failure_from_name(retryd_failure_name(i), &v), 0);
        cr_expect_eq((int)v, i);
    }
    for (int i = 0; i < RETRYD_REPLAYABILITY_COUNT; i++) {
        retryd_replayability v;
        cr_assert_eq(
            retryd_replayability_from_name(retryd_replayability_name(i), &v),
            0);
        cr_expect_eq((int)v, i);
    }
    retryd_evidence e = RETRYD_EVIDENCE_NOT_SENT;
    cr_expect_eq(retryd_evidence_from_name("NOT_SENT", &e), RETRYD_EINVAL);
    cr_expect_eq(retryd_evidence_from_name(NULL, &e), RETRYD_EINVAL);
    cr_expect_str_eq(retryd_evidence_name((retryd_evidence)-1), "unknown");
}

Test(body, kinds_have_the_specified_replayability)
{
    const struct {
        retryd_body_kind kind;
        retryd_replayability expected;
    } rows[] = {
        {RETRYD_BODY_BYTES, RETRYD_REPLAYABLE},
        {RETRYD_BODY_DTO, RETRYD_REPLAYABLE},
        {RETRYD_BODY_SUPPLIER, RETRYD_REOPENABLE},
        {RETRYD_BODY_STREAM, RETRYD_ONE_SHOT},
        {RETRYD_BODY_PUBLISHER, RETRYD_ONE_SHOT},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        retryd_replayability r;
        /* What a publisher factory declares must not leak into the others. */
        cr_assert_eq(
            retryd_body_kind_replayability(rows[i].kind, RETRYD_REPLAYABLE, &r),
            0);
        cr_expect_eq(r, rows[i].expected, "kind %d", rows[i].kind);
        cr_assert_eq(
            retryd_body_kind_replayability(rows[i].kind, RETRYD_ONE_SHOT, &r),
            0);
        cr_expect_eq(r, rows[i].expected, "kind %d", rows[i].kind);
    }
}

Test(body, publisher_factory_is_as_declared)
{
    for (int d = 0; d < RETRYD_REPLAYABILITY_COUNT; d++) {
        retryd_replayability r;
        cr_assert_eq(
            retryd_body_kind_replayability(RETRYD_BODY_PUBLISHER_FACTORY,
                                           (retryd_replayability)d, &r),
            0);
        cr_expect_eq((int)r, d);
    }
    retryd_replayability r = RETRYD_REPLAYABLE;
    cr_expect_eq(retryd_body_kind_replayability(RETRYD_BODY_PUBLISHER_FACTORY,
                                                (retryd_replayability)9, &r),
                 RETRYD_EINVAL);
    cr_expect_eq(retryd_body_kind_replayability(RETRYD_BODY_MULTIPART,
                                                RETRYD_REPLAYABLE, &r),
                 RETRYD_EINVAL);
}

Test(body, multipart_is_its_weakest_part)
{
    cr_expect_eq(
        retryd_replayability_weakest(RETRYD_REPLAYABLE, RETRYD_REOPENABLE),
        RETRYD_REOPENABLE);
    cr_expect_eq(
        retryd_replayability_weakest(RETRYD_ONE_SHOT, RETRYD_REPLAYABLE),
        RETRYD_ONE_SHOT);
    cr_expect_eq(
        retryd_replayability_weakest(RETRYD_REPLAYABLE, RETRYD_REPLAYABLE),
        RETRYD_REPLAYABLE);
    cr_expect_eq(retryd_replayability_weakest((retryd_replayability)5,
                                              RETRYD_REPLAYABLE),
                 RETRYD_ONE_SHOT, "an unknown value never enables a replay");
}

Test(duration, parses_the_units_people_write)
{
    const struct {
        const char *text;
        int64_t ns;
    } ok[] = {
        {"0", 0},
        {"250ms", 250000000},
        {"5s", 5000000000},
        {"1.5s", 1500000000},
        {"2m", 120000000000},
        {"1h", 3600000000000},
        {"100us", 100000},
        {"7ns", 7},
        {"0.001ms", 1000},
        {"0.5m", 30000000000},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t v = -1;
        cr_expect_eq(retryd_duration_parse(ok[i].text, &v), 0, "%s",
                     ok[i].text);
        cr_expect_eq(v, ok[i].ns, "%s", ok[i].text);
    }
    const char *bad[] = {"",    "5",   "s",    "-1s",   "1.s",
                         ".5s", "5 s", "5sec", "1e3ms", "5S"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t v = -1;
        cr_expect_eq(retryd_duration_parse(bad[i], &v), RETRYD_EINVAL, "%s",
                     bad[i]);
        cr_expect_eq(v, -1);
    }
    int64_t v;
    cr_expect_eq(retryd_duration_parse("9999999999999h", &v), RETRYD_ERANGE);
    cr_expect_eq(retryd_duration_parse("99999999999999999999999s", &v),
                 RETRYD_ERANGE);
}

Test(frame, a_header_alone_tells_the_body_length)
{
    const uint8_t frame[] = {0, 0, 0, 3, 0xaa, 0xbb, 0xcc};
    const uint8_t *body = NULL;
    size_t len = 0, used = 0;
    cr_expect_eq(retryd__frame_decode(frame, 4, 16, &body, &len, &used), 1);
    cr_expect_eq(len, 3, "the reader knows how much is to come");
    cr_expect_eq(retryd__frame_decode(frame, 3, 16, &body, &len, &used), 1);
    cr_expect_eq(retryd__frame_decode(frame, 7, 16, &body, &len, &used), 0);
    cr_expect_eq(len, 3);
    cr_expect_eq(used, 7);
    cr_expect_eq(body, frame + 4);
    cr_expect_eq(retryd__frame_decode(frame, 4, 2, &body, &len, &used),
                 RETRYD_EPROTO, "above the cap");
}

Test(frame, messages_cross_a_socket_whole)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    Retryd__Hello hello;
    retryd__hello__init(&hello);
    hello.protocol_version = RETRYD_PROTOCOL_VERSION;
    hello.client = "a client name long enough to need a few bytes";
    Retryd__ControlRequest req, empty;
    retryd__control_request__init(&req);
    retryd__control_request__init(&empty);
    req.body_case = RETRYD__CONTROL_REQUEST__BODY_HELLO;
    req.hello = &hello;
    cr_assert_eq(retryd__frame_send(sv[0], &req.base, -1, 1000), 0);
    cr_assert_eq(retryd__frame_send(sv[0], &empty.base, -1, 1000), 0);

    uint8_t *body;
    size_t len;
    int fd = 0;
    cr_assert_eq(retryd__frame_recv(sv[1], RETRYD_FRAME_REQUEST_MAX, 1000,
                                    &body, &len, &fd),
                 0);
    cr_expect_eq(fd, -1);
    cr_expect_eq(len, protobuf_c_message_get_packed_size(&req.base));
    Retryd__ControlRequest *got =
        retryd__control_request__unpack(NULL, len, body);
    free(body);
    cr_assert(got != NULL && got->hello != NULL);
    cr_expect_str_eq(got->hello->client, hello.client);
    retryd__control_request__free_unpacked(got, NULL);
    /* An empty message is a frame of length zero. */
    cr_assert_eq(retryd__frame_recv(sv[1], RETRYD_FRAME_REQUEST_MAX, 1000,
                                    &body, &len, NULL),
                 0);
    cr_expect_eq(len, 0);
    free(body);
    close(sv[0]);
    close(sv[1]);
}
