/* SPDX-License-Identifier: MIT */
/*
 * The [fleet] section's values (docs/fleet.md): where Redis is, who the
 * daemon logs in as, the key namespace and this host's name in it. The
 * table of keys (config_keys.c) names these parsers; config.c calls
 * config_fleet_finish() once the file is read.
 */
#ifndef RETRYD_CONFIG_FLEET_H
#define RETRYD_CONFIG_FLEET_H

#include "core/config_keys.h"

/* A password file holds one line, at most this long. */
#define FLEET_PASSWORD_FILE_MAX 4096

/* redis = HOST:PORT ([IPV6]:PORT) or an absolute path (a Unix socket). */
int config_parse_redis(const config_key *k, const char *value, void *field,
                       config *c, char why[CONFIG_WHY_MAX]);

/* password_file = PATH: read now. Its first line is PASSWORD (Redis's
 * default user) or USER PASSWORD (an ACL user; the password is the rest of
 * the line). Refused when it is not a regular file, longer than
 * FLEET_PASSWORD_FILE_MAX, empty, or open to every user (mode o+rwx):
 * a password others can read is no secret. No reason quotes the file. */
int config_parse_password_file(const config_key *k, const char *value,
                               void *field, config *c,
                               char why[CONFIG_WHY_MAX]);

/* name = NAME: letters, digits, '.', '_' and '-', 1..FLEET_NAME_MAX. */
int config_parse_fleet_name(const config_key *k, const char *value, void *field,
                            config *c, char why[CONFIG_WHY_MAX]);

/* host_id = ID: printable, no space, 1..FLEET_HOST_ID_MAX; unset, it is
 * made when the file is done (config_fleet_finish). */
int config_parse_host_id(const config_key *k, const char *value, void *field,
                         config *c, char why[CONFIG_WHY_MAX]);

/*
 * The section once the file is read: on when it was there (@p header_line,
 * the line of its header, or 0), and then redis must be set (else an error
 * naming the file and the line into @p err); an unset host_id becomes
 * HOSTNAME:RUNTIME_DIR, which no other daemon of the fleet has (one daemon
 * per runtime directory per host). RETRYD_ECONFIG or 0.
 */
int config_fleet_finish(config *c, int header_line, bool redis_set, char *err,
                        size_t err_len);

#endif
