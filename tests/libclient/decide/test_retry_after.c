/* SPDX-License-Identifier: MIT */
/* Retry-After: the RFC 9110 forms, the RFC's own examples, and input that
 * must mean "absent". */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "retryd/backoff.h"

#define S 1000000000LL
#define MAX (120 * S)
/* Sun, 06 Nov 1994 08:49:37 GMT, the RFC's example date. */
#define RFC_DATE 784111777LL

static int parse(const char *v, int64_t now, int64_t *ret)
{
    return retryd_retry_after_parse(v, strlen(v), now, MAX, ret);
}

static void expect_wait(const char *v, int64_t now, int64_t expected_ns)
{
    int64_t got = -7;
    cr_expect_eq(parse(v, now, &got), 0, "'%s' should parse", v);
    cr_expect_eq(got, expected_ns, "'%s': %lld ns, expected %lld", v,
                 (long long)got, (long long)expected_ns);
}

static void expect_absent(const char *v)
{
    int64_t got = -7;
    cr_expect_eq(parse(v, RFC_DATE, &got), RETRYD_ENOENT,
                 "'%s' should mean absent", v);
    cr_expect_eq(got, -7, "output written on failure for '%s'", v);
}

Test(retry_after, rfc_example_delay_seconds)
{
    expect_wait("120", 0, 120 * S); /* RFC 9110, 10.2.3 */
    expect_wait("0", 0, 0);
    expect_wait(" 5\t", 0, 5 * S);
}

Test(retry_after, rfc_example_http_date)
{
    /* RFC 9110, 10.2.3: Retry-After: Fri, 31 Dec 1999 23:59:59 GMT */
    expect_wait("Fri, 31 Dec 1999 23:59:59 GMT", 946684799LL - 60, 60 * S);
}

Test(retry_after, the_three_date_forms_agree)
{
    int64_t now = RFC_DATE - 30;
    expect_wait("Sun, 06 Nov 1994 08:49:37 GMT", now, 30 * S);
    expect_wait("Sunday, 06-Nov-94 08:49:37 GMT", now, 30 * S);
    expect_wait("Sun Nov  6 08:49:37 1994", now, 30 * S);
    expect_wait("Sun Nov 16 08:49:37 1994", now, MAX); /* ten days: clamped */
}

Test(retry_after, past_date_means_now)
{
    expect_wait("Sun, 06 Nov 1994 08:49:37 GMT", RFC_DATE + 1000, 0);
}

Test(retry_after, leap_day_and_leap_second_are_valid)
{
    /* 2024-02-29 00:00:00 = 1709164800 */
    expect_wait("Thu, 29 Feb 2024 00:00:00 GMT", 1709164800LL - 2, 2 * S);
    expect_wait("Sat, 31 Dec 2016 23:59:60 GMT", 1483228800LL - 10, 10 * S);
}

Test(retry_after, rfc850_two_digit_year_is_at_most_50_years_ahead)
{
    /* Now: 2026-01-01. "26" is this year; "75" would be 2075, 49 years
     * ahead, so stays; "77" would be 2077, 51 years ahead, so is 1977. */
    int64_t now = 1767225600LL; /* 2026-01-01 00:00:00 */
    int64_t got;
    cr_assert_eq(parse("Thursday, 01-Jan-26 00:00:10 GMT", now, &got), 0);
    cr_expect_eq(got, 10 * S);
    cr_assert_eq(parse("Wednesday, 01-Jan-75 00:00:00 GMT", now, &got), 0);
    cr_expect_eq(got, MAX, "2075 is in the future (clamped)");
    cr_assert_eq(parse("Friday, 01-Jan-77 00:00:00 GMT", now, &got), 0);
    cr_expect_eq(got, 0, "1977 is in the past");
}

Test(retry_after, large_values_are_clamped_to_the_maximum)
{
    expect_wait("3600", 0, MAX);
    expect_wait("9223372036", 0, MAX); /* largest that fits in ns */
    expect_wait("Fri, 31 Dec 9999 23:59:59 GMT", 4102444800LL, MAX);
}

Test(retry_after, malformed_values_mean_absent)
{
    const char *bad[] = {
        "",
        " ",
        "-1",
        "+5",
        "1.5",
        "12abc",
        "0x10",
        "1e3",
        "5 s",
        "9223372037",                       /* overflows int64 ns */
        "99999999999999999999999999999999", /* overflows everything */
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 nov 1994 08:49:37 GMT",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 31 Feb 1994 08:49:37 GMT",
        "Sun, 29 Feb 1900 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49:61 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT x",
        "Sun,06 Nov 1994 08:49:37 GMT",
        "Sunday, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06-Nov-94 08:49:37 GMT",
        "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994",
        "Sun Nov  6 08:49:37 94",
        "Sun Nov  6 8:49:37 1994",
        "Xyz, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37",
        "GMT",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_absent(bad[i]);
}

Test(retry_after, embedded_nul_and_length_are_respected)
{
    int64_t got = -7;
    const char v[] = "12\0"
                     "34";
    cr_expect_eq(retryd_retry_after_parse(v, 5, 0, MAX, &got), RETRYD_ENOENT);
    cr_expect_eq(retryd_retry_after_parse(v, 2, 0, MAX, &got), 0);
    cr_expect_eq(got, 12 * S);
    cr_expect_eq(retryd_retry_after_parse("7", 0, 0, MAX, &got), RETRYD_ENOENT,
                 "zero length is empty");
}

Test(retry_after, bad_arguments_are_einval)
{
    int64_t got;
    cr_expect_eq(retryd_retry_after_parse(NULL, 0, 0, MAX, &got),
                 RETRYD_EINVAL);
    cr_expect_eq(retryd_retry_after_parse("1", 1, 0, MAX, NULL), RETRYD_EINVAL);
    cr_expect_eq(retryd_retry_after_parse("1", 1, 0, -1, &got), RETRYD_EINVAL);
}

/* Random bytes and mutations of valid values never crash or read out of
 * bounds (the sanitizer builds make that visible) and never produce a wait
 * outside [0, max]. */
Test(retry_after, random_input_never_escapes_the_bounds)
{
    static const char alphabet[] =
        "0123456789 ,:-+SunMoTeFrWdhaJbpygOcNvDGMT\t";
    unsigned seed = 12345;
    long parsed = 0;
    for (int i = 0; i < 200000; i++) {
        char buf[40];
        size_t len = (size_t)(rand_r(&seed) % (int)sizeof(buf));
        for (size_t j = 0; j < len; j++)
            buf[j] = i % 2 ? (char)rand_r(&seed)
                           : alphabet[rand_r(&seed) % (sizeof(alphabet) - 1)];
        /* Exact-length heap copy, so ASan catches a read past the end. */
        char *heap = malloc(len ? len : 1);
        memcpy(heap, buf, len);
        int64_t got = -1;
        if (retryd_retry_after_parse(heap, len, RFC_DATE, MAX, &got) == 0) {
            cr_assert(got >= 0 && got <= MAX);
            parsed++;
        }
        free(heap);
    }
    /* Else the bound above was never checked. */
    cr_expect_gt(parsed, 0, "no input parsed");
}
