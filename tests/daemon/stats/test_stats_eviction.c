/* SPDX-License-Identifier: MIT */
/*
 * The eviction order of the stats thread's connections (daemon.h,
 * daemon_evict_before()), on the stats socket and on the /metrics
 * endpoint (which the stats thread serves too): when every place is
 * taken (on /metrics, also when the newcomer's address holds its share),
 * a newcomer closes the connection still sending its request that was
 * accepted first; only when none is still sending, the oldest of those
 * being answered.
 *
 * Each test fills the places with connections of known ages and states,
 * against a real retryd: they are opened one after another (the listen
 * queue is first in, first out, and each one being answered is seen
 * answered before the next is opened), so the order they were opened in
 * is the order they were accepted in. Then it adds newcomers and asserts
 * which one each closed: the first hang-up seen within EVICT_BOUND_MS is
 * that one, no other connection is hung up then, and it came before that
 * connection's own deadline (an eviction, not an expiry). On /metrics, a
 * connection being answered that the daemon shuts shows no hang-up until
 * the bytes already sent are read, so those are read to the end last:
 * each must get its whole body.
 *
 * A connection stays "being answered" only while its reply does not fit
 * in the kernel's buffers, so the daemon serves UPSTREAMS upstreams with
 * the longest names: a stats reply of ~590 KB, where a Unix socket takes
 * ~220 KB from a peer that does not read, and a /metrics body of ~12 MB,
 * where loopback TCP takes a few MB.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "child.h"
#include "harness.h"
#include "hostile.h"
#include "metrics_http.h"
#include "run.h"

static const char *const base_config = "";
#include "daemon_fixture.h"

/* Upstreams the daemon serves (upstream_capacity's default), each named
 * with SEG_NAME_MAX bytes: what makes replies bigger than socket buffers. */
#define UPSTREAMS 4096
#define NAME_PAD 89 /* "u0000-" and 89 bytes: 95, SEG_NAME_MAX */
/* The daemon's places (daemon/stats/stats.h, daemon/stats/metrics.h), and
 * the deadlines this test configures: long enough that filling every place
 * on a slow (sanitized, busy) machine never outlasts the first one opened,
 * so what closes a connection here is an eviction, not its deadline. */
#define STATS_PLACES 64        /* STATS_CONNECTIONS_MAX */
#define METRICS_PLACES 32      /* METRICS_CONNECTIONS_MAX */
#define METRICS_PER_ADDRESS 16 /* METRICS_PER_IP_MAX */
#define STATS_REQUEST_MS 30000
#define STATS_REPLY_MS 120000
#define METRICS_REQUEST_MS 30000
#define METRICS_REPLY_MS 120000
/* Smallest replies that no socket buffer holds whole here: a Unix socket
 * takes ~220 KB; loopback TCP at most tcp_wmem's 4 MB and a window. */
#define STATS_REPLY_MIN (512u * 1024)
#define METRICS_BODY_MIN (8u * 1024 * 1024)
/* An eviction is done when the newcomer is accepted, a loop turn later:
 * the bound for waiting for it, far below every deadline above. */
#define EVICT_BOUND_MS 10000

/* --- the daemon ---------------------------------------------------------- */

static int port; /* of /metrics */

/* The last number of a /proc/sys file ("4096 16384 4194304": the max), or
 * -1. */
static long sysctl_last(const char *path)
{
    long v = -1, x;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fscanf(f, "%ld", &x) == 1)
        v = x;
    fclose(f);
    return v;
}

/* The tests need replies that the daemon's socket buffers cannot hold
 * whole: a host whose default send buffers are larger than the replies
 * (tuned sysctls) cannot run them, and is told so instead of failing. */
static void skip_unless_replies_outgrow_buffers(void)
{
    long unix_snd = sysctl_last("/proc/sys/net/core/wmem_default");
    long tcp_snd = sysctl_last("/proc/sys/net/ipv4/tcp_wmem");
    if (unix_snd > (long)STATS_REPLY_MIN / 2 ||
        tcp_snd > (long)METRICS_BODY_MIN / 2)
        cr_skip_test("socket send buffers too large for replies to stay "
                     "unfinished: net.core.wmem_default %ld, tcp_wmem max "
                     "%ld (need at most %u and %u)",
                     unix_snd, tcp_snd, STATS_REPLY_MIN / 2,
                     METRICS_BODY_MIN / 2);
}

