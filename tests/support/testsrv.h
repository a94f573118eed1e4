/* SPDX-License-Identifier: MIT */
/* testsrv: run a test server (retryd-faultsrv, or the HTTP/2 test server)
 * as a real child process and talk to its control port.
 *
 * Server contract:
 *   - binds 127.0.0.1, prints exactly one line "PORT <http> CONTROL <ctl>\n"
 *     on stdout and flushes it. The harness then closes its end of that
 *     pipe: later output must go to stderr (stdout writes would fail).
 *   - exits on SIGTERM, and on EOF of stdin: the harness holds the write
 *     end of a pipe on the child's stdin, so when a test process dies (a
 *     crash, a criterion timeout) the server notices and exits.
 *   - control port: one command per line, one reply line each (COUNT,
 *     REJECTS, LOG, CONNS, ACTIVE, IDLE, WAIT, MODE, RESET, FLIP, plus a
 *     server's own; see srv_control.c).
 *
 * All functions return 0 (or a value >= 0) on success and a negative errno
 * on failure. Every wait is bounded. Not thread-safe per testsrv object. */
#ifndef RETRYD_TESTSRV_H
#define RETRYD_TESTSRV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct testsrv testsrv;

/* Default bound for one control command (connect, send, reply). */
#define TESTSRV_COMMAND_TIMEOUT_MS 10000

/* fork+exec binary_path with the NULL-terminated extra_argv (NULL: none)
 * and wait at most 10 s for its PORT line. -ENOENT/-EACCES/...: exec
 * failed; -ETIMEDOUT: no PORT line in time; -EPROTO: the child exited or
 * printed something else. */
int testsrv_start(const char *binary_path, char *const extra_argv[],
                  testsrv **ret);

/* SIGTERM, wait up to 5 s, then SIGKILL. NULL-safe. */
void testsrv_stop(testsrv *srv);

/* SIGTERM and wait up to timeout_ms for the exit, without freeing (then
 * call testsrv_stop). *wstatus gets the waitpid() status: a test can
 * assert WIFEXITED && WEXITSTATUS == 0, which is how sanitizer reports
 * inside the server (LeakSanitizer exits 23, ThreadSanitizer 66) fail
 * the test instead of scrolling by on stderr. */
int testsrv_terminate(testsrv *srv, int timeout_ms, int *wstatus);

int testsrv_port(const testsrv *srv);
int testsrv_control_port(const testsrv *srv);
pid_t testsrv_pid(const testsrv *srv);

/* Sends one command line (no newline in cmd) on a fresh control
 * connection and stores the reply line, without its newline, in reply.
 * -EMSGSIZE: the reply was truncated to reply_len - 1 bytes. A reply
 * starting with "ERR" still returns 0: the caller inspects it. */
int testsrv_command(testsrv *srv, const char *cmd, char *reply,
                    size_t reply_len);

/* Same with an explicit bound, for commands that wait (IDLE, WAIT). */
int testsrv_command_timeout(testsrv *srv, const char *cmd, char *reply,
                            size_t reply_len, int timeout_ms);

/* Numeric replies; negative errno on failure (-EPROTO: ERR reply). */
/* "<verb> <arg>" (arg NULL: just "<verb>"), for any command that answers
 * a count: a server's own (h2srv: REFUSED id, STREAMS) or ACTIVE. */
long testsrv_number(testsrv *srv, const char *verb, const char *arg);
long testsrv_count(testsrv *srv, const char *id);   /* COUNT id */
long testsrv_rejects(testsrv *srv, const char *id); /* REJECTS id */
long testsrv_conns(testsrv *srv);                   /* CONNS */

/* MODE accept-close|normal; RESET. 0 on "OK". */
int testsrv_mode(testsrv *srv, const char *mode);
int testsrv_reset(testsrv *srv);

/* Bounded waits done by the server (-EPROTO from one without them):
 * wait_count: up to timeout_ms for COUNT id >= n; returns the count
 * reached (which may be < n on timeout).
 * wait_idle: up to timeout_ms until no HTTP connection is open;
 * 0, or -ETIMEDOUT. */
long testsrv_wait_count(testsrv *srv, const char *id, long n, int timeout_ms);
int testsrv_wait_idle(testsrv *srv, int timeout_ms);

/* Monotonic milliseconds: the clock of every deadline here, and of a
 * test's "answered no earlier than" checks. */
int64_t testsrv_now_ms(void);

/* Closes our end of the child's stdin (the server should then exit). */
void testsrv_close_stdin(testsrv *srv);

/* Waits up to timeout_ms for the child to exit and reaps it; *wstatus (if
 * not NULL) gets the waitpid() status. -ETIMEDOUT if still running. */
int testsrv_wait_exit(testsrv *srv, int timeout_ms, int *wstatus);

/* A loopback port where connections are refused right now: binds
 * 127.0.0.1:0, reads the port, closes the socket. Racy by nature:
 * another process may bind the port before the test connects; the window
 * is tiny, the kernel hands out ephemeral ports round-robin-ish. */
int testsrv_unused_port(void);

#endif
