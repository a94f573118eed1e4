/* SPDX-License-Identifier: MIT */
/* rawhttp: see rawhttp.h. */
#include "rawhttp.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int rawhttp_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = RAWHTTP_IO_TIMEOUT_S};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -errno;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;

        close(fd);
        return -e;
    }
    return fd;
}

/* MSG_NOSIGNAL: writing to a connection the server reset must fail the
 * test with EPIPE, not kill the test process with SIGPIPE. */
int rawhttp_send(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int rawhttp_send_str(int fd, const char *s)
{
    return rawhttp_send(fd, s, strlen(s));
}

int rawhttp_send_request(int fd, const char *method, const char *target,
                         const char *headers, const char *body)
{
    char head[4096], clen[64] = "";
    int n, rc;

    if (body)
        snprintf(clen, sizeof clen, "Content-Length: %zu\r\n", strlen(body));
    n = snprintf(head, sizeof head,
                 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s\r\n", method,
                 target, headers ? headers : "", clen);
    if (n < 0 || (size_t)n >= sizeof head)
        return -EMSGSIZE;
    rc = rawhttp_send(fd, head, (size_t)n);
    if (rc == 0 && body)
        rc = rawhttp_send_str(fd, body);
    return rc;
}

int rawhttp_read_head(int fd, struct rawhttp_response *r)
{
    size_t len = 0;

    r->body = NULL;
    r->body_len = 0;
    r->head[0] = '\0';
    while (len < sizeof r->head - 1) {
        ssize_t n = recv(fd, &r->head[len], 1, 0);

        if (n == 0)
            return len == 0 ? -ENODATA : -EPROTO;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        r->head[++len] = '\0';
        if (len >= 4 && memcmp(r->head + len - 4, "\r\n\r\n", 4) == 0)
            return sscanf(r->head, "HTTP/1.1 %d ", &r->status) == 1 ? 0
                                                                    : -EPROTO;
    }
    return -EMSGSIZE;
}

const char *rawhttp_header(const struct rawhttp_response *r, const char *name,
                           char *out, size_t outlen)
{
    size_t nlen = strlen(name);

    /* Every field line follows a CRLF; the status line does not count. */
    for (const char *l = strstr(r->head, "\r\n"); l; l = strstr(l, "\r\n")) {
        l += 2;
        if (strncasecmp(l, name, nlen) == 0 && l[nlen] == ':') {
            const char *v = l + nlen + 1 + strspn(l + nlen + 1, " \t");
            size_t vlen = strcspn(v, "\r");

            snprintf(out, outlen, "%.*s", (int)vlen, v);
            return out;
        }
    }
    return NULL;
}

int rawhttp_read_body(int fd, struct rawhttp_response *r, size_t n)
{
    free(r->body);
    r->body_len = 0;
    if (!(r->body = malloc(n + 1)))
        return -ENOMEM;
    while (r->body_len < n) {
        ssize_t got = recv(fd, r->body + r->body_len, n - r->body_len, 0);

        if (got > 0) {
            r->body_len += (size_t)got;
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        r->body[r->body_len] = '\0';
        return got == 0 ? -EPROTO : -errno;
    }
    r->body[n] = '\0';
    return 0;
}

int rawhttp_read_response(int fd, struct rawhttp_response *r, bool head_request)
{
    char v[32];
    long cl = 0;
    int rc = rawhttp_read_head(fd, r);

    if (rc)
        return rc;
    if (r->status >= 200 && r->status != 204 && r->status != 304 &&
        !head_request) {
        cl = rawhttp_header(r, "Content-Length", v, sizeof v) ? atol(v) : -1;
        if (cl < 0)
            return -EPROTO; /* this client does not do chunked responses */
    }
    return rawhttp_read_body(fd, r, (size_t)cl);
}

int rawhttp_wait_close(int fd)
{
    char buf[512];

    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);

        if (n > 0)
            return 1;
        if (n == 0)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}
