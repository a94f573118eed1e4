/* SPDX-License-Identifier: MIT */
/*
 * retrydctl request from a shell's point of view: the body on stdout, the
 * outcome on stderr, exit codes 0 / 1 / 2 for response / failure /
 * ambiguous, and the same host budget as every other process.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "run.h"
#include "srv_log.h"
#include "testsrv.h"

static testsrv *srv;
static run_result res;
static char url[256];

static void setup(void)
{
    cr_assert_eq(testsrv_start(FAULTSRV_PATH, NULL, &srv), 0);
}

static void teardown(void)
{
    testsrv_stop(srv);
}

TestSuite(retrydctl_request, .init = setup, .fini = teardown, .timeout = 60);

static char *at(const char *path)
{
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", testsrv_port(srv),
             path);
    return url;
}

/* retrydctl request <args...> URL, without a daemon (local budget). */
#define REQUEST(...)                                                           \
    do {                                                                       \
        char *argv_[] = {RETRYDCTL_PATH, "request", __VA_ARGS__, NULL};        \
        cr_assert_eq(run_program(argv_, 20000, &res), 0);                      \
    } while (0)

Test(retrydctl_request, response_body_goes_to_stdout_and_exit_is_0)
{
    REQUEST("--safe", at("/ok?id=a"));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect_str_eq(res.out, "ok");
    cr_expect(strstr(res.err, "retrydctl: response 200") != NULL, "%s",
              res.err);
}

Test(retrydctl_request, error_status_is_still_a_response)
{
    REQUEST("--max-attempts", "1", at("/status?code=404&id=b"));
    cr_expect_eq(res.exit_code, 0);
    cr_expect(strstr(res.err, "response 404") != NULL, "%s", res.err);
}

Test(retrydctl_request, timed_out_payment_is_ambiguous_and_exit_is_2)
{
    REQUEST("-d", "amount=10", "--attempt-timeout", "200ms",
            at("/hold?ms=3000&id=c"));
    cr_expect_eq(res.exit_code, 2, "%s", res.err);
    cr_expect(strstr(res.err, "ambiguous") != NULL);
    cr_expect(strstr(res.err, "reconcile before replaying") != NULL);
    cr_expect_eq(testsrv_count(srv, "c"), 1, "never sent twice");
}

Test(retrydctl_request, refused_connection_is_a_failure_and_exits_7_as_curl)
{
    char target[64];
    snprintf(target, sizeof(target), "http://127.0.0.1:%d/",
             testsrv_unused_port());
    REQUEST("-d", "x", "--max-attempts", "2", target);
    cr_expect_eq(res.exit_code, 7, "%s", res.err);
    cr_expect(strstr(res.err, "failure (evidence not_sent, 2 attempts") != NULL,
              "%s", res.err);
}

Test(retrydctl_request, trace_prints_every_attempt_with_its_rule)
{
    REQUEST("--idempotent", "--trace", "--max-attempts", "3",
            at("/seq?codes=503,503,200&id=d"));
    cr_expect_eq(res.exit_code, 0);
    cr_expect(strstr(res.err, "attempt 1: response_received/none status 503") &&
                  strstr(res.err, "retry (status_gateway_idempotent)") &&
                  strstr(res.err, "attempt 3: response_received/none status "
                                  "200"),
              "%s", res.err);
    cr_expect_eq(testsrv_count(srv, "d"), 3);
}

Test(retrydctl_request, idempotency_key_is_the_same_on_every_attempt)
{
    REQUEST("-d", "pay", "--idempotency-key=order-77", "--max-attempts", "3",
            at("/close-after-read?id=e"));
    cr_expect_eq(res.exit_code, 56,
                 "keyed: retried, then a failure: the connection lost");
    cr_expect_eq(testsrv_count(srv, "e"), 3);
    cr_expect_eq(srv_log_count(srv, "e", " order-77 "), 3);
}

