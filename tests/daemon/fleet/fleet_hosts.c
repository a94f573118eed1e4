/* SPDX-License-Identifier: MIT */
/*
 * Eight hosts of one fleet (docs/fleet.md): eight real retryd daemons on
 * this machine, each with its own runtime directory and segment, a real
 * Redis on loopback between them, and on each host a client process that
 * hammers an upstream that is down (a bound port nobody listens on:
 * every connect is refused) through the executor, with up to three
 * retries a request. Two upstreams at that address, side by side in the
 * same run on the same hosts:
 *
 *   dead-fleet  fleet_min_retries_per_sec = F (and min_retries_per_sec = F,
 *               the floor a host falls back to)
 *   dead-host   min_retries_per_sec = F, no fleet key: what every host
 *               does without the fleet tier (the same code path as a
 *               daemon with no [fleet] section: the upstream's slot never
 *               gets a fleet view)
 *
 * With ratio 0 every retry granted is a floor retry. Over a 10 s window
 * the fleet's floor retries to dead-fleet add up to F x 10 (within 10 %
 * plus one cap), against 8 x F x 10 to dead-host: the floors did not
 * multiply with the hosts. The demand is far above either floor, so each
 * bucket is empty at both ends of the window and what was granted is what
 * the floors refilled.
 *
 * Then the fleet's pushback: a Retry-After: 3 that host 1 receives holds
 * host 8's retries (fleet_pushback = on) until it ends, while host 7,
 * whose upstream says fleet_pushback = off, retries at once (the control:
 * it is the fleet, not the upstream, that held host 8).
 */
#include <inttypes.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "fleet_fixture.h"
#include "srv_log.h"
#include "testsrv.h"

#define HOSTS 8
#define F 20
#define CAP 5
#define WINDOW_MS 10000
#define INTERVAL_MS 500
#define BOUND_MS 60000
/* A hold long enough to reach host 8 (two intervals) with time to spare
 * on a loaded machine. */
#define HOLD_MS 3000
#define SLACK_MS 50
/* A window in which a host fell back (its Redis round trip starved past
 * half an interval on a loaded machine) does not measure the fleet: it
 * is measured again, this many times at most. */
#define WINDOWS_MAX 3

static char dead_url[64], api_url[64];
static testsrv *srv;

typedef struct board {
    _Atomic long stop;
} board;

static board *bd;

/* Host @p i's client: requests to both dead upstreams, one after the
 * other, every few milliseconds, until told to stop. */
static int hammer(int i)
{
    retryd_client *c = fx_client(i);
    retryd_profile *fleet = fx_profile(c, "dead-fleet", dead_url, 4);
    retryd_profile *host = fx_profile(c, "dead-host", dead_url, 4);
    retryd_request q = {.sz = sizeof(q),
                        .method = "GET",
                        .path = "/",
                        .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                        .deadline_ns = 2000 * FX_MS};
    while (!atomic_load(&bd->stop)) {
        retryd_profile *p[2] = {fleet, host};
        for (int k = 0; k < 2; k++) {
            retryd_result *r;
            CHECK(retryd_execute(p[k], &q, &r) == 0, "execute");
            retryd_result_free(r);
        }
        fx_sleep_ms(4);
    }
    retryd_profile_free(fleet);
    retryd_profile_free(host);
    retryd_client_free(c);
    return 0;
}

static const char *sections(int i)
{
    static char text[1024];
    snprintf(text, sizeof(text),
             "[upstream dead-fleet]\nratio = 0\nmin_retries_per_sec = %d\n"
             "fleet_min_retries_per_sec = %d\ncap = %d\n"
             "[upstream dead-host]\nratio = 0\nmin_retries_per_sec = %d\n"
             "cap = %d\n"
             "[upstream api]\nratio = 1\nmin_retries_per_sec = 100\n"
             "cap = 100\npushback = on\nfleet_pushback = %s\n",
             F, F, CAP, F, CAP, i == 6 ? "off" : "on");
    return text;
}

/* A port bound and never listened on: every connect to it is refused. */
static int dead_socket(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, len) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &len) == 0,
          "a dead port");
    snprintf(dead_url, sizeof(dead_url), "http://127.0.0.1:%d",
             ntohs(a.sin_port));
    return fd;
}

