/* SPDX-License-Identifier: MIT */
/* retryd --check-config lists every mistake of a file, each with its line,
 * in the file's order, not only the first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "run.h"

static run_result res;

static void check_file(const char *text)
{
    char path[] = "/tmp/retryd-config-errors-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    char *argv[] = {RETRYD_PATH, "--config", path, "--check-config", NULL};
    cr_assert_eq(run_program(argv, 10000, &res), 0);
    unlink(path);
}

/* The position of the first report of line @p line in the output, or
 * NULL. */
static const char *at_line(int line)
{
    char where[32];
    snprintf(where, sizeof(where), ":%d: ", line);
    return strstr(res.err, where);
}

Test(config_errors, every_mistake_is_listed_in_order)
{
    check_file("[retryd]\n"                     /* 1 */
               "listen = here\n"                /* 2: unknown key */
               "[defaults]\n"                   /* 3 */
               "ratio = lots\n"                 /* 4: not a number */
               "cap = 0.5\n"                    /* 5: below 1 */
               "[upstream x]\n"                 /* 6 */
               "adaptive_throttle = maybe\n"    /* 7: not a switch */
               "throttle_window = 10ms\n"       /* 8: below 1 s */
               "garbage line\n"                 /* 9: syntax */
               "[unclosed\n"                    /* 10: syntax */
               "throttle_min_processes = 0\n"); /* 11: below 1 */
    cr_expect_eq(res.exit_code, 78, "%s", res.err);
    static const int lines[] = {2, 4, 5, 7, 8, 9, 10};
    const char *prev = res.err;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        const char *p = at_line(lines[i]);
        cr_expect(p != NULL, "line %d not reported: %s", lines[i], res.err);
        cr_expect(p == NULL || p >= prev, "line %d out of order: %s", lines[i],
                  res.err);
        if (p != NULL)
            prev = p;
    }
    cr_expect(strstr(res.err, "adaptive_throttle: 'maybe' is neither on nor "
                              "off") != NULL,
              "%s", res.err);
    cr_expect(strstr(res.err, "syntax error") != NULL, "%s", res.err);
    /* One mistake per line of output, each with the program's prefix. */
    int reports = 0;
    for (const char *l = res.err; (l = strstr(l, "retryd: ")) != NULL; l++)
        reports++;
    cr_expect_geq(reports, 7, "%s", res.err);
}

Test(config_errors, a_flood_of_mistakes_is_counted_not_cut_mid_line)
{
    /* 200 unknown keys: the first ones listed, the rest counted. */
    size_t cap = 200 * 32 + 16;
    char *text = malloc(cap);
    cr_assert(text != NULL);
    size_t used = (size_t)snprintf(text, cap, "[retryd]\n");
    for (int i = 0; i < 200; i++)
        used +=
            (size_t)snprintf(text + used, cap - used, "nonsense%d = 1\n", i);
    check_file(text);
    free(text);
    cr_expect_eq(res.exit_code, 78);
    cr_expect(at_line(2) != NULL, "%s", res.err);
    cr_expect(strstr(res.err, "more mistakes)") != NULL, "%s", res.err);
    cr_expect(at_line(201) == NULL, "the 200th mistake should be counted");
}
