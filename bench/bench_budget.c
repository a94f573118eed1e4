/* SPDX-License-Identifier: MIT */
/*
 * Nanoseconds per host-budget operation, retryd_upstream_withdraw and
 * retryd_upstream_deposit (into a bucket below its cap, and into a full
 * one) on a real daemon's segment, beside four baselines measured in the
 * same run, for 1 process and for 2 processes contending on the same
 * budget:
 *   (a) atomic_fetch_add on one cache line of a MAP_SHARED mapping: the
 *       hardware floor of any counter shared between processes;
 *   (b) a counter behind a PTHREAD_PROCESS_SHARED mutex in shared memory;
 *   (c) a Hello request/reply with the daemon over its control socket, on
 *       one connection per process: what every operation would cost if the
 *       budget lived in the daemon;
 *   (d) INCRBY on a local redis-server over TCP, one connection per
 *       process: a shared counter service.
 *
 * Each figure is a median over runs. In a run, every measurement forks its
 * processes, lets each set up (attach, connect) untimed, releases them
 * together through a pipe they all wait on, and takes the wall time from
 * the first start to the last finish (CLOCK_MONOTONIC, comparable across
 * processes) divided by the operations of one process. The kinds are
 * interleaved within each run, so frequency changes and neighbours hit
 * them alike.
 *
 * The benchmark starts its own daemon (two upstreams, no floor: one with
 * cap 1e8 tokens and ratio 1 that deposits never fill, one with the
 * default cap and ratio that each worker fills before it is timed) and
 * redis-server in a temporary directory, and stops both and removes the
 * directory on every path it controls (errors, SIGINT, SIGTERM); if it is
 * killed outright, PR_SET_PDEATHSIG stops them.
 *
 * With --fleet the daemon has the fleet tier on (docs/fleet.md), linked to
 * that redis-server, and both upstreams take part in it (a fleet floor of
 * 0, so no refill adds tokens behind the count; fleet_health and
 * fleet_pushback on): the hot path is measured with the fleet's views in
 * force in the slots. Alternate runs with and without it to compare.
 *
 * usage: bench_budget [--fleet] [shm-ops-per-process]
 *                     [round-trips-per-process] [runs]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_proc.h"
#include "harness.h"
#include "shared/frame.h"
#include "retryd.pb-c.h"
#include "retryd/budget.h"

#define MAX_PROCS 2
#define MAX_RUNS 64
#define UPSTREAM "bench"
#define UPSTREAM_FULL "bench_full"
#define FULL_CAP 100           /* tokens: the default cap */
#define FULL_RATIO 10          /* deposits per token: the default ratio, 0.1 */
#define READY_TIMEOUT_MS 30000 /* a worker's attach or connect */
#define IO_TIMEOUT_MS 5000     /* one round trip; healthy ones take µs */

/* Each baseline on its own cache line, so (a) and (b) measure one line. */
typedef struct shared {
    alignas(64) _Atomic uint64_t counter; /* (a) */
    alignas(64) pthread_mutex_t lock;     /* (b) */
    uint64_t locked_counter;              /* (b), under lock */
} shared;

typedef struct bench_env {
    rd_daemon d;          /* its directory holds redis's files too */
    pid_t redis_pid;      /* 0 when not running */
    int redis_port;       /* on 127.0.0.1 */
    char redis_skip[192]; /* why (d) is skipped; empty when it runs */
    shared *shm;
} bench_env;

/* One measuring process's state; only ever filled in a forked worker. */
typedef struct worker {
    const bench_env *env;
    retryd_host *host;
    retryd_upstream *up;
    int fd; /* control socket (c) or redis connection (d), else -1 */
} worker;

enum kind {
    K_ATOMIC,
    K_MUTEX,
    K_DEPOSIT,
    K_DEPOSIT_FULL,
    K_WITHDRAW,
    K_HELLO,
    K_REDIS,
    N_KINDS
};

typedef struct kind_desc {
    const char *label;
    bool round_trip; /* takes the (smaller) round-trip count */
    int (*setup)(worker *w);
    long (*loop)(worker *w, long n); /* successes, or -1 */
    int (*verify)(worker *w);        /* untimed, after the loop; optional */
} kind_desc;

/* What a worker tells the parent: once set up, once done. Smaller than
 * PIPE_BUF, so the workers' messages on the shared pipe never mix. */
typedef struct report {
    int32_t failed;
    int32_t pad;
    int64_t t0, t1; /* CLOCK_MONOTONIC around the timed loop */
    int64_t count;  /* successful operations */
} report;

typedef struct options {
    long shm_ops, rpc_ops;
    int runs;
    bool fleet; /* --fleet: the daemon's fleet tier on */
} options;