/* What one window saw, per host. */
typedef struct sample {
    double fleet[HOSTS], host[HOSTS]; /* retries granted */
    double failures[HOSTS], syncs[HOSTS];
    bool applied[HOSTS]; /* the fleet's view in force when read */
    long long at[HOSTS]; /* when each host was read */
} sample;

static void take(sample *s)
{
    for (int i = 0; i < HOSTS; i++) {
        fx_stats(i);
        s->at[i] = rd_now_ms();
        s->fleet[i] =
            rd_json_number(fx_upstream("dead-fleet"), NULL, "retries_granted");
        s->host[i] =
            rd_json_number(fx_upstream("dead-host"), NULL, "retries_granted");
        s->failures[i] = fx_number("\"fleet\":{\"state\"", "sync_failures");
        s->syncs[i] = fx_number("\"fleet\":{\"state\"", "syncs");
        s->applied[i] = fx_applied("dead-fleet");
    }
}

/* Whether host @p i kept the fleet's view in force from @p a to @p b: no
 * failed sync, and no interval missed (a fleet thread starved for two
 * intervals by the machine's load lets its view lapse, and the host runs
 * on its own floor meanwhile: not a measure of the fleet). */
static bool kept(const sample *a, const sample *b, int i)
{
    double missed = (double)(b->at[i] - a->at[i]) / INTERVAL_MS - 2 -
                    (b->syncs[i] - a->syncs[i]);
    if (a->applied[i] && b->applied[i] && b->failures[i] == a->failures[i] &&
        missed <= 0)
        return true;
    printf("window: host %d: %.0f failed syncs, %.0f missed, view %s: "
           "measured again\n",
           i + 1, b->failures[i] - a->failures[i], missed > 0 ? missed : 0,
           a->applied[i] && b->applied[i] ? "kept" : "lapsed");
    return false;
}

/* One window: true when every host kept the fleet's view through it,
 * with the fleet's and the hosts' floor retries and its mean length. */
static bool window(double *fleet, double *host, double *seconds)
{
    sample a, b;
    take(&a);
    fx_sleep_ms(WINDOW_MS);
    take(&b);
    bool clean = true;
    *fleet = *host = *seconds = 0;
    for (int i = 0; i < HOSTS; i++) {
        *fleet += b.fleet[i] - a.fleet[i];
        *host += b.host[i] - a.host[i];
        *seconds += (double)(b.at[i] - a.at[i]) / 1000 / HOSTS;
        clean = kept(&a, &b, i) && clean;
    }
    return clean;
}

static void floors(void)
{
    double fleet = 0, host = 0, t = 0;
    int w = 0;
    while (w++ < WINDOWS_MAX && !window(&fleet, &host, &t))
        ;
    CHECK(w <= WINDOWS_MAX, "no window of %d without a failed sync",
          WINDOWS_MAX);
    double want = F * t, slack = 0.1 * want + CAP;
    printf("fleet_hosts: %d hosts, %.2f s: the fleet's floor retries %.0f "
           "(F x T = %.1f, within %.1f) against %.0f host-only (8 x F x T = "
           "%.1f): %.2fx\n",
           HOSTS, t, fleet, want, slack, host, HOSTS * want,
           fleet > 0 ? host / fleet : 0.0);
    CHECK(fabs(fleet - want) <= slack,
          "the fleet's floor retries %.0f, not F x T = %.1f (+- %.1f)", fleet,
          want, slack);
    double hwant = HOSTS * want, hslack = 0.1 * hwant + HOSTS * CAP;
    CHECK(fabs(host - hwant) <= hslack,
          "the hosts' own floors granted %.0f, not 8 x F x T = %.1f (+- %.1f)",
          host, hwant, hslack);
}

/* --- the fleet's pushback ------------------------------------------------ */