Test(retrydctl_request, data_file_is_reopened_stdin_is_not)
{
    char path[] = "/tmp/retryd-data-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0 && write(fd, "from file", 9) == 9);
    close(fd);
    REQUEST("--data-file", path, "--idempotent", "--max-attempts", "2",
            at("/close-after-read?id=f"));
    cr_expect_eq(testsrv_count(srv, "f"), 2, "a file can be sent again");
    unlink(path);
    REQUEST("--data-file", "-", "--idempotent", "--max-attempts", "2",
            at("/close-after-read?id=g"));
    cr_expect_eq(testsrv_count(srv, "g"), 1, "stdin cannot");
    cr_expect(strstr(res.err, "body_not_replayable") != NULL, "%s", res.err);
}

Test(retrydctl_request, headers_and_method_reach_the_server)
{
    REQUEST("-X", "PUT", "-H", "X-Trace: 42", "-d", "v=1", "--idempotent",
            at("/echo?id=h"));
    cr_expect_eq(res.exit_code, 0);
    cr_expect_str_eq(res.out, "v=1");
    cr_expect_eq(srv_log_count(srv, "h", " PUT 3 "), 1);
}

/* The shell's way in keeps the floor too: the server sees the retry no
 * sooner than its Retry-After, and one too long for the call returns at
 * once with the trail saying why. */
Test(retrydctl_request, retry_after_is_waited_whole_or_not_at_all)
{
    REQUEST("--safe", "--max-attempts", "2",
            at("/status?code=429&retry_after=2&id=cra"));
    int64_t t[4];
    cr_assert_eq(srv_log_times(srv, "cra", t, 4), 2, "%s", res.err);
    cr_expect_geq(t[1] - t[0], 2000, "retry after %lld ms",
                  (long long)(t[1] - t[0]));

    int64_t t0 = testsrv_now_ms();
    REQUEST("--safe", "--trace", "--deadline", "5s",
            at("/status?code=429&retry_after=120&id=crb"));
    cr_expect_lt(testsrv_now_ms() - t0, 1500,
                 "no wait for a 120 s Retry-After");
    cr_expect_eq(res.exit_code, 0, "a 429 is a response: %s", res.err);
    cr_expect(strstr(res.err, "retry_after_exceeds_max") != NULL, "%s",
              res.err);
    cr_expect_eq(testsrv_count(srv, "crb"), 1);
}

Test(retrydctl_request, bad_usage_exits_64)
{
    REQUEST("--deadline", "soon", at("/ok"));
    cr_expect_eq(res.exit_code, 64);
    REQUEST("--max-attempts", "0", at("/ok"));
    cr_expect_eq(res.exit_code, 64);
    REQUEST("not a url");
    cr_expect_eq(res.exit_code, 64);
    REQUEST("-H", "Bad\r\nHeader: x", at("/ok"));
    cr_expect_eq(res.exit_code, 64);
}

/* Scripts take part in the host budget: with a daemon, a request's
 * deposit and retries show in its statistics. */
Test(retrydctl_request, shell_requests_share_the_host_budget)
{
    rd_daemon d;
    cr_assert_eq(rd_daemon_init(&d, "[upstream script-upstream]\nratio = 1\n"
                                    "min_retries_per_sec = 0\ncap = 10\n"),
                 0);
    cr_assert_eq(rd_daemon_start(&d), 0);
    for (int i = 0; i < 2; i++)
        REQUEST("--safe", "--upstream", "script-upstream", "--control-socket",
                d.control, "--max-attempts", "3", at("/status?code=503&id=s"));
    cr_assert_eq(rd_ctl(&d, &res, "stats", "--json", NULL), 0, "%s", res.err);
    const char *u = "\"name\":\"script-upstream\"";
    /* Each request deposits 1 token: the first pays one retry, the second
     * one more; the third attempt of each finds the bucket empty. */
    cr_expect_eq(rd_json_number(res.out, u, "deposits"), 2, "%s", res.out);
    cr_expect_eq(rd_json_number(res.out, u, "retries_granted"), 2);
    cr_expect_eq(rd_json_number(res.out, u, "budget_exhausted"), 2);
    cr_expect_eq(rd_json_number(res.out, u, "response_received"), 4);
    cr_expect_eq(testsrv_count(srv, "s"), 4);
    REQUEST("-v", "--safe", "--control-socket", d.control, at("/ok?id=vs"));
    cr_expect(strstr(res.err, "retrydctl: host budget: shared") != NULL, "%s",
              res.err);
    rd_daemon_cleanup(&d);
}

