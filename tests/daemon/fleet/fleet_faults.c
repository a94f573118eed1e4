/* SPDX-License-Identifier: MIT */
/*
 * Redis fails under a running fleet (docs/fleet.md): three real daemons
 * (hosts) and a client process on each, sending requests to a real
 * upstream all along, some of them retried from the host budget. Redis is
 * SIGSTOPped (a Redis that hangs: every round trip times out), resumed,
 * then killed (kill -9) and started again on its port, empty. And:
 *
 *   - no client request failed or stalled: every one was answered, none
 *     took more than two seconds, while Redis stayed stopped for three
 *     (a client that waited on Redis would have waited that long);
 *   - each host fell back within two sync intervals of its last sync, by
 *     its own account and as the test saw it (with polling's slack): the
 *     floor in force is the host's own again;
 *   - each host rejoined after each fault, by itself;
 *   - the balances are conserved: on each host, at the end, the balance
 *     is what the counters explain to the micro-token (initial + deposits
 *     x ratio + refilled - granted - discarded), across floors that
 *     changed between the fleet's share and the host's own four times.
 */
#include <inttypes.h>

#include "fleet_fixture.h"
#include "srv_log.h"
#include "testsrv.h"

#define HOSTS 3
#define INTERVAL_MS 500
#define BOUND_MS 30000
#define STOPPED_MS 3000
/* A request answered later than this stalled: Redis stayed stopped
 * longer, and the clients send all along, so one of them started as it
 * stopped and would have waited about that long. Well above what a
 * loaded machine (or a sanitizer) adds to a loopback request. */
#define STALL_MS 2000
#define CAP 10

static testsrv *srv;
static char api_url[64];

typedef struct board {
    _Atomic long stop;
    _Atomic long requests[HOSTS], failed[HOSTS], max_ms[HOSTS];
    _Atomic long retried[HOSTS];
} board;

static board *bd;

static const char sections[] =
    "[upstream api]\nratio = 0.5\nmin_retries_per_sec = 5\n"
    "fleet_min_retries_per_sec = 9\ncap = 10\n";

/* Host @p i's client: a 200 and a 503 (retried once) every few
 * milliseconds, each timed, until told to stop. */
static int client(int i)
{
    retryd_client *c = fx_client(i);
    retryd_profile *p = fx_profile(c, "api", api_url, 2);
    for (long n = 0; !atomic_load(&bd->stop); n++) {
        char path[96];
        snprintf(path, sizeof(path), "/status?code=%d&id=c%d",
                 n % 2 ? 503 : 200, i);
        retryd_request q = {.sz = sizeof(q),
                            .method = "GET",
                            .path = path,
                            .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                            .deadline_ns = 5000 * FX_MS};
        long long t0 = rd_now_ms();
        retryd_result *r = NULL;
        bool ok = retryd_execute(p, &q, &r) == 0 &&
                  retryd_result_outcome(r) == RETRYD_OUTCOME_RESPONSE;
        long ms = (long)(rd_now_ms() - t0);
        if (ok && retryd_result_attempt_count(r) > 1)
            atomic_fetch_add(&bd->retried[i], 1);
        if (r != NULL)
            retryd_result_free(r);
        atomic_fetch_add(&bd->requests[i], 1);
        if (!ok)
            atomic_fetch_add(&bd->failed[i], 1);
        if (ms > atomic_load(&bd->max_ms[i]))
            atomic_store(&bd->max_ms[i], ms);
        fx_sleep_ms(5);
    }
    retryd_profile_free(p);
    retryd_client_free(c);
    return 0;
}

static bool all_fell_back(void *arg)
{
    (void)arg;
    for (int i = 0; i < HOSTS; i++) {
        fx_stats(i);
        if (!fx_state_is("fallback") || fx_applied("api"))
            return false;
    }
    return true;
}

/* Each host fell back within two intervals of its last sync, by its own
 * clocks; its floor in force is its own. */
static void check_fallback(const char *fault, long long since)
{
    CHECK(rd_wait_until(all_fell_back, NULL, 2 * INTERVAL_MS + 2000),
          "%s: not every host fell back: %s", fault, fx_res.out);
    long long seen = rd_now_ms() - since;
    for (int i = 0; i < HOSTS; i++) {
        fx_stats(i);
        double last = fx_number("\"fleet\":{\"state\"", "last_sync_unix_ms");
        double at = fx_number("\"fleet\":{\"state\"", "fallback_since_unix_ms");
        double floor = fx_fleet_number("api", "floor_in_force");
        printf("%s: host %d fell back %.0f ms after its last sync (the "
               "test saw all in %lld ms); floor in force %.2f/s\n",
               fault, i + 1, at - last, seen, floor);
        CHECK(at - last <= 2 * INTERVAL_MS + 100,
              "%s: host %d fell back %.0f ms after its last sync", fault, i + 1,
              at - last);
        CHECK(floor == 5, "%s: host %d's floor is %.2f, not its own 5", fault,
              i + 1, floor);
    }
}

