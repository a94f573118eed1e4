/* SPDX-License-Identifier: MIT */
/*
 * retrydctl request's options, with curl's meaning wherever curl has the
 * option: a curl user's command line should do here what it does there,
 * except that retrydctl never infers idempotency from the method (say
 * --safe, --idempotent or --idempotency-key), and every further attempt is
 * decided by the engine and paid from the host budget.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "ctl.h"
#include "ctl_opts.h"
#include "ctl_request.h"

enum {
    O_SAFE = 256,
    O_IDEMPOTENT,
    O_NON_IDEMPOTENT,
    O_KEY,
    O_DEADLINE,
    O_MAX_ATTEMPTS,
    O_ATTEMPT_TIMEOUT,
    O_UPSTREAM,
    O_HTTP2,
    O_H2C,
    O_CACERT,
    O_TRACE,
    O_DATA_FILE,
    O_CONTROL,
    O_HELP,
    O_VERSION,
    O_DATA_BINARY,
    O_JSON,
    O_MAX_TIME,
    O_CONNECT_TIMEOUT,
    O_MAX_REDIRS,
    O_DATA_RAW,
    O_LOCATION_TRUSTED,
    O_URL,
    O_FAIL_WITH_BODY,
    O_DATA_URLENCODE,
    O_RETRY, /* and curl's other --retry-* options: refused */
    O_HTTP11,
    O_RESOLVE,
    O_COMPRESSED,
    O_FORM_STRING,
    O_HEDGE,
    O_HEDGE_AFTER,
    O_MAX_HEDGES,
};

static const struct option options[] = {
    {"request", required_argument, NULL, 'X'},
    {"header", required_argument, NULL, 'H'},
    {"data", required_argument, NULL, 'd'},
    {"data-ascii", required_argument, NULL, 'd'},
    {"data-binary", required_argument, NULL, O_DATA_BINARY},
    {"data-raw", required_argument, NULL, O_DATA_RAW},
    {"json", required_argument, NULL, O_JSON},
    {"data-file", required_argument, NULL, O_DATA_FILE},
    {"get", no_argument, NULL, 'G'},
    {"head", no_argument, NULL, 'I'},
    {"include", no_argument, NULL, 'i'},
    {"output", required_argument, NULL, 'o'},
    {"silent", no_argument, NULL, 's'},
    {"show-error", no_argument, NULL, 'S'},
    {"verbose", no_argument, NULL, 'v'},
    {"fail", no_argument, NULL, 'f'},
    {"location", no_argument, NULL, 'L'},
    {"max-redirs", required_argument, NULL, O_MAX_REDIRS},
    {"location-trusted", no_argument, NULL, O_LOCATION_TRUSTED},
    {"url", required_argument, NULL, O_URL},
    {"write-out", required_argument, NULL, 'w'},
    {"user-agent", required_argument, NULL, 'A'},
    {"referer", required_argument, NULL, 'e'},
    {"cookie", required_argument, NULL, 'b'},
    {"cookie-jar", required_argument, NULL, 'c'},
    {"form", required_argument, NULL, 'F'},
    {"form-string", required_argument, NULL, O_FORM_STRING},
    {"remote-name", no_argument, NULL, 'O'},
    {"fail-with-body", no_argument, NULL, O_FAIL_WITH_BODY},
    {"data-urlencode", required_argument, NULL, O_DATA_URLENCODE},
    {"retry", required_argument, NULL, O_RETRY},
    {"retry-delay", required_argument, NULL, O_RETRY},
    {"retry-max-time", required_argument, NULL, O_RETRY},
    {"retry-connrefused", no_argument, NULL, O_RETRY},
    {"retry-all-errors", no_argument, NULL, O_RETRY},
    {"user", required_argument, NULL, 'u'},
    {"max-time", required_argument, NULL, O_MAX_TIME},
    {"connect-timeout", required_argument, NULL, O_CONNECT_TIMEOUT},
    {"safe", no_argument, NULL, O_SAFE},
    {"idempotent", no_argument, NULL, O_IDEMPOTENT},
    {"non-idempotent", no_argument, NULL, O_NON_IDEMPOTENT},
    {"idempotency-key", optional_argument, NULL, O_KEY},
    {"deadline", required_argument, NULL, O_DEADLINE},
    {"max-attempts", required_argument, NULL, O_MAX_ATTEMPTS},
    {"attempt-timeout", required_argument, NULL, O_ATTEMPT_TIMEOUT},
    {"hedge", no_argument, NULL, O_HEDGE},
    {"hedge-after", required_argument, NULL, O_HEDGE_AFTER},
    {"max-hedges", required_argument, NULL, O_MAX_HEDGES},
    {"upstream", required_argument, NULL, O_UPSTREAM},
    {"http2", no_argument, NULL, O_HTTP2},
    {"h2c", no_argument, NULL, O_H2C},
    {"http1.1", no_argument, NULL, O_HTTP11},
    {"cacert", required_argument, NULL, O_CACERT},
    {"resolve", required_argument, NULL, O_RESOLVE},
    {"proxy", required_argument, NULL, 'x'},
    {"compressed", no_argument, NULL, O_COMPRESSED},
    {"insecure", no_argument, NULL, 'k'},
    {"trace", no_argument, NULL, O_TRACE},
    {"control-socket", required_argument, NULL, O_CONTROL},
    {"help", no_argument, NULL, O_HELP},
    {"version", no_argument, NULL, O_VERSION},
    {NULL, 0, NULL, 0},
};

