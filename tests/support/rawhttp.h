/* SPDX-License-Identifier: MIT */
/* rawhttp: a deliberately dumb HTTP/1.1 client on plain sockets, for tests
 * that must see exactly what a server sends (status lines, interim 1xx,
 * FIN versus RST) without libcurl interpreting it.
 *
 * Functions return 0 (or a value >= 0) or a negative errno. Sockets get
 * SO_RCVTIMEO/SO_SNDTIMEO, so every blocking call is bounded: a timeout
 * shows up as -EAGAIN. */
#ifndef RETRYD_RAWHTTP_H
#define RETRYD_RAWHTTP_H

#include <stdbool.h>
#include <stddef.h>

#define RAWHTTP_IO_TIMEOUT_S 10

struct rawhttp_response {
    int status;
    char head[16384]; /* status line and header fields, NUL-terminated */
    char *body;       /* malloc'd, NUL-terminated; the caller frees it */
    size_t body_len;
};

/* Connects to 127.0.0.1:port; returns the socket or -errno. */
int rawhttp_connect(int port);

int rawhttp_send(int fd, const void *buf, size_t len);
int rawhttp_send_str(int fd, const char *s);

/* Sends "<method> <target> HTTP/1.1", a Host field, `headers` (extra
 * CRLF-terminated lines, may be NULL) and, when body is not NULL, a
 * Content-Length and the body. */
int rawhttp_send_request(int fd, const char *method, const char *target,
                         const char *headers, const char *body);

/* Reads a response head byte by byte, so that what follows it stays in
 * the socket. -ENODATA: EOF before any byte. Sets r->body to NULL. */
int rawhttp_read_head(int fd, struct rawhttp_response *r);

/* Reads up to n body bytes into a new r->body; on EOF (-EPROTO) or error
 * before n, r->body and r->body_len hold what did arrive. */
int rawhttp_read_body(int fd, struct rawhttp_response *r, size_t n);

/* Head, then a Content-Length body (none for 1xx, 204, 304, or when
 * head_request). A 1xx is returned like any response. */
int rawhttp_read_response(int fd, struct rawhttp_response *r,
                          bool head_request);

/* Value of header field `name` (case-insensitive) copied into out, or
 * NULL when absent. */
const char *rawhttp_header(const struct rawhttp_response *r, const char *name,
                           char *out, size_t outlen);

/* Reads until the server ends the connection: 0 on EOF (FIN), -ECONNRESET
 * on a reset, -EAGAIN on timeout, 1 if any byte arrived instead. */
int rawhttp_wait_close(int fd);

#endif
