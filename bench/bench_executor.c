/*
 * Requests per second through the executor (retryd_execute) beside raw
 * libcurl, against the same keep-alive loopback server in the same run,
 * and the executor's overhead in microseconds per request. Target: at
 * least 0.97 of raw libcurl's throughput for safe GETs.
 *
 * The server is Debian's nginx, started by the benchmark with a
 * configuration of its own in a temporary directory, on a free port of
 * 127.0.0.1, and stopped at the end. Five variants, single-threaded, each
 * on its own keep-alive connection, warmed up untimed:
 *
 *   raw      one easy handle, options set once (URL, NOSIGNAL, no proxy,
 *            a write callback), then curl_easy_perform() in a loop; the
 *            body appended to a buffer kept across requests. The baseline.
 *   setup    raw libcurl doing per request what the executor does per
 *            attempt: curl_easy_reset() and the same options (timeouts,
 *            error buffer, PREREQFUNCTION, HEADERFUNCTION, SEEKFUNCTION,
 *            an "Expect:" header list, HTTP/1.1, HTTPGET), but no VERBOSE.
 *   verbose  the same plus VERBOSE and a DEBUGFUNCTION that counts the
 *            bytes sent, as the executor's does. Every callback here does
 *            (next to) nothing: what these cost is libcurl's.
 *   local    retryd_execute: a safe GET through a profile, a client with a
 *            process-local budget (RETRYD_HOST_LOCAL_ONLY), result freed.
 *   daemon   the same with a client attached to a real retryd daemon the
 *            benchmark starts (skipped when built without RETRYD_PATH).
 *
 * setup - raw is what libcurl's reset and options cost, verbose - setup
 * what its verbose/debug callbacks cost, local - verbose what retryd's own
 * bookkeeping costs (URL, header lists, result, evidence, decision,
 * budget, pool, bulkhead).
 *
 * In a run the variants take turns in blocks of BLOCK requests, the order
 * rotating, so that drift and a neighbour's bursts hit them all alike; each
 * figure is a median over runs. Beside wall time, the benchmark thread's
 * own CPU time per request is reported: it excludes nginx and time the
 * thread was not running, so it shows the client's overhead even on a busy
 * machine. Every request must answer 200 with the expected body, and
 * nginx's stub_status must count exactly the timed requests and no new
 * connection in every run: a retry, a libcurl re-send or a lost keep-alive
 * connection fails the benchmark instead of skewing it.
 *
 * By default the benchmark and nginx share one CPU (see place()): each
 * request is then two context switches on that CPU. On separate CPUs each
 * request wakes an idle CPU twice, which in a virtual machine costs tens
 * to hundreds of microseconds and swamps what is measured here.
 *
 * nginx runs with master_process off: one process that serves (the same
 * event loop and HTTP code as a worker's), is signalled and reaped
 * directly, and dies with us (PR_SET_PDEATHSIG). It also never changes
 * user: as root, a master's workers would switch to "nobody", which cannot
 * read the 0700 temporary directory the static file lives in.
 *
 * usage: bench_executor [requests-per-run] [runs] [path] [cpus]
 *        path: /ok (default, 2-byte body) or /static/1k (1 KiB file)
 *        cpus: same (default), split or none; see place()
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include "bench_common.h"
#include "retryd/client.h"

#ifndef NGINX_PATH
#define NGINX_PATH "/usr/sbin/nginx"
#endif

#define MAX_RUNS 64
#define START_TIMEOUT_MS 10000 /* nginx accepting, retryd READY */
#define STOP_TIMEOUT_MS 10000  /* signal to exit, then SIGKILL */
#define BIND_TRIES 5           /* fresh ports when nginx cannot bind */
#define STATIC_BYTES 1024
#define TARGET_RATIO 0.97
#define BLOCK 500 /* requests a variant makes before the next one's turn */

enum variant { V_RAW, V_SETUP, V_VERBOSE, V_LOCAL, V_DAEMON, N_VARIANTS };

static const char *const labels[N_VARIANTS] = {
    [V_RAW] = "raw libcurl, options once (baseline)",
    [V_SETUP] = "raw + executor's reset/options",
    [V_VERBOSE] = "raw + reset/options + VERBOSE/debug",
    [V_LOCAL] = "retryd_execute, local budget",
    [V_DAEMON] = "retryd_execute, daemon budget",
};

/* What the callbacks of the raw variants fill. */
typedef struct sink {
    char *buf;
    size_t len, cap;
    long prereq_calls, header_lines;
    size_t bytes_out;
} sink;