/* The options of retryd's own, after curl's (req_usage). */
static void usage_retryd(FILE *out);

void req_usage(FILE *out)
{
    fputs(
        "usage: retrydctl request [options] URL\n"
        "curl's options, with curl's meaning:\n"
        "  -X, --request METHOD     method (default GET; POST with data;\n"
        "                           HEAD with -I)\n"
        "  -H, --header 'N: v'      a request header (repeatable)\n"
        "  -d, --data DATA          form data; repeated: joined with '&';\n"
        "                           @FILE or @- reads it, without newlines\n"
        "      --data-binary DATA   the same, @FILE read byte for byte\n"
        "      --data-raw DATA      the same, '@' not special\n"
        "      --json DATA          JSON data (sets Content-Type and Accept)\n"
        "  -G, --get                put the data in the URL's query; GET\n"
        "  -I, --head               HEAD; print the response headers\n"
        "  -i, --include            print the response headers first\n"
        "  -o, --output FILE        the body into FILE, not stdout\n"
        "  -s, --silent             no summary on stderr; -S: errors still\n"
        "  -v, --verbose            the request, the response headers and the\n"
        "                           decision trail, on stderr\n"
        "  -f, --fail               a status >= 400: no body, exit 22\n"
        "  -L, --location           follow redirects, at most --max-redirs\n"
        "                           (default 10; past it exit 47);\n"
        "                           Authorization and Cookie only to the\n"
        "                           first URL's scheme, host and port\n"
        "      --location-trusted   -L, the credentials sent everywhere\n"
        "      --url URL            the URL (one per call)\n"
        "  -A, --user-agent UA      -e, --referer URL: those headers\n"
        "  -b, --cookie 'N=V; ...'  a Cookie header; -b FILE: the cookies of\n"
        "                           FILE, by libcurl's cookie engine, which\n"
        "                           keeps those responses set (across -L)\n"
        "  -c, --cookie-jar FILE    the engine's cookies into FILE at the end\n"
        "  -F, --form 'N=V'         a multipart/form-data part: N=@FILE\n"
        "                           uploads FILE, N=<FILE sends its content;\n"
        "                           ;type=T ;filename=F (repeatable)\n"
        "      --form-string 'N=V'  a part whose value is taken as it is\n"
        "  -O, --remote-name        the body into the URL's file name\n"
        "      --fail-with-body     as -f, and the body is written\n"
        "      --data-urlencode D   curl's forms: content, =content,\n"
        "                           name=content, @file, name@file\n"
        "      --retry N            refused: say --max-attempts N\n"
        "  -w, --write-out FORMAT   after the transfer, on stdout: "
        "%{http_code}\n"
        "                           %{size_download} %{url_effective} %{json}\n"
        "                           %{num_redirects} %{content_type}\n"
        "                           %{http_version} %{retryd_outcome}\n"
        "                           %{retryd_attempts} %{retryd_rule}\n"
        "                           %{retryd_budget}\n"
        "  -u, --user USER:PASS     basic authentication\n"
        "      --max-time SECONDS   the whole call (default 30); also 250ms\n"
        "      --connect-timeout SECONDS\n"
        "  -k, --insecure           trust any certificate; --cacert FILE\n"
        "      --resolve H:P:ADDR   connect to ADDR for host H, port P\n"
        "                           (repeatable)\n"
        "  -x, --proxy URL          through this proxy (never the\n"
        "                           environment's)\n"
        "      --compressed         ask for a compressed response, decode it\n",
        out);
    usage_retryd(out);
}

