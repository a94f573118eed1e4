/* SPDX-License-Identifier: MIT */
/*
 * retrydctl top --batch against a real daemon: plain-text frames separated
 * by a blank line, the first with totals and a dash for every rate, the
 * next with the deposits a real client process made between the two as a
 * rate above zero, per upstream and per program; over-share denials in a
 * column of their own, apart from an empty bucket's; no daemon (or a daemon
 * that goes away) is exit 70 with the reason. In a terminal (a real
 * pseudo-terminal), the live ncurses screen draws the budget, quits on q,
 * and outlives a daemon that goes away, saying so.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "child.h"
#include "harness.h"
#include "run.h"

/* Floor 0: the balance moves only with the test's deposits. */
static const char *const base_config =
    "[upstream payments]\nratio = 0.5\nmin_retries_per_sec = 0\ncap = 1000\n";

#include "daemon_fixture.h"

TestSuite(top, .init = daemon_setup, .fini = daemon_teardown, .timeout = 90);

#define DASH "\u2014"
#define NAME_W 20 /* the width of top's first column */

/* A running retrydctl top and what it printed so far. */
typedef struct top_proc {
    pid_t pid;
    int out;
    char buf[1 << 16];
    size_t len;
    bool eof;
} top_proc;

static char *unconst(const char *s)
{
    return (char *)(uintptr_t)s;
}

