/* SPDX-License-Identifier: MIT */
/*
 * The control wing (main thread): the control socket's accept loop
 * (accept.c), its connections (conn.c) and protocol operations (ops.c).
 */
#ifndef RETRYD_CONTROL_H
#define RETRYD_CONTROL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "daemon.h"

/* Set up the server's connection lists and deadline queues: before any
 * other control_* call. */
void control_init(server *d);
/* Guard the control socket, watched in @p epfd as @p ev says, against
 * running out of descriptors (core/fdlimit.h): after it is watched,
 * before the loop. 0, or a negated errno. */
int control_accept_guard(server *d, int epfd, struct epoll_event ev);
int control_accept(server *d);
void control_ready(server *d, conn *c, uint32_t events);
void control_close_all(server *d);
/* Milliseconds until the next control deadline (-1: none), for
 * epoll_wait(); control_expire() closes what is due. */
int control_next_timeout_ms(const server *d);
void control_expire(server *d);
/* Connections closed during an epoll batch stay allocated (events of the
 * same batch may name them) until control_reap() after the batch. */
bool control_dead(const conn *c);
void control_reap(server *d);
/* Watch a process slot's owner through @p pidfd, so its exit releases the
 * slot. On failure the descriptor stays the caller's to close. */
int daemon_watch_process(server *d, uint32_t slot, int pidfd);
/* A process slot's owner is gone (pidfd) or detached (hang-up). */
void daemon_release_process(server *d, uint32_t slot);

#endif