/* Apart from curl's: one string would pass the 4095 bytes C99 promises. */
static void usage_retryd(FILE *out)
{
    fputs(
        "retryd's own:\n"
        "      --safe               the operation is read-only\n"
        "      --idempotent         executing it twice equals once\n"
        "      --non-idempotent     it must not run twice (the default: the\n"
        "                           method never decides)\n"
        "      --idempotency-key[=K]  send an Idempotency-Key (generated, or\n"
        "                           K), the same on every attempt\n"
        "      --data-file PATH     the body from a file, reopened per\n"
        "                           attempt; '-' is stdin (one shot)\n"
        "      --deadline D         as --max-time\n"
        "      --max-attempts N     (default 3)\n"
        "      --attempt-timeout D  (default 10s)\n"
        "      --hedge-after D      hedge: a second attempt if the first has\n"
        "                           not answered after D, the first answer\n"
        "                           winning (safe or idempotent, replayable\n"
        "                           bodies only; the body is then written\n"
        "                           once complete)\n"
        "      --hedge              the same after the host's p98-like\n"
        "                           latency of the upstream (adaptive)\n"
        "      --max-hedges N       hedges one request may send (1 to 4;\n"
        "                           default 1)\n"
        "      --upstream NAME      the budget's name (default host:port)\n"
        "      --http2 | --h2c      HTTP/2 over TLS (the default, as curl:\n"
        "                           by ALPN, else HTTP/1.1), or cleartext\n"
        "                           HTTP/2; --http1.1: HTTP/1.1 only\n"
        "      --trace              the attempt log on stderr (part of -v)\n"
        "      --control-socket P   the retryd daemon to share budgets with\n"
        "  -h, --help               this help; --version: the version\n"
        "exit: 0 response, 2 ambiguous; a failure: curl's code (6 name, 7\n"
        "      connect, 26 a body's file, 28 timeout, 35 TLS, 56 lost, 60\n"
        "      certificate, else 1); 22 -f and a status >= 400, 23 write\n"
        "      error, 47 too many\n"
        "      redirects, 64 usage, 70 error (retrydctl(1): the table)\n",
        out);
}

static int bad(const char *what, const char *value)
{
    fprintf(stderr, "retrydctl request: invalid %s '%s'\n", what, value);
    return CTL_EXIT_USAGE;
}

/* curl's seconds ("5", "2.5"), or one of retryd's durations ("250ms"). */
static bool parse_seconds(const char *s, int64_t *ret_ns)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end != s && *end == '\0' && errno == 0 && x >= 0 && x < 1e9) {
        *ret_ns = (int64_t)(x * 1e9);
        return true;
    }
    return retryd_duration_parse(s, ret_ns) == 0;
}

/* The whole of @p path ("-": stdin) in a malloc'ed buffer, at most
 * REQ_MAX_DATA bytes; 0 or -1 with a message. */
