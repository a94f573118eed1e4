/* SPDX-License-Identifier: MIT */
/*
 * The status page's renderer and history (daemon/prom/status_page.h) on
 * replies built here: the history keeps the last points in order, forgets
 * a retired upstream, starts afresh for a reused name, holds at most its
 * number of upstreams; rates come from the last interval; every name from
 * a process is escaped. The page in a browser against a real daemon is
 * tests/ops/status_page.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "status_page.h"

#define MAX_UP 80

/* A reply of @p n upstreams named by @p names, and what it points into. */
typedef struct fake {
    Retryd__StatsReply r;
    Retryd__UpstreamStats u[MAX_UP], *up[MAX_UP];
    Retryd__Params p[MAX_UP];
    Retryd__Counters c[MAX_UP];
    uint64_t denied[MAX_UP][9];
    char names[MAX_UP][32];
    Retryd__ProcessStats ps[2], *pp[2];
    Retryd__Counters pc[2];
} fake;

static void fake_init(fake *f, size_t n)
{
    memset(f, 0, sizeof(*f));
    retryd__stats_reply__init(&f->r);
    f->r.daemon_version = "9.9.9";
    for (size_t i = 0; i < n; i++) {
        retryd__upstream_stats__init(&f->u[i]);
        retryd__params__init(&f->p[i]);
        retryd__counters__init(&f->c[i]);
        snprintf(f->names[i], sizeof(f->names[i]), "u%zu", i);
        f->p[i].cap_micro = 1000000;
        f->c[i].n_denied = 9;
        f->c[i].denied = f->denied[i];
        f->u[i].name = f->names[i];
        f->u[i].slot_generation = 1;
        f->u[i].params = &f->p[i];
        f->u[i].counters = &f->c[i];
        f->up[i] = &f->u[i];
    }
    f->r.n_upstreams = n;
    f->r.upstreams = f->up;
}

/* The page of @p f with history @p h, NUL-terminated; free() it. */
static char *render(const fake *f, const status_history *h)
{
    char *body = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&body, &len);
    cr_assert(out != NULL);
    cr_assert_eq(status_page_render(out, &f->r, h, "127.0.0.1:9464"), 0);
    cr_assert_eq(fclose(out), 0);
    return body;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* The points of the first polyline of @p page. */
static int points(const char *page)
{
    const char *p = strstr(page, "<polyline points=\"");
    if (p == NULL)
        return 0;
    p += strlen("<polyline points=\"");
    int n = 1;
    for (; *p && *p != '"'; p++)
        n += *p == ' ';
    return n;
}

Test(status_page, history_keeps_the_last_points_in_order)
{
    fake f;
    fake_init(&f, 1);
    status_history *h = status_history_new();
    cr_assert(h != NULL);
    for (int i = 0; i < STATUS_HISTORY_POINTS + 50; i++) {
        /* The last STATUS_HISTORY_POINTS samples rise from empty to full. */
        int k = i - 50;
        f.u[0].balance_micro =
            k < 0 ? 1000000
                  : (uint64_t)k * 1000000 / (STATUS_HISTORY_POINTS - 1);
        status_history_add(h, &f.r, (uint64_t)(i + 1) * 1000000000u);
    }
    char *page = render(&f, h);
    char want[64];
    snprintf(want, sizeof(want), "data-points=\"%d\"", STATUS_HISTORY_POINTS);
    cr_expect(strstr(page, want) != NULL, "%s", page);
    cr_expect_eq(points(page), STATUS_HISTORY_POINTS);
    /* Oldest first: the line starts at the bottom (empty), ends at the top
     * (full). */
    cr_expect(strstr(page, "<polyline points=\"0,39.0 ") != NULL, "%s", page);
    cr_expect(strstr(page, " 299,1.0\"/>") != NULL, "%s", page);
    free(page);
    status_history_free(h);
}

