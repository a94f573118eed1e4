/* SPDX-License-Identifier: MIT */
/*
 * Request bodies: the kinds of the specification's replayability table,
 * each able to produce one byte stream per attempt (or, for a one-shot
 * kind, exactly one).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base/macros.h"
#include "exec/body_internal.h"
#include "exec/headers.h"

/* The first version of a reader ends after its length. */
#define READER_MIN_SZ RETRYD_OPTS_MIN(retryd_body_reader, length)
/* The first version of a MIME part ends after no_filename. */
#define MIME_PART_MIN_SZ RETRYD_OPTS_MIN(retryd_mime_part, no_filename)

#define MULTIPART_MAX_PARTS 1024
/* Bytes of a part's name or content type: a part's head must fit mp_reader's
 * buffer whole, or the body on the wire would be malformed. */
#define MULTIPART_TEXT_MAX 200

struct retryd_body {
    retryd_body_kind kind;
    retryd_replayability replay;
    /* bytes, and a DTO once encoded */
    void *data;
    size_t len;
    /* dto */
    const void *dto;
    retryd_body_encode_fn encode;
    /* supplier, publisher factory, file */
    retryd_body_open_fn open;
    void *ctx;
    char *path;
    /* stream, publisher */
    retryd_body_reader reader;
    bool used;
    /* multipart */
    retryd_body **parts;
    char **names, **types;
    size_t n_parts;
    char boundary[40];
    char content_type[80];
    /* mime: the caller's parts, copied (their strings and data in mime_text,
     * freed with the body) */
    retryd_mime_part *mime;
};

static int body_alloc(retryd_body_kind kind, retryd_replayability r,
                      retryd_body **ret)
{
    retryd_body *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return RETRYD_ENOMEM;
    b->kind = kind;
    b->replay = r;
    *ret = b;
    return 0;
}

int retryd_body_new_bytes(const void *data, size_t len, retryd_body **ret)
{
    retryd_body *b;
    if (ret == NULL || (data == NULL && len > 0))
        return RETRYD_EINVAL;
    if (body_alloc(RETRYD_BODY_BYTES, RETRYD_REPLAYABLE, &b) < 0)
        return RETRYD_ENOMEM;
    b->data = malloc(len ? len : 1);
    if (b->data == NULL) {
        free(b);
        return RETRYD_ENOMEM;
    }
    if (len)
        memcpy(b->data, data, len);
    b->len = len;
    *ret = b;
    return 0;
}

int retryd_body_new_dto(const void *dto, retryd_body_encode_fn encode,
                        void *ctx, retryd_body **ret)
{
    retryd_body *b;
    if (ret == NULL || encode == NULL)
        return RETRYD_EINVAL;
    if (body_alloc(RETRYD_BODY_DTO, RETRYD_REPLAYABLE, &b) < 0)
        return RETRYD_ENOMEM;
    b->dto = dto;
    b->encode = encode;
    b->ctx = ctx;
    *ret = b;
    return 0;
}

/* A body that opens a fresh reader per attempt: supplier, factory, file. */
static int new_open_body(retryd_body_kind kind, retryd_replayability r,
                         retryd_body_open_fn open, void *ctx, retryd_body **ret)
{
    retryd_body *b;
    if (ret == NULL || open == NULL)
        return RETRYD_EINVAL;
    if (body_alloc(kind, r, &b) < 0)
        return RETRYD_ENOMEM;
    b->open = open;
    b->ctx = ctx;
    *ret = b;
    return 0;
}

int retryd_body_new_supplier(retryd_body_open_fn open, void *ctx,
                             retryd_body **ret)
{
    return new_open_body(RETRYD_BODY_SUPPLIER, RETRYD_REOPENABLE, open, ctx,
                         ret);
}

/* A file, reopened per attempt. */
typedef struct file_reader {
    int fd;
} file_reader;

static long file_read(void *ctx, void *buf, size_t len)
{
    file_reader *f = ctx;
    for (;;) {
        ssize_t n = read(f->fd, buf, len);
        if (n >= 0 || errno != EINTR)
            return n < 0 ? -1 : (long)n;
    }
}

static void file_close(void *ctx)
{
    file_reader *f = ctx;
    close(f->fd);
    free(f);
}

