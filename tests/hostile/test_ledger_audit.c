/* SPDX-License-Identifier: MIT */
/*
 * The ledger audit (docs/segment.md, "The ledger audit"; issue 23's fifth
 * attack), with a real daemon and real processes: a peer that writes a
 * balance it never earned, one that holds a balance at the cap while an
 * honest process spends it, and one that sets an upstream's refill stamp
 * back and claims the refill; each is found at the next heartbeats,
 * counted, named in the stats and the log, and what the balance still
 * holds of it is taken back. Honest traffic (processes depositing and
 * spending on a floor, under fair shares, one killed midway) is found
 * guilty of nothing.
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "child.h"
#include "harness.h"
#include "hostile.h"
#include "retryd/retryd.h"
#include "shared/segment.h"

/* pot and held: ratio 1, no floor, so every token is a deposit's. drip: a
 * floor of one token a second and nothing else, first come (under fair
 * shares the daemon claims the floor while shares are kept, and a
 * process's withdrawal would not). busy: all of it at once, for the
 * honest run. */
static const char *const base_config =
    "[upstream pot]\nratio = 1\nmin_retries_per_sec = 0\ncap = 1000\n"
    "[upstream held]\nratio = 1\nmin_retries_per_sec = 0\ncap = 1000\n"
    "[upstream drip]\nratio = 0\nmin_retries_per_sec = 1\ncap = 1000\n"
    "fair_shares = off\n"
    "[upstream busy]\nratio = 0.5\nmin_retries_per_sec = 50\ncap = 40\n";

#include "daemon_fixture.h"
#include "segment_map.h"

TestSuite(ledger_audit, .init = daemon_setup, .fini = daemon_teardown,
          .timeout = 120);

#define NS_PER_S 1000000000ull
#define BOUND_MS 10000

/* Write @p tokens as the balance of @p s, keeping its generation: what a
 * peer with the mapping can always do. */
static void write_balance(seg_upstream *s, double tokens)
{
    uint64_t w = atomic_load(&s->tokens);
    atomic_store(&s->tokens,
                 seg_token_word(seg_token_generation(w),
                                (uint64_t)(tokens * (double)SEG_MICRO)));
}

/* The audit's last finding, from the stats just read. */
static const char *last_finding(void)
{
    static char text[512];
    const char *at = strstr(res.out, "\"last_finding\":\"");
    cr_assert(at != NULL, "no last_finding in %s", res.out);
    at += strlen("\"last_finding\":\"");
    size_t n = strcspn(at, "\"");
    cr_assert(n < sizeof(text));
    memcpy(text, at, n);
    text[n] = '\0';
    return text;
}

/* What the audit found unexplained, in tokens: taken back, and spent. */
static double taken_back(void)
{
    return health("unexplained_removed_micro") / 1e6;
}

static double written_off(void)
{
    return health("unexplained_spent_micro") / 1e6;
}

/* The heartbeat stamp in the header: the daemon audits right after it. */
static uint64_t heartbeat(const mapped *m)
{
    return atomic_load(&m->v.hdr->heartbeat_ns);
}

typedef struct beat_after {
    const mapped *m;
    uint64_t seen;
} beat_after;

static bool beat_moved(void *arg)
{
    beat_after *b = arg;
    return heartbeat(b->m) != b->seen;
}

/* Wait for the next heartbeat; then about a second passes before the
 * one after it. */
static void wait_heartbeat(const mapped *m)
{
    beat_after b = {m, heartbeat(m)};
    cr_assert(rd_wait_until(beat_moved, &b, BOUND_MS), "no heartbeat");
}

/* What @p c was granted of @p n withdrawals. */
static long granted_of(child *c, long n)
{
    char cmd[32], reply[128];
    long g, d;
    snprintf(cmd, sizeof(cmd), "withdraw %ld", n);
    cr_assert_eq(child_ask(c, cmd, reply, sizeof(reply), ASK_MS), 0);
    cr_assert_eq(sscanf(reply, "granted %ld denied %ld", &g, &d), 2, "%s",
                 reply);
    return g;
}

/* After a set-back was undone: @p c's next withdrawals get what a floor of
 * one token a second paid since @p start_ns (and a token of rounding), not
 * a cap. */
static void expect_only_the_floor_since(child *c, uint64_t start_ns)
{
    long g = granted_of(c, 1000);
    double since = (double)(rd_now_ns() - start_ns) / 1e9;
    cr_expect_leq((double)g, since + 2, "granted %ld after %.1f s", g, since);
}

