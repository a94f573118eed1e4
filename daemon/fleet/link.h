/* SPDX-License-Identifier: MIT */
/*
 * The fleet wing's connection to Redis (docs/fleet.md). hiredis formats
 * the commands and parses the replies; this file owns the socket, so that
 * every connect, write and read is bounded by one deadline and the replies
 * by a byte cap: the fleet thread never waits longer than it decided to,
 * and what a Redis (or the hosts writing into it) sends cannot make the
 * daemon allocate without bound.
 */
#ifndef RETRYD_FLEET_LINK_H
#define RETRYD_FLEET_LINK_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "core/config.h"

/* Commands of one exchange, formatted back to back. */
typedef struct fleet_pipe {
    char *buf;
    size_t len, cap;
    size_t n; /* commands, so replies expected */
} fleet_pipe;

/* Append one command (@p argc words, NUL-terminated). 0 or RETRYD_ENOMEM. */
int fleet_pipe_add(fleet_pipe *p, int argc, const char **argv);
void fleet_pipe_reset(fleet_pipe *p); /* empties it, keeps its memory */
void fleet_pipe_free(fleet_pipe *p);

/*
 * hiredis's reader, with one bound more: an array of more than
 * FLEET_REPLY_ELEMENTS_MAX elements is a protocol error. hiredis 0.14
 * allocates an array for the count its header announces, before any
 * element arrives, so "*400000000" alone would cost gigabytes; no reply
 * of the fleet's is longer than an interval's hash (a dozen). NULL when
 * out of memory.
 */
#define FLEET_REPLY_ELEMENTS_MAX 64
redisReader *fleet_reader_new(void);

typedef struct fleet_link {
    int fd; /* -1: not connected */
    redisReader *reader;
    /* Readable: give up whatever is waiting (RETRYD_ECANCELED); -1 none.
     * How the daemon stops the fleet thread without waiting out a sync. */
    int abort_fd;
} fleet_link;

#define FLEET_LINK_INIT                                                        \
    {                                                                          \
        .fd = -1, .reader = NULL, .abort_fd = -1                               \
    }

/*
 * Connect to @p c's Redis and log in (AUTH, when a password is set), by
 * @p deadline_ns (CLOCK_MONOTONIC). A host name is resolved first, with the
 * resolver's own timeouts (the thread that calls this is the fleet's: no
 * client waits on it). 0; RETRYD_EPERM when Redis refused the login (a
 * wrong password, an unknown or disabled user); RETRYD_ETIMEDOUT or
 * RETRYD_EIO when it could not be reached. @p err says which and why.
 */
int fleet_link_open(fleet_link *l, const fleet_conf *c, uint64_t deadline_ns,
                    char *err, size_t err_len);
/* @p l's abort_fd is kept by fleet_link_open() and fleet_link_close(). */

/* Close it; a closed link is left as FLEET_LINK_INIT. */
void fleet_link_close(fleet_link *l);

/*
 * Send @p p and read its p->n replies into @p replies (each to be freed
 * with freeReplyObject()), all by @p deadline_ns and at most @p max_bytes
 * of replies. 0, RETRYD_ETIMEDOUT, RETRYD_EIO (the connection failed or
 * closed) or RETRYD_EPROTO (a malformed stream, or more than @p max_bytes):
 * after an error the link is no longer usable (close it), and no reply is
 * left to free.
 */
int fleet_link_exchange(fleet_link *l, const fleet_pipe *p,
                        redisReply **replies, uint64_t deadline_ns,
                        size_t max_bytes, char *err, size_t err_len);

/* Whether Redis's error text @p msg refuses this login or its rights
 * (WRONGPASS, NOAUTH, NOPERM, an AUTH Redis does not expect): a
 * configuration to fix, not a fault to ride out. */
bool fleet_refusal(const char *msg);

#endif