typedef struct bench {
    char dir[64];
    char url[128];     /* http://127.0.0.1:port/path */
    char base_url[64]; /* http://127.0.0.1:port */
    char path[64];
    int port;
    pid_t nginx_pid;   /* 0 when not running */
    pid_t daemon_pid;  /* 0 when not running */
    char control[128]; /* the daemon's control socket */
    CURL *raw[3];      /* V_RAW, V_SETUP, V_VERBOSE */
    CURL *status;      /* stub_status queries, its own connection */
    struct curl_slist *expect;
    sink sk;
    retryd_client *client[2]; /* local, daemon */
    retryd_profile *profile[2];
    size_t body_len; /* what every answer must carry */
    char errbuf[CURL_ERROR_SIZE];
} bench;

static volatile sig_atomic_t g_stop;

/* CPU placement: the benchmark's and nginx's CPU, -1 for "not pinned". */
static int g_cpu_self = -1, g_cpu_nginx = -1;
static const char *g_pin = "same";

static int fail_errno(const char *what)
{
    fprintf(stderr, "bench_executor: %s: %s\n", what, strerror(errno));
    return -1;
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_executor: %s\n", what);
    return -1;
}

static int64_t now_ms(void)
{
    return bench_now_ns() / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    (void)nanosleep(&ts, NULL); /* an early wake only shortens a poll */
}

/* --- child processes ------------------------------------------------------ */

/* In a forked child: die with the parent, output to @p log, signals back
 * to their defaults (an ignored signal survives exec). */
static void child_prepare(pid_t parent, int deathsig, const char *log, int cpu)
{
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT};
    cpu_set_t set;
    if (prctl(PR_SET_PDEATHSIG, deathsig) < 0 || getppid() != parent)
        _exit(127);
    CPU_ZERO(&set);
    if (cpu >= 0)
        CPU_SET(cpu, &set);
    if (cpu >= 0 && sched_setaffinity(0, sizeof(set), &set) < 0)
        _exit(127);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (signal(sigs[i], SIG_DFL) == SIG_ERR)
            _exit(127);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
        _exit(127);
}

/* Wait at most @p timeout_ms for @p pid, then SIGKILL it. */
static int reap(pid_t pid, int timeout_ms, int *status)
{
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return fail_errno("waitpid");
        if (now_ms() > deadline) {
            fprintf(stderr, "bench_executor: pid %d did not exit, killing\n",
                    (int)pid);
            if (kill(pid, SIGKILL) < 0)
                return fail_errno("kill");
            while ((r = waitpid(pid, status, 0)) < 0 && errno == EINTR)
                ;
            return r == pid ? 0 : fail_errno("waitpid");
        }
        sleep_ms(1);
    }
}

/* Signal, reap; 0 when it exited with code 0. */
static int stop_child(pid_t *pid, int sig, const char *name)
{
    int status = 0;
    if (*pid <= 0)
        return 0;
    if (kill(*pid, sig) < 0 && errno != ESRCH)
        return fail_errno("kill");
    int r = reap(*pid, STOP_TIMEOUT_MS, &status);
    *pid = 0;
    if (r == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        fprintf(stderr, "bench_executor: %s ended with %s %d\n", name,
                WIFEXITED(status) ? "code" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return -1;
    }
    return r;
}

/* The end of a log file, so that a failed start explains itself. */
static void print_tail(const char *path)
{
    char buf[2048];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    off_t end = lseek(fd, 0, SEEK_END);
    (void)lseek(fd,
                end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0,
                SEEK_SET);
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    (void)close(fd); /* read-only */
    if (n > 0)
        fprintf(stderr, "--- %s (end) ---\n%.*s\n", path, (int)n, buf);
}

static bool file_contains(const char *path, const char *needle)
{
    char buf[8192];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    (void)close(fd); /* read-only */
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

static int write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "we");
    if (f == NULL)
        return fail_errno(path);
    size_t n = fwrite(text, 1, len, f);
    if (fclose(f) != 0 || n != len)
        return fail_errno(path);
    return 0;
}

/* --- nginx ---------------------------------------------------------------- */

/* A port the kernel just handed out, so most likely free. */
static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail_errno("socket");
    int port = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
                       getsockname(fd, (struct sockaddr *)&sa, &len) < 0
                   ? fail_errno("binding port 0")
                   : ntohs(sa.sin_port);
    (void)close(fd); /* never used */
    return port;
}

