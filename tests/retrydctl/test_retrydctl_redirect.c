/* SPDX-License-Identifier: MIT */
/*
 * retrydctl request -L and credentials, as curl keeps them: Authorization
 * (from -u or -H) and a Cookie header go only to the first URL's scheme,
 * host and port; a redirect to another host or port gets neither, unless
 * --location-trusted. Two loopback hosts (127.0.0.1 and 127.0.0.2) and a
 * second port make "another origin" real; each server's LOG shows what
 * arrived.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "run.h"
#include "srv_log.h"
#include "testsrv.h"

static testsrv *first, *other_host, *other_port;
static run_result res;

static void setup(void)
{
    char *bind2[] = {"--bind=127.0.0.2", NULL};
    cr_assert_eq(testsrv_start(FAULTSRV_PATH, NULL, &first), 0);
    cr_assert_eq(testsrv_start(FAULTSRV_PATH, bind2, &other_host), 0);
    cr_assert_eq(testsrv_start(FAULTSRV_PATH, NULL, &other_port), 0);
}

static void teardown(void)
{
    testsrv_stop(first);
    testsrv_stop(other_host);
    testsrv_stop(other_port);
}

TestSuite(retrydctl_redirect, .init = setup, .fini = teardown, .timeout = 60);

/* Percent-encodes @p s for a query value (the redirect's target). */
static void encode(const char *s, char *out, size_t len)
{
    size_t n = 0;
    for (; *s && n + 4 < len; s++)
        n += (size_t)(strchr("/:?&=%", *s)
                          ? snprintf(out + n, len - n, "%%%02X",
                                     (unsigned char)*s)
                          : snprintf(out + n, len - n, "%c", *s));
    out[n] = '\0';
}

/* http://ADDR:PORT of @p srv's HTTP listener, then @p path. */
static void url_of(const char *addr, testsrv *srv, const char *path, char *out,
                   size_t len)
{
    snprintf(out, len, "http://%s:%d%s", addr, testsrv_port(srv), path);
}

/* The first server's /redirect to @p target (id "from"), in @p out. */
static void redirect_to(const char *target, char *out, size_t len)
{
    char enc[512], path[700];
    encode(target, enc, sizeof(enc));
    snprintf(path, sizeof(path), "/redirect?id=from&to=%s", enc);
    url_of("127.0.0.1", first, path, out, len);
}

/* -L with -u and a Cookie header through a redirect to @p target;
 * @p trusted adds --location-trusted. */
static void follow(const char *target, bool trusted)
{
    char url[1024];
    redirect_to(target, url, sizeof(url));
    char *argv[] = {RETRYDCTL_PATH,
                    "request",
                    "-L",
                    "--safe",
                    "-u",
                    "alice:secret",
                    "-H",
                    "Cookie: c=1",
                    url,
                    trusted ? "--location-trusted" : NULL,
                    NULL};
    cr_assert_eq(run_program(argv, 20000, &res), 0);
    cr_assert_eq(res.exit_code, 0, "%s", res.err);
    cr_assert_str_eq(res.out, "ok");
}

static const char *const basic = "Basic%20YWxpY2U6c2VjcmV0";

Test(retrydctl_redirect, another_host_gets_no_credentials_or_cookie)
{
    char target[256];
    url_of("127.0.0.2", other_host, "/ok?id=leak", target, sizeof(target));
    follow(target, false);
    cr_expect_eq(srv_log_count(first, "from", basic), 1,
                 "the first host had them");
    cr_expect_eq(srv_log_count(first, "from", "cookie: c=1"), 1);
    cr_expect_eq(testsrv_count(other_host, "leak"), 1, "reached");
    cr_expect_eq(srv_log_count(other_host, "leak", "Basic"), 0,
                 "no Authorization on another host");
    cr_expect_eq(srv_log_count(other_host, "leak", "cookie:"), 0,
                 "no Cookie on another host");
}