static int file_open(void *ctx, retryd_body_reader *ret)
{
    const char *path = ctx;
    struct stat st;
    file_reader *f = malloc(sizeof(*f));
    if (f == NULL)
        return RETRYD_ENOMEM;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0 || fstat(f->fd, &st) < 0) {
        if (f->fd >= 0)
            close(f->fd);
        free(f);
        return RETRYD_EIO;
    }
    *ret = (retryd_body_reader){sizeof(*ret), file_read, file_close, f,
                                S_ISREG(st.st_mode) ? st.st_size : -1};
    return 0;
}

int retryd_body_new_file(const char *path, retryd_body **ret)
{
    if (ret == NULL || path == NULL)
        return RETRYD_EINVAL;
    char *copy = strdup(path);
    if (copy == NULL)
        return RETRYD_ENOMEM;
    int r = retryd_body_new_supplier(file_open, copy, ret);
    if (r < 0)
        free(copy);
    else
        (*ret)->path = copy; /* freed with the body */
    return r;
}

static int new_reader_body(retryd_body_kind kind,
                           const retryd_body_reader *reader, retryd_body **ret)
{
    retryd_body *b;
    retryd_body_reader rd;
    if (ret == NULL || reader == NULL)
        return RETRYD_EINVAL;
    int r = RETRYD_COPY_OPTS(&rd, reader, READER_MIN_SZ);
    if (r < 0)
        return r;
    if (rd.read == NULL)
        return RETRYD_EINVAL;
    if (body_alloc(kind, RETRYD_ONE_SHOT, &b) < 0)
        return RETRYD_ENOMEM;
    b->reader = rd;
    *ret = b;
    return 0;
}

int retryd_body_new_stream(const retryd_body_reader *reader, retryd_body **ret)
{
    return new_reader_body(RETRYD_BODY_STREAM, reader, ret);
}

int retryd_body_new_publisher(const retryd_body_reader *reader,
                              retryd_body **ret)
{
    return new_reader_body(RETRYD_BODY_PUBLISHER, reader, ret);
}

int retryd_body_new_publisher_factory(retryd_body_open_fn create, void *ctx,
                                      retryd_replayability declared,
                                      retryd_body **ret)
{
    retryd_replayability r;
    if (retryd_body_kind_replayability(RETRYD_BODY_PUBLISHER_FACTORY, declared,
                                       &r) < 0)
        return RETRYD_EINVAL;
    return new_open_body(RETRYD_BODY_PUBLISHER_FACTORY, r, create, ctx, ret);
}

/* A part's name and type go into quoted header values, whole. */
static bool header_safe(const char *s)
{
    return retryd__field_value_ok(s) && strchr(s, '"') == NULL &&
           strlen(s) <= MULTIPART_TEXT_MAX;
}

/* The caller's arguments: at least one and at most MULTIPART_MAX_PARTS parts,
 * each with a name; names and the given content types header-safe. */
static bool multipart_args_ok(retryd_body *const *parts,
                              const char *const *names,
                              const char *const *content_types, size_t n)
{
    if (parts == NULL || names == NULL || n == 0 || n > MULTIPART_MAX_PARTS)
        return false;
    for (size_t i = 0; i < n; i++) {
        const char *ct = content_types ? content_types[i] : NULL;
        if (parts[i] == NULL || names[i] == NULL || !header_safe(names[i]) ||
            (ct != NULL && !header_safe(ct)))
            return false;
    }
    return true;
}

/* Allocates b's tables of parts, names and types and copies the names and
 * the content types (application/octet-stream where none is given) into
 * them; the parts are left empty. On failure what was allocated stays in b,
 * for retryd_body_free. */
static int multipart_tables(retryd_body *b, const char *const *names,
                            const char *const *content_types, size_t n)
{
    b->parts = calloc(n, sizeof(*b->parts));
    b->names = calloc(n, sizeof(*b->names));
    b->types = calloc(n, sizeof(*b->types));
    if (!b->parts || !b->names || !b->types)
        return RETRYD_ENOMEM;
    b->n_parts = n;
    for (size_t i = 0; i < n; i++) {
        const char *ct = content_types && content_types[i]
                             ? content_types[i]
                             : "application/octet-stream";
        b->names[i] = strdup(names[i]);
        b->types[i] = strdup(ct);
        if (!b->names[i] || !b->types[i])
            return RETRYD_ENOMEM;
    }
    return 0;
}

/* A random boundary (the body's address when the kernel has no entropy
 * yet), and the Content-Type header that announces it. */
