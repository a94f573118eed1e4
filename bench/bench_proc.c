/* SPDX-License-Identifier: MIT */
/* Process and environment helpers of the benchmarks; see bench_proc.h. */
#include "bench_proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"

volatile sig_atomic_t bench_stop;

int bench_fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", bench_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return -1;
}

int bench_fail_errno(const char *what)
{
    return bench_fail("%s: %s", what, strerror(errno));
}

int64_t bench_now_ms(void)
{
    return bench_now_ns() / 1000000;
}

void bench_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    (void)nanosleep(&ts, NULL); /* an early wake only shortens a poll */
}

static void on_signal(int sig)
{
    (void)sig;
    bench_stop = 1;
}

int bench_install_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    if (sigemptyset(&sa.sa_mask) < 0)
        return bench_fail_errno("sigemptyset");
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (sigaction(sigs[i], &sa, NULL) < 0)
            return bench_fail_errno("sigaction");
    return signal(SIGPIPE, SIG_IGN) == SIG_ERR ? bench_fail_errno("signal") : 0;
}

/* --- child processes ------------------------------------------------------ */

void bench_child_prepare(pid_t parent, int deathsig, const char *log)
{
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT};
    if (prctl(PR_SET_PDEATHSIG, deathsig) < 0 || getppid() != parent)
        _exit(127);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (signal(sigs[i], SIG_DFL) == SIG_ERR)
            _exit(127);
    if (log == NULL)
        return;
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
        _exit(127);
}

int bench_reap(pid_t pid, int timeout_ms, int *status)
{
    int64_t deadline = bench_now_ms() + timeout_ms;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return bench_fail_errno("waitpid");
        if (bench_now_ms() > deadline) {
            bench_fail("pid %d did not exit, killing", (int)pid);
            if (kill(pid, SIGKILL) < 0)
                return bench_fail_errno("kill");
            while ((r = waitpid(pid, status, 0)) < 0 && errno == EINTR)
                ;
            return r == pid ? 0 : bench_fail_errno("waitpid");
        }
        bench_sleep_ms(1);
    }
}

int bench_stop_child(pid_t *pid, int sig, const char *name)
{
    int status = 0;
    if (*pid <= 0)
        return 0;
    if (kill(*pid, sig) < 0 && errno != ESRCH)
        return bench_fail_errno("kill");
    int r = bench_reap(*pid, BENCH_STOP_TIMEOUT_MS, &status);
    *pid = 0;
    if (r == 0 && WIFSIGNALED(status))
        return bench_fail("%s was killed by signal %d", name, WTERMSIG(status));
    if (r == 0 && WEXITSTATUS(status) != 0)
        return bench_fail("%s exited with code %d", name, WEXITSTATUS(status));
    return r;
}

void bench_print_tail(const char *path)
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

/* --- files, ports, the temporary directory -------------------------------- */

int bench_write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "we");
    if (f == NULL)
        return bench_fail_errno(path);
    size_t n = fwrite(text, 1, len, f);
    if (fclose(f) != 0 || n != len)
        return bench_fail_errno(path);
    return 0;
}

int bench_free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
                    getsockname(fd, (struct sockaddr *)&sa, &len) < 0
                ? -1
                : ntohs(sa.sin_port);
    int e = errno;
    (void)close(fd); /* never used */
    errno = e;
    return r;
}