static void setup(void)
{
    skip_unless_replies_outgrow_buffers();
    static const char pad[] = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                              "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    _Static_assert(sizeof(pad) - 1 == NAME_PAD, "names of SEG_NAME_MAX");
    size_t cap = 128 + (size_t)UPSTREAMS * 128, n;
    char *extra = malloc(cap);
    cr_assert(extra != NULL);
    port = rd_free_port(AF_INET);
    cr_assert_gt(port, 0, "no free loopback port");
    n = (size_t)snprintf(extra, cap,
                         "upstream_capacity = %d\n"
                         "metrics_listen = 127.0.0.1:%d\n"
                         "stats_request_timeout_ms = %d\n"
                         "stats_reply_timeout_ms = %d\n"
                         "metrics_request_timeout_ms = %d\n"
                         "metrics_reply_timeout_ms = %d\n",
                         UPSTREAMS, port, STATS_REQUEST_MS, STATS_REPLY_MS,
                         METRICS_REQUEST_MS, METRICS_REPLY_MS);
    for (int i = 0; i < UPSTREAMS; i++)
        n += (size_t)snprintf(extra + n, cap - n,
                              "[upstream u%04d-%s]\nratio = 0.1\n", i, pad);
    cr_assert_lt(n, cap);
    cr_assert_eq(rd_daemon_init(&D, NULL), 0);
    /* At info: debug would log each stats connection. */
    cr_assert_eq(rd_write_config_at(D.config, D.runtime, "info", extra), 0);
    free(extra);
    int rc = rd_daemon_start(&D);
    cr_assert_eq(rc, 0, "daemon did not start (%s): %s", strerror(-rc),
                 daemon_log());
}

/* --- the places: connections of known age and state ---------------------- */

#define MAX_PLACES 72

typedef struct place {
    int fd;             /* -1 once closed by the test */
    bool answered;      /* its request is in, its reply under way */
    uint64_t opened_ns; /* just before its connect */
    int deadline_ms;    /* the daemon's own deadline for it, from then */
    size_t body_left;   /* /metrics: body bytes the reply still owes */
} place;

static place T[MAX_PLACES];
static int nt; /* places opened so far, oldest first */

/* Record connection @p fd, opened at @p t0, as the newest. */
static void add(int fd, uint64_t t0, bool answered, int deadline_ms,
                size_t body_left)
{
    cr_assert_lt(nt, MAX_PLACES);
    T[nt++] = (place){.fd = fd,
                      .answered = answered,
                      .opened_ns = t0,
                      .deadline_ms = deadline_ms,
                      .body_left = body_left};
}

static const char *state(int i)
{
    return T[i].answered ? "being answered" : "still sending";
}

/* Poll every place still open for a hang-up (the daemon closed its end)
 * for at most @p ms; the ones hung up go to @p which, and are listed in
 * @p list. How many. A connection being answered has its reply's bytes
 * to read, so only a hang-up says it was closed, not readability. */
static int hung_up(int ms, int *which, char *list, size_t len)
{
    struct pollfd p[MAX_PLACES];
    int n = 0;
    for (int i = 0; i < nt; i++)
        p[i] = (struct pollfd){.fd = T[i].fd, .events = POLLRDHUP};
    cr_assert_geq(poll(p, (nfds_t)nt, ms), 0, "poll: %s", strerror(errno));
    list[0] = '\0';
    for (int i = 0; i < nt; i++) {
        if (T[i].fd < 0 || !(p[i].revents & (POLLRDHUP | POLLHUP | POLLERR)))
            continue;
        size_t at = strlen(list);
        snprintf(list + at, len - at, "%s#%d (%s)", n ? ", " : "", i, state(i));
        which[n++] = i;
    }
    return n;
}

/* Every place opened so far is still held: none hung up. */
static void expect_all_held(const char *what)
{
    char list[2048];
    int which[MAX_PLACES];
    cr_assert_eq(hung_up(0, which, list, sizeof(list)), 0,
                 "%s: closed before any newcomer: %s", what, list);
}

/* After a newcomer: place @p victim, and no other, was closed within
 * EVICT_BOUND_MS, and before its own deadline. What was closed is closed
 * on the test's side too, so that a later newcomer's check lists only its
 * own doing; the test goes on either way, so a later check can say more. */