static void multipart_boundary(retryd_body *b)
{
    uint64_t rnd[2] = {0, 0};
    if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
        rnd[0] = (uint64_t)(uintptr_t)b;
    snprintf(b->boundary, sizeof(b->boundary), "retryd-%016llx%016llx",
             (unsigned long long)rnd[0], (unsigned long long)rnd[1]);
    snprintf(b->content_type, sizeof(b->content_type),
             "multipart/form-data; boundary=%s", b->boundary);
}

int retryd_body_new_multipart(retryd_body *const *parts,
                              const char *const *names,
                              const char *const *content_types, size_t n,
                              retryd_body **ret)
{
    retryd_body *b = NULL;
    int r = RETRYD_EINVAL;

    if (ret == NULL || !multipart_args_ok(parts, names, content_types, n))
        goto fail;
    r = body_alloc(RETRYD_BODY_MULTIPART, RETRYD_REPLAYABLE, &b);
    if (r == 0)
        r = multipart_tables(b, names, content_types, n);
    if (r < 0)
        goto fail;
    /* The parts join b only now that nothing can fail: until here they are
     * the caller's, freed below on failure. */
    for (size_t i = 0; i < n; i++) {
        b->parts[i] = parts[i];
        /* The algebra of the specification: the weakest part decides. */
        b->replay = retryd_replayability_weakest(
            b->replay, retryd_body_replayability(parts[i]));
    }
    multipart_boundary(b);
    *ret = b;
    return 0;
fail:
    retryd_body_free(b);
    for (size_t i = 0; parts && i < n; i++)
        retryd_body_free(parts[i]);
    return r;
}

/* A copy of @p s (NULL stays NULL); false when out of memory. */
static bool copy_text(const char **dst, const char *s)
{
    *dst = s ? strdup(s) : NULL;
    return s == NULL || *dst != NULL;
}

static void mime_part_free(retryd_mime_part *m)
{
    free((void *)(uintptr_t)m->name);
    free((void *)(uintptr_t)m->data);
    free((void *)(uintptr_t)m->file);
    free((void *)(uintptr_t)m->filename);
    free((void *)(uintptr_t)m->content_type);
}

/* The caller's part @p src, checked, into @p dst with copies of its strings
 * and data (on failure what was copied stays in dst, for mime_part_free). */
static int mime_part_copy(retryd_mime_part *dst, const retryd_mime_part *src)
{
    retryd_mime_part m;
    if (src == NULL)
        return RETRYD_EINVAL;
    int r = RETRYD_COPY_OPTS(&m, src, MIME_PART_MIN_SZ);
    if (r < 0)
        return r;
    /* The type goes into a header line as it is (libcurl escapes the name
     * and the filename, not the type). */
    if ((m.data == NULL) == (m.file == NULL) ||
        (m.content_type && !retryd__field_value_ok(m.content_type)))
        return RETRYD_EINVAL;
    *dst = (retryd_mime_part){.sz = sizeof(*dst),
                              .data_len = m.data ? m.data_len : 0,
                              .no_filename = m.no_filename};
    if (m.data) {
        void *d = malloc(m.data_len ? m.data_len : 1);
        if (d == NULL)
            return RETRYD_ENOMEM;
        memcpy(d, m.data, m.data_len);
        dst->data = d;
    }
    if (!copy_text(&dst->name, m.name) || !copy_text(&dst->file, m.file) ||
        !copy_text(&dst->filename, m.filename) ||
        !copy_text(&dst->content_type, m.content_type))
        return RETRYD_ENOMEM;
    return 0;
}

int retryd_body_new_mime(const retryd_mime_part *const *parts, size_t n,
                         retryd_body **ret)
{
    retryd_body *b = NULL;
    if (ret == NULL || parts == NULL || n == 0 || n > MULTIPART_MAX_PARTS)
        return RETRYD_EINVAL;
    int r = body_alloc(RETRYD_BODY_MIME, RETRYD_REPLAYABLE, &b);
    if (r < 0)
        return r;
    b->mime = calloc(n, sizeof(*b->mime));
    if (b->mime == NULL) {
        free(b);
        return RETRYD_ENOMEM;
    }
    for (; b->n_parts < n && r == 0; b->n_parts++) {
        r = mime_part_copy(&b->mime[b->n_parts], parts[b->n_parts]);
        /* In memory, the same bytes each time; a file is opened again. */
        if (r == 0 && b->mime[b->n_parts].file)
            b->replay = RETRYD_REOPENABLE;
    }
    if (r < 0) {
        retryd_body_free(b);
        return r;
    }
    *ret = b;
    return 0;
}