static void top_start(top_proc *p, const char *delay, const char *iterations)
{
    char *argv[] = {unconst(RETRYDCTL_PATH),
                    unconst("top"),
                    unconst("--batch"),
                    unconst("--iterations"),
                    unconst(iterations),
                    unconst("--delay"),
                    unconst(delay),
                    unconst("--stats-socket"),
                    D.stats,
                    NULL};
    int fds[2];
    memset(p, 0, sizeof(*p));
    cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
    p->pid = fork();
    cr_assert(p->pid >= 0);
    if (p->pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    p->out = fds[0];
}

/* Reads what is there, waiting at most @p ms; false at EOF. */
static bool top_read(top_proc *p, int ms)
{
    struct pollfd pf = {.fd = p->out, .events = POLLIN};
    if (p->eof || poll(&pf, 1, ms) <= 0)
        return !p->eof;
    ssize_t n = read(p->out, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
    if (n <= 0)
        p->eof = true;
    else
        p->len += (size_t)n;
    p->buf[p->len] = '\0';
    return !p->eof;
}

/* Waits (at most 20 s) until top has printed @p needle. */
static void top_wait_for(top_proc *p, const char *needle)
{
    long long deadline = rd_now_ms() + 20000;
    while (strstr(p->buf, needle) == NULL && rd_now_ms() < deadline &&
           top_read(p, 100))
        ;
    cr_assert(strstr(p->buf, needle) != NULL, "no '%s' in %s", needle, p->buf);
}

/* Reads to EOF (at most 20 s) and reaps: its exit code. */
static int top_finish(top_proc *p)
{
    long long deadline = rd_now_ms() + 20000;
    while (rd_now_ms() < deadline && top_read(p, 100))
        ;
    close(p->out);
    return rd_reap(p->pid, 10000);
}

/* The line of @p frame that starts with @p key followed by a space. */
static const char *row(const char *frame, const char *key)
{
    size_t n = strlen(key);
    for (const char *l = frame; *l;) {
        if (strncmp(l, key, n) == 0 && l[n] == ' ')
            return l;
        const char *nl = strchr(l, '\n');
        if (nl == NULL)
            break;
        l = nl + 1;
    }
    return NULL;
}

/* The upstream row's DEPOSITS total and its DEP/s cell (a number, or the
 * dash). */
static void upstream_cells(const char *frame, const char *name,
                           unsigned long *deposits, char rate[32])
{
    const char *l = row(frame, name);
    cr_assert(l != NULL, "no row for %s in %s", name, frame);
    cr_assert_eq(sscanf(l, "%*s %*s %lu %31s", deposits, rate), 2, "%.200s", l);
}

Test(top, batch_frames_show_the_deposits_made_between_them_as_a_rate)
{
    child c;
    char pid_key[80], reply[64];
    start_client(&c);
    ask(&c, "open payments", "ok shared=1");
    cr_assert_eq(child_ask(&c, "pid", reply, sizeof(reply), ASK_MS), 0);
    snprintf(pid_key, sizeof(pid_key), "pid %s", reply + 4);

    /* Deposits land between the two samples unless this test is not
     * scheduled for the whole delay; the totals say whether they did, and
     * only a run where they did is judged (at most 5 runs). */
    for (int run = 0; run < 5; run++) {
        top_proc p;
        top_start(&p, "0.2", "2");
        top_wait_for(&p, "\n\n"); /* frame 1 is whole */
        long long deadline = rd_now_ms() + 20000;
        while (top_read(&p, 0) && rd_now_ms() < deadline)
            ask(&c, "deposit 20", "ok");
        cr_assert_eq(top_finish(&p), 0, "%s", p.buf);

        cr_assert(strchr(p.buf, '\x1b') == NULL, "escape codes in batch mode");
        char *sep = strstr(p.buf, "\n\n");
        cr_assert(sep != NULL);
        sep[1] = '\0';
        const char *f1 = p.buf, *f2 = sep + 2;
        cr_assert(strstr(f2, "\n\n") == NULL, "more than two frames: %s", f2);
        cr_assert(strncmp(f1, "retryd ", 7) == 0 &&
                      strncmp(f2, "retryd ", 7) == 0,
                  "%s\n--\n%s", f1, f2);

        unsigned long d1, d2;
        char r1[32], r2[32];
        upstream_cells(f1, "payments", &d1, r1);
        upstream_cells(f2, "payments", &d2, r2);
        cr_expect_str_eq(r1, DASH, "the first frame has no rate: %s", f1);
        if (d2 == d1)
            continue; /* no deposit between the samples: run again */
        cr_expect_gt(strtod(r2, NULL), 0, "%lu deposits, rate %s: %s", d2 - d1,
                     r2, f2);

        /* Per program: the client (its name once the daemon reports one,
         * else its pid) with a deposit rate too. */
        const char *pr = row(f2, pid_key);
        if (pr == NULL)
            pr = row(f2, "retryd-test-cli");
        cr_assert(pr != NULL, "no row for the client in %s", f2);
        unsigned procs;
        unsigned long total;
        char rate[32];
        cr_assert_eq(sscanf(pr + NAME_W, "%u %lu %31s", &procs, &total, rate),
                     3, "%s", pr);
        cr_expect_eq(procs, 1u);
        cr_expect_gt(strtod(rate, NULL), 0, "%s", pr);
        child_stop(&c);
        return;
    }
    cr_assert_fail("in 5 runs no deposit landed between top's two samples");
}

/* Cell @p k (0: the name) of the line of @p frame that starts with
 * @p key, into @p out. */
static void cell_of(const char *frame, const char *key, int k, char out[32])
{
    const char *l = row(frame, key);
    cr_assert(l != NULL, "no row for %s in %s", key, frame);
    const char *end = strchr(l, '\n');
    for (int i = 0; i <= k; i++) {
        while (*l == ' ')
            l++;
        size_t n = strcspn(l, " \n");
        cr_assert(n > 0 && (end == NULL || l < end), "no cell %d: %s", k, key);
        if (i == k)
            snprintf(out, 32, "%.*s", (int)n, l);
        l += n;
    }
}

/*
 * Over-share denials have their own column (OS, in the legend), apart
 * from an empty bucket's (BE), per upstream and per program. Ratio 1, no
 * floor, cap 20: the bucket runs short once (budget_exhausted, and shares
 * are kept from then on), one client deposits 10 and so claims them, and
 * the other's withdrawals between two frames find only tokens owed to
 * its neighbour. Both are the same program (the test client).
 */
Test(top, over_share_denials_have_their_own_column)
{
    child k, t;
    char reply[64];
    start_client(&k);
    start_client(&t);
    ask(&k, "open fair 1 0 20", "ok shared=1");
    ask(&t, "open fair 1 0 20", "ok shared=1");
    ask(&t, "take 1", "granted 0 budget 1 share 0");
    ask(&k, "deposit 10", "ok");
    ask(&t, "take 1", "granted 0 budget 0 share 1");
    for (int run = 0; run < 5; run++) {
        top_proc p;
        top_start(&p, "0.2", "2");
        top_wait_for(&p, "\n\n");
        long long deadline = rd_now_ms() + 20000;
        while (top_read(&p, 0) && rd_now_ms() < deadline)
            cr_assert_eq(child_ask(&t, "take 5", reply, sizeof(reply), ASK_MS),
                         0);
        cr_assert_eq(top_finish(&p), 0, "%s", p.buf);
        char *sep = strstr(p.buf, "\n\n");
        cr_assert(sep != NULL);
        sep[1] = '\0';
        const char *f1 = p.buf, *f2 = sep + 2;
        cr_expect(strstr(f1, " BE=budget_exhausted ") != NULL, "%s", f1);
        cr_expect(strstr(f1, " OS=over_share") != NULL, "%s", f1);
        /* UPSTREAM BALANCE/CAP DEPOSITS DEP/s RETRY/s MA BE BNR RAD RD D PF
         * SNR OS AMBIG/s BORROW/s: OS is cell 13, BE cell 6. */
        char os[32], be[32], title[32];
        cell_of(f2, "UPSTREAM", 13, title);
        cr_expect_str_eq(title, "OS", "%s", f2);
        cell_of(f2, "fair", 13, os);
        cell_of(f2, "fair", 6, be);
        if (strcmp(os, "0.0") == 0)
            continue; /* no withdrawal between the samples: run again */
        cr_expect_gt(strtod(os, NULL), 0, "%s", f2);
        cr_expect_str_eq(be, "0.0", "no empty bucket in the interval: %s", f2);
        /* PROGRAM PROCS DEPOSITS DEP/s RETRY/s BORROW/s DENIED/s OS/s */
        cell_of(f2, "PROGRAM", 7, title);
        cr_expect_str_eq(title, "OS/s", "%s", f2);
        cell_of(f2, "retryd-test-cli", 7, os);
        cr_expect_gt(strtod(os, NULL), 0, "%s", f2);
        child_stop(&k), child_stop(&t);
        return;
    }
    cr_assert_fail("in 5 runs no withdrawal landed between top's samples");
}

Test(top, no_daemon_is_exit_70_with_the_reason)
{
    rd_daemon_stop(&D, SIGTERM);
    cr_assert_eq(rd_ctl(&D, &res, "top", "--batch", "--iterations", "2",
                        "--delay", "0.2", NULL),
                 70);
    cr_expect_eq(res.out_len, 0u, "%s", res.out);
    cr_expect(strstr(res.err, "retrydctl top: ") != NULL, "%s", res.err);
    cr_expect(strstr(res.err, D.stats) != NULL, "names the socket: %s",
              res.err);
}

Test(top, a_daemon_that_goes_away_between_frames_is_exit_70)
{
    top_proc p;
    top_start(&p, "0.5", "3");
    top_wait_for(&p, "\n\n");
    rd_daemon_stop(&D, SIGTERM);
    cr_expect_eq(top_finish(&p), 70, "%s", p.buf);
}

Test(top, not_a_terminal_means_batch)
{
    /* Without --batch, stdout a pipe: one plain frame, no escape codes. */
    cr_assert_eq(rd_ctl(&D, &res, "top", "-n", "1", NULL), 0, "%s", res.err);
    cr_expect(strncmp(res.out, "retryd ", 7) == 0, "%s", res.out);
    cr_expect(strchr(res.out, '\x1b') == NULL);
    cr_expect(strstr(res.out, "\n\n") == NULL, "one frame, no separator");
    cr_expect(row(res.out, "payments") != NULL, "%s", res.out);
}

/* --- the live screen, in a real terminal (a pseudo-terminal) ------------- */

/* retrydctl top without --batch on a pty of 40x160, TERM=xterm: the
 * interactive ncurses screen. Its output goes to p->out (the master). */
static void top_start_tty(top_proc *p)
{
    char *argv[] = {unconst(RETRYDCTL_PATH),
                    unconst("top"),
                    unconst("--delay"),
                    unconst("0.2"),
                    unconst("--stats-socket"),
                    D.stats,
                    NULL};
    struct winsize ws = {.ws_row = 40, .ws_col = 160};
    memset(p, 0, sizeof(*p));
    p->pid = forkpty(&p->out, NULL, NULL, &ws);
    cr_assert(p->pid >= 0, "forkpty: %s", strerror(errno));
    if (p->pid == 0) {
        setenv("TERM", "xterm", 1);
        execv(argv[0], argv);
        _exit(127);
    }
}

/* Sends @p key to the screen, then reads to its exit (at most 20 s): its
 * exit code. A pty master reports EIO once the child has gone. */
static int top_quit_tty(top_proc *p, char key)
{
    cr_assert_eq(write(p->out, &key, 1), 1);
    return top_finish(p);
}

Test(top, the_live_screen_draws_the_budget_and_quits_on_q)
{
    top_proc p;
    top_start_tty(&p);
    top_wait_for(&p, "UPSTREAM");
    top_wait_for(&p, "payments");
    cr_expect(strchr(p.buf, '\x1b') != NULL, "a terminal gets escape codes");
    cr_expect_eq(top_quit_tty(&p, 'q'), 0, "%s", p.buf);
}

Test(top, the_live_screen_outlives_the_daemon_and_says_so)
{
    top_proc p;
    top_start_tty(&p);
    top_wait_for(&p, "payments");
    rd_daemon_stop(&D, SIGTERM);
    /* It keeps running and says why the numbers stopped. */
    top_wait_for(&p, "no answer from the daemon");
    cr_expect(waitpid(p.pid, NULL, WNOHANG) == 0, "top exited: %s", p.buf);
    cr_expect_eq(top_quit_tty(&p, 'q'), 0, "%s", p.buf);
}
