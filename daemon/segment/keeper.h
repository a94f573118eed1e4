/* SPDX-License-Identifier: MIT */
/*
 * The segment keeper: a small process that holds the sealed segment memfd
 * while no daemon runs, so a restarted daemon (SIGTERM or kill -9) adopts
 * the balances. docs/segment.md, "Adoption", explains the design.
 */
#ifndef RETRYD_KEEPER_H
#define RETRYD_KEEPER_H

#include <stddef.h>

/*
 * Fork a keeper (in its own session) holding @p memfd as its descriptor 3
 * and make @p link_path a symbolic link to /proc/<keeper>/fd/3. Returns 0
 * once the link is in place, or a negative RETRYD_* code with @p why set.
 * The keeper exits as soon as @p link_path no longer names it: the
 * runtime directory was removed, the link was removed, or a daemon
 * replaced the segment.
 */
int keeper_start(const char *link_path, int memfd, char *why, size_t why_len);

/*
 * The daemon's argument strings (main()'s @p argc and @p argv), which a
 * keeper, forked from it, overwrites with its own name: its command line
 * (/proc/PID/cmdline, what `ps` shows and `pkill -f` matches) then reads
 * "rd-seg-keeper", not the daemon's. So `pkill -f retryd`, like `pkill
 * retryd`, stops the daemon and leaves the keeper, and with it the
 * balances, for the next daemon; stopping the keeper is stopping the
 * balances, and takes its own name. Call once, before any keeper starts.
 */
void keeper_title_area(int argc, char **argv);

#endif