void retryd_body_free(retryd_body *b)
{
    if (b == NULL)
        return;
    if (b->kind == RETRYD_BODY_MIME) {
        for (size_t i = 0; i < b->n_parts; i++)
            mime_part_free(&b->mime[i]);
        free(b->mime);
        free(b);
        return;
    }
    for (size_t i = 0; i < b->n_parts; i++) {
        retryd_body_free(b->parts[i]);
        free(b->names[i]);
        free(b->types[i]);
    }
    free(b->parts);
    free(b->names);
    free(b->types);
    free(b->data);
    free(b->path);
    free(b);
}

retryd_replayability retryd_body_replayability(const retryd_body *b)
{
    return b ? b->replay : RETRYD_REPLAYABLE; /* no body: nothing to lose */
}

const char *retryd_body_content_type(const retryd_body *b)
{
    return b && b->kind == RETRYD_BODY_MULTIPART ? b->content_type : NULL;
}

/* --- readers ------------------------------------------------------------- */

typedef struct mem_reader {
    const unsigned char *p;
    size_t left;
} mem_reader;

static long mem_read(void *ctx, void *buf, size_t len)
{
    mem_reader *m = ctx;
    size_t n = len < m->left ? len : m->left;
    memcpy(buf, m->p, n);
    m->p += n;
    m->left -= n;
    return (long)n;
}

static int open_memory(const void *data, size_t len, retryd_body_reader *ret)
{
    mem_reader *m = malloc(sizeof(*m));
    if (m == NULL)
        return RETRYD_ENOMEM;
    *m = (mem_reader){data, len};
    *ret = (retryd_body_reader){sizeof(*ret), mem_read, free, m, (int64_t)len};
    return 0;
}

/* Multipart: a sequence of segments (preamble text, part stream, ...). */
typedef struct mp_reader {
    retryd_body *b;
    size_t part; /* the part being sent */
    /* The current head or tail text: the fixed text (65 bytes), the
     * boundary, a name and a type, each at most MULTIPART_TEXT_MAX. */
    char head[2 * MULTIPART_TEXT_MAX + 192];
    size_t head_len, head_off;
    retryd_body_reader cur;
    bool cur_open;
} mp_reader;
_Static_assert(sizeof(((mp_reader *)0)->head) >
                   65 + sizeof(((retryd_body *)0)->boundary) +
                       2 * MULTIPART_TEXT_MAX,
               "a part's head always fits whole");

static void mp_head(mp_reader *m)
{
    retryd_body *b = m->b;
    if (m->part < b->n_parts)
        m->head_len = (size_t)snprintf(
            m->head, sizeof(m->head),
            "%s--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n"
            "Content-Type: %s\r\n\r\n",
            m->part ? "\r\n" : "", b->boundary, b->names[m->part],
            b->types[m->part]);
    else
        m->head_len = (size_t)snprintf(m->head, sizeof(m->head),
                                       "\r\n--%s--\r\n", b->boundary);
    m->head_off = 0;
}

static long mp_read(void *ctx, void *buf, size_t len)
{
    mp_reader *m = ctx;
    for (;;) {
        if (m->head_off < m->head_len) {
            size_t n = m->head_len - m->head_off;
            n = n < len ? n : len;
            memcpy(buf, m->head + m->head_off, n);
            m->head_off += n;
            return (long)n;
        }
        if (m->part >= m->b->n_parts)
            return 0;
        if (!m->cur_open) {
            if (retryd__body_open(m->b->parts[m->part], &m->cur) < 0)
                return -1;
            m->cur_open = true;
        }
        long n = m->cur.read(m->cur.ctx, buf, len);
        if (n != 0)
            return n;
        retryd__body_close(&m->cur);
        m->cur_open = false;
        m->part++;
        mp_head(m);
    }
}

static void mp_close(void *ctx)
{
    mp_reader *m = ctx;
    if (m->cur_open)
        retryd__body_close(&m->cur);
    free(m);
}