static int slurp(const char *path, char **ret, size_t *ret_len)
{
    int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    ssize_t n = 0;
    if (fd < 0)
        goto fail;
    do {
        len += (size_t)n;
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            char *more = cap <= REQ_MAX_DATA ? realloc(buf, cap) : NULL;
            if (more == NULL)
                goto fail;
            buf = more;
        }
    } while ((n = read(fd, buf + len, cap - len)) > 0);
    if (n < 0)
        goto fail;
    if (fd != 0)
        close(fd);
    *ret = buf;
    *ret_len = len;
    return 0;
fail:
    fprintf(stderr, "retrydctl request: cannot read '%s': %s\n", path,
            len >= REQ_MAX_DATA ? "over 64 MiB" : strerror(errno));
    if (fd > 0)
        close(fd);
    free(buf);
    return -1;
}

/* Append one data part, as curl does: parts are joined with '&' (--json
 * parts back to back); -d's @file loses its carriage returns and
 * newlines, --data-binary's does not, --data-raw's '@' is literal. */
static int add_data(req_args *a, int opt, const char *arg)
{
    char *part = NULL;
    size_t n;
    bool file = arg[0] == '@' && opt != O_DATA_RAW;
    if (file ? slurp(arg + 1, &part, &n) < 0 : !(part = strdup(arg)))
        return CTL_EXIT_USAGE;
    if (!file)
        n = strlen(part);
    if (file && opt == 'd') {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (part[i] != '\r' && part[i] != '\n')
                part[k++] = part[i];
        n = k;
    }
    bool sep = a->data != NULL && opt != O_JSON;
    char *all = a->data_len + n + 2 <= REQ_MAX_DATA
                    ? realloc(a->data, a->data_len + n + 2)
                    : NULL;
    if (all == NULL) {
        free(part);
        return bad("data", "over 64 MiB");
    }
    if (sep)
        all[a->data_len++] = '&';
    memcpy(all + a->data_len, part, n);
    a->data_len += n;
    all[a->data_len] = '\0';
    a->data = all;
    a->json |= opt == O_JSON;
    free(part);
    return 0;
}

/* -u USER:PASS as an Authorization header (RFC 7617). */
static int add_basic_auth(req_args *a, const char *userpass)
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(userpass), len = sizeof("Authorization: Basic ");
    free(a->auth);
    a->auth = malloc(len + 4 * ((n + 2) / 3));
    if (a->auth == NULL)
        return CTL_EXIT_ERROR;
    char *o = a->auth + strlen(strcpy(a->auth, "Authorization: Basic "));
    const unsigned char *p = (const unsigned char *)userpass;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 |
                     (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *o++ = b64[v >> 18 & 63];
        *o++ = b64[v >> 12 & 63];
        *o++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? b64[v & 63] : '=';
    }
    *o = '\0';
    return 0;
}

/* Keeps @p str (malloc'ed; NULL: out of memory) until req_args_free. */
static char *own(req_args *a, char *str)
{
    if (str == NULL || a->n_owned == REQ_MAX_OWNED) {
        free(str);
        return NULL;
    }
    return a->owned[a->n_owned++] = str;
}

/* "Name: value" as one more request header, as -A and -e add it. */
static int add_named_header(req_args *a, const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 3;
    char *line = own(a, malloc(n));
    if (line == NULL || a->n_headers == REQ_MAX_HEADERS)
        return bad(name, value);
    snprintf(line, n, "%s: %s", name, value);
    a->headers[a->n_headers++] = line;
    return 0;
}

/* -b: as in curl, a "name=value; ..." string joins the request's
 * cookies (libcurl's CURLOPT_COOKIE, in one Cookie header with the
 * engine's), and anything else (no '=') is a file for libcurl's cookie
 * engine, which then keeps what responses set (the client's, across the
 * redirects). */
