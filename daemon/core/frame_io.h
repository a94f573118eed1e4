/* SPDX-License-Identifier: MIT */
/*
 * The daemon's side of frames (shared/frame.h) on its non-blocking
 * sockets: a request assembled one read at a time, and a reply packed
 * behind its header. Used by the control socket (main thread) and the
 * stats socket (stats thread); nothing here is shared between threads.
 */
#ifndef RETRYD_DAEMON_FRAME_IO_H
#define RETRYD_DAEMON_FRAME_IO_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "shared/frame.h"

/* The request being read: its header, then a body of the announced
 * length (at most RETRYD_FRAME_REQUEST_MAX, checked first). */
typedef struct frame_in {
    uint8_t hdr[RETRYD_FRAME_HEADER];
    size_t hdr_len;
    uint8_t *body;
    size_t body_len, body_got;
} frame_in;

/*
 * One read from @p fd toward @p f: the rest of its header, then the rest
 * of the body it announced, never into the next frame. *ret_n is what
 * the read took (0 when none). Returns 1 when the frame is whole, 0 when
 * more is to come (EAGAIN), RETRYD_EPROTO for a length above
 * RETRYD_FRAME_REQUEST_MAX (nothing allocated for it), RETRYD_ENOMEM, or
 * RETRYD_EIO when the peer is gone (end of file, an error).
 */
int frame_in_read(frame_in *f, int fd, size_t *ret_n);

/* Done with the frame (free its body): ready for the next one. */
void frame_in_reset(frame_in *f);

#endif
