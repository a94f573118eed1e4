/* SPDX-License-Identifier: MIT */
/*
 * The executor's MIME body (retryd_body_new_mime: libcurl's MIME API) and
 * the client's cookie engine (retryd_client_opts.cookie_file, .cookie_jar:
 * a libcurl share), against retryd-faultsrv: a MIME body is sent whole by
 * every attempt (its file opened again), and an unreadable file fails
 * before anything is sent; a cookie a response sets reaches the next
 * attempt and the next profile, and the cookie file is read once, so that
 * a newer cookie is never put back by the file's.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "retryd/retryd.h"
#include "srv_log.h"
#include "testsrv.h"

#include "exec_fixture.h"

#include "exec_profile.h"

TestSuite(mime, .init = exec_setup, .fini = exec_teardown, .timeout = 60);

static char path[64];

static void write_temp(const char *text)
{
    snprintf(path, sizeof(path), "/tmp/retryd-mime-XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0 &&
              write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

static retryd_result *run(retryd_profile *p, const char *method,
                          const char *target, retryd_body *body,
                          retryd_idempotency idem)
{
    retryd_result *r = NULL;
    const retryd_request q = {.sz = sizeof(q),
                              .method = method,
                              .path = target,
                              .body = body,
                              .idempotency = idem};
    cr_assert_eq(retryd_execute(p, &q, &r), 0);
    return r;
}

/* A field and a file, as curl -F a=1 -F f=@FILE builds them. */
static retryd_body *field_and_file(const char *file)
{
    const retryd_mime_part field = {
        .sz = sizeof(field), .name = "a", .data = "1", .data_len = 1};
    const retryd_mime_part upload = {
        .sz = sizeof(upload), .name = "f", .file = file};
    const retryd_mime_part *parts[] = {&field, &upload};
    retryd_body *b = NULL;
    cr_assert_eq(retryd_body_new_mime(parts, 2, &b), 0);
    return b;
}

Test(mime, parts_are_checked_and_the_weakest_decides)
{
    retryd_body *b = NULL;
    const retryd_mime_part both = {
        .sz = sizeof(both), .data = "x", .data_len = 1, .file = "/etc/hosts"};
    const retryd_mime_part neither = {.sz = sizeof(neither), .name = "n"};
    const retryd_mime_part bad_type = {.sz = sizeof(bad_type),
                                       .data = "x",
                                       .data_len = 1,
                                       .content_type = "text/x\r\nX-Evil: 1"};
    const retryd_mime_part no_sz = {.data = "x", .data_len = 1};
    const retryd_mime_part *p[] = {&both, &neither, &bad_type, &no_sz};
    for (size_t i = 0; i < 4; i++)
        cr_expect_eq(retryd_body_new_mime(&p[i], 1, &b), RETRYD_EINVAL,
                     "part %zu", i);
    cr_expect_eq(retryd_body_new_mime(p, 0, &b), RETRYD_EINVAL);
    const retryd_mime_part data = {
        .sz = sizeof(data), .data = "", .data_len = 0};
    const retryd_mime_part *one[] = {&data};
    cr_assert_eq(retryd_body_new_mime(one, 1, &b), 0);
    cr_expect_eq(retryd_body_replayability(b), RETRYD_REPLAYABLE,
                 "in memory: the same bytes again");
    cr_expect_null(retryd_body_content_type(b), "libcurl's, per attempt");
    retryd_body_free(b);
    b = field_and_file("/etc/hosts");
    cr_expect_eq(retryd_body_replayability(b), RETRYD_REOPENABLE,
                 "a file: opened again");
    retryd_body_free(b);
    retryd_replayability r;
    cr_expect_eq(
        retryd_body_kind_replayability(RETRYD_BODY_MIME, RETRYD_REPLAYABLE, &r),
        RETRYD_EINVAL, "its parts decide, not its kind");
}

/* What curl -F sends: the parts' headers are libcurl's. */
Test(mime, the_server_gets_libcurls_form_data)
{
    write_temp("file body\n");
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_body *b = field_and_file(path);
    retryd_result *r =
        run(p, "POST", "/echo?id=m1", b, RETRYD_IDEMPOTENCY_NON_IDEMPOTENT);
    cr_assert_eq(retryd_result_status(r), 200, "%s", retryd_result_error(r));
    size_t len;
    const char *echo = retryd_result_body(r, &len);
    char want[160];
    snprintf(want, sizeof(want),
             "Content-Disposition: form-data; name=\"f\"; filename=\"%s\"\r\n",
             strrchr(path, '/') + 1);
    cr_expect(memmem(echo, len, want, strlen(want)) != NULL, "%.*s", (int)len,
              echo);
    cr_expect(memmem(echo, len, "name=\"a\"\r\n\r\n1\r\n", 15) != NULL, "%.*s",
              (int)len, echo);
    cr_expect(memmem(echo, len, "\r\n\r\nfile body\n\r\n", 16) != NULL, "%.*s",
              (int)len, echo);
    retryd_result_free(r);
    retryd_body_free(b);
    retryd_profile_free(p);
    unlink(path);
}

/* Each attempt builds the body again and opens the file again: three
 * executions of the same length (the boundary differs, its length not). */
