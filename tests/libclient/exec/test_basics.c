/* SPDX-License-Identifier: MIT */
/* Error codes, names, the body-kind algebra, durations and frames. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "exec/body_internal.h"
#include "shared/frame.h"
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
        cr_expect_lt(codes[i], 0);
        cr_expect_str_neq(retryd_strerror(codes[i]), "unknown error");
        for (size_t j = 0; j < i; j++) {
            cr_expect_neq(codes[i], codes[j]);
            cr_expect_str_neq(retryd_err_name(codes[i]),
                              retryd_err_name(codes[j]));
        }
    }
    cr_expect_str_eq(retryd_err_name(RETRYD_EBUDGET), "EBUDGET");
    cr_expect_str_eq(retryd_strerror(0), "success");
    cr_expect_str_eq(retryd_strerror(-9999), "unknown error");
    cr_expect_str_eq(retryd_err_name(42), "UNKNOWN");
}

Test(error, published_numbers_are_frozen)
{
    /* docs/abi.md: negative errno where POSIX has the meaning, retryd's
     * own from -4001 down. A changed number here is an ABI break. */
    static const struct {
        int code, number;
    } frozen[] = {
        {RETRYD_EINVAL, -22},      {RETRYD_ENOMEM, -12},
        {RETRYD_ERANGE, -34},      {RETRYD_ENOENT, -2},
        {RETRYD_EBUDGET, -4001},   {RETRYD_ENOTCONN, -107},
        {RETRYD_EPROTO, -71},      {RETRYD_EVERSION, -4002},
        {RETRYD_ECORRUPT, -4003},  {RETRYD_EFULL, -4004},
        {RETRYD_ECONFLICT, -4005}, {RETRYD_EPERM, -1},
        {RETRYD_ESTALE, -116},     {RETRYD_ETIMEDOUT, -110},
        {RETRYD_ECONFIG, -4006},   {RETRYD_EIO, -5},
        {RETRYD_ECURL, -4007},     {RETRYD_EDRAINING, -4008},
        {RETRYD_EOPTS, -4009},     {RETRYD_ECANCELED, -125},
        {RETRYD_ESHARE, -4010},    {RETRYD_EREQSHARE, -4011},
        {RETRYD_EHEDGE, -4012},
    };
    for (size_t i = 0; i < sizeof(frozen) / sizeof(frozen[0]); i++)
        cr_expect_eq(frozen[i].code, frozen[i].number, "entry %zu", i);
}