/*
 * A peer writes 990 tokens into a balance that honestly holds 10: the
 * audit finds the excess at two heartbeats in a row, takes all of it
 * back (nobody spent it), and the balance is again what the deposits
 * explain, to the micro-token.
 */
Test(ledger_audit, a_balance_nobody_earned_is_taken_back)
{
    child c;
    start_client(&c);
    ask(&c, "open pot", "ok shared=1");
    ask(&c, "deposit 10", "ok");
    cr_assert_eq(stat_of("pot", "balance"), 10.0);
    mapped m;
    map_segment(&m);
    write_balance(slot_named(&m, "pot"), 1000);
    wait_health("balance_unexplained", 1);
    cr_expect_eq(stat_of("pot", "balance"), 10.0, "the forged tokens stayed");
    cr_expect_eq(taken_back(), 990.0);
    cr_expect_eq(written_off(), 0.0);
    const char *f = last_finding();
    cr_expect(strstr(f, "upstream pot: 990.000000 tokens in its balance that "
                        "no ledger explains") != NULL,
              "%s", f);
    cr_expect(strstr(daemon_log(), "ledger audit: upstream pot") != NULL);
    /* Honest traffic afterwards is not taken for more of the same. */
    ask(&c, "deposit 5", "ok");
    ask(&c, "withdraw 3", "granted 3 denied 0");
    wait_heartbeat(&m);
    wait_heartbeat(&m);
    cr_expect_eq(health("balance_unexplained"), 1.0);
    cr_expect_eq(stat_of("pot", "balance"), 12.0);
    munmap(m.map, m.size);
    child_stop(&c);
}

typedef struct hold_board {
    _Atomic int stop;
    _Atomic long writes;
} hold_board;

/* The attacker: write the cap into the balance, again and again. */
static void hold_at_cap(hold_board *b)
{
    mapped m;
    seg_upstream *s = try_map_segment(&m) ? find_slot(&m, "held") : NULL;
    if (s == NULL)
        _exit(1);
    while (!atomic_load(&b->stop)) {
        write_balance(s, 1000);
        atomic_fetch_add(&b->writes, 1);
        usleep(1000);
    }
    _exit(0);
}

/*
 * The attack: a peer holds a balance at the cap while an honest
 * process spends (it earns 10 tokens, and gets far more). A writer with
 * the mapping can always write; what the audit owes is to see it: it is
 * found at every heartbeat while it lasts, the tokens nobody earned are
 * counted (taken back, or spent already: together at least what the
 * honest process got beyond what it earned, less the tolerance of one
 * audit), and once the peer stops, the balance is what the ledgers
 * explain again within two heartbeats instead of a cap nobody paid for.
 */
Test(ledger_audit, a_balance_held_at_the_cap_is_found_at_every_heartbeat)
{
    hold_board *b = rd_shared_board(sizeof(*b));
    cr_assert(b != NULL);
    child c;
    start_client(&c);
    ask(&c, "open held", "ok shared=1");
    ask(&c, "deposit 10", "ok");
    pid_t pid = rd_fork_attacker();
    cr_assert(pid >= 0);
    if (pid == 0)
        hold_at_cap(b);
    mapped m;
    map_segment(&m);
    long granted = 0;
    /* Three heartbeats of the attack, spending all the while. */
    for (int beat = 0; beat < 3; beat++) {
        beat_after after = {&m, heartbeat(&m)};
        while (!beat_moved(&after))
            granted += granted_of(&c, 50);
    }
    double found_during = health("balance_unexplained");
    atomic_store(&b->stop, 1);
    cr_assert_eq(rd_reap(pid, BOUND_MS), 0);
    wait_heartbeat(&m);
    wait_heartbeat(&m);
    wait_heartbeat(&m);
    double forged = taken_back() + written_off();
    double deposits = stat_of("held", "deposits");
    double grants = number_in_res("\"name\":\"held\"", "retries_granted");
    double balance = number_in_res("\"name\":\"held\"", "balance");
    fprintf(stderr,
            "ledger audit: a balance held at the cap (%ld writes): the "
            "honest process got %ld retries for %g tokens earned; found %g "
            "times, %g tokens unexplained (%g taken back, %g spent); balance "
            "after %g\n",
            atomic_load(&b->writes), granted, deposits, found_during, forged,
            taken_back(), written_off(), balance);
    cr_expect_geq(found_during, 2, "found at each heartbeat of the attack");
    cr_expect_gt(granted, 10, "the attack worked while it lasted");
    cr_expect_geq(forged, (double)granted - deposits - 2 * 4,
                  "what it got beyond its earnings is counted");
    /* The host's books close again: the balance is what deposits, grants
     * and what the audit wrote off explain, but for less than the audit's
     * tolerance (two tokens and four deposits) that it leaves alone. */
    double discarded = number_in_res("\"name\":\"held\"", "discarded_tokens");
    double off = balance - (deposits - grants - discarded + written_off());
    cr_expect(off > -1e-6 && off < 6 + 1e-6,
              "balance %g, deposits %g, grants %g, discarded %g, written off "
              "%g",
              balance, deposits, grants, discarded, written_off());
    cr_expect_lt(balance, 20.0, "the cap the peer wrote is gone");
    cr_expect(strstr(last_finding(), "upstream held:") != NULL);
    munmap(m.map, m.size);
    child_stop(&c);
}