/* A success is not a retry that was refused: it counts its evidence only,
 * whatever the engine's earlier rules would have said (here: an empty
 * budget and the last attempt). */
Test(retrydctl_request, successes_are_not_counted_as_denied_retries)
{
    rd_daemon d;
    cr_assert_eq(rd_daemon_init(&d, "[upstream ok-upstream]\nratio = 0\n"
                                    "min_retries_per_sec = 0\ncap = 10\n"),
                 0);
    cr_assert_eq(rd_daemon_start(&d), 0);
    for (int i = 0; i < 3; i++)
        REQUEST("--safe", "--upstream", "ok-upstream", "--control-socket",
                d.control, "--max-attempts", "1", at("/ok?id=fine"));
    cr_assert_eq(rd_ctl(&d, &res, "stats", "--json", NULL), 0, "%s", res.err);
    const char *u = "\"name\":\"ok-upstream\"";
    cr_expect_eq(rd_json_number(res.out, u, "deposits"), 3, "%s", res.out);
    cr_expect_eq(rd_json_number(res.out, u, "retries_granted"), 0);
    static const char *const denials[] = {"max_attempts", "budget_exhausted",
                                          "status_not_retryable"};
    for (size_t i = 0; i < sizeof(denials) / sizeof(denials[0]); i++)
        cr_expect_eq(rd_json_number(res.out, u, denials[i]), 0, "%s: %s",
                     denials[i], res.out);
    cr_expect_eq(rd_json_number(res.out, u, "response_received"), 3);
    cr_expect_eq(testsrv_count(srv, "fine"), 3);
    rd_daemon_cleanup(&d);
}

/* --- curl's options, with curl's meaning -------------------------------- */

Test(retrydctl_request, data_parts_join_with_ampersand_as_curl_does)
{
    char path[] = "/tmp/retryd-data-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0 && write(fd, "c=3\r\n\nd=4\n", 10) == 10);
    close(fd);
    char at_file[64];
    snprintf(at_file, sizeof(at_file), "@%s", path);
    REQUEST("-d", "a=1", "-d", "b=2", "-d", at_file, "--idempotent",
            at("/echo?id=dj"));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect_str_eq(res.out, "a=1&b=2&c=3d=4", "-d @file loses newlines");
    REQUEST("--data-binary", at_file, "--idempotent", at("/echo?id=db"));
    cr_expect_str_eq(res.out, "c=3\r\n\nd=4\n", "--data-binary keeps them");
    REQUEST("--data-raw", "@not-a-file", "--idempotent", at("/echo?id=dr"));
    cr_expect_str_eq(res.out, "@not-a-file");
    unlink(path);
    REQUEST("--json", "{\"x\":1}", "-v", "--idempotent", at("/echo?id=dk"));
    cr_expect_str_eq(res.out, "{\"x\":1}");
    cr_expect(strstr(res.err, "> POST ") != NULL, "%s", res.err);
    cr_expect(strstr(res.err, "> Content-Type: application/json") != NULL);
    cr_expect(strstr(res.err, "> Accept: application/json") != NULL);
}

Test(retrydctl_request, get_puts_the_data_in_the_query)
{
    REQUEST("-G", "-d", "id=gq", "--safe", at("/ok"));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect_eq(testsrv_count(srv, "gq"), 1, "the id reached the query");
    cr_expect_eq(srv_log_count(srv, "gq", " GET 0 "), 1, "a GET, no body");
}

/* A hostile server's reason phrase reaches the terminal as printable bytes
 * only: ESC, BEL and the like become '?' (curl writes them raw). */
Test(retrydctl_request, a_hostile_reason_phrase_is_made_printable)
{
    REQUEST("-i", "--safe", at("/reason?text=O%1b%5b31mK%07&id=rp"));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    const char *line = "HTTP/1.1 200 O?[31mK?\r\n";
    cr_expect(strncmp(res.out, line, strlen(line)) == 0, "%s", res.out);
    for (const char *p = res.out; *p; p++)
        cr_expect(*p == '\r' || *p == '\n' || (*p >= 0x20 && *p < 0x7f),
                  "byte %#x written", (unsigned char)*p);
}