Test(error, other_negative_errno_values_are_described)
{
    /* A code passed on from the system reads as the system's. */
    cr_expect_str_eq(retryd_err_name(-EACCES), "EACCES");
    cr_expect_str_neq(retryd_strerror(-EACCES), "unknown error");
    /* A retryd code keeps retryd's own text, not the C library's. */
    cr_expect_str_eq(retryd_strerror(RETRYD_ENOTCONN),
                     "retryd daemon not reachable");
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

/* A part's name and type are written whole into its head, or refused:
 * 200 bytes is accepted, 201 is not (and the parts are freed either way,
 * which the ASan build checks). */
Test(body, multipart_names_and_types_are_bounded)
{
    char longest[202];
    memset(longest, 'n', 201);
    longest[201] = '\0';
    retryd_body *b, *part;
    const char *names[1], *types[1] = {NULL};

    names[0] = longest;
    cr_assert_eq(retryd_body_new_bytes("x", 1, &part), 0);
    cr_expect_eq(retryd_body_new_multipart(&part, names, types, 1, &b),
                 RETRYD_EINVAL, "a 201-byte name");
    names[0] = "file";
    types[0] = longest;
    cr_assert_eq(retryd_body_new_bytes("x", 1, &part), 0);
    cr_expect_eq(retryd_body_new_multipart(&part, names, types, 1, &b),
                 RETRYD_EINVAL, "a 201-byte content type");

    longest[200] = '\0';
    names[0] = longest;
    types[0] = longest;
    cr_assert_eq(retryd_body_new_bytes("x", 1, &part), 0);
    cr_assert_eq(retryd_body_new_multipart(&part, names, types, 1, &b), 0);
    /* On the wire: the whole name and the whole type. */
    char wire[1024], want[512];
    size_t got = 0;
    long n;
    retryd_body_reader rd;
    cr_assert_eq(retryd__body_open(b, &rd), 0);
    while ((n = rd.read(rd.ctx, wire + got, sizeof(wire) - 1 - got)) > 0)
        got += (size_t)n;
    retryd__body_close(&rd);
    wire[got] = '\0';
    snprintf(want, sizeof(want), "name=\"%s\"\r\nContent-Type: %s\r\n\r\nx",
             longest, longest);
    cr_expect(strstr(wire, want) != NULL, "%s", wire);
    retryd_body_free(b);
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

/* A hello request, as the library and retrydctl send it. */
static void hello_request(Retryd__ControlRequest *req, Retryd__Hello *hello)
{
    retryd__hello__init(hello);
    hello->protocol_version = RETRYD_PROTOCOL_VERSION;
    hello->client = "test_basics";
    retryd__control_request__init(req);
    req->body_case = RETRYD__CONTROL_REQUEST__BODY_HELLO;
    req->hello = hello;
}

/* A pipe whose write end rides with a reply: the read end (non-blocking)
 * then tells whether every copy of the write end was closed. */
static int pipe_to_pass(int *ret_write)
{
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    *ret_write = p[1];
    return p[0];
}

static bool write_end_closed(int read_end)
{
    char c;
    return read(read_end, &c, 1) == 0;
}

Test(frame, control_exchange_returns_the_reply_and_its_descriptor)
{
    int sv[2], w;
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    int r_end = pipe_to_pass(&w);
    /* The daemon's side answers before it reads: the socket holds both. */
    Retryd__Hello hello;
    Retryd__ControlRequest req;
    hello_request(&req, &hello);
    Retryd__HelloReply hr;
    retryd__hello_reply__init(&hr);
    hr.protocol_version = RETRYD_PROTOCOL_VERSION;
    hr.daemon_version = "0.0.0-test";
    Retryd__ControlReply reply;
    retryd__control_reply__init(&reply);
    reply.body_case = RETRYD__CONTROL_REPLY__BODY_HELLO;
    reply.hello = &hr;
    cr_assert_eq(retryd__frame_send(sv[1], &reply.base, w, 1000), 0);
    close(w);

    Retryd__ControlReply *rep = NULL;
    int fd = -2;
    cr_assert_eq(retryd__control_exchange(sv[0], &req, 1000, &rep, &fd), 0);
    cr_assert(rep != NULL);
    cr_expect_eq(rep->body_case, RETRYD__CONTROL_REPLY__BODY_HELLO);
    cr_expect_str_eq(rep->hello->daemon_version, "0.0.0-test");
    cr_expect_geq(fd, 0, "the descriptor passed with the reply");
    retryd__control_reply__free_unpacked(rep, NULL);
    cr_expect(!write_end_closed(r_end));
    close(fd);
    cr_expect(write_end_closed(r_end));
    close(r_end);

    /* And the request went out whole. */
    uint8_t *body;
    size_t len;
    cr_assert_eq(retryd__frame_recv(sv[1], RETRYD_FRAME_REQUEST_MAX, 1000,
                                    &body, &len, NULL),
                 0);
    Retryd__ControlRequest *got =
        retryd__control_request__unpack(NULL, len, body);
    free(body);
    cr_assert(got != NULL && got->hello != NULL);
    cr_expect_str_eq(got->hello->client, "test_basics");
    retryd__control_request__free_unpacked(got, NULL);

    /* A caller that takes no descriptor leaves none open. */
    r_end = pipe_to_pass(&w);
    cr_assert_eq(retryd__frame_send(sv[1], &reply.base, w, 1000), 0);
    close(w);
    cr_assert_eq(retryd__control_exchange(sv[0], &req, 1000, &rep, NULL), 0);
    retryd__control_reply__free_unpacked(rep, NULL);
    cr_expect(write_end_closed(r_end));
    close(r_end);
    close(sv[0]);
    close(sv[1]);
}

Test(frame, control_exchange_refuses_a_reply_it_cannot_unpack)
{
    int sv[2], w;
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    int r_end = pipe_to_pass(&w);
    /* A frame whose body announces a 5-byte field and holds 1 byte. */
    uint8_t frame[] = {0, 0, 0, 3, 0x0a, 0x05, 0x01};
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct iovec iov = {.iov_base = frame, .iov_len = sizeof(frame)};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = ctl.space,
                        .msg_controllen = sizeof(ctl.space)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &w, sizeof(int));
    cr_assert_eq(sendmsg(sv[1], &mh, 0), (ssize_t)sizeof(frame));
    close(w);

    Retryd__Hello hello;
    Retryd__ControlRequest req;
    hello_request(&req, &hello);
    Retryd__ControlReply *rep = NULL;
    int fd = -2;
    cr_expect_eq(retryd__control_exchange(sv[0], &req, 1000, &rep, &fd),
                 RETRYD_EPROTO);
    cr_expect_eq(fd, -1, "no descriptor handed out");
    cr_expect(write_end_closed(r_end), "the passed descriptor was closed");
    close(r_end);
    close(sv[0]);
    close(sv[1]);
}

Test(frame, control_exchange_reports_a_silent_or_gone_daemon)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    Retryd__Hello hello;
    Retryd__ControlRequest req;
    hello_request(&req, &hello);
    Retryd__ControlReply *rep = NULL;
    cr_expect_eq(retryd__control_exchange(sv[0], &req, 50, &rep, NULL),
                 RETRYD_ETIMEDOUT, "a peer that never answers");
    close(sv[1]);
    cr_expect_eq(retryd__control_exchange(sv[0], &req, 1000, &rep, NULL),
                 RETRYD_ENOTCONN, "a peer that hung up");
    close(sv[0]);
}
