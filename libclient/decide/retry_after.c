/* SPDX-License-Identifier: MIT */
/*
 * Retry-After (RFC 9110, section 10.2.3):
 *
 *   Retry-After = HTTP-date / delay-seconds
 *   HTTP-date   = IMF-fixdate / obs-date        (section 5.6.7)
 *   obs-date    = rfc850-date / asctime-date
 *
 *   IMF-fixdate  Sun, 06 Nov 1994 08:49:37 GMT
 *   rfc850-date  Sunday, 06-Nov-94 08:49:37 GMT
 *   asctime-date Sun Nov  6 08:49:37 1994
 *
 * The value comes from a server we do not control, so the parser is strict
 * and total: every byte is checked against the grammar, every number against
 * its range, and anything else means "absent" rather than a guess. Names are
 * case-sensitive, as the grammar says (%s"Mon").
 */
#include <stdbool.h>
#include <string.h>

#include "retryd/backoff.h"

#define NS_PER_S 1000000000LL
/* Seconds that still fit in int64 nanoseconds: about 292 years. */
#define MAX_SECONDS (INT64_MAX / NS_PER_S)

typedef struct cursor {
    const char *p;
    const char *end;
} cursor;

static const char *const day_short[7] = {"Mon", "Tue", "Wed", "Thu",
                                         "Fri", "Sat", "Sun"};
static const char *const day_long[7] = {"Monday",   "Tuesday", "Wednesday",
                                        "Thursday", "Friday",  "Saturday",
                                        "Sunday"};
static const char *const month_names[12] = {"Jan", "Feb", "Mar", "Apr",
                                            "May", "Jun", "Jul", "Aug",
                                            "Sep", "Oct", "Nov", "Dec"};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool eat(cursor *c, const char *lit)
{
    size_t n = strlen(lit);

    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
        return false;
    c->p += n;
    return true;
}

/* Exactly n digits (n <= 4). */
static bool digits(cursor *c, int n, int *ret)
{
    int v = 0;

    if (c->end - c->p < n)
        return false;
    for (int i = 0; i < n; i++) {
        if (!is_digit(c->p[i]))
            return false;
        v = v * 10 + (c->p[i] - '0');
    }
    c->p += n;
    *ret = v;
    return true;
}

static bool one_of(cursor *c, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (eat(c, names[i]))
            return true;
    return false;
}

static bool month(cursor *c, int *ret)
{
    for (int i = 0; i < 12; i++) {
        if (eat(c, month_names[i])) {
            *ret = i + 1;
            return true;
        }
    }
    return false;
}

/* time-of-day = hour ":" minute ":" second */
static bool time_of_day(cursor *c, int *h, int *m, int *s)
{
    return digits(c, 2, h) && eat(c, ":") && digits(c, 2, m) && eat(c, ":") &&
           digits(c, 2, s);
}

static bool is_leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int y, int m)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30,
                                 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/*
 * Days since 1970-01-01 of a proleptic Gregorian date; the algorithm is
 * Howard Hinnant's days_from_civil ("chrono-Compatible Low-Level Date
 * Algorithms"), which needs no table and no timegm() (whose behaviour on
 * out-of-range fields varies).
 */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

typedef struct civil {
    int year, month, day, hour, minute, second;
} civil;

static bool civil_valid(const civil *t)
{
    return t->month >= 1 && t->month <= 12 && t->day >= 1 &&
           t->day <= days_in_month(t->year, t->month) && t->hour <= 23 &&
           t->minute <= 59 && t->second <= 60; /* 60: a leap second */
}

static int64_t civil_to_epoch(const civil *t)
{
    return days_from_civil(t->year, t->month, t->day) * 86400 + t->hour * 3600 +
           t->minute * 60 + t->second;
}

/* The inverse, Hinnant's civil_from_days, for the RFC 850 century rule. */
static void civil_from_epoch(int64_t epoch, civil *t)
{
    int64_t days = epoch >= 0 ? epoch / 86400 : (epoch - 86399) / 86400;
    int64_t secs = epoch - days * 86400;
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;

    t->day = (int)(doy - (153 * mp + 2) / 5 + 1);
    t->month = (int)(mp < 10 ? mp + 3 : mp - 9);
    t->year = (int)(yoe + era * 400 + (t->month <= 2));
    t->hour = (int)(secs / 3600);
    t->minute = (int)(secs / 60 % 60);
    t->second = (int)(secs % 60);
}