/* Every path nginx would otherwise take from its compiled-in defaults
 * (/var/lib/nginx/..., /run/nginx.pid, /var/lock/nginx.lock) points into
 * the directory, so it needs nothing outside it. */
static int write_nginx_config(const bench *b, const char *path)
{
    const char *d = b->dir;
    char text[2048];
    int n = snprintf(text, sizeof(text),
                     "daemon off;\n"
                     "master_process off;\n"
                     "worker_processes 1;\n"
                     "error_log %s/error.log warn;\n"
                     "pid %s/nginx.pid;\n"
                     "lock_file %s/nginx.lock;\n"
                     "events { worker_connections 64; }\n"
                     "http {\n"
                     "    access_log off;\n"
                     "    keepalive_requests 1000000;\n"
                     "    keepalive_timeout 60s;\n"
                     "    default_type application/octet-stream;\n"
                     "    client_body_temp_path %s/tmp/body;\n"
                     "    proxy_temp_path %s/tmp/proxy;\n"
                     "    fastcgi_temp_path %s/tmp/fastcgi;\n"
                     "    uwsgi_temp_path %s/tmp/uwsgi;\n"
                     "    scgi_temp_path %s/tmp/scgi;\n"
                     "    server {\n"
                     "        listen 127.0.0.1:%d;\n"
                     "        location /ok { return 200 \"ok\"; }\n"
                     "        location /static/ { root %s; }\n"
                     "        location = /status { stub_status; }\n"
                     "    }\n"
                     "}\n",
                     d, d, d, d, d, d, d, d, b->port, d);
    if (n < 0 || (size_t)n >= sizeof(text))
        return fail("nginx configuration too long");
    return write_file(path, text, (size_t)n);
}

static int connect_once(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    (void)close(fd); /* a probe */
    return r;
}

/* The pid nginx wrote to its pid file, or -1. It writes it only once it
 * listens, so it tells our nginx from anything else on the port. */
static pid_t pid_file(const bench *b)
{
    char path[128], buf[32];
    snprintf(path, sizeof(path), "%s/nginx.pid", b->dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    (void)close(fd); /* read-only */
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return (pid_t)atol(buf);
}

/* 1: our nginx is accepting; 0: it exited (its status in *status); -1:
 * timeout or error. */
static int wait_nginx(bench *b, int *status)
{
    int64_t deadline = now_ms() + START_TIMEOUT_MS;
    while (now_ms() < deadline && !g_stop) {
        pid_t r = waitpid(b->nginx_pid, status, WNOHANG);
        if (r == b->nginx_pid) {
            b->nginx_pid = 0;
            return 0;
        }
        if (r < 0)
            return fail_errno("waitpid");
        if (pid_file(b) == b->nginx_pid && connect_once(b->port) == 0)
            return 1;
        sleep_ms(5);
    }
    return fail(g_stop ? "interrupted" : "nginx did not accept within 10 s");
}

static int start_nginx(bench *b)
{
    char conf[128], log[128], stderr_log[128], pid_path[128];
    static const char *const sub[] = {"tmp", "static"};
    char static_body[STATIC_BYTES], path[128];

    for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", b->dir, sub[i]);
        if (mkdir(path, 0700) < 0)
            return fail_errno(path);
    }
    for (size_t i = 0; i < sizeof(static_body); i++)
        static_body[i] = (char)('a' + i % 26);
    snprintf(path, sizeof(path), "%s/static/1k", b->dir);
    if (write_file(path, static_body, sizeof(static_body)) < 0)
        return -1;
    if (access(NGINX_PATH, X_OK) < 0)
        return fail_errno(NGINX_PATH " (Debian: apt-get install nginx)");
    snprintf(conf, sizeof(conf), "%s/nginx.conf", b->dir);
    snprintf(log, sizeof(log), "%s/error.log", b->dir);
    snprintf(stderr_log, sizeof(stderr_log), "%s/nginx.stderr", b->dir);
    snprintf(pid_path, sizeof(pid_path), "%s/nginx.pid", b->dir);
    for (int attempt = 1; attempt <= BIND_TRIES; attempt++) {
        int status = 0;
        if ((b->port = free_port()) < 0 || write_nginx_config(b, conf) < 0)
            return -1;
        /* Fresh logs and pid file: the ones to look at are this
         * attempt's. */
        if ((unlink(log) < 0 && errno != ENOENT) ||
            (unlink(stderr_log) < 0 && errno != ENOENT) ||
            (unlink(pid_path) < 0 && errno != ENOENT))
            return fail_errno("unlink");
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0)
            return fail_errno("fork");
        if (pid == 0) {
            child_prepare(parent, SIGTERM, stderr_log, g_cpu_nginx);
            /* -p: the prefix; -e: the error log before the configuration
             * is read (the compiled-in one is stderr). */
            execl(NGINX_PATH, "nginx", "-p", b->dir, "-c", conf, "-e", log,
                  (char *)NULL);
            fprintf(stderr, "exec %s: %s\n", NGINX_PATH, strerror(errno));
            _exit(127);
        }
        b->nginx_pid = pid;
        int r = wait_nginx(b, &status);
        if (r == 1)
            return 0;
        if (r == 0 && (file_contains(log, "Address already in use") ||
                       file_contains(stderr_log, "Address already in use"))) {
            fprintf(stderr,
                    "bench_executor: port %d was taken, trying another\n",
                    b->port);
            continue;
        }
        if (r == 0)
            fprintf(stderr, "bench_executor: nginx exited at start\n");
        print_tail(stderr_log);
        print_tail(log);
        return -1;
    }
    return fail("nginx could not bind a free port");
}

