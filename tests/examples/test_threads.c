/* SPDX-License-Identifier: MIT */
/*
 * examples/threads.c against a fault server and a real retryd: every
 * request ends as its table says, the payments without a key executed
 * exactly once, the keyed ones carried one key on every attempt, and the
 * retries the example counted are the executions the server saw beyond
 * the first and the grants the daemon's budget recorded.
 */
#include "example_test.h"

#define THREADS 4
#define ROUNDS 3
#define REQUESTS (THREADS * ROUNDS * 3)

/* The Idempotency-Key field of each execution in the server's LOG of
 * @p id ("<n> <method> <len> <sum> <key> <auth>[ <tag>]", " ; "
 * between executions): all the same and present. Returns how many. */
static long keyed_executions(const char *id)
{
    char cmd[160], reply[8192], first[128] = "";
    snprintf(cmd, sizeof(cmd), "LOG %s", id);
    CHECK(testsrv_command(ex.srv, cmd, reply, sizeof(reply)) == 0, "LOG");
    long n = 0;
    for (char *save = NULL, *e = strtok_r(reply, ";", &save); e != NULL;
         e = strtok_r(NULL, ";", &save), n++) {
        char key[128];
        CHECK(sscanf(e, " %*s %*s %*s %*s %127s", key) == 1, "LOG: %s", e);
        CHECK(strcmp(key, "-") != 0, "%s: an attempt without a key", id);
        if (n == 0)
            strcpy(first, key);
        CHECK(strcmp(key, first) == 0, "%s: keys %s and %s", id, first, key);
    }
    return n;
}

/* Server-side executions of every request; returns their sum. */
static long check_server(void)
{
    long sum = 0;
    for (int t = 0; t < THREADS; t++)
        for (int r = 0; r < ROUNDS; r++) {
            long pay = ex_countf("pay-%d-%d", t, r);
            long read = ex_countf("read-%d-%d", t, r);
            char keyed[64];
            snprintf(keyed, sizeof(keyed), "keyed-%d-%d", t, r);
            long k = ex_count(keyed);
            CHECK(pay == 1, "payment pay-%d-%d executed %ld times", t, r, pay);
            CHECK(read >= 1 && read <= 2, "read-%d-%d: %ld", t, r, read);
            CHECK(k >= 1 && k <= 3, "%s executed %ld times", keyed, k);
            CHECK(keyed_executions(keyed) == k, "%s: LOG and COUNT", keyed);
            sum += pay + read + k;
        }
    return sum;
}

int main(void)
{
    ex_start_server();
    ex_start_daemon();
    char *argv[] = {EXAMPLE_PATH, ex.base, "4", "3", NULL};
    int rc = ex_run(argv);
    CHECK(rc == 0, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);
    CHECK(strstr(ex.res.out, "budget shared through retryd") != NULL, "%s",
          ex.res.out);

    unsigned long n, resp, fail, amb, unexpected, errors, attempts, retries;
    CHECK(sscanf(ex_need_line("requests "),
                 "requests %lu: response %lu, failure %lu, ambiguous %lu; "
                 "unexpected %lu, errors %lu",
                 &n, &resp, &fail, &amb, &unexpected, &errors) == 6,
          "summary");
    CHECK(n == REQUESTS && resp == REQUESTS / 3 && fail == REQUESTS / 3 &&
              amb == REQUESTS / 3 && unexpected == 0 && errors == 0,
          "%s", ex.res.out);
    CHECK(sscanf(ex_need_line("attempts "), "attempts %lu, retries %lu",
                 &attempts, &retries) == 2,
          "attempts");
    CHECK(attempts == REQUESTS + retries, "%lu attempts, %lu retries", attempts,
          retries);

    long executed = check_server();
    CHECK(executed == (long)attempts, "server %ld, example %lu", executed,
          attempts);
    /* The same retries, seen from the host budget. */
    char upstream[64];
    snprintf(upstream, sizeof(upstream), "127.0.0.1:%d", testsrv_port(ex.srv));
    CHECK(ex_stat(upstream, "retries_granted") == retries, "granted");
    CHECK(ex_stat(upstream, "deposits") == REQUESTS, "deposits");
    CHECK(ex_stat(upstream, "ambiguous") == REQUESTS / 3, "ambiguous");
    printf("threads: %lu requests, %lu retries; all as expected\n", n, retries);
    return 0;
}
