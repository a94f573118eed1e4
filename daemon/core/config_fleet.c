/* SPDX-License-Identifier: MIT */
/*
 * The [fleet] section's parsers (config_fleet.h). Like every parser of the
 * table they check one value and say why they refuse it; the password
 * file is read here, once per load, and what it holds never appears in a
 * reason, a log line or the statistics.
 */
#include "core/config_fleet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "retryd/common.h"
#include "shared/fleet.h"

/* @p n bytes of letters, digits, '.', '-' and '_': a host name, a dotted
 * address, a fleet's name. */
static bool name_chars_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '-' ||
              s[i] == '_'))
            return false;
    return true;
}

/* HOST:PORT or [IPV6]:PORT into @p f. */
static bool parse_tcp(fleet_conf *f, const char *v)
{
    const char *colon = strrchr(v, ':');
    if (colon == NULL || !config_parse_u32(colon + 1, 1, 65535, &f->port))
        return false;
    size_t n = (size_t)(colon - v);
    if (n >= 2 && v[0] == '[' && v[n - 1] == ']') {
        struct in6_addr a;
        char h[INET6_ADDRSTRLEN];
        if (n - 2 >= sizeof(h))
            return false;
        memcpy(h, v + 1, n - 2);
        h[n - 2] = '\0';
        if (inet_pton(AF_INET6, h, &a) != 1)
            return false;
        memcpy(f->host, h, n - 1);
        return true;
    }
    if (n == 0 || n >= FLEET_ADDRESS_MAX || !name_chars_ok(v, n))
        return false;
    memcpy(f->host, v, n);
    f->host[n] = '\0';
    return true;
}

int config_parse_redis(const config_key *k, const char *v, void *field,
                       config *c, char why[CONFIG_WHY_MAX])
{
    fleet_conf *f = &c->fleet;
    (void)k, (void)field;
    if (v == NULL)
        return 0; /* no default: config_fleet_finish() wants it set */
    if (strlen(v) >= sizeof(f->redis))
        return config_refuse(why, "too long");
    f->unix_socket = v[0] == '/';
    if (f->unix_socket) {
        /* sun_path's room, with its NUL. */
        if (strlen(v) >= CONFIG_SOCKET_MAX)
            return config_refuse(why, "'%s': a socket path of at most %d bytes",
                                 v, CONFIG_SOCKET_MAX - 1);
        f->host[0] = '\0';
        f->port = 0;
    } else if (!parse_tcp(f, v)) {
        return config_refuse(
            why,
            "'%s' is not HOST:PORT (a name or an address, [IPV6] "
            "in brackets, a port in 1..65535) or an absolute "
            "socket path",
            v);
    }
    strcpy(f->redis, v);
    return 0;
}

/* Split the password file's first line, @p line, into @p f. */
static int take_secret(fleet_conf *f, char *line, char why[CONFIG_WHY_MAX])
{
    line[strcspn(line, "\r\n")] = '\0';
    char *sp = strchr(line, ' ');
    const char *pass = sp ? sp + 1 : line;
    size_t ulen = sp ? (size_t)(sp - line) : 0;
    if (*pass == '\0' || (sp != NULL && ulen == 0))
        return config_refuse(why,
                             "its first line is not PASSWORD or USER PASSWORD");
    if (ulen >= sizeof(f->user) || strlen(pass) >= sizeof(f->password))
        return config_refuse(why, "a user or password longer than %d bytes",
                             FLEET_SECRET_MAX - 1);
    memcpy(f->user, line, ulen);
    f->user[ulen] = '\0';
    strcpy(f->password, pass);
    return 0;
}

/* Why the open file @p fd cannot be a password file, or NULL. */
static const char *secret_file_refused(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return strerror(errno);
    if (!S_ISREG(st.st_mode))
        return "not a regular file";
    if (st.st_mode & 0007)
        return "open to every user (chmod o-rwx it: a password others can "
               "read is no secret)";
    if (st.st_size > FLEET_PASSWORD_FILE_MAX)
        return "larger than 4 KiB";
    return NULL;
}

int config_parse_password_file(const config_key *k, const char *v, void *field,
                               config *c, char why[CONFIG_WHY_MAX])
{
    char buf[FLEET_PASSWORD_FILE_MAX + 1];
    if (v == NULL)
        return 0;
    if (v[0] != '/' || strlen(v) >= k->size)
        return config_refuse(why, "'%s' is not an absolute path", v);
    int fd = open(v, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return config_refuse(why, "cannot open '%s': %s", v, strerror(errno));
    const char *bad = secret_file_refused(fd);
    ssize_t n = bad ? 0 : read(fd, buf, FLEET_PASSWORD_FILE_MAX);
    int err = errno;
    close(fd);
    if (bad == NULL && n < 0)
        bad = strerror(err);
    if (bad != NULL || n < 0)
        return config_refuse(why, "'%s': %s", v, bad ? bad : "cannot read");
    buf[n] = '\0';
    int r = strlen(buf) != (size_t)n
                ? config_refuse(why, "'%s': a NUL byte in it", v)
                : take_secret(&c->fleet, buf, why);
    explicit_bzero(buf, sizeof(buf));
    if (r < 0) {
        char reason[CONFIG_WHY_MAX];
        memcpy(reason, why, sizeof(reason));
        return config_refuse(why, "'%.60s': %s", v, reason);
    }
    strcpy(field, v);
    return 0;
}

int config_parse_fleet_name(const config_key *k, const char *v, void *field,
                            config *c, char why[CONFIG_WHY_MAX])
{
    (void)c;
    if (v == NULL)
        v = k->dflt_text;
    size_t n = strlen(v);
    if (n < 1 || n > FLEET_NAME_MAX || !name_chars_ok(v, n))
        return config_refuse(
            why, "'%s' is not 1..%d letters, digits, '.', '_' or '-'", v,
            FLEET_NAME_MAX);
    strcpy(field, v);
    return 0;
}

int config_parse_host_id(const config_key *k, const char *v, void *field,
                         config *c, char why[CONFIG_WHY_MAX])
{
    (void)k, (void)c;
    if (v == NULL) {
        *(char *)field = '\0';
        return 0;
    }
    size_t n = strlen(v);
    bool ok = n >= 1 && n <= FLEET_HOST_ID_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)v[i] > 0x20 && (unsigned char)v[i] < 0x7f;
    if (!ok)
        return config_refuse(why,
                             "'%s' is not 1..%d printable bytes without spaces",
                             v, FLEET_HOST_ID_MAX);
    strcpy(field, v);
    return 0;
}

int config_fleet_finish(config *c, int header_line, bool redis_set, char *err,
                        size_t err_len)
{
    fleet_conf *f = &c->fleet;
    f->on = header_line > 0;
    if (!f->on)
        return 0;
    if (!redis_set) {
        snprintf(err, err_len,
                 "%s:%d: [fleet] redis: not set (HOST:PORT or the path of "
                 "Redis's Unix socket; without it remove the section)",
                 c->path, header_line);
        return RETRYD_ECONFIG;
    }
    if (f->host_id[0] == '\0') {
        char host[64] = "localhost";
        if (gethostname(host, sizeof(host)) < 0 || host[0] == '\0')
            strcpy(host, "localhost");
        host[sizeof(host) - 1] = '\0';
        /* Cut to fit: a runtime directory of more than 60 bytes is
         * rare, and host_id sets another name. */
        snprintf(f->host_id, sizeof(f->host_id), "%.63s:%.64s", host,
                 c->runtime_dir);
        for (char *p = f->host_id; *p; p++)
            if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
                *p = '_';
    }
    return 0;
}