/* --- the retryd daemon ---------------------------------------------------- */

#ifdef RETRYD_PATH
static int start_daemon(bench *b)
{
    char conf[128], log[128], text[256];
    int p[2];

    snprintf(conf, sizeof(conf), "%s/retryd.conf", b->dir);
    snprintf(log, sizeof(log), "%s/retryd.log", b->dir);
    snprintf(b->control, sizeof(b->control), "%s/run/control.sock", b->dir);
    int n = snprintf(text, sizeof(text),
                     "[retryd]\nruntime_dir = %s/run\nlog_level = warning\n",
                     b->dir);
    if (write_file(conf, text, (size_t)n) < 0)
        return -1;
    if (pipe2(p, O_CLOEXEC) < 0)
        return fail_errno("pipe2");
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        char fdarg[16];
        child_prepare(parent, SIGTERM, log, -1);
        int fd = dup(p[1]); /* without O_CLOEXEC: it survives exec */
        if (fd < 0)
            _exit(127);
        snprintf(fdarg, sizeof(fdarg), "%d", fd);
        execl(RETRYD_PATH, "retryd", "--config", conf, "--notify-fd", fdarg,
              (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", RETRYD_PATH, strerror(errno));
        _exit(127);
    }
    int r = pid < 0 ? fail_errno("fork") : 0;
    (void)close(p[1]); /* only the daemon writes */
    if (pid > 0) {
        /* Readiness is the daemon's own word (--notify-fd), not a sleep. */
        char buf[8] = {0};
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        int64_t deadline = now_ms() + START_TIMEOUT_MS, left;
        int pr = 0;
        b->daemon_pid = pid;
        while (!g_stop && (left = deadline - now_ms()) > 0 &&
               (pr = poll(&pf, 1, (int)left)) < 0 && errno == EINTR)
            ;
        if (pr != 1 || read(p[0], buf, 6) != 6 ||
            memcmp(buf, "READY\n", 6) != 0)
            r = fail("retryd did not become ready");
    }
    (void)close(p[0]); /* done with */
    if (r < 0)
        print_tail(log);
    return r;
}
#endif

/* --- raw libcurl ---------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    sink *s = ctx;
    size_t len = size * n;
    if (s->len + len > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + len)
            cap *= 2;
        char *nb = realloc(s->buf, cap);
        if (nb == NULL)
            return 0;
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, len);
    s->len += len;
    return len;
}

static size_t on_header(char *line, size_t size, size_t n, void *ctx)
{
    sink *s = ctx;
    (void)line;
    s->header_lines++;
    return size * n;
}

static int on_prereq(void *ctx, char *ip1, char *ip2, int port1, int port2)
{
    sink *s = ctx;
    (void)ip1, (void)ip2, (void)port1, (void)port2;
    s->prereq_calls++;
    return CURL_PREREQFUNC_OK;
}

static int on_debug(CURL *h, curl_infotype type, char *data, size_t size,
                    void *ctx)
{
    sink *s = ctx;
    (void)h, (void)data;
    if (type == CURLINFO_HEADER_OUT || type == CURLINFO_DATA_OUT)
        s->bytes_out += size;
    return 0;
}

static int on_seek(void *ctx, curl_off_t offset, int origin)
{
    (void)ctx, (void)offset, (void)origin;
    return CURL_SEEKFUNC_FAIL;
}

/* The options of the baseline, set once on its handle. */
static void raw_options(bench *b, CURL *h)
{
    curl_easy_setopt(h, CURLOPT_URL, b->url);
    /* What any threaded program sets (and the executor does): without it,
     * libcurl swaps SIGPIPE's handler around every transfer. */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* as the executor: no proxy */
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b->sk);
}