Test(mime, every_attempt_sends_it_whole)
{
    write_temp("sent three times\n");
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_body *b = field_and_file(path);
    retryd_result *r = run(p, "POST", "/close-after-read?id=m2", b,
                           RETRYD_IDEMPOTENCY_IDEMPOTENT);
    cr_expect_eq(retryd_result_attempt_count(r), 3);
    cr_expect_eq(testsrv_count(srv, "m2"), 3);
    char reply[1024];
    cr_assert_eq(testsrv_command(srv, "LOG m2", reply, sizeof(reply)), 0);
    long n1 = 0, n2 = 0, n3 = 0;
    cr_assert_eq(sscanf(reply,
                        "1 POST %ld %*s - - ; 2 POST %ld %*s - - ; 3 "
                        "POST %ld",
                        &n1, &n2, &n3),
                 3, "%s", reply);
    cr_expect(n1 > 300 && n1 == n2 && n2 == n3, "%s", reply);
    retryd_result_free(r);
    retryd_body_free(b);
    retryd_profile_free(p);
    unlink(path);
}

Test(mime, an_unreadable_file_fails_before_sending)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_body *b = field_and_file("/nonexistent/retryd-upload");
    retryd_result *r =
        run(p, "POST", "/echo?id=m3", b, RETRYD_IDEMPOTENCY_IDEMPOTENT);
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_FAILURE);
    cr_expect_eq(retryd_result_evidence(r), RETRYD_EVIDENCE_NOT_SENT);
    cr_expect_eq(retryd_result_attempt(r, 0)->failure,
                 RETRYD_FAILURE_BODY_SOURCE);
    cr_expect_eq(testsrv_count(srv, "m3"), 0, "nothing sent");
    retryd_result_free(r);
    retryd_body_free(b);
    retryd_profile_free(p);
}

/* Without the engine, nothing a response sets is kept. */
Test(mime, a_client_without_the_engine_keeps_no_cookie)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_result_free(run(p, "GET", "/cookie?set=a%3D1&code=503&id=k0", NULL,
                           RETRYD_IDEMPOTENCY_SAFE));
    cr_expect_eq(testsrv_count(srv, "k0"), 3);
    cr_expect_eq(srv_log_count(srv, "k0", "cookie:"), 0);
    retryd_profile_free(p);
}

/* A client with the cookie engine, reading @p file (and writing @p jar). */
static retryd_client *cookie_client(const char *file, const char *jar)
{
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .flags = RETRYD_HOST_LOCAL_ONLY};
    const retryd_client_opts co = {
        .sz = sizeof(co), .host = &ho, .cookie_file = file, .cookie_jar = jar};
    retryd_client *c = NULL;
    cr_assert_eq(retryd_client_new(&co, &c), 0);
    return c;
}

static char cookie_file[64];

/* The suite's client (the one the multi build's driver binds to) with the
 * engine, reading a file that holds x=from-file for 127.0.0.1. */
static void cookies_setup(void)
{
    write_temp("127.0.0.1\tFALSE\t/\tFALSE\t0\tx\tfrom-file\n");
    snprintf(cookie_file, sizeof(cookie_file), "%s", path);
    cr_assert_eq(testsrv_start(FAULTSRV_PATH, NULL, &srv), 0);
    client = cookie_client(cookie_file, NULL);
}

static void cookies_teardown(void)
{
    exec_teardown();
    unlink(cookie_file);
}

TestSuite(cookies, .init = cookies_setup, .fini = cookies_teardown,
          .timeout = 60);

Test(cookies, a_cookie_set_on_one_attempt_is_sent_on_the_next)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_result_free(run(p, "GET", "/cookie?set=a%3D1&code=503&id=k1", NULL,
                           RETRYD_IDEMPOTENCY_SAFE));
    cr_expect_eq(testsrv_count(srv, "k1"), 3);
    cr_expect_eq(srv_log_count(srv, "k1", "x=from-file"), 3, "the file's");
    cr_expect_eq(srv_log_count(srv, "k1", "cookie: a=1%3B%20x=from-file"), 2,
                 "the second and third attempts: the one the first got");
    retryd_profile_free(p);
}

Test(cookies, the_file_is_read_once)
{
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_result_free(run(p, "GET", "/cookie?set=x%3Dnewer&id=k3", NULL,
                           RETRYD_IDEMPOTENCY_SAFE));
    retryd_profile_free(p);
    /* Another profile: new handles, which must not read the file again
     * (its x=from-file would replace the newer x). */
    p = exec_profile((retryd_profile_opts){0});
    retryd_result_free(
        run(p, "GET", "/ok?id=k4", NULL, RETRYD_IDEMPOTENCY_SAFE));
    retryd_profile_free(p);
    cr_expect_eq(srv_log_count(srv, "k3", "cookie: x=from-file"), 1);
    cr_expect_eq(srv_log_count(srv, "k4", "cookie: x=newer"), 1);
}

/* The jar is written when the client is freed, whichever driver ran the
 * requests: the blocking build alone frees a client mid-test (the multi
 * build's driver keeps the suite's until the process ends). */
#ifndef retryd_execute
Test(cookies, the_jar_is_written_when_the_client_is_freed)
{
    char jar[80];
    snprintf(jar, sizeof(jar), "%s.jar", cookie_file);
    retryd_client *suite = client;
    client = cookie_client(cookie_file, jar);
    retryd_profile *p = exec_profile((retryd_profile_opts){0});
    retryd_result_free(run(p, "GET", "/cookie?set=y%3D2&id=k5", NULL,
                           RETRYD_IDEMPOTENCY_SAFE));
    retryd_profile_free(p);
    cr_expect_eq(access(jar, F_OK), -1, "not before the end");
    retryd_client_free(client);
    client = suite;
    char text[1024] = "";
    int fd = open(jar, O_RDONLY | O_CLOEXEC);
    cr_assert(fd >= 0, "the jar was written");
    cr_assert(read(fd, text, sizeof(text) - 1) > 0);
    close(fd);
    cr_expect(strstr(text, "\tx\tfrom-file\n") != NULL, "%s", text);
    cr_expect(strstr(text, "\ty\t2\n") != NULL, "%s", text);
    unlink(jar);
}
#endif