/* Sun, 06 Nov 1994 08:49:37 GMT */
static bool parse_imf_fixdate(cursor c, civil *t)
{
    return one_of(&c, day_short, 7) && eat(&c, ", ") &&
           digits(&c, 2, &t->day) && eat(&c, " ") && month(&c, &t->month) &&
           eat(&c, " ") && digits(&c, 4, &t->year) && eat(&c, " ") &&
           time_of_day(&c, &t->hour, &t->minute, &t->second) &&
           eat(&c, " GMT") && c.p == c.end;
}

/*
 * Sunday, 06-Nov-94 08:49:37 GMT. The two-digit year is the most recent year
 * with those digits that is not more than 50 years in the future (RFC 9110,
 * section 5.6.7).
 */
static bool parse_rfc850(cursor c, int64_t now, civil *t)
{
    int yy;

    if (!(one_of(&c, day_long, 7) && eat(&c, ", ") && digits(&c, 2, &t->day) &&
          eat(&c, "-") && month(&c, &t->month) && eat(&c, "-") &&
          digits(&c, 2, &yy) && eat(&c, " ") &&
          time_of_day(&c, &t->hour, &t->minute, &t->second) &&
          eat(&c, " GMT") && c.p == c.end))
        return false;

    /* Take the century that puts the date nearest to now, then step back
     * one if that is more than 50 years ahead (the same moment of now's
     * year + 50 is the limit). */
    civil limit;
    civil_from_epoch(now, &limit);
    int year = limit.year - limit.year % 100 + yy;
    if (year < limit.year - 50)
        year += 100;
    limit.year += 50;
    if (limit.month == 2 && limit.day == 29 && !is_leap(limit.year))
        limit.day = 28;
    t->year = year;
    if (civil_valid(t) && civil_to_epoch(t) > civil_to_epoch(&limit))
        year -= 100;
    t->year = year;
    return true;
}

/* Sun Nov  6 08:49:37 1994  (the day is two digits or space and one digit) */
static bool parse_asctime(cursor c, civil *t)
{
    if (!(one_of(&c, day_short, 7) && eat(&c, " ") && month(&c, &t->month) &&
          eat(&c, " ")))
        return false;
    if (eat(&c, " ")) {
        if (!digits(&c, 1, &t->day))
            return false;
    } else if (!digits(&c, 2, &t->day)) {
        return false;
    }
    return eat(&c, " ") && time_of_day(&c, &t->hour, &t->minute, &t->second) &&
           eat(&c, " ") && digits(&c, 4, &t->year) && c.p == c.end;
}

/* delay-seconds = 1*DIGIT; a value that does not fit is "absent". */
static bool parse_delta(cursor c, int64_t *ret_s)
{
    int64_t v = 0;

    if (c.p == c.end)
        return false;
    for (; c.p < c.end; c.p++) {
        if (!is_digit(*c.p))
            return false;
        int d = *c.p - '0';
        if (v > (MAX_SECONDS - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *ret_s = v;
    return true;
}

static bool is_ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

int retryd_retry_after_parse(const char *value, size_t len, int64_t now,
                             int64_t max_ns, int64_t *ret_ns)
{
    cursor c;
    int64_t seconds;
    civil t = {0};

    if (value == NULL || ret_ns == NULL || max_ns < 0)
        return RETRYD_EINVAL;
    c.p = value;
    c.end = value + len;
    while (c.p < c.end && is_ows(*c.p))
        c.p++;
    while (c.end > c.p && is_ows(c.end[-1]))
        c.end--;

    if (c.p < c.end && is_digit(*c.p)) {
        if (!parse_delta(c, &seconds))
            return RETRYD_ENOENT;
    } else {
        if (!parse_imf_fixdate(c, &t) && !parse_rfc850(c, now, &t) &&
            !parse_asctime(c, &t))
            return RETRYD_ENOENT;
        if (!civil_valid(&t))
            return RETRYD_ENOENT;
        int64_t when = civil_to_epoch(&t);
        /* A four-digit year cannot overflow; a far date is merely long. */
        seconds = when > now ? when - now : 0;
    }

    *ret_ns = seconds > max_ns / NS_PER_S ? max_ns : seconds * NS_PER_S;
    return 0;
}