static void expect_evicted(int victim, const char *why)
{
    char list[2048];
    int which[MAX_PLACES];
    int n = hung_up(EVICT_BOUND_MS, which, list, sizeof(list));
    uint64_t age_ms = (rd_now_ns() - T[victim].opened_ns) / 1000000;
    for (int k = 0; k < n; k++) {
        close(T[which[k]].fd);
        T[which[k]].fd = -1;
    }
    cr_expect(n == 1 && which[0] == victim,
              "%s: expected #%d (%s) to be closed, alone; closed within "
              "%d ms: %s",
              why, victim, state(victim), EVICT_BOUND_MS,
              n > 0 ? list : "none");
    if (n == 1 && which[0] == victim)
        cr_expect_lt(age_ms, (uint64_t)T[victim].deadline_ms,
                     "%s: #%d closed %llu ms after it was opened: its own "
                     "deadline (%d ms), not an eviction",
                     why, victim, (unsigned long long)age_ms,
                     T[victim].deadline_ms);
}

/* --- the stats socket ---------------------------------------------------- */

TestSuite(stats_eviction, .init = setup, .fini = daemon_teardown,
          .timeout = 120);

/* One frame holding an empty StatsRequest. */
static const unsigned char STATS_REQUEST[] = {0, 0, 0, 0};

/* A stats connection still sending its request: it sent nothing. */
static void stats_sending(void)
{
    uint64_t t0 = rd_now_ns();
    add(raw_connect(D.stats), t0, false, STATS_REQUEST_MS, 0);
}

/* A stats connection being answered: its request sent and its reply's
 * length read, the rest of the reply (bigger than the socket's buffer)
 * left unread, so the daemon holds it. */
static void stats_answered(void)
{
    unsigned char h[4]; /* the frame's header: its length, big-endian */
    uint64_t t0 = rd_now_ns();
    int fd = raw_connect(D.stats);
    send_all(fd, STATS_REQUEST, sizeof(STATS_REQUEST));
    cr_assert_eq(recv(fd, h, sizeof(h), MSG_WAITALL), (ssize_t)sizeof(h),
                 "no stats reply: %s", strerror(errno));
    uint32_t len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
                   (uint32_t)h[2] << 8 | h[3];
    cr_assert_geq(len, STATS_REPLY_MIN,
                  "a stats reply of %u bytes: a socket buffer may hold it "
                  "whole, and the daemon would not hold its connection",
                  len);
    add(fd, t0, true, STATS_REPLY_MS, 0);
}

/* Answered connections older than every one still sending: a newcomer
 * closes the oldest one still sending (not the oldest of all, nor the
 * newest), and the next newcomer the next oldest (not the first newcomer,
 * newer and still sending too). */
Test(stats_eviction, a_newcomer_closes_the_oldest_still_sending)
{
    enum { ANSWERED = 8 };
    for (int i = 0; i < ANSWERED; i++)
        stats_answered();
    while (nt < STATS_PLACES)
        stats_sending();
    expect_all_held("stats, 8 answered then 56 still sending");
    stats_sending();
    expect_evicted(ANSWERED, "stats: the first newcomer");
    stats_sending();
    expect_evicted(ANSWERED + 1, "stats: the second newcomer");
}

/* Every place being answered: a newcomer closes the oldest; the next
 * newcomer closes the first one, though it is the newest of all, since it
 * is the one still sending. */
Test(stats_eviction, the_oldest_answered_goes_when_none_is_still_sending)
{
    while (nt < STATS_PLACES)
        stats_answered();
    expect_all_held("stats, 64 answered");
    stats_sending();
    expect_evicted(0, "stats: a newcomer when every place is answered");
    stats_sending();
    expect_evicted(STATS_PLACES,
                   "stats: the next newcomer, the previous one still "
                   "sending");
}

/* --- the /metrics endpoint ----------------------------------------------- */

/* What the connections still sending ask for: /metrics, or the status
 * page (GET /) that the same listener serves within the same places. The
 * ones being answered always read /metrics: its body outgrows the socket
 * buffers (METRICS_BODY_MIN), the page's (about 5 MB here) may not. */
static const char *metrics_path = "/metrics";

TestSuite(metrics_eviction, .init = setup, .fini = daemon_teardown,
          .timeout = 120);

/* A connection to /metrics from loopback address 127.0.0.@p host; reads
 * on it are bounded at 5 s. */
static int metrics_connect(int host)
{
    struct sockaddr_in src = {.sin_family = AF_INET,
                              .sin_addr.s_addr = htonl(0x7f000000u | host)};
    struct sockaddr_in dst = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0,
                 "bind 127.0.0.%d: %s", host, strerror(errno));
    cr_assert_eq(connect(fd, (struct sockaddr *)&dst, sizeof(dst)), 0,
                 "connect: %s", strerror(errno));
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Still sending its request: the request line and one header, never the
 * blank line that ends the headers. */