typedef struct results {
    double ns[N_KINDS][MAX_PROCS][MAX_RUNS]; /* [kind][procs - 1][run] */
    /* Of a 2-process phase's wall time, the part between the later start
     * and the earlier finish: near 1, they contended throughout; near 0,
     * one ran after the other. */
    double overlap[N_KINDS][MAX_RUNS];
    long withdraw_granted, withdraw_tried;
    /* Shares of the machine's CPUs that other processes used meanwhile,
     * and that the hypervisor gave to other machines (steal): a busy
     * neighbour inflates the figures. Negative when unreadable. */
    double foreign_share, steal_share;
} results;

const char bench_prog[] = "bench_budget";

static int fail_rd(const char *what, int code)
{
    return bench_fail("%s: %s", what, retryd_strerror(code));
}

/* --- baselines (a) and (b): shared memory --------------------------------- */

static int setup_none(worker *w)
{
    (void)w;
    return 0;
}

static long loop_atomic(worker *w, long n)
{
    _Atomic uint64_t *c = &w->env->shm->counter;
    for (long i = 0; i < n; i++)
        atomic_fetch_add(c, 1);
    return n;
}

static long loop_mutex(worker *w, long n)
{
    shared *s = w->env->shm;
    for (long i = 0; i < n; i++) {
        int r = pthread_mutex_lock(&s->lock);
        if (r == 0) {
            s->locked_counter++;
            r = pthread_mutex_unlock(&s->lock);
        }
        if (r != 0) {
            errno = r;
            return bench_fail_errno("process-shared mutex");
        }
    }
    return n;
}

/* --- the budget, through the public API ----------------------------------- */

/* Attach and open upstream @p name as a service would, untimed. */
static int open_budget(worker *w, const char *name)
{
    retryd_host_opts o = {.sz = sizeof(o),
                          .control_socket = w->env->d.control,
                          .client_name = "bench_budget"};
    double tokens;
    int r = retryd_host_open(&o, &w->host);
    if (r < 0)
        return fail_rd("retryd_host_open", r);
    r = retryd_upstream_open(w->host, name, NULL, &w->up);
    if (r < 0)
        return fail_rd("retryd_upstream_open", r);
    /* Unattached, the library spends from a process-local bucket: a
     * figure for that would not be the host budget's. */
    if (!retryd_host_attached(w->host) || !retryd_upstream_shared(w->up))
        return bench_fail("not attached to the daemon's segment: refusing "
                          "to time a local bucket");
    /* The thread's first operation claims its counter lane; do it here. */
    r = retryd_upstream_balance(w->up, &tokens);
    return r < 0 ? fail_rd("retryd_upstream_balance", r) : 0;
}

static int setup_budget(worker *w)
{
    return open_budget(w, UPSTREAM);
}

/* The full bucket's balance must be its cap. */
static int verify_full(worker *w)
{
    double tokens;
    int r = retryd_upstream_balance(w->up, &tokens);
    if (r < 0)
        return fail_rd("retryd_upstream_balance", r);
    return tokens == FULL_CAP ? 0
                              : bench_fail("%s holds %.6f tokens, not its "
                                           "cap of %d",
                                           UPSTREAM_FULL, tokens, FULL_CAP);
}

/* Open the small upstream and deposit until it is at its cap (the steady
 * state of a healthy upstream: every first attempt deposits into a full
 * bucket), untimed. Whoever comes second finds it full already. */
static int setup_budget_full(worker *w)
{
    if (open_budget(w, UPSTREAM_FULL) < 0)
        return -1;
    for (int i = 0; i < FULL_CAP * FULL_RATIO; i++) {
        int r = retryd_upstream_deposit(w->up);
        if (r < 0)
            return fail_rd("retryd_upstream_deposit", r);
    }
    return verify_full(w);
}

static long loop_deposit(worker *w, long n)
{
    for (long i = 0; i < n; i++) {
        int r = retryd_upstream_deposit(w->up);
        if (r < 0)
            return fail_rd("retryd_upstream_deposit", r);
    }
    return n;
}

/* Counts grants: a denial is cheaper work, so the figure is honest only
 * when (nearly) every withdrawal was granted; the report says. */
static long loop_withdraw(worker *w, long n)
{
    long granted = 0;
    for (long i = 0; i < n; i++) {
        int r = retryd_upstream_withdraw(w->up);
        if (r == 0)
            granted++;
        else if (r != RETRYD_EBUDGET)
            return fail_rd("retryd_upstream_withdraw", r);
    }
    return granted;
}

/* --- baseline (c): a round trip to the daemon ----------------------------- */

