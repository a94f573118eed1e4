/* SPDX-License-Identifier: MIT */
/*
 * The /metrics endpoint under concurrency, as a plain program so the
 * thread sanitizer build runs it too (criterion cannot start under TSan).
 * The daemon's main thread attaches and releases process slots (writing
 * their program names) and reloads the configuration (moving the endpoint
 * between two ports and switching metrics_per_process), while its stats
 * thread serves scrapes (and the status page, GET /, in turn) from a
 * thread of this program and retrydctl stats. Every answer must be 200
 * with a whole body (the families; the page to its end), and the daemon
 * must exit cleanly (a sanitizer report makes its exit code non-zero).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "child.h"
#include "harness.h"
#include "metrics_http.h"
#include "run.h"

#define ROUNDS 12
#define CLIENTS_PER_ROUND 3

static rd_daemon D;
static int ports[2];
static _Atomic int live_port; /* where the scraper scrapes */
static atomic_bool stop;
static atomic_long scrapes, refused;

static void *scraper(void *arg)
{
    static const char *const paths[] = {"/metrics", "/"};
    static const char *const holds[] = {"retryd_upstream_balance_tokens",
                                        "</body></html>\n"};
    (void)arg;
    for (unsigned n = 0; !atomic_load(&stop); n++) {
        rd_http h;
        int p = atomic_load(&live_port);
        int r = rd_http_get("127.0.0.1", p, paths[n % 2], &h);
        if (r == 0) {
            CHECK(h.status == 200, "%s answered %ld", paths[n % 2], h.status);
            CHECK(strstr(h.body, holds[n % 2]) != NULL, "%s: %s", paths[n % 2],
                  h.body);
            atomic_fetch_add(&scrapes, 1);
        } else {
            /* Only while a reload moves the endpoint. */
            atomic_fetch_add(&refused, 1);
        }
        free(h.body);
    }
    return NULL;
}

static void write_config(int round)
{
    char extra[160];
    snprintf(extra, sizeof(extra),
             "metrics_listen = 127.0.0.1:%d\nmetrics_per_process = %s\n",
             ports[round % 2], round % 3 == 0 ? "pid" : "program");
    CHECK(rd_daemon_write_config(&D, extra) == 0, "config");
}

static pid_t main_pid;
static void cleanup(void)
{
    if (getpid() == main_pid)
        rd_daemon_cleanup(&D);
}

typedef struct serving {
    int port;
} serving;

static bool serves(void *arg)
{
    rd_http h;
    int r = rd_http_get("127.0.0.1", ((serving *)arg)->port, "/metrics", &h);
    free(h.body);
    return r == 0 && h.status == 200;
}

/* CLIENTS_PER_ROUND clients under names of this round attach, deposit
 * and go. */
static void clients_round(int round)
{
    child c[CLIENTS_PER_ROUND];
    for (int i = 0; i < CLIENTS_PER_ROUND; i++) {
        char name[32], path[256], reply[128];
        snprintf(name, sizeof(name), "rd-prog-%d", (round + i) % 4);
        CHECK(rd_named_program(D.dir, name, TEST_CLIENT_PATH, path,
                               sizeof(path)) == 0,
              "symlink");
        char *argv[] = {path, D.control, NULL};
        CHECK(child_start(&c[i], argv) == 0, "client");
        CHECK(child_ask(&c[i], "open payments", reply, sizeof(reply), 10000) ==
                      0 &&
                  strcmp(reply, "ok shared=1") == 0,
              "open: %s", reply);
        CHECK(child_ask(&c[i], "deposit 5", reply, sizeof(reply), 10000) == 0,
              "deposit");
    }
    for (int i = 0; i < CLIENTS_PER_ROUND; i++)
        child_stop(&c[i]);
}

int main(void)
{
    static run_result r;
    pthread_t t;

    ports[0] = rd_free_port(AF_INET);
    ports[1] = rd_free_port(AF_INET);
    CHECK(ports[0] > 0 && ports[1] > 0 && ports[0] != ports[1], "ports");
    CHECK(rd_daemon_init(&D, "") == 0, "init");
    write_config(0);
    CHECK(rd_daemon_start(&D) == 0, "start (log: %s)", D.log);
    main_pid = getpid();
    atexit(cleanup);
    atomic_store(&live_port, ports[0]);
    CHECK(pthread_create(&t, NULL, scraper, NULL) == 0, "thread");

    for (int round = 1; round <= ROUNDS; round++) {
        clients_round(round);
        CHECK(rd_ctl(&D, &r, "stats", "--prometheus", NULL) == 0, "%s", r.err);
        write_config(round);
        CHECK(kill(D.pid, SIGHUP) == 0, "SIGHUP");
        serving s = {ports[round % 2]};
        CHECK(rd_wait_until(serves, &s, 10000), "port %d after reload %d",
              s.port, round);
        atomic_store(&live_port, s.port);
    }
    atomic_store(&stop, true);
    pthread_join(t, NULL);
    CHECK(atomic_load(&scrapes) > ROUNDS, "only %ld scrapes",
          atomic_load(&scrapes));

    int code = rd_daemon_stop_or_show_log(&D, SIGTERM);
    CHECK(code == 0, "the daemon exited %d", code);
    printf("metrics_threads: %d rounds of attaches and reloads; %ld scrapes "
           "answered, %ld refused while the endpoint moved\n",
           ROUNDS, atomic_load(&scrapes), atomic_load(&refused));
    return 0;
}