/* How far back a stamp can be set from @p stamp: a million seconds, or
 * to a second after boot where the monotonic clock has not run that long
 * (it counts from boot: going below zero would be a stamp in the future,
 * which the policing brings back to now instead). */
static uint64_t setback_ns(uint64_t stamp)
{
    uint64_t want = 1000000ull * NS_PER_S;
    return stamp > want + NS_PER_S ? want : stamp - NS_PER_S;
}

/* The tokens a floor of 1/s pays for a set-back of @p ns, under the cap
 * of 1000. */
static double setback_pays(uint64_t ns)
{
    double t = (double)ns / (double)NS_PER_S;
    return t < 1000 ? t : 1000;
}

/* Skip where the clock has not run long enough for a set-back to pay
 * clearly more than the floor's tolerance. */
static void need_uptime(const mapped *m)
{
    uint64_t hb = atomic_load(&m->v.hdr->heartbeat_ns);
    if (hb < 60 * NS_PER_S)
        cr_skip_test("the monotonic clock has run %.0f s (boot); a set-back "
                     "needs a minute of it to pay clearly",
                     (double)hb / 1e9);
}

/* The peer that sets the refill stamp back: it attaches like any
 * process, moves the stamp of "drip" back @p seconds through its mapping,
 * and claims the refill with its own next withdrawals. */
typedef struct drip_board {
    _Atomic uint64_t setback;
    _Atomic int go;
    _Atomic long granted;
    _Atomic int done;
} drip_board;

static void set_back_and_claim(drip_board *b)
{
    retryd_host_opts o = {.sz = sizeof(o), .control_socket = D.control};
    retryd_host *h;
    retryd_upstream *up;
    if (retryd_host_open(&o, &h) < 0 || !retryd_host_attached(h) ||
        retryd_upstream_open(h, "drip", NULL, &up) < 0)
        _exit(1);
    mapped m;
    seg_upstream *s = try_map_segment(&m) ? find_slot(&m, "drip") : NULL;
    if (s == NULL)
        _exit(1);
    while (!atomic_load(&b->go))
        usleep(1000);
    uint64_t back = setback_ns(atomic_load(&s->last_refill_ns));
    atomic_store(&b->setback, back);
    atomic_fetch_sub(&s->last_refill_ns, back);
    long g = 0;
    for (int i = 0; i < 5; i++)
        g += retryd_upstream_withdraw(up) == 0;
    atomic_store(&b->granted, g);
    atomic_store(&b->done, 1);
    while (atomic_load(&b->go) != 2)
        usleep(1000);
    retryd_host_close(h);
    _exit(0);
}

static bool drip_done(void *arg)
{
    return atomic_load(&((drip_board *)arg)->done) != 0;
}

/*
 * The stamp of a floor of one token a second set back a million seconds
 * (or to boot), and the refill claimed at once: up to the cap (1000)
 * lands, the claimer spends 5 of it. At the next heartbeat the audit
 * finds refills far beyond what the floor pays for the time the stamp
 * advanced, names the process slot that claimed them (its pid), and
 * takes back what the balance still holds; what the honest client then
 * gets is what the floor paid since, not the cap.
 */