static int connect_unix(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path))
        return bench_fail("%s: path too long", path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return bench_fail_errno("socket(AF_UNIX)");
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int r = bench_fail_errno(path);
        (void)close(fd); /* nothing more to report */
        return r;
    }
    return fd;
}

/* One Hello, as the library frames, packs and checks it. */
static int hello_once(int fd)
{
    static char client[] = "bench_budget";
    Retryd__Hello hello;
    Retryd__ControlRequest req;
    Retryd__ControlReply *rep;
    uint8_t *body;
    size_t len;

    /* The init functions, not the INIT macros, which cast away const
     * (clang -Werror refuses them; see libclient/host.c). */
    retryd__hello__init(&hello);
    retryd__control_request__init(&req);
    hello.protocol_version = RETRYD_PROTOCOL_VERSION;
    hello.client = client;
    req.body_case = RETRYD__CONTROL_REQUEST__BODY_HELLO;
    req.hello = &hello;
    int r = retryd__frame_send(fd, &req.base, -1, IO_TIMEOUT_MS);
    if (r == 0)
        r = retryd__frame_recv(fd, RETRYD_FRAME_REPLY_MAX, IO_TIMEOUT_MS, &body,
                               &len, NULL);
    if (r < 0)
        return fail_rd("hello exchange", r);
    rep = retryd__control_reply__unpack(NULL, len, body);
    free(body);
    if (rep == NULL)
        return fail_rd("hello reply", RETRYD_EPROTO);
    r = rep->error;
    if (r == 0 && rep->body_case != RETRYD__CONTROL_REPLY__BODY_HELLO)
        r = RETRYD_EPROTO;
    retryd__control_reply__free_unpacked(rep, NULL);
    return r < 0 ? fail_rd("hello reply", r) : 0;
}

/* Connect and greet once untimed (the daemon wants Hello first anyway). */
static int setup_hello(worker *w)
{
    w->fd = connect_unix(w->env->d.control);
    return w->fd < 0 ? -1 : hello_once(w->fd);
}

static long loop_hello(worker *w, long n)
{
    for (long i = 0; i < n; i++)
        if (hello_once(w->fd) < 0)
            return -1;
    return n;
}

/* --- baseline (d): redis INCRBY over raw RESP ----------------------------- */