static int open_multipart(retryd_body *b, retryd_body_reader *ret)
{
    mp_reader *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return RETRYD_ENOMEM;
    m->b = b;
    mp_head(m);
    /* Sent chunked: a part's length is not always known in advance. */
    *ret = (retryd_body_reader){sizeof(*ret), mp_read, mp_close, m, -1};
    return 0;
}

/*
 * A reader the caller's open callback fills. A caller built against a newer
 * header writes its own, larger struct, so the callback writes into room
 * for one, and the result is checked like any growable struct (docs/abi.md)
 * before it is used; a refused reader is closed.
 */
static int open_supplied(retryd_body *b, retryd_body_reader *ret)
{
    union {
        retryd_body_reader r;
        unsigned char room[256];
    } u;
    memset(&u, 0, sizeof(u));
    u.r.sz = sizeof(u.r);
    int r = b->open(b->ctx, &u.r);
    if (r < 0)
        return r;
    r = u.r.sz <= sizeof(u) ? RETRYD_COPY_OPTS(ret, &u.r, READER_MIN_SZ)
                            : RETRYD_EINVAL;
    if (r == 0 && ret->read == NULL)
        r = RETRYD_EINVAL;
    if (r < 0 && u.r.close != NULL)
        u.r.close(u.r.ctx);
    return r;
}

int retryd__body_open(retryd_body *b, retryd_body_reader *ret)
{
    switch (b->kind) {
    case RETRYD_BODY_BYTES:
        return open_memory(b->data, b->len, ret);
    case RETRYD_BODY_DTO:
        if (b->data == NULL) {
            int r = b->encode(b->dto, b->ctx, &b->data, &b->len);
            if (r < 0 || b->data == NULL) {
                b->data = NULL;
                return r < 0 ? r : RETRYD_EIO;
            }
        }
        return open_memory(b->data, b->len, ret);
    case RETRYD_BODY_SUPPLIER:
    case RETRYD_BODY_PUBLISHER_FACTORY:
        return open_supplied(b, ret);
    case RETRYD_BODY_STREAM:
    case RETRYD_BODY_PUBLISHER:
        if (b->used)
            return RETRYD_EINVAL;
        b->used = true;
        *ret = b->reader;
        return 0;
    case RETRYD_BODY_MULTIPART:
        return open_multipart(b, ret);
    default: /* MIME: libcurl reads it (retryd__body_mime) */
        return RETRYD_EINVAL;
    }
}

void retryd__body_close(retryd_body_reader *r)
{
    if (r->close != NULL)
        r->close(r->ctx);
    r->close = NULL;
    r->read = NULL;
}

/* --- MIME ---------------------------------------------------------------- */

bool retryd__body_is_mime(const retryd_body *b)
{
    return b != NULL && b->kind == RETRYD_BODY_MIME;
}

/* One part into @p part, as curl's -F sets it up: a file's base name is
 * the filename (curl_mime_filedata) unless the part says another or none. */
static int mime_part_set(curl_mimepart *part, const retryd_mime_part *m)
{
    CURLcode rc = CURLE_OK;
    if (m->name)
        rc = curl_mime_name(part, m->name);
    if (rc == CURLE_OK && m->data)
        rc = curl_mime_data(part, m->data, m->data_len);
    /* Unreadable now: curl_mime_filedata says so with CURLE_READ_ERROR. */
    if (rc == CURLE_OK && m->file)
        rc = curl_mime_filedata(part, m->file);
    if (rc == CURLE_OK && (m->filename || m->no_filename))
        rc = curl_mime_filename(part, m->no_filename ? NULL : m->filename);
    if (rc == CURLE_OK && m->content_type)
        rc = curl_mime_type(part, m->content_type);
    return rc == CURLE_OK           ? 0
           : rc == CURLE_READ_ERROR ? RETRYD_EIO
                                    : RETRYD_ENOMEM;
}

int retryd__body_mime(const retryd_body *b, CURL *curl, curl_mime **ret)
{
    curl_mime *mime = curl_mime_init(curl);
    int r = mime ? 0 : RETRYD_ENOMEM;
    for (size_t i = 0; r == 0 && i < b->n_parts; i++) {
        curl_mimepart *part = curl_mime_addpart(mime);
        r = part ? mime_part_set(part, &b->mime[i]) : RETRYD_ENOMEM;
    }
    if (r < 0) {
        curl_mime_free(mime);
        return r;
    }
    *ret = mime;
    return 0;
}
