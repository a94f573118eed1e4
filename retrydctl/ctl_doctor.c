/* SPDX-License-Identifier: MIT */
/*
 * retrydctl doctor: on one screen, whether the identity running it (uid,
 * groups, program) would share the host budget, step by step as a service
 * meets them: the control socket's directory and mode, group membership,
 * the daemon's hello, its allow lists, the segment and a process slot.
 * Each step is `ok` or `FAIL` with the change that fixes it; the last line
 * is the verdict. Exit 0 sharing, 1 not, 64 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <libgen.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_client.h"
#include "ctl_fleet.h"
#include "ctl_opts.h"
#include "ctl_status.h"

#define DOCTOR_EXIT_NOT_SHARING 1
#define DOCTOR_MAX_GROUPS 256

typedef struct doctor {
    const char *socket;
    const char *socket_from; /* where the path came from */
    char user[64];
    uid_t uid;
    gid_t gid;
    gid_t groups[DOCTOR_MAX_GROUPS]; /* this process's supplementary groups */
    int n_groups;
    char reason[320]; /* the first failure, for the verdict */
} doctor;

static const char *user_name(uid_t uid, char *buf, size_t len)
{
    const struct passwd *pw = getpwuid(uid);
    if (pw)
        snprintf(buf, len, "%s", pw->pw_name);
    else
        snprintf(buf, len, "%u", (unsigned)uid);
    return buf;
}

static const char *group_name(gid_t gid, char *buf, size_t len)
{
    const struct group *gr = getgrgid(gid);
    if (gr)
        snprintf(buf, len, "%s", gr->gr_name);
    else
        snprintf(buf, len, "%u", (unsigned)gid);
    return buf;
}