Test(ledger_audit, a_refill_stamp_set_back_is_found_and_its_refill_taken_back)
{
    drip_board *b = rd_shared_board(sizeof(*b));
    cr_assert(b != NULL);
    child c;
    start_client(&c);
    ask(&c, "open drip", "ok shared=1");
    uint64_t first = rd_now_ns(); /* the last claim before the set-back */
    (void)granted_of(&c, 5);
    mapped m;
    map_segment(&m);
    need_uptime(&m);
    pid_t pid = rd_fork_attacker();
    cr_assert(pid >= 0);
    if (pid == 0)
        set_back_and_claim(b);
    /* Right after a heartbeat, so that the set-back and the claim (a few
     * microseconds) fall between two audits. */
    wait_heartbeat(&m);
    uint64_t start = rd_now_ns();
    atomic_store(&b->go, 1);
    cr_assert(rd_wait_until(drip_done, b, BOUND_MS));
    cr_expect_eq(atomic_load(&b->granted), 5, "the claim worked");
    wait_health("refill_unexplained", 1);
    double back = taken_back();
    const char *f = last_finding();
    fprintf(stderr, "ledger audit, the finding: %s\n", f);
    char who[64];
    snprintf(who, sizeof(who), "(pid %d, program ", (int)pid);
    cr_expect(strstr(f, "upstream drip: ") != NULL &&
                  strstr(f, "tokens refilled beyond what a floor of "
                            "1.000000/s pays") != NULL &&
                  strstr(f, who) != NULL,
              "the claimer is named: %s", f);
    /* What landed (the set-back's pay, and the floor's since the last
     * claim), less the 5 spent; what the floor paid for the time is not
     * taken back. */
    double landed = setback_pays(atomic_load(&b->setback));
    double since = (double)(rd_now_ns() - first) / 1e9;
    cr_expect(back >= landed - 5 - since - 2 && back <= landed - 5 + since,
              "taken back %g of %g landed, %.1f s", back, landed, since);
    expect_only_the_floor_since(&c, start);
    atomic_store(&b->go, 2);
    cr_assert_eq(rd_reap(pid, BOUND_MS), 0);
    munmap(m.map, m.size);
    child_stop(&c);
}

/* A stamp set back with nobody claiming before the next audit: put
 * forward again, so the next claim pays only the floor's time. */
Test(ledger_audit, a_refill_stamp_set_back_is_put_forward)
{
    child c;
    start_client(&c);
    ask(&c, "open drip", "ok shared=1");
    (void)granted_of(&c, 5);
    mapped m;
    map_segment(&m);
    need_uptime(&m);
    seg_upstream *s = slot_named(&m, "drip");
    wait_heartbeat(&m);
    uint64_t start = rd_now_ns();
    uint64_t before = atomic_load(&s->last_refill_ns);
    atomic_fetch_sub(&s->last_refill_ns, setback_ns(before));
    wait_health("refill_unexplained", 1);
    cr_expect_geq(atomic_load(&s->last_refill_ns), before);
    cr_expect(strstr(last_finding(),
                     "upstream drip: its refill stamp was set back ") != NULL,
              "%s", last_finding());
    expect_only_the_floor_since(&c, start);
    munmap(m.map, m.size);
    child_stop(&c);
}

/* A process rewrites its own ledger (a count back to zero): named, and
 * counted. */
Test(ledger_audit, a_ledger_that_goes_back_is_named)
{
    child c;
    start_client(&c);
    ask(&c, "open pot", "ok shared=1");
    ask(&c, "deposit 20", "ok");
    ask(&c, "withdraw 5", "granted 5 denied 0");
    char reply[64];
    cr_assert_eq(child_ask(&c, "pid", reply, sizeof(reply), ASK_MS), 0);
    long pid = 0;
    cr_assert_eq(sscanf(reply, "pid %ld", &pid), 1);
    mapped m;
    map_segment(&m);
    wait_heartbeat(&m);
    wait_heartbeat(&m); /* the audit has seen the counts */
    bool wrote = false;
    for (uint32_t i = 0; i < m.v.process_capacity && !wrote; i++) {
        seg_process *p = &m.v.processes[i];
        if (atomic_load(&p->pid) != (uint64_t)pid)
            continue;
        for (int lane = 0; lane < SEG_PROC_LANES; lane++)
            for (int e = 0; e < SEG_PROC_ENTRIES; e++)
                atomic_store(&p->counters[lane][e][SEG_C_GRANTED], 0);
        wrote = true;
    }
    cr_assert(wrote, "no process slot of pid %ld", pid);
    wait_health("ledger_rewritten", 1);
    char who[64];
    snprintf(who, sizeof(who), "(pid %ld, program ", pid);
    cr_expect(strstr(last_finding(), who) != NULL &&
                  strstr(last_finding(), "a count of its ledger went back"),
              "%s", last_finding());
    cr_expect_eq(health("balance_unexplained"), 0.0,
                 "a rewritten ledger is not taken for a forged balance");
    munmap(m.map, m.size);
    child_stop(&c);
}