static int connect_tcp(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {IO_TIMEOUT_MS / 1000, 0};
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    /* Timeouts: a stuck server fails the measurement instead of hanging
     * it. No Nagle: every request is one small write, as in any client. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        (void)close(fd); /* the caller reports the first error */
        errno = e;
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Send @p cmd and read one reply line (every reply used here is one line)
 * into @p line, NUL-terminated without its CRLF. */
static int redis_call(int fd, const char *cmd, char *line, size_t cap)
{
    size_t got = 0;

    if (send_all(fd, cmd, strlen(cmd)) < 0)
        return -1;
    while (got < 2 || line[got - 1] != '\n') {
        if (got == cap - 1) {
            errno = EMSGSIZE;
            return -1;
        }
        ssize_t n = recv(fd, line + got, cap - 1 - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            errno = n == 0 ? ECONNRESET : errno;
            return -1;
        }
        got += (size_t)n;
    }
    line[got - 2] = '\0';
    return 0;
}

static const char redis_ping[] = "*1\r\n$4\r\nPING\r\n";
static const char redis_incrby[] =
    "*3\r\n$6\r\nINCRBY\r\n$5\r\nbench\r\n$1\r\n1\r\n";

/* Connect and PING; the connection once PONG came back, else -1. */
static int redis_hello(int port)
{
    char line[64];
    int fd = connect_tcp(port);
    if (fd < 0)
        return -1;
    if (redis_call(fd, redis_ping, line, sizeof(line)) < 0 ||
        strcmp(line, "+PONG") != 0) {
        (void)close(fd); /* the caller retries or reports */
        errno = errno ? errno : EPROTO;
        return -1;
    }
    return fd;
}

static int setup_redis(worker *w)
{
    errno = 0;
    w->fd = redis_hello(w->env->redis_port);
    return w->fd < 0 ? bench_fail_errno("connecting to redis-server") : 0;
}

static long loop_redis(worker *w, long n)
{
    char line[64];
    for (long i = 0; i < n; i++) {
        if (redis_call(w->fd, redis_incrby, line, sizeof(line)) < 0)
            return bench_fail_errno("INCRBY");
        if (line[0] != ':')
            return bench_fail("INCRBY: %s", line);
    }
    return n;
}

static const kind_desc kinds[N_KINDS] = {
    [K_ATOMIC] = {"(a) atomic_fetch_add, shared line", false, setup_none,
                  loop_atomic, NULL},
    [K_MUTEX] = {"(b) process-shared pthread mutex", false, setup_none,
                 loop_mutex, NULL},
    [K_DEPOSIT] = {"retryd_upstream_deposit, below cap", false, setup_budget,
                   loop_deposit, NULL},
    [K_DEPOSIT_FULL] = {"retryd_upstream_deposit, full bucket", false,
                        setup_budget_full, loop_deposit, verify_full},
    [K_WITHDRAW] = {"retryd_upstream_withdraw", false, setup_budget,
                    loop_withdraw, NULL},
    [K_HELLO] = {"(c) daemon Hello round trip", true, setup_hello, loop_hello,
                 NULL},
    [K_REDIS] = {"(d) redis INCRBY round trip", true, setup_redis, loop_redis,
                 NULL},
};

/* --- the workers ---------------------------------------------------------- */

static void send_report(int fd, const report *m)
{
    if (write(fd, m, sizeof(*m)) != (ssize_t)sizeof(*m))
        _exit(1); /* the parent is gone or gave up on us */
}

static _Noreturn void worker_main(const bench_env *env, enum kind k, long n,
                                  int up_wr, int go_rd, pid_t parent)
{
    worker w = {.env = env, .fd = -1};
    report m = {0};
    char go;

    bench_child_prepare(parent, SIGKILL, NULL);
    m.failed = kinds[k].setup(&w) < 0;
    send_report(up_wr, &m);
    if (m.failed)
        _exit(1);
    /* The barrier: the parent writes one byte per worker at once. */
    ssize_t g;
    while ((g = read(go_rd, &go, 1)) < 0 && errno == EINTR)
        ;
    if (g != 1)
        _exit(1);
    m.t0 = bench_now_ns();
    m.count = kinds[k].loop(&w, n);
    m.t1 = bench_now_ns();
    m.failed = m.count < 0 || (kinds[k].verify && kinds[k].verify(&w) < 0);
    send_report(up_wr, &m);
    if (w.fd >= 0 && close(w.fd) < 0)
        _exit(1);
    retryd_host_close(w.host);
    _exit(m.failed);
}

/* --- the daemon and redis-server ------------------------------------------ */

/* Withdrawals must succeed: each run deposits (ratio 1) what it then
 * withdraws, the cap is far above any run, and no floor refill adds
 * tokens behind the count. The full bucket has the default ratio and cap
 * (FULL_RATIO, FULL_CAP) and no floor, so it holds exactly its cap once
 * filled. */
static const char daemon_upstream[] =
    "\n[upstream " UPSTREAM "]\nratio = 1\nmin_retries_per_sec = 0\n"
    "cap = 100000000\n"
    "\n[upstream " UPSTREAM_FULL "]\nratio = 0.1\nmin_retries_per_sec = 0\n"
    "cap = 100\n";

static bool find_in_path(const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    char copy[4096], *save = NULL;
    if (path == NULL || strlen(path) >= sizeof(copy))
        return false;
    strcpy(copy, path);
    for (char *d = strtok_r(copy, ":", &save); d;
         d = strtok_r(NULL, ":", &save)) {
        int n = snprintf(out, cap, "%s/%s", d, name);
        if (n > 0 && (size_t)n < cap && access(out, X_OK) == 0)
            return true;
    }
    return false;
}

static _Noreturn void exec_redis(const bench_env *env, const char *bin,
                                 const char *log, pid_t parent)
{
    char port[16];
    bench_child_prepare(parent, SIGTERM, log);
    snprintf(port, sizeof(port), "%d", env->redis_port);
    execl(bin, "redis-server", "--port", port, "--bind", "127.0.0.1", "--save",
          "", "--appendonly", "no", "--daemonize", "no", "--dir", env->d.dir,
          (char *)NULL);
    fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
    _exit(127);
}

/* Connect + PING until PONG, at most BENCH_START_TIMEOUT_MS; the reason if
 * not. */
static const char *wait_pong(bench_env *env)
{
    int64_t deadline = bench_now_ms() + BENCH_START_TIMEOUT_MS;
    int status;
    while (bench_now_ms() < deadline && !bench_stop) {
        int fd = redis_hello(env->redis_port);
        if (fd >= 0)
            return close(fd) < 0 ? "closing the PING connection failed" : NULL;
        pid_t r = waitpid(env->redis_pid, &status, WNOHANG);
        if (r == env->redis_pid) {
            env->redis_pid = 0;
            return "redis-server exited at start";
        }
        if (r < 0)
            return "waitpid on redis-server failed";
        bench_sleep_ms(10);
    }
    return "redis-server did not answer PING within 10 s";
}

/* Never fatal: without redis, (d) is skipped and the reason printed. */
static void start_redis(bench_env *env)
{
    char bin[PATH_MAX], log[160];
    const char *why;

    snprintf(log, sizeof(log), "%s/redis.log", env->d.dir);
    if (!find_in_path("redis-server", bin, sizeof(bin))) {
        snprintf(env->redis_skip, sizeof(env->redis_skip),
                 "redis-server not found in PATH (Debian: redis-server)");
        return;
    }
    env->redis_port = bench_free_port();
    if (env->redis_port < 0) {
        snprintf(env->redis_skip, sizeof(env->redis_skip),
                 "no free TCP port: %s", strerror(errno));
        return;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        exec_redis(env, bin, log, parent);
    if (pid < 0) {
        snprintf(env->redis_skip, sizeof(env->redis_skip), "fork: %s",
                 strerror(errno));
        return;
    }
    env->redis_pid = pid;
    if ((why = wait_pong(env)) == NULL)
        return;
    snprintf(env->redis_skip, sizeof(env->redis_skip), "%s (port %d)", why,
             env->redis_port);
    bench_print_tail(log);
    /* Already failed: nothing more to report. */
    (void)bench_stop_child(&env->redis_pid, SIGTERM, "redis-server");
}

/* --- the environment ------------------------------------------------------ */

static int init_shared(bench_env *env)
{
    pthread_mutexattr_t a;
    void *p = mmap(NULL, sizeof(shared), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return bench_fail_errno("mmap");
    env->shm = p;
    memset(p, 0, sizeof(shared)); /* also faults the page in, untimed */
    int r = pthread_mutexattr_init(&a);
    if (r == 0) {
        r = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        if (r == 0)
            r = pthread_mutex_init(&env->shm->lock, &a);
        (void)pthread_mutexattr_destroy(&a); /* cannot fail on Linux */
    }
    errno = r;
    return r == 0 ? 0 : bench_fail_errno("process-shared mutex");
}

/* The daemon's configuration with the fleet tier on, linked to the
 * benchmark's redis-server; both upstreams in the fleet. */
static int fleet_config(bench_env *env)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "[fleet]\nredis = 127.0.0.1:%d\nname = bench\n"
             "[defaults]\nfleet_min_retries_per_sec = 0\nfleet_health = on\n"
             "fleet_pushback = on\n%s",
             env->redis_port, daemon_upstream);
    return rd_daemon_write_config(&env->d, text) < 0
               ? bench_fail_errno("the daemon's configuration")
               : 0;
}

/* Whether the daemon's fleet is linked with both upstreams' views in
 * force (retrydctl stats). */
static bool fleet_applied(void *arg)
{
    static run_result r;
    const bench_env *env = arg;
    if (rd_ctl(&env->d, &r, "stats", "--json", NULL) != 0 ||
        strstr(r.out, "\"fleet\":{\"state\":\"connected\"") == NULL)
        return false;
    const char *up = strstr(r.out, "\"upstreams_applied\":2,");
    return up != NULL;
}

static int env_setup(bench_env *env, const options *o)
{
    if (init_shared(env) < 0)
        return -1;
    if (rd_daemon_init(&env->d, daemon_upstream) < 0)
        return bench_fail_errno("the daemon's directory");
    start_redis(env);
    if (o->fleet && env->redis_skip[0] != '\0')
        return bench_fail("--fleet needs redis-server: %s", env->redis_skip);
    if (o->fleet && fleet_config(env) < 0)
        return -1;
    if (rd_daemon_start(&env->d) < 0) {
        bench_print_tail(env->d.log);
        return bench_fail("retryd did not become ready");
    }
    if (o->fleet && !rd_wait_until(fleet_applied, env, READY_TIMEOUT_MS)) {
        bench_print_tail(env->d.log);
        return bench_fail("the fleet tier did not link within %d ms",
                          READY_TIMEOUT_MS);
    }
    return 0;
}

/* Everything env_setup made, whatever part of it succeeded. */
static int env_teardown(bench_env *env)
{
    int rc = 0;
    if (bench_stop_child(&env->redis_pid, SIGTERM, "redis-server") < 0)
        rc = -1;
    if (env->d.pid > 0 && rd_daemon_stop(&env->d, SIGTERM) != 0)
        rc = bench_fail("retryd did not stop cleanly");
    rd_daemon_cleanup(&env->d);
    if (env->shm != NULL) {
        (void)pthread_mutex_destroy(&env->shm->lock); /* unheld: no error */
        if (munmap(env->shm, sizeof(shared)) < 0)
            rc = bench_fail_errno("munmap");
    }
    return rc;
}

/* --- one measurement: nproc workers, one barrier -------------------------- */

typedef struct phase {
    pid_t pids[MAX_PROCS];
    int nproc;
    int up_rd, go_wr; /* reports in, release out */
} phase;

static int spawn_workers(const bench_env *env, enum kind k, long n, phase *p)
{
    int up[2], go[2];
    if (pipe2(up, O_CLOEXEC) < 0)
        return bench_fail_errno("pipe2");
    if (pipe2(go, O_CLOEXEC) < 0) {
        (void)close(up[0]), (void)close(up[1]); /* unused yet */
        return bench_fail_errno("pipe2");
    }
    p->up_rd = up[0];
    p->go_wr = go[1];
    pid_t parent = getpid();
    int r = 0;
    for (int i = 0; i < p->nproc && r == 0; i++) {
        p->pids[i] = fork();
        if (p->pids[i] == 0) {
            /* Without the parent's ends, a worker sees EOF on go if the
             * parent goes away. */
            if (close(up[0]) < 0 || close(go[1]) < 0)
                _exit(127);
            worker_main(env, k, n, up[1], go[0], parent);
        }
        r = p->pids[i] < 0 ? bench_fail_errno("fork") : 0;
    }
    /* The workers' ends: a worker waiting on go sees EOF if we give up. */
    (void)close(up[1]), (void)close(go[0]);
    return r;
}

/* One report within @p timeout_ms. */
static int read_report(int fd, report *m, int64_t timeout_ms)
{
    int64_t deadline = bench_now_ms() + timeout_ms;
    for (;;) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - bench_now_ms();
        if (bench_stop)
            return bench_fail("interrupted");
        int r = left <= 0 ? 0 : poll(&pf, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return bench_fail_errno("poll");
        if (r == 0)
            return bench_fail("a worker timed out");
        ssize_t got = read(fd, m, sizeof(*m));
        if (got < 0 && errno == EINTR)
            continue;
        if (got == (ssize_t)sizeof(*m) && !m->failed)
            return 0;
        return bench_fail("a worker failed");
    }
}

/* Everyone set up, release them together, collect the timings. */
static int collect(phase *p, enum kind k, long n, double *ns_op,
                   double *overlap, long *count)
{
    static const char go[MAX_PROCS] = {'g', 'g'};
    report m;
    int64_t t0 = INT64_MAX, t1 = INT64_MIN, last_t0 = INT64_MIN,
            first_t1 = INT64_MAX;

    *count = 0;
    for (int i = 0; i < p->nproc; i++)
        if (read_report(p->up_rd, &m, READY_TIMEOUT_MS) < 0)
            return -1;
    if (write(p->go_wr, go, (size_t)p->nproc) != p->nproc)
        return bench_fail_errno("releasing the workers");
    /* Generous: 1 ms per round trip, 1 µs per shared-memory op. */
    int64_t timeout = 60000 + (kinds[k].round_trip ? n : n / 1000);
    for (int i = 0; i < p->nproc; i++) {
        if (read_report(p->up_rd, &m, timeout) < 0)
            return -1;
        t0 = m.t0 < t0 ? m.t0 : t0;
        t1 = m.t1 > t1 ? m.t1 : t1;
        last_t0 = m.t0 > last_t0 ? m.t0 : last_t0;
        first_t1 = m.t1 < first_t1 ? m.t1 : first_t1;
        *count += m.count;
    }
    *ns_op = (double)(t1 - t0) / (double)n;
    *overlap = first_t1 > last_t0 ? (double)(first_t1 - last_t0) /
                                        (double)(t1 - t0 > 0 ? t1 - t0 : 1)
                                  : 0;
    return 0;
}

/* Reap every worker; after a failure, kill them first. */
static int reap_workers(phase *p, bool failed)
{
    int rc = 0, status;
    for (int i = 0; i < p->nproc; i++) {
        if (p->pids[i] <= 0)
            continue;
        if (failed && kill(p->pids[i], SIGKILL) < 0 && errno != ESRCH)
            rc = bench_fail_errno("kill");
        if (bench_reap(p->pids[i], BENCH_STOP_TIMEOUT_MS, &status) < 0)
            rc = -1;
        else if (!failed && status != 0)
            rc = -1;
    }
    return rc;
}

/* The shared-memory baselines and the deposits must count every op, so a
 * loop the compiler or a bug shortened cannot pass for a fast one. */
static int check_count(const bench_env *env, enum kind k, long count,
                       long expected)
{
    uint64_t seen = k == K_ATOMIC  ? atomic_load(&env->shm->counter)
                    : k == K_MUTEX ? env->shm->locked_counter
                                   : (uint64_t)count;
    if (k == K_WITHDRAW || seen == (uint64_t)expected)
        return 0;
    return bench_fail("%s counted %llu of %ld", kinds[k].label,
                      (unsigned long long)seen, expected);
}

static int run_phase(const bench_env *env, enum kind k, int nproc, long n,
                     double *ns_op, double *overlap, long *count)
{
    phase p = {.nproc = nproc, .up_rd = -1, .go_wr = -1};

    atomic_store(&env->shm->counter, 0);
    env->shm->locked_counter = 0;
    if (fflush(NULL) != 0) /* nothing buffered may be written twice */
        return bench_fail_errno("fflush");
    int r = spawn_workers(env, k, n, &p);
    if (r == 0)
        r = collect(&p, k, n, ns_op, overlap, count);
    if (p.up_rd >= 0)
        (void)close(p.up_rd); /* pipes: nothing unflushed to lose */
    if (p.go_wr >= 0)
        (void)close(p.go_wr);
    if (reap_workers(&p, r < 0) < 0)
        r = -1;
    return r < 0 ? -1 : check_count(env, k, *count, n * nproc);
}

/* --- the runs and the report ---------------------------------------------- */

static int measure(const bench_env *env, const options *o, results *res)
{
    for (int r = 0; r < o->runs; r++)
        for (int pi = 0; pi < MAX_PROCS; pi++)
            for (int k = 0; k < N_KINDS; k++) {
                long n = kinds[k].round_trip ? o->rpc_ops : o->shm_ops;
                long count = 0;
                if (k == K_REDIS && env->redis_skip[0] != '\0')
                    continue;
                /* Deposits come first, so the withdrawals that follow
                 * find exactly the tokens they take. */
                if (run_phase(env, (enum kind)k, pi + 1, n, &res->ns[k][pi][r],
                              &res->overlap[k][r], &count) < 0)
                    return bench_fail("%s, %d process(es), run %d failed",
                                      kinds[k].label, pi + 1, r + 1);
                if (k == K_WITHDRAW) {
                    res->withdraw_granted += count;
                    res->withdraw_tried += n * (pi + 1);
                }
            }
    return 0;
}

static void print_ratio(const char *label, const char *target, double v1,
                        double v2, bool met)
{
    printf("  %-26s %-14s %9.2fx %11.2fx   %s\n", label, target, v1, v2,
           met ? "met" : "MISSED");
}

static void print_results(const bench_env *env, const options *o, results *res)
{
    double m[N_KINDS][MAX_PROCS], ovl[N_KINDS];
    bool redis = env->redis_skip[0] == '\0';

    for (int k = 0; k < N_KINDS; k++)
        for (int pi = 0; pi < MAX_PROCS; pi++)
            m[k][pi] = bench_median(res->ns[k][pi], (size_t)o->runs);
    for (int k = 0; k < N_KINDS; k++)
        ovl[k] = bench_median(res->overlap[k], (size_t)o->runs);
    printf("bench_budget: per process %ld shared-memory ops or %ld round "
           "trips, x %d runs, medians; fleet tier %s\n",
           o->shm_ops, o->rpc_ops, o->runs,
           o->fleet ? "on (linked, both upstreams' views in force)" : "off");
    printf("  %-41s %9s %12s %8s\n", "ns/op (wall / ops per process)",
           "1 process", "2 processes", "overlap");
    for (int k = 0; k < N_KINDS; k++) {
        if (k == K_REDIS && !redis)
            printf("  %-41s skipped: %s\n", kinds[k].label, env->redis_skip);
        else
            printf("  %-41s %9.1f %12.1f %7.0f%%\n", kinds[k].label, m[k][0],
                   m[k][1], 100 * ovl[k]);
    }
    double *w = m[K_WITHDRAW], *a = m[K_ATOMIC], *c = m[K_HELLO],
           *d = m[K_REDIS], *dep = m[K_DEPOSIT], *full = m[K_DEPOSIT_FULL];
    printf("  ratios                     target    %10s %12s\n", "1 process",
           "2 processes");
    print_ratio("withdraw / (a)", "<= 2x", w[0] / a[0], w[1] / a[1],
                w[0] <= 2 * a[0] && w[1] <= 2 * a[1]);
    /* Deposits: the target is the contended figure, where the line moves
     * between cores (alone, a few instructions weigh against a 2 ns
     * atomic). */
    print_ratio("deposit below cap / (a)", "<= 2x, 2 proc", dep[0] / a[0],
                dep[1] / a[1], dep[1] <= 2 * a[1]);
    print_ratio("deposit full / (a)", "<= 2x, 2 proc", full[0] / a[0],
                full[1] / a[1], full[1] <= 2 * a[1]);
    print_ratio("(c) / withdraw", ">= 100x", c[0] / w[0], c[1] / w[1],
                c[0] >= 100 * w[0] && c[1] >= 100 * w[1]);
    if (redis)
        print_ratio("(d) / withdraw", ">= 100x", d[0] / w[0], d[1] / w[1],
                    d[0] >= 100 * w[0] && d[1] >= 100 * w[1]);
    else
        printf("  %-26s %-14s skipped\n", "(d) / withdraw", ">= 100x");
    printf("  withdrawals granted: %ld of %ld (each run's deposits refill "
           "the bucket first)\n",
           res->withdraw_granted, res->withdraw_tried);
    if (res->foreign_share >= 0)
        printf("  meanwhile other processes used %.0f%% of the %ld CPUs, "
               "steal %.0f%% (above a few %%, expect noise)\n",
               100 * res->foreign_share, sysconf(_SC_NPROCESSORS_ONLN),
               100 * res->steal_share);
}

static int parse_args(int argc, char **argv, options *o)
{
    long runs = 11;
    *o = (options){.shm_ops = 4000000, .rpc_ops = 5000};
    if (argc > 1 && strcmp(argv[1], "--fleet") == 0) {
        o->fleet = true;
        argv++, argc--;
    }
    if (argc > 4 ||
        (argc > 1 &&
         !retryd__parse_long(argv[1], 1, 1000000000, &o->shm_ops)) ||
        (argc > 2 && !retryd__parse_long(argv[2], 1, 100000000, &o->rpc_ops)) ||
        (argc > 3 && !retryd__parse_long(argv[3], 1, MAX_RUNS, &runs))) {
        fprintf(stderr, "usage: bench_budget [--fleet] [shm-ops-per-process>0] "
                        "[round-trips-per-process>0] [runs 1..64]\n");
        return -1;
    }
    o->runs = (int)runs;
    return 0;
}

/* --- neighbours ----------------------------------------------------------- */

/* Seconds of CPU the whole machine spent in user and system mode (the
 * modes our processes are charged in), and stolen, from /proc/stat. */
static int machine_busy_s(double *ret_busy, double *ret_steal)
{
    unsigned long long user, nice, sys, idle, iowait, irq, softirq, steal;
    FILE *f = fopen("/proc/stat", "re");
    if (f == NULL)
        return -1;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user,
                   &nice, &sys, &idle, &iowait, &irq, &softirq, &steal);
    if (fclose(f) != 0 || n != 8)
        return -1;
    double tick = (double)sysconf(_SC_CLK_TCK);
    *ret_busy = (double)(user + nice + sys) / tick;
    *ret_steal = (double)steal / tick;
    return 0;
}