Test(retrydctl_request, include_head_and_output_file)
{
    REQUEST("-i", "--safe", at("/ok?id=inc"));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect(strncmp(res.out, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", res.out);
    cr_expect(strstr(res.out, "\r\n\r\nok") != NULL, "headers, then body");
    REQUEST("-I", "--safe", at("/ok?id=head"));
    cr_expect(strncmp(res.out, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", res.out);
    size_t n = strlen(res.out);
    cr_expect(n >= 4 && strcmp(res.out + n - 4, "\r\n\r\n") == 0,
              "the headers and no body: %s", res.out);
    cr_expect_eq(srv_log_count(srv, "head", " HEAD "), 1);
    char out[] = "/tmp/retryd-out-XXXXXX";
    close(mkstemp(out));
    REQUEST("-o", out, "--safe", at("/ok?id=out"));
    cr_expect_str_eq(res.out, "", "the body went to the file");
    FILE *f = fopen(out, "r");
    char got[16] = "";
    cr_assert_not_null(f);
    cr_expect_eq(fread(got, 1, sizeof(got) - 1, f), 2);
    fclose(f);
    cr_expect_str_eq(got, "ok");
    unlink(out);
}

Test(retrydctl_request, silent_and_show_error)
{
    REQUEST("-s", "--safe", at("/ok?id=si"));
    cr_expect_str_eq(res.err, "", "nothing on stderr");
    char target[64];
    snprintf(target, sizeof(target), "http://127.0.0.1:%d/",
             testsrv_unused_port());
    REQUEST("-s", "--max-attempts", "1", target);
    cr_expect_eq(res.exit_code, 7);
    cr_expect_str_eq(res.err, "");
    REQUEST("-sS", "--max-attempts", "1", target);
    cr_expect(strstr(res.err, "failure") != NULL, "-S shows the error: %s",
              res.err);
}

Test(retrydctl_request, fail_turns_an_error_status_into_exit_22)
{
    REQUEST("-f", "--max-attempts", "1", at("/status?code=404&id=f22"));
    cr_expect_eq(res.exit_code, 22, "%s", res.err);
    cr_expect_str_eq(res.out, "", "no body on -f");
    cr_expect(strstr(res.err, "returned error: 404") != NULL, "%s", res.err);
    REQUEST("-f", "--safe", at("/ok?id=f0"));
    cr_expect_eq(res.exit_code, 0);
    cr_expect_str_eq(res.out, "ok");
}

Test(retrydctl_request, location_follows_redirects_within_a_bound)
{
    REQUEST("-L", "--safe", at("/redirect?to=%2Fok%3Fid%3Dhop&id=r1"));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect_str_eq(res.out, "ok");
    cr_expect_eq(testsrv_count(srv, "hop"), 1, "the target was reached");
    REQUEST("--safe", at("/redirect?to=%2Fok%3Fid%3Dnohop&id=r2"));
    cr_expect_eq(testsrv_count(srv, "nohop"), 0, "no -L: not followed");
    REQUEST("-L", "--max-redirs", "1", "--safe",
            at("/redirect?to=%2Fredirect%3Fto%3D%252Fok%253Fid%253Dfar&id=r3"));
    cr_expect_eq(res.exit_code, 47, "two redirects, one allowed: %s", res.err);
    cr_expect_eq(testsrv_count(srv, "far"), 0);
}

Test(retrydctl_request, user_sends_basic_credentials)
{
    REQUEST("-u", "user:pass", "--safe", at("/ok?id=basic"));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect_eq(srv_log_count(srv, "basic", "Basic%20dXNlcjpwYXNz"), 1,
                 "LOG escapes the space");
    /* Lengths that are not a multiple of 3 end in base64's padding. */
    REQUEST("-u", "ab:c", "--safe", at("/ok?id=basic1"));
    cr_expect_eq(srv_log_count(srv, "basic1", "Basic%20YWI6Yw=="), 1);
    REQUEST("-u", "abcd:", "--safe", at("/ok?id=basic2"));
    cr_expect_eq(srv_log_count(srv, "basic2", "Basic%20YWJjZDo="), 1);
}

Test(retrydctl_request, max_time_bounds_the_whole_call)
{
    int64_t t0 = testsrv_now_ms();
    REQUEST("--max-time", "1", "--connect-timeout", "0.5", "--safe",
            at("/hold?ms=5000&id=mt"));
    cr_expect_lt(testsrv_now_ms() - t0, 3000, "returned near 1 s");
    cr_expect_eq(res.exit_code, 28, "a safe read that timed out: %s", res.err);
    REQUEST("--max-time", "soon", at("/ok"));
    cr_expect_eq(res.exit_code, 64);
}

/* A GET that met a 503 without a declared idempotency is ambiguous, and
 * the user is told why in words and how to declare it. */
Test(retrydctl_request, verbose_explains_an_undeclared_idempotency)
{
    REQUEST("-v", "--max-attempts", "3", at("/status?code=503&id=und"));
    cr_expect_eq(res.exit_code, 2, "%s", res.err);
    cr_expect(strstr(res.err, "> GET http://") != NULL, "%s", res.err);
    cr_expect(strstr(res.err, "< HTTP/1.1 503") != NULL, "%s", res.err);
    cr_expect(strstr(res.err, "attempt 1: response_received") != NULL);
    cr_expect(strstr(res.err, "no idempotency was declared") != NULL);
    cr_expect(strstr(res.err, "say --safe") != NULL);
    cr_expect_eq(testsrv_count(srv, "und"), 1, "not retried");
    REQUEST("-v", "--safe", "--max-attempts", "2",
            at("/status?code=503&id=dec"));
    cr_expect(strstr(res.err, "no idempotency was declared") == NULL);
    cr_expect_eq(testsrv_count(srv, "dec"), 2, "declared safe: retried");
}

Test(retrydctl_request, help_and_version_exit_0)
{
    REQUEST("--help");
    cr_expect_eq(res.exit_code, 0);
    cr_expect(strstr(res.out, "usage: retrydctl request") != NULL);
    REQUEST("--version");
    cr_expect_eq(res.exit_code, 0);
    cr_expect(strstr(res.out, "retryd") != NULL, "%s", res.out);
}

/* curl writes the response that arrived whatever retryd answers: an
 * ambiguous GET's 503 body too, its headers with -i, through -L's
 * buffering; -f keeps it back and the exit stays 2. */
Test(retrydctl_request, ambiguous_response_is_still_written)
{
    REQUEST(at("/status?code=503&id=amb1"));
    cr_expect_eq(res.exit_code, 2, "%s", res.err);
    cr_expect_str_eq(res.out, "status 503\n");
    REQUEST("-i", at("/status?code=503&id=amb2"));
    cr_expect(strncmp(res.out, "HTTP/1.1 503 Service Unavailable\r\n", 34) == 0,
              "%s", res.out);
    cr_expect(strstr(res.out, "\r\n\r\nstatus 503\n") != NULL, "%s", res.out);
    REQUEST("-L", at("/status?code=503&id=amb3"));
    cr_expect_str_eq(res.out, "status 503\n");
    REQUEST("-f", at("/status?code=503&id=amb4"));
    cr_expect_eq(res.exit_code, 2, "%s", res.err);
    cr_expect_str_eq(res.out, "");
}

/* -s: not a word on stderr, not even the idempotency hint; -sS: the
 * errors (the outcome, reconcile), still no hint. */
Test(retrydctl_request, silent_silences_every_hint)
{
    REQUEST("-s", at("/status?code=503&id=sh1"));
    cr_expect_eq(res.exit_code, 2);
    cr_expect_str_eq(res.err, "");
    REQUEST("-sS", at("/status?code=503&id=sh2"));
    cr_expect(strstr(res.err, "retrydctl: ambiguous 503") != NULL, "%s",
              res.err);
    cr_expect(strstr(res.err, "reconcile") != NULL, "%s", res.err);
    cr_expect(strstr(res.err, "no idempotency was declared") == NULL, "%s",
              res.err);
    REQUEST("-s", "-L", "--max-redirs", "0",
            at("/redirect?to=%2Fok%3Fid%3Dsh3&id=sh4"));
    cr_expect_eq(res.exit_code, 47);
    cr_expect_str_eq(res.err, "");
}

/* -v says when the retries are not paid from the host budget, and why. */
Test(retrydctl_request, verbose_says_the_budget_is_local_and_why)
{
    REQUEST("-v", "--safe", "--control-socket", "/nonexistent/control.sock",
            at("/ok?id=vl"));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect(strstr(res.err, "host budget: not shared (no-daemon)") != NULL,
              "%s", res.err);
    cr_expect(strstr(res.err, "is retryd running?") != NULL, "%s", res.err);
    REQUEST("--safe", "--control-socket", "/nonexistent/control.sock",
            at("/ok?id=vq"));
    cr_expect(strstr(res.err, "host budget") == NULL, "only with -v");
}

/* What retrydctl does not do, said in one line with what to do instead. */
Test(retrydctl_request, refusals_name_the_equivalent)
{
    REQUEST("--retry", "3", at("/ok?id=rf"));
    cr_expect_eq(res.exit_code, 64);
    cr_expect(strstr(res.err, "--max-attempts") != NULL, "%s", res.err);
    cr_expect_eq(strchr(res.err, '\n'), res.err + strlen(res.err) - 1,
                 "one line: %s", res.err);
    REQUEST("--retry-all-errors", at("/ok?id=rf"));
    cr_expect_eq(res.exit_code, 64);
    cr_expect(strstr(res.err, "--max-attempts") != NULL, "%s", res.err);
    /* What curl's -F can do beyond fields and files, in one line. */
    REQUEST("-F", "a=@-", at("/ok?id=rf"));
    cr_expect_eq(res.exit_code, 64);
    cr_expect(strstr(res.err, "name a file") != NULL, "%s", res.err);
    cr_expect_eq(strchr(res.err, '\n'), res.err + strlen(res.err) - 1,
                 "one line: %s", res.err);
    REQUEST("-F", "a=1;headers=X-A: 1", at("/ok?id=rf"));
    cr_expect_eq(res.exit_code, 64);
    cr_expect(strstr(res.err, "headers=") != NULL, "%s", res.err);
    REQUEST("-F", "a=1", "-d", "b=2", at("/ok?id=rf"));
    cr_expect_eq(res.exit_code, 64);
    REQUEST("--safe", at("/ok?id=rf"), "http://127.0.0.1:1/");
    cr_expect_eq(res.exit_code, 64);
    cr_expect(strstr(res.err, "one per call") != NULL, "%s", res.err);
    cr_expect_eq(testsrv_count(srv, "rf"), 0, "nothing was sent");
}

Test(retrydctl_request, remote_name_writes_the_urls_file_name)
{
    char name[64];
    snprintf(name, sizeof(name), "retrydctl-O-%d.txt", (int)getpid());
    char path[128];
    snprintf(path, sizeof(path), "/%s?id=rn", name);
    unlink(name);
    REQUEST("-O", "--safe", at(path));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect_str_eq(res.out, "", "not on stdout");
    FILE *f = fopen(name, "r");
    cr_assert_not_null(f, "-O wrote %s", name);
    fclose(f);
    unlink(name);
    REQUEST("-O", "--safe", at("/"));
    cr_expect_eq(res.exit_code, 23, "no file name: %s", res.err);
}

/* -w's retryd variables: the outcome, the attempts, the rule, whether the
 * budget was shared; %{json} holds them with curl's common ones. */
Test(retrydctl_request, write_out_has_retryds_own_variables)
{
    REQUEST("-s", "--safe", "--max-attempts", "2", "--control-socket",
            "/nonexistent/control.sock", "-w",
            "\\n%{retryd_outcome} %{retryd_attempts} %{retryd_rule} "
            "%{retryd_budget}",
            at("/status?code=503&id=wo"));
    cr_expect_str_eq(res.out,
                     "status 503\n\nresponse 2 max_attempts local (no-daemon)",
                     "the final body, then -w");
    REQUEST("-s", "-w", "%{json}", at("/status?code=503&id=wj"));
    cr_expect_eq(res.exit_code, 2);
    cr_expect(strstr(res.out, "\"http_code\":503") != NULL, "%s", res.out);
    cr_expect(strstr(res.out, "\"retryd_outcome\":\"ambiguous\"") != NULL, "%s",
              res.out);
    cr_expect(strstr(res.out, "\"retryd_attempts\":1") != NULL, "%s", res.out);
}