static int add_cookie(req_args *a, const char *arg)
{
    if (strchr(arg, '=') != NULL) {
        size_t n = a->cookie ? strlen(a->cookie) + 1 : 0;
        char *all = realloc(a->cookie, n + strlen(arg) + 1);
        if (all == NULL)
            return CTL_EXIT_ERROR;
        if (n)
            all[n - 1] = ';'; /* curl's separator, without a blank */
        strcpy(all + n, arg);
        a->cookie = all;
        return 0;
    }
    if (a->cookie_file != NULL)
        return bad("second cookie file (one per call)", arg);
    a->cookie_file = arg;
    return 0;
}

/* curl writes a form's space as '+', not curl_easy_escape's "%20". */
static void plus_for_space(char *enc)
{
    char *w = enc;
    for (const char *r = enc; *r; w++)
        if (strncmp(r, "%20", 3) == 0) {
            *w = '+';
            r += 3;
        } else {
            *w = *r++;
        }
    *w = '\0';
}

/* --data-urlencode, curl's five forms: "content", "=content",
 * "name=content", "@file", "name@file"; the content (or the file's)
 * percent-encoded, the name as given, joined to the rest with '&'. */
static int add_urlencoded(req_args *a, const char *arg)
{
    const char *p = strpbrk(arg, "=@");
    char *content = NULL, *enc = NULL;
    size_t n = 0, name_len = p ? (size_t)(p - arg) : 0;
    int r = CTL_EXIT_USAGE;
    if (p && *p == '@') {
        if (slurp(p + 1, &content, &n) < 0)
            return CTL_EXIT_USAGE;
    } else {
        content = strdup(p ? p + 1 : arg);
        n = content ? strlen(content) : 0;
    }
    if (content && (enc = curl_easy_escape(NULL, content, (int)n)) != NULL) {
        plus_for_space(enc);
        size_t len = name_len + strlen(enc) + 2;
        char *part = malloc(len);
        if (part) {
            snprintf(part, len, "%.*s%s%s", (int)name_len, arg,
                     name_len ? "=" : "", enc);
            r = add_data(a, O_DATA_RAW, part);
            free(part);
        }
    }
    curl_free(enc);
    free(content);
    return r;
}

/* curl's retries are the decision engine's here: one line that says what
 * to type instead. */
static int refuse_retry(const char *name)
{
    fprintf(stderr,
            "retrydctl request: --%s: retries are retryd's decision; say "
            "--max-attempts N (with --safe or --idempotent when repeating "
            "is harmless)\n",
            name);
    return CTL_EXIT_USAGE;
}

/* The options that only set a flag. NULL for any other. */
static bool *flag_of(req_args *a, int opt)
{
    switch (opt) {
    case 'G':
        return &a->get_query;
    case 'I':
        return &a->head;
    case 'i':
        return &a->include;
    case 's':
        return &a->silent;
    case 'S':
        return &a->show_error;
    case 'v':
        return &a->verbose;
    case 'f':
        return &a->fail;
    case 'L':
        return &a->follow;
    case 'O':
        return &a->remote_name;
    case O_FAIL_WITH_BODY:
        a->fail = true;
        return &a->fail_with_body;
    case O_LOCATION_TRUSTED:
        a->follow = true; /* as curl: it implies -L */
        return &a->location_trusted;
    case 'k':
        return &a->insecure;
    case O_COMPRESSED:
        return &a->compressed;
    case O_TRACE:
        return &a->verbose; /* the trail is part of -v */
    default:
        return NULL;
    }
}

/* The options that only keep their argument. NULL for any other. */
static const char **string_of(req_args *a, int opt)
{
    switch (opt) {
    case 'X':
        return &a->method;
    case 'o':
        return &a->output;
    case 'w':
        return &a->write_out;
    case O_DATA_FILE:
        return &a->data_file;
    case O_UPSTREAM:
        return &a->upstream;
    case O_CACERT:
        return &a->cacert;
    case 'x':
        return &a->proxy;
    case 'c':
        return &a->cookie_jar;
    case O_CONTROL:
        return &a->control;
    default:
        return NULL;
    }
}