static void rejoin(const char *fault)
{
    fx_joined j = {"api", HOSTS};
    long long t0 = rd_now_ms();
    CHECK(rd_wait_until(fx_all_joined, &j, BOUND_MS),
          "%s: the hosts did not rejoin: %s", fault, fx_res.out);
    printf("%s: every host rejoined %lld ms after Redis came back\n", fault,
           rd_now_ms() - t0);
}

/* --- the ledger ---------------------------------------------------------- */

static int claim(int i)
{
    retryd_host *h;
    retryd_upstream *up;
    retryd_host_opts o = {.sz = sizeof(o),
                          .control_socket = fx_hosts[i].control};
    double b;
    CHECK(retryd_host_open(&o, &h) == 0 &&
              retryd_upstream_open(h, "api", NULL, &up) == 0 &&
              retryd_upstream_shared(up) &&
              retryd_upstream_balance(up, &b) == 0,
          "a balance on host %d", i + 1);
    retryd_host_close(h);
    return b == CAP ? 0 : 1;
}

static bool full(void *arg)
{
    fx_stats(*(int *)arg);
    return rd_json_number(fx_upstream("api"), NULL, "balance") == CAP;
}

/* The bucket refilled to its cap and its refill claimed (by a client:
 * the daemon's stats foresee a refill, they never claim one), the balance
 * is exactly what the counters explain. */
static void ledger(int i)
{
    CHECK(rd_wait_until(full, &i, BOUND_MS), "host %d never refilled", i + 1);
    CHECK(rd_reap(check_fork(claim, i), BOUND_MS) == 0, "claim on host %d",
          i + 1);
    fx_stats(i);
    const char *u = fx_upstream("api");
    double dep = rd_json_number(u, NULL, "deposits");
    double got = rd_json_number(u, NULL, "retries_granted");
    double refilled = rd_json_number(u, NULL, "refilled_tokens");
    double discarded = rd_json_number(u, NULL, "discarded_tokens");
    double balance = rd_json_number(u, NULL, "balance");
    double explained = 5 + dep * 0.5 + refilled - got - discarded;
    printf("ledger: host %d: 5 + %.0f x 0.5 + %.6f refilled - %.0f granted - "
           "%.6f discarded = %.6f; balance %.6f\n",
           i + 1, dep, refilled, got, discarded, explained, balance);
    CHECK(fabs(explained - balance) < 1e-6,
          "host %d: the balance %.6f is not what the counters explain, %.6f",
          i + 1, balance, explained);
}

int main(void)
{
    fx_redis_start(NULL);
    CHECK(testsrv_start(FAULTSRV_PATH, NULL, &srv) == 0, "faultsrv");
    snprintf(api_url, sizeof(api_url), "http://127.0.0.1:%d",
             testsrv_port(srv));
    char fleet[64];
    snprintf(fleet, sizeof(fleet), "sync_interval = %dms\n", INTERVAL_MS);
    for (int i = 0; i < HOSTS; i++)
        fx_host_start(i, fleet, sections);
    bd = check_shared(sizeof(*bd));
    pid_t pids[HOSTS];
    for (int i = 0; i < HOSTS; i++)
        pids[i] = check_fork(client, i);
    rejoin("start");

    long long t = rd_now_ms();
    CHECK(kill(fx_redis.pid, SIGSTOP) == 0, "SIGSTOP redis");
    check_fallback("SIGSTOP", t);
    long long left = STOPPED_MS - (rd_now_ms() - t);
    fx_sleep_ms(left > 0 ? left : 0);
    CHECK(kill(fx_redis.pid, SIGCONT) == 0, "SIGCONT redis");
    rejoin("SIGCONT");

    t = rd_now_ms();
    rd_redis_kill(&fx_redis);
    check_fallback("kill -9", t);
    fx_sleep_ms(1000);
    CHECK(rd_redis_restart(&fx_redis) == 0, "redis restarted on port %d",
          fx_redis.port);
    rejoin("restart");

    atomic_store(&bd->stop, 1);
    for (int i = 0; i < HOSTS; i++) {
        CHECK(rd_reap(pids[i], BOUND_MS) == 0, "client %d", i + 1);
        printf("host %d: %ld requests (%ld retried), %ld failed, the "
               "slowest %ld ms\n",
               i + 1, atomic_load(&bd->requests[i]),
               atomic_load(&bd->retried[i]), atomic_load(&bd->failed[i]),
               atomic_load(&bd->max_ms[i]));
        CHECK(atomic_load(&bd->requests[i]) > 100, "host %d barely ran", i + 1);
        CHECK(atomic_load(&bd->failed[i]) == 0, "host %d: failed requests",
              i + 1);
        CHECK(atomic_load(&bd->max_ms[i]) < STALL_MS,
              "host %d: a request took %ld ms", i + 1,
              atomic_load(&bd->max_ms[i]));
    }
    for (int i = 0; i < HOSTS; i++) {
        fx_stats(i);
        CHECK(fx_number("\"fleet\":{\"state\"", "fallbacks") >= 2,
              "host %d went to fallback fewer than twice", i + 1);
        ledger(i);
    }
    testsrv_stop(srv);
    for (int i = 0; i < HOSTS; i++)
        CHECK(rd_daemon_stop_or_show_log(&fx_hosts[i], SIGTERM) == 0,
              "host %d exits cleanly", i + 1);
    return 0;
}