Test(status_page, a_retired_upstream_is_forgotten_and_its_name_starts_afresh)
{
    fake f;
    fake_init(&f, 1);
    status_history *h = status_history_new();
    for (int i = 0; i < 5; i++)
        status_history_add(h, &f.r, (uint64_t)(i + 1) * 1000000000u);
    char *page = render(&f, h);
    cr_expect(strstr(page, "data-points=\"5\"") != NULL);
    free(page);

    f.r.n_upstreams = 0; /* retired */
    status_history_add(h, &f.r, 6000000000u);
    f.r.n_upstreams = 1;
    f.u[0].slot_generation = 2; /* the name again, in a reused slot */
    status_history_add(h, &f.r, 7000000000u);
    page = render(&f, h);
    cr_expect(strstr(page, "data-points=\"1\"") != NULL, "%s", page);
    free(page);
    status_history_free(h);
}

Test(status_page, upstreams_beyond_its_capacity_have_no_history)
{
    fake f;
    fake_init(&f, STATUS_HISTORY_UPSTREAMS + 1);
    status_history *h = status_history_new();
    status_history_add(h, &f.r, 1000000000u);
    status_history_add(h, &f.r, 2000000000u);
    char *page = render(&f, h);
    cr_expect_eq(count(page, "data-points=\"2\""), STATUS_HISTORY_UPSTREAMS);
    cr_expect_eq(count(page, "data-points=\"0\""), 1);
    cr_expect_eq(count(page, "<tr data-upstream="),
                 STATUS_HISTORY_UPSTREAMS + 1);
    free(page);
    status_history_free(h);
}

Test(status_page, rates_are_over_the_last_interval)
{
    fake f;
    fake_init(&f, 1);
    status_history *h = status_history_new();
    status_history_add(h, &f.r, 1000000000u);
    char *page = render(&f, h);
    cr_expect_eq(count(page, "<td class=\"n rate\">&#8211;</td>"), 4,
                 "one sample: no rate yet");
    free(page);
    f.c[0].deposits = 30;
    f.denied[0][2] = 4;
    f.denied[0][5] = 2;
    status_history_add(h, &f.r, 3000000000u); /* 2 s later */
    page = render(&f, h);
    cr_expect(strstr(page, "data-k=\"deposits\">30</td><td class=\"n "
                           "rate\">15.0</td>") != NULL,
              "%s", page);
    /* Denied/s: every reason together, 6 in 2 s. */
    cr_expect(strstr(page, "<td class=\"n rate\">3.0</td>") != NULL, "%s",
              page);
    free(page);
    status_history_free(h);
}

Test(status_page, names_from_processes_are_escaped)
{
    fake f;
    fake_init(&f, 1);
    f.u[0].name = "<&\"'>\x01\xc3\xa9";
    retryd__process_stats__init(&f.ps[0]);
    retryd__counters__init(&f.pc[0]);
    f.ps[0].program = "<script>";
    f.ps[0].counters = &f.pc[0];
    f.pp[0] = &f.ps[0];
    f.r.n_processes = 1;
    f.r.processes = f.pp;
    char *page = render(&f, NULL);
    cr_expect(strstr(page,
                     "<tr data-upstream=\"&lt;&amp;&quot;&#39;&gt;?\?\?\">"
                     "<th scope=\"row\">&lt;&amp;&quot;&#39;&gt;?\?\?</th>") !=
                  NULL,
              "%s", page);
    cr_expect(strstr(page, "&lt;script&gt;") != NULL, "%s", page);
    cr_expect(strstr(page, "<script") == NULL, "%s", page);
    cr_expect(strstr(page, "\x01") == NULL);
    free(page);
}

Test(status_page, an_empty_daemon_says_so)
{
    fake f;
    fake_init(&f, 0);
    char *page = render(&f, NULL);
    cr_expect(strstr(page, "No upstream is registered.") != NULL);
    cr_expect(strstr(page, "No process is attached.") != NULL);
    cr_expect(strstr(page, "<dd id=\"version\">9.9.9</dd>") != NULL, "%s",
              page);
    cr_expect(strstr(page, "</body></html>\n") != NULL);
    free(page);
}