static int set_idempotency(req_args *a, int opt, const char *arg)
{
    a->idem_declared = true;
    if (opt == O_KEY) {
        a->want_key = true;
        a->key = arg;
        return 0;
    }
    a->idem = opt == O_SAFE         ? RETRYD_IDEMPOTENCY_SAFE
              : opt == O_IDEMPOTENT ? RETRYD_IDEMPOTENCY_IDEMPOTENT
                                    : RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
    return 0;
}

static int set_number(req_args *a, int opt, const char *arg)
{
    switch (opt) {
    case O_DEADLINE:
    case O_MAX_TIME:
        return parse_seconds(arg, &a->deadline_ns) ? 0 : bad("time", arg);
    case O_ATTEMPT_TIMEOUT:
        return parse_seconds(arg, &a->attempt_ns) ? 0 : bad("time", arg);
    case O_CONNECT_TIMEOUT:
        return parse_seconds(arg, &a->connect_ns) ? 0 : bad("time", arg);
    case O_MAX_ATTEMPTS:
        return retryd__parse_long(arg, 1, 100, &a->max_attempts)
                   ? 0
                   : bad("attempt count", arg);
    case O_HEDGE_AFTER:
        a->hedge = RETRYD_HEDGE_FIXED;
        return parse_seconds(arg, &a->hedge_after_ns) && a->hedge_after_ns > 0
                   ? 0
                   : bad("hedge delay", arg);
    case O_MAX_HEDGES:
        return retryd__parse_long(arg, 1, RETRYD_MAX_HEDGES, &a->max_hedges)
                   ? 0
                   : bad("hedge count", arg);
    default: /* O_MAX_REDIRS */
        return retryd__parse_long(arg, 0, 1000, &a->max_redirs)
                   ? 0
                   : bad("redirect count", arg);
    }
}

static int parse_one(req_args *a, int opt, const char *arg)
{
    bool *flag = flag_of(a, opt);
    const char **str = string_of(a, opt);
    if (flag != NULL) {
        *flag = true;
        return 0;
    }
    if (str != NULL) {
        *str = arg;
        return 0;
    }
    switch (opt) {
    case 'H':
        if (a->n_headers == REQ_MAX_HEADERS)
            return bad("header count", arg);
        a->headers[a->n_headers++] = arg;
        return 0;
    case O_RESOLVE:
        if (a->n_resolve == REQ_MAX_RESOLVE)
            return bad("--resolve count", arg);
        a->resolve[a->n_resolve++] = arg;
        return 0;
    case 'd':
    case O_DATA_BINARY:
    case O_DATA_RAW:
    case O_JSON:
        return add_data(a, opt, arg);
    case 'u':
        return add_basic_auth(a, arg);
    case 'A':
        return add_named_header(a, "User-Agent", arg);
    case 'e':
        return add_named_header(a, "Referer", arg);
    case 'b':
        return add_cookie(a, arg);
    case 'F':
    case O_FORM_STRING:
        return req_add_form(a, arg, opt == O_FORM_STRING);
    case O_DATA_URLENCODE:
        return add_urlencoded(a, arg);
    case O_URL:
        if (a->url != NULL)
            return bad("second URL (one per call)", arg);
        a->url = arg;
        return 0;
    case O_SAFE:
    case O_IDEMPOTENT:
    case O_NON_IDEMPOTENT:
    case O_KEY:
        return set_idempotency(a, opt, arg);
    case O_HEDGE:
        a->hedge = RETRYD_HEDGE_ADAPTIVE;
        return 0;
    case O_HTTP2:
    case O_H2C:
    case O_HTTP11:
        a->version = opt == O_HTTP2 ? RETRYD_HTTP_2_TLS
                     : opt == O_H2C ? RETRYD_HTTP_2_PRIOR_KNOWLEDGE
                                    : RETRYD_HTTP_1_1;
        return 0;
    default:
        return set_number(a, opt, arg);
    }
}