/* What libclient/execute.c's setup() does before every attempt, for a GET
 * on an HTTP/1.1 profile with the default timeouts (10 s attempt, 2 s
 * connect). */
static void executor_options(bench *b, CURL *h, bool verbose)
{
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, b->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, b->errbuf);
    if (verbose) {
        curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
        curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, on_debug);
        curl_easy_setopt(h, CURLOPT_DEBUGDATA, &b->sk);
    }
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, on_prereq);
    curl_easy_setopt(h, CURLOPT_PREREQDATA, &b->sk);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &b->sk);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b->sk);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, &b->sk);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, b->expect);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
}

/* One request on a raw handle; 0 when it answered 200 with the body. */
static int raw_request(bench *b, enum variant v)
{
    CURL *h = b->raw[v];
    long code = 0, version = 0;

    if (v != V_RAW)
        executor_options(b, h, v == V_VERBOSE);
    b->sk.len = 0;
    CURLcode rc = curl_easy_perform(h);
    if (v != V_RAW) /* the executor reads it after every attempt */
        curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &version);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK || code != 200 || b->sk.len != b->body_len) {
        fprintf(stderr,
                "bench_executor: %s: %s, status %ld, %zu body bytes "
                "(expected 200, %zu)\n",
                labels[v], curl_easy_strerror(rc), code, b->sk.len,
                b->body_len);
        return -1;
    }
    return 0;
}

/* --- the executor --------------------------------------------------------- */