/* One request of host @p i to api: code and id in its path. */
static int pushback_client(int i)
{
    retryd_client *c = fx_client(i);
    retryd_profile *p = fx_profile(c, "api", api_url, i == 0 ? 1 : 2);
    char path[96];
    snprintf(path, sizeof(path), "/status?code=503%s&id=h%d",
             i == 0 ? "&retry_after=3" : "", i + 1);
    retryd_request q = {.sz = sizeof(q),
                        .method = "GET",
                        .path = path,
                        .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    retryd_result *r;
    CHECK(retryd_execute(p, &q, &r) == 0, "execute %s", path);
    CHECK(retryd_result_outcome(r) == RETRYD_OUTCOME_RESPONSE,
          "%s: not a response", path);
    retryd_result_free(r);
    retryd_profile_free(p);
    retryd_client_free(c);
    return 0;
}

static bool host8_held(void *arg)
{
    (void)arg;
    fx_stats(7);
    return fx_fleet_number("api", "pushback_seconds") > 0;
}

static void arrivals(int host, int64_t *at, long want)
{
    char id[16];
    snprintf(id, sizeof(id), "h%d", host);
    long n = srv_log_times(srv, id, at, 4);
    CHECK(n == want, "%s arrived %ld times, not %ld", id, n, want);
}

static void pushback(void)
{
    CHECK(rd_reap(check_fork(pushback_client, 0), BOUND_MS) == 0, "host 1");
    int64_t t1;
    arrivals(1, &t1, 1);
    long long seen = rd_now_ms();
    CHECK(rd_wait_until(host8_held, NULL, HOLD_MS - 10 * SLACK_MS),
          "host 1's Retry-After did not reach host 8's slot in time");
    printf("pushback: host 8 held %lld ms after host 1's Retry-After\n",
           rd_now_ms() - seen);
    pid_t h8 = check_fork(pushback_client, 7),
          h7 = check_fork(pushback_client, 6);
    CHECK(rd_reap(h8, BOUND_MS) == 0 && rd_reap(h7, BOUND_MS) == 0,
          "hosts 7 and 8");
    int64_t at8[2], at7[2], end = t1 + HOLD_MS;
    arrivals(8, at8, 2);
    arrivals(7, at7, 2);
    printf("pushback: host 8's retry %+" PRId64
           " ms from the hold's end (its first attempt %+" PRId64
           " ms); host 7 (fleet_pushback off) retried %" PRId64
           " ms after its first\n",
           at8[1] - end, at8[0] - end, at7[1] - at7[0]);
    CHECK(at8[0] < end - 10 * SLACK_MS,
          "host 8's first attempt came after the hold: nothing to show");
    CHECK(at8[1] >= end - SLACK_MS,
          "host 8 retried %" PRId64 " ms into the %d ms hold host 1 saw",
          at8[1] - t1, HOLD_MS);
    CHECK(at7[1] < end - SLACK_MS,
          "host 7 (fleet_pushback off) was held too: the control failed");
}

int main(void)
{
    fx_redis_start(NULL);
    int dead = dead_socket();
    CHECK(testsrv_start(FAULTSRV_PATH, NULL, &srv) == 0, "faultsrv");
    snprintf(api_url, sizeof(api_url), "http://127.0.0.1:%d",
             testsrv_port(srv));
    char fleet[64];
    snprintf(fleet, sizeof(fleet), "sync_interval = %dms\n", INTERVAL_MS);
    for (int i = 0; i < HOSTS; i++)
        fx_host_start(i, fleet, sections(i));
    bd = check_shared(sizeof(*bd));
    pid_t pids[HOSTS];
    for (int i = 0; i < HOSTS; i++)
        pids[i] = check_fork(hammer, i);
    fx_joined j = {"dead-fleet", HOSTS};
    long long t0 = rd_now_ms();
    CHECK(rd_wait_until(fx_all_joined, &j, BOUND_MS),
          "the %d hosts did not all join: %s", HOSTS, fx_res.out);
    printf("fleet_hosts: %d hosts joined in %lld ms\n", HOSTS,
           rd_now_ms() - t0);
    floors();
    atomic_store(&bd->stop, 1);
    for (int i = 0; i < HOSTS; i++)
        CHECK(rd_reap(pids[i], BOUND_MS) == 0, "hammer %d", i + 1);
    pushback();
    testsrv_stop(srv);
    close(dead);
    for (int i = 0; i < HOSTS; i++)
        CHECK(rd_daemon_stop_or_show_log(&fx_hosts[i], SIGTERM) == 0,
              "host %d exits cleanly", i + 1);
    return 0;
}
