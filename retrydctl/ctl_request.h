/* SPDX-License-Identifier: MIT */
/*
 * retrydctl request, shared by its two files: the options as curl users
 * type them (ctl_request_opts.c), and the request, its redirects and its
 * output (ctl_request.c).
 */
#ifndef RETRYD_CTL_REQUEST_H
#define RETRYD_CTL_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "retryd/retryd.h"

enum {
    REQ_EXIT_RESPONSE = 0,
    REQ_EXIT_FAILURE = 1,
    REQ_EXIT_AMBIGUOUS = 2,
    /* A failure exits with curl's code for its category where curl has
     * one (req_failure_exit), else 1. */
    REQ_EXIT_MALFORMED = 3,        /* CURLE_URL_MALFORMAT */
    REQ_EXIT_DNS = 6,              /* CURLE_COULDNT_RESOLVE_HOST */
    REQ_EXIT_CONNECT = 7,          /* CURLE_COULDNT_CONNECT */
    REQ_EXIT_READ = 26,            /* CURLE_READ_ERROR: a body's file */
    REQ_EXIT_WRITE = 23,           /* CURLE_WRITE_ERROR: stdout or -o FILE */
    REQ_EXIT_TIMEOUT = 28,         /* CURLE_OPERATION_TIMEDOUT */
    REQ_EXIT_TLS = 35,             /* CURLE_SSL_CONNECT_ERROR */
    REQ_EXIT_LOST = 56,            /* CURLE_RECV_ERROR */
    REQ_EXIT_CERTIFICATE = 60,     /* CURLE_PEER_FAILED_VERIFICATION */
    REQ_EXIT_HTTP_ERROR = 22,      /* -f and a status >= 400, as curl */
    REQ_EXIT_TOO_MANY_REDIRS = 47, /* -L past --max-redirs, as curl */
    /* Not sent: the host's health kept it back (the throttle, or a hold
     * past the deadline), the upstream did not fail. EX_TEMPFAIL: try
     * again later; curl has no such answer (its 75 is long retired). */
    REQ_EXIT_THROTTLED = 75,
    REQ_MAX_HEADERS = 128,
    REQ_MAX_DATA = 64 * 1024 * 1024, /* bytes of -d/--data-binary/--json */
    REQ_DEFAULT_MAX_REDIRS = 10,
    REQ_MAX_OWNED = 8,
    REQ_MAX_RESOLVE = 32,
    REQ_MAX_FORM = 64, /* -F and --form-string parts */
};

typedef struct req_args {
    const char *method, *url, *key, *upstream, *cacert, *control, *output;
    const char *proxy;                        /* -x URL, or NULL */
    const char *resolve[REQ_MAX_RESOLVE + 1]; /* --resolve, NULL-ended */
    size_t n_resolve;
    const char *data_file; /* --data-file: a reopenable file, or '-' */
    const char *write_out; /* -w FORMAT, or NULL */
    char *data;            /* -d, --data-binary, --json, joined; or NULL */
    size_t data_len;
    char *auth; /* "Authorization: Basic ..." from -u, owned */
    /* -b FILE and -c FILE: libcurl's cookie engine (the client's) */
    const char *cookie_file, *cookie_jar;
    char *cookie; /* -b 'N=V', joined with ';' as curl joins them; owned */
    /* -F, --form-string: the MIME body's parts, pointing into form_text
     * (each argument's copy, owned) */
    retryd_mime_part form[REQ_MAX_FORM];
    char *form_text[REQ_MAX_FORM];
    size_t n_form;
    const char *headers[REQ_MAX_HEADERS + 4];
    size_t n_headers;
    retryd_idempotency idem;
    bool idem_declared; /* --safe, --idempotent, ... or a key */
    bool want_key, insecure, json, get_query, head, include, silent;
    bool show_error, verbose, fail, follow;
    bool location_trusted;      /* credentials follow -L to any origin */
    bool fail_with_body;        /* --fail-with-body: -f that writes the body */
    bool remote_name;           /* -O: -o the URL's last path segment */
    bool compressed;            /* --compressed: offered and decoded */
    char *owned[REQ_MAX_OWNED]; /* -A, -e, -b, -O's strings */
    size_t n_owned;
    int64_t deadline_ns, attempt_ns, connect_ns;
    long max_attempts, max_redirs;
    /* --hedge-after D (FIXED), --hedge (ADAPTIVE), --max-hedges N */
    retryd_hedge_mode hedge;
    int64_t hedge_after_ns;
    long max_hedges;
    retryd_http_version version;
} req_args;

/* What -w needs beside the result. */
typedef struct req_writeout {
    const char *url;    /* the last hop's */
    long redirects;     /* followed */
    size_t bytes;       /* of body written */
    const char *budget; /* "shared", or "local (<why>)" */
} req_writeout;

/* -w: @p fmt with its variables filled in, to @p out (ctl_request_write.c). */
void req_write_out(const char *fmt, const retryd_result *r,
                   const req_writeout *w, FILE *out);

/* Parses argv into @p a (zeroed by the caller): 0 to go on, an exit code
 * (64) to return at once, or REQ_DONE after --help or --version (exit 0).
 * Call req_args_free() whatever it returns. */
#define REQ_DONE (-1)
int req_parse(int argc, char **argv, req_args *a);
/* -F @p arg (--form-string when @p literal) as one more part, as curl
 * parses it (ctl_request_form.c): 0, or an exit code with a message. */
int req_add_form(req_args *a, const char *arg, bool literal);
void req_args_free(req_args *a);
void req_usage(FILE *out);

/* Whether the summary and error lines go to stderr (not -s, or -sS). */
static inline bool req_says(const req_args *a, bool is_error)
{
    return !a->silent || (is_error && a->show_error);
}

#endif