Test(retrydctl_redirect, another_port_gets_no_credentials_or_cookie)
{
    char target[256];
    url_of("127.0.0.1", other_port, "/ok?id=port", target, sizeof(target));
    follow(target, false);
    cr_expect_eq(testsrv_count(other_port, "port"), 1, "reached");
    cr_expect_eq(srv_log_count(other_port, "port", "Basic"), 0);
    cr_expect_eq(srv_log_count(other_port, "port", "cookie:"), 0);
}

Test(retrydctl_redirect, same_origin_keeps_them)
{
    follow("/ok?id=same", false);
    cr_expect_eq(srv_log_count(first, "same", basic), 1);
    cr_expect_eq(srv_log_count(first, "same", "cookie: c=1"), 1);
}

/* As curl: the rule compares with the first URL, not the previous hop,
 * so a hop back home carries them again. */
Test(retrydctl_redirect, back_to_the_first_origin_has_them_again)
{
    char home[256], enc[512], path[700], target[1024];
    url_of("127.0.0.1", first, "/ok?id=home", home, sizeof(home));
    encode(home, enc, sizeof(enc));
    snprintf(path, sizeof(path), "/redirect?id=via&to=%s", enc);
    url_of("127.0.0.2", other_host, path, target, sizeof(target));
    follow(target, false);
    cr_expect_eq(srv_log_count(other_host, "via", "Basic"), 0);
    cr_expect_eq(srv_log_count(other_host, "via", "cookie:"), 0);
    cr_expect_eq(srv_log_count(first, "home", basic), 1);
    cr_expect_eq(srv_log_count(first, "home", "cookie: c=1"), 1);
}

Test(retrydctl_redirect, location_trusted_sends_them_everywhere)
{
    char target[256];
    url_of("127.0.0.2", other_host, "/ok?id=trusted", target, sizeof(target));
    follow(target, true);
    cr_expect_eq(srv_log_count(other_host, "trusted", basic), 1);
    cr_expect_eq(srv_log_count(other_host, "trusted", "cookie: c=1"), 1);
}

Test(retrydctl_redirect, verbose_says_what_was_left_out)
{
    char url[1024], target[256];
    url_of("127.0.0.2", other_host, "/ok?id=v", target, sizeof(target));
    redirect_to(target, url, sizeof(url));
    char *argv[] = {RETRYDCTL_PATH, "request",      "-v", "-L", "--safe",
                    "-u",           "alice:secret", url,  NULL};
    cr_assert_eq(run_program(argv, 20000, &res), 0);
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect(strstr(res.err, "no Authorization or Cookie") != NULL, "%s",
              res.err);
    const char *second = strstr(res.err, "> GET http://127.0.0.2");
    cr_assert(second != NULL, "%s", res.err);
    cr_expect(strstr(second, "> Authorization") == NULL, "%s", res.err);
}

/* -b's "name=value" cookies keep the Cookie header's rule (curl sends them
 * to every host: retrydctl(1) lists the difference); the cookie engine's
 * go by their domains (test_retrydctl_vs_curl). */
Test(retrydctl_redirect, cookie_option_values_stay_with_the_first_origin)
{
    char target[256], url[1024];
    url_of("127.0.0.2", other_host, "/ok?id=bleak", target, sizeof(target));
    redirect_to(target, url, sizeof(url));
    char *argv[] = {RETRYDCTL_PATH, "request", "-L",  "--safe", "-b",
                    "c=1",          "-b",      "d=2", url,      NULL};
    cr_assert_eq(run_program(argv, 20000, &res), 0);
    cr_assert_eq(res.exit_code, 0, "%s", res.err);
    cr_expect_eq(srv_log_count(first, "from", "cookie: c=1%3Bd=2"), 1,
                 "joined as curl joins them, in one header");
    cr_expect_eq(testsrv_count(other_host, "bleak"), 1, "reached");
    cr_expect_eq(srv_log_count(other_host, "bleak", "cookie:"), 0);
}
