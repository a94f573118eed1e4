/* SPDX-License-Identifier: MIT */
/* The benchmarks' loopback nginx, CPU placement and nginx's counters; see
 * bench_nginx.h. */
#include "bench_nginx.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_proc.h"

#define BIND_TRIES 5 /* fresh ports when nginx cannot bind */
#define STATIC_BYTES 1024

/* Runs the calling thread (or a child about to exec) on @p cpu alone. */
static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set);
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

/* Every path nginx would otherwise take from its compiled-in defaults
 * (/var/lib/nginx/..., /run/nginx.pid, /var/lock/nginx.lock) points into
 * the directory, so it needs nothing outside it. */
static int write_config(const bench_nginx *ng, const char *path)
{
    const char *d = ng->dir;
    char text[2048];
    int n =
        snprintf(text, sizeof(text),
                 "daemon off;\n"
                 "master_process off;\n"
                 "worker_processes 1;\n"
                 "error_log %s/error.log warn;\n"
                 "pid %s/nginx.pid;\n"
                 "lock_file %s/nginx.lock;\n"
                 "events { worker_connections %d; }\n"
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
                 d, d, d, ng->worker_connections, d, d, d, d, d, ng->port, d);
    if (n < 0 || (size_t)n >= sizeof(text))
        return bench_fail("nginx configuration too long");
    return bench_write_file(path, text, (size_t)n);
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
static pid_t pid_file(const bench_nginx *ng)
{
    char path[128], buf[32];
    snprintf(path, sizeof(path), "%s/nginx.pid", ng->dir);
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
static int wait_nginx(bench_nginx *ng, int *status)
{
    int64_t deadline = bench_now_ms() + BENCH_START_TIMEOUT_MS;
    while (bench_now_ms() < deadline && !bench_stop) {
        pid_t r = waitpid(ng->pid, status, WNOHANG);
        if (r == ng->pid) {
            ng->pid = 0;
            return 0;
        }
        if (r < 0)
            return bench_fail_errno("waitpid");
        if (pid_file(ng) == ng->pid && connect_once(ng->port) == 0)
            return 1;
        bench_sleep_ms(5);
    }
    return bench_fail(bench_stop ? "interrupted"
                                 : "nginx did not accept within 10 s");
}

/* The directories and the static file nginx serves. */
static int prepare_files(const bench_nginx *ng)
{
    static const char *const sub[] = {"tmp", "static"};
    char static_body[STATIC_BYTES], path[128];

    for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", ng->dir, sub[i]);
        if (mkdir(path, 0700) < 0)
            return bench_fail_errno(path);
    }
    for (size_t i = 0; i < sizeof(static_body); i++)
        static_body[i] = (char)('a' + i % 26);
    snprintf(path, sizeof(path), "%s/static/1k", ng->dir);
    if (bench_write_file(path, static_body, sizeof(static_body)) < 0)
        return -1;
    if (access(NGINX_PATH, X_OK) < 0)
        return bench_fail_errno(NGINX_PATH " (Debian: apt-get install nginx)");
    return 0;
}

/* One start on a fresh port: 1 accepting, 0 the port was taken, -1. */
static int launch(bench_nginx *ng)
{
    char conf[128], log[128], stderr_log[128], pid_path[128];
    int status = 0;
    snprintf(conf, sizeof(conf), "%s/nginx.conf", ng->dir);
    snprintf(log, sizeof(log), "%s/error.log", ng->dir);
    snprintf(stderr_log, sizeof(stderr_log), "%s/nginx.stderr", ng->dir);
    snprintf(pid_path, sizeof(pid_path), "%s/nginx.pid", ng->dir);
    if ((ng->port = bench_free_port()) < 0)
        return bench_fail_errno("no free TCP port");
    if (write_config(ng, conf) < 0)
        return -1;
    /* Fresh logs and pid file: the ones to look at are this attempt's. */
    if ((unlink(log) < 0 && errno != ENOENT) ||
        (unlink(stderr_log) < 0 && errno != ENOENT) ||
        (unlink(pid_path) < 0 && errno != ENOENT))
        return bench_fail_errno("unlink");
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return bench_fail_errno("fork");
    if (pid == 0) {
        bench_child_prepare(parent, SIGTERM, stderr_log);
        if (ng->cpu >= 0 && pin(ng->cpu) < 0)
            _exit(127);
        /* -p: the prefix; -e: the error log before the configuration is
         * read (the compiled-in one is stderr). */
        execl(NGINX_PATH, "nginx", "-p", ng->dir, "-c", conf, "-e", log,
              (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", NGINX_PATH, strerror(errno));
        _exit(127);
    }
    ng->pid = pid;
    int r = wait_nginx(ng, &status);
    if (r == 1)
        return 1;
    if (r == 0 && (file_contains(log, "Address already in use") ||
                   file_contains(stderr_log, "Address already in use"))) {
        fprintf(stderr, "%s: port %d was taken, trying another\n", bench_prog,
                ng->port);
        return 0;
    }
    if (r == 0)
        bench_fail("nginx exited at start");
    bench_print_tail(stderr_log);
    bench_print_tail(log);
    return -1;
}

int bench_nginx_start(bench_nginx *ng)
{
    if (prepare_files(ng) < 0)
        return -1;
    for (int attempt = 1; attempt <= BIND_TRIES; attempt++) {
        int r = launch(ng);
        if (r != 0)
            return r == 1 ? 0 : -1;
    }
    return bench_fail("nginx could not bind a free port");
}

int bench_nginx_stop(bench_nginx *ng)
{
    return bench_stop_child(&ng->pid, SIGQUIT, "nginx");
}

bool bench_place_mode_ok(const char *mode)
{
    return strcmp(mode, "same") == 0 || strcmp(mode, "split") == 0 ||
           strcmp(mode, "none") == 0;
}

int bench_place(const char *mode, int *self, int *nginx)
{
    cpu_set_t set;
    int cpus[2], n = 0;

    *self = *nginx = -1;
    if (strcmp(mode, "none") == 0)
        return 0;
    if (sched_getaffinity(0, sizeof(set), &set) < 0)
        return bench_fail_errno("sched_getaffinity");
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    if (strcmp(mode, "split") == 0 && n < 2)
        return bench_fail("\"split\" needs two CPUs");
    *self = cpus[0];
    *nginx = strcmp(mode, "split") == 0 ? cpus[1] : cpus[0];
    return pin(*self) < 0 ? bench_fail_errno("sched_setaffinity") : 0;
}

size_t bench_sink_write(char *data, size_t size, size_t n, void *ctx)
{
    bench_sink *s = ctx;
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

CURL *bench_nginx_status_open(int port, bench_sink *sk)
{
    char url[64];
    CURL *h = curl_easy_init();
    if (h == NULL) {
        bench_fail("out of memory");
        return NULL;
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/status", port);
    curl_easy_setopt(h, CURLOPT_URL, url); /* libcurl copies it */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bench_sink_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, sk);
    return h;
}

int bench_nginx_counters(CURL *status, bench_sink *sk, long *accepts,
                         long *requests)
{
    long code = 0, handled;
    char nul[1] = {'\0'};
    sk->len = 0;
    CURLcode rc = curl_easy_perform(status);
    curl_easy_getinfo(status, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK || code != 200 || bench_sink_write(nul, 1, 1, sk) != 1)
        return bench_fail("stub_status query failed");
    const char *p = strstr(sk->buf, "requests\n");
    if (p == NULL ||
        sscanf(p + 9, " %ld %ld %ld", accepts, &handled, requests) != 3)
        return bench_fail("stub_status answer not understood");
    return 0;
}
