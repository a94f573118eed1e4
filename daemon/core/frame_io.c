/* SPDX-License-Identifier: MIT */
#include "core/frame_io.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "retryd/common.h"

int frame_in_read(frame_in *f, int fd, size_t *ret_n)
{
    bool in_header = f->hdr_len < RETRYD_FRAME_HEADER;
    uint8_t *at = in_header ? f->hdr + f->hdr_len : f->body + f->body_got;
    size_t want = in_header ? RETRYD_FRAME_HEADER - f->hdr_len
                            : f->body_len - f->body_got;
    *ret_n = 0;
    ssize_t n = read(fd, at, want);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0)
        return RETRYD_EIO;
    *ret_n = (size_t)n;
    if (!in_header) {
        f->body_got += (size_t)n;
        return f->body_got == f->body_len;
    }
    f->hdr_len += (size_t)n;
    if (f->hdr_len < RETRYD_FRAME_HEADER)
        return 0;
    const uint8_t *body;
    size_t used;
    if (retryd__frame_decode(f->hdr, f->hdr_len, RETRYD_FRAME_REQUEST_MAX,
                             &body, &f->body_len, &used) < 0)
        return RETRYD_EPROTO;
    if (f->body_len > 0 && (f->body = malloc(f->body_len)) == NULL)
        return RETRYD_ENOMEM;
    return f->body_len == 0;
}

void frame_in_reset(frame_in *f)
{
    free(f->body);
    *f = (frame_in){0};
}