static int exec_request(bench *b, enum variant v)
{
    retryd_request req = {.sz = sizeof(req),
                          .path = b->path,
                          .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    retryd_result *res = NULL;
    size_t len = 0;

    int r = retryd_execute(b->profile[v - V_LOCAL], &req, &res);
    if (r < 0) {
        fprintf(stderr, "bench_executor: retryd_execute: %s\n",
                retryd_strerror(r));
        return -1;
    }
    (void)retryd_result_body(res, &len);
    bool ok = retryd_result_outcome(res) == RETRYD_OUTCOME_RESPONSE &&
              retryd_result_status(res) == 200 && len == b->body_len &&
              retryd_result_attempt_count(res) == 1;
    if (!ok)
        fprintf(stderr,
                "bench_executor: %s: %s, status %d, %zu body bytes, %zu "
                "attempts, error \"%s\" (expected response 200, %zu, 1)\n",
                labels[v], retryd_outcome_name(retryd_result_outcome(res)),
                retryd_result_status(res), len,
                retryd_result_attempt_count(res), retryd_result_error(res),
                b->body_len);
    retryd_result_free(res);
    return ok ? 0 : -1;
}

static int open_executor(bench *b, int i, const char *control)
{
    retryd_client_opts co = {.sz = sizeof(co)};
    retryd_profile_opts po = {.sz = sizeof(po), .base_url = b->base_url};

    co.host.sz = sizeof(co.host);
    co.host.client_name = "bench_executor";
    if (control == NULL)
        co.host.flags = RETRYD_HOST_LOCAL_ONLY;
    else
        co.host.control_socket = control;
    int r = retryd_client_new(&co, &b->client[i]);
    if (r == 0)
        r = retryd_profile_new(b->client[i], &po, &b->profile[i]);
    if (r < 0) {
        fprintf(stderr, "bench_executor: opening the executor: %s\n",
                retryd_strerror(r));
        return -1;
    }
    /* Unattached, the library would spend from a process-local bucket: a
     * figure for that is not the daemon's. */
    if (control != NULL &&
        (!retryd_host_attached(retryd_client_host(b->client[i])) ||
         !retryd_upstream_shared(retryd_profile_budget(b->profile[i]))))
        return fail("not attached to the daemon's segment");
    return 0;
}

/* --- measuring ------------------------------------------------------------ */

static int request(bench *b, enum variant v)
{
    if (g_stop)
        return fail("interrupted");
    return v >= V_LOCAL ? exec_request(b, v) : raw_request(b, v);
}

/* nginx's own counters: connections accepted, requests served. */
static int nginx_counters(bench *b, long *accepts, long *requests)
{
    long code = 0, handled;
    char nul[1] = {'\0'};
    b->sk.len = 0;
    CURLcode rc = curl_easy_perform(b->status);
    curl_easy_getinfo(b->status, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK || code != 200 || on_body(nul, 1, 1, &b->sk) != 1)
        return fail("stub_status query failed");
    const char *p = strstr(b->sk.buf, "requests\n");
    if (p == NULL ||
        sscanf(p + 9, " %ld %ld %ld", accepts, &handled, requests) != 3)
        return fail("stub_status answer not understood");
    return 0;
}

/* This thread's CPU time, user and system: not nginx's, and not the time
 * it waited or was preempted. */
static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * One run: @p n requests of each of the @p nv variants, in blocks of
 * BLOCK, the variants taking turns block by block (the order rotating), so
 * that a burst of load from a neighbour hits them all alike. Each
 * variant's requests per second in @p rps, and its CPU time per request
 * (microseconds) in @p cpu_us.
 */
static int timed_run(bench *b, int nv, long n, double *rps, double *cpu_us)
{
    long acc0, req0, acc1, req1;
    int64_t ns[N_VARIANTS] = {0}, cpu[N_VARIANTS] = {0};

    if (nginx_counters(b, &acc0, &req0) < 0)
        return -1;
    for (long done = 0, round = 0; done < n; done += BLOCK, round++) {
        long m = n - done < BLOCK ? n - done : BLOCK;
        for (int k = 0; k < nv; k++) {
            enum variant v = (enum variant)((round + k) % nv);
            int64_t t0 = bench_now_ns(), c0 = thread_cpu_ns();
            for (long i = 0; i < m; i++)
                if (request(b, v) < 0)
                    return -1;
            cpu[v] += thread_cpu_ns() - c0;
            ns[v] += bench_now_ns() - t0;
        }
    }
    if (nginx_counters(b, &acc1, &req1) < 0)
        return -1;
    /* The second query is counted too; it reuses its own connection. */
    if (acc1 != acc0 || req1 - req0 != nv * n + 1) {
        fprintf(stderr,
                "bench_executor: nginx saw %ld requests and %ld new "
                "connections for %ld requests on warm connections\n",
                req1 - req0 - 1, acc1 - acc0, nv * n);
        return -1;
    }
    for (int v = 0; v < nv; v++) {
        rps[v] = (double)n * 1e9 / (double)ns[v];
        cpu_us[v] = (double)cpu[v] / 1e3 / (double)n;
    }
    return 0;
}

static int setup(bench *b, bool with_daemon)
{
    char probe[192];
    long accepts, requests;

    snprintf(b->dir, sizeof(b->dir), "/tmp/retryd-bench-exec-XXXXXX");
    if (mkdtemp(b->dir) == NULL) {
        b->dir[0] = '\0';
        return fail_errno("mkdtemp");
    }
    /* The servers first: they inherit no connection of ours. */
    if (start_nginx(b) < 0)
        return -1;
#ifdef RETRYD_PATH
    if (with_daemon && start_daemon(b) < 0)
        return -1;
#endif
    snprintf(b->base_url, sizeof(b->base_url), "http://127.0.0.1:%d", b->port);
    snprintf(b->url, sizeof(b->url), "%s%s", b->base_url, b->path);
    snprintf(probe, sizeof(probe), "%s/status", b->base_url);
    b->expect = curl_slist_append(NULL, "Expect:");
    for (int i = 0; i < 3; i++)
        b->raw[i] = curl_easy_init();
    b->status = curl_easy_init();
    if (b->expect == NULL || !b->raw[0] || !b->raw[1] || !b->raw[2] ||
        !b->status)
        return fail("out of memory");
    curl_easy_setopt(b->status, CURLOPT_URL, probe);
    curl_easy_setopt(b->status, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(b->status, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(b->status, CURLOPT_PROXY, "");
    curl_easy_setopt(b->status, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(b->status, CURLOPT_WRITEDATA, &b->sk);
    if (nginx_counters(b, &accepts, &requests) < 0)
        return -1;
    raw_options(b, b->raw[V_RAW]);
    /* The expected body: what the baseline gets first. */
    b->sk.len = 0;
    long code = 0;
    CURLcode rc = curl_easy_perform(b->raw[V_RAW]);
    curl_easy_getinfo(b->raw[V_RAW], CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK || code != 200) {
        fprintf(stderr, "bench_executor: GET %s: %s, status %ld\n", b->url,
                curl_easy_strerror(rc), code);
        return -1;
    }
    b->body_len = b->sk.len;
    if (open_executor(b, 0, NULL) < 0)
        return -1;
    return with_daemon ? open_executor(b, 1, b->control) : 0;
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path) < 0 ? fail_errno(path) : 0;
}

/* Everything setup made, whatever part of it succeeded. */
static int teardown(bench *b)
{
    int rc = 0;
    for (int i = 0; i < 2; i++) {
        retryd_profile_free(b->profile[i]); /* closes its connections */
        retryd_client_free(b->client[i]);
    }
    for (int i = 0; i < 3; i++)
        curl_easy_cleanup(b->raw[i]);
    curl_easy_cleanup(b->status);
    curl_slist_free_all(b->expect);
    free(b->sk.buf);
    /* SIGQUIT: nginx's graceful shutdown; SIGTERM: retryd's clean stop. */
    if (stop_child(&b->nginx_pid, SIGQUIT, "nginx") < 0)
        rc = -1;
    if (stop_child(&b->daemon_pid, SIGTERM, "retryd") < 0)
        rc = -1;
    if (b->dir[0] != '\0' &&
        nftw(b->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        rc = fail_errno(b->dir);
    return rc;
}

/* --- the report ----------------------------------------------------------- */

static void report(const bench *b, long n, int runs, double rps[][MAX_RUNS],
                   double cpu_us[][MAX_RUNS], bool with_daemon)
{
    double med[N_VARIANTS], lo[N_VARIANTS], hi[N_VARIANTS], us[N_VARIANTS],
        cpu[N_VARIANTS];
    int nv = with_daemon ? N_VARIANTS : V_DAEMON;

    for (int v = 0; v < nv; v++) {
        med[v] = bench_median(rps[v], (size_t)runs); /* sorts */
        lo[v] = rps[v][0];
        hi[v] = rps[v][runs - 1];
        us[v] = 1e6 / med[v];
        cpu[v] = bench_median(cpu_us[v], (size_t)runs);
    }
    printf("bench_executor: %ld x GET %s (%zu-byte body) per variant and run "
           "x %d runs, medians\n",
           n, b->path, b->body_len, runs);
    printf("  nginx on 127.0.0.1:%d, one keep-alive connection per variant, "
           "libcurl %s\n",
           b->port, curl_version_info(CURLVERSION_NOW)->version);
    if (g_cpu_self < 0)
        printf("  cpus: none (not pinned)\n");
    else
        printf("  cpus: %s (benchmark on cpu %d, nginx on cpu %d)\n", g_pin,
               g_cpu_self, g_cpu_nginx);
    printf("  %-37s %7s %7s %6s %6s %8s %6s  %s\n", "", "req/s", "us/req",
           "+us", "x raw", "cpu us", "+cpu", "req/s range");
    for (int v = 0; v < N_VARIANTS; v++) {
        if (v >= nv) {
            printf("  %-37s skipped: built without RETRYD_PATH\n", labels[v]);
            continue;
        }
        printf("  %-37s %7.0f %7.2f %6.2f %6.3f %8.2f %6.2f  %.0f..%.0f\n",
               labels[v], med[v], us[v], us[v] - us[V_RAW], med[v] / med[V_RAW],
               cpu[v], cpu[v] - cpu[V_RAW], lo[v], hi[v]);
    }
    printf("  the local executor's overhead, %.2f us/req (cpu %.2f), "
           "splits into:\n",
           us[V_LOCAL] - us[V_RAW], cpu[V_LOCAL] - cpu[V_RAW]);
    printf("    %-36s %6.2f us  (cpu %5.2f)\n", "libcurl: reset + options",
           us[V_SETUP] - us[V_RAW], cpu[V_SETUP] - cpu[V_RAW]);
    printf("    %-36s %6.2f us  (cpu %5.2f)\n",
           "libcurl: VERBOSE + debug callback", us[V_VERBOSE] - us[V_SETUP],
           cpu[V_VERBOSE] - cpu[V_SETUP]);
    printf("    %-36s %6.2f us  (cpu %5.2f)\n", "retryd's own bookkeeping",
           us[V_LOCAL] - us[V_VERBOSE], cpu[V_LOCAL] - cpu[V_VERBOSE]);
    for (int v = V_LOCAL; v < nv; v++)
        printf("  target: %-29s >= %.2f x raw: %.3f  %s\n", labels[v],
               TARGET_RATIO, med[v] / med[V_RAW],
               med[v] >= TARGET_RATIO * med[V_RAW] ? "met" : "MISSED");
    printf("  (us/req: wall time, 1e6 / req/s; cpu us: the benchmark "
           "thread's own CPU time per request,\n   user + system, without "
           "nginx's; +: above the baseline. Every request answered 200\n"
           "   with its body; in every run nginx counted exactly the requests "
           "and no new connection.)\n");
}

/* "same": the benchmark and nginx on one CPU, so that every request is a
 * context switch on that CPU; "split": one CPU each, so that every request
 * wakes the other CPU; "none": wherever the scheduler puts them. */
static int place(void)
{
    cpu_set_t set;
    int cpus[2], n = 0;

    if (strcmp(g_pin, "none") == 0)
        return 0;
    if (sched_getaffinity(0, sizeof(set), &set) < 0)
        return fail_errno("sched_getaffinity");
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    if (strcmp(g_pin, "split") == 0 && n < 2)
        return fail("\"split\" needs two CPUs");
    g_cpu_self = cpus[0];
    g_cpu_nginx = strcmp(g_pin, "split") == 0 ? cpus[1] : cpus[0];
    CPU_ZERO(&set);
    CPU_SET(g_cpu_self, &set);
    return sched_setaffinity(0, sizeof(set), &set) < 0
               ? fail_errno("sched_setaffinity")
               : 0;
}

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* No SA_RESTART: a signal interrupts our waits, and cleanup runs. */
static int install_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    if (sigemptyset(&sa.sa_mask) < 0)
        return fail_errno("sigemptyset");
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (sigaction(sigs[i], &sa, NULL) < 0)
            return fail_errno("sigaction");
    return signal(SIGPIPE, SIG_IGN) == SIG_ERR ? fail_errno("signal") : 0;
}

static bool parse_long(const char *s, long lo, long hi, long *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *ret = v;
    return true;
}

int main(int argc, char **argv)
{
    static double rps[N_VARIANTS][MAX_RUNS], cpu_us[N_VARIANTS][MAX_RUNS];
    static bench b;
    long n = 20000, runs = 7;
#ifdef RETRYD_PATH
    bool with_daemon = true;
#else
    bool with_daemon = false;
#endif

    snprintf(b.path, sizeof(b.path), "/ok");
    if (argc > 5 || (argc > 1 && !parse_long(argv[1], 1, 100000000, &n)) ||
        (argc > 2 && !parse_long(argv[2], 1, MAX_RUNS, &runs)) ||
        (argc > 3 && (argv[3][0] != '/' || strlen(argv[3]) >= sizeof(b.path) ||
                      strpbrk(argv[3], " \t\r\n") != NULL)) ||
        (argc > 4 && strcmp(argv[4], "same") != 0 &&
         strcmp(argv[4], "split") != 0 && strcmp(argv[4], "none") != 0)) {
        fprintf(stderr, "usage: bench_executor [requests-per-run>0] "
                        "[runs 1..64] [path: /ok or /static/1k] "
                        "[cpus: same|split|none]\n");
        return 64;
    }
    if (argc > 3)
        snprintf(b.path, sizeof(b.path), "%s", argv[3]);
    if (argc > 4)
        g_pin = argv[4];
    if (install_signals() < 0 || place() < 0)
        return 1;
    /* Before any handle exists; retryd_client_new's own call is then a
     * no-op. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fail("curl_global_init failed");
        return 1;
    }
    int nv = with_daemon ? N_VARIANTS : V_DAEMON;
    int rc = setup(&b, with_daemon);
    /* Warm up every variant untimed: connections, the pool's handle, the
     * budget's lane, caches. */
    long warm = n / 10 < 1000 ? n / 10 + 1 : 1000;
    for (int v = 0; v < nv && rc == 0; v++)
        for (long i = 0; i < warm && rc == 0; i++)
            rc = request(&b, (enum variant)v);
    for (int r = 0; r < runs && rc == 0; r++) {
        double one[N_VARIANTS], one_cpu[N_VARIANTS];
        rc = timed_run(&b, nv, n, one, one_cpu);
        for (int v = 0; v < nv && rc == 0; v++) {
            rps[v][r] = one[v];
            cpu_us[v][r] = one_cpu[v];
        }
    }
    if (teardown(&b) < 0)
        rc = -1;
    if (rc == 0)
        report(&b, n, (int)runs, rps, cpu_us, with_daemon);
    curl_global_cleanup();
    return rc == 0 ? 0 : 1;
}