static void ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ok(const char *fmt, ...)
{
    va_list ap;
    printf("ok    ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

/* A failed step: what failed, the fix, and (the first time) the reason the
 * verdict gives. */
static void fail(doctor *d, const char *reason, const char *what,
                 const char *fix)
{
    printf("FAIL  %s\n      fix: %s\n", what, fix);
    if (d->reason[0] == '\0')
        snprintf(d->reason, sizeof(d->reason), "%s", reason);
}

static bool in_session_groups(const doctor *d, gid_t g)
{
    if (d->gid == g)
        return true;
    for (int i = 0; i < d->n_groups; i++)
        if (d->groups[i] == g)
            return true;
    return false;
}

/* Whether the group database puts the user in @p g (a usermod -aG this
 * session started before). */
static bool in_db_groups(const doctor *d, gid_t g)
{
    gid_t list[DOCTOR_MAX_GROUPS];
    int n = DOCTOR_MAX_GROUPS;
    const struct passwd *pw = getpwuid(d->uid);
    if (pw == NULL || getgrouplist(pw->pw_name, pw->pw_gid, list, &n) < 0)
        return false;
    for (int i = 0; i < n; i++)
        if (list[i] == g)
            return true;
    return false;
}

static void print_identity(doctor *d)
{
    char name[64], comm[64] = "retrydctl";
    FILE *f = fopen("/proc/self/comm", "re");

    if (f) {
        if (fgets(comm, sizeof(comm), f))
            comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
    }
    printf("identity: uid %u (%s), gid %u (%s), program %s\n", (unsigned)d->uid,
           d->user, (unsigned)d->gid, group_name(d->gid, name, sizeof(name)),
           comm);
    printf("groups:  ");
    for (int i = 0; i < d->n_groups; i++)
        printf(" %s", group_name(d->groups[i], name, sizeof(name)));
    printf("%s\ncontrol socket: %s (%s)\n\n", d->n_groups ? "" : " (none)",
           d->socket, d->socket_from);
}

/* The fix for a file this identity may not reach for want of group @p g. */
static void group_fix(doctor *d, gid_t g, char *fix, size_t len)
{
    char gname[64];
    group_name(g, gname, sizeof(gname));
    if (in_db_groups(d, g))
        snprintf(fix, len,
                 "%s is in group %s, but this session started before: log "
                 "in again, or restart the service (systemctl restart "
                 "SERVICE)",
                 d->user, gname);
    else
        snprintf(fix, len,
                 "sudo usermod -aG %s %s, then log in again or restart the "
                 "service; the daemon's allow_users and allow_groups are "
                 "checked only after the socket's permissions let %s connect",
                 gname, d->user, d->user);
}

static void describe(const char *what, const char *path, const struct stat *st)
{
    char u[64], g[64];
    ok("%s %s: owner %s, group %s, mode %04o", what, path,
       user_name(st->st_uid, u, sizeof(u)),
       group_name(st->st_gid, g, sizeof(g)), (unsigned)(st->st_mode & 07777));
}

/* A file this identity must reach: it exists, and @p mode access is
 * granted. False (after the FAIL line) otherwise. */
static bool check_path(doctor *d, const char *what, const char *path, int mode)
{
    struct stat st;
    char line[512], fix[512], gname[64];

    if (stat(path, &st) < 0) {
        snprintf(line, sizeof(line), "%s %s: %s", what, path, strerror(errno));
        fail(d,
             errno == ENOENT ? "no daemon (its socket is missing)"
                             : "the socket cannot be reached",
             line,
             errno == ENOENT ? "start the daemon: sudo systemctl start retryd "
                               "(or point --control-socket or "
                               "RETRYD_CONTROL_SOCKET at its socket)"
                             : "a directory above it is closed to this "
                               "identity: let it through (chmod o+x DIR, "
                               "or its group), or move the runtime "
                               "directory");
        return false;
    }
    describe(what, path, &st);
    if (faccessat(AT_FDCWD, path, mode, AT_EACCESS) == 0)
        return true;
    snprintf(line, sizeof(line),
             "%s may not %s %s (not its owner, not in "
             "group %s%s)",
             d->user, mode == X_OK ? "enter" : "connect to", path,
             group_name(st.st_gid, gname, sizeof(gname)),
             in_session_groups(d, st.st_gid) ? ", or the mode forbids it" : "");
    group_fix(d, st.st_gid, fix, sizeof(fix));
    fail(d, "the socket's permissions refuse this identity", line, fix);
    return false;
}

/* The daemon's hello: false (after the FAIL line) when it does not answer
 * or refuses this identity. */
static bool check_hello(doctor *d)
{
    char version[64] = "?", err[CTL_ERR_MAX], line[512], fix[512];
    int r = ctl_hello(d->socket, version, sizeof(version), err, sizeof(err));

    if (r == RETRYD_EPERM) {
        ok("the daemon answers hello");
        snprintf(line, sizeof(line), "the daemon refuses uid %u (%s): %s",
                 (unsigned)d->uid, d->user, err);
        snprintf(fix, sizeof(fix),
                 "in retryd.conf's [retryd] section, add %s to allow_users "
                 "(or one of its groups to allow_groups), then restart the "
                 "daemon: sudo systemctl restart retryd",
                 d->user);
        fail(d, "not authorised by the daemon's allow lists", line, fix);
        return false;
    }
    if (r < 0) {
        snprintf(line, sizeof(line), "no daemon answers on %s: %s", d->socket,
                 err);
        fail(d, "no daemon answers", line,
             "start the daemon: sudo systemctl start retryd (journalctl -u "
             "retryd says why it stopped)");
        return false;
    }
    ok("the daemon answers hello: retryd %s", version);
    ok("this identity is authorised (allow_users, allow_groups or root)");
    return true;
}

/* Attach as a service would: the segment and a process slot. */
static bool check_attach(doctor *d)
{
    retryd_share_status st;
    char line[256];
    int r = ctl_share_probe(d->socket, "retrydctl doctor", &st);

    if (r < 0) {
        snprintf(line, sizeof(line), "cannot open the host: %s",
                 retryd_strerror(r));
        fail(d, line, line, "report this: the library could not start");
        return false;
    }
    switch (st) {
    case RETRYD_SHARE_SHARED:
        ok("segment accepted (sealed, size, header and layout version)");
        ok("a free process slot (this check's own, released on exit)");
        return true;
    case RETRYD_SHARE_NO_PROCESS_SLOT:
        ok("segment accepted (sealed, size, header and layout version)");
        fail(d, "no free process slot",
             "no free process slot: every one is taken, this user holds "
             "its quota, or the daemon is out of file descriptors",
             "raise process_capacity (every slot taken) or "
             "process_slots_per_uid (this user's quota) in retryd.conf's "
             "[retryd] section, or LimitNOFILE in its unit (the daemon's "
             "log says \"file descriptors\"), then restart the daemon: "
             "sudo systemctl restart retryd");
        return false;
    default:
        snprintf(line, sizeof(line), "attach: %s",
                 retryd_share_status_name(st));
        fail(d, line, line, ctl_share_advice(st));
        return false;
    }
}

/*
 * The upstream table, from the stats socket when this identity may read
 * it (skipped, with a note, when not): full, a new upstream's budget
 * would be local (FAIL); registrations refused under upstreams_per_uid
 * are worth a note, not a failure (the names registered still share).
 */
static bool check_upstreams(doctor *d, const ctl_sockets *s)
{
    Retryd__StatsReply *r;
    char err[CTL_ERR_MAX];
    if (ctl_fetch_stats_quiet(s, false, &r, err, sizeof(err)) < 0) {
        printf("note  upstream table not checked (the stats socket: %s)\n",
               err);
        return true;
    }
    size_t n = r->n_upstreams;
    uint32_t cap = r->upstream_capacity;
    uint64_t quota = r->upstreams_refused_quota;
    retryd__stats_reply__free_unpacked(r, NULL);
    if (cap > 0 && n >= cap) {
        fail(d, "the upstream table is full",
             "the upstream table is full: a new upstream's retries are paid "
             "from a local budget in each process, not the host's",
             "raise upstream_capacity in retryd.conf's [retryd] section, or "
             "lower upstreams_per_uid so that one user cannot fill it, then "
             "restart the daemon: sudo systemctl restart retryd");
        return false;
    }
    ok("upstream table: %zu of %u slots registered", n, cap);
    if (quota > 0)
        printf("note  %llu registrations of new upstreams were refused "
               "under upstreams_per_uid since the daemon started (its log "
               "names the user)\n",
               (unsigned long long)quota);
    return true;
}

/*
 * The fleet tier (docs/fleet.md), when the daemon has one: linked (ok), or
 * in fallback, which is a warning, not a failure: the host budget is still
 * shared, on this host's own floors, throttle and holds. True when the
 * fleet is off or linked.
 */
static bool check_fleet(const ctl_sockets *s)
{
    Retryd__StatsReply *r;
    char err[CTL_ERR_MAX], line[1024];
    if (ctl_fetch_stats_quiet(s, false, &r, err, sizeof(err)) < 0)
        return true; /* check_upstreams() said so already */
    bool fallback = ctl_fleet_fallback(r);
    ctl_fleet_summary(r, line, sizeof(line));
    if (line[0] != '\0' && !fallback)
        ok("%s", line);
    else if (fallback)
        printf("warn  %s\n      fix: check that redis %s answers from this "
               "host, and the password_file and the ACL of [fleet] in "
               "retryd.conf; the daemon's log says why (journalctl -u "
               "retryd | grep fleet); it rejoins by itself once Redis "
               "answers\n",
               line, r->fleet->redis);
    retryd__stats_reply__free_unpacked(r, NULL);
    return !fallback;
}

/* Where the control socket's path came from, and the path. */
static void socket_source(doctor *d, const ctl_sockets *s, bool given)
{
    const char *env = getenv(RETRYD_CONTROL_SOCKET_ENV);
    d->socket = s->control;
    d->socket_from = given         ? "--control-socket"
                     : env && *env ? "$" RETRYD_CONTROL_SOCKET_ENV
                                   : "the default";
}

static const ctl_cmd doctor_cmd = {
    "doctor",
    "usage: retrydctl doctor [options]\n"
    "Whether this identity (its uid, groups and program) would share the\n"
    "host budget: each step a service takes to attach, ok or FAIL with the\n"
    "fix, then a verdict. Run it as the service's user to check the service\n"
    "(sudo -u USER retrydctl doctor). Exit 0 sharing, 1 not, 64 "
    "usage.\n\n" CTL_COMMON_HELP,
    "h",
    ctl_common_options,
};

int ctl_doctor_main(int argc, char **argv)
{
    ctl_sockets s, defaults;
    doctor d = {.uid = geteuid(), .gid = getegid()};
    int code = ctl_parse_common(&doctor_cmd, argc, argv, &s, false);

    if (code >= 0)
        return code;
    ctl_sockets_init(&defaults);
    socket_source(&d, &s, s.control != defaults.control);
    user_name(d.uid, d.user, sizeof(d.user));
    d.n_groups = getgroups(DOCTOR_MAX_GROUPS, d.groups);
    if (d.n_groups < 0)
        d.n_groups = 0;
    print_identity(&d);

    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", d.socket);
    bool shares = check_path(&d, "runtime directory", dirname(dir), X_OK) &&
                  check_path(&d, "control socket", d.socket, W_OK) &&
                  check_hello(&d) && check_attach(&d) &&
                  check_upstreams(&d, &s);
    bool fleet_ok = !shares || check_fleet(&s);
    if (shares) {
        printf("\nverdict: this identity shares the host budget%s\n",
               fleet_ok ? ""
                        : " (the fleet tier is in fallback: the host's own "
                          "floors, throttle and holds; see above)");
        return CTL_EXIT_OK;
    }
    printf("\nverdict: this identity would NOT share the host budget: %s\n",
           d.reason);
    return DOCTOR_EXIT_NOT_SHARING;
}