/* --- honest traffic ------------------------------------------------------- */

#define HONEST_PROCS 4
#define HONEST_THREADS 2

typedef struct honest_board {
    _Atomic int stop;
    _Atomic int ready;
} honest_board;

static honest_board *HB;

static void *honest_thread(void *arg)
{
    retryd_upstream *up = arg;
    unsigned seed = (unsigned)(uintptr_t)pthread_self();
    while (!atomic_load(&HB->stop)) {
        if (rand_r(&seed) % 3 != 0)
            (void)retryd_upstream_deposit(up);
        else
            (void)retryd_upstream_withdraw(up);
        double b;
        if (rand_r(&seed) % 64 == 0)
            (void)retryd_upstream_balance(up, &b); /* claims the floor */
    }
    return NULL;
}

static void honest_process(void)
{
    retryd_host_opts o = {.sz = sizeof(o), .control_socket = D.control};
    retryd_host *h;
    retryd_upstream *up;
    if (retryd_host_open(&o, &h) < 0 || !retryd_host_attached(h) ||
        retryd_upstream_open(h, "busy", NULL, &up) < 0)
        _exit(1);
    atomic_fetch_add(&HB->ready, 1);
    pthread_t t[HONEST_THREADS];
    for (int i = 0; i < HONEST_THREADS; i++)
        if (pthread_create(&t[i], NULL, honest_thread, up) != 0)
            _exit(2);
    for (int i = 0; i < HONEST_THREADS; i++)
        pthread_join(t[i], NULL);
    retryd_host_close(h);
    _exit(0);
}

static bool all_ready(void *arg)
{
    return atomic_load(&HB->ready) == *(int *)arg;
}

/*
 * Honest traffic for five heartbeats: 4 processes x 2 threads depositing,
 * spending and claiming a floor as fast as they can (the bucket short,
 * fair shares kept, takes refused and giving back, deposits overshooting
 * the cap), one process killed -9 midway (its counts folded into the
 * upstream) and another started. The audit finds nothing: no balance,
 * refill or ledger it cannot explain.
 */
Test(ledger_audit, honest_traffic_is_found_guilty_of_nothing)
{
    HB = rd_shared_board(sizeof(*HB));
    cr_assert(HB != NULL);
    pid_t pids[HONEST_PROCS + 1];
    for (int i = 0; i < HONEST_PROCS; i++) {
        pids[i] = rd_fork_attacker();
        cr_assert(pids[i] >= 0);
        if (pids[i] == 0)
            honest_process();
    }
    int want = HONEST_PROCS;
    cr_assert(rd_wait_until(all_ready, &want, BOUND_MS));
    mapped m;
    map_segment(&m);
    for (int beat = 0; beat < 5; beat++) {
        wait_heartbeat(&m);
        if (beat == 2) {
            kill(pids[0], SIGKILL);
            cr_assert_eq(rd_reap(pids[0], BOUND_MS), -SIGKILL);
            pids[0] = rd_fork_attacker();
            cr_assert(pids[0] >= 0);
            if (pids[0] == 0)
                honest_process();
        }
    }
    atomic_store(&HB->stop, 1);
    for (int i = 0; i < HONEST_PROCS; i++)
        cr_assert_eq(rd_reap(pids[i], BOUND_MS), 0);
    wait_heartbeat(&m);
    wait_heartbeat(&m);
    double checks = health("checks");
    double deposits = stat_of("busy", "deposits");
    double granted = number_in_res("\"name\":\"busy\"", "retries_granted");
    fprintf(stderr,
            "ledger audit: honest traffic, %g deposits and %g grants over "
            "%g checks: balance_unexplained %g, refill_unexplained %g, "
            "ledger_rewritten %g\n",
            deposits, granted, checks,
            number_in_res("\"segment_health\"", "balance_unexplained"),
            number_in_res("\"segment_health\"", "refill_unexplained"),
            number_in_res("\"segment_health\"", "ledger_rewritten"));
    cr_expect_gt(deposits, 10000, "the traffic ran");
    cr_expect_eq(number_in_res("\"segment_health\"", "balance_unexplained"), 0);
    cr_expect_eq(number_in_res("\"segment_health\"", "refill_unexplained"), 0);
    cr_expect_eq(number_in_res("\"segment_health\"", "ledger_rewritten"), 0);
    cr_expect_eq(taken_back(), 0.0);
    munmap(m.map, m.size);
}