static void metrics_sending(int host)
{
    char half[64];
    int len = snprintf(half, sizeof(half), "GET %s HTTP/1.1\r\nHost: x\r\n",
                       metrics_path);
    uint64_t t0 = rd_now_ns();
    int fd = metrics_connect(host);
    send_all(fd, half, (size_t)len);
    add(fd, t0, false, METRICS_REQUEST_MS, 0);
}

/* The reply's headers on @p fd, read up to the blank line: its
 * Content-Length. */
static size_t read_headers(int fd)
{
    char h[2048];
    size_t n = 0;
    while (n < sizeof(h) - 1 &&
           (n < 4 || memcmp(h + n - 4, "\r\n\r\n", 4) != 0)) {
        cr_assert_eq(recv(fd, h + n, 1, 0), 1, "no /metrics reply: %s",
                     strerror(errno));
        n++;
    }
    h[n] = '\0';
    const char *cl = strcasestr(h, "\r\nContent-Length: ");
    cr_assert(strncmp(h, "HTTP/1.1 200 ", 13) == 0 && cl != NULL, "reply: %s",
              h);
    return strtoul(cl + 18, NULL, 10);
}

/* Being answered: the whole request sent and the reply's headers read;
 * the rest of its body (bigger than the socket buffers) left unread, so
 * the daemon holds it. */
static void metrics_answered(int host)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    uint64_t t0 = rd_now_ns();
    int fd = metrics_connect(host);
    send_all(fd, req, sizeof(req) - 1);
    size_t body = read_headers(fd);
    cr_assert_geq(body, METRICS_BODY_MIN,
                  "a /metrics body of %zu bytes: socket buffers may hold "
                  "it whole, and the daemon would not hold its connection",
                  body);
    add(fd, t0, true, METRICS_REPLY_MS, body);
}

/* Place @p i, being answered, was not evicted: its whole body arrives.
 * (An evicted one is shut after what the kernel took, some MB: the way to
 * see it, since its hang-up waits behind those bytes.) */
static void expect_whole_body(int i)
{
    static char buf[1 << 16];
    size_t got = 0;
    ssize_t n;
    while ((n = recv(T[i].fd, buf, sizeof(buf), 0)) > 0)
        got += (size_t)n;
    cr_expect_eq(got, T[i].body_left,
                 "#%d (being answered): %zu of its %zu body bytes, then "
                 "%s: it was closed early",
                 i, got, T[i].body_left, n == 0 ? "the end" : "an error");
}

/* One address holding its share: a newcomer of that address closes its
 * oldest connection still sending, not its older ones being answered, and
 * the next newcomer the next oldest. */
static void newcomer_closes_the_oldest_still_sending(void)
{
    enum { ANSWERED = 2 };
    for (int i = 0; i < ANSWERED; i++)
        metrics_answered(1);
    while (nt < METRICS_PER_ADDRESS)
        metrics_sending(1);
    expect_all_held("metrics, 2 answered then 14 still sending");
    metrics_sending(1);
    expect_evicted(ANSWERED, "metrics: the first newcomer of 127.0.0.1");
    metrics_sending(1);
    expect_evicted(ANSWERED + 1, "metrics: the second newcomer of 127.0.0.1");
    for (int i = 0; i < ANSWERED; i++)
        expect_whole_body(i);
}

Test(metrics_eviction,
     a_newcomer_closes_the_oldest_still_sending_of_its_address)
{
    newcomer_closes_the_oldest_still_sending();
}

/* Half-sent requests for the status page hold the same places under the
 * same rules: they go first, oldest first, and the replies being read are
 * kept. */
Test(metrics_eviction, the_status_page_takes_and_yields_places_alike)
{
    metrics_path = "/";
    newcomer_closes_the_oldest_still_sending();
}

/* Every place taken, by three addresses under their share: a newcomer of a
 * fourth closes the oldest connection still sending of any address (of
 * 127.0.0.3), not the older one being answered (of 127.0.0.2). */
Test(metrics_eviction, when_all_are_taken_the_oldest_still_sending_goes)
{
    metrics_answered(2);
    metrics_sending(3);
    while (nt < METRICS_PLACES)
        metrics_sending(2 + nt % 3); /* 11, 11 and 10 places */
    expect_all_held("metrics, 1 answered then 31 still sending");
    metrics_sending(5);
    expect_evicted(1, "metrics: a newcomer of 127.0.0.5, every place taken");
    expect_whole_body(0);
}