static bool has_header(const req_args *a, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < a->n_headers; i++)
        if (strncasecmp(a->headers[i], name, n) == 0 && a->headers[i][n] == ':')
            return true;
    return false;
}

/* What curl adds by itself: the content type of data, JSON's Accept, the
 * credentials of -u; and the method data implies. */
static void complete(req_args *a)
{
    bool body = (a->data && !a->get_query) || a->data_file || a->n_form;
    if (a->method == NULL)
        a->method = a->head ? "HEAD" : body ? "POST" : "GET";
    if (a->data && !a->get_query && !has_header(a, "Content-Type"))
        a->headers[a->n_headers++] = a->json ? "Content-Type: application/json"
                                             : "Content-Type: application/"
                                               "x-www-form-urlencoded";
    if (a->json && !has_header(a, "Accept"))
        a->headers[a->n_headers++] = "Accept: application/json";
    if (a->auth && !has_header(a, "Authorization"))
        a->headers[a->n_headers++] = a->auth;
    a->headers[a->n_headers] = NULL;
}

/* -O: the URL's last path segment, as curl names the file; exit 23 as
 * curl when there is none. */
static int remote_name(req_args *a)
{
    CURLU *u = curl_url();
    char *path = NULL;
    const char *name = NULL;
    if (u && curl_url_set(u, CURLUPART_URL, a->url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK)
        name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (name && *name && !a->output)
        a->output = own(a, strdup(name));
    curl_free(path);
    curl_url_cleanup(u);
    if (a->output == NULL) {
        fprintf(stderr, "retrydctl request: -O: no file name in '%s'\n",
                a->url);
        return REQ_EXIT_WRITE;
    }
    return 0;
}

/* What the options say together: bodies that exclude each other, -O's
 * file name; then what curl adds by itself (complete). */
static int check_args(req_args *a)
{
    int r;
    if (a->data && a->data_file)
        return bad("combination", "data with --data-file");
    /* curl: "You can only select one HTTP request method!" */
    if (a->n_form && (a->data || a->data_file || a->get_query || a->head))
        return bad("combination", "-F with -d, --data-file, -G or -I");
    if (a->remote_name && (r = remote_name(a)) != 0)
        return r;
    if (a->max_hedges && a->hedge == RETRYD_HEDGE_OFF)
        return bad("combination", "--max-hedges without --hedge or "
                                  "--hedge-after");
    complete(a);
    return 0;
}

int req_parse(int argc, char **argv, req_args *a)
{
    int opt, r;
    a->idem = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
    a->version = RETRYD_HTTP_2_TLS; /* curl's default: h2 by ALPN on TLS */
    a->max_redirs = REQ_DEFAULT_MAX_REDIRS;
    optind = 1;
    int index = 0;
    while ((opt = getopt_long(argc, argv, "X:H:d:GIio:sSvfLu:khA:e:b:c:F:Ow:x:",
                              options, &index)) != -1) {
        if (opt == O_HELP || opt == 'h' || opt == O_VERSION) {
            if (opt != O_VERSION)
                req_usage(stdout);
            else
                ctl_print_version(stdout);
            return REQ_DONE;
        }
        if (opt == '?')
            return CTL_EXIT_USAGE;
        if (opt == O_RETRY)
            return refuse_retry(options[index].name);
        if ((r = parse_one(a, opt, optarg)) != 0)
            return r;
    }
    if (optind < argc && a->url == NULL)
        a->url = argv[optind++];
    if (optind < argc)
        return bad("second URL (one per call)", argv[optind]);
    if (a->url == NULL) {
        req_usage(stderr);
        return CTL_EXIT_USAGE;
    }
    return check_args(a);
}

void req_args_free(req_args *a)
{
    for (size_t i = 0; i < a->n_owned; i++)
        free(a->owned[i]);
    for (size_t i = 0; i < a->n_form; i++)
        free(a->form_text[i]);
    free(a->data);
    free(a->auth);
    free(a->cookie);
}