/* Seconds of CPU used by this process and its reaped children (workers,
 * and after teardown the daemon and redis-server). */
static int own_busy_s(double *ret)
{
    struct rusage self, kids;
    if (getrusage(RUSAGE_SELF, &self) < 0 ||
        getrusage(RUSAGE_CHILDREN, &kids) < 0)
        return -1;
    struct timeval t[] = {self.ru_utime, self.ru_stime, kids.ru_utime,
                          kids.ru_stime};
    *ret = 0;
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        *ret += (double)t[i].tv_sec + (double)t[i].tv_usec / 1e6;
    return 0;
}

typedef struct cpu_mark {
    double machine, steal, own;
    int64_t wall_ns;
    bool ok;
} cpu_mark;

static cpu_mark cpu_now(void)
{
    cpu_mark m = {.wall_ns = bench_now_ns()};
    m.ok = machine_busy_s(&m.machine, &m.steal) == 0 && own_busy_s(&m.own) == 0;
    return m;
}

/* What others used between @p a and @p b, as shares of every CPU. */
static void neighbours(cpu_mark a, cpu_mark b, results *res)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double cpus = (double)(b.wall_ns - a.wall_ns) / 1e9 * (double)ncpu;
    res->foreign_share = res->steal_share = -1;
    if (!a.ok || !b.ok || cpus <= 0)
        return;
    double other = (b.machine - a.machine) - (b.own - a.own);
    res->foreign_share = other > 0 ? other / cpus : 0;
    res->steal_share = (b.steal - a.steal) / cpus;
}

int main(int argc, char **argv)
{
    static results res;
    bench_env env = {0};
    options o;

    if (parse_args(argc, argv, &o) < 0)
        return 64;
    if (bench_install_signals() < 0)
        return 1;
    cpu_mark start = cpu_now();
    int rc = env_setup(&env, &o);
    if (rc == 0)
        rc = measure(&env, &o, &res);
    if (env_teardown(&env) < 0)
        rc = -1;
    neighbours(start, cpu_now(), &res);
    if (rc == 0)
        print_results(&env, &o, &res);
    return rc == 0 ? 0 : 1;
}
